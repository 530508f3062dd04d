module

public import Serq.BacklogBudgetShort
public import Serq.BacklogChunkStep

/-! # An iteration serves its tokens out of the work left (issue 14, result 2, case (b))

The work conservation the bounded backlog needs (`arrived · W = served + work left`) has two halves: an
admission adds a request's work, and an iteration takes its tokens out of the residents' work left. This
module proves the second half for every plan's batch: every resident of every plan is scheduled at most
its remainder (`Serq.BacklogBudget.plan_sched_rem`, from `plan_sched_le`), and what `apply` leaves of a
batch whose prefills each turn into `D - 1` decode tokens has `workLeft D` (`Serq.BacklogDecode.workLeft`:
a prefill's remainder and its `D - 1` decode tokens, a decode's remainder) less by exactly the batch's
tokens (`Serq.BacklogBudget.stepAll_work`).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open BacklogMany BacklogDecode

theorem sched_rem_of_le (c : Nat) (r : Res) (h : r.sched ≤ demandOf c [r]) : r.sched ≤ r.remaining := by
  simp only [demandOf, Nat.add_zero] at h
  split at h
  · omega
  · split at h
    · omega
    · have := capChunk_le c r.remaining; omega

/-- **Every resident of every plan is scheduled at most its remainder** (any engine, machine, queue and
chunk, preemption included). -/
theorem plan_sched_rem (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req) :
    ∀ r ∈ (plan eng chunk m waiting).done, r.sched ≤ r.remaining :=
  fun r hr => sched_rem_of_le chunk r (plan_sched_le eng chunk m waiting r hr)

/-- What `apply` leaves of one resident has its work left less by its tokens. -/
theorem stepRes_work (now D : Nat) (r : Res) (h1 : r.sched ≤ r.remaining)
    (h2 : r.decoding = false → r.req.out - 1 - (r.known - r.req.prompt) = D - 1) :
    workLeft D (stepRes now r) + r.sched = workLeft D [r] := by
  unfold stepRes
  by_cases h0 : r.sched = 0
  · rw [if_pos h0, h0, Nat.add_zero]
  · rw [if_neg h0]
    dsimp only
    cases hd : r.decoding
    · have e := h2 hd
      by_cases hz : r.remaining - r.sched = 0
      · simp only [hz, Bool.false_eq_true, false_or, true_and, if_true, if_false, e]
        split
        · simp only [workLeft, hd, Bool.false_eq_true, if_false]; omega
        · simp only [workLeft, hd, Bool.false_eq_true, if_false]; simp; omega
      · simp only [hd, hz, Bool.false_eq_true, false_or, false_and, if_false, workLeft]
        simp
        omega
    · simp only [true_or, true_and, if_true]
      split
      · simp only [workLeft, hd, if_true]; omega
      · simp only [workLeft, hd, if_true]; simp; omega

/-- **An iteration serves its tokens out of the work left**: for any batch whose residents are each
scheduled at most their remainder and whose prefills each have `D - 1` decode tokens to come,
`workLeft D` of what `apply` leaves plus the batch's tokens is the batch's `workLeft D`. -/
theorem stepAll_work (now D : Nat) : ∀ (L : List Res), (∀ r ∈ L, r.sched ≤ r.remaining ∧
    (r.decoding = false → r.req.out - 1 - (r.known - r.req.prompt) = D - 1)) →
    workLeft D (stepAll now L) + batchTokens L = workLeft D L
  | [], _ => by simp [stepAll, workLeft, batchTokens]
  | r :: rs, h => by
    obtain ⟨h1, h2⟩ := h r List.mem_cons_self
    have ih := stepAll_work now D rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    have hr := stepRes_work now D r h1 h2
    rw [stepAll_cons, BacklogChunk.workLeft_app]
    have e : workLeft D (r :: rs) = workLeft D [r] + workLeft D rs := by
      simp only [workLeft]; omega
    simp only [batchTokens]
    omega

end BacklogBudget

end Serq
