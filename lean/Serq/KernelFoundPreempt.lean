module

public import Serq.KernelFoundRun
public import Serq.KernelKvRun
public import Serq.KernelRequestsPreempt

/-! # Request conservation's "in some place" half with preemption (issue 14, result 6)

`Serq.KernelFoundRun` has what carries `Found` (every thread with something left to run is placed) through
the functions that do not preempt. This module adds the step preemption takes: a victim that `victimIn`
picks (a resident of the engine, holding the pool: `victimIn_resident`, `victimIn_part` via
`victimIn_partIn`, `abandonTo_some_of_partIn`) leaves the residents and its hold joins its first pool's
queue, so every thread is placed as often as before (`placed_requeue`, `occWaiters_requeue`) and `Kept`
holds (`Machine.preempt_kept`, `growPreempting_kept`, `Machine.serveOne_kept`), given that the hold names
an existing pool first. That is `StmtInv (fitsOf p)` (`Serq.KernelKvRun`: `FrameAll` reads a release
frame's hold; `fitsOf p` is `Fits`'s check), kept by every function of the machine for any check the
program's statements pass (`exec_stmt`, `settle_stmt`, `Machine.preempt_stmt`, and here `admitOne_stmt`,
`admitWaiting_stmt`, `startIteration_stmt`, `startPass_stmt`, `endOfInstant_stmt`, `initial_stmt`).
Without it a requeued hold could name a pool past the machine's list, and its thread would be in no place.

With it the serving (`serveIn_kept`, `serveOrdered_kept`), the admissions (`admitOne_kept`,
`admitWaiting_kept`), an iteration (`plan_finds`, `startIteration_finds`) and the event loop
(`startPass_finds`, `startEngines_finds`, `endOfInstant_finds`, `loop_finds`) keep `Found` under every
`preempt` mode, and the theorems follow: every thread with something left to run is placed at least once
at the end of every run that was not lost (`runProgram_found`), so, with `runProgram_placed`, exactly once
(`runProgram_placed_once`), under `DistinctProgram` and `FoundProgram` (`Fits`, and a trace with an arrival
per session), preemption included; and a session's open turn (submitted, not answered) is in exactly one
place (`runProgram_open_turn_placed`, with `TurnsOutside` for its turn half, preemption included: the turn
invariant with `RelInv`, `runProgram_reqP` of `Serq.KernelRequestsPreempt`, follows the prefix of a
continuation a preemption drops; the former statement, with `NoPreemption`, is
`runProgram_open_turn_placed_noPreemption`).
-/
@[expose] public section

namespace Serq.Kernel

variable {g : Nat}

/-- `Fits`'s check of a statement. -/
abbrev fitsOf (p : Program) : Stmt → Bool := fitsStmt (countNats p.caps) (countServices p.stages)

/-- Where `partIn` finds a part on pool `i`, `abandonTo` stops at a hold to requeue (the same test). -/
theorem abandonTo_some_of_partIn (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame) (h : Held), partIn k i = some h →
    ∃ w, (abandonTo blocks caps serial attrs now i ps k).2.1 = some w
  | _, [], _, e => by simp [partIn] at e
  | ps, .release held w :: k, h, e => by
    simp only [abandonTo]
    split
    · exact ⟨w, rfl⟩
    · next hc =>
      simp only [partIn] at e
      rw [if_neg hc] at e
      exact abandonTo_some_of_partIn blocks caps serial attrs now i _ k h e
  | ps, .stmts _ :: k, h, e => abandonTo_some_of_partIn blocks caps serial attrs now i ps k h e
  | ps, .submit :: k, h, e => abandonTo_some_of_partIn blocks caps serial attrs now i ps k h e
  | ps, .answer :: k, h, e => abandonTo_some_of_partIn blocks caps serial attrs now i ps k h e

