"""M/M/1 at ρ = 0.8 in serQ, SimPy and Ciw, in one process: customers per second and the ratios.

    python3 benchmarks/mm1.py                  # 10^6 customers each
    python3 benchmarks/mm1.py --customers 200000 --skip-ciw
    python3 benchmarks/mm1.py --profile        # cProfile of the serQ run (top 25 by own time)

Every tool runs the same model: Poisson arrivals at rate 0.8, exponential
service of mean 1, one FIFO server, exactly N customers, each served to the
end (serQ: `--arrivals N`, which drains). The mean response (exactly 5) is
printed beside each figure as a check that the three ran the same queue.
Wall-clock time of the simulation alone (serQ's includes compiling the
program's IR to Python; linking the .sq file is not counted). A benchmark, not
a test: the figures depend on the machine and what else runs on it.
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LAMBDA, MU = 0.8, 1.0


def bench_serq(n: int, seed: int, profile: bool = False) -> tuple[float, float]:
    from serq.link import link_file
    from serq.sim import simulate
    program = link_file(REPO / "examples" / "single-turn" / "mm1.sq", {"rate": str(LAMBDA)})
    gc.collect()
    if profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    result = simulate(program, arrivals=n, seed=seed)
    dt = time.perf_counter() - t0
    if profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return dt, result.report["client"]["response"]["mean"]


def bench_simpy(n: int, seed: int) -> tuple[float, float]:
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
    gc.collect()
    t0 = time.perf_counter()
    env.run()
    dt = time.perf_counter() - t0
    return dt, total[0] / n


def bench_ciw(n: int, seed: int) -> tuple[float, float]:
    import ciw
    network = ciw.create_network(arrival_distributions=[ciw.dists.Exponential(rate=LAMBDA)],
                                 service_distributions=[ciw.dists.Exponential(rate=MU)],
                                 number_of_servers=[1])
    ciw.seed(seed)
    sim = ciw.Simulation(network)
    gc.collect()
    t0 = time.perf_counter()
    sim.simulate_until_max_customers(n, method="Finish")
    dt = time.perf_counter() - t0
    recs = sim.get_all_records()
    return dt, math.fsum(r.exit_date - r.arrival_date for r in recs) / len(recs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--customers", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-ciw", action="store_true")
    ap.add_argument("--skip-simpy", action="store_true")
    ap.add_argument("--profile", action="store_true", help="profile the serQ run instead of comparing")
    args = ap.parse_args()
    n = args.customers
    if args.profile:
        bench_serq(n, args.seed, profile=True)
        return
    rows = []
    dt, mean = bench_serq(n, args.seed)
    rows.append(("serQ", dt, mean))
    if not args.skip_simpy:
        dt, mean = bench_simpy(n, args.seed)
        rows.append(("SimPy", dt, mean))
    if not args.skip_ciw:
        dt, mean = bench_ciw(n, args.seed)
        rows.append(("Ciw", dt, mean))
    print(f"M/M/1, rho = {LAMBDA / MU:g}, {n} customers (exact mean response {1 / (MU - LAMBDA):g})")
    print(f"{'tool':8} {'seconds':>9} {'customers/s':>12} {'mean resp':>10}")
    rate = {}
    for name, dt, mean in rows:
        rate[name] = n / dt
        print(f"{name:8} {dt:9.2f} {n / dt:12,.0f} {mean:10.4f}")
    for other in ("SimPy", "Ciw"):
        if other in rate:
            print(f"serQ / {other}: {rate['serQ'] / rate[other]:.2f}x")


if __name__ == "__main__":
    main()
