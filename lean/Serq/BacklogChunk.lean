module

public import Serq.BacklogChunkStep

/-! # The bounded backlog with prompts served in chunks (issue 14, result 2, a chunk cap below the prompt)

`Serq.backlog_chunk_tight`: sessions at least `g` steps apart, each one turn of a `P`-token prompt and
`D` output tokens (`W = P + (D - 1)`), on vLLM's mixed schedule with a chunk cap `c > 0` (vLLM's
`long_prefill_token_threshold`, applying while more than one request runs or waits). A prompt is
served in chunks of `c` beside the decodes in flight, over `n` iterations at most (`P ≤ c · n`), then
it decodes one token an iteration for `D - 1` iterations: a request's life is at most
`n + D - 1` iterations, so with `n + D - 1 ≤ K · g` at most `K` requests are in flight. With a budget
of `K` chunks (`K · c ≤ budget`: no demand is cut by the budget), `K` request slots and a pool of `K`
requests' blocks, every record has `arrived · W ≤ served + W + Σ_{j=1}^{K-1} bound (j · g)`, where
`bound t` is the most work a request of age `t` has left: `P - t · c + (D - 1)` while its prompt is
not done (`t · c < P`), then `min (D - 1) (n + D - 1 - t)` (`BacklogChunk.bound`). So
`arrived · W ≤ served + K · W` (`Serq.backlog_chunk`).

The invariant (`BacklogChunk.Inv`): the queue is empty between steps; the residents, oldest first, have
ghost arrival times at least `g` apart, the first pending arrival at least `g` after the last
(`Chain`), each resident `Ok` for its arrival `a`: a prefill with `remaining + c · now ≤ P + c · a`
(it has had at least `c` tokens an iteration), or a decode with `remaining + now ≤ a + n + D - 1`;
conservation `arrived · W = served + workLeft`; the pending arrivals spaced by `g`; the cache's and
the residents' sessions before every pending one's. A request alone is not cut (`chunk` applies to
more than one request): it takes `min remaining budget ≥ min c remaining`, which the invariant allows.
-/

@[expose] public section

namespace Serq

namespace BacklogChunk

open Backlog BacklogDecode BacklogMany

structure Inv (eng : Engine) (g P D K n : Nat) (ss : List Session) (m : Machine) : Prop where
  waiting : m.waiting = []
  chain : ∃ z, Chain (Ok eng.blockSize eng.chunk n P D m.now) g m.now 0 m.running z ∧ ∀ q ∈ m.pending, z ≤ q.time
  spaced : Spaced g P m.now m.pending
  conserve : m.arrived * (P + (D - 1)) = m.served + workLeft D m.running
  records : ∀ x ∈ m.records,
    x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + sumB eng.chunk n P D g g (K - 1)
  cacheSids : ∀ e ∈ m.cache, ∀ q ∈ m.pending, e.sid < q.sid
  runningSids : ∀ r ∈ m.running, ∀ q ∈ m.pending, r.req.sid < q.sid
  sids : ∀ q ∈ m.pending, q.sid < sessionCount ss

/-- The hypotheses on the engine and the workload. -/
structure Hyp (eng : Engine) (g P D K n J : Nat) (ss : List Session) : Prop where
  phased : eng.phased = false
  chunk : 0 < eng.chunk
  cover : P ≤ eng.chunk * n
  pos : 0 < P
  gap : 0 < g
  kpos : 0 < K
  many : n + (D - 1) ≤ K * g
  pre : n ≤ J * g
  budget : J * eng.chunk + (K - J) ≤ eng.budget
  cap : K ≤ eng.reqsCap
  fits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks
  turns : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1

theorem init_inv (eng : Engine) (g P D K n : Nat) (ss : List Session) (hg : 0 < g) (hw : GappedDecode g P D 0 ss) :
    Inv eng g P D K n ss (init ss) where
  waiting := rfl
  chain := ⟨0, Nat.le_refl _, fun q _ => Nat.zero_le _⟩
  spaced := (firstTurns_spaced g P D hg 0 0 ss hw).1
  conserve := by simp [init, workLeft]
  records := by simp [init]
  cacheSids := by simp [init]
  runningSids := by simp [init]
  sids := fun q hq => by have := firstTurns_sids 0 ss q hq; omega

