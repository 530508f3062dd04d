"""Every refusal the reference names: the program is refused, and the message
names the construct and where it stands."""

from __future__ import annotations

import pytest

from helpers import program, refused

P = program

# (id, program text, a phrase the message must contain, the line:col it must point at or None)
CASES = [
    # -- the program's shape
    ("no-main", "let x = 1;", "no `fn main()", None),
    ("two-mains", "fn main() { } fn main() { }", "a second `fn main`", "1:15"),
    ("decl-after-main", P() + "let y = 2;", "after `fn main`", None),
    ("decl-before-main", "pool p { cap 1; }\n" + P(), "before `fn main`", "1:1"),
    ("nested-fn", P(decls="fn helper() { }"), "nested `fn`", None),
    ("entry-named-otherwise", "fn start() { }", "not `fn start()`", None),
    ("args-without-std", P(decls='let r = args.number("rate", 1);'), 'needs `use "std/args"', None),
    ("unknown-input", None, "no input named `nope`", None),
    ("input-changes-array-size", None, "may not change a parse-time array size", None),
    # -- names
    ("set-supplied-name", P(server="set present = 1; run svc (cost(svc, s));"), "`present` is a name the language supplies", None),
    ("observe-supplied-name", P(server="observe now = 1; run svc (cost(svc, s));"), "may not be named `now`", None),
    ("stage-trace-attribute", P(decls="stage think : delay;"), "built-in session attribute", None),
    ("pool-builtin-attribute", P(decls="pool cached { cap 1; }"), "built-in session attribute", None),
    ("let-beside-stage", P(decls="let svc = 1;"), "a stage `svc` has the name of a let", None),
    ("observe-beside-stage", P(server="observe svc = 1; run svc (cost(svc, s));"), "observe `svc` has the name of a stage", None),
    ("pool-twice", P(decls="pool kv { cap 2; }"), "declared twice", None),
    ("gauge-named-attribute", P(decls="gauge s = busy(svc);"), "has the name of", None),
    ("set-a-let", P(decls="let k = 1;", server="set k = 2; run svc (cost(svc, s));"), "attribute `k` has the name of a let", None),
    ("unknown-name", P(server="run svc (cost(svc, nope));"), "unknown name `nope`", None),
    ("unknown-function", P(server="run svc (cost(svc, frob(s)));"), "unknown function `frob`", None),
    ("unknown-distribution", P(workload="arrive poisson(1); turn { Size s = ~pareto(1); }"), "unknown distribution `~pareto`", None),
    ("def-param-supplied", P(prelude="def f(now) { now + 1 }"), "parameter may not be named `now`", None),
    ("binding-named-attribute", P(server="set k = 1; hold kv (cost(kv, k)) at admission (k = 2) { run svc (cost(svc, s)); }"), "binding `k` has the name of an attribute", None),
    ("binding-read-outside", P(server="hold kv (cost(kv, b)) at admission (b = 2) { run svc (cost(svc, s)); } observe x = b;"), "read only in the holds that bind it", None),
    ("binding-draws", P(server="hold kv (cost(kv, b)) at admission (b = ~exp(1)) { run svc (cost(svc, s)); }"), "binding `b` draws", None),
    ("binding-live-read-by-body", P(server="hold kv (cost(kv, b)) at admission (b = min(5, used(kv))) { observe x = b; run svc (cost(svc, s)); }"), "reads live state", None),
    ("aggregate-index-taken", P(server="run svc (cost(svc, sum s in 3 (s)));"), "already a name of the program", None),
    ("aggregate-too-many", P(decls="gauge g = sum j in 70 (sum k in 70 (busy(svc)));"), "more than 4096 terms", None),
    # -- constants
    ("constant-nan", P(decls="let z = 0 / 0;"), "evaluates to NaN", None),
    ("constant-reads-attribute", P(decls="let z = s + 1;"), "is not a constant", None),
    ("count-zero", P(decls="stage many[0] : fifo;"), "a count is a whole number from 1 to a million", None),
    ("count-fraction", P(decls="pool half[2.5] { cap 1; }"), "a count is a whole number", None),
    ("count-too-large", P(workload="arrive closed(2000000);"), "from 1 to a million", None),
    ("poisson-rate-zero", P(workload="arrive poisson(0); turn { Size s = ~exp(1); }"), "positive, finite", None),
    ("renewal-constant-gap", P(workload="arrive renewal(0); turn { Size s = ~exp(1); }"), "a gap is positive and finite", None),
    ("fifo-servers-fraction", P(decls="stage two : fifo(1.5);"), "whole number", None),
    ("block-zero", P(decls="pool b { cap 10; block 0; }"), "a block is a whole number", None),
    ("cap-negative", P(decls="pool b { cap -1; }"), "not negative", None),
    ("option-twice", P(decls="pool b { cap 1; cap 2; }"), "gives `cap` twice", None),
    ("bad-distribution-parameter", P(workload="arrive poisson(1); turn { Size s = ~bernoulli(2); }"), "p is a probability", None),
    ("erlang-k-fraction", P(workload="arrive poisson(1); turn { Size s = ~erlang(1.5, 1); }"), "k is a whole number", None),
    # -- context variables and moments
    ("tokens-in-session", P(server="set t = tokens; run svc (cost(svc, s));"), "`tokens`", None),
    ("present-outside-ps", P(server="observe p = present; run svc (cost(svc, s));"), "`present`", None),
    ("waited-outside-queue-key", P(server="observe w = waited; run svc (cost(svc, s));"), "`waited`", None),
    ("size-outside-evict-key", P(server="observe z = size; run svc (cost(svc, s));"),
     "`size` is read in an eviction key only", "7:24"),
    ("size-in-queue-key", P(decls="pool q { cap 1; queue by (size); }"), "`size` is read in an eviction key only", None),
    ("waiting-outside-evict-key", P(server="observe w = waiting; run svc (cost(svc, s));"),
     "bare `waiting` is read in an eviction key only", None),
    ("waiting-in-preempt-key", P(decls="pool q { cap 1; preempt by (waiting); }"),
     "an engine's clauses read `waiting.count`", None),
    ("evict-key-size-beside-a-let", P(decls="let size = 2; pool q { cap 1; evict by (size); }"),
     "rename the program's `size`", None),
    ("evict-key-size-beside-an-attribute", P(decls="pool q { cap 1; evict by (waiting, size); }",
                                            server="set size = 1; run svc (cost(svc, s));"),
     "the program also has `size`, a session attribute", None),
    ("let-named-waiting", P(decls="let waiting = 1;"), "may not be named `waiting`", None),
    ("now-in-gauge", P(decls="gauge g = now;"), "`now`", None),
    ("now-in-given", P(decls="claim c given (now > 0): at end (1);"), "`now`", None),
    ("attribute-in-gauge", P(decls="gauge g = s;"), "reads no session", None),
    ("draw-in-gauge", P(decls="gauge g = ~exp(1);"), "may not draw", None),
    ("draw-in-hold-header", P(server="hold kv (cost(kv, ~exp(1))) { run svc (cost(svc, s)); }"), "may not draw", None),
    ("draw-in-queue-key", P(decls="pool q { cap 1; queue by (~exp(1)); }"), "may not draw", None),
    ("observable-in-given", P(decls="claim c given (used(kv) > 0): at end (1);"), "may not read", None),
    ("cachedin-in-gauge", P(decls="gauge g = cachedin(kv);"), "no session", None),
    ("work-in-gauge", P(decls="gauge g = work(svc);"), "moves between events", None),
    ("aggregate-outside-claim", P(server="observe x = total(x); run svc (cost(svc, s));"), "only a claim `at end`", None),
    ("claim-reads-attribute", P(decls="claim c: at end (s > 0);"), "reads no session", None),
    ("claim-unknown-observation", P(decls="claim c: at end (total(nothing) > 0);"), "is not observed", None),
    ("iteration-claim-on-fifo", P(decls="claim c: every iteration of svc (1);"), "needs a step stage", None),
    ("budget-left-of-fifo", P(server="hold kv (cost(kv, budget_left(svc))) { run svc (cost(svc, s)); }"), "is not a step stage", None),
    # -- sides
    ("turn-in-server", P(server="turn;"), "`turn;` in the server", None),
    ("size-in-server", P(server="Size z = 1; run svc (cost(svc, s));"), "`Size z` in the server", None),
    ("server-sets-workload-attribute", P(server="set s = 2; run svc (cost(svc, s));"), "read-only to the server", None),
    ("session-without-turn", P(workload="arrive poisson(1); session { run svc (cost(svc, 1)); }", server=""), "has no `turn;`", None),
    ("run-in-turn-block", P(workload="arrive poisson(1); turn { run svc (cost(svc, 1)); }", server=""), "belongs in the session or the server", None),
    ("end-in-server-hold", P(server="hold kv (cost(kv, 1)) { end; }"), "`end;` inside a hold in the server", None),
    ("entry-call-in-session", P(workload="arrive poisson(1); session { turn; gw.route(); }", server=""), "a queue's entry is called by the server", None),
    ("two-servers", P(decls="server { }"), "a second server", None),
    ("no-workload", "fn main() { stage svc : fifo; server { } }", "has no workload", None),
    ("no-arrival", P(workload="turn { Size s = ~exp(1); }"), "has no arrivals", None),
    ("two-arrivals", P(workload="arrive poisson(1); arrive batch(2); turn { Size s = ~exp(1); }"), "a second arrival law", None),
    ("hidden-scheduler-attribute", P(workload="arrive poisson(1); hidden cached; turn { Size s = ~exp(1); }"), "cannot be hidden", None),
    ("hidden-not-workload", P(workload="arrive poisson(1); hidden zz; turn { Size s = ~exp(1); }"), "not an attribute the workload", None),
    # -- hidden
    ("hidden-in-header", P(workload="arrive poisson(1); hidden s; turn { Size s = ~exp(1); }", server="hold kv (cost(kv, s)) { run svc (cost(svc, s)); }"), "is hidden", None),
    ("hidden-in-guard", P(workload="arrive poisson(1); hidden s; turn { Size s = ~exp(1); }", server="branch (s > 1) { run svc (cost(svc, s)); }"), "is hidden", None),
    ("hidden-derived", P(workload="arrive poisson(1); hidden s; turn { Size s = ~exp(1); }", server="set d = s * 2; hold kv (cost(kv, d)) { run svc (cost(svc, s)); }"), "derives from hidden `s`", None),
    ("hidden-in-queue-key", P(decls="pool q { cap 1; queue by (s); }", workload="arrive poisson(1); hidden s; turn { Size s = ~exp(1); }"), "is hidden", None),
    ("hidden-one-arm-reveals", P(workload="arrive poisson(1); hidden s; turn { Size s = ~exp(1); set c = 1; }", server="branch (c == 1) { run svc (cost(svc, s)); } else { run svc (cost(svc, 1)); } hold kv (cost(kv, s)) { run svc (cost(svc, 1)); }"), "is hidden", None),
    # -- holds
    ("grow-outside-hold", P(server="grow kv (cost(kv, 1)); run svc (cost(svc, s));"), "stands inside a hold of `kv`", None),
    ("growing-other-pool", P(decls="pool kv2 { cap 10; }", server="hold kv (cost(kv, 1)) { run svc (cost(svc, s)) growing kv2; }"), "stands inside a hold of `kv2`", None),
    ("load-other-index", P(decls="pool m[2] { cap 10; }", server="hold m[0] (cost(m, 1)) { load m[1] (cost(m, 1)); run svc (cost(svc, s)); }"), "stands inside a hold of `m[1]`", None),
    ("release-nothing", P(server="release kv; run svc (cost(svc, s));"), "nothing to release", None),
    ("hold-pool-twice", P(server="hold kv (cost(kv, 1)), kv (cost(kv, 1)) { run svc (cost(svc, s)); }"), "names `kv` twice", None),
    ("hold-array-without-index", P(decls="pool m[2] { cap 10; }", server="hold m (cost(m, 1)) { run svc (cost(svc, s)); }"), "is an array of 2", None),
    ("index-out-of-range", P(decls="pool m[2] { cap 10; }", server="hold m[2] (cost(m, 1)) { run svc (cost(svc, s)); }"), "index 2 is out of range", None),
    ("index-reads-state", P(decls="pool m[2] { cap 10; }", server="hold m[used(kv)] (cost(m, 1)) { run svc (cost(svc, s)); }"), "not the state", None),
    ("body-changes-index", P(decls="pool m[2] { cap 10; }", server="set i = 0; hold m[i] (cost(m, 1)) { set i = 1; run svc (cost(svc, s)); }"), "changes `i`", None),
    ("constant-units-above-cap", P(server="hold kv (cost(kv, 101)) { run svc (cost(svc, s)); }"), "could never be admitted", None),
    ("negative-constant-amount", P(server="hold kv (cost(kv, -1)) { run svc (cost(svc, s)); }"), "not negative and not NaN", None),
    ("lease-pool-not-held", P(decls="pool kv2 { cap 10; }", server="hold kv (cost(kv, 1)) { run svc (cost(svc, s)); } lease kv2 (5);"), "does not hold", None),
    # -- lints
    ("lint-live-set-in-header", P(server="set r = used(kv); hold kv (cost(kv, r)) { run svc (cost(svc, s)); }"), "set at", None),
    ("lint-cached-without-cache", P(server="hold kv (cost(kv, 1)) { observe c = cached; run svc (cost(svc, s)); }"), "has no `cache`", None),
    ("lint-reuse-without-cache", P(server="hold kv (cost(kv, 1)) reuse (cost(kv, 1)) { run svc (cost(svc, s)); }"), "without `cache` writes `reuse`", None),
    ("lint-constant-guard", P(server="branch (2) { run svc (cost(svc, s)); }"), "the branch guard is the constant 2: a guard is 0 or 1", None),
    ("lint-constant-while-guard", P(server="while (3) { run svc (cost(svc, s)); }"), "the while guard is the constant 3: a guard is 0 or 1", None),
    # -- Size / Cost typing
    ("plain-number-work", P(server="run svc (s);"), "write cost(svc", None),
    ("cost-of-wrong-resource", P(server="run svc (cost(kv, s));"), "not a cost of svc", None),
    ("plain-number-units", P(server="hold kv (1) { run svc (cost(svc, s)); }"), "write cost(kv", None),
    ("cost-plus-number", P(server="run svc (cost(svc, s) + 1);"), "`+` of a cost of svc and a plain number", None),
    ("cost-of-cost", P(server="run svc (cost(svc, cost(svc, s)));"), "the amount is a plain number", None),
    ("cost-decl-not-cost", P(server="Cost w = s; run svc (cost(svc, s));"), "must be a cost", None),
    ("cost-names-attribute", P(server="run svc (cost(s, 1));"), "names a pool or a stage", None),
    # -- loops, forks, runs
    ("loop-without-time", P(workload="arrive closed(1); session { turn; loop { set w = 1; } }", server=""), "without letting time pass", None),
    ("while-run-one-arm", P(workload="arrive closed(1); init { set more = 1; } session { turn; while (more) { branch (serial == 0) { run svc (cost(svc, 1)); } } }", server=""), "without letting time pass", None),
    ("loop-zero-work", P(workload="arrive closed(1); session { turn; loop { run svc (cost(svc, 0)); } }", server=""), "without letting time pass", None),
    ("fork-without-join", P(server="fork { run svc (cost(svc, s)); }"), "never joins", None),
    ("fork-in-fork", P(server="fork { fork { run svc (cost(svc, s)); } } join;"), "a leg may not", None),
    ("end-in-fork", P(server="fork { end; } join;"), "a leg may not", None),
    ("fork-in-preemptible-hold", P(decls="pool g { cap 10; preempt lifo; }", server="hold g (cost(g, 1)) { fork { run svc (cost(svc, s)); } join; }"), "may be preempted", None),
    ("run-own-stage-outside-entry", P(server="run (cost(svc, s));"), "stands in a queue's entry", None),
    ("mode-on-plain-stage", P(server="run svc prefill (cost(svc, s));"), "only an engine's run has a mode", None),
    ("multi-stage-without-share", P(decls="stage a : ps(1); stage b : ps(1);", server="run a, b (cost(a, b, 1));"), "needs the program's `share", None),
    ("multi-stage-fifo", P(decls="share maxmin;", server="run svc, kv2 (cost(svc, 1));"), "is not a stage", None),
    ("multi-stage-not-ps", P(decls="share maxmin; stage b : ps(1);", server="run svc, b (cost(svc, b, 1));"), "each is ps(φ) with a constant φ", None),
    ("stage-array-twice-in-run", P(decls="share maxmin; stage b[2] : ps(1);", server="run b[0], b[1] (cost(b, 1));"), "names stage array `b` twice", None),
    ("choose-count-zero", P(server="choose j in 0 by (1); run svc (cost(svc, s));"), "the count is a whole number", None),
    # -- defs
    ("def-recursion", P(prelude="def f(x) { f(x) }", server="run svc (cost(svc, f(1)));"), "calls itself", None),
    ("def-arity", P(prelude="def f(x) { x }", server="run svc (cost(svc, f(1, 2)));"), "takes 1 argument", None),
    ("def-drawing-argument", P(prelude="def f(x) { x + x }", server="run svc (cost(svc, f(~exp(1))));"), "argument `x` of `f` draws", None),
    ("def-statements-in-expression", P(prelude="def f(x) { run svc (cost(svc, x)); }", server="run svc (cost(svc, f(1)));"), "a def of statements", None),
    # -- vocabulary (lowered by serq.lower)
    ("device-capacity-without-pool", P(decls="device gpu { kv2 cap 1; }"), "which no `pool kv2 on gpu` declares", None),
]


