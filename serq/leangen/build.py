"""The Lean build driver: `serq lean build`, `serq lean check` and a Python API.

Two ways to build the package declared in `lakefile.lean`:

* **lake**: a working native `lake` (recorded by `scripts/install_lean.py` in
  `.serq/toolchain.json`) runs `lake build`.
* **per module** (the offline WebAssembly Lean, or `use_lake=False`): the driver reads
  the `lean_lib` blocks of the lakefile, finds every module of every library (its
  roots and their submodules), orders them by their `import`s and compiles each with
  `lean --json FILE -o OLEAN -i ILEAN` (outputs in `.serq/lean-build/lib`, which is
  on `LEAN_PATH`), at most `jobs` at a time. A module whose source, options, toolchain
  and imports' traces are unchanged since its last successful compile is skipped
  (content hashes, stamps in `.serq/lean-build/stamps`).

Every Lean process the driver starts first takes one of the machine-wide slots in
`$TMPDIR/serq-lean-slots` (two unless `SERQ_LEAN_SLOTS` says otherwise): the offline
Lean needs about 3 GB per process, and builds, tests and other sessions share them.

Diagnostics are `Diagnostic` values, printed as `file:line:col: severity: message`
with the file relative to the repository and 1-based line and column.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from serq.leangen.lean_source import Finding, parse_header, scan_source

STATE_DIR = ".serq"
BUILD_DIR = ".serq/lean-build"
TOOLCHAIN_FILE = ".serq/toolchain.json"
WASM_LAUNCHER = ".serq/lean-wasm/bin/lean"
INSTALL_HINT = "run `python3 scripts/install_lean.py`"
STAMP_FORMAT = 1
DEFAULT_JOBS = 2
DEFAULT_SLOTS = 2
#: Modules provided by the toolchain itself (never built by the driver).
TOOLCHAIN_PACKAGES = ("Init", "Std", "Lean", "Lake")


class LeanError(Exception):
    """A failure that is not a Lean diagnostic: no toolchain, bad lakefile, cycle ..."""


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------

_SORRY_WARNING = re.compile(r"declaration uses [`']sorry[`']")


@dataclass(frozen=True)
class Diagnostic:
    """One message from Lean (or from the driver) about a place in a file."""

    file: str  # relative to the repository root when inside it
    line: int  # 1-based
    col: int  # 1-based
    severity: str  # "error" | "warning" | "information"
    message: str
    end_line: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    @property
    def uses_sorry(self) -> bool:
        return self.severity == "warning" and _SORRY_WARNING.search(self.message) is not None


@dataclass
class ModuleResult:
    module: str
    file: str
    status: str  # "built" | "skipped" | "failed" | "blocked"
    seconds: float = 0.0
    diagnostics: list[Diagnostic] = field(default_factory=list)
    max_rss_mb: int = 0  # peak resident memory of its Lean process (0: not run)


@dataclass
class CompileResult:
    """The outcome of compiling one Lean file: `ok` is False on any error."""

    file: str
    ok: bool
    returncode: int
    seconds: float
    diagnostics: list[Diagnostic] = field(default_factory=list)
    output: str = ""  # non-diagnostic output (the tail), for crashes
    max_rss_mb: int = 0  # peak resident memory of the Lean process

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


@dataclass
class BuildResult:
    ok: bool
    mode: str  # "lake" | "modules"
    modules: list[ModuleResult] = field(default_factory=list)
    extra: list[CompileResult] = field(default_factory=list)
    seconds: float = 0.0
    returncode: int = 0
    messages: list[str] = field(default_factory=list)  # driver-level problems
    waited: float = 0.0  # seconds spent waiting for another build of the checkout

    @property
    def diagnostics(self) -> list[Diagnostic]:
        out = [d for m in self.modules for d in m.diagnostics]
        out += [d for r in self.extra for d in r.diagnostics]
        return out

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    def count(self, status: str) -> int:
        return sum(1 for m in self.modules if m.status == status)

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "mode": self.mode, "seconds": round(self.seconds, 2),
            "modules": [{**asdict(m), "diagnostics": [asdict(d) for d in m.diagnostics]}
                        for m in self.modules],
            "extra": [{**asdict(r), "diagnostics": [asdict(d) for d in r.diagnostics]}
                      for r in self.extra],
            "messages": self.messages,
        }


Event = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


# --------------------------------------------------------------------------------------
# Repository, toolchain, project
# --------------------------------------------------------------------------------------

def find_root(start: str | os.PathLike | None = None) -> Path:
    """The repository root: the nearest folder upwards holding `lakefile.lean`."""
    here = Path(start or os.getcwd()).resolve()
    for d in (here, *here.parents):
        if (d / "lakefile.lean").is_file():
            return d
    # the package's own checkout, when run from elsewhere
    pkg_root = Path(__file__).resolve().parents[2]
    if (pkg_root / "lakefile.lean").is_file():
        return pkg_root
    raise LeanError(f"no lakefile.lean in {here} or any parent folder")


@dataclass(frozen=True)
class Toolchain:
    kind: str  # "native" | "wasm"
    lean: tuple[str, ...]
    lake: str | None
    version: str
    id: str

    @property
    def has_lake(self) -> bool:
        return self.kind == "native" and bool(self.lake)


def load_toolchain(root: Path) -> Toolchain:
    """The toolchain `scripts/install_lean.py` chose, checked to still be there."""
    f = root / TOOLCHAIN_FILE
    try:
        data = json.loads(f.read_text())
    except FileNotFoundError:
        raise LeanError(f"no Lean toolchain installed ({f.relative_to(root)} is missing): "
                        f"{INSTALL_HINT}") from None
    except (OSError, ValueError) as e:
        raise LeanError(f"{f}: unreadable ({e}): {INSTALL_HINT}") from None
    kind = data.get("kind")
    if kind == "wasm":
        launcher = root / WASM_LAUNCHER
        if not os.access(launcher, os.X_OK):
            raise LeanError(f"the offline Lean launcher {WASM_LAUNCHER} is missing: {INSTALL_HINT}")
        lean: tuple[str, ...] = (str(launcher),)
    elif kind == "native":
        lean = tuple(data.get("lean") or ())
        if not lean or not (shutil.which(lean[0]) or os.access(lean[0], os.X_OK)):
            raise LeanError(f"the native Lean {lean[0] if lean else '?'} recorded in "
                            f"{TOOLCHAIN_FILE} is gone: {INSTALL_HINT}")
    else:
        raise LeanError(f"{TOOLCHAIN_FILE}: unknown toolchain kind {kind!r}: {INSTALL_HINT}")
    return Toolchain(kind=kind, lean=lean, lake=data.get("lake"),
                     version=str(data.get("version", "")), id=str(data.get("id", "")))


@dataclass(frozen=True)
class LeanLib:
    name: str
    src_dir: Path  # absolute
    roots: tuple[str, ...]


@dataclass(frozen=True)
class Project:
    root: Path
    libs: tuple[LeanLib, ...]
    options: tuple[str, ...]  # `-Dname=value` from the package's leanOptions

    @property
    def build_dir(self) -> Path:
        return self.root / BUILD_DIR

    @property
    def olean_dir(self) -> Path:
        return self.build_dir / "lib"

    def rel(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


_BLOCK_RE = re.compile(r"^(?:@\[[^\]]*\]\s*)?(package|lean_lib)\s+«?([A-Za-z_][\w']*)»?")
_SRCDIR_RE = re.compile(r"\bsrcDir\s*:=\s*\"([^\"]*)\"")
_ROOTS_RE = re.compile(r"\broots\s*:=\s*#\[(.*?)\]", re.S)
_OPTIONS_RE = re.compile(r"\bleanOptions\s*:=\s*#\[(.*?)\]", re.S)
_NAME_LIT_RE = re.compile(r"`«?([A-Za-z_][\w'.]*)»?")
_OPTION_RE = re.compile(r"⟨\s*`([\w.]+)\s*,\s*([^⟩]+?)\s*⟩")


def load_project(root: Path) -> Project:
    """Read the `lean_lib` blocks (`srcDir`, `roots`) and `leanOptions` of lakefile.lean.

    A block is its header line and the indented lines after it; the fields must be
    literals (a string for `srcDir`, name literals for `roots`).
    """
    lakefile = root / "lakefile.lean"
    try:
        lines = lakefile.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise LeanError(f"{lakefile}: {e.strerror}") from None
    libs: list[LeanLib] = []
    options: list[str] = []
    i = 0
    while i < len(lines):
        m = _BLOCK_RE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j][0].isspace()):
            j += 1
        body = "\n".join(ln.split("--", 1)[0] for ln in lines[i:j])
        kind, name = m.group(1), m.group(2)
        if kind == "lean_lib":
            sm = _SRCDIR_RE.search(body)
            rm = _ROOTS_RE.search(body)
            roots = tuple(_NAME_LIT_RE.findall(rm.group(1))) if rm else (name,)
            if rm and not roots:
                raise LeanError(f"lakefile.lean: lean_lib {name}: cannot read its roots")
            libs.append(LeanLib(name=name, src_dir=(root / (sm.group(1) if sm else ".")).resolve(),
                                roots=roots))
        else:
            om = _OPTIONS_RE.search(body)
            if om:
                options += [f"-D{k}={v.strip()}" for k, v in _OPTION_RE.findall(om.group(1))]
        i = j
    if not libs:
        raise LeanError("lakefile.lean declares no lean_lib")
    return Project(root=root, libs=tuple(libs), options=tuple(options))


def source_files(project: Project, extra: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Every `.lean` file under the libraries' source folders, plus `extra` files/folders."""
    files: set[Path] = set()
    for d in [lib.src_dir for lib in project.libs] + [Path(p) for p in extra]:
        d = d if d.is_absolute() else (Path.cwd() / d)
        if d.is_file():
            files.add(d.resolve())
        elif d.is_dir():
            files.update(p.resolve() for p in d.rglob("*.lean")
                         if ".lake" not in p.parts and STATE_DIR not in p.parts)
    return sorted(files)


