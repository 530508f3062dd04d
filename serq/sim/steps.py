"""Step stages (engines): iterations, as the reference's *Engines* and docs/engines.md define them.

A step stage member keeps its residents — the threads whose current run is on
it — in admission order (vLLM's `running` list). When the instant has settled
and no other event is pending (`Engine._start_iterations`), an idle member with
residents or a waiting queue it admits plans an iteration:

1. the budget (`tokens cap`), the chunk cap (`each at most`) and the granule
   are read once;
2. the schedule runs: `advance running` serves the residents not yet served in
   the serve order (`by` keys, then admission), one token to a decode, up to
   `min(remaining, chunk, budget)` to a prefill; a growing run first grows its
   hold to the position it will reach, preempting the pool's victims if it does
   not fit (a victim already served gives its tokens back; a grower that
   preempts itself ends the serving); `admit waiting` admits the heads of the
   queues it admits while budget is left, the gate holds and the head fits, runs
   the admitted thread at once and serves its first chunk; `branch` and `set`;
3. an iteration that schedules no token and preempted nobody is not one: the
   stage waits for the next event. Otherwise it lasts `execute` over the batch,
   and its tokens are applied when it ends (`end`): positions advance, a prefill
   that completes samples a token, a decode commits one, and a finished run's
   thread continues at once.

The planner keeps the batch's aggregates (`b_tok`, `b_pre`, `b_dec`, `b_kvd`,
`b_kvp`, `b_att`) as it schedules, so `execute` and the claims read them without
another pass. Under the default schedule the decoding residents that need nothing
but their token are the stage's decode group (serq/sim/decode_group.py): served as
a count and moved by a clock, each looked at only when its next token grows its
hold or ends its run, with the same results as serving them one by one.
"""

from __future__ import annotations

import math
from bisect import insort
from dataclasses import dataclass, field
from heapq import heappush

from serq.sim import decode_group
from serq.sim.decode_group import NOT_A_MEMBER, DecodeGroup, admission, remove_sorted, serve_grouped
from serq.sim.errors import RunError, shown as _num
from serq.sim.pools import check_amount
from serq.sim.rng import DrawError
from serq.sim.stages import StageMember
from serq.sim.threads import AT_STAGE, READY

# iteration statements, compiled
SERVE, ADMIT, BRANCH, SET = range(4)

# The decode group (serq/sim/decode_group.py) under the default schedule; False: every iteration
# walks its residents one by one (the tests compare the two).
DECODE_GROUPS = True


class Job:
    """A resident's run: its thread, the tokens left, its mode, the hold it grows, its place."""

    __slots__ = ("T", "S", "rem", "dec", "alloc", "adm", "sched", "gone", "stall", "t0", "frac", "since", "kv",
                 "due", "cohort", "base", "chain", "chained")

    def __init__(self, T, rem: float, dec: bool, alloc, adm: int, t0: float, chain=None) -> None:
        self.T = T
        self.S = T.sess
        self.rem = rem
        self.dec = dec
        self.alloc = alloc
        self.adm = adm
        self.sched = 0.0
        self.gone = False
        self.stall = None  # the pool its last growth could not get (preempt none)
        self.t0 = t0
        # it grows a pool that does not allocate whole blocks of a whole size (StepStage.n_frac)
        self.frac = alloc is not None and not alloc.member.whole_blocks
        # in the decode group: the group clock its stored state is right at (else NOT_A_MEMBER),
        # its kv_decode share, the clock it is due at (0: none)
        self.since = NOT_A_MEMBER
        self.kv = 0.0
        self.due = 0
        # a member in a growth cohort (decode_group.Cohort): the cohort, and its growths counted when
        # the member's stored allocation and kv share were last right
        self.cohort = None
        self.base = 0
        # a prefill that carries the decode run after it: the decode's work, a function (E, T, A)
        # (compile.step_run, `carried`); `chained`: this run is such a decode (its end tells the thread)
        self.chain = chain
        self.chained = False


