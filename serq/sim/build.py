"""Build an engine from a program: members, compiled code, arrivals, statistics, claims."""

from __future__ import annotations

import math
from heapq import heappush

from serq.ir import models as ir
from serq.ir.models import registers_set
from serq.link.fold import fold
from serq.sim.compile import CompileError, Env, ProgramCompiler, resolve
from serq.sim.errors import RunError, shown as _num
from serq.sim.pools import PoolMember
from serq.sim.stages import DelayStage, FifoStage, FlowNet, PsStage, SharedStage
from serq.sim.steps import ADMIT, BRANCH, SERVE, SET, StepSpec, StepStage
from serq.sim.stats import Gauge, SampleSet
from serq.sim.threads import READY, EngineSession, MainThread


class ClaimState:
    def __init__(self, claim: ir.Claim) -> None:
        self.claim = claim
        self.name = claim.name
        self.form = claim.form
        self.given = None
        self.value = None
        self.out_of_scope: int | None = None
        self.settled = None  # a claim over iterations: (time, iteration) it failed or was witnessed at
        self.member = None  # the step stage member whose iterations it reads


def build(E) -> None:
    program = E.program
    from serq.limits import MEMBER_LIMIT
    arrays = [*program.pools, *program.stages]
    if sum(x.count for x in arrays) > MEMBER_LIMIT:  # each member is an object of the run (~10 kB)
        biggest = max(arrays, key=lambda x: x.count)
        raise CompileError(f"the pools and stages have {sum(x.count for x in arrays):_} members in all "
                           f"(`{biggest.name}` {biggest.count:_}); the interpreter runs at most "
                           f"{MEMBER_LIMIT:_} (docs/language.md, Limits)".replace("_", " "), biggest.at)
    # -- pools
    E.pool_members = {}
    E.all_pools = []
    order = 0
    for p in program.pools:
        members = []
        for i in range(p.count):
            m = PoolMember(E, p, i if p.count > 1 else None, order)
            order += 1
            members.append(m)
            E.all_pools.append(m)
        E.pool_members[p.name] = members
    # -- stages
    shared = set()
    for s in _all_statements(program):
        if isinstance(s, ir.RunStmt) and len(s.stages) > 1:
            shared.update(r.stage for r in s.stages)
    E.shared_stage_names = shared
    E.has_steps = any(st.service.kind == "step" for st in program.stages)
    E.session_class = EngineSession if E.has_steps else MainThread  # (EngineSession says why)
    E.step_stages = []  # the step stages' members: iterations start in Engine.end_of_instant
    E.flows = FlowNet(E, program.share) if shared else None
    E.stage_members = {}
    E.all_stages = []
    E.volatile_stages = []
    pc = ProgramCompiler(program, E)
    late_caps = []
    for st in program.stages:
        members = []
        svc = st.service
        for i in range(st.count):
            idx = i if st.count > 1 else None
            if svc.kind == "step":
                m = StepStage(E, st.name, idx, st.at)
                E.step_stages.append(m)
            elif st.name in shared:
                phi = fold(svc.capacity) if svc.kind == "ps" else None
                if svc.kind != "ps" or phi is None or not (0 < phi < math.inf) or _is_present(svc.capacity):
                    raise CompileError(f"stage `{st.name}` is held by a run with another stage: every stage of "
                                       "such a run is ps(φ) with a constant φ above 0", st.at)
                m = SharedStage(E, st.name, idx, phi)
            elif svc.kind == "fifo":
                m = FifoStage(E, st.name, idx, svc.servers)
            elif _is_present(svc.capacity):
                m = DelayStage(E, st.name, idx)
            else:
                c = fold(svc.capacity)
                volatile = any(isinstance(n, (ir.PoolObs, ir.StageObs, ir.Draw)) for n in ir.walk(svc.capacity))
                m = PsStage(E, st.name, idx, None, c, volatile, st.at)
                if c is None:
                    late_caps.append(m)
                if volatile:
                    E.volatile_stages.append(m)
            members.append(m)
            E.all_stages.append(m)
        E.stage_members[st.name] = members
    _join_engines(E, program)
    step_specs = {st.name: _step_spec(pc, st) for st in program.stages if st.service.kind == "step"}
    cap_fns = {}
    for st in program.stages:
        if st.service.kind == "ps" and any(m in late_caps for m in E.stage_members[st.name]):
            env = Env(f"the capacity of ps stage `{st.name}`", attrs=None, ctx={"present": "present"},
                      stream="E.mrng")
            cap_fns[st.name] = pc.function("_cap_", ("E", "present"), pc.expr(st.service.capacity, env))
    # -- pool keys and spill
    late_pool = []
    evict_waiting = set()  # the pools whose evict keys read `waiting`
    for p in program.pools:
        qk = pk = ek = None
        if p.queue.kind == "by":
            env = Env(f"the queue keys of pool `{p.name}`", attrs="A", ctx={"now": "E.now", "waited": "waited"},
                      thread="T")
            qk = pc.keys_function("_qk_", ("E", "T", "A", "waited"), p.queue.keys, env)
        if p.preempt.kind == "by":
            env = Env(f"the preempt keys of pool `{p.name}`", attrs="A",
                      ctx={"now": "E.now", "decoding": "decoding", "position": "position",
                           "admission": "admission"}, thread="T")
            pk = pc.keys_function("_pk_", ("E", "T", "A", "decoding", "position", "admission"), p.preempt.keys, env)
        if p.evict.kind == "by":
            # an entry's keys read its attributes, its units (`size`) and whether its session has a hold
            # waiting for admission to the pool (`waiting`, PoolMember.waiting_sessions)
            env = Env(f"the evict keys of pool `{p.name}`", attrs="A",
                      ctx={"now": "E.now", "size": "size", "waiting": "waiting"}, stream="E.mrng")
            ek = pc.keys_function("_ek_", ("E", "A", "size", "waiting"), p.evict.keys, env)
            if any(isinstance(n, ir.Ctx) and n.var == "waiting" for k in p.evict.keys for n in ir.walk(k)):
                evict_waiting.add(p.name)
        sp = None
        if p.spill is not None:
            env = Env(f"the spill of pool `{p.name}`", attrs=None, ctx={"now": "E.now"}, stream="E.mrng")
            tier = _resolver(pc, "pool", p.spill.pool, env)
            stage = _resolver(pc, "stage", p.spill.stage, env)
            cost = pc.function("_spc_", ("E",), pc.expr(p.spill.cost, env))
            when = pc.function("_spw_", ("E",), pc.expr(p.spill.when, env))
            sp = (tier, stage, cost, when)
        late_pool.append((p.name, qk, pk, ek, sp))
    # -- observations: each name's sample set made when the compiler first meets it (the generated code
    # may append to its values directly)
    claimed = {n.name for c in program.claims for n in ir.walk(c.value) if isinstance(n, ir.Observed)}
    meta = E.keep_samples
    E.observe_names = []
    E.observe_idx = {}
    E.observes = []

    def observe_index(name: str) -> int:
        if name not in E.observe_idx:
            E.observe_idx[name] = len(E.observe_names)
            E.observe_names.append(name)
            E.observes.append(SampleSet(name, meta, name in claimed))
        return E.observe_idx[name]
    E.observe_index = observe_index
    # -- what the client sees (the generated code records into these)
    E.client_response = SampleSet("response", meta, "response" in claimed)
    E.client_ttft = SampleSet("ttft", meta, "ttft" in claimed)
    E.client_tpot = SampleSet("tpot", meta, "tpot" in claimed)
    # -- the workload
    wl = program.workload
    trace = _trace_of(wl)
    E.trace = None
    if trace is not None:
        from serq.sim.trace import TraceReplay
        E.trace = TraceReplay.load(trace, E.base_dir, E.streams.trace)
    E.plain_sessions = pc.plain_sessions = trace is None and plain_sessions(program)
    E.serial_read = "serial" in pc.attrs_read or trace is not None  # (else arrivals leave A["serial"] 0)
    session_fn = pc.session_function(wl.session, trace=trace is not None)
    init_fn = pc.init_function(wl.init) if wl.init else None
    # -- gauges and claims
    gauge_fns = []
    for g in program.gauges:
        env = Env(f"gauge `{g.name}`", attrs=None, ctx={}, stream=None)
        gauge_fns.append((g.name, pc.function("_gauge_", ("E",), pc.expr(g.value, env))))
    claim_states = []
    for c in program.claims:
        cs = ClaimState(c)
        if c.form == "at_end":
            env = Env(f"claim `{c.name}`", attrs=None, ctx={"now": "E.now"}, observed=True)
            cs.value = pc.function("_claim_", ("E",), pc.expr(c.value, env))
        else:
            cs.member = _claim_member(E, c)
            env = Env(f"claim `{c.name}`", attrs=None, ctx=dict(_CLAIM_CTX), regs="st.regs", reg_stage=c.stage.stage)
            cs.value = pc.function("_claim_", ("E", "st"), pc.expr(c.value, env))
            cs.member.claims.append(cs)
        if c.given is not None:
            genv = Env(f"the given of claim `{c.name}`", attrs="A", ctx={}, stream=None)
            cs.given = pc.function("_given_", ("E", "A"), pc.expr(c.given, genv))
        claim_states.append(cs)
    gap_fn = None
    if wl.arrival.kind == "renewal":
        env = Env("the renewal gap", attrs=None, ctx={}, stream="E.streams.arrival")
        gap_fn = pc.function("_gap_", ("E",), pc.expr(wl.arrival.gap, env))
    # -- compile and bind
    ns = pc.finish()
    E.line_locs = pc.mod.line_locs
    E.session_fn = resolve(session_fn, ns)
    E.init_fn = resolve(init_fn, ns) if init_fn is not None else None
    for st in program.stages:
        if st.name in cap_fns:
            fn = resolve(cap_fns[st.name], ns)
            for m in E.stage_members[st.name]:
                m.capacity = fn
    for name, qk, pk, ek, sp in late_pool:
        for m in E.pool_members[name]:
            m.queue_keys = resolve(qk, ns) if qk is not None else None
            m.preempt_keys = resolve(pk, ns) if pk is not None else None
            m.evict_keys = resolve(ek, ns) if ek is not None else None
            m.evict_waiting = name in evict_waiting
            if sp is not None:
                m.spill = tuple(resolve(x, ns) for x in sp)
    # a pool an engine admits holds request slots, not a prefix: it takes no part in the prefix cache
    slots = frozenset(p.name for p in program.pools if p.admit_via is not None)
    for spec in pc.holds:
        if slots:
            spec.cache_pools = spec.cache_pools - slots
            spec.reuse_pools = spec.reuse_pools - slots
        for p in spec.pools:
            p.resolver = resolve(p.resolver, ns)
            p.units = resolve(p.units, ns)
            p.reserve = resolve(p.reserve, ns) if p.reserve is not None else None
        spec.reuse = resolve(spec.reuse, ns) if spec.reuse is not None else None
        spec.cache = resolve(spec.cache, ns) if spec.cache is not None else None
        spec.lease = resolve(spec.lease, ns) if spec.lease is not None else None
    for key, obj in list(ns.items()):
        if key.startswith("_legref_"):
            ns[key] = resolve(obj, ns)
    for st in program.stages:
        if st.name in step_specs:
            spec = _resolve_spec(step_specs[st.name], ns)
            for m in E.stage_members[st.name]:
                m.spec = spec
                m.regs.update(spec.registers)
    E.gauges = [Gauge(name, resolve(fn, ns)) for name, fn in gauge_fns]
    E.gauges_on = bool(E.gauges)
    for cs in claim_states:
        cs.value = resolve(cs.value, ns) if cs.value is not None else None
        cs.given = resolve(cs.given, ns) if cs.given is not None else None
    E.claims = claim_states
    E.givens = [cs for cs in claim_states if cs.given is not None]
    E.gap_fn = resolve(gap_fn, ns) if gap_fn is not None else None
    # -- statistics
    # a claim's `count(response)` reads the program's own `observe response` when it has one (the
    # reference keeps the program's observation beside the client's, under its own name)
    E.claim_values = {"response": E.client_response, "ttft": E.client_ttft, "tpot": E.client_tpot}
    E.claim_values.update({s.name: s for s in E.observes})
    for name in claimed:
        if name not in E.claim_values:
            E.claim_values[name] = SampleSet(name, False, True)
    # -- attributes: every name a session may read, 0 until set
    names = {"serial", "turn_no", "cached", "computed"}
    names.update(a.name for a in program.attributes)
    for n in _all_nodes(program):
        if isinstance(n, ir.Attr):
            names.add(n.name)
        elif isinstance(n, (ir.SetStmt, ir.ChooseStmt)):
            names.add(n.name)
    if trace is not None:
        names.update(("new", "out", "think", "more", "forced"))
    E.attr_template = {n: 0.0 for n in sorted(names)}
    # -- arrivals
    E.closed = wl.arrival.kind == "closed"
    E.arrive_extra = E.trace is not None or E.init_fn is not None or bool(E.givens)
    E.resp_values = E.client_response.values
    E.resp_meta = E.client_response.meta
    E.resp_all = E.client_response.all
    E.start = lambda: _start(E)
    if E.warmup > 0:
        E.schedule(E.warmup, E.reset_stats)


