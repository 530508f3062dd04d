"""A program's claims as Lean statements (`scripts/gen_lean_claims.py`, `serq lean check`).

For a program in the Lean fragment (its engine: `fragment_engine`) whose workload is a
*family* — open arrivals (`poisson`, a constant `renewal`) or `batch`, single-turn
sessions whose attributes are constants or draws — each claim over iterations becomes a
statement of `lean/Serq/Claims.lean`: `EveryIteration engine family p` or
`SomeIteration engine family p`, where `family` accepts the session lists of the
program's family (at most 500 sessions; the arrival steps the workload allows; a drawn
attribute any natural number; the sessions that satisfy `given`) and `p` is the claim's
expression over an iteration `Record`, computed over ℤ as the interpreter computes it.

Each statement is a definition named `<claim>_<digest>`, the digest being that of the
statement's own text: a proof in `ClaimsProved.lean` names the definition, so it stops
type-checking when the claim, the engine or the family changes, and the freshness check
(`stale_claims`) names the claim. The module also records the digest of the whole IR.

A program the engine model does not take but the kernel fragment does (a granule, an `execute`
cost, another server) has its claims over iterations and at end stated about its own run in the
kernel interpreter (`kernel_claims_module`; at end: `Serq.Kernel.AtEndOfRun`, the aggregates of the
run's observed values and responses); one outside both is refused with both reasons.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from serq.errors import SerqError
from serq.ir import models as ir
from serq.leangen.fragment import (FragmentEngine, environment, fragment_engine, outside, outside_both,
                                   refusal_reason, trailing_observes)
from serq.leangen.kernel import KernelProgram, kernel_program, render_kernel_template
from serq.link import link_file
from serq.link.fold import fold

#: The most sessions a workload of the family has (the reference, *Claims*).
MAX_SESSIONS = 500
PAPERS = Path("examples/papers")
GENERATED = PAPERS / "Papers" / "Claims"
PROOFS = PAPERS / "ClaimsProved.lean"

#: The context variables of an iteration record, and the Lean field each reads.
RECORD_FIELDS = {
    "now": "start", "tokens": "tokens", "prefilled": "prefilled", "decoders": "decoders",
    "residents": "residents", "kv_decode": "kvDecode", "kv_prefill": "kvPrefill", "demand": "demand",
    "served": "served", "arrived": "arrived",
}
#: The turn attributes the model's sessions carry, and the Lean field each is.
TURN_FIELDS = {"new": "new", "out": "out", "forced": "forced"}
_FORMS = {"every_iteration": "EveryIteration", "some_iteration": "SomeIteration", "at_end": "AtEnd"}
#: A claim at end's aggregates, and the Lean function of a list of observed values each is.
AGGREGATES = {"total": "sumNat", "count": "countNat", "largest": "largestNat", "smallest": "smallestNat",
              "prefix_total": "prefixTotal"}
#: The client's statistics a claim at end reads, as an answered turn's value (single-turn sessions:
#: the turn starts when the session arrives; an answer is the end of its iteration, `last + 1`).
CLIENT_VALUES = {"response": "o.last + 1 - arriveAt ss o.sid", "ttft": "o.first + 1 - arriveAt ss o.sid"}


@dataclass(frozen=True)
class Statement:
    claim: str
    form: str          # every_iteration | some_iteration
    source: str        # the claim as written
    ident: str         # the Lean definition: `<claim>_<digest>`
    digest: str
    body: str          # the Lean Prop
    at: ir.Loc | None


@dataclass(frozen=True)
class ClaimsModule:
    program: Path
    namespace: str     # also the module's name, e.g. `Papers.Claims.Sarathi`
    ir_digest: str
    engine: FragmentEngine
    session_test: str  # Lean Bool over `k : Nat` (the session's index) and `s : Session`
    index_param: str   # `k` when the test reads the index (renewal arrivals), else `_k`
    family_doc: str
    statements: list[Statement]
    #: (name, Lean value of one answered turn `o`, its turn `t`) for each observation a claim reads
    observations: list[tuple[str, str]] = field(default_factory=list)

    def text(self) -> str:
        return environment().get_template("claims.lean.j2").render(m=self)


def _whole(v: float) -> bool:
    """Whether a folded constant is a whole number (the model computes over ℕ and ℤ)."""
    return math.isfinite(v) and v == int(v)


# --------------------------------------------------------------------------- expressions

class _Translate:
    """An IR expression as Lean text, typed `Int` or `Bool` (serQ reads a non-zero number as true)."""

    def __init__(self, base: Path, names: dict[str, str], what: str,
                 observed: Callable[[ir.Observed], str] | None = None) -> None:
        self.base, self.names, self.what, self.observed = base, names, what, observed

    def outside(self, why: str, e: ir.Node, at: ir.Loc | None) -> SerqError:
        return outside(f"{self.what}: {why}", getattr(e, "at", None) or at, self.base)

    def int_(self, e: ir.Expr, at: ir.Loc | None) -> str:
        text, ty = self.expr(e, at)
        return text if ty == "int" else f"(if {text} then (1 : Int) else 0)"

    def bool_(self, e: ir.Expr, at: ir.Loc | None) -> str:
        text, ty = self.expr(e, at)
        return text if ty == "bool" else f"({text} != 0)"

    def expr(self, e: ir.Expr, at: ir.Loc | None) -> tuple[str, str]:
        v = fold(e)
        if v is not None:
            if not _whole(v):
                raise self.outside(f"the constant {v:g}: the model computes over whole numbers", e, at)
            return (f"({int(v)} : Int)", "int")
        if isinstance(e, ir.Ctx):
            if not self.names:
                raise self.outside(f"`{e.var}`: in the model a claim at end reads constants and aggregates of "
                                   "observations", e, at)
            if e.var not in self.names:
                raise self.outside(f"`{e.var}` is not part of the model's record here", e, at)
            return (f"({self.names[e.var]} : Int)", "int")
        if isinstance(e, ir.Attr):
            if e.name not in self.names:
                raise self.outside(f"attribute `{e.name}` is not one the model's sessions carry", e, at)
            return (f"({self.names[e.name]} : Int)", "int")
        if isinstance(e, ir.Unary):
            if e.op == "neg":
                return (f"(-{self.int_(e.arg, at)})", "int")
            return (f"(!{self.bool_(e.arg, at)})", "bool")
        if isinstance(e, ir.Binary):
            if e.op in ("add", "sub", "mul"):
                sym = {"add": "+", "sub": "-", "mul": "*"}[e.op]
                return (f"({self.int_(e.lhs, at)} {sym} {self.int_(e.rhs, at)})", "int")
            if e.op in ("and", "or"):
                sym = {"and": "&&", "or": "||"}[e.op]
                return (f"({self.bool_(e.lhs, at)} {sym} {self.bool_(e.rhs, at)})", "bool")
            if e.op in ("eq", "ne"):
                sym = {"eq": "==", "ne": "!="}[e.op]
                return (f"({self.int_(e.lhs, at)} {sym} {self.int_(e.rhs, at)})", "bool")
            if e.op in ("lt", "le", "gt", "ge"):
                sym = {"lt": "<", "le": "≤", "gt": ">", "ge": "≥"}[e.op]
                return (f"(decide ({self.int_(e.lhs, at)} {sym} {self.int_(e.rhs, at)}))", "bool")
            if e.op == "mod":
                # by a positive whole constant: ℤ's `%` (`Int.emod`) is then the interpreter's (Python's) `%`
                d = fold(e.rhs)
                if d is None or not _whole(d) or d <= 0:
                    raise self.outside("`%` by what is not a positive whole constant", e, at)
                return (f"({self.int_(e.lhs, at)} % ({int(d)} : Int))", "int")
            raise self.outside(f"`{e.op}`: over whole numbers it is not the interpreter's real division", e, at)
        if isinstance(e, ir.Cond):
            return (f"(if {self.bool_(e.test, at)} then {self.int_(e.then, at)} else {self.int_(e.otherwise, at)})",
                    "int")
        if isinstance(e, ir.Call) and e.fn in ("min", "max") and len(e.args) == 2:
            return (f"({e.fn} {self.int_(e.args[0], at)} {self.int_(e.args[1], at)})", "int")
        if isinstance(e, ir.Observed) and self.observed is not None:
            return (f"(({self.observed(e)} : Nat) : Int)", "int")
        raise self.outside(f"`{getattr(e, 'kind', type(e).__name__)}` is outside what the model computes", e, at)


# --------------------------------------------------------------------------- the family

def _attribute_tests(program: ir.Program, base: Path) -> tuple[list[str], list[str]]:
    """Lean tests of a turn `t` for the workload's sets, and a description of each."""
    wl = program.workload
    tests, doc = ["t.think == 0"], []
    seen: dict[str, ir.SetStmt] = {}
    for st in [*wl.init, *wl.turn]:
        if not isinstance(st, ir.SetStmt):
            raise outside(f"`{st.kind}` in the workload: a session of the family only sets its attributes",
                           getattr(st, "at", None), base)
        if st.name in seen:
            raise outside(f"attribute `{st.name}` set twice in the workload", st.at, base)
        seen[st.name] = st
    context = seen.pop("context", None)
    if context is None or fold(context.value) != 0:
        raise outside("the model's sessions start with `set context = 0;`", context and context.at, base)
    for name in ("new", "out", "forced"):
        st = seen.pop(name, None)
        if st is None:
            if name == "forced":
                tests.append("t.forced == false")
                doc.append("no forced miss")
                continue
            raise outside(f"the workload does not set `{name}`, which the model's turn carries", None, base)
        v = fold(st.value)
        if v is None:
            if not any(isinstance(x, ir.Draw) for x in ir.walk(st.value)):
                raise outside(f"`{name}` is computed, not constant or drawn", st.at, base)
            doc.append(f"`{name}` any natural number (drawn)")
            continue
        if not _whole(v) or v < 0:
            raise outside(f"`{name}` = {v:g} is not a natural number", st.at, base)
        if name == "forced":
            tests.append(f"t.forced == {'true' if v else 'false'}")
            doc.append("a forced miss" if v else "no forced miss")
        else:
            tests.append(f"t.{name} == {int(v)}")
            doc.append(f"`{name}` = {int(v)}")
    if seen:
        name = sorted(seen)[0]
        raise outside(f"attribute `{name}`: the model's sessions carry context, new, out and forced only",
                       seen[name].at, base)
    return tests, doc


