#!/usr/bin/env python3
"""The mutation-fuzzing campaign at any size (tests/fuzz/README.md):

    python3 scripts/fuzz.py --mutants 20000 --seed 7 [--jobs 2] [--save DIR] [--only 12,40]

Prints the counts per command and outcome class; exits 1 when any outcome is bad (a traceback,
an internal error, a hang, an unlocated refusal)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
