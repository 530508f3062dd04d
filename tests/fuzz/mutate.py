"""Mutation operators: a seed file's bytes in, a mutant's bytes out, every choice drawn from one
`random.Random`, so that a (seed, index) pair names one mutant for ever (tests/fuzz/README.md).

Two families:

- text mutants (`.sq` programs and instance files, and any file as raw text): token and line
  deletion, duplication and swaps; numbers replaced by the values the language cannot, or can
  only just, represent; names replaced by keywords and by names the file declares; unbalanced
  brackets; truncation; bytes that are not UTF-8; nesting 5 000 deep (and just at and past the
  documented limits); one line of a megabyte;
- JSON mutants (IR, oracle scenarios, JSON instance files): a value replaced (None, -1, 1e309,
  strings, lists, objects, 5 000-digit integers, 10**400), keys deleted or renamed, list items
  deleted or duplicated, a subtree moved elsewhere, an expression nested 5 000 deep, then the
  text itself cut or given bad bytes.
"""

from __future__ import annotations

import json
import random
import re

# The language's tokens, roughly: comments and strings first, so that their insides stay whole.
_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|\"[^\"\n]*\"|(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?|[A-Za-z_][A-Za-z_0-9]*"
                    r"|==|!=|<=|>=|&&|\|\||\S", re.S)
_NUMBER = re.compile(r"(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*$")

# What a number is replaced by: zero, a negative, past the largest double, NaN and inf spelled as
# names, 10^400 written out, and whole numbers past what a count, a cap or a seed may be.
NUMBERS = ["0", "-1", "1e309", "nan", "inf", "-inf", "1" + "0" * 400, "184467440737", "999999999999",
           "1e-309", "1e-400", "0.5", "1e19", "1e308", "4097", "1000001", "-0", "2"]

KEYWORDS = ["fn", "main", "let", "use", "def", "pool", "stage", "device", "engine", "workload", "server",
            "queue", "share", "gauge", "claim", "cap", "block", "evict", "lru", "by", "preempt", "none",
            "lifo", "fifo", "reserve", "held", "spill", "via", "when", "ps", "delay", "on", "tokens",
            "granule", "state", "schedule", "execute", "request", "advance", "running", "admit", "waiting",
            "only", "each", "at", "most", "exclusive", "prefill", "decode", "first", "branch", "else", "set",
            "while", "taking", "admission", "cache", "growing", "arrive", "trace", "ordered", "init", "turn",
            "session", "hidden", "poisson", "renewal", "closed", "batch", "serve", "latency", "nic", "from",
            "maxmin", "bottleneck", "pull", "push", "given", "every", "iteration", "of", "some", "end",
            "Size", "Cost", "observe", "hold", "grow", "drop", "release", "load", "run", "loop", "fork",
            "join", "choose", "in", "mark", "transfer", "to", "tool", "lease", "reuse", "inf", "max", "min",
            "sum", "args", "number", "now", "cached", "present", "used", "free", "busy", "queued", "cost",
            "seed", "horizon", "warmup", "arrivals", "requeue", "head", "tail"]

PUNCT = ["{", "}", "(", ")", "[", "]", ";", ",", ".", "=", "+", "-", "*", "/", "%", "~", "!", "?", ":",
         "<", ">", "==", "&&", "||", '"', "/*", "*/", "//"]

BAD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\x00", b"\x80abc",
             b"\xf0\x9f\x98", b"\r", b"\x1b[31m", "\u00e9".encode("utf-8"), "\u2028".encode("utf-8")]

DEEP = 5000
# Depths at and around the documented limits (docs/language.md, *Limits*), and far past them.
EXPR_DEPTHS = [63, 64, 65, 100, 200, 480, DEEP]
BLOCK_DEPTHS = [7, 8, 9, 20, 30, 200, DEEP]


def tokens(text: str) -> list[tuple[int, int]]:
    """The (start, end) of every token of the text."""
    return [m.span() for m in _TOKEN.finditer(text)]


def _declared_names(text: str) -> list[str]:
    names = re.findall(r"\b(?:let|stage|pool|def|gauge|claim|queue|engine|device|Size|Cost|set|observe)"
                       r"\s+([A-Za-z_][A-Za-z_0-9]*)", text)
    return names or ["x"]


