"""Claims end to end: the paper programs' claims hold on the interpreter's path, their Lean
statements are generated from the IR and current, every one has a proof of that statement, and
an edited claim is named when its proof goes stale."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from serq.errors import SerqError
from serq.leangen.claims import KernelClaimsModule, claims_module, paper_programs, stale_claims
from serq.leangen.lean_source import scan_source

PAPERS = REPO / "examples" / "papers"
SERQ_LEAN = REPO / "lean" / "Serq.lean"


def _run_json(path: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(path), "--json", *args],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return {c["name"]: c for c in json.loads(out.stdout)["claims"]}


def test_there_are_paper_programs_and_each_claims_something():
    programs = paper_programs(REPO)
    assert {p.name for p in programs} == {"sarathi.sq", "li_dai_peng.sq", "smith_spt.sq", "fastertransformer.sq",
                                          "rad.sq", "bari_rate.sq", "dai_backlog.sq", "dai_backlog_decode.sq",
                                          "dai_backlog_many.sq", "dai_backlog_chunked.sq", "dai_backlog_phased.sq",
                                          "dai_backlog_budget.sq", "svf.sq"}
    for p in programs:
        assert claims_module(p).statements, p


@pytest.mark.parametrize("rate", ["0.05", "5"], ids=["light", "saturated"])
def test_sarathi_claims_hold_on_the_simulated_path(rate):
    claims = _run_json(PAPERS / "sarathi.sq", "--arrivals", "300", "--seed", "3", "--", f"rate={rate}")
    assert {n: c["result"] for n, c in claims.items()} == {
        "stall_free": "holds", "bounded": "holds", "token_rate": "holds"}


def test_the_token_rate_fails_when_an_iteration_is_shorter_than_a_step(tmp_path):
    # the theorem's hypothesis is the step clock (T = 1). With `execute (0.5)` and a saturated queue
    # (5 sessions a step), iterations 0 and 1 are full (256 tokens each) and end by time 1: the
    # iteration that starts at 1 has served 512 > 256 * 1
    half = tmp_path / "sarathi_half_step.sq"
    half.write_text((PAPERS / "sarathi.sq").read_text().replace("execute (1);", "execute (0.5);"))
    claims = _run_json(half, "--arrivals", "300", "--seed", "3", "--", "rate=5")
    failed = claims["token_rate"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 1.0, 2)
    assert claims["bounded"]["result"] == "holds"


SARATHI_RATE_CLAIM = "claim token_rate: every iteration of llm (served <= B * now);"


@pytest.mark.parametrize("cost, period, rate, result", [
    # affine: an iteration of x tokens lasts 4 + x, a full one T = 4 + B (Serq.RateCost.affine_rate)
    ("4 + batch.tokens", "(4 + B)", "0.05", "holds"),
    ("4 + batch.tokens", "(4 + B)", "5", "holds"),
    # tiled: 2 per started tile of 128 plus 1 per token, the budget two tiles (tiled_rate, m = 2)
    ("2 * ceil(batch.tokens / 128) + batch.tokens", "(2 * 2 + B)", "5", "holds"),
    # a period longer than a full iteration's time: the saturated engine serves faster than claimed
    ("4 + batch.tokens", "(5 + B)", "5", "fails"),
], ids=["affine-light", "affine-saturated", "tiled-saturated", "affine-period-too-long"])
def test_the_token_rate_with_an_iteration_cost_on_the_simulated_path(tmp_path, cost, period, rate, result):
    """Issue 14, result 1 with the iteration's cost: `served * T <= B * now` for T the time of a full
    iteration, which Serq.RateCost proves for every run whose iterations are within the budget and
    last their cost; the interpreter reports it on Sarathi's engine."""
    source = (PAPERS / "sarathi.sq").read_text()
    assert SARATHI_RATE_CLAIM in source and "execute (1);" in source
    program = tmp_path / "sarathi_cost.sq"
    program.write_text(source.replace("execute (1);", f"execute ({cost});").replace(
        SARATHI_RATE_CLAIM, f"claim token_rate: every iteration of llm (served * {period} <= B * now);"))
    claims = _run_json(program, "--arrivals", "300", "--seed", "3", "--", f"rate={rate}")
    assert claims["token_rate"]["result"] == result
    assert claims["bounded"]["result"] == "holds"


def test_li_dai_peng_claims_on_the_simulated_path():
    # four requests of 8 + 4 tokens at 0, budget 16, cap 2: iteration 0 prefills two (16 tokens);
    # iteration 1 (time 1) decodes them (2 tokens) while 4 * 11 - 16 = 28 arrived tokens wait
    claims = _run_json(PAPERS / "li_dai_peng.sq", "--seed", "1")
    assert claims["work_conserving"]["result"] == "holds"
    witness = claims["capped_batch_idles"]
    assert (witness["result"], witness["time"], witness["iteration"]) == ("witnessed", 1.0, 1)


@pytest.mark.parametrize("seed", ["1", "2"])
def test_smiths_bound_holds_on_the_simulated_path(seed):
    assert _run_json(PAPERS / "smith_spt.sq", "--seed", seed)["spt_bound"]["result"] == "holds"


def test_the_phase_separated_program_is_starved_at_its_first_idle_iteration():
    # FasterTransformer: iteration 0 prefills two requests (16 tokens), both finish their prefill;
    # at iteration 1 two decode, so only decodes are served (2 tokens) although the two prefills it
    # admits could take 16 more: demand 18 >= 16 and tokens 2 < 16 (the Lean witness is this run)
    claims = _run_json(PAPERS / "fastertransformer.sq", "--seed", "1")
    witness = claims["starved"]
    assert (witness["result"], witness["time"], witness["iteration"]) == ("witnessed", 1.0, 1)


def test_the_phase_separated_run_computed_by_hand():
    # iterations 1-3 serve the first two requests' three decodes alone (they answer at 4); the two
    # admitted at 1 prefill together at 4 (first tokens at 5) and decode at 5-7 (answered at 8)
    out = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(PAPERS / "fastertransformer.sq"), "--json"],
                         capture_output=True, text=True, cwd=REPO)
    client = json.loads(out.stdout)["client"]
    assert (client["ttft"]["min"], client["ttft"]["max"], client["ttft"]["mean"]) == (1.0, 5.0, 3.0)
    assert (client["response"]["min"], client["response"]["max"], client["response"]["mean"]) == (4.0, 8.0, 6.0)


def test_work_conservation_fails_on_the_phase_separated_variant(tmp_path):
    # the deliberately broken variant of li_dai_peng.sq: its work-conserving claim on the
    # FasterTransformer program fails at the starved iteration above
    claim = next(line for line in (PAPERS / "li_dai_peng.sq").read_text().splitlines()
                 if line.strip().startswith("claim work_conserving:"))
    text = (PAPERS / "fastertransformer.sq").read_text().rstrip()
    assert text.endswith("}")
    broken = tmp_path / "fastertransformer_work_conserving.sq"
    broken.write_text(text[:-1] + claim + "\n}\n")
    claims = _run_json(broken, "--seed", "1")
    failed = claims["work_conserving"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 1.0, 1)
    assert claims["starved"]["result"] == "witnessed"


@pytest.mark.parametrize("sessions", ["1", "6", "40"])
def test_rads_tiling_holds_on_the_simulated_path(sessions):
    # every iteration's prefill tokens are whole tiles (T = 4), with decodes mixed in
    claims = _run_json(PAPERS / "rad.sq", "--", f"sessions={sessions}")
    assert claims["tiled"]["result"] == "holds"


def test_rads_tiling_fails_without_the_granule(tmp_path):
    # the deliberately broken variant: no granule. Iteration 0 admits two prefills of one and two tiles
    # (4 + 4 of the budget 8); at 1 the first decodes (1) and the budget left, 7, is cut by the chunk to
    # 4 for the second and to the 3 left for the third: 7 prefill tokens, no whole tiles
    untiled = tmp_path / "rad_untiled.sq"
    text = (PAPERS / "rad.sq").read_text()
    assert "    granule T;\n" in text
    untiled.write_text(text.replace("    granule T;\n", ""))
    failed = _run_json(untiled)["tiled"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 1.0, 1)


def test_rads_tiling_holds_with_a_chunk_that_is_not_the_tile(tmp_path):
    # the granule alone makes the chunks whole tiles: a chunk of 5 is cut down to 4
    wide = tmp_path / "rad_wide_chunk.sq"
    wide.write_text((PAPERS / "rad.sq").read_text().replace("each at most (T)", "each at most (T + 1)"))
    assert _run_json(wide)["tiled"]["result"] == "holds"


def test_rads_claim_is_stated_about_the_kernel_run():
    module = claims_module(PAPERS / "rad.sq")
    st = {s.claim: s for s in module.statements}
    assert st["tiled"].body == ("EveryIterationOfRun program stage fuel (fun r => "
                                "(((r.prefilled : Int) % (4 : Int)) == (0 : Int)))")
    assert "engines := [⟨(.num 8), (.num 4), (.num 1), [], none, none, true, (.num 4)⟩]" in module.text()


@pytest.mark.parametrize("sessions", ["1", "6", "40"])
def test_the_tiled_token_rate_holds_on_the_simulated_path(sessions):
    # served * 262 <= 256 * now at every iteration: budget 256 (two tiles of 128), execute 3 a tile + 1 a token
    assert _run_json(PAPERS / "bari_rate.sq", "--", f"sessions={sessions}")["token_rate"]["result"] == "holds"


