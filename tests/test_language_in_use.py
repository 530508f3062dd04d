"""The language as programs in use write it (issue 12): each construct links, runs, and a
hand-computed number shows it means what the reference says; the refusals that remain name
the reference's rule."""

from __future__ import annotations

from helpers import program, refused
from simtools import run_samples, run_text


def claims(report: dict) -> dict[str, str]:
    return {c["name"]: c["result"] for c in report["claims"]}


def stage(report: dict, name: str) -> dict:
    return next(s for s in report["stages"] if s["name"] == name)


def pool(report: dict, name: str) -> dict:
    return next(p for p in report["pools"] if p["name"] == name)


# ---------------------------------------------------------------- 1. observe beside the client metrics
OBSERVES_CLIENT_NAMES = """fn main() {
  stage svc : delay;
  workload { arrive batch(2); }
  server {
    run svc (cost(svc, 3));
    observe response = 7;
    observe ttft = serial;
    observe tpot = 2;
  }
  claim own_response: at end (total(response) == 14 && count(response) == 2);
  claim own_ttft: at end (largest(ttft) == 1 && smallest(ttft) == 0);
}
"""


def test_an_observe_may_take_a_client_metric_name(tmp_path):
    # two sessions at 0 on a delay stage: the client sees a response of 3 each; the program
    # observes 7 under the same name, in its own table, and the claims read the program's
    rep = run_text(OBSERVES_CLIENT_NAMES, tmp_path)
    assert rep["client"]["response"]["count"] == 2 and rep["client"]["response"]["mean"] == 3
    assert rep["observes"]["response"]["mean"] == 7 and rep["observes"]["response"]["count"] == 2
    assert rep["observes"]["ttft"]["max"] == 1 and rep["observes"]["tpot"]["mean"] == 2
    assert claims(rep) == {"own_response": "holds", "own_ttft": "holds"}


def test_a_claim_reads_the_client_metric_when_the_program_does_not_observe_it(tmp_path):
    text = OBSERVES_CLIENT_NAMES.replace("    observe response = 7;\n", "").replace(
        "total(response) == 14", "total(response) == 6")
    assert claims(run_text(text, tmp_path))["own_response"] == "holds"


# ---------------------------------------------------------------- 2. a def named like a catalogue function
def test_a_def_may_take_a_catalogue_function_name_from_a_library(tmp_path):
    # the library's reusable is not the catalogue's (whole blocks): 10 - 1 = 9, not 8
    (tmp_path / "lib.sq").write_text("def reusable(n, bs) { n - 1 }\n")
    text = """use "lib.sq";
fn main() {
  stage svc : delay;
  workload { arrive batch(1); }
  server { run svc (cost(svc, reusable(10, 4))); }
}
"""
    rep = run_text(text, tmp_path)
    assert rep["client"]["response"]["mean"] == 9


def test_a_def_named_like_a_function_does_not_take_a_supplied_name():
    assert "the language supplies that name" in refused(program(prelude="def now() { 1 }")).message
    assert "`cost`" in refused(program(prelude="def cost(a, b) { a }")).message


# ---------------------------------------------------------------- 3. a decode queue with both entries
BOTH_DECODE_ENTRIES = """fn main() {
  queue P[1] : prefill {
    device gpu { kv cap 4096; }
    engine on gpu {
      reqs cap 8;
      tokens cap 256;
      schedule { advance running; admit waiting; }
      execute (1);
    }
    pool reqs on P { queue fifo; }
    pool kv on gpu { block 16; evict lru; preempt lifo; }
    nic ps(1000);
    prefill (prompt) {
      hold reqs (cost(reqs, 1)), kv (cost(kv, prompt)) {
        run P prefill (cost(P, prompt)) growing kv;
      } cache (cost(reqs, kv, prompt)) lease kv (inf);
    }
  }
  queue D[1] : decode {
    device gpu { kv cap 4096; }
    engine on gpu {
      reqs cap 8;
      tokens cap 256;
      schedule { advance running; admit waiting; }
      execute (1);
    }
    pool reqs on D { queue fifo; }
    pool kv on gpu { block 16; evict lru; preempt lifo; }
    nic ps(1000);
    ENTRIES
  }
  P push D share maxmin;
  workload { arrive batch(2); hidden o; turn { Size o = 3; } }
  server {
    set prompt = 32;
    branch (serial == 0) {
      D[0].decode (prompt);
    } else {
      fork { P[0].prefill (prompt); }
      join;
      D[0].decode (prompt) from P[0];
    }
  }
}
"""
LOCAL = """decode (prompt) {
      hold reqs (cost(reqs, 1)), kv (cost(kv, prompt)) {
        run D prefill (cost(D, prompt)) growing kv;
        run D decode (cost(D, o - 1)) growing kv;
      } cache (cost(reqs, kv, prompt + o - 1));
    }"""
REMOTE = """decode (prompt) from P {
      hold reqs (cost(reqs, 1)), kv (cost(kv, prompt)) {
        transfer (prompt) from P to kv (prompt);
        run D decode (cost(D, o - 1)) growing kv;
      } cache (cost(reqs, kv, prompt + o - 1));
    }"""


