module

public import Serq.BacklogChunkStep

/-! # Phase-separated iterations, the lists' part (groundwork of `Serq.BacklogPhased`)

An engine that separates the phases (`phased = true`, FasterTransformer's `only (in_phase())` in both
statements of vLLM's schedule) runs two kinds of iteration. A *decode iteration* (some resident
decodes): the decodes, first in admission order, take one token each (`serve_decs`), the waiting
prefills behind them are passed over (`serve_skip`), and a fresh arrival is admitted without a token
(`admit_wait`): `plan_dec`, `plan_dec_arrive`. A *prefill iteration* (no resident decodes): every
resident prefill, not yet served, takes its whole prompt (`serve_pres`), and a fresh arrival is admitted
after them with its whole prompt: `plan_pre`, `plan_pre_arrive`. What the iteration leaves of its
batch (`pre_step`, `dec_step`, `stepAll_idle`).
-/
@[expose] public section

namespace Serq

namespace BacklogPhased

open Backlog BacklogDecode BacklogMany BacklogChunk

/-- A prefill admitted and not served yet: its whole prompt left. -/
def Fresh (bs P D : Nat) (r : Res) : Prop := Prefilling bs P D r ∧ r.pos = 0

theorem clearSched_app : ∀ (a b : List Res), clearSched (a ++ b) = clearSched a ++ clearSched b
  | [], _ => rfl
  | x :: xs, b => by simp only [List.cons_append, clearSched, clearSched_app xs b]

theorem stepAll_idle (now : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.sched = 0) → stepAll now L = L
  | [], _ => rfl
  | r :: rs, h => by
    have h0 := h r List.mem_cons_self
    rw [stepAll_cons, stepAll_idle now rs (fun x hx => h x (List.mem_cons_of_mem _ hx))]
    simp [stepRes, h0]

theorem clearSched_sched : ∀ (L : List Res), ∀ r ∈ clearSched L, r.sched = 0 := by
  intro L r hr
  obtain ⟨y, _, rfl⟩ := mem_clearSched L r hr
  rfl

theorem workLeft_clearSched (D : Nat) : ∀ (L : List Res), workLeft D (clearSched L) = workLeft D L
  | [] => rfl
  | r :: rs => by simp only [clearSched, workLeft, workLeft_clearSched D rs]

theorem workLeft_decs (D : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.decoding = true) → workLeft D L = sumRem L
  | [], _ => rfl
  | r :: rs, h => by
    simp only [workLeft, sumRem, h r List.mem_cons_self, if_true,
      workLeft_decs D rs (fun x hx => h x (List.mem_cons_of_mem _ hx))]

theorem workLeft_fresh (bs P D : Nat) : ∀ (L : List Res), (∀ r ∈ L, Fresh bs P D r) →
    workLeft D L = resCount L * (P + (D - 1))
  | [], _ => by simp [workLeft, resCount]
  | r :: rs, h => by
    obtain ⟨⟨hd, _, hpr, _⟩, hpos⟩ := h r List.mem_cons_self
    have ih := workLeft_fresh bs P D rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    simp only [workLeft, resCount, hd, Bool.false_eq_true, if_false, ih, Nat.succ_mul]
    omega

theorem usedBlocks_fresh (bs P D bW : Nat) (hb : blocksFor bs P ≤ bW) (L : List Res) (h : ∀ r ∈ L, Fresh bs P D r) :
    usedBlocks L ≤ resCount L * bW :=
  usedBlocks_le bW L (fun r hr => Nat.le_trans (h r hr).1.2.2.2.1 hb)

theorem anyDecoding_app_true : ∀ (Ds Ps : List Res), Ds ≠ [] → (∀ r ∈ Ds, r.decoding = true) →
    anyDecoding (Ds ++ Ps) = true
  | [], _, h, _ => absurd rfl h
  | r :: _, _, _, h => by simp [anyDecoding, h r List.mem_cons_self]

/-! ## Serving: decodes, then the prefills passed over; or every prefill whole -/

