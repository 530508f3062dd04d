module

public import Serq.Exec
public import Serq.Spt

/-! # Claims as statements about the executable semantics

A program's claims (`claim NAME: every iteration of E (e);`, `some iteration of E (e);`) become
statements about `run` (the reference, *Claims*): over every workload of the program's family —
a list of sessions that `family` accepts (at most 500 sessions; arrival steps, turn lengths and
forced misses as the program's workload allows; the sessions that satisfy `given`) — every
iteration record of every run satisfies the claim's expression (`EveryIteration`), or some record
of some run does (`SomeIteration`), or every machine at which every session has ended (nothing
pending, waiting or running) satisfies it over the run's observations (`AtEnd`). Runs are cut at any `fuel`, so "every run" is every prefix of
every path. `scripts/gen_lean_claims.py` writes a module per program (the family and one
statement per claim, named with the statement's digest) and `examples/papers/ClaimsProved.lean`
proves them.
-/

@[expose] public section

namespace Serq

/-- Every iteration of every path of every workload in the family satisfies `p`. -/
def EveryIteration (eng : Engine) (family : List Session → Bool) (p : Record → Bool) : Prop :=
  ∀ sessions, family sessions = true → ∀ fuel, ∀ r ∈ (run eng sessions fuel (init sessions)).records,
    p r = true

/-- Some iteration of some path of some workload in the family satisfies `p`. -/
def SomeIteration (eng : Engine) (family : List Session → Bool) (p : Record → Bool) : Prop :=
  ∃ sessions, family sessions = true ∧ ∃ fuel, ∃ r ∈ (run eng sessions fuel (init sessions)).records,
    p r = true

/-- Every machine of every path of every workload in the family at which every session has ended
(`quiet`: nothing pending, waiting or running) satisfies `p`, which reads the sessions (for the
observed values) and the machine (its outcomes). -/
def AtEnd (eng : Engine) (family : List Session → Bool) (p : List Session → Machine → Bool) : Prop :=
  ∀ sessions, family sessions = true → ∀ fuel, (run eng sessions fuel (init sessions)).quiet = true →
    p sessions (run eng sessions fuel (init sessions)) = true

/-! ### What a claim at end reads: the observed values of the answered turns, and their aggregates -/

/-- Turn `turn` of session `sid`, if the workload has it. -/
def sessionTurn (sessions : List Session) (sid turn : Nat) : Option Turn :=
  match sessionAt sessions sid with
  | some s => turnAt s.turns turn
  | none => none

/-- The arrival step of session `sid` (0 if there is none). -/
def arriveAt (sessions : List Session) (sid : Nat) : Nat :=
  match sessionAt sessions sid with
  | some s => s.arrive
  | none => 0

/-- `count(o)`. -/
def countNat : List Nat → Nat
  | [] => 0
  | _ :: xs => countNat xs + 1

/-- `largest(o)`, 0 when there is none. -/
def largestNat : List Nat → Nat
  | [] => 0
  | x :: xs => max x (largestNat xs)

/-- `smallest(o)`, 0 when there is none. -/
def smallestNat : List Nat → Nat
  | [] => 0
  | [x] => x
  | x :: y :: ys => min x (smallestNat (y :: ys))

/-- Every session, the `k`-th of the workload counted from `k`, passes `ok k`. -/
def everySession (ok : Nat → Session → Bool) : Nat → List Session → Bool
  | _, [] => true
  | k, s :: ss => ok k s && everySession ok (k + 1) ss

/-- The session has exactly one turn, and it passes `ok`. -/
def singleTurn (ok : Turn → Bool) (s : Session) : Bool :=
  match s.turns with
  | [t] => ok t
  | _ => false

/-! ### Reading a family: what `family ss = true` says of each session -/

theorem everySession_mem (ok : Nat → Session → Bool) :
    ∀ (k : Nat) (ss : List Session), everySession ok k ss = true → ∀ s ∈ ss, ∃ j, ok j s = true
  | _, [], _, s, hs => by simp at hs
  | k, x :: xs, h, s, hs => by
    simp only [everySession, Bool.and_eq_true] at h
    rcases List.mem_cons.mp hs with rfl | hs
    · exact ⟨k, h.1⟩
    · exact everySession_mem ok (k + 1) xs h.2 s hs

theorem singleTurn_true {ok : Turn → Bool} {s : Session} (h : singleTurn ok s = true) :
    ∃ t, s.turns = [t] ∧ ok t = true := by
  unfold singleTurn at h
  cases hs : s.turns with
  | nil => rw [hs] at h; simp at h
  | cons t rest =>
    cases rest with
    | nil => rw [hs] at h; exact ⟨t, rfl, h⟩
    | cons _ _ => rw [hs] at h; simp at h

theorem sessionAt_mem : ∀ (ss : List Session) (i : Nat) (s : Session), sessionAt ss i = some s → s ∈ ss
  | [], _, _, h => by simp [sessionAt] at h
  | x :: _, 0, s, h => by
    simp only [sessionAt, Option.some.injEq] at h
    subst h
    exact List.mem_cons_self
  | _ :: xs, i + 1, s, h => List.mem_cons_of_mem _ (sessionAt_mem xs i s h)

/-- When every session arrives at 0, every turn's `arriveAt` is 0. -/
theorem arriveAt_zero {ss : List Session} (h : ∀ s ∈ ss, s.arrive = 0) (sid : Nat) : arriveAt ss sid = 0 := by
  unfold arriveAt
  cases hq : sessionAt ss sid with
  | none => rfl
  | some s => exact h s (sessionAt_mem ss sid s hq)

/-- A claim proved for a family holds for every smaller family. -/
theorem EveryIteration.mono {eng : Engine} {f g : List Session → Bool} {p : Record → Bool}
    (h : EveryIteration eng f p) (sub : ∀ ss, g ss = true → f ss = true) : EveryIteration eng g p :=
  fun ss hg fuel r hr => h ss (sub ss hg) fuel r hr

/-- A claim over every iteration follows from one that holds for every workload whatsoever. -/
theorem EveryIteration.of_all {eng : Engine} {family : List Session → Bool} {p : Record → Bool}
    (h : ∀ ss fuel, ∀ r ∈ (run eng ss fuel (init ss)).records, p r = true) : EveryIteration eng family p :=
  fun ss _ fuel r hr => h ss fuel r hr

end Serq
