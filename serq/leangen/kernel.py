"""The kernel fragment: a program's Lean value (`Serq.Kernel.Program`, lean/Serq/Kernel.lean) read
off its IR, and what the Python interpreter recorded of its run, as `Serq.Kernel.agrees` reads it.

`kernel_program(program, base)` checks that every construct of the IR is in the fragment (refusing
the first that is not, at its statement's `file:line:col`) and lowers the IR to `KernelProgram`, a
tree of `LExpr`/`LStmt` nodes that the Jinja templates print as Lean terms. `recorded(program)` runs
the program with the reference interpreter and keeps, per session, the turns it answered and the
observations it made, in the form of `Serq.Kernel.Expected`.

The fragment (docs/lean.md, "The kernel fragment"): natural numbers; constants, attributes, `now`,
`!`, the binary operators but `/`, `c ? a : b`, `min`, `max`, `floor(a / d)`, `ceil(a / d)`,
`reusable(n, d)` and `a % d` for a positive constant `d`, the pools' observables `used`, `free`, `holders`, `queued` and `cachedin`
(anywhere but in the `init` block, a `cache` clause and an `evict by` key) and `blocksize`; the statements
turn, set, observe, branch, while, loop, end, choose (of a constant count, written in the others:
`_Lowering.choose`), run on a delay or a fifo(c) stage, hold on pools of a finite cap
with a `queue fifo` or `queue by` (keys over the attributes, `now` and `waited`), `evict lru` or `evict by`
(keys over a cached entry's `size`, `waiting`, its session's attributes and `now`), a `lease` on one of its
pools, and release inside such a hold or of a lease outside; `arrive batch(N)`;
step engines, one or several (each a stage with its own clauses, residents and records; idle engines plan
their iterations in the stages' declaration order), with vLLM's default schedule, `exclusive prefill` (the
engines under it listed beside the program, `KernelProgram.exclusive`: lean/Serq/KernelExclusive.lean) or an
iteration body of `advance running [only (p)]`, `admit waiting [only (p)] [while (e)]`, `branch` and `set` (the
engine's registers, `state NAME = c;`), its guards over the running requests, the iteration's tokens so far,
`running.preempted`, `waiting.admitted` and the registers (the bodies and the registers' declared values beside
the program too, `KernelProgram.bodies`, `KernelProgram.registers`: lean/Serq/KernelBody.lean; a register a body
sets is read in its engine's own clauses and schedule only, one no body sets is a constant) (`tokens
cap`, `each at most` and `execute` over the engine's context variables, `running.kv_decode` and
`running.kv_prefill` included outside `execute`, `advance running [only (p)] by (keys)`
and `admit waiting only (q)`
over the resident's `decoding`, `admission`, `remaining`, its session's attributes and
`running.*`, `run S prefill|decode (w) [growing P]`, and `pool reqs on S` admitted by
the engine's `admit waiting`); each engine's KV memory (`pool kv on gpu`), whose holds grow with the growing
runs, under `preempt none`, `preempt lifo` or `preempt by (keys) [requeue head|tail]` (keys over the
candidate's `decoding`, `position`, `admission` and attributes); `grow P (d)` inside a hold on P when P does
not preempt (a growth that does not fit waits for a settle to find room: `Serq.Kernel.Machine.growers`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from serq.errors import SerqError
from serq.ir import models as ir
from serq.leangen.fragment import environment, outside
from serq.limits import COUNT_LIMIT
from serq.link.consts import format_number
from serq.link.fold import fold

#: The IR's binary operators as Lean's `Serq.Kernel.BinOp` names them (`div` is `floorDiv` only).
BINOPS = {"add": "add", "sub": "sub", "mul": "mul", "mod": "mod", "eq": "eq", "ne": "ne", "lt": "lt",
          "le": "le", "gt": "gt", "ge": "ge", "and": "and", "or": "or"}

#: The kernel fragment's statements, by IR kind.
STATEMENTS = ("turn", "set", "observe", "branch", "while", "loop", "end", "run", "hold", "release", "grow", "choose")

#: The attribute a lowered `choose` counts its indices in (`_Lowering.choose`), past the IR's attributes. Not a
#: name the language has, so no program's attribute is it; one serves every choose of a program, since a
#: choose runs at one instant and no statement of its thread runs in between.
CHOOSE_INDEX = "(choose index)"
#: The attribute a `choose` whose count is not a constant reads its count into, once (`_Lowering.choose`).
CHOOSE_COUNT = "(choose count)"

#: The pools' observables the machine's pool state answers, as `Serq.Kernel.Expr` names them.
POOL_OBSERVABLES = {"used": "used", "free": "free", "holders": "holders", "queued": "queued", "cachedin": "cachedIn"}

#: Where the fragment reads no pool's state, and why: the interpreter reads it at a moment the
#: kernel's machine has no counterpart of.
INIT_READS = ("in the `init` block: the interpreter runs every session's init as the session arrives "
              "(`Engine.arrive`), a batch's all before any session's statements")
CACHE_READS = ("in a `cache` clause: the interpreter reads the clause at the release of the first pool that "
               "caches, after the hold's pools before it were given back (`Engine.release_frame`)")

#: What the next increments of issue 13 bring (said when a program needs it).
_LATER = ("the kernel fragment has delay and fifo(c) stages, holds on pools of a cap (blocks, reserves, `reserve held`, "
          "the prefix cache with `evict lru` or `evict by`, leases, the pools' observables), step engines, one "
          "or several, each with vLLM's default schedule, its serve order and `only` included, `exclusive "
          "prefill` or an iteration body of `advance running`, `admit waiting` and `branch` statements, clauses "
          "that read the running requests (their KV included), an `execute` cost "
          "over the batch (its KV sums included), each engine's KV memory whose "
          "holds grow with `growing` runs, preempting (`preempt lifo`, `preempt by`) or not, and `grow` on a "
          "pool that does not preempt; "
          "the stages' observables and an engine's registers (`state`, `set`) come next")

#: An engine's context variables its clauses may read, as `Serq.Kernel.StageVar` places them, per clause
#: (the interpreter's `_RUNNING`, `_PLANNED`, `_BATCH` in serq/sim/build.py). In `execute`, `kv_decode` and
#: `kv_prefill` are the batch's KV sums (`batch.kv_decode`, `batch.kv_prefill`); in the other clauses the
#: running requests' (`running.kv_decode`, `running.kv_prefill`: `Serq.Kernel.runningOf`); `attention2` is twice
#: `batch.attention`, read only through `floor`/`ceil` (ATTENTION_READS).
STAGE_VARS = {"tokens": 0, "prefilled": 1, "decoders": 2, "residents": 3, "waiting_holds": 4,
              "decoding": 5, "admission": 6, "remaining": 7, "position": 8, "size": 9, "waiting": 10,
              "budget_left": 11,  # (`budget_left(S)` where S admits: `Serq.Kernel.admissionStage`)
              "kv_decode": 12, "kv_prefill": 13, "attention2": 14,
              "preempted": 15, "admitted": 16}  # (in a schedule's guards: `Serq.Kernel.guardVars`)
#: Register k of the engine being lowered is read at place `REGISTERS_AT + k` (`Serq.Kernel.StageVar.registers`).
REGISTERS_AT = 17
#: Why `batch.attention` is read only as `floor(batch.attention [/ d])` or `ceil(batch.attention [/ d])`.
ATTENTION_READS = ("`batch.attention` outside `floor(batch.attention)`, `ceil(batch.attention)` or those of "
                   "`batch.attention / d`: the attention Σ n * (p + n / 2) is a half when a batch's Σ n² is odd, "
                   "and the fragment's values are whole (Lean keeps it doubled, `StageVar.attention2`)")
#: The serve order's keys (`advance running by (keys)`): the clause that reads the resident it orders
#: and its session's attributes (the interpreter's `serve_ctx`).
SERVE_ORDER = "advance running by"
#: An `only (p)` predicate: it reads what a serve key reads (the interpreter's `serve_ctx`).
ONLY = "only"
#: A pool's `preempt by` keys: they read the candidate's `decoding`, `position` (its hold's on the pool)
#: and `admission` (its place among the candidates), and its session's attributes.
PREEMPT = "preempt by"
#: A pool's `evict by` keys: they read a cached entry's `size` and `waiting` (`Serq.Kernel.rankEntries`),
#: its session's attributes and `now`; no pool's observable (the interpreter reads them in the middle of
#: an admission, its pools half taken).
EVICT = "evict by"
EVICT_READS = ("in an `evict by` key: the interpreter reads the keys in the middle of an admission or a growth, "
               "with the pools half changed")
#: A guard of an engine's iteration body (`branch (e)`, `admit waiting … while (e)`): it reads the running
#: requests as they stand, the iteration's tokens so far and its counts `running.preempted` and
#: `waiting.admitted` (the interpreter's `guard_ctx`, `Serq.Kernel.guardVars`).
GUARD = "a schedule's guard"
#: What an engine reads of its running requests as they stand (`running.*`, `waiting.count`): all that
#: `tokens cap` reads, and what a serve key reads again before every choice in the interpreter.
RUNNING_VARS = ("decoders", "residents", "waiting_holds", "kv_decode", "kv_prefill")
_CLAUSE_VARS = {"tokens cap": RUNNING_VARS,
                "each at most": ("tokens", "prefilled", "decoders", "residents", "waiting_holds", "kv_decode",
                                 "kv_prefill"),
                "granule": ("tokens", "prefilled", "decoders", "residents", "waiting_holds", "kv_decode",
                            "kv_prefill"),
                "execute": ("tokens", "prefilled", "decoders", "residents", "waiting_holds", "kv_decode",
                            "kv_prefill"),
                SERVE_ORDER: ("decoders", "residents", "waiting_holds", "kv_decode", "kv_prefill", "decoding",
                              "admission", "remaining"),
                ONLY: ("decoders", "residents", "waiting_holds", "kv_decode", "kv_prefill", "decoding", "admission",
                       "remaining"),
                GUARD: ("tokens", "prefilled", "decoders", "residents", "waiting_holds", "kv_decode", "kv_prefill",
                        "preempted", "admitted"),
                PREEMPT: ("decoding", "admission", "position"),
                EVICT: ("size", "waiting")}


@dataclass(frozen=True)
class LExpr:
    """A Lean `Serq.Kernel.Expr` term: its constructor and arguments (numbers, names, subterms)."""

    ctor: str
    args: tuple = ()


@dataclass(frozen=True)
class LStmt:
    """A Lean `Serq.Kernel.Stmt` term. `blocks` are its statement lists (branch: yes, no)."""

    ctor: str
    args: tuple = ()
    blocks: tuple[tuple["LStmt", ...], ...] = ()


@dataclass
class KernelProgram:
    attributes: list[str]
    observes: list[str]  # the observe names, by first appearance: Lean's observation names are indices
    stages: list[str]
    services: list[tuple]  # per stage: ("delay",), ("fifo", c) or ("step", e): engine e of `engines`
    pools: list[str]
    caps: list[int]
    blocks: list[int]  # per pool: its `block b`, 0 without one (units and reserves in whole blocks)
    cached_at: int  # the place of the built-in attribute `cached` (its length when it is not there)
    computed_at: int  # the place of the built-in attribute `computed` (its length when it is not there)
    queue_keys: list[list[LExpr]]  # per pool: its `queue by` keys, none for `queue fifo`
    serial_at: int
    turn_no_at: int
    init: list[LStmt]
    turn_block: list[LStmt]
    session: list[LStmt]
    server: list[LStmt]
    sessions: int
    gap: int = 0  # `arrive renewal(gap)`: session k arrives at (k + 1) * gap; 0: `arrive batch(N)`, all at 0
    # per engine: (tokens cap, each at most, execute, the serve order's keys: none for admission order,
    # `only` on `advance running`, on `admit waiting`: None for none, and whether `admit waiting` reads
    # `while (running.preempted == 0)` before every admission: `Serq.Kernel.Engine.admitGated`, and the
    # `granule`: `num 0` for none, `Serq.Kernel.Engine.granule`)
    engines: list[tuple] = field(default_factory=list)
    # the engines (indices into `engines`) under `exclusive prefill; admit waiting while (running.preempted == 0);`
    # (the IR's `serve` `ExclusivePrefill`): `Serq.Kernel.runProgramX`'s `xs` (lean/Serq/KernelExclusive.lean)
    exclusive: list[int] = field(default_factory=list)
    # per engine, its iteration body (`Serq.Kernel.IterStmt`s as `LStmt`s `serve`, `admit`, `branch`; empty: vLLM's
    # schedule, its `only` included, or `exclusive prefill`): `Serq.Kernel.runProgramB`'s `bodies`
    # (lean/Serq/KernelBody.lean)
    bodies: list[tuple] = field(default_factory=list)
    # per engine, beside `bodies`: its registers' declared values (`state NAME = c;`, in order), each read at
    # `StageVar.registers + k` (`Serq.Kernel.Body.regs`)
    registers: list[tuple[int, ...]] = field(default_factory=list)
    admit_via: list[int] = field(default_factory=list)  # per pool: 0, or s + 1 when stage s's engine admits it
    # per pool: 0 `preempt none`; 1 `preempt by` / `lifo`, requeue head; 2 requeue tail
    preempt_modes: list[int] = field(default_factory=list)
    preempt_keys: list[list[LExpr]] = field(default_factory=list)  # per pool: its `preempt by` keys (lifo: none)
    evict_keys: list[list[LExpr]] = field(default_factory=list)  # per pool: its `evict by` keys (`evict lru`: none)
    trace: "KernelTrace | None" = None  # `trace "file" ordered;`: the sessions' arrivals and turns
    # per pool: `reserve held` (`Serq.Kernel.Program.reserveHeld`: what a hold reserved and has not allocated
    # counts against later admissions while it lasts)
    reserve_held: list[bool] = field(default_factory=list)
    source: str = ""
    notes: list[str] = field(default_factory=list)


#: The attributes a trace's turn sets, in `Serq.Kernel.Program.traceAt`'s order (`new out think forced`
#: from the row, `more` from its place).
TRACE_ATTRIBUTES = ("new", "out", "think", "forced", "more")


@dataclass(frozen=True)
class KernelTrace:
    """An ordered trace as the kernel reads it: the sessions in the order they arrive (by time, ties in
    the file's order: the interpreter schedules every arrival as the run starts), each one's arrival
    time and rows (`new out think forced`), and each one's place in the file (the interpreter's turn
    log names a turn by the trace session it replays)."""

    times: list[int]
    rows: list[list[tuple[int, int, int, int]]]
    file_order: list[int]


def _outside(what: str, loc: ir.Loc | None, base: Path) -> SerqError:
    return outside(what, loc, base, "the Lean kernel fragment")


def kernel_program(program: ir.Program, base: Path) -> KernelProgram:
    """The program's Lean value, or the refusal of its first construct outside the fragment."""
    return _Lowering(program, base).program()