def _start(E) -> None:
    a = E.program.workload.arrival
    kind = a.kind
    if kind == "poisson":
        mean = 1.0 / float(a.rate)
        rnd = E.streams.arrival.u
        heap = E.heap
        seq = E.seq
        arrive = E.arrive
        limit = E.arrivals_limit if E.arrivals_limit is not None else math.inf
        log = math.log
        if E.arrive_extra:
            def poisson(_arg, _seq):
                arrive()
                if E.n_arrived >= limit:
                    E.arrivals_open = False
                    return
                heappush(heap, (E.now - mean * log(1.0 - rnd()), next(seq), poisson, None))
        else:
            # Engine.arrive written out for a session with no init, trace or given (the hot path)
            template = E.attr_template
            session_fn = E.session_fn
            ready = E.ready
            new = object.__new__
            session_class = E.session_class
            from serq.limits import LIVE_LIMIT as live_limit

            plain = E.plain_sessions
            serial_read = E.serial_read

            def poisson(_arg, _seq):
                serial = E.n_arrived
                E.n_arrived = serial + 1
                now = E.now
                live = E.live = E.live + 1
                if live > live_limit:
                    E.arrive_over_limit()
                E.t_live_sum += now
                A = template.copy()
                if serial_read:
                    A["serial"] = serial + 0.0
                T = new(session_class)
                if not plain:  # (Engine.arrive says why a plain session's is not set)
                    T.sess = T
                T.A = A
                T.serial = serial
                T.t_arrive = now
                T.turns = 0  # (Engine.arrive says why)
                T.gen = session_fn(E, T, A)
                T.throw = None
                T.ready_t = now
                T.ready_n = 1
                if ready:
                    T.state = READY
                    ready.append(T)
                    T = None  # (queued: the event loop finds it there)
                if serial + 1 >= limit:
                    E.arrivals_open = False
                    return T
                heappush(heap, (now - mean * log(1.0 - rnd()), next(seq), poisson, None))
                return T  # (none ready: the event loop runs it at once, Engine.run)
        E.schedule(0.0, poisson)
    elif kind == "renewal":
        def gap() -> float:
            try:
                g = E.gap_fn(E)
            except RunError as e:
                raise E.located(e) from None
            if not (0.0 < g < math.inf):
                raise E.located(RunError(f"a drawn renewal gap is {_num(g)}: a gap is positive and finite"))
            return g

        def renewal(_arg, _seq):
            E.arrive()
            if E.arrivals_limit is not None and E.n_arrived >= E.arrivals_limit:
                E.arrivals_open = False
                return
            E.schedule(E.now + gap(), renewal)
        E.schedule(gap(), renewal)
    elif kind in ("closed", "batch"):
        for _ in range(a.sessions):
            E.arrive()
        E.arrivals_open = False
    elif kind == "trace":
        E.trace.start(E)
    else:
        E.arrivals_open = False


