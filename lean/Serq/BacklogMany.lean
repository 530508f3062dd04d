module

public import Serq.BacklogManyStep

/-! # The bounded backlog with several requests in flight (issue 14, result 2)

`Serq.backlog_many`: sessions at least `g` steps apart, each one turn of a `P`-token prompt and `D`
output tokens (`W = P + (D - 1)`), on vLLM's mixed schedule. A request's prefill is served whole in
its arrival's iteration (`P + (K - 1) ≤ budget`: beside at most `K - 1` decodes), then it decodes one
token an iteration for `D - 1` iterations, so with `D ≤ K · g` at most `K` requests are in flight.
With `K` request slots and a pool of `K` requests' blocks, every record has
`arrived · W ≤ served + W + Σ_{j=1}^{K-1} (D - j · g)` (`Serq.backlog_many_tight`, the exact constant),
so `arrived · W ≤ served + K · W` (`Serq.backlog_many`).

The invariant (`BacklogMany.Inv`): the queue is empty between steps; every resident is a decode
(`BacklogDecode.Decoding`), their work left ascending by at least `g` (`Asc g 1`: the older first);
each done `D` steps after the next arrival less `g` (`HeadGap`: `remaining + now + g ≤ D + next`), so
at an arrival every resident has `remaining + g ≤ D` and there are fewer than `K` (`count_lt`), and at
any step at most `K` (`count_le`); conservation `arrived · W = served + Σ remaining`; the pending
arrivals spaced by `g`; the cache's and the residents' sessions before every pending one's.

An iteration is computed over the list of residents (`BacklogManyStep.lean`: `serve_decoders`,
`admit_after`, `stepAll`, `asc_step1`, `sum_asc`; here `plan_arrive`, `plan_decs`, `step_many`).
-/

@[expose] public section

namespace Serq

namespace BacklogMany

open Backlog BacklogDecode

/-! ## An iteration of decodes, and of decodes and one arrival -/

theorem excluded_none (eng : Engine) (hph : eng.phased = false) (rs : List Res) (d : Bool) :
    excluded (phaseOf eng rs) d = false := by
  simp [phaseOf, hph, excluded]

def DecOk (bs bW : Nat) (r : Res) : Prop :=
  r.decoding = true ∧ 0 < r.remaining ∧ blocksFor bs (r.pos + 1) ≤ bW ∧ r.alloc ≤ bW

theorem clearSched_ok (bs bW : Nat) (L : List Res) (h : ∀ r ∈ L, DecOk bs bW r) :
    ∀ r ∈ clearSched L, r.decoding = true ∧ 0 < r.remaining ∧ blocksFor bs (r.pos + 1) ≤ bW ∧ r.alloc ≤ bW := by
  intro x hx
  obtain ⟨r, hr, rfl⟩ := mem_clearSched L x hx
  exact h r hr

