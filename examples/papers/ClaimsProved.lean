module

public import Serq.Full
public import Serq.Within
public import Serq.Rate
public import Papers.Claims.Sarathi
public import Papers.Claims.LiDaiPeng
public import Papers.Claims.SmithSpt
public import Papers.Claims.Fastertransformer
public import Papers.Claims.Rad
public import Papers.Claims.BariRate
public import Serq.KernelServed
public import Serq.KernelTiledRun
public import Serq.KernelDistinct
public import Serq.KernelAdmitFull
public import Serq.OneAtATime
public import Serq.Backlog
public import Papers.Claims.DaiBacklog
public import Serq.BacklogDecode
public import Papers.Claims.DaiBacklogDecode
public import Serq.BacklogMany
public import Papers.Claims.DaiBacklogMany
public import Serq.BacklogChunk
public import Papers.Claims.DaiBacklogChunked
public import Serq.BacklogPhased
public import Papers.Claims.DaiBacklogPhased
public import Serq.BacklogBudgetBound
public import Papers.Claims.DaiBacklogBudget
public import Papers.Claims.Svf
public import Serq.KernelAtEnd
public import Serq.SptOptimal
public import Serq.KernelConserve
public import Serq.KernelRequests
public import Serq.KernelKvRun
public import Serq.KernelFoundPreempt

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
theorem sarathi_stall_free : Papers.Claims.Sarathi.stall_free_67c180b5a242 := by
  refine EveryIteration.of_all (fun ss fuel r hr => ?_)
  have h := full_or_short Papers.Claims.Sarathi.engine rfl ss fuel r hr
  have hb : Papers.Claims.Sarathi.engine.budget = 256 := rfl
  rw [hb] at h
  simp only [Bool.or_eq_true, decide_eq_true_eq, beq_iff_eq]
  omega

/-- Bounded iterations: no iteration schedules more than the budget (`within_budget`,
lean/Serq/Within.lean). -/
theorem sarathi_bounded : Papers.Claims.Sarathi.bounded_90f62b1b8bc6 := by
  refine EveryIteration.of_all (fun ss fuel r hr => ?_)
  have h := within_budget Papers.Claims.Sarathi.engine ss fuel r hr
  have hb : Papers.Claims.Sarathi.engine.budget = 256 := rfl
  rw [hb] at h
  simp only [decide_eq_true_eq]
  omega

/-- The token rate on the step clock (Dai et al. 2025, Th. 2(a); Bari et al., Th. 1, with `T = 1`):
the tokens of the iterations before one that starts at step `s` are at most `256 · s`
(`token_rate`, lean/Serq/Rate.lean). -/
theorem sarathi_token_rate : Papers.Claims.Sarathi.token_rate_2da11bed0f80 := by
  refine EveryIteration.of_all (fun ss fuel r hr => ?_)
  have h := token_rate Papers.Claims.Sarathi.engine ss fuel r hr
  have hb : Papers.Claims.Sarathi.engine.budget = 256 := rfl
  rw [hb] at h
  simp only [decide_eq_true_eq]
  omega

/-! ## Li, Dai and Peng 2025 (`li_dai_peng.sq`) -/

/-- Work conservation over the residents, for every batch of the family: `full_or_short` for the
program's engine (budget 16). -/
theorem li_dai_peng_work_conserving : Papers.Claims.LiDaiPeng.work_conserving_5b14319e3d29 := by
  refine EveryIteration.of_all (fun ss fuel r hr => ?_)
  have h := full_or_short Papers.Claims.LiDaiPeng.engine rfl ss fuel r hr
  have hb : Papers.Claims.LiDaiPeng.engine.budget = 16 := rfl
  rw [hb] at h
  simp only [Bool.or_eq_true, decide_eq_true_eq, beq_iff_eq]
  omega

/-- The witness: four requests of 8 + 4 tokens at step 0 under a cap of two requests. The first
iteration admits two prefills (16 tokens); the second serves their two decodes only (2 < 16
tokens) while 4 * 11 - 16 = 28 tokens of arrived work wait behind the cap. The kernel runs the
model for three steps and finds that record. -/
theorem li_dai_peng_capped_batch_idles : Papers.Claims.LiDaiPeng.capped_batch_idles_de2d0eb33ffd :=
  ⟨[⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩],
    by decide +kernel, 3, by decide +kernel⟩

/-! ## FasterTransformer's phase separation (`fastertransformer.sq`), Dai et al. 2025 -/

/-- Phase separation is not work-conserving. The witness: four requests of 8 + 4 tokens at step 0
(budget 16, four request slots). The first iteration prefills two of them (16 tokens); the second
serves their two decodes only (`only (in_phase())` in a decode phase) and admits the other two,
which wait as residents with their 8 prompt tokens each: demand 1 + 1 + 8 + 8 = 18 ≥ 16, tokens
2 < 16. The kernel runs the model for three steps and finds that record. -/
theorem fastertransformer_starved : Papers.Claims.Fastertransformer.starved_2e853a057fd0 :=
  ⟨[⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩, ⟨0, [⟨8, 4, 0, false⟩]⟩],
    by decide +kernel, 3, by decide +kernel⟩

/-! ## Smith 1956 (`smith_spt.sq`) -/

/-- The answered turns as jobs: (service time `out`, completion time `last + 1`). -/
def sptJobs (ss : List Session) : List Outcome → List (Nat × Nat)
  | [] => []
  | o :: os => (turnOut ss o.sid o.turn, o.last + 1) :: sptJobs ss os

