module

public import Serq.Full
public import Serq.Within
public import Papers.Claims.Sarathi
public import Papers.Claims.LiDaiPeng

/-! # The proofs of the paper programs' claims

Every claim of every program under `examples/papers/` is a statement generated from the
program (`Papers.Claims.<Program>`, by `scripts/gen_lean_claims.py`); each theorem here has one
of those statements as its type. `serq lean check` fails, naming the claim, when a claim has no
theorem here or its theorem proves an older statement (the name carries the statement's digest).
-/

@[expose] public section

namespace Papers

open Serq

/-! ## Sarathi-Serve (`sarathi.sq`) -/

/-- Stall-free batching: every iteration of every path of every workload of the family schedules
the whole budget, or its residents' demand is below it. This is `full_or_short` (lean/Serq/Full.lean)
for the program's engine, whose budget is the claim's `B`. -/
theorem sarathi_stall_free : Papers.Claims.Sarathi.stall_free_3242dfb045c1 := by
  refine EveryIteration.of_all (fun ss fuel r hr => ?_)
  have h := full_or_short Papers.Claims.Sarathi.engine ss fuel r hr
  have hb : Papers.Claims.Sarathi.engine.budget = 256 := rfl
  rw [hb] at h
  simp only [Bool.or_eq_true, decide_eq_true_eq, beq_iff_eq]
  omega

/-- Bounded iterations: no iteration schedules more than the budget (`within_budget`,
lean/Serq/Within.lean). -/
theorem sarathi_bounded : Papers.Claims.Sarathi.bounded_fc8bf1a0c9c5 := by
  refine EveryIteration.of_all (fun ss fuel r hr => ?_)
  have h := within_budget Papers.Claims.Sarathi.engine ss fuel r hr
  have hb : Papers.Claims.Sarathi.engine.budget = 256 := rfl
  rw [hb] at h
  simp only [decide_eq_true_eq]
  omega

/-! ## Li, Dai and Peng 2025 (`li_dai_peng.sq`) -/

/-- Work conservation over the residents, for every batch of the family: `full_or_short` for the
program's engine (budget 16). -/
theorem li_dai_peng_work_conserving : Papers.Claims.LiDaiPeng.work_conserving_54b0dd4e293a := by
  refine EveryIteration.of_all (fun ss fuel r hr => ?_)
  have h := full_or_short Papers.Claims.LiDaiPeng.engine ss fuel r hr
  have hb : Papers.Claims.LiDaiPeng.engine.budget = 16 := rfl
  rw [hb] at h
  simp only [Bool.or_eq_true, decide_eq_true_eq, beq_iff_eq]
  omega

/-- The witness: four requests of 8 + 4 tokens at step 0 under a cap of two requests. The first
iteration admits two prefills (16 tokens); the second serves their two decodes only (2 < 16
tokens) while 4 * 11 - 16 = 28 tokens of arrived work wait behind the cap. The kernel runs the
model for three steps and finds that record. -/
theorem li_dai_peng_capped_batch_idles : Papers.Claims.LiDaiPeng.capped_batch_idles_d16cad48f199 :=
  ⟨[⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩],
    by decide +kernel, 3, by decide +kernel⟩

end Papers
