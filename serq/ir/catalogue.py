"""The language's catalogue: functions, observables, distributions, context
variables and the evaluation moments that supply them.

One table, read by the linker (source), the IR checker (hand-written IR), the
interpreter and the Lean generator; `docs/language.md` documents it.
"""

from __future__ import annotations

from enum import Enum


class Moment(str, Enum):
    """Where an expression is evaluated: which values exist there."""

    CONSTANT = "constant"  # a let, a cap, a block, a count, a rate
    SESSION = "session"  # a workload statement (init, turn, session)
    SERVER = "server"  # a server statement
    HOLD_HEADER = "hold header"  # a hold's units, reserve and reuse, read at admission
    HOLD_CACHE = "hold cache"  # a hold's cache, read when it releases
    LEASE = "lease"  # a lease's duration
    QUEUE_KEY = "queue key"  # a pool's `queue by` key
    EVICT_KEY = "evict key"  # a pool's `evict by` key
    PREEMPT_KEY = "preempt key"  # a pool's `preempt by` key
    SPILL = "spill"  # a pool's spill cost and predicate
    PS_CAPACITY = "ps capacity"  # a ps stage's phi(present)
    STEP_BUDGET = "tokens cap"  # a step stage's budget, read as the iteration starts
    STEP_CHUNK = "each at most"  # a step stage's chunk cap, read as the iteration starts
    STEP_SERVE = "serve key"  # a serve order's key or an only predicate, per request
    STEP_GUARD = "schedule"  # an iteration body's guards and register sets
    STEP_COST = "execute"  # a step stage's cost of the iteration's batch
    GAUGE = "gauge"
    CLAIM_ITERATION = "claim over iterations"
    CLAIM_END = "claim at end"
    GIVEN = "given"
    RENEWAL = "renewal gap"


M = Moment

# Context variables: the values the language supplies at some moments only.
# name -> (what it is, the moments that supply it)
CONTEXT_VARIABLES: dict[str, tuple[str, frozenset[Moment]]] = {
    "now": ("the clock", frozenset({
        M.SESSION, M.SERVER, M.HOLD_HEADER, M.HOLD_CACHE, M.LEASE, M.QUEUE_KEY, M.EVICT_KEY,
        M.PREEMPT_KEY, M.SPILL, M.STEP_COST, M.CLAIM_ITERATION, M.CLAIM_END})),
    "present": ("the jobs at the ps stage", frozenset({M.PS_CAPACITY})),
    "waited": ("the time the hold has waited in the pool's queue", frozenset({M.QUEUE_KEY})),
    "decoding": ("1 for a request in its decode run, else 0", frozenset({M.STEP_SERVE, M.PREEMPT_KEY})),
    "admission": ("the request's admission sequence number", frozenset({M.STEP_SERVE, M.PREEMPT_KEY})),
    "remaining": ("the tokens the request's run has left", frozenset({M.STEP_SERVE})),
    "position": ("the hold's computed position on the pool", frozenset({M.PREEMPT_KEY})),
    "residents": ("the step stage's running requests (running.count)", frozenset({
        M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE, M.STEP_GUARD, M.STEP_COST, M.CLAIM_ITERATION})),
    "decoders": ("the decoding requests: the residents' (running.decoding) or the batch's (batch.decoding)",
                 frozenset({M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE, M.STEP_GUARD, M.STEP_COST,
                            M.CLAIM_ITERATION})),
    "kv_decode": ("the KV of the decoding requests in whole blocks of their growing pools: the residents' "
                  "(running.kv_decode, the blocks covering each position) or the batch's (batch.kv_decode, "
                  "ceil((p + 1) / block) * block once the iteration's token is written)", frozenset({
        M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE, M.STEP_GUARD, M.STEP_COST, M.CLAIM_ITERATION})),
    "kv_prefill": ("the KV positions of the prefilling requests", frozenset({
        M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE, M.STEP_GUARD, M.STEP_COST, M.CLAIM_ITERATION})),
    "waiting_holds": ("the holds waiting in the queues the step stage admits (waiting.count)", frozenset({
        M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE, M.STEP_GUARD, M.STEP_COST, M.CLAIM_ITERATION})),
    "tokens": ("the tokens the iteration schedules (batch.tokens)", frozenset({
        M.STEP_CHUNK, M.STEP_GUARD, M.STEP_COST, M.CLAIM_ITERATION})),
    "prefilled": ("the prefill tokens the iteration schedules (batch.prefilled)", frozenset({
        M.STEP_CHUNK, M.STEP_GUARD, M.STEP_COST, M.CLAIM_ITERATION})),
    "attention": ("the attention work of the batch's prefill chunks, the sum of n * (p + n / 2) over chunks of n "
                  "tokens from position p (batch.attention)", frozenset({M.STEP_COST, M.CLAIM_ITERATION})),
    "preempted": ("the requests the iteration preempted (running.preempted)", frozenset({M.STEP_GUARD})),
    "admitted": ("the requests the iteration admitted (waiting.admitted)", frozenset({M.STEP_GUARD})),
    "demand": ("the tokens the residents could take with an unlimited budget", frozenset({M.CLAIM_ITERATION})),
    "served": ("the tokens the stage scheduled in its earlier iterations", frozenset({M.CLAIM_ITERATION})),
    "arrived": ("the sessions started by the iteration's start", frozenset({M.CLAIM_ITERATION})),
    "size": ("the cached entry's units, as cached when the eviction starts", frozenset({M.EVICT_KEY})),
    "waiting": ("1 when the cached entry's session has a hold waiting for admission to the pool, else 0",
                frozenset({M.EVICT_KEY})),
}

