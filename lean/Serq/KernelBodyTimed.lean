module

public import Serq.KernelBodyBudget
public import Serq.KernelExclusiveTimed

/-! # Iteration bodies: timed, the records' `served`, the token rate, causality

`Serq.KernelExclusiveTimed`'s theorems for the run with engines that plan from an iteration body
(`runProgramB`, `Serq.KernelBody`), whichever engines plan under `exclusive prefill` (`xs`) or from a body
(`bodies`): the records of an engine stage whose `execute` reads only the batch start no earlier than the
one before it started plus that one's cost (`runProgramB_timed`), with `runProgramB_within_budget` the
token rates (`runProgramB_affine_token_rate`, `runProgramB_tiled_token_rate`), each record's `served` the
tokens of the iterations before it (`runProgramB_servedOk`) and so the rates per record as a claim reads
them (`runProgramB_affine_served_rate`, `runProgramB_tiled_served_rate`), and no turn answered before it
started (`runProgramB_causal`).

A body's plan is the kernel's `serveIn` and `admitOne` in some order (`planBody_preserves`: whatever
relation between machines both keep, and cutting the fuel keeps, the plan keeps), so it sets no timer,
makes no engine busy or idle, adds no record, keeps every engine's served count and the clock, and keeps
causality; `startBody` ends as `startIteration` does.
-/
@[expose] public section

namespace Serq.Kernel

section Invariant

variable (p : Program) (s chunk : Nat) (keys : List Expr) (I : Machine → Prop)
  (hfuel : ∀ m, I m → I { m with outOfFuel := true })
  (hserve : ∀ q rs m b, I m → I (serveIn p s chunk q (threadsOf rs) m b).1)
  (hadmit : ∀ f i q m b, I m → firstQueue s 0 p.admitVia m.pools = some i →
    fits p m.threads ⟨p.caps, m.pools,
      (getThread m.threads (getWaiter (getPool m.pools i).queue (select p m i (getPool m.pools i).queue)).thread).serial,
      admissionStage chunk b.budget⟩
      (getThread m.threads (getWaiter (getPool m.pools i).queue (select p m i (getPool m.pools i).queue)).thread).attrs
      m.now (getWaiter (getPool m.pools i).queue (select p m i (getPool m.pools i).queue)).on = true →
    I (admitOne p f s chunk i (select p m i (getPool m.pools i).queue) q m b).1)

include hfuel hadmit in
theorem admitB_inv (q g : Option Expr) : ∀ (f : Nat) (pl : Plan), I pl.m → I (admitB p s chunk q g f pl).m := by
  intro f
  induction f with
  | zero => intro pl hm; exact hfuel _ hm
  | succ f ih =>
    intro pl hm
    simp only [admitB]
    repeat' split
    all_goals first
      | exact hm
      | (apply ih
         dsimp only
         rw [admitOneB_fst]
         apply hadmit f _ q pl.m pl.b hm
         · assumption
         · assumption)

/-- The residents' order `advance running` reads is some residents' threads. -/
theorem serveOrder_threadsOf (m : Machine) : ∀ keys : List Expr, ∃ rs, serveOrder p m s keys = threadsOf rs
  | [] => ⟨_, rfl⟩
  | _ :: _ => ⟨_, rfl⟩

include hfuel hserve hadmit in
/-- Whatever property of machines `serveIn` (over some residents' threads), `admitOne` (of the head it
admits, when it fits) and cutting the fuel keep, a body's plan keeps. -/
theorem planBody_inv (f : Nat) : ∀ (n : Nat) (body : List IterStmt) (pl : Plan),
    I pl.m → I (planBody p f s chunk keys n body pl).m := by
  intro n
  induction n with
  | zero => intro body pl hm; exact hfuel _ hm
  | succ n ih =>
    intro body pl hm
    cases body with
    | nil => exact hm
    | cons st rest =>
      cases st with
      | serve q =>
        simp only [planBody]
        apply ih
        split
        · exact hm
        · dsimp only
          rw [serveInB_fst]
          obtain ⟨rs, hrs⟩ := serveOrder_threadsOf p s pl.m (Expr.withRegsList pl.regs keys)
          rw [hrs]
          exact hserve _ rs pl.m pl.b hm
      | admit q g =>
        simp only [planBody]
        exact ih _ _ (admitB_inv p s chunk I hfuel hadmit _ g f pl hm)
      | branch t yes no =>
        simp only [planBody]
        exact ih _ _ (ih _ _ hm)
      | set k e =>
        simp only [planBody]
        exact ih _ _ hm

