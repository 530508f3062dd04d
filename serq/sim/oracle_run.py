"""Runs of engine programs for comparison: per turn what the engine did, per iteration what it scheduled.

    from serq.sim.oracle_run import run_program, run_scenario
    run = run_scenario("tests/data/oracle/vllm-v1/f_preempt.json")
    run.turns[(0, 0)]       # TurnOutcome(first=…, last=…, preemptions=…, cached=…)
    run.records[0]          # IterationRecord(start=0.0, tokens=…, …)

`run_program(program, base_dir)` runs any linked program (`serq.link.link_file`)
to its end with the reference interpreter and returns:

- `turns`: (session, turn) -> `TurnOutcome` for every answered turn. The
  session is the trace session the run session replays (its row number's
  session in an ordered trace), else the session's serial (arrival order); the
  turn counts from 0. `first` is the start of the iteration that sampled the
  turn's first output token, `last` the start of the iteration that committed
  its last, in the step clock's units (on `execute (1)` these are vLLM's step
  numbers); `preemptions` counts the preemptions of the turn's holds; `cached`
  is the prefix its first admission consumed (`cached`, vLLM's
  `num_cached_tokens`), 0 without a cache clause. `ttft`/`answer` are the
  client's times (the first token's iteration end, the answer).
- `records`: the step stage's iterations, each an `IterationRecord` with the
  meanings of `lean/Serq/Exec.lean`'s `Record` (start, tokens, prefilled,
  decoders, residents, kv_decode, kv_prefill, demand, served, arrived; see
  `serq.sim.steps.IterationRecord`).

`serq oracle FILE.json…` runs each scenario through the oracle program and
prints serQ's numbers next to vLLM's, exiting 1 on any difference.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from serq.commandline import guarded
from serq.errors import SerqError
from serq.sim.steps import IterationRecord


@dataclass(frozen=True)
class TurnOutcome:
    first: float | None
    last: float | None
    preemptions: int
    cached: float
    ttft: float | None  # the time of the first token (the end of the iteration that sampled it)
    answer: float | None  # the time the turn was answered (None: it was not)
    ended: str = "answered"  # or: rejected, refused, waiting, running, waiting to grow, stuck (at the run's end)
    start: float | None = None  # the time the turn was submitted (after the workload's turn block)


@dataclass
class ProgramRun:
    turns: dict[tuple[int, int], TurnOutcome]
    records: list[IterationRecord]
    report: dict
    engine: object

    def outcome_rows(self) -> tuple[tuple[int, int, int, int, int, int], ...]:
        """The turns as Lean's `Outcome` (sid, turn, first, last, preemptions, cached), whole numbers,
        sorted by (sid, turn). A turn with no token has first/last -1."""
        return tuple((s, k, _whole(o.first), _whole(o.last), o.preemptions, _whole(o.cached))
                     for (s, k), o in sorted(self.turns.items()) if o.ended == "answered")

    def record_rows(self) -> tuple[tuple[int, ...], ...]:
        """The records as Lean's `Record` (start, tokens, prefilled, decoders, residents, kvDecode,
        kvPrefill, demand, served, arrived), whole numbers."""
        return tuple(tuple(_whole(v) for v in (r.start, r.tokens, r.prefilled, r.decoders, r.residents,
                                                r.kv_decode, r.kv_prefill, r.demand, r.served, r.arrived))
                     for r in self.records)


def _whole(v) -> int:
    if v is None:
        return -1
    if not float(v).is_integer():
        raise ValueError(f"{v} is not a whole number: the program is not on the step clock")
    return int(v)


def run_program(program, base_dir=None, *, stage: str | None = None, member: int = 0, seed: int = 0,
                horizon: float = math.inf) -> ProgramRun:
    """Run a linked program to its end (or `horizon`) keeping the turns' outcomes and the per-iteration
    records of step stage `stage` (default: the first step stage), member `member`."""
    from serq.sim import _check_settings
    from serq.sim.engine import Engine, SimRunError
    from serq.sim.report import make_report

    _check_settings(program, seed, horizon, 0.0, None)
    try:
        E = Engine(program, seed=seed, horizon=horizon, warmup=0.0, arrivals=None, base_dir=base_dir,
                   log_turns=True)
    except Exception as e:  # a construct the interpreter refuses
        from serq.sim.compile import CompileError
        if isinstance(e, CompileError):
            raise SerqError(f"serq run: {e.message}", None, "run") from None
        raise
    records: list = []
    steps = [m for m in E.step_stages if stage is None or m.name == stage]
    if stage is not None and not steps:
        raise SerqError(f"no step stage named `{stage}`", None, "usage")
    if steps:
        target = [m for m in steps if m.name == steps[0].name]
        if not 0 <= member < len(target):
            raise SerqError(f"step stage `{steps[0].name}` has no member {member}", None, "usage")
        target[member].records = records
    try:
        E.run()
    except SimRunError as e:
        raise e.to_serq() from None
    for S in list(E.open_turns.values()):  # the turns still open when the run ended: say where they stand
        E.log_turn(S, _standing(S))
    turns = {key: TurnOutcome(v[0], v[1], int(v[2]), float(v[3]), v[4], v[5], v[6], v[7])
             for key, v in E.turn_log.items()}
    return ProgramRun(turns, records, make_report(E), E)


def _standing(S) -> str:
    """Where an unanswered turn's session stands as the run ends."""
    from serq.sim.threads import AT_STAGE, GROWING, QUEUED
    if S.stuck:
        return "stuck"
    state = S.state
    if state == QUEUED:
        return "waiting"
    if state == AT_STAGE:
        return "running"
    if state == GROWING:
        return "waiting to grow"
    return "unanswered"


