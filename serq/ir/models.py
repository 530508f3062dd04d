"""The kernel IR: pydantic v2 models, the single source of truth.

Every union is discriminated by an explicit `kind`; names and operators are
closed enumerations. The canonical JSON form (`to_json`) sorts keys, leaves out
absent optional fields and writes integral numbers as integers, so IR files
diff cleanly and `serq ir` is byte-for-byte reproducible.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from serq.blocks import walk_stmts  # noqa: F401  (re-exported: `ir.walk_stmts`, `ast.walk_stmts`)

IR_VERSION = 1


def _canonical_number(v: int | float) -> int | float:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2 ** 1023:
        try:  # an integer the run reads as a double: one past the largest double is refused here
            float(v)
        except OverflowError:
            raise ValueError("a number in the IR is at most the largest double, 1.8e308") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("a number in the IR is finite (an unbounded cap or horizon is the string \"inf\")")
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


Number = Annotated[Union[int, float], AfterValidator(_canonical_number)]
# A bound that may be infinite: a number, or the literal "inf".
Bound = Union[Literal["inf"], Number]


class Node(BaseModel):
    # defer_build: a model's validator is built when it is first used, not on import (building all
    # ~70 took a third of a short `serq run`); the forward references resolve then, in this module.
    model_config = ConfigDict(extra="forbid", frozen=False, defer_build=True)


class Loc(Node):
    """Where a statement was written (absent in IR written by hand)."""

    file: str
    line: int
    col: int


# ------------------------------------------------------------------ expressions
ContextVar = Literal[
    "now", "present", "waited", "decoding", "admission", "remaining", "position",
    "residents", "decoders", "kv_decode", "kv_prefill", "waiting_holds", "tokens", "prefilled", "attention",
    "preempted", "admitted", "demand", "served", "arrived", "size", "waiting",
]
FunctionName = Literal["min", "max", "floor", "ceil", "abs", "sqrt", "exp", "log", "pow", "reusable"]
PoolObservable = Literal["used", "free", "holders", "queued", "cachedin", "blocksize"]
StageObservable = Literal["queue", "busy", "work", "budget_left"]
Distribution = Literal["exp", "det", "uniform", "erlang", "h2", "bernoulli"]
Aggregate = Literal["total", "count", "largest", "smallest", "prefix_total"]
UnaryOp = Literal["neg", "not"]
BinaryOp = Literal["add", "sub", "mul", "div", "mod", "eq", "ne", "lt", "le", "gt", "ge", "and", "or"]


class Num(Node):
    kind: Literal["num"] = "num"
    value: Number


class Inf(Node):
    kind: Literal["inf"] = "inf"


class Attr(Node):
    """A session attribute (built in, set, drawn, a mark `E.m`)."""

    kind: Literal["attr"] = "attr"
    name: str


class Ctx(Node):
    """A context variable, supplied by the moment the expression is read at."""

    kind: Literal["ctx"] = "ctx"
    var: ContextVar


class Reg(Node):
    """A step stage's register."""

    kind: Literal["reg"] = "reg"
    stage: str
    name: str


class Unary(Node):
    kind: Literal["unary"] = "unary"
    op: UnaryOp
    arg: "Expr"


class Binary(Node):
    kind: Literal["binary"] = "binary"
    op: BinaryOp
    lhs: "Expr"
    rhs: "Expr"


class Cond(Node):
    kind: Literal["cond"] = "cond"
    test: "Expr"
    then: "Expr"
    otherwise: "Expr"


class Call(Node):
    kind: Literal["call"] = "call"
    fn: FunctionName
    args: list["Expr"]


class Draw(Node):
    kind: Literal["draw"] = "draw"
    dist: Distribution
    args: list["Expr"]


class CostOf(Node):
    """`cost(r1, …, e)`: e as an amount of the named pools or stages."""

    kind: Literal["cost"] = "cost"
    resources: list[str]
    arg: "Expr"


class PoolRef(Node):
    pool: str
    index: "Expr | None" = None


class StageRef(Node):
    stage: str
    index: "Expr | None" = None


