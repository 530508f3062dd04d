"""The linker: the kernel AST -> the IR, with every refusal the reference names.

Order of work: constants and inputs; declarations and their names; def and
aggregate expansion, `branch with`, `at admission`; attributes and their
sides; then each section linked to IR (expressions checked against the moment
that reads them, amounts typed as costs); then the whole-program checks in
`serq.link.flow`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from serq.errors import SerqError
from serq.ir import catalogue as C
from serq.ir import models as ir
from serq.ir.catalogue import Moment as M
from serq.link.consts import ConstValue, apply_binary, apply_function, format_number
from serq.link.expand import Expander, draws, map_stmt_exprs, walk_expr
from serq.link.flow import check_program as check_flow
from serq.link.fold import attrs_read, fold
from serq.link.loader import Unit
from serq.syntax import ast as A

COUNT_LIMIT = 1_000_000

Type = frozenset | None  # None: a number; a frozenset: a cost of those resources

_BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "==": "eq", "!=": "ne",
           "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "&&": "and", "||": "or"}

_VOCABULARY = {
    A.DeviceDecl: "a device", A.EngineDecl: "an engine", A.QueueDecl: "a queue",
    A.RelationDecl: "a pull/push relation",
}


def _err(msg: str, span: A.Span | None) -> SerqError:
    return SerqError(msg, span, "link")


def _type_name(t: Type) -> str:
    return "a plain number" if t is None else "a cost of " + ", ".join(sorted(t))


@dataclass
class Decl:
    kind: str  # let, input, def, parameter, pool, stage, gauge, claim, observe, attribute, binding
    span: A.Span


@dataclass
class StmtScope:
    """What a statement sees around it."""

    side: str  # session | server | init | turn
    holds: list[tuple[tuple, ir.HoldStmt, A.Hold]] = field(default_factory=list)
    in_fork: bool = False
    preemptible: bool = False  # inside a hold a pool may preempt

    def inner(self, **kw) -> "StmtScope":
        d = dict(side=self.side, holds=list(self.holds), in_fork=self.in_fork, preemptible=self.preemptible)
        d.update(kw)
        return StmtScope(**d)


class Linker:
    def __init__(self, unit: Unit, supplied: dict[str, str] | None = None,
                 settings: ir.Settings | None = None) -> None:
        self.unit = unit
        self.supplied = dict(supplied or {})
        self.settings = settings or ir.Settings()
        self.consts: dict[str, ConstValue] = {}
        self.inputs: list[ir.InputValue] = []
        self.decls: dict[str, Decl] = {}
        self.pools: dict[str, ir.Pool] = {}
        self.stages: dict[str, ir.Stage] = {}
        self.pool_decls: dict[str, A.PoolDecl] = {}
        self.attributes: dict[str, ir.Attribute] = {}
        self.attr_sides: dict[str, set[str]] = {}
        self.observes: dict[str, A.Span] = {}
        self.spans: dict[int, A.Span] = {}  # id(IR node) -> where it was written
        self.header_reads: list[tuple[str, A.Span, str]] = []  # (attr, span, hold)
        self.live_sets: dict[str, tuple[A.Span, str]] = {}
        self.multi_stage_runs: list[tuple[ir.RunStmt, A.Span]] = []
        self.forks: list[A.Span] = []
        self.joins = 0
        self.lease_pools: set[tuple] = set()
        self.release_outside: list[tuple[tuple, A.Span, str]] = []
        self.assigned_names: set[str] = set()
        self.observed_names: set[str] = set()
        self.header_engine: str | None = None  # the engine admitting the first pool of the hold being linked

    # ================================================================ entry
    def link(self) -> ir.Program:
        main = self.unit.main
        assert main is not None
        for c in self.unit.constants:
            self._constant(c)
        definitions: dict[str, A.Definition] = {}
        for d in self.unit.definitions:
            self._declare(d.name, "def", d.span)
            definitions[d.name] = d
        for item in main.items:
            if isinstance(item, A.Constant):
                self._constant(item)
            elif isinstance(item, A.Input):
                self._input(item)
        self.assigned_names = _assigned_names(main.items)
        self.observed_names = _assigned_names(main.items, observes_only=True)
        self.expander = Expander(definitions, self._count_value, self._name_taken)
        from serq.lower import lower
        kernel_items = lower([i for i in main.items if not isinstance(i, (A.Constant, A.Input))],
                             self.expander.expr, self._const_or_none)
        workload: A.WorkloadDecl | None = None
        servers: list[A.ServerDecl] = []
        pool_items: list[A.PoolDecl] = []
        stage_items: list[A.StageDecl | A.StepStageDecl] = []
        gauges: list[A.GaugeDecl] = []
        claims: list[A.ClaimDecl] = []
        shares: list[A.ShareDecl] = []
        for item in kernel_items:
            if isinstance(item, A.PoolDecl):
                self._declare(item.name, "pool", item.span)
                # a def in a queue, eviction or preemption key, a spill's cost or test, a cap: written out
                pool_items.append(map_stmt_exprs(item, self.expander.expr))
            elif isinstance(item, (A.StageDecl, A.StepStageDecl)):
                self._declare(item.name, "stage", item.span)
                stage_items.append(item)
            elif isinstance(item, A.WorkloadDecl):
                if workload is not None:
                    raise _err("a second workload: a program has one", item.span)
                workload = item
            elif isinstance(item, A.ServerDecl):
                servers.append(item)
            elif isinstance(item, A.GaugeDecl):
                self._declare(item.name, "gauge", item.span)
                gauges.append(item)
            elif isinstance(item, A.ClaimDecl):
                self._declare(item.name, "claim", item.span)
                claims.append(item)
            elif isinstance(item, A.ShareDecl):
                shares.append(item)
            else:  # pragma: no cover - the loader and serq.lower sorted the rest out
                raise _err("this declaration does not stand inside main", item.span)
        for unsupplied in sorted(set(self.supplied) - {i.arg for i in self.inputs}):
            declared = ", ".join(sorted(i.arg for i in self.inputs)) or "none"
            raise SerqError(f"no input named `{unsupplied}` (the program declares: {declared})", None, "usage")
        if workload is None:
            raise _err("the program has no workload: `workload { arrive …; }` says how sessions arrive", main.span)
        if len(servers) > 1:
            raise _err("a second server: there is one server per workload", servers[1].span)
        if len(shares) > 1:
            raise _err("a second `share`: a program declares one", shares[1].span)
        for d in definitions.values():
            for p in d.params:
                self._check_not_supplied(p, "a parameter", d.span)
                if p in self.decls and self.decls[p].kind != "def":
                    raise _err(f"parameter `{p}` of `{d.name}` has the name of {self._ARTICLE[self.decls[p].kind]}", d.span)

        # -- at admission bindings keep their names to themselves
        raw_bodies = [b for blocks in (workload.init, workload.turn, workload.session) for b in blocks]
        raw_bodies += [sv.body for sv in servers] + [d.body for d in definitions.values() if d.body is not None]
        self._check_bindings(raw_bodies)

        # -- the kernel AST: defs, aggregates, branch with, at admission
        workload = self._expand_workload(workload)
        server_body = self.expander.stmts(servers[0].body) if servers else []
        gauges = [A.GaugeDecl(g.name, self.expander.expr(g.value), g.span) for g in gauges]
        claims = [A.ClaimDecl(c.name, self.expander.expr(c.given) if c.given else None, c.form, c.stage,
                              self.expander.expr(c.value), c.span) for c in claims]

        # -- attributes, their sides and types
        self._collect_attributes(workload, server_body)

        # -- declarations to IR
        for p in pool_items:
            self.pool_decls[p.name] = p
            self.pools[p.name] = self._pool_shell(p)
        for s in stage_items:  # in declaration order: the IR keeps it
            self.stages[s.name] = self._step_shell(s) if isinstance(s, A.StepStageDecl) else self._stage(s)
        for p in pool_items:
            self._pool_options(p)
        for s in stage_items:
            if isinstance(s, A.StepStageDecl):
                self._step(s)

        self.workload_ir = self._workload(workload)
        server_ir = self._block(server_body, StmtScope("server"))
        program = ir.Program(
            source=Path(self.unit.path).name,
            constants=[ir.ConstantValue(name=n, value=_bound(v.value)) for n, v in self.consts.items()
                       if self.decls[n].kind == "let"],
            inputs=self.inputs,
            attributes=[self.attributes[n] for n in sorted(self.attributes)],
            pools=list(self.pools.values()),
            stages=list(self.stages.values()),
            share=shares[0].policy if shares else "none",
            workload=self.workload_ir,
            server=server_ir,
            gauges=[self._gauge(g) for g in gauges],
            claims=[self._claim(c) for c in claims],
            settings=self.settings,
        )
        check_flow(self, program, workload, server_body, servers[0].span if servers else None)
        from serq.ir.validate import validate
        try:
            validate(program)  # what the linker wrote keeps the IR's contract, as IR written by hand must
        except SerqError as e:  # located by the IR's `at`, which names the file as the IR does: name it as given
            if e.span is not None and e.span.file == program.source and e.span.file != self.unit.path:
                from dataclasses import replace
                e.span = replace(e.span, file=str(self.unit.path))
            raise
        return program

    def _const_or_none(self, e: A.Expr) -> float | None:
        try:
            return self._const_eval(e, "a constant").value
        except SerqError:
            return None

    def _vocabulary(self, what: str, span: A.Span) -> None:
        raise _err(f"{what} is parse-time vocabulary, lowered onto the kernel by `serq.lower`, "
                   "which this build does not have yet; write the kernel form", span)

    # ================================================================ names
    def _name_taken(self, name: str) -> bool:
        return (name in self.decls or name in C.RESERVED_CONTEXT or name in C.SUPPLIED_NAMES
                or name in C.BUILTIN_ATTRIBUTES or name in C.TRACE_ATTRIBUTES
                or name in self.assigned_names or name in C.FUNCTIONS
                or name in C.POOL_OBSERVABLES or name in C.STAGE_OBSERVABLES)

    def _check_not_supplied(self, name: str, what: str, span: A.Span, functions: bool = True) -> None:
        """Refuse a name the language supplies; with `functions=False` (a def, which in its program is
        the meaning of the name) a catalogue function's name is free, `cost`, which is syntax, not."""
        if name in C.RESERVED_CONTEXT or name in C.SUPPLIED_NAMES:
            raise _err(f"{what} may not be named `{name}`: the language supplies that name", span)
        if name in C.BUILTIN_ATTRIBUTES or name in C.TRACE_ATTRIBUTES:
            raise _err(f"{what} may not be named `{name}`: it is a built-in session attribute", span)
        if name == "cost" or (functions and (name in C.FUNCTIONS or name in C.POOL_OBSERVABLES
                                             or name in C.STAGE_OBSERVABLES)):
            raise _err(f"{what} may not be named `{name}`: it is a function of the language", span)

    _ARTICLE = {"let": "a let", "input": "an input", "def": "a def", "pool": "a pool", "stage": "a stage",
                "gauge": "a gauge", "claim": "a claim", "observe": "an observe", "attribute": "an attribute",
                "binding": "an `at admission` binding", "parameter": "a parameter"}

    def _declare(self, name: str, kind: str, span: A.Span) -> None:
        self._check_not_supplied(name, self._ARTICLE[kind], span, functions=kind != "def")
        prior = self.decls.get(name)
        if prior is not None:
            if prior.kind == kind:
                raise _err(f"{self._ARTICLE[kind]} `{name}` is declared twice (first at {prior.span})", span)
            raise _err(f"{self._ARTICLE[kind]} `{name}` has the name of {self._ARTICLE[prior.kind]} "
                       f"declared at {prior.span}: names of different kinds do not collide", span)
        self.decls[name] = Decl(kind, span)

    def _check_bindings(self, bodies: list[list[A.Stmt]]) -> None:
        set_names = {st.target.name for body in bodies for st in A.walk_stmts(body)
                     if isinstance(st, A.Set) and st.target.is_bare}
        set_names |= {st.name for body in bodies for st in A.walk_stmts(body)
                      if isinstance(st, (A.SizeDecl, A.CostDecl, A.Choose, A.CostFieldsDecl))}
        set_names |= self.assigned_names
        observed = {st.name for body in bodies for st in A.walk_stmts(body) if isinstance(st, A.Observe)}
        observed |= self.observed_names
        holds = [st for body in bodies for st in A.walk_stmts(body) if isinstance(st, A.Hold) and st.bindings]
        if not holds:
            return
        bound: dict[str, A.Span] = {}
        for h in holds:
            for b in h.bindings:
                self._check_not_supplied(b.name, "an `at admission` binding", b.span)
                prior = self.decls.get(b.name)
                if prior is not None:
                    raise _err(f"binding `{b.name}` has the name of {self._ARTICLE[prior.kind]} declared at "
                               f"{prior.span}: a binding's name is its own", b.span)
                if b.name in observed:
                    raise _err(f"binding `{b.name}` has the name of an observe: a binding's name is its own",
                               b.span)
                if b.name in set_names:
                    raise _err(f"binding `{b.name}` has the name of an attribute the program sets: "
                               "a binding's name is its own", b.span)
                bound.setdefault(b.name, b.span)

        def visit(body: list[A.Stmt], in_scope: frozenset[str]) -> None:
            for st in body:
                if isinstance(st, A.Hold):
                    names = [b.name for b in st.bindings]
                    header = [p.units for p in st.pools] + [p.reserve for p in st.pools if p.reserve] + \
                             ([st.reuse] if st.reuse else [])
                    for i, b in enumerate(st.bindings):
                        for n in walk_expr(b.value):
                            if isinstance(n, A.Ref) and n.is_bare and n.name in names[i:] and n.name not in in_scope:
                                raise _err(f"binding `{st.bindings[i].name}` reads `{n.name}`: a binding reads "
                                           "only the ones before it in its clause", n.span)
                    inner = in_scope | frozenset(names)
                    for e in header:
                        _refuse_bound(e, inner)
                    for e in ([st.cache] if st.cache else []) + ([st.lease[1]] if st.lease else []):
                        _refuse_bound(e, inner)
                    visit(st.body, inner)
                    continue
                for e in _direct_exprs(st):
                    _refuse_bound(e, in_scope)
                for attr in ("body", "then", "otherwise"):
                    inner_body = getattr(st, attr, None)
                    if isinstance(inner_body, list):
                        visit(inner_body, in_scope)

        def _refuse_bound(e: A.Expr, in_scope: frozenset[str]) -> None:
            for n in walk_expr(e):
                if isinstance(n, A.Ref) and n.is_bare and n.name in bound and n.name not in in_scope:
                    raise _err(f"`{n.name}` is an `at admission` binding (at {bound[n.name]}): it is read only "
                               "in the holds that bind it", n.span)

        for body in bodies:
            visit(body, frozenset())

    # ================================================================ constants
    def _constant(self, c: A.Constant) -> None:
        self._declare(c.name, "let", c.span)
        self.consts[c.name] = self._const_eval(c.value, f"let `{c.name}`")

    def _input(self, item: A.Input) -> None:
        if not self.unit.std_args:
            raise _err('`args.number(…)` needs `use "std/args";` at the top of the program', item.span)
        if any(i.arg == item.arg for i in self.inputs):
            raise _err(f'input "{item.arg}" is declared twice', item.span)
        self._declare(item.name, "input", item.span)
        if item.arg in self.supplied:
            from serq.syntax.parser import parse
            text = self.supplied[item.arg]
            pseudo = f"<input {item.arg}>"
            try:
                if not isinstance(text, str):  # an instance file's `let`: parsed where it is written
                    expr = text
                else:
                    module = parse(f"fn main() {{ let supplied = {text}; }}", pseudo)
                    expr = module.items[0].items[0].value  # type: ignore[union-attr]
                value = self._const_eval(expr, f"input `{item.arg}`")
            except SerqError as e:
                if isinstance(text, str) and (e.span is None or e.span.file == pseudo):
                    # a value given as text (--set, `-- k=v`, a JSON instance): no place in a file to show
                    shown = text if len(text) <= 60 else text[:40] + "…"
                    reason = e.message.removeprefix(f"input `{item.arg}` ").removeprefix("is a constant: ")
                    err = SerqError(f"input `{item.arg}`: `{shown}` is not a constant expression ({reason})",
                                    None, "usage")
                    err.input = item.arg
                    raise err from None
                raise
            value = ConstValue(value.value, item.span, value.inputs | {item.arg})
        else:
            value = self._const_eval(item.default, f"input `{item.arg}`")
        self.consts[item.name] = value
        self.inputs.append(ir.InputValue(name=item.name, arg=item.arg, value=_bound(value.value)))

    def _const_eval(self, e: A.Expr, what: str) -> ConstValue:
        inputs: set[str] = set()

        def ev(x: A.Expr) -> float:
            if isinstance(x, A.Num):
                return x.value
            if isinstance(x, A.Inf):
                return math.inf
            if isinstance(x, A.Ref) and x.is_bare and x.name in self.consts:
                inputs.update(self.consts[x.name].inputs)
                return self.consts[x.name].value
            if isinstance(x, A.Unary):
                v = ev(x.operand)
                return -v if x.op == "-" else float(v == 0)
            if isinstance(x, A.Binary):
                return apply_binary(x.op, ev(x.lhs), ev(x.rhs))
            if isinstance(x, A.Cond):
                t = ev(x.test)
                return ev(x.then) if t != 0 else ev(x.otherwise)
            if isinstance(x, A.Call) and x.fn in C.FUNCTIONS:
                lo, hi, _ = C.FUNCTIONS[x.fn]
                if len(x.args) < lo or (hi is not None and len(x.args) > hi):
                    raise _err(f"`{x.fn}` takes {_arity(lo, hi)} argument(s), given {len(x.args)}", x.span)
                return apply_function(x.fn, [ev(a) for a in x.args])
            if isinstance(x, A.Call) and hasattr(self, "expander") and x.fn in self.expander.definitions:
                return ev(self.expander.expr(x))
            if isinstance(x, A.Ref):
                raise _err(f"{what} is a constant: `{_show_ref(x)}` is not a constant", x.span)
            if isinstance(x, A.Draw):
                raise _err(f"{what} is a constant: it may not draw (~{x.dist})", x.span)
            raise _err(f"{what} is a constant: this is not a constant expression", x.span)

        value = ev(e)
        if math.isnan(value):
            raise _err(f"{what} evaluates to NaN: a constant is a number or inf", e.span)
        if value == -math.inf:  # the IR writes a constant as a number or "inf" (ir.Bound)
            raise _err(f"{what} evaluates to -inf: a constant is a finite number or inf", e.span)
        return ConstValue(value, e.span, frozenset(inputs))

    def _count_value(self, e: A.Expr, what: str = "a count", array: bool = True) -> int:
        """A whole number from 1 to a million; an array's size (`pool kv[n]`) may not come from a supplied input."""
        v = self._const_eval(e, what)
        if array and v.inputs:
            raise _err(f"{what} depends on input(s) {', '.join(sorted(v.inputs))} supplied from outside: "
                       "an input may not change a parse-time array size", e.span)
        if not (v.value == int(v.value) if math.isfinite(v.value) else False) or not 1 <= v.value <= COUNT_LIMIT:
            raise _err(f"{what} is {format_number(v.value)}: a count is a whole number from 1 to a million", e.span)
        return int(v.value)

    # ================================================================ workload
    def _expand_workload(self, w: A.WorkloadDecl) -> A.WorkloadDecl:
        for kind in ("init", "turn", "session"):
            blocks = getattr(w, kind)
            if len(blocks) > 1:
                raise _err(f"a second `{kind}` block: the workload has at most one", w.span)
        return A.WorkloadDecl(
            w.arrivals,
            [self.expander.stmts(b) for b in w.init],
            [self.expander.stmts(b) for b in w.turn],
            [self.expander.stmts(b) for b in w.session],
            w.hidden, w.span)

    def _workload(self, w: A.WorkloadDecl) -> ir.Workload:
        if not w.arrivals:
            raise _err("the workload has no arrivals: write `arrive poisson(rate);`, `renewal(gap)`, "
                       "`closed(n)`, `batch(n)`, `none`, or `trace \"file.csv\";`", w.span)
        laws = [a for a in w.arrivals if a.kind != "trace"]
        traces = [a for a in w.arrivals if a.kind == "trace"]
        if len(laws) > 1:
            raise _err("a second arrival law: the workload has one", laws[1].span)
        if len(traces) > 1:
            raise _err("a second trace: the workload replays one", traces[1].span)
        # `arrive batch(N); trace "f.csv";`: the law's sessions replay the trace's turns; a trace alone
        # is also the arrival law (its sessions at the file's times)
        arrival = self._arrival(laws[0] if laws else traces[0])
        trace = self._arrival(traces[0]) if laws and traces else None
        session = w.session[0] if w.session else None
        if session is not None and not _contains(session, A.Turn):
            raise _err("the session block has no `turn;`: an explicit session submits its turns", w.span)
        return ir.Workload(
            arrival=arrival,
            init=self._block(w.init[0], StmtScope("init")) if w.init else [],
            turn=self._block(w.turn[0], StmtScope("turn")) if w.turn else [],
            session=self._block(session, StmtScope("session")) if session is not None else [ir.TurnStmt()],
            hidden=[n for n, _ in w.hidden],
            trace=trace,
        )

    def _arrival(self, a: A.Arrival):
        if a.kind == "poisson":
            v = self._const_eval(a.arg, "the arrival rate").value
            if not (0 < v < math.inf):
                raise _err(f"poisson({format_number(v)}): the rate is a positive, finite constant", a.span)
            return ir.Poisson(rate=v)
        if a.kind == "renewal":
            gap, t = self._expr(a.arg, M.RENEWAL)
            self._numeric(t, "the renewal gap", a.arg.span)
            folded = fold(gap)
            if folded is not None and not (0 < folded < math.inf):
                raise _err(f"renewal({format_number(folded)}): a gap is positive and finite", a.span)
            return ir.Renewal(gap=gap)
        if a.kind in ("closed", "batch"):
            n = self._count_value(a.arg, f"{a.kind}(n), the sessions", array=False)
            return ir.Closed(sessions=n) if a.kind == "closed" else ir.Batch(sessions=n)
        if a.kind == "none":
            return ir.NoArrivals()
        path = Path(self.unit.path).parent / a.file
        if not path.is_file():
            raise _err(f'trace "{a.file}": no such file {path}', a.span)
        return ir.Trace(file=a.file, ordered=a.ordered)

    # ================================================================ attributes
    def _collect_attributes(self, w: A.WorkloadDecl, server: list[A.Stmt]) -> None:
        for name in C.BUILTIN_ATTRIBUTES:
            self.attributes[name] = ir.Attribute(name=name, side="builtin")
        if any(a.kind == "trace" for a in w.arrivals):
            for name in C.TRACE_ATTRIBUTES:
                self.attributes[name] = ir.Attribute(name=name, side="builtin", type="size")
        blocks = [("session", b) for b in (*w.init, *w.turn, *w.session)] + [("server", server)]
        for side, body in blocks:
            for s in A.walk_stmts(body):
                if isinstance(s, A.Set):
                    self._attribute(self._set_target(s.target), "number", side, s.span)
                elif isinstance(s, A.SizeDecl):
                    if side != "session":
                        raise _err(f"`Size {s.name}` in the server: a Size is a workload quantity, drawn or set "
                                   "by the session's side; the server computes with `set`", s.span)
                    self._attribute(s.name, "size", side, s.span)
                elif isinstance(s, A.CostDecl):
                    self._attribute(s.name, "cost", side, s.span)
                elif isinstance(s, A.CostFieldsDecl):
                    for fname, _, fspan in s.fields:
                        if self.decls.get(fname, Decl("", fspan)).kind not in ("pool", "stage"):
                            raise _err(f"field `{fname}` of `Cost {s.name}` names no pool or stage: a composite "
                                       "cost has one field per resource", fspan)
                        self._attribute(f"{s.name}.{fname}", "cost", side, fspan)
                        self.attributes[f"{s.name}.{fname}"].resources = [fname]
                elif isinstance(s, A.Choose):
                    self._attribute(s.name, "number", side, s.span)
                elif isinstance(s, A.Observe):
                    self._check_not_supplied(s.name, "an observe", s.span)
                    prior = self.decls.get(s.name)
                    if prior is not None:
                        raise _err(f"observe `{s.name}` has the name of {self._ARTICLE[prior.kind]} declared at "
                                   f"{prior.span}", s.span)
                    self.observes.setdefault(s.name, s.span)
        for name, span in w.hidden:
            if name in C.SCHEDULER_ATTRIBUTES:
                raise _err(f"`hidden {name}`: {name} is set by the scheduler and cannot be hidden", span)
            a = self.attributes.get(name)
            if a is None or a.side not in ("session", "builtin") or name in C.BUILTIN_ATTRIBUTES:
                raise _err(f"`hidden {name}`: {name} is not an attribute the workload draws or sets", span)
            a.hidden = True
        for name, span in self.observes.items():
            if name in self.attributes and self.attributes[name].side != "builtin":
                raise _err(f"observe `{name}` has the name of an attribute the program sets", span)
            self.decls[name] = Decl("observe", span)

    def _set_target(self, target: A.Ref) -> str:
        """A set names an attribute; `E.m` (a mark of engine or queue E) is the attribute `E.m`."""
        if target.is_bare:
            return target.name
        dotted = target.dotted()
        if dotted is not None and len(target.selectors) == 1 and target.name in self.decls \
                and self.decls[target.name].kind == "stage":
            return dotted
        raise _err(f"`set {_show_ref(target)}`: a set names a session attribute (or `E.m`, a mark of a stage E)",
                   target.span)

    def _attribute(self, name: str, type_: str, side: str, span: A.Span) -> None:
        if name in C.RESERVED_CONTEXT or name in C.SUPPLIED_NAMES:
            raise _err(f"`set {name}`: `{name}` is a name the language supplies, not an attribute", span)
        prior = self.decls.get(name)
        if prior is not None:
            raise _err(f"attribute `{name}` has the name of {self._ARTICLE[prior.kind]} declared at {prior.span}",
                       span)
        a = self.attributes.get(name)
        if a is None:
            self.attributes[name] = ir.Attribute(name=name, type=type_, side=side)
            return
        if a.side == "builtin":
            return  # a program may set a built-in attribute
        if a.side != side:
            if a.side == "session":
                raise _err(f"the server sets `{name}`, which the workload sets: a workload attribute is "
                           "read-only to the server", span)
            raise _err(f"the workload sets `{name}`, which the server sets: an attribute has one side", span)
        if type_ != "number" and a.type != type_:
            raise _err(f"`{name}` is declared both {a.type} and {type_}", span)
        if type_ != "number":
            a.type = type_

    # ================================================================ pools and stages
    def _pool_shell(self, p: A.PoolDecl) -> ir.Pool:
        count = self._count_value(p.count, f"the size of pool array `{p.name}`") if p.count is not None else 1
        return ir.Pool(name=p.name, count=count, admit_via=p.admit_via, memory_of=p.memory_of, at=self._loc(p.span))

    def _pool_options(self, p: A.PoolDecl) -> None:
        pool = self.pools[p.name]
        seen: dict[str, A.Span] = {}
        groups = {"cap": "cap", "block": "block", "evict_lru": "evict", "evict_by": "evict",
                  "preempt_none": "preempt", "preempt_lifo": "preempt", "preempt_by": "preempt",
                  "queue_fifo": "queue", "queue_by": "queue", "reserve_held": "reserve held", "spill": "spill"}
        for o in p.options:
            g = groups[o.kind]
            if g in seen:
                raise _err(f"pool `{p.name}` gives `{g}` twice (first at {seen[g]})", o.span)
            seen[g] = o.span
            if o.kind == "cap":
                v = self._const_eval(o.args[0], f"the cap of pool `{p.name}`").value
                if v < 0:
                    raise _err(f"the cap of pool `{p.name}` is {format_number(v)}: a capacity is not negative",
                               o.span)
                pool.cap = _bound(v)
            elif o.kind == "block":
                v = self._const_eval(o.args[0], f"the block of pool `{p.name}`").value
                if not (math.isfinite(v) and v == int(v) and v >= 1):
                    raise _err(f"the block of pool `{p.name}` is {format_number(v)}: a block is a whole number "
                               "of units, at least 1", o.span)
                pool.block = int(v)
            elif o.kind == "evict_lru":
                pool.evict = ir.EvictLru()
            elif o.kind == "evict_by":
                pool.evict = ir.EvictBy(keys=[self._numeric_expr(k, M.EVICT_KEY, "an eviction key") for k in o.args])
            elif o.kind == "preempt_none":
                pool.preempt = ir.PreemptNone()
            elif o.kind == "preempt_lifo":
                # vLLM's running[-1]: the candidate admitted last
                pool.preempt = ir.PreemptBy(keys=[ir.Unary(op="neg", arg=ir.Ctx(var="admission"))], requeue="head")
            elif o.kind == "preempt_by":
                pool.preempt = ir.PreemptBy(
                    keys=[self._numeric_expr(k, M.PREEMPT_KEY, "a preemption key") for k in o.args],
                    requeue=o.requeue or "head")
            elif o.kind == "queue_fifo":
                pool.queue = ir.QueueFifo()
            elif o.kind == "queue_by":
                pool.queue = ir.QueueBy(keys=[self._numeric_expr(k, M.QUEUE_KEY, "a queue key") for k in o.args])
            elif o.kind == "reserve_held":
                pool.reserve_held = True
            elif o.kind == "spill":
                target, stage, cost, when = o.spill  # type: ignore[misc]
                tref = self._pool_ref(target, M.SPILL)
                if tref.pool == p.name:
                    raise _err(f"pool `{p.name}` spills to itself", target.span)
                sref = self._stage_ref(stage, M.SPILL)
                cost_ir, ct = self._expr(cost, M.SPILL)
                self._amount_type(ct, {sref.stage}, f"the spill cost of pool `{p.name}`", cost.span)
                pool.spill = ir.Spill(pool=tref, stage=sref, cost=cost_ir,
                                      when=self._numeric_expr(when, M.SPILL, "a spill predicate"))

    def _stage(self, s: A.StageDecl) -> ir.Stage:
        count = self._count_value(s.count, f"the size of stage array `{s.name}`") if s.count is not None else 1
        k = s.kind
        if k.kind == "fifo":
            servers = self._count_value(k.arg, f"the servers of fifo stage `{s.name}`") if k.arg is not None else 1
            service = ir.Fifo(servers=servers)
        elif k.kind == "ps":
            service = ir.Ps(capacity=self._numeric_expr(k.arg, M.PS_CAPACITY, f"the capacity of ps stage `{s.name}`"))
            folded = fold(service.capacity)
            if folded is not None and not folded > 0:
                raise _err(f"ps stage `{s.name}` has capacity {format_number(folded)}: it must be above 0", k.arg.span)
        else:
            service = ir.Ps(capacity=ir.Ctx(var="present"))  # delay is ps(present)
        return ir.Stage(name=s.name, count=count, service=service, at=self._loc(s.span))

    def _step_shell(self, s: A.StepStageDecl) -> ir.Stage:
        count = self._count_value(s.count, f"the size of engine family `{s.name}`") if s.count is not None else 1
        registers = []
        for name, value, span in s.registers:
            self._check_not_supplied(name, "a register", span)
            v = self._const_eval(value, f"register `{name}`").value
            if not math.isfinite(v):
                raise _err(f"register `{name}` starts at {format_number(v)}: a register is a finite number", span)
            registers.append(ir.Register(name=name, init=v))
        service = ir.Step(budget=ir.Num(value=0), cost=ir.Num(value=0), registers=registers)
        return ir.Stage(name=s.name, count=count, service=service, at=self._loc(s.span))

    def _step(self, s: A.StepStageDecl) -> None:
        """An engine's step stage, its expressions read at the moments of an iteration."""
        step = self.stages[s.name].service
        assert isinstance(step, ir.Step)
        step.budget = self._numeric_expr(s.budget, M.STEP_BUDGET, f"the tokens cap of `{s.name}`", s.name)
        step.cost = self._numeric_expr(s.cost, M.STEP_COST, f"the execute of `{s.name}`", s.name)
        if s.chunk is not None:
            step.chunk = self._numeric_expr(s.chunk, M.STEP_CHUNK, f"the each at most of `{s.name}`", s.name)
        if s.granule is not None:
            step.granule = self._numeric_expr(s.granule, M.STEP_CHUNK, f"the granule of `{s.name}`", s.name)
        kind, keys = s.serve
        if kind == "exclusive_prefill":
            step.serve = ir.ServeExclusivePrefill()
        else:
            step.serve = ir.ServeBy(keys=[self._numeric_expr(k, M.STEP_SERVE, "a serve key", s.name) for k in keys])
        if s.iteration is not None:
            step.iteration = [self._iter_stmt(x, s.name) for x in s.iteration]

    def _iter_stmt(self, x, stage: str):
        if isinstance(x, A.SAdvance):
            return ir.IterServe(only=self._numeric_expr(x.only, M.STEP_SERVE, "an only predicate", stage)
                                if x.only is not None else None)
        if isinstance(x, A.SAdmit):
            return ir.IterAdmit(
                only=self._numeric_expr(x.only, M.STEP_SERVE, "an only predicate", stage) if x.only is not None else None,
                gate=self._numeric_expr(x.guard, M.STEP_GUARD, "an admit guard", stage) if x.guard is not None else None)
        if isinstance(x, A.SBranch):
            return ir.IterBranch(test=self._numeric_expr(x.test, M.STEP_GUARD, "a schedule's branch guard", stage),
                                 then=[self._iter_stmt(y, stage) for y in x.then],
                                 otherwise=[self._iter_stmt(y, stage) for y in (x.otherwise or [])])
        if isinstance(x, A.SSet):
            return ir.IterSet(name=x.name, value=self._numeric_expr(x.value, M.STEP_GUARD, "a register's value", stage))
        raise _err("not a schedule statement", getattr(x, "span", None))  # pragma: no cover

    def _ref_index(self, ref: A.Ref, count: int, what: str, moment: M) -> ir.Expr | None:
        idx = [s for s in ref.selectors if isinstance(s, A.IndexSel)]
        fields_ = [s for s in ref.selectors if isinstance(s, A.FieldSel)]
        if fields_:
            raise _err(f"`{_show_ref(ref)}`: {what} `{ref.name}` has no member `{fields_[0].name}`", fields_[0].span)
        if len(idx) > 1:
            raise _err(f"`{_show_ref(ref)}`: {what} `{ref.name}` takes one index", ref.span)
        if not idx:
            if count > 1:
                raise _err(f"{what} `{ref.name}` is an array of {count}: name a member, `{ref.name}[i]`", ref.span)
            return None
        e, t = self._expr(idx[0].index, moment)
        self._numeric(t, "an index", idx[0].span)
        v = fold(e)
        if v is not None:
            if not (math.isfinite(v) and v == int(v) and 0 <= v < count):
                raise _err(f"`{_show_ref(ref)}`: index {format_number(v)} is out of range: {what} `{ref.name}` "
                           f"has members 0 to {count - 1}", idx[0].span)
            return ir.Num(value=int(v))
        return e

    def _pool_ref(self, ref: A.Ref, moment: M) -> ir.PoolRef:
        if ref.name not in self.pools:
            raise _err(f"`{ref.name}` is not a pool{self._what_is(ref.name)}", ref.span)
        return ir.PoolRef(pool=ref.name, index=self._ref_index(ref, self.pools[ref.name].count, "pool", moment))

    def _stage_ref(self, ref: A.Ref, moment: M) -> ir.StageRef:
        if ref.name not in self.stages:
            raise _err(f"`{ref.name}` is not a stage{self._what_is(ref.name)}", ref.span)
        return ir.StageRef(stage=ref.name, index=self._ref_index(ref, self.stages[ref.name].count, "stage", moment))

    def _what_is(self, name: str) -> str:
        d = self.decls.get(name)
        if d is not None:
            return f" (it is {self._ARTICLE[d.kind]}, declared at {d.span})"
        if name in self.attributes:
            return " (it is a session attribute)"
        return " declared in this program"

    # ================================================================ expressions
    def _numeric_expr(self, e: A.Expr, moment: M, what: str, stage: str | None = None) -> ir.Expr:
        out, t = self._expr(e, moment, stage)
        self._numeric(t, what, e.span)
        return out

    def _numeric(self, t: Type, what: str, span: A.Span) -> None:
        if t is not None:
            raise _err(f"{what} is a number, not {_type_name(t)}", span)

    def _expr(self, e: A.Expr, moment: M, stage: str | None = None) -> tuple[ir.Expr, Type]:
        out, t = self._expr_inner(e, moment, stage)
        self.spans[id(out)] = e.span
        return out, t

    def _expr_inner(self, e: A.Expr, moment: M, stage: str | None) -> tuple[ir.Expr, Type]:
        if isinstance(e, A.Num):
            return ir.Num(value=e.value), None
        if isinstance(e, A.Inf):
            return ir.Inf(), None
        if isinstance(e, A.Ref):
            return self._name(e, moment, stage)
        if isinstance(e, A.Unary):
            arg, t = self._expr(e.operand, moment, stage)
            if e.op == "!":
                self._numeric(t, "the operand of `!`", e.span)
                return ir.Unary(op="not", arg=arg), None
            return ir.Unary(op="neg", arg=arg), t
        if isinstance(e, A.Binary):
            lhs, lt = self._expr(e.lhs, moment, stage)
            rhs, rt = self._expr(e.rhs, moment, stage)
            return ir.Binary(op=_BINOPS[e.op], lhs=lhs, rhs=rhs), self._binary_type(e, lt, rt)
        if isinstance(e, A.Cond):
            test, tt = self._expr(e.test, moment, stage)
            self._numeric(tt, "a condition", e.test.span)
            a, at = self._expr(e.then, moment, stage)
            b, bt = self._expr(e.otherwise, moment, stage)
            if at != bt:
                raise _err(f"the arms of `? :` are {_type_name(at)} and {_type_name(bt)}", e.span)
            return ir.Cond(test=test, then=a, otherwise=b), at
        if isinstance(e, A.Draw):
            return self._draw(e, moment, stage), None
        if isinstance(e, A.Call):
            return self._call(e, moment, stage)
        if isinstance(e, A.Aggregate):  # pragma: no cover - expanded before linking
            raise _err("an aggregate survived expansion", e.span)
        raise _err("not an expression", getattr(e, "span", None))  # pragma: no cover

    def _binary_type(self, e: A.Binary, lt: Type, rt: Type) -> Type:
        if e.op in ("+", "-"):
            if lt == rt:
                return lt
            raise _err(f"`{e.op}` of {_type_name(lt)} and {_type_name(rt)}: add costs of the same resources, "
                       "or convert with cost(resource, …) after the arithmetic", e.span)
        if e.op == "*":
            if lt is not None and rt is not None:
                raise _err("a cost times a cost is no cost", e.span)
            return lt if lt is not None else rt
        if e.op in ("/", "%"):
            if rt is not None:
                raise _err(f"`{e.op}` by {_type_name(rt)}: a cost divides by a number", e.span)
            return lt
        if lt != rt:
            raise _err(f"`{e.op}` compares {_type_name(lt)} with {_type_name(rt)}", e.span)
        return None

    def _name(self, e: A.Ref, moment: M, stage: str | None = None) -> tuple[ir.Expr, Type]:
        name = e.name
        if not e.is_bare:
            dotted = e.dotted()
            if dotted is not None and dotted in self.attributes:
                return self._attr(dotted, e, moment)
            reg = self._register(e, moment, stage)
            if reg is not None:
                return reg, None
            if name in ("running", "waiting", "batch"):
                raise _err(f"`{_show_ref(e)}` is an engine's value, read in an engine's clauses", e.span)
            if name in self.pools or name in self.stages:
                raise _err(f"`{_show_ref(e)}` is a {'pool' if name in self.pools else 'stage'}, not a value: "
                           f"read it with an observable, e.g. used({_show_ref(e)})", e.span)
            raise _err(f"`{_show_ref(e)}`: `{name}` has no members or indices", e.span)
        if name in C.CONTEXTUAL_NAMES and moment == M.EVICT_KEY:
            return self._entry_value(name, e), None
        if name in C.RESERVED_CONTEXT:
            desc, moments = C.CONTEXT_VARIABLES[name]
            if moment not in moments:
                allowed = ", ".join(sorted(m.value for m in moments))
                raise _err(f"`{name}` ({desc}) is not available in {_moment_text(moment)}; it is read in: {allowed}",
                           e.span)
            return ir.Ctx(var=name), None
        if name in self.consts:
            v = self.consts[name].value
            return (ir.Inf() if v == math.inf else ir.Num(value=v)), None
        reg = self._header_register(e, moment)
        if name in self.attributes:
            if reg is not None:
                raise _err(f"`{name}` is an attribute and a register of engine `{self.header_engine}`, whose "
                           f"pool this hold waits in: write `{self.header_engine}.{name}` for the register",
                           e.span)
            return self._attr(name, e, moment)
        if reg is not None:
            return reg, None
        if name in self.pools or name in self.stages:
            kind = "pool" if name in self.pools else "stage"
            raise _err(f"`{name}` is a {kind}, not a value: read it with an observable, e.g. "
                       f"{'used' if kind == 'pool' else 'busy'}({name})", e.span)
        if name in self.observes:
            raise _err(f"`{name}` is an observation, not an attribute: a claim at end reads it as total({name}), …",
                       e.span)
        d = self.decls.get(name)
        if d is not None:
            raise _err(f"`{name}` is {self._ARTICLE[d.kind]}, not a value here", e.span)
        if name in C.TRACE_ATTRIBUTES:
            raise _err(f"`{name}` is a trace attribute: it exists only with `trace \"file.csv\";`", e.span)
        if name in C.CONTEXTUAL_NAMES:
            raise _err(_entry_value_elsewhere(name, moment), e.span)
        raise _err(f"unknown name `{name}`", e.span)

    def _entry_value(self, name: str, e: A.Ref) -> ir.Ctx:
        """`size` or `waiting` in an eviction key: the cached entry's. A program that declares `size`
        itself, as a value (a let, an input, an attribute), does not read it there: which one the key
        means would be a guess. (An observation, a gauge, a pool or a def of that name is no value there.)"""
        if name in self.consts or name in self.attributes:
            d = self.decls.get(name)
            what = f"{self._ARTICLE[d.kind]} declared at {d.span}" if d is not None and d.kind in self._ARTICLE \
                else ("a constant" if name in self.consts else "a session attribute")
            raise _err(f"`{name}` in an eviction key is the cached entry's ({C.CONTEXT_VARIABLES[name][0]}), and "
                       f"the program also has `{name}`, {what}: rename the program's `{name}`", e.span)
        return ir.Ctx(var=name)

    def _header_register(self, e: A.Ref, moment: M) -> ir.Expr | None:
        """A bare register name in the header of a hold whose first pool engine E admits: `E.NAME`."""
        E = self.header_engine
        if moment != M.HOLD_HEADER or E is None or E not in self.stages:
            return None
        return self._register(A.Ref(E, [A.FieldSel(e.name, e.span)], e.span), moment, None)

    def _register(self, e: A.Ref, moment: M, stage: str | None) -> ir.Expr | None:
        """`E.NAME`: a register of step stage E, read by its engine, a gauge, a claim, a pool's key, a header."""
        if len(e.selectors) != 1 or not isinstance(e.selectors[0], A.FieldSel) or e.name not in self.stages:
            return None
        service = self.stages[e.name].service
        if not isinstance(service, ir.Step):
            return None
        name = e.selectors[0].name
        if name not in {r.name for r in service.registers}:
            return None
        if moment not in C.REGISTER_MOMENTS:
            raise _err(f"register `{e.name}.{name}` is not read in {_moment_text(moment)}", e.span)
        if stage is not None and stage != e.name and moment in (M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE,
                                                                 M.STEP_GUARD, M.STEP_COST):
            raise _err(f"register `{e.name}.{name}` is read only by its own engine", e.span)
        return ir.Reg(stage=e.name, name=name)

    def _attr(self, name: str, e: A.Ref, moment: M) -> tuple[ir.Expr, Type]:
        if moment not in C.ATTRIBUTE_MOMENTS:
            raise _err(f"`{name}` is a session attribute; {_moment_text(moment)} reads no session", e.span)
        a = self.attributes[name]
        if moment in C.SCHEDULER_MOMENTS and a.hidden:
            raise _err(f"`{name}` is hidden: {_moment_text(moment)} is the scheduler's, which may not read it",
                       e.span)
        t: Type = frozenset(a.resources) if a.type == "cost" else None
        return ir.Attr(name=name), t

    def _draw(self, e: A.Draw, moment: M, stage: str | None) -> ir.Expr:
        if e.dist not in C.DISTRIBUTIONS:
            raise _err(f"unknown distribution `~{e.dist}` (the language has: "
                       f"{', '.join('~' + d for d in C.DISTRIBUTIONS)})", e.span)
        if moment in C.NO_DRAW:
            raise _err(f"`~{e.dist}` draws, and {_moment_text(moment)} may not draw: it is read again and must "
                       "give the same number; sample into an attribute first", e.span)
        arity, _ = C.DISTRIBUTIONS[e.dist]
        if len(e.args) != arity:
            raise _err(f"`~{e.dist}` takes {arity} parameter(s), given {len(e.args)}", e.span)
        args = []
        for a in e.args:
            x, t = self._expr(a, moment, stage)
            self._numeric(t, f"a parameter of ~{e.dist}", a.span)
            args.append(x)
        values = [fold(a) for a in args]
        _check_distribution(e, values)
        return ir.Draw(dist=e.dist, args=args)

    def _call(self, e: A.Call, moment: M, stage: str | None) -> tuple[ir.Expr, Type]:
        fn = e.fn
        if fn == "cost":
            if len(e.args) < 2:
                raise _err("`cost(resource, …, e)` names at least one pool or stage, then the amount", e.span)
            resources = []
            for r in e.args[:-1]:
                if not (isinstance(r, A.Ref) and r.is_bare and (r.name in self.pools or r.name in self.stages)):
                    raise _err("`cost(…)`: each argument before the amount names a pool or a stage", r.span)
                if r.name in resources:
                    raise _err(f"`cost(…)` names `{r.name}` twice", r.span)
                resources.append(r.name)
            arg, t = self._expr(e.args[-1], moment, stage)
            if t is not None:
                raise _err(f"`cost(…)` of {_type_name(t)}: the amount is a plain number", e.args[-1].span)
            return ir.CostOf(resources=resources, arg=arg), frozenset(resources)
        if fn in C.FUNCTIONS:
            lo, hi, _ = C.FUNCTIONS[fn]
            if len(e.args) < lo or (hi is not None and len(e.args) > hi):
                raise _err(f"`{fn}` takes {_arity(lo, hi)} argument(s), given {len(e.args)}", e.span)
            pairs = [self._expr(a, moment, stage) for a in e.args]
            types = {t for _, t in pairs}
            if fn in ("min", "max"):
                if len(types) > 1:
                    raise _err(f"`{fn}` of {' and '.join(sorted(_type_name(t) for t in types))}", e.span)
                t = types.pop()
            else:
                for (_, t), a in zip(pairs, e.args):
                    self._numeric(t, f"an argument of {fn}", a.span)
                t = None
            return ir.Call(fn=fn, args=[x for x, _ in pairs]), t
        if fn in C.POOL_OBSERVABLES or fn in C.STAGE_OBSERVABLES:
            return self._observable(e, moment, stage), None
        if fn in C.OBSERVED_AGGREGATES:
            if moment != M.CLAIM_END:
                raise _err(f"`{fn}(…)` aggregates a run's observations: only a claim `at end` reads it", e.span)
            if len(e.args) != 1 or not (isinstance(e.args[0], A.Ref) and e.args[0].is_bare):
                raise _err(f"`{fn}(o)` names one observation", e.span)
            name = e.args[0].name
            if name not in self.observes and name not in C.CLIENT_METRICS:
                raise _err(f"`{fn}({name})`: `{name}` is not observed (observe it, or read ttft, tpot, response)",
                           e.args[0].span)
            return ir.Observed(fn=fn, name=name), None
        if fn in self.expander.definitions:  # pragma: no cover - expanded before linking
            raise _err(f"def `{fn}` survived expansion", e.span)
        if fn in self.stages or fn in self.pools:
            raise _err(f"`{fn}(…)`: `{fn}` is not a function (an engine's request is called as a statement)", e.span)
        raise _err(f"unknown function `{fn}`", e.span)

    def _observable(self, e: A.Call, moment: M, stage: str | None) -> ir.Expr:
        fn = e.fn
        if moment not in C.OBSERVABLE_MOMENTS:
            raise _err(f"`{fn}(…)` reads the deployment's state, which {_moment_text(moment)} may not read", e.span)
        if fn in C.SESSION_OBSERVABLES and moment not in (M.SESSION, M.SERVER, M.HOLD_HEADER, M.HOLD_CACHE):
            raise _err(f"`{fn}(…)` reads the session's own prefix: {_moment_text(moment)} has no session", e.span)
        if fn in C.MOVING_OBSERVABLES and moment in (M.GAUGE, M.CLAIM_ITERATION, M.STEP_SERVE):
            raise _err(f"`{fn}(…)` moves between events: {_moment_text(moment)} may not read it", e.span)
        if fn in C.PLANNING_OBSERVABLES and moment in (M.GAUGE, M.CLAIM_ITERATION):
            raise _err(f"`{fn}(…)` plans an iteration: {_moment_text(moment)} may not read it", e.span)
        if len(e.args) != 1 or not isinstance(e.args[0], A.Ref):
            what = "pool" if fn in C.POOL_OBSERVABLES else "stage"
            raise _err(f"`{fn}(…)` takes one {what}", e.span)
        ref = e.args[0]
        if fn in C.POOL_OBSERVABLES:
            pref = self._pool_ref(ref, moment)
            if moment in (M.GAUGE, M.CLAIM_ITERATION) and pref.index is not None and not isinstance(pref.index, ir.Num):
                raise _err(f"`{fn}({_show_ref(ref)})`: {_moment_text(moment)} names a member by a number", ref.span)
            return ir.PoolObs(fn=fn, pool=pref)
        sref = self._stage_ref(ref, moment)
        if moment in (M.GAUGE, M.CLAIM_ITERATION) and sref.index is not None and not isinstance(sref.index, ir.Num):
            raise _err(f"`{fn}({_show_ref(ref)})`: {_moment_text(moment)} names a member by a number", ref.span)
        if fn == "budget_left":
            if not isinstance(self.stages[sref.stage].service, ir.Step):
                raise _err(f"`budget_left({_show_ref(ref)})`: `{sref.stage}` is not a step stage", ref.span)
            if stage == sref.stage and moment in (M.STEP_BUDGET, M.STEP_CHUNK):
                raise _err(f"`budget_left({sref.stage})` plans {sref.stage}'s iteration: its own "
                           f"{_moment_text(moment)} may not read it", e.span)
        return ir.StageObs(fn=fn, stage=sref)

    def _amount_type(self, t: Type, needed: set[str], what: str, span: A.Span) -> None:
        names = ", ".join(sorted(needed))
        if t is None:
            raise _err(f"{what} is a plain number; an amount is a cost: write cost({names}, …)", span)
        missing = needed - t
        if missing:
            raise _err(f"{what} is {_type_name(t)}, not a cost of {', '.join(sorted(missing))}", span)

    # ================================================================ statements
    def _block(self, body: list[A.Stmt], scope: StmtScope) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, A.CostFieldsDecl):
                self._side_allows(s, scope)
                out.extend(self._cost_fields(s, scope))
            else:
                out.append(self._stmt(s, scope))
        return out

    def _side_allows(self, s: A.Stmt, scope: StmtScope) -> None:
        if scope.side in ("init", "turn") and not isinstance(
                s, (A.SizeDecl, A.CostDecl, A.CostFieldsDecl, A.Set, A.Observe, A.Branch, A.Choose)):
            raise _err(f"the workload's {scope.side} block holds Size, set, observe, branch and choose; "
                       f"{_stmt_name(s)} belongs in the session or the server", s.span)

    def _moment(self, scope: StmtScope) -> M:
        return M.SESSION if scope.side in ("session", "init", "turn") else M.SERVER

    def _stmt(self, s: A.Stmt, scope: StmtScope) -> ir.Stmt:
        out = self._stmt_inner(s, scope)
        out.at = self._loc(s.span)
        self.spans[id(out)] = s.span
        return out

    def _stmt_inner(self, s: A.Stmt, scope: StmtScope) -> ir.Stmt:
        moment = self._moment(scope)
        self._side_allows(s, scope)
        if isinstance(s, A.Turn):
            if scope.side != "session":
                raise _err("`turn;` in the server: a turn is the session's; the server's statements run for each turn",
                           s.span)
            if scope.in_fork:
                raise _err("`turn;` in a fork: a leg may not turn, end, fork or join", s.span)
            return ir.TurnStmt()
        if isinstance(s, (A.Set, A.SizeDecl, A.CostDecl)):
            name = self._set_target(s.target) if isinstance(s, A.Set) else s.name
            value, t = self._expr(s.value, moment)
            a = self.attributes[name]
            if isinstance(s, A.CostDecl):
                if t is None:
                    raise _err(f"`Cost {name} = …` must be a cost: write cost(resource, …)", s.value.span)
                if a.resources and set(a.resources) != t:
                    raise _err(f"`Cost {name}` is {_type_name(frozenset(a.resources))} elsewhere, here {_type_name(t)}",
                               s.span)
                a.resources = sorted(t)
            elif a.type == "cost":
                if t is None or (a.resources and set(a.resources) != t):
                    raise _err(f"`{name}` is {_type_name(frozenset(a.resources))}; this sets it to {_type_name(t)}",
                               s.value.span)
            elif t is not None:
                raise _err(f"`set {name} = …` of {_type_name(t)}: declare it with `Cost {name} = …`", s.value.span)
            if any(isinstance(n, A.Call) and n.fn in C.POOL_OBSERVABLES | C.STAGE_OBSERVABLES.keys()
                   for n in walk_expr(s.value)):
                call = next(n for n in walk_expr(s.value)
                            if isinstance(n, A.Call) and n.fn in C.POOL_OBSERVABLES | C.STAGE_OBSERVABLES.keys())
                self.live_sets.setdefault(name, (s.span, f"{call.fn}(…)"))
            return ir.SetStmt(name=name, value=value)
        if isinstance(s, A.Observe):
            value, t = self._expr(s.value, moment)
            self._numeric(t, f"observe `{s.name}`", s.value.span)
            return ir.ObserveStmt(name=s.name, value=value)
        if isinstance(s, A.Hold):
            return self._hold(s, scope)
        if isinstance(s, (A.Grow, A.Load)):
            word = "grow" if isinstance(s, A.Grow) else "load"
            pref = self._pool_ref(s.pool, moment)
            self._enclosing_hold(pref, s.pool, scope, f"`{word} {_show_ref(s.pool)}`")
            amount, t = self._expr(s.amount, moment)
            self._amount_type(t, {pref.pool}, f"the amount of `{word} {_show_ref(s.pool)}`", s.amount.span)
            self._check_amount(amount, f"the amount of `{word} {_show_ref(s.pool)}`", s.amount.span)
            return (ir.GrowStmt if word == "grow" else ir.LoadStmt)(pool=pref, amount=amount)
        if isinstance(s, A.Drop):
            return ir.DropStmt(pool=self._pool_ref(s.pool, moment))
        if isinstance(s, A.Release):
            pref = self._pool_ref(s.pool, moment)
            key = _ref_key(pref)
            if not any(k == key for k, _, _ in scope.holds):
                self.release_outside.append((key, s.span, _show_ref(s.pool)))
            return ir.ReleaseStmt(pool=pref)
        if isinstance(s, A.Run):
            return self._run(s, scope)
        if isinstance(s, A.Branch):
            test, t = self._expr(s.test, moment)
            self._numeric(t, "a branch guard", s.test.span)
            v = fold(test)
            if v is not None and v not in (0, 1):
                raise _err(f"the branch guard is the constant {format_number(v)}: a guard is 0 or 1", s.test.span)
            return ir.BranchStmt(test=test, then=self._block(s.then, scope),
                                 otherwise=self._block(s.otherwise or [], scope))
        if isinstance(s, A.While):
            test, t = self._expr(s.test, moment)
            self._numeric(t, "a while guard", s.test.span)
            v = fold(test)
            if v is not None and v not in (0, 1):
                raise _err(f"the while guard is the constant {format_number(v)}: a guard is 0 or 1", s.test.span)
            return ir.WhileStmt(test=test, body=self._block(s.body, scope))
        if isinstance(s, A.Loop):
            return ir.LoopStmt(body=self._block(s.body, scope))
        if isinstance(s, A.Fork):
            if scope.in_fork:
                raise _err("`fork` in a fork: a leg may not turn, end, fork or join", s.span)
            if scope.preemptible:
                raise _err("`fork` inside a hold that may be preempted: the hold would run again and fork twice",
                           s.span)
            self.forks.append(s.span)
            return ir.ForkStmt(body=self._block(s.body, scope.inner(in_fork=True, holds=[])))
        if isinstance(s, A.Join):
            if scope.in_fork:
                raise _err("`join` in a fork: a leg may not turn, end, fork or join", s.span)
            self.joins += 1
            return ir.JoinStmt()
        if isinstance(s, A.Choose):
            count_ir, t = self._expr(s.count, moment)
            self._numeric(t, "the count of choose", s.count.span)
            v = fold(count_ir)
            if v is not None and not (math.isfinite(v) and v == int(v) and 1 <= v <= COUNT_LIMIT):
                raise _err(f"`choose {s.name} in {format_number(v)}`: the count is a whole number from 1 to a million",
                           s.count.span)
            keys = []
            for k in s.keys:
                key, kt = self._expr(k, moment)
                self._numeric(kt, "a choose key", k.span)
                keys.append(key)
            return ir.ChooseStmt(name=s.name, count=count_ir, keys=keys)
        if isinstance(s, A.End):
            if scope.in_fork:
                raise _err("`end;` in a fork: a leg may not turn, end, fork or join", s.span)
            if scope.side == "server" and scope.holds:
                raise _err("`end;` inside a hold in the server: a server ends a request outside any hold", s.span)
            return ir.EndStmt()
        if isinstance(s, A.CallStmt):
            raise _err(f"`{s.name}(…);` calls no def of statements (an engine's request is vocabulary, "
                       "lowered by `serq.lower`)", s.span)
        if isinstance(s, A.EntryCall):
            if scope.side == "session":
                raise _err(f"`{_show_ref(s.queue)}.{s.verb}(…)` in the session: a queue's entry is called by the server",
                           s.span)
            self._vocabulary(f"the queue entry call `{_show_ref(s.queue)}.{s.verb}(…)`", s.span)
        if isinstance(s, (A.Mark, A.Transfer, A.Tool, A.RequestRun, A.RequestAdmission, A.RequestCache)):
            self._vocabulary(_stmt_name(s), s.span)
        raise _err(f"{_stmt_name(s)} does not stand here", s.span)  # pragma: no cover

    def _cost_fields(self, s: A.CostFieldsDecl, scope: StmtScope) -> list[ir.Stmt]:
        """`Cost x = { R: e, … }`: one scalar attribute `x.R`, a cost of R, per field, in written order."""
        out: list[ir.Stmt] = []
        for fname, value, fspan in s.fields:
            v, t = self._expr(value, self._moment(scope))
            self._numeric(t, f"field `{fname}` of `Cost {s.name}` (an amount in {fname}'s units)", value.span)
            stmt = ir.SetStmt(name=f"{s.name}.{fname}", value=ir.CostOf(resources=[fname], arg=v),
                              at=self._loc(fspan))
            self.spans[id(stmt)] = fspan
            out.append(stmt)
        return out

    def _loc(self, span: A.Span) -> ir.Loc:
        """A statement's place in the IR: the file relative to the program's folder, so that the IR
        does not depend on where `serq` was run from."""
        base = Path(self.unit.path).parent
        try:
            file = Path(span.file).relative_to(base).as_posix()
        except ValueError:
            file = Path(span.file).name
        return ir.Loc(file=file, line=span.line, col=span.col)

    def _check_amount(self, amount: ir.Expr, what: str, span: A.Span) -> None:
        v = fold(amount)
        if v is not None and (math.isnan(v) or v < 0):
            raise _err(f"{what} is the constant {format_number(v)}: an amount is not negative and not NaN", span)

    def _enclosing_hold(self, pref: ir.PoolRef, ref: A.Ref, scope: StmtScope, what: str) -> None:
        key = _ref_key(pref)
        if not any(k == key for k, _, _ in scope.holds):
            held = ", ".join(sorted({_key_text(k) for k, _, _ in scope.holds})) or "none"
            raise _err(f"{what} stands inside a hold of `{_show_ref(ref)}` (the holds around it: {held})", ref.span)

    def _hold(self, s: A.Hold, scope: StmtScope) -> ir.HoldStmt:
        names = ", ".join(_show_ref(p.pool) for p in s.pools)
        # a header whose first pool an engine admits reads that engine's registers bare, as its clauses do
        first = s.pools[0].pool.name if s.pools else None
        self.header_engine = self.pools[first].admit_via if first in self.pools else None
        try:
            pools, keys, header_attrs, reuse = self._hold_header(s)
        finally:
            self.header_engine = None
        for name, span in header_attrs:
            self.header_reads.append((name, span, names))
        needed = {p.pool.pool for p in pools}
        preemptible = scope.preemptible or any(
            isinstance(self.pools[p.pool.pool].preempt, ir.PreemptBy) for p in pools)
        inner = scope.inner(holds=scope.holds + [(k, None, s) for k in keys], preemptible=preemptible)
        if s.cache is None:
            for n in _stmt_refs(s.body):
                if n.is_bare and n.name == "cached":
                    raise _err("this hold has no `cache`, so `cached` is 0 in its body: a hold without cache "
                               "leaves the prefix alone (write `cache (…)` to take part in the prefix cache)", n.span)
        index_attrs = {a for hp in pools if hp.pool.index is not None for a in attrs_read(hp.pool.index)}
        if index_attrs:
            for st in A.walk_stmts(s.body):
                target = (st.target.name if isinstance(st, A.Set) else st.name if isinstance(st, A.Choose) else None)
                if target in index_attrs:
                    raise _err(f"the hold's body changes `{target}`, which the hold's index reads: "
                               "the index must name one member throughout", st.span)
        body = self._block(s.body, inner)
        cache = None
        if s.cache is not None:
            cache, ct = self._expr(s.cache, M.HOLD_CACHE)
            self._amount_type(ct, needed, "the cache of the hold", s.cache.span)
            self._check_amount(cache, "the cache of the hold", s.cache.span)
        lease = None
        if s.lease is not None:
            lref = self._pool_ref(s.lease[0], M.LEASE)
            if _ref_key(lref) not in keys:
                raise _err(f"`lease {_show_ref(s.lease[0])}` names a pool this hold does not hold", s.lease[0].span)
            duration, dt = self._expr(s.lease[1], M.LEASE)
            self._numeric(dt, "a lease's duration (seconds)", s.lease[1].span)
            self._check_amount(duration, "a lease's duration", s.lease[1].span)
            lease = ir.Lease(pool=lref, duration=duration)
            self.lease_pools.add(_ref_key(lref))
        return ir.HoldStmt(pools=pools, reuse=reuse, body=body, cache=cache, lease=lease)

    def _hold_header(self, s: A.Hold):
        """The header (read at admission): each pool's units and reserve, the reuse; the pool keys and
        the attributes the header reads."""
        pools: list[ir.HoldPool] = []
        keys: list[tuple] = []
        header_attrs: list[tuple[str, A.Span]] = []
        for hp in s.pools:
            pref = self._pool_ref(hp.pool, M.HOLD_HEADER)
            key = _ref_key(pref)
            if key in keys:
                raise _err(f"the hold names `{_show_ref(hp.pool)}` twice: a hold names each pool once", hp.pool.span)
            keys.append(key)
            if pref.index is not None:
                self._check_index_reads(pref.index, hp.pool)
            units, ut = self._expr(hp.units, M.HOLD_HEADER)
            self._amount_type(ut, {pref.pool}, f"the units of `hold {_show_ref(hp.pool)}`", hp.units.span)
            self._check_amount(units, f"the units of `hold {_show_ref(hp.pool)}`", hp.units.span)
            reserve = None
            if hp.reserve is not None:
                reserve, rt = self._expr(hp.reserve, M.HOLD_HEADER)
                self._amount_type(rt, {pref.pool}, f"the reserve of `hold {_show_ref(hp.pool)}`", hp.reserve.span)
                self._check_amount(reserve, f"the reserve of `hold {_show_ref(hp.pool)}`", hp.reserve.span)
            self._check_fits(pref, units, reserve, hp)
            for x in (hp.units, hp.reserve):
                if x is not None:
                    header_attrs.extend(_attrs_read(x))
            pools.append(ir.HoldPool(pool=pref, units=units, reserve=reserve))
        needed = {p.pool.pool for p in pools}
        reuse = None
        if s.reuse is not None:
            if s.cache is None:
                raise _err("a hold without `cache` writes `reuse`: only a hold that takes part in the prefix "
                           "cache reuses (`cache (0)` consumes the prefix and keeps nothing)", s.reuse.span)
            reuse, rt = self._expr(s.reuse, M.HOLD_HEADER)
            self._amount_type(rt, needed, "the reuse of the hold", s.reuse.span)
            self._check_amount(reuse, "the reuse of the hold", s.reuse.span)
            header_attrs.extend(_attrs_read(s.reuse))
        return pools, keys, header_attrs, reuse

    def _check_index_reads(self, index: ir.Expr, ref: A.Ref) -> None:
        for n in ir.walk(index):
            if isinstance(n, (ir.PoolObs, ir.StageObs, ir.Ctx, ir.Draw)):
                raise _err(f"the index of `{_show_ref(ref)}` is read again inside the hold and after a preemption: "
                           "it reads attributes and numbers, not the state, the clock or a draw", ref.span)
            if isinstance(n, ir.Attr) and n.name in C.SCHEDULER_ATTRIBUTES:
                raise _err(f"the index of `{_show_ref(ref)}` reads `{n.name}`, which admission and preemption set",
                           ref.span)

    def _check_fits(self, pref: ir.PoolRef, units: ir.Expr, reserve: ir.Expr | None, hp: A.HoldPool) -> None:
        cap = self.pools[pref.pool].cap
        if cap == "inf":
            return
        for value, what, span in ((units, "units", hp.units.span), (reserve, "reserve", getattr(hp.reserve, "span", None))):
            if value is None:
                continue
            v = fold(value)
            if v is not None and v > cap:
                raise _err(f"the {what} of `hold {_show_ref(hp.pool)}` are the constant {format_number(v)}, above "
                           f"the pool's cap {format_number(cap)}: the hold could never be admitted", span)

    def _run(self, s: A.Run, scope: StmtScope) -> ir.RunStmt:
        moment = self._moment(scope)
        if not s.stages:
            raise _err("`run (…)` with no stage stands in a queue's entry, where it names the queue's own stage",
                       s.span)
        refs = [self._stage_ref(r, moment) for r in s.stages]
        names = [r.stage for r in refs]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise _err(f"the run names stage array `{n}` twice: an index is known only when the run starts",
                           s.stages[i].span)
        for r, a in zip(refs, s.stages):
            st = self.stages[r.stage]
            if isinstance(st.service, ir.Step) and s.mode is None:
                raise _err(f"`run {_show_ref(a)}`: `{r.stage}` is an engine, so the run names its mode, "
                           f"`run {_show_ref(a)} prefill (…)` or `decode`", a.span)
            if not isinstance(st.service, ir.Step) and s.mode is not None:
                raise _err(f"`run {_show_ref(a)} {s.mode}`: only an engine's run has a mode", a.span)
        if len(refs) > 1:
            for r, a in zip(refs, s.stages):
                st = self.stages[r.stage]
                cap = fold(st.service.capacity) if isinstance(st.service, ir.Ps) else None
                if not isinstance(st.service, ir.Ps) or cap is None or not cap > 0:
                    raise _err(f"`{r.stage}` in a run over several stages: each is ps(φ) with a constant φ above 0",
                               a.span)
        work, t = self._expr(s.work, moment)
        self._amount_type(t, set(names), f"the work of `run {', '.join(_show_ref(a) for a in s.stages)}`", s.work.span)
        self._check_amount(work, "the work of the run", s.work.span)
        growing = None
        if s.growing is not None:
            growing = self._pool_ref(s.growing, moment)
            self._enclosing_hold(growing, s.growing, scope, f"`growing {_show_ref(s.growing)}`")
        out = ir.RunStmt(stages=refs, mode=s.mode, work=work, growing=growing)
        if len(refs) > 1:
            self.multi_stage_runs.append((out, s.span))
        return out

    # ================================================================ gauges and claims
    def _gauge(self, g: A.GaugeDecl) -> ir.Gauge:
        value, t = self._expr(g.value, M.GAUGE)
        self._numeric(t, f"gauge `{g.name}`", g.value.span)
        return ir.Gauge(name=g.name, value=value, at=self._loc(g.span))

    def _claim(self, c: A.ClaimDecl) -> ir.Claim:
        given = None
        if c.given is not None:
            given, t = self._expr(c.given, M.GIVEN)
            self._numeric(t, f"the given of claim `{c.name}`", c.given.span)
        if c.form == "at_end":
            value, t = self._expr(c.value, M.CLAIM_END)
            self._numeric(t, f"claim `{c.name}`", c.value.span)
            return ir.Claim(name=c.name, form="at_end", given=given, value=value, at=self._loc(c.span))
        assert c.stage is not None
        sref = self._stage_ref(c.stage, M.CLAIM_ITERATION)
        if sref.index is not None and not isinstance(sref.index, ir.Num):
            raise _err(f"claim `{c.name}` names a member of `{sref.stage}` by a constant index", c.stage.span)
        st = self.stages[sref.stage]
        if not isinstance(st.service, ir.Step):
            kind = st.service.kind
            raise _err(f"claim `{c.name}`: `{c.form} iteration of {_show_ref(c.stage)}` needs a step stage "
                       f"(an engine); `{sref.stage}` is a {kind} stage", c.stage.span)
        value, t = self._expr(c.value, M.CLAIM_ITERATION, sref.stage)
        self._numeric(t, f"claim `{c.name}`", c.value.span)
        return ir.Claim(name=c.name, form="every_iteration" if c.form == "every" else "some_iteration",
                        stage=sref, given=given, value=value, at=self._loc(c.span))


