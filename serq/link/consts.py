"""Constant folding: the values of lets, caps, counts and rates at link time."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from serq.errors import SerqError
from serq.syntax import ast as A


@dataclass(frozen=True)
class ConstValue:
    value: float
    span: A.Span
    # the supplied inputs (by argument name) this value depends on
    inputs: frozenset[str] = field(default_factory=frozenset)


def ieee_div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * (1 if math.copysign(1, b) > 0 else -1)
    return a / b


def ieee_mod(a: float, b: float) -> float:
    if b == 0 or math.isinf(a):
        return math.nan
    return math.fmod(a, b)


def apply_binary(op: str, a: float, b: float) -> float:
    """The language's binary operators on numbers (comparisons give 0/1)."""
    if op in ("+", "add"):
        return a + b
    if op in ("-", "sub"):
        return a - b
    if op in ("*", "mul"):
        if (a == 0 and math.isinf(b)) or (b == 0 and math.isinf(a)):
            return math.nan
        return a * b
    if op in ("/", "div"):
        return ieee_div(a, b)
    if op in ("%", "mod"):
        return ieee_mod(a, b)
    if op in ("==", "eq"):
        return float(a == b)
    if op in ("!=", "ne"):
        return float(a != b)
    if op in ("<", "lt"):
        return float(a < b)
    if op in ("<=", "le"):
        return float(a <= b)
    if op in (">", "gt"):
        return float(a > b)
    if op in (">=", "ge"):
        return float(a >= b)
    if op in ("&&", "and"):
        return float(a != 0 and b != 0)
    if op in ("||", "or"):
        return float(a != 0 or b != 0)
    raise ValueError(op)


def reusable(n: float, bs: float) -> float:
    """The full blocks of n tokens a prefix hit may reuse: the last token is recomputed."""
    if n <= 0:
        return 0.0
    return math.floor((n - 1) / bs) * bs


def apply_function(fn: str, args: list[float]) -> float:
    if fn == "min":
        return min(args)
    if fn == "max":
        return max(args)
    if fn == "floor":
        return float(math.floor(args[0])) if math.isfinite(args[0]) else args[0]
    if fn == "ceil":
        return float(math.ceil(args[0])) if math.isfinite(args[0]) else args[0]
    if fn == "abs":
        return abs(args[0])
    if fn == "sqrt":
        return math.sqrt(args[0]) if args[0] >= 0 else math.nan
    if fn == "exp":
        try:
            return math.exp(args[0])
        except OverflowError:
            return math.inf
    if fn == "log":
        if args[0] < 0:
            return math.nan
        return -math.inf if args[0] == 0 else math.log(args[0])
    if fn == "pow":
        try:
            return math.pow(args[0], args[1])
        except (OverflowError, ValueError):
            return math.nan
    if fn == "reusable":
        return reusable(args[0], args[1])
    raise ValueError(fn)


def format_number(v: float) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == int(v):
        return str(int(v))
    return repr(v)
