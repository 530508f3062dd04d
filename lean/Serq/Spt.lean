module

public import Serq.Basic

/-! # Shortest processing time: a lower bound on total completion time

`prefixTotal xs` is `Σ_k (v_1 + … + v_k)` over the values of `xs` sorted ascending,
the serQ aggregate `prefix_total`: the least total completion time of jobs of those
sizes served one at a time at unit rate (shortest processing time first).

`spt_lower_bound` says that no server beats it: for jobs given as pairs
`(size, completion time)`, if by every time `t` the jobs completed by `t` have total
size at most `r * t` (the server does at most `r` units of work per unit of time),
then `prefixTotal (sizes jobs) ≤ r * sumCompletions jobs`, whatever the order of
service. This is the groundwork for the serQ claim
`at end (total(response) >= prefix_total(size))` (with `r = 1` and arrivals at 0).

The proof is by induction on the number of jobs, removing the job `j` completed
last: all jobs are done by its completion time, so `r * j.2` is at least the total
size; and inserting a value `y` into a sorted list raises `prefixSums` by at most
`y` plus the sum of the list (`prefixSums_insertSorted_le`), so
`prefixTotal (sizes jobs) ≤ prefixTotal (sizes rest) + total size`.
Insertion sort is order-independent (`insertSorted_comm`), which lets the job
removed sit anywhere in the list.
-/

@[expose] public section

namespace Serq

/-- Insert `x` before the first element not smaller than it. -/
def insertSorted (x : Nat) : List Nat → List Nat
  | [] => [x]
  | y :: ys => if x ≤ y then x :: y :: ys else y :: insertSorted x ys

/-- Insertion sort, ascending. -/
def sortAsc : List Nat → List Nat
  | [] => []
  | x :: xs => insertSorted x (sortAsc xs)

/-- The sum of a list of naturals. -/
def sumNat : List Nat → Nat
  | [] => 0
  | x :: xs => x + sumNat xs

/-- `prefixSums acc [v₁, …, vₙ] = Σ_k (acc + v₁ + … + v_k)`. -/
def prefixSums (acc : Nat) : List Nat → Nat
  | [] => 0
  | v :: vs => (acc + v) + prefixSums (acc + v) vs

/-- `Σ_k (v_1 + … + v_k)` over the values sorted ascending (serQ `prefix_total`). -/
def prefixTotal (xs : List Nat) : Nat := prefixSums 0 (sortAsc xs)

/-- The sizes (first components) of jobs given as `(size, completion time)`. -/
def sizes : List (Nat × Nat) → List Nat
  | [] => []
  | j :: js => j.1 :: sizes js

/-- The total completion time (sum of second components). -/
def sumCompletions : List (Nat × Nat) → Nat
  | [] => 0
  | j :: js => j.2 + sumCompletions js

/-- The total size of the jobs completed by time `t`. -/
def sumSizesDoneBy (t : Nat) : List (Nat × Nat) → Nat
  | [] => 0
  | j :: js => (if j.2 ≤ t then j.1 else 0) + sumSizesDoneBy t js

example : prefixTotal [3, 1, 2] = 10 := by decide
example : prefixTotal [] = 0 := by decide
example : prefixTotal [5] = 5 := by decide
example : prefixTotal [4, 4, 1, 0] = 0 + 1 + 5 + 9 := by decide
example : sortAsc [3, 1, 2, 1] = [1, 1, 2, 3] := by decide

/-! ## Insertion sort -/

theorem mem_insertSorted (x a : Nat) (l : List Nat) :
    a ∈ insertSorted x l ↔ a = x ∨ a ∈ l := by
  induction l with
  | nil => simp [insertSorted]
  | cons y ys ih =>
    unfold insertSorted
    split <;> simp [ih, or_left_comm]

theorem insertSorted_sorted (x : Nat) (l : List Nat) (h : l.Pairwise (· ≤ ·)) :
    (insertSorted x l).Pairwise (· ≤ ·) := by
  induction l with
  | nil => simp [insertSorted]
  | cons y ys ih =>
    rw [List.pairwise_cons] at h
    unfold insertSorted
    split
    · rename_i hxy
      refine List.pairwise_cons.2 ⟨?_, List.pairwise_cons.2 h⟩
      intro a ha
      rw [List.mem_cons] at ha
      rcases ha with rfl | ha
      · exact hxy
      · exact Nat.le_trans hxy (h.1 a ha)
    · rename_i hxy
      refine List.pairwise_cons.2 ⟨?_, ih h.2⟩
      intro a ha
      rw [mem_insertSorted] at ha
      rcases ha with rfl | ha
      · omega
      · exact h.1 a ha

