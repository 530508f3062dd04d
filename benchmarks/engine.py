"""Iterations per second of the vLLM engine (examples/multi-turn/vllm.sq) with 64 concurrent sessions.

    python3 benchmarks/engine.py                    # 200 simulated seconds, 64 sessions
    python3 benchmarks/engine.py --horizon 50 --sessions 128
    python3 benchmarks/engine.py --profile          # cProfile of the run (top 30 by own time)
    python3 benchmarks/engine.py --residents 64     # run_all.py's figure: iterations per CPU s, 64 resident
    python3 benchmarks/engine.py --residents 64 --no-turnover   # the same with no request ending

The program is examples/multi-turn/vllm.sq with its workload's arrivals
`poisson(rate)` replaced by `closed(N)`: N sessions at every instant (a
session that ends is replaced at once), each a multi-turn agent conversation
(prompts of 50-400 new tokens on top of the context, 21-200 output tokens,
exponential tool calls of mean 5 s between turns, 70% continue), served by
vLLM v1's engine (chunked prefill under a 2048-token budget, LIFO
preemption, the per-session prefix cache) on the step clock of its `execute`.
Its claims over iterations are checked at every iteration, as `serq run` does.

Wall-clock time of the simulation alone (compiling the IR to Python and the
report included; linking the .sq file and importing the interpreter not), and
the iterations per CPU second of the process, which another busy process on
the machine disturbs less. A benchmark, not a test: the figures
depend on the machine and what else runs on it.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# SERQ_TREE: the serq package of another checkout (run_all.py --tree: an A/B against a worktree)
sys.path.insert(0, os.environ.get("SERQ_TREE") or str(REPO))


def program(sessions: int):
    from serq.link import link_file
    text = (REPO / "examples" / "multi-turn" / "vllm.sq").read_text()
    assert "arrive poisson(Lambda);" in text
    text = text.replace("arrive poisson(Lambda);", f"arrive closed({sessions});")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "vllm.sq"
        path.write_text(text)
        return link_file(path)


# The single-turn vLLM workload (benchmarks/memory.py, run_all.py): the same engine, each session one
# request (`more` never set), N open arrivals at RATE per second (--arrivals N drains them).
SINGLE_TURN_RATE = 20.0


def single_turn_program(rate: float = SINGLE_TURN_RATE):
    from serq.link import link_file
    text = (REPO / "examples" / "multi-turn" / "vllm.sq").read_text()
    assert "set more = ~bernoulli(0.7);" in text
    text = text.replace("set more = ~bernoulli(0.7);", "set more = 0;")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "vllm_single_turn.sq"
        path.write_text(text)
        return link_file(path, {"rate": repr(float(rate))})


def residents_program(residents: int, turnover: bool = True):
    """The engine saturated with `residents` requests at every instant: closed(N) single-turn
    sessions (one ends, the next arrives at once), `reqs cap N`, and KV enough for all of them
    (no preemption), so that an iteration serves N residents (run_all.py's iterations per CPU s).
    `turnover` False: every request asks a million output tokens and the KV holds them, so that no
    request ends in the run: an iteration's cost without the requests' arrivals, admissions,
    prefills and ends (what separates the cost per resident from the cost per request)."""
    from serq.link import link_file
    text = (REPO / "examples" / "multi-turn" / "vllm.sq").read_text()
    edits = [("arrive poisson(Lambda);", f"arrive closed({residents});"),
             ("set more = ~bernoulli(0.7);", "set more = 0;"),
             ("let max_seqs = 64;", f"let max_seqs = {residents};")]
    if not turnover:
        edits.append(("Size o = floor(~uniform(20, 200)) + 1;", "Size o = 1000000;"))
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    # (without turnover every resident grows a block every 16 of its tokens for the whole run)
    blocks = max(2048, 64 * residents) if turnover else 4096 * residents
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "vllm_residents.sq"
        path.write_text(text)
        return link_file(path, {"blocks": str(blocks)})


def bench_residents(residents: int, horizon: float = 20.0, seed: int = 1, turnover: bool = True,
                    profile: bool = False) -> dict:
    """Iterations per CPU second of the engine with `residents` requests resident (`profile`: a
    cProfile of the run printed, top 30 by own time)."""
    from serq.sim import simulate
    import serq.sim.build  # noqa: F401  (the interpreter's modules imported before the clock starts)
    import serq.sim.engine  # noqa: F401  (simulate imports it at its first call)
    import serq.sim.report  # noqa: F401
    prog = residents_program(residents, turnover)
    gc.collect()
    prof = _profiler() if profile else None
    c0 = time.process_time()
    result = simulate(prog, horizon=horizon, seed=seed)
    cpu = time.process_time() - c0
    if prof is not None:
        _print_profile(prof)
    st = next(s for s in result.report["stages"] if s["service"] == "step")
    return {"cpu": cpu, "iterations": st["iterations"], "mean_residents": st["mean_busy"],
            "preemptions": st["preemptions"], "answered": result.report["turns"]["answered"]}


def bench_requests(n: int, seed: int = 1, rate: float = SINGLE_TURN_RATE) -> dict:
    """N requests of the single-turn workload: requests answered per CPU second of the run."""
    from serq.sim import simulate
    import serq.sim.build  # noqa: F401  (the interpreter's modules imported before the clock starts)
    import serq.sim.engine  # noqa: F401  (simulate imports it at its first call)
    import serq.sim.report  # noqa: F401
    prog = single_turn_program(rate)
    gc.collect()
    t0 = time.perf_counter()
    c0 = time.process_time()
    result = simulate(prog, arrivals=n, seed=seed)
    cpu = time.process_time() - c0
    rep = result.report
    st = next(s for s in rep["stages"] if s["service"] == "step")
    return {"seconds": time.perf_counter() - t0, "cpu": cpu, "answered": rep["turns"]["answered"],
            "iterations": st["iterations"], "mean_residents": st["mean_busy"],
            "mean_response": rep["client"]["response"]["mean"]}


def _profiler():
    """A cProfile profiler, started (its figures are several times the unprofiled run's)."""
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
    return prof


def _print_profile(prof) -> None:
    import pstats
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)


def bench(sessions: int, horizon: float, seed: int, profile: bool = False) -> dict:
    from serq.sim import simulate
    import serq.sim.build  # noqa: F401  (the interpreter's modules imported before the clock starts)
    import serq.sim.engine  # noqa: F401
    import serq.sim.report  # noqa: F401
    prog = program(sessions)
    gc.collect()
    prof = _profiler() if profile else None
    t0 = time.perf_counter()
    c0 = time.process_time()
    result = simulate(prog, horizon=horizon, seed=seed)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if prof is not None:
        _print_profile(prof)
    rep = result.report
    st = next(s for s in rep["stages"] if s["service"] == "step")
    return {"seconds": dt, "cpu": cpu, "iterations": st["iterations"], "tokens": st["tokens"], "mean_batch": st["mean_batch"],
            "mean_residents": st["mean_busy"], "utilization": st["utilization"], "events": rep["events"],
            "turns": rep["turns"]["answered"], "preemptions": st["preemptions"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--horizon", type=float, default=200.0, help="simulated seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--residents", type=int, help="run_all.py's engine figure at N residents (100 simulated s)")
    ap.add_argument("--no-turnover", action="store_true", help="with --residents: no request ends in the run")
    args = ap.parse_args()
    if args.residents:
        r = bench_residents(args.residents, horizon=100.0, seed=args.seed, turnover=not args.no_turnover,
                            profile=args.profile)
        print(f"vLLM engine, {args.residents} residents{' (no request ends)' if args.no_turnover else ''}: "
              f"{r['iterations']:,} iterations, mean residents {r['mean_residents']:.1f}, "
              f"{r['answered']:,} answered, {r['preemptions']} preemptions, "
              f"{r['iterations'] / r['cpu']:,.0f} iterations per CPU second ({1e6 * r['cpu'] / r['iterations']:.1f} µs each)")
        return
    r = bench(args.sessions, args.horizon, args.seed, args.profile)
    print(f"vLLM engine (examples/multi-turn/vllm.sq), closed({args.sessions}), {args.horizon:g} simulated s, "
          f"seed {args.seed}")
    print(f"  {r['iterations']:,} iterations in {r['seconds']:.2f} s: {r['iterations'] / r['seconds']:,.0f} iterations/s "
          f"({r['iterations'] / r['cpu']:,.0f} per CPU second)")
    print(f"  {r['events']:,} events, {r['turns']:,} turns answered, {r['tokens']:,.0f} tokens, "
          f"mean batch {r['mean_batch']:.1f} tokens, mean residents {r['mean_residents']:.1f}, "
          f"engine busy {100 * r['utilization']:.0f}%, {r['preemptions']} preemptions")


if __name__ == "__main__":
    main()
