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
(`Serq.KernelDistinct`, preemption included), hold at every point of every run, so `full_or_short`
holds for every run of a program with `DistinctProgram`, `NoGrowth`, a constant budget, no `only` on
either statement, no granule and a cost that is not 0 for tokens (`runProgram_full_or_short_admitting`), whether
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

/-- No `only` on `admit waiting`, no granule and no growing run on `s` (so `s` preempts no one): the admission of
the hold at `j` of pool `i`'s queue keeps `ServeInv` over every resident of engine `s` (the admitted
thread's resident, if its run started one, is served at once its whole demand or the whole budget left). -/
theorem admitOne_serveInv {g : Nat} (p : Program) (s : Nat) (hgrow : NoGrowth p s) (f c B i j : Nat) (m : Machine) (b : Batch)
    (hj : j < countWaiters (getPool m.pools i).queue) (hb : b.budget ≠ 0) (hinv : Inv p m) (hpl : Placed g m)
    (h : ServeInv c B [] (getEngineState m.engines s).residents b) :
    ServeInv c B [] (getEngineState (admitOne p f s c i j none m b).1.engines s).residents
      (admitOne p f s c i j none m b).2 := by
  have hwt := admitWaiter_not_resident (g := g) p m (admissionStage c b.budget) i j s hj hpl
  have hs1 := Machine.admitWaiter_serial p m (admissionStage c b.budget) i j hj hpl.1
  have hinv1 := Machine.admitWaiter_inv p m (admissionStage c b.budget) i j hinv
  have hinv2 := exec_inv p f _ _ hinv1 (hinv1.threads.get (getWaiter (getPool m.pools i).queue j).thread)
  have hpl2 : Placed g (exec p f (m.admitWaiter p (admissionStage c b.budget) i j)
      (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread)) :=
    hpl.keep (Keeps.take p f _ (Machine.admitWaiter_serial p m _ i j hj) (fun _ t => Machine.admitWaiter_placed p m _ i j hj t))
  have hadds : AddsOnly (getWaiter (getPool m.pools i).queue j).thread (getEngineState m.engines s).residents
      (getEngineState (exec p f (m.admitWaiter p (admissionStage c b.budget) i j)
        (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads
          (getWaiter (getPool m.pools i).queue j).thread)).engines s).residents := by
    rcases hs1.1 (getWaiter (getPool m.pools i).queue j).thread with ⟨e, _⟩ | e
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
theorem admitWaiting_serveInv {g : Nat} (p : Program) (s : Nat) (hgrow : NoGrowth p s)
    (hnt : ∀ k, ¬TiledProgram p s k) (c B : Nat) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), Inv p m → Placed g m → ServeInv c B [] (getEngineState m.engines s).residents b →
      Inv p (admitWaiting p s c none gated f m b).1 ∧ Placed g (admitWaiting p s c none gated f m b).1 ∧
        ServeInv c B [] (getEngineState (admitWaiting p s c none gated f m b).1.engines s).residents
          (admitWaiting p s c none gated f m b).2
  | 0, m, b, hi, hp, h => ⟨⟨hi.threads, hi.pools, hi.engines⟩, hp.keep (Keeps.frame (fun h => by exact h) (fun _ => by rfl)), h⟩
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
          exact admitWaiting_serveInv p s hgrow hnt c B gated f _ _
            (admitOne_inv p f s c i _ none m b hi (fun k hk => absurd hk (hnt k))).1
            (hp.keep (admitOne_keeps p f s c i _ none m b hj))
            (admitOne_serveInv p s hgrow f c B i _ m b hj hb hi hp h)
        · exact ⟨hi, hp, h⟩

/-- With no RAD tiling on `s` (`hnt`), the
batch of `b` has the invariants the provenance needs (`BOk`). -/
theorem bok_of_untiled {p : Program} {s : Nat} (hnt : ∀ k, ¬TiledProgram p s k) (b : Batch) : BOk p s b :=
  fun k hk => absurd hk (hnt k)

