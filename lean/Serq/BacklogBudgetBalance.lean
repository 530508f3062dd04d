module

public import Serq.BacklogBudgetCaps
public import Serq.BacklogBudgetSound
public import Serq.BacklogBudgetIdle
public import Serq.BacklogBudgetLater

/-! # The work conservation of a run with budget cuts (issue 14, result 2, case (b))

The resets that `Serq.BacklogBudget.hstep_of_resets` asks for come from the work conservation
`arrived · W = served + work left`. `Serq.BacklogBudget.stepAll_work` proved the iteration's half (an
iteration's tokens come out of the residents' work left); this module proves the admission half and
assembles the conservation on every run from `init` of an engine of vLLM's mixed schedule
(`phased = false`) without a prefix cache (`caching = false`), for one-turn sessions of `P > 0` prompt
tokens and `D` output tokens (`W = P + (D - 1)`), when no turn is refused (`blocksFor blockSize P ≤
kvBlocks`) and no step of the run preempts (`NoPre` at every machine of the run that has not settled;
`run_nopre` derives it from `run_caps`'s `StepOk`):

* the work left (`Serq.BacklogBudget.workLeft`): a waiting request's `prompt + (out - 1)`, a decoding
  resident's `remaining`, a prefilling resident's `remaining + (out - 1 - (known - prompt))` (the decode
  tokens `apply` gives it when its prefill ends);
* the plan keeps the work of the residents and the queue (`plan_bal`): serving moves residents from
  `todo` to `done`, and an admission turns a fresh head's `prompt + (out - 1)` into a prefill of
  `remaining = prompt`; an admission schedules at least one token, so a plan of no token admits nothing;
* the submission adds `W` per first turn due (`submit_work`), which is what `arrived` counts
  (`countFirst`), every pending turn being a first turn of `P` tokens (one-turn sessions create no next
  turn: `BacklogDecode.nextTurn_one`);
* so every step keeps `arrived · W = served + workLeft` (`step_bal`; the invariant `Bal` also keeps the
  queue fresh, every resident with `remaining > 0`, every pending turn a first turn of `P` tokens), and the record of an iteration has
  `x.arrived · W = x.served + x.tokens + workLeft` of the machine after its step
  (`Serq.BacklogBudget.step_balance`, `Serq.BacklogBudget.run_balance`);
* with the caps not binding (`StepOk`, `run_caps`) and no chunk cap, a short iteration
  (`x.tokens < budget`) leaves nothing waiting and at most `K` residents, all decoding with at most
  `D - 1` tokens left (`short_left`; `short_decodes` leaves a decode or `remaining = 0`, and every resident
  has `remaining > 0` by the invariant), so it is a
  reset with `C = K · (D - 1)` (`Serq.BacklogBudget.short_reset`); an iteration after which nothing is
  left is a reset with `C = 0` (`Serq.BacklogBudget.empty_reset`).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open BacklogMany

/-! ## The work left -/

/-- The work a waiting request has left: its prompt and its decode tokens. -/
def reqsLeft : List Req → Nat
  | [] => 0
  | q :: qs => q.prompt + (q.out - 1) + reqsLeft qs

/-- The work the residents have left: a decode's `remaining`, a prefill's `remaining` and the decode
tokens it gets when its prefill ends (`out - 1 - (known - prompt)`, as `apply` computes `left`). -/
def resLeft : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then r.remaining
                else r.remaining + (r.req.out - 1 - (r.known - r.req.prompt))) + resLeft rs

/-- The work still to do of a machine: its residents' and its queue's. -/
def workLeft (m : Machine) : Nat := resLeft m.running + reqsLeft m.waiting

theorem resLeft_append : ∀ (a b : List Res), resLeft (appendRes a b) = resLeft a + resLeft b
  | [], b => by simp [appendRes, resLeft]
  | x :: xs, b => by simp only [appendRes, resLeft, resLeft_append xs b]; omega

theorem resLeft_app (a b : List Res) : resLeft (a ++ b) = resLeft a + resLeft b := by
  rw [← appendRes_eq']; exact resLeft_append a b

theorem resLeft_clearSched : ∀ (l : List Res), resLeft (clearSched l) = resLeft l
  | [] => rfl
  | r :: rs => by simp only [clearSched, resLeft, resLeft_clearSched rs]

theorem reqsLeft_appendReq : ∀ (w : List Req) (r : Req), reqsLeft (appendReq w r) = reqsLeft w + (r.prompt + (r.out - 1))
  | [], r => by simp [appendReq, reqsLeft]
  | x :: xs, r => by simp only [appendReq, reqsLeft, reqsLeft_appendReq xs r]; omega

/-- A request that knows only its prompt (at least one token) and has no prefix hit. -/
def Pristine (rq : Req) : Prop :=
  rq.kept = rq.prompt ∧ rq.computed = 0 ∧ rq.hit = 0 ∧ 0 < rq.prompt

/-! ## The plan keeps the work -/

theorem serve_pre (eng : Engine) (only : Option Bool) : ∀ (fuel : Nat) (p : Plan) (k : Nat),
    k ≤ p.preempted → k ≤ (serveRunning eng only fuel p).preempted
  | 0, p, k, hk => hk
  | fuel + 1, p, k, hk => by
    simp only [serveRunning]
    split
    · exact hk
    · split
      · exact hk
      · rename_i r later hcons
        split
        · exact serve_pre eng only fuel _ _ hk
        · obtain ⟨q1, _⟩ := grow_pre eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          generalize growOrPreempt eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc)
              p = q at q1 ⊢
          split
          · exact Nat.le_trans hk q1
          · exact serve_pre eng only fuel _ _ (Nat.le_trans hk q1)

