"""What every `serq` command shares: running a command body with located errors and no traceback
(`guarded`), reading its inputs (`--set`, `-- k=v`, `--instance`) and settings, and linking its
program with them (`link_program`).

Its own module so that the commands (serq/sim/commands.py, serq/leangen/, serq/explore.py) and the
group that gathers them (serq/cli.py) import it and not each other. Only click and serq.errors are
imported here at load: the rest is imported where it is needed, so that `serq --help` starts fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from serq.errors import SerqError, render


def parse_horizon(value: str | None) -> float | None:
    """--horizon's value: a time (a number, or inf), or None when not given."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise SerqError(f"--horizon {value}: a time (a number, or inf)", None, "usage") from None


def fail(error: SerqError, sources: dict[str, str] | None = None) -> None:
    """Print a refusal as `file:line:col: error: …` with the line and a caret; exit 1 (2 for usage)."""
    click.echo(render(error, sources), err=True)
    sys.exit(2 if error.kind == "usage" else 1)


def sources_of(error: SerqError) -> dict[str, str]:
    if error.span is None:
        return {}
    try:
        return {error.span.file: Path(error.span.file).read_text(encoding="utf-8")}
    except (OSError, UnicodeDecodeError, ValueError, TypeError):  # ValueError: a NUL in the IR's file name
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


def read_instance(path: str):
    """An instance file (serq/instance.py): `.sq` in the language's syntax, any other JSON."""
    from serq.instance import read_instance as read
    return read(path)


def given_inputs(sets: tuple[str, ...], extra: tuple[str, ...]) -> dict[str, str]:
    """--set's inputs, then those after `--` over them."""
    given: dict[str, str] = {}
    for source, where in ((sets, "--set"), (extra, "after --")):
        given.update(parse_assignments(source, where))
    return given


INSTANCE_HELP = ("An instance file: F.sq (`run { seed 1; … }` and `let NAME = value;`) or F.json "
                 "({\"inputs\": {…}, \"settings\": {…}}, or a flat object of inputs).")


def link_program(file, sets, instance, extra, flags: dict | None = None, needs_end: bool = False):
    """Link FILE with its inputs and execution settings: the default, the instance file (`--instance`)
    over it and the flags over that (`flags`: setting -> value or None); --set and `-- k=v` over the
    instance's inputs. The IR carries the settings; returns it and where each setting came from."""
    from serq.instance import check_values, ir_settings, link_with, resolve_settings
    inst = read_instance(instance) if instance else None
    given = given_inputs(sets, extra)
    values, origins = resolve_settings(flags, inst)
    check_values(values, origins)
    program = link_with(file, inst, given, ir_settings(values, origins))
    if flags is not None:
        from serq.sim import _check_settings
        _check_settings(program, values["seed"], values["horizon"], values["warmup"], values["arrivals"], origins,
                        needs_end=needs_end)
    return program, origins


def guarded(fn):
    """Run a command body: SerqError -> a located message; any other exception -> no traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SerqError as e:
            fail(e, sources_of(e))
        except KeyboardInterrupt as e:  # Ctrl-C, or serq run's SIGINT/SIGTERM (serq.sim.interrupts)
            click.echo("serq: interrupted", err=True)
            sys.exit(128 + getattr(e, "signum", 2))
        except Exception as e:  # a bug of serq's own: say so, without a traceback unless asked
            if os.environ.get("SERQ_DEBUG"):
                raise
            click.echo(f"serq: internal error: {type(e).__name__}: {e} (set SERQ_DEBUG=1 for the traceback)",
                       err=True)
            sys.exit(3)
    return wrapper
