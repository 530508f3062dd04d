module

public import Serq.Exec

/-! # Full iterations: the budget is spent whenever demand allows

For every engine of the fragment on vLLM's schedule (`phased = false`: no `only`; a
phase-separated engine is not work-conserving, `examples/papers/fastertransformer.sq`) and
every workload, every iteration schedules its
whole token budget unless the residents' demand (each decode's one token, each
prefill's remaining prompt up to the chunk cap, summed after the batch is
scheduled) is below it: `demand < budget ∨ tokens = budget`. This is the
stall-free batching property of Sarathi-Serve's scheduler under a token budget
with chunked prefill, for vLLM's schedule: serve the running requests in order,
each taking what it can, then admit with what is left.

The proof follows the plan: an invariant of `serveRunning` (what was scheduled
plus the budget left is the budget; while budget is left, everything considered
got its demand; the residents not yet considered have nothing scheduled), kept
by the preemptions of `growOrPreempt` (which take residents from the end, never
the ones considered) and by `admitHeads`; then `step` appends a record that
satisfies the property, and `run` keeps it for all of them.
-/

@[expose] public section

namespace Serq

theorem batchTokens_append (a b : List Res) :
    batchTokens (appendRes a b) = batchTokens a + batchTokens b := by
  induction a with
  | nil => simp [appendRes, batchTokens]
  | cons x xs ih => simp only [appendRes, batchTokens, ih]; omega

theorem demandOf_append (c : Nat) (a b : List Res) :
    demandOf c (appendRes a b) = demandOf c a + demandOf c b := by
  induction a with
  | nil => simp [appendRes, demandOf]
  | cons x xs ih => simp only [appendRes, demandOf, ih]; omega

theorem appendRes_nil (a : List Res) : appendRes a [] = a := by
  induction a with
  | nil => rfl
  | cons x xs ih => simp [appendRes, ih]

theorem batchTokens_clearSched (l : List Res) : batchTokens (clearSched l) = 0 := by
  induction l with
  | nil => rfl
  | cons x xs ih => simp [clearSched, batchTokens, ih]

theorem resCount_clearSched (l : List Res) : resCount (clearSched l) = resCount l := by
  induction l with
  | nil => rfl
  | cons x xs ih => simp [clearSched, resCount, ih]

theorem popLast_tokens : ∀ (l rest : List Res) (v : Res), popLast l = some (rest, v) →
    batchTokens l = batchTokens rest + v.sched ∧ resCount l = resCount rest + 1
  | [], _, _, h => by simp [popLast] at h
  | [x], rest, v, h => by
    simp only [popLast, Option.some.injEq, Prod.mk.injEq] at h
    obtain ⟨h1, h2⟩ := h
    subst h1; subst h2
    simp [batchTokens, resCount]
  | x :: y :: ys, rest, v, h => by
    simp only [popLast] at h
    split at h
    · simp at h
    · rename_i init last hp
      simp only [Option.some.injEq, Prod.mk.injEq] at h
      obtain ⟨h1, h2⟩ := h
      subst h1; subst h2
      have ih := popLast_tokens (y :: ys) init last hp
      simp only [batchTokens, resCount] at ih ⊢
      omega

/-- What the plan keeps true: scheduled tokens plus the budget left are the budget; while budget
is left, what was considered got its whole demand (when the iteration has no `only`, which leaves
requests out with their demand); what is left to consider has nothing scheduled. -/
def PlanInv (B c : Nat) (only : Option Bool) (p : Plan) : Prop :=
  p.chunk = c ∧ batchTokens p.done + p.budget = B ∧ batchTokens p.todo = 0 ∧
  (only = none → 0 < p.budget → batchTokens p.done = demandOf c p.done)

