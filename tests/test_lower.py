"""The vocabulary lowers to the kernel: IR equality with hand-written kernel
programs, the IR shapes the reference tables give, and every refusal."""

from __future__ import annotations

import json

import pytest

from helpers import REPO, link_source, refused
from serq.ir import models as ir

ENGINE = """
  device gpu {{ compute (t) = t * 2; kv cap 1000; }}
  engine llm on gpu {{
    reqs cap 4;
    tokens cap 64;
    {extra}
    schedule {{ {schedule} }}
    execute ({execute});
  }}
  pool kv on gpu {{ block 16; evict lru; preempt lifo; }}
  pool reqs on llm {{ queue fifo; }}
"""
VLLM = "advance running; admit waiting while (running.preempted == 0) taking reqs (1), kv (p) reserve (p);"


def engine_program(schedule: str = VLLM, execute: str = "1 + compute(batch.tokens)", extra: str = "",
                   server: str = "llm (n);", decls: str = "", request: str | None = None) -> str:
    if request is None:
        request = "request (p) { prefill (p) growing kv; decode (3) growing kv; }"
    return f"""fn main() {{
{ENGINE.format(extra=extra + request, schedule=schedule, execute=execute)}
  {decls}
  workload {{ arrive poisson(1); turn {{ Size n = floor(~uniform(10, 100)); }} }}
  server {{ {server} }}
}}
"""


def _ir(text: str) -> dict:
    return json.loads(ir.to_json(link_source(text)))


def _strip(data):
    """IR without source locations, for comparing a lowering with the kernel written by hand."""
    if isinstance(data, dict):
        return {k: _strip(v) for k, v in data.items() if k not in ("at", "source")}
    if isinstance(data, list):
        return [_strip(v) for v in data]
    return data


def _step(data: dict, name: str = "llm") -> dict:
    return next(s for s in data["stages"] if s["name"] == name)["service"]


# ------------------------------------------------------------------ engines
def test_engine_is_a_step_stage_with_its_pools():
    d = _ir(engine_program())
    step = _step(d)
    assert step["kind"] == "step" and step["budget"] == {"kind": "num", "value": 64}
    assert step["serve"] == {"kind": "by", "keys": []} and "iteration" not in step
    # the device's time resource written out where execute reads it
    assert step["cost"] == {"kind": "binary", "op": "add", "lhs": {"kind": "num", "value": 1},
                            "rhs": {"kind": "binary", "op": "mul", "lhs": {"kind": "ctx", "var": "tokens"},
                                    "rhs": {"kind": "num", "value": 2}}}
    pools = {p["name"]: p for p in d["pools"]}
    assert pools["kv"]["cap"] == 1000 and pools["kv"]["memory_of"] == "llm" and "admit_via" not in pools["kv"]
    assert pools["reqs"]["cap"] == 4 and pools["reqs"]["admit_via"] == "llm"


def test_only_on_both_statements_is_the_two_statement_body():
    s = ("advance running only (in_phase()); admit waiting only (in_phase()) while (running.preempted == 0) "
         "taking reqs (1), kv (p) reserve (p);")
    text = engine_program(schedule=s).replace(
        "fn main() {", "def in_phase() { running.decoding > 0 ? decoding : !decoding }\nfn main() {")
    step = _step(_ir(text))
    assert [x["kind"] for x in step["iteration"]] == ["serve", "admit"]
    assert step["iteration"][0]["only"] == step["iteration"][1]["only"]
    assert step["iteration"][1]["gate"] == {"kind": "unary", "op": "not", "arg": {"kind": "ctx", "var": "preempted"}}


def test_exclusive_prefill_is_its_serve_order():
    s = "exclusive prefill; admit waiting while (running.preempted == 0) taking reqs (1), kv (p) reserve (p);"
    step = _step(_ir(engine_program(schedule=s)))
    assert step["serve"] == {"kind": "exclusive_prefill"} and "iteration" not in step


def test_decode_first_and_by_orders():
    s = "advance running decode first; admit waiting while (running.preempted == 0) taking reqs (1), kv (p);"
    keys = _step(_ir(engine_program(schedule=s)))["serve"]["keys"]
    assert keys == [{"kind": "cond", "test": {"kind": "ctx", "var": "decoding"}, "then": {"kind": "num", "value": 0},
                     "otherwise": {"kind": "num", "value": 1}}]
    s = "advance running by (remaining); admit waiting while (running.preempted == 0) taking reqs (1), kv (p);"
    assert _step(_ir(engine_program(schedule=s)))["serve"]["keys"] == [{"kind": "ctx", "var": "remaining"}]


