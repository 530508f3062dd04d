"""The linker: the kernel AST -> the IR, with every refusal the reference names.

Order of work: constants and inputs; declarations and their names; def and
aggregate expansion, `branch with`, `at admission`; attributes and their
sides; then each section linked to IR (expressions checked against the moment
that reads them, amounts typed as costs); then the whole-program checks in
`serq.link.flow`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from serq.errors import SerqError
from serq.ir import catalogue as C
from serq.ir import models as ir
from serq.ir.catalogue import Moment as M
from serq.limits import COUNT_LIMIT
from serq.link.common import StmtScope, arity_text, link_error, show_ref
from serq.link.consts import ConstValue, apply_binary, apply_function, format_number
from serq.link.expand import Expander, draws, map_stmt_exprs, walk_expr
from serq.link.expressions import ExpressionLinking
from serq.link.flow import check_program as check_flow
from serq.link.fold import fold
from serq.link.loader import Unit
from serq.link.statements import StatementLinking
from serq.syntax import ast as A

_VOCABULARY = {
    A.DeviceDecl: "a device", A.EngineDecl: "an engine", A.QueueDecl: "a queue",
    A.RelationDecl: "a pull/push relation",
}


@dataclass
class Decl:
    kind: str  # let, input, def, parameter, pool, stage, gauge, claim, observe, attribute, binding
    span: A.Span


class Linker(ExpressionLinking, StatementLinking):
    """One program's linking: the declarations, constants, workload, attributes, pools and stages
    here; expressions in `serq.link.expressions`, statements in `serq.link.statements`."""

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
                    raise link_error("a second workload: a program has one", item.span)
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
                raise link_error("this declaration does not stand inside main", item.span)
        for unsupplied in sorted(set(self.supplied) - {i.arg for i in self.inputs}):
            declared = ", ".join(sorted(i.arg for i in self.inputs)) or "none"
            raise SerqError(f"no input named `{unsupplied}` (the program declares: {declared})", None, "usage")
        if workload is None:
            raise link_error("the program has no workload: `workload { arrive …; }` says how sessions arrive", main.span)
        if len(servers) > 1:
            raise link_error("a second server: there is one server per workload", servers[1].span)
        if len(shares) > 1:
            raise link_error("a second `share`: a program declares one", shares[1].span)
        for d in definitions.values():
            for p in d.params:
                self._check_not_supplied(p, "a parameter", d.span)
                if p in self.decls and self.decls[p].kind != "def":
                    raise link_error(f"parameter `{p}` of `{d.name}` has the name of {self._ARTICLE[self.decls[p].kind]}", d.span)

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
        raise link_error(f"{what} is parse-time vocabulary, lowered onto the kernel by `serq.lower`, "
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
            raise link_error(f"{what} may not be named `{name}`: the language supplies that name", span)
        if name in C.BUILTIN_ATTRIBUTES or name in C.TRACE_ATTRIBUTES:
            raise link_error(f"{what} may not be named `{name}`: it is a built-in session attribute", span)
        if name == "cost" or (functions and (name in C.FUNCTIONS or name in C.POOL_OBSERVABLES
                                             or name in C.STAGE_OBSERVABLES)):
            raise link_error(f"{what} may not be named `{name}`: it is a function of the language", span)

    _ARTICLE = {"let": "a let", "input": "an input", "def": "a def", "pool": "a pool", "stage": "a stage",
                "gauge": "a gauge", "claim": "a claim", "observe": "an observe", "attribute": "an attribute",
                "binding": "an `at admission` binding", "parameter": "a parameter"}

    def _declare(self, name: str, kind: str, span: A.Span) -> None:
        self._check_not_supplied(name, self._ARTICLE[kind], span, functions=kind != "def")
        prior = self.decls.get(name)
        if prior is not None:
            if prior.kind == kind:
                raise link_error(f"{self._ARTICLE[kind]} `{name}` is declared twice (first at {prior.span})", span)
            raise link_error(f"{self._ARTICLE[kind]} `{name}` has the name of {self._ARTICLE[prior.kind]} "
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
                    raise link_error(f"binding `{b.name}` has the name of {self._ARTICLE[prior.kind]} declared at "
                               f"{prior.span}: a binding's name is its own", b.span)
                if b.name in observed:
                    raise link_error(f"binding `{b.name}` has the name of an observe: a binding's name is its own",
                               b.span)
                if b.name in set_names:
                    raise link_error(f"binding `{b.name}` has the name of an attribute the program sets: "
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
                                raise link_error(f"binding `{st.bindings[i].name}` reads `{n.name}`: a binding reads "
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
                    raise link_error(f"`{n.name}` is an `at admission` binding (at {bound[n.name]}): it is read only "
                               "in the holds that bind it", n.span)

        for body in bodies:
            visit(body, frozenset())

    # ================================================================ constants
    def _constant(self, c: A.Constant) -> None:
        self._declare(c.name, "let", c.span)
        self.consts[c.name] = self._const_eval(c.value, f"let `{c.name}`")

    def _input(self, item: A.Input) -> None:
        if not self.unit.std_args:
            raise link_error('`args.number(…)` needs `use "std/args";` at the top of the program', item.span)
        if any(i.arg == item.arg for i in self.inputs):
            raise link_error(f'input "{item.arg}" is declared twice', item.span)
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
                    raise link_error(f"`{x.fn}` takes {arity_text(lo, hi)} argument(s), given {len(x.args)}", x.span)
                return apply_function(x.fn, [ev(a) for a in x.args])
            if isinstance(x, A.Call) and hasattr(self, "expander") and x.fn in self.expander.definitions:
                return ev(self.expander.expr(x))
            if isinstance(x, A.Ref):
                raise link_error(f"{what} is a constant: `{show_ref(x)}` is not a constant", x.span)
            if isinstance(x, A.Draw):
                raise link_error(f"{what} is a constant: it may not draw (~{x.dist})", x.span)
            raise link_error(f"{what} is a constant: this is not a constant expression", x.span)

        value = ev(e)
        if math.isnan(value):
            raise link_error(f"{what} evaluates to NaN: a constant is a number or inf", e.span)
        if value == -math.inf:  # the IR writes a constant as a number or "inf" (ir.Bound)
            raise link_error(f"{what} evaluates to -inf: a constant is a finite number or inf", e.span)
        return ConstValue(value, e.span, frozenset(inputs))

    def _count_value(self, e: A.Expr, what: str = "a count", array: bool = True) -> int:
        """A whole number from 1 to a million; an array's size (`pool kv[n]`) may not come from a supplied input."""
        v = self._const_eval(e, what)
        if array and v.inputs:
            raise link_error(f"{what} depends on input(s) {', '.join(sorted(v.inputs))} supplied from outside: "
                       "an input may not change a parse-time array size", e.span)
        if not (v.value == int(v.value) if math.isfinite(v.value) else False) or not 1 <= v.value <= COUNT_LIMIT:
            raise link_error(f"{what} is {format_number(v.value)}: a count is a whole number from 1 to a million", e.span)
        return int(v.value)

    # ================================================================ workload
    def _expand_workload(self, w: A.WorkloadDecl) -> A.WorkloadDecl:
        for kind in ("init", "turn", "session"):
            blocks = getattr(w, kind)
            if len(blocks) > 1:
                raise link_error(f"a second `{kind}` block: the workload has at most one", w.span)
        return A.WorkloadDecl(
            w.arrivals,
            [self.expander.stmts(b) for b in w.init],
            [self.expander.stmts(b) for b in w.turn],
            [self.expander.stmts(b) for b in w.session],
            w.hidden, w.span)

    def _workload(self, w: A.WorkloadDecl) -> ir.Workload:
        if not w.arrivals:
            raise link_error("the workload has no arrivals: write `arrive poisson(rate);`, `renewal(gap)`, "
                       "`closed(n)`, `batch(n)`, `none`, or `trace \"file.csv\";`", w.span)
        laws = [a for a in w.arrivals if a.kind != "trace"]
        traces = [a for a in w.arrivals if a.kind == "trace"]
        if len(laws) > 1:
            raise link_error("a second arrival law: the workload has one", laws[1].span)
        if len(traces) > 1:
            raise link_error("a second trace: the workload replays one", traces[1].span)
        # `arrive batch(N); trace "f.csv";`: the law's sessions replay the trace's turns; a trace alone
        # is also the arrival law (its sessions at the file's times)
        arrival = self._arrival(laws[0] if laws else traces[0])
        trace = self._arrival(traces[0]) if laws and traces else None
        session = w.session[0] if w.session else None
        if session is not None and not _contains(session, A.Turn):
            raise link_error("the session block has no `turn;`: an explicit session submits its turns", w.span)
        return ir.Workload(
            arrival=arrival,
            init=self._block(w.init[0], StmtScope("init")) if w.init else [],
            turn=self._block(w.turn[0], StmtScope("turn")) if w.turn else [],
            session=self._block(session, StmtScope("session")) if session is not None else [ir.TurnStmt()],
            hidden=[n for n, _ in w.hidden],
            trace=trace,
        )

    def _arrival(self, a: A.Arrival):
        at = self._loc(a.span)
        if a.kind == "poisson":
            v = self._const_eval(a.arg, "the arrival rate").value
            if not (0 < v < math.inf):
                raise link_error(f"poisson({format_number(v)}): the rate is a positive, finite constant", a.span)
            return ir.Poisson(rate=v, at=at)
        if a.kind == "renewal":
            gap, t = self._expr(a.arg, M.RENEWAL)
            self._numeric(t, "the renewal gap", a.arg.span)
            folded = fold(gap)
            if folded is not None and not (0 < folded < math.inf):
                raise link_error(f"renewal({format_number(folded)}): a gap is positive and finite", a.span)
            return ir.Renewal(gap=gap, at=at)
        if a.kind in ("closed", "batch"):
            n = self._count_value(a.arg, f"{a.kind}(n), the sessions", array=False)
            return ir.Closed(sessions=n, at=at) if a.kind == "closed" else ir.Batch(sessions=n, at=at)
        if a.kind == "none":
            return ir.NoArrivals(at=at)
        path = Path(self.unit.path).parent / a.file
        if not path.is_file():
            raise link_error(f'trace "{a.file}": no such file {path}', a.span)
        return ir.Trace(file=a.file, ordered=a.ordered, at=at)

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
                        raise link_error(f"`Size {s.name}` in the server: a Size is a workload quantity, drawn or set "
                                   "by the session's side; the server computes with `set`", s.span)
                    self._attribute(s.name, "size", side, s.span)
                elif isinstance(s, A.CostDecl):
                    self._attribute(s.name, "cost", side, s.span)
                elif isinstance(s, A.CostFieldsDecl):
                    for fname, _, fspan in s.fields:
                        if self.decls.get(fname, Decl("", fspan)).kind not in ("pool", "stage"):
                            raise link_error(f"field `{fname}` of `Cost {s.name}` names no pool or stage: a composite "
                                       "cost has one field per resource", fspan)
                        self._attribute(f"{s.name}.{fname}", "cost", side, fspan)
                        self.attributes[f"{s.name}.{fname}"].resources = [fname]
                elif isinstance(s, A.Choose):
                    self._attribute(s.name, "number", side, s.span)
                elif isinstance(s, A.Observe):
                    self._check_not_supplied(s.name, "an observe", s.span)
                    prior = self.decls.get(s.name)
                    if prior is not None:
                        raise link_error(f"observe `{s.name}` has the name of {self._ARTICLE[prior.kind]} declared at "
                                   f"{prior.span}", s.span)
                    self.observes.setdefault(s.name, s.span)
        for name, span in w.hidden:
            if name in C.SCHEDULER_ATTRIBUTES:
                raise link_error(f"`hidden {name}`: {name} is set by the scheduler and cannot be hidden", span)
            a = self.attributes.get(name)
            if a is None or a.side not in ("session", "builtin") or name in C.BUILTIN_ATTRIBUTES:
                raise link_error(f"`hidden {name}`: {name} is not an attribute the workload draws or sets", span)
            a.hidden = True
        for name, span in self.observes.items():
            if name in self.attributes and self.attributes[name].side != "builtin":
                raise link_error(f"observe `{name}` has the name of an attribute the program sets", span)
            self.decls[name] = Decl("observe", span)

    def _set_target(self, target: A.Ref) -> str:
        """A set names an attribute; `E.m` (a mark of engine or queue E) is the attribute `E.m`."""
        if target.is_bare:
            return target.name
        dotted = target.dotted()
        if dotted is not None and len(target.selectors) == 1 and target.name in self.decls \
                and self.decls[target.name].kind == "stage":
            return dotted
        raise link_error(f"`set {show_ref(target)}`: a set names a session attribute (or `E.m`, a mark of a stage E)",
                   target.span)

    def _attribute(self, name: str, type_: str, side: str, span: A.Span) -> None:
        if name in C.RESERVED_CONTEXT or name in C.SUPPLIED_NAMES:
            raise link_error(f"`set {name}`: `{name}` is a name the language supplies, not an attribute", span)
        prior = self.decls.get(name)
        if prior is not None:
            raise link_error(f"attribute `{name}` has the name of {self._ARTICLE[prior.kind]} declared at {prior.span}",
                       span)
        a = self.attributes.get(name)
        if a is None:
            self.attributes[name] = ir.Attribute(name=name, type=type_, side=side)
            return
        if a.side == "builtin":
            return  # a program may set a built-in attribute
        if a.side != side:
            if a.side == "session":
                raise link_error(f"the server sets `{name}`, which the workload sets: a workload attribute is "
                           "read-only to the server", span)
            raise link_error(f"the workload sets `{name}`, which the server sets: an attribute has one side", span)
        if type_ != "number" and a.type != type_:
            raise link_error(f"`{name}` is declared both {a.type} and {type_}", span)
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
                raise link_error(f"pool `{p.name}` gives `{g}` twice (first at {seen[g]})", o.span)
            seen[g] = o.span
            if o.kind == "cap":
                v = self._const_eval(o.args[0], f"the cap of pool `{p.name}`").value
                if v < 0:
                    raise link_error(f"the cap of pool `{p.name}` is {format_number(v)}: a capacity is not negative",
                               o.span)
                pool.cap = _bound(v)
            elif o.kind == "block":
                v = self._const_eval(o.args[0], f"the block of pool `{p.name}`").value
                if not (math.isfinite(v) and v == int(v) and v >= 1):
                    raise link_error(f"the block of pool `{p.name}` is {format_number(v)}: a block is a whole number "
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
                    raise link_error(f"pool `{p.name}` spills to itself", target.span)
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
                raise link_error(f"ps stage `{s.name}` has capacity {format_number(folded)}: it must be above 0", k.arg.span)
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
                raise link_error(f"register `{name}` starts at {format_number(v)}: a register is a finite number", span)
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
        raise link_error("not a schedule statement", getattr(x, "span", None))  # pragma: no cover

    def _ref_index(self, ref: A.Ref, count: int, what: str, moment: M) -> ir.Expr | None:
        idx = [s for s in ref.selectors if isinstance(s, A.IndexSel)]
        fields_ = [s for s in ref.selectors if isinstance(s, A.FieldSel)]
        if fields_:
            raise link_error(f"`{show_ref(ref)}`: {what} `{ref.name}` has no member `{fields_[0].name}`", fields_[0].span)
        if len(idx) > 1:
            raise link_error(f"`{show_ref(ref)}`: {what} `{ref.name}` takes one index", ref.span)
        if not idx:
            if count > 1:
                raise link_error(f"{what} `{ref.name}` is an array of {count}: name a member, `{ref.name}[i]`", ref.span)
            return None
        e, t = self._expr(idx[0].index, moment)
        self._numeric(t, "an index", idx[0].span)
        v = fold(e)
        if v is not None:
            if not (math.isfinite(v) and v == int(v) and 0 <= v < count):
                raise link_error(f"`{show_ref(ref)}`: index {format_number(v)} is out of range: {what} `{ref.name}` "
                           f"has members 0 to {count - 1}", idx[0].span)
            return ir.Num(value=int(v))
        return e

    def _pool_ref(self, ref: A.Ref, moment: M) -> ir.PoolRef:
        if ref.name not in self.pools:
            raise link_error(f"`{ref.name}` is not a pool{self._what_is(ref.name)}", ref.span)
        return ir.PoolRef(pool=ref.name, index=self._ref_index(ref, self.pools[ref.name].count, "pool", moment))

    def _stage_ref(self, ref: A.Ref, moment: M) -> ir.StageRef:
        if ref.name not in self.stages:
            raise link_error(f"`{ref.name}` is not a stage{self._what_is(ref.name)}", ref.span)
        return ir.StageRef(stage=ref.name, index=self._ref_index(ref, self.stages[ref.name].count, "stage", moment))

    def _what_is(self, name: str) -> str:
        d = self.decls.get(name)
        if d is not None:
            return f" (it is {self._ARTICLE[d.kind]}, declared at {d.span})"
        if name in self.attributes:
            return " (it is a session attribute)"
        return " declared in this program"

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
            raise link_error(f"claim `{c.name}` names a member of `{sref.stage}` by a constant index", c.stage.span)
        st = self.stages[sref.stage]
        if not isinstance(st.service, ir.Step):
            kind = st.service.kind
            raise link_error(f"claim `{c.name}`: `{c.form} iteration of {show_ref(c.stage)}` needs a step stage "
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
