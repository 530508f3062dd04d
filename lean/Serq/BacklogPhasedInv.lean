module

public import Serq.BacklogPhasedStep

/-! # The phased backlog's invariant and its steps with no arrival (groundwork of `Serq.BacklogPhased`)

`BacklogPhased.Inv` and `Hyp` (described in `Serq.BacklogPhased`), the invariant at the start
(`init_inv`), after an iteration given its parts (`finish`), the record's bound from conservation
(`rec_bound`), and the steps with no arrival due: a decode iteration (`step_dec_none`) and a prefill
iteration (`step_pre_none`).
-/

@[expose] public section

namespace Serq

namespace BacklogPhased

open Backlog BacklogDecode BacklogMany BacklogChunk

structure Inv (eng : Engine) (g P D J : Nat) (ss : List Session) (m : Machine) : Prop where
  waiting : m.waiting = []
  shape : ∃ d Ds Ps z, m.running = Ds ++ Ps ∧ d + 1 ≤ D ∧
    (∀ r ∈ Ds, Decoding eng.blockSize P D r ∧ r.remaining = d) ∧ resCount Ds ≤ J ∧
    Chain (fun _ r => Fresh eng.blockSize P D r) g m.now (m.now + d + 1 - D) Ps z ∧ ∀ q ∈ m.pending, z ≤ q.time
  spaced : Spaced g P m.now m.pending
  conserve : m.arrived * (P + (D - 1)) = m.served + workLeft D m.running
  records : ∀ x ∈ m.records, x.arrived * (P + (D - 1)) ≤ x.served + J * (P + (D - 1)) + J * (D - 1)
  cacheSids : ∀ e ∈ m.cache, ∀ q ∈ m.pending, e.sid < q.sid
  runningSids : ∀ r ∈ m.running, ∀ q ∈ m.pending, r.req.sid < q.sid
  sids : ∀ q ∈ m.pending, q.sid < sessionCount ss

/-- The hypotheses on the engine and the workload. -/
structure Hyp (eng : Engine) (g P D J : Nat) (ss : List Session) : Prop where
  phased : eng.phased = true
  chunk : eng.chunk = 0 ∨ P ≤ eng.chunk
  pos : 0 < P
  dpos : 0 < D
  gap : 0 < g
  window : D ≤ J * g
  budget : J * P ≤ eng.budget
  decs : J < eng.budget
  cap : 2 * J ≤ eng.reqsCap
  fits : 2 * J * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks
  turns : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1

theorem init_inv (eng : Engine) (g P D J : Nat) (ss : List Session) (hg : 0 < g) (hD : 0 < D)
    (hw : GappedDecode g P D 0 ss) : Inv eng g P D J ss (init ss) where
  waiting := rfl
  shape := ⟨0, [], [], 0, rfl, by omega, by simp, by simp [resCount], by show 0 + 0 + 1 - D ≤ 0; omega,
    fun q _ => Nat.zero_le _⟩
  spaced := (firstTurns_spaced g P D hg 0 0 ss hw).1
  conserve := by simp [init, workLeft]
  records := by simp [init]
  cacheSids := by simp [init]
  runningSids := by simp [init]
  sids := fun q hq => by have := firstTurns_sids 0 ss q hq; omega

/-- The record's bound from conservation: at most `J` decodes of at most `D - 1` tokens, and at most
`J` prefills (the arrival included) of `W`. -/
theorem rec_bound (bs P D J d e A S : Nat) (Ds Ps : List Res)
    (hDs : ∀ r ∈ Ds, Decoding bs P D r ∧ r.remaining = d) (hJ : resCount Ds ≤ J)
    (hPs : ∀ r ∈ Ps, Fresh bs P D r) (hk : resCount Ps + e ≤ J)
    (hcons : A * (P + (D - 1)) = S + workLeft D (Ds ++ Ps)) :
    (A + e) * (P + (D - 1)) ≤ S + J * (P + (D - 1)) + J * (D - 1) := by
  rw [workLeft_app, workLeft_decs D Ds (fun r hr => (hDs r hr).1.1), workLeft_fresh bs P D Ps hPs] at hcons
  have h1 := sumRem_le (D - 1) Ds (fun r hr => (hDs r hr).1.2.2.1)
  have h2 := Nat.mul_le_mul_right (D - 1) hJ
  have h3 := Nat.mul_le_mul_right (P + (D - 1)) hk
  rw [Nat.add_mul] at h3 ⊢
  omega