def _trace_of(wl):
    t = getattr(wl, "trace", None)
    if t is not None:
        return t
    if wl.arrival.kind == "trace":
        return wl.arrival
    return None


def _is_present(e) -> bool:
    return isinstance(e, ir.Ctx) and e.var == "present"


def _resolver(pc, kind, ref, env):
    """A member, or a function (E) -> member when its index is computed."""
    if ref.index is None or isinstance(ref.index, ir.Num):
        return pc.member_resolver(kind, ref, env)
    name = ref.pool if kind == "pool" else ref.stage
    return pc.function(f"_sref_{name}_", ("E",), pc.member(kind, ref, env))


def _all_statements(program: ir.Program):
    """Every statement of the program, nested ones included (a statement holds statements only in its
    blocks: `ir.walk_stmts` visits those alone, not every expression as `ir.walk` would)."""
    for b in (program.server, program.workload.init, program.workload.turn, program.workload.session):
        yield from ir.walk_stmts(b)


# The statements that never give a session legs, holds, leases or a refusal (nor end it early).
_PLAIN_STATEMENTS = frozenset({"turn", "set", "observe", "run", "branch", "while", "loop", "choose"})


def plain_sessions(program: ir.Program) -> bool:
    """Every statement of the program is one of _PLAIN_STATEMENTS: a session's end needs none of the
    checks of `Engine.session_done` (its generated code calls `plain_session_done`)."""
    return all(s.kind in _PLAIN_STATEMENTS for s in _all_statements(program))


