"""`serq run`: simulate a program with the reference interpreter and report what its clients saw."""

from __future__ import annotations

import math
import sys

import click

from serq.commandline import given_inputs, guarded, link_program, parse_horizon, read_instance


class _Progress:
    """A progress bar on stderr once a run has taken more than a second (only on a terminal)."""

    def __init__(self) -> None:
        self.bar = None
        self.task = None

    def __call__(self, E, elapsed: float) -> None:
        if elapsed < 1.0:
            return
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.description}"),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=1.0)
        if E.arrivals_limit is not None:
            done = min(1.0, E.n_arrived / E.arrivals_limit) * 0.5 + (0.5 * E.n_ended / E.arrivals_limit)
            desc = f"t={E.now:.4g}  {E.n_ended}/{E.arrivals_limit} sessions"
        elif E.horizon != math.inf:
            done = E.now / E.horizon
            desc = f"t={E.now:.4g}/{E.horizon:.4g}"
        else:
            done = 0.0
            desc = f"t={E.now:.4g}"
        self.bar.update(self.task, completed=done, description=desc)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@click.command("run", context_settings={"ignore_unknown_options": False})
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--seed", type=int, default=None, help="The run's seed (a nonnegative integer).")
@click.option("--horizon", default=None, metavar="T", help="Stop at time T (a number, or inf).")
@click.option("--warmup", type=float, default=None, metavar="T", help="Measure from time T on.")
@click.option("--arrivals", type=int, default=None, metavar="N",
              help="Run exactly N open arrivals and drain their sessions.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False),
              help="An instance file of settings and inputs: F.sq or F.json (docs/language.md); flags override it.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (docs/report.md) instead of tables.")
@click.option("--dump", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Write the samples (observe/, client/), gauge change points (gauge/) and report.json to DIR.")
def run(file, extra, seed, horizon, warmup, arrivals, sets, instance, as_json, dump) -> None:
    """Simulate FILE (a .sq program, or its IR as .json) and report what its clients saw.

    Inputs: --set k=v, --instance F, or `-- k=v`. Settings: the flags, over the
    instance file's (--instance F), over the defaults (seed 1); the report's
    header says where each came from. Ctrl-C stops the run and prints what was
    measured.
    """
    from serq.sim.interrupts import stop_signals
    with stop_signals():  # SIGINT/SIGTERM: the run stops, its report and dump are written, exit 130/143
        guarded(_run)(file, extra, seed, horizon, warmup, arrivals, sets, instance, as_json, dump)


def _run(file, extra, seed, horizon, warmup, arrivals, sets, instance, as_json, dump) -> None:
    from pathlib import Path

    from rich.console import Console

    from serq.errors import SerqError
    from serq.instance import check_values, resolve_settings
    from serq.sim import simulate
    from serq.sim.report import render_text, to_json

    path = Path(file)
    flags = {"seed": seed, "horizon": parse_horizon(horizon), "warmup": warmup, "arrivals": arrivals}
    if path.suffix == ".json":
        from serq.ir.validate import load_ir
        inst = read_instance(instance) if instance else None
        if given_inputs(sets, extra) or (inst is not None and inst.inputs):
            raise SerqError("--set and inputs apply to a .sq program: an IR's constants are already folded",
                            None, "usage")
        program = load_ir(str(path))
        # the IR's own settings (those it writes), the instance file's over them, the flags over those
        values, origins = resolve_settings(flags, inst, program.settings, f"ir {file}")
        check_values(values, origins)
        from serq.instance import ir_settings
        program = program.model_copy(update={"settings": ir_settings(values, origins)})
    else:
        if not path.exists():
            raise SerqError(f"no such file: {file}", None, "usage")
        program, origins = link_program(path, sets, instance, extra, flags, needs_end=True)
    progress = _Progress() if sys.stderr.isatty() else None
    try:
        result = simulate(program, base_dir=path.parent, keep_samples=dump is not None, progress=progress,
                          origins=origins)
    except SerqError as e:
        # the IR names a statement's file as the program does (relative to it): show its line
        if e.span is not None and not Path(e.span.file).exists() and (path.parent / e.span.file).exists():
            from dataclasses import replace
            e.span = replace(e.span, file=str(path.parent / e.span.file))
        raise
    finally:
        if progress is not None:
            progress.close()
    if dump is not None:
        result.dump(dump)
    if as_json:
        click.echo(to_json(result.report), nl=False)
    else:
        console = Console(highlight=False, soft_wrap=False)
        if not console.is_terminal:
            console = Console(highlight=False, soft_wrap=False, width=150)
        render_text(result.report, console)
    from serq.sim.interrupts import exit_code
    code = exit_code(result.engine.interrupted)
    if code is not None:
        sys.exit(code)