class PoolObs(Node):
    kind: Literal["pool_obs"] = "pool_obs"
    fn: PoolObservable
    pool: PoolRef


class StageObs(Node):
    kind: Literal["stage_obs"] = "stage_obs"
    fn: StageObservable
    stage: StageRef


class Observed(Node):
    """A claim at end's aggregate of a run's observations (or ttft, tpot, response)."""

    kind: Literal["observed"] = "observed"
    fn: Aggregate
    name: str


Expr = Annotated[
    Union[Num, Inf, Attr, Ctx, Reg, Unary, Binary, Cond, Call, Draw, CostOf, PoolObs, StageObs, Observed],
    Field(discriminator="kind"),
]


# ------------------------------------------------------------------ statements
class StmtBase(Node):
    at: Loc | None = None


class TurnStmt(StmtBase):
    """Draw the turn's attributes (the workload's turn block), submit the turn,
    run the server's statements, and record what the client saw."""

    kind: Literal["turn"] = "turn"


class SetStmt(StmtBase):
    kind: Literal["set"] = "set"
    name: str
    value: Expr


class ObserveStmt(StmtBase):
    kind: Literal["observe"] = "observe"
    name: str
    value: Expr


class HoldPool(Node):
    pool: PoolRef
    units: Expr
    reserve: Expr | None = None


class Lease(Node):
    pool: PoolRef
    duration: Expr


class HoldStmt(StmtBase):
    kind: Literal["hold"] = "hold"
    pools: list[HoldPool]
    reuse: Expr | None = None
    body: list["Stmt"]
    cache: Expr | None = None
    lease: Lease | None = None


def clause_pools(e, names: list[str]) -> frozenset:
    """The pools a hold's `cache` or `reuse` clause applies to: its cost's resources among the hold's
    pools `names`, or all of them when it names none (the interpreter and the Lean export read it so)."""
    if isinstance(e, CostOf):
        named = frozenset(r for r in e.resources if r in names)
        if named:
            return named
    return frozenset(names)


class GrowStmt(StmtBase):
    kind: Literal["grow"] = "grow"
    pool: PoolRef
    amount: Expr


class DropStmt(StmtBase):
    kind: Literal["drop"] = "drop"
    pool: PoolRef


class ReleaseStmt(StmtBase):
    kind: Literal["release"] = "release"
    pool: PoolRef


class LoadStmt(StmtBase):
    kind: Literal["load"] = "load"
    pool: PoolRef
    amount: Expr


class RunStmt(StmtBase):
    kind: Literal["run"] = "run"
    stages: list[StageRef]
    mode: Literal["prefill", "decode"] | None = None
    work: Expr
    growing: PoolRef | None = None


class BranchStmt(StmtBase):
    kind: Literal["branch"] = "branch"
    test: Expr
    then: list["Stmt"]
    otherwise: list["Stmt"] = []


class WhileStmt(StmtBase):
    kind: Literal["while"] = "while"
    test: Expr
    body: list["Stmt"]


class LoopStmt(StmtBase):
    kind: Literal["loop"] = "loop"
    body: list["Stmt"]


class ForkStmt(StmtBase):
    kind: Literal["fork"] = "fork"
    body: list["Stmt"]


class JoinStmt(StmtBase):
    kind: Literal["join"] = "join"


class ChooseStmt(StmtBase):
    kind: Literal["choose"] = "choose"
    name: str
    count: Expr
    keys: list[Expr]


class EndStmt(StmtBase):
    kind: Literal["end"] = "end"


Stmt = Annotated[
    Union[
        TurnStmt, SetStmt, ObserveStmt, HoldStmt, GrowStmt, DropStmt, ReleaseStmt, LoadStmt,
        RunStmt, BranchStmt, WhileStmt, LoopStmt, ForkStmt, JoinStmt, ChooseStmt, EndStmt,
    ],
    Field(discriminator="kind"),
]


# ------------------------------------------------------------------ pools
class EvictLru(Node):
    kind: Literal["lru"] = "lru"


class EvictBy(Node):
    kind: Literal["by"] = "by"
    keys: list[Expr]