/-- The decodes at the head of the residents each take one token; the plan goes on with the rest. -/
theorem serve_decs (eng : Engine) (only : Option Bool) (hex : excluded only true = false) (bW : Nat) (R : List Res) :
    ∀ (L : List Res) (p : Plan) (fuel : Nat), p.todo = L ++ R → resCount L + resCount R < fuel →
    (∀ r ∈ L, DecOk eng.blockSize bW r) → resCount L < p.budget → p.selfPreempted = false →
    usedBlocks p.done + resCount L * bW + usedBlocks R ≤ eng.kvBlocks →
    ∃ q f, serveRunning eng only fuel p = serveRunning eng only f q ∧ resCount R < f ∧ q.todo = R ∧
      q.done = p.done ++ grow eng.blockSize L ∧ q.waiting = p.waiting ∧ q.preempted = p.preempted ∧
      q.budget = p.budget - resCount L ∧ q.selfPreempted = false ∧ q.chunk = p.chunk ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ q.cache, Q e.sid
  | [], p, fuel, htodo, hf, _, _, hsp, _ =>
    ⟨p, fuel, rfl, by simp only [resCount] at hf; omega, by simpa using htodo, by simp [grow], rfl, rfl,
      by simp [resCount], hsp, rfl, fun Q hQ => hQ⟩
  | r :: rest, p, fuel, htodo, hf, hL, hb, hsp, hkv => by
    obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 1 := ⟨fuel - 1, by simp only [resCount] at hf; omega⟩
    obtain ⟨hd, hrem, hgrow, halloc⟩ := hL r List.mem_cons_self
    have hrest : ∀ x ∈ rest, DecOk eng.blockSize bW x := fun x hx => hL x (List.mem_cons_of_mem _ hx)
    have hurest := usedBlocks_le bW rest (fun x hx => (hrest x hx).2.2.2)
    have hcount : resCount (r :: rest) = resCount rest + 1 := rfl
    rw [hcount, Nat.succ_mul] at hkv
    rw [hcount] at hb hf
    obtain ⟨q, hq, h1, h2, h3, h4, h5, h6, h8, h7⟩ := serve_dec_step eng only f p r (rest ++ R) htodo (by omega) hsp
      hd hrem hex (by rw [htodo]; simp only [List.cons_append, usedBlocks, usedBlocks_app]; omega)
    rw [hq]
    have hgr : r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc) ≤ bW := by omega
    obtain ⟨q', f', i0, i1, i2, i3, i4, i5, i6, i7, i8, i9⟩ := serve_decs eng only hex bW R rest q f h1 (by omega)
      hrest (by omega) h6 (by rw [h3, usedBlocks_app]; simp only [usedBlocks]; omega)
    refine ⟨q', f', i0, i1, i2, by rw [i3, h3]; simp [grow], by rw [i4, h4], by rw [i5, h5], ?_, i7,
      by rw [i8, h8], fun Q hQ => i9 Q (h7 Q hQ)⟩
    rw [i6, h2, hcount]; omega

