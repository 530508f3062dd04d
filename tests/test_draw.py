"""`serq draw`: the DOT of every example against its IR, the rendering, and the command's outputs."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from click.testing import CliRunner

from extras import require_dot
from helpers import REPO
from serq import draw as D
from serq.cli import main, program_files
from serq.exprtext import text
from serq.ir import models as ir
from serq.link import link_file

EXAMPLES = [str(p.relative_to(REPO)) for p in program_files((str(REPO / "examples"),))]
PULL = REPO / "examples/pd-disaggregation/llmd_nixl_pull.sq"
PUSH = REPO / "examples/pd-disaggregation/vllm_nixl_push.sq"
MM1 = REPO / "examples/single-turn/mm1.sq"

_ID = r'("(?:[^"\\]|\\.)*"|[A-Za-z_][\w.]*)'
_EDGE = re.compile(rf"^\s*{_ID}\s*->\s*{_ID}(?:\s*\[(.*)\])?\s*$")
_NODE = re.compile(rf"^\s*{_ID}\s*\[(.*)\]\s*$")
_LABEL = re.compile(r'label=("(?:[^"\\]|\\.)*"|<.*>|[^ \]]+)')


def _unquote(s: str) -> str:
    return s[1:-1].replace('\\"', '"') if s.startswith('"') else s


def _label(attrs: str | None) -> str:
    m = _LABEL.search(attrs or "")
    if not m:
        return ""
    raw = m.group(1)
    raw = raw[1:-1] if raw.startswith(("<", '"')) else raw
    return html.unescape(re.sub(r"<[^>]+>", " ", raw)).strip()


class Dot:
    """The nodes (id -> label) and edges (tail, head, label) of a DOT text, and its clusters."""

    def __init__(self, source: str) -> None:
        self.nodes: dict[str, str] = {}
        self.edges: list[tuple[str, str, str]] = []
        self.clusters: list[str] = re.findall(r'subgraph "?(cluster[^"{]*)"? \{', source)
        for line in source.splitlines():
            m = _EDGE.match(line)
            if m:
                self.edges.append((_unquote(m.group(1)), _unquote(m.group(2)), _label(m.group(3))))
                continue
            m = _NODE.match(line)
            if m and m.group(1) not in ("graph", "node", "edge"):
                self.nodes[_unquote(m.group(1))] = _label(m.group(2))

    def out(self, node: str) -> list[tuple[str, str]]:
        return [(b, lbl) for a, b, lbl in self.edges if a == node]

    def kind(self, prefix: str) -> list[str]:
        return [n for n in self.nodes if n.split(" ")[0] == prefix]

    def reach(self, start: str, through=lambda n: True) -> set[str]:
        seen, stack = {start}, [start]
        while stack:
            n = stack.pop()
            for b, _ in self.out(n):
                if b not in seen and through(b):
                    seen.add(b)
                    stack.append(b)
        return seen


def _stmts(program: ir.Program) -> list:
    w = program.workload
    return list(ir.walk_stmts(program.server)) + list(ir.walk_stmts(w.session))


def _dot(path) -> tuple[ir.Program, Dot]:
    program = link_file(path)
    return program, Dot(D.draw(program, str(path)).source)


@pytest.mark.parametrize("path", EXAMPLES)
def test_the_dot_has_the_programs_stages_pools_runs_holds_and_branches(path):
    program, dot = _dot(REPO / path)
    # every stage and pool is a node, its kind and family in its label
    for s in program.stages:
        label = dot.nodes[f"stage {s.name}"]
        assert s.name in label and D.service(s.service) in label
        if s.service.kind == "step":
            assert f"tokens cap {text(s.service.budget)}" in label and "schedule:" in label
    for p in program.pools:
        label = dot.nodes[f"pool {p.name}"]
        assert f"cap {D.num(p.cap)}" in label and "queue " in label and "evict " in label and "preempt " in label
        if p.admit_via:
            assert (f"pool {p.name}", f"stage {p.admit_via}", "admitted by") in dot.edges
        if p.memory_of:
            assert (f"pool {p.name}", f"stage {p.memory_of}", "memory of") in dot.edges
    # a run is a node with an arrow to each stage it runs on
    stmts = _stmts(program)
    runs = [s for s in stmts if s.kind == "run"]
    drawn = Counter(tuple(sorted({b for b, _ in dot.out(n) if b.startswith("stage ")})) for n in dot.kind("run"))
    assert drawn == Counter(tuple(sorted({f"stage {st.stage}" for st in r.stages})) for r in runs)
    # a hold is a cluster; a branch a node whose arrows carry its guard and `else`
    assert sum(1 for c in dot.clusters if c.startswith("cluster_hold")) == sum(1 for s in stmts if s.kind == "hold")
    branches = [s for s in stmts if s.kind == "branch"]
    assert len(dot.kind("branch")) == len(branches)
    for node, s in zip(dot.kind("branch"), branches):
        labels = {lbl for _, lbl in dot.out(node)}
        assert text(s.test)[:30] in " ".join(labels) and "else" in labels
    for s in [s for s in stmts if s.kind == "while"]:
        assert any(text(s.test) in lbl for n in dot.kind("while") for _, lbl in dot.out(n))
    # the gauges and claims are named
    for g in program.gauges:
        assert f"gauge {g.name}" in dot.nodes["measures"]
    for c in program.claims:
        assert f"claim {c.name}" in dot.nodes["measures"]
    # the workload's arrival law, and a path from the request to the response
    assert any(n.startswith("arrive") and program.workload.arrival.kind in lbl for n, lbl in dot.nodes.items())
    (req,), (resp,) = dot.kind("request"), dot.kind("response")
    assert resp in dot.reach(req, lambda n: not n.startswith(("stage ", "pool ")))


def test_a_person_can_follow_a_request_from_the_gateway_to_the_decoder():
    program, dot = _dot(PULL)
    path = lambda n: not n.startswith(("stage ", "pool "))  # noqa: E731
    (req,) = dot.kind("request")
    chooses = dot.kind("choose")
    assert [dot.nodes[c].split(" among ")[1].split(" ")[0] for c in chooses] == ["P[0..1]", "D[0..1]"]
    prefill = next(n for n in dot.kind("run") if "P[i] · prefill" in dot.nodes[n])
    decode = next(n for n in dot.kind("run") if "D[j] · decode" in dot.nodes[n])
    assert any(b == "stage P" for b, _ in dot.out(prefill))
    assert any(b == "stage D" for b, _ in dot.out(decode))
    # request -> the routes -> the prefill -> the decode -> the response, in that order
    assert chooses[0] in dot.reach(req, path) and prefill in dot.reach(chooses[1], path)
    assert decode in dot.reach(prefill, path) and prefill not in dot.reach(decode, path)
    (resp,) = dot.kind("response")
    assert resp in dot.reach(decode, path)
    # the queues are boxes with their roles; the pull is one labelled arrow between the NICs
    assert "cluster_queue P" in dot.clusters and "cluster_queue D" in dot.clusters
    (pull,) = [e for e in dot.edges if e[0] == "stage P.nic" and e[1] == "stage D.nic"]
    assert "D pull P" in pull[2] and "latency 0.002" in pull[2] and "share maxmin" in pull[2]


def test_a_push_is_drawn_from_the_source_with_the_posters_latency():
    _, dot = _dot(PUSH)
    (push,) = [e for e in dot.edges if e[0] == "stage P.nic" and e[1] == "stage D.nic"]
    assert "P push D" in push[2] and "latency 0.001" in push[2]
    # a fork's leg joins at the join
    (join,) = dot.kind("join")
    assert any(b == join and lbl == "leg ends" for a, b, lbl in dot.edges)


def test_queues_carry_their_roles():
    source = D.draw(link_file(PULL)).source
    assert "queue P[2] : prefill" in source and "queue D[2] : decode" in source


@pytest.mark.parametrize("path", EXAMPLES)
def test_every_example_renders_to_svg(path, tmp_path):
    require_dot()
    out = tmp_path / "x.svg"
    r = CliRunner().invoke(main, ["draw", str(REPO / path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    root = ET.fromstring(out.read_text())
    assert root.tag.endswith("svg")
    assert "request" in out.read_text() and "response" in out.read_text()


def test_draw_writes_png_dot_and_prints_the_dot(tmp_path):
    require_dot()
    png = tmp_path / "pd.png"
    r = CliRunner().invoke(main, ["draw", str(PULL), "--set", "rate=3", "-o", str(png)])
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = CliRunner().invoke(main, ["draw", str(PULL), "--set", "rate=3", "-o", "-"])
    assert r.exit_code == 0 and r.output.startswith("digraph") and "rate = 3" in r.output
    dot = tmp_path / "pd.dot"
    assert CliRunner().invoke(main, ["draw", str(PULL), "-o", str(dot)]).exit_code == 0
    assert dot.read_text().startswith("digraph")


def test_draw_reads_an_instance_file_and_an_ir(tmp_path):
    inst = tmp_path / "i.json"
    inst.write_text('{"rate": 0.25}')
    r = CliRunner().invoke(main, ["draw", str(MM1), "--instance", str(inst), "-o", "-"])
    assert r.exit_code == 0 and "rate 0.25/s" in r.output
    irf = tmp_path / "mm1.json"
    irf.write_text(ir.to_json(link_file(MM1)))
    r = CliRunner().invoke(main, ["draw", str(irf), "-o", "-"])
    assert r.exit_code == 0 and "stage svc" in r.output
    r = CliRunner().invoke(main, ["draw", str(irf), "--set", "rate=1", "-o", "-"])
    assert r.exit_code == 2 and "already folded" in r.output


def test_without_dot_the_dot_is_written_and_the_way_to_render_it_said(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "dot_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    # the default output: the .dot, exit 0
    r = CliRunner().invoke(main, ["draw", str(MM1)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "mm1.dot").exists() and not (tmp_path / "mm1.svg").exists()
    assert "dot -Tsvg mm1.dot -o mm1.svg" in r.output and "apt-get install graphviz" in r.output
    # svg asked for explicitly: the .dot, and exit 1
    r = CliRunner().invoke(main, ["draw", str(MM1), "-o", "pic.png"])
    assert r.exit_code == 1 and (tmp_path / "pic.dot").exists() and "dot -Tpng pic.dot -o pic.png" in r.output
    # the API refuses with what to install
    with pytest.raises(D.SerqError, match="Graphviz"):
        D.render(D.draw(link_file(MM1)), tmp_path / "x.svg")


def test_draw_errors_are_located_messages(tmp_path):
    bad = tmp_path / "bad.sq"
    bad.write_text("fn main() { stage s : fifo; workload { arrive poisson(1); } server { run t (1); } }\n")
    r = CliRunner().invoke(main, ["draw", str(bad), "-o", "-"])
    assert r.exit_code == 1 and "bad.sq:1:" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["draw", str(MM1), "-o", str(tmp_path / "x.pdf")])
    assert r.exit_code == 2 and "write .svg, .png or .dot" in r.output
    r = CliRunner().invoke(main, ["draw", str(tmp_path / "nope.sq")])
    assert r.exit_code == 2 and "no such file" in r.output


def test_expression_text_keeps_precedence():
    from serq.link import link_text
    p = link_text('fn main() { stage s : fifo; workload { arrive poisson(1); turn { Size a = ~exp(1); } } '
                  'server { set x = (a - (a - 1)) * 2; set y = -(a + 1); set z = a > 1 ? a : 2; run s (cost(s, a)); } }')
    sets = {s.name: text(s.value) for s in p.server if s.kind == "set"}
    assert sets == {"x": "(a - (a - 1)) * 2", "y": "-(a + 1)", "z": "a > 1 ? a : 2"}