theorem smith_steps_eq (ss : List Session) :
    ∀ os, Papers.Claims.SmithSpt.obs_steps ss os = sizes (sptJobs ss os)
  | [] => rfl
  | o :: os => by
    simp only [Papers.Claims.SmithSpt.obs_steps, sptJobs, sizes, smith_steps_eq ss os, List.cons.injEq,
      and_true]
    unfold sessionTurn turnOut
    rcases sessionAt ss o.sid with _ | s
    · rfl
    · dsimp only
      rcases turnAt s.turns o.turn with _ | t <;> rfl

theorem smith_response_eq (ss : List Session) (h0 : ∀ sid, arriveAt ss sid = 0) :
    ∀ os, sumNat (Papers.Claims.SmithSpt.obs_response ss os) = sumCompletions (sptJobs ss os)
  | [] => rfl
  | o :: os => by
    simp only [Papers.Claims.SmithSpt.obs_response, sptJobs, sumNat, sumCompletions, h0,
      smith_response_eq ss h0 os, Nat.sub_zero]

theorem smith_doneBy_eq (ss : List Session) (t : Nat) :
    ∀ os, sumSizesDoneBy t (sptJobs ss os) = outDoneBy ss t os
  | [] => rfl
  | o :: os => by
    simp only [sptJobs, sumSizesDoneBy, outDoneBy, smith_doneBy_eq ss t os, Nat.add_one_le_iff]

