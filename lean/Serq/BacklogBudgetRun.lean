module

public import Serq.Full
public import Serq.BacklogBudget

/-! # The records' bookkeeping of a run (groundwork of issue 14's result 2, case (b))

`Serq.BacklogBudget.conserve` reads iteration records; two of its hypotheses are the engine's
bookkeeping, proved here for every run of every engine (`Serq.BacklogBudget.run_chain`,
`Serq.BacklogBudget.served_next`): the first record has `served = 0`, and each record's `served` is
the previous one's plus its `tokens` (the last one's plus its `tokens` is the machine's `served`).
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
