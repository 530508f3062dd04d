module

public import Serq.DriftMachine

/-! # The drift chain on the machine: the turns due at a step are those of its time

Under `Serq.drift_machine_step`'s hypotheses, at every machine of every run the pending turns are
exactly the sessions' first turns due no earlier than the clock (`OnTime`), so the turns due at a
step are the first turns of the sessions arriving at the step's time (`Serq.drift_machine_due`): the
chain's `k` at that step is the number of sessions arriving then, none delayed and none lost.
-/

@[expose] public section

namespace Serq

namespace DriftMachine

open Backlog BacklogDecode BacklogMany

theorem duePending_filter (now : Nat) : ∀ (ps : List Pending),
    (duePending now ps).1 = ps.filter (fun p => decide (p.time ≤ now)) ∧
      (duePending now ps).2 = ps.filter (fun p => decide (now < p.time))
  | [] => by simp [duePending]
  | p :: ps => by
    obtain ⟨i1, i2⟩ := duePending_filter now ps
    simp only [duePending]
    generalize duePending now ps = dl at i1 i2 ⊢
    obtain ⟨d, l⟩ := dl
    dsimp only at i1 i2 ⊢
    subst i1 i2
    split
    · rename_i h
      have h' : ¬ now < p.time := by omega
      simp [h, h']
    · rename_i h
      have h' : now < p.time := by omega
      simp [h, h']

/-- The pending turns are the sessions' first turns due no earlier than the clock. -/
def OnTime (ss : List Session) (m : Machine) : Prop :=
  m.pending = (firstTurns 0 ss).filter (fun p => decide (m.now ≤ p.time))

theorem step_onTime (eng : Engine) (ss : List Session) (W bW N : Nat) (m : Machine)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks)
    (h : Inv eng.blockSize W bW N m) (hs : SortedT m.pending) (ht : OnTime ss m) :
    OnTime ss (step eng ss m) := by
  obtain ⟨_, _, e1, e2⟩ := step_clock eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs
  have hf := duePending_filter m.now m.pending
  have hl := duePending_later m.now m.pending
  have hsl := hl.2 hs
  unfold OnTime at ht ⊢
  generalize firstTurns 0 ss = F at ht ⊢
  rw [e1]
  rcases e2 with hn | ⟨hk, ⟨hnil, hn⟩ | ⟨q, qs, hq, hn⟩⟩
  · rw [hn, hf.2, ht, List.filter_filter]
    apply List.filter_congr
    intro x _
    rcases Nat.lt_or_ge m.now x.time with hx | hx
    · have h1 : m.now ≤ x.time := by omega
      have h2 : m.now + 1 ≤ x.time := by omega
      simp [hx, h1, h2]
    · have h2 : ¬ m.now + 1 ≤ x.time := by omega
      have h3 : ¬ m.now < x.time := by omega
      simp [h3, h2]
  · rw [hnil, hn, ← ht]
    cases hp : m.pending with
    | nil => rfl
    | cons x xs =>
      rcases Nat.lt_or_ge m.now x.time with hx | hx
      · have := hf.2
        rw [hnil, hp] at this
        simp [hx] at this
      · rw [hf.1, hp] at hk
        have hx' : x.time ≤ m.now := hx
        simp [List.filter_cons, hx'] at hk
  · rw [hn]
    have hqt : m.now < q.time := hl.1 q (by rw [hq]; exact List.mem_cons_self)
    have key : ∀ x ∈ F, (decide (m.now < x.time) && decide (m.now ≤ x.time)) = decide (q.time ≤ x.time) := by
      intro x hxF
      rcases Nat.lt_or_ge m.now x.time with hx | hx
      · have hmem : x ∈ (duePending m.now m.pending).2 := by
          rw [hf.2, ht]
          simp [List.mem_filter, hxF, hx, Nat.le_of_lt hx]
        rw [hq] at hmem
        have hsq := hsl
        rw [hq] at hsq
        have hle : q.time ≤ x.time := by
          rcases List.mem_cons.mp hmem with rfl | hm
          · exact Nat.le_refl _
          · exact hsq.1 x hm
        have h1 : m.now ≤ x.time := by omega
        simp [hx, h1, hle]
      · have h3 : ¬ m.now < x.time := by omega
        have h4 : ¬ q.time ≤ x.time := by omega
        simp [h3, h4]
    rw [hf.2, ht, List.filter_filter]
    exact List.filter_congr key

theorem run_onTime (eng : Engine) (ss : List Session) (W bW N : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (m : Machine), Inv eng.blockSize W bW N m → SortedT m.pending → OnTime ss m →
      OnTime ss (run eng ss fuel m)
  | 0, _, _, _, ht => ht
  | fuel + 1, m, h, hs, ht => by
    simp only [run]
    split
    · exact ht
    · obtain ⟨c1, _⟩ := step_clock eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs
      exact run_onTime eng ss W bW N hch hcache hB hW hbW hfit hS hcap hkv fuel _
        (step_inv eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h).1 c1
        (step_onTime eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs ht)

end DriftMachine

/-- **The turns due at a step are the sessions arriving at its time**: under `drift_machine_step`'s
hypotheses, at every machine of every run the turns due at its step are the sessions' first turns
whose time is the machine's clock (`firstTurns` holds one per session, at its `arrive`), so the
chain's `k` at each step is the number of sessions arriving at that time. -/
theorem drift_machine_due (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : DriftMachine.OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (fuel : Nat) :
    (duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1
      = (firstTurns 0 ss).filter (fun p => decide (p.time = (run eng ss fuel (init ss)).now)) := by
  have ht := DriftMachine.run_onTime eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _
    (DriftMachine.init_inv eng.blockSize W bW ss hS) (DriftMachine.firstTurns_sorted 0 ss)
    (by
      simp only [DriftMachine.OnTime, init]
      generalize firstTurns 0 ss = l
      induction l with
      | nil => rfl
      | cons a l ih =>
        rw [List.filter_cons, if_pos (by simp)]
        exact congrArg (a :: ·) ih)
  unfold DriftMachine.OnTime at ht
  generalize run eng ss fuel (init ss) = m at ht ⊢
  rw [(DriftMachine.duePending_filter m.now m.pending).1, ht, List.filter_filter]
  apply List.filter_congr
  intro x _
  rcases Nat.lt_or_ge m.now x.time with hx | hx
  · have h1 : ¬ x.time ≤ m.now := by omega
    have h2 : ¬ x.time = m.now := by omega
    simp [h1, h2]
  · rcases Nat.lt_or_ge x.time m.now with hy | hy
    · have h1 : ¬ m.now ≤ x.time := by omega
      have h2 : ¬ x.time = m.now := by omega
      simp [h1, h2]
    · have h1 : x.time = m.now := by omega
      simp [h1]

end Serq
