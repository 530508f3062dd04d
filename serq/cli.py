"""The `serq` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from serq.commandline import INSTANCE_HELP, guarded, link_program, parse_horizon, sources_of
from serq.errors import SerqError, render


class LazyGroup(click.Group):
    """A group whose commands defined in other modules are imported only when named: `serq run`
    then loads neither the Lean driver nor the oracle runner nor the plotting and sweep code, a
    tenth of a second of imports a short run would otherwise pay (issue 15: a 10-arrival run starts
    in under a second). `serq --help` lists every command, so it imports them all."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy  # command name -> "module:attribute"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            import importlib
            module, attribute = self.lazy[name].split(":")
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             lazy={"lean": "serq.leangen.commands:lean", "run": "serq.sim.commands:run",
                   "oracle": "serq.sim.oracle_run:oracle", "draw": "serq.explore:draw_command",
                   "sweep": "serq.explore:sweep_command", "plot": "serq.explore:plot_command"})
@click.version_option(package_name="serq")
def main() -> None:
    """serQ: compile, check, simulate and prove LLM-serving deployments."""


@main.command("ir", context_settings={"ignore_unknown_options": False})
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False), help=INSTANCE_HELP)
@click.option("--seed", type=int, default=None, help="The IR's seed setting (default 1).")
@click.option("--horizon", default=None, metavar="T", help="The IR's horizon setting (a number, or inf).")
@click.option("--warmup", type=float, default=None, metavar="T", help="The IR's warm-up setting.")
@click.option("--arrivals", type=int, default=None, metavar="N", help="The IR's arrivals setting.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the IR here instead of stdout.")
@click.option("--schema", is_flag=True, help="Print the IR's JSON schema instead.")
@guarded
def ir_command(file, extra, sets, instance, seed, horizon, warmup, arrivals, output, schema) -> None:
    """Compile FILE to its canonical JSON IR. Inputs: --set k=v, --instance F, or `-- k=v`; the
    execution settings (the instance file's, the flags over them) are the IR's `settings`."""
    from serq.ir import models as ir
    if schema:
        text = ir.json_schema()
    else:
        if file is None:
            raise SerqError("serq ir: name a program FILE (or --schema)", None, "usage")
        flags = {"seed": seed, "horizon": parse_horizon(horizon), "warmup": warmup, "arrivals": arrivals}
        program, _ = link_program(file, sets, instance, extra, flags)
        text = ir.to_json(program)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


@main.command("target")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False), help=INSTANCE_HELP)
@click.option("--engine", "engine", help="Export this engine only (default: every engine).")
@guarded
def target_command(file, extra, sets, instance, engine) -> None:
    """Export FILE's engines as vLLM scheduler settings (JSON); refuse what vLLM cannot express."""
    from serq.target import target
    program, _ = link_program(file, sets, instance, extra)
    click.echo(json.dumps(target(program, engine), indent=2, sort_keys=True))


def program_files(paths: tuple[str, ...]) -> list[Path]:
    """The programs named: files as given, folders searched for *.sq (libraries, which have no
    `fn main`, are linked through their importers and skipped here)."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for f in sorted(path.rglob("*.sq")):
                if "fn main" in f.read_text(encoding="utf-8", errors="replace"):
                    out.append(f)
        elif path.exists():
            out.append(path)
        else:
            raise SerqError(f"no such file or folder: {p}", None, "usage")
    return out


def instance_files(program: Path) -> list[Path]:
    """The instance files kept for a program: `instances/<program>/*.sq` and `*.json` beside it."""
    folder = program.parent / "instances" / program.stem
    if not folder.is_dir():
        return []
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in (".sq", ".json"))


def orphan_instance_folders(paths: tuple[str, ...]) -> list[Path]:
    """`instances/<name>/` folders under the folders named with no program `<name>.sq` beside them."""
    out: list[Path] = []
    for p in paths:
        if Path(p).is_dir():
            for d in sorted(Path(p).rglob("instances")):
                if d.is_dir():
                    out += [sub for sub in sorted(d.iterdir())
                            if sub.is_dir() and not (d.parent / f"{sub.name}.sq").exists()]
    return out


@main.command("check")
@click.argument("paths", nargs=-1, required=True)
@guarded
def check_command(paths) -> None:
    """Link every program named (folders: every *.sq with a `fn main`; a .json file is IR,
    validated as IR written by hand is), and each with every instance file kept for it
    (`instances/<program>/*.sq|json` beside it); report each refusal."""
    from serq.link import link_file
    from serq.ir.validate import load_ir
    failed = 0
    files = program_files(paths)
    instances = 0
    instances_failed = 0
    for f in files:
        try:
            if f.suffix == ".json":
                load_ir(str(f))
            else:
                link_file(f)
        except SerqError as e:
            failed += 1
            click.echo(render(e, sources_of(e)), err=True)
            continue
        if f.suffix == ".sq":
            for inst in instance_files(f):
                instances += 1
                try:  # the instance's inputs and settings, as `serq run` reads them (an end is the run's)
                    link_program(f, (), str(inst), (), {})
                except SerqError as e:
                    instances_failed += 1
                    click.echo(render(e, sources_of(e)), err=True)
    for d in orphan_instance_folders(paths):
        instances += 1
        instances_failed += 1
        click.echo(f"{d}: error: an instance folder with no program `{d.name}.sq` beside its `instances/`", err=True)
    click.echo(f"{len(files) - failed} of {len(files)} program(s) link", err=True)
    if instances or instances_failed:
        click.echo(f"{instances - instances_failed} of {instances} instance file(s) apply to their program", err=True)
    if failed or instances_failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
