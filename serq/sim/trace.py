"""Trace replay: recorded sessions' arrivals and turns, from a CSV file.

The file (next to the program) has a header naming the columns
`session,arrive,new,out,think,forced` (an extra column is ignored, a missing one
is an error); each row is one turn, the rows of a session together and in
order. `session` is a whole number; `arrive` is the session's arrival time,
read from its first row. At every `turn;` the session's next trace turn sets
`new`, `out`, `think` and `forced`, and `more` is 1 on every turn of a session
but its last.

Arrivals: one run session per trace session, arriving at its `arrive` time
(sessions arriving at one instant in the file's order). `ordered`: the run
session replays the trace session that arrived; otherwise it replays a trace
session drawn uniformly from the run's trace stream.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from serq.errors import SerqError
from serq.sim.errors import RunError

COLUMNS = ("session", "arrive", "new", "out", "think", "forced")


class TraceReplay:
    def __init__(self, name: str, sessions: list[list[tuple[float, float, float, float]]], arrive: list[float],
                 ordered: bool, stream) -> None:
        self.name = name
        self.sessions = sessions
        self.arrive = arrive
        self.pending: list[int] = []
        self.ordered = ordered
        self.stream = stream

    @classmethod
    def load(cls, trace, base_dir, stream) -> "TraceReplay":
        path = Path(trace.file)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        sessions, arrive = read_trace(path)
        return cls(trace.file, sessions, arrive, trace.ordered, stream)

    def start(self, E) -> None:
        """One arrival per trace session, at its time."""
        self.E = E
        for i, t in enumerate(self.arrive):
            E.schedule(t, self._arrival, i)
        E.arrivals_open = False

    def _arrival(self, i: int, _seq) -> None:
        self.pending.append(i)
        E = self.E
        E.arrive()

    def assign(self, E, S) -> None:
        n = len(self.sessions)
        i = self.pending.pop() if self.pending else S.serial % n
        if not self.ordered:
            i = self.stream.below(n)
        S.trace = self.sessions[i]
        S.trace_no = i
        S.trace_pos = 0

    def turn(self, E, T) -> None:
        S = T.sess
        turns = S.trace
        if S.trace_pos >= len(turns):
            raise RunError(f"session {S.serial} takes turn {S.trace_pos + 1}, and its trace session has "
                           f"{len(turns)} turn(s): stop when `more` is 0")
        new, out, think, forced = turns[S.trace_pos]
        S.trace_pos += 1
        A = T.A
        A["new"] = new
        A["out"] = out
        A["think"] = think
        A["forced"] = forced
        A["more"] = 1.0 if S.trace_pos < len(turns) else 0.0


def read_trace(path: Path) -> tuple[list[list[tuple[float, float, float, float]]], list[float]]:
    """The trace sessions (each a list of (new, out, think, forced)) and their arrival times."""
    def bad(msg: str) -> SerqError:
        return SerqError(f"trace {path}: {msg}", None, "usage")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise bad("no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:  # ValueError: a NUL in the name
        raise bad(str(e)) from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise bad("empty file: the header names session,arrive,new,out,think,forced")
    header = [h.strip() for h in rows[0]]
    for c in COLUMNS:
        if c not in header:
            raise bad(f"no column `{c}`: the header names session,arrive,new,out,think,forced")
    col = {h: i for i, h in enumerate(header)}
    sessions: list[list] = []
    arrive: list[float] = []
    seen: set[str] = set()
    last = None
    for lineno, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise bad(f"line {lineno}: {len(row)} fields, the header has {len(header)}")
        sid = row[col["session"]].strip()
        try:
            sv = float(sid)
        except ValueError:
            sv = -1.0
        if not (sv >= 0 and sv == int(sv)):
            raise bad(f"line {lineno}: session `{sid}` is not a whole number")
        vals = []
        for c in ("new", "out", "think", "forced"):
            try:
                v = float(row[col[c]])
            except ValueError:
                raise bad(f"line {lineno}: `{c}` is {row[col[c]]!r}, not a number") from None
            if not (v >= 0 and math.isfinite(v)):
                raise bad(f"line {lineno}: `{c}` is {row[col[c]]}: a trace value is a nonnegative, finite number")
            vals.append(v)
        if sid != last:
            if sid in seen:
                raise bad(f"line {lineno}: the rows of session {sid} are not together")
            seen.add(sid)
            try:
                t = float(row[col["arrive"]])
            except ValueError:
                t = math.nan
            if not (t >= 0 and math.isfinite(t)):
                raise bad(f"line {lineno}: `arrive` is {row[col['arrive']]!r}: an arrival time is a nonnegative, "
                          "finite number")
            sessions.append([])
            arrive.append(t)
            last = sid
        sessions[-1].append(tuple(vals))
    if not sessions:
        raise bad("no sessions: the file has a header and no rows")
    return sessions, arrive