/-- A stage whose engine has no granule is not tiled (RAD's hypotheses need a granule `g ≠ 0`). -/
theorem not_tiled_of_granule0 {p : Program} {s e : Nat} (hs : getService p.stages s = .step e)
    (hg : (getEngine p.engines e).granule = .num 0) : ∀ k, ¬TiledProgram p s k := by
  intro k hk
  have h1 := hk.granule e hs
  rw [hg] at h1
  cases h1
  exact hk.pos rfl

/-! ### The plan of one iteration, admissions included -/

/-- The plan of an iteration (the serving, then `admit waiting` without `only`), from `PlanReady` with a
constant budget `B`, no `only` on the serving, no granule, no growing run on `s`, and the
invariants `Inv` and `Placed`: `ServeInv` holds at its end, over every resident, admitted ones included. -/
theorem plan_serveInv_admitting {g : Nat} (p : Program) (s c B f : Nat) (m : Machine) (running : List Nat)
    (keys : List Expr) (gated : Bool) (hgrow : NoGrowth p s)
    (hnt : ∀ k, ¬TiledProgram p s k) (hr : PlanReady m s) (hi : Inv p m) (hp : Placed g m) :
    ServeInv c B []
      (getEngineState (admitWaiting p s c none gated f
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys (getEngineState m.engines s).residents).1
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys
          (getEngineState m.engines s).residents).2).1.engines s).residents
      (admitWaiting p s c none gated f
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys (getEngineState m.engines s).residents).1
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys
          (getEngineState m.engines s).residents).2).2 :=
  (admitWaiting_serveInv p s hgrow hnt c B gated f _ _
    (serveOrdered_inv p s m running c none _ keys _ hi (bok_of_untiled hnt _)).1
    (hp.keep (serveOrdered_keeps p s m running c none _ keys _))
    (serveOrdered_full p s m running c B keys hr)).2.2

/-- `full_or_short` for one iteration of an engine that may admit its own queue: engine `s` (of clauses
`eng`) plans an iteration with a constant `tokens cap B`, no `only` on `advance running` nor on `admit
waiting`, no granule, from `PlanReady`, in a program with no growing run on `s`, the
machine satisfying the provenance invariant `Inv` and `Placed`; the record it keeps, if any, has
`tokens = B` or `demand < B`, and the older records stay. -/
theorem startIteration_full_or_short_admitting {g : Nat} (p : Program) (f s : Nat) (eng : Engine) (m : Machine)
    (B : Nat) (hB : eng.budget = .num B) (hq : eng.serveOnly = none) (hadm : eng.admitOnly = none)
    (hg : eng.granule = .num 0) (hgrow : NoGrowth p s)
    (hnt : ∀ k, ¬TiledProgram p s k) (hr : PlanReady m s) (hi : Inv p m) (hp : Placed g m) :
    NewRecordsFull B (getEngineState m.engines s).records
      (getEngineState (startIteration p f s eng m).engines s).records := by
  simp only [startIteration, hB, hq, hadm, hg, eval]
  split
  · exact Or.inl (by simp only [admitWaiting_records, serveOrdered_records])
  · split
    · exact Or.inl (by simp only [admitWaiting_records, serveOrdered_records])
    · simp only [Machine.setTimer_engines]
      apply NewRecordsFull.of_set
      · simp only [admitWaiting_records, serveOrdered_records]
      · refine ⟨_, rfl, ?_⟩
        exact ServeInv.full (plan_serveInv_admitting p s _ B f m _ eng.order _ hgrow hnt hr hi hp)

/-- An iteration that schedules tokens lasts some time: the engine's cost (`execute`, read with
`batch.tokens` its first context variable) is not 0 when the tokens are not (a cost of 0 for tokens is the
program's run-time error, which leaves the engine idle with its residents as planned). Weaker than
`KernelFullRun`'s hypothesis that the cost is never 0 (`CostPos.of_ne`): `bari_rate.sq`'s
`a * ceil(batch.tokens / T) + b * batch.tokens` is 0 for no tokens. -/
def CostPos (cost : Expr) : Prop :=
  ∀ (v : PoolView) (now t : Nat) (rest : List Nat), v.stage = t :: rest → t ≠ 0 → eval v [] now 0 cost ≠ 0

theorem CostPos.of_ne (cost : Expr) (h : ∀ (v : PoolView) (now : Nat), eval v [] now 0 cost ≠ 0) : CostPos cost :=
  fun v now _ _ _ _ => h v now

/-- Engine `s`'s own iteration, with the hypotheses of `startIteration_full_or_short_admitting` and a cost
that is not 0 for tokens, leaves it busy, or idle with nothing scheduled. -/
theorem startIteration_idleClear_admitting {g : Nat} (p : Program) (f s : Nat) (eng : Engine) (m : Machine)
    (B : Nat) (hB : eng.budget = .num B) (hq : eng.serveOnly = none) (hadm : eng.admitOnly = none)
    (hg : eng.granule = .num 0) (hgrow : NoGrowth p s)
    (hnt : ∀ k, ¬TiledProgram p s k) (hcost : CostPos eng.cost)
    (hr : PlanReady m s) (hi : Inv p m) (hp : Placed g m) : IdleClear s (startIteration p f s eng m) := by
  have key := fun running c =>
    plan_serveInv_admitting p s c B f m running eng.order eng.admitGated hgrow hnt hr hi hp
  simp only [startIteration, hB, hq, hadm, hg, eval]
  split
  · next hc =>
    intro _ r hr'
    simp only [Bool.and_eq_true, decide_eq_true_eq] at hc
    exact sumSched_eq_zero _ (by rw [← (key _ _).sum]; exact hc.1) r hr'
  · split
    · next hc2 =>
      exfalso
      simp only [Bool.and_eq_true, decide_eq_true_eq, bne_iff_ne, ne_eq] at hc2
      exact hcost _ _ _ _ rfl hc2.2 hc2.1
    · intro hb
      simp only [Machine.setTimer_engines] at hb ⊢
      unfold SchedClear
      rcases getEngineState_setEngineState_or _ s _ with e | e
      · rw [e] at hb
        simp at hb
      · rw [e]
        intro r hr'
        simp at hr'

/-! ### Every run of a program whose engine admits its own queue -/

/-- The run's invariant: nothing scheduled on an idle engine `s`, statement provenance (and the records'
tiles), no thread placed twice. -/
def AdmitOk (p : Program) (s : Nat) (m : Machine) : Prop := IdleClear s m ∧ RunOk p m ∧ Placed p.gap m