def run_scenario(scenario) -> ProgramRun:
    """Run an oracle scenario (a path or a `serq.oracle.Scenario`) through `examples/oracle/vllm_request.sq`,
    for as many steps as vLLM's driver ran when the file says (`schedule_calls`): a token of step k is
    applied at time k + 1, so the run stops after the events at that time."""
    import shutil

    from serq.leangen.oracle_lean import instance_ir
    from serq.oracle import Scenario, load_scenario

    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    program, folder = instance_ir(sc)
    try:
        return run_program(program, folder, horizon=float(sc.steps) if sc.steps is not None else math.inf)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------ the comparison
@dataclass(frozen=True)
class RequestComparison:
    """One request: vLLM's (first, last, preemptions, cached) and serQ's, and how each side ended."""

    id: str
    vllm: tuple
    serq: tuple | None  # None: serQ never submitted the turn
    vllm_ended: str  # finished, or "waiting at the step cap" (a token vLLM never produced)
    serq_ended: str  # answered, rejected, refused, waiting, running, waiting to grow, stuck, not submitted

    @property
    def same(self) -> bool:
        return self.serq == self.vllm


def compare(scenario, run: ProgramRun) -> list[RequestComparison]:
    """Every request of the scenario, in (session, turn) order. A number vLLM never produced (null in a
    `did_not_finish` file) agrees only with serQ not producing it either, within the same steps."""
    rows = []
    for key in sorted(scenario.expected):
        e = scenario.expected[key]
        want = (e.first, e.last, e.preemptions, e.cached)
        o = run.turns.get(key)
        got = None
        serq_ended = "not submitted"
        if o is not None:
            last = _int(o.last) if o.ended == "answered" else None
            got = (_int(o.first), last, o.preemptions, _int(o.cached) if e.cached is not None else None)
            serq_ended = o.ended
        vllm_ended = "finished" if e.last is not None else "waiting at the step cap"
        rows.append(RequestComparison(scenario.ids[key], want, got, vllm_ended, serq_ended))
    return rows


@dataclass(frozen=True)
class StepDifference:
    """The first step where serQ's iteration parts from vLLM's trace: `what` differs (the tokens
    scheduled per request, the KV pool's free blocks after scheduling, or the blocks evicted), with
    vLLM's value and serQ's."""

    step: int
    what: str
    vllm: object
    serq: object

    def __str__(self) -> str:
        if self.what == "scheduled":
            return f"{self.step}: vLLM scheduled {_batch(self.vllm)}, serQ {_batch(self.serq)}"
        return f"{self.step}: {self.what}: vLLM {self.vllm}, serQ {self.serq}"


def first_differing_step(scenario, run: ProgramRun) -> StepDifference | None:
    """The first step whose scheduled tokens per request differ between vLLM's trace and serQ's
    iterations or, where both have the step, whose free KV blocks after scheduling or evicted blocks
    differ. None: no trace in the file, or nothing differs."""
    if scenario.trace is None:
        return None
    ours: dict[int, object] = {int(r.start): r for r in run.records}
    block = float(scenario.config["block_size"])
    evicted_before = 0.0
    steps = max(len(scenario.trace), max(ours, default=-1) + 1)
    for k in range(steps):
        theirs = scenario.trace[k] if k < len(scenario.trace) else None
        r = ours.get(k)
        mine = {scenario.ids.get(key, f"session {key[0]} turn {key[1]}"): _int(n) for key, n in r.scheduled} \
            if r is not None else {}
        wanted = theirs.scheduled if theirs is not None else {}
        if wanted != mine:
            return StepDifference(k, "scheduled", wanted, mine)
        if r is None or theirs is None or not r.memory:
            continue
        _, free, evicted = r.memory[0]
        if theirs.free_blocks is not None and _int(free / block) != theirs.free_blocks:
            return StepDifference(k, "free blocks after scheduling", theirs.free_blocks, _int(free / block))
        if theirs.evicted is not None and _int((evicted - evicted_before) / block) != theirs.evicted:
            return StepDifference(k, "blocks evicted", theirs.evicted, _int((evicted - evicted_before) / block))
        evicted_before = evicted
    return None


