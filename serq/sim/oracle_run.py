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

from serq.errors import SerqError
from serq.sim.steps import IterationRecord


@dataclass(frozen=True)
class TurnOutcome:
    first: float | None
    last: float | None
    preemptions: int
    cached: float
    ttft: float | None  # the time of the first token (the end of the iteration that sampled it)
    answer: float  # the time the turn was answered


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
                     for (s, k), o in sorted(self.turns.items()))

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
        E = Engine(program, seed=seed, horizon=horizon, warmup=0.0, arrivals=None, base_dir=base_dir)
    except Exception as e:  # a construct the interpreter refuses
        from serq.sim.compile import CompileError
        if isinstance(e, CompileError):
            raise SerqError(f"serq run: {e.message}", None, "run") from None
        raise
    E.turn_log = {}
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
    turns = {key: TurnOutcome(v[0], v[1], int(v[2]), float(v[3]), v[4], v[5]) for key, v in E.turn_log.items()}
    return ProgramRun(turns, records, make_report(E), E)


def run_scenario(scenario) -> ProgramRun:
    """Run an oracle scenario (a path or a `serq.oracle.Scenario`) through `examples/oracle/vllm_request.sq`."""
    import shutil

    from serq.leangen.oracle_lean import instance_ir
    from serq.oracle import Scenario, load_scenario

    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    program, folder = instance_ir(sc)
    try:
        return run_program(program, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------ the command
def compare(scenario, run: ProgramRun) -> list[tuple]:
    """Rows (id, vLLM's (first, last, preemptions, cached), serQ's, same?) for every request vLLM answered."""
    rows = []
    for key in sorted(scenario.expected, key=lambda k: (k[0], k[1])):
        e = scenario.expected[key]
        want = (e.first, e.last, e.preemptions, e.cached)
        o = run.turns.get(key)
        got = None
        if o is not None:
            got = (_int(o.first), _int(o.last), o.preemptions, _int(o.cached) if e.cached is not None else None)
        rows.append((scenario.ids[key], want, got, got == want))
    return rows


def _int(v):
    if v is None:
        return None
    return int(v) if float(v).is_integer() else v


def _show(t) -> str:
    if t is None:
        return "not answered"
    first, last, pre, cached = t
    s = f"{first:>5} {last:>5} {pre:>3}"
    if cached is not None:
        s += f" {cached:>6}"
    return s


@click.command("oracle")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--quiet", "-q", is_flag=True, help="Print only the scenarios that differ, and the totals.")
def oracle(files, quiet) -> None:
    """Run vLLM oracle scenarios (FILE.json…) through examples/oracle/vllm_request.sq and print, per
    request, serQ's first-token step, last-token step and preemptions (and num_cached_tokens for the
    prefix-cache set) next to vLLM's. Exits 1 on any difference."""
    from serq.errors import render
    from serq.oracle import load_scenario

    bad_scenarios = 0
    total = same = 0
    for f in files:
        try:
            sc = load_scenario(f)
            run = run_scenario(sc)
        except SerqError as e:
            if e.kind == "usage":
                click.echo(render(e), err=True)
                sys.exit(2)
            bad_scenarios += 1
            click.echo(f"{Path(f).stem}: the run failed: {render(e)}")
            continue
        rows = compare(sc, run)
        ok = all(r[3] for r in rows)
        total += len(rows)
        same += sum(1 for r in rows if r[3])
        if not ok:
            bad_scenarios += 1
        if quiet and ok:
            continue
        cache = any(r[1][3] is not None for r in rows)
        click.echo(f"{sc.name}: {'agrees' if ok else 'DIFFERS'} ({sum(1 for r in rows if r[3])} of {len(rows)} "
                   f"requests)")
        head = f"  {'request':<10} {'first':>5} {'last':>5} {'pre':>3}" + (f" {'cached':>6}" if cache else "")
        click.echo(f"{head}   |  serQ")
        for rid, want, got, eq in rows:
            mark = "" if eq else "   <- differs"
            click.echo(f"  {rid:<10} {_show(want)}   |  {_show(got)}{mark}")
    click.echo(f"{len(files) - bad_scenarios} of {len(files)} scenario(s) agree; {same} of {total} requests")
    if bad_scenarios:
        sys.exit(1)
