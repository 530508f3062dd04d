"""An engine's `request (…) { … }` at its call site (*An engine's request*).

`E (a, …);` in the server is replaced by the request's statements with each
parameter substituted: the statements before `at admission`, then a hold of the
pools the engine's `taking` names, its bindings, the statements after as its
body (`prefill`/`decode` as the engine's runs, `mark` as a set) and its cache.
"""

from __future__ import annotations

from serq.link.expand import map_stmt_exprs, substitute
from serq.lower.common import err, refuse_drawing_arguments
from serq.lower.engines import Engine
from serq.syntax import ast as A


def cost(resources: list[str], e: A.Expr, span: A.Span) -> A.Call:
    return A.Call("cost", [*(A.Ref(r, [], span) for r in resources), e], span)


def mark_stmt(owner: str, name: str, span: A.Span) -> A.Set:
    """`mark m;` -> `set OWNER.m = now;`, read afterwards as OWNER.m."""
    return A.Set(A.Ref(owner, [A.FieldSel(name, span)], span), A.Ref("now", [], span), span)


def expand_request(engine: Engine, call: A.CallStmt) -> list[A.Stmt]:
    req = engine.decl.request
    assert req is not None
    if len(call.args) != len(req.params):
        raise err(f"`{engine.name}(…)` takes {len(req.params)} argument(s) ({', '.join(req.params)}), "
                  f"given {len(call.args)}", call.span)
    refuse_drawing_arguments(call.args, req.params, f"`{engine.name}(…)`")
    mapping = dict(zip(req.params, call.args))
    items = map_stmt_exprs(req.items, lambda e: substitute(e, mapping))
    for original in _sets(req.items):
        if original.target.is_bare and original.target.name in req.params:
            raise err(f"the request sets its parameter `{original.target.name}`: a request sets no parameter",
                      original.span)

    before: list[A.Stmt] = []
    after: list[A.Stmt] = []
    bindings: list[A.Binding] | None = None
    cache: A.Expr | None = None
    for i, item in enumerate(items):
        if isinstance(item, A.RequestAdmission):
            if bindings is not None:
                raise err("a request has one `at admission`", item.span)
            bindings = item.bindings
            continue
        if isinstance(item, A.RequestCache):
            if i != len(items) - 1:
                raise err("`cache (…);` is the request's last item", item.span)
            cache = item.value
            continue
        stmt = _request_stmt(item, engine)
        (after if bindings is not None else before).append(stmt)

    taking = engine.taking
    if taking is None:
        if bindings is not None:
            raise err(f"engine `{engine.name}` takes nothing (`admit waiting … taking …`), so its request has no "
                      "`at admission`", req.span)
        if cache is not None:
            raise err(f"engine `{engine.name}` takes nothing, so its request has no `cache`", req.span)
        return before + after
    if bindings is None:
        # without `at admission`, the admission is at the request's top
        after, before = before, []
    taking = map_stmt_exprs(taking, lambda e: substitute(e, mapping))
    pools = [p.pool.name for p in taking.pools]
    hold_pools = [A.HoldPool(p.pool, cost([p.pool.name], p.units, p.span),
                             cost([p.pool.name], p.reserve, p.span) if p.reserve is not None else None, p.span)
                  for p in taking.pools]
    reuse = cost(pools, taking.reuse, taking.span) if taking.reuse is not None else None
    hold = A.Hold(hold_pools, reuse, bindings or [], after,
                  cost(pools, cache, cache.span) if cache is not None else None, None, call.span)
    return before + [hold]


def _request_stmt(item, engine: Engine):
    if isinstance(item, A.RequestRun):
        run = A.Run([A.Ref(engine.name, [], item.span)], item.mode, cost([engine.name], item.work, item.span),
                    item.growing, item.span)
        return run
    if isinstance(item, A.Mark):
        return mark_stmt(engine.name, item.name, item.span)
    for attr in ("body", "then", "otherwise"):
        inner = getattr(item, attr, None)
        if isinstance(inner, list):
            setattr(item, attr, [_request_stmt(x, engine) for x in inner])
    return item


def _sets(items):
    for s in items:
        if isinstance(s, A.Set):
            yield s
        for attr in ("body", "then", "otherwise"):
            inner = getattr(s, attr, None)
            if isinstance(inner, list):
                yield from _sets(inner)
