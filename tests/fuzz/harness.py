"""Running one case: its file written where the seed's neighbours are, each command run through
click's CliRunner in this process (a time bound by SIGALRM) or as a subprocess, and the outcome
put in a class (tests/fuzz/README.md, *Outcome classes*)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ORACLE_DATA = REPO / "tests" / "data" / "oracle"

# The classes an outcome may fall in; the first four are answers, the rest are bugs.
GOOD = ("ok", "refused", "usage", "differs")
BAD = ("traceback", "internal", "hang", "unlocated", "signal", "exit")

TIME_BOUND = 10.0  # seconds a command may take (the campaign kills a worker that overruns it by 5 more)
HORIZON = "30"     # the runs' horizon: short, so that a mutant's run is a few thousand events at most
ARRIVALS = "10"    # an open workload's arrivals,
DRAIN_HORIZON = "1000"  # drained by this horizon (the run ends when they are)

_LOCATED = re.compile(r"^(?:.*\S)?:\d+:\d+: error: ", re.M)
_TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Case:
    """One mutant. `kind`: program (a .sq program), ir (its IR as JSON), oracle (a scenario file),
    instance (an instance file, of the program `program`)."""

    id: str
    kind: str
    seed_file: str          # the file mutated, relative to the repository
    data: bytes             # the mutant
    ops: list[str] = field(default_factory=list)
    program: str | None = None  # an instance's program, relative to the repository
    options: dict = field(default_factory=dict)  # per-case choices: the run's output form

    @property
    def suffix(self) -> str:
        if "suffix" in self.options:  # a regression case's own (an instance .sq of a .json seed)
            return self.options["suffix"]
        return Path(self.seed_file).suffix if self.kind != "ir" else ".json"


@dataclass
class Outcome:
    command: str
    klass: str
    exit_code: int | None
    seconds: float
    detail: str = ""  # the first lines of stderr (and stdout) for the bad classes
    via: str = "in-process"
    err: str = ""     # the first 2 000 characters of stderr (the regression cases read the message)


class _Timeout(BaseException):
    """Raised by SIGPROF in the middle of a command that overran its bound of CPU time (not an
    Exception, so that no handler of serq's takes it for one of its own). CPU time, not the
    clock's: a machine busy with other work makes no case a hang."""


def _alarm(signum, frame):
    raise _Timeout()


class Workspace:
    """A copy of examples/ (libraries and traces included, so that `use "../lib/vllm.sq"` and
    `trace "x.csv"` resolve from a mutant written beside its seed) and of the oracle data."""

    def __init__(self, root: Path) -> None:
        self.root = root
        if not (root / "examples").exists():
            shutil.copytree(REPO / "examples", root / "examples",
                            ignore=shutil.ignore_patterns("*.lean", ".lake", "lake-manifest.json", "Papers"))
            # the oracle program is run from the installed package's own copy (serq/programs), so
            # the scenario data needs no copy; a scenario's mutant is written to `scratch/`
        (root / "scratch").mkdir(exist_ok=True)

    def place(self, case: Case) -> Path:
        """Where the case's file goes: beside its seed (a program, an instance), else scratch/."""
        name = f"_fz_{case.id}{case.suffix}"
        if case.kind == "program":
            where = self.root / Path(case.seed_file).parent / name
        elif case.kind == "instance":
            # inside instances/<program>/ so that `serq check PROGRAM` reads it as the program's
            where = self.root / Path(case.seed_file).parent / name
        else:
            where = self.root / "scratch" / name
        where.write_bytes(case.data)
        return where

    def mirror(self, rel: str) -> Path:
        return self.root / rel


def commands(case: Case, ws: Workspace, path: Path, ir_arrival: str | None = None) -> list[tuple[str, list[str]]]:
    """The commands a case runs (the name for the counts, the arguments). A program's run and IR
    come only after it links (`run_program_commands`)."""
    rel = str(path)
    if case.kind == "program":
        return [("check", ["check", rel])]
    if case.kind == "ir":
        return [("check", ["check", rel]), ("run", ["run", rel, *_run_flags(case, ws, _ir_arrival(case.data))])]
    if case.kind == "oracle":
        return [("oracle", ["oracle", *(["-q"] if case.options.get("quiet") else []), rel])]
    if case.kind == "instance":
        program = str(ws.mirror(case.program))
        return [("instance-check", ["check", program]),
                ("instance-ir", ["ir", program, "--instance", rel]),
                ("instance-run", ["run", program, "--instance", rel, *_run_flags(case, ws, case.options.get("arrival"))])]
    raise ValueError(case.kind)


def _ir_arrival(data: bytes) -> str | None:
    try:
        return json.loads(data)["workload"]["arrival"]["kind"]
    except Exception:  # noqa: BLE001 - any mutant: no arrival known
        return None


def _run_flags(case: Case, ws: Workspace, arrival: str | None) -> list[str]:
    flags = ["--horizon", HORIZON]
    if arrival in ("poisson", "renewal"):  # N arrivals, drained by a horizon long enough for most
        flags = ["--horizon", DRAIN_HORIZON, "--arrivals", ARRIVALS]
    form = case.options.get("form", "text")
    if form == "json":
        flags.append("--json")
    elif form == "dump":
        flags += ["--dump", str(ws.root / "scratch" / f"_fz_{case.id}.dump")]
    return flags


def classify(command: str, exit_code: int | None, out: str, err: str, exc: BaseException | None,
             timed_out: bool, path: Path) -> tuple[str, str]:
    """An outcome's class and, for a bad one, what shows it."""
    both = err + "\n" + out
    detail = (err.strip() or out.strip())[:600]
    if timed_out:
        return "hang", detail
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback
        return "traceback", "".join(traceback.format_exception(exc))[-1500:]
    if _TRACEBACK in both:
        return "traceback", detail
    if "internal error" in both or exit_code == 3:
        return "internal", detail
    if exit_code == 0:
        return "ok", ""
    if exit_code == 2:
        return "usage", ""
    if exit_code == 1:
        if command == "oracle" and ("DIFFERS" in out or "the run failed" in out):
            return "differs", ""
        if _LOCATED.search(err) or _names_file(err, path):
            return "refused", ""
        return "unlocated", detail
    if exit_code is not None and exit_code < 0:
        return "signal", detail
    return "exit", detail


def _names_file(err: str, path: Path) -> bool:
    """A refusal of a JSON file (IR, scenario, instance) names the file and the place in it, or a
    refusal of a run's settings names the flag; an error about a statement is located."""
    for line in err.splitlines():
        if "error:" not in line:
            continue
        if path.name in line or re.search(r"error: --[a-z]+ ", line) or re.search(r"error: (serq \w+: )?--", line):
            return True
    return False


def run_in_process(args: list[str], bound: float = TIME_BOUND) -> tuple[int | None, str, str, BaseException | None, bool, float]:
    """(exit code, stdout, stderr, the exception that escaped, timed out, seconds)."""
    from click.testing import CliRunner

    from serq.cli import main
    runner = CliRunner()
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, bound)
    t0 = time.perf_counter()
    timed_out = False
    try:
        try:
            res = runner.invoke(main, args, catch_exceptions=True)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except _Timeout:
        return None, "", "", None, True, time.perf_counter() - t0
    finally:
        signal.signal(signal.SIGPROF, old)
    exc = res.exception
    if isinstance(exc, _Timeout):
        timed_out = True
        exc = None
    return res.exit_code, _text(res.stdout_bytes), _text(res.stderr_bytes), exc, timed_out, time.perf_counter() - t0


