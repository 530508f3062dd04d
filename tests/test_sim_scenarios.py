"""Scenarios with hand-computed event-by-event expectations: each program is small and
deterministic, and the test states the timeline it must follow."""

from __future__ import annotations

import pytest

from simtools import run_error, run_samples, run_text


def kernel(decls: str, server: str, n: int) -> str:
    return f"""fn main() {{
  stage svc : delay;
  {decls}
  workload {{ arrive batch({n}); }}
  server {{ {server} }}
}}
"""


def test_head_of_line_blocking(tmp_path):
    # cap 3. t=0: S0 takes 2 for 10; S1 asks 2 (2+2 > 3) and waits at the head;
    # S2 asks 1, which would fit, but waits behind S1. t=10: S0 leaves; S1 and S2 enter.
    prog = kernel("pool slots { cap 3; queue fifo; }", """
      set want = serial == 2 ? 1 : 2;
      hold slots (cost(slots, want)) {
        observe entered_at = now;
        run svc (cost(svc, 10));
      }""", 3)
    s = run_samples(prog, tmp_path)
    assert s["entered_at"] == [(0, 0.0), (1, 10.0), (2, 10.0)]
    pool = s["_report"]["pools"][0]
    # all three join the queue at 0 (admission is the settle's, after the ready sessions ran)
    assert pool["admissions"] == 3 and pool["max_queue"] == 3


def reserve_program(held: bool, s1_units: int) -> str:
    return kernel("pool kv { cap 10; " + ("reserve held; " if held else "") + "}", f"""
      branch (serial == 0) {{
        hold kv (cost(kv, 2)) reserve (cost(kv, 8)) {{
          observe a0 = now;
          run svc (cost(svc, 1));
          grow kv (cost(kv, 6));
          observe g0 = now;
          run svc (cost(svc, 4));
        }}
      }} else {{
        hold kv (cost(kv, {s1_units})) {{
          observe a1 = now;
          run svc (cost(svc, 2));
        }}
      }}""", 2)


def test_reserve_held(tmp_path):
    # reserve held: S0 holds 2 and keeps 6 more reserved. S1's 3 needs 2 + 6 + 3 = 11 > 10,
    # so it waits until S0 leaves at 5; S0 grows into its own reservation at 1 at once.
    s = run_samples(reserve_program(True, 3), tmp_path)
    assert s["a0"] == [(0, 0.0)] and s["g0"] == [(0, 1.0)] and s["a1"] == [(1, 5.0)]
    # 2 units fit exactly: 2 + 6 + 2 = 10
    s = run_samples(reserve_program(True, 2), tmp_path)
    assert s["a1"] == [(1, 0.0)] and s["g0"] == [(0, 1.0)]


def test_reserve_without_held(tmp_path):
    # The reservation gates S0's admission only: S1's 3 enters at 0 (2 + 3 <= 10), and S0's growth
    # to 8 at t=1 (2 + 3 + 6 = 11) waits until S1 leaves at 2.
    s = run_samples(reserve_program(False, 3), tmp_path)
    assert s["a0"] == [(0, 0.0)] and s["a1"] == [(1, 0.0)] and s["g0"] == [(0, 2.0)]


def test_lru_eviction_of_dead_entries_by_block(tmp_path):
    prog = kernel("pool kv { cap 64; block 16; evict lru; }", """
      branch (serial == 0) {
        hold kv (cost(kv, 48)) { run svc (cost(svc, 1)); } cache (cost(kv, 48));
        run svc (cost(svc, 2));
        hold kv (cost(kv, 32)) reuse (cost(kv, 16)) {
          observe c0 = cached;
          observe own_after = cachedin(kv);
          observe used_at_3 = used(kv);
          run svc (cost(svc, 1));
        } cache (cost(kv, 32));
      } else {
        branch (serial == 1) {
          hold kv (cost(kv, 16)) { run svc (cost(svc, 2)); } cache (cost(kv, 16));
          observe s1_entry = cachedin(kv);
          run svc (cost(svc, 2.5));
          observe s1_entry_later = cachedin(kv);
        } else {
          run svc (cost(svc, 3.5));
          hold kv (cost(kv, 32)) { observe s2_in = now; run svc (cost(svc, 1)); }
        }
      }""", 3)
    # t=1: S0 caches 48 (3 blocks); t=2: S1 caches 16: the pool is 64 of cache.
    # t=3: S0 takes 16 of its 48 (reuse 16): cached = 16, the other 32 stay as a dead entry
    #      with S0's age (the oldest). Allocating 32: 32 + 32 + 16 = 80 > 64, so one block (16)
    #      leaves the tail of the dead entry: 0 entries evicted whole, 16 units.
    # t=3.5: S2 takes 32: 32 + 32 + 32 > 64: the dead entry's last block, then S1's entry:
    #      2 entries evicted, 48 units in all. S1 reads its prefix gone at 4.5.
    s = run_samples(prog, tmp_path)
    assert s["c0"] == [(0, 16.0)]
    assert s["own_after"] == [(0, 0.0)]
    assert s["used_at_3"] == [(0, 32.0)]
    assert s["s1_entry"] == [(1, 16.0)]
    assert s["s1_entry_later"] == [(1, 0.0)]
    assert s["s2_in"] == [(2, 3.5)]
    pool = s["_report"]["pools"][0]
    assert pool["evicted_entries"] == 2 and pool["evicted_units"] == 48.0
    # S0's second hold cached its 32 when it released at 4; S2 cached nothing
    assert pool["cached"] == 32.0 and pool["used"] == 0.0


