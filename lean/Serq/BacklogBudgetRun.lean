module

public import Serq.Full
public import Serq.Rate
public import Serq.BacklogBudget

/-! # The records' bookkeeping of a run (groundwork of issue 14's result 2, case (b))

`Serq.BacklogBudget.conserve` reads iteration records; two of its hypotheses are the engine's
bookkeeping, proved here for every run of every engine (`Serq.BacklogBudget.run_chain`,
`Serq.BacklogBudget.served_next`): the first record has `served = 0`, and each record's `served` is
the previous one's plus its `tokens` (the last one's plus its `tokens` is the machine's `served`);
and the records' starts increase strictly (`Serq.BacklogBudget.start_next`; the invariant `Chain1`:
every start before the machine's clock).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

/-- The records, from `a` tokens served, each serving its `tokens` after the previous, ending at `s`. -/
def Chain0 : Nat → List Record → Nat → Prop
  | a, [], s => a = s
  | a, r :: rs, s => r.served = a ∧ Chain0 (r.served + r.tokens) rs s

theorem chain0_append : ∀ (a : Nat) (rs : List Record) (s : Nat) (r : Record), Chain0 a rs s →
    r.served = s → Chain0 a (appendRecord rs r) (s + r.tokens)
  | a, [], s, r, h, hr => by
    simp only [Chain0] at h
    simp only [appendRecord, Chain0]
    exact ⟨by omega, by omega⟩
  | a, x :: xs, s, r, h, hr => by
    simp only [Chain0] at h
    simp only [appendRecord, Chain0]
    exact ⟨h.1, chain0_append _ xs s r h.2 hr⟩

theorem apply_served (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), (apply eng sessions now m l kept).served = m.served
  | [], m, kept => rfl
  | r :: rs, m, kept => by
    have ih := apply_served eng sessions now rs
    simp only [apply]
    repeat' split
    all_goals first | rfl | (simp only [ih]; done) | simp [ih]

theorem step_chain (eng : Engine) (sessions : List Session) (m : Machine)
    (h : Chain0 0 m.records m.served) : Chain0 0 (step eng sessions m).records (step eng sessions m).served := by
  unfold step
  simp only
  repeat' split
  all_goals first
    | exact h
    | (simp only [apply_records, apply_served]
       exact chain0_append 0 m.records m.served _ h rfl)

theorem run_chain (eng : Engine) (sessions : List Session) :
    ∀ (fuel : Nat) (m : Machine), Chain0 0 m.records m.served →
      Chain0 0 (run eng sessions fuel m).records (run eng sessions fuel m).served
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_chain eng sessions fuel _ (step_chain eng sessions m h)

/-- Read by index: each record's `served` is the previous one's plus its `tokens`. -/
theorem chain0_next : ∀ (a : Nat) (rs : List Record) (s : Nat), Chain0 a rs s →
    ∀ (i : Nat) (hi : i + 1 < rs.length),
      rs[i + 1].served = rs[i].served + rs[i].tokens
  | _, [], _, _, _, hi => by simp at hi
  | _, [_], _, _, _, hi => by simp at hi
  | a, x :: y :: ys, s, h, 0, _ => by
    simp only [Chain0] at h
    simp only [List.getElem_cons_succ, List.getElem_cons_zero]
    exact h.2.1
  | a, x :: y :: ys, s, h, i + 1, hi => by
    simp only [Chain0] at h
    have := chain0_next _ (y :: ys) s h.2 i (by simp at hi ⊢; omega)
    simpa using this

theorem chain0_first : ∀ (a : Nat) (rs : List Record) (s : Nat), Chain0 a rs s →
    ∀ (hi : 0 < rs.length), rs[0].served = a
  | _, [], _, _, hi => by simp at hi
  | _, x :: _, _, h, _ => h.1

/-- The records' starts, from `a` on, strictly increasing, all before `now`. -/
def Chain1 : Nat → List Record → Nat → Prop
  | a, [], now => a ≤ now
  | a, r :: rs, now => a ≤ r.start ∧ Chain1 (r.start + 1) rs now

