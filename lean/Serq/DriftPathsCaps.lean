module

public import Serq.DriftPathsHit
public import Serq.DriftMachineCapsTime

/-! # The drift chain's law and return time on the machine with fixed caps (issue 14, result 7)

`Serq.drift_machine_work_at`, `drift_machine_paths`, `drift_machine_law`, `drift_machine_hit`,
`drift_machine_ret` and `drift_machine_return_bound` ask for caps on every path of the horizon
(`pathSum p ≤ reqsCap`, or `t · maxCount ≤ reqsCap`), which grow with the horizon. Here the caps are
fixed, `2 + budget / W ≤ reqsCap` and `(2 + budget / W) · bW ≤ kvBlocks`: on every path the machine's
run is that of the engine with `t · maxCount` more slots and blocks (`DriftMachine.workAt_path_big`, from
`DriftMachine.run_big`), where the old theorems hold. So at EVERY horizon: the machine's work at a time is
the chain's backlog then (`Serq.drift_machine_work_at_caps`), it has the chain's `t`-step law over the
arrival paths (`Serq.drift_machine_paths_caps`, `Serq.drift_machine_law_caps`), its truncated hitting and
return times are the chain's (`Serq.drift_machine_hit_caps`, `Serq.drift_machine_ret_caps`), and its
truncated expected return time to an empty engine is at most the chain's bound
`1 + Σ p · V(k·W − B) / (den · B − M)` (`Serq.drift_machine_return_bound_caps`). The untruncated
expectation, as the supremum of these truncations (they grow with the horizon and share the bound), and
the tail `P(τ⁺ > n) ≤ bound / (n + 1)`: `DriftReturn.lean`. Open: sessions with more than one output
token.
-/

@[expose] public section

namespace Serq

namespace DriftMachine

open Drift

theorem workAt_big (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (n t : Nat) :
    ∀ F, workAt (bigEng eng n bW) ss W t F = workAt eng ss W t F
  | 0 => by simp only [workAt, run_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv]
  | F + 1 => by
    simp only [workAt, run_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv,
      workAt_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv n t F]

/-- On a path's sessions the machine with the fixed caps works as the engine with `n` more slots and
`n · bW` more blocks. -/
theorem workAt_path_big (eng : Engine) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks)
    (n : Nat) (p : List Nat) (t F : Nat) :
    workAt (bigEng eng n bW) (pathSessions W p) W t F = workAt eng (pathSessions W p) W t F :=
  workAt_big eng (pathSessions W p) W bW hch hcache hB hW hbW hfit (pathSessions_oneTurn W p) hcap hkv n t F

/-- Every path of length `n` of positive weight is within the caps of the engine with `n · maxCount`
more slots and blocks. -/
theorem paths_big (eng : Engine) (bW : Nat) (arrivals : List (Nat × Nat)) (n : Nat) :
    ∀ w p, (w, p) ∈ paths arrivals n → 0 < w →
      pathSum p ≤ (bigEng eng (n * maxCount arrivals) bW).reqsCap ∧
        pathSum p * bW ≤ (bigEng eng (n * maxCount arrivals) bW).kvBlocks := fun w p hp hw => by
  have h := paths_sum arrivals n w p hp hw
  exact ⟨Nat.le_trans h (bigEng_req eng _ bW), Nat.le_trans (Nat.mul_le_mul_right bW h) (bigEng_kv eng _ bW)⟩

end DriftMachine

open DriftMachine Drift

/-- **The machine's work at a time is the chain's backlog then, with fixed caps** (issue 14, result 7):
`drift_machine_work_at` under `drift_machine_step_caps`'s hypotheses, for every list of sessions, time
`t` and fuel `F ≥ t`. -/
theorem drift_machine_work_at_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (t F : Nat) (hF : t ≤ F) :
    workAt eng ss W t F = backlogAt W eng.budget (arrivalsAt ss) t := by
  rw [← workAt_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv (sessionCount ss) t F]
  exact drift_machine_work_at (bigEng eng (sessionCount ss) bW) ss W bW hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) hS (bigEng_req eng _ bW) (bigEng_kv eng _ bW) t F hF

/-- **Over the arrival paths, the machine's work at `t` has the chain's `t`-step law, with fixed caps**
(issue 14, result 7): `drift_machine_paths` with the per-path caps replaced by `2 + budget / W ≤ reqsCap`
and `(2 + budget / W) · bW ≤ kvBlocks`, at every horizon `t`. -/
theorem drift_machine_paths_caps (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (t F : Nat) (hF : t ≤ F)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks)
    (f : Nat → Nat) :
    wsum (fun p => f (workAt eng (pathSessions W p) W t F)) (paths arrivals t)
      = wsum f ((backlog eng.budget W arrivals).dist 0 t) := by
  have h := drift_machine_paths (bigEng eng (t * maxCount arrivals) bW) W bW arrivals hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) t F hF (paths_big eng bW arrivals t) f
  simp only [workAt_path_big eng W bW hch hcache hB hW hbW hfit hcap hkv] at h
  exact h