def _int(v):
    if v is None:
        return None
    return int(v) if float(v).is_integer() else v


def _show(t) -> str:
    if t is None:
        return "not submitted"
    first, last, pre, cached = t
    s = f"{_cell(first):>5} {_cell(last):>5} {pre:>3}"
    if cached is not None:
        s += f" {cached:>6}"
    return s


def _cell(v) -> str:
    return "-" if v is None else str(v)


def _batch(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(d.items())) + "}" if d else "nothing"


# ------------------------------------------------------------------ the command
@click.command("oracle")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--quiet", "-q", is_flag=True, help="Print only the scenarios that differ, and the totals.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object per scenario (a line each), then the totals as one more.")
def oracle(files, quiet, as_json) -> None:
    """Run vLLM oracle scenarios (FILE.json…) through examples/oracle/vllm_request.sq and print, per
    request, serQ's first-token step, last-token step and preemptions (and num_cached_tokens for the
    prefix-cache sets) next to vLLM's; `-` is a token that side never produced. A differing scenario
    names the first step whose scheduled tokens differ from vLLM's trace. A summary of a scenario set
    (SUMMARY.json) is skipped. Exits 1 on any difference."""
    guarded(_oracle)(files, quiet, as_json)


def _oracle(files, quiet, as_json) -> None:
    import json

    from serq.errors import render
    from serq.oracle import SummaryFile, load_scenario

    scenarios = agreeing = requests = same = skipped = 0
    for f in files:
        try:
            sc = load_scenario(f)
        except SummaryFile:
            skipped += 1
            if not quiet and not as_json:
                click.echo(f"{f}: skipped (a summary of a scenario set)")
            continue
        scenarios += 1
        try:
            run = run_scenario(sc)
        except SerqError as e:
            if e.kind == "usage":
                raise
            if as_json:
                click.echo(json.dumps({"scenario": sc.name, "file": str(f), "agrees": False,
                                       "error": str(e)}, sort_keys=True))
            else:
                click.echo(f"{sc.name}: the run failed: {render(e)}")
            continue
        rows = compare(sc, run)
        step = first_differing_step(sc, run)  # a scenario agrees request by request and step by step
        ok = all(r.same for r in rows) and step is None
        n_same = sum(1 for r in rows if r.same)
        requests += len(rows)
        same += n_same
        agreeing += ok
        if as_json:
            click.echo(json.dumps({
                "scenario": sc.name, "file": str(f), "agrees": ok,
                "requests": [{"id": r.id, "same": r.same,
                              "vllm": dict(zip(_FIELDS, r.vllm), ended=r.vllm_ended),
                              "serq": (dict(zip(_FIELDS, r.serq)) if r.serq is not None else {}) |
                              {"ended": r.serq_ended}} for r in rows],
                "first_differing_step": None if step is None else
                {"step": step.step, "what": step.what, "vllm": step.vllm, "serq": step.serq},
            }, sort_keys=True))
            continue
        if quiet and ok:
            continue
        cache = any(r.vllm[3] is not None for r in rows)
        click.echo(f"{sc.name}: {'agrees' if ok else 'DIFFERS'} ({n_same} of {len(rows)} requests)")
        head = f"  {'request':<10} {'first':>5} {'last':>5} {'pre':>3}" + (f" {'cached':>6}" if cache else "")
        click.echo(f"{head}   |  serQ")
        for r in rows:
            mark = "" if r.same else "   <- differs"
            ended = ""
            if r.vllm_ended != "finished" or r.serq_ended != "answered":
                ended = f"   (vLLM: {r.vllm_ended}; serQ: {r.serq_ended})"
            click.echo(f"  {r.id:<10} {_show(r.vllm)}   |  {_show(r.serq)}{mark}{ended}")
        if step is not None:
            click.echo(f"  first differing step: {step}")
    summary = (f"{agreeing} of {scenarios} scenario(s) agree; {same} of {requests} requests"
               + (f"; {skipped} summary file(s) skipped" if skipped else ""))
    if as_json:
        click.echo(json.dumps({"summary": {"scenarios": scenarios, "agree": agreeing, "requests": requests,
                                           "requests_agree": same, "skipped": skipped}}, sort_keys=True))
    else:
        click.echo(summary)
    if agreeing != scenarios:
        sys.exit(1)


_FIELDS = ("first_token_step", "last_token_step", "preemptions", "num_cached_tokens")
