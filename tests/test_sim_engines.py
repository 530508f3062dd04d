"""Step engines in the interpreter: the vLLM oracle scenarios reproduced exactly, and scenarios whose
iterations are computed by hand (docs/engines.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simtools import REPO, run_example
from serq.oracle import load_scenario, scenario_paths
from serq.sim.oracle_run import compare, first_differing_step, run_scenario

ORACLE = REPO / "tests" / "data" / "oracle"
SCENARIOS = scenario_paths(ORACLE)


def test_every_oracle_set_is_here():
    sets = {p.parent.name for p in SCENARIOS}
    assert sets == {"vllm-v1", "vllm-v1-random", "vllm-v1-cache", "vllm-v1-cache-2", "vllm-v1-random-2"}
    assert len(SCENARIOS) == 103
    # byte for byte what ../shared/oracle holds, where that folder is present
    shared = REPO.parent.parent / "shared" / "oracle"
    if shared.is_dir():
        for p in SCENARIOS:
            assert p.read_bytes() == (shared / p.parent.name / p.name).read_bytes(), p


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_oracle_scenario_reproduced_exactly(path: Path):
    sc = load_scenario(path)
    run = run_scenario(sc)
    rows = compare(sc, run)
    assert rows and len(rows) == len(sc.expected)
    bad = [(r.id, r.vllm, r.serq, r.serq_ended) for r in rows if not r.same]
    assert not bad, f"{sc.name}: (id, vLLM (first, last, preemptions, cached), serQ, how serQ's ended): {bad}"
    # and iteration by iteration: the tokens scheduled per request are vLLM's trace
    assert first_differing_step(sc, run) is None


UNFINISHED = [p for p in SCENARIOS if json.loads(p.read_text()).get("did_not_finish")]


def test_requests_vllm_never_finishes():
    # the sets hold three scenarios with requests whose tokens vLLM never produced within its steps
    assert [p.stem for p in UNFINISHED] == ["rand_20261201_0027", "rand_20261201_0028", "rand_20261201_0029"]
    ended = {}
    for path in UNFINISHED:
        sc = load_scenario(path)
        run = run_scenario(sc)
        for r in compare(sc, run):
            assert r.same, (sc.name, r)
            if r.vllm_ended != "finished":
                ended[r.id if sc.name.endswith("28") else f"{sc.name[-2:]}/{r.id}"] = (r.vllm[:2], r.serq_ended)
    # 0028: r1 (286 + 46 tokens in a pool of 41 blocks of 8 = 328) is preempted at step 63 with 43 tokens
    # out; re-entering it reserves 329 tokens, which never fit: it waits at the head for ever and r0,
    # queued behind it, never starts (vLLM: both waiting at the step cap)
    assert ended == {"27/r5": ((315, None), "waiting"), "r0": ((None, None), "waiting"),
                     "r1": ((20, None), "waiting"), "29/r0": ((167, None), "waiting")}


def test_next_turns_created_in_one_step_queue_in_session_order():
    # cache_20261201_004: s2t1 runs ahead of s0t1 (admitted at 76, s0t1 at 79) and both finish at step
    # 133; both think 5 steps, so s0t2 and s2t2 join the queue at 139. vLLM's driver creates the next
    # turns of one step in session order: s0t2 queues first, and at step 173 (s2t2's 289-token prompt
    # does not fit beside s3t3's) s0t2 is admitted with the 27 tokens s3t3 leaves of the budget of 64
    sc = load_scenario(ORACLE / "vllm-v1-cache-2" / "cache_20261201_004.json")
    run = run_scenario(sc)
    at_173 = next(r for r in run.records if r.start == 173)
    assert {sc.ids[k]: n for k, n in at_173.scheduled} == {"s3t3": 37, "s0t2": 27}
    assert (run.turns[(0, 2)].first, run.turns[(2, 2)].first) == (176, 231)


def test_a_resumed_request_reuses_its_own_generated_blocks():
    # cache_20261201_013 (blocks of 16): s1t3 (prompt 357) is preempted at step 410 after 12 output
    # tokens, having computed 357 + 11 = 368 = 23 full blocks, cached when it was preempted. Resumed at
    # 415 it knows 369 tokens and reuses all 368 (vLLM's hit is at most num_tokens - 1): one token to
    # compute, not the 17 that reusing only the prompt's 22 blocks (352) would leave
    sc = load_scenario(ORACLE / "vllm-v1-cache-2" / "cache_20261201_013.json")
    run = run_scenario(sc)
    at_415 = next(r for r in run.records if r.start == 415)
    assert {sc.ids[k]: n for k, n in at_415.scheduled} == {"s1t3": 1}
    o = run.turns[(1, 3)]
    assert (o.first, o.last, o.preemptions, o.cached) == (398, 459, 1, 0)


def test_forced_miss_nonce_is_part_of_the_prompt():
    # a forced miss's prompt starts with a nonce token (vLLM's prompt_len is one more than the turns
    # before it and its new tokens make), and every later turn of the session carries it
    # (cache_20261201_005, s2: new 15 out 39; new 17 out 6, a miss; new 84: prompts 15, 72, 162)
    sc = load_scenario(ORACLE / "vllm-v1-cache-2" / "cache_20261201_005.json")
    assert [(t.new, t.out, t.forced) for t in sc.sessions[2][1]] == [(15, 39, False), (18, 6, True), (84, 10, False)]


def test_vllm_multi_turn_example_runs_with_its_claims():
    rep = run_example("multi-turn/vllm.sq", horizon=100.0, seed=3)
    claims = {c["name"]: c for c in rep["claims"]}
    assert claims["budget_respected"]["result"] == "holds"
    assert claims["some_full_batch"]["result"] in ("witnessed", "not witnessed")
    st = rep["stages"][0]
    assert st["service"] == "step" and st["iterations"] > 1000 and st["tokens"] > 0
    assert rep["client"]["ttft"]["count"] > 0 and rep["client"]["tpot"]["count"] > 0
    assert rep["client"]["ttft"]["min"] > 0


# ------------------------------------------------------------------ hand-computed iterations
def engine_program(schedule: str, *, kv: str = "kv cap 1000;", pool: str = "block 1; evict lru; preempt lifo;",
                   tokens: int = 8, extra: str = "", request: str | None = None) -> str:
    """One engine on the step clock (`execute (1)`), its requests from an ordered trace (t.csv)."""
    request = request or """request (prompt, o) {
      prefill (prompt) growing kv;
      decode (o - 1) growing kv;
    }"""
    return f"""def in_phase() {{ running.decoding > 0 ? decoding : !decoding }}
