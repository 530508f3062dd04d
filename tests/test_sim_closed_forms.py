"""The interpreter against queueing closed forms: each a 95% CI over independent
replications (seeds 1..N) that must contain the exact value."""

from __future__ import annotations

import math

from simtools import assert_covers, replicate, response, run_example

# a replication: 10 000 time units after a warm-up of 1 000
RUN = dict(horizon=11_000.0, warmup=1_000.0)
N = 20


def pk_response(lam: float, mean: float, second_moment: float) -> float:
    """Pollaczek–Khinchine: E[T] = E[S] + λ E[S²] / (2 (1 − ρ))."""
    rho = lam * mean
    return mean + lam * second_moment / (2 * (1 - rho))


def test_mm1():
    lam = 0.5
    mean, half = replicate("single-turn/mm1.sq", response, N, {"rate": str(lam)}, **RUN)
    assert_covers(mean, half, 1 / (1 - lam))


def test_md1():
    lam = 0.5
    mean, half = replicate("single-turn/md1.sq", response, N, {"rate": str(lam)}, **RUN)
    assert_covers(mean, half, pk_response(lam, 1.0, 1.0))


def test_mg1_erlang2():
    lam = 0.5  # Erlang-2 of mean 1: E[S²] = 1/2 + 1
    mean, half = replicate("single-turn/mg1.sq", response, N, {"rate": str(lam)}, **RUN)
    assert_covers(mean, half, pk_response(lam, 1.0, 1.5))


def test_mg1_h2():
    lam, scv = 0.5, 4.0  # E[S²] = (1 + scv) E[S]²
    mean, half = replicate("single-turn/mg1_h2.sq", response, N, {"rate": str(lam), "scv": str(scv)}, **RUN)
    assert_covers(mean, half, pk_response(lam, 1.0, 1.0 + scv))


def test_mg1_ps_is_insensitive():
    lam = 0.5  # ps.sq serves hyperexponential work (scv 4): E[T] = E[S] / (1 − ρ) all the same
    mean, half = replicate("single-turn/ps.sq", response, N, {"rate": str(lam)}, **RUN)
    assert_covers(mean, half, 1.0 / (1 - lam))


def erlang_c_response(lam: float, c: int, mu: float) -> float:
    a = lam / mu
    rho = a / c
    head = sum(a ** k / math.factorial(k) for k in range(c))
    tail = a ** c / math.factorial(c) / (1 - rho)
    wait_prob = tail / (head + tail)
    return wait_prob / (c * mu - lam) + 1 / mu


def test_mmc_erlang_c():
    lam = 1.5  # three servers, ρ = 0.5
    mean, half = replicate("single-turn/mmc.sq", response, N, {"rate": str(lam)}, **RUN)
    assert_covers(mean, half, erlang_c_response(lam, 3, 1.0))


def machine_repair(n: int, think: float, repair: float) -> tuple[float, float]:
    """M/M/1//N: throughput X = (1 − p0) / S, mean response R = N / X − Z."""
    weights = [math.factorial(n) / math.factorial(n - k) * (repair / think) ** k for k in range(n + 1)]
    p0 = 1 / sum(weights)
    x = (1 - p0) / repair
    return x, n / x - think


def test_closed_machine_repair_throughput_and_response():
    x, r = machine_repair(5, 4.0, 1.0)
    mean, half = replicate("multi-turn/closed.sq", response, N, **RUN)
    assert_covers(mean, half, r)
    mean, half = replicate("multi-turn/closed.sq", lambda rep: rep["stages"][0]["throughput"], N, **RUN)
    assert_covers(mean, half, x)


def test_two_flows_maxmin_rates():
    rep = run_example("single-turn/two_flows.sq")
    # A is capped by l1 at 1; B takes the rest of l2, 2, and its 10 units end at 5; A's at 10
    assert rep["observes"]["a_done"]["mean"] == 10.0
    assert rep["observes"]["b_done"]["mean"] == 5.0
    l1, l2 = rep["stages"]
    assert l1["utilization"] == 1.0
    assert math.isclose(l2["utilization"], (5 * 3 / 3 + 5 * 1 / 3) / 10)
    assert rep["end"] == 10.0 and rep["stopped"] == "idle"
