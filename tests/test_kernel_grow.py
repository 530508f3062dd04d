"""`grow P (d);` in the Lean kernel fragment (issue 13): on a pool that does not preempt, the innermost hold on P
asks d more units (its request, rounded up to whole blocks); a growth that does not fit, or that finds another
`grow` waiting on P, waits, and a settle retries the waiting ones (the first that stalled first, before the
pool's queue) once a release makes room (`Serq.Kernel.Machine.growers`, `retryGrowers`); the Lean machine's run
is the interpreter's. A `grow` on a pool that preempts is refused where it stands."""

from __future__ import annotations

import pytest

from helpers import answered_at, by_session, lean_refuses_only_the_wrong, link_source, recorded_by_session
from serq.errors import SerqError
from serq.leangen.kernel import kernel_program, render_kernel_module

# Two sessions at 0 on a pool of cap 4 in blocks of 2 and a delay stage. Each holds 1 unit (2 in whole blocks,
# asked 1), observes used(p) (u), runs 1 + 2·serial, grows p by 2 - 2·serial, observes used(p) (g), grows by
# 1 - serial, runs 1 - serial; its hold caches up to 10 of its prefix, and it observes cachedin(p) (c) after.
# - At 0 both are admitted at the settle (2 + 2 ≤ 4) before either runs: both observe u = 4 at 0.
# - At 1 session 0 grows by 2: it asks 3, 4 in whole blocks, 2 more than it has; 4 + 2 > 4: it waits.
# - At 3 session 1's run ends; its grow of 0 asks 1, within its 2 (no wait, though a grow waits on p); it
#   observes g = 4 (session 0 has not grown), its second grow of 0 is nothing, its run of 0 ends at once, and
#   its hold ends: its 2 units go back, caching min(10, 2) = 2 (used 2, cached 2), it observes c = 2 at 3 and
#   its turn is answered at 3. The settle retries the grower: 2 + 2 ≤ 4 (the cache never blocks); it grows to
#   4, evicting session 1's entry (used 4 + cached 2 > 4), and resumes: it observes g = 4 at 3; its grow of 1
#   asks 4, within its 4 blocks' worth (without the rounding it would ask 4 of 3 and wait for ever); its run
#   of 1 ends at 4, its hold gives back 4, caching min(10, 4) = 4 (the allocation grew: `computed` is it), and
#   it observes c = 4 at 4; answered at 4.
SOURCE = """fn main() {
  stage d : delay;
  pool p { cap 4; block 2; }
  workload { arrive batch(2); }
  server {
    hold p (cost(p, 1)) {
      observe u = used(p);
      run d (cost(d, 1 + 2 * serial));
      grow p (cost(p, 2 - 2 * serial));
      observe g = used(p);
      grow p (cost(p, 1 - serial));
      run d (cost(d, 1 - serial));
    } cache (cost(p, 10));
    observe c = cachedin(p);
  }
}
"""
# (serial, turn, start, answered) and (serial, turn, name, time, value): names u 0, g 1, c 2
ANSWERS = {0: [(0, 1, 0, 4)], 1: [(1, 1, 0, 3)]}
OBSERVATIONS = {0: [(0, 1, 0, 0, 4), (0, 1, 1, 3, 4), (0, 1, 2, 4, 4)],
                1: [(1, 1, 0, 0, 4), (1, 1, 1, 3, 4), (1, 1, 2, 3, 2)]}

# The same without blocks: both observe u = 2 at 0; session 0's first grow asks 3 of its 1 at 1, and 2 + 2 ≤ 4: it
# grows, and observes g = 4 at 1; its second grow asks 4, 1 more: 4 + 1 > 4, it waits until
# session 1's hold ends at 3 (used 3 + 1 ≤ 4), resumes, runs 1: answered at 4. Session 1 observes u = 2 and
# g = 4 at 3, caches its 1 (c = 1 at 3); session 0 caches its 4, the allocation it grew to (c = 4 at 4).
PLAIN_ANSWERS = {0: [(0, 1, 0, 4)], 1: [(1, 1, 0, 3)]}
PLAIN_OBSERVATIONS = {0: [(0, 1, 0, 0, 2), (0, 1, 1, 1, 4), (0, 1, 2, 4, 4)],
                      1: [(1, 1, 0, 0, 2), (1, 1, 1, 3, 4), (1, 1, 2, 3, 1)]}