def _session_test(program: ir.Program, base: Path) -> tuple[str, str, bool]:
    """A session of the family as a Lean test, its description, and whether it reads the index `k`."""
    wl = program.workload
    if [s.kind for s in wl.session] != ["turn"]:
        raise outside("the family's sessions are single-turn (`turn;`)", None, base)
    arrival = wl.arrival
    if isinstance(arrival, ir.Poisson):
        arrive, arrive_doc = "true", "any arrival steps (Poisson)"
    elif isinstance(arrival, ir.Batch):
        arrive, arrive_doc = "s.arrive == 0", "every session at step 0 (batch)"
    elif isinstance(arrival, ir.Renewal):
        gap = fold(arrival.gap)
        if gap is None or not _whole(gap) or gap <= 0:
            raise outside("a renewal gap in the model is a constant whole number of steps", None, base)
        arrive, arrive_doc = f"s.arrive == (k + 1) * {int(gap)}", f"the k-th session (from 0) at step (k + 1) * {int(gap)}"
    else:
        raise outside(f"`{arrival.kind}` arrivals: a claim's family is Poisson, renewal or batch arrivals",
                       None, base)
    tests, doc = _attribute_tests(program, base)
    turn = f"singleTurn (fun t => {' && '.join(tests)}) s"
    test = turn if arrive == "true" else f"{arrive} && {turn}"
    return test, f"{arrive_doc}; one turn each, no think time; " + ", ".join(doc), isinstance(arrival, ir.Renewal)


