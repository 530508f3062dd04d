module

public import Serq.BacklogBudgetResets
public import Serq.DriftMachine

/-! # The idle gaps and the first record of every run (issue 14, result 2, case (b))

`Serq.BacklogBudget.backlog_of_resets` assumes that nothing arrives strictly between two consecutive
records' starts but at the later one (`hidle`: `arrivedBy (rs[i + 1].start − 1) ss = arrivedBy rs[i].start
ss`) and that the first record starts after 0 with no session arrived before it (`h0`). This module
proves both for every run from `init` of every engine with every workload (any sessions, turns, think
times; any fuel), under one hypothesis on the engine: at every step of the run at which a session's
first turn is due, the engine runs an iteration (the step adds a record). Without it the gaps fail in
general: a turn refused at submission (its prompt beyond the KV pool) or a step where nothing fits counts an
arrival and makes no record. `Serq.BacklogBudget.idle_gaps` gives `hidle` and the "nothing before"
half of `h0`; `Serq.BacklogBudget.start_pos`, with no session arriving at time 0 and no hypothesis on
the engine, that every record starts after 0; `Serq.BacklogBudget.first_record` is `h0`; and
`Serq.BacklogBudget.backlog_of_resets_run` is `backlog_of_resets` with both discharged.

The invariant of the gaps (`GapInv`): the arrivals' count (`ArrInv`); the pending turns in order of
time (`DriftMachine.SortedT`), so the clock, when no iteration runs, jumps to the earliest pending turn
(`step_cases`); the records' gaps (`Gaps`, an accumulator chain like `Chain0`) ending at the machine's
`arrived`; and no session arriving strictly before the clock but those counted in `arrived`. That of the
first record (`PosInv`): while the clock is at 0, no record, the engine empty, every pending turn a first
turn (so, none arriving at 0, the step idles: `step_empty`).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open DriftMachine (SortedT)

theorem arrivedBy_mono (s t : Nat) (hst : s ≤ t) : ∀ (ss : List Session), arrivedBy s ss ≤ arrivedBy t ss
  | [] => Nat.le_refl _
  | x :: ss => by
    have ih := arrivedBy_mono s t hst ss
    simp only [arrivedBy]
    cases x.turns with
    | nil => simpa using ih
    | cons _ _ =>
      dsimp only
      by_cases h1 : x.arrive ≤ s
      · have h2 : x.arrive ≤ t := by omega
        simp only [h1, h2, if_true]; omega
      · simp only [h1, if_false]; split <;> omega

theorem firstBy_zero (t : Nat) : ∀ (l : List Pending), (∀ p ∈ l, t < p.time) → firstBy t l = 0
  | [], _ => rfl
  | p :: ps, h => by
    have ih := firstBy_zero t ps (fun q hq => h q (List.mem_cons_of_mem _ hq))
    have hp := h p List.mem_cons_self
    simp only [firstBy, ih]
    split <;> omega

/-- What `apply` leaves of the pending turns: only `nextTurn`'s insertions. -/
theorem apply_pending (eng : Engine) (ss : List Session) (now : Nat) (P : List Pending → Prop)
    (hP : ∀ (req : Req) (ps : List Pending), P ps → P (nextTurn ss now req ps)) :
    ∀ (l : List Res) (M : Machine) (kept : List Res), P M.pending → P (apply eng ss now M l kept).pending
  | [], _, _, h => h
  | r :: rs, M, kept, h => by
    simp only [apply]
    repeat' split
    all_goals first
      | exact apply_pending eng ss now P hP rs _ _ h
      | exact apply_pending eng ss now P hP rs _ _ (hP _ _ h)

/-- A next turn is inserted in order, after the iteration's step. -/
theorem nextTurn_order (ss : List Session) (now : Nat) (req : Req) (ps : List Pending)
    (h : SortedT ps ∧ ∀ p ∈ ps, now + 1 ≤ p.time) :
    SortedT (nextTurn ss now req ps) ∧ ∀ p ∈ nextTurn ss now req ps, now + 1 ≤ p.time := by
  unfold nextTurn
  split
  · exact h
  · split
    · exact h
    · refine ⟨DriftMachine.insertPending_sorted _ _ h.1, fun p hp => ?_⟩
      rcases BacklogDecode.mem_insertPending_aux _ p _ hp with rfl | hp
      · dsimp only; omega
      · exact h.2 p hp

/-- The two shapes of a step: no iteration (the records, `arrived` up to the due first turns, and the
clock at the earliest pending turn, or unchanged with nothing pending), or an iteration at the clock. -/
theorem step_cases (eng : Engine) (ss : List Session) (m : Machine) :
    ((step eng ss m).records = m.records ∧
      (step eng ss m).arrived = m.arrived + countFirst (duePending m.now m.pending).1 ∧
      (((duePending m.now m.pending).2 = [] ∧ (step eng ss m).now = m.now ∧ (step eng ss m).pending = []) ∨
        ∃ q qs, (duePending m.now m.pending).2 = q :: qs ∧ (step eng ss m).now = q.time ∧
          (step eng ss m).pending = q :: qs)) ∨
    (∃ rec : Record, (step eng ss m).records = appendRecord m.records rec ∧ rec.start = m.now ∧
      (step eng ss m).arrived = m.arrived + countFirst (duePending m.now m.pending).1 ∧
      (step eng ss m).now = m.now + 1 ∧
      (SortedT (duePending m.now m.pending).2 → SortedT (step eng ss m).pending)) := by
  have hlat := DriftMachine.duePending_later m.now m.pending
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  rw [hdp] at hlat
  obtain ⟨l1, l2⟩ := hlat
  dsimp only at l1 l2 ⊢
  generalize submit eng ss due m.waiting = waiting
  split
  · left
    cases later with
    | nil => exact ⟨rfl, rfl, Or.inl ⟨rfl, rfl, rfl⟩⟩
    | cons q qs => exact ⟨rfl, rfl, Or.inr ⟨q, qs, rfl, rfl, rfl⟩⟩
  · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    generalize plan eng chunk m waiting = P
    split
    · left
      cases later with
      | nil => exact ⟨rfl, rfl, Or.inl ⟨rfl, rfl, rfl⟩⟩
      | cons q qs => exact ⟨rfl, rfl, Or.inr ⟨q, qs, rfl, rfl, rfl⟩⟩
    · right
      dsimp only
      rw [apply_records, (apply_counts eng ss m.now 0 _ _ []).1]
      refine ⟨_, rfl, rfl, rfl, rfl, fun hs => ?_⟩
      exact (apply_pending eng ss m.now (fun ps => SortedT ps ∧ ∀ p ∈ ps, m.now + 1 ≤ p.time)
        (nextTurn_order ss m.now) P.done _ [] ⟨hs, fun p hp => l1 p hp⟩).1

/-- The records' gaps, from `a` (the sessions arrived by the previous record's start, 0 before the
first), ending at `e`: nothing arrives strictly between two consecutive starts but at the later one. -/
def Gaps (ss : List Session) : Nat → List Record → Nat → Prop
  | a, [], e => a = e
  | a, r :: rs, e => (0 < r.start → arrivedBy (r.start - 1) ss ≤ a) ∧ Gaps ss (arrivedBy r.start ss) rs e

theorem gaps_append (ss : List Session) : ∀ (a : Nat) (rs : List Record) (e : Nat) (r : Record),
    Gaps ss a rs e → (0 < r.start → arrivedBy (r.start - 1) ss ≤ e) →
      Gaps ss a (appendRecord rs r) (arrivedBy r.start ss)
  | a, [], e, r, h, hr => by
    simp only [Gaps] at h
    subst h
    exact ⟨hr, rfl⟩
  | a, x :: xs, e, r, h, hr => ⟨h.1, gaps_append ss _ xs e r h.2 hr⟩

theorem gaps_first (ss : List Session) : ∀ (a : Nat) (rs : List Record) (e : Nat), Gaps ss a rs e →
    ∀ (hi : 0 < rs.length), 0 < rs[0].start → arrivedBy (rs[0].start - 1) ss ≤ a
  | _, [], _, _, hi => by simp at hi
  | _, _ :: _, _, h, _ => h.1

theorem gaps_next (ss : List Session) : ∀ (a : Nat) (rs : List Record) (e : Nat), Gaps ss a rs e →
    ∀ (i : Nat) (hi : i + 1 < rs.length), 0 < rs[i + 1].start →
      arrivedBy (rs[i + 1].start - 1) ss ≤ arrivedBy rs[i].start ss
  | _, [], _, _, _, hi => by simp at hi
  | _, [_], _, _, _, hi => by simp at hi
  | a, x :: y :: ys, e, h, 0, _ => by
    simp only [Gaps] at h
    simp only [List.getElem_cons_succ, List.getElem_cons_zero]
    exact h.2.1
  | a, x :: y :: ys, e, h, i + 1, hi => by
    simp only [Gaps] at h
    have := gaps_next ss _ (y :: ys) e h.2 i (by simp at hi ⊢; omega)
    simpa using this

/-- The invariant: the arrivals' count (`ArrInv`), the pending turns in order of time, the records'
gaps up to `arrived`, and no session arriving strictly before the clock but those in `arrived`. -/
def GapInv (ss : List Session) (m : Machine) : Prop :=
  ArrInv ss m ∧ SortedT m.pending ∧ Gaps ss 0 m.records m.arrived ∧
    ∀ t, t < m.now → arrivedBy t ss ≤ m.arrived

theorem step_gap (eng : Engine) (ss : List Session) (m : Machine) (h : GapInv ss m)
    (hp : countFirst (duePending m.now m.pending).1 ≠ 0 → (step eng ss m).records ≠ m.records) :
    GapInv ss (step eng ss m) := by
  obtain ⟨ha, hs, hg, ht⟩ := h
  have ha' := step_arr eng ss m ha
  have hlat := DriftMachine.duePending_later m.now m.pending
  have hsplit := fun t (hle : m.now ≤ t) => (due_split m.now t hle m.pending).1
  have hz := (due_split m.now m.now (Nat.le_refl _) m.pending).2
  have h1 := ha.1
  have hrec : m.arrived + countFirst (duePending m.now m.pending).1 = arrivedBy m.now ss := by
    have e1 := h1 m.now (Nat.le_refl _)
    have e2 := hsplit m.now (Nat.le_refl _)
    omega
  rcases step_cases eng ss m with ⟨hr, harr, hcl⟩ | ⟨rec, hr, hst, harr, hnow, hsort⟩
  · have h0 : countFirst (duePending m.now m.pending).1 = 0 := by
      by_cases hc : countFirst (duePending m.now m.pending).1 = 0
      · exact hc
      · exact absurd hr (hp hc)
    rw [h0, Nat.add_zero] at harr
    refine ⟨ha', ?_, ?_, ?_⟩
    · rcases hcl with ⟨_, _, hpe⟩ | ⟨q, qs, hl, _, hpe⟩
      · rw [hpe]; trivial
      · rw [hpe, ← hl]; exact hlat.2 hs
    · rw [hr, harr]; exact hg
    · intro t htn
      rw [harr]
      by_cases hlt : t < m.now
      · exact ht t hlt
      · have e1 := h1 t (by omega)
        have e2 := hsplit t (by omega)
        have e3 : firstBy t (duePending m.now m.pending).2 = 0 := by
          apply firstBy_zero
          rcases hcl with ⟨hl, _, _⟩ | ⟨q, qs, hl, hn, _⟩
          · rw [hl]; simp
          · have hsl := hlat.2 hs
            rw [hl] at hsl ⊢
            rw [hn] at htn
            intro p hp'
            rcases List.mem_cons.mp hp' with rfl | hp'
            · exact htn
            · have := hsl.1 p hp'; omega
        omega
  · refine ⟨ha', hsort (hlat.2 hs), ?_, ?_⟩
    · rw [hr, harr, hrec, ← hst]
      exact gaps_append ss 0 m.records m.arrived rec hg (fun hpos => ht _ (by omega))
    · intro t htn
      rw [harr]
      rw [hnow] at htn
      by_cases hlt : t < m.now
      · have := ht t hlt; omega
      · have : t = m.now := by omega
        subst this
        omega

theorem run_gap (eng : Engine) (ss : List Session) :
    ∀ (fuel : Nat) (m : Machine), GapInv ss m →
      (∀ k, (run eng ss k m).settled eng = false →
        countFirst (duePending (run eng ss k m).now (run eng ss k m).pending).1 ≠ 0 →
          (step eng ss (run eng ss k m)).records ≠ (run eng ss k m).records) →
      GapInv ss (run eng ss fuel m)
  | 0, _, h, _ => h
  | fuel + 1, m, h, hp => by
    simp only [run]
    split
    · exact h
    · rename_i hns
      have hns' : m.settled eng = false := by simpa using hns
      have e : ∀ k, run eng ss (k + 1) m = run eng ss k (step eng ss m) := by
        intro k; simp only [run]; rw [if_neg hns]
      exact run_gap eng ss fuel _ (step_gap eng ss m h (hp 0 hns'))
        (fun k hk => by have := hp (k + 1); rw [e k] at this; exact this hk)

/-- A step of an empty engine with nothing due: no iteration, the engine stays empty, the clock stays
or jumps to the earliest pending turn. -/
theorem step_empty (eng : Engine) (ss : List Session) (m : Machine) (hr : m.running = [])
    (hw : m.waiting = []) (hd : (duePending m.now m.pending).1 = []) :
    (step eng ss m).records = m.records ∧ (step eng ss m).running = [] ∧ (step eng ss m).waiting = [] ∧
      (step eng ss m).pending = (duePending m.now m.pending).2 ∧
      ((step eng ss m).now = m.now ∨
        ∃ q qs, (duePending m.now m.pending).2 = q :: qs ∧ (step eng ss m).now = q.time) := by
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  rw [hdp] at hd
  dsimp only at hd ⊢
  subst hd
  have hs : submit eng ss [] m.waiting = [] := by rw [hw]; rfl
  have hc : (noRes m.running = true ∧ noReq (submit eng ss [] m.waiting) = true) := by
    rw [hs, hr]; exact ⟨rfl, rfl⟩
  rw [if_pos hc]
  cases later with
  | nil => exact ⟨rfl, hr, hs, rfl, Or.inl rfl⟩
  | cons q qs => exact ⟨rfl, hr, hs, rfl, Or.inr ⟨q, qs, rfl, rfl⟩⟩

theorem eq_nil_of_countFirst : ∀ (l : List Pending), (∀ p ∈ l, p.turn = 0) → countFirst l = 0 → l = []
  | [], _, _ => rfl
  | p :: ps, h, hc => by
    have := h p List.mem_cons_self
    simp only [countFirst, this, if_true] at hc
    omega

theorem mem_due (now : Nat) (ps : List Pending) : ∀ p ∈ (duePending now ps).1, p ∈ ps := by
  intro p hp
  rcases hdp : duePending now ps with ⟨due, later⟩
  rw [hdp] at hp
  exact (OneAtATime.duePending_mem now ps due later hdp).1 p hp

/-- The invariant of the first record: the arrivals' count; while the clock is at 0, no record, the
engine empty and every pending turn a first turn; every record after time 0. -/
def PosInv (ss : List Session) (m : Machine) : Prop :=
  ArrInv ss m ∧
    (m.now = 0 → m.records = [] ∧ m.running = [] ∧ m.waiting = [] ∧ ∀ p ∈ m.pending, p.turn = 0) ∧
    ∀ r ∈ m.records, 0 < r.start

theorem step_pos (eng : Engine) (ss : List Session) (m : Machine) (hz : arrivedBy 0 ss = 0)
    (h : PosInv ss m) : PosInv ss (step eng ss m) := by
  obtain ⟨ha, hZ, hP⟩ := h
  have ha' := step_arr eng ss m ha
  have hlat := (DriftMachine.duePending_later m.now m.pending).1
  have hpart := (DriftMachine.duePending_parts m.now m.pending).2
  by_cases hn : m.now = 0
  · obtain ⟨hrec, hr, hw, ht⟩ := hZ hn
    have e1 := ha.1 m.now (Nat.le_refl _)
    have e2 := (due_split m.now m.now (Nat.le_refl _) m.pending).1
    rw [hn, hz] at e1
    rw [hn] at e2
    have hd : (duePending m.now m.pending).1 = [] :=
      eq_nil_of_countFirst _ (fun p hp => ht p (mem_due _ _ p hp)) (by rw [hn]; omega)
    obtain ⟨s1, s2, s3, s4, s5⟩ := step_empty eng ss m hr hw hd
    refine ⟨ha', fun _ => ⟨by rw [s1, hrec], s2, s3, fun p hp => ?_⟩, by rw [s1]; exact hP⟩
    rw [s4] at hp
    exact ht p (hpart p hp)
  · refine ⟨ha', fun h0 => ?_, ?_⟩
    · exfalso
      rcases step_cases eng ss m with ⟨_, _, ⟨_, hnw, _⟩ | ⟨q, qs, hl, hnw, _⟩⟩ | ⟨_, _, _, _, hnw, _⟩
      · omega
      · have := hlat q (by rw [hl]; exact List.mem_cons_self); omega
      · omega
    · rcases step_cases eng ss m with ⟨hr, _, _⟩ | ⟨rec, hr, hst, _, _, _⟩
      · rw [hr]; exact hP
      · rw [hr]
        intro r hmem
        rcases (mem_appendRecord _ _ _).mp hmem with hmem | hmem
        · exact hP r hmem
        · subst hmem; omega

theorem run_pos (eng : Engine) (ss : List Session) (hz : arrivedBy 0 ss = 0) :
    ∀ (fuel : Nat) (m : Machine), PosInv ss m → PosInv ss (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_pos eng ss hz fuel _ (step_pos eng ss m hz h)

theorem init_pos (ss : List Session) : PosInv ss (init ss) := by
  refine ⟨⟨fun t _ => by simp [init, firstTurns_firstBy], fun _ h => by simp [init] at h⟩,
    fun _ => ⟨rfl, rfl, rfl, ?_⟩, fun _ h => by simp [init] at h⟩
  have : ∀ (i : Nat) (ss : List Session), ∀ p ∈ firstTurns i ss, p.turn = 0 := by
    intro i ss
    induction ss generalizing i with
    | nil => intro p hp; simp [firstTurns] at hp
    | cons s ss ih =>
      intro p hp
      simp only [firstTurns] at hp
      split at hp
      · exact ih _ p hp
      · rcases BacklogDecode.mem_insertPending_aux _ p _ hp with rfl | hp
        · rfl
        · exact ih _ p hp
  exact this 0 ss

end BacklogBudget

/-- **The idle gaps of every run**: on every run from `init` of every engine, with every workload
(any sessions, turns and think times) and fuel, if the engine runs an iteration (the step adds a
record) at every step of the run at which a session's first turn is due, then, `rs` the run's
records, no session arrives before the first record but at its start (when it starts after 0:
`arrivedBy (rs[0].start − 1) ss = 0`), and nothing arrives strictly between two consecutive records'
starts but at the later one (`arrivedBy (rs[i + 1].start − 1) ss = arrivedBy rs[i].start ss`) — the
hypothesis `hidle` of `Serq.BacklogBudget.backlog_of_resets`, and the second half of its `h0`. -/
theorem BacklogBudget.idle_gaps (eng : Engine) (ss : List Session) (fuel : Nat)
    (hp : ∀ k, (run eng ss k (init ss)).settled eng = false →
      countFirst (duePending (run eng ss k (init ss)).now (run eng ss k (init ss)).pending).1 ≠ 0 →
        (step eng ss (run eng ss k (init ss))).records ≠ (run eng ss k (init ss)).records) :
    (∀ (hi : 0 < (run eng ss fuel (init ss)).records.length),
      0 < (run eng ss fuel (init ss)).records[0].start →
        BacklogBudget.arrivedBy ((run eng ss fuel (init ss)).records[0].start - 1) ss = 0) ∧
    ∀ (i : Nat) (hi : i + 1 < (run eng ss fuel (init ss)).records.length),
      BacklogBudget.arrivedBy ((run eng ss fuel (init ss)).records[i + 1].start - 1) ss =
        BacklogBudget.arrivedBy (run eng ss fuel (init ss)).records[i].start ss := by
  have hinit : BacklogBudget.GapInv ss (init ss) :=
    ⟨⟨fun t _ => by simp [init, BacklogBudget.firstTurns_firstBy], fun _ h => by simp [init] at h⟩,
      DriftMachine.firstTurns_sorted 0 ss, rfl, fun t ht => by simp [init] at ht⟩
  obtain ⟨_, _, hg, _⟩ := BacklogBudget.run_gap eng ss fuel (init ss) hinit hp
  have hst := BacklogBudget.start_next eng ss fuel
  refine ⟨fun hi hpos => Nat.le_zero.mp (BacklogBudget.gaps_first ss _ _ _ hg hi hpos), fun i hi => ?_⟩
  have hlt := hst i hi
  have h1 := BacklogBudget.gaps_next ss _ _ _ hg i hi (by omega)
  have h2 := BacklogBudget.arrivedBy_mono _ _ (by omega : (run eng ss fuel (init ss)).records[i].start ≤
    (run eng ss fuel (init ss)).records[i + 1].start - 1) ss
  omega


/-- **The first record of every run starts after 0** when no session arrives at time 0: on every run
from `init` of every engine, with every workload and fuel, if `arrivedBy 0 ss = 0` then every record
starts after time 0 (`0 < x.start`). With `idle_gaps` (an iteration at every step with a first turn
due), the hypothesis `h0` of `Serq.BacklogBudget.backlog_of_resets` (`first_record`). -/
theorem BacklogBudget.start_pos (eng : Engine) (ss : List Session) (fuel : Nat)
    (hz : BacklogBudget.arrivedBy 0 ss = 0) :
    ∀ x ∈ (run eng ss fuel (init ss)).records, 0 < x.start :=
  (BacklogBudget.run_pos eng ss hz fuel (init ss) (BacklogBudget.init_pos ss)).2.2

/-- **The first record**: `h0` of `Serq.BacklogBudget.backlog_of_resets` — no session arriving at time
0, and an iteration at every step of the run with a first turn due: the first record starts after 0
with no session arrived before it. -/
theorem BacklogBudget.first_record (eng : Engine) (ss : List Session) (fuel : Nat)
    (hz : BacklogBudget.arrivedBy 0 ss = 0)
    (hp : ∀ k, (run eng ss k (init ss)).settled eng = false →
      countFirst (duePending (run eng ss k (init ss)).now (run eng ss k (init ss)).pending).1 ≠ 0 →
        (step eng ss (run eng ss k (init ss))).records ≠ (run eng ss k (init ss)).records) :
    ∀ (hi : 0 < (run eng ss fuel (init ss)).records.length),
      0 < (run eng ss fuel (init ss)).records[0].start ∧
        BacklogBudget.arrivedBy ((run eng ss fuel (init ss)).records[0].start - 1) ss = 0 := by
  intro hi
  have h1 := BacklogBudget.start_pos eng ss fuel hz _ (List.getElem_mem hi)
  exact ⟨h1, (BacklogBudget.idle_gaps eng ss fuel hp).1 hi h1⟩

/-- **The bounded backlog on a run, from resets, the idle gaps discharged**: `backlog_of_resets` with its
hypotheses `h0` and `hidle` proved (`first_record`, `idle_gaps`) for sessions at least `g` apart of
which none arrives at time 0, when the engine runs an iteration at every step of the run with a first
turn due. What remains is `hstep` (every record but the last a reset or full and followed a step
later) and that progress hypothesis. -/
theorem BacklogBudget.backlog_of_resets_run (eng : Engine) (ss : List Session) (fuel g P D x W C : Nat)
    (hg : 0 < g) (hw : GappedDecode g P D x ss) (hW : W ≤ eng.budget * g)
    (hz : BacklogBudget.arrivedBy 0 ss = 0)
    (hp : ∀ k, (run eng ss k (init ss)).settled eng = false →
      countFirst (duePending (run eng ss k (init ss)).now (run eng ss k (init ss)).pending).1 ≠ 0 →
        (step eng ss (run eng ss k (init ss))).records ≠ (run eng ss k (init ss)).records)
    (hstep : ∀ (i : Nat) (hi : i + 1 < (run eng ss fuel (init ss)).records.length),
      (run eng ss fuel (init ss)).records[i].arrived * W ≤
          (run eng ss fuel (init ss)).records[i].served + (run eng ss fuel (init ss)).records[i].tokens + C ∨
        ((run eng ss fuel (init ss)).records[i].tokens = eng.budget ∧
          (run eng ss fuel (init ss)).records[i + 1].start = (run eng ss fuel (init ss)).records[i].start + 1)) :
    ∀ (i : Nat) (hi : i < (run eng ss fuel (init ss)).records.length),
      (run eng ss fuel (init ss)).records[i].arrived * W ≤ (run eng ss fuel (init ss)).records[i].served + W + C :=
  BacklogBudget.backlog_of_resets eng ss fuel g P D x W C _ rfl hg hw hW
    (BacklogBudget.first_record eng ss fuel hz hp) (BacklogBudget.idle_gaps eng ss fuel hp).2 hstep

end Serq
