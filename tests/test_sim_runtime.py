"""Run-time errors, rejection, settings and the drain: each names the session and the statement."""

from __future__ import annotations

import pytest

from simtools import run_error, run_example, run_samples, run_text
from serq.errors import SerqError


def prog(server: str, decls: str = "", workload: str = "arrive batch(1);") -> str:
    return f"""fn main() {{
  stage svc : fifo;
  {decls}
  workload {{ {workload} }}
  server {{
    {server}
  }}
}}
"""


def test_branch_guard_not_0_or_1(tmp_path):
    e = run_error(prog("set g = serial + 0.5;\n    branch (g) { run svc (cost(svc, 1)); }"), tmp_path)
    assert e.kind == "run" and "guard is 0.5" in e.message and "session 0" in e.message
    assert e.span.line == 7


def test_negative_amount(tmp_path):
    e = run_error(prog("set w = serial - 4;\n    run svc (cost(svc, w));"), tmp_path)
    assert "the work of a run is -4" in e.message and e.span.line == 7


def test_nan_amount(tmp_path):
    e = run_error(prog("set z = serial;\n    run svc (cost(svc, z / z));"), tmp_path)
    assert "NaN" in e.message and e.span.line == 7


def test_index_out_of_range(tmp_path):
    e = run_error(prog("run arr[serial + 5] (cost(arr, 1));", decls="stage arr[2] : fifo;"), tmp_path)
    assert "index 5 is out of range" in e.message and "members 0 to 1" in e.message and e.span.line == 6


def test_renewal_gap_not_positive(tmp_path):
    e = run_error(prog("run svc (cost(svc, 1));", workload="arrive renewal(~uniform(-2, 1));"),
                  tmp_path, horizon=100.0)
    assert "renewal gap" in e.message and "positive" in e.message


def test_a_million_statements_without_blocking(tmp_path):
    e = run_error(prog("set z = 0;\n    loop { run svc (cost(svc, z)); }"), tmp_path)
    assert "a million statements" in e.message and "session 0" in e.message


def test_ready_a_thousand_times_at_one_instant(tmp_path):
    e = run_error(prog("set z = 0;\n    loop { hold kv (cost(kv, 1)) { run svc (cost(svc, z)); } }",
                       decls="pool kv { cap 4; }"), tmp_path)
    assert "1000 times at one instant" in e.message


def test_a_session_may_not_end_while_a_leg_runs(tmp_path):
    e = run_error(prog("fork { run svc (cost(svc, 1)); }\n    branch (serial == 1) { join; }"), tmp_path)
    assert "ended while 1 of its legs still run" in e.message
    assert (e.span.line, e.span.col) == (6, 5)  # the fork whose leg outlives the session


def test_bad_draw_parameters(tmp_path):
    e = run_error(prog("set p = serial + 2;\n    set b = ~bernoulli(p);"), tmp_path)
    assert "~bernoulli(2)" in e.message and e.span.line == 7


def test_a_request_that_can_never_fit_is_rejected(tmp_path):
    text = prog("set need = serial == 1 ? 9 : 2;\n    hold kv (cost(kv, need)) { run svc (cost(svc, 1)); }",
                decls="pool kv { cap 5; }", workload="arrive batch(3);")
    rep = run_text(text, tmp_path)
    assert rep["sessions"]["rejected"] == 1 and rep["sessions"]["refused"] == 1
    assert rep["pools"][0]["rejected"] == 1 and rep["pools"][0]["admissions"] == 2
    assert rep["client"]["response"]["count"] == 2  # the refused turn is not answered


def test_over_cap_is_named_at_the_end(tmp_path):
    # units that read the pool's state are judged at every try: this one waits, and is named
    text = prog("hold kv (cost(kv, used(kv) + 6)) { run svc (cost(svc, 1)); }", decls="pool kv { cap 5; }")
    rep = run_text(text, tmp_path)
    pool = rep["pools"][0]
    assert pool["over_cap"] == 1 and pool["over"][0]["asks"] == 6 and pool["queued_at_end"] == 1
    assert any(n.startswith("over: pool kv") for n in rep["notes"])


def test_arrivals_drain(tmp_path):
    rep = run_example("single-turn/mm1.sq", arrivals=500, seed=2)
    assert rep["stopped"] == "drained" and rep["sessions"]["arrived"] == 500
    assert rep["sessions"]["live"] == 0 and rep["client"]["response"]["count"] == 500


def test_arrivals_not_drained_by_the_horizon_is_an_error():
    with pytest.raises(SerqError) as info:
        run_example("single-turn/mm1.sq", arrivals=500, horizon=100.0)
    # on seed 1 the queue is empty at 100, and 418 of the 500 have not arrived: not drained either
    assert "418 of the 500 have not arrived at the horizon (100): the run did not drain them" in info.value.message
    with pytest.raises(SerqError) as info:
        run_example("single-turn/mm1.sq", arrivals=500, horizon=100.0, seed=0)
    assert "of the sessions are still live and" in info.value.message
    assert "have not arrived at the horizon (100)" in info.value.message


def test_draining_before_the_warmup_is_an_error():
    with pytest.raises(SerqError) as info:
        run_example("single-turn/mm1.sq", arrivals=5, warmup=1000.0)
    assert "at or before the warm-up" in info.value.message


@pytest.mark.parametrize("settings, words", [
    (dict(), "never ends"),
    (dict(horizon=10.0, warmup=20.0), "not before the horizon"),
    (dict(horizon=10.0, seed=-1), "nonnegative integer"),
    (dict(horizon=-1.0), "positive time"),
])
def test_settings_that_cannot_run(settings, words):
    with pytest.raises(SerqError) as info:
        run_example("single-turn/mm1.sq", **settings)
    assert words in info.value.message and info.value.kind == "usage"


def test_arrivals_count_open_workloads_only():
    with pytest.raises(SerqError) as info:
        run_example("multi-turn/closed.sq", arrivals=10)
    assert "open arrivals" in info.value.message


def test_warmup_starts_the_measurement(tmp_path):
    text = prog("run svc (cost(svc, 1));\n    observe at = now;", workload="arrive renewal(2);")
    s = run_samples(text, tmp_path, horizon=10.0, warmup=5.0)
    # arrivals at 2, 4, 6, 8, 10 (the first after one gap); answered at 3, 5, 7, 9, 11 (beyond)
    assert [v for _, v in s["at"]] == [5.0, 7.0, 9.0]
    rep = s["_report"]
    assert rep["stages"][0]["completed"] == 3 and rep["measured"] == 5.0
    assert rep["stages"][0]["utilization"] == pytest.approx(0.4)  # busy [6,7) and [8,9) of [5, 10)


def test_machine_errors_are_reported_without_a_traceback(tmp_path):
    # a ps capacity that drops to 0: the stage's own evaluation fails, not a session's statement
    text = prog("run cpu (cost(cpu, 1));", decls="stage cpu : ps(2 - present);", workload="arrive batch(3);")
    e = run_error(text, tmp_path)
    assert "ps stage `cpu`" in e.message and "capacity" in e.message and e.kind == "run"
    assert (e.span.line, e.span.col) == (3, 3)  # the stage's declaration


def test_infinite_work_never_completes(tmp_path):
    text = prog("set w = 1 / 0;\n    run svc (cost(svc, w));", workload="arrive batch(1);")
    rep = run_text(text, tmp_path)
    assert rep["stopped"] == "idle" and rep["sessions"]["live"] == 1 and rep["end"] == 0.0
