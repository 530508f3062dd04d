module

public import Papers.Claims.Svf
public import Serq.KernelSelect
public import Serq.SptShortestFirst

/-! # SVF (`svf.sq`) beyond its bundled run: issue 14, result 5

`ClaimsProved.lean` proves `svf.sq`'s queueing bound on the program's bundled run (six sessions), decided
by the kernel. The bound for every batch splits in three:

* the admission: for every number of sessions and every machine (so at every admission of every run,
  `admitWaiting` admitting `select`'s hold), the request pool's `queue by (volume)` offers a waiting
  request of least volume (`svf_admits_least_volume`, from `Serq.Kernel.select_least`);
* the abstract server: one server from time 0, never idle, taking a least waiting size each time, has
  total completion `prefix_total` of the sizes, whatever its ties, and so meets the claim's bound with
  `c = 2` and is optimal among the feasible schedules of the same sizes (`Serq.shortestFirst_total`,
  `Serq.shortestFirst_queueing`, `Serq.shortestFirst_optimal`, lean/Serq/SptShortestFirst.lean);
* between them, open: that the kernel's run of this program is that server (one request at a time, no
  idle iteration from 0, a request's response the sum of the volumes served before it and its own).
-/

@[expose] public section

namespace Papers

open Serq

/-- **SVF admits a least volume, for every batch.** For every number of sessions `n` and every machine
`m`: when the `reqs` pool's queue is `w :: ws` and its head `w` is not a hold a preemption put back
(the program preempts nothing), the hold `select` offers (the one `admit waiting` admits) is in the queue
and its thread's `volume` (attribute 6) is at most the volume of every waiting hold's thread. Every
admission of every run `runProgram { program with sessions := n } fuel` is such a `select`. -/
theorem svf_admits_least_volume (n : Nat) (m : Kernel.Machine) (w : Kernel.Waiter) (ws : List Kernel.Waiter) (hhead : w.head = false) :
    Kernel.select { Papers.Claims.Svf.program with sessions := n } m 0 (w :: ws) < ws.length + 1 ∧
    ∀ x ∈ w :: ws,
      Kernel.getAt (Kernel.getThread m.threads
          (Kernel.getWaiter (w :: ws) (Kernel.select { Papers.Claims.Svf.program with sessions := n } m 0 (w :: ws))).thread).attrs 6 ≤
        Kernel.getAt (Kernel.getThread m.threads x.thread).attrs 6 := by
  have hk : Kernel.getKeys { Papers.Claims.Svf.program with sessions := n }.queueKeys 0 = [.attr 6] := rfl
  have h := Kernel.select_least { Papers.Claims.Svf.program with sessions := n } m 0 w ws (by rw [hk]; simp) hhead
  refine ⟨h.1, fun x hx => ?_⟩
  have hx := h.2 x hx
  rw [hk] at hx
  exact Kernel.keysBefore_single _ _ hx

/-- SVF's bound for every batch of volumes, on the abstract server: served shortest first from time 0
without idling (`ShortestFirst vols order`, ties in any order), the completion times total
`prefix_total(vols)` and the claim's inequality `2 · (Σ completion − Σ vol) ≤ 2 · (prefix_total(vol) − Σ vol)`
holds, and no feasible one-at-a-time schedule of the same volumes has a smaller total completion. -/
theorem svf_shortest_first_bound (vols order : List Nat) (h : ShortestFirst vols order) :
    sumNat (completionsFrom 0 order) = prefixTotal vols ∧
    (2 : Int) * (((sumNat (completionsFrom 0 order) : Nat) : Int) - ((sumNat vols : Nat) : Int)) ≤
      (2 : Int) * (((prefixTotal vols : Nat) : Int) - ((sumNat vols : Nat) : Int)) ∧
    ∀ jobs : List (Nat × Nat), (sizes jobs).Perm vols → (∀ t, sumSizesDoneBy t jobs ≤ 1 * t) →
      sumNat (completionsFrom 0 order) ≤ sumCompletions jobs :=
  ⟨shortestFirst_total h, shortestFirst_queueing h, fun jobs hs rate => shortestFirst_optimal h jobs hs rate⟩

end Papers
