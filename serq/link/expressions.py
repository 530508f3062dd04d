"""Linking expressions: names, attributes, registers, draws, calls and observables, each
checked against the moment that reads it (the reference, *Expressions* and *Context*), and the
amounts typed as costs of their resources. A part of `serq.link.linker.Linker`."""

from __future__ import annotations

import math

from serq.errors import SerqError
from serq.ir import catalogue as C
from serq.ir import models as ir
from serq.ir.catalogue import Moment as M
from serq.link.common import Type, arity_text, link_error, moment_text, show_ref, type_name
from serq.link.consts import format_number
from serq.link.fold import fold
from serq.syntax import ast as A

_BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "==": "eq", "!=": "ne",
           "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "&&": "and", "||": "or"}


class ExpressionLinking:
    """The Linker's expressions (its state is the Linker's: consts, attributes, pools, stages, spans)."""

    def _numeric_expr(self, e: A.Expr, moment: M, what: str, stage: str | None = None) -> ir.Expr:
        out, t = self._expr(e, moment, stage)
        self._numeric(t, what, e.span)
        return out

    def _numeric(self, t: Type, what: str, span: A.Span) -> None:
        if t is not None:
            raise link_error(f"{what} is a number, not {type_name(t)}", span)

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
                raise link_error(f"the arms of `? :` are {type_name(at)} and {type_name(bt)}", e.span)
            return ir.Cond(test=test, then=a, otherwise=b), at
        if isinstance(e, A.Draw):
            return self._draw(e, moment, stage), None
        if isinstance(e, A.Call):
            return self._call(e, moment, stage)
        if isinstance(e, A.Aggregate):  # pragma: no cover - expanded before linking
            raise link_error("an aggregate survived expansion", e.span)
        raise link_error("not an expression", getattr(e, "span", None))  # pragma: no cover

    def _binary_type(self, e: A.Binary, lt: Type, rt: Type) -> Type:
        if e.op in ("+", "-"):
            if lt == rt:
                return lt
            raise link_error(f"`{e.op}` of {type_name(lt)} and {type_name(rt)}: add costs of the same resources, "
                       "or convert with cost(resource, …) after the arithmetic", e.span)
        if e.op == "*":
            if lt is not None and rt is not None:
                raise link_error("a cost times a cost is no cost", e.span)
            return lt if lt is not None else rt
        if e.op in ("/", "%"):
            if rt is not None:
                raise link_error(f"`{e.op}` by {type_name(rt)}: a cost divides by a number", e.span)
            return lt
        if lt != rt:
            raise link_error(f"`{e.op}` compares {type_name(lt)} with {type_name(rt)}", e.span)
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
                raise link_error(f"`{show_ref(e)}` is an engine's value, read in an engine's clauses", e.span)
            if name in self.pools or name in self.stages:
                raise link_error(f"`{show_ref(e)}` is a {'pool' if name in self.pools else 'stage'}, not a value: "
                           f"read it with an observable, e.g. used({show_ref(e)})", e.span)
            raise link_error(f"`{show_ref(e)}`: `{name}` has no members or indices", e.span)
        if name in C.CONTEXTUAL_NAMES and moment == M.EVICT_KEY:
            return self._entry_value(name, e), None
        if name in C.RESERVED_CONTEXT:
            desc, moments = C.CONTEXT_VARIABLES[name]
            if moment not in moments:
                allowed = ", ".join(sorted(m.value for m in moments))
                raise link_error(f"`{name}` ({desc}) is not available in {moment_text(moment)}; it is read in: {allowed}",
                           e.span)
            return ir.Ctx(var=name), None
        if name in self.consts:
            v = self.consts[name].value
            return (ir.Inf() if v == math.inf else ir.Num(value=v)), None
        reg = self._header_register(e, moment)
        if name in self.attributes:
            if reg is not None:
                raise link_error(f"`{name}` is an attribute and a register of engine `{self.header_engine}`, whose "
                           f"pool this hold waits in: write `{self.header_engine}.{name}` for the register",
                           e.span)
            return self._attr(name, e, moment)
        if reg is not None:
            return reg, None
        if name in self.pools or name in self.stages:
            kind = "pool" if name in self.pools else "stage"
            raise link_error(f"`{name}` is a {kind}, not a value: read it with an observable, e.g. "
                       f"{'used' if kind == 'pool' else 'busy'}({name})", e.span)
        if name in self.observes:
            raise link_error(f"`{name}` is an observation, not an attribute: a claim at end reads it as total({name}), …",
                       e.span)
        d = self.decls.get(name)
        if d is not None:
            raise link_error(f"`{name}` is {self._ARTICLE[d.kind]}, not a value here", e.span)
        if name in C.TRACE_ATTRIBUTES:
            raise link_error(f"`{name}` is a trace attribute: it exists only with `trace \"file.csv\";`", e.span)
        if name in C.CONTEXTUAL_NAMES:
            raise link_error(_entry_value_elsewhere(name, moment), e.span)
        raise link_error(f"unknown name `{name}`", e.span)

    def _entry_value(self, name: str, e: A.Ref) -> ir.Ctx:
        """`size` or `waiting` in an eviction key: the cached entry's. A program that declares `size`
        itself, as a value (a let, an input, an attribute), does not read it there: which one the key
        means would be a guess. (An observation, a gauge, a pool or a def of that name is no value there.)"""
        if name in self.consts or name in self.attributes:
            d = self.decls.get(name)
            what = f"{self._ARTICLE[d.kind]} declared at {d.span}" if d is not None and d.kind in self._ARTICLE \
                else ("a constant" if name in self.consts else "a session attribute")
            raise link_error(f"`{name}` in an eviction key is the cached entry's ({C.CONTEXT_VARIABLES[name][0]}), and "
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
            raise link_error(f"register `{e.name}.{name}` is not read in {moment_text(moment)}", e.span)
        if stage is not None and stage != e.name and moment in (M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE,
                                                                 M.STEP_GUARD, M.STEP_COST):
            raise link_error(f"register `{e.name}.{name}` is read only by its own engine", e.span)
        return ir.Reg(stage=e.name, name=name)

    def _attr(self, name: str, e: A.Ref, moment: M) -> tuple[ir.Expr, Type]:
        if moment not in C.ATTRIBUTE_MOMENTS:
            raise link_error(f"`{name}` is a session attribute; {moment_text(moment)} reads no session", e.span)
        a = self.attributes[name]
        if moment in C.SCHEDULER_MOMENTS and a.hidden:
            raise link_error(f"`{name}` is hidden: {moment_text(moment)} is the scheduler's, which may not read it",
                       e.span)
        t: Type = frozenset(a.resources) if a.type == "cost" else None
        return ir.Attr(name=name), t

    def _draw(self, e: A.Draw, moment: M, stage: str | None) -> ir.Expr:
        if e.dist not in C.DISTRIBUTIONS:
            raise link_error(f"unknown distribution `~{e.dist}` (the language has: "
                       f"{', '.join('~' + d for d in C.DISTRIBUTIONS)})", e.span)
        if moment in C.NO_DRAW:
            raise link_error(f"`~{e.dist}` draws, and {moment_text(moment)} may not draw: it is read again and must "
                       "give the same number; sample into an attribute first", e.span)
        arity, _ = C.DISTRIBUTIONS[e.dist]
        if len(e.args) != arity:
            raise link_error(f"`~{e.dist}` takes {arity} parameter(s), given {len(e.args)}", e.span)
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
                raise link_error("`cost(resource, …, e)` names at least one pool or stage, then the amount", e.span)
            resources = []
            for r in e.args[:-1]:
                if not (isinstance(r, A.Ref) and r.is_bare and (r.name in self.pools or r.name in self.stages)):
                    raise link_error("`cost(…)`: each argument before the amount names a pool or a stage", r.span)
                if r.name in resources:
                    raise link_error(f"`cost(…)` names `{r.name}` twice", r.span)
                resources.append(r.name)
            arg, t = self._expr(e.args[-1], moment, stage)
            if t is not None:
                raise link_error(f"`cost(…)` of {type_name(t)}: the amount is a plain number", e.args[-1].span)
            return ir.CostOf(resources=resources, arg=arg), frozenset(resources)
        if fn in C.FUNCTIONS:
            lo, hi, _ = C.FUNCTIONS[fn]
            if len(e.args) < lo or (hi is not None and len(e.args) > hi):
                raise link_error(f"`{fn}` takes {arity_text(lo, hi)} argument(s), given {len(e.args)}", e.span)
            pairs = [self._expr(a, moment, stage) for a in e.args]
            types = {t for _, t in pairs}
            if fn in ("min", "max"):
                if len(types) > 1:
                    raise link_error(f"`{fn}` of {' and '.join(sorted(type_name(t) for t in types))}", e.span)
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
                raise link_error(f"`{fn}(…)` aggregates a run's observations: only a claim `at end` reads it", e.span)
            if len(e.args) != 1 or not (isinstance(e.args[0], A.Ref) and e.args[0].is_bare):
                raise link_error(f"`{fn}(o)` names one observation", e.span)
            name = e.args[0].name
            if name not in self.observes and name not in C.CLIENT_METRICS:
                raise link_error(f"`{fn}({name})`: `{name}` is not observed (observe it, or read ttft, tpot, response)",
                           e.args[0].span)
            return ir.Observed(fn=fn, name=name), None
        if fn in self.expander.definitions:  # pragma: no cover - expanded before linking
            raise link_error(f"def `{fn}` survived expansion", e.span)
        if fn in self.stages or fn in self.pools:
            raise link_error(f"`{fn}(…)`: `{fn}` is not a function (an engine's request is called as a statement)", e.span)
        raise link_error(f"unknown function `{fn}`", e.span)

    def _observable(self, e: A.Call, moment: M, stage: str | None) -> ir.Expr:
        fn = e.fn
        if moment not in C.OBSERVABLE_MOMENTS:
            raise link_error(f"`{fn}(…)` reads the deployment's state, which {moment_text(moment)} may not read", e.span)
        if fn in C.SESSION_OBSERVABLES and moment not in (M.SESSION, M.SERVER, M.HOLD_HEADER, M.HOLD_CACHE):
            raise link_error(f"`{fn}(…)` reads the session's own prefix: {moment_text(moment)} has no session", e.span)
        if fn in C.MOVING_OBSERVABLES and moment in (M.GAUGE, M.CLAIM_ITERATION, M.STEP_SERVE):
            raise link_error(f"`{fn}(…)` moves between events: {moment_text(moment)} may not read it", e.span)
        if fn in C.PLANNING_OBSERVABLES and moment in (M.GAUGE, M.CLAIM_ITERATION):
            raise link_error(f"`{fn}(…)` plans an iteration: {moment_text(moment)} may not read it", e.span)
        if len(e.args) != 1 or not isinstance(e.args[0], A.Ref):
            what = "pool" if fn in C.POOL_OBSERVABLES else "stage"
            raise link_error(f"`{fn}(…)` takes one {what}", e.span)
        ref = e.args[0]
        if fn in C.POOL_OBSERVABLES:
            pref = self._pool_ref(ref, moment)
            if moment in (M.GAUGE, M.CLAIM_ITERATION) and pref.index is not None and not isinstance(pref.index, ir.Num):
                raise link_error(f"`{fn}({show_ref(ref)})`: {moment_text(moment)} names a member by a number", ref.span)
            return ir.PoolObs(fn=fn, pool=pref)
        sref = self._stage_ref(ref, moment)
        if moment in (M.GAUGE, M.CLAIM_ITERATION) and sref.index is not None and not isinstance(sref.index, ir.Num):
            raise link_error(f"`{fn}({show_ref(ref)})`: {moment_text(moment)} names a member by a number", ref.span)
        if fn == "budget_left":
            if not isinstance(self.stages[sref.stage].service, ir.Step):
                raise link_error(f"`budget_left({show_ref(ref)})`: `{sref.stage}` is not a step stage", ref.span)
            if stage == sref.stage and moment in (M.STEP_BUDGET, M.STEP_CHUNK):
                raise link_error(f"`budget_left({sref.stage})` plans {sref.stage}'s iteration: its own "
                           f"{moment_text(moment)} may not read it", e.span)
        return ir.StageObs(fn=fn, stage=sref)

    def _amount_type(self, t: Type, needed: set[str], what: str, span: A.Span) -> None:
        names = ", ".join(sorted(needed))
        if t is None:
            raise link_error(f"{what} is a plain number; an amount is a cost: write cost({names}, …)", span)
        missing = needed - t
        if missing:
            raise link_error(f"{what} is {type_name(t)}, not a cost of {', '.join(sorted(missing))}", span)


def _entry_value_elsewhere(name: str, moment: M) -> str:
    """The refusal of bare `size` or `waiting` outside an eviction key."""
    desc = C.CONTEXT_VARIABLES[name][0]
    if name == "waiting":
        return (f"bare `waiting` is read in an eviction key only (`evict by (…)`: {desc}), not in "
                f"{moment_text(moment)}; an engine's clauses read `waiting.count` and `waiting.admitted`")
    return (f"`{name}` is read in an eviction key only (`evict by (…)`: {desc}), not in {moment_text(moment)}, "
            f"and the program declares no `{name}`")


def _check_distribution(e: A.Draw, values: list[float | None]) -> None:
    def bad(msg: str) -> SerqError:
        return link_error(f"`~{e.dist}({', '.join('…' if v is None else format_number(v) for v in values)})`: {msg}", e.span)

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