class _Lowering:
    def __init__(self, program: ir.Program, base: Path) -> None:
        self.p = program
        self.base = base
        self.attrs = [a.name for a in program.attributes]
        self.attr_at = {n: i for i, n in enumerate(self.attrs)}
        self.stages = [s.name for s in program.stages]
        self.pools = [m.name for m in program.pools]
        self.observes: list[str] = []
        self.waited_readable = False  # lowering a queue key, which may read `waited`
        # where the expression being lowered stands, when it may read no pool's state there (None: it may)
        self.pool_state_refused: str | None = None
        # lowering an engine's clause: the clause's name (its context variables readable, no attribute)
        self.engine_clause: str | None = None
        # lowering a hold's units, reserve and reuse: the engine that admits its queue (None: none does)
        self.admitting_engine: str | None = None
        self.engines: list[tuple] = []
        self.exclusive: list[int] = []
        self.bodies: list[tuple] = []
        self.registers: list[tuple[int, ...]] = []
        # lowering engine `name`'s clauses and schedule: `(name, {register: its index})`
        self.own_registers: tuple[str, dict[str, int]] | None = None
        # every engine's registers that no body sets, by (engine, name): constants, read anywhere
        self.constant_registers: dict[tuple[str, str], int] = {}
        # the registers a body sets, by (engine, name): read in that engine's clauses and schedule only
        self.live_registers: set[tuple[str, str]] = set()

    def program(self) -> KernelProgram:
        p, base = self.p, self.base
        self.declare_registers(p.stages)  # (before the pools: a queue key may read a constant register)
        caps = [self.pool(pool) for pool in p.pools]
        blocks = [pool.block or 0 for pool in p.pools]
        queue_keys = [self.queue_keys(pool) for pool in p.pools]
        services = [self.service(stage) for stage in p.stages]
        admit_via = [0 if pool.admit_via is None else self.stages.index(pool.admit_via) + 1 for pool in p.pools]
        preempt_modes = [_preempt_mode(pool) for pool in p.pools]
        preempt_keys = [self.preempt_keys(pool) for pool in p.pools]
        evict_keys = [self.evict_keys(pool) for pool in p.pools]
        for gauge in p.gauges:
            raise _outside(f"gauge `{gauge.name}`: the fragment records turns and observations", gauge.at, base)
        w = p.workload
        sessions, gap = self.arrivals(w.arrival)
        trace = self.trace(w.arrival) if isinstance(w.arrival, ir.Trace) else None
        if trace is not None:
            sessions = len(trace.times)
        if w.trace is not None:
            raise _outside("a trace beside the arrival law: the fragment's turns come from the program", w.trace.at,
                           base)
        for name in ("serial", "turn_no"):
            if name not in self.attr_at:
                raise _outside(f"the built-in attribute `{name}` is missing from the IR's attributes", None, base)
        init = self.refusing_pool_state(INIT_READS, self.block, w.init)
        turn_block, session, server = self.block(w.turn), self.block(w.session), self.block(p.server)
        # (after the blocks: a `choose` adds its counter to the attributes, and a built-in the program lacks is
        # placed past all of them)
        return KernelProgram(
            attributes=self.attrs, observes=self.observes, stages=self.stages, services=services,
            pools=self.pools, caps=caps, blocks=blocks, queue_keys=queue_keys,
            cached_at=self.attr_at.get("cached", len(self.attrs)),
            computed_at=self.attr_at.get("computed", len(self.attrs)),
            serial_at=self.attr_at["serial"], turn_no_at=self.attr_at["turn_no"],
            init=init, turn_block=turn_block, session=session,
            server=server, sessions=sessions, gap=gap, source=p.source or "", engines=self.engines,
            exclusive=self.exclusive, bodies=self.bodies if any(self.bodies) else [],
            registers=self.registers if any(self.bodies) else [],
            admit_via=admit_via, preempt_modes=preempt_modes, preempt_keys=preempt_keys, evict_keys=evict_keys,
            trace=trace, reserve_held=[bool(pool.reserve_held) for pool in p.pools])

    def arrivals(self, arrival: ir.Arrival) -> tuple[int, int]:
        """The sessions and the gap between arrivals: `batch(N)` (N, 0), or `renewal(g)` with a constant
        whole gap g > 0 and the run's `--arrivals N` (N, g)."""
        base = self.base
        if isinstance(arrival, ir.Batch):
            return arrival.sessions, 0
        if isinstance(arrival, ir.Trace):
            return 0, 0  # (`trace` reads the file)
        if not isinstance(arrival, ir.Renewal):
            raise _outside(f"the workload's `{arrival.kind}` arrivals: the fragment's sessions arrive together "
                           "(`arrive batch(N);`), at a constant gap (`arrive renewal(g);`) or as an ordered "
                           "trace says (`trace \"file.csv\" ordered;`)", arrival.at, base)
        gap = fold(arrival.gap)
        if gap is None:
            raise _outside("a drawn renewal gap: the fragment's programs are deterministic", arrival.at, base)
        if not (float(gap).is_integer() and gap > 0):
            raise _outside(f"a renewal gap of {gap}: the fragment's clock is whole", arrival.at, base)
        limit = self.p.settings.arrivals
        if limit is None:
            raise _outside("`arrive renewal(g)` without `--arrivals N`: the fragment's runs have a given "
                           "number of sessions", arrival.at, base)
        return limit, int(gap)

    def trace(self, trace: ir.Trace) -> KernelTrace:
        """An ordered trace's sessions (serq.sim.trace.read_trace), in the order they arrive, when its
        times and turns are whole numbers."""
        from serq.sim.trace import read_trace
        where = trace.at, self.base
        if not trace.ordered:
            raise _outside("a trace that is not `ordered`: its sessions are drawn, and the fragment's programs are "
                           "deterministic", *where)
        path = Path(trace.file)
        if not path.is_absolute():
            path = self.base / path
        sessions, arrive = read_trace(path)
        for i, (t, turns) in enumerate(zip(arrive, sessions)):
            for what, v in (("arrival time", t), *((c, x) for row in turns for c, x in
                                                   zip(("new", "out", "think", "forced"), row))):
                if not float(v).is_integer():
                    raise _outside(f"trace session {i + 1}'s {what} {v}: the fragment's clock and numbers are "
                                   "whole", *where)
        order = sorted(range(len(arrive)), key=lambda i: (arrive[i], i))
        return KernelTrace(times=[int(arrive[i]) for i in order],
                           rows=[[tuple(int(x) for x in row) for row in sessions[i]] for i in order],
                           file_order=order)

    def pool(self, pool: ir.Pool) -> int:
        """A pool's cap, when the pool is in the fragment: one member, a finite whole cap (a `block`
        of whole units is read by `program`), no preemption (an engine that admits it is read by
        `program`; an engine's memory, `pool kv on gpu`, is a pool whose holds grow by `growing` runs)."""
        where = pool.at, self.base
        if pool.count != 1:
            raise _outside(f"pool family `{pool.name}[{pool.count}]`: the fragment indexes no member", *where)
        cap = pool.cap
        if cap == "inf" or isinstance(cap, float) or cap < 0:
            raise _outside(f"the cap {cap} of pool `{pool.name}`: the fragment's pools have a finite whole cap",
                           *where)
        if pool.spill is not None:
            raise _outside(f"`spill` on pool `{pool.name}`: {_LATER}", *where)
        if pool.preempt.kind != "none" and pool.memory_of is None:
            # its victims would be its holders in a scope, which the kernel's machine does not list
            raise _outside(f"preemption on pool `{pool.name}`, which is no engine's memory: the fragment's "
                           "victims are an engine's residents (`pool kv on gpu`)", *where)
        return cap

    def preempt_keys(self, pool: ir.Pool) -> list[LExpr]:
        """A pool's `preempt by` keys, over the candidate's attributes, `decoding`, `position` and
        `admission` (`preempt lifo` and `preempt none`: none)."""
        if pool.preempt.kind != "by" or _is_lifo(pool.preempt):
            return []
        with self.lowering(engine_clause=PREEMPT):
            return [self.expr(k, pool.at) for k in pool.preempt.keys]

    def evict_keys(self, pool: ir.Pool) -> list[LExpr]:
        """A pool's `evict by` keys, over a cached entry's `size`, `waiting`, its session's attributes and
        `now` (`evict lru`: none)."""
        if pool.evict.kind != "by":
            return []
        with self.lowering(engine_clause=EVICT, pool_state_refused=EVICT_READS):
            return [self.expr(k, pool.at) for k in pool.evict.keys]

    def queue_keys(self, pool: ir.Pool) -> list[LExpr]:
        """A pool's `queue by` keys (which may read `waited`), none for `queue fifo`."""
        if pool.queue.kind != "by":
            return []
        with self.lowering(waited_readable=True):
            return [self.expr(k, pool.at) for k in pool.queue.keys]

    def declare_registers(self, stages: list) -> None:
        """Every engine's registers: whole declared values; those its body sets are live, the others
        constants (read as their declared values wherever the linker lets them be read)."""
        for stage in stages:
            svc = stage.service
            if not isinstance(svc, ir.Step):
                continue
            set_names = ir.registers_set(svc.iteration or [])
            for r in svc.registers:
                v = r.init
                if not float(v).is_integer() or v < 0:
                    raise _outside(f"register `{r.name}` of engine `{stage.name}` declared {v}: the fragment "
                                   "computes over the natural numbers", stage.at, self.base)
                if r.name in set_names:
                    self.live_registers.add((stage.name, r.name))
                else:
                    self.constant_registers[(stage.name, r.name)] = int(v)

    def service(self, stage: ir.Stage) -> tuple:
        svc = stage.service
        if stage.count != 1:
            raise _outside(f"stage family `{stage.name}[{stage.count}]`: the fragment indexes no member",
                           stage.at, self.base)
        if isinstance(svc, ir.Fifo):
            return ("fifo", svc.servers)
        if isinstance(svc, ir.Ps) and isinstance(svc.capacity, ir.Ctx) and svc.capacity.var == "present":
            return ("delay",)
        if isinstance(svc, ir.Step):
            return self.engine(stage, svc)
        raise _outside(f"stage `{stage.name}` is `{_service_name(svc)}`: {_LATER}", stage.at, self.base)

    def engine(self, stage: ir.Stage, svc: ir.Step) -> tuple:
        """A step engine under vLLM's default schedule (`advance running [by (keys)]; admit waiting
        while (running.preempted == 0);`: no iteration body; with `only` on both statements, the two-statement
        body the `Engine` value's `serveOnly`, `admitOnly` and `admitGated` say), `exclusive prefill`
        (recorded in `exclusive`: its `Engine` value is the default schedule's, with no serve keys and no
        `only`) or any other body (recorded in `bodies`, `iteration_block`; its `Engine` value's `only` none),
        its clauses and serve keys lowered."""
        where = stage.at, self.base
        has_body = svc.iteration is not None and not _is_vllm_with_only(svc.iteration)
        if isinstance(svc.budget, ir.Inf):
            raise _outside(f"`tokens cap inf` on engine `{stage.name}`: the fragment's budgets are whole numbers",
                           *where)
        with self.lowering(own_registers=(stage.name, {r.name: k for k, r in enumerate(svc.registers)})):
            return self.engine_clauses(stage, svc, has_body)

    def engine_clauses(self, stage: ir.Stage, svc: ir.Step, has_body: bool) -> tuple:
        """`engine`'s clauses, body and registers, lowered with the engine's registers readable."""
        where = stage.at, self.base
        clauses = []
        for name, e in (("tokens cap", svc.budget), ("each at most", svc.chunk), ("execute", svc.cost)):
            with self.lowering(engine_clause=name, pool_state_refused=f"in an engine's `{name}`"):
                clauses.append(self.expr(e, stage.at))
        order = []
        if svc.serve.kind == "by":
            preempts = any(pool.memory_of == stage.name and pool.preempt.kind != "none" for pool in self.p.pools)
            if preempts and any(isinstance(n, ir.Ctx) and n.var in RUNNING_VARS
                                for k in svc.serve.keys for n in ir.walk(k)):
                # the interpreter reads such keys again before every choice (`keys_dynamic`), and a
                # preemption while serving changes what they read; the kernel reads them once
                raise _outside(f"a serve key that reads `running.*` on engine `{stage.name}`, whose memory "
                               "preempts: the fragment reads serve keys once, as the iteration starts", *where)
            with self.lowering(engine_clause=SERVE_ORDER):  # (the linker refuses a pool's observable in a key)
                order = [self.expr(k, stage.at) for k in svc.serve.keys]
        clauses.append(tuple(order))
        # `only (p)` on `advance running` and on `admit waiting` (none: every request)
        for only in ((None, None) if svc.iteration is None or has_body
                     else (svc.iteration[0].only, svc.iteration[1].only)):
            clauses.append(self.predicate(only, stage))
        # vLLM's default schedule (no IR body) has the gate without writing it out
        clauses.append(svc.iteration is None or has_body or svc.iteration[1].gate is not None)
        # `granule g`, read as the iteration starts as `each at most` is (none, and `inf`: 0, no granule)
        if svc.granule is None or isinstance(svc.granule, ir.Inf):
            clauses.append(LExpr("num", (0,)))
        else:
            with self.lowering(engine_clause="granule", pool_state_refused="in an engine's `granule`"):
                clauses.append(self.expr(svc.granule, stage.at))
        if svc.serve.kind == "exclusive_prefill":
            self.exclusive.append(len(self.engines))
        self.bodies.append(self.iteration_block(svc.iteration, stage) if has_body else ())
        self.registers.append(tuple(int(r.init) for r in svc.registers) if has_body else ())
        self.engines.append(tuple(clauses))
        return ("step", len(self.engines) - 1)

    def iteration_block(self, stmts: list, stage: ir.Stage) -> tuple[LStmt, ...]:
        """An engine's iteration body (`Serq.Kernel.IterStmt`): `advance running [only (p)]` a `serve`,
        `admit waiting [only (p)] [while (e)]` an `admit`, `branch` a `branch`, `set NAME = e` a `set` of
        the register's place; a guard, a gate and a set's value read what `Serq.Kernel.guardVars` holds
        (`GUARD`) and the registers."""
        out = []
        for s in stmts:
            if s.kind == "set":
                out.append(LStmt("set", (self.own_registers[1][s.name], self.guard(s.value, stage))))
                continue
            if s.kind == "branch":
                out.append(LStmt("branch", (self.guard(s.test, stage),),
                                 (self.iteration_block(s.then, stage), self.iteration_block(s.otherwise, stage))))
                continue
            only = self.predicate(s.only, stage)
            if s.kind == "serve":
                out.append(LStmt("serve", (only,)))
            else:
                out.append(LStmt("admit", (only, None if s.gate is None else self.guard(s.gate, stage))))
        return tuple(out)

    def predicate(self, only, stage: ir.Stage) -> LExpr | None:
        """An `only (p)` predicate of `advance running` or `admit waiting` (None: none, every request)."""
        if only is None:
            return None
        with self.lowering(engine_clause=ONLY):
            return self.expr(only, stage.at)

    def guard(self, e, stage: ir.Stage) -> LExpr:
        with self.lowering(engine_clause=GUARD, pool_state_refused="in a schedule's guard"):
            return self.expr(e, stage.at)

    def block(self, body: list) -> list[LStmt]:
        out: list[LStmt] = []
        for s in body:
            if s.kind == "choose":
                out.extend(self.choose(s))
            else:
                out.append(self.stmt(s))
        return out

    def choose(self, s: ir.ChooseStmt) -> list[LStmt]:
        """`choose j in n by (k₁, …)`, written in the kernel's statements: j is set to the index from 0 to
        n − 1 whose keys are least, compared in order, the smallest index on a tie (the reference's *Ties*;
        the interpreter's `_Compiler.choose`). The kernel has no statement of its own for it: j starts at 0,
        and a counter i (`CHOOSE_INDEX`) runs over 1 … n − 1, j becoming i when i's keys (the keys with
        `j` read as i) are below the keys read with j as it stands, the best so far. Every key reads the
        state of one instant, as the interpreter's do: nothing else runs between these statements.

        A constant count is checked here (a whole number from 1 to a million, as the interpreter's run
        requires) and written as a number. Any other count is read once, before `j` is reset (it may read
        `j`, as the interpreter's does), into a second hidden attribute (`CHOOSE_COUNT`) that bounds the
        counter. The interpreter fails a run whose count is not a whole number from 1 to a million; the
        machine has no failure (a count of 0 leaves `j` at 0), so the two agree on the runs the interpreter
        completes, as with ℕ's subtraction stopping at 0 (the reference's *Lean model* paragraph)."""
        n = fold(s.count)
        if n is not None and not (float(n).is_integer() and 1 <= n <= COUNT_LIMIT):
            raise _outside(f"`choose {s.name} in {format_number(n)}`: the count is a whole number from 1 to a million", s.at, self.base)
        chosen = self.attribute(s.name, s.at)
        read_count = []
        if n is not None:
            bound = LExpr("num", (int(n),))
        else:
            count = self.hidden_attribute(CHOOSE_COUNT)
            read_count = [LStmt("set", (count, self.expr(s.count, s.at)))]
            bound = LExpr("attr", (count,))
        index = self.hidden_attribute(CHOOSE_INDEX)
        best = [self.expr(k, s.at) for k in s.keys]
        candidate = [_with_attribute(k, chosen, LExpr("attr", (index,))) for k in best]
        step = LExpr("cond", (_lexically_less(candidate, best), LExpr("attr", (index,)), LExpr("attr", (chosen,))))
        raise_index = LExpr("bin", ("add", LExpr("attr", (index,)), LExpr("num", (1,))))
        more = LExpr("bin", ("lt", LExpr("attr", (index,)), bound))
        return [*read_count, LStmt("set", (chosen, LExpr("num", (0,)))), LStmt("set", (index, LExpr("num", (1,)))),
                LStmt("while", (more,), ((LStmt("set", (chosen, step)), LStmt("set", (index, raise_index))),))]

    def hidden_attribute(self, name: str) -> int:
        """The place of one of the lowering's hidden attributes (`CHOOSE_INDEX`, `CHOOSE_COUNT`), appended
        past the IR's attributes at its first use: no program's attribute has such a name."""
        if name not in self.attr_at:
            self.attr_at[name] = len(self.attrs)
            self.attrs.append(name)
        return self.attr_at[name]

    def stmt(self, s) -> LStmt:
        k = s.kind
        if k not in STATEMENTS:
            raise _outside(f"`{k}`: the fragment's statements are {', '.join(STATEMENTS)}", s.at, self.base)
        if k == "turn":
            return LStmt("turn")
        if k == "end":
            return LStmt("stop")
        if k == "set":
            return LStmt("set", (self.attribute(s.name, s.at), self.expr(s.value, s.at)))
        if k == "observe":
            if s.name not in self.observes:
                self.observes.append(s.name)
            return LStmt("observe", (self.observes.index(s.name), self.expr(s.value, s.at)))
        if k == "branch":
            return LStmt("branch", (self.expr(s.test, s.at),), (tuple(self.block(s.then)), tuple(self.block(s.otherwise))))
        if k == "while":
            return LStmt("while", (self.expr(s.test, s.at),), (tuple(self.block(s.body)),))
        if k == "loop":
            return LStmt("loop", (), (tuple(self.block(s.body)),))
        if k == "hold":
            return self.hold(s)
        if k == "release":
            if s.pool.index is not None:
                raise _outside(f"an indexed release of `{s.pool.pool}`", s.at, self.base)
            return LStmt("release", (self.pools.index(s.pool.pool),))
        if k == "grow":
            return self.grow(s)
        # run
        if len(s.stages) != 1:
            raise _outside("a run of the fragment names one stage", s.at, self.base)
        ref = s.stages[0]
        if ref.index is not None:
            raise _outside(f"an indexed run on `{ref.stage}`", s.at, self.base)
        stage = self.stages.index(ref.stage)
        work = self.expr(self.cost(s.work, ref.stage, s.at), s.at)
        on_engine = isinstance(self.p.stages[stage].service, ir.Step)
        if s.mode is None and not on_engine:
            return LStmt("run", (stage, work))
        if s.mode is None or not on_engine:
            raise _outside(f"a run on `{ref.stage}`: a `prefill` or `decode` run is on a step engine, and a run on "
                           "a step engine is one of them", s.at, self.base)
        grow = 0  # `growing P`: its hold on P grows as the run's position advances (pool index + 1)
        if s.growing is not None:
            if s.growing.index is not None:
                raise _outside(f"an indexed `growing {s.growing.pool}[…]`", s.at, self.base)
            grow = self.pools.index(s.growing.pool) + 1
            pool = self.p.pools[grow - 1]
            if pool.preempt.kind != "none" and pool.memory_of != ref.stage:
                raise _outside(f"a run on `{ref.stage}` growing `{pool.name}`, which preempts and is not its memory: "
                               "the fragment's victims are the growing run's engine's residents", s.at, self.base)
        return LStmt("step", (stage, s.mode == "decode", grow, work))

    def hold(self, s: ir.HoldStmt) -> LStmt:
        names = [hp.pool.pool for hp in s.pools]
        # a pool an engine admits holds request slots, not a prefix: it takes no part in the prefix cache
        # (serq/sim/build.py)
        slots = {pool.name for pool in self.p.pools if pool.admit_via is not None}
        cache_pools = ir.clause_pools(s.cache, names) - slots
        reuse_pools = (ir.clause_pools(s.reuse, names) if s.reuse is not None else ir.clause_pools(s.cache, names)) - slots
        cache = (None if s.cache is None
                 else self.refusing_pool_state(CACHE_READS, self.expr, _clause_arg(s.cache), s.at))
        # the units, reserve and reuse are read at admission: when an engine admits the hold's queue,
        # while it plans an iteration, so `budget_left` of that engine reads the budget left
        first = next(pool for pool in self.p.pools if pool.name == names[0])
        with self.lowering(admitting_engine=first.admit_via):
            reuse = None if s.reuse is None else self.expr(_clause_arg(s.reuse), s.at)
            on = []
            for hp in s.pools:
                if hp.pool.index is not None:
                    raise _outside(f"an indexed hold on `{hp.pool.pool}`", s.at, self.base)
                name = hp.pool.pool
                # no reserve: the units alone need room (`max(u, 0)` is u)
                reserve = (LExpr("num", (0,)) if hp.reserve is None
                           else self.expr(self.cost(hp.reserve, name, s.at), s.at))
                on.append((self.pools.index(name), self.expr(self.cost(hp.units, name, s.at), s.at), reserve,
                           s.cache is not None and name in cache_pools, s.cache is not None and name in reuse_pools,
                           self.lease(s, name)))
        return LStmt("hold", (tuple(on), reuse, cache), (tuple(self.block(s.body)),))

    def grow(self, s: ir.GrowStmt) -> LStmt:
        """`grow P (d);` on a pool that does not preempt: the innermost hold on P asks d more units, and waits
        at settle time when they do not fit (`Serq.Kernel.Machine.growers`)."""
        name = s.pool.pool
        if s.pool.index is not None:
            raise _outside(f"an indexed grow of `{name}`", s.at, self.base)
        pool = next(pool for pool in self.p.pools if pool.name == name)
        if pool.preempt.kind != "none":
            raise _outside(f"`grow {name}` on pool `{name}`, which preempts: its victims would be "
                           "the holders in a scope that the grow waits on, not an engine's residents, which are the "
                           "fragment's only preemption victims; a grow is in the fragment on a `preempt none` pool "
                           "(the grower waits)", s.at, self.base)
        return LStmt("grow", (self.pools.index(name), self.expr(self.cost(s.amount, name, s.at), s.at)))

    def lease(self, s: ir.HoldStmt, name: str):
        """The hold's lease on pool `name` (`lease m (t)`): None when it leases none there, "inf" for
        `lease m (inf)`, else its duration `t`, read as the hold ends (after its other pools went back)."""
        if s.lease is None or s.lease.pool.pool != name:
            return None
        if s.lease.pool.index is not None:
            raise _outside(f"an indexed lease of `{name}`", s.at, self.base)
        return "inf" if isinstance(s.lease.duration, ir.Inf) else self.expr(s.lease.duration, s.at)

    @contextmanager
    def lowering(self, **state):
        """Lower with fields of the lowering's state set (what the expression being lowered stands in:
        `engine_clause`, `waited_readable`, `pool_state_refused`, `admitting_engine`), restored after."""
        saved = {name: getattr(self, name) for name in state}
        for name, value in state.items():
            setattr(self, name, value)
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def refusing_pool_state(self, where: str, lower, *args):
        """`lower(*args)`, refusing a pool's observable in it as standing `where`."""
        with self.lowering(pool_state_refused=where):
            return lower(*args)

    def cost(self, e, resource: str, at):
        """A run's work or a hold's units without its `cost(resource, …)` (the fragment's units are
        its resources' own)."""
        if isinstance(e, ir.CostOf):
            if e.resources != [resource]:
                raise _outside(f"a cost of {', '.join(e.resources)} on `{resource}`", at, self.base)
            return e.arg
        return e

    def attribute(self, name: str, at) -> int:
        if name not in self.attr_at:
            raise _outside(f"`{name}` is not in the IR's attributes", at, self.base)
        return self.attr_at[name]

    def expr(self, e, at) -> LExpr:
        k = e.kind
        if k == "num":
            v = e.value
            if isinstance(v, float) or v < 0:
                raise _outside(f"the number {v}: the fragment computes over the natural numbers", at, self.base)
            return LExpr("num", (v,))
        if k == "attr":
            if self.engine_clause not in (None, SERVE_ORDER, ONLY, PREEMPT, EVICT):
                raise _outside(f"the attribute `{e.name}` in an engine's `{self.engine_clause}`: it reads no session",
                               at, self.base)
            return LExpr("attr", (self.attribute(e.name, at),))
        if k == "ctx":
            if e.var == "attention" and self.engine_clause == "execute":
                raise _outside(ATTENTION_READS, at, self.base)
            if e.var == "waited" and self.waited_readable:
                return LExpr("waited")
            if self.engine_clause is not None and e.var in _CLAUSE_VARS[self.engine_clause]:
                return LExpr("stageVar", (STAGE_VARS[e.var],))
            if e.var != "now":
                raise _outside(f"the context variable `{e.var}`: the fragment reads `now` (`waited` in a queue "
                               "key, and an engine's clause some of the engine's: `Serq.Kernel.StageVar`) only", at,
                               self.base)
            return LExpr("now")
        if k == "unary":
            if e.op != "not":
                raise _outside("a negation: the fragment computes over the natural numbers", at, self.base)
            return LExpr("not", (self.expr(e.arg, at),))
        if k == "binary":
            if e.op == "div":
                raise _outside("`/` outside `floor(a / d)`: the fragment's division is floor division by a "
                               "positive constant", at, self.base)
            if e.op == "mod":
                return LExpr("bin", ("mod", self.expr(e.lhs, at), LExpr("num", (self.divisor(e.rhs, at),))))
            return LExpr("bin", (BINOPS[e.op], self.expr(e.lhs, at), self.expr(e.rhs, at)))
        if k == "cond":
            return LExpr("cond", (self.expr(e.test, at), self.expr(e.then, at), self.expr(e.otherwise, at)))
        if k == "call":
            if e.fn in ("min", "max"):
                terms = [self.expr(a, at) for a in e.args]
                out = terms[0]
                for t in terms[1:]:  # min(a, b, c) is min(min(a, b), c)
                    out = LExpr(e.fn, (out, t))
                return out
            if e.fn in ("floor", "ceil") and len(e.args) == 1 and self.reads_attention(e.args[0]):
                return self.attention(e.fn, e.args[0], at)
            if e.fn in ("floor", "ceil") and len(e.args) == 1:
                a = e.args[0]
                if isinstance(a, ir.Binary) and a.op == "div":
                    return rounded_division(e.fn, self.expr(a.lhs, at), self.divisor(a.rhs, at))
                return self.expr(a, at)  # every value of the fragment is whole: floor and ceil are the identity
            if e.fn == "reusable" and len(e.args) == 2:
                # the whole blocks of b before the last token (serq.link.consts.reusable): ⌊(n - 1) / b⌋ · b,
                # where ℕ's n - 1 is 0 for n = 0, as reusable(0, b) is
                b = self.divisor(e.args[1], at)
                whole = LExpr("floorDiv", (LExpr("bin", ("sub", self.expr(e.args[0], at), LExpr("num", (1,)))), b))
                return LExpr("bin", ("mul", whole, LExpr("num", (b,))))
            raise _outside(f"`{e.fn}(…)`: the fragment's functions are min, max, floor(a / d), ceil(a / d) and "
                           "reusable(n, b), d and b positive whole constants", at, self.base)
        if k == "draw":
            raise _outside(f"a draw `~{e.dist}(…)`: the fragment's programs are deterministic", at, self.base)
        if k == "pool_obs":
            return self.pool_observable(e, at)
        if k == "reg":
            return self.register(e, at)
        if k == "stage_obs" and e.fn == "budget_left":
            if e.stage.index is not None or e.stage.stage != self.admitting_engine:
                raise _outside(f"`budget_left({e.stage.stage})` outside the units, reserve and reuse of a hold whose "
                               f"queue `{e.stage.stage}` admits: the fragment reads it while the engine admits",
                               at, self.base)
            return LExpr("stageVar", (STAGE_VARS["budget_left"],))
        raise _outside(f"the expression `{k}`: {_LATER}", at, self.base)

    def register(self, e: ir.Reg, at) -> LExpr:
        """Register `e.name` of engine `e.stage`: its declared value when no body sets it; else, in the
        engine's own clauses and schedule, its place `Serq.Kernel.StageVar.registers + k`, which the plan
        fills (`Serq.Kernel.Expr.withRegs`)."""
        key = (e.stage, e.name)
        if key in self.constant_registers:
            return LExpr("num", (self.constant_registers[key],))
        own = self.own_registers
        if own is None or own[0] != e.stage or self.engine_clause is None:
            raise _outside(f"register `{e.name}` of engine `{e.stage}`, which its schedule sets, read outside the "
                           "engine's own clauses and schedule (a pool's queue key or a hold's header): the "
                           "fragment's pools and holds read the machine, not an engine's plan", at, self.base)
        return LExpr("stageVar", (REGISTERS_AT + own[1][e.name],))

    def pool_observable(self, e: ir.PoolObs, at) -> LExpr:
        """`used`, `free`, `holders`, `queued` or `cachedin` of a pool, read from the machine's pools
        (`Serq.Kernel.eval`)."""
        name = e.pool.pool
        if e.pool.index is not None:
            raise _outside(f"an indexed `{e.fn}({name}[…])`: the fragment indexes no member", at, self.base)
        if e.fn == "blocksize":
            # a constant, but one the interpreter counts as state: units that read it are judged at every
            # try, not at the join (`is_static`), which a number in their place would change
            return LExpr("blockSize", (self.p.pools[self.pools.index(name)].block or 1,))
        if e.fn not in POOL_OBSERVABLES:
            raise _outside(f"`{e.fn}({name})`: {_LATER}", at, self.base)
        if self.pool_state_refused is not None:
            raise _outside(f"`{e.fn}({name})` {self.pool_state_refused}", at, self.base)
        return LExpr(POOL_OBSERVABLES[e.fn], (self.pools.index(name),))

    def reads_attention(self, a) -> bool:
        """`a` is `batch.attention` or `batch.attention / d` in `execute`."""
        if isinstance(a, ir.Binary) and a.op == "div":
            a = a.lhs
        return self.engine_clause == "execute" and isinstance(a, ir.Ctx) and a.var == "attention"

    def attention(self, fn: str, a, at) -> LExpr:
        """`floor` or `ceil` of `batch.attention / d` (d = 1 for `batch.attention` itself), read off twice the
        attention (`StageVar.attention2`, whole): ⌊A / 2d⌋ or ⌈A / 2d⌉."""
        d = 2 * (self.divisor(a.rhs, at) if isinstance(a, ir.Binary) else 1)
        return rounded_division(fn, LExpr("stageVar", (STAGE_VARS["attention2"],)), d)

    def divisor(self, e, at) -> int:
        if not (isinstance(e, ir.Num) and isinstance(e.value, int) and e.value > 0):
            raise _outside("a division or `%` by what is not a positive whole constant", at, self.base)
        return e.value


