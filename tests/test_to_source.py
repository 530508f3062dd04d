"""IR -> serQ source (serq.ir.to_source): the examples and the oracle program print and link back to
their IR; what has no source form is refused by name. (The kernel DRT's generated programs:
tests/drt/test_kernel_source.py.)"""

from __future__ import annotations

import shutil

import pytest

from helpers import REPO
from serq.errors import SerqError
from serq.ir import models as ir
from serq.ir.to_source import program_source, relinked, run_flags, same_program
from serq.link import link_file
from test_leangen import EXPORTED

# every example `serq lean export` takes into the kernel fragment, the other kernel programs the examples
# hold (all but the queues'), and the vLLM oracle's program
KERNEL_EXAMPLES = sorted(name for name, fragment in EXPORTED.items() if fragment == "Serq.Kernel")
QUEUES = ("pd-disaggregation/llmd_nixl_pull.sq", "pd-disaggregation/vllm_local_or_remote.sq",
          "pd-disaggregation/vllm_nixl_push.sq")
PROGRAMS = sorted(set(EXPORTED) - set(QUEUES))


def links_back(path, program: ir.Program, folder) -> bool:
    """Whether the program linked from `path` prints and links back to itself in `folder` (with a copy of
    its trace, which it names beside itself)."""
    for trace in (program.workload.arrival, program.workload.trace):
        if isinstance(trace, ir.Trace):
            shutil.copy(path.parent / trace.file, folder / trace.file)
    return same_program(relinked(program, folder / "back.sq"), program)


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_example_prints_and_links_back(tmp_path, name):
    path = REPO / "examples" / name
    assert links_back(path, link_file(path), tmp_path)


def test_the_kernel_examples_are_among_them():
    assert KERNEL_EXAMPLES and set(KERNEL_EXAMPLES) <= set(PROGRAMS)


def test_the_oracle_program_prints_and_links_back(tmp_path):
    path = REPO / "serq" / "programs" / "vllm_request.sq"
    assert links_back(path, link_file(path, {"max_num_seqs": "2"}), tmp_path)


@pytest.mark.parametrize("name", QUEUES)
def test_a_queue_is_refused_by_name(name):
    with pytest.raises(SerqError, match=r"the pool `P\.reqs` \(a queue's member"):
        program_source(link_file(REPO / "examples" / name))


def _program(**changes) -> ir.Program:
    base = ir.Program(stages=[ir.Stage(name="d", service=ir.Ps(capacity=ir.Ctx(var="present")))],
                      workload=ir.Workload(arrival=ir.Batch(sessions=1)))
    return base.model_copy(update=changes)


@pytest.mark.parametrize("program,phrase", [
    (_program(server=[ir.ObserveStmt(name="o", value=ir.Num(value=-1))]), "the number -1"),
    (_program(stages=[ir.Stage(name="e", count=2, service=ir.Step(budget=ir.Num(value=1), cost=ir.Num(value=1)))]),
     "the step stage family `e[2]`"),
    (_program(stages=[ir.Stage(name=n, service=ir.Step(budget=ir.Num(value=1), cost=ir.Num(value=1)))
                      for n in ("e", "f")],
              pools=[ir.Pool(name="kv", admit_via="e", memory_of="f")]),
     "pool `kv`, admitted by `e` and the memory of `f`"),
    (_program(workload=ir.Workload(arrival=ir.Trace(file='a"b.csv'))), "the trace file"),
])
def test_what_has_no_source_form_is_refused_by_name(program, phrase):
    with pytest.raises(SerqError, match="the IR has no serQ source form") as e:
        program_source(program)
    assert phrase in e.value.message


NEGATIVE_CONSTANTS = """
use "std/args";
fn main() {
  let k = -2.5;
  let rate = args.number("rate", -1);
  stage d : delay;
  device gpu { }
  engine e on gpu {
    tokens cap 4;
    state r = -3;
    schedule { advance running; admit waiting while (running.preempted == 0); set r = r + 1; }
    execute (1);
  }
  workload { arrive batch(1); }
  server { observe o = -k + rate; run d (cost(d, 1)); }
}
"""


def test_negative_constants_print_and_link_back(tmp_path):
    """A let's, an input's and a register's value is a number the linker evaluated: a negative one is written
    as a negation (an expression's negation stays one, `-k`)."""
    (tmp_path / "neg.sq").write_text(NEGATIVE_CONSTANTS)
    program = link_file(tmp_path / "neg.sq")
    assert same_program(relinked(program, tmp_path / "back.sq"), program)


def test_run_flags_give_the_settings():
    assert run_flags(ir.Settings()) == ["--seed", "1"]
    assert run_flags(ir.Settings(seed=3, arrivals=4, horizon=100, warmup=2.5)) == \
        ["--seed", "3", "--arrivals", "4", "--horizon", "100", "--warmup", "2.5"]
