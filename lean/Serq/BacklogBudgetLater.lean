module

public import Serq.BacklogBudgetIdle
public import Serq.BacklogBudgetWork

/-! # A full iteration with work left is followed one step later (issue 14, result 2, case (b))

`Serq.BacklogBudget.backlog_of_resets_run` assumes (`hstep`) that every record but the last is a reset or
serves the full budget and is followed by the next record one step later. This module proves the
step-later half for every run from `init` of every engine of the mixed schedule (`phased = false`) with a
positive budget: a record that serves less than its demand (`tokens < demand`: some resident got less
than its share, so it still has work left after the iteration) is followed by the next record at
`start + 1` (`Serq.BacklogBudget.step_later`). The engine's side: at a step from a machine with a resident
that has work left, the plan schedules a token or preempts (`plan_progress`: the first resident with work
left is served, unless the KV pool preempts), so the step adds a record at the clock
(`step_progress`); and after an iteration with `tokens < demand` some resident has work left
(`step_left`, from `plan_sched_le`: every resident is scheduled at most its demand). With
`Serq.full_or_short`, `hstep` then reduces to the resets of the iterations that serve their whole demand
or whose demand is below the budget (`Serq.BacklogBudget.hstep_of_resets`,
`Serq.BacklogBudget.backlog_of_whole_resets`).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open BacklogMany

/-! ## The plan schedules a token or preempts when a resident has work left -/

theorem grow_pre (eng : Engine) : ∀ (fuel need : Nat) (p : Plan),
    p.preempted ≤ (growOrPreempt eng fuel need p).preempted ∧
    ((growOrPreempt eng fuel need p).selfPreempted = true → p.selfPreempted = true ∨
      p.preempted < (growOrPreempt eng fuel need p).preempted)
  | 0, need, p => ⟨Nat.le_refl _, fun h => Or.inl h⟩
  | fuel + 1, need, p => by
    simp only [growOrPreempt]
    split
    · exact ⟨Nat.le_refl _, fun h => Or.inl h⟩
    · split
      · exact ⟨Nat.le_refl _, fun h => Or.inl h⟩
      · rename_i rest victim hp
        cases rest with
        | nil =>
          exact ⟨Nat.le_succ _, fun _ => Or.inr (Nat.lt_succ_self _)⟩
        | cons x xs =>
          obtain ⟨h1, _⟩ := grow_pre eng fuel need
            { p with todo := x :: xs,
                     waiting := { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } :: p.waiting,
                     cache := (release eng victim.req.sid victim.pos p.relSeq p.cache).1,
                     relSeq := (release eng victim.req.sid victim.pos p.relSeq p.cache).2,
                     preempted := p.preempted + 1 }
          dsimp only at h1 ⊢
          exact ⟨by omega, fun _ => Or.inr (by omega)⟩

/-- `growOrPreempt` that preempts nothing leaves the plan as it is. -/
theorem grow_same (eng : Engine) (fuel need : Nat) (p : Plan)
    (h : (growOrPreempt eng fuel need p).preempted = p.preempted) : growOrPreempt eng fuel need p = p := by
  cases fuel with
  | zero => rfl
  | succ f =>
    revert h
    simp only [growOrPreempt]
    split
    · intro _; rfl
    · split
      · intro _; rfl
      · rename_i rest victim _
        cases rest with
        | nil => intro h; simp at h
        | cons x xs =>
          dsimp only
          intro h
          exfalso
          refine absurd h (Nat.ne_of_gt ?_)
          refine Nat.lt_of_lt_of_le ?_ (grow_pre eng f need _).1
          exact Nat.lt_succ_self _

theorem serveRunning_mono (eng : Engine) (only : Option Bool) : ∀ (fuel : Nat) (p : Plan),
    batchTokens p.done + p.preempted ≤
      batchTokens (serveRunning eng only fuel p).done + (serveRunning eng only fuel p).preempted
  | 0, p => Nat.le_refl _
  | fuel + 1, p => by
    simp only [serveRunning]
    split
    · exact Nat.le_refl _
    · split
      · exact Nat.le_refl _
      · rename_i r later hcons
        split
        · refine Nat.le_trans ?_ (serveRunning_mono eng only fuel _)
          dsimp only
          rw [batchTokens_append]; omega
        · obtain ⟨g1, _⟩ := growOrPreempt_keeps eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          obtain ⟨q1, _⟩ := grow_pre eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          generalize growOrPreempt eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc)
              p = q at g1 q1 ⊢
          split
          · rw [g1]; omega
          · refine Nat.le_trans ?_ (serveRunning_mono eng only fuel _)
            dsimp only
            rw [batchTokens_append, g1]; omega

