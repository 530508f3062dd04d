module

public import Serq.BacklogBudgetRun
public import Serq.BacklogBudgetArrive

/-! # Work conservation on the engine's runs (issue 14, result 2, case (b): the assembly)

`Serq.BacklogBudget.conserve` is stated over indexed records. This module reads it on the records of a
run of the engine, discharging the hypotheses proved for every run — `served` (`served_next`), the
starts (`start_next`), the arrivals' count (`arrived_count`) and its spacing for sessions at least `g`
apart (`arrivals_spaced`) — so that what remains of the bounded backlog in the budget-cut case is the
engine's own side: the first record (`0 < start`, nothing arrived before it), the idle gaps (nothing
arrives strictly between two records' starts but at the later one), and that every iteration is a
reset or a full iteration followed one step later (`Serq.BacklogBudget.backlog_of_resets`).
-/

@[expose] public section

namespace Serq

/-- **The bounded backlog on a run, from resets** (the records-level argument of
`Serq.BacklogBudget.conserve` read on the engine's records). Any engine, fuel, and sessions at least
`g` apart (`GappedDecode g P D x ss`, `0 < g`) with `W ≤ budget · g`; `rs` the run's records. If the first
record starts after time 0 with no session arrived before it, nothing arrives strictly between two
consecutive records' starts but at the later one, and every record but the last is a reset
(`arrived · W ≤ served + tokens + C`) or serves the full budget and is followed one step later, then
every record has `arrived · W ≤ served + W + C`. -/
theorem BacklogBudget.backlog_of_resets (eng : Engine) (ss : List Session) (fuel g P D x W C : Nat)
    (rs : List Record) (hrs : rs = (run eng ss fuel (init ss)).records)
    (hg : 0 < g) (hw : GappedDecode g P D x ss) (hW : W ≤ eng.budget * g)
    (h0 : ∀ hi : 0 < rs.length, 0 < rs[0].start ∧ BacklogBudget.arrivedBy (rs[0].start - 1) ss = 0)
    (hidle : ∀ (i : Nat) (hi : i + 1 < rs.length),
      BacklogBudget.arrivedBy (rs[i + 1].start - 1) ss = BacklogBudget.arrivedBy rs[i].start ss)
    (hstep : ∀ (i : Nat) (hi : i + 1 < rs.length), rs[i].arrived * W ≤ rs[i].served + rs[i].tokens + C ∨
      (rs[i].tokens = eng.budget ∧ rs[i + 1].start = rs[i].start + 1)) :
    ∀ (i : Nat) (hi : i < rs.length), rs[i].arrived * W ≤ rs[i].served + W + C := by
  intro i hi
  have hpos : 0 < rs.length := by omega
  have hsv : (∀ hi : 0 < rs.length, rs[0].served = 0) ∧
      ∀ (i : Nat) (hi : i + 1 < rs.length), rs[i + 1].served = rs[i].served + rs[i].tokens := by
    subst hrs; exact BacklogBudget.served_next eng ss fuel
  have hst : ∀ (i : Nat) (hi : i + 1 < rs.length), rs[i].start < rs[i + 1].start := by
    subst hrs; exact BacklogBudget.start_next eng ss fuel
  have harr : ∀ r ∈ rs, r.arrived = BacklogBudget.arrivedBy r.start ss := by
    subst hrs; exact BacklogBudget.arrived_count eng ss fuel
  let f : Nat → Record := fun k => if h : k < rs.length then rs[k] else ⟨0, 0, 0, 0, 0, 0, 0, 0, 0, 0⟩
  have hf : ∀ (k : Nat) (hk : k < rs.length), f k = rs[k] := fun k hk => dif_pos hk
  have := BacklogBudget.conserve W eng.budget C g rs.length (fun t => BacklogBudget.arrivedBy t ss)
    (fun k => (f k).start) (fun k => (f k).tokens) (fun k => (f k).served) (fun k => (f k).arrived) hW
    (BacklogBudget.arrivals_spaced g P D x ss hg hw)
    (fun k hk => by
      dsimp only
      rw [hf k hk]
      exact harr _ (List.getElem_mem hk))
    (by dsimp only; rw [hf 0 hpos]; exact (h0 hpos).1)
    (by dsimp only; rw [hf 0 hpos]; exact (h0 hpos).2)
    (by dsimp only; rw [hf 0 hpos]; exact hsv.1 hpos)
    (fun k hk => by
      dsimp only
      rw [hf k (by omega), hf (k + 1) hk]
      exact ⟨hst k hk, hidle k hk, hsv.2 k hk⟩)
    (fun k hk => by
      dsimp only
      rw [hf k (by omega), hf (k + 1) hk]
      exact hstep k hk)
    i hi
  dsimp only at this
  rw [hf i hi] at this
  exact this

end Serq
