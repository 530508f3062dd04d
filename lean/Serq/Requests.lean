module

public import Serq.Conserve
public import Serq.Ledger

/-! # Request conservation and causality against submission on the engine model

For every engine of the fragment and every workload, with no hypothesis on either, at every step of
every run from the empty machine:

* **Never two of them** (`requests_distinct`): the turns pending, waiting, resident and answered, as
  (session, turn) keys, are pairwise distinct, across and within the four lists; and a session has at
  most one turn in flight (`one_turn_in_flight`).
* **Every one a turn of the workload, in order** (`requests_known`): every key in the four lists names
  an existing turn of `sessions`, and every earlier turn of its session has been answered. (The
  machine records no refusal, so that a turn in none of the lists was refused by `submit` or follows
  a turn not yet answered is not stated here.)
* **Causality against submission**: a session's first turn gets its first token no earlier than the
  session arrives (`first_after_arrival`); turn `k + 1` gets its first token no earlier than the step
  after turn `k`'s last token plus turn `k + 1`'s think time (`first_after_think`), the time `nextTurn`
  submits it at. With `causal` (`Serq.Conserve`), a turn's first token is no earlier than its submission
  and its last no earlier than its first.

The outcome and the request carry no submission time, so the submission time is what the workload
and the outcomes say it is (`AfterSubmit`): a session's arrival for its first turn, and the previous
turn's last step plus one plus the think time for a later one.

The invariant (`Ledger`, `Serq.Ledger`, over the pending turns, the resident and waiting requests as `TurnTag`s, and
the outcomes): the sessions of the turns in flight are pairwise distinct, the outcomes' keys are
distinct, every outcome of a session in flight is of an earlier turn; the clock (for a request in
flight), the pending time (for a pending turn) and the first token (when recorded) are no earlier than
the submission; and every key names an existing turn whose earlier turns are answered. A step moves
the due pending turns to the queue (`submit`), permutes the requests (`plan`: preemptions, serving,
admissions; `plan_tags`), records first tokens, and ends turns (`apply`): an ending turn leaves the
requests in flight, its outcome is recorded, and its session's next turn becomes pending, after the
ending turn's last step. A step that runs nothing admitted nothing (as `Serq.Conserve` shows with its
plan invariant, reused here), so it keeps the queue it submitted to.
-/

@[expose] public section

namespace Serq

/-! ## Executing an iteration -/

theorem appendRes_eq : ∀ (a b : List Res), appendRes a b = a ++ b
  | [], _ => rfl
  | x :: xs, b => by simp [appendRes, appendRes_eq xs b]

theorem appendOutcome_eq : ∀ (os : List Outcome) (o : Outcome), appendOutcome os o = os ++ [o]
  | [], _ => rfl
  | x :: xs, o => by simp [appendOutcome, appendOutcome_eq xs o]

theorem appendReq_eq : ∀ (w : List Req) (q : Req), appendReq w q = w ++ [q]
  | [], _ => rfl
  | x :: xs, q => by simp [appendReq, appendReq_eq xs q]

theorem apply_waiting (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), (apply eng sessions now m l kept).waiting = m.waiting
  | [], m, kept => rfl
  | r :: rs, m, kept => by
    have ih := apply_waiting eng sessions now rs
    simp only [apply]
    repeat' split
    all_goals first | rfl | (simp only [ih]; done) | simp [ih]