def check_sources(project: Project, extra: Iterable[str | os.PathLike] = ()) -> list[Finding]:
    out: list[Finding] = []
    for f in source_files(project, extra):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            out.append(Finding(project.rel(f), 1, 1, "", f"cannot read: {e}"))
            continue
        out.extend(scan_source(text, project.rel(f)))
    return out


# --------------------------------------------------------------------------------------
# Modules and their graph
# --------------------------------------------------------------------------------------

@dataclass
class Module:
    name: str
    path: Path  # absolute source file
    lib: LeanLib
    imports: list[str]  # project modules it imports
    external: list[str]  # toolchain (or unknown) imports
    import_pos: dict[str, tuple[int, int]]

    def rel_source(self) -> str:
        return self.path.relative_to(self.lib.src_dir).as_posix()

    def olean(self, olean_dir: Path) -> Path:
        return olean_dir / (self.name.replace(".", "/") + ".olean")


def module_name(src_dir: Path, path: Path) -> str:
    rel = path.relative_to(src_dir).with_suffix("")
    return ".".join(rel.parts)


def discover(project: Project) -> dict[str, Module]:
    """All modules of all libraries: each root and its submodules, with their imports."""
    found: dict[str, tuple[Path, LeanLib]] = {}
    for lib in project.libs:
        for root_mod in lib.roots:
            base = lib.src_dir.joinpath(*root_mod.split("."))
            candidates = []
            if base.with_suffix(".lean").is_file():
                candidates.append(base.with_suffix(".lean"))
            if base.is_dir():
                candidates.extend(sorted(base.rglob("*.lean")))
            if not candidates:
                raise LeanError(f"lean_lib {lib.name}: root {root_mod} has no file "
                                f"{project.rel(base.with_suffix('.lean'))}")
            for p in candidates:
                name = module_name(lib.src_dir, p)
                if name in found and found[name][0] != p:
                    raise LeanError(f"module {name} is defined twice: {project.rel(found[name][0])} "
                                    f"and {project.rel(p)}")
                found[name] = (p, lib)
    modules: dict[str, Module] = {}
    for name, (p, lib) in found.items():
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise LeanError(f"{project.rel(p)}: cannot read: {e}") from None
        _is_module, imps = parse_header(text)
        mine = [i for i, _, _ in imps if i in found]
        other = [i for i, _, _ in imps if i not in found]
        modules[name] = Module(name=name, path=p, lib=lib, imports=mine, external=other,
                               import_pos={i: (ln, c) for i, ln, c in imps})
    return modules


