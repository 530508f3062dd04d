"""Hypothesis strategies for IR programs of the kernel fragment (serq.leangen.kernel).

A program is built as IR directly: random statement trees in the workload's init, turn and
session blocks and in the server (set, observe, branch, bounded while and loop, end, run on a
delay stage), random expressions over the attributes and `now`, one to four sessions of a batch.

Two things the generator keeps to, because the fragment's semantics needs them and the IR cannot
show them:

* **Every loop ends.** A `while` or `loop` has a counter of its own (an attribute no other
  statement sets), reset before it and raised by one at the end of its body, and a bound of at most
  three rounds; a `loop` leaves by `end;`.
* **No subtraction goes below 0.** The fragment computes over ℕ; a subtraction is written
  `max(a, b) - b`. Values stay small (`min(…, 1000)` on every set and work), so that the
  interpreter's doubles are exact.
"""

from __future__ import annotations

from hypothesis import strategies as st

from serq.ir import models as ir
from serq.leangen.kernel_drt import KernelCase

BUILTINS = ["cached", "computed", "serial", "turn_no"]
SESSION_VALUES = ["v0", "v1"]          # set by the workload
SESSION_COUNTERS = ["c0", "c1"]        # a session loop's counter, one per nesting depth
SERVER_VALUES = ["s0", "s1"]           # set by the server
SERVER_COUNTERS = ["sc0", "sc1"]
OBSERVES = ["o0", "o1", "o2"]
STAGE = "d"
CAP = 1000  # the largest value a set or a work stores
MAX_DEPTH = 3  # blocks nest at most this deep (the language allows 8)


def _num(v: int) -> ir.Num:
    return ir.Num(value=v)


def _bin(op: str, a, b) -> ir.Binary:
    return ir.Binary(op=op, lhs=a, rhs=b)


def expressions(readable: list[str], depth: int = 3):
    leaves = st.one_of(
        st.integers(0, 6).map(_num),
        st.sampled_from(readable).map(lambda n: ir.Attr(name=n)),
        st.just(ir.Ctx(var="now")),
    )
    if depth == 0:
        return leaves
    sub = expressions(readable, depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.sampled_from(["add", "mul", "eq", "ne", "lt", "le", "gt", "ge", "and", "or"]), sub, sub)
          .map(lambda t: _bin(*t)),
        st.tuples(sub, sub).map(lambda t: _bin("sub", ir.Call(fn="max", args=[t[0], t[1]]), t[1])),
        st.tuples(sub, st.integers(1, 4)).map(lambda t: _bin("mod", t[0], _num(t[1]))),
        st.tuples(sub, st.integers(1, 4)).map(
            lambda t: ir.Call(fn="floor", args=[_bin("div", t[0], _num(t[1]))])),
        st.tuples(st.sampled_from(["min", "max"]), st.lists(sub, min_size=2, max_size=3))
          .map(lambda t: ir.Call(fn=t[0], args=t[1])),
        st.tuples(sub, sub, sub).map(lambda t: ir.Cond(test=t[0], then=t[1], otherwise=t[2])),
        sub.map(lambda e: ir.Unary(op="not", arg=e)),
    )


def guards(readable: list[str]):
    """A branch's or a while's test: 0 or 1, as the interpreter requires of a guard (any other value
    is the program's run-time error there, which the Lean model does not have)."""
    e = expressions(readable, 2)
    compare = st.tuples(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), e, e).map(lambda t: _bin(*t))
    return st.one_of(
        compare,
        e.map(lambda x: ir.Unary(op="not", arg=x)),
        st.tuples(st.sampled_from(["and", "or"]), compare, e).map(lambda t: _bin(*t)),
    )


def _capped(e) -> ir.Call:
    return ir.Call(fn="min", args=[e, _num(CAP)])


