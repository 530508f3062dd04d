"""The event loop: sessions and their threads, settling, arrivals, turns and the run.

Configuration (reference, *Semantics*): the clock; the live sessions, each a
main thread and its legs, with attributes, a continuation (the thread's
generator), a status, holds (frames) and leases; each pool's capacity,
holders, cache, queue and growers; each stage's jobs.

After every event the engine settles (`settle`): it runs every ready thread in
the order it became ready, then retries growers and admissions at every pool
not served by a step stage, in declaration order, until nothing changes. The
step-stage hook (`_start_iterations`) runs last, when no other event is
pending at the instant: each idle step stage then plans and starts an iteration
(serq.sim.steps, StepStage.start).

Events are heap entries `(time, seq, fn, arg)`; `seq` orders events at one
instant by the order they were scheduled, and a cancelled event is one whose
`seq` no longer matches what its target expects.

The threads are serq.sim.threads'; the holds and pools (admission, growth, preemption, leases,
the cache) are the engine's base `serq.sim.holds.Holds`.
"""

from __future__ import annotations

import gc
import itertools
import math
import sys
import time as _time
from collections import deque
from heapq import heappop, heappush

from serq.ir import models as ir
from serq.limits import COUNT_LIMIT, LIVE_LIMIT
from serq.sim.interrupts import STATE as _INTERRUPTS
from serq.sim.errors import Refused, RunError, shown as _num
from serq.errors import SerqError
from serq.syntax.ast import Span
from serq.sim.build import build
from serq.sim.compile import FILENAME
from serq.sim.holds import Holds
from serq.sim.pools import PoolMember, check_amount
from serq.sim.rng import DrawError, Streams
# (the thread states and classes, re-exported: serq.sim.build, oracle_run and the tests import them from here)
from serq.sim.threads import (AT_STAGE, DONE, GROWING, IDLE, JOINING, LEG, MACHINE, MAIN, QUEUED,  # noqa: F401
                              READY, READY_LIMIT, RUNNING, MainThread, Session, Thread, _new, forget_itself)


