module

public import Serq.BacklogBudgetCaps
public import Serq.BacklogBudgetLater
public import Serq.Stuck

/-! # An iteration at every step with work to do when the caps do not bind (issue 14, result 2, case (b))

`Serq.BacklogBudget.idle_gaps`, `first_record`, `backlog_of_resets_run` and `backlog_of_whole_resets` assume
(`hp`) that the engine runs an iteration at every step of the run at which a session's first turn is due.
`Serq.BacklogBudget.step_progress` gives an iteration when a resident has work left; this module gives one
when the queue is not empty, for every engine of the mixed schedule (`phased = false`) with a positive
budget, when the caps do not bind (`Serq.BacklogBudget.plan_caps`'s hypotheses: at most `K` requests in
flight, `K ≤ reqsCap`, `K · bW ≤ kvBlocks`, residents `Life`, the queue `ReqLife`):

* one plan: a plan that preempts nothing keeps the queue's requests (`plan_wait`); a queue holding a request
  that cannot reuse every token it knows (`Fresh`: its prompt's hit below what it knows, so an admission
  schedules a token) and left empty by the plan was admitted with a token (`plan_admits`);
* one step: under `step_caps`'s hypotheses, a step whose queue (the due turns submitted) holds such a request
  runs an iteration at the clock (`Serq.BacklogBudget.step_admits`); a turn submitted with `0 < prompt`
  is such a request (`newReq_fresh`), and every request a run leaves waiting stays one (`run_fresh`);
* a run: under `run_caps`'s hypotheses (`StepOk` at every machine that has not settled) and `0 < K`, a due
  turn of `0 < prompt ≤ P` is not refused (its blocks fit), so every step with a first turn due runs an
  iteration: the hypothesis `hp` (`Serq.BacklogBudget.run_progress`); and a step after an iteration that
  leaves a resident with work left or a request waiting runs the next iteration one step later
  (`Serq.BacklogBudget.run_later`, `Serq.BacklogBudget.run_later_succ`: the machine after it has not
  settled, `not_settled`);
* with `Serq.BacklogBudget.backlog_of_whole_resets`: the bounded backlog from the resets with `hp` discharged
  (`Serq.BacklogBudget.backlog_of_caps`); what remains is `StepOk` and the resets `hreset`.
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open Backlog BacklogMany

/-! ## The plan's queue without preemption -/

/-- From plan `p` to plan `R`: no fewer preemptions, and the queue as it was when there are no more. -/
def WaitOk (p R : Plan) : Prop :=
  p.preempted ≤ R.preempted ∧ (R.preempted = p.preempted → R.waiting = p.waiting)

theorem waitOk_of (p q R : Plan) (h : WaitOk q R) (h1 : q.preempted = p.preempted) (h2 : q.waiting = p.waiting) :
    WaitOk p R :=
  ⟨by rw [← h1]; exact h.1, fun e => by rw [← h2]; exact h.2 (by rw [e, h1])⟩

theorem waitOk_trans (p q R : Plan) (h1 : WaitOk p q) (h2 : WaitOk q R) : WaitOk p R := by
  obtain ⟨a1, a2⟩ := h1
  obtain ⟨b1, b2⟩ := h2
  refine ⟨Nat.le_trans a1 b1, fun e => ?_⟩
  have e1 : q.preempted = p.preempted := by omega
  rw [b2 (by omega), a2 e1]

theorem waitOk_pre (p X R : Plan) (h : X.preempted ≤ R.preempted) (hX : X.preempted = p.preempted + 1) :
    WaitOk p R :=
  ⟨by omega, fun e => by omega⟩

/-- `growOrPreempt` changes the queue only by preempting. -/
theorem grow_wait (eng : Engine) : ∀ (fuel need : Nat) (p : Plan), WaitOk p (growOrPreempt eng fuel need p)
  | 0, _, _ => ⟨Nat.le_refl _, fun _ => rfl⟩
  | fuel + 1, need, p => by
    simp only [growOrPreempt]
    split
    · exact ⟨Nat.le_refl _, fun _ => rfl⟩
    · split
      · exact ⟨Nat.le_refl _, fun _ => rfl⟩
      · rename_i rest victim hp
        cases rest with
        | nil => exact waitOk_pre _ _ _ (Nat.le_refl _) rfl
        | cons x xs => exact waitOk_pre _ _ _ (grow_pre eng fuel need _).1 rfl

