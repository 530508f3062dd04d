module

public import Serq.KernelBody
public import Serq.KernelExclusiveBudget

/-! # Iteration bodies within the budget

`Serq.KernelBudget`'s `runProgram_within_budget`, for the run with engines that plan from an iteration
body (`runProgramB`, `Serq.KernelBody`): every iteration record of an engine stage whose `tokens cap` is a
constant `B` has `tokens ≤ B`, whichever engines plan under `exclusive prefill` (`xs`) or from a body
(`bodies`) (`runProgramB_within_budget`).

A body's statements serve and admit with the kernel's own `serveIn` and `admitOne` (`serveInB_serveIn`,
`admitOneB_admitOne`), from the batch's budget left; a guard changes only which of them run. The rest is
`Serq.KernelExclusiveBudget`'s.
-/
@[expose] public section

namespace Serq.Kernel

theorem serveInB_records (p : Program) (s c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (serveInB p s c q ts m b).1.engines j).records = (getEngineState m.engines j).records := by
  rw [serveInB_fst, serveIn_records]

theorem serveInB_ok (p : Program) (s chunk : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) (c : Nat)
    (hb : b.ok c) : (serveInB p s chunk q ts m b).2.1.ok c := by
  rw [serveInB_batch]
  exact serveIn_ok _ _ _ _ _ _ _ _ hb

theorem admitOneB_records (p : Program) (f s c i k : Nat) (q : Option Expr) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (admitOneB p f s c i k q m b).1.engines j).records = (getEngineState m.engines j).records := by
  rw [admitOneB_fst, admitOne_records]

theorem admitOneB_ok (p : Program) (f s chunk i k : Nat) (q : Option Expr) (m : Machine) (b : Batch) (c : Nat)
    (hb : b.ok c) (h0 : b.budget ≠ 0) : (admitOneB p f s chunk i k q m b).2.1.ok c := by
  rw [admitOneB_batch]
  exact admitOne_ok _ _ _ _ _ _ _ _ _ _ hb h0

theorem admitB_records (p : Program) (s c : Nat) (q g : Option Expr) (f : Nat) (pl : Plan) (j : Nat) :
    (getEngineState (admitB p s c q g f pl).m.engines j).records = (getEngineState pl.m.engines j).records := by
  fun_induction admitB p s c q g f pl <;> simp_all +zetaDelta [admitOneB_records]

theorem admitB_ok (p : Program) (s chunk : Nat) (q g : Option Expr) (f : Nat) (pl : Plan) (c : Nat) :
    pl.b.ok c → (admitB p s chunk q g f pl).b.ok c := by
  fun_induction admitB p s chunk q g f pl <;> intro hb
  all_goals first
    | exact hb
    | (rename_i ih
       exact ih (admitOneB_ok p _ _ _ _ _ _ _ _ _ hb (by intro e; simp_all)))

theorem planBody_records (p : Program) (f s chunk : Nat) (keys : List Expr) (j : Nat) :
    ∀ (n : Nat) (body : List IterStmt) (pl : Plan),
      (getEngineState (planBody p f s chunk keys n body pl).m.engines j).records = (getEngineState pl.m.engines j).records := by
  intro n
  induction n with
  | zero => intro body pl; rfl
  | succ n ih =>
    intro body pl
    cases body with
    | nil => rfl
    | cons st rest =>
      cases st with
      | serve q =>
        simp only [planBody]
        rw [ih]
        split
        · rfl
        · exact serveInB_records ..
      | admit q g =>
        simp only [planBody]
        rw [ih, admitB_records]
      | branch t yes no =>
        simp only [planBody]
        rw [ih, ih]
      | set k e =>
        simp only [planBody]
        rw [ih]

theorem planBody_ok (p : Program) (f s chunk : Nat) (keys : List Expr) (c : Nat) :
    ∀ (n : Nat) (body : List IterStmt) (pl : Plan), pl.b.ok c → (planBody p f s chunk keys n body pl).b.ok c := by
  intro n
  induction n with
  | zero => intro body pl hb; exact hb
  | succ n ih =>
    intro body pl hb
    cases body with
    | nil => exact hb
    | cons st rest =>
      cases st with
      | serve q =>
        simp only [planBody]
        apply ih
        split
        · exact hb
        · exact serveInB_ok _ _ _ _ _ _ _ _ hb
      | admit q g =>
        simp only [planBody]
        exact ih _ _ (admitB_ok _ _ _ _ _ _ _ _ hb)
      | branch t yes no =>
        simp only [planBody]
        exact ih _ _ (ih _ _ hb)
      | set k e =>
        simp only [planBody]
        exact ih _ _ hb

