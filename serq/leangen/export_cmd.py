"""`serq lean export FILE`: the Lean value of a program in the fragment."""

from __future__ import annotations

import re
from pathlib import Path

import click


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False), help="A JSON file of input values.")
@click.option("--namespace", help="The Lean namespace (default: Serq.Programs.<file name>).")
def export(file, extra, sets, instance, namespace) -> None:
    """Print FILE as a Lean module of the model's program type (Serq.Exec); refuse, with the
    construct's location, a program outside the fragment."""
    from serq.cli import guarded, supplied_inputs

    @guarded
    def body() -> None:
        from serq.leangen.fragment import fragment, render_program
        from serq.link import link_file
        program = link_file(file, supplied_inputs(sets, instance, extra))
        stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(file).stem)
        ns = namespace or f"Serq.Programs.{stem}"
        click.echo(render_program(fragment(program, Path(file).parent), ns), nl=False)

    body()


@click.command("claims")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False), help="A JSON file of input values.")
def claims(file, extra, sets, instance) -> None:
    """Print the Lean statements of FILE's claims (the module scripts/gen_lean_claims.py writes for
    the programs under examples/papers/); refuse, with the construct's location, what the model
    cannot state."""
    from serq.cli import guarded, supplied_inputs

    @guarded
    def body() -> None:
        from serq.leangen.claims import claims_module
        module = claims_module(Path(file), supplied_inputs(sets, instance, extra))
        click.echo(module.text(), nl=False)

    body()
