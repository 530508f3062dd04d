"""Differential testing of the kernel fragment: the Python interpreter against `Serq.Kernel`, on
generated IR programs (tests/drt/kernel_strategies.py).

A case is an IR program of the kernel fragment (serq.leangen.kernel). The interpreter runs it and
records, per session, the turns it answered and the observations it made; a Lean theorem per case
says the Lean interpreter's run of the same IR agrees (`Serq.Kernel.agrees`, `decide +kernel`).
Batches of theorems are checked by `serq.leangen.drt.check_in_lean`, as the engine model's are. A
divergence is written out as the program's IR, which `serq run case.json` reruns, its source, which
`serq run case.sq` with its settings' flags reruns (`rerun_line`), and its Lean batch.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from serq.errors import SerqError
from serq.ir import models as ir
from serq.ir.to_source import relinked, run_flags, same_program
from serq.leangen.drt import Divergence, case_ident, check_in_lean
from serq.leangen.kernel import (BINOPS, KernelProgram, SessionRecord, kernel_program, recorded_run,
                                 render_kernel_template, trace_places)

#: The fuel of every case: a bound on the statements one block runs, loop rounds included. The
#: kernel's cost is the statements actually run, not the fuel; a case that needs more fails (its
#: theorem says no session ran out of fuel), it does not pass.
KERNEL_FUEL = 100_000


@dataclass
class KernelCase:
    program: ir.Program

    def size(self) -> int:
        return len(ir.to_json(self.program))


@dataclass(frozen=True)
class KernelObserved:
    value: KernelProgram
    sessions: tuple[SessionRecord, ...]
    records: tuple[tuple[tuple[int, ...], ...], ...] = ()  # per stage, its engine's iterations (none: no engine)


def observe_kernel(case: KernelCase, horizon: float = math.inf) -> KernelObserved:
    """The case's Lean value and what the reference interpreter recorded of its run (a run still going at
    `horizon` raises serq.leangen.kernel.RunNotEnded)."""
    value = kernel_program(case.program, Path("."))
    sessions, records = recorded_run(case.program, value, horizon=horizon)
    return KernelObserved(value, tuple(sessions), tuple(records))


def render_kernel_batch(items: list[tuple[int, KernelCase, KernelObserved]], title: str) -> str:
    cases = [{"ident": case_ident(i), "program": obs.value, "expected": obs.sessions, "fuel": KERNEL_FUEL,
              "records": _stage_records(obs)} for i, _, obs in items]
    return render_kernel_template("kernel_drt.lean.j2", title=title, cases=cases)


def _stage_records(observed: KernelObserved) -> tuple:
    """Per stage, its engine's iterations (none for every stage when none were recorded)."""
    return observed.records or tuple(() for _ in observed.value.services)


def check_kernel_in_lean(items: list[tuple[int, KernelCase, KernelObserved]], **options) -> list[Divergence]:
    """Every case's agreement theorem checked in Lean; the cases that diverge."""
    return check_in_lean(items, render=render_kernel_batch, **options)


