"""IR -> serQ source: a program the linker turns back into the same IR.

`program_source(program)` writes a linked program (the kernel's constructs: pools, fifo/ps/delay
stages, step stages, the workload, the server, gauges and claims) as a `.sq` program whose `serq ir`
is the program again, but for the source locations (`at`) and the file name (`source`). The IR knows
no sugar, so the text is the kernel's forms, written in the surface syntax that lowers to each:

* a step stage is an `engine E on E_device { tokens cap …; granule …; state …; schedule { … } execute (…); }`
  on a device of its own (the reference's *Engines on devices* table read backwards): its clauses read
  the kernel's engine values as `running.…`, `waiting.…` and `batch.…` (`serq.lower.engines`' table);
* a pool an engine admits is `pool X on E` (its cap the engine's `X cap c;`), an engine's memory
  `pool X on E_device` (the device's `X cap c;`), both `pool X on E.E_device`;
* `cost(r, e)`, holds, runs and the rest are the kernel statements, which the language writes as they are.

The execution settings are not the program's: `run_flags` gives the `serq run` flags that set them.
What has no source form (a negative number literal, an engine family, a pool that is one engine's
memory and another's queue, …) is refused with a SerqError that names it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from serq.errors import SerqError
from serq.exprtext import ExpressionText
from serq.ir import models as ir
from serq.ir.catalogue import BUILTIN_ATTRIBUTES, TRACE_ATTRIBUTES
from serq.lower.engines import ENGINE_VALUES
from serq.syntax.ast import Span

# an engine clause's kernel context variables, as the clause writes them (`running.count`, `batch.tokens`, …)
_CLAUSE_NAMES = {clause: {var: f"{owner}.{value}" for (owner, value), (var, clauses) in ENGINE_VALUES.items()
                          if clause in clauses}
                 for clause in ("tokens", "schedule", "execute")}
# vLLM's admission gate, `running.preempted == 0`: beside `advance running` alone, the lowering reads the
# two statements as the kernel's default iteration (no `iteration`)
_VLLM_GATE = ir.Binary(op="eq", lhs=ir.Ctx(var="preempted"), rhs=ir.Num(value=0))


def unprintable(what: str, at: ir.Loc | None = None) -> SerqError:
    """The refusal of an IR construct that has no source form."""
    span = Span(at.file, at.line, at.col) if at is not None else None
    return SerqError(f"{what}: the IR has no serQ source form for it", span, "ir")


# ------------------------------------------------------------------ expressions
def number(v) -> str:
    """A number as the grammar reads it back to the same double: an expression's, not negative (the
    language writes -x as a negation, which the IR keeps as one)."""
    if v == "inf":
        return "inf"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise unprintable(f"the value {v!r}")
    if v < 0:
        raise unprintable(f"the number {v} (the language writes -x as a negation, not a number)")
    if isinstance(v, float) and not math.isfinite(v):
        raise unprintable(f"the number {v}")
    if isinstance(v, int) or v.is_integer() and abs(v) < 2 ** 53:
        return str(int(v))
    return repr(v)


def constant(v) -> str:
    """A constant's value (a let's, an input's, a register's start), which the linker evaluates: a negative
    one written as its negation."""
    return f"-{number(-v)}" if v != "inf" and v < 0 else number(v)


def _numbers(program: ir.Program):
    """The program's numbers in expressions: a negative one, which the linker makes only by writing out a
    let or an input of that value, as that constant's name."""
    named = {}
    for c in [*program.constants, *program.inputs]:
        if c.value != "inf" and c.value < 0:
            named.setdefault(c.value, c.name)

    def write(v) -> str:
        return named[v] if v != "inf" and v in named else number(v)
    return write


def _source_text(numbers=number, names: dict[str, str] | None = None) -> ExpressionText:
    """Expressions as the grammar reads them back (`names`: an engine clause's context variables)."""
    return ExpressionText(number=numbers, costs=True, names=names)


