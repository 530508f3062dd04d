module

public import Serq.BacklogDecode

/-! # Several requests in flight, the lists' part (groundwork of `Serq.BacklogMany`)

An iteration of an engine whose residents are all decodes, computed over the list of residents:
each decode takes one token within the budget and the KV pool (`serve_decoders`), then a fresh request
is admitted after them and takes its whole prompt (`admit_after`); what `apply` leaves of a list of
residents (`stepAll`, `apply_running`); the decodes' work left ascending by `g` (`Asc`), its sum
(`sumRem`) and its bound (`tri`, `sum_asc`).
-/
@[expose] public section

namespace Serq

namespace BacklogMany

open Backlog BacklogDecode

theorem appendRes_eq' : ∀ (a b : List Res), appendRes a b = a ++ b
  | [], _ => rfl
  | x :: xs, b => by simp [appendRes, appendRes_eq' xs b]

/-- The decodes after the iteration's growth: one more token's blocks and one token scheduled. -/
def grow (bs : Nat) : List Res → List Res
  | [] => []
  | r :: rs => { r with alloc := r.alloc + (blocksFor bs (r.pos + 1) - r.alloc), sched := 1 } :: grow bs rs

theorem grow_clearSched (bs : Nat) : ∀ (l : List Res), grow bs (clearSched l) = grow bs l
  | [] => rfl
  | r :: rs => by
    show _ :: grow bs (clearSched rs) = _ :: grow bs rs
    rw [grow_clearSched bs rs]

theorem usedBlocks_le (b : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.alloc ≤ b) → usedBlocks l ≤ resCount l * b
  | [], _ => by simp [usedBlocks]
  | r :: rs, h => by
    have := usedBlocks_le b rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    have hr := h r List.mem_cons_self
    simp only [usedBlocks, resCount, Nat.succ_mul]
    omega

theorem usedBlocks_app (a b : List Res) : usedBlocks (a ++ b) = usedBlocks a + usedBlocks b := by
  induction a with
  | nil => simp [usedBlocks]
  | cons x xs ih => simp only [List.cons_append, usedBlocks, ih]; omega

theorem resCount_app (a b : List Res) : resCount (a ++ b) = resCount a + resCount b := by
  induction a with
  | nil => simp [resCount]
  | cons x xs ih => simp only [List.cons_append, resCount, ih]; omega

theorem batchTokens_app (a b : List Res) : batchTokens (a ++ b) = batchTokens a + batchTokens b := by
  induction a with
  | nil => simp [batchTokens]
  | cons x xs ih => simp only [List.cons_append, batchTokens, ih]; omega

theorem batchTokens_grow (bs : Nat) : ∀ (l : List Res), batchTokens (grow bs l) = resCount l
  | [] => rfl
  | r :: rs => by simp only [grow, batchTokens, resCount, batchTokens_grow bs rs]; omega

theorem resCount_grow (bs : Nat) : ∀ (l : List Res), resCount (grow bs l) = resCount l
  | [] => rfl
  | r :: rs => by simp only [grow, resCount, resCount_grow bs rs]

theorem resCount_clearSched' : ∀ (l : List Res), resCount (clearSched l) = resCount l
  | [] => rfl
  | r :: rs => by simp only [clearSched, resCount, resCount_clearSched' rs]

theorem mem_grow (bs : Nat) : ∀ (l : List Res) (x : Res), x ∈ grow bs l →
    ∃ r ∈ l, x = { r with alloc := r.alloc + (blocksFor bs (r.pos + 1) - r.alloc), sched := 1 }
  | [], _, h => by simp [grow] at h
  | r :: rs, x, h => by
    simp only [grow, List.mem_cons] at h
    rcases h with rfl | h
    · exact ⟨r, List.mem_cons_self, rfl⟩
    · obtain ⟨y, hy, e⟩ := mem_grow bs rs x h
      exact ⟨y, List.mem_cons_of_mem _ hy, e⟩

theorem mem_clearSched : ∀ (l : List Res) (x : Res), x ∈ clearSched l → ∃ r ∈ l, x = { r with sched := 0 }
  | [], _, h => by simp [clearSched] at h
  | r :: rs, x, h => by
    simp only [clearSched, List.mem_cons] at h
    rcases h with rfl | h
    · exact ⟨r, List.mem_cons_self, rfl⟩
    · obtain ⟨y, hy, e⟩ := mem_clearSched rs x h
      exact ⟨y, List.mem_cons_of_mem _ hy, e⟩

/-! ## Serving a list of decodes -/

/-- One decode served: the plan goes on with the rest. -/
theorem serve_dec_step (eng : Engine) (only : Option Bool) (f : Nat) (p : Plan) (r : Res) (rest : List Res)
    (htodo : p.todo = r :: rest) (hb : 0 < p.budget) (hsp : p.selfPreempted = false)
    (hd : r.decoding = true) (hrem : 0 < r.remaining) (hex : excluded only true = false)
    (hfit : usedBlocks p.done + usedBlocks p.todo + (blocksFor eng.blockSize (r.pos + 1) - r.alloc) ≤ eng.kvBlocks) :
    ∃ q, serveRunning eng only (f + 1) p = serveRunning eng only f q ∧ q.todo = rest ∧
      q.budget = p.budget - 1 ∧
      q.done = p.done ++ [{ r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc), sched := 1 }] ∧
      q.waiting = p.waiting ∧ q.preempted = p.preempted ∧ q.selfPreempted = false ∧ q.chunk = p.chunk ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ q.cache, Q e.sid := by
  have hg : growOrPreempt eng (resCount p.todo) (blocksFor eng.blockSize (r.pos + 1) - r.alloc) p = p := by
    have : resCount p.todo = resCount rest + 1 := by rw [htodo]; rfl
    rw [this]
    simp only [growOrPreempt]
    rw [if_pos hfit]
  have hb0 : ¬ (p.budget = 0 ∨ p.selfPreempted = true) := by simp [hsp]; omega
  have hrem0 : ¬ (r.remaining = 0 ∨ excluded only r.decoding = true) := by simp [hd, hex]; omega
  rw [serveRunning, if_neg hb0]
  simp only [htodo]
  rw [if_neg hrem0]
  simp only [hd, if_true]
  rw [← htodo, hg]
  simp only [hsp, Bool.false_eq_true, if_false]
  refine ⟨_, rfl, by simp [htodo, dropHead], rfl, by simp [appendRes_eq'], rfl, rfl, rfl, rfl,
    fun Q hQ => evict_sid Q _ _ hQ⟩

/-- Every resident of the list, a decode, takes one token; all fit, so nothing is preempted. -/
theorem serve_decoders (eng : Engine) (only : Option Bool) (hex : excluded only true = false) (bW : Nat) :
    ∀ (L : List Res) (p : Plan) (fuel : Nat), p.todo = L → resCount L < fuel →
    (∀ r ∈ L, r.decoding = true ∧ 0 < r.remaining ∧ blocksFor eng.blockSize (r.pos + 1) ≤ bW ∧ r.alloc ≤ bW) →
    resCount L ≤ p.budget → p.selfPreempted = false →
    usedBlocks p.done + resCount L * bW ≤ eng.kvBlocks →
    (serveRunning eng only fuel p).done = p.done ++ grow eng.blockSize L ∧
    (serveRunning eng only fuel p).todo = [] ∧
    (serveRunning eng only fuel p).waiting = p.waiting ∧
    (serveRunning eng only fuel p).preempted = p.preempted ∧
    (serveRunning eng only fuel p).budget = p.budget - resCount L ∧
    (serveRunning eng only fuel p).chunk = p.chunk ∧
    ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (serveRunning eng only fuel p).cache, Q e.sid
  | [], p, fuel, htodo, _, _, _, _, _ => by
    rw [serveRunning_nil eng only fuel p htodo]
    exact ⟨by simp [grow], htodo, rfl, rfl, by simp [resCount], rfl, fun Q hQ => hQ⟩
  | r :: rest, p, fuel, htodo, hf, hL, hb, hsp, hkv => by
    obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 1 := ⟨fuel - 1, by simp only [resCount] at hf; omega⟩
    obtain ⟨hd, hrem, hgrow, halloc⟩ := hL r List.mem_cons_self
    have hrest : ∀ x ∈ rest, x.decoding = true ∧ 0 < x.remaining ∧ blocksFor eng.blockSize (x.pos + 1) ≤ bW ∧
        x.alloc ≤ bW := fun x hx => hL x (List.mem_cons_of_mem _ hx)
    have hurest := usedBlocks_le bW rest (fun x hx => (hrest x hx).2.2.2)
    have hcount : resCount (r :: rest) = resCount rest + 1 := rfl
    rw [hcount, Nat.succ_mul] at hkv
    rw [hcount] at hb hf
    obtain ⟨q, hq, h1, h2, h3, h4, h5, h6, h8, h7⟩ := serve_dec_step eng only f p r rest htodo (by omega) hsp hd hrem hex
      (by rw [htodo]; simp only [usedBlocks]; omega)
    rw [hq]
    have hgr : r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc) ≤ bW := by omega
    obtain ⟨i1, i2, i3, i4, i5, i7, i6⟩ := serve_decoders eng only hex bW rest q f h1 (by omega) hrest (by omega) h6
      (by rw [h3, usedBlocks_app]; simp only [usedBlocks]; omega)
    refine ⟨by rw [i1, h3]; simp [grow], i2, by rw [i3, h4], by rw [i4, h5], by rw [i5, h2, hcount]; omega,
      by rw [i7, h8], fun Q hQ => i6 Q (h7 Q hQ)⟩

/-- A fresh request of `P > 0` tokens at the head of the queue, after the residents: admitted, it
takes its whole prompt. -/
theorem admit_after (eng : Engine) (only : Option Bool) (fuel : Nat) (p : Plan) (rq : Req) (P : Nat)
    (hw : p.waiting = [rq]) (hb : P ≤ p.budget) (hcap : resCount p.done < eng.reqsCap)
    (hch : capChunk p.chunk P = P) (hex : excluded only false = false) (hkept : rq.kept = P)
    (hcomp : rq.computed = 0) (hown : ownCachedBlocks rq.sid p.cache = 0) (hP : 0 < P)
    (hK : usedBlocks p.done + blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ r, (admitHeads eng only (fuel + 1 + 1) p).done = appendRes p.done [r] ∧
      (admitHeads eng only (fuel + 1 + 1) p).waiting = [] ∧
      (admitHeads eng only (fuel + 1 + 1) p).preempted = p.preempted ∧ r.decoding = false ∧
      r.sched = P ∧ r.pos = 0 ∧ r.remaining = P ∧ r.alloc ≤ blocksFor eng.blockSize P ∧
      r.req.out = rq.out ∧ r.req.sid = rq.sid ∧ r.known = P ∧ r.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (admitHeads eng only (fuel + 1 + 1) p).cache, Q e.sid := by
  have hknown : max rq.kept (rq.computed + 1) = P := by rw [hkept, hcomp]; omega
  have hmin : min P p.budget = P := Nat.min_eq_left hb
  have hgo : ¬ (p.budget = 0 ∨ resCount p.done ≥ eng.reqsCap) := by omega
  rw [admitHeads, if_neg hgo]
  simp only [hw, hknown, hown, Nat.zero_mul, Nat.zero_min, Nat.sub_zero, hmin, hch, Nat.zero_add, hex,
    Bool.false_eq_true, if_false, Nat.max_self]
  rw [if_neg (by omega)]
  rw [admitHeads_nil eng only _ _ rfl]
  refine ⟨_, rfl, rfl, rfl, rfl, rfl, rfl, rfl, Nat.le_refl _, ?_, ?_, rfl, ?_,
    fun Q hQ => evict_sid Q _ _ (consume_sid Q _ _ _ hQ)⟩
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl

/-! ## What `apply` leaves of a list of residents -/

/-- What `apply` leaves of one resident (the same computation): nothing if its turn ends. -/
def stepRes (now : Nat) (r : Res) : List Res :=
  if r.sched = 0 then [r] else
  let pos := r.pos + r.sched
  let remaining := r.remaining - r.sched
  let sampled := r.decoding ∨ remaining = 0
  let req := if sampled ∧ r.req.hasFirst = false then { r.req with first := now, hasFirst := true } else r.req
  let decoding := r.decoding ∨ remaining = 0
  let left := if r.decoding then remaining
              else if remaining = 0 then r.req.out - 1 - (r.known - r.req.prompt) else remaining
  if decoding ∧ left = 0 then [] else [⟨req, r.alloc, pos, r.known, decoding, left, 0⟩]

def stepAll (now : Nat) : List Res → List Res
  | [] => []
  | r :: rs => appendRes (stepRes now r) (stepAll now rs)

theorem stepAll_cons (now : Nat) (r : Res) (rs : List Res) : stepAll now (r :: rs) = stepRes now r ++ stepAll now rs := by
  simp only [stepAll, appendRes_eq']

theorem stepAll_app (now : Nat) (a b : List Res) : stepAll now (a ++ b) = stepAll now a ++ stepAll now b := by
  induction a with
  | nil => rfl
  | cons x xs ih => simp [stepAll_cons, ih]

theorem resCount_ite (c : Prop) [Decidable c] (x : Res) : resCount (if c then [] else [x]) ≤ 1 := by
  split <;> simp [resCount]

theorem resCount_stepRes (now : Nat) (r : Res) : resCount (stepRes now r) ≤ 1 := by
  unfold stepRes
  split
  · simp [resCount]
  · dsimp only
    exact resCount_ite _ _

theorem resCount_stepAll (now : Nat) : ∀ (L : List Res), resCount (stepAll now L) ≤ resCount L
  | [] => by simp [stepAll, resCount]
  | r :: rs => by
    rw [stepAll_cons, resCount_app]
    have := resCount_stepRes now r
    have := resCount_stepAll now rs
    simp only [resCount]
    omega

theorem anyDecoding_false : ∀ (L : List Res), (∀ r ∈ L, r.decoding = false) → anyDecoding L = false
  | [], _ => rfl
  | r :: rs, h => by
    simp only [anyDecoding, h r List.mem_cons_self, Bool.false_or]
    exact anyDecoding_false rs (fun x hx => h x (List.mem_cons_of_mem _ hx))

theorem apply_running (eng : Engine) (ss : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), (apply eng ss now m l kept).running = kept ++ stepAll now l
  | [], m, kept => by simp [apply, stepAll]
  | r :: rs, m, kept => by
    have ih := apply_running eng ss now rs
    simp only [apply, stepAll_cons, stepRes]
    repeat' split
    all_goals simp_all [appendRes_eq']

theorem stepRes_eq (now : Nat) (r : Res) (eng : Engine) (ss : List Session) (m : Machine) :
    stepRes now r = (apply eng ss now m [r] []).running := by
  rw [apply_running]; simp [stepAll, appendRes_eq']

/-- A decode that took its token: done, or one token fewer. -/
theorem stepRes_dec (now : Nat) (r : Res) (hd : r.decoding = true) (hs : r.sched = 1) :
    (stepRes now r = [] ∧ r.remaining - 1 = 0) ∨
    (∃ q : Req, q.sid = r.req.sid ∧ stepRes now r = [⟨q, r.alloc, r.pos + 1, r.known, true, r.remaining - 1, 0⟩] ∧
      0 < r.remaining - 1) := by
  rw [stepRes_eq now r ⟨0, 0, 0, 0, 0, false, false⟩ [] (init [])]
  exact running_after_decode _ _ now r _ ⟨_, rfl⟩ hd hs

/-- A prefill that took its whole remainder: done, or a decode of `out - 1 - (known - prompt)`. -/
theorem stepRes_prefill (now : Nat) (x : Res) (D : Nat) (hd : x.decoding = false) (hs : 0 < x.sched)
    (hfin : x.remaining ≤ x.sched) (hL : x.req.out - 1 - (x.known - x.req.prompt) = D - 1) :
    (stepRes now x = [] ∧ D - 1 = 0) ∨
    (∃ q : Req, q.sid = x.req.sid ∧ stepRes now x = [⟨q, x.alloc, x.pos + x.sched, x.known, true, D - 1, 0⟩] ∧
      0 < D - 1) := by
  rw [stepRes_eq now x ⟨0, 0, 0, 0, 0, false, false⟩ [] (init [])]
  rcases running_after_prefill _ _ now x D _ ⟨_, rfl⟩ hd hs hL with ⟨h1, _, h3⟩ | ⟨q, hq, h1, _, h3⟩ | ⟨_, h2⟩
  · exact Or.inl ⟨h1, h3⟩
  · exact Or.inr ⟨q, hq, h1, h3⟩
  · omega

/-! ## The invariant's parts over a list of decodes -/

/-- The decodes' work left, ascending by at least `g` from `x` on. -/
def Asc (g : Nat) : Nat → List Res → Prop
  | _, [] => True
  | x, r :: rs => x ≤ r.remaining ∧ Asc g (r.remaining + g) rs

def sumRem : List Res → Nat
  | [] => 0
  | r :: rs => r.remaining + sumRem rs

theorem sumRem_app (a b : List Res) : sumRem (a ++ b) = sumRem a + sumRem b := by
  induction a with
  | nil => simp [sumRem]
  | cons x xs ih => simp only [List.cons_append, sumRem, ih]; omega

theorem asc_mono {g x y : Nat} {L : List Res} (hxy : y ≤ x) (h : Asc g x L) : Asc g y L := by
  cases L with
  | nil => trivial
  | cons r rs => exact ⟨Nat.le_trans hxy h.1, h.2⟩

theorem asc_count (g M : Nat) : ∀ (x : Nat) (L : List Res), Asc g x L → (∀ r ∈ L, r.remaining + g ≤ M) →
    L ≠ [] → x + resCount L * g ≤ M
  | _, [], _, _, h => absurd rfl h
  | x, [r], ⟨h1, _⟩, hM, _ => by
    have := hM r List.mem_cons_self
    simp only [resCount, Nat.zero_add, Nat.one_mul]; omega
  | x, r :: s :: rs, ⟨h1, h2⟩, hM, _ => by
    have ih := asc_count g M (r.remaining + g) (s :: rs) h2 (fun y hy => hM y (List.mem_cons_of_mem _ hy))
      (by simp)
    have e : resCount (r :: s :: rs) = resCount (s :: rs) + 1 := rfl
    rw [e, Nat.succ_mul]; omega

theorem asc_append (g : Nat) (y : Res) : ∀ (x : Nat) (R : List Res), Asc g x R →
    (∀ r ∈ R, r.remaining + g ≤ y.remaining) → x ≤ y.remaining → Asc g x (R ++ [y])
  | _, [], _, _, hx => ⟨hx, trivial⟩
  | _, r :: rs, ⟨h1, h2⟩, hy, _ => ⟨h1, asc_append g y _ rs h2 (fun z hz => hy z (List.mem_cons_of_mem _ hz))
      (hy r List.mem_cons_self)⟩

theorem asc_step (g : Nat) (now bs : Nat) : ∀ (x : Nat) (L : List Res), Asc g x L → 2 ≤ x →
    (∀ r ∈ L, r.decoding = true) → Asc g (x - 1) (stepAll now (grow bs L))
  | _, [], _, _, _ => trivial
  | x, r :: rs, ⟨h1, h2⟩, hx, hd => by
    have hdr := hd r List.mem_cons_self
    have ih := asc_step g now bs (r.remaining + g) rs h2 (by omega) (fun z hz => hd z (List.mem_cons_of_mem _ hz))
    simp only [grow, stepAll_cons]
    rcases stepRes_dec now { r with alloc := r.alloc + (blocksFor bs (r.pos + 1) - r.alloc), sched := 1 } hdr rfl
      with ⟨_, h0⟩ | ⟨q, _, hq, _⟩
    · dsimp only at h0; omega
    · rw [hq]
      refine ⟨by dsimp only; omega, ?_⟩
      have e : r.remaining - 1 + g = r.remaining + g - 1 := by omega
      show Asc g (r.remaining - 1 + g) _
      rw [e]; exact ih

theorem asc_step1 (g : Nat) (hg : 0 < g) (now bs : Nat) (L : List Res) (h : Asc g 1 L)
    (hd : ∀ r ∈ L, r.decoding = true) : Asc g 1 (stepAll now (grow bs L)) := by
  cases L with
  | nil => trivial
  | cons r rs =>
    obtain ⟨h1, h2⟩ := h
    have hdr := hd r List.mem_cons_self
    have ih := asc_step g now bs (r.remaining + g) rs h2 (by omega) (fun z hz => hd z (List.mem_cons_of_mem _ hz))
    simp only [grow, stepAll_cons]
    rcases stepRes_dec now { r with alloc := r.alloc + (blocksFor bs (r.pos + 1) - r.alloc), sched := 1 } hdr rfl
      with ⟨h0, _⟩ | ⟨q, _, hq, hpos⟩
    · rw [h0]; exact asc_mono (by omega) ih
    · rw [hq]
      refine ⟨by dsimp only at hpos ⊢; omega, ?_⟩
      have e : r.remaining - 1 + g = r.remaining + g - 1 := by omega
      show Asc g (r.remaining - 1 + g) _
      rw [e]; exact ih

/-- What becomes of a list of decodes after their tokens: each resident left comes from one of them,
one token further. -/
theorem stepAll_grow_mem (now bs : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.decoding = true) →
    ∀ y ∈ stepAll now (grow bs L), ∃ r ∈ L, y.remaining = r.remaining - 1 ∧ 0 < y.remaining ∧
      y.decoding = true ∧ y.pos = r.pos + 1 ∧ y.alloc = r.alloc + (blocksFor bs (r.pos + 1) - r.alloc) ∧
      y.req.sid = r.req.sid
  | [], _, y, hy => by simp [grow, stepAll] at hy
  | r :: rs, hd, y, hy => by
    have hdr := hd r List.mem_cons_self
    simp only [grow, stepAll_cons, List.mem_append] at hy
    rcases hy with hy | hy
    · rcases stepRes_dec now { r with alloc := r.alloc + (blocksFor bs (r.pos + 1) - r.alloc), sched := 1 } hdr rfl
        with ⟨h0, _⟩ | ⟨q, hqs, hq, hpos⟩
      · rw [h0] at hy; simp at hy
      · rw [hq] at hy
        simp only [List.mem_singleton] at hy
        subst hy
        exact ⟨r, List.mem_cons_self, rfl, hpos, rfl, rfl, rfl, hqs⟩
    · obtain ⟨z, hz, e⟩ := stepAll_grow_mem now bs rs (fun z hz => hd z (List.mem_cons_of_mem _ hz)) y hy
      exact ⟨z, List.mem_cons_of_mem _ hz, e⟩

theorem stepAll_grow_sum (now bs : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.decoding = true ∧ 0 < r.remaining) →
    sumRem (stepAll now (grow bs L)) + resCount L = sumRem L
  | [], _ => rfl
  | r :: rs, hd => by
    have ⟨hdr, hrr⟩ := hd r List.mem_cons_self
    have ih := stepAll_grow_sum now bs rs (fun z hz => hd z (List.mem_cons_of_mem _ hz))
    simp only [grow, stepAll_cons, sumRem_app, sumRem, resCount]
    rcases stepRes_dec now { r with alloc := r.alloc + (blocksFor bs (r.pos + 1) - r.alloc), sched := 1 } hdr rfl
      with ⟨h0, h1⟩ | ⟨q, _, hq, _⟩
    · rw [h0]; simp only [sumRem]; dsimp only at h1; omega
    · rw [hq]; simp only [sumRem]; omega

theorem sumRem_le (c : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.remaining ≤ c) → sumRem L ≤ resCount L * c
  | [], _ => by simp [sumRem]
  | r :: rs, h => by
    have := sumRem_le c rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    have hr := h r List.mem_cons_self
    simp only [sumRem, resCount, Nat.succ_mul]; omega

/-- `Σ_{j < n} (M - j · g)`: the most `n` works left ascending by `g` and at most `M` add up to. -/
def tri (M g : Nat) : Nat → Nat
  | 0 => 0
  | n + 1 => (M - n * g) + tri M g n

theorem tri_mono_n (M g : Nat) {n m : Nat} (h : n ≤ m) : tri M g n ≤ tri M g m := by
  obtain ⟨k, rfl⟩ := Nat.exists_eq_add_of_le h
  induction k with
  | zero => exact Nat.le_refl _
  | succ k ih =>
    have := ih (by omega)
    show _ ≤ (M - (n + k) * g) + tri M g (n + k)
    omega

theorem tri_mono_M (g : Nat) {M M' : Nat} (h : M ≤ M') : ∀ n, tri M g n ≤ tri M' g n
  | 0 => Nat.le_refl _
  | n + 1 => by
    have := tri_mono_M g h n
    simp only [tri]
    omega

theorem tri_succ' (M g : Nat) : ∀ n, tri M g (n + 1) = M + tri (M - g) g n
  | 0 => by simp [tri]
  | n + 1 => by
    have ih := tri_succ' M g n
    show (M - (n + 1) * g) + tri M g (n + 1) = M + ((M - g - n * g) + tri (M - g) g n)
    rw [ih, Nat.succ_mul]
    omega

theorem tri_le_mul (M g : Nat) : ∀ n, tri M g n ≤ n * M
  | 0 => by simp [tri]
  | n + 1 => by
    have := tri_le_mul M g n
    simp only [tri, Nat.succ_mul]
    omega

/-- Works left ascending by `g`, each at most `M`, add up to at most `tri M g n`. -/
theorem sum_asc (g M : Nat) : ∀ (x : Nat) (L : List Res), Asc g x L → (∀ r ∈ L, r.remaining ≤ M) →
    sumRem L ≤ tri M g (resCount L)
  | _, [], _, _ => by simp [sumRem, tri, resCount]
  | _, r :: rs, ⟨_, h2⟩, hM => by
    have ih := sum_asc g M (r.remaining + g) rs h2 (fun y hy => hM y (List.mem_cons_of_mem _ hy))
    have hr : r.remaining + resCount rs * g ≤ M := by
      by_cases hrs : rs = []
      · subst hrs; simp only [resCount, Nat.zero_mul, Nat.add_zero]; exact hM r List.mem_cons_self
      · have := asc_count g (M + g) (r.remaining + g) rs h2
          (fun y hy => by have := hM y (List.mem_cons_of_mem _ hy); omega) hrs
        omega
    show r.remaining + sumRem rs ≤ tri M g (resCount rs + 1)
    simp only [tri]
    omega

end BacklogMany

end Serq