/-- Preemptions take residents from the end of `todo`: what was considered and the budget stay. -/
theorem growOrPreempt_keeps (eng : Engine) : ∀ (fuel need : Nat) (p : Plan),
    (growOrPreempt eng fuel need p).done = p.done ∧
    (growOrPreempt eng fuel need p).budget = p.budget ∧
    (growOrPreempt eng fuel need p).chunk = p.chunk ∧
    batchTokens (growOrPreempt eng fuel need p).todo ≤ batchTokens p.todo ∧
    resCount (growOrPreempt eng fuel need p).todo ≤ resCount p.todo ∧
    ((growOrPreempt eng fuel need p).selfPreempted = true →
      p.selfPreempted = true ∨ (growOrPreempt eng fuel need p).todo = []) ∧
    ((growOrPreempt eng fuel need p).selfPreempted = false → p.todo ≠ [] →
      (growOrPreempt eng fuel need p).todo ≠ [])
  | 0, need, p => ⟨rfl, rfl, rfl, Nat.le_refl _, Nat.le_refl _, fun h => Or.inl h, fun _ h => h⟩
  | fuel + 1, need, p => by
    simp only [growOrPreempt]
    split
    · exact ⟨rfl, rfl, rfl, Nat.le_refl _, Nat.le_refl _, fun h => Or.inl h, fun _ h => h⟩
    · split
      · exact ⟨rfl, rfl, rfl, Nat.le_refl _, Nat.le_refl _, fun h => Or.inl h, fun _ h => h⟩
      · rename_i rest victim hp
        obtain ⟨hp1, hp2⟩ := popLast_tokens p.todo rest victim hp
        cases rest with
        | nil =>
          refine ⟨rfl, rfl, rfl, ?_, ?_, fun _ => Or.inr rfl, fun h => by simp at h⟩
          · show batchTokens [] ≤ batchTokens p.todo
            exact Nat.zero_le _
          · show resCount [] ≤ resCount p.todo
            exact Nat.zero_le _
        | cons x xs =>
          have ih := growOrPreempt_keeps eng fuel need
            { p with todo := x :: xs,
                     waiting := { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } :: p.waiting,
                     cache := (release eng victim.req.sid victim.pos p.relSeq p.cache).1,
                     relSeq := (release eng victim.req.sid victim.pos p.relSeq p.cache).2,
                     preempted := p.preempted + 1 }
          obtain ⟨h1, h2, h3, h4, h5, h6, h7⟩ := ih
          dsimp only at h1 h2 h3 h4 h5 h6 h7
          refine ⟨h1, h2, h3, ?_, ?_, ?_, ?_⟩
          · rw [hp1]; exact Nat.le_trans h4 (Nat.le_add_right _ _)
          · rw [hp2]; exact Nat.le_trans h5 (Nat.le_succ _)
          · intro hs
            rcases h6 hs with h | h
            · exact Or.inl h
            · exact Or.inr h
          · intro hs _
            exact h7 hs (by simp)

theorem capChunk_le (c n : Nat) : capChunk c n ≤ n := by
  unfold capChunk; split <;> omega

/-- A resident's tokens: its demand, or the rest of the budget. -/
theorem served_share (c budget rem : Nat) :
    capChunk c (min rem budget) = capChunk c rem ∨ capChunk c (min rem budget) = budget := by
  unfold capChunk
  split
  · omega
  · omega