class PreemptNone(Node):
    kind: Literal["none"] = "none"


class PreemptBy(Node):
    kind: Literal["by"] = "by"
    keys: list[Expr]
    requeue: Literal["head", "tail"] = "head"


class QueueFifo(Node):
    kind: Literal["fifo"] = "fifo"


class QueueBy(Node):
    kind: Literal["by"] = "by"
    keys: list[Expr]


class Spill(Node):
    pool: PoolRef
    stage: StageRef
    cost: Expr
    when: Expr


class Pool(Node):
    name: str
    count: int = Field(1, ge=1, le=1_000_000)
    cap: Bound = "inf"
    block: Annotated[int, Field(ge=1), AfterValidator(_canonical_number)] | None = None  # read as a double
    evict: Annotated[Union[EvictLru, EvictBy], Field(discriminator="kind")] = EvictLru()
    preempt: Annotated[Union[PreemptNone, PreemptBy], Field(discriminator="kind")] = PreemptNone()
    queue: Annotated[Union[QueueFifo, QueueBy], Field(discriminator="kind")] = QueueFifo()
    reserve_held: bool = False
    spill: Spill | None = None
    admit_via: str | None = None  # the step stage that admits its queue in iterations
    memory_of: str | None = None  # the step stage whose memory it is (preemption victims are its residents)
    at: Loc | None = None


# ------------------------------------------------------------------ stages
class Fifo(Node):
    kind: Literal["fifo"] = "fifo"
    servers: int = Field(1, ge=1, le=1_000_000)


class Ps(Node):
    """ps(phi): throughput phi(present) shared equally. `delay` is ps(present)."""

    kind: Literal["ps"] = "ps"
    capacity: Expr


class ServeBy(Node):
    kind: Literal["by"] = "by"
    keys: list[Expr] = []


class ServeExclusivePrefill(Node):
    kind: Literal["exclusive_prefill"] = "exclusive_prefill"


class IterServe(Node):
    kind: Literal["serve"] = "serve"
    only: Expr | None = None


class IterAdmit(Node):
    kind: Literal["admit"] = "admit"
    only: Expr | None = None
    gate: Expr | None = None


class IterBranch(Node):
    kind: Literal["branch"] = "branch"
    test: Expr
    then: list["IterStmt"]
    otherwise: list["IterStmt"] = []


class IterSet(Node):
    kind: Literal["set"] = "set"
    name: str
    value: Expr


IterStmt = Annotated[Union[IterServe, IterAdmit, IterBranch, IterSet], Field(discriminator="kind")]


class Register(Node):
    name: str
    init: Number


class Step(Node):
    """A stage that runs iterations: the IR form of an engine."""

    kind: Literal["step"] = "step"
    budget: Expr
    cost: Expr
    chunk: Expr = Num(value=0)  # 0: no cap
    granule: Expr | None = None
    serve: Annotated[Union[ServeBy, ServeExclusivePrefill], Field(discriminator="kind")] = ServeBy()
    iteration: list[IterStmt] | None = None
    registers: list[Register] = []


class Stage(Node):
    name: str
    count: int = Field(1, ge=1, le=1_000_000)
    service: Annotated[Union[Fifo, Ps, Step], Field(discriminator="kind")]
    at: Loc | None = None


# ------------------------------------------------------------------ workload
# (each arrival law and trace has `at`, where it was written, for the refusals that name it)
class Poisson(Node):
    kind: Literal["poisson"] = "poisson"
    rate: Number = Field(gt=0)
    at: Loc | None = None


class Renewal(Node):
    kind: Literal["renewal"] = "renewal"
    gap: Expr
    at: Loc | None = None


class Closed(Node):
    kind: Literal["closed"] = "closed"
    sessions: int = Field(ge=1, le=1_000_000)
    at: Loc | None = None


class Batch(Node):
    kind: Literal["batch"] = "batch"
    sessions: int = Field(ge=1, le=1_000_000)
    at: Loc | None = None


class NoArrivals(Node):
    kind: Literal["none"] = "none"
    at: Loc | None = None