def _with_attribute(e: LExpr, attribute: int, value: LExpr) -> LExpr:
    """`e` with every read of the attribute at place `attribute` replaced by `value`."""
    if e.ctor == "attr" and e.args[0] == attribute:
        return value
    return LExpr(e.ctor, tuple(_with_attribute(a, attribute, value) if isinstance(a, LExpr) else a for a in e.args))


def _lexically_less(keys: list[LExpr], others: list[LExpr]) -> LExpr:
    """1 when `keys` are below `others` compared in order (the first that differs decides), else 0."""
    if not keys:
        return LExpr("num", (0,))
    first_less = LExpr("bin", ("lt", keys[0], others[0]))
    if len(keys) == 1:
        return first_less
    tie = LExpr("bin", ("eq", keys[0], others[0]))
    return LExpr("bin", ("or", first_less, LExpr("bin", ("and", tie, _lexically_less(keys[1:], others[1:])))))


def _is_vllm_with_only(iteration: list) -> bool:
    """The iteration body is vLLM's schedule with `only`: `advance running [only (p)]; admit waiting
    [only (q)] while (running.preempted == 0);` (the gate as the IR writes it, `!preempted`, or as the
    program did; the fragment preempts no one, so it always holds)."""
    if len(iteration) != 2 or iteration[0].kind != "serve" or iteration[1].kind != "admit":
        return False
    gate = iteration[1].gate
    preempted = ir.Ctx(var="preempted")
    return gate is None or gate == ir.Unary(op="not", arg=preempted) or gate == ir.Binary(
        op="eq", lhs=preempted, rhs=ir.Num(value=0))


