"""Samples, gauges and the summaries the report gives.

A sample set keeps the values recorded after the warm-up (and, with
`--dump`, their time, session and turn); a claim at end reads every value
from time 0, kept apart. A gauge keeps its change points (the latest
GAUGE_POINTS_IN_MEMORY in memory, the earlier ones in a temporary file) and is summarised
over [warmup, end] as a time average with a batch-means 95% confidence
interval over 20 equal windows, and the least and greatest value held for a
positive time.

Sample means get a 95% confidence interval by batch means too: the samples,
in the order recorded, in 20 batches of equal size (at least 40 samples),
the half-width t(0.975, 19)·s/√20 of the batch means.
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
import weakref
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


# Change points a gauge keeps in memory; past this bound, all but the last two are appended to an
# anonymous temporary file of the gauge's own (a vLLM engine has a change point about every
# iteration: kept whole, 16 bytes an instant, 1.5 GB at 10^7 requests). The summary reads them back
# in chunks of this size, so the report's peak memory is O(this bound) too.
GAUGE_POINTS_IN_MEMORY = 65_536
# `reading` may rewrite the last change point (another reading at the same instant) and then drop
# it (the value returns to the one before it, `values[-2]`): these stay in memory at a flush.
_POINTS_KEPT_AT_FLUSH = 2
_POINT = np.dtype([("time", np.float64), ("value", np.float64)])  # one change point in the file


class Gauge:
    """A function of the state, read at the end of every instant; its change points.

    The latest change points are in `times` and `values` (at most GAUGE_POINTS_IN_MEMORY); the
    earlier ones, if any, in `spilled` (a temporary file of (time, value) float64 pairs, opened at
    the first overflow, closed when the gauge is collected or the interpreter exits)."""

    __slots__ = ("name", "fn", "times", "values", "last", "spilled", "_close_spilled", "__weakref__")

    def __init__(self, name: str, fn) -> None:
        self.name = name
        self.fn = fn
        self.times = array("d")
        self.values = array("d")
        self.last = None
        self.spilled = None
        self._close_spilled = None

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
                if len(self.times) >= GAUGE_POINTS_IN_MEMORY:
                    self._spill()

    def _spill(self) -> None:
        """Append all but the last _POINTS_KEPT_AT_FLUSH change points to the file."""
        n = len(self.times) - _POINTS_KEPT_AT_FLUSH
        if self.spilled is None:
            self.spilled = tempfile.TemporaryFile()
            self._close_spilled = weakref.finalize(self, self.spilled.close)
        points = np.empty(n, dtype=_POINT)
        points["time"] = np.frombuffer(self.times, dtype=np.float64, count=n)
        points["value"] = np.frombuffer(self.values, dtype=np.float64, count=n)
        self.spilled.seek(0, os.SEEK_END)
        self.spilled.write(points.data)
        del self.times[:n]
        del self.values[:n]

    def close(self) -> None:
        """Close the file of spilled change points (they are gone: the gauge keeps only its latest)."""
        if self._close_spilled is not None:
            self._close_spilled()

    def change_points(self):
        """(times, values) float64 arrays, in order: the spilled change points, read back
        GAUGE_POINTS_IN_MEMORY at a time, then the ones in memory (views of them, no copy)."""
        if self.spilled is not None:
            self.spilled.flush()
            size = self.spilled.seek(0, os.SEEK_END)
            chunk_bytes = GAUGE_POINTS_IN_MEMORY * _POINT.itemsize
            for offset in range(0, size, chunk_bytes):
                self.spilled.seek(offset)
                points = np.frombuffer(self.spilled.read(min(chunk_bytes, size - offset)), dtype=_POINT)
                yield points["time"].copy(), points["value"].copy()
        if len(self.times):
            yield np.frombuffer(self.times, dtype=np.float64), np.frombuffer(self.values, dtype=np.float64)

    def summary(self, start: float, end: float) -> dict:
        """The time average over [start, end], its batch-means 95% CI over WINDOWS equal windows, and
        the least and greatest value held there for a positive time.

        The sums are worked chunk by chunk (change_points: the spilled ones, then those in memory):
        a gauge that never overflowed is one chunk, and its summary the same bits as a sum over all
        its change points at once; one that did gets its area and window sums added up chunk by
        chunk, which may differ from one sum over all of them in floating rounding only."""
        span = end - start
        out = {"mean": None, "ci95": None, "min": None, "max": None, "windows": WINDOWS}
        if (not len(self.times) and self.spilled is None) or not span > 0:
            return out
        edges = np.linspace(start, end, WINDOWS + 1)
        total = lowest = highest = window_sums = None
        chunks = self.change_points()
        try:
            pending = next(chunks)
            for following in itertools.chain(chunks, [None]):
                t, v = pending
                # the last change point of a chunk holds until the next chunk's first, the run's until `end`
                last_segment_end = end if following is None else following[0][0]
                sums = _chunk_sums(t, v, start, end, last_segment_end, edges)
                pending = following
                if sums is None:
                    continue
                if total is None:
                    total, lowest, highest, window_sums = sums
                else:
                    total += sums[0]
                    lowest = float(np.minimum(lowest, sums[1]))
                    highest = float(np.maximum(highest, sums[2]))
                    window_sums = [s + c for s, c in zip(window_sums, sums[3])]
        finally:
            chunks.close()
        if total is None:  # no value held for a positive time in [start, end]
            return out
        out["mean"] = total / span
        out["min"] = lowest
        out["max"] = highest
        m = np.asarray([s / (edges[k + 1] - edges[k]) for k, s in enumerate(window_sums)])
        if np.all(np.isfinite(m)):
            out["ci95"] = float(T_975_19 * np.std(m, ddof=1) / math.sqrt(WINDOWS))
        return out


def _chunk_sums(t, v, start: float, end: float, last_segment_end: float, edges):
    """Consecutive change points' share of a gauge summary over [start, end]: (area, least and greatest
    value held for a positive time, the area in each window), or None when none is held. Value v[i]
    holds over [t[i], t[i + 1]), the last one until `last_segment_end`; the value held at `start` is
    the last change at or before it."""
    # Worked in two buffers of the chunk's length, reused, rather than in a new array per step (with
    # ten of them alive at once, the report's peak memory was about three times what the run held).
    # Each buffer takes the values the array it stands for had: the same sums.
    lo = np.maximum(t, start)
    hi = _segment_ends_before(t, last_segment_end, end, np.empty_like(t))
    held = hi > lo
    if not np.any(held):
        return None
    dur = np.subtract(hi, lo, out=hi)
    dur[~held] = 0.0
    with np.errstate(invalid="ignore"):
        area = np.multiply(v, dur, out=lo)
        area[~held] = 0.0
        total = float(np.sum(area))
    lowest = float(np.min(v[held]))
    highest = float(np.max(v[held]))
    del held
    window_sums = []
    wl, wh = lo, hi
    for k in range(WINDOWS):
        a, b = edges[k], edges[k + 1]
        np.maximum(t, a, out=wl)
        _segment_ends_before(t, last_segment_end, b, wh)
        ok = wh > wl
        np.subtract(wh, wl, out=wh)
        with np.errstate(invalid="ignore"):
            np.multiply(v, wh, out=wh)
            wh[~ok] = 0.0
            window_sums.append(float(np.sum(wh)))
    return total, lowest, highest, window_sums