theorem victimIn_partIn (p : Program) (m : Machine) (keys : List Expr) (i : Nat) :
    ∀ (rank : Nat) (best : Option (Nat × List Nat)) (rs : List Resident) (v : Nat),
    victimIn p m keys i rank best rs = some v →
    (∃ k, best = some (v, k)) ∨ ∃ h, partIn (getThread m.threads v).k i = some h
  | _, none, [], v, e => by simp [victimIn] at e
  | _, some (t, k), [], v, e => by
    simp only [victimIn, Option.some.injEq] at e
    subst e
    exact Or.inl ⟨k, rfl⟩
  | rank, best, r :: rs, v, e => by
    simp only [victimIn] at e
    split at e
    · exact victimIn_partIn p m keys i rank best rs v e
    · next h hh =>
      rcases victimIn_partIn p m keys i (rank + 1) _ rs v e with ⟨k, hk⟩ | hr
      · rcases ite_some_eq hk with e1 | e1
        · have e2 : r.thread = v := e1
          rw [← e2]
          exact Or.inr ⟨h, hh⟩
        · exact Or.inl ⟨k, e1⟩
      · exact Or.inr hr

/-- The victim `victimIn` picks holds the pool: a part on it not given back. -/
theorem victimIn_part {p : Program} {m : Machine} {keys : List Expr} {i v : Nat} {rs : List Resident}
    (h : victimIn p m keys i 0 none rs = some v) : ∃ h, partIn (getThread m.threads v).k i = some h := by
  rcases victimIn_partIn p m keys i 0 none rs v h with ⟨_, e⟩ | e
  · cases e
  · exact e

/-- The three ways a preemption puts a hold back in a queue add its thread once. -/
theorem occWaiters_requeue (t v : Nat) (hd : Bool) (c : Prop) [Decidable c] (w : Waiter) (ws : List Waiter)
    (tn : List Nat) (ths : List Thread) (now created serial : Nat) (hw : w.thread = v) :
    occWaiters t (if hd = true then w :: ws else if c then appendWaiter ws w
      else insertByCreation tn ths now created serial w ws) = occWaiters t ws + bump t v := by
  rw [← hw]
  split
  · simp only [occWaiters]; omega
  · split
    · exact occWaiters_append t w ws
    · exact occWaiters_insert t tn ths now created serial w ws

theorem occ_le_occEngines (t : Nat) : ∀ (l : List EngineState) (s : Nat),
    occ t (threadsOf (getEngineState l s).residents) ≤ occEngines t l
  | [], _ => by simp [getEngineState, threadsOf, occ]
  | _ :: _, 0 => by simp only [getEngineState, occEngines]; omega
  | _ :: l, s + 1 => by
    have := occ_le_occEngines t l s
    simp only [getEngineState, occEngines]
    omega