end Invariant

/-- Whatever relation between machines `serveIn`, `admitOne` and cutting the fuel keep (reflexive and
transitive), a body's plan keeps (`planBody_inv` of "related to where the plan started"). -/
theorem planBody_preserves (p : Program) (s chunk : Nat) (keys : List Expr) (R : Machine → Machine → Prop)
    (hrefl : ∀ m, R m m) (htrans : ∀ a b c, R a b → R b c → R a c)
    (hfuel : ∀ m, R m { m with outOfFuel := true })
    (hserve : ∀ q ts m b, R m (serveIn p s chunk q ts m b).1)
    (hadmit : ∀ f i k q m b, R m (admitOne p f s chunk i k q m b).1) (f n : Nat) (body : List IterStmt) (pl : Plan) :
    R pl.m (planBody p f s chunk keys n body pl).m :=
  planBody_inv p s chunk keys (R pl.m) (fun m h => htrans _ _ _ h (hfuel m)) (fun q rs m b h => htrans _ _ _ h (hserve ..))
    (fun f i q m b h _ _ => htrans _ _ _ h (hadmit ..)) f n body pl (hrefl _)

/-! ### What a body's plan keeps -/

theorem planBody_now (p : Program) (f s c : Nat) (keys : List Expr) (n : Nat) (body : List IterStmt) (pl : Plan) :
    (planBody p f s c keys n body pl).m.now = pl.m.now :=
  planBody_preserves p s c keys (fun m m' => m'.now = m.now) (fun _ => rfl) (fun _ _ _ h1 h2 => h2.trans h1)
    (fun _ => rfl) (fun _ _ _ _ => serveIn_now ..) (fun _ _ _ _ _ _ => admitOne_now ..) f n body pl

theorem planBody_engineServed (p : Program) (f s c : Nat) (keys : List Expr) (n : Nat) (body : List IterStmt)
    (pl : Plan) (j : Nat) :
    (getEngineState (planBody p f s c keys n body pl).m.engines j).served = (getEngineState pl.m.engines j).served :=
  planBody_preserves p s c keys (fun m m' => (getEngineState m'.engines j).served = (getEngineState m.engines j).served)
    (fun _ => rfl) (fun _ _ _ h1 h2 => h2.trans h1) (fun _ => rfl) (fun _ _ _ _ => serveIn_engineServed ..)
    (fun _ _ _ _ _ _ => admitOne_engineServed ..) f n body pl