# ------------------------------------------------------------------ statements
class _Statements:
    def __init__(self, program: ir.Program, x: ExpressionText) -> None:
        # (`Size` and `Cost` declare an attribute's type; a plain `set` leaves it a number)
        self.types = {a.name: a.type for a in program.attributes if a.side != "builtin"}
        self.x = x

    def block(self, body: list, depth: int) -> list[str]:
        out: list[str] = []
        for s in body:
            out += self.stmt(s, depth)
        return out

    def braced(self, head: str, body: list, depth: int, tail: str = "") -> list[str]:
        pad = "  " * depth
        if not body:
            return [f"{pad}{head}{{ }}{tail}"]
        return [f"{pad}{head}{{", *self.block(body, depth + 1), f"{pad}}}{tail}"]

    def stmt(self, s, depth: int) -> list[str]:
        pad, x, k = "  " * depth, self.x, s.kind
        if k == "turn":
            return [f"{pad}turn;"]
        if k == "set":
            verb = {"size": "Size", "cost": "Cost"}.get(self.types.get(s.name, "number"), "set")
            return [f"{pad}{verb} {s.name} = {x.text(s.value)};"]
        if k == "observe":
            return [f"{pad}observe {s.name} = {x.text(s.value)};"]
        if k == "hold":
            pools = ", ".join(f"{x.pool(hp.pool)} ({x.text(hp.units)})"
                              + (f" reserve ({x.text(hp.reserve)})" if hp.reserve is not None else "") for hp in s.pools)
            reuse = f" reuse ({x.text(s.reuse)})" if s.reuse is not None else ""
            tail = (f" cache ({x.text(s.cache)})" if s.cache is not None else "") + \
                (f" lease {x.pool(s.lease.pool)} ({x.text(s.lease.duration)})" if s.lease is not None else "")
            return self.braced(f"hold {pools}{reuse} ", s.body, depth, tail)
        if k == "grow":
            return [f"{pad}grow {x.pool(s.pool)} ({x.text(s.amount)});"]
        if k == "drop":
            return [f"{pad}drop {x.pool(s.pool)};"]
        if k == "release":
            return [f"{pad}release {x.pool(s.pool)};"]
        if k == "load":
            return [f"{pad}load {x.pool(s.pool)} ({x.text(s.amount)});"]
        if k == "run":
            mode = f" {s.mode}" if s.mode is not None else ""
            growing = f" growing {x.pool(s.growing)}" if s.growing is not None else ""
            return [f"{pad}run {', '.join(x.stage(r) for r in s.stages)}{mode} ({x.text(s.work)}){growing};"]
        if k == "branch":
            lines = self.braced(f"branch ({x.text(s.test)}) ", s.then, depth)
            if s.otherwise:
                lines[-1:] = [f"{lines[-1]} else {{", *self.block(s.otherwise, depth + 1), f"{pad}}}"]
            return lines
        if k == "while":
            return self.braced(f"while ({x.text(s.test)}) ", s.body, depth)
        if k == "loop":
            return self.braced("loop ", s.body, depth)
        if k == "fork":
            return self.braced("fork ", s.body, depth)
        if k == "join":
            return [f"{pad}join;"]
        if k == "choose":
            return [f"{pad}choose {s.name} in {x.text(s.count)} by ({x.list(s.keys)});"]
        if k == "end":
            return [f"{pad}end;"]
        raise unprintable(f"the statement of kind `{k}`", s.at)  # pragma: no cover - the IR has no other


# ------------------------------------------------------------------ declarations
def _pool_options(pool: ir.Pool, with_cap: bool, x: ExpressionText) -> list[str]:
    out = []
    if with_cap and pool.cap != "inf":
        out.append(f"cap {number(pool.cap)};")
    if pool.block is not None:
        out.append(f"block {number(pool.block)};")
    if isinstance(pool.evict, ir.EvictBy):
        out.append(f"evict by ({x.list(pool.evict.keys)});")
    p = pool.preempt
    if isinstance(p, ir.PreemptBy):
        if p.keys == [ir.Unary(op="neg", arg=ir.Ctx(var="admission"))] and p.requeue == "head":
            out.append("preempt lifo;")
        else:
            out.append(f"preempt by ({x.list(p.keys)})" + (" requeue tail;" if p.requeue == "tail" else ";"))
    if isinstance(pool.queue, ir.QueueBy):
        out.append(f"queue by ({x.list(pool.queue.keys)});")
    if pool.reserve_held:
        out.append("reserve held;")
    if pool.spill is not None:
        sp = pool.spill
        out.append(f"spill {x.pool(sp.pool)} via {x.stage(sp.stage)} ({x.text(sp.cost)}) when ({x.text(sp.when)});")
    return out


def _braced_line(head: str, items: list[str]) -> str:
    return f"{head} {{ {' '.join(items)} }}" if items else f"{head} {{ }}"


def _fresh(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}{n}"
    taken.add(out)
    return out


