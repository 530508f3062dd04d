"""Shrinking a divergent kernel case to a small program that still diverges.

A generated program that the interpreter and `Serq.Kernel` disagree on is as large as the generator
drew it: pools, engines and statements that have nothing to do with the disagreement. `shrink` makes it
small before it is written out (`serq.leangen.kernel_drt.write_kernel_reproducer`): it tries every
one-step simplification of the program at once (`simplifications`: fewer sessions, a statement
dropped, a compound statement replaced by its body or an arm, an expression replaced by a constant or
by one of its parts, a number made smaller, a pool or stage no statement names dropped; for a program
that replays a trace, a trace session or one turn's row dropped, or one of the trace's numbers made
smaller, the trace written beside the original under its content's name; each with the attribute table
its statements give, `linked_attributes`, so that it stays a program a `.sq` says), keeps the
smallest that is still a program of the fragment, still runs in the interpreter and still diverges,
and starts again from it until no simplification diverges (delta debugging's greedy descent).

Whether candidates diverge is asked of an oracle, a batch at a time (`Oracle`): one Lean process a
round checks every candidate of that round (`lean_oracle`, the compiled path of
`serq.leangen.kernel_drt`), so a shrink costs a Lean start-up per round, not per candidate. The
simplifications work on the program's JSON form, where statements and expressions are the objects
whose `kind` names them, so that every IR construct is shrunk the same way without a case per model.
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, get_args

from serq.errors import SerqError
from serq.ir import models as ir
from serq.ir.to_source import linked_attributes
from serq.ir.validate import validate
from serq.leangen.kernel_drt import (KernelCase, KernelObserved, observe_kernel, rerun_line, run_compiled,
                                     write_kernel_reproducer, write_trace)
from serq.sim.trace import COLUMNS as TRACE_COLUMNS
from serq.sim.engine import SimRunError



def _kinds(union) -> frozenset:
    """The `kind` of every model of a discriminated union of the IR (`ir.Stmt`, `ir.Expr`)."""
    return frozenset(model.model_fields["kind"].default for model in get_args(get_args(union)[0]))


#: the `kind` of every statement and of every expression in the IR's JSON form
STATEMENT_KINDS = _kinds(ir.Stmt)
EXPRESSION_KINDS = _kinds(ir.Expr)
#: an expression's parts that are expressions themselves (a simplification may put one in its place)
_EXPRESSION_PARTS = ("arg", "lhs", "rhs", "test", "then", "otherwise")

#: Given usable candidates, which diverge (one verdict per candidate, in order).
Oracle = Callable[[list[tuple[KernelCase, KernelObserved]]], list[bool]]


@dataclass(frozen=True)
class Shrunk:
    case: KernelCase
    observed: KernelObserved
    rounds: int  # the rounds that found a smaller diverging program
    tried: int  # the candidates the oracle judged
    complete: bool  # no simplification of `case` diverges (False: a bound on rounds or time stopped it)


def shrink(case: KernelCase, oracle: Oracle, batch: int = 400, max_rounds: int = 60,
           seconds: float = math.inf,
           observe: Callable[[KernelCase, float], KernelObserved] = observe_kernel) -> Shrunk:
    """The smallest diverging program the greedy descent reaches from `case` (itself when nothing
    smaller diverges). Each round takes the simplifications smallest first and asks the oracle about
    them `batch` at a time, until a batch has one that diverges; the smallest of those is the next
    round's program. `observe(case, horizon)` runs a candidate in the interpreter; a candidate it refuses
    (outside the fragment, invalid, a run-time error, a run not ended by the horizon) is not one the
    oracle sees. The descent stops after `max_rounds` rounds or once `seconds` have passed, with the
    smallest diverging program found so far (`complete` False)."""
    clock0 = time.monotonic()
    best, best_observed = case, observe(case)
    # a simplification can make a run endless (a loop's guard made 1): a candidate still running at
    # twice the original run's last event (and a margin) is no smaller reproducer
    horizon = 2 * last_event(best_observed) + 100
    rounds = tried = 0
    while True:
        if rounds == max_rounds or time.monotonic() - clock0 > seconds:
            return Shrunk(best, best_observed, rounds, tried, complete=False)
        found = None
        usable: list[tuple[KernelCase, KernelObserved]] = []
        candidates = simplifications(best.program)
        for k, program in enumerate(candidates):
            pair = usable_case(program, horizon, observe)
            if pair is not None:
                usable.append(pair)
            if usable and (len(usable) == batch or k == len(candidates) - 1):
                tried += len(usable)
                diverging = [pair for pair, diverges in zip(usable, oracle(usable)) if diverges]
                usable = []
                if diverging:  # (the batch is in ascending measure: its first diverging is its least)
                    found = diverging[0]
                    break
        if found is None:
            return Shrunk(best, best_observed, rounds, tried, complete=True)
        best, best_observed = found
        rounds += 1


def usable_case(program: ir.Program, horizon: float,
                observe: Callable[[KernelCase, float], KernelObserved] = observe_kernel
                ) -> tuple[KernelCase, KernelObserved] | None:
    """The program as a case and its run, or None when it is no case to judge: not a valid program of the
    fragment (SerqError), one the interpreter stops with a run-time error, or one that computes what is
    not a natural number or does not end by `horizon` (ValueError)."""
    case = KernelCase(program)
    try:
        validate(program)
        return case, observe(case, horizon)
    except (SerqError, SimRunError, ValueError):
        return None


def last_event(observed: KernelObserved) -> int:
    """The time of the run's last answer, observation or iteration start."""
    times = [0]
    for s in observed.sessions:
        times += [answered for _, _, _, answered in s.answers] + [t for _, _, _, t, _ in s.observations]
    for records in observed.records:
        times += [r[0] for r in records]  # (ITERATION_FIELDS[0], the start)
    return max(times)


