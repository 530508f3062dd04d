"""A run's memory does not grow with the sessions that have ended: an ended session is freed by
reference counting alone (the run turns the cyclic collector off), so no session object outlives
its end. Counted, not timed."""

from __future__ import annotations

import gc
import math

import pytest

from helpers import REPO
from serq.link import link_file
from serq.sim.engine import Engine, MainThread


def _sessions_alive_after(program, arrivals: int) -> int:
    gc.collect()
    E = Engine(program, seed=1, horizon=math.inf, warmup=0.0, arrivals=arrivals)
    was = gc.isenabled()
    gc.disable()  # count what reference counting alone freed
    try:
        E.run()
        assert E.n_ended == arrivals
        return sum(1 for o in gc.get_objects() if isinstance(o, MainThread))
    finally:
        if was:
            gc.enable()


# The multi-turn engine program runs 2 000 and 6 000 sessions (about 3.3 turns each, a step engine's
# requests, holds and prefix cache): a session kept alive would show as thousands of objects either
# way, and 20 000 of them cost the suite a minute of CPU. The single-turn programs run 20 000.
@pytest.mark.parametrize("example, small_n, large_n", [("single-turn/mm1.sq", 2_000, 20_000),
                                                       ("single-turn/kv_pool.sq", 2_000, 20_000),
                                                       ("multi-turn/vllm.sq", 2_000, 6_000)])
def test_no_ended_session_stays_alive(example, small_n, large_n):
    program = link_file(REPO / "examples" / example)
    small = _sessions_alive_after(program, small_n)
    large = _sessions_alive_after(program, large_n)
    assert small == large == 0, (example, small, large)


def _gauge_summary_with_new_arrays(times, values, start: float, end: float) -> dict:
    """Gauge.summary as first written, a new array at every step (the reference for the buffers)."""
    import numpy as np

    from serq.sim.stats import T_975_19, WINDOWS
    span = end - start
    out = {"mean": None, "ci95": None, "min": None, "max": None, "windows": WINDOWS}
    if not len(times) or not span > 0:
        return out
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    seg_end = np.append(t[1:], end)
    lo = np.maximum(t, start)
    hi = np.minimum(seg_end, end)
    held = hi > lo
    if not np.any(held):
        return out
    dur = np.where(held, hi - lo, 0.0)
    with np.errstate(invalid="ignore"):
        total = float(np.sum(np.where(held, v * dur, 0.0)))
    out["mean"] = total / span
    out["min"] = float(np.min(v[held]))
    out["max"] = float(np.max(v[held]))
    edges = np.linspace(start, end, WINDOWS + 1)
    means = []
    for k in range(WINDOWS):
        a, b = edges[k], edges[k + 1]
        wl = np.maximum(t, a)
        wh = np.minimum(seg_end, b)
        ok = wh > wl
        with np.errstate(invalid="ignore"):
            means.append(float(np.sum(np.where(ok, v * (wh - wl), 0.0))) / (b - a))
    m = np.asarray(means)
    if np.all(np.isfinite(m)):
        out["ci95"] = float(T_975_19 * np.std(m, ddof=1) / math.sqrt(WINDOWS))
    return out


def test_a_gauge_summary_in_reused_buffers_is_the_one_in_new_arrays():
    """Gauge.summary works its sums in two reused buffers (the report's peak memory no longer ten
    arrays of the change points): the same bits as with a new array per step, on random change
    points with repeated times, infinities and NaN, and a window that starts or ends between them."""
    import random

    from serq.sim.stats import Gauge
    rng = random.Random(15)
    for case in range(400):
        n = rng.choice([1, 2, 3, 7, 40, 333, 2000])
        times = sorted(rng.choice([0.0, rng.uniform(0, 100), float(rng.randrange(50))]) for _ in range(n))
        values = [rng.choice([rng.uniform(-5, 5), float(rng.randrange(4)), math.inf, -math.inf, math.nan])
                  if rng.random() < 0.05 else rng.uniform(0, 1e6) for _ in range(n)]
        start = rng.choice([0.0, rng.uniform(0, 60), times[0]])
        end = rng.choice([start + rng.uniform(0, 80), times[-1], 100.0, start])
        g = Gauge("g", None)
        g.times.extend(times)
        g.values.extend(values)
        got = g.summary(start, end)
        want = _gauge_summary_with_new_arrays(times, values, start, end)
        assert repr(got) == repr(want), case
