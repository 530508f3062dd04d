"""IR-level validation: the contract the linker guarantees, checked on any IR,
including IR written by hand (names resolve, indices in range, statement
sides, Size/Cost typing of amounts, context variables at their moments)."""

from __future__ import annotations

import math
from typing import Iterator

from serq.errors import SerqError
from serq.ir import catalogue as C
from serq.ir import models as ir
from serq.ir.catalogue import Moment as M
from serq.syntax.ast import Span

Type = frozenset | None


class _Where:
    """The place an IR error is reported at: a statement's `at`, else a path in the IR."""

    def __init__(self, path: str, loc: ir.Loc | None = None) -> None:
        self.path = path
        self.loc = loc

    def span(self) -> Span | None:
        if self.loc is None:
            return None
        return Span(self.loc.file, self.loc.line, self.loc.col)

    def error(self, msg: str) -> SerqError:
        where = "" if self.loc is not None else f"{self.path}: "
        return SerqError(where + msg, self.span(), "ir")




def validate(program: ir.Program) -> None:
    from serq.limits import check_ir_depths
    check_ir_depths(program, _Where)  # first: the checks below walk expressions recursively
    _Validator(program).run()


class _Validator:
    def __init__(self, p: ir.Program) -> None:
        self.p = p
        self.pools = {x.name: x for x in p.pools}
        self.stages = {x.name: x for x in p.stages}
        self.attrs = {a.name: a for a in p.attributes}
        self.observes: set[str] = set()

    def run(self) -> None:
        p = self.p
        seen: dict[str, str] = {}
        for kind, items in (("pool", p.pools), ("stage", p.stages), ("gauge", p.gauges), ("claim", p.claims)):
            for x in items:
                if x.name in seen:
                    raise _Where(f"{kind}s").error(f"{kind} `{x.name}` has the name of a {seen[x.name]} declared before")
                seen[x.name] = kind
        for pool in p.pools:
            self._pool(pool)
        for st in p.stages:
            self._stage(st)
        wl = p.workload
        self._arrival(wl.arrival)
        if wl.trace is not None and isinstance(wl.arrival, ir.Trace):
            raise _Where("workload.trace").error("a trace beside a trace arrival: the workload replays one trace")
        for name in wl.hidden:
            a = self.attrs.get(name)
            if a is None or not (a.side == "session" or name in C.TRACE_ATTRIBUTES):
                raise _Where("workload.hidden").error(f"hidden `{name}` is not a workload attribute")
            if name in C.SCHEDULER_ATTRIBUTES:
                raise _Where("workload.hidden").error(f"`{name}` is set by the scheduler and cannot be hidden")
        self._block(wl.init, "init", "workload.init")
        self._block(wl.turn, "turn", "workload.turn")
        self._block(wl.session, "session", "workload.session")
        if not any(isinstance(s, ir.TurnStmt) for s in ir.walk_stmts(wl.session)):
            raise _Where("workload.session").error("the session has no turn")
        self._block(p.server, "server", "server")
        for g in p.gauges:
            self._expr(g.value, M.GAUGE, _Where(f"gauge {g.name}"), number=True)
        for c in p.claims:
            self._claim(c)

    # -- declarations
    def _pool(self, pool: ir.Pool) -> None:
        w = _Where(f"pool {pool.name}")
        if pool.cap != "inf" and (math.isnan(pool.cap) or pool.cap < 0):
            raise w.error("the cap is a number at least 0, or inf")
        for key in getattr(pool.evict, "keys", []):
            self._expr(key, M.EVICT_KEY, w, number=True)
        for key in getattr(pool.preempt, "keys", []):
            self._expr(key, M.PREEMPT_KEY, w, number=True)
        for key in getattr(pool.queue, "keys", []):
            self._expr(key, M.QUEUE_KEY, w, number=True)
        if pool.spill is not None:
            self._pool_ref(pool.spill.pool, M.SPILL, w)
            self._stage_ref(pool.spill.stage, M.SPILL, w)
            self._amount(pool.spill.cost, M.SPILL, {pool.spill.stage.stage}, w, "the spill cost")
            self._expr(pool.spill.when, M.SPILL, w, number=True)
        for field in ("admit_via", "memory_of"):
            name = getattr(pool, field)
            if name is not None and not (name in self.stages and isinstance(self.stages[name].service, ir.Step)):
                raise w.error(f"{field} `{name}` is not a step stage")

    def _stage(self, st: ir.Stage) -> None:
        w = _Where(f"stage {st.name}")
        s = st.service
        if isinstance(s, ir.Ps):
            self._expr(s.capacity, M.PS_CAPACITY, w, number=True)
        elif isinstance(s, ir.Step):
            regs = {r.name for r in s.registers}
            if len(regs) != len(s.registers):
                twice = sorted({r.name for r in s.registers if [q.name for q in s.registers].count(r.name) > 1})
                raise w.error(f"register `{twice[0]}` is declared twice: a register has one starting value")
            self._expr(s.budget, M.STEP_BUDGET, w, number=True, stage=st.name, regs=regs)
            self._expr(s.cost, M.STEP_COST, w, number=True, stage=st.name, regs=regs)
            self._expr(s.chunk, M.STEP_CHUNK, w, number=True, stage=st.name, regs=regs)
            if s.granule is not None:
                self._expr(s.granule, M.STEP_CHUNK, w, number=True, stage=st.name, regs=regs)
            if isinstance(s.serve, ir.ServeBy):
                for key in s.serve.keys:
                    self._expr(key, M.STEP_SERVE, w, number=True, stage=st.name, regs=regs)
            self._iteration(s.iteration or [], w, st.name, regs)

    def _iteration(self, body, w: _Where, stage: str, regs: set[str]) -> None:
        for it in body:
            if isinstance(it, (ir.IterServe, ir.IterAdmit)):
                if it.only is not None:
                    self._expr(it.only, M.STEP_SERVE, w, number=True, stage=stage, regs=regs)
                if isinstance(it, ir.IterAdmit) and it.gate is not None:
                    self._expr(it.gate, M.STEP_GUARD, w, number=True, stage=stage, regs=regs)
            elif isinstance(it, ir.IterBranch):
                self._expr(it.test, M.STEP_GUARD, w, number=True, stage=stage, regs=regs)
                self._iteration(it.then, w, stage, regs)
                self._iteration(it.otherwise, w, stage, regs)
            elif isinstance(it, ir.IterSet):
                if it.name not in regs:
                    raise w.error(f"the schedule sets `{it.name}`, which is no register of the stage")
                self._expr(it.value, M.STEP_GUARD, w, number=True, stage=stage, regs=regs)

    def _arrival(self, a) -> None:
        if isinstance(a, ir.Renewal):
            self._expr(a.gap, M.RENEWAL, _Where("workload.arrival"), number=True)

    def _claim(self, c: ir.Claim) -> None:
        w = _Where(f"claim {c.name}")
        if c.given is not None:
            self._expr(c.given, M.GIVEN, w, number=True)
        if c.form == "at_end":
            if c.stage is not None:
                raise w.error("a claim at end names no stage")
            self._expr(c.value, M.CLAIM_END, w, number=True)
            return
        if c.stage is None:
            raise w.error("a claim over iterations names its step stage")
        st = self.stages.get(c.stage.stage)
        if st is None or not isinstance(st.service, ir.Step):
            raise w.error(f"`{c.stage.stage}` is not a step stage")
        if c.stage.index is not None and not isinstance(c.stage.index, ir.Num):
            raise w.error("a claim names a member by a constant index")
        self._stage_ref(c.stage, M.CLAIM_ITERATION, w)
        regs = {r.name for r in st.service.registers}
        self._expr(c.value, M.CLAIM_ITERATION, w, number=True, stage=c.stage.stage, regs=regs)

    # -- statements
    def _block(self, body: list, side: str, path: str, holds: tuple = (), in_fork: bool = False) -> None:
        for i, s in enumerate(body):
            self._stmt(s, side, _Where(f"{path}[{i}]", s.at), holds, in_fork)

    def _stmt(self, s, side: str, w: _Where, holds: tuple, in_fork: bool) -> None:
        moment = M.SERVER if side == "server" else M.SESSION
        if side in ("init", "turn") and not isinstance(s, (ir.SetStmt, ir.ObserveStmt, ir.BranchStmt, ir.ChooseStmt)):
            raise w.error(f"the workload's {side} block holds set, observe, branch and choose, not {s.kind}")
        if isinstance(s, ir.TurnStmt):
            if side != "session" or in_fork:
                raise w.error("a turn stands in the session, outside any fork")
        elif isinstance(s, ir.SetStmt):
            a = self.attrs.get(s.name)
            if a is None:
                raise w.error(f"`{s.name}` is not in the program's attributes")
            t = self._expr(s.value, moment, w)
            if side == "server" and a.side == "session":
                raise w.error(f"the server sets `{s.name}`, a workload attribute (read-only to the server)")
            if side != "server" and a.side == "server":
                raise w.error(f"the workload sets `{s.name}`, a server attribute")
            if a.type == "size" and side == "server":
                raise w.error(f"`{s.name}` is a Size: only the workload sets it")
            if a.type == "cost":
                if t is None or t != frozenset(a.resources):
                    raise w.error(f"`{s.name}` is a cost of {', '.join(a.resources)}; this sets it to {_tname(t)}")
            elif t is not None:
                raise w.error(f"`{s.name}` is a {a.type}; this sets it to {_tname(t)}")
        elif isinstance(s, ir.ObserveStmt):
            self._expr(s.value, moment, w, number=True)
            self.observes.add(s.name)
        elif isinstance(s, ir.HoldStmt):
            if not s.pools:
                raise w.error("a hold names at least one pool")
            keys = []
            for hp in s.pools:
                self._pool_ref(hp.pool, M.HOLD_HEADER, w)
                key = _key(hp.pool)
                if key in keys:
                    raise w.error(f"the hold names `{hp.pool.pool}` twice")
                keys.append(key)
                self._amount(hp.units, M.HOLD_HEADER, {hp.pool.pool}, w, "the units")
                if hp.reserve is not None:
                    self._amount(hp.reserve, M.HOLD_HEADER, {hp.pool.pool}, w, "the reserve")
            every = {hp.pool.pool for hp in s.pools}
            if s.reuse is not None:
                if s.cache is None:
                    raise w.error("a hold without cache has no reuse")
                self._amount(s.reuse, M.HOLD_HEADER, every, w, "the reuse")
            if s.cache is not None:
                self._amount(s.cache, M.HOLD_CACHE, every, w, "the cache")
            if s.lease is not None:
                self._pool_ref(s.lease.pool, M.LEASE, w)
                if _key(s.lease.pool) not in keys:
                    raise w.error(f"the lease names `{s.lease.pool.pool}`, which the hold does not hold")
                self._expr(s.lease.duration, M.LEASE, w, number=True)
            self._block(s.body, side, w.path + ".body", holds + tuple(keys), in_fork)
        elif isinstance(s, (ir.GrowStmt, ir.LoadStmt)):
            self._pool_ref(s.pool, moment, w)
            if _key(s.pool) not in holds:
                raise w.error(f"{s.kind} `{s.pool.pool}` stands inside a hold of it")
            self._amount(s.amount, moment, {s.pool.pool}, w, f"the amount of {s.kind}")
        elif isinstance(s, (ir.DropStmt, ir.ReleaseStmt)):
            self._pool_ref(s.pool, moment, w)
        elif isinstance(s, ir.RunStmt):
            if not s.stages:
                raise w.error("a run names at least one stage")
            for r in s.stages:
                self._stage_ref(r, moment, w)
                step = isinstance(self.stages[r.stage].service, ir.Step)
                if step != (s.mode is not None):
                    raise w.error(f"a run on `{r.stage}` " + ("names its mode" if step else "has no mode"))
            self._amount(s.work, moment, {r.stage for r in s.stages}, w, "the work")
            if s.growing is not None:
                self._pool_ref(s.growing, moment, w)
                if _key(s.growing) not in holds:
                    raise w.error(f"growing `{s.growing.pool}` stands inside a hold of it")
        elif isinstance(s, (ir.BranchStmt, ir.WhileStmt)):
            self._expr(s.test, moment, w, number=True)
            for name in ("then", "otherwise", "body"):
                inner = getattr(s, name, None)
                if inner is not None:
                    self._block(inner, side, f"{w.path}.{name}", holds, in_fork)
        elif isinstance(s, ir.LoopStmt):
            self._block(s.body, side, w.path + ".body", holds, in_fork)
        elif isinstance(s, ir.ForkStmt):
            if in_fork:
                raise w.error("a leg may not fork")
            self._block(s.body, side, w.path + ".body", (), True)
        elif isinstance(s, (ir.JoinStmt, ir.EndStmt)):
            if in_fork:
                raise w.error(f"a leg may not {s.kind}")
        elif isinstance(s, ir.ChooseStmt):
            if s.name not in self.attrs:
                raise w.error(f"`{s.name}` is not in the program's attributes")
            self._expr(s.count, moment, w, number=True)
            for key in s.keys:
                self._expr(key, moment, w, number=True)

    # -- references, amounts, expressions
    def _pool_ref(self, r: ir.PoolRef, moment: M, w: _Where) -> None:
        pool = self.pools.get(r.pool)
        if pool is None:
            raise w.error(f"`{r.pool}` is not a pool")
        self._index(r.index, pool.count, r.pool, moment, w)

    def _stage_ref(self, r: ir.StageRef, moment: M, w: _Where) -> None:
        st = self.stages.get(r.stage)
        if st is None:
            raise w.error(f"`{r.stage}` is not a stage")
        self._index(r.index, st.count, r.stage, moment, w)

    def _index(self, index, count: int, name: str, moment: M, w: _Where) -> None:
        if index is None:
            if count > 1:
                raise w.error(f"`{name}` is an array of {count}: a reference names a member")
            return
        self._expr(index, moment, w, number=True)
        if isinstance(index, ir.Num) and not (float(index.value).is_integer() and 0 <= index.value < count):
            raise w.error(f"index {index.value} of `{name}` is out of range 0..{count - 1}")

    def _amount(self, e, moment: M, needed: set[str], w: _Where, what: str) -> None:
        t = self._expr(e, moment, w)
        if t is None or not needed <= t:
            raise w.error(f"{what} is {_tname(t)}; an amount here is a cost of {', '.join(sorted(needed))}")

    def _expr(self, e, moment: M, w: _Where, number: bool = False, stage: str | None = None,
              regs: set[str] | None = None) -> Type:
        for n in ir.walk(e):
            if isinstance(n, ir.Ctx):
                desc, moments = C.CONTEXT_VARIABLES[n.var]
                if moment not in moments:
                    raise w.error(f"`{n.var}` is not available at {moment.value}")
            elif isinstance(n, ir.Attr):
                if moment not in C.ATTRIBUTE_MOMENTS:
                    raise w.error(f"`{n.name}`: {moment.value} reads no session attribute")
                if n.name not in self.attrs:
                    raise w.error(f"`{n.name}` is not in the program's attributes")
                if moment in C.SCHEDULER_MOMENTS and self.attrs[n.name].hidden:
                    raise w.error(f"`{n.name}` is hidden: {moment.value} may not read it")
            elif isinstance(n, ir.Draw):
                if moment in C.NO_DRAW:
                    raise w.error(f"{moment.value} may not draw")
                if len(n.args) != C.DISTRIBUTIONS[n.dist][0]:
                    raise w.error(f"~{n.dist} takes {C.DISTRIBUTIONS[n.dist][0]} parameter(s)")
            elif isinstance(n, ir.Reg):
                if moment not in C.REGISTER_MOMENTS:
                    raise w.error(f"register `{n.stage}.{n.name}` is not read at {moment.value}")
                st = self.stages.get(n.stage)
                if st is None or not isinstance(st.service, ir.Step) or n.name not in {r.name for r in st.service.registers}:
                    raise w.error(f"`{n.stage}.{n.name}` is no register")
            elif isinstance(n, ir.PoolObs):
                if moment not in C.OBSERVABLE_MOMENTS:
                    raise w.error(f"{moment.value} may not read {n.fn}(…)")
                self._pool_ref(n.pool, moment, w)
            elif isinstance(n, ir.StageObs):
                if moment not in C.OBSERVABLE_MOMENTS:
                    raise w.error(f"{moment.value} may not read {n.fn}(…)")
                self._stage_ref(n.stage, moment, w)
                if n.fn == "budget_left" and not isinstance(self.stages[n.stage.stage].service, ir.Step):
                    raise w.error(f"budget_left of `{n.stage.stage}`, which is no step stage")
                if n.fn == "budget_left" and n.stage.stage == stage and moment in (M.STEP_BUDGET, M.STEP_CHUNK):
                    raise w.error("a step stage's budget or chunk may not read its own budget_left")
            elif isinstance(n, ir.Observed):
                if moment != M.CLAIM_END:
                    raise w.error(f"{n.fn}({n.name}) is read only by a claim at end")
            elif isinstance(n, ir.CostOf):
                for r in n.resources:
                    if r not in self.pools and r not in self.stages:
                        raise w.error(f"cost of `{r}`, which is no pool or stage")
            elif isinstance(n, ir.Call):
                lo, hi, _ = C.FUNCTIONS[n.fn]
                if len(n.args) < lo or (hi is not None and len(n.args) > hi):
                    raise w.error(f"{n.fn} takes {lo}{'' if hi == lo else '+'} argument(s)")
        t = self._type(e, w)
        if number and t is not None:
            raise w.error(f"{moment.value} is a number, not {_tname(t)}")
        return t

    def _type(self, e, w: _Where) -> Type:
        if isinstance(e, ir.CostOf):
            if self._type(e.arg, w) is not None:
                raise w.error("the amount of a cost(…) is a plain number")
            return frozenset(e.resources)
        if isinstance(e, ir.Attr):
            a = self.attrs.get(e.name)
            return frozenset(a.resources) if a is not None and a.type == "cost" else None
        if isinstance(e, ir.Unary):
            t = self._type(e.arg, w)
            if e.op == "not" and t is not None:
                raise w.error("`!` of a cost")
            return t
        if isinstance(e, ir.Binary):
            a, b = self._type(e.lhs, w), self._type(e.rhs, w)
            if e.op in ("add", "sub"):
                if a != b:
                    raise w.error(f"{e.op} of {_tname(a)} and {_tname(b)}")
                return a
            if e.op == "mul":
                if a is not None and b is not None:
                    raise w.error("a cost times a cost")
                return a if a is not None else b
            if e.op in ("div", "mod"):
                if b is not None:
                    raise w.error("division by a cost")
                return a
            if a != b:
                raise w.error(f"{e.op} compares {_tname(a)} with {_tname(b)}")
            return None
        if isinstance(e, ir.Cond):
            if self._type(e.test, w) is not None:
                raise w.error("a condition is a number")
            a, b = self._type(e.then, w), self._type(e.otherwise, w)
            if a != b:
                raise w.error(f"the arms of a condition are {_tname(a)} and {_tname(b)}")
            return a
        if isinstance(e, ir.Call):
            types = {self._type(x, w) for x in e.args}
            if e.fn in ("min", "max"):
                if len(types) > 1:
                    raise w.error(f"{e.fn} of costs of different resources")
                return types.pop()
            if types - {None}:
                raise w.error(f"{e.fn} of a cost")
            return None
        if isinstance(e, ir.Draw):
            if any(self._type(x, w) is not None for x in e.args):
                raise w.error("a distribution's parameter is a number")
        return None