theorem AdmitOk.planReady {p : Program} {s : Nat} {m : Machine} (hgrow : NoGrowth p s) (h : AdmitOk p s m)
    (hb : (getEngineState m.engines s).busy = false) : PlanReady m s :=
  ⟨fun r hr => ⟨h.1 hb r hr, h.2.1.1.grow0 hgrow r hr⟩, h.2.2.distinct s⟩

/-- `AdmitOk` is a `FullInvariant` of every program with `DistinctProgram` and no growing run on `s`, whose
stage `s` is engine `e` with a constant budget, no `only` on either statement, no granule and a cost that
is not 0 for tokens (`CostPos`). -/
theorem AdmitOk.fullInvariant (p : Program) (s e B : Nat) (hp : DistinctProgram p) (hgrow : NoGrowth p s)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hadm : (getEngine p.engines e).admitOnly = none)
    (hg : (getEngine p.engines e).granule = .num 0)
    (hcost : CostPos (getEngine p.engines e).cost) :
    FullInvariant p s (AdmitOk p s) := by
  have hR := RestInvariant.of_distinct p s (Placed p.gap) hgrow (Placed.distinctInvariant p s hp)
  refine ⟨⟨initial_idleClear p s, hR.initial⟩, fun f m h => ⟨settle_idleClear p f m s h.1, hR.settle f m h.2⟩,
    fun m t tm ts he h => ⟨fire_idleClear p _ _ s h.1, hR.fire m t tm ts he h.2⟩, ?_, fun m h => ⟨h.1, hR.fuel m h.2⟩,
    fun m h hb => h.planReady hgrow hb⟩
  intro f i e' m hi hb h
  refine ⟨?_, hR.start f i e' m hi hb h.2⟩
  by_cases his : i = s
  · subst his
    rw [hs] at hi
    cases hi
    exact startIteration_idleClear_admitting p f i _ m B hB hq hadm hg hgrow
      (not_tiled_of_granule0 hs hg) hcost (h.planReady hgrow hb) h.2.1.1 h.2.2
  · exact startIteration_idleClear_ne his p f _ m h.1

/-- `full_or_short` (vLLM's, issue 13) for every run of every program with no renewal gap beside a trace
(`DistinctProgram`; other engines may preempt) and no growing run on stage `s` (`NoGrowth`), whose stage `s` is
engine `e` with a constant `tokens cap B`, no `only` on `advance running` nor on `admit waiting`, no
granule and a cost that is not 0 for tokens (`CostPos`), whether or not the engine admits a pool's queue (`pool reqs on S`):
every record of stage `s` has `tokens = B` or `demand < B`. -/
theorem runProgram_full_or_short_admitting (p : Program) (fuel s e B : Nat) (hp : DistinctProgram p)
    (hgrow : NoGrowth p s) (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hadm : (getEngine p.engines e).admitOnly = none)
    (hg : (getEngine p.engines e).granule = .num 0)
    (hcost : CostPos (getEngine p.engines e).cost) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens = B ∨ r.demand < B :=
  runProgram_full_or_short_of_step p s e B (AdmitOk p s)
    (AdmitOk.fullInvariant p s e B hp hgrow hs hB hq hadm hg hcost) hs
    (fun f m h hb => startIteration_full_or_short_admitting p f s _ m B hB hq hadm hg hgrow
      (not_tiled_of_granule0 hs hg) (h.planReady hgrow hb) h.2.1.1 h.2.2) fuel

end Serq.Kernel
