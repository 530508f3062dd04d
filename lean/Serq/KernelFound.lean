module

public import Serq.KernelKv

/-! # Every thread with something left to run is in some place (issue 14, result 6: the other half)

`Serq.KernelDistinct` proves that a session's thread is placed at most once (`Placed`: the ready threads, a
timer that will make it ready, a fifo stage's queue, a pool's queue, an engine's residents; `Machine.placed`).
This module and `Serq.KernelFoundRun` prove the other half: a thread with something left to run (its
continuation `Thread.k` not empty: it has not ended) is placed at least once (`Found`), at the end of every
run that was neither cut short by its fuel nor stopped by the program's run-time error (`Machine.Lost`: an
`exec` out of fuel, or a turn past its trace, puts its thread nowhere, and says so in the machine's flags).

Every function of the machine takes a thread out of a place only to put it in another, or to run it, and a
thread's run (`exec`) ends with the thread placed, ended, or the run lost (`exec_found`, `Ran`). What the
proof needs besides: the machine's lists are the program's (`Shape`: a pool state per pool, a stage state
and an engine state per stage, an entry per session; a hold that joins a pool past the list, or a resident
of an engine past it, would be in no place), and every statement names what exists (`Fits p`, decided by
`Program.allStmts`: a hold names a pool and its first is one of the program's, a `run` on an engine one of
its stages, `fitsStmt`); the statements a thread runs are the program's (`Inv`, `Serq.KernelProvenance`).
`Finds p g m m'` says what a function of the machine does: a lost machine stays lost, and from a machine
with every live thread placed (`Good`: with `Owned`, `Inv` and `Shape`) it gives one again, or a lost one.
This module has the definitions, a thread's run and the settling of an instant; `Serq.KernelFoundRun` has
an iteration, the timers, the run's start, the event loop and the theorems.
-/

@[expose] public section

namespace Serq.Kernel

variable {g : Nat}

/-! ### The definitions -/

/-- The run was cut short by its fuel, or stopped by the program's run-time error (its outcome says
nothing: `exec` out of fuel, or a turn past its trace, puts its thread nowhere). -/
def Machine.Lost (m : Machine) : Prop := m.outOfFuel = true ∨ m.failed = true

/-- The machine's lists are the program's: a pool state per pool, a stage state and an engine state per
stage, a thread per session. -/
def Shape (p : Program) (m : Machine) : Prop :=
  m.pools.length = p.caps.length ∧ m.stages.length = p.stages.length ∧ m.engines.length = p.stages.length ∧
    m.threads.length = p.sessions

/-- Every thread with something left to run is placed. -/
def Found (g : Nat) (m : Machine) : Prop := ∀ t, (getThread m.threads t).k ≠ [] → 1 ≤ m.placed g t

/-- What the proof carries: the threads and holds their own (`Owned`), the program's statements (`Inv`),
the program's lists (`Shape`), every live thread placed (`Found`). -/
def Good (p : Program) (g : Nat) (m : Machine) : Prop := Owned m ∧ Inv p m ∧ Shape p m ∧ Found g m