# ---------------------------------------------------------------- text
def _splice(text: str, a: int, b: int, piece: str) -> str:
    return text[:a] + piece + text[b:]


def _nest_expr(rng: random.Random, depth: int, leaf: str) -> str:
    kind = rng.choice(["paren", "neg", "not", "min", "sum", "cond", "and", "index", "mix"])
    if kind == "paren":  # parentheses alone make no node: the expression is the leaf
        return "(" * depth + leaf + ")" * depth
    if kind == "neg":
        return "-" * depth + leaf
    if kind == "not":
        return "!" * depth + leaf
    if kind == "min":
        return "min(" * depth + leaf + ", 1)" * depth
    if kind == "sum":  # a flat chain a + b + …: one level per operator
        return " + ".join([leaf] * depth)
    if kind == "cond":
        return "(1 ? " * depth + leaf + " : 0)" * depth
    if kind == "and":
        return "(1 && " * depth + leaf + ")" * depth
    if kind == "index":
        return "max(" * depth + leaf + ")" * depth
    parts = []
    for _ in range(depth):
        parts.append(rng.choice(["(1 + ", "(2 * ", "-(", "max(1, ", "(1 < "]))
    return "".join(parts) + leaf + ")" * depth


def _nest_block(rng: random.Random, depth: int, stmt: str) -> str:
    kind = rng.choice(["branch", "loop", "while", "mixed", "else"])
    openers = {"branch": "branch (1) { ", "loop": "loop { ", "while": "while (1) { ", "else": "branch (0) { } else { "}
    if kind == "mixed":
        heads = [rng.choice(list(openers.values())) for _ in range(depth)]
    else:
        heads = [openers[kind]] * depth
    return "".join(heads) + stmt + " }" * depth


def mutate_text(text: str, rng: random.Random) -> tuple[str | bytes, list[str]]:
    """One mutant of a source text, and the names of the operators applied. Most mutants are one to
    three small edits; a few are the big ones (deep nesting, a megabyte line, bad bytes)."""
    ops: list[str] = []
    out: str | bytes = text
    big = rng.random()
    if big < 0.06:
        return _deep(text, rng, ops), ops
    if big < 0.08:
        return _huge_line(text, rng, ops), ops
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        out = _small(out, rng, ops)  # type: ignore[arg-type]
    if rng.random() < 0.05:
        ops.append("bad-bytes")
        data = out.encode("utf-8") if isinstance(out, str) else out
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice(BAD_BYTES) + data[at:], ops
    return out, ops


