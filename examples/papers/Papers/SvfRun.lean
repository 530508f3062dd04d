module

public import Papers.SvfInvAdmit

/-! # SVF (`svf.sq`): the run ends in shape (B), and the claim for every batch

The induction that chains the simulation's steps. Every step of the event loop from the shape (A)
(`Papers.SvfServing n m served s k W`) takes one unit of the loop's fuel and lowers the measure
`k + Σ vol(W)` (the iterations left after the running one) by one: a decode with tokens left
(`svf_serving_decode`), a prefill's end with decodes (`svf_serving_prefill`), the next admission
(`svf_serving_admit`: `k = 0`, `W = w :: W'`, then `vol x − 1 + Σ vol(W' without x)`). At measure 0 the
last token ends the run in (B) (`svf_serving_last_decode`, `svf_serving_last_pre`). Each step's inner calls
(`settle`, `endOfInstant`) take the loop's remaining fuel, and need at most 11 of it, so
`svf_serving_ends`: from (A) the loop with fuel `f + (k + Σ vol(W)) + 12` ends in (B).

From the run's start (`svf_first_settle`: the first instant within `9 · n + 2`; `svf_first_serving`: (A)
at the loop's first step, the measure `Σ vol(1 … n−1) ≤ 5 · (n − 1)`), every fuel of at least
`9 · n + 12` ends the run in (B) (`svf_run_ended`; no session: the run is its initial machine,
`svf_run_zero`), so the claim holds for every batch (`svf_queueing_every`), with the claim's own fuel
(1000) for every batch of at most 109 sessions (`svf_queueing_claim_fuel`), and the bundled run of six is
an instance (`svf_queueing_bound_every`). With it, for every batch, SVF attains Smith's bound
(`svf_attains_every`: Σ latency = `prefix_total(vol)`) and the competitive ratio is 1
(`svf_competitive_every`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-- **From (A) the run ends in (B), for every batch.** From a machine of shape (A) serving session `s` with
`k` tokens left after the running iteration and the sessions `W` waiting, the event loop with fuel
`f + (k + Σ vol(W)) + 12` ends in shape (B), for some order `served'`. By induction on the measure. -/
theorem svf_serving_ends (n : Nat) : ∀ (μ f : Nat) (m : Kernel.Machine) (served : List Nat) (s k : Nat)
    (W : List Nat), SvfServing n m served s k W → k + sumNat (svfVols W) = μ →
    ∃ served', SvfEnded n (loop (svfP n) (f + μ + 12) m) served' := by
  intro μ
  induction μ with
  | zero =>
    intro f m served s k W h hμ
    have hk : k = 0 := by omega
    subst hk
    cases W with
    | cons w W =>
      have := sumNat_svfVols_cons_pos w W
      omega
    | nil =>
      by_cases hv : svfVol s = 1
      · refine ⟨served ++ [s], ?_⟩
        rw [show f + 0 + 12 = f + 1 + 11 by omega]
        exact svf_serving_last_pre n (f + 1) m served s h hv
      · refine ⟨served ++ [s], ?_⟩
        rw [show f + 0 + 12 = f + 2 + 10 by omega]
        exact svf_serving_last_decode n (f + 2) m served s h (by have := svfVol_pos s; omega)
  | succ μ ih =>
    intro f m served s k W h hμ
    cases k with
    | succ k =>
      by_cases hd : k + 2 < svfVol s
      · obtain ⟨m', hstep, h'⟩ := svf_serving_decode n (f + μ + 10) m served s k W h hd
        obtain ⟨served', he⟩ := ih f m' served s k W h' (by omega)
        refine ⟨served', ?_⟩
        rw [show f + (μ + 1) + 12 = f + μ + 10 + 3 by omega, hstep,
          show f + μ + 10 + 2 = f + μ + 12 by omega]
        exact he
      · have hv : svfVol s = k + 2 := by
          have := h.k_lt
          omega
        obtain ⟨m', hstep, h'⟩ := svf_serving_prefill n (f + μ + 9) m served s k W h hv
        obtain ⟨served', he⟩ := ih f m' served s k W h' (by omega)
        refine ⟨served', ?_⟩
        rw [show f + (μ + 1) + 12 = f + μ + 9 + 4 by omega, hstep,
          show f + μ + 9 + 3 = f + μ + 12 by omega]
        exact he
    | zero =>
      cases W with
      | nil =>
        exfalso
        have : sumNat (svfVols []) = 0 := rfl
        omega
      | cons w W =>
        obtain ⟨m', j, hj, hstep, h'⟩ := svf_serving_admit n (f + μ + 1) m served s w W h
        have hsum := sumNat_svfVols_erase (w :: W) j hj
        have hvx := svfVol_pos (svfAt (w :: W) j)
        obtain ⟨served', he⟩ := ih f m' (served ++ [s]) _ _ _ h' (by omega)
        refine ⟨served', ?_⟩
        rw [show f + (μ + 1) + 12 = f + μ + 1 + 12 by omega, hstep,
          show f + μ + 1 + 11 = f + μ + 12 by omega]
        exact he

/-- No session: the run is its initial machine (nothing to settle, no engine work, no timer). -/
theorem svf_run_zero (f : Nat) : runProgram (svfP 0) (f + 3) = initial (svfP 0) := rfl

theorem svf_ended_zero (fuel : Nat) (h : 3 ≤ fuel) : SvfEnded 0 (runProgram (svfP 0) fuel) [] := by
  obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 3 := ⟨fuel - 3, by omega⟩
  rw [svf_run_zero]
  refine ⟨List.Perm.nil, trivial, rfl, ?_, rfl, rfl, rfl⟩
  intro t ht
  simp at ht

/-- **The run ends in (B), for every batch.** For every number of sessions `n` and every fuel of at least
`9 · n + 12`, the run's final machine is shape (B) for some order `served`: it ended on its own, every
session answered at the sum of the volumes served up to and including it, each chosen of least volume. -/
theorem svf_run_ended (n fuel : Nat) (hf : 9 * n + 12 ≤ fuel) :
    ∃ served, SvfEnded n (runProgram (svfP n) fuel) served := by
  cases n with
  | zero => exact ⟨[], svf_ended_zero fuel (by omega)⟩
  | succ n =>
    have e1 : settle (svfP (n + 1)) fuel (initial (svfP (n + 1))) = svfMid (n + 1) (n + 1) 0 := by
      have := svf_first_settle (n + 1) (fuel - 9 * (n + 1) - 2)
      rwa [show fuel - 9 * (n + 1) - 2 + 9 * (n + 1) + 2 = fuel by omega] at this
    have e2 := svf_first_serving n (fuel - 3)
    rw [show fuel - 3 + 3 = fuel by omega] at e2
    have hb := sumNat_svfVols_le (List.range' 1 n)
    rw [List.length_range'] at hb
    obtain ⟨served, he⟩ := svf_serving_ends (n + 1) (0 + sumNat (svfVols (List.range' 1 n)))
      (fuel - (0 + sumNat (svfVols (List.range' 1 n))) - 12) _ [] 0 0 _ e2 rfl
    rw [show fuel - (0 + sumNat (svfVols (List.range' 1 n))) - 12 + (0 + sumNat (svfVols (List.range' 1 n))) + 12
      = fuel by omega] at he
    refine ⟨served, ?_⟩
    show SvfEnded (n + 1) (loop (svfP (n + 1)) fuel (endOfInstant (svfP (n + 1)) fuel
      (settle (svfP (n + 1)) fuel (initial (svfP (n + 1)))))) served
    rw [e1]
    exact he

/-- **The claim for every batch.** For every number of sessions `n` and every fuel of at least `9 · n + 12`,
`svf.sq`'s claim `svf_queueing` holds on the run of its program with `n` sessions: its generated
`AtEndOfRun` predicate (the run ended on its own with no session live, and
`2 · (Σ latency − Σ vol) ≤ 2 · (prefix_total(vol) − Σ vol)`). No hypothesis but the fuel. -/
theorem svf_queueing_every (n fuel : Nat) (h : 9 * n + 12 ≤ fuel) :
    Kernel.AtEndOfRun { Papers.Claims.Svf.program with sessions := n } fuel (fun m =>
      decide (((2 : Int) * (((sumNat (Kernel.responses m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))) ≤
      ((2 : Int) * (((prefixTotal (Kernel.observedValues 0 m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))))) := by
  obtain ⟨served, hs⟩ := svf_run_ended n fuel h
  exact svf_queueing_of_ended n fuel served hs

/-- **The claim with the claim's own fuel.** The claim's fuel (`Papers.Claims.Svf.fuel`, 1000) is at least
`9 · n + 12` for every batch of at most 109 sessions, so the claim holds for each of them. -/
theorem svf_queueing_claim_fuel (n : Nat) (hn : n ≤ 109) :
    Kernel.AtEndOfRun { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel (fun m =>
      decide (((2 : Int) * (((sumNat (Kernel.responses m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))) ≤
      ((2 : Int) * (((prefixTotal (Kernel.observedValues 0 m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))))) :=
  svf_queueing_every n Papers.Claims.Svf.fuel (by unfold Papers.Claims.Svf.fuel; omega)

/-- **SVF attains Smith's bound, for every batch.** For every `n` and every fuel of at least `9 · n + 12`,
the run ends on its own and its Σ latency is `prefix_total(vol)`. -/
theorem svf_attains_every (n fuel : Nat) (h : 9 * n + 12 ≤ fuel) :
    (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).ended = true ∧
    sumNat (Kernel.responses (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads) =
      prefixTotal (Kernel.observedValues 0
        (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads) := by
  obtain ⟨served, hs⟩ := svf_run_ended n fuel h
  obtain ⟨hsf, hresp⟩ := svf_server_of_ended n _ served hs
  exact ⟨svf_ended_of_ended n _ served hs, (svf_bound_of_server n fuel (svfVols served) hsf hresp).1⟩

/-- **The competitive ratio 1, for every batch.** For every `n` and every fuel of at least `9 · n + 12`,
every one-at-a-time schedule of the run's observed volumes feasible at unit rate from time 0 has a total
completion time at least the run's Σ latency (`spt_optimal`, through `svf_bound_of_server`). -/
theorem svf_competitive_every (n fuel : Nat) (h : 9 * n + 12 ≤ fuel) (jobs : List (Nat × Nat))
    (hsizes : (sizes jobs).Perm (Kernel.observedValues 0
      (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads))
    (rate : ∀ t, sumSizesDoneBy t jobs ≤ 1 * t) :
    sumNat (Kernel.responses (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads) ≤
      sumCompletions jobs := by
  obtain ⟨served, hs⟩ := svf_run_ended n fuel h
  obtain ⟨hsf, hresp⟩ := svf_server_of_ended n _ served hs
  exact (svf_bound_of_server n fuel (svfVols served) hsf hresp).2.2 jobs hsizes rate

/-- The bundled run (six sessions, the claim's fuel) as an instance of the claim for every batch: the
generated claim `svf_queueing`, proved without evaluating the run. -/
theorem svf_queueing_bound_every : Papers.Claims.Svf.svf_queueing_ec8fae101205 :=
  svf_queueing_claim_fuel 6 (by decide)

end Papers