def test_a_decode_queue_may_have_both_entries_in_either_order(tmp_path):
    for entries in (LOCAL + "\n    " + REMOTE, REMOTE + "\n    " + LOCAL):
        rep = run_text(BOTH_DECODE_ENTRIES.replace("ENTRIES", entries), tmp_path)
        # session 0 prefills and decodes on D (two runs), session 1 prefills on P and decodes on D
        assert stage(rep, "P")["completed"] == 1
        assert stage(rep, "D")["completed"] == 3
        assert rep["turns"]["answered"] == 2


def test_a_decode_entry_written_twice_is_refused(tmp_path):
    e = refused(BOTH_DECODE_ENTRIES.replace("ENTRIES", LOCAL + "\n    " + LOCAL), tmp_path)
    assert "decode" in e.message and "twice" in e.message


# ---------------------------------------------------------------- 4. a trace beside an arrival law
TRACE = """session,arrive,new,out,think,forced
0,100,10,1,0,0
0,100,20,1,0,0
1,200,30,1,0,0
"""
TRACE_UNDER_BATCH = """fn main() {
  stage svc : fifo;
  workload {
    arrive batch(3);
    trace "t.csv" ordered;
    session { turn; while (more) { turn; } }
  }
  server {
    observe started = now;
    run svc (cost(svc, new));
    observe tokens_in = new;
  }
}
"""


def test_a_trace_beside_an_arrival_law_replays_turns_at_the_laws_times(tmp_path):
    # batch(3): three sessions at 0 (not at the trace's 100 and 200), replaying trace sessions
    # 0, 1, 0 (ordered: i modulo 2). One server, FIFO: S0 [0,10], S1 [10,40], S2 [40,50];
    # S0's second turn joins at 10 and runs [50,70]; S2's at 50 runs [70,90].
    (tmp_path / "t.csv").write_text(TRACE)
    s = run_samples(TRACE_UNDER_BATCH, tmp_path)
    assert sorted(s["started"]) == [(0, 0.0), (0, 10.0), (1, 0.0), (2, 0.0), (2, 50.0)]
    assert sorted(s["tokens_in"]) == [(0, 10.0), (0, 20.0), (1, 30.0), (2, 10.0), (2, 20.0)]
    rep = s["_report"]
    # responses 10, 60, 40, 50, 40
    assert rep["client"]["response"]["mean"] == 40 and rep["end"] == 90


