"""The surface AST: what the text says, every node with its source span.

The parser builds these; `serq.lower` rewrites the vocabulary (engines, queues,
serving forms) onto the kernel subset of the same classes; `serq.link` reads
the kernel subset and writes the IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from serq.blocks import walk_stmts  # noqa: F401  (re-exported: `ir.walk_stmts`, `ast.walk_stmts`)


@dataclass(frozen=True)
class Span:
    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOWHERE = Span("<generated>", 0, 0)


# ------------------------------------------------------------------ expressions
@dataclass
class Num:
    value: float
    span: Span = NOWHERE


@dataclass
class Inf:
    span: Span = NOWHERE


@dataclass
class FieldSel:
    name: str
    span: Span = NOWHERE


@dataclass
class IndexSel:
    index: "Expr"
    span: Span = NOWHERE


Selector = Union[FieldSel, IndexSel]


@dataclass
class Ref:
    """A name with members and indices: `x`, `kv[k]`, `D[j].kv`, `running.count`."""

    name: str
    selectors: list[Selector] = field(default_factory=list)
    span: Span = NOWHERE

    @property
    def is_bare(self) -> bool:
        return not self.selectors

    def dotted(self) -> str | None:
        """`a.b.c` when every selector is a field, else None."""
        if any(isinstance(s, IndexSel) for s in self.selectors):
            return None
        return ".".join([self.name, *(s.name for s in self.selectors)])  # type: ignore[union-attr]


@dataclass
class Call:
    fn: str
    args: list["Expr"]
    span: Span = NOWHERE


@dataclass
class Aggregate:
    fn: str  # max | min | sum
    var: str
    count: "Expr"
    body: "Expr"
    span: Span = NOWHERE


@dataclass
class Draw:
    dist: str
    args: list["Expr"]
    span: Span = NOWHERE


@dataclass
class Unary:
    op: str  # "-" | "!"
    operand: "Expr"
    span: Span = NOWHERE


@dataclass
class Binary:
    op: str  # + - * / % == != < <= > >= && ||
    lhs: "Expr"
    rhs: "Expr"
    span: Span = NOWHERE


@dataclass
class Cond:
    test: "Expr"
    then: "Expr"
    otherwise: "Expr"
    span: Span = NOWHERE


Expr = Union[Num, Inf, Ref, Call, Aggregate, Draw, Unary, Binary, Cond]


# ------------------------------------------------------------------ statements
@dataclass
class Turn:
    span: Span = NOWHERE


@dataclass
class SizeDecl:
    name: str
    value: Expr
    span: Span = NOWHERE


@dataclass
class CostDecl:
    name: str
    value: Expr
    span: Span = NOWHERE


@dataclass
class CostFieldsDecl:
    name: str
    fields: list[tuple[str, Expr, Span]]
    span: Span = NOWHERE


@dataclass
class Set:
    target: Ref  # a bare name, or ENGINE.NAME / QUEUE.NAME (a mark, a register)
    value: Expr
    span: Span = NOWHERE


@dataclass
class Observe:
    name: str
    value: Expr
    span: Span = NOWHERE


@dataclass
class HoldPool:
    pool: Ref
    units: Expr
    reserve: Expr | None
    span: Span = NOWHERE


@dataclass
class Binding:
    name: str
    value: Expr
    span: Span = NOWHERE


@dataclass
class Hold:
    pools: list[HoldPool]
    reuse: Expr | None
    bindings: list[Binding]
    body: list["Stmt"]
    cache: Expr | None
    lease: tuple[Ref, Expr] | None
    span: Span = NOWHERE


@dataclass
class Grow:
    pool: Ref
    amount: Expr
    span: Span = NOWHERE


@dataclass
class Drop:
    pool: Ref
    span: Span = NOWHERE


@dataclass
class Release:
    pool: Ref
    span: Span = NOWHERE


@dataclass
class Load:
    pool: Ref
    amount: Expr
    span: Span = NOWHERE


@dataclass
class Run:
    stages: list[Ref]  # empty: `run (e);`, the enclosing queue's own stage
    mode: str | None  # prefill | decode
    work: Expr
    growing: Ref | None
    span: Span = NOWHERE


@dataclass
class Branch:
    test: Expr
    then: list["Stmt"]
    otherwise: list["Stmt"] | None
    draw: bool = False  # `branch with (p)`: the test is a probability
    span: Span = NOWHERE


@dataclass
class While:
    test: Expr
    body: list["Stmt"]
    span: Span = NOWHERE


@dataclass
class Loop:
    body: list["Stmt"]
    span: Span = NOWHERE


@dataclass
class Fork:
    body: list["Stmt"]
    span: Span = NOWHERE


@dataclass
class Join:
    span: Span = NOWHERE


@dataclass
class Choose:
    name: str
    count: Expr
    keys: list[Expr]
    span: Span = NOWHERE


@dataclass
class End:
    span: Span = NOWHERE


@dataclass
class CallStmt:
    """`NAME(args);`: a statement def or an engine's request, at the call site."""

    name: str
    args: list[Expr]
    span: Span = NOWHERE


