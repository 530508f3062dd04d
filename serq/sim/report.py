"""The run's report: a JSON document whose schema is `docs/report.md`, and its text form."""

from __future__ import annotations

import json
import math

from serq import __version__
from serq.sim.errors import RunError
from serq.sim.rng import DrawError

REPORT_VERSION = 1


def _v(x):
    """A JSON number: NaN and the infinities are null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _clean(obj):
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return _v(obj)


def serq_version() -> str:
    """The package's own version (as `serq sweep` writes it): reading the installed distribution's
    metadata (importlib.metadata) cost every run's first report about 20 ms."""
    return __version__


def make_report(E, sources: dict[str, str] | None = None) -> dict:
    """The JSON report of a finished engine; `sources` says where each setting came from
    (`settings_source`: `default`, `--seed`, `instance F`, `ir`, `ir F`, `api`)."""
    program = E.program
    start = E.warmup
    span = E.end - start if E.end > start else 0.0
    stuck = E.n_stuck
    rep = {
        "report_version": REPORT_VERSION,
        "serq_version": serq_version(),
        "program": program.source,
        "settings": {
            "seed": E.seed,
            "horizon": "inf" if E.horizon == math.inf else E.horizon,
            "warmup": E.warmup,
            "arrivals": E.arrivals_limit,
        },
        "settings_source": {name: (sources or {}).get(name, "default")
                            for name in ("seed", "horizon", "warmup", "arrivals")},
        "end": E.end,
        "measured": span,
        "stopped": E.stop_reason,
        "events": E.events,
        "sessions": {
            "arrived": E.n_arrived,
            "ended": E.n_ended,
            "live": E.live,
            "refused": E.n_refused,
            "rejected": E.n_rejected,
            "stuck": stuck,
            "mean_live": (E.a_live / span) if span > 0 else None,
        },
        "turns": {"started": E.turns_started, "answered": E.turns_answered},
        "client": {
            "ttft": E.client_ttft.summary(),
            "tpot": E.client_tpot.summary(),
            "response": E.client_response.summary(),
        },
        "observes": {s.name: s.summary() for s in E.observes},
        "gauges": {g.name: g.summary(start, E.end) for g in E.gauges},
        "stages": [],
        "pools": [],
        "claims": [],
        "notes": [],
    }
    for st in E.all_stages:
        row = {"name": st.name, "index": st.index}
        row.update(st.summary(span))
        rep["stages"].append(row)
    stalls: dict = {}  # pool member -> the engine residents whose growth into it did not fit (one pass)
    for st in E.step_stages:
        for J in st.res:
            if J.stall is not None:
                stalls.setdefault(id(J.stall), []).append(J.T)
    for m in E.all_pools:
        row = {"name": m.name, "index": m.index}
        row.update(m.summary(span))
        row.update(_pool_end(E, m, stalls.get(id(m), [])))
        rep["pools"].append(row)
    for cs in E.claims:
        rep["claims"].append(_claim(E, cs))
    rep["notes"] = _notes(E, rep)
    return _clean(rep)


def _pool_end(E, m, stalled_residents: list) -> dict:
    # holds waiting to grow: the pool's growers, and an engine's residents whose growth did not fit
    growers = list(m.growers) + stalled_residents
    growing = len(growers)
    stalled = False
    if growing:
        waiting = {id(T) for T in growers}
        holders = [a.frame.thread for a in m.holders.values() if not a.lease]
        stalled = bool(holders) and all(id(T) in waiting for T in holders)
    over = []
    if m.queue:
        try:
            F = E.select_head(m)
            T = F.thread
            for i, p in enumerate(F.spec.pools):
                pm = F.members[i]
                u = pm.up(p.units(E, T, T.A))
                r = pm.up(p.reserve(E, T, T.A)) if p.reserve is not None else 0.0
                need = max(u, r)
                if need > pm.cap:
                    over.append({"session": T.sess.serial, "pool": pm.label, "asks": need, "cap": pm.cap})
        except (RunError, DrawError, ArithmeticError, ValueError, TypeError):
            pass
    return {
        "queued_at_end": len(m.queue),
        "growing_at_end": growing,
        "growing_stalled": stalled,
        "over_cap": len([o for o in over if o["pool"] == m.label]),
        "over": over,
    }


