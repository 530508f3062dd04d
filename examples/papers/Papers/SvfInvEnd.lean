module

public import Papers.SvfInv

/-! # SVF (`svf.sq`): the invariant kept by a prefill's end, and the run's end in shape (B)

The machine-level steps read on the shapes (`Papers.SvfServing`, `Papers.SvfEnded`), for every batch:

* `svf_serving_prefill`: from (A) serving a prefill of a session of volume at least 2, the loop's step is
  (A) serving its decode (the thread list written at the serving session's index only);
* `svf_serving_last_decode`, `svf_serving_last_pre`: from (A) with no session waiting and the serving
  session's last token running (its last decode, or its prefill when its volume is 1), the run ends in
  (B), the session answered at `Σ vol(served) + vol s`, so `svf_queueing_of_ended` gives the claim.

The same step with sessions waiting, where the engine admits the hold `select` offers
(`svf_admits_least_volume`) at a symbolic index of a symbolic queue, is `Papers.SvfInvAdmit`.
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-! ### The thread list at one index -/

theorem setThread_length : ∀ (ts : List Thread) (s : Nat) (x : Thread), (setThread ts s x).length = ts.length
  | [], _, _ => rfl
  | _ :: _, 0, _ => rfl
  | _ :: ts, s + 1, x => by
    show (setThread ts s x).length + 1 = ts.length + 1
    rw [setThread_length ts s x]

theorem getThread_setThread_self : ∀ (ts : List Thread) (s : Nat) (x : Thread), s < ts.length →
    getThread (setThread ts s x) s = x
  | [], _, _, h => absurd h (by simp)
  | _ :: _, 0, _, _ => rfl
  | _ :: ts, s + 1, x, h => getThread_setThread_self ts s x (by simp at h; omega)

theorem getThread_setThread_ne : ∀ (ts : List Thread) (s t : Nat) (x : Thread), t ≠ s →
    getThread (setThread ts s x) t = getThread ts t
  | [], _, _, _, _ => rfl
  | _ :: _, 0, 0, _, h => absurd rfl h
  | _ :: _, 0, _ + 1, _, _ => rfl
  | _ :: _, _ + 1, 0, _, _ => rfl
  | _ :: ts, s + 1, t + 1, x, h => getThread_setThread_ne ts s t x (by omega)

/-! ### The order's facts -/

theorem svf_not_mem (n : Nat) (served W : List Nat) (s : Nat) (h : (served ++ s :: W).Perm (List.range n)) :
    s ∉ served ∧ s ∉ W ∧ s < n := by
  have hnd : (served ++ s :: W).Nodup := h.nodup_iff.2 (by simp [List.nodup_range])
  have hp := List.pairwise_append.1 hnd
  have hc := List.pairwise_cons.1 hp.2.1
  refine ⟨fun hs => hp.2.2 s hs s (by simp) rfl, fun hs => hc.1 s hs rfl, ?_⟩
  exact List.mem_range.1 (h.mem_iff.1 (by simp))

theorem svfDoneAt_append_left : ∀ (acc : Nat) (l r : List Nat) (t : Nat), t ∈ l →
    svfDoneAt acc (l ++ r) t = svfDoneAt acc l t
  | _, [], _, _, h => absurd h (by simp)
  | acc, x :: l, r, t, h => by
    show (if x = t then acc + svfVol x else svfDoneAt (acc + svfVol x) (l ++ r) t) =
      (if x = t then acc + svfVol x else svfDoneAt (acc + svfVol x) l t)
    by_cases hx : x = t
    · simp [hx]
    · have ht : t ∈ l := by
        rcases List.mem_cons.1 h with h | h
        · exact absurd h.symm hx
        · exact h
      simp [hx, svfDoneAt_append_left (acc + svfVol x) l r t ht]

theorem svfDoneAt_last : ∀ (acc : Nat) (l : List Nat) (s : Nat), s ∉ l →
    svfDoneAt acc (l ++ [s]) s = acc + sumNat (svfVols l) + svfVol s
  | acc, [], s, _ => by simp [svfDoneAt, svfVols, sumNat]
  | acc, x :: l, s, h => by
    have hx : x ≠ s := fun e => h (by simp [e])
    have hl : s ∉ l := fun e => h (by simp [e])
    show (if x = s then acc + svfVol x else svfDoneAt (acc + svfVol x) (l ++ [s]) s) =
      acc + (svfVol x + sumNat (svfVols l)) + svfVol s
    rw [if_neg hx, svfDoneAt_last (acc + svfVol x) l s hl]
    omega

/-! ### The prefill's end -/

theorem svfServingThread_pre (s k adm : Nat) (hk : k + 1 = svfVol s) : svfServingThread s k adm = svfPre s adm := by
  unfold svfServingThread
  rw [if_pos hk]

theorem svfRes_pre (s k adm : Nat) (hk : k + 1 = svfVol s) : svfRes s k adm = ⟨s, 4, false, adm, 4, 0⟩ := by
  unfold svfRes
  rw [if_pos hk]

/-- A machine of shape (A) serving a prefill is `svfPreM`, its other fields as they are. -/
theorem svf_serving_pre_eq (n : Nat) (m : Kernel.Machine) (served : List Nat) (s k : Nat) (W : List Nat)
    (h : SvfServing n m served s k W) (hk : k + 1 = svfVol s) :
    ∃ q adm sv recs, 0 < adm ∧ getThread m.threads s = svfPre s adm ∧
      m = svfPreM m.now m.seq q s adm sv m.admSeq m.arrived m.threads m.stages W recs m.progress := by
  obtain ⟨adm, hadm, hth, sv, recs, heng⟩ := h.serving
  obtain ⟨q, htim⟩ := h.timer
  refine ⟨q, adm, sv, recs, hadm, ?_, ?_⟩
  · rw [hth, svfServingThread_pre s k adm hk]
  · have hr := h.ready
    have hp := h.pools
    have ho := h.outOfFuel
    have hf := h.failed
    have hg := h.growers
    rw [svfRes_pre s k adm hk] at heng
    clear h hth
    cases m
    simp only at hr hp ho hf hg heng htim ⊢
    subst hr hp ho hf hg heng htim
    rfl

/-- **(A) is kept by a prefill's end, for every batch.** From a machine of shape (A) serving session `s`'s
prefill, its volume `j + 2`, the event loop's step is a machine of shape (A) serving its decode with `j`
tokens left after the running iteration, the clock one later, the same sessions answered and waiting. -/
theorem svf_serving_prefill (n f : Nat) (m : Kernel.Machine) (served : List Nat) (s j : Nat) (W : List Nat)
    (h : SvfServing n m served s (j + 1) W) (hv : svfVol s = j + 2) :
    ∃ m', loop (svfP n) (f + 4) m = loop (svfP n) (f + 3) m' ∧ SvfServing n m' served s j W := by
  obtain ⟨q, adm, sv, recs, hadm, hth, hm⟩ := svf_serving_pre_eq n m served s (j + 1) W h (by omega)
  obtain ⟨a, rfl⟩ : ∃ a, adm = a + 1 := ⟨adm - 1, by omega⟩
  have hs : getThread m.threads s = svfPreV s (j + 2) (a + 1) := by
    rw [hth, svfPre_eq, hv]
  have hstep := svf_step_prefill n f m.now m.seq q s j a sv m.admSeq m.arrived m.threads m.stages W recs
    m.progress hs
  rw [← hm] at hstep
  refine ⟨_, hstep, ?_⟩
  obtain ⟨hns, hnw, hsn⟩ := svf_not_mem n served W s h.perm
  have hlen := h.threads_length
  have hclock := h.clock
  have hsl : s < m.threads.length := by omega
  refine ⟨h.perm, h.least, ?_, ?_, ?_, ?_, by omega, ?_, ⟨m.seq, rfl⟩, rfl, rfl, h.stages, h.arrived, rfl, rfl,
    h.admSeq_pos, rfl⟩
  · show (setThread m.threads s _).length = n
    rw [setThread_length, hlen]
  · intro t ht
    show SvfAnswered (getThread (setThread m.threads s _) t) t _
    rw [getThread_setThread_ne _ _ _ _ (fun e : t = s => hns (e ▸ ht))]
    exact h.answered t ht
  · intro w hw
    show getThread (setThread m.threads s _) w = _
    rw [getThread_setThread_ne _ _ _ _ (fun e : w = s => hnw (e ▸ hw))]
    exact h.waiting w hw
  · refine ⟨a + 1, hadm, ?_, sv + 1, ⟨m.now + 1, 1, 0, 1, 1, 1, sv, m.arrived, 0, 0, 0⟩ :: recs, ?_⟩
    · show getThread (setThread m.threads s _) s = _
      rw [getThread_setThread_self _ _ _ hsl, svfServingThread_decode s j (a + 1) (by omega), svfDec_eq, hv]
    · rw [svfRes_decode s j (a + 1) (by omega)]
      rfl
  · show m.now + 1 + j + 1 = _
    omega

/-! ### The run's end -/

/-- The thread list and the order once the serving session is answered: (B). -/
theorem svf_ended_of_answer (n : Nat) (m : Kernel.Machine) (served : List Nat) (s : Nat)
    (h : SvfServing n m served s 0 []) (toks : List TurnTokens) (adm : Nat) (m' : Kernel.Machine)
    (hth : m'.threads = setThread m.threads s (svfDoneV s (svfVol s) adm (m.now + 1) toks))
    (htim : m'.timers = []) (ho : m'.outOfFuel = false) (hf : m'.failed = false) :
    SvfEnded n m' (served ++ [s]) := by
  obtain ⟨hns, -, hsn⟩ := svf_not_mem n served [] s h.perm
  have hlen := h.threads_length
  have hclock := h.clock
  have hsl : s < m.threads.length := by omega
  refine ⟨h.perm, h.least, ?_, ?_, htim, ho, hf⟩
  · rw [hth, setThread_length, hlen]
  · intro t ht
    rw [hth]
    by_cases hts : t = s
    · subst hts
      rw [getThread_setThread_self _ _ _ hsl, svfDoneAt_last 0 served t hns]
      have hv : m.now + 1 = 0 + sumNat (svfVols served) + svfVol t := by omega
      rw [← hv]
      exact svfDoneV_answered t (svfVol t) adm (m.now + 1) toks rfl
    · have ht' : t ∈ served := by
        rcases List.mem_append.1 ht with h' | h'
        · exact h'
        · exact absurd (List.mem_singleton.1 h') hts
      rw [getThread_setThread_ne _ _ _ _ hts, svfDoneAt_append_left 0 served [s] t ht']
      exact h.answered t ht'

/-- A machine of shape (A) serving a decode (`k + 1` tokens, one scheduled) is `svfDecM`, its other fields
as they are. -/
theorem svf_serving_dec_eq (n : Nat) (m : Kernel.Machine) (served : List Nat) (s k : Nat) (W : List Nat)
    (h : SvfServing n m served s k W) (hk : k + 1 < svfVol s) :
    ∃ q adm sv recs, 0 < adm ∧ getThread m.threads s = svfDec s adm ∧
      m = svfDecM m.now m.seq q s (k + 1) adm sv m.admSeq m.arrived m.threads m.stages W recs m.progress := by
  obtain ⟨adm, hadm, hth, sv, recs, heng⟩ := h.serving
  obtain ⟨q, htim⟩ := h.timer
  refine ⟨q, adm, sv, recs, hadm, ?_, ?_⟩
  · rw [hth, svfServingThread_decode s k adm hk]
  · have hr := h.ready
    have hp := h.pools
    have ho := h.outOfFuel
    have hf := h.failed
    have hg := h.growers
    rw [svfRes_decode s k adm hk] at heng
    clear h hth
    cases m
    simp only at hr hp ho hf hg heng htim ⊢
    subst hr hp ho hf hg heng htim
    rfl

/-- **The run's end from a last decode, for every batch.** From a machine of shape (A) with no session
waiting and the serving session's last decode running (volume at least 2), the run ends in (B), the
session answered at `Σ vol(served) + vol s`. -/
theorem svf_serving_last_decode (n f : Nat) (m : Kernel.Machine) (served : List Nat) (s : Nat)
    (h : SvfServing n m served s 0 []) (hv : 1 < svfVol s) :
    SvfEnded n (loop (svfP n) (f + 10) m) (served ++ [s]) := by
  obtain ⟨q, adm, sv, recs, _, hth, hm⟩ := svf_serving_dec_eq n m served s 0 [] h (by omega)
  have hs : getThread m.threads s = svfDecV s (svfVol s) adm := by rw [hth, svfDec_eq]
  have hstep := svf_step_last_ended n f m.now m.seq q s (svfVol s) adm sv m.admSeq m.arrived m.threads m.stages
    recs m.progress hs
  rw [← hm] at hstep
  rw [hstep]
  exact svf_ended_of_answer n m served s h _ adm _ rfl rfl rfl rfl

/-- **The run's end from a prefill of volume 1, for every batch.** From a machine of shape (A) with no
session waiting and the serving session's prefill running, its volume 1, the run ends in (B), the session
answered at `Σ vol(served) + 1`. -/
theorem svf_serving_last_pre (n f : Nat) (m : Kernel.Machine) (served : List Nat) (s : Nat)
    (h : SvfServing n m served s 0 []) (hv : svfVol s = 1) :
    SvfEnded n (loop (svfP n) (f + 11) m) (served ++ [s]) := by
  obtain ⟨q, adm, sv, recs, _, hth, hm⟩ := svf_serving_pre_eq n m served s 0 [] h (by omega)
  have hs : getThread m.threads s = svfPreV s 1 adm := by rw [hth, svfPre_eq, hv]
  have hstep := svf_step_pre_one_ended n f m.now m.seq q s adm sv m.admSeq m.arrived m.threads m.stages
    recs m.progress hs
  rw [← hm] at hstep
  rw [hstep]
  refine svf_ended_of_answer n m served s h
    (svfToks s (getProgress (setProgress m.progress s ((getProgress m.progress s).prefillToken m.now (m.now + 1))) s))
    adm _ ?_ rfl rfl rfl
  rw [hv]
  rfl

end Papers
