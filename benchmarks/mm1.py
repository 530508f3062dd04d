"""M/M/1 at ρ = 0.8 in serQ, SimPy and Ciw, in one process: customers per second and the ratios.

    python3 benchmarks/mm1.py                  # 10^6 customers each
    python3 benchmarks/mm1.py --customers 200000 --skip-ciw
    python3 benchmarks/mm1.py --profile        # cProfile of the serQ run (top 25 by own time)

Every tool runs the same model: Poisson arrivals at rate 0.8, exponential
service of mean 1, one FIFO server, exactly N customers, each served to the
end (serQ: `--arrivals N`, which drains). The mean response (exactly 5) is
printed beside each figure as a check that the three ran the same queue.
CPU seconds of the process (`time.process_time`, which another busy process
on the machine disturbs less than the wall clock) for the simulation alone:
serQ's includes compiling the program's IR to Python and its report; linking
the .sq file and importing the interpreter (as SimPy's and Ciw's imports) are
not counted. The three run in one process, one after the other; run_all.py
repeats this and takes medians. A benchmark, not a test: the figures depend
on the machine and what else runs on it.

    python3 benchmarks/mm1.py --child serQ 100000   # one tool, in this process: a JSON line
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# SERQ_TREE: the serq package of another checkout (run_all.py --tree: an A/B against a worktree)
sys.path.insert(0, os.environ.get("SERQ_TREE") or str(REPO))

LAMBDA, MU = 0.8, 1.0


class Clock:
    """CPU and wall seconds from its start."""

    def __init__(self) -> None:
        gc.collect()
        self.c0 = time.process_time()
        self.t0 = time.perf_counter()

    def stop(self) -> tuple[float, float]:
        return time.process_time() - self.c0, time.perf_counter() - self.t0


def bench_serq(n: int, seed: int, profile: bool = False) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, mean response)."""
    from serq.link import link_file
    from serq.sim import simulate
    import serq.sim.build  # noqa: F401  (the interpreter imported before the clock, as SimPy's and Ciw's)
    import serq.sim.engine  # noqa: F401  (simulate imports it at its first call)
    import serq.sim.report  # noqa: F401
    program = link_file(REPO / "examples" / "single-turn" / "mm1.sq", {"rate": str(LAMBDA)})
    if profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
    clock = Clock()
    result = simulate(program, arrivals=n, seed=seed)
    cpu, wall = clock.stop()
    if profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return cpu, wall, result.report["client"]["response"]["mean"]


def bench_simpy(n: int, seed: int) -> tuple[float, float, float]:
    import simpy
    rng = random.Random(seed)
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    total = [0.0]

    def customer(env):
        t0 = env.now
        with server.request() as req:
            yield req
            yield env.timeout(rng.expovariate(MU))
        total[0] += env.now - t0

    def source(env):
        for _ in range(n):
            env.process(customer(env))
            yield env.timeout(rng.expovariate(LAMBDA))

    env.process(source(env))
    clock = Clock()
    env.run()
    cpu, wall = clock.stop()
    return cpu, wall, total[0] / n


def bench_ciw(n: int, seed: int) -> tuple[float, float, float]:
    import ciw
    network = ciw.create_network(arrival_distributions=[ciw.dists.Exponential(rate=LAMBDA)],
                                 service_distributions=[ciw.dists.Exponential(rate=MU)],
                                 number_of_servers=[1])
    ciw.seed(seed)
    sim = ciw.Simulation(network)
    clock = Clock()
    sim.simulate_until_max_customers(n, method="Finish")
    cpu, wall = clock.stop()
    recs = sim.get_all_records()
    return cpu, wall, math.fsum(r.exit_date - r.arrival_date for r in recs) / len(recs)


TOOLS = {"serQ": bench_serq, "SimPy": bench_simpy, "Ciw": bench_ciw}


def child(tools: list[str], n: int, seed: int) -> None:
    """The tools one after the other in this process; a JSON line each, with the process's max RSS
    so far (a tool's own only when it runs alone)."""
    import json
    import resource
    for name in tools:
        cpu, wall, mean = TOOLS[name](n, seed)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(json.dumps({"tool": name, "n": n, "cpu": cpu, "wall": wall, "mean": mean, "maxrss_mb": rss}),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--customers", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-ciw", action="store_true")
    ap.add_argument("--skip-simpy", action="store_true")
    ap.add_argument("--profile", action="store_true", help="profile the serQ run instead of comparing")
    ap.add_argument("--child", nargs=2, metavar=("TOOLS", "N"),
                    help="run TOOLS (comma-separated: serQ,SimPy,Ciw) on N customers here, a JSON line each")
    args = ap.parse_args()
    if args.child:
        child(args.child[0].split(","), int(args.child[1]), args.seed)
        return
    n = args.customers
    if args.profile:
        bench_serq(n, args.seed, profile=True)
        return
    rows = []
    cpu, wall, mean = bench_serq(n, args.seed)
    rows.append(("serQ", cpu, wall, mean))
    if not args.skip_simpy:
        cpu, wall, mean = bench_simpy(n, args.seed)
        rows.append(("SimPy", cpu, wall, mean))
    if not args.skip_ciw:
        cpu, wall, mean = bench_ciw(n, args.seed)
        rows.append(("Ciw", cpu, wall, mean))
    print(f"M/M/1, rho = {LAMBDA / MU:g}, {n} customers (exact mean response {1 / (MU - LAMBDA):g})")
    print(f"{'tool':8} {'CPU s':>8} {'wall s':>8} {'customers/CPU s':>16} {'mean resp':>10}")
    rate = {}
    for name, cpu, wall, mean in rows:
        rate[name] = n / cpu
        print(f"{name:8} {cpu:8.2f} {wall:8.2f} {n / cpu:16,.0f} {mean:10.4f}")
    for other in ("SimPy", "Ciw"):
        if other in rate:
            print(f"serQ / {other}: {rate['serQ'] / rate[other]:.2f}x (CPU)")


if __name__ == "__main__":
    main()