@dataclass
class StepSpec:
    """A step stage's compiled clauses (shared by the members of a family)."""

    loc: object
    budget: object  # a number, or a function (E, st) -> number
    chunk: object  # the same; 0: no cap
    granule: object  # None, a number, or a function
    cost: object  # a number, or a function (E, st)
    keys: object = None  # None (admission order) or a function (E, st, J, A) -> tuple
    keys_dynamic: bool = False  # the keys read running.*: re-read at every choice
    exclusive: bool = False
    body: list | None = None  # None: vLLM's schedule; else compiled iteration statements
    sets: bool = False  # the body sets registers
    registers: dict = field(default_factory=dict)


@dataclass
class IterationRecord:
    """What a claim over iterations reads of one iteration (serq/sim/oracle_run.py's records).

    Read when the iteration starts, after its batch is scheduled: `decoders`,
    `kv_decode`, `kv_prefill`, `attention` are the batch's (`kv_decode` the KV of its
    decoding requests once the iteration's token is written, in whole blocks of their
    growing pools, Σ ceil((p + 1) / b) * b; `kv_prefill` the positions p, before the
    iteration's tokens, of its prefilling requests; `attention` Σ n * (p + n / 2) over
    its prefill chunks), `residents` the running requests after scheduling, `demand`
    the tokens they could take with an unlimited budget, `served` the tokens of the
    earlier iterations, `arrived` the sessions started by the start."""

    start: float
    tokens: float
    prefilled: float
    decoders: float
    residents: float
    kv_decode: float
    kv_prefill: float
    attention: float
    demand: float
    served: float
    arrived: float
    preempted: int = 0
    admitted: int = 0
    # the batch: ((session, turn), tokens) in the batch's order; the session is the trace session the
    # run session replays (else its serial), the turn counts from 0 (serq.sim.oracle_run's keys)
    scheduled: tuple = ()
    # the stage's memory pools after scheduling: (pool, free units, units evicted since the run's start)
    memory: tuple = ()


