"""`choose j in n by (keys)` in the Lean kernel fragment (issue 13): the exporter writes it in the kernel's
statements (`serq.leangen.kernel._Lowering.choose`), and the Lean machine's run is the interpreter's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import REPO, lean_refuses_only_the_wrong, link_source
from serq.ir import models as ir
from serq.errors import SerqError
from serq.leangen.kernel import CHOOSE_COUNT, CHOOSE_INDEX, kernel_program, recorded
from serq.link import link_file

# Three sessions at 0 on a pool of cap 2 and a delay stage. In the server, before the hold:
# - `pick`: j over 0 … 2 by (serial + 2j) % 3: session 0's keys are 0, 2, 1 (j = 0), session 1's 1, 0, 2
#   (j = 1), session 2's 2, 1, 0 (j = 2);
# - `tie`: every index's key is 1: the smallest index, 0;
# - `lex`: m over 0 … 4 by (m % 2, 4 - m): the even m have the least first key, and of those m = 4 the
#   least second (m = 3's second key, 1, is below m = 2's, but its first key is 1): 4;
# inside the hold, `used_now`: q over 0 … 2 by (q == used(p) ? 0 : 1) is the pool's used units. Sessions 0
# and 1 are admitted at 0 (used 2 as their bodies run) and run 1 + j: answered at 1 and 2; session 2 is
# admitted at 1, when session 0 gives its unit back (used 2 again), and runs 3: answered at 4.
CHOOSE_SOURCE = """fn main() {
  let n = 3;
  stage d : delay;
  pool p { cap 2; }
  workload { arrive batch(3); }
  server {
    choose j in n by ((serial + 2 * j) % 3);
    observe pick = j;
    choose t in 4 by (1);
    observe tie = t;
    choose m in 5 by (m % 2, 4 - m);
    observe lex = m;
    hold p (cost(p, 1)) {
      choose q in 3 by (q == used(p) ? 0 : 1);
      observe used_now = q;
      run d (cost(d, 1 + j));
    }
  }
}
"""
# (serial, turn, start, answered) and (serial, turn, name: pick 0, tie 1, lex 2, used_now 3, time, value)
CHOOSE_ANSWERS = {0: [(0, 1, 0, 1)], 1: [(1, 1, 0, 2)], 2: [(2, 1, 0, 4)]}
CHOOSE_OBSERVATIONS = {s: [(s, 1, 0, 0, s), (s, 1, 1, 0, 0), (s, 1, 2, 0, 4), (s, 1, 3, 1 if s == 2 else 0, 2)]
                       for s in range(3)}

# Counts that are not constants, read once before the choice (the interpreter's `E.count_of`, before its loop):
# `k` over 0 … serial by (5 - k), the largest index: the session's serial; `j` over 0 … j + 1, with j read as
# it stands, by (5 - j): 0 + 2 = 2 indices the first time (j = 1), 1 + 2 = 3 the second (j = 2), where a bound
# read again at every step would see j move. Session s runs 1 + s: answered at 1, 2, 3.
COUNTED_SOURCE = """fn main() {
  stage d : delay;
  workload { arrive batch(3); }
  server {
    choose k in serial + 1 by (5 - k);
    observe last = k;
    choose j in j + 2 by (5 - j);
    observe again = j;
    choose j in j + 2 by (5 - j);
    observe again = j;
    run d (cost(d, 1 + k));
  }
}
"""
COUNTED_ANSWERS = {s: [(s, 1, 0, 1 + s)] for s in range(3)}
COUNTED_OBSERVATIONS = {s: [(s, 1, 0, 0, s), (s, 1, 1, 0, 1), (s, 1, 1, 0, 2)] for s in range(3)}

# examples/scheduling/join_shortest_queue.sq, computed by hand in its comments: answers, and the `replica`
# each turn was routed to (0: a, 1: b), observed as it is chosen
JSQ = REPO / "examples" / "scheduling" / "join_shortest_queue.sq"
JSQ_ANSWERS = {0: [(0, 1, 0, 2), (0, 2, 3, 6)], 1: [(1, 1, 0, 3), (1, 2, 4, 7)],
               2: [(2, 1, 0, 3), (2, 2, 4, 7)], 3: [(3, 1, 0, 5), (3, 2, 6, 10)]}
JSQ_OBSERVATIONS = {0: [(0, 1, 0, 0, 0), (0, 2, 0, 3, 0)], 1: [(1, 1, 0, 0, 1), (1, 2, 0, 4, 0)],
                    2: [(2, 1, 0, 0, 0), (2, 2, 0, 4, 1)], 3: [(3, 1, 0, 0, 1), (3, 2, 0, 6, 0)]}


@pytest.mark.parametrize("source, answers, observations", [
    (CHOOSE_SOURCE, CHOOSE_ANSWERS, CHOOSE_OBSERVATIONS), (JSQ, JSQ_ANSWERS, JSQ_OBSERVATIONS),
    (COUNTED_SOURCE, COUNTED_ANSWERS, COUNTED_OBSERVATIONS)], ids=["chooses", "join_shortest_queue", "counted"])
def test_the_recorded_run_is_the_hand_computed_one(tmp_path, source, answers, observations):
    program = link_file(source) if isinstance(source, Path) else link_source(source, tmp_path, "choose.sq")
    sessions = recorded(program, kernel_program(program, tmp_path))
    assert {s: list(r.answers) for s, r in enumerate(sessions)} == answers
    assert {s: list(r.observations) for s, r in enumerate(sessions)} == observations


def test_a_choose_is_lowered_to_sets_and_a_while_over_a_counter_past_the_attributes(tmp_path):
    program = link_source(CHOOSE_SOURCE, tmp_path, "choose.sq")
    kp = kernel_program(program, tmp_path)
    names = [a.name for a in program.attributes]
    assert kp.attributes == [*names, CHOOSE_INDEX]  # one counter serves every choose
    j, i = names.index("j"), len(names)
    first = kp.server[:3]
    assert [s.ctor for s in first] == ["set", "set", "while"]
    assert first[0].args[0] == j and first[0].args[1].args == (0,)  # j starts at 0
    assert first[1].args[0] == i and first[1].args[1].args == (1,)  # the candidates from 1
    assert first[2].args[0].args == ("lt", first[2].args[0].args[1], first[2].args[0].args[2])
    assert first[2].args[0].args[2].args == (3,)  # `n` folded to its value
    # the built-ins keep their places: the counter is past them, not in `cached`'s
    assert kp.cached_at == names.index("cached") and kp.computed_at == names.index("computed")


def test_a_program_without_choose_has_no_counter(tmp_path):
    program = link_source("fn main() {\n  stage d : delay;\n  workload { arrive batch(1); }\n"
                          "  server { run d (cost(d, 1)); }\n}\n", tmp_path, "choose.sq")
    assert CHOOSE_INDEX not in kernel_program(program, tmp_path).attributes


def test_a_computed_count_is_read_once_into_a_hidden_attribute_before_the_choice(tmp_path):
    program = link_source(COUNTED_SOURCE, tmp_path, "choose.sq")
    kp = kernel_program(program, tmp_path)
    names = [a.name for a in program.attributes]
    assert kp.attributes == [*names, CHOOSE_COUNT, CHOOSE_INDEX]
    count, index, k = len(names), len(names) + 1, names.index("k")
    first = kp.server[:4]
    assert [s.ctor for s in first] == ["set", "set", "set", "while"]
    assert first[0].args[0] == count and first[0].args[1].ctor == "bin"  # serial + 1, read before k is reset
    assert first[1].args[0] == k and first[1].args[1].args == (0,)
    assert first[2].args[0] == index
    assert first[3].args[0].args[2].args == (count,)  # the counter's bound: the count as it was read


@pytest.mark.parametrize("count", [0, 2.5])
def test_a_constant_count_outside_one_to_a_million_in_written_ir_is_refused_at_its_location(tmp_path, count):
    """The linker refuses such a count in a `.sq` (`choose t in 0`); IR written by hand is checked again."""
    program = link_source(CHOOSE_SOURCE, tmp_path, "choose.sq")
    tie = next(s for s in program.server if isinstance(s, ir.ChooseStmt) and s.name == "t")
    tie.count = ir.Num(value=count)
    with pytest.raises(SerqError, match=re.escape(
            f"choose.sq:9:5: error: outside the Lean kernel fragment: `choose t in {count}`: the count is a whole "
            "number from 1 to a million")):
        kernel_program(program, tmp_path)


def test_a_choose_key_reading_a_pool_in_init_is_refused(tmp_path):
    source = CHOOSE_SOURCE.replace("workload { arrive batch(3); }",
                                   "workload { arrive batch(3); init { choose k in 2 by (used(p)); } }")
    with pytest.raises(SerqError, match=re.escape("outside the Lean kernel fragment: `used(p)` in the `init` block")):
        kernel_program(link_source(source, tmp_path, "choose.sq"), tmp_path)


@pytest.mark.lean
def test_the_chooses_agree_in_lean_on_both_paths(tmp_path):
    """The three hand-computed runs, kernel-checked (`decide +kernel`) and through the compiled driver; a run
    whose `lex` observation says 2 (the least second key alone), a router whose second turn of session 0
    went to b, and a second computed count read again after `j` moved (`again` 1, not 2) are refused on both."""
    from serq.leangen.kernel_drt import KernelCase, KernelObserved, observe_kernel

    def with_observation(observed: KernelObserved, name: int, value: int) -> KernelObserved:
        """`observed` with session 0's last observation of `name` saying `value`."""
        s0, *others = observed.sessions
        last = max(k for k, o in enumerate(s0.observations) if o[2] == name)
        changed = tuple((*o[:4], value) if k == last else o for k, o in enumerate(s0.observations))
        return KernelObserved(observed.value, (type(s0)(s0.answers, changed, s0.tokens), *others), observed.records)

    chooses, jsq = KernelCase(link_source(CHOOSE_SOURCE, tmp_path, "choose.sq")), KernelCase(link_file(JSQ))
    counted = KernelCase(link_source(COUNTED_SOURCE, tmp_path, "counted.sq"))
    right_chooses, right_jsq, right_counted = observe_kernel(chooses), observe_kernel(jsq), observe_kernel(counted)
    lean_refuses_only_the_wrong([(chooses, right_chooses, with_observation(right_chooses, 2, 2)),
                                 (jsq, right_jsq, with_observation(right_jsq, 0, 1)),
                                 (counted, right_counted, with_observation(right_counted, 1, 1))], tmp_path)