def evict_program(evict: str, second_hold: str = "kv (cost(kv, 14))", second_cache: str = "kv") -> str:
    return kernel(f"pool slots {{ cap 10; }}\n  pool kv {{ cap 20; {evict} }}", f"""
      set sz = serial == 0 ? 4 : (serial == 1 ? 6 : 2);
      branch (serial < 3) {{
        hold kv (cost(kv, sz)) {{ run svc (cost(svc, 1)); }} cache (cost(kv, sz));
        branch (serial == 0) {{
          run svc (cost(svc, 2));
          hold {second_hold} {{ observe hit = cached; run svc (cost(svc, 1)); }} cache (cost({second_cache}, 14));
        }} else {{
          run svc (cost(svc, 4));
          observe left = cachedin(kv);
        }}
      }} else {{
        run svc (cost(svc, 2));
        hold kv (cost(kv, 8)) {{ run svc (cost(svc, 2)); grow kv (cost(kv, 4)); run svc (cost(svc, 6)); }}
      }}""", 4)


@pytest.mark.parametrize("evict, hit, left, evicted", [
    # t=1: S0 (A), S1 (B), S2 (C) cache 4, 6, 2, released in that order (cap 20, no blocks: an entry
    # goes whole). t=2: S3 (H) holds 8: 8 + 12 = 20. t=3: A asks 14 (8 + 14 > 20): it waits in the
    # queue. t=4: H grows by 4: 12 + 12 = 24 > 20, 4 units to evict.
    # (waiting, size): B (0, 6) and C (0, 2) before A (1, 4), C first: C's 2, then B's 6 (16 now);
    #   A's prefix survives, and at t=10 (H leaves) A's hold consumes it: cached 4.
    ("evict by (waiting, size);", 4.0, {1: 0.0, 2: 0.0}, 8.0),
    # lru: A's (released first) is enough; at t=10 A (no hit) needs room again: B's 6 goes.
    ("evict lru;", 0.0, {1: 6.0, 2: 2.0}, 10.0),
    # size alone: C's 2, then A's 4 (18): A's waiting does not save it.
    ("evict by (size);", 0.0, {1: 6.0, 2: 0.0}, 6.0),
    # the reverse: the waiting session's prefix first, then the largest.
    ("evict by (1 - waiting, -size);", 0.0, {1: 6.0, 2: 2.0}, 10.0),
])
def test_evict_by_waiting_and_size(tmp_path, evict, hit, left, evicted):
    s = run_samples(evict_program(evict), tmp_path)
    assert s["hit"] == [(0, hit)]
    assert dict(s["left"]) == left
    kv = next(p for p in s["_report"]["pools"] if p["name"] == "kv")
    assert kv["evicted_units"] == evicted


def test_evict_by_waiting_counts_a_hold_queued_at_its_first_pool(tmp_path):
    # A's second hold takes a slot and the KV: it waits in the queue of its first pool, slots, for
    # room in kv; its session is waiting for kv all the same, and its prefix survives as above: B's and
    # C's go at t=4 and nothing more at t=10 (A consumes its own 4). (`cached` is the first pool's.)
    s = run_samples(evict_program("evict by (waiting, size);", "slots (cost(slots, 1)), kv (cost(kv, 14))",
                                  "slots, kv"), tmp_path)
    assert dict(s["left"]) == {1: 0.0, 2: 0.0}
    pools = {p["name"]: p for p in s["_report"]["pools"]}
    assert pools["kv"]["evicted_units"] == 8.0
    assert pools["slots"]["max_queue"] == 1


def preempt_program(requeue: str, keys: str = "prio") -> str:
    return kernel(f"pool kv {{ cap 10; preempt by ({keys}) requeue {requeue}; }}", """
      set prio = serial == 0 ? 5 : (serial == 1 ? 1 : (serial == 2 ? 3 : 9));
      set units = serial == 3 ? 2 : 3;
      branch (serial == 0) {
        hold kv (cost(kv, units)) {
          run svc (cost(svc, 1));
          grow kv (cost(kv, 2));
          observe grew = now;
          run svc (cost(svc, 1));
        }
      } else {
        hold kv (cost(kv, units)) {
          observe entered_at = now;
          observe was_at = computed;
          run svc (cost(svc, 5));
        }
      }""", 4)


