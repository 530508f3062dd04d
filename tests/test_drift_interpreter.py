"""Issue 14, result 7, on the reference interpreter: the vLLM engine of `examples/oracle/vllm_request.sq`
(the program the Lean oracle theorems run through the kernel interpreter) fed one-turn sessions of a
`W`-token prompt and one output token, `a_t` of them arriving at each time `t`, with the fixed caps of
`Serq.drift_machine_work_at_caps` (`2 + B / W` request slots and that many requests' blocks, no chunk
cap, no prefix cache), does what the Lean theorems say the machine does:

- pathwise (`drift_machine_work_at_caps`, `drift_machine_time_caps`): the work an iteration at time `t`
  sees, `arrived * W - served` of its record, is the drift chain's backlog `b(t)` plus that time's
  arrivals (`b(0) = 0`, `b(t + 1) = b(t) + a_t * W - B` stopping at 0: `DriftMachine.backlogAt`), the
  iteration serves `min(B, that)`, and a time without an iteration is one where the chain has no work;
- in law (`drift_machine_return_bound_caps`, `drift_machine_positive_recurrent_caps`): with the counts
  i.i.d. from a finite support whose mean work is below the budget, the interpreter's return times to
  the empty engine have a mean whose confidence interval holds the chain's exact expected return time,
  which is below the Lean bound `1 + Σ p · lyapunov K (k·W − B) / (den · B − M)`.
"""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import pytest
from scipy import stats

from serq.link import link_file
from serq.sim.oracle_run import run_program

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "examples" / "oracle" / "vllm_request.sq"
BLOCK_SIZE = 16


def fixed_caps(B: int, W: int) -> tuple[int, int]:
    """The request slots and KV blocks of `drift_machine_*_caps`: 2 + B / W requests and their blocks."""
    slots = 2 + B // W
    return slots, slots * math.ceil(W / BLOCK_SIZE)


def run_path(tmp_path: Path, counts: list[int], W: int, B: int, slots: int | None = None):
    """The interpreter on the path: counts[t] sessions arriving at time t, each one W-token turn with
    one output token, under the fixed caps (vLLM's null block added to the pool); `slots`: fewer."""
    d = tmp_path / f"path{len(list(tmp_path.iterdir()))}"
    d.mkdir()
    shutil.copy(PROGRAM, d / "vllm_request.sq")
    rows = ["session,arrive,new,out,think,forced"]
    s = 0
    for t, k in enumerate(counts):
        for _ in range(k):
            rows.append(f"{s},{t},{W},1,0,0")
            s += 1
    if s == 0:  # (a trace has at least one session: one at the path's end changes none of its times)
        rows.append(f"0,{len(counts)},{W},1,0,0")
    (d / "vllm_request.csv").write_text("\n".join(rows) + "\n")
    caps, blocks = fixed_caps(B, W)
    slots = caps if slots is None else slots
    prog = link_file(d / "vllm_request.sq", {
        "block_size": str(BLOCK_SIZE), "num_blocks": str(blocks + 1), "max_num_batched_tokens": str(B),
        "max_num_seqs": str(slots), "long_prefill_token_threshold": "0", "enable_prefix_caching": "0"})
    return run_program(prog, d)


def chain_backlog(counts: list[int], W: int, B: int) -> list[int]:
    """`DriftMachine.backlogAt` at t = 0 … len(counts): the backlog at the start of each time, before
    that time's arrivals."""
    b = [0]
    for a in counts:
        b.append(max(0, b[-1] + a * W - B))
    return b


def assert_path_is_the_chain(run, counts: list[int], W: int, B: int) -> None:
    b = chain_backlog(counts, W, B)
    by_time = {int(r.start): r for r in run.records}
    assert all(float(r.start).is_integer() for r in run.records)
    for t, a in enumerate(counts):
        work = b[t] + a * W
        r = by_time.get(t)
        if r is None:
            assert work == 0, f"no iteration at time {t}, where the chain has work {work}"
            continue
        assert r.arrived * W - r.served == work, f"time {t}: the iteration sees {r.arrived * W - r.served}"
        assert r.tokens == min(B, work), f"time {t}: {r.tokens} tokens served of {work}"
    # after the path: the iterations drain the backlog, B at a time
    left = b[-1]
    t = len(counts)
    while left > 0:
        assert by_time[t].tokens == min(B, left)
        left -= min(B, left)
        t += 1
    assert max(by_time, default=-1) < t
    assert all(o.ended == "answered" and o.preemptions == 0 for o in run.turns.values())


# (W, B, the counts' support as (weight, count) pairs, as the Lean `arrivals` lists)
CASES = [
    (3, 4, [(2, 0), (1, 1), (1, 2)]),   # the instance of DriftPathsCaps.lean and DriftReturn.lean: 3 slots
    (5, 4, [(3, 0), (1, 1), (1, 2)]),   # prompts the budget cuts (W > B): 2 slots
    (20, 64, [(1, 0), (1, 2), (1, 3), (1, 6)]),  # bursts of 6 into 5 slots
]


def draw_counts(rng: random.Random, support, n: int) -> list[int]:
    weights = [w for w, _ in support]
    values = [k for _, k in support]
    return rng.choices(values, weights=weights, k=n)


