module

public import Papers.SvfEvery

/-! # SVF (`svf.sq`): larger batches decided, one at a time

`Papers.SvfEvery` decides the claim for every batch of 0 to 16 sessions in one `decide +kernel` (a
bounded `∀ n < 17`); a bounded `∀` over more sessions ran out of the WebAssembly heap, since the kernel
evaluates every run in one term. Here each batch of 17 to 24 sessions is its own theorem, decided on its
own run (`svfServes n`: the run ends within the claims' fuel, its total latency is `prefix_total(vol)`,
and its responses are, in some order, the completions of its volumes served in ascending order from 0,
the hypothesis of `svf_bound_of_server`), and the batches of 0 to 24 sessions are collected
(`svf_attains_upto25`, `svf_queueing_upto25`, `svf_competitive_upto25`, `svf_server_upto25`).

What stays open for every `n` is the same as in `Papers.SvfEvery`: that the kernel's run of this
program is the shortest-first server.
-/

@[expose] public section

namespace Papers

open Serq

/-- The run with `n` sessions and the claims' fuel ended with total latency `prefix_total(vol)`
(`svfAttains`), and its responses are a permutation of `completionsFrom 0 (sortAsc vols)`. -/
noncomputable def svfServes (n : Nat) : Bool :=
  let m := Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel
  svfAttains n && decide ((Kernel.responses m.threads).Perm
    (completionsFrom 0 (sortAsc (Kernel.observedValues 0 m.threads))))

theorem svf_serves_17 : svfServes 17 = true := by decide +kernel
theorem svf_serves_18 : svfServes 18 = true := by decide +kernel
theorem svf_serves_19 : svfServes 19 = true := by decide +kernel
theorem svf_serves_20 : svfServes 20 = true := by decide +kernel
theorem svf_serves_21 : svfServes 21 = true := by decide +kernel
theorem svf_serves_22 : svfServes 22 = true := by decide +kernel
theorem svf_serves_23 : svfServes 23 = true := by decide +kernel
theorem svf_serves_24 : svfServes 24 = true := by decide +kernel

/-- Every batch of 17 to 24 sessions, decided one run at a time. -/
theorem svf_serves_17_24 (n : Nat) (h1 : 17 ≤ n) (h2 : n < 25) : svfServes n = true := by
  have : n = 17 ∨ n = 18 ∨ n = 19 ∨ n = 20 ∨ n = 21 ∨ n = 22 ∨ n = 23 ∨ n = 24 := by omega
  rcases this with rfl | rfl | rfl | rfl | rfl | rfl | rfl | rfl
  · exact svf_serves_17
  · exact svf_serves_18
  · exact svf_serves_19
  · exact svf_serves_20
  · exact svf_serves_21
  · exact svf_serves_22
  · exact svf_serves_23
  · exact svf_serves_24

/-- `svf_attains` for every batch of at most 24 sessions: the run ends within the claims' fuel (1000)
and its total latency is `prefix_total(vol)`. -/
theorem svf_attains_upto25 (n : Nat) (hn : n < 25) : svfAttains n = true := by
  by_cases h : n < 17
  · exact svf_attains_upto n h
  · have hs := svf_serves_17_24 n (by omega) hn
    simp only [svfServes, Bool.and_eq_true] at hs
    exact hs.1

/-- The claim's bound (its generated predicate over the program with `n` sessions) for every batch of at
most 24 sessions. -/
theorem svf_queueing_upto25 (n : Nat) (hn : n < 25) :
    Kernel.AtEndOfRun { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel (fun m =>
      decide (((2 : Int) * (((sumNat (Kernel.responses m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))) ≤
      ((2 : Int) * (((prefixTotal (Kernel.observedValues 0 m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))))) := by
  have h := svf_attains_upto25 n hn
  simp only [svfAttains, Bool.and_eq_true, beq_iff_eq] at h
  refine ⟨h.1, ?_⟩
  simp only [h.2, decide_eq_true_eq]
  exact Int.le_refl _

/-- The competitive ratio 1 for every batch of at most 24 sessions (`Serq.spt_optimal`). -/
theorem svf_competitive_upto25 (n : Nat) (hn : n < 25) (jobs : List (Nat × Nat))
    (hsizes : (sizes jobs).Perm (Kernel.observedValues 0
      (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel).threads))
    (rate : ∀ t, sumSizesDoneBy t jobs ≤ 1 * t) :
    sumNat (Kernel.responses
      (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel).threads) ≤
      sumCompletions jobs := by
  have h := svf_attains_upto25 n hn
  simp only [svfAttains, Bool.and_eq_true, beq_iff_eq] at h
  exact spt_optimal _ _ h.2 jobs hsizes rate

/-- `svf_bound_of_server`'s hypothesis on every batch of at most 24 sessions: the run's responses are a
permutation of the completions of its volumes served in ascending order from 0, a shortest-first order. -/
theorem svf_server_upto25 (n : Nat) (hn : n < 25) :
    let m := Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel
    ShortestFirst (Kernel.observedValues 0 m.threads) (sortAsc (Kernel.observedValues 0 m.threads)) ∧
    (Kernel.responses m.threads).Perm (completionsFrom 0 (sortAsc (Kernel.observedValues 0 m.threads))) := by
  by_cases h : n < 17
  · exact svf_server_upto n h
  · intro m
    have hs := svf_serves_17_24 n (by omega) hn
    simp only [svfServes, Bool.and_eq_true, decide_eq_true_eq] at hs
    exact ⟨shortestFirst_sortAsc _ _ (Nat.le_refl _), hs.2⟩

end Papers
