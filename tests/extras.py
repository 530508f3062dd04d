"""What a test of an optional feature needs: an extra's package (matplotlib, ray, pyarrow, pandas)
or Graphviz's `dot` program.

Without it the test is skipped, loudly, naming what to install; in CI (`CI=true`, or
`SERQ_REQUIRE_EXTRAS=1`, which .ci/run sets) it fails instead, so that the drawings, plots and
Ray runs are never left untested silently (the pattern of SERQ_REQUIRE_LEAN in conftest.py).
"""

from __future__ import annotations

import importlib
import os
import shutil

import pytest

_TRUE = {"1", "true", "yes", "on"}


def extras_required() -> bool:
    return (os.environ.get("CI", "").strip().lower() in _TRUE
            or os.environ.get("SERQ_REQUIRE_EXTRAS", "").strip().lower() in _TRUE)


def _missing(what: str, install: str) -> None:
    if extras_required():
        pytest.fail(f"{what} UNAVAILABLE IN CI: {install}", pytrace=False)
    pytest.skip(f"{what} UNAVAILABLE, TEST NOT RUN: {install}")


def require(module: str, extra: str):
    """The module, or skip (fail in CI) saying `pip install 'serq[extra]'`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        _missing(module, f"pip install 'serq[{extra}]' (or '.[test]')")


def require_dot() -> str:
    """The path of Graphviz's `dot`, or skip (fail in CI)."""
    path = shutil.which("dot")
    if path is None:
        _missing("Graphviz's dot", "apt-get install graphviz (scripts/setup.sh does it when it can)")
    return path
