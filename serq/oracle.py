"""The vLLM oracle's scenarios as instances of `examples/oracle/vllm_request.sq`.

A scenario (`tests/data/oracle/…/*.json`) gives the scheduler's configuration,
the requests (or multi-turn sessions) with their arrival steps, and what vLLM
did. Its serQ instance is the oracle program with the configuration as inputs
and the requests as an ordered trace: one trace session per request (or per
conversation), its turns in order.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from serq.errors import SerqError

# The oracle program ships with the package (a plain install runs `serq oracle`);
# examples/oracle/vllm_request.sq is a link to it.
ORACLE_PROGRAM = Path(__file__).resolve().parent / "programs" / "vllm_request.sq"
TRACE_COLUMNS = ("session", "arrive", "new", "out", "think", "forced")


@dataclass(frozen=True)
class TurnSpec:
    new: int
    out: int
    think: int = 0
    forced: bool = False


@dataclass(frozen=True)
class Expected:
    """What vLLM did with one request. `first`/`last` are None when vLLM never produced that token
    within the scenario's steps (a file with `did_not_finish: true`)."""
    first: int | None
    last: int | None
    preemptions: int
    cached: int | None  # num_cached_tokens, in the prefix-cache sets


@dataclass
class Scenario:
    name: str
    path: Path
    config: dict
    sessions: list[tuple[int, list[TurnSpec]]]  # (arrive step, turns)
    ids: dict[tuple[int, int], str] = field(default_factory=dict)  # (session, turn) -> the scenario's id
    expected: dict[tuple[int, int], Expected] = field(default_factory=dict)
    steps: int | None = None  # how many times the driver called schedule() (None: not recorded)
    did_not_finish: bool = False
    trace: list["StepTrace"] | None = None  # per step: the tokens scheduled per request, the free blocks


def scenario_paths(root: str | Path, sets: str = "vllm-v1*") -> list[Path]:
    """The scenario files of the shared sets named by `sets` (a folder, or a glob of folders) under
    `root` (tests/data/oracle), without the sets' SUMMARY.json."""
    return sorted(p for p in Path(root).glob(f"{sets}/*.json") if p.name != "SUMMARY.json")


class SummaryFile(SerqError):
    """The file is a scenario set's SUMMARY.json, not a scenario: `serq oracle` skips it."""


# ------------------------------------------------------------------ the file format, validated
class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


# Bounds far above any scheduler scenario, so that no file makes a run allocate or step without end
Count = Annotated[int, Field(ge=0, le=10**9)]
Positive = Annotated[int, Field(ge=1, le=10**9)]
Tokens = Annotated[int, Field(ge=1, le=10**6)]


class ScenarioConfig(_Strict):
    block_size: Positive
    num_blocks: Annotated[int, Field(ge=2, le=10**7)]  # one is vLLM's null block
    max_num_batched_tokens: Positive
    max_num_seqs: Positive
    long_prefill_token_threshold: Count = 0
    enable_prefix_caching: bool = False
    max_model_len: Positive | None = None


class RequestSpec(_Strict):
    id: str
    prompt: Tokens
    out: Tokens
    arrive: Count


class TurnFile(_Strict):
    new: Annotated[int, Field(ge=0, le=10**6)]
    out: Tokens
    think: Count = 0
    miss: bool = False


class SessionSpec(_Strict):
    id: str
    arrive: Count
    turns: Annotated[list[TurnFile], Field(min_length=1, max_length=10_000)]


class ScenarioInputs(_Strict):
    name: str | None = None
    description: str = ""
    config: ScenarioConfig
    max_steps: Count | None = None
    requests: Annotated[list[RequestSpec], Field(min_length=1, max_length=100_000)] | None = None
    sessions: Annotated[list[SessionSpec], Field(min_length=1, max_length=100_000)] | None = None

    @model_validator(mode="after")
    def _one_form(self):
        if (self.requests is None) == (self.sessions is None):
            raise ValueError("a scenario gives either `requests` or `sessions`")
        return self


class ResultSpec(_Strict):
    first_token_step: Count | None
    last_token_step: Count | None
    preemptions: Count
    num_cached_tokens: Count | None = None
    prompt_len: Positive | None = None


class StepTrace(_Strict):
    """One step of vLLM's trace: the tokens scheduled per request, then the KV pool's free blocks after
    scheduling (cached blocks with no holder count as free) and the cached blocks it evicted."""
    step: Count
    scheduled: dict[str, Positive]
    free_blocks: Count | None = None
    evicted: Count | None = None


class ScenarioOutput(_Strict):
    schedule_calls: Count | None = None
    results: dict[str, ResultSpec]
    trace: list[StepTrace] | None = None


class ScenarioFile(_Strict):
    scenario: ScenarioInputs
    output: ScenarioOutput
    did_not_finish: bool = False


