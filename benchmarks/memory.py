"""Max RSS of a run against its length: M/M/1 and a vLLM engine, each case in a fresh process.

    python3 benchmarks/memory.py                       # M/M/1 at 10^4, 10^5, 10^6; vLLM at 10^4, 10^5
    python3 benchmarks/memory.py --mm1 10000 100000 --vllm 10000
    python3 benchmarks/memory.py --child mm1 100000    # one case, in this process: a JSON line

A case is one `simulate(...)` of N open arrivals (`--arrivals N`, which drains) in a process of
its own, which reports its peak resident set (`resource.getrusage(RUSAGE_SELF).ru_maxrss`) after
the run, beside the peak once the interpreter is imported and the program linked (`before`): what
the run itself adds is the difference, and flat memory is the same difference at every N. The
cases:

- `mm1`: examples/single-turn/mm1.sq at rate 0.8 (N customers);
- `vllm`: the single-turn vLLM workload of benchmarks/engine.py (`single_turn_program`: the engine
  of examples/multi-turn/vllm.sq, one turn per session; N requests).

A benchmark, not a test: the figures depend on the machine (run_all.py also prints them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# SERQ_TREE: the serq package of another checkout (run_all.py --tree: an A/B against a worktree)
sys.path.insert(0, os.environ.get("SERQ_TREE") or str(REPO))

MM1_SIZES = (10_000, 100_000, 1_000_000)
VLLM_SIZES = (10_000, 100_000)


def _maxrss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def program(case: str):
    """The linked program of a case."""
    if case == "mm1":
        from serq.link import link_file
        return link_file(REPO / "examples" / "single-turn" / "mm1.sq", {"rate": "0.8"})
    if case == "vllm":
        sys.path.insert(0, str(REPO / "benchmarks"))
        from engine import single_turn_program
        return single_turn_program()
    raise SystemExit(f"no case {case!r}: mm1 or vllm")


def run_case(case: str, n: int, seed: int = 1) -> dict:
    """One case in this process: CPU and wall seconds of the run, max RSS before and after it."""
    from serq.sim import simulate
    import serq.sim.build  # noqa: F401  (the interpreter imported before the clock starts)
    import serq.sim.report  # noqa: F401
    prog = program(case)
    before = _maxrss_mb()
    t0 = time.perf_counter()
    c0 = time.process_time()
    result = simulate(prog, arrivals=n, seed=seed)
    cpu = time.process_time() - c0
    wall = time.perf_counter() - t0
    rep = result.report
    return {"case": case, "n": n, "seed": seed, "cpu": cpu, "wall": wall, "before_mb": before,
            "maxrss_mb": _maxrss_mb(), "answered": rep["turns"]["answered"],
            "mean_response": rep["client"]["response"]["mean"]}


def measure(case: str, n: int, seed: int = 1) -> dict:
    """One case in a fresh process (this file's --child mode)."""
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case, str(n), "--seed", str(seed)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> list[str]:
    lines = [f"{'case':6} {'N':>10} {'max RSS MB':>11} {'before MB':>10} {'run adds':>9} {'CPU s':>7} "
             f"{'answered':>9} {'mean resp':>10}"]
    for r in rows:
        lines.append(f"{r['case']:6} {r['n']:>10,} {r['maxrss_mb']:11.1f} {r['before_mb']:10.1f} "
                     f"{r['maxrss_mb'] - r['before_mb']:9.1f} {r['cpu']:7.2f} {r['answered']:>9,} "
                     f"{r['mean_response']:10.4f}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mm1", type=int, nargs="*", default=list(MM1_SIZES), help="M/M/1 customers per case")
    ap.add_argument("--vllm", type=int, nargs="*", default=list(VLLM_SIZES), help="vLLM requests per case")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--child", nargs=2, metavar=("CASE", "N"), help="run one case here and print it as JSON")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child[0], int(args.child[1]), args.seed)))
        return
    rows = [measure("mm1", n, args.seed) for n in args.mm1] + [measure("vllm", n, args.seed) for n in args.vllm]
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
