"""The start-up and hot-path shortcuts give what the long way gives (issue 15): the parser kept in
the user's cache (serq/syntax/larkcache.py), the first turns' draws a block at a time
(serq/sim/rng.py FirstTurns) and a uniform draw written out (site_uniform), and the engine's decode
group (serq/sim/decode_group.py)."""

from __future__ import annotations

import math
import os
import stat

import pytest

from simtools import EXAMPLES, REPO, run_samples
from serq.sim.rng import M64, TWO53, DrawError, FirstTurns, Streams, _Site, block_key, site_exp, site_offset, \
    site_uniform
from serq.syntax import larkcache

GRAMMAR = """start: item+
item: NAME "=" NUMBER ";"
%import common.CNAME -> NAME
%import common.NUMBER
%import common.WS
%ignore WS
"""


def _parser(path, monkeypatch, cache):
    monkeypatch.setenv("SERQ_CACHE_DIR", str(cache))
    return larkcache.lalr_parser(path, lexer="contextual", propagate_positions=True)


def test_the_parser_cache_is_keyed_on_the_grammar(tmp_path, monkeypatch):
    g = tmp_path / "g" / "toy.lark"
    g.parent.mkdir()
    g.write_text(GRAMMAR)
    cache = tmp_path / "cache"
    built = _parser(g, monkeypatch, cache)
    files = sorted(cache.iterdir())
    assert len(files) == 1 and files[0].name.startswith("toy-") and files[0].suffix == ".lark"
    loaded = _parser(g, monkeypatch, cache)  # read back from the file
    assert loaded.parse("a = 1; b = 2;") == built.parse("a = 1; b = 2;")
    # an edited grammar never reads the old tables: it builds and keeps its own
    g.write_text(GRAMMAR.replace('"="', '":"'))
    edited = _parser(g, monkeypatch, cache)
    assert len(list(cache.iterdir())) == 2
    assert edited.parse("a : 1;")
    with pytest.raises(Exception):
        edited.parse("a = 1;")
    # so does a neighbour it may %import (every .lark file beside it is in the key)
    (g.parent / "other.lark").write_text("X: /x/\n")
    _parser(g, monkeypatch, cache)
    assert len(list(cache.iterdir())) == 3


def test_a_bad_or_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    g = tmp_path / "toy.lark"
    g.write_text(GRAMMAR)
    cache = tmp_path / "cache"
    _parser(g, monkeypatch, cache)
    (f,) = cache.iterdir()
    f.write_bytes(b"not a parser")  # corrupt: rebuilt, and saved again
    assert _parser(g, monkeypatch, cache).parse("a = 1;")
    assert f.read_bytes() != b"not a parser"
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
        assert _parser(g, monkeypatch, ro / "serq").parse("a = 1;")
    monkeypatch.setenv("SERQ_CACHE_DIR", "")  # off
    assert larkcache.cache_dir() is None
    assert larkcache.lalr_parser(g, lexer="contextual").parse("a = 1;")


def test_the_language_parser_from_the_cache_parses_as_built(tmp_path, monkeypatch):
    from serq.syntax import parser as P
    from serq.syntax.parser import DepthTree
    text = (P.GRAMMAR.parent.parent.parent / "examples" / "multi-turn" / "vllm.sq").read_text()
    opts = dict(lexer="contextual", propagate_positions=True, maybe_placeholders=True, tree_class=DepthTree)
    monkeypatch.setenv("SERQ_CACHE_DIR", "")
    built = larkcache.lalr_parser(P.GRAMMAR, **opts)
    monkeypatch.setenv("SERQ_CACHE_DIR", str(tmp_path))
    larkcache.lalr_parser(P.GRAMMAR, **opts)
    loaded = larkcache.lalr_parser(P.GRAMMAR, **opts)
    assert loaded.parse(text) == built.parse(text)


def _one_by_one(streams: Streams, serial: int, j: int) -> tuple[int, float]:
    """B and turn 1's first uniform of site j, as the generated code computes them without the block."""
    B = streams.session_turn_base(serial)
    z = (block_key(B, 1) + site_offset(j)) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return B, ((z ^ (z >> 31)) >> 11) * TWO53


def test_first_turns_block_has_the_numbers_of_one_by_one():
    streams = Streams(123)
    ft = FirstTurns(streams.turn_tag_key)
    sites = (0, 1, 7)
    for j in sites:
        ft.site(site_offset(j))
    assert ft.site(site_offset(1)) == 1  # registered once
    for start in (0, 5000, M64 - 2 * FirstTurns.SIZE):
        assert ft.fill(start) == 0
        for i in (0, 1, 511, FirstTurns.SIZE - 1):
            for k, j in enumerate(sites):
                B, u = _one_by_one(streams, start + i, j)
                assert ft.B[i] == B and ft.U[k][i] == u
    assert ft.fill(10) == -1  # a session before the block: one by one
    assert ft.fill(M64 - 5) == -1  # no block past 2^64