def _location(loc: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "(top level)"


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate an oracle scenario file; a file that is not one is refused with the JSON path
    of the first field at fault."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SerqError(f"no such scenario file: {path}", None, "usage") from None
    except IsADirectoryError:
        raise SerqError(f"{path}: a folder, not a scenario file", None, "usage") from None
    except UnicodeDecodeError:
        from serq.errors import read_source
        read_source(path, "scenario", "usage")  # refused at the byte's line and column
        raise  # pragma: no cover - read_source refuses what read_text did
    except OSError as e:
        raise SerqError(f"{path}: {e.strerror}", None, "usage") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SerqError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}", None, "usage") from None
    except (RecursionError, ValueError) as e:  # nesting past the parser's depth, a number too long
        where = ""
        if isinstance(e, RecursionError):
            from serq.jsondepth import too_deep
            where = f": {too_deep(text)}"
        raise SerqError(f"{path}: not a JSON file serQ reads ({type(e).__name__}: {str(e)[:200]}){where}", None,
                        "usage") from None
    if isinstance(data, dict) and "scenario" not in data and "scenarios" in data:
        raise SummaryFile(f"{path}: a summary of a scenario set, not a scenario (give its scenario files)",
                          None, "usage")
    try:
        doc = ScenarioFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        msg = "should be an object" if err["type"] in ("model_type", "dict_type") else err["msg"]
        raise SerqError(f"{path}: not an oracle scenario: {_location(err['loc'])}: {msg}", None,
                        "usage") from None
    except RecursionError:
        raise SerqError(f"{path}: not an oracle scenario: nested too deeply", None, "usage") from None
    return _scenario(doc, path)


def _scenario(doc: ScenarioFile, path: Path) -> Scenario:
    sc, out = doc.scenario, doc.output
    results = out.results
    scenario = Scenario(sc.name or path.stem, path, sc.config.model_dump(), [],
                        steps=out.schedule_calls, did_not_finish=doc.did_not_finish,
                        trace=out.trace)
    if sc.requests is not None:
        for i, r in enumerate(sc.requests):
            scenario.sessions.append((r.arrive, [TurnSpec(r.prompt, r.out)]))
            scenario.ids[(i, 0)] = r.id
    else:
        for i, s in enumerate(sc.sessions):
            turns = []
            context = 0  # the tokens the turn's prompt carries from the turns before it
            for j, t in enumerate(s.turns):
                rid = f"{s.id}t{j}"
                new = t.new
                r = results.get(rid)
                if r is not None and r.prompt_len is not None:
                    # vLLM's prompt length is the truth: a forced miss puts a nonce token at the head of
                    # its prompt, which that turn and every later one carry
                    new = r.prompt_len - context
                    if new not in (t.new, t.new + 1) or (new != t.new and not t.miss):
                        raise SerqError(f"{path}: results.{rid}.prompt_len is {r.prompt_len}: the turns before "
                                        f"it and its {t.new} new token(s) make {context + t.new}", None, "usage")
                turns.append(TurnSpec(new, t.out, t.think, t.miss))
                context += new + t.out
                scenario.ids[(i, j)] = rid
            scenario.sessions.append((s.arrive, turns))
    if len(set(scenario.ids.values())) != len(scenario.ids):
        raise SerqError(f"{path}: two requests share an id", None, "usage")
    for key, rid in scenario.ids.items():
        r = results.get(rid)
        if r is None:
            continue
        if not doc.did_not_finish and (r.first_token_step is None or r.last_token_step is None):
            raise SerqError(f"{path}: results.{rid}: a request vLLM did not finish in a file without "
                            "`did_not_finish: true`", None, "usage")
        scenario.expected[key] = Expected(r.first_token_step, r.last_token_step, r.preemptions,
                                          r.num_cached_tokens)
    return scenario


def program_inputs(config: dict) -> dict[str, str]:
    """The oracle program's inputs for a scenario's scheduler configuration."""
    return {
        "block_size": str(config["block_size"]),
        "num_blocks": str(config["num_blocks"]),
        "max_num_batched_tokens": str(config["max_num_batched_tokens"]),
        "max_num_seqs": str(config["max_num_seqs"]),
        "long_prefill_token_threshold": str(config["long_prefill_token_threshold"]),
        "enable_prefix_caching": "1" if config.get("enable_prefix_caching") else "0",
    }


def trace_rows(scenario: Scenario) -> list[dict]:
    """The trace's rows. A scenario's `think` is the wait *before* a turn; the program's session
    block waits after a turn (`turn; … run thinking (think); turn;`), so a row's `think` is the next
    turn's (0 on a session's last row). `read_trace` undoes it."""
    rows = []
    for i, (arrive, turns) in enumerate(scenario.sessions):
        for k, t in enumerate(turns):
            after = turns[k + 1].think if k + 1 < len(turns) else 0
            rows.append({"session": i, "arrive": arrive, "new": t.new, "out": t.out, "think": after,
                         "forced": int(t.forced)})
    return rows


def write_trace(scenario: Scenario, path: str | Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(TRACE_COLUMNS))
        w.writeheader()
        w.writerows(trace_rows(scenario))


def read_trace(path: str | Path) -> list[tuple[int, list[TurnSpec]]]:
    """An ordered trace's sessions: (arrive, turns), sessions in order of their number."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in TRACE_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise SerqError(f"trace {path}: missing column(s) {', '.join(missing)}", None, "usage")
            sessions: dict[int, tuple[int, list[TurnSpec]]] = {}
            for line, row in enumerate(reader, start=2):
                try:
                    sid = int(row["session"])
                    turn = TurnSpec(int(row["new"]), int(row["out"]), int(row["think"]), bool(int(row["forced"])))
                    arrive = int(row["arrive"])
                except (TypeError, ValueError):
                    raise SerqError(f"trace {path}:{line}: every field is a whole number", None, "usage") from None
                sessions.setdefault(sid, (arrive, []))[1].append(turn)
    except FileNotFoundError:
        raise SerqError(f"no such trace: {path}", None, "usage") from None
    out = []
    for k in sorted(sessions):  # a row's think is the wait after its turn: the next turn's wait before it
        arrive, turns = sessions[k]
        before = [0] + [t.think for t in turns[:-1]]
        out.append((arrive, [TurnSpec(t.new, t.out, b, t.forced) for t, b in zip(turns, before)]))
    return out
