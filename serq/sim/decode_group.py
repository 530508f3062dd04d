"""The decode group of a step stage: the decoding residents whose iteration is only their token.

Under the default schedule (`advance running` in admission order: no serve keys, no iteration
body, no exclusive prefill) most residents of a busy engine are decodes whose next token grows
nothing, changes nothing of `batch.kv_decode` and ends nothing: one token each, the same every
iteration. Serving them one by one and then applying each one's token was most of the engine's
time (issue 15), so the stage keeps them together as its decode group:

- A member's stored state (its hold's position, its run's `remaining`, its session's output
  counts and last-token start) is right as of the group clock `J.since`. The clock counts the
  iterations the group advanced; the true state is the stored one moved by `clock - J.since`
  tokens, written back by `materialize` whenever something else is about to read it (the
  stage's own observables, a preemption, the run's end) and when the member leaves.
- Each member is due for attention at a clock of its own (`due_at` finds the members due): the
  iteration whose token crosses its allocation or its block (it grows, or its kv_decode share
  changes) or is its last (its run ends, which the iteration's end does in order). Until then the
  group serves it without looking at it; when it is due the walk visits it in its place, and the
  growths of the members it visits are applied together (`PoolMember.grow_holds`) before anything
  else touches the pool.
- Most members are due every block of tokens only to grow their allocation and kv share by a
  block. A member whose allocation is its blocks exactly joins a growth cohort (`Cohort`): the
  members whose tokens cross into a new block at the same iterations. A crossing is applied to the
  pool and the group's kv sum as a count (`grow_cohort`) when that gives what the visits would
  (every growth of the iteration fits in any order, the budget reaches everyone); the members'
  stored allocations and shares catch up when something reads them. Such a member is visited one
  by one only for its last token, or when the count cannot apply.
- The walk (`serve_grouped`) visits, in admission order, the residents outside the group and the
  members that are due; the members between two visits are served as a count, one token each
  while the budget lasts, exactly as the one-by-one walk (`StepStage._serve_in_order`) serves
  them. A member the budget does not reach leaves the group unserved.

What makes a move by k tokens at once the same as k moves by one, and the members' kv shares
add up to the same sum in any order: a member's position and remaining are whole numbers, and
every resident's growing pool (when the stage takes this path) allocates whole blocks of a whole
size (`StepStage.n_frac` counts the residents for which that does not hold; one of them sends the
stage down the one-by-one walk). A member is its session's main thread, without legs, so only the
stage changes its session's token counts while it is resident.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from math import ceil, inf
from operator import attrgetter

NOT_A_MEMBER = -1
ALL_SERVED = float("inf")  # `mark` once the walk is done: every member is in the iteration


admission = attrgetter("adm")  # a job's admission number: the key of the residents' order


class Cohort:
    """Members whose allocations are their blocks exactly (`a.units` is the blocks covering the
    token the last iteration gave them), in one pool, whose tokens cross into a new block at the
    same iterations: every `bs` from the clock they are filed under in `DecodeGroup.cohorts`. Such a
    crossing grows each by a block and raises its kv share by a block; the cohort applies it to the
    pool and to the group's kv sum as a count (`grow_cohort`), and each member's stored allocation
    and share catch up (`materialize`) only when something reads them."""

    __slots__ = ("members", "grown", "pool", "bs")

    def __init__(self, pool) -> None:
        self.members: list = []  # in no particular order: a crossing grows them all alike
        self.grown = 0  # the crossings applied (a member's `base` is this when it was last right)
        self.pool = pool
        self.bs = pool.bs


class DecodeGroup:
    """A step stage's decode group (the module's docstring says what it keeps and why)."""

    __slots__ = ("jobs", "adms", "kv", "clock", "t0", "due_at", "mark", "kv_in", "cohorts")

    def __init__(self) -> None:
        self.jobs: list = []  # the members, in admission order
        self.adms: list = []  # their admission numbers, for bisect
        self.kv = 0.0  # the members' kv_decode shares, summed
        self.clock = 0  # the iterations the group advanced (one token to every member)
        self.t0 = 0.0  # the start of the last of them (the members' last-token start)
        self.due_at: dict = {}  # clock -> the members due at the iteration planned then (`J.due`)
        # the members admitted at or before `mark` are in the iteration being planned or run (0:
        # none yet; ALL_SERVED after the walk): its token is theirs, and if one leaves the stage
        # while the iteration is planned, the token returns to the budget
        self.mark = 0
        self.kv_in = False  # the members' kv shares are in the batch's `b_kvd` (after the walk)
        self.cohorts: dict = {}  # clock -> the Cohort whose members' tokens cross a block then

    def due(self, J, clock: int) -> None:
        """J needs attention at the iteration planned at `clock` (always a later one: every plan
        takes the members due at its clock, and the clock moves by one an iteration)."""
        J.due = clock
        members = self.due_at.get(clock)
        if members is None:
            self.due_at[clock] = [J]
        else:
            members.append(J)

    def visits(self, attn: list, due: list) -> list:
        """The residents the walk visits, in admission order: those outside the group (`attn`) and
        the members `due` now (taken from `due_at`: the walk attends to them)."""
        for J in due:
            J.due = 0
        if attn:
            # (admission numbers are unique: one sort, of two runs, merges them)
            due = attn + due
            due.sort(key=admission)
        elif len(due) > 1:
            due.sort(key=admission)
        return due


def services_left(J, pos: float, rem: float, kv: float) -> float:
    """How many iterations in a row, from the next, the group can serve J without looking at it,
    when its position is `pos`, its remaining `rem` and `kv` the blocks covering its next token
    (up(pos + 1)): its tokens until the one that passes its allocation or its block, and short of
    its last."""
    last = rem - 1.0
    a = J.alloc
    if a is None:
        return last
    limit = kv
    if a.units < limit:
        limit = a.units
    n = limit - pos
    return n if n < last else last


def materialize(st, J) -> None:
    """Write a member's true state into its fields (it stays a member)."""
    G = st.group
    k = G.clock - J.since
    a = J.alloc
    if J.cohort is not None:
        catch_up(J)
    if k:
        J.since = G.clock
        J.rem -= float(k)
        if a is not None:
            a.pos += float(k)
            a.advanced = True
        S = J.S
        S.out_tokens += k
        S.ndec += k
        S.last_start = G.t0
    if a is not None:
        # what the one-by-one walk leaves: the position its token will reach while an iteration has
        # it, else where it is
        a.req = a.pos + 1.0 if J.adm <= G.mark else a.pos