/-- Smith's bound for every batch of the family, at every machine of its path (the end included):
the vLLM engine runs one request at a time, so the output lengths of the requests answered before
`t` sum to at most `t` (`one_at_a_time_rate`, lean/Serq/OneAtATime.lean: prompts are not empty, as
the family's are 8 tokens); `spt_lower_bound` (lean/Serq/Spt.lean) turns that rate into the bound.
Every request arrives at 0, so its response is its completion time. -/
theorem smith_spt_bound : Papers.Claims.SmithSpt.spt_bound_ae7c1114ddbc := by
  intro ss hfam fuel _
  have hs : ∀ s ∈ ss, s.arrive = 0 ∧ ∃ t, s.turns = [t] ∧ t.new = 8 := by
    intro s hs
    simp only [Papers.Claims.SmithSpt.family, Bool.and_eq_true] at hfam
    obtain ⟨k, hk⟩ := everySession_mem _ 0 ss hfam.2 s hs
    simp only [Papers.Claims.SmithSpt.sessionOk, Bool.and_eq_true, beq_iff_eq] at hk
    obtain ⟨t, ht, hok⟩ := singleTurn_true hk.2
    simp only [Bool.and_eq_true, beq_iff_eq] at hok
    exact ⟨hk.1, t, ht, hok.1.2⟩
  have h0 : ∀ sid, arriveAt ss sid = 0 := arriveAt_zero (fun s h => (hs s h).1)
  have hnew : ∀ s ∈ ss, ∀ t ∈ s.turns.head?, 0 < t.new := by
    intro s h t ht
    obtain ⟨_, t', h1, h2⟩ := hs s h
    rw [h1] at ht
    simp only [List.head?_cons, Option.mem_def, Option.some.injEq] at ht
    subst ht
    omega
  have rate := one_at_a_time_rate Papers.Claims.SmithSpt.engine ss fuel rfl rfl hnew
  have key := spt_lower_bound 1 (sptJobs ss (run Papers.Claims.SmithSpt.engine ss fuel (init ss)).outcomes)
    (fun t => by rw [smith_doneBy_eq]; simpa using rate t)
  simp only [decide_eq_true_eq]
  rw [smith_steps_eq, smith_response_eq ss h0]
  omega

/-! ## RAD's optimal tiling (`rad.sq`), Bari et al. 2025 §4.2 -/

/-- Every iteration's prefill tokens fill whole tiles, on the run of the program's own workload (six
sessions prompting 1, 2 and 3 tiles of 4 tokens, a budget of two tiles, chunk and granule the tile).
The tiles hold in every run of every program whose engine has a granule `g > 0` and whose prefill runs
have works `g * e` (`Serq.Kernel.runProgram_tiled_prefills`, lean/Serq/KernelTiledRun.lean, through the
statement provenance invariant of lean/Serq/KernelProvenance.lean); this program's hypotheses are
checked on its value (`Serq.Kernel.TiledProgram.of_check`). What the statement adds, that this run ends
within the fuel, the kernel checks by evaluation. -/
theorem rad_tiled : Papers.Claims.Rad.tiled_a987c5cba441 := by
  unfold Papers.Claims.Rad.tiled_a987c5cba441 Serq.Kernel.EveryIterationOfRun
  refine ⟨by decide +kernel, fun r hr => ?_⟩
  have h := (Serq.Kernel.runProgram_tiled_prefills Papers.Claims.Rad.program Papers.Claims.Rad.fuel 0 4
    (Serq.Kernel.TiledProgram.of_check _ 0 0 4 (by decide) rfl rfl (by decide +kernel))).2 r hr
  simp only [beq_iff_eq]
  omega

/-- RAD's tiling for every fuel and any number of sessions of `rad.sq`'s program (its value with
`sessions` replaced): every record's prefill tokens are whole tiles, whether or not the run ends. -/
theorem rad_tiled_every_run (n fuel : Nat) :
    ∀ r ∈ (Serq.Kernel.getEngineState
      (Serq.Kernel.runProgram { Papers.Claims.Rad.program with sessions := n } fuel).engines 0).records,
      r.prefilled % 4 = 0 := by
  have hc : Papers.Claims.Rad.program.allStmts (Serq.Kernel.prefillTiled 0 4) = true := by decide +kernel
  exact (Serq.Kernel.runProgram_tiled_prefills { Papers.Claims.Rad.program with sessions := n } fuel 0 4
    (Serq.Kernel.TiledProgram.of_check { Papers.Claims.Rad.program with sessions := n } 0 0 4 (by decide) rfl rfl
      hc)).2

/-- No thread is twice a resident of an engine (of any stage) of `rad.sq`'s program, at the end of every
run, for every fuel and number of sessions (`Serq.Kernel.runProgram_threadsDistinct`,
lean/Serq/KernelDistinct.lean: no session's thread is in two places of the machine at once). The
program's hypothesis, no renewal arrivals beside a trace, is checked on its value
(`Serq.Kernel.DistinctProgram.of_check`); its engine admits from its `reqs` pool, which the invariant
covers. (This is the half of `full_or_short` that was open; the program itself is outside
`Serq.Kernel.runProgram_full_or_short`, whose plan of one iteration needs an engine that admits from no
pool and no granule.) -/
theorem rad_residents_distinct (n fuel s : Nat) :
    Serq.Kernel.threadsDistinct (Serq.Kernel.getEngineState
      (Serq.Kernel.runProgram { Papers.Claims.Rad.program with sessions := n } fuel).engines s).residents := by
  have hc : (Papers.Claims.Rad.program.gap == 0 || Serq.Kernel.countNats Papers.Claims.Rad.program.arrivalTimes == 0) = true := by
    decide +kernel
  exact Serq.Kernel.runProgram_threadsDistinct _ fuel s
    (Serq.Kernel.DistinctProgram.of_check { Papers.Claims.Rad.program with sessions := n } hc)

/-! ## The token rate with an iteration's cost (`bari_rate.sq`), Bari et al. 2025 Th. 1 -/

/-- Every iteration has `served · 262 ≤ 256 · now`: a budget of two tiles of 128 tokens (`B = 256`) and
`execute (3 * ceil(batch.tokens / 128) + batch.tokens)`, a full iteration lasting `Tfull = 3·2 + 256 = 262`.
The bound per record holds in every run of every program with this engine
(`Serq.Kernel.runProgram_tiled_served_rate`, lean/Serq/KernelServed.lean, no hypothesis on the run);
what the statement adds, that this program's run ends within the fuel, the kernel checks by
evaluation. -/
theorem bari_token_rate : Papers.Claims.BariRate.token_rate_fa03f89d2217 := by
  unfold Papers.Claims.BariRate.token_rate_fa03f89d2217 Serq.Kernel.EveryIterationOfRun
  refine ⟨by decide +kernel, fun r hr => ?_⟩
  have h := Serq.Kernel.runProgram_tiled_served_rate Papers.Claims.BariRate.program Papers.Claims.BariRate.fuel
    0 0 3 1 128 2 (by decide) rfl rfl rfl r hr
  simp only [decide_eq_true_eq]
  omega

/-! ## The pathwise bounded backlog (`dai_backlog.sq`), Dai et al. 2025, Theorem 2(b) -/

/-- Every workload of the family has the renewal arrivals `Serq.backlog_bounded` needs: the `k`-th
session (from 0) at step `(k + 1) · 2`, one turn of a 32-token prompt and one output token. -/
theorem dai_backlog_renewal : ∀ (k : Nat) (ss : List Session),
    everySession Papers.Claims.DaiBacklog.sessionOk k ss = true → RenewalSessions 2 32 k ss
  | _, [], _ => trivial
  | k, s :: ss, h => by
    simp only [everySession, Bool.and_eq_true] at h
    obtain ⟨hs, hrest⟩ := h
    simp only [Papers.Claims.DaiBacklog.sessionOk, Bool.and_eq_true, beq_iff_eq] at hs
    obtain ⟨t, ht, hok⟩ := singleTurn_true hs.2
    simp only [Bool.and_eq_true, beq_iff_eq] at hok
    exact ⟨hs.1, ⟨t, ht, hok.1.1.2, by omega⟩, dai_backlog_renewal (k + 1) ss hrest⟩

/-- The bounded backlog for every workload of the family: the engine (budget 16, four request slots,
64 KV blocks of 16 tokens) meets `backlog_bounded`'s hypotheses with `g = 2` and `P = 32`
(`32 ≤ 16 · 2`, the prompt's 2 blocks fit), so at every iteration
`arrived · 32 ≤ served + 32` (lean/Serq/Backlog.lean). -/
theorem dai_bounded_backlog : Papers.Claims.DaiBacklog.bounded_backlog_b95a3dc750f3 := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklog.family, Bool.and_eq_true] at hfam
  have h := backlog_bounded Papers.Claims.DaiBacklog.engine 2 32 ss (by decide) (by decide) (by decide)
    (dai_backlog_renewal 0 ss hfam.2) fuel r hr
  simp only [decide_eq_true_eq]
  omega

/-! ## The pathwise bounded backlog with decodes (`dai_backlog_decode.sq`), Dai et al. 2025, Th. 2(b) -/

/-- Every workload of the family has the renewal arrivals `Serq.backlog_decode_bounded` needs: the
`k`-th session (from 0) at step `(k + 1) · 4`, one turn of a 32-token prompt and 3 output tokens. -/
theorem dai_backlog_decode_renewal : ∀ (k : Nat) (ss : List Session),
    everySession Papers.Claims.DaiBacklogDecode.sessionOk k ss = true → RenewalDecode 4 32 3 k ss
  | _, [], _ => trivial
  | k, s :: ss, h => by
    simp only [everySession, Bool.and_eq_true] at h
    obtain ⟨hs, hrest⟩ := h
    simp only [Papers.Claims.DaiBacklogDecode.sessionOk, Bool.and_eq_true, beq_iff_eq] at hs
    obtain ⟨t, ht, hok⟩ := singleTurn_true hs.2
    simp only [Bool.and_eq_true, beq_iff_eq] at hok
    exact ⟨hs.1, ⟨t, ht, hok.1.1.2, by omega⟩, dai_backlog_decode_renewal (k + 1) ss hrest⟩

/-- The bounded backlog with decodes for every workload of the family: the engine (budget 16, four
request slots, 64 KV blocks of 16 tokens) meets `backlog_decode_bounded`'s hypotheses with `g = 4`,
`P = 32`, `D = 3` (`32 + 16 · 2 ≤ 16 · 4`, a request's 34 tokens in 3 blocks), so at every iteration
`arrived · 34 ≤ served + 34` (lean/Serq/BacklogDecode.lean). -/
theorem dai_bounded_backlog_decode : Papers.Claims.DaiBacklogDecode.bounded_backlog_97cfc69fa176 := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklogDecode.family, Bool.and_eq_true] at hfam
  have h := backlog_decode_bounded Papers.Claims.DaiBacklogDecode.engine 4 32 3 ss (by decide) (by decide)
    (by decide) (by decide) (dai_backlog_decode_renewal 0 ss hfam.2) fuel r hr
  simp only [decide_eq_true_eq]
  omega

/-! ## The bounded backlog with several requests in flight (`dai_backlog_many.sq`) -/

/-- Every workload of the family has the renewal arrivals with decodes: the `k`-th session (from 0)
at step `(k + 1) · 2`, one turn of a 14-token prompt and 5 output tokens. -/
theorem dai_backlog_many_renewal : ∀ (k : Nat) (ss : List Session),
    everySession Papers.Claims.DaiBacklogMany.sessionOk k ss = true → RenewalDecode 2 14 5 k ss
  | _, [], _ => trivial
  | k, s :: ss, h => by
    simp only [everySession, Bool.and_eq_true] at h
    obtain ⟨hs, hrest⟩ := h
    simp only [Papers.Claims.DaiBacklogMany.sessionOk, Bool.and_eq_true, beq_iff_eq] at hs
    obtain ⟨t, ht, hok⟩ := singleTurn_true hs.2
    simp only [Bool.and_eq_true, beq_iff_eq] at hok
    exact ⟨hs.1, ⟨t, ht, hok.1.1.2, by omega⟩, dai_backlog_many_renewal (k + 1) ss hrest⟩

/-- The bounded backlog with three requests in flight for every workload of the family: the engine
(budget 16, four request slots, 64 KV blocks of 16 tokens, mixed batching, no chunk cap) meets
`backlog_many`'s hypotheses with `g = 2`, `P = 14`, `D = 5`, `K = 3` (`5 ≤ 3 · 2`, `14 + 2 ≤ 16`,
`3 ≤ 4`, `3 · 2 ≤ 64` blocks), so at every iteration `arrived · 18 ≤ served + 54`
(lean/Serq/BacklogMany.lean). -/
theorem dai_bounded_backlog_many : Papers.Claims.DaiBacklogMany.bounded_backlog_26a03f02dc86 := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklogMany.family, Bool.and_eq_true] at hfam
  have h := backlog_many Papers.Claims.DaiBacklogMany.engine 2 14 5 3 ss (by decide) (by decide) (by decide)
    (by decide) (by decide) (by decide) (by decide) (by decide) (by decide)
    (gapped_mono (Nat.zero_le _) (gapped_of_renewal 2 14 5 0 ss (dai_backlog_many_renewal 0 ss hfam.2))) fuel r hr
  simp only [decide_eq_true_eq]
  omega