def _tname(t: Type) -> str:
    return "a plain number" if t is None else "a cost of " + ", ".join(sorted(t))


def _key(r: ir.PoolRef) -> tuple:
    return (r.pool, None if r.index is None else r.index.model_dump_json())




def load_ir(path: str) -> ir.Program:
    """Read and validate an IR file (written by `serq ir` or by hand)."""
    from pathlib import Path

    from pydantic import ValidationError
    from serq.errors import read_source
    text = read_source(Path(path), "IR", "ir")
    try:
        program = ir.from_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        if len(where) > 200:  # a path into an IR nested deep: its two ends
            where = f"{where[:90]} … {where[-90:]} ({len(first['loc'])} levels)"
        if first["type"] == "json_invalid" and "recursion limit" in first["msg"]:
            from serq.jsondepth import too_deep
            raise SerqError(f"{path}: not a serQ IR program: {too_deep(text, 200)}, past the JSON reader's "
                            "depth (200)", None, "ir") from None
        at = f"at {where}: " if where else ""
        raise SerqError(f"{path}: not a serQ IR program: {at}{first['msg']} "
                        f"({e.error_count()} error(s) in all)", None, "ir") from None
    try:
        validate(program)
    except SerqError as e:
        if e.span is None:  # a place in the IR (`pool kv`, `server[0].body`): say which file
            e.message = f"{path}: {e.message}"
            e.args = (e.message,)
        raise
    return program
