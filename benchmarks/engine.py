"""Iterations per second of the vLLM engine (examples/multi-turn/vllm.sq) with 64 concurrent sessions.

    python3 benchmarks/engine.py                    # 200 simulated seconds, 64 sessions
    python3 benchmarks/engine.py --horizon 50 --sessions 128
    python3 benchmarks/engine.py --profile          # cProfile of the run (top 30 by own time)

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
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def program(sessions: int):
    from serq.link import link_file
    text = (REPO / "examples" / "multi-turn" / "vllm.sq").read_text()
    assert "arrive poisson(Lambda);" in text
    text = text.replace("arrive poisson(Lambda);", f"arrive closed({sessions});")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "vllm.sq"
        path.write_text(text)
        return link_file(path)


def bench(sessions: int, horizon: float, seed: int, profile: bool = False) -> dict:
    from serq.sim import simulate
    import serq.sim.build  # noqa: F401  (the interpreter's modules imported before the clock starts)
    import serq.sim.engine  # noqa: F401
    import serq.sim.report  # noqa: F401
    prog = program(sessions)
    gc.collect()
    if profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    c0 = time.process_time()
    result = simulate(prog, horizon=horizon, seed=seed)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
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
    args = ap.parse_args()
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
