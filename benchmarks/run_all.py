"""Every benchmark of issue 15 in one command, side by side; writes benchmarks/RESULTS.md.

    python3 benchmarks/run_all.py                 # medians of 3 (a few minutes on two cores)
    python3 benchmarks/run_all.py --quick         # small sizes, one repetition (a smoke test)
    python3 benchmarks/run_all.py --tree /tmp/serq-base --out /tmp/base.md   # another checkout's serq
    python3 benchmarks/run_all.py --baseline /tmp/serq-base   # the engine figures beside another checkout's
    python3 benchmarks/run_all.py --instructions  # also instructions per iteration (valgrind; ~1.5 min a tree)

What it runs (each figure a median over --repeat runs, each run in a fresh process):

- M/M/1 at rho 0.8, 10^5 and 10^6 customers: serQ, SimPy and Ciw one after the other in one
  process (benchmarks/mm1.py), CPU seconds; the ratios of customers per CPU second. Max RSS: each
  tool alone in a process of its own.
- serQ's engine iterations per CPU second with 16, 64 and 256 requests resident (the vLLM engine
  of examples/multi-turn/vllm.sq saturated by closed single-turn sessions: benchmarks/engine.py
  `residents_program`).
  With --baseline TREE, each of these runs is followed by the same run of TREE's serq (a git
  worktree of an older commit), in alternation, and the table adds the ratio of the two medians:
  a speed-up measured on one machine in one sitting, which a machine that is slower or faster
  today than on another day (shared hosts vary by 2x here) leaves as it is.
- Requests per CPU second of a single-turn vLLM workload of 20 000 requests (engine.py
  `single_turn_program`).
- Max RSS against the run's length (benchmarks/memory.py's cases).
- With --instructions: machine instructions per engine iteration at 64 residents, counted by
  valgrind's callgrind (benchmarks/instructions.py), beside --baseline's when given: the one figure
  here that the machine's load leaves as it is (not a time: see that script's docstring).
- Start-up: the wall time of `serq run --help` and of a 10-arrival `serq run` of
  examples/single-turn/mm1.sq, the parser's cache warm and cold (serq/syntax/larkcache.py).

CPU seconds (`time.process_time`) rather than wall: another busy process on a shared machine
disturbs them less. A benchmark, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable


def _tree() -> str:
    return os.environ.get("SERQ_TREE") or str(REPO)


def _commit(tree: str) -> str:
    try:
        commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", tree, "status", "--porcelain", "--", "serq"], capture_output=True,
                               text=True).stdout.strip()
        return f"{commit}{' + uncommitted changes in serq/' if dirty else ''}"
    except OSError:
        return "?"


def machine() -> list[str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor() or "?"
    commit = _commit(_tree())
    return [
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- CPU: {model}; {os.cpu_count()} logical cores (os.cpu_count)",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
        f"- serq: {_tree()} at {commit}",
    ]


def _json_lines(cmd: list[str], env: dict | None = None) -> list[dict]:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO, env=env)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _median(xs) -> float:
    return statistics.median(xs)


# ------------------------------------------------------------------ M/M/1
TOOLS = ("serQ", "SimPy", "Ciw")


def mm1(n: int, repeat: int) -> dict:
    """tool -> {cpu: [...], mean, maxrss_mb}: the three in one process per repetition (the order
    rotated between repetitions), then each alone for its max RSS."""
    runs: dict[str, list] = {t: [] for t in TOOLS}
    means: dict[str, float] = {}
    for r in range(repeat):
        order = TOOLS[r % 3:] + TOOLS[:r % 3]
        for row in _json_lines([PY, str(HERE / "mm1.py"), "--child", ",".join(order), str(n)]):
            runs[row["tool"]].append(row["cpu"])
            means[row["tool"]] = row["mean"]
    rss = {}
    for t in TOOLS:
        rss[t] = _json_lines([PY, str(HERE / "mm1.py"), "--child", t, str(n)])[0]["maxrss_mb"]
    return {t: {"cpu": runs[t], "mean": means[t], "maxrss_mb": rss[t]} for t in TOOLS}


def mm1_table(results: dict[int, dict]) -> list[str]:
    lines = ["| customers | tool | CPU s (median) | customers / CPU s | serQ is × faster | mean response | max RSS MB |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for n, res in results.items():
        serq = n / _median(res["serQ"]["cpu"])
        for t in TOOLS:
            cpu = _median(res[t]["cpu"])
            ratio = "" if t == "serQ" else f"{serq / (n / cpu):.2f}"
            lines.append(f"| {n:,} | {t} | {cpu:.2f} | {n / cpu:,.0f} | {ratio} | {res[t]['mean']:.4f} | "
                         f"{res[t]['maxrss_mb']:.0f} |")
    return lines


# ------------------------------------------------------------------ the engine
def child(kind: str, arg: int) -> None:
    """One engine measurement in this process: a JSON line with the process's max RSS."""
    import resource
    sys.path.insert(0, str(HERE))
    import engine
    if kind == "residents":
        r = engine.bench_residents(arg, horizon=100.0)
    elif kind == "requests":
        r = engine.bench_requests(arg)
    else:
        raise SystemExit(f"no child {kind!r}")
    r["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(r))


def _child_run(kind: str, arg: int, tree: str | None = None) -> dict:
    env = None if tree is None else dict(os.environ, SERQ_TREE=tree)
    return _json_lines([PY, str(Path(__file__).resolve()), "--child", kind, str(arg)], env)[0]


def _child_runs(kind: str, arg: int, repeat: int) -> list[dict]:
    return [_child_run(kind, arg) for _ in range(repeat)]


def residents_table(sizes, repeat: int, baseline: str | None = None) -> list[str]:
    """With `baseline` (a tree), each run is followed by the baseline's: both see the machine as it is then."""
    head = "| residents | mean residents | iterations | CPU s (median) | iterations / CPU s | max RSS MB |"
    rule = "|---:|---:|---:|---:|---:|---:|"
    if baseline:
        head += " baseline iterations / CPU s | × baseline |"
        rule += "---:|---:|"
    lines = [head, rule]
    for n in sizes:
        runs, base = [], []
        for _ in range(repeat):
            runs.append(_child_run("residents", n))
            if baseline:
                base.append(_child_run("residents", n, baseline))
        cpu = _median(r["cpu"] for r in runs)
        it = runs[0]["iterations"]
        row = (f"| {n} | {runs[0]['mean_residents']:.1f} | {it:,} | {cpu:.2f} | {it / cpu:,.0f} | "
               f"{_median(r['maxrss_mb'] for r in runs):.0f} |")
        if baseline:
            if base[0]["iterations"] != it:  # the same program and seed must run the same iterations
                raise SystemExit(f"run_all: the baseline ran {base[0]['iterations']} iterations at {n} residents, "
                                 f"this tree {it}: not the same run, no ratio")
            base_rate = it / _median(r["cpu"] for r in base)
            row += f" {base_rate:,.0f} | {(it / cpu) / base_rate:.2f} |"
        lines.append(row)
    return lines


def requests_table(n: int, repeat: int) -> list[str]:
    runs = _child_runs("requests", n, repeat)
    cpu = _median(r["cpu"] for r in runs)
    r0 = runs[0]
    return ["| requests | answered | iterations | mean residents | CPU s (median) | requests / CPU s | max RSS MB |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {n:,} | {r0['answered']:,} | {r0['iterations']:,} | {r0['mean_residents']:.1f} | {cpu:.2f} | "
            f"{n / cpu:,.0f} | {_median(r['maxrss_mb'] for r in runs):.0f} |"]


# ------------------------------------------------------------------ memory
def memory_table(mm1_sizes, vllm_sizes) -> list[str]:
    sys.path.insert(0, str(HERE))
    import memory
    rows = [memory.measure("mm1", n) for n in mm1_sizes] + [memory.measure("vllm", n) for n in vllm_sizes]
    lines = ["| case | N | max RSS MB | after imports and linking MB | the run adds MB | CPU s |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['n']:,} | {r['maxrss_mb']:.0f} | {r['before_mb']:.0f} | "
                     f"{r['maxrss_mb'] - r['before_mb']:.1f} | {r['cpu']:.2f} |")
    return lines


# ------------------------------------------------------------------ start-up
def _serq_command() -> tuple[list[str], str]:
    if os.environ.get("SERQ_TREE"):  # another checkout: its cli module
        return [PY, "-c", f"import sys; sys.path.insert(0, {_tree()!r}); from serq.cli import main; main()"], \
            f"{PY} -c 'from serq.cli import main; main()' ({_tree()})"
    exe = shutil.which("serq")
    if exe:
        return [exe], exe
    return [PY, "-m", "serq.cli"], f"{PY} -m serq.cli"


def _wall(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    return time.perf_counter() - t0


def startup_table(repeat: int) -> list[str]:
    serq, shown = _serq_command()
    run = [*serq, "run", "examples/single-turn/mm1.sq", "--arrivals", "10"]
    helpc = [*serq, "run", "--help"]
    lines = [f"`serq` is `{shown}`; wall seconds, median of {repeat}.", "",
             "| command | parser cache | wall s (median) | min |", "|---|---|---:|---:|"]
    warm = dict(os.environ)
    _wall(run, warm)  # the user's cache holds the parser from here on
    with tempfile.TemporaryDirectory() as d:
        for label, cmd in (("serq run --help", helpc), ("serq run mm1.sq --arrivals 10", run)):
            ws = [_wall(cmd, warm) for _ in range(repeat)]
            lines.append(f"| `{label}` | warm | {_median(ws):.2f} | {min(ws):.2f} |")
        cold = []
        for i in range(repeat):
            env = dict(os.environ, SERQ_CACHE_DIR=str(Path(d) / f"cold{i}"))  # empty: builds and saves it
            cold.append(_wall(run, env))
        lines.append(f"| `serq run mm1.sq --arrivals 10` | cold (first run) | {_median(cold):.2f} | {min(cold):.2f} |")
    return lines


# ------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (medians)")
    ap.add_argument("--quick", action="store_true", help="small sizes, one run each (a smoke test)")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="where to write the results ('-': nowhere)")
    ap.add_argument("--tree", help="measure the serq package of another checkout (e.g. a git worktree)")
    ap.add_argument("--baseline", help="also run the engine's iterations per CPU second with this checkout's serq, "
                    "alternating with this one's, and print the ratio")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions per engine iteration with valgrind (benchmarks/instructions.py)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.tree:
        os.environ["SERQ_TREE"] = str(Path(args.tree).resolve())
    if args.child:
        sys.path.insert(0, _tree())
        child(args.child[0], int(args.child[1]))
        return
    repeat = 1 if args.quick else args.repeat
    mm1_sizes = (10_000, 20_000) if args.quick else (100_000, 1_000_000)
    residents = (16, 64) if args.quick else (16, 64, 256)
    baseline = str(Path(args.baseline).resolve()) if args.baseline else None
    if baseline and not (Path(baseline) / "serq" / "sim").is_dir():
        raise SystemExit(f"run_all: --baseline {args.baseline}: no serq package there (a checkout's root is wanted)")
    requests = 2_000 if args.quick else 20_000
    mem_mm1 = (10_000,) if args.quick else (10_000, 100_000, 1_000_000)
    mem_vllm = (2_000,) if args.quick else (10_000, 100_000)

    sections: list[tuple[str, list[str]]] = []

    def section(title: str, lines: list[str]) -> None:
        sections.append((title, lines))
        print(f"\n## {title}\n", flush=True)
        print("\n".join(lines), flush=True)

    t0 = time.perf_counter()
    section("Machine", machine())
    section("M/M/1 (rho 0.8): serQ, SimPy and Ciw",
            [f"CPU seconds, median of {repeat}; the three in one process per run; max RSS of each alone.", ""]
            + mm1_table({n: mm1(n, repeat) for n in mm1_sizes}))
    engine_note = f"CPU seconds of 100 simulated seconds, median of {repeat}."
    if baseline:
        engine_note += (f" Baseline: {baseline} at {_commit(baseline)}, its runs alternating with this tree's "
                        "(each in a process of its own).")
    section("The engine: iterations per CPU second by residents",
            [engine_note, ""] + residents_table(residents, repeat, baseline))
    if args.instructions:
        sys.path.insert(0, str(HERE))
        import instructions
        section("The engine: instructions per iteration (callgrind)",
                instructions.table(64, 10.0 if args.quick else 30.0, baseline))
    section("A single-turn vLLM workload", [f"Median of {repeat}.", ""] + requests_table(requests, repeat))
    section("Memory against the run's length (benchmarks/memory.py)", memory_table(mem_mm1, mem_vllm))
    section("Start-up", startup_table(max(repeat, 3)))
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.out != "-":
        text = ["# Benchmark results", "",
                f"Written by `python3 benchmarks/run_all.py{' --quick' if args.quick else ''}"
                f"{f' --baseline {args.baseline}' if args.baseline else ''}"
                f"{' --instructions' if args.instructions else ''}` "
                "(see its docstring for what each figure is). Figures depend on the machine and on what else "
                "ran on it.", ""]
        for title, lines in sections:
            text += [f"## {title}", "", *lines, ""]
        Path(args.out).write_text("\n".join(text))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