def test_a_register_declared_twice_is_refused_at_the_second():
    err = refused(engine_program(extra="state k = 0; state k = 1;"))
    assert "engine `llm` declares `state k` twice (first at" in err.message
    assert ": a register has one starting value" in err.message


def test_any_other_schedule_is_the_iteration_body_with_registers():
    s = ("branch (phase == 0) { advance running; set phase = 1; } else { admit waiting taking reqs (1), kv (p); "
         "set phase = 0; }")
    d = _ir(engine_program(schedule=s, extra="state phase = 0;"))
    step = _step(d)
    assert step["registers"] == [{"name": "phase", "init": 0}]
    body = step["iteration"]
    assert body[0]["kind"] == "branch"
    assert body[0]["test"]["lhs"] == {"kind": "reg", "stage": "llm", "name": "phase"}
    assert [x["kind"] for x in body[0]["then"]] == ["serve", "set"]
    assert [x["kind"] for x in body[0]["otherwise"]] == ["admit", "set"]


def test_chunk_threshold_lowers_inf_to_zero_and_lets_are_substituted():
    s = ("let threshold = running.count + waiting.count > 1 ? 16 : inf; advance running each at most (threshold); "
         "admit waiting while (running.preempted == 0) each at most (threshold) taking reqs (1), kv (p);")
    chunk = _step(_ir(engine_program(schedule=s)))["chunk"]
    assert chunk["kind"] == "cond" and chunk["then"] == {"kind": "num", "value": 16}
    assert chunk["otherwise"] == {"kind": "num", "value": 0}
    assert chunk["test"]["lhs"] == {"kind": "binary", "op": "add", "lhs": {"kind": "ctx", "var": "residents"},
                                    "rhs": {"kind": "ctx", "var": "waiting_holds"}}


# ------------------------------------------------------------------ requests
def test_request_is_the_hold_the_server_would_write():
    request = ("request (p, o) { set kept = p; at admission { known = max(kept, computed + 1); } "
               "set kept = known; prefill (known) growing kv; decode (o) growing kv; mark done; cache (p + o); }")
    s = ("advance running; admit waiting while (running.preempted == 0) taking reqs (1), kv (known) "
         "reserve (known) reuse (0);")
    lowered = _ir(engine_program(schedule=s, request=request, server="llm (n, 5);"))
    by_hand = _ir(engine_program(schedule=s, request="", server="""
        set kept = n;
        hold reqs (cost(reqs, 1)), kv (cost(kv, known)) reserve (cost(kv, known)) reuse (cost(reqs, kv, 0))
             at admission (known = max(kept, computed + 1)) {
          set kept = known;
          run llm prefill (cost(llm, known)) growing kv;
          run llm decode (cost(llm, 5)) growing kv;
          set llm.done = now;
        } cache (cost(reqs, kv, n + 5));"""))
    assert _strip(lowered) == _strip(by_hand)


def test_request_without_taking_is_its_statements():
    s = "advance running; admit waiting while (running.preempted == 0);"
    lowered = _ir(engine_program(schedule=s, request="request (p) { observe q = p; }", server="llm (n);"))
    by_hand = _ir(engine_program(schedule=s, request="", server="observe q = n;"))
    assert _strip(lowered) == _strip(by_hand)


# ------------------------------------------------------------------ serving forms
TOOL = """fn main() {{
  {stages}
  workload {{ arrive poisson(1); session {{ turn; {tool} turn; }} }}
  server {{ }}
}}"""


def test_workload_tool_supplies_a_delay_stage_after_the_declared_ones():
    lowered = _ir(TOOL.format(stages="stage svc : fifo;", tool="tool (~exp(2));"))
    by_hand = _ir(TOOL.format(stages="stage svc : fifo; stage tool : delay;", tool="run tool (cost(tool, ~exp(2)));"))
    assert _strip(lowered) == _strip(by_hand)


