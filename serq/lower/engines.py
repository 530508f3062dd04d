"""Devices, engines and their pools -> step stages and pools (*Engines on devices*).

An engine is parse-time sugar for the IR's step stage: `tokens cap` is its budget,
`execute` its cost with the device's time resources written out, `each at most`
its chunk, `state` its registers, and its schedule becomes the serve order and,
unless it is vLLM's procedure, the iteration body.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from serq.link.expand import substitute, walk_expr
from serq.lower.common import err, expr_key, rewrite_refs
from serq.syntax import ast as A

# engine value -> (kernel context variable, the clauses that may read it)
ENGINE_VALUES = {
    ("running", "count"): ("residents", {"tokens", "schedule", "execute"}),
    ("waiting", "count"): ("waiting_holds", {"tokens", "schedule", "execute"}),
    ("running", "decoding"): ("decoders", {"tokens", "schedule"}),
    ("running", "kv_decode"): ("kv_decode", {"tokens", "schedule"}),
    ("running", "kv_prefill"): ("kv_prefill", {"tokens", "schedule"}),
    ("running", "preempted"): ("preempted", {"schedule"}),
    ("waiting", "admitted"): ("admitted", {"schedule"}),
    ("batch", "tokens"): ("tokens", {"schedule", "execute"}),
    ("batch", "prefilled"): ("prefilled", {"schedule", "execute"}),
    ("batch", "decoding"): ("decoders", {"execute"}),
    ("batch", "kv_decode"): ("kv_decode", {"execute"}),
    ("batch", "kv_prefill"): ("kv_prefill", {"execute"}),
    ("batch", "attention"): ("attention", {"execute"}),
}
# the kernel's bare names of engine values, which an engine's clauses do not use
_KERNEL_BARE = {"residents", "decoders", "kv_decode", "kv_prefill", "preempted", "admitted", "tokens",
                "prefilled", "attention", "waiting_holds"}
_CLAUSE_TEXT = {"tokens": "`tokens cap`", "schedule": "the schedule", "execute": "`execute`"}


@dataclass
class Engine:
    """An engine as the lowering knows it: its declaration, device and what it lowers to."""

    name: str  # the step stage's name (a queue's engine: the queue's name)
    decl: A.EngineDecl
    device: A.DeviceDecl
    count: A.Expr | None
    taking: A.Taking | None = None
    admitted_pools: list[str] = field(default_factory=list)
    registers: set[str] = field(default_factory=set)


def engine_value(e: A.Expr, engine: Engine, clause: str) -> A.Expr:
    """Rewrite `running.count`, `batch.tokens`, … to the kernel's names, refusing the values the
    clause may not read, the kernel's bare names, and registers read elsewhere."""

    def rename(r: A.Ref) -> A.Expr | None:
        if len(r.selectors) == 1 and isinstance(r.selectors[0], A.FieldSel) and r.name in ("running", "waiting", "batch"):
            key = (r.name, r.selectors[0].name)
            if key not in ENGINE_VALUES:
                raise err(f"`{r.name}.{key[1]}` is no engine value (the engine reads running.count, "
                          "running.decoding, running.kv_decode, running.kv_prefill, running.preempted, "
                          "waiting.count, waiting.admitted and batch.…)", r.span)
            var, clauses = ENGINE_VALUES[key]
            if clause not in clauses:
                raise err(f"`{r.name}.{key[1]}` is not read in {_CLAUSE_TEXT[clause]} (it is read in "
                          f"{', '.join(_CLAUSE_TEXT[c] for c in sorted(clauses))})", r.span)
            return A.Ref(var, [], r.span)
        if r.is_bare and r.name in _KERNEL_BARE:
            raise err(f"`{r.name}` is the kernel's name: an engine writes running.…, waiting.… or batch.…", r.span)
        if r.is_bare and r.name in engine.registers:
            return A.Ref(engine.name, [A.FieldSel(r.name, r.span)], r.span)
        return None

    return rewrite_refs(e, rename)


def device_functions(e: A.Expr, device: A.DeviceDecl) -> A.Expr:
    """Write out the device's time resources `f (x) = e;` where `execute` calls them."""
    functions = {r.name: r for r in device.resources if isinstance(r, A.TimeResource)}

    def expand(x: A.Expr) -> A.Expr:
        if isinstance(x, A.Call) and x.fn in functions:
            f = functions[x.fn]
            if len(x.args) != len(f.params):
                raise err(f"device resource `{f.name}` takes {len(f.params)} argument(s), given {len(x.args)}", x.span)
            return expand(substitute(f.value, dict(zip(f.params, [expand(a) for a in x.args]))))
        if isinstance(x, A.Call):
            return A.Call(x.fn, [expand(a) for a in x.args], x.span)
        if isinstance(x, A.Unary):
            return A.Unary(x.op, expand(x.operand), x.span)
        if isinstance(x, A.Binary):
            return A.Binary(x.op, expand(x.lhs), expand(x.rhs), x.span)
        if isinstance(x, A.Cond):
            return A.Cond(expand(x.test), expand(x.then), expand(x.otherwise), x.span)
        return x

    return expand(e)


