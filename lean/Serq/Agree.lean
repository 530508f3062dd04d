module

public import Serq.Exec

/-! # Agreement checks for differential testing

The differential tests (`tests/drt/`) run a program of the fragment through the Python
interpreter and state, for the Lean model, that its run answers every turn as the
interpreter did and records the same iterations. These are the checks those generated
theorems evaluate (`decide +kernel`).
-/

@[expose] public section

namespace Serq

def recordEq (a b : Record) : Bool :=
  a.start == b.start && a.tokens == b.tokens && a.prefilled == b.prefilled && a.decoders == b.decoders &&
  a.residents == b.residents && a.kvDecode == b.kvDecode && a.kvPrefill == b.kvPrefill &&
  a.demand == b.demand && a.served == b.served && a.arrived == b.arrived

/-- The same iterations, in order. -/
def recordsEq : List Record → List Record → Bool
  | [], [] => true
  | a :: as, b :: bs => recordEq a b && recordsEq as bs
  | _, _ => false

def outcomeCount : List Outcome → Nat
  | [] => 0
  | _ :: os => outcomeCount os + 1

def expectCount : List Expect → Nat
  | [] => 0
  | _ :: es => expectCount es + 1

/-- The run has settled (every turn answered or refused, or the queue stuck for good behind a
preempted request that can never fit again, which vLLM leaves waiting), answered exactly the
expected turns, as expected, and recorded the expected iterations. -/
def agrees (eng : Engine) (m : Machine) (expected : List Expect) (records : List Record) : Bool :=
  m.settled eng && outcomeCount m.outcomes == expectCount expected && meets m.outcomes expected &&
    recordsEq m.records records

theorem recordsEq_length (a b : List Record) (h : recordsEq a b = true) : a.length = b.length := by
  induction a generalizing b with
  | nil => cases b with
    | nil => rfl
    | cons _ _ => simp [recordsEq] at h
  | cons x xs ih => cases b with
    | nil => simp [recordsEq] at h
    | cons y ys =>
      simp only [recordsEq, Bool.and_eq_true] at h
      simp [ih ys h.2]

end Serq
