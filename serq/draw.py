"""`serq draw`: a program as a picture, drawn from its IR with Graphviz.

    from serq.link import link_file
    from serq.draw import draw, render
    graph = draw(link_file("examples/pd-disaggregation/llmd_nixl_pull.sq"))
    graph.source                        # the DOT text
    render(graph, "pd.svg")             # needs Graphviz's `dot` for svg and png

What the picture shows (docs/api.md, *serq draw*):

- the workload (top left): the arrival law, the attributes each turn draws, and the session's
  own path when it has one (its `turn`s are the arrows into the server);
- the server's path, top to bottom, from `request` to `response`: statements in boxes (sets and
  observations of one stretch share a box), a `hold` as a nested box (its pools and units at the
  top, what it releases, caches and leases at the bottom), a `run` as a box with an arrow to the
  stage it runs on (orange a prefill, green a decode), branches and loops as diamonds whose arrows
  carry the guard, a `fork`'s leg as a dashed box whose end joins the `join`, a `choose` (a
  gateway's route) as a hexagon;
- the deployment (right): one box per queue (the pools and stages named `Q.…`, with the roles the
  server runs on its engine: prefill, decode), each stage with its kind (`fifo(c)`, `ps(φ)`,
  `delay`, or a step engine with its budget and schedule in one line), each pool with its cap,
  block and queue/evict/preempt rules and an arrow to the engine that admits it (`admit_via`) or
  whose memory it is (`memory_of`); a KV transfer between two queues' NICs as a bold arrow from
  the source to the reader, labelled `D pull P` or `P push D`, the latency and the share;
- the gauges and claims (bottom).

A queue's roles and a pull or push are not IR constructs (queues "compile to named pools and
stages"): the drawing reads them back from the names (`P.kv`, `D.nic.latency`) and from what the
server runs (a run's mode; the wait, the copy, the load and the release of a transfer).
"""

from __future__ import annotations

import html
import itertools
import shutil
from collections import defaultdict
from pathlib import Path

import graphviz

from serq.errors import SerqError
from serq.exprtext import arrival, clip, engine, num, pool_rules, ref, service, text, wrap
from serq.ir import models as ir

__all__ = ["draw", "render", "dot_available", "FORMATS"]

FORMATS = ("svg", "png", "dot")
FONT = "Helvetica"
WIDTH = 64  # characters of an expression on one line of a label

# colours: the path, the deployment, the modes of a run
C_PATH = "#1f4e79"
C_HOLD = ("#eef4fb", "#e1ecf7", "#d4e4f3")
C_LEG = "#fdf6e3"
C_QUEUE = "#f7f7f7"
C_STAGE = "#fff2cc"
C_ENGINE = "#ffe0b2"
C_POOL = "#e2f0d9"
C_RUN = {"prefill": "#e67e22", "decode": "#2e8b57", None: "#5b5b5b"}
C_XFER = "#8e44ad"
C_REQUEST = "#1f77b4"

# statements that are drawn as lines of one box with their neighbours
_SIMPLE = ("set", "observe", "grow", "drop", "release", "load")


def dot_available() -> bool:
    """Whether Graphviz's `dot` program is on PATH (rendering svg and png needs it)."""
    return shutil.which("dot") is not None


def _h(s: str) -> str:
    return html.escape(s, quote=False)


def _label(title: str | None, lines: list[str] = (), small: list[str] = ()) -> str:
    """An HTML label: a bold title, then lines, then smaller grey lines, left-aligned."""
    rows = []
    if title:
        rows.append(f"<B>{_h(title)}</B>")
    rows += [_h(w) for ln in lines for w in wrap(clip(ln, 400), WIDTH)]
    rows += [f'<FONT POINT-SIZE="9" COLOR="#555555">{_h(w)}</FONT>' for ln in small for w in wrap(clip(ln, 400), WIDTH)]
    return "<" + '<BR ALIGN="LEFT"/>'.join(rows) + '<BR ALIGN="LEFT"/>>'


def queue_of(name: str, names=()) -> str | None:
    """The queue a pool or stage belongs to: `P` for `P.kv` and `P.nic.latency`, and for `P` itself when
    `names` (the program's pools and stages) has a `P.…`; None for any other name. The linker names a
    queue's pools and stages after the queue, whose own stage has the queue's name."""
    if "." in name:
        return name.split(".", 1)[0]
    return name if any(n.startswith(name + ".") for n in names) else None


