"""`serq ir` and `serq check`: output, inputs, errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from helpers import REPO
from serq.cli import main

MG1 = str(REPO / "examples/single-turn/mg1.sq")


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_ir_prints_canonical_json_twice_identically():
    a, b = run("ir", MG1), run("ir", MG1)
    assert a.exit_code == 0 and a.output == b.output
    data = json.loads(a.output)
    assert data["workload"]["arrival"] == {"kind": "poisson", "rate": 0.8,
                                           "at": {"file": "mg1.sq", "line": 13, "col": 5}}


def test_ir_writes_an_output_file(tmp_path):
    out = tmp_path / "mg1.ir.json"
    assert run("ir", MG1, "-o", str(out)).exit_code == 0
    assert json.loads(out.read_text())["version"] == 1


def test_set_supplies_a_declared_input_and_gives_the_ir_of_the_written_value(tmp_path):
    supplied = json.loads(run("ir", MG1, "--set", "rate=0.5").output)
    written = tmp_path / "mg1.sq"
    written.write_text((REPO / "examples/single-turn/mg1.sq").read_text()
                       .replace('args.number("rate", 0.8)', 'args.number("rate", 0.5)'))
    by_hand = json.loads(run("ir", str(written)).output)
    assert supplied["workload"] == by_hand["workload"]
    assert supplied["inputs"] == by_hand["inputs"]


def test_inputs_after_double_dash_and_from_an_instance_file(tmp_path):
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps({"rate": 0.25}))
    a = json.loads(run("ir", MG1, "--", "rate=0.25").output)
    b = json.loads(run("ir", MG1, "--instance", str(inst)).output)
    assert a["workload"]["arrival"]["rate"] == b["workload"]["arrival"]["rate"] == 0.25


def test_supplied_expression_is_resolved_at_link_time():
    data = json.loads(run("ir", MG1, "--set", "rate=1/4").output)
    assert data["workload"]["arrival"]["rate"] == 0.25


def test_an_undeclared_input_is_a_usage_error():
    r = CliRunner().invoke(main, ["ir", MG1, "--set", "nope=1"])
    assert r.exit_code == 2
    assert "no input named `nope`" in r.output


def test_a_malformed_set_is_a_usage_error():
    r = CliRunner().invoke(main, ["ir", MG1, "--set", "rate"])
    assert r.exit_code == 2 and "write name=value" in r.output


def test_link_error_prints_location_line_and_caret(tmp_path):
    bad = tmp_path / "bad.sq"
    bad.write_text("fn main() {\n  stage svc : fifo;\n  workload { arrive poisson(1); }\n  server { run svc (1); }\n}\n")
    r = CliRunner().invoke(main, ["check", str(bad)])
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].startswith(f"{bad}:4:21: error:"), lines[0]
    assert lines[1] == "    server { run svc (1); }"
    assert lines[2].strip() == "^"


def test_check_links_every_example_folder():
    r = CliRunner().invoke(main, ["check", str(REPO / "examples")])
    assert r.exit_code == 0, r.output
    assert "program(s) link" in r.output


def test_check_validates_hand_written_ir(tmp_path):
    data = json.loads(run("ir", MG1).output)
    data["server"].insert(0, {"kind": "turn"})
    f = tmp_path / "x.ir.json"
    f.write_text(json.dumps(data))
    r = CliRunner().invoke(main, ["check", str(f)])
    assert r.exit_code == 1 and "a turn stands in the session" in r.output


def test_schema_is_printed():
    assert '"Program"' in run("ir", "--schema").output or '"title": "Program"' in run("ir", "--schema").output


def test_missing_file_exits_2_without_traceback():
    p = subprocess.run([sys.executable, "-m", "serq.cli", "ir", "no/such.sq"], capture_output=True, text=True,
                       cwd=REPO)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and "no such file" in p.stderr


def test_parse_error_exits_1_without_traceback(tmp_path):
    bad = tmp_path / "bad.sq"
    bad.write_text("fn main() { stage svc : ; }")
    p = subprocess.run([sys.executable, "-m", "serq.cli", "ir", str(bad)], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 1
    assert "Traceback" not in p.stderr
    assert f"{bad}:1:25: error: unexpected ';'" in p.stderr


def test_an_input_may_give_the_closed_population(tmp_path):
    prog = tmp_path / "closed.sq"
    prog.write_text((REPO / "examples/multi-turn/closed.sq").read_text())
    data = json.loads(run("ir", str(prog), "--set", "sessions=7").output)
    assert data["workload"]["arrival"] == {"kind": "closed", "sessions": 7,
                                           "at": {"file": "closed.sq", "line": 14, "col": 5}}


def test_a_run_imports_only_what_it_runs():
    """`serq run` loads its own command's modules, not the Lean driver, the oracle runner or the
    sweep and plot code (the lazy command group); `serq --help` still lists every command."""
    code = ("import sys; from serq.cli import main\n"
            "try:\n    main(['run', sys.argv[1], '--arrivals', '3'])\nexcept SystemExit as e:\n    assert not e.code\n"
            "print(sorted(m for m in ('serq.leangen.build', 'serq.leangen.commands', 'serq.sim.oracle_run',"
            " 'serq.explore') if m in sys.modules), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "examples/single-turn/mm1.sq")],
                         capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "[]"
    listed = run("--help").output
    for command in ("check", "draw", "ir", "lean", "oracle", "plot", "run", "sweep", "target"):
        assert f"\n  {command} " in listed
    assert "export" in run("lean", "--help").output
