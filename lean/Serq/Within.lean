module

public import Serq.Full

/-! # Bounded iterations: no iteration schedules more than the token budget

For every engine of the fragment and every workload, every iteration of every run
schedules at most the engine's token budget: `tokens ≤ budget`. This is the bounded
iteration of Sarathi-Serve's scheduler under a token budget (with chunked prefill or
without), for vLLM's schedule.

The proof reuses the plan's invariant of `Serq.Full` (`plan_inv`: what was scheduled
plus the budget left is the budget), so every plan's batch is within the budget; then
`step` appends a record that is within it, and `run` keeps it for all of them, as
`step_full` and `run_full` do for `full_or_short`.
-/

@[expose] public section

namespace Serq

/-- Every plan's batch is within the budget. -/
theorem plan_within (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req) :
    batchTokens (plan eng chunk m waiting).done ≤ eng.budget := by
  obtain ⟨_, htok, _, _⟩ := plan_inv eng chunk m waiting
  omega

/-- The property of an iteration record that `plan_within` gives. -/
def Within (B : Nat) (r : Record) : Prop := r.tokens ≤ B

theorem step_within (eng : Engine) (sessions : List Session) (m : Machine) :
    ∀ x ∈ (step eng sessions m).records, x ∈ m.records ∨ Within eng.budget x := by
  intro x hx
  unfold step at hx
  simp only at hx
  repeat' split at hx
  all_goals first
    | exact Or.inl hx
    | (simp only [apply_records] at hx
       rcases (mem_appendRecord _ _ _).mp hx with h | h
       · exact Or.inl h
       · right; subst h; exact plan_within eng _ m _)

/-- Every iteration of every run from records within the budget stays within it. -/
theorem run_within (eng : Engine) (sessions : List Session) :
    ∀ (fuel : Nat) (m : Machine), (∀ x ∈ m.records, Within eng.budget x) →
      ∀ x ∈ (run eng sessions fuel m).records, Within eng.budget x
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · apply run_within eng sessions fuel
      intro x hx
      rcases step_within eng sessions m x hx with h' | h'
      · exact h x h'
      · exact h'

/-- Every iteration of every run schedules at most the engine's token budget. -/
theorem within_budget (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ∀ x ∈ (run eng sessions fuel (init sessions)).records, x.tokens ≤ eng.budget :=
  run_within eng sessions fuel (init sessions) (by simp [init])

end Serq