def _is_lifo(preempt) -> bool:
    """`preempt lifo`, which the parser writes `preempt by (-admission)`: the candidate admitted last,
    which is also what no keys give (every candidate ties, and ties go to the one admitted last)."""
    return preempt.keys == [ir.Unary(op="neg", arg=ir.Ctx(var="admission"))]


def _preempt_mode(pool: ir.Pool) -> int:
    """`Serq.Kernel.Program.preemptModes`: 0 `preempt none`, 1 requeue head, 2 requeue tail."""
    if pool.preempt.kind == "none":
        return 0
    return 2 if pool.preempt.requeue == "tail" else 1


def _clause_arg(e):
    """A clause's amount without its `cost(…)` (the fragment's amounts are their resources' own)."""
    return e.arg if isinstance(e, ir.CostOf) else e


def _service_name(svc) -> str:
    if isinstance(svc, ir.Fifo):
        return f"fifo({svc.servers})"
    if isinstance(svc, ir.Ps):
        return "ps(…)"
    return "step engine"


# ------------------------------------------------------------------ Lean text
def lean_expr(e: LExpr) -> str:
    """The Lean term of an expression node."""
    c, a = e.ctor, e.args
    if c == "num":
        return f"(.num {a[0]})"
    if c == "attr":
        return f"(.attr {a[0]})"
    if c in ("now", "waited"):
        return f".{c}"
    if c in POOL_OBSERVABLES.values() or c in ("stageVar", "blockSize"):
        return f"(.{c} {a[0]})"
    if c == "not":
        return f"(.not {lean_expr(a[0])})"
    if c == "bin":
        return f"(.bin .{a[0]} {lean_expr(a[1])} {lean_expr(a[2])})"
    if c == "cond":
        return f"(.cond {lean_expr(a[0])} {lean_expr(a[1])} {lean_expr(a[2])})"
    if c in ("min", "max"):
        return f"(.{c} {lean_expr(a[0])} {lean_expr(a[1])})"
    if c == "floorDiv":
        return f"(.floorDiv {lean_expr(a[0])} {a[1]})"
    raise ValueError(c)


