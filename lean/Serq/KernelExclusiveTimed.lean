module

public import Serq.KernelExclusiveBudget
public import Serq.KernelServed

/-! # `exclusive prefill`: timed, the records' `served`, the token rate, causality

`Serq.KernelTimed`'s `runProgram_timed` and the token rates, for the run with engines under
`exclusive prefill` (`runProgramX`, `Serq.KernelExclusive`), whichever engines `xs` plan exclusively:
the records of an engine stage whose `execute` reads only the batch start no earlier than the one before
it started plus that one's cost (`runProgramX_timed`), and with `runProgramX_within_budget` the token
rate of such an engine of constant budget under an affine `execute` (`runProgramX_affine_token_rate`);
each record's `served` is the tokens of the iterations before it (`runProgramX_servedOk`), so the rate
holds per record as a claim reads it (`runProgramX_affine_served_rate`, and the tiled ones); and no turn
is answered before it started (`runProgramX_causal`).

An exclusive plan, like vLLM's, sets no timer, makes no engine busy or idle, adds no record, keeps every
engine's served count and the clock (`*_clock`, `*_engineServed`, `*_now`); `startExclusive` ends as
`startIteration` does (`Machine.timed_start`, `servedChain_set`).
-/
@[expose] public section

namespace Serq.Kernel

theorem runningPrefill_now (p : Program) (s c : Nat) (ts : List Nat) (m : Machine) (b : Batch) :
    (runningPrefill p s c ts m b).1.now = m.now := by
  fun_induction runningPrefill p s c ts m b <;> simp_all +zetaDelta [Machine.serveOne_now]

theorem exclusiveAdmit_now (p : Program) (s c f : Nat) (m : Machine) (b : Batch) :
    (exclusiveAdmit p s c f m b).1.now = m.now := by
  fun_induction exclusiveAdmit p s c f m b <;> simp_all +zetaDelta [Machine.serveOne_now, exec_now]

theorem planExclusive_now (p : Program) (f s c : Nat) (m : Machine) (b : Batch) :
    (planExclusive p f s c m b).1.now = m.now := by
  dsimp only [planExclusive]
  split
  · exact runningPrefill_now ..
  · split
    · rw [serveIn_now, runningPrefill_now]
    · rw [exclusiveAdmit_now, serveIn_now, runningPrefill_now]