/-- Every resident has work left. -/
def Pos (L : List Res) : Prop := ∀ r ∈ L, 0 < r.remaining

theorem pos_appendRes (a b : List Res) (ha : Pos a) (hb : Pos b) : Pos (appendRes a b) := by
  intro x hx
  rcases OneAtATime.mem_appendRes.mp hx with h | h
  · exact ha x h
  · exact hb x h

/-- Serving the residents without a preemption moves them from `todo` to `done` with their work. -/
theorem serve_bal (eng : Engine) (only : Option Bool) : ∀ (fuel : Nat) (p : Plan),
    (serveRunning eng only fuel p).preempted = p.preempted →
      resLeft (serveRunning eng only fuel p).done + resLeft (serveRunning eng only fuel p).todo =
          resLeft p.done + resLeft p.todo ∧
        (serveRunning eng only fuel p).waiting = p.waiting ∧
        (Pos p.done → Pos p.todo →
          Pos (serveRunning eng only fuel p).done ∧ Pos (serveRunning eng only fuel p).todo)
  | 0, p, _ => ⟨rfl, rfl, fun a b => ⟨a, b⟩⟩
  | fuel + 1, p, h => by
    revert h
    simp only [serveRunning]
    split
    · intro _; exact ⟨rfl, rfl, fun a b => ⟨a, b⟩⟩
    · split
      · intro _; exact ⟨rfl, rfl, fun a b => ⟨a, b⟩⟩
      · rename_i r later hcons
        split
        · intro h
          obtain ⟨i1, i2, i3⟩ := serve_bal eng only fuel _ h
          refine ⟨?_, i2, fun ha hb => i3 ?_ ?_⟩
          · rw [i1, hcons]; dsimp only; rw [resLeft_append]; simp only [resLeft]; omega
          · dsimp only
            exact pos_appendRes _ _ ha (fun x hx => hb x (by
              rw [hcons]; simp only [List.mem_singleton] at hx; subst hx; exact List.mem_cons_self))
          · intro x hx; exact hb x (by rw [hcons]; exact List.mem_cons_of_mem _ hx)
        · rename_i hrem
          generalize hn : (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = n
          have q1 := (grow_pre eng (resCount p.todo) (blocksFor eng.blockSize (r.pos + n) - r.alloc) p).1
          have hsame := grow_same eng (resCount p.todo) (blocksFor eng.blockSize (r.pos + n) - r.alloc) p
          generalize growOrPreempt eng (resCount p.todo) (blocksFor eng.blockSize (r.pos + n) - r.alloc) p = q
            at q1 hsame ⊢
          split
          · intro h; rw [hsame h]; exact ⟨rfl, rfl, fun a b => ⟨a, b⟩⟩
          · intro h
            have q2 : q.preempted ≤ p.preempted := by rw [← h]; exact serve_pre eng only fuel _ _ (Nat.le_refl _)
            have e : q = p := hsame (by omega)
            subst e
            obtain ⟨i1, i2, i3⟩ := serve_bal eng only fuel _ h
            refine ⟨?_, i2, fun ha hb => i3 ?_ ?_⟩
            · rw [i1, hcons]; dsimp only; rw [resLeft_append]; simp only [resLeft, dropHead]; omega
            · dsimp only
              refine pos_appendRes _ _ ha (fun x hx => ?_)
              simp only [List.mem_singleton] at hx; subst hx
              exact hb r (by rw [hcons]; exact List.mem_cons_self)
            · intro x hx
              dsimp only at hx
              rw [hcons] at hx
              exact hb x (by rw [hcons]; exact List.mem_cons_of_mem _ (by simpa [dropHead] using hx))

/-- One admission, or several: the work of the residents and the queue kept, nothing preempted, the
queue as it was or a token more scheduled, every resident with work left. -/
def AdmOk (p q : Plan) : Prop :=
  resLeft q.done + reqsLeft q.waiting = resLeft p.done + reqsLeft p.waiting ∧ q.preempted = p.preempted ∧
    (q.waiting = p.waiting ∨ batchTokens p.done < batchTokens q.done) ∧ batchTokens p.done ≤ batchTokens q.done ∧
    (Pos p.done → Pos q.done)

theorem admOk_refl (p : Plan) : AdmOk p p := ⟨rfl, rfl, Or.inl rfl, Nat.le_refl _, id⟩

theorem admOk_trans (p p' q : Plan) (h1 : AdmOk p p') (h2 : AdmOk p' q) : AdmOk p q := by
  obtain ⟨a1, a2, a3, a4, a5⟩ := h1
  obtain ⟨b1, b2, b3, b4, b5⟩ := h2
  refine ⟨by omega, by omega, ?_, by omega, fun h => b5 (a5 h)⟩
  rcases a3 with e | e
  · rcases b3 with f | f
    · exact Or.inl (f.trans e)
    · exact Or.inr (by omega)
  · exact Or.inr (by omega)

/-- A request as `submit` makes it without a prefix cache: `Pristine` and never admitted. -/
def New (rq : Req) : Prop := Pristine rq ∧ rq.admitted = false

/-- Admitting fresh heads (no `only`) keeps the work: a head's `prompt + (out - 1)` becomes a prefill of
`remaining = prompt` with `out - 1` decode tokens to come, and takes at least one token. -/
theorem admit_bal (eng : Engine) : ∀ (fuel : Nat) (p : Plan), (∀ rq ∈ p.waiting, New rq) →
    AdmOk p (admitHeads eng none fuel p) ∧ ∀ rq ∈ (admitHeads eng none fuel p).waiting, New rq
  | 0, p, hf => ⟨admOk_refl p, hf⟩
  | fuel + 1, p, hf => by
    simp only [admitHeads]
    split
    · exact ⟨admOk_refl p, hf⟩
    · rename_i hgo
      split
      · exact ⟨admOk_refl p, hf⟩
      · rename_i rq rest hw
        obtain ⟨⟨f1, f2, f3, f4⟩, f5⟩ := hf rq (by rw [hw]; exact List.mem_cons_self)
        have hrest : ∀ x ∈ rest, New x := fun x hx => hf x (by rw [hw]; exact List.mem_cons_of_mem _ hx)
        generalize hK : max rq.kept (rq.computed + 1) = known
        have hk : known = rq.prompt := by rw [← hK, f1, f2]; omega
        subst hk
        generalize hR : min (ownCachedBlocks rq.sid p.cache * eng.blockSize) (reuseCap eng.blockSize rq rq.prompt) = reused
        have hr0 : reused = 0 := by rw [← hR]; simp [reuseCap, f2, f3]
        subst hr0
        have hb : 0 < p.budget := by omega
        have hn := capChunk_pos p.chunk (min (rq.prompt - 0) p.budget) (by omega)
        split
        · exact ⟨admOk_refl p, hf⟩
        · have ih := fun (X : Plan) (hX : ∀ x ∈ X.waiting, New x) => admit_bal eng fuel X hX
          refine ⟨admOk_trans _ _ _ ?_ (ih _ ?_).1, (ih _ ?_).2⟩
          · refine ⟨?_, rfl, Or.inr ?_, ?_, ?_⟩
            · dsimp only
              rw [resLeft_append, hw]
              simp only [resLeft, reqsLeft, f5, Bool.false_eq_true, if_false]
              omega
            · dsimp only
              rw [batchTokens_append]
              simp only [batchTokens, excluded, Bool.false_eq_true, if_false]
              omega
            · dsimp only
              rw [batchTokens_append]
              omega
            · intro hp
              dsimp only
              refine pos_appendRes _ _ hp (fun x hx => ?_)
              simp only [List.mem_singleton] at hx
              subst hx
              dsimp only
              omega
          · exact hrest
          · exact hrest

/-- **A plan without a preemption keeps the work** of the residents and the queue (an engine without
`only`, any chunk, a queue of fresh requests): a plan of no token admits nothing, every resident keeps
work left, and the queue left is fresh. -/
theorem plan_bal (eng : Engine) (hp : eng.phased = false) (chunk : Nat) (m : Machine) (waiting : List Req)
    (hf : ∀ rq ∈ waiting, New rq) (hpre : (plan eng chunk m waiting).preempted = 0) :
    resLeft (plan eng chunk m waiting).done + reqsLeft (plan eng chunk m waiting).waiting =
        resLeft m.running + reqsLeft waiting ∧
      (batchTokens (plan eng chunk m waiting).done = 0 → (plan eng chunk m waiting).waiting = waiting) ∧
      (Pos m.running → Pos (plan eng chunk m waiting).done) ∧
      ∀ rq ∈ (plan eng chunk m waiting).waiting, New rq := by
  unfold plan at hpre ⊢
  have hn : phaseOf eng m.running = none := by simp [phaseOf, hp]
  dsimp only at hpre ⊢
  rw [hn] at hpre ⊢
  have hs := serve_bal eng none (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩
  generalize serveRunning eng none (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at hs hpre ⊢
  dsimp only at hs
  have hpos : Pos m.running → Pos (clearSched m.running) := by
    intro h x hx
    obtain ⟨r, hr, rfl⟩ := mem_clearSched _ x hx
    exact h r hr
  split
  · rename_i h0
    obtain ⟨b1, b2, b3⟩ := hs h0
    obtain ⟨⟨a1, _, a3, _, a5⟩, a6⟩ := admit_bal eng (reqCount p1.waiting + 1)
      { p1 with done := appendRes p1.done p1.todo, todo := [] } (by dsimp only; rw [b2]; exact hf)
    dsimp only at a1 a3 a5
    rw [resLeft_append] at a1
    have b2' : reqsLeft p1.waiting = reqsLeft waiting := by rw [b2]
    rw [resLeft_clearSched] at b1
    simp only [resLeft] at b1
    refine ⟨by omega, fun ht => ?_, fun h => a5 ?_, a6⟩
    · rcases a3 with e | e
      · exact e.trans b2
      · omega
    · obtain ⟨c1, c2⟩ := b3 (by intro x hx; simp at hx) (hpos h)
      exact pos_appendRes _ _ c1 c2
  · rename_i h0
    rw [if_neg h0] at hpre
    exact absurd hpre h0

/-! ## What `apply` leaves -/

theorem stepRes_bal (now : Nat) (r : Res) (h1 : r.sched ≤ r.remaining) :
    resLeft (stepRes now r) + r.sched = resLeft [r] := by
  unfold stepRes
  by_cases h0 : r.sched = 0
  · rw [if_pos h0, h0, Nat.add_zero]
  · rw [if_neg h0]
    dsimp only
    cases hd : r.decoding
    · by_cases hz : r.remaining - r.sched = 0
      · simp only [hz, Bool.false_eq_true, false_or, true_and, if_true, if_false]
        split
        · simp only [resLeft, hd, Bool.false_eq_true, if_false]; omega
        · simp only [resLeft, hd, Bool.false_eq_true, if_false]; simp; omega
      · simp only [hd, hz, Bool.false_eq_true, false_or, false_and, if_false, resLeft]
        simp
        omega
    · simp only [true_or, true_and, if_true]
      split
      · simp only [resLeft, hd, if_true]; omega
      · simp only [resLeft, hd, if_true]; simp; omega

theorem stepRes_pos (now : Nat) (r : Res) (h : 0 < r.remaining) : Pos (stepRes now r) := by
  intro y hy
  unfold stepRes at hy
  by_cases h0 : r.sched = 0
  · rw [if_pos h0] at hy; simp only [List.mem_singleton] at hy; subst hy; exact h
  · rw [if_neg h0] at hy
    dsimp only at hy
    cases hd : r.decoding
    · by_cases hz : r.remaining - r.sched = 0
      · simp only [hd, hz, Bool.false_eq_true, false_or, true_and, if_true, if_false] at hy
        split at hy
        · simp at hy
        · rename_i hne; simp only [List.mem_singleton] at hy; subst hy; dsimp only; omega
      · simp only [hd, hz, Bool.false_eq_true, false_or, false_and, if_false, List.mem_singleton] at hy
        subst hy; dsimp only; omega
    · simp only [hd, true_or, true_and, if_true] at hy
      split at hy
      · simp at hy
      · rename_i hne; simp only [List.mem_singleton] at hy; subst hy; dsimp only; omega

theorem stepAll_bal (now : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.sched ≤ r.remaining) →
    resLeft (stepAll now L) + batchTokens L = resLeft L
  | [], _ => by simp [stepAll, resLeft, batchTokens]
  | r :: rs, h => by
    have ih := stepAll_bal now rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    have hr := stepRes_bal now r (h r List.mem_cons_self)
    rw [stepAll_cons, resLeft_app]
    simp only [resLeft, batchTokens] at hr ⊢
    omega

theorem stepAll_pos (now : Nat) : ∀ (L : List Res), Pos L → Pos (stepAll now L)
  | [], _ => by intro y hy; simp [stepAll] at hy
  | r :: rs, h => by
    intro y hy
    rw [stepAll_cons, List.mem_append] at hy
    rcases hy with hy | hy
    · exact stepRes_pos now r (h r List.mem_cons_self) y hy
    · exact stepAll_pos now rs (fun x hx => h x (List.mem_cons_of_mem _ hx)) y hy

/-! ## The submission adds `W` per first turn -/

/-- A pending turn of the workload: a first turn of `P` tokens of an existing session. -/
def PendOk (ss : List Session) (P : Nat) (p : Pending) : Prop :=
  p.turn = 0 ∧ p.prompt = P ∧ p.sid < sessionCount ss

theorem submit_work (eng : Engine) (hc : eng.caching = false) (ss : List Session) (P D : Nat) (hP : 0 < P)
    (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) :
    ∀ (due : List Pending) (w : List Req), (∀ p ∈ due, PendOk ss P p) → (∀ rq ∈ w, New rq) →
      reqsLeft (submit eng ss due w) = reqsLeft w + countFirst due * (P + (D - 1)) ∧
        ∀ rq ∈ submit eng ss due w, New rq
  | [], w, _, hq => ⟨by simp [submit, countFirst], hq⟩
  | p :: ps, w, hd, hq => by
    obtain ⟨d1, d2, d3⟩ := hd p List.mem_cons_self
    have hps : ∀ x ∈ ps, PendOk ss P x := fun x hx => hd x (List.mem_cons_of_mem _ hx)
    have hout := BacklogDecode.newReq_out eng ss D hw p (BacklogDecode.sessionAt_lt ss p.sid d3) d1
    have hnew : New (newReq eng ss p) := by
      refine ⟨⟨rfl, rfl, ?_, by show 0 < p.prompt; omega⟩, rfl⟩
      unfold newReq; simp [hc]
    simp only [submit]
    rw [if_neg (by rw [d2]; omega)]
    obtain ⟨i1, i2⟩ := submit_work eng hc ss P D hP hfit hw ps _ hps (by
      intro x hx
      rcases mem_appendReq w _ x hx with h | h
      · exact hq x h
      · rw [h]; exact hnew)
    refine ⟨?_, i2⟩
    rw [i1, reqsLeft_appendReq]
    have e1 : (newReq eng ss p).prompt = P := d2
    simp only [countFirst, d1, if_true, e1, hout, Nat.add_mul, Nat.one_mul]
    omega

/-! ## The step keeps the balance -/

/-- The balance of a machine for one-turn sessions of work `W = P + (D - 1)`: the work arrived is the work
served and the work left; the queue fresh, every resident with work left, every pending turn a first turn
of `P` tokens. -/
def Bal (ss : List Session) (P D : Nat) (m : Machine) : Prop :=
  m.arrived * (P + (D - 1)) = m.served + workLeft m ∧ (∀ rq ∈ m.waiting, New rq) ∧ Pos m.running ∧
    ∀ p ∈ m.pending, PendOk ss P p

/-- What a step asks of the run: its plan preempts nothing (whatever the chunk). -/
def NoPre (eng : Engine) (ss : List Session) (m : Machine) : Prop :=
  ∀ chunk, (plan eng chunk m (submit eng ss (duePending m.now m.pending).1 m.waiting)).preempted = 0

/-- **Every step keeps the balance** (idle steps too): an engine without `only` and without a prefix
cache, one-turn sessions of `P > 0` prompt tokens and `D` output tokens (`out - 1 = D - 1`), no turn
refused (`blocksFor blockSize P ≤ kvBlocks`), a step whose plan preempts nothing. -/
theorem step_bal (eng : Engine) (hph : eng.phased = false) (hc : eng.caching = false) (ss : List Session)
    (P D : Nat) (hP : 0 < P) (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) (m : Machine) (hb : Bal ss P D m)
    (hpre : NoPre eng ss m) : Bal ss P D (step eng ss m) := by
  obtain ⟨h1, h2, h3, h4⟩ := hb
  unfold NoPre at hpre
  unfold workLeft at h1
  have hw1 : ∀ s ∈ ss, ∃ t, s.turns = [t] := fun s hs => by
    obtain ⟨t, ht, _⟩ := hw s hs; exact ⟨t, ht⟩
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  rw [hdp] at hpre
  dsimp only at hpre
  obtain ⟨dp1, dp2⟩ := OneAtATime.duePending_mem m.now m.pending due later hdp
  obtain ⟨s1, s2⟩ := submit_work eng hc ss P D hP hfit hw due m.waiting (fun p hp => h4 p (dp1 p hp)) h2
  dsimp only
  generalize submit eng ss due m.waiting = waiting at s1 s2 hpre ⊢
  have hlater : ∀ p ∈ later, PendOk ss P p := fun p hp => h4 p (dp2 p hp).1
  have key : (m.arrived + countFirst due) * (P + (D - 1)) = m.served + resLeft m.running + reqsLeft waiting := by
    rw [Nat.add_mul, s1]; omega
  split
  · cases later with
    | nil => exact ⟨by unfold workLeft; dsimp only; omega, s2, h3, by simp⟩
    | cons q qs => exact ⟨by unfold workLeft; dsimp only; omega, s2, h3, hlater⟩
  · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    have hq := hpre chunk
    obtain ⟨c1, c2, c3, c4⟩ := plan_bal eng hph chunk m waiting s2 hq
    have hrem := plan_sched_rem eng chunk m waiting
    generalize plan eng chunk m waiting = Q at c1 c2 c3 c4 hq hrem ⊢
    split
    · rename_i ht
      have e := c2 ht.1
      have e' : reqsLeft Q.waiting = reqsLeft waiting := by rw [e]
      cases later with
      | nil => exact ⟨by unfold workLeft; dsimp only; omega, s2, c3 h3, by simp⟩
      | cons q qs => exact ⟨by unfold workLeft; dsimp only; omega, s2, c3 h3, hlater⟩
    · have hst := stepAll_bal m.now Q.done hrem
      refine ⟨?_, ?_, ?_, ?_⟩
      · unfold workLeft
        dsimp only
        rw [(apply_counts eng ss m.now 0 _ _ []).1, apply_served, apply_running, apply_waiting, List.nil_append]
        dsimp only
        omega
      · dsimp only
        rw [apply_waiting]
        exact c4
      · dsimp only
        rw [apply_running, List.nil_append]
        exact stepAll_pos m.now _ (c3 h3)
      · dsimp only
        exact apply_pending eng ss m.now (fun ps => ∀ p ∈ ps, PendOk ss P p)
          (fun req ps h => by rw [BacklogDecode.nextTurn_one ss hw1]; exact h) Q.done _ [] hlater

/-- The record a step adds: its `arrived` is the machine's after the step, its `served` the machine's
before, and the machine's `served` after is its `served` and its tokens. -/
theorem step_record (eng : Engine) (ss : List Session) (m : Machine) (x : Record)
    (hx : x ∈ (step eng ss m).records) (hxm : x ∉ m.records) :
    x.arrived = (step eng ss m).arrived ∧ (step eng ss m).served = x.served + x.tokens := by
  unfold step at hx ⊢
  generalize duePending m.now m.pending = dl at hx ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hx ⊢
  generalize submit eng ss due m.waiting = waiting at hx ⊢
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1] at hx; exfalso; apply hxm; split at hx <;> exact hx
  · rw [if_neg h1] at hx ⊢
    generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk at hx ⊢
    by_cases h2 : batchTokens (plan eng chunk m waiting).done = 0 ∧ (plan eng chunk m waiting).preempted = 0
    · rw [if_pos h2] at hx; exfalso; apply hxm; split at hx <;> exact hx
    · rw [if_neg h2] at hx ⊢
      simp only [apply_records] at hx
      rcases (mem_appendRecord _ _ _).mp hx with e | e
      · exact absurd e hxm
      · subst e
        refine ⟨?_, ?_⟩ <;> simp [apply_served, (apply_counts eng ss m.now 0 _ _ []).1]

/-! ## Over a run -/

theorem run_bal (eng : Engine) (hph : eng.phased = false) (hc : eng.caching = false) (ss : List Session)
    (P D : Nat) (hP : 0 < P) (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) :
    ∀ (fuel : Nat) (m : Machine), Bal ss P D m →
      (∀ k, (run eng ss k m).settled eng = false → NoPre eng ss (run eng ss k m)) → Bal ss P D (run eng ss fuel m)
  | 0, _, h, _ => h
  | fuel + 1, m, h, H => by
    simp only [run]
    split
    · exact h
    · rename_i hs
      apply run_bal eng hph hc ss P D hP hfit hw fuel (step eng ss m)
        (step_bal eng hph hc ss P D hP hfit hw m h (H 0 (by simpa using hs)))
      intro k hk
      have e : run eng ss (k + 1) m = run eng ss k (step eng ss m) := by simp only [run, if_neg hs]
      have := H (k + 1)
      rw [e] at this
      exact this hk

/-- Where a record of a run comes from: the start machine, or the step from a machine of the run that has
not settled, the record new at that step. -/
theorem run_origin (eng : Engine) (ss : List Session) : ∀ (fuel : Nat) (m : Machine),
    ∀ x ∈ (run eng ss fuel m).records, x ∈ m.records ∨
      ∃ k, (run eng ss k m).settled eng = false ∧ x ∉ (run eng ss k m).records ∧
        x ∈ (step eng ss (run eng ss k m)).records
  | 0, m, x, hx => Or.inl hx
  | fuel + 1, m, x, hx => by
    simp only [run] at hx
    split at hx
    · exact Or.inl hx
    · rename_i hs
      have e : ∀ k, run eng ss (k + 1) m = run eng ss k (step eng ss m) := fun k => by simp only [run, if_neg hs]
      rcases run_origin eng ss fuel (step eng ss m) x hx with h | ⟨k, k1, k2, k3⟩
      · by_cases hm : x ∈ m.records
        · exact Or.inl hm
        · exact Or.inr ⟨0, by simpa using hs, by simpa using hm, by simpa using h⟩
      · exact Or.inr ⟨k + 1, by rw [e]; exact k1, by rw [e]; exact k2, by rw [e]; exact k3⟩

theorem firstTurns_ok (ss : List Session) (P : Nat) (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P) :
    ∀ (i : Nat) (l : List Session), (∀ s ∈ l, ∃ t, s.turns = [t] ∧ t.new = P) →
      ∀ p ∈ firstTurns i l, p.turn = 0 ∧ p.prompt = P
  | _, [], _, p, hp => by simp [firstTurns] at hp
  | i, s :: l, hl, p, hp => by
    obtain ⟨t, ht, hn⟩ := hl s List.mem_cons_self
    have ih := firstTurns_ok ss P hw (i + 1) l (fun x hx => hl x (List.mem_cons_of_mem _ hx))
    simp only [firstTurns, ht] at hp
    rcases BacklogDecode.mem_insertPending_aux _ p _ hp with rfl | hp
    · exact ⟨rfl, hn⟩
    · exact ih p hp

theorem init_bal (ss : List Session) (P D : Nat) (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P) :
    Bal ss P D (init ss) := by
  refine ⟨by simp [init, workLeft, resLeft, reqsLeft], by simp [init], by intro r hr; simp [init] at hr, ?_⟩
  intro p hp
  obtain ⟨a, b⟩ := firstTurns_ok ss P hw 0 ss hw p hp
  have := BacklogDecode.firstTurns_sids 0 ss p hp
  exact ⟨a, b, by omega⟩

theorem resLeft_le (c : Nat) : ∀ (L : List Res), (∀ y ∈ L, y.decoding = true ∧ y.remaining ≤ c) →
    resLeft L ≤ resCount L * c
  | [], _ => by simp [resLeft]
  | y :: ys, h => by
    obtain ⟨h1, h2⟩ := h y List.mem_cons_self
    have ih := resLeft_le c ys (fun x hx => h x (List.mem_cons_of_mem _ hx))
    simp only [resLeft, resCount, h1, if_true, Nat.add_mul, Nat.one_mul]
    omega

theorem resLeft_nil_of (L : List Res) (hp : Pos L) (h : ∀ y ∈ L, y.remaining = 0) : L = [] := by
  cases L with
  | nil => rfl
  | cons y ys => have := hp y List.mem_cons_self; have := h y List.mem_cons_self; omega

/-- The caps not binding (`StepOk` at every machine of the run, `run_caps`) give `NoPre` at every machine
of the run that has not settled. -/
theorem run_nopre (eng : Engine) (ss : List Session) (K P D : Nat) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false → StepOk eng ss K P D (run eng ss k (init ss))) :
    ∀ k, (run eng ss k (init ss)).settled eng = false → NoPre eng ss (run eng ss k (init ss)) :=
  fun k hk chunk => ((run_caps eng ss K P D hD hK hkv H k hk).1 chunk).1

/-- The gapped workload with decodes (`GappedDecode`) is one of one-turn sessions of `P` prompt tokens and `D`
output tokens, the form `run_balance` and `short_reset` take. -/
theorem gapped_one (g P D : Nat) : ∀ (x : Nat) (ss : List Session), GappedDecode g P D x ss →
    ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P ∧ t.out - 1 = D - 1
  | _, [], _, s, hs => by simp at hs
  | _, y :: ys, ⟨_, ht, hrest⟩, s, hs => by
    rcases List.mem_cons.mp hs with rfl | hs
    · exact ht
    · exact gapped_one g P D _ ys hrest s hs

end BacklogBudget

/-- **The one-step balance** (issue 14, result 2(b): the admission half of the work conservation). An
engine without `only` (`phased = false`) and without a prefix cache (`caching = false`), one-turn sessions
of `P > 0` prompt tokens and `D` output tokens (`out - 1 = D - 1`), no turn refused (`blocksFor
blockSize P ≤ kvBlocks`), a machine with the balance (`Bal`: every machine of such a run from `init`,
`run_bal`) whose step's plan preempts nothing (`NoPre`): if the step runs an iteration (its record `x`
is new), `x.arrived · (P + (D - 1)) = x.served + x.tokens + workLeft` of the machine after the step, and
the machine after the step has the balance. -/
theorem BacklogBudget.step_balance (eng : Engine) (hph : eng.phased = false) (hc : eng.caching = false)
    (ss : List Session) (P D : Nat) (hP : 0 < P) (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) (m : Machine) (hb : Bal ss P D m)
    (hpre : NoPre eng ss m) (x : Record) (hx : x ∈ (step eng ss m).records) (hxm : x ∉ m.records) :
    x.arrived * (P + (D - 1)) = x.served + x.tokens + workLeft (step eng ss m) ∧ Bal ss P D (step eng ss m) := by
  have hb' := step_bal eng hph hc ss P D hP hfit hw m hb hpre
  obtain ⟨e1, e2⟩ := step_record eng ss m x hx hxm
  refine ⟨?_, hb'⟩
  rw [e1, hb'.1, e2]


/-- **The work conservation on every run** (issue 14, result 2(b): the admission half). An engine without
`only` (`phased = false`) and without a prefix cache (`caching = false`), one-turn sessions of `P > 0` prompt
tokens and `D` output tokens (`turns = [t]`, `t.new = P`, `t.out - 1 = D - 1`), no turn refused
(`blocksFor blockSize P ≤ kvBlocks`), and no preemption: at every machine of the run from `init` that has not
settled, the step's plan preempts nothing (`NoPre`, any chunk; from the caps, `run_nopre`). Then for any fuel
the run's machine has `arrived · (P + (D - 1)) = served + workLeft`, and every record `x` of the run is new
at the step from a machine of the run that has not settled (the `k`-th), with
`x.arrived · (P + (D - 1)) = x.served + x.tokens + workLeft` of the machine after that step. -/
theorem BacklogBudget.run_balance (eng : Engine) (hph : eng.phased = false) (hc : eng.caching = false)
    (ss : List Session) (P D : Nat) (hP : 0 < P) (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P ∧ t.out - 1 = D - 1)
    (hpre : ∀ k, (run eng ss k (init ss)).settled eng = false → BacklogBudget.NoPre eng ss (run eng ss k (init ss)))
    (fuel : Nat) :
    (run eng ss fuel (init ss)).arrived * (P + (D - 1)) =
        (run eng ss fuel (init ss)).served + BacklogBudget.workLeft (run eng ss fuel (init ss)) ∧
      ∀ x ∈ (run eng ss fuel (init ss)).records, ∃ k, (run eng ss k (init ss)).settled eng = false ∧
        x ∉ (run eng ss k (init ss)).records ∧ x ∈ (step eng ss (run eng ss k (init ss))).records ∧
        x.arrived * (P + (D - 1)) = x.served + x.tokens + BacklogBudget.workLeft (step eng ss (run eng ss k (init ss))) := by
  have hw' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1 := fun s hs => by
    obtain ⟨t, h1, _, h3⟩ := hw s hs; exact ⟨t, h1, h3⟩
  have hw'' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P := fun s hs => by
    obtain ⟨t, h1, h2, _⟩ := hw s hs; exact ⟨t, h1, h2⟩
  have hbal := fun k => BacklogBudget.run_bal eng hph hc ss P D hP hfit hw' k (init ss)
    (BacklogBudget.init_bal ss P D hw'') hpre
  refine ⟨(hbal fuel).1, fun x hx => ?_⟩
  rcases BacklogBudget.run_origin eng ss fuel (init ss) x hx with h | ⟨k, k1, k2, k3⟩
  · simp [init] at h
  · exact ⟨k, k1, k2, k3,
      (BacklogBudget.step_balance eng hph hc ss P D hP hfit hw' _ (hbal k) (hpre k k1) x k3 k2).1⟩

/-- **An iteration after which nothing is left is a reset with `C = 0`**: with the hypotheses of
`run_balance`, every record `x` of the run is new at the step from a machine of the run (the `k`-th), and if
after that step nothing waits and no resident has work left, `x.arrived · (P + (D - 1)) = x.served + x.tokens`
(a resident always has work left, so there is none). -/
theorem BacklogBudget.empty_reset (eng : Engine) (hph : eng.phased = false) (hc : eng.caching = false)
    (ss : List Session) (P D : Nat) (hP : 0 < P) (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P ∧ t.out - 1 = D - 1)
    (hpre : ∀ k, (run eng ss k (init ss)).settled eng = false → BacklogBudget.NoPre eng ss (run eng ss k (init ss)))
    (fuel : Nat) :
    ∀ x ∈ (run eng ss fuel (init ss)).records, ∃ k, x ∉ (run eng ss k (init ss)).records ∧
      x ∈ (step eng ss (run eng ss k (init ss))).records ∧
      ((step eng ss (run eng ss k (init ss))).waiting = [] →
        (∀ y ∈ (step eng ss (run eng ss k (init ss))).running, y.remaining = 0) →
        x.arrived * (P + (D - 1)) = x.served + x.tokens) := by
  have hw' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1 := fun s hs => by
    obtain ⟨t, h1, _, h3⟩ := hw s hs; exact ⟨t, h1, h3⟩
  have hw'' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P := fun s hs => by
    obtain ⟨t, h1, h2, _⟩ := hw s hs; exact ⟨t, h1, h2⟩
  intro x hx
  obtain ⟨k, k1, k2, k3, e⟩ := (BacklogBudget.run_balance eng hph hc ss P D hP hfit hw hpre fuel).2 x hx
  refine ⟨k, k2, k3, fun hq hr => ?_⟩
  have hb := BacklogBudget.step_bal eng hph hc ss P D hP hfit hw' _
    (BacklogBudget.run_bal eng hph hc ss P D hP hfit hw' k (init ss) (BacklogBudget.init_bal ss P D hw'') hpre)
    (hpre k k1)
  have hnil := BacklogBudget.resLeft_nil_of _ hb.2.2.1 hr
  rw [e]
  unfold BacklogBudget.workLeft
  rw [hq, hnil]
  simp [BacklogBudget.resLeft, BacklogBudget.reqsLeft]

/-- **A short iteration is a reset with `C = K · (D - 1)`** (issue 14, result 2(b)). An engine of vLLM's mixed
schedule (`phased = false`) without a chunk cap (`chunk = 0`) and without a prefix cache
(`caching = false`), one-turn sessions of `P > 0` prompt tokens and `D > 0` output tokens (`turns = [t]`,
`t.new = P`, `t.out - 1 = D - 1`), no turn refused (`blocksFor blockSize P ≤ kvBlocks`), the caps as in
`run_caps` (`K ≤ reqsCap`, `K · blocksFor blockSize (P + D - 1) ≤ kvBlocks`, and `StepOk` at every machine of
the run from `init` that has not settled), any fuel: every record `x` of the run whose iteration is short
(`x.tokens < budget`) has `x.arrived · (P + (D - 1)) ≤ x.served + x.tokens + K · (D - 1)`. After it nothing
waits and at most `K` residents are left (`step_caps`), each decoding (`short_decodes`, and a resident has
work left) with at most `D - 1` tokens left (`short_left`). -/
theorem BacklogBudget.short_reset (eng : Engine) (hph : eng.phased = false) (hch : eng.chunk = 0)
    (hc : eng.caching = false) (ss : List Session) (K P D : Nat) (hP : 0 < P) (hD : 0 < D)
    (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P ∧ t.out - 1 = D - 1)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false → BacklogBudget.StepOk eng ss K P D (run eng ss k (init ss)))
    (fuel : Nat) :
    ∀ x ∈ (run eng ss fuel (init ss)).records, x.tokens < eng.budget →
      x.arrived * (P + (D - 1)) ≤ x.served + x.tokens + K * (D - 1) := by
  have hw' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1 := fun s hs => by
    obtain ⟨t, h1, _, h3⟩ := hw s hs; exact ⟨t, h1, h3⟩
  have hw'' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P := fun s hs => by
    obtain ⟨t, h1, h2, _⟩ := hw s hs; exact ⟨t, h1, h2⟩
  have hnew : ∀ s ∈ ss, ∀ t ∈ s.turns.head?, 0 < t.new := by
    intro s hs t ht
    obtain ⟨t', h1, h2, _⟩ := hw s hs
    rw [h1] at ht
    simp only [List.head?_cons, Option.mem_def, Option.some.injEq] at ht
    subst ht; omega
  have hDo : ∀ s ∈ ss, ∀ t ∈ s.turns, t.out ≤ D := by
    intro s hs t ht
    obtain ⟨t', h1, _, h3⟩ := hw s hs
    rw [h1, List.mem_singleton] at ht
    subst ht; omega
  have hpre := BacklogBudget.run_nopre eng ss K P D hD hK hkv H
  intro x hx hshort
  obtain ⟨k, k1, k2, k3, e⟩ := (BacklogBudget.run_balance eng hph hc ss P D hP hfit hw hpre fuel).2 x hx
  have hb := BacklogBudget.step_bal eng hph hc ss P D hP hfit hw' _
    (BacklogBudget.run_bal eng hph hc ss P D hP hfit hw' k (init ss) (BacklogBudget.init_bal ss P D hw'') hpre)
    (hpre k k1)
  obtain ⟨hcnt, hq⟩ := (BacklogBudget.run_caps eng ss K P D hD hK hkv H k k1).2 x k3 k2
  have hsound := BacklogBudget.run_sound eng ss hph k (init ss) (BacklogBudget.init_sound ss hnew)
  have hleft := (BacklogBudget.short_left eng hph hch ss D hDo _ hsound x k3 k2 hshort).1
  have hdec := BacklogBudget.short_decodes eng hph hch ss _ x k3 k2 hshort
  have hall : ∀ y ∈ (step eng ss (run eng ss k (init ss))).running, y.decoding = true ∧ y.remaining ≤ D - 1 := by
    intro y hy
    refine ⟨?_, hleft y hy⟩
    rcases hdec y hy with h | h
    · exact h
    · have := hb.2.2.1 y hy; omega
  have hle := BacklogBudget.resLeft_le (D - 1) _ hall
  have hK' : resCount (step eng ss (run eng ss k (init ss))).running * (D - 1) ≤ K * (D - 1) :=
    Nat.mul_le_mul_right _ (by omega)
  rw [e]
  unfold BacklogBudget.workLeft
  rw [hq hshort]
  simp only [BacklogBudget.reqsLeft, Nat.add_zero]
  omega

end Serq