/-- A preemption's machine before its thread is written back: resident `v` out of engine `s`, the pools'
units as `ps` (their queues `m`'s), pool `f`'s queue with `v`'s hold added. Every thread is placed as
often as before: `v` left the residents and joined the queue. -/
theorem placed_requeue (m : Machine) (s v f : Nat) (ps : List PoolState) (ws : List Waiter) (gp : List Progress)
    (hps : ps.map PoolState.queue = m.pools.map PoolState.queue) (hf : f < ps.length)
    (hws : ∀ t, occWaiters t ws = occWaiters t (getPool ps f).queue + bump t v)
    (hv : v ∈ threadsOf (getEngineState m.engines s).residents) (t : Nat) :
    ({ m with
      engines := setEngineState m.engines s { getEngineState m.engines s with
        residents := removeResident v (getEngineState m.engines s).residents }
      pools := Serq.Kernel.setPool ps f { getPool ps f with queue := ws }
      progress := gp } : Machine).placed g t = m.placed g t := by
  have hslt : s < m.engines.length := by
    apply Nat.lt_of_not_le
    intro hle
    rw [getEngineState_of_le _ _ hle] at hv
    simp [threadsOf] at hv
  have e1 := occPools_set_eq t ps f { getPool ps f with queue := ws } hf
  have e2 := occPools_of_queues t _ _ hps
  have e3 := hws t
  have e4 := occEngines_set_eq t m.engines s { getEngineState m.engines s with
    residents := removeResident v (getEngineState m.engines s).residents } hslt
  have e5 := occ_removeResident t v _ hv
  simp only [Machine.placed]
  try simp only at e1 e4
  omega

/-- A preemption of a victim `victimIn` picks, whose release frames' holds name an existing pool first
(`FramesAll (fitsOf p)`), keeps every live thread placed: the victim leaves the residents and its hold
joins its first pool's queue (one of the machine's pools: `Shape`), every other thread is where it was. -/
theorem Machine.preempt_kept (p : Program) (s i v : Nat) (m : Machine) (b : Batch)
    (hv : v ∈ threadsOf (getEngineState m.engines s).residents)
    (hpart : ∃ h, partIn (getThread m.threads v).k i = some h)
    (hfr : FramesAll (fitsOf p) (getThread m.threads v).k) : Kept p g m (m.preempt p s i v b).1 := by
  obtain ⟨h0, hp0⟩ := hpart
  obtain ⟨w, hA⟩ := abandonTo_some_of_partIn p.blocks p.caps (getThread m.threads v).serial
    (getThread m.threads v).attrs m.now i m.pools _ h0 hp0
  have hw := (abandonTo_framesAll p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i
    m.pools _ hfr).2 w hA
  have hfw := Stmt.allSub_self _ _ hw
  have hqs := abandonTo_queues p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i
    m.pools (getThread m.threads v).k
  have hlen := length_of_queues hqs
  obtain ⟨h1, rest, hon⟩ : ∃ h1 rest, w.on = h1 :: rest := by
    cases e : w.on with
    | nil => simp [fitsOf, fitsStmt, e] at hfw
    | cons h1 rest => exact ⟨h1, rest, rfl⟩
  have hfw' : h1.pool < countNats p.caps := by
    simp only [fitsOf, fitsStmt, hon] at hfw
    simpa using hfw
  refine ⟨fun hl => ?_, fun ho hs hf => Or.inr ⟨?_, fun t ht => ?_⟩⟩
  · simp only [Machine.preempt, hA]
    exact hl
  · simp only [Machine.preempt, hA, hon]
    refine Shape.put ?_ _
    refine ⟨?_, hs.2.1, ?_, hs.2.2.2⟩
    · dsimp only
      rw [setPool_length, hlen]
      exact hs.1
    · dsimp only
      rw [setEngineState_length]
      exact hs.2.2.1
  · have hown := preempt_own p m i v m.pools w ho hA
    have hfP : h1.pool < (abandonTo p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i
        m.pools (getThread m.threads v).k).1.length := by
      rw [hlen, hs.1, ← countNats_length]
      exact hfw'
    have hpl : (m.preempt p s i v b).1.placed g t = m.placed g t := by
      simp only [Machine.preempt, hA, hon]
      rw [placed_put]
      refine placed_requeue m s v h1.pool _ _ _ hqs hfP ?_ hv t
      intro t'
      exact occWaiters_requeue t' v _ _ _ _ _ _ _ _ _ hown.1
    rw [hpl]
    by_cases htv : t = v
    · subst htv
      have a1 := occ_removeResident t t _ hv
      have a2 := occ_le_occEngines t m.engines s
      rw [bump_self] at a1
      simp only [Machine.placed]
      omega
    · have e : getThread (m.preempt p s i v b).1.threads t = getThread m.threads t := by
        simp only [Machine.preempt, hA, hon, Machine.put]
        exact getThread_setThread_ne _ _ _ _ (by rw [hown.2.1]; exact Ne.symm htv)
      rw [e] at ht
      exact hf t ht