def lower_engine(engine: Engine, expand_defs, const_value) -> A.StepStageDecl:
    """The step stage of an engine. `expand_defs` writes out the program's defs (the schedule's
    predicates compare after that); `const_value` folds a constant expression or returns None."""
    d = engine.decl
    if d.tokens is None:
        raise err(f"engine `{engine.name}` has no `tokens cap` (write `tokens cap inf;` for none)", d.span)
    if d.schedule is None:
        raise err(f"engine `{engine.name}` has no `schedule {{ … }}`", d.span)
    if d.execute is None:
        raise err(f"engine `{engine.name}` has no `execute (…)`: the batch's time", d.span)
    engine.registers = {n for n, _, _ in d.states}
    declared: dict[str, object] = {}
    for name, value, span in d.states:
        if name in declared:
            raise err(f"engine `{engine.name}` declares `state {name}` twice (first at "
                      f"{declared[name].line}:{declared[name].col}): a register has one starting value", span)
        declared[name] = span
        if const_value(value) is None:
            raise err(f"`state {name} = …` starts at a constant", span)
    budget = engine_value(expand_defs(d.tokens), engine, "tokens")
    for n in walk_expr(budget):
        if isinstance(n, A.Call) and n.fn == "budget_left":
            raise err("`tokens cap` may not read budget_left: it plans the iteration", n.span)
    cost = engine_value(device_functions(expand_defs(d.execute), engine.device), engine, "execute")
    sched = d.schedule
    lets = {}
    for let in sched.lets:
        if let.name in lets:
            raise err(f"the schedule's let `{let.name}` is declared twice", let.span)
        lets[let.name] = engine_value(expand_defs(let.value), engine, "schedule")
    body = [_sstmt(s, engine, expand_defs, lets) for s in sched.body]
    _check_paths(body, sched.span)
    chunk = _chunk(body, lets, const_value, sched.span)
    granule = None
    if d.granule is not None:
        granule = engine_value(expand_defs(d.granule), engine, "schedule")
    serve, iteration = _schedule_shape(body, sched.span)
    takings = [s.taking for s in _all_sstmts(body) if isinstance(s, A.SAdmit) and s.taking is not None]
    admits = [s for s in _all_sstmts(body) if isinstance(s, A.SAdmit)]
    if takings:
        first = takings[0]
        key = _taking_key(first)
        for t, a in zip(takings, admits):
            if _taking_key(t) != key:
                raise err("every `admit waiting` of an engine writes the same `taking`", a.span)
        if len(takings) != len(admits):
            raise err("every `admit waiting` of an engine writes the same `taking`",
                      next(a for a in admits if a.taking is None).span)
        engine.taking = first
    return A.StepStageDecl(engine.name, engine.count, budget, cost, chunk, granule, serve, iteration,
                           [(n, v, s) for n, v, s in d.states], d.span)


def _taking_key(t: A.Taking) -> object:
    return (tuple((expr_key(p.pool), expr_key(p.units), expr_key(p.reserve)) for p in t.pools), expr_key(t.reuse))


def _sstmt(s, engine: Engine, expand_defs, lets: dict[str, A.Expr]):
    def val(e):
        if e is None:
            return None
        out = engine_value(expand_defs(e), engine, "schedule")
        for n in walk_expr(out):
            if isinstance(n, A.Ref) and n.is_bare and n.name in lets:
                raise err(f"`{n.name}` is a schedule's let: it is read only in `each at most`", n.span)
        return out

    def chunk(e):
        if e is None:
            return None
        out = engine_value(expand_defs(e), engine, "schedule")
        return substitute(out, lets)

    if isinstance(s, A.SAdvance):
        order = None
        if s.order is not None:
            kind, keys = s.order
            order = (kind, [val(k) for k in keys])
        return A.SAdvance(val(s.only), order, chunk(s.chunk), s.span)
    if isinstance(s, A.SAdmit):
        return A.SAdmit(val(s.only), val(s.guard), chunk(s.chunk), s.taking, s.span)
    if isinstance(s, A.SExclusive):
        return A.SExclusive(chunk(s.chunk), s.span)
    if isinstance(s, A.SBranch):
        return A.SBranch(val(s.test), [_sstmt(x, engine, expand_defs, lets) for x in s.then],
                         [_sstmt(x, engine, expand_defs, lets) for x in s.otherwise] if s.otherwise is not None else None,
                         s.span)
    if isinstance(s, A.SSet):
        if s.name not in engine.registers:
            raise err(f"`set {s.name}` in a schedule sets a register: declare it with `state {s.name} = …;`", s.span)
        return A.SSet(s.name, val(s.value), s.span)
    raise err("not a schedule statement", getattr(s, "span", None))  # pragma: no cover