def lean_block(stmts, indent: int = 0) -> str:
    """A Lean `List Stmt` term, one statement per line."""
    if not stmts:
        return "[]"
    pad = "  " * (indent + 1)
    return "[\n" + ",\n".join(pad + lean_stmt(s, indent + 1) for s in stmts) + "]"


def lean_stmt(s: LStmt, indent: int = 0) -> str:
    c, a = s.ctor, s.args
    if c in ("turn", "stop"):
        return f".{c}"
    if c == "release":
        return f".release {a[0]}"
    if c == "grow":
        return f".grow {a[0]} {lean_expr(a[1])}"
    if c in ("set", "observe", "run"):
        return f".{c} {a[0]} {lean_expr(a[1])}"
    if c == "step":
        return f".step {a[0]} {_lean_bool(a[1])} {a[2]} {lean_expr(a[3])}"
    if c == "hold":
        on = ", ".join(f"⟨{pool}, {lean_expr(units)}, {lean_expr(reserve)}, {_lean_bool(caches)}, {_lean_bool(reuses)}, "
                       f"{_lean_bool(lease is not None)}, {_lean_option(None if lease in (None, 'inf') else lease)}⟩"
                       for pool, units, reserve, caches, reuses, lease in a[0])
        return f".hold [{on}] {_lean_option(a[1])} {_lean_option(a[2])} {lean_block(s.blocks[0], indent)}"
    if c == "branch":
        return f".branch {lean_expr(a[0])} {lean_block(s.blocks[0], indent)} {lean_block(s.blocks[1], indent)}"
    if c == "while":
        return f".while {lean_expr(a[0])} {lean_block(s.blocks[0], indent)}"
    if c == "loop":
        return f".loop {lean_block(s.blocks[0], indent)}"
    raise ValueError(c)