/-- Serving the residents changes the queue only by preempting. -/
theorem serveRunning_wait (eng : Engine) (only : Option Bool) :
    ∀ (fuel : Nat) (p : Plan), WaitOk p (serveRunning eng only fuel p)
  | 0, _ => ⟨Nat.le_refl _, fun _ => rfl⟩
  | fuel + 1, p => by
    simp only [serveRunning]
    split
    · exact ⟨Nat.le_refl _, fun _ => rfl⟩
    · split
      · exact ⟨Nat.le_refl _, fun _ => rfl⟩
      · split
        · exact waitOk_of _ _ _ (serveRunning_wait eng only fuel _) rfl rfl
        · repeat' split
          all_goals first
            | exact grow_wait eng _ _ p
            | exact waitOk_trans _ _ _ (grow_wait eng _ _ p)
                (waitOk_of _ _ _ (serveRunning_wait eng only fuel _) rfl rfl)

/-- Admitting takes requests off the queue's head and preempts nothing. -/
theorem admitHeads_sub (eng : Engine) (only : Option Bool) : ∀ (fuel : Nat) (p : Plan),
    (admitHeads eng only fuel p).preempted = p.preempted ∧
      ∀ x ∈ (admitHeads eng only fuel p).waiting, x ∈ p.waiting
  | 0, _ => ⟨rfl, fun _ h => h⟩
  | fuel + 1, p => by
    simp only [admitHeads]
    split
    · exact ⟨rfl, fun _ h => h⟩
    · split
      · exact ⟨rfl, fun _ h => h⟩
      · rename_i rq rest hw
        split
        · exact ⟨rfl, fun _ h => h⟩
        · refine ⟨(admitHeads_sub eng only fuel _).1, fun x hx => ?_⟩
          have h := (admitHeads_sub eng only fuel _).2 x hx
          rw [hw]
          exact List.mem_cons_of_mem _ h

