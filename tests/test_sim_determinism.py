"""Reproducibility: one seed, one report; the workload's marks are the same under every deployment."""

from __future__ import annotations

import json

from click.testing import CliRunner

from simtools import REPO, run_samples
from serq.cli import main
from serq.link import link_file
from serq.sim import simulate


def cli_json(*args) -> str:
    res = CliRunner().invoke(main, ["run", *args, "--json"])
    assert res.exit_code == 0, res.output
    return res.output


def test_same_seed_same_bytes():
    for ex in ("single-turn/mm1.sq", "multi-turn/agent.sq", "single-turn/kv_pool.sq"):
        path = str(REPO / "examples" / ex)
        a = cli_json(path, "--seed", "7", "--horizon", "3000")
        b = cli_json(path, "--seed", "7", "--horizon", "3000")
        assert a == b


def test_different_seeds_different_samples():
    path = str(REPO / "examples" / "multi-turn" / "agent.sq")
    a = json.loads(cli_json(path, "--seed", "1", "--horizon", "3000"))
    b = json.loads(cli_json(path, "--seed", "2", "--horizon", "3000"))
    assert a["client"]["response"] != b["client"]["response"]
    assert a["observes"]["prompt_tokens"]["mean"] != b["observes"]["prompt_tokens"]["mean"]


WORKLOAD = """
  workload {
    arrive poisson(0.5);
    init { set ctx = ~uniform(0, 10); }
    turn { Size s = ~exp(1); set more = ~bernoulli(0.5); }
    session {
      turn;
      while (more) { run pause (cost(pause, ~exp(2))); turn; }
    }
  }
"""


def test_a_session_turn_draws_the_same_marks_under_every_deployment(tmp_path):
    fifo = "fn main() {\n  stage svc : fifo;\n  stage pause : delay;\n" + WORKLOAD + \
        "  server { observe seen = s; observe c = ctx; run svc (cost(svc, s)); }\n}\n"
    ps = "fn main() {\n  stage svc : ps(3);\n  stage pause : delay;\n  pool kv { cap 2; }\n" + WORKLOAD + \
        "  server { observe seen = s; observe c = ctx; hold kv (cost(kv, 1)) { run svc (cost(svc, 2 * s)); } }\n}\n"
    a = run_samples(fifo, tmp_path, name="a.sq", horizon=500.0, seed=3)
    b = run_samples(ps, tmp_path, name="b.sq", horizon=500.0, seed=3)

    # the sessions' turns draw the same sizes whatever the server does to them (ordered per session)
    def per_session(s):
        out = {}
        for sess, v in s["seen"]:
            out.setdefault(sess, []).append(v)
        return out
    pa, pb = per_session(a), per_session(b)
    common = set(pa) & set(pb)
    assert len(common) > 100
    for sess in common:
        n = min(len(pa[sess]), len(pb[sess]))
        assert pa[sess][:n] == pb[sess][:n]
    ca = dict(a["c"])
    cb = dict(b["c"])
    assert all(ca[k] == cb[k] for k in set(ca) & set(cb))


def test_seeds_give_independent_replications():
    program = link_file(REPO / "examples" / "single-turn" / "mm1.sq")
    means = {simulate(program, seed=s, horizon=2000.0).report["client"]["response"]["mean"] for s in range(1, 6)}
    assert len(means) == 5


def test_turn_draws_follow_the_documented_streams(tmp_path):
    """Draw j of session s's turn k reads sub-stream j of key(s, k) (serq/sim/rng.py, docs/report.md)."""
    from serq.sim.rng import Streams, site_exp, site_uniform
    prog = """fn main() {
  stage svc : delay;
  workload {
    arrive batch(3);
    init { set a = ~exp(2); set more = serial < 2; }
    turn { Size s = ~exp(1); Size u = ~uniform(0, 4); }
    session { turn; while (more) { set more = 0; run svc (cost(svc, 1)); turn; } }
  }
  server { observe seen_s = s; observe seen_u = u; observe seen_a = a; run svc (cost(svc, s)); }
}
"""
    samples = run_samples(prog, tmp_path, seed=11)
    streams = Streams(11)
    turns: dict = {}
    for (sess, s), (_, u), (_, a) in zip(samples["seen_s"], samples["seen_u"], samples["seen_a"]):
        turns[sess] = turns.get(sess, 0) + 1
        key = streams.turn_key(sess, turns[sess])
        assert s == site_exp(key, 0, 1.0)
        assert u == site_uniform(key, 1, 0.0, 4.0)
        assert a == site_exp(streams.turn_key(sess, 0), 0, 2.0)
    assert turns == {0: 2, 1: 2, 2: 1}