theorem plan_decs (eng : Engine) (c bW : Nat) (m : Machine) (hph : eng.phased = false)
    (hL : ∀ r ∈ m.running, DecOk eng.blockSize bW r) (hb : resCount m.running ≤ eng.budget)
    (hkv : resCount m.running * bW ≤ eng.kvBlocks) :
    (plan eng c m []).done = grow eng.blockSize m.running ∧ (plan eng c m []).waiting = [] ∧
      (plan eng c m []).preempted = 0 ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m []).cache, Q e.sid := by
  have hex : excluded (phaseOf eng m.running) true = false := excluded_none eng hph _ _
  obtain ⟨i1, i2, i3, i4, _, _, i6⟩ := serve_decoders eng (phaseOf eng m.running) hex bW (clearSched m.running)
    ⟨eng.budget, c, [], clearSched m.running, [], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega) (clearSched_ok _ _ _ hL) (by rw [resCount_clearSched']; exact hb) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; exact hkv)
  unfold plan
  dsimp only
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, c, [], clearSched m.running, [], m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i6 ⊢
  rw [if_pos i4]
  rw [admitHeads_nil eng _ _ { p1 with done := appendRes p1.done p1.todo, todo := [] } (by simp [i3])]
  refine ⟨by simp [i1, i2, appendRes_eq', grow_clearSched], by simp [i3], by simp [i4], fun Q hQ => i6 Q hQ⟩

theorem plan_arrive (eng : Engine) (c bW P : Nat) (m : Machine) (rq : Req) (hph : eng.phased = false)
    (hL : ∀ r ∈ m.running, DecOk eng.blockSize bW r) (hb : resCount m.running + P ≤ eng.budget)
    (hcap : resCount m.running < eng.reqsCap) (hch : capChunk c P = P)
    (hkv : resCount m.running * bW + blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hkept : rq.kept = P) (hcomp : rq.computed = 0) (hown : ∀ e ∈ m.cache, e.sid ≠ rq.sid) (hP : 0 < P) :
    ∃ x, (plan eng c m [rq]).done = grow eng.blockSize m.running ++ [x] ∧ (plan eng c m [rq]).waiting = [] ∧
      (plan eng c m [rq]).preempted = 0 ∧ x.decoding = false ∧
      x.sched = P ∧ x.pos = 0 ∧ x.remaining = P ∧ x.alloc ≤ blocksFor eng.blockSize P ∧
      x.req.out = rq.out ∧ x.req.sid = rq.sid ∧ x.known = P ∧ x.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m [rq]).cache, Q e.sid := by
  have hex : excluded (phaseOf eng m.running) true = false := excluded_none eng hph _ _
  have hex' : excluded (phaseOf eng m.running) false = false := excluded_none eng hph _ _
  have hub : usedBlocks (grow eng.blockSize m.running) ≤ resCount m.running * bW := by
    rw [← resCount_grow eng.blockSize m.running]
    apply usedBlocks_le
    intro x hx
    obtain ⟨r, hr, rfl⟩ := mem_grow _ _ x hx
    obtain ⟨_, _, h1, h2⟩ := hL r hr
    show r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc) ≤ bW
    omega
  obtain ⟨i1, i2, i3, i4, i5, i7, i6⟩ := serve_decoders eng (phaseOf eng m.running) hex bW (clearSched m.running)
    ⟨eng.budget, c, [], clearSched m.running, [rq], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega) (clearSched_ok _ _ _ hL) (by rw [resCount_clearSched']; show resCount m.running ≤ eng.budget; omega) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; omega)
  unfold plan
  dsimp only
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, c, [], clearSched m.running, [rq], m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i5 i7 i6 ⊢
  rw [if_pos i4]
  have e : reqCount p1.waiting + 1 = 0 + 1 + 1 := by rw [i3]; rfl
  rw [e]
  have hdone : appendRes p1.done p1.todo = grow eng.blockSize m.running := by
    simp [i1, i2, appendRes_eq', grow_clearSched]
  obtain ⟨x, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13⟩ :=
    admit_after eng (phaseOf eng m.running) 0 { p1 with done := appendRes p1.done p1.todo, todo := [] } rq P
      (by simp [i3]) (by dsimp only; rw [i5]; dsimp only; rw [resCount_clearSched']; omega)
      (by simp only [hdone, resCount_grow]; exact hcap) (by simp only [i7]; exact hch) hex' hkept hcomp
      (ownCachedBlocks_zero _ _ (i6 (fun s => s ≠ rq.sid) hown)) hP (by simp only [hdone]; omega)
  refine ⟨x, by rw [a1]; simp only [hdone, appendRes_eq'], a2, by rw [a3]; exact i4, a4, a5, a6, a7, a8, a9, a10, a11,
    a12, fun Q hQ => a13 Q (i6 Q hQ)⟩

/-- A step that runs an iteration whose plan leaves the queue empty and preempts nothing, its batch
`Dn` with tokens: what the machine becomes. -/
theorem step_many (eng : Engine) (ss : List Session) (m : Machine) (due later : List Pending) (W : List Req)
    (Dn : List Res) (hnext : ∀ now q ps, nextTurn ss now q ps = ps)
    (hdue : duePending m.now m.pending = (due, later)) (hsub : submit eng ss due m.waiting = W)
    (hbusy : ¬ (noRes m.running = true ∧ noReq W = true))
    (hdone : (plan eng (if eng.chunk > 0 ∧ resCount m.running + reqCount W > 1 then eng.chunk else 0) m W).done = Dn)
    (hw : (plan eng (if eng.chunk > 0 ∧ resCount m.running + reqCount W > 1 then eng.chunk else 0) m W).waiting = [])
    (hpre : (plan eng (if eng.chunk > 0 ∧ resCount m.running + reqCount W > 1 then eng.chunk else 0) m W).preempted = 0)
    (htok : 0 < batchTokens Dn) :
    (step eng ss m).now = m.now + 1 ∧ (step eng ss m).pending = later ∧ (step eng ss m).waiting = [] ∧
    (step eng ss m).arrived = m.arrived + countFirst due ∧ (step eng ss m).served = m.served + batchTokens Dn ∧
    (step eng ss m).running = stepAll m.now Dn ∧
    (∀ y ∈ (step eng ss m).records, y ∈ m.records ∨
      (y.arrived = m.arrived + countFirst due ∧ y.served = m.served)) ∧
    ∀ Q : Nat → Prop, (∀ e ∈ (plan eng (if eng.chunk > 0 ∧ resCount m.running + reqCount W > 1 then eng.chunk else 0)
      m W).cache, Q e.sid) → (∀ x ∈ Dn, Q x.req.sid) → ∀ e ∈ (step eng ss m).cache, Q e.sid := by
  have hk := apply_keeps eng ss m.now (hnext m.now)
  unfold step
  rw [hdue]
  dsimp only
  rw [hsub, if_neg hbusy, hdone, hw, hpre]
  rw [if_neg (by omega)]
  refine ⟨rfl, ?_, ?_, ?_, ?_, ?_, ?_, ?_⟩
  · exact (hk Dn _ []).2.2.1
  · exact (hk Dn _ []).1
  · exact (hk Dn _ []).2.1
  · exact (hk Dn _ []).2.2.2.1
  · show (apply eng ss m.now _ Dn []).running = _
    rw [apply_running]; simp
  · intro y hy
    simp only [apply_records] at hy
    rcases (mem_appendRecord _ _ _).mp hy with hy | hy
    · exact Or.inl hy
    · right
      subst hy
      exact ⟨rfl, rfl⟩
  · intro Q hQ hx
    exact apply_cache Q eng ss m.now Dn _ [] hQ hx

/-! ## The invariant -/

/-- Every resident is done before `D` steps after the next arrival less `g`:
`remaining + now + g ≤ D + next` (its arrival and the next are at least `g` apart). -/
def HeadGap (g D now : Nat) (rs : List Res) : List Pending → Prop
  | [] => True
  | p :: _ => ∀ r ∈ rs, r.remaining + now + g ≤ D + p.time

structure Inv (eng : Engine) (g P D K : Nat) (ss : List Session) (m : Machine) : Prop where
  waiting : m.waiting = []
  decs : ∀ r ∈ m.running, Decoding eng.blockSize P D r
  asc : Asc g 1 m.running
  spaced : Spaced g P m.now m.pending
  head : HeadGap g D m.now m.running m.pending
  conserve : m.arrived * (P + (D - 1)) = m.served + sumRem m.running
  records : ∀ x ∈ m.records, x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + tri (D - g) g (K - 1)
  cacheSids : ∀ e ∈ m.cache, ∀ q ∈ m.pending, e.sid < q.sid
  runningSids : ∀ r ∈ m.running, ∀ q ∈ m.pending, r.req.sid < q.sid
  sids : ∀ q ∈ m.pending, q.sid < sessionCount ss

/-- The hypotheses on the engine and the workload. -/
structure Hyp (eng : Engine) (g P D K : Nat) (ss : List Session) : Prop where
  phased : eng.phased = false
  chunk : eng.chunk = 0 ∨ P ≤ eng.chunk
  pos : 0 < P
  gap : 0 < g
  kpos : 0 < K
  many : D ≤ K * g
  budget : P + (K - 1) ≤ eng.budget
  cap : K ≤ eng.reqsCap
  fits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks
  turns : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1

theorem capChunk_of (c P : Nat) (h : c = 0 ∨ P ≤ c) : capChunk c P = P := by
  unfold capChunk
  split
  · rfl
  · omega

theorem count_le (g D K : Nat) (hmany : D ≤ K * g) (L : List Res) (h : Asc g 1 L)
    (hM : ∀ r ∈ L, r.remaining ≤ D - 1) : resCount L ≤ K := by
  by_cases hL : L = []
  · subst hL; simp [resCount]
  · have h1 := asc_count g (D - 1 + g) 1 L h (fun r hr => by have := hM r hr; omega) hL
    rcases Nat.lt_or_ge K (resCount L) with hn | hn
    · have := Nat.mul_le_mul_right g (show K + 1 ≤ resCount L by omega)
      rw [Nat.succ_mul] at this
      omega
    · exact hn

theorem count_lt (g D K : Nat) (hK : 0 < K) (hmany : D ≤ K * g) (L : List Res) (h : Asc g 1 L)
    (hM : ∀ r ∈ L, r.remaining + g ≤ D) : resCount L + 1 ≤ K := by
  by_cases hL : L = []
  · subst hL; simp [resCount]; omega
  · have h1 := asc_count g D 1 L h hM hL
    rcases Nat.lt_or_ge (resCount L) K with hn | hn
    · omega
    · have := Nat.mul_le_mul_right g hn
      omega

theorem init_inv (eng : Engine) (g P D K : Nat) (ss : List Session) (hg : 0 < g) (hw : GappedDecode g P D 0 ss) :
    Inv eng g P D K ss (init ss) where
  waiting := rfl
  decs := by simp [init]
  asc := trivial
  spaced := (firstTurns_spaced g P D hg 0 0 ss hw).1
  head := by
    show HeadGap g D 0 [] (firstTurns 0 ss)
    cases firstTurns 0 ss with
    | nil => trivial
    | cons p _ => intro r hr; simp at hr
  conserve := by simp [init, sumRem]
  records := by simp [init]
  cacheSids := by simp [init]
  runningSids := by simp [init]
  sids := fun q hq => by have := firstTurns_sids 0 ss q hq; omega

theorem step_inv (eng : Engine) (g P D K : Nat) (ss : List Session) (hy : Hyp eng g P D K ss) (m : Machine)
    (h : Inv eng g P D K ss m) : Inv eng g P D K ss (step eng ss m) := by
  have hP := hy.pos
  have hg := hy.gap
  have hK := hy.kpos
  have hmany := hy.many
  have hbud := hy.budget
  have hfits := hy.fits
  have hPW : blocksFor eng.blockSize P ≤ blocksFor eng.blockSize (P + (D - 1)) := blocksFor_mono _ (by omega)
  have hbW : blocksFor eng.blockSize (P + (D - 1)) ≤ K * blocksFor eng.blockSize (P + (D - 1)) :=
    Nat.le_mul_of_pos_left _ hK
  have hnext : ∀ now q ps, nextTurn ss now q ps = ps := nextTurn_one ss (fun s hs => by
    obtain ⟨t, ht, _⟩ := hy.turns s hs; exact ⟨t, ht⟩)
  have hchunk : ∀ n, capChunk (if eng.chunk > 0 ∧ n > 1 then eng.chunk else 0) P = P := by
    intro n
    apply capChunk_of
    split
    · exact hy.chunk
    · exact Or.inl rfl
  obtain ⟨hwait, hdecs, hasc, hsp, hhead, hcons, hrec, hcsid, hrsid, hsids⟩ := h
  have hok : ∀ r ∈ m.running, DecOk eng.blockSize (blocksFor eng.blockSize (P + (D - 1))) r := fun r hr => by
    obtain ⟨h1, h2, _, h4, h5⟩ := hdecs r hr
    exact ⟨h1, h2, blocksFor_mono _ (by omega), h5⟩
  have hdd : ∀ r ∈ m.running, r.decoding = true ∧ 0 < r.remaining := fun r hr => ⟨(hdecs r hr).1, (hdecs r hr).2.1⟩
  have hcount : resCount m.running ≤ K := count_le g D K hmany m.running hasc (fun r hr => (hdecs r hr).2.2.1)
  have hsum : sumRem m.running ≤ resCount m.running * (D - 1) := sumRem_le _ _ (fun r hr => (hdecs r hr).2.2.1)
  have hR := stepAll_grow_mem m.now eng.blockSize m.running (fun r hr => (hdecs r hr).1)
  have hRsum := stepAll_grow_sum m.now eng.blockSize m.running hdd
  have hRasc := asc_step1 g hg m.now eng.blockSize m.running hasc (fun r hr => (hdecs r hr).1)
  have hRdec : ∀ y ∈ stepAll m.now (grow eng.blockSize m.running), Decoding eng.blockSize P D y := by
    intro y hy
    obtain ⟨r, hr, e1, e2, e3, e4, e5, _⟩ := hR y hy
    obtain ⟨_, _, h3, h4, _⟩ := hdecs r hr
    obtain ⟨_, _, h6, h7⟩ := hok r hr
    exact ⟨e3, e2, by omega, by omega, by rw [e5]; omega⟩
  -- an iteration of the decodes alone
  have hdecode : m.running ≠ [] → (∀ q ∈ m.pending, m.now < q.time) → Inv eng g P D K ss (step eng ss m) := by
    intro hr0 hlater
    have hdue : duePending m.now m.pending = ([], m.pending) := duePending_none m.now _ hlater
    have hsub : submit eng ss [] m.waiting = [] := by rw [hwait]; rfl
    have hnr : noRes m.running = false := by
      cases h' : m.running with
      | nil => exact absurd h' hr0
      | cons _ _ => rfl
    have hpos : 0 < resCount m.running := by
      cases h' : m.running with
      | nil => exact absurd h' hr0
      | cons _ _ => simp [resCount]
    obtain ⟨p1, p2, p3, p4⟩ := plan_decs eng (if eng.chunk > 0 ∧ resCount m.running + reqCount [] > 1 then eng.chunk else 0)
      (blocksFor eng.blockSize (P + (D - 1))) m hy.phased hok (by omega)
      (Nat.le_trans (Nat.mul_le_mul_right _ hcount) hfits)
    obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [] m.pending [] _ hnext hdue hsub
      (by simp [hnr]) p1 p2 p3 (by rw [batchTokens_grow]; exact hpos)
    simp only [countFirst, Nat.add_zero] at e4 e7
    refine ⟨e3, by rw [e6]; exact hRdec, by rw [e6]; exact hRasc, ?_, ?_, ?_, ?_, ?_, ?_, by rw [e2]; exact hsids⟩
    · rw [e1, e2]
      cases hq : m.pending with
      | nil => trivial
      | cons p ps =>
        rw [hq] at hsp
        have := hlater p (by rw [hq]; exact List.mem_cons_self)
        exact ⟨by omega, hsp.2⟩
    · rw [e1, e2, e6]
      cases hq : m.pending with
      | nil => trivial
      | cons p ps =>
        rw [hq] at hhead
        intro y hy
        obtain ⟨r, hr, f1, _, _, _, _, _⟩ := hR y hy
        have := hhead r hr
        have := (hdecs r hr).2.1
        omega
    · rw [e4, e5, e6, hcons, batchTokens_grow]; omega
    · intro y hy
      rcases e7 y hy with hy | ⟨ha, hs⟩
      · exact hrec y hy
      · rw [ha, hs, hcons]
        have h1 := sum_asc g (D - 1) 1 m.running hasc (fun r hr => (hdecs r hr).2.2.1)
        have h2 := tri_mono_n (D - 1) g hcount
        have h3 : tri (D - 1) g K = (D - 1) + tri (D - 1 - g) g (K - 1) := by
          have := tri_succ' (D - 1) g (K - 1)
          rwa [show K - 1 + 1 = K by omega] at this
        have h4 := tri_mono_M g (show D - 1 - g ≤ D - g by omega) (K - 1)
        omega
    · rw [e2]
      exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (p4 (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid)
        (fun x hx => by obtain ⟨r, hr, rfl⟩ := mem_grow _ _ x hx; exact hrsid r hr)
    · rw [e6, e2]
      intro y hy q hq
      obtain ⟨r, hr, _, _, _, _, _, f6⟩ := hR y hy
      rw [f6]
      exact hrsid r hr q hq
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
      exact ⟨rfl, by simp, trivial, trivial, trivial, by simpa [sumRem] using hcons, hrec, by simp, by simp, by simp⟩
    · exact hdecode hr0 (by rw [hp]; simp)
  | cons p ps =>
    rw [hp] at hsp hhead hsids
    obtain ⟨hle, hprompt, hturn, hsid, hrest⟩ := hsp
    have hpin : p ∈ m.pending := by rw [hp]; exact List.mem_cons_self
    by_cases hnow : p.time = m.now
    · -- the arrival due now: the decodes take their tokens and it is admitted with its whole prompt
      have hdue : duePending m.now m.pending = ([p], ps) := by
        rw [hp]
        have := duePending_none m.now ps (fun q hq => by have := spaced_le hrest q hq; omega)
        simp [duePending, this, hnow]
      have hsub : submit eng ss [p] m.waiting = [newReq eng ss p] := by
        rw [hwait]
        have : ¬ blocksFor eng.blockSize p.prompt > eng.kvBlocks := by rw [hprompt]; omega
        simp [submit, this, appendReq]
      have hcf : countFirst [p] = 1 := by simp [countFirst, hturn]
      have hout : (newReq eng ss p).out - 1 = D - 1 :=
        newReq_out eng ss D hy.turns p (sessionAt_lt ss p.sid (hsids p List.mem_cons_self)) hturn
      have hat : ∀ r ∈ m.running, r.remaining + g ≤ D := fun r hr => by have := hhead r hr; omega
      have hn : resCount m.running + 1 ≤ K := count_lt g D K hK hmany m.running hasc hat
      obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxknown, hxprompt, hxc⟩ :=
        plan_arrive eng (if eng.chunk > 0 ∧ resCount m.running + reqCount [newReq eng ss p] > 1 then eng.chunk else 0)
          (blocksFor eng.blockSize (P + (D - 1))) P m (newReq eng ss p) hy.phased hok (by omega)
          (by have := hy.cap; omega) (hchunk _)
          (by
            have := Nat.mul_le_mul_right (blocksFor eng.blockSize (P + (D - 1))) hn
            rw [Nat.succ_mul] at this
            omega)
          (by simp [newReq, hprompt]) (by simp [newReq])
          (fun e he => by have := hcsid e he p hpin; simp only [newReq]; omega) hP
      have hxsid' : x.req.sid = p.sid := by rw [hxsid]; rfl
      have hxprompt' : x.req.prompt = P := by rw [hxprompt]; simp [newReq, hprompt]
      have hL : x.req.out - 1 - (x.known - x.req.prompt) = D - 1 := by
        rw [hxout, hxknown, hxprompt', hout]; simp
      obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_many eng ss m [p] ps [newReq eng ss p] _ hnext hdue hsub
        (by simp [noReq]) hxd hxw hxp (by rw [batchTokens_app, batchTokens_grow]; simp [batchTokens]; omega)
      rw [hcf] at e4 e7
      rw [stepAll_app, stepAll_cons] at e6
      simp only [stepAll, List.append_nil] at e6
      have hts : batchTokens (grow eng.blockSize m.running ++ [x]) = resCount m.running + P := by
        rw [batchTokens_app, batchTokens_grow]; simp [batchTokens, hxs]
      have hsp' : Spaced g P (step eng ss m).now (step eng ss m).pending := by
        rw [e1, e2]; exact spaced_mono (by omega) hrest
      have hrec' : ∀ y ∈ (step eng ss m).records,
          y.arrived * (P + (D - 1)) ≤ y.served + (P + (D - 1)) + tri (D - g) g (K - 1) := by
        intro y hy
        rcases e7 y hy with hy | ⟨ha, hs⟩
        · exact hrec y hy
        · rw [ha, hs, Nat.add_mul, Nat.one_mul, hcons]
          have h1 := sum_asc g (D - g) 1 m.running hasc (fun r hr => by have := hat r hr; omega)
          have h2 := tri_mono_n (D - g) g (show resCount m.running ≤ K - 1 by omega)
          omega
      have hcs' : ∀ e ∈ (step eng ss m).cache, ∀ q ∈ (step eng ss m).pending, e.sid < q.sid := by
        rw [e2]
        exact e8 (fun s => ∀ q ∈ ps, s < q.sid)
          (hxc (fun s => ∀ q ∈ ps, s < q.sid) (fun e he q hq => Nat.lt_trans (hcsid e he p hpin) (hsid q hq)))
          (fun y hy => by
            rcases List.mem_append.mp hy with hy | hy
            · obtain ⟨r, hr, rfl⟩ := mem_grow _ _ y hy
              exact fun q hq => hrsid r hr q (by rw [hp]; exact List.mem_cons_of_mem _ hq)
            · simp only [List.mem_singleton] at hy
              subst hy
              rw [hxsid']; exact hsid)
      have hsids' : ∀ q ∈ (step eng ss m).pending, q.sid < sessionCount ss := by
        rw [e2]; exact fun q hq => hsids q (List.mem_cons_of_mem _ hq)
      have hRg : ∀ y ∈ stepAll m.now (grow eng.blockSize m.running), y.remaining + g ≤ D - 1 ∧
          ∀ q ∈ ps, y.req.sid < q.sid := by
        intro y hy
        obtain ⟨r, hr, f1, _, _, _, _, f6⟩ := hR y hy
        have := hat r hr
        have := (hdecs r hr).2.1
        refine ⟨by omega, fun q hq => ?_⟩
        rw [f6]; exact hrsid r hr q (by rw [hp]; exact List.mem_cons_of_mem _ hq)
      rcases stepRes_prefill m.now x D hxdec (by omega) (by omega) hL with ⟨hX, hD⟩ | ⟨q, hq, hX, hD⟩
      · rw [hX, List.append_nil] at e6
        refine ⟨e3, by rw [e6]; exact hRdec, by rw [e6]; exact hRasc, hsp', ?_, ?_, hrec', hcs', ?_, hsids'⟩
        · rw [e1, e2, e6]
          cases ps with
          | nil => trivial
          | cons q qs =>
            have hq : p.time + g ≤ q.time := hrest.1
            intro y hy
            obtain ⟨r, hr, f1, _, _, _, _, _⟩ := hR y hy
            have := hat r hr
            have := (hdecs r hr).2.1
            omega
        · rw [e4, e5, e6, hts, Nat.add_mul, Nat.one_mul, hcons]; omega
        · rw [e6, e2]; intro y hy q hq; exact (hRg y hy).2 q hq
      · rw [hX] at e6
        have hyok : Decoding eng.blockSize P D ⟨q, x.alloc, x.pos + x.sched, x.known, true, D - 1, 0⟩ :=
          ⟨rfl, hD, Nat.le_refl _, by show x.pos + x.sched + (D - 1) = P + (D - 1); omega,
            Nat.le_trans hxalloc hPW⟩
        refine ⟨e3, ?_, ?_, hsp', ?_, ?_, hrec', hcs', ?_, hsids'⟩
        · rw [e6]; intro y hy
          rcases List.mem_append.mp hy with hy | hy
          · exact hRdec y hy
          · simp only [List.mem_singleton] at hy; subst hy; exact hyok
        · rw [e6]
          exact asc_append g _ 1 _ hRasc (fun y hy => (hRg y hy).1) (by show 1 ≤ D - 1; omega)
        · rw [e1, e2, e6]
          cases ps with
          | nil => trivial
          | cons q' qs =>
            have hq' : p.time + g ≤ q'.time := hrest.1
            intro y hy
            rcases List.mem_append.mp hy with hy | hy
            · obtain ⟨r, hr, f1, _, _, _, _, _⟩ := hR y hy
              have := hat r hr
              have := (hdecs r hr).2.1
              omega
            · simp only [List.mem_singleton] at hy; subst hy
              show D - 1 + (m.now + 1) + g ≤ D + q'.time
              omega
        · rw [e4, e5, e6, hts, sumRem_app, Nat.add_mul, Nat.one_mul, hcons]
          simp only [sumRem]
          omega
        · rw [e6, e2]; intro y hy q' hq'
          rcases List.mem_append.mp hy with hy | hy
          · exact (hRg y hy).2 q' hq'
          · simp only [List.mem_singleton] at hy; subst hy
            show q.sid < q'.sid
            rw [hq, hxsid']; exact hsid q' hq'
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
        refine ⟨rfl, by simp, trivial, ⟨Nat.le_refl _, hprompt, hturn, hsid, hrest⟩, ?_,
          by simpa [sumRem] using hcons, hrec, by rw [← hp]; exact hcsid, by simp, hsids⟩
        intro r hr; simp at hr
      · exact hdecode hr0 (fun q hq => by
          rw [hp] at hq
          rcases List.mem_cons.mp hq with rfl | hq
          · omega
          · have := spaced_le hrest q hq; omega)

theorem run_inv (eng : Engine) (g P D K : Nat) (ss : List Session) (hy : Hyp eng g P D K ss) :
    ∀ (fuel : Nat) (m : Machine), Inv eng g P D K ss m → Inv eng g P D K ss (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng g P D K ss hy fuel _ (step_inv eng g P D K ss hy m h)

end BacklogMany

/-- **The pathwise bounded backlog with several requests in flight.** Sessions arrive at least `g`
steps apart (`GappedDecode g P D 0 ss`), each one turn of a `P`-token prompt (`P > 0`) and `D`
output tokens, a request's work `W = P + (D - 1)`. With `K > 0` such that `D ≤ K · g` (a request
decodes for at most `K` gaps: at most `K` requests are in flight), a budget that takes a whole prompt
beside `K - 1` decodes (`P + (K - 1) ≤ budget`), `K` request slots, a KV pool of `K` requests' `W`
tokens (`K · blocksFor blockSize W ≤ kvBlocks`), vLLM's mixed schedule (`phased = false`) and a chunk
cap that does not cut a prompt (`chunk = 0 ∨ P ≤ chunk`), every iteration record of every run has
`arrived · W ≤ served + W + Σ_{j=1}^{K-1} (D - j · g)` (`tri (D - g) g (K - 1)`: at an arrival the
residents' work left ascends by `g` up to `D - g`). Proved, not assumed: the request cap and the KV
pool never bind and nothing is preempted (`BacklogMany.Inv`). -/
theorem backlog_many_tight (eng : Engine) (g P D K : Nat) (ss : List Session)
    (hph : eng.phased = false) (hch : eng.chunk = 0 ∨ P ≤ eng.chunk) (hP : 0 < P) (hg : 0 < g) (hK : 0 < K)
    (hmany : D ≤ K * g) (hB : P + (K - 1) ≤ eng.budget) (hcap : K ≤ eng.reqsCap)
    (hfits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records,
      r.arrived * (P + (D - 1)) ≤ r.served + (P + (D - 1)) + BacklogMany.tri (D - g) g (K - 1) := by
  have hy : BacklogMany.Hyp eng g P D K ss :=
    ⟨hph, hch, hP, hg, hK, hmany, hB, hcap, hfits, BacklogDecode.gapped_turns g P D 0 ss hw⟩
  exact (BacklogMany.run_inv eng g P D K ss hy fuel (init ss)
    (BacklogMany.init_inv eng g P D K ss hg hw)).records

/-- `backlog_many_tight` with `K` requests' work: `arrived · W ≤ served + K · W`. -/
theorem backlog_many (eng : Engine) (g P D K : Nat) (ss : List Session)
    (hph : eng.phased = false) (hch : eng.chunk = 0 ∨ P ≤ eng.chunk) (hP : 0 < P) (hg : 0 < g) (hK : 0 < K)
    (hmany : D ≤ K * g) (hB : P + (K - 1) ≤ eng.budget) (hcap : K ≤ eng.reqsCap)
    (hfits : K * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * (P + (D - 1)) ≤ r.served + K * (P + (D - 1)) := by
  intro r hr
  have h := backlog_many_tight eng g P D K ss hph hch hP hg hK hmany hB hcap hfits hw fuel r hr
  have h1 := BacklogMany.tri_le_mul (D - g) g (K - 1)
  have h2 := Nat.mul_le_mul_left (K - 1) (show D - g ≤ P + (D - 1) by omega)
  have h3 : (K - 1) * (P + (D - 1)) + (P + (D - 1)) = K * (P + (D - 1)) := by
    rw [← Nat.succ_mul]; congr 1; omega
  omega
