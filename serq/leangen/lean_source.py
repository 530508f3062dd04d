"""Lean source read as text: a small lexer (comments, strings, identifiers), a module's header
(`module`, its `import`s), and the scan for what a proof may not use (`sorry`, `admit`, `axiom`,
`native_decide` and the compiler's trust). The build driver (`serq.leangen.build`) orders modules
by their headers and `serq lean check` reports the scan's findings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator


# --------------------------------------------------------------------------------------
# Lean source: a small lexer (comments, strings, identifiers) for imports and scanning
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Token:
    kind: str  # "ident" | "symbol" | "string" | "char" | "number"
    text: str
    line: int  # 1-based
    col: int  # 1-based


def _is_ident_start(c: str) -> bool:
    return c.isalpha() or c == "_" or (ord(c) > 127 and not c.isspace() and c not in "«»‹›⟨⟩→←↔∀∃λ∧∨¬≤≥≠∈∉∘×⁻¹·•")


def _is_ident_rest(c: str) -> bool:
    return c.isalnum() or c in "_'!?" or ("\u2080" <= c <= "\u209c") or (
        ord(c) > 127 and _is_ident_start(c))


def lean_tokens(text: str) -> Iterator[Token]:
    """Tokens of Lean source outside comments; string and char literals are one token each.

    Handles nested `/- -/` block comments (and doc comments), `--` line comments,
    string literals with escapes (interpolated `s!"…"` strings as one token), raw
    strings `r"…"`, `r#"…"#`, char literals `'a'`, `'\\n'`, and dotted identifiers
    with `«…»` parts.
    """
    n = len(text)
    i = 0
    line, line_start = 1, 0

    def pos(k: int) -> tuple[int, int]:
        return line, k - line_start + 1

    def advance_lines(a: int, b: int) -> None:
        nonlocal line, line_start
        k = text.find("\n", a, b)
        while k != -1:
            line += 1
            line_start = k + 1
            k = text.find("\n", k + 1, b)

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            line_start = i + 1
            i += 1
            continue
        if c.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            k = text.find("\n", i)
            i = n if k == -1 else k
            continue
        if text.startswith("/-", i):
            depth, k = 1, i + 2
            while k < n and depth:
                if text.startswith("/-", k):
                    depth, k = depth + 1, k + 2
                elif text.startswith("-/", k):
                    depth, k = depth - 1, k + 2
                else:
                    k += 1
            advance_lines(i, k)
            i = k
            continue
        ln, col = pos(i)
        # raw strings r"..." / r#"..."#
        m = re.match(r'r(#*)"', text[i:i + 64]) if c == "r" else None
        if m:
            close = '"' + m.group(1)
            k = text.find(close, i + len(m.group(0)))
            k = n if k == -1 else k + len(close)
            yield Token("string", text[i:k], ln, col)
            advance_lines(i, k)
            i = k
            continue
        if c == '"' or (c in "sfm" and text.startswith('!"', i + 1)):
            k = i + (1 if c == '"' else 3)
            while k < n and text[k] != '"':
                k += 2 if text[k] == "\\" else 1
            k = min(k + 1, n)
            yield Token("string", text[i:k], ln, col)
            advance_lines(i, k)
            i = k
            continue
        if c == "'":
            m = re.match(r"'(\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^\\'\n])'", text[i:i + 12])
            if m:
                yield Token("char", m.group(0), ln, col)
                i += len(m.group(0))
                continue
            yield Token("symbol", c, ln, col)
            i += 1
            continue
        if c.isdigit():
            k = i + 1
            while k < n and (text[k].isalnum() or text[k] in "._"):
                k += 1
            yield Token("number", text[i:k], ln, col)
            i = k
            continue
        if _is_ident_start(c) or c == "«":
            k = i
            while True:
                if k < n and text[k] == "«":
                    e = text.find("»", k)
                    k = n if e == -1 else e + 1
                elif k < n and _is_ident_start(text[k]):
                    k += 1
                    while k < n and _is_ident_rest(text[k]):
                        k += 1
                else:
                    break
                if k + 1 < n and text[k] == "." and (_is_ident_start(text[k + 1]) or text[k + 1] == "«"):
                    k += 1
                    continue
                break
            yield Token("ident", text[i:k], ln, col)
            i = k
            continue
        yield Token("symbol", c, ln, col)
        i += 1


_HEADER_MODIFIERS = {"public", "meta", "private"}


def parse_header(text: str) -> tuple[bool, list[tuple[str, int, int]]]:
    """(starts with `module`, [(imported module, line, col)]) from a file's header."""
    toks = lean_tokens(text)
    is_module = False
    imports: list[tuple[str, int, int]] = []
    pending: list[Token] = []
    expecting = False
    for t in toks:
        if t.kind != "ident":
            break
        if t.text == "module" and not imports and not pending and not is_module:
            is_module = True
            continue
        if t.text == "prelude" and not imports:
            continue
        if t.text in _HEADER_MODIFIERS:
            pending.append(t)
            continue
        if t.text == "import":
            expecting = True
            pending.clear()
            continue
        if expecting and t.text == "all":
            continue
        if expecting:
            imports.append((t.text.replace("«", "").replace("»", ""), t.line, t.col))
            expecting = False
            continue
        break
    return is_module, imports