def _claim(E, cs) -> dict:
    out = {"name": cs.name, "form": cs.form}
    if cs.out_of_scope is not None:
        out["result"] = "out of scope"
        out["session"] = cs.out_of_scope
        out["why"] = f"session {cs.out_of_scope} does not satisfy its given"
        return out
    if cs.form != "at_end":
        return _iteration_claim(E, cs, out)
    if E.live:
        out["result"] = "not evaluated"
        out["why"] = f"{E.live} session(s) still live at the end (--arrivals N drains them)"
        return out
    if E.stop_reason == "interrupted":
        out["result"] = "not evaluated"
        out["why"] = "the run was interrupted"
        return out
    try:
        v = cs.value(E)
    except (RunError, DrawError, ArithmeticError, ValueError) as e:
        out["result"] = "error"
        out["why"] = getattr(e, "message", str(e))
        return out
    out["result"] = "holds" if v != 0.0 else "fails"
    return out


def _iteration_claim(E, cs, out: dict) -> dict:
    """every iteration: holds, or fails at its first failing iteration; some iteration: witnessed at
    the first that satisfies it, or not witnessed (an interrupted run did not finish the path)."""
    label = cs.member.label
    if cs.settled is not None:
        t, k = cs.settled
        out["result"] = "fails" if cs.form == "every_iteration" else "witnessed"
        out["time"] = t
        out["iteration"] = k
        out["why"] = f"at time {_fmt(t)}, iteration {k} of {label}"
        return out
    if E.stop_reason == "interrupted":
        out["result"] = "not evaluated"
        out["why"] = "the run was interrupted"
        return out
    n = cs.member.n_iter
    if cs.form == "every_iteration":
        out["result"] = "holds"
    else:
        out["result"] = "not witnessed"
        out["why"] = f"in none of the {n} iterations of {label}"
    return out


def _notes(E, rep) -> list[str]:
    notes = list(E.notes)
    for s in E.observes:
        vals = s.values
        if len(vals) >= 40 and all(v == 0.0 for v in vals):
            notes.append(f"observe `{s.name}` is 0 in all {len(vals)} samples")
    if rep["sessions"]["stuck"]:
        notes.append(f"{rep['sessions']['stuck']} session(s) stuck: preempted again without advancing past their "
                     "previous preemption")
    for p in rep["pools"]:
        label = p["name"] if p["index"] is None else f"{p['name']}[{p['index']}]"
        if p["growing_stalled"]:
            notes.append(f"pool {label}: every holder waits to grow (growing_stalled): none will")
        for o in p["over"]:
            notes.append(f"over: pool {o['pool']}'s queue head (session {o['session']}) asks {_fmt(o['asks'])} "
                         f"of a cap of {_fmt(o['cap'])}")
    for st in E.step_stages:
        if not st.busy and st.has_work():
            notes.append(f"idle: engine {st.label} ends the run with {len(st.res)} resident(s) and "
                         f"{int(st.nwait())} waiting hold(s) it schedules nothing for")
    if E.stop_reason == "interrupted":
        notes.append(f"interrupted at time {_fmt(E.end)}: the report covers what was measured until then")
    return notes


def to_json(rep: dict) -> str:
    return json.dumps(rep, indent=2, allow_nan=False) + "\n"


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e6 or abs(v) < 1e-3:
            return f"{v:.4g}"
        return f"{v:.4f}".rstrip("0").rstrip(".")
    return str(v)


def _mean_ci(s: dict) -> str:
    if s.get("mean") is None:
        return "-"
    if s.get("ci95") is None:
        return _fmt(s["mean"])
    return f"{_fmt(s['mean'])} ± {_fmt(s['ci95'])}"


ARRAY_ROWS = 16  # the members of one array the text report shows; --json and --dump have them all


def _member_rows(rows: list, width: int):
    """The rows the text report shows: each array's first ARRAY_ROWS members, then one row for the
    rest (a table of a million members would take minutes to draw and say nothing more)."""
    counts: dict = {}
    for r in rows:
        counts[r["name"]] = counts.get(r["name"], 0) + 1
    for r in rows:
        i = r["index"]
        if i is None or i < ARRAY_ROWS:
            yield r, None
        elif i == ARRAY_ROWS:
            rest = counts[r["name"]] - ARRAY_ROWS
            yield None, [f"{r['name']}[{ARRAY_ROWS}…]", f"{rest} more"] + [""] * (width - 2)


