"""IR -> Python: the program's expressions and statements compiled once per run.

A session's block, a leg's body and the `init` block become Python functions
whose source this module writes and `exec`s once: the session block and the
legs are generators that `yield` wherever the session blocks (a run, a hold's
admission, a grow that waits, a join), so a session's continuation is the
generator's frame and resuming it costs one `send`. Expressions the engine
reads on its own (hold headers, queue, preemption and eviction keys, a ps
capacity, gauges, claims, a renewal gap) become plain functions.

Preemption: a hold compiles to a loop around its body that catches
`Preempted` for its own frame; the engine throws it when the preempted hold
is admitted again, so the body restarts from its top while the statements
above the hold keep what they did.

Every generated line remembers the IR statement it came from (`Loc`), so a
run-time error raised anywhere below a generated frame names the statement
without any bookkeeping on the hot path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from serq.ir import models as ir
from serq.link.consts import apply_function, ieee_div, ieee_mod
from serq.sim.errors import RunError

STATEMENT_LIMIT = 1_000_000

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}


class CompileError(Exception):
    def __init__(self, message: str, loc: ir.Loc | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc


@dataclass
class Env:
    """What an expression may read where it is compiled."""

    what: str  # for messages: "a hold's header", …
    attrs: str | None = "A"  # the Python name of the attribute dict
    ctx: dict[str, str] = field(default_factory=dict)  # context variable -> Python expression
    stream: str | None = None  # the stream object draws read; None: no draw here
    thread: str | None = None  # the thread (for cachedin)
    observed: bool = False  # claim at end aggregates


def walk(e):
    """Every IR node under `e` (expressions and statements)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        yield n
        for name in type(n).model_fields:
            v = getattr(n, name)
            if isinstance(v, ir.Node):
                stack.append(v)
            elif isinstance(v, list):
                stack.extend(x for x in v if isinstance(x, ir.Node))


def has_draw(e) -> bool:
    return any(isinstance(n, ir.Draw) for n in walk(e))


def is_static(e) -> bool:
    """Reads only attributes and numbers (no state, clock, context or register)."""
    return not any(isinstance(n, (ir.PoolObs, ir.StageObs, ir.Ctx, ir.Reg, ir.Draw, ir.Observed))
                   for n in walk(e))


def is_boolean(e) -> bool:
    """An expression whose value is always 0 or 1."""
    if isinstance(e, ir.Binary):
        return e.op in _CMP or e.op in ("and", "or")
    if isinstance(e, ir.Unary):
        return e.op == "not"
    if isinstance(e, ir.Draw):
        return e.dist == "bernoulli"
    if isinstance(e, ir.Num):
        return e.value in (0, 1)
    if isinstance(e, ir.Cond):
        return is_boolean(e.then) and is_boolean(e.otherwise)
    return False


def ref_key(ref) -> tuple:
    """A pool reference as the linker resolves it: the pool and its index expression."""
    return (ref.pool, ref.index.model_dump_json() if ref.index is not None else None)