/-- The exact constant for every workload of the family: `backlog_many_tight` with `K = 3`,
`W + (5 - 2) + (5 - 4) = 22` (`tri 3 2 2 = 4`), so at every iteration `arrived · 18 ≤ served + 22`;
`dai_backlog_many.sq`'s path meets it with equality at time 6. -/
theorem dai_bounded_backlog_many_exact : Papers.Claims.DaiBacklogMany.bounded_backlog_exact_99a1894eca7a := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklogMany.family, Bool.and_eq_true] at hfam
  have h := backlog_many_tight Papers.Claims.DaiBacklogMany.engine 2 14 5 3 ss (by decide) (by decide) (by decide)
    (by decide) (by decide) (by decide) (by decide) (by decide) (by decide)
    (gapped_mono (Nat.zero_le _) (gapped_of_renewal 2 14 5 0 ss (dai_backlog_many_renewal 0 ss hfam.2))) fuel r hr
  have ht : BacklogMany.tri (5 - 2) 2 (3 - 1) = 4 := by decide
  rw [ht] at h
  simp only [decide_eq_true_eq]
  omega

/-! ## The bounded backlog with prompts served in chunks (`dai_backlog_chunked.sq`) -/

/-- Every workload of the family has the renewal arrivals with decodes: the `k`-th session (from 0)
at step `(k + 1) · 2`, one turn of a 14-token prompt and 5 output tokens. -/
theorem dai_backlog_chunked_renewal : ∀ (k : Nat) (ss : List Session),
    everySession Papers.Claims.DaiBacklogChunked.sessionOk k ss = true → RenewalDecode 2 14 5 k ss
  | _, [], _ => trivial
  | k, s :: ss, h => by
    simp only [everySession, Bool.and_eq_true] at h
    obtain ⟨hs, hrest⟩ := h
    simp only [Papers.Claims.DaiBacklogChunked.sessionOk, Bool.and_eq_true, beq_iff_eq] at hs
    obtain ⟨t, ht, hok⟩ := singleTurn_true hs.2
    simp only [Bool.and_eq_true, beq_iff_eq] at hok
    exact ⟨hs.1, ⟨t, ht, hok.1.1.2, by omega⟩, dai_backlog_chunked_renewal (k + 1) ss hrest⟩

