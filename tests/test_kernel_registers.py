"""An engine's registers in the Lean kernel fragment (issue 13): `state NAME = c;` and the schedule's `set NAME =
e;`, read in the engine's own clauses and schedule (`Serq.Kernel.Plan.regs`, `Expr.withRegs`,
lean/Serq/KernelBody.lean); a set takes effect at once, and a try that schedules, preempts and admits
nothing is undone, its sets with it. The Lean machine's run is the interpreter's."""

from __future__ import annotations

import pytest

from helpers import (REPO, answered_at, by_session, kernel_run, lean_refuses_only_the_wrong, link_source,
                     recorded_by_session)
from serq.errors import SerqError
from serq.leangen.kernel import kernel_program, recorded_run, render_kernel_module

# examples/scheduling/decode_rounds.sq, computed by hand in its comments: three requests at 0, each a 3-token
# prefill then a 2-token decode, a budget of 4; the decodes first, then (unless k = 2 and a decode took a
# token) the prefills and the admissions; k counts the iterations round 0, 1, 2.
SOURCE = (REPO / "examples" / "scheduling" / "decode_rounds.sq").read_text()
# (serial, turn, start, answered); (serial, turn, first token's time, its iteration's start, the last token's
# iteration's start, preemptions, cached at the first admission)
ANSWERS = {0: [(0, 1, 0, 3)], 1: [(1, 1, 0, 4)], 2: [(2, 1, 0, 6)]}
TOKENS = {0: [(0, 1, 1, 0, 2, 0, 0)], 1: [(1, 1, 2, 1, 3, 0, 0)], 2: [(2, 1, 4, 3, 5, 0, 0)]}
# (start, tokens) of each iteration
ITERATIONS = [(0, 4), (1, 4), (2, 2), (3, 3), (4, 1), (5, 1)]
BODY = """      advance running only (decoding);
      branch (k < 2 || batch.tokens == 0) {
        advance running;
        admit waiting;
      }
      set k = (k + 1) % 3;"""
VLLM_SOURCE = SOURCE.replace(BODY, """      advance running;
      admit waiting while (running.preempted == 0);""")

# A try that schedules, preempts and admits nothing is undone, its set with it. Odd rounds decode only; s1
# reaches the queue at 5 (a delay first), s0 at 0 (a 6-token prefill, then 2 decode tokens):
# - 0 (k = 0): s0 admitted, 4 of its 6 (0-1); k = 1.
# - 1 (k = 1): decodes only, and s0 is prefilling: nothing, so k stays 1 (undone); the engine waits.
# - 5: s1 queued, the engine tries again at k = 1: nothing again. The run ends idle, nothing answered.
# Were the set kept, the try at 5 would find k = 0, serve s0's last 2 and admit s1 (s0 answered at 8).
UNDO_SOURCE = SOURCE.replace(BODY, """      branch (k == 1) {
        advance running only (decoding);
      } else {
        advance running;
        admit waiting;
      }
      set k = (k + 1) % 2;""").replace("  pool reqs on llm", "  stage pause : delay;\n  pool reqs on llm").replace(
    "  server {\n", "  server {\n    branch (serial == 1) {\n      run pause (cost(pause, 5));\n    }\n").replace(
    "arrive batch(3);", "arrive batch(2);").replace("cost(llm, 3)", "cost(llm, 6)")


def test_the_registers_plan_each_iteration_as_computed_by_hand(tmp_path):
    run, records = kernel_run(SOURCE, tmp_path, "rounds.sq")
    assert by_session(run, "answers") == ANSWERS
    assert by_session(run, "tokens") == TOKENS
    assert [(r[0], r[1]) for r in records[0]] == ITERATIONS
    vllm = recorded_by_session(VLLM_SOURCE, tmp_path, "vllm.sq")
    assert by_session(vllm, "answers")[2] == [(2, 1, 0, 5)]


def _sets_kept(monkeypatch) -> None:
    """The interpreter with a planted bug: a try that does nothing keeps its sets."""
    import serq.sim.build as build
    monkeypatch.setattr(build, "registers_set", lambda iteration: set())


def test_a_try_that_does_nothing_is_undone_with_its_sets(tmp_path, monkeypatch):
    program = link_source(UNDO_SOURCE, tmp_path, "undo.sq")
    kp = kernel_program(program, tmp_path)
    sessions, records = recorded_run(program, kp)
    assert [list(s.answers) for s in sessions] == [[], []]
    assert [(r[0], r[1]) for r in records[0]] == [(0, 4)]
    _sets_kept(monkeypatch)
    sessions, records = recorded_run(program, kp)
    assert [s.answers[0][3] for s in sessions if s.answers] == [8]
    assert [(r[0], r[1]) for r in records[0]] == [(0, 4), (5, 4), (6, 1), (7, 4)]


