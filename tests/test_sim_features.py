"""The kernel's other statements and clauses, each on a small timeline worked by hand."""

from __future__ import annotations

import math

import pytest

from simtools import run_example, run_samples, run_text
from serq.link import link_file
from serq.sim import simulate


def kernel(decls: str, server: str, n: int, workload: str | None = None) -> str:
    wl = workload if workload is not None else f"arrive batch({n});"
    return f"""fn main() {{
  stage svc : delay;
  {decls}
  workload {{ {wl} }}
  server {{ {server} }}
}}
"""


def test_queue_by_keys_then_join_order(tmp_path):
    # cap 1: S0 holds it until 10; S1..S4 wait with keys 3, 1, 2, 1: admitted by key, the tie
    # (S2 and S4, key 1) in the order they joined.
    prog = kernel("pool one { cap 1; queue by (prio); }", """
      set prio = serial == 0 ? 0 : (serial == 1 ? 3 : (serial == 3 ? 2 : 1));
      hold one (cost(one, 1)) { observe at = now; run svc (cost(svc, 10)); }""", 5)
    s = run_samples(prog, tmp_path)
    assert s["at"] == [(0, 0.0), (2, 10.0), (4, 20.0), (3, 30.0), (1, 40.0)]


def test_queue_by_waited(tmp_path):
    # keys re-read before every selection: -waited serves the longest waiting first; the
    # sessions join at 1, 2, 3 (their delays) and the one joined first wins at 10
    prog = kernel("pool one { cap 1; queue by (-waited); }", """
      set d = serial == 0 ? 0 : 4 - serial;
      run svc (cost(svc, d));
      hold one (cost(one, 1)) { observe at = now; run svc (cost(svc, 10)); }""", 4)
    s = run_samples(prog, tmp_path)
    assert s["at"] == [(0, 0.0), (3, 10.0), (2, 20.0), (1, 30.0)]


def test_evict_by_keys(tmp_path):
    # S0 caches 8 at 1 (key 2), S1 caches 8 at 2 (key 1); S2 needs 8 at 3: evict by the least key
    # takes S1's newer entry, not the least recently used.
    prog = kernel("pool kv { cap 16; evict by (prio); }", """
      set prio = serial == 0 ? 2 : 1;
      branch (serial == 2) {
        run svc (cost(svc, 3));
        hold kv (cost(kv, 8)) { run svc (cost(svc, 1)); }
      } else {
        hold kv (cost(kv, 8)) { run svc (cost(svc, 1 + serial)); } cache (cost(kv, 8));
        run svc (cost(svc, 5));
        observe mine = cachedin(kv);
      }""", 3)
    s = run_samples(prog, tmp_path)
    assert sorted(s["mine"]) == [(0, 8.0), (1, 0.0)]


def test_spill_to_a_tier(tmp_path):
    prog = kernel("stage link : fifo;\n  pool host { cap 100; }\n"
                  "  pool kv { cap 32; evict lru; spill host via link (cost(link, 1)) when (1); }", """
      branch (serial == 0) {
        hold kv (cost(kv, 32)) { run svc (cost(svc, 1)); } cache (cost(kv, 32));
        run svc (cost(svc, 3));
        observe in_kv = cachedin(kv);
        observe in_host = cachedin(host);
      } else {
        run svc (cost(svc, 2));
        hold kv (cost(kv, 32)) { run svc (cost(svc, 1)); }
      }""", 2)
    # t=1 S0 caches 32; t=2 S1's 32 evicts it: the write takes link 1 second; t=4 S0 finds it in host
    s = run_samples(prog, tmp_path)
    assert s["in_kv"] == [(0, 0.0)] and s["in_host"] == [(0, 32.0)]
    rep = s["_report"]
    kv = next(p for p in rep["pools"] if p["name"] == "kv")
    assert kv["spills"] == 1 and kv["evicted_units"] == 32.0
    assert next(st for st in rep["stages"] if st["name"] == "link")["completed"] == 1


def test_drop_and_load(tmp_path):
    prog = kernel("pool kv { cap 100; }", """
      hold kv (cost(kv, 10)) {
        load kv (cost(kv, 4));
        run svc (cost(svc, 1));
      } cache (cost(kv, 10));
      observe kept = cachedin(kv);
      drop kv;
      observe dropped = cachedin(kv);""", 1)
    # a load advanced the position to 4: the release caches min(10, 4)
    s = run_samples(prog, tmp_path)
    assert s["kept"] == [(0, 4.0)] and s["dropped"] == [(0, 0.0)]
    assert s["_report"]["pools"][0]["cached"] == 0.0


def test_load_past_the_allocation_is_an_error(tmp_path):
    from simtools import run_error
    prog = kernel("pool kv { cap 100; }", """
      set n = 11 + serial;
      hold kv (cost(kv, 10)) { load kv (cost(kv, n)); }""", 1)
    e = run_error(prog, tmp_path)
    assert "past the allocation" in e.message


