module

public import Serq.KernelDistinct

/-! # Full iterations through the kernel for engines that admit their own queue (issue 13)

`Serq.KernelFull`'s plan of one iteration (`plan_full`) and every theorem built on it assume that the
engine admits no pool's queue (`∀ v ∈ p.admitVia, v ≠ s + 1`), so that its `admit waiting` admits no one.
Every engine program of `examples/` admits its own `reqs` queue (`pool reqs on S`). This module removes
that hypothesis, replacing it by what admission needs:

* no `only` on `admit waiting` (`Engine.admitOnly = none`): an admitted resident that `only` leaves out
  counts in the demand but is not served;
* the engine's serving invariant (`ServeInv`) extends through `admitWaiting` (`admitWaiting_serveInv`):
  each admission (`admitOne`) runs the admitted thread, which adds at most one resident of its own thread
  with nothing scheduled to the engine and changes no other resident's `sched` (`exec_addsOnly`); that
  thread is no resident before (it waited in a queue: `Placed`, `admitWaiter_not_resident`), grows nothing
  (`NoGrowth` and the provenance invariant `Inv`), and is served at once its whole demand or the whole
  budget left (no granule: it is not passed over). An admission that does not fit ends the admissions
  with the hold still waiting, not a resident, so the demand does not count it.

The invariants it needs through the plan, `Inv` (`Serq.KernelProvenance`) and `Placed`
(`Serq.KernelDistinct`, under no preemption), hold at every point of every run, so `full_or_short`
holds for every run of a program with `DistinctProgram`, `NoGrowth`, a constant budget, no `only` on
either statement, no granule and a cost that is never 0 (`runProgram_full_or_short_admitting`), whether
or not the engine admits a queue.
-/
@[expose] public section

namespace Serq.Kernel

/-! ### A thread's run adds at most its own resident, with nothing scheduled -/

