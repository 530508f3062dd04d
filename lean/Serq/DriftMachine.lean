module

public import Serq.BacklogMany
public import Serq.Drift

/-! # The drift chain on the machine (issue 14, result 7, second part)

The backlog chain of `Serq.Drift` (`nextBacklog`: `r' = r + k·W − B`, stopping at 0) is the
token-level model of a work-conserving budget server. Here every step of `Serq.Exec`'s machine is
proved to be its step (`Serq.drift_machine_step`), for sessions of one turn whose work is their
prompt (`W` tokens, at most one output token: the prefill samples it, no decode follows), with no
chunk cap (`chunk = 0`), no prefix cache (`caching = false`), either schedule, any arrival times, and
a request slot and `bW` blocks for every session of the path. The machine's work is
`work W m = Σ remaining + W · queued`; it starts at 0 and each step leaves `work + k·W − budget`,
`k` the turns due at the step.

Order on the machine: the turns due at the step's start are submitted (at the queue's back) before
the iteration is planned, so an iteration serves the work left plus that of the arrivals due at its
start, as the chain's step `r + k·W − B` does.

The pieces: `stepAll_prefills` (what `apply` leaves of a batch of prefills), `serve_prefills` (vLLM's
`advance running` over prefills, `servePre`), `admit_fresh` (the queue's fresh heads admitted while
the budget lasts), `plan_pre` (the iteration: `min(budget, work)` tokens, nothing preempted),
`step_work` (one step), and the invariant `Inv` (`init_inv`, `step_inv`, `run_inv`).

The clock: a step advances it by one, or the engine was empty with nothing due and it jumps to the
next arrival (`Serq.drift_machine_clock`); no pending turn is ever before it
(`Serq.drift_machine_on_time`), so a jump skips no arrival; the turns due at a step are the sessions
arriving at its time (`Serq.drift_machine_due`, `DriftMachineTime.lean`); composed, at every machine of
every run the work is the time-indexed chain's backlog at its clock (`Serq.drift_machine_time`,
`DriftMachineClock.lean`). Open: the caps bound one finite path: an unbounded stochastic path
eventually exceeds any fixed cap.
-/

@[expose] public section

namespace Serq

namespace DriftMachine

open Backlog BacklogDecode BacklogMany

/-! ## What `apply` leaves of a batch of prefills -/

/-- A prefill (at most one output token) that took `sched ≤ remaining` tokens: it ends when it took
its remainder, else it stays a prefill with `remaining − sched` left. -/
theorem stepRes_prefill_sum (now : Nat) (r : Res) (hd : r.decoding = false) (hs : r.sched ≤ r.remaining)
    (hout : r.req.out ≤ 1) :
    sumRem (stepRes now r) + r.sched = r.remaining ∧
      ∀ x ∈ stepRes now r, x.decoding = false ∧ x.sched = 0 ∧ x.req.out = r.req.out ∧ x.alloc = r.alloc ∧
        x.pos + x.remaining = r.pos + r.remaining ∧ (0 < r.remaining → 0 < x.remaining) := by
  unfold stepRes
  by_cases h0 : r.sched = 0
  · simp only [h0, if_true, sumRem, List.mem_singleton]
    refine ⟨by omega, ?_⟩
    intro x hx
    subst hx
    exact ⟨hd, h0, rfl, rfl, rfl, fun h => h⟩
  · simp only [h0, if_false, hd, Bool.false_eq_true, false_or]
    by_cases h1 : r.remaining - r.sched = 0
    · have h2 : r.req.out - 1 = 0 := by omega
      simp only [h1, if_true, h2, Nat.zero_sub, and_self, sumRem, List.not_mem_nil]
      exact ⟨by omega, fun _ h => h.elim⟩
    · simp only [h1, if_false, and_false, sumRem, List.mem_singleton]
      refine ⟨by omega, ?_⟩
      intro x hx
      subst hx
      refine ⟨rfl, rfl, ?_, rfl, by dsimp only; omega, fun _ => by dsimp only; omega⟩
      dsimp only
      split <;> rfl

/-- **What `apply` leaves of a batch of prefills**: the work left after the iteration is the work left
before it less the tokens scheduled, and every survivor is a prefill with nothing scheduled. -/
theorem stepAll_prefills (now : Nat) : ∀ (L : List Res),
    (∀ r ∈ L, r.decoding = false ∧ r.sched ≤ r.remaining ∧ r.req.out ≤ 1) →
    sumRem (stepAll now L) + batchTokens L = sumRem L ∧
      ∀ x ∈ stepAll now L, x.decoding = false ∧ x.sched = 0 ∧ x.req.out ≤ 1
  | [], _ => by simp [stepAll, sumRem, batchTokens]
  | r :: rs, h => by
    obtain ⟨hd, hs, hout⟩ := h r List.mem_cons_self
    obtain ⟨i1, i2⟩ := stepAll_prefills now rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    obtain ⟨j1, j2⟩ := stepRes_prefill_sum now r hd hs hout
    rw [stepAll_cons, sumRem_app]
    simp only [batchTokens, sumRem]
    refine ⟨by omega, ?_⟩
    intro x hx
    rcases List.mem_append.mp hx with hx | hx
    · obtain ⟨a, b, c, _⟩ := j2 x hx
      exact ⟨a, b, by rw [c]; exact hout⟩
    · exact i2 x hx

/-! ## Serving a list of prefills -/

/-- The residents, all prefills, as `advance running` serves them in admission order: each takes
`min(remaining, budget left)` and grows its allocation to its position after them; once the budget is
spent the rest are left as they are. -/
def servePre (bs : Nat) : Nat → List Res → List Res
  | _, [] => []
  | b, r :: rs => if b = 0 then r :: rs else
      { r with alloc := r.alloc + (blocksFor bs (r.pos + min r.remaining b) - r.alloc), sched := min r.remaining b }
        :: servePre bs (b - min r.remaining b) rs