def test_the_tiled_token_rate_fails_with_a_budget_that_is_not_whole_tiles(tmp_path):
    # the broken variant: a budget of 300 tokens (not whole tiles of 128), Tfull = 3 * ceil(300 / 128) + 300
    # = 309, one request at a time prompting 256 tokens. Iteration 0 (time 0) prefills 256 tokens and lasts
    # 3 * 2 + 256 = 262; iteration 1 starts at 262 with 256 served: 256 * 309 = 79 104 > 300 * 262 = 78 600
    text = (PAPERS / "bari_rate.sq").read_text()
    edits = [("let B = m * T; ", "let B = 300;   "), ("let Tfull = a * m + b * B; ", "let Tfull = a * 3 + b * B; "),
             ("reqs cap 4;", "reqs cap 1;"), ("set new = 100 + 150 * (serial % 3);", "set new = 256;")]
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    broken = tmp_path / "bari_untiled_budget.sq"
    broken.write_text(text)
    failed = _run_json(broken)["token_rate"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 262.0, 1)


def test_the_tiled_token_rate_is_stated_about_the_kernel_run():
    # the engine model refuses the program (its engine is no vLLM settings), so the claim is the kernel's,
    # about the program's own run; the cost is lowered as runProgram_tiled_served_rate's hypothesis reads it
    module = claims_module(PAPERS / "bari_rate.sq")
    assert isinstance(module, KernelClaimsModule)
    st = {s.claim: s for s in module.statements}
    assert st["token_rate"].body == ("EveryIterationOfRun program stage fuel (fun r => "
                                     "(decide (((r.served : Int) * (262 : Int)) ≤ ((256 : Int) * (r.start : Int)))))")
    assert ("engines := [⟨(.num 256), (.num 0), (.bin .add (.bin .mul (.num 3) (.floorDiv (.bin .add (.stageVar 0) "
            "(.num 127)) 128)) (.bin .mul (.num 1) (.stageVar 0))), [], none, none, true, (.num 0)⟩]") in module.text()
    assert "engine `llm` is not expressible as vLLM settings" in module.text()


# --- dai_backlog.sq: the pathwise bounded backlog (Dai et al. 2025, Th. 2(b); Serq.backlog_bounded) ---

DAI = PAPERS / "dai_backlog.sq"


@pytest.mark.parametrize("sessions", ["1", "7", "60"])
def test_dai_backlog_holds_on_the_simulated_path(sessions):
    # a 32-token prompt every 2 steps, budget 16: each request is prefilled in the two iterations after
    # its arrival (16 + 16 tokens; its one output token is the prefill's), so it is answered 2 after it
    # arrived and the next arrival finds the engine empty: arrived * 32 = served + 32 at each arrival
    _holds_on_the_simulated_path(DAI, sessions, ["bounded_backlog"], 2.0)


def _variant(program: Path, tmp_path: Path, old: str, new: str, *more: tuple[str, str]) -> Path:
    """`program` with `old` replaced by `new`, then each further (old, new) pair of `more` in turn (each
    `old` must be in the text it is replaced in), written under `tmp_path`."""
    text = program.read_text()
    for was, now in ((old, new), *more):
        assert was in text
        text = text.replace(was, now)
    path = tmp_path / f"{program.stem}_variant.sq"
    path.write_text(text)
    return path


def _holds_on_the_simulated_path(program: Path, sessions: str, claims: list[str], response: float,
                                 slowest: float | None = None) -> None:
    """`serq run program --arrivals sessions`: every claim named holds, and every session is answered
    `response` after it arrived (with `slowest`, between `response` and `slowest`, both met)."""
    out = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(program), "--arrivals", sessions, "--json"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [(c["name"], c["result"]) for c in report["claims"]] == [(name, "holds") for name in claims]
    got = report["client"]["response"]
    assert (got["count"], got["min"], got["max"]) == (int(sessions), response, response if slowest is None else slowest)


def test_dai_backlog_fails_when_the_work_per_gap_exceeds_the_budget(tmp_path):
    # the broken variant: a gap of 1 (32 > 16 * 1). Session 0 arrives at 1, iteration 0 (time 1) serves
    # 16 of its 32; at time 2 session 1 arrives: arrived * 32 = 64 > served + 32 = 16 + 32
    failed = _run_json(_variant(DAI, tmp_path, "let g = 2;", "let g = 1;"), "--arrivals", "5")["bounded_backlog"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 2.0, 1)


def test_dai_backlog_fails_with_a_prompt_longer_than_the_budget_per_gap(tmp_path):
    # a prompt of 33 (> 16 * 2): iterations 0 and 1 (times 2, 3) serve 16 + 16, leaving 1 token; at time 4
    # session 1 arrives: arrived * 33 = 66 > served + 33 = 32 + 33
    failed = _run_json(_variant(DAI, tmp_path, "let W = 32;", "let W = 33;"), "--arrivals", "5")["bounded_backlog"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 4.0, 2)


def test_dai_backlog_holds_with_the_prefix_cache_on(tmp_path):
    # Serq.backlog_bounded allows a prefix cache: each session has one turn, so the cache holds only
    # earlier sessions' prefixes and nothing is reused; the path is the one without the cache
    out = _run_json(_variant(DAI, tmp_path, "let caching = 0;", "let caching = 1;"), "--arrivals", "40")
    assert out["bounded_backlog"]["result"] == "holds"


def test_dai_backlog_family_is_the_constant_renewal():
    # a constant `renewal(g)` is a family whose k-th session (from 0) arrives at (k + 1) * g
    module = claims_module(DAI)
    assert module.index_param == "k"
    assert module.session_test == ("s.arrive == (k + 1) * 2 && singleTurn (fun t => t.think == 0 && t.new == 32 && "
                                   "t.out == 1 && t.forced == false) s")
    (st,) = module.statements
    assert st.body == ("EveryIteration engine family (fun r => (decide (((r.arrived : Int) * (32 : Int)) ≤ "
                       "((r.served : Int) + (32 : Int)))))")
    e = module.engine
    assert (e.budget, e.reqs_cap, e.kv_blocks, e.block_size, e.chunk, e.caching, e.phased) == (
        16, 4, 64, 16, 0, False, False)
    assert "theorem dai_bounded_backlog : Papers.Claims.DaiBacklog." + st.ident in (
        PAPERS / "ClaimsProved.lean").read_text()


# --- dai_backlog_decode.sq: the bounded backlog with decodes (Serq.backlog_decode_bounded) ---

DAI_DECODE = PAPERS / "dai_backlog_decode.sq"


@pytest.mark.parametrize("sessions", ["1", "7", "60"])
def test_dai_backlog_decode_holds_on_the_simulated_path(sessions):
    # a 32-token prompt with 3 output tokens every 4 steps, budget 16: each request is prefilled in the
    # two iterations after its arrival (16 + 16; the second samples its first token) and decodes in the
    # next two, so its last token is at 3 after its arrival (response 4) and the next arrival finds the
    # engine empty: arrived * 34 = served + 34 at each arrival
    _holds_on_the_simulated_path(DAI_DECODE, sessions, ["bounded_backlog"], 4.0)


def test_dai_backlog_decode_fails_when_the_life_exceeds_the_gap_though_the_work_fits(tmp_path):
    # the broken variant: a gap of 3. The work per gap fits (34 <= 16 * 3) but a life (2 prefill and 2
    # decode iterations) does not. Session 0 arrives at 3: iterations 0-3 (times 3-6) serve 16, 16, 1, 1;
    # at time 6 session 1 arrives while session 0 has a decode left: arrived * 34 = 68 > served + 34 =
    # 33 + 34
    failed = _run_json(_variant(DAI_DECODE, tmp_path, "let g = 4;", "let g = 3;"), "--arrivals", "5")
    assert (failed["bounded_backlog"]["result"], failed["bounded_backlog"]["time"],
            failed["bounded_backlog"]["iteration"]) == ("fails", 6.0, 3)


def test_dai_backlog_decode_fails_with_one_decode_too_many(tmp_path):
    # D = 4 (W = 35, a life of 2 + 3 = 5 > 4). Session 0 arrives at 4: iterations 0-3 (times 4-7) serve
    # 16, 16, 1, 1; at time 8 session 1 arrives with one decode of session 0 left: arrived * 35 = 70 >
    # served + 35 = 34 + 35
    failed = _run_json(_variant(DAI_DECODE, tmp_path, "let D = 3;", "let D = 4;"), "--arrivals", "5")
    assert (failed["bounded_backlog"]["result"], failed["bounded_backlog"]["time"],
            failed["bounded_backlog"]["iteration"]) == ("fails", 8.0, 4)


@pytest.mark.parametrize("old, new", [("let caching = 0;", "let caching = 1;"),
                                      ("let threshold_cap = 0;", "let threshold_cap = 8;")],
                         ids=["prefix-cache", "chunk-cap"])
def test_dai_backlog_decode_holds_with_a_cache_or_a_chunk_cap(tmp_path, old, new):
    # Serq.backlog_decode_bounded allows a prefix cache (one turn per session: nothing is reused) and any
    # chunk cap (lifted for a request alone, and one request is in flight)
    out = _run_json(_variant(DAI_DECODE, tmp_path, old, new), "--arrivals", "40")
    assert out["bounded_backlog"]["result"] == "holds"


def test_dai_backlog_decode_family_and_proof():
    module = claims_module(DAI_DECODE)
    assert module.session_test == ("s.arrive == (k + 1) * 4 && singleTurn (fun t => t.think == 0 && t.new == 32 && "
                                   "t.out == 3 && t.forced == false) s")
    (st,) = module.statements
    assert st.body == ("EveryIteration engine family (fun r => (decide (((r.arrived : Int) * (34 : Int)) ≤ "
                       "((r.served : Int) + (34 : Int)))))")
    e = module.engine
    assert (e.budget, e.reqs_cap, e.kv_blocks, e.block_size, e.chunk, e.caching, e.phased) == (
        16, 4, 64, 16, 0, False, False)
    assert "theorem dai_bounded_backlog_decode : Papers.Claims.DaiBacklogDecode." + st.ident in (
        PAPERS / "ClaimsProved.lean").read_text()


# --- dai_backlog_many.sq: the bounded backlog with K = 3 requests in flight (Serq.backlog_many) ---

DAI_MANY = PAPERS / "dai_backlog_many.sq"