_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _declared_names(program: ir.Program) -> None:
    """Refuse a declaration whose name the language does not write bare (a queue's `P.kv`, `P.nic`)."""
    for what, items in (("pool", program.pools), ("stage", program.stages)):
        for item in items:
            if not _NAME.fullmatch(item.name):
                raise unprintable(f"the {what} `{item.name}` (a queue's member, which this printer does not write "
                                  "as a queue)", item.at)


def _program_names(program: ir.Program) -> set[str]:
    names = {a.name for a in program.attributes} | {c.name for c in program.constants}
    names |= {i.name for i in program.inputs} | {p.name for p in program.pools} | {s.name for s in program.stages}
    names |= {g.name for g in program.gauges} | {c.name for c in program.claims}
    names |= {n.name for n in ir.walk(program) if isinstance(n, ir.ObserveStmt)}
    return names


class _Engine:
    """A step stage written as an engine on a device of its own."""

    def __init__(self, stage: ir.Stage, device: str, numbers) -> None:
        self.stage, self.device, self.numbers = stage, device, numbers
        self.step: ir.Step = stage.service
        self.queues: list[ir.Pool] = []  # its `X cap c;`: the pools it admits, no device's
        self.memory: list[ir.Pool] = []  # its device's `X cap c;`

    def lines(self) -> list[str]:
        step, name = self.step, self.stage.name
        tokens, schedule, execute = (_source_text(self.numbers, _CLAUSE_NAMES[c]) for c in ("tokens", "schedule", "execute"))
        body = [f"{p.name} cap {number(p.cap)};" for p in self.queues]
        body.append(f"tokens cap {tokens.text(step.budget)};")
        if step.granule is not None:
            body.append(f"granule {schedule.text(step.granule)};")
        body += [f"state {r.name} = {constant(r.init)};" for r in step.registers]
        body += ["schedule {", *("  " + line for line in self._schedule(schedule)), "}"]
        body.append(f"execute ({execute.text(step.cost)});")
        return [f"engine {name} on {self.device} {{", *("  " + line for line in body), "}"]

    def _schedule(self, x: ExpressionText) -> list[str]:
        step = self.step
        chunk = "" if step.chunk == ir.Num(value=0) else f" each at most ({x.text(_chunk_cap(step.chunk))})"
        vllm_gate = " while (running.preempted == 0)"
        if isinstance(step.serve, ir.ServeExclusivePrefill):
            if step.iteration is not None:
                raise unprintable(f"engine `{self.stage.name}`: `exclusive prefill` with an iteration body", self.stage.at)
            return [f"exclusive prefill{chunk};", f"admit waiting{vllm_gate};"]
        order = f" by ({x.list(step.serve.keys)})" if step.serve.keys else ""
        if step.iteration is None:
            return [f"advance running{order}{chunk};", f"admit waiting{vllm_gate};"]
        body = step.iteration
        if (len(body) == 2 and isinstance(body[0], ir.IterServe) and isinstance(body[1], ir.IterAdmit)
                and body[1].gate == _VLLM_GATE):
            raise unprintable(f"engine `{self.stage.name}`: an iteration body of `advance running; admit waiting "
                              "while (running.preempted == 0)` (the language reads it as no body)", self.stage.at)
        if order and not _serves(body):
            raise unprintable(f"engine `{self.stage.name}`: a serve order with no `advance running`", self.stage.at)
        state = {"chunk": chunk}
        return self._iteration(body, x, order, state)

    def _iteration(self, body: list, x: ExpressionText, order: str, state: dict) -> list[str]:
        out: list[str] = []
        for s in body:
            if s.kind in ("serve", "admit"):
                # (one `each at most` for the whole iteration: on the first statement that takes one)
                chunk, state["chunk"] = state["chunk"], ""
                only = f" only ({x.text(s.only)})" if s.only is not None else ""
                if s.kind == "serve":
                    out.append(f"advance running{only}{order}{chunk};")
                else:
                    gate = f" while ({x.text(s.gate)})" if s.gate is not None else ""
                    out.append(f"admit waiting{only}{gate}{chunk};")
            elif s.kind == "set":
                out.append(f"set {s.name} = {x.text(s.value)};")
            else:
                out.append(f"branch ({x.text(s.test)}) {{")
                out += ["  " + line for line in self._iteration(s.then, x, order, state)]
                if s.otherwise:
                    out.append("} else {")
                    out += ["  " + line for line in self._iteration(s.otherwise, x, order, state)]
                out.append("}")
        return out


