module

public import Serq.KernelConserve
public import Serq.KernelRequests

/-! # Issue 14, result 6 over the kernel interpreter: KV conservation's ledger

`Serq.KernelConserve` proves KV conservation (`used + cachedUnits entries ≤ cap` per pool, `withinCaps`)
for its local steps: an admission that `fits`, a growth that fits, a part given back *provided its pool
holds at least its units* (`giveBack_one_within`). That proviso is what a proof for every run needs a
ledger for: a pool's `used` stops at 0 (`Nat.sub`), so a part given back to a pool whose `used` is below
its units would leave the cache (which keeps up to the part's units) above what `used` lost.

The ledger: every pool's `used` covers the units of the parts that hold it and have not been given
back, wherever they are: in a thread's continuation (`Frame.release held _`, the parts of a hold whose
body runs) and in its leases (`Lease.part`). `heldOn i hs` counts a list of parts' units on pool `i` (a
part given back by a `release` inside its hold, `Held.given`, counts nothing); `frameHeld`, `leasesHeld`
and `Thread.heldOn` count a continuation's, a thread's leases' and a thread's; `Ledger ts ps` says that
for every pool of the machine (`i < ps.length`; a hold on a pool past the list changes no pool) the
threads' parts are covered by its `used`.

Proved here, at the level of the pools (what every machine function does to them is one of these):