@pytest.mark.parametrize("sessions", ["1", "7", "60"])
def test_dai_backlog_many_holds_on_the_simulated_path(sessions):
    # a 14-token prompt with 5 output tokens every 2 steps, budget 16: each prompt is prefilled whole in
    # its arrival's iteration beside at most two decodes, and its four decodes follow, so it is answered
    # 5 after it arrives, with up to three requests in flight: arrived * 18 <= served + 3 * 18
    _holds_on_the_simulated_path(DAI_MANY, sessions, ["bounded_backlog", "bounded_backlog_exact"], 5.0)


def test_dai_backlog_many_exact_constant_is_met(tmp_path):
    # the exact constant W + (D - g) + (D - 2g) = 18 + 3 + 1 = 22 is met with equality: sessions at 2, 4,
    # 6; iterations 0-3 (times 2-5) serve 14, 1, 1 + 14, 2 (served 32); at 6 session 2 arrives while
    # session 0 has 1 decode left and session 1 has 3: arrived * 18 = 54 = 32 + 22. One token less fails
    variant = _variant(DAI_MANY, tmp_path, "(arrived * W <= served + W + (D - g) + (D - 2 * g));",
                       "(arrived * W <= served + W + (D - g) + (D - 2 * g) - 1);")
    failed = _run_json(variant, "--arrivals", "20")["bounded_backlog_exact"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 6.0, 4)


def test_dai_backlog_many_fails_when_more_requests_are_in_flight(tmp_path):
    # a gap of 1: D = 5 > K * g = 3, and the arrivals (18 tokens a step) outrun the budget (16) and the
    # four request slots. By hand: iterations 0-3 (times 1-4) serve 14, 15, 16, 16 (served 61); at 5 the
    # slots are full (three decodes and a prefill's last token) and 4 tokens are served; 16, 16, 16 at
    # 6-8, and 4 at 9 (slots full again): served 117 before time 10, where arrived * 18 = 180 >
    # 117 + 54 (at time 9, 162 <= 113 + 54)
    claims = _run_json(_variant(DAI_MANY, tmp_path, "let g = 2;", "let g = 1;"), "--arrivals", "40")
    failed = claims["bounded_backlog"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 10.0, 9)
    # the exact claim, 18 + (5 - 1) + (5 - 2) = 25 with g = 1, fails first: served 14, 15, 16 at times 1-3,
    # and at 4 arrived * 18 = 72 > 45 + 25 (at 3, 54 = 29 + 25)
    exact = claims["bounded_backlog_exact"]
    assert (exact["result"], exact["time"], exact["iteration"]) == ("fails", 4.0, 3)


@pytest.mark.parametrize("name", ["dai_backlog_many.sq", "dai_backlog_chunked.sq", "dai_backlog_phased.sq"])
def test_dai_backlog_holds_with_the_prefix_cache_on(tmp_path, name):
    # Serq.backlog_many, Serq.backlog_chunk and Serq.backlog_phased allow a prefix cache (one turn per
    # session: an admission reuses nothing)
    claims = _run_json(_variant(PAPERS / name, tmp_path, "let caching = 0;", "let caching = 1;"), "--arrivals", "40")
    assert claims and all(c["result"] == "holds" for c in claims.values())


def test_dai_backlog_many_family_and_proof():
    module = claims_module(DAI_MANY)
    assert module.session_test == ("s.arrive == (k + 1) * 2 && singleTurn (fun t => t.think == 0 && t.new == 14 && "
                                   "t.out == 5 && t.forced == false) s")
    st, exact = module.statements
    assert st.body == ("EveryIteration engine family (fun r => (decide (((r.arrived : Int) * (18 : Int)) ≤ "
                       "((r.served : Int) + (54 : Int)))))")
    assert exact.body == ("EveryIteration engine family (fun r => (decide (((r.arrived : Int) * (18 : Int)) ≤ "
                          "((((r.served : Int) + (18 : Int)) + (3 : Int)) + (1 : Int)))))")
    proved = (PAPERS / "ClaimsProved.lean").read_text()
    assert "theorem dai_bounded_backlog_many : Papers.Claims.DaiBacklogMany." + st.ident in proved
    assert "theorem dai_bounded_backlog_many_exact : Papers.Claims.DaiBacklogMany." + exact.ident in proved


# --- dai_backlog_chunked.sq: the bounded backlog with prompts cut in chunks of 4 (Serq.backlog_chunk) ---

DAI_CHUNKED = PAPERS / "dai_backlog_chunked.sq"


@pytest.mark.parametrize("sessions, slowest", [("1", 5.0), ("7", 8.0), ("60", 8.0)])
def test_dai_backlog_chunked_holds_on_the_simulated_path(sessions, slowest):
    # a 14-token prompt with 5 output tokens every 2 steps, budget 16, chunk cap 4: a request alone takes
    # its whole prompt (the cap applies to more than one request) and is answered 5 after it arrives; beside
    # others its prompt is cut in 4 chunks (4 + 4 + 4 + 2) and its four decodes follow, answered 8 after
    # (n + D - 1 = 8 = K * g), with up to four requests in flight: arrived * 18 <= served + 4 * 18
    out = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(DAI_CHUNKED), "--arrivals", sessions,
                          "--json"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [(c["name"], c["result"]) for c in report["claims"]] == [
        ("bounded_backlog", "holds"), ("bounded_backlog_exact", "holds")]
    got = report["client"]["response"]
    assert (got["count"], got["min"], got["max"]) == (int(sessions), 5.0, slowest)


def test_dai_backlog_chunked_exact_constant_is_met(tmp_path):
    # the exact constant W + bound(2) + bound(4) + bound(6) = 18 + 10 + 4 + 2 = 34 is met with equality at
    # time 10 (iteration 8): one token less fails there
    variant = _variant(DAI_CHUNKED, tmp_path, "(n + D - 1 - 3 * g));", "(n + D - 1 - 3 * g) - 1);")
    claims = _run_json(variant, "--arrivals", "20")
    failed = claims["bounded_backlog_exact"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 10.0, 8)
    assert claims["bounded_backlog"]["result"] == "holds"


def test_dai_backlog_chunked_fails_when_more_requests_are_in_flight(tmp_path):
    # a gap of 1: the life n + D - 1 = 8 > K * g = 4 and the arrivals (18 tokens a step) outrun the budget
    # (16): the first claim fails at time 8 (iteration 7), the exact one at time 4 (iteration 3)
    claims = _run_json(_variant(DAI_CHUNKED, tmp_path, "let g = 2;", "let g = 1;"), "--arrivals", "40")
    assert [(c["result"], c["time"], c["iteration"]) for c in claims.values()] == [
        ("fails", 8.0, 7), ("fails", 4.0, 3)]


def test_dai_backlog_chunked_fails_when_a_prompt_takes_too_many_chunks(tmp_path):
    # a chunk cap of 3: a prompt takes n = 5 iterations beside others, a life of 9 > K * g = 8 (the
    # hypothesis n + D - 1 <= K * g; the budget still holds K chunks): requests pile up, the first claim
    # fails at time 44 (iteration 42), the exact one at time 10 (iteration 8)
    claims = _run_json(_variant(DAI_CHUNKED, tmp_path, "let C = 4; ", "let C = 3; "), "--arrivals", "40")
    assert [(c["result"], c["time"], c["iteration"]) for c in claims.values()] == [
        ("fails", 44.0, 42), ("fails", 10.0, 8)]


def _renewal_family(program: Path, gap: int, new: int, out: int, engine: tuple):
    """The claims module of `program`: its family the renewal with `gap`, one turn of `new` prompt and
    `out` output tokens; its engine (budget, slots, blocks, block size, chunk, caching, phased) `engine`."""
    module = claims_module(program)
    assert module.session_test == (f"s.arrive == (k + 1) * {gap} && singleTurn (fun t => t.think == 0 && "
                                   f"t.new == {new} && t.out == {out} && t.forced == false) s")
    e = module.engine
    assert (e.budget, e.reqs_cap, e.kv_blocks, e.block_size, e.chunk, e.caching, e.phased) == engine
    return module


def test_dai_backlog_chunked_family_and_proof():
    module = _renewal_family(DAI_CHUNKED, 2, 14, 5, (16, 4, 64, 16, 4, False, False))
    st, exact = module.statements
    assert st.body == ("EveryIteration engine family (fun r => (decide (((r.arrived : Int) * (18 : Int)) ≤ "
                       "((r.served : Int) + (72 : Int)))))")
    assert exact.body == ("EveryIteration engine family (fun r => (decide (((r.arrived : Int) * (18 : Int)) ≤ "
                          "(((((r.served : Int) + (18 : Int)) + (10 : Int)) + (4 : Int)) + (2 : Int)))))")
    proved = (PAPERS / "ClaimsProved.lean").read_text()
    assert "theorem dai_bounded_backlog_chunked : Papers.Claims.DaiBacklogChunked." + st.ident in proved
    assert "theorem dai_bounded_backlog_chunked_exact :\n    Papers.Claims.DaiBacklogChunked." + exact.ident in proved


# --- dai_backlog_budget.sq: the bounded backlog with prompts the budget cuts (Serq.backlog_budget) ---
# Issue 14, result 2, case (b). The theorem (lean/Serq/BacklogBudgetBound.lean) is one machine invariant
# (Serq.BacklogBudget.FinInv, BacklogBudgetFinal.lean) kept by every step: the arrivals (BacklogBudgetArrive,
# BacklogBudgetIdle), the work balance arrived * W = served + work left (BacklogBudgetBalance), the caps
# never binding (BacklogBudgetCaps) with at most K requests in flight, an iteration at every step with work
# (BacklogBudgetProgress), at most one prefill and at most M decodes per number of tokens left
# (BacklogBudgetBuckets), and an anchor: since the last iteration below the budget (after which only decodes
# are left, at most C tokens) the engine served the budget at every step. Some groundwork modules below
# (the records-level `conserve` in BacklogBudget, Resets, Later) prove a route the invariant made unneeded.