def lean_iteration_block(stmts, indent: int = 0) -> str:
    """A Lean `List IterStmt` term (an engine's iteration body), one statement per line."""
    if not stmts:
        return "[]"
    pad = "  " * (indent + 1)

    def stmt(s: LStmt) -> str:
        if s.ctor == "serve":
            return f".serve {_lean_option(s.args[0])}"
        if s.ctor == "admit":
            return f".admit {_lean_option(s.args[0])} {_lean_option(s.args[1])}"
        if s.ctor == "set":
            return f".set {s.args[0]} {lean_expr(s.args[1])}"
        return (f".branch {lean_expr(s.args[0])} {lean_iteration_block(s.blocks[0], indent + 1)} "
                f"{lean_iteration_block(s.blocks[1], indent + 1)}")
    return "[\n" + ",\n".join(pad + stmt(s) for s in stmts) + "]"


def lean_bodies(kp: KernelProgram) -> str:
    """The engines' iteration bodies as a Lean `List Body`: each its statements and its registers' declared
    values (`⟨[], []⟩` for an engine without one)."""
    return "[" + ", ".join(f"⟨{lean_iteration_block(b, 1)}, [{', '.join(map(str, regs))}]⟩"
                           for b, regs in zip(kp.bodies, kp.registers, strict=True)) + "]"