def _case_text(case_id: str, text: str | None) -> tuple[str, dict | None]:
    if case_id == "unknown-input":
        return 'use "std/args";\n' + P(decls='let r = args.number("rate", 1);'), {"nope": "2"}
    if case_id == "input-changes-array-size":
        return 'use "std/args";\n' + P(decls='let n = args.number("n", 2); stage many[n] : fifo;'), {"n": "3"}
    return text, None


@pytest.mark.parametrize("case_id,text,phrase,where", CASES, ids=[c[0] for c in CASES])
def test_refused(case_id, text, phrase, where):
    text, supplied = _case_text(case_id, text)
    err = refused(text, supplied=supplied)
    assert phrase in err.message, err.message
    if case_id != "unknown-input":
        assert err.span is not None and err.span.line > 0, f"no location: {err}"
        assert str(err).startswith("prog.sq:"), str(err)
    if where is not None:
        assert f"{err.span.line}:{err.span.col}" == where, str(err)


def test_at_least_forty_distinct_refusals():
    assert len({c[2] for c in CASES}) >= 40


def test_size_is_a_free_name_outside_eviction_keys():
    # `size` is the cached entry's units in an eviction key only: elsewhere a program may declare it,
    # and an observation of that name is no value in an eviction key (no ambiguity there)
    from helpers import link_source
    link_source(P(decls="let size = 2;", server="run svc (cost(svc, s * size));"))
    link_source(P(server="set size = s; run svc (cost(svc, size));"))
    prog = link_source(P(decls="pool q { cap 1; evict by (waiting, -size); }",
                         server="observe size = s; run svc (cost(svc, s));"))
    q = next(p for p in prog.pools if p.name == "q")
    assert [k.model_dump(mode="json") for k in q.evict.keys] == [
        {"kind": "ctx", "var": "waiting"}, {"kind": "unary", "op": "neg", "arg": {"kind": "ctx", "var": "size"}}]
