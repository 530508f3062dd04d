"""Where a JSON text nests deepest, found without parsing it (a reader that recursed gave up on
it): for the refusal of an IR, instance or scenario file nested past a reader's depth, which
names the place (`server[0].work.arg.arg…`), as every other refusal of a JSON file does."""

from __future__ import annotations


def deepest(text: str, stop_at: int | None = None) -> tuple[int, str, int, int]:
    """(depth, path, line, column) of the first container nested deepest in `text` (or the first
    at depth `stop_at`). A scan of the characters: strings skipped, keys and indices kept.

    Two linear scans: the first finds where that container opens, the second builds its path
    once, there (a path built at every new depth made a text nested n deep cost n², minutes for
    the 100 000-deep file a test refuses)."""
    depth, at, line, col, _ = _scan(text, stop_at=stop_at)
    if depth == 0:
        return (0, "", 1, 1)
    *_, stack = _scan(text, until=at)
    return (depth, _path(stack), line, col)


def _scan(text: str, stop_at: int | None = None, until: int | None = None):
    """Scan `text` keeping the stack of open containers ([kind, key or index, expecting a key]):
    (deepest depth, the index where its first container opens, its line and column, the stack),
    the stack as it is just before index `until` when that is given."""
    stack: list[list] = []
    best = (0, 0, 1, 1)
    line, col = 1, 0
    i, n = 0, len(text)
    while i < n:
        if i == until:
            break
        c = text[i]
        col += 1
        if c == "\n":
            line, col = line + 1, 0
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            col += j - i
            if stack and stack[-1][0] == "obj" and stack[-1][2]:
                stack[-1][1] = text[i + 1:j]
            i = j
        elif c == ":":
            if stack and stack[-1][0] == "obj":
                stack[-1][2] = False
        elif c == ",":
            if stack:
                if stack[-1][0] == "arr":
                    stack[-1][1] += 1
                else:
                    stack[-1][2] = True
        elif c in "{[":
            stack.append(["obj", None, True] if c == "{" else ["arr", 0, False])
            if len(stack) > best[0]:
                best = (len(stack), i, line, col)
                if stop_at is not None and len(stack) >= stop_at:
                    break
        elif c in "}]":
            if stack:
                stack.pop()
        i += 1
    return (*best, stack)


def _path(stack: list[list]) -> str:
    out = ""
    for kind, k, _ in stack:
        if kind == "arr":
            out += f"[{k}]"
        elif k is not None:
            out += f".{k}" if out else str(k)
    return out


def too_deep(text: str, stop_at: int | None = None) -> str:
    """`nested N deep at PATH (line L, column C)`, the path's two ends when it is long."""
    depth, path, line, col = deepest(text, stop_at)
    if len(path) > 120:
        path = f"{path[:50]}…{path[-50:]}"
    return f"nested {depth} deep at {path or '(the top level)'} (line {line}, column {col})"
