"""Link a program: files -> kernel AST -> IR, refusing what the reference refuses."""

from __future__ import annotations

from pathlib import Path

from serq.ir import models as ir
from serq.link.loader import Unit, load


def link(unit: Unit, supplied: dict[str, str] | None = None, settings: ir.Settings | None = None) -> ir.Program:
    from serq.link.linker import Linker
    return Linker(unit, supplied, settings).link()


def link_file(path: str | Path, supplied: dict[str, str] | None = None,
              settings: ir.Settings | None = None, text: str | None = None) -> ir.Program:
    """The IR of the program at `path`. Raises SerqError with the location of what it refuses."""
    return link(load(path, text), supplied, settings)


def link_text(text: str, path: str = "<input>.sq", supplied: dict[str, str] | None = None) -> ir.Program:
    return link_file(path, supplied, None, text)