def _lean_bool(b: bool) -> str:
    return "true" if b else "false"


def _lean_option(e: LExpr | None) -> str:
    return "none" if e is None else f"(some {lean_expr(e)})"


def lean_key_lists(lists) -> str:
    """Per pool, its keys (queue or preemption keys) as a Lean `List (List Expr)`."""
    return "[" + ", ".join("[" + ", ".join(lean_expr(k) for k in keys) + "]" for keys in lists) + "]"


def lean_queue_keys(kp: KernelProgram) -> str:
    """The pools' queue keys as a Lean `List (List Expr)`."""
    return lean_key_lists(kp.queue_keys)


def lean_preempt_keys(kp: KernelProgram) -> str:
    """The pools' `preempt by` keys as a Lean `List (List Expr)`."""
    return lean_key_lists(kp.preempt_keys)


def lean_evict_keys(kp: KernelProgram) -> str:
    """The pools' `evict by` keys as a Lean `List (List Expr)`."""
    return lean_key_lists(kp.evict_keys)


def lean_services(kp: KernelProgram) -> str:
    """The program's stages as a Lean `List Service`."""
    return "[" + ", ".join(".delay" if s[0] == "delay" else f"(.{s[0]} {s[1]})" for s in kp.services) + "]"


def trace_places(kp: KernelProgram) -> list[int]:
    """`Program.traceAt`: the places of the attributes a trace's turn sets (a place past the table for one
    the program does not read); none without a trace."""
    if kp.trace is None:
        return []
    return [kp.attributes.index(a) if a in kp.attributes else len(kp.attributes) for a in TRACE_ATTRIBUTES]


