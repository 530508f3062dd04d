"""`serq run`: simulate a program (the reference interpreter)."""

from __future__ import annotations

import click


@click.command("run")
@click.argument("file", type=click.Path(dir_okay=False))
def run(file: str) -> None:
    """Simulate FILE and report what its clients saw."""
    raise click.ClickException("serq run: the interpreter is being built (issue 4)")
