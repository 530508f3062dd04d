"""Constant folding of IR expressions, and the attributes they read: what the linker's checks, the
interpreter's compiler, the Lean generators and `serq target` ask of an expression of the IR.

Its own small module so that those readers of the IR need not import the linker (and the linker's
checks in flow.py need not import linker.py, which imports them).
"""

from __future__ import annotations

import math

from serq.ir import models as ir
from serq.link.consts import apply_binary, apply_function


def attrs_read(e) -> set[str]:
    """The attributes an IR expression (or statement) reads."""
    return {n.name for n in ir.walk(e) if isinstance(n, ir.Attr)}


def fold(e: ir.Expr) -> float | None:
    """The value of an IR expression that reads no state, attribute or draw; else None."""
    if isinstance(e, ir.Num):
        return float(e.value)
    if isinstance(e, ir.Inf):
        return math.inf
    if isinstance(e, ir.CostOf):
        return fold(e.arg)
    if isinstance(e, ir.Unary):
        v = fold(e.arg)
        if v is None:
            return None
        return -v if e.op == "neg" else float(v == 0)
    if isinstance(e, ir.Binary):
        a, b = fold(e.lhs), fold(e.rhs)
        if a is None or b is None:
            return None
        return apply_binary(e.op, a, b)
    if isinstance(e, ir.Cond):
        t = fold(e.test)
        if t is None:
            return None
        return fold(e.then) if t != 0 else fold(e.otherwise)
    if isinstance(e, ir.Call):
        vals = [fold(a) for a in e.args]
        if any(v is None for v in vals):
            return None
        return apply_function(e.fn, vals)  # type: ignore[arg-type]
    return None