theorem capChunk_pos (c n : Nat) (h : 0 < n) : 0 < capChunk c n := by
  unfold capChunk; split <;> omega

/-- Serving the residents from a plan with budget left, not self-preempted, one resident with work left
still to consider (and fuel for every resident), schedules a token or preempts. -/
theorem serveRunning_progress (eng : Engine) : ∀ (fuel : Nat) (p : Plan), resCount p.todo < fuel →
    0 < p.budget → p.selfPreempted = false → (∃ r ∈ p.todo, 0 < r.remaining) →
    0 < batchTokens (serveRunning eng none fuel p).done + (serveRunning eng none fuel p).preempted
  | 0, p, hf, _, _, _ => by omega
  | fuel + 1, p, hf, hb, hs, ⟨w, hw, hwr⟩ => by
    simp only [serveRunning]
    split
    · rename_i h
      exfalso
      rcases h with h | h
      · omega
      · rw [hs] at h; exact Bool.false_ne_true h
    · split
      · rename_i h; rw [h] at hw; simp at hw
      · rename_i r later hcons
        rw [hcons] at hf hw
        split
        · rename_i h0
          have hr0 : r.remaining = 0 := by simpa [excluded] using h0
          apply serveRunning_progress eng fuel
          · dsimp only; simp only [resCount] at hf; omega
          · exact hb
          · exact hs
          · rcases List.mem_cons.mp hw with e | e
            · subst e; omega
            · exact ⟨w, e, hwr⟩
        · rename_i h0
          have hr0 : ¬ r.remaining = 0 := fun h => h0 (Or.inl h)
          obtain ⟨g1, _⟩ := growOrPreempt_keeps eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          obtain ⟨q1, q2⟩ := grow_pre eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          have hn : 0 < (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) := by
            split
            · omega
            · exact capChunk_pos _ _ (by omega)
          generalize (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = n at hn g1 q1 q2 ⊢
          generalize growOrPreempt eng (resCount p.todo) (blocksFor eng.blockSize (r.pos + n) - r.alloc) p = q
            at g1 q1 q2 ⊢
          split
          · rename_i hq
            rcases q2 hq with h | h
            · rw [hs] at h; exact absurd h Bool.false_ne_true
            · omega
          · refine Nat.lt_of_lt_of_le ?_ (serveRunning_mono eng none fuel _)
            dsimp only
            rw [batchTokens_append]
            simp only [batchTokens]
            omega

theorem admitHeads_mono (eng : Engine) (only : Option Bool) : ∀ (fuel : Nat) (p : Plan),
    batchTokens p.done + p.preempted ≤
      batchTokens (admitHeads eng only fuel p).done + (admitHeads eng only fuel p).preempted
  | 0, p => Nat.le_refl _
  | fuel + 1, p => by
    simp only [admitHeads]
    split
    · exact Nat.le_refl _
    · split
      · exact Nat.le_refl _
      · split
        · exact Nat.le_refl _
        · refine Nat.le_trans ?_ (admitHeads_mono eng only fuel _)
          dsimp only
          rw [batchTokens_append]; omega

theorem clearSched_mem : ∀ (l : List Res) (r : Res), r ∈ l → { r with sched := 0 } ∈ clearSched l
  | [], _, h => by simp at h
  | x :: xs, r, h => by
    simp only [clearSched, List.mem_cons] at h ⊢
    rcases h with rfl | h
    · exact Or.inl rfl
    · exact Or.inr (clearSched_mem xs r h)

/-- **The plan schedules a token or preempts**: on an engine without `only` (`phased = false`) with a
positive budget, from a machine with a resident that has work left, any queue and chunk. -/
theorem plan_progress (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget) (chunk : Nat)
    (m : Machine) (waiting : List Req) (hw : ∃ r ∈ m.running, 0 < r.remaining) :
    0 < batchTokens (plan eng chunk m waiting).done + (plan eng chunk m waiting).preempted := by
  unfold plan
  have hn : phaseOf eng m.running = none := by simp [phaseOf, hp]
  dsimp only
  rw [hn]
  have h1 := serveRunning_progress eng (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩
    (by dsimp only; rw [resCount_clearSched]; omega) hb rfl
    (by obtain ⟨r, hr, h⟩ := hw; exact ⟨{ r with sched := 0 }, clearSched_mem _ r hr, h⟩)
  generalize serveRunning eng none (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at h1 ⊢
  have h2 : 0 < batchTokens (appendRes p1.done p1.todo) + p1.preempted := by
    rw [batchTokens_append]; omega
  split
  · exact Nat.lt_of_lt_of_le h2
      (admitHeads_mono eng none (reqCount p1.waiting + 1) { p1 with done := appendRes p1.done p1.todo, todo := [] })
  · exact h2

/-! ## The step -/

theorem appendRecord_eq : ∀ (l : List Record) (r : Record), appendRecord l r = l ++ [r]
  | [], _ => rfl
  | x :: xs, r => by simp only [appendRecord, appendRecord_eq xs r, List.cons_append]

theorem appendRecord_ne (l : List Record) (r : Record) : appendRecord l r ≠ l := by
  intro h
  have := congrArg List.length h
  rw [appendRecord_eq, List.length_append] at this
  simp at this

theorem appendRecord_inj (l : List Record) (a b : Record) (h : appendRecord l a = appendRecord l b) :
    a = b := by
  rw [appendRecord_eq, appendRecord_eq] at h
  simpa using h

/-- **A step from a machine with work left runs an iteration at the clock**: on an engine without `only`
(`phased = false`) with a positive budget, any sessions. -/
theorem step_progress (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget) (ss : List Session)
    (m : Machine) (hw : ∃ r ∈ m.running, 0 < r.remaining) :
    ∃ rec : Record, (step eng ss m).records = appendRecord m.records rec ∧ rec.start = m.now := by
  have hne : noRes m.running = false := by
    obtain ⟨r, hr, _⟩ := hw
    cases h : m.running with
    | nil => rw [h] at hr; simp at hr
    | cons _ _ => rfl
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  dsimp only
  generalize submit eng ss due m.waiting = waiting
  split
  · rename_i h; rw [hne] at h; simp at h
  · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    have hpr := plan_progress eng hp hb chunk m waiting hw
    generalize plan eng chunk m waiting = P at hpr ⊢
    split
    · rename_i h; omega
    · dsimp only
      rw [apply_records]
      exact ⟨_, rfl, rfl⟩

/-- What `apply` leaves of a resident scheduled below its demand still has work left. -/
theorem stepRes_left (now c : Nat) (r : Res) (h : r.sched < demandOf c [r]) :
    ∃ y ∈ stepRes now r, 0 < y.remaining := by
  simp only [demandOf, Nat.add_zero] at h
  have hrem : r.remaining ≠ 0 := by intro e; rw [if_pos e] at h; omega
  rw [if_neg hrem] at h
  unfold stepRes
  split
  · exact ⟨r, List.mem_singleton_self _, by omega⟩
  · rename_i h0
    cases hd : r.decoding
    · rw [hd] at h
      simp only [Bool.false_eq_true, if_false] at h
      have := capChunk_le c r.remaining
      have hz : ¬ r.remaining - r.sched = 0 := by omega
      simp only [hz, Bool.false_eq_true, false_or, false_and, if_false]
      exact ⟨_, List.mem_singleton_self _, by dsimp only; omega⟩
    · rw [hd] at h
      simp only [if_true] at h
      omega

theorem stepAll_left (now c : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.sched ≤ demandOf c [r]) →
    batchTokens L < demandOf c L → ∃ y ∈ stepAll now L, 0 < y.remaining
  | [], _, h => by simp [batchTokens, demandOf] at h
  | r :: rs, hle, h => by
    rw [stepAll_cons]
    rw [demandOf_cons] at h
    simp only [batchTokens] at h
    by_cases hr : r.sched < demandOf c [r]
    · obtain ⟨y, hy, hy0⟩ := stepRes_left now c r hr
      exact ⟨y, List.mem_append_left _ hy, hy0⟩
    · obtain ⟨y, hy, hy0⟩ := stepAll_left now c rs (fun x hx => hle x (List.mem_cons_of_mem _ hx)) (by omega)
      exact ⟨y, List.mem_append_right _ hy, hy0⟩

/-- **After an iteration serving less than its demand, a resident has work left**: any engine, sessions
and machine; `rec` the record the step adds. -/
theorem step_left (eng : Engine) (ss : List Session) (m : Machine) (rec : Record)
    (hr : (step eng ss m).records = appendRecord m.records rec) (hlt : rec.tokens < rec.demand) :
    ∃ y ∈ (step eng ss m).running, 0 < y.remaining := by
  revert hr
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  dsimp only
  generalize submit eng ss due m.waiting = waiting
  split
  · intro hr
    exfalso
    cases later with
    | nil => exact appendRecord_ne _ _ hr.symm
    | cons q qs => exact appendRecord_ne _ _ hr.symm
  · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    have hle := plan_sched_le eng chunk m waiting
    generalize plan eng chunk m waiting = P at hle ⊢
    split
    · intro hr
      exfalso
      cases later with
      | nil => exact appendRecord_ne _ _ hr.symm
      | cons q qs => exact appendRecord_ne _ _ hr.symm
    · intro hr
      dsimp only at hr ⊢
      rw [apply_records] at hr
      have e := appendRecord_inj _ _ _ hr
      subst e
      dsimp only at hlt
      rw [apply_running, List.nil_append]
      exact stepAll_left m.now chunk P.done hle hlt

/-! ## The run -/

/-- Consecutive records: each serving less than its demand followed by the next one step later. -/
def Later : List Record → Prop
  | a :: b :: rest => (a.tokens < a.demand → b.start = a.start + 1) ∧ Later (b :: rest)
  | _ => True

theorem later_concat : ∀ (l : List Record) (r : Record), Later l →
    (∀ a ∈ l.getLast?, a.tokens < a.demand → r.start = a.start + 1) → Later (l ++ [r])
  | [], r, _, _ => by simp [Later]
  | [a], r, _, h => by
    simp only [List.cons_append, List.nil_append, Later, and_true]
    exact h a rfl
  | a :: b :: rest, r, hl, h => by
    simp only [Later] at hl
    simp only [List.cons_append, Later]
    refine ⟨hl.1, ?_⟩
    have := later_concat (b :: rest) r hl.2 (fun x hx => h x (by rw [List.getLast?_cons_cons]; exact hx))
    simpa using this

theorem later_next : ∀ (l : List Record), Later l →
    ∀ (i : Nat) (hi : i + 1 < l.length), l[i].tokens < l[i].demand → l[i + 1].start = l[i].start + 1
  | [], _, _, hi, _ => by simp at hi
  | [_], _, _, hi, _ => by simp at hi
  | a :: b :: rest, h, 0, _, hlt => by
    simp only [Later] at h
    simp only [List.getElem_cons_succ, List.getElem_cons_zero] at hlt ⊢
    exact h.1 hlt
  | a :: b :: rest, h, i + 1, hi, hlt => by
    simp only [Later] at h
    simp only [List.getElem_cons_succ] at hlt ⊢
    exact later_next (b :: rest) h.2 i (by simp at hi ⊢; omega) hlt

/-- The invariant: the records `Later`, and when the last one served less than its demand, the clock one
step after its start and a resident with work left. -/
def LInv (m : Machine) : Prop :=
  Later m.records ∧ ∀ a ∈ m.records.getLast?, a.tokens < a.demand →
    m.now = a.start + 1 ∧ ∃ y ∈ m.running, 0 < y.remaining

theorem step_linv (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget) (ss : List Session)
    (m : Machine) (h : LInv m) : LInv (step eng ss m) := by
  obtain ⟨hl, hlast⟩ := h
  rcases step_cases eng ss m with ⟨hrec, _, _⟩ | ⟨rec, hrec, hst, _, hnow, _⟩
  · refine ⟨by rw [hrec]; exact hl, fun a ha hlt => ?_⟩
    rw [hrec] at ha
    obtain ⟨_, hw⟩ := hlast a ha hlt
    obtain ⟨rec, hr, _⟩ := step_progress eng hp hb ss m hw
    exact absurd (hr.symm.trans hrec) (appendRecord_ne _ _)
  · refine ⟨?_, fun a ha hlt => ?_⟩
    · rw [hrec, appendRecord_eq]
      exact later_concat _ _ hl (fun a ha hlt => by rw [hst]; exact (hlast a ha hlt).1)
    · rw [hrec, appendRecord_eq] at ha
      simp only [List.getLast?_concat, Option.mem_def, Option.some.injEq] at ha
      subst ha
      exact ⟨by rw [hnow, hst], step_left eng ss m _ hrec hlt⟩

theorem run_linv (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget) (ss : List Session) :
    ∀ (fuel : Nat) (m : Machine), LInv m → LInv (run eng ss fuel m)
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_linv eng hp hb ss fuel _ (step_linv eng hp hb ss m h)

theorem init_linv (ss : List Session) : LInv (init ss) :=
  ⟨by simp [init, Later], fun a ha => by simp [init] at ha⟩

end BacklogBudget

/-- **A full iteration with work left is followed one step later**: on every run from `init` of every
engine without `only` (`phased = false`) with a positive budget (any request cap, KV pool, chunk cap,
prefix cache, preemption included), with every workload and fuel, a record serving less than its demand
(`tokens < demand`) that is not the last is followed by the next record at `start + 1`. -/
theorem BacklogBudget.step_later (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget)
    (ss : List Session) (fuel : Nat) :
    ∀ (i : Nat) (hi : i + 1 < (run eng ss fuel (init ss)).records.length),
      (run eng ss fuel (init ss)).records[i].tokens < (run eng ss fuel (init ss)).records[i].demand →
      (run eng ss fuel (init ss)).records[i + 1].start = (run eng ss fuel (init ss)).records[i].start + 1 :=
  BacklogBudget.later_next _
    (BacklogBudget.run_linv eng hp hb ss fuel (init ss) (BacklogBudget.init_linv ss)).1

/-- **`hstep` from the resets of the whole-demand iterations**: on every run from `init` of an engine
without `only` with a positive budget, if every record but the last that serves at least its demand or
whose demand is below the budget is a reset (`arrived · W ≤ served + tokens + C`), then every record but
the last is a reset or serves the full budget and is followed one step later (`backlog_of_resets`'s
`hstep`; from `step_later` and `Serq.full_or_short`). -/
theorem BacklogBudget.hstep_of_resets (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget)
    (ss : List Session) (fuel W C : Nat)
    (hreset : ∀ (i : Nat) (hi : i + 1 < (run eng ss fuel (init ss)).records.length),
      ((run eng ss fuel (init ss)).records[i].demand ≤ (run eng ss fuel (init ss)).records[i].tokens ∨
        (run eng ss fuel (init ss)).records[i].demand < eng.budget) →
      (run eng ss fuel (init ss)).records[i].arrived * W ≤
        (run eng ss fuel (init ss)).records[i].served + (run eng ss fuel (init ss)).records[i].tokens + C) :
    ∀ (i : Nat) (hi : i + 1 < (run eng ss fuel (init ss)).records.length),
      (run eng ss fuel (init ss)).records[i].arrived * W ≤
          (run eng ss fuel (init ss)).records[i].served + (run eng ss fuel (init ss)).records[i].tokens + C ∨
        ((run eng ss fuel (init ss)).records[i].tokens = eng.budget ∧
          (run eng ss fuel (init ss)).records[i + 1].start = (run eng ss fuel (init ss)).records[i].start + 1) := by
  intro i hi
  by_cases hlt : (run eng ss fuel (init ss)).records[i].tokens < (run eng ss fuel (init ss)).records[i].demand
  · have hmem := List.getElem_mem (show i < (run eng ss fuel (init ss)).records.length by omega)
    rcases full_or_short eng hp ss fuel _ hmem with hf | hs
    · exact Or.inr ⟨hf, BacklogBudget.step_later eng hp hb ss fuel i hi hlt⟩
    · exact Or.inl (hreset i hi (Or.inr hs))
  · exact Or.inl (hreset i hi (Or.inl (by omega)))

/-- **The bounded backlog from the resets of the whole-demand iterations**: `backlog_of_resets_run` with
`hstep` reduced by `hstep_of_resets`, for an engine without `only` with a positive budget. What remains:
the progress hypothesis `hp` and the resets `hreset`. -/
theorem BacklogBudget.backlog_of_whole_resets (eng : Engine) (hph : eng.phased = false) (hb : 0 < eng.budget)
    (ss : List Session) (fuel g P D x W C : Nat)
    (hg : 0 < g) (hw : GappedDecode g P D x ss) (hW : W ≤ eng.budget * g)
    (hz : BacklogBudget.arrivedBy 0 ss = 0)
    (hp : ∀ k, (run eng ss k (init ss)).settled eng = false →
      countFirst (duePending (run eng ss k (init ss)).now (run eng ss k (init ss)).pending).1 ≠ 0 →
        (step eng ss (run eng ss k (init ss))).records ≠ (run eng ss k (init ss)).records)
    (hreset : ∀ (i : Nat) (hi : i + 1 < (run eng ss fuel (init ss)).records.length),
      ((run eng ss fuel (init ss)).records[i].demand ≤ (run eng ss fuel (init ss)).records[i].tokens ∨
        (run eng ss fuel (init ss)).records[i].demand < eng.budget) →
      (run eng ss fuel (init ss)).records[i].arrived * W ≤
        (run eng ss fuel (init ss)).records[i].served + (run eng ss fuel (init ss)).records[i].tokens + C) :
    ∀ (i : Nat) (hi : i < (run eng ss fuel (init ss)).records.length),
      (run eng ss fuel (init ss)).records[i].arrived * W ≤ (run eng ss fuel (init ss)).records[i].served + W + C :=
  BacklogBudget.backlog_of_resets_run eng ss fuel g P D x W C hg hw hW hz hp
    (BacklogBudget.hstep_of_resets eng hph hb ss fuel W C hreset)

end Serq