class StepStage(StageMember):
    """One member of a step stage: its residents, the queues it admits, its iterations."""

    # its own fields in slots, for the reason Engine's are (serq.sim.engine); StageMember's stay
    # in the instance dict, few enough for CPython's compact per-class layout
    __slots__ = (
        'loc', 'spec', 'res', 'attn', 'group', 'grouped', 'n_walked', 'n_frac', 'admits', 'regs',
        'busy', 'planning', 'end_seq', 'end_fn', 'claims', 'records', '_memory', 'fresh',
        'adm_budget', 'batch', 'budget', 'budget0', 'chunk', 'granule', 'b_tok', 'b_pre', 'b_dec',
        'b_kvd', 'b_kvp', 'b_att', 'n_pre', 'n_adm', 'stop_serve', 'stop_admit', 't_start',
        'served_total', 'n_iter', 'iterations', 'tokens', 'preemptions', 'a_busy', 'a_res',
        'max_res', 't_last', 'completed', 'sojourn_sum',
    )

    service = "step"

    def __init__(self, engine, name: str, index: int | None, loc=None) -> None:
        super().__init__(engine, name, index)
        self.loc = loc
        self.spec: StepSpec | None = None
        self.res: list = []  # residents (jobs), in admission order
        self.attn: list = []  # the residents outside the decode group, in admission order
        self.group = DecodeGroup()
        self.grouped = False  # the iteration planned or run serves with the decode group
        self.n_walked = 0  # with the group: the batch's jobs the serving walk appended (before admissions)
        self.n_frac = 0  # residents whose growing pool allocates other than whole blocks (no group then)
        self.admits: list = []  # pool members whose queues it admits, in declaration order
        self.regs: dict = {}  # registers (one dict for the run: compiled code refers to it)
        self.busy = False
        self.planning = False
        self.end_seq = 0
        self.end_fn = self.end
        self.claims: list = []  # claims over its iterations
        self.records: list | None = None  # per-iteration records, when asked for
        self._memory: list | None = None  # memory_pools(), once asked for
        self.fresh: list | None = None  # jobs added while a thread this iteration admitted ran
        self.adm_budget: float | None = None  # budget_left while exclusive prefill tries a waiting prefill
        # the iteration being planned or executed
        self.batch: list = []
        self.budget = 0.0
        self.budget0 = 0.0
        self.chunk = 0.0
        self.granule = 0.0
        self.b_tok = self.b_pre = self.b_dec = self.b_kvd = self.b_kvp = self.b_att = 0.0
        self.n_pre = 0
        self.n_adm = 0
        self.stop_serve = False
        self.stop_admit = False
        self.t_start = 0.0
        self.served_total = 0.0  # tokens scheduled by its iterations since the run's start
        self.n_iter = 0  # iterations since the run's start
        # statistics (since the warm-up)
        self.iterations = 0
        self.tokens = 0.0
        self.preemptions = 0
        self.a_busy = 0.0
        self.a_res = 0.0
        self.max_res = 0

    # ------------------------------------------------------------ observables
    def clear_areas(self) -> None:
        self.a_busy = 0.0
        self.a_res = 0.0
        self.max_res = len(self.res)
        self.iterations = 0
        self.tokens = 0.0
        self.preemptions = 0

    def touch(self, now: float) -> None:
        dt = now - self.t_last
        if dt > 0.0:
            self.a_res += dt * len(self.res)
            if self.busy:
                self.a_busy += dt
            self.t_last = now

    def n_queue(self) -> float:
        return self.nwait()

    def n_busy(self) -> float:
        return float(len(self.res))

    def sync(self) -> None:
        """The decode group's members' true state in their fields, for a reader of positions,
        remaining tokens or session token counts (`decode_group.materialize`)."""
        if self.group.jobs:
            decode_group.sync(self)

    def work_left(self) -> float:
        self.sync()
        return math.fsum(J.rem for J in self.res)

    def ndec(self) -> float:
        return float(sum(1 for J in self.res if J.dec))

    def kvd(self) -> float:
        """running.kv_decode: the KV the decoding residents hold, in whole blocks of their growing
        pools (the blocks covering each one's position; no block: the position; no growing pool: 0)."""
        self.sync()
        return math.fsum(J.alloc.member.up(J.alloc.pos) for J in self.res if J.dec and J.alloc is not None)

    def kvp(self) -> float:
        return math.fsum(J.alloc.pos for J in self.res if not J.dec and J.alloc is not None)

    def nwait(self) -> float:
        n = 0
        for m in self.admits:
            n += len(m.queue)
        return float(n)

    def has_work(self) -> bool:
        if self.res:
            return True
        for m in self.admits:
            if m.queue:
                return True
        return False

    def budget_left(self) -> float:
        """budget_left(S): while an iteration is planned, the tokens it can still give the request
        being admitted (the budget left, up to the chunk cap; under exclusive prefill a waiting
        prefill sees the full budget); otherwise the budget an iteration would start with."""
        if self.planning:
            b = self.adm_budget if self.adm_budget is not None else self.budget
            c = self.chunk
            return c if 0.0 < c < b else b
        spec = self.spec
        b = spec.budget if spec.budget.__class__ is float else spec.budget(self.E, self)
        return b

    def demand(self) -> float:
        """The tokens the residents could take with an unlimited budget: one per decode with work
        left, the remaining prompt up to the chunk per prefill."""
        self.sync()
        c = self.chunk
        total = 0.0
        for J in self.res:
            r = J.rem
            if r <= 0.0:
                continue
            if J.dec:
                total += 1.0
            else:
                total += c if 0.0 < c < r else r
        return total

    # ------------------------------------------------------------ residents
    def add_run(self, T, w: float, dec: bool, F, i: int, chain=None) -> None:
        """`run S prefill|decode (w) [growing P]`: the thread becomes a resident. `chain`: the
        prefill carries the decode run after it (`chain_decode`)."""
        E = self.E
        alloc = None
        if F is not None:
            alloc = F.allocs[i]
            if alloc is None:
                raise RunError("a growing run: the hold gave this pool back (release) before the run")
        adm = T.adm_no
        if adm == 0:
            adm = T.adm_no = next(E.adm_seq)
        now = E.now
        J = Job(T, w, dec, alloc, adm, now, chain)
        if now > self.t_last:  # (touch: nothing to add at the same instant, as in an iteration's planning)
            self.touch(now)
        res = self.res
        if not res or res[-1].adm < adm:
            res.append(J)
        else:
            insort(res, J, key=admission)
        attn = self.attn
        if not attn or attn[-1].adm < adm:
            attn.append(J)
        else:
            insort(attn, J, key=admission)
        if J.frac:
            self.n_frac += 1
        if len(res) > self.max_res:
            self.max_res = len(res)
        T.state = AT_STAGE
        T.where = self
        T.job = J
        if self.fresh is not None:
            self.fresh.append(J)

    def remove(self, T) -> None:
        """A resident's session was preempted: its run leaves the stage; tokens the iteration being
        planned gave it return to the budget."""
        J = T.job
        if J is None:
            return
        self.touch(self.E.now)
        T.job = None
        if J.since != NOT_A_MEMBER:
            G = self.group
            served = self.planning and J.adm <= G.mark
            kv = J.kv
            decode_group.leave(self, J, False)
            if served:  # unserve, for a member: its token back
                self.budget += 1.0
                self.b_tok -= 1.0
                self.b_dec -= 1.0
                if G.kv_in:
                    self.b_kvd -= kv
        else:
            remove_sorted(self.attn, J)
        J.gone = True
        remove_sorted(self.res, J)
        if J.frac:
            self.n_frac -= 1
        if J.sched > 0.0 and self.planning:
            self.unserve(J)
            batch = self.batch
            i = batch.index(J)
            del batch[i]
            if i < self.n_walked:
                self.n_walked -= 1

    def victim(self, m):
        """The preemption victim on `m`, whose memory this stage is: among the residents holding it,
        the least preempt keys (decoding, position, admission: the place in the residents' order),
        ties to the one admitted last. None when no resident holds it. (The engine's choose_victim
        has synced the decode group: the positions are true.)"""
        cands = []
        for J in self.res:
            a = J.alloc
            if a is None or a.member is not m:
                a = _alloc_on(J.T, m)
            if a is not None and not a.lease:
                cands.append((J, a))
        if not cands:
            return None
        if m.lifo:
            return cands[-1][1]
        E = self.E
        keys = m.preempt_keys
        best = None
        bk = None
        for rank, (J, a) in enumerate(cands):
            T = a.frame.thread
            k = keys(E, T, T.A, 1.0 if J.dec else 0.0, a.pos, float(rank))
            if bk is None or k <= bk:
                best, bk = a, k
        return best

    # ------------------------------------------------------------ planning
    def start(self) -> bool:
        """Plan an iteration and start it. False when it schedules nothing and preempts nobody
        (the stage then waits for the next event)."""
        E = self.E
        spec = self.spec
        now = E.now
        saved = dict(self.regs) if spec.sets else None
        self.batch = []
        self.b_tok = self.b_pre = self.b_dec = self.b_kvd = self.b_kvp = self.b_att = 0.0
        self.n_pre = self.n_adm = 0
        self.stop_serve = self.stop_admit = False
        self.t_start = now
        self.planning = True
        try:
            try:
                b = spec.budget
                if b.__class__ is not float:
                    b = b(E, self)
                    if not b >= 0.0:
                        check_amount(b, f"the tokens cap of `{self.label}`")
                self.budget = self.budget0 = b
                c = spec.chunk
                if c.__class__ is not float:
                    c = c(E, self)
                self.chunk = c if 0.0 < c < math.inf else 0.0
                g = spec.granule
                if g is not None:
                    if g.__class__ is not float:
                        g = g(E, self)
                    self.granule = g if 0.0 < g < math.inf else 0.0
            except (RunError, DrawError) as e:
                raise E.located(e, None, self.loc) from None
            if spec.body is None and not spec.exclusive:
                if spec.keys is None:
                    if DECODE_GROUPS and not self.n_frac:
                        self.grouped = True
                        serve_grouped(self)
                    else:
                        self.grouped = False
                        if self.group.jobs:
                            decode_group.disband(self)
                        self._serve_in_order()
                else:
                    self.serve(None)
                if self.n_pre == 0 and self.budget > 0.0:
                    for m in self.admits:
                        if m.queue:
                            self.admit(None, None, until_preempted=True)
                            break
            elif spec.exclusive:
                self.plan_exclusive()
            else:
                self.run_body(spec.body)
        finally:
            self.planning = False
            self.adm_budget = None
        if self.b_tok <= 0.0 and self.n_pre == 0:
            if saved is not None and self.n_adm == 0:
                self.regs.clear()
                self.regs.update(saved)
            for J in self.batch:
                J.sched = 0.0
            self.batch = []
            self.group.mark = 0  # (no member was served: with no token scheduled, none is left)
            self.group.kv_in = False
            return False
        # an iteration: its time over the batch
        try:
            cost = spec.cost if spec.cost.__class__ is float else spec.cost(E, self)
        except (RunError, DrawError) as e:
            raise E.located(e, None, self.loc) from None
        if not cost >= 0.0 or cost == math.inf:
            raise E.located(RunError(f"the iteration of `{self.label}` lasts {_num(cost)}: `execute` is a "
                                     "nonnegative, finite time"), None, self.loc)
        if cost == 0.0 and self.b_tok > 0.0:
            raise E.located(RunError(f"an iteration of `{self.label}` schedules {_num(self.b_tok)} token(s) and "
                                     "`execute` gives it no time: an iteration that schedules tokens lasts a "
                                     "positive time"), None, self.loc)
        if self.claims or self.records is not None:
            self.observe_iteration()
        if now > self.t_last:  # (touch: nothing to add when the last iteration ended at this instant)
            self.touch(now)
        self.busy = True
        self.n_iter += 1
        self.iterations += 1
        tokens = self.b_tok
        self.tokens += tokens
        self.served_total += tokens
        self.preemptions += self.n_pre
        seq = self.end_seq = next(E.seq)  # (E.schedule, written out)
        heappush(E.heap, (now + cost, seq, self.end_fn, None))
        return True

    def run_body(self, stmts: list) -> None:
        E = self.E
        for s in stmts:
            kind = s[0]
            if kind == SERVE:
                self.serve(s[1])
            elif kind == ADMIT:
                self.admit(s[1], s[2])
            elif kind == BRANCH:
                g = self._guard(s[1], s[4])
                self.run_body(s[2] if g else s[3])
            else:
                try:
                    self.regs[s[1]] = s[2](E, self)
                except (RunError, DrawError) as e:
                    raise E.located(e, None, s[3] or self.loc) from None

    def _guard(self, fn, loc) -> bool:
        E = self.E
        try:
            g = fn(E, self)
        except (RunError, DrawError) as e:
            raise E.located(e, None, loc or self.loc) from None
        if g == 1.0:
            return True
        if g == 0.0:
            return False
        raise E.located(RunError(f"a guard is {_num(g)}: a branch or while guard is 0 or 1"), None, loc or self.loc)

    def _only(self, fn, J) -> bool:
        E = self.E
        try:
            return fn(E, self, J, J.T.A) != 0.0
        except (RunError, DrawError) as e:
            raise E.located(e, J.T, self.loc) from None

    def serve(self, only) -> None:
        """`advance running [only (p)]`: the residents not yet served, in the serve order."""
        if self.stop_serve:
            return
        spec = self.spec
        keys = spec.keys
        if keys is None and only is None:
            self._serve_in_order()
            return
        if keys is None or not spec.keys_dynamic:
            if keys is None:
                order = self.res[:]
            else:
                order = self._sorted(self.res)
            for J in order:
                if self.budget <= 0.0 or self.stop_serve:
                    return
                if J.gone or J.sched > 0.0:
                    continue
                if only is not None and not self._only(only, J):
                    continue
                self.serve_one(J)
            return
        # keys that read running.*: chosen one at a time, as the residents stand
        seen: set = set()
        while self.budget > 0.0 and not self.stop_serve:
            cands = [J for J in self.res if J.sched <= 0.0 and id(J) not in seen]
            if not cands:
                return
            J = self._sorted(cands)[0]
            seen.add(id(J))
            if only is not None and not self._only(only, J):
                continue
            self.serve_one(J)

    def _serve_in_order(self) -> None:
        """`advance running` in admission order with no `only`: serve_one, with a decode written out
        (the hot path: one token, a growth only when it crosses its allocation). The decodes' sums
        are kept in locals and added to the batch's before anything else reads them."""
        budget = self.budget
        append = self.batch.append
        n = 0.0
        kvd = 0.0
        for J in self.res[:]:
            if J.sched > 0.0 or J.gone:
                continue
            if J.dec and budget >= 1.0 and J.rem > 0.0:
                a = J.alloc
                if a is not None:
                    t = a.pos + 1.0
                    m = a.member
                    # the decode's KV once its token is written, in whole blocks (_kv_decode): also
                    # what its hold grows to when the token is past its allocation
                    kv = m.up(t)
                    if t > a.units:
                        self.budget = budget
                        self._add_decodes(n, kvd)
                        n = kvd = 0.0
                        ok = self.grow(J, a, m, t, kv)
                        budget = self.budget
                        if not ok:
                            if self.stop_serve:
                                return
                            continue
                    a.req = t
                    kvd += kv
                J.sched = 1.0
                budget -= 1.0
                append(J)
                n += 1.0
                continue
            self.budget = budget
            self._add_decodes(n, kvd)
            n = kvd = 0.0
            if budget <= 0.0 or self.stop_serve:
                return
            self.serve_one(J)
            budget = self.budget
        self.budget = budget
        self._add_decodes(n, kvd)

    def _add_decodes(self, n: float, kvd: float) -> None:
        """Count `n` decodes whose KV (`_kv_decode`) sums to `kvd` in the iteration's batch (the serving
        loop adds them up in locals and counts them here before anything else reads the batch). A
        decode adds nothing to the batch's attention."""
        self.b_tok += n
        self.b_dec += n
        self.b_kvd += kvd

    def _sorted(self, jobs: list) -> list:
        E = self.E
        keys = self.spec.keys
        try:
            return sorted(jobs, key=lambda J: (keys(E, self, J, J.T.A), J.adm))
        except (RunError, DrawError) as e:
            raise E.located(e, None, self.loc) from None

    def serve_one(self, J) -> None:
        """Schedule a resident's tokens, growing its hold first (preempting if the pool says so)."""
        rem = J.rem
        if rem <= 0.0:
            return
        budget = self.budget
        if J.dec:
            n = 1.0
            if budget < 1.0:
                return
        else:
            n = rem
            c = self.chunk
            if 0.0 < c < n:
                n = c
            if budget < n:
                n = budget
            g = self.granule
            if g > 0.0 and n < rem:
                n = math.floor(n / g) * g
                if n <= 0.0:  # passed over: and no one is admitted after it
                    self.stop_admit = True
                    return
        a = J.alloc
        pos = 0.0
        if a is not None:
            pos = a.pos
            m = a.member
            target = pos + n
            if target > a.req:
                new_units = m.up(target)
                if new_units > a.units and not self.grow(J, a, m, target, new_units):
                    return
                a.req = target
        J.sched = n
        J.stall = None
        self.budget -= n
        self.batch.append(J)
        self.b_tok += n
        if J.dec:
            self.b_dec += 1.0
            self.b_kvd += _kv_decode(a)
        else:
            self.b_pre += n
            self.b_kvp += pos
            self.b_att += n * (pos + n * 0.5)

    def unserve(self, J) -> None:
        n = J.sched
        J.sched = 0.0
        a = J.alloc
        pos = a.pos if a is not None else 0.0
        self.budget += n
        self.b_tok -= n
        if J.dec:
            self.b_dec -= 1.0
            self.b_kvd -= _kv_decode(a)
        else:
            self.b_pre -= n
            self.b_kvp -= pos
            self.b_att -= n * (pos + n * 0.5)

    def grow(self, J, a, m, target: float, new_units: float) -> bool:
        """Grow a resident's hold to `new_units`; with `preempt by`, take victims until it fits or the
        grower itself is taken (then the iteration's serving ends). False: not served."""
        m.grows += 1
        if not m.preempt_by:
            if m.fits_growth(a, new_units):
                m.grow_hold(a, new_units)
                J.stall = None
                return True
            if J.stall is not m:
                m.grow_waits += 1
            J.stall = m
            return False
        if not m.fits_growth(a, new_units):
            E = self.E
            T = J.T
            while not m.fits_growth(a, new_units):
                victim = E.choose_victim(m)
                self.n_pre += 1
                E.preempt(victim, m)
                if victim.frame.thread is T:
                    self.stop_serve = True
                    return False
        m.grow_hold(a, new_units)
        return True

    def head(self):
        for m in self.admits:
            q = m.queue
            if q:
                # (E.select_head(m), whose answer is the queue's head without `queue by`)
                return q[0] if not m.queue_by else self.E.select_head(m)
        return None

    def admit_one(self):
        """Admit the head of the first non-empty queue and run its thread at once. Returns the jobs
        it added to this stage, or None when the head does not fit."""
        E = self.E
        F = self.head()
        if F is None:
            return None
        try:
            ok = E.try_admit(F)
        except (RunError, DrawError) as e:
            raise E.located(e, F.thread, F.spec.loc) from None
        if not ok:
            return None
        self.n_adm += 1
        T = F.thread
        ready = E.ready
        if ready and ready[-1] is T:
            ready.pop()
        else:
            ready.remove(T)
        fresh = self.fresh = []
        try:
            E.step(T)
        finally:
            self.fresh = None
        return fresh

    def admit(self, only, gate, until_preempted: bool = False) -> None:
        """`admit waiting [only (p)] [while (e)]`: the heads, one at a time, each served at once.
        `until_preempted`: vLLM's default schedule, whose `while (running.preempted == 0)` the IR does
        not write out; like a written gate it is read before every admission, so an admitted run whose
        growth preempts (itself, or another resident) ends the iteration's admissions."""
        while self.budget > 0.0 and not self.stop_admit:
            if until_preempted and self.n_pre:
                return
            if gate is not None and not self._guard(gate[0], gate[1]):
                return
            fresh = self.admit_one()
            if fresh is None:
                return
            for J in fresh:
                if J.gone or self.budget <= 0.0:
                    continue
                if only is not None and not self._only(only, J):
                    continue
                self.serve_one(J)

    def plan_exclusive(self) -> None:
        """`exclusive prefill`: one prefill alone, or a decode-only batch."""
        for J in self.res[:]:
            if J.gone or J.dec or J.rem <= 0.0:
                continue
            self.serve_one(J)  # a running prefill takes precedence
            if J.sched > 0.0 or self.stop_serve:
                self.stop_admit = True
                return
        for J in self.res[:]:
            if self.budget <= 0.0 or self.stop_serve:
                break
            if not J.gone and J.dec and J.sched <= 0.0:
                self.serve_one(J)
        if self.n_pre:
            return
        # a waiting prefill that fits displaces the tentative decodes and takes the full budget;
        # the schedule's `while (running.preempted == 0)` is read before every admission
        while not self.stop_admit and not self.n_pre:
            self.adm_budget = self.budget0
            fresh = self.admit_one()
            self.adm_budget = None
            if fresh is None:
                return
            prefill = next((J for J in fresh if not J.gone and not J.dec and J.rem > 0.0), None)
            if prefill is not None:
                for J in self.batch:
                    self.unserve(J)
                self.batch = []
                self.serve_one(prefill)
                self.stop_admit = True
                return
            for J in fresh:
                if not J.gone and self.budget > 0.0:
                    self.serve_one(J)
            if self.budget <= 0.0:
                return

    # ------------------------------------------------------------ the iteration's end
    def end(self, _arg, seq: int) -> None:
        if seq != self.end_seq:
            return
        E = self.E
        now = E.now
        self.touch(now)
        self.busy = False
        batch = self.batch
        self.batch = []
        if self.spec.keys is not None or self.spec.body is not None:
            batch.sort(key=admission)
        t0 = self.t_start
        # the decode group's token: one to each member, applied by the clock (decode_group.materialize)
        G = self.group
        G.clock += 1
        G.t0 = t0
        G.mark = 0
        G.kv_in = False
        joining = self.grouped
        for J in batch:
            if J.gone:
                continue
            n = J.sched
            J.sched = 0.0
            rem = J.rem - n
            J.rem = rem
            a = J.alloc
            if a is not None:
                a.pos += n
                a.advanced = True
            if J.dec:
                S = J.S
                if S.ndec and S.first_token is not None:  # E.decode_token, the common case written out
                    S.out_tokens += 1
                    S.ndec += 1
                    S.last_start = t0
                else:
                    E.decode_token(S, t0, now)
            elif rem <= 0.0:
                E.prefill_token(J.S, t0, now)
                if J.chain is not None and self.chain_decode(J, now):
                    continue
            if rem <= 0.0:
                self.finish(J, now)
            elif joining and J.dec:
                decode_group.try_join(self, J)

    def chain_decode(self, J, now: float) -> bool:
        """A prefill that carries the decode after it ended: the decode's work read as the thread would
        read it on this instant (attributes and numbers only, `compile._chains`); a positive one turns
        the run into the decode in place, what the thread's next statement would add: the same
        resident, place (the thread's admission number) and hold, a new run from now outside the
        decode group. The prefill's run is done for the stage's statistics. False: the thread reads it
        itself (no work, or an error it reports at its statement)."""
        fn = J.chain
        J.chain = None
        T = J.T
        try:
            w = fn(self.E, T, T.A)
        except Exception:  # (the thread evaluates it again and reports it where it is written)
            return False
        if not w > 0.0:
            return False
        self.completed += 1
        self.sojourn_sum += now - J.t0
        J.dec = True
        J.rem = w
        J.t0 = now
        J.stall = None
        J.chained = True
        return True

    def finish(self, J, now: float) -> None:
        """A resident's run is done (never a decode group member: its last token is visited)."""
        if J.chained:  # (the thread's prefill statement resumes: its decode ran)
            J.T.chained = True
        remove_sorted(self.res, J)
        remove_sorted(self.attn, J)
        if J.frac:
            self.n_frac -= 1
        J.gone = True
        T = J.T
        T.job = None
        self.completed += 1
        self.sojourn_sum += now - J.t0
        if T.ready_t == now:
            self.E.make_ready(T)
        else:  # (E.make_ready's first readiness at this instant, written out as FifoStage.done does)
            T.ready_t = now
            T.ready_n = 1
            T.state = READY
            self.E.ready.append(T)

    # ------------------------------------------------------------ claims and records
    def observe_iteration(self) -> None:
        E = self.E
        if self.records is not None:
            self.records.append(IterationRecord(
                self.t_start, self.b_tok, self.b_pre, self.b_dec, float(len(self.res)), self.b_kvd, self.b_kvp,
                self.b_att, self.demand(), self.served_total, float(E.n_arrived), self.n_pre, self.n_adm,
                tuple(((J.S.trace_no if J.S.trace_no is not None else J.S.serial, J.S.turns - 1),
                       1.0 if J.since != NOT_A_MEMBER else J.sched)
                      for J in (decode_group.scheduled_jobs(self) if self.grouped else self.batch) if not J.gone),
                tuple((m.label, m.cap - m.used, m.evicted_total) for m in self.memory_pools())))
        k = self.n_iter
        for cs in self.claims:
            if cs.settled or cs.out_of_scope is not None:
                continue
            try:
                v = cs.value(E, self)
            except (RunError, DrawError) as e:
                raise E.located(e, None, cs.claim.at) from None
            if cs.form == "every_iteration":
                if v == 0.0:
                    cs.settled = (E.now, k)
            elif v != 0.0:
                cs.settled = (E.now, k)

    def memory_pools(self) -> list:
        """The pools this stage is the memory of (its residents are their preemption victims)."""
        if self._memory is None:
            self._memory = [m for ms in self.E.pool_members.values() for m in ms if m.mem_stage is self]
        return self._memory

    def summary(self, span: float) -> dict:
        return {
            "service": "step",
            "utilization": _div(self.a_busy, span),
            "mean_busy": _div(self.a_res, span),
            "mean_queue": None,
            "mean_number": _div(self.a_res, span),
            "max_number": self.max_res,
            "completed": self.completed,
            "throughput": _div(self.completed, span),
            "mean_wait": None,
            "mean_sojourn": _div(self.sojourn_sum, self.completed),
            "iterations": self.iterations,
            "tokens": self.tokens,
            "mean_batch": _div(self.tokens, self.iterations),
            "preemptions": self.preemptions,
            "residents_at_end": len(self.res),
            "idle_at_end": (not self.busy) and self.has_work(),
        }


def _kv_decode(a) -> float:
    """batch.kv_decode's share of a decode served from position p on its growing pool's hold `a`:
    its KV once the iteration's token is written, in whole blocks, ceil((p + 1) / b) * b (no block:
    p + 1); 0 without a growing pool (no allocation). Positions advance only when the iteration
    ends, so serving and unserving read the same p."""
    if a is None:
        return 0.0
    return a.member.up(a.pos + 1.0)


def _alloc_on(T, m):
    for F in reversed(T.frames):
        for a in F.allocs:
            if a is not None and a.member is m:
                return a
    return None


def _div(a: float, b: float):
    if not b:
        return None
    return a / b