def _text(b: bytes | None) -> str:
    return (b or b"").decode("utf-8", "replace")


def run_subprocess(args: list[str], bound: float = TIME_BOUND) -> tuple[int | None, str, str, BaseException | None, bool, float]:
    env = dict(os.environ)
    env.pop("SERQ_DEBUG", None)
    t0 = time.perf_counter()

    def cpu_bound():  # the same bound, of CPU time: SIGXCPU past it (the clock's bound is a backstop)
        import resource
        resource.setrlimit(resource.RLIMIT_CPU, (int(bound) + 1, int(bound) + 2))
    try:
        p = subprocess.run([sys.executable, "-m", "serq.cli", *args], capture_output=True, timeout=6 * bound + 30,
                           env=env, cwd=str(REPO), preexec_fn=cpu_bound)
    except subprocess.TimeoutExpired:
        return None, "", "", None, True, time.perf_counter() - t0
    timed_out = p.returncode in (-signal.SIGXCPU, -signal.SIGKILL)
    return p.returncode, _text(p.stdout), _text(p.stderr), None, timed_out, time.perf_counter() - t0


def run_case(case: Case, ws: Workspace, subprocess_too: bool = False) -> list[Outcome]:
    """Every command of a case, in order: a program's `ir` and `run` after its `check` links it."""
    path = ws.place(case)
    outcomes: list[Outcome] = []
    try:
        todo = commands(case, ws, path)
        while todo:
            name, args = todo.pop(0)
            outcomes.append(_one(name, args, path, False))
            if subprocess_too and len(outcomes) == 1:
                outcomes.append(_one(name, args, path, True))
            if case.kind == "program" and name == "check" and outcomes[0].klass == "ok":
                ir_out = _ir_text(path)
                arrival = _ir_arrival(ir_out.encode()) if ir_out is not None else None
                todo += [("ir", ["ir", str(path)]), ("run", ["run", str(path), *_run_flags(case, ws, arrival)])]
    finally:
        _clean(path, ws, case)
    return outcomes


def _ir_text(path: Path) -> str | None:
    code, out, _, _, _, _ = run_in_process(["ir", str(path)])
    return out if code == 0 else None


def _one(name: str, args: list[str], path: Path, via_subprocess: bool) -> Outcome:
    fn = run_subprocess if via_subprocess else run_in_process
    code, out, err, exc, timed_out, secs = fn(args)
    klass, detail = classify(name, code, out, err, exc, timed_out, path)
    return Outcome(name, klass, code, secs, detail, "subprocess" if via_subprocess else "in-process", err[:2000])


def _clean(path: Path, ws: Workspace, case: Case) -> None:
    try:
        path.unlink()
    except OSError:
        pass
    dump = ws.root / "scratch" / f"_fz_{case.id}.dump"
    if dump.exists():
        shutil.rmtree(dump, ignore_errors=True)