def topo_order(modules: dict[str, Module], project: Project) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, stack: list[str]) -> None:
        s = state.get(n)
        if s == 2:
            return
        if s == 1:
            cyc = stack[stack.index(n):] + [n]
            m = modules[n]
            raise LeanError(f"{project.rel(m.path)}: import cycle: {' -> '.join(cyc)}")
        state[n] = 1
        for d in modules[n].imports:
            visit(d, stack + [n])
        state[n] = 2
        order.append(n)

    for n in sorted(modules):
        visit(n, [])
    return order


def critical_first(modules: dict[str, Module], order: list[str]) -> list[str]:
    """`order` (a topological order) re-sorted so that, among modules ready at once, the one with
    the longest chain of modules waiting on it is started first, larger sources first among equals:
    with two slots the build's tail is then not one long chain building alone (on this package,
    simulated with recorded module times: ~6% less wall time than the plain topological order; no
    recorded times are needed, so a fresh clone gets it too). The scheduler still checks imports."""
    dependents: dict[str, list[str]] = {n: [] for n in modules}
    for n, m in modules.items():
        for d in m.imports:
            dependents[d].append(n)
    chain: dict[str, int] = {}
    for n in reversed(order):  # every dependent comes later in a topological order
        chain[n] = 1 + max((chain[d] for d in dependents[n]), default=0)
    position = {n: i for i, n in enumerate(order)}
    return sorted(order, key=lambda n: (-chain[n], -modules[n].path.stat().st_size, position[n]))