theorem apply_ledger (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res),
      Ledger sessions now m.pending (l.map Res.tag ++ kept.map Res.tag ++ m.waiting.map Req.tag) m.outcomes →
      Ledger sessions now (apply eng sessions now m l kept).pending
        ((apply eng sessions now m l kept).running.map Res.tag ++ (apply eng sessions now m l kept).waiting.map Req.tag)
        (apply eng sessions now m l kept).outcomes
  | [], m, kept, h => by simpa [apply] using h
  | r :: rs, m, kept, h => by
    have hperm : ∀ x : TurnTag, (rs.map Res.tag ++ (kept.map Res.tag ++ [x]) ++ m.waiting.map Req.tag).Perm
        (x :: (rs.map Res.tag ++ kept.map Res.tag ++ m.waiting.map Req.tag)) := by
      intro x
      have := @List.perm_middle _ x (rs.map Res.tag ++ kept.map Res.tag) (m.waiting.map Req.tag)
      simpa only [List.append_assoc, List.cons_append, List.nil_append] using this
    have hr : Ledger sessions now m.pending (r.tag :: (rs.map Res.tag ++ kept.map Res.tag ++ m.waiting.map Req.tag))
        m.outcomes := by
      simpa only [List.map_cons, List.cons_append] using h
    have hnow : AfterSubmit sessions m.outcomes r.req.sid r.req.turn now := hr.act r.tag List.mem_cons_self
    have hfst : r.req.hasFirst = true → AfterSubmit sessions m.outcomes r.req.sid r.req.turn r.req.first :=
      hr.first r.tag List.mem_cons_self
    simp only [apply]
    split
    · apply apply_ledger eng sessions now rs m (appendRes kept [r])
      rw [appendRes_eq, List.map_append]
      exact hr.perm (List.Perm.refl _) (hperm _)
    · have hreq : (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
          then { r.req with first := now, hasFirst := true } else r.req).sid = r.req.sid ∧
          (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
          then { r.req with first := now, hasFirst := true } else r.req).turn = r.req.turn := by
        split <;> exact ⟨rfl, rfl⟩
      have hA : (r.decoding = true ∨ r.remaining - r.sched = 0) →
          AfterSubmit sessions m.outcomes r.req.sid r.req.turn
            (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧
            r.req.hasFirst = false) then { r.req with first := now, hasFirst := true } else r.req).first := by
        intro hs
        split
        · exact hnow
        · rename_i hn
          apply hfst
          cases hh : r.req.hasFirst
          · exact absurd ⟨hs, hh⟩ hn
          · rfl
      have hB : (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
          then { r.req with first := now, hasFirst := true } else r.req).hasFirst = true →
          AfterSubmit sessions m.outcomes r.req.sid r.req.turn
            (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧
            r.req.hasFirst = false) then { r.req with first := now, hasFirst := true } else r.req).first := by
        split
        · intro _; exact hnow
        · exact hfst
      generalize (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
        then { r.req with first := now, hasFirst := true } else r.req) = req at hreq hA hB ⊢
      generalize (if r.decoding = true then r.remaining - r.sched
        else if r.remaining - r.sched = 0 then r.req.out - 1 - (r.known - r.req.prompt)
        else r.remaining - r.sched) = left
      split
      · rename_i hfin
        apply apply_ledger eng sessions now rs
        dsimp only
        rw [appendOutcome_eq]
        exact hr.finish ⟨req.sid, req.turn, req.first, now, req.pre, req.cachedAt⟩ hreq.1 hreq.2 rfl (hA hfin.1)
          req hreq.1 hreq.2
      · apply apply_ledger eng sessions now rs m
        rw [appendRes_eq, List.map_append]
        refine (Ledger.update hr ?_ ?_ ?_).perm (List.Perm.refl _) (hperm _)
        · exact hreq.1
        · exact hreq.2
        · exact hB

/-! ## Planning an iteration -/

theorem popLast_append : ∀ (l rest : List Res) (v : Res), popLast l = some (rest, v) → l = rest ++ [v]
  | [], _, _, h => by simp [popLast] at h
  | [x], rest, v, h => by
    simp only [popLast, Option.some.injEq, Prod.mk.injEq] at h
    obtain ⟨rfl, rfl⟩ := h
    rfl
  | x :: y :: ys, rest, v, h => by
    simp only [popLast] at h
    split at h
    · simp at h
    · rename_i init last hp
      simp only [Option.some.injEq, Prod.mk.injEq] at h
      obtain ⟨rfl, rfl⟩ := h
      rw [popLast_append (y :: ys) init last hp]
      rfl

theorem clearSched_tags : ∀ (l : List Res), (clearSched l).map Res.tag = l.map Res.tag
  | [] => rfl
  | r :: rs => by simp only [clearSched, List.map_cons, clearSched_tags rs]; rfl

