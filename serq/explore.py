"""`serq draw`, `serq sweep`, `serq plot`: see a deployment, and compare runs of it.

The commands are thin: the work is `serq.draw`, `serq.sweep` and `serq.plot` (docs/api.md), and
each body runs under `serq.commandline.guarded` (a refusal is a located message, never a traceback).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from serq.commandline import guarded, link_program, parse_assignments, parse_horizon, sources_of

INSTANCE_HELP = "An instance file of settings and inputs: F.sq or F.json (docs/language.md)."


def _guarded(fn, *args):
    return guarded(fn)(*args)


def _link(file, sets, instance, extra):
    """The IR of FILE (a .sq with its inputs, or an IR .json) and a title naming the inputs."""
    from serq.errors import SerqError
    path = Path(file)
    if path.suffix == ".json":
        from serq.ir.validate import load_ir
        if sets or extra or instance:
            raise SerqError("--set and inputs apply to a .sq program: an IR's constants are already folded",
                            None, "usage")
        program = load_ir(str(path))
    else:
        if not path.exists():
            raise SerqError(f"no such file: {file}", None, "usage")
        program, _ = link_program(path, sets, instance, extra)
    inputs = ", ".join(f"{i.arg} = {i.value}" for i in program.inputs)
    return program, str(file) + (f"  ({inputs})" if inputs else "")


# ------------------------------------------------------------------ serq draw
@click.command("draw", context_settings={"ignore_unknown_options": False})
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False), help=INSTANCE_HELP)
@click.option("-o", "--output", metavar="OUT.{svg,png,dot}",
              help="Where to write the drawing (default: FILE's name with .svg, here); `-` prints the DOT.")
def draw_command(file, extra, sets, instance, output) -> None:
    """Draw FILE's deployment and the path of its requests (Graphviz), from its IR.

    The workload, the server's path (holds as nested boxes, runs as arrows to their stages,
    branches labelled with their guards), the queues with their pools and stages, KV transfers
    (pull/push), gauges and claims. svg and png need Graphviz's `dot`: without it the DOT is
    written beside OUT with the command to render it (exit 1 when -o asked for svg or png;
    0 for the default output).
    """
    _guarded(_draw, file, extra, sets, instance, output)


def _draw(file, extra, sets, instance, output) -> None:
    from serq import draw as D
    from serq.errors import SerqError
    program, title = _link(file, sets, instance, extra)
    graph = D.draw(program, title)
    if output == "-":
        click.echo(graph.source, nl=False)
        return
    explicit = output is not None
    out = Path(output) if explicit else Path(Path(file).stem + ".svg")
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in D.FORMATS:
        raise SerqError(f"-o {out}: write .svg, .png or .dot (or - for the DOT on stdout)", None, "usage")
    if fmt != "dot" and not D.dot_available():
        dot = out.with_suffix(".dot")
        D.render(graph, dot)
        click.echo(f"serq draw: Graphviz's `dot` is not installed, so no {fmt}: wrote {dot}; render it with\n"
                   f"    dot -T{fmt} {dot} -o {out}\n"
                   "once Graphviz is installed (apt-get install graphviz; brew install graphviz)", err=True)
        sys.exit(1 if explicit else 0)
    D.render(graph, out)
    click.echo(f"wrote {out}", err=True)


# ------------------------------------------------------------------ serq sweep
@click.command("sweep", context_settings={"ignore_unknown_options": False})
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=V1,V2,…",
              help="An input and its values (one value: the input is fixed). Repeat for a grid.")
@click.option("--instance", type=click.Path(dir_okay=False), help=INSTANCE_HELP)
@click.option("--seeds", default="1..10", show_default=True, metavar="A..B|S,S,…",
              help="The replications: seeds A to B, or a list.")
@click.option("--metric", "metrics", multiple=True, metavar="NAME",
              help="Keep these metrics (fnmatch patterns: ttft.p99, 'observe.*'); default every one.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Local worker processes (default: the CPU count); with --ray local, its CPUs.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS|auto|local",
              help="Run the tasks on a Ray cluster (pip install 'serq[ray]'): auto finds a running one, "
                   "local starts one in this process.")
@click.option("--horizon", default=None, metavar="T", help="Stop each run at time T (a number, or inf).")
@click.option("--warmup", type=float, default=None, metavar="T", help="Measure from time T on.")
@click.option("--arrivals", type=int, default=None, metavar="N", help="Run exactly N open arrivals and drain them.")
@click.option("-o", "--output", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Where to write sweep.csv, runs.csv, sweep.json (default: sweep-NAME, here).")
def sweep_command(file, extra, sets, instance, seeds, metrics, jobs, ray_address, horizon, warmup, arrivals,
                  output) -> None:
    """Run FILE over a grid of input values × seeds and summarise every metric per grid point.

    Each (grid point, seed) is one run; per grid point every client metric (count, mean, p50,
    p90, p99 of ttft, tpot and response), observation, gauge and claim gets its mean and a 95%
    confidence interval (Student t over the seeds). Writes DIR/sweep.csv (one row per grid point
    and metric), DIR/runs.csv (one per run and metric), DIR/sweep.json (both), and Parquet tables
    when pyarrow is installed. Ctrl-C keeps the runs that finished (exit 130).
    """
    _guarded(_sweep, file, extra, sets, instance, seeds, metrics, jobs, ray_address, horizon, warmup, arrivals,
             output)


def _sweep(file, extra, sets, instance, seeds, metrics, jobs, ray_address, horizon, warmup, arrivals,
           output) -> None:
    from serq.errors import render
    from serq.sweep import parse_seeds, parse_values, run_sweep

    given = parse_assignments(sets, "--set")
    for name, value in parse_assignments(extra, "after --").items():
        if name in given:
            from serq.errors import SerqError
            raise SerqError(f"`{name}` is given with --set and after --", None, "usage")
        given[name] = value
    grid = {name: parse_values(value) for name, value in given.items()}  # one value: a fixed input
    seed_list = parse_seeds(seeds)
    from serq.sweep import _Bar, _Lines
    n = len(seed_list)
    for vs in grid.values():
        n *= len(vs)
    bar = _Bar(n, f"ray {ray_address}" if ray_address else f"{jobs or 'every'} cpu") if sys.stderr.isatty() \
        else _Lines(n)
    try:
        result = run_sweep(file, grid, seed_list, instance=instance, metrics=list(metrics) or None,
                           jobs=jobs, ray=ray_address, horizon=parse_horizon(horizon), warmup=warmup,
                           arrivals=arrivals, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    out = Path(output) if output else Path(f"sweep-{Path(file).stem}")
    written = result.write(out)
    _print_summary(result)
    for key in sorted(result.errors):
        e = result.errors[key]
        click.echo(render(e, sources_of(e)), err=True)
    state = " (interrupted)" if result.interrupted else ""
    failed = f", {len(result.errors)} failed" if result.errors else ""
    click.echo(f"serq sweep: {len(result.reports)} of {result.total} runs done{failed}{state} in "
               f"{result.seconds:.1f} s; wrote {', '.join(str(p) for p in written)}", err=True)
    if result.interrupted:
        sys.exit(130)
    if result.errors:
        sys.exit(1)


def _print_summary(result) -> None:
    """A table of a few metrics per grid point (the --metric ones, else the client's means and p99s)."""
    from rich.console import Console
    from rich.table import Table
    names = result.metrics()
    if not result.metric_patterns:
        names = [n for n in names if n.split(".")[0] in ("ttft", "tpot", "response")
                 and n.split(".")[-1] in ("mean", "p99")] or names[:4]
    names = names[:8]
    rows = [r for r in result.summary_rows() if r["metric"] in names]
    if not rows:
        return
    table = Table(title=f"mean ± 95% CI over {len(result.seeds)} seed(s)", title_justify="left")
    for n in result.inputs:
        table.add_column(n, justify="right")
    for m in names:
        table.add_column(m, justify="right")
    by_point: dict = {}
    for r in rows:
        by_point.setdefault(tuple(r[n] for n in result.inputs), {})[r["metric"]] = r

    def cell(r) -> str:
        if r is None or r["mean"] is None:
            return "-"
        return f"{r['mean']:.4g}" + (f" ± {r['ci95']:.2g}" if r["ci95"] is not None else "")
    for key, ms in by_point.items():
        table.add_row(*key, *(cell(ms.get(m)) for m in names))
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=160)
    console.print(table)


