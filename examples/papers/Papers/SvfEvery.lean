module

public import Papers.Claims.Svf
public import Serq.KernelSelectRun
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
* between them: that the kernel's run of this program is that server (one request at a time, no idle
  iteration from 0, a request's response the sum of the volumes served before it and its own).
  `svf_bound_of_server` states the claim for every `n` and fuel from that one hypothesis (the run's
  responses are, in some order, a shortest-first service's completions); `Papers.SvfRun` proves it for
  every batch (`svf_queueing_every`). (Batches of 0 to 16 sessions were decided here, run by run, until
  the general proof made it ~80 s of CI's build for nothing more.)
-/

@[expose] public section

namespace Papers

open Serq

/-- **SVF admits a least volume, in every run.** For every number of sessions `n` and every machine
`m` whose waiting holds are `HeadFree` (none is a preempted hold put back at the head: every machine of
every run of this program, which preempts nothing, `svf_headFree`): when the `reqs` pool's queue is
`w :: ws`, the hold `select` offers (the one `admit waiting` admits) is in the queue and its thread's
`volume` (attribute 6) is at most the volume of every waiting hold's thread. -/
theorem svf_admits_least_volume (n : Nat) (m : Kernel.Machine) (hm : Kernel.HeadFree m.pools)
    (w : Kernel.Waiter) (ws : List Kernel.Waiter) (hq : (Kernel.getPool m.pools 0).queue = w :: ws) :
    Kernel.select { Papers.Claims.Svf.program with sessions := n } m 0 (w :: ws) < ws.length + 1 ∧
    ∀ x ∈ w :: ws,
      Kernel.getAt (Kernel.getThread m.threads
          (Kernel.getWaiter (w :: ws) (Kernel.select { Papers.Claims.Svf.program with sessions := n } m 0 (w :: ws))).thread).attrs 6 ≤
        Kernel.getAt (Kernel.getThread m.threads x.thread).attrs 6 := by
  have hk : Kernel.getKeys { Papers.Claims.Svf.program with sessions := n }.queueKeys 0 = [.attr 6] := rfl
  have h := Kernel.select_least_of_headFree { Papers.Claims.Svf.program with sessions := n } m hm 0
    (by rw [hk]; simp) w ws hq
  refine ⟨h.1, fun x hx => ?_⟩
  have hx := h.2 x hx
  rw [hk] at hx
  exact Kernel.keysBefore_single _ _ hx

/-- Ties go to the request that joined first: on the same machines as `svf_admits_least_volume`,
every request ahead of the admitted one in the `reqs` queue has a volume strictly greater
(`Serq.Kernel.select_first`). -/
theorem svf_admits_first_least (n : Nat) (m : Kernel.Machine) (hm : Kernel.HeadFree m.pools)
    (w : Kernel.Waiter) (ws : List Kernel.Waiter) (hq : (Kernel.getPool m.pools 0).queue = w :: ws) :
    ∀ k < Kernel.select { Papers.Claims.Svf.program with sessions := n } m 0 (w :: ws),
      Kernel.getAt (Kernel.getThread m.threads
          (Kernel.getWaiter (w :: ws) (Kernel.select { Papers.Claims.Svf.program with sessions := n } m 0 (w :: ws))).thread).attrs 6 <
        Kernel.getAt (Kernel.getThread m.threads (Kernel.getWaiter (w :: ws) k).thread).attrs 6 := by
  have hk : Kernel.getKeys { Papers.Claims.Svf.program with sessions := n }.queueKeys 0 = [.attr 6] := rfl
  have hh : w.head = false := hm.get 0 w (by rw [hq]; simp)
  have h := Kernel.select_first { Papers.Claims.Svf.program with sessions := n } m 0 w ws (by rw [hk]; simp) hh
  intro k hk'
  have hx := h k hk'
  rw [hk] at hx
  exact Kernel.keysBefore_single_lt _ _ hx

/-- `svf.sq`'s program preempts nothing, so no waiting hold of any of its runs is a preempted one put
back (`Serq.Kernel.runProgram_headFree`): at the end of every run, for every number of sessions and every
fuel, and at every point of it (every function of the machine keeps `HeadFree`), so
`svf_admits_least_volume` applies at every admission. -/
theorem svf_headFree (n fuel : Nat) :
    Kernel.HeadFree (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).pools := by
  have hn : Kernel.natsZero Papers.Claims.Svf.program.preemptModes = true := by decide +kernel
  exact Kernel.runProgram_headFree _ fuel (Kernel.NoPreemption.of_check _ hn)

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

/-- **What remains for every batch, as one hypothesis.** For every number of sessions `n` and every fuel:
if the run's responses are, in some order, the completion times of a shortest-first service of its
observed volumes from time 0 without idling (an `order` with `ShortestFirst vols order`; the kernel's run
being that server is what is not proved), then its total latency is `prefix_total(vol)`, the claim's
inequality holds with `c = 2`, and no feasible one-at-a-time schedule of the same volumes has a smaller
total. -/
theorem svf_bound_of_server (n fuel : Nat) (order : List Nat)
    (hsf : ShortestFirst (Kernel.observedValues 0
      (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads) order)
    (hresp : (Kernel.responses (Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads).Perm
      (completionsFrom 0 order)) :
    let m := Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel
    sumNat (Kernel.responses m.threads) = prefixTotal (Kernel.observedValues 0 m.threads) ∧
    (2 : Int) * (((sumNat (Kernel.responses m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int)) ≤
      (2 : Int) * (((prefixTotal (Kernel.observedValues 0 m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int)) ∧
    ∀ jobs : List (Nat × Nat), (sizes jobs).Perm (Kernel.observedValues 0 m.threads) →
      (∀ t, sumSizesDoneBy t jobs ≤ 1 * t) → sumNat (Kernel.responses m.threads) ≤ sumCompletions jobs := by
  intro m
  have ht : sumNat (Kernel.responses m.threads) = prefixTotal (Kernel.observedValues 0 m.threads) :=
    shortestFirst_total_perm hsf hresp
  refine ⟨ht, ?_, fun jobs hs rate => spt_optimal _ _ ht jobs hs rate⟩
  rw [ht]
  exact Int.le_refl _

end Papers
