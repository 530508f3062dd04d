"""Parse-time rewrites on the surface AST: def expansion, aggregates,
`branch with`, and `at admission` bindings. The result is the kernel AST the
linker reads; these constructs leave no trace in the IR."""

from __future__ import annotations

import copy
from dataclasses import fields, is_dataclass
from typing import Callable

from serq.errors import SerqError
from serq.limits import BLOCK_DEPTH, DEF_DEPTH, EXPR_DEPTH, nesting_error
from serq.syntax import ast as A

AGGREGATE_TERM_LIMIT = 4096


def expr_depth(e: A.Expr) -> int:
    """How deep an expression nests, as the parser counts it (serq/limits.py): every node a level,
    an index one more; iteratively, whatever its depth."""
    best = 0
    stack = [(e, 1)]
    while stack:
        node, d = stack.pop()
        if d > best:
            best = d
        if isinstance(node, A.Ref):
            stack.extend((s.index, d + 2) for s in node.selectors if isinstance(s, A.IndexSel))
        elif isinstance(node, (A.Call, A.Draw)):
            stack.extend((a, d + 1) for a in node.args)
        elif isinstance(node, A.Aggregate):
            stack.extend([(node.count, d + 1), (node.body, d + 1)])
        elif isinstance(node, A.Unary):
            stack.append((node.operand, d + 1))
        elif isinstance(node, A.Binary):
            stack.extend([(node.lhs, d + 1), (node.rhs, d + 1)])
        elif isinstance(node, A.Cond):
            stack.extend([(node.test, d + 1), (node.then, d + 1), (node.otherwise, d + 1)])
    return best


def _too_deep_expr(span: A.Span, where: str = "") -> SerqError:
    return nesting_error(f"an expression nests at most {EXPR_DEPTH} deep", EXPR_DEPTH, span, where)


def _too_deep_block(span: A.Span, where: str = "") -> SerqError:
    return nesting_error(f"blocks nest at most {BLOCK_DEPTH} deep", BLOCK_DEPTH, span, where)


