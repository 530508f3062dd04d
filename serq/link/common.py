"""What the linker's parts share: the refusal, the type of an amount, and how a moment, a
reference and an arity are worded in a message (serq/link/linker.py and the expression and
statement linking it is made of)."""

from __future__ import annotations

from dataclasses import dataclass, field

from serq.errors import SerqError
from serq.ir import models as ir
from serq.ir.catalogue import Moment as M
from serq.link.consts import format_number
from serq.syntax import ast as A

Type = frozenset | None  # None: a number; a frozenset: a cost of those resources


def link_error(msg: str, span: A.Span | None) -> SerqError:
    """A refusal of the program, at `span`."""
    return SerqError(msg, span, "link")


def type_name(t: Type) -> str:
    return "a plain number" if t is None else "a cost of " + ", ".join(sorted(t))


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


def arity_text(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"


def moment_text(m: M) -> str:
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


def show_ref(r: A.Ref) -> str:
    out = r.name
    for s in r.selectors:
        if isinstance(s, A.FieldSel):
            out += "." + s.name
        else:
            ix = s.index
            inner = (format_number(ix.value) if isinstance(ix, A.Num)
                     else show_ref(ix) if isinstance(ix, A.Ref) else "…")
            out += f"[{inner}]"
    return out