def test_tool_on_a_declared_stage_array():
    lowered = _ir(TOOL.format(stages="stage box[2] : fifo;", tool="tool on box[1] (3);"))
    by_hand = _ir(TOOL.format(stages="stage box[2] : fifo;", tool="run box[1] (cost(box, 3));"))
    assert _strip(lowered) == _strip(by_hand)


XFER = """fn main() {{
  stage link : ps(10);
  pool src {{ cap 100; }}
  pool dst {{ cap 100; }}
  workload {{ arrive poisson(1); }}
  server {{ hold src (cost(src, 5)) {{ }} lease src (inf); hold dst (cost(dst, 5)) {{ {body} }} }}
}}"""


def test_transfer_is_run_load_release():
    lowered = _ir(XFER.format(body="transfer (4) from src to dst (5);"))
    by_hand = _ir(XFER.format(body="run link (cost(link, 4)); load dst (cost(dst, 5)); release src;"))
    assert _strip(lowered) == _strip(by_hand)


# ------------------------------------------------------------------ queues and relations
def _stmts(body):
    out = []
    for s in body:
        out.append(s)
        for k in ("body", "then", "otherwise"):
            out.extend(_stmts(s.get(k, [])))
    return out


def _ref(r):
    i = r.get("index")
    name = r.get("pool") or r.get("stage")
    if i is None:
        return name
    return f"{name}[{i.get('name', i.get('value'))}]"


def test_pull_relation_spells_out_the_kernel_runs():
    d = _ir((REPO / "examples/pd-disaggregation/llmd_nixl_pull.sq").read_text())
    flat = [(s["kind"], [_ref(x) for x in s.get("stages", [])] or ([_ref(s["pool"])] if "pool" in s else []))
            for s in _stmts(d["server"])]
    i = flat.index(("run", ["D.nic.latency[j]"]))
    assert flat[i:i + 4] == [("run", ["D.nic.latency[j]"]), ("run", ["P.nic[i]", "D.nic[j]"]),
                             ("load", ["D.kv[j]"]), ("release", ["P.kv[i]"])]
    assert d["share"] == "maxmin"
    names = {s["name"]: s["count"] for s in d["stages"]}
    assert names == {"P": 2, "P.nic": 2, "D": 2, "D.nic": 2, "D.nic.latency": 2}


def test_push_relation_waits_on_the_posters_latency():
    d = _ir((REPO / "examples/pd-disaggregation/vllm_nixl_push.sq").read_text())
    runs = [[_ref(x) for x in s["stages"]] for s in _stmts(d["server"]) if s["kind"] == "run"]
    assert ["P.nic.latency[0]"] in runs and ["P.nic[0]", "D.nic[0]"] in runs


QUEUE = """fn main() {{
  queue Q[2] : prefill {{
    pool kv {{ cap 100; }}
    serve fifo;
    prefill (prompt) {{
      hold kv (cost(kv, prompt)) {{ set c = prompt; mark started; run (cost(Q, c)); }} lease kv (inf);
    }}
  }}
  workload {{ arrive poisson(1); turn {{ Size n = 3; }} }}
  server {{ {server} }}
  {decls}
}}"""


def test_queue_entry_at_its_call_site():
    d = _ir(QUEUE.format(server="choose k in 2 by (queued(Q[k].kv)); Q[k].prefill (n);", decls=""))
    assert [(p["name"], p["count"]) for p in d["pools"]] == [("Q.kv", 2)]
    assert [(s["name"], s["count"], s["service"]["kind"]) for s in d["stages"]] == [("Q", 2, "fifo")]
    hold = d["server"][1]
    assert _ref(hold["pools"][0]["pool"]) == "Q.kv[k]" and _ref(hold["lease"]["pool"]) == "Q.kv[k]"
    body = hold["body"]
    assert body[0] == {"kind": "set", "name": "Q.c", "value": {"kind": "attr", "name": "n"},
                       "at": body[0]["at"]}
    assert body[1]["name"] == "Q.started" and body[1]["value"] == {"kind": "ctx", "var": "now"}
    assert [_ref(x) for x in body[2]["stages"]] == ["Q[k]"]
    assert body[2]["work"] == {"kind": "cost", "resources": ["Q"], "arg": {"kind": "attr", "name": "Q.c"}}


