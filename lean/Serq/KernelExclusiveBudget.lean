module

public import Serq.KernelExclusive
public import Serq.KernelBudget

/-! # `exclusive prefill` within the budget

`Serq.KernelBudget`'s `runProgram_within_budget`, for the run with engines under `exclusive prefill`
(`runProgramX`, `Serq.KernelExclusive`): every iteration record of an engine stage whose `tokens cap` is
a constant `B` has `tokens ≤ B`, whichever engines `xs` plan exclusively (`runProgramX_within_budget`).

An exclusive plan serves from the batch's budget left as vLLM's does (`Machine.serveOne`, `serveIn`), a
prefill never more than the budget left (`tokensFor_le_of_prefill`), and the displacement starts the
batch again from its cap with no token (`clearSched` changes no record); the rest is `Serq.KernelBudget`'s.
-/
@[expose] public section

namespace Serq.Kernel

/-- A prefill is given at most the budget left (no budget left: none). -/
theorem tokensFor_le_of_prefill (chunk gran budget : Nat) (r : Resident) (h : r.decode = false) :
    tokensFor chunk gran budget r ≤ budget := by
  have hc : chunkFor chunk budget r ≤ budget := Nat.min_le_right _ _
  unfold tokensFor
  rw [if_neg (by simp [h])]
  split
  · exact Nat.le_trans (Nat.div_mul_le_self _ _) hc
  · exact hc

theorem runningPrefill_records (p : Program) (s c : Nat) (ts : List Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (runningPrefill p s c ts m b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction runningPrefill p s c ts m b <;> simp_all +zetaDelta [Machine.serveOne_records]

theorem exclusiveAdmit_records (p : Program) (s c f : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (exclusiveAdmit p s c f m b).1.engines j).records = (getEngineState m.engines j).records := by
  fun_induction exclusiveAdmit p s c f m b <;> simp_all +zetaDelta [Machine.serveOne_records, exec_records]

theorem planExclusive_records (p : Program) (f s c : Nat) (m : Machine) (b : Batch) (j : Nat) :
    (getEngineState (planExclusive p f s c m b).1.engines j).records = (getEngineState m.engines j).records := by
  dsimp only [planExclusive]
  split
  · exact runningPrefill_records ..
  · split
    · rw [serveIn_records, runningPrefill_records]
    · rw [exclusiveAdmit_records, serveIn_records, runningPrefill_records]

theorem runningPrefill_ok (p : Program) (s chunk : Nat) (ts : List Nat) (m : Machine) (b : Batch) (c : Nat) :
    b.ok c → (runningPrefill p s chunk ts m b).2.1.ok c := by
  fun_induction runningPrefill p s chunk ts m b <;> intro hb
  all_goals first
    | exact hb
    | (rename_i ih; exact ih hb)
    | (rename_i ih; apply ih; split <;> exact hb)
    | (rename_i ih
       exact ih (Machine.serveOne_ok _ _ _ _ _ _ _ hb (tokensFor_le_of_prefill _ _ _ _ (by simp_all))))
    | exact Machine.serveOne_ok _ _ _ _ _ _ _ hb (tokensFor_le_of_prefill _ _ _ _ (by simp_all))

theorem exclusiveAdmit_ok (p : Program) (s chunk f : Nat) (m : Machine) (b : Batch) (c : Nat) :
    b.ok c → (exclusiveAdmit p s chunk f m b).2.ok c := by
  fun_induction exclusiveAdmit p s chunk f m b <;> intro hb
  all_goals first
    | exact hb
    | exact ⟨hb.1, Nat.zero_le _⟩
    | (rename_i ih; exact ih hb)
    | exact Machine.serveOne_ok _ _ _ _ _ _ _ ⟨hb.1, Nat.zero_le _⟩ (tokensFor_le_of_prefill _ _ _ _ (by simp_all))
    | exact Machine.serveOne_ok _ _ _ _ _ _ _ hb (tokensFor_le _ _ _ _ (by assumption))
    | (rename_i ih; exact ih (Machine.serveOne_ok _ _ _ _ _ _ _ hb (tokensFor_le _ _ _ _ (by assumption))))

theorem planExclusive_ok (p : Program) (f s chunk : Nat) (m : Machine) (b : Batch) (c : Nat) (hb : b.ok c) :
    (planExclusive p f s chunk m b).2.ok c := by
  have h1 := runningPrefill_ok p s chunk (threadsOf (getEngineState m.engines s).residents) m b c hb
  dsimp only [planExclusive]
  split
  · exact h1
  · split
    · exact serveIn_ok _ _ _ _ _ _ _ _ h1
    · exact exclusiveAdmit_ok _ _ _ _ _ _ _ (serveIn_ok _ _ _ _ _ _ _ _ h1)

theorem startExclusive_within (p : Program) (f s : Nat) (eng : Engine) (m : Machine)
    (heng : ∀ e, getService p.stages s = .step e → eng = getEngine p.engines e)
    (hm : m.withinBudget p) : (startExclusive p f s eng m).withinBudget p := by
  simp only [startExclusive]
  split
  · exact Machine.withinBudget_of_records (fun j => by simp only [planExclusive_records]) hm
  · split
    · exact Machine.withinBudget_of_records (fun j => by simp only [planExclusive_records]) hm
    · refine Machine.withinBudget_set s _ rfl ?_ ?_ hm
      · intro j
        simp only [planExclusive_records]
      intro r hr
      simp only [List.mem_cons] at hr
      rcases hr with rfl | hr
      · right
        intro e B hs hB
        obtain rfl := heng e hs
        simp only [hB, eval]
        exact (planExclusive_ok _ _ _ _ _ _ _ (And.intro rfl (Nat.zero_le _))).2
      · left
        rw [planExclusive_records] at hr
        exact hr

theorem startStep_within (p : Program) (xs : List Nat) (f s e : Nat) (m : Machine)
    (hs : getService p.stages s = .step e) (hm : m.withinBudget p) : (startStep p xs f s e m).withinBudget p := by
  have heng : ∀ e', getService p.stages s = .step e' → getEngine p.engines e = getEngine p.engines e' := by
    intro e' he'
    rw [hs] at he'
    cases he'
    rfl
  unfold startStep
  split
  · exact startExclusive_within p f s _ m heng hm
  · exact startIteration_within p f s _ m heng hm

theorem startPassX_within (p : Program) (xs : List Nat) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat)
    (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s + k)) → m.withinBudget p →
      (startPassX p xs f ss s tried m a).1.withinBudget p := by
  fun_induction startPassX p xs f ss s tried m a <;> intro hss hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (apply settle_within
       refine startStep_within _ _ _ _ _ _ ?_ hm
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)
    | (rename_i ih
       apply ih (getService_tail hss)
       apply settle_within
       refine startStep_within _ _ _ _ _ _ ?_ hm
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)

