"""Differential testing: the Python interpreter against the Lean model.

A *case* is a program of the fragment (the oracle program's engine with its
settings) and a workload (sessions with given arrival steps and turns). The
interpreter runs it; what it observed (per turn: first-token step, last-token
step, preemptions, prefix hit at first admission; per iteration: the record a
claim reads) becomes a Lean theorem that the model's run agrees
(`Serq.agrees`, `decide +kernel`). Theorems are checked in batches, one Lean
process per batch, two at once. A case that fails is shrunk — candidates
checked in batches too — and written out as a `.sq` program with its trace and
an instance file that `serq run` reruns.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from serq.ir import models as ir
from serq.leangen.fragment import (FragmentEngine, FragmentProgram, engine_program, environment, fragment,
                                   oracle_inputs)
from serq.link import link_file
from serq.oracle import TurnSpec, write_trace

Sessions = tuple[tuple[int, tuple[TurnSpec, ...]], ...]


@dataclass(frozen=True)
class Case:
    engine: FragmentEngine
    sessions: Sessions

    def size(self) -> int:
        """What shrinking makes smaller: sessions, turns, then the numbers."""
        turns = sum(len(ts) for _, ts in self.sessions)
        numbers = sum(a + sum(t.new + t.out + t.think for t in ts) for a, ts in self.sessions)
        return turns * 10_000 + numbers


@dataclass(frozen=True)
class Observed:
    """What the interpreter saw: per turn (session, turn, first, last, preemptions, cached), and the
    step stage's iteration records (start, tokens, prefilled, decoders, residents, kv_decode,
    kv_prefill, demand, served, arrived)."""

    outcomes: tuple[tuple[int, int, int, int, int, int], ...]
    records: tuple[tuple[int, ...], ...]


Interpreter = Callable[[ir.Program, Path], Observed]


class _Trace:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = [(a, list(ts)) for a, ts in sessions]


def materialize(case: Case, folder: Path) -> Path:
    """Write the case as a program (the oracle program, or its phase-separated twin), its trace and
    its instance file."""
    folder.mkdir(parents=True, exist_ok=True)
    source = engine_program(case.engine)
    program = folder / source.name
    shutil.copyfile(source, program)
    write_trace(_Trace(case.sessions), folder / "vllm_request.csv")
    (folder / "instance.json").write_text(json.dumps(oracle_inputs(case.engine), indent=2, sort_keys=True) + "\n")
    return program


def link_case(case: Case, folder: Path) -> ir.Program:
    path = materialize(case, folder)
    program = link_file(path, oracle_inputs(case.engine))
    frag = fragment(program, folder)
    # the program's Lean value is the case itself: the templates read it off the IR
    assert frag.engine == case.engine, (frag.engine, case.engine)
    return program


def interpreter(program: ir.Program, base: Path) -> Observed:
    """The reference interpreter's run of a case, as the Lean statement reads it."""
    from serq.sim.oracle_run import run_program
    run = run_program(program, base)
    # the model records an outcome for an answered turn only (not for one rejected, refused or waiting)
    outcomes = tuple(sorted((sid, turn, _nat(o.first), _nat(o.last), o.preemptions, _nat(o.cached))
                            for (sid, turn), o in run.turns.items() if o.ended == "answered"))
    records = tuple((_nat(r.start), _nat(r.tokens), _nat(r.prefilled), _nat(r.decoders), _nat(r.residents),
                     _nat(r.kv_decode), _nat(r.kv_prefill), _nat(r.demand), _nat(r.served), _nat(r.arrived))
                    for r in run.records)
    return Observed(outcomes, records)


def _nat(v) -> int:
    """The model computes over ℕ: the interpreter's values on these programs are whole and not negative."""
    if v is None:
        return 0
    f = float(v)
    if not f.is_integer() or f < 0:
        raise ValueError(f"not a natural number: {v}")
    return int(f)


def observe(case: Case, interpret: Interpreter = interpreter) -> Observed:
    with tempfile.TemporaryDirectory(prefix="serq-drt-") as d:
        program = link_case(case, Path(d))
        return interpret(program, Path(d))


def fuel_for(case: Case, observed: Observed) -> int:
    last = max((o[3] for o in observed.outcomes), default=0)
    first_arrival = max((a for a, _ in case.sessions), default=0)
    return 4 * (max(last, first_arrival) + 10 + len(observed.records))


def case_ident(i: int) -> str:
    """A case's namespace in a batch (`_case_at` finds it back from a diagnostic's line)."""
    return f"c{i}"