# ------------------------------------------------------------------ serq plot
@click.command("plot")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--x", "x", default=None, metavar="NAME", help="A sweep: the swept input on the x axis.")
@click.option("--y", "ys", multiple=True, metavar="METRIC",
              help="A sweep: the metric to plot (repeat for several; default ttft.p99, else response.p99).")
@click.option("-o", "--output", default=None, metavar="OUT",
              help="A dump: the folder for the figures (default DIR/plots). A sweep: the file (.png, .svg), "
                   "or a folder (default DIR).")
@click.option("--format", "formats", default="png", show_default=True, metavar="png,svg",
              help="The formats to write, separated by commas.")
def plot_command(directory, x, ys, output, formats) -> None:
    """Plot a `serq run --dump DIR` folder or a `serq sweep -o DIR` folder (pip install 'serq[plot]').

    A dump: empirical CDFs of ttft, tpot and response (client.png), each gauge over time
    (gauges.png), a histogram per observation (observes.png). A sweep: --y against the swept
    input --x with 95% CI bars, one line per value of the other swept inputs.
    """
    _guarded(_plot, directory, x, ys, output, formats)


def _plot(directory, x, ys, output, formats) -> None:
    from serq import plot as P
    from serq.errors import SerqError
    fmts = [f.strip().lower() for f in formats.split(",") if f.strip()]
    bad = [f for f in fmts if f not in P.FORMATS]
    if bad or not fmts:
        raise SerqError(f"--format {formats}: png, svg or both (png,svg)", None, "usage")
    d = Path(directory)
    written: list[Path] = []
    if P.is_sweep(d):
        data = P.load_sweep(d)
        if not ys:
            ys = next(([m] for m in ("ttft.p99", "response.p99") if m in data.get("metrics", [])), [])
            if not ys:
                raise SerqError("--y: name a metric; the sweep has " + ", ".join(data.get("metrics", [])),
                                None, "usage")
        for y in ys:
            fig = P.plot_sweep(d, x, y)
            xname = x or data["swept"][0]
            if output and Path(output).suffix.lower().lstrip(".") in P.FORMATS and len(ys) == 1:
                written.append(P.save(fig, output))
                continue
            folder = Path(output) if output else d
            for f in fmts:
                written.append(P.save(fig, folder / f"{y}-vs-{xname}.{f}"))
    elif P.is_dump(d):
        if x or ys:
            raise SerqError("--x and --y are for a sweep folder; this is a dump", None, "usage")
        folder = Path(output) if output else d / "plots"
        for name, fig in P.plot_dump(d).items():
            for f in fmts:
                written.append(P.save(fig, folder / f"{name}.{f}"))
    else:
        raise SerqError(f"{d}: neither a sweep (sweep.json) nor a dump (report.json, client/): "
                        "make one with `serq sweep -o DIR` or `serq run --dump DIR`", None, "usage")
    click.echo("wrote " + ", ".join(str(p) for p in written), err=True)