theorem growOrPreempt_tags (eng : Engine) (need : Nat) : ∀ (fuel : Nat) (p : Plan),
    (growOrPreempt eng fuel need p).done.map Res.tag ++ (growOrPreempt eng fuel need p).todo.map Res.tag ++
      (growOrPreempt eng fuel need p).waiting.map Req.tag
      = p.done.map Res.tag ++ p.todo.map Res.tag ++ p.waiting.map Req.tag ∧
    (((growOrPreempt eng fuel need p).waiting = p.waiting ∧
        (growOrPreempt eng fuel need p).preempted = p.preempted) ∨
      p.preempted < (growOrPreempt eng fuel need p).preempted) ∧
    (∀ r later, p.todo = r :: later → (growOrPreempt eng fuel need p).selfPreempted = false →
      ∃ l', (growOrPreempt eng fuel need p).todo = r :: l')
  | 0, p => ⟨rfl, Or.inl ⟨rfl, rfl⟩, fun _ later h _ => ⟨later, h⟩⟩
  | fuel + 1, p => by
    simp only [growOrPreempt]
    split
    · exact ⟨rfl, Or.inl ⟨rfl, rfl⟩, fun _ later h _ => ⟨later, h⟩⟩
    · split
      · exact ⟨rfl, Or.inl ⟨rfl, rfl⟩, fun _ later h _ => ⟨later, h⟩⟩
      · rename_i rest victim hp
        have hl := popLast_append p.todo rest victim hp
        have hhead := (popLast_spec p.todo rest victim hp).2.2.2
        cases rest with
        | nil =>
          refine ⟨?_, Or.inr (Nat.lt_succ_self _), fun r later _ hs => by simp at hs⟩
          rw [hl]
          simp [Res.tag, Req.tag]
        | cons x xs =>
          obtain ⟨i1, i2, i3⟩ := growOrPreempt_tags eng need fuel
            { p with todo := x :: xs,
                     waiting := { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } :: p.waiting,
                     cache := (release eng victim.req.sid victim.pos p.relSeq p.cache).1,
                     relSeq := (release eng victim.req.sid victim.pos p.relSeq p.cache).2,
                     preempted := p.preempted + 1 }
          have i2' : p.preempted + 1 ≤ (growOrPreempt eng fuel need
            { p with todo := x :: xs,
                     waiting := { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } :: p.waiting,
                     cache := (release eng victim.req.sid victim.pos p.relSeq p.cache).1,
                     relSeq := (release eng victim.req.sid victim.pos p.relSeq p.cache).2,
                     preempted := p.preempted + 1 }).preempted := by
            rcases i2 with ⟨_, h2⟩ | h2
            · exact Nat.le_of_eq h2.symm
            · exact Nat.le_of_lt h2
          refine ⟨i1.trans ?_, Or.inr (Nat.lt_of_lt_of_le (Nat.lt_succ_self _) i2'), ?_⟩
          · rw [hl]
            simp [Res.tag, Req.tag]
          · intro r later hp' hs
            rcases hhead r later hp' with h3 | ⟨l', h3⟩
            · simp at h3
            · exact i3 r l' h3 hs

/-- What serving keeps: the requests (as tags) of the plan, and the queue while nothing was preempted. -/
def ServeTags (W : List Req) (T0 : List TurnTag) (p : Plan) : Prop :=
  (p.preempted = 0 → p.waiting = W) ∧
  p.done.map Res.tag ++ p.todo.map Res.tag ++ p.waiting.map Req.tag = T0

theorem serveRunning_tags (eng : Engine) (only : Option Bool) (W : List Req) (T0 : List TurnTag) :
    ∀ (fuel : Nat) (p : Plan), ServeTags W T0 p → ServeTags W T0 (serveRunning eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, h => by
    obtain ⟨hw, ht⟩ := h
    simp only [serveRunning]
    split
    · exact ⟨hw, ht⟩
    · split
      · exact ⟨hw, ht⟩
      · rename_i r later hcons
        split
        · apply serveRunning_tags eng only W T0 fuel
          refine ⟨hw, ?_⟩
          rw [← ht]
          dsimp only
          rw [appendRes_eq, hcons]
          simp
        · generalize hn : (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = n
          generalize hneed : blocksFor eng.blockSize (r.pos + n) - r.alloc = need
          obtain ⟨g1, g2, g3⟩ := growOrPreempt_tags eng need (resCount p.todo) p
          generalize growOrPreempt eng (resCount p.todo) need p = q at g1 g2 g3 ⊢
          have hq : q.preempted = 0 → q.waiting = W := by
            intro h0
            rcases g2 with ⟨h1, h2⟩ | h2
            · rw [h1]; exact hw (by omega)
            · omega
          split
          · exact ⟨hq, g1.trans ht⟩
          · rename_i hself
            simp only [Bool.not_eq_true] at hself
            obtain ⟨l', hl'⟩ := g3 r later hcons hself
            apply serveRunning_tags eng only W T0 fuel
            refine ⟨hq, ?_⟩
            rw [← ht, ← g1]
            dsimp only
            rw [appendRes_eq, hl']
            simp [dropHead, Res.tag]

/-- What admitting keeps: nothing left to consider, the queue's requests are sound, the requests (as tags)
of the plan, and while nothing was scheduled nor preempted, the queue, and no budget in an iteration that
decodes only. -/
def AdmitTags (N : Nat) (W : List Req) (only : Option Bool) (T0 : List TurnTag) (p : Plan) : Prop :=
  p.todo = [] ∧ (∀ q ∈ p.waiting, ReqOk N q) ∧
  (p.preempted = 0 → batchTokens p.done = 0 → p.waiting = W ∧ (only = some true → p.budget = 0)) ∧
  p.done.map Res.tag ++ p.waiting.map Req.tag = T0

theorem admitHeads_tags (eng : Engine) (only : Option Bool) (N : Nat) (W : List Req) (T0 : List TurnTag) :
    ∀ (fuel : Nat) (p : Plan), AdmitTags N W only T0 p → AdmitTags N W only T0 (admitHeads eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, h => by
    obtain ⟨ht, hw, hi, htag⟩ := h
    simp only [admitHeads]
    split
    · exact ⟨ht, hw, hi, htag⟩
    · rename_i hgo
      have hb : p.budget ≠ 0 := fun h => hgo (Or.inl h)
      split
      · exact ⟨ht, hw, hi, htag⟩
      · rename_i rq rest hwq
        have hrq : ReqOk N rq := hw rq (by rw [hwq]; exact List.mem_cons_self)
        have hru : min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) < max rq.kept (rq.computed + 1) := by
          have h1 := Nat.min_le_right (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1)))
          have h2 : reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1)) ≤
              max rq.kept (rq.computed + 1) - 1 := by
            unfold reuseCap
            split
            · exact reusable_le _ _
            · have := hrq.hit; omega
          omega
        generalize min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) = reused at hru ⊢
        generalize max rq.kept (rq.computed + 1) = known at hru ⊢
        have hn1 : 0 < capChunk p.chunk (min (known - reused) p.budget) := capChunk_pos _ _ (by omega)
        generalize capChunk p.chunk (min (known - reused) p.budget) = n at hn1 ⊢
        split
        · exact ⟨ht, hw, hi, htag⟩
        · apply admitHeads_tags eng only N W T0 fuel
          refine ⟨ht, fun q hq => hw q (by rw [hwq]; exact List.mem_cons_of_mem _ hq), ?_, ?_⟩
          · intro hpre htok
            exfalso
            simp only [batchTokens_append, batchTokens] at htok
            obtain ⟨_, hd⟩ := hi hpre (by omega)
            have hex : excluded only false = false := by
              cases only with
              | none => rfl
              | some d =>
                cases d with
                | false => rfl
                | true => exact absurd (hd rfl) hb
            simp only [hex] at htok
            simp at htok
            omega
          · rw [← htag, hwq]
            dsimp only
            rw [appendRes_eq]
            simp only [List.map_append, List.map_cons, List.map_nil, List.append_assoc, List.cons_append,
              List.nil_append]
            congr 2
            simp only [Res.tag, Req.tag]
            split <;> rfl

