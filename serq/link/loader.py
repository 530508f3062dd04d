"""Files and the program's shape: `use` libraries, `fn main`, what stands where."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from serq.errors import SerqError
from serq.syntax import ast as A
from serq.syntax.parser import parse

STD_ARGS = "std/args"

# Items a library, or the program before `fn main`, may hold.
_PRELUDE = (A.Constant, A.Definition, A.Import)


@dataclass
class Unit:
    """The program as the linker reads it: the prelude's constants and defs,
    then main's items, with the texts of every file read (for error carets)."""

    path: str
    constants: list[A.Constant] = field(default_factory=list)
    definitions: list[A.Definition] = field(default_factory=list)
    main: A.MainFn | None = None
    std_args: bool = False
    sources: dict[str, str] = field(default_factory=dict)


def load(path: str | Path, text: str | None = None) -> Unit:
    """Read the program at `path` (or `text` as if it were there) and its libraries."""
    path = str(path)
    if text is None:
        from serq.errors import read_source
        text = read_source(path)
    unit = Unit(path, sources={path: text})
    module = parse(text, path)
    _read_program(unit, module)
    return unit


def _read_program(unit: Unit, module: A.Module) -> None:
    mains = [it for it in module.items if isinstance(it, A.MainFn)]
    if not mains:
        raise SerqError("the program has no `fn main() { … }`", A.Span(module.path, 1, 1), "link")
    first = mains[0]
    if len(mains) > 1:
        raise SerqError("a second `fn main`: a program has exactly one entry point", mains[1].span, "link")
    seen_main = False
    for item in module.items:
        if item is first:
            seen_main = True
            continue
        if seen_main:
            raise SerqError(
                f"{_describe(item)} after `fn main`: every declaration stands inside main, "
                "and only imports, definitions and constants before it",
                item.span, "link")
        if not isinstance(item, _PRELUDE):
            raise SerqError(
                f"{_describe(item)} before `fn main`: only imports, definitions and constants may precede it",
                item.span, "link")
        _take_prelude_item(unit, item, module.path, set())
    if first.name != "main":
        raise SerqError(f"the entry point is `fn main()`, not `fn {first.name}()`", first.span, "link")
    items: list[A.Item] = []
    for item in first.items:
        if isinstance(item, A.MainFn):
            raise SerqError("a nested `fn`: a program has exactly one entry point, `fn main`", item.span, "link")
        if isinstance(item, A.Import):
            _import(unit, item, module.path, set())
            continue
        if isinstance(item, A.Definition):
            unit.definitions.append(item)
            continue
        items.append(item)
    unit.main = A.MainFn(first.name, items, first.span)


def _take_prelude_item(unit: Unit, item: A.Item, file: str, stack: set[str]) -> None:
    if isinstance(item, A.Constant):
        unit.constants.append(item)
    elif isinstance(item, A.Definition):
        unit.definitions.append(item)
    elif isinstance(item, A.Import):
        _import(unit, item, file, stack)


def _import(unit: Unit, item: A.Import, importer: str, stack: set[str]) -> None:
    if item.path == STD_ARGS:
        unit.std_args = True
        return
    if not item.path.endswith(".sq"):
        raise SerqError(f'`use "{item.path}"`: a library is a .sq file next to this one, or "std/args"',
                        item.span, "link")
    target = (Path(importer).parent / item.path)
    key = str(target.resolve())
    if key in stack:
        raise SerqError(f'`use "{item.path}"` imports itself through a cycle', item.span, "link")
    if any(str(Path(p).resolve()) == key for p in unit.sources):
        return  # already read: a library shared by two importers is read once
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SerqError(f'`use "{item.path}"`: no such library {target}', item.span, "link") from None
    except UnicodeDecodeError:
        from serq.errors import read_source
        read_source(target, "library")  # refused at the byte's line in the library
        raise  # pragma: no cover - read_source refuses what read_text did
    except (OSError, ValueError) as e:
        raise SerqError(f'`use "{item.path}"`: cannot read {target}: {e}', item.span, "link") from None
    path = str(target)
    unit.sources[path] = text
    module = parse(text, path)
    for sub in module.items:
        if isinstance(sub, A.MainFn):
            raise SerqError("a library has no `fn main`: it provides definitions, constants and imports",
                            sub.span, "link")
        if not isinstance(sub, _PRELUDE):
            raise SerqError(f"{_describe(sub)} in a library: a library holds only definitions, constants and imports",
                            sub.span, "link")
        _take_prelude_item(unit, sub, path, stack | {key})


def _describe(item: A.Item) -> str:
    names = {
        A.Constant: "a constant", A.Input: "an input", A.Import: "an import", A.Definition: "a def",
        A.PoolDecl: "a pool", A.StageDecl: "a stage", A.DeviceDecl: "a device", A.EngineDecl: "an engine",
        A.WorkloadDecl: "the workload", A.ServerDecl: "the server", A.QueueDecl: "a queue",
        A.ShareDecl: "a share", A.RelationDecl: "a relation", A.GaugeDecl: "a gauge", A.ClaimDecl: "a claim",
        A.MainFn: "a fn",
    }
    what = names.get(type(item), "a declaration")
    name = getattr(item, "name", None)
    return f"{what} `{name}`" if isinstance(name, str) and name else what
