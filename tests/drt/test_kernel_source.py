"""The kernel DRT's programs as serQ source (serq.ir.to_source): every generated program prints, and
its source links back to the same IR, unless the language refuses it by one of its rules that the IR
does not have (`LANGUAGE_RULES`: the IR and the interpreter run such a program, which a `.sq` cannot say)."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, Phase, given, settings

from kernel_strategies import kernel_case, kernel_cases
from serq.errors import SerqError
from serq.ir.to_source import relinked, same_program

# What the linker refuses and IR validation does not (the reference's *Every instant settles*, *Lints*,
# the server's `end;`, a hold's constant units above its cap, a queue key's `cachedin`): the generator
# writes such programs on purpose, and the interpreter and Lean run them
LANGUAGE_RULES = (
    "can go round without letting time pass",
    "a server ends a request outside any hold",
    "the hold could never be admitted",
    "so `cached` is 0 in its body",
    "from live state",
    "a queue key has no session",
)
ROUND_TRIPS = 250


def relinks_or_is_refused_by_a_rule(case, folder) -> bool:
    """True when the case's source links back to its IR, False when the language refuses it by a rule
    of `LANGUAGE_RULES`; anything else fails."""
    try:
        back = relinked(case.program, folder / "case.sq")
    except SerqError as e:
        assert e.kind in ("link", "parse") and any(rule in e.message for rule in LANGUAGE_RULES), \
            (str(e), (folder / "case.sq").read_text())
        return False
    assert same_program(back, case.program), (folder / "case.sq").read_text()
    return True


@settings(max_examples=ROUND_TRIPS, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(kernel_cases())
def test_generated_programs_print_and_link_back_to_their_ir(tmp_path_factory, case):
    relinks_or_is_refused_by_a_rule(case, tmp_path_factory.mktemp("case"))


def test_most_generated_programs_link_back(tmp_path):
    """Of the first 100 seeds' programs, a quarter at least are ones the language says (the rest are
    refused by `LANGUAGE_RULES`): the round trip above is not one of refusals alone."""
    relinked_count = sum(relinks_or_is_refused_by_a_rule(kernel_case(random.Random(seed)), tmp_path)
                         for seed in range(100))
    assert relinked_count >= 25, relinked_count