def _all_nodes(program: ir.Program):
    for b in (program.server, program.workload.init, program.workload.turn, program.workload.session):
        for s in b:
            yield from ir.walk(s)
    for p in program.pools:
        yield from ir.walk(p)
    for c in program.claims:
        yield from ir.walk(c)


# ------------------------------------------------------------------ step stages
_RUNNING = {"residents": "float(len(st.res))", "decoders": "st.ndec()", "kv_decode": "st.kvd()",
            "kv_prefill": "st.kvp()", "waiting_holds": "st.nwait()"}
_PLANNED = {"tokens": "st.b_tok", "prefilled": "st.b_pre"}
_BATCH = {"residents": "float(len(st.res))", "waiting_holds": "st.nwait()", "tokens": "st.b_tok",
          "prefilled": "st.b_pre", "decoders": "st.b_dec", "kv_decode": "st.b_kvd", "kv_prefill": "st.b_kvp",
          "attention": "st.b_att"}
_CLAIM_CTX = {**_BATCH, "now": "E.now", "demand": "st.demand()", "served": "st.served_total",
              "arrived": "float(E.n_arrived)"}
del _CLAIM_CTX["waiting_holds"]
_RUNNING_VARS = frozenset(_RUNNING)


def _members_for(members: list, n: int, i: int):
    """The members of a family of `len(members)` joined to member i of a family of n."""
    if len(members) == n:
        return [members[i]]
    if len(members) == 1:
        return members
    return None