/-- The bounded backlog with prompts cut in chunks of 4 for every workload of the family: the engine
(budget 16, four request slots, 64 KV blocks of 16 tokens, mixed batching, chunk cap 4) meets
`backlog_chunk`'s hypotheses with `g = 2`, `P = 14`, `D = 5`, `K = 4`, `n = 4` (`14 ≤ 4 · 4`,
`4 + 4 ≤ 4 · 2`, `4 · 4 ≤ 16`, `4 ≤ 4`, `4 · 2 ≤ 64` blocks), so at every iteration
`arrived · 18 ≤ served + 72` (lean/Serq/BacklogChunk.lean). -/
theorem dai_bounded_backlog_chunked : Papers.Claims.DaiBacklogChunked.bounded_backlog_e922d2031091 := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklogChunked.family, Bool.and_eq_true] at hfam
  have h := backlog_chunk Papers.Claims.DaiBacklogChunked.engine 2 14 5 4 4 ss (by decide) (by decide) (by decide)
    (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide)
    (gapped_mono (Nat.zero_le _) (gapped_of_renewal 2 14 5 0 ss (dai_backlog_chunked_renewal 0 ss hfam.2))) fuel r hr
  simp only [decide_eq_true_eq]
  omega

/-- The exact constant for every workload of the family: `backlog_chunk_tight` with `K = 4`,
`W + bound 2 + bound 4 + bound 6 = 18 + 10 + 4 + 2 = 34` (`sumB 4 4 14 5 2 2 3 = 16`), so at every
iteration `arrived · 18 ≤ served + 34`; `dai_backlog_chunked.sq`'s path meets it with equality at
time 10. -/
theorem dai_bounded_backlog_chunked_exact :
    Papers.Claims.DaiBacklogChunked.bounded_backlog_exact_bf3ce4c15239 := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklogChunked.family, Bool.and_eq_true] at hfam
  have h := backlog_chunk_tight Papers.Claims.DaiBacklogChunked.engine 2 14 5 4 4 ss (by decide) (by decide)
    (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide)
    (gapped_mono (Nat.zero_le _) (gapped_of_renewal 2 14 5 0 ss (dai_backlog_chunked_renewal 0 ss hfam.2))) fuel r hr
  have ht : BacklogChunk.sumB Papers.Claims.DaiBacklogChunked.engine.chunk 4 14 5 2 2 (4 - 1) = 16 := by decide
  rw [ht] at h
  simp only [decide_eq_true_eq]
  omega

/-! ## The bounded backlog on the phase-separated schedule (`dai_backlog_phased.sq`) -/

/-- The renewal arrivals with decodes of every workload a per-session test `ok` admits, when `ok`
gives each session's arrival and its one turn. -/
theorem renewalDecode_of_every (ok : Nat → Session → Bool) (g P D : Nat)
    (h : ∀ k s, ok k s = true → s.arrive = (k + 1) * g ∧ ∃ t, s.turns = [t] ∧ t.new = P ∧ t.out - 1 = D - 1) :
    ∀ (k : Nat) (ss : List Session), everySession ok k ss = true → RenewalDecode g P D k ss
  | _, [], _ => trivial
  | k, s :: ss, hs => by
    simp only [everySession, Bool.and_eq_true] at hs
    exact ⟨(h k s hs.1).1, (h k s hs.1).2, renewalDecode_of_every ok g P D h (k + 1) ss hs.2⟩

/-- Every workload of the family has the renewal arrivals with decodes: the `k`-th session (from 0)
at step `(k + 1) · 2`, one turn of an 8-token prompt and 4 output tokens. -/
theorem dai_backlog_phased_renewal (k : Nat) (ss : List Session)
    (h : everySession Papers.Claims.DaiBacklogPhased.sessionOk k ss = true) : RenewalDecode 2 8 4 k ss :=
  renewalDecode_of_every _ 2 8 4 (fun k s hs => by
    simp only [Papers.Claims.DaiBacklogPhased.sessionOk, Bool.and_eq_true, beq_iff_eq] at hs
    obtain ⟨t, ht, hok⟩ := singleTurn_true hs.2
    simp only [Bool.and_eq_true, beq_iff_eq] at hok
    exact ⟨hs.1, t, ht, hok.1.1.2, by omega⟩) k ss h

/-- The bounded backlog on the phase-separated schedule for every workload of the family: the engine
(budget 16, four request slots, 64 KV blocks of 16 tokens, phases separated, no chunk cap) meets
`backlog_phased`'s hypotheses with `g = 2`, `P = 8`, `D = 4`, `J = 2` (`4 ≤ 2 · 2`, `2 · 8 ≤ 16`,
`2 < 16`, `2 · 2 ≤ 4` slots, `2 · 2 · 1 ≤ 64` blocks), so at every iteration
`arrived · 11 ≤ served + 2 · 11 + 2 · 3` (lean/Serq/BacklogPhased.lean). -/
theorem dai_bounded_backlog_phased : Papers.Claims.DaiBacklogPhased.bounded_backlog_0368507eb3ae := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklogPhased.family, Bool.and_eq_true] at hfam
  have h := backlog_phased Papers.Claims.DaiBacklogPhased.engine 2 8 4 2 ss (by decide) (by decide) (by decide)
    (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide)
    (gapped_mono (Nat.zero_le _) (gapped_of_renewal 2 8 4 0 ss (dai_backlog_phased_renewal 0 ss hfam.2))) fuel r hr
  simp only [decide_eq_true_eq]
  omega

/-! ## The bounded backlog with prompts the budget cuts (`dai_backlog_budget.sq`), Dai et al. 2025, Th. 2(b) -/

