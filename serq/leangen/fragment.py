"""Which programs the Lean model covers, and their Lean values.

The fragment (docs/lean.md): one step engine on the step clock running vLLM's
schedule (or FasterTransformer's phase separation on it: `only (in_phase())` in both
statements) over a request-slot pool and a block KV pool, the oracle program's
request (`examples/oracle/vllm_request.sq`), and sessions with given arrival
times (an ordered trace). `fragment()` reads those parameters off the IR and
refuses anything else, naming the construct and where it stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from serq.errors import SerqError
from serq.ir import models as ir
from serq.link import link_file
from serq.link.fold import fold
from serq.oracle import ORACLE_PROGRAM, TurnSpec, read_trace
from serq.syntax.ast import Span
from serq.target import vllm_settings

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class FragmentEngine:
    budget: int
    reqs_cap: int
    kv_blocks: int
    block_size: int
    chunk: int  # the chunk cap while more than one request runs or waits; 0: none
    caching: bool
    # FasterTransformer's phase separation: `only (in_phase())` in both statements of vLLM's schedule
    # (serq/programs/vllm_request_phased.sq)
    phased: bool = False


@dataclass
class FragmentProgram:
    engine: FragmentEngine
    sessions: list[tuple[int, list[TurnSpec]]]


def outside(what: str, loc: ir.Loc | None, base: Path, fragment: str = "the Lean fragment") -> SerqError:
    """The refusal of a construct outside a Lean fragment, at its place in the program's file."""
    span = Span(str(base / loc.file), loc.line, loc.col) if loc is not None else None
    return SerqError(f"outside {fragment}: {what}", span, "lean")


def refusal_reason(refused: SerqError) -> str:
    """What an `outside` refusal says is outside, without its "outside <fragment>: " lead."""
    lead, sep, reason = refused.message.partition(": ")
    return reason if sep and lead.startswith("outside ") else refused.message


def outside_both(kernel_refused: SerqError, engine_model_refused: SerqError) -> SerqError:
    """The refusal of a program with a step engine that neither Lean model takes: the kernel's reason
    first (its fragment is the broader one, so its reason is the one to fix first), then the engine
    model's, each at its own construct's place."""
    where = f"{engine_model_refused.span}: " if engine_model_refused.span is not None else ""
    return SerqError(f"{kernel_refused.message}; nor is it in the engine model's fragment (Serq.Exec): "
                     f"{where}{refusal_reason(engine_model_refused)}",
                     kernel_refused.span, "lean")


PHASED_PROGRAM = ORACLE_PROGRAM.with_name("vllm_request_phased.sq")


def engine_program(engine: FragmentEngine) -> Path:
    """The program an engine of the fragment is an instance of (with `oracle_inputs(engine)`)."""
    return PHASED_PROGRAM if engine.phased else ORACLE_PROGRAM


@lru_cache(maxsize=1)
def _phased_iteration() -> list:
    """The iteration body of FasterTransformer's schedule, as data without locations."""
    program = link_file(PHASED_PROGRAM, {})
    return _iteration_shape(next(s.service for s in program.stages if isinstance(s.service, ir.Step)))


def _iteration_shape(step: ir.Step) -> list:
    return [_without_locations(st.model_dump(mode="json")) for st in step.iteration]


def _without_locations(x):
    if isinstance(x, dict):
        return {k: _without_locations(v) for k, v in x.items() if k != "at"}
    if isinstance(x, list):
        return [_without_locations(v) for v in x]
    return x


def _is_phase_separated(step: ir.Step) -> bool:
    """Is the schedule vLLM's with `only (in_phase())` on both statements (the lowering's two-statement
    iteration body), `def in_phase() { running.decoding > 0 ? decoding : !decoding }` written out?"""
    if step.iteration is None:
        return False
    return _iteration_shape(step) == _phased_iteration()


def fragment(program: ir.Program, base: Path) -> FragmentProgram:
    """The program as the model runs it: its engine and the sessions of its ordered trace."""
    engine = fragment_engine(program, base)
    arrival = program.workload.arrival
    if not (isinstance(arrival, ir.Trace) and arrival.ordered):
        raise outside(f"the workload's `{arrival.kind}` arrivals: the model takes given arrival times "
                       "(`trace \"file.csv\" ordered;`)", arrival.at, base)
    return FragmentProgram(engine, read_trace(base / arrival.file))


def fragment_engine(program: ir.Program, base: Path) -> FragmentEngine:
    """The engine of a program in the fragment, whatever its workload; refuses the rest."""
    steps = [s for s in program.stages if isinstance(s.service, ir.Step)]
    if len(steps) != 1:
        where = steps[1].at if len(steps) > 1 else None
        raise outside(f"the model has one step engine; this program has {len(steps)}", where, base)
    stage = steps[0]
    if stage.count != 1:
        raise outside(f"engine family `{stage.name}[{stage.count}]`", stage.at, base)
    phased = _is_phase_separated(stage.service)
    # phase separation is vLLM's schedule with an `only`: its other settings are read as vLLM's
    vllm_view = program
    if phased:
        plain = stage.model_copy(update={"service": stage.service.model_copy(update={"iteration": None})})
        vllm_view = program.model_copy(update={"stages": [plain if s is stage else s for s in program.stages]})
    try:
        s = vllm_settings(vllm_view, stage.name)
    except SerqError as e:
        raise outside(e.message, stage.at, base) from None
    if s.get("long_prefill_token_threshold_adaptive"):
        raise outside("the adaptive long-prefill threshold", stage.at, base)
    if fold(stage.service.cost) != 1:
        raise outside(f"engine `{stage.name}` is not on the step clock (`execute (1)`)", stage.at, base)
    for other in program.stages:
        if other is stage:
            continue
        if not (isinstance(other.service, ir.Ps) and isinstance(other.service.capacity, ir.Ctx)
                and other.service.capacity.var == "present"):
            raise outside(f"stage `{other.name}`: besides the engine the model has delays (think time) only",
                           other.at, base)
    if program.gauges:
        raise outside(f"gauge `{program.gauges[0].name}`", program.gauges[0].at, base)
    _check_server(program, stage.name, base)
    engine = FragmentEngine(
        budget=s["max_num_batched_tokens"], reqs_cap=s["max_num_seqs"], kv_blocks=s["num_gpu_blocks"] - 1,
        block_size=s["block_size"], chunk=s["long_prefill_token_threshold"], caching=s["enable_prefix_caching"],
        phased=phased)
    _check_oracle_request(program, stage.name, engine, base)
    return engine