def render_batch(items: list[tuple[int, Case, Observed]], title: str) -> str:
    rendered = []
    for i, case, obs in items:
        rendered.append({
            "ident": case_ident(i),
            "program": FragmentProgram(case.engine, [(a, list(ts)) for a, ts in case.sessions]),
            "expected": list(obs.outcomes),
            "records": list(obs.records),
            "fuel": fuel_for(case, obs),
        })
    return environment().get_template("drt.lean.j2").render(title=title, cases=rendered)


@dataclass
class Divergence:
    case_id: int
    case: Case
    observed: Observed
    message: str


#: Cases per Lean process at most. Each process costs ~35 s to start (importing the library), then
#: ~0.4 s per case at a steady ~3.1 GB: few large batches are fastest.
MAX_BATCH = 500


def check_in_lean(items: list[tuple[int, Case, Observed]], *, batch_size: int | None = None, jobs: int = 2,
                  folder: Path | None = None, render=None) -> list[Divergence]:
    """Check every case's theorem; the cases whose theorem does not hold. By default the cases are
    split evenly over `jobs` processes (at most MAX_BATCH each). `render(batch, title)` writes a
    batch's Lean file (default: `render_batch`, the engine model's; serq.leangen.kernel_drt has the
    kernel's), one `namespace c<id>` per case."""
    from serq.leangen.build import compile_files
    render = render or render_batch
    folder = folder or Path(tempfile.mkdtemp(prefix="serq-drt-lean-"))
    if batch_size is None:
        batch_size = min(MAX_BATCH, max(1, -(-len(items) // jobs)))
    batches = [items[k:k + batch_size] for k in range(0, len(items), batch_size)]
    files = []
    for n, batch in enumerate(batches):
        path = folder / f"Drt{n}.lean"
        path.write_text(render(batch, f"differential batch {n}"))
        files.append(path)
    results = compile_files(files, jobs=jobs)
    by_id = {i: (case, obs) for i, case, obs in items}
    failures: list[Divergence] = []
    for path, result in zip(files, results):
        if result.ok:
            continue
        text = path.read_text().splitlines()
        failed_ids: set[int] = set()
        for d in result.diagnostics:
            if d.severity != "error":
                continue
            case_id = _case_at(text, d.line)
            if case_id is None:
                raise RuntimeError(f"{path}:{d.line}: {d.message}")  # the batch itself is broken
            if case_id not in failed_ids:
                failed_ids.add(case_id)
                case, obs = by_id[case_id]
                failures.append(Divergence(case_id, case, obs, d.message))
    return failures


def _case_at(lines: list[str], line: int) -> int | None:
    for k in range(min(line, len(lines)) - 1, -1, -1):
        m = re.match(r"namespace c(\d+)$", lines[k].strip())
        if m:
            return int(m.group(1))
    return None


def shrink_candidates(case: Case) -> Iterable[Case]:
    """Smaller cases: a session or a turn fewer, then smaller numbers."""
    sessions = list(case.sessions)
    for k in range(len(sessions)):
        if len(sessions) > 1:
            yield replace(case, sessions=tuple(sessions[:k] + sessions[k + 1:]))
    for k, (arrive, turns) in enumerate(sessions):
        if len(turns) > 1:
            yield replace(case, sessions=tuple(sessions[:k] + [(arrive, turns[:-1])] + sessions[k + 1:]))
        if arrive > 0:
            yield replace(case, sessions=tuple(sessions[:k] + [(arrive // 2, turns)] + sessions[k + 1:]))
        for j, t in enumerate(turns):
            for field, low in (("new", 1), ("out", 1), ("think", 0)):
                v = getattr(t, field)
                if v > low:
                    smaller = replace(t, **{field: max(low, v // 2)})
                    yield replace(case, sessions=tuple(
                        sessions[:k] + [(arrive, turns[:j] + (smaller,) + turns[j + 1:])] + sessions[k + 1:]))


def shrink(case: Case, interpret: Interpreter, *, rounds: int = 8, jobs: int = 2) -> Case:
    """The smallest failing case this greedy search finds: each round checks every candidate in one
    batch and keeps the smallest that still diverges."""
    current = case
    for _ in range(rounds):
        candidates = sorted(set(shrink_candidates(current)), key=Case.size)
        items = [(i, c, observe(c, interpret)) for i, c in enumerate(candidates)]
        if not items:
            break
        failing = check_in_lean(items, jobs=jobs)
        if not failing:
            break
        current = min((f.case for f in failing), key=Case.size)
    return current


def write_reproducer(case: Case, folder: Path) -> Path:
    """A folder a person can rerun: `serq run vllm_request.sq --instance instance.json`."""
    materialize(case, folder)
    return folder