def _family(name: str, count: int) -> str:
    return f"{name}[{count}]" if count > 1 else name


class _Drawer:
    def __init__(self, program: ir.Program, title: str | None) -> None:
        self.p = program
        self.n = itertools.count()
        self.stages = {s.name: s for s in program.stages}
        self.runs: list[tuple[str, ir.RunStmt]] = []        # (node, statement)
        self.turns: list[str] = []                          # session `turn` nodes
        self.legs: list[tuple[str, str | None]] = []        # a fork's leg ends, waiting for a join
        self.roles: dict[str, set[str]] = defaultdict(set)  # queue -> the modes run on its stage
        self.names = [x.name for x in program.stages] + [x.name for x in program.pools]
        self.g = graphviz.Digraph(
            "serq",
            graph_attr={"rankdir": "TB", "fontname": FONT, "fontsize": "12", "compound": "true",
                        "newrank": "true", "nodesep": "0.3", "ranksep": "0.35", "labelloc": "t",
                        "label": _label(title, [], []) if title else ""},
            node_attr={"fontname": FONT, "fontsize": "10", "shape": "box", "style": "rounded",
                       "margin": "0.12,0.05"},
            edge_attr={"fontname": FONT, "fontsize": "9", "arrowsize": "0.7"},
        )

    def queue(self, name: str) -> str | None:
        return queue_of(name, self.names)

    def id(self, kind: str) -> str:
        return f"{kind} {next(self.n)}"

    # -------------------------------------------------------------- the path
    def node(self, g, kind: str, label: str, **attrs) -> str:
        nid = self.id(kind)
        g.node(nid, label, **attrs)
        return nid

    def edge(self, a: str, b: str, label: str | None = None, **attrs) -> None:
        if label:
            attrs["label"] = _h(clip(label, 40))
        self.g.edge(a, b, **attrs)

    def block(self, g, body: list, depth: int = 0, side: str = "server") -> tuple[str | None, list]:
        """Draw `body` into `g`: its first node and its exits, (node, label of the arrow out)."""
        entry: str | None = None
        exits: list[tuple[str, str | None]] = []
        i = 0
        while i < len(body):
            s = body[i]
            if s.kind in _SIMPLE:
                j = i
                while j < len(body) and body[j].kind in _SIMPLE:
                    j += 1
                e = self.simple(g, body[i:j])
                x = [(e, None)]
                i = j
            else:
                e, x = self.stmt(g, s, depth, side)
                i += 1
            if e is None:
                continue
            if entry is None:
                entry = e
            for a, lbl in exits:
                self.edge(a, e, lbl, color=C_PATH)
            exits = x
        return entry, exits

    def simple(self, g, stmts: list) -> str:
        lines = []
        for s in stmts:
            if s.kind == "set":
                lines.append(f"{s.name} = {text(s.value)}")
            elif s.kind == "observe":
                lines.append(f"observe {s.name} = {text(s.value)}")
            elif s.kind == "grow":
                lines.append(f"grow {ref(s.pool.pool, s.pool.index)} by {text(s.amount)}")
            elif s.kind == "load":
                lines.append(f"load {ref(s.pool.pool, s.pool.index)} ({text(s.amount)})")
            elif s.kind == "release":
                lines.append(f"release {ref(s.pool.pool, s.pool.index)}")
            elif s.kind == "drop":
                lines.append(f"drop {ref(s.pool.pool, s.pool.index)}")
        return self.node(g, "stmt", _label(None, lines), color="#999999", fontcolor="#333333")

    def stmt(self, g, s, depth: int, side: str) -> tuple[str | None, list]:
        k = s.kind
        if k == "run":
            return self.run(g, s)
        if k == "hold":
            return self.hold(g, s, depth, side)
        if k == "branch":
            d = self.node(g, "branch", _h(clip(f"branch ({text(s.test)})", 40)), shape="diamond",
                          style="", color=C_PATH, fontsize="9")
            exits: list = []
            for arm, lbl in ((s.then, text(s.test)), (s.otherwise, "else")):
                e, x = self.block(g, arm, depth, side)
                if e is None:
                    exits.append((d, lbl))
                else:
                    self.edge(d, e, lbl, color=C_PATH, fontcolor=C_PATH)
                    exits += x
            return d, exits
        if k == "while":
            d = self.node(g, "while", _h(clip(f"while ({text(s.test)})", 40)), shape="diamond",
                          style="", color=C_PATH, fontsize="9")
            e, x = self.block(g, s.body, depth, side)
            if e is None:
                self.edge(d, d, "repeat", color=C_PATH)
            else:
                self.edge(d, e, text(s.test), color=C_PATH, fontcolor=C_PATH)
                for a, lbl in x:
                    self.edge(a, d, lbl or "again", color=C_PATH, style="dashed", constraint="false")
            return d, [(d, "done")]
        if k == "loop":
            d = self.node(g, "loop", "loop", shape="diamond", style="", color=C_PATH, fontsize="9")
            e, x = self.block(g, s.body, depth, side)
            if e is None:
                self.edge(d, d, color=C_PATH)
            else:
                self.edge(d, e, color=C_PATH)
                for a, lbl in x:
                    self.edge(a, d, lbl or "again", color=C_PATH, style="dashed", constraint="false")
            return d, []
        if k == "fork":
            f = self.node(g, "fork", "fork", shape="box", style="filled", fillcolor="#333333",
                          fontcolor="white", height="0.2")
            with g.subgraph(name=f"cluster_leg {next(self.n)}") as c:
                c.attr(label="leg (runs beside the request)", style="dashed,filled", fillcolor=C_LEG,
                       color="#b58900", fontsize="9", labeljust="l")
                e, x = self.block(c, s.body, depth + 1, side)
            if e is not None:
                self.edge(f, e, "leg", color="#b58900", style="dashed")
                self.legs += x
            return f, [(f, None)]
        if k == "join":
            j = self.node(g, "join", "join", shape="box", style="filled", fillcolor="#333333",
                          fontcolor="white", height="0.2")
            for a, _ in self.legs:
                self.edge(a, j, "leg ends", color="#b58900", style="dashed")
            self.legs = []
            return j, [(j, None)]
        if k == "choose":
            return self.choose(g, s)
        if k == "turn":
            t = self.node(g, "turn", _label("turn", ["submit to the server, wait for its answer"]),
                          shape="cds", style="filled", fillcolor="#dbe9f6", color=C_REQUEST)
            self.turns.append(t)
            return t, [(t, None)]
        if k == "end":
            e = self.node(g, "end", "end (the session ends)", shape="box", style="filled",
                          fillcolor="#f4cccc")
            return e, []
        nid = self.node(g, "stmt", _h(k))
        return nid, [(nid, None)]

    def choose(self, g, s: ir.ChooseStmt) -> tuple[str, list]:
        """A route: `choose i in n by (keys)`, with the family its keys index by `i` (a gateway's)."""
        fams = []
        for k in s.keys:
            for x in ir.walk(k):
                kind = getattr(x, "kind", None)
                r = x.pool if kind == "pool_obs" else x.stage if kind == "stage_obs" else None
                name = getattr(r, "pool", None) or getattr(r, "stage", None)
                if (r is not None and r.index is not None and r.index.kind == "attr"
                        and r.index.name == s.name):
                    q = self.queue(name) or name
                    if q not in fams:
                        fams.append(q)
        count = s.count
        among = (f"0..{num(count.value - 1)}" if count.kind == "num" else f"0..{text(count)} - 1")
        if len(fams) == 1:
            among = f"{fams[0]}[{among}]"
        keys = ", ".join(text(x) for x in s.keys)
        label = _label(f"route: choose {s.name} among {among}", [f"the least ({keys})"])
        nid = self.node(g, "choose", label, shape="hexagon", style="filled", fillcolor="#eaf1fb", color=C_PATH)
        return nid, [(nid, None)]

    def run(self, g, s: ir.RunStmt) -> tuple[str, list]:
        names = [ref(st.stage, st.index) for st in s.stages]
        for st in s.stages:
            q = self.queue(st.stage)
            if s.mode is not None:
                self.roles[st.stage if q is None else q].add(s.mode)
        title = "run " + " + ".join(names) + (f" · {s.mode}" if s.mode else "")
        lines = [f"work {text(s.work)}"]
        if s.growing is not None:
            lines.append(f"growing {ref(s.growing.pool, s.growing.index)}")
        small = []
        stages = [st.stage for st in s.stages]
        if len(stages) == 1 and stages[0].endswith(".nic.latency"):
            small.append("the wait before a KV copy (the relation's latency)")
        elif len(stages) > 1 and all(x.endswith(".nic") for x in stages):
            small.append(f"the KV copy: one job on {len(stages)} NICs (share {self.p.share})")
        elif len(stages) > 1:
            small.append(f"one job on {len(stages)} stages (share {self.p.share})")
        nid = self.node(g, "run", _label(title, lines, small), color=C_RUN[s.mode], penwidth="1.5")
        self.runs.append((nid, s))
        return nid, [(nid, None)]

    def hold(self, g, s: ir.HoldStmt, depth: int, side: str) -> tuple[str, list]:
        with g.subgraph(name=f"cluster_hold {next(self.n)}") as c:
            c.attr(label="", style="rounded,filled", fillcolor=C_HOLD[depth % len(C_HOLD)],
                   color="#6f8fb3")
            lines = []
            for hp in s.pools:
                w = f"{ref(hp.pool.pool, hp.pool.index)}: {text(hp.units)}"
                if hp.reserve is not None:
                    w += f" · reserve {text(hp.reserve)}"
                lines.append(w)
            small = []
            if s.reuse is not None:
                small.append(f"reuse {text(s.reuse)}")
            head = self.node(c, "hold", _label("hold", lines, small), shape="box", style="filled",
                             fillcolor="white", color="#6f8fb3")
            e, x = self.block(c, s.body, depth + 1, side)
            tail_lines = ["release " + ", ".join(ref(hp.pool.pool, hp.pool.index) for hp in s.pools)]
            if s.cache is not None:
                tail_lines.append(f"cache {text(s.cache)}")
            if s.lease is not None:
                tail_lines.append(f"lease {ref(s.lease.pool.pool, s.lease.pool.index)} "
                                  f"({text(s.lease.duration)})")
            tail = self.node(c, "release", _label(None, tail_lines), shape="box", style="filled",
                             fillcolor="white", color="#6f8fb3", fontsize="9")
        if e is None:
            self.edge(head, tail, color=C_PATH)
        else:
            self.edge(head, e, color=C_PATH)
            for a, lbl in x:
                self.edge(a, tail, lbl, color=C_PATH)
        return head, [(tail, None)]

    # -------------------------------------------------------------- the whole picture
    def workload(self) -> str:
        w = self.p.workload
        with self.g.subgraph(name="cluster_workload") as c:
            c.attr(label="workload", style="rounded,filled", fillcolor="#f3f8fd", color=C_REQUEST,
                   fontcolor=C_REQUEST, labeljust="l")
            lines = []
            if w.trace is not None:
                lines.append(f"turns from trace \"{w.trace.file}\"" + (" ordered" if w.trace.ordered else ""))
            for name, blk in (("init", w.init), ("each turn", w.turn)):
                for s in blk:
                    if s.kind == "set":
                        hidden = " (hidden)" if s.name in w.hidden else ""
                        lines.append(f"{name}: {s.name} = {text(s.value)}{hidden}")
                    elif s.kind == "observe":
                        lines.append(f"{name}: observe {s.name} = {text(s.value)}")
            arr = self.node(c, "arrive", _label("arrive " + arrival(w.arrival), lines), shape="box",
                            style="rounded,filled", fillcolor="white", color=C_REQUEST)
            simple_session = len(w.session) == 1 and w.session[0].kind == "turn"
            if simple_session:
                self.turns.append(arr)
                return arr
            e, x = self.block(c, w.session, 0, "session")
            if e is not None:
                self.edge(arr, e, "a session", color=C_REQUEST)
            done = self.node(c, "session end", "session ends", shape="box", style="rounded,dashed",
                             color=C_REQUEST, fontsize="9")
            for a, lbl in x:
                self.edge(a, done, lbl, color=C_REQUEST)
        return arr

    def server(self) -> tuple[str, str]:
        with self.g.subgraph(name="cluster_server") as c:
            c.attr(label="server: the path of a request", style="rounded", color=C_PATH, fontcolor=C_PATH,
                   labeljust="l")
            req = self.node(c, "request", "request", shape="oval", style="filled", fillcolor="#dbe9f6",
                            color=C_REQUEST)
            e, x = self.block(c, self.p.server, 0, "server")
            resp = self.node(c, "response", "response", shape="oval", style="filled", fillcolor="#dbe9f6",
                             color=C_REQUEST)
            if e is None:
                self.edge(req, resp, color=C_PATH)
            else:
                self.edge(req, e, color=C_PATH)
                for a, lbl in x:
                    self.edge(a, resp, lbl, color=C_PATH)
        return req, resp

    def deployment(self) -> tuple[dict[str, str], dict[str, str]]:
        stage_ids: dict[str, str] = {}
        pool_ids: dict[str, str] = {}
        order = []
        for x in list(self.p.stages) + list(self.p.pools):
            q = self.queue(x.name)
            if q not in order:
                order.append(q)

        def add(c, x) -> None:
            if isinstance(x, ir.Stage):
                nid = f"stage {x.name}"
                stage_ids[x.name] = nid
                kind = service(x.service)
                title = f"{_family(x.name, x.count)} · {kind}"
                if x.service.kind == "step":
                    c.node(nid, _label(title, engine(x.service)), style="filled", fillcolor=C_ENGINE,
                           color="#c27c0e", penwidth="1.5")
                else:
                    c.node(nid, _label(title), style="rounded,filled", fillcolor=C_STAGE, color="#b7950b")
            else:
                nid = f"pool {x.name}"
                pool_ids[x.name] = nid
                c.node(nid, _label(f"pool {_family(x.name, x.count)}", pool_rules(x)), shape="cylinder",
                       style="filled", fillcolor=C_POOL, color="#548235")

        with self.g.subgraph(name="cluster_deployment") as d:
            d.attr(label="deployment", style="rounded", color="#7f7f7f", fontcolor="#555555", labeljust="r")
            for q in order:
                items = [x for x in list(self.p.stages) + list(self.p.pools) if self.queue(x.name) == q]
                if q is None:
                    for x in items:
                        add(d, x)
                    continue
                count = self.stages[q].count if q in self.stages else max(x.count for x in items)
                roles = sorted(self.roles.get(q, ()), key=["prefill", "decode"].index)
                label = f"queue {_family(q, count)}" + (f" : {', '.join(roles)}" if roles else "")
                with d.subgraph(name=f"cluster_queue {q}") as c:
                    c.attr(label=label, style="rounded,filled", fillcolor=C_QUEUE, color="#7f7f7f",
                           fontcolor="#333333", labeljust="l")
                    for x in items:
                        add(c, x)
        for p in self.p.pools:
            if p.admit_via is not None and p.admit_via in stage_ids:
                self.g.edge(pool_ids[p.name], stage_ids[p.admit_via], label="admitted by", color="#548235",
                            fontcolor="#548235")
            if p.memory_of is not None and p.memory_of in stage_ids:
                self.g.edge(pool_ids[p.name], stage_ids[p.memory_of], label="memory of", color="#548235",
                            fontcolor="#548235", style="dashed")
            if p.spill is not None:
                self.g.edge(pool_ids[p.name], pool_ids[p.spill.pool.pool],
                            label=f"spill via {p.spill.stage.stage}", color="#548235", style="dotted")
        return stage_ids, pool_ids

    def relations(self, stage_ids: dict[str, str]) -> None:
        """The KV transfers between queues: a run on two NICs, after a wait on a latency stage,
        before the load of the reader's KV and the release of the source's."""
        seen = set()
        for body in _bodies(self.p):
            for i, s in enumerate(body):
                if not (s.kind == "run" and len(s.stages) >= 2
                        and all(st.stage.endswith(".nic") for st in s.stages)):
                    continue
                wait = body[i - 1] if i > 0 else None
                poster = None
                latency = None
                if (wait is not None and wait.kind == "run" and len(wait.stages) == 1
                        and wait.stages[0].stage.endswith(".nic.latency")):
                    poster = queue_of(wait.stages[0].stage)
                    latency = text(wait.work)
                after = body[i + 1: i + 4]
                reader = next((queue_of(x.pool.pool) for x in after if x.kind == "load"), None)
                source = next((queue_of(x.pool.pool) for x in after if x.kind == "release"), None)
                nics = [st.stage for st in s.stages]
                if source is None or reader is None:
                    src_nic, dst_nic = nics[0], nics[-1]
                    word = "KV transfer"
                else:
                    src_nic, dst_nic = f"{source}.nic", f"{reader}.nic"
                    if poster is None:  # no wait before the copy: the poster's latency stage says who posts
                        poster = next((q for q in (reader, source) if f"{q}.nic.latency" in stage_ids), None)
                    if poster == reader:
                        word = f"{reader} pull {source}"
                    elif poster == source:
                        word = f"{source} push {reader}"
                    else:
                        word = f"KV {source} → {reader}"
                if (src_nic, dst_nic, word) in seen or src_nic not in stage_ids or dst_nic not in stage_ids:
                    continue
                seen.add((src_nic, dst_nic, word))
                lines = [word]
                if latency is not None:
                    lines.append(f"latency {latency}")
                lines.append(f"share {self.p.share}")
                self.g.edge(stage_ids[src_nic], stage_ids[dst_nic], label=_h(" · ".join(lines)),
                            color=C_XFER, fontcolor=C_XFER, penwidth="2.5", constraint="false")

    def measures(self) -> None:
        lines = [f"gauge {g.name} = {text(g.value)}" for g in self.p.gauges]
        for c in self.p.claims:
            where = {"every_iteration": "every iteration of ", "some_iteration": "some iteration of ",
                     "at_end": "at end"}[c.form]
            if c.stage is not None:
                where += ref(c.stage.stage, c.stage.index)
            given = f" given ({text(c.given)})" if c.given is not None else ""
            lines.append(f"claim {c.name}{given}: {where} ({text(c.value)})")
        if lines:
            self.g.node("measures", _label("gauges and claims", lines), shape="note", style="filled",
                        fillcolor="#fafafa", color="#999999")

    def build(self) -> graphviz.Digraph:
        arr = self.workload()
        req, _resp = self.server()
        for t in self.turns:
            self.edge(t, req, "turn" if t != arr or len(self.turns) > 1 else "request", color=C_REQUEST,
                      fontcolor=C_REQUEST, penwidth="1.5")
        stage_ids, pool_ids = self.deployment()
        for nid, s in self.runs:
            for st in s.stages:
                if st.stage in stage_ids:
                    self.g.edge(nid, stage_ids[st.stage], color=C_RUN[s.mode], penwidth="1.2",
                                arrowhead="normal", style="solid")
        self.relations(stage_ids)
        self.measures()
        return self.g


