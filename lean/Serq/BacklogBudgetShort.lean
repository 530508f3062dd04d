module

public import Serq.Full
public import Serq.BacklogManyStep

/-! # A short iteration serves every resident its whole demand (issue 14, result 2, case (b))

`Serq.full_or_short` (`lean/Serq/Full.lean`) says an iteration of the mixed schedule serves its whole
budget or its residents' summed demand is below it. This module proves the pointwise form the budget-cut
case of the bounded backlog needs (the engine's side (i) of `Serq.BacklogBudget.conserve`'s resets):

* every resident of every plan is scheduled at most its own demand (`demandOf c [r]`: one token for a
  decode, its remainder up to the chunk for a prefill, nothing when nothing is left;
  `Serq.BacklogBudget.plan_sched_le`);
* so when an iteration of an engine without `only` leaves budget (`tokens < budget`), every resident got
  exactly its demand (`Serq.BacklogBudget.plan_short`);
* so, with no chunk cap, after a short iteration every resident left decodes or has nothing left:
  every prefill took its whole remainder (`Serq.BacklogBudget.short_decodes`, one `step` of any engine
  with `phased = false`, `chunk = 0`, any sessions and machine).

What stays open for the reset bound (`arrived · W ≤ served + tokens + C`, see `docs/lean.md`, issue 14's
row 2): each decode's work left at most `D - 1`, at most `K` residents, the queue empty after a short
iteration (the request cap and the KV pool never binding), and the arrivals' count per record.
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open Backlog BacklogMany

/-- Every resident considered is scheduled at most its own demand; those left have nothing scheduled. -/
def SchedOk (c : Nat) (p : Plan) : Prop :=
  p.chunk = c ∧ (∀ r ∈ p.done, r.sched ≤ demandOf c [r]) ∧ batchTokens p.todo = 0

theorem capChunk_min_le (c a b : Nat) : capChunk c (min a b) ≤ capChunk c a := by
  unfold capChunk; split <;> omega

theorem batchTokens_zero : ∀ (l : List Res), batchTokens l = 0 → ∀ r ∈ l, r.sched = 0
  | [], _, r, hr => by simp at hr
  | x :: xs, h, r, hr => by
    simp only [batchTokens] at h
    rcases List.mem_cons.mp hr with e | e
    · subst e; omega
    · exact batchTokens_zero xs (by omega) r e

theorem batchTokens_dropHead : ∀ (l : List Res), batchTokens (dropHead l) ≤ batchTokens l
  | [] => Nat.le_refl _
  | x :: xs => by simp only [dropHead, batchTokens]; omega

theorem mem_appendRes_one (a : List Res) (y r : Res) (h : r ∈ appendRes a [y]) : r ∈ a ∨ r = y := by
  rw [appendRes_eq'] at h
  simpa using h

theorem serveRunning_sched (eng : Engine) (only : Option Bool) (c : Nat) : ∀ (fuel : Nat) (p : Plan),
    SchedOk c p → SchedOk c (serveRunning eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, hinv => by
    obtain ⟨hc, hle, htodo⟩ := hinv
    subst hc
    simp only [serveRunning]
    split
    · exact ⟨rfl, hle, htodo⟩
    · split
      · exact ⟨rfl, hle, htodo⟩
      · rename_i r later hcons
        have htodo0 := htodo
        simp only [hcons, batchTokens] at htodo
        have hr0 : r.sched = 0 := by omega
        have hl0 : batchTokens later = 0 := by omega
        split
        · apply serveRunning_sched eng only p.chunk fuel
          refine ⟨rfl, ?_, hl0⟩
          intro x hx
          rcases mem_appendRes_one _ _ _ hx with e | e
          · exact hle x e
          · subst e; rw [hr0]; exact Nat.zero_le _
        · rename_i hrem
          have hrem0 : ¬ r.remaining = 0 := fun h => hrem (Or.inl h)
          obtain ⟨g1, g2, g3, g4, _, _, _⟩ := growOrPreempt_keeps eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc) p
          generalize growOrPreempt eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc)
              p = q at g1 g2 g3 g4 ⊢
          split
          · refine ⟨g3, by rw [g1]; exact hle, ?_⟩
            omega
          · apply serveRunning_sched eng only p.chunk fuel
            refine ⟨g3, ?_, ?_⟩
            · intro x hx
              rw [g1, g2] at hx
              rcases mem_appendRes_one _ _ _ hx with e | e
              · exact hle x e
              · subst e
                simp only [demandOf, hrem0, if_false, Nat.add_zero]
                split
                · simp_all
                · exact capChunk_min_le _ _ _
            · show batchTokens (dropHead q.todo) = 0
              have := batchTokens_dropHead q.todo
              omega