/-- `rs'` is `rs` with at most residents of thread `t` that have nothing scheduled added: the tokens
scheduled are the same, and every resident of `rs'` is one of `rs` or a new one of `t` with `sched = 0`. -/
structure AddsOnly (t : Nat) (rs rs' : List Resident) : Prop where
  sum : sumSched rs' = sumSched rs
  mem : ∀ x ∈ rs', x ∈ rs ∨ (x.thread = t ∧ x.sched = 0)

theorem AddsOnly.refl (t : Nat) (rs : List Resident) : AddsOnly t rs rs := ⟨rfl, fun _ hx => Or.inl hx⟩

theorem sumSched_insertResident (r : Resident) : ∀ rs : List Resident,
    sumSched (insertResident r rs) = r.sched + sumSched rs
  | [] => by simp [insertResident, sumSched]
  | x :: xs => by
    simp only [insertResident]
    split
    · rfl
    · simp only [sumSched, sumSched_insertResident r xs]; omega

theorem AddsOnly.insert (t : Nat) (l : List EngineState) (s s' : Nat) (r : Resident) (hr : r.thread = t)
    (h0 : r.sched = 0) :
    AddsOnly t (getEngineState l s).residents
      (getEngineState (setEngineState l s' { getEngineState l s' with
        residents := insertResident r (getEngineState l s').residents }) s).residents := by
  by_cases hs : s' = s
  · subst hs
    rcases getEngineState_setEngineState_self l s' { getEngineState l s' with
      residents := insertResident r (getEngineState l s').residents } with e | e <;> rw [e]
    · dsimp only
      refine ⟨by rw [sumSched_insertResident, h0, Nat.zero_add], fun x hx => ?_⟩
      rcases (mem_insertResident r x _).1 hx with hx | hx
      · exact Or.inr ⟨hx ▸ hr, hx ▸ h0⟩
      · exact Or.inl hx
    · exact AddsOnly.refl t _
  · rw [getEngineState_setEngineState_ne _ _ _ _ hs]
    exact AddsOnly.refl t _

/-- `exec` runs a thread until it blocks: on engine `s` it adds at most one resident, of the thread it
runs, with nothing scheduled (a `prefill`/`decode` run blocks the thread), and changes no other. -/
theorem exec_addsOnly (p : Program) (s : Nat) : ∀ (f : Nat) (m : Machine) (th : Thread) (rs : List Resident) (t : Nat),
    (getEngineState m.engines s).residents = rs → th.serial = t →
    AddsOnly t rs (getEngineState (exec p f m th).engines s).residents
  | 0, m, th, rs, t, hrs, _ => by simp only [exec]; rw [← hrs]; exact AddsOnly.refl _ _
  | f + 1, m, th, rs, t, hrs, ht => by
    simp only [exec]
    repeat' split
    all_goals first
      | exact exec_addsOnly p s f _ _ rs t (by exact hrs) (by exact ht)
      | exact exec_addsOnly p s f _ _ rs t (by rw [Machine.leaseTimer_engines]; exact hrs) (by exact ht)
      | (rw [← hrs]; exact AddsOnly.refl _ _)
      | (rw [← hrs, ← ht]; exact AddsOnly.insert _ _ _ _ ⟨th.serial, _, _, _, 0, _⟩ rfl rfl)
      | (rw [← hrs]; try simp only [Machine.put_engines, Machine.addJob_engines]; exact AddsOnly.refl _ _)

/-- A thread with nothing left to run changes no engine. -/
theorem exec_nil_engines (p : Program) (f : Nat) (m : Machine) (th : Thread) (hk : th.k = []) :
    (exec p f m th).engines = m.engines := by
  cases f with
  | zero => rfl
  | succ f => simp only [exec, hk, Machine.put_engines]

/-! ### An admission keeps the serving's invariant -/

/-- A hold waiting in pool `i`'s queue (at `j`) is of a thread that is no resident of any engine. -/
theorem admitWaiter_not_resident {g : Nat} (p : Program) (m : Machine) (st : List Nat) (i j s : Nat)
    (hj : j < countWaiters (getPool m.pools i).queue) (hpl : Placed g m) :
    (getWaiter (getPool m.pools i).queue j).thread ∉ threadsOf (getEngineState m.engines s).residents := by
  intro hmem
  have h1 := Machine.admitWaiter_placed (g := g) p m st i j hj (getWaiter (getPool m.pools i).queue j).thread
  have h2 := hpl.2 (getWaiter (getPool m.pools i).queue j).thread
  have h3 := occ_getEngineState_le (getWaiter (getPool m.pools i).queue j).thread m.engines s
  have h4 := occ_pos_of_mem _ _ hmem
  have hb1 : bump (getWaiter (getPool m.pools i).queue j).thread (getWaiter (getPool m.pools i).queue j).thread = 1 :=
    if_pos rfl
  rw [hb1] at h1
  unfold Machine.placed at h1 h2
  rw [Machine.admitWaiter_engines] at h1
  omega

/-- No `only` on `admit waiting`, no granule, no growing run on `s` and no preemption: the admission of
the hold at `j` of pool `i`'s queue keeps `ServeInv` over every resident of engine `s` (the admitted
thread's resident, if its run started one, is served at once its whole demand or the whole budget left). -/
theorem admitOne_serveInv {g : Nat} (p : Program) (s : Nat) (hgrow : NoGrowth p s) (f c B i j : Nat) (m : Machine) (b : Batch)
    (hj : j < countWaiters (getPool m.pools i).queue) (hb : b.budget ≠ 0) (hinv : Inv p m) (hpl : Placed g m)
    (h : ServeInv c B [] (getEngineState m.engines s).residents b) :
    ServeInv c B [] (getEngineState (admitOne p f s c i j none m b).1.engines s).residents
      (admitOne p f s c i j none m b).2 := by
  have hwt := admitWaiter_not_resident (g := g) p m (admissionStage c b.budget) i j s hj hpl
  have hs1 := Machine.admitWaiter_serial p m (admissionStage c b.budget) i j hpl.1
  have hinv1 := Machine.admitWaiter_inv p m (admissionStage c b.budget) i j hinv
  have hinv2 := exec_inv p f _ _ hinv1 (hinv1.threads.get (getWaiter (getPool m.pools i).queue j).thread)
  have hpl2 : Placed g (exec p f (m.admitWaiter p (admissionStage c b.budget) i j)
      (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread)) :=
    hpl.keep (Keeps.take p f _ (Machine.admitWaiter_serial p m _ i j) (fun _ t => Machine.admitWaiter_placed p m _ i j hj t))
  have hadds : AddsOnly (getWaiter (getPool m.pools i).queue j).thread (getEngineState m.engines s).residents
      (getEngineState (exec p f (m.admitWaiter p (admissionStage c b.budget) i j)
        (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads
          (getWaiter (getPool m.pools i).queue j).thread)).engines s).residents := by
    rcases hs1 (getWaiter (getPool m.pools i).queue j).thread with e | e
    · have := exec_addsOnly p s f (m.admitWaiter p (admissionStage c b.budget) i j)
        (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads
          (getWaiter (getPool m.pools i).queue j).thread) (getEngineState m.engines s).residents _ rfl e
      exact this
    · rw [exec_nil_engines p f _ _ e]
      exact AddsOnly.refl _ _
  have hi : ServeInv c B [(getWaiter (getPool m.pools i).queue j).thread]
      (getEngineState (exec p f (m.admitWaiter p (admissionStage c b.budget) i j)
        (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads
          (getWaiter (getPool m.pools i).queue j).thread)).engines s).residents b := by
    refine ⟨h.cap, h.gran, h.within, by rw [hadds.sum]; exact h.sum, hpl2.distinct s, hinv2.grow0 hgrow, ?_⟩
    intro hlt x hx
    rcases hadds.mem x hx with hx | ⟨ht, h0⟩
    · rcases h.plan hlt x hx with e | ⟨e, _⟩
      · exact Or.inl e
      · simp at e
    · exact Or.inr ⟨by simp [ht], h0⟩
  simp only [admitOne]
  split
  · next r hsome =>
    obtain ⟨hrmem, hrt⟩ := residentOf_some _ r _ hsome
    have hs0 : r.sched = 0 := by
      rcases hadds.mem r hrmem with hr | ⟨_, h0⟩
      · exact absurd (hrt ▸ threadsOf_mem r _ hr) hwt
      · exact h0
    rw [if_pos (by rfl), h.gran]
    rw [not_passedOver c b.budget r hb]
    simp only [Bool.false_eq_true, ↓reduceIte]
    rw [Machine.serveOne_grow0 p s _ b r _ (hi.grow r hrmem)]
    dsimp only
    rw [Machine.served_residents, hrt]
    exact hi.serve hsome hs0 (tokensFor_le c 0 b.budget r hb) (tokensFor_share c b.budget r)
  · next hnone =>
    exact hi.skip (fun _ x hx hxt => absurd hxt (residentOf_none _ _ hnone x hx))

/-- `admit waiting` (no `only`, any gate) keeps `ServeInv` over every resident of engine `s`, with the
provenance invariant `Inv` and `Placed` (by induction on its fuel). -/
theorem admitWaiting_serveInv {g : Nat} (p : Program) (s : Nat) (hpre : ∀ i, getAt p.preemptModes i = 0) (hgrow : NoGrowth p s)
    (hnt : ∀ k, ¬TiledProgram p s k) (c B : Nat) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), Inv p m → Placed g m → ServeInv c B [] (getEngineState m.engines s).residents b →
      Inv p (admitWaiting p s c none gated f m b).1 ∧ Placed g (admitWaiting p s c none gated f m b).1 ∧
        ServeInv c B [] (getEngineState (admitWaiting p s c none gated f m b).1.engines s).residents
          (admitWaiting p s c none gated f m b).2
  | 0, m, b, hi, hp, h => ⟨⟨hi.threads, hi.pools, hi.engines⟩, hp.keep (Keeps.frame (by rfl) (fun _ => by rfl)), h⟩
  | f + 1, m, b, hi, hp, h => by
    simp only [admitWaiting]
    split
    · exact ⟨hi, hp, h⟩
    · next hc =>
      split
      · exact ⟨hi, hp, h⟩
      · next i hfq =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hfq
        rw [Nat.sub_zero] at hq
        split
        · have hj : select p m i (getPool m.pools i).queue < countWaiters (getPool m.pools i).queue := by
            rw [hq]; exact select_lt p m i w ws
          have hb : b.budget ≠ 0 := by
            intro e; apply hc; simp [e]
          exact admitWaiting_serveInv p s hpre hgrow hnt c B gated f _ _
            (admitOne_inv p f s c i _ none m b hi (fun k hk => absurd hk (hnt k))).1
            (hp.keep (admitOne_keeps p hpre f s c i _ none m b hj))
            (admitOne_serveInv p s hgrow f c B i _ m b hj hb hi hp h)
        · exact ⟨hi, hp, h⟩

end Serq.Kernel