def _chunk_cap(e):
    """A chunk cap as `each at most` writes it: the kernel's 0, no cap, is `inf` there (in the arms of a
    condition too, where the lowering wrote `inf` as 0)."""
    if e == ir.Num(value=0):
        return ir.Inf()
    if isinstance(e, ir.Cond):
        return ir.Cond(test=e.test, then=_chunk_cap(e.then), otherwise=_chunk_cap(e.otherwise))
    return e


def _serves(body: list) -> bool:
    """Whether an iteration body has an `advance running`, where its serve order is written."""
    return any(s.kind == "serve" or s.kind == "branch" and (_serves(s.then) or _serves(s.otherwise)) for s in body)


def _stage_line(stage: ir.Stage, x: ExpressionText) -> str:
    count = f"[{stage.count}]" if stage.count != 1 else ""
    service = stage.service
    if isinstance(service, ir.Fifo):
        kind = "fifo" if service.servers == 1 else f"fifo({service.servers})"
    elif service.capacity == ir.Ctx(var="present"):
        kind = "delay"
    else:
        kind = f"ps({x.text(service.capacity)})"
    return f"stage {stage.name}{count} : {kind};"


def _string(text: str, what: str) -> str:
    if '"' in text or "\n" in text:
        raise unprintable(f"{what} {text!r} (a string of the language holds no quote or line break)")
    return f'"{text}"'


def _arrival(a, x: ExpressionText) -> str:
    if a.kind == "poisson":
        return f"arrive poisson({number(a.rate)});"
    if a.kind == "renewal":
        return f"arrive renewal({x.text(a.gap)});"
    if a.kind in ("closed", "batch"):
        return f"arrive {a.kind}({a.sessions});"
    if a.kind == "none":
        return "arrive none;"
    return f"trace {_string(a.file, 'the trace file')}{' ordered' if a.ordered else ''};"


def program_source(program: ir.Program) -> str:
    """The program as serQ source (see the module's doc); a SerqError names what has no source form."""
    lines: list[str] = []
    if program.inputs:
        lines.append('use "std/args";')
    lines.append("fn main() {")
    body: list[str] = []
    for c in program.constants:
        body.append(f"let {c.name} = {constant(c.value)};")
    for i in program.inputs:
        body.append(f"let {i.name} = args.number({_string(i.arg, 'the input')}, {constant(i.value)});")

    _declared_names(program)
    numbers = _numbers(program)
    x = _source_text(numbers)
    taken = _program_names(program)
    engines: dict[str, _Engine] = {}
    for stage in program.stages:
        if isinstance(stage.service, ir.Step):
            if stage.count != 1:
                raise unprintable(f"the step stage family `{stage.name}[{stage.count}]`", stage.at)
            engines[stage.name] = _Engine(stage, _fresh(f"{stage.name}_device", taken), numbers)
    pool_lines = []
    for pool in program.pools:
        via, memory = pool.admit_via, pool.memory_of
        for owner in (via, memory):
            if owner is not None and owner not in engines:
                raise unprintable(f"pool `{pool.name}` admitted by or the memory of `{owner}`, which is no step stage",
                                  pool.at)
        if (via or memory) and pool.count != 1:
            raise unprintable(f"the pool family `{pool.name}[{pool.count}]` of an engine", pool.at)
        if via is not None and memory is not None and via != memory:
            raise unprintable(f"pool `{pool.name}`, admitted by `{via}` and the memory of `{memory}`", pool.at)
        if via is None and memory is None:
            count = f"[{pool.count}]" if pool.count != 1 else ""
            pool_lines.append(_braced_line(f"pool {pool.name}{count}", _pool_options(pool, True, x)))
            continue
        if memory is not None:
            engine = engines[memory]
            engine.memory.append(pool)
            owner = f"{via}.{engine.device}" if via is not None else engine.device
        else:
            engines[via].queues.append(pool)
            owner = via
        pool_lines.append(_braced_line(f"pool {pool.name} on {owner}", _pool_options(pool, False, x)))

    for engine in engines.values():
        body.append(_braced_line(f"device {engine.device}", [f"{p.name} cap {number(p.cap)};" for p in engine.memory]))
    for stage in program.stages:
        body += engines[stage.name].lines() if stage.name in engines else [_stage_line(stage, x)]
    body += pool_lines
    if program.share != "none":
        body.append(f"share {program.share};")

    statements = _Statements(program, x)
    w = program.workload
    wl = [_arrival(w.arrival, x)]
    if w.trace is not None:
        wl.append(_arrival(w.trace, x))
    if w.hidden:
        wl.append(f"hidden {', '.join(w.hidden)};")
    for name in ("init", "turn"):
        if getattr(w, name):
            wl += statements.braced(f"{name} ", getattr(w, name), 0)
    if w.session != [ir.TurnStmt()]:
        wl += statements.braced("session ", w.session, 0)
    body += ["workload {", *("  " + line for line in wl), "}"]
    body += statements.braced("server ", program.server, 0)
    for g in program.gauges:
        body.append(f"gauge {g.name} = {x.text(g.value)};")
    for c in program.claims:
        given = f" given ({x.text(c.given)})" if c.given is not None else ""
        if c.form == "at_end":
            form = f"at end ({x.text(c.value)})"
        else:
            word = "every" if c.form == "every_iteration" else "some"
            form = f"{word} iteration of {x.stage(c.stage)} ({x.text(c.value)})"
        body.append(f"claim {c.name}{given}: {form};")
    lines += ["  " + line for line in body]
    lines.append("}")
    return "\n".join(lines) + "\n"


