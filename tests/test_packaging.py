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
LOCAL = {"serq", "helpers", "simtools", "strategies", "conftest", "extras", "fuzz"}  # fuzz: tests/fuzz/


def _declared() -> dict[str, set[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs}
    extras = project.get("optional-dependencies", {})
    runtime = names(project["dependencies"])
    return {"serq": runtime | _optional(), "tests": runtime | names(extras.get("test", [])),
            "benchmarks": runtime | names(extras.get("test", [])) | names(extras.get("bench", [])),
            "scripts": runtime}


def _absolute_imports(tree: ast.AST):
    """Each `import m` / `from m import …` (not relative) in the tree: (the node, the modules named)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node, [node.module]


def _imports(folder: str) -> dict[str, str]:
    """Third-party top-level modules imported under `folder` -> a file that imports it."""
    found: dict[str, str] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        for node, mods in _absolute_imports(ast.parse(path.read_text(encoding="utf-8"))):
            for m in mods:
                top = m.split(".")[0]
                # a module beside the importing file, or at the folder's top (benchmarks/run_all.py
                # imports memory.py; tests/drt/test_kernel_drt.py imports kernel_strategies.py)
                sibling = (path.parent / f"{top}.py").exists() or (REPO / folder / f"{top}.py").exists()
                if top not in sys.stdlib_module_names and top not in LOCAL and not sibling:
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


# serq's optional extras: `pip install 'serq[NAME]'` brings the distributions of one feature
FEATURE_EXTRAS = ("plot", "ray", "parquet", "pandas")


def _feature_distributions() -> dict[str, set[str]]:
    """Each feature extra -> the distributions it brings (names as pyproject writes them, lowercased)."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("optional-dependencies", {})
    return {e: {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in extras.get(e, [])}
            for e in FEATURE_EXTRAS}


def _optional() -> set[str]:
    return set().union(*_feature_distributions().values())


def _extra_of(dist: str) -> str:
    return next(e for e, dists in _feature_distributions().items() if dist in dists)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else list(handler.type.elts)
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def test_an_optional_import_is_inside_a_function_and_says_what_to_install():
    # a plain `pip install .` must import every serq module: an extra's import stands in a function,
    # in a `try` whose ImportError handler names the extra (`pip install 'serq[plot]'`)
    optional = _optional()
    assert {"matplotlib", "ray", "pyarrow", "pandas"} <= optional
    bad = []
    for path in sorted((REPO / "serq").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node, mods in _absolute_imports(tree):
            for m in mods:
                dist = DISTRIBUTION.get(m.split(".")[0], m.split(".")[0]).lower()
                if dist not in optional:
                    continue
                chain, n = [], node
                while n in parents:
                    n = parents[n]
                    chain.append(n)
                in_function = any(isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) for c in chain)
                tries = [c for c in chain if isinstance(c, ast.Try) and node in ast.walk(ast.Module(c.body, []))]
                says = any(f"serq[{_extra_of(dist)}]" in ast.unparse(h) for t in tries for h in t.handlers
                           if _catches_import_error(h))
                if not (in_function and says):
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: import {m}")
    assert not bad, "an optional import outside a function, or without an ImportError naming its extra: " + str(bad)


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
