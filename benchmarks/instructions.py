"""Machine instructions per engine iteration, counted by valgrind's callgrind: the engine's cost as a
figure that the machine's load and speed leave as it is.

    python3 benchmarks/instructions.py                          # 64 residents, 30 simulated seconds
    python3 benchmarks/instructions.py --residents 16 --horizon 60
    python3 benchmarks/instructions.py --baseline /tmp/serq-base   # beside another checkout's serq

Why: iterations per CPU second (benchmarks/engine.py, run_all.py) move by 10-20% with what else runs
on a shared two-core host, and a speed-up measured as alternated pairs moved from 1.7 to 2.2 between
a quiet machine and one with the other core busy. An instruction count is the same on every run of
the same Python, tree and inputs (callgrind simulates the CPU; it does not time it; the child's string
hashing is given one salt), so a change of a few percent in the hot loop shows as that change. It is not time: cache misses and mispredicted
branches cost cycles that instructions do not count (callgrind's --cache-sim and --branch-sim count
those too, slower), so the ratio of two trees' instructions is not their ratio of speed.

What is counted: one `simulate` call of the program of `engine.residents_program` (the vLLM engine
saturated with N residents), after a one-second warm-up run in the same process (imports, the
parser, the IR compiled to Python and first calls are outside the count), and nothing else: the
call runs inside `functools.reduce`, and callgrind collects only while that C function is on the
stack (`--collect-atstart=no --toggle-collect=functools_reduce`). Needs valgrind (Debian's package
`valgrind`) and a libpython with its symbols (pyenv's and Debian's builds have them). About a minute
and a half per tree at the defaults; a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# the C function whose calls callgrind counts: the measured call is the only `functools.reduce`
# in the child (the interpreter calls none)
_TOGGLE = "functools_reduce"


def child(residents: int, horizon: float) -> None:
    """In the process callgrind runs: the warm-up, then the counted call; a JSON line."""
    import functools
    sys.path.insert(0, str(HERE))
    import engine  # noqa: E402  (puts SERQ_TREE's serq first on the path)
    from serq.sim import simulate

    prog = engine.residents_program(residents)
    simulate(prog, horizon=1.0, seed=1)  # imports, lazy modules and first calls, not counted

    def counted(_acc, _item):
        return simulate(prog, horizon=horizon, seed=1)

    result = functools.reduce(counted, [None], None)
    st = next(s for s in result.report["stages"] if s["service"] == "step")
    print(json.dumps({"iterations": st["iterations"], "mean_residents": st["mean_busy"],
                      "answered": result.report["turns"]["answered"]}))


def count(tree: str | None, residents: int, horizon: float) -> dict:
    """Run the child under callgrind with TREE's serq (None: this checkout's): its figures and the
    instructions it counted."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("instructions: valgrind is not installed (Debian: apt-get install valgrind)")
    # (string hashing salted per process moves the count by a few hundred instructions an iteration
    # between runs: one fixed salt makes a rerun count what the first run counted)
    env = dict(os.environ, PYTHONHASHSEED="0")
    if tree is not None:
        env["SERQ_TREE"] = tree
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "callgrind.out"
        proc = subprocess.run(
            [valgrind, "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={_TOGGLE}",
             f"--callgrind-out-file={out}", sys.executable, str(Path(__file__).resolve()),
             "--child", str(residents), repr(horizon)],
            env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"instructions: the child failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    refs = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if refs is None:
        raise SystemExit(f"instructions: no instruction count in callgrind's output:\n{proc.stderr[-2000:]}")
    instructions = int(refs.group(1).replace(",", ""))
    if instructions == 0:
        raise SystemExit(f"instructions: callgrind counted nothing: this Python ({sys.executable}) has no "
                         f"symbol `{_TOGGLE}` (a stripped libpython?)")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    r["instructions"] = instructions
    return r


def table(residents: int, horizon: float, baseline: str | None = None) -> list[str]:
    """The markdown lines of run_all.py's section (and this script's output)."""
    rows = [("this tree", count(None, residents, horizon))]
    if baseline:
        rows.append((f"baseline ({baseline})", count(baseline, residents, horizon)))
    lines = [f"{residents} residents, {horizon:g} simulated seconds; instructions of the `simulate` call alone "
             "(callgrind, `benchmarks/instructions.py`).", "",
             "| tree | iterations | answered | instructions | per iteration | × fewer than the baseline |",
             "|---|---:|---:|---:|---:|---:|"]
    per = [r["instructions"] / r["iterations"] for _, r in rows]
    for (name, r), p in zip(rows, per):
        ratio = f"{per[-1] / p:.2f}" if baseline and name == "this tree" else ""
        lines.append(f"| {name} | {r['iterations']:,} | {r['answered']:,} | {r['instructions']:,} | {p:,.0f} | {ratio} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--residents", type=int, default=64)
    ap.add_argument("--horizon", type=float, default=30.0, help="simulated seconds of the counted run")
    ap.add_argument("--baseline", help="also count another checkout's serq (its root: a git worktree)")
    ap.add_argument("--child", nargs=2, metavar=("RESIDENTS", "HORIZON"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), float(args.child[1]))
        return
    if args.residents < 1 or not args.horizon > 0:
        raise SystemExit("instructions: --residents is at least 1 and --horizon positive")
    baseline = None
    if args.baseline:
        baseline = str(Path(args.baseline).resolve())
        if not (Path(baseline) / "serq" / "sim").is_dir():
            raise SystemExit(f"instructions: --baseline {args.baseline}: no serq package there (a checkout's root)")
    print("\n".join(table(args.residents, args.horizon, baseline)))


if __name__ == "__main__":
    main()