/-- **The same, as `drift_machine_law`** (issue 14, result 7): with the fixed caps no bound on the
counts is needed, every horizon `t`. -/
theorem drift_machine_law_caps (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (t F : Nat) (hF : t ≤ F)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks)
    (f : Nat → Nat) :
    wsum (fun p => f (workAt eng (pathSessions W p) W t F)) (paths arrivals t)
      = wsum f ((backlog eng.budget W arrivals).dist 0 t) :=
  drift_machine_paths_caps eng W bW arrivals hch hcache hB hW hbW hfit t F hF hcap hkv f

/-- **The machine's truncated expected hitting time is the chain's, with fixed caps**:
`drift_machine_hit` at every horizon `n`, fuel `F ≥ n`. -/
theorem drift_machine_hit_caps (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (A : Nat → Bool) (n F : Nat) (hF : n ≤ F)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    wsum (fun p => timeTo A n (fun i => workAt eng (pathSessions W p) W i F)) (paths arrivals n)
      = hit (backlog eng.budget W arrivals) A n 0 := by
  have h := drift_machine_hit (bigEng eng (n * maxCount arrivals) bW) W bW arrivals hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) A n F hF (paths_big eng bW arrivals n)
  simp only [workAt_path_big eng W bW hch hcache hB hW hbW hfit hcap hkv] at h
  exact h

/-- **The machine's truncated expected return time is the chain's, with fixed caps**:
`drift_machine_ret` at every horizon `n + 1`, fuel `F ≥ n + 1`. -/
theorem drift_machine_ret_caps (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (A : Nat → Bool) (n F : Nat) (hF : n + 1 ≤ F)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    wsum (fun p => 1 + timeTo A n (fun i => workAt eng (pathSessions W p) W (i + 1) F)) (paths arrivals (n + 1))
      = ret (backlog eng.budget W arrivals) A (n + 1) 0 := by
  have h := drift_machine_ret (bigEng eng ((n + 1) * maxCount arrivals) bW) W bW arrivals hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) A n F hF (paths_big eng bW arrivals (n + 1))
  simp only [workAt_path_big eng W bW hch hcache hB hW hbW hfit hcap hkv] at h
  exact h

/-- **The machine's empty engine recurs, with fixed caps** (issue 14, result 7): under the hypotheses of
`empty_positive_recurrent` (mean work per iteration below the budget, `den · B ≤ K · p 0`) and the
engine's, with the fixed caps `2 + budget / W ≤ reqsCap`, `(2 + budget / W) · bW ≤ kvBlocks`, at EVERY
horizon `n + 1` and fuel `F ≥ n + 1`, the machine's truncated expected return time to an empty engine is
at most the chain's bound `1 + Σ p · lyapunov K (k·W − B) / (den · B − M)`. -/
theorem drift_machine_return_bound_caps (eng : Engine) (W bW K : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hM : wsum (fun k => k * W) arrivals < wsum (fun _ => 1) arrivals * eng.budget)
    (hK : wsum (fun _ => 1) arrivals * eng.budget ≤ K * wsum (fun k => if k = 0 then 1 else 0) arrivals)
    (n F : Nat) (hF : n + 1 ≤ F)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    (wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
        * wsum (fun p => 1 + timeTo (· == 0) n (fun i => workAt eng (pathSessions W p) W (i + 1) F))
            (paths arrivals (n + 1))
      ≤ wsum (fun _ => 1) arrivals ^ (n + 1) * ((wsum (fun _ => 1) arrivals * eng.budget - wsum (fun k => k * W) arrivals)
          + wsum (fun k => lyapunov K (k * W - eng.budget)) arrivals) := by
  have h := drift_machine_return_bound (bigEng eng ((n + 1) * maxCount arrivals) bW) W bW K arrivals hch hcache
    hB hW hbW (bigEng_fit eng _ bW W hfit) hM hK n F hF (bigEng_req eng _ bW) (bigEng_kv eng _ bW)
  simp only [workAt_path_big eng W bW hch hcache hB hW hbW hfit hcap hkv] at h
  exact h

/-- An instance: budget 4, requests of 3 tokens (one 16-token block each), none, one or two arriving
with weights 2, 1, 1, `K = 8`, and fixed caps `2 + 4 / 3 = 3` slots and 3 blocks, at the horizon 100:
the old caps would need `100 · 2 = 200` slots. -/
example := drift_machine_return_bound_caps ⟨4, 3, 3, 16, 0, false, false⟩ 3 1 8 [(2, 0), (1, 1), (1, 2)]
  rfl rfl (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) 99 100 (Nat.le_refl _)
  (by decide) (by decide)

/-- The machine itself with 3 slots and 3 blocks, evaluated on a path of 4 sessions (two at time 0, two
at time 1), more than the slots: its work at time 2 is the chain's backlog `(0 + 6 − 4) + 6 − 4 = 4`. -/
example : workAt ⟨4, 3, 3, 16, 0, false, false⟩ (pathSessions 3 [2, 2, 0]) 3 2 3 = 4 := by decide +kernel

end Serq
