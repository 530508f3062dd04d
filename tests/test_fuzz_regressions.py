"""Every crash, hang or unlocated refusal the fuzzing campaign found stays fixed
(tests/fuzz/regressions/cases.json, tests/fuzz/README.md)."""

from __future__ import annotations

import pytest

from fuzz.harness import Case, Workspace, run_case
from fuzz.regress import load_cases, problems, run_regression

CASES = load_cases()


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return Workspace(tmp_path_factory.mktemp("fuzz-regressions"))


@pytest.mark.parametrize("entry", CASES, ids=[c["file"] for c in CASES])
def test_regression_case(entry, ws):
    outcomes = run_regression(entry, ws)
    assert not problems(entry, outcomes), (entry["cause"], problems(entry, outcomes))


def test_every_case_says_its_cause_and_every_file_is_listed():
    from fuzz.regress import FOLDER
    listed = {c["file"] for c in CASES}
    assert len(listed) == len(CASES)
    assert listed == {p.name for p in FOLDER.iterdir() if p.name != "cases.json"}
    assert all(c.get("cause") and c["kind"] in ("program", "ir", "oracle", "instance") for c in CASES)


@pytest.mark.parametrize("kind", ["sum", "number", "name", "comment"])
def test_a_megabyte_line(kind, ws):
    # generated, not kept: a 1 MB line where a number stands (a chain of 262 144 `+` took 11 s to parse
    # and then ran out of recursion; now the parser stops at the 64th level)
    from pathlib import Path

    from fuzz.harness import REPO
    text = (REPO / "examples/single-turn/mm1.sq").read_text()
    piece = {"sum": " + ".join(["1"] * (1 << 18)), "number": "1" * (1 << 20), "name": "n" * (1 << 20),
             "comment": "1 // " + "x" * (1 << 20) + "\n"}[kind]
    case = Case(f"mb-{kind}", "program", "examples/single-turn/mm1.sq",
                text.replace("let mean_service = 1;", f"let mean_service = {piece};").encode())
    outcomes = run_case(case, ws)
    assert outcomes[0].klass in ("ok", "refused") and outcomes[0].seconds < 5, outcomes[0]
    assert all(o.klass in ("ok", "refused", "usage") for o in outcomes), outcomes
