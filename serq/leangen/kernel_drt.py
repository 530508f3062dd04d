"""Differential testing of the kernel fragment: the Python interpreter against `Serq.Kernel`, on
generated IR programs (tests/drt/kernel_strategies.py).

A case is an IR program of the kernel fragment (serq.leangen.kernel). The interpreter runs it and
records, per session, the turns it answered and the observations it made; a Lean theorem per case
says the Lean interpreter's run of the same IR agrees (`Serq.Kernel.agrees`, `decide +kernel`).
Batches of theorems are checked by `serq.leangen.drt.check_in_lean`, as the engine model's are. A
divergence is written out as the program's IR, which `serq run case.json` reruns, beside its
Lean batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from serq.ir import models as ir
from serq.leangen.drt import Divergence, case_ident, check_in_lean
from serq.leangen.kernel import KernelProgram, SessionRecord, kernel_program, lean_block, recorded

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


def observe_kernel(case: KernelCase) -> KernelObserved:
    """The case's Lean value and what the reference interpreter recorded of its run."""
    value = kernel_program(case.program, Path("."))
    return KernelObserved(value, tuple(recorded(case.program, value)))


def render_kernel_batch(items: list[tuple[int, KernelCase, KernelObserved]], title: str) -> str:
    from serq.leangen.fragment import environment
    cases = [{"ident": case_ident(i), "program": obs.value, "expected": obs.sessions, "fuel": KERNEL_FUEL}
             for i, _, obs in items]
    return environment().get_template("kernel_drt.lean.j2").render(title=title, cases=cases, block=lean_block)


def check_kernel_in_lean(items: list[tuple[int, KernelCase, KernelObserved]], **options) -> list[Divergence]:
    """Every case's agreement theorem checked in Lean; the cases that diverge."""
    return check_in_lean(items, render=render_kernel_batch, **options)


def write_kernel_reproducer(case: KernelCase, observed: KernelObserved, folder: Path) -> Path:
    """The case's IR (`serq run case.json` reruns it) and its Lean theorem (`case.lean`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "case.json"
    path.write_text(ir.to_json(case.program))
    (folder / "case.lean").write_text(render_kernel_batch([(0, case, observed)], "a divergent case"))
    return path
