module

public import Serq.KernelTiling
public import Serq.Claims

/-! # Claims at the end of a kernel program's own run

A claim `at end (e)` of a program of the kernel fragment that the engine model does not take is
stated about the program's own run (`AtEndOfRun`): the run of its bundled workload ended on its own
(the fuel sufficed, no run-time error) with every session ended (the interpreter evaluates a claim at
end only then: no session is live), and the claim's expression holds of the final machine. The
expression reads the aggregates of the run's values, the reference's "every value observed under `o`
from time 0": `observedValues i` (every value an `observe` of name index `i` recorded, thread by
thread) and `responses` (every answered turn's answer less its start, the client's `response`),
(the module's own monomorphic list helpers, as `Serq.Kernel`'s), aggregated by the engine model's functions (`Serq.sumNat`, `Serq.countNat`, `Serq.largestNat`,
`Serq.smallestNat`, `Serq.prefixTotal`: one definition of each aggregate for both models).
-/

@[expose] public section

namespace Serq.Kernel

/-- The values of a thread's observations (newest first) under the observe name `i`. -/
def observedIn (i : Nat) : List Serq.Kernel.Observation → List Nat
  | [] => []
  | o :: os => if o.name == i then o.value :: observedIn i os else observedIn i os

/-- Every value observed under the observe name `i` in the run, thread by thread. -/
def observedValues (i : Nat) : List Serq.Kernel.Thread → List Nat
  | [] => []
  | th :: ts => appendNats (observedIn i th.observations) (observedValues i ts)

/-- The responses (answer less start) of a thread's answered turns. -/
def responsesOf : List Serq.Kernel.Answer → List Nat
  | [] => []
  | a :: as => (a.answered - a.start) :: responsesOf as

/-- Every answered turn's response in the run (the client's `response`), thread by thread. -/
def responses : List Serq.Kernel.Thread → List Nat
  | [] => []
  | th :: ts => appendNats (responsesOf th.answers) (responses ts)

/-- Every thread's session ended (its continuation is empty): no session is live. -/
def allEnded : List Serq.Kernel.Thread → Bool
  | [] => true
  | th :: ts => (match th.k with | [] => true | _ :: _ => false) && allEnded ts

/-- The run ended on its own with every session ended, and no run-time error stopped it. -/
def Machine.ended (m : Serq.Kernel.Machine) : Bool :=
  m.outOfFuel == false && m.failed == false && allEnded m.threads

/-- The run of `p` with `fuel` ended on its own, no session live and no run-time error, and its final
machine satisfies `pred` (a claim at end: the interpreter's report says it holds). -/
def AtEndOfRun (p : Program) (fuel : Nat) (pred : Serq.Kernel.Machine → Bool) : Prop :=
  (runProgram p fuel).ended = true ∧ pred (runProgram p fuel) = true

/-- An `AtEndOfRun` by evaluation of the final machine once. -/
theorem AtEndOfRun.of_eval (p : Program) (fuel : Nat) (pred : Serq.Kernel.Machine → Bool)
    (h : (fun m : Serq.Kernel.Machine => m.ended && pred m) (runProgram p fuel) = true) :
    AtEndOfRun p fuel pred := by
  simp only [Bool.and_eq_true] at h
  exact h

end Serq.Kernel
