module

public import Serq.OneAtATime
public import Serq.BacklogDecode

/-! # The arrivals' count of every record (issue 14, result 2, case (b))

`Serq.BacklogBudget.conserve` reads each record's `arrived` as a counting function of its start,
`arrived i = N (start i)`. This module proves it for every run of every engine and every workload:
each record's `arrived` is the number of sessions with a turn that arrive by its start
(`Serq.BacklogBudget.arrived_count`, `N = arrivedBy ss`). The invariant (`ArrInv`): for every time `t`
from the machine's clock on, the sessions arrived so far plus the first turns still pending by `t`
(`firstBy t`) are the sessions arriving by `t`; next turns (turn `≥ 1`) never count, the pending turns
due at a step are all those pending by its clock (`due_split`), and the clock only moves forward, past
no pending turn.

With sessions at least `g` apart (`GappedDecode`), the count is spaced as `conserve` reads it: monotone,
with at most `⌈(t − s) / g⌉` arrivals in `(s, t]` (`Serq.BacklogBudget.arrivals_spaced`).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

/-- The first turns (turn 0) of a pending list due by `t`. -/
def firstBy (t : Nat) : List Pending → Nat
  | [] => 0
  | p :: ps => (if p.turn = 0 ∧ p.time ≤ t then 1 else 0) + firstBy t ps

/-- The sessions with a turn arriving by `t`. -/
def arrivedBy (t : Nat) : List Session → Nat
  | [] => 0
  | s :: ss => (match s.turns with
    | [] => 0
    | _ :: _ => if s.arrive ≤ t then 1 else 0) + arrivedBy t ss

theorem firstBy_insert (t : Nat) (p : Pending) : ∀ (l : List Pending),
    firstBy t (insertPending p l) = firstBy t [p] + firstBy t l
  | [] => by simp [insertPending, firstBy]
  | q :: qs => by
    simp only [insertPending]
    split
    · simp only [firstBy]; omega
    · simp only [firstBy, firstBy_insert t p qs]; omega

theorem firstTurns_firstBy (t : Nat) : ∀ (i : Nat) (ss : List Session),
    firstBy t (firstTurns i ss) = arrivedBy t ss
  | _, [] => by simp [firstTurns, firstBy, arrivedBy]
  | i, s :: ss => by
    have ih := firstTurns_firstBy t (i + 1) ss
    simp only [firstTurns, arrivedBy]
    cases h : s.turns with
    | nil => simp [ih]
    | cons x xs =>
      simp only [firstBy_insert, ih, firstBy]
      by_cases ha : s.arrive ≤ t <;> simp [ha]

