"""`serq lean export FILE`: the Lean value of a program in the fragment."""

from __future__ import annotations

import re
from pathlib import Path

import click

from serq.commandline import given_inputs, guarded, link_program, read_instance


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False),
              help="An instance file of inputs (and settings): F.sq or F.json (docs/language.md).")
@click.option("--arrivals", type=click.IntRange(min=1), metavar="N",
              help="The run's open arrivals (a `renewal` workload's sessions), as `serq run --arrivals N`.")
@click.option("--namespace", help="The Lean namespace (default: Serq.Programs.<file name>).")
def export(file, extra, sets, instance, arrivals, namespace) -> None:
    """Print FILE as a Lean module: a program with a step engine that is vLLM's settings as the
    engine model's value (Serq.Exec), any other as its kernel IR's (Serq.Kernel); refuse, with the
    construct's location, a program outside both fragments (with a step engine, the kernel's reason
    and then the engine model's)."""
    @guarded
    def body() -> None:
        # the flag is a setting as `serq run`'s is: over the instance file's, and checked the same way
        program, _ = link_program(file, sets, instance, extra, {"arrivals": arrivals})
        stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(file).stem)
        ns = namespace or f"Serq.Programs.{stem}"
        base = Path(file).parent
        from serq.leangen.kernel import kernel_program, render_kernel_module
        if any(s.service.kind == "step" for s in program.stages):
            from serq.errors import SerqError
            from serq.leangen.fragment import fragment, outside_both, render_program
            try:  # the engine model's settings when the program is vLLM's, else its kernel IR
                text = render_program(fragment(program, base), ns)
            except SerqError as engine_model_refused:
                try:
                    text = render_kernel_module(kernel_program(program, base), ns)
                except SerqError as kernel_refused:
                    raise outside_both(kernel_refused, engine_model_refused) from None
        else:
            text = render_kernel_module(kernel_program(program, base), ns)
        click.echo(text, nl=False)

    body()


@click.command("claims")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("extra", nargs=-1)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Supply a declared input.")
@click.option("--instance", type=click.Path(dir_okay=False),
              help="An instance file of inputs (and settings): F.sq or F.json (docs/language.md).")
def claims(file, extra, sets, instance) -> None:
    """Print the Lean statements of FILE's claims (the module scripts/gen_lean_claims.py writes for
    the programs under examples/papers/); refuse, with the construct's location, what the model
    cannot state."""
    @guarded
    def body() -> None:
        from serq.instance import check_inputs, supplied
        from serq.leangen.claims import claims_module
        from serq.link.loader import load
        inst = read_instance(instance) if instance else None
        check_inputs(inst, load(file))  # the instance's inputs are the program's, at their line
        module = claims_module(Path(file), supplied(inst, given_inputs(sets, extra)))
        click.echo(module.text(), nl=False)

    body()
