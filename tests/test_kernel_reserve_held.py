"""`reserve held` in the Lean kernel fragment (issue 13): on a pool marked `reserve held`, what a hold reserved
and has not allocated counts against later admissions (`used + Σ max(0, rᵢ - allocᵢ) + max(u, r) ≤ cap`) and
the holder grows into its own reservation (`Serq.Kernel.reservedOn`, `reservedAfter`); the Lean machine's run
is the interpreter's."""

from __future__ import annotations

import dataclasses

import pytest

from helpers import answered_at, by_session, lean_refuses_only_the_wrong, link_source, recorded_by_session
from serq.leangen.kernel import kernel_program
from serq.leangen.kernel_drt import encode_case

# Three sessions at 0 on a pool of cap 4 that holds reservations and a delay stage; each holds 1 unit with a
# reserve of 3, observes used(p) at the top of its body, runs 1, releases the pool and runs 1 more.
# - At 0 session 0 is admitted: 0 + 0 + max(1, 3) ≤ 4; it takes 1 unit and leaves 2 reserved and not
#   allocated. Session 1 needs 1 + 2 + 3 = 6 > 4: it waits, and blocks session 2 behind it. Session 0
#   observes used 1 at 0.
# - At 1 session 0 releases p: its unit and its reservation go (used 0, nothing reserved), and session 1 is
#   admitted (0 + 0 + 3 ≤ 4; used 1, 2 reserved), observes 1 at 1; session 2 waits (1 + 2 + 3 > 4).
# - At 2 session 0's turn is answered (its hold's end gives back nothing more); session 1 releases p and
#   session 2 is admitted, observes 1 at 2. At 3 session 1 is answered; session 2 releases at 3, answered at 4.
# Without `reserve held` sessions 0 and 1 are both admitted at 0 (1 + 3 ≤ 4) and observe 2; session 2 is
# admitted at 1 when session 0 releases (1 + 3 ≤ 4) and observes 2: answers at 2, 2, 3.
SETTLE_SOURCE = """fn main() {
  stage d : delay;
  pool p { cap 4; reserve held; }
  workload { arrive batch(3); }
  server {
    hold p (cost(p, 1)) reserve (cost(p, 3)) {
      observe u = used(p);
      run d (cost(d, 1));
      release p;
      run d (cost(d, 1));
    }
  }
}
"""
# (serial, turn, start, answered) and (serial, turn, name, time, value)
SETTLE_ANSWERS = {0: [(0, 1, 0, 2)], 1: [(1, 1, 0, 3)], 2: [(2, 1, 0, 4)]}
SETTLE_OBSERVATIONS = {0: [(0, 1, 0, 0, 1)], 1: [(1, 1, 0, 1, 1)], 2: [(2, 1, 0, 2, 1)]}
UNHELD_ANSWERS = {0: [(0, 1, 0, 2)], 1: [(1, 1, 0, 2)], 2: [(2, 1, 0, 3)]}
UNHELD_OBSERVATIONS = {0: [(0, 1, 0, 0, 2)], 1: [(1, 1, 0, 0, 2)], 2: [(2, 1, 0, 1, 2)]}

# An engine's memory that holds reservations: kv of cap 8 in blocks of 2, `preempt none`; each request takes a
# slot and 2 units of kv with a reserve of 8 - 4·serial (session 0: 8, session 1: 4), prefills 3 and decodes 2,
# growing kv; a budget of 4, each at most 3.
# - 0-1: session 0 is admitted (0 + 0 + 8 ≤ 8; used 2, 6 reserved and not allocated) and prefills 3, its hold
#   grown to 4 into its own reservation: 2 + (6 - 6 + (8 - 4)) + (4 - 2) = 8 ≤ 8 (used 4, 4 reserved; read
#   without growing into it, 2 + 6 + 2 > 8, it would stall for ever). With the 1 token left, session 1 needs
#   4 + 4 + 4 = 12 > 8: it waits.
# - 1-2: session 0's first token at 1; it decodes (position 4, within its 4); session 1 still waits.
# - 2-3: session 0 decodes again, grown to 6 (4 + (4 - 4 + 2) + 2 = 8 ≤ 8; used 6, 2 reserved); session 1
#   waits (6 + 2 + 4 > 8).
# - 3: session 0's turn is answered, its hold gives back its 6 and its reservation; 3-4: session 1 is admitted
#   (0 + 0 + 4 ≤ 8; used 2, 2 reserved) and prefills 3, grown to 4 (2 + 0 + 2 ≤ 8); 4-5 and 5-6 it decodes
#   (grown to 6 at the second): first token at 4, answered at 6.
# Without `reserve held` both are admitted at 0 (4 + max(2, 4) ≤ 8), and at 2 both need a block more than the
# pool has left: under `preempt none` both stall, and neither turn is answered.
ENGINE_SOURCE = """fn main() {
  device gpu { kv cap 8; }
  engine llm on gpu {
    reqs cap 2;
    tokens cap 4;
    request (p, o) {
      prefill (p) growing kv;
      decode (o) growing kv;
    }
    schedule {
      advance running each at most (3);
      admit waiting while (running.preempted == 0) each at most (3) taking reqs (1), kv (2) reserve (8 - 4 * serial);
    }
    execute (1);
  }
  pool kv on gpu { block 2; evict lru; preempt none; reserve held; }
  pool reqs on llm { queue fifo; }
  workload { arrive batch(2); }
  server { llm (3, 2); }
}
"""
ENGINE_ANSWERS = {0: [(0, 1, 0, 3)], 1: [(1, 1, 0, 6)]}
# (serial, turn, first token, its iteration's start, the last token's iteration's start, preemptions, cached)
ENGINE_TOKENS = {0: [(0, 1, 1, 0, 2, 0, 0)], 1: [(1, 1, 4, 3, 5, 0, 0)]}