/-- A growth that preempts until it fits keeps every live thread placed, while every release frame's hold
names an existing pool first. -/
theorem growPreempting_kept (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    StmtInv (fitsOf p) m → Kept p g m (growPreempting p s i want t f m b).1 := by
  fun_induction growPreempting p s i want t f m b <;> intro hm
  all_goals first
    | exact ⟨fun _ => Or.inl rfl, fun _ _ _ => Or.inl (Or.inl rfl)⟩
    | exact Kept.refl _
    | exact Machine.grown_kept p _ _ _ _ _
    | exact Machine.preempt_kept p _ _ _ _ _ (victimIn_resident ‹_›) (victimIn_part ‹_›) (hm.get _)
    | (rename_i ih
       exact (Machine.preempt_kept p _ _ _ _ _ (victimIn_resident ‹_›) (victimIn_part ‹_›) (hm.get _)).trans
         (Machine.preempt_keeps p _ _ _ _ _ (victimIn_resident ‹_›)) (ih (Machine.preempt_stmt p _ _ _ _ _ hm)))

/-- An engine serves a resident, preempting or not: every live thread stays placed, while every release
frame's hold names an existing pool first. -/
theorem Machine.serveOne_kept (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (hm : StmtInv (fitsOf p) m) : Kept p g m (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals try dsimp only
  all_goals first
    | exact Machine.served_kept m s b r n
    | exact (Machine.grown_kept p m _ _ _ _).trans (Machine.grown_keeps p m _ _ _ _) (Machine.served_kept _ s b r n)
    | exact Kept.refl m
    | exact (growPreempting_kept p s _ _ _ _ m b hm).trans (growPreempting_keeps p s _ _ _ _ m b)
        (Machine.served_kept _ s _ r n)
    | exact growPreempting_kept p s _ _ _ _ m b hm

theorem serveIn_kept (p : Program) (s chunk : Nat) (q : Option Expr) :
    ∀ (ts : List Nat) (m : Machine) (b : Batch), StmtInv (fitsOf p) m → Kept p g m (serveIn p s chunk q ts m b).1 := by
  intro ts
  induction ts with
  | nil => intro m b _; exact Kept.refl m
  | cons t ts ih =>
    intro m b hm
    simp only [serveIn]
    repeat' split
    all_goals first
      | exact Kept.refl _
      | exact ih _ _ hm
      | exact Machine.serveOne_kept p _ _ _ _ _ hm
      | exact (Machine.serveOne_kept p _ _ _ _ _ hm).trans (Machine.serveOne_keeps p _ _ _ _ _)
          (ih _ _ (Machine.serveOne_stmt p _ _ _ _ _ hm))

theorem serveOrdered_kept (p : Program) (s : Nat) (m : Machine) (running : List Nat) (chunk : Nat)
    (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident) (hm : StmtInv (fitsOf p) m) :
    Kept p g m (serveOrdered p s m running chunk q b keys rs).1 := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_kept p s chunk q _ m b hm

/-! ### The statements' check through an iteration and the run, for any check `c` -/

section
variable {c : Stmt → Bool}

theorem admitOne_stmt (p : Program) (hp : p.allStmts c = true) (f s chunk i j : Nat) (q : Option Expr) (m : Machine)
    (b : Batch) (hm : StmtInv c m) (hj : j < countWaiters (getPool m.pools i).queue) :
    StmtInv c (admitOne p f s chunk i j q m b).1 := by
  have h1 := Machine.admitWaiter_stmt p m (admissionStage chunk b.budget) i j hm hj
  have h2 := exec_stmt p hp f _ _ h1 (h1.get (getWaiter (getPool m.pools i).queue j).thread)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact Machine.serveOne_stmt p _ _ _ _ _ h2

theorem admitWaiting_stmt (p : Program) (hp : p.allStmts c = true) (s chunk : Nat) (q : Option Expr) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), StmtInv c m → StmtInv c (admitWaiting p s chunk q gated f m b).1
  | 0, m, _, hm => ⟨hm.1, hm.2⟩
  | f + 1, m, b, hm => by
    simp only [admitWaiting]
    split
    · exact hm
    · split
      · exact hm
      · next i hi =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
        rw [Nat.sub_zero] at hq
        split
        · have hj : select p m i (getPool m.pools i).queue < countWaiters (getPool m.pools i).queue := by
            rw [hq]; exact select_lt p m i w ws
          exact admitWaiting_stmt p hp s chunk q gated f _ _ (admitOne_stmt p hp f s chunk i _ q m b hm hj)
        · exact hm

theorem startIteration_stmt (p : Program) (hp : p.allStmts c = true) (f s : Nat) (eng : Engine) (m : Machine)
    (hm : StmtInv c m) : StmtInv c (startIteration p f s eng m) := by
  simp only [startIteration]
  repeat' split
  all_goals first
    | exact admitWaiting_stmt p hp _ _ _ _ _ _ _ (serveOrdered_stmt p _ _ _ _ _ _ _ _ hm)
    | (have h := admitWaiting_stmt p hp _ _ _ _ _ _ _ (serveOrdered_stmt p _ _ _ _ _ _ _ _ hm)
       exact ⟨h.1, h.2⟩)

theorem startPass_stmt (p : Program) (hp : p.allStmts c = true) (f : Nat) (ss : List Service) (s : Nat)
    (tried : List Nat) (m : Machine) (a : Bool) : StmtInv c m → StmtInv c (startPass p f ss s tried m a).1 := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_stmt p hp _ _ (startIteration_stmt p hp _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_stmt p hp _ _ (startIteration_stmt p hp _ _ _ _ hm)))

theorem endOfInstant_stmt (p : Program) (hp : p.allStmts c = true) (f : Nat) (m : Machine) (hm : StmtInv c m) :
    StmtInv c (endOfInstant p f m) := by
  have hse : ∀ n tried m', StmtInv c m' → StmtInv c (startEngines p f n tried m') := by
    intro n tried m'
    fun_induction startEngines p f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPass_stmt p hp _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPass_stmt p hp _ _ _ _ _ _ hm'))
  simp only [endOfInstant]
  split
  · exact hm
  · exact hse _ _ _ hm

theorem initial_stmt (p : Program) (hp : p.allStmts c = true) : StmtInv c (initial p) := by
  have ht : (initial p).threads = arrivals p p.sessions 0 := by
    unfold initial; dsimp only; split <;> rfl
  have hq : (initial p).pools = emptyPools p.caps := by
    unfold initial; dsimp only; split <;> rfl
  refine ⟨?_, ?_⟩
  · rw [ht]; exact arrivals_frames p hp _ _
  · rw [hq]
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

end

/-! ### Admissions, an iteration, the event loop, and the theorems (moved from `Serq.KernelFoundRun`, now
with preemption: every function keeps `StmtInv (fitsOf p)`, which `Fits p` gives at the run's start) -/

/-- An engine admits the hold at `j` of pool `i`'s queue: its thread leaves the queue and runs at once (it
ends placed, ended, or the run lost), then its run, if it started one, is served. -/
theorem admitOne_kept (p : Program) (hfit : Fits p) (f s chunk i j : Nat) (q : Option Expr)
    (m : Machine) (b : Batch) (hj : j < countWaiters (getPool m.pools i).queue) (hm : StmtInv (fitsOf p) m) :
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
  have h1' := Machine.admitWaiter_stmt p m (admissionStage chunk b.budget) i j hm hj
  have h2' := exec_stmt (c := fitsOf p) p hfit f _ _ h1' (h1'.get (getWaiter (getPool m.pools i).queue j).thread)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact hA
    | exact hA.trans_kept hK (Machine.serveOne_kept p _ _ _ _ _ h2')


theorem admitWaiting_kept (p : Program) (hfit : Fits p) (s c : Nat) (q : Option Expr) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), StmtInv (fitsOf p) m →
    (m.Lost → (admitWaiting p s c q gated f m b).1.Lost) ∧
    (Owned m → Inv p m → BOk p s b → Shape p m → Found g m →
      (admitWaiting p s c q gated f m b).1.Lost ∨ (Shape p (admitWaiting p s c q gated f m b).1 ∧
        Found g (admitWaiting p s c q gated f m b).1))
  | 0, m, _, _ => ⟨fun _ => Or.inl rfl, fun _ _ _ _ _ => Or.inl (Or.inl rfl)⟩
  | f + 1, m, b, hm => by
    simp only [admitWaiting]
    split
    · exact ⟨id, fun _ _ _ hs hf => Or.inr ⟨hs, hf⟩⟩
    · split
      · exact ⟨id, fun _ _ _ hs hf => Or.inr ⟨hs, hf⟩⟩
      · next i hi =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
        rw [Nat.sub_zero] at hq
        split
        · have hj : select p m i (getPool m.pools i).queue < countWaiters (getPool m.pools i).queue := by
            rw [hq]; exact select_lt p m i w ws
          have hA := admitOne_kept (g := g) p hfit f s c i _ q m b hj hm
          have hK := admitOne_keeps (g := g) p f s c i _ q m b hj
          have ih := admitWaiting_kept p hfit s c q gated f
            (admitOne p f s c i (select p m i (getPool m.pools i).queue) q m b).1
            (admitOne p f s c i (select p m i (getPool m.pools i).queue) q m b).2
            (admitOne_stmt p hfit f s c i _ q m b hm hj)
          refine ⟨fun h => ih.1 (hA.1 h), fun ho hv hb hs hf => ?_⟩
          rcases hA.2 ho hv hs hf with e | ⟨hs', hf'⟩
          · exact Or.inl (ih.1 e)
          · have hI := admitOne_inv p f s c i (select p m i (getPool m.pools i).queue) q m b hv hb
            exact ih.2 (hK.serial ho) hI.1 hI.2 hs' hf'
        · exact ⟨id, fun _ _ _ hs hf => Or.inr ⟨hs, hf⟩⟩


/-- An iteration's plan: the residents served, then the waiting admitted. -/
theorem plan_finds (p : Program) (hfit : Fits p) (f s : Nat) (m : Machine) (running : List Nat)
    (chunk : Nat) (only q : Option Expr) (gated : Bool) (b : Batch) (keys : List Expr) (rs : List Resident)
    (hm : StmtInv (fitsOf p) m) :
    (m.Lost → (admitWaiting p s chunk q gated f (serveOrdered p s m running chunk only b keys rs).1
      (serveOrdered p s m running chunk only b keys rs).2).1.Lost) ∧
    (Good p g m → BOk p s b → (admitWaiting p s chunk q gated f (serveOrdered p s m running chunk only b keys rs).1
      (serveOrdered p s m running chunk only b keys rs).2).1.Lost ∨
      Good p g (admitWaiting p s chunk q gated f (serveOrdered p s m running chunk only b keys rs).1
        (serveOrdered p s m running chunk only b keys rs).2).1) := by
  have hS := serveOrdered_kept (g := g) p s m running chunk only b keys rs hm
  have hSK := serveOrdered_keeps (g := g) p s m running chunk only b keys rs
  have hW := admitWaiting_kept (g := g) p hfit s chunk q gated f (serveOrdered p s m running chunk only b keys rs).1
    (serveOrdered p s m running chunk only b keys rs).2 (serveOrdered_stmt p s m running chunk only b keys rs hm)
  have hWK := admitWaiting_keeps (g := g) p s chunk q gated f (serveOrdered p s m running chunk only b keys rs).1
    (serveOrdered p s m running chunk only b keys rs).2
  refine ⟨fun h => hW.1 (hS.1 h), fun ⟨ho, hv, hs, hf⟩ hb => ?_⟩
  have hI := serveOrdered_inv p s m running chunk only b keys rs hv hb
  rcases hS.2 ho hs hf with e | ⟨hs1, hf1⟩
  · exact Or.inl (hW.1 e)
  · rcases hW.2 (hSK.serial ho) hI.1 hI.2 hs1 hf1 with e | ⟨hs2, hf2⟩
    · exact Or.inl e
    · exact Or.inr ⟨hWK.serial (hSK.serial ho), (admitWaiting_inv p s chunk q gated f _ _ hI.1 hI.2).1, hs2, hf2⟩


theorem startIteration_finds (p : Program) (hfit : Fits p) (f s e : Nat) (m : Machine)
    (hse : getService p.stages s = .step e) (hm : StmtInv (fitsOf p) m) : Finds p g m (startIteration p f s (getEngine p.engines e) m) := by
  have hb0 : ∀ (v : PoolView) (budget : Nat),
      BOk p s ⟨budget, 0, 0, 0, 0, eval v [] m.now 0 (getEngine p.engines e).granule, false⟩ := by
    intro v budget g' hg
    rw [hg.granule e hse]
    exact ⟨rfl, Nat.zero_mod g'⟩
  have hP := fun (v : PoolView) (budget : Nat) (running : List Nat) (chunk : Nat) =>
    plan_finds (g := g) p hfit f s m running chunk (getEngine p.engines e).serveOnly (getEngine p.engines e).admitOnly
      (getEngine p.engines e).admitGated ⟨budget, 0, 0, 0, 0, eval v [] m.now 0 (getEngine p.engines e).granule, false⟩
      (getEngine p.engines e).order (getEngineState m.engines s).residents hm
  simp only [startIteration]
  split
  · exact ⟨(hP _ _ _ _).1, fun hg => (hP _ _ _ _).2 hg (hb0 _ _)⟩
  · split
    · exact ⟨fun _ => Or.inr rfl, fun _ => Or.inl (Or.inr rfl)⟩
    · refine Finds.trans ?h1 (Finds.start_timer _ s _ ?hv _)
      case hv => rfl
      case h1 => exact ⟨(hP _ _ _ _).1, fun hg => (hP _ _ _ _).2 hg (hb0 _ _)⟩


/-! ### The event loop -/

theorem startPass_finds (p : Program) (hfit : Fits p) (f : Nat) (ss : List Service) (s : Nat)
    (tried : List Nat) (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s + k)) → StmtInv (fitsOf p) m →
      Finds p g m (startPass p f ss s tried m a).1 := by
  fun_induction startPass p f ss s tried m a <;> intro hss hm
  all_goals first
    | exact Finds.refl _
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (refine (startIteration_finds p hfit _ _ _ _ ?_ hm).trans (settle_finds p hfit _ _)
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)
    | (rename_i ih
       refine ((startIteration_finds p hfit _ _ _ _ ?_ hm).trans (settle_finds p hfit _ _)).trans
         (ih (getService_tail hss) (settle_stmt (c := fitsOf p) p hfit _ _ (startIteration_stmt p hfit _ _ _ _ hm)))
       have h0 := hss 0
       simp only [getService, Nat.add_zero] at h0
       exact h0.symm)

theorem startEngines_finds (p : Program) (hfit : Fits p) (f n : Nat) (tried : List Nat) (m : Machine) :
    StmtInv (fitsOf p) m → Finds p g m (startEngines p f n tried m) := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact Finds.refl _
    | exact startPass_finds p hfit _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact (startPass_finds p hfit _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm).trans
        (ih (startPass_stmt p hfit _ _ _ _ _ _ hm)))