def _bodies(program: ir.Program):
    """Every statement list of the program (the server's, the workload's, nested ones)."""
    stack = [program.server, program.workload.session, program.workload.init, program.workload.turn]
    while stack:
        body = stack.pop()
        yield body
        for s in body:
            for name in ("body", "then", "otherwise"):
                sub = getattr(s, name, None)
                if isinstance(sub, list):
                    stack.append(sub)


def draw(program: ir.Program, title: str | None = None) -> graphviz.Digraph:
    """The picture of `program` (a linked IR) as a `graphviz.Digraph`: `.source` is the DOT text; in
    a notebook the graph shows itself (with Graphviz's `dot` installed)."""
    d = _Drawer(program, title if title is not None else program.source)
    return d.build()


def render(graph: graphviz.Digraph, out: str | Path, fmt: str | None = None) -> Path:
    """Write `graph` to `out`: `.dot` is the DOT text; `.svg` and `.png` need Graphviz's `dot`
    (a SerqError naming what to install when it is missing). Returns the path written."""
    out = Path(out)
    fmt = fmt or out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise SerqError(f"-o {out}: write .svg, .png or .dot", None, "usage")
    try:
        if fmt == "dot":
            out.write_text(graph.source, encoding="utf-8")
            return out
        if not dot_available():
            raise SerqError(f"rendering {fmt} needs Graphviz's `dot` program, which is not installed "
                            "(apt-get install graphviz, brew install graphviz)", None, "usage")
        out.write_bytes(graph.pipe(format=fmt))
    except OSError as e:
        raise SerqError(f"-o {out}: {e.strerror or e}", None, "usage") from None
    except graphviz.ExecutableNotFound:
        raise SerqError(f"rendering {fmt} needs Graphviz's `dot` program (apt-get install graphviz)",
                        None, "usage") from None
    except graphviz.CalledProcessError as e:
        raise SerqError(f"dot failed on the drawing: {e.stderr.decode(errors='replace').strip()}",
                        None, "error") from None
    return out
