"""`serq target`: the oracle program's settings are each scenario's vLLM config;
what vLLM cannot express is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import REPO, link_source
from serq.cli import main
from serq.errors import SerqError
from serq.link import link_file
from serq.oracle import program_inputs, scenario_paths
from serq.target import target

ORACLE = REPO / "tests" / "data" / "oracle"
SCENARIOS = scenario_paths(ORACLE)
PROGRAM = REPO / "examples" / "oracle" / "vllm_request.sq"




@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_oracle_program_exports_each_scenarios_config(path: Path):
    config = json.loads(path.read_text())["scenario"]["config"]
    settings = target(link_file(PROGRAM, program_inputs(config)))["vllm"]
    for key in ("block_size", "max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold",
                "enable_prefix_caching"):
        assert settings[key] == config[key], key
    assert settings["num_gpu_blocks"] == config["num_blocks"]
    assert settings["scheduler_reserve_full_isl"] is True


def test_cli_prints_json():
    r = CliRunner().invoke(main, ["target", str(PROGRAM), "--set", "max_num_seqs=8"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["vllm"]["max_num_seqs"] == 8


def _engine(chunk: str, preempt: str = "preempt lifo;", schedule: str | None = None) -> str:
    schedule = schedule or f"""
      let t = {chunk};
      advance running each at most (t);
      admit waiting while (running.preempted == 0) each at most (t) taking reqs (1), kv (p) reserve (p);"""
    return f"""fn main() {{
  device gpu {{ kv cap 1024; }}
  engine llm on gpu {{
    reqs cap 4; tokens cap 64;
    request (p) {{ prefill (p) growing kv; }}
    schedule {{ {schedule} }}
    execute (1);
  }}
  pool kv on gpu {{ block 16; evict lru; {preempt} }}
  pool reqs on llm {{ queue fifo; }}
  workload {{ arrive poisson(1); turn {{ Size n = 10; }} }}
  server {{ llm (n); }}
}}"""


def test_adaptive_threshold_is_exported():
    chunk = "running.count + waiting.count > 1 ? max(24, floor(64 / (running.count + waiting.count))) : inf"
    s = target(link_source(_engine(chunk)))["llm"]
    assert s["long_prefill_token_threshold"] == 24 and s["long_prefill_token_threshold_adaptive"] is True


@pytest.mark.parametrize("source,phrase", [
    (_engine("16"), "a constant chunk cap is not vLLM's"),
    (_engine("inf", preempt="preempt none;"), "preempts running[-1]"),
    (_engine("inf", schedule="advance running by (remaining); admit waiting while (running.preempted == 0) "
                              "taking reqs (1), kv (p);"), "is not vLLM's"),
    (_engine("running.count > 2 ? 16 : inf"), "is not one vLLM's long_prefill_token_threshold expresses"),
])
def test_refuses_what_vllm_cannot_express(source, phrase):
    with pytest.raises(SerqError) as info:
        target(link_source(source))
    assert phrase in info.value.message, info.value.message
