module

public import Serq.DriftMachineTime

/-! # The drift chain on the machine, indexed by time (issue 14, result 7)

The chain's backlog indexed by time (`DriftMachine.backlogAt W B a`: 0 at time 0, then
`b(t + 1) = b(t) + a(t) · W − B` stopping at 0, `a(t)` the requests arriving at time `t`), driven by
the sessions' arrivals (`DriftMachine.arrivalsAt ss t`: the sessions arriving at `t`), is the machine's
work read at its clock (`Serq.drift_machine_time`): at every machine of every run, `work = b(clock)`;
and each step either advances the clock by one (an iteration ran: the chain's step at that time), or
the engine was empty with no arrival at its time and the clock jumps over a stretch with no arrival,
where the chain's backlog stays 0. So every time up to a run's clock is a machine's clock on the run,
its work the chain's backlog then, or a time with no arrival and backlog 0
(`Serq.drift_machine_time_every`). `Serq.DriftMachine.backlogAt_chain`: the time-indexed step is
`Serq.Drift.backlog`'s transition with the arrivals of that time.
-/

@[expose] public section

namespace Serq

namespace DriftMachine

open Backlog BacklogDecode BacklogMany

/-- The number of sessions arriving at time `t`. -/
def arrivalsAt : List Session → Nat → Nat
  | [], _ => 0
  | s :: ss, t => (if s.arrive = t then 1 else 0) + arrivalsAt ss t

/-- The chain's backlog at the start of time `t` (before that time's arrivals join it): 0 at time 0,
then the arrivals `a t` of `W` tokens each join and an iteration serves `B` of the backlog or all. -/
def backlogAt (W B : Nat) (a : Nat → Nat) : Nat → Nat
  | 0 => 0
  | t + 1 => backlogAt W B a t + a t * W - B

/-- The time-indexed step is the drift chain's transition (`Serq.Drift.backlog`, `nextBacklog`) with
the arrival count of that time (weight 1). -/
theorem backlogAt_chain (W B : Nat) (a : Nat → Nat) (t : Nat) :
    (Drift.backlog B W [(1, a t)]).succ (backlogAt W B a t) = [(1, backlogAt W B a (t + 1))] := rfl

/-- One arrival at times 0 and 1, `W = 3`, `B = 2`: backlog 0, 1, 2, 0, 0. -/
example : (List.range 5).map (backlogAt 3 2 (fun t => if t ≤ 1 then 1 else 0)) = [0, 1, 2, 0, 0] := by
  decide

/-- A zero backlog stays 0 over a stretch with no arrival. -/
theorem backlogAt_zero (W B : Nat) (a : Nat → Nat) (t : Nat) (h0 : backlogAt W B a t = 0) :
    ∀ (d : Nat), (∀ s, t ≤ s → s < t + d → a s = 0) → backlogAt W B a (t + d) = 0
  | 0, _ => h0
  | d + 1, h => by
    have ih := backlogAt_zero W B a t h0 d (fun s h1 h2 => h s h1 (by omega))
    have ha := h (t + d) (by omega) (by omega)
    show backlogAt W B a (t + d + 1) = 0
    simp [backlogAt, ih, ha]

theorem filter_insertPending (f : Pending → Bool) (p : Pending) : ∀ (l : List Pending),
    ((insertPending p l).filter f).length = (if f p then 1 else 0) + (l.filter f).length
  | [] => by cases h : f p <;> simp [insertPending, h]
  | q :: qs => by
    have ih := filter_insertPending f p qs
    simp only [insertPending]
    split
    · cases h : f p <;> cases h' : f q <;> simp [h, h'] <;> omega
    · rw [List.filter_cons, List.filter_cons]
      split <;> simp only [List.length_cons, ih] <;> omega

/-- The first turns at time `t` are the sessions arriving at `t`. -/
theorem firstTurns_arrivals (W t : Nat) : ∀ (k : Nat) (ss : List Session), OneTurnW W ss →
    ((firstTurns k ss).filter (fun p => decide (p.time = t))).length = arrivalsAt ss t
  | _, [], _ => by simp [firstTurns, arrivalsAt]
  | k, s :: ss, h => by
    obtain ⟨tt, ht, _, _⟩ := h s List.mem_cons_self
    have ih := firstTurns_arrivals W t (k + 1) ss (fun x hx => h x (List.mem_cons_of_mem _ hx))
    simp only [firstTurns, ht, arrivalsAt]
    rw [filter_insertPending, ih]
    by_cases ha : s.arrive = t <;> simp [ha]

