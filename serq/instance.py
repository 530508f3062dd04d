"""Instance files and execution settings: what a run is given besides its program.

The reference (*Arrivals and the run*): "Execution settings are supplied by the CLI flags, an
explicit instance file, or the host API; run { ... } is not a model declaration. The resolved
IR includes the execution settings." An instance file (`--instance F`) holds settings and
values of the program's declared inputs, in one of two forms (docs/language.md, *Instance
files*):

    // F.sq: the language's syntax (serq/syntax/instance.lark)
    run { horizon 1000; warmup 100; seed 1; arrivals 500; }
    let rate = 0.9;

    // F.json: {"inputs": {"rate": 0.9}, "settings": {"horizon": 1000, "seed": 1}},
    //         or a flat object of inputs alone, {"rate": 0.9}

A setting is resolved default < the IR's own settings (a .json program) < the instance file <
its flag (`--seed` …), and an input's value instance < `--set` / `-- NAME=VALUE`. Each setting
keeps its `Origin` (the report's `settings_source`, the header's "seed 1 (default)"), and a
refusal is located where the value was written.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import lark

from serq.errors import SerqError
from serq.syntax import ast as A

# The settings, in the report's order, and what each is (the messages say it).
SETTINGS = ("seed", "horizon", "warmup", "arrivals")
_WHAT = {
    "seed": "a seed is a nonnegative integer",
    "horizon": "the horizon is a positive time (or inf)",
    "warmup": "the warm-up is a nonnegative, finite time",
    "arrivals": "the arrivals are a positive integer (at most 2^53)",
}
GRAMMAR = Path(__file__).parent / "syntax" / "instance.lark"
_PREFIX = "grammar__"  # lark's namespace for the rules instance.lark imports from grammar.lark


@dataclass(frozen=True)
class Origin:
    """Where a setting's value came from: `default`, a flag (`--seed`), `instance F`, `ir F`
    (a .json program's own settings) or `api` (a keyword of `serq.sim.simulate`); an instance
    file's also says where (`span`, the .sq file's line and column; `key`, the JSON key)."""

    label: str
    span: A.Span | None = None
    key: str | None = None

    def __str__(self) -> str:
        return self.label


DEFAULT = Origin("default")


@dataclass
class Setting:
    name: str
    value: int | float
    span: A.Span | None = None  # where the .sq file writes the value
    key: str | None = None      # the JSON key (`settings.seed`)
    at: A.Span | None = None    # where the .sq file writes the setting's name


@dataclass
class Binding:
    """`let NAME = value;`: the input whose argument is NAME (`args.number("NAME", …)`)."""

    arg: str
    value: str | A.Expr         # JSON: the number's (or expression's) text; .sq: the expression as parsed
    span: A.Span | None = None  # where the .sq file writes the name
    key: str | None = None


@dataclass
class Instance:
    path: str
    settings: dict[str, Setting] = field(default_factory=dict)
    inputs: dict[str, Binding] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"instance {self.path}"

    def origin(self, name: str) -> Origin:
        s = self.settings[name]
        return Origin(self.label, s.span, s.key)


# ================================================================ values
def defaults() -> dict:
    from serq.ir import models as ir
    s = ir.Settings()
    return {"seed": s.seed, "horizon": _bound(s.horizon), "warmup": float(s.warmup), "arrivals": s.arrivals}


def _bound(v) -> float:
    return math.inf if v == "inf" else float(v)


def fmt(v) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return repr(v)
    from serq.link.consts import format_number
    try:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        return format_number(float(v))
    except (TypeError, ValueError, OverflowError):
        return repr(v)


def complaint(name: str, value) -> str | None:
    """What is wrong with one setting's value on its own (None: nothing). The reference: "The
    external arrivals setting is a positive integer and seed is a nonnegative integer"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _WHAT[name]
    if name == "seed":
        ok = isinstance(value, int) and value >= 0
    elif name == "arrivals":
        from serq.limits import ARRIVALS_LIMIT
        ok = isinstance(value, int) and 1 <= value <= ARRIVALS_LIMIT
    elif isinstance(value, int) and abs(value) > 2 ** 1023 and _overflows(value):
        ok = False  # a time the run reads as a double: one past the largest double is none
    elif name == "horizon":
        ok = value > 0 and not math.isnan(value)
    else:
        ok = 0 <= value < math.inf
    return None if ok else _WHAT[name]