/-- What a function of the machine does: a lost machine stays lost; a good one gives a good one, or a lost
one. -/
structure Finds (p : Program) (g : Nat) (m m' : Machine) : Prop where
  lost : m.Lost → m'.Lost
  good : Good p g m → m'.Lost ∨ Good p g m'

theorem Finds.refl {p : Program} (m : Machine) : Finds p g m m := ⟨id, Or.inr⟩

theorem Finds.trans {p : Program} {a b c : Machine} (h1 : Finds p g a b) (h2 : Finds p g b c) : Finds p g a c :=
  ⟨fun h => h2.lost (h1.lost h), fun h => by
    rcases h1.good h with e | e
    · exact Or.inl (h2.lost e)
    · exact h2.good e⟩

theorem Finds.out {p : Program} (m : Machine) : Finds p g m { m with outOfFuel := true } :=
  ⟨fun _ => Or.inl rfl, fun _ => Or.inl (Or.inl rfl)⟩

/-- A statement names what exists, of `pools` pools and `stages` stages: a hold names a pool, its first one
of them (its queue is the one it joins); a `run` on an engine one of the stages (the engine it is a resident
of). -/
def fitsStmt (pools stages : Nat) : Stmt → Bool
  | .hold on _ _ _ =>
    match on with
    | [] => false
    | h :: _ => decide (h.pool < pools)
  | .step s _ _ _ => decide (s < stages)
  | _ => true

/-- Every statement of the program names what exists (decided on the program's value). -/
def Fits (p : Program) : Prop := p.allStmts (fitsStmt (countNats p.caps) (countServices p.stages)) = true

theorem countNats_length : ∀ l : List Nat, countNats l = l.length
  | [] => rfl
  | _ :: l => by simp [countNats, countNats_length l]

theorem countServices_length : ∀ l : List Service, countServices l = l.length
  | [] => rfl
  | _ :: l => by simp [countServices, countServices_length l]

theorem Fits.stmt {p : Program} (h : Fits p) {st : Stmt} (hst : ProgStmt p st) :
    fitsStmt (countNats p.caps) (countServices p.stages) st = true :=
  Stmt.allSub_self _ _ (Program.allStmts_sound _ p h st hst)

/-! ### Lists -/

theorem length_of_queues {ps ps' : List PoolState} (h : ps'.map PoolState.queue = ps.map PoolState.queue) :
    ps'.length = ps.length := by
  have := congrArg List.length h
  simpa using this

theorem setStage_length : ∀ (l : List StageState) (i : Nat) (v : StageState), (setStage l i v).length = l.length
  | [], _, _ => rfl
  | _ :: _, 0, _ => rfl
  | _ :: l, i + 1, v => by simp only [setStage, List.length_cons, setStage_length l i v]

theorem occPools_set_eq (t : Nat) : ∀ (l : List PoolState) (i : Nat) (v : PoolState), i < l.length →
    occPools t (setPool l i v) + occWaiters t (getPool l i).queue = occPools t l + occWaiters t v.queue
  | [], _, _, h => by simp at h
  | _ :: _, 0, _, _ => by simp only [setPool, getPool, occPools]; omega
  | _ :: l, i + 1, v, h => by
    have := occPools_set_eq t l i v (by simp at h; omega)
    simp only [setPool, getPool, occPools]; omega

theorem occStages_set_eq (t : Nat) : ∀ (l : List StageState) (i : Nat) (v : StageState), i < l.length →
    occStages t (setStage l i v) + occJobs t (getStage l i).queue = occStages t l + occJobs t v.queue
  | [], _, _, h => by simp at h
  | _ :: _, 0, _, _ => by simp only [setStage, getStage, occStages]; omega
  | _ :: l, i + 1, v, h => by
    have := occStages_set_eq t l i v (by simp at h; omega)
    simp only [setStage, getStage, occStages]; omega

theorem occEngines_set_eq (t : Nat) : ∀ (l : List EngineState) (i : Nat) (v : EngineState), i < l.length →
    occEngines t (setEngineState l i v) + occ t (threadsOf (getEngineState l i).residents) =
      occEngines t l + occ t (threadsOf v.residents)
  | [], _, _, h => by simp at h
  | _ :: _, 0, _, _ => by simp only [setEngineState, getEngineState, occEngines]; omega
  | _ :: l, i + 1, v, h => by
    have := occEngines_set_eq t l i v (by simp at h; omega)
    simp only [setEngineState, getEngineState, occEngines]; omega

/-- An engine's state past the list has no residents: setting it changes nothing. -/
theorem occEngines_set_same (t : Nat) : ∀ (l : List EngineState) (i : Nat) (v : EngineState),
    threadsOf v.residents = threadsOf (getEngineState l i).residents → occEngines t (setEngineState l i v) = occEngines t l
  | [], _, _, _ => rfl
  | _ :: _, 0, v, h => by simp only [setEngineState, getEngineState, occEngines] at h ⊢; rw [h]
  | _ :: l, i + 1, v, h => by
    simp only [setEngineState, getEngineState, occEngines] at h ⊢
    rw [occEngines_set_same t l i v h]

theorem getThread_setThread_ne (ts : List Thread) (i j : Nat) (v : Thread) (h : i ≠ j) :
    getThread (setThread ts i v) j = getThread ts j := by
  rcases getThread_setThread ts i j v with e | ⟨e1, _⟩
  · exact e
  · exact absurd e1 h

theorem getThread_setThread_self : ∀ (ts : List Thread) (i : Nat) (v : Thread),
    (getThread (setThread ts i v) i).k = v.k ∨ (getThread (setThread ts i v) i).k = []
  | [], i, _ => Or.inr (by cases i <;> rfl)
  | _ :: _, 0, _ => Or.inl rfl
  | _ :: ts, i + 1, v => getThread_setThread_self ts i v

theorem getThread_k_of_le : ∀ (ts : List Thread) (t : Nat), ts.length ≤ t → (getThread ts t).k = []
  | [], t, _ => by cases t <;> rfl
  | _ :: _, 0, h => by simp at h
  | _ :: ts, t + 1, h => getThread_k_of_le ts t (by simp at h; omega)

theorem getPool_lt_of_queue : ∀ (l : List PoolState) (i : Nat), (getPool l i).queue ≠ [] → i < l.length
  | [], i, h => by cases i <;> simp [getPool] at h
  | _ :: _, 0, _ => by simp
  | _ :: l, i + 1, h => by
    have := getPool_lt_of_queue l i h
    simp; omega

theorem getService_fifo_lt : ∀ (ss : List Service) (s c : Nat), getService ss s = .fifo c → s < ss.length
  | [], s, _, h => by cases s <;> simp [getService] at h
  | _ :: _, 0, _, _ => by simp
  | _ :: ss, s + 1, c, h => by
    simp only [getService] at h
    have := getService_fifo_lt ss s c h
    simp; omega

/-! ### The places of the machine's parts -/

theorem placed_pools (m : Machine) (ps : List PoolState) (h : ps.map PoolState.queue = m.pools.map PoolState.queue)
    (t : Nat) : ({ m with pools := ps } : Machine).placed g t = m.placed g t := by
  simp only [Machine.placed, occPools_of_queues t _ _ h]

theorem Shape.pools {p : Program} {m : Machine} (hs : Shape p m) (ps : List PoolState)
    (h : ps.map PoolState.queue = m.pools.map PoolState.queue) : Shape p { m with pools := ps } :=
  ⟨(length_of_queues h).trans hs.1, hs.2.1, hs.2.2.1, hs.2.2.2⟩

theorem Shape.put {p : Program} {m : Machine} (hs : Shape p m) (th : Thread) : Shape p (m.put th) :=
  ⟨hs.1, hs.2.1, hs.2.2.1, (setThread_length _ _ _).trans hs.2.2.2⟩

theorem Shape.setTimer {p : Program} {m : Machine} (hs : Shape p m) (time : Nat) (w : Wake) : Shape p (m.setTimer time w) :=
  hs

theorem placed_setTimer (m : Machine) (time : Nat) (w : Wake) (t : Nat) :
    (m.setTimer time w).placed g t = m.placed g t + wakeOcc g t w := by
  simp only [Machine.placed, Machine.setTimer, occTimers_insert]; omega

theorem placed_leaseTimer (m : Machine) (u : Nat) (d : Option Nat) (t : Nat) :
    (m.leaseTimer u d).placed g t = m.placed g t := by
  cases d with
  | none => rfl
  | some x => simp only [Machine.leaseTimer, placed_setTimer, wakeOcc]; omega

theorem Shape.leaseTimer {p : Program} {m : Machine} (hs : Shape p m) (u : Nat) (d : Option Nat) :
    Shape p (m.leaseTimer u d) := by
  cases d <;> exact hs

theorem Machine.leaseTimer_lost (m : Machine) (u : Nat) (d : Option Nat) : (m.leaseTimer u d).Lost ↔ m.Lost := by
  cases d <;> exact Iff.rfl

theorem Machine.addJob_threads' (p : Program) (m : Machine) (s u w : Nat) : (m.addJob p s u w).threads = m.threads := by
  cases hsv : getService p.stages s <;> simp only [Machine.addJob, hsv] <;> (try split) <;> rfl

theorem Machine.addJob_lost (p : Program) (m : Machine) (s u w : Nat) : (m.addJob p s u w).Lost ↔ m.Lost := by
  cases hsv : getService p.stages s <;> simp only [Machine.addJob, hsv] <;> (try split) <;> exact Iff.rfl

/-- A run of work started on its stage: its thread placed once more (a delay's or a fifo run's end, or a
fifo stage's queue). -/
theorem Machine.addJob_found (p : Program) (m : Machine) (s u w : Nat) (hs : Shape p m) :
    Shape p (m.addJob p s u w) ∧ ∀ t, m.placed g t + bump t u ≤ (m.addJob p s u w).placed g t := by
  cases hsv : getService p.stages s with
  | delay =>
    simp only [Machine.addJob, hsv]
    refine ⟨hs, fun t => ?_⟩
    simp only [placed_setTimer, wakeOcc]; omega
  | step e =>
    simp only [Machine.addJob, hsv]
    refine ⟨hs, fun t => ?_⟩
    simp only [placed_setTimer, wakeOcc]; omega
  | fifo c =>
    have hlt : s < m.stages.length := by rw [hs.2.1]; exact getService_fifo_lt _ _ _ hsv
    simp only [Machine.addJob, hsv]
    split
    · refine ⟨⟨hs.1, (setStage_length _ _ _).trans hs.2.1, hs.2.2.1, hs.2.2.2⟩, fun t => ?_⟩
      have h1 := occStages_set_eq t m.stages s { getStage m.stages s with busy := (getStage m.stages s).busy + 1 } hlt
      simp only [placed_setTimer, wakeOcc]
      simp only [Machine.placed]
      try simp only at h1
      omega
    · refine ⟨⟨hs.1, (setStage_length _ _ _).trans hs.2.1, hs.2.2.1, hs.2.2.2⟩, fun t => ?_⟩
      have h1 := occStages_set_eq t m.stages s
        { getStage m.stages s with queue := appendJob (getStage m.stages s).queue ⟨u, w⟩ } hlt
      have h2 := occJobs_append t ⟨u, w⟩ (getStage m.stages s).queue
      simp only [Machine.placed]
      try simp only at h1 h2
      omega

/-- A hold joins pool `i`'s queue (one of the machine's pools): its thread placed once more. -/
theorem placed_join (m : Machine) (i : Nat) (ws : List Waiter) (u : Nat) (hlt : i < m.pools.length)
    (h : ∀ t, occWaiters t ws = occWaiters t (getPool m.pools i).queue + bump t u) (t : Nat) :
    m.placed g t + bump t u ≤ ({ m with pools := setPool m.pools i { getPool m.pools i with queue := ws } } : Machine).placed g t := by
  have h1 := occPools_set_eq t m.pools i { getPool m.pools i with queue := ws } hlt
  have h2 := h t
  simp only [Machine.placed]
  try simp only at h1
  omega

/-- A resident joins engine `s` (one of the machine's engines): its thread placed once more. -/
theorem placed_seat (m : Machine) (s : Nat) (v : EngineState) (u a : Nat) (hlt : s < m.engines.length)
    (hv : ∀ t, occ t (threadsOf v.residents) = occ t (threadsOf (getEngineState m.engines s).residents) + bump t u) (t : Nat) :
    m.placed g t + bump t u ≤ ({ m with engines := setEngineState m.engines s v, admSeq := a } : Machine).placed g t := by
  have h1 := occEngines_set_eq t m.engines s v hlt
  have h2 := hv t
  simp only [Machine.placed]
  omega

/-! ### A thread's run -/

theorem bump_self (t : Nat) : bump t t = 1 := by simp [bump]

/-- `m'` is what running thread `u` from `m` gave: a lost run, or the machine's lists still the program's,
every thread placed at least as often, every other thread's entry unchanged, and `u`, if it has something
left to run, placed. -/
def Ran (p : Program) (g u : Nat) (m m' : Machine) : Prop :=
  m'.Lost ∨ (Shape p m' ∧ (∀ t, m.placed g t ≤ m'.placed g t) ∧
    (∀ t, t ≠ u → getThread m'.threads t = getThread m.threads t) ∧
    ((getThread m'.threads u).k ≠ [] → 1 ≤ m'.placed g u))

theorem Ran.pre {p : Program} {u : Nat} {m m1 m' : Machine} (hp : ∀ t, m.placed g t ≤ m1.placed g t)
    (ht : m1.threads = m.threads) (h : Ran p g u m1 m') : Ran p g u m m' := by
  rcases h with h | ⟨h1, h2, h3, h4⟩
  · exact Or.inl h
  · exact Or.inr ⟨h1, fun t => Nat.le_trans (hp t) (h2 t), fun t ht' => by rw [h3 t ht', ht], h4⟩

/-- What `exec_found` says of a run from `m` to `m'` of thread `u`. -/
def ExecFound (p : Program) (g u : Nat) (kok : Prop) (m m' : Machine) : Prop :=
  (m.Lost → m'.Lost) ∧ (kok → Shape p m → Ran p g u m m')

/-- A step of the run that changes neither the flags nor the threads, nor lowers a place, then the rest. -/
theorem ExecFound.pre {p : Program} {u : Nat} {k1 k2 : Prop} {m m1 m' : Machine} (ih : ExecFound p g u k2 m1 m')
    (hl : m.Lost → m1.Lost) (hp : ∀ t, m.placed g t ≤ m1.placed g t) (ht : m1.threads = m.threads)
    (hs : Shape p m → Shape p m1) (hk : k1 → k2) : ExecFound p g u k1 m m' :=
  ⟨fun h => ih.1 (hl h), fun hk1 hsm => Ran.pre hp ht (ih.2 (hk hk1) (hs hsm))⟩

theorem ExecFound.same {p : Program} {u : Nat} {k1 k2 : Prop} {m m' : Machine} (ih : ExecFound p g u k2 m m')
    (hk : k1 → k2) : ExecFound p g u k1 m m' :=
  ExecFound.pre ih id (fun _ => Nat.le_refl _) rfl id hk

/-- The thread put back with nothing left to run (its session ended). -/
theorem ExecFound.ended {p : Program} {k1 : Prop} {m m1 : Machine} (th : Thread) (hk : th.k = [])
    (hl : m.Lost → m1.Lost) (hp : ∀ t, m.placed g t ≤ m1.placed g t) (ht : m1.threads = m.threads)
    (hs : Shape p m → Shape p m1) : ExecFound p g th.serial k1 m (m1.put th) :=
  ⟨hl, fun _ hsm => Or.inr ⟨(hs hsm).put th, fun t => hp t, fun t ht' => by
    show getThread (setThread m1.threads th.serial th) t = _
    rw [getThread_setThread_ne _ _ _ _ (Ne.symm ht'), ht], fun hne => by
    show 1 ≤ (m1.put th).placed g th.serial
    exfalso
    apply hne
    show (getThread (setThread m1.threads th.serial th) th.serial).k = []
    rcases getThread_setThread_self m1.threads th.serial th with e | e
    · rw [e, hk]
    · exact e⟩⟩

/-- The thread put back in a place. -/
theorem ExecFound.placed {p : Program} {k1 : Prop} {m m1 : Machine} (th : Thread)
    (hl : m.Lost → m1.Lost) (ht : m1.threads = m.threads)
    (h : k1 → Shape p m → Shape p m1 ∧ ∀ t, m.placed g t + bump t th.serial ≤ m1.placed g t) :
    ExecFound p g th.serial k1 m (m1.put th) :=
  ⟨hl, fun hk hsm => Or.inr ⟨(h hk hsm).1.put th, fun t => by
    have := (h hk hsm).2 t
    show m.placed g t ≤ m1.placed g t
    omega, fun t ht' => by
    show getThread (setThread m1.threads th.serial th) t = _
    rw [getThread_setThread_ne _ _ _ _ (Ne.symm ht'), ht], fun _ => by
    have := (h hk hsm).2 th.serial
    show 1 ≤ m1.placed g th.serial
    rw [bump_self] at this
    omega⟩⟩

theorem ExecFound.lost {p : Program} {u : Nat} {k1 : Prop} {m m' : Machine} (h : m'.Lost) : ExecFound p g u k1 m m' :=
  ⟨fun _ => h, fun _ _ => Or.inl h⟩

/-- A thread's run: lost stays lost; and a thread whose frames are the program's, run on a machine with the
program's lists, ends placed, or ended, or the run lost, every other thread's entry unchanged and no place
lowered. -/
theorem exec_found (p : Program) (hfit : Fits p) : ∀ (f : Nat) (m : Machine) (th : Thread),
    ExecFound p g th.serial (KOk p th.k) m (exec p f m th)
  | 0, m, th => by
    simp only [exec]
    exact ExecFound.lost (Or.inl rfl)
  | f + 1, m, th => by
    simp only [exec]
    split
    · next heq =>
      exact ExecFound.ended _ heq (fun h => h) (fun t => Nat.le_of_eq (placed_pools m _ (endLeases_queues ..) t).symm) rfl
        (fun hs => hs.pools _ (endLeases_queues ..))
    · next k heq =>
      exact ExecFound.pre (exec_found p hfit f _ _) (fun h => h) (fun _ => Nat.le_refl _) rfl (fun hs => hs)
        (fun hk => by rw [heq] at hk; exact hk.tail)
    · next k heq =>
      split
      · exact ExecFound.same (exec_found p hfit f _ _) (fun hk => by rw [heq] at hk; exact hk.tail)
      · exact ExecFound.same (exec_found p hfit f _ _) (fun hk => by rw [heq] at hk; exact hk.tail)
    · next held w k heq =>
      split
      · exact ExecFound.pre (exec_found p hfit f _ _) (fun h => h)
          (fun t => Nat.le_of_eq (placed_pools m _ (giveBack_queues ..) t).symm) rfl
          (fun hs => hs.pools _ (giveBack_queues ..)) (fun hk => by rw [heq] at hk; exact hk.tail)
      · exact ExecFound.pre (exec_found p hfit f _ _) (fun h => (Machine.leaseTimer_lost _ _ _).2 h)
          (fun t => by rw [placed_leaseTimer]; exact Nat.le_of_eq (placed_pools m _ (giveBack_queues ..) t).symm)
          (by rw [Machine.leaseTimer_threads])
          (fun hs => (hs.pools _ (giveBack_queues ..)).leaseTimer _ _) (fun hk => by rw [heq] at hk; exact hk.tail)
    · next k heq =>
      exact ExecFound.same (exec_found p hfit f _ _) (fun hk => by rw [heq] at hk; exact hk.tail)
    · next st rest k heq =>
      -- what the statement is, from the frames being the program's
      have hnext : KOk p th.k → KOk p (.stmts rest :: k) := fun hk => by
        rw [heq] at hk; exact KOk.cons (ProgBlock.cons hk.head).2 hk.tail
      have hst : KOk p th.k → ProgStmt p st := fun hk => by
        rw [heq] at hk; exact (ProgBlock.cons hk.head).1
      cases st with
      | set i e => exact ExecFound.same (exec_found p hfit f _ _) hnext
      | observe j e => exact ExecFound.same (exec_found p hfit f _ _) hnext
      | stop =>
        exact ExecFound.ended _ rfl (fun h => h)
          (fun t => Nat.le_of_eq (placed_pools m _ ((endLeases_queues ..).trans (releaseAll_queues ..)) t).symm) rfl
          (fun hs => hs.pools _ ((endLeases_queues ..).trans (releaseAll_queues ..)))
      | release i =>
        dsimp only
        split
        · exact ExecFound.pre (exec_found p hfit f _ _) (fun h => h)
            (fun t => Nat.le_of_eq (placed_pools m _ (releaseIn_queues ..) t).symm) rfl
            (fun hs => hs.pools _ (releaseIn_queues ..)) (fun hk => by
              rw [heq] at hk
              exact KOk.cons (ProgBlock.cons hk.head).2 (releaseIn_kok _ _ _ _ _ _ _ k hk.tail))
        · exact ExecFound.pre (exec_found p hfit f _ _) (fun h => h)
            (fun t => Nat.le_of_eq (placed_pools m _ (endLeasesOn_queues ..) t).symm) rfl
            (fun hs => hs.pools _ (endLeasesOn_queues ..)) hnext
      | branch t yes no =>
        refine ExecFound.same (exec_found p hfit f _ _) (fun hk => KOk.cons ?_ (hnext hk))
        split
        · exact (hst hk).yes
        · exact (hst hk).no
      | «while» t body =>
        dsimp only
        split
        · refine ExecFound.same (exec_found p hfit f _ _) (fun hk => ?_)
          have hk' := hk
          rw [heq] at hk'
          exact KOk.cons (fun x hx => .whileBody (hst hk) hx) hk'
        · exact ExecFound.same (exec_found p hfit f _ _) hnext
      | loop body =>
        refine ExecFound.same (exec_found p hfit f _ _) (fun hk => ?_)
        have hk' := hk
        rw [heq] at hk'
        exact KOk.cons (fun x hx => .loopBody (hst hk) hx) hk'
      | turn =>
        dsimp only
        split
        · exact ExecFound.lost (Or.inr rfl)
        · exact ExecFound.same (exec_found p hfit f _ _) (fun hk => KOk.cons (fun x hx => ProgStmt.turnBlock hx)
            (KOk.cons trivial (KOk.cons (fun x hx => ProgStmt.server hx) (KOk.cons trivial (hnext hk)))))
      | run s w =>
        dsimp only
        split
        · exact ExecFound.same (exec_found p hfit f _ _) hnext
        · exact ExecFound.placed _ (fun h => (Machine.addJob_lost ..).2 h) (Machine.addJob_threads' ..)
            (fun _ hs => Machine.addJob_found p m s th.serial _ hs)
      | step s dec gr w =>
        dsimp only
        split
        · exact ExecFound.same (exec_found p hfit f _ _) hnext
        · refine ExecFound.placed _ id rfl (fun hk hs => ⟨?_, fun t => ?_⟩)
          · exact ⟨hs.1, hs.2.1, (setEngineState_length _ _ _).trans hs.2.2.1, hs.2.2.2⟩
          · have hf := hfit.stmt (hst hk)
            simp only [fitsStmt, decide_eq_true_eq, countServices_length] at hf
            exact placed_seat m s _ _ _ (by rw [hs.2.2.1]; exact hf) (fun t => occ_insertResident t _ _) t
      | grow j e =>
        dsimp only
        split
        · exact ExecFound.lost (Or.inr rfl)
        · split
          · exact ExecFound.same (exec_found p hfit f _ _)
              (fun hk => KOk.cons (hnext hk).head (growPartReq_kok _ _ _ _ (hnext hk).tail))
          · split
            · exact ExecFound.pre (exec_found p hfit f _ _) (fun h => h)
                (fun t => Nat.le_of_eq (placed_pools m _ (setPool_queues _ _ _ (by rfl)) t).symm) rfl
                (fun hs => hs.pools _ (setPool_queues _ _ _ (by rfl)))
                (fun hk => KOk.cons (hnext hk).head (growPartReq_kok _ _ _ _ (hnext hk).tail))
            · refine ExecFound.placed _ id rfl (fun _ hs => ⟨hs, fun t => ?_⟩)
              simp only [Machine.placed, occGrowers_append]
              omega
      | hold on reuse cache body =>
        dsimp only
        split
        · exact ExecFound.ended _ rfl (fun h => h)
            (fun t => Nat.le_of_eq (placed_pools m _ ((endLeases_queues ..).trans (releaseAll_queues ..)) t).symm) rfl
            (fun hs => hs.pools _ ((endLeases_queues ..).trans (releaseAll_queues ..)))
        · split
          · refine ⟨id, fun hk _ => ?_⟩
            have hf := hfit.stmt (hst hk)
            simp [fitsStmt] at hf
          · next h tl =>
            refine ExecFound.placed _ id rfl (fun hk hs => ⟨?_, fun t => ?_⟩)
            · exact ⟨(setPool_length _ _ _).trans hs.1, hs.2.1, hs.2.2.1, hs.2.2.2⟩
            · have hf := hfit.stmt (hst hk)
              simp only [fitsStmt, decide_eq_true_eq, countNats_length] at hf
              refine placed_join m _ _ _ (by rw [hs.1]; exact hf) (fun t => ?_) t
              split
              · rw [occWaiters_append]
              · rw [occWaiters_insert]

/-! ### Settling an instant -/

/-- A ready thread taken out of the ready list runs. -/
theorem Finds.take (p : Program) (hfit : Fits p) (f t : Nat) (m : Machine) (ts : List Nat) (heq : m.ready = t :: ts) :
    Finds p g m (exec p f { m with ready := ts } (getThread m.threads t)) := by
  have he := exec_found (g := g) p hfit f { m with ready := ts } (getThread m.threads t)
  refine ⟨fun h => he.1 h, fun hg => ?_⟩
  obtain ⟨ho, hi, hs, hf⟩ := hg
  rcases he.2 (hi.threads.get t) hs with hl | ⟨hs', hp, ht, hu⟩
  · exact Or.inl hl
  · refine Or.inr ⟨?_, ?_, hs', ?_⟩
    · exact (exec_moved_at (g := g) p f t { m with ready := ts }).serial ho
    · exact exec_inv p f _ _ hi (hi.threads.get t)
    · intro x hx
      by_cases hxu : x = (getThread m.threads t).serial
      · subst hxu; exact hu hx
      · rw [ht x hxu] at hx
        have h1 := hf x hx
        have h2 := hp x
        have h3 : m.placed g x = ({ m with ready := ts } : Machine).placed g x + bump x t := by
          simp only [Machine.placed, heq, occ]; omega
        by_cases hxt : x = t
        · subst hxt
          exfalso
          rcases ho.1 x with ⟨e, _⟩ | e
          · exact hxu e.symm
          · exact hx e
        · have : bump x t = 0 := by simp [bump, hxt]
          omega

theorem runReady_finds (p : Program) (hfit : Fits p) : ∀ (f : Nat) (m : Machine), Finds p g m (runReady p f m)
  | 0, m => Finds.out m
  | f + 1, m => by
    simp only [runReady]
    split
    · exact Finds.refl m
    · next t ts heq => exact (Finds.take p hfit f t m ts heq).trans (runReady_finds p hfit f _)

theorem Machine.admitWaiter_placed_eq (p : Program) (m : Machine) (st : List Nat) (i j : Nat)
    (hj : j < countWaiters (getPool m.pools i).queue) (t : Nat) :
    (m.admitWaiter p st i j).placed g t + bump t (getWaiter (getPool m.pools i).queue j).thread = m.placed g t := by
  have hlt : i < m.pools.length :=
    getPool_lt_of_queue _ _ (by intro h; rw [h] at hj; simp [countWaiters] at hj)
  have h1 := occPools_set_eq t m.pools i { getPool m.pools i with queue := removeWaiter (getPool m.pools i).queue j } hlt
  have h2 := occWaiters_remove t (getPool m.pools i).queue j hj
  simp only at h1
  simp only [Machine.admitWaiter, Machine.placed, Machine.put]
  rw [occPools_of_queues t _ _ (admitOn_queues ..)]
  omega

theorem Machine.admitWaiter_shape {p : Program} (m : Machine) (st : List Nat) (i j : Nat) (hs : Shape p m) :
    Shape p (m.admitWaiter p st i j) := by
  refine ⟨?_, hs.2.1, hs.2.2.1, ?_⟩
  · simp only [Machine.admitWaiter, Machine.put]
    rw [admitOn_length, setPool_length]; exact hs.1
  · simp only [Machine.admitWaiter, Machine.put]
    rw [setThread_length]; exact hs.2.2.2

/-- The hold at `j` of pool `i`'s queue admitted, its thread (its own entry, `QueuedOk`) ready: out of one
place, into another. -/
theorem Finds.admit (p : Program) (m : Machine) (i j : Nat) (hj : j < countWaiters (getPool m.pools i).queue) :
    Finds p g m { m.admitWaiter p [] i j with ready := appendNat m.ready (getWaiter (getPool m.pools i).queue j).thread } := by
  refine ⟨fun h => h, fun hg => Or.inr ?_⟩
  obtain ⟨ho, hi, hs, hf⟩ := hg
  have hw := ho.2.get i _ (getWaiter_mem _ j hj)
  refine ⟨Machine.admitWaiter_serial p m [] i j hj ho, Machine.admitWaiter_inv p m [] i j hi,
    Machine.admitWaiter_shape m [] i j hs, ?_⟩
  intro x hx
  have he := Machine.admitWaiter_placed_eq (g := g) p m [] i j hj x
  have hpl : ({ m.admitWaiter p [] i j with ready := appendNat m.ready (getWaiter (getPool m.pools i).queue j).thread } :
      Machine).placed g x = (m.admitWaiter p [] i j).placed g x + bump x (getWaiter (getPool m.pools i).queue j).thread := by
    simp only [Machine.placed, occ_appendNat, Machine.admitWaiter_ready]; omega
  rw [hpl]
  by_cases hxw : x = (getWaiter (getPool m.pools i).queue j).thread
  · have : bump x (getWaiter (getPool m.pools i).queue j).thread = 1 := by rw [← hxw]; exact bump_self x
    omega
  · have hentry : getThread (m.admitWaiter p [] i j).threads x = getThread m.threads x := by
      simp only [Machine.admitWaiter, Machine.put]
      exact getThread_setThread_ne _ _ _ _ (fun h => hxw (by rw [← h]; exact hw))
    have h1 := hf x (by rw [← hentry]; exact hx)
    have : bump x (getWaiter (getPool m.pools i).queue j).thread = 0 := by simp [bump, hxw]
    omega

theorem retryQueue_finds (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool), Finds p g m (retryQueue p f m i b).1
  | 0, m, i, b => Finds.out m
  | f + 1, m, i, b => by
    simp only [retryQueue]
    split
    · exact Finds.refl m
    · next _ hd tl heq =>
      split
      · have h := Finds.admit (g := g) p m i (select p m i (hd :: tl)) (by rw [heq]; exact select_lt p m i hd tl)
        rw [heq] at h
        exact h.trans (retryQueue_finds p f _ i true)
      · exact Finds.refl m

theorem Machine.grownReq_placed (p : Program) (m : Machine) (t i want req : Nat) (h : Held) (x : Nat) :
    (m.grownReq p t i want req h).placed g x = m.placed g x := by
  simp only [Machine.grownReq, Machine.put]
  exact placed_pools m _ (setPool_queues _ _ _ (by rfl)) x

/-- A waiting `grow` that fits: its thread leaves the growers for the ready threads, its hold grown. -/
theorem Finds.regrow (p : Program) (m : Machine) (i : Nat) (x : Grower) (hx : growerOn i m.growers = some x)
    (h : Held) (want : Nat) :
    Finds p g m { m.grownReq p x.thread i want x.req h with
      growers := removeGrowerOn i m.growers, ready := appendNat m.ready x.thread } := by
  refine ⟨fun h => h, fun hg => Or.inr ?_⟩
  obtain ⟨ho, hi, hs, hf⟩ := hg
  have hk := (Machine.grownReq_keeps (g := g) p m x.thread i want x.req h).trans (Keeps.regrow _ i x hx)
  refine ⟨hk.serial ho, ?_, ?_, ?_⟩
  · have h1 := Machine.grownReq_inv p m x.thread i want x.req h hi
    exact ⟨h1.threads, h1.pools, h1.engines⟩
  · exact ⟨(setPool_length _ _ _).trans hs.1, hs.2.1, hs.2.2.1, (setThread_length _ _ _).trans hs.2.2.2⟩
  · intro y hy
    have e1 := occGrowers_remove y i m.growers x hx
    have e2 := Machine.grownReq_placed (g := g) p m x.thread i want x.req h y
    have he : ({ m.grownReq p x.thread i want x.req h with
        growers := removeGrowerOn i m.growers, ready := appendNat m.ready x.thread } : Machine).placed g y =
        m.placed g y := by
      simp only [Machine.placed, occ_appendNat, Machine.grownReq, Machine.put] at e2 ⊢
      omega
    rw [he]
    by_cases hyx : y = x.thread
    · rw [hyx] at e1 ⊢
      have : bump x.thread x.thread = 1 := bump_self _
      simp only [Machine.placed]
      omega
    · simp only [Machine.grownReq, Machine.put] at hy
      rcases getThread_setThread m.threads (getThread m.threads x.thread).serial y
          { getThread m.threads x.thread with k := growPartReq (getThread m.threads x.thread).k i want x.req } with e | ⟨e3, e4⟩
      · rw [e] at hy
        exact hf y hy
      · exfalso
        rw [e4] at hy
        rcases ho.1 x.thread with ⟨e5, _⟩ | e5
        · exact hyx (by rw [← e3, e5])
        · apply hy
          show growPartReq (getThread m.threads x.thread).k i want x.req = []
          rw [e5]
          rfl

theorem retryGrowers_finds (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool), Finds p g m (retryGrowers p f m i b).1
  | 0, m, i, b => Finds.out m
  | f + 1, m, i, b => by
    simp only [retryGrowers]
    split
    · exact Finds.refl m
    · next x hx =>
      split
      · exact Finds.refl m
      · next hh hpart =>
        split
        · exact (Finds.regrow (g := g) p m i x hx hh (roundUp (getAt p.blocks i) x.req)).trans (retryGrowers_finds p f _ i true)
        · exact Finds.refl m

theorem retryPool_finds (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) : Finds p g m (retryPool p f m i b).1 := by
  simp only [retryPool]
  split
  · exact (retryGrowers_finds p f m i b).trans (retryQueue_finds p f _ i _)
  · exact retryGrowers_finds p f m i b

theorem retryPools_finds (p : Program) (f : Nat) : ∀ (n i : Nat) (m : Machine) (b : Bool), Finds p g m (retryPools p f n i m b).1
  | 0, _, m, _ => Finds.refl m
  | n + 1, i, m, b => by
    simp only [retryPools]
    exact (retryPool_finds p f m i b).trans (retryPools_finds p f n (i + 1) _ _)

theorem settle_finds (p : Program) (hfit : Fits p) : ∀ (f : Nat) (m : Machine), Finds p g m (settle p f m)
  | 0, m => Finds.out m
  | f + 1, m => by
    simp only [settle]
    split
    · exact ((runReady_finds p hfit f m).trans (retryPools_finds p f _ _ _ _)).trans (settle_finds p hfit f _)
    · exact (runReady_finds p hfit f m).trans (retryPools_finds p f _ _ _ _)

end Serq.Kernel
