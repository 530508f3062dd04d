module

public import Papers.SvfStepAnswer

/-! # SVF (`svf.sq`): the invariant kept by a decode step, for every batch

The machine-level steps (`svf_step_decode`, …) read on the shape (A) (`Papers.SvfServing`): a machine of
shape (A) serving a decode with tokens left after the running iteration is, field by field, `svfDecM`
(`svf_serving_decode_eq`), and the event loop's step from it is a machine of shape (A) again, the same
session served with one token less, the same sessions answered and waiting (`svf_serving_decode`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

theorem svfRes_decode (s k adm : Nat) (hk : k + 1 < svfVol s) : svfRes s k adm = ⟨s, k + 1, true, adm, 1, 0⟩ := by
  unfold svfRes
  rw [if_neg (by omega)]

theorem svfServingThread_decode (s k adm : Nat) (hk : k + 1 < svfVol s) : svfServingThread s k adm = svfDec s adm := by
  unfold svfServingThread
  rw [if_neg (by omega)]

/-- A machine of shape (A) serving a decode of `k + 2` tokens is `svfDecM`, its other fields as they are. -/
theorem svf_serving_decode_eq (n : Nat) (m : Kernel.Machine) (served : List Nat) (s k : Nat) (W : List Nat)
    (h : SvfServing n m served s (k + 1) W) (hk : k + 2 < svfVol s) :
    ∃ q adm sv recs, 0 < adm ∧ getThread m.threads s = svfDec s adm ∧
      m = svfDecM m.now m.seq q s (k + 2) adm sv m.admSeq m.arrived m.threads m.stages W recs m.progress := by
  obtain ⟨adm, hadm, hth, sv, recs, heng⟩ := h.serving
  obtain ⟨q, htim⟩ := h.timer
  refine ⟨q, adm, sv, recs, hadm, ?_, ?_⟩
  · rw [hth, svfServingThread_decode s (k + 1) adm (by omega)]
  · have hr := h.ready
    have hp := h.pools
    have ho := h.outOfFuel
    have hf := h.failed
    have hg := h.growers
    rw [svfRes_decode s (k + 1) adm (by omega)] at heng
    clear h hth
    cases m
    simp only at hr hp ho hf hg heng htim ⊢
    subst hr hp ho hf hg heng htim
    rfl

/-- **(A) is kept by a decode step, for every batch.** From a machine of shape (A) serving session `s`'s
decode with `k + 1` tokens left after the running iteration, the event loop's step is a machine of shape
(A) serving the same session with `k` tokens left, the clock one later, the same sessions answered and
waiting. -/
theorem svf_serving_decode (n f : Nat) (m : Kernel.Machine) (served : List Nat) (s k : Nat) (W : List Nat)
    (h : SvfServing n m served s (k + 1) W) (hk : k + 2 < svfVol s) :
    ∃ m', loop (svfP n) (f + 3) m = loop (svfP n) (f + 2) m' ∧ SvfServing n m' served s k W := by
  obtain ⟨q, adm, sv, recs, hadm, hth, hm⟩ := svf_serving_decode_eq n m served s k W h hk
  have hstep := svf_step_decode n f m.now m.seq q s k adm sv m.admSeq m.arrived m.threads m.stages W recs m.progress
  rw [← hm] at hstep
  refine ⟨_, hstep, ?_⟩
  have hclock := h.clock
  refine ⟨h.perm, h.least, h.threads_length, h.answered, h.waiting, ?_, by omega, ?_, ⟨m.seq, rfl⟩, rfl, rfl,
    h.stages, h.arrived, rfl, rfl, h.admSeq_pos, rfl⟩
  · refine ⟨adm, hadm, ?_, sv + 1, ⟨m.now + 1, 1, 0, 1, 1, 1, sv, m.arrived, 0, 0, 0⟩ :: recs, ?_⟩
    · show getThread m.threads s = _
      rw [hth, svfServingThread_decode s k adm (by omega)]
    · rw [svfRes_decode s k adm (by omega)]
      rfl
  · show m.now + 1 + k + 1 = _
    omega

end Papers