def test_a_held_reservation_blocks_later_admissions_until_released(tmp_path):
    run = recorded_by_session(SETTLE_SOURCE, tmp_path, "held.sq")
    assert by_session(run, "answers") == SETTLE_ANSWERS
    assert by_session(run, "observations") == SETTLE_OBSERVATIONS
    unheld = recorded_by_session(SETTLE_SOURCE.replace(" reserve held;", ""), tmp_path, "held.sq")
    assert by_session(unheld, "answers") == UNHELD_ANSWERS
    assert by_session(unheld, "observations") == UNHELD_OBSERVATIONS


def test_a_holder_grows_into_its_own_reservation(tmp_path):
    run = recorded_by_session(ENGINE_SOURCE, tmp_path, "held.sq")
    assert by_session(run, "answers") == ENGINE_ANSWERS
    assert by_session(run, "tokens") == ENGINE_TOKENS
    unheld = recorded_by_session(ENGINE_SOURCE.replace(" reserve held;", ""), tmp_path, "held.sq")
    assert all(not r.answers for r in unheld.values())  # both stall growing


def test_the_exporter_emits_which_pools_hold_their_reservations(tmp_path):
    kp = kernel_program(link_source(ENGINE_SOURCE, tmp_path, "held.sq"), tmp_path)
    assert kp.pools == ["kv", "reqs"] and kp.reserve_held == [True, False]
    plain = kernel_program(link_source(ENGINE_SOURCE.replace(" reserve held;", ""), tmp_path, "held.sq"), tmp_path)
    assert plain.reserve_held == [False, False]


def test_the_lean_value_and_the_case_line_carry_reserve_held(tmp_path):
    from serq.leangen.kernel import render_kernel_module
    from serq.leangen.kernel_drt import KernelCase, KernelObserved, observe_kernel

    program = link_source(ENGINE_SOURCE, tmp_path, "held.sq")
    text = render_kernel_module(kernel_program(program, tmp_path), "Held")
    assert "  reserveHeld := [true, false]\n" in text
    unheld = link_source(SETTLE_SOURCE.replace(" reserve held;", ""), tmp_path, "held.sq")
    plain = render_kernel_module(kernel_program(unheld, tmp_path), "Held")
    assert "reserveHeld" not in plain  # the default, `[]`: no pool holds
    observed = observe_kernel(KernelCase(program))
    unheld_value = dataclasses.replace(observed.value, reserve_held=[False, False])
    held = encode_case(0, observed).split()
    unheld = encode_case(0, KernelObserved(unheld_value, observed.sessions, observed.records)).split()
    # the same line but kv's flag, after the trace's sessions (none): the two pools' flags, then `exclusive`
    (at,) = [k for k, (a, b) in enumerate(zip(held, unheld)) if a != b]
    assert len(held) == len(unheld) and (held[at], unheld[at]) == ("1", "0")
    assert held[at - 2:at + 3] == ["0", "2", "1", "0", "0"]


@pytest.mark.lean
def test_reserve_held_agrees_in_lean_on_both_paths(tmp_path):
    """The two hand-computed runs, kernel-checked (`decide +kernel`) and through the compiled driver; a run
    where session 1 of the settle-time program is answered at 2 (its reservation ignored) and one where the
    engine's session 1 is answered at 5 are refused on both."""
    from serq.leangen.kernel_drt import KernelCase, observe_kernel

    settle = KernelCase(link_source(SETTLE_SOURCE, tmp_path, "settle.sq"))
    engine = KernelCase(link_source(ENGINE_SOURCE, tmp_path, "engine.sq"))
    right_settle, right_engine = observe_kernel(settle), observe_kernel(engine)
    lean_refuses_only_the_wrong([(settle, right_settle, answered_at(right_settle, 1, 2)),
                                 (engine, right_engine, answered_at(right_engine, 1, 5))], tmp_path)
