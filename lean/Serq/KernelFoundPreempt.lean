module

public import Serq.KernelFoundRun
public import Serq.KernelKvRun

/-! # Request conservation's "in some place" half: a preemption's step (issue 14, result 6)

`Serq.KernelFoundRun` proves that every thread with something left to run is placed (`Found`) for programs
whose growths never preempt (`NoPreemption`). This module proves the step that preemption adds: a victim
that `victimIn` picks (a resident of the engine, holding the pool: `victimIn_resident`, `victimIn_part`)
leaves the residents and its hold joins its first pool's queue, so every thread is placed as often as before
(`Machine.preempt_placed`) and `Kept` holds (`Machine.preempt_kept`, `growPreempting_kept`,
`Machine.serveOne_kept_fits`), given that the holds its release frames carry name an existing pool first.
That is `StmtInv (fitsOf p)` (`Serq.KernelKvRun`: `FrameAll` reads a release frame's hold), the check of
`Fits` kept through the run by the same lemmas as `holdsOnceOn` (`exec_stmt`, `settle_stmt`,
`Machine.preempt_stmt`, …). Without it the hold could name a pool past the machine's list, and the victim
would be in no place.
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

/-- An engine serves a resident, preempting or not (`Machine.serveOne_kept` without `NoPreemption`): every
live thread stays placed, while every release frame's hold names an existing pool first. -/
theorem Machine.serveOne_kept_fits (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
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

end Serq.Kernel
