module

public import Serq.BacklogPhasedStep

/-! # The bounded backlog on the phase-separated schedule (issue 14, result 2, `phased = true`)

`Serq.backlog_phased`: sessions at least `g` steps apart, each one turn of a `P`-token prompt and `D`
output tokens (`W = P + (D - 1)`), on FasterTransformer's phase-separated schedule (`phased = true`:
`only (in_phase())` in both statements of vLLM's schedule). An iteration is a *decode iteration* while
some resident decodes: the decodes take a token each, the prefills wait, and an arrival is admitted
without a token; otherwise a *prefill iteration*: every waiting prefill takes its whole prompt (with
the arrival due then), and they decode together `D - 1` iterations after it. So a prefill iteration
serves the arrivals of at most `D` consecutive steps, at most `J` of them when `D ≤ J · g`; with a
budget of `J` prompts (`J · P ≤ budget`), room for an admission beside `J` decodes (`J < budget`),
`2 · J` request slots and a pool of `2 · J` requests' blocks, every record has
`arrived · W ≤ served + J · W + J · (D - 1)`: at most `J` requests wait with their whole work and at
most `J` decode, each with at most `D - 1` tokens left.

The invariant (`BacklogPhased.Inv`): the queue is empty between steps; the residents are the decodes,
all with the same `d` tokens left, then the prefills not served yet (`Fresh`), whose ghost arrival
times are at least `g` apart from `now + d + 1 - D` on (the prefill iteration is `d` steps ahead, the
last was `D - d` steps back), the first pending arrival at least `g` after the last (`Chain`); at most
`J` decodes; conservation `arrived · W = served + workLeft`; the pending arrivals spaced by `g`; the
cache's and the residents' sessions before every pending one's.
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

