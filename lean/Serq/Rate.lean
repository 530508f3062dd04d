module

public import Serq.Within

/-! # The token rate on the step clock: `served ≤ budget · start`

Dai et al. 2025 (Theorem 2(a)) and Bari et al. (Theorem 1) bound the rate at which an engine
with a token budget serves tokens: `served · T ≤ R · now` for an iteration time `T` and a budget
`R`. On the step clock of this model (`execute (1)`: an iteration lasts one step, `T = 1`) it is
`served ≤ budget · start` at every iteration: the tokens of the iterations before one that starts
at step `s` are at most `budget · s`, for every engine of the fragment and every workload.

The invariant (`RateInv`): the machine's served tokens are within the budget times its clock, and
so is every record's. A step either waits (the clock moves to the next submission, which is later,
`duePending_later`) or runs an iteration of at most the budget (`plan_within`) that lasts one step.
-/

@[expose] public section

namespace Serq

/-- The machine has served at most `B` tokens a step, and so had it at every iteration it recorded. -/
def RateInv (B : Nat) (m : Machine) : Prop :=
  m.served ≤ B * m.now ∧ ∀ r ∈ m.records, r.served ≤ B * r.start

/-- What `duePending` leaves for later is due after `now`. -/
theorem duePending_later (now : Nat) : ∀ (ps : List Pending), ∀ q ∈ (duePending now ps).2, now < q.time
  | [], q, h => by simp [duePending] at h
  | p :: ps, q, h => by
    have ih := duePending_later now ps
    simp only [duePending] at h
    split at h
    · exact ih q h
    · rcases List.mem_cons.mp h with rfl | h
      · omega
      · exact ih q h

theorem apply_served_now (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res),
      (apply eng sessions now m l kept).served = m.served ∧ (apply eng sessions now m l kept).now = m.now
  | [], m, kept => ⟨rfl, rfl⟩
  | r :: rs, m, kept => by
    have ih := apply_served_now eng sessions now rs
    simp only [apply]
    repeat' split
    all_goals first | exact ih _ _ | (simp only [ih]; done) | simp [ih]

theorem mem_appendRecord_rate {B : Nat} {rs : List Record} {r x : Record}
    (h : ∀ y ∈ rs, y.served ≤ B * y.start) (hr : r.served ≤ B * r.start) (hx : x ∈ appendRecord rs r) :
    x.served ≤ B * x.start := by
  rcases (mem_appendRecord _ _ _).mp hx with hx | rfl
  · exact h x hx
  · exact hr

theorem step_rate (eng : Engine) (sessions : List Session) (m : Machine) (h : RateInv eng.budget m) :
    RateInv eng.budget (step eng sessions m) := by
  obtain ⟨hs, hr⟩ := h
  have hlater := duePending_later m.now m.pending
  have hb : ∀ chunk waiting, batchTokens (plan eng chunk m waiting).done ≤ eng.budget :=
    fun chunk waiting => plan_within eng chunk m waiting
  unfold step
  cases hd : duePending m.now m.pending with
  | mk due later =>
    rw [hd] at hlater
    dsimp only
    have hidle : RateInv eng.budget (match later with
        | [] => { m with pending := [], waiting := submit eng sessions due m.waiting,
                         arrived := m.arrived + countFirst due }
        | q :: _ => { m with now := q.time, pending := later, waiting := submit eng sessions due m.waiting,
                             arrived := m.arrived + countFirst due }) :=
      match later, hlater with
      | [], _ => ⟨hs, hr⟩
      | q :: _, hl => ⟨Nat.le_trans hs (Nat.mul_le_mul_left _ (Nat.le_of_lt (hl q List.mem_cons_self))), hr⟩
    repeat' split
    all_goals first
      | exact hidle
      | (unfold RateInv
         dsimp only
         refine ⟨?_, ?_⟩
         · rw [(apply_served_now _ _ _ _ _ _).1]
           exact Nat.le_trans (Nat.add_le_add hs (hb _ _)) (Nat.le_of_eq (Nat.mul_succ _ _).symm)
         · intro x hx
           rw [apply_records] at hx
           exact mem_appendRecord_rate hr hs hx)

/-- Every iteration of every run of every engine of the fragment, from the empty machine: the
tokens of the iterations before it are at most the budget times its start step. -/
theorem token_rate (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ∀ r ∈ (run eng sessions fuel (init sessions)).records, r.served ≤ eng.budget * r.start := by
  suffices h : ∀ (fuel : Nat) (m : Machine), RateInv eng.budget m → RateInv eng.budget (run eng sessions fuel m) from
    (h fuel (init sessions) ⟨by simp [init], by simp [init]⟩).2
  intro fuel
  induction fuel with
  | zero => intro m h; exact h
  | succ n ih =>
    intro m h
    simp only [run]
    split
    · exact h
    · exact ih _ (step_rate eng sessions m h)

end Serq
