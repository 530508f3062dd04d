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
from serq.sim.prelude import HELPERS
from serq.sim.rng import GAMMA, M64, TURN_STRIDE, TWO53, site_offset

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
    sites: int = 0  # draws compiled so far in a straight-line block ("site:KEY" streams)
    hoist: list | None = None  # statements to emit before the current one (inline site draws)
    regs: str | None = None  # the Python name of the step stage's registers (its own expressions)
    reg_stage: str | None = None  # the step stage those registers are of
    first: str | None = None  # a turn block's FirstTurns table (rng.py): its first turn's inline draws
    # a turn block's key, as an expression: what a draw from the table of first turns computes when
    # the table does not hold it; `key_read`: a draw read the key's variable itself (else the turn
    # does not compute it: a session's first turn drawn from the table never needs it)
    key_expr: str | None = None
    key_read: bool = False




def has_draw(e) -> bool:
    return any(isinstance(n, ir.Draw) for n in ir.walk(e))


def draws_outside_bodies(s) -> bool:
    """A statement draws in its own expressions (a guard, a work, a value), not in its bodies' statements."""
    for name in type(s).model_fields:
        v = getattr(s, name)
        for x in (v if isinstance(v, list) else (v,)):
            if isinstance(x, ir.Node) and not isinstance(x, ir.StmtBase) and has_draw(x):
                return True
    return False


def is_static(e) -> bool:
    """Reads only attributes and numbers (no state, clock, context or register)."""
    return not any(isinstance(n, (ir.PoolObs, ir.StageObs, ir.Ctx, ir.Reg, ir.Draw, ir.Observed))
                   for n in ir.walk(e))


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


