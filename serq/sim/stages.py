"""Stages: fifo(c), ps(φ), delay, and the flows of stages shared under a `share` policy.

A job is the thread that runs it (a thread is at one stage at most). Every
scheduled completion carries the event's sequence number; the job's `token`
holds the sequence number of its live completion, so a job taken off its
stage (a preemption) leaves a stale event that does nothing when it fires.

Time averages (busy servers, queue length, jobs present) are kept as areas
updated at every change; `reset` starts them again at the warm-up.
"""

from __future__ import annotations

import math
from collections import deque
from heapq import heappop, heappush

from serq.sim.errors import RunError
from serq.sim.threads import AT_STAGE


class StageMember:
    """What every stage member reports."""

    kind = "stage"

    def __init__(self, engine, name: str, index: int | None) -> None:
        self.E = engine
        self.name = name
        self.index = index
        self.label = name if index is None else f"{name}[{index}]"
        self.t_last = 0.0
        self.completed = 0
        self.sojourn_sum = 0.0
        self.wait_sum = 0.0
        self.wait_n = 0

    def reset(self, now: float) -> None:
        self.touch(now)
        self.t_last = now
        self.completed = 0
        self.sojourn_sum = 0.0
        self.wait_sum = 0.0
        self.wait_n = 0
        self.clear_areas()


class FifoStage(StageMember):
    """c servers, one job each at rate 1, jobs in arrival order."""

    service = "fifo"

    def __init__(self, engine, name, index, servers: int) -> None:
        super().__init__(engine, name, index)
        self.c = servers
        self.busy = 0
        self.q: deque = deque()
        self.heap = engine.heap
        self.seq = engine.seq
        self.done_fn = self.done
        self.a_busy = 0.0
        self.a_q = 0.0
        self.max_q = 0

    def clear_areas(self) -> None:
        self.a_busy = 0.0
        self.a_q = 0.0
        self.max_q = len(self.q)

    def touch(self, now: float) -> None:
        dt = now - self.t_last
        if dt > 0.0:
            self.a_busy += self.busy * dt
            self.a_q += len(self.q) * dt
            self.t_last = now

    def n_queue(self) -> float:
        return float(len(self.q))

    def n_busy(self) -> float:
        return float(self.busy)

    def work_left(self) -> float:
        E = self.E
        now = E.now
        total = 0.0
        for t_end in E.completions_of(self):
            total += max(0.0, t_end - now)
        for T in self.q:
            total += T.w_stage
        return total

    # add and done are the hot path of every fifo program: `touch` written out, the areas'
    # arithmetic as there (an empty queue adds 0 to its area: skipped, the same sum). A waiting
    # job is its thread, its work in `w_stage` and its arrival in `t_stage` (no tuple per job).
    def add(self, T, w: float) -> None:
        now = self.E.now
        busy = self.busy
        q = self.q
        dt = now - self.t_last
        if dt > 0.0:
            self.a_busy += busy * dt
            if q:
                self.a_q += len(q) * dt
            self.t_last = now
        T.state = AT_STAGE
        T.where = self
        T.t_stage = now
        if busy < self.c:
            self.busy = busy + 1
            self.wait_n += 1
            seq = next(self.seq)
            T.token = seq
            heappush(self.heap, (now + w, seq, self.done_fn, T))
        else:
            T.token = 0
            T.w_stage = w
            q.append(T)
            if len(q) > self.max_q:
                self.max_q = len(q)

    def done(self, T, seq: int):
        """A job's completion; returns its thread for the event loop to run at once when no other
        thread is ready (else None: it is queued, or the event was stale)."""
        if T.token != seq:
            return None
        E = self.E
        now = E.now
        q = self.q
        dt = now - self.t_last
        if dt > 0.0:
            self.a_busy += self.busy * dt
            if q:
                self.a_q += len(q) * dt
            self.t_last = now
        self.completed += 1
        self.sojourn_sum += now - T.t_stage
        T.token = 0
        if q:
            T2 = q.popleft()
            self.wait_sum += now - T2.t_stage
            self.wait_n += 1
            seq2 = next(self.seq)
            T2.token = seq2
            heappush(self.heap, (now + T2.w_stage, seq2, self.done_fn, T2))
        else:
            self.busy -= 1
        if T.ready_t == now:
            E.make_ready(T)
        else:
            T.ready_t = now
            T.ready_n = 1
            if not E.ready:  # the event loop runs it at once (Engine.run): no queue of one
                return T
            T.state = 1
            E.ready.append(T)
        return None

    def remove(self, T) -> None:
        """Take a job off the stage (its session was preempted)."""
        E = self.E
        self.touch(E.now)
        if T.token:
            T.token = 0
            if self.q:
                T2 = self.q.popleft()
                now = E.now
                self.wait_sum += now - T2.t_stage
                self.wait_n += 1
                seq2 = next(E.seq)
                T2.token = seq2
                heappush(E.heap, (now + T2.w_stage, seq2, self.done_fn, T2))
            else:
                self.busy -= 1
        elif T in self.q:
            self.q.remove(T)

    def summary(self, span: float) -> dict:
        return {
            "service": "fifo", "servers": self.c,
            "utilization": _div(self.a_busy, span * self.c),
            "mean_busy": _div(self.a_busy, span),
            "mean_queue": _div(self.a_q, span),
            "mean_number": _div(self.a_busy + self.a_q, span),
            "max_queue": self.max_q,
            "completed": self.completed,
            "throughput": _div(self.completed, span),
            "mean_wait": _div(self.wait_sum, self.wait_n),
            "mean_sojourn": _div(self.sojourn_sum, self.completed),
        }


