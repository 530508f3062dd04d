#!/usr/bin/env python3
"""Generate lean/Serq/Oracle*.lean: one theorem per shared vLLM oracle scenario.

    python3 scripts/gen_oracle_lean.py          # write the modules
    python3 scripts/gen_oracle_lean.py --check  # exit 1 if they are not what the scenarios give
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serq.leangen.oracle_lean import render_oracle_module  # noqa: E402

ORACLE = ROOT / "tests" / "data" / "oracle"
MODULES = {
    "Oracle.lean": ("vllm-v1", "The vLLM oracle: the deterministic scenarios"),
    "OracleRandom.lean": ("vllm-v1-random", "The vLLM oracle: the randomized scenarios"),
    "OracleCache.lean": ("vllm-v1-cache", "The vLLM oracle: multi-turn scenarios with prefix caching"),
}


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for module, (folder, title) in MODULES.items():
        text = render_oracle_module(sorted((ORACLE / folder).glob("*.json")), title)
        path = ROOT / "lean" / "Serq" / module
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("stale (run scripts/gen_oracle_lean.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