/-- One prefill served: the plan goes on with the rest. -/
theorem serve_pre_step (eng : Engine) (only : Option Bool) (f : Nat) (p : Plan) (r : Res) (rest : List Res)
    (htodo : p.todo = r :: rest) (hb : 0 < p.budget) (hsp : p.selfPreempted = false) (hch : p.chunk = 0)
    (hd : r.decoding = false) (hrem : 0 < r.remaining) (hex : excluded only false = false)
    (hfit : usedBlocks p.done + usedBlocks p.todo
      + (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc) ≤ eng.kvBlocks) :
    ∃ q, serveRunning eng only (f + 1) p = serveRunning eng only f q ∧ q.todo = rest ∧
      q.budget = p.budget - min r.remaining p.budget ∧
      q.done = p.done ++ [{ r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc),
                                   sched := min r.remaining p.budget }] ∧
      q.waiting = p.waiting ∧ q.preempted = p.preempted ∧ q.selfPreempted = false ∧ q.chunk = p.chunk := by
  have hg : growOrPreempt eng (resCount p.todo)
      (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc) p = p := by
    have : resCount p.todo = resCount rest + 1 := by rw [htodo]; rfl
    rw [this]
    simp only [growOrPreempt]
    rw [if_pos hfit]
  have hb0 : ¬ (p.budget = 0 ∨ p.selfPreempted = true) := by simp [hsp]; omega
  have hrem0 : ¬ (r.remaining = 0 ∨ excluded only r.decoding = true) := by simp [hd, hex]; omega
  rw [serveRunning, if_neg hb0]
  simp only [htodo]
  rw [if_neg hrem0]
  simp only [hd, Bool.false_eq_true, if_false, hch, capChunk_zero]
  rw [← htodo, hg]
  simp only [hsp, Bool.false_eq_true, if_false]
  exact ⟨_, rfl, by simp [htodo, dropHead], rfl, by simp [appendRes_eq'], rfl, rfl, rfl, hch⟩

/-- **The residents, all prefills, are served in order within the budget and the KV pool** (no chunk
cap, every resident's prompt within `bW` blocks and the pool holding `bW` blocks for each): the plan's
residents afterwards are `servePre`'s, and the budget left is `budget − min(budget, Σ remaining)`. -/
theorem serve_prefills (eng : Engine) (only : Option Bool) (hex : excluded only false = false) (bW : Nat) :
    ∀ (L : List Res) (p : Plan) (fuel : Nat), p.todo = L → resCount L < fuel →
    (∀ r ∈ L, r.decoding = false ∧ 0 < r.remaining ∧ blocksFor eng.blockSize (r.pos + r.remaining) ≤ bW ∧ r.alloc ≤ bW) →
    p.selfPreempted = false → p.chunk = 0 →
    usedBlocks p.done + resCount L * bW ≤ eng.kvBlocks →
    (serveRunning eng only fuel p).done ++ (serveRunning eng only fuel p).todo = p.done ++ servePre eng.blockSize p.budget L ∧
    (serveRunning eng only fuel p).waiting = p.waiting ∧
    (serveRunning eng only fuel p).preempted = p.preempted ∧
    (serveRunning eng only fuel p).budget = p.budget - min p.budget (sumRem L) ∧
    (serveRunning eng only fuel p).chunk = p.chunk
  | [], p, fuel, htodo, _, _, _, _, _ => by
    rw [serveRunning_nil eng only fuel p htodo]
    exact ⟨by simp [htodo, servePre], rfl, rfl, by simp [sumRem], rfl⟩
  | r :: rest, p, fuel, htodo, hf, hL, hsp, hch, hkv => by
    obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 1 := ⟨fuel - 1, by simp only [resCount] at hf; omega⟩
    by_cases hb : p.budget = 0
    · have : serveRunning eng only (f + 1) p = p := by
        rw [serveRunning, if_pos (Or.inl hb)]
      rw [this, htodo, hb]
      exact ⟨by simp [servePre], rfl, rfl, by simp, rfl⟩
    obtain ⟨hd, hrem, hgrow, halloc⟩ := hL r List.mem_cons_self
    have hrest : ∀ x ∈ rest, x.decoding = false ∧ 0 < x.remaining ∧
        blocksFor eng.blockSize (x.pos + x.remaining) ≤ bW ∧ x.alloc ≤ bW := fun x hx => hL x (List.mem_cons_of_mem _ hx)
    have hurest := usedBlocks_le bW rest (fun x hx => (hrest x hx).2.2.2)
    have hcount : resCount (r :: rest) = resCount rest + 1 := rfl
    rw [hcount, Nat.succ_mul] at hkv
    rw [hcount] at hf
    have hg2 : blocksFor eng.blockSize (r.pos + min r.remaining p.budget) ≤ bW :=
      Nat.le_trans (blocksFor_mono _ (by omega)) hgrow
    obtain ⟨q, hq, h1, h2, h3, h4, h5, h6, h8⟩ := serve_pre_step eng only f p r rest htodo (by omega) hsp hch hd hrem hex
      (by rw [htodo]; simp only [usedBlocks]; omega)
    rw [hq]
    have hgr : r.alloc + (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc) ≤ bW := by omega
    obtain ⟨i1, i2, i3, i4, i5⟩ := serve_prefills eng only hex bW rest q f h1 (by omega) hrest h6 (by rw [h8]; exact hch)
      (by rw [h3, usedBlocks_app]; simp only [usedBlocks]; omega)
    refine ⟨?_, by rw [i2, h4], by rw [i3, h5], ?_, by rw [i5, h8]⟩
    · rw [i1, h3, h2]
      simp [servePre, hb, hd]
    · rw [i4, h2]
      simp only [sumRem]
      omega

/-- What `servePre` leaves: the same work left, `min(budget, Σ remaining)` tokens scheduled, every
resident a prefill with `sched ≤ remaining`, its prompt's blocks still within `bW`. -/
theorem servePre_facts (bs bW : Nat) : ∀ (b : Nat) (L : List Res),
    (∀ r ∈ L, r.decoding = false ∧ 0 < r.remaining ∧ r.sched = 0 ∧ blocksFor bs (r.pos + r.remaining) ≤ bW ∧
      r.alloc ≤ bW ∧ r.req.out ≤ 1) →
    sumRem (servePre bs b L) = sumRem L ∧ batchTokens (servePre bs b L) = min b (sumRem L) ∧
    ∀ x ∈ servePre bs b L, x.decoding = false ∧ 0 < x.remaining ∧ x.sched ≤ x.remaining ∧
      blocksFor bs (x.pos + x.remaining) ≤ bW ∧ x.alloc ≤ bW ∧ x.req.out ≤ 1
  | _, [], _ => by simp [servePre, sumRem, batchTokens]
  | b, r :: rs, h => by
    obtain ⟨hd, hrem, hs, hbl, hal, hout⟩ := h r List.mem_cons_self
    have hrs := fun x hx => h x (List.mem_cons_of_mem _ hx)
    by_cases hb : b = 0
    · subst hb
      have hz : ∀ (L : List Res), (∀ r ∈ L, r.sched = 0) → batchTokens L = 0 := by
        intro L hL
        induction L with
        | nil => rfl
        | cons y ys ih =>
          simp only [batchTokens, hL y List.mem_cons_self, Nat.zero_add]
          exact ih (fun z hz => hL z (List.mem_cons_of_mem _ hz))
      simp only [servePre, if_true, Nat.zero_min]
      refine ⟨trivial, hz _ (fun x hx => (h x hx).2.2.1), fun x hx => ?_⟩
      obtain ⟨a1, a2, a3, a4, a5, a6⟩ := h x hx
      exact ⟨a1, a2, by omega, a4, a5, a6⟩
    · obtain ⟨i1, i2, i3⟩ := servePre_facts bs bW (b - min r.remaining b) rs hrs
      simp only [servePre, hb, if_false, sumRem, batchTokens, i1, i2]
      refine ⟨trivial, by omega, fun x hx => ?_⟩
      rcases List.mem_cons.mp hx with rfl | hx
      · refine ⟨hd, hrem, Nat.min_le_left _ _, hbl, ?_, hout⟩
        have : blocksFor bs (r.pos + min r.remaining b) ≤ bW := Nat.le_trans (blocksFor_mono _ (by omega)) hbl
        dsimp only
        omega
      · exact i3 x hx

/-! ## Admitting fresh requests -/

/-- A fresh request (its work `W` its prompt, nothing to reuse) at the head of the queue, with budget,
a slot and room for its prompt: admitted, it takes `min(W, budget)` tokens. -/
theorem admit_fresh_step (eng : Engine) (only : Option Bool) (f : Nat) (p : Plan) (rq : Req) (rest : List Req)
    (W : Nat) (hw : p.waiting = rq :: rest) (hb : 0 < p.budget) (hcap : resCount p.done < eng.reqsCap)
    (hch : p.chunk = 0) (hex : excluded only false = false) (hkept : rq.kept = W) (hcomp : rq.computed = 0)
    (hhit : rq.hit = 0) (hW : 0 < W) (hK : usedBlocks p.done + blocksFor eng.blockSize W ≤ eng.kvBlocks) :
    ∃ q x, admitHeads eng only (f + 1) p = admitHeads eng only f q ∧ q.waiting = rest ∧
      q.done = appendRes p.done [x] ∧ q.budget = p.budget - min W p.budget ∧ q.preempted = p.preempted ∧
      q.chunk = p.chunk ∧ x.decoding = false ∧ x.sched = min W p.budget ∧ x.remaining = W ∧ x.pos = 0 ∧
      x.alloc ≤ blocksFor eng.blockSize W ∧ x.req.out = rq.out := by
  have hknown : max rq.kept (rq.computed + 1) = W := by rw [hkept, hcomp]; omega
  have hreuse : reuseCap eng.blockSize rq W = 0 := by simp [reuseCap, hcomp, hhit]
  have hunits : blocksFor eng.blockSize (min W p.budget) ≤ blocksFor eng.blockSize W := blocksFor_mono _ (by omega)
  have hgo : ¬ (p.budget = 0 ∨ resCount p.done ≥ eng.reqsCap) := by omega
  rw [admitHeads, if_neg hgo]
  simp only [hw, hknown, hreuse, Nat.min_zero, Nat.sub_zero, hch, capChunk_zero, Nat.zero_add, hex,
    Bool.false_eq_true, if_false]
  rw [if_neg (by omega)]
  refine ⟨_, _, rfl, rfl, rfl, rfl, rfl, rfl, rfl, rfl, rfl, rfl, hunits, ?_⟩
  dsimp only
  split <;> rfl

/-- The facts a fresh request of `W` tokens keeps while it waits. -/
def Fresh (W : Nat) (rq : Req) : Prop := rq.kept = W ∧ rq.computed = 0 ∧ rq.hit = 0 ∧ rq.out ≤ 1

/-- What `servePre_facts` says of a resident, kept by every iteration. -/
def PreOk (bs bW : Nat) (x : Res) : Prop :=
  x.decoding = false ∧ 0 < x.remaining ∧ x.sched ≤ x.remaining ∧ blocksFor bs (x.pos + x.remaining) ≤ bW ∧
    x.alloc ≤ bW ∧ x.req.out ≤ 1

/-- **The heads of the queue, fresh requests of `W` tokens, are admitted while the budget lasts**
(with slots and room for all of them): the admitted take `min(budget, W · queued)` tokens, and the
work of the admitted plus that of those left waiting is `W · queued`. -/
theorem admit_fresh (eng : Engine) (only : Option Bool) (hex : excluded only false = false) (W bW : Nat)
    (hW : 0 < W) (hbW : blocksFor eng.blockSize W ≤ bW) :
    ∀ (Qs : List Req) (p : Plan) (fuel : Nat), p.waiting = Qs → reqCount Qs < fuel → (∀ rq ∈ Qs, Fresh W rq) →
    p.chunk = 0 → resCount p.done + reqCount Qs ≤ eng.reqsCap → usedBlocks p.done + reqCount Qs * bW ≤ eng.kvBlocks →
    ∃ A, (admitHeads eng only fuel p).done = p.done ++ A ∧ batchTokens A = min p.budget (W * reqCount Qs) ∧
      sumRem A + W * reqCount (admitHeads eng only fuel p).waiting = W * reqCount Qs ∧
      (admitHeads eng only fuel p).preempted = p.preempted ∧
      (∀ x ∈ A, PreOk eng.blockSize bW x) ∧ (∀ rq ∈ (admitHeads eng only fuel p).waiting, rq ∈ Qs) ∧
      resCount A + reqCount (admitHeads eng only fuel p).waiting = reqCount Qs
  | [], p, fuel, hw, _, _, _, _, _ => by
    rw [admitHeads_nil eng only fuel p hw]
    exact ⟨[], by simp, by simp [batchTokens, reqCount], by simp [sumRem, hw, reqCount], rfl, by simp,
      fun rq h => by rw [hw] at h; exact h, by simp [resCount, hw]⟩
  | rq :: rest, p, fuel, hw, hf, hQ, hch, hcap, hkv => by
    obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 1 := ⟨fuel - 1, by simp only [reqCount] at hf; omega⟩
    have hcount : reqCount (rq :: rest) = reqCount rest + 1 := rfl
    rw [hcount] at hf hcap hkv
    rw [Nat.succ_mul] at hkv
    by_cases hb : p.budget = 0
    · have : admitHeads eng only (f + 1) p = p := by
        rw [admitHeads, if_pos (Or.inl hb)]
      rw [this]
      exact ⟨[], by simp, by simp [batchTokens, hb], by simp [sumRem, hw], rfl, by simp, fun x h => by rw [hw] at h; exact h,
        by simp [resCount, hw]⟩
    obtain ⟨hk, hc, hh, hout⟩ := hQ rq List.mem_cons_self
    obtain ⟨q, x, hq, h1, h2, h3, h4, h5, x1, x2, x3, x4, x5, x6⟩ := admit_fresh_step eng only f p rq rest W hw
      (by omega) (by omega) hch hex hk hc hh hW (by omega)
    have hx : PreOk eng.blockSize bW x := by
      refine ⟨x1, by omega, by rw [x2, x3]; exact Nat.min_le_left _ _, by rw [x4, x3, Nat.zero_add]; exact hbW,
        by omega, by rw [x6]; exact hout⟩
    have hxu : x.alloc ≤ bW := hx.2.2.2.2.1
    obtain ⟨A, i1, i2, i3, i4, i5, i6, i7⟩ := admit_fresh eng only hex W bW hW hbW rest q f h1 (by omega)
      (fun y hy => hQ y (List.mem_cons_of_mem _ hy)) (by rw [h5]; exact hch)
      (by rw [h2, appendRes_eq', resCount_app]; simp only [resCount]; omega)
      (by rw [h2, appendRes_eq', usedBlocks_app]; simp only [usedBlocks]; omega)
    rw [hq]
    refine ⟨x :: A, by rw [i1, h2, appendRes_eq']; simp, ?_, ?_, by rw [i4, h4], ?_,
      fun y hy => List.mem_cons_of_mem _ (i6 y hy), by simp only [resCount, hcount]; omega⟩
    · simp only [batchTokens, i2, h3, x2, hcount, Nat.mul_succ]
      omega
    · simp only [sumRem, hcount, Nat.mul_succ, x3]
      omega
    · intro y hy
      rcases List.mem_cons.mp hy with rfl | hy
      · exact hx
      · exact i5 y hy

/-! ## The iteration's plan -/

theorem sumRem_clearSched : ∀ (L : List Res), sumRem (clearSched L) = sumRem L
  | [] => rfl
  | r :: rs => by simp only [clearSched, sumRem, sumRem_clearSched rs]

theorem resCount_servePre (bs : Nat) : ∀ (b : Nat) (L : List Res), resCount (servePre bs b L) = resCount L
  | _, [] => rfl
  | b, r :: rs => by
    unfold servePre
    split
    · rfl
    · simp only [resCount, resCount_servePre bs _ rs]

/-- **One iteration's plan** (no chunk cap) of a machine whose residents are prefills (`PreOk`) and
whose queue holds fresh requests of `W` tokens, with slots and blocks for all of them: it schedules
`min(budget, Σ remaining + W · queued)` tokens, preempts nothing, and its residents' work plus the work
left waiting is the work before it. -/
theorem plan_pre (eng : Engine) (W bW : Nat) (m : Machine) (Qs : List Req) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hL : ∀ r ∈ m.running, PreOk eng.blockSize bW r)
    (hQ : ∀ rq ∈ Qs, Fresh W rq) (hcap : resCount m.running + reqCount Qs ≤ eng.reqsCap)
    (hkv : resCount m.running * bW + reqCount Qs * bW ≤ eng.kvBlocks) :
    batchTokens (plan eng 0 m Qs).done = min eng.budget (sumRem m.running + W * reqCount Qs) ∧
      sumRem (plan eng 0 m Qs).done + W * reqCount (plan eng 0 m Qs).waiting = sumRem m.running + W * reqCount Qs ∧
      (plan eng 0 m Qs).preempted = 0 ∧ (∀ x ∈ (plan eng 0 m Qs).done, PreOk eng.blockSize bW x) ∧
      (∀ rq ∈ (plan eng 0 m Qs).waiting, rq ∈ Qs) ∧
      resCount (plan eng 0 m Qs).done + reqCount (plan eng 0 m Qs).waiting = resCount m.running + reqCount Qs := by
  have hex : excluded (phaseOf eng m.running) false = false :=
    excluded_prefill eng _ (anyDecoding_false _ (fun r hr => (hL r hr).1))
  have hC : ∀ r ∈ clearSched m.running, r.decoding = false ∧ 0 < r.remaining ∧ r.sched = 0 ∧
      blocksFor eng.blockSize (r.pos + r.remaining) ≤ bW ∧ r.alloc ≤ bW ∧ r.req.out ≤ 1 := by
    intro x hx
    obtain ⟨r, hr, rfl⟩ := mem_clearSched _ x hx
    obtain ⟨a1, a2, _, a4, a5, a6⟩ := hL r hr
    exact ⟨a1, a2, rfl, a4, a5, a6⟩
  obtain ⟨s1, s2, s3⟩ := servePre_facts eng.blockSize bW eng.budget (clearSched m.running) hC
  rw [sumRem_clearSched] at s1 s2
  obtain ⟨i1, i2, i3, i4, i5⟩ := serve_prefills eng (phaseOf eng m.running) hex bW (clearSched m.running)
    ⟨eng.budget, 0, [], clearSched m.running, Qs, m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega) (fun r hr => by obtain ⟨a, b, _, d, e, _⟩ := hC r hr; exact ⟨a, b, d, e⟩)
    rfl rfl (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; omega)
  rw [sumRem_clearSched] at i4
  unfold plan
  dsimp only
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, 0, [], clearSched m.running, Qs, m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i5 ⊢
  simp only at i1 i2 i3 i4 i5
  rw [if_pos i3]
  have hdone : appendRes p1.done p1.todo = servePre eng.blockSize eng.budget (clearSched m.running) := by
    rw [appendRes_eq', i1]; rfl
  have hcnt : resCount (servePre eng.blockSize eng.budget (clearSched m.running)) = resCount m.running := by
    rw [resCount_servePre, resCount_clearSched']
  have hused : usedBlocks (servePre eng.blockSize eng.budget (clearSched m.running)) ≤ resCount m.running * bW := by
    rw [← hcnt]; exact usedBlocks_le bW _ (fun x hx => (s3 x hx).2.2.2.2.1)
  obtain ⟨A, a1, a2, a3, a4, a5, a6, a7⟩ := admit_fresh eng (phaseOf eng m.running) hex W bW hW hbW Qs
    { p1 with done := appendRes p1.done p1.todo, todo := [] } (reqCount p1.waiting + 1) (by simp [i2])
    (by rw [i2]; omega) hQ (by simp [i5]) (by simp only [hdone, hcnt]; omega) (by simp only [hdone]; omega)
  simp only [hdone] at a1 a2 a3 a4 a5 a6 a7 ⊢
  rw [a1, batchTokens_app, sumRem_app, resCount_app, hcnt]
  refine ⟨?_, ?_, by rw [a4]; simp [i3], ?_, a6, by omega⟩
  · rw [s2, a2, i4]; omega
  · rw [s1]; omega
  · intro x hx
    rcases List.mem_append.mp hx with hx | hx
    · exact s3 x hx
    · exact a5 x hx

/-- Every survivor of a batch of prefills (`PreOk`) is again one. -/
theorem stepAll_preOk (now bs bW : Nat) : ∀ (L : List Res), (∀ r ∈ L, PreOk bs bW r) →
    ∀ x ∈ stepAll now L, PreOk bs bW x
  | [], _ => by simp [stepAll]
  | r :: rs, h => by
    intro x hx
    rw [stepAll_cons] at hx
    rcases List.mem_append.mp hx with hx | hx
    · obtain ⟨hd, hrem, hs, hbl, hal, hout⟩ := h r List.mem_cons_self
      obtain ⟨a, b, c, d, e, f⟩ := (stepRes_prefill_sum now r hd hs hout).2 x hx
      exact ⟨a, f hrem, by omega, by rw [e]; exact hbl, by rw [d]; exact hal, by rw [c]; exact hout⟩
    · exact stepAll_preOk now bs bW rs (fun y hy => h y (List.mem_cons_of_mem _ hy)) x hx

/-! ## One step of the machine -/

/-- The machine's work left: the residents' remaining tokens and `W` for each request waiting. -/
def work (W : Nat) (m : Machine) : Nat := sumRem m.running + W * reqCount m.waiting

theorem appendReq_eq : ∀ (w : List Req) (r : Req), appendReq w r = w ++ [r]
  | [], _ => rfl
  | x :: xs, r => by simp [appendReq, appendReq_eq xs r]

theorem reqCount_app : ∀ (a b : List Req), reqCount (a ++ b) = reqCount a + reqCount b
  | [], b => by simp [reqCount]
  | x :: xs, b => by simp only [List.cons_append, reqCount, reqCount_app xs b]; omega

/-- The due turns, first turns of `W`-token prompts that fit the pool, all join the queue, fresh. -/
theorem submit_fresh (eng : Engine) (ss : List Session) (W : Nat) (hcache : eng.caching = false)
    (hss : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks) :
    ∀ (due : List Pending) (w : List Req), (∀ p ∈ due, p.prompt = W) → (∀ rq ∈ w, Fresh W rq) →
      reqCount (submit eng ss due w) = reqCount w + due.length ∧ ∀ rq ∈ submit eng ss due w, Fresh W rq
  | [], w, _, hw => ⟨by simp [submit], hw⟩
  | p :: ps, w, hd, hw => by
    have hp := hd p List.mem_cons_self
    have hno : ¬ blocksFor eng.blockSize p.prompt > eng.kvBlocks := by rw [hp]; omega
    have hfresh : Fresh W (newReq eng ss p) :=
      ⟨by simp [newReq, hp], by simp [newReq], by simp [newReq, hcache], newReq_out eng ss hss p⟩
    obtain ⟨i1, i2⟩ := submit_fresh eng ss W hcache hss hfit ps (appendReq w (newReq eng ss p))
      (fun q hq => hd q (List.mem_cons_of_mem _ hq))
      (fun rq hrq => by
        rw [appendReq_eq] at hrq
        rcases List.mem_append.mp hrq with h | h
        · exact hw rq h
        · simp only [List.mem_singleton] at h; subst h; exact hfresh)
    simp only [submit, if_neg hno]
    refine ⟨?_, i2⟩
    rw [i1, appendReq_eq, reqCount_app]
    simp [reqCount]
    omega

/-- **One step of the machine is the chain's step.** With no chunk cap, no prefix cache, sessions of
one turn of at most one output token, residents that are prefills (`PreOk`) and a queue of fresh
requests of `W` tokens, the turns due at the step's start `W`-token prompts, and request slots and
`bW` blocks each for every request in flight or due: the work left after the step is
`work + k · W − budget`, stopping at 0, `k` the turns due (`Serq.Drift.nextBacklog`'s step), and the
residents and queue keep their shape. -/
theorem step_work (eng : Engine) (ss : List Session) (W bW : Nat) (m : Machine) (due later : List Pending)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hss : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1)
    (hdue : duePending m.now m.pending = (due, later)) (hdW : ∀ p ∈ due, p.prompt = W)
    (hL : ∀ r ∈ m.running, PreOk eng.blockSize bW r) (hQ : ∀ rq ∈ m.waiting, Fresh W rq)
    (hcap : resCount m.running + reqCount m.waiting + due.length ≤ eng.reqsCap)
    (hkv : (resCount m.running + reqCount m.waiting + due.length) * bW ≤ eng.kvBlocks) :
    work W (step eng ss m) = work W m + due.length * W - eng.budget ∧
      (∀ r ∈ (step eng ss m).running, PreOk eng.blockSize bW r) ∧
      (∀ rq ∈ (step eng ss m).waiting, Fresh W rq) ∧
      resCount (step eng ss m).running + reqCount (step eng ss m).waiting
        ≤ resCount m.running + reqCount m.waiting + due.length ∧
      (step eng ss m).pending = later ∧
      ((step eng ss m).now = m.now + 1 ∨ (due.length = 0 ∧ work W m = 0 ∧
        ((later = [] ∧ (step eng ss m).now = m.now) ∨ ∃ q qs, later = q :: qs ∧ (step eng ss m).now = q.time))) := by
  obtain ⟨n1, f1⟩ := submit_fresh eng ss W hcache hss hfit due m.waiting hdW hQ
  have hnext := nextTurn_single ss hss
  unfold step
  rw [hdue]
  dsimp only
  generalize hw : submit eng ss due m.waiting = Qs at n1 f1
  by_cases hidle : noRes m.running = true ∧ noReq Qs = true
  · rw [if_pos hidle]
    obtain ⟨h1, h2⟩ := hidle
    have hr : m.running = [] := by cases h : m.running <;> simp_all [noRes]
    have hq : Qs = [] := by cases h : Qs <;> simp_all [noReq]
    subst hq
    simp only [reqCount] at n1
    have hz : W * reqCount m.waiting + due.length * W = 0 := by
      have e1 : due.length = 0 := by omega
      have e2 : reqCount m.waiting = 0 := by omega
      rw [e1, e2, Nat.mul_zero, Nat.zero_mul]
    cases later with
    | nil =>
      simp only [work, hr, sumRem, reqCount, resCount]
      refine ⟨by omega, by simp, by simp, by omega, by simp, Or.inr ⟨by omega, by omega, Or.inl ⟨trivial, by simp⟩⟩⟩
    | cons q qs =>
      simp only [work, hr, sumRem, reqCount, resCount]
      refine ⟨by omega, by simp, by simp, by omega, by simp, Or.inr ⟨by omega, by omega, Or.inr ⟨q, qs, rfl, by simp⟩⟩⟩
  · rw [if_neg hidle]
    have hc0 : (if eng.chunk > 0 ∧ resCount m.running + reqCount Qs > 1 then eng.chunk else 0) = 0 := by
      simp [hch]
    rw [hc0]
    obtain ⟨p1, p2, p3, p4, p5, p6⟩ := plan_pre eng W bW m Qs hW hbW hL f1 (by omega)
      (by rw [n1, ← Nat.add_mul, ← Nat.add_assoc]; exact hkv)
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
    rw [if_neg (by rw [p1, p3]; omega)]
    have hpre : ∀ r ∈ (plan eng 0 m Qs).done, r.decoding = false ∧ r.sched ≤ r.remaining ∧ r.req.out ≤ 1 :=
      fun r hr => by obtain ⟨a, _, c, _, _, f⟩ := p4 r hr; exact ⟨a, c, f⟩
    obtain ⟨s1, s2⟩ := stepAll_prefills m.now _ hpre
    obtain ⟨k1, _, k3, _, _⟩ := apply_keeps eng ss m.now (hnext m.now) (plan eng 0 m Qs).done
      { m with pending := later, waiting := (plan eng 0 m Qs).waiting, cache := (plan eng 0 m Qs).cache,
               relSeq := (plan eng 0 m Qs).relSeq, arrived := m.arrived + countFirst due,
               records := appendRecord m.records ⟨m.now, batchTokens (plan eng 0 m Qs).done,
                 batchPrefilled (plan eng 0 m Qs).done, batchDecoders (plan eng 0 m Qs).done,
                 resCount (plan eng 0 m Qs).done, kvDecode eng.blockSize (plan eng 0 m Qs).done,
                 kvPrefill (plan eng 0 m Qs).done, demandOf 0 (plan eng 0 m Qs).done, m.served,
                 m.arrived + countFirst due⟩,
               served := m.served + batchTokens (plan eng 0 m Qs).done } []
    have hrun := apply_running eng ss m.now (plan eng 0 m Qs).done
      { m with pending := later, waiting := (plan eng 0 m Qs).waiting, cache := (plan eng 0 m Qs).cache,
               relSeq := (plan eng 0 m Qs).relSeq, arrived := m.arrived + countFirst due,
               records := appendRecord m.records ⟨m.now, batchTokens (plan eng 0 m Qs).done,
                 batchPrefilled (plan eng 0 m Qs).done, batchDecoders (plan eng 0 m Qs).done,
                 resCount (plan eng 0 m Qs).done, kvDecode eng.blockSize (plan eng 0 m Qs).done,
                 kvPrefill (plan eng 0 m Qs).done, demandOf 0 (plan eng 0 m Qs).done, m.served,
                 m.arrived + countFirst due⟩,
               served := m.served + batchTokens (plan eng 0 m Qs).done } []
    simp only [List.nil_append] at hrun
    simp only [work, hrun, k1, k3]
    have hc := resCount_stepAll m.now (plan eng 0 m Qs).done
    refine ⟨?_, ?_, fun rq hrq => f1 rq (p5 rq hrq), by omega, by simp, Or.inl (by simp)⟩
    · rw [n1] at p1 p2
      rw [Nat.mul_add, Nat.mul_comm W due.length] at p1 p2
      omega
    · exact stepAll_preOk m.now eng.blockSize bW _ p4

/-! ## Every step of a run -/

theorem duePending_parts (now : Nat) : ∀ (ps : List Pending),
    (duePending now ps).1.length + (duePending now ps).2.length = ps.length ∧
      (∀ q ∈ (duePending now ps).2, q ∈ ps)
  | [] => by simp [duePending]
  | p :: ps => by
    have ih := duePending_parts now ps
    simp only [duePending]
    generalize duePending now ps = dl at ih ⊢
    obtain ⟨d, l⟩ := dl
    obtain ⟨i1, i2⟩ := ih
    dsimp only at i1 i2 ⊢
    split
    · refine ⟨by simp only [List.length_cons]; omega, fun q hq => List.mem_cons_of_mem _ (i2 q hq)⟩
    · refine ⟨by simp only [List.length_cons]; omega, fun q hq => ?_⟩
      rcases List.mem_cons.mp hq with rfl | hq
      · exact List.mem_cons_self
      · exact List.mem_cons_of_mem _ (i2 q hq)

theorem length_insertPending (p : Pending) : ∀ (l : List Pending), (insertPending p l).length = l.length + 1
  | [] => rfl
  | q :: qs => by
    simp only [insertPending]
    split
    · simp
    · simp [length_insertPending p qs]

/-- The sessions: each one turn of a `W`-token prompt and at most one output token. -/
def OneTurnW (W : Nat) (ss : List Session) : Prop := ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = W ∧ t.out ≤ 1

theorem firstTurns_facts (W : Nat) : ∀ (k : Nat) (ss : List Session), OneTurnW W ss →
    (firstTurns k ss).length ≤ sessionCount ss ∧ ∀ p ∈ firstTurns k ss, p.prompt = W
  | _, [], _ => by simp [firstTurns, sessionCount]
  | k, s :: ss, h => by
    obtain ⟨t, ht, hnew, _⟩ := h s List.mem_cons_self
    obtain ⟨i1, i2⟩ := firstTurns_facts W (k + 1) ss (fun x hx => h x (List.mem_cons_of_mem _ hx))
    simp only [firstTurns, ht]
    refine ⟨by rw [length_insertPending]; simp only [sessionCount]; omega, fun p hp => ?_⟩
    rcases mem_insertPending_aux _ p _ hp with rfl | hp
    · exact hnew
    · exact i2 p hp

/-- The invariant of a run: residents prefills, queue fresh, pending prompts `W`, and at most `N`
requests in flight or pending. -/
def Inv (bs W bW N : Nat) (m : Machine) : Prop :=
  (∀ r ∈ m.running, PreOk bs bW r) ∧ (∀ rq ∈ m.waiting, Fresh W rq) ∧ (∀ p ∈ m.pending, p.prompt = W) ∧
    resCount m.running + reqCount m.waiting + m.pending.length ≤ N

theorem init_inv (bs W bW : Nat) (ss : List Session) (h : OneTurnW W ss) :
    Inv bs W bW (sessionCount ss) (init ss) := by
  obtain ⟨i1, i2⟩ := firstTurns_facts W 0 ss h
  refine ⟨by simp [init], by simp [init], i2, ?_⟩
  simp only [init, resCount, reqCount]
  omega

/-- A step keeps the invariant, and is the chain's step. -/
theorem step_inv (eng : Engine) (ss : List Session) (W bW N : Nat) (m : Machine)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks)
    (h : Inv eng.blockSize W bW N m) :
    Inv eng.blockSize W bW N (step eng ss m) ∧
      work W (step eng ss m) = work W m + (duePending m.now m.pending).1.length * W - eng.budget ∧
      ((step eng ss m).now = m.now + 1 ∨ ((duePending m.now m.pending).1.length = 0 ∧ work W m = 0)) := by
  obtain ⟨hL, hQ, hP, hN⟩ := h
  have hd := duePending_parts m.now m.pending
  generalize hdl : duePending m.now m.pending = dl at hd ⊢
  obtain ⟨due, later⟩ := dl
  obtain ⟨d1, d2⟩ := hd
  dsimp only at d1 d2 ⊢
  have hss : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1 := fun s hs => by
    obtain ⟨t, ht, _, ho⟩ := hS s hs; exact ⟨t, ht, ho⟩
  have hdW : ∀ p ∈ due, p.prompt = W := by
    intro p hp
    -- the due turns are pending turns
    have : ∀ (now : Nat) (ps : List Pending), ∀ q ∈ (duePending now ps).1, q ∈ ps := by
      intro now ps
      induction ps with
      | nil => simp [duePending]
      | cons x xs ih =>
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
    have h1 := this m.now m.pending p
    rw [hdl] at h1
    exact hP p (h1 hp)
  have hcnt : resCount m.running + reqCount m.waiting + due.length ≤ N := by omega
  obtain ⟨w1, w2, w3, w4, w5, w6⟩ := step_work eng ss W bW m due later hch hcache hB hW hbW hfit hss hdl hdW hL hQ
    (by omega) (Nat.le_trans (Nat.mul_le_mul_right _ hcnt) hkv)
  refine ⟨⟨w2, w3, by rw [w5]; exact fun p hp => hP p (d2 p hp), by rw [w5]; omega⟩, w1,
    w6.imp id (fun h => ⟨h.1, h.2.1⟩)⟩

theorem run_inv (eng : Engine) (ss : List Session) (W bW N : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (m : Machine), Inv eng.blockSize W bW N m → Inv eng.blockSize W bW N (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng ss W bW N hch hcache hB hW hbW hfit hS hcap hkv fuel _
        (step_inv eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h).1

/-- The machine's work is 0 exactly when its engine is empty: no resident, no request waiting. -/
theorem work_zero_iff (bs W bW N : Nat) (m : Machine) (hW : 0 < W) (h : Inv bs W bW N m) :
    work W m = 0 ↔ m.running = [] ∧ m.waiting = [] := by
  constructor
  · intro hz
    unfold work at hz
    refine ⟨?_, ?_⟩
    · cases hr : m.running with
      | nil => rfl
      | cons r rs =>
        have := (h.1 r (by rw [hr]; exact List.mem_cons_self)).2.1
        rw [hr] at hz
        simp only [sumRem] at hz
        omega
    · cases hq : m.waiting with
      | nil => rfl
      | cons q qs =>
        rw [hq] at hz
        simp only [reqCount] at hz
        have : W ≤ W * (reqCount qs + 1) := Nat.le_mul_of_pos_right _ (by omega)
        omega
  · intro ⟨h1, h2⟩
    simp [work, h1, h2, sumRem, reqCount]

/-! ## The clock: no arrival is late -/

/-- The pending turns in order of time. -/
def SortedT : List Pending → Prop
  | [] => True
  | p :: ps => (∀ q ∈ ps, p.time ≤ q.time) ∧ SortedT ps

theorem insertPending_sorted (p : Pending) : ∀ (l : List Pending), SortedT l → SortedT (insertPending p l)
  | [], _ => ⟨by simp, trivial⟩
  | q :: qs, ⟨h1, h2⟩ => by
    simp only [insertPending]
    split
    · rename_i hb
      have : p.time ≤ q.time := by
        simp only [pendingBefore, Bool.or_eq_true, Bool.and_eq_true, beq_iff_eq, decide_eq_true_eq] at hb
        omega
      refine ⟨fun x hx => ?_, h1, h2⟩
      rcases List.mem_cons.mp hx with rfl | hx
      · exact this
      · have := h1 x hx; omega
    · rename_i hb
      have : q.time ≤ p.time := by
        simp only [pendingBefore, Bool.or_eq_true, Bool.and_eq_true, beq_iff_eq, decide_eq_true_eq] at hb
        omega
      refine ⟨fun x hx => ?_, insertPending_sorted p qs h2⟩
      rcases mem_insertPending_aux p x qs hx with rfl | hx
      · exact this
      · exact h1 x hx

theorem firstTurns_sorted : ∀ (k : Nat) (ss : List Session), SortedT (firstTurns k ss)
  | _, [] => trivial
  | k, s :: ss => by
    simp only [firstTurns]
    split
    · exact firstTurns_sorted (k + 1) ss
    · exact insertPending_sorted _ _ (firstTurns_sorted (k + 1) ss)

theorem duePending_later (now : Nat) : ∀ (ps : List Pending),
    (∀ q ∈ (duePending now ps).2, now < q.time) ∧ (SortedT ps → SortedT (duePending now ps).2)
  | [] => by simp [duePending, SortedT]
  | p :: ps => by
    have ih := duePending_later now ps
    have hmem := (duePending_parts now ps).2
    simp only [duePending]
    generalize duePending now ps = dl at ih hmem ⊢
    obtain ⟨d, l⟩ := dl
    obtain ⟨i1, i2⟩ := ih
    dsimp only at i1 i2 hmem ⊢
    split
    · exact ⟨i1, fun h => i2 h.2⟩
    · rename_i hp
      refine ⟨fun q hq => ?_, fun h => ⟨fun q hq => h.1 q (hmem q hq), i2 h.2⟩⟩
      rcases List.mem_cons.mp hq with rfl | hq
      · omega
      · exact i1 q hq

/-- A step keeps the pending turns in order and none of them before the clock. -/
theorem step_clock (eng : Engine) (ss : List Session) (W bW N : Nat) (m : Machine)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks)
    (h : Inv eng.blockSize W bW N m) (hs : SortedT m.pending) :
    SortedT (step eng ss m).pending ∧ (∀ p ∈ (step eng ss m).pending, (step eng ss m).now ≤ p.time) ∧
      (step eng ss m).pending = (duePending m.now m.pending).2 ∧
      ((step eng ss m).now = m.now + 1 ∨ ((duePending m.now m.pending).1.length = 0 ∧
        (((duePending m.now m.pending).2 = [] ∧ (step eng ss m).now = m.now) ∨
          ∃ q qs, (duePending m.now m.pending).2 = q :: qs ∧ (step eng ss m).now = q.time))) := by
  obtain ⟨hL, hQ, hP, hN⟩ := h
  have hd := duePending_parts m.now m.pending
  have hlat := duePending_later m.now m.pending
  generalize hdl : duePending m.now m.pending = dl at hd hlat ⊢
  obtain ⟨due, later⟩ := dl
  obtain ⟨d1, d2⟩ := hd
  obtain ⟨l1, l2⟩ := hlat
  dsimp only at d1 d2 l1 l2 ⊢
  have hss : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1 := fun s hs => by
    obtain ⟨t, ht, _, ho⟩ := hS s hs; exact ⟨t, ht, ho⟩
  have hdW : ∀ p ∈ due, p.prompt = W := by
    intro p hp
    have : ∀ (now : Nat) (ps : List Pending), ∀ q ∈ (duePending now ps).1, q ∈ ps := by
      intro now ps
      induction ps with
      | nil => simp [duePending]
      | cons x xs ih =>
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
    have h1 := this m.now m.pending p
    rw [hdl] at h1
    exact hP p (h1 hp)
  have hcnt : resCount m.running + reqCount m.waiting + due.length ≤ N := by omega
  obtain ⟨_, _, _, _, w5, w6⟩ := step_work eng ss W bW m due later hch hcache hB hW hbW hfit hss hdl hdW hL hQ
    (by omega) (Nat.le_trans (Nat.mul_le_mul_right _ hcnt) hkv)
  have hsl := l2 hs
  have hE : (step eng ss m).now = m.now + 1 ∨ (due.length = 0 ∧
      ((later = [] ∧ (step eng ss m).now = m.now) ∨ ∃ q qs, later = q :: qs ∧ (step eng ss m).now = q.time)) :=
    w6.imp id (fun h => ⟨h.1, h.2.2⟩)
  refine ⟨by rw [w5]; exact hsl, ?_, w5, hE⟩
  rw [w5]
  intro p hp
  rcases w6 with hn | ⟨_, _, ⟨hl, _⟩ | ⟨q, qs, hl, hn⟩⟩
  · rw [hn]; have := l1 p hp; omega
  · rw [hl] at hp; simp at hp
  · rw [hn]
    rw [hl] at hp hsl
    rcases List.mem_cons.mp hp with rfl | hp
    · exact Nat.le_refl _
    · exact hsl.1 p hp

theorem run_clock (eng : Engine) (ss : List Session) (W bW N : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (m : Machine), Inv eng.blockSize W bW N m → SortedT m.pending →
      (∀ p ∈ m.pending, m.now ≤ p.time) →
      SortedT (run eng ss fuel m).pending ∧ ∀ p ∈ (run eng ss fuel m).pending, (run eng ss fuel m).now ≤ p.time
  | 0, _, _, hs, hc => ⟨hs, hc⟩
  | fuel + 1, m, h, hs, hc => by
    simp only [run]
    split
    · exact ⟨hs, hc⟩
    · obtain ⟨c1, c2, _⟩ := step_clock eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs
      exact run_clock eng ss W bW N hch hcache hB hW hbW hfit hS hcap hkv fuel _
        (step_inv eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h).1 c1 c2

end DriftMachine

/-- **Every step of every run of the machine is the drift chain's step** (issue 14, result 7, second
part). Sessions of one turn each, a `W`-token prompt and at most one output token; no chunk cap, no
prefix cache (`phased` free); a slot for every session (`sessionCount ss ≤ reqsCap`) and `bW ≥` a
prompt's blocks for every session in the KV pool (`sessionCount ss · bW ≤ kvBlocks`). The machine's
work left (`DriftMachine.work`: the residents' remaining tokens and `W` per queued request) starts at 0,
and from every machine `m` of the run, the next step leaves `work m + k · W − budget` (stopping at 0),
`k` the turns due at `m`'s step: `Serq.Drift.nextBacklog`'s step `r + k · W − B`. -/
theorem drift_machine_step (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : DriftMachine.OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (fuel : Nat) :
    DriftMachine.work W (init ss) = 0 ∧
      DriftMachine.work W (step eng ss (run eng ss fuel (init ss)))
        = DriftMachine.work W (run eng ss fuel (init ss))
          + (duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1.length * W
          - eng.budget := by
  refine ⟨by simp [DriftMachine.work, init, BacklogMany.sumRem, reqCount], ?_⟩
  exact (DriftMachine.step_inv eng ss W bW _ _ hch hcache hB hW hbW hfit hS hcap hkv
    (DriftMachine.run_inv eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _
      (DriftMachine.init_inv eng.blockSize W bW ss hS))).2.1

/-- **The clock**: under `drift_machine_step`'s hypotheses, a step of a run advances the clock by one
(an iteration ran), or no turn was due and the engine was empty (work 0), so the chain's step was
`0 → 0` with `k = 0` (the machine then waits for the next arrival, the clock jumping to it). -/
theorem drift_machine_clock (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : DriftMachine.OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (fuel : Nat) :
    (step eng ss (run eng ss fuel (init ss))).now = (run eng ss fuel (init ss)).now + 1 ∨
      ((duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1.length = 0 ∧
        DriftMachine.work W (run eng ss fuel (init ss)) = 0) :=
  (DriftMachine.step_inv eng ss W bW _ _ hch hcache hB hW hbW hfit hS hcap hkv
    (DriftMachine.run_inv eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _
      (DriftMachine.init_inv eng.blockSize W bW ss hS))).2.2

/-- **The machine's empty-engine steps are the chain's zero-backlog steps**: under
`drift_machine_step`'s hypotheses, at every machine of every run the work is 0 exactly when no request
is resident or waiting. -/
theorem drift_machine_empty (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : DriftMachine.OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (fuel : Nat) :
    DriftMachine.work W (run eng ss fuel (init ss)) = 0 ↔
      (run eng ss fuel (init ss)).running = [] ∧ (run eng ss fuel (init ss)).waiting = [] :=
  DriftMachine.work_zero_iff _ W bW _ _ hW
    (DriftMachine.run_inv eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _
      (DriftMachine.init_inv eng.blockSize W bW ss hS))

/-- **No arrival is late**: under `drift_machine_step`'s hypotheses, at every machine of every run every
pending turn is due no earlier than the clock, so the turns due at a step are those whose time is the
step's (`k` counts the sessions arriving at that time, none delayed), and a jump of the clock (an empty
machine waiting) skips no arrival. -/
theorem drift_machine_on_time (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : DriftMachine.OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (fuel : Nat) :
    ∀ p ∈ (run eng ss fuel (init ss)).pending, (run eng ss fuel (init ss)).now ≤ p.time :=
  (DriftMachine.run_clock eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _
    (DriftMachine.init_inv eng.blockSize W bW ss hS) (DriftMachine.firstTurns_sorted 0 ss)
    (fun _ _ => Nat.zero_le _)).2

end Serq
