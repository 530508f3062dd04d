"""The interpreter's internal signals and run-time errors.

`RunError` is raised where a run-time rule is broken (an amount that is NaN, a
guard that is not 0 or 1, an index out of range, …). The engine turns it into
the project's `SerqError(kind="run")`, naming the session and the statement;
when the raiser does not know the statement, the engine finds it from the
generated code's line (see `serq.sim.compile`).
"""

from __future__ import annotations


class RunError(Exception):
    def __init__(self, message: str, loc=None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc


class Preempted(Exception):
    """Thrown into a thread's generator when a preempted hold is admitted again:
    the hold whose frame it names runs its body from the top."""

    __slots__ = ("frame",)

    def __init__(self, frame) -> None:
        super().__init__()
        self.frame = frame


class Refused(Exception):
    """Raised inside a thread whose session a pool refused (a request that can never fit)."""


class Unsupported(Exception):
    """A construct this interpreter does not run yet (a step stage's iterations)."""


def shown(v) -> str:
    """A number as a message shows it (the language's literal: serq.link.consts.format_number)."""
    from serq.link.consts import format_number  # (lazily: a run that reports no error never needs it)
    try:
        if v != v:
            return "NaN"
        return format_number(float(v))
    except (TypeError, ValueError, OverflowError):
        return repr(v)