def _given_test(claim: ir.Claim, base: Path) -> str | None:
    if claim.given is None:
        return None
    names = {k: f"t.{v}" for k, v in TURN_FIELDS.items() if k != "forced"}
    return _Translate(base, names, f"claim `{claim.name}`'s given").bool_(claim.given, claim.at)


# --------------------------------------------------------------------------- statements

def _module_name(path: Path) -> str:
    return "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", path.stem) if w)


def claims_module(path: Path, inputs: dict[str, str] | None = None) -> "ClaimsModule | KernelClaimsModule":
    """The generated Lean module of a program's claims; SerqError when it is outside the fragment."""
    path = Path(path)
    program = link_file(path, inputs or {})
    base = path.parent
    try:
        engine = fragment_engine(program, base)
    except SerqError as engine_model_refused:
        # a program the engine model does not take (a granule, an `execute` cost, another server, ...):
        # its claims about its own run in the kernel interpreter
        try:
            return kernel_claims_module(path, program, refusal_reason(engine_model_refused))
        except SerqError as kernel_refused:
            raise outside_both(kernel_refused, engine_model_refused) from None
    session_test, family_doc, reads_index = _session_test(program, base)
    name = _module_name(path)
    record_names = {var: f"r.{field}" for var, field in RECORD_FIELDS.items()}
    step = next(s.name for s in program.stages if isinstance(s.service, ir.Step))
    observations = _Observations(program, base)
    statements = []
    for claim in program.claims:
        if claim.form == "some_iteration" and _draws(program):
            raise outside(f"claim `{claim.name}`: a `some iteration` claim is stated for a workload that does not "
                           "draw (its witness is one path); this workload draws", claim.at, base)
        what = f"claim `{claim.name}`"
        if claim.form == "at_end":
            used: list[str] = []
            pred = _Translate(base, {}, what, observed=lambda e: observations.aggregate(e, claim, used)) \
                .bool_(claim.value, claim.at)
            reads = "|".join(f"{n}={observations.values[n]}" for n in sorted(set(used)))
            p_args = "ss m"
        else:
            if claim.stage is None or claim.stage.stage != step:
                raise outside(f"{what} is about a stage the model does not have", claim.at, base)
            pred = _Translate(base, record_names, what).bool_(claim.value, claim.at)
            reads, p_args = "", "r"
        given = _given_test(claim, base)
        fam = "family" if given is None else f"(fun ss => family ss && everySession (fun _ s => singleTurn (fun t => {given}) s) 0 ss)"
        body = f"{_FORMS[claim.form]} engine {fam} (fun {p_args} => {pred})"
        stated = f"{engine}|{session_test}|{body}" + (f"|{reads}" if reads else "")  # what the statement means
        digest = hashlib.sha256(stated.encode()).hexdigest()[:12]
        statements.append(Statement(claim.name, claim.form, _claim_source(path, claim), f"{claim.name}_{digest}",
                                    digest, body, claim.at))
    ir_digest = hashlib.sha256(ir.to_json(program).encode()).hexdigest()
    return ClaimsModule(path, f"Papers.Claims.{name}", ir_digest, engine, session_test,
                        "k" if reads_index else "_k", family_doc, statements, observations.used())


