"""IR expressions and settings as short text, for pictures and tables (`serq draw`, `serq sweep`).

The text is for a person reading a drawing, not for parsing back: `cost(r, e)` is written `e` (the
resources are the statement's), numbers are shortened to six significant digits, and a long
expression can be cut (`clip`). `ExpressionText` is the one writer of expressions: serq.ir.to_source
writes them with it as the grammar reads them back.
"""

from __future__ import annotations

import math
from typing import Callable

from serq.ir import models as ir

# the grammar's precedence levels (serq/syntax/grammar.lark): a comparison does not chain
_OR, _AND, _CMP, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 5, 6, 7, 9
_BINARY = {
    "or": ("||", _OR), "and": ("&&", _AND),
    "eq": ("==", _CMP), "ne": ("!=", _CMP), "lt": ("<", _CMP), "le": ("<=", _CMP), "gt": (">", _CMP), "ge": (">=", _CMP),
    "add": ("+", _ADD), "sub": ("-", _ADD), "mul": ("*", _MUL), "div": ("/", _MUL), "mod": ("%", _MUL),
}


def num(v) -> str:
    """A number as a person writes it: integers whole, others to six significant digits."""
    if v == "inf":
        return "inf"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    v = float(v)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


class ExpressionText:
    """IR expressions as text, parenthesised as the grammar reads them. `number` writes a number;
    `costs`: `cost(r, e)` written whole (else as its amount `e`); `names`: what the kernel's context
    variables are written as (an engine's clause writes `residents` as `running.count`)."""

    def __init__(self, number: Callable = num, costs: bool = False, names: dict[str, str] | None = None) -> None:
        self.number, self.costs, self.names = number, costs, names or {}

    def text(self, e) -> str:
        """The expression `e` (an IR expression, or None) as text."""
        return "" if e is None else self.ranked(e)[0]

    def grouped(self, e, least: int = _ATOM) -> str:
        """The expression's text, parenthesised when it binds less tightly than `least`."""
        s, p = self.ranked(e)
        return f"({s})" if p < least else s

    def list(self, es) -> str:
        return ", ".join(self.text(e) for e in es)

    def pool(self, r: ir.PoolRef) -> str:
        return r.pool if r.index is None else f"{r.pool}[{self.text(r.index)}]"

    def stage(self, r: ir.StageRef) -> str:
        return r.stage if r.index is None else f"{r.stage}[{self.text(r.index)}]"

    def ranked(self, e) -> tuple[str, int]:
        """The text and its precedence level."""
        k = e.kind
        if k == "num":
            return self.number(e.value), _ATOM
        if k == "inf":
            return "inf", _ATOM
        if k == "attr":
            return e.name, _ATOM
        if k == "ctx":
            return self.names.get(e.var, e.var), _ATOM
        if k == "reg":
            return f"{e.stage}.{e.name}", _ATOM
        if k == "unary":
            return ("-" if e.op == "neg" else "!") + self.grouped(e.arg), _UNARY
        if k == "binary":
            op, p = _BINARY[e.op]
            if p == _CMP:  # (non-associative: both operands above it)
                return f"{self.grouped(e.lhs, _CMP + 1)} {op} {self.grouped(e.rhs, _CMP + 1)}", p
            # left-associative: the right operand of an equal precedence needs parentheses
            return f"{self.grouped(e.lhs, p)} {op} {self.grouped(e.rhs, p + 1)}", p
        if k == "cond":
            # (a condition in the middle arm parenthesised: the grammar reads it without, a person better with)
            return f"{self.grouped(e.test, _OR)} ? {self.grouped(e.then, _OR)} : {self.text(e.otherwise)}", 0
        if k == "call":
            return f"{e.fn}({self.list(e.args)})", _ATOM
        if k == "draw":
            return f"~{e.dist}({self.list(e.args)})", _ATOM
        if k == "cost":
            return (f"cost({', '.join([*e.resources, self.text(e.arg)])})", _ATOM) if self.costs else self.ranked(e.arg)
        if k == "pool_obs":
            return f"{e.fn}({self.pool(e.pool)})", _ATOM
        if k == "stage_obs":
            return f"{e.fn}({self.stage(e.stage)})", _ATOM
        if k == "observed":
            return f"{e.fn}({e.name})", _ATOM
        return f"<{k}>", _ATOM


_SHOWN = ExpressionText()


def ref(name: str, index) -> str:
    return name if index is None else f"{name}[{text(index)}]"


def text(e) -> str:
    """The expression `e` (an IR expression, or None) as text."""
    return _SHOWN.text(e)


def clip(s: str, width: int = 70) -> str:
    """`s` cut to `width` characters, ending in an ellipsis when cut."""
    return s if len(s) <= width else s[: width - 1] + "…"