def lean_oracle(folder: Path | None = None) -> Oracle:
    """Each candidate checked by the compiled Lean driver against what the interpreter recorded: one Lean
    process a round."""
    def judge(items: list[tuple[KernelCase, KernelObserved]]) -> list[bool]:
        verdict = run_compiled([(i, case, observed) for i, (case, observed) in enumerate(items)], folder)
        diverging = set(verdict.diverging) | set(verdict.unreadable)
        return [i in diverging for i in range(len(items))]
    return judge


# ------------------------------------------------------------------ one-step simplifications
def simplifications(program: ir.Program) -> list[ir.Program]:
    """Every program one simplification away from `program` and smaller by `measure`, each once, smallest
    first (a candidate the IR's models refuse is left out here; the fragment's and the interpreter's
    refusals are `shrink`'s)."""
    tree = json.loads(ir.to_json(program))
    bound = measure(program)
    seen: set[str] = set()
    ranked = []
    for candidate in _candidate_trees(tree):
        try:
            # (the attribute table the language derives, and `set a = 0;` for an attribute whose sets all went:
            # the shrunk program stays one a `.sq` says, its reproducer's case.sq)
            smaller = linked_attributes(ir.from_json(json.dumps(candidate)))
        except ValueError:  # (pydantic's ValidationError is one)
            continue
        text = ir.to_json(smaller)
        if text in seen:  # (two simplifications can make one program)
            continue
        seen.add(text)
        size = measure(smaller)
        if size < bound:
            ranked.append((size, len(ranked), smaller))
    ranked.sort(key=lambda r: r[:2])
    return [program for _, _, program in ranked]


def measure(program: ir.Program) -> tuple[int, float]:
    """What the descent makes smaller: the program's JSON length, then the sum of its numbers (so that a
    number halved, which may keep its length, counts as smaller); a trace the program replays counts with
    it, its text's length and its numbers (its file's name, a hash of its text, keeps its length)."""
    text = ir.to_json(program)
    tree = json.loads(text)
    size, total = len(text), sum(abs(v) for _, v in _numbers(tree, ()))
    trace = _trace_file(tree)
    if trace is not None:
        header, rows = _trace_rows(trace)
        size += len(_trace_text(header, rows))
        total += sum(abs(float(cell)) for row in rows for cell in row if _whole(cell) is not None)
    return size, total


