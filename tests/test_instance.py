"""Instance files (`--instance F.sq` / `F.json`): execution settings and input values beside a program.

The reference: "Execution settings are supplied by the CLI flags, an explicit instance file, or the
host API; run { ... } is not a model declaration. The resolved IR includes the execution settings."
docs/language.md, *Instance files*, is the format and the rules these tests hold it to.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import REPO
from serq.cli import main
from serq.errors import SerqError
from serq.instance import json_instance, parse_instance
from serq.ir import models as ir
from serq.link import link_file
from serq.sim import simulate

MM1 = str(REPO / "examples" / "single-turn" / "mm1.sq")
MG1 = str(REPO / "examples" / "single-turn" / "mg1.sq")
CLOSED = str(REPO / "examples" / "multi-turn" / "closed.sq")


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def report(*args: str) -> dict:
    res = invoke("run", *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def without_sources(rep: dict) -> dict:
    return {k: v for k, v in rep.items() if k != "settings_source"}


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


INSTANCE = """// mm1 at a lighter load
run {
  horizon 400;   // time
  warmup 20;     /* measured from here */
  seed 3;
}
let rate = 0.5;
"""


# ---------------------------------------------------------------- the same run as the flags
def test_an_sq_instance_runs_as_the_equivalent_flags(tmp_path):
    inst = write(tmp_path, "i.sq", INSTANCE)
    by_file = report(MM1, "--instance", inst)
    by_flags = report(MM1, "--horizon", "400", "--warmup", "20", "--seed", "3", "--set", "rate=0.5")
    assert without_sources(by_file) == without_sources(by_flags)
    assert by_file["settings"] == {"seed": 3, "horizon": 400, "warmup": 20, "arrivals": None}
    assert by_file["settings_source"] == {"seed": f"instance {inst}", "horizon": f"instance {inst}",
                                          "warmup": f"instance {inst}", "arrivals": "default"}
    assert by_flags["settings_source"] == {"seed": "--seed", "horizon": "--horizon", "warmup": "--warmup",
                                           "arrivals": "default"}


def test_arrivals_and_a_subset_of_the_settings(tmp_path):
    inst = write(tmp_path, "i.sq", "run { arrivals 300; } let rate = 0.5;")
    by_file = report(MM1, "--instance", inst)
    assert without_sources(by_file) == without_sources(report(MM1, "--arrivals", "300", "--set", "rate=0.5"))
    assert by_file["sessions"]["arrived"] == 300 and by_file["stopped"] == "drained"
    assert by_file["settings_source"]["arrivals"] == f"instance {inst}"
    assert by_file["settings_source"]["seed"] == "default" and by_file["settings"]["seed"] == 1


def test_a_binding_is_a_constant_expression_as_set_takes_it(tmp_path):
    inst = write(tmp_path, "i.sq", "let rate = 1 / 4;")
    a = json.loads(invoke("ir", MM1, "--instance", inst).output)
    b = json.loads(invoke("ir", MM1, "--set", "rate=1/4").output)
    assert a["workload"] == b["workload"] and a["workload"]["arrival"]["rate"] == 0.25
    # `inf` and a negative number are settings' and bindings' values as in the language
    horizon = write(tmp_path, "h.sq", "run { horizon inf; }")
    assert json.loads(invoke("ir", MM1, "--instance", horizon).output)["settings"]["horizon"] == "inf"


# ---------------------------------------------------------------- flags override
def test_flags_override_the_instance_file(tmp_path):
    inst = write(tmp_path, "i.sq", INSTANCE)
    rep = report(MM1, "--instance", inst, "--seed", "5", "--set", "rate=0.25")
    assert rep["settings"]["seed"] == 5 and rep["settings_source"]["seed"] == "--seed"
    assert rep["settings"]["horizon"] == 400 and rep["settings_source"]["horizon"] == f"instance {inst}"
    assert without_sources(rep) == without_sources(
        report(MM1, "--horizon", "400", "--warmup", "20", "--seed", "5", "--set", "rate=0.25"))
    after_dashes = invoke("run", MM1, "--instance", inst, "--json", "--", "rate=0.25")
    assert after_dashes.exit_code == 0, after_dashes.output
    assert without_sources(json.loads(after_dashes.output)) == without_sources(
        report(MM1, "--instance", inst, "--set", "rate=0.25"))
    # a flag also lifts the file's warm-up above a horizon it overrides
    late = write(tmp_path, "late.sq", "run { horizon 10; warmup 20; }")
    assert report(MM1, "--instance", late, "--horizon", "50")["settings"]["warmup"] == 20


# ---------------------------------------------------------------- refusals, at their location
REFUSALS = [
    ("run {\n  horizon 10;\n  sed 1;\n}\n", 3, 3,
     "no setting named `sed`: a `run` block sets horizon, warmup, seed, arrivals"),
    ("let nope = 1;\n", 1, 5, "no input named `nope` (the program declares: rate)"),
    ("let lambda = 1;\n", 1, 5,
     "`lambda` is the let of the input \"rate\": an instance binds an input by its argument name"),
    ("run { horizon 10; seed 1; seed 2; }\n", 1, 27, "`seed` is set twice in the `run` block (first at {f}:1:19)"),
    ("run { horizon 10;\n seed -1; }\n", 2, 7, "seed -1: a seed is a nonnegative integer"),
    ("run { horizon 10; seed 1.5; }\n", 1, 24, "seed 1.5: a seed is a nonnegative integer"),
    ("run { horizon 10; warmup 20; }\n", 1, 26,
     "warmup 20 is not before the horizon 10 (instance {f}): nothing would be measured"),
    ("run { arrivals 2.5; }\n", 1, 16, "arrivals 2.5: the arrivals are a positive integer"),
    ("run { arrivals 0; }\n", 1, 16, "arrivals 0: the arrivals are a positive integer"),
    ("run { horizon -5; }\n", 1, 15, "horizon -5: the horizon is a positive time (or inf)"),
    ("run { horizon 10; warmup inf; }\n", 1, 26, "warmup inf: the warm-up is a nonnegative, finite time"),
    ("run { horizon 10 * 2; }\n", 1, 15, "`horizon` is a number or inf, as its flag --horizon takes"),
    ("run { seed = 1; }\n", 1, 7, "a setting is written `seed VALUE;`, without `=`"),
    ("run { horizon 10; }\nrun { seed 2; }\n", 2, 1,
     "a second `run` block: an instance file has one (the first is at {f}:1:1)"),
    ("let rate = 1;\nlet rate = 2;\n", 2, 5, "input `rate` is bound twice (first at {f}:1:5)"),
    ("run { horizon 10 }\n", 1, 18, "unexpected '}'"),
    ("run { horizon 10; } @\n", 1, 21, "unexpected character '@'"),
    ("let rate = 1\n", 2, 1, "unexpected end of the file"),
]


@pytest.mark.parametrize("text,line,col,message", REFUSALS, ids=[r[3][:40] for r in REFUSALS])
def test_each_refusal_is_at_its_location(tmp_path, text, line, col, message):
    inst = write(tmp_path, "bad.sq", text)
    res = invoke("run", MM1, "--instance", inst, "--horizon", "5") if "horizon" not in text else \
        invoke("run", MM1, "--instance", inst)
    assert res.exit_code == 2, res.output
    first = res.output.splitlines()[0]
    assert first.startswith(f"{inst}:{line}:{col}: error: "), first
    assert message.replace("{f}", inst) in first, first
    if line <= text.count("\n"):
        assert "^" in res.output  # the line and a caret


def test_the_workloads_refusals_name_the_instance_line(tmp_path):
    never = write(tmp_path, "never.sq", "// no end\nrun { horizon inf; }\n")
    res = invoke("run", MM1, "--instance", never)
    assert res.exit_code == 2 and res.output.startswith(f"{never}:2:15: error: an open workload (poisson) "
                                                        "with no horizon never ends")
    closed = write(tmp_path, "closed.sq", "run { horizon 10; arrivals 5; }\n")
    res = invoke("run", CLOSED, "--instance", closed)
    assert res.exit_code == 2 and res.output.startswith(f"{closed}:1:28: error: arrivals 5: the arrivals count "
                                                        "open arrivals (poisson, renewal)")
    # a count of arrivals the horizon cuts short is the run's error, at the count's line
    short = write(tmp_path, "short.sq", "run {\n  horizon 100;\n  arrivals 500;\n}\n")
    res = invoke("run", MM1, "--instance", short)
    assert res.exit_code == 1 and res.output.startswith(f"{short}:3:12: error: arrivals 500: 418 of the 500 have "
                                                        "not arrived at the horizon (100)")
    # a binding the linker cannot fold is refused where the file writes it, as `--set`'s would be
    bad = write(tmp_path, "bad.sq", "run { horizon 10; }\nlet rate = 2 * nope;\n")
    res = invoke("run", MM1, "--instance", bad)
    assert res.exit_code == 1 and res.output.startswith(f"{bad}:2:16: error: input `rate` is a constant: "
                                                        "`nope` is not a constant")


def test_a_refused_instance_prints_no_traceback(tmp_path):
    inst = write(tmp_path, "bad.sq", "run { horizon 10; seed -1; }\n")
    p = subprocess.run([sys.executable, "-m", "serq.cli", "run", MM1, "--instance", inst], capture_output=True,
                       text=True, cwd=REPO)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith(f"{inst}:1:24: error: seed -1: a seed is a nonnegative integer")
    missing = subprocess.run([sys.executable, "-m", "serq.cli", "run", MM1, "--instance", str(tmp_path / "no.sq")],
                             capture_output=True, text=True, cwd=REPO)
    assert missing.returncode == 2 and "no such instance file" in missing.stderr and "Traceback" not in missing.stderr


# ---------------------------------------------------------------- the header
def test_the_header_says_where_each_setting_came_from(tmp_path):
    inst = write(tmp_path, "i.sq", "run { horizon 100; }\n")
    res = invoke("run", MM1, "--instance", inst, "--warmup", "10")
    assert res.exit_code == 0, res.output
    header = res.output.splitlines()[0]
    assert "seed 1 (default)" in header
    assert f"horizon 100 (instance {inst})" in header
    assert "warmup 10 (--warmup)" in header
    assert "arrivals" not in header  # not set: not shown
    res = invoke("run", MM1, "--arrivals", "20")
    assert "arrivals 20 (--arrivals)" in res.output.splitlines()[0]


# ---------------------------------------------------------------- JSON, both forms
def test_json_instances_flat_and_structured(tmp_path):
    flat = write(tmp_path, "flat.json", json.dumps({"rate": 0.5}))
    structured = write(tmp_path, "s.json", json.dumps({"inputs": {"rate": 0.5},
                                                       "settings": {"horizon": 400, "warmup": 20, "seed": 3}}))
    sq = write(tmp_path, "i.sq", INSTANCE)
    a = report(MM1, "--instance", structured)
    assert without_sources(a) == without_sources(report(MM1, "--instance", sq))
    assert a["settings_source"]["seed"] == f"instance {structured}"
    b = report(MM1, "--instance", flat, "--horizon", "400", "--warmup", "20", "--seed", "3")
    assert without_sources(b) == without_sources(a)
    # settings alone, the horizon "inf" as the IR writes it, an expression's text as an input
    only = write(tmp_path, "only.json", json.dumps({"settings": {"horizon": "inf", "arrivals": 30}}))
    assert report(MM1, "--instance", only)["sessions"]["arrived"] == 30
    text = write(tmp_path, "text.json", json.dumps({"inputs": {"rate": "1/4"}}))
    assert json.loads(invoke("ir", MM1, "--instance", text).output)["workload"]["arrival"]["rate"] == 0.25


JSON_REFUSALS = [
    ({"settings": {"horizon": 10, "sed": 1}}, "`settings.sed`: no setting named `sed`"),
    ({"inputs": {"nope": 1}}, "`inputs.nope`: no input named `nope` (the program declares: rate)"),
    ({"nope": 1}, "`nope`: no input named `nope`"),
    ({"settings": {"seed": -1}}, "`settings.seed`: seed -1: a seed is a nonnegative integer"),
    ({"settings": {"arrivals": 2.5}}, "`settings.arrivals`: arrivals 2.5: the arrivals are a positive integer"),
    ({"settings": {"horizon": True}}, "`settings.horizon`: the horizon is a positive time (or inf)"),
    ({"settings": {"horizon": 10, "warmup": 20}},
     "`settings.warmup`: warmup 20 is not before the horizon 10 (instance {f})"),
    ({"settings": {"horizon": 10}, "rate": 1}, "`settings`: an input's value is a number"),
    ([1, 2], "a JSON object"),
]


@pytest.mark.parametrize("data,message", JSON_REFUSALS, ids=[m[:40] for _, m in JSON_REFUSALS])
def test_json_refusals_name_the_key(tmp_path, data, message):
    inst = write(tmp_path, "bad.json", json.dumps(data))
    res = invoke("run", MM1, "--instance", inst, "--horizon", "5") if "horizon" not in json.dumps(data) else \
        invoke("run", MM1, "--instance", inst)
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: instance file "), res.output
    assert message.replace("{f}", inst) in res.output, res.output


def test_a_json_key_given_twice_is_refused(tmp_path):
    inst = write(tmp_path, "twice.json", '{"settings": {"seed": 1, "seed": 2}}')
    res = invoke("run", MM1, "--instance", inst, "--horizon", "5")
    assert res.exit_code == 2 and "`seed` is given twice" in res.output


# ---------------------------------------------------------------- the resolved IR
def test_the_ir_carries_the_instance_settings(tmp_path):
    inst = write(tmp_path, "i.sq", INSTANCE)
    data = json.loads(invoke("ir", MM1, "--instance", inst).output)
    assert data["settings"] == {"horizon": 400, "warmup": 20, "seed": 3}
    assert data["inputs"] == [{"name": "lambda", "arg": "rate", "value": 0.5}]
    # the flags over the instance's, as for `serq run`
    data = json.loads(invoke("ir", MM1, "--instance", inst, "--seed", "9", "--arrivals", "40").output)
    assert data["settings"] == {"horizon": 400, "warmup": 20, "seed": 9, "arrivals": 40}
    # the IR runs as the program with its instance; its settings now say they are the IR's
    out = tmp_path / "mm1.json"
    assert invoke("ir", MM1, "--instance", inst, "-o", str(out)).exit_code == 0
    from_ir = report(str(out))
    assert without_sources(from_ir)["client"] == report(MM1, "--instance", inst)["client"]
    assert from_ir["settings_source"] == {"seed": f"ir {out}", "horizon": f"ir {out}", "warmup": f"ir {out}",
                                          "arrivals": "default"}
    # an instance of settings alone applies to an IR; its inputs do not (the IR's constants are folded)
    settings_only = write(tmp_path, "s.sq", "run { seed 4; }")
    assert report(str(out), "--instance", settings_only)["settings_source"]["seed"] == f"instance {settings_only}"
    res = invoke("run", str(out), "--instance", inst)
    assert res.exit_code == 2 and "an IR's constants are already folded" in res.output


def test_serq_ir_refuses_settings_that_cannot_be(tmp_path):
    res = invoke("ir", CLOSED, "--arrivals", "5")
    assert res.exit_code == 2 and "this workload arrives by closed" in res.output
    res = invoke("ir", MM1, "--horizon", "5", "--warmup", "6")
    assert res.exit_code == 2 and "--warmup 6 is not before the horizon 5 (--horizon)" in res.output
    # an IR need not end: that is the run's to ask
    assert invoke("ir", MM1).exit_code == 0


# ---------------------------------------------------------------- the default seed
def test_the_default_seed_is_1():
    assert ir.Settings().seed == 1
    assert json.loads(invoke("ir", MM1).output)["settings"]["seed"] == 1
    default = report(MM1, "--horizon", "300")
    assert default["settings"]["seed"] == 1 and default["settings_source"]["seed"] == "default"
    assert without_sources(default) == without_sources(report(MM1, "--horizon", "300", "--seed", "1"))
    assert "seed 1 (default)" in invoke("run", MM1, "--horizon", "300").output.splitlines()[0]


def test_the_host_api_names_its_own_settings():
    program = link_file(MM1)
    rep = simulate(program, horizon=50.0).report
    assert rep["settings"]["seed"] == 1
    assert rep["settings_source"] == {"seed": "default", "horizon": "api", "warmup": "default", "arrivals": "default"}
    written = link_file(MM1, settings=ir.Settings(horizon=50, seed=2))
    rep = simulate(written, seed=3).report
    assert rep["settings"]["seed"] == 3 and rep["settings"]["horizon"] == 50
    assert rep["settings_source"] == {"seed": "api", "horizon": "ir", "warmup": "default", "arrivals": "default"}
    with pytest.raises(SerqError) as info:
        simulate(program, horizon=10.0, warmup=20.0)
    assert "--warmup 20 is not before the horizon 10 (api)" in info.value.message


# ---------------------------------------------------------------- the parsers on their own
def test_the_parsers_read_what_the_files_say():
    inst = parse_instance("/* all four */ run { seed 12345678901234567890; horizon 1e3; warmup 0; arrivals 10; }\n"
                          "let a = -2; let b = max(1, 2) * inf;", "x.sq")
    assert {k: s.value for k, s in inst.settings.items()} == {
        "seed": 12345678901234567890, "horizon": 1000.0, "warmup": 0.0, "arrivals": 10}
    assert set(inst.inputs) == {"a", "b"} and str(inst.inputs["b"].span) == "x.sq:2:17"
    assert parse_instance("", "empty.sq").settings == {}
    j = json_instance('{"inputs": {"a": 1}, "settings": {"seed": 2.0}}', "x.json")
    assert j.inputs["a"].value == "1" and j.settings["seed"].value == 2 and isinstance(j.settings["seed"].value, int)
    # an object with any other key is the flat form: every key an input
    assert set(json_instance('{"inputs": 1, "x": 2}', "y.json").inputs) == {"inputs", "x"}


# ---------------------------------------------------------------- the examples' instance files
EXAMPLE_INSTANCES = sorted(p for p in (REPO / "examples").rglob("instances/*/*") if p.suffix in (".sq", ".json"))


def test_the_examples_keep_instance_files():
    kinds = {p.suffix for p in EXAMPLE_INSTANCES}
    assert kinds == {".sq", ".json"}
    names = {str(p.relative_to(REPO / "examples")) for p in EXAMPLE_INSTANCES}
    assert {"single-turn/instances/mm1/default.sq", "multi-turn/instances/vllm/default.sq"} <= names


@pytest.mark.parametrize("inst", EXAMPLE_INSTANCES, ids=lambda p: str(p.relative_to(REPO / "examples")))
def test_every_example_instance_runs_its_program(inst):
    program = inst.parent.parent.parent / f"{inst.parent.name}.sq"
    assert program.exists(), f"{inst} has no program {program}"
    rep = report(str(program), "--instance", str(inst))
    sources = set(rep["settings_source"].values())
    assert f"instance {inst}" in sources
    assert rep["client"]["response"]["count"] > 0


def test_check_links_the_instances_kept_for_each_program(tmp_path):
    res = invoke("check", str(REPO / "examples"))
    assert res.exit_code == 0, res.output
    assert f"{len(EXAMPLE_INSTANCES)} of {len(EXAMPLE_INSTANCES)} instance file(s) apply to their program" in res.output
    folder = tmp_path / "p"
    (folder / "instances" / "mm1").mkdir(parents=True)
    (folder / "instances" / "gone").mkdir(parents=True)
    (folder / "mm1.sq").write_text(Path(MM1).read_text())
    (folder / "instances" / "mm1" / "bad.sq").write_text("run { arrivals 3; }\nlet lambda = 1;\n")
    res = invoke("check", str(folder))
    assert res.exit_code == 1
    assert f"{folder / 'instances' / 'mm1' / 'bad.sq'}:2:5: error: no input named `lambda`" in res.output
    assert "an instance folder with no program `gone.sq`" in res.output
    assert "0 of 2 instance file(s) apply to their program" in res.output
