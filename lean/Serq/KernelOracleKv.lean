module

public import Serq.KernelKvRun
public import Serq.Oracle.Deterministic1

/-! # KV conservation on the vLLM oracle program, which preempts

`examples/oracle/vllm_request.sq` grows its `kv` pool under `preempt lifo` (`vllm_request_preempts`): a
growth that does not fit preempts the resident admitted last, its holds are given back and its hold goes
back to the head of its queue. `runProgram_kv_conserved` (`Serq.KernelKvRun`) covers preemption, so every
run of the program, with any trace (arrival times, rows, the trace sessions they replay), any number of
sessions and any fuel, keeps every pool's allocations and cache within its cap. Its one hypothesis, that
every hold statement names each pool once, is decided on the program's value: it reads only the program's
statements, which the fields the statement replaces do not touch. The program's value is the generated one
of the oracle's first scenario (`Serq.Oracle.a_alone.program`).
-/
@[expose] public section

namespace Serq.Oracle

open Serq.Kernel

/-- KV conservation for every run of the oracle program, which preempts. -/
theorem vllm_request_kv_conserved (n : Nat) (times : List Nat) (rows : List (List (List Nat))) (nos : List Nat)
    (fuel : Nat) :
    ∀ j, (getPool (runProgram { a_alone.program with
        sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).pools j).used +
      cachedUnits (getPool (runProgram { a_alone.program with
        sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).pools j).entries ≤
      getAt a_alone.program.caps j := by
  have h : a_alone.program.allStmts holdsOnceOn = true := by decide +kernel
  exact runProgram_kv_conserved _ fuel h

end Serq.Oracle
