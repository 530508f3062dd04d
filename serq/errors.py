"""The project's one error type: a message with the source location it is about."""

from __future__ import annotations

from serq.syntax.ast import Span


class SerqError(Exception):
    """A program (or IR, or setting) the toolchain refuses.

    `span` locates it in the source; `kind` says which stage refused it
    (parse, link, ir, run, usage), for the message prefix and for tests.
    """

    def __init__(self, message: str, span: Span | None = None, kind: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.kind = kind

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span is not None else ""
        return f"{where}error: {self.message}"


def render(error: SerqError, sources: dict[str, str] | None = None) -> str:
    """`file:line:col: error: message`, then the source line and a caret under the column."""
    text = str(error)
    span = error.span
    if span is None or sources is None or span.file not in sources or span.line <= 0:
        return text
    lines = sources[span.file].splitlines()
    if span.line > len(lines):
        return text
    line = lines[span.line - 1].replace("\t", " ")
    width = 1
    if span.end_line == span.line and span.end_col > span.col:
        width = span.end_col - span.col
    return f"{text}\n  {line}\n  {' ' * (span.col - 1)}{'^' * width}"