def catch_up(J) -> None:
    """A cohort member's stored allocation and kv share moved by the cohort's crossings since."""
    C = J.cohort
    d = C.grown - J.base
    if d:
        J.base = C.grown
        g = C.bs * d
        J.alloc.units += g
        J.kv += g


def detach(J) -> None:
    """J out of its cohort, its allocation and kv share right (it is visited one by one again)."""
    catch_up(J)
    J.cohort.members.remove(J)
    J.cohort = None


def sync(st) -> None:
    """Every member's true state in its fields, for a reader outside the group's bookkeeping."""
    for J in st.group.jobs:
        materialize(st, J)


def try_join(st, J) -> None:
    """At an iteration's end, after J's token: J joins the group if it may and it would be served
    at least once before it is due."""
    S = J.S
    if J.T is not S or S.legs_live or not S.ndec or S.first_token is None:
        return
    rem = J.rem
    if rem % 1.0:  # not a whole number (inf and NaN are not either: their remainder is NaN)
        return
    a = J.alloc
    pos = 0.0
    kv = 0.0
    if a is not None:
        pos = a.pos
        if a.req != pos or pos % 1.0:
            return
        bs = a.member.bs  # (up(pos + 1), written out: the group's pools allocate whole blocks)
        kv = bs * ceil((pos + 1.0) / bs)
    n = services_left(J, pos, rem, kv)
    if n < 1.0:
        return
    G = st.group
    remove_sorted(st.attn, J)
    i = bisect_left(G.adms, J.adm)
    G.adms.insert(i, J.adm)
    G.jobs.insert(i, J)
    G.kv += kv
    J.kv = kv
    J.since = G.clock
    G.due(J, G.clock + int(n))