# decode_rounds.sq's body as `KernelCodec.readBodies` reads it: one engine, 3 statements; a serve (0) with a
# predicate (1), `decoding` (`StageVar` 15, place 5); a branch (2) on `or` (4 11) of `lt` (4 6) of register 0
# (place 17) and 2 (`num`, 0 2) and `eq` (4 4) of `batch.tokens` (place 0) and 0, its arms of 2 statements (a
# serve and an admit, with no predicate or gate) and none; a set (3) of register 0 to `mod` (4 3) of `add` (4 0)
# of register 0 and 1, and 3; then its registers: 1, declared 0.
BODY_TOKENS = [1, 3, 0, 1, 15, 5, 2, 4, 11, 4, 6, 15, 17, 0, 2, 4, 4, 15, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0,
               3, 0, 4, 3, 4, 0, 15, 17, 0, 1, 0, 3, 1, 0]


def test_a_case_line_carries_the_sets_and_the_declared_values(tmp_path):
    from serq.leangen.kernel_drt import KernelCase, encode_case, observe_kernel
    observed = observe_kernel(KernelCase(link_source(SOURCE, tmp_path, "rounds.sq")))
    line = encode_case(0, observed, fuel=99).split()
    # after the engines under `exclusive prefill` (none) and before the sessions (3)
    assert " ".join(["0", *map(str, BODY_TOKENS), "3"]) in " ".join(line)


def test_the_lean_value_has_the_registers_beside_the_body(tmp_path):
    text = render_kernel_module(kernel_program(link_source(SOURCE, tmp_path, "rounds.sq"), tmp_path), "Rounds")
    assert "public import Serq.KernelBody" in text
    assert "def bodies : List Serq.Kernel.Body := [⟨[" in text
    # k is register 0, read at the stage view's place 17; its declared value 0 beside the statements
    assert ".branch (.bin .or (.bin .lt (.stageVar 17) (.num 2)) (.bin .eq (.stageVar 0) (.num 0)))" in text
    assert ".set 0 (.bin .mod (.bin .add (.stageVar 17) (.num 1)) (.num 3))], [0]⟩]" in text


def test_a_register_no_body_sets_is_its_declared_constant(tmp_path):
    """Under vLLM's schedule no statement sets a register: it is a constant, read as one anywhere it may be
    read (here the engine's `tokens cap` and a pool's queue key)."""
    source = VLLM_SOURCE.replace("    tokens cap 4;\n", "    state cap = 2;\n    tokens cap 2 + cap;\n").replace(
        "pool reqs on llm { queue fifo; }", "pool reqs on llm { queue by (llm.cap - serial); }")
    kp = kernel_program(link_source(source, tmp_path, "constant.sq"), tmp_path)
    assert kp.bodies == [] and kp.registers == []
    text = render_kernel_module(kp, "Constant")
    assert "(.bin .add (.num 2) (.num 2))" in text
    assert "(.bin .sub (.num 2) (.attr" in text


def _outside(source: str, tmp_path, name: str) -> str:
    """What `serq lean export` says of a program outside the fragment."""
    with pytest.raises(SerqError) as e:
        kernel_program(link_source(source, tmp_path, name), tmp_path)
    return str(e.value)


def test_a_register_its_schedule_sets_is_refused_in_a_queue_key(tmp_path):
    message = _outside(SOURCE.replace("pool reqs on llm { queue fifo; }", "pool reqs on llm { queue by (llm.k); }"),
                       tmp_path, "key.sq")
    assert "register `k` of engine `llm`, which its schedule sets, read outside the engine's own clauses" in message
    assert "key.sq:34:3:" in message  # (the pool)


def test_a_negative_register_is_outside(tmp_path):
    message = _outside(SOURCE.replace("state k = 0;", "state k = -1;"), tmp_path, "negative.sq")
    assert "register `k` of engine `llm` declared -1" in message
    assert "negative.sq:20:3:" in message  # (the engine)


@pytest.mark.lean
def test_the_registers_agree_in_lean_on_both_paths(tmp_path, monkeypatch):
    """The hand-computed run, kernel-checked (`decide +kernel`, `agreesB`) and through the compiled driver; the
    record with s2 answered at 5 (vLLM's schedule's) is refused on both; and the undone try's run, with the
    record of the interpreter that keeps a try's sets refused on both."""
    from serq.leangen.kernel_drt import KernelCase, observe_kernel

    case = KernelCase(link_source(SOURCE, tmp_path, "rounds.sq"))
    right = observe_kernel(case)
    undo = KernelCase(link_source(UNDO_SOURCE, tmp_path, "undo.sq"))
    undo_right = observe_kernel(undo)
    _sets_kept(monkeypatch)
    undo_wrong = observe_kernel(undo)
    monkeypatch.undo()
    assert undo_wrong != undo_right
    lean_refuses_only_the_wrong([(case, right, answered_at(right, 2, 5)), (undo, undo_right, undo_wrong)], tmp_path)
