"""An engine's iteration body in the Lean kernel fragment (issue 13): a `schedule { … }` other than vLLM's, its
`advance running [only (p)]`, `admit waiting [only (p)] [while (e)]` and `branch` statements run once each in
order as each iteration is planned (`Serq.Kernel.planBody`, lean/Serq/KernelBody.lean), a guard reading the
running requests as they stand, the iteration's tokens so far, `running.preempted` and `waiting.admitted`
(`Serq.Kernel.guardVars`); the Lean machine's run is the interpreter's."""

from __future__ import annotations

import pytest

from helpers import (REPO, answered_at, by_session, kernel_run, lean_refuses_only_the_wrong, link_source,
                     recorded_by_session)
from serq.leangen.kernel import kernel_program, render_kernel_module

# examples/scheduling/decode_first.sq, computed by hand in its comments: three requests at 0, each a 3-token
# prefill then a 2-token decode, a budget of 4; each iteration serves the decodes first, the prefills only when
# no decode took a token (the branch), then admits one request at most (`waiting.admitted < 1`).
SOURCE = (REPO / "examples" / "scheduling" / "decode_first.sq").read_text()
# (serial, turn, start, answered); (serial, turn, first token's time, its iteration's start, the last token's
# iteration's start, preemptions, cached at the first admission)
ANSWERS = {0: [(0, 1, 0, 3)], 1: [(1, 1, 0, 4)], 2: [(2, 1, 0, 7)]}
TOKENS = {0: [(0, 1, 1, 0, 2, 0, 0)], 1: [(1, 1, 2, 1, 3, 0, 0)], 2: [(2, 1, 5, 4, 6, 0, 0)]}
# (start, tokens) of each iteration
ITERATIONS = [(0, 3), (1, 4), (2, 4), (3, 1), (4, 1), (5, 1), (6, 1)]
VLLM_SOURCE = SOURCE.replace("""      advance running only (decoding);
      branch (batch.tokens == 0) {
        advance running;
      }
      admit waiting while (waiting.admitted < 1);""", """      advance running;
      admit waiting while (running.preempted == 0);""")


def test_the_body_plans_each_iteration_as_computed_by_hand(tmp_path):
    run, records = kernel_run(SOURCE, tmp_path, "body.sq")
    assert by_session(run, "answers") == ANSWERS
    assert by_session(run, "tokens") == TOKENS
    assert [(r[0], r[1]) for r in records[0]] == ITERATIONS
    vllm = recorded_by_session(VLLM_SOURCE, tmp_path, "vllm.sq")
    assert by_session(vllm, "answers")[2] != ANSWERS[2]


def test_the_lean_value_has_the_body_beside_the_engines(tmp_path):
    text = render_kernel_module(kernel_program(link_source(SOURCE, tmp_path, "body.sq"), tmp_path), "Body")
    assert "public import Serq.KernelBody" in text
    assert "def bodies : List Serq.Kernel.Body := [⟨[" in text
    assert ".serve (some (.stageVar 5))" in text
    assert ".branch (.bin .eq (.stageVar 0) (.num 0))" in text
    assert ".admit none (some (.bin .lt (.stageVar 16) (.num 1)))" in text


@pytest.mark.lean
def test_the_body_agrees_in_lean_on_both_paths(tmp_path):
    """The hand-computed run, kernel-checked (`decide +kernel`, `agreesB`) and through the compiled driver; the
    same record with s2 answered at 5 (vLLM's schedule's) is refused on both."""
    from serq.leangen.kernel_drt import KernelCase, observe_kernel

    case = KernelCase(link_source(SOURCE, tmp_path, "body.sq"))
    right = observe_kernel(case)
    lean_refuses_only_the_wrong([(case, right, answered_at(right, 2, 5))], tmp_path)
