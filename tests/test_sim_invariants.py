"""Busy programs over many seeds: the pools' bookkeeping stays consistent, and nothing crashes."""

from __future__ import annotations

import math

import pytest

from simtools import EXAMPLES
from serq.link import link_file, link_text
from serq.sim import simulate

BUSY = """fn main() {
  let bs = 8;
  pool slots { cap 6; queue by (-waited); }
  pool kv { cap 512; block bs; evict lru; preempt lifo; spill host via link (cost(link, 0.01)) when (~bernoulli(0.5)); }
  pool host { cap 128; evict by (serial); }
  stage gpu : ps(2);
  stage link : fifo;
  stage pause : delay;
  workload {
    arrive poisson(1.5);
    init { set K = 0; }
    turn { Size n = ~uniform(8, 64); Size o = ~uniform(1, 40); set more = ~bernoulli(0.5); }
    session {
      turn;
      while (more) { set K = K + n + o; run pause (cost(pause, ~exp(1))); turn; }
    }
  }
  server {
    set prompt = floor(K + n);
    set kept = prompt;
    hold slots (cost(slots, 1)), kv (cost(kv, known)) reserve (cost(kv, known)) reuse (cost(slots, kv, reused))
         at admission (known = max(kept, computed + 1), reused = min(cachedin(kv), reusable(known, bs))) {
      set kept = known;
      run gpu (cost(gpu, (known - cached) / 500));
      grow kv (cost(kv, floor(o)));
      run gpu (cost(gpu, o / 100));
      observe hit = cached;
    } cache (cost(slots, kv, prompt + floor(o)));
    fork { hold host (cost(host, 4)) { run link (cost(link, 0.05)); } lease host (0.5); }
    join;
  }
  gauge occupancy = used(kv) + used(host);
}
"""


def check_pools(E) -> None:
    for m in E.all_pools:
        units = sum(a.units for a in m.holders.values())
        assert math.isclose(m.used, units, abs_tol=1e-6), (m.label, m.used, units)
        assert math.isclose(m.cached, sum(e.units for e in m.entries.values()), abs_tol=1e-6), m.label
        assert m.used + m.cached <= m.cap + 1e-6, m.label
        assert all(e.units > 0 for e in m.entries.values()), m.label
        assert all(m.entries[e.seq] is e for e in m.live.values()), m.label
        if m.block:
            assert all(e.units % m.block == 0 for e in m.entries.values()), m.label
        held = sum(max(0.0, a.reserve - a.units) for a in m.holders.values() if not a.lease)
        assert math.isclose(m.reserved_out, held, abs_tol=1e-6), (m.label, m.reserved_out, held)


@pytest.mark.parametrize("seed", range(1, 9))
def test_busy_program_keeps_its_books(seed):
    program = link_text(BUSY, "busy.sq")
    result = simulate(program, seed=seed, horizon=150.0, warmup=10.0)
    E = result.engine
    check_pools(E)
    rep = result.report
    # (a session whose growth can never fit preempts itself forever and may starve the rest: legitimate)
    assert rep["sessions"]["arrived"] > 100 and rep["turns"]["answered"] > 10
    kv = next(p for p in rep["pools"] if p["name"] == "kv")
    assert kv["evicted_entries"] + kv["preemptions"] >= 0
    assert rep["gauges"]["occupancy"]["max"] <= 512 + 128
    TOTALS["preemptions"] += kv["preemptions"]
    TOTALS["evicted"] += kv["evicted_entries"]
    TOTALS["spills"] += kv["spills"]
    TOTALS["expired"] += next(p for p in rep["pools"] if p["name"] == "host")["leases_expired"]


TOTALS = {"preemptions": 0, "evicted": 0, "spills": 0, "expired": 0}


def test_the_busy_program_exercised_every_mechanism():
    if TOTALS["spills"] == 0:
        pytest.skip("runs with the busy program's seeds first")
    assert all(v > 0 for v in TOTALS.values()), TOTALS


@pytest.mark.parametrize("example", ["single-turn/kv_pool.sq", "multi-turn/prefix_cache.sq",
                                     "multi-turn/agent.sq", "single-turn/fork_join.sq", "single-turn/claims.sq"])
def test_examples_over_seeds(example):
    program = link_file(EXAMPLES / example)
    for seed in range(3):
        result = simulate(program, seed=seed, horizon=3000.0, warmup=100.0)
        check_pools(result.engine)