def _join_engines(E, program) -> None:
    """Which step stage member admits each pool member's queue, and whose memory each pool member is:
    families joined member for member; a family of one joins every member; a single engine admits
    every member of a family of pools."""
    for p in program.pools:
        pms = E.pool_members[p.name]
        for attr, stage in (("via", p.admit_via), ("mem_stage", p.memory_of)):
            if stage is None:
                continue
            sms = E.stage_members[stage]
            for j, pm in enumerate(pms):
                if len(sms) == len(pms):
                    sm = sms[j]
                elif len(sms) == 1:
                    sm = sms[0]
                elif len(pms) == 1:
                    sm = None
                else:
                    raise CompileError(f"pool `{p.name}[{len(pms)}]` on engine `{stage}[{len(sms)}]`: families are "
                                       "joined member for member", p.at)
                targets = [sm] if sm is not None else sms
                if attr == "via":
                    pm.via = targets[0]
                    for t in targets:
                        t.admits.append(pm)
                else:
                    pm.mem_stage = targets[0] if len(targets) == 1 else None
        if p.preempt.kind == "by" and len(p.preempt.keys) == 1:
            k = p.preempt.keys[0]
            if (isinstance(k, ir.Unary) and k.op == "neg" and isinstance(k.arg, ir.Ctx)
                    and k.arg.var == "admission"):
                for pm in pms:
                    pm.lifo = True


def _const(e):
    v = fold(e)
    return None if v is None else float(v)