theorem serveRunning_inv (eng : Engine) (only : Option Bool) (B c : Nat) : ∀ (fuel : Nat) (p : Plan),
    PlanInv B c only p → p.selfPreempted = false → resCount p.todo < fuel →
    PlanInv B c only (serveRunning eng only fuel p) ∧
      ((serveRunning eng only fuel p).budget = 0 ∨ (serveRunning eng only fuel p).todo = [])
  | 0, p, _, _, hf => by simp at hf
  | fuel + 1, p, hinv, hsp, hf => by
    obtain ⟨hc, htok, htodo, hdem⟩ := hinv
    subst hc
    simp only [serveRunning]
    split
    · rename_i hstop
      refine ⟨⟨rfl, htok, htodo, hdem⟩, ?_⟩
      rcases hstop with h | h
      · exact Or.inl h
      · simp [hsp] at h
    · rename_i hgo
      split
      · rename_i hnil
        exact ⟨⟨rfl, htok, htodo, hdem⟩, Or.inr hnil⟩
      · rename_i r later hcons
        have hb : 0 < p.budget := by omega
        simp only [hcons, batchTokens] at htodo
        have hr0 : r.sched = 0 := by omega
        have hl0 : batchTokens later = 0 := by omega
        split
        · rename_i hrem
          apply serveRunning_inv eng only B p.chunk fuel
          · refine ⟨rfl, ?_, hl0, ?_⟩
            · simp only [batchTokens_append, batchTokens, hr0]; omega
            · intro hn hpos
              have hrem0 : r.remaining = 0 := by
                rcases hrem with h | h
                · exact h
                · subst hn; simp [excluded] at h
              simp only [batchTokens_append, demandOf_append, batchTokens, demandOf, hr0, hrem0, if_true]
              have := hdem hn hpos
              omega
          · simpa using hsp
          · simp only [hcons, resCount] at hf; simpa using (by omega : resCount later < fuel)
        · rename_i hrem
          have hrem0 : ¬ r.remaining = 0 := fun h => hrem (Or.inl h)
          obtain ⟨g1, g2, g3, g4, g5, g6, g7⟩ := growOrPreempt_keeps eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          generalize growOrPreempt eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc)
              p = q at g1 g2 g3 g4 g5 g6 g7 ⊢
          split
          · rename_i hself
            have hempty : q.todo = [] := by
              rcases g6 hself with h | h
              · simp [hsp] at h
              · exact h
            refine ⟨⟨g3, by rw [g1, g2, htok], by rw [hempty]; rfl, ?_⟩, Or.inr hempty⟩
            rw [g1, g2]; exact hdem
          · rename_i hself
            simp only [Bool.not_eq_true] at hself
            have hne := g7 hself (by simp [hcons])
            apply serveRunning_inv eng only B p.chunk fuel
            · refine ⟨g3, ?_, ?_, ?_⟩
              · simp only [batchTokens_append, batchTokens, g1, g2]
                split
                · omega
                · have := capChunk_le p.chunk (min r.remaining p.budget)
                  have := Nat.min_le_right r.remaining p.budget
                  omega
              · cases hq : q.todo with
                | nil => simp [dropHead, batchTokens]
                | cons x xs =>
                  simp only [dropHead]
                  rw [hq] at g4
                  simp only [batchTokens, hcons] at g4
                  omega
              · intro hn hpos
                simp only [batchTokens_append, demandOf_append, batchTokens, demandOf, g1, g2] at hpos ⊢
                have hd := hdem hn hb
                simp only [hrem0, if_false]
                split
                · simp; omega
                · rename_i hdec
                  simp only [hdec, Bool.false_eq_true, if_false] at hpos ⊢
                  rcases served_share p.chunk p.budget r.remaining with h | h
                  · rw [h]; rw [h] at hpos; omega
                  · rw [h] at hpos; omega
            · exact hself
            · cases hq : q.todo with
              | nil => exact absurd hq hne
              | cons x xs =>
                simp only [dropHead]
                rw [hq] at g5
                simp only [resCount, hcons] at g5 hf
                omega

theorem admitHeads_inv (eng : Engine) (only : Option Bool) (B c : Nat) : ∀ (fuel : Nat) (p : Plan),
    PlanInv B c only p → PlanInv B c only (admitHeads eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, hinv => by
    obtain ⟨hc, htok, htodo, hdem⟩ := hinv
    subst hc
    simp only [admitHeads]
    split
    · exact ⟨rfl, htok, htodo, hdem⟩
    · rename_i hgo
      have hb : 0 < p.budget := by omega
      split
      · exact ⟨rfl, htok, htodo, hdem⟩
      · rename_i rq rest hw
        split
        · exact ⟨rfl, htok, htodo, hdem⟩
        · apply admitHeads_inv eng only B p.chunk fuel
          generalize max rq.kept (rq.computed + 1) - min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) = left
          refine ⟨rfl, ?_, htodo, ?_⟩
          · simp only [batchTokens_append, batchTokens]
            have := capChunk_le p.chunk (min left p.budget)
            have := Nat.min_le_right left p.budget
            split <;> omega
          · intro hn hpos
            subst hn
            simp only [excluded, Bool.false_eq_true, if_false] at hpos ⊢
            simp only [batchTokens_append, demandOf_append, batchTokens, demandOf] at hpos ⊢
            have hd := hdem rfl hb
            simp only [Bool.false_eq_true, if_false]
            split
            · rename_i h0
              simp only [h0, Nat.zero_min]
              unfold capChunk; split <;> simp <;> omega
            · rcases served_share p.chunk p.budget left with h | h
              · rw [h]; omega
              · rw [h] at hpos; omega