def oracle_inputs(engine: FragmentEngine) -> dict[str, str]:
    """The inputs of the oracle program (examples/oracle/vllm_request.sq) that give this engine."""
    return {
        "block_size": str(engine.block_size),
        "num_blocks": str(engine.kv_blocks + 1),
        "max_num_batched_tokens": str(engine.budget),
        "max_num_seqs": str(engine.reqs_cap),
        "long_prefill_token_threshold": str(engine.chunk),
        "enable_prefix_caching": "1" if engine.caching else "0",
    }


def _server_shape(program: ir.Program, engine: str) -> list:
    """The server's statements as data, without locations, the engine and its pools by role."""
    names = {engine: "<engine>"}
    for pool in program.pools:
        if pool.admit_via == engine:
            names[pool.name] = "<slots>"
        elif pool.memory_of == engine:
            names[pool.name] = "<kv>"

    def by_role(x):
        if isinstance(x, dict):
            return {k: by_role(v) for k, v in x.items()}
        if isinstance(x, list):
            return [by_role(v) for v in x]
        if isinstance(x, str):
            return names.get(x, x)
        return x
    request = program.server[:len(program.server) - len(trailing_observes(program))]
    return [by_role(_without_locations(st.model_dump(mode="json"))) for st in request]


def trailing_observes(program: ir.Program) -> list[ir.ObserveStmt]:
    """The `observe` statements that end the server, after its request: they read and do not act,
    and record once per answered turn, which is what the model's outcomes give."""
    k = len(program.server)
    while k > 0 and isinstance(program.server[k - 1], ir.ObserveStmt):
        k -= 1
    return list(program.server[k:])


@lru_cache(maxsize=64)
def _oracle_server_shape(engine: FragmentEngine) -> list:
    oracle = link_file(ORACLE_PROGRAM, oracle_inputs(engine))
    step = next(s.name for s in oracle.stages if isinstance(s.service, ir.Step))
    return _server_shape(oracle, step)


def _check_oracle_request(program: ir.Program, engine: str, frag: FragmentEngine, base: Path) -> None:
    """The model's request is the oracle program's, statement for statement (up to the names of the
    engine and its pools, and `observe`s after it): a server that differs in any expression is not
    what the model runs, and a statement proved about the model would not be about it."""
    mine, theirs = _server_shape(program, engine), _oracle_server_shape(frag)
    for k, (a, b) in enumerate(zip(mine, theirs)):
        if a != b:
            raise outside(f"the server's statement {k + 1} is not the oracle request's "
                           f"({ORACLE_PROGRAM.name}: the model runs that request)", program.server[k].at, base)
    if len(mine) != len(theirs):
        where = program.server[len(theirs)].at if len(mine) > len(theirs) else None
        raise outside(f"the server has {len(mine)} statements, the oracle request {len(theirs)} "
                       f"({ORACLE_PROGRAM.name}: the model runs that request)", where, base)


def _check_server(program: ir.Program, engine: str, base: Path) -> None:
    """The server is the oracle program's request: one hold of the request slot and the KV
    pool, whose body prefills then decodes on the engine, growing the KV."""
    holds = [st for st in ir.walk_stmts(program.server) if isinstance(st, ir.HoldStmt)]
    if len(holds) != 1:
        raise outside(f"the server holds {len(holds)} times; the model's request holds once", None, base)
    hold = holds[0]
    pools = [p.pool.pool for p in hold.pools]
    kinds = {p.name: ("slots" if p.admit_via == engine else "kv" if p.memory_of == engine else "other")
             for p in program.pools}
    if sorted(kinds[p] for p in pools) != ["kv", "slots"]:
        raise outside("the request's hold takes the engine's request slot and KV pool, nothing else",
                       hold.at, base)
    runs = [st for st in ir.walk_stmts(hold.body) if isinstance(st, ir.RunStmt)]
    modes = [r.mode for r in runs]
    if modes != ["prefill", "decode"] or any(r.growing is None for r in runs):
        where = runs[0].at if runs else hold.at
        raise outside("the request's body runs one growing prefill then one growing decode", where, base)
    for st in ir.walk_stmts(program.server):
        if isinstance(st, (ir.ForkStmt, ir.JoinStmt, ir.LoopStmt, ir.WhileStmt, ir.ChooseStmt, ir.GrowStmt,
                           ir.LoadStmt, ir.ReleaseStmt, ir.DropStmt, ir.EndStmt)):
            raise outside(f"`{st.kind}` in the server", st.at, base)




def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["lean_bool"] = lambda b: "true" if b else "false"
    return env


def render_program(frag: FragmentProgram, namespace: str) -> str:
    return environment().get_template("program.lean.j2").render(ns=namespace, p=frag)