theorem sortAsc_sorted (l : List Nat) : (sortAsc l).Pairwise (· ≤ ·) := by
  induction l with
  | nil => simp [sortAsc]
  | cons x xs ih => exact insertSorted_sorted x _ ih

theorem insertSorted_comm (x y : Nat) (l : List Nat) :
    insertSorted x (insertSorted y l) = insertSorted y (insertSorted x l) := by
  induction l with
  | nil =>
    by_cases hxy : x ≤ y <;> by_cases hyx : y ≤ x <;>
      simp [insertSorted, hxy, hyx] <;> omega
  | cons z zs ih =>
    by_cases hxz : x ≤ z <;> by_cases hyz : y ≤ z <;> by_cases hxy : x ≤ y <;>
      by_cases hyx : y ≤ x <;> simp [insertSorted, hxz, hyz, hxy, hyx, ih] <;> omega

theorem sumNat_insertSorted (x : Nat) (l : List Nat) :
    sumNat (insertSorted x l) = x + sumNat l := by
  induction l with
  | nil => simp [insertSorted, sumNat]
  | cons y ys ih =>
    unfold insertSorted
    split <;> simp only [sumNat, ih] <;> omega

theorem sumNat_sortAsc (l : List Nat) : sumNat (sortAsc l) = sumNat l := by
  induction l with
  | nil => rfl
  | cons x xs ih => simp only [sortAsc, sumNat, sumNat_insertSorted, ih]

/-! ## Prefix sums -/

/-- Raising the start by `d`, at most every element, costs at most the sum. -/
theorem prefixSums_shift_le (d : Nat) (l : List Nat) (h : ∀ a ∈ l, d ≤ a) (acc : Nat) :
    prefixSums (acc + d) l ≤ prefixSums acc l + sumNat l := by
  induction l generalizing acc with
  | nil => simp [prefixSums]
  | cons v vs ih =>
    have hv : d ≤ v := h v (List.mem_cons_self ..)
    have ih' := ih (fun a ha => h a (List.mem_cons_of_mem _ ha)) (acc + v)
    simp only [prefixSums, sumNat]
    rw [show acc + d + v = acc + v + d by omega]
    omega

/-- Inserting `y` into a sorted list raises `prefixSums` by at most `acc + y + sum`. -/
theorem prefixSums_insertSorted_le (y : Nat) (l : List Nat) (h : l.Pairwise (· ≤ ·))
    (acc : Nat) :
    prefixSums acc (insertSorted y l) ≤ prefixSums acc l + acc + y + sumNat l := by
  induction l generalizing acc with
  | nil => simp [insertSorted, prefixSums, sumNat]
  | cons z zs ih =>
    rw [List.pairwise_cons] at h
    unfold insertSorted
    split
    · rename_i hyz
      have hall : ∀ a ∈ z :: zs, y ≤ a := by
        intro a ha
        rw [List.mem_cons] at ha
        rcases ha with rfl | ha
        · exact hyz
        · exact Nat.le_trans hyz (h.1 a ha)
      have hs := prefixSums_shift_le y (z :: zs) hall acc
      have e : prefixSums acc (y :: z :: zs) = (acc + y) + prefixSums (acc + y) (z :: zs) :=
        rfl
      rw [e]
      simp only [sumNat] at hs ⊢
      omega
    · have ih' := ih h.2 (acc + z)
      simp only [prefixSums, sumNat]
      omega

/-! ## Jobs -/

theorem sortAsc_sizes_middle (s t : List (Nat × Nat)) (j : Nat × Nat) :
    sortAsc (sizes (s ++ j :: t)) = insertSorted j.1 (sortAsc (sizes (s ++ t))) := by
  induction s with
  | nil => rfl
  | cons a s ih =>
    simp only [List.cons_append, sizes, sortAsc, ih]
    exact insertSorted_comm _ _ _

theorem sumNat_sizes_middle (s t : List (Nat × Nat)) (j : Nat × Nat) :
    sumNat (sizes (s ++ j :: t)) = j.1 + sumNat (sizes (s ++ t)) := by
  induction s with
  | nil => rfl
  | cons a s ih => simp only [List.cons_append, sizes, sumNat, ih]; omega

theorem sumCompletions_middle (s t : List (Nat × Nat)) (j : Nat × Nat) :
    sumCompletions (s ++ j :: t) = j.2 + sumCompletions (s ++ t) := by
  induction s with
  | nil => rfl
  | cons a s ih => simp only [List.cons_append, sumCompletions, ih]; omega