#: The fields of the kernel's iteration record (`Serq.Kernel.Iteration`) a claim reads (`attention` not:
#: the record keeps it doubled, `attention2`, and a claim's comparison of a half is not over ℕ).
KERNEL_RECORD_FIELDS = {
    "now": "start", "tokens": "tokens", "prefilled": "prefilled", "decoders": "decoders",
    "residents": "residents", "demand": "demand", "served": "served", "arrived": "arrived",
    "kv_decode": "kvDecode", "kv_prefill": "kvPrefill",
}
_KERNEL_FORMS = {"every_iteration": "EveryIterationOfRun", "some_iteration": "SomeIterationOfRun"}
#: The fuel of a kernel claim's run: enough for the paper programs' workloads (the statement says the run
#: ended on its own, so too little fuel makes it false, not vacuous).
CLAIM_RUN_FUEL = 1000


@dataclass(frozen=True)
class KernelClaimsModule:
    """The claims of a program of the kernel fragment the engine model does not take (a granule, an
    `execute` cost, another server), each stated about the program's own run
    (`Serq.Kernel.EveryIterationOfRun`): its bundled workload, to its end."""

    program: Path
    namespace: str
    ir_digest: str
    kp: KernelProgram
    stage: int          # the claims' engine's stage index
    stage_name: str
    fuel: int
    engine_model_refusal: str  # why the engine model does not take the program (the generated doc says it)
    statements: list[Statement]

    @property
    def at_end(self) -> bool:
        """Whether a claim is at end (the module then imports `Serq.KernelAtEnd`)."""
        return any(st.form == "at_end" for st in self.statements)

    def text(self) -> str:
        return render_kernel_template("kernel_claims.lean.j2", m=self, p=self.kp)

    def program_text(self) -> str:
        """The program's Lean value (what a statement's digest covers)."""
        text = self.text()
        return text[text.index("def program"):text.index("/-- The claims' engine")]


