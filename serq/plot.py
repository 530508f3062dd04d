"""`serq plot`: figures of what the clients saw (a `serq run --dump DIR` folder) and of a sweep.

    from serq.plot import plot_dump, plot_sweep, save
    figs = plot_dump("out/")                         # {"client": Figure, "gauges": …, "observes": …}
    fig = plot_sweep("sweep-vllm/", x="rate", y="ttft.p99")
    save(fig, "ttft.png")                            # or .svg

matplotlib is an optional extra (`pip install 'serq[plot]'`). The figures are
`matplotlib.figure.Figure` objects made without pyplot (no global state, no window; saved with
the Agg renderer for PNG): a notebook shows them, a script saves them.

- A dump: the empirical CDF of each client metric with samples (ttft, tpot, response), each
  gauge over time (a step function of its change points, the warm-up marked), a histogram of
  each observation.
- A sweep (`sweep.json`, serq/sweep.py): a metric's mean against one swept input with its 95%
  confidence interval as error bars, one line per value of the other swept inputs.

Times are in the program's clock unit, seconds; an axis whose positive data spans two decades
or more is logarithmic.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from serq.errors import SerqError

__all__ = ["plot_dump", "plot_sweep", "save", "is_dump", "is_sweep", "unit_of", "FORMATS"]

FORMATS = ("png", "svg")
CLIENT = ("ttft", "tpot", "response")
UNIT = "s"  # the program's clock: every time in serQ is in seconds
_WHAT = {"ttft": "time to first token", "tpot": "time per output token", "response": "response time"}


def _matplotlib():
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise SerqError("serq plot needs matplotlib: pip install 'serq[plot]'", None, "usage") from None
    matplotlib.rcParams["svg.hashsalt"] = "serq"  # the same SVG for the same figure
    return Figure


def is_dump(directory) -> bool:
    d = Path(directory)
    return (d / "report.json").is_file() and (d / "client").is_dir()


def is_sweep(directory) -> bool:
    return (Path(directory) / "sweep.json").is_file()


def unit_of(metric: str) -> str:
    """The unit of a metric's values: seconds for a client time (`ttft.p99`), turns for a count,
    none for a program's own observation or gauge (the program says what they count)."""
    parts = metric.split(".")
    if parts[0] in CLIENT:
        return "turns" if parts[-1] == "count" else UNIT
    if parts[0] == "observe" and parts[-1] == "count":
        return "samples"
    return ""


def axis_label(metric: str) -> str:
    if metric.startswith("claim."):
        return f"{metric} (fraction of seeds holding)"
    u = unit_of(metric)
    return f"{metric} ({u})" if u else metric


def _spans_decades(values, decades: float = 2.0) -> bool:
    pos = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if len(pos) < 2 or len(pos) < len([v for v in values if v is not None]):
        return False  # a zero or a negative value has no place on a log axis
    return math.log10(max(pos) / min(pos)) >= decades


def _samples(path: Path) -> list[float]:
    with path.open(encoding="utf-8") as f:
        return [float(r["value"]) for r in csv.DictReader(f)]


def _series(path: Path) -> tuple[list[float], list[float]]:
    t, v = [], []
    with path.open(encoding="utf-8") as f:
        for r in csv.DictReader(f):
            t.append(float(r["time"]))
            v.append(float(r["value"]))
    return t, v


def _grid(Figure, n: int, width: float = 5.0, height: float = 3.6, cols: int = 3):
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols, height * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.set_visible(False)
        fig.delaxes(a)
    return fig, flat[:n]


def _header(report: dict) -> str:
    s = report.get("settings", {})
    bits = [f"seed {s.get('seed')}"]
    if s.get("arrivals") is not None:
        bits.append(f"{s['arrivals']} arrivals")
    if s.get("horizon") not in (None, "inf"):
        bits.append(f"horizon {s['horizon']} s")
    if s.get("warmup"):
        bits.append(f"warm-up {s['warmup']} s")
    return f"{report.get('program', '')} ({', '.join(bits)})"