/-- On time, the turns due at a step are as many as the sessions arriving at its time. -/
theorem due_length (W : Nat) (ss : List Session) (m : Machine) (hS : OneTurnW W ss) (ht : OnTime ss m) :
    (duePending m.now m.pending).1.length = arrivalsAt ss m.now := by
  rw [← firstTurns_arrivals W m.now 0 ss hS, (duePending_filter m.now m.pending).1, ht, List.filter_filter]
  congr 1
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

/-- Nothing due now and the next pending turn at `q.time`: no session arrives from now until then. -/
theorem idle_no_arrivals (W : Nat) (ss : List Session) (m : Machine) (hS : OneTurnW W ss)
    (ht : OnTime ss m) (hs : SortedT m.pending) (hk : (duePending m.now m.pending).1.length = 0)
    (q : Pending) (qs : List Pending) (hl : (duePending m.now m.pending).2 = q :: qs) :
    ∀ s, m.now ≤ s → s < q.time → arrivalsAt ss s = 0 := by
  intro s h1 h2
  rw [← firstTurns_arrivals W s 0 ss hS, List.length_eq_zero_iff, List.filter_eq_nil_iff]
  intro x hxF hxs
  have hxs' : x.time = s := by simpa using hxs
  have hxp : x ∈ m.pending := by
    rw [ht]
    exact List.mem_filter.mpr ⟨hxF, by simp only [decide_eq_true_eq]; omega⟩
  rcases Nat.lt_or_ge m.now x.time with hx | hx
  · have hmem : x ∈ (duePending m.now m.pending).2 := by
      rw [(duePending_filter m.now m.pending).2]
      exact List.mem_filter.mpr ⟨hxp, by simp only [decide_eq_true_eq]; omega⟩
    have hsl := (duePending_later m.now m.pending).2 hs
    rw [hl] at hmem hsl
    rcases List.mem_cons.mp hmem with hq | hm
    · subst hq; omega
    · have := hsl.1 x hm; omega
  · have hmem : x ∈ (duePending m.now m.pending).1 := by
      rw [(duePending_filter m.now m.pending).1]
      exact List.mem_filter.mpr ⟨hxp, by simp only [decide_eq_true_eq]; omega⟩
    rw [List.length_eq_zero_iff] at hk
    rw [hk] at hmem
    simp at hmem

/-- One step on time: the work read at the clock stays the chain's backlog at the clock, and the step
advances the clock by one or the engine was empty with no arrival from its time to the new clock. -/
theorem step_time (eng : Engine) (ss : List Session) (W bW N : Nat) (m : Machine)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks)
    (h : Inv eng.blockSize W bW N m) (hs : SortedT m.pending) (ht : OnTime ss m)
    (hw : work W m = backlogAt W eng.budget (arrivalsAt ss) m.now) :
    work W (step eng ss m) = backlogAt W eng.budget (arrivalsAt ss) (step eng ss m).now ∧
      ((step eng ss m).now = m.now + 1 ∨
        (work W m = 0 ∧ arrivalsAt ss m.now = 0 ∧ m.now ≤ (step eng ss m).now ∧
          ∀ s, m.now ≤ s → s < (step eng ss m).now → arrivalsAt ss s = 0)) := by
  obtain ⟨_, w1, w2⟩ := step_inv eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h
  obtain ⟨_, _, _, c2⟩ := step_clock eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs
  have hk := due_length W ss m hS ht
  rw [hk] at w1 c2 w2
  rcases w2 with hn | ⟨hk0, hw0⟩
  · refine ⟨?_, Or.inl hn⟩
    rw [w1, hn, hw]
    rfl
  · have hwork : work W (step eng ss m) = 0 := by rw [w1, hw0, hk0]; simp
    rcases c2 with hn | ⟨_, ⟨_, hn⟩ | ⟨q, qs, hl, hn⟩⟩
    · refine ⟨?_, Or.inl hn⟩
      rw [w1, hn, hw]
      rfl
    · refine ⟨by rw [hwork, hn, ← hw, hw0], Or.inr ⟨hw0, hk0, by omega, fun s h1 h2 => by omega⟩⟩
    · have hz := idle_no_arrivals W ss m hS ht hs (by rw [hk]; exact hk0) q qs hl
      have hqt : m.now < q.time :=
        (duePending_later m.now m.pending).1 q (by rw [hl]; exact List.mem_cons_self)
      refine ⟨?_, Or.inr ⟨hw0, hk0, by omega, by rw [hn]; exact hz⟩⟩
      rw [hwork, hn]
      have hb := backlogAt_zero W eng.budget (arrivalsAt ss) m.now (by rw [← hw, hw0]) (q.time - m.now)
        (fun s h1 h2 => hz s h1 (by omega))
      rw [Nat.add_sub_of_le (by omega)] at hb
      exact hb.symm

