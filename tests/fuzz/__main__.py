"""`python3 scripts/fuzz.py --mutants 20000 --seed 7 [--jobs 2] [--save DIR] [--only 12,40]`:
a campaign at any size (tests/fuzz/README.md). Exits 1 when any outcome is bad."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .campaign import run_campaign


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 scripts/fuzz.py", description=__doc__)
    ap.add_argument("--mutants", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: 2)")
    ap.add_argument("--subprocess-every", type=int, default=50,
                    help="run every Nth case's first command as a subprocess too (0: none)")
    ap.add_argument("--save", type=Path, default=None, help="write every bad case here (file + cases.jsonl)")
    ap.add_argument("--only", default=None, help="the mutant indices to run, comma-separated")
    ap.add_argument("--json", type=Path, default=None, help="write the counts here as JSON")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    only = [int(x) for x in a.only.split(",")] if a.only else None
    last = [0.0]

    def progress(done, total, report):
        now = time.monotonic()
        if not a.quiet and (now - last[0] > 10 or done == total):
            last[0] = now
            print(f"  {done}/{total} mutants, {report.bad_total()} bad", file=sys.stderr, flush=True)

    report = run_campaign(a.mutants, a.seed, a.jobs, a.subprocess_every, a.save, only, progress)
    print(report.table())
    for case, o in report.bad[:40]:
        print(f"\n--- {case.id} {case.kind} {case.seed_file} {case.ops} :: {o.command} -> {o.klass} ({o.via})")
        print(o.detail[-800:])
    if a.json is not None:
        a.json.write_text(json.dumps(report.as_json(), indent=1, sort_keys=True) + "\n")
    return 1 if report.bad_total() else 0


if __name__ == "__main__":
    sys.exit(main())