# --------------------------------------------------------------------------------------
# Running Lean
# --------------------------------------------------------------------------------------

def _slot_dir() -> Path:
    return Path(os.environ.get("SERQ_LEAN_SLOT_DIR") or Path(tempfile.gettempdir()) / "serq-lean-slots")


def slot_count() -> int:
    try:
        return max(1, int(os.environ.get("SERQ_LEAN_SLOTS", DEFAULT_SLOTS)))
    except ValueError:
        return DEFAULT_SLOTS


@contextlib.contextmanager
def lean_slot(on_wait: Event | None = None) -> Iterator[int]:
    """Hold one of the machine-wide Lean slots (an flock'ed file) while Lean runs."""
    d = _slot_dir()
    d.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        d.chmod(0o1777)
    n = slot_count()
    waited = False
    while True:
        for i in range(n):
            f = open(d / f"slot-{i}.lock", "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            try:
                yield i
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        if not waited and on_wait:
            on_wait(f"waiting for a free Lean slot ({n} in use on this machine)")
        waited = True
        time.sleep(0.5)


def _strip_noise(text: str) -> str:
    keep = [ln for ln in text.splitlines()
            if ln.strip() and not ln.startswith("[DEBUG") and not ln.startswith("  - /")
            and ln.strip() != "mainModule? = true"]
    return "\n".join(keep[-40:])


_CRASH_LINE = re.compile(r"\b\w*Error\b|Aborted|out of memory|Killed|Segmentation fault")


def crash_cause(output: str) -> str:
    """The line of a crashed Lean process's output that says why: the first naming an error (Node's
    `RangeError: Maximum call stack size exceeded` under the offline Lean, an abort), else the last
    line. Node ends a crash with its version line, which says nothing, so that line is skipped."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("Node.js v")]
    if not lines:
        return "no output"
    return next((ln for ln in lines if _CRASH_LINE.search(ln)), lines[-1])


def _is_json_message(line: str) -> bool:
    """A line of Lean's `--json` output that is a message; any other line (a cut-off message
    included) is output to show when the process fails without one."""
    if not line.startswith("{"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def parse_json_messages(stdout: str, base: Path, project_root: Path | None) -> list[Diagnostic]:
    """Lean's `--json` messages (one per line, starting with `{`) as Diagnostics."""
    out: list[Diagnostic] = []
    for ln in stdout.splitlines():
        if not ln.startswith("{"):
            continue
        try:
            msg = json.loads(ln)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "severity" not in msg:
            continue
        fname = str(msg.get("fileName") or "")
        fpath = Path(fname) if os.path.isabs(fname) else base / fname
        file = fname
        if project_root is not None:
            try:
                file = fpath.resolve().relative_to(project_root).as_posix()
            except ValueError:
                file = str(fpath)
        pos = msg.get("pos") or {}
        end = msg.get("endPos") or {}
        out.append(Diagnostic(
            file=file,
            line=int(pos.get("line", 1)),
            col=int(pos.get("column", 0)) + 1,
            severity=str(msg.get("severity", "error")),
            message=str(msg.get("data", "")).rstrip(),
            end_line=int(end["line"]) if "line" in end else None,
            end_col=int(end["column"]) + 1 if "column" in end else None,
        ))
    return out