def test_preempt_by_victim_and_requeue_head(tmp_path):
    # t=0: S0, S1, S2 hold 3 each (9 of 10); S3's 2 waits. t=1: S0 grows by 2 (11 > 10):
    # the victim is the least key, S1 (prio 1), not S2 (3) or S0 (5). S1 re-enters at the
    # head: its 3 does not fit (8 + 3), and S3 waits behind it. t=2: S0 leaves (5 back):
    # S1 enters again, then S3.
    s = run_samples(preempt_program("head"), tmp_path)
    assert s["grew"] == [(0, 1.0)]
    assert s["entered_at"] == [(1, 0.0), (2, 0.0), (1, 2.0), (3, 2.0)]
    assert s["_report"]["pools"][0]["preemptions"] == 1


def test_preempt_by_requeue_tail(tmp_path):
    # requeue tail: S1 re-enters behind S3, whose 2 fits at once (8 + 2 = 10) at t=1;
    # S1 enters at 2 when S0 leaves.
    s = run_samples(preempt_program("tail"), tmp_path)
    assert s["entered_at"] == [(1, 0.0), (2, 0.0), (3, 1.0), (1, 2.0)]


def test_preempt_ties_go_to_the_holder_admitted_last(tmp_path):
    # every key equal: the victim is the holder the pool admitted last, S2
    s = run_samples(preempt_program("head", keys="0"), tmp_path)
    assert s["entered_at"] == [(1, 0.0), (2, 0.0), (2, 2.0), (3, 2.0)]


def test_grower_can_be_its_own_victim(tmp_path):
    # lifo: S0 (admitted last) grows past the cap; it is the victim itself, re-enters at the
    # head with computed = its position, and runs again when S1 leaves.
    prog = kernel("pool kv { cap 10; preempt lifo; }", """
      branch (serial == 0) {
        run svc (cost(svc, 0.5));
        hold kv (cost(kv, 4)) {
          observe entered = now;
          observe at = computed;
          run svc (cost(svc, 1));
          grow kv (cost(kv, 4));
          run svc (cost(svc, 1));
        }
      } else {
        hold kv (cost(kv, 5)) { run svc (cost(svc, 3)); }
      }""", 2)
    s = run_samples(prog, tmp_path)
    # 0.5: S0 enters (5 + 4). 1.5: it grows to 8 (5 + 8 > 10); admitted last, it is the victim
    # itself: its 4 go back, it re-enters at the head and fits again at once (5 + 4). 2.5: the
    # same again, not past its position at the last preemption (0): stuck. 3: S1 leaves;
    # 3.5: the growth fits (8 of 10).
    assert s["entered"] == [(0, 0.5), (0, 1.5), (0, 2.5)]
    assert s["at"] == [(0, 0.0), (0, 0.0), (0, 0.0)]
    pool = s["_report"]["pools"][0]
    assert pool["preemptions"] == 2 and pool["stuck"] == 1
    assert s["_report"]["client"]["response"]["max"] == 4.5


def test_lease_that_expires(tmp_path):
    prog = kernel("pool kv { cap 5; }", """
      branch (serial == 0) {
        hold kv (cost(kv, 5)) { run svc (cost(svc, 1)); } lease kv (3);
        observe leased_from = now;
        run svc (cost(svc, 10));
      } else {
        run svc (cost(svc, 0.5));
        hold kv (cost(kv, 5)) { observe entered_at = now; run svc (cost(svc, 1)); }
      }""", 2)
    # S0's allocation outlives its scope (t=1) for 3 seconds: S1 enters at 4
    s = run_samples(prog, tmp_path)
    assert s["leased_from"] == [(0, 1.0)]
    assert s["entered_at"] == [(1, 4.0)]
    assert s["_report"]["pools"][0]["leases_expired"] == 1


def test_lease_ends_with_its_session(tmp_path):
    prog = kernel("pool kv { cap 5; }", """
      branch (serial == 0) {
        hold kv (cost(kv, 5)) { run svc (cost(svc, 1)); } lease kv (100);
        run svc (cost(svc, 1));
      } else {
        run svc (cost(svc, 0.5));
        hold kv (cost(kv, 5)) { observe entered_at = now; run svc (cost(svc, 1)); }
      }""", 2)
    s = run_samples(prog, tmp_path)
    assert s["entered_at"] == [(1, 2.0)]  # S0's session ends at 2, and its lease with it


