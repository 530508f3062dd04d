"""Nested statement blocks, the same shape in the surface AST and the IR.

Both keep a compound statement's inner blocks in fields named `body`, `then` and
`otherwise`; this module knows that shape once, and neither layer imports the other.
"""

from __future__ import annotations

from typing import Iterator

BLOCK_FIELDS = ("body", "then", "otherwise")


def inner_blocks(s) -> list[tuple[str, list]]:
    """A statement's inner blocks, (field name, statements) in BLOCK_FIELDS' order; none for a simple one."""
    out = []
    for name in BLOCK_FIELDS:
        inner = getattr(s, name, None)
        if isinstance(inner, list):
            out.append((name, inner))
    return out


def walk_stmts(body: list) -> Iterator:
    """Every statement of a block, nested blocks included, in order."""
    for s in body:
        yield s
        for _, inner in inner_blocks(s):
            yield from walk_stmts(inner)
