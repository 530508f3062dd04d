module

public import Serq.SptOptimal

/-! # Shortest first on one server: its total completion time is `prefix_total`

The abstract half of SVF's queueing bound for every batch (issue 14, result 5). A single server starts
at time 0 with the waiting sizes `W`, never idles, and each time it is free takes a waiting job of least
size (`ShortestFirst W order`: `order` is the order it serves them in, ties broken in any way). Then the
order is `W` sorted ascending (`ShortestFirst.eq_sortAsc`: a least element of `W` heads `sortAsc W`,
`sortAsc_least`), the k-th job served completes at the sum of the first k sizes of that order
(`completionsFrom`), and the completions total `prefixTotal W` (`shortestFirst_total`): the least total
completion time (`spt_optimal`), so shortest first is optimal among every feasible one-at-a-time schedule
of the same sizes (`shortestFirst_optimal`), and the queueing bound of `svf.sq`'s claim holds with
equality at `c = 2` (`shortestFirst_queueing`). Every `W` has such an order (`shortestFirst_sortAsc`).

What is not here: that the kernel's run of `svf.sq`'s program is such a server (one request at a time,
no idle iteration, a request's service `out` iterations, its response its completion). The admission
half of that, that every admission from a `queue by` queue takes a waiting hold of least keys, is
`Serq.Kernel.select_least` (lean/Serq/KernelSelect.lean).
-/

@[expose] public section

namespace Serq

theorem mem_sortAsc (a : Nat) (l : List Nat) : a ∈ sortAsc l ↔ a ∈ l := by
  induction l with
  | nil => simp [sortAsc]
  | cons x xs ih => simp only [sortAsc, mem_insertSorted, ih, List.mem_cons]

/-- Inserting a value at most every element puts it first. -/
theorem insertSorted_least (v : Nat) (l : List Nat) (h : ∀ a ∈ l, v ≤ a) : insertSorted v l = v :: l := by
  cases l with
  | nil => rfl
  | cons y ys =>
    have hy : v ≤ y := h y (by simp)
    simp [insertSorted, hy]

/-- A least element of `W` heads `W` sorted, followed by the rest sorted (one copy of it removed). -/
theorem sortAsc_least (v : Nat) (W : List Nat) (hv : v ∈ W) (hmin : ∀ a ∈ W, v ≤ a) :
    sortAsc W = v :: sortAsc (W.erase v) := by
  rw [sortAsc_perm (List.perm_cons_erase hv)]
  show insertSorted v (sortAsc (W.erase v)) = _
  apply insertSorted_least
  intro a ha
  rw [mem_sortAsc] at ha
  exact hmin a (List.mem_of_mem_erase ha)

/-- `ShortestFirst W order`: a server holding the waiting sizes `W` serves them in `order`, each time
taking a waiting size at most every other waiting size (ties in any order). -/
inductive ShortestFirst : List Nat → List Nat → Prop
  | done : ShortestFirst [] []
  | next (W order : List Nat) (v : Nat) : v ∈ W → (∀ a ∈ W, v ≤ a) → ShortestFirst (W.erase v) order →
      ShortestFirst W (v :: order)

/-- Shortest first serves the sizes in ascending order, whatever its ties. -/
theorem ShortestFirst.eq_sortAsc {W order : List Nat} (h : ShortestFirst W order) : order = sortAsc W := by
  induction h with
  | done => rfl
  | next W order v hv hmin _ ih => rw [sortAsc_least v W hv hmin, ih]

/-- Every multiset of sizes has a shortest-first order: its sorted list. -/
theorem shortestFirst_sortAsc : ∀ (n : Nat) (W : List Nat), W.length ≤ n → ShortestFirst W (sortAsc W)
  | _, [], _ => ShortestFirst.done
  | 0, _ :: _, h => absurd h (by simp)
  | n + 1, x :: xs, h => by
    have hne : sortAsc (x :: xs) ≠ [] := by
      intro he
      have hx : x ∈ sortAsc (x :: xs) := (mem_sortAsc x (x :: xs)).2 (by simp)
      rw [he] at hx
      cases hx
    obtain ⟨v, rest, hvr⟩ : ∃ v rest, sortAsc (x :: xs) = v :: rest := by
      cases hs : sortAsc (x :: xs) with
      | nil => exact absurd hs hne
      | cons v rest => exact ⟨v, rest, rfl⟩
    have hv : v ∈ x :: xs := (mem_sortAsc v _).1 (by rw [hvr]; simp)
    have hmin : ∀ a ∈ x :: xs, v ≤ a := by
      intro a ha
      have hs := sortAsc_sorted (x :: xs)
      rw [hvr, List.pairwise_cons] at hs
      have ha' : a ∈ v :: rest := by rw [← hvr]; exact (mem_sortAsc a _).2 ha
      rcases List.mem_cons.1 ha' with rfl | ha'
      · exact Nat.le_refl _
      · exact hs.1 a ha'
    have hlen : ((x :: xs).erase v).length ≤ n := by
      rw [List.length_erase_of_mem hv]
      simp at h ⊢
      omega
    have ih := shortestFirst_sortAsc n ((x :: xs).erase v) hlen
    rw [sortAsc_least v (x :: xs) hv hmin]
    exact ShortestFirst.next _ _ v hv hmin ih

/-- The completion times of sizes served in order from time `t`, one at a time without idling. -/
def completionsFrom : Nat → List Nat → List Nat
  | _, [] => []
  | t, v :: vs => (t + v) :: completionsFrom (t + v) vs

/-- Their total is `prefixSums`. -/
theorem sumNat_completionsFrom : ∀ (t : Nat) (l : List Nat), sumNat (completionsFrom t l) = prefixSums t l
  | _, [] => rfl
  | t, v :: vs => by
    simp only [completionsFrom, sumNat, prefixSums, sumNat_completionsFrom (t + v) vs]

/-- **Shortest first attains `prefix_total`.** Served shortest first from time 0 without idling, the
sizes' completion times total `prefixTotal W`, whatever the ties. -/
theorem shortestFirst_total {W order : List Nat} (h : ShortestFirst W order) :
    sumNat (completionsFrom 0 order) = prefixTotal W := by
  rw [sumNat_completionsFrom, h.eq_sortAsc]
  rfl

/-- Shortest first is optimal: its total completion time is at most that of every feasible
one-at-a-time schedule `jobs` (pairs `(size, completion)`) of the same sizes (`spt_optimal`). -/
theorem shortestFirst_optimal {W order : List Nat} (h : ShortestFirst W order) (jobs : List (Nat × Nat))
    (hsizes : (sizes jobs).Perm W) (rate : ∀ t, sumSizesDoneBy t jobs ≤ 1 * t) :
    sumNat (completionsFrom 0 order) ≤ sumCompletions jobs :=
  spt_optimal W _ (shortestFirst_total h) jobs hsizes rate

/-- The queueing bound of `svf.sq`'s claim, in the form the claim is generated (integers), with `c = 2`:
served shortest first, `2 · (Σ completion − Σ size) ≤ 2 · (prefix_total(size) − Σ size)`, with equality. -/
theorem shortestFirst_queueing {W order : List Nat} (h : ShortestFirst W order) :
    (2 : Int) * (((sumNat (completionsFrom 0 order) : Nat) : Int) - ((sumNat W : Nat) : Int)) ≤
      (2 : Int) * (((prefixTotal W : Nat) : Int) - ((sumNat W : Nat) : Int)) := by
  rw [shortestFirst_total h]
  exact Int.le_refl _

/-- A sum does not depend on the order. -/
theorem sumNat_perm {l₁ l₂ : List Nat} (h : l₁.Perm l₂) : sumNat l₁ = sumNat l₂ := by
  induction h with
  | nil => rfl
  | cons x _ ih => simp only [sumNat, ih]
  | swap x y l => simp only [sumNat]; omega
  | trans _ _ ih₁ ih₂ => exact ih₁.trans ih₂

/-- Any list of completion times that is, in some order, the completions of a shortest-first service
from time 0 totals `prefixTotal W`. -/
theorem shortestFirst_total_perm {W order cs : List Nat} (h : ShortestFirst W order)
    (hc : cs.Perm (completionsFrom 0 order)) : sumNat cs = prefixTotal W := by
  rw [sumNat_perm hc, shortestFirst_total h]

example : ShortestFirst [3, 1, 2, 1] (sortAsc [3, 1, 2, 1]) := shortestFirst_sortAsc 4 _ (by decide)
example : sumNat (completionsFrom 0 [1, 1, 2, 3, 4, 5]) = prefixTotal [1, 4, 2, 5, 3, 1] := by decide

end Serq
