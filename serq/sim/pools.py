"""Pools: capacity, holders, the prefix cache, the admission queue and the growers.

The engine (`serq.sim.engine`) decides when to admit, grow, preempt and
release; this module keeps each pool member's state consistent:

- `holders`: the allocations, in admission order (leases included, marked);
- `entries`: the cache, in release order — per-session entries (`live`, one
  per session) and dead ones (the rest of an entry a hold did not consume);
  `cached` is their total;
- `queue`: the holds waiting for admission (frames), `growers`: the holds
  waiting for room to grow, the head blocking the rest.

The invariant `used + cached <= cap` is restored after every allocation by
evicting in the pool's order (`make_room`).
"""

from __future__ import annotations

import math
from collections import deque
from math import ceil, floor
from dataclasses import dataclass

from serq.sim.errors import RunError, shown as _show


@dataclass
class HoldPoolSpec:
    name: str
    resolver: object  # a member, or a function (E, T, A) -> member
    units: object  # function (E, T, A) -> units
    reserve: object | None
    units_static: bool
    reserve_static: bool
    refusable: bool = True  # False: its number of units fits every member (ProgramCompiler.refusable_at_join)


@dataclass
class HoldSpec:
    """A hold statement, compiled."""

    loc: object
    text: str
    pools: list
    reuse: object | None
    reuse_pools: frozenset
    cache: object | None
    cache_pools: frozenset
    lease_pos: int | None
    lease: object | None
    static_members: list | None = None  # the members, when no index is read at run time (resolve_members)


class Frame:
    """One execution of a hold: waiting in its first pool's queue, then admitted."""

    __slots__ = ("spec", "thread", "members", "allocs", "admitted", "preempted", "head", "joined", "qseq",
                 "last_pos", "asks")

    def __init__(self, spec: HoldSpec, thread, members: list) -> None:
        self.spec = spec
        self.thread = thread
        self.members = members
        self.allocs: list = [None] * len(members)
        self.admitted = False
        self.preempted = False
        self.head = False  # re-entered at the head of its queue (a preemption, requeue head)
        self.joined = 0.0
        self.qseq = 0
        self.last_pos = None  # the position at its last preemption (stuck detection)
        self.asks = None  # (member, units) it asked for above the cap at its last try


class Alloc:
    """A frame's allocation on one pool member (or, after the scope, a lease)."""

    __slots__ = ("frame", "member", "req", "units", "reserve", "pos", "advanced", "adm", "lease", "owner",
                 "attrs", "expiry_seq", "released")

    def __init__(self, frame, member, req: float, units: float, reserve: float, pos: float, adm: int) -> None:
        self.frame = frame
        self.member = member
        self.req = req
        self.units = units
        self.reserve = reserve
        self.pos = pos
        self.advanced = False
        self.adm = adm
        self.lease = False
        self.owner = None
        self.attrs = None
        self.expiry_seq = 0
        self.released = False

    def computed(self) -> float:
        """The position a release caches from: the allocation, or where a growing run or a load got."""
        return self.pos if self.advanced else self.units


class Entry:
    __slots__ = ("serial", "units", "t", "seq", "attrs", "dead")

    def __init__(self, serial: int, units: float, t: float, seq: int, attrs) -> None:
        self.serial = serial
        self.units = units
        self.t = t
        self.seq = seq
        self.attrs = attrs
        self.dead = False


