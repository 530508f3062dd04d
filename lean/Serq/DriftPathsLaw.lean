module

public import Serq.DriftPathsMachine

/-! # The machine's work at a horizon has the drift chain's law (issue 14, result 7)

Under `drift_machine_step`'s hypotheses the machine's work at time `t` (`DriftMachine.workAt`) is the
chain's backlog at `t` for every fuel `F ≥ t` (`Serq.drift_machine_work_at`), and over the arrival
paths of length `t` with their weights, on each path's sessions (`DriftMachine.pathSessions`), it has
the chain's `t`-step law from backlog 0 (`Serq.drift_machine_paths`, with the caps stated per path;
`Serq.drift_machine_law`, with the caps `t · maxCount ≤ reqsCap`, `t · maxCount · bW ≤ kvBlocks`).
The pieces are in `Serq.DriftPathsMachine`, the pure law in `Serq.DriftPaths` (`Drift.paths_backlog`).
-/

@[expose] public section

namespace Serq

open DriftMachine in
/-- **The machine's work at a time is the chain's backlog then** (issue 14, result 7): under
`drift_machine_step`'s hypotheses, for every time `t` and every fuel `F ≥ t`, the machine's work at
`t` (`workAt`: the work of the last machine of the run within `F` steps whose clock is `t`, 0 if the
run has none) is `backlogAt W budget (arrivalsAt ss) t`. -/
theorem drift_machine_work_at (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (t F : Nat) (hF : t ≤ F) :
    workAt eng ss W t F = backlogAt W eng.budget (arrivalsAt ss) t := by
  rcases workAt_spec eng ss W t F with ⟨f, _, h1, h2⟩ | ⟨h1, h2⟩
  · rw [h2, (drift_machine_time eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv f).1, h1]
  · rw [h1]
    by_cases hle : t ≤ (run eng ss F (init ss)).now
    · rcases drift_machine_time_every eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv F t hle with
        ⟨f, hf, hn, _⟩ | ⟨_, hb⟩
      · exact absurd hn (h2 f hf)
      · exact hb.symm
    · rcases run_advance eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv F (init ss)
          (init_inv eng.blockSize W bW ss hS) (firstTurns_sorted 0 ss) (fun _ _ => Nat.zero_le _) with ha | ha
      · have h0 : (init ss).now = 0 := rfl
        omega
      · exact (settled_backlog eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv F ha t (by omega)).symm

open DriftMachine in
/-- **Over the arrival paths, the machine's work at `t` has the chain's `t`-step law** (issue 14,
result 7): for an engine with `chunk = 0`, `caching = false`, `0 < budget`, requests of `W > 0`
tokens whose blocks fit `bW` and the pool, every horizon `t`, fuel `F ≥ t` and `f : Nat → Nat`, if
every arrival path of length `t` with positive weight is within the caps (its sessions, `pathSum p`,
at most `reqsCap`, and `bW` blocks each within the pool), the weighted sum over the paths of `f` of
the machine's work at `t` on the path's sessions equals the weighted sum of `f` over the chain's
`t`-step law from backlog 0. -/
theorem drift_machine_paths (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (t F : Nat) (hF : t ≤ F)
    (hcaps : ∀ w p, (w, p) ∈ Drift.paths arrivals t → 0 < w →
      Drift.pathSum p ≤ eng.reqsCap ∧ Drift.pathSum p * bW ≤ eng.kvBlocks)
    (f : Nat → Nat) :
    Drift.wsum (fun p => f (workAt eng (pathSessions W p) W t F)) (Drift.paths arrivals t)
      = Drift.wsum f ((Drift.backlog eng.budget W arrivals).dist 0 t) := by
  rw [← Drift.paths_backlog eng.budget W arrivals t f]
  apply Drift.wsum_congr_mem
  intro w p hp hw
  obtain ⟨c1, c2⟩ := hcaps w p hp hw
  have hc := sessionCount_pathSessions W p
  rw [drift_machine_work_at eng (pathSessions W p) W bW hch hcache hB hW hbW hfit
    (pathSessions_oneTurn W p) (by rw [hc]; exact c1) (by rw [hc]; exact c2) t F hF]
  exact congrArg (fun a => f (backlogAt W eng.budget a t)) (funext (arrivalsAt_pathSessions W p))

open DriftMachine in
/-- **The same with the caps from the support**: if `t · maxCount ≤ reqsCap` and
`t · maxCount · bW ≤ kvBlocks` (`maxCount` the largest count of positive weight), every path of length
`t` is within the caps, and the machine's work at `t` has the chain's `t`-step law. -/
theorem drift_machine_law (eng : Engine) (W bW : Nat) (arrivals : List (Nat × Nat))
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (t F : Nat) (hF : t ≤ F)
    (hreq : t * Drift.maxCount arrivals ≤ eng.reqsCap)
    (hkv : t * Drift.maxCount arrivals * bW ≤ eng.kvBlocks) (f : Nat → Nat) :
    Drift.wsum (fun p => f (workAt eng (pathSessions W p) W t F)) (Drift.paths arrivals t)
      = Drift.wsum f ((Drift.backlog eng.budget W arrivals).dist 0 t) :=
  drift_machine_paths eng W bW arrivals hch hcache hB hW hbW hfit t F hF (fun w p hp hw => by
    have h := Drift.paths_sum arrivals t w p hp hw
    exact ⟨Nat.le_trans h hreq, Nat.le_trans (Nat.mul_le_mul_right bW h) hkv⟩) f


open DriftMachine in
/-- An instance: budget 4, requests of 3 tokens (one 16-token block each), none, one or two arriving
with weights 2, 1, 1; over a horizon of 2 (fuel 2) a request cap of 8 and 64 blocks hold every path. -/
example (f : Nat → Nat) :
    Drift.wsum (fun p => f (workAt ⟨4, 8, 64, 16, 0, false, false⟩ (pathSessions 3 p) 3 2 2))
        (Drift.paths [(2, 0), (1, 1), (1, 2)] 2)
      = Drift.wsum f ((Drift.backlog 4 3 [(2, 0), (1, 1), (1, 2)]).dist 0 2) :=
  drift_machine_law ⟨4, 8, 64, 16, 0, false, false⟩ 3 1 [(2, 0), (1, 1), (1, 2)] rfl rfl (by decide) (by decide)
    (by decide) (by decide) 2 2 (Nat.le_refl _) (by decide) (by decide) f

open DriftMachine in
/-- The machine itself, evaluated: on the path `[1, 2, 0]` (one request at time 0, two at time 1) its
work at time 2 is the chain's backlog `0 + 2 · 3 − 4 = 2`. -/
example : workAt ⟨4, 8, 64, 16, 0, false, false⟩ (pathSessions 3 [1, 2, 0]) 3 2 3 = 2 := by decide +kernel

end Serq