@pytest.mark.parametrize("W,B,support", CASES)
def test_each_iteration_is_the_drift_chain_step_under_the_fixed_caps(tmp_path, W, B, support):
    rng = random.Random(20261207 + W * 100 + B)
    for _ in range(8):
        counts = draw_counts(rng, support, 60)
        assert_path_is_the_chain(run_path(tmp_path, counts, W, B), counts, W, B)


def test_a_burst_beyond_the_slots_waits_and_the_work_is_still_the_chains(tmp_path):
    """Ten sessions at once into 3 slots (W = 3, B = 4): the queue holds them (no cap on it), the
    engine serves B a time, and the work is the chain's at every time."""
    W, B = 3, 4
    counts = [10, 0, 0, 1, 0, 2]
    run = run_path(tmp_path, counts, W, B)
    assert_path_is_the_chain(run, counts, W, B)
    # the chain: 30 tokens of work drained 4 a time; at most 3 requests resident
    assert chain_backlog(counts, W, B)[1:4] == [26, 22, 18]
    assert max(r.residents for r in run.records) <= fixed_caps(B, W)[0]


def test_one_slot_fewer_and_the_engine_is_not_the_chain(tmp_path):
    """The caps are what makes the coupling hold. W = 20, B = 63, four sessions at each of times 0-7:
    the cut prompt's remainder goes 17, 14, 11, 8, 5, 2 over times 0-5, and at time 6 the iteration
    holds it (2 tokens), three whole prompts and a fourth the budget cuts: five requests,
    2 + 63 / 20. With four slots the fourth waits and the iteration serves 62 of the chain's 63 (the
    cap binds); with five every iteration is the chain's step."""
    W, B = 20, 63
    counts = [4] * 8 + [0] * 12
    assert_path_is_the_chain(run_path(tmp_path, counts, W, B), counts, W, B)
    run = run_path(tmp_path, counts, W, B, slots=4)
    by_time = {int(r.start): r for r in run.records}
    b = chain_backlog(counts, W, B)
    assert [by_time[t].tokens for t in range(6)] == [63] * 6
    assert (by_time[6].tokens, by_time[6].residents, b[6] + counts[6] * W >= B) == (62, 4, True)
    # the work at time 7, as lean/Serq/DriftCapsTight.lean evaluates the Lean machine on the same path
    # (`drift_caps_tight_fails`: 120 with four slots, the chain's 119)
    assert by_time[7].arrived * W - by_time[7].served - counts[7] * W == 120
    assert b[7] == 119


def lean_return_bound(W: int, B: int, support) -> float:
    """`1 + Σ p · lyapunov K (k·W − B) / (den · B − M)` with the least K of `empty_positive_recurrent`
    (`den · B ≤ K · p0`), over `den`: `drift_machine_return_bound_caps` normalised."""
    den = sum(w for w, _ in support)
    M = sum(w * k * W for w, k in support)
    p0 = sum(w for w, k in support if k == 0)
    K = -(-den * B // p0)
    lyapunov = sum(w * (0 if max(0, k * W - B) == 0 else max(0, k * W - B) + K) for w, k in support)
    return 1 + lyapunov / (den * B - M)


def chain_expected_return(W: int, B: int, support, states: int = 400, sweeps: int = 4000) -> float:
    """The chain's E[τ⁺] from 0: 1 + Σ p_k h(kW − B), h the expected hitting time of 0 (h(0) = 0,
    h(r) = 1 + Σ p_k h(r + kW − B)), by value iteration on backlogs below `states` (the mass above
    is negligible at these loads)."""
    den = sum(w for w, _ in support)
    h = [0.0] * (states + max(k for _, k in support) * W + 1)
    for _ in range(sweeps):
        new = h[:]
        for r in range(1, states):
            new[r] = 1 + sum(w * h[max(0, r + k * W - B)] for w, k in support) / den
        h = new
    return 1 + sum(w * h[max(0, k * W - B)] for w, k in support) / den


def test_return_times_to_the_empty_engine_have_the_chains_mean_below_the_lean_bound(tmp_path):
    """One long path (regenerative at every return to 0, so its excursions are i.i.d.): the mean
    return time's 95% interval holds the chain's exact E[τ⁺], itself below the Lean bound."""
    W, B, support = CASES[0]
    counts = draw_counts(random.Random(7), support, 6000)
    run = run_path(tmp_path, counts, W, B)
    b = chain_backlog(counts, W, B)
    by_time = {int(r.start): r for r in run.records}
    # the machine's work at the start of each time, read off the interpreter: 0 with no iteration,
    # else what the iteration saw minus that time's arrivals (b(t), before them)
    work = [0 if t not in by_time else by_time[t].arrived * W - by_time[t].served - counts[t] * W
            for t in range(len(counts))]
    assert work == b[:-1]
    zeros = [t for t, w in enumerate(work) if w == 0]
    cycles = [t1 - t0 for t0, t1 in zip(zeros, zeros[1:])]
    n = len(cycles)
    mean = sum(cycles) / n
    sd = math.sqrt(sum((c - mean) ** 2 for c in cycles) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    exact = chain_expected_return(W, B, support)
    bound = lean_return_bound(W, B, support)
    assert bound == pytest.approx(1 + 10 / 7)  # K = 8: lyapunov 0, 0, 2 + 8 over 16 - 9
    assert mean - half <= exact <= mean + half, (mean, half, exact)
    assert exact < bound
    assert mean + half < bound