class _EveryJobInService(StageMember):
    """A stage where no job waits: `n` jobs, all in service (a delay, processor sharing)."""

    n: int
    a_n: float
    a_busy: float
    max_n: int

    def clear_areas(self) -> None:
        self.a_n = 0.0
        self.a_busy = 0.0
        self.max_n = self.n

    def touch(self, now: float) -> None:
        dt = now - self.t_last
        if dt > 0.0:
            self.a_n += self.n * dt
            if self.n:
                self.a_busy += dt
            self.t_last = now

    def n_queue(self) -> float:
        return 0.0

    def n_busy(self) -> float:
        return float(self.n)


class DelayStage(_EveryJobInService):
    """Every job on its own at rate 1 (ps(present)): no waiting."""

    service = "delay"

    def __init__(self, engine, name, index) -> None:
        super().__init__(engine, name, index)
        self.n = 0
        self.a_n = 0.0
        self.a_busy = 0.0
        self.max_n = 0
        self.heap = engine.heap
        self.seq = engine.seq
        self.done_fn = self.done

    def work_left(self) -> float:
        now = self.E.now
        return sum(max(0.0, t_end - now) for t_end in self.E.completions_of(self))

    def add(self, T, w: float) -> None:
        E = self.E
        now = E.now
        dt = now - self.t_last
        if dt > 0.0:
            self.a_n += self.n * dt
            if self.n:
                self.a_busy += dt
            self.t_last = now
        T.state = AT_STAGE
        T.where = self
        T.t_stage = now
        self.n += 1
        if self.n > self.max_n:
            self.max_n = self.n
        seq = next(self.seq)
        T.token = seq
        heappush(self.heap, (now + w, seq, self.done_fn, T))

    def done(self, T, seq: int):
        """A job's completion; its thread for the event loop to run at once, or None (FifoStage.done)."""
        if T.token != seq:
            return None
        E = self.E
        now = E.now
        dt = now - self.t_last
        if dt > 0.0:
            self.a_n += self.n * dt
            if self.n:
                self.a_busy += dt
            self.t_last = now
        self.n -= 1
        self.completed += 1
        self.sojourn_sum += now - T.t_stage
        T.token = 0
        if T.ready_t == now:
            E.make_ready(T)
        else:
            T.ready_t = now
            T.ready_n = 1
            if not E.ready:  # the event loop runs it at once (Engine.run): no queue of one
                return T
            T.state = 1
            E.ready.append(T)
        return None

    def remove(self, T) -> None:
        self.touch(self.E.now)
        if T.token:
            T.token = 0
            self.n -= 1

    def summary(self, span: float) -> dict:
        return {
            "service": "delay",
            "utilization": _div(self.a_busy, span),
            "mean_busy": _div(self.a_n, span),
            "mean_queue": 0.0,
            "mean_number": _div(self.a_n, span),
            "max_number": self.max_n,
            "completed": self.completed,
            "throughput": _div(self.completed, span),
            "mean_wait": 0.0 if self.completed else None,
            "mean_sojourn": _div(self.sojourn_sum, self.completed),
        }