def _small(text: str, rng: random.Random, ops: list[str]) -> str:
    spans = tokens(text)
    if not spans:
        ops.append("insert")
        return rng.choice(KEYWORDS + PUNCT) + " " + text
    op = rng.choice(["delete", "duplicate", "swap", "number", "number", "number", "scale", "scale", "name", "name",
                     "keyword", "brace", "truncate", "line-delete", "line-duplicate", "line-swap", "insert"])
    ops.append(op)
    a, b = spans[rng.randrange(len(spans))]
    if op == "delete":
        return _splice(text, a, b, "")
    if op == "duplicate":
        return _splice(text, a, b, text[a:b] + " " + text[a:b])
    if op == "swap":
        c, d = spans[rng.randrange(len(spans))]
        if (c, d) < (a, b):
            (a, b), (c, d) = (c, d), (a, b)
        if b > c:
            return text
        return text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
    if op == "number":
        numbers = [s for s in spans if _NUMBER.match(text[s[0]:s[1]])]
        if numbers:
            a, b = rng.choice(numbers)
        return _splice(text, a, b, rng.choice(NUMBERS))
    if op == "scale":  # a number the program still links with, scaled: the runs see extreme values
        numbers = [s for s in spans if _NUMBER.match(text[s[0]:s[1]])]
        if numbers:
            a, b = rng.choice(numbers)
            v = float(text[a:b]) * rng.choice([0.5, 2, 10, 1000, 1e6, 3.7])
            whole = v == v and abs(v) < 1e15 and v == int(v)
            return _splice(text, a, b, str(int(v)) if whole else repr(v))
        return text
    if op in ("name", "keyword"):
        names = [s for s in spans if _NAME.match(text[s[0]:s[1]])]
        if names:
            a, b = rng.choice(names)
        piece = rng.choice(_declared_names(text)) if op == "name" else rng.choice(KEYWORDS)
        return _splice(text, a, b, piece)
    if op == "brace":
        return _splice(text, a, a, rng.choice(["{", "}", "(", ")", "[", "]", "{ {", "} }"]))
    if op == "truncate":
        return text[:rng.randrange(len(text) + 1)]
    if op == "insert":
        return _splice(text, a, a, rng.choice(KEYWORDS + PUNCT + NUMBERS) + " ")
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    if op == "line-delete":
        del lines[i]
    elif op == "line-duplicate":
        lines.insert(i, lines[i])
    else:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _deep(text: str, rng: random.Random, ops: list[str]) -> str:
    """An expression or a block nested deep: at, just past, and far past the limits."""
    spans = tokens(text)
    if rng.random() < 0.6:
        depth = rng.choice(EXPR_DEPTHS)
        ops.append(f"deep-expr-{depth}")
        numbers = [s for s in spans if _NUMBER.match(text[s[0]:s[1]])]
        if not numbers:
            return "(" * depth + text
        a, b = rng.choice(numbers)
        return _splice(text, a, b, "(" + _nest_expr(rng, depth, text[a:b]) + ")")
    depth = rng.choice(BLOCK_DEPTHS)
    ops.append(f"deep-block-{depth}")
    # wrap one statement of the server or the session (a `run`, a `turn;`), or a whole block's body
    m = list(re.finditer(r"(run [^;{}]*;|turn;|set [^;{}]*;|observe [^;{}]*;)", text))
    if not m:
        return "{" * depth + text
    pick = rng.choice(m)
    return _splice(text, pick.start(), pick.end(), _nest_block(rng, depth, pick.group(0)))


