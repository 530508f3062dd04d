module

public import Serq.Spt

/-! # Shortest processing time is optimal: the competitive ratio 1

`prefixTotal` depends only on the values, not on their order (`prefixTotal_perm`: insertion sort
gives the same list for every permutation, `sortAsc_perm`). So Smith's bound (`spt_lower_bound`)
compares a schedule with any other schedule *of the same jobs*: a total completion time equal to
`prefixTotal` of the sizes is at most the total completion time of every feasible one-at-a-time
schedule of jobs with those sizes, in any order, with any idling (`spt_optimal`) — the ratio of
such a schedule's total to the least is 1.
-/

@[expose] public section

namespace Serq

/-- Insertion sort gives the same list for every permutation of its input. -/
theorem sortAsc_perm {l₁ l₂ : List Nat} (h : l₁.Perm l₂) : sortAsc l₁ = sortAsc l₂ := by
  induction h with
  | nil => rfl
  | cons x _ ih => simp only [sortAsc, ih]
  | swap x y l => exact insertSorted_comm _ _ _
  | trans _ _ ih₁ ih₂ => exact ih₁.trans ih₂

/-- `prefix_total` of a permutation is the same. -/
theorem prefixTotal_perm {l₁ l₂ : List Nat} (h : l₁.Perm l₂) : prefixTotal l₁ = prefixTotal l₂ := by
  unfold prefixTotal
  rw [sortAsc_perm h]

/-- **Optimality (competitive ratio 1).** A total completion time equal to `prefixTotal vs` is at most
the total completion time of every schedule of jobs `(size, completion)` whose sizes are a permutation of
`vs`, served one at a time at unit rate (by every time `t` the jobs completed have total size at most
`t`), whatever the order and the idling. -/
theorem spt_optimal (vs : List Nat) (total : Nat) (htotal : total = prefixTotal vs) (jobs : List (Nat × Nat))
    (hsizes : (sizes jobs).Perm vs) (rate : ∀ t, sumSizesDoneBy t jobs ≤ 1 * t) :
    total ≤ sumCompletions jobs := by
  have h := spt_lower_bound 1 jobs rate
  rw [prefixTotal_perm hsizes, Nat.one_mul] at h
  omega

/-- The sizes done by any time are at most all the sizes. -/
theorem sumSizesDoneBy_le_sum (t : Nat) : ∀ jobs : List (Nat × Nat), sumSizesDoneBy t jobs ≤ sumNat (sizes jobs)
  | [] => Nat.le_refl _
  | j :: js => by
    have := sumSizesDoneBy_le_sum t js
    simp only [sumSizesDoneBy, sizes, sumNat]
    split <;> omega

/-- Feasibility at unit rate from a finite check: when the jobs' sizes sum to `T`, checking the times
before `T` is enough (from `T` on, all the sizes are at most `t`). -/
theorem feasible_of_before (jobs : List (Nat × Nat)) (T : Nat) (hT : sumNat (sizes jobs) = T)
    (h : ∀ t, t < T → sumSizesDoneBy t jobs ≤ 1 * t) : ∀ t, sumSizesDoneBy t jobs ≤ 1 * t := by
  intro t
  by_cases ht : t < T
  · exact h t ht
  · have := sumSizesDoneBy_le_sum t jobs
    omega

end Serq