theorem endOfInstant_finds (p : Program) (hfit : Fits p) (f : Nat) (m : Machine) (hm : StmtInv (fitsOf p) m) :
    Finds p g m (endOfInstant p f m) := by
  simp only [endOfInstant]
  split
  · exact Finds.refl m
  · exact startEngines_finds p hfit _ _ _ _ hm

theorem loop_finds (p : Program) (hfit : Fits p) : ∀ (f : Nat) (m : Machine), StmtInv (fitsOf p) m →
    Finds p p.gap m (loop p f m)
  | 0, m, _ => Finds.out m
  | f + 1, m, hm => by
    simp only [loop]
    split
    · exact Finds.refl m
    · next tm ts heq =>
      have h1 : StmtInv (fitsOf p) (fire p { m with now := Nat.max m.now tm.time, timers := ts } tm.wake) :=
        fire_stmt p _ _ ⟨hm.1, hm.2⟩
      have h2 := settle_stmt (c := fitsOf p) p hfit f _ h1
      have h3 := endOfInstant_stmt (c := fitsOf p) p hfit f _ h2
      exact (((fire_finds p m _ tm ts heq).trans (settle_finds p hfit f _)).trans
        (endOfInstant_finds p hfit f _ h2)).trans (loop_finds p hfit f _ h3)