# --------------------------------------------------------------------------------------
# Source scan: sorry, admit, axiom, native_decide ...
# --------------------------------------------------------------------------------------

FORBIDDEN = {
    "sorry": "`sorry` leaves a proof unfinished",
    "admit": "`admit` leaves a proof unfinished",
    "axiom": "`axiom` declarations are not allowed (prove it, or state it as a hypothesis)",
    "native_decide": "`native_decide` trusts the compiler (and fails offline); use `decide` or `decide +kernel`",
    "sorryAx": "`sorryAx` leaves a proof unfinished",
    "ofReduceBool": "`ofReduceBool` trusts the compiler",
    "trustCompiler": "`trustCompiler` trusts the compiler",
    "skipKernelTC": "`debug.skipKernelTC` turns off the kernel's checking",
}


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    col: int
    word: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: error: {self.message}"


# `admit` is also a natural name in a serving model (admission control): it counts as
# the tactic only where a tactic stands (after `by`, `;`, `<;>`, `·`, `=>`, `(`, `|`
# or first on its line) and nothing follows it on the line but a tactic separator.
_TACTIC_BEFORE = {"by", ";", "<;>", "·", ".", "=>", "(", "|"}
_TACTIC_AFTER = {";", "<;>", ")", "|"}


def _symbols(tokens: list[Token]) -> list[Token]:
    """Merge the multi-character symbols the scan cares about (`<;>`, `=>`)."""
    out: list[Token] = []
    for t in tokens:
        if out and t.kind == "symbol" and out[-1].kind == "symbol" and out[-1].line == t.line \
                and out[-1].col + len(out[-1].text) == t.col \
                and out[-1].text + t.text in ("<;", "<;>", "=>"):
            prev = out.pop()
            t = Token("symbol", prev.text + t.text, prev.line, prev.col)
        out.append(t)
    return out


def scan_source(text: str, file: str = "<string>") -> list[Finding]:
    """The forbidden words in Lean source, ignoring comments, strings and name literals."""
    toks = _symbols(list(lean_tokens(text)))
    out: list[Finding] = []
    for k, t in enumerate(toks):
        if t.kind != "ident":
            continue
        prev = toks[k - 1] if k else None
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if prev is not None and prev.kind == "symbol" and prev.text == "`":
            continue  # a name literal
        last = t.text.rsplit(".", 1)[-1]
        if last == "native" and prev is not None and prev.text == "+":
            out.append(Finding(file, t.line, t.col, "native_decide",
                               "`decide +native` trusts the compiler (and fails offline); "
                               "use `decide` or `decide +kernel`"))
        elif t.text == "admit":
            first_on_line = prev is None or prev.line != t.line
            before_ok = first_on_line or prev.text in _TACTIC_BEFORE
            after_ok = nxt is None or nxt.line != t.line or nxt.text in _TACTIC_AFTER
            if before_ok and after_ok:
                out.append(Finding(file, t.line, t.col, "admit", FORBIDDEN["admit"]))
        elif last in FORBIDDEN and last != "admit":
            out.append(Finding(file, t.line, t.col, last, FORBIDDEN[last]))
    return out
