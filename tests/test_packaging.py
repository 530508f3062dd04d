"""Every import is declared: serq/'s in the project's dependencies (a plain `pip install .` runs every
command), tests/' in the `test` extra, benchmarks/' in the `bench` extra. CI also proves it by running
in fresh virtual environments (.ci/run); this finds an undeclared import without one."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

import pytest

from helpers import REPO

# import name -> distribution, where they differ
DISTRIBUTION = {"jinja2": "jinja2", "yaml": "pyyaml"}
LOCAL = {"serq", "helpers", "simtools", "strategies", "conftest"}


def _declared() -> dict[str, set[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs}
    extras = project.get("optional-dependencies", {})
    runtime = names(project["dependencies"])
    return {"serq": runtime, "tests": runtime | names(extras.get("test", [])),
            "benchmarks": runtime | names(extras.get("test", [])) | names(extras.get("bench", [])),
            "scripts": runtime}


def _imports(folder: str) -> dict[str, str]:
    """Third-party top-level modules imported under `folder` -> a file that imports it."""
    found: dict[str, str] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for m in mods:
                top = m.split(".")[0]
                if top not in sys.stdlib_module_names and top not in LOCAL:
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


@pytest.mark.parametrize("folder", ["serq", "tests", "benchmarks", "scripts"])
def test_every_import_is_declared(folder):
    declared = _declared()[folder]
    missing = {m: f for m, f in _imports(folder).items() if DISTRIBUTION.get(m, m).lower() not in declared}
    assert not missing, f"imported under {folder}/ but not declared in pyproject.toml: {missing}"


def test_the_oracle_program_ships_with_the_package():
    # `serq oracle` and the Lean fragment read it from the package, so a plain install has it
    from serq.oracle import ORACLE_PROGRAM
    assert ORACLE_PROGRAM.is_relative_to(REPO / "serq") and ORACLE_PROGRAM.exists()
    assert (REPO / "examples" / "oracle" / "vllm_request.sq").resolve() == ORACLE_PROGRAM
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["serq"]
    assert "programs/*.sq" in data and "programs/*.csv" in data
