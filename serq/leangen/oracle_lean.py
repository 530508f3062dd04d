"""Oracle scenarios -> Lean theorems, through the oracle program's IR and the fragment's templates."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from serq.leangen.fragment import FragmentProgram, environment, fragment
from serq.link import link_file
from serq.oracle import ORACLE_PROGRAM, Scenario, load_scenario, program_inputs, write_trace


def instance_ir(scenario: Scenario, program: Path = ORACLE_PROGRAM):
    """Link the oracle program for a scenario: its config as inputs, its requests as the trace.
    Returns the IR and the folder it was linked in (which holds the trace)."""
    folder = Path(tempfile.mkdtemp(prefix="serq-oracle-"))
    target = folder / program.name
    target.write_text(program.read_text())
    write_trace(scenario, folder / "vllm_request.csv")
    return link_file(target, program_inputs(scenario.config)), folder


def scenario_fragment(scenario: Scenario) -> FragmentProgram:
    program, folder = instance_ir(scenario)
    return fragment(program, folder)


@dataclass
class _Rendered:
    ident: str
    name: str
    description: str
    program: FragmentProgram
    expected: list[tuple[int, int, int, int, int, int]]
    unfinished: list[tuple[int, int]]  # (session, turn) vLLM did not finish within the scenario's steps
    fuel: int


def _ident(name: str) -> str:
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return ident if ident[0].isalpha() else "s_" + ident


def scenario_fuel(sc: Scenario) -> int:
    """The model's fuel (scheduler steps) for a scenario. When vLLM finished every request: one step
    per token scheduled at the least, with room to spare (4 × (the last token's step + 10)). When it
    did not (`did_not_finish`): the driver's `schedule()` calls, `steps`; the model's idle steps jump
    to the next submission, so it runs at least as long as vLLM's driver did."""
    if sc.did_not_finish:
        if sc.steps is None:
            raise ValueError(f"{sc.name}: did_not_finish without schedule_calls")
        return sc.steps
    return 4 * (max(e.last for e in sc.expected.values()) + 10)


def render_oracle_module(paths: list[Path], title: str) -> str:
    import json
    scenarios = []
    for path in paths:
        sc = load_scenario(path)
        done = {k: e for k, e in sc.expected.items() if e.first is not None and e.last is not None}
        expected = [(sid, turn, e.first, e.last, e.preemptions, e.cached or 0)
                    for (sid, turn), e in sorted(done.items())]
        unfinished = sorted(k for k in sc.expected if k not in done)
        description = json.loads(path.read_text())["scenario"].get("description", "").replace("-/", "- /")
        scenarios.append(_Rendered(_ident(sc.name), sc.name, description, scenario_fragment(sc), expected,
                                   unfinished, scenario_fuel(sc)))
    return environment().get_template("oracle.lean.j2").render(title=title, scenarios=scenarios)
