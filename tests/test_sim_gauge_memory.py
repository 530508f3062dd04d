"""A gauge keeps at most GAUGE_POINTS_IN_MEMORY change points in memory (issue 15: a run's memory must
not grow with the run); the earlier ones go to a temporary file, and the summary reads them back in
chunks. With the bound made small, the change points, the summaries and a whole run's report are the
ones kept whole gives (the sums to within floating rounding); a run that never overflows opens no file.
Counted, not timed."""

from __future__ import annotations

import gc
import json
import math
import random

import pytest

from helpers import REPO
from serq.link import link_file
from serq.sim import simulate
from serq.sim import stats
from serq.sim.stats import Gauge

SMALL_BOUND = 8
WHOLE = 10**9  # a bound no test reaches: the gauge kept whole in memory, as before the bound


def _close(got, want) -> bool:
    """Equal, or both NaN, or within 1e-12 relative (the floating rounding of sums added by chunk)."""
    if got is None or want is None:
        return got is want
    if math.isnan(want):
        return math.isnan(got)
    if got == want:
        return True
    return math.isfinite(want) and abs(got - want) <= 1e-12 * abs(want)


def _assert_summaries_agree(got: dict, want: dict, where) -> None:
    assert got.keys() == want.keys(), where
    assert got["windows"] == want["windows"], where
    # the least and greatest value held are the same values, not sums: exact
    assert repr(got["min"]) == repr(want["min"]), where
    assert repr(got["max"]) == repr(want["max"]), where
    assert _close(got["mean"], want["mean"]), (where, got, want)
    assert _close(got["ci95"], want["ci95"]), (where, got, want)


def _readings(rng: random.Random, n: int, special: bool) -> list[tuple[float, float]]:
    """(value, time) readings as the engine makes them: a few at the same instant (the last one there
    stands), values from a small set so that many return to the one before (the point is dropped),
    now and then a fresh value (and with `special`, an infinity or NaN)."""
    now = 0.0
    out = []
    for _ in range(n):
        if rng.random() < 0.6:
            now += rng.choice([rng.expovariate(1.0), 0.5, 1.0])
        if special and rng.random() < 0.01:
            v = rng.choice([math.inf, -math.inf, math.nan])
        elif rng.random() < 0.7:
            v = float(rng.randrange(5))
        else:
            v = rng.uniform(-3.0, 1e4)
        out.append((v, now))
    return out


def _fed(readings, monkeypatch, bound: int) -> tuple[Gauge, int]:
    """A gauge fed the readings under `bound` (as Engine.read_gauges does: only a value that differs
    from the last), and the most change points it had in memory at once."""
    monkeypatch.setattr(stats, "GAUGE_POINTS_IN_MEMORY", bound)
    g = Gauge("g", None)
    most = 0
    for v, now in readings:
        if v != g.last:
            g.reading(v, now)
        most = max(most, len(g.times))
    return g, most


def _all_points(g: Gauge) -> tuple[list, list]:
    times, values = [], []
    for t, v in g.change_points():
        times += t.tolist()
        values += v.tolist()
    return times, values


@pytest.mark.parametrize("case", range(12))
def test_a_bounded_gauge_keeps_the_change_points_and_summary_of_one_kept_whole(case, monkeypatch):
    rng = random.Random(1500 + case)
    readings = _readings(rng, rng.choice([3, 9, 500, 4000]), special=case % 4 == 3)
    whole, _ = _fed(readings, monkeypatch, WHOLE)
    bounded, most = _fed(readings, monkeypatch, SMALL_BOUND)
    assert most <= SMALL_BOUND
    assert whole.spilled is None
    assert (bounded.spilled is not None) == (len(whole.times) >= SMALL_BOUND)
    assert repr(_all_points(bounded)) == repr((whole.times.tolist(), whole.values.tolist()))
    last = readings[-1][1]
    for start, end in [(0.0, last + 1.0), (last / 3, last), (rng.uniform(0, last), last + rng.uniform(0, 5)),
                       (last / 2, last / 2), (0.0, 0.0)]:
        monkeypatch.setattr(stats, "GAUGE_POINTS_IN_MEMORY", WHOLE)
        want = whole.summary(start, end)
        monkeypatch.setattr(stats, "GAUGE_POINTS_IN_MEMORY", SMALL_BOUND)  # read back 8 points at a time
        got = bounded.summary(start, end)
        _assert_summaries_agree(got, want, (case, start, end))
    bounded.close()