# A grow waiting on p blocks no admission: sessions 0 and 1 hold 1 of a cap of 2 each and session 0 grows by 1
# at 1 (it waits: 2 + 1 > 2); session 2, which joined p's queue at 0 behind session 1, holds 1 too and waits in
# the queue. At 2 session 1 releases: the settle retries the grower first (1 + 1 ≤ 2: it grows, used 2) and
# then the queue, whose head no longer fits: session 2 is admitted when session 0's hold ends at 3.
ORDER_SOURCE = """fn main() {
  stage d : delay;
  pool p { cap 2; }
  workload { arrive batch(3); }
  server {
    hold p (cost(p, 1)) {
      run d (cost(d, 1 + serial));
      grow p (cost(p, serial == 0 ? 1 : 0));
      observe g = used(p);
      run d (cost(d, serial == 0 ? 1 : 0));
    }
  }
}
"""
ORDER_ANSWERS = {0: [(0, 1, 0, 3)], 1: [(1, 1, 0, 2)], 2: [(2, 1, 0, 6)]}
ORDER_OBSERVATIONS = {0: [(0, 1, 0, 2, 2)], 1: [(1, 1, 0, 2, 2)], 2: [(2, 1, 0, 6, 1)]}

PREEMPTING_SOURCE = """fn main() {
  device gpu { kv cap 8; }
  engine llm on gpu {
    reqs cap 2;
    tokens cap 4;
    schedule { advance running; admit waiting while (running.preempted == 0); }
    execute (1);
  }
  pool reqs on llm { queue fifo; }
  pool kv on gpu { block 2; evict lru; preempt lifo; }
  workload { arrive batch(2); }
  server {
    hold reqs (cost(reqs, 1)), kv (cost(kv, 2)) {
      run llm prefill (cost(llm, 3)) growing kv;
      grow kv (cost(kv, 1));
      run llm decode (cost(llm, 2)) growing kv;
    }
  }
}
"""


def test_a_grow_waits_for_a_release_in_whole_blocks(tmp_path):
    run = recorded_by_session(SOURCE, tmp_path, "grow.sq")
    assert by_session(run, "answers") == ANSWERS
    assert by_session(run, "observations") == OBSERVATIONS
    plain = recorded_by_session(SOURCE.replace(" block 2;", ""), tmp_path, "grow.sq")
    assert by_session(plain, "answers") == PLAIN_ANSWERS
    assert by_session(plain, "observations") == PLAIN_OBSERVATIONS


def test_a_waiting_grow_is_retried_before_the_queue(tmp_path):
    run = recorded_by_session(ORDER_SOURCE, tmp_path, "grow.sq")
    assert by_session(run, "answers") == ORDER_ANSWERS
    assert by_session(run, "observations") == ORDER_OBSERVATIONS


def test_the_lean_value_carries_the_grow(tmp_path):
    text = render_kernel_module(kernel_program(link_source(SOURCE, tmp_path, "grow.sq"), tmp_path), "Grow")
    assert "      .grow 0 (.bin .sub (.num 2) (.bin .mul (.num 2) (.attr 2))),\n" in text


def test_a_grow_on_a_pool_that_preempts_is_refused_where_it_stands(tmp_path):
    program = link_source(PREEMPTING_SOURCE, tmp_path, "preempting.sq")
    with pytest.raises(SerqError) as e:
        kernel_program(program, tmp_path)
    message = str(e.value)
    line = PREEMPTING_SOURCE.splitlines().index("      grow kv (cost(kv, 1));") + 1
    assert f"preempting.sq:{line}:7:" in message
    assert "`grow kv` on pool `kv`, which preempts: its victims would be the holders in a scope" in message
    assert "not an engine's residents" in message


@pytest.mark.lean
def test_grow_agrees_in_lean_on_both_paths(tmp_path):
    """The hand-computed runs, kernel-checked (`decide +kernel`) and through the compiled driver; a run where
    session 0 of the first is answered at 2 (its grow never waits) and one where session 2 of the second is
    answered at 5 (admitted past the grower) are refused on both."""
    from serq.leangen.kernel_drt import KernelCase, observe_kernel

    blocks = KernelCase(link_source(SOURCE, tmp_path, "blocks.sq"))
    order = KernelCase(link_source(ORDER_SOURCE, tmp_path, "order.sq"))
    right_blocks, right_order = observe_kernel(blocks), observe_kernel(order)
    lean_refuses_only_the_wrong([(blocks, right_blocks, answered_at(right_blocks, 0, 2)),
                                 (order, right_order, answered_at(right_order, 2, 5))], tmp_path)