def test_choose_least_keys_then_smallest_index(tmp_path):
    prog = kernel("pool kv[3] { cap 10; }", """
      choose k in 3 by (used(kv[k]));
      observe picked = k;
      hold kv[k] (cost(kv, 4)) { run svc (cost(svc, 10)); }""", 4)
    # S0: all 0 -> 0; S1: kv[0] used 4 ... but admission is the settle's: every session chooses
    # before any is admitted, so all four see 0 everywhere and pick 0
    s = run_samples(prog, tmp_path)
    assert [v for _, v in s["picked"]] == [0.0, 0.0, 0.0, 0.0]
    prog2 = kernel("pool kv[3] { cap 10; }", """
      run svc (cost(svc, serial));
      choose k in 3 by (used(kv[k]), -k);
      observe picked = k;
      hold kv[k] (cost(kv, 4)) { run svc (cost(svc, 10)); }""", 4)
    s = run_samples(prog2, tmp_path, name="b.sq")
    # sessions choose one time unit apart: ties to the largest index by the second key
    assert [v for _, v in s["picked"]] == [2.0, 1.0, 0.0, 2.0]


def test_end_in_the_server_refuses_the_request(tmp_path):
    prog = kernel("", """
      branch (serial == 1) { end; }
      run svc (cost(svc, 1));""", 3)
    rep = run_text(prog, tmp_path)
    assert rep["client"]["response"]["count"] == 2 and rep["sessions"]["refused"] == 1
    assert rep["turns"] == {"started": 3, "answered": 2}


def test_trace_replay(tmp_path):
    (tmp_path / "t.csv").write_text("session,arrive,new,out,think,forced\n"
                                    "0,0,100,5,2,0\n0,0,50,3,0,1\n1,1,10,1,0,0\n")
    prog = """fn main() {
  stage svc : fifo;
  stage pause : delay;
  workload {
    trace "t.csv" ordered;
    init { set context = 0; }
    session {
      turn;
      while (more) { set context = context + new + out; run pause (cost(pause, think)); turn; }
    }
  }
  server { observe n_seen = new; observe ctx = context; observe f = forced; run svc (cost(svc, out)); observe done = now; }
}
"""
    s = run_samples(prog, tmp_path)
    # S0: turn 1 at 0 (out 5): done 5; thinks 2; turn 2 at 7 (out 3) done 10. S1 at 1: waits for S0: done 6.
    assert s["n_seen"] == [(0, 100.0), (1, 10.0), (0, 50.0)]
    assert s["ctx"] == [(0, 0.0), (1, 0.0), (0, 105.0)]
    assert s["f"] == [(0, 0.0), (1, 0.0), (0, 1.0)]
    assert s["done"] == [(0, 5.0), (1, 6.0), (0, 10.0)]


def test_gauge_time_average_batch_means_and_extremes():
    rep = run_example("single-turn/renewal.sq", horizon=1000.0)
    g = rep["gauges"]["jobs"]
    # D/D/1: a job every 1.25, each 1 long: one job present 80% of the time
    # arrivals at 1.25 k: 799 whole jobs in [0, 1000] (the 800th arrives at the horizon)
    assert g["mean"] == pytest.approx(0.799) and g["min"] == 0.0 and g["max"] == 1.0
    assert g["ci95"] is not None and g["ci95"] < 0.01 and g["windows"] == 20


def test_gauge_dump(tmp_path):
    program = link_file(run_example.__globals__["EXAMPLES"] / "single-turn" / "renewal.sq")
    result = simulate(program, horizon=5.0, keep_samples=True)
    result.dump(tmp_path / "d")
    rows = (tmp_path / "d" / "gauge" / "jobs.csv").read_text().splitlines()
    assert rows[0] == "time,value"
    assert rows[1:] == ["0.0,0.0", "1.25,1.0", "2.25,0.0", "2.5,1.0", "3.5,0.0", "3.75,1.0", "4.75,0.0",
                        "5.0,1.0"]
    obs = (tmp_path / "d" / "observe" / "start.csv").read_text().splitlines()
    assert obs[0] == "time,session,turn,value" and obs[1] == "1.25,0,1,1.25"
    assert (tmp_path / "d" / "client" / "response.csv").exists()
    assert (tmp_path / "d" / "report.json").exists()


def test_claims_at_end_and_given():
    rep = run_example("single-turn/claims.sq", arrivals=300, seed=4)
    assert [(c["name"], c["result"]) for c in rep["claims"]] == [
        ("bounded_sizes", "holds"), ("small_jobs", "holds"), ("sjf_bound", "holds")]
    rep = run_example("single-turn/claims.sq", supplied={"rate": "0.5"}, horizon=200.0)
    assert all(c["result"] == "not evaluated" for c in rep["claims"]) or rep["sessions"]["live"] == 0


def test_claim_fails_and_given_puts_it_out_of_scope(tmp_path):
    prog = """fn main() {
  stage svc : fifo;
  workload { arrive batch(4); turn { Size s = serial; } }
  server { run svc (cost(svc, s)); observe size = s; }
  claim count_ok: at end (count(size) == 4 && total(size) == 6 && largest(size) == 3 && smallest(size) == 0);
  claim pt: at end (prefix_total(size) == 10 && count(response) == 4);
  claim wrong: at end (count(size) > 4);
  claim scoped given (s < 2): at end (1);
}
"""
    rep = run_text(prog, tmp_path)
    res = {c["name"]: c for c in rep["claims"]}
    # sizes 0,1,2,3: prefix_total = 0 + (0+1) + (0+1+2) + (0+1+2+3) = 10
    assert res["count_ok"]["result"] == "holds" and res["pt"]["result"] == "holds"
    assert res["wrong"]["result"] == "fails"
    # given is read once init has run, before any turn: s is 0 then for everyone
    assert res["scoped"]["result"] == "holds"


