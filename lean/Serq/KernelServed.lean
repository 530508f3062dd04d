module

public import Serq.KernelTimed

/-! # The token rate read off an iteration record: `r.served · T ≤ B · r.start`

`Serq.Kernel.runProgram_affine_token_rate` and `runProgram_tiled_token_rate` (`Serq.KernelTimed`)
prove the token rate of a program's engine over its records as `Serq.RateCost` reads them: the tokens
of the iterations before one, summed, times the period `T`, within the budget times its start. A claim
(`every iteration of llm (served * T <= B * now)`) reads the record's own `served` field, which the
engine keeps as it goes: `startIteration` writes the engine's running count of served tokens into the
record, then adds the batch's tokens to it. This module proves that the two are the same number in
every kernel run (`runProgram_servedOk`: each record's `served` is the sum of the tokens of the records
before it, `ServedChain`, and the engine's count the sum of all), and so the rate per record
(`runProgram_affine_served_rate`, `runProgram_tiled_served_rate`), the form a paper program's claim
is stated in (`examples/papers/bari_rate.sq`, issue 14 result 1).

Only `startIteration` changes an engine's count (`*_engineServed`: every other function of the machine
keeps it, as `*_records` of `Serq.KernelBudget` keep the records).
-/

@[expose] public section

namespace Serq.Kernel

/-! ### Every function of the machine but `startIteration` keeps the engines' served counts -/

/-- An engine's state replaced by one with the same count keeps every engine's count. -/
@[simp] theorem getEngineState_setEngineState_served (l : List EngineState) (i : Nat) (v : EngineState) (j : Nat)
    (h : v.served = (getEngineState l i).served) :
    (getEngineState (setEngineState l i v) j).served = (getEngineState l j).served := by
  by_cases hij : i = j
  · subst hij
    rcases getEngineState_setEngineState_self l i v with e | e
    · rw [e]; exact h
    · rw [e]
  · rw [getEngineState_setEngineState_ne l i j v hij]

theorem getEngineState_idleEngines_served : ∀ (ss : List Service) (j : Nat),
    (getEngineState (idleEngines ss) j).served = 0
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | _ :: ss, j + 1 => getEngineState_idleEngines_served ss j

theorem exec_engineServed (p : Program) (f : Nat) (m : Machine) (th : Thread) (j : Nat) :
    (getEngineState (exec p f m th).engines j).served = (getEngineState m.engines j).served := by
  fun_induction exec p f m th <;> simp_all +zetaDelta

theorem runReady_engineServed (p : Program) (f : Nat) (m : Machine) (j : Nat) :
    (getEngineState (runReady p f m).engines j).served = (getEngineState m.engines j).served := by
  fun_induction runReady p f m <;> simp_all [exec_engineServed]

