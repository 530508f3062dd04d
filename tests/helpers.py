"""Shared test helpers: link a program text and catch the refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from serq.errors import SerqError
from serq.link import link_file

REPO = Path(__file__).resolve().parent.parent

#: What the differential tests checked, a line each (cases, divergences, seconds), printed in the
#: run's summary by tests/conftest.py, so that CI's log says how many cases agreed. A test's lines ride
#: on its report (`user_properties`), which pytest-xdist sends from the worker that ran it to the
#: process that prints the summary.
DRT_SUMMARY: list[str] = []
#: The lines the running test reported, until its report takes them (tests/conftest.py).
DRT_PENDING: list[str] = []


def report_drt(line: str) -> None:
    DRT_PENDING.append(line)


def program(decls: str = "", server: str = "run svc (cost(svc, s));", workload: str | None = None,
            prelude: str = "") -> str:
    """A small kernel program around the parts a test varies."""
    if workload is None:
        workload = "arrive poisson(1); turn { Size s = ~exp(1); }"
    return f"""{prelude}
fn main() {{
  stage svc : fifo;
  pool kv {{ cap 100; }}
  {decls}
  workload {{ {workload} }}
  server {{ {server} }}
}}
"""


def link_source(text: str, tmp_path: Path | None = None, name: str = "prog.sq", supplied=None):
    if tmp_path is not None:
        path = tmp_path / name
        path.write_text(text)
        return link_file(path, supplied)
    return link_file(name, supplied, None, text)


def recorded_by_session(text: str, tmp_path: Path, name: str = "prog.sq") -> dict:
    """What the interpreter records of the program `text`'s run for the Lean kernel's comparison, by session
    (`serq.leangen.kernel.recorded`)."""
    from serq.leangen.kernel import kernel_program, recorded
    program = link_source(text, tmp_path, name)
    return dict(enumerate(recorded(program, kernel_program(program, tmp_path))))


def kernel_run(text: str, tmp_path: Path, name: str = "prog.sq") -> tuple[dict, list]:
    """The interpreter's record of the program `text`'s run for the Lean kernel's comparison: by session
    (`recorded_by_session`'s), and each engine's iteration records (`serq.leangen.kernel.recorded_run`)."""
    from serq.leangen.kernel import kernel_program, recorded_run
    program = link_source(text, tmp_path, name)
    sessions, records = recorded_run(program, kernel_program(program, tmp_path))
    return dict(enumerate(sessions)), records


def by_session(run: dict, part: str) -> dict:
    """One part (`answers`, `observations` or `tokens`) of `recorded_by_session`'s record, by session, as lists."""
    return {s: list(getattr(r, part)) for s, r in run.items()}


def refused(text: str, tmp_path: Path | None = None, supplied=None) -> SerqError:
    with pytest.raises(SerqError) as info:
        link_source(text, tmp_path, supplied=supplied)
    return info.value


def answered_at(observed, serial: int, answered: int):
    """What the Lean kernel's comparison reads of a run (`KernelObserved`) with session `serial`'s one turn
    answered at `answered` instead: a wrong record for `lean_refuses_only_the_wrong`."""
    from serq.leangen.kernel_drt import KernelObserved
    sessions = list(observed.sessions)
    s = sessions[serial]
    (a,) = s.answers
    sessions[serial] = type(s)(((*a[:3], answered),), s.observations, s.tokens)
    return KernelObserved(observed.value, tuple(sessions), observed.records)


def lean_refuses_only_the_wrong(runs: list, folder: Path) -> None:
    """Each (case, right, wrong) of `runs`: the Lean kernel agrees with the interpreter's record `right` and
    refuses the changed record `wrong`, by `decide +kernel` and through the compiled driver alike."""
    from serq.leangen.kernel_drt import check_kernel_in_lean, run_compiled
    items = [(2 * k + j, case, observed) for k, (case, right, wrong) in enumerate(runs)
             for j, observed in enumerate((right, wrong))]
    wrong_ids = [2 * k + 1 for k in range(len(runs))]
    assert [f.case_id for f in check_kernel_in_lean(items)] == wrong_ids
    verdict = run_compiled(items, folder)
    assert (verdict.agreeing, verdict.diverging, verdict.unreadable) == (len(runs), tuple(wrong_ids), ())
