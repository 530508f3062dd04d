"""Holds, pools and what they do to threads: admission, growth, preemption, leases, the cache, spill.

The engine's half that keeps the pools (`serq.sim.pools` keeps each member's state consistent; this
decides when a hold joins a queue, is admitted, grows, is preempted or released). `Holds` is a base
of `serq.sim.engine.Engine`: its methods read the engine's clock, ready queue and `waiting` set.
"""

from __future__ import annotations

import math
from collections import deque

from serq.sim.errors import Preempted, Refused, RunError, shown as _num
from serq.sim.pools import Alloc, Frame, PoolMember, check_amount
from serq.sim.rng import DrawError
from serq.sim.stages import StageMember
from serq.sim.threads import AT_STAGE, GROWING, MACHINE, QUEUED, READY, RUNNING, Thread


class Holds:
    """The engine's holds and pools (a base of `Engine`; see the module's docstring)."""

    # ================================================================ holds
    def resolve_members(self, T: Thread, spec) -> list:
        """The pool members a hold names. A hold that names members, not indices read at run time,
        names the same list every time: kept on the spec and shared (no frame changes its list)."""
        if spec.static_members is not None:
            return spec.static_members
        members = []
        static = True
        for p in spec.pools:
            r = p.resolver
            if isinstance(r, PoolMember):
                m = r
            else:
                m = r(self, T, T.A)
                static = False
            members.append(m)
        if len(members) > 1 and len(set(map(id, members))) != len(members):
            raise RunError(f"`{spec.text}` names pool member {members[0].label} twice at run time: "
                           "a hold names each pool once")
        if static:
            spec.static_members = members
        return members

    def hold(self, T: Thread, spec) -> Frame:
        members = spec.static_members  # (resolve_members' answer for a hold that names members)
        if members is None:
            members = self.resolve_members(T, spec)
        F = Frame(spec, T, members)
        if self.rejected_at_join(T, F):
            raise Refused()
        if T.frames == ():
            T.frames = []
        T.frames.append(F)
        self.enqueue(F, head=False)
        return F

    def rejected_at_join(self, T: Thread, F: Frame) -> bool:
        """Units or a reserve above the cap, read from attributes and numbers alone: never fits."""
        spec = F.spec
        A = T.A
        for i, p in enumerate(spec.pools):
            if not p.refusable:
                continue
            m = F.members[i]
            if m.cap == math.inf:
                continue
            need = 0.0
            # (each message is built only for the error: this runs at every hold)
            if p.units_static:
                u = p.units(self, T, A)
                if not u >= 0.0:
                    check_amount(u, f"the units of `{spec.text}` on {m.label}")
                need = m.up(u)
            if p.reserve is not None and p.reserve_static:
                r = p.reserve(self, T, A)
                if not r >= 0.0:
                    check_amount(r, f"the reserve of `{spec.text}` on {m.label}")
                ur = m.up(r)
                if ur > need:  # (max(need, ur): the builtin is slow)
                    need = ur
            if need > m.cap:
                self.refuse(T, m, spec)
                return True
        return False

    def enqueue(self, F: Frame, head: bool) -> None:
        m = F.members[0]
        now = self.now
        if now > m.t_last:  # (touch: nothing to add at the same instant)
            m.touch(now)
        F.joined = now
        F.qseq = next(self.queue_seq)
        F.head = head
        T = F.thread
        T.state = QUEUED
        T.where = m
        if T.frames == ():
            T.frames = []
        q = m.queue
        if head:
            q.appendleft(F)
        elif m.via is not None and q and q[-1].joined == self.now and not q[-1].head \
                and _creation(T) < _creation(q[-1].thread):
            self._enqueue_in_creation_order(q, F)
        else:
            q.append(F)
        if len(m.queue) > m.max_queue:
            m.max_queue = len(m.queue)
        if m.via is None:
            self.waiting.add(m)

    def _enqueue_in_creation_order(self, q: deque, F: Frame) -> None:
        """Holds that join an engine's queue at one instant queue in the order their turns were created
        (`_creation`), as vLLM's clients submit them: F goes before the frames of this instant whose turn
        was created after its own, and takes their join numbers along (the fifo order is the numbers')."""
        # The frames of this instant stand at the queue's tail in creation order (each was put in its
        # place), so F's place is found by bisection: O(log n) where a scan from the tail made a burst
        # of n joins at one instant O(n^2) (batch(16000) into an engine's queue took minutes). The
        # fifo order among frames is their order in the queue; `select_head` breaks key ties by it.
        now = self.now
        key = _creation(F.thread)
        lo, hi = 0, len(q) - 1  # the caller saw that F goes before q[-1]
        while lo < hi:
            mid = (lo + hi) // 2
            G = q[mid]
            if G.joined == now and not G.head and key < _creation(G.thread):
                hi = mid
            else:
                lo = mid + 1
        q.insert(lo, F)

    def retry_pools(self) -> bool:
        progress = False
        for m in sorted(self.waiting, key=_order):
            if m.growers and self.retry_growers(m):
                progress = True
            if m.queue and m.via is None and self.retry_queue(m):
                progress = True
            if (not m.queue or m.via is not None) and not m.growers:
                self.waiting.discard(m)
        return progress

    def select_head(self, m: PoolMember) -> Frame:
        q = m.queue
        if not m.queue_by or q[0].head:
            return q[0]
        keys = m.queue_keys
        best = None
        bk = None
        now = self.now
        for i, F in enumerate(q):  # ties in queue order (no frame is at the head: q[0] is not)
            T = F.thread
            k = (keys(self, T, T.A, now - F.joined), i)
            if bk is None or k < bk:
                best, bk = F, k
        return best

    def retry_queue(self, m: PoolMember) -> bool:
        progress = False
        while m.queue:
            F = self.select_head(m)
            try:
                ok = self.try_admit(F)
            except (RunError, DrawError) as e:
                raise self.located(e, F.thread, F.spec.loc) from None
            if not ok:
                break
            progress = True
        return progress

    def try_admit(self, F: Frame) -> bool:
        T = F.thread
        spec = F.spec
        A = T.A
        members = F.members
        needs = []
        for p, m in zip(spec.pools, members):
            # (each message is built only for the error: this runs at every admission attempt)
            u = p.units(self, T, A)
            if not u >= 0.0:
                check_amount(u, f"the units of `{spec.text}` on {m.label}")
            need = ur = m.up(u) if m.block is not None else u
            rr = 0.0  # (up(0) is 0)
            if p.reserve is not None:
                r = p.reserve(self, T, A)
                if not r >= 0.0:
                    check_amount(r, f"the reserve of `{spec.text}` on {m.label}")
                rr = m.up(r) if m.block is not None else r
                if rr > ur:
                    need = rr
            if need > m.cap:
                F.asks = (m, need)
            # (m.fits_admission(need), written out)
            if not m.used + (m.reserved_out if m.reserve_held else 0.0) + need <= m.cap:
                return False
            needs.append((u, ur, rr))
        F.asks = None
        # admitted: out of the queue, into every pool
        now = self.now
        first = members[0]
        q = first.queue
        if now > first.t_last:  # (touch: nothing to add at the same instant)
            first.touch(now)
        if q[0] is F:
            q.popleft()
        else:
            q.remove(F)
        rho = None
        if spec.reuse is not None:
            rho = spec.reuse(self, T, A)
            if not rho >= 0.0:
                check_amount(rho, f"the reuse of `{spec.text}`")
        reuse_pools = spec.reuse_pools if spec.reuse is not None else spec.cache_pools
        cached_attr = None
        serial = T.sess.serial
        allocs = F.allocs
        adm_seq = self.adm_seq
        caching = spec.cache is not None
        for i, m in enumerate(members):
            u, ur, rr = needs[i]
            consumed = 0.0
            if caching and m.name in reuse_pools:
                e = m.live.get(serial)
                if e is not None:
                    # (min(e.units, rho) and min(limit, ur) as the builtin chooses, written out: the
                    # builtin parses keywords at every call in CPython 3.11)
                    limit = e.units if rho is None or not rho < e.units else rho
                    consumed = m.down(ur if ur < limit else limit)
                    m.consume(e, consumed)
                if cached_attr is None:
                    cached_attr = consumed
            a = Alloc(F, m, u, ur, rr, consumed, next(adm_seq))
            allocs[i] = a
            # (m.add_holder(a), written out: a.units is ur, a.reserve rr)
            if now > m.t_last:
                m.touch(now)
            m.holders[a.adm] = a
            used = m.used = m.used + ur
            if rr > ur:
                m.reserved_out += rr - ur
            if used > m.max_used:
                m.max_used = used
            if used + m.cached > m.cap and m.entries:  # (make_room's test: only a cache gives way)
                m.evict_excess()
            m.admissions += 1
            m.wait_sum += now - F.joined
        A["cached"] = cached_attr if cached_attr is not None else 0.0
        T.adm_no = allocs[0].adm
        if cached_attr is not None:
            S = T.sess
            if S.turn_cached is None and S.in_turn:
                S.turn_cached = cached_attr
        F.admitted = True
        if F.preempted:
            F.preempted = False
            T.throw = Preempted(F)
        self.make_ready(T)
        return True

    def hold_end(self, T: Thread, F: Frame) -> None:
        frames = T.frames
        if frames and frames[-1] is F:
            frames.pop()
        else:  # pragma: no cover - the generated code keeps frames nested
            frames.remove(F)
        spec = F.spec
        lease_pos = spec.lease_pos
        if lease_pos is not None and F.allocs[lease_pos] is not None:
            a = F.allocs[lease_pos]
            F.allocs[lease_pos] = None
            self.release_frame(F, T)
            self.lease(T, F, a)
        else:
            self.release_frame(F, T)
        T.A["computed"] = 0.0

    def release_frame(self, F: Frame, T: Thread, preempted: bool = False) -> None:
        """The end of a hold's scope (or `end`): every allocation back, caching per its clause.
        `preempted`: the hold (or one inside it) was preempted; each caches up to its position."""
        if not F.admitted:
            m = F.members[0]
            if F in m.queue:
                m.touch(self.now)
                m.queue.remove(F)
            return
        ell = None
        spec = F.spec
        for i, a in enumerate(F.allocs):
            if a is None:
                continue
            F.allocs[i] = None
            keep = 0.0
            if spec.cache is not None and a.member.name in spec.cache_pools:
                if ell is None:
                    ell = self._cache_value(spec, T, T.A)
                upto = a.pos if preempted else a.computed()
                keep = upto if upto < ell else ell  # (min(ell, upto): the builtin is slow)
            self.give_back(a, keep, T.sess.serial, T.A)
        if preempted:
            F.admitted = False

    def _cache_value(self, spec, T, A) -> float:
        try:
            v = spec.cache(self, T, A)
            if not v >= 0.0:
                check_amount(v, f"the cache of `{spec.text}`")
            return v
        except (RunError, DrawError) as e:
            raise self.located(e, T, spec.loc) from None

    def give_back(self, a: Alloc, keep: float, serial: int, attrs) -> None:
        m = a.member
        a.released = True
        # (m.remove_holder(a), written out: every request gives back a hold on each of its pools)
        now = self.now
        if now > m.t_last:
            m.touch(now)
        holders = m.holders
        del holders[a.adm]
        units = a.units
        m.used -= units
        if not a.lease and a.reserve > units:
            m.reserved_out -= a.reserve - units
        if not holders:
            m.used = 0.0
            m.reserved_out = 0.0
        if units < keep:  # (min(keep, a.units))
            keep = units
        if m.block is not None:
            keep = m.down(keep)
        if keep > 0.0:
            m.add_entry(serial, keep, attrs)
        if m.growers or (m.queue and m.via is None):
            self.waiting.add(m)

    def release_alloc(self, T: Thread, F: Frame, i: int) -> None:
        """`release m` inside a hold on m: that allocation back now, caching per the hold's clause."""
        a = F.allocs[i]
        if a is None:
            return
        F.allocs[i] = None
        spec = F.spec
        keep = 0.0
        if spec.cache is not None and a.member.name in spec.cache_pools:
            keep = min(self._cache_value(spec, T, T.A), a.computed())
        self.give_back(a, keep, T.sess.serial, T.A)

    # -- leases
    def lease(self, T: Thread, F: Frame, a: Alloc) -> None:
        spec = F.spec
        try:
            d = check_amount(spec.lease(self, T, T.A), f"the lease of `{spec.text}`")
        except (RunError, DrawError) as e:
            raise self.located(e, T, spec.loc) from None
        m = a.member
        m.to_lease(a)
        a.owner = T
        a.attrs = T.A
        if T.leases == ():
            T.leases = []
        T.leases.append(a)
        if d != math.inf:
            a.expiry_seq = self.schedule(self.now + d, self.lease_expired, a)

    def lease_expired(self, a: Alloc, seq: int) -> None:
        if a.released or a.expiry_seq != seq:
            return
        a.member.leases_expired += 1
        self.release_lease_alloc(a)

    def release_lease_alloc(self, a: Alloc) -> None:
        if a.released:
            return
        F = a.frame
        spec = F.spec
        T = a.owner
        keep = 0.0
        if spec.cache is not None and a.member.name in spec.cache_pools:
            keep = min(self._cache_value(spec, T, a.attrs), a.computed())
        self.give_back(a, keep, T.sess.serial, a.attrs)
        owner_list = T.leases
        if a in owner_list:
            owner_list.remove(a)

    def release_lease(self, T: Thread, m: PoolMember) -> None:
        """`release m` outside any hold on m: end the thread's (or, for the session, its) leases there."""
        leases = T.leases
        for a in [a for a in leases if a.member is m and not a.released]:
            self.release_lease_alloc(a)

    def drop(self, T: Thread, m: PoolMember) -> None:
        m.drop(T.sess.serial)

    # -- positions
    def load(self, T: Thread, F: Frame, i: int, n: float) -> None:
        check_amount(n, "the amount of a load")
        a = F.allocs[i]
        if a is None:
            raise RunError("load: the hold gave this pool back (release) before the load")
        if a.pos + n > a.units + 1e-9:
            raise RunError(f"load {a.member.label} ({_num(n)}): the position would reach {_num(a.pos + n)}, "
                           f"past the allocation of {_num(a.units)}")
        a.pos += n
        a.advanced = True

    def advance(self, T: Thread, F: Frame, i: int, w: float) -> None:
        a = F.allocs[i]
        if a is not None:
            a.pos += w
            a.advanced = True

    def grow_for_run(self, T: Thread, F: Frame, i: int, w: float) -> bool:
        a = F.allocs[i]
        if a is None:
            raise RunError("a growing run: the hold gave this pool back (release) before the run")
        need = a.pos + w - a.req
        if need <= 0.0:
            return False
        return self.grow(T, F, i, need)

    # -- growth and preemption
    def grow(self, T: Thread, F: Frame, i: int, d: float) -> bool:
        check_amount(d, "the amount of a grow")
        a = F.allocs[i]
        if a is None:
            raise RunError("grow: the hold gave this pool back (release) before the grow")
        m = a.member
        new_req = a.req + d
        new_units = m.up(new_req)
        m.grows += 1
        if new_units <= a.units:
            a.req = new_req
            return False
        if not m.preempt_by:
            if not m.growers and m.fits_growth(a, new_units):
                a.req = new_req
                m.resize(a, new_units)
                m.make_room()
                return False
            m.grow_waits += 1
            T.grow_req = (a, new_req)
            m.growers.append(T)
            T.state = GROWING
            T.where = m
            self.waiting.add(m)
            return True
        while not m.fits_growth(a, new_units):
            victim = self.choose_victim(m)
            self.preempt(victim, m)
            if victim.frame.thread is T:
                return True
        a.req = new_req
        m.resize(a, new_units)
        m.make_room()
        return False

    def retry_growers(self, m: PoolMember) -> bool:
        progress = False
        while m.growers:
            T = m.growers[0]
            a, new_req = T.grow_req
            new_units = m.up(new_req)
            if not m.fits_growth(a, new_units):
                break
            m.growers.popleft()
            T.grow_req = None
            a.req = new_req
            m.resize(a, new_units)
            m.make_room()
            self.make_ready(T)
            progress = True
        return progress

    def choose_victim(self, m: PoolMember) -> Alloc:
        # the keys and the preemption read positions: the engines' decode groups write theirs back
        for st in self.step_stages:
            st.sync()
        if m.mem_stage is not None:
            a = m.mem_stage.victim(m)
            if a is not None:
                return a
        keys = m.preempt_keys
        best = None
        bk = None
        rank = 0
        for a in m.holders.values():
            if a.lease:
                continue
            T = a.frame.thread
            k = keys(self, T, T.A, 0.0, a.pos, float(rank))
            if bk is None or k <= bk:  # ties: the candidate admitted last
                best, bk = a, k
            rank += 1
        if best is None:  # pragma: no cover - the grower itself is a candidate
            raise RunError(f"pool {m.label}: a growth that does not fit and nothing to preempt")
        return best

    def preempt(self, a: Alloc, m: PoolMember) -> None:
        G = a.frame
        V = G.thread
        S = V.sess
        m.preemptions += 1
        S.turn_pre += 1
        pos = a.pos
        if G.last_pos is not None and pos <= G.last_pos and not S.stuck:
            S.stuck = True
            m.stuck += 1
            self.n_stuck += 1
        G.last_pos = pos
        if V.state != RUNNING:
            self.detach(V)
        while V.frames:
            F2 = V.frames.pop()
            self.release_frame(F2, V, preempted=True)
            if F2 is G:
                break
        V.A["computed"] = pos
        G.preempted = True
        G.admitted = False
        G.allocs = [None] * len(G.members)
        try:
            G.members = self.resolve_members(V, G.spec)
        except RunError as e:
            raise self.located(e, V, G.spec.loc) from None
        # A victim re-enters its queue even when what it now reserves can never fit: it waits there
        # for ever, as vLLM leaves such a request waiting (scheduler.py's waiting loop breaks at it), and
        # the report names it (over_cap) — not rejected, which would let the requests behind it pass.
        V.frames.append(G)
        self.enqueue(G, head=not m.requeue_tail)

    def detach(self, T: Thread) -> None:
        """Take a suspended thread off whatever it waits on."""
        st = T.state
        if st == AT_STAGE:
            T.where.remove(T)
        elif st == QUEUED:
            m = T.where
            for F in reversed(T.frames):
                if not F.admitted and F in m.queue:
                    m.touch(self.now)
                    m.queue.remove(F)
                    break
        elif st == GROWING:
            m = T.where
            if T in m.growers:
                m.growers.remove(T)
            T.grow_req = None
        elif st == READY:
            try:
                self.ready.remove(T)
            except ValueError:
                pass
        T.where = None

    # ================================================================ spill
    def spill(self, m: PoolMember, e, amount: float) -> None:
        tier_r, stage_r, cost_fn, when_fn = m.spill
        try:
            if when_fn(self) == 0.0:
                return
            w = check_amount(cost_fn(self), f"the spill cost of pool {m.label}")
        except (RunError, DrawError) as err:
            raise self.located(err) from None
        tier = tier_r if isinstance(tier_r, PoolMember) else tier_r(self)
        stage = stage_r if isinstance(stage_r, StageMember) else stage_r(self)
        m.spills += 1
        serial = None if e.dead else e.serial
        if w <= 0.0:
            self.spill_insert(tier, serial, amount, e.attrs)
            return
        J = Thread(None, {}, MACHINE, -1)
        J.gen = _spill_job(self, J, stage, w, tier, serial, amount, e.attrs)
        self.make_ready(J)

    def spill_insert(self, tier: PoolMember, serial, amount: float, attrs) -> None:
        amount = tier.down(min(amount, tier.cap))
        if amount <= 0.0:
            return
        if serial is not None and serial in tier.live:
            old = tier.live[serial]
            amount = tier.down(min(tier.cap, old.units + amount))
        tier.add_entry(serial, amount, attrs, dead=serial is None)
        tier.make_room()


def _spill_job(E, J, stage, w, tier, serial, amount, attrs):
    stage.add(J, w)
    yield
    E.spill_insert(tier, serial, amount, attrs)


def _creation(T: Thread) -> tuple[float, int]:
    """When the turn a thread serves was created, as a client creates turns: a session's first turn
    at its arrival (before any next turn), a next turn when the previous one was answered; ties by
    the session's number (the trace session it replays, else its serial)."""
    S = T.sess
    return (S.t_answered, S.trace_no if S.trace_no is not None else S.serial)


def _order(m: PoolMember) -> int:
    return m.order
