"""Hypothesis strategies for programs of the Lean fragment and their workloads.

Sizes are small on purpose: the kernel evaluates every case's run, so a case is a
few sessions of short turns on a small pool — small enough to hit head-of-line
blocking, the request cap, chunk caps, preemption and prefix-cache eviction often.
"""

from __future__ import annotations

from hypothesis import strategies as st

from serq.leangen.drt import Case
from serq.leangen.fragment import FragmentEngine
from serq.oracle import TurnSpec


@st.composite
def engines(draw) -> FragmentEngine:
    block = draw(st.sampled_from([1, 2, 4, 8]))
    return FragmentEngine(
        budget=draw(st.integers(1, 64)),
        reqs_cap=draw(st.integers(1, 4)),
        # tight memory: preemptions and evictions are what the model must get right
        kv_blocks=draw(st.integers(2, 64 // block)),
        block_size=block,
        chunk=draw(st.one_of(st.just(0), st.integers(1, 24))),
        caching=draw(st.booleans()),
        # one engine in four is FasterTransformer's: `only (in_phase())` on vLLM's schedule
        phased=draw(st.sampled_from([False, False, False, True])),
    )


# a forced miss (a nonce at the head of the prompt) one turn in four
turns = st.builds(TurnSpec, new=st.integers(1, 40), out=st.integers(1, 16), think=st.integers(0, 4),
                  forced=st.sampled_from([False, False, False, True]))


@st.composite
def cases(draw) -> Case:
    engine = draw(engines())
    n = draw(st.integers(1, 5))
    sessions = tuple(
        (draw(st.integers(0, 12)), tuple(draw(st.lists(turns, min_size=1, max_size=3))))
        for _ in range(n))
    return Case(engine, sessions)
