module

public import Serq.DriftMachine

/-! # The drift chain on the machine with fixed caps (issue 14, result 7)

`Serq.drift_machine_step` and the theorems built on it ask for a request slot and `bW` blocks for every
session of the path (`sessionCount ss ≤ reqsCap`), so on a random path the caps grow with the horizon.
Here the caps are fixed: `2 + budget / W ≤ reqsCap` and `(2 + budget / W) · bW ≤ kvBlocks`, whatever the
sessions and the horizon. With at most one output token a request whose prompt completes finishes in
its iteration (its prefill samples its token), so at most one resident survives an iteration: the
prefill the budget cut (`stepAll_unfinished`, `unfinished`: the residents that took less than their
remainder). An iteration serves that resident and admits fresh `W`-token requests while the budget
lasts: at most `budget / W + 1` of them (`admitC`: the admission stops at the budget before the caps),
so with the fixed caps the caps never bind.

The coupling: the machine with the fixed caps takes, at every step of every run, the same step as the
same engine with any larger caps (`Wider`: same budget, block size, chunk, caching, schedule; caps at
least as large): `stepC` (the plan, `planC`, over `serveC` and `admitC`, and the submission, `submitC`,
and `applyC`), `settledC`, so `runC`: the two runs are equal. The invariant (`InvC`): residents
prefills (`PreOk`), at most one; queue fresh `W`-token requests (`Fresh`, no bound on its length);
pending prompts `W`; no cache entry. Through the engine with the caps `sessionCount ss` added
(`bigEng`), every theorem proved with the old caps holds with the fixed caps:
`Serq.drift_machine_step_caps`, `Serq.drift_machine_clock_caps`, `Serq.drift_machine_empty_caps`,
`Serq.drift_machine_on_time_caps`, and `Serq.drift_machine_one_resident_caps` (every machine of every run
has at most one resident). The time-indexed theorems are in `Serq.DriftMachineCapsTime`, the law over
the arrival paths and the return time in `Serq.DriftPathsCaps`. Open here: sessions with more than one
output token (decodes hold their slot for several iterations, so the residents are not bounded by the
budget alone).
-/

@[expose] public section

namespace Serq

namespace DriftMachine

open Backlog BacklogDecode BacklogMany

/-! ## An engine with larger caps -/

/-- `E` is `eng` with caps at least as large: the same budget, block size, chunk cap, caching and
schedule. -/
def Wider (eng E : Engine) : Prop :=
  E.budget = eng.budget ∧ E.blockSize = eng.blockSize ∧ E.chunk = eng.chunk ∧ E.caching = eng.caching ∧
    E.phased = eng.phased ∧ eng.reqsCap ≤ E.reqsCap ∧ eng.kvBlocks ≤ E.kvBlocks

/-- The engine with `n` more request slots and `n · bW` more blocks. -/
def bigEng (eng : Engine) (n bW : Nat) : Engine :=
  { eng with reqsCap := eng.reqsCap + n, kvBlocks := eng.kvBlocks + n * bW }

theorem bigEng_wider (eng : Engine) (n bW : Nat) : Wider eng (bigEng eng n bW) :=
  ⟨rfl, rfl, rfl, rfl, rfl, Nat.le_add_right _ _, Nat.le_add_right _ _⟩

theorem bigEng_req (eng : Engine) (n bW : Nat) : n ≤ (bigEng eng n bW).reqsCap :=
  Nat.le_add_left n eng.reqsCap

theorem bigEng_kv (eng : Engine) (n bW : Nat) : n * bW ≤ (bigEng eng n bW).kvBlocks :=
  Nat.le_add_left (n * bW) eng.kvBlocks

theorem bigEng_fit (eng : Engine) (n bW W : Nat) (h : blocksFor eng.blockSize W ≤ eng.kvBlocks) :
    blocksFor (bigEng eng n bW).blockSize W ≤ (bigEng eng n bW).kvBlocks :=
  Nat.le_trans h (Nat.le_add_right eng.kvBlocks (n * bW))

theorem evict_nil : ∀ (n : Nat), evict n [] = []
  | 0 => rfl
  | _ + 1 => rfl

/-! ## The residents an iteration leaves -/

/-- The residents that took less than their remainder. -/
def unfinished : List Res → Nat
  | [] => 0
  | r :: rs => (if r.sched < r.remaining then 1 else 0) + unfinished rs

theorem unfinished_app : ∀ (a b : List Res), unfinished (a ++ b) = unfinished a + unfinished b
  | [], b => by simp [unfinished]
  | x :: xs, b => by simp only [List.cons_append, unfinished, unfinished_app xs b]; omega