/-- The machine after an iteration: the invariant, given its parts. -/
theorem finish (eng : Engine) (g P D J : Nat) (ss : List Session) (m m' : Machine) (later : List Pending)
    (e t d z : Nat) (Ds Ps : List Res) (hinv : Inv eng g P D J ss m)
    (e1 : m'.now = m.now + 1) (e2 : m'.pending = later) (e3 : m'.waiting = [])
    (e4 : m'.arrived = m.arrived + e) (e5 : m'.served = m.served + t) (e6 : m'.running = Ds ++ Ps)
    (e7 : ∀ y ∈ m'.records, y ∈ m.records ∨ (y.arrived = m.arrived + e ∧ y.served = m.served))
    (hcache : ∀ x ∈ m'.cache, ∀ q ∈ later, x.sid < q.sid)
    (hd : d + 1 ≤ D) (hDs : ∀ r ∈ Ds, Decoding eng.blockSize P D r ∧ r.remaining = d) (hJ : resCount Ds ≤ J)
    (hch : Chain (fun _ r => Fresh eng.blockSize P D r) g (m.now + 1) (m.now + 1 + d + 1 - D) Ps z)
    (hz : ∀ q ∈ later, z ≤ q.time)
    (hcons : (m.arrived + e) * (P + (D - 1)) = m.served + t + workLeft D (Ds ++ Ps))
    (hrec : (m.arrived + e) * (P + (D - 1)) ≤ m.served + J * (P + (D - 1)) + J * (D - 1))
    (hsp : Spaced g P (m.now + 1) later) (hrs : ∀ r ∈ Ds ++ Ps, ∀ q ∈ later, r.req.sid < q.sid)
    (hsids : ∀ q ∈ later, q.sid < sessionCount ss) :
    Inv eng g P D J ss m' := by
  refine ⟨e3, ⟨d, Ds, Ps, z, e6, hd, hDs, hJ, by rw [e1]; exact hch, by rw [e2]; exact hz⟩,
    by rw [e1, e2]; exact hsp, by rw [e4, e5, e6]; exact hcons, ?_, by rw [e2]; exact hcache,
    by rw [e6, e2]; exact hrs, by rw [e2]; exact hsids⟩
  intro y hy
  rcases e7 y hy with hy | ⟨ha, hs⟩
  · exact hinv.records y hy
  · rw [ha, hs]; exact hrec

theorem capChunk_if (eng : Engine) (P : Nat) (h : eng.chunk = 0 ∨ P ≤ eng.chunk) (q : Prop) [Decidable q] :
    capChunk (if q then eng.chunk else 0) P = P := by
  split
  · exact capChunk_of _ _ h
  · exact capChunk_zero P

theorem clearSched_chain {g now x z : Nat} {bs P D : Nat} {Ps : List Res}
    (h : Chain (fun _ r => Fresh bs P D r) g now x Ps z) :
    Chain (fun _ r => Fresh bs P D r) g now x (clearSched Ps) z :=
  chain_map (fun r => { r with sched := 0 }) (fun _ _ h => h) clearSched rfl (fun _ _ => rfl) h

/-- What the invariant gives of the residents. -/
theorem parts (eng : Engine) (g P D d z now : Nat) (Ds Ps : List Res)
    (hDs : ∀ r ∈ Ds, Decoding eng.blockSize P D r ∧ r.remaining = d)
    (hch : Chain (fun _ r => Fresh eng.blockSize P D r) g now (now + d + 1 - D) Ps z) :
    (∀ r ∈ Ds, DecOk eng.blockSize (blocksFor eng.blockSize (P + (D - 1))) r) ∧
    (∀ r ∈ Ps, Fresh eng.blockSize P D r) ∧
    (∀ r ∈ Ps, r.decoding = false ∧ r.alloc ≤ blocksFor eng.blockSize (P + (D - 1))) := by
  have hF : ∀ r ∈ Ps, Fresh eng.blockSize P D r := fun r hr => by
    obtain ⟨_, h⟩ := chain_mem hch r hr; exact h
  refine ⟨fun r hr => ?_, hF, fun r hr => ?_⟩
  · obtain ⟨⟨hd, hrem, hle, hpr, halloc⟩, _⟩ := hDs r hr
    exact ⟨hd, hrem, blocksFor_mono _ (by omega), halloc⟩
  · obtain ⟨⟨hd, _, _, halloc, _⟩, _⟩ := hF r hr
    exact ⟨hd, Nat.le_trans halloc (blocksFor_mono _ (by omega))⟩


/-- What the invariant and the hypotheses give at a step: the residents' parts, the caps, at most `J`
waiting prefills, the residents' sessions before the pending ones'. -/
theorem facts (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) (m : Machine)
    (d : Nat) (Ds Ps : List Res) (z : Nat) (hrsid : ∀ r ∈ m.running, ∀ q ∈ m.pending, r.req.sid < q.sid)
    (hr : m.running = Ds ++ Ps) (hd : d + 1 ≤ D) (hDs : ∀ r ∈ Ds, Decoding eng.blockSize P D r ∧ r.remaining = d)
    (hch : Chain (fun _ r => Fresh eng.blockSize P D r) g m.now (m.now + d + 1 - D) Ps z) :
    blocksFor eng.blockSize P ≤ blocksFor eng.blockSize (P + (D - 1)) ∧
    (∀ now q ps, nextTurn ss now q ps = ps) ∧
    (∀ r ∈ Ds, DecOk eng.blockSize (blocksFor eng.blockSize (P + (D - 1))) r) ∧
    (∀ r ∈ Ps, Fresh eng.blockSize P D r) ∧
    (∀ r ∈ Ps, r.decoding = false ∧ r.alloc ≤ blocksFor eng.blockSize (P + (D - 1))) ∧
    (∀ k, k ≤ 2 * J → k * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) ∧ 0 < J ∧
    resCount Ps ≤ J ∧ (∀ r ∈ Ds, ∀ q ∈ m.pending, r.req.sid < q.sid) ∧
    (∀ r ∈ Ps, ∀ q ∈ m.pending, r.req.sid < q.sid) := by
  have hg := hy.gap
  have hwin := hy.window
  obtain ⟨hDok, hPsF, hPs'⟩ := parts eng g P D d z m.now Ds Ps hDs hch
  have hJ1 : 0 < J := by
    rcases Nat.eq_zero_or_pos J with h0 | h0
    · rw [h0, Nat.zero_mul] at hwin; have := hy.dpos; omega
    · exact h0
  refine ⟨blocksFor_mono _ (by omega), nextTurn_one ss (fun s hs => by
      obtain ⟨t, ht, _⟩ := hy.turns s hs; exact ⟨t, ht⟩), hDok, hPsF, hPs',
    fun k hk => Nat.le_trans (Nat.mul_le_mul_right _ hk) hy.fits, hJ1,
    count_window hwin (chain_len (chain_close (by omega) hch)) (by omega),
    fun r hr' => hrsid r (by rw [hr]; exact List.mem_append_left _ hr'),
    fun r hr' => hrsid r (by rw [hr]; exact List.mem_append_right _ hr')⟩

/-- A decode iteration with no arrival due: the decodes take a token each, the prefills wait. -/
theorem step_dec_none (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) (m : Machine)
    (hinv : Inv eng g P D J ss m) (d : Nat) (Ds Ps : List Res) (z : Nat) (hr : m.running = Ds ++ Ps)
    (hd : d + 1 ≤ D) (hDs : ∀ r ∈ Ds, Decoding eng.blockSize P D r ∧ r.remaining = d) (hJ : resCount Ds ≤ J)
    (hch : Chain (fun _ r => Fresh eng.blockSize P D r) g m.now (m.now + d + 1 - D) Ps z)
    (hz : ∀ q ∈ m.pending, z ≤ q.time) (hne : Ds ≠ [])
    (hlater : ∀ q ∈ m.pending, m.now < q.time) : Inv eng g P D J ss (step eng ss m) := by
  have ⟨_, _, hP, hD1, hg, hwin, hbud, hbud', hcapJ, hfits, _⟩ := hy
  have ⟨hwait, _, hsp, hcons, hrec, hcsid, hrsid, hsids⟩ := hinv
  obtain ⟨hPW, hnext, hDok, hPsF, hPs', hkvk, hJ1, hcount0, hsidD, hsidP⟩ :=
    facts eng g P D J ss hy m d Ds Ps z hrsid hr hd hDs hch
  have hcc := capChunk_if eng P hy.chunk
  have hdue : duePending m.now m.pending = ([], m.pending) := duePending_none m.now _ hlater
  have hsub : submit eng ss [] m.waiting = [] := by rw [hwait]; rfl
  have hsp' : Spaced g P (m.now + 1) m.pending := by
    cases hq : m.pending with
    | nil => trivial
    | cons p ps =>
      rw [hq] at hsp
      have := hlater p (by rw [hq]; exact List.mem_cons_self)
      exact ⟨by omega, hsp.2⟩
  obtain ⟨r0, hr0⟩ := List.exists_mem_of_ne_nil Ds hne
  have hd0 : 0 < d := by obtain ⟨⟨_, h1, _⟩, h2⟩ := hDs r0 hr0; omega
  have hDpos : 0 < resCount Ds := by
    cases Ds with
    | nil => exact absurd rfl hne
    | cons _ _ => simp only [resCount]; omega
  obtain ⟨p1, p2, p3, p4⟩ := plan_dec eng
    (if eng.chunk > 0 ∧ resCount m.running + reqCount [] > 1 then eng.chunk else 0)
    (blocksFor eng.blockSize (P + (D - 1))) m Ds Ps hy.phased hr hne hDok hPs' (by omega) (hkvk _ (by omega))
  have htok : 0 < batchTokens (grow eng.blockSize Ds ++ clearSched Ps) := by
    rw [batchTokens_app, batchTokens_grow, batchTokens_clearSched]; omega
  obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [] m.pending [] _ hnext hdue hsub
    (by rw [hr]; cases Ds with
      | nil => exact absurd rfl hne
      | cons _ _ => simp [noRes]) p1 p2 p3 htok
  simp only [countFirst, Nat.add_zero] at e4 e7
  obtain ⟨s1, s2, s3⟩ := dec_step eng.blockSize P D d m.now Ds hDs
  rw [batchTokens_grow] at s2
  have hrun : (step eng ss m).running = stepAll m.now (grow eng.blockSize Ds) ++ clearSched Ps := by
    rw [e6, stepAll_app, stepAll_idle m.now (clearSched Ps) (clearSched_sched Ps)]
  have hx : m.now + 1 + (d - 1) + 1 - D = m.now + d + 1 - D := by omega
  refine finish eng g P D J ss m _ m.pending 0 (resCount Ds) (d - 1) z _ _ hinv e1 e2 e3 (by simp [e4])
    (by rw [e5, batchTokens_app, batchTokens_grow, batchTokens_clearSched, Nat.add_zero]) hrun
    (by simpa using e7) ?_ (by omega) (fun y hy => ⟨(s1 y hy).1, (s1 y hy).2.1⟩) (Nat.le_trans s3 hJ)
    (by rw [hx]; exact chain_now (by omega) (clearSched_chain hch)) hz ?_ ?_ hsp' ?_ hsids
  · exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (p4 (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid) (fun x hx => by
      rcases List.mem_append.mp hx with hx | hx
      · obtain ⟨r, hr', rfl⟩ := mem_grow _ _ x hx; exact hsidD r hr'
      · obtain ⟨r, hr', rfl⟩ := mem_clearSched _ x hx; exact hsidP r hr')
  · rw [Nat.add_zero, hcons, hr, workLeft_app, workLeft_app, workLeft_clearSched]; omega
  · have := rec_bound eng.blockSize P D J d 0 m.arrived m.served Ds Ps hDs hJ hPsF (by omega)
      (by rw [← hr]; exact hcons)
    simpa using this
  · intro y hy q hq
    rcases List.mem_append.mp hy with hy | hy
    · obtain ⟨w, hw, e⟩ := (s1 y hy).2.2; rw [e]; exact hsidD w hw q hq
    · obtain ⟨w, hw, rfl⟩ := mem_clearSched Ps y hy; exact hsidP w hw q hq

/-- A prefill iteration with no arrival due: every waiting prefill takes its whole prompt. -/
theorem step_pre_none (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) (m : Machine)
    (hinv : Inv eng g P D J ss m) (d : Nat) (Ds Ps : List Res) (z : Nat) (hr : m.running = Ds ++ Ps)
    (hd : d + 1 ≤ D) (hDs : ∀ r ∈ Ds, Decoding eng.blockSize P D r ∧ r.remaining = d) (hJ : resCount Ds ≤ J)
    (hch : Chain (fun _ r => Fresh eng.blockSize P D r) g m.now (m.now + d + 1 - D) Ps z)
    (_hz : ∀ q ∈ m.pending, z ≤ q.time) (hD0 : Ds = [])
    (hne : Ps ≠ []) (hlater : ∀ q ∈ m.pending, m.now < q.time) : Inv eng g P D J ss (step eng ss m) := by
  have ⟨_, _, hP, hD1, hg, hwin, hbud, hbud', hcapJ, hfits, _⟩ := hy
  have ⟨hwait, _, hsp, hcons, hrec, hcsid, hrsid, hsids⟩ := hinv
  obtain ⟨hPW, hnext, hDok, hPsF, hPs', hkvk, hJ1, hcount0, hsidD, hsidP⟩ :=
    facts eng g P D J ss hy m d Ds Ps z hrsid hr hd hDs hch
  have hcc := capChunk_if eng P hy.chunk
  subst hD0
  have hr' : m.running = Ps := by simpa using hr
  have hdue : duePending m.now m.pending = ([], m.pending) := duePending_none m.now _ hlater
  have hsub : submit eng ss [] m.waiting = [] := by rw [hwait]; rfl
  have hsp' : Spaced g P (m.now + 1) m.pending := by
    cases hq : m.pending with
    | nil => trivial
    | cons p ps =>
      rw [hq] at hsp
      have := hlater p (by rw [hq]; exact List.mem_cons_self)
      exact ⟨by omega, hsp.2⟩
  have hPpos : 0 < resCount Ps := by
    cases Ps with
    | nil => exact absurd rfl hne
    | cons _ _ => simp only [resCount]; omega
  obtain ⟨p1, p2, p3, p4⟩ := plan_pre eng
    (if eng.chunk > 0 ∧ resCount m.running + reqCount [] > 1 then eng.chunk else 0) P D
    (blocksFor eng.blockSize (P + (D - 1))) m (by rw [hr']; exact hPsF) (hcc _)
    (by rw [hr']; exact Nat.le_trans (Nat.mul_le_mul_right P hcount0) hbud) hPW
    (by rw [hr']; exact hkvk _ (by omega))
  have hW := whole_serveL eng.blockSize P D m.running (by rw [hr']; exact hPsF)
  have htok : 0 < batchTokens (serveL P eng.blockSize m.running) := by
    rw [batchTokens_whole _ _ _ _ hW, resCount_serveL, hr']
    exact Nat.mul_pos hPpos hP
  obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [] m.pending [] _ hnext hdue hsub
    (by rw [hr']; cases Ps with
      | nil => exact absurd rfl hne
      | cons _ _ => simp [noRes]) p1 p2 p3 htok
  simp only [countFirst, Nat.add_zero] at e4 e7
  obtain ⟨s1, s2, s3⟩ := pre_step eng.blockSize P D m.now hP _ hW
  rw [workLeft_serveL] at s2
  refine finish eng g P D J ss m _ m.pending 0 (batchTokens (serveL P eng.blockSize m.running)) (D - 1) (m.now + 1)
    (stepAll m.now (serveL P eng.blockSize m.running)) [] hinv e1 e2 e3 (by simp [e4]) e5
    (by rw [e6, List.append_nil]) (by simpa using e7) ?_ (by omega) (fun y hy => ⟨(s1 y hy).1, (s1 y hy).2.1⟩)
    (Nat.le_trans s3 (by rw [resCount_serveL, hr']; exact hcount0))
    (by show m.now + 1 + (D - 1) + 1 - D ≤ m.now + 1; omega) (fun q hq => by have := hlater q hq; omega)
    ?_ ?_ hsp' ?_ hsids
  · exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (p4 (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid) (fun x hx => by
      obtain ⟨r, hr'', rfl⟩ := mem_serveL _ _ _ x hx; exact hrsid r hr'')
  · rw [Nat.add_zero, List.append_nil, hcons]; omega
  · have := rec_bound eng.blockSize P D J d 0 m.arrived m.served [] Ps hDs hJ hPsF (by omega)
      (by rw [← hr]; exact hcons)
    simpa using this
  · intro y hy q hq
    rw [List.append_nil] at hy
    obtain ⟨w, hw, e⟩ := (s1 y hy).2.2
    obtain ⟨r, hr'', rfl⟩ := mem_serveL _ _ _ w hw
    rw [e]; exact hrsid r hr'' q hq

end BacklogPhased

end Serq
