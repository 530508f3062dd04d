"""Differential testing of the kernel fragment (issue 13, first increment): generated IR programs
(tests/drt/kernel_strategies.py) run by the Python interpreter and by the Lean interpreter of the
kernel IR (`Serq.Kernel`), which must agree on every answered turn and every observation.

`test_interpreter_runs_generated_kernel_programs` runs KERNEL_DRT_CASES cases (300 by default;
`SERQ_KERNEL_DRT_CASES=2000` for more); `test_lean_agrees_on_generated_kernel_programs` checks each
in Lean as a `decide +kernel` theorem. The planted bugs are copies of the interpreter's semantics,
made by rewriting the program the interpreter runs: each must be caught.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from helpers import REPO
from kernel_strategies import kernel_cases
from serq.ir import models as ir
from serq.ir.validate import validate
from serq.leangen.kernel import recorded
from serq.leangen.kernel_drt import (KernelCase, KernelObserved, check_kernel_in_lean, observe_kernel,
                                     write_kernel_reproducer)

KERNEL_DRT_CASES = int(os.environ.get("SERQ_KERNEL_DRT_CASES", "300"))
COLLECTED: list[tuple[int, KernelCase, KernelObserved]] = []
FAILURES = REPO / "drt-failures"


@settings(max_examples=KERNEL_DRT_CASES, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(kernel_cases())
def test_interpreter_runs_generated_kernel_programs(case: KernelCase):
    validate(case.program)  # the generator writes IR a person could have written
    observed = observe_kernel(case)
    for s in observed.sessions:
        assert all(start <= answered for _, _, start, answered in s.answers)
        assert [turn for _, turn, _, _ in s.answers] == sorted({turn for _, turn, _, _ in s.answers})
    COLLECTED.append((len(COLLECTED), case, observed))


@pytest.mark.lean
def test_lean_agrees_on_generated_kernel_programs():
    if len(COLLECTED) < KERNEL_DRT_CASES:
        test_interpreter_runs_generated_kernel_programs()
    assert len(COLLECTED) >= KERNEL_DRT_CASES
    answers = sum(len(s.answers) for _, _, o in COLLECTED for s in o.sessions)
    observations = sum(len(s.observations) for _, _, o in COLLECTED for s in o.sessions)
    assert answers > KERNEL_DRT_CASES and observations > KERNEL_DRT_CASES  # the cases do something
    failures = check_kernel_in_lean(COLLECTED)
    if failures:
        first = min(failures, key=lambda f: f.case.size())
        path = write_kernel_reproducer(first.case, first.observed, FAILURES / f"kernel{first.case_id}")
        pytest.fail(f"{len(failures)} of {len(COLLECTED)} kernel cases diverge; the smallest is {path} "
                    f"(serq run {path}); Lean said: {first.message[:500]}")
    print(f"kernel DRT: {len(COLLECTED)} generated programs, {answers} turns, {observations} observations; "
          "0 divergences")


# ------------------------------------------------------------------ planted bugs
def _rewritten(program: ir.Program, rewrite) -> ir.Program:
    """A copy of the program with every statement list passed through `rewrite`."""
    buggy = program.model_copy(deep=True)

    def walk(body: list) -> list:
        out = rewrite(body)
        for s in out:
            for name in ("then", "otherwise", "body"):
                if isinstance(getattr(s, name, None), list):
                    setattr(s, name, walk(getattr(s, name)))
        return out

    w = buggy.workload
    w.init, w.turn, w.session = walk(w.init), walk(w.turn), walk(w.session)
    buggy.server = walk(buggy.server)
    return buggy


def _while_runs_once(body: list) -> list:
    """A planted bug: a `while` tests its guard once (it runs as a branch)."""
    return [ir.BranchStmt(test=s.test, then=s.body) if isinstance(s, ir.WhileStmt) else s for s in body]


def _set_after_observe(body: list) -> list:
    """A planted bug: an `observe` right before a `set` reads the value that set gives (the two swap)."""
    out = list(body)
    for k in range(len(out) - 1):
        if isinstance(out[k], ir.ObserveStmt) and isinstance(out[k + 1], ir.SetStmt):
            out[k], out[k + 1] = out[k + 1], out[k]
    return out


PLANTED = {"while_runs_once": _while_runs_once, "set_after_observe": _set_after_observe}


def _planted_cases(rewrite, wanted: int = 8) -> list[tuple[int, KernelCase, KernelObserved]]:
    found: list[tuple[int, KernelCase, KernelObserved]] = []

    @settings(max_examples=600, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(kernel_cases())
    def collect(case: KernelCase):
        if len(found) >= wanted:
            return
        right = observe_kernel(case)
        wrong = recorded(_rewritten(case.program, rewrite), right.value)
        if tuple(wrong) != right.sessions:
            found.append((len(found), case, KernelObserved(right.value, tuple(wrong))))

    collect()
    return found


@pytest.mark.lean
@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_kernel_bug_is_caught(bug):
    planted = _planted_cases(PLANTED[bug])
    assert len(planted) >= 4, f"the generator rarely exercises {bug}"
    failures = check_kernel_in_lean(planted, jobs=1)
    assert {f.case_id for f in failures} == {i for i, _, _ in planted}


def test_a_kernel_reproducer_reruns(tmp_path):
    """A divergent case is written as its IR (and its Lean theorem); `serq run` reruns the IR."""
    case = _planted_cases(_while_runs_once, wanted=1)[0]
    path = write_kernel_reproducer(case[1], case[2], tmp_path / "case")
    assert (tmp_path / "case" / "case.lean").read_text().count("theorem agrees_with_interpreter") == 1
    run = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