def _fnum(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "_NAN"
    if math.isinf(v):
        return "_INF" if v > 0 else "(-_INF)"
    return repr(v)


def _fn_wrapper(name: str):
    def f(*args):
        return apply_function(name, [float(a) for a in args])
    f.__name__ = f"fn_{name}"
    return f


HELPERS = {
    "_INF": math.inf,
    "_NAN": math.nan,
    "_div": ieee_div,
    "_mod": ieee_mod,
    "_RunError": RunError,
}
for _name in ("floor", "ceil", "abs", "sqrt", "exp", "log", "pow", "reusable"):
    HELPERS[f"_fn_{_name}"] = _fn_wrapper(_name)


class Module:
    """The Python source of one program, its globals, and the map from lines to statements."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.line_locs: list[ir.Loc | None] = []
        self.loc_stack: list[ir.Loc | None] = [None]
        self.globals: dict[str, object] = dict(HELPERS)
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)
        self.line_locs.append(self.loc_stack[-1])

    def bind(self, prefix: str, obj) -> str:
        """A global name for a Python object the generated code refers to."""
        name = self.fresh(prefix)
        self.globals[name] = obj
        return name

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


FILENAME = "<serq-program>"


class ProgramCompiler:
    """Compiles one program's expressions and statements against a built engine.

    `engine` supplies the run-time objects the code refers to: pool and stage
    members (`pool_members`, `stage_members`), the hold and leg factories.
    """

    def __init__(self, program: ir.Program, engine) -> None:
        self.program = program
        self.engine = engine
        self.mod = Module()
        self.member_names: dict[tuple[str, str, int], str] = {}
        self.array_names: dict[tuple[str, str], str] = {}
        self.holds: list = []
        self.legs: list = []

    # ------------------------------------------------------------ references
    def _member_array(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self.array_names:
            members = self.engine.pool_members[name] if kind == "pool" else self.engine.stage_members[name]
            self.array_names[key] = self.mod.bind(f"_{kind[0].upper()}A_{_safe(name)}_", members)
        return self.array_names[key]

    def _member_const(self, kind: str, name: str, i: int) -> str:
        key = (kind, name, i)
        if key not in self.member_names:
            members = self.engine.pool_members[name] if kind == "pool" else self.engine.stage_members[name]
            self.member_names[key] = self.mod.bind(f"_{kind[0].upper()}_{_safe(name)}_{i}_", members[i])
        return self.member_names[key]

    def member(self, kind: str, ref, env: Env) -> str:
        """A Python expression for the pool or stage member a reference names."""
        name = ref.pool if kind == "pool" else ref.stage
        table = self.engine.pool_members if kind == "pool" else self.engine.stage_members
        if name not in table:
            raise CompileError(f"no {kind} named `{name}`")
        count = len(table[name])
        if ref.index is None:
            if count != 1:
                raise CompileError(f"{kind} `{name}` is an array of {count}: a reference names a member")
            return self._member_const(kind, name, 0)
        if isinstance(ref.index, ir.Num):
            v = float(ref.index.value)
            if not (v == int(v) and 0 <= v < count):
                raise CompileError(f"index {_fnum(v)} is out of range: {kind} `{name}` has members 0 to {count - 1}")
            return self._member_const(kind, name, int(v))
        arr = self._member_array(kind, name)
        return f"_ix({arr}, {self.expr(ref.index, env)}, {kind!r}, {name!r})"

    def member_resolver(self, kind: str, ref, env: Env):
        """A member fixed at compile time, or a function (E, T, A) -> member."""
        name = ref.pool if kind == "pool" else ref.stage
        table = self.engine.pool_members if kind == "pool" else self.engine.stage_members
        if ref.index is None or isinstance(ref.index, ir.Num):
            text = self.member(kind, ref, env)
            return self.mod.globals[text]
        return self.function(f"_ref_{_safe(name)}_", ("E", "T", "A"), self.member(kind, ref, env))

    # ------------------------------------------------------------ expressions
    def expr(self, e, env: Env) -> str:
        k = e.kind
        if k == "num":
            return _fnum(e.value)
        if k == "inf":
            return "_INF"
        if k == "attr":
            if env.attrs is None:
                raise CompileError(f"{env.what} reads attribute `{e.name}`: there is no session there")
            return f"{env.attrs}[{e.name!r}]"
        if k == "ctx":
            if e.var not in env.ctx:
                if e.var in ("residents", "decoders", "kv_decode", "kv_prefill", "tokens", "prefilled",
                             "attention", "preempted", "admitted", "demand", "served", "arrived",
                             "remaining"):
                    raise CompileError(f"{env.what} reads `{e.var}`, a step stage's value (step stages run "
                                       "iterations, which this interpreter does not run yet)")
                raise CompileError(f"{env.what} reads context variable `{e.var}`, which it does not supply")
            return env.ctx[e.var]
        if k == "reg":
            raise CompileError(f"{env.what} reads register `{e.name}` of step stage `{e.stage}`: step stages "
                               "run iterations, which this interpreter does not run yet")
        if k == "unary":
            a = self.expr(e.arg, env)
            if e.op == "neg":
                return f"(-{a})"
            return f"(1.0 if {a} == 0.0 else 0.0)"
        if k == "binary":
            a = self.expr(e.lhs, env)
            b = self.expr(e.rhs, env)
            op = e.op
            if op in _ARITH:
                return f"({a} {_ARITH[op]} {b})"
            if op == "div":
                if isinstance(e.rhs, ir.Num) and float(e.rhs.value) != 0.0:
                    return f"({a} / {b})"
                return f"_div({a}, {b})"
            if op == "mod":
                return f"_mod({a}, {b})"
            if op in _CMP:
                return f"(1.0 if {a} {_CMP[op]} {b} else 0.0)"
            if op == "and":
                return f"(1.0 if ({a} != 0.0) & ({b} != 0.0) else 0.0)"
            if op == "or":
                return f"(1.0 if ({a} != 0.0) | ({b} != 0.0) else 0.0)"
            raise CompileError(f"unknown operator {op}")
        if k == "cond":
            return f"({self.expr(e.then, env)} if {self.expr(e.test, env)} != 0.0 else {self.expr(e.otherwise, env)})"
        if k == "call":
            args = [self.expr(a, env) for a in e.args]
            if e.fn in ("min", "max"):
                if len(args) == 1:
                    return f"float({args[0]})"
                return f"{e.fn}({', '.join(args)})"
            return f"_fn_{e.fn}({', '.join(args)})"
        if k == "draw":
            if env.stream is None:
                raise CompileError(f"{env.what} draws (~{e.dist}): a draw may not stand there")
            args = [self.expr(a, env) for a in e.args]
            return f"{env.stream}.{e.dist}({', '.join(args)})"
        if k == "cost":
            return self.expr(e.arg, env)
        if k == "pool_obs":
            m = self.member("pool", e.pool, env)
            fn = e.fn
            if fn == "used":
                return f"{m}.used"
            if fn == "free":
                return f"({m}.cap - {m}.used)"
            if fn == "holders":
                return f"float(len({m}.holders))"
            if fn == "queued":
                return f"float(len({m}.queue))"
            if fn == "blocksize":
                return f"{m}.bs"
            if fn == "cachedin":
                if env.thread is None:
                    raise CompileError(f"{env.what} reads cachedin(…), a session's own prefix: there is no session there")
                return f"{m}.cached_of({env.thread})"
            raise CompileError(f"unknown pool observable {fn}")
        if k == "stage_obs":
            m = self.member("stage", e.stage, env)
            fn = e.fn
            if fn == "queue":
                return f"{m}.n_queue()"
            if fn == "busy":
                return f"{m}.n_busy()"
            if fn == "work":
                return f"{m}.work_left()"
            if fn == "budget_left":
                raise CompileError(f"{env.what} reads budget_left({e.stage.stage}): a step stage's budget "
                                   "(step stages run iterations, which this interpreter does not run yet)")
            raise CompileError(f"unknown stage observable {fn}")
        if k == "observed":
            if not env.observed:
                raise CompileError(f"{env.what} reads {e.fn}({e.name}): only a claim at end reads the run's observations")
            return f"E.observed({e.fn!r}, {e.name!r})"
        raise CompileError(f"unknown expression kind {k}")

    def function(self, prefix: str, params: tuple[str, ...], body_expr: str, loc=None):
        """Emit `def NAME(params): return body_expr` and return its name (bound after exec)."""
        name = self.mod.fresh(prefix)
        self.mod.loc_stack.append(loc)
        self.mod.emit(0, f"def {name}({', '.join(params)}):")
        self.mod.emit(1, f"return {body_expr}")
        self.mod.loc_stack.pop()
        return _Late(name)

    def keys_function(self, prefix: str, params: tuple[str, ...], keys: list, env: Env, loc=None):
        parts = [self.expr(k, env) for k in keys]
        tup = "(" + "".join(p + ", " for p in parts) + ")"
        return self.function(prefix, params, tup, loc)

    # ------------------------------------------------------------ finishing
    def finish(self) -> dict:
        source = self.mod.source()
        code = compile(source, FILENAME, "exec")
        ns = self.mod.globals
        exec(code, ns)
        return ns


class _Late:
    """A generated function, known by name until the module is executed."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def resolve(obj, ns):
    if isinstance(obj, _Late):
        return ns[obj.name]
    return obj


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