theorem due_split (now t : Nat) (hnt : now ≤ t) : ∀ (ps : List Pending),
    firstBy t ps = countFirst (duePending now ps).1 + firstBy t (duePending now ps).2 ∧
      firstBy now (duePending now ps).2 = 0
  | [] => by simp [duePending, firstBy, countFirst]
  | p :: ps => by
    obtain ⟨ih1, ih2⟩ := due_split now t hnt ps
    simp only [duePending]
    cases h : duePending now ps with
    | mk d l =>
      rw [h] at ih1 ih2
      dsimp only at ih1 ih2 ⊢
      split
      · simp only [firstBy, countFirst]
        refine ⟨?_, ih2⟩
        repeat' split
        all_goals omega
      · simp only [firstBy]
        refine ⟨?_, ?_⟩
        all_goals (repeat' split)
        all_goals omega

theorem firstBy_nextTurn (t : Nat) (ss : List Session) (now : Nat) (req : Req) (ps : List Pending) :
    firstBy t (nextTurn ss now req ps) = firstBy t ps := by
  unfold nextTurn
  split
  · rfl
  · split
    · rfl
    · rw [firstBy_insert]; simp [firstBy]

theorem apply_counts (eng : Engine) (ss : List Session) (now t : Nat) :
    ∀ (l : List Res) (M : Machine) (kept : List Res),
      (apply eng ss now M l kept).arrived = M.arrived ∧
        firstBy t (apply eng ss now M l kept).pending = firstBy t M.pending
  | [], M, kept => ⟨rfl, rfl⟩
  | r :: rs, M, kept => by
    have ih := apply_counts eng ss now t rs
    simp only [apply]
    repeat' split
    all_goals first
      | exact ih _ _
      | (obtain ⟨a, b⟩ := ih _ _
         refine ⟨a, ?_⟩
         rw [b]
         exact firstBy_nextTurn t ss now _ _)
      | (simp only [ih]; done)
      | simp [ih, firstBy_nextTurn]

/-- The invariant: from the clock on, the sessions arrived so far and the first turns pending by `t` are
the sessions arriving by `t`; every record's `arrived` counts the sessions arrived by its start. -/
def ArrInv (ss : List Session) (m : Machine) : Prop :=
  (∀ t, m.now ≤ t → m.arrived + firstBy t m.pending = arrivedBy t ss) ∧
    ∀ x ∈ m.records, x.arrived = arrivedBy x.start ss

theorem step_arr (eng : Engine) (ss : List Session) (m : Machine) (h : ArrInv ss m) :
    ArrInv ss (step eng ss m) := by
  obtain ⟨h1, h2⟩ := h
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  obtain ⟨_, dp2⟩ := OneAtATime.duePending_mem m.now m.pending due later hdp
  have key : ∀ t, m.now ≤ t → m.arrived + countFirst due + firstBy t later = arrivedBy t ss := by
    intro t ht
    have := (due_split m.now t ht m.pending).1
    rw [hdp] at this
    have := h1 t ht
    dsimp only at *
    omega
  have hrec : m.arrived + countFirst due = arrivedBy m.now ss := by
    have := (due_split m.now m.now (Nat.le_refl _) m.pending).2
    rw [hdp] at this
    have := key m.now (Nat.le_refl _)
    dsimp only at *
    omega
  dsimp only
  generalize submit eng ss due m.waiting = waiting
  cases later with
  | nil =>
    dsimp only
    split
    · exact ⟨fun t ht => by simpa [firstBy] using key t ht, h2⟩
    · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
      generalize plan eng chunk m waiting = P
      split
      · exact ⟨fun t ht => by simpa [firstBy] using key t ht, h2⟩
      · refine ⟨fun t ht => ?_, fun x hx => ?_⟩
        · dsimp only at ht ⊢
          rw [(apply_counts eng ss m.now t _ _ []).1, (apply_counts eng ss m.now t _ _ []).2]
          dsimp only
          exact key t (by omega)
        · dsimp only at hx
          rw [apply_records] at hx
          rcases (mem_appendRecord _ _ _).mp hx with hx | hx
          · exact h2 x hx
          · subst hx; exact hrec
  | cons q qs =>
    have hq := (dp2 q (by simp)).2
    dsimp only
    split
    · exact ⟨fun t ht => key t (by dsimp only at ht; omega), h2⟩
    · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
      generalize plan eng chunk m waiting = P
      split
      · exact ⟨fun t ht => key t (by dsimp only at ht; omega), h2⟩
      · refine ⟨fun t ht => ?_, fun x hx => ?_⟩
        · dsimp only at ht ⊢
          rw [(apply_counts eng ss m.now t _ _ []).1, (apply_counts eng ss m.now t _ _ []).2]
          dsimp only
          exact key t (by omega)
        · dsimp only at hx
          rw [apply_records] at hx
          rcases (mem_appendRecord _ _ _).mp hx with hx | hx
          · exact h2 x hx
          · subst hx; exact hrec

theorem run_arr (eng : Engine) (ss : List Session) :
    ∀ (fuel : Nat) (m : Machine), ArrInv ss m → ArrInv ss (run eng ss fuel m)
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_arr eng ss fuel _ (step_arr eng ss m h)

theorem zero_of_mul_le (k g : Nat) (hg : 0 < g) (h : k * g ≤ 0) : k = 0 := by
  cases k with
  | zero => rfl
  | succ k =>
    have : (k + 1) * g = k * g + g := Nat.succ_mul k g
    omega

/-- Sessions at least `g` apart from `y` on: at most `(t + g - y) / g` of them arrive by `t`. -/
theorem arrivedBy_le (g P D : Nat) (hg : 0 < g) : ∀ (y t : Nat) (ss : List Session),
    GappedDecode g P D y ss → arrivedBy t ss * g ≤ t + g - y
  | _, _, [], _ => by simp [arrivedBy]
  | y, t, x :: ss, ⟨hy, ⟨t0, ht0, _, _⟩, hr⟩ => by
    have ih := arrivedBy_le g P D hg (x.arrive + g) t ss hr
    simp only [arrivedBy, ht0]
    by_cases ha : x.arrive ≤ t
    · simp only [ha, if_true]; rw [Nat.add_mul, Nat.one_mul]; omega
    · simp only [ha, if_false, Nat.zero_add]; omega

theorem arrivedBy_gap (g P D : Nat) (hg : 0 < g) : ∀ (y : Nat) (ss : List Session),
    GappedDecode g P D y ss → ∀ s t, s ≤ t →
      arrivedBy s ss ≤ arrivedBy t ss ∧ (arrivedBy t ss - arrivedBy s ss) * g ≤ t - s + g - 1
  | _, [], _ => by intro s t _; simp [arrivedBy]
  | y, x :: ss, ⟨hy, ⟨t0, ht0, _, _⟩, hr⟩ => by
    intro s t hst
    obtain ⟨i1, i2⟩ := arrivedBy_gap g P D hg (x.arrive + g) ss hr s t hst
    have As := arrivedBy_le g P D hg (x.arrive + g) s ss hr
    have At := arrivedBy_le g P D hg (x.arrive + g) t ss hr
    simp only [arrivedBy, ht0]
    by_cases h1 : x.arrive ≤ s
    · have h2 : x.arrive ≤ t := by omega
      simp only [h1, h2, if_true]
      have e : 1 + arrivedBy t ss - (1 + arrivedBy s ss) = arrivedBy t ss - arrivedBy s ss := by omega
      rw [e]
      exact ⟨by omega, i2⟩
    · have hs0 : arrivedBy s ss = 0 := zero_of_mul_le _ g hg (by omega)
      by_cases h2 : x.arrive ≤ t
      · simp only [h1, h2, if_true, if_false, Nat.zero_add, hs0, Nat.sub_zero]
        refine ⟨by omega, ?_⟩
        rw [Nat.add_mul, Nat.one_mul]; omega
      · have ht0' : arrivedBy t ss = 0 := zero_of_mul_le _ g hg (by omega)
        simp [h1, h2, hs0, ht0']

end BacklogBudget

/-- **The arrivals' count of every record**: on every run from `init` of every engine with every
workload and fuel, each record's `arrived` is the number of sessions with a turn that arrive by its
start, `arrivedBy x.start ss` — the hypothesis `arrived i = N (start i)` of
`Serq.BacklogBudget.conserve`, with `N = arrivedBy · ss`. -/
theorem BacklogBudget.arrived_count (eng : Engine) (ss : List Session) (fuel : Nat) :
    ∀ x ∈ (run eng ss fuel (init ss)).records, x.arrived = BacklogBudget.arrivedBy x.start ss :=
  (BacklogBudget.run_arr eng ss fuel (init ss)
    ⟨fun t _ => by simp [init, BacklogBudget.firstTurns_firstBy], fun _ h => by simp [init] at h⟩).2

/-- **The arrivals' count is spaced by `g`**: sessions at least `g` apart (`GappedDecode g P D x ss`, any
first arrival `x`, `0 < g`) arrive by `t` in a count `N t = arrivedBy t ss` that is monotone with at most
`⌈(t − s) / g⌉` arrivals in `(s, t]` — the hypothesis `hN` of `Serq.BacklogBudget.conserve`. -/
theorem BacklogBudget.arrivals_spaced (g P D x : Nat) (ss : List Session) (hg : 0 < g)
    (hw : GappedDecode g P D x ss) :
    ∀ s t, s ≤ t → BacklogBudget.arrivedBy s ss ≤ BacklogBudget.arrivedBy t ss ∧
      (BacklogBudget.arrivedBy t ss - BacklogBudget.arrivedBy s ss) * g ≤ t - s + g - 1 :=
  BacklogBudget.arrivedBy_gap g P D hg x ss hw

end Serq