# Context variables whose names the language does not reserve: they mean the cached entry's values in an
# eviction key and nothing of their own elsewhere. A program may declare `size` (read there, it is the
# program's name; an eviction key of a program that declares it is refused as ambiguous); bare `waiting`
# is refused outside an eviction key (`waiting` is also the engines' `waiting.count`, `waiting.admitted`,
# and stays a supplied name).
CONTEXTUAL_NAMES = frozenset({"size", "waiting"})
# The context variables no declaration may take the name of.
RESERVED_CONTEXT = frozenset(CONTEXT_VARIABLES) - CONTEXTUAL_NAMES

# The names the language supplies besides the context variables.
SUPPLIED_NAMES = frozenset({"inf", "running", "waiting", "batch", "self", "args"})

# Built-in session attributes. cached and computed are set by the scheduler.
BUILTIN_ATTRIBUTES = ("serial", "turn_no", "cached", "computed")
TRACE_ATTRIBUTES = ("new", "out", "think", "more", "forced")
SCHEDULER_ATTRIBUTES = frozenset({"cached", "computed"})

# Pure functions: name -> (arity (min, max or None), description)
FUNCTIONS: dict[str, tuple[int, int | None, str]] = {
    "min": (1, None, "the least argument"),
    "max": (1, None, "the greatest argument"),
    "floor": (1, 1, "rounded down"),
    "ceil": (1, 1, "rounded up"),
    "abs": (1, 1, "absolute value"),
    "sqrt": (1, 1, "square root"),
    "exp": (1, 1, "e to the power"),
    "log": (1, 1, "natural logarithm"),
    "pow": (2, 2, "a to the power b"),
    "reusable": (2, 2, "reusable(n, bs): the full blocks of n tokens that a prefix hit may reuse, "
                       "floor((n - 1) / bs) * bs, 0 when n is 0"),
}

# Pool observables: name -> (description, reads the session's own state)
POOL_OBSERVABLES: dict[str, str] = {
    "used": "the units allocated",
    "free": "the capacity less the units allocated",
    "holders": "the sessions holding it",
    "queued": "the holds waiting in its queue",
    "cachedin": "the session's own cached prefix there (a hold header or session statement)",
    "blocksize": "its block (1 without one)",
}

# Stage observables.
STAGE_OBSERVABLES: dict[str, str] = {
    "queue": "jobs waiting, not in service",
    "busy": "jobs in service",
    "work": "the work its jobs have left",
    "budget_left": "a step stage's budget left in the iteration being planned",
}

# Observables that move between events or plan an iteration, or read a session.
MOVING_OBSERVABLES = frozenset({"work"})
PLANNING_OBSERVABLES = frozenset({"budget_left"})
SESSION_OBSERVABLES = frozenset({"cachedin"})

# Distributions: name -> (arity, parameters)
DISTRIBUTIONS: dict[str, tuple[int, str]] = {
    "exp": (1, "mean: exponential with that mean"),
    "det": (1, "value: that value"),
    "uniform": (2, "a, b: uniform on [a, b)"),
    "erlang": (2, "k, mean: the sum of k exponentials, total mean `mean`"),
    "h2": (2, "mean, scv: two-phase hyperexponential with balanced means and that squared "
              "coefficient of variation (>= 1)"),
    "bernoulli": (1, "p: 1 with probability p, else 0"),
}

# Claim aggregates over a run's observations (`at end` only).
OBSERVED_AGGREGATES: dict[str, str] = {
    "total": "the sum of the values",
    "count": "how many values",
    "largest": "the greatest value (0 when none)",
    "smallest": "the least value (0 when none)",
    "prefix_total": "sum over k of v_1 + … + v_k, values ascending",
}

# What the client sees, observable by claims at end like an observe.
CLIENT_METRICS = ("ttft", "tpot", "response")

# Where a draw may stand: not where the value is read again and again or must
# be the same every time the scheduler looks.
NO_DRAW = frozenset({
    M.CONSTANT, M.HOLD_HEADER, M.QUEUE_KEY, M.PREEMPT_KEY, M.STEP_SERVE, M.STEP_GUARD,
    M.STEP_CHUNK, M.GAUGE, M.CLAIM_ITERATION, M.CLAIM_END, M.GIVEN,
})
# Where session attributes exist.
ATTRIBUTE_MOMENTS = frozenset({
    M.SESSION, M.SERVER, M.HOLD_HEADER, M.HOLD_CACHE, M.LEASE, M.QUEUE_KEY, M.EVICT_KEY,
    M.PREEMPT_KEY, M.STEP_SERVE, M.GIVEN,
})
# Where the scheduler decides: hidden attributes may not be read.
SCHEDULER_MOMENTS = frozenset({M.HOLD_HEADER, M.QUEUE_KEY, M.PREEMPT_KEY, M.STEP_SERVE, M.EVICT_KEY})
# Where pool and stage observables exist.
OBSERVABLE_MOMENTS = frozenset({
    M.SESSION, M.SERVER, M.HOLD_HEADER, M.HOLD_CACHE, M.LEASE, M.QUEUE_KEY, M.EVICT_KEY,
    M.PREEMPT_KEY, M.SPILL, M.PS_CAPACITY, M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_GUARD,
    M.STEP_COST, M.GAUGE, M.CLAIM_ITERATION,
})
# Where a step stage's registers are read (their own stage's, checked apart).
REGISTER_MOMENTS = frozenset({
    M.STEP_BUDGET, M.STEP_CHUNK, M.STEP_SERVE, M.STEP_GUARD, M.STEP_COST, M.QUEUE_KEY,
    M.HOLD_HEADER, M.GAUGE, M.CLAIM_ITERATION,
})
