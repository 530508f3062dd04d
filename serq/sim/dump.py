"""`--dump DIR`: the run's samples and gauge change points as CSV files.

    DIR/report.json              the JSON report, written last (each file whole, under a temporary
                                 name renamed over it): a folder with a report.json is complete
    DIR/observe/NAME.csv         time,session,turn,value — every sample after the warm-up
    DIR/client/METRIC.csv        the same for ttft, tpot and response
    DIR/gauge/NAME.csv           time,value — every change point of the gauge, from time 0
"""

from __future__ import annotations

import os
from pathlib import Path

from serq.errors import SerqError


def _atomic(path: Path, lines) -> None:
    """Write a file whole: to a temporary name beside it, then renamed over it, so that a reader
    (or an interrupted run) never sees half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for line in lines:
                f.write(line)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _samples(s):
    yield "time,session,turn,value\n"
    for t, sess, turn, v in zip(s.times, s.sessions, s.turns, s.values):
        yield f"{t!r},{sess},{turn},{v!r}\n"


def _gauge(g):
    yield "time,value\n"
    for times, values in g.change_points():  # (tolist: Python floats, whose repr the CSV has always had)
        for t, v in zip(times.tolist(), values.tolist()):
            yield f"{t!r},{v!r}\n"


def dump(result, directory: Path) -> None:
    """The samples and gauges, then report.json last: a folder with a report.json is complete."""
    E = result.engine
    try:
        (directory / "observe").mkdir(parents=True, exist_ok=True)
        (directory / "client").mkdir(exist_ok=True)
        (directory / "gauge").mkdir(exist_ok=True)
        for s in E.observes:
            _atomic(directory / "observe" / f"{s.name}.csv", _samples(s))
        for s in (E.client_ttft, E.client_tpot, E.client_response):
            _atomic(directory / "client" / f"{s.name}.csv", _samples(s))
        for g in E.gauges:
            _atomic(directory / "gauge" / f"{g.name}.csv", _gauge(g))
        _atomic(directory / "report.json", [result.json()])
    except OSError as e:
        raise SerqError(f"--dump {directory}: {e}", None, "usage") from None