theorem run_time (eng : Engine) (ss : List Session) (W bW N : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (m : Machine), Inv eng.blockSize W bW N m → SortedT m.pending → OnTime ss m →
      work W m = backlogAt W eng.budget (arrivalsAt ss) m.now →
      work W (run eng ss fuel m) = backlogAt W eng.budget (arrivalsAt ss) (run eng ss fuel m).now
  | 0, _, _, _, _, hw => hw
  | fuel + 1, m, h, hs, ht, hw => by
    simp only [run]
    split
    · exact hw
    · exact run_time eng ss W bW N hch hcache hB hW hbW hfit hS hcap hkv fuel _
        (step_inv eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h).1
        (step_clock eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs).1
        (step_onTime eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs ht)
        (step_time eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs ht hw).1

theorem init_onTime (ss : List Session) : OnTime ss (init ss) := by
  simp only [OnTime, init]
  generalize firstTurns 0 ss = l
  induction l with
  | nil => rfl
  | cons a l ih =>
    rw [List.filter_cons, if_pos (by simp)]
    exact congrArg (a :: ·) ih

theorem run_one (eng : Engine) (ss : List Session) (n : Nat) (m : Machine) :
    run eng ss (n + 1) m = if m.settled eng then m else run eng ss n (step eng ss m) := rfl

theorem run_settled (eng : Engine) (ss : List Session) (m : Machine) (h : m.settled eng = true) :
    ∀ n, run eng ss n m = m
  | 0 => rfl
  | n + 1 => by rw [run_one, if_pos h]

/-- A run one step longer: the same machine if it had settled, else one more step. -/
theorem run_succ (eng : Engine) (ss : List Session) : ∀ (fuel : Nat) (m : Machine),
    run eng ss (fuel + 1) m =
      if (run eng ss fuel m).settled eng then run eng ss fuel m else step eng ss (run eng ss fuel m)
  | 0, _ => rfl
  | fuel + 1, m => by
    by_cases h : m.settled eng = true
    · simp [run_settled eng ss m h, h]
    · rw [run_one eng ss (fuel + 1) m, if_neg h, run_succ eng ss fuel (step eng ss m),
        run_one eng ss fuel m, if_neg h]

end DriftMachine

open DriftMachine in
/-- **The machine's work, read at its clock, is the time-indexed drift chain's backlog** (issue 14,
result 7). Under `drift_machine_step`'s hypotheses (sessions of one turn, a `W`-token prompt and at
most one output token, any arrival times; `chunk = 0`, `caching = false`; a request slot and `bW ≥` a
prompt's blocks for every session), let `b = backlogAt W budget (arrivalsAt ss)`: 0 at time 0 and
`b(t + 1) = b(t) + a(t) · W − budget` stopping at 0, `a(t)` the sessions arriving at time `t`. At every
machine `m` of every run, `work m = b(m.now)`; and its step either advances the clock by one (the
iteration is the chain's step at time `m.now`, `k = a(m.now)` by `drift_machine_due`), or the engine
was empty (`work m = 0`) with no session arriving at `m.now` and none before the new clock: the clock
jumps over a stretch where `b` stays 0 and nothing arrives. -/
theorem drift_machine_time (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (fuel : Nat) :
    work W (run eng ss fuel (init ss))
        = backlogAt W eng.budget (arrivalsAt ss) (run eng ss fuel (init ss)).now ∧
      ((step eng ss (run eng ss fuel (init ss))).now = (run eng ss fuel (init ss)).now + 1 ∨
        (work W (run eng ss fuel (init ss)) = 0 ∧ arrivalsAt ss (run eng ss fuel (init ss)).now = 0 ∧
          (run eng ss fuel (init ss)).now ≤ (step eng ss (run eng ss fuel (init ss))).now ∧
          ∀ s, (run eng ss fuel (init ss)).now ≤ s → s < (step eng ss (run eng ss fuel (init ss))).now →
            arrivalsAt ss s = 0 ∧ backlogAt W eng.budget (arrivalsAt ss) s = 0)) := by
  have hI := init_inv eng.blockSize W bW ss hS
  have h0 : work W (init ss) = backlogAt W eng.budget (arrivalsAt ss) (init ss).now := by
    simp [work, init, BacklogMany.sumRem, reqCount, backlogAt]
  have hi := run_inv eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _ hI
  have hs := (run_clock eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _ hI
    (firstTurns_sorted 0 ss) (fun _ _ => Nat.zero_le _)).1
  have ht := run_onTime eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _ hI
    (firstTurns_sorted 0 ss) (init_onTime ss)
  have hw := run_time eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv fuel _ hI
    (firstTurns_sorted 0 ss) (init_onTime ss) h0
  refine ⟨hw, ?_⟩
  generalize run eng ss fuel (init ss) = m at hi hs ht hw ⊢
  obtain ⟨_, hstep⟩ := step_time eng ss W bW _ m hch hcache hB hW hbW hfit hS hcap hkv hi hs ht hw
  refine hstep.imp id (fun ⟨hw0, ha0, hle, hz⟩ => ⟨hw0, ha0, hle, fun s h1 h2 => ⟨hz s h1 h2, ?_⟩⟩)
  have hb := backlogAt_zero W eng.budget (arrivalsAt ss) m.now (by rw [← hw, hw0]) (s - m.now)
    (fun u u1 u2 => hz u u1 (by omega))
  rw [Nat.add_sub_of_le h1] at hb
  exact hb

open DriftMachine in
/-- **Every time up to the clock** (issue 14, result 7): under `drift_machine_step`'s hypotheses, for
every run and every time `t` up to its clock, either a machine of the run (after `f ≤ fuel` steps) has
clock `t` and its work is the chain's backlog `backlogAt W budget (arrivalsAt ss) t`, or `t` lies in an
empty stretch the clock jumped over: no session arrives at `t` and the chain's backlog at `t` is 0. -/
theorem drift_machine_time_every (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) :
    ∀ (fuel t : Nat), t ≤ (run eng ss fuel (init ss)).now →
      (∃ f, f ≤ fuel ∧ (run eng ss f (init ss)).now = t ∧
          work W (run eng ss f (init ss)) = backlogAt W eng.budget (arrivalsAt ss) t) ∨
        (arrivalsAt ss t = 0 ∧ backlogAt W eng.budget (arrivalsAt ss) t = 0)
  | 0, t, ht => by
    have h0 : (run eng ss 0 (init ss)).now = 0 := rfl
    have ht0 : t = 0 := by omega
    subst ht0
    exact Or.inl ⟨0, Nat.le_refl _, h0, by
      rw [← h0]; exact (drift_machine_time eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv 0).1⟩
  | fuel + 1, t, ht => by
    have hD := drift_machine_time eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv fuel
    have hW1 := (drift_machine_time eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv (fuel + 1)).1
    have ih := drift_machine_time_every eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv fuel t
    rw [run_succ eng ss fuel (init ss)] at ht
    by_cases hset : (run eng ss fuel (init ss)).settled eng = true
    · rw [if_pos hset] at ht
      rcases ih ht with ⟨f, hf, h1, h2⟩ | h
      · exact Or.inl ⟨f, by omega, h1, h2⟩
      · exact Or.inr h
    · rw [if_neg hset] at ht
      have hrun : run eng ss (fuel + 1) (init ss) = step eng ss (run eng ss fuel (init ss)) := by
        rw [run_succ eng ss fuel (init ss), if_neg hset]
      by_cases hle : t ≤ (run eng ss fuel (init ss)).now
      · rcases ih hle with ⟨f, hf, h1, h2⟩ | h
        · exact Or.inl ⟨f, by omega, h1, h2⟩
        · exact Or.inr h
      · rcases hD.2 with hn | ⟨_, _, _, hz⟩
        · have hnow : (run eng ss (fuel + 1) (init ss)).now = t := by rw [hrun]; omega
          exact Or.inl ⟨fuel + 1, Nat.le_refl _, hnow, by rw [← hnow]; exact hW1⟩
        · by_cases hlt : t < (step eng ss (run eng ss fuel (init ss))).now
          · exact Or.inr (hz t (by omega) hlt)
          · have hnow : (run eng ss (fuel + 1) (init ss)).now = t := by rw [hrun]; omega
            exact Or.inl ⟨fuel + 1, Nat.le_refl _, hnow, by rw [← hnow]; exact hW1⟩

end Serq