/-- Every workload of the family has the renewal arrivals with decodes: the `k`-th session (from 0)
at step `(k + 1) · 2`, one turn of a 20-token prompt and 3 output tokens. -/
theorem dai_backlog_budget_renewal (k : Nat) (ss : List Session)
    (h : everySession Papers.Claims.DaiBacklogBudget.sessionOk k ss = true) : RenewalDecode 2 20 3 k ss :=
  renewalDecode_of_every _ 2 20 3 (fun k s hs => by
    simp only [Papers.Claims.DaiBacklogBudget.sessionOk, Bool.and_eq_true, beq_iff_eq] at hs
    obtain ⟨t, ht, hok⟩ := singleTurn_true hs.2
    simp only [Bool.and_eq_true, beq_iff_eq] at hok
    exact ⟨hs.1, t, ht, hok.1.1.2, by omega⟩) k ss h

/-- The bounded backlog with prompts the budget cuts for every workload of the family: the engine
(budget 16, four request slots, 64 KV blocks of 16 tokens, mixed batching, no chunk cap, no prefix
cache) meets `backlog_budget_renewal`'s hypotheses with `g = 2`, `P = 20`, `D = 3` (`22 ≤ 16 · 2`;
`M = 1 + 16 / 20 = 1`, `2 · 1 ≤ 16` decodes; `K = 2 + 1 + 25 / 22 = 4 ≤ 4` slots, `4 · 2 ≤ 64` blocks), so
at every iteration `arrived · 22 ≤ served + 22 + 1 · (3 · 2 / 2)` (lean/Serq/BacklogBudgetBound.lean). -/
theorem dai_bounded_backlog_budget : Papers.Claims.DaiBacklogBudget.bounded_backlog_1e89939dc526 := by
  intro ss hfam fuel r hr
  simp only [Papers.Claims.DaiBacklogBudget.family, Bool.and_eq_true] at hfam
  have h := backlog_budget_renewal Papers.Claims.DaiBacklogBudget.engine 2 20 3 ss (by decide) (by decide)
    (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide) (by decide)
    (dai_backlog_budget_renewal 0 ss hfam.2) fuel r hr
  have e : (1 + Papers.Claims.DaiBacklogBudget.engine.budget / 20) * (3 * (3 - 1) / 2) = 3 := by decide
  rw [e] at h
  simp only [decide_eq_true_eq]
  omega

/-! ## Shortest volume first (`svf.sq`), Kong et al. -/

/-- The queueing bound `2 · (Σ latency − Σ out) ≤ 2 · (prefix_total(vol) − Σ vol)` at the end of the
program's run (six requests of volumes 1, 4, 2, 5, 3, 1 at time 0, one at a time, the request pool
`queue by (volume)`): the claim's generated statement (`Serq.Kernel.AtEndOfRun`: the run ended within
the fuel with no session live and no run-time error, and its final machine satisfies the claim over
the observed volumes and the responses), decided by the kernel on the run. -/
theorem svf_queueing_bound : Papers.Claims.Svf.svf_queueing_ec8fae101205 :=
  Serq.Kernel.AtEndOfRun.of_eval _ _ _ (by decide +kernel)

/-- The run of `svf.sq`'s program with its claims' fuel. -/
def svfRun : Serq.Kernel.Machine := Serq.Kernel.runProgram Papers.Claims.Svf.program Papers.Claims.Svf.fuel

/-- SVF attains Smith's bound on its run: the run ended (no session live), and its total latency (the
requests all arrive at 0, so a response is a completion time) is `prefix_total` of the observed volumes,
the least total completion time of jobs of those sizes served one at a time. -/
theorem svf_attains : svfRun.ended = true ∧
    sumNat (Serq.Kernel.responses svfRun.threads) = prefixTotal (Serq.Kernel.observedValues 0 svfRun.threads) := by
  decide +kernel

/-- The competitive ratio 1: every feasible one-at-a-time schedule of the same jobs — pairs
`(size, completion)` whose sizes are a permutation of the run's volumes, served at unit rate from time 0
(by every time `t` the jobs completed have total size at most `t`), in any order and with any idling —
has a total completion time at least SVF's total latency (`Serq.spt_optimal`, lean/Serq/SptOptimal.lean,
from Smith's bound `Serq.spt_lower_bound`, lean/Serq/Spt.lean, and `svf_attains`). -/
theorem svf_competitive (jobs : List (Nat × Nat))
    (hsizes : (sizes jobs).Perm (Serq.Kernel.observedValues 0 svfRun.threads))
    (rate : ∀ t, sumSizesDoneBy t jobs ≤ 1 * t) :
    sumNat (Serq.Kernel.responses svfRun.threads) ≤ sumCompletions jobs :=
  spt_optimal _ _ svf_attains.2 jobs hsizes rate

/-- A thread's job: its observed volume and its response (one turn each). -/
def svfJob (th : Serq.Kernel.Thread) : Nat × Nat :=
  (match Serq.Kernel.observedIn 0 th.observations with | v :: _ => v | [] => 0,
   match th.answers with | a :: _ => a.answered - a.start | [] => 0)

/-- The run's schedule as jobs `(volume, completion)`, thread by thread. -/
def svfJobs : List Serq.Kernel.Thread → List (Nat × Nat)
  | [] => []
  | th :: ts => svfJob th :: svfJobs ts