def leave(st, J, to_attention: bool) -> None:
    """J leaves the group, its true state written back; `to_attention`: it stays a resident."""
    G = st.group
    materialize(st, J)
    if J.cohort is not None:
        detach(J)
    adms = G.adms
    i = bisect_left(adms, J.adm)
    jobs = G.jobs
    while jobs[i] is not J:
        i += 1
    del adms[i]
    del jobs[i]
    if J.due:
        G.due_at[J.due].remove(J)
        J.due = 0
    G.kv -= J.kv
    J.kv = 0.0
    J.since = NOT_A_MEMBER
    if to_attention:
        insort(st.attn, J, key=admission)


def disband(st) -> None:
    """Every member back among the residents the walk visits (the one-by-one walk is next)."""
    for J in st.group.jobs[:]:
        leave(st, J, True)


def leave_unserved(st) -> None:
    """The members the walk did not reach (the budget ran out, or the serving ended) leave the group:
    this iteration does not move them."""
    G = st.group
    i = bisect_right(G.adms, G.mark)
    if i < len(G.jobs):  # (the common case, every member served, copies nothing)
        for J in G.jobs[i:]:
            leave(st, J, True)


def serve_grouped(st) -> None:
    """`advance running` in admission order, as `StepStage._serve_in_order` does it, with the decode
    group: the walk visits the residents outside the group and the members due now; the members in
    between are served as a count. The batch's sums take the same additions in the same order (the
    members' kv shares, whole numbers, at the end), so every value is the one-by-one walk's."""
    G = st.group
    clock = G.clock
    adms = G.adms
    G.mark = 0
    # members' growths that fit, not yet applied: `growing.grow_holds` applies them before anything
    # else reads or changes the pool (PoolMember.batches_growths says when that gives the same)
    growing = None
    growths: list = []
    grown = 0.0
    due_at = G.due_at
    due = due_at.pop(clock, None)
    if due is not None:
        for J in due:
            if J.cohort is not None:  # (its last token: visited one by one)
                detach(J)
    C = G.cohorts.pop(clock, None)
    if C is not None and C.members and not grow_cohort(st, C, clock, due):
        # the crossing is not one that a count can apply: the members are due one by one
        if due is None:
            due = []
        for J in C.members[:]:
            detach(J)
            due_at[J.due].remove(J)
            due.append(J)
    visits = st.attn[:] if due is None else G.visits(st.attn, due)
    budget = st.budget
    append = st.batch.append
    n = 0.0  # decodes served since the batch's sums were last brought up to date (as the walk's)
    kvd = 0.0  # their kv shares, the members' excepted
    # the batch's token sum holds a whole number: then a member's growth that waits with the others
    # need not bring the sums up to date first (whole numbers add up exactly in any grouping; the
    # decode and kv sums always hold whole numbers here); a fractional prefill chunk, served or
    # given back, can end that
    token_sum_whole = True
    ended = False
    # the first member the walk has not reached, bisect_right(adms, G.mark), kept as the walk moves
    # the mark; -1 once a call may have taken members out of the group (a growth that preempts, a
    # member leaving): found again then
    i0 = 0
    for J in visits:
        if J.sched > 0.0 or J.gone:
            continue
        if J.since != NOT_A_MEMBER and token_sum_whole and 0 <= i0 and len(adms) - i0 <= budget:
            # a member due, with budget for it and every member after the last one counted: they all
            # take their token, counted later as the members before the next count (the next visit
            # outside the group, a growth that does not wait with the others, its last token, or the
            # walk's end), which is what counting them here adds (whole numbers, in one sum either
            # way: the sums are brought up to date at the same places). The bisection, the count and
            # the mark per visit are saved; the mark stays behind J (J's materialize reads the same).
            counted = False
        else:
            counted = True
            # the members before J that the walk has not reached: each takes one token while the
            # budget lasts
            if i0 < 0:
                i0 = bisect_right(adms, G.mark)
            i1 = bisect_left(adms, J.adm)
            if i1 > i0:
                count = i1 - i0
                if budget >= count:
                    budget -= count
                    n += count
                    G.mark = adms[i1 - 1]
                    i0 = i1
                else:
                    budget, n, ended = _budget_ends_among(st, i0, i1, budget, n, kvd)
                    kvd = 0.0
                    i0 = -1
                    if ended:
                        break
        if J.since != NOT_A_MEMBER:  # a member due for attention
            # (its true state read, not written back: nothing else reads it here, and a preemption
            # that the growth makes syncs the group first)
            behind = clock - J.since
            rem = J.rem - behind
            if budget >= 1.0 and rem > 1.0:
                a = J.alloc
                if a is None:
                    G.due(J, clock + 1 + int(rem - 2.0))
                else:
                    t = a.pos + behind + 1.0
                    bs = a.member.bs  # (a member's pool allocates whole blocks: up(x) is this)
                    kv = bs * ceil(t / bs)
                    units = a.units
                    if t > units:
                        m = a.member
                        # (fits_growth, after the pending growths)
                        if (growing is m or (growing is None and m.batches_growths)) \
                                and m.used + grown + (kv - units) <= m.cap:
                            if not token_sum_whole:  # (the sums take the one-by-one walk's additions)
                                st.b_tok += n  # (st._add_decodes(n, kvd), written out)
                                st.b_dec += n
                                st.b_kvd += kvd
                                n = kvd = 0.0
                            growing = m
                            grown += kv - units
                            growths.append((a, kv))
                        else:
                            if not counted:  # the members before J counted now (the budget covers them)
                                budget, n, i1 = _count_members_before(G, J, i0, budget, n)
                                counted = True
                            st.budget = budget
                            st._add_decodes(n, kvd)
                            n = kvd = 0.0
                            i0 = -1
                            if growths:
                                growing.grow_holds(growths)
                                growing, growths, grown = None, [], 0.0
                            if m.preempt_by and m.fits_growth(a, kv):  # StepStage.grow when no one is preempted
                                m.grows += 1
                                m.grow_hold(a, kv)
                            else:
                                ok = st.grow(J, a, m, t, kv)
                                budget = st.budget
                                token_sum_whole = st.b_tok % 1.0 == 0.0
                                if not ok:
                                    if st.stop_serve:
                                        ended = True
                                        break
                                    leave(st, J, True)  # its growth did not fit: not served, out of the group
                                    continue
                        # its hold is now `kv`, the blocks covering t: its token passes it first
                        left = kv - t
                        steady = True
                    else:
                        left = bs * ceil((t + 1.0) / bs)
                        if units < left:
                            left = units
                        left -= t
                        steady = units == kv
                    # served: its kv share becomes `kv`, and its next visit is due, counted from the
                    # iteration after this one, when a token crosses its allocation or its block or is
                    # its last (services_left(J, t, rem - 1) and G.due, written out: a member is due
                    # every block of tokens)
                    G.kv += kv - J.kv
                    J.kv = kv
                    if rem - 2.0 < left:
                        left = rem - 2.0
                    elif steady and rem - 2.0 > left and join_cohort(G, J, a, clock + 1 + int(left)):
                        left = rem - 2.0  # its own next visit is its last token
                    at = clock + 1 + int(left)
                    J.due = at
                    members = due_at.get(at)
                    if members is None:
                        due_at[at] = [J]
                    else:
                        members.append(J)
                if counted:
                    budget -= 1.0
                    n += 1.0
                    G.mark = J.adm
                    if i0 >= 0:  # (J is adms[i1])
                        i0 = i1 + 1
                continue
            # its last token, or the budget is short of a token: it is visited as any resident
            if not counted:
                budget, n, i1 = _count_members_before(G, J, i0, budget, n)
            leave(st, J, True)
            i0 = -1
        if J.dec and budget >= 1.0 and J.rem > 0.0:
            a = J.alloc
            if a is not None:
                t = a.pos + 1.0
                m = a.member
                bs = m.bs  # (m.up(t), written out: with the group, every growing pool has whole blocks)
                kv = bs * ceil(t / bs)
                if t > a.units:
                    st.budget = budget
                    st._add_decodes(n, kvd)
                    n = kvd = 0.0
                    i0 = -1
                    if growths:
                        growing.grow_holds(growths)
                        growing, growths, grown = None, [], 0.0
                    ok = st.grow(J, a, m, t, kv)
                    budget = st.budget
                    token_sum_whole = st.b_tok % 1.0 == 0.0
                    if not ok:
                        if st.stop_serve:
                            ended = True
                            break
                        continue
                a.req = t
                kvd += kv
            J.sched = 1.0
            budget -= 1.0
            append(J)
            n += 1.0
            continue
        st.budget = budget
        st._add_decodes(n, kvd)
        n = kvd = 0.0
        if budget <= 0.0 or st.stop_serve:
            ended = True
            break
        if growths:
            growing.grow_holds(growths)
            growing, growths, grown = None, [], 0.0
        st.serve_one(J)
        i0 = -1
        budget = st.budget
        token_sum_whole = st.b_tok % 1.0 == 0.0
    if growths:
        growing.grow_holds(growths)
    if not ended:
        if i0 < 0:
            i0 = bisect_right(adms, G.mark)
        i1 = len(adms)
        if i1 > i0:  # the members after the last visit
            count = i1 - i0
            if budget >= count:
                budget -= count
                n += count
                G.mark = adms[i1 - 1]
            else:
                budget, n, ended = _budget_ends_among(st, i0, i1, budget, n, kvd)
                kvd = 0.0
        st.budget = budget
        st._add_decodes(n, kvd)
    leave_unserved(st)
    st.n_walked = len(st.batch)
    st.b_kvd += G.kv
    G.kv_in = True
    G.mark = ALL_SERVED