def _constant_uniform(e) -> tuple[float, float] | None:
    """(a, b) of a `~uniform(a, b)` with numbers for bounds that rng.site_uniform accepts, else None."""
    if e.dist != "uniform" or not all(isinstance(x, ir.Num) for x in e.args):
        return None
    a, b = (float(x.value) for x in e.args)
    return (a, b) if a <= b and math.isfinite(a) and math.isfinite(b) else None


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
        self.pending_functions: list = []
        self.mod.globals["_turn_key"] = engine.streams.turn_key_function()
        self._first_turns: str | None = None
        # the turn being compiled is the session block's first statement (`_fi` is then the prologue's)
        self._turn_after_prologue = False
        # no statement gives a session legs, holds, leases or a refusal (serq.sim.build.plain_sessions)
        self.plain_sessions = False
        # the session block's statements are being compiled: `R`, its stream, is made when first needed
        self._lazy_session_stream = False
        # the session's first turn, straight after the prologue, read its key (session_function)
        self._prologue_key_read = True
        # the attributes some expression reads: a store of the engine's own that none reads is left out
        self.attrs_read = {n.name for n in ir.walk(program) if isinstance(n, ir.Attr)}

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

    def register(self, e, env: Env) -> str:
        """A step stage's register: its own expressions read their member's; elsewhere the one member's."""
        if env.regs is not None and env.reg_stage == e.stage:
            return f"{env.regs}[{e.name!r}]"
        members = self.engine.stage_members.get(e.stage)
        if not members or not hasattr(members[0], "regs"):
            raise CompileError(f"{env.what} reads register `{e.name}` of `{e.stage}`, which is no step stage")
        if len(members) != 1:
            raise CompileError(f"{env.what} reads register `{e.name}` of the engine family `{e.stage}`: outside "
                               "its own clauses a family's register names no member")
        regs = self.mod.bind(f"_R_{_safe(e.stage)}_", members[0].regs)
        return f"{regs}[{e.name!r}]"

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
                raise CompileError(f"{env.what} reads context variable `{e.var}`, which it does not supply")
            return env.ctx[e.var]
        if k == "reg":
            return self.register(e, env)
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
            test = self.expr(e.test, env)
            hoist, env.hoist = env.hoist, None  # an arm's draws happen only if it is taken
            try:
                then, otherwise = self.expr(e.then, env), self.expr(e.otherwise, env)
            finally:
                env.hoist = hoist
            return f"({then} if {test} != 0.0 else {otherwise})"
        if k == "call":
            args = [self.expr(a, env) for a in e.args]
            if e.fn in ("min", "max"):
                if len(args) == 1:
                    return f"float({args[0]})"
                # the builtin's fold, two at a time, each pair written out (prelude's _min2 and
                # _max2 without their call: a session calls them at every request): the arguments
                # evaluated in order, the second kept only if it is less (min) or greater (max)
                keeps_second = ">" if e.fn == "min" else "<"
                out = args[0]
                for a in args[1:]:
                    t = self.mod.fresh("_m")
                    out = f"({t}b if ({t}a := {out}) {keeps_second} ({t}b := {a}) else {t}a)"
                return out
            # prelude's _fn_floor, _fn_ceil and _fn_reusable without their call (a session rounds
            # its draws and reads its reusable prefix at every request)
            if e.fn in ("floor", "ceil") and len(args) == 1:
                t = self.mod.fresh("_r")
                return f"(float(_{e.fn}({t})) if _isfinite({t} := float({args[0]})) else {t})"
            if e.fn == "reusable" and len(args) == 2:
                return f"_reusable(float({args[0]}), float({args[1]}))"
            return f"_fn_{e.fn}({', '.join(args)})"
        if k == "draw":
            if env.stream is None:
                raise CompileError(f"{env.what} draws (~{e.dist}): a draw may not stand there")
            args = [self.expr(a, env) for a in e.args]
            if env.stream.startswith("site:"):  # a straight-line block: draw j of the block's key
                j = env.sites
                env.sites += 1
                key = env.stream[5:]
                if e.dist == "det":
                    return f"float({args[0]})"
                uniform = _constant_uniform(e)
                if env.hoist is not None and (uniform is not None or (
                        e.dist == "exp" and isinstance(e.args[0], ir.Num) and 0 <= float(e.args[0].value) < math.inf)):
                    # inline: the same numbers as rng.site_exp and rng.site_uniform, without a call
                    t = self.mod.fresh("_d")
                    c = site_offset(j)
                    mix = [
                        f"_z = ({key} + {c}) & {M64}",
                        f"_z = ((_z ^ (_z >> 30)) * 0xBF58476D1CE4E5B9) & {M64}",
                        f"_z = ((_z ^ (_z >> 27)) * 0x94D049BB133111EB) & {M64}",
                        f"_u = ((_z ^ (_z >> 31)) >> 11) * {TWO53!r}",
                    ]
                    if env.first is not None:  # a first turn's uniform from the block when it holds it
                        k = self.mod.globals[env.first].site(c)
                        mix[0] = f"_z = ({env.key_expr} + {c}) & {M64}"
                        mix = ["if _fi >= 0:", f"    _u = {env.first}.U[{k}][_fi]", "else:",
                               *("    " + line for line in mix)]
                    else:
                        env.key_read = True
                    if uniform is not None:  # a + (b - a)·u, b - a folded (the same subtraction)
                        a, b = uniform
                        env.hoist += [*mix, f"{t} = {a!r} + {b - a!r} * _u"]
                    else:
                        env.hoist += [*mix, f"{t} = {-float(e.args[0].value)!r} * _log(1.0 - _u)"]
                    return t
                env.key_read = True
                return f"_sd_{e.dist}({key}, {j}, {', '.join(args)})"
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
                return f"{m}.budget_left()"
            raise CompileError(f"unknown stage observable {fn}")
        if k == "observed":
            if not env.observed:
                raise CompileError(f"{env.what} reads {e.fn}({e.name}): only a claim at end reads the run's observations")
            return f"E.observed({e.fn!r}, {e.name!r})"
        raise CompileError(f"unknown expression kind {k}")

    def function(self, prefix: str, params: tuple[str, ...], body_expr: str, loc=None):
        """Emit `def NAME(params): return body_expr` and return its name (bound after exec)."""
        name = self.mod.fresh(prefix)
        saved_lines, saved_locs = self.mod.lines, self.mod.line_locs
        self.mod.lines, self.mod.line_locs = [], []
        self.mod.loc_stack.append(loc)
        self.mod.emit(0, f"def {name}({', '.join(params)}):")
        self.mod.emit(1, f"return {body_expr}")
        self.mod.loc_stack.pop()
        self.pending_functions.append((self.mod.lines, self.mod.line_locs))
        self.mod.lines, self.mod.line_locs = saved_lines, saved_locs
        return _Late(name)

    def keys_function(self, prefix: str, params: tuple[str, ...], keys: list, env: Env, loc=None):
        parts = [self.expr(k, env) for k in keys]
        tup = "(" + "".join(p + ", " for p in parts) + ")"
        return self.function(prefix, params, tup, loc)

    # ------------------------------------------------------------ statements
    def stmt_env(self, stream: str | None) -> Env:
        return Env("a statement", attrs="A", ctx={"now": "E.now"}, stream=stream, thread="T")

    def session_function(self, body: list, trace: bool) -> _Late:
        """The session block: a generator over (E, T, A)."""
        name = self.mod.fresh("_session_")
        draws = any(has_draw(s) for s in body) or any(has_draw(s) for s in self.program.server)
        self.mod.emit(0, f"def {name}(E, T, A):")
        self.mod.emit(1, "S = T")  # the session block runs on the main thread, which is the session
        if draws:
            # the session's stream, made before the first statement that may draw from it (`block`):
            # most sessions of a single-turn workload draw only their turn's inline draws, never from it
            self.mod.emit(1, "R = None")
        if any(has_draw(s) for s in self.program.workload.turn):
            # B = mix64(turn-tag key ^ serial) (rng.Streams.session_turn_base): from the block of
            # first turns (rng.FirstTurns) when it holds the session, else inline
            emit = self.mod.emit
            ft = self.first_turns()
            emit(1, f"_fi = S.serial - {ft}.lo")
            emit(1, f"if not 0 <= _fi < {ft}.n:")
            emit(2, f"_fi = {ft}.fill(S.serial)")
            emit(1, "if _fi >= 0:")
            tk_line = len(self.mod.lines)
            emit(2, f"_tk = {ft}.B[_fi]")
            emit(1, f"elif S.serial <= {M64}:")
            emit(2, f"_z = ((S.serial ^ {self.engine.streams.turn_tag_key}) + {GAMMA}) & {M64}")
            emit(2, f"_z = ((_z ^ (_z >> 30)) * 0xBF58476D1CE4E5B9) & {M64}")
            emit(2, f"_z = ((_z ^ (_z >> 27)) * 0x94D049BB133111EB) & {M64}")
            emit(2, "_tk = _z ^ (_z >> 31)")
            emit(1, "else:")
            emit(2, "_tk = E.streams.session_turn_base(S.serial)")
        else:
            tk_line = None
        self.mod.emit(1, "if False:")
        self.mod.emit(2, "yield")
        ctx = _Ctx(side="session", stream="R" if draws else None, trace=trace)
        self._turn_after_prologue = bool(body) and body[0].kind == "turn" and not trace
        first_turn_only = self._turn_after_prologue and sum(
            isinstance(n, ir.TurnStmt) for st in body for n in ir.walk(st)) == 1
        self._prologue_key_read = True
        self._lazy_session_stream = True
        try:
            self.block(body, ctx, 1)
        finally:
            self._lazy_session_stream = False
        if tk_line is not None and first_turn_only and not self._prologue_key_read:
            # the session's one turn reads B only when the block of first turns does not hold the
            # session (its draws' `else` arms, where the prologue computed it): the block's B unread
            self.mod.lines[tk_line] = self.mod.lines[tk_line].replace(f"_tk = {ft}.B[_fi]", "pass")
        self.finish_thread(1, main=True)
        return _Late(name)

    def first_turns(self) -> str:
        """The global name of the program's FirstTurns table (rng.py), made on first use."""
        if self._first_turns is None:
            from serq.sim.rng import FirstTurns
            self._first_turns = self.mod.bind("_FT", FirstTurns(self.engine.streams.turn_tag_key))
        return self._first_turns

    def finish_thread(self, ind: int, main: bool) -> None:
        """The end of a thread's block: done, then the generator returns (the engine resumes threads
        with `next(gen, _FINISHED)`: no StopIteration). A generator left suspended at a `yield`
        instead would be closed when freed, which in CPython 3.11 throws GeneratorExit into its
        frame: an exception, a traceback and a frame object per session."""
        if not main:
            self.mod.emit(ind, "E.thread_done(T)")
        else:
            self.mod.emit(ind, "E.plain_session_done(T)" if self.plain_sessions else "E.session_done(T)")
        self.mod.emit(ind, "return")

    def init_function(self, body: list) -> _Late:
        name = self.mod.fresh("_init_")
        self.mod.emit(0, f"def {name}(E, T, A):")
        self.mod.emit(1, "S = T.sess")
        if any(has_draw(s) for s in body):
            self.mod.emit(1, "_rk = _turn_key(S.serial, 0)")
            stream = "site:_rk"
        else:
            stream = None
        self.mod.emit(1, "pass")
        ctx = _Ctx(side="init", stream=stream)
        ctx.env = self.stmt_env(stream)
        self.block(body, ctx, 1)
        return _Late(name)

    def block(self, body: list, ctx: "_Ctx", ind: int) -> None:
        carried = None  # the decode run the prefill run before it carries (step_run)
        for i, s in enumerate(body):
            if s is carried:
                continue
            d = body[i + 1] if i + 1 < len(body) and _chains(s, body[i + 1]) else None
            self.mod.loc_stack.append(s.at or self.mod.loc_stack[-1])
            if self._lazy_session_stream and ctx.stream == "R" and draws_outside_bodies(s):
                # (a draw's value does not depend on when its stream object was made: it is keyed)
                self.mod.emit(ind, "if R is None:")
                self.mod.emit(ind + 1, "R = E.streams.session(S.serial)")
            try:
                if d is not None:
                    carried = d
                    env = ctx.env if ctx.env is not None else self.stmt_env(ctx.stream)
                    self.step_run(s, ctx, ind, env, carried=d)
                else:
                    self.stmt(s, ctx, ind)
            except CompileError as e:
                if e.loc is None:  # the statement it is about
                    e.loc = self.mod.loc_stack[-1]
                raise
            finally:
                self.mod.loc_stack.pop()

    def stmt(self, s, ctx: "_Ctx", ind: int) -> None:
        emit = self.mod.emit
        env = ctx.env if ctx.env is not None else self.stmt_env(ctx.stream)
        k = s.kind
        if k in ("set", "observe") and env.stream is not None and env.stream.startswith("site:"):
            env.hoist = []
            value = self.expr(s.value, env)
            for line in env.hoist:
                emit(ind, line)
            env.hoist = None
        elif k in ("set", "observe"):
            value = self.expr(s.value, env)
        if k == "set":
            emit(ind, f"A[{s.name!r}] = {value}")
        elif k == "observe":
            idx = self.engine.observe_index(s.name)
            samples = self.engine.observes[idx]
            if self.engine.observe_log is None and not samples.meta and samples.all is None:
                # (SampleSet.record, written out for a set that keeps values alone: a call saved per observation)
                append = self.mod.bind("_obs_append_", samples.values.append)
                v = self.mod.fresh("_v")
                emit(ind, f"{v} = float({value})")
                emit(ind, f"if E.now >= {self.engine.warmup!r}:")
                emit(ind + 1, f"{append}({v})")
            elif self.engine.observe_log is None:  # (E.observe, written out: a call saved per observation)
                emit(ind, f"E.observes[{idx}].record({value}, E.now, T.sess, E.warmup)")
            else:
                emit(ind, f"E.observe({idx}, {value}, T)")
        elif k == "turn":
            self.turn(ctx, ind)
        elif k == "run":
            self.run(s, ctx, ind, env)
        elif k == "hold":
            self.hold(s, ctx, ind, env)
        elif k == "grow":
            fv, pos = self.enclosing(ctx, s.pool, "grow")
            t = self.mod.fresh("_a")
            emit(ind, f"{t} = {self.expr(s.amount, env)}")
            emit(ind, f"if E.grow(T, {fv}, {pos}, {t}):")
            emit(ind + 1, "yield")
        elif k == "load":
            fv, pos = self.enclosing(ctx, s.pool, "load")
            emit(ind, f"E.load(T, {fv}, {pos}, {self.expr(s.amount, env)})")
        elif k == "release":
            found = self.find_enclosing(ctx, s.pool)
            if found is not None:
                emit(ind, f"E.release_alloc(T, {found[0]}, {found[1]})")
            else:
                emit(ind, f"E.release_lease(T, {self.member('pool', s.pool, env)})")
        elif k == "drop":
            emit(ind, f"E.drop(T, {self.member('pool', s.pool, env)})")
        elif k == "branch":
            self.branch(s, ctx, ind, env)
        elif k == "while":
            g = self.mod.fresh("_g")
            emit(ind, "while True:")
            emit(ind + 1, f"{g} = {self.expr(s.test, env)}")
            emit(ind + 1, f"if {g} == 0.0:")
            emit(ind + 2, "break")
            if not is_boolean(s.test):
                emit(ind + 1, f"if {g} != 1.0:")
                emit(ind + 2, f"E.bad_guard({g})")
            self.block(s.body, ctx, ind + 1)
            self.loop_guard(s.body, ind + 1)
        elif k == "loop":
            emit(ind, "while True:")
            self.block(s.body, ctx, ind + 1)
            self.loop_guard(s.body, ind + 1)
        elif k == "fork":
            leg = self.leg_function(s.body, ctx)
            name = self.mod.bind("_legref_", leg)
            emit(ind, f"E.fork(T, {name})")
        elif k == "join":
            emit(ind, "if E.join(T):")
            emit(ind + 1, "yield")
        elif k == "choose":
            self.choose(s, ctx, ind, env)
        elif k == "end":
            emit(ind, "E.end(T, True)" if ctx.side == "server" else "E.end(T)")
            self.finish_thread(ind, main=True)
        else:
            raise CompileError(f"unknown statement kind {k}")

    def loop_guard(self, body: list, ind: int) -> None:
        n = max(1, _count_stmts(body))
        self.mod.emit(ind, f"T.n += {n}")
        self.mod.emit(ind, f"if T.n > {STATEMENT_LIMIT}:")
        self.mod.emit(ind + 1, "E.too_many(T)")

    def turn(self, ctx: "_Ctx", ind: int) -> None:
        emit = self.mod.emit
        if ctx.side != "session":
            raise CompileError("`turn;` stands only in the session block")
        after_prologue, self._turn_after_prologue = self._turn_after_prologue, False
        emit(ind, "S.turns += 1")
        if "turn_no" in self.attrs_read or ctx.trace:
            emit(ind, "A['turn_no'] = S.turns + 0.0")
        if ctx.trace:
            emit(ind, "E.trace_turn(T)")
        turn_body = self.program.workload.turn
        stream = None
        key_line = None
        if any(has_draw(s) for s in turn_body):
            # the turn's key K(t) = B + t·δ, inline (rng.block_key); dropped below if no draw reads it
            key_expr = f"((_tk + S.turns * {TURN_STRIDE}) & {M64})"
            key_line = len(self.mod.lines)
            emit(ind, f"_rk = {key_expr}")
            stream = "site:_rk"
        tctx = _Ctx(side="turn", stream=stream)
        tctx.env = self.stmt_env(stream)
        if stream is not None:  # _fi: the session's index in the block of first turns, or -1
            ft = tctx.env.first = self.first_turns()
            tctx.env.key_expr = key_expr
            # (the session's first turn, straight after the prologue, which ran at the same resumption:
            # no other session moved the block since, and its _fi is this turn's)
            if not after_prologue:
                emit(ind, f"_fi = S.serial - {ft}.lo if S.turns == 1 else -1")
                emit(ind, f"if not 0 <= _fi < {ft}.n:")
                emit(ind + 1, "_fi = -1")
        self.block(turn_body, tctx, ind)
        if after_prologue:  # (whether this turn read its key K(1), from B, whatever held the session)
            self._prologue_key_read = tctx.env.key_read
        if key_line is not None and not tctx.env.key_read:
            del self.mod.lines[key_line]
            del self.mod.line_locs[key_line]
        emit(ind, "S.t0 = E.now")
        emit(ind, "S.in_turn = True")
        emit(ind, "E.turns_started += 1")
        logs = self.engine.turn_log is not None  # the general form keeps the turn log
        if self.engine.has_steps or logs:
            emit(ind, "E.turn_start(S)")
        self.block(self.program.server, _Ctx(side="server", stream=ctx.stream), ind)
        resp = self.engine.client_response
        if self.engine.has_steps or resp.meta or logs:
            emit(ind, "E.answer(S)")
        else:  # the client's response, recorded inline (E.answer is the general form)
            append = self.mod.bind("_resp_append_", resp.values.append)
            emit(ind, "if S.in_turn:")
            emit(ind + 1, "S.in_turn = False")
            emit(ind + 1, "_t = E.now")
            emit(ind + 1, "E.turns_answered += 1")
            emit(ind + 1, f"if _t >= {self.engine.warmup!r}:")
            emit(ind + 2, f"{append}(_t - S.t0)")
            if resp.all is not None:
                all_append = self.mod.bind("_resp_all_", resp.all.append)
                emit(ind + 1, f"{all_append}(_t - S.t0)")

    def branch(self, s, ctx: "_Ctx", ind: int, env: Env) -> None:
        emit = self.mod.emit
        test = self.expr(s.test, env)
        if is_boolean(s.test):
            emit(ind, f"if {test} != 0.0:")
            self.block_or_pass(s.then, ctx, ind + 1)
            if s.otherwise:
                emit(ind, "else:")
                self.block(s.otherwise, ctx, ind + 1)
            return
        g = self.mod.fresh("_g")
        emit(ind, f"{g} = {test}")
        emit(ind, f"if {g} == 1.0:")
        self.block_or_pass(s.then, ctx, ind + 1)
        emit(ind, f"elif {g} == 0.0:")
        self.block_or_pass(s.otherwise, ctx, ind + 1)
        emit(ind, "else:")
        emit(ind + 1, f"E.bad_guard({g})")

    def block_or_pass(self, body: list, ctx: "_Ctx", ind: int) -> None:
        if body:
            self.block(body, ctx, ind)
        else:
            self.mod.emit(ind, "pass")

    def choose(self, s, ctx: "_Ctx", ind: int, env: Env) -> None:
        emit = self.mod.emit
        n, c, best, bk, key = (self.mod.fresh(p) for p in ("_n", "_c", "_best", "_bk", "_k"))
        emit(ind, f"{n} = E.count_of({self.expr(s.count, env)}, 'the count of a choose')")
        emit(ind, f"{best} = 0")
        emit(ind, f"{bk} = None")
        emit(ind, f"for {c} in range({n}):")
        emit(ind + 1, f"A[{s.name!r}] = float({c})")
        parts = [self.expr(k, env) for k in s.keys]
        emit(ind + 1, f"{key} = (" + "".join(p + ", " for p in parts) + ")")
        emit(ind + 1, f"if {bk} is None or {key} < {bk}:")
        emit(ind + 2, f"{best} = {c}")
        emit(ind + 2, f"{bk} = {key}")
        emit(ind, f"A[{s.name!r}] = float({best})")

    # -- runs
    def run(self, s, ctx: "_Ctx", ind: int, env: Env) -> None:
        emit = self.mod.emit
        if s.mode is not None:
            self.step_run(s, ctx, ind, env)
            return
        w = self.mod.fresh("_w")
        emit(ind, f"{w} = {self.expr(s.work, env)}")
        emit(ind, f"if not {w} >= 0.0:")
        emit(ind + 1, f"E.bad_amount('the work of a run', {w})")
        grow = None
        if s.growing is not None:
            grow = self.enclosing(ctx, s.growing, "a growing run")
            emit(ind, f"if E.grow_for_run(T, {grow[0]}, {grow[1]}, {w}):")
            emit(ind + 1, "yield")
        shared = any(st.stage in self.engine.shared_stage_names for st in s.stages)
        members = [self.member("stage", st, env) for st in s.stages]
        emit(ind, f"if {w} > 0.0:")
        if shared:
            emit(ind + 1, f"E.flows.add(T, ({''.join(m + ', ' for m in members)}), {w})")
        else:
            if len(members) != 1:
                raise CompileError("a run over several stages needs the program's share policy", s.at)
            emit(ind + 1, f"{members[0]}.add(T, {w})")
        emit(ind + 1, "yield")
        if grow is not None:
            emit(ind, f"E.advance(T, {grow[0]}, {grow[1]}, {w})")

    def step_run(self, s, ctx: "_Ctx", ind: int, env: Env, carried=None) -> None:
        """`run S prefill (w) [growing P]`: the thread becomes a resident of the step stage, which
        grows the hold and advances its position iteration by iteration (serq.sim.steps).

        `carried`: the decode run written next, which this prefill carries (`_chains`): the run
        carries the decode's work, which the stage reads when the prefill ends and turns the run
        into the decode in place (`StepStage.chain_decode`), as the thread would at once on the same
        instant: the same resident, place and hold, without the thread's round trip. `_ch` says the
        decode ran so; else (no prefill, a decode of no work, or one the thread must read itself for
        its error) the thread runs the decode statement as written."""
        emit = self.mod.emit
        if len(s.stages) != 1:
            raise CompileError("a run on an engine names one stage", s.at)
        member = self.member("stage", s.stages[0], env)
        w = self.mod.fresh("_w")
        emit(ind, f"{w} = {self.expr(s.work, env)}")
        emit(ind, f"if not {w} >= 0.0:")
        emit(ind + 1, f"E.bad_amount('the work of a run', {w})")
        fv, pos = ("None", 0)
        if s.growing is not None:
            fv, pos = self.enclosing(ctx, s.growing, "a growing run")
        if carried is None:
            emit(ind, f"if {w} > 0.0:")
            emit(ind + 1, f"{member}.add_run(T, {w}, {s.mode == 'decode'}, {fv}, {pos})")
            emit(ind + 1, "yield")
            return
        work = self.function("_dw_", ("E", "T", "A"), self.expr(carried.work, self.stmt_env(None)), carried.at)
        ch = self.mod.fresh("_ch")
        emit(ind, f"{ch} = False")
        emit(ind, f"if {w} > 0.0:")
        emit(ind + 1, "T.chained = False")
        emit(ind + 1, f"{member}.add_run(T, {w}, False, {fv}, {pos}, {work.name})")
        emit(ind + 1, "yield")
        emit(ind + 1, f"{ch} = T.chained")
        emit(ind, f"if not {ch}:")
        self.mod.loc_stack.append(carried.at or self.mod.loc_stack[-1])
        try:
            self.step_run(carried, ctx, ind + 1, env)
        finally:
            self.mod.loc_stack.pop()

    # -- holds
    def find_enclosing(self, ctx: "_Ctx", ref):
        key = ref_key(ref)
        for fkey, fv, pos in reversed(ctx.frames):
            if fkey == key:
                return fv, pos
        return None

    def enclosing(self, ctx: "_Ctx", ref, what: str):
        found = self.find_enclosing(ctx, ref)
        if found is None:
            raise CompileError(f"{what} on `{ref.pool}` stands inside no hold of it")
        return found

    def hold(self, s, ctx: "_Ctx", ind: int, env: Env) -> None:
        emit = self.mod.emit
        spec = self.hold_spec(s)
        hname = self.mod.bind("_H", spec)
        fv = self.mod.fresh("_F")
        x = self.mod.fresh("_x")
        emit(ind, f"{fv} = E.hold(T, {hname})")
        emit(ind, "yield")
        emit(ind, "while True:")
        emit(ind + 1, "try:")
        inner = ctx.with_frames([(ref_key(hp.pool), fv, i) for i, hp in enumerate(s.pools)])
        self.block_or_pass(s.body, inner, ind + 2)
        emit(ind + 2, "break")
        emit(ind + 1, f"except _Preempted as {x}:")
        emit(ind + 2, f"if {x}.frame is not {fv}:")
        emit(ind + 3, "raise")
        emit(ind, f"E.hold_end(T, {fv})")

    def hold_spec(self, s):
        from serq.sim.pools import HoldSpec, HoldPoolSpec
        henv = Env("a hold's header", attrs="A", ctx={"now": "E.now"}, stream=None, thread="T")
        pools = []
        names = []
        for hp in s.pools:
            names.append(hp.pool.pool)
            resolver = self.member_resolver("pool", hp.pool, henv)
            units = self.function("_hu_", ("E", "T", "A"), self.expr(hp.units, henv), s.at)
            reserve = (self.function("_hr_", ("E", "T", "A"), self.expr(hp.reserve, henv), s.at)
                       if hp.reserve is not None else None)
            pools.append(HoldPoolSpec(
                name=hp.pool.pool, resolver=resolver, units=units, reserve=reserve,
                units_static=is_static(hp.units),
                reserve_static=hp.reserve is None or is_static(hp.reserve),
                refusable=self.refusable_at_join(hp)))
        reuse = cache = lease_fn = None
        reuse_pools = cache_pools = frozenset()
        if s.reuse is not None:
            reuse = self.function("_hreuse_", ("E", "T", "A"), self.expr(s.reuse, henv), s.at)
            reuse_pools = ir.clause_pools(s.reuse, names)
        cenv = Env("a hold's cache", attrs="A", ctx={"now": "E.now"}, stream="E.mrng", thread="T")
        if s.cache is not None:
            cache = self.function("_hc_", ("E", "T", "A"), self.expr(s.cache, cenv), s.at)
            cache_pools = ir.clause_pools(s.cache, names)
        lease_pos = None
        if s.lease is not None:
            key = ref_key(s.lease.pool)
            for i, hp in enumerate(s.pools):
                if ref_key(hp.pool) == key:
                    lease_pos = i
            if lease_pos is None:
                raise CompileError(f"the lease names `{s.lease.pool.pool}`, which the hold does not hold", s.at)
            lenv = Env("a lease's duration", attrs="A", ctx={"now": "E.now"}, stream="E.mrng", thread="T")
            lease_fn = self.function("_hl_", ("E", "T", "A"), self.expr(s.lease.duration, lenv), s.at)
        spec = HoldSpec(loc=s.at, text="hold " + ", ".join(names), pools=pools, reuse=reuse,
                        reuse_pools=reuse_pools, cache=cache, cache_pools=cache_pools,
                        lease_pos=lease_pos, lease=lease_fn)
        self.holds.append(spec)
        return spec

    def refusable_at_join(self, hp) -> bool:
        """Whether a hold's pool may refuse it when it joins (`Holds.rejected_at_join`): not when it asks
        a number of units, with no reserve, that every member of its family fits within its cap
        (`reqs (1)` on an engine's slots), a check that the hold then skips at every join."""
        units = hp.units
        while isinstance(units, ir.CostOf):  # (`cost(kv, e)` is e, in units of the pool)
            units = units.arg
        if hp.reserve is not None or not isinstance(units, ir.Num):
            return True
        u = float(units.value)
        if not 0.0 <= u < math.inf:  # (rejected_at_join reports it)
            return True
        return any(m.up(u) > m.cap for m in self.engine.pool_members[hp.pool.pool])

    # -- legs
    def leg_function(self, body: list, ctx: "_Ctx") -> _Late:
        """A fork's body as a generator function of its own, emitted after the current function."""
        saved_lines, saved_locs = self.mod.lines, self.mod.line_locs
        self.mod.lines, self.mod.line_locs = [], []
        lazy, self._lazy_session_stream = self._lazy_session_stream, False  # (a leg makes its own at once)
        name = self.mod.fresh("_leg_")
        draws = any(has_draw(s) for s in body)
        self.mod.emit(0, f"def {name}(E, T, A):")
        self.mod.emit(1, "S = T.sess")
        if draws:
            self.mod.emit(1, "R = E.streams.leg(S.serial, T.leg_no)")
        self.mod.emit(1, "if False:")
        self.mod.emit(2, "yield")
        self.block(body, _Ctx(side="leg", stream="R" if draws else None), 1)
        self.finish_thread(1, main=False)
        self._lazy_session_stream = lazy
        leg_lines, leg_locs = self.mod.lines, self.mod.line_locs
        self.mod.lines, self.mod.line_locs = saved_lines, saved_locs
        self.pending_functions.append((leg_lines, leg_locs))
        return _Late(name)

    # ------------------------------------------------------------ finishing
    def flush_pending(self) -> None:
        """Append the legs' functions written while another function was being emitted."""
        while self.pending_functions:
            lines, locs = self.pending_functions.pop(0)
            self.mod.lines.extend(lines)
            self.mod.line_locs.extend(locs)

    def finish(self) -> dict:
        self.flush_pending()
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