def render_text(rep: dict, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    st = rep["settings"]
    src = rep.get("settings_source", {})

    def setting(name: str, shown: str) -> str:  # `seed 1 (default)`: each setting and where it came from
        return f"{name} {shown}" + (f" ({escape(src[name])})" if name in src else "")
    shown = [setting("seed", str(st["seed"])), setting("horizon", _fmt(st["horizon"])),
             setting("warmup", _fmt(st["warmup"]))]
    if st["arrivals"]:
        shown.append(setting("arrivals", str(st["arrivals"])))
    # one line, however long the instance file's name
    console.print(f"[bold]{escape(str(rep['program']))}[/bold]  " + "  ".join(shown), soft_wrap=True)
    s = rep["sessions"]
    console.print(f"ended at {_fmt(rep['end'])} ({rep['stopped']}); {rep['events']} events; sessions: "
                  f"{s['arrived']} arrived, {s['ended']} ended, {s['live']} live, {s['refused']} refused, "
                  f"{s['rejected']} rejected; mean live {_fmt(s['mean_live'])}; turns {rep['turns']['answered']} "
                  f"answered of {rep['turns']['started']}")

    def sample_table(title: str, rows: dict) -> None:
        t = Table(title=title, title_justify="left")
        for c in ("name", "count", "mean ± 95% CI", "std", "min", "p50", "p90", "p99", "max"):
            t.add_column(c, justify="left" if c == "name" else "right")
        for name, x in rows.items():
            t.add_row(escape(name), str(x["count"]), _mean_ci(x), _fmt(x["std"]), _fmt(x["min"]), _fmt(x["p50"]),
                      _fmt(x["p90"]), _fmt(x["p99"]), _fmt(x["max"]))
        console.print(t)

    client = {k: v for k, v in rep["client"].items() if v["count"]}
    if client:
        sample_table("client", client)
    if rep["observes"]:
        sample_table("observe", rep["observes"])
    if rep["gauges"]:
        t = Table(title="gauge (time average over \\[warmup, end])", title_justify="left")
        for c in ("name", "mean ± 95% CI", "min", "max"):
            t.add_column(c, justify="left" if c == "name" else "right")
        for name, g in rep["gauges"].items():
            t.add_row(escape(name), _mean_ci(g), _fmt(g["min"]), _fmt(g["max"]))
        console.print(t)
    if rep["stages"]:
        t = Table(title="stage", title_justify="left")
        for c in ("name", "service", "util", "mean busy", "mean queue", "completed", "throughput", "mean wait",
                  "mean sojourn"):
            t.add_column(c, justify="left" if c in ("name", "service") else "right")
        for r, more in _member_rows(rep["stages"], 9):
            if more is not None:
                t.add_row(*map(escape, more))
                continue
            label = r["name"] if r["index"] is None else f"{r['name']}[{r['index']}]"
            svc = r["service"] + (f"({r['servers']})" if r.get("servers", 1) != 1 else "")
            t.add_row(escape(label), svc, _fmt(r["utilization"]), _fmt(r["mean_busy"]), _fmt(r["mean_queue"]),
                      str(r["completed"]), _fmt(r["throughput"]), _fmt(r["mean_wait"]), _fmt(r["mean_sojourn"]))
        console.print(t)
    if rep["pools"]:
        t = Table(title="pool", title_justify="left")
        for c in ("name", "cap", "mean used", "mean cached", "mean queue", "admitted", "mean wait", "rejected",
                  "evicted", "preempted", "stuck", "grow:", "over:"):
            t.add_column(c, justify="left" if c == "name" else "right")
        for r, more in _member_rows(rep["pools"], 13):
            if more is not None:
                t.add_row(*map(escape, more))
                continue
            label = r["name"] if r["index"] is None else f"{r['name']}[{r['index']}]"
            t.add_row(escape(label), _fmt(r["cap"]) if r["cap"] is not None else "inf", _fmt(r["mean_used"]),
                      _fmt(r["mean_cached"]), _fmt(r["mean_queue"]), str(r["admissions"]), _fmt(r["mean_wait"]),
                      str(r["rejected"]), f"{r['evicted_entries']} ({_fmt(r['evicted_units'])})",
                      str(r["preemptions"]), str(r["stuck"]), str(r["growing_at_end"]), str(r["over_cap"]))
        console.print(t)
    if rep["claims"]:
        t = Table(title="claim", title_justify="left")
        for c in ("name", "form", "result", "why"):
            t.add_column(c)
        for c in rep["claims"]:
            color = {"holds": "green", "witnessed": "green", "fails": "red", "not witnessed": "red"}.get(
                c["result"], "yellow")
            t.add_row(escape(c["name"]), c["form"].replace("_", " "), f"[{color}]{c['result']}[/{color}]",
                      escape(c.get("why", "")))
        console.print(t)
    for n in rep["notes"]:
        console.print(f"note: {escape(n)}")