def test_a_change_point_kept_in_memory_at_a_flush_may_still_be_rewritten_or_dropped(monkeypatch):
    """The flush keeps the last two points: a reading at the same instant rewrites the last one, and
    one that returns to the value before drops it, as when the gauge is kept whole."""
    monkeypatch.setattr(stats, "GAUGE_POINTS_IN_MEMORY", 4)
    g = Gauge("g", None)
    for i, v in enumerate([1.0, 2.0, 3.0, 4.0]):  # the fourth fills the buffer: two go to the file
        g.reading(v, float(i))
    assert g.spilled is not None and list(g.times) == [2.0, 3.0]
    g.reading(3.0, 3.0)  # back to the value before, at the same instant: the point at 3.0 is dropped
    g.reading(7.0, 5.0)
    assert _all_points(g) == ([0.0, 1.0, 2.0, 5.0], [1.0, 2.0, 3.0, 7.0])
    g.close()


def test_the_file_of_spilled_points_is_closed_when_the_gauge_is_collected(monkeypatch):
    monkeypatch.setattr(stats, "GAUGE_POINTS_IN_MEMORY", SMALL_BOUND)
    g = Gauge("g", None)
    for i in range(3 * SMALL_BOUND):
        g.reading(float(i % 3), float(i))
    spilled = g.spilled
    assert spilled is not None and not spilled.closed
    del g
    gc.collect()
    assert spilled.closed


def _run(program, monkeypatch, bound: int, tmp_path=None, **kw):
    """A run under `bound`, its report, and the temporary files its gauges opened."""
    monkeypatch.setattr(stats, "GAUGE_POINTS_IN_MEMORY", bound)
    opened = []
    real = stats.tempfile.TemporaryFile

    def counted(*a, **k):
        f = real(*a, **k)
        opened.append(f)
        return f

    monkeypatch.setattr(stats.tempfile, "TemporaryFile", counted)
    result = simulate(program, keep_samples=tmp_path is not None, **kw)
    if tmp_path is not None:
        result.dump(tmp_path)
    report = json.loads(result.json())
    spilled = [g.name for g in result.engine.gauges if g.spilled is not None]
    for g in result.engine.gauges:
        g.close()
    monkeypatch.setattr(stats.tempfile, "TemporaryFile", real)
    return report, spilled, opened


@pytest.mark.parametrize("example, settings", [
    ("single-turn/renewal.sq", {"arrivals": 3_000, "seed": 3, "warmup": 50.0}),
    ("multi-turn/vllm.sq", {"arrivals": 150, "seed": 2, "warmup": 20.0}),
])
def test_a_run_with_its_gauges_spilled_reports_what_one_kept_whole_does(example, settings, monkeypatch,
                                                                       tmp_path):
    program = link_file(REPO / "examples" / example)
    whole, whole_spilled, whole_opened = _run(program, monkeypatch, WHOLE, tmp_path / "whole", **settings)
    small, small_spilled, small_opened = _run(program, monkeypatch, 64, tmp_path / "small", **settings)
    assert whole_spilled == [] and whole_opened == []  # nothing overflowed: no file
    assert small_spilled == list(whole["gauges"]) and len(small_opened) == len(small_spilled)  # one each
    assert all(f.closed for f in small_opened)
    for name in whole["gauges"]:
        _assert_summaries_agree(small["gauges"][name], whole["gauges"][name], name)
        # the dump writes every change point, the spilled ones included
        assert (tmp_path / "small" / "gauge" / f"{name}.csv").read_text() == \
            (tmp_path / "whole" / "gauge" / f"{name}.csv").read_text()
    del small["gauges"], whole["gauges"]
    assert small == whole
