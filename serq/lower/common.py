"""What the lowering passes share: errors, structural equality of expressions,
and rewriting the names an expression reads."""

from __future__ import annotations

from typing import Callable

from serq.errors import SerqError
from serq.link.expand import map_stmt_exprs, walk_expr
from serq.syntax import ast as A


def err(msg: str, span: A.Span | None) -> SerqError:
    return SerqError(msg, span, "link")


def expr_key(e) -> object:
    """A value equal for two expressions that read the same, whatever their spans."""
    if e is None:
        return None
    if isinstance(e, A.Num):
        return ("num", e.value)
    if isinstance(e, A.Inf):
        return ("inf",)
    if isinstance(e, A.Ref):
        return ("ref", e.name, tuple(("f", s.name) if isinstance(s, A.FieldSel) else ("i", expr_key(s.index))
                                      for s in e.selectors))
    if isinstance(e, A.Call):
        return ("call", e.fn, tuple(expr_key(a) for a in e.args))
    if isinstance(e, A.Draw):
        return ("draw", e.dist, tuple(expr_key(a) for a in e.args))
    if isinstance(e, A.Aggregate):
        return ("agg", e.fn, e.var, expr_key(e.count), expr_key(e.body))
    if isinstance(e, A.Unary):
        return ("un", e.op, expr_key(e.operand))
    if isinstance(e, A.Binary):
        return ("bin", e.op, expr_key(e.lhs), expr_key(e.rhs))
    if isinstance(e, A.Cond):
        return ("cond", expr_key(e.test), expr_key(e.then), expr_key(e.otherwise))
    raise TypeError(type(e))


def rewrite_refs(e: A.Expr, fn: Callable[[A.Ref], A.Expr | None]) -> A.Expr:
    """e with each reference r replaced by fn(r) (None: keep r, rewriting its indices)."""
    if isinstance(e, A.Ref):
        out = fn(e)
        if out is not None:
            return out
        return A.Ref(e.name, [A.IndexSel(rewrite_refs(s.index, fn), s.span) if isinstance(s, A.IndexSel) else s
                              for s in e.selectors], e.span)
    if isinstance(e, A.Call) and e.fn == "cost":
        # the resources of cost(…) are array names: a renaming that would index them leaves them alone
        resources = []
        for a in e.args[:-1]:
            out = fn(a) if isinstance(a, A.Ref) else None
            resources.append(out if isinstance(out, A.Ref) and out.is_bare else a)
        return A.Call(e.fn, resources + [rewrite_refs(e.args[-1], fn)], e.span)
    if isinstance(e, A.Call):
        return A.Call(e.fn, [rewrite_refs(a, fn) for a in e.args], e.span)
    if isinstance(e, A.Draw):
        return A.Draw(e.dist, [rewrite_refs(a, fn) for a in e.args], e.span)
    if isinstance(e, A.Aggregate):
        return A.Aggregate(e.fn, e.var, rewrite_refs(e.count, fn), rewrite_refs(e.body, fn), e.span)
    if isinstance(e, A.Unary):
        return A.Unary(e.op, rewrite_refs(e.operand, fn), e.span)
    if isinstance(e, A.Binary):
        return A.Binary(e.op, rewrite_refs(e.lhs, fn), rewrite_refs(e.rhs, fn), e.span)
    if isinstance(e, A.Cond):
        return A.Cond(rewrite_refs(e.test, fn), rewrite_refs(e.then, fn), rewrite_refs(e.otherwise, fn), e.span)
    return e


def rewrite_stmt_refs(node, fn: Callable[[A.Ref], A.Expr | None]):
    return map_stmt_exprs(node, lambda e: rewrite_refs(e, fn))


def draws(e: A.Expr) -> A.Draw | None:
    return next((n for n in walk_expr(e) if isinstance(n, A.Draw)), None)


def refuse_drawing_arguments(args: list[A.Expr], params: list[str], what: str) -> None:
    for p, a in zip(params, args):
        d = draws(a)
        if d is not None:
            raise err(f"argument `{p}` of {what} draws (~{d.dist}): arguments are substituted, so a draw "
                      "would be drawn at every use; draw into an attribute first", d.span)