def test_fork_join_leg_lease_passes_to_the_session(tmp_path):
    prog = kernel("pool kv { cap 5; }", """
      branch (serial == 0) {
        fork {
          hold kv (cost(kv, 5)) { run svc (cost(svc, 1)); } lease kv (inf);
        }
        join;
        observe joined = now;
        run svc (cost(svc, 2));
        release kv;
        observe released = now;
        run svc (cost(svc, 1));
      } else {
        run svc (cost(svc, 0.5));
        hold kv (cost(kv, 5)) { observe entered_at = now; run svc (cost(svc, 1)); }
      }""", 2)
    # t=1: the leg ends, its lease the session's; the join passes. t=3: the session's release
    # takes it, and S1 (waiting since 0.5) enters.
    s = run_samples(prog, tmp_path)
    assert s["joined"] == [(0, 1.0)]
    assert s["released"] == [(0, 3.0)]
    assert s["entered_at"] == [(1, 3.0)]


def test_hold_and_wait_deadlock_is_an_error(tmp_path):
    prog = kernel("pool kv { cap 5; }", """
      hold kv (cost(kv, 5)) { run svc (cost(svc, 1)); } lease kv (inf);
      fork {
        hold kv (cost(kv, 1)) { run svc (cost(svc, 1)); }
      }
      join;
      release kv;""", 1)
    e = run_error(prog, tmp_path)
    assert e.kind == "run"
    assert "deadlock" in e.message and "session 0" in e.message and "leg 1" in e.message
    assert e.span is not None and e.span.line == 10  # the join


def test_finite_lease_breaks_the_cycle(tmp_path):
    prog = kernel("pool kv { cap 5; }", """
      hold kv (cost(kv, 5)) { run svc (cost(svc, 1)); } lease kv (2);
      fork {
        hold kv (cost(kv, 1)) { observe leg_in = now; run svc (cost(svc, 1)); }
      }
      join;
      release kv;""", 1)
    s = run_samples(prog, tmp_path)
    assert s["leg_in"] == [(0, 3.0)]


def test_two_flows_bottleneck(tmp_path):
    text = (tmp_path / "x").parent / "two.sq"
    src = """fn main() {
  stage l1 : ps(1);
  stage l2 : ps(3);
  share bottleneck;
  workload { arrive batch(2); }
  server {
    branch (serial == 0) { run l1, l2 (cost(l1, l2, 10)); observe a_done = now; }
    else { run l2 (cost(l2, 10)); observe b_done = now; }
  }
}
"""
    s = run_samples(src, tmp_path)
    # bottleneck: A = min(1/1, 3/2) = 1; B = 3/2 = 1.5, ends at 20/3; then A alone, still 1
    assert s["a_done"] == [(0, 10.0)]
    assert s["b_done"][0][1] == pytest.approx(20 / 3)
    assert text is not None


def test_deadlock_on_a_hold_in_scope(tmp_path):
    # the session waits at its join inside a hold the leg needs
    prog = kernel("pool kv { cap 5; }", """
      hold kv (cost(kv, 5)) {
        fork { hold kv (cost(kv, 1)) { run svc (cost(svc, 1)); } }
        join;
      }""", 1)
    e = run_error(prog, tmp_path)
    assert "deadlock" in e.message and e.span.line == 8


def test_a_victim_whose_reservation_no_longer_fits_waits_at_the_head(tmp_path):
    # S1 loads 2 tokens, is preempted by S0's growth; re-entering, it reserves 3 + 10 * computed = 23 > 10:
    # it is not rejected but waits at the head for ever, as vLLM leaves such a request waiting, and the
    # report names it
    prog = kernel("pool kv { cap 10; preempt by (-serial); }", """
      branch (serial == 0) {
        hold kv (cost(kv, 5)) {
          run svc (cost(svc, 1));
          grow kv (cost(kv, 4));
          observe grew = now;
          run svc (cost(svc, 1));
        }
      } else {
        hold kv (cost(kv, 3)) reserve (cost(kv, 3 + 10 * computed)) {
          load kv (cost(kv, 2));
          run svc (cost(svc, 5));
          observe s1_done = now;
        }
      }""", 2)
    s = run_samples(prog, tmp_path)
    assert s["grew"] == [(0, 1.0)] and s["s1_done"] == []
    rep = s["_report"]
    assert rep["sessions"]["rejected"] == 0 and rep["pools"][0]["preemptions"] == 1
    assert rep["sessions"]["live"] == 1 and rep["client"]["response"]["count"] == 1
    assert rep["pools"][0]["queued_at_end"] == 1
    assert rep["pools"][0]["over"] == [{"session": 1, "pool": "kv", "asks": 23.0, "cap": 10.0}]
    assert "over: pool kv's queue head (session 1) asks 23 of a cap of 10" in rep["notes"]
