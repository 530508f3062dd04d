"""`serq run` at the command line."""

from __future__ import annotations

import json

from click.testing import CliRunner

from simtools import REPO
from serq.cli import main

MM1 = str(REPO / "examples" / "single-turn" / "mm1.sq")


def invoke(*args):
    return CliRunner().invoke(main, ["run", *args])


def test_text_report():
    res = invoke(MM1, "--horizon", "500", "--seed", "3")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "mm1.sq" in out and "seed 3" in out and "client" in out and "response" in out
    assert "stage" in out and "svc" in out and "fifo" in out


def test_json_report_and_inputs():
    res = invoke(MM1, "--horizon", "500", "--json", "--set", "rate=0.25")
    rep = json.loads(res.output)
    assert rep["report_version"] == 1 and rep["settings"]["horizon"] == 500
    assert rep["sessions"]["arrived"] < 200  # rate 0.25 over 500
    res2 = invoke(MM1, "--horizon", "500", "--json", "--", "rate=0.25")
    assert res2.output == res.output


def test_ir_file_runs_the_same(tmp_path):
    ir_path = tmp_path / "mm1.json"
    r = CliRunner().invoke(main, ["ir", MM1, "-o", str(ir_path)])
    assert r.exit_code == 0, r.output
    a = invoke(MM1, "--horizon", "300", "--json").output
    b = invoke(str(ir_path), "--horizon", "300", "--json").output
    assert json.loads(a)["client"] == json.loads(b)["client"]


def test_dump(tmp_path):
    res = invoke(MM1, "--horizon", "100", "--dump", str(tmp_path / "out"), "--json")
    assert res.exit_code == 0
    lines = (tmp_path / "out" / "client" / "response.csv").read_text().splitlines()
    assert lines[0] == "time,session,turn,value" and len(lines) - 1 == json.loads(res.output)["client"]["response"]["count"]


def test_usage_and_run_errors(tmp_path):
    res = invoke(MM1)
    assert res.exit_code == 2 and "never ends" in res.output
    res = invoke(str(tmp_path / "missing.sq"), "--horizon", "1")
    assert res.exit_code == 2 and "no such file" in res.output
    bad = tmp_path / "bad.sq"
    bad.write_text("fn main() {\n  stage svc : fifo;\n  workload { arrive batch(1); }\n"
                   "  server {\n    set g = 0.5;\n    branch (g) { run svc (cost(svc, 1)); }\n  }\n}\n")
    res = invoke(str(bad))
    assert res.exit_code == 1
    assert "bad.sq:6:5: error: at time 0, session 0 (turn 1), a guard is 0.5" in res.output
    assert "^" in res.output  # the line and a caret


def test_the_report_has_the_documented_fields():
    rep = json.loads(invoke(str(REPO / "examples" / "single-turn" / "claims.sq"), "--arrivals", "50",
                            "--json").output)
    assert list(rep) == ["report_version", "serq_version", "program", "settings", "settings_source", "end",
                         "measured", "stopped",
                         "events", "sessions", "turns", "client", "observes", "gauges", "stages", "pools",
                         "claims", "notes"]
    doc = (REPO / "docs" / "report.md").read_text()
    for key in rep:
        assert f"`{key}" in doc, key
    for key in rep["sessions"]:
        assert f"`sessions.{key}`" in doc or f".{key}`" in doc, key
    for key in rep["client"]["response"]:
        assert f"`{key}`" in doc, key
    for key in rep["gauges"]["busy_fraction"]:
        assert f"`{key}`" in doc, key
    for key in rep["stages"][0]:
        assert f"`{key}`" in doc, key
    assert rep["claims"][0]["result"] == "holds"
