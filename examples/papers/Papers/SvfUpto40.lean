module

public import Papers.SvfServes32
public import Papers.SvfServes40

/-! # SVF (`svf.sq`): every batch of 0 to 40 sessions, decided

`Papers.SvfEvery` decides batches of 0 to 16 sessions in one theorem, `Papers.SvfServes`,
`SvfServes32` and `SvfServes40` each batch of 17 to 40 on its own run; collected here: for every
`n ≤ 40` the run ends within the claims' fuel (1000) with total latency `prefix_total(vol)`, the claim's
generated statement holds, the ratio is 1, and `svf_bound_of_server`'s hypothesis holds. -/

@[expose] public section

namespace Papers

open Serq

/-- Every batch of 17 to 40 sessions, decided one run at a time. -/
theorem svf_serves_17_40 (n : Nat) (h1 : 17 ≤ n) (h2 : n < 41) : svfServes n = true := by
  have : n = 17 ∨ n = 18 ∨ n = 19 ∨ n = 20 ∨ n = 21 ∨ n = 22 ∨ n = 23 ∨ n = 24 ∨ n = 25 ∨ n = 26 ∨ n = 27 ∨ n = 28 ∨ n = 29 ∨ n = 30 ∨ n = 31 ∨ n = 32 ∨ n = 33 ∨ n = 34 ∨ n = 35 ∨ n = 36 ∨ n = 37 ∨ n = 38 ∨ n = 39 ∨ n = 40 := by omega
  rcases this with rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl
  · exact svf_serves_17
  · exact svf_serves_18
  · exact svf_serves_19
  · exact svf_serves_20
  · exact svf_serves_21
  · exact svf_serves_22
  · exact svf_serves_23
  · exact svf_serves_24
  · exact svf_serves_25
  · exact svf_serves_26
  · exact svf_serves_27
  · exact svf_serves_28
  · exact svf_serves_29
  · exact svf_serves_30
  · exact svf_serves_31
  · exact svf_serves_32
  · exact svf_serves_33
  · exact svf_serves_34
  · exact svf_serves_35
  · exact svf_serves_36
  · exact svf_serves_37
  · exact svf_serves_38
  · exact svf_serves_39
  · exact svf_serves_40

/-- `svf_attains` for every batch of at most 40 sessions: the run ends within the claims' fuel (1000)
and its total latency is `prefix_total(vol)`. -/
theorem svf_attains_upto41 (n : Nat) (hn : n < 41) : svfAttains n = true := by
  by_cases h : n < 17
  · exact svf_attains_upto n h
  · have hs := svf_serves_17_40 n (by omega) hn
    simp only [svfServes, Bool.and_eq_true] at hs
    exact hs.1

/-- The claim's bound (its generated predicate over the program with `n` sessions) for every batch of at
most 40 sessions. -/
theorem svf_queueing_upto41 (n : Nat) (hn : n < 41) :
    Kernel.AtEndOfRun { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel (fun m =>
      decide (((2 : Int) * (((sumNat (Kernel.responses m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))) ≤
      ((2 : Int) * (((prefixTotal (Kernel.observedValues 0 m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))))) := by
  have h := svf_attains_upto41 n hn
  simp only [svfAttains, Bool.and_eq_true, beq_iff_eq] at h
  refine ⟨h.1, ?_⟩
  simp only [h.2, decide_eq_true_eq]
  exact Int.le_refl _

/-- The competitive ratio 1 for every batch of at most 40 sessions (`Serq.spt_optimal`). -/
theorem svf_competitive_upto41 (n : Nat) (hn : n < 41) (jobs : List (Nat × Nat))
    (hsizes : (sizes jobs).Perm (Kernel.observedValues 0
      (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel).threads))
    (rate : ∀ t, sumSizesDoneBy t jobs ≤ 1 * t) :
    sumNat (Kernel.responses
      (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel).threads) ≤
      sumCompletions jobs := by
  have h := svf_attains_upto41 n hn
  simp only [svfAttains, Bool.and_eq_true, beq_iff_eq] at h
  exact spt_optimal _ _ h.2 jobs hsizes rate

/-- `svf_bound_of_server`'s hypothesis on every batch of at most 40 sessions: the run's responses are a
permutation of the completions of its volumes served in ascending order from 0, a shortest-first order. -/
theorem svf_server_upto41 (n : Nat) (hn : n < 41) :
    let m := Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel
    ShortestFirst (Kernel.observedValues 0 m.threads) (sortAsc (Kernel.observedValues 0 m.threads)) ∧
    (Kernel.responses m.threads).Perm (completionsFrom 0 (sortAsc (Kernel.observedValues 0 m.threads))) := by
  by_cases h : n < 17
  · exact svf_server_upto n h
  · intro m
    have hs := svf_serves_17_40 n (by omega) hn
    simp only [svfServes, Bool.and_eq_true, decide_eq_true_eq] at hs
    exact ⟨shortestFirst_sortAsc _ _ (Nat.le_refl _), hs.2⟩

end Papers