theorem runningPrefill_clock (p : Program) (st c : Nat) (ts : List Nat) (m : Machine) (b : Batch) (s : Nat) :
    endTimes s ((runningPrefill p st c ts m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((runningPrefill p st c ts m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((runningPrefill p st c ts m b).1).engines.length ↔ s < m.engines.length) := by
  fun_induction runningPrefill p st c ts m b <;> simp_all +zetaDelta [Machine.serveOne_clock]

theorem exclusiveAdmit_clock (p : Program) (st c f : Nat) (m : Machine) (b : Batch) (s : Nat) :
    endTimes s ((exclusiveAdmit p st c f m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((exclusiveAdmit p st c f m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((exclusiveAdmit p st c f m b).1).engines.length ↔ s < m.engines.length) := by
  fun_induction exclusiveAdmit p st c f m b <;> simp_all +zetaDelta [Machine.serveOne_clock, exec_clock]

theorem planExclusive_clock (p : Program) (f st c : Nat) (m : Machine) (b : Batch) (s : Nat) :
    endTimes s ((planExclusive p f st c m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((planExclusive p f st c m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((planExclusive p f st c m b).1).engines.length ↔ s < m.engines.length) := by
  dsimp only [planExclusive]
  split
  · exact runningPrefill_clock ..
  · split
    · simp only [serveIn_clock, runningPrefill_clock, and_self]
    · simp only [exclusiveAdmit_clock, serveIn_clock, runningPrefill_clock, and_self]

/-- `startExclusive` of stage `s` from an idle engine whose `execute` reads only the batch. -/
theorem startExclusive_timed_self (p : Program) (f s : Nat) (eng : Engine) (m : Machine)
    (hcost : eng.cost.batchOnly = true) (hb : (getEngineState m.engines s).busy = false)
    (hm : m.timed (Iteration.costOf eng.cost) s) : (startExclusive p f s eng m).timed (Iteration.costOf eng.cost) s := by
  simp only [startExclusive]
  split
  · exact Machine.timed_frame (planExclusive_clock ..) (planExclusive_records ..) (planExclusive_now ..) hm
  · split
    · exact Machine.timed_frame (planExclusive_clock ..) (planExclusive_records ..) (planExclusive_now ..) hm
    · apply Machine.timed_start hm hb
      case hk => exact planExclusive_clock ..
      case hr => exact planExclusive_records ..
      case hn => exact planExclusive_now ..
      case hvb => rfl
      case hvr => rfl
      case hstart => rfl
      case hc =>
        simp only [engineView, Iteration.costOf]
        exact eval_batchOnly _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ hcost

/-- `startExclusive` of another stage keeps stage `s`'s invariant. -/
theorem startExclusive_timed_ne (p : Program) (f s' : Nat) (eng : Engine) (m : Machine) (c : Iteration → Nat)
    (s : Nat) (hne : s' ≠ s) (hm : m.timed c s) : (startExclusive p f s' eng m).timed c s := by
  have hk := planExclusive_clock p f s' (eval (engineView p m [0, 0, countDecoders (getEngineState m.engines s').residents,
    countResidents (getEngineState m.engines s').residents, waitingIn s' p.admitVia m.pools, 0, 0, 0, 0, 0, 0, 0,
    runningKvDecode p m (getEngineState m.engines s').residents,
    runningKvPrefill m (getEngineState m.engines s').residents]) [] m.now 0 eng.chunk) m
  simp only [startExclusive]
  repeat' split
  all_goals
    refine Machine.timed_frame ?_ ?_ ?_ hm <;>
      simp [hne, getEngineState_setEngineState_ne, planExclusive_clock, planExclusive_records, planExclusive_now]

section Run

variable (p : Program) (xs : List Nat) (s e : Nat) (hs : getService p.stages s = .step e)
  (hcost : (getEngine p.engines e).cost.batchOnly = true)

include hs hcost in
/-- `startStep` of any engine stage, from an idle engine there. -/
theorem startStep_timed (f : Nat) {s0 e0 : Nat} {m : Machine} (h0 : getService p.stages s0 = .step e0)
    (hb : (getEngineState m.engines s0).busy = false)
    (hm : m.timed (Iteration.costOf (getEngine p.engines e).cost) s) :
    (startStep p xs f s0 e0 m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  unfold startStep
  split
  · by_cases h : s0 = s
    · subst h
      rw [hs] at h0
      cases h0
      exact startExclusive_timed_self p f s0 _ m hcost hb hm
    · exact startExclusive_timed_ne p f s0 _ m _ s h hm
  · exact startIteration_timed p s e hs hcost f h0 hb hm

include hs hcost in
theorem startPassX_timed (f : Nat) (ss : List Service) (s0 : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s0 + k)) →
      m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (startPassX p xs f ss s0 tried m a).1.timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction startPassX p xs f ss s0 tried m a <;> intro hss hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (apply settle_timed
       apply startStep_timed p xs s e hs hcost
       · have h0 := hss 0
         simp only [getService, Nat.add_zero] at h0
         exact h0.symm
       · simp_all +zetaDelta
       · exact hm)
    | (rename_i ih
       apply ih (getService_tail hss)
       apply settle_timed
       apply startStep_timed p xs s e hs hcost
       · have h0 := hss 0
         simp only [getService, Nat.add_zero] at h0
         exact h0.symm
       · simp_all +zetaDelta
       · exact hm)

include hs hcost in
theorem startEnginesX_timed (f n : Nat) (tried : List Nat) (m : Machine) :
    m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (startEnginesX p xs f n tried m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction startEnginesX p xs f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassX_timed p xs s e hs hcost _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact ih (startPassX_timed p xs s e hs hcost _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm))

include hs hcost in
theorem endOfInstantX_timed (f : Nat) (m : Machine) (hm : m.timed (Iteration.costOf (getEngine p.engines e).cost) s) :
    (endOfInstantX p xs f m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  simp only [endOfInstantX]
  split
  · exact hm
  · exact startEnginesX_timed p xs s e hs hcost _ _ _ _ hm

include hs hcost in
theorem loopX_timed (f : Nat) (m : Machine) :
    m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (loopX p xs f m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction loopX p xs f m with
  | case1 m => intro hm; exact hm
  | case2 f m h => intro hm; exact hm
  | case3 f m t ts h ih =>
    intro hm
    exact ih (endOfInstantX_timed p xs s e hs hcost _ _ (settle_timed p _ _ _ s (timed_pop_fire p m _ s t ts h hm)))

end Run

/-- `runProgram_timed` with engines `xs` under `exclusive prefill`: every iteration record of an engine
stage whose `execute` reads only the batch starts no earlier than the one before it started plus that
one's cost, for every program of the fragment, every `xs` and any fuel. -/
theorem runProgramX_timed (p : Program) (xs : List Nat) (fuel s e : Nat) (hs : getService p.stages s = .step e)
    (hcost : (getEngine p.engines e).cost.batchOnly = true) :
    recordsTimed (Iteration.costOf (getEngine p.engines e).cost) (getEngineState (runProgramX p xs fuel).engines s).records :=
  (loopX_timed p xs s e hs hcost fuel _
    (endOfInstantX_timed p xs s e hs hcost fuel _ (settle_timed p fuel _ _ s (initial_timed p _ s e hs)))).2.1

theorem rateIterationsX_within (p : Program) (xs : List Nat) (fuel s e B : Nat) (hs : getService p.stages s = .step e)
    (hB : (getEngine p.engines e).budget = .num B) :
    ∀ i ∈ rateIterations (getEngineState (runProgramX p xs fuel).engines s).records, i.tokens ≤ B := by
  intro i hi
  simp only [rateIterations, List.mem_map, List.mem_reverse] at hi
  obtain ⟨r, hr, rfl⟩ := hi
  exact runProgramX_within_budget p xs fuel s e B hs hB r hr

/-- The token rate of an engine of constant budget `B` and `execute (a + b * batch.tokens)`, exclusive or
not: `served · (a + b·B) ≤ B · start` at every iteration, in every run of the program with engines `xs`
under `exclusive prefill`. -/
theorem runProgramX_affine_token_rate (p : Program) (xs : List Nat) (fuel s e B a b : Nat)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hc : (getEngine p.engines e).cost = .bin .add (.num a) (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    RateCost.RateHolds (a + b * B) B 0 (rateIterations (getEngineState (runProgramX p xs fuel).engines s).records) := by
  have hcost : (getEngine p.engines e).cost.batchOnly = true := by
    rw [hc]
    rfl
  have ht : RateCost.Timed (fun x => a + b * x) (rateIterations (getEngineState (runProgramX p xs fuel).engines s).records) :=
    rateIterations_timed _ _ (fun r => by rw [hc]; rfl) _ (runProgramX_timed p xs fuel s e hs hcost)
  exact RateCost.affine_token_rate a b B _ (rateIterationsX_within p xs fuel s e B hs hB) ht

/-- The same under `execute (a * ceil(batch.tokens / g) + b * batch.tokens)` and a budget of `m` tiles of
`g` (`B = g·m`): `served · (a·m + b·B) ≤ B · start`, exclusive or not. -/
theorem runProgramX_tiled_token_rate (p : Program) (xs : List Nat) (fuel s e a b g m : Nat) (hg : 0 < g)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num (g * m))
    (hc : (getEngine p.engines e).cost =
      .bin .add (.bin .mul (.num a) (.floorDiv (.bin .add (.stageVar StageVar.tokens) (.num (g - 1))) g))
        (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    RateCost.RateHolds (a * m + b * (g * m)) (g * m) 0
      (rateIterations (getEngineState (runProgramX p xs fuel).engines s).records) := by
  have hcost : (getEngine p.engines e).cost.batchOnly = true := by
    rw [hc]
    rfl
  have ht : RateCost.Timed (fun x => a * ((x + g - 1) / g) + b * x)
      (rateIterations (getEngineState (runProgramX p xs fuel).engines s).records) :=
    rateIterations_timed _ _ (fun r => by
      rw [hc]
      show a * ((r.tokens + (g - 1)) / g) + b * r.tokens = a * ((r.tokens + g - 1) / g) + b * r.tokens
      have e1 : r.tokens + (g - 1) = r.tokens + g - 1 := by omega
      rw [e1]) _ (runProgramX_timed p xs fuel s e hs hcost)
  exact RateCost.tiled_token_rate a b g m hg _ (rateIterationsX_within p xs fuel s e (g * m) hs hB) ht

/-! ### The records' `served` -/

theorem runningPrefill_engineServed (p : Program) (s c : Nat) (ts : List Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (runningPrefill p s c ts m b).1.engines j).served = (getEngineState m.engines j).served := by
  fun_induction runningPrefill p s c ts m b <;> simp_all +zetaDelta [Machine.serveOne_engineServed]

theorem exclusiveAdmit_engineServed (p : Program) (s c f : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (exclusiveAdmit p s c f m b).1.engines j).served = (getEngineState m.engines j).served := by
  fun_induction exclusiveAdmit p s c f m b <;>
    simp_all +zetaDelta [Machine.serveOne_engineServed, exec_engineServed]

theorem planExclusive_engineServed (p : Program) (f s c : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (planExclusive p f s c m b).1.engines j).served = (getEngineState m.engines j).served := by
  dsimp only [planExclusive]
  split
  · exact runningPrefill_engineServed ..
  · split
    · rw [serveIn_engineServed, runningPrefill_engineServed]
    · rw [exclusiveAdmit_engineServed, serveIn_engineServed, runningPrefill_engineServed]

theorem startExclusive_servedOk (p : Program) (f s : Nat) (eng : Engine) (m : Machine) (hm : m.servedOk) :
    (startExclusive p f s eng m).servedOk := by
  simp only [startExclusive]
  split
  · exact Machine.servedOk_frame (fun j => planExclusive_engineServed ..) (fun j => planExclusive_records ..) hm
  · split
    · exact Machine.servedOk_frame (fun j => planExclusive_engineServed ..) (fun j => planExclusive_records ..) hm
    · refine servedChain_set s _ rfl (fun j => planExclusive_engineServed ..) (fun j => planExclusive_records ..) ?_ hm
      simp only [planExclusive_engineServed, planExclusive_records, sumTokens, ServedChain]
      obtain ⟨h1, h2⟩ := hm s
      refine ⟨?_, h1, h2⟩
      rw [h1]
      omega

theorem startStep_servedOk (p : Program) (xs : List Nat) (f s e : Nat) (m : Machine) (hm : m.servedOk) :
    (startStep p xs f s e m).servedOk := by
  unfold startStep
  split
  · exact startExclusive_servedOk p f s _ m hm
  · exact startIteration_servedOk p f s _ m hm

theorem startPassX_servedOk (p : Program) (xs : List Nat) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat)
    (m : Machine) (a : Bool) : m.servedOk → (startPassX p xs f ss s tried m a).1.servedOk := by
  fun_induction startPassX p xs f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_servedOk p _ _ (startStep_servedOk _ _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_servedOk p _ _ (startStep_servedOk _ _ _ _ _ _ hm)))

theorem startEnginesX_servedOk (p : Program) (xs : List Nat) (f n : Nat) (tried : List Nat) (m : Machine) :
    m.servedOk → (startEnginesX p xs f n tried m).servedOk := by
  fun_induction startEnginesX p xs f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassX_servedOk p _ _ _ _ _ _ _ hm
    | (rename_i ih; exact ih (startPassX_servedOk p _ _ _ _ _ _ _ hm))

theorem endOfInstantX_servedOk (p : Program) (xs : List Nat) (f : Nat) (m : Machine) (hm : m.servedOk) :
    (endOfInstantX p xs f m).servedOk := by
  simp only [endOfInstantX]
  split
  · exact hm
  · exact startEnginesX_servedOk p _ _ _ _ _ hm

theorem loopX_servedOk (p : Program) (xs : List Nat) (f : Nat) (m : Machine) :
    m.servedOk → (loopX p xs f m).servedOk := by
  fun_induction loopX p xs f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstantX_servedOk p _ _ _ (settle_servedOk p _ _
      (fire_servedOk p _ _ (Machine.servedOk_frame (fun _ => rfl) (fun _ => rfl) hm))))

/-- `runProgram_servedOk` with engines `xs` under `exclusive prefill`: every engine's records are a
`ServedChain` (a record's `served` is the tokens of the iterations before it). -/
theorem runProgramX_servedOk (p : Program) (xs : List Nat) (fuel : Nat) : (runProgramX p xs fuel).servedOk := by
  unfold runProgramX
  exact loopX_servedOk p _ _ _ (endOfInstantX_servedOk p _ _ _ (settle_servedOk p _ _ (initial_servedOk p)))

/-- The token rate per record, as a claim reads it, of an engine of constant budget `B` and `execute (a +
b * batch.tokens)`, exclusive or not: every record has `served · (a + b·B) ≤ B · start`. -/
theorem runProgramX_affine_served_rate (p : Program) (xs : List Nat) (fuel s e B a b : Nat)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hc : (getEngine p.engines e).cost = .bin .add (.num a) (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    ∀ r ∈ (getEngineState (runProgramX p xs fuel).engines s).records, r.served * (a + b * B) ≤ B * r.start :=
  served_rate_of_RateHolds _ _ _ (runProgramX_servedOk p xs fuel s).2
    (runProgramX_affine_token_rate p xs fuel s e B a b hs hB hc)

/-- The same under the tiled `execute` (`runProgramX_tiled_token_rate`): every record has `served · (a·m +
b·B) ≤ B · start`, `B = g·m`. -/
theorem runProgramX_tiled_served_rate (p : Program) (xs : List Nat) (fuel s e a b g m : Nat) (hg : 0 < g)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num (g * m))
    (hc : (getEngine p.engines e).cost =
      .bin .add (.bin .mul (.num a) (.floorDiv (.bin .add (.stageVar StageVar.tokens) (.num (g - 1))) g))
        (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    ∀ r ∈ (getEngineState (runProgramX p xs fuel).engines s).records,
      r.served * (a * m + b * (g * m)) ≤ (g * m) * r.start :=
  served_rate_of_RateHolds _ _ _ (runProgramX_servedOk p xs fuel s).2
    (runProgramX_tiled_token_rate p xs fuel s e a b g m hg hs hB hc)

/-! ### Causality: no turn answered before it started -/

theorem exec_admitted_causal (p : Program) (f : Nat) (m : Machine) (st : List Nat) (i j : Nat) (hm : m.causal) :
    (exec p f (m.admitWaiter p st i j)
      (getThread (m.admitWaiter p st i j).threads (getWaiter (getPool m.pools i).queue j).thread)).causal :=
  exec_causal p f _ _ (Machine.admitWaiter_causal p m st i j hm)
    (getThread_causal _ _ _ (Machine.admitWaiter_causal p m st i j hm))

theorem runningPrefill_causal (p : Program) (s c : Nat) (ts : List Nat) (m : Machine) (b : Batch) :
    m.causal → (runningPrefill p s c ts m b).1.causal := by
  fun_induction runningPrefill p s c ts m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.serveOne_causal p _ _ _ _ _ hm
    | (rename_i ih; exact ih hm)
    | (rename_i ih; exact ih (Machine.serveOne_causal p _ _ _ _ _ hm))

theorem exclusiveAdmit_causal (p : Program) (s c f : Nat) (m : Machine) (b : Batch) :
    m.causal → (exclusiveAdmit p s c f m b).1.causal := by
  fun_induction exclusiveAdmit p s c f m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.causal_of_threads rfl rfl hm
    | exact exec_admitted_causal p _ _ _ _ _ hm
    | exact Machine.causal_of_threads rfl rfl (exec_admitted_causal p _ _ _ _ _ hm)
    | exact Machine.serveOne_causal p _ _ _ _ _ (Machine.causal_of_threads rfl rfl (exec_admitted_causal p _ _ _ _ _ hm))
    | exact Machine.serveOne_causal p _ _ _ _ _ (exec_admitted_causal p _ _ _ _ _ hm)
    | (rename_i ih; exact ih (Machine.serveOne_causal p _ _ _ _ _ (exec_admitted_causal p _ _ _ _ _ hm)))
    | (rename_i ih; exact ih (exec_admitted_causal p _ _ _ _ _ hm))

theorem planExclusive_causal (p : Program) (f s c : Nat) (m : Machine) (b : Batch) (hm : m.causal) :
    (planExclusive p f s c m b).1.causal := by
  have h1 := runningPrefill_causal p s c (threadsOf (getEngineState m.engines s).residents) m b hm
  dsimp only [planExclusive]
  split
  · exact h1
  · split
    · exact serveIn_causal p _ _ _ _ _ _ h1
    · exact exclusiveAdmit_causal p _ _ _ _ _ (serveIn_causal p _ _ _ _ _ _ h1)

theorem startExclusive_causal (p : Program) (f s : Nat) (eng : Engine) (m : Machine) :
    m.causal → (startExclusive p f s eng m).causal := by
  intro hm
  simp only [startExclusive]
  repeat' split
  all_goals first
    | exact planExclusive_causal p _ _ _ _ _ hm
    | exact Machine.causal_of_threads rfl rfl (planExclusive_causal p _ _ _ _ _ hm)

theorem startStep_causal (p : Program) (xs : List Nat) (f s e : Nat) (m : Machine) (hm : m.causal) :
    (startStep p xs f s e m).causal := by
  unfold startStep
  split
  · exact startExclusive_causal p f s _ m hm
  · exact startIteration_causal p f s _ m hm

theorem startPassX_causal (p : Program) (xs : List Nat) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat)
    (m : Machine) (a : Bool) : m.causal → (startPassX p xs f ss s tried m a).1.causal := by
  fun_induction startPassX p xs f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_causal p _ _ (startStep_causal p _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_causal p _ _ (startStep_causal p _ _ _ _ _ hm)))

theorem startEnginesX_causal (p : Program) (xs : List Nat) (f n : Nat) (tried : List Nat) (m : Machine) :
    m.causal → (startEnginesX p xs f n tried m).causal := by
  fun_induction startEnginesX p xs f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassX_causal p _ _ _ _ _ _ _ hm
    | (rename_i ih; exact ih (startPassX_causal p _ _ _ _ _ _ _ hm))

theorem endOfInstantX_causal (p : Program) (xs : List Nat) (f : Nat) (m : Machine) :
    m.causal → (endOfInstantX p xs f m).causal := by
  intro hm
  simp only [endOfInstantX]
  split
  · exact hm
  · exact startEnginesX_causal p _ _ _ _ _ hm

theorem loopX_causal (p : Program) (xs : List Nat) (f : Nat) (m : Machine) : m.causal → (loopX p xs f m).causal := by
  fun_induction loopX p xs f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    apply ih
    apply endOfInstantX_causal
    apply settle_causal
    apply fire_causal
    intro th hth
    exact Thread.causalAt_mono (hm th hth) (Nat.le_max_left _ _)

/-- `runProgram_causal` with engines `xs` under `exclusive prefill`: in every run of every program, every
answered turn was answered no earlier than it started. -/
theorem runProgramX_causal (p : Program) (xs : List Nat) (fuel : Nat) :
    ∀ th ∈ (runProgramX p xs fuel).threads, ∀ a ∈ th.answers, a.start ≤ a.answered := by
  intro th hth a ha
  have h : (runProgramX p xs fuel).causal := by
    unfold runProgramX
    exact loopX_causal p _ _ _ (endOfInstantX_causal p _ _ _ (settle_causal p _ _ (initial_causal p)))
  exact (h th hth).1 a ha

end Serq.Kernel