class PoolMember:
    # slots, for the reason Engine's are (serq.sim.engine): 51 fields
    __slots__ = (
        'E', 'decl', 'name', 'index', 'label', 'order', 'cap', 'block', 'bs', 'whole_blocks',
        'reserve_held', 'preempt_by', 'requeue_tail', 'queue_by', 'evict_by', 'queue_keys',
        'preempt_keys', 'evict_keys', 'evict_waiting', 'spill', 'via', 'mem_stage', 'lifo', 'used',
        'reserved_out', 'holders', 'entries', 'live', 'cached', 'queue', 'growers', 't_last',
        'evicted_total', 'a_used', 'a_cached', 'a_queue', 'a_holders', 'max_used', 'max_queue',
        'admissions', 'wait_sum', 'rejected', 'evicted_entries', 'evicted_units', 'preemptions',
        'spills', 'stuck', 'leases_expired', 'grows', 'grow_waits', 'oldest',
    )

    def __init__(self, engine, decl, index: int | None, order: int) -> None:
        self.E = engine
        self.decl = decl
        self.name = decl.name
        self.index = index
        self.label = decl.name if index is None else f"{decl.name}[{index}]"
        self.order = order
        self.cap = math.inf if decl.cap == "inf" else float(decl.cap)
        self.block = decl.block
        self.bs = float(decl.block or 1)
        self.whole_blocks = decl.block is not None and self.bs % 1.0 == 0.0  # (an engine's decode group)
        self.reserve_held = decl.reserve_held
        self.preempt_by = decl.preempt.kind == "by"
        self.requeue_tail = self.preempt_by and decl.preempt.requeue == "tail"
        self.queue_by = decl.queue.kind == "by"
        self.evict_by = decl.evict.kind == "by"
        self.queue_keys = None  # function (E, T, A, waited) -> tuple
        self.preempt_keys = None  # function (E, T, A, decoding, position, admission) -> tuple
        self.evict_keys = None  # function (E, A, size, waiting) -> tuple
        self.evict_waiting = False  # the evict keys read `waiting` (waiting_sessions)
        self.spill = None  # (tier resolver, stage resolver, cost fn, when fn)
        self.via = None  # the step stage member that admits its queue in iterations
        self.mem_stage = None  # the step stage member it is the memory of (preemption victims: its residents)
        self.lifo = False  # `preempt lifo`: the victim is the candidate admitted last
        self.used = 0.0
        self.reserved_out = 0.0
        self.holders: dict[int, Alloc] = {}
        self.entries: dict[int, Entry] = {}
        self.oldest: Entry | None = None  # the oldest entry when last looked for (evict_excess)
        self.live: dict[int, Entry] = {}
        self.cached = 0.0
        self.queue: deque = deque()
        self.growers: deque = deque()
        # statistics
        self.t_last = 0.0
        self.evicted_total = 0.0  # units evicted since the run's start (the warm-up does not clear it)
        self.clear_stats()

    def clear_stats(self) -> None:
        self.a_used = 0.0
        self.a_cached = 0.0
        self.a_queue = 0.0
        self.a_holders = 0.0
        self.max_used = self.used
        self.max_queue = len(self.queue)
        self.admissions = 0
        self.wait_sum = 0.0
        self.rejected = 0
        self.evicted_entries = 0
        self.evicted_units = 0.0
        self.preemptions = 0
        self.spills = 0
        self.stuck = 0
        self.leases_expired = 0
        self.grows = 0
        self.grow_waits = 0

    def reset(self, now: float) -> None:
        self.touch(now)
        self.t_last = now
        self.clear_stats()

    def touch(self, now: float) -> None:
        # (a float times a count, a block size times a ceiling, float first here and in the engine's
        # hot paths: CPython tries int's multiplication first when the int is on the left, then the
        # float's; the same product either way)
        dt = now - self.t_last
        if dt > 0.0:
            self.a_used += self.used * dt
            self.a_cached += self.cached * dt
            self.a_queue += dt * len(self.queue)
            self.a_holders += dt * len(self.holders)
            self.t_last = now

    # -- rounding
    def up(self, u: float) -> float:
        if self.block is None:
            return u
        return self.bs * ceil(u / self.bs) if u != _INF else u

    def down(self, u: float) -> float:
        if self.block is None:
            return u
        return self.bs * floor(u / self.bs) if u != _INF else u

    # -- observables
    def cached_of(self, T) -> float:
        e = self.live.get(T.sess.serial)
        return e.units if e is not None else 0.0

    # -- holders
    def add_holder(self, a: Alloc) -> None:
        now = self.E.now
        if now > self.t_last:  # (touch: nothing to add at the same instant; a call saved per hold)
            self.touch(now)
        self.holders[a.adm] = a
        self.used += a.units
        if a.reserve > a.units:
            self.reserved_out += a.reserve - a.units
        if self.used > self.max_used:
            self.max_used = self.used

    def remove_holder(self, a: Alloc) -> None:
        now = self.E.now
        if now > self.t_last:
            self.touch(now)
        del self.holders[a.adm]
        self.used -= a.units
        if not a.lease and a.reserve > a.units:
            self.reserved_out -= a.reserve - a.units
        if not self.holders:
            self.used = 0.0
            self.reserved_out = 0.0

    def resize(self, a: Alloc, new_units: float) -> None:
        self.touch(self.E.now)
        if a.reserve > a.units:
            self.reserved_out -= a.reserve - a.units
        self.used += new_units - a.units
        a.units = new_units
        if a.reserve > a.units:
            self.reserved_out += a.reserve - a.units
        if self.used > self.max_used:
            self.max_used = self.used

    def grow_hold(self, a: Alloc, new_units: float) -> None:
        """`resize` then `make_room`, in one call (an engine's resident grows a block every block
        of tokens: this is on its hot path)."""
        now = self.E.now
        if now > self.t_last:  # (touch: nothing to add at the same instant)
            self.touch(now)
        reserve = a.reserve
        if reserve > a.units:
            self.reserved_out -= reserve - a.units
        used = self.used = self.used + (new_units - a.units)
        a.units = new_units
        if reserve > new_units:
            self.reserved_out += reserve - new_units
        if used > self.max_used:
            self.max_used = used
        if used + self.cached > self.cap and self.entries:
            self.evict_excess()

    @property
    def batches_growths(self) -> bool:
        """Whether `grow_holds` may apply several growths at once: eviction in release order, no spill
        and no reservation held, so that evicting once for all of them takes what evicting after each
        would (whole blocks from the oldest entries) and each fits if their sum does."""
        return not self.evict_by and self.spill is None and not self.reserve_held

    def grow_holds(self, growths: list) -> None:
        """Several holds' growths, (allocation, new units) in order, each fitting after the ones
        before it (`batches_growths`): what `grow_hold` one after the other gives, with one eviction."""
        now = self.E.now
        if now > self.t_last:
            self.touch(now)
        used = self.used
        for a, new_units in growths:
            units = a.units
            reserve = a.reserve
            if reserve > units:
                self.reserved_out -= reserve - units
            used += new_units - units
            a.units = new_units
            if reserve > new_units:
                self.reserved_out += reserve - new_units
        self.used = used
        self.grows += len(growths)
        if used > self.max_used:
            self.max_used = used
        if used + self.cached > self.cap and self.entries:
            self.evict_excess()

    def to_lease(self, a: Alloc) -> None:
        """A lease is allocation only: its unallocated reservation no longer counts."""
        if a.reserve > a.units:
            self.reserved_out -= a.reserve - a.units
        a.lease = True

    def fits_admission(self, need: float) -> bool:
        held = self.reserved_out if self.reserve_held else 0.0
        return self.used + held + need <= self.cap

    def fits_growth(self, a: Alloc, new_units: float) -> bool:
        extra = new_units - a.units
        if self.reserve_held:
            held = self.reserved_out - max(0.0, a.reserve - a.units) + max(0.0, a.reserve - new_units)
            return self.used + held + extra <= self.cap
        return self.used + extra <= self.cap

    # -- the cache
    def add_entry(self, serial: int | None, units: float, attrs, dead: bool = False) -> None:
        if units <= 0.0:
            return
        E = self.E
        if E.now > self.t_last:
            self.touch(E.now)
        if not dead and serial is not None:
            old = self.live.pop(serial, None)
            if old is not None:
                old.dead = True
        e = Entry(serial, units, E.now, next(E.release_seq), attrs)
        e.dead = dead
        self.entries[e.seq] = e
        if not dead:
            self.live[serial] = e
        self.cached += units

    def consume(self, e: Entry, units: float) -> None:
        """A hold takes `units` of the session's entry; the rest stays, dead, with its age."""
        self.touch(self.E.now)
        self.live.pop(e.serial, None)
        e.dead = True
        e.units -= units
        self.cached -= units
        if e.units <= 0.0:
            del self.entries[e.seq]

    def drop(self, serial: int) -> None:
        e = self.live.pop(serial, None)
        if e is not None:
            self.touch(self.E.now)
            self.cached -= e.units
            del self.entries[e.seq]

    def make_room(self) -> None:
        """Evict in the pool's order until the allocations and the cache fit."""
        if self.used + self.cached <= self.cap or not self.entries:
            return
        now = self.E.now
        if now > self.t_last:
            self.touch(now)
        self.evict_excess()

    def evict_excess(self) -> None:
        """`make_room` for a caller that has seen the allocations and the cache exceed the cap with an
        entry in the cache, and has touched the pool at this instant (an engine's admissions and
        growths, every iteration): its test and touch not made again."""
        if self.evict_by:
            # the keys of each entry, read once before anything is taken: its attributes, `size` (its
            # units now) and `waiting` (its session has a hold waiting for admission here)
            E = self.E
            keys = self.evict_keys
            if self.evict_waiting:
                queued = self.waiting_sessions()
                order = sorted(self.entries.values(),
                               key=lambda e: (keys(E, e.attrs, e.units, 1.0 if e.serial in queued else 0.0), e.seq))
            else:
                order = sorted(self.entries.values(), key=lambda e: (keys(E, e.attrs, e.units, 0.0), e.seq))
            for e in order:
                if self.used + self.cached <= self.cap:
                    break
                self._evict_from(e)
        else:  # release order: the entries' own (a dict keeps it); the oldest, again, until they fit
            entries = self.entries
            while True:  # (the caller saw the excess and an entry)
                e = self.oldest
                if e is None or entries.get(e.seq) is not e:
                    # An entry joins at the dict's end and stays the oldest until it leaves, so the
                    # one found last is kept: finding it again from the dict's start steps over every
                    # entry removed since the dict last grew (~100, 600 instructions, at 64 residents)
                    e = self.oldest = next(iter(entries.values()))
                self._evict_from(e)
                if not entries or self.used + self.cached <= self.cap:
                    break
        if self.cached < 1e-9:
            self.cached = 0.0 if not self.entries else self.cached

    def _evict_from(self, e: Entry) -> None:
        """Block by block from the entry's tail until the allocations and the cache fit (an entry
        without blocks goes whole): min(units, the whole blocks covering the excess)."""
        over = self.used + self.cached - self.cap
        if self.block is not None:
            blocks = self.bs * math.ceil(over / self.bs)
            taken = blocks if blocks < e.units else e.units  # (min(e.units, blocks): the builtin is slow)
        else:
            taken = e.units
        e.units -= taken
        self.cached -= taken
        self.evicted_units += taken
        self.evicted_total += taken
        if self.spill is not None and taken > 0.0:
            self.E.spill(self, e, taken)  # what left this entry, written to the tier at once
        if e.units <= 0.0:
            self.evicted_entries += 1
            del self.entries[e.seq]
            if not e.dead and self.live.get(e.serial) is e:
                del self.live[e.serial]

    def waiting_sessions(self) -> set:
        """`waiting` in an eviction key: the sessions with a hold waiting for admission to this member,
        in its queue or, for a hold on several pools, in its first pool's queue (where such a hold waits,
        for every pool it names). Read at an eviction only, by a pool whose keys read it: one pass over
        the queues."""
        out = set()
        for q in self.E.all_pools:
            for F in q.queue:
                if q is self or self in F.members:
                    out.add(F.thread.sess.serial)
        return out

    def summary(self, span: float) -> dict:
        return {
            "cap": None if self.cap == math.inf else self.cap,
            "block": self.block,
            "used": self.used,
            "cached": self.cached,
            "mean_used": _div(self.a_used, span),
            "mean_cached": _div(self.a_cached, span),
            "mean_queue": _div(self.a_queue, span),
            "mean_holders": _div(self.a_holders, span),
            "max_used": self.max_used,
            "max_queue": self.max_queue,
            "admissions": self.admissions,
            "mean_wait": _div(self.wait_sum, self.admissions),
            "rejected": self.rejected,
            "evicted_entries": self.evicted_entries,
            "evicted_units": self.evicted_units,
            "grows": self.grows,
            "grow_waits": self.grow_waits,
            "preemptions": self.preemptions,
            "stuck": self.stuck,
            "spills": self.spills,
            "leases_expired": self.leases_expired,
        }


_INF = math.inf


def _div(a: float, b: float):
    if not b:
        return None
    return a / b


def check_amount(v: float, what: str) -> float:
    if not v >= 0.0:
        raise RunError(f"{what} is {_show(v)}: an amount is not negative and not NaN")
    return v