def test_given_out_of_scope(tmp_path):
    prog = """fn main() {
  stage svc : fifo;
  workload { arrive batch(3); init { set v = serial; } }
  server { run svc (cost(svc, 1)); }
  claim small given (v < 2): at end (1);
}
"""
    rep = run_text(prog, tmp_path)
    c = rep["claims"][0]
    assert c["result"] == "out of scope" and c["session"] == 2


def test_interrupt_reports_what_was_measured():
    program = link_file(run_example.__globals__["EXAMPLES"] / "single-turn" / "mm1.sq")

    def stop(E, elapsed):
        raise KeyboardInterrupt

    result = simulate(program, horizon=1e9, progress=stop)
    rep = result.report
    assert rep["stopped"] == "interrupted" and rep["events"] >= 4000
    assert rep["client"]["response"]["count"] > 1000 and math.isfinite(rep["end"])
    assert any("interrupted" in n for n in rep["notes"])


def test_growing_run_on_a_plain_stage(tmp_path):
    prog = kernel("pool kv { cap 100; }", """
      hold kv (cost(kv, 4)) {
        run svc (cost(svc, 6)) growing kv;
        observe held = used(kv);
      } cache (cost(kv, 100));
      observe kept = cachedin(kv);""", 1)
    # the hold grows to the position the run will reach (6) before it runs; its position is 6 after
    s = run_samples(prog, tmp_path)
    assert s["held"] == [(0, 6.0)] and s["kept"] == [(0, 6.0)]


def test_pool_and_stage_observables(tmp_path):
    prog = """fn main() {
  stage svc : fifo;
  pool kv { cap 10; block 4; }
  workload { arrive batch(3); }
  server {
    hold kv (cost(kv, 3)) {
      observe u = used(kv);
      observe f = free(kv);
      observe h = holders(kv);
      observe q = queued(kv);
      observe b = blocksize(kv);
      observe sq = queue(svc);
      observe sb = busy(svc);
      observe w = work(svc);
      run svc (cost(svc, 2));
    }
  }
}
"""
    s = run_samples(prog, tmp_path)
    # the three are admitted one after another at 0 (4 units each, rounded to blocks): 12 > 10, so the
    # third waits until the first leaves at 2. At each admission the admitted session reads the pool.
    assert [v for _, v in s["u"]] == [8.0, 8.0, 8.0]
    assert [v for _, v in s["f"]] == [2.0, 2.0, 2.0]
    assert [v for _, v in s["h"]] == [2.0, 2.0, 2.0]
    assert [v for _, v in s["q"]] == [1.0, 1.0, 0.0]
    assert [v for _, v in s["b"]] == [4.0, 4.0, 4.0]
    assert [v for _, v in s["sq"]] == [0.0, 0.0, 0.0]
    assert [v for _, v in s["sb"]] == [0.0, 1.0, 1.0]
    assert [v for _, v in s["w"]] == [0.0, 2.0, 2.0]


def test_unordered_trace_samples_trace_sessions(tmp_path):
    (tmp_path / "t.csv").write_text("session,arrive,new,out,think,forced\n"
                                    + "".join(f"{i},{i},{10 * (i + 1)},1,0,0\n" for i in range(5)))
    prog = """fn main() {
  stage svc : delay;
  workload { trace "t.csv"; session { turn; } }
  server { observe n_seen = new; run svc (cost(svc, out)); }
}
"""
    a = run_samples(prog, tmp_path, seed=1)
    b = run_samples(prog, tmp_path, seed=2)
    assert len(a["n_seen"]) == 5 and {v for _, v in a["n_seen"]} <= {10.0, 20.0, 30.0, 40.0, 50.0}
    assert a["n_seen"] != b["n_seen"]
    assert run_samples(prog, tmp_path, seed=1)["n_seen"] == a["n_seen"]


def test_a_shared_stage_left_idle_carries_nothing(tmp_path):
    # one flow of 2 over ps(1) stages a and b (rate 1 under maxmin): both carry it for [0, 2], then
    # the session spends [2, 10] at a delay stage. Utilization Σ rate / φ is 2 / 10 on each, not 1
    # (a stage whose last flow ended kept that flow's rate as carried).
    text = """fn main() {
  stage a : ps(1);
  stage b : ps(1);
  stage rest : delay;
  share maxmin;
  workload { arrive batch(1); }
  server { run a, b (cost(a, b, 2)); run rest (cost(rest, 8)); }
}
"""
    rep = run_text(text, tmp_path)
    util = {s["name"]: s["utilization"] for s in rep["stages"]}
    assert rep["end"] == 10 and util["a"] == util["b"] == 0.2