def lean_trace_rows(kp: KernelProgram) -> str:
    """`Program.traceRows` as a Lean `List (List (List Nat))`."""
    rows = kp.trace.rows if kp.trace is not None else []
    return "[" + ", ".join("[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in s) + "]" for s in rows) + "]"


def lean_engines(kp: KernelProgram) -> str:
    """The program's engines' clauses as a Lean `List Engine`."""
    def engine(budget, chunk, cost, order, serve_only, admit_only, gated, granule) -> str:
        keys = "[" + ", ".join(lean_expr(k) for k in order) + "]"
        return (f"⟨{lean_expr(budget)}, {lean_expr(chunk)}, {lean_expr(cost)}, {keys}, "
                f"{_lean_option(serve_only)}, {_lean_option(admit_only)}, {'true' if gated else 'false'}, "
                f"{lean_expr(granule)}⟩")
    return "[" + ", ".join(engine(*clauses) for clauses in kp.engines) + "]"


def render_kernel_template(template: str, **context) -> str:
    """A template that includes `kernel_values.lean.j2` (a program's value), with the helpers it calls."""
    return environment().get_template(template).render(
        block=lean_block, services=lean_services, queue_keys=lean_queue_keys, preempt_keys=lean_preempt_keys,
        evict_keys=lean_evict_keys, engines=lean_engines, bodies=lean_bodies, trace_places=trace_places,
        trace_rows=lean_trace_rows,
        **context)


def render_kernel_module(kp: KernelProgram, namespace: str) -> str:
    return render_kernel_template("kernel_program.lean.j2", ns=namespace, p=kp)


# ------------------------------------------------------------------ what the interpreter recorded
@dataclass(frozen=True)
class SessionRecord:
    """One session's `Serq.Kernel.Expected`: answers (serial, turn, start, answered), observations
    (serial, turn, name index, time, value) and, of the answered turns an engine gave a token, the tokens
    (serial, turn, first token's time, its iteration's start, the last token's iteration's start, the
    turn's preemptions, the prefix its first admission with a reuse consumed), each in the order made."""

    answers: tuple[tuple[int, int, int, int], ...]
    observations: tuple[tuple[int, int, int, int, int], ...]
    tokens: tuple[tuple[int, int, int, int, int, int, int], ...] = ()


#: An engine iteration's record as `Serq.Kernel.Iteration` has it: the interpreter's IterationRecord fields.
ITERATION_FIELDS = ("start", "tokens", "prefilled", "decoders", "residents", "demand", "served", "arrived",
                    "kv_decode", "kv_prefill", "attention")
#: A record field Lean keeps scaled to stay whole: `Iteration.attention2` is twice the attention.
ITERATION_SCALE = {"attention": 2}


def rounded_division(fn: str, x: LExpr, d: int) -> LExpr:
    """`floor(x / d)`, or `ceil(x / d)` = ⌊(x + d - 1) / d⌋, over ℕ (d a positive whole constant)."""
    if fn == "ceil":
        x = LExpr("bin", ("add", x, LExpr("num", (d - 1,))))
    return LExpr("floorDiv", (x, d))


class NotNatural(ValueError):
    """The interpreter computed a value that is not a natural number: the case is outside the fragment
    (a subtraction below 0 the IR cannot show)."""


def _nat(v) -> int:
    f = float(v)
    if not math.isfinite(f) or not f.is_integer() or f < 0:
        raise NotNatural(f"not a natural number: {v}")
    return int(f)


def recorded(program: ir.Program, kp: KernelProgram, base: Path | None = None) -> list[SessionRecord]:
    """Run the program with the reference interpreter: per session (serial 0 first) what it answered
    and observed. Raises NotNatural when a recorded value is not a natural number."""
    return recorded_run(program, kp, base)[0]


class RunNotEnded(ValueError):
    """The run was still going at the horizon it was given (`recorded_run`'s `horizon`)."""


def recorded_run(program: ir.Program, kp: KernelProgram, base: Path | None = None,
                 horizon: float = math.inf) -> tuple[list[SessionRecord], list[tuple[tuple[int, ...], ...]]]:
    """`recorded`, and per stage the iterations its engine ran (`ITERATION_FIELDS` each, in the order
    run; none for a stage that is no engine). A finite `horizon`: a run still going then raises
    RunNotEnded (a program's whole run is what the kernel's is compared with)."""
    from serq.sim.engine import Engine
    E = Engine(program, seed=program.settings.seed, horizon=horizon, warmup=0.0,
               arrivals=kp.sessions if kp.gap else None,
               base_dir=str(base) if base is not None else None, log_turns=True)
    for st in E.step_stages:
        st.records = []
    E.run()
    if E.stop_reason == "horizon":
        raise RunNotEnded(f"the run was still going at time {horizon:g}")
    n = kp.sessions
    answers: list[list] = [[] for _ in range(n)]
    observations: list[list] = [[] for _ in range(n)]
    tokens: list[list] = [[] for _ in range(n)]
    # the turn log names a trace's turn by the trace session it replays (its place in the file); the
    # kernel's sessions are in the order they arrived
    serial_of = {i: k for k, i in enumerate(kp.trace.file_order)} if kp.trace is not None else None
    for (key, turn), o in sorted(E.turn_log.items(), key=lambda item: (
            serial_of[item[0][0]] if serial_of is not None else item[0][0], item[0][1])):
        serial = serial_of[key] if serial_of is not None else key
        if o[6] == "answered":
            answers[serial].append((serial, turn + 1, _nat(o[7]), _nat(o[5])))
            if o[4] is not None:  # (first_start, last_start, pre, cached, first_token): a turn an engine gave a token
                tokens[serial].append((serial, turn + 1, _nat(o[4]), _nat(o[0]), _nat(o[1]), o[2], _nat(o[3])))
    name_at = {name: i for i, name in enumerate(kp.observes)}
    for serial, turn, idx, time, value in E.observe_log:
        observations[serial].append((serial, turn, name_at[E.observe_names[idx]], _nat(time), _nat(value)))
    sessions = [SessionRecord(tuple(a), tuple(o), tuple(t)) for a, o, t in zip(answers, observations, tokens)]
    members = {name: ms[0] for name, ms in E.stage_members.items()}
    records = [tuple(tuple(_nat(getattr(r, f) * ITERATION_SCALE.get(f, 1)) for f in ITERATION_FIELDS)
                     for r in (members[s].records or ()))
               if kp.services[i][0] == "step" else () for i, s in enumerate(kp.stages)]
    return sessions, records
