"""`serq lean ...`: build and check the Lean package."""

from __future__ import annotations

import json
import sys

import click

from serq.commandline import guarded
from serq.leangen import build as B
from serq.leangen.export_cmd import claims, export


def _progress(quiet: bool):
    if quiet:
        return None
    return lambda msg: click.echo(msg, err=True)


def _report(result: B.BuildResult) -> None:
    for d in result.diagnostics:
        if d.severity in ("error", "warning"):
            click.echo(str(d), err=True)
    for msg in result.messages:
        click.echo(f"error: {msg}", err=True)
    for r in result.extra:
        if not r.ok and not r.errors and r.output:
            click.echo(r.output, err=True)


def _summary(result: B.BuildResult) -> str:
    if result.mode == "lake":
        head = "lake build " + ("ok" if result.modules and result.modules[0].status == "built" else "failed")
    else:
        parts = [f"{result.count(s)} {s}" for s in ("built", "skipped", "failed", "blocked")
                 if result.count(s)]
        head = f"{len(result.modules)} modules: " + ", ".join(parts or ["none"])
    if result.extra:
        bad = sum(1 for r in result.extra if not r.ok)
        head += f"; {len(result.extra)} extra file(s): " + (f"{bad} failed" if bad else "ok")
    errs = len(result.errors)
    return f"serq lean build: {head}; {errs} error(s) [{result.seconds:.1f} s]"


@click.group()
def lean() -> None:
    """Build and check the project's Lean proofs."""


lean.add_command(export)
lean.add_command(claims)


@lean.command("build")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=B.DEFAULT_JOBS, show_default=True,
              help="Lean processes at once (capped by the machine-wide slots, SERQ_LEAN_SLOTS, "
                   "default 2: the offline Lean needs ~3 GB each).")
@click.option("--force", is_flag=True, help="Recompile every module (per-module driver).")
@click.option("--no-lake", is_flag=True,
              help="Use the per-module driver even when a native lake works.")
@click.option("--timeout", type=float, default=None, help="Seconds allowed per Lean process.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
def build_cmd(files: tuple[str, ...], jobs: int, force: bool, no_lake: bool,
              timeout: float | None, as_json: bool, quiet: bool) -> None:
    """Build the Lean libraries Serq and Papers (lakefile.lean).

    With FILES, also check those Lean files against the built package (generated
    Lean, test fixtures). Errors print as file:line:col: error: message; the exit
    status is 1 when anything fails.
    """
    guarded(_build)(files, jobs, force, no_lake, timeout, as_json, quiet)


def _build(files, jobs, force, no_lake, timeout, as_json, quiet) -> None:
    if jobs > B.slot_count() and not quiet:
        click.echo(f"lean: --jobs {jobs} capped at {B.slot_count()} (machine-wide Lean slots)", err=True)
    try:
        result = B.build(jobs=jobs, force=force, use_lake=False if no_lake else None,
                         extra_files=files, timeout=timeout, on_event=_progress(quiet))
    except B.LeanError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    _report(result)
    click.echo(_summary(result), err=as_json)
    sys.exit(0 if result.ok else 1)


@lean.command("check")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--no-build", is_flag=True,
              help="Only scan the sources (no Lean run, no check of the build's sorry warnings).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=B.DEFAULT_JOBS, show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
def check_cmd(paths: tuple[str, ...], no_build: bool, jobs: int, quiet: bool) -> None:
    """Refuse sorry, admit, axiom and native_decide in the Lean sources.

    Scans every .lean file under the libraries' folders (lean/, examples/papers/) and
    PATHS, ignoring comments and strings; checks that every claim of every program under
    examples/papers/ has its current generated statement and a theorem of that type in
    examples/papers/ClaimsProved.lean; then builds (incrementally) and refuses any
    "declaration uses 'sorry'" warning. Exit status 1 on any finding.
    """
    guarded(_check)(paths, no_build, jobs, quiet)


def _check(paths, no_build, jobs, quiet) -> None:
    try:
        res = B.check(run_build=not no_build, jobs=jobs, extra=paths, on_event=_progress(quiet))
    except B.LeanError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    for f in res.findings:
        click.echo(str(f), err=True)
    for d in res.sorry_warnings:
        click.echo(f"{d.file}:{d.line}:{d.col}: error: declaration uses 'sorry' (refused)", err=True)
    for c in res.claims:
        click.echo(c, err=True)
    if res.build is not None and not res.build.ok:
        _report(res.build)
    n = len(res.findings) + len(res.sorry_warnings) + len(res.claims)
    built = "" if res.build is None else (" build ok;" if res.build.ok else " build FAILED;")
    click.echo(f"serq lean check:{built} {n} refused construct(s)"
               + ("" if res.ok else " -- refused"))
    sys.exit(0 if res.ok else 1)