@dataclass
class _Ctx:
    side: str  # session | server | turn | init | leg
    stream: str | None = None
    trace: bool = False
    frames: list = field(default_factory=list)  # (ref key, frame variable, pool position), outer first
    env: Env | None = None  # a straight-line block's one environment (its draws are numbered across it)

    def with_frames(self, more: list) -> "_Ctx":
        return _Ctx(self.side, self.stream, self.trace, self.frames + more, self.env)


# A prefill run carries the decode run written after it (`step_run`, `_chains`); False: every run
# statement is its own residency (tests/test_fast_paths.py runs both and compares everything).
CARRY_DECODES = True


def _chains(s, d) -> bool:
    """A prefill run and, next, a decode run that it can carry (`step_run`): one engine, named
    without an index, the same growing hold, and a decode work that reads only attributes and numbers
    (read when the prefill ends, it is what the thread would read on that instant)."""
    if not CARRY_DECODES or s.kind != "run" or d.kind != "run" or s.mode != "prefill" or d.mode != "decode":
        return False
    if len(s.stages) != 1 or len(d.stages) != 1:
        return False
    a, b = s.stages[0], d.stages[0]
    if a.stage != b.stage or a.index is not None or b.index is not None:
        return False
    if (s.growing is None) != (d.growing is None):
        return False
    if s.growing is not None and ref_key(s.growing) != ref_key(d.growing):
        return False
    return is_static(d.work)


def _count_stmts(body: list) -> int:
    """The statements one pass of a loop body executes at most, its inner loops aside (they count
    their own passes): those of both arms of a branch and of a hold's body."""
    n = 0
    for s in body:
        n += 1
        if s.kind == "branch":
            n += _count_stmts(s.then) + _count_stmts(s.otherwise)
        elif s.kind == "hold":
            n += _count_stmts(s.body)
    return n


