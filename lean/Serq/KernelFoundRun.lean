module

public import Serq.KernelFound

/-! # Every thread with something left to run is in exactly one place, through every run (issue 14, result 6)

`Serq.KernelFound` has the definitions (`Found`, `Good`, `Finds`, `Fits`), a thread's run (`exec_found`) and
the settling of an instant (`settle_finds`). This module carries `Found` through an iteration's start (its
serving, which under `NoPreemption` only grows holds, and its admissions, each of which runs the admitted
thread at once: `admitOne_kept`), the timers (`fire_finds`: a timer that placed a thread makes it ready or
sets the next one; a renewal arrival with no next session places only sessions that do not exist), the run's
start (`initial_good`) and the event loop (`loop_finds`), and gives the theorems: every thread with something
left to run is placed at least once at the end of every run that was not lost (`runProgram_found`), so,
with `runProgram_placed`, exactly once (`runProgram_placed_once`); and a session's open turn (submitted, not
answered) is in exactly one place (`runProgram_open_turn_placed`).
-/

@[expose] public section

namespace Serq.Kernel

variable {g : Nat}

/-! ### The places' half, for the functions that run no thread -/

/-- `Finds` without the threads' statements (which an iteration's serving keeps only with its batch's
tiles, `BOk`): lost stays lost, and the lists and every live thread's place are kept, or the run lost. -/
def Kept (p : Program) (g : Nat) (m m' : Machine) : Prop :=
  (m.Lost → m'.Lost) ∧ (Owned m → Shape p m → Found g m → m'.Lost ∨ (Shape p m' ∧ Found g m'))

theorem Kept.refl {p : Program} (m : Machine) : Kept p g m m := ⟨id, fun _ hs hf => Or.inr ⟨hs, hf⟩⟩

theorem Kept.trans {p : Program} {a b c : Machine} (h1 : Kept p g a b) (k : Keeps g a b) (h2 : Kept p g b c) :
    Kept p g a c :=
  ⟨fun h => h2.1 (h1.1 h), fun ho hs hf => by
    rcases h1.2 ho hs hf with e | ⟨hs', hf'⟩
    · exact Or.inl (h2.1 e)
    · exact h2.2 (k.serial ho) hs' hf'⟩

/-- A change that keeps the flags, makes no thread live, lowers no place. -/
theorem Kept.frame {p : Program} {m m' : Machine} (hl : m.Lost → m'.Lost)
    (ht : Owned m → ∀ t, (getThread m'.threads t).k ≠ [] → (getThread m.threads t).k ≠ [])
    (hp : ∀ t, m.placed g t ≤ m'.placed g t) (hs : Shape p m → Shape p m') : Kept p g m m' :=
  ⟨hl, fun ho hs0 hf => Or.inr ⟨hs hs0, fun t h => Nat.le_trans (hf t (ht ho t h)) (hp t)⟩⟩

/-- Entry `u` written back with its continuation empty exactly when it was: no thread made live. -/
theorem live_put (m : Machine) (u : Nat) (th : Thread) (he : th.serial = (getThread m.threads u).serial)
    (hk : th.k = [] ↔ (getThread m.threads u).k = []) (ho : SerialOk m.threads) :
    ∀ t, (getThread (m.put th).threads t).k ≠ [] → (getThread m.threads t).k ≠ [] := by
  intro t h
  by_cases hts : th.serial = t
  · subst hts
    have hself := getThread_setThread_self m.threads th.serial th
    have h' : (getThread (setThread m.threads th.serial th) th.serial).k ≠ [] := h
    intro hnil
    have hthk : th.k = [] := by
      rcases ho u with ⟨e, _⟩ | e
      · apply hk.2
        have hu : u = th.serial := by rw [he, e]
        rw [hu]; exact hnil
      · exact hk.2 e
    rcases hself with e | e
    · exact h' (e.trans hthk)
    · exact h' e
  · have e : getThread (m.put th).threads t = getThread m.threads t := getThread_setThread_ne _ _ _ _ hts
    rw [e] at h
    exact h

theorem growPart_nil_iff (i u : Nat) : ∀ k : List Frame, growPart k i u = [] ↔ k = []
  | [] => by simp [growPart]
  | fr :: k => by
    cases fr <;> simp only [growPart] <;> (try split) <;> simp

theorem advancePart_nil_iff (i u : Nat) : ∀ k : List Frame, advancePart k i u = [] ↔ k = []
  | [] => by simp [advancePart]
  | fr :: k => by
    cases fr <;> simp only [advancePart] <;> (try split) <;> simp

theorem placed_engine_eq (m : Machine) (s : Nat) (v : EngineState)
    (hv : threadsOf v.residents = threadsOf (getEngineState m.engines s).residents) (t : Nat) :
    ({ m with engines := setEngineState m.engines s v } : Machine).placed g t = m.placed g t := by
  simp only [Machine.placed, occEngines_set_same t _ _ _ hv]

theorem placed_engine_ge (m : Machine) (s : Nat) (v : EngineState)
    (hv : threadsOf v.residents = threadsOf (getEngineState m.engines s).residents) (t : Nat) :
    m.placed g t ≤ ({ m with engines := setEngineState m.engines s v } : Machine).placed g t :=
  Nat.le_of_eq (placed_engine_eq m s v hv t).symm

theorem placed_setPool_ge (m : Machine) (i : Nat) (v : PoolState) (hv : v.queue = (getPool m.pools i).queue) (t : Nat) :
    m.placed g t ≤ ({ m with pools := setPool m.pools i v } : Machine).placed g t :=
  Nat.le_of_eq (placed_pools m _ (setPool_queues _ _ _ hv) t).symm

theorem placed_put (m : Machine) (th : Thread) (t : Nat) : (m.put th).placed g t = m.placed g t := rfl

/-! ### An iteration's start -/

theorem Machine.served_kept {p : Program} (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) :
    Kept p g m (m.served s b r n).1 := by
  simp only [Machine.served]
  refine Kept.frame (fun h => h) (fun _ _ h => h) (fun t => ?_) (fun hs => ?_)
  · refine placed_engine_ge m s _ ?_ t
    exact threadsOf_setSched _ _ _
  · exact ⟨hs.1, hs.2.1, (setEngineState_length _ _ _).trans hs.2.2.1, hs.2.2.2⟩

theorem Machine.grown_kept (p : Program) (m : Machine) (t i want : Nat) (h : Held) : Kept p g m (m.grown p t i want h) := by
  simp only [Machine.grown]
  refine Kept.frame (fun h => h) (fun ho => live_put _ t _ rfl (growPart_nil_iff _ _ _) ho.1) (fun x => ?_) (fun hs => ?_)
  · rw [placed_put]
    refine placed_setPool_ge m i _ ?_ x
    rfl
  · refine Shape.put (Shape.pools hs _ ?_) _
    exact setPool_queues _ _ _ rfl

theorem Machine.serveOne_kept (p : Program) (hpre : NoPreemption p) (s : Nat) (m : Machine) (b : Batch) (r : Resident)
    (n : Nat) : Kept p g m (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact Machine.served_kept m s b r n
    | exact (Machine.grown_kept p m _ _ _ _).trans (Machine.grown_keeps p m _ _ _ _) (Machine.served_kept _ s b r n)
    | exact Kept.refl m
    | exact absurd (hpre _) (by assumption)

theorem serveIn_kept (p : Program) (hpre : NoPreemption p) (s chunk : Nat) (q : Option Expr) :
    ∀ (ts : List Nat) (m : Machine) (b : Batch), Kept p g m (serveIn p s chunk q ts m b).1 := by
  intro ts
  induction ts with
  | nil => intro m b; exact Kept.refl m
  | cons t ts ih =>
    intro m b
    simp only [serveIn]
    repeat' split
    all_goals first
      | exact Kept.refl _
      | exact ih _ _
      | exact Machine.serveOne_kept p hpre _ _ _ _ _
      | exact (Machine.serveOne_kept p hpre _ _ _ _ _).trans (Machine.serveOne_keeps p _ _ _ _ _) (ih _ _)

theorem serveOrdered_kept (p : Program) (hpre : NoPreemption p) (s : Nat) (m : Machine) (running : List Nat) (chunk : Nat)
    (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident) :
    Kept p g m (serveOrdered p s m running chunk q b keys rs).1 := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_kept p hpre s chunk q _ m b

/-- `Kept` for a function that runs a thread: the thread's statements are the program's (`Inv`). -/
def KeptI (p : Program) (g : Nat) (m m' : Machine) : Prop :=
  (m.Lost → m'.Lost) ∧ (Owned m → Inv p m → Shape p m → Found g m → m'.Lost ∨ (Shape p m' ∧ Found g m'))

theorem KeptI.trans_kept {p : Program} {a b c : Machine} (h1 : KeptI p g a b) (k : Keeps g a b) (h2 : Kept p g b c) :
    KeptI p g a c :=
  ⟨fun h => h2.1 (h1.1 h), fun ho hv hs hf => by
    rcases h1.2 ho hv hs hf with e | ⟨hs', hf'⟩
    · exact Or.inl (h2.1 e)
    · exact h2.2 (k.serial ho) hs' hf'⟩

/-- An engine admits the hold at `j` of pool `i`'s queue: its thread leaves the queue and runs at once (it
ends placed, ended, or the run lost), then its run, if it started one, is served. -/
theorem admitOne_kept (p : Program) (hfit : Fits p) (hpre : NoPreemption p) (f s chunk i j : Nat) (q : Option Expr)
    (m : Machine) (b : Batch) (hj : j < countWaiters (getPool m.pools i).queue) :
    KeptI p g m (admitOne p f s chunk i j q m b).1 := by
  have hK : Keeps g m (exec p f (m.admitWaiter p (admissionStage chunk b.budget) i j)
      (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread)) :=
    Keeps.take p f _ (Machine.admitWaiter_serial p m _ i j hj) (fun _ t => Machine.admitWaiter_placed p m _ i j hj t)
  have hA : KeptI p g m (exec p f (m.admitWaiter p (admissionStage chunk b.budget) i j)
      (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread)) := by
    have he := exec_found (g := g) p hfit f (m.admitWaiter p (admissionStage chunk b.budget) i j)
      (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread)
    refine ⟨fun h => he.1 h, fun ho hv hs hf => ?_⟩
    have hv1 := Machine.admitWaiter_inv p m (admissionStage chunk b.budget) i j hv
    rcases he.2 (hv1.threads.get _) (Machine.admitWaiter_shape m _ i j hs) with e | ⟨hs2, hp, ht, hu⟩
    · exact Or.inl e
    · refine Or.inr ⟨hs2, fun x hx => ?_⟩
      -- the admitted thread's entry is its own: the run's thread is `w.thread`
      have hw := ho.2.get i _ (getWaiter_mem _ j hj)
      have hser : (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads
          (getWaiter (getPool m.pools i).queue j).thread).serial = (getWaiter (getPool m.pools i).queue j).thread := by
        simp only [Machine.admitWaiter, Machine.put]
        rcases getThread_setThread m.threads (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial
            (getWaiter (getPool m.pools i).queue j).thread
            { getThread m.threads (getWaiter (getPool m.pools i).queue j).thread with
              attrs := setAt (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs p.cachedAt
                (admitOn p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial,
                  admissionStage chunk b.budget⟩ (isSome (getWaiter (getPool m.pools i).queue j).cache)
                  (reuseLimit ⟨p.caps, setPool m.pools i { getPool m.pools i with queue := removeWaiter (getPool m.pools i).queue j },
                    (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial, admissionStage chunk b.budget⟩
                    (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now
                    (getWaiter (getPool m.pools i).queue j).reuse)
                  (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now true 0
                  (setPool m.pools i { getPool m.pools i with queue := removeWaiter (getPool m.pools i).queue j })
                  (getWaiter (getPool m.pools i).queue j).on).2.1,
              admNo := m.admSeq,
              k := .stmts (getWaiter (getPool m.pools i).queue j).body ::
                .release (admitOn p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial,
                  admissionStage chunk b.budget⟩ (isSome (getWaiter (getPool m.pools i).queue j).cache)
                  (reuseLimit ⟨p.caps, setPool m.pools i { getPool m.pools i with queue := removeWaiter (getPool m.pools i).queue j },
                    (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial, admissionStage chunk b.budget⟩
                    (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now
                    (getWaiter (getPool m.pools i).queue j).reuse)
                  (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now true 0
                  (setPool m.pools i { getPool m.pools i with queue := removeWaiter (getPool m.pools i).queue j })
                  (getWaiter (getPool m.pools i).queue j).on).2.2 (getWaiter (getPool m.pools i).queue j) ::
                (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).k } with e | ⟨_, e⟩
        · rw [e]; exact hw
        · rw [e]; exact hw
      by_cases hxu : x = (getWaiter (getPool m.pools i).queue j).thread
      · subst hxu
        have hu' := hu
        rw [hser] at hu'
        exact hu' hx
      · have hxu' : x ≠ (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads
            (getWaiter (getPool m.pools i).queue j).thread).serial := by rw [hser]; exact hxu
        rw [ht x hxu'] at hx
        have hentry : getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads x = getThread m.threads x := by
          simp only [Machine.admitWaiter, Machine.put]
          exact getThread_setThread_ne _ _ _ _ (fun h => hxu (by rw [← h]; exact hw))
        rw [hentry] at hx
        have h1 := hf x hx
        have h2 := hp x
        have h3 := Machine.admitWaiter_placed_eq (g := g) p m (admissionStage chunk b.budget) i j hj x
        have h4 : bump x (getWaiter (getPool m.pools i).queue j).thread = 0 := by simp [bump, hxu]
        omega
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact hA
    | exact hA.trans_kept hK (Machine.serveOne_kept p hpre _ _ _ _ _)

end Serq.Kernel