def test_vocabulary_examples_link_and_their_ir_has_only_kernel_kinds():
    kernel_kinds = {"num", "inf", "attr", "ctx", "reg", "unary", "binary", "cond", "call", "draw", "cost",
                    "pool_obs", "stage_obs", "observed", "turn", "set", "observe", "hold", "grow", "drop", "release",
                    "load", "run", "branch", "while", "loop", "fork", "join", "choose", "end", "lru", "by", "none",
                    "fifo", "ps", "step", "exclusive_prefill", "serve", "admit", "poisson", "renewal", "closed",
                    "batch", "trace"}

    def kinds(x):
        if isinstance(x, dict):
            if "kind" in x and isinstance(x["kind"], str):
                yield x["kind"]
            for v in x.values():
                yield from kinds(v)
        elif isinstance(x, list):
            for v in x:
                yield from kinds(v)

    for rel in ("multi-turn/vllm.sq", "oracle/vllm_request.sq", "pd-disaggregation/llmd_nixl_pull.sq",
                "pd-disaggregation/vllm_nixl_push.sq"):
        d = _ir((REPO / "examples" / rel).read_text().replace('"vllm_request.csv"', f'"{REPO}/examples/oracle/vllm_request.csv"'))
        assert set(kinds(d)) <= kernel_kinds, (rel, set(kinds(d)) - kernel_kinds)


# ------------------------------------------------------------------ refusals
E = engine_program
Q = QUEUE.format
PD = (REPO / "examples/pd-disaggregation/llmd_nixl_pull.sq").read_text()

