module

public import Papers.SvfInvEnd

/-! # SVF (`svf.sq`): the queue at a symbolic index, toward the admission step

The simulation's admission step (`Papers.SvfAdmitStep`) admits, after an answer, the hold `select` offers
at a symbolic index `j` of the queue `svfQueue W`. This module has what that step reads of the queue at `j`:
the hold there is session `svfAt W j`'s (`getWaiter_svfQueue`), the queue without it is
`svfQueue (svfErase W j)` (`removeWaiter_svfQueue`), the order's permutation moves it from `W` to the
served (`svf_perm_admit`), and its volume is the least of `W`'s when `j` is the index `select` offers on
a machine whose waiting sessions are `svfWaiting w 0` (`svf_select_least`, from
`svf_admits_least_volume`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-- The session at index `j` of `W` (0 past its end). -/
def svfAt : List Nat → Nat → Nat
  | [], _ => 0
  | x :: _, 0 => x
  | _ :: xs, j + 1 => svfAt xs j

/-- `W` without its index `j`. -/
def svfErase : List Nat → Nat → List Nat
  | [], _ => []
  | _ :: xs, 0 => xs
  | x :: xs, j + 1 => x :: svfErase xs j

theorem getWaiter_svfQueue : ∀ (W : List Nat) (j : Nat), j < W.length → getWaiter (svfQueue W) j = svfWaiter (svfAt W j) 0
  | [], _, h => absurd h (by simp)
  | _ :: _, 0, _ => rfl
  | _ :: W, j + 1, h => getWaiter_svfQueue W j (by simp at h; omega)

theorem removeWaiter_svfQueue : ∀ (W : List Nat) (j : Nat), removeWaiter (svfQueue W) j = svfQueue (svfErase W j)
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | x :: W, j + 1 => by
    show svfWaiter x 0 :: removeWaiter (svfQueue W) j = svfWaiter x 0 :: svfQueue (svfErase W j)
    rw [removeWaiter_svfQueue W j]

theorem svfAt_perm : ∀ (W : List Nat) (j : Nat), j < W.length → W.Perm (svfAt W j :: svfErase W j)
  | [], _, h => absurd h (by simp)
  | _ :: _, 0, _ => List.Perm.refl _
  | x :: W, j + 1, h => by
    have ih := svfAt_perm W j (by simp at h; omega)
    show (x :: W).Perm (svfAt W j :: x :: svfErase W j)
    exact (ih.cons x).trans (List.Perm.swap _ _ _)

theorem svfAt_mem (W : List Nat) (j : Nat) (h : j < W.length) : svfAt W j ∈ W :=
  (svfAt_perm W j h).symm.mem_iff.1 (by simp)

/-- The order's permutation once session `svfAt W j` is admitted after `s` was answered. -/
theorem svf_perm_admit (n : Nat) (served W : List Nat) (s j : Nat) (hj : j < W.length)
    (h : (served ++ s :: W).Perm (List.range n)) :
    ((served ++ [s]) ++ svfAt W j :: svfErase W j).Perm (List.range n) := by
  have h1 : (served ++ s :: W).Perm ((served ++ [s]) ++ svfAt W j :: svfErase W j) := by
    rw [List.append_assoc]
    exact List.Perm.append_left served ((svfAt_perm W j hj).cons s)
  exact h1.symm.trans h

/-- The queue of the sessions `W` has no hold a preemption put back. -/
theorem svfQueue_headFree (W : List Nat) : HeadFree [⟨0, 0, svfQueue W, []⟩] := by
  intro x hx y hy
  simp only [List.mem_singleton] at hx
  subst hx
  exact svfQueue_head W y hy

/-- **The admitted session has the least volume of those waiting.** On a machine whose `reqs` queue is
`svfQueue (w :: W)` and whose waiting sessions are `svfWaiting`, the index `select` offers is in the queue
and its session's volume is at most every waiting session's. -/
theorem svf_select_least (n : Nat) (m : Kernel.Machine) (w : Nat) (W : List Nat)
    (hp : m.pools = [⟨0, 0, svfQueue (w :: W), []⟩])
    (hw : ∀ x ∈ w :: W, getThread m.threads x = svfWaiting x 0) :
    select (svfP n) m 0 (svfQueue (w :: W)) < (w :: W).length ∧
    ∀ x ∈ w :: W, svfVol (svfAt (w :: W) (select (svfP n) m 0 (svfQueue (w :: W)))) ≤ svfVol x := by
  have hhf : HeadFree m.pools := by rw [hp]; exact svfQueue_headFree (w :: W)
  have hq : (getPool m.pools 0).queue = svfWaiter w 0 :: svfQueue W := by rw [hp]; rfl
  have h := svf_admits_least_volume n m hhf (svfWaiter w 0) (svfQueue W) hq
  have hlt : select (svfP n) m 0 (svfQueue (w :: W)) < (w :: W).length := by
    have := h.1
    rw [svfQueue_length] at this
    simpa using this
  refine ⟨hlt, fun x hx => ?_⟩
  have hsel := getWaiter_svfQueue (w :: W) _ hlt
  have hxq : svfWaiter x 0 ∈ svfWaiter w 0 :: svfQueue W := by
    have : ∀ (l : List Nat), x ∈ l → svfWaiter x 0 ∈ svfQueue l := by
      intro l
      induction l with
      | nil => intro h; simp at h
      | cons a l ih =>
        intro h
        rcases List.mem_cons.1 h with e | h
        · rw [e]
          show svfWaiter a 0 ∈ svfWaiter a 0 :: svfQueue l
          simp
        · show svfWaiter x 0 ∈ svfWaiter a 0 :: svfQueue l
          exact List.mem_cons_of_mem _ (ih h)
    exact this (w :: W) hx
  have hle := h.2 (svfWaiter x 0) hxq
  have hsel' : getWaiter (svfWaiter w 0 :: svfQueue W)
      (select { Papers.Claims.Svf.program with sessions := n } m 0 (svfWaiter w 0 :: svfQueue W)) =
      svfWaiter (svfAt (w :: W) (select (svfP n) m 0 (svfQueue (w :: W)))) 0 := hsel
  have hmem := svfAt_mem (w :: W) _ hlt
  have e1 := hw _ hmem
  have e2 := hw x hx
  rw [hsel'] at hle
  change getAt (getThread m.threads (svfAt (w :: W) (select (svfP n) m 0 (svfQueue (w :: W))))).attrs 6 ≤
    getAt (getThread m.threads x).attrs 6 at hle
  rw [e1, e2] at hle
  exact hle

end Papers
