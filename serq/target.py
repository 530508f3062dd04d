"""`serq target`: an engine's vLLM settings, read off the IR.

A step stage is exported only when vLLM could run it as written: vLLM's schedule
(serve running in admission order, admit waiting unless the step preempted), a
constant token budget, one request-slot pool and one KV pool with blocks, LRU
eviction and LIFO preemption, and a chunk cap vLLM's `long_prefill_token_threshold`
expresses (none, the threshold lifted for a request alone, or its adaptive form).
Anything else is refused with the reason.
"""

from __future__ import annotations

from serq.errors import SerqError
from serq.ir import models as ir
from serq.link.fold import fold


def _refuse(stage: str, msg: str) -> SerqError:
    return SerqError(f"engine `{stage}` is not expressible as vLLM settings: {msg}", None, "target")


def _const(e: ir.Expr, stage: str, what: str) -> int:
    v = fold(e)
    if v is None or v != int(v):
        raise _refuse(stage, f"{what} is not a whole constant")
    return int(v)


def _is_ctx(e, var: str) -> bool:
    return isinstance(e, ir.Ctx) and e.var == var


def _more_than_one_waiting_or_running(test) -> bool:
    """`running.count + waiting.count > 1`."""
    return (isinstance(test, ir.Binary) and test.op == "gt" and isinstance(test.rhs, ir.Num) and test.rhs.value == 1
            and isinstance(test.lhs, ir.Binary) and test.lhs.op == "add"
            and {getattr(test.lhs.lhs, "var", None), getattr(test.lhs.rhs, "var", None)} == {"residents", "waiting_holds"})


def chunk_settings(chunk: ir.Expr, budget: int, stage: str) -> dict:
    """vLLM's long-prefill threshold for a step stage's chunk cap."""
    if isinstance(chunk, ir.Num) and chunk.value == 0:
        return {"long_prefill_token_threshold": 0}
    if isinstance(chunk, ir.Cond) and _more_than_one_waiting_or_running(chunk.test) \
            and isinstance(chunk.otherwise, ir.Num) and chunk.otherwise.value == 0:
        then = chunk.then
        if isinstance(then, ir.Num) and then.value > 0 and float(then.value).is_integer():
            return {"long_prefill_token_threshold": int(then.value)}
        # the adaptive threshold: max(threshold, floor(budget / n)) with n the running and waiting requests
        if isinstance(then, ir.Call) and then.fn == "max" and len(then.args) == 2 and isinstance(then.args[0], ir.Num):
            share = then.args[1]
            if (isinstance(share, ir.Call) and share.fn == "floor" and isinstance(share.args[0], ir.Binary)
                    and share.args[0].op == "div" and fold(share.args[0].lhs) == budget
                    and isinstance(share.args[0].rhs, ir.Binary) and share.args[0].rhs.op == "add"):
                return {"long_prefill_token_threshold": int(then.args[0].value),
                        "long_prefill_token_threshold_adaptive": True}
        raise _refuse(stage, "its chunk cap under more than one request is not a constant or vLLM's adaptive share")
    if fold(chunk) is not None:
        raise _refuse(stage, "a constant chunk cap is not vLLM's: vLLM lifts long_prefill_token_threshold for a "
                             "request alone (write `running.count + waiting.count > 1 ? c : inf`)")
    raise _refuse(stage, "its chunk cap is not one vLLM's long_prefill_token_threshold expresses")


def vllm_settings(program: ir.Program, stage_name: str) -> dict:
    stage = next((s for s in program.stages if s.name == stage_name), None)
    if stage is None or not isinstance(stage.service, ir.Step):
        raise SerqError(f"`{stage_name}` is not an engine of this program", None, "usage")
    step = stage.service
    if not (isinstance(step.serve, ir.ServeBy) and not step.serve.keys and step.iteration is None):
        raise _refuse(stage_name, "its schedule is not vLLM's `advance running; admit waiting while "
                                  "(running.preempted == 0);` in admission order")
    if step.granule is not None:
        raise _refuse(stage_name, "vLLM has no granule")
    budget = _const(step.budget, stage_name, "its tokens cap")
    slots = [p for p in program.pools if p.admit_via == stage_name and p.block is None]
    memory = [p for p in program.pools if p.memory_of == stage_name]
    if len(slots) != 1 or slots[0].count not in (1, stage.count) or slots[0].cap == "inf":
        raise _refuse(stage_name, "it needs exactly one request-slot pool it admits, with a cap (max_num_seqs)")
    if len(memory) != 1 or memory[0].block is None or memory[0].cap == "inf":
        raise _refuse(stage_name, "it needs exactly one KV pool with blocks and a cap")
    kv = memory[0]
    if not isinstance(kv.evict, ir.EvictLru):
        raise _refuse(stage_name, "vLLM's free queue evicts least recently freed first (`evict lru`)")
    lifo = (isinstance(kv.preempt, ir.PreemptBy) and kv.preempt.requeue == "head" and len(kv.preempt.keys) == 1
            and isinstance(kv.preempt.keys[0], ir.Unary) and kv.preempt.keys[0].op == "neg"
            and _is_ctx(kv.preempt.keys[0].arg, "admission"))
    if not lifo:
        raise _refuse(stage_name, "vLLM preempts running[-1] and requeues it at the head (`preempt lifo`)")
    if not isinstance(slots[0].queue, ir.QueueFifo):
        raise _refuse(stage_name, "vLLM's FCFS policy serves its waiting queue first come, first served")
    if kv.cap % kv.block:
        raise _refuse(stage_name, "its KV cap is not a whole number of blocks")
    holds = [h for h in _holds(program.server) if any(p.pool.pool == kv.name for p in h.pools)]
    settings = {
        "max_num_batched_tokens": budget,
        "max_num_seqs": int(slots[0].cap),
        **chunk_settings(step.chunk, budget, stage_name),
        "block_size": kv.block,
        # vLLM's block pool keeps one block as its null block
        "num_gpu_blocks": int(kv.cap // kv.block) + 1,
        # a hold that caches something on release takes part in the prefix cache
        "enable_prefix_caching": any(h.cache is not None and fold(h.cache) != 0 for h in holds),
        "scheduler_reserve_full_isl": any(p.reserve is not None for h in holds for p in h.pools if p.pool.pool == kv.name),
        "policy": "fcfs",
        "async_scheduling": False,
    }
    return settings


def _holds(body):
    for s in body:
        if isinstance(s, ir.HoldStmt):
            yield s
        for name in ("body", "then", "otherwise"):
            inner = getattr(s, name, None)
            if isinstance(inner, list):
                yield from _holds(inner)


def target(program: ir.Program, stage: str | None = None) -> dict:
    engines = [s.name for s in program.stages if isinstance(s.service, ir.Step)]
    if not engines:
        raise SerqError("the program has no engine to export", None, "usage")
    names = [stage] if stage is not None else engines
    return {name: vllm_settings(program, name) for name in names}
