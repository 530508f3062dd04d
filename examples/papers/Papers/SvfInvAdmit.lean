module

public import Papers.SvfAdmitStep

/-! # SVF (`svf.sq`): the invariant kept by the next admission, for every batch

The machine-level admission step (`svf_step_admit_decode`, `svf_step_admit_pre`) read on the shape (A)
(`Papers.SvfServing`): from (A) at the serving session's last token with sessions `w :: W` waiting, the
event loop's step is (A) again, the answered session appended to `served`, the session `x = svfAt (w :: W) j`
that `select` offers served (its prefill, `k = vol x − 1`), `svfErase (w :: W) j` waiting
(`svf_serving_admit`). What it takes of the order: `served ++ [s] ++ x :: …` is the same permutation of
the serials (`svf_perm_admit`), `x` had a least volume among those waiting (`svfLeastFirst_snoc`), and
the clock is the answered session's completion `Σ vol(served) + vol s` (`sumNat_svfVols_snoc`).
Also the measure the induction (`Papers.SvfRun`) counts down: `k + Σ vol(W)` is one less after every step,
here `Σ vol(w :: W) = vol x + Σ vol(svfErase (w :: W) j)` (`sumNat_svfVols_erase`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-! ### The order's facts -/

theorem svfVol_pos (s : Nat) : 0 < svfVol s := by
  unfold svfVol
  omega

theorem svfVol_le (s : Nat) : svfVol s ≤ 5 := by
  unfold svfVol
  have := Nat.mod_lt (3 * s) (show 5 > 0 by decide)
  omega

theorem sumNat_svfVols_snoc : ∀ (l : List Nat) (s : Nat), sumNat (svfVols (l ++ [s])) = sumNat (svfVols l) + svfVol s
  | [], s => by simp [svfVols, sumNat]
  | x :: l, s => by
    show svfVol x + sumNat (svfVols (l ++ [s])) = svfVol x + sumNat (svfVols l) + svfVol s
    rw [sumNat_svfVols_snoc l s]
    omega

theorem sumNat_svfVols_le : ∀ (l : List Nat), sumNat (svfVols l) ≤ 5 * l.length
  | [] => Nat.le_refl _
  | x :: l => by
    show svfVol x + sumNat (svfVols l) ≤ 5 * (l.length + 1)
    have := sumNat_svfVols_le l
    have := svfVol_le x
    omega

theorem sumNat_svfVols_cons_pos (w : Nat) (W : List Nat) : 0 < sumNat (svfVols (w :: W)) := by
  show 0 < svfVol w + sumNat (svfVols W)
  have := svfVol_pos w
  omega

/-- The waiting sessions' volumes once `svfAt W j` is taken out. -/
theorem sumNat_svfVols_erase (W : List Nat) (j : Nat) (hj : j < W.length) :
    sumNat (svfVols W) = svfVol (svfAt W j) + sumNat (svfVols (svfErase W j)) := by
  have hp := (svfAt_perm W j hj).map svfVol
  rw [svfVols_eq_map, svfVols_eq_map, sumNat_perm hp]
  rfl

theorem svfLeastFirst_mono : ∀ (l R R' : List Nat), SvfLeastFirst l R → (∀ y ∈ R', y ∈ R) → SvfLeastFirst l R'
  | [], _, _, _, _ => trivial
  | x :: l, R, R', h, hs => by
    refine ⟨fun y hy => ?_, svfLeastFirst_mono l R R' h.2 hs⟩
    rcases List.mem_append.1 hy with hy | hy
    · exact h.1 y (List.mem_append_left _ hy)
    · exact h.1 y (List.mem_append_right _ (hs y hy))

/-- A session of least volume among those left, appended to the order, keeps it least first. -/
theorem svfLeastFirst_snoc : ∀ (l : List Nat) (x : Nat) (R : List Nat), SvfLeastFirst l (x :: R) →
    (∀ y ∈ R, svfVol x ≤ svfVol y) → SvfLeastFirst (l ++ [x]) R
  | [], x, R, _, hx => ⟨fun y hy => hx y (by simpa using hy), trivial⟩
  | a :: l, x, R, h, hx => by
    refine ⟨fun y hy => h.1 y ?_, svfLeastFirst_snoc l x R h.2 hx⟩
    rcases List.mem_append.1 hy with hy | hy
    · rcases List.mem_append.1 hy with hy | hy
      · exact List.mem_append_left _ hy
      · simp [List.mem_singleton.1 hy]
    · simp [hy]

/-! ### (A) kept by the admission -/

/-- The machine the admission step reaches is (A) for the admitted session: the answered session `s`
(its thread `D`, answered at `now + 1`) appended to the order, `x = svfAt (w :: W) j` served, its prefill
running from `now + 1`. -/
theorem svf_serving_of_admit (n : Nat) (m : Kernel.Machine) (served : List Nat) (s w : Nat) (W : List Nat)
    (h : SvfServing n m served s 0 (w :: W)) (j : Nat) (hj : j < (w :: W).length)
    (hle : ∀ y ∈ w :: W, svfVol (svfAt (w :: W) j) ≤ svfVol y) (D : Thread) (hD : SvfAnswered D s (m.now + 1))
    (sq q a sv : Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    SvfServing n (svfPreM (m.now + 1) sq q (svfAt (w :: W) j) (a + 1) sv (a + 2) m.arrived
        (setThread (setThread m.threads s D) (svfAt (w :: W) j) (svfPre (svfAt (w :: W) j) (a + 1))) m.stages
        (svfErase (w :: W) j) recs gs)
      (served ++ [s]) (svfAt (w :: W) j) (svfVol (svfAt (w :: W) j) - 1) (svfErase (w :: W) j) := by
  have hnd : (served ++ s :: w :: W).Nodup := h.perm.nodup_iff.2 (List.nodup_range)
  have hpa := List.pairwise_append.1 hnd
  have hww : (w :: W).Nodup := (List.nodup_cons.1 hpa.2.1).2
  obtain ⟨hns, hnw, _⟩ := svf_not_mem n served (w :: W) s h.perm
  have hx := svfAt_mem (w :: W) j hj
  have hperm := svfAt_perm (w :: W) j hj
  have hxe : svfAt (w :: W) j ∉ svfErase (w :: W) j := (List.nodup_cons.1 (hperm.nodup_iff.1 hww)).1
  have hxs : svfAt (w :: W) j ≠ s := fun e => hnw (e ▸ hx)
  have hxserved : ∀ t ∈ served, t ≠ svfAt (w :: W) j := fun t ht =>
    hpa.2.2 t ht (svfAt (w :: W) j) (List.mem_cons_of_mem _ hx)
  have hlen := h.threads_length
  have hclock := h.clock
  have hxl : svfAt (w :: W) j < m.threads.length := by
    rw [hlen]
    exact List.mem_range.1 (h.perm.mem_iff.1 (List.mem_append_right _ (List.mem_cons_of_mem _ hx)))
  have hsl : s < m.threads.length := by
    rw [hlen]
    exact List.mem_range.1 (h.perm.mem_iff.1 (List.mem_append_right _ List.mem_cons_self))
  have hvx := svfVol_pos (svfAt (w :: W) j)
  have hsnoc := sumNat_svfVols_snoc served s
  refine ⟨svf_perm_admit n served (w :: W) s j hj h.perm, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ⟨q, rfl⟩, rfl, rfl,
    h.stages, h.arrived, rfl, rfl, Nat.succ_pos _, rfl⟩
  · apply svfLeastFirst_snoc _ _ _ (svfLeastFirst_mono _ _ _ h.least (fun y hy => hperm.mem_iff.2 hy))
    intro y hy
    exact hle y (hperm.mem_iff.2 (List.mem_cons_of_mem _ hy))
  · show (setThread (setThread m.threads s D) _ _).length = n
    rw [setThread_length, setThread_length, hlen]
  · intro t ht
    have htx : t ≠ svfAt (w :: W) j := by
      rcases List.mem_append.1 ht with ht | ht
      · exact hxserved t ht
      · rw [List.mem_singleton.1 ht]
        exact fun e => hxs e.symm
    show SvfAnswered (getThread (setThread (setThread m.threads s D) _ _) t) t _
    rw [getThread_setThread_ne _ _ _ _ htx]
    by_cases hts : t = s
    · subst hts
      rw [getThread_setThread_self _ _ _ hsl, svfDoneAt_last 0 served t hns]
      have hv : m.now + 1 = 0 + sumNat (svfVols served) + svfVol t := by omega
      rw [← hv]
      exact hD
    · have ht' : t ∈ served := by
        rcases List.mem_append.1 ht with h' | h'
        · exact h'
        · exact absurd (List.mem_singleton.1 h') hts
      rw [getThread_setThread_ne _ _ _ _ hts, svfDoneAt_append_left 0 served [s] t ht']
      exact h.answered t ht'
  · intro y hy
    have hyw : y ∈ w :: W := hperm.mem_iff.2 (List.mem_cons_of_mem _ hy)
    have hyx : y ≠ svfAt (w :: W) j := fun e => hxe (e ▸ hy)
    have hys : y ≠ s := fun e => hnw (e ▸ hyw)
    show getThread (setThread (setThread m.threads s D) _ _) y = _
    rw [getThread_setThread_ne _ _ _ _ hyx, getThread_setThread_ne _ _ _ _ hys]
    exact h.waiting y hyw
  · refine ⟨a + 1, Nat.succ_pos _, ?_, sv, recs, ?_⟩
    · have hl' : svfAt (w :: W) j < (setThread m.threads s D).length := by
        rw [setThread_length]
        exact hxl
      have hk : svfVol (svfAt (w :: W) j) - 1 + 1 = svfVol (svfAt (w :: W) j) := by omega
      show getThread (setThread (setThread m.threads s D) _ _) _ = _
      rw [getThread_setThread_self (setThread m.threads s D) (svfAt (w :: W) j) _ hl',
        svfServingThread_pre (svfAt (w :: W) j) (svfVol (svfAt (w :: W) j) - 1) (a + 1) hk]
    · have hk : svfVol (svfAt (w :: W) j) - 1 + 1 = svfVol (svfAt (w :: W) j) := by omega
      rw [svfRes_pre (svfAt (w :: W) j) (svfVol (svfAt (w :: W) j) - 1) (a + 1) hk]
      rfl
  · omega
  · show m.now + 1 + (svfVol (svfAt (w :: W) j) - 1) + 1 = _
    omega

/-- **(A) is kept by the next admission, for every batch.** From a machine of shape (A) at the serving
session's last token (`k = 0`) with the sessions `w :: W` waiting, the event loop's step is a machine of
shape (A): `s` answered and appended to the order, the session at the index `j` `select` offers served
from its prefill, the others waiting. -/
theorem svf_serving_admit (n f : Nat) (m : Kernel.Machine) (served : List Nat) (s w : Nat) (W : List Nat)
    (h : SvfServing n m served s 0 (w :: W)) :
    ∃ m' j, j < (w :: W).length ∧ loop (svfP n) (f + 12) m = loop (svfP n) (f + 11) m' ∧
      SvfServing n m' (served ++ [s]) (svfAt (w :: W) j) (svfVol (svfAt (w :: W) j) - 1) (svfErase (w :: W) j) := by
  obtain ⟨a, ha⟩ : ∃ a, m.admSeq = a + 1 := ⟨m.admSeq - 1, by have := h.admSeq_pos; omega⟩
  obtain ⟨hns, hnw, _⟩ := svf_not_mem n served (w :: W) s h.perm
  have hwait : ∀ y ∈ w :: W, getThread m.threads y = svfWaiting y 0 ∧ y ≠ s :=
    fun y hy => ⟨h.waiting y hy, fun e => hnw (e ▸ hy)⟩
  have hlen : ∀ y ∈ w :: W, y < m.threads.length := fun y hy => by
    rw [h.threads_length]
    exact List.mem_range.1 (h.perm.mem_iff.1 (List.mem_append_right _ (List.mem_cons_of_mem _ hy)))
  by_cases hv : svfVol s = 1
  · obtain ⟨q, adm, sv, recs, _, hth, hm⟩ := svf_serving_pre_eq n m served s 0 (w :: W) h (by omega)
    have hs : getThread m.threads s = svfPreV s 1 adm := by rw [hth, svfPre_eq, hv]
    rw [ha] at hm
    obtain ⟨j, hj, hle, hloop⟩ := svf_step_admit_pre n f m.now m.seq q s adm sv a m.arrived m.threads m.stages
      w W recs m.progress hs hwait hlen
    rw [← hm] at hloop
    refine ⟨_, j, hj, hloop, svf_serving_of_admit n m served s w W h j hj hle _ ?_ _ _ _ _ _ _⟩
    exact svfDoneV_answered s 1 adm (m.now + 1) _ hv.symm
  · obtain ⟨q, adm, sv, recs, _, hth, hm⟩ := svf_serving_dec_eq n m served s 0 (w :: W) h
      (by have := svfVol_pos s; omega)
    have hs : getThread m.threads s = svfDecV s (svfVol s) adm := by rw [hth, svfDec_eq]
    rw [ha] at hm
    obtain ⟨j, hj, hle, hloop⟩ := svf_step_admit_decode n f m.now m.seq q s (svfVol s) adm sv a m.arrived
      m.threads m.stages w W recs m.progress hs hwait hlen
    rw [← hm] at hloop
    exact ⟨_, j, hj, hloop, svf_serving_of_admit n m served s w W h j hj hle _
      (svfDoneV_answered s (svfVol s) adm (m.now + 1) _ rfl) _ _ _ _ _ _⟩

end Papers
