"""SIGINT and SIGTERM during `serq run`: the run stops, what it measured is reported and dumped,
and the command exits 128 + the signal's number (130, 143) without a traceback.

    with stop_signals() as sig:   # serq.sim.commands.run
        …                          # link, compile, run, report, dump, print
    sig.received                   # the first signal's number, or None

The first signal raises `Interrupted` (a KeyboardInterrupt, so that the engine's loop takes it as
Ctrl-C) while the program links, compiles or runs. Once the engine's loop has ended
(`STATE.after`, set by `Engine.run`) the report, the dump (report.json written last, atomically)
and the printing finish first: a signal then, or any signal after the first, only waits; the
command then exits as the first signal asks.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager


class Interrupted(KeyboardInterrupt):
    """The first SIGINT or SIGTERM of a run."""

    def __init__(self, signum: int) -> None:
        super().__init__()
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.received: int | None = None  # the first signal's number
        self.after = False                # the engine's loop has ended: the output is being written


STATE = _State()


def _handler(signum, frame) -> None:
    if STATE.received is None:
        STATE.received = signum
        if not STATE.after:
            raise Interrupted(signum)
    # a second signal, or one while the output is written: it waits for the output


@contextmanager
def stop_signals():
    """Handle SIGINT and SIGTERM as the module says while the body runs (in the main thread; in
    another the body runs with the handlers it has)."""
    STATE.received = None
    STATE.after = False
    old = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, _handler)
    except ValueError:  # not the main thread: signals are the main thread's
        for s, h in old.items():
            signal.signal(s, h)
        yield STATE
        return
    try:
        yield STATE
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def exit_code(default_interrupted: bool) -> int | None:
    """128 + the first signal's number, 130 for an interrupt without one (Ctrl-C under another
    handler), None when the run was not interrupted."""
    if STATE.received is not None:
        return 128 + STATE.received
    return 130 if default_interrupted else None