class PsStage(_EveryJobInService):
    """ps(φ): every job at once, each at φ(present)/present, by virtual time.

    A job's finish tag is the virtual time at its start plus its work; virtual
    time advances at the per-job rate. Jobs with equal tags finish in the order
    they started (the start sequence breaks the tie in the heap).
    """

    service = "ps"

    def __init__(self, engine, name, index, capacity, constant: float | None, volatile: bool, at=None) -> None:
        super().__init__(engine, name, index)
        self.at = at  # the stage's declaration: where a capacity that is not above 0 is reported
        self.capacity = capacity  # function (E, present) -> phi
        self.constant = constant
        self.volatile = volatile
        self.jobs: list = []  # (tag, start seq, thread, token)
        self.n = 0
        self.V = 0.0
        self.t_v = 0.0
        self.rate = 0.0
        self.phi = 0.0
        self.ev = 0
        self.a_n = 0.0
        self.a_busy = 0.0
        self.max_n = 0

    def _advance(self, now: float) -> None:
        if now > self.t_v:
            if self.n:
                self.V += self.rate * (now - self.t_v)
            self.t_v = now

    def work_left(self) -> float:
        now = self.E.now
        v = self.V + (self.rate * (now - self.t_v) if self.n else 0.0)
        return sum(max(0.0, tag - v) for tag, _, T, tok in self.jobs if T.token == tok)

    def add(self, T, w: float) -> None:
        E = self.E
        now = E.now
        self.touch(now)
        self._advance(now)
        T.state = AT_STAGE
        T.where = self
        T.t_stage = now
        seq = next(E.seq)
        T.token = seq
        heappush(self.jobs, (self.V + w, seq, T, seq))
        self.n += 1
        if self.n > self.max_n:
            self.max_n = self.n
        self._reschedule(now)

    def _phi(self, n: int) -> float:
        if self.constant is not None:
            return self.constant
        phi = self.capacity(self.E, float(n))
        if not phi > 0.0:
            raise RunError(f"ps stage `{self.label}`: its capacity with {n} job(s) present is "
                           f"{phi!r}; a capacity is above 0", self.at)
        return phi

    def _reschedule(self, now: float) -> None:
        jobs = self.jobs
        while jobs and jobs[0][2].token != jobs[0][3]:
            heappop(jobs)
        if not self.n:
            self.ev = 0
            self.rate = 0.0
            return
        self.phi = self._phi(self.n)
        self.rate = self.phi / self.n
        tag = jobs[0][0]
        if self.rate == math.inf:
            dt = 0.0
        else:
            dt = (tag - self.V) / self.rate
            if dt < 0.0:
                dt = 0.0
        E = self.E
        seq = next(E.seq)
        self.ev = seq
        heappush(E.heap, (now + dt, seq, self.fire, None))

    def refresh(self) -> None:
        """A capacity that reads the state or draws: read it again at the end of an instant."""
        if not self.n:
            return
        now = self.E.now
        self._advance(now)
        old = self.phi
        phi = self._phi(self.n)
        if phi != old:
            self._reschedule(now)

    def fire(self, _arg, seq: int) -> None:
        if seq != self.ev:
            return
        E = self.E
        now = E.now
        self.touch(now)
        jobs = self.jobs
        while jobs and jobs[0][2].token != jobs[0][3]:
            heappop(jobs)
        tag, _, T, _ = heappop(jobs)
        self.t_v = now
        self.V = tag
        self.n -= 1
        self.completed += 1
        self.sojourn_sum += now - T.t_stage
        T.token = 0
        self._reschedule(now)
        E.make_ready(T)

    def remove(self, T) -> None:
        now = self.E.now
        self.touch(now)
        self._advance(now)
        if T.token:
            T.token = 0
            self.n -= 1
            self._reschedule(now)

    def summary(self, span: float) -> dict:
        return {
            "service": "ps",
            "utilization": _div(self.a_busy, span),
            "mean_busy": _div(self.a_n, span),
            "mean_queue": 0.0,
            "mean_number": _div(self.a_n, span),
            "max_number": self.max_n,
            "completed": self.completed,
            "throughput": _div(self.completed, span),
            "mean_wait": 0.0 if self.completed else None,
            "mean_sojourn": _div(self.sojourn_sum, self.completed),
        }


class SharedStage(StageMember):
    """A ps(φ) stage of an array some run holds with another: its jobs are flows."""

    service = "ps"

    def __init__(self, engine, name, index, phi: float) -> None:
        super().__init__(engine, name, index)
        self.phi = phi
        self.flows: dict = {}  # flow id -> flow, in start order
        self.carried = 0.0  # the sum of its flows' rates
        self.a_util = 0.0
        self.a_n = 0.0
        self.max_n = 0

    def clear_areas(self) -> None:
        self.a_util = 0.0
        self.a_n = 0.0
        self.max_n = len(self.flows)

    def touch(self, now: float) -> None:
        dt = now - self.t_last
        if dt > 0.0:
            self.a_util += (self.carried / self.phi) * dt
            self.a_n += len(self.flows) * dt
            self.t_last = now

    def n_queue(self) -> float:
        return 0.0

    def n_busy(self) -> float:
        return float(len(self.flows))

    def work_left(self) -> float:
        net = self.E.flows
        net.advance(self.E.now)
        return sum(f.rem for f in self.flows.values())

    def summary(self, span: float) -> dict:
        return {
            "service": "ps", "capacity": self.phi, "shared": True,
            "utilization": _div(self.a_util, span),
            "mean_busy": _div(self.a_n, span),
            "mean_queue": 0.0,
            "mean_number": _div(self.a_n, span),
            "max_number": self.max_n,
            "completed": self.completed,
            "throughput": _div(self.completed, span),
            "mean_wait": 0.0 if self.completed else None,
            "mean_sojourn": _div(self.sojourn_sum, self.completed),
        }


