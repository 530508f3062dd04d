"""docs/language.md documents every entry of the catalogue."""

from helpers import REPO
from serq.ir import catalogue as C

DOC = (REPO / "docs" / "language.md").read_text()


def test_every_catalogue_entry_is_documented():
    names = [*C.CONTEXT_VARIABLES, *C.FUNCTIONS, *C.POOL_OBSERVABLES, *C.STAGE_OBSERVABLES,
             *C.OBSERVED_AGGREGATES, *C.BUILTIN_ATTRIBUTES, *C.TRACE_ATTRIBUTES]
    missing = [n for n in names if f"`{n}" not in DOC]
    missing += [d for d in C.DISTRIBUTIONS if f"`~{d}(" not in DOC]
    assert not missing, missing


def test_every_moment_is_in_the_table():
    missing = [m.value for m in C.Moment if m.value.split()[0] not in DOC]
    assert not missing, missing
