module

public import Serq.BacklogPhasedInv

/-! # The phased backlog's steps with an arrival due (groundwork of `Serq.BacklogPhased`)

`step_arrive`: the step at which an arrival is due keeps `BacklogPhased.Inv`. With decodes resident it
is a decode iteration: they take a token each, the waiting prefills are passed over, and the arrival is
admitted without a token (the last of at most `J` waiting prefills); with none, a prefill iteration:
the waiting prefills and the arrival take their whole prompts (at most `J` of them).
-/

@[expose] public section

namespace Serq

namespace BacklogPhased

open Backlog BacklogDecode BacklogMany BacklogChunk

/-- The step at which an arrival is due: a decode or a prefill iteration, and the invariant after it. -/
theorem step_arrive (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) (m : Machine)
    (hinv : Inv eng g P D J ss m) (d : Nat) (Ds Ps : List Res) (z : Nat) (hr : m.running = Ds ++ Ps)
    (hd : d + 1 ≤ D) (hDs : ∀ r ∈ Ds, Decoding eng.blockSize P D r ∧ r.remaining = d) (hJ : resCount Ds ≤ J)
    (hch : Chain (fun _ r => Fresh eng.blockSize P D r) g m.now (m.now + d + 1 - D) Ps z)
    (hz : ∀ q ∈ m.pending, z ≤ q.time) (p : Pending)
    (ps : List Pending) (hp : m.pending = p :: ps) (hnow : p.time = m.now) : Inv eng g P D J ss (step eng ss m) := by
  have ⟨_, _, hP, hD1, hg, hwin, hbud, hbud', hcapJ, hfits, _⟩ := hy
  have ⟨hwait, _, hsp, hcons, hrec, hcsid, hrsid, hsids⟩ := hinv
  obtain ⟨hPW, hnext, hDok, hPsF, hPs', hkvk, hJ1, hcount0, hsidD, hsidP⟩ :=
    facts eng g P D J ss hy m d Ds Ps z hrsid hr hd hDs hch
  have hcc := capChunk_if eng P hy.chunk
  have hpin : p ∈ m.pending := by rw [hp]; exact List.mem_cons_self
  rw [hp] at hsp hsids
  obtain ⟨hle, hprompt, hturn, hsid, hrest⟩ := hsp
  have hdue : duePending m.now m.pending = ([p], ps) := by
    rw [hp]
    have := duePending_none m.now ps (fun q hq => by have := spaced_le hrest q hq; omega)
    simp [duePending, this, hnow]
  have hsub : submit eng ss [p] m.waiting = [newReq eng ss p] := by
    rw [hwait]
    have : ¬ blocksFor eng.blockSize p.prompt > eng.kvBlocks := by
      rw [hprompt]; have := hkvk 1 (by omega); omega
    simp [submit, this, appendReq]
  have hcf : countFirst [p] = 1 := by simp [countFirst, hturn]
  have hout : (newReq eng ss p).out - 1 = D - 1 :=
    newReq_out eng ss D hy.turns p (sessionAt_lt ss p.sid (hsids p List.mem_cons_self)) hturn
  have hzp : z ≤ m.now := by have := hz p hpin; omega
  have hsp' : Spaced g P (m.now + 1) ps := spaced_mono (by omega) hrest
  have hzps : ∀ q ∈ ps, m.now + g ≤ q.time := fun q hq => by have := spaced_le hrest q hq; omega
  have hsids' : ∀ q ∈ ps, q.sid < sessionCount ss := fun q hq => hsids q (List.mem_cons_of_mem _ hq)
  have hps : ∀ q ∈ ps, q ∈ m.pending := fun q hq => by rw [hp]; exact List.mem_cons_of_mem _ hq
  have hcount1 : resCount Ps + 1 ≤ J :=
    count_window (x := m.now + d + 1 - D) (z := m.now + g) hwin
      (by have := chain_len hch; rw [Nat.succ_mul]; omega) (by omega)
  have hkept : (newReq eng ss p).kept = P := by simp [newReq, hprompt]
  have hcomp : (newReq eng ss p).computed = 0 := by simp [newReq]
  have hown : ∀ e ∈ m.cache, e.sid ≠ (newReq eng ss p).sid := fun e he => by
    have := hcsid e he p hpin; simp only [newReq]; omega
  have hxsid0 : (newReq eng ss p).sid = p.sid := rfl
  have hxprompt0 : (newReq eng ss p).prompt = P := by simp [newReq, hprompt]
  have hcacheQ : ∀ e ∈ m.cache, ∀ q ∈ ps, e.sid < q.sid := fun e he q hq => hcsid e he q (hps q hq)
  by_cases hne : Ds = []
  · -- a prefill iteration: the waiting prefills and the arrival take their whole prompts
    subst hne
    have hr' : m.running = Ps := by simpa using hr
    obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxknown, hxprompt, hxc⟩ :=
      plan_pre_arrive eng
        (if eng.chunk > 0 ∧ resCount m.running + reqCount [newReq eng ss p] > 1 then eng.chunk else 0) P D
        (blocksFor eng.blockSize (P + (D - 1))) m (newReq eng ss p) (by rw [hr']; exact hPsF) (hcc _)
        (by rw [hr']; exact Nat.le_trans (Nat.mul_le_mul_right P hcount1) hbud) hPW (by rw [hr']; omega)
        (by rw [hr']; have := hkvk (resCount Ps + 1) (by omega); rw [Nat.succ_mul] at this; omega)
        hkept hcomp hown hP
    have hxW : Whole eng.blockSize P D x :=
      ⟨hxdec, hxs, hxrem, hxpos, hxalloc, hxknown, by rw [hxprompt, hxprompt0], by rw [hxout, hout]⟩
    have hW : ∀ y ∈ serveL P eng.blockSize m.running ++ [x], Whole eng.blockSize P D y := by
      intro y hy
      rcases List.mem_append.mp hy with hy | hy
      · exact whole_serveL _ _ _ _ (by rw [hr']; exact hPsF) y hy
      · simp only [List.mem_singleton] at hy; subst hy; exact hxW
    have htok : 0 < batchTokens (serveL P eng.blockSize m.running ++ [x]) := by
      rw [batchTokens_app]; simp only [batchTokens]; omega
    obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [p] ps [newReq eng ss p] _ hnext hdue hsub
      (by simp [noReq]) hxd hxw hxp htok
    rw [hcf] at e4 e7
    obtain ⟨s1, s2, s3⟩ := pre_step eng.blockSize P D m.now hP _ hW
    rw [workLeft_app, workLeft_serveL, workLeft_pre D x hxdec, hxrem] at s2
    refine finish eng g P D J ss m _ ps 1 (batchTokens (serveL P eng.blockSize m.running ++ [x])) (D - 1)
      (m.now + g) (stepAll m.now (serveL P eng.blockSize m.running ++ [x])) [] hinv e1 e2 e3 e4 e5
      (by rw [e6, List.append_nil]) e7 ?_ (by omega) (fun y hy => ⟨(s1 y hy).1, (s1 y hy).2.1⟩)
      (Nat.le_trans s3 (by rw [resCount_app, resCount_serveL, hr']; simp only [resCount]; omega))
      (by show m.now + 1 + (D - 1) + 1 - D ≤ m.now + g; omega) hzps ?_ ?_ hsp' ?_ hsids'
    · exact e8 (fun s => ∀ q ∈ ps, s < q.sid) (hxc (fun s => ∀ q ∈ ps, s < q.sid) hcacheQ) (fun y hy => by
        rcases List.mem_append.mp hy with hy | hy
        · obtain ⟨r, hr'', rfl⟩ := mem_serveL _ _ _ y hy
          exact fun q hq => hrsid r hr'' q (hps q hq)
        · simp only [List.mem_singleton] at hy
          subst hy
          rw [hxsid, hxsid0]; exact hsid)
    · rw [List.append_nil, Nat.succ_mul, hcons]; omega
    · have := rec_bound eng.blockSize P D J d 1 m.arrived m.served [] Ps hDs hJ hPsF hcount1
        (by rw [← hr]; exact hcons)
      exact this
    · intro y hy q hq
      rw [List.append_nil] at hy
      obtain ⟨w, hw, e⟩ := (s1 y hy).2.2
      rw [e]
      rcases List.mem_append.mp hw with hw | hw
      · obtain ⟨r, hr'', rfl⟩ := mem_serveL _ _ _ w hw
        exact hrsid r hr'' q (hps q hq)
      · simp only [List.mem_singleton] at hw
        subst hw
        rw [hxsid, hxsid0]; exact hsid q hq
  · -- a decode iteration: the decodes take a token each, the arrival waits as a resident
    obtain ⟨r0, hr0⟩ := List.exists_mem_of_ne_nil Ds hne
    have hd0 : 0 < d := by obtain ⟨⟨_, h1, _⟩, h2⟩ := hDs r0 hr0; omega
    have hDpos : 0 < resCount Ds := by
      cases Ds with
      | nil => exact absurd rfl hne
      | cons _ _ => simp only [resCount]; omega
    obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxknown, hxprompt, hxc⟩ :=
      plan_dec_arrive eng
        (if eng.chunk > 0 ∧ resCount m.running + reqCount [newReq eng ss p] > 1 then eng.chunk else 0)
        (blocksFor eng.blockSize (P + (D - 1))) P m Ds Ps (newReq eng ss p) hy.phased hr hne hDok hPs'
        (by omega) (by omega)
        (by have := hkvk (resCount Ds + resCount Ps + 1) (by omega); rw [Nat.succ_mul] at this; omega)
        hkept hcomp hown hP
    have hxF : Fresh eng.blockSize P D x :=
      ⟨⟨hxdec, by omega, by omega, hxalloc, hxknown, by rw [hxprompt, hxprompt0], by rw [hxout, hout]⟩, hxpos⟩
    have htok : 0 < batchTokens (grow eng.blockSize Ds ++ clearSched Ps ++ [x]) := by
      rw [batchTokens_app, batchTokens_app, batchTokens_grow, batchTokens_clearSched]; omega
    obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [p] ps [newReq eng ss p] _ hnext hdue hsub
      (by simp [noReq]) hxd hxw hxp htok
    rw [hcf] at e4 e7
    obtain ⟨s1, s2, s3⟩ := dec_step eng.blockSize P D d m.now Ds hDs
    rw [batchTokens_grow] at s2
    have hrun : (step eng ss m).running = stepAll m.now (grow eng.blockSize Ds) ++ (clearSched Ps ++ [x]) := by
      rw [e6, stepAll_app, stepAll_app, stepAll_idle m.now (clearSched Ps) (clearSched_sched Ps),
        stepAll_idle m.now [x] (by simp [hxs]), List.append_assoc]
    have hx : m.now + 1 + (d - 1) + 1 - D = m.now + d + 1 - D := by omega
    refine finish eng g P D J ss m _ ps 1 (resCount Ds) (d - 1) (m.now + g) _ _ hinv e1 e2 e3 e4
      (by rw [e5, batchTokens_app, batchTokens_app, batchTokens_grow, batchTokens_clearSched]; simp only [batchTokens]; omega)
      hrun e7 ?_ (by omega) (fun y hy => ⟨(s1 y hy).1, (s1 y hy).2.1⟩) (Nat.le_trans s3 hJ)
      (by
        rw [hx]
        exact chain_now (by omega) (chain_append (Q := fun _ r => Fresh eng.blockSize P D r) x m.now (m.now + g)
          hxF (Nat.le_refl _) (Nat.le_refl _) (clearSched_chain hch) hzp))
      hzps ?_ ?_ hsp' ?_ hsids'
    · exact e8 (fun s => ∀ q ∈ ps, s < q.sid) (hxc (fun s => ∀ q ∈ ps, s < q.sid) hcacheQ) (fun y hy => by
        rcases List.mem_append.mp hy with hy | hy
        · rcases List.mem_append.mp hy with hy | hy
          · obtain ⟨r, hr', rfl⟩ := mem_grow _ _ y hy
            exact fun q hq => hsidD r hr' q (hps q hq)
          · obtain ⟨r, hr', rfl⟩ := mem_clearSched _ y hy
            exact fun q hq => hsidP r hr' q (hps q hq)
        · simp only [List.mem_singleton] at hy
          subst hy
          rw [hxsid, hxsid0]; exact hsid)
    · rw [workLeft_app, workLeft_app, workLeft_clearSched, workLeft_pre D x hxdec, hxrem, Nat.succ_mul, hcons, hr,
        workLeft_app]
      omega
    · exact rec_bound eng.blockSize P D J d 1 m.arrived m.served Ds Ps hDs hJ hPsF hcount1
        (by rw [← hr]; exact hcons)
    · intro y hy q hq
      rcases List.mem_append.mp hy with hy | hy
      · obtain ⟨w, hw, e⟩ := (s1 y hy).2.2; rw [e]; exact hsidD w hw q (hps q hq)
      · rcases List.mem_append.mp hy with hy | hy
        · obtain ⟨w, hw, rfl⟩ := mem_clearSched Ps y hy; exact hsidP w hw q (hps q hq)
        · simp only [List.mem_singleton] at hy
          subst hy
          rw [hxsid, hxsid0]; exact hsid q hq

end BacklogPhased

end Serq
