"""Oracle scenarios -> Lean theorems: the oracle program instanced per scenario, through the kernel templates."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from serq.leangen.fragment import FragmentProgram, fragment
from serq.leangen.kernel import KernelProgram, kernel_program, render_kernel_template
from serq.leangen.kernel_drt import KERNEL_FUEL
from serq.link import link_file
from serq.oracle import ORACLE_PROGRAM, Scenario, load_scenario, program_inputs, write_trace


def instance_ir(scenario: Scenario, program: Path = ORACLE_PROGRAM):
    """Link the oracle program for a scenario: its config as inputs, its requests as the trace.
    Returns the IR and the folder it was linked in (which holds the trace)."""
    folder = Path(tempfile.mkdtemp(prefix="serq-oracle-"))
    target = folder / program.name
    target.write_text(program.read_text())
    write_trace(scenario, folder / "vllm_request.csv")
    return link_file(target, program_inputs(scenario.config)), folder


def scenario_fragment(scenario: Scenario) -> FragmentProgram:
    program, folder = instance_ir(scenario)
    return fragment(program, folder)


def _ident(name: str) -> str:
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return ident if ident[0].isalpha() else "s_" + ident


@dataclass
class _Rendered:
    ident: str
    name: str
    description: str
    program: KernelProgram
    expected: list[tuple[int, int, int, int, int, int]]  # (serial, turn from 1, first, last, preemptions, cached)
    unfinished: list[tuple[int, int]]  # (serial, turn from 1) vLLM's driver did not finish within `steps`
    fuel: int
    steps: int


def render_kernel_oracle_module(paths: list[Path], title: str) -> str:
    """The oracle theorems through the kernel interpreter (`Serq.KernelOracle`): each scenario's instance
    of the oracle program as a `Serq.Kernel.Program` value and what vLLM did. The kernel's sessions are
    the trace's in arrival order (`KernelTrace.file_order`), its turns count from 1."""
    scenarios = []
    for path in paths:
        sc = load_scenario(path)
        program, folder = instance_ir(sc)
        try:
            kp = kernel_program(program, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        serial_of = {file_no: serial for serial, file_no in enumerate(kp.trace.file_order)}
        done = {k: e for k, e in sc.expected.items() if e.first is not None and e.last is not None}
        expected = sorted((serial_of[sid], turn + 1, e.first, e.last, e.preemptions, e.cached or 0)
                          for (sid, turn), e in done.items())
        unfinished = sorted((serial_of[sid], turn + 1) for (sid, turn) in sc.expected if (sid, turn) not in done)
        if unfinished and sc.steps is None:
            raise ValueError(f"{sc.name}: did_not_finish without schedule_calls")
        description = json.loads(path.read_text())["scenario"].get("description", "").replace("-/", "- /")
        scenarios.append(_Rendered(_ident(sc.name), sc.name, description, kp, expected, unfinished,
                                         KERNEL_FUEL, sc.steps if unfinished else 0))
    return render_kernel_template("kernel_oracle.lean.j2", title=title, scenarios=scenarios)
