"""`serq lean ...`: build and check the Lean package."""

from __future__ import annotations

import click


@click.group()
def lean() -> None:
    """Build and check the project's Lean proofs."""
