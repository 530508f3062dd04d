module

public import Serq.KernelBodyTimed
public import Serq.KernelKvRun

/-! # Iteration bodies: KV conservation

`Serq.KernelKvRun`'s `runProgram_kv_conserved` for the run with engines that plan from an iteration body or
under `exclusive prefill` (`runProgramB p xs bodies`, `Serq.KernelBody`; `runProgramX p xs`,
`Serq.KernelExclusive`): every pool's allocations and cache are within its cap at the end of every run (and so
at every point of it), preemption included, for every program whose hold statements name each pool once
(`runProgramB_kv_conserved`, `runProgramX_kv_conserved`).

A body's plan is the kernel's `serveIn` (over the residents' threads in the serve order) and `admitOne` (of a
queue's head that fits) in some order, and both keep `KvInvRun` (`serveIn_kv`, `serveOrdered_stmt`,
`admitOne_kvInv`): `planBody_inv` carries it. An exclusive plan admits a head that fits, runs its thread and
serves with `Machine.serveOne` too (`admitted_kvInv`, `exclusiveAdmit_kvInv`); its displacement of the decodes
changes no pool and no thread.
-/
@[expose] public section

namespace Serq.Kernel

theorem planBody_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f s chunk : Nat) (keys : List Expr)
    (n : Nat) (body : List IterStmt) (pl : Plan) (hm : KvInvRun p pl.m) :
    KvInvRun p (planBody p f s chunk keys n body pl).m := by
  refine planBody_inv p s chunk keys (KvInvRun p) ?_ ?_ ?_ f n body pl hm
  · intro m hm
    exact ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  · intro q rs m b hm
    exact ⟨serveIn_kv p s chunk q _ m b hm.1, serveOrdered_stmt p s m [] chunk q b [] rs hm.2⟩
  · intro f' i q m b hm hi hfit
    obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
    rw [Nat.sub_zero] at hq
    have hj : select p m i (getPool m.pools i).queue < countWaiters (getPool m.pools i).queue := by
      rw [hq]; exact select_lt p m i w ws
    exact admitOne_kvInv p hp f' s chunk i _ q m b hm hj hfit

theorem startBody_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f s : Nat) (eng : Engine)
    (body : Body) (m : Machine) (hm : KvInvRun p m) : KvInvRun p (startBody p f s eng body m) := by
  simp only [startBody]
  repeat' split
  all_goals first
    | exact planBody_kvInv p hp _ _ _ _ _ _ _ hm
    | exact KvInvRun.frame rfl rfl (planBody_kvInv p hp _ _ _ _ _ _ _ hm)

/-- A queue's head that fits, admitted and its thread run (`admitOne`'s and `exclusiveAdmit`'s first
half, whatever the stage its header reads). -/
theorem admitted_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f : Nat) (st : List Nat) (i j : Nat)
    (m : Machine) (hm : KvInvRun p m) (hj : j < countWaiters (getPool m.pools i).queue)
    (hfit : fits p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial,
      st⟩ (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now
      (getWaiter (getPool m.pools i).queue j).on = true) :
    KvInvRun p (exec p f (m.admitWaiter p st i j)
      (getThread (m.admitWaiter p st i j).threads (getWaiter (getPool m.pools i).queue j).thread)) := by
  have h1 := Machine.admitWaiter_kv p m st i j hm.1 hfit (hm.nodup i j hj)
  have h1' := Machine.admitWaiter_stmt p m st i j hm.2 hj
  exact ⟨exec_kv p f _ _ h1.1 h1.2.1 (Ledger.take h1.2.2 h1.2.1 _),
    exec_stmt p hp f _ _ h1' (h1'.get (getWaiter (getPool m.pools i).queue j).thread)⟩