def _run_measured(cmd: list[str], cwd: Path, env: dict, timeout: float | None, stdin: Path | None = None
                  ) -> tuple[int, str, str, int, bool]:
    """Run `cmd`, its standard input the file `stdin` (else none); (exit status, stdout, stderr,
    peak RSS in KB, timed out).

    Its output goes to files, not pipes: Node (the offline Lean) writes to a pipe asynchronously and
    can exit before a long message is flushed, which lost a failing proof's error; a file is written
    synchronously. Reaps the process with wait4 to read its peak resident memory (for the offline
    Lean, node itself: the launcher execs it).
    """
    with open(stdin, "rb") if stdin is not None else contextlib.nullcontext(subprocess.DEVNULL) as source, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=source, stdout=out, stderr=err)
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.monotonic() > deadline and not timed_out:
                timed_out = True
                p.kill()
            time.sleep(0.05)
        rc = os.waitstatus_to_exitcode(status)
        p.returncode = rc  # reaped here; keep Popen from waiting again

        def text(f) -> str:
            f.seek(0)
            return f.read().decode("utf-8", errors="replace")

        return rc, text(out), text(err), int(ru.ru_maxrss), timed_out


def run_lean(toolchain: Toolchain, args: list[str], cwd: Path, lean_path: list[Path],
             project_root: Path | None, file_label: str, timeout: float | None = None,
             on_event: Event | None = None, prefix: list[str] | None = None,
             stdin: Path | None = None) -> CompileResult:
    """Run one Lean process (in a machine slot) and collect its diagnostics; `stdin`: a file the
    process reads as its standard input (a file, not a pipe: the offline Lean reads /dev/stdin
    only when the input is complete)."""
    env = dict(os.environ)
    paths = [str(p) for p in lean_path]
    if env.get("LEAN_PATH"):
        paths.append(env["LEAN_PATH"])
    env["LEAN_PATH"] = os.pathsep.join(paths)
    cmd = (prefix or list(toolchain.lean)) + ["--json"] + args
    with lean_slot(on_event):
        t0 = time.monotonic()
        try:
            rc, stdout, stderr, rss_kb, timed_out = _run_measured(cmd, cwd, env, timeout, stdin)
        except OSError as e:
            raise LeanError(f"cannot run {cmd[0]}: {e.strerror}") from None
    seconds = time.monotonic() - t0
    rss_mb = round(rss_kb / 1024)
    if timed_out:
        d = Diagnostic(file_label, 1, 1, "error", f"Lean timed out after {timeout:g} s")
        return CompileResult(file_label, False, rc, seconds, [d], "", rss_mb)
    diags = parse_json_messages(stdout, cwd, project_root)
    noise = _strip_noise("\n".join(ln for ln in stdout.splitlines() if not _is_json_message(ln))
                         + "\n" + stderr)
    ok = rc == 0 and not any(d.is_error for d in diags)
    if rc != 0 and not any(d.is_error for d in diags):
        diags.append(Diagnostic(file_label, 1, 1, "error",
                                f"Lean exited with status {rc} without a message ({crash_cause(noise)})"))
    return CompileResult(file_label, ok, rc, seconds, diags, noise, rss_mb)


# --------------------------------------------------------------------------------------
# Stamps
# --------------------------------------------------------------------------------------

def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def module_trace(m: Module, deps: dict[str, str], toolchain: Toolchain, project: Project) -> str:
    h = hashlib.sha256()
    h.update(f"serq-lean-trace {STAMP_FORMAT}\n{toolchain.id}\n{m.name}\n".encode())
    h.update(("\n".join(project.options) + "\n").encode())
    h.update(_file_hash(m.path).encode() + b"\n")
    for d in sorted(m.imports):
        h.update(f"{d} {deps[d]}\n".encode())
    return h.hexdigest()


def _stamp_path(project: Project, name: str) -> Path:
    return project.build_dir / "stamps" / f"{name}.json"


def _read_stamp(project: Project, name: str) -> dict | None:
    try:
        return json.loads(_stamp_path(project, name).read_text())
    except (OSError, ValueError):
        return None


def _write_stamp(project: Project, name: str, data: dict) -> None:
    p = _stamp_path(project, name)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + f".tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, p)


def _diag_from(d: dict) -> Diagnostic:
    return Diagnostic(**{k: d.get(k) for k in Diagnostic.__dataclass_fields__})


OUTPUT_SUFFIXES = (".olean", ".ilean", ".olean.server", ".olean.private", ".ir", ".c")


def _remove_outputs(olean: Path) -> None:
    stem = olean.with_suffix("")
    for suf in OUTPUT_SUFFIXES:
        with contextlib.suppress(OSError):
            Path(str(stem) + suf).unlink()