/-! ### The theorems -/

/-- The other half of request conservation, for every run of every program with `DistinctProgram` and
`FoundProgram`, at any fuel: unless the run was cut short by its fuel or stopped by the program's run-time
error (`Machine.Lost`), every thread with something left to run is placed (ready, a timer, a fifo stage's
queue, a pool's queue, an engine's residents). -/
theorem runProgram_found (p : Program) (fuel : Nat) (hd : DistinctProgram p) (hf : FoundProgram p) :
    (runProgram p fuel).Lost ∨ Found p.gap (runProgram p fuel) := by
  have h0 := initial_stmt (c := fitsOf p) p hf.fits
  have h1 := settle_stmt (c := fitsOf p) p hf.fits fuel _ h0
  have h2 := endOfInstant_stmt (c := fitsOf p) p hf.fits fuel _ h1
  have h := ((settle_finds (g := p.gap) p hf.fits fuel (initial p)).trans
    (endOfInstant_finds p hf.fits fuel _ h1)).trans (loop_finds p hf.fits fuel _ h2)
  rcases h.good (initial_good p hd hf) with e | e
  · exact Or.inl e
  · exact Or.inr e.2.2.2

/-- Every thread with something left to run is in exactly one place at the end of every run that ran to
its end (neither out of fuel nor failed), for every program with `DistinctProgram` and `FoundProgram`:
`runProgram_placed` (at most one) and `runProgram_found` (at least one). -/
theorem runProgram_placed_once (p : Program) (fuel : Nat) (hd : DistinctProgram p) (hf : FoundProgram p)
    (hfuel : (runProgram p fuel).outOfFuel = false) (hfail : (runProgram p fuel).failed = false) (t : Nat)
    (ht : (getThread (runProgram p fuel).threads t).k ≠ []) : (runProgram p fuel).placed p.gap t = 1 := by
  have h1 := (runProgram_placed p fuel hd).2 t
  rcases runProgram_found p fuel hd hf with e | e
  · rcases e with e | e
    · rw [hfuel] at e; cases e
    · rw [hfail] at e; cases e
  · have h2 := e t ht
    omega

