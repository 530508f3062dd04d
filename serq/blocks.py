"""Nested statement blocks, the same shape in the surface AST and the IR.

Both keep a compound statement's inner blocks in fields named `body`, `then` and
`otherwise`; this module knows that shape once, and neither layer imports the other.
"""

from __future__ import annotations

from typing import Iterator

BLOCK_FIELDS = ("body", "then", "otherwise")


# each statement class's fields among BLOCK_FIELDS, found once per class: every instance of a dataclass or
# a pydantic model has the same attributes, and `getattr(s, name, None)` on a pydantic model that lacks
# `name` goes through its `__getattr__` and an exception (most of a generated DRT case's statement walks)
_BLOCK_FIELDS_OF: dict[type, tuple[str, ...]] = {}


def inner_blocks(s) -> list[tuple[str, list]]:
    """A statement's inner blocks, (field name, statements) in BLOCK_FIELDS' order; none for a simple one."""
    names = _BLOCK_FIELDS_OF.get(s.__class__)
    if names is None:
        names = _BLOCK_FIELDS_OF[s.__class__] = tuple(name for name in BLOCK_FIELDS if hasattr(s, name))
    out = []
    for name in names:
        inner = getattr(s, name)
        if isinstance(inner, list):
            out.append((name, inner))
    return out


def walk_stmts(body: list) -> Iterator:
    """Every statement of a block, nested blocks included, in order."""
    for s in body:
        yield s
        for _, inner in inner_blocks(s):
            yield from walk_stmts(inner)