def write_kernel_reproducer(case: KernelCase, observed: KernelObserved, folder: Path) -> Path:
    """The case's IR (`serq run case.json` reruns it), its Lean theorem (`case.lean`), the program as serQ
    source (`case.sq`, when the language says it: its source links back to the IR; `serq run case.sq` with
    the settings' flags reruns it) and a README.md that says how to rerun it (`rerun_line`). A case that
    replays a trace has a copy of the trace beside them, which its IR and source name relatively (`serq
    run` reads a trace from the program's folder), so the folder reruns wherever it is moved. Returns
    case.json's path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "case.json"
    program = _with_trace_beside(case.program, folder)
    path.write_text(ir.to_json(program))
    (folder / "case.lean").write_text(render_kernel_batch([(0, case, observed)], "a divergent case"))
    refused = _write_source(program, folder)
    readme = [f"# A divergent kernel case\n\nRerun it from this folder: `{rerun_line(folder, here=True)}`"]
    if refused is None:
        readme.append(" (or `serq run case.json`, the IR).\n")
    else:
        readme.append(f".\n\nNo case.sq: the language does not say this program ({refused}).\n")
    readme.append("\ncase.lean states that Lean's interpreter (`Serq.Kernel`) agrees with what the Python "
                  "interpreter recorded of the run, which it does not.\n")
    (folder / "README.md").write_text("".join(readme))
    return path


def _write_source(program: ir.Program, folder: Path) -> str | None:
    """`case.sq` in `folder` when the program's source links back to it (None); else why not, the source (if
    the printer wrote one) kept as `refused.sq`."""
    path = folder / "case.sq"
    try:
        if same_program(relinked(program, path), program):
            return None
        refused = "refused.sq, its source, links to another IR: a bug of serq.ir.to_source"
    except SerqError as e:  # (the printer's refusal names the construct; the linker's, where in the source)
        refused = f"refused.sq:{e.span.line}:{e.span.col}: {e.message}" if e.kind != "ir" and e.span else e.message
    if path.exists():
        path.replace(folder / "refused.sq")
    return refused


def rerun_line(folder: Path, here: bool = False) -> str:
    """The command that reruns a reproducer written in `folder` (`here`: from the folder itself): `serq run
    case.sq` with the flags of its settings, or, when the language does not say the program, `serq run
    case.json`."""
    where = Path() if here else folder
    if not (folder / "case.sq").exists():
        return f"serq run {where / 'case.json'}"
    settings = ir.from_json((folder / "case.json").read_text()).settings
    return " ".join(["serq run", str(where / "case.sq"), *run_flags(settings)])


def write_trace(text: str, folder: Path) -> Path:
    """A trace's file in `folder`, named by its content (`trace-<sha16>.csv`), so that reruns, pytest's workers
    and the shrinker's candidates write and read the same file; written once, atomically (a reader never
    sees a half-written one)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"trace-{hashlib.sha256(text.encode()).hexdigest()[:16]}.csv"
    if not path.exists() or path.read_text() != text:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def _with_trace_beside(program: ir.Program, folder: Path) -> ir.Program:
    """The program, its trace (if it replays one) copied into `folder` under its own name and named so,
    relatively; a program without a trace as it is."""
    arrival = program.workload.arrival
    if not isinstance(arrival, ir.Trace):
        return program
    source = Path(arrival.file)
    (folder / source.name).write_bytes(source.read_bytes())
    workload = program.workload.model_copy(update={"arrival": arrival.model_copy(update={"file": source.name})})
    return program.model_copy(update={"workload": workload})


# ------------------------------------------------------------------ the compiled path
#: `Serq.Kernel.BinOp`'s constructors in order: a binary operator's number on a case line.
_OPCODES = tuple(BINOPS.values())
_EXPR_TAGS = {"num": 0, "attr": 1, "now": 2, "not": 3, "bin": 4, "cond": 5, "min": 6, "max": 7, "floorDiv": 8,
              "waited": 9, "used": 10, "free": 11, "holders": 12, "queued": 13, "cachedIn": 14, "stageVar": 15,
              "blockSize": 16}
_STMT_TAGS = {"turn": 0, "set": 1, "observe": 2, "branch": 3, "while": 4, "loop": 5, "stop": 6, "run": 7,
              "hold": 8, "release": 9, "step": 10, "grow": 11}
_SERVICE_TAGS = {"delay": 0, "fifo": 1, "step": 2}


def _expr_tokens(e, out: list) -> None:
    out.append(_EXPR_TAGS[e.ctor])
    if e.ctor == "bin":
        out.append(_OPCODES.index(e.args[0]))
        _expr_tokens(e.args[1], out)
        _expr_tokens(e.args[2], out)
        return
    for a in e.args:
        if isinstance(a, int):
            out.append(a)
        else:
            _expr_tokens(a, out)


def _optional_tokens(e, out: list) -> None:
    """An optional expression (`Serq.Kernel.readOptExpr`): 0 none, 1 e."""
    if e is None:
        out.append(0)
    else:
        out.append(1)
        _expr_tokens(e, out)


