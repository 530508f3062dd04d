"""The `serq` command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from serq.errors import SerqError, render
from serq.leangen.commands import lean
from serq.sim.commands import run
from serq.sim.oracle_run import oracle
from serq.leangen.export_cmd import claims, export


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="serq")
def main() -> None:
    """serQ: compile, check, simulate and prove LLM-serving deployments."""


lean.add_command(export)
lean.add_command(claims)
main.add_command(lean)
main.add_command(run)
main.add_command(oracle)


def fail(error: SerqError, sources: dict[str, str] | None = None) -> None:
    """Print a refusal as `file:line:col: error: …` with the line and a caret; exit 1 (2 for usage)."""
    click.echo(render(error, sources), err=True)
    sys.exit(2 if error.kind == "usage" else 1)


def _sources_of(error: SerqError) -> dict[str, str]:
    if error.span is None:
        return {}
    try:
        return {error.span.file: Path(error.span.file).read_text(encoding="utf-8")}
    except (OSError, UnicodeDecodeError):
        return {}


def parse_assignments(pairs: tuple[str, ...] | list[str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            raise SerqError(f"{where} `{pair}`: write name=value", None, "usage")
        if name in out:
            raise SerqError(f"{where}: `{name}` is given twice", None, "usage")
        out[name] = value.strip()
    return out


def read_instance(path: str) -> dict[str, str]:
    """An instance file: a JSON object of input name -> number (or expression text)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SerqError(f"no such instance file: {path}", None, "usage") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SerqError(f"instance file {path}: {e}", None, "usage") from None
    if not isinstance(data, dict) or not all(isinstance(v, (int, float, str)) and not isinstance(v, bool)
                                              for v in data.values()):
        raise SerqError(f"instance file {path}: a JSON object of input name -> number", None, "usage")
    return {str(k): (v if isinstance(v, str) else repr(v)) for k, v in data.items()}


def supplied_inputs(sets: tuple[str, ...], instance: str | None, extra: tuple[str, ...]) -> dict[str, str]:
    supplied: dict[str, str] = {}
    if instance:
        supplied.update(read_instance(instance))
    for source, where in ((sets, "--set"), (extra, "after --")):
        for name, value in parse_assignments(source, where).items():
            supplied[name] = value
    return supplied


def guarded(fn):
    """Run a command body: SerqError -> a located message; any other exception -> no traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SerqError as e:
            fail(e, _sources_of(e))
        except KeyboardInterrupt:
            click.echo("serq: interrupted", err=True)
            sys.exit(130)
        except Exception as e:  # a bug of serq's own: say so, without a traceback unless asked
            if os.environ.get("SERQ_DEBUG"):
                raise
            click.echo(f"serq: internal error: {type(e).__name__}: {e} (set SERQ_DEBUG=1 for the traceback)",
                       err=True)
            sys.exit(3)
    return wrapper


@main.command("ir", context_settings={"ignore_unknown_options": False})
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False), help="A JSON file of input values.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the IR here instead of stdout.")
@click.option("--schema", is_flag=True, help="Print the IR's JSON schema instead.")
@guarded
def ir_command(file, extra, sets, instance, output, schema) -> None:
    """Compile FILE to its canonical JSON IR. Inputs: --set k=v, --instance F, or `-- k=v`."""
    from serq.ir import models as ir
    from serq.link import link_file
    if schema:
        text = ir.json_schema()
    else:
        if file is None:
            raise SerqError("serq ir: name a program FILE (or --schema)", None, "usage")
        program = link_file(file, supplied_inputs(sets, instance, extra))
        text = ir.to_json(program)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


@main.command("target")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False), help="A JSON file of input values.")
@click.option("--engine", "engine", help="Export this engine only (default: every engine).")
@guarded
def target_command(file, extra, sets, instance, engine) -> None:
    """Export FILE's engines as vLLM scheduler settings (JSON); refuse what vLLM cannot express."""
    from serq.link import link_file
    from serq.target import target
    program = link_file(file, supplied_inputs(sets, instance, extra))
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


@main.command("check")
@click.argument("paths", nargs=-1, required=True)
@guarded
def check_command(paths) -> None:
    """Link every program named (folders: every *.sq with a `fn main`; a .json file is IR,
    validated as IR written by hand is); report each refusal."""
    from serq.link import link_file
    from serq.ir.validate import load_ir
    failed = 0
    files = program_files(paths)
    for f in files:
        try:
            if f.suffix == ".json":
                load_ir(str(f))
            else:
                link_file(f)
        except SerqError as e:
            failed += 1
            click.echo(render(e, _sources_of(e)), err=True)
    click.echo(f"{len(files) - failed} of {len(files)} program(s) link", err=True)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
