module

public import Serq.Kernel

/-! # The granule's tiles, and claims about a kernel program's own run

Issue 14, result 4 (Bari et al. §4.2, RAD's optimal tiling). An engine with a prefill granule `g`
(`granule g`, `Engine.granule`) gives a prefill, when the chunk it may take (its remainder up to the
chunk cap and the budget left, `chunkFor`) is short of its remainder, that chunk cut down to whole
granules (`tokensFor`), and passes over one cut to none (`Resident.passedOver`), admitting no one
after it (`Batch.passed`). So every prefill chunk is whole granules or the prefill's whole remainder
(`tokensFor_granule`), and a prefill whose remainder is whole granules takes whole granules
(`tokensFor_tiled`); the batch's prefill tokens stay whole granules as such chunks are served and given
back (`Batch.serve_tiled`, `Batch.unserve_tiled`).

A claim of a program of the kernel fragment that the engine model does not take (its engine has a
granule) is stated about the program's own run (`EveryIterationOfRun`, `SomeIterationOfRun`): the run of
its bundled workload to its end (`outOfFuel = false`: the fuel was enough, so the records are the whole
path's), every (some) iteration record of the claim's engine stage satisfying the claim's expression.
-/

@[expose] public section

namespace Serq.Kernel

/-- The run of `p` with `fuel` ended on its own (the fuel sufficed) and every iteration record of stage
`s` satisfies `pred`. -/
def EveryIterationOfRun (p : Program) (s fuel : Nat) (pred : Iteration → Bool) : Prop :=
  (runProgram p fuel).outOfFuel = false ∧
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, pred r = true

/-- The run of `p` with `fuel` ended on its own and some iteration record of stage `s` satisfies
`pred`. -/
def SomeIterationOfRun (p : Program) (s fuel : Nat) (pred : Iteration → Bool) : Prop :=
  (runProgram p fuel).outOfFuel = false ∧
    ∃ r ∈ (getEngineState (runProgram p fuel).engines s).records, pred r = true

/-- Every record of a list satisfies `pred` (decidable by evaluation). -/
def allRecords (pred : Iteration → Bool) : List Iteration → Bool
  | [] => true
  | r :: rs => pred r && allRecords pred rs

theorem allRecords_mem (pred : Iteration → Bool) : ∀ (rs : List Iteration), allRecords pred rs = true →
    ∀ r ∈ rs, pred r = true
  | [], _, _, h => nomatch h
  | x :: xs, h, r, hr => by
    simp only [allRecords, Bool.and_eq_true] at h
    cases hr with
    | head => exact h.1
    | tail _ hr => exact allRecords_mem pred xs h.2 r hr

/-- An `EveryIterationOfRun` by evaluation: the run ended, and `allRecords` of its records is true. -/
theorem EveryIterationOfRun.of_eval (p : Program) (s fuel : Nat) (pred : Iteration → Bool)
    (h : ((runProgram p fuel).outOfFuel == false &&
      allRecords pred (getEngineState (runProgram p fuel).engines s).records) = true) :
    EveryIterationOfRun p s fuel pred := by
  simp only [Bool.and_eq_true, beq_iff_eq] at h
  exact ⟨h.1, allRecords_mem pred _ h.2⟩

/-! ### The granule's chunks -/

theorem chunkFor_le_rem (chunk budget : Nat) (r : Resident) : chunkFor chunk budget r ≤ r.rem := by
  unfold chunkFor
  split
  · exact Nat.min_le_left _ _
  · exact Nat.le_trans (Nat.min_le_left _ _) (Nat.min_le_left _ _)

/-- A prefill's chunk under a granule `g ≠ 0` is whole granules, or its whole remainder. -/
theorem tokensFor_granule (chunk g budget : Nat) (r : Resident) (hd : r.decode = false) (hg : g ≠ 0) :
    tokensFor chunk g budget r % g = 0 ∨ tokensFor chunk g budget r = r.rem := by
  have hle := chunkFor_le_rem chunk budget r
  unfold tokensFor
  simp only [hd, Bool.false_eq_true, if_false]
  split
  · exact Or.inl (Nat.mul_mod_left _ _)
  · rename_i h
    exact Or.inr (by omega)

/-- A prefill whose remainder is whole granules takes whole granules. -/
theorem tokensFor_tiled (chunk g budget : Nat) (r : Resident) (hd : r.decode = false) (hg : g ≠ 0)
    (hr : r.rem % g = 0) : tokensFor chunk g budget r % g = 0 := by
  rcases tokensFor_granule chunk g budget r hd hg with h | h
  · exact h
  · rw [h]; exact hr

/-- What is left of a prefill whose remainder and chunk are whole granules is whole granules. -/
theorem rem_sub_tiled (a n g : Nat) (ha : a % g = 0) (hn : n % g = 0) : (a - n) % g = 0 := by
  obtain ⟨x, rfl⟩ := Nat.dvd_of_mod_eq_zero ha
  obtain ⟨y, rfl⟩ := Nat.dvd_of_mod_eq_zero hn
  rw [← Nat.mul_sub]
  exact Nat.mul_mod_right _ _

/-- Serving a decode, or a prefill whole granules, keeps the batch's prefill tokens whole granules. -/
theorem Batch.serve_tiled (b : Batch) (r : Resident) (n g : Nat) (hb : b.prefilled % g = 0)
    (hn : r.decode = true ∨ n % g = 0) : (b.serve r n).prefilled % g = 0 := by
  unfold Batch.serve
  cases hd : r.decode
  · simp only [Bool.false_eq_true, if_false]
    rcases hn with h | h
    · rw [hd] at h; exact absurd h (by decide)
    · exact (Nat.add_mod _ _ _).trans (by rw [hb, h, Nat.add_zero, Nat.zero_mod])
  · simpa using hb

/-- Giving back a prefill's whole granules keeps the batch's prefill tokens whole granules. -/
theorem Batch.unserve_tiled (b : Batch) (r : Resident) (n g : Nat) (hb : b.prefilled % g = 0)
    (hn : r.decode = true ∨ n % g = 0) : (b.unserve r n).prefilled % g = 0 := by
  unfold Batch.unserve
  cases hd : r.decode
  · simp only [Bool.false_eq_true, if_false]
    rcases hn with h | h
    · rw [hd] at h; exact absurd h (by decide)
    · exact rem_sub_tiled _ _ _ hb h
  · simpa using hb

end Serq.Kernel
