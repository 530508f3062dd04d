"""Differential testing: the Python interpreter against the Lean model, on generated programs
of the fragment and their workloads (Cedar-style: the Lean model is the specification).

`test_interpreter_runs_generated_cases` runs DRT_CASES generated cases (200 by default, at ~0.7 s a
case in Lean; `SERQ_DRT_CASES=5000` for more) through the interpreter; `test_lean_agrees` checks every
one in Lean, in batches, and on a divergence shrinks it and writes a rerunnable program.
`test_planted_bug_is_caught` shows the suite catches a requeue at the tail, and a
phase-separated engine that serves the heads it admits in a decode phase, on cases Hypothesis
draws derandomized (the same cases every run: the planted bugs' counts never depend on luck).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from helpers import REPO, report_drt
from serq.leangen.drt import Case, check_in_lean, observe, shrink, shrink_candidates, write_reproducer
from serq.leangen.fragment import engine_program
from strategies import cases

DRT_CASES = int(os.environ.get("SERQ_DRT_CASES", "200"))
COLLECTED: list[tuple[int, Case, object]] = []
FAILURES = REPO / "drt-failures"


@settings(max_examples=DRT_CASES, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_interpreter_runs_generated_cases(case: Case):
    observed = observe(case)
    # every answered turn has its first token no later than its last
    for _, _, first, last, _, _ in observed.outcomes:
        assert first <= last
    COLLECTED.append((len(COLLECTED), case, observed))


@pytest.mark.lean
def test_lean_agrees():
    if len(COLLECTED) < DRT_CASES:
        test_interpreter_runs_generated_cases()
    assert len(COLLECTED) >= DRT_CASES
    t0 = time.monotonic()
    failures = check_in_lean(COLLECTED)
    if failures:
        first = min(failures, key=lambda f: f.case.size())
        small = shrink(first.case, _interpreter_for_shrink)
        folder = write_reproducer(small, FAILURES / f"case{first.case_id}")
        program = folder / engine_program(small.engine).name
        pytest.fail(f"{len(failures)} of {len(COLLECTED)} cases diverge; the smallest found is in {folder} "
                    f"(serq run {program} --instance {folder}/instance.json); Lean said: "
                    f"{first.message[:500]}")
    report_drt(f"engine model, decide +kernel: {len(COLLECTED)} generated cases, 0 divergences, "
               f"{time.monotonic() - t0:.0f} s")


def _interpreter_for_shrink(program, base):
    from serq.leangen.drt import interpreter
    return interpreter(program, base)


def _requeue_at_tail(program, base):
    """A planted bug: the interpreter requeues a preempted request at the tail of its queue
    (vLLM prepends it: `requeue head`)."""
    from serq.ir import models as ir
    from serq.leangen.drt import interpreter
    buggy = program.model_copy(deep=True)
    for pool in buggy.pools:
        if isinstance(pool.preempt, ir.PreemptBy):
            pool.preempt.requeue = "tail"
    return interpreter(buggy, base)


def _admitted_heads_served_in_a_decode_phase(program, base):
    """A planted bug: a phase-separated engine whose `admit waiting` has no `only`, so the heads it
    admits while residents decode get their prefill tokens (the reference: they wait as residents)."""
    from serq.ir import models as ir
    from serq.leangen.drt import interpreter
    buggy = program.model_copy(deep=True)
    for stage in buggy.stages:
        if isinstance(stage.service, ir.Step) and stage.service.iteration:
            for statement in stage.service.iteration:
                if statement.kind == "admit":
                    statement.only = None
    return interpreter(buggy, base)


#: the planted bugs, and how many cases of each (one Lean batch checks them all)
PLANTED_BUGS = {_requeue_at_tail: 4, _admitted_heads_served_in_a_decode_phase: 4}
PLANTED: list[tuple[int, Case, object]] = []
PLANTED_BY: dict[object, list[int]] = {bug: [] for bug in PLANTED_BUGS}


@settings(max_examples=600, deadline=None, database=None, phases=[Phase.generate], derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(cases())
def _collect_planted(case: Case):
    right = None
    for bug, wanted in PLANTED_BUGS.items():
        if len(PLANTED_BY[bug]) >= wanted:
            continue
        right = right or observe(case)
        wrong = observe(case, bug)
        if right != wrong:
            PLANTED_BY[bug].append(len(PLANTED))
            PLANTED.append((len(PLANTED), case, wrong))
            return


@pytest.mark.lean
def test_planted_bug_is_caught():
    _collect_planted()
    for bug, ids in PLANTED_BY.items():
        assert len(ids) >= 2, f"the generator rarely exercises {bug.__name__}"
    t0 = time.monotonic()
    failures = check_in_lean(PLANTED)
    assert {f.case_id for f in failures} == {i for i, _, _ in PLANTED}
    report_drt(f"engine model, planted bugs: {len(PLANTED_BY)} bugs, all {len(PLANTED)} of their cases refuted, "
               f"{time.monotonic() - t0:.0f} s ({', '.join(sorted(b.__name__ for b in PLANTED_BY))})")


@pytest.mark.lean
def test_a_divergence_is_shrunk_to_a_rerunnable_program(tmp_path):
    """The planted bug's smallest case, shrunk for a round, still diverges, is no larger, and is
    written as a program, trace and instance file that `serq run` reruns."""
    import subprocess
    import sys
    if not PLANTED_BY[_requeue_at_tail]:
        _collect_planted()
    _, case, _ = min((PLANTED[i] for i in PLANTED_BY[_requeue_at_tail]), key=lambda item: item[1].size())
    small = shrink(case, _requeue_at_tail, rounds=1)
    assert small.size() <= case.size()
    # (no second Lean start-up to see it diverge: `shrink` keeps a candidate only when Lean refuted it
    # in its batch, and otherwise returns the case test_planted_bug_is_caught refuted)
    assert small in {case} | set(shrink_candidates(case))
    folder = write_reproducer(small, tmp_path / "case")
    program = engine_program(small.engine).name
    assert {p.name for p in folder.iterdir()} == {program, "vllm_request.csv", "instance.json"}
    run = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(folder / program),
                          "--instance", str(folder / "instance.json")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
