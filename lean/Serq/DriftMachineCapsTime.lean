module

public import Serq.DriftMachineCaps
public import Serq.DriftMachineClock

/-! # The drift chain on the machine with fixed caps, indexed by time (issue 14, result 7)

`Serq.drift_machine_due`, `Serq.drift_machine_time` and `Serq.drift_machine_time_every` with the caps
`sessionCount ss ≤ reqsCap`, `sessionCount ss · bW ≤ kvBlocks` replaced by the fixed caps
`2 + budget / W ≤ reqsCap`, `(2 + budget / W) · bW ≤ kvBlocks`: the run with the fixed caps is the run of
the engine with `sessionCount ss` more slots and blocks (`DriftMachine.run_big`, `step_big`,
`Serq.DriftMachineCaps`), on which the old theorems hold. So at every machine of every run, whatever the
number of sessions, the turns due are the sessions arriving at its clock
(`Serq.drift_machine_due_caps`), its work is the time-indexed chain's backlog at its clock
(`Serq.drift_machine_time_caps`), and every time up to the clock is a machine's clock or an empty
stretch (`Serq.drift_machine_time_every_caps`). Open: sessions with more than one output token.
-/

@[expose] public section

namespace Serq

open DriftMachine in
/-- **The turns due at a step are the sessions arriving at its time, with fixed caps**:
`drift_machine_due` under `drift_machine_step_caps`'s hypotheses. -/
theorem drift_machine_due_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    (duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1
      = (firstTurns 0 ss).filter (fun p => decide (p.time = (run eng ss fuel (init ss)).now)) := by
  have h := drift_machine_due (bigEng eng (sessionCount ss) bW) ss W bW hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) hS (bigEng_req eng _ bW) (bigEng_kv eng _ bW) fuel
  rw [run_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv] at h
  exact h

open DriftMachine in
/-- **The machine's work, read at its clock, is the time-indexed drift chain's backlog, with fixed
caps** (issue 14, result 7): `drift_machine_time` under `drift_machine_step_caps`'s hypotheses, for every
list of sessions (no cap grows with them). -/
theorem drift_machine_time_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    work W (run eng ss fuel (init ss))
        = backlogAt W eng.budget (arrivalsAt ss) (run eng ss fuel (init ss)).now ∧
      ((step eng ss (run eng ss fuel (init ss))).now = (run eng ss fuel (init ss)).now + 1 ∨
        (work W (run eng ss fuel (init ss)) = 0 ∧ arrivalsAt ss (run eng ss fuel (init ss)).now = 0 ∧
          (run eng ss fuel (init ss)).now ≤ (step eng ss (run eng ss fuel (init ss))).now ∧
          ∀ s, (run eng ss fuel (init ss)).now ≤ s → s < (step eng ss (run eng ss fuel (init ss))).now →
            arrivalsAt ss s = 0 ∧ backlogAt W eng.budget (arrivalsAt ss) s = 0)) := by
  have h := drift_machine_time (bigEng eng (sessionCount ss) bW) ss W bW hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) hS (bigEng_req eng _ bW) (bigEng_kv eng _ bW) fuel
  rw [run_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv,
    step_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv] at h
  exact h

open DriftMachine in
/-- **Every time up to the clock, with fixed caps**: `drift_machine_time_every` under
`drift_machine_step_caps`'s hypotheses. -/
theorem drift_machine_time_every_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    ∀ (fuel t : Nat), t ≤ (run eng ss fuel (init ss)).now →
      (∃ f, f ≤ fuel ∧ (run eng ss f (init ss)).now = t ∧
          work W (run eng ss f (init ss)) = backlogAt W eng.budget (arrivalsAt ss) t) ∨
        (arrivalsAt ss t = 0 ∧ backlogAt W eng.budget (arrivalsAt ss) t = 0) := by
  intro fuel t ht
  have h := drift_machine_time_every (bigEng eng (sessionCount ss) bW) ss W bW hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) hS (bigEng_req eng _ bW) (bigEng_kv eng _ bW) fuel t
    (by rw [run_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv]; exact ht)
  simp only [run_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv] at h
  exact h

end Serq
