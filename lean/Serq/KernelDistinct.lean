module

public import Serq.KernelPlaced

/-! # No thread twice a resident: where every thread is, through every run (issue 13)

`Serq.KernelTiledRun` reduces `full_or_short` for every run (`runProgram_full_or_short_of_distinct`) to
an invariant that keeps no thread twice among an idle engine's residents (`DistinctInvariant`). This
module gives one. A session's thread is, at any point of a run, in at most one place: the ready threads
(`Machine.ready`), a timer that will make it ready (a delay run's end `resume`, a fifo run's end
`fifoDone`, its `arrival`), a fifo stage's queue (`Job`), a pool's queue (`Waiter`), or an engine's
residents (`Resident`); or nowhere (its session ended, or the thread is the one `exec` runs now).
`Machine.placed m g t` counts the places of `t` (`g`: the program's renewal gap, below), and the
invariant is `Placed g m`: every thread is placed at most once, and the threads and holds are their own
(`Owned`): the thread list's entry `j` is thread `j`, and every hold its release frames carry names `j`
(`OwnFrames`), or the entry has nothing left to run (`SerialOk`); and every hold waiting in a pool's
queue names a thread whose entry is its own (`QueuedOk`). Every function of the machine takes a thread
out of a place only to put it in another, or to run it (`exec`, which places the thread it runs at most
once: `exec_moved`); so every function keeps `Placed` (`Keeps`), and `Placed` gives `threadsDistinct`
for every engine. (The counts, `Owned`, `Moved`/`Keeps`, a thread's run and the settling of an instant are
`Serq.KernelPlaced`'s; this module has an iteration, the timers, the run's start and the event loop.)

Preemption is covered. A growth that does not fit under `preempt by (keys)` / `preempt lifo`
(`growPreempting`) preempts a victim `v` that `victimIn` found among the engine's residents
(`victimIn_resident`); `Machine.preempt` takes `v` out of the residents (`removeResident`: one place
less, `occ_removeResident`) and puts back in a queue the hold a release frame of `v`'s continuation
carried (`abandonTo`), which names `v` by `OwnFrames` (`abandonTo_own`, `preempt_own`): one place more
for the same thread, so the preemption keeps `Placed` (`Machine.preempt_keeps`, `Keeps.requeue`;
`Requeued`: at the head, at the back, or in creation order). `OwnFrames` holds because the only release
frame a thread gains is its admission's (`Machine.admitWaiter_serial`), which carries the hold that
waited, naming the thread (`QueuedOk`: a hold joins a queue naming the thread that runs, whose entry is
its own, `exec_moved`'s second hypothesis).

Under `arrive renewal(g)` (`g ≠ 0`) an arrival's event makes its session ready and sets the next
session's arrival; a pending arrival of session `u` is counted as a place of every thread from `u` on
(`wakeOcc`), so that the event is neutral (`u` placed once more, the pending arrival of `u + 1` placing
every thread from `u + 1`), and the sessions still to arrive are placed by it. A trace's arrivals are
all set as the run starts, each counted once for its own session.

What the proof excludes, on the program's value (`DistinctProgram`, decided by
`DistinctProgram.of_check`): a trace together with a renewal gap (`gap = 0 ∨ arrivalTimes = []`; a
program's arrival law is a batch, a renewal or a trace, not two): an arrival would set the next one's
timer beside the trace's own.

Pools admitted by an engine (`pool reqs on S`) are covered: an engine's admission takes the hold out of
its queue and runs its thread at once (`admitOne_keeps`). So every run of every program with
`DistinctProgram`, preempting or not, has no thread twice a resident of any engine
(`runProgram_threadsDistinct`, through `runProgram_placed`; on the vLLM oracle program, which preempts,
`Serq.Oracle.vllm_request_residents_distinct` in `KernelOracleDistinct.lean`), and `Placed p.gap` is a
`DistinctInvariant` of it (`Placed.distinctInvariant`).
`runProgram_full_or_short` is then `full_or_short` for every run with hypotheses on the program only
(those of `runProgram_full_or_short_of_distinct`, among them that no pool is admitted by the engine `s`
the statement is about, `hvia`, which `KernelFull`'s plan of one iteration needs, and `DistinctProgram`).
An engine that admits its own queue, as every engine program of `examples/` does, is
`Serq.Kernel.runProgram_full_or_short_admitting` (`KernelAdmitFull.lean`), which needs no `hvia`.
-/
@[expose] public section

namespace Serq.Kernel

variable {g : Nat}

/-! ### An iteration's start: serving, growing, preempting -/

theorem Keeps.served (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) : Keeps g m (m.served s b r n).1 := by
  simp only [Machine.served]
  exact Keeps.engine m s _ (threadsOf_setSched _ _ _)

theorem Machine.grown_keeps (p : Program) (m : Machine) (t i want : Nat) (h : Held) : Keeps g m (m.grown p t i want h) := by
  simp only [Machine.grown]
  refine (Keeps.setPool m _ _ ?_).trans (Keeps.put _ _ ?_)
  · rfl
  · exact fun ho => growPart_own _ _ _ _ (ho.1.own t)

theorem occ_removeResident_le (t v : Nat) : ∀ rs : List Resident,
    occ t (threadsOf (removeResident v rs)) ≤ occ t (threadsOf rs)
  | [] => Nat.le_refl _
  | r :: rs => by
    have := occ_removeResident_le t v rs
    simp only [removeResident]
    split
    · simp only [threadsOf, occ]; omega
    · simp only [threadsOf, occ]; omega

/-- A resident taken out of the running list: its thread is placed once less. -/
theorem occ_removeResident (t v : Nat) : ∀ rs : List Resident, v ∈ threadsOf rs →
    occ t (threadsOf (removeResident v rs)) + bump t v = occ t (threadsOf rs)
  | [], h => by simp [threadsOf] at h
  | r :: rs, h => by
    simp only [removeResident]
    split
    · next he =>
      have e : r.thread = v := by simpa using he
      simp only [threadsOf, occ, e]; omega
    · next he =>
      have ne : r.thread ≠ v := by simpa using he
      have h' : v ∈ threadsOf rs := by
        simp only [threadsOf, List.mem_cons] at h
        rcases h with h | h
        · exact absurd h.symm ne
        · exact h
      have := occ_removeResident t v rs h'
      simp only [threadsOf, occ]; omega

theorem ite_some_eq {c : Bool} {a : Nat × List Nat} {best : Option (Nat × List Nat)} {v : Nat} {k : List Nat}
    (h : (if c = true then some a else best) = some (v, k)) : a.1 = v ∨ best = some (v, k) := by
  split at h
  · left; cases h; rfl
  · right; exact h

/-- The victim `victimIn` finds is one of the residents (or the best before them). -/
theorem victimIn_mem (p : Program) (m : Machine) (keys : List Expr) (i : Nat) :
    ∀ (rank : Nat) (best : Option (Nat × List Nat)) (rs : List Resident) (v : Nat),
      victimIn p m keys i rank best rs = some v → (∃ k, best = some (v, k)) ∨ v ∈ threadsOf rs
  | _, none, [], v, h => by simp [victimIn] at h
  | _, some (t, k), [], v, h => by
    simp only [victimIn, Option.some.injEq] at h
    subst h
    exact Or.inl ⟨k, rfl⟩
  | rank, best, r :: rs, v, h => by
    simp only [victimIn] at h
    split at h
    · rcases victimIn_mem p m keys i rank best rs v h with e | e
      · exact Or.inl e
      · exact Or.inr (List.mem_cons_of_mem _ e)
    · rcases victimIn_mem p m keys i _ _ rs v h with ⟨k, e⟩ | e
      · rcases ite_some_eq e with e | e
        · subst e; simp [threadsOf]
        · exact Or.inl ⟨k, e⟩
      · exact Or.inr (List.mem_cons_of_mem _ e)

theorem victimIn_resident {p : Program} {m : Machine} {keys : List Expr} {i v : Nat} {rs : List Resident}
    (h : victimIn p m keys i 0 none rs = some v) : v ∈ threadsOf rs := by
  rcases victimIn_mem p m keys i 0 none rs v h with ⟨_, e⟩ | e
  · cases e
  · exact e

/-- Resident `v` out of engine `s`'s running list. -/
theorem Keeps.unseat (m : Machine) (s v : Nat) :
    Keeps g m { m with engines := setEngineState m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents } } :=
  ⟨id, fun _ t => by
    have h1 := occEngines_set t m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents }
    have h2 := occ_removeResident_le t v (getEngineState m.engines s).residents
    try simp only at h1
    simp only [Machine.placed]
    omega⟩

/-- `ws'` is the queue `ws` with the hold `w` put back in it (at the head, the back, or in creation order). -/
def Requeued (ws ws' : List Waiter) (w : Waiter) : Prop :=
  (∀ x ∈ ws', x ∈ ws ∨ x = w) ∧ ∀ t, occWaiters t ws' ≤ occWaiters t ws + bump t w.thread

theorem Requeued.cons (ws : List Waiter) (w : Waiter) : Requeued ws (w :: ws) w :=
  ⟨fun x hx => by
    simp only [List.mem_cons] at hx
    rcases hx with e | e
    · exact Or.inr e
    · exact Or.inl e,
   fun t => by simp only [occWaiters]; omega⟩

theorem Requeued.append (ws : List Waiter) (w : Waiter) : Requeued ws (appendWaiter ws w) w :=
  ⟨mem_appendWaiter w ws, fun t => by rw [occWaiters_append]; exact Nat.le_refl _⟩

theorem Requeued.insert (tn : List Nat) (ths : List Thread) (now created serial : Nat) (ws : List Waiter) (w : Waiter) :
    Requeued ws (insertByCreation tn ths now created serial w ws) w :=
  ⟨mem_insertByCreation tn ths now created serial w ws, fun t => by rw [occWaiters_insert]; exact Nat.le_refl _⟩

/-- A preemption's machine: resident `v` out of engine `s`, the pools' units as `ps` (their queues `m`'s),
the hold `w` of thread `v` back in pool `first`'s queue, and thread `v` back in its entry with what is left
of its continuation. Thread `v` leaves the residents and is placed once in the queue. -/
theorem Keeps.requeue (m : Machine) (s v first : Nat) (ps : List PoolState) (ws : List Waiter) (w : Waiter)
    (gp : List Progress) (th : Thread) (hv : v ∈ threadsOf (getEngineState m.engines s).residents)
    (hps : ps.map PoolState.queue = m.pools.map PoolState.queue) (hq : Requeued (getPool ps first).queue ws w)
    (hown : Owned m → w.thread = v ∧ (getThread m.threads v).serial = v ∧ th.serial = v ∧ OwnFrames v th.k) :
    Keeps g m ({ m with
      engines := setEngineState m.engines s { getEngineState m.engines s with
        residents := removeResident v (getEngineState m.engines s).residents }
      pools := Serq.Kernel.setPool ps first { getPool ps first with queue := ws }
      progress := gp }.put th) :=
  ⟨fun ho => by
    obtain ⟨hw, he, hs, hk⟩ := hown ho
    have hq0 := QueuedOk.of_queues hps ho.2
    refine Owned.put ?_ th (hs ▸ hk)
    refine ⟨ho.1, hq0.setPool first _ (fun x hx => ?_)⟩
    rcases hq.1 x hx with e | e
    · exact hq0.get first x e
    · rw [e, hw]; exact he,
   fun ho t => by
    obtain ⟨hw, _, _, _⟩ := hown ho
    have h1 := occEngines_set t m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents }
    have h2 := occ_removeResident t v _ hv
    have h3 := occPools_set t ps first { getPool ps first with queue := ws }
    have h4 := hq.2 t
    have h5 := occPools_of_queues t _ _ hps
    rw [hw] at h4
    try simp only at h1 h3
    simp only [Machine.placed, Machine.put]
    omega⟩

/-- The hold a preemption requeues is the victim's own, and the victim's entry is its own. -/
theorem preempt_own (p : Program) (m : Machine) (i v : Nat) (ps : List PoolState) (w : Waiter) (ho : Owned m)
    (hw : (abandonTo p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i ps
      (getThread m.threads v).k).2.1 = some w) :
    w.thread = v ∧ (getThread m.threads v).serial = v ∧
      OwnFrames v (abandonTo p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i ps
        (getThread m.threads v).k).2.2 := by
  rcases ho.1 v with ⟨e, hk⟩ | e
  · exact ⟨(abandonTo_own _ _ _ _ _ _ v _ _ hk).2 w hw, e, (abandonTo_own _ _ _ _ _ _ v _ _ hk).1⟩
  · rw [e] at hw
    simp [abandonTo] at hw

/-- A resident of engine `s` preempted: it leaves the running list, and its hold, if one is given back,
goes to a queue naming it. -/
theorem Machine.preempt_keeps (p : Program) (s i v : Nat) (m : Machine) (b : Batch)
    (hv : v ∈ threadsOf (getEngineState m.engines s).residents) : Keeps g m (m.preempt p s i v b).1 := by
  simp only [Machine.preempt]
  cases hA : (abandonTo p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i m.pools
      (getThread m.threads v).k).2.1 with
  | none =>
    try dsimp only
    exact Keeps.unseat m s v
  | some w =>
    try dsimp only
    repeat' split
    all_goals
      first
        | refine Keeps.requeue m s v _ _ _ _ _ _ hv (abandonTo_queues ..) (Requeued.cons _ _) ?_
        | refine Keeps.requeue m s v _ _ _ _ _ _ hv (abandonTo_queues ..) (Requeued.append _ _) ?_
        | refine Keeps.requeue m s v _ _ _ _ _ _ hv (abandonTo_queues ..) (Requeued.insert _ _ _ _ _ _ _) ?_
      intro ho
      have h := preempt_own p m i v m.pools w ho hA
      exact ⟨h.1, h.2.1, h.2.1, h.2.2⟩

theorem growPreempting_keeps (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    Keeps g m (growPreempting p s i want t f m b).1 := by
  fun_induction growPreempting p s i want t f m b
  all_goals first
    | exact Keeps.frame (fun h => by exact h) (fun _ => by rfl)
    | exact Keeps.refl _
    | exact Machine.grown_keeps p _ _ _ _ _
    | exact Machine.preempt_keeps p _ _ _ _ _ (victimIn_resident ‹_›)
    | (rename_i ih; exact (Machine.preempt_keeps p _ _ _ _ _ (victimIn_resident ‹_›)).trans ih)

theorem Machine.serveOne_keeps (p : Program) (s : Nat) (m : Machine) (b : Batch)
    (r : Resident) (n : Nat) : Keeps g m (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals try dsimp only
  all_goals first
    | exact Keeps.served m s b r n
    | exact (Machine.grown_keeps p m _ _ _ _).trans (Keeps.served _ s b r n)
    | exact Keeps.refl m
    | exact Keeps.trans (growPreempting_keeps p s _ _ _ _ m b) (Keeps.served _ s _ r n)
    | exact growPreempting_keeps p s _ _ _ _ m b

theorem serveIn_keeps (p : Program) (s chunk : Nat) (q : Option Expr) :
    ∀ (ts : List Nat) (m : Machine) (b : Batch), Keeps g m (serveIn p s chunk q ts m b).1 := by
  intro ts
  induction ts with
  | nil => intro m b; exact Keeps.refl m
  | cons t ts ih =>
    intro m b
    simp only [serveIn]
    repeat' split
    all_goals first
      | exact Keeps.refl _
      | exact ih _ _
      | exact Machine.serveOne_keeps p _ _ _ _ _
      | exact (Machine.serveOne_keeps p _ _ _ _ _).trans (ih _ _)

theorem serveOrdered_keeps (p : Program) (s : Nat) (m : Machine)
    (running : List Nat) (chunk : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident) :
    Keeps g m (serveOrdered p s m running chunk q b keys rs).1 := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_keeps p s chunk q _ m b

/-- The pool `firstQueue` finds has a hold waiting. -/
theorem firstQueue_some (s : Nat) : ∀ (k : Nat) (vs : List Nat) (qs : List PoolState) (i : Nat),
    firstQueue s k vs qs = some i → k ≤ i ∧ ∃ w ws, (getPool qs (i - k)).queue = w :: ws
  | k, v :: vs, q :: qs, i, h => by
    simp only [firstQueue] at h
    split at h
    · next w ws heq =>
      split at h
      · cases h
        exact ⟨Nat.le_refl _, w, ws, by simp [getPool, heq]⟩
      · obtain ⟨hk, w', ws', e⟩ := firstQueue_some s (k + 1) vs qs i h
        refine ⟨by omega, w', ws', ?_⟩
        have e2 : i - k = (i - (k + 1)) + 1 := by omega
        rw [e2]
        simpa [getPool] using e
    · obtain ⟨hk, w', ws', e⟩ := firstQueue_some s (k + 1) vs qs i h
      refine ⟨by omega, w', ws', ?_⟩
      have e2 : i - k = (i - (k + 1)) + 1 := by omega
      rw [e2]
      simpa [getPool] using e
  | _, [], _, _, h => by simp [firstQueue] at h
  | _, _ :: _, [], _, h => by simp [firstQueue] at h

/-- An engine admits a waiting hold: its thread leaves the queue and runs at once (then its run, if it
started one on the engine, is served). -/
theorem admitOne_keeps (p : Program) (f s chunk i j : Nat) (q : Option Expr)
    (m : Machine) (b : Batch) (hj : j < countWaiters (getPool m.pools i).queue) :
    Keeps g m (admitOne p f s chunk i j q m b).1 := by
  have h2 : Keeps g m (exec p f (m.admitWaiter p (admissionStage chunk b.budget) i j)
      (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread)) :=
    Keeps.take p f _ (Machine.admitWaiter_serial p m _ i j hj) (fun _ t => Machine.admitWaiter_placed p m _ i j hj t)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact h2.trans (Machine.serveOne_keeps p _ _ _ _ _)

theorem admitWaiting_keeps (p : Program) (s c : Nat) (q : Option Expr) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), Keeps g m (admitWaiting p s c q gated f m b).1
  | 0, m, _ => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m, b => by
    simp only [admitWaiting]
    split
    · exact Keeps.refl m
    · split
      · exact Keeps.refl m
      · next i hi =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
        rw [Nat.sub_zero] at hq
        split
        · refine Keeps.trans ?_ (admitWaiting_keeps p s c q gated f _ _)
          refine admitOne_keeps p f s c i _ q m b ?_
          rw [hq]
          exact select_lt p m i w ws
        · exact Keeps.refl m

theorem startIteration_keeps (p : Program) (f s : Nat) (eng : Engine)
    (m : Machine) : Keeps g m (startIteration p f s eng m) := by
  simp only [startIteration]
  split
  · exact (serveOrdered_keeps p ..).trans (admitWaiting_keeps p s _ _ _ _ _ _)
  · split
    · exact Keeps.trans ((serveOrdered_keeps p ..).trans (admitWaiting_keeps p s _ _ _ _ _ _))
        (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
    · exact Keeps.trans ((serveOrdered_keeps p ..).trans (admitWaiting_keeps p s _ _ _ _ _ _))
        (Keeps.trans (Keeps.engine _ s _ (by rfl)) (Keeps.setTimer _ _ _ fun _ => by rfl))

/-! ### A timer fires -/

@[simp] theorem Machine.advanceHolds_ready (m : Machine) (rs : List Resident) : (m.advanceHolds rs).ready = m.ready := by
  fun_induction m.advanceHolds rs <;> simp_all [Machine.put]

@[simp] theorem Machine.advanceHolds_stages (m : Machine) (rs : List Resident) : (m.advanceHolds rs).stages = m.stages := by
  fun_induction m.advanceHolds rs <;> simp_all [Machine.put]

@[simp] theorem Machine.advanceHolds_pools (m : Machine) (rs : List Resident) : (m.advanceHolds rs).pools = m.pools := by
  fun_induction m.advanceHolds rs <;> simp_all [Machine.put]

theorem Machine.advanceHolds_keeps (m : Machine) (rs : List Resident) : Keeps g m (m.advanceHolds rs) := by
  fun_induction m.advanceHolds rs
  · exact Keeps.refl _
  all_goals first
    | assumption
    | (rename_i ih; refine (Keeps.put _ _ ?_).trans ih; exact fun ho => advancePart_own _ _ _ _ (ho.1.own _))

/-- An iteration's end: the threads whose run ended go from the residents to the ready threads. -/
theorem Keeps.finish (m : Machine) (s : Nat) (es : EngineState) (hes : (getEngineState m.engines s).residents = es.residents)
    (gp : List Progress) (t0 t1 : Nat) (gs : List Progress) :
    Keeps g m { m with
      progress := gp,
      engines := setEngineState m.engines s { es with busy := false, residents := (applyTokens t0 t1 gs es.residents).2.1 },
      ready := appendNats m.ready (applyTokens t0 t1 gs es.residents).2.2 } :=
  ⟨id, fun _ t => by
    have h1 := occEngines_set t m.engines s { es with busy := false, residents := (applyTokens t0 t1 gs es.residents).2.1 }
    have h2 := occ_applyTokens t t0 t1 gs es.residents
    rw [hes] at h1
    try simp only at h1
    simp only [Machine.placed, occ_appendNats]
    omega⟩

theorem fire_moved (p : Program) (m : Machine) (w : Wake) :
    Moved p.gap m (fire p m w) (fun t => wakeOcc p.gap t w) := by
  cases w with
  | resume u =>
    exact ⟨id, fun _ t => by simp only [fire, Machine.placed, occ_appendNat, wakeOcc]; omega⟩
  | arrival u =>
    simp only [fire]
    split
    · next hc =>
      refine ⟨id, fun _ t => ?_⟩
      try simp at hc
      simp only [Machine.placed, Machine.setTimer, occTimers_insert, occ_appendNat, wakeOcc, bump]
      repeat' split
      all_goals omega
    · refine ⟨id, fun _ t => ?_⟩
      simp only [Machine.placed, occ_appendNat, wakeOcc, bump]
      repeat' split
      all_goals omega
  | iterationEnd s =>
    simp only [fire]
    exact Keeps.moved (Keeps.trans (Machine.advanceHolds_keeps _ _) (Keeps.finish _ s _ (by simp) _ _ _ _))
  | leaseEnd u n =>
    simp only [fire]
    split
    · exact (Keeps.refl m).moved
    · refine ((Keeps.pools m _ (endLease_queues ..)).trans (Keeps.put _ _ ?_)).moved
      exact fun ho => ho.1.own u
  | fifoDone s u =>
    simp only [fire]
    split
    · next heq =>
      refine ⟨id, fun _ t => ?_⟩
      have h1 := occStages_set t m.stages s { getStage m.stages s with busy := (getStage m.stages s).busy - 1 }
      try simp only at h1
      simp only [Machine.placed, occ_appendNat, wakeOcc]
      omega
    · next j js heq =>
      refine ⟨id, fun _ t => ?_⟩
      have h1 := occStages_set t m.stages s { getStage m.stages s with queue := js }
      try simp only at h1
      rw [heq] at h1
      simp only [occJobs] at h1
      simp only [Machine.placed, Machine.setTimer, occ_appendNat, occTimers_insert, wakeOcc]
      omega

theorem fire_keeps (p : Program) (m : Machine) (now : Nat) (tm : Timer) (ts : List Timer)
    (he : m.timers = tm :: ts) : Keeps p.gap m (fire p { m with now := now, timers := ts } tm.wake) :=
  have h := fire_moved p { m with now := now, timers := ts } tm.wake
  ⟨h.serial, fun hs t => by
    have h1 := h.le hs t
    try simp only at h1
    simp only [Machine.placed, he, occTimers] at h1 ⊢
    omega⟩

/-! ### The run's start -/

theorem occ_serials (t : Nat) : ∀ (n s : Nat), occ t (serials n s) = if t < s then 0 else if t < s + n then 1 else 0
  | 0, s => by simp only [serials, occ]; split <;> (try split) <;> omega
  | n + 1, s => by
    simp only [serials, occ, bump, occ_serials t n (s + 1)]
    repeat' split
    all_goals omega

theorem wakeOcc_zero_arrival (t u : Nat) : wakeOcc 0 t (.arrival u) = bump t u := by
  simp [wakeOcc]

theorem occTimers_trace (t : Nat) : ∀ (ts : List Nat) (s : Nat),
    occTimers 0 t (traceTimers ts s) = if t < s then 0 else if t < s + countNats ts then 1 else 0
  | [], s => by simp only [traceTimers, occTimers, countNats]; split <;> (try split) <;> omega
  | x :: ts, s => by
    simp only [traceTimers, occTimers, wakeOcc_zero_arrival, bump, countNats, occTimers_trace t ts (s + 1)]
    repeat' split
    all_goals omega

theorem occ_serials_le (t n s : Nat) : occ t (serials n s) ≤ 1 := by
  rw [occ_serials]; split <;> (try split) <;> omega

theorem occTimers_trace_le (t : Nat) (ts : List Nat) (s : Nat) : occTimers 0 t (traceTimers ts s) ≤ 1 := by
  rw [occTimers_trace]; split <;> (try split) <;> omega

theorem occStages_idle (t : Nat) : ∀ ss : List Service, occStages t (idleStages ss) = 0
  | [] => rfl
  | _ :: ss => by simp only [idleStages, occStages, occJobs, occStages_idle t ss]

theorem occPools_empty (t : Nat) : ∀ cs : List Nat, occPools t (emptyPools cs) = 0
  | [] => rfl
  | _ :: cs => by simp only [emptyPools, occPools, occWaiters, occPools_empty t cs]

theorem occEngines_idle (t : Nat) : ∀ ss : List Service, occEngines t (idleEngines ss) = 0
  | [] => rfl
  | _ :: ss => by simp only [idleEngines, occEngines, threadsOf, occ, occEngines_idle t ss]

theorem getThread_arrivals (p : Program) : ∀ (n s j : Nat),
    (getThread (arrivals p n s) j).serial = s + j ∨ (getThread (arrivals p n s) j).k = []
  | 0, s, j => Or.inr (by cases j <;> rfl)
  | n + 1, s, 0 => Or.inl rfl
  | n + 1, s, j + 1 => by
    simp only [arrivals, getThread]
    rcases getThread_arrivals p n (s + 1) j with e | e
    · left; rw [e]; omega
    · right; exact e

/-- A session arrives with its `init` and session blocks to run: no hold yet. -/
theorem arrivals_own (p : Program) (x : Nat) : ∀ (n s j : Nat), OwnFrames x (getThread (arrivals p n s) j).k
  | 0, _, _ => OwnFrames.nil x
  | _ + 1, _, 0 => OwnFrames.stmts _ (OwnFrames.stmts _ (OwnFrames.nil x))
  | n + 1, s, j + 1 => arrivals_own p x n (s + 1) j

theorem emptyPools_queue : ∀ (cs : List Nat) (q : PoolState), q ∈ emptyPools cs → q.queue = []
  | [], _, h => by simp [emptyPools] at h
  | _ :: cs, q, h => by
    simp only [emptyPools, List.mem_cons] at h
    rcases h with h | h
    · rw [h]
    · exact emptyPools_queue cs q h

theorem initial_placed (p : Program) (harr : p.gap = 0 ∨ p.arrivalTimes = []) : Placed p.gap (initial p) := by
  refine ⟨⟨?_, ?_⟩, fun t => ?_⟩
  · have he : (initial p).threads = arrivals p p.sessions 0 := by
      unfold initial; dsimp only; split <;> rfl
    rw [he]
    intro j
    rcases getThread_arrivals p p.sessions 0 j with e | e
    · left; exact ⟨by omega, arrivals_own p _ _ _ _⟩
    · right; exact e
  · have hp : (initial p).pools = emptyPools p.caps := by
      unfold initial; dsimp only; split <;> rfl
    intro q hq w hw
    rw [hp] at hq
    rw [emptyPools_queue p.caps q hq] at hw
    cases hw
  · cases ha : p.arrivalTimes with
    | nil =>
      unfold initial
      simp only [ha]
      by_cases hg : p.gap = 0
      · have h1 := occ_serials_le t p.sessions 0
        simp only [Machine.placed, hg, occStages_idle, occPools_empty, occEngines_idle, occGrowers]
        simp [occTimers, h1]
      · simp only [Machine.placed, occStages_idle, occPools_empty, occEngines_idle, occGrowers, if_neg hg]
        split
        · simp [occTimers, wakeOcc, hg, occ]
        · simp [occTimers, occ]
    | cons x xs =>
      have hg : p.gap = 0 := by
        rcases harr with h | h
        · exact h
        · rw [ha] at h; cases h
      have h1 := occTimers_trace_le t (x :: xs) 0
      unfold initial
      simp only [ha]
      simp only [Machine.placed, occStages_idle, occPools_empty, occEngines_idle, occ, occGrowers, hg]
      simp_all

/-! ### `DistinctInvariant`, and `full_or_short` for every run -/

theorem occ_pos_of_mem (x : Nat) : ∀ l : List Nat, x ∈ l → 1 ≤ occ x l
  | [], h => by simp at h
  | y :: ys, h => by
    simp only [occ, bump]
    rcases List.mem_cons.1 h with e | e
    · split <;> omega
    · have := occ_pos_of_mem x ys e; split <;> omega

theorem natsDistinct_of_occ : ∀ l : List Nat, (∀ t, occ t l ≤ 1) → natsDistinct l
  | [], _ => trivial
  | x :: xs, h => by
    show x ∉ xs ∧ natsDistinct xs
    refine ⟨fun hx => ?_, natsDistinct_of_occ xs (fun t => ?_)⟩
    · have h1 := occ_pos_of_mem x xs hx
      have h2 := h x
      simp [occ, bump] at h2
      omega
    · have h2 := h t
      simp only [occ] at h2
      omega

theorem occ_getEngineState_le (t : Nat) : ∀ (l : List EngineState) (s : Nat),
    occ t (threadsOf (getEngineState l s).residents) ≤ occEngines t l
  | [], s => by simp [getEngineState, threadsOf, occ, occEngines]
  | e :: l, 0 => by simp only [getEngineState, occEngines]; omega
  | e :: l, s + 1 => by
    have := occ_getEngineState_le t l s
    simp only [getEngineState, occEngines]; omega

/-- No thread placed twice: no thread twice a resident of any engine. -/
theorem Placed.distinct {m : Machine} (h : Placed g m) (s : Nat) : threadsDistinct (getEngineState m.engines s).residents :=
  natsDistinct_of_occ _ (fun t => by
    have h1 := occ_getEngineState_le t m.engines s
    have h2 := h.2 t
    simp only [Machine.placed] at h2
    omega)

/-- What the proof needs of a program: no renewal gap beside a trace. (Preemption is covered: a victim
leaves the residents and its hold, its own, is placed once in a queue: `Machine.preempt_keeps`.) -/
structure DistinctProgram (p : Program) : Prop where
  arrivals : p.gap = 0 ∨ p.arrivalTimes = []

/-- `DistinctProgram` checked on the program's value: `gap = 0` or no trace. -/
theorem DistinctProgram.of_check (p : Program) (h : (p.gap == 0 || countNats p.arrivalTimes == 0) = true) :
    DistinctProgram p := by
  simp only [Bool.or_eq_true, beq_iff_eq] at h
  refine ⟨?_⟩
  rcases h with h1 | h1
  · exact Or.inl h1
  · right
    cases e : p.arrivalTimes with
    | nil => rfl
    | cons x xs => rw [e] at h1; simp [countNats] at h1

/-- `Placed` is a `DistinctInvariant` of every program with `DistinctProgram`, for every engine. -/
theorem Placed.distinctInvariant (p : Program) (s : Nat) (hp : DistinctProgram p) :
    DistinctInvariant p s (Placed p.gap) where
  initial := initial_placed p hp.arrivals
  settle := fun f m h => h.keep (settle_keeps p f m)
  fire := fun m t tm ts he h => h.keep (fire_keeps p m t tm ts he)
  start := fun f i _ m _ _ h => h.keep (startIteration_keeps p f i _ m)
  fuel := fun m h => h.keep (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
  ready := fun m h _ => h.distinct s

/-- `full_or_short` (vLLM's, issue 13) for every run of every program with no renewal gap beside a trace
(`DistinctProgram`; other stages may preempt), no pool admitted by engine `s` (`hvia`), no growing run on
stage `s` (`NoGrowth`: so `s` preempts no one), whose stage `s` is engine `e` with a constant `tokens cap B`, no `only` on `advance
running`, no granule and a cost that is never 0: every record of stage `s` has `tokens = B` or
`demand < B`. -/
theorem runProgram_full_or_short (p : Program) (fuel s e B : Nat) (hp : DistinctProgram p) (hgrow : NoGrowth p s)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hg : (getEngine p.engines e).granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1)
    (hcost : ∀ (v : PoolView) (now : Nat), eval v [] now 0 (getEngine p.engines e).cost ≠ 0) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens = B ∨ r.demand < B :=
  runProgram_full_or_short_of_distinct p fuel s e B (Placed p.gap) hgrow (Placed.distinctInvariant p s hp) hs hB hq hg
    hvia hcost

/-! ### Through the event loop: `Placed` at every run's end -/

theorem startPass_keeps (p : Program) (f : Nat) :
    ∀ (ss : List Service) (i : Nat) (tried : List Nat) (m : Machine) (a : Bool), Keeps g m (startPass p f ss i tried m a).1
  | [], _, _, m, _ => Keeps.refl m
  | .step e :: ss, i, tried, m, a => by
    simp only [startPass]
    split
    · exact startPass_keeps p f ss (i + 1) tried m a
    · split
      · exact (startIteration_keeps p f i _ m).trans (settle_keeps p f _)
      · exact ((startIteration_keeps p f i _ m).trans (settle_keeps p f _)).trans
          (startPass_keeps p f ss (i + 1) _ _ _)
  | .delay :: ss, i, tried, m, a => by simp only [startPass]; exact startPass_keeps p f ss (i + 1) tried m a
  | .fifo _ :: ss, i, tried, m, a => by simp only [startPass]; exact startPass_keeps p f ss (i + 1) tried m a

theorem startEngines_keeps (p : Program) (f : Nat) :
    ∀ (n : Nat) (tried : List Nat) (m : Machine), Keeps g m (startEngines p f n tried m)
  | 0, _, m => Keeps.refl m
  | n + 1, tried, m => by
    simp only [startEngines]
    split
    · exact startPass_keeps p f _ _ _ _ _
    · exact (startPass_keeps p f _ _ _ _ _).trans (startEngines_keeps p f n _ _)

theorem endOfInstant_keeps (p : Program) (f : Nat) (m : Machine) :
    Keeps g m (endOfInstant p f m) := by
  simp only [endOfInstant]
  split
  · exact Keeps.refl m
  · exact startEngines_keeps p f _ _ _

theorem loop_keeps (p : Program) (hp : DistinctProgram p) : ∀ (f : Nat) (m : Machine), Keeps p.gap m (loop p f m)
  | 0, m => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m => by
    simp only [loop]
    split
    · exact Keeps.refl m
    · next tm ts heq =>
      exact (((fire_keeps p m _ tm ts heq).trans (settle_keeps p f _)).trans
        (endOfInstant_keeps p f _)).trans (loop_keeps p hp f _)

/-- At the end of every run of a program with `DistinctProgram` (and, `Placed` being kept by every
function of the machine, at every point of it), no thread is placed twice. -/
theorem runProgram_placed (p : Program) (fuel : Nat) (hp : DistinctProgram p) : Placed p.gap (runProgram p fuel) :=
  (initial_placed p hp.arrivals).keep
    (((settle_keeps p fuel _).trans (endOfInstant_keeps p fuel _)).trans (loop_keeps p hp fuel _))

/-- No thread twice a resident of any engine at the end of every run of a program with `DistinctProgram`. -/
theorem runProgram_threadsDistinct (p : Program) (fuel s : Nat) (hp : DistinctProgram p) :
    threadsDistinct (getEngineState (runProgram p fuel).engines s).residents :=
  (runProgram_placed p fuel hp).distinct s

end Serq.Kernel