/-- **A plan that preempts nothing keeps the queue's requests**: every request it leaves waiting was in the
queue. Any engine, chunk, machine and queue. -/
theorem plan_wait (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req)
    (hpre : (plan eng chunk m waiting).preempted = 0) :
    ∀ x ∈ (plan eng chunk m waiting).waiting, x ∈ waiting := by
  revert hpre
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only
  have g := serveRunning_wait eng only (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩
  generalize serveRunning eng only (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at g ⊢
  by_cases h1 : p1.preempted = 0
  · rw [if_pos h1]
    intro _ x hx
    have h := (admitHeads_sub eng only _ _).2 x hx
    have hw : p1.waiting = waiting := g.2 h1
    have h' : x ∈ p1.waiting := h
    rw [hw] at h'
    exact h'
  · rw [if_neg h1]
    intro h
    exact absurd h h1

/-! ## An admission schedules a token -/

/-- A waiting request that cannot reuse every token it knows: its prompt's hit is below what it knows
(`max kept (computed + 1)`). Every submitted turn with a prompt is one (`newReq_fresh`). -/
def Fresh (rq : Req) : Prop := rq.hit < max rq.kept (rq.computed + 1)

theorem reuse_lt (bs : Nat) (rq : Req) (h : Fresh rq) :
    reuseCap bs rq (max rq.kept (rq.computed + 1)) < max rq.kept (rq.computed + 1) := by
  unfold reuseCap
  split
  · exact OneAtATime.reusable_lt _ _ (Nat.le_trans (Nat.le_add_left 1 rq.computed) (Nat.le_max_right _ _))
  · exact h

theorem admitHeads_tok (eng : Engine) (only : Option Bool) : ∀ (fuel : Nat) (p : Plan),
    batchTokens p.done ≤ batchTokens (admitHeads eng only fuel p).done
  | 0, p => Nat.le_refl _
  | fuel + 1, p => by
    simp only [admitHeads]
    split
    · exact Nat.le_refl _
    · split
      · exact Nat.le_refl _
      · split
        · exact Nat.le_refl _
        · refine Nat.le_trans ?_ (admitHeads_tok eng only fuel _)
          dsimp only
          rw [batchTokens_append]; omega

/-- Without `only`, admitting a whole queue that holds a `Fresh` request schedules a token. -/
theorem admitHeads_pos (eng : Engine) : ∀ (fuel : Nat) (p : Plan) (rq : Req), rq ∈ p.waiting → Fresh rq →
    (admitHeads eng none fuel p).waiting = [] → 0 < batchTokens (admitHeads eng none fuel p).done
  | 0, p, rq, hm, _, he => by
    have he' : p.waiting = [] := he
    rw [he'] at hm; simp at hm
  | fuel + 1, p, rq, hm, hr, he => by
    revert he
    simp only [admitHeads]
    split
    · intro he; rw [he] at hm; simp at hm
    · rename_i hgo
      split
      · rename_i h; rw [h] at hm; simp at hm
      · rename_i rq0 rest hw
        split
        · intro he; rw [hw] at he; simp at he
        · intro he
          rw [hw] at hm
          rcases List.mem_cons.mp hm with e | e
          · subst e
            refine Nat.lt_of_lt_of_le ?_ (admitHeads_tok eng none fuel _)
            have hb : 0 < p.budget := Nat.pos_of_ne_zero (fun h => hgo (Or.inl h))
            have hre : min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
                (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) < max rq.kept (rq.computed + 1) :=
              Nat.lt_of_le_of_lt (Nat.min_le_right _ _) (reuse_lt eng.blockSize rq hr)
            have hn := capChunk_pos p.chunk (min (max rq.kept (rq.computed + 1) -
              min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
                (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1)))) p.budget)
              (Nat.lt_min.mpr ⟨by omega, hb⟩)
            dsimp only
            rw [batchTokens_append]
            simp only [batchTokens, excluded, Bool.false_eq_true, if_false]
            omega
          · exact admitHeads_pos eng fuel _ rq e hr he

/-- **A plan without `only` that admits a whole queue holding a `Fresh` request schedules a token** (when it
preempts nothing). Any machine and chunk. -/
theorem plan_admits (eng : Engine) (hp : eng.phased = false) (chunk : Nat) (m : Machine) (waiting : List Req)
    (rq : Req) (hrq : rq ∈ waiting) (hr : Fresh rq) (hpre : (plan eng chunk m waiting).preempted = 0)
    (hq : (plan eng chunk m waiting).waiting = []) : 0 < batchTokens (plan eng chunk m waiting).done := by
  revert hpre hq
  unfold plan
  have hn : phaseOf eng m.running = none := by simp [phaseOf, hp]
  dsimp only
  rw [hn]
  have g := serveRunning_wait eng none (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩
  generalize serveRunning eng none (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at g ⊢
  by_cases h1 : p1.preempted = 0
  · rw [if_pos h1]
    intro _ hq
    have hw : p1.waiting = waiting := g.2 h1
    exact admitHeads_pos eng _ _ rq (by show rq ∈ p1.waiting; rw [hw]; exact hrq) hr hq
  · rw [if_neg h1]
    intro h
    exact absurd h h1

/-! ## The step -/

/-- **A step whose queue holds a `Fresh` request runs an iteration at the clock when the caps do not bind**:
an engine without `only` (`phased = false`) with a positive budget, any sessions, and a machine with
`step_caps`'s hypotheses (at most `K` requests in flight once the due turns are submitted, `K ≤ reqsCap`,
`K · bW ≤ kvBlocks`, the residents `Life`, the step's queue `ReqLife`), whose step's queue (the due turns
submitted at the back of the machine's) holds a request `rq` whose prompt's hit is below what it knows
(`rq.hit < max rq.kept (rq.computed + 1)`, every submitted turn with a prompt: `newReq_fresh`). -/
theorem step_admits (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget) (ss : List Session)
    (m : Machine) (K bW : Nat) (hK : K ≤ eng.reqsCap) (hkv : K * bW ≤ eng.kvBlocks)
    (hn : resCount m.running + reqCount (submit eng ss (duePending m.now m.pending).1 m.waiting) ≤ K)
    (hres : ∀ r ∈ m.running, Life eng.blockSize bW r)
    (hw : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting, ReqLife eng.blockSize bW rq)
    (rq : Req) (hrq : rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting)
    (hhit : rq.hit < max rq.kept (rq.computed + 1)) :
    ∃ rec : Record, (step eng ss m).records = appendRecord m.records rec ∧ rec.start = m.now := by
  unfold step
  generalize duePending m.now m.pending = dl at hn hw hrq ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hn hw hrq ⊢
  generalize submit eng ss due m.waiting = waiting at hn hw hrq ⊢
  have hne : noReq waiting = false := by
    cases waiting with
    | nil => simp at hrq
    | cons _ _ => rfl
  split
  · rename_i h; rw [hne] at h; simp at h
  · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    obtain ⟨hpre, hq, _⟩ := plan_caps eng chunk m waiting K bW hK hkv hn hres hw
    have hpos : 0 < batchTokens (plan eng chunk m waiting).done := by
      rcases hq with hq | hq
      · exact plan_admits eng hp chunk m waiting rq hrq hhit hpre hq
      · omega
    generalize plan eng chunk m waiting = P at hpos ⊢
    split
    · rename_i h; omega
    · dsimp only
      rw [apply_records]
      exact ⟨_, rfl, rfl⟩

/-! ## The submitted turns -/

theorem submit_keeps (eng : Engine) (ss : List Session) :
    ∀ (due : List Pending) (w : List Req) (x : Req), x ∈ w → x ∈ submit eng ss due w
  | [], _, _, h => h
  | p :: ps, w, x, h => by
    simp only [submit]
    split
    · exact submit_keeps eng ss ps w x h
    · exact submit_keeps eng ss ps _ x (by rw [DriftMachine.appendReq_eq]; exact List.mem_append_left _ h)

/-- A due turn whose prompt's blocks fit the pool is submitted. -/
theorem submit_new (eng : Engine) (ss : List Session) :
    ∀ (due : List Pending) (w : List Req) (p : Pending), p ∈ due →
      blocksFor eng.blockSize p.prompt ≤ eng.kvBlocks → newReq eng ss p ∈ submit eng ss due w
  | [], _, _, h, _ => by simp at h
  | q :: qs, w, p, h, hf => by
    simp only [submit]
    rcases List.mem_cons.mp h with e | e
    · subst e
      rw [if_neg (by omega)]
      exact submit_keeps eng ss qs _ _ (by rw [DriftMachine.appendReq_eq]; simp)
    · split
      · exact submit_new eng ss qs w p e hf
      · exact submit_new eng ss qs _ p e hf

/-- A submitted turn with a prompt (`0 < prompt`) cannot reuse every token it knows. -/
theorem newReq_fresh (eng : Engine) (ss : List Session) (p : Pending) (hP : 0 < p.prompt) :
    Fresh (newReq eng ss p) := by
  have hk : (newReq eng ss p).kept = p.prompt := rfl
  have hc : (newReq eng ss p).computed = 0 := rfl
  have hr := OneAtATime.reusable_lt p.prompt eng.blockSize hP
  have hh : (newReq eng ss p).hit < p.prompt := by
    unfold newReq
    dsimp only
    repeat' split
    all_goals omega
  unfold Fresh
  rw [hk, hc, Nat.max_eq_left (by omega : 0 + 1 ≤ p.prompt)]
  exact hh

theorem submit_fresh (eng : Engine) (ss : List Session) (due : List Pending) (w : List Req)
    (hw : ∀ rq ∈ w, Fresh rq) (hdue : ∀ p ∈ due, 0 < p.prompt) : ∀ rq ∈ submit eng ss due w, Fresh rq := by
  intro rq hrq
  rcases mem_submit eng ss due w rq hrq with h | ⟨p, hp, rfl⟩
  · exact hw rq h
  · exact newReq_fresh eng ss p (hdue p hp)

/-- Under `step_caps`'s hypotheses, with every due turn a prompt, every request a step leaves waiting is
`Fresh` when every request waiting before it was. -/
theorem step_fresh (eng : Engine) (ss : List Session) (m : Machine) (K bW : Nat)
    (hK : K ≤ eng.reqsCap) (hkv : K * bW ≤ eng.kvBlocks)
    (hn : resCount m.running + reqCount (submit eng ss (duePending m.now m.pending).1 m.waiting) ≤ K)
    (hres : ∀ r ∈ m.running, Life eng.blockSize bW r)
    (hw : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting, ReqLife eng.blockSize bW rq)
    (hdue : ∀ p ∈ (duePending m.now m.pending).1, 0 < p.prompt) (hF : ∀ rq ∈ m.waiting, Fresh rq) :
    ∀ rq ∈ (step eng ss m).waiting, Fresh rq := by
  unfold step
  generalize duePending m.now m.pending = dl at hn hw hdue ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hn hw hdue ⊢
  have hF' := submit_fresh eng ss due m.waiting hF hdue
  generalize submit eng ss due m.waiting = waiting at hn hw hF' ⊢
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1]; split <;> exact hF'
  · rw [if_neg h1]
    generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    obtain ⟨hpre, _⟩ := plan_caps eng chunk m waiting K bW hK hkv hn hres hw
    have hsub := plan_wait eng chunk m waiting hpre
    by_cases h2 : batchTokens (plan eng chunk m waiting).done = 0 ∧ (plan eng chunk m waiting).preempted = 0
    · rw [if_pos h2]; first | exact hF' | (split <;> exact hF')
    · rw [if_neg h2]
      simp only [apply_waiting]
      exact fun x hx => hF' x (hsub x hx)

theorem run_fresh (eng : Engine) (ss : List Session) (K P D : Nat) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (m : Machine), (∀ r ∈ m.running, Life eng.blockSize (blocksFor eng.blockSize (P + D - 1)) r) →
      (∀ rq ∈ m.waiting, ReqLife eng.blockSize (blocksFor eng.blockSize (P + D - 1)) rq) →
      (∀ rq ∈ m.waiting, Fresh rq) →
      (∀ k, (run eng ss k m).settled eng = false → StepOk eng ss K P D (run eng ss k m)) →
      ∀ rq ∈ (run eng ss fuel m).waiting, Fresh rq
  | 0, _, _, _, hF, _ => hF
  | fuel + 1, m, h, hq, hF, H => by
    simp only [run]
    split
    · exact hF
    · rename_i hs
      have h0 := H 0 (by simpa using hs)
      have hw := submit_life eng ss P D hD _ m.waiting hq h0.2
      obtain ⟨s1, s2⟩ := step_life eng ss m K _ hK hkv h0.1 h hw
      have s3 := step_fresh eng ss m K _ hK hkv h0.1 h hw (fun p hp => (h0.2 p hp).1) hF
      apply run_fresh eng ss K P D hD hK hkv fuel (step eng ss m) s1 s2 s3
      intro k hk
      have e : run eng ss (k + 1) m = run eng ss k (step eng ss m) := by simp only [run, if_neg hs]
      have := H (k + 1)
      rw [e] at this
      exact this hk

/-! ## Settled machines and the run -/

/-- A settled machine's step runs no iteration (a quiet machine idles; a stuck one stays: `step_stuck`). -/
theorem step_settled (eng : Engine) (ss : List Session) (m : Machine) (h : m.settled eng = true) :
    (step eng ss m).records = m.records := by
  unfold Machine.settled at h
  rcases Bool.or_eq_true_iff.mp h with hq | hs
  · obtain ⟨now, pending, waiting, running, cache, relSeq, outcomes, records, served, arrived⟩ := m
    simp only [Machine.quiet, Bool.and_eq_true] at hq
    obtain ⟨⟨hp, hw⟩, hr⟩ := hq
    cases pending with
    | cons _ _ => simp [noPending] at hp
    | nil =>
    cases waiting with
    | cons _ _ => simp [noReq] at hw
    | nil =>
    cases running with
    | cons _ _ => simp [noRes] at hr
    | nil => rfl
  · rw [step_stuck eng ss m hs]

theorem run_of_settled (eng : Engine) (ss : List Session) (m : Machine) (h : m.settled eng = true) :
    ∀ n, run eng ss n m = m
  | 0 => rfl
  | n + 1 => by simp only [run, h, if_true]

/-- A run one step longer: the same machine if it had settled, else one more step. -/
theorem run_succ_eq (eng : Engine) (ss : List Session) : ∀ (fuel : Nat) (m : Machine),
    run eng ss (fuel + 1) m =
      if (run eng ss fuel m).settled eng then run eng ss fuel m else step eng ss (run eng ss fuel m)
  | 0, _ => rfl
  | fuel + 1, m => by
    by_cases h : m.settled eng = true
    · simp [run_of_settled eng ss m h, h]
    · rw [show run eng ss (fuel + 1 + 1) m = run eng ss (fuel + 1) (step eng ss m) by simp only [run, if_neg h],
        run_succ_eq eng ss fuel (step eng ss m),
        show run eng ss (fuel + 1) m = run eng ss fuel (step eng ss m) by simp only [run, if_neg h]]

/-- A run one step longer than one that has not settled is one more step. -/
theorem run_succ_step (eng : Engine) (ss : List Session) : ∀ (k : Nat) (m : Machine),
    (run eng ss k m).settled eng = false → run eng ss (k + 1) m = step eng ss (run eng ss k m)
  | 0, m, h => by
    simp only [run] at h ⊢
    simp [h]
  | k + 1, m, h => by
    by_cases hs : m.settled eng = true
    · rw [run_of_settled eng ss m hs, hs] at h
      exact absurd h (by decide)
    · have e1 : run eng ss (k + 1 + 1) m = run eng ss (k + 1) (step eng ss m) := by simp only [run, if_neg hs]
      have e2 : run eng ss (k + 1) m = run eng ss k (step eng ss m) := by simp only [run, if_neg hs]
      rw [e2] at h ⊢
      rw [e1]
      exact run_succ_step eng ss k (step eng ss m) h

/-- **A machine with work has not settled** when its queue is within `bW` blocks and `0 < K`,
`K · bW ≤ kvBlocks`: a resident with work left, or a request waiting whose reservation fits the pool. -/
theorem not_settled (eng : Engine) (m : Machine) (K bW : Nat) (hK0 : 0 < K) (hkv : K * bW ≤ eng.kvBlocks)
    (hQ : ∀ rq ∈ m.waiting, ReqLife eng.blockSize bW rq)
    (hwork : (∃ r ∈ m.running, 0 < r.remaining) ∨ m.waiting ≠ []) : m.settled eng = false := by
  have hbW : bW ≤ eng.kvBlocks := by
    have h1 := Nat.mul_le_mul_right bW (show 1 ≤ K from hK0)
    rw [Nat.one_mul] at h1
    generalize K * bW = A at h1 hkv
    omega
  have hnf : ∀ rq ∈ m.waiting, neverFits eng rq = false := by
    intro rq hrq
    have h1 := (hQ rq hrq).1.1
    simp only [neverFits, decide_eq_false_iff_not]
    omega
  unfold Machine.settled Machine.quiet Machine.stuck
  rcases hwork with ⟨r, hr, _⟩ | hw
  · cases h : m.running with
    | nil => rw [h] at hr; simp at hr
    | cons x xs => simp [noRes]
  · cases h : m.waiting with
    | nil => exact absurd h hw
    | cons rq rest =>
      have := hnf rq (by rw [h]; exact List.mem_cons_self)
      simp [noReq, this]

end BacklogBudget

/-! ## The run -/

/-- **An iteration at every step with a first turn due** (the hypothesis `hp` of
`Serq.BacklogBudget.idle_gaps`, `first_record`, `backlog_of_resets_run`, `backlog_of_whole_resets`): every
engine without `only` (`phased = false`) with a positive budget, `0 < K`, `0 < D`, `K ≤ reqsCap`,
`K · blocksFor blockSize (P + D − 1) ≤ kvBlocks`, every workload: if at every machine of the run from `init`
that has not settled at most `K` requests are in flight once the due turns are submitted and every due turn
is a prompt of `0 < prompt ≤ P` tokens with at most `D` outputs (`StepOk`, as `run_caps`), then at every
such machine with a first turn due the step runs an iteration (adds a record). -/
theorem BacklogBudget.run_progress (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget)
    (ss : List Session) (K P D : Nat) (hK0 : 0 < K) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false →
      BacklogBudget.StepOk eng ss K P D (run eng ss k (init ss))) :
    ∀ k, (run eng ss k (init ss)).settled eng = false →
      countFirst (duePending (run eng ss k (init ss)).now (run eng ss k (init ss)).pending).1 ≠ 0 →
        (step eng ss (run eng ss k (init ss))).records ≠ (run eng ss k (init ss)).records := by
  intro k hs hc
  obtain ⟨hL, hQ⟩ := BacklogBudget.run_life eng ss K P D hD hK hkv k (init ss) (by simp [init]) (by simp [init]) H
  obtain ⟨hn, hdue⟩ := H k hs
  have hw := BacklogBudget.submit_life eng ss P D hD _ _ hQ hdue
  generalize run eng ss k (init ss) = m at hL hQ hn hdue hw hc ⊢
  obtain ⟨p, hpd⟩ : ∃ p, p ∈ (duePending m.now m.pending).1 := by
    cases h : (duePending m.now m.pending).1 with
    | nil => rw [h] at hc; exact (hc rfl).elim
    | cons p _ => exact ⟨p, List.mem_cons_self⟩
  obtain ⟨h1, h2, _⟩ := hdue p hpd
  have hfit : blocksFor eng.blockSize p.prompt ≤ eng.kvBlocks := by
    have e1 := Backlog.blocksFor_mono eng.blockSize (show p.prompt ≤ P + D - 1 by omega)
    have e2 := Nat.mul_le_mul_right (blocksFor eng.blockSize (P + D - 1)) (show 1 ≤ K from hK0)
    rw [Nat.one_mul] at e2
    generalize K * blocksFor eng.blockSize (P + D - 1) = A at e2 hkv
    omega
  obtain ⟨rec, hrec, _⟩ := BacklogBudget.step_admits eng hp hb ss m K _ hK hkv hn hL hw (newReq eng ss p)
    (BacklogBudget.submit_new eng ss _ _ p hpd hfit) (BacklogBudget.newReq_fresh eng ss p h1)
  rw [hrec]
  exact BacklogBudget.appendRecord_ne _ _

/-- **An iteration with work left after it is followed one step later** (the engine's side of `hstep`'s
step-later half for an iteration after which a request waits): on every run from `init` of an engine
without `only` with a positive budget, under `run_progress`'s hypotheses (`StepOk` at every machine that has
not settled, `0 < K`, `0 < D`, `K ≤ reqsCap`, `K · blocksFor blockSize (P + D − 1) ≤ kvBlocks`): if the step
from the machine `m` after `k` steps runs an iteration, and the machine after it has a resident with work
left or a request waiting, then the step from that machine runs an iteration starting at `m.now + 1`. (The
machine after the iteration has not settled, and is the run after `k + 1` steps: `not_settled`,
`run_succ_step`.) -/
theorem BacklogBudget.run_later (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget)
    (ss : List Session) (K P D : Nat) (hK0 : 0 < K) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false →
      BacklogBudget.StepOk eng ss K P D (run eng ss k (init ss)))
    (k : Nat) (hit : (step eng ss (run eng ss k (init ss))).records ≠ (run eng ss k (init ss)).records)
    (hwork : (∃ r ∈ (step eng ss (run eng ss k (init ss))).running, 0 < r.remaining) ∨
      (step eng ss (run eng ss k (init ss))).waiting ≠ []) :
    ∃ rec : Record, (step eng ss (step eng ss (run eng ss k (init ss)))).records =
        appendRecord (step eng ss (run eng ss k (init ss))).records rec ∧
      rec.start = (run eng ss k (init ss)).now + 1 := by
  have hs : (run eng ss k (init ss)).settled eng = false := by
    cases h : (run eng ss k (init ss)).settled eng
    · rfl
    · exact absurd (BacklogBudget.step_settled eng ss _ h) hit
  have e := BacklogBudget.run_succ_step eng ss k (init ss) hs
  obtain ⟨hL, hQ⟩ :=
    BacklogBudget.run_life eng ss K P D hD hK hkv (k + 1) (init ss) (by simp [init]) (by simp [init]) H
  have hF := BacklogBudget.run_fresh eng ss K P D hD hK hkv (k + 1) (init ss) (by simp [init]) (by simp [init])
    (by simp [init]) H
  rw [e] at hL hQ hF
  have hs' := BacklogBudget.not_settled eng _ K _ hK0 hkv hQ hwork
  have H1 := H (k + 1) (by rw [e]; exact hs')
  rw [e] at H1
  obtain ⟨hn, hdue⟩ := H1
  have hnow : (step eng ss (run eng ss k (init ss))).now = (run eng ss k (init ss)).now + 1 := by
    rcases BacklogBudget.step_cases eng ss (run eng ss k (init ss)) with ⟨hr, _⟩ | ⟨_, _, _, _, hn, _⟩
    · exact absurd hr hit
    · exact hn
  rw [← hnow]
  rcases hwork with hr | hw
  · exact BacklogBudget.step_progress eng hp hb ss _ hr
  · obtain ⟨rq, hrq⟩ : ∃ rq, rq ∈ (step eng ss (run eng ss k (init ss))).waiting := by
      cases h : (step eng ss (run eng ss k (init ss))).waiting with
      | nil => exact absurd h hw
      | cons x _ => exact ⟨x, List.mem_cons_self⟩
    exact BacklogBudget.step_admits eng hp hb ss _ K _ hK hkv hn hL
      (BacklogBudget.submit_life eng ss P D hD _ _ hQ hdue) rq (BacklogBudget.submit_keeps eng ss _ _ rq hrq)
      (hF rq hrq)

/-- **`run_later` on the run**: under `run_progress`'s hypotheses, if the run's `(k + 1)`-th step added a
record (the machines after `k` and `k + 1` steps differ in their records) and the machine after `k + 1`
steps has a resident with work left or a request waiting, then the `(k + 2)`-th step adds a record starting
at `now + 1`, `now` the clock after `k` steps (the start of the `(k + 1)`-th step's record). -/
theorem BacklogBudget.run_later_succ (eng : Engine) (hp : eng.phased = false) (hb : 0 < eng.budget)
    (ss : List Session) (K P D : Nat) (hK0 : 0 < K) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false →
      BacklogBudget.StepOk eng ss K P D (run eng ss k (init ss)))
    (k : Nat) (hit : (run eng ss (k + 1) (init ss)).records ≠ (run eng ss k (init ss)).records)
    (hwork : (∃ r ∈ (run eng ss (k + 1) (init ss)).running, 0 < r.remaining) ∨
      (run eng ss (k + 1) (init ss)).waiting ≠ []) :
    ∃ rec : Record, (run eng ss (k + 2) (init ss)).records =
        appendRecord (run eng ss (k + 1) (init ss)).records rec ∧
      rec.start = (run eng ss k (init ss)).now + 1 := by
  have hs : (run eng ss k (init ss)).settled eng = false := by
    cases h : (run eng ss k (init ss)).settled eng
    · rfl
    · exfalso; apply hit; rw [BacklogBudget.run_succ_eq, if_pos h]
  obtain ⟨_, hQ⟩ :=
    BacklogBudget.run_life eng ss K P D hD hK hkv (k + 1) (init ss) (by simp [init]) (by simp [init]) H
  have hs1 := BacklogBudget.not_settled eng _ K _ hK0 hkv hQ hwork
  have e1 := BacklogBudget.run_succ_step eng ss k (init ss) hs
  have e2 := BacklogBudget.run_succ_step eng ss (k + 1) (init ss) hs1
  show ∃ rec : Record, (run eng ss (k + 1 + 1) (init ss)).records =
      appendRecord (run eng ss (k + 1) (init ss)).records rec ∧ rec.start = (run eng ss k (init ss)).now + 1
  rw [e2]
  rw [e1] at hit hwork ⊢
  exact BacklogBudget.run_later eng hp hb ss K P D hK0 hD hK hkv H k hit hwork

/-- **The bounded backlog from the resets, the progress hypothesis discharged**:
`backlog_of_whole_resets` with `hp` proved by `run_progress`, for an engine without `only` with a positive
budget, sessions at least `g` apart of one turn each (`GappedDecode`) of which none arrives at time 0, and
caps that do not bind (`0 < K`, `0 < D`, `K ≤ reqsCap`, `K · blocksFor blockSize (P + D − 1) ≤ kvBlocks`,
`StepOk` at every machine of the run that has not settled). What remains: `StepOk` and the resets
`hreset`. -/
theorem BacklogBudget.backlog_of_caps (eng : Engine) (hph : eng.phased = false) (hb : 0 < eng.budget)
    (ss : List Session) (fuel g P D x W C K : Nat)
    (hg : 0 < g) (hw : GappedDecode g P D x ss) (hW : W ≤ eng.budget * g)
    (hz : BacklogBudget.arrivedBy 0 ss = 0)
    (hK0 : 0 < K) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false →
      BacklogBudget.StepOk eng ss K P D (run eng ss k (init ss)))
    (hreset : ∀ (i : Nat) (hi : i + 1 < (run eng ss fuel (init ss)).records.length),
      ((run eng ss fuel (init ss)).records[i].demand ≤ (run eng ss fuel (init ss)).records[i].tokens ∨
        (run eng ss fuel (init ss)).records[i].demand < eng.budget) →
      (run eng ss fuel (init ss)).records[i].arrived * W ≤
        (run eng ss fuel (init ss)).records[i].served + (run eng ss fuel (init ss)).records[i].tokens + C) :
    ∀ (i : Nat) (hi : i < (run eng ss fuel (init ss)).records.length),
      (run eng ss fuel (init ss)).records[i].arrived * W ≤ (run eng ss fuel (init ss)).records[i].served + W + C :=
  BacklogBudget.backlog_of_whole_resets eng hph hb ss fuel g P D x W C hg hw hW hz
    (BacklogBudget.run_progress eng hph hb ss K P D hK0 hD hK hkv H) hreset

end Serq