def wrap(s: str, width: int = 60, indent: str = "    ") -> list[str]:
    """`s` broken at spaces into lines of at most `width` characters (longer words stay whole);
    the lines after the first are indented."""
    words = s.split(" ")
    lines: list[str] = []
    cur = ""
    for w in words:
        room = width - (len(indent) if lines else 0)
        if cur and len(cur) + 1 + len(w) > room:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return [lines[0]] + [indent + ln for ln in lines[1:]]


def grouped(e) -> str:
    """The expression's text, parenthesised unless it is a name, a number or a call."""
    return _SHOWN.grouped(e)


def arrival(a) -> str:
    """The arrival law: `poisson(rate 2)`, `renewal(gap ~exp(1))`, `closed(8 sessions)` …"""
    k = a.kind
    if k == "poisson":
        return f"poisson(rate {num(a.rate)}/s)"
    if k == "renewal":
        return f"renewal(gap {text(a.gap)})"
    if k in ("closed", "batch"):
        return f"{k}({a.sessions} session{'s' if a.sessions != 1 else ''})"
    if k == "trace":
        return f"trace \"{a.file}\"" + (" ordered" if a.ordered else "")
    return "none"


def is_delay(svc) -> bool:
    return svc.kind == "ps" and svc.capacity.kind == "ctx" and svc.capacity.var == "present"


def service(svc) -> str:
    """A stage's kind in one line: `fifo(2)`, `ps(200000)`, `delay`, or the step engine's summary."""
    if svc.kind == "fifo":
        return f"fifo({svc.servers})"
    if svc.kind == "ps":
        return "delay" if is_delay(svc) else f"ps({text(svc.capacity)})"
    return "step engine"


def schedule(step) -> str:
    """A step engine's schedule in one line (the IR's serve order and iteration)."""
    if step.serve.kind == "exclusive_prefill":
        order = "exclusive prefill"
    elif step.serve.keys:
        order = "advance running by (" + ", ".join(text(k) for k in step.serve.keys) + ")"
    else:
        order = "advance running"
    if step.iteration is None:
        return f"{order}; admit waiting while (running.preempted == 0)"
    return f"{order}; " + _iteration(step.iteration)


def _iteration(body) -> str:
    parts = []
    for s in body:
        if s.kind == "serve":
            parts.append("serve" + (f" only ({text(s.only)})" if s.only is not None else ""))
        elif s.kind == "admit":
            w = "admit waiting"
            if s.only is not None:
                w += f" only ({text(s.only)})"
            if s.gate is not None:
                w += f" while ({text(s.gate)})"
            parts.append(w)
        elif s.kind == "set":
            parts.append(f"{s.name} = {text(s.value)}")
        elif s.kind == "branch":
            w = f"branch ({text(s.test)}) {{ {_iteration(s.then)} }}"
            if s.otherwise:
                w += f" else {{ {_iteration(s.otherwise)} }}"
            parts.append(w)
    return "; ".join(parts)


def engine(step) -> list[str]:
    """A step engine's lines: budget and chunk, schedule, iteration time."""
    budget = f"tokens cap {text(step.budget)}"
    if not (step.chunk.kind == "num" and step.chunk.value == 0):
        budget += f" · each at most {grouped(step.chunk)}"
    if step.granule is not None:
        budget += f" · granule {grouped(step.granule)}"
    lines = [budget, "schedule: " + schedule(step), "execute: " + text(step.cost)]
    if step.registers:
        lines.append("state: " + ", ".join(f"{r.name} = {num(r.init)}" for r in step.registers))
    return lines


def pool_rules(p: ir.Pool) -> list[str]:
    """A pool's capacity and rules: cap and block; queue, evict, preempt; reserve held, spill."""
    head = f"cap {num(p.cap)}"
    if p.block is not None:
        head += f" · block {p.block}"
    if p.reserve_held:
        head += " · reserve held"
    rules = []
    rules.append("queue fifo" if p.queue.kind == "fifo"
                 else "queue by (" + ", ".join(text(k) for k in p.queue.keys) + ")")
    rules.append("evict lru" if p.evict.kind == "lru"
                 else "evict by (" + ", ".join(text(k) for k in p.evict.keys) + ")")
    if p.preempt.kind == "none":
        rules.append("preempt none")
    else:
        keys = [text(k) for k in p.preempt.keys]
        if keys == ["-admission"]:
            rules.append("preempt lifo")
        else:
            rules.append("preempt by (" + ", ".join(keys) + f") requeue {p.preempt.requeue}")
    lines = [head, " · ".join(rules)]
    if p.spill is not None:
        s = p.spill
        lines.append(f"spill to {ref(s.pool.pool, s.pool.index)} via {ref(s.stage.stage, s.stage.index)}"
                     f" when ({text(s.when)})")
    return lines
