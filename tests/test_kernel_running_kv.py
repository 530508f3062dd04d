"""`running.kv_decode` and `running.kv_prefill` in an engine's clauses, in the Lean kernel fragment (issue 13): the
KV its running requests hold as they stand (the decoders' positions in whole blocks of the pool each grows, the
prefills' positions), read by `tokens cap` and `each at most` as the iteration starts and by a serve key or an
`only` predicate at each request (`Serq.Kernel.runningOf`, `StageVar.kvDecode`/`kvPrefill` outside `execute`);
the Lean machine's run is the interpreter's."""

from __future__ import annotations

import pytest

from helpers import answered_at, by_session, lean_refuses_only_the_wrong, link_source, recorded_by_session
from serq.errors import SerqError
from serq.leangen.kernel import kernel_program, render_kernel_module

# Two requests at 0, each a 5-token prefill then a 2-token decode, growing `kv` (blocks of 2); the budget is 1
# while a decoder holds KV, else 8; each run takes at most 1 token while a prefill holds KV, else 2.
# - 0: nothing runs (both KV sums 0): budget 8, chunk 2; both admitted, 2 tokens each (positions 2, 2).
# - 1: the prefills hold 2 + 2 > 0: chunk 1; 1 token each (positions 3, 3); at 2 the same (4, 4); at 3 the
#   same (5, 5): the prefills end at 4, their first tokens the iteration started at 3.
# - 4: two decoders at position 5, in blocks of 2 ⌈5/2⌉·2 = 6 each, 12 > 0: budget 1: request 0 (admission
#   order) decodes (position 6); at 5 again, its last token: answered at 6.
# - 6: request 1 alone, 6 > 0: budget 1 (position 6); at 7 its last token: answered at 8.
# Reading either KV as 0 (the budget 8 and the chunk 2 always) ends both prefills at 3 (2 + 2 + 1) and both
# decodes at 5.
SOURCE = """fn main() {
  device gpu { kv cap 16; }
  engine llm on gpu {
    reqs cap 2;
    tokens cap (running.kv_decode > 0 ? 1 : 8);
    schedule {
      advance running each at most (running.kv_prefill > 0 ? 1 : 2);
      admit waiting while (running.preempted == 0) each at most (running.kv_prefill > 0 ? 1 : 2);
    }
    execute (1);
  }
  pool reqs on llm { queue fifo; }
  pool kv on gpu { block 2; }
  workload { arrive batch(2); }
  server {
    hold reqs (cost(reqs, 1)), kv (cost(kv, 2)) {
      run llm prefill (cost(llm, 5)) growing kv;
      run llm decode (cost(llm, 2)) growing kv;
    }
  }
}
"""
# (serial, turn, start, answered); (serial, turn, first token's time, its iteration's start, the last token's
# iteration's start, preemptions, cached at the first admission)
ANSWERS = {0: [(0, 1, 0, 6)], 1: [(1, 1, 0, 8)]}
TOKENS = {0: [(0, 1, 4, 3, 5, 0, 0)], 1: [(1, 1, 4, 3, 7, 0, 0)]}

# The blocks are what `running.kv_decode` counts: under a threshold of 10, at 4 the two decoders hold 6 + 6 = 12
# > 10 in blocks of 2 (budget 1, as above: answered at 6 and 8); without blocks 5 + 5 = 10 (budget 8): both
# decode at 4; at 5 they hold 6 + 6 = 12 > 10: request 0 alone, answered at 6; at 6 request 1 holds 6: its last
# token, answered at 7.
THRESHOLD_SOURCE = SOURCE.replace("running.kv_decode > 0 ? 1 : 8", "running.kv_decode > 10 ? 1 : 8")
THRESHOLD_ANSWERS = {0: [(0, 1, 0, 6)], 1: [(1, 1, 0, 8)]}
PLAIN_THRESHOLD_ANSWERS = {0: [(0, 1, 0, 6)], 1: [(1, 1, 0, 7)]}

# A serve key that reads `running.kv_decode`, on an engine whose memory preempts: the interpreter reads it
# again before every choice (a victim leaves), the kernel once as the iteration starts.
PREEMPTING_SOURCE = """fn main() {
  device gpu { kv cap 16; }
  engine llm on gpu {
    reqs cap 2;
    tokens cap 4;
    schedule {
      advance running by (running.kv_decode % 2 == 0 ? remaining : 0);
      admit waiting while (running.preempted == 0);
    }
    execute (1);
  }
  pool reqs on llm { queue fifo; }
  pool kv on gpu { block 2; evict lru; preempt lifo; }
  workload { arrive batch(2); }
  server {
    hold reqs (cost(reqs, 1)), kv (cost(kv, 2)) {
      run llm prefill (cost(llm, 5)) growing kv;
    }
  }
}
"""


def test_the_running_kv_sets_the_budget_and_the_chunk(tmp_path):
    run = recorded_by_session(SOURCE, tmp_path, "running_kv.sq")
    assert by_session(run, "answers") == ANSWERS
    assert by_session(run, "tokens") == TOKENS


def test_running_kv_decode_counts_whole_blocks(tmp_path):
    assert by_session(recorded_by_session(THRESHOLD_SOURCE, tmp_path, "blocks.sq"), "answers") == THRESHOLD_ANSWERS
    plain = THRESHOLD_SOURCE.replace(" block 2;", "")
    assert by_session(recorded_by_session(plain, tmp_path, "plain.sq"), "answers") == PLAIN_THRESHOLD_ANSWERS


def test_the_lean_value_reads_the_running_kv(tmp_path):
    text = render_kernel_module(kernel_program(link_source(SOURCE, tmp_path, "running_kv.sq"), tmp_path), "RunningKv")
    assert "(.cond (.bin .gt (.stageVar 12) (.num 0)) (.num 1) (.num 8))" in text
    assert "(.cond (.bin .gt (.stageVar 13) (.num 0)) (.num 1) (.num 2))" in text


def test_a_serve_key_reading_the_running_kv_of_a_memory_that_preempts_is_refused(tmp_path):
    program = link_source(PREEMPTING_SOURCE, tmp_path, "preempting.sq")
    with pytest.raises(SerqError) as e:
        kernel_program(program, tmp_path)
    assert "a serve key that reads `running.*` on engine `llm`, whose memory preempts" in str(e.value)
    assert "preempting.sq:3:3:" in str(e.value)


@pytest.mark.lean
def test_running_kv_agrees_in_lean_on_both_paths(tmp_path):
    """The hand-computed runs, kernel-checked (`decide +kernel`) and through the compiled driver; the first with
    request 1 answered at 6 (the budget read as 8) and the threshold's with request 1 answered at 6 (the KV
    counted in positions) are refused on both."""
    from serq.leangen.kernel_drt import KernelCase, observe_kernel

    first = KernelCase(link_source(SOURCE, tmp_path, "first.sq"))
    threshold = KernelCase(link_source(THRESHOLD_SOURCE, tmp_path, "threshold.sq"))
    right_first, right_threshold = observe_kernel(first), observe_kernel(threshold)
    lean_refuses_only_the_wrong([(first, right_first, answered_at(right_first, 1, 6)),
                                 (threshold, right_threshold, answered_at(right_threshold, 1, 6))], tmp_path)
