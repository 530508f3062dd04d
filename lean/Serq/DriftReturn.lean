module

public import Serq.DriftPathsCaps

/-! # The untruncated return time to the empty engine, without real numbers (issue 14, result 7)

`Serq.drift_machine_return_bound_caps` bounds, at every horizon `n + 1`, the machine's truncated
expected return time to an empty engine: with `den = Σ p` the arrivals' denominator and

  `R n = Σ_{(w, p) ∈ paths (n + 1)} w · (1 + timeTo (· == 0) n (i ↦ work along p at i + 1))`

(the weighted sum of `min(τ⁺, n + 1)` over the arrival paths of length `n + 1`, whose weights sum to
`den ^ (n + 1)`, `paths_total`), `E[min(τ⁺, n + 1)] = R n / den ^ (n + 1)`. Here:

* **the truncations grow** (`Serq.drift_machine_return_mono_caps`): `den · R n ≤ R (n + 1)`, i.e.
  `R n / den ^ (n + 1) ≤ R (n + 1) / den ^ (n + 2)`, and more generally `den ^ m · R n ≤ R (n + m)`
  (`Serq.drift_machine_return_mono_le_caps`); on the chain, `Serq.Drift.ret_mono`, `ret_mono_le`;
* **so the expected return time is finite** (`Serq.drift_machine_positive_recurrent_caps`): the
  nondecreasing sequence `E[min(τ⁺, n + 1)]` is bounded by `1 + Σ p · lyapunov K (k·W − B) / (den·B − M)`
  at every `n`, so its limit, its supremum, which is `E[τ⁺]` by monotone convergence, is finite and has
  that bound: the empty engine is positive recurrent;