theorem planBody_clock (p : Program) (f st c : Nat) (keys : List Expr) (n : Nat) (body : List IterStmt) (pl : Plan)
    (s : Nat) :
    endTimes s (planBody p f st c keys n body pl).m.timers = endTimes s pl.m.timers ∧
      (getEngineState (planBody p f st c keys n body pl).m.engines s).busy = (getEngineState pl.m.engines s).busy ∧
      (s < (planBody p f st c keys n body pl).m.engines.length ↔ s < pl.m.engines.length) :=
  planBody_preserves p st c keys (fun m m' => endTimes s m'.timers = endTimes s m.timers ∧
      (getEngineState m'.engines s).busy = (getEngineState m.engines s).busy ∧
      (s < m'.engines.length ↔ s < m.engines.length))
    (fun _ => ⟨rfl, rfl, Iff.rfl⟩)
    (fun _ _ _ h1 h2 => ⟨h2.1.trans h1.1, h2.2.1.trans h1.2.1, h2.2.2.trans h1.2.2⟩)
    (fun _ => ⟨rfl, rfl, Iff.rfl⟩) (fun _ _ _ _ => serveIn_clock ..) (fun _ _ _ _ _ _ => admitOne_clock ..) f n body pl

theorem planBody_causal (p : Program) (f s c : Nat) (keys : List Expr) (n : Nat) (body : List IterStmt) (pl : Plan)
    (hm : pl.m.causal) : (planBody p f s c keys n body pl).m.causal :=
  planBody_preserves p s c keys (fun m m' => m.causal → m'.causal) (fun _ h => h) (fun _ _ _ h1 h2 h => h2 (h1 h))
    (fun _ h => Machine.causal_of_threads rfl rfl h) (fun q ts m b => serveIn_causal p s c q ts m b)
    (fun f' i k q m b => admitOne_causal p f' s c i k q m b) f n body pl hm

/-! ### Timed -/

/-- An `execute` that reads only the batch reads no register. -/
theorem Expr.withRegs_of_batchOnly (rs : List Nat) : ∀ (e : Expr), e.batchOnly = true → e.withRegs rs = e
  | .num _, _ | .blockSize _, _ | .attr _, _ | .now, _ | .waited, _ | .used _, _ | .free _, _ | .holders _, _
  | .queued _, _ | .cachedIn _, _ => rfl
  | .stageVar i, h => by
    simp only [Expr.batchOnly, Bool.or_eq_true, decide_eq_true_eq] at h
    simp only [Expr.withRegs, StageVar.registers]
    rw [if_pos (by omega)]
  | .not e, h => by
    simp only [Expr.batchOnly] at h
    simp only [Expr.withRegs, Expr.withRegs_of_batchOnly rs e h]
  | .bin _ l r, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [Expr.withRegs, Expr.withRegs_of_batchOnly rs l h.1, Expr.withRegs_of_batchOnly rs r h.2]
  | .cond t a b, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [Expr.withRegs, Expr.withRegs_of_batchOnly rs t h.1.1, Expr.withRegs_of_batchOnly rs a h.1.2,
      Expr.withRegs_of_batchOnly rs b h.2]
  | .min a b, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [Expr.withRegs, Expr.withRegs_of_batchOnly rs a h.1, Expr.withRegs_of_batchOnly rs b h.2]
  | .max a b, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [Expr.withRegs, Expr.withRegs_of_batchOnly rs a h.1, Expr.withRegs_of_batchOnly rs b h.2]
  | .floorDiv a _, h => by
    simp only [Expr.batchOnly] at h
    simp only [Expr.withRegs, Expr.withRegs_of_batchOnly rs a h]

/-- Committing an engine's registers keeps every stage's invariant. -/
theorem Machine.timed_commitRegs {c : Iteration → Nat} {s st : Nat} {rs : List Nat} {m : Machine} (h : m.timed c s) :
    (m.commitRegs st rs).timed c s :=
  Machine.timed_frame (m := m) (m' := m.commitRegs st rs)
    ⟨rfl, Machine.commitRegs_busy m st rs s, by simp [Machine.commitRegs]⟩ (Machine.commitRegs_records m st rs s) rfl h

/-- `startBody` of stage `s` from an idle engine whose `execute` reads only the batch. -/
theorem startBody_timed_self (p : Program) (f s : Nat) (eng : Engine) (body : Body) (m : Machine)
    (hcost : eng.cost.batchOnly = true) (hb : (getEngineState m.engines s).busy = false)
    (hm : m.timed (Iteration.costOf eng.cost) s) : (startBody p f s eng body m).timed (Iteration.costOf eng.cost) s := by
  simp only [startBody]
  split
  · split
    · exact Machine.timed_frame (planBody_clock ..) (planBody_records ..) (planBody_now ..) hm
    · exact Machine.timed_commitRegs (Machine.timed_frame (planBody_clock ..) (planBody_records ..) (planBody_now ..) hm)
  · split
    · exact Machine.timed_frame (planBody_clock ..) (planBody_records ..) (planBody_now ..) hm
    · apply Machine.timed_start hm hb
      case hk => exact planBody_clock ..
      case hr => exact planBody_records ..
      case hn => exact planBody_now ..
      case hvb => rfl
      case hvr => rfl
      case hstart => rfl
      case hc =>
        simp only [engineView, Iteration.costOf, Expr.withRegs_of_batchOnly _ _ hcost]
        exact eval_batchOnly _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ hcost

/-- `startBody` of another stage keeps stage `s`'s invariant. -/
theorem startBody_timed_ne (p : Program) (f s' : Nat) (eng : Engine) (body : Body) (m : Machine)
    (c : Iteration → Nat) (s : Nat) (hne : s' ≠ s) (hm : m.timed c s) : (startBody p f s' eng body m).timed c s := by
  simp only [startBody]
  repeat' split
  all_goals first
    | exact Machine.timed_commitRegs (Machine.timed_frame (planBody_clock ..) (planBody_records ..) (planBody_now ..) hm)
    | (refine Machine.timed_frame ?_ ?_ ?_ hm <;>
        simp [hne, getEngineState_setEngineState_ne, planBody_clock, planBody_records, planBody_now])

section Run

variable (p : Program) (xs : List Nat) (bodies : List Body) (s e : Nat) (hs : getService p.stages s = .step e)
  (hcost : (getEngine p.engines e).cost.batchOnly = true)

include hs hcost in
/-- `startStepB` of any engine stage, from an idle engine there. -/
theorem startStepB_timed (f : Nat) {s0 e0 : Nat} {m : Machine} (h0 : getService p.stages s0 = .step e0)
    (hb : (getEngineState m.engines s0).busy = false)
    (hm : m.timed (Iteration.costOf (getEngine p.engines e).cost) s) :
    (startStepB p xs bodies f s0 e0 m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  unfold startStepB
  split
  · exact startStep_timed p xs s e hs hcost f h0 hb hm
  · by_cases h : s0 = s
    · subst h
      rw [hs] at h0
      cases h0
      exact startBody_timed_self p f s0 _ _ m hcost hb hm
    · exact startBody_timed_ne p f s0 _ _ m _ s h hm

include hs hcost in
theorem startPassB_timed (f : Nat) (ss : List Service) (s0 : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s0 + k)) →
      m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (startPassB p xs bodies f ss s0 tried m a).1.timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction startPassB p xs bodies f ss s0 tried m a <;> intro hss hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (apply settle_timed
       apply startStepB_timed p xs bodies s e hs hcost
       · have h0 := hss 0
         simp only [getService, Nat.add_zero] at h0
         exact h0.symm
       · simp_all +zetaDelta
       · exact hm)
    | (rename_i ih
       apply ih (getService_tail hss)
       apply settle_timed
       apply startStepB_timed p xs bodies s e hs hcost
       · have h0 := hss 0
         simp only [getService, Nat.add_zero] at h0
         exact h0.symm
       · simp_all +zetaDelta
       · exact hm)

include hs hcost in
theorem startEnginesB_timed (f n : Nat) (tried : List Nat) (m : Machine) :
    m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (startEnginesB p xs bodies f n tried m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction startEnginesB p xs bodies f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassB_timed p xs bodies s e hs hcost _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact ih (startPassB_timed p xs bodies s e hs hcost _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm))

include hs hcost in
theorem endOfInstantB_timed (f : Nat) (m : Machine) (hm : m.timed (Iteration.costOf (getEngine p.engines e).cost) s) :
    (endOfInstantB p xs bodies f m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  simp only [endOfInstantB]
  split
  · exact hm
  · exact startEnginesB_timed p xs bodies s e hs hcost _ _ _ _ hm

include hs hcost in
theorem loopB_timed (f : Nat) (m : Machine) :
    m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (loopB p xs bodies f m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction loopB p xs bodies f m with
  | case1 m => intro hm; exact hm
  | case2 f m h => intro hm; exact hm
  | case3 f m t ts h ih =>
    intro hm
    exact ih (endOfInstantB_timed p xs bodies s e hs hcost _ _
      (settle_timed p _ _ _ s (timed_pop_fire p m _ s t ts h hm)))

end Run

/-- `runProgram_timed` with engines `xs` under `exclusive prefill` and engines planning from a body: every
iteration record of an engine stage whose `execute` reads only the batch starts no earlier than the one
before it started plus that one's cost, for every program of the fragment and any fuel. -/
theorem runProgramB_timed (p : Program) (xs : List Nat) (bodies : List Body) (fuel s e : Nat)
    (hs : getService p.stages s = .step e) (hcost : (getEngine p.engines e).cost.batchOnly = true) :
    recordsTimed (Iteration.costOf (getEngine p.engines e).cost)
      (getEngineState (runProgramB p xs bodies fuel).engines s).records :=
  (loopB_timed p xs bodies s e hs hcost fuel _
    (endOfInstantB_timed p xs bodies s e hs hcost fuel _ (settle_timed p fuel _ _ s (initial_timed p _ s e hs)))).2.1

theorem rateIterationsB_within (p : Program) (xs : List Nat) (bodies : List Body) (fuel s e B : Nat)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B) :
    ∀ i ∈ rateIterations (getEngineState (runProgramB p xs bodies fuel).engines s).records, i.tokens ≤ B := by
  intro i hi
  simp only [rateIterations, List.mem_map, List.mem_reverse] at hi
  obtain ⟨r, hr, rfl⟩ := hi
  exact runProgramB_within_budget p xs bodies fuel s e B hs hB r hr

/-- The token rate of an engine of constant budget `B` and `execute (a + b * batch.tokens)`, whatever its
schedule: `served · (a + b·B) ≤ B · start` at every iteration. -/
theorem runProgramB_affine_token_rate (p : Program) (xs : List Nat) (bodies : List Body) (fuel s e B a b : Nat)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hc : (getEngine p.engines e).cost = .bin .add (.num a) (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    RateCost.RateHolds (a + b * B) B 0
      (rateIterations (getEngineState (runProgramB p xs bodies fuel).engines s).records) := by
  have hcost : (getEngine p.engines e).cost.batchOnly = true := by
    rw [hc]
    rfl
  have ht : RateCost.Timed (fun x => a + b * x)
      (rateIterations (getEngineState (runProgramB p xs bodies fuel).engines s).records) :=
    rateIterations_timed _ _ (fun r => by rw [hc]; rfl) _ (runProgramB_timed p xs bodies fuel s e hs hcost)
  exact RateCost.affine_token_rate a b B _ (rateIterationsB_within p xs bodies fuel s e B hs hB) ht

/-- The same under `execute (a * ceil(batch.tokens / g) + b * batch.tokens)` and a budget of `m` tiles of
`g` (`B = g·m`): `served · (a·m + b·B) ≤ B · start`, whatever the schedule. -/
theorem runProgramB_tiled_token_rate (p : Program) (xs : List Nat) (bodies : List Body)
    (fuel s e a b g m : Nat) (hg : 0 < g)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num (g * m))
    (hc : (getEngine p.engines e).cost =
      .bin .add (.bin .mul (.num a) (.floorDiv (.bin .add (.stageVar StageVar.tokens) (.num (g - 1))) g))
        (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    RateCost.RateHolds (a * m + b * (g * m)) (g * m) 0
      (rateIterations (getEngineState (runProgramB p xs bodies fuel).engines s).records) := by
  have hcost : (getEngine p.engines e).cost.batchOnly = true := by
    rw [hc]
    rfl
  have ht : RateCost.Timed (fun x => a * ((x + g - 1) / g) + b * x)
      (rateIterations (getEngineState (runProgramB p xs bodies fuel).engines s).records) :=
    rateIterations_timed _ _ (fun r => by
      rw [hc]
      show a * ((r.tokens + (g - 1)) / g) + b * r.tokens = a * ((r.tokens + g - 1) / g) + b * r.tokens
      have e1 : r.tokens + (g - 1) = r.tokens + g - 1 := by omega
      rw [e1]) _ (runProgramB_timed p xs bodies fuel s e hs hcost)
  exact RateCost.tiled_token_rate a b g m hg _ (rateIterationsB_within p xs bodies fuel s e (g * m) hs hB) ht

/-! ### The records' `served` -/

theorem startBody_servedOk (p : Program) (f s : Nat) (eng : Engine) (body : Body) (m : Machine)
    (hm : m.servedOk) : (startBody p f s eng body m).servedOk := by
  simp only [startBody]
  split
  · split
    · exact Machine.servedOk_frame (fun j => planBody_engineServed ..) (fun j => planBody_records ..) hm
    · exact Machine.servedOk_frame (fun j => (Machine.commitRegs_served ..).trans (planBody_engineServed ..))
        (fun j => (Machine.commitRegs_records ..).trans (planBody_records ..)) hm
  · split
    · exact Machine.servedOk_frame (fun j => planBody_engineServed ..) (fun j => planBody_records ..) hm
    · refine servedChain_set s _ rfl (fun j => planBody_engineServed ..) (fun j => planBody_records ..) ?_ hm
      simp only [planBody_engineServed, planBody_records, sumTokens, ServedChain]
      obtain ⟨h1, h2⟩ := hm s
      refine ⟨?_, h1, h2⟩
      rw [h1]
      omega

theorem startStepB_servedOk (p : Program) (xs : List Nat) (bodies : List Body) (f s e : Nat) (m : Machine)
    (hm : m.servedOk) : (startStepB p xs bodies f s e m).servedOk := by
  unfold startStepB
  split
  · exact startStep_servedOk p xs f s e m hm
  · exact startBody_servedOk p f s _ _ m hm

theorem startPassB_servedOk (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (ss : List Service)
    (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) : m.servedOk → (startPassB p xs bodies f ss s tried m a).1.servedOk := by
  fun_induction startPassB p xs bodies f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_servedOk p _ _ (startStepB_servedOk _ _ _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_servedOk p _ _ (startStepB_servedOk _ _ _ _ _ _ _ hm)))

theorem startEnginesB_servedOk (p : Program) (xs : List Nat) (bodies : List Body) (f n : Nat)
    (tried : List Nat) (m : Machine) : m.servedOk → (startEnginesB p xs bodies f n tried m).servedOk := by
  fun_induction startEnginesB p xs bodies f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassB_servedOk p _ _ _ _ _ _ _ _ hm
    | (rename_i ih; exact ih (startPassB_servedOk p _ _ _ _ _ _ _ _ hm))

theorem endOfInstantB_servedOk (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine)
    (hm : m.servedOk) : (endOfInstantB p xs bodies f m).servedOk := by
  simp only [endOfInstantB]
  split
  · exact hm
  · exact startEnginesB_servedOk p _ _ _ _ _ _ hm

theorem loopB_servedOk (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine) :
    m.servedOk → (loopB p xs bodies f m).servedOk := by
  fun_induction loopB p xs bodies f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstantB_servedOk p _ _ _ _ (settle_servedOk p _ _
      (fire_servedOk p _ _ (Machine.servedOk_frame (fun _ => rfl) (fun _ => rfl) hm))))

/-- `runProgram_servedOk` with engines planning from a body: every engine's records are a `ServedChain`
(a record's `served` is the tokens of the iterations before it). -/
theorem runProgramB_servedOk (p : Program) (xs : List Nat) (bodies : List Body) (fuel : Nat) :
    (runProgramB p xs bodies fuel).servedOk := by
  unfold runProgramB
  exact loopB_servedOk p _ _ _ _ (endOfInstantB_servedOk p _ _ _ _ (settle_servedOk p _ _ (initial_servedOk p)))

/-- The token rate per record, as a claim reads it, of an engine of constant budget `B` and `execute (a +
b * batch.tokens)`, whatever its schedule: every record has `served · (a + b·B) ≤ B · start`. -/
theorem runProgramB_affine_served_rate (p : Program) (xs : List Nat) (bodies : List Body)
    (fuel s e B a b : Nat) (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hc : (getEngine p.engines e).cost = .bin .add (.num a) (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    ∀ r ∈ (getEngineState (runProgramB p xs bodies fuel).engines s).records, r.served * (a + b * B) ≤ B * r.start :=
  served_rate_of_RateHolds _ _ _ (runProgramB_servedOk p xs bodies fuel s).2
    (runProgramB_affine_token_rate p xs bodies fuel s e B a b hs hB hc)

/-- The same under the tiled `execute` (`runProgramB_tiled_token_rate`): every record has `served · (a·m +
b·B) ≤ B · start`, `B = g·m`. -/
theorem runProgramB_tiled_served_rate (p : Program) (xs : List Nat) (bodies : List Body)
    (fuel s e a b g m : Nat) (hg : 0 < g)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num (g * m))
    (hc : (getEngine p.engines e).cost =
      .bin .add (.bin .mul (.num a) (.floorDiv (.bin .add (.stageVar StageVar.tokens) (.num (g - 1))) g))
        (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    ∀ r ∈ (getEngineState (runProgramB p xs bodies fuel).engines s).records,
      r.served * (a * m + b * (g * m)) ≤ (g * m) * r.start :=
  served_rate_of_RateHolds _ _ _ (runProgramB_servedOk p xs bodies fuel s).2
    (runProgramB_tiled_token_rate p xs bodies fuel s e a b g m hg hs hB hc)

/-! ### Causality: no turn answered before it started -/

theorem startBody_causal (p : Program) (f s : Nat) (eng : Engine) (body : Body) (m : Machine) :
    m.causal → (startBody p f s eng body m).causal := by
  intro hm
  simp only [startBody]
  repeat' split
  all_goals first
    | exact planBody_causal p _ _ _ _ _ _ _ hm
    | exact Machine.causal_of_threads rfl rfl (planBody_causal p _ _ _ _ _ _ _ hm)

theorem startStepB_causal (p : Program) (xs : List Nat) (bodies : List Body) (f s e : Nat) (m : Machine)
    (hm : m.causal) : (startStepB p xs bodies f s e m).causal := by
  unfold startStepB
  split
  · exact startStep_causal p xs f s e m hm
  · exact startBody_causal p f s _ _ m hm

theorem startPassB_causal (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (ss : List Service)
    (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) : m.causal → (startPassB p xs bodies f ss s tried m a).1.causal := by
  fun_induction startPassB p xs bodies f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_causal p _ _ (startStepB_causal p _ _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_causal p _ _ (startStepB_causal p _ _ _ _ _ _ hm)))

theorem startEnginesB_causal (p : Program) (xs : List Nat) (bodies : List Body) (f n : Nat)
    (tried : List Nat) (m : Machine) : m.causal → (startEnginesB p xs bodies f n tried m).causal := by
  fun_induction startEnginesB p xs bodies f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassB_causal p _ _ _ _ _ _ _ _ hm
    | (rename_i ih; exact ih (startPassB_causal p _ _ _ _ _ _ _ _ hm))

theorem endOfInstantB_causal (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine) :
    m.causal → (endOfInstantB p xs bodies f m).causal := by
  intro hm
  simp only [endOfInstantB]
  split
  · exact hm
  · exact startEnginesB_causal p _ _ _ _ _ _ hm

theorem loopB_causal (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine) :
    m.causal → (loopB p xs bodies f m).causal := by
  fun_induction loopB p xs bodies f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    apply ih
    apply endOfInstantB_causal
    apply settle_causal
    apply fire_causal
    intro th hth
    exact Thread.causalAt_mono (hm th hth) (Nat.le_max_left _ _)

/-- `runProgram_causal` with engines planning from a body: in every run of every program, every answered
turn was answered no earlier than it started. -/
theorem runProgramB_causal (p : Program) (xs : List Nat) (bodies : List Body) (fuel : Nat) :
    ∀ th ∈ (runProgramB p xs bodies fuel).threads, ∀ a ∈ th.answers, a.start ≤ a.answered := by
  intro th hth a ha
  have h : (runProgramB p xs bodies fuel).causal := by
    unfold runProgramB
    exact loopB_causal p _ _ _ _ (endOfInstantB_causal p _ _ _ _ (settle_causal p _ _ (initial_causal p)))
  exact (h th hth).1 a ha

end Serq.Kernel