def _prune_stale(project: Project, modules: dict[str, Module]) -> None:
    """Drop outputs and stamps of modules that no longer exist."""
    lib = project.olean_dir
    if lib.is_dir():
        for p in lib.rglob("*.olean"):
            name = ".".join(p.relative_to(lib).with_suffix("").parts)
            if name not in modules:
                _remove_outputs(p)
                with contextlib.suppress(OSError):
                    _stamp_path(project, name).unlink()
    st = project.build_dir / "stamps"
    if st.is_dir():
        for p in st.glob("*.json"):
            if p.stem not in modules:
                with contextlib.suppress(OSError):
                    p.unlink()


@contextlib.contextmanager
def _build_lock(project: Project, exclusive: bool, say: Event | None = None) -> Iterator[None]:
    """Builds of one checkout take it exclusively, checks of extra files shared."""
    project.build_dir.mkdir(parents=True, exist_ok=True)
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with open(project.build_dir / ".lock", "a") as f:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
        except OSError:
            if say:
                say("lean: waiting for another Lean build of this checkout to finish")
            fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------

def effective_jobs(jobs: int | None) -> int:
    return max(1, min(jobs or DEFAULT_JOBS, slot_count()))


def build(root: str | os.PathLike | None = None, *, jobs: int | None = DEFAULT_JOBS,
          force: bool = False, use_lake: bool | None = None,
          extra_files: Iterable[str | os.PathLike] = (), timeout: float | None = None,
          on_event: Event | None = None, toolchain: Toolchain | None = None) -> BuildResult:
    """Build the package (and then check `extra_files` against it).

    `use_lake`: None = lake when the toolchain has a working native lake; False = the
    per-module driver always. Raises LeanError for problems that are not diagnostics.
    """
    say = on_event or _quiet
    rootp = find_root(root)
    project = load_project(rootp)
    tc = toolchain or load_toolchain(rootp)
    t0 = time.monotonic()
    lake = tc.has_lake if use_lake is None else (use_lake and tc.has_lake)
    if use_lake and not tc.has_lake:
        raise LeanError("no working native lake (the toolchain is "
                        f"{tc.kind}: {tc.version}); build without --lake")
    if lake:
        result = _build_with_lake(project, tc, say, force)
    else:
        result = _build_modules(project, tc, effective_jobs(jobs), force, timeout, say)
    extras = [Path(p) for p in extra_files]
    if extras:
        if result.ok:
            result.extra = compile_files(extras, root=rootp, jobs=jobs, timeout=timeout,
                                         toolchain=tc, on_event=on_event)
            result.ok = all(r.ok for r in result.extra)
        else:
            result.messages.append("the extra files were not checked: the package did not build")
    result.seconds = time.monotonic() - t0
    if not result.ok and result.returncode == 0:
        result.returncode = 1
    return result


def progress_line(done: int, total: int, seconds: list[float], left: int, jobs: int) -> str:
    """`lean: 3 of 11 modules done; 8 left, about 12 min`: the estimate is the mean time of
    the modules compiled so far, times those left, over the Lean processes at once."""
    head = f"lean: {done} of {total} modules done"
    if left == 0:
        return head
    if not seconds:
        return f"{head}; {left} left"
    eta = sum(seconds) / len(seconds) * left / max(1, min(jobs, left))
    return f"{head}; {left} left, about {max(1, round(eta / 60))} min"


