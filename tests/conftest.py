"""Shared pytest configuration.

Tests marked `lean` need a working Lean (native lake, or the offline toolchain that
`python3 scripts/install_lean.py` installs). Without one they are skipped with a loud
reason and a banner in the summary; in CI (`CI=true`, or `SERQ_REQUIRE_LEAN=1`) they
fail instead, so that proofs never go unchecked silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}


def lean_required() -> bool:
    return (os.environ.get("CI", "").strip().lower() in _TRUE
            or os.environ.get("SERQ_REQUIRE_LEAN", "").strip().lower() in _TRUE)


def lean_unavailable_reason() -> str | None:
    """None when a Lean toolchain is installed and usable, else why not."""
    from serq.leangen.build import LeanError, load_toolchain

    try:
        load_toolchain(REPO)
    except LeanError as e:
        return str(e)
    return None


_skipped_lean: list[str] = []
_LEAN_SKIP = "LEAN UNAVAILABLE, PROOF TEST NOT RUN"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("lean") is None:
        return
    reason = lean_unavailable_reason()
    if reason is None:
        return
    if lean_required():
        pytest.fail(f"LEAN UNAVAILABLE IN CI: {reason}", pytrace=False)
    pytest.skip(f"{_LEAN_SKIP}: {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """The DRT lines a test reported go on its report (in the process that ran it)."""
    from helpers import DRT_PENDING

    report = yield
    if DRT_PENDING:
        report.user_properties.extend(("drt", line) for line in DRT_PENDING)
        DRT_PENDING.clear()
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the DRT lines and the skipped Lean tests from every report (in the process that prints
    the summary: the only one without pytest-xdist, the controller with it)."""
    from helpers import DRT_SUMMARY

    DRT_SUMMARY.extend(line for key, line in report.user_properties if key == "drt")
    if report.skipped and _LEAN_SKIP in str(report.longrepr):
        _skipped_lean.append(report.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    from helpers import DRT_SUMMARY

    if DRT_SUMMARY:
        terminalreporter.write_sep("=", "differential testing (tests/drt)")
        for line in DRT_SUMMARY:
            terminalreporter.write_line(line)
    if _skipped_lean:
        terminalreporter.write_sep(
            "!", f"{len(_skipped_lean)} Lean test(s) SKIPPED: no Lean toolchain; "
                 "run `python3 scripts/install_lean.py` (in CI they fail)",
            red=True, bold=True)