def join_cohort(G, J, a, at: int) -> bool:
    """J, whose allocation is now its blocks exactly and whose token crosses into a new block at the
    iteration planned at `at` (before its last), joins the cohort crossing then, if a count can apply
    the crossing to its pool (`grow_cohort`)."""
    m = a.member
    if a.reserve > J.kv or not m.batches_growths or (m.cap != inf and m.cap % m.bs):
        return False
    C = G.cohorts.get(at)
    if C is None:
        C = G.cohorts[at] = Cohort(m)
    elif C.pool is not m:
        return False
    C.members.append(J)
    J.cohort = C
    J.base = C.grown
    return True


def grow_cohort(st, C, clock: int, due) -> bool:
    """The crossing of cohort C at the iteration planned at `clock`, as a count: every member grows
    its pool by a block and its kv share by a block, before the walk. That is what the walk's visits
    would do when every growth of the iteration fits whatever the order and the budget reaches
    every resident: the residents outside the group, visited between the members in admission order,
    read nothing the count changes (their growth's fit, which then holds either way), and there is
    room for the members' blocks, a block for each member due one by one (its growth is at most a
    block: its allocation covers the token before) and each outside resident's growth if it takes
    what it asks. The pool evicts once for all of them, which takes what evicting after each would
    (`PoolMember.batches_growths`, whole blocks of a cap of whole blocks). False: the members are
    visited one by one instead."""
    G = st.group
    m = C.pool
    bs = C.bs
    count = len(C.members)
    extra = bs * count
    # the blocks the walk may add to the pool, and the tokens it gives if it reaches everyone
    room = m.used + extra
    if due is not None:
        room += bs * len(due)
    attn = st.attn
    if attn:
        tokens = float(len(G.adms))
        chunk = st.chunk
        for J in attn:
            n = J.rem
            if n <= 0.0 or J.gone:
                continue
            if J.dec:
                n = 1.0
            elif 0.0 < chunk < n:
                n = chunk
            tokens += n
            a = J.alloc
            if a is not None and a.member is m:
                grow = bs * ceil((a.pos + n) / bs) - a.units  # (serve_one's growth, if it takes n)
                if grow > 0.0:
                    room += grow
        if tokens > st.budget:
            return False
    elif len(G.adms) > st.budget:
        return False
    if room > m.cap:
        return False
    now = st.E.now
    if now > m.t_last:
        m.touch(now)
    used = m.used = m.used + extra
    m.grows += count
    if used > m.max_used:
        m.max_used = used
    C.grown += 1
    G.kv += extra
    at = clock + int(bs)
    other = G.cohorts.get(at)
    if other is None:
        G.cohorts[at] = C
    else:  # (not met: a member joins a cohort less than a block ahead; kept right all the same)
        for J in C.members:
            catch_up(J)
            J.cohort = other
            J.base = other.grown
        other.members.extend(C.members)
    if used + m.cached > m.cap and m.entries:
        m.evict_excess()
    return True


