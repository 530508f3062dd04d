module

public import Serq.Full

/-! # One request at a time: at most one output token per iteration

An engine with one request slot (`reqsCap = 1`, vLLM's `max_num_seqs = 1`) serves one
resident at a time, so every iteration gives at most one output token, and the output
lengths of the turns answered by iterations started before `t` sum to at most `t`
(`one_at_a_time_rate`): the rate hypothesis of `spt_lower_bound` (with `r = 1`, jobs the
answered turns, sizes their output lengths), groundwork for the claim
`at end (total(response) >= prefix_total(steps))` of a shortest-job-first paper.

The hypothesis that each session's first turn has a non-empty prompt is needed: the
model knows `max kept (computed + 1)` tokens of a request, so a turn with an empty prompt
counts one output token as known before any iteration ran, and a first turn `⟨0, 2, …⟩`
is answered (both of its output tokens) by the one iteration at step 0 (the `example`
below). Later turns' prompts contain the earlier ones, so they are never empty.

The proof is an invariant of the machine (`OneAtATime.Inv`): the output lengths of all
answered turns, plus the tokens every request in the queue or resident has produced so
far (`reqProd`, `resProd`: what it knows beyond its prompt, or, decoding, its position
plus one beyond its prompt), are at most `now`; and the bound holds for every `t` so far.
Serving keeps what a request produced (a preempted victim re-enters the queue with its
position, `computed`, and is re-admitted knowing all of it), an admission conserves it,
an iteration that finishes a prefill or decodes adds one token per resident, and there
is at most one resident; an idle step only moves `now` forward. Submissions add requests
that produced nothing. The soundness of each request (`ReqOK`, `ResOK`: its `out` is its
turn's, its prefill or decode arithmetic, what it schedules) rides along.
-/

@[expose] public section

namespace Serq

/-- The output length (`out`) of turn `turn` of session `sid` (0 if there is none). -/
def turnOut (sessions : List Session) (sid turn : Nat) : Nat :=
  match sessionAt sessions sid with
  | none => 0
  | some s => match turnAt s.turns turn with
    | none => 0
    | some t => t.out

/-- Σ of `turnOut` over the outcomes whose last token came from an iteration started before `t`. -/
def outDoneBy (sessions : List Session) (t : Nat) : List Outcome → Nat
  | [] => 0
  | o :: os => (if o.last < t then turnOut sessions o.sid o.turn else 0) + outDoneBy sessions t os

namespace OneAtATime

/-- Σ of `turnOut` over all the outcomes. -/
def outAll (sessions : List Session) : List Outcome → Nat
  | [] => 0
  | o :: os => turnOut sessions o.sid o.turn + outAll sessions os

/-- The output tokens a request in the queue has produced: what it knows beyond its prompt. -/
def reqProd (q : Req) : Nat := max q.kept (q.computed + 1) - q.prompt

/-- The output tokens a resident has produced: what it knows beyond its prompt while it
prefills, its position plus the sampled token beyond its prompt while it decodes. -/
def resProd (r : Res) : Nat := if r.decoding then r.pos + 1 - r.req.prompt else r.known - r.req.prompt

def sumReqProd : List Req → Nat
  | [] => 0
  | q :: qs => reqProd q + sumReqProd qs

def sumResProd : List Res → Nat
  | [] => 0
  | r :: rs => resProd r + sumResProd rs

/-- A sound request in the queue. -/
def ReqOK (sessions : List Session) (q : Req) : Prop :=
  q.out = turnOut sessions q.sid q.turn ∧ 1 ≤ q.prompt ∧ q.prompt ≤ q.kept ∧ q.hit < q.kept

/-- A sound resident: a prefill's position and remaining tokens add up to what it knows, a
decode's position, sampled token and remaining tokens to its prompt and output; and it
schedules at most its remaining prefill, or one decode token. -/
def ResOK (sessions : List Session) (r : Res) : Prop :=
  r.req.out = turnOut sessions r.req.sid r.req.turn ∧ 1 ≤ r.req.prompt ∧ r.req.prompt ≤ r.known ∧
  r.req.kept = r.known ∧ r.req.hit < r.known ∧
  (r.decoding = false → r.pos + r.remaining = r.known ∧ 1 ≤ r.remaining ∧ r.sched ≤ r.remaining) ∧
  (r.decoding = true → r.pos + 1 + r.remaining = r.req.prompt + r.req.out ∧ r.known ≤ r.pos ∧ r.sched ≤ 1)

theorem mem_appendRes {x : Res} : ∀ {a b : List Res}, x ∈ appendRes a b ↔ x ∈ a ∨ x ∈ b
  | [], b => by simp [appendRes]
  | y :: ys, b => by simp only [appendRes, List.mem_cons, mem_appendRes, or_assoc]

theorem appendRes_assoc : ∀ (a b c : List Res), appendRes (appendRes a b) c = appendRes a (appendRes b c)
  | [], b, c => rfl
  | x :: xs, b, c => by simp only [appendRes, appendRes_assoc xs b c]

theorem sumResProd_append : ∀ (a b : List Res), sumResProd (appendRes a b) = sumResProd a + sumResProd b
  | [], b => by simp [appendRes, sumResProd]
  | x :: xs, b => by simp only [appendRes, sumResProd, sumResProd_append xs b]; omega

theorem resCount_append : ∀ (a b : List Res), resCount (appendRes a b) = resCount a + resCount b
  | [], b => by simp [appendRes, resCount]
  | x :: xs, b => by simp only [appendRes, resCount, resCount_append xs b]; omega

theorem popLast_eq : ∀ (l rest : List Res) (v : Res), popLast l = some (rest, v) → l = appendRes rest [v]
  | [], _, _, h => by simp [popLast] at h
  | [x], rest, v, h => by
    simp only [popLast, Option.some.injEq, Prod.mk.injEq] at h
    obtain ⟨h1, h2⟩ := h
    subst h1; subst h2; rfl
  | x :: y :: ys, rest, v, h => by
    simp only [popLast] at h
    split at h
    · simp at h
    · rename_i init last hp
      simp only [Option.some.injEq, Prod.mk.injEq] at h
      obtain ⟨h1, h2⟩ := h
      subst h1; subst h2
      rw [popLast_eq (y :: ys) init last hp]; rfl

theorem resProd_clear (r : Res) : resProd { r with sched := 0 } = resProd r := rfl

theorem clearSched_facts (sessions : List Session) : ∀ (l : List Res), (∀ r ∈ l, ResOK sessions r) →
    (∀ r ∈ clearSched l, ResOK sessions r) ∧ sumResProd (clearSched l) = sumResProd l ∧
      resCount (clearSched l) = resCount l
  | [], _ => by simp [clearSched, sumResProd, resCount]
  | r :: rs, h => by
    obtain ⟨h1, h2, h3⟩ := clearSched_facts sessions rs (fun x hx => h x (by simp [hx]))
    have hr := h r (by simp)
    refine ⟨?_, ?_, ?_⟩
    · intro x hx
      simp only [clearSched, List.mem_cons] at hx
      rcases hx with hx | hx
      · subst hx
        obtain ⟨a1, a2, a3, a4, a5, a6, a7⟩ := hr
        refine ⟨a1, a2, a3, a4, a5, fun hd => ?_, fun hd => ?_⟩
        · obtain ⟨b1, b2, _⟩ := a6 hd; exact ⟨b1, b2, Nat.zero_le _⟩
        · obtain ⟨b1, b2, _⟩ := a7 hd; exact ⟨b1, b2, Nat.zero_le _⟩
      · exact h1 x hx
    · simp only [clearSched, sumResProd, h2, resProd_clear]
    · simp only [clearSched, resCount, h3]

theorem mem_appendReq {x : Req} : ∀ {a : List Req} {b : Req}, x ∈ appendReq a b ↔ x ∈ a ∨ x = b
  | [], b => by simp [appendReq]
  | y :: ys, b => by simp only [appendReq, List.mem_cons, mem_appendReq, or_assoc]

theorem sumReqProd_appendReq : ∀ (a : List Req) (b : Req), sumReqProd (appendReq a b) = sumReqProd a + reqProd b
  | [], b => by simp [appendReq, sumReqProd]
  | x :: xs, b => by simp only [appendReq, sumReqProd, sumReqProd_appendReq xs b]; omega

theorem outAll_append (sessions : List Session) : ∀ (a : List Outcome) (o : Outcome),
    outAll sessions (appendOutcome a o) = outAll sessions a + turnOut sessions o.sid o.turn
  | [], o => by simp [appendOutcome, outAll]
  | x :: xs, o => by simp only [appendOutcome, outAll, outAll_append sessions xs o]; omega

theorem outDoneBy_append (sessions : List Session) (t : Nat) : ∀ (a : List Outcome) (o : Outcome), t ≤ o.last →
    outDoneBy sessions t (appendOutcome a o) = outDoneBy sessions t a
  | [], o, h => by simp [appendOutcome, outDoneBy]; omega
  | x :: xs, o, h => by simp only [appendOutcome, outDoneBy, outDoneBy_append sessions t xs o h]

theorem outDoneBy_le_outAll (sessions : List Session) (t : Nat) : ∀ (a : List Outcome),
    outDoneBy sessions t a ≤ outAll sessions a
  | [] => Nat.le_refl _
  | x :: xs => by
    have := outDoneBy_le_outAll sessions t xs
    simp only [outDoneBy, outAll]; split <;> omega

theorem mem_insertPending {x p : Pending} : ∀ {l : List Pending}, x ∈ insertPending p l ↔ x = p ∨ x ∈ l
  | [] => by simp [insertPending]
  | q :: qs => by
    simp only [insertPending]
    split
    · simp
    · simp only [List.mem_cons, mem_insertPending]; exact or_left_comm

theorem duePending_mem (now : Nat) : ∀ (ps due later : List Pending), duePending now ps = (due, later) →
    (∀ p ∈ due, p ∈ ps) ∧ (∀ p ∈ later, p ∈ ps ∧ now < p.time)
  | [], due, later, h => by
    simp only [duePending, Prod.mk.injEq] at h
    obtain ⟨rfl, rfl⟩ := h
    simp
  | p :: ps, due, later, h => by
    rcases hq : duePending now ps with ⟨d', l'⟩
    obtain ⟨ih1, ih2⟩ := duePending_mem now ps d' l' hq
    simp only [duePending, hq] at h
    split at h
    · simp only [Prod.mk.injEq] at h
      obtain ⟨rfl, rfl⟩ := h
      refine ⟨?_, ?_⟩
      · intro x hx; simp only [List.mem_cons] at hx ⊢
        rcases hx with hx | hx
        · exact Or.inl hx
        · exact Or.inr (ih1 x hx)
      · intro x hx; obtain ⟨a, b⟩ := ih2 x hx; exact ⟨List.mem_cons_of_mem _ a, b⟩
    · rename_i hlt
      simp only [Prod.mk.injEq] at h
      obtain ⟨rfl, rfl⟩ := h
      refine ⟨?_, ?_⟩
      · intro x hx; exact List.mem_cons_of_mem _ (ih1 x hx)
      · intro x hx; simp only [List.mem_cons] at hx
        rcases hx with hx | hx
        · subst hx; exact ⟨List.mem_cons_self .., by omega⟩
        · obtain ⟨a, b⟩ := ih2 x hx; exact ⟨List.mem_cons_of_mem _ a, b⟩

/-- A prefix hit leaves the last prompt token to compute. -/
theorem hit_lt (c : Prop) [Decidable c] (n bs : Nat) (h : 1 ≤ n) :
    (if c then reusable n bs else 0) < n := by
  split
  · unfold reusable
    split
    · omega
    · have := Nat.div_mul_le_self (n - 1) bs
      omega
  · omega

theorem reusable_lt (n bs : Nat) (h : 1 ≤ n) : reusable n bs < n := by
  unfold reusable
  split
  · omega
  · have := Nat.div_mul_le_self (n - 1) bs
    omega

theorem newReq_ok (eng : Engine) (sessions : List Session) (p : Pending) (hp : 1 ≤ p.prompt) :
    ReqOK sessions (newReq eng sessions p) ∧ reqProd (newReq eng sessions p) = 0 := by
  refine ⟨⟨?_, hp, Nat.le_refl _, ?_⟩, ?_⟩
  · unfold newReq turnOut
    cases sessionAt sessions p.sid with
    | none => rfl
    | some s =>
      cases turnAt s.turns p.turn with
      | none => rfl
      | some t => rfl
  · unfold newReq; exact hit_lt _ _ _ hp
  · show max p.prompt (0 + 1) - p.prompt = 0
    omega

theorem submit_inv (eng : Engine) (sessions : List Session) : ∀ (ps : List Pending) (w : List Req),
    (∀ p ∈ ps, 1 ≤ p.prompt) → (∀ q ∈ w, ReqOK sessions q) →
    (∀ q ∈ submit eng sessions ps w, ReqOK sessions q) ∧ sumReqProd (submit eng sessions ps w) = sumReqProd w
  | [], w, _, hw => ⟨hw, rfl⟩
  | p :: ps, w, hp, hw => by
    simp only [submit]
    split
    · exact submit_inv eng sessions ps w (fun x hx => hp x (by simp [hx])) hw
    · obtain ⟨h1, h2⟩ := newReq_ok eng sessions p (hp p (by simp))
      obtain ⟨i1, i2⟩ := submit_inv eng sessions ps (appendReq w (newReq eng sessions p))
        (fun x hx => hp x (by simp [hx]))
        (fun x hx => by
          rcases mem_appendReq.mp hx with hx | hx
          · exact hw x hx
          · subst hx; exact h1)
      exact ⟨i1, by rw [i2, sumReqProd_appendReq, h2]; rfl⟩

/-- Preempting: the victims leave `todo` from its end and re-enter the queue with what they had produced. -/
theorem growOrPreempt_prod (eng : Engine) (sessions : List Session) : ∀ (fuel need : Nat) (p : Plan),
    (∀ r ∈ p.todo, ResOK sessions r) → (∀ q ∈ p.waiting, ReqOK sessions q) →
    (∃ suf, p.todo = appendRes (growOrPreempt eng fuel need p).todo suf) ∧
    (∀ q ∈ (growOrPreempt eng fuel need p).waiting, ReqOK sessions q) ∧
    sumResProd (growOrPreempt eng fuel need p).todo + sumReqProd (growOrPreempt eng fuel need p).waiting ≤
      sumResProd p.todo + sumReqProd p.waiting
  | 0, need, p, _, hw => ⟨⟨[], (appendRes_nil _).symm⟩, hw, Nat.le_refl _⟩
  | fuel + 1, need, p, ht, hw => by
    simp only [growOrPreempt]
    split
    · exact ⟨⟨[], (appendRes_nil _).symm⟩, hw, Nat.le_refl _⟩
    · split
      · exact ⟨⟨[], (appendRes_nil _).symm⟩, hw, Nat.le_refl _⟩
      · rename_i rest victim hp
        have heq := popLast_eq _ _ _ hp
        have hv : ResOK sessions victim := ht victim (by rw [heq]; exact mem_appendRes.mpr (Or.inr (by simp)))
        have hrest : ∀ x ∈ rest, ResOK sessions x :=
          fun x hx => ht x (by rw [heq]; exact mem_appendRes.mpr (Or.inl hx))
        have hsum : sumResProd p.todo = sumResProd rest + resProd victim := by
          rw [heq, sumResProd_append]; simp [sumResProd]
        obtain ⟨a1, a2, a3, a4, a5, a6, a7⟩ := hv
        have hvq : ReqOK sessions { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } :=
          ⟨a1, a2, by simp only; omega, by simp only; omega⟩
        have hvm : reqProd { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } = resProd victim := by
          unfold reqProd resProd
          simp only
          cases hd : victim.decoding
          · obtain ⟨b1, b2, b3⟩ := a6 hd; simp only [Bool.false_eq_true, if_false]; omega
          · obtain ⟨b1, b2, b3⟩ := a7 hd; simp only [if_true]; omega
        generalize hW : { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } :: p.waiting = W
        have hWok : (∀ q ∈ W, ReqOK sessions q) ∧ sumReqProd W ≤ resProd victim + sumReqProd p.waiting := by
          rw [← hW]
          refine ⟨?_, ?_⟩
          · intro q hq
            simp only [List.mem_cons] at hq
            rcases hq with hq | hq
            · subst hq; exact hvq
            · exact hw q hq
          · exact Nat.le_of_eq (by rw [← hvm]; rfl)
        cases rest with
        | nil =>
          refine ⟨⟨[victim], heq⟩, hWok.1, ?_⟩
          have := hWok.2
          show sumResProd [] + sumReqProd W ≤ _
          simp only [sumResProd] at hsum ⊢
          omega
        | cons x xs =>
          obtain ⟨⟨suf, hsuf⟩, h2, h3⟩ := growOrPreempt_prod eng sessions fuel need
            { budget := p.budget, chunk := p.chunk, done := p.done, todo := x :: xs, waiting := W,
              cache := (release eng victim.req.sid victim.pos p.relSeq p.cache).fst,
              relSeq := (release eng victim.req.sid victim.pos p.relSeq p.cache).snd, preempted := p.preempted + 1,
              selfPreempted := p.selfPreempted } hrest hWok.1
          dsimp only at hsuf h2 h3 ⊢
          refine ⟨⟨appendRes suf [victim], ?_⟩, h2, ?_⟩
          · exact heq.trans ((congrArg (fun l => appendRes l [victim]) hsuf).trans (appendRes_assoc _ _ _))
          · have := hWok.2
            omega

/-- What serving the residents keeps: soundness, and the produced tokens (of all, and of the
residents) and the residents' count do not grow. -/
def ServeInv (sessions : List Session) (T R K : Nat) (p : Plan) : Prop :=
  (∀ r ∈ p.done, ResOK sessions r) ∧ (∀ r ∈ p.todo, ResOK sessions r) ∧ (∀ q ∈ p.waiting, ReqOK sessions q) ∧
  sumResProd p.done + sumResProd p.todo + sumReqProd p.waiting ≤ T ∧
  sumResProd p.done + sumResProd p.todo ≤ R ∧ resCount p.done + resCount p.todo ≤ K

theorem serveRunning_pi (eng : Engine) (only : Option Bool) (sessions : List Session) (T R K : Nat) :
    ∀ (fuel : Nat) (p : Plan), ServeInv sessions T R K p → ServeInv sessions T R K (serveRunning eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, hinv => by
    obtain ⟨hd, ht, hw, h1, h2, h3⟩ := hinv
    simp only [serveRunning]
    split
    · exact ⟨hd, ht, hw, h1, h2, h3⟩
    · rename_i hgo
      split
      · exact ⟨hd, ht, hw, h1, h2, h3⟩
      · rename_i r later hcons
        have hr : ResOK sessions r := ht r (by rw [hcons]; simp)
        have hl : ∀ x ∈ later, ResOK sessions x := fun x hx => ht x (by rw [hcons]; simp [hx])
        have hst : sumResProd p.todo = resProd r + sumResProd later := by rw [hcons]; rfl
        have hct : resCount p.todo = resCount later + 1 := by rw [hcons]; rfl
        split
        · apply serveRunning_pi eng only sessions T R K fuel
          refine ⟨?_, hl, hw, ?_, ?_, ?_⟩
          · intro x hx
            rcases mem_appendRes.mp hx with hx | hx
            · exact hd x hx
            · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx; subst hx; exact hr
          · simp only [sumResProd_append, sumResProd]; omega
          · simp only [sumResProd_append, sumResProd]; omega
          · simp only [resCount_append, resCount]; omega
        · rename_i hrem
          have hsp : p.selfPreempted = false := by
            cases h : p.selfPreempted
            · rfl
            · simp [h] at hgo
          have hr' : ∀ a, ResOK sessions
              { r with alloc := a, sched := (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) } := by
            intro a
            obtain ⟨a1, a2, a3, a4, a5, a6, a7⟩ := hr
            refine ⟨a1, a2, a3, a4, a5, fun hdc => ?_, fun hdc => ?_⟩
            · obtain ⟨b1, b2, _⟩ := a6 hdc
              refine ⟨b1, b2, ?_⟩
              have hdc' : r.decoding = false := hdc
              simp only [hdc', Bool.false_eq_true, if_false]
              have := capChunk_le p.chunk (min r.remaining p.budget)
              have := Nat.min_le_left r.remaining p.budget
              omega
            · obtain ⟨b1, b2, _⟩ := a7 hdc
              refine ⟨b1, b2, ?_⟩
              have hdc' : r.decoding = true := hdc
              simp only [hdc', if_true]
              exact Nat.le_refl _
          have hrp : ∀ a s, resProd { r with alloc := a, sched := s } = resProd r := fun _ _ => rfl
          obtain ⟨g1, g2, g3, g4, g5, g6, g7⟩ := growOrPreempt_keeps eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          obtain ⟨⟨suf, hsuf⟩, k2, k3⟩ := growOrPreempt_prod eng sessions (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p ht hw
          generalize growOrPreempt eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc)
              p = q at g1 g2 g3 g4 g5 g6 g7 hsuf k2 k3 ⊢
          have hs1 := congrArg sumResProd hsuf
          have hc1 := congrArg resCount hsuf
          rw [sumResProd_append] at hs1
          rw [resCount_append] at hc1
          split
          · refine ⟨by rw [g1]; exact hd, fun x hx => ht x (by rw [hsuf]; exact mem_appendRes.mpr (Or.inl hx)),
              k2, ?_, ?_, ?_⟩
            · rw [g1]; omega
            · rw [g1]; omega
            · rw [g1]; omega
          · rename_i hself
            have hne := g7 (by simpa using hself) (by simp [hcons])
            cases hq : q.todo with
            | nil => exact absurd hq hne
            | cons y ys =>
              rw [hq] at hsuf k3
              rw [hcons] at hsuf
              simp only [appendRes, List.cons.injEq] at hsuf
              obtain ⟨hyr, hlater⟩ := hsuf
              subst hyr
              have hs2 := congrArg sumResProd hlater
              have hc2 := congrArg resCount hlater
              rw [sumResProd_append] at hs2
              rw [resCount_append] at hc2
              simp only [sumResProd] at k3
              apply serveRunning_pi eng only sessions T R K fuel
              refine ⟨?_, ?_, k2, ?_, ?_, ?_⟩
              · intro x hx
                rcases mem_appendRes.mp hx with hx | hx
                · rw [g1] at hx; exact hd x hx
                · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx; subst hx; exact hr' _
              · intro x hx
                simp only [dropHead] at hx
                exact hl x (by rw [hlater]; exact mem_appendRes.mpr (Or.inl hx))
              · simp only [sumResProd_append, sumResProd, dropHead, hrp, g1]; omega
              · simp only [sumResProd_append, sumResProd, dropHead, hrp, g1]; omega
              · simp only [resCount_append, resCount, dropHead, g1]; omega

/-- What admitting from the queue keeps: residents and queue are sound, what they had produced is
conserved, the slots are respected, and each admission schedules tokens. -/
def AdmQ (sessions : List Session) (cap : Nat) (p q : Plan) : Prop :=
  (∀ r ∈ q.done, ResOK sessions r) ∧ (∀ x ∈ q.waiting, ReqOK sessions x) ∧
  sumResProd q.done + sumReqProd q.waiting = sumResProd p.done + sumReqProd p.waiting ∧
  resCount q.done ≤ max (resCount p.done) cap ∧
  (q.done = p.done ∨ batchTokens p.done < batchTokens q.done)

theorem admQ_trans (sessions : List Session) (cap : Nat) (p p' q : Plan) (h : AdmQ sessions cap p' q)
    (hs : sumResProd p'.done + sumReqProd p'.waiting = sumResProd p.done + sumReqProd p.waiting)
    (hc : resCount p'.done ≤ cap) (hb : batchTokens p.done < batchTokens p'.done) : AdmQ sessions cap p q := by
  obtain ⟨h1, h2, h3, h4, h5⟩ := h
  refine ⟨h1, h2, by omega, ?_, Or.inr ?_⟩
  · have : max (resCount p'.done) cap = cap := Nat.max_eq_right hc
    have : cap ≤ max (resCount p.done) cap := Nat.le_max_right _ _
    omega
  · rcases h5 with h5 | h5
    · rw [h5]; exact hb
    · omega

theorem admitHeads_pi (eng : Engine) (sessions : List Session) : ∀ (fuel : Nat) (p : Plan),
    (∀ r ∈ p.done, ResOK sessions r) → (∀ q ∈ p.waiting, ReqOK sessions q) →
    AdmQ sessions eng.reqsCap p (admitHeads eng none fuel p)
  | 0, p, hd, hw => ⟨hd, hw, rfl, Nat.le_max_left _ _, Or.inl rfl⟩
  | fuel + 1, p, hd, hw => by
    simp only [admitHeads, excluded, Bool.false_eq_true, ↓reduceIte]
    split
    · exact ⟨hd, hw, rfl, Nat.le_max_left _ _, Or.inl rfl⟩
    · rename_i hgo
      split
      · exact ⟨hd, hw, rfl, Nat.le_max_left _ _, Or.inl rfl⟩
      · rename_i rq rest hwq
        split
        · exact ⟨hd, hw, rfl, Nat.le_max_left _ _, Or.inl rfl⟩
        · rename_i hfit
          have hrq := hw rq (by rw [hwq]; simp)
          have hrest : ∀ x ∈ rest, ReqOK sessions x := fun x hx => hw x (by rw [hwq]; simp [hx])
          obtain ⟨c1, c2, c3, c4⟩ := hrq
          have hb : 0 < p.budget := by omega
          have hcnt : resCount p.done < eng.reqsCap := by omega
          have hsw : sumReqProd p.waiting = reqProd rq + sumReqProd rest := by rw [hwq]; rfl
          have hknown := Nat.le_max_left rq.kept (rq.computed + 1)
          have hknown1 := Nat.le_max_right rq.kept (rq.computed + 1)
          have hreused : min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
              (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) < max rq.kept (rq.computed + 1) := by
            have := Nat.min_le_right (ownCachedBlocks rq.sid p.cache * eng.blockSize)
              (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1)))
            have hc : reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1)) < max rq.kept (rq.computed + 1) := by
              unfold reuseCap
              split
              · exact reusable_lt _ _ (by omega)
              · omega
            omega
          generalize min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) = reused at *
          have hrp : reqProd rq = max rq.kept (rq.computed + 1) - rq.prompt := rfl
          generalize max rq.kept (rq.computed + 1) = known at *
          have hn1 := capChunk_le p.chunk (min (known - reused) p.budget)
          have hn2 := Nat.min_le_left (known - reused) p.budget
          have hn3 : 1 ≤ capChunk p.chunk (min (known - reused) p.budget) := by
            unfold capChunk
            split
            · have : 1 ≤ min (known - reused) p.budget := Nat.le_min.mpr ⟨by omega, by omega⟩
              omega
            · have : 1 ≤ min (known - reused) p.budget := Nat.le_min.mpr ⟨by omega, by omega⟩
              exact Nat.le_min.mpr ⟨by omega, this⟩
          generalize capChunk p.chunk (min (known - reused) p.budget) = n at *
          split
          all_goals
            refine admQ_trans sessions eng.reqsCap _ _ _ (admitHeads_pi eng sessions fuel _ ?_ hrest) ?_ ?_ ?_
            · intro x hx
              rcases mem_appendRes.mp hx with hx | hx
              · exact hd x hx
              · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
                subst hx
                refine ⟨c1, c2, ?_, rfl, ?_, fun _ => ⟨?_, ?_, ?_⟩, fun h => by simp at h⟩ <;> dsimp only <;> omega
            · simp only [sumResProd_append, sumResProd, resProd, Bool.false_eq_true, if_false]
              omega
            · simp only [resCount_append, resCount]; omega
            · simp only [batchTokens_append, batchTokens]; omega

theorem plan_pi (eng : Engine) (sessions : List Session) (hcap : eng.reqsCap = 1) (hp : eng.phased = false)
    (chunk : Nat) (m : Machine)
    (waiting : List Req) (hr : ∀ r ∈ m.running, ResOK sessions r) (hw : ∀ q ∈ waiting, ReqOK sessions q)
    (hc : resCount m.running ≤ 1) :
    (∀ r ∈ (plan eng chunk m waiting).done, ResOK sessions r) ∧
    (∀ q ∈ (plan eng chunk m waiting).waiting, ReqOK sessions q) ∧
    sumResProd (plan eng chunk m waiting).done + sumReqProd (plan eng chunk m waiting).waiting ≤
      sumResProd m.running + sumReqProd waiting ∧
    resCount (plan eng chunk m waiting).done ≤ 1 ∧
    (batchTokens (plan eng chunk m waiting).done = 0 →
      sumResProd (plan eng chunk m waiting).done ≤ sumResProd m.running) := by
  obtain ⟨e1, e2, e3⟩ := clearSched_facts sessions m.running hr
  have h0 : ServeInv sessions (sumResProd m.running + sumReqProd waiting) (sumResProd m.running) (resCount m.running)
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ :=
    ⟨fun _ h => by simp at h, e1, hw, by simp [sumResProd, e2], by simp [sumResProd, e2], by simp [resCount, e3]⟩
  obtain ⟨d1, d2, d3, d4, d5, d6⟩ := serveRunning_pi eng none sessions _ _ _ (resCount m.running + 1) _ h0
  unfold plan
  dsimp only
  rw [show phaseOf eng m.running = none by simp [phaseOf, hp]]
  generalize serveRunning eng none (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1
    at d1 d2 d3 d4 d5 d6 ⊢
  have f1 : ∀ r ∈ appendRes p1.done p1.todo, ResOK sessions r := by
    intro x hx
    rcases mem_appendRes.mp hx with hx | hx
    · exact d1 x hx
    · exact d2 x hx
  have f2 := sumResProd_append p1.done p1.todo
  have f3 := resCount_append p1.done p1.todo
  split
  · obtain ⟨i1, i2, i3, i4, i5⟩ := admitHeads_pi eng sessions (reqCount p1.waiting + 1)
      { p1 with done := appendRes p1.done p1.todo, todo := [] } f1 d3
    dsimp only at i3 i4 i5
    refine ⟨i1, i2, by omega, ?_, fun h0 => ?_⟩
    · have : max (resCount (appendRes p1.done p1.todo)) eng.reqsCap ≤ 1 := Nat.max_le.mpr ⟨by omega, by omega⟩
      omega
    · rcases i5 with i5 | i5
      · rw [i5]; omega
      · omega
  · refine ⟨f1, d3, by dsimp only; omega, by dsimp only; omega, fun _ => by dsimp only; omega⟩

/-- What executing the iteration keeps, from machine `m` with residents `kept` already done and `l`
to do, to the machine `x` it ends with. -/
def ApQ (sessions : List Session) (now : Nat) (m : Machine) (kept l : List Res) (x : Machine) : Prop :=
  x.waiting = m.waiting ∧
  outAll sessions x.outcomes + sumResProd x.running ≤
    outAll sessions m.outcomes + sumResProd kept + sumResProd l + resCount l ∧
  (∀ t, t ≤ now → outDoneBy sessions t x.outcomes = outDoneBy sessions t m.outcomes) ∧
  resCount x.running ≤ resCount kept + resCount l ∧
  (∀ r ∈ x.running, ResOK sessions r) ∧ (∀ p ∈ x.pending, 1 ≤ p.prompt)

theorem apQ_trans (sessions : List Session) (now : Nat) (m m' : Machine) (kept kept' rs : List Res) (r : Res)
    (x : Machine) (h : ApQ sessions now m' kept' rs x) (hw : m'.waiting = m.waiting)
    (ho : outAll sessions m'.outcomes + sumResProd kept' ≤
      outAll sessions m.outcomes + sumResProd kept + resProd r + 1)
    (ht : ∀ t, t ≤ now → outDoneBy sessions t m'.outcomes = outDoneBy sessions t m.outcomes)
    (hc : resCount kept' ≤ resCount kept + 1) : ApQ sessions now m kept (r :: rs) x := by
  obtain ⟨h1, h2, h3, h4, h5, h6⟩ := h
  refine ⟨h1.trans hw, ?_, fun t h => (h3 t h).trans (ht t h), ?_, h5, h6⟩
  · simp only [sumResProd, resCount]; omega
  · simp only [resCount]; omega

theorem nextTurn_prompt (sessions : List Session) (now : Nat) (req : Req) (ps : List Pending)
    (hr : 1 ≤ req.prompt) (hp : ∀ p ∈ ps, 1 ≤ p.prompt) : ∀ p ∈ nextTurn sessions now req ps, 1 ≤ p.prompt := by
  unfold nextTurn
  split
  · exact hp
  · split
    · exact hp
    · intro p hx
      rcases mem_insertPending.mp hx with hx | hx
      · subst hx; dsimp only; omega
      · exact hp p hx

theorem apply_inv (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res),
    (∀ r ∈ l, ResOK sessions r) → (∀ r ∈ kept, ResOK sessions r) → (∀ p ∈ m.pending, 1 ≤ p.prompt) →
    ApQ sessions now m kept l (apply eng sessions now m l kept)
  | [], m, kept, _, hk, hp => by
    simp only [apply]
    exact ⟨rfl, by simp [sumResProd, resCount], fun _ _ => rfl, by simp [resCount], hk, hp⟩
  | r :: rs, m, kept, hl, hk, hp => by
    have hr := hl r (by simp)
    have hrs : ∀ x ∈ rs, ResOK sessions x := fun x hx => hl x (by simp [hx])
    simp only [apply]
    split
    · refine apQ_trans sessions now m m kept (appendRes kept [r]) rs r _
        (apply_inv eng sessions now rs m (appendRes kept [r]) hrs ?_ hp) rfl ?_ (fun _ _ => rfl) ?_
      · intro x hx
        rcases mem_appendRes.mp hx with hx | hx
        · exact hk x hx
        · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx; subst hx; exact hr
      · simp only [sumResProd_append, sumResProd]; omega
      · simp only [resCount_append, resCount]; omega
    · rename_i hs
      obtain ⟨a1, a2, a3, a4, a5, a6, a7⟩ := hr
      generalize hreq : (if (r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false then
          { r.req with first := now, hasFirst := true } else r.req) = req
      have hq : req.out = r.req.out ∧ req.sid = r.req.sid ∧ req.turn = r.req.turn ∧ req.prompt = r.req.prompt ∧
          req.kept = r.req.kept ∧ req.hit = r.req.hit := by
        rw [← hreq]; split <;> exact ⟨rfl, rfl, rfl, rfl, rfl, rfl⟩
      obtain ⟨q1, q2, q3, q4, q5, q6⟩ := hq
      cases hd : r.decoding
      · obtain ⟨b1, b2, b3⟩ := a6 hd
        simp only [Bool.false_eq_true, false_or, if_false]
        by_cases hz : r.remaining - r.sched = 0
        · simp only [hz, if_true, true_and]
          split
          · rename_i hfin
            refine apQ_trans sessions now m _ kept kept rs r _ (apply_inv eng sessions now rs _ kept hrs hk ?_) rfl ?_ ?_
              (by omega)
            · exact nextTurn_prompt sessions now req m.pending (by omega) hp
            · dsimp only
              rw [outAll_append]
              dsimp only
              rw [q2, q3, ← a1]
              simp only [resProd, hd, Bool.false_eq_true, if_false]
              omega
            · intro t ht; exact outDoneBy_append sessions t m.outcomes _ ht
          · rename_i hnf
            refine apQ_trans sessions now m m kept _ rs r _ (apply_inv eng sessions now rs m _ hrs ?_ hp) rfl ?_
              (fun _ _ => rfl) ?_
            · intro x hx
              rcases mem_appendRes.mp hx with hx | hx
              · exact hk x hx
              · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
                subst hx
                unfold ResOK
                dsimp only
                refine ⟨by rw [q1, q2, q3]; exact a1, by omega, by omega, by omega, by omega, fun hd' => ?_, fun hd' => ?_⟩
                · simp at hd' <;> omega
                · simp at hd' <;> omega
            · simp only [sumResProd_append, sumResProd, resProd, hd, Bool.false_eq_true, if_false]
              simp
              omega
            · simp only [resCount_append, resCount]; omega
        · simp only [hz, if_false, false_and]
          refine apQ_trans sessions now m m kept _ rs r _ (apply_inv eng sessions now rs m _ hrs ?_ hp) rfl ?_
            (fun _ _ => rfl) ?_
          · intro x hx
            rcases mem_appendRes.mp hx with hx | hx
            · exact hk x hx
            · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
              subst hx
              unfold ResOK
              dsimp only
              refine ⟨by rw [q1, q2, q3]; exact a1, by omega, by omega, by omega, by omega, fun hd' => ?_, fun hd' => ?_⟩
              · simp at hd' <;> omega
              · simp at hd' <;> omega
          · simp only [sumResProd_append, sumResProd, resProd, hd, Bool.false_eq_true, if_false]
            simp
            omega
          · simp only [resCount_append, resCount]; omega
      · obtain ⟨b1, b2, b3⟩ := a7 hd
        simp only [true_or, true_and, if_true]
        split
        · rename_i hfin
          refine apQ_trans sessions now m _ kept kept rs r _ (apply_inv eng sessions now rs _ kept hrs hk ?_) rfl ?_ ?_
            (by omega)
          · exact nextTurn_prompt sessions now req m.pending (by omega) hp
          · dsimp only
            rw [outAll_append]
            dsimp only
            rw [q2, q3, ← a1]
            simp only [resProd, hd, if_true]
            omega
          · intro t ht; exact outDoneBy_append sessions t m.outcomes _ ht
        · rename_i hnf
          refine apQ_trans sessions now m m kept _ rs r _ (apply_inv eng sessions now rs m _ hrs ?_ hp) rfl ?_
            (fun _ _ => rfl) ?_
          · intro x hx
            rcases mem_appendRes.mp hx with hx | hx
            · exact hk x hx
            · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
              subst hx
              unfold ResOK
              dsimp only
              refine ⟨by rw [q1, q2, q3]; exact a1, by omega, by omega, by omega, by omega, fun hd' => ?_, fun hd' => ?_⟩
              · simp at hd' <;> omega
              · simp at hd' <;> omega
          · simp only [sumResProd_append, sumResProd, resProd, hd, if_true]
            simp
            omega
          · simp only [resCount_append, resCount]; omega

/-- The invariant of a run of a one-at-a-time engine. -/
def Inv (sessions : List Session) (m : Machine) : Prop :=
  (∀ t, outDoneBy sessions t m.outcomes ≤ t) ∧
  outAll sessions m.outcomes + sumResProd m.running + sumReqProd m.waiting ≤ m.now ∧
  resCount m.running ≤ 1 ∧
  (∀ r ∈ m.running, ResOK sessions r) ∧ (∀ q ∈ m.waiting, ReqOK sessions q) ∧ (∀ p ∈ m.pending, 1 ≤ p.prompt)

theorem iter_inv (sessions : List Session) (now : Nat) (M x : Machine) (P : List Res)
    (h : ApQ sessions now M [] P x)
    (ho : ∀ t, outDoneBy sessions t M.outcomes ≤ t)
    (hs : outAll sessions M.outcomes + sumResProd P + sumReqProd M.waiting ≤ now)
    (hc : resCount P ≤ 1)
    (hw : ∀ q ∈ M.waiting, ReqOK sessions q) :
    Inv sessions { x with now := now + 1 } := by
  obtain ⟨a1, a2, a3, a4, a5, a6⟩ := h
  simp only [sumResProd, resCount] at a2 a4
  refine ⟨fun t => ?_, ?_, by dsimp only; omega, a5, by rw [a1]; exact hw, a6⟩
  · dsimp only
    by_cases ht : t ≤ now
    · rw [a3 t ht]; exact ho t
    · have := outDoneBy_le_outAll sessions t x.outcomes
      omega
  · dsimp only
    rw [a1]
    omega

theorem step_inv (eng : Engine) (sessions : List Session) (hcap : eng.reqsCap = 1) (hp : eng.phased = false)
    (m : Machine)
    (h : Inv sessions m) : Inv sessions (step eng sessions m) := by
  obtain ⟨h1, h2, h3, h4, h5, h6⟩ := h
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  obtain ⟨dp1, dp2⟩ := duePending_mem m.now m.pending due later hdp
  dsimp only
  obtain ⟨s1, s2⟩ := submit_inv eng sessions due m.waiting (fun p hp => h6 p (dp1 p hp)) h5
  generalize submit eng sessions due m.waiting = waiting at s1 s2 ⊢
  cases later with
  | nil =>
    dsimp only
    split
    · exact ⟨h1, by dsimp only; omega, h3, h4, s1, by simp⟩
    · rename_i hbusy
      generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
      obtain ⟨p1', p2', p3', p4', p5'⟩ := plan_pi eng sessions hcap hp chunk m waiting h4 s1 h3
      generalize plan eng chunk m waiting = P at p1' p2' p3' p4' p5' ⊢
      split
      · rename_i hz
        have := p5' hz.1
        refine ⟨h1, ?_, p4', p1', s1, (by simp)⟩
        dsimp only
        
        omega
      · refine iter_inv sessions m.now _ _ P.done (apply_inv eng sessions m.now P.done _ [] p1' (by simp) (by simp))
          h1 (by dsimp only; omega) p4' p2'

  | cons q qs =>
    have hq := (dp2 q (by simp)).2
    dsimp only
    split
    · exact ⟨h1, by dsimp only; omega, h3, h4, s1, fun p hp => h6 p (dp2 p hp).1⟩
    · rename_i hbusy
      generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
      obtain ⟨p1', p2', p3', p4', p5'⟩ := plan_pi eng sessions hcap hp chunk m waiting h4 s1 h3
      generalize plan eng chunk m waiting = P at p1' p2' p3' p4' p5' ⊢
      split
      · rename_i hz
        have := p5' hz.1
        refine ⟨h1, ?_, p4', p1', s1, (fun p hp => h6 p (dp2 p hp).1)⟩
        dsimp only
        
        omega
      · refine iter_inv sessions m.now _ _ P.done (apply_inv eng sessions m.now P.done _ [] p1' (by simp) (fun p hp => h6 p (dp2 p hp).1))
          h1 (by dsimp only; omega) p4' p2'


theorem firstTurns_prompt : ∀ (ss : List Session) (i : Nat), (∀ s ∈ ss, ∀ t ∈ s.turns.head?, 0 < t.new) →
    ∀ p ∈ firstTurns i ss, 1 ≤ p.prompt
  | [], i, _ => by simp [firstTurns]
  | s :: ss, i, h => by
    have ih := firstTurns_prompt ss (i + 1) (fun s' hs' => h s' (by simp [hs']))
    simp only [firstTurns]
    split
    · exact ih
    · rename_i t ts hts
      intro p hp
      rcases mem_insertPending.mp hp with hp | hp
      · subst hp
        have := h s (by simp) t (by rw [hts]; rfl)
        dsimp only
        omega
      · exact ih p hp

theorem init_inv (sessions : List Session) (hnew : ∀ s ∈ sessions, ∀ t ∈ s.turns.head?, 0 < t.new) :
    Inv sessions (init sessions) :=
  ⟨fun t => Nat.zero_le _, Nat.le_refl _, Nat.zero_le _, fun _ h => by simp [init] at h,
    fun _ h => by simp [init] at h, firstTurns_prompt sessions 0 hnew⟩

theorem run_inv (eng : Engine) (sessions : List Session) (hcap : eng.reqsCap = 1) (hp : eng.phased = false) :
    ∀ (fuel : Nat) (m : Machine), Inv sessions m → Inv sessions (run eng sessions fuel m)
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng sessions hcap hp fuel _ (step_inv eng sessions hcap hp m h)

end OneAtATime

open OneAtATime in
/-- An engine that runs one request at a time produces at most one output token per
iteration: the output lengths of the turns answered by iterations started before `t` sum to
at most `t` (when each session's first turn has a non-empty prompt; vLLM's schedule, without
phase separation). -/
theorem one_at_a_time_rate (eng : Engine) (sessions : List Session) (fuel : Nat) (h : eng.reqsCap = 1)
    (hp : eng.phased = false) (hnew : ∀ s ∈ sessions, ∀ t ∈ s.turns.head?, 0 < t.new) :
    ∀ t, outDoneBy sessions t (run eng sessions fuel (init sessions)).outcomes ≤ t :=
  (run_inv eng sessions h hp fuel (init sessions) (init_inv sessions hnew)).1

/-- Every turn with a non-empty fresh prompt is enough. -/
theorem one_at_a_time_rate' (eng : Engine) (sessions : List Session) (fuel : Nat) (h : eng.reqsCap = 1)
    (hp : eng.phased = false) (hnew : ∀ s ∈ sessions, ∀ t ∈ s.turns, 0 < t.new) :
    ∀ t, outDoneBy sessions t (run eng sessions fuel (init sessions)).outcomes ≤ t :=
  one_at_a_time_rate eng sessions fuel h hp fun s hs t ht =>
    hnew s hs t (List.mem_of_mem_head? ht)

/-- The hypothesis is needed: a first turn with an empty prompt and two output tokens is answered
by the iteration at step 0 (it knows one token, and counts it as an output token already produced). -/
example : outDoneBy [⟨0, [⟨0, 2, 0, false⟩]⟩] 1
    (run ⟨8, 1, 100, 4, 0, true, false⟩ [⟨0, [⟨0, 2, 0, false⟩]⟩] 50 (init [⟨0, [⟨0, 2, 0, false⟩]⟩])).outcomes = 2 := by
  decide +kernel

end Serq
