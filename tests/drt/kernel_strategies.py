"""Generated IR programs of the kernel fragment (serq.leangen.kernel), for the differential tests.

`kernel_case(rng)` builds one from a `random.Random`; `kernel_cases()` is the Hypothesis strategy
(one seed per case: a program is some 200 choices, and drawing each through Hypothesis cost
~20 ms a case where the compiled Lean path checks one in ~10 ms; the tests only generate, never
shrink, so nothing is lost). A program is built as IR directly: random statement trees in the
workload's init, turn and session blocks and in the server (set, observe, branch, bounded while
and loop, end, run on a delay stage or a fifo(c) stage, hold on a random subset of zero to three
pools of small caps, in a random order), random expressions over the attributes and `now`, one
to four sessions of a batch or at a constant renewal gap (three programs in five, a gap of 1 to 3, the run's
`--arrivals` the sessions) or, one program in five, as an ordered trace says (`_ordered_trace`, drawn last:
the session block then takes one turn a row of its trace session); a pool's queue is fifo or by keys
of few values (ties are common).
The sessions meet at the fifo stage and in the pools' queues, and a hold's units or reserve above
its cap (refused) or reading `now` (judged at every try) happen on purpose; a pool in two has a
block of 1 to 3 units, so units and reserves are rounded up (and entries evicted block by block); a hold in two caches a prefix (and
may cap its reuse), so that a session's later holds consume what its earlier ones left, and
entries are evicted, oldest first, when the pools fill. The pools' observables (`used`, `free`,
`holders`, `queued`, `cachedin`) are read in sets, observes, branch and while tests,
works, hold units, `reuse` clauses and queue keys, and observed on their own inside holds, where
the pools are busy. A pool in two evicts `by` keys (`_evictions`), and a hold in three leases one of
its pools past its scope (`_leases`), ended by its time, a `release` outside any hold, or the
session's end. An engine in two lasts a cost over the batch's KV sums (`_kv_cost`), which every
iteration's record carries anyway. Last, a program in four with an engine gets a second one (`_second_engine`),
with its own slots and, often, its own memory, its request run after the first's (prefill/decode
disaggregation) or instead of it by a branch (a router), the two requests sharing a pool one in two.
After that, a program in three with an engine puts each engine, one in two, under `exclusive prefill`
(`_exclusive_prefill`). Last, a program in three gets one to three `choose` statements, each observed at once
(`_chooses`), at random places of every block.

Last, the program gets the attribute table the language derives from its statements, and `set a = 0;`
at the top of `init` for every attribute it reads and sets nowhere (`serq.ir.to_source.linked_attributes`;
it reads 0 either way), so that it is a program a `.sq` can say: its source (`program_source`) links back
to it unless the language refuses it by a rule the IR does not have (tests/drt/test_kernel_source.py).

Two things the generator keeps to, because the fragment's semantics needs them and the IR cannot
show them:

* **Every loop ends.** A `while` or `loop` has a counter of its own (an attribute no other
  statement sets), reset before it and raised by one at the end of its body, and a bound of at most
  three rounds; a `loop` leaves by `end;` (and is dropped with its exit where a program is trimmed to
  the language's block depth).
* **No subtraction goes below 0.** The fragment computes over ℕ; a subtraction is written
  `max(a, b) - b`. Values stay small (`min(…, 1000)` on every set and work), so that the
  interpreter's doubles are exact.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from serq.ir import models as ir
from serq.ir.to_source import linked_attributes
from serq.leangen.kernel import RUNNING_VARS
from serq.leangen.kernel_drt import KernelCase, write_trace
from serq.blocks import inner_blocks
from serq.limits import BLOCK_DEPTH

BUILTINS = ["cached", "computed", "serial", "turn_no"]
SESSION_VALUES = ["v0", "v1"]          # set by the workload
SESSION_COUNTERS = ["c0", "c1"]        # a session loop's counter, one per nesting depth
SERVER_VALUES = ["s0", "s1"]           # set by the server
SERVER_COUNTERS = ["sc0", "sc1"]
OBSERVES = ["o0", "o1", "o2"]
CHOSEN = {"session": "k0", "server": "sk0"}  # the index a choose sets, per side (read by its observe alone)
STAGE = "d"  # a delay stage
FIFO = "f"  # a fifo(c) stage, c from 1 to 2
POOLS = ["p0", "p1", "p2"]  # the first 0 to 3 of them, each of a cap from 1 to 6
UNITS = 4  # the most units a hold asks of a pool (some caps are below it)
RESERVE = 7  # the most units a hold's reserve asks of a pool (above every cap)
CACHE = 6  # the most units a hold's release caches of a pool
CAP = 1000  # the largest value a set or a work stores
MAX_DEPTH = 3  # blocks nest at most this deep (the language allows 8)
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
POOL_OBSERVABLES = ["used", "free", "holders", "queued", "cachedin"]


def _num(v: int) -> ir.Num:
    return ir.Num(value=v)


def _bin(op: str, a, b) -> ir.Binary:
    return ir.Binary(op=op, lhs=a, rhs=b)


class _Generator:
    def __init__(self, rng: random.Random, pools: list[str]) -> None:
        self.rng = rng
        self.pools = pools

    def expr(self, readable: list[str], depth: int = 2):
        r = self.rng
        form = r.randrange(10) if depth > 0 else 0
        if form == 0:  # a leaf
            leaf = r.randrange(3)
            if leaf == 0:
                return _num(r.randint(0, 6))
            return ir.Attr(name=r.choice(readable)) if leaf == 1 else ir.Ctx(var="now")
        sub = lambda: self.expr(readable, depth - 1)  # noqa: E731
        if form == 1:
            return _bin(r.choice(["add", "mul", "and", "or", *COMPARISONS]), sub(), sub())
        if form == 2:  # a subtraction that does not go below 0
            a, b = sub(), sub()
            return _bin("sub", ir.Call(fn="max", args=[a, b]), b)
        if form == 3:
            return _bin("mod", sub(), _num(r.randint(1, 4)))
        if form == 4:
            return ir.Call(fn="floor", args=[_bin("div", sub(), _num(r.randint(1, 4)))])
        if form == 5:
            return ir.Call(fn=r.choice(["min", "max"]), args=[sub() for _ in range(r.randint(2, 3))])
        if form == 6:
            return ir.Cond(test=sub(), then=sub(), otherwise=sub())
        if form == 7:  # the catalogue's whole-valued functions of a positive constant
            if r.randrange(2):
                return ir.Call(fn="ceil", args=[_bin("div", sub(), _num(r.randint(1, 4)))])
            return ir.Call(fn="reusable", args=[sub(), _num(r.randint(1, 4))])
        return ir.Unary(op="not", arg=sub())

    def queue(self):
        """A pool's queue: fifo, or by one or two keys over the workload's attributes, `now` and
        `waited`, of few values, so that ties (broken by the order the holds joined) are common."""
        r = self.rng
        if r.randrange(2):
            return ir.QueueFifo()
        readable = BUILTINS[2:] + SESSION_VALUES
        leaf = lambda: r.choice([ir.Attr(name=r.choice(readable)), ir.Ctx(var="waited"), ir.Ctx(var="now")])  # noqa: E731
        return ir.QueueBy(keys=[_bin("mod", leaf(), _num(r.randint(2, 3))) for _ in range(r.randint(1, 2))])

    def guard(self, readable: list[str]):
        """A branch's or a while's test: 0 or 1, as the interpreter requires of a guard (any other
        value is the program's run-time error there, which the Lean model does not have)."""
        r = self.rng
        compare = lambda: _bin(r.choice(COMPARISONS), self.expr(readable, 1), self.expr(readable, 1))  # noqa: E731
        form = r.randrange(3)
        if form == 0:
            return compare()
        if form == 1:
            return ir.Unary(op="not", arg=self.expr(readable, 1))
        return _bin(r.choice(["and", "or"]), compare(), self.expr(readable, 1))

    def block(self, side: str, depth: int = 0, size: int = 3, held: tuple = ()) -> list:
        """A block of `side` ('init', 'turn', 'session', 'server'): at most `size` statements;
        `held`: the pools of the holds around it on this side (a `release` names one)."""
        r = self.rng
        session_side = side != "server"
        values = SESSION_VALUES if session_side else SERVER_VALUES
        counters = SESSION_COUNTERS if session_side else SERVER_COUNTERS
        readable = BUILTINS[2:] + SESSION_VALUES + SESSION_COUNTERS + ([] if session_side else SERVER_VALUES + SERVER_COUNTERS)
        kinds = ["set", "observe", "branch"]
        if side in ("session", "server"):
            kinds += ["run", "run", "while", "loop"] + (["hold", "hold"] if self.pools else [])
            kinds += ["release"] if held else []
        if side == "session":
            kinds += ["turn", "turn", "turn"]
        out: list = []
        for _ in range(r.randint(0 if depth or side != "session" else 1, size)):
            kind = r.choice(kinds)
            if kind in ("while", "loop") and depth >= len(counters) or kind == "branch" and depth >= MAX_DEPTH:
                kind = "set"
            if kind == "set":
                out.append(ir.SetStmt(name=r.choice(values), value=ir.Call(fn="min", args=[self.expr(readable), _num(CAP)])))
            elif kind == "observe":
                out.append(ir.ObserveStmt(name=r.choice(OBSERVES), value=self.expr(readable)))
            elif kind == "run":
                stage = r.choice([STAGE, FIFO])
                work = ir.CostOf(resources=[stage], arg=ir.Call(fn="min", args=[self.expr(readable), _num(50)]))
                out.append(ir.RunStmt(stages=[ir.StageRef(stage=stage)], work=work))
            elif kind == "hold" and depth < MAX_DEPTH:
                names = r.sample(self.pools, r.randint(1, len(self.pools)))
                on = [ir.HoldPool(pool=ir.PoolRef(pool=n), units=ir.CostOf(
                    resources=[n], arg=ir.Call(fn="min", args=[self.expr(readable, 1), _num(UNITS)]))) for n in names]
                body = self.block(side, depth + 1, 2, (*held, *names))
                if r.randrange(3) == 0:  # a pool given back early, then more work inside the hold
                    stage = r.choice([STAGE, FIFO])
                    body[r.randint(0, len(body)):0] = [
                        ir.ReleaseStmt(pool=ir.PoolRef(pool=r.choice(names))),
                        ir.RunStmt(stages=[ir.StageRef(stage=stage)],
                                   work=ir.CostOf(resources=[stage], arg=_num(r.randint(1, 5))))]
                out.append(ir.HoldStmt(pools=on, body=body))
            elif kind == "release":
                out.append(ir.ReleaseStmt(pool=ir.PoolRef(pool=r.choice(held))))
            elif kind == "hold":
                out.append(ir.ObserveStmt(name=r.choice(OBSERVES), value=self.expr(readable)))
            elif kind == "turn":
                out.append(ir.TurnStmt())
            elif kind == "branch":
                out.append(ir.BranchStmt(test=self.guard(readable), then=self.block(side, depth + 1, 2, held),
                                         otherwise=self.block(side, depth + 1, 2, held)))
            else:  # a bounded loop with a counter of its own, reset first and raised last
                counter = counters[depth]
                bound = r.randint(0, 3)
                body = self.block(side, depth + 1, 2, held)
                raise_it = ir.SetStmt(name=counter, value=_bin("add", ir.Attr(name=counter), _num(1)))
                out.append(ir.SetStmt(name=counter, value=_num(0)))
                if kind == "while":
                    out.append(ir.WhileStmt(test=_bin("lt", ir.Attr(name=counter), _num(bound)), body=[*body, raise_it]))
                else:
                    leave = ir.BranchStmt(test=_bin("ge", ir.Attr(name=counter), _num(bound)), then=[ir.EndStmt()])
                    out.append(ir.LoopStmt(body=[*body, raise_it, leave]))
        if depth == 0 and side in ("session", "server") and r.randrange(10) == 0:
            out.append(ir.EndStmt())  # now and then a session ends, or a request is refused, on purpose
        return out


def _attributes() -> list[ir.Attribute]:
    sides = {**{n: "builtin" for n in BUILTINS}, **{n: "session" for n in SESSION_VALUES + SESSION_COUNTERS},
             **{n: "server" for n in SERVER_VALUES + SERVER_COUNTERS}}
    return [ir.Attribute(name=n, side=s) for n, s in sorted(sides.items())]


def kernel_case(rng: random.Random) -> KernelCase:
    """One generated program. A counter a loop uses is set by no other statement: values and
    counters are apart by name, and every loop resets its own counter before it starts."""
    pools = POOLS[:rng.randint(0, len(POOLS))]
    g = _Generator(rng, pools)
    init, turn = g.block("init"), g.block("turn")
    session = g.block("session", size=4)
    if not any(isinstance(x, ir.TurnStmt) for x in session):  # a session has a turn of its own
        session.insert(rng.randint(0, len(session)), ir.TurnStmt())
    server = g.block("server", size=4)
    program = ir.Program(
        source="kernel-drt",
        attributes=_attributes(),
        stages=[ir.Stage(name=STAGE, service=ir.Ps(capacity=ir.Ctx(var="present"))),
                ir.Stage(name=FIFO, service=ir.Fifo(servers=rng.randint(1, 2)))],
        pools=[ir.Pool(name=n, cap=rng.randint(1, 6), queue=g.queue()) for n in pools],
        workload=ir.Workload(arrival=ir.Batch(sessions=rng.randint(1, 4)), init=init, turn=turn, session=session),
        server=server,
    )
    # drawn last, so that the rest of a seed's program is what it was before renewals were generated
    gap = rng.choice([0, 0, 1, 2, 3])
    if gap:
        sessions = program.workload.arrival.sessions
        workload = program.workload.model_copy(update={"arrival": ir.Renewal(gap=_num(gap))})
        program = program.model_copy(update={"workload": workload, "settings": ir.Settings(arrivals=sessions)})
    _blocks_and_reserves(program, rng)
    _pool_observables(program, rng)
    _engine(program, rng)
    _serve_order(program, rng)
    _only(program, rng)
    _kv_memory(program, rng)
    _evictions(program, rng)
    _leases(program, rng)
    _granule(program, rng)
    program = _ordered_trace(program, rng)
    _kv_cost(program, rng)
    _second_engine(program, rng)
    _exclusive_prefill(program, rng)
    _chooses(program, rng)
    _reserve_held(program, rng)
    _grows(program, rng)
    _running_kv(program, rng)
    _iteration_body(program, rng)
    _within_block_depth(program)
    # (no draw: the attribute table the language derives, every attribute read and set nowhere set to 0 in
    # `init`, as it reads anyway, so that the program is one a `.sq` says: its reproducer's `case.sq`)
    return KernelCase(linked_attributes(program))


def _chooses(program: ir.Program, rng: random.Random) -> None:
    """Drawn last (the rest of a seed's program stays what it was): one program in three gets one to three
    `choose i in n by (keys)` (n from 1 to 4), each observed at once, at random places of the workload's
    blocks and the server, nested blocks included. The first key reads the index (`(a·i + e) % r`, few
    values, so that ties, which go to the smallest index, are common) and the expression `e` the side's
    attributes and `now`; one in two has a second key, a pool's observable where the fragment reads one (not in
    `init`) or another such expression. Nothing else reads the index, so the rest of the run is unchanged."""
    if rng.randrange(3):
        return
    w = program.workload
    places = [(side, block) for side, top in (("init", w.init), ("turn", w.turn), ("session", w.session),
                                              ("server", program.server))
              for block in [top, *(inner for s in ir.walk_stmts(top) for _, inner in inner_blocks(s))]]
    g = _Generator(rng, [pool.name for pool in program.pools])
    for _ in range(rng.randint(1, 3)):
        side, block = rng.choice(places)
        name = CHOSEN["server" if side == "server" else "session"]
        readable = BUILTINS[2:] + SESSION_VALUES + (SERVER_VALUES if side == "server" else [])
        index_key = _bin("mod", _bin("add", _bin("mul", _num(rng.randint(1, 3)), ir.Attr(name=name)),
                                     g.expr(readable, 1)), _num(rng.randint(2, 3)))
        keys = [index_key]
        if rng.randrange(2):
            pool_readable = side != "init" and program.pools
            keys.append(ir.PoolObs(fn=rng.choice(POOL_OBSERVABLES), pool=ir.PoolRef(pool=rng.choice(g.pools)))
                        if pool_readable and rng.randrange(2) else _bin("mod", g.expr(readable, 1), _num(2)))
        at = rng.randint(0, len(block))
        block[at:at] = [ir.ChooseStmt(name=name, count=_num(rng.randint(1, 4)), keys=keys),
                        ir.ObserveStmt(name=rng.choice(OBSERVES), value=ir.Attr(name=name))]


def _reserve_held(program: ir.Program, rng: random.Random) -> None:
    """Drawn last (the rest of a seed's program stays what it was): a program in three marks each of its
    pools `reserve held` with a chance of one in two (a slots pool, an engine's growing memory included),
    so that what its holds reserved and have not allocated counts against later admissions and a growth
    fills its own reservation first; and a hold's part on such a pool without a reserve gets one, one in
    two, of 1 to 3 more than an attribute or `now` and at most the cap (the flag is about reservations:
    without them it changes nothing; one within the cap is admitted, where RESERVE's are often refused)."""
    if not program.pools or rng.randrange(3):
        return
    caps = {}
    for pool in program.pools:
        if rng.randrange(2) == 0:
            pool.reserve_held = True
            caps[pool.name] = pool.cap
    w = program.workload
    for stmt in ir.walk_stmts([*w.init, *w.turn, *w.session, *program.server]):
        if isinstance(stmt, ir.HoldStmt):
            for hp in stmt.pools:
                if hp.pool.pool in caps and hp.reserve is None and rng.randrange(2) == 0:
                    amount = ir.Call(fn="min", args=[_bin("add", _read(rng), _num(rng.randint(1, 3))),
                                                     _num(caps[hp.pool.pool])])
                    hp.reserve = ir.CostOf(resources=[hp.pool.pool], arg=amount)


def _running_kv(program: ir.Program, rng: random.Random) -> None:
    """Drawn after everything else (the rest of a seed's program stays what it was): in two programs in three
    with a step engine, every engine reads its running requests' KV (v: `running.kv_decode`, three in four,
    the decoders' positions in whole blocks of the pool each grows; else `running.kv_prefill`, the prefills'
    positions; both 0 for runs growing no pool) in one of its clauses: its `tokens cap` (`1 + v % 4`, or 1 to
    4 tokens chosen by a threshold on v), its `each at most` (`max(1, v % 4)`, or 1 or 2 to 4 by a
    threshold), both read as the iteration starts; a serve key (the shortest remaining run first while v is
    even, the longest first otherwise; only where the engine's memory does not preempt: the fragment reads
    serve keys once); or, in an engine with `only`, its predicate (a request passes also while v is even,
    read at each request as the running requests stand). A residue moves with every token a decoder's blocks
    take, so that reading the KV wrong shows."""
    engines = [stage for stage in program.stages if isinstance(stage.service, ir.Step)]
    if not engines or rng.randrange(3) == 0:
        return
    ctx = lambda var: ir.Ctx(var=var)  # noqa: E731
    for stage in engines:
        engine = stage.service
        kv = ctx(rng.choice(["kv_decode", "kv_decode", "kv_decode", "kv_prefill"]))
        above = _bin("gt", kv, _num(rng.randint(0, 6)))
        even = _bin("eq", _bin("mod", kv, _num(2)), _num(0))
        preempts = any(pool.memory_of == stage.name and pool.preempt.kind != "none" for pool in program.pools)
        clauses = ["budget", "chunk"] + (["key"] if engine.serve.kind == "by" and not preempts else []) + (
            ["only"] if engine.iteration is not None else [])
        clause = rng.choice(clauses)
        if clause == "budget":
            engine.budget = rng.choice([
                _bin("add", _num(1), _bin("mod", kv, _num(4))),
                ir.Cond(test=above, then=_num(rng.randint(1, 4)), otherwise=_num(rng.randint(1, 4)))])
        elif clause == "chunk":
            engine.chunk = rng.choice([ir.Call(fn="max", args=[_num(1), _bin("mod", kv, _num(4))]),
                                       ir.Cond(test=above, then=_num(1), otherwise=_num(rng.randint(2, 4)))])
        elif clause == "key":
            engine.serve = ir.ServeBy(keys=[ir.Cond(test=even, then=ctx("remaining"),
                                                    otherwise=_bin("sub", _num(ENGINE_WORK), ctx("remaining"))),
                                            *engine.serve.keys])
        else:
            serve, admit = engine.iteration
            widen = lambda p: None if p is None else _bin("or", p, even)  # noqa: E731
            engine.iteration = [ir.IterServe(only=widen(serve.only)), ir.IterAdmit(only=widen(admit.only),
                                                                                   gate=admit.gate)]


def _iteration_body(program: ir.Program, rng: random.Random) -> None:
    """Drawn after everything else (the rest of a seed's program stays what it was): in one program in two
    with a step engine, each engine not under `exclusive prefill`, one in two, plans its iterations from a
    body (`_drawn_body`)."""
    stages = _body_engines(program)
    if not stages or rng.randrange(2):
        return
    for stage in stages:
        if rng.randrange(2):
            continue
        stage.service.iteration = _drawn_body(rng)


def _body_engines(program: ir.Program) -> list:
    """The step engines a body may be given: those not under `exclusive prefill`."""
    return [stage for stage in program.stages
            if isinstance(stage.service, ir.Step) and stage.service.serve.kind != "exclusive_prefill"]


#: What a body's guard reads (the iteration's tokens so far thrice: what the statements before a guard did
#: is what a body adds).
_GUARD_READS = ["tokens", "tokens", "tokens", "prefilled", "decoders", "residents", "waiting_holds", "kv_decode",
                "kv_prefill", "preempted", "admitted"]


def _drawn_guard(rng: random.Random) -> ir.Expr:
    """A guard over what a guard may read, against small constants."""
    op = rng.choice(["eq", "lt", "gt", "le"])
    test = _bin(op, ir.Ctx(var=rng.choice(_GUARD_READS)), _num(rng.randint(0, 3)))
    if rng.randrange(4) == 0:
        test = _bin(rng.choice(["and", "or"]), test,
                    _bin("eq", ir.Ctx(var=rng.choice(_GUARD_READS)), _num(rng.randint(0, 2))))
    return test


def _drawn_body(rng: random.Random) -> list:
    """A body of three or four statements: `advance running [only (p)]`, `admit waiting [only (p)] [while
    (e)]` and `branch (e) { … } else { … }` (blocks of one or two of them, two deep at most), with one
    `advance running` and one `admit waiting` outside every branch, its gate letting the iteration's first
    admission through (a body whose guards never admit leaves the engine idle, and its case tests nothing).
    Guards and gates read what a guard may (`batch.tokens`, `batch.prefilled`, `running.*`, `waiting.count`,
    `running.preempted`, `waiting.admitted`) against small constants, so that each of them moves within an
    iteration: served decodes first and the prefills only when they took nothing, one admission an
    iteration, admissions until a preemption, and so on."""
    ctx = lambda var: ir.Ctx(var=var)  # noqa: E731

    def only():
        return rng.choice([None, None, *_only_predicates(rng)])

    def gate():  # (each lets the iteration's first admission through when nothing preempted)
        k = rng.randint(1, 3)
        return rng.choice([None, ir.Unary(op="not", arg=ctx("preempted")), _bin("lt", ctx("admitted"), _num(k)),
                           _bin("lt", ctx("tokens"), _num(k + 1)),
                           _bin("and", _bin("eq", ctx("preempted"), _num(0)), _bin("lt", ctx("admitted"), _num(k)))])

    def plain():
        if rng.randrange(2):
            return ir.IterServe(only=only())
        return ir.IterAdmit(only=only(), gate=rng.choice([gate(), _drawn_guard(rng)]))

    def statement(depth: int):
        if depth < 2 and rng.randrange(3) == 0:
            return ir.IterBranch(test=_drawn_guard(rng), then=[statement(depth + 1) for _ in range(rng.randint(1, 2))],
                                 otherwise=[statement(depth + 1) for _ in range(rng.randint(0, 2))])
        return plain()

    body = [statement(0) for _ in range(rng.randint(1, 2))]
    # outside every branch, a request is admitted and the residents are served (so that the engine works
    # whatever its guards read)
    body.insert(rng.choice([0, rng.randint(0, len(body))]), ir.IterServe(only=rng.choice([None, None, only()])))
    body.insert(rng.randint(0, len(body)), ir.IterAdmit(only=rng.choice([None, None, only()]), gate=gate()))
    return body


def register_case(rng: random.Random) -> KernelCase | None:
    """`kernel_case(rng)`'s program with registers, drawn after it (so the seed's program is `kernel_case`'s,
    and the main generator's seeds and the planted bugs' keep theirs); None when it has no engine a body may
    be given. Every such engine plans from a body (its own, or one drawn as `_iteration_body` draws) and
    declares one or two registers (`state r0 = c;`, c from 0 to 2), which its body sets (one to three `set`s
    at random places, in branches too, the first one time in two at the top followed by a branch on it that
    serves the decodes first or the prefills first, to a value over the registers and what a guard reads: a round
    counter `(r + 1) % 3`, the iteration's tokens so far, its admissions, …) and reads: in guards (`r == k`,
    `r < k`, alone or beside the drawn test), in an `only` beside the drawn predicate, and, one engine in
    two, in its `tokens cap`, `each at most` or `execute`. No value is ever negative (no subtraction), so
    ℕ's values are the interpreter's. A try that schedules, preempts and admits nothing undoes its sets:
    with a set on a path that schedules nothing (a branch whose arm admits nothing) a register can stay
    where it was, which the run must show."""
    program = kernel_case(rng).program.model_copy(deep=True)
    stages = _body_engines(program)
    if not stages:
        return None
    for stage in stages:
        engine = stage.service
        if engine.iteration is None or (len(engine.iteration) == 2 and not any(
                isinstance(s, ir.IterBranch) for s in engine.iteration) and rng.randrange(2)):
            engine.iteration = _drawn_body(rng)
        names = [f"r{k}" for k in range(rng.randint(1, 2))]
        engine.registers = [ir.Register(name=n, init=rng.randint(0, 2)) for n in names]
        reg = lambda: ir.Reg(stage=stage.name, name=rng.choice(names))  # noqa: E731

        def value():
            r = reg()
            return rng.choice([
                _bin("mod", _bin("add", r, _num(1)), _num(3)), ir.Call(fn="min", args=[_bin("add", r, _num(1)), _num(2)]),
                ir.Ctx(var="tokens"), ir.Ctx(var="admitted"), _bin("mod", ir.Ctx(var="residents"), _num(3)),
                _num(rng.randint(0, 2)), _bin("add", r, ir.Ctx(var="admitted"))])

        def reads_register(test):
            mine = _bin(rng.choice(["eq", "lt"]), reg(), _num(rng.randint(0, 2)))
            return rng.choice([mine, _bin(rng.choice(["and", "or"]), test, mine)])

        blocks = [engine.iteration]
        for s in list(_iteration_stmts(engine.iteration)):
            if isinstance(s, ir.IterBranch):
                blocks += [s.then, s.otherwise]
                if rng.randrange(2):
                    s.test = reads_register(s.test)
            elif s.only is not None and rng.randrange(3) == 0:
                s.only = _bin("or", s.only, _bin("eq", reg(), _num(rng.randint(0, 2))))
            elif isinstance(s, ir.IterAdmit) and s.gate is not None and rng.randrange(3) == 0:
                s.gate = _bin("and", s.gate, _bin("lt", reg(), _num(rng.randint(1, 3))))
        for k in range(rng.randint(1, 3)):
            # the first, one time in two, at the top, and then a branch on what it set: the decodes first or the
            # prefills first (a set takes effect at once: the branch reads the register as the set left it)
            block = engine.iteration if k == 0 and rng.randrange(2) else rng.choice(blocks)
            if block is engine.iteration and k == 0:
                name = rng.choice(names)
                decoding = ir.Ctx(var="decoding")
                block[:0] = [ir.IterSet(name=name, value=value()),
                             ir.IterBranch(test=_bin("eq", ir.Reg(stage=stage.name, name=name), _num(rng.randint(0, 1))),
                                           then=[ir.IterServe(only=decoding)],
                                           otherwise=[ir.IterServe(only=ir.Unary(op="not", arg=decoding))])]
            else:
                block.insert(rng.randint(0, len(block)), ir.IterSet(name=rng.choice(names), value=value()))
        clause = rng.choice([None, None, None, "budget", "chunk", "cost"])
        if clause == "budget":
            engine.budget = _bin("add", _num(rng.randint(1, 3)), _bin("mod", reg(), _num(3)))
        elif clause == "chunk":
            engine.chunk = ir.Call(fn="max", args=[_num(1), reg()])
        elif clause == "cost":
            engine.cost = _bin("add", _num(1), _bin("mod", reg(), _num(2)))
    return KernelCase(linked_attributes(program))


def _iteration_stmts(stmts: list):
    """Every statement of an iteration body, branches' blocks included (a branch before its blocks)."""
    for s in stmts:
        yield s
        if isinstance(s, ir.IterBranch):
            yield from _iteration_stmts(s.then)
            yield from _iteration_stmts(s.otherwise)


def _grows(program: ir.Program, rng: random.Random) -> None:
    """Drawn after everything else (the rest of a seed's program stays what it was): a program in three gets,
    in each hold's part on a pool that does not preempt and is no engine's slots, one in two, a `grow` of that
    pool of 1 to 3 units (or an attribute or `now` plus 0 to 2, at most 3) at a random place of the hold's
    body before any `release` of the pool, so that the hold asks more while it runs and, when that does not
    fit, waits for a settle to find room (`Holds.grow` under `preempt none`).

    Not in a program with a pool that preempts: a grower waiting for room keeps what its session holds, and
    when that is blocks of an engine's memory that preempts, the residents can preempt one another for the
    rest forever (seed 100004763: kv2 `preempt by (position)`, a session waiting to grow `g` with kv2's
    blocks held; each admission fits, each growth preempts, and the run never ends). The interpreter runs it
    as the reference says (`stuck` counts such sessions); the comparison needs runs that end."""
    if not program.pools or any(pool.preempt.kind != "none" for pool in program.pools) or rng.randrange(3):
        return
    growable = {pool.name for pool in program.pools if pool.preempt.kind == "none" and pool.admit_via is None}
    w = program.workload
    for stmt in ir.walk_stmts([*w.init, *w.turn, *w.session, *program.server]):
        if not isinstance(stmt, ir.HoldStmt):
            continue
        for hp in stmt.pools:
            name = hp.pool.pool
            if name not in growable or rng.randrange(2):
                continue
            amount = (_num(rng.randint(1, 3)) if rng.randrange(2)
                      else ir.Call(fn="min", args=[_bin("add", _read(rng), _num(rng.randint(0, 2))), _num(3)]))
            # before the body's first statement that gives the pool back (a `release` of it, at any depth)
            first = next((k for k, x in enumerate(stmt.body)
                          if any(isinstance(y, ir.ReleaseStmt) and y.pool.pool == name for y in ir.walk_stmts([x]))),
                         len(stmt.body))
            stmt.body.insert(rng.randint(0, first), ir.GrowStmt(pool=ir.PoolRef(pool=name),
                                                                amount=ir.CostOf(resources=[name], arg=amount)))


def computed_count_case(rng: random.Random) -> KernelCase | None:
    """`kernel_case(rng)`'s program with each choose's constant count n made `1 + (x + y) % n` (from 1 to n),
    x and y each the session's serial, the clock or the index the choose sets as it stands before the
    choice, drawn after the program (so the seed's program is `kernel_case`'s); None when it has no choose.
    The count is read once, before the choice (the lowering's `CHOOSE_COUNT`): a bound read again at every
    step would see the index move. A campaign of its own (test_kernel_drt.py), so that the main generator's
    seeds, and the planted bugs' recorded ones, keep their programs."""
    program = kernel_case(rng).program.model_copy(deep=True)
    w = program.workload
    chooses = [s for s in ir.walk_stmts([*w.init, *w.turn, *w.session, *program.server])
               if isinstance(s, ir.ChooseStmt)]
    if not chooses:
        return None
    for choose in chooses:
        x, y = (rng.choice([ir.Attr(name="serial"), ir.Ctx(var="now"), ir.Attr(name=choose.name)]) for _ in range(2))
        choose.count = _bin("add", _num(1), _bin("mod", _bin("add", x, y), _num(choose.count.value)))
    return KernelCase(linked_attributes(program))


def _within_block_depth(program: ir.Program) -> None:
    """Drop every block statement nested past the language's limit (BLOCK_DEPTH, a turn's server statements
    counted from the turn's depth in the session, as `serq.limits.check_ir_depths` counts): each side keeps
    within MAX_DEPTH on its own, but a server that deep run by a turn that deep passed 8 (about one program
    in 1 600, e.g. seed 568654171). No draw, and the programs within the limit, nearly all, are unchanged."""
    def deepest_turn(stmts: list, depth: int) -> int:
        deepest = 0
        for s in stmts:
            if isinstance(s, ir.TurnStmt):
                deepest = max(deepest, depth)
            for _, inner in inner_blocks(s):
                deepest = max(deepest, deepest_turn(inner, depth + 1))
        return deepest

    def trim(stmts: list, depth: int) -> None:
        kept = []
        for s in stmts:
            inner = inner_blocks(s)
            if inner and depth + 1 > BLOCK_DEPTH:
                continue
            # a `loop` leaves by the `branch (c >= bound) { end; }` of its body, one block deeper: a loop
            # whose exit would be trimmed goes with it (seed 7046078 kept `loop { set sc1 = sc1 + 1; }`
            # in its server, and the interpreter stopped it at a million statements in one instant)
            if isinstance(s, ir.LoopStmt) and depth + 2 > BLOCK_DEPTH:
                continue
            for _, block in inner:
                trim(block, depth + 1)
            kept.append(s)
        stmts[:] = kept

    w = program.workload
    turn_depth = deepest_turn(w.session, 0)
    trim(w.turn, turn_depth)
    trim(program.server, turn_depth)


ENGINE = "e"  # a step engine under vLLM's default schedule
REQS = "reqs"  # the engine's request slots (`pool reqs on e`), admitted by its `admit waiting`
ENGINE_WORK = 8  # the most tokens a run on the engine asks


def _engine(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): a program in three has a step
    engine, vLLM's default schedule, with a budget of 1 to 6 (or one that grows with its residents), a
    chunk cap of none or 1 to 4, and an iteration cost of at least 1 over the batch; its request slots
    `reqs` (cap 1 to 3) are admitted by the engine. The server runs a request on it at the top (three in
    four through a hold of a slot: prefill, then a decode in two; else a bare run), the works read the
    attributes, and a run of 0 tokens (which completes at once) happens on purpose."""
    if rng.randrange(3):
        return
    running = lambda var: ir.Ctx(var=var)  # noqa: E731
    budget = rng.choice([_num(rng.randint(1, 6)), _bin("add", _num(rng.randint(1, 3)), running("residents"))])
    chunk = _num(rng.choice([0, 0, 1, 2, 3, 4]))
    cost = rng.choice([_num(1), _num(2), _bin("add", _num(1), ir.Call(fn="floor", args=[
        _bin("div", running("tokens"), _num(rng.randint(1, 4)))])),
        ir.Call(fn="max", args=[_num(1), _bin("add", running("decoders"), running("waiting_holds"))]),
        _bin("add", _num(1), running("prefilled"))])
    program.stages.append(ir.Stage(name=ENGINE, service=ir.Step(budget=budget, cost=cost, chunk=chunk)))
    program.pools.append(ir.Pool(name=REQS, cap=rng.randint(1, 3), admit_via=ENGINE))
    request = _request_runs(rng, ENGINE)
    if rng.randrange(4):
        request = [_slot_hold(REQS, request)]
    program.server[0:0] = request


def _request_runs(rng: random.Random, engine: str) -> list:
    """A request's runs on `engine`: a prefill, then a decode in two, of works that read the attributes
    (0 to ENGINE_WORK tokens: a run of 0 completes at once)."""
    readable = BUILTINS[2:] + SESSION_VALUES + SERVER_VALUES

    def run(mode: str):
        work = ir.Call(fn="min", args=[_bin("add", _num(rng.randint(0, 3)), ir.Call(fn="floor", args=[
            _bin("div", ir.Attr(name=rng.choice(readable)), _num(rng.randint(1, 3)))])), _num(ENGINE_WORK)])
        return ir.RunStmt(stages=[ir.StageRef(stage=engine)], mode=mode, work=ir.CostOf(resources=[engine], arg=work))

    return [run("prefill")] + ([run("decode")] if rng.randrange(2) else [])


def _slot_hold(slots: str, body: list) -> ir.HoldStmt:
    """A hold of one of an engine's request slots (`pool slots on S`, which S admits) around `body`."""
    return ir.HoldStmt(pools=[ir.HoldPool(pool=ir.PoolRef(pool=slots), units=ir.CostOf(resources=[slots], arg=_num(1)))],
                       body=body)


def _serve_order(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): an engine in two has an `advance
    running` order: decode first, the shortest remaining run first, the longest (`ENGINE_WORK -
    remaining`, the fragment's `-remaining` over ℕ), prefills first then the longest, or keys that read
    a session's attribute or `running.count` (ties, in admission order, are common in all of them); its
    budget is then 1 to 3 tokens and its request slots 2 or 3, so that residents contend for it."""
    engines = [stage.service for stage in program.stages if isinstance(stage.service, ir.Step)]
    if not engines or rng.randrange(2):
        return
    ctx = lambda var: ir.Ctx(var=var)  # noqa: E731
    longest = _bin("sub", _num(ENGINE_WORK), ctx("remaining"))
    orders = [
        [ir.Cond(test=ctx("decoding"), then=_num(0), otherwise=_num(1))],  # decode first
        [ctx("remaining")],
        [longest],
        [ctx("decoding"), longest],
        [_bin("mod", ir.Attr(name=rng.choice(BUILTINS[2:] + SESSION_VALUES)), _num(2)), ctx("remaining")],
        [ir.Call(fn="min", args=[ctx("remaining"), ctx("residents")]), ctx("admission")],
    ]
    for engine in engines:
        engine.serve = ir.ServeBy(keys=rng.choice(orders))
        # an order shows only when the budget runs out before every resident is served
        engine.budget = _num(rng.randint(1, 3))
    for pool in program.pools:
        if pool.admit_via is not None:
            pool.cap = max(pool.cap, rng.randint(2, 3))


def _only(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): an engine in two has `only (p)` on
    `advance running` and `admit waiting` (vLLM's schedule otherwise): FasterTransformer's phases
    (`running.decoding > 0 ? decoding : !decoding`), prefills alone while one runs, the short runs (a
    long one waits until it is alone), or a session's attribute, the same p on both statements or one
    of them only (a request p excludes waits; an engine whose requests it all excludes waits for an
    event, and may stay stuck, as in the interpreter)."""
    engines = [stage.service for stage in program.stages if isinstance(stage.service, ir.Step)]
    if not engines or rng.randrange(2):
        return
    ctx = lambda var: ir.Ctx(var=var)  # noqa: E731
    predicates = _only_predicates(rng)
    for engine in engines:
        p = rng.choice(predicates)
        serve_only, admit_only = rng.choice([(p, p), (p, p), (p, None), (None, p)])
        engine.iteration = [ir.IterServe(only=serve_only),
                            ir.IterAdmit(only=admit_only, gate=ir.Unary(op="not", arg=ctx("preempted")))]


def _only_predicates(rng: random.Random) -> list:
    """The `only` predicates the generator gives a statement: FasterTransformer's phases, prefills alone while
    one runs, the short runs (a long one waits until it is alone), or a session's attribute."""
    ctx = lambda var: ir.Ctx(var=var)  # noqa: E731
    decoding, prefilling = ctx("decoding"), ir.Unary(op="not", arg=ctx("decoding"))
    return [
        ir.Cond(test=_bin("gt", ctx("decoders"), _num(0)), then=decoding, otherwise=prefilling),
        ir.Cond(test=_bin("lt", ctx("decoders"), ctx("residents")), then=prefilling, otherwise=decoding),
        _bin("or", _bin("le", ctx("remaining"), _num(rng.randint(2, 5))), _bin("eq", ctx("residents"), _num(1))),
        _bin("or", _bin("eq", _bin("mod", ir.Attr(name=rng.choice(BUILTINS[2:] + SESSION_VALUES)), _num(2)), _num(0)),
             _bin("ge", ctx("admission"), _num(rng.randint(1, 6)))),
    ]


PREEMPT_WORK = 4  # the most tokens a run asks when its KV pool preempts
PREEMPT_REUSE = 2  # the most a request reuses of its cached prefix when its KV pool preempts
KV = "kv"  # the engine's memory (`pool kv on gpu`): its requests' holds grow as their runs advance


def _kv_memory(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): three engines in four whose request
    holds a slot get a KV pool, `kv`, the engine's memory (`memory_of`), of a small cap (3 to 12 units, in
    blocks of none, 1, 2 or 3), `evict lru`, and a preemption rule (`_preemption`; a pool that preempts has
    room for one request alone and up to 2 units more, runs of 2 to PREEMPT_WORK tokens, a decode, three
    sessions at least and holds that take their prefill up front, so that
    a request fits alone and grows nothing at its admission; its decode grows): the request's hold takes
    `kv (u)` beside its slot (u of 0 to 3 units, read from an attribute), one in three with a reserve, one in
    two with a prefix cache (`cache (ℓ)`, one in two of those with a `reuse`, and `cached` observed), and its
    runs grow it (`growing kv`): block by block as their positions advance, so that residents fill the
    pool, evict the cache, and a growth that does not fit waits (`preempt none`: its request unserved until
    another request's hold ends, or for ever: the run ends with the turn unanswered, in both interpreters)
    or preempts (the victim requeued, its hold run again from its top; one in two such holds observe
    `computed`, the position the preemption caught it at)."""
    engines = [stage for stage in program.stages if isinstance(stage.service, ir.Step)]
    request = program.server[0] if program.server else None
    if not engines or not isinstance(request, ir.HoldStmt) or rng.randrange(4) == 0:
        return
    _memory(program, rng, engines[0], request, KV)


def _memory(program: ir.Program, rng: random.Random, stage: ir.Stage, request: ir.HoldStmt, kv: str) -> None:
    """`_kv_memory`'s pool `kv`, the memory of engine `stage`, taken and grown by `request`, the hold of
    one of the engine's slots around its runs."""
    engine = stage.service
    block = rng.choice([None, 1, 2, 3])
    preempt = _preemption(rng)
    if engine.serve.kind == "by" and any(isinstance(n, ir.Ctx) and n.var in RUNNING_VARS
                                         for k in engine.serve.keys for n in ir.walk(k)):
        preempt = ir.PreemptNone()  # (the fragment reads serve keys once: none that read `running.*` then)
    if engine.iteration is not None:
        # (an `only` that passes over the request holding the memory while the others preempt themselves
        # for ever is a program that never ends: its steps that only preempted take time)
        preempt = ir.PreemptNone()
    # a pool that preempts has room for any one request alone (one that can never fit would preempt
    # itself for ever): its runs are of PREEMPT_WORK tokens at most, and its hold takes its prefill
    # and PREEMPT_WORK more (a 12 in blocks of 3 at most)
    caching = rng.randrange(2)
    cap = rng.randint(3, 12)
    if preempt.kind != "none":  # room for one request alone, and a little more: two together do not fit
        b = block or 1
        cap = -(-(2 * PREEMPT_WORK + (PREEMPT_REUSE if caching else 0)) // b) * b + rng.randint(0, 2)
    program.pools.append(ir.Pool(name=kv, cap=cap, block=block, memory_of=stage.name, preempt=preempt))
    readable = BUILTINS[2:] + SESSION_VALUES + SERVER_VALUES
    units = ir.Call(fn="min", args=[_bin("add", _num(rng.randint(0, 2)), _bin("mod", ir.Attr(name=rng.choice(readable)),
                                                                                 _num(2))), _num(3)])
    runs = [stmt for stmt in request.body if isinstance(stmt, ir.RunStmt) and stmt.mode is not None]
    if preempt.kind != "none":
        # a decode that grows past what the hold took, and three sessions at least, which run together
        if len(runs) == 1:
            decode = runs[0].model_copy(deep=True)
            decode.mode = "decode"
            request.body.append(decode)
            runs.append(decode)
        arrival = program.workload.arrival
        if isinstance(arrival, ir.Batch):
            arrival.sessions = max(arrival.sessions, 3)
        elif isinstance(arrival, ir.Renewal):  # (an ordered trace's sessions are its own)
            program.settings.arrivals = max(program.settings.arrivals, 3)
        # the hold takes its prefill (of a token at least) up front, and PREEMPT_REUSE more when it may reuse a
        # cached prefix (at most that): the request admitted grows nothing, its decode does (one that grew at
        # its admission and did not fit would preempt itself and be admitted again at once, for ever, which
        # vLLM's programs avoid by reserving the whole prompt)
        # (runs of 2 to PREEMPT_WORK tokens, and two slots at least: requests run together, and grow past the cap)
        for run in runs:
            run.work.arg = ir.Call(fn="max", args=[_num(2), ir.Call(fn="min", args=[run.work.arg.args[0], _num(PREEMPT_WORK)])])
        for pool in program.pools:
            if pool.admit_via == stage.name:
                pool.cap = max(pool.cap, 2)
        units = runs[0].work.arg.model_copy(deep=True)
        if caching:
            units = _bin("add", units, _num(PREEMPT_REUSE))
    held = ir.HoldPool(pool=ir.PoolRef(pool=kv), units=ir.CostOf(resources=[kv], arg=units))
    if preempt.kind == "none" and rng.randrange(3) == 0:
        held.reserve = ir.CostOf(resources=[kv], arg=_num(rng.randint(1, 6)))
    request.pools.append(held)
    for run in runs:
        run.growing = ir.PoolRef(pool=kv)
    if caching:
        request.cache = _clause(request, _num(rng.randint(1, 12)))
        if rng.randrange(2) or preempt.kind != "none":
            request.reuse = _clause(request, _num(rng.randint(0, 6 if preempt.kind == "none" else PREEMPT_REUSE)))
        request.body.insert(0, ir.ObserveStmt(name=rng.choice(OBSERVES), value=ir.Attr(name="cached")))
    if preempt.kind != "none" and rng.randrange(2):
        request.body.insert(0, ir.ObserveStmt(name=rng.choice(OBSERVES), value=ir.Attr(name="computed")))


def _evictions(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): a pool in two that is no engine's
    request slots evicts its cache `by` keys of few values (ties, in release order, are common): mostly the
    largest entries first (`12 - size`, over ℕ: the sessions' sizes grow with their serials, which is
    their release order, so this order is not lru's), after the entries of sessions with no hold waiting
    for the pool (`waiting`), of an attribute's parity or the clock's (the same for every entry), or the
    smallest first, or the waiting sessions' last alone (`waiting`, every other entry tied). The sessions
    observe their `cachedin` there as they end, and one such program in two without an engine runs
    every turn through a cached hold on the pool, in blocks of 1, with three sessions at least and two
    turns each, so that entries of several sizes and ages contend for it."""
    size, waiting = ir.Ctx(var="size"), ir.Ctx(var="waiting")
    for pool in program.pools:
        if pool.admit_via is not None or rng.randrange(2):
            continue
        attr = ir.Attr(name=rng.choice(BUILTINS[2:] + SESSION_VALUES))
        largest = _bin("sub", ir.Call(fn="max", args=[_num(12), size]), size)
        pool.evict = ir.EvictBy(keys=rng.choice([
            [largest], [largest], [size], [waiting, largest], [_bin("mod", attr, _num(2)), largest],
            [_bin("mod", ir.Ctx(var="now"), _num(2)), largest], [waiting]]))
        # what the eviction left shows: the sessions observe their cached prefix there as they end
        program.workload.session.append(ir.ObserveStmt(name=rng.choice(OBSERVES), value=ir.PoolObs(
            fn="cachedin", pool=ir.PoolRef(pool=pool.name))))
        if rng.randrange(2) or any(isinstance(stage.service, ir.Step) for stage in program.stages):
            continue
        # one in two (without an engine): every turn through a cached hold on it, of sizes that differ by
        # session, so that the sessions' entries of several sizes and ages contend for it
        units = ir.Call(fn="min", args=[_bin("add", _bin("mod", ir.Attr(name="serial"), _num(3)), _num(rng.randint(1, 2))),
                                        _num(UNITS)])
        hold = ir.HoldStmt(pools=[ir.HoldPool(pool=ir.PoolRef(pool=pool.name), units=ir.CostOf(
            resources=[pool.name], arg=units))], body=list(program.server))
        _prefix_cache(hold, rng, observed=True)
        program.server[:] = [hold]
        # in blocks of 1 (an entry gives way unit by unit: partly, so that which one does shows), three sessions
        # at least, and a second turn that finds what is left of its first
        pool.block, pool.cap = 1, rng.randint(3, 6)
        arrival = program.workload.arrival
        if isinstance(arrival, ir.Batch):
            arrival.sessions = max(arrival.sessions, 3)
        else:
            program.settings.arrivals = max(program.settings.arrivals, 3)
        if sum(isinstance(stmt, ir.TurnStmt) for stmt in program.workload.session) < 2:
            program.workload.session.insert(-1, ir.TurnStmt())


def _leases(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): a hold in three of the session block
    or the server leases one of its pools past its scope (`lease m (t)`): for 0 to 4 seconds, for a time
    read from an attribute, or `inf` (until a release or the session's end); the hold's `cache` applies
    when the lease ends. A program with a lease then, one in two each, releases a leased pool at the top
    of the server (outside any hold: it ends the leases the session's earlier turns left there) and in
    the session block after a turn, so that leases end by a release, by their time and by the session's
    end."""
    w = program.workload
    # (not a pool that preempts: the memory its lease keeps may leave a request that can never fit with it, which
    # preempts itself for ever, its steps taking time: a run that never ends)
    preempting = {pool.name for pool in program.pools if pool.preempt.kind != "none"}
    leased = []
    for stmt in ir.walk_stmts([*w.session, *program.server]):
        if not isinstance(stmt, ir.HoldStmt) or rng.randrange(3):
            continue
        pool = rng.choice(stmt.pools).pool.pool
        if pool in preempting:
            continue
        duration = rng.choice([ir.Inf(), _num(rng.randint(0, 4)), ir.Call(fn="min", args=[
            _bin("add", ir.Attr(name=rng.choice(BUILTINS[2:] + SESSION_VALUES)), _num(1)), _num(6)])])
        stmt.lease = ir.Lease(pool=ir.PoolRef(pool=pool), duration=duration)
        leased.append(pool)
    if not leased:
        return
    if rng.randrange(2):
        program.server.insert(0, ir.ReleaseStmt(pool=ir.PoolRef(pool=rng.choice(leased))))
    turns = [i for i, stmt in enumerate(w.session) if isinstance(stmt, ir.TurnStmt)]
    if rng.randrange(2):
        w.session.insert(rng.choice(turns) + 1, ir.ReleaseStmt(pool=ir.PoolRef(pool=rng.choice(leased))))


ENGINE2 = "e2"  # a second step engine (`_second_engine`)
REQS2 = "reqs2"  # its request slots (`pool reqs2 on e2`)
KV2 = "kv2"  # its memory
SHARED = "g"  # a pool both engines' requests take beside their slots, which both engines admit into


def _second_engine(program: ir.Program, rng: random.Random) -> None:
    """Drawn after everything else (a seed's program is otherwise what it was before): a program in four
    with an engine gets a second one, `e2`, of the first's clauses (serve order, `only`, granule, cost) but
    its own budget, chunk cap and request slots `reqs2` (cap 1 to 3; 2 or 3 under a serve order), and a
    request of its own (`_request_runs`, through a hold of a slot) beside the first's: one in two after it
    (prefill/decode disaggregation: a request holds `e`'s slot, then `e2`'s), else instead of it, chosen by
    a branch on an attribute's parity (a router). The second engine gets a KV memory of its own, `kv2`
    (`_memory`, its rules and preemption included), three in four when the first has none, one in two when
    it has, so that two engines' memories grow, evict and preempt side by side. One in two, when the first
    engine's request holds a slot, both requests also take a unit of a shared pool `g` (cap 1 or 2), so
    that the two engines' admissions at one instant contend for it and which engine plans first (the
    stages' declaration order, the reference's *Ties*) shows."""
    stages = [stage for stage in program.stages if isinstance(stage.service, ir.Step)]
    if not stages or rng.randrange(4):
        return
    first = stages[0].service
    engine = first.model_copy(deep=True)
    serve_order = first.serve.kind == "by" and bool(first.serve.keys)
    engine.budget = _num(rng.randint(1, 3 if serve_order else 6))
    engine.chunk = _num(rng.choice([0, 0, 1, 2, 3, 4]))
    program.stages.append(ir.Stage(name=ENGINE2, service=engine))
    program.pools.append(ir.Pool(name=REQS2, cap=rng.randint(2 if serve_order else 1, 3), admit_via=ENGINE2))
    top = [i for i, stmt in enumerate(program.server)
           if isinstance(stmt, ir.HoldStmt) and any(hp.pool.pool == REQS for hp in stmt.pools)
           or isinstance(stmt, ir.RunStmt) and stmt.stages[0].stage == ENGINE]
    at, end = top[0], top[-1] + 1  # (the first engine's request: a hold of its slot, or one or two bare runs)
    request = _slot_hold(REQS2, _request_runs(rng, ENGINE2))
    if rng.randrange(2):  # disaggregated: the first engine's request, then the second's
        program.server[end:end] = [request]
    else:  # routed: one or the other, by an attribute's parity
        attr = ir.Attr(name=rng.choice(["serial", "turn_no", *SESSION_VALUES]))
        test = _bin("eq", _bin("mod", attr, _num(2)), _num(rng.randint(0, 1)))
        program.server[at:end] = [ir.BranchStmt(test=test, then=program.server[at:end], otherwise=[request])]
    if rng.randrange(4 if KV not in {pool.name for pool in program.pools} else 2):
        _memory(program, rng, program.stages[-1], request, KV2)
    held = [stmt for stmt in ir.walk_stmts(program.server) if isinstance(stmt, ir.HoldStmt)
            and stmt.pools[0].pool.pool in (REQS, REQS2)]
    if len(held) == 2 and rng.randrange(2):
        program.pools.append(ir.Pool(name=SHARED, cap=rng.randint(1, 2)))
        for stmt in held:
            stmt.pools.append(ir.HoldPool(pool=ir.PoolRef(pool=SHARED), units=ir.CostOf(resources=[SHARED], arg=_num(1))))
            for clause in (stmt.cache, stmt.reuse):  # (a clause is a cost of every pool of the hold: `g` caches too)
                if clause is not None:
                    clause.resources.append(SHARED)


def _exclusive_prefill(program: ir.Program, rng: random.Random) -> None:
    """Drawn after everything else (every other seed's program is what it was before): a program in three
    with an engine has each of its engines, one in two, under `exclusive prefill; admit waiting while
    (running.preempted == 0);` (the IR's `serve` `ExclusivePrefill`, no iteration body: the serve order
    and the `only` predicates go; its budget, chunk cap, granule, cost and memory stay). A running
    prefill then takes the iteration alone, else the decodes are served and a waiting prefill that fits
    displaces them; with several slots and a budget of a few tokens, decodes run beside waiting prefills,
    so that displacements happen."""
    stages = [stage for stage in program.stages if isinstance(stage.service, ir.Step)]
    if not stages or rng.randrange(3):
        return
    for stage in stages:
        if rng.randrange(2):
            continue
        stage.service.serve = ir.ServeExclusivePrefill()
        stage.service.iteration = None


def _preemption(rng: random.Random):
    """A KV pool's rule for a growth that does not fit: `preempt none` one in three, else `preempt lifo`
    (vLLM's: the resident admitted last) or `preempt by` keys over the candidate's `position`, `decoding`
    and `admission` (ties, to the one admitted last, are common), the victim requeued at the head, or one
    in three at the tail (`requeue tail`)."""
    form = rng.randrange(3)
    if form == 0:
        return ir.PreemptNone()
    ctx = lambda var: ir.Ctx(var=var)  # noqa: E731
    if form == 1:
        keys = [ir.Unary(op="neg", arg=ctx("admission"))]  # `preempt lifo`, as the parser writes it
    else:
        keys = rng.choice([[ctx("position")],
                           [ir.Cond(test=ctx("decoding"), then=_num(1), otherwise=_num(0)), ctx("position")],
                           [ir.Call(fn="floor", args=[_bin("div", ctx("position"), _num(4))])]])
    return ir.PreemptBy(keys=keys, requeue="tail" if rng.randrange(3) == 0 else "head")


def _blocks_and_reserves(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): a pool in two has a block of 1
    to 3 units (a cap that is no multiple of it included), a hold's pool in three a reserve up to
    RESERVE, read from an attribute (judged at the join: above the cap, refused) or from `now` (judged
    at every try), and a hold in two a prefix cache (`_prefix_cache`)."""
    for pool in program.pools:
        if rng.randrange(2) == 0:  # (a block of 1: eviction unit by unit, from the tail of an entry)
            pool.block = rng.choice([1, 1, 2, 3])
    blocks = [*program.workload.init, *program.workload.turn, *program.workload.session, *program.server]
    for stmt in ir.walk_stmts(blocks):
        if isinstance(stmt, ir.HoldStmt):
            for hp in stmt.pools:
                if rng.randrange(3) == 0:
                    amount = ir.Call(fn="min", args=[_bin("add", _read(rng), _num(rng.randint(0, RESERVE))), _num(RESERVE)])
                    hp.reserve = ir.CostOf(resources=[hp.pool.pool], arg=amount)
            if rng.randrange(2) == 0:
                _prefix_cache(stmt, rng)
    if program.pools and rng.randrange(2) == 0:
        # every turn through a cached hold on the first pool, of blocks of 1: the sessions' later turns
        # reuse what their earlier ones left, and evict one another's, unit by unit from the tail
        first = program.pools[0]
        first.block = 1
        units = ir.Call(fn="min", args=[_bin("add", _read(rng), _num(rng.randint(1, 3))), _num(UNITS)])
        hold = ir.HoldStmt(pools=[ir.HoldPool(pool=ir.PoolRef(pool=first.name), units=ir.CostOf(
            resources=[first.name], arg=units))], body=list(program.server))
        _prefix_cache(hold, rng, observed=True)
        program.server[:] = [hold]


def _pool_observables(program: ir.Program, rng: random.Random) -> None:
    """Drawn after the rest (which stays what the seed gave before): a statement in three that reads an
    expression reads a pool's observable there too (a set's value, an observe's, a branch's or a
    while's test, a run's work, a hold's units on a pool, its `reuse` amount; never its `cache`
    amount nor the `init` block, where the fragment refuses them), a hold in two observes one at the
    top of its body (the pools are busiest there, and the hold just admitted), and a `queue by` pool
    in three has one as its last key. Tests stay 0 or 1 and loops bounded: a test is and-ed (a while's) or or-ed with a
    comparison."""
    if not program.pools:
        return
    names = [pool.name for pool in program.pools]

    def observable():
        return ir.PoolObs(fn=rng.choice(POOL_OBSERVABLES), pool=ir.PoolRef(pool=rng.choice(names)))

    def compared():
        return _bin(rng.choice(COMPARISONS), observable(), _num(rng.randint(0, 6)))

    def plus(bounded: ir.Call) -> None:  # `min(e, bound)` reads `min(e + observable, bound)`
        bounded.args[0] = _bin("add", bounded.args[0], observable())

    for pool in program.pools:
        if isinstance(pool.queue, ir.QueueBy) and rng.randrange(3) == 0:
            pool.queue.keys.append(observable())
    w = program.workload
    for stmt in list(ir.walk_stmts([*w.turn, *w.session, *program.server])):
        if isinstance(stmt, ir.HoldStmt) and rng.randrange(2) == 0:
            stmt.body.insert(0, ir.ObserveStmt(name=rng.choice(OBSERVES), value=observable()))
        if rng.randrange(3):
            continue
        if isinstance(stmt, ir.SetStmt) and isinstance(stmt.value, ir.Call):  # (a loop's counter is no call)
            plus(stmt.value)
        elif isinstance(stmt, ir.ObserveStmt):  # (what it observed still shows: a prefix cache's `cached`)
            stmt.value = _bin("add", stmt.value, observable())
        elif isinstance(stmt, ir.BranchStmt):
            stmt.test = _bin("or", stmt.test, compared())
        elif isinstance(stmt, ir.WhileStmt):
            stmt.test = _bin("and", stmt.test, compared())
        elif isinstance(stmt, ir.RunStmt) and isinstance(stmt.work.arg, ir.Call):  # (not a fixed early-release run)
            plus(stmt.work.arg)
        elif isinstance(stmt, ir.HoldStmt):
            hp = rng.choice(stmt.pools)
            if isinstance(hp.units.arg, ir.Call):
                plus(hp.units.arg)
            if stmt.reuse is not None:
                stmt.reuse.arg = ir.Call(fn="min", args=[stmt.reuse.arg, observable()])


def _read(rng: random.Random):
    """An attribute (read once: judged at the join) or the clock (read at every try)."""
    return ir.Attr(name="serial") if rng.randrange(2) else ir.Ctx(var="now")


def _clause(hold: ir.HoldStmt, amount):
    """A `cache` or `reuse` clause's amount: a cost of the hold's pools, as the IR has it."""
    return ir.CostOf(resources=[hp.pool.pool for hp in hold.pools], arg=amount)


def _prefix_cache(hold: ir.HoldStmt, rng: random.Random, observed: bool = False) -> None:
    """The hold takes part in the prefix cache: its release caches up to CACHE units of the session's
    prefix, and a later hold of the session consumes them (up to a `reuse` amount, one hold in two);
    one in two (every one `observed`) observes its `cached` (what the admission consumed)."""
    keep = _num(rng.randint(1, CACHE)) if rng.randrange(2) else ir.Call(
        fn="min", args=[_bin("add", _read(rng), _num(rng.randint(0, CACHE))), _num(CACHE)])
    hold.cache = _clause(hold, keep)
    if rng.randrange(2):
        hold.reuse = _clause(hold, ir.Call(fn="min", args=[_bin("add", _read(rng), _num(rng.randint(0, 3))), _num(CACHE)]))
    if observed or rng.randrange(2):
        hold.body.insert(0, ir.ObserveStmt(name=rng.choice(OBSERVES), value=ir.Attr(name="cached")))


def _granule(program: ir.Program, rng: random.Random) -> None:
    """Drawn last (the rest stays what the seed gave before): an engine in two has a prefill granule
    (`granule g`): 1, 2 or 3, or `1 + running.count % 2`, read as each iteration starts. A prefill's chunk
    short of its remainder is then a multiple of g, and one cut to none is passed over and ends the
    iteration's admissions."""
    engines = [stage.service for stage in program.stages if isinstance(stage.service, ir.Step)]
    if not engines or rng.randrange(2):
        return
    for engine in engines:
        engine.granule = rng.choice([_num(1), _num(2), _num(2), _num(3),
                                     _bin("add", _num(1), _bin("mod", ir.Ctx(var="residents"), _num(2)))])


def _kv_cost(program: ir.Program, rng: random.Random) -> None:
    """Drawn after everything else (a seed's program is otherwise what it was before): an engine in two
    lasts an iteration cost that reads the batch's KV sums, `batch.kv_decode`, `batch.kv_prefill` (0 but
    for runs growing the engine's memory, `_kv_memory`) and `batch.attention` (every prefill's), the
    attention rounded by `floor` or `ceil` as the fragment reads it; every cost is at least 1."""
    engines = [stage.service for stage in program.stages if isinstance(stage.service, ir.Step)]
    if not engines or rng.randrange(2):
        return
    batch = lambda var: ir.Ctx(var=var)  # noqa: E731
    rounded = lambda fn, d: ir.Call(fn=fn, args=[  # noqa: E731
        batch("attention") if d == 1 else _bin("div", batch("attention"), _num(d))])
    for engine in engines:
        engine.cost = rng.choice([
            _bin("add", _num(1), batch("kv_decode")),
            _bin("add", _num(1), batch("kv_prefill")),
            _bin("add", _num(1), ir.Call(fn="floor", args=[
                _bin("div", _bin("add", batch("kv_decode"), batch("kv_prefill")), _num(rng.randint(1, 4)))])),
            ir.Call(fn="max", args=[_num(1), rounded("ceil", rng.randint(1, 4))]),
            _bin("add", _num(1), rounded("floor", rng.randint(1, 3))),
            _bin("add", _num(rng.randint(1, 2)), ir.Call(fn="max", args=[
                ir.Call(fn="floor", args=[_bin("div", batch("kv_decode"), _num(2))]), batch("tokens")])),
        ])


TRACE_ATTRIBUTES = ["forced", "more", "new", "out", "think"]  # what a trace's turn sets (sizes, built in)
THINKS = [0, 0, 1, 3]


def trace_folder() -> Path:
    """Where the generated traces are written: `$TMPDIR/serq-kernel-drt-traces`."""
    return Path(tempfile.gettempdir()) / "serq-kernel-drt-traces"


def _ordered_trace(program: ir.Program, rng: random.Random) -> ir.Program:
    """Drawn last (the rest stays what the seed gave before): a program in five replays an ordered trace
    (`trace "file.csv" ordered;`) of 1 to 4 sessions of 1 to 3 turns each, arriving at times 0 to 3 (ties
    common), the file written one in two in reverse arrival order, so that the file's order (which
    breaks the ties between sessions arriving, and between turns created, at one instant) is not the
    arrival order; each turn's `new` and `out` 0 to 6, `think` of {0, 0, 1, 3}, `forced` 0 or 1. The
    session block becomes `turn; while (more) { S; observe o = (new | out | forced); run d (think);
    turn; }`, S its statements without their turns, so that it takes its trace session's turns, one a
    row (`more` is 1 but on the last)."""
    if rng.randrange(5):
        return program
    n = rng.randint(1, 4)
    times = sorted(rng.randint(0, 3) for _ in range(n))
    turns = [[(rng.randint(0, 6), rng.randint(0, 6), rng.choice(THINKS), rng.randint(0, 1))
              for _ in range(rng.randint(1, 3))] for _ in range(n)]
    ids = rng.sample(range(10), n)
    order = list(range(n))
    if rng.randrange(2):
        order.reverse()
    lines = ["session,arrive,new,out,think,forced"]
    for i in order:
        lines += [",".join(map(str, (ids[i], times[i], *row))) for row in turns[i]]
    path = write_trace("\n".join(lines) + "\n", trace_folder())

    def without_turns(body: list) -> list:
        # (new statements where a block changes, shallow copies: the program's own are not mutated, so
        # that no deep copy of it is needed, which took a fifth of the generator's time)
        out = []
        for stmt in body:
            if isinstance(stmt, ir.TurnStmt):
                continue
            blocks = inner_blocks(stmt)
            out.append(stmt.model_copy(update={name: without_turns(inner) for name, inner in blocks})
                       if blocks else stmt)
        return out

    w = program.workload
    seen = rng.choice(["new", "out", "forced"])
    session = [ir.TurnStmt(), ir.WhileStmt(test=ir.Attr(name="more"), body=[
        *without_turns(w.session),
        ir.ObserveStmt(name=rng.choice(OBSERVES), value=ir.Attr(name=seen)),
        ir.RunStmt(stages=[ir.StageRef(stage=STAGE)], work=ir.CostOf(resources=[STAGE], arg=ir.Attr(name="think"))),
        ir.TurnStmt()])]
    declared = {a.name for a in program.attributes}
    attributes = sorted([*program.attributes, *(ir.Attribute(name=a, type="size", side="builtin")
                                                for a in TRACE_ATTRIBUTES if a not in declared)],
                        key=lambda a: a.name)
    return program.model_copy(update={
        "workload": w.model_copy(update={"session": session, "arrival": ir.Trace(file=str(path), ordered=True)}),
        "settings": program.settings.model_copy(update={"arrivals": None}),
        "attributes": attributes})


def is_traced(program: ir.Program) -> bool:
    """Whether the program replays a trace (its arrival is `trace "…" ordered;`)."""
    return isinstance(program.workload.arrival, ir.Trace)


def kernel_cases():
    """The Hypothesis strategy: one seed per case."""
    return st.randoms(use_true_random=True).map(kernel_case)