/-- The machine after an iteration that served `Dn` (a chain of served residents) and left the queue
empty: the invariant, given the iteration's record, conservation and sessions. -/
theorem finish (eng : Engine) (g P D K n : Nat) (ss : List Session) (hn : P ≤ eng.chunk * n)
    (m m' : Machine) (Dn : List Res) (later : List Pending) (e z : Nat)
    (hinv : Inv eng g P D K n ss m)
    (e1 : m'.now = m.now + 1) (e2 : m'.pending = later) (e3 : m'.waiting = [])
    (e4 : m'.arrived = m.arrived + e) (e5 : m'.served = m.served + batchTokens Dn)
    (e6 : m'.running = stepAll m.now Dn)
    (e7 : ∀ y ∈ m'.records, y ∈ m.records ∨ (y.arrived = m.arrived + e ∧ y.served = m.served))
    (hcache : ∀ x ∈ m'.cache, ∀ q ∈ later, x.sid < q.sid)
    (hch : Chain (Sv eng.blockSize eng.chunk n P D m.now) g m.now 0 Dn z) (hz : ∀ q ∈ later, z ≤ q.time)
    (hcons : (m.arrived + e) * (P + (D - 1)) = m.served + workLeft D Dn)
    (hrec : (m.arrived + e) * (P + (D - 1)) ≤ m.served + (P + (D - 1)) + sumB eng.chunk n P D g g (K - 1))
    (hsp : Spaced g P (m.now + 1) later) (hrs : ∀ d ∈ Dn, ∀ q ∈ later, d.req.sid < q.sid)
    (hsids : ∀ q ∈ later, q.sid < sessionCount ss) :
    Inv eng g P D K n ss m' := by
  obtain ⟨c1, c2, c3⟩ := chain_step eng.blockSize eng.chunk n P D g m.now hn hch
  refine ⟨e3, ⟨z, by rw [e1, e6]; exact c1, by rw [e2]; exact hz⟩, by rw [e1, e2]; exact hsp, ?_, ?_,
    by rw [e2]; exact hcache, ?_, by rw [e2]; exact hsids⟩
  · rw [e4, e5, e6, hcons]; omega
  · intro y hy
    rcases e7 y hy with hy | ⟨ha, hs⟩
    · exact hinv.records y hy
    · rw [ha, hs]; exact hrec
  · rw [e6, e2]
    intro y hy q hq
    obtain ⟨d, hd, hsid⟩ := c3 y hy
    rw [hsid]; exact hrs d hd q hq

theorem sv_single (bs c n P D now a B : Nat) (hc : 0 < c) (hcB : c ≤ B) (r x : Res) (h : Ok bs c n P D now a r)
    (hd : x.decoding = r.decoding) (hrem : x.remaining = r.remaining) (hpos : x.pos = r.pos)
    (hreq : x.req = r.req) (hknown : x.known = r.known)
    (hpre : r.decoding = false → x.sched = min r.remaining B ∧ x.alloc ≤ blocksFor bs P)
    (hdec : r.decoding = true → x.sched = 1 ∧ x.alloc ≤ blocksFor bs (P + (D - 1))) :
    Sv bs c n P D now a x := by
  obtain ⟨han, h⟩ := h
  rcases h with ⟨⟨hd', hr, hp, _, hk, hpr, ho⟩, hc'⟩ | ⟨⟨hd', hr, hle, hp, _⟩, hc'⟩
  · obtain ⟨hs, ha⟩ := hpre hd'
    refine ⟨han, by omega, Or.inl ⟨⟨by rw [hd, hd'], by omega, by omega, ha, by rw [hknown, hk],
      by rw [hreq, hpr], by rw [hreq, ho]⟩, by omega, by omega, by omega⟩⟩
  · obtain ⟨hs, ha⟩ := hdec hd'
    exact ⟨han, by omega, Or.inr ⟨⟨by rw [hd, hd'], by omega, by omega, by omega, ha⟩, by omega, hs⟩⟩

theorem sv_fresh (bs c n P D now : Nat) (x : Res) (hP : 0 < P) (hc : 0 < c) (hd : x.decoding = false)
    (hs1 : min c P ≤ x.sched) (hs2 : x.sched ≤ P) (hpos : x.pos = 0) (hrem : x.remaining = P)
    (ha : x.alloc ≤ blocksFor bs P) (hk : x.known = P) (hp : x.req.prompt = P) (ho : x.req.out - 1 = D - 1) :
    Sv bs c n P D now now x :=
  ⟨Nat.le_refl _, by omega, Or.inl ⟨⟨hd, by omega, by omega, ha, hk, hp, ho⟩, by omega, by omega, by omega⟩⟩

theorem step_inv (eng : Engine) (g P D K n J : Nat) (ss : List Session) (hy : Hyp eng g P D K n J ss) (m : Machine)
    (h : Inv eng g P D K n ss m) : Inv eng g P D K n ss (step eng ss m) := by
  have hP := hy.pos
  have hg := hy.gap
  have hK := hy.kpos
  have hc := hy.chunk
  have hn := hy.cover
  have hmany := hy.many
  have hbud := hy.budget
  have hfits := hy.fits
  have hpre := hy.pre
  have hJ : 0 < J := by
    rcases Nat.eq_zero_or_pos J with h0 | h0
    · rw [h0, Nat.zero_mul] at hpre
      rw [show n = 0 by omega, Nat.mul_zero] at hn
      omega
    · exact h0
  have hcB : eng.chunk ≤ eng.budget := by
    have := Nat.le_mul_of_pos_left eng.chunk hJ
    omega
  have hPW : blocksFor eng.blockSize P ≤ blocksFor eng.blockSize (P + (D - 1)) := blocksFor_mono _ (by omega)
  have hbW : blocksFor eng.blockSize (P + (D - 1)) ≤ K * blocksFor eng.blockSize (P + (D - 1)) :=
    Nat.le_mul_of_pos_left _ hK
  have hnext : ∀ now q ps, nextTurn ss now q ps = ps := nextTurn_one ss (fun s hs => by
    obtain ⟨t, ht, _⟩ := hy.turns s hs; exact ⟨t, ht⟩)
  have hinv := h
  obtain ⟨hwait, ⟨z, hch, hz⟩, hsp, hcons, hrec, hcsid, hrsid, hsids⟩ := h
  have hfit : ∀ r ∈ m.running, Fits eng.chunk eng.blockSize (blocksFor eng.blockSize (P + (D - 1))) r := by
    intro r hr
    obtain ⟨a, ha⟩ := chain_mem hch r hr
    exact ok_fits _ _ _ _ _ _ _ r ha
  -- at most `K` residents
  have hcountK : resCount m.running ≤ K := by
    rcases chain_count _ _ _ _ _ g m.now hn (chain_close (by omega) hch) with h0 | h0
    · rw [h0]; simp [resCount]
    · rcases Nat.lt_or_ge K (resCount m.running) with h1 | h1
      · have := Nat.mul_le_mul_right g (show K + 1 ≤ resCount m.running by omega)
        rw [Nat.succ_mul] at this
        omega
      · exact h1
  have hkvK : resCount m.running * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks :=
    Nat.le_trans (Nat.mul_le_mul_right _ hcountK) hfits
  -- the record of an iteration with no arrival
  have hrec0 : m.arrived * (P + (D - 1)) ≤ m.served + (P + (D - 1)) + sumB eng.chunk n P D g g (K - 1) := by
    have h1 := chain_sum _ _ _ _ _ g m.now 0 (chain_close (by omega) hch) (by omega)
    have h2 := sumB_mono eng.chunk n P D g 0 hcountK
    have h3 := sumB_zero eng.chunk n P D g (K - 1)
    rw [show K - 1 + 1 = K by omega, bound_zero _ _ _ _ hP] at h3
    rw [hcons]; omega
  -- an iteration with no arrival due and residents
  have hbusy : m.running ≠ [] → (∀ q ∈ m.pending, m.now < q.time) → Inv eng g P D K n ss (step eng ss m) := by
    intro hr0 hlater
    have hdue : duePending m.now m.pending = ([], m.pending) := duePending_none m.now _ hlater
    have hsub : submit eng ss [] m.waiting = [] := by rw [hwait]; rfl
    have hsp' : Spaced g P (m.now + 1) m.pending := by
      cases hq : m.pending with
      | nil => trivial
      | cons p ps =>
        rw [hq] at hsp
        have := hlater p (by rw [hq]; exact List.mem_cons_self)
        exact ⟨by omega, hsp.2⟩
    cases hr : m.running with
    | nil => exact absurd hr hr0
    | cons r rs =>
      cases rs with
      | nil =>
        -- one resident: no chunk cap; it takes `min remaining budget`, or its decode token
        rw [hr] at hch hrsid hcons
        obtain ⟨a, ha0, han, hok, htail⟩ := hch
        have hrs : ∀ q ∈ m.pending, r.req.sid < q.sid := hrsid r List.mem_cons_self
        have hx : ∃ x, (plan eng 0 m []).done = [x] ∧ (plan eng 0 m []).waiting = [] ∧
            (plan eng 0 m []).preempted = 0 ∧ 0 < x.sched ∧ x.req = r.req ∧
            Sv eng.blockSize eng.chunk n P D m.now a x ∧ workLeft D [x] = workLeft D [r] ∧
            ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng 0 m []).cache, Q e.sid := by
          rcases hok.2 with ⟨⟨hd, hrem, hpos, halloc, _, _, _⟩, _⟩ | ⟨⟨hd, hrem, hle, hpos, halloc⟩, _⟩
          · obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxreq, hxknown, hxc⟩ :=
              plan_prefill eng m r P hr (by omega) hd hrem hpos halloc
                (Nat.le_trans hPW (Nat.le_trans hbW hfits))
            have hsv := sv_single eng.blockSize eng.chunk n P D m.now a eng.budget hc hcB r x hok
              (by rw [hxdec, hd]) hxrem hxpos hxreq hxknown (fun _ => ⟨hxs, hxalloc⟩)
              (fun h' => by rw [hd] at h'; cases h')
            refine ⟨x, hxd, hxw, hxp, hsv.2.1, hxreq, hsv, ?_, hxc⟩
            simp [workLeft, hxdec, hd, hxrem]
          · obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxreq, hxknown, hxc⟩ :=
              plan_decode eng m r (P + (D - 1)) hr (by omega) hd hrem (by omega) halloc
                (Nat.le_trans hbW hfits)
            have hsv := sv_single eng.blockSize eng.chunk n P D m.now a eng.budget hc hcB r x hok
              (by rw [hxdec, hd]) hxrem hxpos hxreq hxknown (fun h' => by rw [hd] at h'; cases h')
              (fun _ => ⟨hxs, hxalloc⟩)
            refine ⟨x, hxd, hxw, hxp, hsv.2.1, hxreq, hsv, ?_, hxc⟩
            simp [workLeft, hxdec, hd, hxrem]
        obtain ⟨x, hxd, hxw, hxp, hxs, hxreq, hsv, hwl, hxc⟩ := hx
        obtain ⟨e1, e2, e3, e4, e5, ⟨M, e6⟩, e7, e8⟩ := BacklogDecode.step_run eng ss m [] m.pending [] x hnext hdue hsub
          (by simp [hr, noRes]) (by simp [hr, resCount, reqCount]) hxd hxw hxp hxs
        rw [apply_running] at e6
        simp only [countFirst, Nat.add_zero, List.nil_append] at e4 e7 e6
        refine finish eng g P D K n ss hn m _ [x] m.pending 0 z hinv e1 e2 e3 (by simp [e4]) (by rw [e5]; simp [batchTokens])
          e6 (by simpa using e7) ?_ ⟨a, ha0, han, hsv, htail⟩ hz (by rw [hwl, ← hcons]; try simp) (by simpa using hrec0)
          hsp' (fun d hd q hq => by simp only [List.mem_singleton] at hd; subst hd; rw [hxreq]; exact hrs q hq) hsids
        exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (hxc (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid)
          (by rw [hxreq]; exact hrs)
      | cons r2 rs2 =>
        -- two residents or more: the chunk cap applies and each takes its demand
        have hif : (if eng.chunk > 0 ∧ resCount m.running + reqCount [] > 1 then eng.chunk else 0) = eng.chunk := by
          rw [if_pos ⟨hc, by rw [hr]; simp only [resCount, reqCount]; omega⟩]
        obtain ⟨p1, p2, p3, p4⟩ := plan_mix eng eng.chunk (blocksFor eng.blockSize (P + (D - 1))) m hy.phased hc hfit
          (by
            have ht := tokens_prefills eng.chunk eng.blockSize m.running
            have hp : prefills m.running ≤ J := by
              rcases chain_prefills _ _ _ _ _ g m.now hn (chain_close (by omega) hch) with h0 | h0
              · omega
              · rcases Nat.lt_or_ge J (prefills m.running) with h1 | h1
                · have := Nat.mul_le_mul_right g (show J + 1 ≤ prefills m.running by omega)
                  rw [Nat.succ_mul] at this
                  omega
                · exact h1
            have := budget_arith hc hp hcountK ht
            omega) hkvK
        have htok : 0 < batchTokens (serveL eng.chunk eng.blockSize m.running) := by
          rw [hr]
          obtain ⟨hrem, _, _⟩ := hfit r (by rw [hr]; exact List.mem_cons_self)
          simp only [serveL, batchTokens]
          show 0 < dem eng.chunk r + _
          have : 0 < dem eng.chunk r := by unfold dem; split <;> omega
          omega
        obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [] m.pending [] _ hnext hdue hsub
          (by simp [hr, noRes]) (by rw [hif]; exact p1) (by rw [hif]; exact p2) (by rw [hif]; exact p3) htok
        simp only [countFirst, Nat.add_zero] at e4 e7
        have hchS : Chain (Sv eng.blockSize eng.chunk n P D m.now) g m.now 0 (serveL eng.chunk eng.blockSize m.running) z :=
          chain_map (serveOne eng.chunk eng.blockSize) (fun a r h => ok_serveOne _ _ _ _ _ _ a hc r h)
            (serveL eng.chunk eng.blockSize) rfl (fun _ _ => rfl) hch
        refine finish eng g P D K n ss hn m _ _ m.pending 0 z hinv e1 e2 e3 (by simp [e4]) e5 e6 (by simpa using e7) ?_
          hchS hz (by rw [workLeft_serveL, ← hcons]; try simp) (by simpa using hrec0) hsp'
          (fun d hd q hq => by obtain ⟨r', hr', rfl⟩ := mem_serveL _ _ _ d hd; exact hrsid r' hr' q hq) hsids
        rw [hif] at e8
        exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (p4 (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid)
          (fun x hx => by obtain ⟨r', hr', rfl⟩ := mem_serveL _ _ _ x hx; exact hrsid r' hr')
  cases hp : m.pending with
  | nil =>
    by_cases hr0 : m.running = []
    · have hdue : duePending m.now m.pending = ([], []) := by rw [hp]; rfl
      rw [hr0] at hcons
      unfold step
      rw [hdue]
      dsimp only
      rw [hwait, hr0]
      simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
      exact ⟨rfl, ⟨0, Nat.zero_le _, by simp⟩, trivial, by simpa [workLeft] using hcons, hrec, by simp, by simp,
        by simp⟩
    · exact hbusy hr0 (by rw [hp]; simp)
  | cons p ps =>
    rw [hp] at hsp hsids hz
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
          rw [hprompt]; have := Nat.le_trans hPW (Nat.le_trans hbW hfits); omega
        simp [submit, this, appendReq]
      have hcf : countFirst [p] = 1 := by simp [countFirst, hturn]
      have hout : (newReq eng ss p).out - 1 = D - 1 :=
        newReq_out eng ss D hy.turns p (sessionAt_lt ss p.sid (hsids p List.mem_cons_self)) hturn
      have hzp : z ≤ m.now := by have := hz p List.mem_cons_self; omega
      have hsp' : Spaced g P (m.now + 1) ps := spaced_mono (by omega) hrest
      have hzps : ∀ q ∈ ps, m.now + g ≤ q.time := fun q hq => by have := spaced_le hrest q hq; omega
      have hsids' : ∀ q ∈ ps, q.sid < sessionCount ss := fun q hq => hsids q (List.mem_cons_of_mem _ hq)
      -- fewer than `K` residents at an arrival, and the record's bound
      have hcount : resCount m.running + 1 ≤ K := by
        rcases chain_count _ _ _ _ _ g m.now hn hch with h0 | h0
        · rw [h0]; simp only [resCount]; omega
        · rcases Nat.lt_or_ge (resCount m.running) K with h1 | h1
          · omega
          · have := Nat.mul_le_mul_right g h1
            omega
      have hrec1 : (m.arrived + 1) * (P + (D - 1)) ≤ m.served + (P + (D - 1)) + sumB eng.chunk n P D g g (K - 1) := by
        have h1 := chain_sum _ _ _ _ _ g m.now g hch (by omega)
        have h2 := sumB_mono eng.chunk n P D g g (show resCount m.running ≤ K - 1 by omega)
        rw [Nat.succ_mul, hcons]; omega
      have hxsid0 : (newReq eng ss p).sid = p.sid := rfl
      have hxprompt0 : (newReq eng ss p).prompt = P := by simp [newReq, hprompt]
      by_cases hr0 : m.running = []
      · -- alone: no chunk cap, it takes `min P budget`
        rw [hr0] at hcons
        obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxknown, hxprompt, hxc⟩ :=
          BacklogDecode.plan_arrival eng m (newReq eng ss p) P hr0 (by have := hy.cap; omega) (by omega)
            (by simp [newReq, hprompt]) (by simp [newReq])
            (fun e he => by have := hcsid e he p hpin; simp only [newReq]; omega) hP
            (Nat.le_trans hPW (Nat.le_trans hbW hfits))
        have hsv := sv_fresh eng.blockSize eng.chunk n P D m.now x hP hc hxdec (by rw [hxs]; omega)
          (by rw [hxs]; omega) hxpos hxrem hxalloc hxknown (by rw [hxprompt, hxprompt0])
          (by rw [hxout, hout])
        obtain ⟨e1, e2, e3, e4, e5, ⟨M, e6⟩, e7, e8⟩ := BacklogDecode.step_run eng ss m [p] ps [newReq eng ss p] x hnext hdue hsub
          (by simp [noReq]) (by simp [hr0, resCount, reqCount]) hxd hxw hxp (by rw [hxs]; omega)
        rw [apply_running] at e6
        simp only [List.nil_append] at e6
        rw [hcf] at e4 e7
        refine finish eng g P D K n ss hn m _ [x] ps 1 (m.now + g) hinv e1 e2 e3 e4 (by rw [e5]; simp [batchTokens])
          e6 e7 ?_ ⟨m.now, Nat.zero_le _, Nat.le_refl _, hsv, Nat.le_refl _⟩ hzps
          (by rw [Nat.succ_mul, hcons]; simp [workLeft, hxdec, hxrem]; try omega) hrec1 hsp'
          (fun d hd q hq => by simp only [List.mem_singleton] at hd; subst hd; rw [hxsid, hxsid0]; exact hsid q hq)
          hsids'
        exact e8 (fun s => ∀ q ∈ ps, s < q.sid)
          (hxc (fun s => ∀ q ∈ ps, s < q.sid) (fun e he q hq => Nat.lt_trans (hcsid e he p hpin) (hsid q hq)))
          (by rw [hxsid, hxsid0]; exact hsid)
      · -- beside residents: the chunk cap applies; each resident takes its demand, the arrival `min c P`
        have hif : (if eng.chunk > 0 ∧ resCount m.running + reqCount [newReq eng ss p] > 1 then eng.chunk else 0)
            = eng.chunk := by
          rw [if_pos ⟨hc, by
            cases hr : m.running with
            | nil => exact absurd hr hr0
            | cons _ _ => simp only [resCount, reqCount]; omega⟩]
        obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxknown, hxprompt, hxc⟩ :=
          plan_mix_arrive eng eng.chunk (blocksFor eng.blockSize (P + (D - 1))) P m (newReq eng ss p) hy.phased hc
            hfit
            (by
              have ht := tokens_prefills eng.chunk eng.blockSize m.running
              have hp : prefills m.running + 1 ≤ J := by
                rcases chain_prefills _ _ _ _ _ g m.now hn hch with h0 | h0
                · omega
                · rcases Nat.lt_or_ge (prefills m.running) J with h1 | h1
                  · omega
                  · have := Nat.mul_le_mul_right g h1
                    omega
              have := budget_arith (t := batchTokens (serveL eng.chunk eng.blockSize m.running) + eng.chunk)
                (k := resCount m.running + 1) hc hp hcount (by rw [Nat.succ_mul]; omega)
              omega)
            (by have := hy.cap; omega)
            (by
              have := Nat.mul_le_mul_right (blocksFor eng.blockSize (P + (D - 1))) hcount
              rw [Nat.succ_mul] at this
              omega)
            (by simp [newReq, hprompt]) (by simp [newReq])
            (fun e he => by have := hcsid e he p hpin; simp only [newReq]; omega) hP
        have hsv := sv_fresh eng.blockSize eng.chunk n P D m.now x hP hc hxdec (by omega)
          (by omega) hxpos hxrem hxalloc hxknown (by rw [hxprompt, hxprompt0])
          (by rw [hxout, hout])
        have htok : 0 < batchTokens (serveL eng.chunk eng.blockSize m.running ++ [x]) := by
          rw [batchTokens_app]; simp only [batchTokens]; omega
        obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [p] ps [newReq eng ss p] _ hnext hdue hsub
          (by simp [noReq]) (by rw [hif]; exact hxd) (by rw [hif]; exact hxw) (by rw [hif]; exact hxp) htok
        rw [hcf] at e4 e7
        have hchS : Chain (Sv eng.blockSize eng.chunk n P D m.now) g m.now 0
            (serveL eng.chunk eng.blockSize m.running ++ [x]) (m.now + g) :=
          chain_append x m.now (m.now + g) hsv (Nat.le_refl _) (Nat.le_refl _)
            (chain_map (serveOne eng.chunk eng.blockSize) (fun a r h => ok_serveOne _ _ _ _ _ _ a hc r h)
              (serveL eng.chunk eng.blockSize) rfl (fun _ _ => rfl) hch) hzp
        have hxsid' : x.req.sid = p.sid := by rw [hxsid, hxsid0]
        refine finish eng g P D K n ss hn m _ _ ps 1 (m.now + g) hinv e1 e2 e3 e4 e5 e6 e7 ?_ hchS hzps
          (by rw [workLeft_app, workLeft_serveL, Nat.succ_mul, hcons]; simp [workLeft, hxdec, hxrem]; try omega)
          hrec1 hsp' ?_ hsids'
        · rw [hif] at e8
          exact e8 (fun s => ∀ q ∈ ps, s < q.sid)
            (hxc (fun s => ∀ q ∈ ps, s < q.sid) (fun e he q hq => Nat.lt_trans (hcsid e he p hpin) (hsid q hq)))
            (fun y hy => by
              rcases List.mem_append.mp hy with hy | hy
              · obtain ⟨r', hr', rfl⟩ := mem_serveL _ _ _ y hy
                exact fun q hq => hrsid r' hr' q (by rw [hp]; exact List.mem_cons_of_mem _ hq)
              · simp only [List.mem_singleton] at hy
                subst hy
                rw [hxsid']; exact hsid)
        · intro d hd q hq
          rcases List.mem_append.mp hd with hd | hd
          · obtain ⟨r', hr', rfl⟩ := mem_serveL _ _ _ d hd
            exact hrsid r' hr' q (by rw [hp]; exact List.mem_cons_of_mem _ hq)
          · simp only [List.mem_singleton] at hd
            subst hd
            rw [hxsid']; exact hsid q hq
    · by_cases hr0 : m.running = []
      · -- nothing resident and the next arrival later: the clock moves to it
        have hlt : m.now < p.time := by omega
        have hdue : duePending m.now m.pending = ([], p :: ps) := by
          rw [hp]
          exact duePending_none m.now _ (fun q hq => by
            rcases List.mem_cons.mp hq with rfl | hq
            · exact hlt
            · have := spaced_le hrest q hq; omega)
        rw [hr0] at hcons
        unfold step
        rw [hdue]
        dsimp only
        rw [hwait, hr0]
        simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
        refine ⟨rfl, ⟨0, Nat.zero_le _, fun q _ => Nat.zero_le _⟩, ⟨Nat.le_refl _, hprompt, hturn, hsid, hrest⟩,
          by simpa [workLeft] using hcons, hrec, by rw [← hp]; exact hcsid, by simp, hsids⟩
      · exact hbusy hr0 (fun q hq => by
          rw [hp] at hq
          rcases List.mem_cons.mp hq with rfl | hq
          · omega
          · have := spaced_le hrest q hq; omega)

theorem run_inv (eng : Engine) (g P D K n J : Nat) (ss : List Session) (hy : Hyp eng g P D K n J ss) :
    ∀ (fuel : Nat) (m : Machine), Inv eng g P D K n ss m → Inv eng g P D K n ss (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng g P D K n J ss hy fuel _ (step_inv eng g P D K n J ss hy m h)

end BacklogChunk

/-- **The pathwise bounded backlog with prompts served in chunks beside decodes**, with the budget
the prefills in flight need. Sessions arrive at least `g` steps apart (`GappedDecode g P D 0 ss`), each
one turn of a `P`-token prompt (`P > 0`) and `D` output tokens, a request's work `W = P + (D - 1)`.
The engine has a chunk cap `c = chunk > 0` (applying while more than one request runs or waits) and
`n` with `P ≤ c · n` (a prompt cut in chunks of `c` takes at most `n` iterations; the least is
`⌈P / c⌉`). With `K > 0` such that `n + D - 1 ≤ K · g` (a request's life, `n` prefill and `D - 1`
decode iterations, spans at most `K` gaps: at most `K` requests are in flight) and `J` such that
`n ≤ J · g` (at most `J` prefills are in flight), a budget of `J` chunks and `K - J` decode tokens
(`J · c + (K - J) ≤ budget`), `K` request slots, a KV pool of `K` requests' `W` tokens and vLLM's mixed
schedule (`phased = false`), every iteration record of every run has
`arrived · W ≤ served + W + Σ_{j=1}^{K-1} bound (j · g)` (`BacklogChunk.sumB c n P D g g (K - 1)`),
`bound t` the most work a request of age `t` has left: `P - t · c + (D - 1)` while `t · c < P`, then
`min (D - 1) (n + D - 1 - t)`. Proved, not assumed: the request cap, the KV pool and the budget never
bind and nothing is preempted (`BacklogChunk.Inv`). -/
theorem backlog_chunk_prefills_tight (eng : Engine) (g P D K n J : Nat) (ss : List Session)
    (hph : eng.phased = false) (hc : 0 < eng.chunk) (hn : P ≤ eng.chunk * n) (hP : 0 < P) (hg : 0 < g)
    (hK : 0 < K) (hmany : n + (D - 1) ≤ K * g) (hJ : n ≤ J * g) (hB : J * eng.chunk + (K - J) ≤ eng.budget)
    (hcap : K ≤ eng.reqsCap) (hfits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks)
    (hw : GappedDecode g P D 0 ss) (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records,
      r.arrived * (P + (D - 1)) ≤ r.served + (P + (D - 1)) + BacklogChunk.sumB eng.chunk n P D g g (K - 1) := by
  have hy : BacklogChunk.Hyp eng g P D K n J ss :=
    ⟨hph, hc, hn, hP, hg, hK, hmany, hJ, hB, hcap, hfits, BacklogDecode.gapped_turns g P D 0 ss hw⟩
  exact (BacklogChunk.run_inv eng g P D K n J ss hy fuel (init ss)
    (BacklogChunk.init_inv eng g P D K n ss hg hw)).records

/-- **The pathwise bounded backlog with prompts served in chunks beside decodes.**
`backlog_chunk_prefills_tight` with `J = K`: a budget of `K` chunks (`K · c ≤ budget`). Every iteration
record of every run has `arrived · W ≤ served + W + Σ_{j=1}^{K-1} bound (j · g)`. -/
theorem backlog_chunk_tight (eng : Engine) (g P D K n : Nat) (ss : List Session)
    (hph : eng.phased = false) (hc : 0 < eng.chunk) (hn : P ≤ eng.chunk * n) (hP : 0 < P) (hg : 0 < g)
    (hK : 0 < K) (hmany : n + (D - 1) ≤ K * g) (hB : K * eng.chunk ≤ eng.budget) (hcap : K ≤ eng.reqsCap)
    (hfits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records,
      r.arrived * (P + (D - 1)) ≤ r.served + (P + (D - 1)) + BacklogChunk.sumB eng.chunk n P D g g (K - 1) :=
  backlog_chunk_prefills_tight eng g P D K n K ss hph hc hn hP hg hK hmany (by omega) (by simpa using hB) hcap hfits
    hw fuel

theorem BacklogChunk.sumB_le (c n P D g b : Nat) : ∀ k, sumB c n P D g b k ≤ k * (P + (D - 1))
  | 0 => by simp [BacklogChunk.sumB]
  | k + 1 => by
    have := BacklogChunk.sumB_le c n P D g b k
    have h : BacklogChunk.bound c n P D (b + k * g) ≤ P + (D - 1) := by
      unfold BacklogChunk.bound; split <;> omega
    simp only [BacklogChunk.sumB, Nat.succ_mul]
    omega

/-- `backlog_chunk_tight` with `K` requests' work: `arrived · W ≤ served + K · W`. -/
theorem backlog_chunk (eng : Engine) (g P D K n : Nat) (ss : List Session)
    (hph : eng.phased = false) (hc : 0 < eng.chunk) (hn : P ≤ eng.chunk * n) (hP : 0 < P) (hg : 0 < g)
    (hK : 0 < K) (hmany : n + (D - 1) ≤ K * g) (hB : K * eng.chunk ≤ eng.budget) (hcap : K ≤ eng.reqsCap)
    (hfits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * (P + (D - 1)) ≤ r.served + K * (P + (D - 1)) := by
  intro r hr
  have h := backlog_chunk_tight eng g P D K n ss hph hc hn hP hg hK hmany hB hcap hfits hw fuel r hr
  have h1 := BacklogChunk.sumB_le eng.chunk n P D g g (K - 1)
  have h3 : (K - 1) * (P + (D - 1)) + (P + (D - 1)) = K * (P + (D - 1)) := by
    rw [← Nat.succ_mul]; congr 1; omega
  omega

end Serq

namespace Serq

/-- What `backlog_chunk_tight` proves on the way: at every machine of every run nothing waits in the
queue, at most `K` requests are resident and they hold at most `K` requests' blocks — so the request
cap (`K ≤ reqsCap`) and the KV pool (`K · blocksFor blockSize W ≤ kvBlocks`) never bind. -/
theorem backlog_chunk_in_flight (eng : Engine) (g P D K n : Nat) (ss : List Session)
    (hph : eng.phased = false) (hc : 0 < eng.chunk) (hn : P ≤ eng.chunk * n) (hP : 0 < P) (hg : 0 < g)
    (hK : 0 < K) (hmany : n + (D - 1) ≤ K * g) (hB : K * eng.chunk ≤ eng.budget) (hcap : K ≤ eng.reqsCap)
    (hfits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    (run eng ss fuel (init ss)).waiting = [] ∧ resCount (run eng ss fuel (init ss)).running ≤ K ∧
      usedBlocks (run eng ss fuel (init ss)).running ≤ K * blocksFor eng.blockSize (P + (D - 1)) := by
  have hy : BacklogChunk.Hyp eng g P D K n K ss :=
    ⟨hph, hc, hn, hP, hg, hK, hmany, by omega, by simpa using hB, hcap, hfits,
      BacklogDecode.gapped_turns g P D 0 ss hw⟩
  have h := BacklogChunk.run_inv eng g P D K n K ss hy fuel (init ss) (BacklogChunk.init_inv eng g P D K n ss hg hw)
  generalize run eng ss fuel (init ss) = m at h ⊢
  obtain ⟨z, hch, _⟩ := h.chain
  have hcount : resCount m.running ≤ K := by
    rcases BacklogChunk.chain_count _ _ _ _ _ g m.now hn (BacklogChunk.chain_close (by omega) hch) with h0 | h0
    · rw [h0]; simp [resCount]
    · rcases Nat.lt_or_ge K (resCount m.running) with h1 | h1
      · have := Nat.mul_le_mul_right g (show K + 1 ≤ resCount m.running by omega)
        rw [Nat.succ_mul] at this
        omega
      · exact h1
  refine ⟨h.waiting, hcount, ?_⟩
  have hu := BacklogMany.usedBlocks_le (blocksFor eng.blockSize (P + (D - 1))) m.running (fun r hr => by
    obtain ⟨a, ha⟩ := BacklogChunk.chain_mem hch r hr
    exact (BacklogChunk.ok_fits _ _ _ _ _ _ _ r ha).2.2)
  exact Nat.le_trans hu (Nat.mul_le_mul_right _ hcount)

end Serq
