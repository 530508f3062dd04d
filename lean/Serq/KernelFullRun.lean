module

public import Serq.KernelFull

/-! # Full iterations through the kernel, for every run

`Serq.KernelFull` proves `full_or_short` for one iteration of the kernel interpreter and for every run
given a machine invariant that keeps the engine's residents ready (`FullInvariant`). This module proves
the first part of that invariant for every run — an idle engine has nothing scheduled (`IdleClear`) —
and so reduces the run-level theorem to an invariant of the other two parts, no growing resident and no
thread twice (`RestInvariant`, `runProgram_full_or_short_of_rest`).
-/
@[expose] public section

namespace Serq.Kernel

/-! ### Nothing scheduled on an idle engine: the `sched` part of `PlanReady` for every run

`IdleClear s m`: when engine `s` is idle, every resident of it has `sched = 0`. Every function of the
machine keeps it, given `PlanReady` when `s` starts (for its own plan) and a cost that is never 0 (the
program's run-time error leaves the engine idle with the residents as planned). -/

/-- Every resident of engine `s` has nothing scheduled. -/
def SchedClear (s : Nat) (l : List EngineState) : Prop :=
  ∀ r ∈ (getEngineState l s).residents, r.sched = 0

/-- When engine `s` is idle, nothing is scheduled on it. -/
def IdleClear (s : Nat) (m : Machine) : Prop :=
  (getEngineState m.engines s).busy = false → SchedClear s m.engines

theorem mem_insertResident (r x : Resident) : ∀ rs : List Resident, x ∈ insertResident r rs ↔ x = r ∨ x ∈ rs
  | [] => by simp [insertResident]
  | y :: ys => by
    simp only [insertResident]
    split
    · simp
    · simp only [List.mem_cons, mem_insertResident r x ys]
      constructor
      · rintro (h | h | h)
        · exact Or.inr (Or.inl h)
        · exact Or.inl h
        · exact Or.inr (Or.inr h)
      · rintro (h | h | h)
        · exact Or.inr (Or.inl h)
        · exact Or.inl h
        · exact Or.inr (Or.inr h)

@[simp] theorem SchedClear_insert (s s' : Nat) (l : List EngineState) (t v : Nat) (d : Bool) (a g : Nat) :
    SchedClear s (setEngineState l s' { getEngineState l s' with
      residents := insertResident ⟨t, v, d, a, 0, g⟩ (getEngineState l s').residents }) ↔ SchedClear s l := by
  unfold SchedClear
  by_cases hs : s' = s
  · subst hs
    rcases getEngineState_setEngineState_self l s' { getEngineState l s' with
      residents := insertResident ⟨t, v, d, a, 0, g⟩ (getEngineState l s').residents } with e | e
    · rw [e]
      constructor
      · intro h x hx
        exact h x ((mem_insertResident _ _ _).2 (Or.inr hx))
      · intro h x hx
        rcases (mem_insertResident _ _ _).1 hx with hx | hx
        · rw [hx]
        · exact h x hx
    · rw [e]
  · rw [getEngineState_setEngineState_ne _ _ _ _ hs]

@[simp] theorem SchedClear_set_ne (s s' : Nat) (l : List EngineState) (v : EngineState) (h : s' ≠ s) :
    SchedClear s (setEngineState l s' v) ↔ SchedClear s l := by
  unfold SchedClear
  rw [getEngineState_setEngineState_ne _ _ _ _ h]

theorem exec_sched (p : Program) (f : Nat) (m : Machine) (th : Thread) (s : Nat) :
    SchedClear s (exec p f m th).engines ↔ SchedClear s m.engines := by
  fun_induction exec p f m th <;> simp_all +zetaDelta

theorem runReady_sched (p : Program) (f : Nat) (m : Machine) (s : Nat) :
    SchedClear s (runReady p f m).engines ↔ SchedClear s m.engines := by
  fun_induction runReady p f m <;> simp_all [exec_sched]

theorem retryQueue_sched (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (s : Nat) :
    SchedClear s (retryQueue p f m i b).1.engines ↔ SchedClear s m.engines := by
  fun_induction retryQueue p f m i b <;> simp_all +zetaDelta

theorem retryPool_sched (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (s : Nat) :
    SchedClear s (retryPool p f m i b).1.engines ↔ SchedClear s m.engines := by
  simp only [retryPool]
  split
  · rw [retryQueue_sched, retryGrowers_engines]
  · rw [retryGrowers_engines]

theorem retryPools_sched (p : Program) (f n i : Nat) (m : Machine) (b : Bool) (s : Nat) :
    SchedClear s (retryPools p f n i m b).1.engines ↔ SchedClear s m.engines := by
  fun_induction retryPools p f n i m b <;> simp_all +zetaDelta [retryPool_sched]

theorem settle_sched (p : Program) (f : Nat) (m : Machine) (s : Nat) :
    SchedClear s (settle p f m).engines ↔ SchedClear s m.engines := by
  fun_induction settle p f m <;> simp_all +zetaDelta [retryPools_sched, runReady_sched]

theorem settle_idleClear (p : Program) (f : Nat) (m : Machine) (s : Nat) (h : IdleClear s m) :
    IdleClear s (settle p f m) := by
  intro hb
  rw [(settle_clock p f m s).2.1] at hb
  exact (settle_sched p f m s).2 (h hb)

theorem applyTokens_sched (t0 t1 : Nat) : ∀ (rs : List Resident) (gs : List Progress),
    ∀ x ∈ (applyTokens t0 t1 gs rs).2.1, x.sched = 0
  | [], _, x, hx => by simp [applyTokens] at hx
  | r :: rs, gs, x, hx => by
    simp only [applyTokens] at hx
    split at hx
    · next h0 =>
      simp only [List.mem_cons] at hx
      rcases hx with hx | hx
      · rw [hx]; exact h0
      · exact applyTokens_sched t0 t1 rs gs x hx
    · split at hx
      · exact applyTokens_sched t0 t1 rs _ x hx
      · simp only [List.mem_cons] at hx
        rcases hx with hx | hx
        · subst hx; rfl
        · exact applyTokens_sched t0 t1 rs _ x hx

theorem getEngineState_setEngineState_or : ∀ (l : List EngineState) (i : Nat) (v : EngineState),
    getEngineState (setEngineState l i v) i = v ∨ getEngineState (setEngineState l i v) i = ⟨[], false, 0, 0, [], []⟩
  | [], _, _ => Or.inr rfl
  | _ :: _, 0, _ => Or.inl rfl
  | _ :: xs, i + 1, v => getEngineState_setEngineState_or xs i v

theorem SchedClear_set_self (l : List EngineState) (s : Nat) (v : EngineState) (hv : ∀ r ∈ v.residents, r.sched = 0) :
    SchedClear s (setEngineState l s v) := by
  unfold SchedClear
  rcases getEngineState_setEngineState_or l s v with e | e <;> rw [e]
  · exact hv
  · intro r hr; simp at hr

theorem fire_idleClear (p : Program) (m : Machine) (w : Wake) (s : Nat) (h : IdleClear s m) :
    IdleClear s (fire p m w) := by
  cases w with
  | resume t => exact h
  | arrival a =>
    simp only [fire]
    split
    · exact h
    · exact h
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact h
    · exact h
  | fifoDone s' t =>
    simp only [fire]
    split
    · exact h
    · exact h
  | iterationEnd s' =>
    intro hb
    simp only [fire, Machine.advanceHolds_engines] at hb ⊢
    by_cases hs : s' = s
    · subst hs
      exact SchedClear_set_self _ _ _ (fun r hr => applyTokens_sched _ _ _ _ r hr)
    · rw [getEngineState_setEngineState_ne _ _ _ _ hs] at hb
      rw [SchedClear_set_ne _ _ _ _ hs]
      exact h hb

section Other

variable {s s' : Nat} (hne : s' ≠ s)
include hne

theorem Machine.served_sched (m : Machine) (b : Batch) (r : Resident) (n : Nat) :
    SchedClear s (m.served s' b r n).1.engines ↔ SchedClear s m.engines := by
  simp [Machine.served, hne]

theorem Machine.preempt_sched (p : Program) (i t : Nat) (m : Machine) (b : Batch) :
    SchedClear s (m.preempt p s' i t b).1.engines ↔ SchedClear s m.engines := by
  simp only [Machine.preempt]
  split <;> simp [hne]

theorem growPreempting_sched (p : Program) (i want t f : Nat) (m : Machine) (b : Batch) :
    SchedClear s (growPreempting p s' i want t f m b).1.engines ↔ SchedClear s m.engines := by
  fun_induction growPreempting p s' i want t f m b <;> simp_all +zetaDelta [Machine.preempt_sched hne]

theorem Machine.serveOne_sched (p : Program) (m : Machine) (b : Batch) (r : Resident) (n : Nat) :
    SchedClear s (m.serveOne p s' b r n).1.engines ↔ SchedClear s m.engines := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals simp_all [growPreempting_sched hne, Machine.served_sched hne]

theorem serveIn_sched (p : Program) (c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) :
    SchedClear s (serveIn p s' c q ts m b).1.engines ↔ SchedClear s m.engines := by
  fun_induction serveIn p s' c q ts m b <;> simp_all +zetaDelta [Machine.serveOne_sched hne]

theorem serveOrdered_sched (p : Program) (m : Machine) (running : List Nat) (c : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) :
    SchedClear s (serveOrdered p s' m running c q b keys rs).1.engines ↔ SchedClear s m.engines := by
  cases keys <;> simp only [serveOrdered, serveIn_sched hne]

theorem admitOne_sched (p : Program) (f c i k : Nat) (q : Option Expr) (m : Machine) (b : Batch) :
    SchedClear s (admitOne p f s' c i k q m b).1.engines ↔ SchedClear s m.engines := by
  simp only [admitOne]
  repeat' split
  all_goals simp_all [Machine.serveOne_sched hne, exec_sched]

theorem admitWaiting_sched (p : Program) (c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine) (b : Batch) :
    SchedClear s (admitWaiting p s' c q g f m b).1.engines ↔ SchedClear s m.engines := by
  fun_induction admitWaiting p s' c q g f m b <;> simp_all +zetaDelta [admitOne_sched hne]

/-- Another engine's iteration keeps engine `s` idle-clear (its admissions run threads, which add residents
with nothing scheduled). -/
theorem startIteration_idleClear_ne (p : Program) (f : Nat) (eng : Engine) (m : Machine) (h : IdleClear s m) :
    IdleClear s (startIteration p f s' eng m) := by
  intro hb
  simp only [startIteration] at hb ⊢
  split at hb
  · next hc =>
    rw [if_pos hc]
    rw [(admitWaiting_clock ..).2.1, (serveOrdered_clock ..).2.1] at hb
    rw [admitWaiting_sched hne, serveOrdered_sched hne]
    exact h hb
  · next hc =>
    rw [if_neg hc]
    split at hb
    · next hc2 =>
      rw [if_pos hc2]
      rw [(admitWaiting_clock ..).2.1, (serveOrdered_clock ..).2.1] at hb
      rw [admitWaiting_sched hne, serveOrdered_sched hne]
      exact h hb
    · next hc2 =>
      rw [if_neg hc2]
      simp only [Machine.setTimer_engines] at hb ⊢
      rw [getEngineState_setEngineState_ne _ _ _ _ hne, (admitWaiting_clock ..).2.1, (serveOrdered_clock ..).2.1] at hb
      rw [SchedClear_set_ne _ _ _ _ hne, admitWaiting_sched hne, serveOrdered_sched hne]
      exact h hb

end Other

theorem sumSched_eq_zero : ∀ rs : List Resident, sumSched rs = 0 → ∀ r ∈ rs, r.sched = 0
  | [], _, r, hr => by simp at hr
  | x :: xs, h, r, hr => by
    have h' : x.sched + sumSched xs = 0 := h
    simp only [List.mem_cons] at hr
    rcases hr with hr | hr
    · rw [hr]; omega
    · exact sumSched_eq_zero xs (by omega) r hr

/-- Engine `s`'s own iteration, started idle from `PlanReady` (with the hypotheses of
`startIteration_full_or_short`) and a cost that is never 0, leaves it busy, or idle with nothing
scheduled (an iteration of no tokens keeps no record). -/
theorem startIteration_idleClear_self (p : Program) (f s : Nat) (eng : Engine) (m : Machine) (B : Nat)
    (hB : eng.budget = .num B) (hq : eng.serveOnly = none) (hg : eng.granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1) (hcost : ∀ (v : PoolView) (now : Nat), eval v [] now 0 eng.cost ≠ 0)
    (hr : PlanReady m s) : IdleClear s (startIteration p f s eng m) := by
  have key := fun running c => serveOrdered_full p s m running c B eng.order hr
  simp only [startIteration, hB, hq, hg, eval]
  split
  · next hc =>
    intro _ r hr'
    simp only [Bool.and_eq_true, decide_eq_true_eq] at hc
    rw [(admitWaiting_none p s _ _ _ hvia _ _ _).2] at hr'
    rw [(admitWaiting_none p s _ _ _ hvia _ _ _).1] at hc
    exact sumSched_eq_zero _ (by rw [← (key _ _).sum]; exact hc.1) r hr'
  · split
    · next hc2 =>
      exfalso
      simp only [Bool.and_eq_true, decide_eq_true_eq] at hc2
      exact hcost _ _ hc2.1
    · intro hb
      simp only [Machine.setTimer_engines] at hb ⊢
      unfold SchedClear
      rcases getEngineState_setEngineState_or _ s _ with e | e
      · rw [e] at hb
        simp at hb
      · rw [e]
        intro r hr'
        simp at hr'


/-! ### Every run, given an invariant that keeps the residents growing nothing and their threads distinct

With `IdleClear` proved invariant, what is left of `FullInvariant` is an invariant `J` that gives, whenever
engine `s` is idle, the other two parts of `PlanReady`: no resident grows a pool, no thread is twice a
resident (`RestInvariant`). -/

/-- Obligations on a machine invariant `J` that gives, whenever engine `s` is idle, residents that grow
nothing and no thread twice among them. -/
structure RestInvariant (p : Program) (s : Nat) (J : Machine → Prop) : Prop where
  initial : J (initial p)
  settle : ∀ f m, J m → J (settle p f m)
  fire : ∀ m t (tm : Timer) ts, m.timers = tm :: ts → J m → J (fire p { m with now := t, timers := ts } tm.wake)
  start : ∀ f i e m, getService p.stages i = .step e → (getEngineState m.engines i).busy = false → J m →
    J (startIteration p f i (getEngine p.engines e) m)
  fuel : ∀ m, J m → J { m with outOfFuel := true }
  ready : ∀ m, J m → (getEngineState m.engines s).busy = false →
    (∀ r ∈ (getEngineState m.engines s).residents, r.grow = 0) ∧ threadsDistinct (getEngineState m.engines s).residents

theorem getEngineState_idleEngines_residents : ∀ (ss : List Service) (j : Nat),
    (getEngineState (idleEngines ss) j).residents = []
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | _ :: ss, j + 1 => getEngineState_idleEngines_residents ss j

theorem initial_idleClear (p : Program) (s : Nat) : IdleClear s (initial p) := by
  intro _ r hr
  have he : (initial p).engines = idleEngines p.stages := by
    unfold initial; dsimp only; split <;> rfl
  rw [he, getEngineState_idleEngines_residents] at hr
  cases hr

/-- `IdleClear` and a `RestInvariant` make a `FullInvariant`, for an engine `e` with the hypotheses of
`startIteration_full_or_short` and a cost that is never 0. -/
theorem FullInvariant.of_rest (p : Program) (s e B : Nat) (J : Machine → Prop) (hJ : RestInvariant p s J)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hg : (getEngine p.engines e).granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1)
    (hcost : ∀ (v : PoolView) (now : Nat), eval v [] now 0 (getEngine p.engines e).cost ≠ 0) :
    FullInvariant p s (fun m => IdleClear s m ∧ J m) := by
  have hready : ∀ m, IdleClear s m ∧ J m → (getEngineState m.engines s).busy = false → PlanReady m s :=
    fun m h hb => ⟨fun r hr => ⟨h.1 hb r hr, (hJ.ready m h.2 hb).1 r hr⟩, (hJ.ready m h.2 hb).2⟩
  refine ⟨⟨initial_idleClear p s, hJ.initial⟩, fun f m h => ⟨settle_idleClear p f m s h.1, hJ.settle f m h.2⟩,
    fun m t tm ts he h => ⟨fire_idleClear p _ _ s h.1, hJ.fire m t tm ts he h.2⟩, ?_, fun m h => ⟨h.1, hJ.fuel m h.2⟩, hready⟩
  intro f i e' m hi hb h
  refine ⟨?_, hJ.start f i e' m hi hb h.2⟩
  by_cases his : i = s
  · subst his
    rw [hs] at hi
    cases hi
    exact startIteration_idleClear_self p f i _ m B hB hq hg hvia hcost (hready m h hb)
  · exact startIteration_idleClear_ne his p f _ m h.1

/-- `full_or_short` for every run, given an invariant `J` that keeps engine `s`'s residents growing
nothing and their threads distinct whenever it is idle (`RestInvariant`): every record of stage `s`
(engine `e`: a constant `tokens cap B`, no `only` on `advance running`, no granule, no pool admitted by
it, a cost that is never 0) has `tokens = B` or `demand < B`. -/
theorem runProgram_full_or_short_of_rest (p : Program) (fuel s e B : Nat) (J : Machine → Prop) (hJ : RestInvariant p s J)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hg : (getEngine p.engines e).granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1)
    (hcost : ∀ (v : PoolView) (now : Nat), eval v [] now 0 (getEngine p.engines e).cost ≠ 0) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens = B ∨ r.demand < B :=
  runProgram_full_or_short_of p s e B _ (FullInvariant.of_rest p s e B J hJ hs hB hq hg hvia hcost) hs hB hq hg hvia fuel

end Serq.Kernel