/-- SVF's own schedule is one of the feasible schedules `svf_competitive` ranges over: its jobs'
sizes are the run's volumes, its total completion is the run's Σ latency, and by every time `t` the
volumes completed sum to at most `t` (checked before `t = 16`, the total volume, by the kernel). With
`svf_competitive`, SVF's Σ latency is the least over the feasible schedules: the ratio is 1. -/
theorem svf_feasible : sizes (svfJobs svfRun.threads) = Serq.Kernel.observedValues 0 svfRun.threads ∧
    sumCompletions (svfJobs svfRun.threads) = sumNat (Serq.Kernel.responses svfRun.threads) ∧
    ∀ t, sumSizesDoneBy t (svfJobs svfRun.threads) ≤ 1 * t := by
  refine ⟨by decide +kernel, by decide +kernel, feasible_of_before _ 16 (by decide +kernel) ?_⟩
  decide +kernel

/-! ## `full_or_short` through the kernel for engines that admit their own queue (issue 13) -/

/-- vLLM's `full_or_short` for every run of `bari_rate.sq`'s program, for every fuel and number of
sessions (its value with `sessions` replaced): every iteration record of its engine `llm` spends the whole
budget of 256 tokens or has a demand below it (`Serq.Kernel.runProgram_full_or_short_admitting`,
lean/Serq/KernelAdmitFull.lean). Its engine admits its own `reqs` queue; the hypotheses are checked on
the program's value: no renewal gap beside a trace (`DistinctProgram.of_check`), no
growing run (`NoGrowth.of_check`), `tokens cap 256`, no `only`, no granule (`rfl`), and a cost
`3 * ceil(batch.tokens / 128) + batch.tokens` that is not 0 for tokens (`CostPos`). -/
theorem bari_full_or_short (n fuel : Nat) :
    ∀ r ∈ (Serq.Kernel.getEngineState
      (Serq.Kernel.runProgram { Papers.Claims.BariRate.program with sessions := n } fuel).engines 0).records,
      r.tokens = 256 ∨ r.demand < 256 := by
  have hc : (Papers.Claims.BariRate.program.gap == 0 ||
      Serq.Kernel.countNats Papers.Claims.BariRate.program.arrivalTimes == 0) = true := by
    decide +kernel
  have hg : Papers.Claims.BariRate.program.allStmts (Serq.Kernel.noGrowthOn 0) = true := by decide +kernel
  refine Serq.Kernel.runProgram_full_or_short_admitting { Papers.Claims.BariRate.program with sessions := n } fuel
    0 0 256 (Serq.Kernel.DistinctProgram.of_check _ hc) (Serq.Kernel.NoGrowth.of_check _ 0 hg) rfl rfl rfl rfl rfl ?_
  intro v now t rest hv ht
  show Serq.Kernel.eval v [] now 0 (.bin .add (.bin .mul (.num 3) (.floorDiv (.bin .add (.stageVar 0) (.num 127)) 128))
    (.bin .mul (.num 1) (.stageVar 0))) ≠ 0
  simp only [Serq.Kernel.eval, Serq.Kernel.evalBin, hv, Serq.Kernel.getAt]
  omega

/-- vLLM's `full_or_short` for every run of `svf.sq`'s program, for every fuel and number of sessions:
every iteration record of its engine `llm` spends the whole budget of 4 tokens or has a demand below it
(`Serq.Kernel.runProgram_full_or_short_admitting`). Its engine admits its own `reqs` queue (`queue by
(volume)`); the hypotheses are checked on the program's value, as for `bari_full_or_short`; its cost
`execute (1)` is never 0. -/
theorem svf_full_or_short (n fuel : Nat) :
    ∀ r ∈ (Serq.Kernel.getEngineState
      (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).engines 0).records,
      r.tokens = 4 ∨ r.demand < 4 := by
  have hc : (Papers.Claims.Svf.program.gap == 0 ||
      Serq.Kernel.countNats Papers.Claims.Svf.program.arrivalTimes == 0) = true := by
    decide +kernel
  have hg : Papers.Claims.Svf.program.allStmts (Serq.Kernel.noGrowthOn 0) = true := by decide +kernel
  exact Serq.Kernel.runProgram_full_or_short_admitting { Papers.Claims.Svf.program with sessions := n } fuel
    0 0 4 (Serq.Kernel.DistinctProgram.of_check _ hc) (Serq.Kernel.NoGrowth.of_check _ 0 hg) rfl rfl rfl rfl rfl
    (Serq.Kernel.CostPos.of_ne _ (fun _ _ h => by cases h))

/-! ## Issue 14, result 6, on a paper program's every run -/

