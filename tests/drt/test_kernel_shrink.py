"""Shrinking a divergent kernel case (serq.leangen.kernel_shrink): the planted bugs of
test_kernel_drt.py are the divergences. Their oracle here is the interpreter itself, run with and
without the bug (the interpreter without it agrees with Lean on every generated case: that is what
test_kernel_drt.py checks), so these tests need no Lean, except the last, which checks in Lean that
the shrunk programs still diverge."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_strategies import kernel_case
from serq.errors import SerqError
from serq.ir import models as ir
from serq.ir.validate import validate
from serq.leangen.kernel import RunNotEnded, kernel_program
from serq.leangen.kernel_drt import KernelCase, KernelObserved, check_kernel_in_lean, observe_kernel, rerun_line
from serq.leangen.kernel_shrink import measure, shrink, simplifications, usable_case, write_shrunk_reproducer
from serq.link import link_text
from serq.sim.engine import SimRunError
from test_kernel_drt import _planted_cases, planted_record


def planted_oracle(bug: str):
    """A candidate diverges when the planted bug changes what the interpreter records of it."""
    def judge(items: list[tuple[KernelCase, KernelObserved]]) -> list[bool]:
        verdicts = []
        for case, right in items:
            try:
                verdicts.append(planted_record(bug, case, right) is not None)
            except (SerqError, SimRunError, ValueError):  # the bug breaks the run: not this divergence
                verdicts.append(False)
        return verdicts
    return judge


@pytest.fixture(scope="module")
def while_runs_once():
    _, case, _ = _planted_cases("while_runs_once")[0]
    return case, shrink(case, planted_oracle("while_runs_once"), batch=20)


def test_a_planted_bug_shrinks_to_what_it_needs(while_runs_once):
    """`while_runs_once` (a `while` runs its body once, whatever its guard): its first generated case, a
    program of pools, stages and a server, shrinks to the sessions alone: a turn, then `while (more)
    { turn; }` (the generated sessions' loop, its guard the trace's attribute), with no server, pool or
    stage, and still diverges; a smaller program than the generator drew, by a factor of eight."""
    case, shrunk = while_runs_once
    program = shrunk.case.program
    session = [s.model_dump(exclude_none=True) for s in program.workload.session]
    assert session == [{"kind": "turn"},
                       {"kind": "while", "test": {"kind": "attr", "name": "more"}, "body": [{"kind": "turn"}]}]
    assert program.server == [] and program.pools == [] and program.stages == []
    assert planted_oracle("while_runs_once")([(shrunk.case, shrunk.observed)]) == [True]
    assert 8 * len(ir.to_json(program)) < len(ir.to_json(case.program))
    assert shrunk.rounds >= 3 and shrunk.complete
    # its trace (three sessions of six turns) too: one session of the three turns that tell a `while`
    # run once from one run twice, every number 0 (`more` is the reader's: 1 but on the last)
    assert trace_rows(case.program) == [["9", "0", "0", "6", "0", "1"], ["9", "0", "2", "5", "0", "1"],
                                        ["3", "1", "2", "1", "0", "0"], ["3", "1", "4", "6", "0", "1"],
                                        ["3", "1", "1", "6", "0", "1"], ["7", "1", "2", "0", "0", "1"]]
    assert trace_rows(program) == [["3", "0", "0", "0", "0", "0"]] * 3


def test_the_shrunk_program_is_a_valid_program_of_the_fragment(while_runs_once):
    _, shrunk = while_runs_once
    validate(shrunk.case.program)
    kernel_program(shrunk.case.program, None)
    assert observe_kernel(shrunk.case) == shrunk.observed


def test_no_simplification_of_the_shrunk_program_diverges(while_runs_once):
    """The descent stops at a local minimum: every program one simplification smaller either is not a
    usable case or does not diverge."""
    _, shrunk = while_runs_once
    usable = [pair for pair in (usable_case(program, 1000) for program in simplifications(shrunk.case.program))
              if pair is not None]
    assert usable, "the shrunk program has simpler programs of the fragment"
    assert not any(planted_oracle("while_runs_once")(usable))


def test_every_simplification_is_smaller():
    case = kernel_case(random.Random(11))
    bound = measure(case.program)
    candidates = list(simplifications(case.program))
    assert len(candidates) > 50
    assert all(measure(p) < bound for p in candidates)
    # among them: one statement fewer in the server, and fewer sessions
    assert any(len(p.server) == len(case.program.server) - 1 for p in candidates)


def test_another_planted_bug_shrinks_and_still_diverges():
    """A bug in the pools' queue (a fifo queue served newest first): its first case shrinks to a program
    less than a third of the generated one's size that still diverges."""
    _, case, _ = _planted_cases("fifo_serves_newest")[0]
    shrunk = shrink(case, planted_oracle("fifo_serves_newest"), batch=20)
    assert planted_oracle("fifo_serves_newest")([(shrunk.case, shrunk.observed)]) == [True]
    assert 3 * len(ir.to_json(shrunk.case.program)) < len(ir.to_json(case.program))