def test_site_uniform_draws_what_a_site_draws():
    """site_uniform, written out, gives what a draw site's `uniform` gives, its refusals included."""
    import random
    rnd = random.Random(7)
    for _ in range(5000):
        key, j = rnd.getrandbits(64), rnd.randrange(64)
        a = rnd.uniform(-1e3, 1e3)
        b = a + rnd.choice((0.0, rnd.uniform(0.0, 1e4)))
        assert site_uniform(key, j, a, b) == _Site(key, j).uniform(a, b)
    for a, b in ((2.0, 1.0), (0.0, math.inf), (math.nan, 1.0)):
        with pytest.raises(DrawError) as fast:
            site_uniform(1, 0, a, b)
        with pytest.raises(DrawError) as site:
            _Site(1, 0).uniform(a, b)
        assert str(fast.value) == str(site.value)


def test_turn_draws_across_blocks_and_later_turns(tmp_path):
    """Sessions past one block (1024), a first turn after a wait (the block moved on), and later turns
    draw exactly site_exp of their documented key."""
    prog = """fn main() {
  stage svc : fifo;
  stage pause : delay;
  workload {
    arrive poisson(2);
    turn { Size s = ~exp(1); set more = ~bernoulli(0.3); }
    session {
      run pause (cost(pause, serial % 7 == 0 ? 2000 : 0));
      turn;
      while (more) { turn; }
    }
  }
  server { observe seen = s; run svc (cost(svc, s / 4)); }
}
"""
    samples = run_samples(prog, tmp_path, seed=5, arrivals=3000)
    streams = Streams(5)
    turns: dict = {}
    late = 0
    for sess, s in samples["seen"]:
        turns[sess] = turns.get(sess, 0) + 1
        assert s == site_exp(streams.turn_key(sess, turns[sess]), 0, 1.0)
        late += sess % 7 == 0
    assert len(turns) == 3000 and max(turns.values()) > 1 and late > 100


# ------------------------------------------------------------------ the engine's decode group
def _vllm_variant(tmp_path, name: str, sessions: int, blocks: int, single: bool, cap: str = "B",
                  fractional_prompts: bool = False):
    """examples/multi-turn/vllm.sq under closed(sessions) arrivals, a KV of `blocks` blocks (small:
    preemptions; the prefix cache full: evictions at every growth), single-turn or multi-turn, with
    `tokens cap` `cap` (a drawn one runs out among the decodes, whole or with a fraction left);
    `fractional_prompts`: prompts of any real size (prefill chunks, and so the batch's token sum,
    with a fraction)."""
    from serq.link import link_file
    text = (EXAMPLES / "multi-turn" / "vllm.sq").read_text()
    if fractional_prompts:
        assert "Size n = floor(~uniform(50, 400));" in text
        text = text.replace("Size n = floor(~uniform(50, 400));", "Size n = ~uniform(50, 400);")
    text = text.replace("arrive poisson(Lambda);", f"arrive closed({sessions});")
    text = text.replace("let max_seqs = 64;", f"let max_seqs = {sessions};")
    text = text.replace("tokens cap B;", f"tokens cap {cap};")
    if single:
        text = text.replace("set more = ~bernoulli(0.7);", "set more = 0;")
    path = tmp_path / f"{name}.sq"
    path.write_text(text)
    return link_file(path, {"blocks": str(blocks)})


def _everything(result) -> tuple:
    """A run's report and every sample it kept, in order."""
    E = result.engine
    samples = [tuple(s.values) for s in E.observes]
    samples += [tuple(s.values) for s in (E.client_ttft, E.client_tpot)] + [tuple(E.resp_values)]
    return result.json(), samples


@pytest.mark.parametrize("sessions,blocks,single,cap,fractional", [
    (64, 6000, True, "B", False), (64, 500, True, "B", False), (48, 300, False, "B", False),
    (128, 1500, False, "B", False), (16, 60, False, "B", False), (64, 6000, False, "floor(~uniform(4, 96))", False),
    (64, 400, False, "~uniform(4, 96)", False), (64, 6000, False, "B", True), (48, 300, True, "B", True)])