/-- **A prefill (at most one output token) that took its remainder finishes**: only the residents that
took less than their remainder survive an iteration. -/
theorem stepAll_unfinished (now : Nat) : ∀ (L : List Res),
    (∀ r ∈ L, r.decoding = false ∧ 0 < r.remaining ∧ r.sched ≤ r.remaining ∧ r.req.out ≤ 1) →
    resCount (stepAll now L) ≤ unfinished L
  | [], _ => by simp [stepAll, resCount, unfinished]
  | r :: rs, h => by
    obtain ⟨hd, hrem, hs, hout⟩ := h r List.mem_cons_self
    have ih := stepAll_unfinished now rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    rw [stepAll_cons, resCount_app]
    simp only [unfinished]
    have h1 := resCount_stepRes now r
    obtain ⟨j1, j2⟩ := stepRes_prefill_sum now r hd hs hout
    by_cases hlt : r.sched < r.remaining
    · rw [if_pos hlt]; omega
    · rw [if_neg hlt]
      have h0 : resCount (stepRes now r) = 0 := by
        cases hst : stepRes now r with
        | nil => rfl
        | cons x xs =>
          have hx := (j2 x (by rw [hst]; exact List.mem_cons_self)).2.2.2.2.2 hrem
          rw [hst] at j1
          simp only [sumRem] at j1
          omega
      omega

/-- One resident served: unfinished only if the budget ran out at it. -/
theorem servePre_unfinished (bs b : Nat) (hb : 0 < b) (L : List Res) (h1 : resCount L ≤ 1) :
    unfinished (servePre bs b L) = 0 ∨ (unfinished (servePre bs b L) = 1 ∧ b - min b (sumRem L) = 0) := by
  match L, h1 with
  | [], _ => exact Or.inl rfl
  | [r], _ =>
    have hb0 : ¬ b = 0 := by omega
    simp only [servePre, hb0, if_false, unfinished, sumRem]
    split <;> omega
  | _ :: _ :: _, h => simp [resCount] at h

/-! ## Admitting fresh requests until the budget runs out -/

/-- The head of the queue, fresh, admitted by two engines with the same block size, each with a slot and
room for it: the same plan after it. -/
theorem admitC_step (eng E : Engine) (only : Option Bool) (f : Nat) (p : Plan) (rq : Req) (rest : List Req)
    (W : Nat) (hbs : E.blockSize = eng.blockSize) (hw : p.waiting = rq :: rest) (hb : 0 < p.budget)
    (hcap : resCount p.done < eng.reqsCap) (hcapE : resCount p.done < E.reqsCap)
    (hch : p.chunk = 0) (hex : excluded only false = false) (hkept : rq.kept = W) (hcomp : rq.computed = 0)
    (hhit : rq.hit = 0) (hW : 0 < W) (hK : usedBlocks p.done + blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hKE : usedBlocks p.done + blocksFor eng.blockSize W ≤ E.kvBlocks) (hc : p.cache = []) :
    ∃ q x, admitHeads eng only (f + 1) p = admitHeads eng only f q ∧
      admitHeads E only (f + 1) p = admitHeads E only f q ∧ q.waiting = rest ∧ q.cache = [] ∧
      q.done = appendRes p.done [x] ∧ q.budget = p.budget - min W p.budget ∧ q.chunk = 0 ∧
      x.sched = min W p.budget ∧ x.remaining = W ∧ x.alloc ≤ blocksFor eng.blockSize W := by
  have hknown : max rq.kept (rq.computed + 1) = W := by rw [hkept, hcomp]; omega
  have hreuse : reuseCap eng.blockSize rq W = 0 := by simp [reuseCap, hcomp, hhit]
  have hunits : blocksFor eng.blockSize (min W p.budget) ≤ blocksFor eng.blockSize W := blocksFor_mono _ (by omega)
  have hgo : ¬ (p.budget = 0 ∨ resCount p.done ≥ eng.reqsCap) := by omega
  have hgoE : ¬ (p.budget = 0 ∨ resCount p.done ≥ E.reqsCap) := by omega
  have hn : ¬ (usedBlocks p.done + max (blocksFor eng.blockSize (min W p.budget)) (blocksFor eng.blockSize W)
      > eng.kvBlocks) := by omega
  have hnE : ¬ (usedBlocks p.done + max (blocksFor eng.blockSize (min W p.budget)) (blocksFor eng.blockSize W)
      > E.kvBlocks) := by omega
  rw [admitHeads, admitHeads, if_neg hgo, if_neg hgoE]
  simp only [hw, hbs, hknown, hreuse, hc, Nat.min_zero, Nat.sub_zero, hch, capChunk_zero, Nat.zero_add, hex,
    Bool.false_eq_true, if_false]
  rw [if_neg hn, if_neg hnE]
  simp only [consume, evict_nil]
  refine ⟨_, _, rfl, rfl, rfl, rfl, rfl, rfl, rfl, rfl, rfl, hunits⟩

