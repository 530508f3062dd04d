"""`serq plot`: the figures of a dump and of a sweep, on files, with the metrics' names on the axes."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from extras import require
from helpers import REPO
from serq.cli import main
from serq.sweep import run_sweep

VLLM = str(REPO / "examples/multi-turn/vllm.sq")
MM1 = str(REPO / "examples/single-turn/mm1.sq")


@pytest.fixture(autouse=True)
def _matplotlib():
    require("matplotlib", "plot")


def cli(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    d = tmp_path_factory.mktemp("dump")
    r = cli("run", VLLM, "--horizon", "60", "--warmup", "5", "--dump", str(d))
    assert r.exit_code == 0, r.output
    return d


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    run_sweep(VLLM, {"rate": ["0.5", "1", "2"], "blocks": ["512", "2048"]}, [1, 2], horizon=20, jobs=2).write(d)
    return d


def test_a_dump_gives_cdfs_gauges_and_histograms(dump):
    from serq.plot import plot_dump
    figs = plot_dump(dump)
    assert set(figs) == {"client", "gauges", "observes"}
    client = figs["client"].axes
    assert [a.get_xlabel() for a in client] == ["ttft (s)", "tpot (s)", "response (s)"]
    assert all(a.get_title().startswith(m) for a, m in zip(client, ("ttft", "tpot", "response")))
    assert all("ttft" in client[0].get_ylabel() for _ in [0])
    gauges = figs["gauges"].axes
    assert [a.get_ylabel() for a in gauges] == ["kv_used", "waiting_requests"]
    assert all(a.get_xlabel() == "time (s)" for a in gauges)
    observes = figs["observes"].axes
    assert [a.get_xlabel() for a in observes] == ["hit", "prefill_tokens"]
    assert all(a.get_ylabel() == "samples" for a in observes)
    # a CDF climbs to 1
    ys = client[2].get_lines()[0].get_ydata()
    assert ys[-1] == pytest.approx(1.0) and all(b >= a for a, b in zip(ys, ys[1:]))


def test_the_command_writes_png_and_svg(dump, tmp_path):
    out = tmp_path / "figs"
    r = cli("plot", str(dump), "-o", str(out), "--format", "png,svg")
    assert r.exit_code == 0, r.output
    for name in ("client", "gauges", "observes"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert ET.parse(out / f"{name}.svg").getroot().tag.endswith("svg")
    r = cli("plot", str(dump))
    assert r.exit_code == 0 and (dump / "plots" / "client.png").exists()


def test_a_program_without_an_engine_has_no_ttft_and_no_gauges(tmp_path):
    from serq.plot import plot_dump
    r = cli("run", MM1, "--arrivals", "300", "--dump", str(tmp_path))
    assert r.exit_code == 0
    figs = plot_dump(tmp_path)
    assert set(figs) == {"client"} and [a.get_xlabel() for a in figs["client"].axes] == ["response (s)"]


def test_a_sweep_plots_a_metric_against_an_input_one_line_per_other_input(swept, tmp_path):
    from serq.plot import plot_sweep
    fig = plot_sweep(swept, x="rate", y="ttft.p99")
    (ax,) = fig.axes
    assert ax.get_ylabel() == "ttft.p99 (s)" and ax.get_xlabel() == "rate"
    assert "ttft.p99" in ax.get_title() and "95% CI" in ax.get_title() and "2 seeds" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["blocks = 512", "blocks = 2048"]
    assert len(ax.containers) == 2  # two error-bar lines
    xs = list(ax.containers[0].lines[0].get_xdata())
    assert xs == [0.5, 1, 2]
    fig = plot_sweep(swept, x="blocks", y="response.mean")
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["rate = 0.5", "rate = 1", "rate = 2"]
    assert fig.axes[0].get_ylabel() == "response.mean (s)"


def test_the_sweep_command_writes_its_files(swept, tmp_path):
    r = cli("plot", str(swept), "--x", "rate", "--y", "ttft.p99", "--y", "response.mean", "--format", "svg")
    assert r.exit_code == 0, r.output
    assert (swept / "ttft.p99-vs-rate.svg").exists() and (swept / "response.mean-vs-rate.svg").exists()
    out = tmp_path / "one.png"
    r = cli("plot", str(swept), "--x", "blocks", "--y", "ttft.p99", "-o", str(out))
    assert r.exit_code == 0 and out.read_bytes()[:4] == b"\x89PNG"
    # two swept inputs: name the one on the x axis
    r = cli("plot", str(swept), "--y", "ttft.p99")
    assert r.exit_code == 2 and "rate, blocks" in r.output
    r = cli("plot", str(swept), "--x", "rate", "--y", "ttft.p42")
    assert r.exit_code == 2 and "no such metric" in r.output and "ttft.p99" in r.output


def test_a_span_of_decades_is_drawn_on_log_axes(tmp_path):
    from serq.plot import plot_sweep
    rows = [{"rate": r, "metric": "ttft.p99", "n": 3, "mean": m, "ci95": m / 10, "low": 0, "high": 0, "std": 0}
            for r, m in ((1, 0.01), (10, 0.1), (100, 5.0))]
    (tmp_path / "sweep.json").write_text(json.dumps({"program": "x.sq", "inputs": {"rate": [1, 10, 100]},
                                                     "swept": ["rate"], "seeds": [1, 2, 3], "metrics": ["ttft.p99"],
                                                     "summary": rows}))
    ax = plot_sweep(tmp_path, y="ttft.p99").axes[0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    rows[2]["mean"] = 0.02
    rows[2]["rate"] = 2
    (tmp_path / "sweep.json").write_text(json.dumps({"program": "x.sq", "inputs": {"rate": [1, 10, 2]},
                                                     "swept": ["rate"], "seeds": [1], "metrics": ["ttft.p99"],
                                                     "summary": rows}))
    ax = plot_sweep(tmp_path, y="ttft.p99").axes[0]
    assert ax.get_yscale() == "linear" and ax.get_xscale() == "linear"


def test_a_folder_that_is_neither_and_a_missing_matplotlib(tmp_path, monkeypatch):
    r = cli("plot", str(tmp_path))
    assert r.exit_code == 2 and "serq run --dump" in r.output
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    (tmp_path / "sweep.json").write_text("{}")
    r = cli("plot", str(tmp_path), "--y", "x")
    assert r.exit_code == 2 and "pip install 'serq[plot]'" in r.output
