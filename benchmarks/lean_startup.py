"""What one start of the project's Lean costs: `lean --version`, and a file that imports only `Init`.

    python3 benchmarks/lean_startup.py [--repeat 3]

Every `serq lean build` module, every Lean-backed test and every compiled DRT batch pays this once
per process, so it is most of the build's time for the small modules. Prints wall and CPU seconds
(the child's user + system time) and max RSS per case, medians over --repeat runs. For the offline
Lean, docs/lean.md ("Installing Lean") gives the figures before and after the glue patches that
made a start five to seven times cheaper.

A benchmark, not a test: the figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMALL_FILE = """def double : Nat → Nat
  | 0 => 0
  | n + 1 => double n + 2
example : double 20 = 40 := by decide +kernel
theorem add_comm' (a b : Nat) : a + b = b + a := by omega
"""


def lean_command() -> tuple[list[str], dict]:
    """The installed Lean's command line and environment (scripts/install_lean.py's choice)."""
    toolchain = REPO / ".serq" / "toolchain.json"
    if not toolchain.exists():
        sys.exit("lean_startup: no Lean installed: run python3 scripts/install_lean.py")
    info = json.loads(toolchain.read_text())
    lean = info.get("lean")
    if not lean:
        sys.exit(f"lean_startup: {toolchain} names no lean")
    lean = [lean] if isinstance(lean, str) else list(lean)
    # the recorded command is relative to the repository where it lies in it
    lean[0] = str(REPO / lean[0]) if not os.path.isabs(lean[0]) else lean[0]
    return lean, dict(os.environ)


def measure(cmd: list[str], env: dict, cwd: str) -> tuple[float, float, float]:
    """(wall s, CPU s of the child, its max RSS in MB) of one run; exits on a failed run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # (the offline Lean's `--version` exits 24 after printing its version: the output says it ran)
    if r.returncode != 0 and not (cmd[-1] == "--version" and "Lean (version" in r.stdout):
        sys.exit(f"lean_startup: {' '.join(cmd)} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024.0  # the largest child so far: run the biggest case last


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    cmd, env = lean_command()
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "Small.lean"
        small.write_text(SMALL_FILE)
        rows = []
        for label, case in (("lean --version", ["--version"]), ("a file importing Init", [str(small)])):
            runs = [measure(cmd + case, env, tmp) for _ in range(args.repeat)]
            rows.append((label, statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                         max(r[2] for r in runs)))
    print(f"| case | wall s (median of {args.repeat}) | CPU s (median) | max RSS MB |")
    print("|---|---:|---:|---:|")
    for label, wall, cpu, rss in rows:
        print(f"| {label} | {wall:.1f} | {cpu:.1f} | {rss:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
