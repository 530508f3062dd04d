module

public import Serq.KernelBodyTimed
public import Serq.KernelKvRun

/-! # Iteration bodies: KV conservation

`Serq.KernelKvRun`'s `runProgram_kv_conserved` for the run with engines that plan from an iteration body
(`runProgramB p [] bodies`, `Serq.KernelBody`): every pool's allocations and cache are within its cap at the
end of every run (and so at every point of it), preemption included, for every program whose hold
statements name each pool once (`runProgramB_kv_conserved`).

A body's plan is the kernel's `serveIn` (over the residents' threads in the serve order) and `admitOne` (of a
queue's head that fits) in some order, and both keep `KvInvRun` (`serveIn_kv`, `serveOrdered_stmt`,
`admitOne_kvInv`): `planBody_inv` carries it. Engines under `exclusive prefill` are not covered here (KV
conservation is not yet stated for `runProgramX` either).
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
    (body : List IterStmt) (m : Machine) (hm : KvInvRun p m) : KvInvRun p (startBody p f s eng body m) := by
  have h := planBody_kvInv p hp f s (eval (engineView p m (runningOf p m s)) [] m.now 0 eng.chunk) eng.order f body
    ⟨m, ⟨eval (engineView p m (runningOf p m s)) [] m.now 0 eng.budget, 0, 0, 0, 0,
      eval (engineView p m (runningOf p m s)) [] m.now 0 eng.granule, false⟩, false, 0⟩ hm
  simp only [startBody]
  repeat' split
  all_goals first
    | exact h
    | exact ⟨⟨h.1.1, h.1.2.1, h.1.2.2⟩, ⟨h.2.1, h.2.2⟩⟩

theorem startStepB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (bodies : List (List IterStmt))
    (f s e : Nat) (m : Machine) (hm : KvInvRun p m) : KvInvRun p (startStepB p [] bodies f s e m) := by
  unfold startStepB
  split
  · exact startIteration_kvInv p hp f s _ m hm
  · exact startBody_kvInv p hp f s _ _ m hm

theorem startPassB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (bodies : List (List IterStmt)) (f : Nat)
    (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    KvInvRun p m → KvInvRun p (startPassB p [] bodies f ss s tried m a).1 := by
  fun_induction startPassB p [] bodies f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_kvInv p hp _ _ (startStepB_kvInv p hp _ _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_kvInv p hp _ _ (startStepB_kvInv p hp _ _ _ _ _ hm)))

theorem endOfInstantB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (bodies : List (List IterStmt)) (f : Nat)
    (m : Machine) (hm : KvInvRun p m) : KvInvRun p (endOfInstantB p [] bodies f m) := by
  have hse : ∀ n tried m', KvInvRun p m' → KvInvRun p (startEnginesB p [] bodies f n tried m') := by
    intro n tried m'
    fun_induction startEnginesB p [] bodies f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPassB_kvInv p hp _ _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPassB_kvInv p hp _ _ _ _ _ _ _ hm'))
  simp only [endOfInstantB]
  split
  · exact hm
  · exact hse _ _ _ hm

theorem loopB_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (bodies : List (List IterStmt)) (f : Nat)
    (m : Machine) : KvInvRun p m → KvInvRun p (loopB p [] bodies f m) := by
  fun_induction loopB p [] bodies f m <;> intro hm
  · exact ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  · exact hm
  · rename_i ih
    exact ih (endOfInstantB_kvInv p hp _ _ _ (settle_kvInv p hp _ _
      (fire_kvInv p _ _ ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩)))

/-- KV conservation at the end of every run of every program whose engines plan from iteration bodies (or
under vLLM's schedule), whose hold statements name each pool once: every pool's allocations and cache are
within its cap (`used + cachedUnits entries ≤ cap`), preemption and eviction of every kind included, any
fuel (`runProgram_kv_conserved`'s statement for `runProgramB p [] bodies`). -/
theorem runProgramB_kv_conserved (p : Program) (bodies : List (List IterStmt)) (fuel : Nat)
    (hp : p.allStmts holdsOnceOn = true) :
    ∀ j, (getPool (runProgramB p [] bodies fuel).pools j).used +
      cachedUnits (getPool (runProgramB p [] bodies fuel).pools j).entries ≤ getAt p.caps j := by
  have h := loopB_kvInv p hp bodies fuel _ (endOfInstantB_kvInv p hp bodies fuel _
    (settle_kvInv p hp fuel _ (initial_kvInv p hp)))
  exact h.1.1

end Serq.Kernel