def _all_sstmts(body):
    for s in body:
        yield s
        if isinstance(s, A.SBranch):
            yield from _all_sstmts(s.then)
            yield from _all_sstmts(s.otherwise or [])


def _check_paths(body, span) -> None:
    """Every path through the schedule advances or admits: an engine that schedules nothing
    waits for an event, and the clock moving is none."""

    def acts(stmts) -> bool:
        for s in stmts:
            if isinstance(s, (A.SAdvance, A.SAdmit, A.SExclusive)):
                return True
            if isinstance(s, A.SBranch) and acts(s.then) and acts(s.otherwise or []):
                return True
        return False

    if not acts(body):
        raise err("the schedule has a path that neither advances nor admits", span)


def _chunk(body, lets, const_value, span) -> A.Expr | None:
    chunks = [s.chunk for s in _all_sstmts(body) if getattr(s, "chunk", None) is not None]
    if not chunks:
        return None
    key = expr_key(chunks[0])
    for c in chunks[1:]:
        if expr_key(c) != key:
            raise err("`each at most` is one cap per run for the whole iteration: every clause writes the same",
                      c.span)
    return _check_chunk(chunks[0], const_value)


def _check_chunk(e: A.Expr, const_value) -> A.Expr:
    """A chunk cap chooses among constants (its conditions may read the iteration) or is max(k, e)
    with k a constant above 0; `inf` is no cap, which the kernel reads as 0."""
    if isinstance(e, A.Inf):
        return A.Num(0.0, e.span)
    v = const_value(e)
    if v is not None:
        if v == math.inf:
            return A.Num(0.0, e.span)
        if not v > 0:
            raise err(f"`each at most` is {v:g}: a cap at or below 0 would read as no cap", e.span)
        return e
    if isinstance(e, A.Cond):
        test = const_value(e.test)
        if test is not None:  # a condition over constants chooses one arm once and for all
            return _check_chunk(e.then if test != 0 else e.otherwise, const_value)
        return A.Cond(e.test, _check_chunk(e.then, const_value), _check_chunk(e.otherwise, const_value), e.span)
    if isinstance(e, A.Call) and e.fn == "max" and len(e.args) == 2:
        k = const_value(e.args[0])
        if k is None or not 0 < k < math.inf:
            raise err("`each at most (max(k, e))`: k is a constant above 0, which keeps the cap above 0", e.span)
        return e
    raise err("`each at most` chooses among constants (`c ? a : b`, inf for none) or is max(k, e)", e.span)


def _schedule_shape(body, span):
    """(serve, iteration) per the *Engines on devices* table."""
    advances = [s for s in _all_sstmts(body) if isinstance(s, A.SAdvance)]
    orders = {expr_key_order(s.order) for s in advances}
    if len(orders) > 1:
        raise err("the schedule's `advance running` statements name different orders: a step stage has one", span)
    order = advances[0].order if advances else None
    serve = ("by", _order_keys(order))
    exclusive = [s for s in _all_sstmts(body) if isinstance(s, A.SExclusive)]
    if exclusive:
        if (len(body) == 2 and body[0] is exclusive[0] and isinstance(body[1], A.SAdmit) and body[1].only is None
                and _is_vllm_gate(body[1].guard)):
            return ("exclusive_prefill", []), None
        raise err("`exclusive prefill` appears only as `exclusive prefill; admit waiting while "
                  "(running.preempted == 0);`, and `only` cannot be combined with it", exclusive[0].span)
    if (len(body) == 2 and isinstance(body[0], A.SAdvance) and isinstance(body[1], A.SAdmit)
            and _is_vllm_gate(body[1].guard)):
        a, b = body
        if a.only is None and b.only is None:
            return serve, None
        if expr_key(a.only) == expr_key(b.only):
            return serve, [A.SAdvance(a.only, None, None, a.span), A.SAdmit(b.only, _not_preempted(b.span), None, None, b.span)]
    return serve, body


def expr_key_order(order) -> object:
    if order is None:
        return ("admission",)
    kind, keys = order
    if kind == "admission":
        return ("admission",)
    return (kind, tuple(expr_key(k) for k in keys))


def _order_keys(order) -> list[A.Expr]:
    if order is None or order[0] == "admission":
        return []
    kind, keys = order
    if kind == "decode_first":
        sp = A.NOWHERE
        return [A.Cond(A.Ref("decoding", [], sp), A.Num(0.0, sp), A.Num(1.0, sp), sp)]
    for k in keys:
        for n in walk_expr(k):
            if isinstance(n, A.Draw):
                raise err("a serve order's key may not draw", n.span)
    return keys


def _is_vllm_gate(guard) -> bool:
    return (isinstance(guard, A.Binary) and guard.op == "==" and isinstance(guard.lhs, A.Ref)
            and guard.lhs.name == "preempted" and guard.lhs.is_bare and isinstance(guard.rhs, A.Num)
            and guard.rhs.value == 0)


def _not_preempted(span) -> A.Expr:
    return A.Unary("!", A.Ref("preempted", [], span), span)
