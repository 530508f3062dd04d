"""Samples, gauges and the summaries the report gives.

A sample set keeps the values recorded after the warm-up (and, with
`--dump`, their time, session and turn); a claim at end reads every value
from time 0, kept apart. A gauge keeps its change points and is summarised
over [warmup, end] as a time average with a batch-means 95% confidence
interval over 20 equal windows, and the least and greatest value held for a
positive time.

Sample means get a 95% confidence interval by batch means too: the samples,
in the order recorded, in 20 batches of equal size (at least 40 samples),
the half-width t(0.975, 19)·s/√20 of the batch means.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

WINDOWS = 20
T_975_19 = 2.093024054408263  # scipy.stats.t.ppf(0.975, 19)


class SampleSet:
    __slots__ = ("name", "values", "times", "sessions", "turns", "all", "meta", "boolean_zero")

    def __init__(self, name: str, meta: bool = False, keep_all: bool = False) -> None:
        self.name = name
        self.values = array("d")
        self.meta = meta
        self.times = array("d") if meta else None
        self.sessions = array("q") if meta else None
        self.turns = array("q") if meta else None
        self.all = array("d") if keep_all else None

    def record(self, v: float, now: float, S, warmup: float) -> None:
        v = float(v)
        if self.all is not None:
            self.all.append(v)
        if now >= warmup:
            self.values.append(v)
            if self.meta:
                self.times.append(now)
                self.sessions.append(S.serial)
                self.turns.append(S.turns)

    def aggregate(self, fn: str) -> float:
        vals = self.all if self.all is not None else self.values
        if fn == "count":
            return float(len(vals))
        if not len(vals):
            return 0.0
        if fn == "total":
            return math.fsum(vals)
        if fn == "largest":
            return max(vals)
        if fn == "smallest":
            return min(vals)
        if fn == "prefix_total":
            s = sorted(vals)
            n = len(s)
            return math.fsum(v * (n - i) for i, v in enumerate(s))
        raise ValueError(fn)

    def summary(self) -> dict:
        return summarise(self.values)


def summarise(values) -> dict:
    n = len(values)
    if n == 0:
        return {"count": 0, "mean": None, "ci95": None, "std": None, "min": None, "max": None,
                "p50": None, "p90": None, "p95": None, "p99": None}
    x = np.frombuffer(values, dtype=np.float64) if isinstance(values, array) else np.asarray(values, dtype=float)
    finite = x[np.isfinite(x)]
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1)) if n > 1 else None
    out = {
        "count": n,
        "mean": mean,
        "ci95": batch_ci(x),
        "std": std,
        "min": float(np.min(x)),
        "max": float(np.max(x)),
    }
    for q in (50, 90, 95, 99):
        out[f"p{q}"] = float(np.percentile(finite, q)) if len(finite) else None
    return out


def _segment_ends_before(t, end: float, b, out):
    """min(segment end, b) for each change point's segment (the next change, the last one's `end`),
    into `out`: np.minimum(np.append(t[1:], end), b) without the appended array."""
    np.minimum(t[1:], b, out=out[:-1])
    out[-1] = np.minimum(end, b)
    return out


def batch_ci(x) -> float | None:
    """Half-width of the 95% CI of the mean by 20 batch means (None below 40 samples)."""
    n = len(x)
    if n < 2 * WINDOWS:
        return None
    size = n // WINDOWS
    means = np.asarray(x[: size * WINDOWS], dtype=float).reshape(WINDOWS, size).mean(axis=1)
    if not np.all(np.isfinite(means)):
        return None
    return float(T_975_19 * np.std(means, ddof=1) / math.sqrt(WINDOWS))


class Gauge:
    """A function of the state, read at the end of every instant; its change points."""

    __slots__ = ("name", "fn", "times", "values", "last")

    def __init__(self, name: str, fn) -> None:
        self.name = name
        self.fn = fn
        self.times = array("d")
        self.values = array("d")
        self.last = None

    def reading(self, v: float, now: float) -> None:
        """The value read at the end of an instant: a change point when it differs from the last
        (NaN after NaN does not). The engine calls it only when `v != last` (Engine.read_gauges)."""
        last = self.last
        if last is None or (v != last and not (v != v and last != last)):
            self.last = v
            if len(self.times) and self.times[-1] == now:
                self.values[-1] = v
                if len(self.values) > 1 and self.values[-2] == v:
                    self.times.pop()
                    self.values.pop()
            else:
                self.times.append(now)
                self.values.append(v)

    def summary(self, start: float, end: float) -> dict:
        span = end - start
        out = {"mean": None, "ci95": None, "min": None, "max": None, "windows": WINDOWS}
        if not len(self.times) or not span > 0:
            return out
        # The change points grow with the run (about one per iteration of an engine): the sums below
        # are worked in two buffers of their length, reused, rather than in a new array per step
        # (with ten of them alive at once, the report's peak memory was about three times what the
        # run holds). Each buffer takes the values the array it stands for had: the same sums.
        t = np.frombuffer(self.times, dtype=np.float64)
        v = np.frombuffer(self.values, dtype=np.float64)
        # each value holds over [t[i], t[i + 1]), the last one until `end`; the value held at `start`
        # is the last change at or before it
        lo = np.maximum(t, start)
        hi = _segment_ends_before(t, end, end, np.empty_like(t))
        held = hi > lo
        if not np.any(held):
            return out
        dur = np.subtract(hi, lo, out=hi)
        dur[~held] = 0.0
        with np.errstate(invalid="ignore"):
            area = np.multiply(v, dur, out=lo)
            area[~held] = 0.0
            total = float(np.sum(area))
        out["mean"] = total / span
        out["min"] = float(np.min(v[held]))
        out["max"] = float(np.max(v[held]))
        del held
        edges = np.linspace(start, end, WINDOWS + 1)
        means = []
        wl, wh = lo, hi
        for k in range(WINDOWS):
            a, b = edges[k], edges[k + 1]
            np.maximum(t, a, out=wl)
            _segment_ends_before(t, end, b, wh)
            ok = wh > wl
            np.subtract(wh, wl, out=wh)
            with np.errstate(invalid="ignore"):
                np.multiply(v, wh, out=wh)
                wh[~ok] = 0.0
                means.append(float(np.sum(wh)) / (b - a))
        m = np.asarray(means)
        if np.all(np.isfinite(m)):
            out["ci95"] = float(T_975_19 * np.std(m, ddof=1) / math.sqrt(WINDOWS))
        return out