def relinked(program: ir.Program, path: Path) -> ir.Program:
    """The program's source written at `path` and linked back, with the program's settings (a SerqError:
    what the printer or the language refuses)."""
    path.write_text(program_source(program))
    from serq.link import link_file
    return link_file(path, settings=program.settings)


def same_program(a: ir.Program, b: ir.Program) -> bool:
    """Whether two programs are the same but for where they were written."""
    return without_locations(a) == without_locations(b)


def run_flags(settings: ir.Settings) -> list[str]:
    """The `serq run` (and `serq ir`) flags that give a program these execution settings."""
    flags = ["--seed", str(settings.seed)]
    if settings.arrivals is not None:
        flags += ["--arrivals", str(settings.arrivals)]
    if settings.horizon != "inf":
        flags += ["--horizon", number(settings.horizon)]
    if settings.warmup:
        flags += ["--warmup", number(settings.warmup)]
    return flags


def without_locations(program: ir.Program) -> dict:
    """The program's JSON form without what says where it was written (`at`, `source`): two programs
    that are the same but for their files compare equal."""
    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "at"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    data = strip(program.model_dump(mode="json", exclude_none=True))
    data.pop("source", None)
    return data


def linked_attributes(program: ir.Program) -> ir.Program:
    """The program with the attribute table the linker derives from its statements, and a `set a = 0;` at
    the top of the workload's `init` for every attribute it reads and no statement sets (which reads 0
    with or without it). The language declares an attribute by setting it; an IR program built by hand may
    declare ones nothing sets, or read them: this is the same program in a form the source can say (a copy
    that shares its statements and expressions with `program`)."""
    w = program.workload
    builtin = set(BUILTIN_ATTRIBUTES) | (set(TRACE_ATTRIBUTES) if _traced(w) else set())
    sides: dict[str, str] = {}
    for side, blocks in (("session", [w.init, w.turn, w.session]), ("server", [program.server])):
        for block in blocks:
            for s in ir.walk_stmts(block):
                if isinstance(s, (ir.SetStmt, ir.ChooseStmt)):
                    sides.setdefault(s.name, side)
    read = {n.name for n in ir.walk(program) if isinstance(n, ir.Attr)}
    unset = sorted(read - builtin - set(sides))
    init = [ir.SetStmt(name=name, value=ir.Num(value=0)) for name in unset] + w.init
    sides.update((name, "session") for name in unset)
    old = {a.name: a for a in program.attributes}
    table = []
    for name in sorted(builtin | set(sides)):
        a = old.get(name)
        if name in BUILTIN_ATTRIBUTES:
            table.append(ir.Attribute(name=name, side="builtin"))
        elif name in builtin:
            table.append(ir.Attribute(name=name, side="builtin", type="size"))
        else:
            table.append(ir.Attribute(name=name, side=sides[name], type=a.type if a else "number",
                                      resources=a.resources if a else [], hidden=a.hidden if a else False))
    return program.model_copy(update={"attributes": table, "workload": w.model_copy(update={"init": init})})


def _traced(w: ir.Workload) -> bool:
    return w.arrival.kind == "trace" or w.trace is not None
