module

public import Serq.KernelFound

/-! # Every thread with something left to run is in exactly one place, through every run (issue 14, result 6)

`Serq.KernelFound` has the definitions (`Found`, `Good`, `Finds`, `Fits`), a thread's run (`exec_found`) and
the settling of an instant (`settle_finds`). This module has what carries `Found` through the functions
that run no thread (`Kept`: an iteration's serving of one resident, `Machine.served_kept`, a growth,
`Machine.grown_kept`; an iteration's start, `Finds.start_timer`), a function that runs one (`KeptI`), the
timers (`fire_finds`: a timer that placed a thread makes it ready or sets the next one; a renewal arrival
with no next session places only sessions that do not exist) and the run's start (`initial_good`), with
the program's hypotheses (`FoundProgram`). `Serq.KernelFoundPreempt` adds preemption and carries `Found`
through the serving, the admissions, the iterations and the event loop, and gives the theorems
(`runProgram_found`, `runProgram_placed_once`, `runProgram_open_turn_placed`).
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

/-- `Kept` for a function that runs a thread: the thread's statements are the program's (`Inv`). -/
def KeptI (p : Program) (g : Nat) (m m' : Machine) : Prop :=
  (m.Lost → m'.Lost) ∧ (Owned m → Inv p m → Shape p m → Found g m → m'.Lost ∨ (Shape p m' ∧ Found g m'))

theorem KeptI.trans_kept {p : Program} {a b c : Machine} (h1 : KeptI p g a b) (k : Keeps g a b) (h2 : Kept p g b c) :
    KeptI p g a c :=
  ⟨fun h => h2.1 (h1.1 h), fun ho hv hs hf => by
    rcases h1.2 ho hv hs hf with e | ⟨hs', hf'⟩
    · exact Or.inl (h2.1 e)
    · exact h2.2 (k.serial ho) hs' hf'⟩

/-- An iteration starts: engine `s`'s state set, its residents unchanged, its end's timer set. -/
theorem Finds.start_timer {p : Program} (m : Machine) (s : Nat) (v : EngineState)
    (hv : v.residents = (getEngineState m.engines s).residents) (time : Nat) :
    Finds p g m ({ m with engines := setEngineState m.engines s v }.setTimer time (.iterationEnd s)) := by
  refine ⟨fun h => h, fun ⟨ho, hi, hs, hf⟩ => Or.inr ⟨?_, ?_, ?_, ?_⟩⟩
  · exact (Keeps.engine (g := g) m s v (by rw [hv])).serial ho
  · exact ⟨hi.threads, hi.pools, hi.engines.set s (fun r hr => hi.engines s r (by rw [← hv]; exact hr))⟩
  · exact ⟨hs.1, hs.2.1, (setEngineState_length _ _ _).trans hs.2.2.1, hs.2.2.2⟩
  · intro t ht
    have h1 := hf t ht
    rw [placed_setTimer, placed_engine_eq m s v (by rw [hv]) t]
    simp only [wakeOcc]
    omega

/-! ### A timer fires -/

/-- What a timer's firing keeps: given every live thread placed once the timer's own place is counted. -/
def FireKept (p : Program) (m m' : Machine) (w : Wake) : Prop :=
  (m.Lost → m'.Lost) ∧ (Owned m → Shape p m → (∀ t, (getThread m.threads t).k ≠ [] → 1 ≤ m.placed p.gap t + wakeOcc p.gap t w) →
    m'.Lost ∨ (Shape p m' ∧ Found p.gap m'))

theorem FireKept.gen {p : Program} {m m' : Machine} {w : Wake} (hl : m.Lost → m'.Lost)
    (ht : Owned m → ∀ t, (getThread m'.threads t).k ≠ [] → (getThread m.threads t).k ≠ [])
    (hp : ∀ t, m.placed p.gap t + wakeOcc p.gap t w ≤ m'.placed p.gap t) (hs : Shape p m → Shape p m') :
    FireKept p m m' w :=
  ⟨hl, fun ho hs0 hf => Or.inr ⟨hs hs0, fun t h => Nat.le_trans (hf t (ht ho t h)) (hp t)⟩⟩

theorem FireKept.of_kept {p : Program} {m m' : Machine} {w : Wake} (h : Kept p p.gap m m') (hw : ∀ t, wakeOcc p.gap t w = 0) :
    FireKept p m m' w :=
  ⟨h.1, fun ho hs hf => h.2 ho hs (fun t ht => by have := hf t ht; rw [hw t] at this; omega)⟩

theorem Machine.advanceHolds_kept {p : Program} : ∀ (rs : List Resident) (m : Machine), Kept p g m (m.advanceHolds rs)
  | [], m => Kept.refl m
  | r :: rs, m => by
    simp only [Machine.advanceHolds]
    split
    all_goals first
      | exact Machine.advanceHolds_kept rs m
      | (refine Kept.trans ?_ (Keeps.put _ _ (fun ho => advancePart_own _ _ _ _ (ho.1.own _))) (Machine.advanceHolds_kept rs _)
         exact Kept.frame (fun h => h) (fun ho => live_put _ _ _ rfl (advancePart_nil_iff _ _ _) ho.1)
           (fun t => Nat.le_refl _) (fun hs => hs.put _))

theorem getEngineState_of_le : ∀ (l : List EngineState) (i : Nat), l.length ≤ i → getEngineState l i = ⟨[], false, 0, 0, [], []⟩
  | [], i, _ => by cases i <;> rfl
  | _ :: _, 0, h => by simp at h
  | _ :: l, i + 1, h => getEngineState_of_le l i (by simp at h; omega)

theorem setEngineState_of_le : ∀ (l : List EngineState) (i : Nat) (v : EngineState), l.length ≤ i → setEngineState l i v = l
  | [], i, _, _ => by cases i <;> rfl
  | _ :: _, 0, _, h => by simp at h
  | x :: l, i + 1, v, h => by simp only [setEngineState, setEngineState_of_le l i v (by simp at h; omega)]

theorem getStage_lt_of_queue : ∀ (l : List StageState) (i : Nat), (getStage l i).queue ≠ [] → i < l.length
  | [], i, h => by cases i <;> simp [getStage] at h
  | _ :: _, 0, _ => by simp
  | _ :: l, i + 1, h => by
    have := getStage_lt_of_queue l i h
    simp; omega

theorem occStages_set_same (t : Nat) : ∀ (l : List StageState) (i : Nat) (v : StageState),
    v.queue = (getStage l i).queue → occStages t (setStage l i v) = occStages t l
  | [], _, _, _ => rfl
  | _ :: _, 0, v, h => by simp only [setStage, getStage, occStages] at h ⊢; rw [h]
  | _ :: l, i + 1, v, h => by
    simp only [setStage, getStage, occStages] at h ⊢
    rw [occStages_set_same t l i v h]

/-- An iteration's end: the residents whose run ended are ready. -/
theorem finish_kept {p : Program} (m : Machine) (s : Nat) (es : EngineState)
    (hes : (getEngineState m.engines s).residents = es.residents) (gp : List Progress) (t0 t1 : Nat) (gs : List Progress) :
    Kept p g m { m with
      progress := gp,
      engines := setEngineState m.engines s { es with busy := false, residents := (applyTokens t0 t1 gs es.residents).2.1 },
      ready := appendNats m.ready (applyTokens t0 t1 gs es.residents).2.2 } := by
  refine Kept.frame (fun h => h) (fun _ _ h => h) (fun t => ?_)
    (fun hs => ⟨hs.1, hs.2.1, (setEngineState_length _ _ _).trans hs.2.2.1, hs.2.2.2⟩)
  have h2 := occ_applyTokens t t0 t1 gs es.residents
  simp only [Machine.placed, occ_appendNats]
  by_cases hlt : s < m.engines.length
  · have h1 := occEngines_set_eq t m.engines s
      { es with busy := false, residents := (applyTokens t0 t1 gs es.residents).2.1 } hlt
    rw [hes] at h1
    try simp only at h1
    omega
  · have hnil : es.residents = [] := by rw [← hes, getEngineState_of_le _ _ (by omega)]
    rw [setEngineState_of_le _ _ _ (by omega), hnil]
    simp [applyTokens, occ]

theorem fire_kept (p : Program) (m : Machine) (w : Wake) : FireKept p m (fire p m w) w := by
  cases w with
  | resume u =>
    refine FireKept.gen (fun h => h) (fun _ _ h => h) (fun t => ?_) (fun hs => hs)
    simp only [fire, Machine.placed, occ_appendNat, wakeOcc]; omega
  | arrival u =>
    simp only [fire]
    split
    · next hc =>
      refine FireKept.gen (fun h => h) (fun _ _ h => h) (fun t => ?_) (fun hs => hs)
      have hg : p.gap ≠ 0 := by
        intro h0
        rw [h0] at hc
        simp at hc
      rw [placed_setTimer]
      simp only [Machine.placed, occ_appendNat, wakeOcc, bump, hg, if_false]
      repeat' split
      all_goals omega
    · next hc =>
      have hc' : ¬ (p.gap > 0 ∧ u + 1 < p.sessions) := by
        intro ⟨h1, h2⟩
        apply hc
        simp [h1, h2]
      refine ⟨fun h => h, fun ho hs hf => Or.inr ⟨hs, fun t ht => ?_⟩⟩
      have h1 := hf t ht
      have hw : wakeOcc p.gap t (.arrival u) ≤ bump t u := by
        simp only [wakeOcc, bump]
        by_cases hg : p.gap = 0
        · simp [hg]
        · simp only [hg, if_false]
          by_cases hut : u ≤ t
          · by_cases htu : t = u
            · simp [htu]
            · exfalso
              apply ht
              apply getThread_k_of_le
              show m.threads.length ≤ t
              rw [hs.2.2.2]
              rcases Nat.lt_or_ge (u + 1) p.sessions with h | h
              · exact absurd ⟨by omega, h⟩ hc'
              · omega
          · simp [hut]
      show 1 ≤ ({ m with ready := appendNat m.ready u, arrived := m.arrived + 1 } : Machine).placed p.gap t
      simp only [Machine.placed, occ_appendNat]
      simp only [Machine.placed] at h1
      omega
  | iterationEnd s =>
    have h : Kept p p.gap m (fire p m (.iterationEnd s)) := by
      simp only [fire]
      refine (Machine.advanceHolds_kept _ m).trans (Machine.advanceHolds_keeps _ _) (finish_kept _ s _ ?_ _ _ _ _)
      simp
    exact FireKept.of_kept h (fun _ => rfl)
  | leaseEnd u n =>
    have h : Kept p p.gap m (fire p m (.leaseEnd u n)) := by
      simp only [fire]
      split
      · exact Kept.refl m
      · refine Kept.frame (fun h => h) (fun ho => live_put _ u _ rfl Iff.rfl ho.1) (fun t => ?_) (fun hs => ?_)
        · rw [placed_put]; exact Nat.le_of_eq (placed_pools m _ (endLease_queues ..) t).symm
        · exact (hs.pools _ (endLease_queues ..)).put _
    exact FireKept.of_kept h (fun _ => rfl)
  | fifoDone s u =>
    simp only [fire]
    split
    · next heq =>
      refine FireKept.gen (fun h => h) (fun _ _ h => h) (fun t => ?_)
        (fun hs => ⟨hs.1, (setStage_length _ _ _).trans hs.2.1, hs.2.2.1, hs.2.2.2⟩)
      have h1 := occStages_set_same t m.stages s { getStage m.stages s with busy := (getStage m.stages s).busy - 1 } rfl
      simp only [Machine.placed, occ_appendNat, wakeOcc]
      rw [h1]
      omega
    · next j js heq =>
      have hlt : s < m.stages.length := getStage_lt_of_queue _ _ (by rw [heq]; simp)
      refine FireKept.gen (fun h => h) (fun _ _ h => h) (fun t => ?_)
        (fun hs => ⟨hs.1, (setStage_length _ _ _).trans hs.2.1, hs.2.2.1, hs.2.2.2⟩)
      have h1 := occStages_set_eq t m.stages s { getStage m.stages s with queue := js } hlt
      try simp only at h1
      rw [heq] at h1
      simp only [occJobs] at h1
      simp only [Machine.placed, Machine.setTimer, occ_appendNat, occTimers_insert, wakeOcc]
      omega

/-- The event loop's timer fires: out of the timers, it makes its thread ready or sets the next one. -/
theorem fire_finds (p : Program) (m : Machine) (now : Nat) (tm : Timer) (ts : List Timer) (he : m.timers = tm :: ts) :
    Finds p p.gap m (fire p { m with now := now, timers := ts } tm.wake) := by
  have h := fire_kept p { m with now := now, timers := ts } tm.wake
  refine ⟨fun hl => h.1 hl, fun ⟨ho, hv, hs, hf⟩ => ?_⟩
  have hw : ∀ t, (getThread m.threads t).k ≠ [] →
      1 ≤ ({ m with now := now, timers := ts } : Machine).placed p.gap t + wakeOcc p.gap t tm.wake := by
    intro t ht
    have := hf t ht
    simp only [Machine.placed, he, occTimers] at this ⊢
    omega
  rcases h.2 ho hs hw with e | ⟨hs', hf'⟩
  · exact Or.inl e
  · exact Or.inr ⟨(fire_keeps p m now tm ts he).serial ho, fire_inv p _ _ hv, hs', hf'⟩

/-! ### The run's start -/

theorem arrivals_length (p : Program) : ∀ (n s : Nat), (arrivals p n s).length = n
  | 0, _ => rfl
  | n + 1, s => by simp only [arrivals, List.length_cons, arrivals_length p n (s + 1)]

theorem idleStages_length : ∀ ss : List Service, (idleStages ss).length = ss.length
  | [] => rfl
  | _ :: ss => by simp only [idleStages, List.length_cons, idleStages_length ss]

theorem emptyPools_length : ∀ cs : List Nat, (emptyPools cs).length = cs.length
  | [] => rfl
  | _ :: cs => by simp only [emptyPools, List.length_cons, emptyPools_length cs]

/-- What the proof needs of a program, each decided on its value: every statement names what exists
(`Fits`: a hold names a pool of the program first, a run on an engine names one of its stages; a hold a
preemption requeues is one of them), and a trace has an arrival for every session. -/
structure FoundProgram (p : Program) : Prop where
  fits : Fits p
  trace : p.arrivalTimes = [] ∨ p.sessions ≤ countNats p.arrivalTimes

/-- `FoundProgram` checked on the program's value: its statements (`Program.allStmts` of `fitsStmt`), its
trace (none, or an arrival per session). -/
theorem FoundProgram.of_check (p : Program) (h1 : p.allStmts (fitsStmt (countNats p.caps) (countServices p.stages)) = true)
    (h3 : countNats p.arrivalTimes = 0 ∨ p.sessions ≤ countNats p.arrivalTimes) :
    FoundProgram p := by
  refine ⟨h1, ?_⟩
  rcases h3 with h3 | h3
  · left
    cases e : p.arrivalTimes with
    | nil => rfl
    | cons x xs => rw [e] at h3; simp [countNats] at h3
  · exact Or.inr h3

theorem initial_good (p : Program) (hd : DistinctProgram p) (hf : FoundProgram p) : Good p p.gap (initial p) := by
  have he : (initial p).threads = arrivals p p.sessions 0 := by
    unfold initial; dsimp only; split <;> rfl
  refine ⟨(initial_placed p hd.arrivals).1, (initial_ok p).1, ?_, ?_⟩
  · unfold initial; dsimp only; split <;>
      exact ⟨emptyPools_length _, idleStages_length _, idleEngines_length _, arrivals_length _ _ _⟩
  · intro t ht
    have ht' : t < p.sessions := by
      rw [he] at ht
      apply Nat.lt_of_not_le
      intro hle
      exact ht (getThread_k_of_le _ _ (by rw [arrivals_length]; exact hle))
    cases ha : p.arrivalTimes with
    | nil =>
      unfold initial
      simp only [ha]
      by_cases hg : p.gap = 0
      · have h1 := occ_serials t p.sessions 0
        simp only [Machine.placed, hg, occStages_idle, occPools_empty, occEngines_idle]
        simp only [if_true, Nat.lt_irrefl, false_and, if_false, occTimers, h1, Nat.not_lt_zero, Nat.zero_add, ht']
        omega
      · have h1 : 0 < p.gap := Nat.pos_of_ne_zero hg
        have h2 : 0 < p.sessions := by omega
        simp only [Machine.placed, hg, occStages_idle, occPools_empty, occEngines_idle, if_false]
        simp [h1, h2, hg, occTimers, wakeOcc, occ]
    | cons x xs =>
      have hg : p.gap = 0 := by
        rcases hd.arrivals with h | h
        · exact h
        · rw [ha] at h; cases h
      have hc : t < countNats (x :: xs) := by
        rcases hf.trace with h | h
        · rw [ha] at h; cases h
        · rw [ha] at h; omega
      have h1 := occTimers_trace t (x :: xs) 0
      unfold initial
      simp only [ha]
      simp only [Machine.placed, occStages_idle, occPools_empty, occEngines_idle, occ, hg]
      rw [h1]
      split
      · omega
      · split
        · omega
        · omega

end Serq.Kernel