/-- Residents the iteration's `only` leaves out are passed over, each kept as it is. -/
theorem serve_skip (eng : Engine) (only : Option Bool) : ∀ (R : List Res) (p : Plan) (fuel : Nat), p.todo = R →
    resCount R < fuel → (∀ r ∈ R, excluded only r.decoding = true) → 0 < p.budget → p.selfPreempted = false →
    serveRunning eng only fuel p = { p with done := p.done ++ R, todo := [] }
  | [], p, fuel, htodo, _, _, _, _ => by
    rw [serveRunning_nil eng only fuel p htodo]
    cases p
    simp only at htodo
    subst htodo
    simp
  | r :: rest, p, fuel, htodo, hf, hex, hb, hsp => by
    obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 1 := ⟨fuel - 1, by simp only [resCount] at hf; omega⟩
    have hb0 : ¬ (p.budget = 0 ∨ p.selfPreempted = true) := by simp [hsp]; omega
    have hx : r.remaining = 0 ∨ excluded only r.decoding = true := Or.inr (hex r List.mem_cons_self)
    rw [serveRunning, if_neg hb0]
    simp only [htodo]
    rw [if_pos hx]
    have ih := serve_skip eng only rest { p with done := appendRes p.done [r], todo := rest } f rfl
      (by simp only [resCount] at hf; omega) (fun x hx => hex x (List.mem_cons_of_mem _ hx)) hb hsp
    rw [ih]
    simp [appendRes_eq']

/-- Every resident, a prefill not served yet, takes its whole prompt `P` within the budget. -/
theorem serve_pres (eng : Engine) (only : Option Bool) (P D bW : Nat) (hex : excluded only false = false)
    (hPW : blocksFor eng.blockSize P ≤ bW) :
    ∀ (L : List Res) (p : Plan) (fuel : Nat), p.todo = L → resCount L < fuel →
    (∀ r ∈ L, Fresh eng.blockSize P D r) → capChunk p.chunk P = P →
    resCount L * P ≤ p.budget → p.selfPreempted = false →
    usedBlocks p.done + resCount L * bW ≤ eng.kvBlocks →
    (serveRunning eng only fuel p).done = p.done ++ serveL P eng.blockSize L ∧
    (serveRunning eng only fuel p).todo = [] ∧
    (serveRunning eng only fuel p).waiting = p.waiting ∧
    (serveRunning eng only fuel p).preempted = p.preempted ∧
    (serveRunning eng only fuel p).budget = p.budget - resCount L * P ∧
    (serveRunning eng only fuel p).chunk = p.chunk ∧
    ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (serveRunning eng only fuel p).cache, Q e.sid
  | [], p, fuel, htodo, _, _, _, _, _, _ => by
    rw [serveRunning_nil eng only fuel p htodo]
    exact ⟨by simp [serveL], htodo, rfl, rfl, by simp [resCount], rfl, fun Q hQ => hQ⟩
  | r :: rest, p, fuel, htodo, hf, hL, hch, hb, hsp, hkv => by
    obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 1 := ⟨fuel - 1, by simp only [resCount] at hf; omega⟩
    obtain ⟨⟨hd, hrem, hpr, halloc, _⟩, hpos⟩ := hL r List.mem_cons_self
    have hrest : ∀ x ∈ rest, Fresh eng.blockSize P D x := fun x hx => hL x (List.mem_cons_of_mem _ hx)
    have hurest := usedBlocks_fresh eng.blockSize P D bW hPW rest hrest
    have hcount : resCount (r :: rest) = resCount rest + 1 := rfl
    rw [hcount, Nat.succ_mul] at hkv hb
    rw [hcount] at hf
    have hrP : r.remaining = P := by omega
    have hN : (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = P := by
      rw [hd, hrP, Nat.min_eq_left (by omega)]; simpa using hch
    obtain ⟨q, hq, h1, h2, h3, h4, h5, h6, h8, h7⟩ := serve_step eng only f p r rest P htodo (by omega) hsp
      hrem (by rw [hd]; exact hex) hN
      (by rw [htodo, hpos, Nat.zero_add]; simp only [usedBlocks]; omega)
    rw [hq]
    have hdm : dem P r = P := by unfold dem; rw [if_neg (by simp [hd])]; omega
    obtain ⟨i1, i2, i3, i4, i5, i7, i6⟩ := serve_pres eng only P D bW hex hPW rest q f h1 (by omega) hrest
      (by rw [h8]; exact hch) (by rw [h2]; omega) h6
      (by rw [h3, usedBlocks_app, hpos, Nat.zero_add]; simp only [usedBlocks]; omega)
    refine ⟨by rw [i1, h3]; simp [serveL, serveOne, hdm], i2, by rw [i3, h4], by rw [i4, h5], ?_,
      by rw [i7, h8], fun Q hQ => i6 Q (h7 Q hQ)⟩
    rw [i5, h2, hcount, Nat.succ_mul]
    omega

/-- A fresh request of `P > 0` tokens at the head of the queue, after the residents, in a decode
iteration (the `only` leaves prefills out): admitted, it waits as a resident without a token. -/
theorem admit_wait (eng : Engine) (only : Option Bool) (fuel : Nat) (p : Plan) (rq : Req) (P : Nat)
    (hw : p.waiting = [rq]) (hb : 0 < p.budget) (hcap : resCount p.done < eng.reqsCap)
    (hex : excluded only false = true) (hkept : rq.kept = P)
    (hcomp : rq.computed = 0) (hown : ownCachedBlocks rq.sid p.cache = 0) (hP : 0 < P)
    (hK : usedBlocks p.done + blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ r, (admitHeads eng only (fuel + 1 + 1) p).done = appendRes p.done [r] ∧
      (admitHeads eng only (fuel + 1 + 1) p).waiting = [] ∧
      (admitHeads eng only (fuel + 1 + 1) p).preempted = p.preempted ∧ r.decoding = false ∧
      r.sched = 0 ∧ r.pos = 0 ∧ r.remaining = P ∧ r.alloc ≤ blocksFor eng.blockSize P ∧
      r.req.out = rq.out ∧ r.req.sid = rq.sid ∧ r.known = P ∧ r.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (admitHeads eng only (fuel + 1 + 1) p).cache, Q e.sid := by
  have hknown : max rq.kept (rq.computed + 1) = P := by rw [hkept, hcomp]; omega
  have hle : capChunk p.chunk (min P p.budget) ≤ P := by unfold capChunk; split <;> omega
  have hunits : blocksFor eng.blockSize (capChunk p.chunk (min P p.budget)) ≤ blocksFor eng.blockSize P :=
    blocksFor_mono _ hle
  have hgo : ¬ (p.budget = 0 ∨ resCount p.done ≥ eng.reqsCap) := by omega
  rw [admitHeads, if_neg hgo]
  simp only [hw, hknown, hown, Nat.zero_mul, Nat.zero_min, Nat.sub_zero, Nat.zero_add, hex, if_true]
  rw [if_neg (by omega)]
  rw [admitHeads_nil eng only _ _ rfl]
  refine ⟨_, rfl, rfl, rfl, rfl, rfl, rfl, rfl, hunits, ?_, ?_, rfl, ?_,
    fun Q hQ => evict_sid Q _ _ (consume_sid Q _ _ _ hQ)⟩
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl

/-! ## The plans -/

theorem excluded_dec (eng : Engine) (hph : eng.phased = true) (rs : List Res) (h : anyDecoding rs = true) :
    excluded (phaseOf eng rs) true = false ∧ excluded (phaseOf eng rs) false = true := by
  simp [phaseOf, hph, h, excluded]

theorem excluded_pre (eng : Engine) (rs : List Res) (h : anyDecoding rs = false) :
    excluded (phaseOf eng rs) false = false := by
  unfold phaseOf
  split <;> simp [excluded, h]

/-- The plan of a decode iteration with no arrival: the decodes take a token each, the prefills wait. -/
theorem plan_dec (eng : Engine) (c bW : Nat) (m : Machine) (Ds Ps : List Res) (hph : eng.phased = true)
    (hr : m.running = Ds ++ Ps) (hne : Ds ≠ []) (hD : ∀ r ∈ Ds, DecOk eng.blockSize bW r)
    (hPs : ∀ r ∈ Ps, r.decoding = false ∧ r.alloc ≤ bW) (hb : resCount Ds < eng.budget)
    (hkv : (resCount Ds + resCount Ps) * bW ≤ eng.kvBlocks) :
    (plan eng c m []).done = grow eng.blockSize Ds ++ clearSched Ps ∧ (plan eng c m []).waiting = [] ∧
      (plan eng c m []).preempted = 0 ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m []).cache, Q e.sid := by
  have hany : anyDecoding m.running = true := by
    rw [hr]; exact anyDecoding_app_true Ds Ps hne (fun r h => (hD r h).1)
  obtain ⟨hex, hexP⟩ := excluded_dec eng hph _ hany
  have hup := usedBlocks_le bW (clearSched Ps) (fun x hx => by
    obtain ⟨y, hy, rfl⟩ := mem_clearSched Ps x hx; exact (hPs y hy).2)
  rw [resCount_clearSched'] at hup
  obtain ⟨q, f, i0, i1, i2, i3, i4, i5, i6, i7, _, i9⟩ := serve_decs eng (phaseOf eng m.running) hex bW
    (clearSched Ps) (clearSched Ds)
    ⟨eng.budget, c, [], clearSched m.running, [], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1)
    (by rw [hr, clearSched_app]) (by rw [hr, resCount_app, resCount_clearSched', resCount_clearSched']; omega)
    (clearSched_ok _ _ _ hD) (by rw [resCount_clearSched']; exact hb) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; rw [Nat.add_mul] at hkv; omega)
  have hs := serve_skip eng (phaseOf eng m.running) (clearSched Ps) q f i2 i1
    (fun x hx => by obtain ⟨y, hy, rfl⟩ := mem_clearSched Ps x hx; dsimp only; rw [(hPs y hy).1]; exact hexP)
    (by rw [i6]; dsimp only; rw [resCount_clearSched']; omega) i7
  unfold plan
  dsimp only
  rw [i0, hs]
  dsimp only
  rw [if_pos i5]
  rw [admitHeads_nil eng _ _ _ (by dsimp only; rw [i4])]
  refine ⟨by simp [i3, appendRes_eq', grow_clearSched], by simp [i4], by simp [i5], fun Q hQ => i9 Q hQ⟩

/-- The plan of a decode iteration with an arrival: the decodes take a token each, the prefills wait,
and the arrival is admitted without a token. -/
theorem plan_dec_arrive (eng : Engine) (c bW P : Nat) (m : Machine) (Ds Ps : List Res) (rq : Req)
    (hph : eng.phased = true) (hr : m.running = Ds ++ Ps) (hne : Ds ≠ []) (hD : ∀ r ∈ Ds, DecOk eng.blockSize bW r)
    (hPs : ∀ r ∈ Ps, r.decoding = false ∧ r.alloc ≤ bW) (hb : resCount Ds < eng.budget)
    (hcap : resCount Ds + resCount Ps < eng.reqsCap)
    (hkv : (resCount Ds + resCount Ps) * bW + blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hkept : rq.kept = P) (hcomp : rq.computed = 0) (hown : ∀ e ∈ m.cache, e.sid ≠ rq.sid) (hP : 0 < P) :
    ∃ x, (plan eng c m [rq]).done = grow eng.blockSize Ds ++ clearSched Ps ++ [x] ∧
      (plan eng c m [rq]).waiting = [] ∧ (plan eng c m [rq]).preempted = 0 ∧ x.decoding = false ∧
      x.sched = 0 ∧ x.pos = 0 ∧ x.remaining = P ∧ x.alloc ≤ blocksFor eng.blockSize P ∧
      x.req.out = rq.out ∧ x.req.sid = rq.sid ∧ x.known = P ∧ x.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m [rq]).cache, Q e.sid := by
  have hany : anyDecoding m.running = true := by
    rw [hr]; exact anyDecoding_app_true Ds Ps hne (fun r h => (hD r h).1)
  obtain ⟨hex, hexP⟩ := excluded_dec eng hph _ hany
  have hup := usedBlocks_le bW (clearSched Ps) (fun x hx => by
    obtain ⟨y, hy, rfl⟩ := mem_clearSched Ps x hx; exact (hPs y hy).2)
  rw [resCount_clearSched'] at hup
  have hug : usedBlocks (grow eng.blockSize Ds) ≤ resCount Ds * bW := by
    rw [← resCount_grow eng.blockSize Ds]
    apply usedBlocks_le
    intro x hx
    obtain ⟨r, hr', rfl⟩ := mem_grow _ _ x hx
    obtain ⟨_, _, h1, h2⟩ := hD r hr'
    show r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc) ≤ bW
    omega
  obtain ⟨q, f, i0, i1, i2, i3, i4, i5, i6, i7, i8, i9⟩ := serve_decs eng (phaseOf eng m.running) hex bW
    (clearSched Ps) (clearSched Ds)
    ⟨eng.budget, c, [], clearSched m.running, [rq], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1)
    (by rw [hr, clearSched_app]) (by rw [hr, resCount_app, resCount_clearSched', resCount_clearSched']; omega)
    (clearSched_ok _ _ _ hD) (by rw [resCount_clearSched']; exact hb) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; rw [Nat.add_mul] at hkv; omega)
  have hs := serve_skip eng (phaseOf eng m.running) (clearSched Ps) q f i2 i1
    (fun x hx => by obtain ⟨y, hy, rfl⟩ := mem_clearSched Ps x hx; dsimp only; rw [(hPs y hy).1]; exact hexP)
    (by rw [i6]; dsimp only; rw [resCount_clearSched']; omega) i7
  unfold plan
  dsimp only
  rw [i0, hs]
  dsimp only
  rw [if_pos i5]
  have e : reqCount q.waiting + 1 = 0 + 1 + 1 := by rw [i4]; rfl
  rw [e]
  have hdone : appendRes (q.done ++ clearSched Ps) [] = grow eng.blockSize Ds ++ clearSched Ps := by
    simp [i3, appendRes_eq', grow_clearSched]
  rw [resCount_clearSched'] at i6
  obtain ⟨x, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13⟩ :=
    admit_wait eng (phaseOf eng m.running) 0
      { q with done := appendRes (q.done ++ clearSched Ps) [], todo := [] } rq P
      (by simp [i4]) (by dsimp only; rw [i6]; dsimp only; omega)
      (by simp only [hdone, resCount_app, resCount_grow, resCount_clearSched']; exact hcap) hexP hkept hcomp
      (ownCachedBlocks_zero _ _ (i9 (fun s => s ≠ rq.sid) hown)) hP
      (by simp only [hdone, usedBlocks_app]; rw [Nat.add_mul] at hkv; omega)
  refine ⟨x, by rw [a1]; simp only [hdone, appendRes_eq'], a2, by rw [a3]; exact i5, a4, a5, a6, a7, a8, a9, a10,
    a11, a12, fun Q hQ => a13 Q (i9 Q hQ)⟩

/-- The plan of a prefill iteration with no arrival: every resident takes its whole prompt. -/
theorem plan_pre (eng : Engine) (c P D bW : Nat) (m : Machine)
    (hL : ∀ r ∈ m.running, Fresh eng.blockSize P D r) (hc : capChunk c P = P)
    (hb : resCount m.running * P ≤ eng.budget) (hPW : blocksFor eng.blockSize P ≤ bW)
    (hkv : resCount m.running * bW ≤ eng.kvBlocks) :
    (plan eng c m []).done = serveL P eng.blockSize m.running ∧ (plan eng c m []).waiting = [] ∧
      (plan eng c m []).preempted = 0 ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m []).cache, Q e.sid := by
  have hany : anyDecoding m.running = false := anyDecoding_false _ (fun r h => (hL r h).1.1)
  have hex := excluded_pre eng _ hany
  obtain ⟨i1, i2, i3, i4, _, _, i6⟩ := serve_pres eng (phaseOf eng m.running) P D bW hex hPW (clearSched m.running)
    ⟨eng.budget, c, [], clearSched m.running, [], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega)
    (fun x hx => by obtain ⟨y, hy, rfl⟩ := mem_clearSched _ x hx; exact hL y hy) hc
    (by rw [resCount_clearSched']; exact hb) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; exact hkv)
  unfold plan
  dsimp only
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, c, [], clearSched m.running, [], m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i6 ⊢
  rw [if_pos i4]
  rw [admitHeads_nil eng _ _ { p1 with done := appendRes p1.done p1.todo, todo := [] } (by simp [i3])]
  refine ⟨by simp [i1, i2, appendRes_eq', serveL_clearSched], by simp [i3], by simp [i4], fun Q hQ => i6 Q hQ⟩

/-- The plan of a prefill iteration with an arrival: every resident takes its whole prompt, and the
arrival is admitted after them with its whole prompt. -/
theorem plan_pre_arrive (eng : Engine) (c P D bW : Nat) (m : Machine) (rq : Req)
    (hL : ∀ r ∈ m.running, Fresh eng.blockSize P D r) (hc : capChunk c P = P)
    (hb : (resCount m.running + 1) * P ≤ eng.budget) (hPW : blocksFor eng.blockSize P ≤ bW)
    (hcap : resCount m.running < eng.reqsCap)
    (hkv : resCount m.running * bW + blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hkept : rq.kept = P) (hcomp : rq.computed = 0) (hown : ∀ e ∈ m.cache, e.sid ≠ rq.sid) (hP : 0 < P) :
    ∃ x, (plan eng c m [rq]).done = serveL P eng.blockSize m.running ++ [x] ∧ (plan eng c m [rq]).waiting = [] ∧
      (plan eng c m [rq]).preempted = 0 ∧ x.decoding = false ∧
      x.sched = P ∧ x.pos = 0 ∧ x.remaining = P ∧ x.alloc ≤ blocksFor eng.blockSize P ∧
      x.req.out = rq.out ∧ x.req.sid = rq.sid ∧ x.known = P ∧ x.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m [rq]).cache, Q e.sid := by
  have hany : anyDecoding m.running = false := anyDecoding_false _ (fun r h => (hL r h).1.1)
  have hex := excluded_pre eng _ hany
  have hub : usedBlocks (serveL P eng.blockSize m.running) ≤ resCount m.running * bW := by
    have := usedBlocks_serveL P eng.blockSize bW m.running (fun r hr => by
      obtain ⟨⟨hd, hrem, hpr, halloc, _⟩, hpos⟩ := hL r hr
      refine ⟨hrem, ?_, Nat.le_trans halloc hPW⟩
      have : dem P r = P := by unfold dem; rw [if_neg (by simp [hd])]; omega
      rw [this, hpos, Nat.zero_add]; exact hPW)
    exact this
  rw [Nat.succ_mul] at hb
  obtain ⟨i1, i2, i3, i4, i5, i7, i6⟩ := serve_pres eng (phaseOf eng m.running) P D bW hex hPW (clearSched m.running)
    ⟨eng.budget, c, [], clearSched m.running, [rq], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega)
    (fun x hx => by obtain ⟨y, hy, rfl⟩ := mem_clearSched _ x hx; exact hL y hy) hc
    (by rw [resCount_clearSched']; show resCount m.running * P ≤ eng.budget; omega) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; omega)
  unfold plan
  dsimp only
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, c, [], clearSched m.running, [rq], m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i5 i7 i6 ⊢
  rw [if_pos i4]
  have e : reqCount p1.waiting + 1 = 0 + 1 + 1 := by rw [i3]; rfl
  rw [e]
  have hdone : appendRes p1.done p1.todo = serveL P eng.blockSize m.running := by
    simp [i1, i2, appendRes_eq', serveL_clearSched]
  rw [resCount_clearSched'] at i5
  obtain ⟨x, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13⟩ :=
    admit_after eng (phaseOf eng m.running) 0 { p1 with done := appendRes p1.done p1.todo, todo := [] } rq P
      (by simp [i3]) (by dsimp only; rw [i5]; dsimp only; omega)
      (by simp only [hdone, resCount_serveL]; exact hcap) (by dsimp only; rw [i7]; exact hc) hex hkept hcomp
      (ownCachedBlocks_zero _ _ (i6 (fun s => s ≠ rq.sid) hown)) hP (by simp only [hdone]; omega)
  refine ⟨x, by rw [a1]; simp only [hdone, appendRes_eq'], a2, by rw [a3]; exact i4, a4, a5, a6, a7, a8, a9, a10,
    a11, a12, fun Q hQ => a13 Q (i6 Q hQ)⟩

/-! ## What an iteration leaves of its batch -/

/-- A prefill served its whole prompt `P` in the iteration. -/
def Whole (bs P D : Nat) (y : Res) : Prop :=
  y.decoding = false ∧ y.sched = P ∧ y.remaining = P ∧ y.pos = 0 ∧ y.alloc ≤ blocksFor bs P ∧
    y.known = P ∧ y.req.prompt = P ∧ y.req.out - 1 = D - 1

theorem whole_serveL (bs P D : Nat) (L : List Res) (h : ∀ r ∈ L, Fresh bs P D r) :
    ∀ y ∈ serveL P bs L, Whole bs P D y := by
  intro y hy
  obtain ⟨r, hr, rfl⟩ := mem_serveL P bs L y hy
  obtain ⟨⟨hd, hrem, hpr, halloc, hk, hp, ho⟩, hpos⟩ := h r hr
  have hdm : dem P r = P := by unfold dem; rw [if_neg (by simp [hd])]; omega
  refine ⟨hd, hdm, by show r.remaining = P; omega, hpos, ?_, hk, hp, ho⟩
  show r.alloc + (blocksFor bs (r.pos + dem P r) - r.alloc) ≤ blocksFor bs P
  rw [hdm, hpos, Nat.zero_add]; omega

theorem batchTokens_whole (bs P D : Nat) : ∀ (L : List Res), (∀ y ∈ L, Whole bs P D y) →
    batchTokens L = resCount L * P
  | [], _ => by simp [batchTokens, resCount]
  | y :: ys, h => by
    have ih := batchTokens_whole bs P D ys (fun x hx => h x (List.mem_cons_of_mem _ hx))
    simp only [batchTokens, resCount, ih, (h y List.mem_cons_self).2.1, Nat.succ_mul]
    omega

/-- After a prefill iteration: each prefill served whole decodes its `D - 1` tokens left, or ends. -/
theorem pre_step (bs P D now : Nat) (hP : 0 < P) : ∀ (L : List Res), (∀ y ∈ L, Whole bs P D y) →
    (∀ z ∈ stepAll now L, Decoding bs P D z ∧ z.remaining = D - 1 ∧ ∃ y ∈ L, z.req.sid = y.req.sid) ∧
    workLeft D (stepAll now L) + batchTokens L = workLeft D L ∧ resCount (stepAll now L) ≤ resCount L
  | [], _ => ⟨fun z hz => by simp [stepAll] at hz, by simp [stepAll, workLeft, batchTokens], Nat.le_refl _⟩
  | y :: ys, h => by
    obtain ⟨i1, i2, _⟩ := pre_step bs P D now hP ys (fun x hx => h x (List.mem_cons_of_mem _ hx))
    obtain ⟨hd, hs, hrem, hpos, halloc, hk, hp, ho⟩ := h y List.mem_cons_self
    have hL : y.req.out - 1 - (y.known - y.req.prompt) = D - 1 := by rw [ho, hk, hp]; simp
    have hwy : workLeft D (y :: ys) = P + (D - 1) + workLeft D ys := by
      simp only [workLeft, hd, Bool.false_eq_true, if_false, hrem]
    refine ⟨?_, ?_, resCount_stepAll now _⟩
    · intro z hz
      rw [stepAll_cons] at hz
      rcases List.mem_append.mp hz with hz | hz
      · rcases stepRes_prefill now y D hd (by omega) (by omega) hL with ⟨h0, _⟩ | ⟨q, hq, h0, hD⟩
        · rw [h0] at hz; simp at hz
        · rw [h0] at hz
          simp only [List.mem_singleton] at hz
          subst hz
          refine ⟨⟨rfl, hD, Nat.le_refl _, ?_, ?_⟩, rfl, y, List.mem_cons_self, hq⟩
          · show y.pos + y.sched + (D - 1) = P + (D - 1); omega
          · exact Nat.le_trans halloc (blocksFor_mono _ (by omega))
      · obtain ⟨w, hw, e⟩ := (i1 z hz).2.2
        exact ⟨(i1 z hz).1, (i1 z hz).2.1, w, List.mem_cons_of_mem _ hw, e⟩
    · rw [stepAll_cons, workLeft_app, hwy]
      simp only [batchTokens]
      rcases stepRes_prefill now y D hd (by omega) (by omega) hL with ⟨h0, hD⟩ | ⟨q, _, h0, _⟩
      · rw [h0]; simp only [workLeft]; omega
      · rw [h0, workLeft_dec D _ rfl]; dsimp only; omega

/-- After a decode iteration: each decode served one token has one fewer left, or ends. -/
theorem dec_step (bs P D d now : Nat) (L : List Res) (h : ∀ r ∈ L, Decoding bs P D r ∧ r.remaining = d) :
    (∀ z ∈ stepAll now (grow bs L), Decoding bs P D z ∧ z.remaining = d - 1 ∧ ∃ y ∈ L, z.req.sid = y.req.sid) ∧
    workLeft D (stepAll now (grow bs L)) + batchTokens (grow bs L) = workLeft D L ∧
    resCount (stepAll now (grow bs L)) ≤ resCount L := by
  have hdec : ∀ r ∈ L, r.decoding = true := fun r hr => (h r hr).1.1
  refine ⟨?_, ?_, ?_⟩
  · intro z hz
    obtain ⟨r, hr, e1, e2, e3, e4, e5, e6⟩ := stepAll_grow_mem now bs L hdec z hz
    obtain ⟨⟨_, hrem, hle, hpr, halloc⟩, hd⟩ := h r hr
    refine ⟨⟨e3, e2, by omega, by omega, ?_⟩, by omega, r, hr, e6⟩
    rw [e5]
    have := blocksFor_mono bs (show r.pos + 1 ≤ P + (D - 1) by omega)
    omega
  · have hs := stepAll_grow_sum now bs L (fun r hr => ⟨hdec r hr, (h r hr).1.2.1⟩)
    have hdec' : ∀ z ∈ stepAll now (grow bs L), z.decoding = true := fun z hz => by
      obtain ⟨r, _, _, _, e3, _⟩ := stepAll_grow_mem now bs L hdec z hz; exact e3
    rw [workLeft_decs D _ hdec', workLeft_decs D _ hdec, batchTokens_grow]
    exact hs
  · have := resCount_stepAll now (grow bs L)
    rw [resCount_grow] at this
    exact this

/-! ## Arrival times of the waiting prefills -/

theorem chain_now {Q : Nat → Res → Prop} {g now now' : Nat} (hn : now ≤ now') : ∀ {x : Nat} {L : List Res} {z : Nat},
    Chain Q g now x L z → Chain Q g now' x L z
  | _, [], _, h => h
  | _, _ :: _, _, ⟨a, h1, h2, h3, h4⟩ => ⟨a, h1, by omega, h3, chain_now hn h4⟩

/-- At most `J` prefills arrive within `D` steps, `g` apart, when `D ≤ J · g`. -/
theorem count_window {k g D J x z : Nat} (hJ : D ≤ J * g) (hlen : x + k * g ≤ z) (hz : z + 1 ≤ x + D + g) :
    k ≤ J := by
  rcases Nat.lt_or_ge J k with h | h
  · have := Nat.mul_le_mul_right g (show J + 1 ≤ k by omega)
    rw [Nat.succ_mul] at this
    omega
  · exact h

end BacklogPhased

end Serq