def test_a_choose_bug_shrinks_to_a_tie():
    """`choose_ties_to_the_largest` (a tie among a choose's indices goes to the largest): its first case, a
    program of pools, stages and three blocks, shrinks to one session whose `init` chooses among two indices
    whose keys tie, and observes the choice: what the bug needs and nothing else."""
    _, case, _ = _planted_cases("choose_ties_to_the_largest")[0]
    shrunk = shrink(case, planted_oracle("choose_ties_to_the_largest"), batch=20)
    program = shrunk.case.program
    choose, observe = program.workload.init
    assert isinstance(choose, ir.ChooseStmt) and choose.count == ir.Num(value=2)
    assert len({k.model_dump_json() for k in choose.keys}) == 1 and all(isinstance(k, ir.Num) for k in choose.keys)
    assert isinstance(observe, ir.ObserveStmt) and observe.value == ir.Attr(name=choose.name)
    assert program.server == [] and program.pools == [] and program.stages == []
    assert planted_oracle("choose_ties_to_the_largest")([(shrunk.case, shrunk.observed)]) == [True]


def trace_rows(program: ir.Program) -> list[list[str]]:
    """The rows of the trace a program replays (its header checked)."""
    header, *rows = Path(program.workload.arrival.file).read_text().splitlines()
    assert header == "session,arrive,new,out,think,forced"
    return [row.split(",") for row in rows]


def test_a_trace_shrinks_to_the_rows_the_divergence_needs():
    """`trace_replayed_in_arrival_order` (sessions arriving at one instant replayed in arrival order, not the
    file's): its first case's trace of three sessions, nine turns, shrinks to two sessions of a turn each,
    written in the file in the other order than they arrive, the numbers that do not matter 0; each
    candidate trace is a file beside the generated one, named by its content."""
    bug = "trace_replayed_in_arrival_order"
    _, case, _ = _planted_cases(bug)[0]
    shrunk = shrink(case, planted_oracle(bug), batch=20)
    assert len(trace_rows(case.program)) == 9
    assert trace_rows(shrunk.case.program) == [["5", "1", "0", "0", "0", "0"], ["4", "0", "0", "0", "0", "0"]]
    assert planted_oracle(bug)([(shrunk.case, shrunk.observed)]) == [True]
    original, smaller = Path(case.program.workload.arrival.file), Path(shrunk.case.program.workload.arrival.file)
    assert smaller.parent == original.parent and smaller.name.startswith("trace-") and smaller != original
    assert shrunk.complete


def test_a_divergence_is_written_shrunk_beside_its_generated_program(tmp_path, while_runs_once):
    """`write_shrunk_reproducer`: the shrunk program in the folder, the generated one in `generated/`,
    each rerunnable by `serq run` (given the shrunk program, which shrinks no further, for speed)."""
    _, shrunk = while_runs_once
    path, said = write_shrunk_reproducer(shrunk.case, shrunk.observed, tmp_path / "kernel0",
                                         oracle=planted_oracle("while_runs_once"))
    assert path == tmp_path / "kernel0" / "case.json" and (tmp_path / "kernel0" / "generated" / "case.json").exists()
    written = ir.from_json(path.read_text())  # (its trace copied beside it and named relatively)
    assert (written.workload.session, written.server) == (shrunk.case.program.workload.session, [])
    assert said.startswith(f"rerun: {rerun_line(path.parent)}; shrunk in 0 rounds") and "a local minimum" in said
    for folder in (path.parent, path.parent / "generated"):
        run = subprocess.run([sys.executable, "-m", "serq.cli", "run", str(folder / "case.json")],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr


LOOPS_FOREVER = """
fn main() {
  stage d: delay;
  workload {
    arrive batch(1);
    session { loop { turn; } }
  }
  server { run d (cost(d, 1)); }
}
"""


def test_a_run_that_does_not_end_by_the_horizon_is_refused():
    """A simplification can make a run endless (a loop's guard made 1); `shrink` runs candidates to a
    horizon, and one still going then is no candidate."""
    program = link_text(LOOPS_FOREVER, "loops.sq")
    with pytest.raises(RunNotEnded, match="still going at time 50"):
        observe_kernel(KernelCase(program), horizon=50)


@pytest.mark.lean
def test_the_shrunk_programs_diverge_in_lean(while_runs_once):
    """What the oracle above stands in for: Lean (decide +kernel) refutes the buggy interpreter's record
    of the shrunk program."""
    _, shrunk = while_runs_once
    case = shrunk.case
    wrong = planted_record("while_runs_once", case, shrunk.observed)
    failures = check_kernel_in_lean([(0, case, wrong), (1, case, shrunk.observed)])
    assert [f.case_id for f in failures] == [0]