/-- Every plan keeps the invariant: serving the residents, then admitting from the queue. -/
theorem plan_inv (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req) :
    PlanInv eng.budget chunk (phaseOf eng m.running) (plan eng chunk m waiting) := by
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only
  have h0 : PlanInv eng.budget chunk only
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ :=
    ⟨rfl, by simp [batchTokens], batchTokens_clearSched _, fun _ _ => rfl⟩
  obtain ⟨⟨hc, htok, htodo, hdem⟩, hend⟩ :=
    serveRunning_inv eng only eng.budget chunk (resCount m.running + 1) _ h0 rfl (by simp [resCount_clearSched])
  generalize serveRunning eng only (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1
    at hc htok htodo hdem hend ⊢
  have h1 : PlanInv eng.budget chunk only { p1 with done := appendRes p1.done p1.todo, todo := [] } := by
    refine ⟨hc, ?_, rfl, ?_⟩
    · simp only [batchTokens_append, htodo]; omega
    · intro hn hpos
      rcases hend with h | h
      · simp only at hpos; omega
      · simp only [h, appendRes_nil]; exact hdem hn hpos
  split
  · exact admitHeads_inv eng only eng.budget chunk _ _ h1
  · exact h1

/-- Every plan of an engine without `only` spends its budget, or its residents' demand is below it. -/
theorem plan_full (eng : Engine) (hp : eng.phased = false) (chunk : Nat) (m : Machine) (waiting : List Req) :
    batchTokens (plan eng chunk m waiting).done = eng.budget ∨
      demandOf chunk (plan eng chunk m waiting).done < eng.budget := by
  obtain ⟨_, htok2, _, hdem2⟩ := plan_inv eng chunk m waiting
  have hn : phaseOf eng m.running = none := by simp [phaseOf, hp]
  by_cases hb : (plan eng chunk m waiting).budget = 0
  · left; omega
  · right; have := hdem2 hn (by omega); omega

theorem mem_appendRecord (rs : List Record) (r x : Record) :
    x ∈ appendRecord rs r ↔ x ∈ rs ∨ x = r := by
  induction rs with
  | nil => simp [appendRecord]
  | cons y ys ih => simp only [appendRecord, List.mem_cons, ih, or_assoc]

theorem apply_records (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), (apply eng sessions now m l kept).records = m.records
  | [], m, kept => rfl
  | r :: rs, m, kept => by
    have ih := apply_records eng sessions now rs
    simp only [apply]
    repeat' split
    all_goals first | rfl | (simp only [ih]; done) | simp [ih]

/-- The property of an iteration record that `plan_full` gives. -/
def FullOrShort (B : Nat) (r : Record) : Prop := r.tokens = B ∨ r.demand < B

theorem step_full (eng : Engine) (hp : eng.phased = false) (sessions : List Session) (m : Machine) :
    ∀ x ∈ (step eng sessions m).records, x ∈ m.records ∨ FullOrShort eng.budget x := by
  intro x hx
  unfold step at hx
  simp only at hx
  repeat' split at hx
  all_goals first
    | exact Or.inl hx
    | (simp only [apply_records] at hx
       rcases (mem_appendRecord _ _ _).mp hx with h | h
       · exact Or.inl h
       · right; subst h; exact plan_full eng hp _ m _)

/-- Every iteration of every run is full, or its demand is below the budget. -/
theorem run_full (eng : Engine) (hp : eng.phased = false) (sessions : List Session) :
    ∀ (fuel : Nat) (m : Machine), (∀ x ∈ m.records, FullOrShort eng.budget x) →
      ∀ x ∈ (run eng sessions fuel m).records, FullOrShort eng.budget x
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · apply run_full eng hp sessions fuel
      intro x hx
      rcases step_full eng hp sessions m x hx with h' | h'
      · exact h x h'
      · exact h'

theorem full_or_short (eng : Engine) (hp : eng.phased = false) (sessions : List Session) (fuel : Nat) :
    ∀ x ∈ (run eng sessions fuel (init sessions)).records, x.tokens = eng.budget ∨ x.demand < eng.budget :=
  run_full eng hp sessions fuel (init sessions) (by simp [init])

end Serq
