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

from serq.errors import SerqError

ORACLE_PROGRAM = Path(__file__).resolve().parent.parent / "examples" / "oracle" / "vllm_request.sq"
TRACE_COLUMNS = ("session", "arrive", "new", "out", "think", "forced")


@dataclass(frozen=True)
class TurnSpec:
    new: int
    out: int
    think: int = 0
    forced: bool = False


@dataclass(frozen=True)
class Expected:
    first: int
    last: int
    preemptions: int
    cached: int | None  # num_cached_tokens, in the prefix-cache set


@dataclass
class Scenario:
    name: str
    path: Path
    config: dict
    sessions: list[tuple[int, list[TurnSpec]]]  # (arrive step, turns)
    ids: dict[tuple[int, int], str] = field(default_factory=dict)  # (session, turn) -> the scenario's id
    expected: dict[tuple[int, int], Expected] = field(default_factory=dict)


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        sc, out = data["scenario"], data["output"]
        config = sc["config"]
        results = out["results"]
    except FileNotFoundError:
        raise SerqError(f"no such scenario file: {path}", None, "usage") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SerqError(f"{path}: not an oracle scenario ({e})", None, "usage") from None
    scenario = Scenario(sc.get("name", path.stem), path, config, [])
    if "requests" in sc:
        for i, r in enumerate(sc["requests"]):
            scenario.sessions.append((int(r["arrive"]), [TurnSpec(int(r["prompt"]), int(r["out"]))]))
            scenario.ids[(i, 0)] = r["id"]
    else:
        for i, s in enumerate(sc["sessions"]):
            turns = [TurnSpec(int(t["new"]), int(t["out"]), int(t.get("think", 0)), bool(t.get("miss", False)))
                     for t in s["turns"]]
            scenario.sessions.append((int(s["arrive"]), turns))
            for j in range(len(turns)):
                scenario.ids[(i, j)] = f"{s['id']}t{j}"
    for key, rid in scenario.ids.items():
        r = results.get(rid)
        if r is None:
            continue
        scenario.expected[key] = Expected(int(r["first_token_step"]), int(r["last_token_step"]),
                                          int(r["preemptions"]),
                                          int(r["num_cached_tokens"]) if "num_cached_tokens" in r else None)
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