@dataclass
class EntryCall:
    """`Q[i].VERB(args) [from S[k]] [to POOL(e)];`: a queue's entry."""

    queue: Ref  # the queue, with its member index if any
    verb: str
    args: list[Expr]
    source: Ref | None
    to: tuple[Ref, Expr] | None
    span: Span = NOWHERE


@dataclass
class Mark:
    name: str
    span: Span = NOWHERE


@dataclass
class Transfer:
    index: Expr | None
    on: list[Ref]
    work: Expr
    source: Ref
    dest: Ref
    tokens: Expr
    span: Span = NOWHERE


@dataclass
class Tool:
    index: Expr | None
    on: list[Ref]
    work: Expr
    span: Span = NOWHERE


@dataclass
class RequestRun:
    """`prefill (e) [growing P];` / `decode (e) …` inside an engine's request."""

    mode: str
    work: Expr
    growing: Ref | None
    span: Span = NOWHERE


@dataclass
class RequestAdmission:
    bindings: list[Binding]
    span: Span = NOWHERE


@dataclass
class RequestCache:
    value: Expr
    span: Span = NOWHERE


Stmt = Union[
    Turn, SizeDecl, CostDecl, CostFieldsDecl, Set, Observe, Hold, Grow, Drop, Release, Load,
    Run, Branch, While, Loop, Fork, Join, Choose, End, CallStmt, EntryCall, Mark, Transfer,
    Tool, RequestRun, RequestAdmission, RequestCache,
]




# ------------------------------------------------------------------ declarations
@dataclass
class Constant:
    name: str
    value: Expr
    span: Span = NOWHERE


@dataclass
class Input:
    """`let NAME = args.number("arg", default);`"""

    name: str
    arg: str
    default: Expr
    span: Span = NOWHERE


@dataclass
class Import:
    path: str
    span: Span = NOWHERE


@dataclass
class Definition:
    name: str
    params: list[str]
    expr: Expr | None  # `def f(x) { e }`
    body: list[Stmt] | None  # `def f(x) { stmts }`
    span: Span = NOWHERE


@dataclass
class PoolOpt:
    """One pool option: `cap`, `block`, `evict`, `preempt`, `queue`, `reserve held`, `spill`."""

    kind: str  # cap block evict_lru evict_by preempt_none preempt_lifo preempt_by queue_fifo queue_by reserve_held spill
    args: list[Expr] = field(default_factory=list)
    requeue: str | None = None  # head | tail, on preempt_by
    spill: tuple[Ref, Ref, Expr, Expr] | None = None  # pool, stage, cost, when
    span: Span = NOWHERE


@dataclass
class PoolDecl:
    name: str
    count: Expr | None
    options: list[PoolOpt]
    owner: str | None = None  # `pool X on OWNER`
    owner_member: str | None = None  # `pool X on E.D`: D
    span: Span = NOWHERE
    # kernel fields, written by serq.lower for pools on devices and engines
    admit_via: str | None = None
    memory_of: str | None = None


@dataclass
class StageKind:
    kind: str  # fifo | ps | delay
    arg: Expr | None
    span: Span = NOWHERE


@dataclass
class StageDecl:
    name: str
    count: Expr | None
    kind: StageKind
    span: Span = NOWHERE


@dataclass
class TimeResource:
    name: str
    params: list[str]
    value: Expr
    span: Span = NOWHERE


@dataclass
class CapacityResource:
    name: str
    cap: Expr
    span: Span = NOWHERE


@dataclass
class DeviceDecl:
    name: str
    count: Expr | None
    resources: list[TimeResource | CapacityResource]
    span: Span = NOWHERE


@dataclass
class TakingPool:
    pool: Ref
    units: Expr
    reserve: Expr | None
    span: Span = NOWHERE


