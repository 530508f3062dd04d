"""A closed model with 10^5 sessions alive at once: memory per session and turns per second.

    python3 benchmarks/closed_memory.py               # 100 000 sessions
    python3 benchmarks/closed_memory.py --sessions 20000 --horizon 20

The program is examples/multi-turn/closed.sq (machine repair: think, then one
FIFO repair station) with N written in (an input may not set a count), its
repair 1/N as long so the station keeps up. Memory is what tracemalloc counts for
the engine once every session has started and is suspended (at its think or
in the repair queue), less what the engine holds with one session; divided by
N. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def measure(n: int, horizon: float) -> tuple[float, float, float]:
    from serq.link import link_text
    from serq.sim import simulate
    from serq.sim.engine import Engine

    source = (REPO / "examples" / "multi-turn" / "closed.sq").read_text(encoding="utf-8")

    def program_of(sessions: int):
        text = source.replace('args.number("sessions", 5)', str(sessions))
        text = text.replace("let repair_mean = 1;", f"let repair_mean = {1 / sessions!r};")
        return link_text(text, "closed.sq")

    def engine_after_start(sessions: int) -> int:
        program = program_of(sessions)
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        E = Engine(program, seed=1, horizon=horizon, warmup=0.0, arrivals=None)
        E.start()
        E.settle()  # every session has run to its first block
        used = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        assert E.live == sessions
        del E
        return used

    one = engine_after_start(1)
    many = engine_after_start(n)
    per_session = (many - one) / (n - 1)
    program = program_of(n)
    t0 = time.perf_counter()
    rep = simulate(program, seed=1, horizon=horizon).report
    dt = time.perf_counter() - t0
    return per_session, rep["turns"]["answered"] / dt, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--horizon", type=float, default=10.0)
    args = ap.parse_args()
    per, rate, dt = measure(args.sessions, args.horizon)
    print(f"closed M/M/1//N, N = {args.sessions}: {per:,.0f} bytes per live session; "
          f"{rate:,.0f} turns/s over a run of {args.horizon:g} time units ({dt:.2f} s)")


if __name__ == "__main__":
    main()