fn main() {{
  device gpu {{ {kv} }}
  engine llm on gpu {{
    reqs cap 4;
    tokens cap {tokens};
    {extra}
    {request}
    schedule {{ {schedule} }}
    execute (1);
  }}
  pool kv on gpu {{ {pool} }}
  pool reqs on llm {{ queue fifo; }}
  workload {{ trace "t.csv" ordered; hidden out; }}
  server {{ set prompt = new; llm (prompt, out); }}
}}
"""


def run_engine(tmp_path: Path, text: str, requests: list[tuple[int, int, int]]):
    """Requests (arrive, prompt, out), one session each: the run (turns by session, records)."""
    from serq.link import link_file
    from serq.sim.oracle_run import run_program
    rows = "".join(f"{i},{a},{p},{o},0,0\n" for i, (a, p, o) in enumerate(requests))
    (tmp_path / "t.csv").write_text("session,arrive,new,out,think,forced\n" + rows)
    (tmp_path / "p.sq").write_text(text)
    return run_program(link_file(tmp_path / "p.sq"), tmp_path)


def steps(run) -> dict[int, tuple[int, int, int]]:
    """Session -> (first-token step, last-token step, preemptions)."""
    return {s: (int(o.first), int(o.last), o.preemptions) for (s, _), o in sorted(run.turns.items())}


TAKING = "taking reqs (1), kv (prompt)"


def test_vllm_schedule_baseline(tmp_path):
    # A (10 tokens, 3 out) at 0, B (4, 2) at 1, tokens cap 8.
    # 0: A 8 | 1: A 2 (samples), B 4 (samples) | 2: A, B decode (B done) | 3: A decodes (done)
    run = run_engine(tmp_path, engine_program(f"advance running; admit waiting while (running.preempted == 0) {TAKING};"),
                     [(0, 10, 3), (1, 4, 2)])
    assert steps(run) == {0: (1, 3, 0), 1: (1, 2, 0)}
    assert [int(r.tokens) for r in run.records] == [8, 6, 2, 1]


def test_exclusive_prefill(tmp_path):
    # 0: A 8 (alone) | 1: A's running prefill takes precedence: A 2 alone, B waits |
    # 2: A's tentative decode is displaced by B's prefill (4, the full budget) |
    # 3: A, B decode (B done) | 4: A decodes (done)
    run = run_engine(tmp_path, engine_program(f"exclusive prefill; admit waiting while (running.preempted == 0) {TAKING};"),
                     [(0, 10, 3), (1, 4, 2)])
    assert steps(run) == {0: (1, 4, 0), 1: (2, 3, 0)}
    recs = [(int(r.start), int(r.tokens), int(r.prefilled), int(r.decoders), int(r.residents)) for r in run.records]
    assert recs == [(0, 8, 8, 0, 1), (1, 2, 2, 0, 1), (2, 4, 4, 0, 2), (3, 2, 0, 2, 2), (4, 1, 0, 1, 1)]


def test_only_in_phase_faster_transformer(tmp_path):
    # in_phase(): decodes only while one decodes, else prefills. A (10, 3) at 0, B (4, 2) at 1, C (3, 2) at 3.
    # 0: A 8 | 1: A 2, B 4 (both prefill; both sample) | 2: A, B decode (B done) |
    # 3: A decodes (done); C is admitted but excluded (a decode runs): it waits unserved |
    # 4: C 3 (samples) | 5: C decodes (done)
    run = run_engine(tmp_path, engine_program(
        f"advance running only (in_phase()); admit waiting only (in_phase()) while (running.preempted == 0) {TAKING};"),
        [(0, 10, 3), (1, 4, 2), (3, 3, 2)])
    assert steps(run) == {0: (1, 3, 0), 1: (1, 2, 0), 2: (4, 5, 0)}
    recs = [(int(r.start), int(r.tokens), int(r.residents), int(r.demand)) for r in run.records]
    # demand: what the residents could take before the iteration's tokens. At 3 the batch is A's
    # decode alone; C is a resident whose prefill (3) counts
    assert recs == [(0, 8, 1, 10), (1, 6, 2, 6), (2, 2, 2, 2), (3, 1, 2, 4), (4, 3, 1, 3), (5, 1, 1, 1)]


def test_advance_running_by_remaining(tmp_path):
    # each at most (4), tokens cap 6; A (12, 2) and B (5, 2) at 0.
    # 0: A 4, B 2 | 1: by remaining B (3) first: B 3 (samples), A 3 | 2: B decode 1 (done), A 4 |
    # 3: A 1 (samples) | 4: A decodes (done)
    text = engine_program(f"advance running by (remaining) each at most (4); "
                          f"admit waiting while (running.preempted == 0) each at most (4) {TAKING};", tokens=6)
    run = run_engine(tmp_path, text, [(0, 12, 2), (0, 5, 2)])
    assert steps(run) == {0: (3, 4, 0), 1: (1, 2, 0)}
    assert [int(r.tokens) for r in run.records] == [6, 6, 5, 1, 1]
    # in admission order instead: 1: A 4, B 2 | 2: A 4 (samples), B 1 (samples) | 3: both decode
    text = engine_program(f"advance running each at most (4); "
                          f"admit waiting while (running.preempted == 0) each at most (4) {TAKING};", tokens=6)
    assert steps(run_engine(tmp_path, text, [(0, 12, 2), (0, 5, 2)])) == {0: (2, 3, 0), 1: (2, 3, 0)}


def test_granule(tmp_path):
    # granule 4, tokens cap 10; A (13, 2) and B (6, 2) at 0.
    # 0: A min(13, 10) = 10, short of 13: 8; B admitted, min(6, 2) = 2 short of 6: 0, passed over |
    # 1: A 5 (its remainder: samples), B min(6, 5) = 5: 4 | 2: A decodes (done), B 2 (samples) | 3: B decodes
    text = engine_program(f"advance running; admit waiting while (running.preempted == 0) {TAKING};",
                          tokens=10, extra="granule 4;")
    run = run_engine(tmp_path, text, [(0, 13, 2), (0, 6, 2)])
    assert steps(run) == {0: (1, 2, 0), 1: (2, 3, 0)}
    recs = [(int(r.tokens), int(r.residents)) for r in run.records]
    assert recs == [(8, 2), (9, 2), (3, 2), (1, 1)]


SGLANG = "block {bs}; evict lru; preempt by (1 - decoding, position - prompt, -prompt) requeue tail;"


def test_sglang_retraction_takes_the_longest_prompt_among_the_fewest_outputs(tmp_path):
    # kv 16 tokens (block 1); A (4, 3), B (6, 4), C (3, 3) at 0, served in that order.
    # 0: A 4, B 6, C 3 (all sample; 13 used) | 1: all decode (16 used) |
    # 2: A grows to 6: 17 > 16. Candidates all decoding with one output each: the longest prompt, B,
    #    is the victim (lifo would take C); A and C decode and finish | 3: B again: 6 (samples) |
    # 4, 5, 6: B decodes its 3 tokens (a program that does not read `computed` restarts)
    text = engine_program(f"advance running; admit waiting while (running.preempted == 0) {TAKING};",
                          kv="kv cap 16;", pool=SGLANG.format(bs=1), tokens=100)
    run = run_engine(tmp_path, text, [(0, 4, 3), (0, 6, 4), (0, 3, 3)])
    assert steps(run) == {0: (0, 2, 0), 1: (0, 6, 1), 2: (0, 2, 0)}
    lifo = engine_program(f"advance running; admit waiting while (running.preempted == 0) {TAKING};",
                          kv="kv cap 16;", pool="block 1; evict lru; preempt lifo;", tokens=100)
    assert steps(run_engine(tmp_path, lifo, [(0, 4, 3), (0, 6, 4), (0, 3, 3)]))[2][2] == 1


def test_a_victim_already_served_returns_its_tokens(tmp_path):
    # kv 12 tokens in blocks of 2; A (8, 4) and B (2, 4) at 0.
    # 0: A 8, B 2 (10 used) | 1: A grows to 10 (12 used) and decodes; B needs a block more: the
    #    victim is A (the longest prompt), already served: its token returns, B decodes alone |
    # 2: B decodes; A again: 8 (fits: 12) | 3: B needs a block: victim A (fewest outputs: 0 < 2),
    #    not yet served; B decodes (done) | 4: A 8 | 5, 6, 7: A decodes
    text = engine_program(f"advance running; admit waiting while (running.preempted == 0) {TAKING};",
                          kv="kv cap 12;", pool=SGLANG.format(bs=2), tokens=100)
    run = run_engine(tmp_path, text, [(0, 8, 4), (0, 2, 4)])
    assert steps(run) == {0: (0, 7, 2), 1: (0, 3, 0)}
    recs = [(int(r.start), int(r.tokens), r.preempted) for r in run.records]
    assert recs == [(0, 10, 0), (1, 1, 1), (2, 9, 0), (3, 1, 1), (4, 8, 0), (5, 1, 0), (6, 1, 0), (7, 1, 0)]


VLLM = f"advance running; admit waiting while (running.preempted == 0) {TAKING};"


def test_the_iteration_that_only_preempted_and_a_stuck_session(tmp_path):
    # kv 8 tokens (block 1), A (6, 4) alone: its position reaches 8 after 0: 6 | 1: 7 | 2: 8;
    # at 3 it needs a 9th: it preempts itself, and that scheduler step only preempted (no token,
    # execute's time). It restarts from its prompt (this request does not read `computed`) and is
    # preempted again at the same position: stuck, for ever (the horizon ends it).
    text = engine_program(VLLM, kv="kv cap 8;")
    (tmp_path / "t.csv").write_text("session,arrive,new,out,think,forced\n0,0,6,4,0,0\n")
    (tmp_path / "p.sq").write_text(text)
    from serq.link import link_file
    from serq.sim.oracle_run import run_program
    run = run_program(link_file(tmp_path / "p.sq"), tmp_path, horizon=20)
    recs = [(int(r.start), int(r.tokens), r.preempted, r.admitted) for r in run.records[:6]]
    assert recs == [(0, 6, 0, 1), (1, 1, 0, 0), (2, 1, 0, 0), (3, 0, 1, 0), (4, 6, 0, 1), (5, 1, 0, 0)]
    rep = run.report
    assert rep["sessions"]["stuck"] == 1 and rep["pools"][0]["stuck"] == 1
    assert rep["pools"][0]["preemptions"] >= 4
    assert {k: o.ended for k, o in run.turns.items()} == {(0, 0): "stuck"} and run.turns[(0, 0)].answer is None
    assert any("stuck" in n for n in rep["notes"])


@pytest.mark.parametrize("only", ["", "only (prompt > 0) "], ids=["vllm-default", "iteration-body"])
def test_an_admission_whose_growth_preempts_ends_the_admissions(tmp_path, only):
    # `while (running.preempted == 0)` is read before every admission, under vLLM's default schedule
    # (no IR body) as under a body that writes it. kv 8 tokens in blocks of 2 (4 blocks), tokens cap 4,
    # chunks of 3, holds of kv (2) that grow: A (3, 4) and B (3, 4) at 0.
    # 0: A admitted (1 block), prefills 3 (2 blocks); B admitted (1 block), prefills 1 | 1: A decodes,
    #    B prefills 2 (2 blocks: 4 used) | 2: A needs a 3rd block: the victim is B (admitted last), not
    #    yet served; no admission after it | 3: A decodes (its last token); B admitted again (1 block)
    #    grows to 2 and preempts itself: admissions end (before, B was admitted again at once, for
    #    ever at that instant) | 4: A gone, B admitted, prefills 3 | 5, 6, 7: B decodes.
    sched = (f"advance running {only}each at most (3); admit waiting {only}while (running.preempted == 0) "
             "each at most (3) taking reqs (1), kv (2);")
    text = engine_program(sched, kv="kv cap 8;", pool="block 2; evict lru; preempt lifo;", tokens=4)
    run = run_engine(tmp_path, text, [(0, 3, 4), (0, 3, 4)])
    recs = [(int(r.start), int(r.tokens), r.preempted, r.admitted) for r in run.records]
    assert recs == [(0, 4, 0, 2), (1, 3, 0, 0), (2, 1, 1, 0), (3, 1, 1, 1), (4, 3, 0, 1), (5, 1, 0, 0),
                    (6, 1, 0, 0), (7, 1, 0, 0)]
    assert steps(run) == {0: (0, 3, 0), 1: (1, 7, 2)}
    assert run.report["sessions"]["stuck"] == 1  # B's second preemption caught it at 0, short of 3


def test_zero_cost_iteration_with_tokens_is_an_error(tmp_path):
    from serq.errors import SerqError
    text = engine_program(VLLM).replace("execute (1);", "execute (0);")
    with pytest.raises(SerqError) as info:
        run_engine(tmp_path, text, [(0, 4, 2)])
    assert "lasts a positive time" in info.value.message and info.value.kind == "run"
    assert info.value.span is not None and info.value.span.file.endswith("p.sq")


def test_growth_that_waits_under_preempt_none_and_an_idle_engine(tmp_path):
    # kv 10 tokens (block 1), no preemption: A (4, 5) and B (4, 5) at 0. 0: A 4, B 4 (8 used) |
    # 1: both grow (10) | 2: neither can grow: nothing is scheduled, and nothing else will happen.
    text = engine_program(VLLM, kv="kv cap 10;", pool="block 1; evict lru;")
    run = run_engine(tmp_path, text, [(0, 4, 5), (0, 4, 5)])
    rep = run.report
    assert [int(r.tokens) for r in run.records] == [8, 2]
    kv = next(p for p in rep["pools"] if p["name"] == "kv")
    assert kv["growing_at_end"] == 2 and kv["growing_stalled"] is True
    st = next(s for s in rep["stages"] if s["name"] == "llm")
    assert st["idle_at_end"] is True and st["residents_at_end"] == 2
    assert any(n.startswith("idle: engine llm") for n in rep["notes"])
    assert rep["stopped"] == "idle" and rep["sessions"]["live"] == 2


def test_claims_over_iterations(tmp_path):
    text = engine_program(VLLM).replace(
        "  workload {",
        "  claim small: every iteration of llm (tokens <= 6);\n"
        "  claim full: some iteration of llm (tokens == 8);\n"
        "  claim never: some iteration of llm (tokens > 8);\n"
        "  claim balance: every iteration of llm (demand >= tokens && served + tokens <= 17 && arrived >= 1);\n"
        "  workload {")
    run = run_engine(tmp_path, text, [(0, 10, 3), (1, 4, 2)])  # tokens 8, 6, 2, 1 (the baseline)
    claims = {c["name"]: c for c in run.report["claims"]}
    assert claims["small"]["result"] == "fails" and (claims["small"]["time"], claims["small"]["iteration"]) == (0, 0)
    assert claims["full"]["result"] == "witnessed" and claims["full"]["iteration"] == 0
    assert claims["never"]["result"] == "not witnessed"
    assert claims["balance"]["result"] == "holds"
    # a session outside a claim's given puts the claim out of the run's scope
    scoped = text.replace("  claim small:", "  claim scoped given (serial < 1): every iteration of llm (tokens <= 6);\n"
                                            "  claim small:")
    claims = {c["name"]: c for c in run_engine(tmp_path, scoped, [(0, 10, 3), (1, 4, 2)]).report["claims"]}
    assert claims["scoped"]["result"] == "out of scope" and claims["scoped"]["session"] == 1


def test_registers_branch_and_set(tmp_path):
    # a register counts the iterations: even ones serve prefills first, odd ones decodes first.
    # A (3, 4) at 0, B (10, 2) at 1, tokens cap 4.
    # k=0: A 3 (samples) | k=1: decodes first: A 1; B admitted: 3 | k=2: prefills first: B 4, no budget
    # for A | k=3: A 1, B 3 (samples) | k=4: A 1 (done), B 1 (done)
    schedule = ("branch (k - 2 * floor(k / 2) == 0) { advance running only (!decoding); advance running; } "
                "else { advance running only (decoding); advance running; } "
                f"admit waiting while (running.preempted == 0) {TAKING}; set k = k + 1;")
    text = engine_program(schedule, extra="state k = 0;", tokens=4).replace(
        "  workload {", "  gauge iterations = llm.k;\n  workload {")
    run = run_engine(tmp_path, text, [(0, 3, 4), (1, 10, 2)])
    assert steps(run) == {0: (0, 4, 0), 1: (3, 4, 0)}
    assert [int(r.tokens) for r in run.records] == [3, 4, 4, 4, 2]
    assert run.report["gauges"]["iterations"]["max"] == 5
    # vLLM's schedule serves in admission order: A's decodes never wait, B gets 3, 3, 3, 1
    assert steps(run_engine(tmp_path, engine_program(VLLM, tokens=4), [(0, 3, 4), (1, 10, 2)])) == \
        {0: (0, 3, 0), 1: (4, 5, 0)}


def test_a_try_that_does_nothing_undoes_its_sets_and_waits_for_an_event(tmp_path):
    # odd iterations serve decodes only: at k=1 A is still prefilling, so the try schedules nothing;
    # its set is undone and the engine waits for an event, which never comes: it ends idle.
    schedule = ("branch (k - 2 * floor(k / 2) == 1) { advance running only (decoding); } "
                f"else {{ advance running; admit waiting while (running.preempted == 0) {TAKING}; }} set k = k + 1;")
    text = engine_program(schedule, extra="state k = 0;").replace(
        "  workload {", "  gauge iterations = llm.k;\n  workload {")
    run = run_engine(tmp_path, text, [(0, 10, 3)])
    rep = run.report
    assert [int(r.tokens) for r in run.records] == [8]
    assert rep["gauges"]["iterations"]["max"] == 1 and rep["stopped"] == "idle"
    assert any(n.startswith("idle: engine llm") for n in rep["notes"])


# ------------------------------------------------------------------ the batch's values (issue 12, point 9)
# A fitted cost model over every value of the batch, with blocks of 16 and tokens cap 48:
#   cost = 3 + tokens + 2 * prefilled + decoding + kv_decode + 2 * attention
# kv_decode: Σ over the decodes served from position p of ceil((p + 1) / 16) * 16;
# attention: Σ over the prefill chunks of n tokens from position p of n * (p + n / 2).
FITTED = "execute (3 + batch.tokens + 2 * batch.prefilled + batch.decoding + batch.kv_decode + 2 * batch.attention);"


def fitted_engine(schedule: str = VLLM, extra: str = "") -> str:
    return engine_program(schedule, pool="block 16; evict lru; preempt lifo;", tokens=48,
                          extra=extra).replace("execute (1);", FITTED)


def batch_values(run) -> list[tuple]:
    return [(r.start, r.tokens, r.prefilled, r.decoders, r.kv_decode, r.attention) for r in run.records]


def test_batch_values_a_prompt_prefilled_alone(tmp_path):
    # the number: a 40-token prompt prefilled alone from position 0 costs
    # 3 + 40 + 2*40 + 0 + 0 + 2 * (40 * 20) = 1723; its one output token is the prefill's sample
    run = run_engine(tmp_path, fitted_engine(), [(0, 40, 1)])
    assert batch_values(run) == [(0.0, 40.0, 40.0, 0.0, 0.0, 800.0)]
    assert run.turns[(0, 0)].ttft == 1723.0 and run.turns[(0, 0)].answer == 1723.0


def test_batch_kv_decode_is_the_decodes_allocation_in_whole_blocks(tmp_path):
    # A (32 tokens, 3 out) and B (15, 3) at 0.
    # 0: A 32, B 15: attention 32*16 + 15*7.5 = 624.5; 3 + 47 + 94 + 2*624.5 = 1393
    # 1393: both decode, A from 32 (33 tokens: 3 blocks, 48), B from 15 (16: 1 block, 16):
    #       kv_decode 64 (the positions sum to 47); 3 + 2 + 2 + 64 = 71
    # 1464: A from 33 (48), B from 16 (17 tokens: a second block, 32): kv_decode 80; 3 + 2 + 2 + 80 = 87
    # the register reads running.kv_decode as each iteration is planned: the residents' positions in
    # whole blocks, before the iteration's tokens (32 + 16 = 48 at 1393, 48 + 16 = 64 at 1464)
    schedule = f"set seen = max(seen, running.kv_decode); {VLLM}"
    text = fitted_engine(schedule, extra="state seen = 0;").replace(
        "  workload {", "  gauge seen = llm.seen;\n  workload {")
    run = run_engine(tmp_path, text, [(0, 32, 3), (0, 15, 3)])
    assert batch_values(run) == [(0.0, 47.0, 47.0, 0.0, 0.0, 624.5), (1393.0, 2.0, 0.0, 2.0, 64.0, 0.0),
                                 (1464.0, 2.0, 0.0, 2.0, 80.0, 0.0)]
    assert {k: o.answer for k, o in run.turns.items()} == {(0, 0): 1551.0, (1, 0): 1551.0}
    assert run.report["gauges"]["seen"]["max"] == 64


def test_batch_attention_is_the_prefill_chunks_alone(tmp_path):
    # A (8, 3) and B (60, 1) at 0.
    # 0: A 8, B 40 of 60 (the budget left): attention 8*4 + 40*20 = 832; 3 + 48 + 96 + 2*832 = 1811
    # 1811: A decodes from 8 (9 tokens: one block, kv_decode 16, no attention); B's chunk of 20 from
    #       position 40: attention 20 * (40 + 10) = 1000; 3 + 21 + 40 + 1 + 16 + 2000 = 2081; B samples
    # 3892: A decodes from 9: 3 + 1 + 1 + 16 = 21
    run = run_engine(tmp_path, fitted_engine(), [(0, 8, 3), (0, 60, 1)])
    assert batch_values(run) == [(0.0, 48.0, 48.0, 0.0, 0.0, 832.0), (1811.0, 21.0, 20.0, 1.0, 16.0, 1000.0),
                                 (3892.0, 1.0, 0.0, 1.0, 16.0, 0.0)]
    assert {k: o.answer for k, o in run.turns.items()} == {(0, 0): 3913.0, (1, 0): 3892.0}


def test_batch_kv_decode_of_a_decode_without_a_growing_pool_is_zero(tmp_path):
    # a request whose decode grows no pool has no KV allocation: position 0, kv_decode 0
    request = """request (prompt, o) {
      prefill (prompt) growing kv;
      decode (o - 1);
    }"""
    text = engine_program(VLLM, pool="block 16; evict lru; preempt lifo;", tokens=48,
                          request=request).replace("execute (1);", FITTED)
    run = run_engine(tmp_path, text, [(0, 20, 2)])
    # 0: 3 + 20 + 40 + 2 * 20 * 10 = 463 | 463: the decode: 3 + 1 + 1 + 0 = 5
    assert batch_values(run) == [(0.0, 20.0, 20.0, 0.0, 0.0, 200.0), (463.0, 1.0, 0.0, 1.0, 0.0, 0.0)]


@pytest.mark.parametrize("path", [p for p in SCENARIOS if p.stem in ("f_preempt", "f2_mixed", "cache_20261130_004",
                                                                      "rand_20261129_0007")],
                         ids=lambda p: p.stem)
def test_what_the_client_sees(path: Path):
    # ttft: the first token's iteration's end less the turn's start; tpot: the answer less the first
    # token over the output tokens after the first (the resumed prefill's sample after a preemption
    # and the decode tokens), so (last - first) / (out - 1) on the step clock
    sc = load_scenario(path)
    run = run_scenario(sc)
    ttft, tpot = [], []
    for (s, k), e in sorted(sc.expected.items()):
        arrive, turns = sc.sessions[s]
        start = arrive if k == 0 else sc.expected[(s, k - 1)].last + 1 + turns[k].think
        o = run.turns[(s, k)]
        assert (o.ttft, o.answer) == (e.first + 1, e.last + 1)
        ttft.append(e.first + 1 - start)
        if turns[k].out > 1:
            tpot.append((e.last - e.first) / (turns[k].out - 1))
    client = run.report["client"]
    assert client["ttft"]["count"] == len(ttft) and client["ttft"]["mean"] == pytest.approx(sum(ttft) / len(ttft))
    assert client["tpot"]["count"] == len(tpot) and client["tpot"]["mean"] == pytest.approx(sum(tpot) / len(tpot))
    assert any(e.preemptions for e in sc.expected.values()) or path.stem != "f_preempt"


def test_one_request_on_the_step_clock():
    rep = run_example("oracle/vllm_request.sq")
    c = rep["client"]
    # 100 tokens under a budget of 64: 64 | 36 (samples: ends at 2) | 4 decodes: answered at 6
    assert (c["ttft"]["mean"], c["tpot"]["mean"], c["response"]["mean"]) == (2, 1, 6)
    assert rep["claims"][0]["result"] == "holds"


def test_serq_oracle_command(tmp_path):
    from click.testing import CliRunner

    from serq.cli import main
    every = sorted(ORACLE.glob("*/*.json"))  # as a user globs them: the sets' SUMMARY.json included
    ok = CliRunner().invoke(main, ["oracle", "-q", *map(str, every)], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    assert ok.output.strip().splitlines()[-1] == \
        "103 of 103 scenario(s) agree; 779 of 779 requests; 2 summary file(s) skipped"
    data = json.loads((ORACLE / "vllm-v1" / "b_chunked.json").read_text())
    data["output"]["results"]["r1"]["last_token_step"] += 1  # not what vLLM did
    data["output"]["trace"] = [{"step": k, "scheduled": {"r0": 4}} for k in range(2)]
    bad = tmp_path / "b_chunked.json"
    bad.write_text(json.dumps(data))
    out = CliRunner().invoke(main, ["oracle", str(bad)], catch_exceptions=False)
    assert out.exit_code == 1
    assert "DIFFERS" in out.output and "<- differs" in out.output
    assert "first differing step: 0: vLLM scheduled {r0: 4}, serQ {r0: 64}" in out.output, out.output
    assert out.output.strip().splitlines()[-1] == "0 of 1 scenario(s) agree; 1 of 2 requests"


@pytest.mark.parametrize("field, shown", [("free_blocks", "free blocks after scheduling: vLLM 500, serQ 539"),
                                           ("evicted", "blocks evicted: vLLM 3, serQ 0")])
def test_serq_oracle_compares_the_pool_step_by_step(tmp_path, field, shown):
    from click.testing import CliRunner

    from serq.cli import main
    data = json.loads((ORACLE / "vllm-v1-cache" / "cache_20261130_001.json").read_text())
    step = next(t for t in data["output"]["trace"] if t["scheduled"])
    step[field] = 500 if field == "free_blocks" else 3  # not what vLLM's pool had
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps(data))
    out = CliRunner().invoke(main, ["oracle", str(bad)], catch_exceptions=False)
    assert out.exit_code == 1 and "DIFFERS" in out.output
    assert f"first differing step: {step['step']}: {shown}" in out.output, out.output


def test_serq_oracle_json():
    from click.testing import CliRunner

    from serq.cli import main
    path = ORACLE / "vllm-v1-random-2" / "rand_20261201_0028.json"
    out = CliRunner().invoke(main, ["oracle", "--json", str(path)], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.output.splitlines()]
    assert lines[-1] == {"summary": {"scenarios": 1, "agree": 1, "requests": 2, "requests_agree": 2, "skipped": 0}}
    scenario = lines[0]
    assert scenario["agrees"] is True and scenario["first_differing_step"] is None
    r1 = next(r for r in scenario["requests"] if r["id"] == "r1")
    assert r1["vllm"] == {"first_token_step": 20, "last_token_step": None, "preemptions": 1,
                          "num_cached_tokens": None, "ended": "waiting at the step cap"}
    assert r1["serq"] == {"first_token_step": 20, "last_token_step": None, "preemptions": 1,
                          "num_cached_tokens": None, "ended": "waiting"}


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["output"]["results"]["r0"].update(first_token_step=None),
     "results.r0: a request vLLM did not finish in a file without `did_not_finish: true`"),
    (lambda d: d["output"]["results"]["r0"].update(preemptions="2"),
     "not an oracle scenario: output.results.r0.preemptions: Input should be a valid integer"),
    (lambda d: d["scenario"]["config"].pop("block_size"),
     "not an oracle scenario: scenario.config.block_size: Field required"),
    (lambda d: d["scenario"]["requests"][0].update(prompt=-1),
     "not an oracle scenario: scenario.requests[0].prompt: Input should be greater than or equal to 1"),
    (lambda d: d.update(scenario=[]), "not an oracle scenario: scenario: should be an object"),
    (lambda d: d["scenario"].update(sessions=[{"id": "s0", "arrive": 0, "turns": [{"new": 1, "out": 1}]}]),
     "not an oracle scenario: scenario: Value error, a scenario gives either `requests` or `sessions`"),
])
def test_serq_oracle_refuses_a_file_that_is_no_scenario(tmp_path, edit, message):
    from click.testing import CliRunner

    from serq.cli import main
    data = json.loads((ORACLE / "vllm-v1" / "b_chunked.json").read_text())
    edit(data)
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps(data))
    out = CliRunner().invoke(main, ["oracle", str(bad)], catch_exceptions=False)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert out.output.strip() == f"error: {bad}: {message}", out.output


@pytest.mark.parametrize("text, message", [
    (b"{", "1:2: not JSON: Expecting property name enclosed in double quotes"),
    (b"\xff\xfe{}", "s.json:1:1: error: the scenario file is not UTF-8: byte 0xff at byte offset 0"),
    (b"[" * 100_000 + b"]" * 100_000, "not a JSON file serQ reads (RecursionError"),
])
def test_serq_oracle_refuses_bytes_that_are_no_json(tmp_path, text, message):
    from click.testing import CliRunner

    from serq.cli import main
    bad = tmp_path / "s.json"
    bad.write_bytes(text)
    out = CliRunner().invoke(main, ["oracle", str(bad)], catch_exceptions=False)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert message in out.output, out.output


def test_rows_for_the_lean_model():
    run = run_scenario(ORACLE / "vllm-v1" / "b_chunked.json")
    assert run.outcome_rows() == ((0, 0, 3, 6, 0, 0), (1, 0, 5, 8, 0, 0))
    rows = run.record_rows()
    assert len(rows) == len(run.records) and all(len(r) == 10 for r in rows)
    assert rows[0][0] == 0 and [r[8] for r in rows] == sorted(r[8] for r in rows)  # served grows
    assert all(r[7] >= r[1] for r in rows)  # demand covers what was scheduled


MULTI_TURN = """fn main() {
  device gpu { kv cap 1000; }
  engine llm on gpu {
    reqs cap 4;
    tokens cap 5;
    request (prompt, o) {
      prefill (prompt) growing kv;
      decode (o - 1) growing kv;
    }
    schedule { advance running; admit waiting while (running.preempted == 0) taking reqs (1), kv (prompt); }
    execute (1);
  }
  pool kv on gpu { block 1; evict lru; preempt lifo; }
  pool reqs on llm { queue fifo; }
  stage thinking : delay;
  workload {
    trace "t.csv" ordered;
    hidden out;
    session { turn; while (more) { run thinking (cost(thinking, think)); turn; } }
  }
  server { set prompt = new; llm (prompt, out); }
}
"""


@pytest.mark.parametrize("think", [0, 2])
def test_turns_created_at_one_instant_queue_in_session_order(tmp_path, think):
    # Trace session 1 arrives at 0 (4 tokens, 2 out), session 0 at 1 (4 tokens, 1 out); budget 5.
    # 0: s1 prefills 4 (first token) | 1: s1 decodes its last, s0 is admitted and prefills 4, its only
    # token: both turns end in iteration 1, s1 admitted first. Their next turns (5 tokens, 1 out) join
    # the queue at 2 + think, s0's first (session order, as vLLM's driver creates them): it takes the
    # whole budget then, s1's the step after.
    from serq.link import link_file
    from serq.sim.oracle_run import run_program
    (tmp_path / "t.csv").write_text("session,arrive,new,out,think,forced\n"
                                    f"0,1,4,1,{think},0\n0,1,5,1,0,0\n1,0,4,2,{think},0\n1,0,5,1,0,0\n")
    (tmp_path / "p.sq").write_text(MULTI_TURN)
    run = run_program(link_file(tmp_path / "p.sq"), tmp_path)
    got = {k: (int(o.first), int(o.last)) for k, o in sorted(run.turns.items())}
    t = 2 + think
    assert got == {(0, 0): (1, 1), (1, 0): (0, 1), (0, 1): (t, t), (1, 1): (t + 1, t + 1)}


def _paths(node, prefix=()):
    """Every JSON path of a document, leaves and containers."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True)
                           | st.text(max_size=5), lambda kids: st.lists(kids, max_size=3)
                           | st.dictionaries(st.text(max_size=5), kids, max_size=3), max_leaves=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_scenario_file_is_read_or_refused_never_crashes(tmp_path, data):
    # any field of a real scenario replaced by any JSON value (or removed): the loader returns a
    # scenario or refuses the file with a SerqError, and nothing else
    from serq.errors import SerqError
    doc = json.loads((ORACLE / "vllm-v1-cache" / "cache_20261130_001.json").read_text())
    paths = sorted(_paths(doc), key=repr)
    path = data.draw(st.sampled_from(paths))
    value = data.draw(JSON_VALUES)
    if not path:
        doc = value
    else:
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    f = tmp_path / "m.json"
    f.write_text(json.dumps(doc))
    try:
        load_scenario(f)
    except SerqError as e:
        assert e.kind == "usage" and str(f) in e.message