DAI_BUDGET = PAPERS / "dai_backlog_budget.sq"


@pytest.mark.parametrize("sessions", ["1", "7", "60"])
def test_dai_backlog_budget_holds_on_the_simulated_path(sessions):
    # a 20-token prompt and 3 output tokens every 2 steps under a budget of 16: every prompt is cut (16
    # tokens, then its last 4 beside the decode of the request before), then decodes twice: answered 4
    # after it arrives, two requests in flight
    _holds_on_the_simulated_path(DAI_BUDGET, sessions, ["bounded_backlog"], 4.0)


def test_dai_backlog_budget_cuts_every_prompt(tmp_path):
    # the budget is what splits the prompt: some iteration leaves demand unserved, the first at the first
    # arrival (time 2: demand 20, 16 tokens served)
    program = _variant(DAI_BUDGET, tmp_path, "  claim bounded_backlog:",
                       "  claim cut: some iteration of llm (demand > tokens);\n  claim bounded_backlog:")
    cut = _run_json(program, "--arrivals", "7")["cut"]
    assert (cut["result"], cut["time"], cut["iteration"]) == ("witnessed", 2.0, 0)


def test_dai_backlog_budget_constant_is_one_above_the_path(tmp_path):
    # C = M * (D * (D - 1) / 2) = 3 is not exact: the path's largest arrived * W - served is W + 2 = 24
    # (time 4: two arrived, one prompt served), so C - 1 holds and C - 2 fails there
    one_less = _variant(DAI_BUDGET, tmp_path, "(arrived * W <= served + W + C)", "(arrived * W <= served + W + C - 1)")
    assert _run_json(one_less, "--arrivals", "60")["bounded_backlog"]["result"] == "holds"
    two_less = _variant(DAI_BUDGET, tmp_path, "(arrived * W <= served + W + C)", "(arrived * W <= served + W + C - 2)")
    fails = _run_json(two_less, "--arrivals", "60")["bounded_backlog"]
    assert (fails["result"], fails["time"], fails["iteration"]) == ("fails", 4.0, 2)


def test_dai_backlog_budget_fails_when_the_arrivals_outrun_the_budget(tmp_path):
    # a gap of 1: W = 22 > 16 * 1. Session 0 arrives at 1 and gets 16 tokens; at time 2 session 1 arrives:
    # arrived * 22 = 44 > served + 22 + 3 = 16 + 25
    fails = _run_json(_variant(DAI_BUDGET, tmp_path, "let g = 2; ", "let g = 1; "), "--arrivals", "7")["bounded_backlog"]
    assert (fails["result"], fails["time"], fails["iteration"]) == ("fails", 2.0, 1)


def test_budget_cut_balance_is_stated_and_registered():
    # issue 14, result 2(b): the admission half of the work conservation and the resets it gives
    text = _stated("BacklogBudgetBalance", ("BacklogBudget.step_balance", "BacklogBudget.run_balance",
                                            "BacklogBudget.short_reset", "BacklogBudget.empty_reset", "step_bal",
                                            "run_bal", "plan_bal", "admit_bal", "serve_bal", "submit_work",
                                            "stepAll_bal", "run_origin", "run_nopre", "gapped_one"))
    assert "def workLeft (m : Machine) : Nat := resLeft m.running + reqsLeft m.waiting" in text
    assert "x.arrived * (P + (D - 1)) ≤ x.served + x.tokens + K * (D - 1)" in text
    _registered("BacklogBudgetBalance")


def test_budget_cut_final_is_stated_and_registered():
    # issue 14, result 2(b): the anchor on the machine, the invariant kept by every step, the bound modulo the buckets
    text = _stated("BacklogBudgetFinal", ("BacklogBudget.backlog_budget_of", "BacklogBudget.backlog_budget_mod",
                                          "anchorM_now", "anc_now", "anchorM_full",
                                          "anchorM_reset", "stepOk_of", "step_anc", "step_fin", "init_fin", "run_fin"))
    assert "x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + C" in text
    assert "StepOk eng ss (R + (P + (D - 1) + C) / (P + (D - 1))) P D m" in text
    _imported_after("BacklogBudgetFinal", "BacklogBudgetProgress")


def _registered(*modules: str) -> None:
    """lean/Serq.lean imports each of the modules (`Serq.<module>`), so the build checks them."""
    serq = SERQ_LEAN.read_text()
    for module in modules:
        assert f"public import Serq.{module}\n" in serq, module


def _imported_after(module: str, dependency: str) -> None:
    """lean/Serq.lean imports `module` after `dependency`, both registered."""
    _registered(dependency, module)
    serq = SERQ_LEAN.read_text()
    assert serq.index(f"public import Serq.{dependency}\n") < serq.index(f"public import Serq.{module}\n")


def _stated(module: str, names: tuple[str, ...]) -> str:
    """The text of `lean/Serq/<module>.lean`, after checking that it states each theorem and passes the scan."""
    text = (REPO / "lean" / "Serq" / f"{module}.lean").read_text()
    for name in names:
        assert f"theorem {name} " in text, (module, name)
    assert scan_source(text, f"{module}.lean") == []
    return text


def test_budget_cut_groundwork_is_stated_and_registered():
    text = (REPO / "lean" / "Serq" / "BacklogBudget.lean").read_text()
    assert "theorem BacklogBudget.conserve" in text and "arrived i * W ≤ served i + W + C" in text
    assert scan_source(text, "BacklogBudget.lean") == []
    run = (REPO / "lean" / "Serq" / "BacklogBudgetRun.lean").read_text()
    assert "theorem BacklogBudget.served_next" in run and "theorem BacklogBudget.start_next" in run
    assert scan_source(run, "BacklogBudgetRun.lean") == []
    _stated("BacklogBudgetShort", ("BacklogBudget.short_decodes", "plan_short", "plan_sched_le"))
    _stated("BacklogBudgetSound", ("BacklogBudget.decode_left", "BacklogBudget.short_left", "run_sound"))
    arrive = (REPO / "lean" / "Serq" / "BacklogBudgetArrive.lean").read_text()
    assert "theorem BacklogBudget.arrived_count " in arrive and "x.arrived = BacklogBudget.arrivedBy x.start ss" in arrive
    assert "theorem BacklogBudget.arrivals_spaced " in arrive
    resets = (REPO / "lean" / "Serq" / "BacklogBudgetResets.lean").read_text()
    assert "theorem BacklogBudget.backlog_of_resets " in resets
    assert scan_source(resets, "BacklogBudgetResets.lean") == []
    work = (REPO / "lean" / "Serq" / "BacklogBudgetWork.lean").read_text()
    assert "theorem stepAll_work " in work and "theorem plan_sched_rem " in work
    assert scan_source(work, "BacklogBudgetWork.lean") == []
    assert scan_source(arrive, "BacklogBudgetArrive.lean") == []
    idle = _stated("BacklogBudgetIdle", ("BacklogBudget.idle_gaps", "BacklogBudget.start_pos", "BacklogBudget.first_record",
                                         "BacklogBudget.backlog_of_resets_run", "step_gap", "run_gap", "step_pos"))
    assert "BacklogBudget.arrivedBy ((run eng ss fuel (init ss)).records[i + 1].start - 1) ss =" in idle
    later = _stated("BacklogBudgetLater", ("BacklogBudget.step_later", "BacklogBudget.hstep_of_resets",
                                           "BacklogBudget.backlog_of_whole_resets", "step_progress", "step_left",
                                           "plan_progress", "run_linv"))
    assert "(run eng ss fuel (init ss)).records[i + 1].start = (run eng ss fuel (init ss)).records[i].start + 1 :=" in later
    _stated("BacklogBudgetCaps", ("run_caps", "run_life", "plan_caps", "plan_caps_short", "step_caps", "step_life",
                                  "serveRunning_caps", "admitHeads_caps", "stepRes_life", "newReq_life", "submit_life"))
    _registered("BacklogBudget", "BacklogBudgetRun", "BacklogBudgetShort", "BacklogBudgetSound", "BacklogBudgetArrive",
                "BacklogBudgetResets", "BacklogBudgetWork", "BacklogBudgetIdle", "BacklogBudgetLater",
                "BacklogBudgetCaps")


def test_budget_cut_progress_is_stated_and_registered():
    progress = _stated("BacklogBudgetProgress", (
        "BacklogBudget.run_progress", "BacklogBudget.run_later", "BacklogBudget.run_later_succ",
        "BacklogBudget.backlog_of_caps", "step_admits", "plan_admits", "plan_wait", "admitHeads_pos", "step_fresh",
        "run_fresh", "newReq_fresh", "submit_new", "not_settled", "step_settled", "run_succ_step"))
    # `run_progress` concludes exactly the hypothesis `hp` of `idle_gaps` / `backlog_of_whole_resets`
    assert ("countFirst (duePending (run eng ss k (init ss)).now (run eng ss k (init ss)).pending).1 ≠ 0 →\n"
            "        (step eng ss (run eng ss k (init ss))).records ≠ (run eng ss k (init ss)).records := by") in progress
    assert "(BacklogBudget.run_progress eng hph hb ss K P D hK0 hD hK hkv H) hreset" in progress
    _registered("BacklogBudgetProgress")


def test_budget_cut_buckets_is_stated_and_registered():
    buckets = _stated("BacklogBudgetBuckets", (
        "BacklogBudget.step_buckets", "BacklogBudget.resid_count", "BacklogBudget.resid_work",
        "BacklogBudget.run_buckets", "plan_buckets", "serve_inv", "adm_inv", "resid_after", "resid_idle",
        "stepRes_out", "stepAll_bucket", "decCount_le", "decRem_le", "step_waits", "submit_waits", "run_resid"))
    # the bounds the final theorem reads: the requests in flight and their work left
    assert "resCount l ≤ (D - 1) * M + 1" in buckets
    assert "BacklogMany.sumRem l ≤ M * (D * (D - 1) / 2) + P" in buckets
    # the counts are the model's own structurally recursive helpers, not List.filter / List.length
    assert "List.filter" not in buckets and "List.length" not in buckets
    _registered("BacklogBudgetBuckets")