def test_a_trace_alone_keeps_its_arrival_times(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    text = TRACE_UNDER_BATCH.replace("    arrive batch(3);\n", "")
    s = run_samples(text, tmp_path)
    assert sorted(s["started"]) == [(0, 100.0), (0, 110.0), (1, 200.0)]


def test_a_trace_under_poisson_draws_trace_sessions(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    text = TRACE_UNDER_BATCH.replace("arrive batch(3);", "arrive poisson(0.01);").replace(
        'trace "t.csv" ordered;', 'trace "t.csv";')
    s = run_samples(text, tmp_path, horizon=20000, seed=3)
    values = {v for _, v in s["tokens_in"]}
    assert values == {10.0, 20.0, 30.0}


def test_two_laws_or_two_traces_are_refused(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    two_traces = TRACE_UNDER_BATCH.replace('trace "t.csv" ordered;', 'trace "t.csv"; trace "t.csv";')
    assert "a second trace" in refused(two_traces, tmp_path).message
    two_laws = TRACE_UNDER_BATCH.replace("arrive batch(3);", "arrive batch(3); arrive poisson(1);")
    assert "a second arrival law" in refused(two_laws, tmp_path).message


# ---------------------------------------------------------------- 6. defs in pool keys and guards
def test_a_def_in_a_queue_key_is_written_out(tmp_path):
    # three sessions join at 0 with s = 1, 2, 3; `queue by (largest_first(s))` admits s = 3 first
    text = """fn main() {
  def largest_first(x) { 0 - x }
  stage svc : delay;
  pool slot { cap 1; queue by (largest_first(s)); }
  workload { arrive batch(3); }
  server {
    set s = serial + 1;
    hold slot (cost(slot, 1)) { observe entered = now; run svc (cost(svc, s)); }
  }
}
"""
    s = run_samples(text, tmp_path)
    assert sorted(s["entered"]) == [(0, 5.0), (1, 3.0), (2, 0.0)]


def test_defs_in_eviction_preemption_and_schedule_guards_link(tmp_path):
    text = """fn main() {
  def negated(x) { 0 - x }
  def few(x) { x < 3 }
  device gpu { kv cap 64; }
  engine e on gpu {
    reqs cap 4;
    tokens cap 8;
    schedule { advance running; admit waiting while (few(running.count)); }
    execute (1);
  }
  pool reqs on e { queue fifo; }
  pool kv on gpu { block 4; evict by (negated(now)); preempt by (negated(admission)); }
  workload { arrive batch(4); }
  server {
    hold reqs (cost(reqs, 1)), kv (cost(kv, 4)) {
      run e prefill (cost(e, 4)) growing kv;
    } cache (cost(reqs, kv, 4));
  }
}
"""
    rep = run_text(text, tmp_path)
    # `few(running.count)`: at most 3 residents, so the fourth waits one iteration
    assert rep["turns"]["answered"] == 4 and stage(rep, "e")["iterations"] == 2


# ---------------------------------------------------------------- 7. an engine's register, bare in a header
REGISTER_IN_HEADER = """fn main() {
  device gpu { kv cap 1000; }
  engine e on gpu {
    reqs cap 4;
    tokens cap 100;
    state ratio = 2;
    schedule { advance running; admit waiting; }
    execute (1);
  }
  pool reqs on e { queue fifo; }
  pool kv on gpu { block 10; evict lru; preempt lifo; }
  workload { arrive batch(1); }
  server {
    set n = 30;
    hold reqs (cost(reqs, 1)), kv (cost(kv, n * HOW)) {
      run e prefill (cost(e, n)) growing kv;
    } cache (cost(reqs, kv, n));
  }
}
"""


def test_a_register_is_read_bare_in_a_header_whose_pool_the_engine_admits(tmp_path):
    # one iteration of 1 s with 30 * ratio = 60 units held throughout
    for how in ("ratio", "e.ratio"):
        rep = run_text(REGISTER_IN_HEADER.replace("HOW", how), tmp_path)
        assert pool(rep, "kv")["mean_used"] == 60


def test_a_bare_register_that_is_also_an_attribute_is_refused(tmp_path):
    text = REGISTER_IN_HEADER.replace("HOW", "ratio").replace("set n = 30;", "set n = 30; set ratio = 1;")
    assert "write `e.ratio` for the register" in refused(text, tmp_path).message


# ---------------------------------------------------------------- 10. diagnostics
def test_a_binding_named_like_an_observe_says_observe():
    e = refused(program(server="observe k = 1; hold kv (cost(kv, k)) at admission (k = 2) "
                               "{ run svc (cost(svc, s)); }"))
    assert "binding `k` has the name of an observe" in e.message


def test_a_parameter_named_like_an_input_reads_an_input():
    text = program(decls='let rate = args.number("rate", 1);', prelude='use "std/args";\ndef f(rate) { rate }')
    assert "has the name of an input" in refused(text).message


def test_the_old_request_statement_says_what_to_write():
    e = refused(program(server="request; run svc (cost(svc, s));"))
    assert "`request;` is not a statement" in e.message and "ENGINE (args);" in e.message
    assert (e.span.line, e.span.col) == (7, 12)


# ---------------------------------------------------------------- the examples that use them
def test_the_replay_example_answers_every_trace_turn_under_batch():
    from simtools import run_example
    rep = run_example("multi-turn/vllm_replay.sq")
    # 16 sessions replay the trace's four (3 + 2 + 1 + 3 turns) four times: 36 turns
    assert rep["turns"]["answered"] == 36 and rep["observes"]["response"]["count"] == 36
    assert claims(rep) == {"budget": "holds", "every_turn_observed": "holds"}


def test_the_pd_example_prefills_first_turns_on_p_and_later_ones_on_d(tmp_path):
    from serq.link import link_file
    from serq.sim import simulate
    from simtools import EXAMPLES
    path = EXAMPLES / "pd-disaggregation" / "vllm_local_or_remote.sq"
    result = simulate(link_file(path), horizon=200, base_dir=path.parent, keep_samples=True)
    local = next(s for s in result.engine.observes if s.name == "local")
    remote_turns = sum(1 for v in local.values if v == 0)
    rep = result.report
    # every remote turn is one prefill on P (a live session's may have ended before its decode), and
    # every session's first turn is remote
    live = rep["sessions"]["live"]
    assert remote_turns <= stage(rep, "P")["completed"] <= remote_turns + live
    assert remote_turns >= rep["sessions"]["arrived"] - live
    assert 0 < remote_turns < len(local.values)


def test_the_replay_example_keeps_waiting_sessions_prefixes(tmp_path):
    # the burst overflows the KV cache; evicting not-waiting, short prefixes first recomputes fewer
    # prompt tokens than evicting the least recently released
    from simtools import EXAMPLES
    text = (EXAMPLES / "multi-turn" / "vllm_replay.sq").read_text()
    (tmp_path / "agent_trace.csv").write_text((EXAMPLES / "multi-turn" / "agent_trace.csv").read_text())
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "vllm.sq").write_text((EXAMPLES / "lib" / "vllm.sq").read_text())
    text = text.replace('use "../lib/vllm.sq";', 'use "lib/vllm.sq";')
    by_key = run_text(text, tmp_path)
    lru = run_text(text.replace("evict by (waiting, size);", "evict lru;"), tmp_path)
    assert pool(by_key, "kv")["evicted_units"] > 0 and pool(lru, "kv")["evicted_units"] > 0
    total = lambda r: r["observes"]["prefill_tokens"]["mean"] * r["observes"]["prefill_tokens"]["count"]
    assert total(by_key) < total(lru)