def _huge_line(text: str, rng: random.Random, ops: list[str]) -> str:
    size = 1 << 20
    kind = rng.choice(["comment", "number", "name", "sum", "string", "spaces"])
    ops.append(f"huge-line-{kind}")
    piece = {
        "comment": "// " + "x" * size,
        "number": "1" * size,
        "name": "n" * size,
        "sum": " + ".join(["1"] * (size // 4)),
        "string": '"' + "s" * size + '"',
        "spaces": " " * size + ";",
    }[kind]
    lines = text.split("\n")
    i = rng.randrange(len(lines) + 1)
    if kind in ("number", "name", "sum"):  # in place of a number, where an expression stands
        spans = [s for s in tokens(text) if _NUMBER.match(text[s[0]:s[1]])]
        if spans:
            a, b = rng.choice(spans)
            return _splice(text, a, b, piece)
    lines.insert(i, piece)
    return "\n".join(lines)


# ---------------------------------------------------------------- JSON
JSON_VALUES = [None, -1, 0, 1e309, -1e309, "1e309", "nan", "inf", "", "x", [], [1, 2], {}, {"kind": "num"},
               True, False, 10 ** 400, -(10 ** 400), 184467440737, 999999999999, 0.5, 1e19, -0.0, 2 ** 63,
               "\u0000", "a\nb", 1e-309]


def _paths(doc, limit: int = 40):
    """Every path into the document down to `limit` levels (iteratively: a mutant may be deep)."""
    stack = [((), doc)]
    while stack:
        prefix, node = stack.pop()
        yield prefix
        if len(prefix) >= limit:
            continue
        if isinstance(node, dict):
            stack.extend((prefix + (k,), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((prefix + (i,), v) for i, v in reversed(list(enumerate(node))))


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _set(doc, path, value):
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _deep_json(kind: str, depth: int, leaf: str) -> str:
    """JSON text nesting `leaf` `depth` deep (as text: json.dumps recurses)."""
    if kind == "neg":
        return '{"kind": "unary", "op": "neg", "arg": ' * depth + leaf + "}" * depth
    if kind == "list":
        return "[" * depth + leaf + "]" * depth
    if kind == "object":
        return '{"a": ' * depth + leaf + "}" * depth
    return '{"kind": "binary", "op": "add", "lhs": ' * depth + leaf + ', "rhs": {"kind": "num", "value": 1}}' * depth


def mutate_json(text: str, rng: random.Random) -> tuple[str | bytes, list[str]]:
    """One mutant of a JSON document (structural edits, then now and then a textual one)."""
    ops: list[str] = []
    deep: list[str] = []
    try:
        doc = json.loads(text)
    except ValueError:
        return mutate_text(text, rng)
    for _ in range(rng.choice([1, 1, 2, 3])):
        paths = list(_paths(doc))
        path = rng.choice(paths)
        op = rng.choice(["value", "value", "value", "delete", "delete", "rename", "duplicate", "move", "deep",
                         "digits", "number"])
        ops.append(f"json-{op}")
        try:
            target = _get(doc, path)
        except (KeyError, IndexError, TypeError):
            continue
        if op == "value":
            doc = _set(doc, path, rng.choice(JSON_VALUES))
        elif op == "number":  # a number of the document replaced by an edge value
            nums = [p for p in paths if isinstance(_safe_get(doc, p), (int, float))
                    and not isinstance(_safe_get(doc, p), bool)]
            if nums:
                doc = _set(doc, rng.choice(nums), rng.choice([-1, 0, 1e309, 10 ** 400, 999999999999, 1e19, -1e400,
                                                              0.5, 2 ** 64, 1e-320]))
        elif op == "delete" and path:
            parent = _get(doc, path[:-1])
            del parent[path[-1]]
        elif op == "rename" and path and isinstance(_get(doc, path[:-1]), dict):
            parent = _get(doc, path[:-1])
            parent[str(path[-1]) + rng.choice(["_", "X", ""]) + "x"] = parent.pop(path[-1])
        elif op == "duplicate" and isinstance(target, list) and target:
            i = rng.randrange(len(target))
            target.insert(i, json.loads(json.dumps(target[i])))
        elif op == "move":
            src = rng.choice(paths)
            try:
                piece = json.loads(json.dumps(_get(doc, src)))
            except (KeyError, IndexError, TypeError):
                continue
            if len(json.dumps(piece)) < 1 << 20:
                doc = _set(doc, path, piece)
        elif op == "deep":
            depth = rng.choice([50, 64, 65, 100, 150, 199, 200, 201, 300, 1000, DEEP])
            leaf = json.dumps(target) if len(json.dumps(target)) < 2000 else "1"
            deep.append(_deep_json(rng.choice(["neg", "list", "object", "binary"]), depth, leaf))
            doc = _set(doc, path, f"__DEEP_{len(deep) - 1}__")
            ops[-1] += f"-{depth}"
        elif op == "digits":
            # written into the text below: Python reads and writes no int of more than 4 300 digits
            doc = _set(doc, path, f"__DIGITS_{rng.choice([20, 309, 400, 4300, 4301, 5000])}__")
    try:
        out = json.dumps(doc, indent=rng.choice([None, 1, 2]))
    except (ValueError, RecursionError):
        out = text
    out = re.sub(r'"__DIGITS_(\d+)__"', lambda m: "9" * int(m.group(1)), out)
    out = re.sub(r'"__DEEP_(\d+)__"', lambda m: deep[int(m.group(1))], out)
    if rng.random() < 0.08:
        ops.append("json-text")
        return mutate_text(out, rng)[0], ops
    return out, ops


def _safe_get(doc, path):
    try:
        return _get(doc, path)
    except (KeyError, IndexError, TypeError):
        return None


def raw_json_edits(text: str, rng: random.Random) -> tuple[str, list[str]]:
    """Textual JSON edits the structural ones cannot make: numbers the parser reads as inf or NaN,
    5 000-digit numbers, nesting past the parser's depth."""
    kind = rng.choice(["NaN", "Infinity", "-Infinity", "digits", "deep-array", "deep-object", "exp"])
    spans = [m.span() for m in re.finditer(r"-?\d+(\.\d+)?([eE][+-]?\d+)?", text)]
    piece = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "digits": "9" * 5000,
             "deep-array": "[" * DEEP + "1" + "]" * DEEP, "deep-object": '{"a":' * DEEP + "1" + "}" * DEEP,
             "exp": "1e99999"}[kind]
    if not spans:
        return text, [f"json-raw-{kind}"]
    a, b = rng.choice(spans)
    return text[:a] + piece + text[b:], [f"json-raw-{kind}"]
