"""`serq sweep`: the grid × seeds, the summary and its confidence intervals, determinism across
--jobs and Ray, Ctrl-C, and the files written."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from extras import require
from helpers import REPO
from serq.cli import main
from serq.errors import SerqError
from serq.sweep import parse_seeds, parse_values, run_sweep, summarize, sweep, t975

MM1 = str(REPO / "examples/single-turn/mm1.sq")
CLAIMS = str(REPO / "examples/single-turn/claims.sq")
VLLM = str(REPO / "examples/multi-turn/vllm.sq")


def cli(*args):
    return CliRunner().invoke(main, list(args))


def test_t_quantiles_are_students():
    from scipy.stats import t
    for df in list(range(1, 60)) + [100, 1000, 10 ** 5]:
        assert t975(df) == pytest.approx(t.ppf(0.975, df), abs=1e-7)


def test_summarize_is_the_mean_and_students_interval():
    from scipy.stats import t
    xs = [1.0, 2.0, 4.0, None, 7.0]
    s = summarize(xs)
    mean = 3.5
    std = math.sqrt(sum((x - mean) ** 2 for x in (1, 2, 4, 7)) / 3)
    assert s["n"] == 4 and s["mean"] == mean and s["std"] == pytest.approx(std)
    assert s["ci95"] == pytest.approx(t.ppf(0.975, 3) * std / 2)
    assert s["low"] == pytest.approx(mean - s["ci95"]) and s["high"] == pytest.approx(mean + s["ci95"])
    assert summarize([5.0])["ci95"] is None and summarize([None])["mean"] is None


def test_values_and_seeds_parse():
    assert parse_values("0.5,1,2") == ["0.5", "1", "2"]
    assert parse_values("max(1, 2),3") == ["max(1, 2)", "3"]
    assert parse_seeds("1..5") == [1, 2, 3, 4, 5]
    assert parse_seeds("1..3,10") == [1, 2, 3, 10]
    for bad in ("5..1", "x", "1,1", "-1"):
        with pytest.raises(SerqError):
            parse_seeds(bad)
    with pytest.raises(SerqError):
        parse_values("1,,2")


def _csvs(result, tmp_path, name):
    d = tmp_path / name
    result.write(d)
    return {f: (d / f).read_bytes() for f in ("sweep.csv", "runs.csv", "sweep.json")}


def test_results_do_not_depend_on_jobs_and_are_sorted_by_point_and_seed(tmp_path):
    grid = {"rate": ["0.5", "0.8"]}
    one = run_sweep(MM1, grid, range(1, 5), arrivals=300, jobs=1)
    two = run_sweep(MM1, grid, range(1, 5), arrivals=300, jobs=2)
    a, b = _csvs(one, tmp_path, "one"), _csvs(two, tmp_path, "two")
    assert a == b
    rows = one.run_rows()
    keys = [(r["rate"], r["seed"]) for r in rows if r["metric"] == "response.mean"]
    assert keys == [(r, s) for r in ("0.5", "0.8") for s in range(1, 5)]
    # a task is a `serq run` on that seed: the same numbers
    r = cli("run", MM1, "--set", "rate=0.8", "--seed", "3", "--arrivals", "300", "--json")
    report = json.loads(r.output)
    assert [x["value"] for x in rows if x["rate"] == "0.8" and x["seed"] == 3 and x["metric"] == "response.mean"] \
        == [report["client"]["response"]["mean"]]


def test_confidence_intervals_shrink_with_more_seeds():
    few = {r["rate"]: r for r in run_sweep(MM1, {"rate": ["0.5", "0.8"]}, range(1, 6), arrivals=300,
                                           metrics=["response.mean"], jobs=2).summary_rows()}
    many = {r["rate"]: r for r in run_sweep(MM1, {"rate": ["0.5", "0.8"]}, range(1, 21), arrivals=300,
                                            metrics=["response.mean"], jobs=2).summary_rows()}
    for rate in ("0.5", "0.8"):
        assert few[rate]["n"] == 5 and many[rate]["n"] == 20
        assert many[rate]["ci95"] < few[rate]["ci95"]
    # and the load shows: a higher rate, a longer response
    assert many["0.8"]["mean"] > many["0.5"]["mean"]


def test_the_command_writes_the_tidy_tables_and_the_json(tmp_path):
    out = tmp_path / "s"
    r = cli("sweep", MM1, "--set", "rate=0.5,0.8", "--seeds", "1..3", "--arrivals", "200", "--jobs", "2",
            "-o", str(out))
    assert r.exit_code == 0, r.output
    summary = (out / "sweep.csv").read_text().splitlines()
    assert summary[0] == "rate,metric,n,mean,ci95,low,high,std"
    metrics = ["response.count", "response.mean", "response.p50", "response.p90", "response.p99"]
    assert [ln.split(",")[1] for ln in summary[1:]] == metrics * 2  # no ttft/tpot: mm1 has no engine
    runs = (out / "runs.csv").read_text().splitlines()
    assert runs[0] == "rate,seed,metric,value" and len(runs) == 1 + 2 * 3 * len(metrics)
    data = json.loads((out / "sweep.json").read_text())
    assert data["inputs"] == {"rate": [0.5, 0.8]} and data["swept"] == ["rate"] and data["seeds"] == [1, 2, 3]
    assert data["tasks"] == {"total": 6, "done": 6, "failed": 0} and not data["interrupted"]
    assert data["settings"]["arrivals"] == 200
    assert "2 of" not in r.output and "6 of 6 runs done" in r.output


def test_every_metric_kind_is_summarised_and_metrics_can_be_chosen(tmp_path):
    result = run_sweep(CLAIMS, {}, range(1, 4), arrivals=300, jobs=1)
    names = result.metrics()
    assert any(n.startswith("observe.") for n in names)
    assert any(n.startswith("gauge.") for n in names)
    claims = [n for n in names if n.startswith("claim.")]
    assert claims
    for r in result.summary_rows():
        if r["metric"] in claims and r["mean"] is not None:
            assert 0 <= r["mean"] <= 1
    chosen = run_sweep(CLAIMS, {}, range(1, 3), arrivals=100, metrics=["gauge.*", "response.p99"], jobs=1)
    assert chosen.metrics() == ["response.p99"] + [n for n in names if n.startswith("gauge.")]  # the report order
    r = cli("sweep", CLAIMS, "--seeds", "1..2", "--arrivals", "100", "--metric", "ttft.p42", "-o", str(tmp_path / "x"))
    assert r.exit_code == 2 and "no such metric" in r.output and "response.p99" in r.output


def test_a_grid_of_two_inputs_and_fixed_inputs(tmp_path):
    result = run_sweep(VLLM, {"rate": ["0.5", "1"], "blocks": ["512", "2048"]}, [1, 2], horizon=20,
                       metrics=["ttft.p99"], jobs=2)
    assert result.swept == ["rate", "blocks"]
    assert [(r["rate"], r["blocks"]) for r in result.summary_rows()] == [
        ("0.5", "512"), ("0.5", "2048"), ("1", "512"), ("1", "2048")]
    r = cli("sweep", VLLM, "--set", "rate=0.5,1", "--set", "blocks=512", "--seeds", "1", "--horizon", "10",
            "--metric", "ttft.mean", "-o", str(tmp_path / "g"))
    assert r.exit_code == 0, r.output
    head = (tmp_path / "g" / "sweep.csv").read_text().splitlines()
    assert head[0] == "rate,blocks,metric,n,mean,ci95,low,high,std" and len(head) == 3
    assert json.loads((tmp_path / "g" / "sweep.json").read_text())["swept"] == ["rate"]


def test_usage_errors_are_messages(tmp_path):
    r = cli("sweep", MM1, "--set", "nope=1,2", "--arrivals", "10", "-o", str(tmp_path / "a"))
    assert r.exit_code == 2 and "nope" in r.output and "Traceback" not in r.output
    r = cli("sweep", MM1, "--set", "rate=0.5,1", "-o", str(tmp_path / "b"))
    assert r.exit_code == 2 and "--horizon" in r.output  # an open workload needs an end
    r = cli("sweep", MM1, "--seeds", "3..1", "--arrivals", "10")
    assert r.exit_code == 2 and "--seeds" in r.output


def test_a_failing_run_is_reported_and_the_others_kept(tmp_path):
    # rate 0.5 drains 50 arrivals by t = 200; rate 0.05 cannot: a run-time error for each of its seeds
    out = tmp_path / "f"
    r = cli("sweep", MM1, "--set", "rate=0.5,0.05", "--seeds", "1..2", "--arrivals", "50", "--horizon", "200",
            "--jobs", "2", "-o", str(out))
    assert r.exit_code == 1, r.output
    assert "rate=0.05, seed 1" in r.output and "Traceback" not in r.output
    data = json.loads((out / "sweep.json").read_text())
    assert data["tasks"] == {"total": 4, "done": 2, "failed": 2}
    assert {row["rate"] for row in data["summary"]} == {0.5}


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_interrupted_sweep_keeps_the_finished_tasks(tmp_path, jobs):
    seen = []

    def progress(done, total):
        seen.append(done)
        if done == 3:
            raise KeyboardInterrupt

    result = run_sweep(MM1, {"rate": ["0.5", "0.8"]}, range(1, 11), arrivals=200, jobs=jobs, progress=progress)
    assert result.interrupted and len(result.reports) == 3 and seen == [1, 2, 3]
    result.write(tmp_path / "i")
    data = json.loads((tmp_path / "i" / "sweep.json").read_text())
    assert data["interrupted"] and data["tasks"]["done"] == 3
    assert len({(r["rate"], r["seed"]) for r in data["runs"]}) == 3


def test_ctrl_c_writes_what_finished_and_exits_130(tmp_path):
    out = tmp_path / "c"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "serq.cli", "sweep", MM1, "--set", "rate=0.5,0.8", "--seeds", "1..400",
                          "--arrivals", "3000", "--jobs", "2", "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    # without a terminal the sweep says how far it got at every tenth of its runs: interrupt after the first
    first = p.stderr.readline()
    assert "runs done" in first, first
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    assert "(interrupted)" in stderr and "Traceback" not in stderr
    data = json.loads((out / "sweep.json").read_text())
    assert data["interrupted"] and 0 < data["tasks"]["done"] < 800
    lines = (out / "runs.csv").read_text().splitlines()
    assert len(lines) == 1 + data["tasks"]["done"] * 5


def test_ray_gives_the_local_runs_numbers_byte_for_byte(tmp_path):
    ray = require("ray", "ray")
    grid = {"rate": ["0.5", "0.8"]}
    local = run_sweep(MM1, grid, range(1, 7), arrivals=300, jobs=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = run_sweep(MM1, grid, range(1, 7), arrivals=300, ray=True)
        r = cli("sweep", MM1, "--set", "rate=0.5,0.8", "--seeds", "1..6", "--arrivals", "300", "--ray", "auto",
                "-o", str(tmp_path / "cli"))
        assert r.exit_code == 0, r.output
    finally:
        ray.shutdown()
    a, b = _csvs(local, tmp_path, "local"), _csvs(on_ray, tmp_path, "ray")
    assert a == b
    assert (tmp_path / "cli" / "sweep.csv").read_bytes() == a["sweep.csv"]
    assert (tmp_path / "cli" / "runs.csv").read_bytes() == a["runs.csv"]


def test_without_ray_the_message_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    r = cli("sweep", MM1, "--seeds", "1", "--arrivals", "10", "--ray", "auto")
    assert r.exit_code == 2 and "pip install 'serq[ray]'" in r.output


def test_parquet_tables_when_pyarrow_is_installed(tmp_path):
    pq = require("pyarrow.parquet", "parquet")
    result = run_sweep(MM1, {"rate": ["0.5", "0.8"]}, range(1, 3), arrivals=100, jobs=1)
    paths = result.write(tmp_path / "p")
    assert tmp_path / "p" / "sweep.parquet" in paths
    table = pq.read_table(tmp_path / "p" / "sweep.parquet")
    assert table.num_rows == len(result.summary_rows())
    assert table.column("rate").to_pylist()[0] == 0.5 and "ci95" in table.column_names


def test_the_api_returns_rows_or_a_dataframe():
    rows = sweep(MM1, {"rate": [0.5, 0.8]}, seeds=[1, 2], arrivals=100, frame=False, jobs=1)
    assert isinstance(rows, list) and rows[0]["rate"] == "0.5" and rows[0]["metric"] == "response.count"
    runs = sweep(MM1, {"rate": [0.5]}, seeds=[1, 2], arrivals=100, frame=False, runs=True, jobs=1)
    assert {r["seed"] for r in runs} == {1, 2}
    pd = require("pandas", "pandas")
    df = sweep(MM1, {"rate": [0.5, 0.8]}, seeds=[1, 2], arrivals=100, jobs=1)
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["rate", "metric", "n", "mean", "ci95", "low",
                                                                 "high", "std"]
    assert df["rate"].dtype.kind == "f"