def _build_modules(project: Project, tc: Toolchain, jobs: int, force: bool,
                   timeout: float | None, say: Event) -> BuildResult:
    t_lock = time.monotonic()
    with _build_lock(project, exclusive=True, say=say):
        waited = time.monotonic() - t_lock
        modules = discover(project)
        order = topo_order(modules, project)
        _prune_stale(project, modules)
        olean_dir = project.olean_dir
        olean_dir.mkdir(parents=True, exist_ok=True)
        results: dict[str, ModuleResult] = {}
        traces: dict[str, str] = {}
        pending = critical_first(modules, order)
        running: dict[Future, str] = {}

        def compile_one(name: str, trace: str) -> ModuleResult:
            m = modules[name]
            out = m.olean(olean_dir)
            out.parent.mkdir(parents=True, exist_ok=True)
            _remove_outputs(out)
            label = project.rel(m.path)
            say(f"lean: building {name} ({label})")
            r = run_lean(tc, [*project.options, m.rel_source(), "-o", str(out),
                              "-i", str(out.with_suffix(".ilean"))],
                         cwd=m.lib.src_dir, lean_path=[olean_dir], project_root=project.root,
                         file_label=label, timeout=timeout, on_event=say)
            ok = r.ok and out.is_file()
            if r.ok and not out.is_file():
                r.diagnostics.append(Diagnostic(label, 1, 1, "error", "Lean wrote no .olean"))
            status = "built" if ok else "failed"
            if ok:
                _write_stamp(project, name, {
                    "format": STAMP_FORMAT, "module": name, "trace": trace,
                    "source": label, "seconds": round(r.seconds, 2), "max_rss_mb": r.max_rss_mb,
                    "diagnostics": [asdict(d) for d in r.diagnostics],
                })
            else:
                with contextlib.suppress(OSError):
                    _stamp_path(project, name).unlink()
                _remove_outputs(out)
            say(f"lean: {'built' if ok else 'FAILED'} {name} in {r.seconds:.1f} s, "
                f"{r.max_rss_mb / 1024:.1f} GB")
            return ModuleResult(name, label, status, r.seconds, r.diagnostics, r.max_rss_mb)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            while True:
                changed = True
                while changed:
                    changed = False
                    for name in list(pending):
                        m = modules[name]
                        if any(d not in results for d in m.imports):
                            continue
                        label = project.rel(m.path)
                        bad = [d for d in m.imports if results[d].status in ("failed", "blocked")]
                        if bad:
                            ln, c = m.import_pos.get(bad[0], (1, 1))
                            results[name] = ModuleResult(name, label, "blocked", 0.0, [Diagnostic(
                                label, ln, c, "error", f"not built: its import {bad[0]} failed")])
                            pending.remove(name)
                            changed = True
                            continue
                        trace = module_trace(m, traces, tc, project)
                        stamp = _read_stamp(project, name)
                        if (not force and stamp and stamp.get("trace") == trace
                                and m.olean(olean_dir).is_file()):
                            traces[name] = trace
                            diags = [_diag_from(d) for d in stamp.get("diagnostics", [])]
                            results[name] = ModuleResult(name, label, "skipped", 0.0, diags)
                            pending.remove(name)
                            changed = True
                        elif len(running) < jobs:
                            traces[name] = trace
                            running[pool.submit(compile_one, name, trace)] = name
                            pending.remove(name)
                if not running:
                    if pending:  # cannot happen with an acyclic graph
                        raise LeanError(f"cannot order modules: {', '.join(pending)}")
                    break
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in done:
                    results[running.pop(fut)] = fut.result()
                say(progress_line(len(results), len(order),
                                  [r.seconds for r in results.values() if r.status in ("built", "failed")],
                                  len(pending) + len(running), jobs))
        mods = [results[n] for n in order]
        ok = all(m.status in ("built", "skipped") for m in mods)
        return BuildResult(ok=ok, mode="modules", modules=mods, returncode=0 if ok else 1,
                           waited=waited)


_LAKE_DIAG_RE = re.compile(
    r"^(?:\S+\s+)?(error|warning|info):\s+(?:\./)?(\S+?\.lean):(\d+):(\d+):\s*(.*)$")


def _build_with_lake(project: Project, tc: Toolchain, say: Event, force: bool) -> BuildResult:
    cmd = [tc.lake or "lake", "build"]
    if force:
        say("lean: --force with lake: lake decides what to rebuild (use `lake clean` to start over)")
    say(f"lean: {' '.join(cmd)} ({tc.version})")
    t0 = time.monotonic()
    lines: list[str] = []
    with _build_lock(project, exclusive=True, say=say), lean_slot(say):
        try:
            p = subprocess.Popen(cmd, cwd=project.root, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, errors="replace")
        except OSError as e:
            raise LeanError(f"cannot run {cmd[0]}: {e.strerror}") from None
        assert p.stdout is not None
        for ln in p.stdout:
            ln = ln.rstrip("\n")
            lines.append(ln)
            say(ln)
        rc = p.wait()
    diags = []
    cur: Diagnostic | None = None
    for ln in lines:
        m = _LAKE_DIAG_RE.match(ln.strip())
        if m:
            sev = {"info": "information"}.get(m.group(1), m.group(1))
            cur = Diagnostic(m.group(2), int(m.group(3)), int(m.group(4)) + 1, sev, m.group(5))
            diags.append(cur)
    ok = rc == 0
    if not ok and not any(d.is_error for d in diags):
        diags.append(Diagnostic("lakefile.lean", 1, 1, "error",
                                f"lake build exited with status {rc}: "
                                + (lines[-1] if lines else "no output")))
    mod = ModuleResult("(lake build)", "lakefile.lean", "built" if ok else "failed",
                       time.monotonic() - t0, diags)
    return BuildResult(ok=ok, mode="lake", modules=[mod], returncode=0 if ok else 1)