class Flow:
    __slots__ = ("id", "T", "stages", "rem", "rate", "t0")

    def __init__(self, fid: int, T, stages: tuple, rem: float, t0: float) -> None:
        self.id = fid
        self.T = T
        self.stages = stages
        self.rem = rem
        self.rate = 0.0
        self.t0 = t0


class FlowNet:
    """The flows over the shared stages and their rates under the program's share.

    maxmin: progressive filling — every unfrozen flow's rate rises together
    until a stage fills; the flows through it freeze there. bottleneck: each
    flow gets min over its stages of φ_s / n_s.
    """

    def __init__(self, engine, policy: str) -> None:
        self.E = engine
        self.policy = policy
        self.flows: dict[int, Flow] = {}
        self.t_last = 0.0
        self.ev = 0

    def advance(self, now: float) -> None:
        dt = now - self.t_last
        if dt > 0.0:
            for f in self.flows.values():
                f.rem -= f.rate * dt
                if f.rem < 0.0:
                    f.rem = 0.0
            self.t_last = now

    def add(self, T, stages: tuple, w: float) -> None:
        E = self.E
        now = E.now
        self.advance(now)
        for s in stages:
            s.touch(now)
        if len(set(map(id, stages))) != len(stages):
            raise RunError("a run names one stage twice: a flow holds each stage once")
        seq = next(E.seq)
        f = Flow(seq, T, stages, w, now)
        T.state = AT_STAGE
        T.where = self
        T.token = seq
        T.t_stage = now
        self.flows[seq] = f
        for s in stages:
            s.flows[seq] = f
            if len(s.flows) > s.max_n:
                s.max_n = len(s.flows)
        self._rates(now)

    def remove(self, T) -> None:
        now = self.E.now
        self.advance(now)
        f = self.flows.pop(T.token, None)
        T.token = 0
        if f is None:
            return
        for s in f.stages:
            s.touch(now)
            del s.flows[f.id]
        self._rates(now, f.stages)

    def _rates(self, now: float, left_by=()) -> None:
        """Every flow's rate under the share; the stages' carried rates, the ones the flow that
        just ended (`left_by`) crossed included: a stage it left idle carries nothing from now."""
        flows = self.flows
        stages = {id(s): s for s in left_by}
        for f in flows.values():
            for s in f.stages:
                stages[id(s)] = s
        if self.policy == "bottleneck":
            for f in flows.values():
                f.rate = min(s.phi / len(s.flows) for s in f.stages)
        else:
            left = {k: s.phi for k, s in stages.items()}
            count = {k: len(s.flows) for k, s in stages.items()}
            frozen: set[int] = set()
            level = 0.0
            active = {k for k in stages if count[k] > 0}
            while len(frozen) < len(flows):
                # the stage that fills first at the common rate
                best = None
                for k in active:
                    if count[k] > 0:
                        share = left[k] / count[k]
                        if best is None or share < best[0]:
                            best = (share, k)
                if best is None:
                    break
                level = best[0]
                kfull = best[1]
                # raise every unfrozen flow to the level; freeze those through the full stage
                for f in flows.values():
                    if f.id in frozen:
                        continue
                    if any(id(s) == kfull for s in f.stages):
                        f.rate = level
                        frozen.add(f.id)
                        for s in f.stages:
                            left[id(s)] -= level
                            count[id(s)] -= 1
                active.discard(kfull)
                for k in list(active):
                    if count[k] <= 0:
                        active.discard(k)
        for s in stages.values():
            s.touch(now)
            s.carried = sum(f.rate for f in s.flows.values())
        self._reschedule(now)

    def _reschedule(self, now: float) -> None:
        best = None
        for f in self.flows.values():
            if f.rate > 0.0:
                t = f.rem / f.rate
                if best is None or t < best[0]:
                    best = (t, f.id)
        if best is None:
            self.ev = 0
            return
        E = self.E
        seq = next(E.seq)
        self.ev = seq
        heappush(E.heap, (now + max(0.0, best[0]), seq, self.fire, best[1]))

    def fire(self, fid: int, seq: int) -> None:
        if seq != self.ev:
            return
        E = self.E
        now = E.now
        self.advance(now)
        f = self.flows.pop(fid)
        for s in f.stages:
            s.touch(now)
            del s.flows[fid]
            s.completed += 1
            s.sojourn_sum += now - f.t0
        f.T.token = 0
        self._rates(now, f.stages)
        E.make_ready(f.T)


def _div(a: float, b: float):
    if not b:
        return None
    return a / b