/-- **The admission stops at the budget before the caps**: with `budget ≤ c · W` and a slot and `bW`
blocks for `c` more requests, the heads of a fresh queue of any length are admitted as by any engine
with larger caps, no cache entry appears, and of those admitted at most one is left unfinished, none if
the budget was spent before. -/
theorem admitC (eng E : Engine) (only : Option Bool) (hex : excluded only false = false) (W bW : Nat)
    (hW : 0 < W) (hbW : blocksFor eng.blockSize W ≤ bW) (hbs : E.blockSize = eng.blockSize)
    (hR : eng.reqsCap ≤ E.reqsCap) (hK : eng.kvBlocks ≤ E.kvBlocks) :
    ∀ (fuel : Nat) (p : Plan) (c : Nat), (∀ rq ∈ p.waiting, Fresh W rq) → p.chunk = 0 → p.cache = [] →
    p.budget ≤ c * W → resCount p.done + c ≤ eng.reqsCap → usedBlocks p.done + c * bW ≤ eng.kvBlocks →
    admitHeads E only fuel p = admitHeads eng only fuel p ∧ (admitHeads eng only fuel p).cache = [] ∧
      ∃ A, (admitHeads eng only fuel p).done = p.done ++ A ∧ unfinished A ≤ 1 ∧ (p.budget = 0 → A = [])
  | 0, p, _, _, _, hc, _, _, _ => ⟨rfl, hc, [], (List.append_nil _).symm, by simp [unfinished], fun _ => rfl⟩
  | f + 1, p, c, hQ, hch, hc, hbc, hcap, hkv => by
    by_cases hb : p.budget = 0
    · have e1 : admitHeads E only (f + 1) p = p := by rw [admitHeads, if_pos (Or.inl hb)]
      have e2 : admitHeads eng only (f + 1) p = p := by rw [admitHeads, if_pos (Or.inl hb)]
      rw [e1, e2]
      exact ⟨rfl, hc, [], by simp, by simp [unfinished], fun _ => rfl⟩
    cases hw : p.waiting with
    | nil =>
      rw [admitHeads_nil E only _ p hw, admitHeads_nil eng only _ p hw]
      exact ⟨rfl, hc, [], by simp, by simp [unfinished], fun _ => rfl⟩
    | cons rq rest =>
      have hc0 : c ≠ 0 := by rintro rfl; rw [Nat.zero_mul] at hbc; omega
      obtain ⟨c', rfl⟩ := Nat.exists_eq_add_one_of_ne_zero hc0
      obtain ⟨hk, hcm, hh, _⟩ := hQ rq (by rw [hw]; exact List.mem_cons_self)
      rw [Nat.add_one_mul] at hbc hkv
      obtain ⟨q, x, e1, e2, q1, q2, q3, q4, q5, x1, x2, x3⟩ := admitC_step eng E only f p rq rest W hbs hw
        (by omega) (by omega) (by omega) hch hex hk hcm hh hW (by omega) (by omega) hc
      have hxa : x.alloc ≤ bW := Nat.le_trans x3 hbW
      obtain ⟨i1, i2, A, a1, a2, a3⟩ := admitC eng E only hex W bW hW hbW hbs hR hK f q c'
        (by rw [q1]; exact fun y hy => hQ y (by rw [hw]; exact List.mem_cons_of_mem _ hy)) q5 q2
        (by rw [q4]; omega)
        (by rw [q3, appendRes_eq', resCount_app]; simp only [resCount]; omega)
        (by rw [q3, appendRes_eq', usedBlocks_app]; simp only [usedBlocks]; omega)
      rw [e1, e2]
      refine ⟨i1, i2, x :: A, by rw [a1, q3, appendRes_eq']; simp, ?_, fun h => absurd h hb⟩
      simp only [unfinished]
      rw [x1, x2]
      by_cases hWb : W ≤ p.budget
      · rw [if_neg (by omega)]; omega
      · rw [if_pos (by omega), a3 (by rw [q4]; omega)]
        simp [unfinished]

/-! ## Serving the residents -/

/-- One prefill served by two engines with the same block size, within the smaller pool: the same plan
after it. -/
theorem serveC_step (eng E : Engine) (only : Option Bool) (f : Nat) (p : Plan) (r : Res) (rest : List Res)
    (hbs : E.blockSize = eng.blockSize) (hK : eng.kvBlocks ≤ E.kvBlocks)
    (htodo : p.todo = r :: rest) (hb : 0 < p.budget) (hsp : p.selfPreempted = false) (hch : p.chunk = 0)
    (hd : r.decoding = false) (hrem : 0 < r.remaining) (hex : excluded only false = false) (hc : p.cache = [])
    (hfit : usedBlocks p.done + usedBlocks p.todo
      + (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc) ≤ eng.kvBlocks) :
    ∃ q, serveRunning eng only (f + 1) p = serveRunning eng only f q ∧
      serveRunning E only (f + 1) p = serveRunning E only f q ∧ q.todo = rest ∧ q.cache = [] ∧
      q.done = p.done ++ [{ r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc),
                                   sched := min r.remaining p.budget }] ∧
      q.selfPreempted = false ∧ q.chunk = 0 := by
  have hcount : resCount p.todo = resCount rest + 1 := by rw [htodo]; rfl
  have hg : growOrPreempt eng (resCount p.todo)
      (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc) p = p := by
    rw [hcount]
    simp only [growOrPreempt]
    rw [if_pos hfit]
  have hgE : growOrPreempt E (resCount p.todo)
      (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc) p = p := by
    rw [hcount]
    simp only [growOrPreempt]
    rw [if_pos (by omega)]
  have hb0 : ¬ (p.budget = 0 ∨ p.selfPreempted = true) := by simp [hsp]; omega
  have hrem0 : ¬ (r.remaining = 0 ∨ excluded only r.decoding = true) := by simp [hd, hex]; omega
  rw [serveRunning, serveRunning, if_neg hb0, if_neg hb0]
  simp only [htodo]
  rw [if_neg hrem0, if_neg hrem0]
  simp only [hd, Bool.false_eq_true, if_false, hch, capChunk_zero, hbs]
  rw [← htodo, hg, hgE]
  simp only [hsp, Bool.false_eq_true, if_false, hc, evict_nil]
  refine ⟨_, rfl, rfl, by simp [htodo, dropHead], rfl, by simp [appendRes_eq'], ?_, ?_⟩
  · first | rfl | exact hsp
  · first | rfl | exact hch

/-- **The residents, prefills, are served alike by the engine and any engine with larger caps** (within
the smaller pool), and no cache entry appears. -/
theorem serveC (eng E : Engine) (only : Option Bool) (hex : excluded only false = false) (bW : Nat)
    (hbs : E.blockSize = eng.blockSize) (hK : eng.kvBlocks ≤ E.kvBlocks) :
    ∀ (L : List Res) (p : Plan) (fuel : Nat), p.todo = L →
    (∀ r ∈ L, r.decoding = false ∧ 0 < r.remaining ∧ blocksFor eng.blockSize (r.pos + r.remaining) ≤ bW ∧ r.alloc ≤ bW) →
    p.selfPreempted = false → p.chunk = 0 → p.cache = [] →
    usedBlocks p.done + resCount L * bW ≤ eng.kvBlocks →
    serveRunning E only fuel p = serveRunning eng only fuel p ∧ (serveRunning eng only fuel p).cache = []
  | [], p, fuel, htodo, _, _, _, hc, _ => by
    rw [serveRunning_nil E only fuel p htodo, serveRunning_nil eng only fuel p htodo]
    exact ⟨rfl, hc⟩
  | _ :: _, _, 0, _, _, _, _, hc, _ => ⟨rfl, hc⟩
  | r :: rest, p, f + 1, htodo, hL, hsp, hch, hc, hkv => by
    by_cases hb : p.budget = 0
    · have e1 : serveRunning E only (f + 1) p = p := by rw [serveRunning, if_pos (Or.inl hb)]
      have e2 : serveRunning eng only (f + 1) p = p := by rw [serveRunning, if_pos (Or.inl hb)]
      rw [e1, e2]
      exact ⟨rfl, hc⟩
    obtain ⟨hd, hrem, hgrow, halloc⟩ := hL r List.mem_cons_self
    have hrest : ∀ x ∈ rest, x.decoding = false ∧ 0 < x.remaining ∧
        blocksFor eng.blockSize (x.pos + x.remaining) ≤ bW ∧ x.alloc ≤ bW := fun x hx => hL x (List.mem_cons_of_mem _ hx)
    have hurest := usedBlocks_le bW rest (fun x hx => (hrest x hx).2.2.2)
    have hcount : resCount (r :: rest) = resCount rest + 1 := rfl
    rw [hcount, Nat.succ_mul] at hkv
    have hg2 : blocksFor eng.blockSize (r.pos + min r.remaining p.budget) ≤ bW :=
      Nat.le_trans (blocksFor_mono _ (by omega)) hgrow
    obtain ⟨q, e1, e2, q1, q2, q3, q4, q5⟩ := serveC_step eng E only f p r rest hbs hK htodo (by omega) hsp hch hd
      hrem hex hc (by rw [htodo]; simp only [usedBlocks]; omega)
    rw [e1, e2]
    exact serveC eng E only hex bW hbs hK rest q f q1 hrest q4 q5 q2
      (by rw [q3, usedBlocks_app]; simp only [usedBlocks]; omega)

/-! ## The iteration's plan -/

theorem budget_le_div (B W : Nat) (hW : 0 < W) : B ≤ (B / W + 1) * W := by
  have h1 := Nat.div_add_mod B W
  have h2 := Nat.mod_lt B hW
  rw [Nat.add_one_mul, Nat.mul_comm]
  omega

theorem phaseOf_wider (eng E : Engine) (h : E.phased = eng.phased) (rs : List Res) :
    phaseOf E rs = phaseOf eng rs := by
  unfold phaseOf
  rw [h]

/-- **One iteration's plan with the fixed caps** (no chunk cap): at most one resident, a prefill, and a
queue of fresh `W`-token requests of any length: the plan is that of any engine with larger caps, no
cache entry appears, and at most one resident of the plan takes less than its remainder. -/
theorem planC (eng E : Engine) (W bW : Nat) (m : Machine) (Qs : List Req) (hwd : Wider eng E) (hW : 0 < W)
    (hBp : 0 < eng.budget) (hbW : blocksFor eng.blockSize W ≤ bW) (hL : ∀ r ∈ m.running, PreOk eng.blockSize bW r)
    (h1 : resCount m.running ≤ 1) (hc : m.cache = []) (hQ : ∀ rq ∈ Qs, Fresh W rq)
    (hcap : 2 + eng.budget / W ≤ eng.reqsCap) (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    plan E 0 m Qs = plan eng 0 m Qs ∧ (plan eng 0 m Qs).cache = [] ∧ unfinished (plan eng 0 m Qs).done ≤ 1 := by
  obtain ⟨hEb, hEbs, _, _, hEph, hR, hK⟩ := hwd
  have hex : excluded (phaseOf eng m.running) false = false :=
    excluded_prefill eng _ (anyDecoding_false _ (fun r hr => (hL r hr).1))
  have hC : ∀ r ∈ clearSched m.running, r.decoding = false ∧ 0 < r.remaining ∧ r.sched = 0 ∧
      blocksFor eng.blockSize (r.pos + r.remaining) ≤ bW ∧ r.alloc ≤ bW ∧ r.req.out ≤ 1 := by
    intro x hx
    obtain ⟨r, hr, rfl⟩ := mem_clearSched _ x hx
    obtain ⟨a1, a2, _, a4, a5, a6⟩ := hL r hr
    exact ⟨a1, a2, rfl, a4, a5, a6⟩
  have hmul : (2 + eng.budget / W) * bW = eng.budget / W * bW + bW + bW := by
    rw [Nat.add_mul]; omega
  have hrb : resCount m.running * bW ≤ bW := by
    have := Nat.mul_le_mul_right bW h1
    rwa [Nat.one_mul] at this
  have hkv0 : usedBlocks [] + resCount (clearSched m.running) * bW ≤ eng.kvBlocks := by
    simp only [usedBlocks, resCount_clearSched', Nat.zero_add]
    omega
  have hB := budget_le_div eng.budget W hW
  obtain ⟨_, _, s3⟩ := servePre_facts eng.blockSize bW eng.budget (clearSched m.running) hC
  obtain ⟨i1, i2, i3, i4, i5⟩ := serve_prefills eng (phaseOf eng m.running) hex bW (clearSched m.running)
    ⟨eng.budget, 0, [], clearSched m.running, Qs, m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega) (fun r hr => by obtain ⟨a, b, _, d, e, _⟩ := hC r hr; exact ⟨a, b, d, e⟩)
    rfl rfl hkv0
  obtain ⟨j1, j2⟩ := serveC eng E (phaseOf eng m.running) hex bW hEbs hK (clearSched m.running)
    ⟨eng.budget, 0, [], clearSched m.running, Qs, m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (fun r hr => by obtain ⟨a, b, _, d, e, _⟩ := hC r hr; exact ⟨a, b, d, e⟩) rfl rfl hc hkv0
  rw [sumRem_clearSched] at i4
  unfold plan
  dsimp only
  rw [hEb, phaseOf_wider eng E hEph, j1]
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, 0, [], clearSched m.running, Qs, m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i5 j2 ⊢
  simp only at i1 i2 i3 i4 i5
  rw [if_pos i3, if_pos i3]
  have hdone : appendRes p1.done p1.todo = servePre eng.blockSize eng.budget (clearSched m.running) := by
    rw [appendRes_eq', i1]; rfl
  have hcnt : resCount (servePre eng.blockSize eng.budget (clearSched m.running)) = resCount m.running := by
    rw [resCount_servePre, resCount_clearSched']
  have hused : usedBlocks (servePre eng.blockSize eng.budget (clearSched m.running)) ≤ resCount m.running * bW := by
    rw [← hcnt]; exact usedBlocks_le bW _ (fun x hx => (s3 x hx).2.2.2.2.1)
  have hsb : eng.budget / W + 1 + 1 = 2 + eng.budget / W := by omega
  obtain ⟨a1, a2, A, a3, a4, a5⟩ := admitC eng E (phaseOf eng m.running) hex W bW hW hbW hEbs hR hK
    (reqCount p1.waiting + 1) { p1 with done := appendRes p1.done p1.todo, todo := [] } (eng.budget / W + 1)
    (by simp only [i2]; exact hQ) (by simp [i5]) (by simp [j2])
    (by simp only [i4]; omega)
    (by simp only [hdone, hcnt]; omega)
    (by simp only [hdone]; rw [Nat.add_one_mul]; omega)
  refine ⟨a1, a2, ?_⟩
  rw [a3]
  simp only [hdone]
  rw [unfinished_app]
  rcases servePre_unfinished eng.blockSize eng.budget hBp (clearSched m.running)
    (by rw [resCount_clearSched']; exact h1) with h0 | ⟨h1', hz⟩
  · omega
  · rw [sumRem_clearSched] at hz
    rw [a5 (by simp only [i4]; exact hz)]
    simp [unfinished, h1']

/-! ## One step -/

theorem newReq_wider (eng E : Engine) (ss : List Session) (p : Pending) (h1 : E.caching = eng.caching)
    (h2 : E.blockSize = eng.blockSize) : newReq E ss p = newReq eng ss p := by
  unfold newReq
  rw [h1, h2]

theorem submitC (eng E : Engine) (ss : List Session) (W : Nat) (hwd : Wider eng E)
    (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks) :
    ∀ (due : List Pending) (w : List Req), (∀ p ∈ due, p.prompt = W) → submit E ss due w = submit eng ss due w
  | [], _, _ => rfl
  | p :: ps, w, hd => by
    have hp := hd p List.mem_cons_self
    have hno : ¬ blocksFor eng.blockSize p.prompt > eng.kvBlocks := by rw [hp]; omega
    have hnoE : ¬ blocksFor E.blockSize p.prompt > E.kvBlocks := by rw [hwd.2.1, hp]; have := hwd.2.2.2.2.2.2; omega
    simp only [submit, if_neg hno, if_neg hnoE]
    rw [newReq_wider eng E ss p hwd.2.2.2.1 hwd.2.1]
    exact submitC eng E ss W hwd hfit ps _ (fun q hq => hd q (List.mem_cons_of_mem _ hq))

theorem release_wider (eng E : Engine) (h1 : E.caching = eng.caching) (h2 : E.blockSize = eng.blockSize)
    (sid tokens seq : Nat) (cache : List Entry) : release E sid tokens seq cache = release eng sid tokens seq cache := by
  unfold release
  rw [h1, h2]

theorem applyC (eng E : Engine) (ss : List Session) (now : Nat) (h1 : E.caching = eng.caching)
    (h2 : E.blockSize = eng.blockSize) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), apply E ss now m l kept = apply eng ss now m l kept
  | [], _, _ => rfl
  | r :: rs, m, kept => by
    simp only [apply, release_wider eng E h1 h2, applyC eng E ss now h1 h2 rs]

/-- With no prefix cache, `apply` leaves the cache as it is. -/
theorem apply_cache_same (eng : Engine) (ss : List Session) (now : Nat) (hc : eng.caching = false) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), (apply eng ss now m l kept).cache = m.cache
  | [], _, _ => rfl
  | r :: rs, m, kept => by
    have ih := apply_cache_same eng ss now hc rs
    simp only [apply, release, hc, Bool.false_eq_true, if_false, if_true]
    repeat' split
    all_goals first | exact ih _ _ | simp [ih]

theorem dueC_mem (now : Nat) : ∀ (ps : List Pending), ∀ q ∈ (duePending now ps).1, q ∈ ps
  | [] => by simp [duePending]
  | x :: xs => by
    have ih := dueC_mem now xs
    simp only [duePending]
    generalize duePending now xs = dl at ih ⊢
    obtain ⟨a, b⟩ := dl
    dsimp only at ih ⊢
    split
    · intro q hq
      rcases List.mem_cons.mp hq with rfl | hq
      · exact List.mem_cons_self
      · exact List.mem_cons_of_mem _ (ih q hq)
    · exact fun q hq => List.mem_cons_of_mem _ (ih q hq)

/-- The invariant of a run with the fixed caps: residents prefills (`PreOk`), at most one; queue fresh
`W`-token requests (any number); pending prompts `W`; no cache entry. -/
def InvC (bs W bW : Nat) (m : Machine) : Prop :=
  (∀ r ∈ m.running, PreOk bs bW r) ∧ (∀ rq ∈ m.waiting, Fresh W rq) ∧ (∀ p ∈ m.pending, p.prompt = W) ∧
    resCount m.running ≤ 1 ∧ m.cache = []

theorem init_invC (bs W bW : Nat) (ss : List Session) (h : OneTurnW W ss) : InvC bs W bW (init ss) :=
  ⟨by simp [init], by simp [init], (firstTurns_facts W 0 ss h).2, by simp [init, resCount], rfl⟩

/-- **One step with the fixed caps is the step of any engine with larger caps**, and leaves at most one
resident and no cache entry. -/
theorem stepC (eng E : Engine) (ss : List Session) (W bW : Nat) (m : Machine) (hwd : Wider eng E)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (h : InvC eng.blockSize W bW m) :
    step E ss m = step eng ss m ∧ resCount (step eng ss m).running ≤ 1 ∧ (step eng ss m).cache = [] := by
  obtain ⟨hL, hQ, hP, h1, hc⟩ := h
  have hwd' := hwd
  obtain ⟨_, hEbs, hEch, hEca, _, _, _⟩ := hwd'
  have hss : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1 := fun s hs => by
    obtain ⟨t, ht, _, ho⟩ := hS s hs; exact ⟨t, ht, ho⟩
  have hmem := dueC_mem m.now m.pending
  generalize hdl : duePending m.now m.pending = dl at hmem
  obtain ⟨due, later⟩ := dl
  have hdW : ∀ p ∈ due, p.prompt = W := fun p hp => hP p (hmem p hp)
  obtain ⟨n1, f1⟩ := submit_fresh eng ss W hcache hss hfit due m.waiting hdW hQ
  have hsub := submitC eng E ss W hwd hfit due m.waiting hdW
  unfold step
  rw [hdl]
  dsimp only
  rw [hsub, hEch, hEbs]
  generalize hw : submit eng ss due m.waiting = Qs at n1 f1
  by_cases hidle : noRes m.running = true ∧ noReq Qs = true
  · rw [if_pos hidle, if_pos hidle]
    have hr : m.running = [] := by cases h : m.running <;> simp_all [noRes]
    refine ⟨rfl, ?_, ?_⟩ <;> cases later <;> simp [hr, resCount, hc]
  · rw [if_neg hidle, if_neg hidle]
    have hc0 : (if eng.chunk > 0 ∧ resCount m.running + reqCount Qs > 1 then eng.chunk else 0) = 0 := by
      simp [hch]
    rw [hc0]
    obtain ⟨p1, p2, p3⟩ := planC eng E W bW m Qs hwd hW hB hbW hL h1 hc f1 hcap hkv
    rw [p1, applyC eng E ss m.now hEca hEbs]
    refine ⟨rfl, ?_⟩
    have hpp := plan_pre (bigEng eng (resCount m.running + reqCount Qs) bW) W bW m Qs hW hbW hL f1
      (bigEng_req eng _ bW) (by rw [← Nat.add_mul]; exact bigEng_kv eng _ bW)
    rw [(planC eng (bigEng eng (resCount m.running + reqCount Qs) bW) W bW m Qs (bigEng_wider eng _ bW)
      hW hB hbW hL h1 hc f1 hcap hkv).1] at hpp
    obtain ⟨q1, _, q3, q4, _, _⟩ := hpp
    have hBb : (bigEng eng (resCount m.running + reqCount Qs) bW).budget = eng.budget := rfl
    have hpos : 0 < sumRem m.running + W * reqCount Qs := by
      cases h : m.running with
      | cons r rs =>
        have := (hL r (by rw [h]; exact List.mem_cons_self)).2.1
        simp only [sumRem]; omega
      | nil =>
        cases hq : Qs with
        | nil => rw [h, hq] at hidle; simp [noRes, noReq] at hidle
        | cons q qs =>
          simp only [reqCount]
          have : W ≤ W * (reqCount qs + 1) := Nat.le_mul_of_pos_right _ (by omega)
          omega
    rw [if_neg (by rw [q1, q3]; omega)]
    have hpre : ∀ r ∈ (plan eng 0 m Qs).done,
        r.decoding = false ∧ 0 < r.remaining ∧ r.sched ≤ r.remaining ∧ r.req.out ≤ 1 :=
      fun r hr => by obtain ⟨a, b, c, _, _, f⟩ := q4 r hr; exact ⟨a, b, c, f⟩
    refine ⟨?_, ?_⟩
    · simp only [apply_running, List.nil_append]
      exact Nat.le_trans (stepAll_unfinished m.now _ hpre) p3
    · simp only [apply_cache_same eng ss m.now hcache]
      exact p2

/-- A step keeps the invariant, and is the chain's step. -/
theorem stepC_inv (eng : Engine) (ss : List Session) (W bW : Nat) (m : Machine)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (h : InvC eng.blockSize W bW m) :
    InvC eng.blockSize W bW (step eng ss m) ∧
      work W (step eng ss m) = work W m + (duePending m.now m.pending).1.length * W - eng.budget ∧
      ((step eng ss m).now = m.now + 1 ∨ ((duePending m.now m.pending).1.length = 0 ∧ work W m = 0)) := by
  obtain ⟨e1, e2, e3⟩ := stepC eng (bigEng eng (resCount m.running + reqCount m.waiting + m.pending.length) bW)
    ss W bW m (bigEng_wider eng _ bW) hch hcache hB hW hbW hfit hS hcap hkv h
  obtain ⟨hL, hQ, hP, _, _⟩ := h
  have hs := step_inv (bigEng eng (resCount m.running + reqCount m.waiting + m.pending.length) bW) ss W bW
    (resCount m.running + reqCount m.waiting + m.pending.length) m hch hcache hB hW hbW (bigEng_fit eng _ bW W hfit)
    hS (bigEng_req eng _ bW) (bigEng_kv eng _ bW) ⟨hL, hQ, hP, Nat.le_refl _⟩
  rw [e1] at hs
  obtain ⟨⟨i1, i2, i3, _⟩, w1, w2⟩ := hs
  exact ⟨⟨i1, i2, i3, e2, e3⟩, w1, w2⟩

theorem settledC (eng E : Engine) (W : Nat) (m : Machine) (hwd : Wider eng E) (hW : 0 < W)
    (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks) (hQ : ∀ rq ∈ m.waiting, Fresh W rq) :
    m.settled E = m.settled eng := by
  unfold Machine.settled Machine.stuck
  cases hq : m.waiting with
  | nil => rfl
  | cons rq rqs =>
    obtain ⟨hk, hc, _, _⟩ := hQ rq (by rw [hq]; exact List.mem_cons_self)
    have hmax : max rq.kept (rq.computed + 1) = W := by rw [hk, hc]; omega
    have hK := hwd.2.2.2.2.2.2
    have e1 : neverFits eng rq = false := by
      simp only [neverFits, hmax, decide_eq_false_iff_not]; omega
    have e2 : neverFits E rq = false := by
      simp only [neverFits, hmax, hwd.2.1, decide_eq_false_iff_not]; omega
    simp [e1, e2]

theorem run_succC (eng : Engine) (ss : List Session) (n : Nat) (m : Machine) :
    run eng ss (n + 1) m = if m.settled eng then m else run eng ss n (step eng ss m) := rfl

/-- **A run with the fixed caps is the run of any engine with larger caps**, and keeps the invariant. -/
theorem runC (eng E : Engine) (ss : List Session) (W bW : Nat) (hwd : Wider eng E)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (m : Machine), InvC eng.blockSize W bW m →
      run E ss fuel m = run eng ss fuel m ∧ InvC eng.blockSize W bW (run eng ss fuel m)
  | 0, _, h => ⟨rfl, h⟩
  | fuel + 1, m, h => by
    rw [run_succC, run_succC, settledC eng E W m hwd hW hfit h.2.1,
      (stepC eng E ss W bW m hwd hch hcache hB hW hbW hfit hS hcap hkv h).1]
    by_cases hs : m.settled eng = true
    · rw [if_pos hs, if_pos hs]
      exact ⟨rfl, h⟩
    · rw [if_neg hs, if_neg hs]
      exact runC eng E ss W bW hwd hch hcache hB hW hbW hfit hS hcap hkv fuel _
        (stepC_inv eng ss W bW m hch hcache hB hW hbW hfit hS hcap hkv h).1

theorem run_invC (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    InvC eng.blockSize W bW (run eng ss fuel (init ss)) :=
  (runC eng (bigEng eng 0 bW) ss W bW (bigEng_wider eng 0 bW) hch hcache hB hW hbW hfit hS hcap hkv fuel _
    (init_invC eng.blockSize W bW ss hS)).2

/-- The run of the engine with `n` more slots and `n · bW` more blocks is the run with the fixed caps. -/
theorem run_big (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (n fuel : Nat) :
    run (bigEng eng n bW) ss fuel (init ss) = run eng ss fuel (init ss) :=
  (runC eng (bigEng eng n bW) ss W bW (bigEng_wider eng n bW) hch hcache hB hW hbW hfit hS hcap hkv fuel _
    (init_invC eng.blockSize W bW ss hS)).1

theorem step_big (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (n fuel : Nat) :
    step (bigEng eng n bW) ss (run eng ss fuel (init ss)) = step eng ss (run eng ss fuel (init ss)) :=
  (stepC eng (bigEng eng n bW) ss W bW _ (bigEng_wider eng n bW) hch hcache hB hW hbW hfit hS hcap hkv
    (run_invC eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv fuel)).1

end DriftMachine

open DriftMachine in
/-- **Every step of every run of the machine is the drift chain's step, with fixed caps** (issue 14,
result 7): `drift_machine_step` with the caps `sessionCount ss ≤ reqsCap`, `sessionCount ss · bW ≤
kvBlocks` replaced by `2 + budget / W ≤ reqsCap` and `(2 + budget / W) · bW ≤ kvBlocks`, which depend on
neither the sessions nor the horizon. -/
theorem drift_machine_step_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    work W (init ss) = 0 ∧
      work W (step eng ss (run eng ss fuel (init ss)))
        = work W (run eng ss fuel (init ss))
          + (duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1.length * W
          - eng.budget :=
  ⟨by simp [work, init, BacklogMany.sumRem, reqCount],
    (stepC_inv eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv
      (run_invC eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv fuel)).2.1⟩

open DriftMachine in
/-- **The clock, with fixed caps**: `drift_machine_clock` under `drift_machine_step_caps`'s hypotheses. -/
theorem drift_machine_clock_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    (step eng ss (run eng ss fuel (init ss))).now = (run eng ss fuel (init ss)).now + 1 ∨
      ((duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1.length = 0 ∧
        work W (run eng ss fuel (init ss)) = 0) :=
  (stepC_inv eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv
    (run_invC eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv fuel)).2.2

open DriftMachine in
/-- **The empty engine, with fixed caps**: `drift_machine_empty` under `drift_machine_step_caps`'s
hypotheses. -/
theorem drift_machine_empty_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    work W (run eng ss fuel (init ss)) = 0 ↔
      (run eng ss fuel (init ss)).running = [] ∧ (run eng ss fuel (init ss)).waiting = [] := by
  obtain ⟨hL, hQ, hP, _, _⟩ := run_invC eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv fuel
  exact work_zero_iff eng.blockSize W bW _ (run eng ss fuel (init ss)) hW ⟨hL, hQ, hP, Nat.le_refl _⟩

open DriftMachine in
/-- **No arrival is late, with fixed caps**: `drift_machine_on_time` under `drift_machine_step_caps`'s
hypotheses. -/
theorem drift_machine_on_time_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    ∀ p ∈ (run eng ss fuel (init ss)).pending, (run eng ss fuel (init ss)).now ≤ p.time := by
  have h := drift_machine_on_time (bigEng eng (sessionCount ss) bW) ss W bW hch hcache hB hW hbW
    (bigEng_fit eng _ bW W hfit) hS (bigEng_req eng _ bW) (bigEng_kv eng _ bW) fuel
  rw [run_big eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv] at h
  exact h

open DriftMachine in
/-- **At most one resident** (issue 14, result 7): under `drift_machine_step_caps`'s hypotheses, every
machine of every run has at most one resident (the prefill the budget cut at its last iteration), however
many requests wait. -/
theorem drift_machine_one_resident_caps (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : 2 + eng.budget / W ≤ eng.reqsCap)
    (hkv : (2 + eng.budget / W) * bW ≤ eng.kvBlocks) (fuel : Nat) :
    resCount (run eng ss fuel (init ss)).running ≤ 1 :=
  (run_invC eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv fuel).2.2.2.1

end Serq
