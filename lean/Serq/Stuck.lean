module

public import Serq.Exec

/-! # A stuck machine stays as it is

`run` stops when the machine has settled (`Machine.settled`): every turn is answered or
refused (`quiet`), or the queue is stuck for good (`Machine.stuck`: nothing pending, nothing
resident, and the head of the queue is a preempted request whose every known token needs more
blocks than the pool has, which vLLM leaves waiting). Stopping there loses nothing: a step
leaves a stuck machine exactly as it is (`step_stuck`), so every longer run ends in the same
machine (`run_stuck`).
-/

@[expose] public section

namespace Serq

/-- With nobody to serve, serving changes nothing. -/
theorem serveRunning_nil (eng : Engine) (only : Option Bool) :
    ∀ (fuel : Nat) (p : Plan), p.todo = [] → serveRunning eng only fuel p = p
  | 0, _, _ => rfl
  | fuel + 1, p, h => by
    simp only [serveRunning]
    split
    · rfl
    · split
      · rfl
      · rename_i r later hc
        rw [h] at hc
        cases hc

/-- With nothing resident, a head that can never fit is not admitted, and stops the admissions. -/
theorem admitHeads_stuck (eng : Engine) (rq : Req) (rest : List Req) (h : neverFits eng rq = true) :
    ∀ (only : Option Bool) (fuel : Nat) (p : Plan), p.done = [] → p.waiting = rq :: rest →
      admitHeads eng only fuel p = p
  | _, 0, _, _, _ => rfl
  | only, fuel + 1, p, hd, hw => by
    simp only [admitHeads]
    split
    · rfl
    · split
      · rfl
      · rename_i rq' rest' hcons
        rw [hw] at hcons
        obtain ⟨rfl, rfl⟩ := List.cons.inj hcons
        rw [if_pos]
        simp only [neverFits, decide_eq_true_eq] at h
        rw [hd]
        exact Nat.lt_of_lt_of_le h (Nat.le_trans (Nat.le_max_right _ _) (Nat.le_add_left _ _))

/-- A step leaves a stuck machine as it is. -/
theorem step_stuck (eng : Engine) (sessions : List Session) (m : Machine) (h : m.stuck eng = true) :
    step eng sessions m = m := by
  obtain ⟨now, pending, waiting, running, cache, relSeq, outcomes, records, served, arrived⟩ := m
  simp only [Machine.stuck, Bool.and_eq_true] at h
  obtain ⟨⟨hp, hr⟩, hw⟩ := h
  cases pending with
  | cons _ _ => simp [noPending] at hp
  | nil =>
  cases running with
  | cons _ _ => simp [noRes] at hr
  | nil =>
  cases waiting with
  | nil => simp at hw
  | cons rq rest =>
  have hnf : neverFits eng rq = true := hw
  have hplan : ∀ chunk, plan eng chunk ⟨now, [], rq :: rest, [], cache, relSeq, outcomes, records, served, arrived⟩
      (rq :: rest) = ⟨eng.budget, chunk, [], [], rq :: rest, cache, relSeq, 0, false⟩ := by
    intro chunk
    unfold plan
    simp only
    rw [serveRunning_nil eng _ _ _ rfl]
    simp only [if_pos]
    exact admitHeads_stuck eng rq rest hnf _ _ _ rfl rfl
  unfold step
  simp only [duePending, submit, countFirst, Nat.add_zero]
  rw [if_neg (by simp [noRes, noReq]), hplan]
  rfl

/-- A run from a stuck machine ends in it. -/
theorem run_stuck (eng : Engine) (sessions : List Session) (m : Machine) (h : m.stuck eng = true) :
    ∀ fuel, run eng sessions fuel m = m
  | 0 => rfl
  | fuel + 1 => by
    simp only [run, Machine.settled, h, Bool.or_true, if_true]

end Serq