def _candidate_trees(tree: dict) -> Iterator[dict]:
    yield from _fewer_arrivals(tree)
    yield from _smaller_traces(tree)
    yield from _unnamed_declarations_dropped(tree)
    for path, block in _statement_blocks(tree, ()):
        for i, stmt in enumerate(block):
            yield _replaced(tree, path, block[:i] + block[i + 1:])
            for inner in _inner_blocks(stmt):
                yield _replaced(tree, path, block[:i] + inner + block[i + 1:])
    for path, expr in _expressions(tree, ()):
        for simpler in _simpler_expressions(expr):
            yield _replaced(tree, path, simpler)
    for path, value in _numbers(tree, ()):
        for smaller in _smaller_numbers(value):
            yield _replaced(tree, path, smaller)


def _fewer_arrivals(tree: dict) -> Iterator[dict]:
    """A smaller `--arrivals N` (the settings' numbers are not among `_numbers`: the seed and horizon are
    not the program's; a `batch(n)`'s n is one of them)."""
    arrivals = tree.get("settings", {}).get("arrivals")
    if isinstance(arrivals, int):
        for fewer in _smaller_numbers(arrivals):
            yield _replaced(tree, ("settings", "arrivals"), fewer)


def _trace_file(tree: dict) -> Path | None:
    """The trace the program's arrivals replay (the generator's traced programs), if any."""
    arrival = tree.get("workload", {}).get("arrival", {})
    return Path(arrival["file"]) if arrival.get("kind") == "trace" else None


def _trace_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """A trace's header and rows, as the cells' text."""
    with path.open(newline="") as f:
        lines = list(csv.reader(f))
    return lines[0], [row for row in lines[1:] if row]


def _trace_text(header: list[str], rows: list[list[str]]) -> str:
    return "".join(",".join(cells) + "\n" for cells in [header, *rows])


def _whole(cell: str) -> int | None:
    """A cell's whole number (the generator writes every number of a trace so), else None."""
    return int(cell) if cell.isdigit() else None


def _smaller_traces(tree: dict) -> Iterator[dict]:
    """For a program that replays a trace: the trace with a session dropped (when it has more than one), a
    row dropped (one turn of a session of several), a session's `arrive` made smaller (in each of its rows:
    the reader takes it from the first), or a turn's number made smaller. Each is written beside the trace
    under its own content's name (`write_trace`) and named by the candidate."""
    path = _trace_file(tree)
    if path is None:
        return
    header, rows = _trace_rows(path)
    if not set(TRACE_COLUMNS) <= set(header):
        return  # (a trace the reader refuses: left as it is)
    session, arrive = header.index("session"), header.index("arrive")
    turn_columns = [header.index(c) for c in TRACE_COLUMNS if c not in ("session", "arrive")]
    sessions: dict[str, list[int]] = {}  # a session's rows, in the file's order
    for i, row in enumerate(rows):
        sessions.setdefault(row[session], []).append(i)

    def candidate(new_rows: list[list[str]]) -> dict:
        written = write_trace(_trace_text(header, new_rows), path.parent)
        return _replaced(tree, ("workload", "arrival", "file"), str(written))

    for members in sessions.values():
        if len(sessions) > 1:
            yield candidate([row for i, row in enumerate(rows) if i not in members])
        if len(members) > 1:
            for i in members:
                yield candidate(rows[:i] + rows[i + 1:])
        first = _whole(rows[members[0]][arrive])
        for smaller in _smaller_numbers(first) if first is not None else ():
            yield candidate([row[:arrive] + [str(smaller)] + row[arrive + 1:] if i in members else row
                             for i, row in enumerate(rows)])
    for i, row in enumerate(rows):
        for c in turn_columns:
            value = _whole(row[c])
            for smaller in _smaller_numbers(value) if value is not None else ():
                yield candidate(rows[:i] + [row[:c] + [str(smaller)] + row[c + 1:]] + rows[i + 1:])