theorem serveOne_kvInv (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (hm : KvInvRun p m) : KvInvRun p (m.serveOne p s b r n).1 :=
  ⟨Machine.serveOne_kv p _ _ _ _ _ hm.1, Machine.serveOne_stmt p _ _ _ _ _ hm.2⟩

/-- A machine with the same pools and threads (another engine state, flag or timer). -/
theorem KvInvRun.frame {p : Program} {m m' : Machine} (hp : m'.pools = m.pools) (ht : m'.threads = m.threads)
    (hm : KvInvRun p m) : KvInvRun p m' := by
  unfold KvInvRun KvRun StmtInv at *
  rw [hp, ht]
  exact hm

theorem runningPrefill_kvInv (p : Program) (s c : Nat) (ts : List Nat) (m : Machine) (b : Batch) :
    KvInvRun p m → KvInvRun p (runningPrefill p s c ts m b).1 := by
  fun_induction runningPrefill p s c ts m b <;> intro hm
  all_goals first
    | exact hm
    | exact serveOne_kvInv p _ _ _ _ _ hm
    | (rename_i ih; exact ih hm)
    | (rename_i ih; exact ih (serveOne_kvInv p _ _ _ _ _ hm))

theorem exclusiveAdmit_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (s c : Nat) :
    ∀ (f : Nat) (m : Machine) (b : Batch), KvInvRun p m → KvInvRun p (exclusiveAdmit p s c f m b).1
  | 0, m, _, hm => KvInvRun.frame rfl rfl hm
  | f + 1, m, b, hm => by
    simp only [exclusiveAdmit]
    split
    · exact hm
    · split
      · exact hm
      · next i hi =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
        rw [Nat.sub_zero] at hq
        have hj : select p m i (getPool m.pools i).queue < countWaiters (getPool m.pools i).queue := by
          rw [hq]; exact select_lt p m i w ws
        split
        · next hfit =>
          have h2 := admitted_kvInv p hp f _ i _ m hm hj hfit
          repeat' split
          all_goals first
            | exact h2
            | exact KvInvRun.frame rfl rfl h2
            | exact serveOne_kvInv p _ _ _ _ _ (KvInvRun.frame rfl rfl h2)
            | exact serveOne_kvInv p _ _ _ _ _ h2
            | exact exclusiveAdmit_kvInv p hp s c f _ _ (serveOne_kvInv p _ _ _ _ _ h2)
            | exact exclusiveAdmit_kvInv p hp s c f _ _ h2
        · exact hm

theorem planExclusive_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f s c : Nat) (m : Machine) (b : Batch)
    (hm : KvInvRun p m) : KvInvRun p (planExclusive p f s c m b).1 := by
  have h1 := runningPrefill_kvInv p s c (threadsOf (getEngineState m.engines s).residents) m b hm
  have h2 : KvInvRun p (serveIn p s c (some (.stageVar StageVar.decoding))
      (threadsOf (getEngineState (runningPrefill p s c (threadsOf (getEngineState m.engines s).residents) m b).1.engines s).residents)
      (runningPrefill p s c (threadsOf (getEngineState m.engines s).residents) m b).1
      (runningPrefill p s c (threadsOf (getEngineState m.engines s).residents) m b).2.1).1 :=
    ⟨serveIn_kv p s c _ _ _ _ h1.1, serveOrdered_stmt p s _ [] c _ _ [] _ h1.2⟩
  dsimp only [planExclusive]
  split
  · exact h1
  · split
    · exact h2
    · exact exclusiveAdmit_kvInv p hp s c f _ _ h2

theorem startExclusive_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f s : Nat) (eng : Engine) (m : Machine)
    (hm : KvInvRun p m) : KvInvRun p (startExclusive p f s eng m) := by
  simp only [startExclusive]
  repeat' split
  all_goals first
    | exact planExclusive_kvInv p hp _ _ _ _ _ hm
    | exact KvInvRun.frame rfl rfl (planExclusive_kvInv p hp _ _ _ _ _ hm)

theorem startStepB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (xs : List Nat)
    (bodies : List Body) (f s e : Nat) (m : Machine) (hm : KvInvRun p m) :
    KvInvRun p (startStepB p xs bodies f s e m) := by
  unfold startStepB
  split
  · unfold startStep
    split
    · exact startExclusive_kvInv p hp f s _ m hm
    · exact startIteration_kvInv p hp f s _ m hm
  · exact startBody_kvInv p hp f s _ _ m hm

theorem startPassB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (xs : List Nat) (bodies : List Body)
    (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    KvInvRun p m → KvInvRun p (startPassB p xs bodies f ss s tried m a).1 := by
  fun_induction startPassB p xs bodies f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_kvInv p hp _ _ (startStepB_kvInv p hp _ _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_kvInv p hp _ _ (startStepB_kvInv p hp _ _ _ _ _ _ hm)))

theorem endOfInstantB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (xs : List Nat)
    (bodies : List Body) (f : Nat) (m : Machine) (hm : KvInvRun p m) :
    KvInvRun p (endOfInstantB p xs bodies f m) := by
  have hse : ∀ n tried m', KvInvRun p m' → KvInvRun p (startEnginesB p xs bodies f n tried m') := by
    intro n tried m'
    fun_induction startEnginesB p xs bodies f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPassB_kvInv p hp _ _ _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPassB_kvInv p hp _ _ _ _ _ _ _ _ hm'))
  simp only [endOfInstantB]
  split
  · exact hm
  · exact hse _ _ _ hm

theorem loopB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (xs : List Nat)
    (bodies : List Body) (f : Nat) (m : Machine) : KvInvRun p m → KvInvRun p (loopB p xs bodies f m) := by
  fun_induction loopB p xs bodies f m <;> intro hm
  · exact ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  · exact hm
  · rename_i ih
    exact ih (endOfInstantB_kvInv p hp _ _ _ _ (settle_kvInv p hp _ _
      (fire_kvInv p _ _ ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩)))

/-- KV conservation at the end of every run of every program, whichever of its engines plan from an iteration
body (`bodies`) or under `exclusive prefill` (`xs`), whose hold statements name each pool once: every pool's
allocations and cache are within its cap (`used + cachedUnits entries ≤ cap`), preemption and eviction of
every kind included, any fuel (`runProgram_kv_conserved`'s statement for `runProgramB p xs bodies`). -/
theorem runProgramB_kv_conserved (p : Program) (xs : List Nat) (bodies : List Body) (fuel : Nat)
    (hp : p.allStmts holdsOnceOn = true) :
    ∀ j, (getPool (runProgramB p xs bodies fuel).pools j).used +
      cachedUnits (getPool (runProgramB p xs bodies fuel).pools j).entries ≤ getAt p.caps j := by
  have h := loopB_kvInv p hp xs bodies fuel _ (endOfInstantB_kvInv p hp xs bodies fuel _
    (settle_kvInv p hp fuel _ (initial_kvInv p hp)))
  exact h.1.1

/-- The same for the run with engines `xs` under `exclusive prefill` (`runProgramX`, no body). -/
theorem runProgramX_kv_conserved (p : Program) (xs : List Nat) (fuel : Nat) (hp : p.allStmts holdsOnceOn = true) :
    ∀ j, (getPool (runProgramX p xs fuel).pools j).used + cachedUnits (getPool (runProgramX p xs fuel).pools j).entries ≤
      getAt p.caps j := by
  rw [← runProgramB_nil p xs fuel]
  exact runProgramB_kv_conserved p xs [] fuel hp

end Serq.Kernel