REFUSALS = [
    ("engine-unknown-device", E().replace("engine llm on gpu", "engine llm on tpu"), "`tpu`, which is no device"),
    ("engine-no-tokens-cap", E().replace("tokens cap 64;", ""), "has no `tokens cap`"),
    ("engine-no-execute", E().replace("execute (1 + compute(batch.tokens));", ""), "has no `execute"),
    ("engine-capacity-unpooled", E().replace("pool reqs on llm { queue fifo; }", ""), "which no `pool reqs on llm`"),
    ("pool-on-device-without-capacity", E(decls="pool hbm on gpu { }"), "declares no `hbm cap"),
    ("pool-on-engine-wrong-device", E(decls="device cpu { x cap 1; } pool x on llm.cpu { }"), "engine `llm` runs on `gpu`"),
    ("engine-family-with-request", E().replace("engine llm on gpu", "engine llm[2] on gpu"), "an engine family has none"),
    ("value-in-wrong-clause", E(execute="running.preempted"), "is not read in `execute`"),
    ("batch-in-schedule", E(schedule="branch (batch.decoding > 0) { advance running; } else { advance running; }"),
     "is not read in the schedule"),
    ("kernel-bare-name", E(execute="tokens"), "is the kernel's name"),
    ("unknown-engine-value", E(execute="running.tokens"), "is no engine value"),
    ("schedule-let-outside-chunk", E(schedule="let t = 4; branch (t > 1) { advance running; } else { advance running; }"),
     "is read only in `each at most`"),
    ("chunks-differ", E(schedule="advance running each at most (4); admit waiting while (running.preempted == 0) "
                                 "each at most (8) taking reqs (1), kv (p);"), "one cap per run"),
    ("chunk-zero", E(schedule="advance running each at most (0); admit waiting while (running.preempted == 0) "
                              "taking reqs (1), kv (p);"), "at or below 0"),
    ("chunk-computed", E(schedule="advance running each at most (running.count * 2); admit waiting taking reqs (1), kv (p);"),
     "chooses among constants"),
    ("exclusive-with-only", E(schedule="exclusive prefill; admit waiting only (decoding) while (running.preempted == 0) "
                                       "taking reqs (1), kv (p);"), "only as `exclusive prefill"),
    ("path-without-action", E(schedule="branch (running.count > 0) { advance running; } else { }"),
     "neither advances nor admits"),
    ("set-non-register", E(schedule="advance running; set x = 1;"), "sets a register"),
    ("takings-differ", E(schedule="branch (running.count > 0) { admit waiting taking reqs (1), kv (p); } else { "
                                  "admit waiting taking reqs (1), kv (p + 1); }"), "the same `taking`"),
    ("request-arity", E(server="llm (n, 1);"), "takes 1 argument"),
    ("request-drawing-argument", E(server="llm (~exp(4));"), "draws"),
    ("request-sets-parameter", E(request="request (p) { set p = 1; prefill (p) growing kv; }"), "sets no parameter"),
    ("request-cache-not-last", E(request="request (p) { cache (p); prefill (p) growing kv; }"), "the request's last item"),
    ("admission-without-taking", E(schedule="advance running; admit waiting while (running.preempted == 0);",
                                   request="request (p) { at admission { q = p; } prefill (p) growing kv; }"),
     "takes nothing"),
    ("engine-without-request", E(request=""), "has no `request"),
    ("mark-outside", E(server="mark m;"), "stands in a queue's entry or an engine's request"),
    ("tool-without-stage-in-server", E(server="tool 3; llm (n);"), "no `stage tool` is declared above"),
    ("tool-stage-below-workload", TOOL.format(stages="", tool="tool 2;") .replace("  server { }", "  server { }\n  stage tool : fifo;"),
     "declared below the workload"),
    ("transfer-without-link", XFER.replace("stage link", "stage wire").format(body="transfer (4) from src to dst (5);"),
     "no `stage link` or `stage transfer`"),
    ("transfer-two-links", XFER.replace("stage link : ps(10);", "stage link : ps(10); stage transfer : ps(1);").format(
        body="transfer (4) from src to dst (5);"), "several stages qualify"),
    ("queue-unknown-role", Q(server="", decls="").replace(": prefill", ": encoder"), "is no role"),
    ("gateway-family", Q(server="", decls="queue gw[2] : gateway { route { } }"), "is a single queue"),
    ("entry-not-of-role", Q(server="", decls="").replace("prefill (prompt) {", "decode (prompt) {"),
     "no entry of queue `Q`'s roles"),
    ("entry-parameters", Q(server="", decls="").replace("prefill (prompt) {", "prefill (prompt, x) {"),
     "takes 1 parameter"),
    ("call-without-index", Q(server="Q.prefill (n);", decls=""), "is a family"),
    ("call-unknown-entry", Q(server="Q[0].decode (n);", decls=""), "has no `decode` entry"),
    ("entry-reads-session", Q(server="Q[0].prefill (n);", decls="").replace("set c = prompt;", "set c = n;"),
     "which the session set"),
    ("entry-reads-server-attribute", Q(server="set z = 1; Q[0].prefill (n);", decls="").replace("set c = prompt;", "set c = z;"),
     "which the session set"),
    ("entry-header-reads-body-set", Q(server="Q[0].prefill (n);", decls="").replace(
        "hold kv (cost(kv, prompt))", "hold kv (cost(kv, c))"), "sets only in the hold's body or after it"),
    ("from-unknown-queue", PD.replace("decode (prompt) from P {", "decode (prompt) from Z {"), "no queue declared above"),
    ("call-from-other-queue", PD.replace("D[j].decode (prompt) from P[i];", "D[j].decode (prompt) from gw;"),
     "a call from another queue is refused"),
    ("from-queue-leasing-nothing", PD.replace("lease kv (inf);", ";"), "leases nothing"),
    ("relation-without-nic", PD.replace("nic ps(BwD);", ""), "has no `nic`"),
    ("reader-two-sources", PD.replace("D pull P latency x0 share maxmin;",
                                      "D pull P latency x0 share maxmin; D pull P latency x0 share maxmin;"),
     "a reader has one source"),
    ("relation-and-share", PD.replace("D pull P latency x0 share maxmin;", "D pull P latency x0 share maxmin; share maxmin;"),
     "does not also write `share`"),
    ("transfer-without-relation", PD.replace("D pull P latency x0 share maxmin;", "share maxmin;"),
     "pulls from no queue"),
    ("self-in-single-queue", Q(server="", decls="queue gw : gateway { route { set x = self; } }").replace(
        "server {  }", "server { gw.route(); }"), "a single queue has none"),
    ("run-own-stage-without-stage", Q(server="Q[0].prefill (n);", decls="").replace("serve fifo;", ""),
     "has none"),
]


@pytest.mark.parametrize("case_id,text,phrase", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_lowering_refusals(case_id, text, phrase, tmp_path):
    err = refused(text, tmp_path if "vllm_request" in text else None)
    assert phrase in err.message, err.message
    assert err.span is not None and err.span.line > 0, str(err)
