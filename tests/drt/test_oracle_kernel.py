"""The oracle program (examples/oracle/vllm_request.sq) through the kernel fragment: every shared vLLM
scenario (tests/data/oracle) as the program with its config and its requests as an ordered trace, run
by the Python interpreter and by the compiled Lean interpreter of the kernel IR (`Serq.Kernel`), which
must agree on every turn's answer and tokens and every iteration (the interpreter agrees with vLLM on
these scenarios: tests/test_sim_engines.py)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from helpers import REPO, report_drt
from serq.leangen.kernel import kernel_program, recorded_run
from serq.leangen.kernel_drt import KernelCase, KernelObserved, run_compiled
from serq.leangen.oracle_lean import instance_ir
from serq.link import link_file
from serq.oracle import load_scenario, scenario_paths
from serq.sim.oracle_run import run_scenario

ORACLE = REPO / "examples" / "oracle" / "vllm_request.sq"

def test_the_oracle_program_is_in_the_kernel_fragment():
    kp = kernel_program(link_file(ORACLE), ORACLE.parent)
    assert kp.trace is not None and kp.trace.times  # the trace's sessions and their arrivals
    assert [s[0] for s in kp.services] == ["step", "delay"]


@pytest.mark.lean
def test_every_oracle_scenario_runs_alike_in_the_kernel():
    t0 = time.monotonic()
    items, names, cut = [], {}, 0
    for i, path in enumerate(scenario_paths(REPO / "tests" / "data" / "oracle")):
        scenario = load_scenario(path)
        if run_scenario(scenario).report["stopped"] != "idle":
            cut += 1  # vLLM's driver stopped at its step cap; the kernel's run goes to the end
            continue
        program, folder = instance_ir(scenario)
        try:
            kp = kernel_program(program, folder)
            sessions, records = recorded_run(program, kp, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        items.append((i, KernelCase(program), KernelObserved(kp, tuple(sessions), tuple(records))))
        names[i] = path.stem
    assert len(items) >= 100
    recorded = time.monotonic() - t0
    verdict = run_compiled(items)
    assert not verdict.unreadable
    diverging = sorted(names[i] for i in verdict.diverging)
    assert not diverging, f"diverging scenarios: {diverging}"
    assert verdict.agreeing == len(items)
    report_drt(f"kernel, the oracle program on the shared vLLM scenarios, compiled: {verdict.agreeing} agree, "
               f"{cut} cut at a step cap; "
               f"interpreter {recorded:.0f} s, Lean {verdict.seconds:.0f} s")


@pytest.mark.lean
def test_the_paper_programs_in_the_kernel_fragment_run_alike():
    """li_dai_peng.sq and fastertransformer.sq (`arrive batch(n)`, which the engine model does not take)
    are kernel programs: the compiled kernel's runs are the interpreter's."""
    items = []
    for i, name in enumerate(("li_dai_peng.sq", "fastertransformer.sq")):
        f = REPO / "examples" / "papers" / name
        program = link_file(f)
        kp = kernel_program(program, f.parent)
        sessions, records = recorded_run(program, kp, f.parent)
        assert sum(len(r) for r in records) > 0  # the engine ran
        items.append((i, KernelCase(program), KernelObserved(kp, tuple(sessions), tuple(records))))
    verdict = run_compiled(items)
    assert verdict.agreeing == 2 and not verdict.diverging and not verdict.unreadable
