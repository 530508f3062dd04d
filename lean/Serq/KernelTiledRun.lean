module

public import Serq.KernelProvenance
public import Serq.KernelFullRun

/-! # Statement provenance and RAD's tiling through every run

`Serq.KernelProvenance` defines the machine invariant `Inv` (every frame of every thread's
continuation, every waiting hold and every hold a frame will release or a preemption requeue is the
program's statements; every resident carries one of the program's run statements) and proves it kept
by a thread's run, the settling of an instant and an iteration's serving and admissions. This module
carries it, with the records' tiles (`RecOk`), through an iteration's start and end and the event loop
(`runProgram_ok`), and states the theorems:

* `runProgram_provenance`: statement provenance at the end of every run (and, `Inv` being kept by every
  function of the machine, at every point of it);
* `runProgram_tiled_prefills`: RAD's optimal tiling (Bari et al. §4.2; issue 14, result 4) for every
  run of every program with `TiledProgram p s g`;
* `TiledProgram.of_check`: the hypothesis from checks the kernel decides on a program's value;
* `RestInvariant.of_distinct` (`Serq.KernelFull`'s open item): for a program with no growing run on the
  engine (`NoGrowth`, decided by `NoGrowth.of_check`), the `grow = 0` half of `RestInvariant` holds for
  every run, so what is left of `runProgram_full_or_short` is an invariant giving `threadsDistinct`
  (`runProgram_full_or_short_of_distinct`).
-/
@[expose] public section

namespace Serq.Kernel

/-! ### An iteration, its end, the event loop -/

/-- The machine invariant and the records' tiles. -/
def RunOk (p : Program) (m : Machine) : Prop := Inv p m ∧ RecOk p m

theorem RecOk.of_records {p : Program} {m m' : Machine}
    (h : ∀ j, (getEngineState m'.engines j).records = (getEngineState m.engines j).records) (hm : RecOk p m) :
    RecOk p m' := by
  intro j g hg r hr
  rw [h j] at hr
  exact hm j g hg r hr

theorem startIteration_ok (p : Program) (f s e : Nat) (m : Machine) (hs : getService p.stages s = .step e)
    (hm : RunOk p m) : RunOk p (startIteration p f s (getEngine p.engines e) m) := by
  have hb0 : ∀ (v : PoolView) (budget : Nat),
      BOk p s ⟨budget, 0, 0, 0, 0, eval v [] m.now 0 (getEngine p.engines e).granule, false⟩ := by
    intro v budget g hg
    rw [hg.granule e hs]
    exact ⟨rfl, Nat.zero_mod g⟩
  have hplan := fun (v : PoolView) (budget : Nat) (running : List Nat) (chunk : Nat) =>
    admitWaiting_inv p s chunk (getEngine p.engines e).admitOnly (getEngine p.engines e).admitGated f _ _
      (serveOrdered_inv p s m running chunk (getEngine p.engines e).serveOnly _ (getEngine p.engines e).order
        (getEngineState m.engines s).residents hm.1 (hb0 v budget)).1
      (serveOrdered_inv p s m running chunk (getEngine p.engines e).serveOnly _ (getEngine p.engines e).order
        (getEngineState m.engines s).residents hm.1 (hb0 v budget)).2
  have hrec : ∀ j, ∀ (c : Nat) (q : Option Expr) (g : Bool) (running : List Nat) (b : Batch),
      (getEngineState (admitWaiting p s c q g f (serveOrdered p s m running c (getEngine p.engines e).serveOnly b
        (getEngine p.engines e).order (getEngineState m.engines s).residents).1
        (serveOrdered p s m running c (getEngine p.engines e).serveOnly b
        (getEngine p.engines e).order (getEngineState m.engines s).residents).2).1.engines j).records =
        (getEngineState m.engines j).records := by
    intro j c q g running b
    rw [admitWaiting_records, serveOrdered_records]
  simp only [startIteration]
  split
  · exact ⟨(hplan _ _ _ _).1, RecOk.of_records (fun j => hrec j _ _ _ _ _) hm.2⟩
  · split
    · exact ⟨⟨(hplan _ _ _ _).1.threads, (hplan _ _ _ _).1.pools, (hplan _ _ _ _).1.engines⟩,
        RecOk.of_records (fun j => hrec j _ _ _ _ _) hm.2⟩
    · refine ⟨⟨(hplan _ _ _ _).1.threads, (hplan _ _ _ _).1.pools,
        (hplan _ _ _ _).1.engines.set s (fun r hr => (hplan _ _ _ _).1.engines s r hr)⟩, ?_⟩
      intro j g hg r hr
      simp only [Machine.setTimer_engines] at hr
      by_cases hj : s = j
      · subst hj
        rcases getEngineState_setEngineState_self _ s _ with e' | e' <;> rw [e'] at hr
        · simp only [List.mem_cons] at hr
          rcases hr with hr | hr
          · rw [hr]
            exact ((hplan _ _ _ _).2 g hg).2
          · rw [hrec] at hr
            exact hm.2 s g hg r hr
        · rw [hrec] at hr
          exact hm.2 s g hg r hr
      · rw [getEngineState_setEngineState_ne _ _ _ _ hj, hrec] at hr
        exact hm.2 j g hg r hr

theorem Machine.advanceHolds_inv (p : Program) : ∀ (rs : List Resident) (m : Machine), Inv p m → Inv p (m.advanceHolds rs)
  | [], m, hm => hm
  | r :: rs, m, hm => by
    simp only [Machine.advanceHolds]
    split
    all_goals first
      | exact Machine.advanceHolds_inv p rs m hm
      | exact Machine.advanceHolds_inv p rs _ (hm.put (advancePart_kok _ _ _ (hm.threads.get _)))

theorem fire_inv (p : Program) (m : Machine) (w : Wake) (hm : Inv p m) : Inv p (fire p m w) := by
  cases w with
  | resume t => exact ⟨hm.threads, hm.pools, hm.engines⟩
  | arrival a =>
    simp only [fire]
    split
    · exact ⟨hm.threads, hm.pools, hm.engines⟩
    · exact ⟨hm.threads, hm.pools, hm.engines⟩
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact hm
    · exact ⟨hm.threads.set _ (hm.threads.get t), PoolsOk.of_queues (endLease_queues ..) hm.pools, hm.engines⟩
  | fifoDone s' t =>
    simp only [fire]
    split
    · exact ⟨hm.threads, hm.pools, hm.engines⟩
    · exact ⟨hm.threads, hm.pools, hm.engines⟩
  | iterationEnd s' =>
    simp only [fire]
    have ha := Machine.advanceHolds_inv p (getEngineState m.engines s').residents m hm
    refine ⟨ha.threads, ha.pools, ha.engines.set s' ?_⟩
    intro r hr
    obtain ⟨y, hy, e⟩ := mem_applyTokens _ _ _ _ r hr
    have hyok := hm.engines s' y hy
    rcases e with e | e <;> rw [e]
    · exact hyok
    · exact ⟨hyok.1, fun g hg hd => ⟨rem_sub_tiled _ _ _ (hyok.2 g hg hd).1 (hyok.2 g hg hd).2, Nat.zero_mod g⟩⟩

theorem settle_ok (p : Program) (f : Nat) (m : Machine) (hm : RunOk p m) : RunOk p (settle p f m) :=
  ⟨settle_inv p f m hm.1, RecOk.of_records (settle_records p f m) hm.2⟩

theorem startPass_ok (p : Program) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s + k)) → RunOk p m → RunOk p (startPass p f ss s tried m a).1 := by
  fun_induction startPass p f ss s tried m a <;> intro hss hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (apply settle_ok
       refine startIteration_ok p _ _ _ _ ?_ hm
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)
    | (rename_i ih
       apply ih (getService_tail hss)
       apply settle_ok
       refine startIteration_ok p _ _ _ _ ?_ hm
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)

theorem startEngines_ok (p : Program) (f n : Nat) (tried : List Nat) (m : Machine) :
    RunOk p m → RunOk p (startEngines p f n tried m) := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPass_ok p _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact ih (startPass_ok p _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm))

theorem endOfInstant_ok (p : Program) (f : Nat) (m : Machine) (hm : RunOk p m) : RunOk p (endOfInstant p f m) := by
  simp only [endOfInstant]
  split
  · exact hm
  · exact startEngines_ok p _ _ _ _ hm

theorem loop_ok (p : Program) (f : Nat) (m : Machine) : RunOk p m → RunOk p (loop p f m) := by
  fun_induction loop p f m <;> intro hm
  · exact ⟨⟨hm.1.threads, hm.1.pools, hm.1.engines⟩, RecOk.of_records (fun _ => rfl) hm.2⟩
  · exact hm
  · rename_i ih
    apply ih
    apply endOfInstant_ok
    apply settle_ok
    exact ⟨fire_inv p _ _ ⟨hm.1.threads, hm.1.pools, hm.1.engines⟩,
      RecOk.of_records (fun j => by rw [fire_records]) (RecOk.of_records (fun _ => rfl) hm.2)⟩

theorem arrivals_ok (p : Program) : ∀ (n serial : Nat), ThreadsOk p (arrivals p n serial)
  | 0, _ => fun _ h => by simp [arrivals] at h
  | n + 1, serial => by
    intro th h
    simp only [arrivals, List.mem_cons] at h
    rcases h with h | h
    · rw [h]
      exact KOk.cons (fun x hx => .init hx) (KOk.cons (fun x hx => .session hx) (KOk.nil p))
    · exact arrivals_ok p n (serial + 1) th h

theorem emptyPools_ok (p : Program) : ∀ (cs : List Nat), PoolsOk p (emptyPools cs)
  | [] => fun _ h => by simp [emptyPools] at h
  | c :: cs => by
    intro q h
    simp only [emptyPools, List.mem_cons] at h
    rcases h with h | h
    · rw [h]; intro w hw; simp at hw
    · exact emptyPools_ok p cs q h

theorem initial_ok (p : Program) : RunOk p (initial p) := by
  have he : (initial p).engines = idleEngines p.stages := by
    unfold initial; dsimp only; split <;> rfl
  have ht : (initial p).threads = arrivals p p.sessions 0 := by
    unfold initial; dsimp only; split <;> rfl
  have hp : (initial p).pools = emptyPools p.caps := by
    unfold initial; dsimp only; split <;> rfl
  refine ⟨⟨ht ▸ arrivals_ok p _ _, hp ▸ emptyPools_ok p _, ?_⟩, ?_⟩
  · intro j r hr
    rw [he, getEngineState_idleEngines_residents] at hr
    cases hr
  · intro j g _ r hr
    rw [he, getEngineState_idleEngines_records] at hr
    cases hr

theorem runProgram_ok (p : Program) (fuel : Nat) : RunOk p (runProgram p fuel) := by
  unfold runProgram
  exact loop_ok p _ _ (endOfInstant_ok p _ _ (settle_ok p _ _ (initial_ok p)))

/-! ### The theorems -/

/-- Statement provenance, for every program and any fuel: at the end of the run (and, `Inv` being kept
by every function of the machine, at every point of it) every frame of every thread's continuation is
the program's statements or the machine's bookkeeping (`FrameOk`: `Frame.stmts` of the program's
statements, `Frame.submit`, `Frame.answer`, `Frame.release` of a hold whose body is the program's),
every hold waiting in a pool's queue has a body of the program's statements, and every resident of
every engine stage `j` carries the `decode` and `grow` of one of the program's run statements on `j`. -/
theorem runProgram_provenance (p : Program) (fuel : Nat) :
    (∀ th ∈ (runProgram p fuel).threads, ∀ fr ∈ th.k, FrameOk p fr) ∧
    (∀ q ∈ (runProgram p fuel).pools, ∀ w ∈ q.queue, ∀ st ∈ w.body, ProgStmt p st) ∧
    (∀ j, ∀ r ∈ (getEngineState (runProgram p fuel).engines j).residents,
      ∃ w, ProgStmt p (.step j r.decode r.grow w)) := by
  have h := (runProgram_ok p fuel).1
  exact ⟨h.threads, h.pools, fun j r hr => (h.engines j r hr).1⟩

/-- RAD's optimal tiling for every run (Bari et al. §4.2; issue 14, result 4): for every program whose
engine stage `s` has the constant granule `g > 0` and whose every prefill run statement on `s` has
work `g * e` (`TiledProgram p s g`), and any fuel, every prefill resident of `s` has its remainder and
its scheduled tokens whole granules, and every iteration record of `s` has `prefilled % g = 0`. -/
theorem runProgram_tiled_prefills (p : Program) (fuel s g : Nat) (h : TiledProgram p s g) :
    (∀ r ∈ (getEngineState (runProgram p fuel).engines s).residents, r.decode = false →
      r.rem % g = 0 ∧ r.sched % g = 0) ∧
    (∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.prefilled % g = 0) := by
  have hok := runProgram_ok p fuel
  exact ⟨fun r hr hd => (hok.1.engines s r hr).2 g h hd, hok.2 s g h⟩

/-! ### Deciding a hypothesis on every statement of a program -/

mutual
/-- `c` holds of the statement and of every statement in its bodies. -/
def Stmt.allSub (c : Stmt → Bool) : Stmt → Bool
  | .branch t y n => c (.branch t y n) && Stmt.allBlock c y && Stmt.allBlock c n
  | .while t b => c (.while t b) && Stmt.allBlock c b
  | .loop b => c (.loop b) && Stmt.allBlock c b
  | .hold on r ca b => c (.hold on r ca b) && Stmt.allBlock c b
  | .turn => c .turn
  | .set i e => c (.set i e)
  | .observe k e => c (.observe k e)
  | .stop => c .stop
  | .run s w => c (.run s w)
  | .release i => c (.release i)
  | .step s d g w => c (.step s d g w)
  | .grow i e => c (.grow i e)
/-- `c` holds of every statement of the list and of their bodies. -/
def Stmt.allBlock (c : Stmt → Bool) : List Stmt → Bool
  | [] => true
  | st :: rest => Stmt.allSub c st && Stmt.allBlock c rest
end

/-- `c` holds of every statement of the program. -/
def Program.allStmts (c : Stmt → Bool) (p : Program) : Bool :=
  Stmt.allBlock c p.init && Stmt.allBlock c p.turnBlock && Stmt.allBlock c p.session && Stmt.allBlock c p.server

theorem Stmt.allBlock_mem (c : Stmt → Bool) : ∀ (b : List Stmt), Stmt.allBlock c b = true → ∀ st ∈ b, Stmt.allSub c st = true
  | [], _, _, hst => by simp at hst
  | x :: xs, h, st, hst => by
    simp only [Stmt.allBlock, Bool.and_eq_true] at h
    simp only [List.mem_cons] at hst
    rcases hst with hst | hst
    · rw [hst]; exact h.1
    · exact Stmt.allBlock_mem c xs h.2 st hst

theorem Stmt.allSub_self (c : Stmt → Bool) (st : Stmt) (h : Stmt.allSub c st = true) : c st = true := by
  cases st <;> simp only [Stmt.allSub, Bool.and_eq_true] at h <;> first | exact h | exact h.1 | exact h.1.1

theorem Program.allStmts_sound (c : Stmt → Bool) (p : Program) (hp : p.allStmts c = true) :
    ∀ st, ProgStmt p st → Stmt.allSub c st = true := by
  simp only [Program.allStmts, Bool.and_eq_true] at hp
  intro st h
  induction h with
  | init h => exact Stmt.allBlock_mem c _ hp.1.1.1 _ h
  | turnBlock h => exact Stmt.allBlock_mem c _ hp.1.1.2 _ h
  | session h => exact Stmt.allBlock_mem c _ hp.1.2 _ h
  | server h => exact Stmt.allBlock_mem c _ hp.2 _ h
  | branchYes _ h ih =>
    simp only [Stmt.allSub, Bool.and_eq_true] at ih
    exact Stmt.allBlock_mem c _ ih.1.2 _ h
  | branchNo _ h ih =>
    simp only [Stmt.allSub, Bool.and_eq_true] at ih
    exact Stmt.allBlock_mem c _ ih.2 _ h
  | whileBody _ h ih =>
    simp only [Stmt.allSub, Bool.and_eq_true] at ih
    exact Stmt.allBlock_mem c _ ih.2 _ h
  | loopBody _ h ih =>
    simp only [Stmt.allSub, Bool.and_eq_true] at ih
    exact Stmt.allBlock_mem c _ ih.2 _ h
  | holdBody _ h ih =>
    simp only [Stmt.allSub, Bool.and_eq_true] at ih
    exact Stmt.allBlock_mem c _ ih.2 _ h

/-- The work is `g * e` (`.bin .mul (.num g) e`). -/
def Expr.tiledBy (g : Nat) : Expr → Bool
  | .bin .mul (.num g') _ => g' == g
  | _ => false

theorem Expr.tiledBy_eq (g : Nat) (w : Expr) (h : w.tiledBy g = true) : ∃ e, w = .bin .mul (.num g) e := by
  cases w with
  | bin op l r =>
    cases op <;> simp [Expr.tiledBy] at h
    cases l <;> simp at h
    subst h
    exact ⟨r, rfl⟩
  | _ => simp [Expr.tiledBy] at h

/-- A prefill run statement on stage `s` has work `g * e`: the check `TiledProgram.works` reads. -/
def prefillTiled (s g : Nat) : Stmt → Bool
  | .step s' false _ w => s' != s || w.tiledBy g
  | _ => true

theorem works_of_allStmts (p : Program) (s g : Nat) (hp : p.allStmts (prefillTiled s g) = true) :
    ∀ gr w, ProgStmt p (.step s false gr w) → ∃ e, w = .bin .mul (.num g) e := by
  intro gr w h
  have h1 := Stmt.allSub_self _ _ (Program.allStmts_sound _ p hp _ h)
  simp only [prefillTiled, bne_self_eq_false, Bool.false_or] at h1
  exact Expr.tiledBy_eq g w h1

/-- `TiledProgram` from checks a program's value decides: the granule and the stage's engine, and every
statement's work. -/
theorem TiledProgram.of_check (p : Program) (s e g : Nat) (hg : g ≠ 0) (hs : getService p.stages s = .step e)
    (hgran : (getEngine p.engines e).granule = .num g) (hp : p.allStmts (prefillTiled s g) = true) :
    TiledProgram p s g :=
  ⟨hg, fun e' he' => by rw [hs] at he'; cases he'; exact hgran, works_of_allStmts p s g hp⟩

/-! ### `full_or_short`: the `grow = 0` half of `RestInvariant` -/

/-- No run statement of the program on stage `s` grows a pool (`growing P`). -/
def NoGrowth (p : Program) (s : Nat) : Prop := ∀ dec gr w, ProgStmt p (.step s dec gr w) → gr = 0

/-- With no growing run on `s`, every resident of `s` grows nothing (it carries a run statement's `grow`). -/
theorem Inv.grow0 {p : Program} {m : Machine} {s : Nat} (hm : Inv p m) (h : NoGrowth p s) :
    ∀ r ∈ (getEngineState m.engines s).residents, r.grow = 0 := by
  intro r hr
  obtain ⟨w, hw⟩ := (hm.engines s r hr).1
  exact h _ _ _ hw

/-- A run statement on stage `s` grows nothing. -/
def noGrowthOn (s : Nat) : Stmt → Bool
  | .step s' _ gr _ => s' != s || gr == 0
  | _ => true

theorem NoGrowth.of_check (p : Program) (s : Nat) (hp : p.allStmts (noGrowthOn s) = true) : NoGrowth p s := by
  intro dec gr w h
  have h1 := Stmt.allSub_self _ _ (Program.allStmts_sound _ p hp _ h)
  simp only [noGrowthOn, bne_self_eq_false, Bool.false_or, beq_iff_eq] at h1
  exact h1

/-- `RestInvariant`'s obligations on an invariant that gives only the other half, no thread twice a
resident of `s` when it is idle. -/
structure DistinctInvariant (p : Program) (s : Nat) (J : Machine → Prop) : Prop where
  initial : J (initial p)
  settle : ∀ f m, J m → J (settle p f m)
  fire : ∀ m t (tm : Timer) ts, m.timers = tm :: ts → J m → J (fire p { m with now := t, timers := ts } tm.wake)
  start : ∀ f i e m, getService p.stages i = .step e → (getEngineState m.engines i).busy = false → J m →
    J (startIteration p f i (getEngine p.engines e) m)
  fuel : ∀ m, J m → J { m with outOfFuel := true }
  ready : ∀ m, J m → (getEngineState m.engines s).busy = false → threadsDistinct (getEngineState m.engines s).residents

/-- For a program with no growing run on `s`, the provenance invariant gives the `grow = 0` half of
`RestInvariant`: with any invariant giving the other (`DistinctInvariant`), `RunOk p m ∧ J m` is one. -/
theorem RestInvariant.of_distinct (p : Program) (s : Nat) (J : Machine → Prop) (hg : NoGrowth p s)
    (hJ : DistinctInvariant p s J) : RestInvariant p s (fun m => RunOk p m ∧ J m) where
  initial := ⟨initial_ok p, hJ.initial⟩
  settle := fun f m h => ⟨settle_ok p f m h.1, hJ.settle f m h.2⟩
  fire := fun m t tm ts he h =>
    ⟨⟨fire_inv p _ _ ⟨h.1.1.threads, h.1.1.pools, h.1.1.engines⟩,
      RecOk.of_records (fun j => by rw [fire_records]) (RecOk.of_records (fun _ => rfl) h.1.2)⟩,
     hJ.fire m t tm ts he h.2⟩
  start := fun f i e m hi hb h => ⟨startIteration_ok p f i e m hi h.1, hJ.start f i e m hi hb h.2⟩
  fuel := fun m h => ⟨⟨⟨h.1.1.threads, h.1.1.pools, h.1.1.engines⟩, RecOk.of_records (fun _ => rfl) h.1.2⟩,
    hJ.fuel m h.2⟩
  ready := fun m h hb => ⟨h.1.1.grow0 hg, hJ.ready m h.2 hb⟩

/-- `full_or_short` for every run of a program with no growing run on the engine, given an invariant
that keeps no thread twice a resident (`DistinctInvariant`): every record of stage `s` (engine `e`: a
constant `tokens cap B`, no `only` on `advance running`, no granule, no pool admitted by it, a cost that
is never 0) has `tokens = B` or `demand < B`. -/
theorem runProgram_full_or_short_of_distinct (p : Program) (fuel s e B : Nat) (J : Machine → Prop)
    (hgrow : NoGrowth p s) (hJ : DistinctInvariant p s J)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hg : (getEngine p.engines e).granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1)
    (hcost : ∀ (v : PoolView) (now : Nat), eval v [] now 0 (getEngine p.engines e).cost ≠ 0) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens = B ∨ r.demand < B :=
  runProgram_full_or_short_of_rest p fuel s e B _ (RestInvariant.of_distinct p s J hgrow hJ) hs hB hq hg hvia hcost

end Serq.Kernel