def test_budget_cut_bound_is_stated_and_registered():
    # issue 14, result 2(b): the buckets' invariant plugged into the final assembly, the bound with no hypothesis on the run
    bound = _stated("BacklogBudgetBound", ("backlog_budget", "backlog_budget_renewal", "bucketInv_init",
                                           "bucketInv_count", "bucketInv_step", "due_shape", "resLeft_dec"))
    assert ("x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + (1 + eng.budget / P) * (D * (D - 1) / 2)"
            in bound)
    assert "(hw : GappedDecode g P D 1 ss) (fuel : Nat)" in bound
    assert "(hw : RenewalDecode g P D 0 ss) (fuel : Nat)" in bound
    _imported_after("BacklogBudgetBound", "BacklogBudgetBuckets")


def test_drift_machine_caps_is_stated_and_registered():
    # issue 14, result 7: the coupling with caps fixed by the budget (2 + budget / W slots), not by the sessions
    text = _stated("DriftMachineCaps", (
        "drift_machine_step_caps", "drift_machine_clock_caps", "drift_machine_empty_caps", "drift_machine_on_time_caps",
        "drift_machine_one_resident_caps", "admitC_step", "admitC", "serveC_step", "serveC", "planC", "stepC",
        "stepC_inv", "settledC", "runC", "run_invC", "run_big", "step_big", "stepAll_unfinished",
        "servePre_unfinished"))
    assert "(hcap : 2 + eng.budget / W ≤ eng.reqsCap)" in text
    assert "(hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks)" in text
    assert "resCount (run eng ss fuel (init ss)).running ≤ 1 :=" in text
    # no cap on the sessions: the old hypotheses are gone from the statements
    assert "sessionCount ss ≤ eng.reqsCap" not in text and "sessionCount ss * bW ≤ eng.kvBlocks" not in text
    time = _stated("DriftMachineCapsTime", ("drift_machine_due_caps", "drift_machine_time_caps",
                                            "drift_machine_time_every_caps"))
    assert "(hcap : 2 + eng.budget / W ≤ eng.reqsCap)" in time and "sessionCount ss ≤ eng.reqsCap" not in time
    _registered("DriftMachineCaps")
    _imported_after("DriftMachineCapsTime", "DriftMachineClock")


def test_drift_paths_caps_is_stated_and_registered():
    # issue 14, result 7: the law and the return-time bound at every horizon with the fixed caps (no maxCount)
    text = _stated("DriftPathsCaps", (
        "drift_machine_work_at_caps", "drift_machine_paths_caps", "drift_machine_law_caps", "drift_machine_hit_caps",
        "drift_machine_ret_caps", "drift_machine_return_bound_caps", "workAt_big", "workAt_path_big", "paths_big"))
    assert ("(n F : Nat) (hF : n + 1 ≤ F)\n"
            "    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :") in text
    assert "maxCount arrivals ≤ eng.reqsCap" not in text and "hcaps" not in text
    # the instance: 3 slots and 3 blocks at the horizon 100 (the old caps would need 200 slots)
    assert "example := drift_machine_return_bound_caps ⟨4, 3, 3, 16, 0, false, false⟩" in text
    assert "99 100 (Nat.le_refl _)" in text
    _imported_after("DriftPathsCaps", "DriftPathsHit")


def test_drift_return_is_stated_and_registered():
    # issue 14, result 7: the untruncated return time without real numbers (the truncations grow and are
    # bounded uniformly, so E[tau+] is their finite supremum; Markov's tail P(tau+ > n) <= bound / (n + 1))
    text = _stated("DriftReturn", (
        "drift_machine_return_mono_caps", "drift_machine_return_mono_le_caps",
        "drift_machine_positive_recurrent_caps", "drift_machine_return_tail_caps",
        "ret_mono", "ret_mono_le", "timeTo_eq_iff", "timeTo_le", "wsum_tail"))
    # the monotonicity: den * R n <= R (n + 1), with the return-time sum of drift_machine_return_bound_caps
    assert ("    wsum (fun _ => 1) arrivals\n"
            "        * wsum (fun p => 1 + timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F))\n"
            "            (paths arrivals (n + 1))\n"
            "      ≤ wsum (fun p => 1 + timeTo (· == 0) (n + 1) (fun i => workAt eng (pathSessions W p) W (i + 1) F'))\n"
            "            (paths arrivals (n + 1 + 1))") in text
    # the tail: (n + 1) * e * weight of {tau+ > n} <= den ^ (n + 1) * (e + sum p * V)
    assert ("    (n + 1) * (wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)\n"
            "        * wsum (fun p => if timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F) = n "
            "then 1 else 0)\n") in text
    # the fixed caps, no maxCount
    assert text.count("(hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks)") >= 4
    assert "maxCount" not in text
    # the instances on DriftPathsCaps' engine
    for name in ("drift_machine_positive_recurrent_caps", "drift_machine_return_tail_caps",
                 "drift_machine_return_mono_caps"):
        assert f"example := {name} ⟨4, 3, 3, 16, 0, false, false⟩ 3 1" in text
    _imported_after("DriftReturn", "DriftPathsCaps")


def test_drift_caps_tight_is_stated_and_registered():
    # issue 14, result 7: the fixed caps cannot be lowered; the kernel evaluates an instance (budget 63,
    # W = 20, four sessions at each of the times 0-7) where five slots give the chain's backlog at time 7
    # and four do not (tests/test_drift_interpreter.py runs the same path on the interpreter)
    text = _stated("DriftCapsTight", ("drift_caps_tight_holds", "drift_caps_tight_fails"))
    assert "def capsTightSessions : List Session := pathSessions 20 [4, 4, 4, 4, 4, 4, 4, 4]" in text
    assert "workAt ⟨63, 5, 10, 16, 0, false, false⟩ capsTightSessions 20 7 8 = 119" in text
    assert "workAt ⟨63, 4, 10, 16, 0, false, false⟩ capsTightSessions 20 7 8 = 120" in text
    assert text.count("backlogAt 20 63 (arrivalsAt capsTightSessions) 7 = 119") == 2
    assert text.count("decide +kernel") == 2
    _imported_after("DriftCapsTight", "DriftPathsCaps")


# --- dai_backlog_phased.sq: the bounded backlog on the phase-separated schedule (Serq.backlog_phased) ---

DAI_PHASED = PAPERS / "dai_backlog_phased.sq"


@pytest.mark.parametrize("sessions, slowest", [("1", 4.0), ("7", 6.0), ("60", 6.0)])
def test_dai_backlog_phased_holds_on_the_simulated_path(sessions, slowest):
    # an 8-token prompt with 4 output tokens every 2 steps, budget 16, phases separated: a request alone
    # is prefilled at its arrival and decodes 3 iterations (answered 4 after it arrives); one arriving
    # while others decode waits for their last decode and is prefilled beside the next arrival (at most
    # J = 2 prompts an iteration), answered up to 6 after: arrived * 11 <= served + 2 * 11 + 2 * 3
    _holds_on_the_simulated_path(DAI_PHASED, sessions, ["bounded_backlog"], 4.0, slowest)


def test_dai_backlog_phased_path_stays_below_the_constant(tmp_path):
    # the constant J * W + J * (D - 1) = 28 is not exact: the path's largest backlog is J * W = 22 (two
    # prompts waiting at time 6, iteration 4), so a constant of 21 fails there and 22 holds
    for constant, result in [("21", ("fails", 6.0, 4)), ("22", ("holds", None, None))]:
        variant = _variant(DAI_PHASED, tmp_path, "(arrived * W <= served + J * W + J * (D - 1));",
                           f"(arrived * W <= served + {constant});")
        got = _run_json(variant, "--arrivals", "40")["bounded_backlog"]
        assert (got["result"], got.get("time"), got.get("iteration")) == result


def test_dai_backlog_phased_fails_when_the_arrivals_outrun_the_phases(tmp_path):
    # the broken variant: a gap of 1 (D = 4 > J * g = 2). Session 0 (at 1) is prefilled alone at time 1
    # (8 tokens) and decodes at 2, 3, 4 while sessions 1, 2, 3 wait; at time 4 arrived * 11 = 44 >
    # served + 28 = 10 + 28
    failed = _run_json(_variant(DAI_PHASED, tmp_path, "let g = 2;", "let g = 1;"), "--arrivals", "40")["bounded_backlog"]
    assert (failed["result"], failed["time"], failed["iteration"]) == ("fails", 4.0, 3)


@pytest.mark.lean
def test_dai_backlog_phaseds_gap_one_variant_is_refuted_in_lean(tmp_path):
    # the broken variant's own generated statement is false: four sessions a step apart (a workload of its
    # family), the run decided by the kernel, fails the claim at time 4 as `serq run` reports
    from serq.leangen.build import compile_file
    module = claims_module(_variant(DAI_PHASED, tmp_path, "let g = 2;", "let g = 1;"))
    (st,) = module.statements
    witness = "[" + ", ".join(f"⟨{k + 1}, [⟨8, 4, 0, false⟩]⟩" for k in range(4)) + "]"
    lean = tmp_path / "PhasedGapOne.lean"
    lean.write_text(module.text().replace(f"end {module.namespace}", f"""theorem gap_one_fails : ¬ {st.ident} := fun h => by
  have h2 := h {witness} (by decide +kernel) 10
  revert h2
  decide +kernel

end {module.namespace}"""))
    result = compile_file(lean, root=REPO)
    assert result.ok, "\n".join(str(d) for d in result.diagnostics)