def balanced_sum(terms: list[A.Expr], span: A.Span) -> A.Expr:
    """t0 + t1 + … + t(n-1) as a balanced tree: pairs, then pairs of pairs (((t0 + t1) + (t2 + t3)) + …),
    so that n terms nest ceil(log2 n) deep, not n. The order is fixed: the same sum every time."""
    while len(terms) > 1:
        paired = [A.Binary("+", terms[i], terms[i + 1], span) for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            paired.append(terms[-1])
        terms = paired
    return terms[0]


def walk_expr(e: A.Expr):
    """Every expression node below e, e included."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, A.Ref):
            stack.extend(s.index for s in node.selectors if isinstance(s, A.IndexSel))
        elif isinstance(node, (A.Call, A.Draw)):
            stack.extend(node.args)
        elif isinstance(node, A.Aggregate):
            stack.extend([node.count, node.body])
        elif isinstance(node, A.Unary):
            stack.append(node.operand)
        elif isinstance(node, A.Binary):
            stack.extend([node.lhs, node.rhs])
        elif isinstance(node, A.Cond):
            stack.extend([node.test, node.then, node.otherwise])


def draws(e: A.Expr) -> A.Draw | None:
    return next((n for n in walk_expr(e) if isinstance(n, A.Draw)), None)


def substitute(e: A.Expr, mapping: dict[str, A.Expr]) -> A.Expr:
    """e with every bare name in `mapping` replaced by (a copy of) its expression.

    A name with members (`p[0]`, `p.kv`) whose value is a reference extends that
    reference, so a def's parameter can stand for a pool.
    """
    if isinstance(e, A.Ref):
        sels = [A.IndexSel(substitute(s.index, mapping), s.span) if isinstance(s, A.IndexSel) else s
                for s in e.selectors]
        if e.name in mapping:
            value = copy.deepcopy(mapping[e.name])
            if not sels:
                return value
            if isinstance(value, A.Ref):
                return A.Ref(value.name, value.selectors + sels, e.span)
            raise SerqError(f"`{e.name}` stands for an expression here; it has no members or indices",
                            e.span, "link")
        return A.Ref(e.name, sels, e.span)
    if isinstance(e, A.Call):
        return A.Call(e.fn, [substitute(a, mapping) for a in e.args], e.span)
    if isinstance(e, A.Draw):
        return A.Draw(e.dist, [substitute(a, mapping) for a in e.args], e.span)
    if isinstance(e, A.Aggregate):
        inner = {k: v for k, v in mapping.items() if k != e.var}
        return A.Aggregate(e.fn, e.var, substitute(e.count, mapping), substitute(e.body, inner), e.span)
    if isinstance(e, A.Unary):
        return A.Unary(e.op, substitute(e.operand, mapping), e.span)
    if isinstance(e, A.Binary):
        return A.Binary(e.op, substitute(e.lhs, mapping), substitute(e.rhs, mapping), e.span)
    if isinstance(e, A.Cond):
        return A.Cond(substitute(e.test, mapping), substitute(e.then, mapping),
                      substitute(e.otherwise, mapping), e.span)
    return copy.deepcopy(e)


def map_stmt_exprs(s, fn: Callable[[A.Expr], A.Expr]):
    """A copy of statement (or any AST node) s with fn applied to each of its expressions
    and to the statements of its blocks, recursively."""
    if isinstance(s, (A.Num, A.Inf, A.Ref, A.Call, A.Aggregate, A.Draw, A.Unary, A.Binary, A.Cond)):
        return fn(s)
    if isinstance(s, list):
        return [map_stmt_exprs(x, fn) for x in s]
    if isinstance(s, tuple):
        return tuple(map_stmt_exprs(x, fn) for x in s)
    if is_dataclass(s) and not isinstance(s, A.Span):
        kwargs = {f.name: map_stmt_exprs(getattr(s, f.name), fn) for f in fields(s)}
        return type(s)(**kwargs)
    return s


class Expander:
    """Expands defs and aggregates in expressions and statement lists."""

    def __init__(self, definitions: dict[str, A.Definition], constant_count: Callable[[A.Expr], int],
                 taken_names: Callable[[str], bool]) -> None:
        self.definitions = definitions
        self.constant_count = constant_count
        self.taken_names = taken_names
        self.terms = 0
        self._stack: list[str] = []
        self._block_depth: list[int] = []  # the blocks around each def of statements being written out

    # -- expressions
    def expr(self, e: A.Expr, depth: int = 0) -> A.Expr:
        """e with its defs and aggregates written out; `depth` is the levels above it in the
        expression being written (serq/limits.py: the result nests at most EXPR_DEPTH deep)."""
        if isinstance(e, A.Call) and e.fn in self.definitions:
            d = self.definitions[e.fn]
            if d.expr is None:
                raise SerqError(f"`{e.fn}` is a def of statements: call it as a statement, `{e.fn}(…);`",
                                e.span, "link")
            return self.expr(self._instantiate(d, e.args, e.span, d.expr, depth), depth)
        if isinstance(e, A.Aggregate):
            return self._aggregate(e, depth)
        here = depth + 1
        if here > EXPR_DEPTH:
            raise _too_deep_expr(e.span, f" (where {' in '.join(self._stack)} is written out)" if self._stack else "")
        if isinstance(e, A.Ref):
            return A.Ref(e.name, [A.IndexSel(self.expr(s.index, here + 1), s.span) if isinstance(s, A.IndexSel)
                                  else s for s in e.selectors], e.span)
        if isinstance(e, A.Call):
            return A.Call(e.fn, [self.expr(a, here) for a in e.args], e.span)
        if isinstance(e, A.Draw):
            return A.Draw(e.dist, [self.expr(a, here) for a in e.args], e.span)
        if isinstance(e, A.Unary):
            return A.Unary(e.op, self.expr(e.operand, here), e.span)
        if isinstance(e, A.Binary):
            return A.Binary(e.op, self.expr(e.lhs, here), self.expr(e.rhs, here), e.span)
        if isinstance(e, A.Cond):
            return A.Cond(self.expr(e.test, here), self.expr(e.then, here), self.expr(e.otherwise, here), e.span)
        return e

    def _instantiate(self, d: A.Definition, args: list[A.Expr], span: A.Span, body, depth: int = 0):
        if len(args) != len(d.params):
            raise SerqError(f"`{d.name}` takes {len(d.params)} argument(s), given {len(args)}", span, "link")
        if d.name in self._stack:
            chain = " -> ".join([*self._stack[self._stack.index(d.name):], d.name])
            raise SerqError(f"def `{d.name}` calls itself ({chain}): a def is expanded where it is called, "
                            "so it may not recurse", span, "link")
        if len(self._stack) >= DEF_DEPTH:
            raise nesting_error(f"defs are written out inside one another at most {DEF_DEPTH} deep", DEF_DEPTH,
                                span, f" (`{d.name}` in {' in '.join(reversed(self._stack[-3:]))} …)")
        for a in args:  # an argument is copied into the body: one already too deep where it stands is refused
            if depth + 1 + expr_depth(a) > EXPR_DEPTH:
                raise _too_deep_expr(a.span, f" (an argument of `{d.name}`)")
        for p, a in zip(d.params, args):
            dr = draws(a)
            if dr is not None:
                raise SerqError(f"argument `{p}` of `{d.name}` draws (~{dr.dist}): arguments are substituted, "
                                "so a draw would be drawn at every use; draw into an attribute first",
                                dr.span, "link")
        mapping = dict(zip(d.params, args))
        self._stack.append(d.name)
        try:
            if isinstance(body, list):
                out = map_stmt_exprs(body, lambda x: substitute(x, mapping))
                return self.stmts(out, self._block_depth[-1] if self._block_depth else 0)
            return self.expr(substitute(body, mapping), depth)
        finally:
            self._stack.pop()

    def _aggregate(self, e: A.Aggregate, depth: int = 0) -> A.Expr:
        if self.taken_names(e.var):
            raise SerqError(f"`{e.fn} {e.var} in …`: `{e.var}` is already a name of the program; "
                            "an aggregate's index is a new name", e.span, "link")
        n = self.constant_count(e.count)
        if n < 1:
            raise SerqError(f"`{e.fn} {e.var} in {n}`: an aggregate has at least one term", e.span, "link")
        self.terms += n
        if self.terms > AGGREGATE_TERM_LIMIT:
            raise SerqError(f"aggregates write out more than {AGGREGATE_TERM_LIMIT} terms in this program",
                            e.span, "link")
        if e.fn in ("max", "min"):  # max(t0, …, t(n-1)): one level
            inner = depth + 1
        else:  # a balanced sum (balanced_sum): ceil(log2 n) levels
            inner = depth + (n - 1).bit_length()
        if inner + 1 > EXPR_DEPTH:
            raise _too_deep_expr(e.span, f" (`{e.fn} {e.var} in {n}` writes its terms {inner - depth} deep)")
        terms = [self.expr(substitute(e.body, {e.var: A.Num(float(k), e.span)}), inner) for k in range(n)]
        if e.fn in ("max", "min"):
            return A.Call(e.fn, terms, e.span)
        return balanced_sum(terms, e.span)

    # -- statements
    def stmts(self, body: list[A.Stmt], depth: int = 0) -> list[A.Stmt]:
        """The statements with their defs written out; `depth` is the blocks around them (the
        result nests at most BLOCK_DEPTH deep)."""
        out: list[A.Stmt] = []
        for s in body:
            if isinstance(s, A.CallStmt) and s.name in self.definitions:
                d = self.definitions[s.name]
                if d.body is None:
                    raise SerqError(f"`{s.name}` is a def of an expression: use it in an expression",
                                    s.span, "link")
                self._block_depth.append(depth)
                try:
                    out.extend(self._instantiate(d, s.args, s.span, d.body))
                finally:
                    self._block_depth.pop()
                continue
            out.append(self.stmt(s, depth))
        return out

    def stmt(self, s: A.Stmt, depth: int = 0) -> A.Stmt:
        if _has_blocks(s) and depth + 1 > BLOCK_DEPTH:
            raise _too_deep_block(s.span, f" (where {' in '.join(self._stack)} is written out)" if self._stack else "")
        s = map_stmt_exprs(s, self.expr) if not _has_blocks(s) else self._with_blocks(s, depth + 1)
        if isinstance(s, A.Branch) and s.draw:
            p = s.test
            return A.Branch(A.Draw("bernoulli", [p], p.span), s.then, s.otherwise, False, s.span)
        if isinstance(s, A.Hold) and s.bindings:
            return self._bind(s)
        return s

    def _with_blocks(self, s, depth: int):
        kwargs = {}
        for f in fields(s):
            v = getattr(s, f.name)
            if f.name in ("body", "then", "otherwise") and isinstance(v, list):
                kwargs[f.name] = self.stmts(v, depth)
            else:
                kwargs[f.name] = map_stmt_exprs(v, self.expr)
        return type(s)(**kwargs)

    def _bind(self, h: A.Hold) -> A.Hold:
        """Substitute `at admission` bindings into the header; set the ones the body reads at its top."""
        mapping: dict[str, A.Expr] = {}
        live: dict[str, str] = {}
        for b in h.bindings:
            dr = draws(b.value)
            if dr is not None:
                raise SerqError(f"binding `{b.name}` draws (~{dr.dist}): a binding is substituted, "
                                "so a name used twice would draw twice", dr.span, "link")
            if b.name in mapping:
                raise SerqError(f"binding `{b.name}` is bound twice in one `at admission`", b.span, "link")
            value = substitute(b.value, mapping)
            reason = _live_state(value, live)
            if reason:
                live[b.name] = reason
            mapping[b.name] = value
        pools = [A.HoldPool(p.pool, substitute(p.units, mapping),
                            substitute(p.reserve, mapping) if p.reserve is not None else None, p.span)
                 for p in h.pools]
        reuse = substitute(h.reuse, mapping) if h.reuse is not None else None
        read = _names_read([h.body, h.cache, h.lease])
        prologue: list[A.Stmt] = []
        for b in h.bindings:
            if b.name not in read:
                continue
            if b.name in live:
                raise SerqError(
                    f"the body of this hold reads `{b.name}`, a binding that reads live state ({live[b.name]}), "
                    "which has another value in the body; the body reads `cached`, the units the admission consumed",
                    read[b.name], "parse")
            prologue.append(A.Set(A.Ref(b.name, [], b.span), mapping[b.name], b.span))
        return A.Hold(pools, reuse, [], prologue + h.body, h.cache, h.lease, h.span)


def _has_blocks(s) -> bool:
    return isinstance(s, (A.Hold, A.Branch, A.While, A.Loop, A.Fork))


_LIVE_CALLS = frozenset({"cachedin", "budget_left", "used", "free", "holders", "queued", "queue", "busy",
                         "work", "blocksize"})


def _live_state(e: A.Expr, live_bindings: dict[str, str]) -> str | None:
    from serq.ir.catalogue import RESERVED_CONTEXT
    for n in walk_expr(e):
        if isinstance(n, A.Call) and n.fn in _LIVE_CALLS:
            return f"{n.fn}(…)"
        if isinstance(n, A.Ref) and n.is_bare:
            if n.name in RESERVED_CONTEXT:
                return n.name
            if n.name == "cached":
                return "cached, which the admission sets"
            if n.name in live_bindings:
                return live_bindings[n.name]
    return None


def _names_read(nodes) -> dict[str, A.Span]:
    found: dict[str, A.Span] = {}

    def visit(e: A.Expr) -> A.Expr:
        for n in walk_expr(e):
            if isinstance(n, A.Ref) and n.name not in found:
                found[n.name] = n.span
        return e

    map_stmt_exprs(nodes, visit)
    return found