def _unnamed_declarations_dropped(tree: dict) -> Iterator[dict]:
    """A pool, stage, gauge or claim taken out of the program (validation, or the fragment's export, refuses
    those still named or needed; the attribute table is what the statements say, `linked_attributes`)."""
    for field in ("pools", "stages", "gauges", "claims"):
        items = tree.get(field) or []
        for i in range(len(items)):
            yield _replaced(tree, (field,), items[:i] + items[i + 1:])


def _statement_blocks(node, path: tuple) -> Iterator[tuple[tuple, list]]:
    """Every list of statements in the tree, outermost first, with its path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _statement_blocks(value, path + (key,))
    elif isinstance(node, list):
        if node and all(isinstance(x, dict) and x.get("kind") in STATEMENT_KINDS for x in node):
            yield path, node
        for i, value in enumerate(node):
            yield from _statement_blocks(value, path + (i,))


def _inner_blocks(stmt: dict) -> Iterator[list]:
    """A compound statement's bodies, each of which may stand in its place."""
    for key in ("body", "then", "otherwise"):
        inner = stmt.get(key)
        if isinstance(inner, list):
            yield inner


def _expressions(node, path: tuple) -> Iterator[tuple[tuple, dict]]:
    if isinstance(node, dict):
        if node.get("kind") in EXPRESSION_KINDS:
            yield path, node
        for key, value in node.items():
            yield from _expressions(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _expressions(value, path + (i,))


def _simpler_expressions(expr: dict) -> Iterator[dict]:
    if expr["kind"] != "num":
        yield {"kind": "num", "value": 0}
        yield {"kind": "num", "value": 1}
    for key in _EXPRESSION_PARTS:
        part = expr.get(key)
        if isinstance(part, dict) and part.get("kind") in EXPRESSION_KINDS:
            yield part
    for part in expr.get("args") or []:
        if isinstance(part, dict) and part.get("kind") in EXPRESSION_KINDS:
            yield part


def _numbers(node, path: tuple) -> Iterator[tuple[tuple, int | float]]:
    """Every number of the tree that is not a location's line or column."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("at", "settings", "version"):
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield path + (key,), value
            else:
                yield from _numbers(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, path + (i,))


def _smaller_numbers(value: int | float) -> Iterator[int]:
    if value > 1:
        yield from sorted({1, int(value) // 2, int(value) - 1} - {int(value)})
    if value == 1:
        yield 0


def _replaced(node, path: tuple, new):
    """`node` with the value at `path` replaced (copies along the path only)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(node, list):
        out = list(node)
    else:
        out = dict(node)
    out[head] = _replaced(node[head], rest, new)
    return out



def write_shrunk_reproducer(case: KernelCase, observed: KernelObserved, folder: Path, oracle: Oracle | None = None,
                            seconds: float = 600.0) -> tuple[Path, str]:
    """A divergent case written for a person: its shrunk program in `folder` (`case.json`, `case.sq`,
    `case.lean` and README.md, as `write_kernel_reproducer` writes them) and the program as generated in
    `folder/generated`. The oracle is Lean's compiled driver unless one is given. Returns the shrunk case's
    path and a line that says how to rerun it (`rerun_line`) and how far it shrank (or why it did not: the
    generated case is then the one in `folder`)."""
    generated = write_kernel_reproducer(case, observed, folder / "generated")
    try:
        shrunk = shrink(case, oracle or lean_oracle(), seconds=seconds)
    except (RuntimeError, OSError, SerqError) as e:  # (the Lean driver failed: the generated case stands)
        path = write_kernel_reproducer(case, observed, folder)
        return path, f"rerun: {rerun_line(folder)}; not shrunk ({e}); generated: {generated}"
    path = write_kernel_reproducer(shrunk.case, shrunk.observed, folder)
    how = "a local minimum" if shrunk.complete else "stopped by its bound on rounds or time"
    return path, (f"rerun: {rerun_line(folder)}; shrunk in {shrunk.rounds} rounds ({shrunk.tried} candidates "
                  f"judged, {how}) from {case.size()} to {shrunk.case.size()} characters of IR; generated: {generated}")
