"""IR -> Lean: the fragment check, the exported program, and the generated oracle modules."""

from __future__ import annotations

import re

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from serq.errors import SerqError
from serq.ir import models as ir
from serq.leangen.fragment import fragment, render_program
from serq.leangen.oracle_lean import instance_ir
from serq.link import link_file
from serq.oracle import load_scenario, scenario_paths

ORACLE = REPO / "tests" / "data" / "oracle"


def test_generated_oracle_modules_are_fresh():
    """lean/Serq/Oracle*.lean are what the scenario files give through the templates."""
    p = subprocess.run([sys.executable, "scripts/gen_oracle_lean.py", "--check"], cwd=REPO, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr


def test_generated_kernel_fast_modules_are_fresh():
    """lean/Serq/KernelFast.lean and KernelFastEq.lean are what the kernel interpreter's sources give."""
    p = subprocess.run([sys.executable, "scripts/gen_kernel_fast.py", "--check"], cwd=REPO, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr


def test_oracle_theorems_evaluate_the_fast_copy():
    """Each oracle theorem states `Serq.Kernel.agreesWithVllm` and rewrites it to the proved-equal copy."""
    for path in (REPO / "lean" / "Serq" / "Oracle").glob("*.lean"):
        text = path.read_text()
        assert "public import Serq.KernelFastEq\n" in text, path.name
        assert text.count("rw [← Serq.Kernel.Fast.agreesWithVllm_eq]\n  decide +kernel") == \
            text.count("theorem agrees_with_vllm"), path.name
    eq = (REPO / "lean" / "Serq" / "KernelFastEq.lean").read_text()
    assert "theorem agreesWithVllm_eq : @agreesWithVllm = @Serq.Kernel.agreesWithVllm" in eq


def test_every_shared_scenario_has_a_theorem():
    text = "".join(p.read_text() for p in (REPO / "lean" / "Serq" / "Oracle").glob("*.lean"))
    for path in scenario_paths(ORACLE):
        assert f"namespace {path.stem}\n" in text or f"namespace s_{path.stem}\n" in text, path.stem
    assert text.count("theorem agrees_with_vllm") == len(scenario_paths(ORACLE))


def test_scenario_fragment_reads_the_config_through_the_ir():
    sc = load_scenario(ORACLE / "vllm-v1" / "e_longchunk.json")
    program, folder = instance_ir(sc)
    frag = fragment(program, folder)
    e = frag.engine
    assert (e.budget, e.reqs_cap, e.kv_blocks, e.block_size, e.chunk, e.caching) == (64, 4, 63, 16, 24, False)
    assert [(a, [(t.new, t.out) for t in ts]) for a, ts in frag.sessions] == [(0, [(100, 3)]), (0, [(100, 3)])]


def test_export_renders_the_programs_values():
    program = link_file(REPO / "examples/oracle/vllm_request.sq", {"max_num_seqs": "2"})
    text = render_program(fragment(program, REPO / "examples/oracle"), "Serq.Programs.T")
    assert "def engine : Engine := ⟨64, 2, 39, 16, 0, false, false⟩" in text
    assert "⟨0, [⟨100, 5, 0, false⟩]⟩" in text


@pytest.mark.parametrize("example,phrase", [
    ("multi-turn/vllm.sq", "not on the step clock"),
    ("pd-disaggregation/llmd_nixl_pull.sq", "one step engine"),
    ("single-turn/mg1.sq", "one step engine; this program has 0"),
])
def test_programs_outside_the_fragment_are_refused_with_the_construct(example, phrase):
    path = REPO / "examples" / example
    with pytest.raises(SerqError) as info:
        fragment(link_file(path), path.parent)
    assert phrase in info.value.message, info.value.message


def test_eviction_keys_are_outside_the_fragment(tmp_path):
    # the model's KV cache evicts least recently freed first: `evict by (waiting, size)` (or any key)
    # is refused, naming vLLM's order and the engine's location
    src = REPO / "examples/oracle/vllm_request.sq"
    text = src.read_text().replace("evict lru;", "evict by (waiting, size);")
    assert "evict by (waiting, size);" in text
    (tmp_path / "p.sq").write_text(text)
    for f in src.parent.glob("*.csv"):
        (tmp_path / f.name).write_text(f.read_text())
    with pytest.raises(SerqError) as info:
        fragment(link_file(tmp_path / "p.sq"), tmp_path)
    assert "outside the Lean fragment" in info.value.message and "`evict lru`" in info.value.message
    assert info.value.span is not None and info.value.span.file.endswith("p.sq") and info.value.span.line == 20


def test_export_refusal_names_the_location():
    from click.testing import CliRunner

    from serq.cli import main
    r = CliRunner().invoke(main, ["lean", "export", str(REPO / "examples/multi-turn/vllm.sq")])
    assert r.exit_code == 1
    # outside both models: the kernel's reason at its construct, then the engine model's at its own
    assert ("vllm.sq:25:3: error: outside the Lean kernel fragment: the number 0.001: the fragment computes "
            "over the natural numbers; nor is it in the engine model's fragment (Serq.Exec): ") in r.output
    assert "vllm.sq:25:3: engine `vllm` is not on the step clock (`execute (1)`)" in r.output


@pytest.mark.lean
def test_exported_program_builds_and_runs_in_lean(tmp_path: Path):
    """The exported module elaborates against the built package, and a claim about its run holds."""
    from serq.leangen.build import compile_file
    program = link_file(REPO / "examples/oracle/vllm_request.sq")
    text = render_program(fragment(program, REPO / "examples/oracle"), "Serq.Programs.Alone")
    text = text.replace("end Serq.Programs.Alone", (
        "theorem answered : meets (run engine sessions 100 (init sessions)).outcomes [⟨0, 0, 1, 5, 0, 0⟩] = true := by\n"
        "  decide +kernel\n\nend Serq.Programs.Alone"))
    f = tmp_path / "Alone.lean"
    f.write_text(text)
    r = compile_file(f)
    assert r.ok, [d.message for d in r.diagnostics]


# ------------------------------------------------------- Lean types in step with Python's

def _lean_structure_fields(name: str, module: str = "Exec.lean") -> list[str]:
    """The fields of `structure NAME where` in lean/Serq/MODULE, in order."""
    import re
    lines = (REPO / "lean" / "Serq" / module).read_text().splitlines()
    start = lines.index(f"structure {name} where")
    fields = []
    for line in lines[start + 1:]:
        m = re.match(r"  ([A-Za-z]\w*) : ", line)
        if not m:
            break
        fields.append(m.group(1))
    return fields


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def test_the_phase_separated_oracle_program_differs_only_by_its_only():
    """serq/programs/vllm_request_phased.sq is the oracle program with `only (in_phase())` in both
    statements of its schedule (and the def): nothing else, comments aside."""
    from serq.leangen.fragment import PHASED_PROGRAM
    from serq.oracle import ORACLE_PROGRAM

    def code(path: Path) -> list[str]:
        lines = [line.split("//")[0].rstrip() for line in path.read_text().splitlines()]
        return [line for line in lines if line.strip()]
    phased = [line.replace(" only (in_phase())", "") for line in code(PHASED_PROGRAM)
              if not line.startswith("def in_phase()")]
    assert phased == code(ORACLE_PROGRAM)
    assert sum(line.count("only (in_phase())") for line in code(PHASED_PROGRAM)) == 2


def test_lean_engine_and_turn_mirror_the_fragment_types():
    """The templates fill Lean's `Engine` and `Turn` positionally from FragmentEngine and TurnSpec:
    the fields must be the same, in the same order."""
    import dataclasses
    from serq.leangen.fragment import FragmentEngine
    from serq.oracle import TurnSpec
    assert _lean_structure_fields("Engine") == [_camel(f.name) for f in dataclasses.fields(FragmentEngine)]
    assert _lean_structure_fields("Turn") == [_camel(f.name) for f in dataclasses.fields(TurnSpec)]


def test_lean_record_mirrors_what_claims_read_of_an_iteration():
    """Lean's `Record` is the interpreter's IterationRecord restricted to the natural-number
    attributes of the fragment; every one is a context variable of the IR (what claims read)."""
    import typing
    from serq.sim.steps import IterationRecord
    lean = _lean_structure_fields("Record")
    assert lean[0] == "start"
    claim_readable = set(typing.get_args(ir.ContextVar))
    python = [f for f in IterationRecord.__annotations__ if _camel(f) in lean]
    assert [_camel(f) for f in python] == lean
    assert set(python[1:]) <= claim_readable
    # the fragment records what the issue lists; `attention` needs reals and stays out
    assert set(python[1:]) == {"tokens", "prefilled", "decoders", "residents", "kv_decode", "kv_prefill",
                               "demand", "served", "arrived"}


def test_kernel_iteration_mirrors_the_recorded_fields():
    """`Serq.Kernel.Iteration`'s fields are the interpreter's record fields the kernel DRT sends
    (`ITERATION_FIELDS`, in order; a field Lean keeps doubled is named so, `attention2`)."""
    from serq.leangen.kernel import ITERATION_FIELDS, ITERATION_SCALE
    from serq.sim.steps import IterationRecord
    assert set(ITERATION_FIELDS) <= set(IterationRecord.__annotations__)
    assert _lean_structure_fields("Iteration", "KernelMachine.lean") == [
        _camel(f) + (str(ITERATION_SCALE[f]) if f in ITERATION_SCALE else "") for f in ITERATION_FIELDS]


def test_lean_outcome_and_record_rows_have_the_drt_observations_shape():
    """The differential tests fill `Outcome`/`Expect` and `Record` positionally from what they observe."""
    from serq.leangen.drt import Case, observe
    from serq.leangen.fragment import FragmentEngine
    from serq.oracle import TurnSpec
    case = Case(FragmentEngine(8, 2, 8, 2, 0, True), ((0, (TurnSpec(5, 3, 1), TurnSpec(4, 2))),))
    observed = observe(case)
    assert _lean_structure_fields("Outcome") == ["sid", "turn", "first", "last", "preemptions", "cached"]
    assert {len(o) for o in observed.outcomes} == {6}
    assert {len(r) for r in observed.records} == {len(_lean_structure_fields("Record"))}


# ------------------------------------------------------- the kernel fragment (Serq.Kernel)
SCRIPTED = REPO / "examples" / "multi-turn" / "scripted_agent.sq"

# examples/multi-turn/scripted_agent.sq by hand: session s starts with context 100 (s + 1); a turn's
# model run takes floor(context / 100) * 2, a tool call 1 + s, and context grows by 50 a step
SCRIPTED_ANSWERS = {
    0: [(0, 1, 0, 2), (0, 2, 3, 5), (0, 3, 6, 10), (0, 4, 11, 15)],
    1: [(1, 1, 0, 4), (1, 2, 6, 10), (1, 3, 12, 18), (1, 4, 20, 26)],
    2: [(2, 1, 0, 6), (2, 2, 9, 15), (2, 3, 18, 26), (2, 4, 29, 37)],
}


SANDBOX = REPO / "examples" / "multi-turn" / "shared_sandbox.sq"

# examples/multi-turn/shared_sandbox.sq by hand: a model call takes 2 on the fifo(1) model (arrival
# order), a tool call 3 in the sandbox of cap 1 (fifo queue). Turn 1 of s0, s1, s2 runs 0-2, 2-4,
# 4-6. s0 holds the sandbox 2-5; s1 (asks at 4) gets it at 5, and its tool ends at 8 as s0's second
# model call (6-8) does: s1's timer was set first (at 5, s0's at 6), so s1 releases, submits turn 2
# and queues at the busy model first; the sandbox goes to s2 (waiting since 6) at 8, then s0's model
# call ends, the model takes s1 (8-10), and s0 asks for the sandbox behind s2. And so on:
SANDBOX_ANSWERS = {
    0: [(0, 1, 0, 2), (0, 2, 5, 8), (0, 3, 14, 16)],
    1: [(1, 1, 0, 4), (1, 2, 8, 10), (1, 3, 17, 19)],
    2: [(2, 1, 0, 6), (2, 2, 11, 13), (2, 3, 20, 22)],
}
SANDBOX_ADMITTED = {0: [2, 11], 1: [5, 14], 2: [8, 17]}  # the `sandbox_at` observations


# a renewal workload: session k arrives at 3 (k + 1) and takes 4 on the fifo(1) model, so s0 runs
# 3-7, s1 (arrives at 6) waits and runs 7-11, s2 (at 9) 11-15
RENEWAL_SOURCE = ("fn main() {\n  stage model : fifo(1);\n  workload { arrive renewal(3); }\n"
                  "  server { run model (cost(model, 4)); }\n}\n")
RENEWAL_ANSWERS = {0: [(0, 1, 3, 7)], 1: [(1, 1, 6, 11)], 2: [(2, 1, 9, 15)]}


# a pool of blocks of 2 and holds with a reserve: each takes 1 unit, 2 in blocks, and needs room for
# its reserve 3, 4 in blocks; so with s0 holding 2 of the 5, s1 (2 + 4 > 5) waits until s0's delay of
# 2 ends, and s2 until s1's: answered at 2, 4 and 6 (units and reserve taken as they are, 1 and 3,
# all three would fit at 0: rounding is what makes them wait)
BLOCKS_SOURCE = ("fn main() {\n  stage model : delay;\n  pool kv { cap 5; block 2; }\n  workload { arrive batch(3); }\n"
                 "  server { hold kv (cost(kv, 1)) reserve (cost(kv, 3)) { run model (cost(model, 2)); } }\n}\n")
BLOCKS_ANSWERS = {0: [(0, 1, 0, 2)], 1: [(1, 1, 0, 4)], 2: [(2, 1, 0, 6)]}


# the prefix cache: a pool of 5 in blocks of 1, two sessions of two turns each holding 4 for a
# delay of 2 and caching 3 at the release. s1 waits for s0 (4 + 4 > 5); at 2 s0's release caches 3,
# s1's admission (4) evicts 2 of them from the tail (4 + 3 > 5), leaving s0 1; at 4 s1 caches 3 and
# s0's second turn consumes its 1 (observed: `cached` 1) and evicts 2 of s1's; at 6 s1's second
# turn consumes its 1. Answers at 2, 6 (s0) and 4, 8 (s1); `hit` 0 then 1 for each
CACHE_SOURCE = ("fn main() {\n  stage model : delay;\n  pool kv { cap 5; block 1; }\n"
                "  workload { arrive batch(2); session { turn; turn; } }\n"
                "  server {\n    hold kv (cost(kv, 4)) {\n      observe hit = cached;\n      run model (cost(model, 2));\n"
                "    } cache (cost(kv, 3));\n  }\n}\n")
CACHE_ANSWERS = {0: [(0, 1, 0, 2), (0, 2, 2, 6)], 1: [(1, 1, 0, 4), (1, 2, 4, 8)]}
CACHE_OBSERVATIONS = {0: [(0, 1, 0, 0, 0), (0, 2, 0, 4, 1)], 1: [(1, 1, 0, 2, 0), (1, 2, 0, 6, 1)]}


# the pools' observables, by hand: a pool of 4 in blocks of 2; three sessions at 0 each observe the
# holds waiting ahead of it (`queued`: 0, 1, 2: each joins behind the ones before), hold 1 unit (2 in
# blocks) for a delay of 2 and cache 2 at the release. At 0 s0 and s1 are admitted (2 + 2 = 4), s2
# waits; inside, s0 and s1 see 2 holders and 4 used. At 2 s0's timer fires first: s0 gives back, sees
# `free` 2 (4 less s1's 2: its own cached 2 still counts as free) and its `cachedin` 2; then s2 is
# admitted (evicting s0's entry: 4 + 2 > 4) and sees 2 holders (s1, s2) and 4 used; then s1 gives back
# and sees `free` 2 (s2's 2 used, its own 2 cached) and `cachedin` 2. At 4 s2 gives back: `free` 4,
# `cachedin` 2. Observation names: ahead 0, holding 1, taken 2, room 3, mine 4
OBSERVABLES_SOURCE = ("fn main() {\n  stage model : delay;\n  pool kv { cap 4; block 2; }\n  workload { arrive batch(3); }\n"
                      "  server {\n    observe ahead = queued(kv);\n    hold kv (cost(kv, 1)) {\n"
                      "      observe holding = holders(kv);\n      observe taken = used(kv);\n      run model (cost(model, 2));\n"
                      "    } cache (cost(kv, 2));\n    observe room = free(kv);\n    observe mine = cachedin(kv);\n  }\n}\n")
OBSERVABLES_ANSWERS = {0: [(0, 1, 0, 2)], 1: [(1, 1, 0, 2)], 2: [(2, 1, 0, 4)]}
OBSERVABLES_OBSERVATIONS = {
    0: [(0, 1, 0, 0, 0), (0, 1, 1, 0, 2), (0, 1, 2, 0, 4), (0, 1, 3, 2, 2), (0, 1, 4, 2, 2)],
    1: [(1, 1, 0, 0, 1), (1, 1, 1, 0, 2), (1, 1, 2, 0, 4), (1, 1, 3, 2, 2), (1, 1, 4, 2, 2)],
    2: [(2, 1, 0, 0, 2), (2, 1, 1, 2, 2), (2, 1, 2, 2, 4), (2, 1, 3, 4, 4), (2, 1, 4, 4, 2)],
}


# one step engine, vLLM's default schedule: tokens cap 4, each at most 3, an iteration lasting
# 1 + floor(tokens / 4), two request slots; three sessions each prefill 5 then decode 2. At 0 s0 and s1
# are admitted (s2 waits: two slots): s0 gets 3, s1 the 1 left (0-2); at 2 s0 its last 2, s1 2 (2-4);
# at 4 s0's prefill has sampled its first token and it decodes (1), s1 its last 2, 1 of the budget left
# and no slot (4-5); at 5 both decode (5-6); at 6 s0's second decode token ends its turn, its slot
# goes to s2, admitted in the iteration after s1's decode: 1 + 3 (6-8); then s2 alone: 2 (8-9), 1
# (9-10), 1 (10-11). Per turn (serial, turn, first token, its iteration's start, the last's start, the
# turn's preemptions, the prefix its first admission reused), and per iteration (start, tokens, prefilled, decoders, residents, demand, served, arrived):
ENGINE_SOURCE = ("fn main() {\n  device gpu { }\n  engine llm on gpu {\n    reqs cap 2;\n    tokens cap 4;\n"
                 "    request (p, o) {\n      prefill (p);\n      decode (o);\n    }\n    schedule {\n"
                 "      advance running each at most (3);\n"
                 "      admit waiting while (running.preempted == 0) each at most (3) taking reqs (1);\n    }\n"
                 "    execute (1 + floor(batch.tokens / 4));\n  }\n  pool reqs on llm { queue fifo; }\n"
                 "  workload { arrive batch(3); }\n  server { llm (5, 2); }\n}\n")
ENGINE_ANSWERS = {0: [(0, 1, 0, 6)], 1: [(1, 1, 0, 8)], 2: [(2, 1, 0, 11)]}
ENGINE_TOKENS = {0: [(0, 1, 4, 2, 5, 0, 0)], 1: [(1, 1, 5, 4, 6, 0, 0)], 2: [(2, 1, 9, 8, 10, 0, 0)]}
ENGINE_ITERATIONS = [(0, 4, 4, 0, 2, 6, 0, 3), (2, 4, 4, 0, 2, 5, 4, 3), (4, 3, 2, 1, 2, 3, 8, 3),
                     (5, 2, 0, 2, 2, 2, 11, 3), (6, 4, 3, 1, 2, 4, 13, 3), (8, 2, 2, 0, 1, 2, 17, 3),
                     (9, 1, 0, 1, 1, 1, 19, 3), (10, 1, 0, 1, 1, 1, 20, 3)]


# the same engine serving the shortest remaining run first (`advance running by (remaining)`), the
# sessions' prefills 8, 5 and 2 (`8 - 3 * serial`). At 0 s0 is admitted and served 3, s1 the 1 left (0-2;
# s2 waits: two slots); at 2 s1 (4 left) goes before s0 (5 left): s1 3, s0 1 (2-4; in admission order s0
# would take 3); at 4 s1's last 1 goes first, then s0 3 (4-6); at 6 s0's last prefill token (1 left)
# before s1's decode (2 left), 2 of the budget left and no slot (6-7); at 7 both decode, s1 (1 left)
# first (7-8); at 8 s1's turn is answered, its slot goes to s2, admitted after s0's last decode: 1 + 2
# (8-9); then s2's two decodes (9-10, 10-11).
BY_REMAINING_SOURCE = (ENGINE_SOURCE.replace("advance running each at most (3);",
                                             "advance running by (remaining) each at most (3);")
                       .replace("llm (5, 2);", "llm (8 - 3 * serial, 2);"))
BY_REMAINING_ANSWERS = {0: [(0, 1, 0, 9)], 1: [(1, 1, 0, 8)], 2: [(2, 1, 0, 11)]}
BY_REMAINING_TOKENS = {0: [(0, 1, 7, 6, 8, 0, 0)], 1: [(1, 1, 6, 4, 7, 0, 0)], 2: [(2, 1, 9, 8, 10, 0, 0)]}
BY_REMAINING_ITERATIONS = [(0, 4, 4, 0, 2, 6, 0, 3), (2, 4, 4, 0, 2, 6, 4, 3), (4, 4, 4, 0, 2, 4, 8, 3),
                           (6, 2, 1, 1, 2, 2, 12, 3), (7, 2, 0, 2, 2, 2, 14, 3), (8, 3, 2, 1, 2, 3, 16, 3),
                           (9, 1, 0, 1, 1, 1, 19, 3), (10, 1, 0, 1, 1, 1, 20, 3)]


# the same engine under FasterTransformer's phases (`only (in_phase)` on both statements, in_phase =
# `running.decoding > 0 ? decoding : !decoding`): 0-2 and 2-4 as ENGINE_SOURCE's (no decode yet: the
# prefills go); at 4 s0 decodes, so only it is served (s1's last 2 prefill tokens wait): 4-5, 5-6; at 6
# s0's turn is answered, s1 prefills its 2 and s2, admitted to the freed slot while no decode runs, 2
# (6-8); at 8 s1 decodes alone, s2's 3 waiting (8-9, 9-10); at 10 s2 prefills its 3 (10-11) and
# decodes (11-12, 12-13).
PHASES_SOURCE = (ENGINE_SOURCE.replace("advance running each at most (3);",
                                       "advance running only (running.decoding > 0 ? decoding : !decoding) "
                                       "each at most (3);")
                 .replace("admit waiting while",
                          "admit waiting only (running.decoding > 0 ? decoding : !decoding) while"))
PHASES_ANSWERS = {0: [(0, 1, 0, 6)], 1: [(1, 1, 0, 10)], 2: [(2, 1, 0, 13)]}
PHASES_TOKENS = {0: [(0, 1, 4, 2, 5, 0, 0)], 1: [(1, 1, 8, 6, 9, 0, 0)], 2: [(2, 1, 11, 10, 12, 0, 0)]}
PHASES_ITERATIONS = [(0, 4, 4, 0, 2, 6, 0, 3), (2, 4, 4, 0, 2, 5, 4, 3), (4, 1, 0, 1, 2, 3, 8, 3),
                     (5, 1, 0, 1, 2, 3, 9, 3), (6, 4, 4, 0, 2, 5, 10, 3), (8, 1, 0, 1, 2, 4, 14, 3),
                     (9, 1, 0, 1, 2, 4, 15, 3), (10, 3, 3, 0, 1, 3, 16, 3), (11, 1, 0, 1, 1, 1, 19, 3),
                     (12, 1, 0, 1, 1, 1, 20, 3)]


# the engine's memory: a KV pool of cap 8 in blocks of 2 (`preempt none`), each request taking a slot and 2
# units and growing them as its runs advance (`growing kv`), caching 4 at its end; two sessions prefill 3,
# then decode 2 (s0) and 1 (s1). At 0 s0 is admitted (kv 2) and served 3, its hold grown to 4 (position 3);
# s1 is admitted (kv 2, used 6) and takes the 1 left, within its 2 (0-1). At 1 s0 decodes (position 4: its 4
# cover it) and s1 prefills its last 2, grown to 4 (used 8) (1-2). At 2 s0's decode needs a third block
# (position 5): 8 + 2 > 8, so it waits, unserved (`preempt none`); s1 decodes (position 4) (2-3). At 3 s1's
# turn is answered, its hold gives back 4 and caches 4 of its prefix (used 4); s0 grows to 6 (used 6) and
# the cache gives way, 2 from the tail of s1's entry (6 + 4 > 8) (3-4); at 4 s0's turn is answered.
KV_SOURCE = ("fn main() {\n  device gpu { kv cap 8; }\n  engine llm on gpu {\n    reqs cap 2;\n    tokens cap 4;\n"
             "    request (p, o) {\n      prefill (p) growing kv;\n      decode (o) growing kv;\n      cache (4);\n    }\n"
             "    schedule {\n      advance running each at most (3);\n"
             "      admit waiting while (running.preempted == 0) each at most (3) taking reqs (1), kv (2);\n    }\n"
             "    execute (1);\n  }\n  pool kv on gpu { block 2; evict lru; preempt none; }\n"
             "  pool reqs on llm { queue fifo; }\n  workload { arrive batch(2); }\n  server { llm (3, 2 - serial); }\n}\n")
KV_ANSWERS = {0: [(0, 1, 0, 4)], 1: [(1, 1, 0, 3)]}
KV_TOKENS = {0: [(0, 1, 1, 0, 3, 0, 0)], 1: [(1, 1, 2, 1, 2, 0, 0)]}
# Per iteration also the batch's KV sums (kv_decode, kv_prefill, twice the attention): at 0 both prefill from
# position 0, 3 and 1 tokens: kv_prefill 0, attention 3 * (0 + 3/2) + 1 * (0 + 1/2) = 5 (doubled 10); at 1 s0
# decodes from 3, its KV once the token is written ⌈4 / 2⌉ * 2 = 4, and s1 prefills 2 from 1: kv_prefill 1,
# attention 2 * (1 + 1) = 4 (8); at 2 s1 decodes from 3 (4); at 3 s0 decodes from 4, ⌈5 / 2⌉ * 2 = 6.
KV_ITERATIONS = [(0, 4, 4, 0, 2, 6, 0, 2, 0, 0, 10), (1, 3, 2, 1, 2, 3, 4, 2, 4, 1, 8), (2, 1, 0, 1, 2, 2, 7, 2, 4, 0, 0),
                 (3, 1, 0, 1, 1, 1, 8, 2, 6, 0, 0)]

# KV_SOURCE's program with an iteration cost that reads the three sums: 1 + ⌊kv_decode / 4⌋ +
# ⌈attention / 4⌉ + kv_prefill. The batches are KV_SOURCE's (every session is admitted at 0) and so are their
# sums; the times change: 1 + 0 + ⌈5 / 4⌉ + 0 = 3 (0-3), 1 + 1 + 1 + 1 = 4 (3-7), 1 + 1 + 0 + 0 = 2 (7-9, s1's
# turn answered), 1 + ⌊6 / 4⌋ = 2 (9-11, s0's).
KV_COST_SOURCE = KV_SOURCE.replace(
    "execute (1);", "execute (1 + floor(batch.kv_decode / 4) + ceil(batch.attention / 4) + batch.kv_prefill);")
KV_COST_ANSWERS = {0: [(0, 1, 0, 11)], 1: [(1, 1, 0, 9)]}
KV_COST_TOKENS = {0: [(0, 1, 3, 0, 9, 0, 0)], 1: [(1, 1, 7, 3, 7, 0, 0)]}
KV_COST_ITERATIONS = [(0, 4, 4, 0, 2, 6, 0, 2, 0, 0, 10), (3, 3, 2, 1, 2, 3, 4, 2, 4, 1, 8),
                      (7, 1, 0, 1, 2, 2, 7, 2, 4, 0, 0), (9, 1, 0, 1, 1, 1, 8, 2, 6, 0, 0)]
KV_COST_TERM = ("(.bin .add (.bin .add (.bin .add (.num 1) (.floorDiv (.stageVar 12) 4)) "
                "(.floorDiv (.bin .add (.stageVar 14) (.num 7)) 8)) (.stageVar 13))")


def _iterations_theorem(iterations, stage: int = 0, run: str = "runProgram program 1000") -> str:
    """The Lean theorem that stage `stage`'s engine's records in the program's run are `iterations` (newest
    first in Lean): whole records with the KV sums, else their first eight fields (`_hand_fields`)."""
    records = f"(getEngineState ({run}).engines {stage}).records"
    if len(iterations[0]) == 8:
        records += (".map (fun r => [r.start, r.tokens, r.prefilled, r.decoders, r.residents, r.demand, r.served, "
                    "r.arrived])")
        rows = ", ".join("[" + ", ".join(map(str, r)) + "]" for r in reversed(iterations))
    else:
        rows = ", ".join("⟨" + ", ".join(map(str, r)) + "⟩" for r in reversed(iterations))
    return f"theorem iterations{stage or ''} : {records} = [{rows}] := by\n  decide +kernel\n\n"


def _hand_fields(records, iterations) -> list:
    """The engines' records cut to the fields the hand computation gives: start … arrived (eight) for the
    runs computed before the records had the batch's KV sums, all eleven for those computed with them."""
    width = len(iterations[0])
    return [tuple(r[:width] for r in rs) for rs in records]


# a preemption (`preempt lifo`, requeue at the head): a KV pool of cap 8 in blocks of 2, each request taking a
# slot and 2 units with a reserve of 4, and observing `computed` at the top of its hold; two sessions
# prefill 3 and decode 3. 0-1 and 1-2 as KV_SOURCE's (s0 grown to 4, s1 to 4: used 8). At 2 s0's decode
# needs a third block (8 + 2 > 8): the victim is the resident admitted last, s1 (not yet served: nothing
# back to the budget); its hold gives back its 4 and its slot, `computed` is its position 3, it is back at
# the head of the slots' queue, and s0 grows to 6; no admission in an iteration that preempted (2-3). At 3
# s0 decodes (position 6, within its 6); s1 does not fit (6 + its reserve 4 > 8) (3-4). At 4 s0's turn
# is answered, s1 is admitted again and observes `computed` 3, its hold runs from its top: a prefill of 3
# (grown to 4) (4-5), its first token is still the one of 2 (a prefill run again after a preemption samples
# past it), then 3 decodes, grown to 6 at the second (5-6, 6-7, 7-8).
PREEMPT_SOURCE = (KV_SOURCE.replace("preempt none", "preempt lifo")
                  .replace("taking reqs (1), kv (2);", "taking reqs (1), kv (2) reserve (4);")
                  .replace("      prefill (p) growing kv;", "      observe at = computed;\n      prefill (p) growing kv;")
                  .replace("      cache (4);\n", "").replace("llm (3, 2 - serial)", "llm (3, 3)"))
PREEMPT_ANSWERS = {0: [(0, 1, 0, 4)], 1: [(1, 1, 0, 8)]}
PREEMPT_TOKENS = {0: [(0, 1, 1, 0, 3, 0, 0)], 1: [(1, 1, 2, 1, 7, 1, 0)]}
PREEMPT_OBSERVATIONS = {0: [(0, 1, 0, 0, 0)], 1: [(1, 1, 0, 0, 0), (1, 1, 0, 4, 3)]}
PREEMPT_ITERATIONS = [(0, 4, 4, 0, 2, 6, 0, 2), (1, 3, 2, 1, 2, 3, 4, 2), (2, 1, 0, 1, 1, 1, 7, 2),
                      (3, 1, 0, 1, 1, 1, 8, 2), (4, 3, 3, 0, 1, 3, 9, 2), (5, 1, 0, 1, 1, 1, 12, 2),
                      (6, 1, 0, 1, 1, 1, 13, 2), (7, 1, 0, 1, 1, 1, 14, 2)]


# an admission whose growth preempts: PREEMPT_SOURCE without the reserve. 0-1, 1-2 and 2-3 as there. At 3 s0
# decodes (its last token) and s1 fits again (6 + 2 <= 8): admitted, it observes `computed` 3 and its prefill
# of 3 grows its hold to 4 (6 + 4 > 8): the victim is the resident admitted last, s1 itself, which ends the
# serving and, `while (running.preempted == 0)` being read before every admission, the admissions (3-4). At 4
# s0 is gone; s1 is admitted, observes `computed` 0 (its second preemption caught it there) and prefills 3
# (4-5), then decodes 3 (5-6, 6-7, 7-8).
SELF_PREEMPT_SOURCE = PREEMPT_SOURCE.replace(" reserve (4);", ";")
SELF_PREEMPT_ANSWERS = PREEMPT_ANSWERS
SELF_PREEMPT_TOKENS = {0: [(0, 1, 1, 0, 3, 0, 0)], 1: [(1, 1, 2, 1, 7, 2, 0)]}  # preempted twice
SELF_PREEMPT_OBSERVATIONS = {0: [(0, 1, 0, 0, 0)], 1: [(1, 1, 0, 0, 0), (1, 1, 0, 3, 3), (1, 1, 0, 4, 0)]}
SELF_PREEMPT_ITERATIONS = PREEMPT_ITERATIONS


# a turn's reused prefix as its output (`turn_cached`, vLLM's num_cached_tokens): one session of two turns on
# an engine of one slot, budget 8, a KV pool of cap 16 in blocks of 2; each turn holds kv (p), prefills
# `p - cached` and decodes 1, and caches p + o at its end. Turn 1 (p 3): nothing cached, its hold takes 4;
# it prefills 3 (0-1, first token at 1) and decodes (1-2), answered at 2, caching 4. Turn 2 (p 7), submitted
# at 2: its hold takes 8 and reuses the whole blocks of the cached 4 (4): it prefills 3 (2-3) and decodes
# (3-4), answered at 4.
PREFIX_HIT_SOURCE = ("fn main() {\n  device gpu { kv cap 16; }\n  engine llm on gpu {\n    reqs cap 1;\n"
                     "    tokens cap 8;\n    request (p, o) {\n      set c = cached;\n      prefill (p - c) growing kv;\n"
                     "      decode (o) growing kv;\n      cache (p + o);\n    }\n    schedule {\n      advance running;\n"
                     "      admit waiting while (running.preempted == 0) taking reqs (1), kv (p);\n    }\n"
                     "    execute (1);\n  }\n  pool kv on gpu { block 2; evict lru; preempt none; }\n"
                     "  pool reqs on llm { queue fifo; }\n  workload {\n    arrive batch(1);\n    init { set n = 0; }\n"
                     "    session { turn; set n = 1; turn; }\n  }\n  server { llm (3 + 4 * n, 1); }\n}\n")
PREFIX_HIT_ANSWERS = {0: [(0, 1, 0, 2), (0, 2, 2, 4)]}
PREFIX_HIT_TOKENS = {0: [(0, 1, 1, 0, 1, 0, 0), (0, 2, 3, 2, 3, 0, 4)]}
PREFIX_HIT_ITERATIONS = [(0, 3, 3, 0, 1, 3, 0, 1), (1, 1, 0, 1, 1, 1, 3, 1), (2, 3, 3, 0, 1, 3, 4, 1),
                         (3, 1, 0, 1, 1, 1, 7, 1)]


# `evict by (4 - size)`: the largest entry gives way first (over ℕ, `4 - size` on a pool of cap 4). A pool of
# cap 4 in blocks of 1; three sessions of two turns hold `serial + 1` (1, 2, 3) for a delay of 1, observe
# `cached` and cache up to 4. At 0 s0 (1) and s1 (2) are admitted, s2 (3) waits. At 1 s0 caches 1 (A) and
# its second turn queues behind s2; s1 caches 2 (B) and queues too; s2 is admitted (used 3, cached 3:
# 2 over): the keys are A 3, B 2, so B goes, whole, and A stays (`evict lru` would take A, then 1 of B);
# s0 is admitted and consumes A (`cached` 1, where lru would leave it 0); s1 waits (4 + 2 > 4). At 2 s2
# caches 3 (C) and queues; s1 is admitted, B gone (`cached` 0), and C gives way, 2 of its 3 from the tail;
# s0 caches 1 (D) and ends. At 3 s1 caches 2 (E) and ends; s2 is admitted, consumes C's 1 (`cached` 1), and
# of D (key 3) and E (key 2) E goes. Answers at 1 and 2 (s0), 1 and 3 (s1), 2 and 4 (s2)
EVICT_BY_SOURCE = ("fn main() {\n  stage d : delay;\n  pool kv { cap 4; block 1; evict by (4 - size); }\n"
                   "  workload { arrive batch(3); session { turn; turn; } }\n"
                   "  server {\n    hold kv (cost(kv, serial + 1)) {\n      observe hit = cached;\n"
                   "      run d (cost(d, 1));\n    } cache (cost(kv, 4));\n  }\n}\n")
EVICT_BY_ANSWERS = {0: [(0, 1, 0, 1), (0, 2, 1, 2)], 1: [(1, 1, 0, 1), (1, 2, 1, 3)], 2: [(2, 1, 0, 2), (2, 2, 2, 4)]}
EVICT_BY_OBSERVATIONS = {0: [(0, 1, 0, 0, 0), (0, 2, 0, 1, 1)], 1: [(1, 1, 0, 0, 0), (1, 2, 0, 2, 0)],
                         2: [(2, 1, 0, 1, 0), (2, 2, 0, 3, 1)]}


# a lease (`lease kv (4 * serial + 1)`): three sessions hold 2 of a pool of 4 (blocks of 1) for a delay of 1,
# observe `cached`, and keep the 2 as a lease past the hold, caching up to 2 when it ends; after the turn
# each waits 2, releases kv (outside any hold: it ends its lease), waits 3 and observes `cachedin(kv)`. At
# 0 s0 and s1 are admitted, s2 waits. At 1 both holds end: their 2 stay leased (`free` 0, observed as
# `room`), s0's until 2, s1's until 6. At 2 s0's lease ends by its time: it gives back 2 and caches them;
# s2 is admitted (`cached` 0) and the cache gives way (4 + 2 > 4). At 3 s0's release finds no lease; s1's
# ends its lease, caching 2; s2's hold ends and its lease (until 12) keeps 2 (`free` 2: s1's 2 are cache).
# At 5 s2's release ends it, caching 2. At 6 s0 has nothing cached (evicted), s1 and s2 (at 8) their 2; s1's
# lease timer at 6 and s2's at 12 find their leases ended. Observation names: mine 0, hit 1, room 2
LEASE_SOURCE = ("fn main() {\n  stage d : delay;\n  pool kv { cap 4; block 1; }\n"
                "  workload { arrive batch(3); session { turn; run d (cost(d, 2)); release kv; run d (cost(d, 3)); "
                "observe mine = cachedin(kv); } }\n"
                "  server {\n    hold kv (cost(kv, 2)) {\n      observe hit = cached;\n      run d (cost(d, 1));\n"
                "    } cache (cost(kv, 2)) lease kv (4 * serial + 1);\n    observe room = free(kv);\n  }\n}\n")
LEASE_ANSWERS = {0: [(0, 1, 0, 1)], 1: [(1, 1, 0, 1)], 2: [(2, 1, 0, 3)]}
LEASE_OBSERVATIONS = {0: [(0, 1, 1, 0, 0), (0, 1, 2, 1, 0), (0, 1, 0, 6, 0)],
                      1: [(1, 1, 1, 0, 0), (1, 1, 2, 1, 0), (1, 1, 0, 6, 2)],
                      2: [(2, 1, 1, 2, 0), (2, 1, 2, 3, 2), (2, 1, 0, 8, 2)]}


# `blocksize(kv)`, 2 on a pool of cap 4 in blocks of 2: the sessions hold `blocksize(kv)` units, s1 3 more
# (5, 6 in blocks, above the cap). Units that read `blocksize` are judged at every try, not at the join, as
# the interpreter counts it as state: s1 is not refused but waits at the head of the queue for ever, and s2
# behind it; s0 is admitted at 0, observes 2 and is answered at 1 (with the units judged at the join, s1
# would be refused and s2 answered at 1)
BLOCKSIZE_SOURCE = ("fn main() {\n  stage d : delay;\n  pool kv { cap 4; block 2; }\n  workload { arrive batch(3); }\n"
                    "  server {\n    hold kv (cost(kv, blocksize(kv) + (serial == 1 ? 3 : 0))) {\n"
                    "      observe b = blocksize(kv);\n      run d (cost(d, 1));\n    }\n  }\n}\n")
BLOCKSIZE_ANSWERS = {0: [(0, 1, 0, 1)], 1: [], 2: []}
BLOCKSIZE_OBSERVATIONS = {0: [(0, 1, 0, 0, 2)], 1: [], 2: []}


@pytest.mark.parametrize("name, source, answers, observations", [
    ("evict_by", EVICT_BY_SOURCE, EVICT_BY_ANSWERS, EVICT_BY_OBSERVATIONS),
    ("lease", LEASE_SOURCE, LEASE_ANSWERS, LEASE_OBSERVATIONS),
    ("blocksize", BLOCKSIZE_SOURCE, BLOCKSIZE_ANSWERS, BLOCKSIZE_OBSERVATIONS)])
def test_kernel_recorded_run_of_evict_by_a_lease_or_blocksize_is_the_hand_computed_one(tmp_path, name, source,
                                                                                       answers, observations):
    from serq.leangen.kernel import kernel_program, recorded
    _, program = _written(tmp_path, name, source)
    sessions = recorded(program, kernel_program(program, tmp_path))
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == answers
    assert {s: list(r.observations) for s, r in enumerate(sessions)} == observations


def test_kernel_export_of_evict_by_a_lease_and_blocksize(tmp_path):
    from serq.leangen.kernel import kernel_program, render_kernel_module
    _, program = _written(tmp_path, "evict_by", EVICT_BY_SOURCE)
    assert "evictKeys := [[(.bin .sub (.num 4) (.stageVar 9))]]" in render_kernel_module(
        kernel_program(program, tmp_path), "Serq.Programs.EvictBy")
    _, program = _written(tmp_path, "lease", LEASE_SOURCE)
    text = render_kernel_module(kernel_program(program, tmp_path), "Serq.Programs.Lease")
    assert ".hold [⟨0, (.num 2), (.num 0), true, true, true, (some (.bin .add (.bin .mul (.num 4) (.attr 2)) (.num 1)))⟩]" in text
    assert ".release 0" in text and "evictKeys := [[]]" in text
    inf = LEASE_SOURCE.replace("lease kv (4 * serial + 1)", "lease kv (inf)")
    _, program = _written(tmp_path, "lease_inf", inf)
    assert "true, true, true, none⟩]" in render_kernel_module(kernel_program(program, tmp_path), "Serq.Programs.LeaseInf")
    _, program = _written(tmp_path, "blocksize", BLOCKSIZE_SOURCE)
    text = render_kernel_module(kernel_program(program, tmp_path), "Serq.Programs.Blocksize")
    assert ".observe 0 (.blockSize 2)" in text and "(.bin .add (.blockSize 2) (.cond" in text


@pytest.mark.parametrize("key, what", [
    ("used(kv)", "`used(kv)` in an `evict by` key"),
    ("~exp(1)", "a draw `~exp(…)`"),
])
def test_kernel_export_refuses_an_eviction_key_outside(tmp_path, key, what):
    from serq.leangen.kernel import kernel_program
    _, program = _written(tmp_path, "p", EVICT_BY_SOURCE.replace("evict by (4 - size)", f"evict by ({key}, size)"))
    with pytest.raises(SerqError, match=re.escape(f"p.sq:3:3: error: outside the Lean kernel fragment: {what}")):
        kernel_program(program, tmp_path)


def test_kernel_recorded_run_of_a_preemption_observes_computed(tmp_path):
    from serq.leangen.kernel import kernel_program, recorded
    _, program = _written(tmp_path, "preempt", PREEMPT_SOURCE)
    sessions = recorded(program, kernel_program(program, tmp_path))
    assert {s: list(r.observations) for s, r in enumerate(sessions)} == PREEMPT_OBSERVATIONS
    _, program = _written(tmp_path, "self_preempt", SELF_PREEMPT_SOURCE)
    sessions = recorded(program, kernel_program(program, tmp_path))
    assert {s: list(r.observations) for s, r in enumerate(sessions)} == SELF_PREEMPT_OBSERVATIONS


# ENGINE_SOURCE's engine with a prefill granule of 2 and three request slots (`granule 2;`): a prefill's chunk
# short of its remainder is cut down to whole granules, and one cut to none is passed over and ends the
# iteration's admissions. At 0 s0 is admitted, min(5, 3, 4) = 3 cut to 2; s1 the same, 2 of the 2 left; the
# budget is spent, s2 waits (0-2). At 2 s0's remainder 3 fits whole (3, a last chunk need not be whole
# granules); s1's min(3, 3, 1) = 1 is cut to none: passed over, so s2 is not admitted although a slot and a
# token are free (residents 2, demand 6) (2-3). At 3 s0 decodes, s1 takes its 3 (3-5); at 5 s0 and s1
# decode and s2 is admitted, its 2 of the 2 left whole granules (5-7); at 7 s0's turn is answered, s1
# decodes, s2 its last 3 (7-9); at 9 s1's turn is answered, then s2's two decodes (9-10, 10-11). Per turn
# (serial, turn, start, answered), per iteration (start, tokens, prefilled, decoders, residents, demand,
# served, arrived):
GRANULE_SOURCE = (ENGINE_SOURCE.replace("reqs cap 2;\n    tokens cap 4;\n", "reqs cap 3;\n    tokens cap 4;\n    granule 2;\n"))
GRANULE_ANSWERS = {0: [(0, 1, 0, 7)], 1: [(1, 1, 0, 9)], 2: [(2, 1, 0, 11)]}
GRANULE_ITERATIONS = [(0, 4, 4, 0, 2, 6, 0, 3), (2, 3, 3, 0, 2, 6, 4, 3), (3, 4, 3, 1, 2, 4, 7, 3),
                      (5, 4, 2, 2, 3, 5, 11, 3), (7, 4, 3, 1, 2, 4, 15, 3), (9, 1, 0, 1, 1, 1, 19, 3),
                      (10, 1, 0, 1, 1, 1, 20, 3)]


def test_kernel_recorded_run_of_a_granule_is_the_hand_computed_one(tmp_path):
    from serq.leangen.kernel import kernel_program, lean_engines, recorded_run
    _, program = _written(tmp_path, "granule", GRANULE_SOURCE)
    kp = kernel_program(program, tmp_path)
    assert lean_engines(kp).endswith(", [], none, none, true, (.num 2)⟩]")
    sessions, records = recorded_run(program, kp)
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == GRANULE_ANSWERS
    assert _hand_fields(records, GRANULE_ITERATIONS) == [tuple(GRANULE_ITERATIONS)]


def _engine_program(folder: Path):
    return _written(folder, "one_engine", ENGINE_SOURCE)


def _by_remaining_program(folder: Path):
    return _written(folder, "by_remaining", BY_REMAINING_SOURCE)


def test_kernel_recorded_run_of_an_engine_is_the_hand_computed_one(tmp_path):
    from serq.leangen.kernel import kernel_program, recorded_run
    _, program = _engine_program(tmp_path)
    sessions, records = recorded_run(program, kernel_program(program, tmp_path))
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == ENGINE_ANSWERS
    assert {s: list(r.tokens) for s, r in enumerate(sessions)} == ENGINE_TOKENS
    assert _hand_fields(records, ENGINE_ITERATIONS) == [tuple(ENGINE_ITERATIONS)]


# Two step engines, prefill/decode disaggregated in whole numbers (examples/pd-disaggregation/'s idiom): a
# request holds a slot of P and 2 units of P's memory `pkv` (cap 8, blocks of 2) and prefills 3 + serial there,
# then a slot of D and 2 units of D's memory `dkv` (cap 6, blocks of 2) and decodes 2 there. P: a budget of 4,
# chunks of 3, cost 1; D: a budget of 2, cost 1 + ⌊tokens / 2⌋; three sessions. At 0 P admits s0 (3 tokens,
# grown to 4) and s1 (the 1 left; s2 waits for a slot) (0-1). At 1 s0's prefill is done: its hold on P ends and
# it joins D's queue; P serves s1 3 (grown to 4) and admits s2 (1); D admits s0 and decodes 1 (kv_decode 2) (1-2
# on both). At 2 both engines' iterations end, P's first (set first): s1 joins D's queue, s0 has 1 decode left;
# P serves s2 3 (2-3); D decodes s0 and admits s1 (2-4: 1 + ⌊2 / 2⌋). At 3 P serves s2's last (3-4). At 4 D's
# end fires before P's (set at 2, P's at 3): s0's turn is answered, then s2's prefill is done and it joins
# D's queue; D decodes s1 and s2 (4-6); at 6 s1's turn is answered, s2 decodes its last (6-7). Per engine,
# per iteration (start, tokens, prefilled, decoders, residents, demand, served, arrived, kv_decode,
# kv_prefill, twice the attention).
PD_SOURCE = ("fn main() {\n"
             "  device pg { pkv cap 8; }\n"
             "  device dg { dkv cap 6; }\n"
             "  engine P on pg {\n"
             "    preqs cap 2;\n"
             "    tokens cap 4;\n"
             "    request (p) {\n"
             "      prefill (p) growing pkv;\n"
             "    }\n"
             "    schedule {\n"
             "      advance running each at most (3);\n"
             "      admit waiting while (running.preempted == 0) each at most (3) taking preqs (1), pkv (2);\n"
             "    }\n"
             "    execute (1);\n"
             "  }\n"
             "  engine D on dg {\n"
             "    dreqs cap 2;\n"
             "    tokens cap 2;\n"
             "    request (o) {\n"
             "      decode (o) growing dkv;\n"
             "    }\n"
             "    schedule {\n"
             "      advance running;\n"
             "      admit waiting while (running.preempted == 0) taking dreqs (1), dkv (2);\n"
             "    }\n"
             "    execute (1 + floor(batch.tokens / 2));\n"
             "  }\n"
             "  pool pkv on pg { block 2; evict lru; preempt none; }\n"
             "  pool dkv on dg { block 2; evict lru; preempt none; }\n"
             "  pool preqs on P { queue fifo; }\n"
             "  pool dreqs on D { queue fifo; }\n"
             "  workload { arrive batch(3); }\n"
             "  server { P (3 + serial); D (2); }\n"
             "}\n")
PD_ANSWERS = {0: [(0, 1, 0, 4)], 1: [(1, 1, 0, 6)], 2: [(2, 1, 0, 7)]}
PD_TOKENS = {0: [(0, 1, 1, 0, 2, 0, 0)], 1: [(1, 1, 2, 1, 4, 0, 0)], 2: [(2, 1, 4, 3, 6, 0, 0)]}
PD_ITERATIONS = ([(0, 4, 4, 0, 2, 6, 0, 3, 0, 0, 10), (1, 4, 4, 0, 2, 6, 4, 3, 0, 1, 16),
                  (2, 3, 3, 0, 1, 3, 8, 3, 0, 1, 15), (3, 1, 1, 0, 1, 1, 11, 3, 0, 4, 9)],
                 [(1, 1, 0, 1, 1, 1, 0, 3, 2, 0, 0), (2, 2, 0, 2, 2, 2, 1, 3, 4, 0, 0),
                  (4, 2, 0, 2, 2, 2, 3, 3, 4, 0, 0), (6, 1, 0, 1, 1, 1, 5, 3, 2, 0, 0)])

# Two engines at one instant (the reference's *Ties*: idle engines plan in the stages' declaration order): a
# router sends s0 to B (declared second) and s1 to A, each request holding its engine's slot and the one unit
# of a shared pool `g`. At 0 both join their engine's queue; A plans first and admits s1, taking `g`; B cannot
# admit s0 (`g` is full) and plans nothing (0-1). At 1 s1's prefill is done, its hold gives `g` back and its
# turn is answered; B admits s0 (1-2), answered at 2. Were B to plan first, s0 would be answered at 1.
ROUTE_SOURCE = ("fn main() {\n"
                "  device ga { }\n"
                "  device gb { }\n"
                "  engine A on ga {\n"
                "    areqs cap 1;\n"
                "    tokens cap 4;\n"
                "    schedule { advance running; admit waiting while (running.preempted == 0); }\n"
                "    execute (1);\n"
                "  }\n"
                "  engine B on gb {\n"
                "    breqs cap 1;\n"
                "    tokens cap 4;\n"
                "    schedule { advance running; admit waiting while (running.preempted == 0); }\n"
                "    execute (1);\n"
                "  }\n"
                "  pool areqs on A { queue fifo; }\n"
                "  pool breqs on B { queue fifo; }\n"
                "  pool g { cap 1; queue fifo; }\n"
                "  workload { arrive batch(2); }\n"
                "  server {\n"
                "    branch (serial == 0) {\n"
                "      hold breqs (cost(breqs, 1)), g (cost(g, 1)) { run B prefill (cost(B, 3)); }\n"
                "    } else {\n"
                "      hold areqs (cost(areqs, 1)), g (cost(g, 1)) { run A prefill (cost(A, 2)); }\n"
                "    }\n"
                "  }\n"
                "}\n")
ROUTE_ANSWERS = {0: [(0, 1, 0, 2)], 1: [(1, 1, 0, 1)]}
ROUTE_TOKENS = {0: [(0, 1, 2, 1, 1, 0, 0)], 1: [(1, 1, 1, 0, 0, 0, 0)]}
ROUTE_ITERATIONS = ([(0, 2, 2, 0, 1, 2, 0, 2, 0, 0, 4)], [(1, 3, 3, 0, 1, 3, 0, 2, 0, 0, 9)])


# `exclusive prefill` (the reference, *Engines*: one prefill alone or a decode-only batch): one engine of a
# budget of 4 and chunks of 3, three slots, a KV memory of cap 16 in blocks of 2 (`preempt none`), each request
# a slot and 2 units, prefilling 5 - 2 * serial (5, 3, 1) and decoding 2, both growing the memory; three
# sessions at 0. At 0 s0 is admitted and served 3 alone: nothing more is admitted once a prefill is selected
# (grown to 4) (0-1). At 1 s0's running prefill takes precedence: its last 2 (grown to 6); s1 and s2 wait with
# slots free (1-2). At 2 s0 decodes (position 5) and tentatively takes 1; s1 is admitted, its prefill
# displaces s0's decode and takes the full budget, up to the chunk: 3 (grown to 4); s0's decode advances
# nothing (2-3). At 3 s0 and s1 decode (positions 5 and 3), s2 is admitted and its prefill of 1 displaces
# both (3-4). At 4 the three decode: a decode-only batch of 3, kv_decode 6 + 4 + 2 (4-5). At 5 s0 (to 7:
# 8 units) and s1 (to 5: 6 units) grow, memory 16; s2's growth (to 4 units) does not fit: it is passed over
# (5-6). At 6 s0's and s1's turns are answered, their memory given back, and s2 decodes its last (6-7).
EXCLUSIVE_SOURCE = ("fn main() {\n"
                    "  device gpu { kv cap 16; }\n"
                    "  engine llm on gpu {\n"
                    "    reqs cap 3;\n"
                    "    tokens cap 4;\n"
                    "    request (p, o) {\n"
                    "      prefill (p) growing kv;\n"
                    "      decode (o) growing kv;\n"
                    "    }\n"
                    "    schedule {\n"
                    "      exclusive prefill each at most (3);\n"
                    "      admit waiting while (running.preempted == 0) taking reqs (1), kv (2);\n"
                    "    }\n"
                    "    execute (1);\n"
                    "  }\n"
                    "  pool kv on gpu { block 2; evict lru; preempt none; }\n"
                    "  pool reqs on llm { queue fifo; }\n"
                    "  workload { arrive batch(3); }\n"
                    "  server { llm (5 - 2 * serial, 2); }\n"
                    "}\n")
EXCLUSIVE_ANSWERS = {0: [(0, 1, 0, 6)], 1: [(1, 1, 0, 6)], 2: [(2, 1, 0, 7)]}
EXCLUSIVE_TOKENS = {0: [(0, 1, 2, 1, 5, 0, 0)], 1: [(1, 1, 3, 2, 5, 0, 0)], 2: [(2, 1, 4, 3, 6, 0, 0)]}
EXCLUSIVE_ITERATIONS = [(0, 3, 3, 0, 1, 3, 0, 3, 0, 0, 9), (1, 2, 2, 0, 1, 2, 3, 3, 0, 3, 16),
                        (2, 3, 3, 0, 2, 4, 5, 3, 0, 0, 9), (3, 1, 1, 0, 3, 3, 8, 3, 0, 0, 1),
                        (4, 3, 0, 3, 3, 3, 9, 3, 12, 0, 0), (5, 2, 0, 2, 3, 3, 12, 3, 14, 0, 0),
                        (6, 1, 0, 1, 1, 1, 14, 3, 4, 0, 0)]


@pytest.mark.parametrize("name, source, answers, tokens, iterations", [
    ("exclusive", EXCLUSIVE_SOURCE, EXCLUSIVE_ANSWERS, EXCLUSIVE_TOKENS, EXCLUSIVE_ITERATIONS),
    ("by_remaining", BY_REMAINING_SOURCE, BY_REMAINING_ANSWERS, BY_REMAINING_TOKENS, BY_REMAINING_ITERATIONS),
    ("phases", PHASES_SOURCE, PHASES_ANSWERS, PHASES_TOKENS, PHASES_ITERATIONS),
    ("kv_memory", KV_SOURCE, KV_ANSWERS, KV_TOKENS, KV_ITERATIONS),
    ("preempt", PREEMPT_SOURCE, PREEMPT_ANSWERS, PREEMPT_TOKENS, PREEMPT_ITERATIONS),
    ("self_preempt", SELF_PREEMPT_SOURCE, SELF_PREEMPT_ANSWERS, SELF_PREEMPT_TOKENS, SELF_PREEMPT_ITERATIONS),
    ("prefix_hit", PREFIX_HIT_SOURCE, PREFIX_HIT_ANSWERS, PREFIX_HIT_TOKENS, PREFIX_HIT_ITERATIONS),
    ("kv_cost", KV_COST_SOURCE, KV_COST_ANSWERS, KV_COST_TOKENS, KV_COST_ITERATIONS),
    ("pd", PD_SOURCE, PD_ANSWERS, PD_TOKENS, PD_ITERATIONS),
    ("route", ROUTE_SOURCE, ROUTE_ANSWERS, ROUTE_TOKENS, ROUTE_ITERATIONS)])
def test_kernel_recorded_run_of_an_engine_program_is_the_hand_computed_one(tmp_path, name, source, answers, tokens,
                                                                           iterations):
    """(`iterations`: the engine's, or per stage those of each engine of a program of several, a tuple.)"""
    from serq.leangen.kernel import kernel_program, recorded_run
    _, program = _written(tmp_path, name, source)
    sessions, records = recorded_run(program, kernel_program(program, tmp_path))
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == answers
    assert {s: list(r.tokens) for s, r in enumerate(sessions)} == tokens
    per_engine = list(iterations) if isinstance(iterations, tuple) else [iterations]
    assert _hand_fields(records, per_engine[0]) == [tuple(its) for its in per_engine]


def test_kernel_export_of_two_engines(tmp_path):
    """Each engine is a stage `.step e` with its clauses in `engines`, its slots admitted by it (`admitVia`),
    its memory an ordinary pool its runs grow."""
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _written(tmp_path, "pd", PD_SOURCE)
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    for term in ("stages := [(.step 0), (.step 1)]", "caps := [8, 6, 2, 2]", "admitVia := [0, 0, 1, 2]",
                 "engines := [⟨(.num 4), (.num 3), (.num 1), [], none, none, true, (.num 0)⟩, "
                 "⟨(.num 2), (.num 0), (.bin .add (.num 1) (.floorDiv (.stageVar 0) 2)), [], none, none, true, (.num 0)⟩]",
                 ".step 0 false 1 (.bin .add (.num 3) (.attr 2))", ".step 1 true 2 (.num 2)"):
        assert term in r.output, term


def test_kernel_export_of_the_batchs_kv_sums(tmp_path):
    """`serq lean export` takes an `execute` cost that reads `batch.kv_decode`, `batch.kv_prefill` and
    `ceil(batch.attention / 4)` (`Serq.Kernel.StageVar` 12, 13, and 14: twice the attention)."""
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _written(tmp_path, "kv_cost", KV_COST_SOURCE)
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    assert KV_COST_TERM in r.output


@pytest.mark.parametrize("cost, term", [
    ("floor(batch.attention)", "(.floorDiv (.stageVar 14) 2)"),
    ("ceil(batch.attention)", "(.floorDiv (.bin .add (.stageVar 14) (.num 1)) 2)"),
    ("floor(batch.attention / 3)", "(.floorDiv (.stageVar 14) 6)"),
])
def test_kernel_reads_the_attention_doubled(tmp_path, cost, term):
    from serq.leangen.kernel import kernel_program, lean_engines
    _, program = _written(tmp_path, "p", KV_SOURCE.replace("execute (1);", f"execute (1 + {cost});"))
    assert f"(.bin .add (.num 1) {term})" in lean_engines(kernel_program(program, tmp_path))


@pytest.mark.parametrize("cost", ["1 + batch.attention", "1 + floor(2 * batch.attention)", "max(1, batch.attention)"])
def test_kernel_export_refuses_the_attention_outside_floor_or_ceil(tmp_path, cost):
    """The attention is a half when a batch's Σ n² is odd: the fragment reads it rounded, as the program says."""
    from serq.errors import SerqError
    from serq.leangen.kernel import ATTENTION_READS, kernel_program
    _, program = _written(tmp_path, "p", KV_SOURCE.replace("execute (1);", f"execute ({cost});"))
    with pytest.raises(SerqError, match=re.escape(f"outside the Lean kernel fragment: {ATTENTION_READS}")):
        kernel_program(program, tmp_path)


@pytest.mark.lean
def test_the_kv_sums_program_agrees_in_lean_on_both_paths(tmp_path):
    """KV_COST_SOURCE's hand-computed run, kernel-checked (`decide +kernel`) and through the compiled driver;
    a record whose doubled attention is one off is refused on both."""
    from serq.leangen.kernel_drt import KernelCase, KernelObserved, check_kernel_in_lean, observe_kernel, run_compiled
    _, program = _written(tmp_path, "kv_cost", KV_COST_SOURCE)
    case = KernelCase(program)
    right = observe_kernel(case)
    assert right.records == (tuple(KV_COST_ITERATIONS),)
    first, *rest = right.records[0]
    wrong = KernelObserved(right.value, right.sessions, ((first[:10] + (first[10] + 1,), *rest),))
    items = [(0, case, right), (1, case, wrong)]
    assert [f.case_id for f in check_kernel_in_lean(items)] == [1]
    verdict = run_compiled(items, tmp_path)
    assert (verdict.agreeing, verdict.diverging, verdict.unreadable) == (1, (1,), ())


def test_kernel_export_of_an_engine(tmp_path):
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _engine_program(tmp_path)
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    for term in ("stages := [(.step 0)]", "engines := [⟨(.num 4), (.num 3), (.bin .add (.num 1) (.floorDiv (.stageVar 0) 4)), [], none, none, true, (.num 0)⟩]",
                 "admitVia := [1]", ".step 0 false 0 (.num 5)", ".step 0 true 0 (.num 2)"):
        assert term in r.output, term


@pytest.mark.parametrize("order, keys", [
    ("by (remaining)", "[(.stageVar 7)]"),
    ("decode first", "[(.cond (.stageVar 5) (.num 0) (.num 1))]"),
    ("by (serial % 2, admission)", "[(.bin .mod (.attr 2) (.num 2)), (.stageVar 6)]"),
])
def test_kernel_export_of_a_serve_order(tmp_path, order, keys):
    from serq.leangen.kernel import kernel_program, lean_engines
    _, program = _written(tmp_path, "p", ENGINE_SOURCE.replace("advance running each at most (3);",
                                                                f"advance running {order} each at most (3);"))
    kp = kernel_program(program, tmp_path)
    assert lean_engines(kp).endswith(f", {keys}, none, none, true, (.num 0)⟩]")


def test_kernel_export_of_only():
    from serq.leangen.kernel import kernel_program, lean_engines
    import tempfile
    folder = Path(tempfile.mkdtemp())
    _, program = _written(folder, "phases", PHASES_SOURCE)
    in_phase = "(.cond (.bin .gt (.stageVar 2) (.num 0)) (.stageVar 5) (.not (.stageVar 5)))"
    assert lean_engines(kernel_program(program, folder)).endswith(f", [], (some {in_phase}), (some {in_phase}), true, (.num 0)⟩]")


@pytest.mark.parametrize("schedule, what", [
    ("advance running by (-remaining);", "a negation"),
    ("advance running by (remaining / 2);", "`/` outside `floor(a / d)`"),
    ("advance running each at most (3); branch (free(reqs) > 0) { admit waiting each at most (3) taking reqs (1); }",
     "`free(reqs)` in a schedule's guard"),
])
def test_kernel_lowering_refuses_an_engine_outside(tmp_path, schedule, what):
    """(`serq lean export` says the engine model's refusal of a program with an engine outside both.)"""
    from serq.errors import SerqError
    from serq.leangen.kernel import kernel_program
    _, program = _written(tmp_path, "p", ENGINE_SOURCE.replace("advance running each at most (3);", schedule))
    with pytest.raises(SerqError, match=re.escape(f"p.sq:3:3: error: outside the Lean kernel fragment: {what}")):
        kernel_program(program, tmp_path)


def _written(folder: Path, name: str, source: str):
    """A hand-computed program written to `folder` as NAME.sq, and its IR."""
    f = folder / f"{name}.sq"
    f.write_text(source)
    return f, link_file(f)


# an ordered trace (`trace "t.csv" ordered;`): three sessions, listed in the file as 5 (at 3, two turns),
# 2 (at 0) and 9 (at 3); they arrive in time order, ties in the file's order, so the kernel's sessions are
# 2, 5, 9. Each turn's server runs `new + out` on a delay stage and observes `out`; between turns a session
# runs `think`. Session 2: (7, 1) at 0, answered at 8. Session 5: (10, 2) at 3, answered at 15; `more` is 1:
# it thinks 1 (to 16), then (20, 3), answered at 39, `more` 0. Session 9: (4, 0) at 3, answered at 7.
TRACE_CSV = "session,arrive,new,out,think,forced\n5,3,10,2,1,0\n5,3,20,3,0,0\n2,0,7,1,0,0\n9,3,4,0,2,0\n"
TRACE_SOURCE = ("fn main() {\n  stage d : delay;\n  workload {\n    trace \"t.csv\" ordered;\n"
                "    session { turn; while (more) { run d (cost(d, think)); turn; } }\n  }\n"
                "  server { run d (cost(d, new + out)); observe o = out; }\n}\n")
TRACE_ANSWERS = {0: [(0, 1, 0, 8)], 1: [(1, 1, 3, 15), (1, 2, 16, 39)], 2: [(2, 1, 3, 7)]}
TRACE_OBSERVATIONS = {0: [(0, 1, 0, 8, 1)], 1: [(1, 1, 0, 15, 2), (1, 2, 0, 39, 3)], 2: [(2, 1, 0, 7, 0)]}


def _traced(folder: Path, name: str, csv: str, source: str):
    """A hand-computed program reading `trace "t.csv"`, written with its trace to `folder`, and its IR."""
    folder.mkdir(exist_ok=True)
    (folder / "t.csv").write_text(csv)
    return _written(folder, name, source)


def _trace_program(folder: Path):
    return _traced(folder, "trace", TRACE_CSV, TRACE_SOURCE)


def test_kernel_recorded_run_of_an_ordered_trace_is_the_hand_computed_one(tmp_path):
    from serq.leangen.kernel import kernel_program, recorded, render_kernel_module
    _, program = _trace_program(tmp_path)
    kp = kernel_program(program, tmp_path)
    text = render_kernel_module(kp, "Serq.Programs.Trace")
    assert "arrivalTimes := [0, 3, 3]" in text
    assert "traceRows := [[[7, 1, 0, 0]], [[10, 2, 1, 0], [20, 3, 0, 0]], [[4, 0, 2, 0]]]" in text
    sessions = recorded(program, kp, tmp_path)
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == TRACE_ANSWERS
    assert {s: list(r.observations) for s, r in enumerate(sessions)} == TRACE_OBSERVATIONS


# two turns created at one instant join an engine's queue in the file's order of their trace sessions, not
# in the order the sessions arrived (the interpreter's `_creation`, as vLLM's oracle driver submits them).
# The file lists session 5 (at 1: prompts 2 then 8, one decode each) before session 2 (at 0: prompts 2 then
# 8, two decodes then one), so the kernel's session 0 is the file's second. An engine of 2 slots and a
# budget of 10 on the step clock: s0 prefills 2 (0-1) and decodes (1-2, 2-3); s1 prefills 2 (1-2) and
# decodes (2-3). Both are answered at 3 and their second turns are created then: s0's joins the queue
# first (the iteration ends its residents in admission order) and s1's goes before it, its trace session
# being earlier in the file. At 3 s1 is admitted first and prefills 8, s0 the 2 left of the budget (3-4);
# s1 decodes, s0 prefills its last 6 (4-5): s1 is answered at 5; s0 decodes (5-6), answered at 6. In the
# arrival order the two answers would swap.
TIE_CSV = "session,arrive,new,out,think,forced\n5,1,2,1,0,0\n5,1,8,1,0,0\n2,0,2,2,0,0\n2,0,8,1,0,0\n"
TIE_SOURCE = ("fn main() {\n  device gpu { }\n  engine llm on gpu {\n    reqs cap 2;\n    tokens cap 10;\n"
              "    request (p, o) {\n      prefill (p);\n      decode (o);\n    }\n    schedule {\n"
              "      advance running;\n      admit waiting while (running.preempted == 0) taking reqs (1);\n    }\n"
              "    execute (1);\n  }\n  pool reqs on llm { queue fifo; }\n"
              "  workload {\n    trace \"t.csv\" ordered;\n    session { turn; while (more) { turn; } }\n  }\n"
              "  server { llm (new, out); }\n}\n")
TIE_ANSWERS = {0: [(0, 1, 0, 3), (0, 2, 3, 6)], 1: [(1, 1, 1, 3), (1, 2, 3, 5)]}
TIE_TOKENS = {0: [(0, 1, 1, 0, 2, 0, 0), (0, 2, 5, 4, 5, 0, 0)], 1: [(1, 1, 2, 1, 2, 0, 0), (1, 2, 4, 3, 4, 0, 0)]}
TIE_ITERATIONS = [(0, 2, 2, 0, 1, 2, 0, 1), (1, 3, 2, 1, 2, 3, 2, 2), (2, 2, 0, 2, 2, 2, 5, 2),
                  (3, 10, 10, 0, 2, 16, 7, 2), (4, 7, 6, 1, 2, 7, 17, 2), (5, 1, 0, 1, 1, 1, 24, 2)]


def _tie_program(folder: Path):
    return _traced(folder, "tie", TIE_CSV, TIE_SOURCE)  # (a folder of its own: TRACE_SOURCE's t.csv differs)


def test_kernel_turns_created_at_one_instant_queue_in_the_files_order(tmp_path):
    from serq.leangen.kernel import kernel_program, recorded_run, render_kernel_module
    _, program = _tie_program(tmp_path)
    kp = kernel_program(program, tmp_path)
    text = render_kernel_module(kp, "Serq.Programs.Tie")
    assert "arrivalTimes := [0, 1]" in text and "traceNos := [1, 0]" in text
    sessions, records = recorded_run(program, kp, tmp_path)
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == TIE_ANSWERS
    assert {s: list(r.tokens) for s, r in enumerate(sessions)} == TIE_TOKENS
    assert list(_hand_fields(records, TIE_ITERATIONS)[0]) == TIE_ITERATIONS


@pytest.mark.parametrize("csv, flag, what", [
    (TRACE_CSV.replace("2,0,7", "2,0.5,7"), "ordered", "arrival time 0.5: the fragment's clock and numbers are whole"),
    (TRACE_CSV.replace("9,3,4,0,2", "9,3,4,0.25,2"), "ordered", "out 0.25"),
    (TRACE_CSV, "", "a trace that is not `ordered`"),
])
def test_kernel_export_refuses_a_trace_outside(tmp_path, csv, flag, what):
    from click.testing import CliRunner

    from serq.cli import main
    (tmp_path / "t.csv").write_text(csv)
    f = tmp_path / "p.sq"
    f.write_text(TRACE_SOURCE.replace(" ordered;", f" {flag};".replace("  ", " ").replace(" ;", ";")))
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 1, r.output
    assert "p.sq:4:5: error: outside the Lean kernel fragment: " in r.output and what in r.output, r.output


def _cache_program(folder: Path):
    return _written(folder, "prefix_cache_kernel", CACHE_SOURCE)


@pytest.mark.parametrize("name, source, answers, observations", [
    ("prefix_cache_kernel", CACHE_SOURCE, CACHE_ANSWERS, CACHE_OBSERVATIONS),
    ("pool_observables", OBSERVABLES_SOURCE, OBSERVABLES_ANSWERS, OBSERVABLES_OBSERVATIONS)])
def test_kernel_recorded_run_and_observations_are_the_hand_computed_ones(tmp_path, name, source, answers, observations):
    from serq.leangen.kernel import kernel_program, recorded
    _, program = _written(tmp_path, name, source)
    sessions = recorded(program, kernel_program(program, tmp_path))
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == answers
    assert {s: list(r.observations) for s, r in enumerate(sessions)} == observations


def test_kernel_export_of_a_prefix_cache(tmp_path):
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _cache_program(tmp_path)
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    assert ".hold [⟨0, (.num 4), (.num 0), true, true, false, none⟩] none (some (.num 3)) [" in r.output
    assert "blocks := [1]" in r.output and "cachedAt := 0" in r.output


def _observables_program(folder: Path):
    return _written(folder, "pool_observables", OBSERVABLES_SOURCE)


def test_kernel_export_of_pool_observables(tmp_path):
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _observables_program(tmp_path)
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    for term in (".observe 0 (.queued 0)", ".observe 1 (.holders 0)", ".observe 2 (.used 0)", ".observe 3 (.free 0)",
                 ".observe 4 (.cachedIn 0)"):
        assert term in r.output, term


@pytest.mark.parametrize("old, new, where, what", [
    ("cache (cost(kv, 2))", "cache (cost(kv, free(kv)))", "7:5", "`free(kv)` in a `cache` clause"),
    ("arrive batch(3); }", "arrive batch(3); init { observe early = queued(kv); } }", "4:38", "`queued(kv)` in the `init` block"),
])
def test_kernel_export_refuses_a_pool_observable_in_a_cache_clause_or_init(tmp_path, old, new, where, what):
    """The interpreter reads a `cache` amount between the releases of the hold's pools, and runs a
    session's init as it arrives (a batch's all before any session's statements): outside."""
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _written(tmp_path, "p", OBSERVABLES_SOURCE.replace(old, new))
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 1, r.output
    assert f"p.sq:{where}: error: outside the Lean kernel fragment: {what}" in r.output


@pytest.mark.parametrize("law, settings, what", [
    ("arrive poisson(1);", [], "the workload's `poisson` arrivals: the fragment's sessions arrive together"),
    ("arrive closed(3);", [], "the workload's `closed` arrivals"),
    ("arrive renewal(1.5);", ["--arrivals", "3"], "a renewal gap of 1.5: the fragment's clock is whole"),
    ("arrive renewal(2);", [], "`arrive renewal(g)` without `--arrivals N`"),
    ("arrive renewal(~exp(1));", ["--arrivals", "3"], "a drawn renewal gap"),
])
def test_kernel_export_refuses_an_arrival_law_at_its_location(tmp_path, law, settings, what):
    """The arrival law's refusal names the `arrive` statement's line and column (the IR keeps where
    each law was written)."""
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _written(tmp_path, "p", OBSERVABLES_SOURCE.replace("arrive batch(3);", law))
    r = CliRunner().invoke(main, ["lean", "export", str(f), *settings])
    assert r.exit_code == 1, r.output
    assert f"p.sq:4:14: error: outside the Lean kernel fragment: {what}" in r.output


def test_engine_model_export_refuses_an_arrival_law_at_its_location():
    """A program with a step engine that is vLLM's settings is refused by both models for its arrival
    law, each at the `arrive` statement: the kernel's reason first, then the engine model's."""
    from click.testing import CliRunner

    from serq.cli import main
    sarathi = REPO / "examples" / "papers" / "sarathi.sq"
    line = next(n for n, text in enumerate(sarathi.read_text().splitlines(), 1) if "arrive poisson" in text)
    r = CliRunner().invoke(main, ["lean", "export", str(sarathi)])
    assert r.exit_code == 1, r.output
    assert (f"sarathi.sq:{line}:5: error: outside the Lean kernel fragment: the workload's `poisson` arrivals: "
            "the fragment's sessions arrive together") in r.output
    assert (f"; nor is it in the engine model's fragment (Serq.Exec): {sarathi}:{line}:5: "
            "the workload's `poisson` arrivals: the model takes given arrival times") in r.output


def _blocks_program(folder: Path):
    return _written(folder, "blocks_reserve", BLOCKS_SOURCE)


def test_kernel_recorded_run_of_blocks_and_a_reserve_is_the_hand_computed_one(tmp_path):
    from serq.leangen.kernel import kernel_program, recorded
    f, program = _blocks_program(tmp_path)
    kp = kernel_program(program, tmp_path)
    assert kp.blocks == [2]
    assert {s: list(r.answers) for s, r in enumerate(recorded(program, kp))} == BLOCKS_ANSWERS


def test_kernel_export_of_blocks_and_a_reserve(tmp_path):
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _blocks_program(tmp_path)
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    assert "caps := [5]" in r.output and "blocks := [2]" in r.output
    assert ".hold [⟨0, (.num 1), (.num 3), false, false, false, none⟩] none none [" in r.output


def _renewal_program(folder: Path):
    f = folder / "renewal_fifo.sq"
    f.write_text(RENEWAL_SOURCE)
    program = link_file(f)
    return f, program.model_copy(update={"settings": program.settings.model_copy(update={"arrivals": 3})})


def test_kernel_recorded_run_of_renewal_arrivals_is_the_hand_computed_one(tmp_path):
    from serq.leangen.kernel import kernel_program, recorded
    f, program = _renewal_program(tmp_path)
    kp = kernel_program(program, tmp_path)
    assert (kp.sessions, kp.gap) == (3, 3)
    sessions = recorded(program, kp)
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == RENEWAL_ANSWERS


def test_kernel_export_of_renewal_arrivals_needs_their_number(tmp_path):
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _renewal_program(tmp_path)
    r = CliRunner().invoke(main, ["lean", "export", str(f), "--arrivals", "3"])
    assert r.exit_code == 0, r.output
    assert "sessions := 3\n  gap := 3\n" in r.output
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 1 and "`arrive renewal(g)` without `--arrivals N`" in r.output, r.output
    drawn = tmp_path / "drawn.sq"
    drawn.write_text(RENEWAL_SOURCE.replace("renewal(3)", "renewal(~exp(3))"))
    r = CliRunner().invoke(main, ["lean", "export", str(drawn), "--arrivals", "3"])
    assert r.exit_code == 1 and "a drawn renewal gap" in r.output, r.output
    # --arrivals is the run's setting, checked as `serq run` checks it
    r = CliRunner().invoke(main, ["lean", "export", str(SANDBOX), "--arrivals", "3"])
    assert r.exit_code == 2 and "the arrivals count open arrivals" in r.output, r.output


def test_kernel_recorded_run_of_pools_and_a_fifo_stage_is_the_hand_computed_one():
    from serq.leangen.kernel import kernel_program, recorded
    program = link_file(SANDBOX)
    sessions = recorded(program, kernel_program(program, SANDBOX.parent))
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == SANDBOX_ANSWERS
    assert {s: [v for *_, v in r.observations] for s, r in enumerate(sessions)} == SANDBOX_ADMITTED


def test_kernel_export_of_pools_and_a_fifo_stage():
    from click.testing import CliRunner

    from serq.cli import main
    r = CliRunner().invoke(main, ["lean", "export", str(SANDBOX)])
    assert r.exit_code == 0, r.output
    assert "stages := [(.fifo 1), .delay]" in r.output and "caps := [1]" in r.output
    assert ".hold [⟨0, (.num 1), (.num 0), false, false, false, none⟩] none none [" in r.output and "blocks := [0]" in r.output


def test_kernel_export_of_queue_keys(tmp_path):
    """A `queue by` pool's keys are its Lean value's `queueKeys`, `waited` among them; a fifo pool's are none."""
    from click.testing import CliRunner

    from serq.cli import main
    f = tmp_path / "p.sq"
    f.write_text("fn main() {\n  stage d : delay;\n  pool a { cap 2; queue by (serial % 2, waited); }\n  pool b { cap 3; }\n"
                 "  workload { arrive batch(3); }\n  server { hold a (cost(a, 1)), b (cost(b, 2)) { run d (cost(d, 1)); } }\n}\n")
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    assert "caps := [2, 3]" in r.output
    assert "queueKeys := [[(.bin .mod (.attr 2) (.num 2)), .waited], []]" in r.output
    assert ".hold [⟨0, (.num 1), (.num 0), false, false, false, none⟩, ⟨1, (.num 2), (.num 0), false, false, false, none⟩] none none" in r.output


def test_kernel_export_of_a_delay_program():
    from click.testing import CliRunner

    from serq.cli import main
    r = CliRunner().invoke(main, ["lean", "export", str(SCRIPTED)])
    assert r.exit_code == 0, r.output
    assert "public import Serq.Kernel" in r.output
    assert "def program : Serq.Kernel.Program where" in r.output
    # the IR's statements, one for one: the tool call's work, the grown context, the model's floor division
    assert ".run 1 (.bin .add (.num 1) (.attr 3))" in r.output
    assert ".run 0 (.bin .mul (.floorDiv (.attr 2) 100) (.num 2))" in r.output
    assert "sessions := 3" in r.output


# the catalogue's whole-valued functions of a positive constant: `ceil(a / d)` (⌊(a + d - 1) / d⌋) and
# `reusable(n, b)` (⌊(n - 1) / b⌋ · b, 0 for n = 0). Sessions 0, 1, 2 run for `serial` and observe
# ceil(5·serial / 4) = 0, 2, 3 and reusable(3·serial, 2) = 0, 2, 4 when their runs end (at 0, 1, 2).
FUNCTIONS_SOURCE = ("fn main() {\n  stage d : delay;\n  workload { arrive batch(3); }\n"
                    "  server { run d (cost(d, serial)); observe up = ceil((serial * 5) / 4); "
                    "observe blocks = reusable(serial * 3, 2); }\n}\n")
FUNCTIONS_ANSWERS = {0: [(0, 1, 0, 0)], 1: [(1, 1, 0, 1)], 2: [(2, 1, 0, 2)]}
FUNCTIONS_OBSERVATIONS = {0: [(0, 1, 0, 0, 0), (0, 1, 1, 0, 0)], 1: [(1, 1, 0, 1, 2), (1, 1, 1, 1, 2)],
                          2: [(2, 1, 0, 2, 3), (2, 1, 1, 2, 4)]}


def test_kernel_ceil_and_reusable_are_floor_divisions(tmp_path):
    from serq.leangen.kernel import kernel_program, recorded, render_kernel_module
    _, program = _written(tmp_path, "functions", FUNCTIONS_SOURCE)
    kp = kernel_program(program, tmp_path)
    text = render_kernel_module(kp, "Serq.Programs.Functions")
    assert ".observe 0 (.floorDiv (.bin .add (.bin .mul (.attr 2) (.num 5)) (.num 3)) 4)" in text
    assert ".observe 1 (.bin .mul (.floorDiv (.bin .sub (.bin .mul (.attr 2) (.num 3)) (.num 1)) 2) (.num 2))" in text
    sessions = recorded(program, kp)
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == FUNCTIONS_ANSWERS
    assert {s: list(r.observations) for s, r in enumerate(sessions)} == FUNCTIONS_OBSERVATIONS


def test_kernel_recorded_run_is_the_hand_computed_one():
    from serq.leangen.kernel import kernel_program, recorded
    program = link_file(SCRIPTED)
    kp = kernel_program(program, SCRIPTED.parent)
    sessions = recorded(program, kp)
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == SCRIPTED_ANSWERS
    # prompt_tokens (observation 0) of session 2: 300, 350, 400, 450, each when its turn is answered
    assert [(t, time, v) for _, t, k, time, v in sessions[2].observations if k == 0] == [
        (1, 6, 300), (2, 15, 350), (3, 26, 400), (4, 37, 450)]


@pytest.mark.parametrize("source, where, what", [
    ("stage s : ps(2);", "3:3", "stage `s` is `ps(…)`"),
    ("stage s : fifo; pool host { cap 64; } stage link : delay; "
     "pool kv { cap 8; spill host via link (cost(link, 1)) when (1); }", "3:61", "`spill` on pool `kv`"),
    ("stage s : fifo; pool kv { cap 8; preempt lifo; }", "3:19", "preemption on pool `kv`"),
    ("stage s : fifo; pool kv { cap inf; }", "3:19", "the cap inf of pool `kv`"),
])
def test_kernel_export_refuses_what_is_outside_at_its_location(tmp_path, source, where, what):
    from click.testing import CliRunner

    from serq.cli import main
    f = tmp_path / "p.sq"
    f.write_text("fn main() {\n  stage d : delay;\n  " + source + "\n  workload { arrive batch(1); }\n"
                 "  server { run s (cost(s, 1)); }\n}\n")
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 1
    assert f"p.sq:{where}: error: outside the Lean kernel fragment: {what}" in r.output


@pytest.mark.parametrize("server, where, what", [
    ("observe x = ~exp(1);", "4:12", "a draw `~exp(…)`"),
    ("observe x = now / 2;", "4:12", "`/` outside `floor(a / d)`"),
    ("observe x = floor(now / serial);", "4:12", "a division or `%` by what is not a positive whole constant"),
    ("observe x = now - 1.5;", "4:12", "the number 1.5"),
    ("observe x = ceil(now / serial);", "4:12", "a division or `%` by what is not a positive whole constant"),
    ("observe x = reusable(now, serial);", "4:12", "a division or `%` by what is not a positive whole constant"),
    ("observe x = sqrt(now);", "4:12", "`sqrt(…)`: the fragment's functions are min, max, floor(a / d), ceil(a / d)"),
])
def test_kernel_export_refuses_an_expression_at_its_statement(tmp_path, server, where, what):
    from click.testing import CliRunner

    from serq.cli import main
    f = tmp_path / "p.sq"
    f.write_text("fn main() {\n  stage d : delay;\n  workload { arrive batch(1); }\n  server { " + server + " }\n}\n")
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 1, r.output
    assert f"p.sq:{where}: error: outside the Lean kernel fragment: {what}" in r.output


def test_kernel_binops_are_the_irs():
    """Serq.Kernel.BinOp has one constructor per IR binary operator but `div` (floorDiv only)."""
    import re
    import typing

    from serq.leangen.kernel import BINOPS
    text = (REPO / "lean" / "Serq" / "KernelMachine.lean").read_text()
    m = re.search(r"inductive BinOp where\n  \| (.*)\n", text)
    lean_ctors = [c.strip() for c in m.group(1).split("|")]
    ir_ops = [op for op in typing.get_args(ir.BinaryOp) if op != "div"]
    assert sorted(BINOPS) == sorted(ir_ops)
    assert sorted(BINOPS.values()) == sorted(lean_ctors)


@pytest.mark.lean
def test_exported_kernel_programs_run_in_lean_as_computed_by_hand(tmp_path: Path):
    """The exported modules elaborate, and the Lean interpreter's runs of them are the hand-computed
    ones: the two examples, the renewal program, the blocks-and-reserve program, the prefix-cache
    program, the pool-observables program, the functions program, the six engines, the `evict by`, lease
    and `blocksize` programs, the ordered trace, the tie of two turns created at one instant, the KV sums' cost
    and the two programs of two engines in one file (one Lean start-up, not one each); the cache's and the
    observables' observations too, the engines' tokens and iterations (every engine's)."""
    from serq.leangen.build import compile_file
    from serq.leangen.kernel import kernel_program, render_kernel_module
    parts = []
    _, renewal = _renewal_program(tmp_path)
    _, blocks = _blocks_program(tmp_path)
    _, cache = _cache_program(tmp_path)
    _, observables = _observables_program(tmp_path)
    _, engine = _engine_program(tmp_path)
    _, by_remaining = _by_remaining_program(tmp_path)
    _, phases = _written(tmp_path, "phases", PHASES_SOURCE)
    _, kv_memory = _written(tmp_path, "kv_memory", KV_SOURCE)
    _, preempt = _written(tmp_path, "preempt", PREEMPT_SOURCE)
    _, self_preempt = _written(tmp_path, "self_preempt", SELF_PREEMPT_SOURCE)
    _, functions = _written(tmp_path, "functions", FUNCTIONS_SOURCE)
    _, evict_by = _written(tmp_path, "evict_by", EVICT_BY_SOURCE)
    _, lease = _written(tmp_path, "lease", LEASE_SOURCE)
    _, blocksize = _written(tmp_path, "blocksize", BLOCKSIZE_SOURCE)
    _, trace = _trace_program(tmp_path)
    _, tie = _tie_program(tmp_path / "tie")
    _, prefix_hit = _written(tmp_path, "prefix_hit", PREFIX_HIT_SOURCE)
    _, kv_cost = _written(tmp_path, "kv_cost", KV_COST_SOURCE)
    _, pd = _written(tmp_path, "pd", PD_SOURCE)
    _, route = _written(tmp_path, "route", ROUTE_SOURCE)
    observed = {"Cache": CACHE_OBSERVATIONS, "Observables": OBSERVABLES_OBSERVATIONS, "Preempt": PREEMPT_OBSERVATIONS,
                "SelfPreempt": SELF_PREEMPT_OBSERVATIONS, "Functions": FUNCTIONS_OBSERVATIONS,
                "EvictBy": EVICT_BY_OBSERVATIONS, "Lease": LEASE_OBSERVATIONS, "Blocksize": BLOCKSIZE_OBSERVATIONS,
                "Trace": TRACE_OBSERVATIONS}
    # the engines' turns' tokens and iterations
    engine_runs = {"Engine": (ENGINE_TOKENS, ENGINE_ITERATIONS),
                   "ByRemaining": (BY_REMAINING_TOKENS, BY_REMAINING_ITERATIONS),
                   "Phases": (PHASES_TOKENS, PHASES_ITERATIONS), "KvMemory": (KV_TOKENS, KV_ITERATIONS),
                   "Preempt": (PREEMPT_TOKENS, PREEMPT_ITERATIONS),
                   "SelfPreempt": (SELF_PREEMPT_TOKENS, SELF_PREEMPT_ITERATIONS),
                   "Tie": (TIE_TOKENS, TIE_ITERATIONS), "PrefixHit": (PREFIX_HIT_TOKENS, PREFIX_HIT_ITERATIONS),
                   "KvCost": (KV_COST_TOKENS, KV_COST_ITERATIONS), "Pd": (PD_TOKENS, PD_ITERATIONS),
                   "Route": (ROUTE_TOKENS, ROUTE_ITERATIONS)}
    for name, program, base, answers in (
            ("Scripted", link_file(SCRIPTED), SCRIPTED.parent, SCRIPTED_ANSWERS),
            ("Sandbox", link_file(SANDBOX), SANDBOX.parent, SANDBOX_ANSWERS),
            ("Renewal", renewal, tmp_path, RENEWAL_ANSWERS), ("Blocks", blocks, tmp_path, BLOCKS_ANSWERS),
            ("Cache", cache, tmp_path, CACHE_ANSWERS), ("Observables", observables, tmp_path, OBSERVABLES_ANSWERS),
            ("Engine", engine, tmp_path, ENGINE_ANSWERS), ("ByRemaining", by_remaining, tmp_path, BY_REMAINING_ANSWERS),
            ("Phases", phases, tmp_path, PHASES_ANSWERS), ("KvMemory", kv_memory, tmp_path, KV_ANSWERS),
            ("Preempt", preempt, tmp_path, PREEMPT_ANSWERS),
            ("SelfPreempt", self_preempt, tmp_path, SELF_PREEMPT_ANSWERS),
            ("Functions", functions, tmp_path, FUNCTIONS_ANSWERS),
            ("EvictBy", evict_by, tmp_path, EVICT_BY_ANSWERS), ("Lease", lease, tmp_path, LEASE_ANSWERS),
            ("Blocksize", blocksize, tmp_path, BLOCKSIZE_ANSWERS), ("Trace", trace, tmp_path, TRACE_ANSWERS),
            ("Tie", tie, tmp_path / "tie", TIE_ANSWERS), ("PrefixHit", prefix_hit, tmp_path, PREFIX_HIT_ANSWERS),
            ("KvCost", kv_cost, tmp_path, KV_COST_ANSWERS), ("Pd", pd, tmp_path, PD_ANSWERS),
            ("Route", route, tmp_path, ROUTE_ANSWERS)):
        ns = f"Serq.Programs.{name}"
        text = render_kernel_module(kernel_program(program, base), ns)
        theorems = "".join(
            f"theorem session_{s} : (getThread (runProgram program 1000).threads {s}).answers = "
            f"[{', '.join(f'⟨{a}, {b}, {c}, {d}⟩' for a, b, c, d in reversed(turns))}] := by\n  decide +kernel\n\n"
            for s, turns in answers.items())
        if name in observed:  # and what the sessions observed
            theorems += "".join(
                f"theorem observed_{s} : (getThread (runProgram program 1000).threads {s}).observations = "
                f"[{', '.join(f'⟨{a}, {b}, {c}, {d}, {e}⟩' for a, b, c, d, e in reversed(obs))}] := by\n  decide +kernel\n\n"
                for s, obs in observed[name].items())
        if name in engine_runs:  # and the turns' tokens and the engine's iterations
            tokens, iterations = engine_runs[name]
            theorems += "".join(
                f"theorem tokens_{s} : (getThread (runProgram program 1000).threads {s}).tokens = "
                f"[{', '.join('⟨' + ', '.join(map(str, t)) + '⟩' for t in reversed(ts))}] := by\n  decide +kernel\n\n"
                for s, ts in tokens.items())
            # (a program of several engines: per stage, its engine's iterations)
            for stage, its in enumerate(iterations) if isinstance(iterations, tuple) else [(0, iterations)]:
                theorems += _iterations_theorem(its, stage)
        text = text.replace(f"end {ns}", theorems + f"end {ns}")
        parts.append(text if not parts else text[text.index(f"namespace {ns}"):])
    f = tmp_path / "Examples.lean"
    # one theorem at a time: elaborated asynchronously, every theorem's kernel evaluation stays in memory
    # until the file ends (past 16 GB with the programs above)
    f.write_text("\n".join(parts).replace("@[expose] public section", "set_option Elab.async false\n\n@[expose] public section", 1))
    r = compile_file(f)
    assert r.ok, [d.message for d in r.diagnostics]


def test_kernel_export_of_exclusive_prefill(tmp_path):
    """`serq lean export` takes `exclusive prefill`: the engine's clauses as vLLM's schedule's (no serve keys,
    no `only`), and the engines under it beside the program (`exclusive`, `Serq.Kernel.runProgramX`'s)."""
    from click.testing import CliRunner

    from serq.cli import main
    f, _ = _written(tmp_path, "exclusive", EXCLUSIVE_SOURCE)
    r = CliRunner().invoke(main, ["lean", "export", str(f)])
    assert r.exit_code == 0, r.output
    for term in ("public import Serq.KernelExclusive", "engines := [⟨(.num 4), (.num 3), (.num 1), [], none, none, true, (.num 0)⟩]",
                 "def exclusive : List Nat := [0]"):
        assert term in r.output, term
    r = CliRunner().invoke(main, ["lean", "export", str(_written(tmp_path, "pd", PD_SOURCE)[0])])
    assert r.exit_code == 0 and "exclusive" not in r.output  # (a program with none: as before)


@pytest.mark.lean
def test_the_exclusive_prefill_program_runs_in_lean_as_computed_by_hand(tmp_path: Path):
    """EXCLUSIVE_SOURCE's run in the Lean interpreter (`runProgramX program exclusive`, its own file): its
    answers, its turns' tokens and its engine's iterations are the hand-computed ones, and the interpreter
    that ignores `exclusive prefill` (`runProgram`, vLLM's schedule) answers otherwise."""
    from serq.leangen.build import compile_file
    from serq.leangen.kernel import kernel_program, render_kernel_module
    _, program = _written(tmp_path, "exclusive", EXCLUSIVE_SOURCE)
    ns = "Serq.Programs.Exclusive"
    run = "runProgramX program exclusive 1000"
    text = render_kernel_module(kernel_program(program, tmp_path), ns)
    theorems = "".join(
        f"theorem session_{s} : (getThread ({run}).threads {s}).answers = "
        f"[{', '.join(f'⟨{a}, {b}, {c}, {d}⟩' for a, b, c, d in reversed(turns))}] := by\n  decide +kernel\n\n"
        for s, turns in EXCLUSIVE_ANSWERS.items())
    theorems += "".join(
        f"theorem tokens_{s} : (getThread ({run}).threads {s}).tokens = "
        f"[{', '.join('⟨' + ', '.join(map(str, t)) + '⟩' for t in reversed(ts))}] := by\n  decide +kernel\n\n"
        for s, ts in EXCLUSIVE_TOKENS.items())
    theorems += _iterations_theorem(EXCLUSIVE_ITERATIONS, run=run)
    theorems += (f"theorem not_vllm : iterationsEq (getEngineState (runProgram program 1000).engines 0).records "
                 f"(getEngineState ({run}).engines 0).records = false := by\n  decide +kernel\n\n")
    f = tmp_path / "Exclusive.lean"
    f.write_text(text.replace(f"end {ns}", theorems + f"end {ns}").replace(
        "@[expose] public section", "set_option Elab.async false\n\n@[expose] public section", 1))
    r = compile_file(f)
    assert r.ok, [d.message for d in r.diagnostics]


@pytest.mark.lean
def test_the_granule_program_runs_in_lean_as_computed_by_hand(tmp_path: Path):
    """GRANULE_SOURCE's run in the Lean interpreter (its own file: one Lean start-up): its answers and its
    engine's iterations, the passed-over prefill's included, are the hand-computed ones."""
    from serq.leangen.build import compile_file
    from serq.leangen.kernel import kernel_program, render_kernel_module
    _, granule = _written(tmp_path, "granule", GRANULE_SOURCE)
    ns = "Serq.Programs.Granule"
    text = render_kernel_module(kernel_program(granule, tmp_path), ns)
    theorems = "".join(
        f"theorem session_{s} : (getThread (runProgram program 1000).threads {s}).answers = "
        f"[{', '.join(f'⟨{a}, {b}, {c}, {d}⟩' for a, b, c, d in reversed(turns))}] := by\n  decide +kernel\n\n"
        for s, turns in GRANULE_ANSWERS.items())
    theorems += _iterations_theorem(GRANULE_ITERATIONS)
    f = tmp_path / "Granule.lean"
    f.write_text(text.replace(f"end {ns}", theorems + f"end {ns}"))
    r = compile_file(f)
    assert r.ok, [d.message for d in r.diagnostics]


# what `serq lean export` says of each example: the fragment it is in, or the first construct outside
EXPORTED = {
    "multi-turn/scripted_agent.sq": "Serq.Kernel", "multi-turn/shared_sandbox.sq": "Serq.Kernel",
    "oracle/vllm_request.sq": "Serq.Exec",
    "multi-turn/agent.sq": "is `ps(…)`", "single-turn/ps.sq": "is `ps(…)`", "single-turn/two_flows.sq": "is `ps(…)`",
    "multi-turn/closed.sq": "`closed` arrivals", "single-turn/claims.sq": "gauge `busy_fraction`",
    "single-turn/fork_join.sq": "`poisson` arrivals", "single-turn/md1.sq": "`poisson` arrivals",
    "single-turn/mg1.sq": "`poisson` arrivals", "single-turn/mg1_h2.sq": "`poisson` arrivals",
    "single-turn/mm1.sq": "`poisson` arrivals", "single-turn/mmc.sq": "`poisson` arrivals",
    "single-turn/renewal.sq": "gauge `jobs`",
    "multi-turn/prefix_cache.sq": "`poisson` arrivals", "single-turn/kv_pool.sq": "preemption on pool `kv`",
    "multi-turn/vllm.sq": "not on the step clock",
    "multi-turn/vllm_replay.sq": "not expressible as vLLM settings",
    "scheduling/sjf.sq": "not expressible as vLLM settings",
    "scheduling/join_shortest_queue.sq": "Serq.Kernel", "scheduling/decode_first.sq": "Serq.KernelBody",
    "scheduling/decode_rounds.sq": "Serq.KernelBody",
    "papers/li_dai_peng.sq": "Serq.Kernel", "papers/sarathi.sq": "`poisson` arrivals",
    "papers/fastertransformer.sq": "Serq.Kernel", "oracle/vllm_request_phased.sq": "Serq.Exec",
    "papers/rad.sq": "Serq.Kernel",
    "papers/bari_rate.sq": "Serq.Kernel",
    "papers/svf.sq": "Serq.Kernel",
    "papers/smith_spt.sq": "`batch` arrivals",
    # (two step engines are in the kernel fragment: what is outside is the family and the non-whole numbers)
    "pd-disaggregation/llmd_nixl_pull.sq": "pool family `P.reqs[2]`",
    "pd-disaggregation/vllm_local_or_remote.sq": "the number 0.004", "pd-disaggregation/vllm_nixl_push.sq": "the number 0.004",
    # a renewal workload without `--arrivals N` (with it, the kernel fragment; the engine model takes
    # given arrival times only)
    "papers/dai_backlog.sq": "`arrive renewal(g)` without `--arrivals N`",
    "papers/dai_backlog_decode.sq": "`arrive renewal(g)` without `--arrivals N`",
    "papers/dai_backlog_many.sq": "`arrive renewal(g)` without `--arrivals N`",
    "papers/dai_backlog_chunked.sq": "`arrive renewal(g)` without `--arrivals N`",
    "papers/dai_backlog_phased.sq": "`arrive renewal(g)` without `--arrivals N`",
    "papers/dai_backlog_budget.sq": "`arrive renewal(g)` without `--arrivals N`",
}


def test_every_example_is_in_the_export_table():
    programs = {str(p.relative_to(REPO / "examples")) for p in (REPO / "examples").rglob("*.sq")
                if "fn main" in p.read_text()}
    assert programs == set(EXPORTED)


@pytest.mark.parametrize("example", sorted(EXPORTED))
def test_export_of_each_example(example):
    from click.testing import CliRunner

    from serq.cli import main
    r = CliRunner().invoke(main, ["lean", "export", str(REPO / "examples" / example)])
    said = EXPORTED[example]
    if said.startswith("Serq."):
        assert r.exit_code == 0, r.output
        assert f"public import {said}\n" in r.output
    else:
        assert r.exit_code == 1 and "outside the Lean" in r.output and said in r.output, r.output
