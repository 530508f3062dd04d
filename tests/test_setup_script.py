"""scripts/setup.sh, a newcomer's first minutes: the example runs right after the install, before the
Lean build, whose progress says what is left; the end says what was set up and what to try next."""

from __future__ import annotations

import os
import subprocess

from helpers import REPO
from serq.leangen.build import progress_line

SETUP = REPO / "scripts" / "setup.sh"


def _dry_run() -> list[str]:
    r = subprocess.run(["bash", str(SETUP)], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "SERQ_SETUP_DRY_RUN": "1"})
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SETUP)]).returncode == 0


def test_the_example_runs_before_lean_and_the_end_says_what_to_try():
    lines = _dry_run()
    commands = [ln[2:] for ln in lines if ln.startswith("+ ")]

    def at(prefix: str) -> int:
        return next(i for i, c in enumerate(commands) if c.startswith(prefix))
    assert at("python3 -m pip install") < at("serq run examples/") < at("python3 scripts/install_lean.py") \
        < at("serq lean build")
    text = "\n".join(lines)
    tail = text[text.index("== what to try next"):]
    for cmd in ("serq draw", "serq sweep", "serq plot", "serq lean check", "python3 -m pytest -q"):
        assert cmd in tail
    assert "set up in" in text and "Graphviz dot" in text


def test_the_lean_build_says_how_many_modules_are_left_and_about_how_long():
    assert progress_line(1, 11, [], 10, 2) == "lean: 1 of 11 modules done; 10 left"
    # two modules took 2 and 5 minutes: 8 left on two processes, about 4 × 3.5 minutes
    assert progress_line(3, 11, [120.0, 300.0], 8, 2) == "lean: 3 of 11 modules done; 8 left, about 14 min"
    assert progress_line(11, 11, [60.0], 0, 2) == "lean: 11 of 11 modules done"