def _count_members_before(G, J, i0: int, budget: float, n: float):
    """serve_grouped's count of the members i0.. before member J, put off at the visits before
    (the budget covers them): (budget, n, J's index), the mark moved to the last of them."""
    i1 = bisect_left(G.adms, J.adm)
    if i1 > i0:
        count = i1 - i0
        budget -= count
        n += count
        G.mark = G.adms[i1 - 1]
    return budget, n, i1


def _budget_ends_among(st, i0: int, i1: int, budget: float, n: float, kvd: float):
    """The budget runs out among the members i0..i1-1: the first floor(budget) take a token; at the
    next the walk brings the batch's sums up to date and, with nothing left, ends the serving;
    with a fraction of a token left, the members it cannot serve are passed over (they leave the
    group) and the walk goes on. Returns (budget, n, ended) with the sums brought up to date."""
    G = st.group
    served = int(budget) if budget >= 1.0 else 0
    if served:
        budget -= served
        n += served
        G.mark = G.adms[i0 + served - 1]
    st.budget = budget
    st._add_decodes(n, kvd)
    if budget <= 0.0 or st.stop_serve:
        return budget, 0.0, True
    for J in G.jobs[i0 + served:i1]:
        leave(st, J, True)
    return budget, 0.0, False


def scheduled_jobs(st) -> list:
    """The iteration's batch in the one-by-one walk's order: the residents it served (the walked
    part of the batch and the members, in admission order), then the ones it admitted."""
    batch = st.batch
    walked = st.n_walked
    members = st.group.jobs
    out = []
    i = j = 0
    head = batch[:walked]
    while i < len(head) or j < len(members):
        if j >= len(members) or (i < len(head) and head[i].adm < members[j].adm):
            out.append(head[i])
            i += 1
        else:
            out.append(members[j])
            j += 1
    out.extend(batch[walked:])
    return out


def remove_sorted(jobs: list, J) -> None:
    """Take J out of a list of jobs in admission order (a bisection, not a scan; the ends first, where
    most leave from: a prefill just admitted, a decode admitted long ago)."""
    if jobs[-1] is J:
        jobs.pop()
        return
    if jobs[0] is J:
        del jobs[0]
        return
    i = bisect_left(jobs, J.adm, key=admission)
    while jobs[i] is not J:
        i += 1
    del jobs[i]