# --------------------------------------------------------------------------------------
# Extra files (generated Lean, test fixtures) against the built package
# --------------------------------------------------------------------------------------

def compile_file(path: str | os.PathLike, *, root: str | os.PathLike | None = None,
                 timeout: float | None = None, toolchain: Toolchain | None = None,
                 options: Iterable[str] | None = None, on_event: Event | None = None,
                 stdin: str | os.PathLike | None = None) -> CompileResult:
    """Elaborate one Lean file against the built package; its diagnostics, no outputs.

    The file may live anywhere (tests use temporary folders). It sees the `Serq` and
    `Papers` modules as last built by `build()` (build first). The package's
    `leanOptions` apply unless `options` is given. `stdin`: a file the file's `#eval`s read
    as standard input.
    """
    rootp = find_root(root)
    project = load_project(rootp)
    tc = toolchain or load_toolchain(rootp)
    p = Path(path).resolve()
    if not p.is_file():
        raise LeanError(f"no such Lean file: {path}")
    opts = list(project.options if options is None else options)
    label = project.rel(p)
    say = on_event or _quiet
    say(f"lean: checking {label}")
    with _build_lock(project, exclusive=False, say=say):
        if tc.has_lake:
            r = run_lean(tc, [*opts, p.name], cwd=p.parent, lean_path=[], project_root=rootp,
                         file_label=label, timeout=timeout, on_event=say,
                         prefix=[tc.lake or "lake", "-d", str(rootp), "env", *tc.lean],
                         stdin=Path(stdin) if stdin is not None else None)
        else:
            r = run_lean(tc, [*opts, p.name], cwd=p.parent, lean_path=[project.olean_dir],
                         project_root=rootp, file_label=label, timeout=timeout, on_event=say,
                         stdin=Path(stdin) if stdin is not None else None)
    say(f"lean: {'ok' if r.ok else 'FAILED'} {label} in {r.seconds:.1f} s, {r.max_rss_mb / 1024:.1f} GB")
    return r


def compile_files(paths: Iterable[str | os.PathLike], *, root: str | os.PathLike | None = None,
                  jobs: int | None = DEFAULT_JOBS, timeout: float | None = None,
                  toolchain: Toolchain | None = None,
                  on_event: Event | None = None) -> list[CompileResult]:
    """`compile_file` for several files, `jobs` at a time; results in the given order."""
    paths = list(paths)
    rootp = find_root(root)
    tc = toolchain or load_toolchain(rootp)
    n = effective_jobs(jobs)
    with ThreadPoolExecutor(max_workers=n) as pool:
        futs = [pool.submit(compile_file, p, root=rootp, timeout=timeout, toolchain=tc,
                            on_event=on_event) for p in paths]
        return [f.result() for f in futs]


# --------------------------------------------------------------------------------------
# Check
# --------------------------------------------------------------------------------------

@dataclass
class CheckResult:
    ok: bool
    findings: list[Finding]
    sorry_warnings: list[Diagnostic]
    build: BuildResult | None
    #: claims of the paper programs without a current statement or proof (`serq.leangen.claims`)
    claims: list[str] = field(default_factory=list)


def check(root: str | os.PathLike | None = None, *, run_build: bool = True,
          jobs: int | None = DEFAULT_JOBS, extra: Iterable[str | os.PathLike] = (),
          on_event: Event | None = None) -> CheckResult:
    """Refuse `sorry`, `admit`, `axiom`, `native_decide` (source scan of the libraries'
    folders and `extra`) and the build's "declaration uses 'sorry'" warnings."""
    rootp = find_root(root)
    project = load_project(rootp)
    extra = list(extra)
    findings = check_sources(project, extra)
    from serq.leangen.claims import stale_claims  # the paper programs' claims have current proofs
    claims = [p.render(rootp) for p in stale_claims(rootp)]
    result = None
    sorry: list[Diagnostic] = []
    if run_build:
        lean_extra = [p for p in extra if Path(p).is_file()]
        result = build(rootp, jobs=jobs, extra_files=lean_extra, on_event=on_event)
        sorry = [d for d in result.diagnostics if d.uses_sorry]
    ok = not findings and not sorry and not claims and (result is None or result.ok)
    return CheckResult(ok, findings, sorry, result, claims)
