#!/usr/bin/env python3
"""Write the Lean statements of the claims of every program under examples/papers/.

    python3 scripts/gen_lean_claims.py          # (re)write examples/papers/Papers/Claims/*.lean
    python3 scripts/gen_lean_claims.py --check  # exit 1 naming each claim whose statement or proof is stale

One module per program (`examples/papers/Papers/Claims/<Program>.lean`); the proofs are in
`examples/papers/ClaimsProved.lean`. `serq lean check` runs the same check.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serq.errors import SerqError  # noqa: E402
from serq.leangen.claims import stale_claims, write_modules  # noqa: E402


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        problems = stale_claims(ROOT)
        for p in problems:
            print(p.render(ROOT), file=sys.stderr)
        return 1 if problems else 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        for path in write_modules(ROOT):
            print(path.relative_to(ROOT))
    except SerqError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