theorem plan_tags (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req)
    (hkv : usedBlocks m.running + cachedBlocks m.cache ≤ eng.kvBlocks)
    (hres : ∀ r ∈ m.running, ResOk eng.blockSize m.now r)
    (hpos : ∀ e ∈ m.cache, 0 < e.blocks)
    (hw : ∀ q ∈ waiting, ReqOk m.now q) :
    (plan eng chunk m waiting).done.map Res.tag ++ (plan eng chunk m waiting).waiting.map Req.tag
      = m.running.map Res.tag ++ waiting.map Req.tag ∧
    ((plan eng chunk m waiting).preempted = 0 → batchTokens (plan eng chunk m waiting).done = 0 →
      (plan eng chunk m waiting).waiting = waiting) := by
  have hdec : phaseOf eng m.running = some true →
      ∃ r ∈ clearSched m.running, r.decoding = true ∧ r.remaining ≠ 0 := by
    intro h
    unfold phaseOf at h
    split at h
    · simp only [Option.some.injEq] at h
      exact clearSched_decoder m.running h (fun r hr => (hres r hr).dec)
    · simp at h
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only at hdec ⊢
  have h0 : PInv eng m.now (usedBlocks m.running) only
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ := by
    refine ⟨⟨?_, fun r hr => by simp at hr, clearSched_ok _ _ _ hres, hpos, hw⟩, ?_⟩
    · show usedBlocks [] + usedBlocks (clearSched m.running) + cachedBlocks m.cache ≤ eng.kvBlocks
      rw [usedBlocks_clearSched]; simp only [usedBlocks]; omega
    · intro _ _
      refine ⟨?_, fun h => Or.inr (hdec h)⟩
      show usedBlocks [] + usedBlocks (clearSched m.running) ≤ usedBlocks m.running
      rw [usedBlocks_clearSched]; simp only [usedBlocks]; omega
  have hP0 : PlanInv eng.budget chunk only
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ :=
    ⟨rfl, by simp [batchTokens], batchTokens_clearSched _, fun _ _ => rfl⟩
  have hend := (serveRunning_inv eng only eng.budget chunk (resCount m.running + 1) _ hP0 rfl
    (by simp [resCount_clearSched])).2
  have h1 := serveRunning_pinv eng only m.now (usedBlocks m.running) (resCount m.running + 1) _ h0
  have hs := serveRunning_tags eng only waiting (m.running.map Res.tag ++ waiting.map Req.tag)
    (resCount m.running + 1) ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩
    ⟨fun _ => rfl, by simp [clearSched_tags]⟩
  generalize serveRunning eng only (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at hend h1 hs ⊢
  obtain ⟨hc, hi⟩ := h1
  obtain ⟨hs1, hs2⟩ := hs
  have h2 : PInv eng m.now (usedBlocks m.running) only
      { p1 with done := appendRes p1.done p1.todo, todo := [] } := by
    refine ⟨⟨?_, ?_, fun x hx => by simp at hx, hc.pos, hc.wait⟩, ?_⟩
    · have := hc.kv
      simp only [usedBlocks_append, usedBlocks]
      omega
    · intro x hx
      rcases (mem_appendRes _ _ _).mp hx with hx | hx
      · exact hc.done x hx
      · exact hc.todo x hx
    · intro hpre htok
      simp only [batchTokens_append] at htok
      obtain ⟨hu, hd⟩ := hi hpre (by omega)
      refine ⟨?_, ?_⟩
      · simp only [usedBlocks_append, usedBlocks]; omega
      · intro hon
        rcases hd hon with h | ⟨d, hdm, _⟩
        · exact Or.inl h
        · rcases hend with h | h
          · exact Or.inl h
          · rw [h] at hdm; simp at hdm
  have hA : AdmitTags m.now waiting only (m.running.map Res.tag ++ waiting.map Req.tag)
      { p1 with done := appendRes p1.done p1.todo, todo := [] } := by
    refine ⟨rfl, h2.core.wait, fun hpre htok => ⟨hs1 hpre, fun hon => ?_⟩, ?_⟩
    · rcases (h2.idle hpre htok).2 hon with h | ⟨_, h, _⟩
      · exact h
      · simp at h
    · rw [← hs2]
      dsimp only
      rw [appendRes_eq]
      simp
  split
  · have H := fun fuel => admitHeads_tags eng only m.now waiting _ fuel _ hA
    exact ⟨(H _).2.2.2, fun a b => ((H _).2.2.1 a b).1⟩
  · rename_i hpre
    refine ⟨hA.2.2.2, fun h _ => absurd h hpre⟩

/-! ## The machine -/

theorem duePending_spec (now : Nat) : ∀ (ps : List Pending),
    ((duePending now ps).1 ++ (duePending now ps).2).Perm ps ∧ ∀ p ∈ (duePending now ps).1, p.time ≤ now
  | [] => by simp [duePending]
  | p :: ps => by
    obtain ⟨ih1, ih2⟩ := duePending_spec now ps
    rcases hdp : duePending now ps with ⟨due, later⟩
    rw [hdp] at ih1 ih2
    simp only [duePending, hdp]
    split
    · rename_i hp
      refine ⟨List.Perm.cons p ih1, ?_⟩
      intro x hx
      rcases List.mem_cons.mp hx with rfl | hx
      · exact hp
      · exact ih2 x hx
    · exact ⟨List.perm_middle.trans (List.Perm.cons p ih1), ih2⟩

theorem submit_tags (eng : Engine) (sessions : List Session) : ∀ (ps : List Pending) (w : List Req),
    ∃ ps' : List Pending, ps'.Sublist ps ∧
      (submit eng sessions ps w).map Req.tag = w.map Req.tag ++ ps'.map Pending.tag
  | [], w => ⟨[], List.Sublist.slnil, by simp [submit]⟩
  | p :: ps, w => by
    simp only [submit]
    split
    · obtain ⟨ps', h1, h2⟩ := submit_tags eng sessions ps w
      exact ⟨ps', h1.cons p, h2⟩
    · obtain ⟨ps', h1, h2⟩ := submit_tags eng sessions ps (appendReq w (newReq eng sessions p))
      refine ⟨p :: ps', h1.cons₂ p, ?_⟩
      rw [h2, appendReq_eq]
      simp only [List.map_append, List.map_cons, List.map_nil, List.append_assoc, List.cons_append,
        List.nil_append]
      rfl

/-- The machine's invariant over requests: `Ledger` at the clock, of the pending turns, the residents and the
queue (as tags), and the outcomes. -/
def RInv (sessions : List Session) (m : Machine) : Prop :=
  Ledger sessions m.now m.pending (m.running.map Res.tag ++ m.waiting.map Req.tag) m.outcomes

/-- A step keeps the invariant over requests (with the machine's invariant `Inv`, which tells that a
step that runs nothing admitted nothing). -/
theorem step_rinv (eng : Engine) (sessions : List Session) (m : Machine) (h : Inv eng m)
    (hj : RInv sessions m) : RInv sessions (step eng sessions m) := by
  unfold RInv at hj ⊢
  have hds := duePending_spec m.now m.pending
  have hlater := duePending_later m.now m.pending
  unfold step
  cases hd : duePending m.now m.pending with
  | mk due later =>
    rw [hd] at hlater hds
    dsimp only at hlater hds ⊢
    obtain ⟨hperm, hdue⟩ := hds
    obtain ⟨ps', hsub, htags⟩ := submit_tags eng sessions due m.waiting
    have hsj : Ledger sessions m.now later
        (m.running.map Res.tag ++ (submit eng sessions due m.waiting).map Req.tag) m.outcomes := by
      have h1 := (hj.perm hperm (List.Perm.refl _)).move hdue
      have h2 := h1.perm (List.Perm.refl _) List.perm_append_comm
      rw [htags]
      refine h2.sub ?_
      rw [← List.append_assoc]
      exact (hsub.map _).append_left _
    have hsub2 := submit_ok eng sessions m.now due m.waiting h.wait
    have hrun : ∀ chunk, ∀ m' : Machine, m'.pending = later →
        m'.waiting = (plan eng chunk m (submit eng sessions due m.waiting)).waiting → m'.outcomes = m.outcomes →
        Ledger sessions (m.now + 1)
          (apply eng sessions m.now m' (plan eng chunk m (submit eng sessions due m.waiting)).done []).pending
          ((apply eng sessions m.now m' (plan eng chunk m (submit eng sessions due m.waiting)).done []).running.map
            Res.tag ++
           (apply eng sessions m.now m' (plan eng chunk m (submit eng sessions due m.waiting)).done []).waiting.map
            Req.tag)
          (apply eng sessions m.now m' (plan eng chunk m (submit eng sessions due m.waiting)).done []).outcomes := by
      intro chunk m' hp' hw' ho'
      obtain ⟨ht1, _⟩ := plan_tags eng chunk m (submit eng sessions due m.waiting) h.kv h.res h.pos hsub2
      apply Ledger.mono_now _ (Nat.le_succ _)
      apply apply_ledger
      rw [hp', hw', ho']
      simp only [List.map_nil, List.append_nil]
      rw [ht1]
      exact hsj
    have hidle : ∀ chunk, batchTokens (plan eng chunk m (submit eng sessions due m.waiting)).done = 0 ∧
        (plan eng chunk m (submit eng sessions due m.waiting)).preempted = 0 →
        Ledger sessions m.now later
          ((plan eng chunk m (submit eng sessions due m.waiting)).done.map Res.tag ++
            (submit eng sessions due m.waiting).map Req.tag) m.outcomes := by
      intro chunk hz
      obtain ⟨ht1, ht2⟩ := plan_tags eng chunk m (submit eng sessions due m.waiting) h.kv h.res h.pos hsub2
      rw [ht2 hz.2 hz.1] at ht1
      rw [List.append_cancel_right ht1]
      exact hsj
    cases later with
    | nil =>
      dsimp only
      generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount (submit eng sessions due m.waiting) > 1
        then eng.chunk else 0) = chunk at hrun hidle
      split
      · exact hsj
      · split
        · rename_i hz
          exact hidle chunk hz
        · exact hrun chunk _ rfl rfl rfl
    | cons q qs =>
      have hq : m.now ≤ q.time := Nat.le_of_lt (hlater q List.mem_cons_self)
      dsimp only
      generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount (submit eng sessions due m.waiting) > 1
        then eng.chunk else 0) = chunk at hrun hidle
      split
      · exact hsj.mono_now hq
      · split
        · rename_i hz
          exact (hidle chunk hz).mono_now hq
        · exact hrun chunk _ rfl rfl rfl

theorem firstTurns_spec : ∀ (ss : List Session) (i : Nat), ((firstTurns i ss).map Pending.sid).Nodup ∧
    ∀ p ∈ firstTurns i ss, p.turn = 0 ∧ i ≤ p.sid ∧
      ∃ s, sessionAt ss (p.sid - i) = some s ∧ s.arrive = p.time ∧
      ∃ t, turnAt s.turns 0 = some t
  | [], i => by simp [firstTurns]
  | s :: ss, i => by
    obtain ⟨ih1, ih2⟩ := firstTurns_spec ss (i + 1)
    have hrest : ∀ p ∈ firstTurns (i + 1) ss, p.turn = 0 ∧ i ≤ p.sid ∧
        ∃ s', sessionAt (s :: ss) (p.sid - i) = some s' ∧ s'.arrive = p.time ∧
          ∃ t, turnAt s'.turns 0 = some t := by
      intro p hp
      obtain ⟨h1, h2, s', h3, h4⟩ := ih2 p hp
      refine ⟨h1, by omega, s', ?_, h4⟩
      have : p.sid - i = (p.sid - (i + 1)) + 1 := by omega
      rw [this]
      exact h3
    simp only [firstTurns]
    split
    · exact ⟨ih1, hrest⟩
    · rename_i t ts hts
      have hperm := insertPending_perm ⟨s.arrive, i, 0, t.new, 0, i⟩ (firstTurns (i + 1) ss)
      refine ⟨(hperm.map _).nodup_iff.mpr ?_, fun p hp => ?_⟩
      · simp only [List.map_cons, List.nodup_cons]
        refine ⟨fun hm => ?_, ih1⟩
        obtain ⟨p, hp, he⟩ := List.mem_map.mp hm
        have := (ih2 p hp).2.1
        omega
      · rcases List.mem_cons.mp (hperm.mem_iff.mp hp) with rfl | hp
        · exact ⟨rfl, Nat.le_refl _, s, by simp [sessionAt], rfl, t, by rw [hts]; rfl⟩
        · exact hrest p hp

theorem init_rinv (sessions : List Session) : RInv sessions (init sessions) := by
  obtain ⟨h1, h2⟩ := firstTurns_spec sessions 0
  refine ⟨by simpa [init] using h1, by simp [init], by simp [init], by simp [init], ?_, by simp [init],
    by simp [init], by simp [init], ?_, by simp [init], by simp [init], ?_, by simp [init], by simp [init]⟩
  rotate_left
  · intro p hp
    obtain ⟨h0, _, s, hs, _, t, ht⟩ := h2 p hp
    simp only [Nat.sub_zero] at hs
    rw [h0]
    exact ⟨s, t, hs, ht⟩
  · intro p hp
    obtain ⟨ht, _⟩ := h2 p hp
    intro j hj
    show ∃ o ∈ ([] : List Outcome), o.sid = p.sid ∧ o.turn = j
    omega
  intro p hp
  obtain ⟨ht, _, s, hs, ha, _⟩ := h2 p hp
  show AfterSubmit sessions [] p.sid p.turn p.time
  rw [ht]
  simp only [AfterSubmit]
  intro s' hs'
  simp only [Nat.sub_zero] at hs
  rw [hs] at hs'
  cases hs'
  omega

/-- A run keeps both invariants. -/
theorem run_rinv (eng : Engine) (sessions : List Session) :
    ∀ (fuel : Nat) (m : Machine), Inv eng m → RInv sessions m → RInv sessions (run eng sessions fuel m)
  | 0, m, _, hj => hj
  | fuel + 1, m, h, hj => by
    simp only [run]
    split
    · exact hj
    · exact run_rinv eng sessions fuel _ (step_inv eng sessions m h) (step_rinv eng sessions m h hj)

/-! ## Request conservation and causality -/

theorem pendingKeys_eq : ∀ (l : List Pending), pendingKeys l = l.map fun p => (p.sid, p.turn)
  | [] => rfl
  | p :: ps => by simp [pendingKeys, pendingKeys_eq ps]

theorem reqKeys_eq : ∀ (l : List Req), reqKeys l = l.map fun q => (q.sid, q.turn)
  | [] => rfl
  | q :: qs => by simp [reqKeys, reqKeys_eq qs]

theorem resKeys_eq : ∀ (l : List Res), resKeys l = l.map fun r => (r.req.sid, r.req.turn)
  | [] => rfl
  | r :: rs => by simp [resKeys, resKeys_eq rs]

theorem outcomeKeys_eq : ∀ (l : List Outcome), outcomeKeys l = l.map fun o => (o.sid, o.turn)
  | [] => rfl
  | o :: os => by simp [outcomeKeys, outcomeKeys_eq os]

theorem nodup_of_fst : ∀ (l : List (Nat × Nat)), (l.map Prod.fst).Nodup → l.Nodup
  | [], _ => List.nodup_nil
  | a :: l, h => by
    rw [List.map_cons, List.nodup_cons] at h
    rw [List.nodup_cons]
    exact ⟨fun ha => h.1 (List.mem_map.mpr ⟨a, ha, rfl⟩), nodup_of_fst l h.2⟩

theorem Ledger.keys {sessions : List Session} {now : Nat} {P : List Pending} {T : List TurnTag} {O : List Outcome}
    (h : Ledger sessions now P T O) :
    (P.map (fun p => (p.sid, p.turn)) ++ T.map (fun t => (t.sid, t.turn)) ++
      O.map (fun o => (o.sid, o.turn))).Nodup := by
  rw [List.nodup_append]
  refine ⟨nodup_of_fst _ ?_, h.onodup, ?_⟩
  · have e : (P.map (fun p => (p.sid, p.turn)) ++ T.map (fun t => (t.sid, t.turn))).map Prod.fst =
        P.map Pending.sid ++ T.map TurnTag.sid := by
      simp only [List.map_append, List.map_map]
      rfl
    rw [e]
    exact h.sids
  · intro a ha b hb hab
    subst hab
    obtain ⟨o, ho, hoa⟩ := List.mem_map.mp hb
    rcases List.mem_append.mp ha with ha | ha
    · obtain ⟨p, hp, rfl⟩ := List.mem_map.mp ha
      simp only [Prod.mk.injEq] at hoa
      have := h.pbefore p hp o ho hoa.1
      omega
    · obtain ⟨t, ht, rfl⟩ := List.mem_map.mp ha
      simp only [Prod.mk.injEq] at hoa
      have := h.tbefore t ht o ho hoa.1
      omega

/-- Request conservation, never two of them: at every step of every run of every engine of the fragment,
from the empty machine, the turns pending, waiting, resident and answered, as (session, turn), are
pairwise distinct, across and within the four lists. -/
theorem requests_distinct (eng : Engine) (sessions : List Session) (fuel : Nat) :
    (pendingKeys (run eng sessions fuel (init sessions)).pending ++
      reqKeys (run eng sessions fuel (init sessions)).waiting ++
      resKeys (run eng sessions fuel (init sessions)).running ++
      outcomeKeys (run eng sessions fuel (init sessions)).outcomes).Nodup := by
  have h := (run_rinv eng sessions fuel (init sessions) (init_inv eng sessions) (init_rinv sessions)).keys
  generalize run eng sessions fuel (init sessions) = m at h ⊢
  rw [pendingKeys_eq, reqKeys_eq, resKeys_eq, outcomeKeys_eq]
  have e : (m.running.map Res.tag ++ m.waiting.map Req.tag).map (fun t => (t.sid, t.turn)) =
      m.running.map (fun r => (r.req.sid, r.req.turn)) ++ m.waiting.map (fun q => (q.sid, q.turn)) := by
    simp only [List.map_append, List.map_map]
    rfl
  rw [e] at h
  simp only [List.append_assoc] at h ⊢
  exact ((List.perm_append_comm_assoc _ _ _).append_left _).nodup_iff.mp h

/-- Causality against submission, a session's first turn: its first token is no earlier than the
session's arrival. -/
theorem first_after_arrival (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ∀ o ∈ (run eng sessions fuel (init sessions)).outcomes, o.turn = 0 →
      ∀ s, sessionAt sessions o.sid = some s → s.arrive ≤ o.first := by
  intro o ho h0 s hs
  have := (run_rinv eng sessions fuel (init sessions) (init_inv eng sessions) (init_rinv sessions)).out o ho
  rw [h0] at this
  simp only [AfterSubmit] at this
  exact this s hs

/-- Causality against submission, a later turn: its first token is no earlier than its submission, the
step after the previous turn's last token plus its think time. -/
theorem first_after_think (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ∀ o ∈ (run eng sessions fuel (init sessions)).outcomes,
    ∀ o' ∈ (run eng sessions fuel (init sessions)).outcomes,
      o'.sid = o.sid → o'.turn = o.turn + 1 → ∀ s t, sessionAt sessions o.sid = some s →
      turnAt s.turns (o.turn + 1) = some t → o.last + 1 + t.think ≤ o'.first := by
  intro o ho o' ho' hs ht s t hss htt
  have := (run_rinv eng sessions fuel (init sessions) (init_inv eng sessions) (init_rinv sessions)).out o' ho'
  rw [ht] at this
  simp only [AfterSubmit] at this
  exact this o ho hs.symm rfl s t (by rw [hs]; exact hss) htt

/-- Request conservation, every turn in the lists is a turn of the workload, answered in order: every
(session, turn) pending, waiting, resident or answered names an existing turn of `sessions`, and every
earlier turn of its session has been answered. -/
theorem requests_known (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ∀ k ∈ pendingKeys (run eng sessions fuel (init sessions)).pending ++
      reqKeys (run eng sessions fuel (init sessions)).waiting ++
      resKeys (run eng sessions fuel (init sessions)).running ++
      outcomeKeys (run eng sessions fuel (init sessions)).outcomes,
      TurnExists sessions k.1 k.2 ∧ PriorAnswered (run eng sessions fuel (init sessions)).outcomes k.1 k.2 := by
  have h := run_rinv eng sessions fuel (init sessions) (init_inv eng sessions) (init_rinv sessions)
  generalize run eng sessions fuel (init sessions) = m at h ⊢
  intro k hk
  rw [pendingKeys_eq, reqKeys_eq, resKeys_eq, outcomeKeys_eq] at hk
  simp only [List.mem_append, List.mem_map] at hk
  rcases hk with ((⟨p, hp, rfl⟩ | ⟨q, hq, rfl⟩) | ⟨r, hr, rfl⟩) | ⟨o, ho, rfl⟩
  · exact ⟨h.pnames p hp, h.pprev p hp⟩
  · have hm : q.tag ∈ m.running.map Res.tag ++ m.waiting.map Req.tag :=
      List.mem_append_right _ (List.mem_map.mpr ⟨q, hq, rfl⟩)
    exact ⟨h.tnames _ hm, h.tprev _ hm⟩
  · have hm : r.tag ∈ m.running.map Res.tag ++ m.waiting.map Req.tag :=
      List.mem_append_left _ (List.mem_map.mpr ⟨r, hr, rfl⟩)
    exact ⟨h.tnames _ hm, h.tprev _ hm⟩
  · exact ⟨h.onames o ho, h.oprev o ho⟩

/-- A session has at most one turn in flight: the sessions of the turns pending, waiting and resident
are pairwise distinct. -/
theorem one_turn_in_flight (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ((pendingKeys (run eng sessions fuel (init sessions)).pending ++
      reqKeys (run eng sessions fuel (init sessions)).waiting ++
      resKeys (run eng sessions fuel (init sessions)).running).map Prod.fst).Nodup := by
  have h := (run_rinv eng sessions fuel (init sessions) (init_inv eng sessions) (init_rinv sessions)).sids
  generalize run eng sessions fuel (init sessions) = m at h ⊢
  rw [pendingKeys_eq, reqKeys_eq, resKeys_eq]
  simp only [List.map_append, List.map_map, List.append_assoc] at h ⊢
  exact (List.perm_append_comm.append_left _).nodup_iff.mp h

end Serq
