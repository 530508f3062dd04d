"""Step engines in the interpreter: the vLLM oracle scenarios reproduced exactly, and scenarios whose
iterations are computed by hand (docs/engines.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simtools import REPO, run_example
from serq.oracle import load_scenario
from serq.sim.oracle_run import compare, run_scenario

ORACLE = REPO / "tests" / "data" / "oracle"
SCENARIOS = sorted(ORACLE.glob("vllm-v1*/*.json"))


def test_every_oracle_set_is_here():
    sets = {p.parent.name for p in SCENARIOS}
    assert sets == {"vllm-v1", "vllm-v1-random", "vllm-v1-cache"} and len(SCENARIOS) == 33


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_oracle_scenario_reproduced_exactly(path: Path):
    sc = load_scenario(path)
    run = run_scenario(sc)
    rows = compare(sc, run)
    assert rows and len(rows) == len(sc.expected)
    bad = [(rid, want, got) for rid, want, got, same in rows if not same]
    assert not bad, f"{sc.name}: (id, vLLM (first, last, preemptions, cached), serQ): {bad}"


def test_vllm_multi_turn_example_runs_with_its_claims():
    rep = run_example("multi-turn/vllm.sq", horizon=100.0, seed=3)
    claims = {c["name"]: c for c in rep["claims"]}
    assert claims["budget_respected"]["result"] == "holds"
    assert claims["some_full_batch"]["result"] in ("witnessed", "not witnessed")
    st = rep["stages"][0]
    assert st["service"] == "step" and st["iterations"] > 1000 and st["tokens"] > 0
    assert rep["client"]["ttft"]["count"] > 0 and rep["client"]["tpot"]["count"] > 0
    assert rep["client"]["ttft"]["min"] > 0
