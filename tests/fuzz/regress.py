"""The regression cases (tests/fuzz/regressions/): every input the campaign (or the issue that
started it) found to crash, hang or be refused without a location, kept with what it must give
now. `cases.json` lists them: the file, the kind of seed it stands for (program, ir, oracle,
instance; where it is placed, as the campaign places a mutant of `seed_file`), an instance's
`program`, the `cause` that was fixed, the outcome class `expect`ed of each command named, and a
`message` some command's stderr must hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .harness import BAD, REPO, Case, Outcome, Workspace, run_case

FOLDER = Path(__file__).with_name("regressions")


def load_cases() -> list[dict]:
    return json.loads((FOLDER / "cases.json").read_text(encoding="utf-8"))


def _arrival(program: str | None) -> str | None:
    if program is None:
        return None
    from serq.link import link_file
    return link_file(REPO / program).workload.arrival.kind


def run_regression(entry: dict, ws: Workspace) -> list[Outcome]:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", Path(entry["file"]).stem)
    data = (FOLDER / entry["file"]).read_bytes()
    options = {"form": entry.get("form", "text"), "suffix": Path(entry["file"]).suffix,
               "arrival": _arrival(entry.get("program"))}
    case = Case(f"r-{name}", entry["kind"], entry["seed_file"], data, ["regression"], entry.get("program"), options)
    return run_case(case, ws)


def problems(entry: dict, outcomes: list[Outcome]) -> list[str]:
    """What is wrong with a regression case's outcomes (nothing: it holds)."""
    out = []
    by_command = {o.command: o for o in outcomes}
    for o in outcomes:
        if o.klass in BAD:
            out.append(f"{o.command}: {o.klass}: {o.detail[:400]}")
    for command, klass in entry.get("expect", {}).items():
        o = by_command.get(command)
        if o is None:
            out.append(f"{command}: not run (ran {sorted(by_command)})")
        elif o.klass != klass:
            out.append(f"{command}: {o.klass}, expected {klass}: {o.err[:400]}")
    message = entry.get("message")
    if message is not None and not any(message in o.err for o in outcomes):
        out.append(f"no command's stderr holds {message!r}: " + " | ".join(o.err[:200] for o in outcomes))
    return out