def _overflows(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _whole(name: str, value: float) -> int | float:
    """A seed or an arrivals count written as a number with an integral value is that integer."""
    if name in ("seed", "arrivals") and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def say(name: str, origin: Origin | None, rest: str) -> str:
    """A message about setting `name`: `NAME rest`, the setting named by its flag (`--seed`) when it
    came from one (or the host API, or nowhere said), bare when the message is located in the .sq
    file that wrote it, and after its file and key otherwise (`instance file F: `settings.seed`: …`)."""
    if origin is None or origin.label.startswith("--") or origin.label in ("api", "default"):
        return f"--{name} {rest}"
    if origin.span is not None:
        return f"{name} {rest}"
    where = origin.label.replace("instance ", "instance file ", 1)
    return f"{where}: " + (f"`{origin.key}`: " if origin.key else "") + f"{name} {rest}"


def check_values(values: dict, origins: dict[str, Origin] | None = None) -> None:
    """Each setting's value, then the warm-up before the horizon; a refusal at its origin."""
    origins = origins or {}
    for name in SETTINGS:
        v = values.get(name)
        if name == "arrivals" and v is None:
            continue
        msg = complaint(name, v)
        if msg is not None:
            o = origins.get(name)
            raise SerqError(say(name, o, f"{fmt(v)}: {msg}"), o.span if o else None, "usage")
    warmup, horizon = values["warmup"], values["horizon"]
    if warmup >= horizon:
        ow, oh = origins.get("warmup"), origins.get("horizon")
        span = (ow.span if ow else None) or (oh.span if oh else None)
        where = f" ({oh.label})" if oh is not None and oh is not DEFAULT else ""
        raise SerqError(say("warmup", ow, f"{fmt(warmup)} is not before the horizon {fmt(horizon)}{where}: "
                                          "nothing would be measured"), span, "usage")


# ================================================================ reading an instance file
def read_instance(path: str | Path) -> Instance:
    """An instance file: `.sq` in the language's syntax, any other name JSON."""
    from serq.errors import read_source
    p = Path(path)
    text = read_source(p, "instance", "usage")
    if p.suffix == ".sq":
        return parse_instance(text, str(path))
    return json_instance(text, str(path))


# ---------------------------------------------------------------- the .sq form
@functools.cache
def _parser() -> lark.Lark:
    from serq.syntax.larkcache import lalr_parser  # the tables kept in the user's cache, keyed on the grammar
    from serq.syntax.parser import DepthTree  # the program parser's nesting limits (serq/limits.py)
    return lalr_parser(GRAMMAR, lexer="contextual", propagate_positions=True, maybe_placeholders=True,
                       tree_class=DepthTree)


def _span(path: str, meta) -> A.Span:
    if getattr(meta, "empty", True):
        return A.Span(path, 0, 0)
    return A.Span(path, meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(path: str, tok: lark.Token) -> A.Span:
    return A.Span(path, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column)


def _err(msg: str, span: A.Span | None) -> SerqError:
    return SerqError(msg, span, "usage")


def parse_instance(text: str, path: str = "<instance>.sq") -> Instance:
    """Parse a .sq instance file. A refusal (kind "usage", exit 2 as a bad flag's) is located."""
    from serq.syntax.parser import TooDeep, _end_position, _expected, _ToAst
    parser = _parser()
    try:
        tree = parser.parse(text)
    except TooDeep as e:
        raise e.error(path, "usage") from None
    except lark.exceptions.UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            found, (line, col) = "end of the file", _end_position(text)
        else:
            found, line, col = f"'{tok}'", tok.line, tok.column
        expected = {str(n).removeprefix(_PREFIX) for n in e.expected}
        raise _err(f"unexpected {found}; expected {_expected(expected, parser)}",
                   A.Span(path, line, col, line, col + max(1, len(str(tok))))) from None
    except lark.exceptions.UnexpectedCharacters as e:
        raise _err(f"unexpected character {text[e.pos_in_stream]!r}",
                   A.Span(path, e.line, e.column, e.line, e.column + 1)) from None
    except lark.exceptions.UnexpectedEOF:  # pragma: no cover - LALR reports UnexpectedToken
        line, col = _end_position(text)
        raise _err("unexpected end of the file", A.Span(path, line, col)) from None

    to_ast = _ToAst(path)

    def expr(t) -> A.Expr:
        if isinstance(t, lark.Tree):
            for sub in t.iter_subtrees():
                if isinstance(sub.data, str) and sub.data.startswith(_PREFIX):
                    sub.data = sub.data[len(_PREFIX):]
        try:
            return to_ast.transform(t)
        except lark.exceptions.VisitError as e:
            if isinstance(e.orig_exc, SerqError):
                e.orig_exc.kind = "usage"
                raise e.orig_exc from None
            raise

    inst = Instance(path)
    run_at: A.Span | None = None
    for entry in tree.children:
        if entry.data == "run_block":
            here = _span(path, entry.meta)
            if run_at is not None:
                raise _err(f"a second `run` block: an instance file has one (the first is at {run_at})",
                           A.Span(path, here.line, here.col, here.line, here.col + 3))
            run_at = here
            for s in entry.children:
                name_tok, value_tree = s.children
                name_span = _tspan(path, name_tok)
                if s.data == "setting_with_equals":
                    raise _err(f"a setting is written `{name_tok} VALUE;`, without `=`", name_span)
                _setting(inst, str(name_tok), name_span, expr(value_tree), text)
        else:  # binding
            name_tok, value_tree = entry.children
            name, name_span = str(name_tok), _tspan(path, name_tok)
            prior = inst.inputs.get(name)
            if prior is not None:
                raise _err(f"input `{name}` is bound twice (first at {prior.span})", name_span)
            inst.inputs[name] = Binding(name, expr(value_tree), name_span)
    return inst


def _setting(inst: Instance, name: str, name_span: A.Span, value: A.Expr, text: str) -> None:
    if name not in SETTINGS:
        raise _err(f"no setting named `{name}`: a `run` block sets {', '.join(_in_run_order())}", name_span)
    prior = inst.settings.get(name)
    if prior is not None:
        raise _err(f"`{name}` is set twice in the `run` block (first at {prior.at})", name_span)
    number = _literal(value, text)
    if number is None:
        what = "a number or inf" if name == "horizon" else "a number"
        raise _err(f"`{name}` is {what}, as its flag --{name} takes (a setting is not an expression)",
                   value.span)
    number = _whole(name, number)
    msg = complaint(name, number)
    if msg is not None:
        raise _err(f"{name} {fmt(number)}: {msg}", value.span)
    inst.settings[name] = Setting(name, number, value.span, at=name_span)


def _in_run_order() -> list[str]:
    return ["horizon", "warmup", "seed", "arrivals"]


def _literal(e: A.Expr, text: str) -> int | float | None:
    """A number as written, signed or not, or `inf`; None for anything else. An unsigned whole
    number is read exactly (a seed above 2**53 keeps its digits)."""
    if isinstance(e, A.Inf):
        return math.inf
    if isinstance(e, A.Num):
        written = _text_at(e.span, text)
        if written is not None and written.isdigit():
            return int(written)
        return e.value
    if isinstance(e, A.Unary) and e.op == "-":
        inner = _literal(e.operand, text)
        return None if inner is None else -inner
    return None


def _text_at(span: A.Span, text: str) -> str | None:
    if span.line <= 0 or span.end_line != span.line:
        return None
    lines = text.split("\n")
    if span.line > len(lines):
        return None
    return lines[span.line - 1][span.col - 1:span.end_col - 1]


# ---------------------------------------------------------------- the JSON form
class _Twice(Exception):
    pass


def _no_twice(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Twice(k)
        out[k] = v
    return out


def json_instance(text: str, path: str = "<instance>.json") -> Instance:
    """A JSON instance: `{"inputs": {…}, "settings": {…}}` — an object whose keys are among
    `inputs` and `settings` and whose values are all objects — or any other object, a flat one of
    inputs alone (today's form: `{"rate": 0.9}`). A refusal names the key."""
    def bad(key: str | None, msg: str) -> SerqError:
        return _err(f"instance file {path}: " + (f"`{key}`: " if key else "") + msg, None)
    try:
        data = json.loads(text, object_pairs_hook=_no_twice)
    except _Twice as e:
        raise bad(None, f"`{e}` is given twice") from None
    except json.JSONDecodeError as e:
        raise bad(None, str(e)) from None
    except RecursionError:
        from serq.jsondepth import too_deep
        raise bad(None, f"nested too deeply to read ({too_deep(text)}): an instance is an object of objects "
                        "and numbers") from None
    except ValueError as e:  # a number of more than 4 300 digits (Python's int_max_str_digits)
        raise bad(None, f"a number too long to read ({str(e).split(';')[0]})") from None
    if not isinstance(data, dict):
        raise bad(None, 'a JSON object: {"inputs": {…}, "settings": {…}}, or a flat object of input name -> number')
    structured = bool(data) and set(data) <= {"inputs", "settings"} and all(isinstance(v, dict) for v in data.values())
    inst = Instance(path)
    inputs = data.get("inputs", {}) if structured else data
    prefix = "inputs." if structured else ""
    for name, v in inputs.items():
        key = prefix + name
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            hint = ("" if structured else
                    '; a flat object is inputs alone: give settings as {"inputs": {…}, "settings": {…}}')
            raise bad(key, f"an input's value is a number (or an expression's text){hint}")
        inst.inputs[name] = Binding(name, v if isinstance(v, str) else repr(v), None, key)
    for name, v in (data.get("settings", {}) if structured else {}).items():
        key = "settings." + name
        if name not in SETTINGS:
            raise bad(key, f"no setting named `{name}`: the settings are {', '.join(_in_run_order())}")
        if name == "horizon" and v == "inf":
            v = math.inf
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise bad(key, f"{_WHAT[name]}" + (', written as a number or "inf"' if name == "horizon" else
                                               ", written as a number"))
        v = _whole(name, float(v)) if isinstance(v, float) else v
        msg = complaint(name, v)
        if msg is not None:
            raise bad(key, f"{name} {fmt(v)}: {msg}")
        inst.settings[name] = Setting(name, v, None, key)
    return inst


# ================================================================ resolving
def resolve_settings(flags: dict | None = None, instance: Instance | None = None, base=None,
                     base_label: str = "ir") -> tuple[dict, dict[str, Origin]]:
    """The settings a run uses and where each came from: the default, then `base` (an IR's
    settings: those it writes), then the instance file, then the flags (a value not None)."""
    values, origins = defaults(), {name: DEFAULT for name in SETTINGS}
    if base is not None:
        for name in SETTINGS:
            if name in base.model_fields_set:
                v = getattr(base, name)
                values[name] = v if name in ("seed", "arrivals") else _bound(v)
                origins[name] = Origin(base_label)
    if instance is not None:
        for name, s in instance.settings.items():
            values[name] = s.value
            origins[name] = instance.origin(name)
    for name, v in (flags or {}).items():
        if v is not None:
            values[name] = v
            origins[name] = Origin(f"--{name}")
    return values, origins


def ir_settings(values: dict, origins: dict[str, Origin]):
    """The IR's settings: those not left at their default are written (`model_fields_set`)."""
    from serq.ir import models as ir
    given = {}
    for name in SETTINGS:
        v = values[name]
        if origins[name] is DEFAULT or v is None:
            continue
        given[name] = "inf" if v == math.inf else v
    return ir.Settings(**given)


def supplied(instance: Instance | None, sets: dict[str, str]) -> dict:
    """The inputs supplied: the instance file's bindings, then --set and `-- NAME=VALUE` over them."""
    out: dict = {}
    if instance is not None:
        out.update({arg: b.value for arg, b in instance.inputs.items()})
    out.update(sets)
    return out


def check_inputs(instance: Instance | None, unit) -> None:
    """Each input the instance binds is one the program declares (by its argument name, as
    `--set` names it); a refusal at the binding."""
    if instance is None or unit.main is None:
        return
    declared = [i for i in unit.main.items if isinstance(i, A.Input)]
    args = {i.arg for i in declared}
    for arg, b in instance.inputs.items():
        if arg in args:
            continue
        listed = ", ".join(sorted(args)) or "none"
        msg = f"no input named `{arg}` (the program declares: {listed})"
        by_let = [i for i in declared if i.name == arg]
        if by_let:
            msg += (f"; `{arg}` is the let of the input \"{by_let[0].arg}\": an instance binds an input by its "
                    f"argument name, `let {by_let[0].arg} = …;`")
        if b.span is None:
            msg = f"instance file {instance.path}: `{b.key}`: {msg}"
        raise _err(msg, b.span)


def link_with(path, instance: Instance | None, sets: dict[str, str], settings=None):
    """Link the program at `path` with the instance's inputs and `--set`'s (over them), checking the
    instance's against the program's declarations first; `settings` goes into the IR."""
    from serq.link import link
    from serq.link.loader import load
    unit = load(path)
    check_inputs(instance, unit)
    try:
        return link(unit, supplied(instance, sets), settings)
    except SerqError as e:  # a value given as text: say where it was given
        arg = getattr(e, "input", None)
        if arg is not None and e.span is None:
            if arg in sets:
                e.message = f"--set {arg}: {e.message}"
            elif instance is not None and arg in instance.inputs and instance.inputs[arg].key:
                e.message = f"instance file {instance.path}: `{instance.inputs[arg].key}`: {e.message}"
            e.args = (e.message,)
        raise