theorem sumSizesDoneBy_middle_le (u : Nat) (s t : List (Nat × Nat)) (j : Nat × Nat) :
    sumSizesDoneBy u (s ++ t) ≤ sumSizesDoneBy u (s ++ j :: t) := by
  induction s with
  | nil => simp only [List.nil_append, sumSizesDoneBy]; omega
  | cons a s ih => simp only [List.cons_append, sumSizesDoneBy]; omega

theorem sumSizesDoneBy_all (u : Nat) (l : List (Nat × Nat)) (h : ∀ k ∈ l, k.2 ≤ u) :
    sumSizesDoneBy u l = sumNat (sizes l) := by
  induction l with
  | nil => rfl
  | cons a l ih =>
    have ha : a.2 ≤ u := h a (List.mem_cons_self ..)
    simp only [sumSizesDoneBy, sizes, sumNat, ha, if_true,
      ih (fun k hk => h k (List.mem_cons_of_mem _ hk))]

theorem exists_last_done (l : List (Nat × Nat)) (hl : l ≠ []) :
    ∃ j ∈ l, ∀ k ∈ l, k.2 ≤ j.2 := by
  induction l with
  | nil => exact absurd rfl hl
  | cons a rest ih =>
    by_cases hr : rest = []
    · subst hr
      exact ⟨a, List.mem_cons_self .., fun k hk => by
        rw [List.mem_singleton] at hk; rw [hk]; exact Nat.le_refl _⟩
    · obtain ⟨j, hj, hmax⟩ := ih hr
      by_cases haj : a.2 ≤ j.2
      · refine ⟨j, List.mem_cons_of_mem _ hj, fun k hk => ?_⟩
        rw [List.mem_cons] at hk
        rcases hk with rfl | hk
        · exact haj
        · exact hmax k hk
      · refine ⟨a, List.mem_cons_self .., fun k hk => ?_⟩
        rw [List.mem_cons] at hk
        rcases hk with rfl | hk
        · exact Nat.le_refl _
        · have := hmax k hk; omega

theorem spt_lower_bound_aux (r : Nat) :
    ∀ n (jobs : List (Nat × Nat)), jobs.length ≤ n →
      (∀ t, sumSizesDoneBy t jobs ≤ r * t) →
      prefixTotal (sizes jobs) ≤ r * sumCompletions jobs := by
  intro n
  induction n with
  | zero =>
    intro jobs hlen _
    have : jobs = [] := List.eq_nil_of_length_eq_zero (by omega)
    subst this
    simp [prefixTotal, sizes, sortAsc, prefixSums]
  | succ n ih =>
    intro jobs hlen rate
    by_cases hnil : jobs = []
    · subst hnil
      simp [prefixTotal, sizes, sortAsc, prefixSums]
    obtain ⟨j, hj, hmax⟩ := exists_last_done jobs hnil
    obtain ⟨s, t, rfl⟩ := List.append_of_mem hj
    have hlen' : (s ++ t).length ≤ n := by
      simp only [List.length_append, List.length_cons] at hlen ⊢; omega
    have rate' : ∀ u, sumSizesDoneBy u (s ++ t) ≤ r * u := fun u =>
      Nat.le_trans (sumSizesDoneBy_middle_le u s t j) (rate u)
    have hrest := ih (s ++ t) hlen' rate'
    have hlast := rate j.2
    rw [sumSizesDoneBy_all j.2 _ hmax, sumNat_sizes_middle] at hlast
    have hins := prefixSums_insertSorted_le j.1 (sortAsc (sizes (s ++ t)))
      (sortAsc_sorted _) 0
    rw [sumNat_sortAsc] at hins
    unfold prefixTotal at hrest ⊢
    rw [sortAsc_sizes_middle, sumCompletions_middle, Nat.mul_add]
    omega

/-- **SPT lower bound.** Jobs given as `(size, completion time)`, served by a server
doing at most `r` units of work per unit of time (by every time `t`, the jobs
completed have total size at most `r * t`), have total completion time at least
`prefixTotal (sizes jobs) / r`, whatever the order of service. -/
theorem spt_lower_bound (r : Nat) (jobs : List (Nat × Nat))
    (rate : ∀ t, sumSizesDoneBy t jobs ≤ r * t) :
    prefixTotal (sizes jobs) ≤ r * sumCompletions jobs :=
  spt_lower_bound_aux r jobs.length jobs (Nat.le_refl _) rate

end Serq
