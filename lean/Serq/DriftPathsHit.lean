module

public import Serq.DriftPathsLaw

/-! # Hitting and return times over the arrival paths, on the chain and on the machine (issue 14, result 7)

`Serq.Drift.hit` and `ret` are the chain's truncated expected hitting and return times, by their
recursion. Here they are the weighted sums over the arrival paths of the times read along each path's
trajectory (`timeTo A n g`: `min(τ, n)`, `τ` the first time `i` with `A (g i)`): for every horizon,
`Σ_{(w, p) ∈ paths n} w · timeTo A n (backlogFrom W B r p) = hit (backlog B W arrivals) A n r`
(`Serq.Drift.paths_hit`) and the same for the return time (`Serq.Drift.paths_ret`). The path chain
appends a count at each step; the first-step decomposition the recursion needs is
`Serq.Drift.paths_first`. On the machine (`Serq.drift_machine_hit`, `Serq.drift_machine_ret`): the
times read on the machine's work at each time (`DriftMachine.workAt`) have the same sums, for every
horizon whose paths the caps hold, so `empty_positive_recurrent`'s bound on the expected return time to
the empty backlog bounds the machine's truncated expected return time to an empty engine at every such
horizon (`Serq.drift_machine_return_bound`).
-/

@[expose] public section

namespace Serq.Drift