@pytest.mark.parametrize("program, family, served_plus, theorem", [
    # phases separated: J * W + J * (D - 1) = 22 + 6
    ("dai_backlog_phased.sq", (2, 8, 4, (16, 4, 64, 16, 0, False, True)), "(((r.served : Int) + (22 : Int)) + (6 : Int))",
     "dai_bounded_backlog_phased : Papers.Claims.DaiBacklogPhased."),
    # the budget cuts prompts: M = 1 + floor(16 / 20) = 1, C = 1 * (3 * 2 / 2) = 3, K = 2 * 1 + 1 + floor(25 / 22) = 4 slots
    ("dai_backlog_budget.sq", (2, 20, 3, (16, 4, 64, 16, 0, False, False)), "(((r.served : Int) + (22 : Int)) + (3 : Int))",
     "dai_bounded_backlog_budget : Papers.Claims.DaiBacklogBudget."),
])
def test_single_claim_renewal_family_and_proof(program, family, served_plus, theorem):
    gap, new, out, engine = family
    module = _renewal_family(PAPERS / program, gap, new, out, engine)
    (st,) = module.statements
    assert st.body == (f"EveryIteration engine family (fun r => (decide (((r.arrived : Int) * ({new + out - 1} : Int)) ≤ "
                       f"{served_plus})))")
    proved = (PAPERS / "ClaimsProved.lean").read_text()
    assert f"theorem {theorem}" + st.ident in proved


def test_a_drawn_or_fractional_renewal_gap_is_not_a_family(tmp_path):
    for gap in ("~exp(2)", "2.5"):
        with pytest.raises(SerqError) as e:
            claims_module(_variant(DAI, tmp_path, "arrive renewal(g);", f"arrive renewal({gap});"))
        assert "a renewal gap in the model is a constant whole number of steps" in e.value.message


def test_the_phase_separated_engine_is_in_the_fragment():
    module = claims_module(PAPERS / "fastertransformer.sq")
    assert module.engine.phased and not claims_module(PAPERS / "li_dai_peng.sq").engine.phased
    assert (module.engine.budget, module.engine.reqs_cap) == (16, 4)


def test_the_generated_statements_and_proofs_are_current():
    problems = stale_claims(REPO)
    assert not problems, "\n".join(p.render(REPO) for p in problems)


def test_generated_statement_reads_the_claim_over_the_record():
    module = claims_module(PAPERS / "li_dai_peng.sq")
    st = {s.claim: s for s in module.statements}
    assert st["capped_batch_idles"].body == (
        "SomeIteration engine family (fun r => ((decide ((((r.arrived : Int) * (11 : Int)) - (r.served : Int)) "
        "≥ (16 : Int))) && (decide ((r.tokens : Int) < (16 : Int)))))")
    assert module.session_test == ("s.arrive == 0 && singleTurn (fun t => t.think == 0 && t.new == 8 && "
                                   "t.out == 4 && t.forced == false) s")
    assert (module.engine.budget, module.engine.reqs_cap, module.engine.kv_blocks) == (16, 2, 64)


def _copy_papers(tmp: Path) -> Path:
    shutil.copytree(PAPERS, tmp / "examples" / "papers")
    shutil.copy(REPO / "lakefile.lean", tmp / "lakefile.lean")
    return tmp


def test_an_edited_claim_is_named_until_its_proof_is_updated(tmp_path):
    root = _copy_papers(tmp_path)
    sq = root / "examples" / "papers" / "sarathi.sq"
    sq.write_text(sq.read_text().replace("claim bounded: every iteration of llm (tokens <= B);",
                                         "claim bounded: every iteration of llm (tokens < B);"))
    problems = stale_claims(root)
    assert {p.claim for p in problems} == {"bounded"}
    texts = [p.render(root) for p in problems]
    assert all(t.startswith("examples/papers/sarathi.sq:76:3: error: claim `bounded`") for t in texts), texts
    assert any("is not generated (run `python3 scripts/gen_lean_claims.py`)" in t for t in texts)
    assert any("older statement (Papers.Claims.Sarathi.bounded_" in t for t in texts)
    # the CLI refuses it too, naming the claim, without running Lean
    out = subprocess.run([sys.executable, "-m", "serq.cli", "lean", "check", "--no-build", "-q"],
                         capture_output=True, text=True, cwd=root)
    assert out.returncode == 1
    assert "claim `bounded`" in out.stderr


def test_a_claim_without_a_theorem_is_named(tmp_path):
    root = _copy_papers(tmp_path)
    sq = root / "examples" / "papers" / "li_dai_peng.sq"
    sq.write_text(sq.read_text().replace("\n}\n", "\n  claim extra: every iteration of llm (tokens <= B + 1);\n}\n"))
    problems = [p for p in stale_claims(root) if p.claim == "extra"]
    assert any("no theorem in examples/papers/ClaimsProved.lean has the type Papers.Claims.LiDaiPeng.extra_"
               in p.message for p in problems)


def _module_of(tmp_path: Path, edit) -> Path:
    src = (PAPERS / "li_dai_peng.sq").read_text()
    path = tmp_path / "p.sq"
    path.write_text(edit(src))
    return path


@pytest.mark.parametrize("edit, phrase", [
    (lambda s: s.replace("(demand < B || tokens == B);", "(demand / 2 < B);"),
     "`div`: over whole numbers it is not the interpreter's real division"),
    (lambda s: s.replace("(demand < B || tokens == B);", "(queue(llm) < B);"),
     "is outside what the model computes"),
    (lambda s: s.replace("arrive batch(n);", "arrive poisson(0.5);"),
     "a `some iteration` claim is stated for a workload that does not draw"),
    (lambda s: s.replace("set out = D;", "set out = D;\n      set think = 2;"),
     "attribute `think`: the model's sessions carry context, new, out and forced only"),
    (lambda s: s.replace("set new = P;", "set new = 2.5;"), "`new` = 2.5 is not a natural number"),
    # an infinite constant is refused like any other that is not a natural number (not a crash)
    (lambda s: s.replace("set new = P;", "set new = inf;"), "`new` = inf is not a natural number"),
    (lambda s: s.replace("\n}\n", "\n  claim late: at end (now > 0);\n}\n"),
     "`now`: in the model a claim at end reads constants and aggregates of observations"),
    (lambda s: s.replace("\n}\n", "\n  claim fast: at end (total(tpot) >= 0);\n}\n"),
     "reads `total(tpot)`: the model records the client's response and ttft and the observes after"),
    (lambda s: s.replace("llm (prompt, out, hit);", "llm (prompt, out, hit);\n    observe t = now;"),
     "observe `t`: in the model an observed value is a natural number built from the turn's `new` and `out`"),
])
def test_claims_outside_the_fragment_are_refused_with_the_construct(tmp_path, edit, phrase):
    with pytest.raises(SerqError) as e:
        claims_module(_module_of(tmp_path, edit))
    assert phrase in e.value.message
    assert "outside the Lean fragment" in e.value.message
    if "not a natural number" in phrase or "attribute `" in phrase:
        assert e.value.span is not None, "an attribute's refusal names its `set`"


@pytest.mark.parametrize("edit", [
    # the engine model runs the oracle program's request only: a request that differs, an observe
    # before it, a statement after it
    lambda s: s.replace("decode (o - 1 - (known - prompt)) growing kv;", "decode (o - (known - prompt)) growing kv;"),
    lambda s: s.replace("set prompt = context + new;", "observe x = new;\n    set prompt = context + new;"),
    lambda s: s.replace("llm (prompt, out, hit);", "llm (prompt, out, hit);\n    set y = 1;"),
])
def test_a_server_other_than_the_oracle_request_is_stated_about_the_kernel_run(tmp_path, edit):
    """The engine model states claims for the workload family of the oracle request; another server is
    the kernel's: the claims are stated about the program's own run (its bundled batch of 4), to its end."""
    m = claims_module(_module_of(tmp_path, edit))
    assert isinstance(m, KernelClaimsModule)
    assert [(st.claim, st.body.split(" ")[0]) for st in m.statements] == [
        ("work_conserving", "EveryIterationOfRun"), ("capped_batch_idles", "SomeIterationOfRun")]
    assert "def program" in m.text() and m.stage_name == "llm"


def test_claims_outside_both_models_give_both_reasons(tmp_path):
    # another server (the engine model's refusal) and a draw (the kernel's): both reasons, the kernel's first
    path = _module_of(tmp_path, lambda s: s.replace("llm (prompt, out, hit);", "llm (prompt, out, hit);\n    set y = 1;")
                      .replace("set out = D;", "set out = ceil(~uniform(0, D));"))
    with pytest.raises(SerqError) as e:
        claims_module(path)
    msg = e.value.message
    assert msg.startswith("outside the Lean kernel fragment: a draw `~uniform(…)`: the fragment's programs are "
                          "deterministic; nor is it in the engine model's fragment (Serq.Exec): ")
    assert "p.sq:" in msg and "the server has 5 statements, the oracle request 4" in msg
    assert e.value.span is not None and e.value.span.line == next(
        n for n, t in enumerate(path.read_text().splitlines(), 1) if "~uniform" in t)


def test_given_restricts_the_family(tmp_path):
    path = _module_of(tmp_path, lambda s: s.replace(
        "claim work_conserving: every iteration", "claim work_conserving given (new <= 8): every iteration"))
    st = claims_module(path).statements[0]
    assert ("(fun ss => family ss && everySession (fun _ s => singleTurn (fun t => "
            "(decide ((t.new : Int) ≤ (8 : Int)))) s) 0 ss)") in st.body


