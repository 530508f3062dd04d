"""A run's memory does not grow with the sessions that have ended: an ended session is freed by
reference counting alone (the run turns the cyclic collector off), so no session object outlives
its end. Counted, not timed."""

from __future__ import annotations

import gc
import math

import pytest

from helpers import REPO
from serq.link import link_file
from serq.sim.engine import Engine, MainThread


def _sessions_alive_after(program, arrivals: int) -> int:
    gc.collect()
    E = Engine(program, seed=1, horizon=math.inf, warmup=0.0, arrivals=arrivals)
    was = gc.isenabled()
    gc.disable()  # count what reference counting alone freed
    try:
        E.run()
        assert E.n_ended == arrivals
        return sum(1 for o in gc.get_objects() if isinstance(o, MainThread))
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("example", ["single-turn/mm1.sq", "single-turn/kv_pool.sq", "multi-turn/vllm.sq"])
def test_no_ended_session_stays_alive(example):
    program = link_file(REPO / "examples" / example)
    small = _sessions_alive_after(program, 2_000)
    large = _sessions_alive_after(program, 20_000)
    assert small == large == 0, (example, small, large)