def kernel_claims_module(path: Path, program: ir.Program, engine_model_refusal: str) -> KernelClaimsModule:
    """A program of the kernel fragment whose claims the engine model cannot state: every (some) iteration
    of the run of its bundled workload, to its end, or the run's end (`at end`: the aggregates of the
    run's observed values and responses, `Serq.Kernel.AtEndOfRun`)."""
    base = path.parent
    kp = kernel_program(program, base)
    names = [s.name for s in program.stages]
    record_names = {var: f"r.{field}" for var, field in KERNEL_RECORD_FIELDS.items()}
    observations = _KernelObservations(kp.observes, base)
    pending = []
    for claim in program.claims:
        what = f"claim `{claim.name}`"
        if claim.form not in (*_KERNEL_FORMS, "at_end"):
            raise outside(f"{what}: the form `{claim.form}`", claim.at, base)
        if claim.given is not None:
            raise outside(f"{what}: `given` on a claim about the program's own run", claim.at, base)
        if claim.form == "at_end":
            pred = _Translate(base, {}, what, observed=lambda e, c=claim: observations.aggregate(e, c)) \
                .bool_(claim.value, claim.at)
            pending.append((claim, None, pred))
            continue
        if claim.stage is None or claim.stage.index is not None or claim.stage.stage not in names \
                or not isinstance(program.stages[names.index(claim.stage.stage)].service, ir.Step):
            raise outside(f"{what} is about a stage the model does not have", claim.at, base)
        pred = _Translate(base, record_names, what).bool_(claim.value, claim.at)
        pending.append((claim, names.index(claim.stage.stage), pred))
    stages = {s for _, s, _ in pending if s is not None}
    if len(stages) > 1:
        first = next(s for _, s, _ in pending if s is not None)
        raise outside("claims about several engines", next(c for c, s, _ in pending if s not in (None, first)).at, base)
    stage = stages.pop() if stages else 0
    ir_digest = hashlib.sha256(ir.to_json(program).encode()).hexdigest()
    module = KernelClaimsModule(path, f"Papers.Claims.{_module_name(path)}", ir_digest, kp, stage, names[stage],
                                CLAIM_RUN_FUEL, engine_model_refusal, [])
    value = module.program_text()
    for claim, _, pred in pending:
        if claim.form == "at_end":
            body = f"AtEndOfRun program fuel (fun m => {pred})"
        else:
            body = f"{_KERNEL_FORMS[claim.form]} program stage fuel (fun r => {pred})"
        digest = hashlib.sha256(f"{value}|{stage}|{CLAIM_RUN_FUEL}|{body}".encode()).hexdigest()[:12]
        module.statements.append(Statement(claim.name, claim.form, _claim_source(path, claim),
                                           f"{claim.name}_{digest}", digest, body, claim.at))
    return module


class _KernelObservations:
    """The values a claim at end of a kernel program's run aggregates: every value its `observe`s
    recorded (`Serq.Kernel.observedValues`, by the observe name's index), and the client's `response` of
    every answered turn (`Serq.Kernel.responses`) unless the program observes a `response` of its own."""

    def __init__(self, observes: list[str], base: Path) -> None:
        self.observes, self.base = observes, base

    def aggregate(self, e: ir.Observed, claim: ir.Claim) -> str:
        if e.name in self.observes:
            values = f"observedValues {self.observes.index(e.name)} m.threads"
        elif e.name == "response":
            values = "responses m.threads"
        else:
            raise outside(f"claim `{claim.name}`: `{e.fn}({e.name})`: at the end of a kernel program's run "
                           "the model records the client's response and the program's observes",
                           getattr(e, "at", None) or claim.at, self.base)
        return f"Serq.{AGGREGATES[e.fn]} ({values})"


class _Observations:
    """The values a claim at end aggregates: the client's (`response`, `ttft`) and the server's
    `observe`s after its request, one per answered turn, as Lean functions of the outcomes."""

    def __init__(self, program: ir.Program, base: Path) -> None:
        self.base = base
        self.values: dict[str, str] = dict(CLIENT_VALUES)
        self.wanted: list[str] = []
        observes = trailing_observes(program)
        written: set[str] = set()
        for st in observes:
            # the program's `observe response` is its own value: it replaces the client's in the claims
            if st.name in written:
                raise outside(f"observe `{st.name}` written twice: the model records one value per turn",
                               st.at, base)
            written.add(st.name)
            value = self._nat(st.value, st)
            self.values[st.name] = f"match sessionTurn ss o.sid o.turn with | some t => {value} | none => 0"

    def _nat(self, e: ir.Expr, st: ir.ObserveStmt) -> str:
        """An observed value in the model: a natural number built from the turn's `new` and `out` and
        whole constants with +, *, min and max (what it records for every answered turn)."""
        v = fold(e)
        if v is not None:
            if not _whole(v) or v < 0:
                raise outside(f"observe `{st.name}`: the constant {v:g} is not a natural number", st.at, self.base)
            return str(int(v))
        if isinstance(e, ir.Attr) and e.name in ("new", "out"):
            return f"t.{e.name}"
        if isinstance(e, ir.Binary) and e.op in ("add", "mul"):
            sym = "+" if e.op == "add" else "*"
            return f"({self._nat(e.lhs, st)} {sym} {self._nat(e.rhs, st)})"
        if isinstance(e, ir.Call) and e.fn in ("min", "max") and len(e.args) == 2:
            return f"({e.fn} {self._nat(e.args[0], st)} {self._nat(e.args[1], st)})"
        raise outside(f"observe `{st.name}`: in the model an observed value is a natural number built from the "
                       "turn's `new` and `out` and whole constants with +, *, min and max", st.at, self.base)

    def aggregate(self, e: ir.Observed, claim: ir.Claim, used: list[str]) -> str:
        if e.name not in self.values:
            raise outside(f"claim `{claim.name}` reads `{e.fn}({e.name})`: the model records the client's "
                           "response and ttft and the observes after the server's request", claim.at, self.base)
        used.append(e.name)
        if e.name not in self.wanted:
            self.wanted.append(e.name)
        return f"{AGGREGATES[e.fn]} (obs_{e.name} ss m.outcomes)"

    def used(self) -> list[tuple[str, str]]:
        return [(n, self.values[n]) for n in self.wanted]