def _block_tokens(block, out: list) -> None:
    out.append(len(block))
    for s in block:
        out.append(_STMT_TAGS[s.ctor])
        if s.ctor == "hold":  # its pools as a list of (pool, units, reserve, caches, reuses, lease), its clauses
            out.append(len(s.args[0]))
            for pool, units, reserve, caches, reuses, lease in s.args[0]:
                out.append(pool)
                _expr_tokens(units, out)
                _expr_tokens(reserve, out)
                out.extend((int(caches), int(reuses)))
                if lease is None or lease == "inf":  # 0 none, 1 `lease m (inf)`, 2 t `lease m (t)`
                    out.append(0 if lease is None else 1)
                else:
                    out.append(2)
                    _expr_tokens(lease, out)
            for clause in s.args[1:]:  # reuse, cache
                _optional_tokens(clause, out)
            _block_tokens(s.blocks[0], out)
            continue
        for a in s.args:
            if isinstance(a, int):  # (a bool, a run on an engine's `decode`, is 0 or 1)
                out.append(int(a))
            else:
                _expr_tokens(a, out)
        for b in s.blocks:
            _block_tokens(b, out)


#: `Serq.Kernel.IterStmt`'s constructors' tags on a case line (`Serq.Kernel.readIterStmts`).
_ITER_TAGS = {"serve": 0, "admit": 1, "branch": 2, "set": 3}


def _iteration_tokens(block, out: list) -> None:
    """An engine's iteration body: its length, then each statement (`serve only`, `admit only gate`,
    `branch test yes no`, `set register value`)."""
    out.append(len(block))
    for s in block:
        out.append(_ITER_TAGS[s.ctor])
        if s.ctor == "branch":
            _expr_tokens(s.args[0], out)
            for b in s.blocks:
                _iteration_tokens(b, out)
        elif s.ctor == "set":
            out.append(s.args[0])
            _expr_tokens(s.args[1], out)
        else:
            for e in s.args:
                _optional_tokens(e, out)


def _key_lists_tokens(lists, out: list) -> None:
    """Per pool, its keys (`Serq.Kernel.readKeyLists`): their count, then each list as its length and
    its expressions."""
    out.append(len(lists))
    for keys in lists:
        out.append(len(keys))
        for k in keys:
            _expr_tokens(k, out)


def encode_case(case_id: int, observed: KernelObserved, fuel: int = KERNEL_FUEL) -> str:
    """The case as a line of `Serq.Kernel.checkLine` (lean/Serq/KernelCodec.lean says the format)."""
    p = observed.value
    out = [case_id, fuel, len(p.attributes), p.serial_at, p.turn_no_at, p.sessions, p.gap]
    for block in (p.init, p.turn_block, p.session, p.server):
        _block_tokens(block, out)
    out.append(len(p.services))
    for svc in p.services:
        out.extend((_SERVICE_TAGS[svc[0]], *svc[1:]))
    out.append(len(p.caps))
    out.extend(p.caps)
    _key_lists_tokens(p.queue_keys, out)
    out.append(len(p.blocks))
    out.extend(p.blocks)
    out.append(p.cached_at)
    out.append(p.computed_at)
    out.append(len(p.engines))
    for budget, chunk, cost, order, serve_only, admit_only, gated, granule in p.engines:
        for c in (budget, chunk, cost):
            _expr_tokens(c, out)
        out.append(len(order))
        for k in order:
            _expr_tokens(k, out)
        for only in (serve_only, admit_only):  # 0 none, 1 e
            _optional_tokens(only, out)
        out.append(1 if gated else 0)
        _expr_tokens(granule, out)
    out.append(len(p.admit_via))
    out.extend(p.admit_via)
    out.append(len(p.preempt_modes))
    out.extend(p.preempt_modes)
    _key_lists_tokens(p.preempt_keys, out)
    _key_lists_tokens(p.evict_keys, out)
    times = p.trace.times if p.trace is not None else []
    out.append(len(times))
    out.extend(times)
    places = trace_places(p)
    out.append(len(places))
    out.extend(places)
    rows = p.trace.rows if p.trace is not None else []
    out.append(len(rows))
    for session in rows:
        out.append(len(session))
        for row in session:
            out.extend(row)
    trace_nos = p.trace.file_order if p.trace is not None else []
    out.append(len(trace_nos))
    out.extend(trace_nos)
    out.append(len(p.reserve_held))
    out.extend(1 if h else 0 for h in p.reserve_held)
    out.append(len(p.exclusive))
    out.extend(p.exclusive)
    out.append(len(p.bodies))
    for body, registers in zip(p.bodies, p.registers, strict=True):
        _iteration_tokens(body, out)
        out.append(len(registers))
        out.extend(registers)
    out.append(len(observed.sessions))
    for s in observed.sessions:
        for made in (s.answers, s.observations, s.tokens):
            out.append(len(made))
            for x in reversed(made):  # newest first, as Serq.Kernel keeps them
                out.extend(x)
    records = _stage_records(observed)
    out.append(len(records))
    for rs in records:
        out.append(len(rs))
        for r in reversed(rs):
            out.extend(r)
    return " ".join(map(str, out))