theorem chain1_mono : ∀ (a : Nat) (rs : List Record) (n n' : Nat), Chain1 a rs n → n ≤ n' → Chain1 a rs n'
  | a, [], n, n', h, hn => by simp only [Chain1] at h ⊢; omega
  | a, r :: rs, n, n', h, hn => ⟨h.1, chain1_mono _ rs n n' h.2 hn⟩

theorem chain1_append : ∀ (a : Nat) (rs : List Record) (now : Nat) (r : Record), Chain1 a rs now →
    r.start = now → Chain1 a (appendRecord rs r) (now + 1)
  | a, [], now, r, h, hr => by
    simp only [Chain1] at h
    simp only [appendRecord, Chain1]
    exact ⟨by omega, by omega⟩
  | a, x :: xs, now, r, h, hr => ⟨h.1, chain1_append _ xs now r h.2 hr⟩

theorem step_chain1 (eng : Engine) (sessions : List Session) (m : Machine)
    (h : Chain1 0 m.records m.now) : Chain1 0 (step eng sessions m).records (step eng sessions m).now := by
  have hlater := duePending_later m.now m.pending
  unfold step
  cases hd : duePending m.now m.pending with
  | mk due later =>
    rw [hd] at hlater
    dsimp only
    repeat' split
    all_goals first
      | exact h
      | exact chain1_mono 0 m.records m.now _ h (Nat.le_of_lt (hlater _ (by simp)))
      | (dsimp only
         rw [apply_records]
         exact chain1_append 0 m.records m.now _ h rfl)

theorem run_chain1 (eng : Engine) (sessions : List Session) :
    ∀ (fuel : Nat) (m : Machine), Chain1 0 m.records m.now →
      Chain1 0 (run eng sessions fuel m).records (run eng sessions fuel m).now
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_chain1 eng sessions fuel _ (step_chain1 eng sessions m h)

theorem chain1_next : ∀ (a : Nat) (rs : List Record) (n : Nat), Chain1 a rs n →
    ∀ (i : Nat) (hi : i + 1 < rs.length), rs[i].start < rs[i + 1].start
  | _, [], _, _, _, hi => by simp at hi
  | _, [_], _, _, _, hi => by simp at hi
  | a, x :: y :: ys, n, h, 0, _ => by
    simp only [Chain1] at h
    simp only [List.getElem_cons_succ, List.getElem_cons_zero]
    omega
  | a, x :: y :: ys, n, h, i + 1, hi => by
    simp only [Chain1] at h
    have := chain1_next _ (y :: ys) n h.2 i (by simp at hi ⊢; omega)
    simpa using this

end BacklogBudget

/-- **The records' `served` bookkeeping, on every run**: the first record of a run from `init` has
`served = 0` and each record's `served` is the previous one's plus its `tokens` — the hypotheses
`hs0` and the `served` part of `hnext` of `Serq.BacklogBudget.conserve`, for any engine, sessions
and fuel. -/
theorem BacklogBudget.served_next (eng : Engine) (sessions : List Session) (fuel : Nat) :
    (∀ (hi : 0 < (run eng sessions fuel (init sessions)).records.length),
        (run eng sessions fuel (init sessions)).records[0].served = 0) ∧
    ∀ (i : Nat) (hi : i + 1 < (run eng sessions fuel (init sessions)).records.length),
      (run eng sessions fuel (init sessions)).records[i + 1].served =
        (run eng sessions fuel (init sessions)).records[i].served +
          (run eng sessions fuel (init sessions)).records[i].tokens := by
  have h := BacklogBudget.run_chain eng sessions fuel (init sessions) (by simp [init, BacklogBudget.Chain0])
  exact ⟨BacklogBudget.chain0_first _ _ _ h, BacklogBudget.chain0_next _ _ _ h⟩

end Serq

namespace Serq

/-- **The records' starts, on every run**: each record of a run from `init` starts strictly after the
previous one — the `start` part of `hnext` of `Serq.BacklogBudget.conserve`, for any engine, sessions
and fuel. -/
theorem BacklogBudget.start_next (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ∀ (i : Nat) (hi : i + 1 < (run eng sessions fuel (init sessions)).records.length),
      (run eng sessions fuel (init sessions)).records[i].start <
        (run eng sessions fuel (init sessions)).records[i + 1].start := by
  have h := BacklogBudget.run_chain1 eng sessions fuel (init sessions) (by simp [init, BacklogBudget.Chain1])
  exact BacklogBudget.chain1_next _ _ _ h

end Serq
