"""The limits (serq/limits.py, docs/language.md *Limits*): a program nested up to them links,
compiles and runs, IR and all; one level past them is refused where it stands, before anything
walks it recursively; the bounds on counts, sizes and live sessions; numbers the language cannot
represent; files that are not UTF-8; messages that print whatever their location says; and
SIGINT/SIGTERM during `serq run --dump`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import REPO
from serq import limits as L
from serq.cli import main
from serq.errors import SerqError, render
from serq.syntax.ast import Span

MM1 = (REPO / "examples" / "single-turn" / "mm1.sq").read_text()


def cli(*args):
    res = CliRunner().invoke(main, list(args))
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def with_set(expr: str, extra: str = "") -> str:
    """mm1.sq with `set x = EXPR;` before its run (and `extra` among its declarations)."""
    return MM1.replace("run svc (cost(svc, s));", f"set x = {expr};\n    run svc (cost(svc, s));").replace(
        "stage svc : fifo;", "stage svc : fifo;\n  " + extra)


def write(tmp_path, text: str, name: str = "p.sq"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def runs(tmp_path, text: str, name: str = "p.sq"):
    """The program links, its IR loads back, and both run."""
    path = write(tmp_path, text, name)
    res = cli("run", path, "--arrivals", "20", "--horizon", "1e4", "--json")
    assert res.exit_code == 0, res.output
    ir_path = tmp_path / (name + ".ir.json")
    res = cli("ir", path, "-o", str(ir_path))
    assert res.exit_code == 0, res.output
    res = cli("run", str(ir_path), "--arrivals", "20", "--horizon", "1e4", "--json")
    assert res.exit_code == 0, res.output


def refused(tmp_path, text: str, what: str, name: str = "p.sq"):
    res = cli("check", write(tmp_path, text, name))
    assert res.exit_code == 1, res.output
    first = res.output.splitlines()[0]
    assert f"nesting deeper than {what}" in first and f"{name}:" in first, res.output
    return first


# ---------------------------------------------------------------- expressions
# Each nests `k` levels around `now` (a level itself): k = 63 is exactly the limit, 64 one past it.
NESTINGS = {
    "and": lambda k: "(1 && " * k + "now" + ")" * k,   # two parentheses a level in the generated Python
    "or": lambda k: "(0 || " * k + "now" + ")" * k,
    "neg": lambda k: "-" * k + "now",
    "not": lambda k: "!" * k + "now",
    "min": lambda k: "min(" * k + "now" + ", 1)" * k,
    "cond": lambda k: "(1 ? " * k + "now" + " : 0)" * k,
    "chain": lambda k: " + ".join(["now"] * (k + 1)),  # a flat chain: one level per operator
    "compare": lambda k: "(1 < " * k + "now" + ")" * k,
    "div": lambda k: "(1 / " * (k - 1) + "(now + 1)" + ")" * (k - 1),
    "mixed": lambda k: "".join(["(1 + ", "(2 * ", "-(", "max(1, ", "(1 < "][i % 5] for i in range(k)) + "now" + ")" * k,
}


@pytest.mark.parametrize("kind", sorted(NESTINGS))
def test_an_expression_at_the_limit_links_compiles_and_runs(kind, tmp_path):
    runs(tmp_path, with_set(NESTINGS[kind](L.EXPR_DEPTH - 1)))


@pytest.mark.parametrize("kind", sorted(NESTINGS))
def test_an_expression_past_the_limit_is_refused_where_it_stands(kind, tmp_path):
    first = refused(tmp_path, with_set(NESTINGS[kind](L.EXPR_DEPTH)), "64")
    assert first.startswith(f"{tmp_path / 'p.sq'}:17:")  # the line of the `set`


@pytest.mark.parametrize("depth", [480, 5000])
def test_far_past_the_limit_the_parser_stops_without_recursion(depth, tmp_path):
    refused(tmp_path, with_set("min(" * depth + "now" + ", 1)" * depth), "64")
    refused(tmp_path, with_set(" + ".join(["now"] * depth)), "64")


def test_an_index_is_a_level(tmp_path):
    extra = "stage side[2] : delay;\n  gauge g = " + "busy(side[" * 20 + "0" + "])" * 20 + ";"
    res = cli("check", write(tmp_path, with_set("now", extra)))
    assert res.exit_code == 1 and "nesting deeper than 64" not in res.output  # refused for another reason
    extra = "stage side[2] : delay;\n  gauge g = busy(side[" + "-" * 70 + "0]);"
    refused(tmp_path, with_set("now", extra), "64")


def test_defs_written_out_count_where_they_land(tmp_path):
    body = "x"
    for _ in range(30):
        body = f"({body} + 1)"
    prelude = f"def f(x) {{ {body} }}\n"
    runs(tmp_path, prelude + with_set("f(" + "-" * 30 + "now)"))  # 31 + 32: within the limit
    first = refused(tmp_path, prelude + with_set("f(" + "-" * 34 + "now)"), "64")
    assert "where f is written out" in first
    chain = "".join(f"def f{i}(x) {{ f{i + 1}(x) }}\n" for i in range(70)) + "def f70(x) { x }\n"
    res = cli("check", write(tmp_path, chain + with_set("f0(now)")))
    assert res.exit_code == 1 and "defs are written out inside one another at most 64 deep" in res.output


def test_an_aggregate_is_a_balanced_sum(tmp_path):
    # sum j in 300 (…) was a chain 300 deep, which the generated Python could not compile
    from serq.ir import models as ir
    from serq.link import link_file
    text = with_set("now", "stage side[300] : delay;\n  gauge g = sum j in 300 (busy(side[j]));")
    runs(tmp_path, text)
    g = link_file(write(tmp_path, text)).gauges[0].value

    def depth(e):
        return 1 + max((depth(c) for c in (getattr(e, "lhs", None), getattr(e, "rhs", None)) if c is not None),
                       default=0)
    assert depth(g) == 1 + (300 - 1).bit_length()  # 9 additions deep, the observable below them
    # the order is fixed: pairs, then pairs of pairs, an odd term last at its level
    text3 = with_set("now", "stage side[3] : delay;\n  gauge h = sum j in 3 (busy(side[j]));")
    h = link_file(write(tmp_path, text3, "q.sq")).gauges[0].value
    assert isinstance(h, ir.Binary) and isinstance(h.lhs, ir.Binary) and isinstance(h.rhs, ir.StageObs)
    assert [t.stage.index.value for t in (h.lhs.lhs, h.lhs.rhs, h.rhs)] == [0, 1, 2]


def test_the_largest_aggregate_runs(tmp_path):
    text = with_set("now", "stage side[4096] : delay;\n  gauge g = sum j in 4096 (busy(side[j]));")
    runs(tmp_path, text)


# ---------------------------------------------------------------- blocks
def nest_blocks(kind: str, k: int, stmt: str = "run svc (cost(svc, s));") -> str:
    loop = "while (serial < 0) { run svc (cost(svc, s)); "  # every pass lets time pass
    heads = {"branch": "branch (1) { ", "else": "branch (0) { } else { ", "while": loop,
             "hold": "hold kv (cost(kv, 1)) { ", "mixed": None}
    out = stmt
    for i in range(k):
        head = heads[kind] or ["hold kv (cost(kv, 1)) { ", "branch (1) { ", loop][i % 3]
        out = head + out + " }"
    return out


@pytest.mark.parametrize("kind", ["branch", "else", "while", "hold", "mixed"])
def test_blocks_at_the_limit_link_compile_and_run(kind, tmp_path):
    text = MM1.replace("stage svc : fifo;", "stage svc : fifo;\n  pool kv { cap 100; }")
    # the worst for the generated Python: holds (two static blocks each) with a choose (a for loop) inside
    inner = "choose k in 3 by (k); run svc (cost(svc, s));"
    runs(tmp_path, text.replace("run svc (cost(svc, s));", nest_blocks(kind, L.BLOCK_DEPTH, inner)))


@pytest.mark.parametrize("kind", ["branch", "while", "hold"])
def test_blocks_past_the_limit_are_refused(kind, tmp_path):
    text = MM1.replace("stage svc : fifo;", "stage svc : fifo;\n  pool kv { cap 100; }")
    refused(tmp_path, text.replace("run svc (cost(svc, s));", nest_blocks(kind, L.BLOCK_DEPTH + 1)), "8")
    refused(tmp_path, text.replace("run svc (cost(svc, s));", nest_blocks(kind, 5000)), "8")


def test_the_server_counts_from_the_turn(tmp_path):
    # a turn runs the server's statements where it stands: a turn one deep leaves the server 7
    session = "turn { Size s = ~exp(mean_service); }\n    session { branch (1) { turn; } }"
    text = MM1.replace("turn { Size s = ~exp(mean_service); }", session)
    runs(tmp_path, text.replace("run svc (cost(svc, s));", nest_blocks("branch", L.BLOCK_DEPTH - 1)))
    res = cli("check", write(tmp_path, text.replace("run svc (cost(svc, s));", nest_blocks("branch", L.BLOCK_DEPTH))))
    assert res.exit_code == 1 and "nesting deeper than 8" in res.output, res.output
    assert res.output.startswith(str(tmp_path / "p.sq") + ":17:")  # at the statement past the limit, a caret


def test_a_def_of_statements_counts_where_it_is_called(tmp_path):
    def text(k):
        return MM1.replace("run svc (cost(svc, s));", nest_blocks("branch", k, "deep();")).replace(
            "fn main() {", "def deep() { " + nest_blocks("branch", 5) + " }\nfn main() {")
    runs(tmp_path, text(3))
    res = cli("check", write(tmp_path, text(4)))
    assert res.exit_code == 1 and "nesting deeper than 8" in res.output, res.output


# ---------------------------------------------------------------- random programs within the limits
LEAVES = ["now", "1", "2.5", "s", "serial", "inf"]


@st.composite
def expressions(draw, depth: int):
    """An expression exactly `depth` deep (as the parser counts): a spine of that depth, its side
    operands leaves."""
    out = draw(st.sampled_from(LEAVES))
    for _ in range(depth - 1):
        form = draw(st.sampled_from(["bin", "bin", "neg", "not", "call", "cond"]))
        side = draw(st.sampled_from(LEAVES))
        first = draw(st.booleans())
        a, b = (out, side) if first else (side, out)
        if form == "bin":
            out = f"({a} {draw(st.sampled_from(['+', '-', '*', '/', '%', '<', '==', '&&', '||']))} {b})"
        elif form == "neg":
            out = f"-{out}"
        elif form == "not":
            out = f"!{out}"
        elif form == "call":
            out = f"{draw(st.sampled_from(['min', 'max']))}({a}, {b})"
        else:
            out = f"({a} ? {b} : {side})"
        if draw(st.integers(0, 9)) == 0:
            out = f"(({out}))"  # parentheses alone are no level
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(1, L.EXPR_DEPTH).flatmap(expressions))
def test_any_expression_within_the_limit_runs_or_is_refused_at_run_time(tmp_path, expr):
    # the guarantee of the limit: what it lets through compiles (a run may still fail: a NaN, a guard)
    path = write(tmp_path, with_set(expr), "h.sq")
    res = cli("run", path, "--arrivals", "5", "--horizon", "1e4", "--json")
    assert res.exit_code in (0, 1), res.output
    if res.exit_code == 1:
        assert "nesting" not in res.output and ": error: " in res.output, res.output


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(expressions(L.EXPR_DEPTH + 1))
def test_any_expression_one_past_the_limit_is_refused(tmp_path, expr):
    res = cli("check", write(tmp_path, with_set(expr), "h.sq"))
    assert res.exit_code == 1 and "nesting deeper than 64" in res.output, res.output


# ---------------------------------------------------------------- IR
def _ir(tmp_path):
    from serq.ir import models as ir
    from serq.link import link_file
    return json.loads(ir.to_json(link_file(REPO / "examples" / "single-turn" / "mm1.sq")))


@pytest.mark.parametrize("depth", [L.EXPR_DEPTH + 1, 150, 1000])
def test_a_deep_hand_written_ir_is_refused_with_its_path(depth, tmp_path):
    doc = _ir(tmp_path)
    doc["server"][0]["work"]["arg"] = "__D__"
    text = json.dumps(doc).replace('"__D__"', '{"kind": "unary", "op": "neg", "arg": ' * depth
                                   + '{"kind": "attr", "name": "s"}' + "}" * depth)
    path = write(tmp_path, text, "deep.json")
    for args in (["check", path], ["run", path, "--horizon", "10"]):
        res = cli(*args)
        # at the statement's `at` (mm1.sq:16:5) when the IR writes one, else at the file and JSON path
        assert res.exit_code == 1 and ("deep.json" in res.output or "mm1.sq:16:5" in res.output), res.output
        assert "nesting deeper than 64" in res.output or "past the JSON reader's depth (200)" in res.output, res.output
    del doc["server"][0]["at"]
    text = json.dumps(doc).replace('"__D__"', '{"kind": "unary", "op": "neg", "arg": ' * 100
                                   + '{"kind": "attr", "name": "s"}' + "}" * 100)
    res = cli("check", write(tmp_path, text, "deep2.json"))
    assert res.exit_code == 1 and "deep2.json: server[0].work.arg.arg" in res.output, res.output


@pytest.mark.parametrize("value", ["-1" + "0" * 400, "1e400", "-1e400"])
def test_an_ir_number_past_the_largest_double_is_refused_at_check(value, tmp_path):
    doc = _ir(tmp_path)
    doc["server"][0]["work"]["arg"] = {"kind": "binary", "op": "mul", "lhs": {"kind": "attr", "name": "s"},
                                       "rhs": {"kind": "num", "value": "__V__"}}
    path = write(tmp_path, json.dumps(doc).replace('"__V__"', value), "big.json")
    res = cli("check", path)
    assert res.exit_code == 1 and "big.json" in res.output and "server.0.run.work" in res.output, res.output


def test_an_ir_refusal_without_a_location_names_the_file(tmp_path):
    doc = _ir(tmp_path)
    doc["stages"].append(dict(doc["stages"][0]))
    res = cli("check", write(tmp_path, json.dumps(doc), "twice.json"))
    assert res.exit_code == 1 and "twice.json: stages: stage `svc` has the name" in res.output, res.output


def test_a_message_prints_whatever_its_location_says(tmp_path):
    # an IR statement written at column 10**12 of a file whose name holds a NUL, failing at run time
    doc = _ir(tmp_path)
    doc["server"][0]["at"] = {"file": "a\u0000b.sq", "line": 1, "col": 10 ** 12}
    doc["server"][0]["work"]["arg"] = {"kind": "num", "value": -1}
    res = cli("run", write(tmp_path, json.dumps(doc), "loc.json"), "--horizon", "10")
    assert res.exit_code == 1 and res.output.startswith("a\\x00b.sq:1:1000000000000: error: at time 0"), res.output
    # the renderer: a column past the line, a line past the file, a megabyte line, control characters
    src = {"f": "ab\x1b[31mc\n" + "x" * 1_000_000}
    assert render(SerqError("m", Span("f", 1, 10 ** 12)), src) == "f:1:1000000000000: error: m"
    assert render(SerqError("m", Span("f", 10 ** 12, 1)), src) == f"f:{10 ** 12}:1: error: m"
    shown = render(SerqError("m", Span("f", 2, 500_000, 2, 900_000)), src).splitlines()
    assert len(shown[1]) < 200 and len(shown[2]) < 200 and shown[2].strip().startswith("^")
    assert "\x1b" not in render(SerqError("m", Span("f", 1, 3)), src)


# ---------------------------------------------------------------- numbers
@pytest.mark.parametrize("literal, message", [
    ("1e309", "is too large"), ("1" + "0" * 400, "is too large"), ("1e-400", "is too small"),
])
def test_a_literal_the_language_cannot_represent_is_refused_where_it_stands(literal, message, tmp_path):
    res = cli("check", write(tmp_path, MM1.replace("let mean_service = 1;", f"let mean_service = {literal};")))
    assert res.exit_code == 1 and message in res.output and "p.sq:6:" in res.output, res.output


def test_minus_inf_as_a_constant_is_refused(tmp_path):
    res = cli("check", write(tmp_path, MM1.replace('args.number("rate", 0.8)', 'args.number("rate", -inf)')))
    assert res.exit_code == 1 and "evaluates to -inf" in res.output and "p.sq:5:" in res.output, res.output
    path = str(REPO / "examples" / "single-turn" / "mm1.sq")
    for value, message in [("-inf", "evaluates to -inf"), ("1e400", "too large"), ("nan", "`nan` is not a constant")]:
        res = cli("run", path, "--set", f"rate={value}", "--horizon", "10")
        assert res.exit_code == 2 and res.output.startswith(f"error: --set rate: input `rate`: `{value}`"), res.output
        assert message in res.output, res.output


def test_the_arrivals_setting_is_bounded(tmp_path):
    path = str(REPO / "examples" / "single-turn" / "mm1.sq")
    res = cli("run", path, "--arrivals", str(2 ** 53 + 1))
    assert res.exit_code == 2 and "at most 2^53" in res.output, res.output


# ---------------------------------------------------------------- bounds of a run
def test_live_sessions_are_bounded(tmp_path, monkeypatch):
    # poisson(1e19): every arrival stays live; the run stops at the bound instead of exhausting memory
    import serq.sim.engine as engine
    monkeypatch.setattr(L, "LIVE_LIMIT", 2000)
    monkeypatch.setattr(engine, "LIVE_LIMIT", 2000)
    for arrival in ("poisson(1e19)", "renewal(1e-19)"):
        path = write(tmp_path, MM1.replace("arrive poisson(lambda);", f"arrive {arrival};"))
        res = cli("run", path, "--horizon", "1")
        assert res.exit_code == 1 and "2 000 sessions are live at once" in res.output, res.output


def test_a_run_builds_a_bounded_number_of_members(tmp_path):
    text = MM1.replace("stage svc : fifo;", "stage svc : fifo;\n  stage side[200000] : delay;")
    path = write(tmp_path, text)
    assert cli("check", path).exit_code == 0  # the reference links arrays of up to a million
    res = cli("run", path, "--horizon", "10")
    assert res.exit_code == 1 and "p.sq:9:3: error: serq run: the pools and stages have 200 001 members" in res.output


def test_the_text_report_shows_an_array_in_part(tmp_path):
    text = MM1.replace("stage svc : fifo;", "stage svc : fifo;\n  stage side[40] : delay;")
    res = cli("run", write(tmp_path, text), "--horizon", "10")
    assert res.exit_code == 0 and "side[15]" in res.output and "side[16…]" in res.output, res.output
    assert "24 more" in res.output and "side[17]" not in res.output
    res = cli("run", write(tmp_path, text), "--horizon", "10", "--json")
    assert len([s for s in json.loads(res.output)["stages"] if s["name"] == "side"]) == 40


# ---------------------------------------------------------------- files
def test_bytes_that_are_not_utf8_are_located(tmp_path):
    data = MM1.encode().replace(b"let mean_service = 1;", b"let mean_service = \xff1;")
    (tmp_path / "p.sq").write_bytes(data)
    res = cli("check", str(tmp_path / "p.sq"))
    assert res.exit_code == 1, res.output
    assert f"{tmp_path / 'p.sq'}:6:22: error: the file is not UTF-8: byte 0xff at byte offset" in res.output
    (tmp_path / "lib.sq").write_bytes(b"def f(x) {\n  x \xc3\x28 }\n")
    res = cli("check", write(tmp_path, 'use "lib.sq";\n' + MM1, "q.sq"))
    assert res.exit_code == 1 and "lib.sq:2:5: error: the library file is not UTF-8: byte 0xc3" in res.output
    (tmp_path / "i.sq").write_bytes(b"run { seed 1; }\nlet rate = \xfe;\n")
    res = cli("run", str(REPO / "examples" / "single-turn" / "mm1.sq"), "--instance", str(tmp_path / "i.sq"))
    assert res.exit_code == 2 and "i.sq:2:12: error: the instance file is not UTF-8" in res.output, res.output
    (tmp_path / "x.json").write_bytes(b'{"version": 1,\n "source": "\xff"}')
    res = cli("check", str(tmp_path / "x.json"))
    assert res.exit_code == 1 and "x.json:2:13: error: the IR file is not UTF-8" in res.output, res.output


@pytest.mark.parametrize("text, message", [
    ('{"inputs": {"rate": ' + "9" * 5000 + "}}", "a number too long to read"),
    ('{"inputs": {"rate": ' + "[" * 5000 + "]" * 5000 + "}}", "nested too deeply to read"),
    ('{"settings": {"horizon": 1' + "0" * 400 + "}}", "`settings.horizon`: horizon"),
    ('{"inputs": {"rate": "1e400"}}', "`inputs.rate`: input `rate`: `1e400` is not a constant expression"),
])
def test_a_json_instance_the_toolchain_cannot_read_is_refused(text, message, tmp_path):
    path = write(tmp_path, text, "i.json")
    res = cli("run", str(REPO / "examples" / "single-turn" / "mm1.sq"), "--instance", path, "--horizon", "10")
    assert res.exit_code == 2 and f"instance file {path}: " in res.output and message in res.output, res.output


# ---------------------------------------------------------------- interrupts
def _long_run(tmp_path, signals: list[int], gap: float = 0.0):
    dump = tmp_path / "dump"
    env = dict(os.environ)
    env.pop("SERQ_DEBUG", None)
    p = subprocess.Popen([sys.executable, "-m", "serq.cli", "run", str(REPO / "examples" / "single-turn" / "mm1.sq"),
                          "--horizon", "1e12", "--dump", str(dump)], cwd=str(REPO), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # until it is running: the run's dump folder does not exist yet, so wait until the process has
    # installed its SIGINT and SIGTERM handlers (Linux: SigCgt in /proc), however loaded the machine
    deadline = time.monotonic() + 60
    caught = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    status = Path(f"/proc/{p.pid}/status")
    while time.monotonic() < deadline and p.poll() is None:
        if status.exists():
            mask = next((int(line.split()[1], 16) for line in status.read_text().splitlines()
                         if line.startswith("SigCgt:")), 0)
            if mask & caught == caught:
                break
        else:
            time.sleep(1.5)
            break
        time.sleep(0.05)
    # and into the run's loop: linking and compiling take well under 2 s of CPU; wait until the process
    # has used 2.5 s (/proc/PID/stat utime + stime, in clock ticks)
    stat = Path(f"/proc/{p.pid}/stat")
    tick = os.sysconf("SC_CLK_TCK")
    while time.monotonic() < deadline and p.poll() is None and stat.exists():
        fields = stat.read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / tick >= 2.5:
            break
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()
    for s in signals:
        p.send_signal(s)
        time.sleep(gap)
    out, err = p.communicate(timeout=max(5.0, deadline - time.monotonic()))
    return p.returncode, out.decode(), err.decode(), dump


@pytest.mark.parametrize("signals, code", [
    ([signal.SIGINT], 130),
    ([signal.SIGTERM], 143),
    ([signal.SIGINT, signal.SIGINT], 130),
    ([signal.SIGTERM, signal.SIGINT, signal.SIGTERM], 143),
])
def test_an_interrupted_run_leaves_its_report_and_dump(signals, code, tmp_path):
    rc, out, err, dump = _long_run(tmp_path, signals, gap=0.02)
    assert rc == code, err
    assert "Traceback" not in err and "internal error" not in err, err
    report = json.loads((dump / "report.json").read_text())
    assert report["stopped"] == "interrupted" and report["sessions"]["arrived"] > 0
    lines = (dump / "client" / "response.csv").read_text().splitlines()
    assert lines[0] == "time,session,turn,value" and len(lines) > 1
    assert not list(dump.rglob("*.tmp")), "a temporary file left behind"