#: The modules whose definitions the compiled driver declares again (in this order), and where each
#: one's executable part ends (its theorems follow).
DRIVER_MODULES = (("KernelMachine.lean", None), ("KernelMemory.lean", None), ("Kernel.lean", None),
                  ("KernelExclusive.lean", "/-! ### No engine under"),
                  ("KernelBody.lean", "/-! ### A body's serving"), ("KernelCodec.lean", None))


def driver_semantics(root: Path | None = None) -> str:
    """The text of Serq.Kernel's definitions (not its theorems) and Serq.KernelCodec's, as the
    declarations of a plain file in the namespace `Serq.KernelRun`."""
    from serq.leangen.build import find_root
    folder = (root or find_root()) / "lean" / "Serq"
    parts = []
    for name, stop in DRIVER_MODULES:
        text = (folder / name).read_text()
        body = text[text.index("@[expose] public section\n") + len("@[expose] public section\n"):]
        body = body[:body.index(stop)] if stop else body[:body.index("end Serq.Kernel")]
        body = body.replace("namespace Serq.Kernel\n", "", 1)
        parts.append(f"-- {name}\n" + body.strip() + "\n")
    return "namespace Serq.KernelRun\n\n" + "\n".join(parts) + "\nend Serq.KernelRun\n"


@dataclass(frozen=True)
class CompiledVerdict:
    agreeing: int
    diverging: tuple[int, ...]  # case ids
    unreadable: tuple[int, ...]  # line numbers (from 1)
    seconds: float


def run_compiled(items: list[tuple[int, KernelCase, KernelObserved]], folder: Path | None = None) -> CompiledVerdict:
    """Check every case in one Lean process that reads them as lines on its standard input."""
    import re
    import tempfile

    from serq.leangen.build import compile_file
    from serq.leangen.fragment import environment
    folder = folder or Path(tempfile.mkdtemp(prefix="serq-kdrt-"))
    cases = folder / "cases.txt"
    cases.write_text("".join(encode_case(i, obs) + "\n" for i, _, obs in items))
    driver = folder / "KernelDriver.lean"
    driver.write_text(environment().get_template("kernel_driver.lean.j2").render(semantics=driver_semantics()))
    result = compile_file(driver, stdin=cases)
    # the #eval's value, a string, is an information message in quotes
    summary = [d.message.strip('"') for d in result.diagnostics if d.message.startswith('"kernel-drt:')]
    if not result.ok or not summary:
        raise RuntimeError(f"the compiled kernel driver failed: {[d.message for d in result.diagnostics][:5]} "
                           f"{result.output[-2000:]}")
    m = re.match(r"kernel-drt: agreeing (\d+); diverging \[([\d ]*)\]; unreadable \[([\d ]*)\]", summary[-1])
    if m is None:
        raise RuntimeError(f"the compiled kernel driver said: {summary[-1]}")
    nums = lambda s: tuple(sorted(int(x) for x in s.split()))  # noqa: E731
    return CompiledVerdict(int(m.group(1)), nums(m.group(2)), nums(m.group(3)), result.seconds)