def _step_spec(pc, st) -> StepSpec:
    svc = st.service
    name = st.name

    def env(what: str, ctx: dict, stream=None, attrs=None) -> Env:
        return Env(f"{what} of `{name}`", attrs=attrs, ctx=dict(ctx), stream=stream, regs="st.regs", reg_stage=name)

    def fn(prefix: str, e, what: str, ctx: dict, stream=None):
        c = _const(e)
        if c is not None:
            return c
        return pc.function(prefix, ("E", "st"), pc.expr(e, env(what, ctx, stream)), st.at)

    serve_ctx = {**_RUNNING, "decoding": "(1.0 if J.dec else 0.0)", "admission": "float(J.adm)",
                 "remaining": "J.rem"}
    guard_ctx = {**_RUNNING, **_PLANNED, "preempted": "float(st.n_pre)", "admitted": "float(st.n_adm)"}

    def only_fn(e):
        if e is None:
            return None
        return pc.function("_only_", ("E", "st", "J", "A"), pc.expr(e, env("an only predicate", serve_ctx, attrs="A")),
                           st.at)

    def body(stmts):
        out = []
        for s in stmts:
            if s.kind == "serve":
                out.append((SERVE, only_fn(s.only)))
            elif s.kind == "admit":
                gate = None
                if s.gate is not None:
                    gate = (pc.function("_gate_", ("E", "st"), pc.expr(s.gate, env("a while", guard_ctx)), st.at),
                            st.at)
                out.append((ADMIT, only_fn(s.only), gate))
            elif s.kind == "branch":
                test = pc.function("_sbr_", ("E", "st"), pc.expr(s.test, env("a branch", guard_ctx)), st.at)
                out.append((BRANCH, test, body(s.then), body(s.otherwise), st.at))
            else:
                value = pc.function("_sset_", ("E", "st"), pc.expr(s.value, env(f"set {s.name}", guard_ctx)), st.at)
                out.append((SET, s.name, value, st.at))
        return out

    keys = None
    dynamic = False
    if svc.serve.kind == "by" and svc.serve.keys:
        kenv = env("the serve order", serve_ctx, attrs="A")
        keys = pc.keys_function("_skey_", ("E", "st", "J", "A"), svc.serve.keys, kenv, st.at)
        dynamic = any(isinstance(n, ir.Ctx) and n.var in _RUNNING_VARS for k in svc.serve.keys for n in ir.walk(k))
    granule = None
    if svc.granule is not None:
        granule = fn("_gran_", svc.granule, "the granule", guard_ctx)
    return StepSpec(
        loc=st.at,
        budget=fn("_budget_", svc.budget, "the tokens cap", _RUNNING, "E.mrng"),
        chunk=fn("_chunk_", svc.chunk, "each at most", {**_RUNNING, **_PLANNED}),
        granule=granule,
        cost=fn("_cost_", svc.cost, "execute", {**_BATCH, "now": "E.now"}, "E.mrng"),
        keys=keys,
        keys_dynamic=dynamic,
        exclusive=svc.serve.kind == "exclusive_prefill",
        body=body(svc.iteration) if svc.iteration is not None else None,
        sets=svc.iteration is not None and bool(registers_set(svc.iteration)),
        registers={r.name: float(r.init) for r in svc.registers},
    )


def _resolve_spec(spec: StepSpec, ns) -> StepSpec:
    def r(x):
        return resolve(x, ns) if x is not None and not isinstance(x, float) else x

    def body(stmts):
        out = []
        for s in stmts:
            if s[0] == SERVE:
                out.append((SERVE, r(s[1])))
            elif s[0] == ADMIT:
                out.append((ADMIT, r(s[1]), (r(s[2][0]), s[2][1]) if s[2] is not None else None))
            elif s[0] == BRANCH:
                out.append((BRANCH, r(s[1]), body(s[2]), body(s[3]), s[4]))
            else:
                out.append((SET, s[1], r(s[2]), s[3]))
        return out

    spec.budget = r(spec.budget)
    spec.chunk = r(spec.chunk)
    spec.granule = r(spec.granule)
    spec.cost = r(spec.cost)
    spec.keys = r(spec.keys)
    if spec.body is not None:
        spec.body = body(spec.body)
    return spec


def _claim_member(E, c):
    ref = c.stage
    members = E.stage_members.get(ref.stage) if ref is not None else None
    if not members or not isinstance(members[0], StepStage):
        raise CompileError(f"claim `{c.name}` reads the iterations of `{ref.stage if ref else '?'}`, which is no "
                           "step stage", c.at)
    if ref.index is None:
        if len(members) != 1:
            raise CompileError(f"claim `{c.name}`: `{ref.stage}` is an engine family: name a member", c.at)
        return members[0]
    i = fold(ref.index)
    if i is None or not (i == int(i) and 0 <= i < len(members)):
        raise CompileError(f"claim `{c.name}`: the member of `{ref.stage}` is a constant index below {len(members)}",
                           c.at)
    return members[int(i)]
