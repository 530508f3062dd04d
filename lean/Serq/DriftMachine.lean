module

public import Serq.BacklogMany
public import Serq.Drift

/-! # The drift chain on the machine (issue 14, result 7, second part): one iteration's work

The backlog chain of `Serq.Drift` (`nextBacklog`: `r' = r + k·W − B`, stopping at 0) is the
token-level model of a work-conserving budget server. Here its step is computed on `Serq.Exec`'s
machine, for requests whose work is their prompt (at most one output token: the prefill samples it,
no decode follows), with no phase separation (`phased = false`), no chunk cap (`chunk = 0`) and no
prefix cache (`caching = false`):

* `stepAll_prefills`: what `apply` leaves of a batch of prefills is their work left less the tokens
  the batch scheduled (`sumRem (stepAll now L) + batchTokens L = sumRem L`), every survivor a prefill;
* `serve_prefills`: vLLM's `advance running` serves the residents, all prefills, in admission order,
  each `min(remaining, budget left)`, within the KV pool: the iteration's residents take
  `min(budget, Σ remaining)` tokens;

Order on the machine: the turns due at the step's start are submitted (at the queue's back) before
the iteration is planned, so an iteration serves the work left plus that of the arrivals due at its
start, as the chain's step `r + k·W − B` does.
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
        x.pos + x.remaining = r.pos + r.remaining := by
  unfold stepRes
  by_cases h0 : r.sched = 0
  · simp only [h0, if_true, sumRem, List.mem_singleton]
    refine ⟨by omega, ?_⟩
    intro x hx
    subst hx
    exact ⟨hd, h0, rfl, rfl, rfl⟩
  · simp only [h0, if_false, hd, Bool.false_eq_true, false_or]
    by_cases h1 : r.remaining - r.sched = 0
    · have h2 : r.req.out - 1 = 0 := by omega
      simp only [h1, if_true, h2, Nat.zero_sub, and_self, sumRem, List.not_mem_nil]
      exact ⟨by omega, fun _ h => h.elim⟩
    · simp only [h1, if_false, and_false, sumRem, List.mem_singleton]
      refine ⟨by omega, ?_⟩
      intro x hx
      subst hx
      refine ⟨rfl, rfl, ?_, rfl, by dsimp only; omega⟩
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

end DriftMachine

end Serq
