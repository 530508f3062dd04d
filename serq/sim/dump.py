"""`--dump DIR`: the run's samples and gauge change points as CSV files.

    DIR/report.json              the JSON report
    DIR/observe/NAME.csv         time,session,turn,value — every sample after the warm-up
    DIR/client/METRIC.csv        the same for ttft, tpot and response
    DIR/gauge/NAME.csv           time,value — every change point of the gauge, from time 0
"""

from __future__ import annotations

from pathlib import Path

from serq.errors import SerqError


def _write_samples(path: Path, s) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.write("time,session,turn,value\n")
        for t, sess, turn, v in zip(s.times, s.sessions, s.turns, s.values):
            f.write(f"{t!r},{sess},{turn},{v!r}\n")


def dump(result, directory: Path) -> None:
    E = result.engine
    try:
        (directory / "observe").mkdir(parents=True, exist_ok=True)
        (directory / "client").mkdir(exist_ok=True)
        (directory / "gauge").mkdir(exist_ok=True)
        (directory / "report.json").write_text(result.json(), encoding="utf-8")
        for s in E.observes:
            _write_samples(directory / "observe" / f"{s.name}.csv", s)
        for s in (E.client_ttft, E.client_tpot, E.client_response):
            _write_samples(directory / "client" / f"{s.name}.csv", s)
        for g in E.gauges:
            with (directory / "gauge" / f"{g.name}.csv").open("w", encoding="utf-8") as f:
                f.write("time,value\n")
                for t, v in zip(g.times, g.values):
                    f.write(f"{t!r},{v!r}\n")
    except OSError as e:
        raise SerqError(f"--dump {directory}: {e}", None, "usage") from None