theorem retryQueue_engineServed (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (j : Nat) :
    (getEngineState (retryQueue p f m i b).1.engines j).served = (getEngineState m.engines j).served := by
  fun_induction retryQueue p f m i b <;> simp_all +zetaDelta

theorem retryPool_engineServed (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (j : Nat) :
    (getEngineState (retryPool p f m i b).1.engines j).served = (getEngineState m.engines j).served := by
  simp only [retryPool]
  split
  · rw [retryQueue_engineServed, retryGrowers_engines]
  · rw [retryGrowers_engines]

theorem retryPools_engineServed (p : Program) (f n i : Nat) (m : Machine) (b : Bool) (j : Nat) :
    (getEngineState (retryPools p f n i m b).1.engines j).served = (getEngineState m.engines j).served := by
  fun_induction retryPools p f n i m b <;> simp_all +zetaDelta [retryPool_engineServed]

theorem settle_engineServed (p : Program) (f : Nat) (m : Machine) (j : Nat) :
    (getEngineState (settle p f m).engines j).served = (getEngineState m.engines j).served := by
  fun_induction settle p f m <;> simp_all +zetaDelta [retryPools_engineServed, runReady_engineServed]

theorem Machine.served_engineServed (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) (j : Nat) :
    (getEngineState (m.served s b r n).1.engines j).served = (getEngineState m.engines j).served := by
  simp [Machine.served]

theorem Machine.preempt_engineServed (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (m.preempt p s i t b).1.engines j).served = (getEngineState m.engines j).served := by
  simp only [Machine.preempt]
  split <;> simp

theorem growPreempting_engineServed (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (growPreempting p s i want t f m b).1.engines j).served = (getEngineState m.engines j).served := by
  fun_induction growPreempting p s i want t f m b <;> simp_all +zetaDelta [Machine.preempt_engineServed]

theorem Machine.serveOne_engineServed (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (j : Nat) :
    (getEngineState (m.serveOne p s b r n).1.engines j).served = (getEngineState m.engines j).served := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals simp_all [growPreempting_engineServed, Machine.served_engineServed]

theorem serveIn_engineServed (p : Program) (s c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch)
    (j : Nat) :
    (getEngineState (serveIn p s c q ts m b).1.engines j).served = (getEngineState m.engines j).served := by
  fun_induction serveIn p s c q ts m b <;> simp_all +zetaDelta [Machine.serveOne_engineServed]

theorem serveOrdered_engineServed (p : Program) (s : Nat) (m : Machine) (running : List Nat) (c : Nat)
    (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident) (j : Nat) :
    (getEngineState (serveOrdered p s m running c q b keys rs).1.engines j).served =
      (getEngineState m.engines j).served := by
  cases keys <;> simp [serveOrdered, serveIn_engineServed]

theorem admitOne_engineServed (p : Program) (f s c i k : Nat) (q : Option Expr) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (admitOne p f s c i k q m b).1.engines j).served = (getEngineState m.engines j).served := by
  simp only [admitOne]
  repeat' split
  all_goals simp_all [Machine.serveOne_engineServed, exec_engineServed]

theorem admitWaiting_engineServed (p : Program) (s c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine)
    (b : Batch) (j : Nat) :
    (getEngineState (admitWaiting p s c q g f m b).1.engines j).served = (getEngineState m.engines j).served := by
  fun_induction admitWaiting p s c q g f m b <;> simp_all +zetaDelta [admitOne_engineServed]

theorem fire_engineServed (p : Program) (m : Machine) (w : Wake) (j : Nat) :
    (getEngineState (fire p m w).engines j).served = (getEngineState m.engines j).served := by
  cases w <;> simp only [fire] <;> (try split) <;> simp

/-! ### The invariant: each record's `served` is the tokens of the records before it -/

/-- The tokens of a list of records. -/
def sumTokens : List Iteration → Nat
  | [] => 0
  | r :: rs => r.tokens + sumTokens rs

/-- Records newest first, each with `served` the tokens of the records after it in the list (the
iterations before it). -/
def ServedChain : List Iteration → Prop
  | [] => True
  | r :: rs => r.served = sumTokens rs ∧ ServedChain rs

/-- Every engine's count is the tokens of its records, and its records are a `ServedChain`. -/
def Machine.servedOk (m : Machine) : Prop :=
  ∀ j, (getEngineState m.engines j).served = sumTokens (getEngineState m.engines j).records ∧
    ServedChain (getEngineState m.engines j).records

theorem Machine.servedOk_frame {m m' : Machine}
    (hs : ∀ j, (getEngineState m'.engines j).served = (getEngineState m.engines j).served)
    (hr : ∀ j, (getEngineState m'.engines j).records = (getEngineState m.engines j).records)
    (hm : m.servedOk) : m'.servedOk := by
  intro j
  rw [hs j, hr j]
  exact hm j

theorem settle_servedOk (p : Program) (f : Nat) (m : Machine) (hm : m.servedOk) : (settle p f m).servedOk :=
  Machine.servedOk_frame (settle_engineServed p f m) (settle_records p f m) hm

theorem fire_servedOk (p : Program) (m : Machine) (w : Wake) (hm : m.servedOk) : (fire p m w).servedOk :=
  Machine.servedOk_frame (fire_engineServed p m w) (fire_records p m w) hm

/-- Engine `s`'s state replaced by `v`, in a list with a machine's counts and records, where `v` keeps
the invariant. -/
theorem servedChain_set {m m' : Machine} {l : List EngineState} (s : Nat) (v : EngineState)
    (he : m'.engines = setEngineState l s v)
    (hs : ∀ j, (getEngineState l j).served = (getEngineState m.engines j).served)
    (hr : ∀ j, (getEngineState l j).records = (getEngineState m.engines j).records)
    (hv : v.served = sumTokens v.records ∧ ServedChain v.records)
    (hm : m.servedOk) : m'.servedOk := by
  intro j
  rw [he]
  by_cases hj : s = j
  · subst hj
    rcases getEngineState_setEngineState_self l s v with h | h
    · rw [h]; exact hv
    · rw [h, hs s, hr s]; exact hm s
  · rw [getEngineState_setEngineState_ne _ _ _ _ hj, hs j, hr j]
    exact hm j

theorem startIteration_servedOk (p : Program) (f s : Nat) (eng : Engine) (m : Machine) (hm : m.servedOk) :
    (startIteration p f s eng m).servedOk := by
  simp only [startIteration]
  split
  · exact Machine.servedOk_frame (fun j => by simp only [admitWaiting_engineServed, serveOrdered_engineServed])
      (fun j => by simp only [admitWaiting_records, serveOrdered_records]) hm
  · split
    · exact Machine.servedOk_frame (fun j => by simp only [admitWaiting_engineServed, serveOrdered_engineServed])
        (fun j => by simp only [admitWaiting_records, serveOrdered_records]) hm
    · refine servedChain_set s _ rfl (fun j => by simp only [admitWaiting_engineServed, serveOrdered_engineServed])
        (fun j => by simp only [admitWaiting_records, serveOrdered_records]) ?_ hm
      simp only [admitWaiting_engineServed, serveOrdered_engineServed, admitWaiting_records, serveOrdered_records,
        sumTokens, ServedChain]
      obtain ⟨h1, h2⟩ := hm s
      refine ⟨?_, h1, h2⟩
      rw [h1]
      omega

theorem startPass_servedOk (p : Program) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine)
    (a : Bool) : m.servedOk → (startPass p f ss s tried m a).1.servedOk := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_servedOk p _ _ (startIteration_servedOk _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_servedOk p _ _ (startIteration_servedOk _ _ _ _ _ hm)))

theorem startEngines_servedOk (p : Program) (f n : Nat) (tried : List Nat) (m : Machine) :
    m.servedOk → (startEngines p f n tried m).servedOk := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPass_servedOk p _ _ _ _ _ _ hm
    | (rename_i ih; exact ih (startPass_servedOk p _ _ _ _ _ _ hm))

theorem endOfInstant_servedOk (p : Program) (f : Nat) (m : Machine) (hm : m.servedOk) :
    (endOfInstant p f m).servedOk := by
  simp only [endOfInstant]
  split
  · exact hm
  · exact startEngines_servedOk p _ _ _ _ hm

theorem loop_servedOk (p : Program) (f : Nat) (m : Machine) : m.servedOk → (loop p f m).servedOk := by
  fun_induction loop p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstant_servedOk p _ _ (settle_servedOk p _ _
      (fire_servedOk p _ _ (Machine.servedOk_frame (fun _ => rfl) (fun _ => rfl) hm))))

theorem initial_servedOk (p : Program) : (initial p).servedOk := by
  have he : (initial p).engines = idleEngines p.stages := by
    unfold initial; dsimp only; split <;> rfl
  intro j
  rw [he, getEngineState_idleEngines_served, getEngineState_idleEngines_records]
  exact ⟨rfl, trivial⟩

/-- In every run of every program, at any fuel, every engine's records are a `ServedChain`: a
record's `served` is the tokens of the iterations before it. -/
theorem runProgram_servedOk (p : Program) (fuel : Nat) : (runProgram p fuel).servedOk := by
  unfold runProgram
  exact loop_servedOk p _ _ (endOfInstant_servedOk p _ _ (settle_servedOk p _ _ (initial_servedOk p)))

/-! ### From `Serq.RateCost`'s sums to the records' `served` -/

/-- The tokens of a list of iterations as `Serq.RateCost` reads them. -/
def rateTokens : List RateCost.Iteration → Nat
  | [] => 0
  | i :: is => i.tokens + rateTokens is

theorem rateTokens_append : ∀ (a b : List RateCost.Iteration), rateTokens (a ++ b) = rateTokens a + rateTokens b
  | [], _ => by simp [rateTokens]
  | i :: is, b => by
    simp only [List.cons_append, rateTokens, rateTokens_append is b]
    omega

/-- The rate over a sequence and a suffix: the first part's, and the second's from the tokens after
the first. -/
theorem RateHolds_append (T R : Nat) : ∀ (served : Nat) (a b : List RateCost.Iteration),
    RateCost.RateHolds T R served (a ++ b) →
      RateCost.RateHolds T R served a ∧ RateCost.RateHolds T R (served + rateTokens a) b
  | served, [], b, h => ⟨trivial, by simpa [rateTokens] using h⟩
  | served, i :: is, b, h => by
    obtain ⟨h1, h2⟩ := h
    obtain ⟨h3, h4⟩ := RateHolds_append T R (served + i.tokens) is b h2
    refine ⟨⟨h1, h3⟩, ?_⟩
    simp only [rateTokens]
    rw [← Nat.add_assoc]
    exact h4

theorem rateIterations_cons (r : Iteration) (rs : List Iteration) :
    rateIterations (r :: rs) = rateIterations rs ++ [⟨r.start, r.tokens⟩] := by
  simp [rateIterations]

theorem rateTokens_rateIterations : ∀ rs : List Iteration, rateTokens (rateIterations rs) = sumTokens rs
  | [] => rfl
  | r :: rs => by
    rw [rateIterations_cons, rateTokens_append, rateTokens_rateIterations rs]
    simp only [rateTokens, sumTokens]
    omega

theorem served_eq_sumTokens (r : Iteration) (rs : List Iteration) (h : ServedChain (r :: rs)) :
    r.served = rateTokens (rateIterations rs) := by
  rw [rateTokens_rateIterations]
  exact h.1

/-- The rate over the records oldest first, from nothing served, is the rate of each record read off
its own `served`. -/
theorem served_rate_of_RateHolds (T R : Nat) : ∀ rs : List Iteration, ServedChain rs →
    RateCost.RateHolds T R 0 (rateIterations rs) → ∀ r ∈ rs, r.served * T ≤ R * r.start
  | [], _, _, _, hr => by cases hr
  | x :: xs, hc, h, r, hr => by
    rw [rateIterations_cons] at h
    obtain ⟨h1, h2⟩ := RateHolds_append T R 0 _ _ h
    rcases List.mem_cons.mp hr with rfl | hr
    · have e := served_eq_sumTokens r xs hc
      rw [Nat.zero_add] at h2
      rw [e]
      exact h2.1
    · exact served_rate_of_RateHolds T R xs hc.2 h1 r hr

/-! ### The token rate per record of a program's run -/

/-- The token rate of a program's engine of constant budget `B` and `execute (a + b * batch.tokens)`,
as a claim reads it: every record has `served · (a + b·B) ≤ B · start`, in every run and at any fuel. -/
theorem runProgram_affine_served_rate (p : Program) (fuel s e B a b : Nat) (hs : getService p.stages s = .step e)
    (hB : (getEngine p.engines e).budget = .num B)
    (hc : (getEngine p.engines e).cost = .bin .add (.num a) (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.served * (a + b * B) ≤ B * r.start :=
  served_rate_of_RateHolds _ _ _ (runProgram_servedOk p fuel s).2
    (runProgram_affine_token_rate p fuel s e B a b hs hB hc)

/-- The same under `execute (a * ceil(batch.tokens / g) + b * batch.tokens)` and a budget of `m`
tiles of `g` (`B = g·m`): every record has `served · (a·m + b·B) ≤ B · start`. -/
theorem runProgram_tiled_served_rate (p : Program) (fuel s e a b g m : Nat) (hg : 0 < g)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num (g * m))
    (hc : (getEngine p.engines e).cost =
      .bin .add (.bin .mul (.num a) (.floorDiv (.bin .add (.stageVar StageVar.tokens) (.num (g - 1))) g))
        (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records,
      r.served * (a * m + b * (g * m)) ≤ (g * m) * r.start :=
  served_rate_of_RateHolds _ _ _ (runProgram_servedOk p fuel s).2
    (runProgram_tiled_token_rate p fuel s e a b g m hg hs hB hc)

end Serq.Kernel
