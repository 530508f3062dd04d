module

public import Papers.SvfEvery

/-! # SVF (`svf.sq`): larger batches decided, one run at a time

`Papers.SvfEvery` decides the claim for every batch of 0 to 16 sessions in one `decide +kernel` (a
bounded `∀ n < 17`); a bounded `∀` over more sessions ran out of the WebAssembly heap, since the kernel
evaluates every run in one term. Here each batch of 17 to 40 sessions is its own theorem, decided on its
own run (`svfServes n`: the run ends within the claims' fuel, its total latency is `prefix_total(vol)`,
and its responses are, in some order, the completions of its volumes served in ascending order from 0,
the hypothesis of `svf_bound_of_server`), eight to a module (17 to 24 here, then `Papers.SvfServes32`,
`Papers.SvfServes40`), and `Papers.SvfUpto40` collects the batches of 0 to 40 sessions
(`svf_attains_upto41`, `svf_queueing_upto41`, `svf_competitive_upto41`, `svf_server_upto41`).

What stays open for every `n` is the same as in `Papers.SvfEvery`: that the kernel's run of this
program is the shortest-first server.
-/

@[expose] public section

namespace Papers

open Serq

/-- The run with `n` sessions and the claims' fuel ended with total latency `prefix_total(vol)`
(`svfAttains`), and its responses are a permutation of `completionsFrom 0 (sortAsc vols)`. -/
noncomputable def svfServes (n : Nat) : Bool :=
  let m := Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } Papers.Claims.Svf.fuel
  svfAttains n && decide ((Kernel.responses m.threads).Perm
    (completionsFrom 0 (sortAsc (Kernel.observedValues 0 m.threads))))

theorem svf_serves_17 : svfServes 17 = true := by decide +kernel
theorem svf_serves_18 : svfServes 18 = true := by decide +kernel
theorem svf_serves_19 : svfServes 19 = true := by decide +kernel
theorem svf_serves_20 : svfServes 20 = true := by decide +kernel
theorem svf_serves_21 : svfServes 21 = true := by decide +kernel
theorem svf_serves_22 : svfServes 22 = true := by decide +kernel
theorem svf_serves_23 : svfServes 23 = true := by decide +kernel
theorem svf_serves_24 : svfServes 24 = true := by decide +kernel

end Papers
