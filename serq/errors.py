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


# The source line a message shows: at most this many characters of it, around the column.
_SHOWN = 160


def _printable(text: str, keep_newlines: bool = True) -> str:
    """`text` with the control characters (a NUL, an escape sequence, a carriage return) shown as
    `\\xNN`, so that a message prints what a file or a name holds and cannot drive the terminal."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch == "\n" and keep_newlines:
            out.append(ch)
        elif ch == "\t":
            out.append(ch)
        elif not ch.isprintable() and ch != " ":
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def render(error: SerqError, sources: dict[str, str] | None = None) -> str:
    """`file:line:col: error: message`, then the source line and a caret under the column. Whatever
    the span says (a column of 10**12, a line past the file's end, a megabyte line), this prints."""
    text = _printable(str(error))
    span = error.span
    try:
        if span is None or sources is None or span.file not in sources or not 0 < span.line:
            return text
        lines = sources[span.file].splitlines()
        if span.line > len(lines) or not 0 < span.col <= len(lines[span.line - 1]) + 1:
            return text
        line = lines[span.line - 1]
        width = 1
        if span.end_line == span.line and span.end_col > span.col:
            width = span.end_col - span.col
        start = 0
        if len(line) > _SHOWN:  # a window around the column
            start = max(0, min(span.col - 1 - _SHOWN // 2, len(line) - _SHOWN))
        shown = line[start:start + _SHOWN]
        col = span.col - 1 - start
        width = max(1, min(width, len(shown) - col))
        # one character for one: the caret stays under the column
        shown = "".join(" " if ch == "\t" else (ch if ch.isprintable() else "?") for ch in shown)
        lead, trail = ("…" if start > 0 else ""), ("…" if start + _SHOWN < len(line) else "")
        return f"{text}\n  {lead}{shown}{trail}\n  {' ' * (len(lead) + col)}{'^' * width}"
    except Exception:  # noqa: BLE001 - a message is printed whatever its span holds
        return text


def read_source(path, what: str = "", kind: str = "parse") -> str:
    """The text of a file the toolchain reads (a program, a library, an IR, an instance or a
    scenario file): a missing or unreadable file is a usage error; bytes that are not UTF-8 are
    refused at their line and column, with the byte's offset."""
    from pathlib import Path
    p = Path(path)
    label = f"{what} " if what else ""
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise SerqError(f"no such {label}file: {_printable(str(p))}", None, "usage") from None
    except IsADirectoryError:
        raise SerqError(f"{_printable(str(p))}: a folder, not a {label}file", None, "usage") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the name
        reason = getattr(e, "strerror", None) or str(e)
        raise SerqError(f"cannot read {label}{_printable(str(p))}: {reason}", None, "usage") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        line = data.count(b"\n", 0, e.start) + 1
        col = len(data[line_start:e.start].decode("utf-8", "replace")) + 1
        raise SerqError(f"the {label}file is not UTF-8: byte 0x{data[e.start]:02x} at byte offset {e.start} "
                        f"({e.reason})", Span(str(p), line, col), kind) from None