def test_the_generator_script_check_passes_on_the_repository():
    out = subprocess.run([sys.executable, "scripts/gen_lean_claims.py", "--check"], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr


SJF = REPO / "examples" / "scheduling" / "sjf.sq"


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_shortest_first_attains_the_prefix_total_bound(seed):
    claims = _run_json(SJF, "--seed", seed)
    assert {n: c["result"] for n, c in claims.items()} == {"spt_bound": "holds", "sjf_attains": "holds"}


def test_arrival_order_stays_above_the_bound(tmp_path):
    # the same 50 requests served first come, first served: the bound holds, strictly
    fifo = tmp_path / "fifo.sq"
    fifo.write_text(SJF.read_text().replace("queue by (out);", "queue fifo;"))
    claims = _run_json(fifo, "--seed", "1")
    assert claims["spt_bound"]["result"] == "holds"
    assert claims["sjf_attains"]["result"] == "fails"


AT_END = ("    llm (prompt, out, hit);\n    observe steps = out;\n    observe tokens_in = new + out;",
          "\n  claim spt: at end (total(response) >= prefix_total(steps));"
          "\n  claim mean: at end (total(ttft) <= 4 * count(tokens_in));\n}\n")


def _at_end_program(tmp_path: Path) -> Path:
    return _module_of(tmp_path, lambda s: s.replace("    llm (prompt, out, hit);", AT_END[0])
                      .replace("\n}\n", AT_END[1]))


def test_claims_at_end_are_stated_over_the_answered_turns(tmp_path):
    module = claims_module(_at_end_program(tmp_path))
    st = {s.claim: s for s in module.statements}
    assert st["spt"].body == ("AtEnd engine family (fun ss m => (decide (((sumNat (obs_response ss m.outcomes) : Nat) "
                              ": Int) ≥ ((prefixTotal (obs_steps ss m.outcomes) : Nat) : Int))))")
    assert st["mean"].body == ("AtEnd engine family (fun ss m => (decide (((sumNat (obs_ttft ss m.outcomes) : Nat) : "
                               "Int) ≤ ((4 : Int) * ((countNat (obs_tokens_in ss m.outcomes) : Nat) : Int)))))")
    assert dict(module.observations) == {
        "response": "o.last + 1 - arriveAt ss o.sid",
        "steps": "match sessionTurn ss o.sid o.turn with | some t => t.out | none => 0",
        "ttft": "o.first + 1 - arriveAt ss o.sid",
        "tokens_in": "match sessionTurn ss o.sid o.turn with | some t => (t.new + t.out) | none => 0",
    }


def test_an_edited_observe_changes_the_statement_it_feeds(tmp_path):
    before = {s.claim: s.ident for s in claims_module(_at_end_program(tmp_path)).statements}
    path = tmp_path / "p.sq"
    path.write_text(path.read_text().replace("observe steps = out;", "observe steps = out + 1;"))
    after = {s.claim: s.ident for s in claims_module(path).statements}
    assert before["spt"] != after["spt"] and before["mean"] == after["mean"]


@pytest.mark.lean
def test_generated_claims_at_end_type_check_in_lean(tmp_path):
    from serq.leangen.build import compile_file
    module = claims_module(_at_end_program(tmp_path))
    lean = tmp_path / "AtEndClaims.lean"
    lean.write_text(module.text())
    result = compile_file(lean, root=REPO)
    assert result.ok, "\n".join(str(d) for d in result.diagnostics)


def test_serq_lean_claims_prints_the_generated_module_or_refuses_with_the_location():
    out = subprocess.run([sys.executable, "-m", "serq.cli", "lean", "claims", "examples/papers/sarathi.sq"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (PAPERS / "Papers" / "Claims" / "Sarathi.lean").read_text()
    out = subprocess.run([sys.executable, "-m", "serq.cli", "lean", "claims", str(SJF)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    # outside both: the kernel's reason (a draw) at its place, then the engine model's at the engine
    assert "sjf.sq:58:7: error: outside the Lean kernel fragment: a draw `~uniform(…)`" in out.stderr
    assert (f"nor is it in the engine model's fragment (Serq.Exec): {SJF}:27:3: engine `llm` "
            "is not expressible as vLLM settings") in out.stderr
    assert "FCFS policy serves its waiting queue first come, first served" in out.stderr


def test_a_claim_reads_the_programs_own_response_in_the_model(tmp_path):
    # `observe response = out + 1;`: the claim's total(response) is the program's value per
    # turn, not the client's (first token to last), in Lean as in the interpreter
    root = _copy_papers(tmp_path)
    sq = root / "examples" / "papers" / "smith_spt.sq"
    sq.write_text(sq.read_text().replace("observe steps = out;", "observe steps = out;\n    observe response = out + 1;"))
    m = claims_module(sq)
    assert dict(m.observations)["response"] == "match sessionTurn ss o.sid o.turn with | some t => (t.out + 1) | none => 0"
    plain = claims_module(PAPERS / "smith_spt.sq")
    assert dict(plain.observations)["response"] == "o.last + 1 - arriveAt ss o.sid"


# --- claims at end of a kernel program's run (Serq.Kernel.AtEndOfRun, lean/Serq/KernelAtEnd.lean) ---

#: Three requests of 1, 2 and 3 iterations at time 0, one at a time, first come first served: they complete
#: at 1, 3 and 6 (their responses: total 10, count 3), prefix_total(vol) = 1 + 3 + 6 = 10, largest 3, smallest 1.
KERNEL_AT_END = """use "std/args";

fn main() {
  let n = args.number("sessions", 3);

  device gpu { }

  engine llm on gpu {
    reqs cap 1;
    tokens cap 4;
    request (prompt, o) {
      prefill (prompt);
      decode (o - 1);
    }
    schedule {
      advance running;
      admit waiting while (running.preempted == 0) taking reqs (1);
    }
    execute (1);
  }
  pool reqs on llm { queue fifo; }

  workload {
    arrive batch(n);
    turn {
      set new = 4;
      set out = 1 + serial;
    }
  }

  server {
    llm (new, out);
    observe vol = out;
  }

  claim exact: at end (total(response) == 10 && count(response) == 3 && largest(vol) == 3 && smallest(vol) == 1
                       && prefix_total(vol) == 10 && total(vol) == 6);
  claim wrong: at end (total(response) < prefix_total(vol));
}
"""


def _kernel_at_end(tmp_path: Path, edit=lambda s: s) -> Path:
    path = tmp_path / "k.sq"
    path.write_text(edit(KERNEL_AT_END))
    return path


def test_a_kernel_claim_at_end_is_stated_over_the_runs_observations_and_responses(tmp_path):
    path = _kernel_at_end(tmp_path)
    claims = _run_json(path)
    assert {n: c["result"] for n, c in claims.items()} == {"exact": "holds", "wrong": "fails"}
    module = claims_module(path)
    assert isinstance(module, KernelClaimsModule) and module.at_end
    st = {s.claim: s for s in module.statements}
    assert st["wrong"].body == ("AtEndOfRun program fuel (fun m => (decide (((Serq.sumNat (responses m.threads) : Nat) "
                                ": Int) < ((Serq.prefixTotal (observedValues 0 m.threads) : Nat) : Int))))")
    for agg in ("Serq.countNat (responses m.threads)", "Serq.largestNat (observedValues 0 m.threads)",
                "Serq.smallestNat (observedValues 0 m.threads)", "Serq.sumNat (observedValues 0 m.threads)"):
        assert agg in st["exact"].body
    assert "public import Serq.KernelAtEnd\n\n/-!" in module.text()
    assert "Observations: 0 `vol`." in module.text()


def test_a_kernel_claim_over_iterations_reads_the_batchs_kv_sums(tmp_path):
    """`kv_decode` and `kv_prefill` are the record's `kvDecode`, `kvPrefill` (`Serq.Kernel.Iteration`)."""
    path = _kernel_at_end(tmp_path, lambda s: s.replace(
        "  claim wrong:", "  claim kv: every iteration of llm (kv_decode + kv_prefill <= tokens);\n  claim wrong:"))
    st = {s.claim: s for s in claims_module(path).statements}
    assert st["kv"].body.startswith("EveryIterationOfRun program stage fuel (fun r => ")
    assert "r.kvDecode" in st["kv"].body and "r.kvPrefill" in st["kv"].body


@pytest.mark.parametrize("edit, phrase, needle", [
    (lambda s: s.replace("claim wrong: at end (", "claim wrong: at end (now > 0 && "),
     "`now`: in the model a claim at end reads constants and aggregates of observations", "claim wrong"),
    (lambda s: s.replace("total(response) < prefix_total(vol)", "total(ttft) < prefix_total(vol)"),
     "`total(ttft)`: at the end of a kernel program's run the model records the client's response and the "
     "program's observes", "claim wrong"),
    (lambda s: s.replace("total(response) < prefix_total(vol)", "total(response) / 2 < prefix_total(vol)"),
     "`div`: over whole numbers it is not the interpreter's real division", "claim wrong"),
    (lambda s: s.replace("claim wrong: at end", "claim wrong given (out > 0): at end"),
     "`given` on a claim about the program's own run", "claim wrong"),
])
def test_unsupported_kernel_claims_at_end_are_refused_with_the_location(tmp_path, edit, phrase, needle):
    path = _kernel_at_end(tmp_path, edit)
    out = subprocess.run([sys.executable, "-m", "serq.cli", "lean", "claims", str(path)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if needle in t)
    assert f"k.sq:{line}:3: error: outside the Lean fragment: claim `wrong`: " in out.stderr
    assert phrase in out.stderr


@pytest.mark.lean
def test_a_kernel_claim_at_end_decides_in_lean_as_the_report_says(tmp_path):
    # the generated statements, decided by the kernel: `exact` holds and `wrong` fails, as `serq run` reports
    from serq.leangen.build import compile_file
    module = claims_module(_kernel_at_end(tmp_path))
    st = {s.claim: s.ident for s in module.statements}
    lean = tmp_path / "KernelAtEnd.lean"
    text = module.text().replace(f"end {module.namespace}", f"""theorem exact_holds : {st['exact']} :=
  AtEndOfRun.of_eval _ _ _ (by decide +kernel)

theorem wrong_fails : ¬ {st['wrong']} := fun h => by
  have h2 := h.2
  revert h2
  decide +kernel

end {module.namespace}""")
    lean.write_text(text)
    result = compile_file(lean, root=REPO)
    assert result.ok, "\n".join(str(d) for d in result.diagnostics)


# --- svf.sq: shortest volume first (Kong et al.): the queueing bound and the competitive ratio ---

@pytest.mark.parametrize("sessions", ["1", "6", "40"])
def test_svfs_queueing_bound_holds_on_the_simulated_path(sessions):
    assert _run_json(PAPERS / "svf.sq", "--", f"sessions={sessions}")["svf_queueing"]["result"] == "holds"


def test_svf_attains_the_prefix_total_computed_by_hand():
    # volumes 1, 4, 2, 5, 3, 1 at time 0, shortest first: completions 1, 2, 4, 7, 11, 16, total 41 =
    # prefix_total(vol); Σ vol = 16, so both sides of the claim are 2 * 25 (equality at c = 2)
    out = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(PAPERS / "svf.sq"), "--json"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    response = report["client"]["response"]
    assert (response["count"], round(response["mean"] * response["count"])) == (6, 41)
    assert report["observes"]["vol"]["count"] == 6 and round(report["observes"]["vol"]["mean"] * 6) == 16


def test_svfs_queueing_bound_fails_when_the_engine_admits_fifo(tmp_path):
    # the deliberately broken variant: the same requests admitted first come, first served complete at
    # 1, 5, 7, 12, 15, 16: Σ latency = 56, and 2 * (56 - 16) = 80 > 2 * (41 - 16) = 50
    text = (PAPERS / "svf.sq").read_text()
    assert "queue by (volume);" in text
    fifo = tmp_path / "svf_fifo.sq"
    fifo.write_text(text.replace("queue by (volume);", "queue fifo;"))
    assert _run_json(fifo)["svf_queueing"]["result"] == "fails"


def test_svfs_claim_is_stated_at_the_end_of_the_kernel_run():
    module = claims_module(PAPERS / "svf.sq")
    assert isinstance(module, KernelClaimsModule)
    st = {s.claim: s for s in module.statements}
    assert st["svf_queueing"].body == (
        "AtEndOfRun program fuel (fun m => (decide (((2 : Int) * (((Serq.sumNat (responses m.threads) : Nat) : Int) - "
        "((Serq.sumNat (observedValues 0 m.threads) : Nat) : Int))) ≤ ((2 : Int) * (((Serq.prefixTotal "
        "(observedValues 0 m.threads) : Nat) : Int) - ((Serq.sumNat (observedValues 0 m.threads) : Nat) : Int))))))")
    assert "queueKeys := [[(.attr 6)]]" in module.text()


def test_svf_every_batch_theorems_are_in_their_module():
    # issue 14, result 5 beyond the bundled run: the admission (every run), the shortest-first server's
    # bound (any sizes), the claim from the server hypothesis (proved for every batch in Papers.SvfRun)
    text = (PAPERS / "Papers" / "SvfEvery.lean").read_text()
    for name in ("svf_admits_least_volume", "svf_admits_first_least", "svf_headFree", "svf_shortest_first_bound",
                 "svf_bound_of_server"):
        assert f"theorem {name} " in text, name
    assert "svfAttains" not in text and "n < 17" not in text  # no batch decided run by run any more
    _registered("KernelSelect", "KernelSelectRun", "SptShortestFirst")


def test_svf_first_steps_are_proved_for_every_batch():
    # issue 14, result 5: the run's first instant and first iteration for every n (batches of 17 to 40
    # sessions were decided one run a theorem until 2026-12-06: ~10 minutes of CI's Lean build for a
    # finite range, dropped; the open step is the invariant's induction, `svf_queueing_every`)
    papers = PAPERS / "Papers"
    assert not any((papers / f).exists() for f in ("SvfServes.lean", "SvfUpto40.lean"))
    first = (papers / "SvfFirstInstant.lean").read_text()
    for name in ("svf_exec_arrival", "insertByCreation_svf", "svf_runReady_mid", "svf_first_settle",
                 "svf_first_settle_spec", "svf_first_admission"):
        assert f"theorem {name} " in first, name
    assert "settle (svfP n) (g + 9 * n + 2) (initial (svfP n)) = svfMid n n 0" in first
    start = (papers / "SvfFirstStart.lean").read_text()
    for name in ("svf_admit_first", "svf_start_iter", "svf_end_start", "svfMid_cons", "svf_first_start_reduced",
                 "svf_admitOne_first", "svf_admitWaiting_spent", "svf_iterTail_first", "svf_endTail_first",
                 "svf_first_start", "svf_first_end", "svf_first_answer", "svf_run_first_answer", "svfM3_spec"):
        assert f"theorem {name} " in start, name


def test_svf_simulation_shapes_and_steps_are_in_their_modules():
    # issue 14, result 5, the open simulation: its shapes (A) serving and (B) ended, (A) at the loop's first step,
    # the claim from (B), and the loop's steps proved so far (a decode with tokens left, a prefill's end with decodes)
    papers = PAPERS / "Papers"
    shape = (papers / "SvfShape.lean").read_text()
    assert "structure SvfServing " in shape and "structure SvfEnded " in shape
    for name in ("svf_first_serving", "svf_server_of_ended", "svf_ended_of_ended", "svf_queueing_of_ended",
                 "map_svfDoneAt", "shortestFirst_of_least", "ShortestFirst.perm"):
        assert f"theorem {name} " in shape, name
    steps = "".join((papers / f).read_text()
                    for f in ("SvfStep.lean", "SvfStepDecode.lean", "SvfStepPrefill.lean", "SvfStepAnswer.lean"))
    for name in ("svf_loop_step", "svf_settle_idle", "svf_dueNow_next", "svf_fire_decode", "svf_fire_decode_last",
                 "svf_fire_prefill_end", "svf_admitWaiting_full", "svf_serveIn_decode", "svf_restart_decode",
                 "svf_step_decode", "svf_exec_decode", "svf_settle_prefill_end", "svf_step_prefill",
                 "svf_exec_answer", "svf_step_last_ended", "svf_step_pre_one_ended"):
        assert f"theorem {name} " in steps, name
    inv = "".join((papers / f).read_text() for f in ("SvfInv.lean", "SvfInvEnd.lean"))
    for name in ("svf_serving_decode", "svf_serving_prefill", "svf_serving_last_decode", "svf_serving_last_pre",
                 "svf_ended_of_answer"):
        assert f"theorem {name} " in inv, name
    admit = (papers / "SvfAdmit.lean").read_text()
    for name in ("getWaiter_svfQueue", "removeWaiter_svfQueue", "svf_perm_admit", "svf_select_least"):
        assert f"theorem {name} " in admit, name


def test_svf_claim_is_proved_for_every_batch():
    # issue 14, result 5, closed: the admission step at a symbolic index of the queue, the induction on
    # k + Σ vol(W) from (A) to (B), and the claim for every n from the fuel bound alone
    papers = PAPERS / "Papers"
    step = (papers / "SvfAdmitStep.lean").read_text()
    for name in ("admitWaiting_admit", "svf_admitWaiter", "svf_exec_admitted", "svf_admitOne", "svf_iterTail_admit",
                 "svf_endTail_pre", "svf_settle_answer_waiting", "svf_admit_next", "svf_step_admit_decode",
                 "svf_step_admit_pre"):
        assert f"theorem {name} " in step, name
    inv = (papers / "SvfInvAdmit.lean").read_text()
    for name in ("svf_serving_of_admit", "svf_serving_admit", "svfLeastFirst_snoc", "sumNat_svfVols_erase"):
        assert f"theorem {name} " in inv, name
    assert "SvfServing n m' (served ++ [s]) (svfAt (w :: W) j) (svfVol (svfAt (w :: W) j) - 1) (svfErase (w :: W) j)" in inv
    run = (papers / "SvfRun.lean").read_text()
    for name in ("svf_serving_ends", "svf_run_zero", "svf_run_ended", "svf_queueing_every", "svf_queueing_claim_fuel",
                 "svf_queueing_bound_every", "svf_attains_every", "svf_competitive_every"):
        assert f"theorem {name} " in run, name
    assert "∃ served', SvfEnded n (loop (svfP n) (f + μ + 12) m) served'" in run
    assert "theorem svf_run_ended (n fuel : Nat) (hf : 9 * n + 12 ≤ fuel) :" in run
    assert "theorem svf_queueing_every (n fuel : Nat) (h : 9 * n + 12 ≤ fuel) :" in run
    assert "Kernel.AtEndOfRun { Papers.Claims.Svf.program with sessions := n } fuel (fun m =>" in run
    assert "theorem svf_queueing_claim_fuel (n : Nat) (hn : n ≤ 109) :" in run
    assert "theorem svf_queueing_bound_every : Papers.Claims.Svf.svf_queueing_ec8fae101205 :=" in run
    shape = (papers / "SvfShape.lean").read_text()
    assert "admSeq_pos : 0 < m.admSeq" in shape


@pytest.mark.lean
def test_svfs_fifo_variant_is_refuted_in_lean_as_the_report_says(tmp_path):
    # the broken variant's own generated statement is false, decided by the kernel on its run (Σ latency 56)
    from serq.leangen.build import compile_file
    fifo = tmp_path / "svf_fifo.sq"
    fifo.write_text((PAPERS / "svf.sq").read_text().replace("queue by (volume);", "queue fifo;"))
    module = claims_module(fifo)
    (st,) = module.statements
    lean = tmp_path / "SvfFifo.lean"
    lean.write_text(module.text().replace(f"end {module.namespace}", f"""theorem fifo_fails : ¬ {st.ident} := fun h => by
  have h2 := h.2
  revert h2
  decide +kernel

theorem fifo_total : Serq.sumNat (responses (runProgram program fuel).threads) = 56 := by decide +kernel

end {module.namespace}"""))
    result = compile_file(lean, root=REPO)
    assert result.ok, "\n".join(str(d) for d in result.diagnostics)