def plot_dump(directory) -> dict:
    """The figures of a `serq run --dump DIR` folder: "client" (the empirical CDFs of ttft, tpot and
    response that have samples), "gauges" (each gauge over time), "observes" (a histogram per
    observation); a figure is left out when it would be empty."""
    Figure = _matplotlib()
    d = Path(directory)
    if not is_dump(d):
        raise SerqError(f"{d}: not a `serq run --dump` folder (no report.json and client/)", None, "usage")
    try:
        report = json.loads((d / "report.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SerqError(f"{d / 'report.json'}: {e}", None, "usage") from None
    head = _header(report)
    figs = {}

    client = [(m, _samples(d / "client" / f"{m}.csv")) for m in CLIENT if (d / "client" / f"{m}.csv").is_file()]
    client = [(m, xs) for m, xs in client if xs]
    if client:
        fig, axes = _grid(Figure, len(client))
        for ax, (m, xs) in zip(axes, client):
            xs = sorted(xs)
            n = len(xs)
            ax.step(xs, [(i + 1) / n for i in range(n)], where="post", color="#1f4e79")
            for q, style in ((0.5, "--"), (0.99, ":")):
                v = xs[min(n - 1, max(0, math.ceil(q * n) - 1))]
                ax.axvline(v, color="#e67e22", linestyle=style, linewidth=1,
                           label=f"p{int(q * 100)} = {v:.4g} {UNIT}")
            ax.set_title(f"{m}: {_WHAT[m]} (n = {n})")
            ax.set_xlabel(f"{m} ({UNIT})")
            ax.set_ylabel(f"fraction of turns with {m} ≤ x")
            ax.set_ylim(0, 1.02)
            if _spans_decades(xs):
                ax.set_xscale("log")
            ax.grid(True, alpha=0.3)
            ax.legend(loc="lower right", fontsize=8)
        fig.suptitle(f"what the clients saw: empirical CDFs — {head}")
        figs["client"] = fig

    gauges = sorted((d / "gauge").glob("*.csv")) if (d / "gauge").is_dir() else []
    order = list(report.get("gauges", {}))
    gauges.sort(key=lambda p: order.index(p.stem) if p.stem in order else len(order))
    if gauges:
        end = report.get("end")
        warmup = (report.get("settings") or {}).get("warmup") or 0
        fig, axes = _grid(Figure, len(gauges), width=6.5, cols=2)
        for ax, path in zip(axes, gauges):
            t, v = _series(path)
            if end is not None and t and end > t[-1]:
                t, v = t + [end], v + [v[-1]]  # the last value holds until the run's end
            ax.step(t, v, where="post", color="#2e8b57")
            mean = (report.get("gauges", {}).get(path.stem) or {}).get("mean")
            if mean is not None:
                ax.axhline(mean, color="#555555", linestyle="--", linewidth=1,
                           label=f"time average = {mean:.4g}")
                ax.legend(loc="upper right", fontsize=8)
            if warmup:
                ax.axvspan(0, warmup, color="#cccccc", alpha=0.4, label="warm-up")
            ax.set_title(f"gauge {path.stem} over time")
            ax.set_xlabel(f"time ({UNIT})")
            ax.set_ylabel(path.stem)
            if _spans_decades(v):
                ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
        fig.suptitle(f"gauges — {head}")
        figs["gauges"] = fig

    observes = sorted((d / "observe").glob("*.csv")) if (d / "observe").is_dir() else []
    order = list(report.get("observes", {}))
    observes.sort(key=lambda p: order.index(p.stem) if p.stem in order else len(order))
    observes = [(p.stem, _samples(p)) for p in observes]
    observes = [(n, xs) for n, xs in observes if xs]
    if observes:
        import numpy as np
        fig, axes = _grid(Figure, len(observes))
        for ax, (name, xs) in zip(axes, observes):
            distinct = sorted(set(xs))
            if len(distinct) <= 12:  # a few values (a 0/1 observation): one bar each
                counts = [xs.count(v) for v in distinct]
                ax.bar([f"{v:g}" for v in distinct], counts, color="#8e44ad")
            else:
                log = _spans_decades(xs)
                bins = (np.logspace(math.log10(min(xs)), math.log10(max(xs)), 40) if log
                        else min(50, max(10, int(math.sqrt(len(xs))))))
                ax.hist(xs, bins=bins, color="#8e44ad")
                if log:
                    ax.set_xscale("log")
            ax.set_title(f"observe {name} (n = {len(xs)})")
            ax.set_xlabel(name)
            ax.set_ylabel("samples")
            ax.grid(True, alpha=0.3, axis="y")
        fig.suptitle(f"observations — {head}")
        figs["observes"] = fig
    if not figs:
        raise SerqError(f"{d}: the dump has no samples and no gauges to plot", None, "usage")
    return figs


def load_sweep(directory) -> dict:
    path = Path(directory)
    path = path / "sweep.json" if path.is_dir() else path
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SerqError(f"{path}: no such sweep (serq sweep -o DIR writes DIR/sweep.json)", None, "usage") from None
    except (OSError, json.JSONDecodeError) as e:
        raise SerqError(f"{path}: {e}", None, "usage") from None


def plot_sweep(directory, x: str | None = None, y: str = "ttft.p99"):
    """A metric `y` (its mean over the replications, with the 95% CI as error bars) against the
    swept input `x` (default: the only one swept), one line per value of the other swept inputs."""
    Figure = _matplotlib()
    data = load_sweep(directory)
    swept = data.get("swept", [])
    if x is None:
        if len(swept) != 1:
            raise SerqError("--x: name the input to plot against: the sweep varies "
                            + (", ".join(swept) if swept else "no input"), None, "usage")
        x = swept[0]
    if x not in data.get("inputs", {}):
        raise SerqError(f"--x {x}: the sweep's inputs are {', '.join(data.get('inputs', {})) or 'none'}",
                        None, "usage")
    if y not in data.get("metrics", []):
        raise SerqError(f"--y {y}: no such metric in the sweep; it has {', '.join(data.get('metrics', []))}",
                        None, "usage")
    others = [n for n in swept if n != x]
    rows = [r for r in data["summary"] if r["metric"] == y]
    lines: dict[tuple, list] = {}
    for r in rows:
        lines.setdefault(tuple(r[n] for n in others), []).append(r)
    xs_all = [r[x] for r in rows]
    numeric = all(isinstance(v, (int, float)) for v in xs_all)
    cats = list(dict.fromkeys(xs_all))
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ys_all = []
    for key, rs in lines.items():
        rs = sorted(rs, key=lambda r: r[x] if numeric else cats.index(r[x]))
        px = [r[x] if numeric else cats.index(r[x]) for r in rs]
        py = [r["mean"] if r["mean"] is not None else math.nan for r in rs]
        err = [r["ci95"] if r["ci95"] is not None else 0.0 for r in rs]
        ys_all += [v for v in py if not math.isnan(v)]
        label = ", ".join(f"{n} = {v}" for n, v in zip(others, key)) or None
        ax.errorbar(px, py, yerr=err, marker="o", capsize=4, label=label)
    if not numeric:
        ax.set_xticks(range(len(cats)), [str(c) for c in cats])
    elif _spans_decades(xs_all):
        ax.set_xscale("log")
    if _spans_decades(ys_all):
        ax.set_yscale("log")
    n = len(data.get("seeds", []))
    ax.set_xlabel(x)
    ax.set_ylabel(axis_label(y))
    ax.set_title(f"{y} against {x}: mean and 95% CI over {n} seed{'s' if n != 1 else ''}")
    fig.suptitle(data.get("program", ""), fontsize=10)
    if others:
        ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def save(fig, path, fmt: str | None = None) -> Path:
    """Write the figure as PNG (the Agg renderer) or SVG; the format from `fmt` or the suffix."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise SerqError(f"{path}: write .png or .svg", None, "usage")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=fmt, dpi=120, metadata={"Date": None} if fmt == "svg" else None)
    except OSError as e:
        raise SerqError(f"{path}: {e.strerror or e}", None, "usage") from None
    return path