def test_the_decode_group_runs_what_the_walk_runs(tmp_path, monkeypatch, sessions, blocks, single, cap, fractional):
    """The decode group (serq/sim/decode_group.py) serves the decoding residents as a count and moves
    them by the clock: every report and sample is the one-by-one walk's, preemptions, evictions, a
    budget that runs out among the members and a batch's token sum with a fraction included."""
    from serq.sim import simulate, steps
    prog = _vllm_variant(tmp_path, "v", sessions, blocks, single, cap, fractional)
    runs = []
    for grouped in (True, False):
        monkeypatch.setattr(steps, "DECODE_GROUPS", grouped)
        result = simulate(prog, horizon=15.0, seed=3, keep_samples=True)
        runs.append(_everything(result))
    assert runs[0] == runs[1]
    engine = next(s for s in result.report["stages"] if s["service"] == "step")
    assert engine["mean_busy"] > sessions / 10 and (engine["preemptions"] > 0) == (blocks < 6000)


@pytest.mark.parametrize("sessions,blocks,single", [(64, 6000, True), (64, 500, True), (48, 300, False), (16, 60, False)])
def test_a_carried_decode_runs_what_the_decode_statement_runs(tmp_path, monkeypatch, sessions, blocks, single):
    """A prefill run that carries the decode run after it (compile.step_run, StepStage.chain_decode):
    every report and sample is the one of the two statements run one after the other, with
    preemptions (a carried decode preempted, its prefill again), evictions and multi-turn sessions."""
    from serq.sim import compile as compile_mod
    from serq.sim import simulate
    prog = _vllm_variant(tmp_path, "c", sessions, blocks, single)
    runs = []
    for carry in (True, False):
        monkeypatch.setattr(compile_mod, "CARRY_DECODES", carry)
        runs.append(_everything(simulate(prog, horizon=15.0, seed=5, keep_samples=True)))
    assert runs[0] == runs[1]


def test_a_carried_decode_is_what_the_program_says(tmp_path, monkeypatch):
    """The carried decode by hand: one request, prompt 5 under a budget of 8, 3 output tokens, an
    iteration of 1: the prefill at [0, 1) gives the first token, the decode (3 - 1 = 2 tokens) runs
    at [1, 2) and [2, 3) in the same residency; a decode of no work (1 output token) and a decode
    whose work is negative (the thread reports it at the decode statement) are the statement's."""
    from serq.link import link_file
    from serq.sim import compile as compile_mod
    from serq.errors import SerqError
    from serq.sim import simulate

    def program(out: str):
        path = tmp_path / f"one{out.replace('-', 'm')}.sq"
        path.write_text(f"""fn main() {{
  device gpu {{ }}
  engine llm on gpu {{
    reqs cap 4;
    tokens cap 8;
    request (prompt, o) {{
      prefill (prompt);
      decode (o - 1);
    }}
    schedule {{
      advance running;
      admit waiting while (running.preempted == 0) taking reqs (1);
    }}
    execute (1);
  }}
  pool reqs on llm {{ queue fifo; }}
  workload {{
    arrive batch(1);
    turn {{ set out = {out}; }}
  }}
  server {{ llm (5, out); }}
}}
""")
        return link_file(path)

    errors = []
    for carry in (True, False):
        monkeypatch.setattr(compile_mod, "CARRY_DECODES", carry)
        rep = simulate(program("3"), seed=1).report
        assert rep["client"]["response"]["mean"] == 3.0 and rep["client"]["ttft"]["mean"] == 1.0
        assert next(s for s in rep["stages"] if s["service"] == "step")["iterations"] == 3
        rep = simulate(program("1"), seed=1).report
        assert rep["client"]["response"]["mean"] == 1.0
        with pytest.raises(SerqError) as err:
            simulate(program("-1"), seed=1)
        errors.append(str(err.value))
    # at the decode statement (line 8), when the prefill ended (time 1), carried or not
    assert errors[0] == errors[1] and "onem1.sq:8:7:" in errors[0] and "at time 1" in errors[0] \
        and "the work of a run is -2" in errors[0]


def test_the_decode_group_agrees_on_the_oracle_iterations(monkeypatch):
    """Every vLLM oracle scenario, iteration by iteration (batch, memory, preemptions), turn by turn
    and report, with and without the decode group."""
    import dataclasses

    from serq.sim import steps
    from serq.sim.oracle_run import run_scenario
    files = sorted(p for p in (REPO / "tests" / "data" / "oracle").glob("*/*.json") if p.name != "SUMMARY.json")
    assert len(files) >= 100

    def seen(path):
        run = run_scenario(path)
        return ([dataclasses.astuple(r) for r in run.records],
                sorted((k, dataclasses.astuple(v)) for k, v in run.turns.items()), run.report)

    for path in files:
        monkeypatch.setattr(steps, "DECODE_GROUPS", True)
        grouped = seen(path)
        monkeypatch.setattr(steps, "DECODE_GROUPS", False)
        assert grouped == seen(path), path.name
