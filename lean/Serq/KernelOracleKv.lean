module

public import Serq.KernelFoundPreempt
public import Serq.Oracle.Deterministic1

/-! # KV conservation and every live thread in exactly one place on the vLLM oracle program, which preempts

`examples/oracle/vllm_request.sq` grows its `kv` pool under `preempt lifo` (`vllm_request_preempts`): a
growth that does not fit preempts the resident admitted last, its holds are given back and its hold goes
back to the head of its queue. `runProgram_kv_conserved` (`Serq.KernelKvRun`) covers preemption, so every
run of the program, with any trace (arrival times, rows, the trace sessions they replay), any number of
sessions and any fuel, keeps every pool's allocations and cache within its cap. Its one hypothesis, that
every hold statement names each pool once, is decided on the program's value: it reads only the program's
statements, which the fields the statement replaces do not touch. The program's value is the generated one
of the oracle's first scenario (`Serq.Oracle.a_alone.program`).

`runProgram_placed_once` (`Serq.KernelFoundPreempt`) covers preemption too: at the end of every run of the
program that ran to its end, with a trace that has an arrival for each session, every thread with
something left to run is in exactly one place (`vllm_request_placed_once`). Its hypotheses: no renewal gap
beside the trace (the program's gap is 0), every hold names an existing pool first and every run an
existing stage (`Fits`, decided on the program's value), and the trace's arrivals.

Request conservation's turn half covers preemption as well (`runProgram_requests`,
`Serq.KernelRequestsPreempt`): at the end of every run of the program (every point of it), with any trace,
number of sessions and fuel, every session's thread is in at most one place, its open turn is not
answered and no turn is answered twice (`vllm_request_requests`); and at the end of every run that ran to
its end, with a trace that has an arrival per session, every open turn is in exactly one place
(`vllm_request_open_turn_placed`). The added hypothesis, `TurnsOutside` (no `turn` in the turn block, the
server or a hold's body), is decided on the program's value.
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

/-- Every thread with something left to run is in exactly one place at the end of every run of the oracle
program, which preempts, that ran to its end (neither out of fuel nor failed), for every trace with an
arrival per session, number of sessions and fuel. -/
theorem vllm_request_placed_once (n : Nat) (times : List Nat) (rows : List (List (List Nat))) (nos : List Nat)
    (fuel : Nat) (htr : n ≤ countNats times)
    (hfuel : (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).outOfFuel = false)
    (hfail : (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).failed = false)
    (t : Nat) (ht : (getThread (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).threads t).k ≠ []) :
    (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).placed a_alone.program.gap t = 1 := by
  have hfit : a_alone.program.allStmts (fitsStmt (countNats a_alone.program.caps)
      (countServices a_alone.program.stages)) = true := by decide +kernel
  exact runProgram_placed_once { a_alone.program with
    sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel ⟨Or.inl rfl⟩ ⟨hfit, Or.inr htr⟩
    hfuel hfail t ht

/-- `TurnsOutside` on the oracle program's value: no `turn` in its turn block, its server or a hold's body
(the fields the statements replace are not read). -/
theorem vllm_request_turnsOutside (n : Nat) (times : List Nat) (rows : List (List (List Nat))) (nos : List Nat) :
    TurnsOutside { a_alone.program with sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } := by
  have h : (Stmt.allBlock noTurn a_alone.program.turnBlock && Stmt.allBlock noTurn a_alone.program.server &&
      a_alone.program.allStmts holdBodyTurnFree) = true := by decide +kernel
  exact TurnsOutside.of_check _ h

/-- Request conservation for every run of the oracle program, which preempts, for every trace, number of
sessions and fuel: every session's thread is in at most one place (waiting or running, never both, never
twice), its open turn is not answered, and no turn is answered twice. -/
theorem vllm_request_requests (n : Nat) (times : List Nat) (rows : List (List (List Nat))) (nos : List Nat)
    (fuel : Nat) :
    (∀ t, (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).placed a_alone.program.gap t ≤ 1) ∧
    ∀ th ∈ (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).threads,
      (th.inTurn = true → ∀ a ∈ th.answers, a.turn ≠ th.turns) ∧ th.answers.Pairwise (fun a b => a.turn ≠ b.turn) :=
  runProgram_requests { a_alone.program with sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos }
    fuel ⟨Or.inl rfl⟩ (vllm_request_turnsOutside n times rows nos)

/-- Every open turn is in exactly one place, waiting or running, and not answered, at the end of every run
of the oracle program, which preempts, that ran to its end, for every trace with an arrival per session,
number of sessions and fuel. -/
theorem vllm_request_open_turn_placed (n : Nat) (times : List Nat) (rows : List (List (List Nat))) (nos : List Nat)
    (fuel : Nat) (htr : n ≤ countNats times)
    (hfuel : (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).outOfFuel = false)
    (hfail : (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).failed = false)
    (t : Nat) (hin : (getThread (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).threads t).inTurn = true) :
    (runProgram { a_alone.program with
      sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).placed a_alone.program.gap t = 1 ∧
      ∀ a ∈ (getThread (runProgram { a_alone.program with
          sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).threads t).answers,
        a.turn ≠ (getThread (runProgram { a_alone.program with
          sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel).threads t).turns := by
  have hfit : a_alone.program.allStmts (fitsStmt (countNats a_alone.program.caps)
      (countServices a_alone.program.stages)) = true := by decide +kernel
  exact runProgram_open_turn_placed { a_alone.program with
    sessions := n, arrivalTimes := times, traceRows := rows, traceNos := nos } fuel ⟨Or.inl rfl⟩ ⟨hfit, Or.inr htr⟩
    (vllm_request_turnsOutside n times rows nos) hfuel hfail t hin

end Serq.Oracle