theorem step_inv (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) (m : Machine)
    (h : Inv eng g P D J ss m) : Inv eng g P D J ss (step eng ss m) := by
  have hP := hy.pos
  have hg := hy.gap
  have hD1 := hy.dpos
  have hwin := hy.window
  have hbud := hy.budget
  have hbud' := hy.decs
  have hfits := hy.fits
  have hcapJ := hy.cap
  have hPW : blocksFor eng.blockSize P ≤ blocksFor eng.blockSize (P + (D - 1)) := blocksFor_mono _ (by omega)
  have hnext : ∀ now q ps, nextTurn ss now q ps = ps := nextTurn_one ss (fun s hs => by
    obtain ⟨t, ht, _⟩ := hy.turns s hs; exact ⟨t, ht⟩)
  have hinv := h
  obtain ⟨hwait, ⟨d, Ds, Ps, z, hr, hd, hDs, hJ, hch, hz⟩, hsp, hcons, hrec, hcsid, hrsid, hsids⟩ := h
  obtain ⟨hDok, hPsF, hPs'⟩ := parts eng g P D d z m.now Ds Ps hDs hch
  have hkvk : ∀ k, k ≤ 2 * J → k * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks :=
    fun k hk => Nat.le_trans (Nat.mul_le_mul_right _ hk) hfits
  have hcc := capChunk_if eng P hy.chunk
  have hJ1 : 0 < J := by
    rcases Nat.eq_zero_or_pos J with h0 | h0
    · rw [h0, Nat.zero_mul] at hwin; omega
    · exact h0
  have hcount0 : resCount Ps ≤ J := count_window hwin (chain_len (chain_close (by omega) hch)) (by omega)
  have hsidD : ∀ r ∈ Ds, ∀ q ∈ m.pending, r.req.sid < q.sid := fun r hr' =>
    hrsid r (by rw [hr]; exact List.mem_append_left _ hr')
  have hsidP : ∀ r ∈ Ps, ∀ q ∈ m.pending, r.req.sid < q.sid := fun r hr' =>
    hrsid r (by rw [hr]; exact List.mem_append_right _ hr')
  -- a decode iteration with no arrival due
  have hdecIt : Ds ≠ [] → (∀ q ∈ m.pending, m.now < q.time) → Inv eng g P D J ss (step eng ss m) := by
    intro hne hlater
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
  -- a prefill iteration with no arrival due
  have hpreIt : Ds = [] → Ps ≠ [] → (∀ q ∈ m.pending, m.now < q.time) → Inv eng g P D J ss (step eng ss m) := by
    intro hD0 hne hlater
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
  have hbusy : m.running ≠ [] → (∀ q ∈ m.pending, m.now < q.time) → Inv eng g P D J ss (step eng ss m) := by
    intro hr0 hlater
    by_cases hne : Ds = []
    · exact hpreIt hne (fun hP0 => hr0 (by rw [hr, hne, hP0]; rfl)) hlater
    · exact hdecIt hne hlater
  cases hp : m.pending with
  | nil =>
    by_cases hr0 : m.running = []
    · have hdue : duePending m.now m.pending = ([], []) := by rw [hp]; rfl
      have hcons' := hcons
      rw [hr0] at hcons'
      unfold step
      rw [hdue]
      dsimp only
      rw [hwait, hr0]
      simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
      exact ⟨rfl, ⟨d, [], [], m.now + d + 1 - D, rfl, hd, by simp, by simp [resCount], Nat.le_refl _, by simp⟩,
        trivial, by simpa [workLeft] using hcons', hrec, by simp, by simp, by simp⟩
    · exact hbusy hr0 (by rw [hp]; simp)
  | cons p ps =>
    have hsp0 := hsp
    rw [hp] at hsp hsids
    obtain ⟨hle, hprompt, hturn, hsid, hrest⟩ := hsp
    have hpin : p ∈ m.pending := by rw [hp]; exact List.mem_cons_self
    by_cases hnow : p.time = m.now
    · -- the arrival due now
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
    · by_cases hr0 : m.running = []
      · -- nothing resident and the next arrival later: the clock moves to it
        have hlt : m.now < p.time := by omega
        have hdue : duePending m.now m.pending = ([], p :: ps) := by
          rw [hp]
          exact duePending_none m.now _ (fun q hq => by
            rcases List.mem_cons.mp hq with rfl | hq
            · exact hlt
            · have := spaced_le hrest q hq; omega)
        have hcons' := hcons
        rw [hr0] at hcons'
        unfold step
        rw [hdue]
        dsimp only
        rw [hwait, hr0]
        simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
        refine ⟨rfl, ⟨d, [], [], p.time, rfl, hd, by simp, by simp [resCount],
            by show p.time + d + 1 - D ≤ p.time; omega, fun q hq => ?_⟩,
          ⟨Nat.le_refl _, hprompt, hturn, hsid, hrest⟩, by simpa [workLeft] using hcons', hrec,
          by rw [← hp]; exact hcsid, by simp, hsids⟩
        rcases List.mem_cons.mp hq with rfl | hq
        · exact Nat.le_refl _
        · have := spaced_le hrest q hq; omega
      · exact hbusy hr0 (fun q hq => by
          rw [hp] at hq
          rcases List.mem_cons.mp hq with rfl | hq
          · omega
          · have := spaced_le hrest q hq; omega)

theorem run_inv (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) :
    ∀ (fuel : Nat) (m : Machine), Inv eng g P D J ss m → Inv eng g P D J ss (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng g P D J ss hy fuel _ (step_inv eng g P D J ss hy m h)

end BacklogPhased

/-- **The pathwise bounded backlog on the phase-separated schedule** (FasterTransformer's iterations,
prefill-only or decode-only: `phased = true`). Sessions arrive at least `g` steps apart
(`GappedDecode g P D 0 ss`), each one turn of a `P`-token prompt (`P > 0`) and `D > 0` output tokens, a
request's work `W = P + (D - 1)`. While a resident decodes, the iteration serves the decodes only and
the arrivals wait; then one prefill iteration serves every waiting prompt whole, and those requests
decode together for `D - 1` iterations. With `J` such that `D ≤ J · g` (the arrivals of `D`
consecutive steps, the most one prefill iteration serves, are at most `J`), a budget of `J` prompts
(`J · P ≤ budget`) with room beside `J` decodes for an admission (`J < budget`), a chunk cap that does
not cut a prompt (`chunk = 0 ∨ P ≤ chunk`), `2 · J` request slots and a KV pool of `2 · J` requests'
`W` tokens, every iteration record of every run has `arrived · W ≤ served + J · W + J · (D - 1)`.
Proved, not assumed: the request cap, the KV pool and the budget never bind and nothing is preempted
(`BacklogPhased.Inv`). Any prefix cache setting, any fuel. -/
theorem backlog_phased (eng : Engine) (g P D J : Nat) (ss : List Session)
    (hph : eng.phased = true) (hch : eng.chunk = 0 ∨ P ≤ eng.chunk) (hP : 0 < P) (hD : 0 < D) (hg : 0 < g)
    (hJ : D ≤ J * g) (hB : J * P ≤ eng.budget) (hB' : J < eng.budget) (hcap : 2 * J ≤ eng.reqsCap)
    (hfits : 2 * J * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records,
      r.arrived * (P + (D - 1)) ≤ r.served + J * (P + (D - 1)) + J * (D - 1) := by
  have hy : BacklogPhased.Hyp eng g P D J ss :=
    ⟨hph, hch, hP, hD, hg, hJ, hB, hB', hcap, hfits, BacklogDecode.gapped_turns g P D 0 ss hw⟩
  exact (BacklogPhased.run_inv eng g P D J ss hy fuel (init ss)
    (BacklogPhased.init_inv eng g P D J ss hg hD hw)).records

/-- `backlog_phased` with `2 · J` requests' work: `arrived · W ≤ served + 2 · J · W`. -/
theorem backlog_phased_loose (eng : Engine) (g P D J : Nat) (ss : List Session)
    (hph : eng.phased = true) (hch : eng.chunk = 0 ∨ P ≤ eng.chunk) (hP : 0 < P) (hD : 0 < D) (hg : 0 < g)
    (hJ : D ≤ J * g) (hB : J * P ≤ eng.budget) (hB' : J < eng.budget) (hcap : 2 * J ≤ eng.reqsCap)
    (hfits : 2 * J * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * (P + (D - 1)) ≤ r.served + 2 * J * (P + (D - 1)) := by
  intro r hr
  have h := backlog_phased eng g P D J ss hph hch hP hD hg hJ hB hB' hcap hfits hw fuel r hr
  have h1 : J * (D - 1) ≤ J * (P + (D - 1)) := Nat.mul_le_mul_left J (by omega)
  have h2 : 2 * J * (P + (D - 1)) = J * (P + (D - 1)) + J * (P + (D - 1)) := by rw [Nat.mul_assoc, Nat.two_mul]
  omega

end Serq