/-- Request conservation's turns (issue 14, result 6), both halves, for every run that ran to its end of
every program with `DistinctProgram`, `FoundProgram` and `TurnsOutside`, under every `preempt` mode: a
session's open turn (submitted, neither answered nor refused: `inTurn`) is in exactly one place, waiting (a
pool's or a fifo stage's queue) or running (an engine's residents, a timer, ready), and is not answered. -/
theorem runProgram_open_turn_placed (p : Program) (fuel : Nat) (hd : DistinctProgram p) (hf : FoundProgram p)
    (hto : TurnsOutside p) (hfuel : (runProgram p fuel).outOfFuel = false) (hfail : (runProgram p fuel).failed = false)
    (t : Nat) (hin : (getThread (runProgram p fuel).threads t).inTurn = true) :
    (runProgram p fuel).placed p.gap t = 1 ∧
      ∀ a ∈ (getThread (runProgram p fuel).threads t).answers, a.turn ≠ (getThread (runProgram p fuel).threads t).turns := by
  have hok := getThread_turnOk _ t (runProgram_reqP p fuel hto).1.1
  have hk : (getThread (runProgram p fuel).threads t).k ≠ [] := by
    intro e
    have := hok.pending hin
    rw [e] at this
    simp [answerIn] at this
  exact ⟨runProgram_placed_once p fuel hd hf hfuel hfail t hk,
    fun a ha => Nat.ne_of_lt (hok.below (hok.pending hin) a ha)⟩

/-- The statement before preemption was covered (`NoPreemption p` among its hypotheses), now a corollary. -/
theorem runProgram_open_turn_placed_noPreemption (p : Program) (fuel : Nat) (hd : DistinctProgram p)
    (hf : FoundProgram p) (_ : NoPreemption p) (hto : TurnsOutside p) (hfuel : (runProgram p fuel).outOfFuel = false)
    (hfail : (runProgram p fuel).failed = false) (t : Nat) (hin : (getThread (runProgram p fuel).threads t).inTurn = true) :
    (runProgram p fuel).placed p.gap t = 1 ∧
      ∀ a ∈ (getThread (runProgram p fuel).threads t).answers, a.turn ≠ (getThread (runProgram p fuel).threads t).turns :=
  runProgram_open_turn_placed p fuel hd hf hto hfuel hfail t hin

end Serq.Kernel