/-- Causality for every fuel and any number of sessions of `svf.sq`'s program (its value with
`sessions` replaced), an instance of `Serq.Kernel.runProgram_causality`, which has no hypothesis on the
program: every answer is given no earlier than its turn was submitted, and every turn an engine gave a
token has its first token between its submission and its answer. -/
theorem svf_causality_every_run (n fuel : Nat) :
    ∀ th ∈ (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads,
      (∀ a ∈ th.answers, a.start ≤ a.answered) ∧
      ∀ tk ∈ th.tokens, ∃ a ∈ th.answers, a.serial = tk.serial ∧ a.turn = tk.turn ∧
        a.start ≤ tk.first ∧ tk.first ≤ a.answered :=
  Serq.Kernel.runProgram_causality _ fuel

/-- KV conservation's program hypothesis (`Serq.Kernel.HoldsOnce`) holds of `svf.sq`'s program (for any
number of sessions), decided on its value: its hold names its one pool once. (Its eviction needs no
hypothesis: `evict lru` and `evict by (keys)` both keep a pool within its cap, `evictIn_within`.) -/
theorem svf_kv_hypotheses (n : Nat) :
    Serq.Kernel.HoldsOnce { Papers.Claims.Svf.program with sessions := n } :=
  by
  have h1 : Papers.Claims.Svf.program.allStmts Serq.Kernel.holdsOnceOn = true := by decide +kernel
  exact Serq.Kernel.HoldsOnce.of_check _ h1

/-- Request conservation for every fuel and any number of sessions of `svf.sq`'s program, an instance of
`Serq.Kernel.runProgram_requests` (lean/Serq/KernelRequestsPreempt.lean): every session's thread is in at
most one place (waiting in the `reqs` queue, running on the engine, or elsewhere: never two, never twice),
its open turn is not answered, and no turn is answered twice. The hypotheses (`DistinctProgram`: no renewal
beside a trace; `TurnsOutside`: no `turn` in the turn block, the server or a hold's body) are checked on the
program's value. -/
theorem svf_requests_every_run (n fuel : Nat) :
    (∀ t, (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).placed
      Papers.Claims.Svf.program.gap t ≤ 1) ∧
    ∀ th ∈ (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads,
      (th.inTurn = true → ∀ a ∈ th.answers, a.turn ≠ th.turns) ∧
        th.answers.Pairwise (fun a b => a.turn ≠ b.turn) := by
  have hc : (Papers.Claims.Svf.program.gap == 0 ||
      Serq.Kernel.countNats Papers.Claims.Svf.program.arrivalTimes == 0) = true := by
    decide +kernel
  have ht : (Serq.Kernel.Stmt.allBlock Serq.Kernel.noTurn Papers.Claims.Svf.program.turnBlock &&
      Serq.Kernel.Stmt.allBlock Serq.Kernel.noTurn Papers.Claims.Svf.program.server &&
      Papers.Claims.Svf.program.allStmts Serq.Kernel.holdBodyTurnFree) = true := by
    decide +kernel
  exact Serq.Kernel.runProgram_requests _ fuel (Serq.Kernel.DistinctProgram.of_check _ hc)
    (Serq.Kernel.TurnsOutside.of_check _ ht)

/-- KV conservation for every fuel and any number of sessions of `svf.sq`'s program, an instance of
`Serq.Kernel.runProgram_kv_conserved` (lean/Serq/KernelKvRun.lean): at the end of every run (and at every
point of it) every pool's allocations and cache are within its cap. The hypothesis (its hold statements name
each pool once) is decided on the program's value. -/
theorem svf_kv_conserved (n fuel : Nat) :
    ∀ j, (Serq.Kernel.getPool (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).pools j).used +
      Serq.Kernel.cachedUnits
        (Serq.Kernel.getPool (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).pools j).entries ≤
      Serq.Kernel.getAt Papers.Claims.Svf.program.caps j := by
  have h1 : Papers.Claims.Svf.program.allStmts Serq.Kernel.holdsOnceOn = true := by decide +kernel
  exact Serq.Kernel.runProgram_kv_conserved { Papers.Claims.Svf.program with sessions := n } fuel h1

/-- Request conservation's other half for every fuel and any number of sessions of `svf.sq`'s program, an
instance of `Serq.Kernel.runProgram_placed_once` and `runProgram_open_turn_placed`
(lean/Serq/KernelFoundPreempt.lean): at the end of every run that ran to its end (neither out of fuel nor
failed), every session's thread with something left to run is in exactly one place (ready, a timer, the
`reqs` queue, the engine's residents), and so is every open turn (submitted, neither answered nor refused),
which is not answered. The hypotheses (`DistinctProgram`; `FoundProgram`: every statement names an existing
pool and stage, no trace; for the open turn, `TurnsOutside`) are decided on the program's value. -/
theorem svf_requests_placed_once (n fuel : Nat)
    (hfuel : (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).outOfFuel = false)
    (hfail : (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).failed = false) :
    (∀ t, (Serq.Kernel.getThread (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads t).k ≠ [] →
      (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).placed
        Papers.Claims.Svf.program.gap t = 1) ∧
    ∀ t, (Serq.Kernel.getThread (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).threads t).inTurn = true →
      (Serq.Kernel.runProgram { Papers.Claims.Svf.program with sessions := n } fuel).placed
        Papers.Claims.Svf.program.gap t = 1 := by
  have hc : (Papers.Claims.Svf.program.gap == 0 ||
      Serq.Kernel.countNats Papers.Claims.Svf.program.arrivalTimes == 0) = true := by
    decide +kernel
  have hfit : Papers.Claims.Svf.program.allStmts (Serq.Kernel.fitsStmt (Serq.Kernel.countNats Papers.Claims.Svf.program.caps)
      (Serq.Kernel.countServices Papers.Claims.Svf.program.stages)) = true := by
    decide +kernel
  have ha : Serq.Kernel.countNats Papers.Claims.Svf.program.arrivalTimes = 0 := by decide +kernel
  have ht : (Serq.Kernel.Stmt.allBlock Serq.Kernel.noTurn Papers.Claims.Svf.program.turnBlock &&
      Serq.Kernel.Stmt.allBlock Serq.Kernel.noTurn Papers.Claims.Svf.program.server &&
      Papers.Claims.Svf.program.allStmts Serq.Kernel.holdBodyTurnFree) = true := by
    decide +kernel
  have hd := Serq.Kernel.DistinctProgram.of_check { Papers.Claims.Svf.program with sessions := n } hc
  have hf := Serq.Kernel.FoundProgram.of_check { Papers.Claims.Svf.program with sessions := n } hfit (Or.inl ha)
  exact ⟨fun t hk => Serq.Kernel.runProgram_placed_once _ fuel hd hf hfuel hfail t hk,
    fun t hin => (Serq.Kernel.runProgram_open_turn_placed _ fuel hd hf
      (Serq.Kernel.TurnsOutside.of_check _ ht) hfuel hfail t hin).1⟩

end Papers
