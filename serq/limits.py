"""The toolchain's limits: how deep a program may nest, and the bounds on the counts, sizes and
rates a run would otherwise allocate without limit (docs/language.md, *Limits*).

The nesting limits are what the interpreter's generated Python can hold (serq/sim/compile.py
writes a hold as `while True: try:`, a loop as `while True:`, an expression's operators as nested
parentheses; Python compiles at most 20 statically nested blocks, 100 levels of indentation and
200 nested parentheses) with room to spare, and what every stage of the toolchain walks without
running out of Python's recursion. They are checked before anything walks a program recursively:
the parser counts them as it reduces (no tree walk), the expander as it writes defs and aggregates
out, and the IR checker (`check_ir_depths`, iteratively) on any IR, written by `serq ir` or by hand.
"""

from __future__ import annotations

from serq.blocks import inner_blocks
from serq.errors import SerqError

# An expression nests at most this deep: every operator, call, draw, aggregate, index and
# conditional is a level, and a name or a number is one (`1 + 2` is 2 deep; a chain
# `a + b + c` is one level per operator; parentheses alone are none).
EXPR_DEPTH = 64
# Blocks nest at most this deep: a branch's arms, a while's, loop's, fork's and hold's body, a
# schedule's branch, each a level. A turn runs the turn block and the server's statements where
# it stands, so their blocks count from the depth of the `turn;` (a session's `loop { turn; }`
# leaves the server 7).
BLOCK_DEPTH = 8
# Defs are written out inside one another at most this deep (f calls g calls h …).
DEF_DEPTH = 64

# Counts (the reference: closed(n), batch(n), an array's members, a fifo's servers, a choose).
COUNT_LIMIT = 1_000_000
# The sessions live at once: a run that would hold more stops with an error naming the workload
# (an arrival rate the server cannot keep up with), before it exhausts memory.
LIVE_LIMIT = 1_000_000
# The members of every pool and stage array together that `serq run` builds (each is an object of
# the run, some 5 to 10 kB: 10^5 members take about a gigabyte); `serq check` links up to COUNT_LIMIT.
MEMBER_LIMIT = 100_000
# `--arrivals N` and an instance file's `arrivals`: at most this many (a count the report writes
# exactly as a JSON number).
ARRIVALS_LIMIT = 2 ** 53


def nesting_error(what: str, limit: int, span, hint: str = "") -> SerqError:
    """The refusal of a program nested past a limit, located at the node that passes it."""
    return SerqError(f"nesting deeper than {limit}: {what}{hint} (docs/language.md, Limits)", span, "parse")


# ---------------------------------------------------------------- the IR
def check_ir_depths(program, where=None) -> None:
    """Refuse IR nested past the limits (an expression deeper than EXPR_DEPTH, blocks deeper than
    BLOCK_DEPTH, counting a turn's server statements from the turn), iteratively, before anything
    walks it recursively. `where(path, loc)` makes the error (validate's `_Where`)."""
    from serq.ir import models as ir

    def fail(msg: str, path: str, loc):
        if len(path) > 120:  # a path 64 levels deep: its two ends
            path = f"{path[:50]}…{path[-50:]}"
        if where is not None:
            raise where(path, loc).error(msg)
        raise SerqError(f"{path}: {msg}", None, "ir")

    # -- blocks: the session's, the turn's and the server's at each turn's depth, init's, legs'
    wl = program.workload
    turn_depth = [0]

    def blocks(body, base: int, path: str, on_turn=None) -> None:
        stack = [(body, base, path, None)]
        while stack:
            stmts, depth, p, loc = stack.pop()
            for i, s in enumerate(stmts):
                here = f"{p}[{i}]"
                sloc = getattr(s, "at", None) or loc
                if isinstance(s, ir.TurnStmt) and on_turn is not None:
                    on_turn(depth)
                inner = inner_blocks(s)
                if inner and depth + 1 > BLOCK_DEPTH:  # a block statement is a level, its arms empty or not
                    fail(f"nesting deeper than {BLOCK_DEPTH}: blocks nest at most {BLOCK_DEPTH} deep"
                         " (docs/language.md, Limits)", f"{here}.{inner[0][0]}", sloc)
                for name, v in inner:
                    stack.append((v, depth + 1, f"{here}.{name}", sloc))

    blocks(wl.session, 0, "workload.session", lambda d: turn_depth.__setitem__(0, max(turn_depth[0], d)))
    blocks(wl.init, 0, "workload.init")
    blocks(wl.turn, turn_depth[0], "workload.turn")
    blocks(program.server, turn_depth[0], "server")
    for st in program.stages:
        if isinstance(st.service, ir.Step) and st.service.iteration:
            blocks(st.service.iteration, 0, f"stage {st.name}.iteration")

    # -- expressions: every node's depth, refs (PoolRef, StageRef) aside
    refs = (ir.PoolRef, ir.StageRef)
    exprs = (ir.Num, ir.Inf, ir.Attr, ir.Ctx, ir.Reg, ir.Unary, ir.Binary, ir.Cond, ir.Call, ir.Draw,
             ir.CostOf, ir.PoolObs, ir.StageObs, ir.Observed)
    stack = [(program, 0, "", None)]
    while stack:
        node, depth, path, loc = stack.pop()
        if isinstance(node, exprs):
            depth += 1
            if depth > EXPR_DEPTH:
                fail(f"nesting deeper than {EXPR_DEPTH}: an expression nests at most {EXPR_DEPTH} deep"
                     " (docs/language.md, Limits)", path, loc)
        elif not isinstance(node, refs):
            depth = 0
        loc = getattr(node, "at", None) or loc
        for name in type(node).model_fields:
            v = getattr(node, name)
            if isinstance(v, ir.Node):
                stack.append((v, depth, f"{path}.{name}" if path else name, loc))
            elif isinstance(v, list):
                for i, x in enumerate(v):
                    if isinstance(x, ir.Node):
                        stack.append((x, depth, f"{path}.{name}[{i}]" if path else f"{name}[{i}]", loc))