@dataclass
class Taking:
    pools: list[TakingPool]
    reuse: Expr | None
    span: Span = NOWHERE


@dataclass
class SAdvance:
    only: Expr | None
    order: tuple[str, list[Expr]] | None  # ("admission"|"by"|"decode_first", keys)
    chunk: Expr | None
    span: Span = NOWHERE


@dataclass
class SAdmit:
    only: Expr | None
    guard: Expr | None
    chunk: Expr | None
    taking: Taking | None
    span: Span = NOWHERE


@dataclass
class SExclusive:
    chunk: Expr | None
    span: Span = NOWHERE


@dataclass
class SBranch:
    test: Expr
    then: list["SStmt"]
    otherwise: list["SStmt"] | None
    span: Span = NOWHERE


@dataclass
class SSet:
    name: str
    value: Expr
    span: Span = NOWHERE


SStmt = Union[SAdvance, SAdmit, SExclusive, SBranch, SSet]


@dataclass
class Schedule:
    lets: list[Constant]
    body: list[SStmt]
    span: Span = NOWHERE


@dataclass
class EngineCapacity:
    name: str
    count: Expr | None
    cap: Expr
    span: Span = NOWHERE


@dataclass
class Request:
    params: list[str]
    items: list[Stmt]  # statements, RequestAdmission, RequestRun, RequestCache
    span: Span = NOWHERE


@dataclass
class EngineDecl:
    name: str  # a queue's engine: the queue's name
    count: Expr | None
    device: str
    capacities: list[EngineCapacity]
    tokens: Expr | None
    granule: Expr | None
    states: list[tuple[str, Expr, Span]]
    schedule: Schedule | None
    execute: Expr | None
    request: Request | None
    span: Span = NOWHERE


@dataclass
class Arrival:
    kind: str  # poisson renewal closed batch none trace
    arg: Expr | None = None
    file: str | None = None
    ordered: bool = False
    span: Span = NOWHERE


@dataclass
class WorkloadDecl:
    arrivals: list[Arrival]
    init: list[list[Stmt]]
    turn: list[list[Stmt]]
    session: list[list[Stmt]]
    hidden: list[tuple[str, Span]]
    span: Span = NOWHERE


@dataclass
class ServerDecl:
    body: list[Stmt]
    span: Span = NOWHERE


@dataclass
class QueueServe:
    kind: StageKind
    latency: Expr | None
    span: Span = NOWHERE


@dataclass
class QueueEntry:
    verb: str
    params: list[str] | None
    source: str | None
    body: list[Stmt]
    span: Span = NOWHERE


@dataclass
class QueueDecl:
    name: str
    count: Expr | None
    roles: list[str]
    pools: list[PoolDecl]
    devices: list[DeviceDecl]
    engine: EngineDecl | None
    serve: QueueServe | None
    nic: StageKind | None
    entries: list[QueueEntry]
    order: list[str]  # the item kinds in the order written, for the declaration-order rules
    span: Span = NOWHERE


@dataclass
class ShareDecl:
    policy: str
    span: Span = NOWHERE


@dataclass
class RelationDecl:
    reader_or_source: str
    kind: str  # pull | push
    other: str
    latency: Expr | None
    share: str
    span: Span = NOWHERE


@dataclass
class GaugeDecl:
    name: str
    value: Expr
    span: Span = NOWHERE


@dataclass
class ClaimDecl:
    name: str
    given: Expr | None
    form: str  # every | some | at_end
    stage: Ref | None
    value: Expr
    span: Span = NOWHERE


@dataclass
class StepStageDecl:
    """Kernel only (written by serq.lower from an engine): the IR's step stage."""

    name: str
    count: Expr | None
    budget: Expr
    cost: Expr
    chunk: Expr | None
    granule: Expr | None
    serve: tuple[str, list[Expr]]  # ("by", keys) | ("exclusive_prefill", [])
    iteration: list[SStmt] | None
    registers: list[tuple[str, Expr, Span]]
    span: Span = NOWHERE


@dataclass
class MainFn:
    name: str
    items: list["Item"]
    span: Span = NOWHERE


Item = Union[
    Constant, Input, Import, Definition, PoolDecl, StageDecl, StepStageDecl, DeviceDecl, EngineDecl,
    WorkloadDecl, ServerDecl, QueueDecl, ShareDecl, RelationDecl, GaugeDecl, ClaimDecl, MainFn,
]


@dataclass
class Module:
    """One source file: its top-level items in order."""

    path: str
    items: list[Item]
