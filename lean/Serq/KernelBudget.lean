module

public import Serq.Kernel
public import Serq.RateCost

/-! # Every iteration of an engine with a constant token budget is within it

Proved of `Serq.Kernel`'s run for every program of the fragment and any fuel
(`runProgram_within_budget`): every iteration record of an engine stage whose `tokens cap` is a
constant `B` has `tokens ≤ B` (issue 13; the premise of `Serq.RateCost` about a program's records).

The batch an iteration plans keeps the cap it read at its start (`Batch.cap`) and its tokens; the
budget left is their difference (`Batch.budget`). A resident is served at most the budget left
(`tokensFor`), a preemption only gives tokens back (`Batch.unserve`), so the batch stays within its
cap (`Batch.ok`) through `serveIn`, `admitWaiting` and everything under them. The records: only
`startIteration` adds one (the batch's tokens), every other function of the machine keeps each
engine's records as they were (`*_records`).

With `Serq.RateCost` and the records' timing (`Serq.KernelTimed`), the token rate of such an engine,
`served · T ≤ B · start` under an affine or a tiled `execute` (`runProgram_affine_token_rate`,
`runProgram_tiled_token_rate`, there).
-/
@[expose] public section

namespace Serq.Kernel

/-! ### The engines' states -/

theorem getEngineState_setEngineState_ne : ∀ (l : List EngineState) (i j : Nat) (v : EngineState), i ≠ j →
    getEngineState (setEngineState l i v) j = getEngineState l j
  | [], _, _, _, _ => rfl
  | _ :: _, 0, 0, _, h => absurd rfl h
  | _ :: _, 0, _ + 1, _, _ => rfl
  | _ :: _, _ + 1, 0, _, _ => rfl
  | _ :: xs, i + 1, j + 1, v, h => getEngineState_setEngineState_ne xs i j v (fun e => h (by rw [e]))

theorem getEngineState_setEngineState_self : ∀ (l : List EngineState) (i : Nat) (v : EngineState),
    getEngineState (setEngineState l i v) i = v ∨ getEngineState (setEngineState l i v) i = getEngineState l i
  | [], _, _ => Or.inr rfl
  | _ :: _, 0, _ => Or.inl rfl
  | _ :: xs, i + 1, v => getEngineState_setEngineState_self xs i v

/-- An engine's state replaced by one with the same records keeps every engine's records. -/
@[simp] theorem getEngineState_setEngineState_records (l : List EngineState) (i : Nat) (v : EngineState) (j : Nat)
    (h : v.records = (getEngineState l i).records) :
    (getEngineState (setEngineState l i v) j).records = (getEngineState l j).records := by
  by_cases hij : i = j
  · subst hij
    rcases getEngineState_setEngineState_self l i v with e | e
    · rw [e]; exact h
    · rw [e]
  · rw [getEngineState_setEngineState_ne l i j v hij]

theorem getEngineState_idleEngines_records : ∀ (ss : List Service) (j : Nat),
    (getEngineState (idleEngines ss) j).records = []
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | _ :: ss, j + 1 => getEngineState_idleEngines_records ss j

@[simp] theorem Machine.put_engines (m : Machine) (th : Thread) : (m.put th).engines = m.engines := rfl

@[simp] theorem Machine.setTimer_engines (m : Machine) (t : Nat) (w : Wake) : (m.setTimer t w).engines = m.engines := rfl

@[simp] theorem Machine.leaseTimer_engines (m : Machine) (s : Nat) (d : Option Nat) :
    (m.leaseTimer s d).engines = m.engines := by
  cases d <;> rfl

@[simp] theorem Machine.addJob_engines (p : Program) (m : Machine) (s t w : Nat) :
    (m.addJob p s t w).engines = m.engines := by
  simp only [Machine.addJob]
  split <;> (try split) <;> rfl

@[simp] theorem Machine.admitWaiter_engines (p : Program) (m : Machine) (st : List Nat) (i j : Nat) :
    (m.admitWaiter p st i j).engines = m.engines := rfl

@[simp] theorem Machine.grown_engines (p : Program) (m : Machine) (t i want : Nat) (h : Held) :
    (m.grown p t i want h).engines = m.engines := rfl

@[simp] theorem Machine.grownReq_engines (p : Program) (m : Machine) (t i want req : Nat) (h : Held) :
    (m.grownReq p t i want req h).engines = m.engines := rfl

@[simp] theorem Machine.advanceHolds_engines (m : Machine) (rs : List Resident) :
    (m.advanceHolds rs).engines = m.engines := by
  fun_induction m.advanceHolds rs <;> simp_all

/-! ### Every function of the machine but `startIteration` keeps the engines' records -/

theorem exec_records (p : Program) (f : Nat) (m : Machine) (th : Thread) (j : Nat) :
    (getEngineState (exec p f m th).engines j).records = (getEngineState m.engines j).records := by
  fun_induction exec p f m th <;> simp_all +zetaDelta

theorem runReady_records (p : Program) (f : Nat) (m : Machine) (j : Nat) :
    (getEngineState (runReady p f m).engines j).records = (getEngineState m.engines j).records := by
  fun_induction runReady p f m <;> simp_all [exec_records]

theorem retryQueue_records (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (j : Nat) :
    (getEngineState (retryQueue p f m i b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction retryQueue p f m i b <;> simp_all +zetaDelta

theorem retryGrowers_engines (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    (retryGrowers p f m i b).1.engines = m.engines := by
  fun_induction retryGrowers p f m i b <;> simp_all +zetaDelta

theorem retryGrowers_records (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (j : Nat) :
    (getEngineState (retryGrowers p f m i b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction retryGrowers p f m i b <;> simp_all +zetaDelta

theorem retryPool_records (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (j : Nat) :
    (getEngineState (retryPool p f m i b).1.engines j).records = (getEngineState m.engines j).records := by
  simp only [retryPool]
  split
  · rw [retryQueue_records, retryGrowers_records]
  · exact retryGrowers_records ..

theorem retryPools_records (p : Program) (f n i : Nat) (m : Machine) (b : Bool) (j : Nat) :
    (getEngineState (retryPools p f n i m b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction retryPools p f n i m b <;> simp_all +zetaDelta [retryPool_records]

theorem settle_records (p : Program) (f : Nat) (m : Machine) (j : Nat) :
    (getEngineState (settle p f m).engines j).records = (getEngineState m.engines j).records := by
  fun_induction settle p f m <;> simp_all +zetaDelta [retryPools_records, runReady_records]

theorem Machine.served_records (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) (j : Nat) :
    (getEngineState (m.served s b r n).1.engines j).records = (getEngineState m.engines j).records := by
  simp [Machine.served]

theorem Machine.preempt_records (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (m.preempt p s i t b).1.engines j).records = (getEngineState m.engines j).records := by
  simp only [Machine.preempt]
  split <;> simp

theorem growPreempting_records (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (growPreempting p s i want t f m b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction growPreempting p s i want t f m b <;> simp_all +zetaDelta [Machine.preempt_records]

theorem Machine.serveOne_records (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat) (j : Nat) :
    (getEngineState (m.serveOne p s b r n).1.engines j).records = (getEngineState m.engines j).records := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals simp_all [growPreempting_records, Machine.served_records]

theorem serveIn_records (p : Program) (s c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (serveIn p s c q ts m b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction serveIn p s c q ts m b <;> simp_all +zetaDelta [Machine.serveOne_records]

theorem serveOrdered_records (p : Program) (s : Nat) (m : Machine) (running : List Nat) (c : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) (j : Nat) :
    (getEngineState (serveOrdered p s m running c q b keys rs).1.engines j).records = (getEngineState m.engines j).records := by
  cases keys <;> simp [serveOrdered, serveIn_records]

theorem admitOne_records (p : Program) (f s c i k : Nat) (q : Option Expr) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (admitOne p f s c i k q m b).1.engines j).records = (getEngineState m.engines j).records := by
  simp only [admitOne]
  repeat' split
  all_goals simp_all [Machine.serveOne_records, exec_records]

theorem admitWaiting_records (p : Program) (s c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine) (b : Batch)
    (j : Nat) :
    (getEngineState (admitWaiting p s c q g f m b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction admitWaiting p s c q g f m b <;> simp_all +zetaDelta [admitOne_records]

theorem fire_records (p : Program) (m : Machine) (w : Wake) (j : Nat) :
    (getEngineState (fire p m w).engines j).records = (getEngineState m.engines j).records := by
  cases w <;> simp only [fire] <;> (try split) <;> simp

/-! ### The batch: within the cap it read at its start -/

/-- The batch read cap `c` at its start and its tokens are within it. -/
abbrev Batch.ok (c : Nat) (b : Batch) : Prop := b.cap = c ∧ b.tokens ≤ c

/-- `b'` is `b` with tokens given back (preemptions): the same cap, no more tokens. -/
abbrev Batch.le (b' b : Batch) : Prop := b'.cap = b.cap ∧ b'.tokens ≤ b.tokens

theorem Batch.le_refl (b : Batch) : b.le b := ⟨rfl, Nat.le_refl _⟩

theorem Batch.le_trans {a b c : Batch} (h1 : a.le b) (h2 : b.le c) : a.le c :=
  ⟨h1.1.trans h2.1, Nat.le_trans h1.2 h2.2⟩

theorem Batch.le_ok {b' b : Batch} {c : Nat} (h : b'.le b) (hb : b.ok c) : b'.ok c :=
  ⟨h.1.trans hb.1, Nat.le_trans h.2 hb.2⟩

theorem Batch.le_budget {b' b : Batch} {n : Nat} (h : b'.le b) (hn : n ≤ b.budget) : n ≤ b'.budget := by
  have h1 := h.1
  have h2 := h.2
  simp only [Batch.budget] at hn ⊢
  omega

/-- Serving at most the budget left keeps the batch within its cap. -/
theorem Batch.serve_ok {b : Batch} {c : Nat} (r : Resident) {n : Nat} (hb : b.ok c) (hn : n ≤ b.budget) :
    (b.serve r n).ok c := by
  simp only [Batch.ok, Batch.budget, Batch.serve] at hb hn ⊢
  omega

theorem Batch.unserve_le (b : Batch) (r : Resident) (n : Nat) : (b.unserve r n).le b :=
  ⟨rfl, Nat.sub_le _ _⟩

/-- A resident is given at most the budget left, when some is left. -/
theorem tokensFor_le (chunk gran budget : Nat) (r : Resident) (h : budget ≠ 0) :
    tokensFor chunk gran budget r ≤ budget := by
  have hc : chunkFor chunk budget r ≤ budget := Nat.min_le_right _ _
  unfold tokensFor
  split
  · omega
  · split
    · exact Nat.le_trans (Nat.div_mul_le_self _ _) hc
    · exact hc

theorem Machine.preempt_le (p : Program) (s i t : Nat) (m : Machine) (b : Batch) :
    (m.preempt p s i t b).2.le b := by
  simp only [Machine.preempt]
  repeat' split
  all_goals first
    | exact And.intro rfl (Nat.le_refl _)
    | exact And.intro rfl (Nat.sub_le _ _)

theorem growPreempting_le (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    (growPreempting p s i want t f m b).2.1.le b := by
  fun_induction growPreempting p s i want t f m b
  all_goals first
    | exact Batch.le_refl _
    | exact Machine.preempt_le ..
    | (rename_i ih; exact Batch.le_trans ih (Machine.preempt_le ..))

theorem Machine.serveOne_ok (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n c : Nat)
    (hb : b.ok c) (hn : n ≤ b.budget) : (m.serveOne p s b r n).2.1.ok c := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact hb
    | exact Batch.serve_ok _ hb hn
    | exact Batch.serve_ok _ (Batch.le_ok (growPreempting_le ..) hb) (Batch.le_budget (growPreempting_le ..) hn)
    | exact Batch.le_ok (growPreempting_le ..) hb

theorem serveIn_ok (p : Program) (s chunk : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) (c : Nat) :
    b.ok c → (serveIn p s chunk q ts m b).2.ok c := by
  fun_induction serveIn p s chunk q ts m b <;> intro hb
  all_goals first
    | exact hb
    | (rename_i ih; exact ih hb)
    | exact Machine.serveOne_ok _ _ _ _ _ _ _ hb (tokensFor_le _ _ _ _ (by assumption))
    | (rename_i ih; exact ih (Machine.serveOne_ok _ _ _ _ _ _ _ hb (tokensFor_le _ _ _ _ (by assumption))))

theorem serveOrdered_ok (p : Program) (s : Nat) (m : Machine) (running : List Nat) (chunk : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) (c : Nat) (hb : b.ok c) :
    (serveOrdered p s m running chunk q b keys rs).2.ok c := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_ok p _ _ _ _ _ _ _ hb

theorem admitOne_ok (p : Program) (f s chunk i j : Nat) (q : Option Expr) (m : Machine) (b : Batch) (c : Nat)
    (hb : b.ok c) (h0 : b.budget ≠ 0) : (admitOne p f s chunk i j q m b).2.ok c := by
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact hb
    | exact Machine.serveOne_ok _ _ _ _ _ _ _ hb (tokensFor_le _ _ _ _ h0)

theorem admitWaiting_ok (p : Program) (s chunk : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine) (b : Batch)
    (c : Nat) : b.ok c → (admitWaiting p s chunk q g f m b).2.ok c := by
  fun_induction admitWaiting p s chunk q g f m b <;> intro hb
  all_goals first
    | exact hb
    | (rename_i ih
       exact ih (admitOne_ok p _ _ _ _ _ _ _ _ _ hb (by intro e; simp_all)))

/-! ### Every engine's records within its constant budget -/

/-- Every iteration record of every engine stage whose `tokens cap` is the constant `B` has at most
`B` tokens. -/
def Machine.withinBudget (p : Program) (m : Machine) : Prop :=
  ∀ s e B, getService p.stages s = .step e → (getEngine p.engines e).budget = .num B →
    ∀ r ∈ (getEngineState m.engines s).records, r.tokens ≤ B

theorem Machine.withinBudget_of_records {p : Program} {m m' : Machine}
    (h : ∀ j, (getEngineState m'.engines j).records = (getEngineState m.engines j).records)
    (hm : m.withinBudget p) : m'.withinBudget p := by
  intro s e B hs hB r hr
  rw [h s] at hr
  exact hm s e B hs hB r hr

theorem settle_within (p : Program) (f : Nat) (m : Machine) (hm : m.withinBudget p) : (settle p f m).withinBudget p :=
  Machine.withinBudget_of_records (settle_records p f m) hm

theorem fire_within (p : Program) (m : Machine) (w : Wake) (hm : m.withinBudget p) : (fire p m w).withinBudget p :=
  Machine.withinBudget_of_records (fire_records p m w) hm

/-- A machine whose engines are `l` with engine `s`'s state replaced by `v`, where `l` has the records
of a machine within the budget and `v`'s records are `l`'s at `s` and ones within the budget. -/
theorem Machine.withinBudget_set {p : Program} {m m' : Machine} {l : List EngineState} (s : Nat) (v : EngineState)
    (he : m'.engines = setEngineState l s v)
    (hrec : ∀ j, (getEngineState l j).records = (getEngineState m.engines j).records)
    (hv : ∀ r ∈ v.records, r ∈ (getEngineState m.engines s).records ∨
      ∀ e B, getService p.stages s = .step e → (getEngine p.engines e).budget = .num B → r.tokens ≤ B)
    (hm : m.withinBudget p) : m'.withinBudget p := by
  intro j e B hs hB r hr
  rw [he] at hr
  by_cases hj : s = j
  · subst hj
    rcases getEngineState_setEngineState_self l s v with h | h
    · rw [h] at hr
      rcases hv r hr with h' | h'
      · exact hm s e B hs hB r h'
      · exact h' e B hs hB
    · rw [h, hrec s] at hr
      exact hm s e B hs hB r hr
  · rw [getEngineState_setEngineState_ne _ _ _ _ hj, hrec j] at hr
    exact hm j e B hs hB r hr

theorem startIteration_within (p : Program) (f s : Nat) (eng : Engine) (m : Machine)
    (heng : ∀ e, getService p.stages s = .step e → eng = getEngine p.engines e)
    (hm : m.withinBudget p) : (startIteration p f s eng m).withinBudget p := by
  simp only [startIteration]
  split
  · exact Machine.withinBudget_of_records (fun j => by simp only [admitWaiting_records, serveOrdered_records]) hm
  · split
    · exact Machine.withinBudget_of_records (fun j => by simp only [admitWaiting_records, serveOrdered_records]) hm
    · refine Machine.withinBudget_set s _ rfl ?_ ?_ hm
      · intro j
        simp only [admitWaiting_records, serveOrdered_records]
      intro r hr
      simp only [List.mem_cons] at hr
      rcases hr with rfl | hr
      · right
        intro e B hs hB
        obtain rfl := heng e hs
        simp only [hB, eval]
        exact (admitWaiting_ok _ _ _ _ _ _ _ _ _ (serveOrdered_ok _ _ _ _ _ _ _ _ _ _ (And.intro rfl (Nat.zero_le _)))).2
      · left
        rw [admitWaiting_records, serveOrdered_records] at hr
        exact hr

theorem getService_tail {x : Service} {ss l : List Service} {s : Nat}
    (h : ∀ k, getService (x :: ss) k = getService l (s + k)) : ∀ k, getService ss k = getService l (s + 1 + k) := by
  intro k
  have e := h (k + 1)
  simp only [getService] at e
  rw [e]
  congr 1
  omega

theorem startPass_within (p : Program) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s + k)) → m.withinBudget p →
      (startPass p f ss s tried m a).1.withinBudget p := by
  fun_induction startPass p f ss s tried m a <;> intro hss hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (apply settle_within
       refine startIteration_within _ _ _ _ _ ?_ hm
       intro e' he'
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       rw [he'] at h0
       cases h0
       rfl)
    | (rename_i ih
       apply ih (getService_tail hss)
       apply settle_within
       refine startIteration_within _ _ _ _ _ ?_ hm
       intro e' he'
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       rw [he'] at h0
       cases h0
       rfl)

theorem startEngines_within (p : Program) (f n : Nat) (tried : List Nat) (m : Machine) :
    m.withinBudget p → (startEngines p f n tried m).withinBudget p := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPass_within p _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact ih (startPass_within p _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm))

theorem endOfInstant_within (p : Program) (f : Nat) (m : Machine) (hm : m.withinBudget p) :
    (endOfInstant p f m).withinBudget p := by
  simp only [endOfInstant]
  split
  · exact hm
  · exact startEngines_within p _ _ _ _ hm

theorem loop_within (p : Program) (f : Nat) (m : Machine) : m.withinBudget p → (loop p f m).withinBudget p := by
  fun_induction loop p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstant_within p _ _ (settle_within p _ _
      (fire_within p _ _ (Machine.withinBudget_of_records (fun _ => rfl) hm))))

theorem initial_within (p : Program) : (initial p).withinBudget p := by
  intro s e B _ _ r hr
  have he : (initial p).engines = idleEngines p.stages := by
    unfold initial; dsimp only; split <;> rfl
  rw [he, getEngineState_idleEngines_records] at hr
  cases hr

/-- Within the budget, for every program of the fragment and any fuel: every iteration record of an
engine stage whose `tokens cap` is the constant `B` (stage `s` is `Service.step e` and engine `e`'s
budget is `.num B`) schedules at most `B` tokens. -/
theorem runProgram_within_budget (p : Program) (fuel s e B : Nat) (hs : getService p.stages s = .step e)
    (hB : (getEngine p.engines e).budget = .num B) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens ≤ B := by
  have h : (runProgram p fuel).withinBudget p := by
    unfold runProgram
    exact loop_within p _ _ (endOfInstant_within p _ _ (settle_within p _ _ (initial_within p)))
  exact h s e B hs hB

/-! ### The records as `Serq.RateCost` reads them

`Serq.RateCost` proves the token rate `served · T ≤ R · start` for every sequence of iterations
within the budget `R` and timed by the cost. Of a program's run, the first is
`runProgram_within_budget`; the second is `Serq.KernelTimed`'s `runProgram_timed`, which has the token
rate of a program's engine (`runProgram_affine_token_rate`, `runProgram_tiled_token_rate`). The
records are newest first, the rate's sequence oldest first. -/

/-- An engine's iterations as `Serq.RateCost` reads them, oldest first. -/
noncomputable def rateIterations (records : List Iteration) : List RateCost.Iteration :=
  records.reverse.map fun r => ⟨r.start, r.tokens⟩

theorem rateIterations_within (p : Program) (fuel s e B : Nat) (hs : getService p.stages s = .step e)
    (hB : (getEngine p.engines e).budget = .num B) :
    ∀ i ∈ rateIterations (getEngineState (runProgram p fuel).engines s).records, i.tokens ≤ B := by
  intro i hi
  simp only [rateIterations, List.mem_map, List.mem_reverse] at hi
  obtain ⟨r, hr, rfl⟩ := hi
  exact runProgram_within_budget p fuel s e B hs hB r hr

end Serq.Kernel