theorem admitHeads_sched (eng : Engine) (only : Option Bool) (c : Nat) : ∀ (fuel : Nat) (p : Plan),
    SchedOk c p → SchedOk c (admitHeads eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, hinv => by
    obtain ⟨hc, hle, htodo⟩ := hinv
    subst hc
    simp only [admitHeads]
    split
    · exact ⟨rfl, hle, htodo⟩
    · split
      · exact ⟨rfl, hle, htodo⟩
      · rename_i rq rest hw
        split
        · exact ⟨rfl, hle, htodo⟩
        · apply admitHeads_sched eng only p.chunk fuel
          generalize max rq.kept (rq.computed + 1) - min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) = left
          refine ⟨rfl, ?_, htodo⟩
          intro x hx
          rcases mem_appendRes_one _ _ _ hx with e | e
          · exact hle x e
          · subst e
            simp only [demandOf, Bool.false_eq_true, if_false, Nat.add_zero]
            rcases Nat.eq_zero_or_pos left with h0 | h0
            · subst h0
              have : capChunk p.chunk 0 = 0 := by unfold capChunk; split <;> simp
              split <;> simp [this]
            · have := capChunk_min_le p.chunk left p.budget
              split <;> simp [Nat.ne_of_gt h0] <;> omega

/-- **Every resident of every plan is scheduled at most its own demand**, `demandOf c [r]`: one token
for a decode, its remainder up to the chunk for a prefill, nothing when nothing is left. Any engine,
machine, queue and chunk. -/
theorem plan_sched_le (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req) :
    ∀ r ∈ (plan eng chunk m waiting).done, r.sched ≤ demandOf chunk [r] := by
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only
  have h0 : SchedOk chunk ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ :=
    ⟨rfl, by simp, batchTokens_clearSched _⟩
  obtain ⟨hc, hle, htodo⟩ := serveRunning_sched eng only chunk (resCount m.running + 1) _ h0
  generalize serveRunning eng only (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at hc hle htodo ⊢
  have h1 : SchedOk chunk { p1 with done := appendRes p1.done p1.todo, todo := [] } := by
    refine ⟨hc, ?_, rfl⟩
    intro x hx
    simp only [appendRes_eq', List.mem_append] at hx
    rcases hx with e | e
    · exact hle x e
    · rw [batchTokens_zero _ htodo x e]; exact Nat.zero_le _
  split
  · exact (admitHeads_sched eng only chunk _ _ h1).2.1
  · exact h1.2.1

theorem demandOf_cons (c : Nat) (x : Res) (xs : List Res) :
    demandOf c (x :: xs) = demandOf c [x] + demandOf c xs := by
  simp [demandOf]

theorem batchTokens_le_demand (c : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.sched ≤ demandOf c [r]) →
    batchTokens l ≤ demandOf c l
  | [], _ => by simp [batchTokens, demandOf]
  | x :: xs, h => by
    have hx := h x List.mem_cons_self
    have := batchTokens_le_demand c xs (fun y hy => h y (List.mem_cons_of_mem _ hy))
    rw [demandOf_cons]
    simp only [batchTokens]
    omega

/-- A sum of shares each at most its demand, equal to the summed demand: every share is its demand. -/
theorem sched_eq_of_sum (c : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.sched ≤ demandOf c [r]) →
    batchTokens l = demandOf c l → ∀ r ∈ l, r.sched = demandOf c [r]
  | [], _, _, r, hr => by simp at hr
  | x :: xs, hle, hsum, r, hr => by
    have hx := hle x List.mem_cons_self
    have hxs : ∀ y ∈ xs, y.sched ≤ demandOf c [y] := fun y hy => hle y (List.mem_cons_of_mem _ hy)
    have hsplit := demandOf_cons c x xs
    have hxs_le := batchTokens_le_demand c xs hxs
    simp only [batchTokens] at hsum
    rw [hsplit] at hsum
    rcases List.mem_cons.mp hr with e | e
    · subst e; omega
    · exact sched_eq_of_sum c xs hxs (by omega) r e

/-- **A short iteration serves every resident its whole demand**: on an engine without `only`
(`phased = false`), when the plan's batch is below the budget, every resident of the batch is scheduled
exactly `demandOf chunk [r]` (the pointwise form of `Serq.plan_full`). Any machine, queue and chunk. -/
theorem plan_short (eng : Engine) (hp : eng.phased = false) (chunk : Nat) (m : Machine) (waiting : List Req)
    (hshort : batchTokens (plan eng chunk m waiting).done < eng.budget) :
    ∀ r ∈ (plan eng chunk m waiting).done, r.sched = demandOf chunk [r] := by
  obtain ⟨_, htok, _, hdem⟩ := plan_inv eng chunk m waiting
  have hn : phaseOf eng m.running = none := by simp [phaseOf, hp]
  have hsum := hdem hn (by omega)
  exact sched_eq_of_sum chunk _ (plan_sched_le eng chunk m waiting) hsum

/-- What `apply` leaves of a resident that took its whole demand with no chunk cap: a decode, or a
resident with nothing left (it took no token and had none to take). -/
theorem stepRes_whole (now : Nat) (r : Res) (h : r.sched = demandOf 0 [r]) :
    ∀ y ∈ stepRes now r, y.decoding = true ∨ y.remaining = 0 := by
  intro y hy
  simp only [demandOf, capChunk_zero, Nat.add_zero] at h
  unfold stepRes at hy
  by_cases h0 : r.sched = 0
  · rw [if_pos h0] at hy
    simp only [List.mem_singleton] at hy
    rw [hy]
    right
    by_cases hr : r.remaining = 0
    · exact hr
    · rw [if_neg hr] at h; split at h <;> omega
  · rw [if_neg h0] at hy
    dsimp only at hy
    simp only [List.mem_ite_nil_left, List.mem_singleton] at hy
    obtain ⟨_, rfl⟩ := hy
    left
    by_cases hd : r.decoding = true
    · simp [hd]
    · have hr : r.remaining ≠ 0 := by intro hr; rw [if_pos hr] at h; exact h0 h
      rw [if_neg hr, if_neg hd] at h
      simp [h]

theorem stepAll_whole (now : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.sched = demandOf 0 [r]) →
    ∀ y ∈ stepAll now l, y.decoding = true ∨ y.remaining = 0
  | [], _, y, hy => by simp [stepAll] at hy
  | r :: rs, h, y, hy => by
    rw [stepAll_cons, List.mem_append] at hy
    rcases hy with e | e
    · exact stepRes_whole now r (h r List.mem_cons_self) y e
    · exact stepAll_whole now rs (fun x hx => h x (List.mem_cons_of_mem _ hx)) y e

end BacklogBudget

/-- **After a short iteration every prefill is done** (issue 14, result 2, case (b): the engine's side
of a reset). One step of an engine without `only` (`phased = false`) and without a chunk cap
(`chunk = 0`), from any machine, with any sessions: if the step runs an iteration (its record `x` is
new) that is short (`x.tokens < budget`), then every resident after it decodes or has nothing left —
every prefill in the batch took its whole remainder (`Serq.BacklogBudget.plan_short`). -/
theorem BacklogBudget.short_decodes (eng : Engine) (hp : eng.phased = false) (hc : eng.chunk = 0)
    (ss : List Session) (m : Machine) (x : Record) (hx : x ∈ (step eng ss m).records) (hnew : x ∉ m.records)
    (hshort : x.tokens < eng.budget) :
    ∀ y ∈ (step eng ss m).running, y.decoding = true ∨ y.remaining = 0 := by
  have hch : ∀ n, (if eng.chunk > 0 ∧ n > 1 then eng.chunk else 0) = 0 := by
    intro n; simp [hc]
  revert hx
  unfold step
  cases hd : duePending m.now m.pending with
  | mk due later =>
    dsimp only
    simp only [hch]
    repeat' split
    all_goals intro hx
    all_goals first
      | exact absurd hx hnew
      | skip
    rename_i hbusy hrun
    intro y hy
    simp only [apply_records] at hx
    rcases (mem_appendRecord _ _ _).mp hx with h | h
    · exact absurd h hnew
    · subst h
      simp only [BacklogMany.apply_running, List.nil_append] at hy
      exact stepAll_whole m.now _ (plan_short eng hp 0 m _ hshort) y hy

end Serq
