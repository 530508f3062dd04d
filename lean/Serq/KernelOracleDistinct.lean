module

public import Serq.KernelDistinct
public import Serq.Oracle.Deterministic1

/-! # No thread twice a resident of the vLLM oracle program, which preempts

`examples/oracle/vllm_request.sq` is a vLLM engine whose requests' runs grow the `kv` pool under
`preempt lifo`: a growth that does not fit preempts the resident admitted last, whose hold goes back to
the head of its queue. `Serq.KernelDistinct` covers preemption (`Machine.preempt_keeps`), so every run of
the program, with any trace (arrival times, rows, the trace sessions they replay) and any number of
sessions, has no thread twice a resident of any engine. The program's value is the generated one of the
oracle's first scenario (`Serq.Oracle.a_alone.program`); the scenarios differ only in the fields the
statement replaces and in the configuration's constants.
-/
@[expose] public section

namespace Serq.Oracle

open Serq.Kernel

/-- The oracle program's `kv` pool (pool 0) preempts: mode 1, `preempt lifo` requeued at the head. -/
theorem vllm_request_preempts : getAt a_alone.program.preemptModes 0 = 1 := rfl

/-- No thread twice a resident of any engine of the oracle program, at the end of every run, for every
trace, number of sessions and fuel (`Serq.Kernel.runProgram_threadsDistinct`; its hypothesis, no renewal
gap beside a trace, holds: the program's gap is 0). -/
theorem vllm_request_residents_distinct (n : Nat) (times : List Nat) (rows : List (List (List Nat)))
    (nos : List Nat) (fuel s : Nat) :
    threadsDistinct (getEngineState (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).engines s).residents :=
  runProgram_threadsDistinct _ fuel s ⟨Or.inl rfl⟩

end Serq.Oracle