theorem startEnginesX_within (p : Program) (xs : List Nat) (f n : Nat) (tried : List Nat) (m : Machine) :
    m.withinBudget p → (startEnginesX p xs f n tried m).withinBudget p := by
  fun_induction startEnginesX p xs f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPassX_within p _ _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact ih (startPassX_within p _ _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm))

theorem endOfInstantX_within (p : Program) (xs : List Nat) (f : Nat) (m : Machine) (hm : m.withinBudget p) :
    (endOfInstantX p xs f m).withinBudget p := by
  simp only [endOfInstantX]
  split
  · exact hm
  · exact startEnginesX_within p _ _ _ _ _ hm

theorem loopX_within (p : Program) (xs : List Nat) (f : Nat) (m : Machine) :
    m.withinBudget p → (loopX p xs f m).withinBudget p := by
  fun_induction loopX p xs f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstantX_within p _ _ _ (settle_within p _ _
      (fire_within p _ _ (Machine.withinBudget_of_records (fun _ => rfl) hm))))

/-- Within the budget, for every program of the fragment, whichever of its engines plan under
`exclusive prefill` (`xs`), and any fuel: every iteration record of an engine stage whose `tokens cap`
is the constant `B` schedules at most `B` tokens. -/
theorem runProgramX_within_budget (p : Program) (xs : List Nat) (fuel s e B : Nat) (hs : getService p.stages s = .step e)
    (hB : (getEngine p.engines e).budget = .num B) :
    ∀ r ∈ (getEngineState (runProgramX p xs fuel).engines s).records, r.tokens ≤ B := by
  have h : (runProgramX p xs fuel).withinBudget p := by
    unfold runProgramX
    exact loopX_within p _ _ _ (endOfInstantX_within p _ _ _ (settle_within p _ _ (initial_within p)))
  exact h s e B hs hB

end Serq.Kernel
