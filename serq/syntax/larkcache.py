"""The LALR parsers, built once per grammar and kept in the user's cache directory.

Building the LALR tables of grammar.lark takes a quarter of a second or more, a large part of a
short `serq run`; loading them takes a few milliseconds. A parser is saved (lark's own
`Lark.save`, a pickle) under a name keyed on the SHA-256 of every grammar file beside it (an
`%import .grammar` reads its neighbour), the options, lark's version and Python's: an edited
grammar, another lark or another Python never reads a stale table, it builds and saves its own.

Where: `$SERQ_CACHE_DIR` if set (empty: no cache), else `$XDG_CACHE_HOME/serq`, else
`~/.cache/serq`; never the package's own directory, which may be read-only. A cache that cannot
be read or written is skipped silently (the parser is then built, as without one); a file is
written whole under a temporary name and renamed, so a concurrent run never reads half of one.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

import lark


def cache_dir() -> Path | None:
    """The directory parsers are kept in, or None when caching is off (`SERQ_CACHE_DIR=`)."""
    d = os.environ.get("SERQ_CACHE_DIR")
    if d is not None:
        return Path(d) if d else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "serq"
    try:
        return Path.home() / ".cache" / "serq"
    except (RuntimeError, KeyError):  # no home directory
        return None


def _key(grammar: Path, options: dict) -> str:
    h = hashlib.sha256()
    h.update(f"lark {lark.__version__} python {sys.version_info[:2]}\n".encode())
    for name in sorted(options):
        v = options[name]
        if isinstance(v, type):
            v = f"{v.__module__}.{v.__qualname__}"
        h.update(f"{name}={v!r}\n".encode())
    for f in sorted(grammar.parent.glob("*.lark")):
        h.update(f"{f.name}\n".encode())
        h.update(f.read_bytes())
        h.update(b"\n")
    return h.hexdigest()


def lalr_parser(grammar: Path, **options) -> lark.Lark:
    """`lark.Lark.open(grammar, parser="lalr", **options)`, from the cache when it holds this grammar."""
    options = {"parser": "lalr", **options}
    directory = cache_dir()
    path = None
    if directory is not None:
        path = directory / f"{grammar.stem}-{_key(grammar, options)[:32]}.lark"
        try:
            with open(path, "rb") as f:
                return lark.Lark.load(f)
        except Exception:  # absent, unreadable or not a parser lark can load: build it
            pass
    parser = lark.Lark.open(str(grammar), **options)
    if path is not None:
        _save(parser, path)
    return parser


def _save(parser: lark.Lark, path: Path) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            parser.save(f)
        os.replace(tmp, path)
        tmp = None
    except Exception:  # a read-only or full disk: no cache, the parser is as good
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