@st.composite
def blocks(draw, side: str, depth: int = 0, size: int = 3) -> list:
    """A block of `side` ('init', 'turn', 'session', 'server'): at most `size` statements."""
    session_side = side != "server"
    values = SESSION_VALUES if session_side else SERVER_VALUES
    counters = SESSION_COUNTERS if session_side else SERVER_COUNTERS
    readable = BUILTINS[2:] + SESSION_VALUES + SESSION_COUNTERS + (SERVER_VALUES + SERVER_COUNTERS if not session_side else [])
    expr = expressions(readable)
    guard = guards(readable)
    kinds = ["set", "observe", "branch"]
    if side in ("session", "server"):
        kinds += ["run", "run", "while", "loop"]
    if side == "session":
        kinds += ["turn", "turn", "turn"]
    out: list = []
    for _ in range(draw(st.integers(0 if depth or side != "session" else 1, size))):
        kind = draw(st.sampled_from(kinds))
        if kind in ("while", "loop") and depth >= len(counters) or kind == "branch" and depth >= MAX_DEPTH:
            kind = "set"
        if kind == "set":
            out.append(ir.SetStmt(name=draw(st.sampled_from(values)), value=_capped(draw(expr))))
        elif kind == "observe":
            out.append(ir.ObserveStmt(name=draw(st.sampled_from(OBSERVES)), value=draw(expr)))
        elif kind == "run":
            work = ir.CostOf(resources=[STAGE], arg=ir.Call(fn="min", args=[draw(expr), _num(50)]))
            out.append(ir.RunStmt(stages=[ir.StageRef(stage=STAGE)], work=work))
        elif kind == "turn":
            out.append(ir.TurnStmt())
        elif kind == "branch":
            out.append(ir.BranchStmt(test=draw(guard), then=draw(blocks(side, depth + 1, 2)),
                                     otherwise=draw(blocks(side, depth + 1, 2))))
        else:  # a bounded loop with a counter of its own, reset first and raised last
            counter = counters[depth]
            bound = draw(st.integers(0, 3))
            body = draw(blocks(side, depth + 1, 2))
            raise_it = ir.SetStmt(name=counter, value=_bin("add", ir.Attr(name=counter), _num(1)))
            out.append(ir.SetStmt(name=counter, value=_num(0)))
            if kind == "while":
                out.append(ir.WhileStmt(test=_bin("lt", ir.Attr(name=counter), _num(bound)),
                                        body=[*body, raise_it]))
            else:
                leave = ir.BranchStmt(test=_bin("ge", ir.Attr(name=counter), _num(bound)), then=[ir.EndStmt()])
                out.append(ir.LoopStmt(body=[*body, raise_it, leave]))
    if depth == 0 and side in ("session", "server") and draw(st.integers(0, 9)) == 0:
        out.append(ir.EndStmt())  # now and then a session ends, or a request is refused, on purpose
    return out


def _attributes() -> list[ir.Attribute]:
    sides = {**{n: "builtin" for n in BUILTINS}, **{n: "session" for n in SESSION_VALUES + SESSION_COUNTERS},
             **{n: "server" for n in SERVER_VALUES + SERVER_COUNTERS}}
    return [ir.Attribute(name=n, side=s) for n, s in sorted(sides.items())]


@st.composite
def kernel_cases(draw) -> KernelCase:
    # a counter a loop uses is not set by any other statement: the values and counters are apart
    # by name, and every loop resets its own counter before it starts
    init = draw(blocks("init"))
    turn = draw(blocks("turn"))
    session = draw(blocks("session", size=4))
    if not any(isinstance(x, ir.TurnStmt) for x in session):  # a session has a turn of its own
        session.insert(draw(st.integers(0, len(session))), ir.TurnStmt())
    server = draw(blocks("server", size=4))
    program = ir.Program(
        source="kernel-drt",
        attributes=_attributes(),
        stages=[ir.Stage(name=STAGE, service=ir.Ps(capacity=ir.Ctx(var="present")))],
        workload=ir.Workload(arrival=ir.Batch(sessions=draw(st.integers(1, 4))), init=init, turn=turn,
                             session=session),
        server=server,
    )
    return KernelCase(program)