# ==================================================================== helpers
def _bound(v: float):
    if v == math.inf:
        return "inf"
    return int(v) if float(v).is_integer() else v


def _arity(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"


def _entry_value_elsewhere(name: str, moment: M) -> str:
    """The refusal of bare `size` or `waiting` outside an eviction key."""
    desc = C.CONTEXT_VARIABLES[name][0]
    if name == "waiting":
        return (f"bare `waiting` is read in an eviction key only (`evict by (…)`: {desc}), not in "
                f"{_moment_text(moment)}; an engine's clauses read `waiting.count` and `waiting.admitted`")
    return (f"`{name}` is read in an eviction key only (`evict by (…)`: {desc}), not in {_moment_text(moment)}, "
            f"and the program declares no `{name}`")


def _moment_text(m: M) -> str:
    return {
        M.CONSTANT: "a constant", M.SESSION: "a session statement", M.SERVER: "a server statement",
        M.HOLD_HEADER: "a hold's header", M.HOLD_CACHE: "a hold's cache", M.LEASE: "a lease's duration",
        M.QUEUE_KEY: "a queue key", M.EVICT_KEY: "an eviction key", M.PREEMPT_KEY: "a preemption key",
        M.SPILL: "a spill", M.PS_CAPACITY: "a ps capacity", M.STEP_BUDGET: "an engine's tokens cap",
        M.STEP_CHUNK: "an engine's each at most", M.STEP_SERVE: "a serve key or only predicate",
        M.STEP_GUARD: "a schedule's guard", M.STEP_COST: "an engine's execute", M.GAUGE: "a gauge",
        M.CLAIM_ITERATION: "a claim over iterations", M.CLAIM_END: "a claim at end", M.GIVEN: "a claim's given",
        M.RENEWAL: "a renewal gap",
    }[m]


def _show_ref(r: A.Ref) -> str:
    out = r.name
    for s in r.selectors:
        if isinstance(s, A.FieldSel):
            out += "." + s.name
        else:
            ix = s.index
            inner = (format_number(ix.value) if isinstance(ix, A.Num)
                     else _show_ref(ix) if isinstance(ix, A.Ref) else "…")
            out += f"[{inner}]"
    return out


def _ref_key(r: ir.PoolRef) -> tuple:
    if r.index is None:
        return (r.pool, None)
    return (r.pool, r.index.model_dump_json())


def _key_text(k: tuple) -> str:
    return k[0] if k[1] is None else f"{k[0]}[…]"


def _stmt_name(s) -> str:
    return {
        A.Turn: "`turn;`", A.Hold: "`hold`", A.Run: "`run`", A.Loop: "`loop`", A.While: "`while`",
        A.Fork: "`fork`", A.Join: "`join`", A.End: "`end`", A.Grow: "`grow`", A.Load: "`load`",
        A.Release: "`release`", A.Drop: "`drop`", A.Mark: "`mark`", A.Transfer: "`transfer`", A.Tool: "`tool`",
        A.RequestRun: "an engine request's prefill/decode", A.RequestAdmission: "`at admission { … }`",
        A.RequestCache: "an engine request's cache", A.EntryCall: "a queue entry call", A.CallStmt: "a call",
    }.get(type(s), type(s).__name__)




def _assigned_names(items, observes_only: bool = False) -> set[str]:
    """Every name a set, Size, Cost, choose or observe assigns anywhere in the items, requests and entries
    included (with `observes_only`, the observes' alone)."""
    from dataclasses import fields as dc_fields, is_dataclass
    found: set[str] = set()

    def visit(node) -> None:
        if isinstance(node, list):
            for x in node:
                visit(x)
            return
        if not is_dataclass(node) or isinstance(node, A.Span):
            return
        if observes_only:
            if isinstance(node, A.Observe):
                found.add(node.name)
        elif isinstance(node, A.Set) and node.target.is_bare:
            found.add(node.target.name)
        elif isinstance(node, (A.SizeDecl, A.CostDecl, A.CostFieldsDecl, A.Choose, A.Observe)):
            found.add(node.name)
        for f in dc_fields(node):
            v = getattr(node, f.name)
            if isinstance(v, (list,)) or (is_dataclass(v) and not isinstance(v, A.Span)):
                visit(v)

    visit(items)
    return found


def _direct_exprs(st) -> list[A.Expr]:
    """The expressions a statement reads itself (not those of the blocks it holds)."""
    out: list[A.Expr] = []
    for name in ("value", "amount", "work", "test", "count"):
        v = getattr(st, name, None)
        if v is not None and not isinstance(v, list):
            out.append(v)
    for name in ("keys", "args"):
        out.extend(getattr(st, name, None) or [])
    for name in ("pool", "growing", "target"):
        v = getattr(st, name, None)
        if isinstance(v, A.Ref):
            out.append(v)
    out.extend(getattr(st, "stages", None) or [])
    return out


def _contains(body: list[A.Stmt], kind) -> bool:
    return any(isinstance(s, kind) for s in A.walk_stmts(body))


def _stmt_refs(body) -> list[A.Ref]:
    from serq.link.expand import map_stmt_exprs
    found: list[A.Ref] = []

    def visit(e):
        found.extend(n for n in walk_expr(e) if isinstance(n, A.Ref))
        return e

    map_stmt_exprs(body, visit)
    return found


def _attrs_read(e: A.Expr) -> list[tuple[str, A.Span]]:
    return [(n.name, n.span) for n in walk_expr(e) if isinstance(n, A.Ref) and n.is_bare]




def _check_distribution(e: A.Draw, values: list[float | None]) -> None:
    def bad(msg: str) -> SerqError:
        return _err(f"`~{e.dist}({', '.join('…' if v is None else format_number(v) for v in values)})`: {msg}", e.span)

    v = values
    if e.dist == "exp" and v[0] is not None and not (0 < v[0] < math.inf):
        raise bad("the mean is positive and finite")
    if e.dist == "det" and v[0] is not None and not math.isfinite(v[0]):
        raise bad("the value is finite")
    if e.dist == "uniform" and v[0] is not None and v[1] is not None and not (
            math.isfinite(v[0]) and math.isfinite(v[1]) and v[0] <= v[1]):
        raise bad("the bounds are finite, a <= b")
    if e.dist == "erlang":
        if v[0] is not None and not (math.isfinite(v[0]) and v[0] == int(v[0]) and v[0] >= 1):
            raise bad("k is a whole number, at least 1")
        if v[1] is not None and not (0 < v[1] < math.inf):
            raise bad("the mean is positive and finite")
    if e.dist == "h2":
        if v[0] is not None and not (0 < v[0] < math.inf):
            raise bad("the mean is positive and finite")
        if v[1] is not None and not (1 <= v[1] < math.inf):
            raise bad("the squared coefficient of variation is at least 1")
    if e.dist == "bernoulli" and v[0] is not None and not (0 <= v[0] <= 1):
        raise bad("p is a probability, from 0 to 1")