* a list of parts given back (`giveBack`, the end of a hold's scope, a `release`, a lease's end, a
  session's end) keeps every pool within its cap and the ledger of whatever else the pools cover
  (`giveBack_kv`), given that the pools covered the parts besides it;
* an admission (`admitOn`) adds to each pool's `used` exactly the units of the parts it returns
  (`admitOn_ledger`, `admitOn_length`), so the ledger holds with the new parts counted; with `fits`, a
  hold naming each pool once it keeps every pool within its cap, whatever its pools' eviction
  (`evict lru` or `evict by (keys)`: `evictIn_within`; `admitOn_within`,
  `Machine.admitWaiter_within`, `Serq.KernelConserve`);
* a growth adds to its pool's `used` what its part grows by (`Machine.grown_used`);
* on a continuation: `releaseIn` moves the part it gives back out of the frames' count
  (`releaseIn_frameHeld`), and `growPart` (`growPart_frameHeld`, the part `partOn` found: `partOn_spec`)
  and `advancePart` (`advancePart_frameHeld`) change the count by the growth, resp. not at all;
* a continuation's holds given back (`releaseAll`: `end;`, a refused hold), a thread's leases ended
  (`endLeases`, `endLeasesOn`, `endLease`), a `release` inside a hold (`releaseIn`): every pool within its
  cap, and what is left counted, with whatever else the pools covered, covered still (`releaseAll_kv`,
  `endLeases_kv`, `endLeasesOn_kv`, `endLease_kv`, `releaseIn_kv`);
* the threads' count: writing a thread back (`Machine.put`) changes it by the thread's own parts
  (`threadsHeld_setThread`); the thread taken from entry `t` to run, written back at its serial, counts
  nothing twice when every entry is the thread of its serial (`threadsHeld_take`, under `SerialAt`, which
  `Machine.put` keeps: `SerialAt.set`).

Carried through the machine: `KvRun caps m` (`withinCaps`, `SerialAt`, `Ledger`) is kept by a thread's
run (`exec_kv`: while it runs, the ledger counts it beside every other thread, `othersHeld`, since the
thread list keeps a stale copy of it until `Machine.put` writes it back at its serial: `KvRun.put`,
`Ledger.take`), `runReady_kv`, every event (`fire_kv`), an admission that `fits` with a hold naming each
pool once (`Machine.admitWaiter_kv`), a growth that fits (`Machine.grown_kv`) and the
serving, preemptions included (`Machine.preempt_kv`: a victim's holds given back up to the preempted one,
`abandonTo_kv`; `growPreempting_kv`, `Machine.serveOne_kv`, `serveIn_kv`, `serveOrdered_kv`). `Serq.KernelKvRun`
keeps the admissions' hypothesis through every run and concludes `runProgram_kv_conserved`.
-/
@[expose] public section

namespace Serq.Kernel

/-! ### Counting the parts that hold a pool -/

/-- The units a list of parts holds on pool `i` and has not given back. -/
def heldOn (i : Nat) : List Held → Nat
  | [] => 0
  | h :: hs => (if h.pool = i ∧ h.given = false then h.units else 0) + heldOn i hs

/-- The units a continuation's holds hold on pool `i`. -/
def frameHeld (i : Nat) : List Frame → Nat
  | [] => 0
  | .release held _ :: k => heldOn i held + frameHeld i k
  | .stmts _ :: k => frameHeld i k
  | .submit :: k => frameHeld i k
  | .answer :: k => frameHeld i k

/-- The units a thread's leases hold on pool `i`. -/
def leasesHeld (i : Nat) : List Lease → Nat
  | [] => 0
  | l :: ls => heldOn i [l.part] + leasesHeld i ls

/-- The units a thread holds on pool `i`: its holds' and its leases'. -/
def Thread.heldOn (i : Nat) (th : Thread) : Nat := frameHeld i th.k + leasesHeld i th.leases

def threadsHeld (i : Nat) : List Thread → Nat
  | [] => 0
  | th :: ts => th.heldOn i + threadsHeld i ts

/-- The ledger: every pool's `used` covers the units the threads hold on it. -/
def Ledger (ts : List Thread) (ps : List PoolState) : Prop :=
  ∀ i, i < ps.length → threadsHeld i ts ≤ (getPool ps i).used

theorem heldOn_nil (i : Nat) : heldOn i [] = 0 := rfl

theorem heldOn_cons (i : Nat) (h : Held) (hs : List Held) :
    heldOn i (h :: hs) = (if h.pool = i ∧ h.given = false then h.units else 0) + heldOn i hs := rfl

/-! ### Pools -/

theorem setPool_length : ∀ (ps : List PoolState) (i : Nat) (v : PoolState), (setPool ps i v).length = ps.length
  | [], _, _ => rfl
  | _ :: _, 0, _ => rfl
  | _ :: xs, i + 1, v => by simp only [setPool, List.length_cons, setPool_length xs i v]

theorem setPool_of_le : ∀ (ps : List PoolState) (i : Nat) (v : PoolState), ps.length ≤ i → setPool ps i v = ps
  | [], _, _, _ => rfl
  | _ :: _, 0, _, h => by simp at h
  | x :: xs, i + 1, v, h => by
    simp only [setPool, setPool_of_le xs i v (by simp at h; omega)]

theorem getPool_setPool_lt : ∀ (ps : List PoolState) (i : Nat) (v : PoolState), i < ps.length →
    getPool (setPool ps i v) i = v
  | [], _, _, h => by simp at h
  | _ :: _, 0, _, _ => rfl
  | _ :: xs, i + 1, v, h => getPool_setPool_lt xs i v (by simp at h; omega)

theorem getPool_of_le : ∀ (ps : List PoolState) (i : Nat), ps.length ≤ i → getPool ps i = ⟨0, 0, [], []⟩
  | [], _, _ => rfl
  | _ :: _, 0, h => by simp at h
  | _ :: xs, i + 1, h => getPool_of_le xs i (by simp at h; omega)

theorem heldPart_pool : ∀ (held : List Held) (j : Nat), heldHas held j = true → (heldPart held j).pool = j
  | [], _, h => by simp [heldHas] at h
  | x :: xs, j, h => by
    simp only [heldPart]
    split
    · rename_i hx; simpa using hx
    · rename_i hx
      simp only [heldHas, hx, Bool.false_or] at h
      exact heldPart_pool xs j h

/-- What a part given back leaves of its pool's `used`. -/
theorem giveBack_one_used (blocks : List Nat) (serial keep : Nat) (ps : List PoolState) (h : Held) (j : Nat)
    (hj : j < ps.length) :
    (getPool (giveBack blocks serial keep ps [h]) j).used =
      (getPool ps j).used - (if h.pool = j ∧ h.given = false then h.units else 0) := by
  simp only [giveBack]
  split
  · rename_i hg
    simp [hg]
  · rename_i hg
    by_cases hp : h.pool = j
    · subst hp
      rw [getPool_setPool_lt _ _ _ hj]
      simp [hg]
    · rw [getPool_setPool_ne _ _ _ _ hp]
      simp [hp]

theorem giveBack_one_length (blocks : List Nat) (serial keep : Nat) (ps : List PoolState) (h : Held) :
    (giveBack blocks serial keep ps [h]).length = ps.length := by
  simp only [giveBack]
  split
  · rfl
  · exact setPool_length _ _ _

theorem giveBack_cons (blocks : List Nat) (serial keep : Nat) (ps : List PoolState) (h : Held) (hs : List Held) :
    giveBack blocks serial keep ps (h :: hs) = giveBack blocks serial keep (giveBack blocks serial keep ps [h]) hs := by
  simp only [giveBack]
  split <;> rfl

/-- Parts given back keep every pool within its cap and cover whatever else (`R`) the pools covered
beside them. -/
theorem giveBack_kv (blocks caps : List Nat) (serial keep : Nat) : ∀ (hs : List Held) (ps : List PoolState)
    (R : Nat → Nat), withinCaps caps ps → (∀ i, i < ps.length → heldOn i hs + R i ≤ (getPool ps i).used) →
    withinCaps caps (giveBack blocks serial keep ps hs) ∧ (giveBack blocks serial keep ps hs).length = ps.length ∧
      ∀ i, i < ps.length → R i ≤ (getPool (giveBack blocks serial keep ps hs) i).used
  | [], ps, R, hw, hl => ⟨hw, rfl, fun i hi => by
      have := hl i hi
      simp only [heldOn] at this
      show R i ≤ (getPool ps i).used
      omega⟩
  | h :: hs, ps, R, hw, hl => by
    rw [giveBack_cons]
    have hlen := giveBack_one_length blocks serial keep ps h
    -- the first part given back: within the caps, and the rest covered
    have hw1 : withinCaps caps (giveBack blocks serial keep ps [h]) := by
      intro j
      by_cases hj : j < ps.length
      · refine giveBack_one_within blocks serial keep ps h j _ (hw j) (fun hp hg => ?_)
        have := hl j hj
        rw [heldOn_cons] at this
        simp only [hp, hg, and_self, ↓reduceIte] at this
        omega
      · -- a pool past the list: `getPool` reads the empty pool
        rw [getPool_of_le _ _ (by rw [hlen]; omega)]
        simp [cachedUnits]
    have hl1 : ∀ i, i < (giveBack blocks serial keep ps [h]).length →
        heldOn i hs + R i ≤ (getPool (giveBack blocks serial keep ps [h]) i).used := by
      intro i hi
      rw [hlen] at hi
      rw [giveBack_one_used _ _ _ _ _ _ hi]
      have := hl i hi
      rw [heldOn_cons] at this
      omega
    have ih := giveBack_kv blocks caps serial keep hs _ R hw1 hl1
    refine ⟨ih.1, ih.2.1.trans hlen, fun i hi => ?_⟩
    exact ih.2.2 i (by rw [hlen]; exact hi)

/-- An admission adds to each pool's `used` the units of the parts it returns: whatever the pools
covered before (`R`) they cover beside the new parts. -/
theorem admitOn_ledger (p : Program) (threads : List Thread) (v : PoolView) (caching : Bool) (rho : Option Nat)
    (attrs : List Nat) (now : Nat) : ∀ (hs : List HoldOn) (first : Bool) (attr : Nat) (ps : List PoolState)
    (R : Nat → Nat), (∀ i, i < ps.length → R i ≤ (getPool ps i).used) →
    (admitOn p threads v caching rho attrs now first attr ps hs).1.length = ps.length ∧
      ∀ i, i < ps.length → R i + heldOn i (admitOn p threads v caching rho attrs now first attr ps hs).2.2 ≤
        (getPool (admitOn p threads v caching rho attrs now first attr ps hs).1 i).used
  | [], _, _, ps, R, hl => ⟨rfl, fun i hi => by
      have := hl i hi
      show R i + 0 ≤ (getPool ps i).used
      omega⟩
  | h :: hs, first, attr, ps, R, hl => by
    -- the pool after the first part: its `used` grew by the part's units
    have key : ∀ (q' : PoolState) (ur : Nat), q'.used = (getPool ps h.pool).used + ur →
        ∀ (fst : Bool) (at' : Nat) (part : Held), part.pool = h.pool → part.units = ur → part.given = false →
        (admitOn p threads v caching rho attrs now fst at' (setPool ps h.pool q') hs).1.length = ps.length ∧
        ∀ i, i < ps.length → R i + heldOn i (part :: (admitOn p threads v caching rho attrs now fst at'
          (setPool ps h.pool q') hs).2.2) ≤
          (getPool (admitOn p threads v caching rho attrs now fst at' (setPool ps h.pool q') hs).1 i).used := by
      intro q' ur hqu fst at' part hpp hpu hpg
      have hl1 : ∀ i, i < (setPool ps h.pool q').length →
          R i + (if h.pool = i then ur else 0) ≤ (getPool (setPool ps h.pool q') i).used := by
        intro i hi
        rw [setPool_length] at hi
        by_cases hp : h.pool = i
        · subst hp
          rw [getPool_setPool_lt _ _ _ hi, hqu]
          have := hl h.pool hi
          simp only [↓reduceIte]
          omega
        · rw [getPool_setPool_ne _ _ _ _ hp]
          have := hl i hi
          simp only [hp, ↓reduceIte]
          omega
      have ih := admitOn_ledger p threads v caching rho attrs now hs fst at' (setPool ps h.pool q') _ hl1
      rw [setPool_length] at ih
      refine ⟨ih.1, fun i hi => ?_⟩
      have := ih.2 i hi
      rw [heldOn_cons, hpp, hpu, hpg]
      by_cases hp : h.pool = i
      · simp only [hp, and_self, ↓reduceIte] at this ⊢
        omega
      · simp only [hp, false_and, ↓reduceIte] at this ⊢
        omega
    simp only [admitOn]
    refine key _ (roundUp (getAt p.blocks h.pool) (eval v attrs now 0 h.units)) ?_ _ _ _ ?_ ?_ ?_
    all_goals rfl

theorem admitOn_length (p : Program) (threads : List Thread) (v : PoolView) (caching : Bool) (rho : Option Nat)
    (attrs : List Nat) (now : Nat) (hs : List HoldOn) (first : Bool) (attr : Nat) (ps : List PoolState) :
    (admitOn p threads v caching rho attrs now first attr ps hs).1.length = ps.length :=
  (admitOn_ledger p threads v caching rho attrs now hs first attr ps (fun _ => 0) (fun _ _ => Nat.zero_le _)).1

/-- A growth adds to its pool's `used` what the part grows by. -/
theorem Machine.grown_used (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hi : i < m.pools.length) :
    (getPool (m.grown p t i want h).pools i).used = (getPool m.pools i).used + (want - h.units) := by
  simp only [Machine.grown, Machine.put]
  rw [getPool_setPool_lt _ _ _ hi]

theorem Machine.grown_used_ne (p : Program) (m : Machine) (t i want : Nat) (h : Held) (k : Nat) (hk : i ≠ k) :
    (getPool (m.grown p t i want h).pools k).used = (getPool m.pools k).used := by
  simp only [Machine.grown, Machine.put]
  rw [getPool_setPool_ne _ _ _ _ hk]

/-! ### Continuations -/

theorem heldOn_heldWithout (i j : Nat) : ∀ (held : List Held), heldHas held j = true →
    heldOn i (heldWithout held j) + heldOn i [heldPart held j] = heldOn i held
  | [], h => by simp [heldHas] at h
  | x :: xs, h => by
    by_cases hx : x.pool = j
    · have hb : (x.pool == j) = true := by simpa using hx
      simp only [heldWithout, heldPart, hb, ↓reduceIte, heldOn_cons, heldOn_nil, Bool.true_eq_false, and_false]
      omega
    · have hb : (x.pool == j) = false := by simpa using hx
      simp only [heldHas, hb, Bool.false_or] at h
      have := heldOn_heldWithout i j xs h
      simp only [heldWithout, heldPart, hb, Bool.false_eq_true, ↓reduceIte, heldOn_cons] at this ⊢
      omega

/-- A `release` moves the part it gives back out of the continuation's count. -/
theorem releaseIn_frameHeld (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now j i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame),
    frameHeld i (releaseIn blocks caps serial attrs now j ps k).2 ≤ frameHeld i k
  | ps, [] => Nat.le_refl _
  | ps, .answer :: k => Nat.le_refl _
  | ps, .release held w :: k => by
    simp only [releaseIn]
    split
    · rename_i hh
      have := heldOn_heldWithout i j held hh
      simp only [frameHeld]
      omega
    · have := releaseIn_frameHeld blocks caps serial attrs now j i ps k
      simp only [frameHeld]
      omega
  | ps, .stmts _ :: k => releaseIn_frameHeld blocks caps serial attrs now j i ps k
  | ps, .submit :: k => releaseIn_frameHeld blocks caps serial attrs now j i ps k

theorem heldOn_heldAdvanced (i j n : Nat) : ∀ (held : List Held), heldOn i (heldAdvanced held j n) = heldOn i held
  | [] => rfl
  | x :: xs => by
    simp only [heldAdvanced]
    split
    · simp only [heldOn_cons]
    · simp only [heldOn_cons, heldOn_heldAdvanced i j n xs]

/-- An iteration's end advances positions, not units. -/
theorem advancePart_frameHeld (i j n : Nat) : ∀ (k : List Frame), frameHeld i (advancePart k j n) = frameHeld i k
  | [] => rfl
  | .answer :: k => rfl
  | .release held w :: k => by
    simp only [advancePart]
    split
    · simp only [frameHeld, heldOn_heldAdvanced]
    · simp only [frameHeld, advancePart_frameHeld i j n k]
  | .stmts _ :: k => advancePart_frameHeld i j n k
  | .submit :: k => advancePart_frameHeld i j n k

theorem heldOn_heldGrown (i j u : Nat) : ∀ (held : List Held), heldOn i (heldGrown held j u) + heldOn i [heldPart held j] =
    heldOn i held + (if j = i ∧ (heldPart held j).given = false then u else 0)
  | [] => by simp [heldGrown, heldPart, heldOn]
  | x :: xs => by
    by_cases hx : x.pool = j
    · have hb : (x.pool == j) = true := by simpa using hx
      simp only [heldGrown, heldPart, hb, ↓reduceIte, heldOn_cons, heldOn_nil]
      rw [hx]
      by_cases c : j = i ∧ x.given = false
      · simp only [c, ↓reduceIte]
        omega
      · simp only [c, ↓reduceIte]
    · have hb : (x.pool == j) = false := by simpa using hx
      have := heldOn_heldGrown i j u xs
      simp only [heldGrown, heldPart, hb, Bool.false_eq_true, ↓reduceIte, heldOn_cons] at this ⊢
      omega

/-- The part `partOn` finds is on its pool and not given back. -/
theorem partOn_spec : ∀ (k : List Frame) (j : Nat) (h : Held), partOn k j = some h → h.pool = j ∧ h.given = false
  | [], _, _, e => by simp [partOn] at e
  | .answer :: k, _, _, e => by simp [partOn] at e
  | .release held w :: k, j, h, e => by
    simp only [partOn] at e
    split at e
    · rename_i hh
      split at e
      · cases e
      · rename_i hg
        cases e
        exact ⟨heldPart_pool held j hh, by simpa using hg⟩
    · exact partOn_spec k j h e
  | .stmts _ :: k, j, h, e => partOn_spec k j h e
  | .submit :: k, j, h, e => partOn_spec k j h e

/-- A growth of `partOn`'s part `h` on pool `j` to `u` units changes the continuation's count on `j` from
`h`'s units to `u` (the part it grows is the one `partOn` found). -/
theorem growPart_frameHeld (i j u : Nat) : ∀ (k : List Frame) (h : Held), partOn k j = some h →
    frameHeld i (growPart k j u) + heldOn i [h] = frameHeld i k + (if j = i then u else 0)
  | [], _, e => by simp [partOn] at e
  | .answer :: k, _, e => by simp [partOn] at e
  | .release held w :: k, h, e => by
    simp only [partOn] at e
    simp only [growPart]
    split at e
    · rename_i hh
      simp only [hh, ↓reduceIte, frameHeld]
      split at e
      · cases e
      · rename_i hg
        cases e
        have := heldOn_heldGrown i j u held
        have hg' : (heldPart held j).given = false := by simpa using hg
        simp only [hg', and_true] at this
        omega
    · rename_i hh
      simp only [hh, Bool.false_eq_true, ↓reduceIte, frameHeld]
      have := growPart_frameHeld i j u k h e
      omega
  | .stmts _ :: k, h, e => growPart_frameHeld i j u k h e
  | .submit :: k, h, e => growPart_frameHeld i j u k h e

/-- A `grow` statement's growth counts as a growing run's: what it asks (`req`) is no part's units. -/
theorem heldOn_heldGrownReq (i j u r : Nat) : ∀ (held : List Held), heldOn i (heldGrownReq held j u r) = heldOn i (heldGrown held j u)
  | [] => rfl
  | x :: xs => by
    simp only [heldGrownReq, heldGrown]
    split
    · simp [heldOn]
    · simp only [heldOn_cons, heldOn_heldGrownReq i j u r xs]

theorem frameHeld_growPartReq (i j u r : Nat) : ∀ (k : List Frame), frameHeld i (growPartReq k j u r) = frameHeld i (growPart k j u)
  | [] => rfl
  | .answer :: _ => rfl
  | .release held w :: k => by
    simp only [growPartReq, growPart]
    split
    · simp only [frameHeld, heldOn_heldGrownReq]
    · simp only [frameHeld, frameHeld_growPartReq i j u r k]
  | .stmts _ :: k => by simp only [growPartReq, growPart, frameHeld, frameHeld_growPartReq i j u r k]
  | .submit :: k => by simp only [growPartReq, growPart, frameHeld, frameHeld_growPartReq i j u r k]

theorem growPartReq_frameHeld (i j u r : Nat) (k : List Frame) (h : Held) (e : partOn k j = some h) :
    frameHeld i (growPartReq k j u r) + heldOn i [h] = frameHeld i k + (if j = i then u else 0) := by
  rw [frameHeld_growPartReq]
  exact growPart_frameHeld i j u k h e

/-! ### A continuation's and a thread's leases given back -/

/-- A continuation's holds given back, innermost first (`releaseAll`: `end;`, a refused hold): every pool
within its cap, and what the pools covered beside the continuation's parts (`R`) covered still. -/
theorem releaseAll_kv (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now : Nat) :
    ∀ (k : List Frame) (ps : List PoolState) (R : Nat → Nat), withinCaps caps ps →
    (∀ i, i < ps.length → frameHeld i k + R i ≤ (getPool ps i).used) →
    withinCaps caps (releaseAll blocks caps serial attrs now ps k) ∧
      (releaseAll blocks caps serial attrs now ps k).length = ps.length ∧
      ∀ i, i < ps.length → R i ≤ (getPool (releaseAll blocks caps serial attrs now ps k) i).used
  | [], ps, R, hw, hl => ⟨hw, rfl, fun i hi => by
      have := hl i hi
      simp only [frameHeld] at this
      show R i ≤ (getPool ps i).used
      (try dsimp only at *); omega⟩
  | .release held w :: k, ps, R, hw, hl => by
    simp only [releaseAll]
    have g := giveBack_kv blocks caps serial (cacheKeep ⟨caps, ps, serial, []⟩ attrs now w.cache) held ps
      (fun i => frameHeld i k + R i) hw (fun i hi => by have := hl i hi; simp only [frameHeld] at this; (try dsimp only at *); omega)
    have ih := releaseAll_kv blocks caps serial attrs now k _ R g.1 (fun i hi => by
      rw [g.2.1] at hi
      exact g.2.2 i hi)
    exact ⟨ih.1, ih.2.1.trans g.2.1, fun i hi => ih.2.2 i (by rw [g.2.1]; exact hi)⟩
  | .stmts _ :: k, ps, R, hw, hl => releaseAll_kv blocks caps serial attrs now k ps R hw hl
  | .submit :: k, ps, R, hw, hl => releaseAll_kv blocks caps serial attrs now k ps R hw hl
  | .answer :: k, ps, R, hw, hl => releaseAll_kv blocks caps serial attrs now k ps R hw hl

/-- A lease ends: its part given back. -/
theorem endLease_kv (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now : Nat) (ps : List PoolState)
    (l : Lease) (R : Nat → Nat) (hw : withinCaps caps ps)
    (hl : ∀ i, i < ps.length → heldOn i [l.part] + R i ≤ (getPool ps i).used) :
    withinCaps caps (endLease blocks caps serial attrs now ps l) ∧
      (endLease blocks caps serial attrs now ps l).length = ps.length ∧
      ∀ i, i < ps.length → R i ≤ (getPool (endLease blocks caps serial attrs now ps l) i).used :=
  giveBack_kv blocks caps serial _ [l.part] ps R hw hl

/-- A thread's leases ended, in order (the session's end). -/
theorem endLeases_kv (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now : Nat) :
    ∀ (ls : List Lease) (ps : List PoolState) (R : Nat → Nat), withinCaps caps ps →
    (∀ i, i < ps.length → leasesHeld i ls + R i ≤ (getPool ps i).used) →
    withinCaps caps (endLeases blocks caps serial attrs now ps ls) ∧
      (endLeases blocks caps serial attrs now ps ls).length = ps.length ∧
      ∀ i, i < ps.length → R i ≤ (getPool (endLeases blocks caps serial attrs now ps ls) i).used
  | [], ps, R, hw, hl => ⟨hw, rfl, fun i hi => by
      have := hl i hi
      simp only [leasesHeld] at this
      show R i ≤ (getPool ps i).used
      (try dsimp only at *); omega⟩
  | l :: ls, ps, R, hw, hl => by
    simp only [endLeases]
    have g := endLease_kv blocks caps serial attrs now ps l (fun i => leasesHeld i ls + R i) hw
      (fun i hi => by have := hl i hi; simp only [leasesHeld] at this; (try dsimp only at *); omega)
    have ih := endLeases_kv blocks caps serial attrs now ls _ R g.1 (fun i hi => by
      rw [g.2.1] at hi
      exact g.2.2 i hi)
    exact ⟨ih.1, ih.2.1.trans g.2.1, fun i hi => ih.2.2 i (by rw [g.2.1]; exact hi)⟩

/-- A thread's leases on pool `j` ended (`release j` outside any hold on it): the leases kept, with `R`,
covered still. -/
theorem endLeasesOn_kv (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now j : Nat) :
    ∀ (ls : List Lease) (ps : List PoolState) (R : Nat → Nat), withinCaps caps ps →
    (∀ i, i < ps.length → leasesHeld i ls + R i ≤ (getPool ps i).used) →
    withinCaps caps (endLeasesOn blocks caps serial attrs now j ps ls).1 ∧
      (endLeasesOn blocks caps serial attrs now j ps ls).1.length = ps.length ∧
      ∀ i, i < ps.length → leasesHeld i (endLeasesOn blocks caps serial attrs now j ps ls).2 + R i ≤
        (getPool (endLeasesOn blocks caps serial attrs now j ps ls).1 i).used
  | [], ps, R, hw, hl => ⟨hw, rfl, hl⟩
  | l :: ls, ps, R, hw, hl => by
    simp only [endLeasesOn]
    split
    · have g := endLease_kv blocks caps serial attrs now ps l (fun i => leasesHeld i ls + R i) hw
        (fun i hi => by have := hl i hi; simp only [leasesHeld] at this; (try dsimp only at *); omega)
      have ih := endLeasesOn_kv blocks caps serial attrs now j ls _ R g.1 (fun i hi => by
        rw [g.2.1] at hi
        exact g.2.2 i hi)
      exact ⟨ih.1, ih.2.1.trans g.2.1, fun i hi => ih.2.2 i (by rw [g.2.1]; exact hi)⟩
    · have ih := endLeasesOn_kv blocks caps serial attrs now j ls ps (fun i => heldOn i [l.part] + R i) hw
        (fun i hi => by have := hl i hi; simp only [leasesHeld] at this; (try dsimp only at *); omega)
      refine ⟨ih.1, ih.2.1, fun i hi => ?_⟩
      have := ih.2.2 i hi
      simp only [leasesHeld]
      (try dsimp only at *); omega

/-- `release j` inside a hold on `j` (`releaseIn`): the part given back leaves the continuation's count,
every pool stays within its cap, and the continuation's parts left, with `R`, are covered still. -/
theorem releaseIn_kv (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now j : Nat) :
    ∀ (k : List Frame) (ps : List PoolState) (R : Nat → Nat), withinCaps caps ps →
    (∀ i, i < ps.length → frameHeld i k + R i ≤ (getPool ps i).used) →
    withinCaps caps (releaseIn blocks caps serial attrs now j ps k).1 ∧
      (releaseIn blocks caps serial attrs now j ps k).1.length = ps.length ∧
      ∀ i, i < ps.length → frameHeld i (releaseIn blocks caps serial attrs now j ps k).2 + R i ≤
        (getPool (releaseIn blocks caps serial attrs now j ps k).1 i).used
  | [], ps, R, hw, hl => ⟨hw, rfl, hl⟩
  | .answer :: k, ps, R, hw, hl => ⟨hw, rfl, hl⟩
  | .release held w :: k, ps, R, hw, hl => by
    simp only [releaseIn]
    split
    · rename_i hh
      have g := giveBack_kv blocks caps serial (cacheKeep ⟨caps, ps, serial, []⟩ attrs now w.cache) [heldPart held j] ps
        (fun i => heldOn i (heldWithout held j) + frameHeld i k + R i) hw (fun i hi => by
          have := hl i hi
          have e := heldOn_heldWithout i j held hh
          simp only [frameHeld] at this
          (try dsimp only at *); omega)
      refine ⟨g.1, g.2.1, fun i hi => ?_⟩
      have := g.2.2 i hi
      simp only [frameHeld]
      (try dsimp only at *); omega
    · have ih := releaseIn_kv blocks caps serial attrs now j k ps (fun i => heldOn i held + R i) hw (fun i hi => by
        have := hl i hi
        simp only [frameHeld] at this
        (try dsimp only at *); omega)
      refine ⟨ih.1, ih.2.1, fun i hi => ?_⟩
      have := ih.2.2 i hi
      simp only [frameHeld]
      (try dsimp only at *); omega
  | .stmts _ :: k, ps, R, hw, hl => releaseIn_kv blocks caps serial attrs now j k ps R hw hl
  | .submit :: k, ps, R, hw, hl => releaseIn_kv blocks caps serial attrs now j k ps R hw hl

/-! ### The threads' count -/

theorem threadsHeld_setThread (i : Nat) : ∀ (ts : List Thread) (j : Nat) (v : Thread),
    threadsHeld i (setThread ts j v) + (getThread ts j).heldOn i ≤ threadsHeld i ts + v.heldOn i
  | [], _, _ => by simp [setThread, getThread, threadsHeld, Thread.heldOn, frameHeld, leasesHeld]
  | _ :: ts, 0, v => by simp only [setThread, getThread, threadsHeld]; omega
  | t :: ts, j + 1, v => by
    have := threadsHeld_setThread i ts j v
    simp only [setThread, getThread, threadsHeld]
    omega

/-- Every entry of the thread list is the thread of its serial (`Machine.put` writes a thread there). -/
def SerialAt (ts : List Thread) : Prop := ∀ j, j < ts.length → (getThread ts j).serial = j

theorem setThread_getThread_self : ∀ (ts : List Thread) (j : Nat), setThread ts j (getThread ts j) = ts
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | t :: ts, j + 1 => by simp only [setThread, getThread, setThread_getThread_self ts j]

/-- The thread of entry `t` taken to run (`runReady`, an admission): writing it back where it came from
counts no part twice; a thread past the list holds nothing. -/
theorem threadsHeld_take (i : Nat) (ts : List Thread) (t : Nat) (hs : SerialAt ts) :
    threadsHeld i (setThread ts (getThread ts t).serial (getThread ts t)) ≤ threadsHeld i ts := by
  by_cases ht : t < ts.length
  · rw [hs t ht, setThread_getThread_self]
    exact Nat.le_refl _
  · have e : getThread ts t = getThread [] 0 := by
      clear hs
      induction ts generalizing t with
      | nil => cases t <;> rfl
      | cons x xs ih =>
        cases t with
        | zero => simp at ht
        | succ t => exact ih t (by simp at ht; omega)
    have h := threadsHeld_setThread i ts (getThread ts t).serial (getThread ts t)
    rw [e] at h ⊢
    simp only [getThread, Thread.heldOn, frameHeld, leasesHeld] at h ⊢
    omega

theorem setThread_length : ∀ (ts : List Thread) (i : Nat) (v : Thread), (setThread ts i v).length = ts.length
  | [], _, _ => rfl
  | _ :: _, 0, _ => rfl
  | _ :: ts, i + 1, v => by simp only [setThread, List.length_cons, setThread_length ts i v]

/-- `Machine.put` keeps every entry the thread of its serial. -/
theorem SerialAt.set {ts : List Thread} (h : SerialAt ts) (v : Thread) : SerialAt (setThread ts v.serial v) := by
  intro j hj
  rw [setThread_length] at hj
  rcases getThread_setThread ts v.serial j v with e | ⟨e1, e2⟩
  · rw [e]; exact h j hj
  · rw [e2]; exact e1

/-! ### A thread's run keeps the pools within their caps and covered -/

/-- The units thread entry `j` does not hold on pool `i`: every other thread's (`j`'s own counted by
whoever runs it). -/
def othersHeld (i : Nat) (ts : List Thread) (j : Nat) : Nat := threadsHeld i ts - (getThread ts j).heldOn i

theorem threadsHeld_getThread_le (i : Nat) : ∀ (ts : List Thread) (j : Nat), (getThread ts j).heldOn i ≤ threadsHeld i ts
  | [], _ => by simp [getThread, Thread.heldOn, frameHeld, leasesHeld]
  | _ :: ts, 0 => by simp only [getThread, threadsHeld]; (try dsimp only at *); omega
  | _ :: ts, j + 1 => by
    have := threadsHeld_getThread_le i ts j
    simp only [getThread, threadsHeld]
    (try dsimp only at *); omega

/-- KV conservation with its ledger, and every entry the thread of its serial. -/
def KvRun (caps : List Nat) (m : Machine) : Prop := withinCaps caps m.pools ∧ SerialAt m.threads ∧ Ledger m.threads m.pools

/-- A thread written back whose parts, with every other thread's, its pools cover. -/
theorem KvRun.put {caps : List Nat} {m : Machine} {th : Thread} (hw : withinCaps caps m.pools) (hs : SerialAt m.threads)
    (hl : ∀ i, i < m.pools.length → othersHeld i m.threads th.serial + th.heldOn i ≤ (getPool m.pools i).used) :
    KvRun caps (m.put th) := by
  refine ⟨hw, hs.set th, fun i hi => ?_⟩
  have h1 := threadsHeld_setThread i m.threads th.serial th
  have h2 := threadsHeld_getThread_le i m.threads th.serial
  have h3 := hl i hi
  simp only [othersHeld] at h3
  show threadsHeld i (setThread m.threads th.serial th) ≤ (getPool m.pools i).used
  (try dsimp only at *); omega

/-- The thread of entry `t`, taken to run, is covered with the others. -/
theorem Ledger.take {ts : List Thread} {ps : List PoolState} (hl : Ledger ts ps) (hs : SerialAt ts) (t : Nat) :
    ∀ i, i < ps.length → othersHeld i ts (getThread ts t).serial + (getThread ts t).heldOn i ≤ (getPool ps i).used := by
  intro i hi
  have h0 := hl i hi
  by_cases ht : t < ts.length
  · rw [hs t ht]
    have := threadsHeld_getThread_le i ts t
    simp only [othersHeld]
    (try dsimp only at *); omega
  · have e : getThread ts t = getThread [] 0 := by
      clear hs hl h0
      induction ts generalizing t with
      | nil => cases t <;> rfl
      | cons x xs ih =>
        cases t with
        | zero => simp at ht
        | succ t => exact ih t (by simp at ht; (try dsimp only at *); omega)
    rw [e]
    simp only [othersHeld, getThread, Thread.heldOn, frameHeld, leasesHeld]
    (try dsimp only at *); omega

theorem leasesHeld_appendLease (i : Nat) (l : Lease) : ∀ (ls : List Lease),
    leasesHeld i (appendLease ls l) = leasesHeld i ls + heldOn i [l.part]
  | [] => by simp [appendLease, leasesHeld]
  | x :: xs => by
    simp only [appendLease, leasesHeld, leasesHeld_appendLease i l xs]
    (try dsimp only at *); omega

theorem leasedPart_spec : ∀ (held : List Held) (x : Option (Nat × Option Expr)) (h : Held), leasedPart held x = some h →
    heldHas held h.pool = true ∧ heldPart held h.pool = h
  | _, none, _, e => by simp [leasedPart] at e
  | held, some (i, d), h, e => by
    simp only [leasedPart] at e
    split at e
    · rename_i hc
      cases e
      simp only [Bool.and_eq_true, Bool.not_eq_true'] at hc
      rw [heldPart_pool held i hc.1]
      exact ⟨hc.1, rfl⟩
    · cases e

@[simp] theorem Machine.leaseTimer_pools (m : Machine) (s : Nat) (d : Option Nat) :
    (m.leaseTimer s d).pools = m.pools := by
  cases d <;> rfl

theorem exec_kv (p : Program) : ∀ (f : Nat) (m : Machine) (th : Thread), withinCaps p.caps m.pools → SerialAt m.threads →
    (∀ i, i < m.pools.length → othersHeld i m.threads th.serial + th.heldOn i ≤ (getPool m.pools i).used) →
    KvRun p.caps (exec p f m th)
  | 0, m, th, hw, hs, hl => by
    simp only [exec]
    have h := KvRun.put hw hs hl
    exact ⟨h.1, h.2.1, h.2.2⟩
  | f + 1, m, th, hw, hs, hl => by
    simp only [exec]
    split
    · next heq =>
      have g := endLeases_kv p.blocks p.caps th.serial th.attrs m.now th.leases m.pools
        (fun i => othersHeld i m.threads th.serial) hw (fun i hi => by
          have := hl i hi
          simp only [Thread.heldOn, heq, frameHeld] at this
          (try dsimp only at *); omega)
      refine KvRun.put g.1 hs (fun i hi => ?_)
      have := g.2.2 i (by rw [g.2.1] at hi; exact hi)
      simp only [Thread.heldOn, heq, frameHeld, leasesHeld]
      (try dsimp only at *); omega
    · next k heq =>
      refine exec_kv p f _ _ hw hs (fun i hi => ?_)
      have := hl i hi
      simp only [Thread.heldOn, heq, frameHeld] at this ⊢
      (try dsimp only at *); omega
    · next k heq =>
      split
      · refine exec_kv p f _ _ hw hs (fun i hi => ?_)
        have := hl i hi
        simp only [Thread.heldOn, heq, frameHeld] at this ⊢
        (try dsimp only at *); omega
      · refine exec_kv p f _ _ hw hs (fun i hi => ?_)
        have := hl i hi
        simp only [Thread.heldOn, heq, frameHeld] at this ⊢
        (try dsimp only at *); omega
    · next held w k heq =>
      split
      · have g := giveBack_kv p.blocks p.caps th.serial (cacheKeep (m.view p th.serial) th.attrs m.now w.cache) held m.pools
          (fun i => othersHeld i m.threads th.serial + (frameHeld i k + leasesHeld i th.leases)) hw (fun i hi => by
            have := hl i hi
            simp only [Thread.heldOn, heq, frameHeld] at this
            (try dsimp only at *); omega)
        refine exec_kv p f _ _ g.1 hs (fun i hi => ?_)
        have := g.2.2 i (by rw [g.2.1] at hi; exact hi)
        simp only [Thread.heldOn] at this ⊢
        (try dsimp only at *); omega
      · next h hlp =>
        have hsp := leasedPart_spec held _ h hlp
        have g := giveBack_kv p.blocks p.caps th.serial (cacheKeep (m.view p th.serial) th.attrs m.now w.cache)
          (heldWithout held h.pool) m.pools
          (fun i => othersHeld i m.threads th.serial + (heldOn i [h] + frameHeld i k + leasesHeld i th.leases)) hw
          (fun i hi => by
            have := hl i hi
            have e := heldOn_heldWithout i h.pool held hsp.1
            rw [hsp.2] at e
            simp only [Thread.heldOn, heq, frameHeld] at this
            (try dsimp only at *); omega)
        refine exec_kv p f _ _ (by simpa using g.1) (by simpa using hs) (fun i hi => ?_)
        simp only [Machine.leaseTimer_pools, Machine.leaseTimer_threads] at hi ⊢
        have := g.2.2 i (by rw [g.2.1] at hi; exact hi)
        simp only [Thread.heldOn, leasesHeld_appendLease] at this ⊢
        (try dsimp only at *); omega
    · next k heq =>
      refine exec_kv p f _ _ hw hs (fun i hi => ?_)
      have := hl i hi
      simp only [Thread.heldOn, heq, frameHeld] at this ⊢
      (try dsimp only at *); omega
    · next st rest k heq =>
      have hk : ∀ i, th.heldOn i = frameHeld i k + leasesHeld i th.leases := fun i => by
        simp only [Thread.heldOn, heq, frameHeld]
      -- a frame of statements holds nothing: the thread's count is its continuation's after it
      have same : ∀ (th' : Thread), th'.serial = th.serial → (∀ i, th'.heldOn i = th.heldOn i) →
          ∀ i, i < m.pools.length → othersHeld i m.threads th'.serial + th'.heldOn i ≤ (getPool m.pools i).used := by
        intro th' e1 e2 i hi
        rw [e1, e2]
        exact hl i hi
      cases st with
      | set i e => exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | observe j e => exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | stop =>
        try dsimp only
        have g1 := releaseAll_kv p.blocks p.caps th.serial th.attrs m.now k m.pools
          (fun i => othersHeld i m.threads th.serial + leasesHeld i th.leases) hw (fun i hi => by
            have := hl i hi
            rw [hk] at this
            (try dsimp only at *); omega)
        have g2 := endLeases_kv p.blocks p.caps th.serial th.attrs m.now th.leases _
          (fun i => othersHeld i m.threads th.serial) g1.1 (fun i hi => by
            rw [g1.2.1] at hi
            have := g1.2.2 i hi
            (try dsimp only at *); omega)
        refine KvRun.put g2.1 hs (fun i hi => ?_)
        rw [g2.2.1, g1.2.1] at hi
        have := g2.2.2 i (by rw [g1.2.1]; exact hi)
        simp only [Thread.heldOn, frameHeld, leasesHeld]
        (try dsimp only at *); omega
      | release j =>
        try dsimp only
        split
        · have g := releaseIn_kv p.blocks p.caps th.serial th.attrs m.now j k m.pools
            (fun i => othersHeld i m.threads th.serial + leasesHeld i th.leases) hw (fun i hi => by
              have := hl i hi
              rw [hk] at this
              (try dsimp only at *); omega)
          refine exec_kv p f _ _ g.1 hs (fun i hi => ?_)
          have := g.2.2 i (by rw [g.2.1] at hi; exact hi)
          simp only [Thread.heldOn, frameHeld]
          (try dsimp only at *); omega
        · have g := endLeasesOn_kv p.blocks p.caps th.serial th.attrs m.now j th.leases m.pools
            (fun i => othersHeld i m.threads th.serial + frameHeld i k) hw (fun i hi => by
              have := hl i hi
              rw [hk] at this
              (try dsimp only at *); omega)
          refine exec_kv p f _ _ g.1 hs (fun i hi => ?_)
          have := g.2.2 i (by rw [g.2.1] at hi; exact hi)
          simp only [Thread.heldOn, frameHeld]
          (try dsimp only at *); omega
      | branch t yes no => exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | «while» t body =>
        try dsimp only
        split
        · exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
        · exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | loop body => exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | turn =>
        try dsimp only
        split
        · have h := KvRun.put hw hs hl
          exact ⟨h.1, h.2.1, h.2.2⟩
        · exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | run s w =>
        try dsimp only
        split
        · exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
        · refine KvRun.put (by rw [Machine.addJob_pools]; exact hw) (by rw [Machine.addJob_threads]; exact hs) ?_
          rw [Machine.addJob_pools, Machine.addJob_threads]
          exact same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld])
      | step s dec g w =>
        try dsimp only
        split
        · exact exec_kv p f _ _ hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
        · exact KvRun.put hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | grow j e =>
        try dsimp only
        split
        · have h := KvRun.put hw hs hl
          exact ⟨h.1, h.2.1, h.2.2⟩
        · next h hpart =>
          have hsp := partOn_spec _ _ _ hpart
          have hh : ∀ x, heldOn x [h] = if j = x then h.units else 0 := by
            intro x
            simp only [heldOn, hsp.1, hsp.2, and_true]
            split <;> omega
          split
          · refine exec_kv p f _ _ hw hs (same _ rfl (fun x => ?_))
            rw [hk]
            simp only [Thread.heldOn, frameHeld]
            have := growPartReq_frameHeld x j h.units (h.asked + Machine.value p m th e) k h hpart
            rw [hh x] at this
            by_cases hjx : j = x
            · rw [if_pos hjx] at this; omega
            · rw [if_neg hjx] at this; omega
          · split
            · next hc =>
              simp only [Bool.and_eq_true, decide_eq_true_eq] at hc
              have hfit := Nat.le_trans (Nat.le_add_right _ _) hc.2
              refine exec_kv p f _ _ (withinCaps_setPool _ _ _ _ hw (evictIn_within p _ _ _ j _ _ hfit))
                hs (fun x hx => ?_)
              rw [setPool_length] at hx
              have h0 := hl x hx
              rw [hk] at h0
              simp only [Thread.heldOn, frameHeld]
              have hg := growPartReq_frameHeld x j (roundUp (getAt p.blocks j)
                (h.asked + Machine.value p m th e)) (h.asked + Machine.value p m th e) k h hpart
              rw [hh x] at hg
              by_cases hjx : j = x
              · subst hjx
                rw [getPool_setPool_lt _ _ _ hx]
                simp only [↓reduceIte] at hg
                dsimp only
                omega
              · rw [getPool_setPool_ne _ _ _ _ hjx]
                simp only [hjx, ↓reduceIte] at hg
                omega
            · exact KvRun.put hw hs (same _ rfl (fun x => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
      | hold on reuse cache body =>
        try dsimp only
        split
        · have g1 := releaseAll_kv p.blocks p.caps th.serial th.attrs m.now k m.pools
            (fun i => othersHeld i m.threads th.serial + leasesHeld i th.leases) hw (fun i hi => by
              have := hl i hi
              rw [hk] at this
              (try dsimp only at *); omega)
          have g2 := endLeases_kv p.blocks p.caps th.serial th.attrs m.now th.leases _
            (fun i => othersHeld i m.threads th.serial) g1.1 (fun i hi => by
              rw [g1.2.1] at hi
              have := g1.2.2 i hi
              (try dsimp only at *); omega)
          refine KvRun.put g2.1 hs (fun i hi => ?_)
          rw [g2.2.1, g1.2.1] at hi
          have := g2.2.2 i (by rw [g1.2.1]; exact hi)
          simp only [Thread.heldOn, frameHeld, leasesHeld]
          (try dsimp only at *); omega
        · split
          · exact KvRun.put hw hs (same _ rfl (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]))
          · rename_i h0 _
            refine KvRun.put ?_ hs ?_
            · exact withinCaps_setPool _ _ _ _ hw (hw _)
            · intro i hi
              rw [setPool_length] at hi
              refine Nat.le_trans (same { th with k := .stmts rest :: k } rfl
                (fun j => by rw [hk]; simp only [Thread.heldOn, frameHeld]) i hi)
                (Nat.le_of_eq ?_)
              refine (getPool_setPool_used _ _ _ ?_ i).symm
              rfl

/-! ### Running the ready threads, and the events -/

theorem runReady_kv (p : Program) (f : Nat) (m : Machine) : KvRun p.caps m → KvRun p.caps (runReady p f m) := by
  fun_induction runReady p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (exec_kv p _ _ _ hm.1 hm.2.1 (Ledger.take hm.2.2 hm.2.1 _))

theorem Machine.advanceHolds_kv (caps : List Nat) : ∀ (rs : List Resident) (m : Machine), KvRun caps m →
    KvRun caps (m.advanceHolds rs)
  | [], m, hm => hm
  | r :: rs, m, hm => by
    simp only [Machine.advanceHolds]
    split
    all_goals first
      | exact Machine.advanceHolds_kv caps rs m hm
      | (refine Machine.advanceHolds_kv caps rs _ (KvRun.put hm.1 hm.2.1 (fun i hi => ?_))
         have := Ledger.take hm.2.2 hm.2.1 r.thread i hi
         simp only [Thread.heldOn, advancePart_frameHeld] at this ⊢
         exact this)

theorem leasesHeld_leasesWithout (i id : Nat) : ∀ (ls : List Lease) (l : Lease), leaseNumbered id ls = some l →
    leasesHeld i (leasesWithout id ls) + heldOn i [l.part] = leasesHeld i ls
  | [], _, e => by simp [leaseNumbered] at e
  | x :: xs, l, e => by
    simp only [leaseNumbered] at e
    simp only [leasesWithout]
    split at e
    · rename_i hx
      cases e
      simp only [hx, ↓reduceIte, leasesHeld]
      omega
    · rename_i hx
      simp only [hx, Bool.false_eq_true, ↓reduceIte, leasesHeld]
      have := leasesHeld_leasesWithout i id xs l e
      omega

/-- Every event keeps KV conservation and its ledger. -/
theorem fire_kv (p : Program) (m : Machine) (w : Wake) (hm : KvRun p.caps m) : KvRun p.caps (fire p m w) := by
  cases w with
  | resume t => exact hm
  | arrival a =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | fifoDone s' t =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | iterationEnd s' =>
    simp only [fire]
    have ha := Machine.advanceHolds_kv p.caps (getEngineState m.engines s').residents m hm
    exact ⟨ha.1, ha.2.1, ha.2.2⟩
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact hm
    · next l hl =>
      have e := fun i => leasesHeld_leasesWithout i id _ l hl
      have g := endLease_kv p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now m.pools l
        (fun i => othersHeld i m.threads (getThread m.threads t).serial +
          (frameHeld i (getThread m.threads t).k + leasesHeld i (leasesWithout id (getThread m.threads t).leases)))
        hm.1 (fun i hi => by
          have h1 := Ledger.take hm.2.2 hm.2.1 t i hi
          have h2 := e i
          simp only [Thread.heldOn] at h1
          dsimp only
          omega)
      refine KvRun.put g.1 hm.2.1 (fun i hi => ?_)
      have := g.2.2 i (by rw [g.2.1] at hi; exact hi)
      simp only [Thread.heldOn]
      exact this

/-! ### An admission, a growth -/

/-- A hold admitted from pool `i`'s queue once it `fits` (naming each pool once) keeps KV conservation
and its ledger: its parts go to its thread's continuation as its units go to the pools' `used`. -/
theorem Machine.admitWaiter_kv (p : Program) (m : Machine) (stage : List Nat) (i j : Nat) (hm : KvRun p.caps m)
    (hfit : fits p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial, stage⟩
      (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now
      (getWaiter (getPool m.pools i).queue j).on = true)
    (hnd : ((getWaiter (getPool m.pools i).queue j).on.map HoldOn.pool).Nodup) :
    KvRun p.caps (m.admitWaiter p stage i j) := by
  have hw := Machine.admitWaiter_within p m stage i j hm.1 hfit hnd
  have ht := Ledger.take hm.2.2 hm.2.1 (getWaiter (getPool m.pools i).queue j).thread
  unfold Machine.admitWaiter at hw ⊢
  dsimp only at hw ⊢
  refine KvRun.put hw hm.2.1 (fun k hk => ?_)
  simp only [Thread.heldOn, frameHeld]
  refine Nat.le_trans (Nat.le_of_eq ?_) ((admitOn_ledger p _ _ _ _ _ _ _ _ _ _
    (fun k => othersHeld k m.threads (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial +
      (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).heldOn k) ?_).2 k ?_)
  · simp only [Thread.heldOn]
    omega
  · intro k' hk'
    rw [setPool_length] at hk'
    refine Nat.le_trans (ht k' hk') (Nat.le_of_eq ?_)
    refine (getPool_setPool_used _ _ _ ?_ k').symm
    rfl
  · rw [admitOn_length] at hk
    exact hk

/-- A growth that fits (the check `Machine.serveOne` and `growPreempting` make) keeps KV conservation and
its ledger: the part `partOn` found goes to `want` units as its pool's `used` grows by `want - units` (a
part never shrinks here, but the count needs no such hypothesis: were `want` below the part's units, the
continuation's count would drop while `used` stayed). -/
theorem Machine.grown_kv (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hm : KvRun p.caps m)
    (hpart : partOn (getThread m.threads t).k i = some h)
    (hfit' : (getPool m.pools i).used + (want - h.units) + reservedAfter p m.threads i want h ≤ getAt p.caps i) :
    KvRun p.caps (m.grown p t i want h) := by
  have hfit : (getPool m.pools i).used + (want - h.units) ≤ getAt p.caps i := Nat.le_trans (Nat.le_add_right _ _) hfit'
  have hw : withinCaps p.caps (m.grown p t i want h).pools := by
    simp only [Machine.grown, Machine.put]
    exact withinCaps_setPool _ _ _ _ hm.1 (evictIn_within p _ _ _ i _ _ hfit)
  have ht := Ledger.take hm.2.2 hm.2.1 t
  have hsp := partOn_spec _ _ _ hpart
  simp only [Machine.grown] at hw ⊢
  refine KvRun.put hw hm.2.1 (fun k hk => ?_)
  rw [setPool_length] at hk
  have hg := growPart_frameHeld k i want _ h hpart
  have h1 := ht k hk
  simp only [Thread.heldOn] at h1 ⊢
  by_cases hik : i = k
  · subst hik
    rw [getPool_setPool_lt _ _ _ hk]
    have hh : heldOn i [h] = h.units := by
      simp only [heldOn, hsp.1, hsp.2, and_self, ↓reduceIte]
      omega
    simp only [↓reduceIte] at hg
    dsimp only
    omega
  · rw [getPool_setPool_ne _ _ _ _ hik]
    simp only [hik, ↓reduceIte] at hg
    omega

/-- A waiting `grow` that fits (`retryGrowers`) keeps KV conservation and its ledger, as `Machine.grown_kv`. -/
theorem Machine.grownReq_kv (p : Program) (m : Machine) (t i want req : Nat) (h : Held) (hm : KvRun p.caps m)
    (hpart : partOn (getThread m.threads t).k i = some h)
    (hfit' : (getPool m.pools i).used + (want - h.units) + reservedAfter p m.threads i want h ≤ getAt p.caps i) :
    KvRun p.caps (m.grownReq p t i want req h) := by
  have hfit : (getPool m.pools i).used + (want - h.units) ≤ getAt p.caps i := Nat.le_trans (Nat.le_add_right _ _) hfit'
  have hw : withinCaps p.caps (m.grownReq p t i want req h).pools := by
    simp only [Machine.grownReq, Machine.put]
    exact withinCaps_setPool _ _ _ _ hm.1 (evictIn_within p _ _ _ i _ _ hfit)
  have ht := Ledger.take hm.2.2 hm.2.1 t
  have hsp := partOn_spec _ _ _ hpart
  simp only [Machine.grownReq] at hw ⊢
  refine KvRun.put hw hm.2.1 (fun k hk => ?_)
  rw [setPool_length] at hk
  have hg := growPartReq_frameHeld k i want req _ h hpart
  have h1 := ht k hk
  simp only [Thread.heldOn] at h1 ⊢
  by_cases hik : i = k
  · subst hik
    rw [getPool_setPool_lt _ _ _ hk]
    have hh : heldOn i [h] = h.units := by
      simp only [heldOn, hsp.1, hsp.2, and_self, ↓reduceIte]
      omega
    simp only [↓reduceIte] at hg
    dsimp only
    omega
  · rw [getPool_setPool_ne _ _ _ _ hik]
    simp only [hik, ↓reduceIte] at hg
    omega

/-! ### A preemption -/

theorem heldOn_heldAbandoned (i : Nat) : ∀ (held : List Held), heldOn i (heldAbandoned held) = heldOn i held
  | [] => rfl
  | h :: hs => by
    simp only [heldAbandoned, heldOn_cons, heldOn_heldAbandoned i hs]

/-- A victim's continuation given back up to the hold on pool `i` (`abandonTo`): every hold on the way
gives back its parts (caching their positions, `heldAbandoned`, which changes no part's units), so every
pool stays within its cap, and what is left of the continuation, with whatever else the pools covered
(`R`), is covered still. The hold returned to queue again holds nothing any more: its parts were given
back with the others. -/
theorem abandonTo_kv (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (k : List Frame) (ps : List PoolState) (R : Nat → Nat), withinCaps caps ps →
    (∀ j, j < ps.length → frameHeld j k + R j ≤ (getPool ps j).used) →
    withinCaps caps (abandonTo blocks caps serial attrs now i ps k).1 ∧
      (abandonTo blocks caps serial attrs now i ps k).1.length = ps.length ∧
      ∀ j, j < ps.length → frameHeld j (abandonTo blocks caps serial attrs now i ps k).2.2 + R j ≤
        (getPool (abandonTo blocks caps serial attrs now i ps k).1 j).used
  | [], ps, R, hw, hl => ⟨hw, rfl, hl⟩
  | .release held w :: k, ps, R, hw, hl => by
    have g := giveBack_kv blocks caps serial (cacheKeep ⟨caps, ps, serial, []⟩ attrs now w.cache) (heldAbandoned held) ps
      (fun j => frameHeld j k + R j) hw (fun j hj => by
        have := hl j hj
        rw [heldOn_heldAbandoned]
        simp only [frameHeld] at this
        (try dsimp only at *); omega)
    simp only [abandonTo]
    split
    · refine ⟨g.1, g.2.1, fun j hj => ?_⟩
      have := g.2.2 j hj
      (try dsimp only at *); omega
    · have ih := abandonTo_kv blocks caps serial attrs now i k _ R g.1 (fun j hj => by
        rw [g.2.1] at hj
        exact g.2.2 j hj)
      exact ⟨ih.1, ih.2.1.trans g.2.1, fun j hj => ih.2.2 j (by rw [g.2.1]; exact hj)⟩
  | .stmts _ :: k, ps, R, hw, hl => abandonTo_kv blocks caps serial attrs now i k ps R hw hl
  | .submit :: k, ps, R, hw, hl => abandonTo_kv blocks caps serial attrs now i k ps R hw hl
  | .answer :: k, ps, R, hw, hl => abandonTo_kv blocks caps serial attrs now i k ps R hw hl

/-- A preemption keeps KV conservation and its ledger (`preempt lifo`, `preempt by (keys)`): the victim's
holds up to the preempted one are given back (`abandonTo_kv`: each pool's `used` drops by their units and
its cache takes at most those units, then evicts back within the cap), the requeued hold changes only a
queue, and the victim is written back with what is left of its continuation, which the pools cover with
its leases and every other thread's parts. With no hold to give back the machine's pools and threads are
as they were. -/
theorem Machine.preempt_kv (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (hm : KvRun p.caps m) :
    KvRun p.caps (m.preempt p s i t b).1 := by
  have g := abandonTo_kv p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i
    (getThread m.threads t).k m.pools
    (fun j => othersHeld j m.threads (getThread m.threads t).serial + leasesHeld j (getThread m.threads t).leases)
    hm.1 (fun j hj => by
      have := Ledger.take hm.2.2 hm.2.1 t j hj
      simp only [Thread.heldOn] at this
      (try dsimp only at *); omega)
  simp only [Machine.preempt]
  cases hA : (abandonTo p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i m.pools
      (getThread m.threads t).k).2.1 with
  | none => exact ⟨hm.1, hm.2.1, hm.2.2⟩
  | some w =>
    try dsimp only
    refine KvRun.put (withinCaps_setPool _ _ _ _ g.1 (g.1 _)) hm.2.1 (fun j hj => ?_)
    rw [setPool_length, g.2.1] at hj
    refine Nat.le_trans ?_ (Nat.le_of_eq (getPool_setPool_used _ _ _ ?_ j).symm)
    · have := g.2.2 j hj
      simp only [Thread.heldOn]
      (try dsimp only at *); omega
    · rfl

/-- A growth that preempts while it does not fit (`growPreempting`) keeps KV conservation and its ledger:
each round grows the hold once it fits (`Machine.grown_kv`) or preempts a victim (`Machine.preempt_kv`). -/
theorem growPreempting_kv (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    KvRun p.caps m → KvRun p.caps (growPreempting p s i want t f m b).1 := by
  fun_induction growPreempting p s i want t f m b <;> intro hm
  all_goals first
    | exact ⟨hm.1, hm.2.1, hm.2.2⟩
    | exact Machine.grown_kv p _ _ _ _ _ hm (by assumption) (by assumption)
    | exact Machine.preempt_kv p _ _ _ _ _ hm
    | (rename_i ih; exact ih (Machine.preempt_kv p _ _ _ _ _ hm))

theorem KvRun.served {caps : List Nat} {m : Machine} (hm : KvRun caps m) (s : Nat) (b : Batch) (r : Resident)
    (n : Nat) : KvRun caps (m.served s b r n).1 := ⟨hm.1, hm.2.1, hm.2.2⟩

/-- An engine serves a resident: a growth once it fits, under `preempt none`, or after the preemptions
that make it fit (`growPreempting_kv`). -/
theorem Machine.serveOne_kv (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (hm : KvRun p.caps m) : KvRun p.caps (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact hm
    | exact Machine.grown_kv p m _ _ _ _ hm (by assumption) (by assumption)
    | exact growPreempting_kv p _ _ _ _ _ _ _ hm
    | exact (growPreempting_kv p _ _ _ _ _ _ _ hm).served _ _ _ _

theorem serveIn_kv (p : Program) (s chunk : Nat) (q : Option Expr) : ∀ (ts : List Nat) (m : Machine) (b : Batch),
    KvRun p.caps m → KvRun p.caps (serveIn p s chunk q ts m b).1 := by
  intro ts
  induction ts with
  | nil => intro m b hm; exact hm
  | cons t ts ih =>
    intro m b hm
    simp only [serveIn]
    repeat' split
    all_goals first
      | exact hm
      | exact ih _ _ hm
      | exact Machine.serveOne_kv p _ _ _ _ _ hm
      | exact ih _ _ (Machine.serveOne_kv p _ _ _ _ _ hm)

theorem serveOrdered_kv (p : Program) (s : Nat) (m : Machine) (running : List Nat) (chunk : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) (hm : KvRun p.caps m) :
    KvRun p.caps (serveOrdered p s m running chunk q b keys rs).1 := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_kv p s chunk q _ m b hm

end Serq.Kernel