theorem startBody_within (p : Program) (f s : Nat) (eng : Engine) (body : Body) (m : Machine)
    (heng : ∀ e, getService p.stages s = .step e → eng = getEngine p.engines e)
    (hm : m.withinBudget p) : (startBody p f s eng body m).withinBudget p := by
  simp only [startBody]
  split
  · split
    · exact Machine.withinBudget_of_records (fun j => by rw [planBody_records]) hm
    · exact Machine.withinBudget_of_records (fun j => by rw [Machine.commitRegs_records, planBody_records]) hm
  · split
    · exact Machine.withinBudget_of_records (fun j => by rw [planBody_records]) hm
    · refine Machine.withinBudget_set s _ rfl ?_ ?_ hm
      · intro j
        rw [planBody_records]
      intro r hr
      simp only [List.mem_cons] at hr
      rcases hr with rfl | hr
      · right
        intro e B hs hB
        obtain rfl := heng e hs
        simp only [hB, Expr.withRegs_num, eval]
        exact (planBody_ok _ _ _ _ _ _ _ _ _ (And.intro rfl (Nat.zero_le _))).2
      · left
        rw [planBody_records] at hr
        exact hr

theorem startStepB_within (p : Program) (xs : List Nat) (bodies : List Body) (f s e : Nat) (m : Machine)
    (hs : getService p.stages s = .step e) (hm : m.withinBudget p) : (startStepB p xs bodies f s e m).withinBudget p := by
  have heng : ∀ e', getService p.stages s = .step e' → getEngine p.engines e = getEngine p.engines e' := by
    intro e' he'
    rw [hs] at he'
    cases he'
    rfl
  unfold startStepB
  split
  · exact startStep_within p xs f s e m hs hm
  · exact startBody_within p f s _ _ m heng hm

theorem startPassB_within (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (ss : List Service)
    (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s + k)) → m.withinBudget p →
      (startPassB p xs bodies f ss s tried m a).1.withinBudget p := by
  fun_induction startPassB p xs bodies f ss s tried m a <;> intro hss hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (apply settle_within
       refine startStepB_within _ _ _ _ _ _ _ ?_ hm
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)
    | (rename_i ih
       apply ih (getService_tail hss)
       apply settle_within
       refine startStepB_within _ _ _ _ _ _ _ ?_ hm
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)

theorem startEnginesB_within (p : Program) (xs : List Nat) (bodies : List Body) (f n : Nat) (tried : List Nat)
    (m : Machine) : m.withinBudget p → (startEnginesB p xs bodies f n tried m).withinBudget p := by
  fun_induction startEnginesB p xs bodies f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassB_within p _ _ _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact ih (startPassB_within p _ _ _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm))

theorem endOfInstantB_within (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine)
    (hm : m.withinBudget p) : (endOfInstantB p xs bodies f m).withinBudget p := by
  simp only [endOfInstantB]
  split
  · exact hm
  · exact startEnginesB_within p _ _ _ _ _ _ hm

theorem loopB_within (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine) :
    m.withinBudget p → (loopB p xs bodies f m).withinBudget p := by
  fun_induction loopB p xs bodies f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstantB_within p _ _ _ _ (settle_within p _ _
      (fire_within p _ _ (Machine.withinBudget_of_records (fun _ => rfl) hm))))

/-- Within the budget, for every program of the fragment, whichever of its engines plan under
`exclusive prefill` (`xs`) or from an iteration body (`bodies`), and any fuel: every iteration record of
an engine stage whose `tokens cap` is the constant `B` schedules at most `B` tokens. -/
theorem runProgramB_within_budget (p : Program) (xs : List Nat) (bodies : List Body) (fuel s e B : Nat)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B) :
    ∀ r ∈ (getEngineState (runProgramB p xs bodies fuel).engines s).records, r.tokens ≤ B := by
  have h : (runProgramB p xs bodies fuel).withinBudget p := by
    unfold runProgramB
    exact loopB_within p _ _ _ _ (endOfInstantB_within p _ _ _ _ (settle_within p _ _ (initial_within p)))
  exact h s e B hs hB

end Serq.Kernel
