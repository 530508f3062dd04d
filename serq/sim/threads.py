"""Threads: a session's main thread, which carries the session's own state, and its legs.

The event loop (`serq.sim.engine`) runs them; the holds (`serq.sim.holds`) and the stages
(`serq.sim.stages`, `serq.sim.steps`) suspend and resume them by their `state`.
"""

from __future__ import annotations

import math

# thread states
IDLE, READY, RUNNING, AT_STAGE, QUEUED, GROWING, JOINING, DONE = range(8)
READY_LIMIT = 1000

MAIN, LEG, MACHINE = 0, 1, 2


class Thread:
    """A session's main thread, which carries the session's own state, or one of its legs.

    `sess` is the main thread (itself for a main thread). Fields a thread
    rarely sets are class defaults, so creating a session costs little.
    """

    # a thread's own
    state = IDLE
    token = 0  # the sequence number of its live completion at a stage
    where = None  # the stage or pool member it waits at
    # an exception to resume it with (a preempted hold admitted again); also set on each thread as
    # it is made: the event loop reads it at every resumption, and CPython 3.11 specializes no read
    # of a class attribute through an instance (each costs a generic lookup)
    throw = None
    n = 0  # statements its loops executed since time n_t (the limit's count)
    n_t = -1.0
    ready_t = -1.0
    ready_n = 0
    t_stage = 0.0
    grow_req = None
    leg_no = 0
    frames = ()  # its holds, outermost first (a list once it holds)
    leases = ()  # its leases (on a main thread: the session's)
    # the session's (on its main thread)
    legs = ()  # a session's live legs
    legs_live = 0
    ended = False
    turns = 0
    t0 = 0.0
    t_arrive = 0.0
    in_turn = False
    stuck = False
    trace = None
    trace_pos = 0
    leg_count = 0
    refused = False
    first_token = None  # the time of the turn's first output token (an iteration's end)
    out_tokens = 0  # its output tokens after the first
    # an engine's requests (serq.sim.steps)
    adm_no = 0  # the sequence number of the thread's latest admission
    job = None  # its run at a step stage
    chained = False  # its prefill run carried the decode after it, which has ended (StepStage.chain_decode)
    ndec = 0  # the turn's decode tokens
    ttft_rec = False
    turn_pre = 0  # the turn's preemptions
    turn_cached = None  # the prefix its first admission in the turn consumed
    first_start = None  # the start of the iteration that sampled the first token
    last_start = None  # the start of the iteration that committed its last token
    trace_no = None  # the trace session it replays
    fork_loc = None  # a leg: where it was forked
    t_answered = -math.inf  # when its latest turn was answered (its next turn was created then)

    def __init__(self, sess, A: dict, kind: int, serial: int) -> None:
        self.sess = sess if sess is not None else self
        self.A = A
        self.kind = kind
        self.serial = serial
        self.throw = None

    def describe(self) -> str:
        S = self.sess
        s = f"session {S.serial}"
        if S.turns:
            s += f" (turn {S.turns})"
        if self.kind == LEG:
            s += f", leg {self.leg_no}"
        return s


class _Itself:
    """`MainThread.sess` once a session has ended: the session itself, read through the class.

    While a session lives, `sess` is an instance attribute (the hot path reads it at every
    statement); that is a reference from the session to itself, a cycle the run's disabled cyclic
    collector would never free. `forget_itself` drops the attribute when the session ends, and this
    non-data descriptor answers for it from then on, holding no reference."""

    def __get__(self, obj, cls=None):
        return self if obj is None else obj


class MainThread(Thread):
    """A session: its main thread."""

    kind = MAIN
    sess = _Itself()

    def __init__(self, A: dict, serial: int) -> None:
        self.sess = self
        self.A = A
        self.serial = serial
        self.throw = None


class EngineSession(MainThread):
    """A session of a program with a step engine: a `MainThread` whose class knows its usual fields.

    CPython 3.11 keeps a class's instance fields in one array per instance, indexed by a key table
    the class's instances share; a field missing from the table when an instance stores it moves that
    instance's fields into a dict of its own for good (every later read and store a dict lookup, its
    reads unspecialized). The table learns a name from a store to an instance, but each instance made
    shrinks the room left to learn, down to one name: the 64 sessions of a closed(64) workload are
    made at once, before any of them sets more than its first fields, so every session of such a run
    kept a dict (3% of an engine iteration's instructions, benchmarks/instructions.py). One throwaway
    instance storing the usual fields fills the table first (`_learn_field_names`).

    A class of its own because the taught table costs elsewhere: every instance then carries an
    inline array of all the names, and the million short sessions of an M/M/1 run, which set a dozen
    fields, ran 15% slower with it (benchmarks/mm1.py). `serq.sim.build` picks this class when the
    program has a step stage (`Engine.session_class`)."""


def _learn_field_names(cls, names: tuple) -> None:
    """Fill `cls`'s shared key table with `names` (EngineSession says why), before any real instance."""
    scratch = object.__new__(cls)
    for name in names:
        setattr(scratch, name, None)


# the fields the sessions of examples/' engine programs set, the most often set first (at most 30:
# CPython 3.11's limit for a shared key table)
_learn_field_names(EngineSession, (
    "state", "ready_n", "ready_t", "in_turn", "where", "last_start", "token", "turns", "out_tokens",
    "ndec", "t0", "gen", "job", "first_token", "first_start", "turn_cached", "ttft_rec", "t_stage",
    "throw", "t_arrive", "serial", "A", "ended", "turn_pre", "adm_no", "sess", "frames", "chained",
    "t_answered", "w_stage"))

Session = MainThread


def forget_itself(S: Thread) -> None:
    """Cut an ended session's reference to itself (`_Itself`), so that freeing it needs no collector.
    (`del`, not `__dict__.pop`: reading `__dict__` would build the instance's dict.)"""
    try:
        del S.sess
    except AttributeError:
        pass


_new = object.__new__  # a thread without calling __init__ (Engine.arrive, the arrivals' hot path)
