"""The campaign: seeds, mutants, workers, counts.

    from fuzz.campaign import run_campaign          # (tests/ on sys.path, as under pytest)
    report = run_campaign(mutants=2000, seed=1)
    report.counts["check"]["refused"]

Mutant i of seed S is drawn from `random.Random(f"{S}:{i}")` alone, so it is the same mutant
whichever worker runs it and however many there are; `--only i` runs it again.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

from .harness import BAD, REPO, TIME_BOUND, Case, Outcome, Workspace, run_case
from .mutate import mutate_json, mutate_text, raw_json_edits

# The kinds of seed and how often each is drawn.
WEIGHTS = {"program": 52, "ir": 20, "oracle": 12, "instance": 16}
MEMORY_LIMIT = 3 << 30  # a worker's address space: a runaway allocation is a MemoryError, not the machine's


@dataclass
class Seeds:
    programs: list[str]
    irs: dict[str, str]          # program -> its IR's text
    arrivals: dict[str, str]     # program -> its arrival kind
    oracle: list[str]
    instances: list[tuple[str, str]]  # (instance file, its program)
    texts: dict[str, str] = field(default_factory=dict)


def collect_seeds() -> Seeds:
    from serq.ir import models as ir
    from serq.link import link_file
    programs, irs, arrivals, texts = [], {}, {}, {}
    for p in sorted((REPO / "examples").rglob("*.sq")):
        rel = str(p.relative_to(REPO))
        text = p.read_text(encoding="utf-8")
        if "/instances/" in rel or "fn main" not in text:
            continue
        programs.append(rel)
        texts[rel] = text
        prog = link_file(p)
        irs[rel] = ir.to_json(prog)
        arrivals[rel] = prog.workload.arrival.kind
    oracle = [str(p.relative_to(REPO)) for p in sorted((REPO / "tests" / "data" / "oracle").rglob("*.json"))]
    instances = []
    for p in sorted((REPO / "examples").rglob("instances/*/*")):
        if p.suffix in (".sq", ".json"):
            prog = p.parent.parent.parent / f"{p.parent.name}.sq"
            if prog.exists():
                instances.append((str(p.relative_to(REPO)), str(prog.relative_to(REPO))))
    for rel in oracle + [i for i, _ in instances]:
        texts[rel] = (REPO / rel).read_text(encoding="utf-8")
    return Seeds(programs, irs, arrivals, oracle, instances, texts)


def make_case(seeds: Seeds, seed: int, index: int) -> Case:
    rng = random.Random(f"{seed}:{index}")
    kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    options = {"form": rng.choice(["text", "text", "json", "dump"]), "quiet": rng.random() < 0.5}
    program = None
    if kind == "program":
        src = rng.choice(seeds.programs)
        data, ops = mutate_text(seeds.texts[src], rng)
    elif kind == "ir":
        src = rng.choice(seeds.programs)
        text = seeds.irs[src]
        data, ops = raw_json_edits(text, rng) if rng.random() < 0.12 else mutate_json(text, rng)
    elif kind == "oracle":
        src = rng.choice(seeds.oracle)
        text = seeds.texts[src]
        data, ops = raw_json_edits(text, rng) if rng.random() < 0.12 else mutate_json(text, rng)
    else:
        src, program = rng.choice(seeds.instances)
        text = seeds.texts[src]
        if src.endswith(".json"):
            data, ops = raw_json_edits(text, rng) if rng.random() < 0.12 else mutate_json(text, rng)
        else:
            data, ops = mutate_text(text, rng)
        options["arrival"] = seeds.arrivals.get(program)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return Case(f"s{seed}-{index}", kind, src if kind != "ir" else src, data, ops, program, options)


@dataclass
class Report:
    seed: int
    mutants: int
    seconds: float = 0.0
    counts: dict = field(default_factory=lambda: defaultdict(Counter))  # command -> class -> n
    kinds: Counter = field(default_factory=Counter)                     # seed kind -> mutants
    subprocess: Counter = field(default_factory=Counter)                # class -> n, the subprocess sample
    bad: list = field(default_factory=list)                             # (case, outcome) of every bad one

    def bad_total(self) -> int:
        return sum(n for per in self.counts.values() for k, n in per.items() if k in BAD) + \
            sum(n for k, n in self.subprocess.items() if k in BAD)

    def table(self) -> str:
        classes = sorted({k for per in self.counts.values() for k in per} | {"ok", "refused", "usage"},
                         key=lambda k: (k in BAD, k))
        lines = [f"fuzz campaign: seed {self.seed}, {self.mutants} mutants "
                 f"({', '.join(f'{k} {n}' for k, n in sorted(self.kinds.items()))}), {self.seconds:.0f} s"]
        head = f"  {'command':<16}" + "".join(f"{k:>11}" for k in classes) + f"{'total':>8}"
        lines.append(head)
        for cmd in sorted(self.counts):
            per = self.counts[cmd]
            lines.append(f"  {cmd:<16}" + "".join(f"{per.get(k, 0):>11}" for k in classes)
                         + f"{sum(per.values()):>8}")
        if self.subprocess:
            lines.append(f"  {'(subprocess)':<16}" + "".join(f"{self.subprocess.get(k, 0):>11}" for k in classes)
                         + f"{sum(self.subprocess.values()):>8}")
        lines.append(f"  bad outcomes (traceback, internal error, hang, unlocated, …): {self.bad_total()}")
        return "\n".join(lines)

    def as_json(self) -> dict:
        return {"seed": self.seed, "mutants": self.mutants, "seconds": round(self.seconds, 1),
                "kinds": dict(self.kinds), "counts": {c: dict(v) for c, v in self.counts.items()},
                "subprocess": dict(self.subprocess), "bad": len(self.bad)}


# ---------------------------------------------------------------- workers
def _worker(conn, root: str) -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ValueError, OSError):
        pass
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    ws = Workspace(Path(root))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        case, sub = msg
        try:
            outcomes = run_case(case, ws, sub)
        except BaseException as e:  # noqa: BLE001 - the harness's own failure is reported as the case's
            outcomes = [Outcome("harness", "traceback", None, 0.0, "".join(traceback.format_exception(e))[-1500:])]
        conn.send((case.id, outcomes))


class _Pool:
    def __init__(self, n: int, root: Path) -> None:
        self.ctx = mp.get_context("fork")
        self.root = root
        self.workers: list = [self._spawn(i) for i in range(n)]

    def _spawn(self, i: int):
        parent, child = self.ctx.Pipe()
        root = self.root / f"w{i}"
        root.mkdir(parents=True, exist_ok=True)
        p = self.ctx.Process(target=_worker, args=(child, str(root)), daemon=True)
        p.start()
        child.close()
        return {"proc": p, "conn": parent, "case": None, "t0": 0.0, "i": i}

    def run(self, cases, on_result, sub_every: int) -> None:
        pending = list(cases)
        pending.reverse()
        while pending or any(w["case"] is not None for w in self.workers):
            for w in self.workers:
                if w["case"] is None and pending:
                    case = pending.pop()
                    w["case"], w["t0"] = case, time.monotonic()
                    sub = sub_every > 0 and int(case.id.rsplit("-", 1)[1]) % sub_every == 0
                    w["conn"].send((case, sub))
            busy = [w for w in self.workers if w["case"] is not None]
            ready = wait([w["conn"] for w in busy], timeout=1.0)
            for w in busy:
                if w["conn"] in ready:
                    try:
                        _, outcomes = w["conn"].recv()
                    except (EOFError, OSError):
                        outcomes = [Outcome("worker", "signal", None, time.monotonic() - w["t0"],
                                            f"the worker died (exit {w['proc'].exitcode})")]
                        self._replace(w)
                    on_result(w["case"], outcomes)
                    w["case"] = None
                elif time.monotonic() - w["t0"] > 12 * TIME_BOUND + 60:  # a backstop: the bound is CPU time
                    on_result(w["case"], [Outcome("worker", "hang", None, time.monotonic() - w["t0"],
                                                  "the worker did not answer: killed")])
                    w["case"] = None
                    self._replace(w)

    def _replace(self, w) -> None:
        try:
            w["proc"].kill()
            w["proc"].join(5)
        except Exception:  # noqa: BLE001
            pass
        fresh = self._spawn(w["i"])
        w.update(fresh)

    def close(self) -> None:
        for w in self.workers:
            try:
                w["conn"].send(None)
            except OSError:
                pass
        for w in self.workers:
            w["proc"].join(10)
            if w["proc"].is_alive():
                w["proc"].kill()


def run_campaign(mutants: int = 2000, seed: int = 1, jobs: int | None = None, sub_every: int = 50,
                 save: Path | None = None, only: list[int] | None = None, progress=None) -> Report:
    """Draw `mutants` mutants of seed `seed` (or the indices `only`), run each, count the outcomes.
    Every bad outcome's case is written to `save` (its file and a line of cases.jsonl)."""
    seeds = collect_seeds()
    indices = only if only is not None else list(range(mutants))
    cases = [make_case(seeds, seed, i) for i in indices]
    report = Report(seed, len(cases))
    report.kinds.update(c.kind for c in cases)
    t0 = time.monotonic()
    done = [0]
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)

    def on_result(case: Case, outcomes: list[Outcome]) -> None:
        done[0] += 1
        for o in outcomes:
            if o.via == "subprocess":
                report.subprocess[o.klass] += 1
            else:
                report.counts[o.command][o.klass] += 1
            if o.klass in BAD:
                report.bad.append((case, o))
                if save is not None:
                    _save(save, case, o)
        if progress is not None:
            progress(done[0], len(cases), report)

    with tempfile.TemporaryDirectory(prefix="serq-fuzz-") as tmp:
        pool = _Pool(jobs or min(2, os.cpu_count() or 1), Path(tmp))
        try:
            pool.run(cases, on_result, sub_every)
        finally:
            pool.close()
    report.seconds = time.monotonic() - t0
    return report


def _save(folder: Path, case: Case, o: Outcome) -> None:
    name = f"{case.id}{case.suffix}"
    (folder / name).write_bytes(case.data)
    entry = {"file": name, "kind": case.kind, "seed_file": case.seed_file, "program": case.program,
             "ops": case.ops, "options": case.options, "command": o.command, "class": o.klass,
             "exit": o.exit_code, "detail": o.detail[-800:]}
    with (folder / "cases.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def case_record(case: Case) -> dict:
    d = asdict(case)
    d.pop("data")
    return d