/-- The backlog from `r` driven by the path `p`, at each time (no arrival past the path's end). -/
def backlogFrom (W B : Nat) : Nat → List Nat → Nat → Nat
  | r, _, 0 => r
  | r, [], i + 1 => backlogFrom W B (r - B) [] i
  | r, k :: q, i + 1 => backlogFrom W B (r + k * W - B) q i

/-- `min(τ, n)`, `τ` the first time `i` at which `A (g i)`. -/
def timeTo (A : Nat → Bool) : Nat → (Nat → Nat) → Nat
  | 0, _ => 0
  | n + 1, g => if A (g 0) then 0 else 1 + timeTo A n (fun i => g (i + 1))

theorem backlogFrom_succ (W B : Nat) : ∀ (i r : Nat) (p : List Nat),
    backlogFrom W B r p (i + 1) = backlogFrom W B r p i + pathAt p i * W - B
  | 0, r, [] => by simp [backlogFrom, pathAt]
  | 0, _, _ :: _ => rfl
  | i + 1, r, [] => by
    show backlogFrom W B (r - B) [] (i + 1) = backlogFrom W B (r - B) [] i + pathAt [] (i + 1) * W - B
    rw [backlogFrom_succ W B i (r - B) []]
    rfl
  | i + 1, r, k :: q => backlogFrom_succ W B i (r + k * W - B) q

/-- The time-indexed backlog driven by a path is the backlog from 0 along it. -/
theorem backlogAt_eq_from (W B : Nat) (p : List Nat) : ∀ i,
    DriftMachine.backlogAt W B (pathAt p) i = backlogFrom W B 0 p i
  | 0 => rfl
  | i + 1 => by
    show DriftMachine.backlogAt W B (pathAt p) i + pathAt p i * W - B = _
    rw [backlogAt_eq_from W B p i, backlogFrom_succ]

theorem timeTo_congr (A : Nat → Bool) : ∀ (n : Nat) (g h : Nat → Nat), (∀ i, i < n → g i = h i) →
    timeTo A n g = timeTo A n h
  | 0, _, _, _ => rfl
  | n + 1, g, h, e => by
    simp only [timeTo]
    rw [e 0 (by omega), timeTo_congr A n (fun i => g (i + 1)) (fun i => h (i + 1)) (fun i hi => e (i + 1) (by omega))]

theorem timeTo_cons (W B : Nat) (A : Nat → Bool) (n r k : Nat) (q : List Nat) :
    timeTo A (n + 1) (backlogFrom W B r (k :: q))
      = if A r then 0 else 1 + timeTo A n (backlogFrom W B (r + k * W - B) q) := rfl

/-- **The first-step decomposition of the paths**: a path of length `n + 1` is a first count and a
path of length `n`. -/
theorem paths_first (arrivals : List (Nat × Nat)) : ∀ (n : Nat) (g : List Nat → Nat),
    wsum g (paths arrivals (n + 1)) = wsum (fun k => wsum (fun q => g (k :: q)) (paths arrivals n)) arrivals
  | 0, g => by
    rw [paths_succ]
    simp [paths, Chain.dist, wsum, snoc]
  | n + 1, g => by
    rw [paths_succ, paths_first arrivals n (fun q => wsum (fun j => g (snoc q j)) arrivals)]
    exact wsum_ext (fun k => (paths_succ arrivals n (fun q => g (k :: q))).symm) arrivals

/-- **The truncated expected hitting time over the paths**: for every horizon `n`, start `r` and set
`A`, the weighted sum over the paths of length `n` of `min(τ, n)` along the path's backlog from `r` is
the chain's `hit` (both in the scale `den ^ n`). -/
theorem paths_hit (B W : Nat) (arrivals : List (Nat × Nat)) (A : Nat → Bool) : ∀ (n r : Nat),
    wsum (fun p => timeTo A n (backlogFrom W B r p)) (paths arrivals n) = hit (backlog B W arrivals) A n r
  | 0, r => by simp [timeTo, hit, wsum, paths, Chain.dist]
  | n + 1, r => by
    rw [paths_first]
    by_cases hA : A r = true
    · have hh : hit (backlog B W arrivals) A (n + 1) r = 0 := by simp [hit, hA]
      rw [hh]
      have e0 : ∀ k, wsum (fun q => timeTo A (n + 1) (backlogFrom W B r (k :: q))) (paths arrivals n) = 0 := by
        intro k
        rw [wsum_ext (g := fun _ => 0) (fun q => by rw [timeTo_cons, if_pos hA]), wsum_const, Nat.zero_mul]
      rw [wsum_ext e0, wsum_const, Nat.zero_mul]
    · have e1 : ∀ k, wsum (fun q => timeTo A (n + 1) (backlogFrom W B r (k :: q))) (paths arrivals n)
          = wsum (fun _ => 1) arrivals ^ n + hit (backlog B W arrivals) A n (r + k * W - B) := by
        intro k
        rw [← paths_total arrivals n, ← paths_hit B W arrivals A n (r + k * W - B), ← wsum_add]
        apply wsum_ext
        intro q
        rw [timeTo_cons, if_neg hA]
      rw [hit, if_neg hA]
      show _ = wsum (fun _ => 1) arrivals ^ (n + 1) + wsum (hit (backlog B W arrivals) A n) (nextBacklog B W r arrivals)
      rw [wsum_nextBacklog, wsum_ext e1, wsum_add, wsum_const, Nat.pow_succ]

/-- **The truncated expected return time over the paths**: `τ⁺ ≥ 1` the first time from 1 the path's
backlog from `r` is in `A`; the weighted sum over the paths of length `n + 1` of `min(τ⁺, n + 1)` is the
chain's `ret`. -/
theorem paths_ret (B W : Nat) (arrivals : List (Nat × Nat)) (A : Nat → Bool) (n r : Nat) :
    wsum (fun p => 1 + timeTo A n (fun i => backlogFrom W B r p (i + 1))) (paths arrivals (n + 1))
      = ret (backlog B W arrivals) A (n + 1) r := by
  rw [paths_first]
  have e1 : ∀ k, wsum (fun q => 1 + timeTo A n (fun i => backlogFrom W B r (k :: q) (i + 1))) (paths arrivals n)
      = wsum (fun _ => 1) arrivals ^ n + hit (backlog B W arrivals) A n (r + k * W - B) := by
    intro k
    rw [← paths_total arrivals n, ← paths_hit B W arrivals A n (r + k * W - B), ← wsum_add]
    all_goals exact wsum_ext (fun _ => rfl) _
  rw [ret]
  show _ = wsum (fun _ => 1) arrivals ^ (n + 1) + wsum (hit (backlog B W arrivals) A n) (nextBacklog B W r arrivals)
  rw [wsum_nextBacklog, wsum_ext e1, wsum_add, wsum_const, Nat.pow_succ]

end Serq.Drift

namespace Serq

open DriftMachine Drift

/-- The machine's work along a path of positive weight, at every time up to the horizon, is the
backlog from 0 along the path. -/
theorem drift_machine_along (eng : Engine) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (p : List Nat) (hc1 : pathSum p ≤ eng.reqsCap) (hc2 : pathSum p * bW ≤ eng.kvBlocks)
    (i F : Nat) (hF : i ≤ F) :
    workAt eng (pathSessions W p) W i F = backlogFrom W eng.budget 0 p i := by
  have hc := sessionCount_pathSessions W p
  rw [drift_machine_work_at eng (pathSessions W p) W bW hch hcache hB hW hbW hfit
    (pathSessions_oneTurn W p) (by rw [hc]; exact hc1) (by rw [hc]; exact hc2) i F hF,
    ← backlogAt_eq_from]
  exact congrArg (fun a => backlogAt W eng.budget a i) (funext (arrivalsAt_pathSessions W p))

/-- **The machine's truncated expected hitting time is the chain's** (issue 14, result 7): under the
engine hypotheses of `drift_machine_paths`, for every horizon `n`, fuel `F ≥ n` and set `A`, if every
path of length `n` of positive weight is within the caps, the weighted sum over the paths of
`min(τ, n)`, `τ` the first time the machine's work on the path's sessions is in `A`, is
`hit (backlog budget W arrivals) A n 0`. -/
theorem drift_machine_hit (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (A : Nat → Bool) (n F : Nat) (hF : n ≤ F)
    (hcaps : ∀ w p, (w, p) ∈ paths arrivals n → 0 < w → pathSum p ≤ eng.reqsCap ∧ pathSum p * bW ≤ eng.kvBlocks) :
    wsum (fun p => timeTo A n (fun i => workAt eng (pathSessions W p) W i F)) (paths arrivals n)
      = hit (backlog eng.budget W arrivals) A n 0 := by
  rw [← paths_hit eng.budget W arrivals A n 0]
  apply wsum_congr_mem
  intro w p hp hw
  obtain ⟨c1, c2⟩ := hcaps w p hp hw
  exact timeTo_congr A n _ _ (fun i hi =>
    drift_machine_along eng W bW hch hcache hB hW hbW hfit p c1 c2 i F (by omega))

/-- **The machine's truncated expected return time is the chain's**: the same for `min(τ⁺, n + 1)`,
`τ⁺ ≥ 1` the first time from 1 the machine's work is in `A`, over the paths of length `n + 1` within
the caps, fuel `F ≥ n + 1`: it is `ret (backlog budget W arrivals) A (n + 1) 0`. -/
theorem drift_machine_ret (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (A : Nat → Bool) (n F : Nat) (hF : n + 1 ≤ F)
    (hcaps : ∀ w p, (w, p) ∈ paths arrivals (n + 1) → 0 < w →
      pathSum p ≤ eng.reqsCap ∧ pathSum p * bW ≤ eng.kvBlocks) :
    wsum (fun p => 1 + timeTo A n (fun i => workAt eng (pathSessions W p) W (i + 1) F)) (paths arrivals (n + 1))
      = ret (backlog eng.budget W arrivals) A (n + 1) 0 := by
  rw [← paths_ret eng.budget W arrivals A n 0]
  apply wsum_congr_mem
  intro w p hp hw
  obtain ⟨c1, c2⟩ := hcaps w p hp hw
  rw [timeTo_congr A n _ (fun i => backlogFrom W eng.budget 0 p (i + 1)) (fun i hi =>
    drift_machine_along eng W bW hch hcache hB hW hbW hfit p c1 c2 (i + 1) F (by omega))]

/-- **The machine's empty engine recurs, within the caps** (issue 14, result 7): under the hypotheses
of `empty_positive_recurrent` (mean work per iteration below the budget, `den · B ≤ K · p 0`) and the
engine's, at every horizon `n + 1` with `(n + 1) · maxCount ≤ reqsCap` and
`(n + 1) · maxCount · bW ≤ kvBlocks` and fuel `F ≥ n + 1`, the machine's truncated expected return time
to an empty engine (work 0; `den ^ (n + 1)` times `E min(τ⁺, n + 1)` over the arrival paths) is at most
the chain's bound `1 + Σ p · lyapunov K (k·W − B) / (den · B − M)`. -/
theorem drift_machine_return_bound (eng : Engine) (W bW K : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hM : wsum (fun k => k * W) arrivals < wsum (fun _ => 1) arrivals * eng.budget)
    (hK : wsum (fun _ => 1) arrivals * eng.budget ≤ K * wsum (fun k => if k = 0 then 1 else 0) arrivals)
    (n F : Nat) (hF : n + 1 ≤ F)
    (hreq : (n + 1) * maxCount arrivals ≤ eng.reqsCap)
    (hkv : (n + 1) * maxCount arrivals * bW ≤ eng.kvBlocks) :
    (wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
        * wsum (fun p => 1 + timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F))
            (paths arrivals (n + 1))
      ≤ wsum (fun _ => 1) arrivals ^ (n + 1) * ((wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
          + wsum (fun k => lyapunov K (k * W - eng.budget)) arrivals) := by
  rw [drift_machine_ret eng W bW arrivals hch hcache hB hW hbW hfit (· == 0) n F hF (fun w p hp hw => by
    have h := paths_sum arrivals (n + 1) w p hp hw
    exact ⟨Nat.le_trans h hreq, Nat.le_trans (Nat.mul_le_mul_right bW h) hkv⟩)]
  exact (empty_positive_recurrent eng.budget W K arrivals hM hK n).2.1


/-- An instance: budget 4, requests of 3 tokens, none, one or two arriving with weights 2, 1, 1
(mean work 9/4 < 4), `K = 8`; at the horizon 2 a request cap of 8 and 64 blocks hold every path. -/
example := drift_machine_return_bound ⟨4, 8, 64, 16, 0, false, false⟩ 3 1 8 [(2, 0), (1, 1), (1, 2)]
  rfl rfl (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) 1 2 (Nat.le_refl _)
  (by decide) (by decide)

end Serq