class Engine(Holds):
    # Slots for its fields, not the instance dict: an object of more than 30 attributes keeps them
    # in a dict of its own, and CPython 3.11 then specializes none of its method lookups
    # (`E.step(T)`, `self.make_ready(T)`, every call on the engine from the hot paths and the
    # generated code) and reads its fields by a hinted dict lookup. A field set elsewhere and not
    # named here still works (in the dict that Holds, without slots, leaves it); `end`, a method
    # and the run's end time, is one.
    __slots__ = (
        'program', 'seed', 'horizon', 'warmup', 'arrivals_limit', 'base_dir', 'keep_samples',
        'progress', 'now', 'heap', 'seq', 'seq_spent', 'release_seq', 'adm_seq', 'queue_seq',
        'ready', 'streams', 'mrng', 'events', 'n_arrived', 'n_ended', 'n_refused', 'n_rejected',
        'n_stuck', 'live', 'a_live', 't_live_sum', 't_measure', 'pre_live', 'pre_sum',
        'turns_started', 'turns_done', 'turns_answered', 'stepno', 'waiting', 'stop_reason',
        'attention', 'arrivals_open', 'interrupted', 'notes', 'turn_log', 'open_turns',
        'observe_log', 'all_pools', 'all_stages', 'arrive_extra', 'attr_template', 'claim_values',
        'claims', 'client_response', 'client_tpot', 'client_ttft', 'closed', 'flows', 'gap_fn',
        'gauges', 'gauges_on', 'givens', 'has_steps', 'init_fn', 'line_locs', 'observe_idx',
        'observe_index', 'observe_names', 'observes', 'pool_members', 'resp_all', 'resp_meta',
        'resp_values', 'session_fn', 'shared_stage_names', 'stage_members', 'start', 'step_stages',
        'trace', 'volatile_stages', 'plain_sessions', 'serial_read', 'session_class',
    )

    def __init__(self, program: ir.Program, *, seed: int, horizon: float, warmup: float,
                 arrivals: int | None, base_dir=None, keep_samples: bool = False, progress=None,
                 log_turns: bool = False) -> None:
        """`log_turns`: keep every turn's outcome (`turn_log`) and every observation (`observe_log`),
        for the comparisons of serq.sim.oracle_run and the differential tests; a run's memory then
        grows with its turns."""
        self.program = program
        self.seed = seed
        self.horizon = horizon
        self.warmup = warmup
        self.arrivals_limit = arrivals
        self.base_dir = base_dir
        self.keep_samples = keep_samples
        self.progress = progress
        self.now = 0.0
        self.heap: list = []
        self.seq = itertools.count(1)
        self.seq_spent = 0  # numbers the event count itself took from the sequence
        self.release_seq = itertools.count(1)
        self.adm_seq = itertools.count(1)
        self.queue_seq = itertools.count(1)
        self.ready: deque = deque()
        self.streams = Streams(seed)
        self.mrng = self.streams.machine
        self.events = 0
        self.n_arrived = 0
        self.n_ended = 0
        self.n_refused = 0
        self.n_rejected = 0
        self.n_stuck = 0
        self.live = 0
        self.a_live = 0.0  # the time-integral of the live sessions, since the measurement's start
        self.t_live_sum = 0.0  # the sum of the live sessions' arrival times
        self.t_measure = 0.0
        self.pre_live = 0  # sessions live at the warm-up, still live
        self.pre_sum = 0.0
        self.turns_started = 0
        self.turns_done = 0
        self.turns_answered = 0
        self.stepno = 0
        self.waiting: set = set()  # pool members with a queue or growers
        self.stop_reason = None
        self.attention = False
        self.arrivals_open = True
        self.interrupted = False
        self.notes: list[str] = []
        # (session, turn) -> how the turn ended and what an engine did for it (serq.sim.oracle_run)
        self.turn_log: dict | None = {} if log_turns else None
        self.open_turns: dict | None = {} if log_turns else None  # (session, turn) -> the session, until answered
        # (serial, turn_no, observe index, time, value) of every observation, in the order made
        self.observe_log: list | None = [] if log_turns else None
        build(self)

    # ================================================================ the loop
    def schedule(self, t: float, fn, arg=None) -> int:
        seq = next(self.seq)
        heappush(self.heap, (t, seq, fn, arg))
        return seq

    def make_ready(self, T: Thread) -> None:
        now = self.now
        if T.ready_t == now:
            T.ready_n += 1
            if T.ready_n > READY_LIMIT:
                raise self.located(RunError(f"it became ready {READY_LIMIT} times at one instant "
                                            f"({_num(now)}) without time passing"), T)
        else:
            T.ready_t = now
            T.ready_n = 1
        T.state = READY
        self.ready.append(T)

    def run(self) -> None:
        heap = self.heap
        # an event at time inf (a job of infinite work) never happens
        horizon = self.horizon if self.horizon != math.inf else sys.float_info.max
        ready = self.ready
        popleft = ready.popleft
        eoi = self.gauges_on or bool(self.volatile_stages) or bool(self.step_stages)
        self.attention = eoi
        progress = self.progress
        waiting = self.waiting
        finished = _FINISHED
        wall0 = _time.perf_counter()
        # The run makes no reference cycle that outlives a thread (a thread lets go of its
        # generator when it ends): the cyclic collector only costs time here.
        gc_was = gc.isenabled()
        gc.disable()
        try:
            self.start()
            self.settle()
            self.end_of_instant()
            # `while True`, not `while heap`: CPython 3.11 specializes (quickens) a function's
            # bytecode after a few calls or a few passes of an unconditional backward jump; a
            # `while heap:` loop ends in a conditional jump, which never counts, so this function,
            # called once, ran its whole loop unspecialized (an M/M/1 customer took a tenth more
            # instructions) unless a `continue` below happened to run
            while True:
                try:  # (no event left: the run is over; a handler, not a test per event)
                    t, seq, fn, arg = heappop(heap)
                except IndexError:
                    break
                if t > horizon:
                    heappush(heap, (t, seq, fn, arg))
                    break
                self.now = t
                T = fn(arg, seq)
                if T is not None or ready:
                    # settle: run the ready threads in the order they became ready (`step`
                    # inlined: this is the hot loop, and a call per resumed thread shows in the profile).
                    # An event that makes one thread ready while none is may return it instead of
                    # queueing it (a fifo or delay stage's completion, a Poisson arrival): it runs
                    # first, as it would have.
                    if T is None:
                        T = popleft()
                    while True:
                        T.state = RUNNING
                        try:
                            if T.throw is None:
                                if next(T.gen, finished) is finished and T.gen is not None:
                                    self.thread_done(T)
                            else:
                                exc, T.throw = T.throw, None
                                T.gen.throw(exc)
                        except StopIteration:
                            self.thread_done(T)
                        except Refused:
                            self.thread_refused(T)
                        except _ERRORS as e:
                            raise self.located(e, T) from None
                        if not ready:
                            break
                        T = popleft()
                if waiting:
                    self.settle()
                if self.attention:
                    if heap and heap[0][0] == t:
                        continue
                    if eoi:
                        self.end_of_instant()
                        if heap and heap[0][0] == t:
                            continue
                    if self.stop_reason is not None:
                        break
                if progress is not None and not seq & 4095:
                    self.events = self.events_processed()
                    progress(self, _time.perf_counter() - wall0)
        except KeyboardInterrupt:  # Ctrl-C, or serq run's SIGINT/SIGTERM (serq.sim.interrupts)
            _INTERRUPTS.after = True  # from here a signal waits for the report and the dump
            self.interrupted = True
            self.stop_reason = "interrupted"
        except _ERRORS as e:  # raised by the machine, not by a thread (a ps capacity, a key, a gauge)
            raise self.located(e) from None
        finally:
            _INTERRUPTS.after = True
            if gc_was:
                gc.enable()
        self.events = self.events_processed()
        self.finish()

    def events_processed(self) -> int:
        """Every event scheduled has been processed (stale ones included) or is still in the heap."""
        issued = next(self.seq) - 1
        self.seq_spent += 1
        return issued - self.seq_spent + 1 - len(self.heap)

    def run_ready(self) -> None:
        ready = self.ready
        step = self.step
        while ready:
            step(ready.popleft())

    def settle(self) -> None:
        while True:
            if self.ready:
                self.run_ready()
            if not self.waiting or not self.retry_pools():
                if not self.ready:
                    break

    def _start_iterations(self) -> bool:
        """The step-stage hook: once the instant has settled and no other event is pending at it,
        every idle step stage with residents or a waiting queue it serves plans an iteration
        (serq.sim.steps), in declaration order, each at most once per call; what an iteration's
        admissions made ready settles at once. True when something was tried."""
        heap = self.heap
        steps = self.step_stages
        if len(steps) == 1:  # one engine: no other stage to try again
            st = steps[0]
            if st.busy or not st.has_work():
                return False
            st.start()
            if self.ready or self.waiting:
                self.settle()
            return True
        tried = None
        acted = False
        while True:
            again = False
            for st in self.step_stages:
                if st.busy or not st.has_work():
                    continue
                if tried is None:
                    tried = set()
                elif id(st) in tried:
                    continue
                tried.add(id(st))
                acted = True
                again = True
                st.start()
                if self.ready or self.waiting:
                    self.settle()
                if heap and heap[0][0] == self.now:
                    return True
            if not again:
                return acted

    def end_of_instant(self) -> None:
        """The instant's events are done and settled: refresh state-reading ps capacities, start
        step iterations, and read the gauges once nothing else happens at this instant."""
        for st in self.volatile_stages:
            st.refresh()
        if self.heap and self.heap[0][0] == self.now:
            return
        if self.step_stages and self._start_iterations() and self.heap and self.heap[0][0] == self.now:
            return
        if self.gauges_on:
            self.read_gauges()

    def step(self, T: Thread) -> None:
        """Run a ready thread until it blocks or ends (its state says which, never RUNNING)."""
        T.state = RUNNING
        try:
            exc = T.throw
            if exc is None:
                if next(T.gen, _FINISHED) is _FINISHED and T.gen is not None:
                    self.thread_done(T)
            else:
                T.throw = None
                T.gen.throw(exc)
        except StopIteration:
            self.thread_done(T)
        except Refused:
            self.thread_refused(T)
        except _ERRORS as e:
            raise self.located(e, T) from None

    def thread_refused(self, T: Thread) -> None:
        T.state = DONE
        if T.kind == LEG:
            self.leg_done(T)

    # ================================================================ errors
    def located(self, e: Exception, T: Thread | None = None, loc=None) -> "SimRunError":
        """The run-time error as the project's error: the session, the statement, the message."""
        if isinstance(e, SimRunError):
            return e
        message = e.message if isinstance(e, RunError) else str(e)
        if isinstance(e, (ZeroDivisionError, OverflowError, ValueError, TypeError)) and not isinstance(e, RunError):
            message = f"{type(e).__name__}: {e}"
        loc = loc or getattr(e, "loc", None)
        if loc is None:
            tb = e.__traceback__
            line = None
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == FILENAME:
                    line = tb.tb_lineno
                tb = tb.tb_next
            if line is not None and 0 < line <= len(self.line_locs):
                loc = self.line_locs[line - 1]
        who = T.describe() if T is not None and T.kind != MACHINE else None
        return SimRunError(message, loc, who, self.now)

    def bad_guard(self, g: float) -> None:
        raise RunError(f"a guard is {_num(g)}: a branch or while guard is 0 or 1")

    def bad_amount(self, what: str, v: float) -> None:
        check_amount(v, what)

    def too_many(self, T: Thread) -> None:
        """A loop's statement count passed the limit: an error if all of it was at this instant."""
        if T.n_t != self.now:
            T.n_t = self.now
            T.n = 0
            return
        raise RunError(f"{T.describe()} executed a million statements at one instant: "
                       "a loop whose passes let no time pass")

    def count_of(self, v: float, what: str) -> int:
        if not (v >= 1 and v == int(v) and v <= COUNT_LIMIT):
            raise RunError(f"{what} is {_num(v)}: a count is a whole number from 1 to a million")
        return int(v)

    # ================================================================ sessions
    def arrive(self) -> Thread:
        """A new session: init, the given checks, and its main thread made ready."""
        serial = self.n_arrived
        self.n_arrived = serial + 1
        now = self.now
        self.live += 1
        if self.live > LIVE_LIMIT:
            self.arrive_over_limit()
        self.t_live_sum += now
        A = self.attr_template.copy()
        if self.serial_read:  # (no expression reads it: a store saved per session)
            A["serial"] = serial + 0.0
        T = _new(self.session_class)
        if not self.plain_sessions:
            # (a plain session reads its `sess` from the class, `_Itself`: it never refers to itself,
            # and neither setting nor forgetting the attribute costs its two unspecialized lookups)
            T.sess = T
        T.A = A
        T.serial = serial
        T.t_arrive = now
        T.turns = 0  # (its own from the start: `S.turns += 1` then reads no class default, a lookup not specialized)
        if self.arrive_extra:
            if self.trace is not None:
                self.trace.assign(self, T)
            if self.init_fn is not None:
                try:
                    self.init_fn(self, T, A)
                except _ERRORS as e:
                    raise self.located(e, T) from None
            if self.givens:
                self.check_given(T, A)
        T.gen = self.session_fn(self, T, A)
        T.throw = None
        T.state = READY
        T.ready_t = now
        T.ready_n = 1
        self.ready.append(T)
        return T

    def arrive_over_limit(self) -> None:
        """A session arrives while LIVE_LIMIT are live: the run stops before it exhausts memory."""
        raise RunError(f"{LIVE_LIMIT:_} sessions are live at once, the interpreter's bound (docs/language.md, "
                       "Limits): the workload arrives faster than the server answers; give a lower rate, "
                       "a shorter horizon or --arrivals N".replace("_", " "))

    def session_done(self, S: Thread) -> None:
        """The end of a session block (the generated code's call): the session ends."""
        if S.legs_live or S.ended or S.frames or S.leases or S.refused:
            S.gen = None
            self.thread_done(S)
            return
        if S.kind == MAIN:  # (a leg's `end` comes here too)
            try:  # forget_itself, written out (the hot path)
                del S.sess
            except AttributeError:
                pass
        self.plain_session_done(S)

    def plain_session_done(self, S: Thread) -> None:
        """`session_done` of a thread with no legs, holds, leases or refusal: what the generated code
        calls directly when the program has no statement that makes any (`build.plain_sessions`), so
        that an M/M/1 customer's end reads none of those fields (each a class default read through the
        instance, a lookup that CPython 3.11 does not specialize). Such a session's main thread never
        had `sess` of its own (`arrive`): nothing to forget."""
        S.gen = None
        S.ended = True
        S.state = DONE
        now = self.now
        self.turns_done += S.turns
        ta = S.t_arrive
        if ta >= self.t_measure:
            self.a_live += now - ta
        else:
            self.a_live += now - self.t_measure
            self.pre_live -= 1
            self.pre_sum -= ta
        self.t_live_sum -= ta
        live = self.live = self.live - 1
        self.n_ended += 1
        if self.closed:
            self.arrive()
        elif not live and self.arrivals_limit is not None and not self.arrivals_open:
            self.stop_reason = "drained"
            self.attention = True

    def thread_done(self, T: Thread) -> None:
        # the generator's frame refers to the thread: let go of it, so no cycle outlives the thread
        T.gen = None
        if T.kind == MAIN and not T.legs_live and not T.ended:
            self.end_session(T)
            return
        T.state = DONE
        if T.kind == LEG:
            self.leg_done(T)
            return
        if T.kind == MACHINE:
            return
        S = T
        if S.ended:
            return
        if S.legs_live:
            raise self.located(RunError(f"session {S.serial} ended while {S.legs_live} of its legs still run: "
                                        "a session may not end before its legs (join them first)"), T,
                               self.live_fork_loc(S))
        self.end_session(S)

    def live_fork_loc(self, S: Thread):
        """Where the first leg of `S` that still runs was forked (the statement to join after)."""
        for L in S.legs:
            if L.state != DONE:
                return L.fork_loc
        return None

    def leg_done(self, T: Thread) -> None:
        S = T.sess
        for a in T.leases:
            if not a.released:
                if S.ended:
                    self.release_lease_alloc(a)
                else:
                    a.owner = S
                    if S.leases == ():
                        S.leases = []
                    S.leases.append(a)
        T.leases = ()
        S.legs_live -= 1
        if T in S.legs:
            S.legs.remove(T)
        if S.legs_live == 0 and S.state == JOINING and not S.ended:
            self.make_ready(S)

    def end_session(self, S: Thread, refused: bool = False) -> None:
        if S.ended:
            return
        S.ended = True
        S.state = DONE
        now = self.now
        # every hold the main thread is in, innermost first, then the leases
        if S.frames:
            while S.frames:
                F = S.frames.pop()
                self.release_frame(F, S)
        if S.leases:
            for a in list(S.leases):
                if not a.released:
                    self.release_lease_alloc(a)
            S.leases = ()
        self.turns_done += S.turns
        ta = S.t_arrive
        if ta >= self.t_measure:
            self.a_live += now - ta
        else:
            self.a_live += now - self.t_measure
            self.pre_live -= 1
            self.pre_sum -= ta
        self.t_live_sum -= ta
        self.live -= 1
        self.n_ended += 1
        if refused or S.refused:
            self.n_refused += 1
        if S.kind == MAIN:
            forget_itself(S)
        if self.closed:
            self.arrive()
        elif self.arrivals_limit is not None and not self.arrivals_open and self.live == 0:
            self.stop_reason = "drained"
            self.attention = True

    def end(self, T: Thread, refuses: bool = False) -> None:
        """`end;`: the session ends here (its holds released, its cached prefixes kept); in the
        server it refuses the request too."""
        S = T.sess
        if refuses:
            S.refused = True
        if S.in_turn:
            if refuses and self.turn_log is not None:
                self.log_turn(S, "refused")
            S.in_turn = False  # a refused request: the client records nothing of it
        while T.frames:
            F = T.frames.pop()
            self.release_frame(F, T)

    def refuse(self, T: Thread, member: PoolMember, spec) -> None:
        """A hold that can never fit: the session ends, refused; its other legs run on.

        A running thread is left to the caller, which raises `Refused` in it; a suspended one
        (a victim re-entering its queue) is closed here."""
        member.rejected += 1
        self.n_rejected += 1
        S = T.sess
        if self.turn_log is not None and S.in_turn:
            self.log_turn(S, "rejected")
        S.in_turn = False
        S.refused = True
        while T.frames:
            F = T.frames.pop()
            self.release_frame(F, T)
        if T.state != RUNNING:
            self._close(T)
            if T.kind == LEG:
                self.leg_done(T)
        if S is not T and S.state != DONE and not S.ended:
            self.detach(S)
            self._close(S)
        self.end_session(S, refused=True)

    def _close(self, T: Thread) -> None:
        T.state = DONE
        gen, T.gen = T.gen, None
        if gen is not None:
            try:
                gen.close()
            except RuntimeError:  # pragma: no cover - a generator that yields on close
                pass

    # -- turns and what the client sees
    def turn_start(self, S: Thread) -> None:
        S.t0 = self.now
        S.in_turn = True
        S.first_token = None
        S.out_tokens = 0
        S.ndec = 0
        S.ttft_rec = False
        S.turn_pre = 0
        S.turn_cached = None
        S.first_start = None
        S.last_start = None
        if self.open_turns is not None:
            self.open_turns[self.turn_key(S)] = S

    def turn_key(self, S: Thread) -> tuple[int, int]:
        """A turn's key in the turn log: (the trace session it replays, else its serial; the turn from 0)."""
        return (S.trace_no if S.trace_no is not None else S.serial, S.turns - 1)

    def log_turn(self, S: Thread, ended: str) -> None:
        """The turn log's row for the session's current turn: how it `ended` (answered, rejected, …)."""
        key = self.turn_key(S)
        self.open_turns.pop(key, None)
        self.turn_log[key] = (S.first_start, S.last_start, S.turn_pre,
                              S.turn_cached if S.turn_cached is not None else 0.0, S.first_token,
                              self.now if ended == "answered" else None, ended, S.t0)

    def prefill_token(self, S: Thread, t0: float, t1: float) -> None:
        """A prefill that completed at t1 (its iteration started at t0) sampled a token: the turn's
        first, unless a resumed prefill after a preemption samples it past the first (or a decode
        token came before); the prefill that ended last before the first decode token is the first."""
        if S.first_token is None or (S.ndec == 0 and not S.turn_pre):
            S.first_token = t1
            S.first_start = t0
        else:
            S.out_tokens += 1
        S.last_start = t0

    def decode_token(self, S: Thread, t0: float, t1: float) -> None:
        if S.first_token is None:
            S.first_token = t1
            S.first_start = t0
        else:
            S.out_tokens += 1
        if S.ndec == 0:
            self.record_ttft(S)
        S.ndec += 1
        S.last_start = t0

    def record_ttft(self, S: Thread) -> None:
        if S.ttft_rec or S.first_token is None or not S.in_turn:
            return
        S.ttft_rec = True
        self.client_ttft.record(S.first_token - S.t0, self.now, S, self.warmup)

    def answer(self, S: Thread) -> None:
        if not S.in_turn:
            return
        now = self.now
        S.t_answered = now
        if S.first_token is not None:
            if not S.ttft_rec:
                self.record_ttft(S)
            if S.out_tokens:
                self.client_tpot.record((now - S.first_token) / S.out_tokens, now, S, self.warmup)
        if self.turn_log is not None:
            self.log_turn(S, "answered")
        S.in_turn = False
        self.turns_answered += 1
        if now >= self.warmup:
            self.resp_values.append(now - S.t0)
            if self.resp_meta:
                r = self.client_response
                r.times.append(now)
                r.sessions.append(S.serial)
                r.turns.append(S.turns)
        if self.resp_all is not None:
            self.resp_all.append(now - S.t0)

    def observe(self, idx: int, v: float, T: Thread) -> None:
        S = T.sess
        self.observes[idx].record(v, self.now, S, self.warmup)
        if self.observe_log is not None:
            self.observe_log.append((S.serial, S.turns, idx, self.now, v))

    def trace_turn(self, T: Thread) -> None:
        self.trace.turn(self, T)

    # -- legs
    def fork(self, T: Thread, fn) -> None:
        S = T.sess
        S.leg_count += 1
        L = Thread(S, dict(T.A), LEG, S.serial)
        L.leg_no = S.leg_count
        # the fork statement's place, for an error that a leg outlives its session: the generated
        # line that calls this (forks are rare; the frame lookup costs nothing on the hot path)
        caller = sys._getframe(1)
        if caller.f_code.co_filename == FILENAME and 0 < caller.f_lineno <= len(self.line_locs):
            L.fork_loc = self.line_locs[caller.f_lineno - 1]
        L.gen = fn(self, L, L.A)
        if S.legs == ():
            S.legs = []
        S.legs.append(L)
        S.legs_live += 1
        self.make_ready(L)

    def join(self, T: Thread) -> bool:
        if T.sess.legs_live == 0:
            return False
        T.state = JOINING
        T.where = None
        return True


    # ================================================================ statistics
    def reset_stats(self, _arg=None, _seq=None) -> None:
        now = self.now
        for m in self.all_pools:
            m.reset(now)
        for s in self.all_stages:
            s.reset(now)
        self.a_live = 0.0
        self.t_measure = now
        self.pre_live = self.live
        self.pre_sum = self.t_live_sum

    def t_live_sum_measured(self) -> float:
        """Σ over live sessions of max(arrival, the warm-up)."""
        return self.t_live_sum - self.pre_sum + self.pre_live * self.t_measure

    def read_gauges(self) -> None:
        for g in self.gauges:
            if (v := float(g.fn(self))) != g.last:  # (most readings repeat the last: no call for them)
                g.reading(v, self.now)

    def completions_of(self, stage) -> list:
        """The completion times of a fifo or delay stage's jobs in service."""
        return [ev[0] for ev in self.heap
                if ev[2] == stage.done_fn and ev[3] is not None and ev[3].token == ev[1]]

    def observed(self, fn: str, name: str) -> float:
        return self.claim_values[name].aggregate(fn)

    def check_given(self, S: Thread, A: dict) -> None:
        for c in self.givens:
            if c.out_of_scope is not None:
                continue
            try:
                v = c.given(self, A)
            except (RunError, DrawError) as e:
                raise self.located(e, S) from None
            if v == 0.0:
                c.out_of_scope = S.serial

    # ================================================================ the end
    def finish(self) -> None:
        if self.stop_reason is None:
            if self.heap and self.heap[0][0] > self.horizon:
                self.stop_reason = "horizon"
            else:
                self.stop_reason = "idle"
        if self.stop_reason == "horizon" and self.horizon != math.inf:
            self.now = self.horizon
        now = self.now
        for st in self.step_stages:  # the decode groups' state in their members' fields, for the report
            st.sync()
        for m in self.all_pools:
            m.touch(now)
        for s in self.all_stages:
            s.touch(now)
        # the live sessions' time since their arrival, or since the warm-up
        self.a_live += self.live * now - self.t_live_sum_measured()
        self.end = now
        if self.stop_reason != "interrupted":
            self.check_deadlock()

    def check_deadlock(self) -> None:
        """Sessions and legs waiting only for each other, one at a join, none for a lease that will expire."""
        waiting: dict = {}
        for m in self.all_pools:
            for F in m.queue:
                waiting[F.thread] = m
            for T in m.growers:
                waiting[T] = m
        joins = {T.sess for T in waiting if T.kind == LEG and T.sess.state == JOINING and not T.sess.ended}
        if not joins:
            return
        stuck = set(waiting) | joins
        changed = True
        while changed:
            changed = False
            for T in list(stuck):
                if T in joins:
                    blockers = list(T.legs)
                    free = not blockers or any(L not in stuck for L in blockers)
                else:
                    m = waiting[T]
                    free = not m.holders
                    for a in m.holders.values():
                        if a.lease:
                            if a.expiry_seq or a.owner not in stuck:
                                free = True
                        elif a.frame.thread not in stuck:
                            free = True
                if free:
                    stuck.discard(T)
                    changed = True
        for S in sorted((T for T in stuck if T in joins), key=lambda T: T.serial):
            leg = next(L for L in S.legs if L in stuck)
            m = waiting[leg]
            raise self.located(RunError(
                f"deadlock: session {S.serial} waits at its join for leg {leg.leg_no}, which waits at pool "
                f"{m.label} for memory the session holds or leases (a hold-and-wait cycle; a finite lease "
                "breaks it)"), S, self.suspended_loc(S))

    def suspended_loc(self, T: Thread):
        """The statement a suspended thread stands at."""
        frame = getattr(T.gen, "gi_frame", None)
        if frame is None:
            return None
        line = frame.f_lineno
        if 0 < line <= len(self.line_locs):
            return self.line_locs[line - 1]
        return None


_ERRORS = (RunError, DrawError, ZeroDivisionError, OverflowError, ValueError, TypeError)

# What `next(T.gen, _FINISHED)` returns when a thread's generator returns: CPython makes no
# StopIteration for a generator that returns None when `next` has a default (a resumption that
# ends the thread costs no exception). The generated code calls `session_done`/`thread_done` before
# its `return` (which lets go of `T.gen`); a generator that returns otherwise is done here.
_FINISHED = object()



class SimRunError(Exception):
    """A run-time error, located: becomes SerqError(kind="run") at the command line."""

    def __init__(self, message: str, loc, who: str | None, now: float) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.who = who
        self.now = now

    def to_serq(self):
        span = Span(self.loc.file, self.loc.line, self.loc.col) if self.loc is not None else None
        where = f"{self.who}, " if self.who else ""
        return SerqError(f"at time {_num(self.now)}, {where}{self.message}", span, "run")

    def __str__(self) -> str:
        return str(self.to_serq())