* **the engine returns with probability one, with a rate** (`Serq.drift_machine_return_tail_caps`,
  Markov's inequality on the truncation): `P(τ⁺ > n) ≤ bound / (n + 1)`, which tends to 0. The event
  `τ⁺ > n` is `timeTo (· == 0) n g = n` for `g i` the work at time `i + 1`: the work is not 0 at any of
  the times `1, …, n` (`Serq.Drift.timeTo_eq_iff`).

Nothing here uses real numbers or limits as objects: every statement is an inequality between natural
numbers, each expectation multiplied by its denominator `den ^ (n + 1)`.
-/

@[expose] public section

namespace Serq.Drift

/-- `timeTo A n g = n` exactly when `g` is off `A` at every time `i < n`: the first time in `A`, `τ`,
is at least `n`. -/
theorem timeTo_eq_iff (A : Nat → Bool) : ∀ (n : Nat) (g : Nat → Nat),
    timeTo A n g = n ↔ ∀ i, i < n → A (g i) = false
  | 0, g => by simp [timeTo]
  | n + 1, g => by
    have ih := timeTo_eq_iff A n (fun i => g (i + 1))
    simp only [timeTo]
    cases h0 : A (g 0)
    · simp only [Bool.false_eq_true, if_false]
      constructor
      · intro h i hi
        cases i with
        | zero => exact h0
        | succ i => exact ih.mp (by omega) i (by omega)
      · intro h
        have := ih.mpr (fun i hi => h (i + 1) (by omega))
        omega
    · simp only [if_true]
      constructor
      · intro h; omega
      · intro h; have := h 0 (by omega); rw [h0] at this; cases this

/-- `timeTo` is at most its truncation. -/
theorem timeTo_le (A : Nat → Bool) : ∀ (n : Nat) (g : Nat → Nat), timeTo A n g ≤ n
  | 0, _ => Nat.le_refl _
  | n + 1, g => by
    have := timeTo_le A n (fun i => g (i + 1))
    simp only [timeTo]
    split <;> omega

/-- **Markov's inequality on a truncated time**, over any weighted list: `(n + 1)` times the weight on
which `τ ≥ n` (`timeTo A n (g x) = n`) is at most the weighted sum of `1 + min(τ, n)`. -/
theorem wsum_tail {σ : Type} (A : Nat → Bool) (n : Nat) (g : σ → Nat → Nat) (l : List (Nat × σ)) :
    (n + 1) * wsum (fun x => if timeTo A n (g x) = n then 1 else 0) l
      ≤ wsum (fun x => 1 + timeTo A n (g x)) l := by
  rw [← wsum_mul]
  apply wsum_mono
  intro x
  split
  · omega
  · omega

/-- **The truncated return times grow** (in the scale `den ^ (n + 1)`): `den · ret (n + 1) ≤ ret (n + 2)`,
`E[min(τ⁺, n + 1)] ≤ E[min(τ⁺, n + 2)]`. -/
theorem ret_mono {σ : Type} (c : Chain σ) (A : σ → Bool) (n : Nat) (s : σ) :
    c.den * ret c A (n + 1) s ≤ ret c A (n + 2) s := by
  have h : wsum (fun x => c.den * hit c A n x) (c.succ s) ≤ wsum (hit c A (n + 1)) (c.succ s) :=
    wsum_mono (fun x => hit_mono c A n x) _
  rw [wsum_mul] at h
  simp only [ret]
  rw [Nat.mul_add, ← Nat.pow_succ']
  exact Nat.add_le_add_left h _

/-- The same across any number `m` of horizons: `den ^ m · ret (n + 1) ≤ ret (n + 1 + m)`. -/
theorem ret_mono_le {σ : Type} (c : Chain σ) (A : σ → Bool) (n : Nat) (s : σ) :
    ∀ m, c.den ^ m * ret c A (n + 1) s ≤ ret c A (n + 1 + m) s
  | 0 => by simp
  | m + 1 => by
    have ih := ret_mono_le c A n s m
    have h := ret_mono c A (n + m) s
    rw [show n + m + 1 = n + 1 + m by omega, show n + m + 2 = n + 1 + (m + 1) by omega] at h
    rw [Nat.pow_succ', Nat.mul_assoc]
    exact Nat.le_trans (Nat.mul_le_mul_left _ ih) h

end Serq.Drift

namespace Serq

open DriftMachine Drift

/-- **The machine's truncated expected return times grow, with fixed caps** (issue 14, result 7): under
`drift_machine_return_bound_caps`'s engine hypotheses, with `R n` the weighted sum over the paths of
length `n + 1` of `min(τ⁺, n + 1)` (`τ⁺ ≥ 1` the first time from 1 the machine's work is 0; fuel
`F ≥ n + 1`, resp. `F' ≥ n + 2`), `den · R n ≤ R (n + 1)`: dividing by `den ^ (n + 2)`,
`E[min(τ⁺, n + 1)] ≤ E[min(τ⁺, n + 2)]`, so the truncations converge to their supremum. -/
theorem drift_machine_return_mono_caps (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (n F F' : Nat) (hF : n + 1 ≤ F) (hF' : n + 2 ≤ F')
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    wsum (fun _ => 1) arrivals
        * wsum (fun p => 1 + timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F))
            (paths arrivals (n + 1))
      ≤ wsum (fun p => 1 + timeTo (· == 0) (n + 1) (fun i => workAt eng (pathSessions W p) W (i + 1) F'))
            (paths arrivals (n + 1 + 1)) := by
  rw [drift_machine_ret_caps eng W bW arrivals hch hcache hB hW hbW hfit (· == 0) n F hF hcap hkv,
    drift_machine_ret_caps eng W bW arrivals hch hcache hB hW hbW hfit (· == 0) (n + 1) F' hF' hcap hkv]
  exact ret_mono (backlog eng.budget W arrivals) (· == 0) n 0

/-- The same across `m` horizons: `den ^ m · R n ≤ R (n + m)` (fuel `F ≥ n + 1`, `F' ≥ n + m + 1`), i.e.
`E[min(τ⁺, n + 1)] ≤ E[min(τ⁺, n + m + 1)]`. -/
theorem drift_machine_return_mono_le_caps (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (n m F F' : Nat) (hF : n + 1 ≤ F) (hF' : n + m + 1 ≤ F')
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    wsum (fun _ => 1) arrivals ^ m
        * wsum (fun p => 1 + timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F))
            (paths arrivals (n + 1))
      ≤ wsum (fun p => 1 + timeTo (· == 0) (n + m) (fun i => workAt eng (pathSessions W p) W (i + 1) F'))
            (paths arrivals (n + m + 1)) := by
  rw [drift_machine_ret_caps eng W bW arrivals hch hcache hB hW hbW hfit (· == 0) n F hF hcap hkv,
    drift_machine_ret_caps eng W bW arrivals hch hcache hB hW hbW hfit (· == 0) (n + m) F' hF' hcap hkv,
    show n + m + 1 = n + 1 + m by omega]
  exact ret_mono_le (backlog eng.budget W arrivals) (· == 0) n 0 m

/-- **The machine's empty engine is positive recurrent, untruncated, with fixed caps** (issue 14,
result 7): under `drift_machine_return_bound_caps`'s hypotheses, with `R n` as in
`drift_machine_return_mono_caps`, `e = den · B − M > 0` and `C = e + Σ p · lyapunov K (k·W − B)`:
the normalised truncations `E[min(τ⁺, n + 1)] = R n / den ^ (n + 1)` are nondecreasing
(`den · R n ≤ R (n + 1)`) and bounded by `C / e` at every horizon (`e · R n ≤ den ^ (n + 1) · C`), so
their limit, their supremum, the expected return time `E[τ⁺]` to an empty engine (monotone
convergence), is finite and at most `1 + Σ p · lyapunov K (k·W − B) / (den · B − M)`. -/
theorem drift_machine_positive_recurrent_caps (eng : Engine) (W bW K : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hM : wsum (fun k => k * W) arrivals < wsum (fun _ => 1) arrivals * eng.budget)
    (hK : wsum (fun _ => 1) arrivals * eng.budget ≤ K * wsum (fun k => if k = 0 then 1 else 0) arrivals)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    (∀ n F F', n + 1 ≤ F → n + 2 ≤ F' →
      wsum (fun _ => 1) arrivals
          * wsum (fun p => 1 + timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F))
              (paths arrivals (n + 1))
        ≤ wsum (fun p => 1 + timeTo (· == 0) (n + 1) (fun i => workAt eng (pathSessions W p) W (i + 1) F'))
              (paths arrivals (n + 1 + 1)))
    ∧ (∀ n F, n + 1 ≤ F →
      (wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
          * wsum (fun p => 1 + timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F))
              (paths arrivals (n + 1))
        ≤ wsum (fun _ => 1) arrivals ^ (n + 1) * ((wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
            + wsum (fun k => lyapunov K (k * W - eng.budget)) arrivals))
    ∧ 0 < wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals :=
  ⟨fun n F F' hF hF' => drift_machine_return_mono_caps eng W bW arrivals hch hcache hB hW hbW hfit n F F' hF hF'
      hcap hkv,
    fun n F hF => drift_machine_return_bound_caps eng W bW K arrivals hch hcache hB hW hbW hfit hM hK n F hF hcap hkv,
    by omega⟩

/-- **The machine returns to an empty engine with probability one, with a rate** (issue 14, result 7;
Markov's inequality on `min(τ⁺, n + 1)`): under `drift_machine_return_bound_caps`'s hypotheses, at every
`n` and fuel `F ≥ n + 1`, the weight of the paths of length `n + 1` on which the machine's work is not 0
at any of the times `1, …, n` (`timeTo (· == 0) n g = n`, `Drift.timeTo_eq_iff`: the event `τ⁺ > n`),
times `(n + 1) · (den · B − M)`, is at most `den ^ (n + 1) · ((den · B − M) + Σ p · lyapunov K (k·W − B))`.
Dividing by `den ^ (n + 1) · (n + 1) · (den · B − M)`: `P(τ⁺ > n) ≤ (1 + Σ p · lyapunov K (k·W − B) /
(den · B − M)) / (n + 1)`, which tends to 0, so `τ⁺` is finite with probability one. -/
theorem drift_machine_return_tail_caps (eng : Engine) (W bW K : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hM : wsum (fun k => k * W) arrivals < wsum (fun _ => 1) arrivals * eng.budget)
    (hK : wsum (fun _ => 1) arrivals * eng.budget ≤ K * wsum (fun k => if k = 0 then 1 else 0) arrivals)
    (n F : Nat) (hF : n + 1 ≤ F)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    (n + 1) * (wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
        * wsum (fun p => if timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F) = n then 1 else 0)
            (paths arrivals (n + 1))
      ≤ wsum (fun _ => 1) arrivals ^ (n + 1) * ((wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
          + wsum (fun k => lyapunov K (k * W - eng.budget)) arrivals) := by
  have hb := drift_machine_return_bound_caps eng W bW K arrivals hch hcache hB hW hbW hfit hM hK n F hF hcap hkv
  have ht := wsum_tail (· == 0) n (fun p i => workAt eng (pathSessions W p) W (i + 1) F) (paths arrivals (n + 1))
  refine Nat.le_trans ?_ hb
  rw [Nat.mul_comm (n + 1), Nat.mul_assoc]
  exact Nat.mul_le_mul_left _ ht

/-- The instance of `DriftPathsCaps`: budget 4, requests of 3 tokens, none, one or two arriving with
weights 2, 1, 1, `K = 8`, 3 slots and 3 blocks: the truncations grow and stay below the bound at every
horizon (`e = 4 · 4 − 9 = 7`). -/
example := drift_machine_positive_recurrent_caps ⟨4, 3, 3, 16, 0, false, false⟩ 3 1 8 [(2, 0), (1, 1), (1, 2)]
  rfl rfl (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide)

/-- The same instance at the horizon 100: `101 · 7 · (weight of τ⁺ > 100) ≤ 4 ^ 101 · (7 + Σ p · V)`,
`P(τ⁺ > 100) ≤ bound / 101`. -/
example := drift_machine_return_tail_caps ⟨4, 3, 3, 16, 0, false, false⟩ 3 1 8 [(2, 0), (1, 1), (1, 2)]
  rfl rfl (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) 100 101 (Nat.le_refl _)
  (by decide) (by decide)

/-- And the monotonicity from the horizon 100 to 101. -/
example := drift_machine_return_mono_caps ⟨4, 3, 3, 16, 0, false, false⟩ 3 1 [(2, 0), (1, 1), (1, 2)]
  rfl rfl (by decide) (by decide) (by decide) (by decide) 99 100 101 (Nat.le_refl _) (Nat.le_refl _)
  (by decide) (by decide)

end Serq