def _draws(program: ir.Program) -> bool:
    """Whether the workload draws: Poisson arrivals, or a draw in an attribute."""
    wl = program.workload
    if isinstance(wl.arrival, ir.Poisson):
        return True
    return any(isinstance(x, ir.Draw) for st in [*wl.init, *wl.turn] for x in ir.walk(st))


def _claim_source(path: Path, claim: ir.Claim) -> str:
    """The claim's text as written (from its line to its `;`)."""
    if claim.at is None:
        return claim.name
    lines = path.read_text().splitlines()[claim.at.line - 1:]
    text = ""
    for line in lines:
        text += (" " if text else "") + line.strip()
        if ";" in line:
            break
    return text


# --------------------------------------------------------------------------- files and checks

def paper_programs(root: Path) -> list[Path]:
    return sorted((root / PAPERS).glob("*.sq"))


def generated_path(root: Path, program: Path) -> Path:
    return root / GENERATED / f"{_module_name(program)}.lean"


def write_modules(root: Path) -> list[Path]:
    written = []
    for program in paper_programs(root):
        module = claims_module(program)
        out = generated_path(root, program)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(module.text())
        written.append(out)
    return written


@dataclass(frozen=True)
class ClaimProblem:
    program: Path
    claim: str
    message: str
    at: ir.Loc | None

    def render(self, root: Path) -> str:
        where = (f"{self.program.relative_to(root)}:{self.at.line}:{self.at.col}" if self.at
                 else str(self.program.relative_to(root)))
        return f"{where}: error: claim `{self.claim}`: {self.message}"


def stale_claims(root: Path) -> list[ClaimProblem]:
    """Every claim of every paper program must have its generated statement, current, and a theorem in
    ClaimsProved.lean whose type is that statement; what falls short, claim by claim."""
    problems: list[ClaimProblem] = []
    proofs_path = root / PROOFS
    proofs = proofs_path.read_text() if proofs_path.exists() else ""
    theorem_types = re.findall(r"theorem\s+[^\s:(]+[^:]*:\s*([A-Za-z_.][\w.]*)\s*:=", proofs)
    for program in paper_programs(root):
        try:
            module = claims_module(program)
        except SerqError as e:
            problems.append(ClaimProblem(program, "*", f"outside the Lean fragment: {e.message}", None))
            continue
        out = generated_path(root, program)
        current = out.read_text() if out.exists() else None
        fresh = current == module.text()
        for st in module.statements:
            full = f"{module.namespace}.{st.ident}"
            if not fresh and (current is None or f"def {st.ident} " not in current):
                problems.append(ClaimProblem(program, st.claim, f"its Lean statement {full} is not generated "
                                             f"(run `python3 scripts/gen_lean_claims.py`)", st.at))
            if full not in theorem_types:
                older = [t for t in theorem_types if t.startswith(f"{module.namespace}.{st.claim}_")]
                why = (f"the proof in {PROOFS} is of an older statement ({older[0]}); the claim, the engine or "
                       f"the workload changed: prove {full}" if older
                       else f"no theorem in {PROOFS} has the type {full}")
                problems.append(ClaimProblem(program, st.claim, why, st.at))
        if not fresh and not any(p.program == program for p in problems):
            problems.append(ClaimProblem(program, "*", f"{out.relative_to(root)} is not what the program generates "
                                         f"(run `python3 scripts/gen_lean_claims.py`)", None))
    return problems
