module

public import Serq.KernelBodyKv
public import Serq.KernelRequestsPreempt

/-! # Iteration bodies and `exclusive prefill`: request conservation

`Serq.KernelRequestsPreempt`'s `runProgram_requests` for the run with engines that plan from an iteration
body or under `exclusive prefill` (`runProgramB p xs bodies`; `runProgramX p xs` with none): every thread in
at most one place, its open turn not answered, no turn answered twice, preemption included
(`runProgramB_requests`, `runProgramX_requests`).

Both halves are kept by what a plan does: `Keeps` (no thread placed once more, `Serq.KernelDistinct`) and
`ReqInvP` (the turn invariant) by `serveIn` and `admitOne` (`planBody_inv`), and by the exclusive plan's
admission (a head that fits admitted and run) and displacement (the residents' threads unchanged,
`threadsOf_clearSched`).
-/
@[expose] public section

namespace Serq.Kernel

-- (the timers' gap `Keeps` counts places with, as in `Serq.KernelDistinct`)
variable {g : Nat}

theorem threadsOf_clearSched : ∀ rs : List Resident, threadsOf (clearSched rs) = threadsOf rs
  | [] => rfl
  | r :: rs => by simp only [clearSched, threadsOf, threadsOf_clearSched rs]

/-! ### No thread placed once more (`Keeps`) -/

theorem planBody_keeps (p : Program) (f s chunk : Nat) (keys : List Expr) (n : Nat) (body : List IterStmt) (pl : Plan) :
    Keeps g pl.m (planBody p f s chunk keys n body pl).m := by
  refine planBody_inv p s chunk keys (Keeps g pl.m) ?_ ?_ ?_ f n body pl (Keeps.refl _)
  · intro m hm
    exact hm.trans (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
  · intro q rs m b hm
    exact hm.trans (serveIn_keeps p s chunk q _ m b)
  · intro f' i q m b hm hi _
    obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
    rw [Nat.sub_zero] at hq
    refine hm.trans (admitOne_keeps p f' s chunk i _ q m b ?_)
    rw [hq]
    exact select_lt p m i w ws

/-- What an iteration's start does after its plan: its record and end set, or the run failed, or nothing. -/
theorem Keeps.started (m : Machine) (s : Nat) (es : EngineState) (hes : es.residents = (getEngineState m.engines s).residents)
    (time : Nat) : Keeps g m ({ m with engines := setEngineState m.engines s es }.setTimer time (.iterationEnd s)) :=
  Keeps.trans (Keeps.engine _ s _ (by rw [hes])) (Keeps.setTimer _ _ _ fun _ => by rfl)

theorem startBody_keeps (p : Program) (f s : Nat) (eng : Engine) (body : Body) (m : Machine) :
    Keeps g m (startBody p f s eng body m) := by
  have h := planBody_keeps (g := g) p f s
    (eval (engineView p m (runningOf p m s)) [] m.now 0 (eng.chunk.withRegs (regsNow body.regs (getEngineState m.engines s))))
    eng.order f body.stmts
    ⟨m, ⟨eval (engineView p m (runningOf p m s)) [] m.now 0 (eng.budget.withRegs (regsNow body.regs (getEngineState m.engines s))),
      0, 0, 0, 0, eval (engineView p m (runningOf p m s)) [] m.now 0
        (eng.granule.withRegs (regsNow body.regs (getEngineState m.engines s))), false⟩,
      false, 0, regsNow body.regs (getEngineState m.engines s)⟩
  simp only [startBody]
  split
  · split
    · exact h
    · exact h.trans (Keeps.engine _ s _ rfl)
  · split
    · exact h.trans (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
    · exact h.trans (Keeps.started _ s _ (by rfl) _)

theorem runningPrefill_keeps (p : Program) (s c : Nat) (ts : List Nat) (m : Machine) (b : Batch) :
    Keeps g m (runningPrefill p s c ts m b).1 := by
  fun_induction runningPrefill p s c ts m b
  all_goals first
    | exact Keeps.refl _
    | exact Machine.serveOne_keeps p _ _ _ _ _
    | assumption
    | (rename_i ih; exact (Machine.serveOne_keeps p _ _ _ _ _).trans ih)

/-- The displacement of an exclusive plan: the residents, their tokens given back. -/
theorem Keeps.clearSched (m : Machine) (s : Nat) :
    Keeps g m { m with engines := setEngineState m.engines s ({ (getEngineState m.engines s) with
      residents := Serq.Kernel.clearSched (getEngineState m.engines s).residents }) } :=
  Keeps.engine _ s _ (threadsOf_clearSched _)

theorem exclusiveAdmit_keeps (p : Program) (s c : Nat) :
    ∀ (f : Nat) (m : Machine) (b : Batch), Keeps g m (exclusiveAdmit p s c f m b).1
  | 0, m, _ => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m, b => by
    simp only [exclusiveAdmit]
    split
    · exact Keeps.refl m
    · split
      · exact Keeps.refl m
      · next i hi =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
        rw [Nat.sub_zero] at hq
        have hj : select p m i (getPool m.pools i).queue < countWaiters (getPool m.pools i).queue := by
          rw [hq]; exact select_lt p m i w ws
        split
        · have h2 := Keeps.take (g := g) p f _ (Machine.admitWaiter_serial p m (admissionStage c b.cap) i _ hj)
            (fun _ t => Machine.admitWaiter_placed p m _ i _ hj t)
          have h3 := h2.trans (Keeps.clearSched _ s)
          repeat' split
          all_goals first
            | exact h2
            | exact h3
            | exact h3.trans (Machine.serveOne_keeps p _ _ _ _ _)
            | exact h2.trans (Machine.serveOne_keeps p _ _ _ _ _)
            | exact (h2.trans (Machine.serveOne_keeps p _ _ _ _ _)).trans (exclusiveAdmit_keeps p s c f _ _)
            | exact h2.trans (exclusiveAdmit_keeps p s c f _ _)
        · exact Keeps.refl m

theorem planExclusive_keeps (p : Program) (f s c : Nat) (m : Machine) (b : Batch) :
    Keeps g m (planExclusive p f s c m b).1 := by
  have h1 := runningPrefill_keeps (g := g) p s c (threadsOf (getEngineState m.engines s).residents) m b
  dsimp only [planExclusive]
  split
  · exact h1
  · split
    · exact h1.trans (serveIn_keeps p _ _ _ _ _ _)
    · exact (h1.trans (serveIn_keeps p _ _ _ _ _ _)).trans (exclusiveAdmit_keeps p _ _ _ _ _)

theorem startExclusive_keeps (p : Program) (f s : Nat) (eng : Engine) (m : Machine) :
    Keeps g m (startExclusive p f s eng m) := by
  simp only [startExclusive]
  split
  · exact planExclusive_keeps ..
  · split
    · exact (planExclusive_keeps ..).trans (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
    · exact (planExclusive_keeps ..).trans (Keeps.started _ s _ (by rfl) _)

theorem startStepB_keeps (p : Program) (xs : List Nat) (bodies : List Body) (f s e : Nat) (m : Machine) :
    Keeps g m (startStepB p xs bodies f s e m) := by
  unfold startStepB
  split
  · unfold startStep
    split
    · exact startExclusive_keeps p f s _ m
    · exact startIteration_keeps p f s _ m
  · exact startBody_keeps p f s _ _ m

theorem startPassB_keeps (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) :
    ∀ (ss : List Service) (i : Nat) (tried : List Nat) (m : Machine) (a : Bool),
      Keeps g m (startPassB p xs bodies f ss i tried m a).1
  | [], _, _, m, _ => Keeps.refl m
  | .step e :: ss, i, tried, m, a => by
    simp only [startPassB]
    split
    · exact startPassB_keeps p xs bodies f ss (i + 1) tried m a
    · split
      · exact (startStepB_keeps p xs bodies f i e m).trans (settle_keeps p f _)
      · exact ((startStepB_keeps p xs bodies f i e m).trans (settle_keeps p f _)).trans
          (startPassB_keeps p xs bodies f ss (i + 1) _ _ _)
  | .delay :: ss, i, tried, m, a => by simp only [startPassB]; exact startPassB_keeps p xs bodies f ss (i + 1) tried m a
  | .fifo _ :: ss, i, tried, m, a => by simp only [startPassB]; exact startPassB_keeps p xs bodies f ss (i + 1) tried m a

theorem startEnginesB_keeps (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) :
    ∀ (n : Nat) (tried : List Nat) (m : Machine), Keeps g m (startEnginesB p xs bodies f n tried m)
  | 0, _, m => Keeps.refl m
  | n + 1, tried, m => by
    simp only [startEnginesB]
    split
    · exact startPassB_keeps p xs bodies f _ _ _ _ _
    · exact (startPassB_keeps p xs bodies f _ _ _ _ _).trans (startEnginesB_keeps p xs bodies f n _ _)

theorem endOfInstantB_keeps (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine) :
    Keeps g m (endOfInstantB p xs bodies f m) := by
  simp only [endOfInstantB]
  split
  · exact Keeps.refl m
  · exact startEnginesB_keeps p xs bodies f _ _ _

theorem loopB_keeps (p : Program) (xs : List Nat) (bodies : List Body) :
    ∀ (f : Nat) (m : Machine), Keeps p.gap m (loopB p xs bodies f m)
  | 0, m => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m => by
    simp only [loopB]
    split
    · exact Keeps.refl m
    · next tm ts heq =>
      exact (((fire_keeps p m _ tm ts heq).trans (settle_keeps p f _)).trans
        (endOfInstantB_keeps p xs bodies f _)).trans (loopB_keeps p xs bodies f _)

/-- `runProgram_placed` for the run with bodies and exclusive engines: no thread placed twice. -/
theorem runProgramB_placed (p : Program) (xs : List Nat) (bodies : List Body) (fuel : Nat)
    (hp : DistinctProgram p) : Placed p.gap (runProgramB p xs bodies fuel) :=
  (initial_placed p hp.arrivals).keep
    (((settle_keeps p fuel _).trans (endOfInstantB_keeps p xs bodies fuel _)).trans (loopB_keeps p xs bodies fuel _))

/-! ### The turn invariant (`ReqInvP`) -/

theorem planBody_reqP (p : Program) (hp : TurnsOutside p) (f s chunk : Nat) (keys : List Expr) (n : Nat)
    (body : List IterStmt) (pl : Plan) (hm : ReqInvP pl.m) : ReqInvP (planBody p f s chunk keys n body pl).m :=
  planBody_inv p s chunk keys ReqInvP (fun _ h => h) (fun q _ m b h => serveIn_reqP p s chunk q _ m b h)
    (fun f' i q m b h _ _ => admitOne_reqP p hp f' s chunk i _ q m b h) f n body pl hm

theorem startBody_reqP (p : Program) (hp : TurnsOutside p) (f s : Nat) (eng : Engine) (body : Body)
    (m : Machine) (hm : ReqInvP m) : ReqInvP (startBody p f s eng body m) := by
  simp only [startBody]
  repeat' split
  all_goals first
    | exact planBody_reqP p hp _ _ _ _ _ _ _ hm
    | exact ⟨⟨(planBody_reqP p hp _ _ _ _ _ _ _ hm).1.1, (planBody_reqP p hp _ _ _ _ _ _ _ hm).1.2⟩,
        (planBody_reqP p hp _ _ _ _ _ _ _ hm).2⟩

theorem runningPrefill_reqP (p : Program) (s c : Nat) (ts : List Nat) (m : Machine) (b : Batch) :
    ReqInvP m → ReqInvP (runningPrefill p s c ts m b).1 := by
  fun_induction runningPrefill p s c ts m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.serveOne_reqP p _ _ _ _ _ hm
    | (rename_i ih; exact ih hm)
    | (rename_i ih; exact ih (Machine.serveOne_reqP p _ _ _ _ _ hm))

theorem exclusiveAdmit_reqP (p : Program) (hp : TurnsOutside p) (s c : Nat) :
    ∀ (f : Nat) (m : Machine) (b : Batch), ReqInvP m → ReqInvP (exclusiveAdmit p s c f m b).1
  | 0, m, _, hm => hm
  | f + 1, m, b, hm => by
    simp only [exclusiveAdmit]
    split
    · exact hm
    · split
      · exact hm
      · next i hi =>
        split
        · have h1 := Machine.admitWaiter_reqP p m (admissionStage c b.cap) i
            (select p m i (getPool m.pools i).queue) hm
          have h2 := exec_reqP p hp f _ _ h1
            (h1.get (getWaiter (getPool m.pools i).queue (select p m i (getPool m.pools i).queue)).thread).1
            (h1.get (getWaiter (getPool m.pools i).queue (select p m i (getPool m.pools i).queue)).thread).2
          repeat' split
          all_goals first
            | exact h2
            | exact Machine.serveOne_reqP p _ _ _ _ _ h2
            | exact exclusiveAdmit_reqP p hp s c f _ _ (Machine.serveOne_reqP p _ _ _ _ _ h2)
            | exact exclusiveAdmit_reqP p hp s c f _ _ h2
        · exact hm

theorem planExclusive_reqP (p : Program) (hp : TurnsOutside p) (f s c : Nat) (m : Machine) (b : Batch)
    (hm : ReqInvP m) : ReqInvP (planExclusive p f s c m b).1 := by
  have h1 := runningPrefill_reqP p s c (threadsOf (getEngineState m.engines s).residents) m b hm
  dsimp only [planExclusive]
  split
  · exact h1
  · split
    · exact serveIn_reqP p _ _ _ _ _ _ h1
    · exact exclusiveAdmit_reqP p hp _ _ _ _ _ (serveIn_reqP p _ _ _ _ _ _ h1)

theorem startExclusive_reqP (p : Program) (hp : TurnsOutside p) (f s : Nat) (eng : Engine) (m : Machine)
    (hm : ReqInvP m) : ReqInvP (startExclusive p f s eng m) := by
  simp only [startExclusive]
  repeat' split
  all_goals first
    | exact planExclusive_reqP p hp _ _ _ _ _ hm
    | exact ⟨⟨(planExclusive_reqP p hp _ _ _ _ _ hm).1.1, (planExclusive_reqP p hp _ _ _ _ _ hm).1.2⟩,
        (planExclusive_reqP p hp _ _ _ _ _ hm).2⟩

theorem startStepB_reqP (p : Program) (hp : TurnsOutside p) (xs : List Nat) (bodies : List Body)
    (f s e : Nat) (m : Machine) (hm : ReqInvP m) : ReqInvP (startStepB p xs bodies f s e m) := by
  unfold startStepB
  split
  · unfold startStep
    split
    · exact startExclusive_reqP p hp f s _ m hm
    · exact startIteration_reqP p hp f s _ m hm
  · exact startBody_reqP p hp f s _ _ m hm

theorem startPassB_reqP (p : Program) (hp : TurnsOutside p) (xs : List Nat) (bodies : List Body) (f : Nat)
    (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    ReqInvP m → ReqInvP (startPassB p xs bodies f ss s tried m a).1 := by
  fun_induction startPassB p xs bodies f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_reqP p hp _ _ (startStepB_reqP p hp _ _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_reqP p hp _ _ (startStepB_reqP p hp _ _ _ _ _ _ hm)))

theorem endOfInstantB_reqP (p : Program) (hp : TurnsOutside p) (xs : List Nat) (bodies : List Body)
    (f : Nat) (m : Machine) (hm : ReqInvP m) : ReqInvP (endOfInstantB p xs bodies f m) := by
  have hse : ∀ n tried m', ReqInvP m' → ReqInvP (startEnginesB p xs bodies f n tried m') := by
    intro n tried m'
    fun_induction startEnginesB p xs bodies f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPassB_reqP p hp _ _ _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPassB_reqP p hp _ _ _ _ _ _ _ _ hm'))
  simp only [endOfInstantB]
  split
  · exact hm
  · exact hse _ _ _ hm

theorem loopB_reqP (p : Program) (hp : TurnsOutside p) (xs : List Nat) (bodies : List Body) (f : Nat)
    (m : Machine) : ReqInvP m → ReqInvP (loopB p xs bodies f m) := by
  fun_induction loopB p xs bodies f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstantB_reqP p hp _ _ _ _ (settle_reqP p hp _ _ (fire_reqP p _ _ hm)))

/-! ### Request conservation -/

/-- `runProgram_requests` for every program whichever of its engines plan from an iteration body
(`bodies`) or under `exclusive prefill` (`xs`), with `DistinctProgram` and `TurnsOutside`, under every
`preempt` mode, at any fuel: every session's thread in at most one place; its open turn not answered; no
turn answered twice. -/
theorem runProgramB_requests (p : Program) (xs : List Nat) (bodies : List Body) (fuel : Nat)
    (hp : DistinctProgram p) (ht : TurnsOutside p) :
    (∀ t, (runProgramB p xs bodies fuel).placed p.gap t ≤ 1) ∧
    ∀ th ∈ (runProgramB p xs bodies fuel).threads,
      (th.inTurn = true → ∀ a ∈ th.answers, a.turn ≠ th.turns) ∧ th.answers.Pairwise (fun a b => a.turn ≠ b.turn) := by
  refine ⟨(runProgramB_placed p xs bodies fuel hp).2, fun th hth => ?_⟩
  have hr : ReqInvP (runProgramB p xs bodies fuel) := by
    unfold runProgramB
    exact loopB_reqP p ht _ _ _ _ (endOfInstantB_reqP p ht _ _ _ _ (settle_reqP p ht _ _ (initial_reqP p ht)))
  have h := hr.1.1 th hth
  refine ⟨fun hin a ha => Nat.ne_of_lt (h.below (h.pending hin) a ha), ?_⟩
  exact h.distinct.imp (fun e => Nat.ne_of_gt e)

/-- The same for the run with engines `xs` under `exclusive prefill` (`runProgramX`, no body). -/
theorem runProgramX_requests (p : Program) (xs : List Nat) (fuel : Nat) (hp : DistinctProgram p) (ht : TurnsOutside p) :
    (∀ t, (runProgramX p xs fuel).placed p.gap t ≤ 1) ∧
    ∀ th ∈ (runProgramX p xs fuel).threads,
      (th.inTurn = true → ∀ a ∈ th.answers, a.turn ≠ th.turns) ∧ th.answers.Pairwise (fun a b => a.turn ≠ b.turn) := by
  rw [← runProgramB_nil p xs fuel]
  exact runProgramB_requests p xs [] fuel hp ht

end Serq.Kernel
