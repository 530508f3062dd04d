"""Helpers for the interpreter's tests: run a program text or an example, replicate over seeds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy import stats

from serq.errors import SerqError
from serq.link import link_file
from serq.sim import simulate

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def run_text(text: str, tmp_path: Path, name: str = "prog.sq", supplied=None, **settings) -> dict:
    """Link and run a program text; the JSON report (as a dict)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    program = link_file(path, supplied)
    return simulate(program, base_dir=tmp_path, **settings).report


def run_error(text: str, tmp_path: Path, **settings) -> SerqError:
    try:
        run_text(text, tmp_path, **settings)
    except SerqError as e:
        return e
    raise AssertionError("the run did not fail")


def run_example(rel: str, supplied=None, **settings) -> dict:
    program = link_file(EXAMPLES / rel, supplied)
    return simulate(program, base_dir=(EXAMPLES / rel).parent, **settings).report


def replicate(rel: str, metric, n: int, supplied=None, **settings) -> tuple[float, float]:
    """Independent replications on seeds 1..n: the mean of `metric(report)` and its 95% CI half-width."""
    program = link_file(EXAMPLES / rel, supplied)
    vals = [metric(simulate(program, seed=seed, **settings).report) for seed in range(1, n + 1)]
    mean = float(np.mean(vals))
    half = float(stats.t.ppf(0.975, n - 1) * np.std(vals, ddof=1) / math.sqrt(n))
    return mean, half


def response(report: dict) -> float:
    return report["client"]["response"]["mean"]


def assert_covers(mean: float, half: float, exact: float) -> None:
    assert abs(mean - exact) <= half, f"the 95% CI {mean:.5f} ± {half:.5f} does not contain {exact:.5f}"


def observed(report: dict, name: str) -> list:
    """The values an observe recorded (its summary's min/max/mean for single values)."""
    return report["observes"][name]


def run_samples(text: str, tmp_path: Path, name: str = "prog.sq", **settings) -> dict:
    """Run a program keeping its samples: observe name -> [(session, value), …] in the order recorded."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = simulate(link_file(path), base_dir=tmp_path, keep_samples=True, **settings)
    out = {}
    for s in result.engine.observes:
        out[s.name] = list(zip(s.sessions, s.values))
    out["_report"] = result.report
    return out
