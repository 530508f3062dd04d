module

public import Serq.KernelKvRun
public import Serq.KernelSelect

/-! # No waiting hold is a preempted one put back, in every run without preemption

`select_least` (lean/Serq/KernelSelect.lean) says a `queue by` queue offers a waiting hold of least keys
unless its head is a hold a preemption put back at the head (`Waiter.head`, which `select` never passes).
Only a preemption sets that flag (`Machine.preempt`, lean/Serq/KernelMemory.lean); a hold joins a queue
with it unset (`exec`'s `hold`). So in a program that never preempts (`NoPreemption`), no waiting hold has
it (`HeadFree`), at every point of every run: every function of the machine keeps it (the proofs follow
`Serq.KernelKvRun`'s `StmtInv` ones: the queues are untouched, lose a hold, or gain one with the flag
unset). Then every admission of the run, which admits `select`'s hold of a machine the run passed through,
takes a waiting hold of least keys (`runProgram_headFree`, `select_least_of_headFree`).
-/

@[expose] public section

namespace Serq.Kernel

/-- No waiting hold of any pool is one a preemption put back at the head of its queue. -/
def HeadFree (ps : List PoolState) : Prop := ∀ q ∈ ps, ∀ w ∈ q.queue, w.head = false

theorem HeadFree.get {ps : List PoolState} (h : HeadFree ps) : ∀ i, ∀ w ∈ (getPool ps i).queue, w.head = false := by
  induction ps with
  | nil => intro i w hw; simp [getPool] at hw
  | cons q ps ih =>
    intro i
    cases i with
    | zero => exact h q (by simp)
    | succ i => exact ih (fun x hx => h x (List.mem_cons_of_mem _ hx)) i

theorem HeadFree.set {ps : List PoolState} (h : HeadFree ps) (i : Nat) {v : PoolState}
    (hv : ∀ w ∈ v.queue, w.head = false) : HeadFree (setPool ps i v) := by
  intro x hx
  rcases mem_setPool ps i v x hx with hx | hx
  · exact h x hx
  · rw [hx]; exact hv

theorem HeadFree.of_queues {ps ps' : List PoolState}
    (h : ps'.map PoolState.queue = ps.map PoolState.queue) (hp : HeadFree ps) : HeadFree ps' := by
  intro q hq
  have hm : q.queue ∈ ps.map PoolState.queue := h ▸ List.mem_map.2 ⟨q, hq, rfl⟩
  obtain ⟨q', hq', e⟩ := List.mem_map.1 hm
  rw [← e]
  exact hp q' hq'

theorem exec_headFree (p : Program) : ∀ (f : Nat) (m : Machine) (th : Thread),
    HeadFree m.pools → HeadFree (exec p f m th).pools
  | 0, m, th, hm => by simp only [exec]; exact hm
  | f + 1, m, th, hm => by
    simp only [exec]
    split
    · exact HeadFree.of_queues (endLeases_queues ..) hm
    · exact exec_headFree p f _ _ hm
    · split
      · exact exec_headFree p f _ _ hm
      · exact exec_headFree p f _ _ hm
    · split
      · exact exec_headFree p f _ _ (HeadFree.of_queues (giveBack_queues ..) hm)
      · refine exec_headFree p f _ _ ?_
        rw [Machine.leaseTimer_pools]
        exact HeadFree.of_queues (giveBack_queues ..) hm
    · exact exec_headFree p f _ _ hm
    · next st rest k heq =>
      cases st with
      | set i e => exact exec_headFree p f _ _ hm
      | observe j e => exact exec_headFree p f _ _ hm
      | stop =>
        try dsimp only
        exact HeadFree.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm
      | release i =>
        try dsimp only
        split
        · exact exec_headFree p f _ _ (HeadFree.of_queues (releaseIn_queues ..) hm)
        · exact exec_headFree p f _ _ (HeadFree.of_queues (endLeasesOn_queues ..) hm)
      | branch t yes no => exact exec_headFree p f _ _ hm
      | «while» t body =>
        try dsimp only
        split
        · exact exec_headFree p f _ _ hm
        · exact exec_headFree p f _ _ hm
      | loop body => exact exec_headFree p f _ _ hm
      | turn =>
        try dsimp only
        split
        · exact hm
        · exact exec_headFree p f _ _ hm
      | run s w =>
        try dsimp only
        split
        · exact exec_headFree p f _ _ hm
        · show HeadFree (m.addJob p s th.serial _).pools
          rw [Machine.addJob_pools]; exact hm
      | step s dec g w =>
        try dsimp only
        split
        · exact exec_headFree p f _ _ hm
        · exact hm
      | grow j e =>
        try dsimp only
        split
        · exact hm
        · split
          · exact exec_headFree p f _ _ hm
          · split
            · exact exec_headFree p f _ _ (HeadFree.of_queues (setPool_queues _ _ _ rfl) hm)
            · exact hm
      | hold on reuse cache body =>
        try dsimp only
        split
        · exact HeadFree.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm
        · split
          · exact hm
          · refine hm.set _ ?_
            intro x hx
            split at hx
            · rcases mem_appendWaiter' _ _ x hx with hx | hx
              · exact hm.get _ x hx
              · rw [hx]
            · rcases mem_insertByCreation _ _ _ _ _ _ _ x hx with hx | hx
              · exact hm.get _ x hx
              · rw [hx]

theorem runReady_headFree (p : Program) (f : Nat) (m : Machine) :
    HeadFree m.pools → HeadFree (runReady p f m).pools := by
  fun_induction runReady p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (exec_headFree p _ _ _ hm)

theorem Machine.admitWaiter_headFree (p : Program) (m : Machine) (st : List Nat) (i j : Nat) (hm : HeadFree m.pools) :
    HeadFree (m.admitWaiter p st i j).pools := by
  simp only [Machine.admitWaiter]
  refine HeadFree.of_queues (admitOn_queues ..) (hm.set i (v := { getPool m.pools i with
      queue := removeWaiter (getPool m.pools i).queue j }) ?_)
  exact fun x hx => hm.get i x (mem_removeWaiter _ _ _ hx)

theorem retryQueue_headFree (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    HeadFree m.pools → HeadFree (retryQueue p f m i b).1.pools
  | 0, m, i, b, hm => hm
  | f + 1, m, i, b, hm => by
    simp only [retryQueue]
    split
    · exact hm
    · next _ hd tl _ =>
      split
      · exact retryQueue_headFree p f _ i true (Machine.admitWaiter_headFree p m [] i (select p m i (hd :: tl)) hm)
      · exact hm

theorem retryGrowers_headFree (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    HeadFree m.pools → HeadFree (retryGrowers p f m i b).1.pools
  | 0, m, i, b, hm => hm
  | f + 1, m, i, b, hm => by
    simp only [retryGrowers]
    split
    · exact hm
    · split
      · exact hm
      · split
        · refine retryGrowers_headFree p f _ i true ?_
          simp only [Machine.grownReq, Machine.put]
          exact HeadFree.of_queues (setPool_queues _ _ _ rfl) hm
        · exact hm

theorem retryPools_headFree (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    HeadFree m.pools → HeadFree (retryPools p f n i m b).1.pools := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    apply ih
    show HeadFree (retryPool p _ _ _ _).1.pools
    unfold retryPool
    split
    · exact retryQueue_headFree p _ _ _ _ (retryGrowers_headFree p _ _ _ _ hm)
    · exact retryGrowers_headFree p _ _ _ _ hm

theorem settle_headFree (p : Program) (f : Nat) (m : Machine) :
    HeadFree m.pools → HeadFree (settle p f m).pools := by
  fun_induction settle p f m <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPools_headFree p _ _ _ _ _ (runReady_headFree p _ _ hm))
  · exact retryPools_headFree p _ _ _ _ _ (runReady_headFree p _ _ hm)

theorem Machine.serveOne_headFree (p : Program) (hpre : NoPreemption p) (s : Nat) (m : Machine) (b : Batch)
    (r : Resident) (n : Nat) (hm : HeadFree m.pools) : HeadFree (m.serveOne p s b r n).1.pools := by
  have hg : ∀ t i want h, HeadFree (m.grown p t i want h).pools := by
    intro t i want h
    simp only [Machine.grown]
    exact HeadFree.of_queues (setPool_queues _ _ _ rfl) hm
  have hs : ∀ (m' : Machine), (m'.served s b r n).1.pools = m'.pools := fun _ => rfl
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact hm
    | (rw [hs]; exact hm)
    | (rw [hs]; exact hg _ _ _ _)
    | exact absurd (hpre _) (by assumption)

theorem serveOrdered_headFree (p : Program) (hpre : NoPreemption p) (s : Nat) (m : Machine)
    (running : List Nat) (chunk : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident)
    (hm : HeadFree m.pools) : HeadFree (serveOrdered p s m running chunk q b keys rs).1.pools := by
  have hs : ∀ (ts : List Nat) (m : Machine) (b : Batch), HeadFree m.pools → HeadFree (serveIn p s chunk q ts m b).1.pools := by
    intro ts
    induction ts with
    | nil => intro m b hm; exact hm
    | cons t ts ih =>
      intro m b hm
      simp only [serveIn]
      repeat' split
      all_goals first
        | exact hm
        | exact ih _ _ hm
        | exact Machine.serveOne_headFree p hpre _ _ _ _ _ hm
        | exact ih _ _ (Machine.serveOne_headFree p hpre _ _ _ _ _ hm)
  cases keys <;> simp only [serveOrdered] <;> exact hs _ m b hm

theorem admitOne_headFree (p : Program) (hpre : NoPreemption p)
    (f s chunk i j : Nat) (q : Option Expr) (m : Machine) (b : Batch) (hm : HeadFree m.pools) :
    HeadFree (admitOne p f s chunk i j q m b).1.pools := by
  have h1 := Machine.admitWaiter_headFree p m (admissionStage chunk b.budget) i j hm
  have h2 := exec_headFree p f _ (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads
    (getWaiter (getPool m.pools i).queue j).thread) h1
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact Machine.serveOne_headFree p hpre _ _ _ _ _ h2

theorem admitWaiting_headFree (p : Program) (hpre : NoPreemption p) (s c' : Nat) (q : Option Expr) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), HeadFree m.pools → HeadFree (admitWaiting p s c' q gated f m b).1.pools
  | 0, m, _, hm => hm
  | f + 1, m, b, hm => by
    simp only [admitWaiting]
    split
    · exact hm
    · split
      · exact hm
      · split
        · exact admitWaiting_headFree p hpre s c' q gated f _ _ (admitOne_headFree p hpre f s c' _ _ q m b hm)
        · exact hm

theorem startIteration_headFree (p : Program) (hpre : NoPreemption p) (f s : Nat) (eng : Engine) (m : Machine)
    (hm : HeadFree m.pools) : HeadFree (startIteration p f s eng m).pools := by
  have hs : ∀ (running : List Nat) (c' : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident),
      HeadFree (serveOrdered p s m running c' q b keys rs).1.pools :=
    fun running c' q b keys rs => serveOrdered_headFree p hpre s m running c' q b keys rs hm
  simp only [startIteration]
  repeat' split
  all_goals first
    | exact admitWaiting_headFree p hpre _ _ _ _ _ _ _ (hs _ _ _ _ _ _)
    | (have h := admitWaiting_headFree p hpre _ _ _ _ _ _ _ (hs _ _ _ _ _ _)
       exact h)

theorem fire_headFree (p : Program) (m : Machine) (w : Wake) (hm : HeadFree m.pools) : HeadFree (fire p m w).pools := by
  cases w with
  | resume t => exact hm
  | arrival a =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | fifoDone s' t =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | iterationEnd s' =>
    simp only [fire]
    show HeadFree (m.advanceHolds _).pools
    rw [Machine.advanceHolds_pools]; exact hm
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact hm
    · exact HeadFree.of_queues (endLease_queues ..) hm

theorem startPass_headFree (p : Program) (hpre : NoPreemption p)
    (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    HeadFree m.pools → HeadFree (startPass p f ss s tried m a).1.pools := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_headFree p _ _ (startIteration_headFree p hpre _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_headFree p _ _ (startIteration_headFree p hpre _ _ _ _ hm)))

theorem endOfInstant_headFree (p : Program) (hpre : NoPreemption p) (f : Nat) (m : Machine) (hm : HeadFree m.pools) :
    HeadFree (endOfInstant p f m).pools := by
  have hse : ∀ n tried m', HeadFree m'.pools → HeadFree (startEngines p f n tried m').pools := by
    intro n tried m'
    fun_induction startEngines p f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPass_headFree p hpre _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPass_headFree p hpre _ _ _ _ _ _ hm'))
  simp only [endOfInstant]
  split
  · exact hm
  · exact hse _ _ _ hm

theorem loop_headFree (p : Program) (hpre : NoPreemption p) (f : Nat) (m : Machine) :
    HeadFree m.pools → HeadFree (loop p f m).pools := by
  fun_induction loop p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstant_headFree p hpre _ _ (settle_headFree p _ _ (fire_headFree p _ _ hm)))

theorem initial_headFree (p : Program) : HeadFree (initial p).pools := by
  have hq : (initial p).pools = emptyPools p.caps := by
    unfold initial; dsimp only; split <;> rfl
  rw [hq]
  intro q hqm
  have : ∀ (cs : List Nat), ∀ q ∈ emptyPools cs, q.queue = [] := by
    intro cs
    induction cs with
    | nil => intro q h; simp [emptyPools] at h
    | cons x xs ih =>
      intro q h
      simp only [emptyPools, List.mem_cons] at h
      rcases h with h | h
      · rw [h]
      · exact ih q h
  intro w hw
  rw [this _ q hqm] at hw
  simp at hw

/-- In a program that never preempts, no waiting hold of the run is a preempted one put back at the head
of its queue: at the end of every run, whatever the fuel (and at every point of it: every function of
the machine keeps `HeadFree`). -/
theorem runProgram_headFree (p : Program) (fuel : Nat) (hpre : NoPreemption p) :
    HeadFree (runProgram p fuel).pools :=
  loop_headFree p hpre fuel _ (endOfInstant_headFree p hpre fuel _ (settle_headFree p fuel _ (initial_headFree p)))

/-- `select_least` on a machine whose waiting holds are `HeadFree` (every machine of a run without
preemption): the hold a pool's `queue by` queue offers is in the queue and no waiting hold's keys come
before its keys. -/
theorem select_least_of_headFree (p : Program) (m : Machine) (hm : HeadFree m.pools) (i : Nat)
    (hkeys : getKeys p.queueKeys i ≠ []) (w : Waiter) (ws : List Waiter) (hq : (getPool m.pools i).queue = w :: ws) :
    select p m i (w :: ws) < ws.length + 1 ∧
    ∀ x ∈ w :: ws, keysBefore (waiterKeys p m (getKeys p.queueKeys i) x)
      (waiterKeys p m (getKeys p.queueKeys i) (getWaiter (w :: ws) (select p m i (w :: ws)))) = false :=
  select_least p m i w ws hkeys (hm.get i w (by rw [hq]; simp))

end Serq.Kernel