class Trace(Node):
    kind: Literal["trace"] = "trace"
    file: str
    ordered: bool = False
    at: Loc | None = None


Arrival = Annotated[Union[Poisson, Renewal, Closed, Batch, NoArrivals, Trace], Field(discriminator="kind")]


class Workload(Node):
    arrival: Arrival
    # a trace beside an arrival law: the law says when sessions come, the trace what their turns are
    # (with a trace and no law, the arrival is the trace itself, `Trace`, and its times are the file's)
    trace: Trace | None = None
    init: list[Stmt] = []
    turn: list[Stmt] = []
    session: list[Stmt] = [TurnStmt()]
    hidden: list[str] = []


AttributeType = Literal["number", "size", "cost"]


class Attribute(Node):
    """A session attribute and its type.

    `size`: a workload quantity, set by the session's side and read-only to
    the server. `cost`: an amount of the named resources. `number`: anything else.
    """

    name: str
    type: AttributeType = "number"
    resources: list[str] = []
    side: Literal["builtin", "session", "server"] = "server"
    hidden: bool = False


class Gauge(Node):
    name: str
    value: Expr
    at: Loc | None = None


class Claim(Node):
    name: str
    form: Literal["every_iteration", "some_iteration", "at_end"]
    stage: StageRef | None = None
    given: Expr | None = None
    value: Expr
    at: Loc | None = None


class ConstantValue(Node):
    name: str
    value: Bound


class InputValue(Node):
    name: str
    arg: str
    value: Bound


class Settings(Node):
    """The execution settings (the reference: supplied by the CLI flags, an instance file or the
    host API, and carried by the resolved IR). The default seed is 1, as the programs in use assume."""

    seed: int = Field(1, ge=0)
    horizon: Bound = "inf"
    warmup: Number = Field(0, ge=0)
    arrivals: int | None = Field(None, ge=1)


class Program(Node):
    """A linked program: its deployment, workload, server, gauges and claims."""

    version: Literal[1] = IR_VERSION
    source: str | None = None
    constants: list[ConstantValue] = []
    inputs: list[InputValue] = []
    attributes: list[Attribute] = []
    pools: list[Pool] = []
    stages: list[Stage] = []
    share: Literal["none", "maxmin", "bottleneck"] = "none"
    workload: Workload
    server: list[Stmt] = []
    gauges: list[Gauge] = []
    claims: list[Claim] = []
    settings: Settings = Settings()


# each node class's field names, read once: `type(n).model_fields` is a descriptor call per read, and
# `walk` runs over every program the interpreter builds (a third of a generated DRT case's time was here)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def registers_set(iteration: list) -> set[str]:
    """The registers an engine's iteration body writes: its `set`s' names, in any branch."""
    return {n.name for s in iteration for n in walk(s) if isinstance(n, IterSet)}


def walk(node):
    """Every IR node under `node` (itself included): expressions, references and statements."""
    stack = [node]
    field_names = _FIELD_NAMES
    while stack:
        n = stack.pop()
        # (a list's items are pushed as they are, and what is no node, None or a name, passed over
        # here: a filtering generator per list cost more than the nodes it kept out)
        if not isinstance(n, Node):
            continue
        yield n
        cls = type(n)
        names = field_names.get(cls)
        if names is None:
            names = field_names[cls] = tuple(cls.model_fields)
        values = n.__dict__  # (a pydantic model keeps its fields' values here)
        for name in names:
            v = values[name]
            if isinstance(v, Node):
                stack.append(v)
            elif v.__class__ is list:
                stack.extend(v)




def _canonical(data):
    if isinstance(data, float) and data.is_integer():
        return int(data)
    if isinstance(data, dict):
        return {k: _canonical(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_canonical(v) for v in data]
    return data


def to_json(program: Program) -> str:
    """The canonical JSON text of a program: sorted keys, no absent fields, integral numbers as integers."""
    data = _canonical(program.model_dump(mode="json", exclude_none=True))
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def from_json(text: str) -> Program:
    return Program.model_validate_json(text)


def json_schema() -> str:
    return json.dumps(Program.model_json_schema(), sort_keys=True, indent=2) + "\n"
