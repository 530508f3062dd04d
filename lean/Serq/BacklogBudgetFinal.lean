module

public import Serq.BacklogBudgetBalance
public import Serq.BacklogBudgetProgress

/-! # The anchor on the machine (issue 14, result 2(b): the final assembly, first half)

`Serq.BacklogBudget.Anchor` on the iteration records, carried by the machine instead (`AnchorM`): an
anchor step `t0` before the clock, by which the work arrived exceeded `S0` by at most `C`, and since which
the engine served at least `B` tokens at every step (`S0 + B · (now − t0 − 1) ≤ served`). `Anc` adds the
start of a run (nothing arrived by the clock). Proved here:

* `anchorM_now`, `anc_now`: the anchor bounds the work arrived by the clock, `arrivedBy now · W ≤ served + W
  + C`, for sessions at least `g` apart and `W ≤ B · g` (`anchor_bound`, `arrivals_spaced`);
* `anchorM_full` (an iteration that spends the budget keeps the anchor), `anchorM_reset` (a new anchor at
  `now − 1` when the work arrived by then exceeds what is served by at most `C`);
* `stepOk_of`: the count half of `StepOk` from the balance (`Bal`), the arrivals' count (`ArrInv`), the
  anchor and a bound `R` on the residents (the buckets' `(D − 1) · M + 1`): the queue after submission has
  at most `(W + C) / W` requests, each of work `W`;
* `step_anc`: one step keeps `Anc` — an idle step keeps the clock or jumps to the next arrival with the
  engine empty (a new anchor at the arrival's step − 1), an iteration that spends the budget keeps the
  anchor, a short one is a reset when at most `C` is left after it (the buckets' `sumRem ≤ C`).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open BacklogMany

/-! ## The anchor on the machine -/

/-- An anchor step `t0` before the clock, by which the work arrived exceeded `S0` by at most `C`, and since
which the engine served at least `B` tokens at every step. -/
def AnchorM (ss : List Session) (B W C : Nat) (m : Machine) : Prop :=
  ∃ t0 S0, t0 < m.now ∧ arrivedBy t0 ss * W ≤ S0 + C ∧ S0 + B * (m.now - t0 - 1) ≤ m.served

/-- The anchor, or nothing arrived by the clock (the start of a run). -/
def Anc (ss : List Session) (B W C : Nat) (m : Machine) : Prop :=
  AnchorM ss B W C m ∨ arrivedBy m.now ss = 0

theorem anchorM_now (ss : List Session) (B W C g P D x : Nat) (hg : 0 < g) (hw : GappedDecode g P D x ss)
    (hW : W ≤ B * g) (m : Machine) (h : AnchorM ss B W C m) :
    arrivedBy m.now ss * W ≤ m.served + W + C := by
  obtain ⟨t0, S0, ht, hA, hS⟩ := h
  have := anchor_bound W B C g (fun t => arrivedBy t ss) m.now (S0 + B * (m.now - t0 - 1)) hW
    (arrivals_spaced g P D x ss hg hw) ⟨t0, S0, ht, hA, rfl⟩
  simp only at this
  omega

theorem anc_now (ss : List Session) (B W C g P D x : Nat) (hg : 0 < g) (hw : GappedDecode g P D x ss)
    (hW : W ≤ B * g) (m : Machine) (h : Anc ss B W C m) :
    arrivedBy m.now ss * W ≤ m.served + W + C := by
  rcases h with h | h
  · exact anchorM_now ss B W C g P D x hg hw hW m h
  · rw [h, Nat.zero_mul]; omega

/-- An iteration that serves at least the budget, one step later, keeps the anchor. -/
theorem anchorM_full (ss : List Session) (B W C : Nat) (m m' : Machine) (h : AnchorM ss B W C m)
    (hn : m'.now = m.now + 1) (hs : m.served + B ≤ m'.served) : AnchorM ss B W C m' := by
  obtain ⟨t0, S0, ht, hA, hS⟩ := h
  refine ⟨t0, S0, by omega, hA, ?_⟩
  rw [hn]
  have e : m.now + 1 - t0 - 1 = (m.now - t0 - 1) + 1 := by omega
  rw [e, Nat.mul_add, Nat.mul_one]
  omega

/-- A new anchor at the step before the clock: the work arrived by then exceeds what is served by at
most `C`. -/
theorem anchorM_reset (ss : List Session) (B W C : Nat) (m' : Machine) (h0 : 0 < m'.now)
    (h : arrivedBy (m'.now - 1) ss * W ≤ m'.served + C) : AnchorM ss B W C m' := by
  refine ⟨m'.now - 1, m'.served, by omega, h, ?_⟩
  have e : m'.now - (m'.now - 1) - 1 = 0 := by omega
  rw [e, Nat.mul_zero, Nat.add_zero]
  exact Nat.le_refl _

theorem anc_same (ss : List Session) (B W C : Nat) (m m' : Machine) (h : Anc ss B W C m)
    (hn : m'.now = m.now) (hs : m.served ≤ m'.served) : Anc ss B W C m' := by
  rcases h with ⟨t0, S0, ht, hA, hS⟩ | h
  · left; exact ⟨t0, S0, by omega, hA, by rw [hn]; omega⟩
  · right; rw [hn]; exact h

/-! ## The count of `StepOk` -/

/-- The sessions arrived by the clock: those counted and the first turns due. -/
theorem due_arrived (ss : List Session) (m : Machine) (ha : ArrInv ss m) :
    m.arrived + countFirst (duePending m.now m.pending).1 = arrivedBy m.now ss := by
  have h1 := due_split m.now m.now (Nat.le_refl _) m.pending
  have h2 := ha.1 m.now (Nat.le_refl _)
  omega

theorem reqCount_mul_le (W : Nat) : ∀ (w : List Req), (∀ rq ∈ w, W ≤ rq.prompt + (rq.out - 1)) →
    reqCount w * W ≤ reqsLeft w
  | [], _ => by simp [reqCount, reqsLeft]
  | rq :: w, h => by
    have ih := reqCount_mul_le W w (fun x hx => h x (List.mem_cons_of_mem _ hx))
    have := h rq List.mem_cons_self
    simp only [reqCount, reqsLeft, Nat.add_mul, Nat.one_mul]
    omega

/-- The due turns submitted are of work `W = P + (D − 1)`. -/
theorem submit_whole (eng : Engine) (ss : List Session) (P D : Nat)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) (due : List Pending) (w : List Req)
    (hd : ∀ p ∈ due, PendOk ss P p) (hq : ∀ rq ∈ w, P + (D - 1) ≤ rq.prompt + (rq.out - 1)) :
    ∀ rq ∈ submit eng ss due w, P + (D - 1) ≤ rq.prompt + (rq.out - 1) := by
  intro rq hrq
  rcases mem_submit eng ss due w rq hrq with h | ⟨p, hp, rfl⟩
  · exact hq rq h
  · obtain ⟨d1, d2, d3⟩ := hd p hp
    have hout := BacklogDecode.newReq_out eng ss D hw p (BacklogDecode.sessionAt_lt ss p.sid d3) d1
    have e1 : (newReq eng ss p).prompt = P := d2
    omega

/-- **The caps' count from the balance and the anchor**: an engine without a prefix cache, sessions at least
`g` apart of one turn of `P > 0` prompt tokens and `D > 0` output tokens (`GappedDecode`), no turn refused,
`W = P + (D − 1) ≤ budget · g`; a machine with the balance (`Bal`), the arrivals' count (`ArrInv`), every
waiting request of work at least `W`, the anchor (`Anc`) and at most `R` residents (`hcount`: the buckets'
`(D − 1) · M + 1`). Then `StepOk` holds with `K = R + (W + C) / W`: the queue after submission holds at
most `(W + C) / W` requests (its work is at most the work left, `arrivedBy now · W − served ≤ W + C`), and
every due turn is a prompt of `P` tokens with `D` outputs. -/
theorem stepOk_of (eng : Engine) (hc : eng.caching = false) (ss : List Session) (P D R C g x : Nat)
    (hP : 0 < P) (hD : 0 < D) (hg : 0 < g) (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hwk : GappedDecode g P D x ss) (hW : P + (D - 1) ≤ eng.budget * g) (m : Machine)
    (hbal : Bal ss P D m) (ha : ArrInv ss m)
    (hwhole : ∀ rq ∈ m.waiting, P + (D - 1) ≤ rq.prompt + (rq.out - 1))
    (hanc : Anc ss eng.budget (P + (D - 1)) C m) (hcount : resCount m.running ≤ R) :
    StepOk eng ss (R + (P + (D - 1) + C) / (P + (D - 1))) P D m := by
  obtain ⟨h1, h2, _, h4⟩ := hbal
  have hw3 := gapped_one g P D x ss hwk
  have hw' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1 := fun s hs => by
    obtain ⟨t, a, _, b⟩ := hw3 s hs; exact ⟨t, a, b⟩
  have hdue : ∀ p ∈ (duePending m.now m.pending).1, PendOk ss P p :=
    fun p hp => h4 p (mem_due m.now m.pending p hp)
  obtain ⟨s1, _⟩ := submit_work eng hc ss P D hP hfit hw' _ m.waiting hdue h2
  have hwh := submit_whole eng ss P D hw' _ m.waiting hdue hwhole
  have hcnt := reqCount_mul_le (P + (D - 1)) _ hwh
  have hnow := anc_now ss eng.budget (P + (D - 1)) C g P D x hg hwk hW m hanc
  have hda := due_arrived ss m ha
  rw [← hda, Nat.add_mul] at hnow
  unfold workLeft at h1
  refine ⟨?_, ?_⟩
  · have hle : reqCount (submit eng ss (duePending m.now m.pending).1 m.waiting) * (P + (D - 1)) ≤
        P + (D - 1) + C := by omega
    have hq := (Nat.le_div_iff_mul_le (show 0 < P + (D - 1) by omega)).mpr hle
    omega
  · intro p hp
    obtain ⟨d1, d2, d3⟩ := hdue p hp
    have hout := BacklogDecode.newReq_out eng ss D hw' p (BacklogDecode.sessionAt_lt ss p.sid d3) d1
    exact ⟨by omega, by omega, by omega⟩

/-! ## One step keeps the anchor -/

/-- The record a step adds was served the machine's `served`. -/
theorem step_rec_served (eng : Engine) (ss : List Session) (m : Machine) (x : Record)
    (hx : x ∈ (step eng ss m).records) (hxm : x ∉ m.records) : x.served = m.served := by
  unfold step at hx
  generalize duePending m.now m.pending = dl at hx
  obtain ⟨due, later⟩ := dl
  simp only at hx
  generalize submit eng ss due m.waiting = waiting at hx
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1] at hx; exfalso; apply hxm; split at hx <;> exact hx
  · rw [if_neg h1] at hx
    generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk at hx
    by_cases h2 : batchTokens (plan eng chunk m waiting).done = 0 ∧ (plan eng chunk m waiting).preempted = 0
    · rw [if_pos h2] at hx; exfalso; apply hxm; split at hx <;> exact hx
    · rw [if_neg h2] at hx
      simp only [apply_records] at hx
      rcases (mem_appendRecord _ _ _).mp hx with e | e
      · exact absurd e hxm
      · subst e; rfl

/-- A step of an empty engine with an empty queue after submission: no iteration, the engine stays empty,
nothing served. -/
theorem step_idle (eng : Engine) (ss : List Session) (m : Machine) (hr : m.running = [])
    (hw : submit eng ss (duePending m.now m.pending).1 m.waiting = []) :
    (step eng ss m).records = m.records ∧ (step eng ss m).running = [] ∧ (step eng ss m).waiting = [] ∧
      (step eng ss m).served = m.served := by
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  rw [hdp] at hw
  dsimp only at hw ⊢
  have hc : (noRes m.running = true ∧ noReq (submit eng ss due m.waiting) = true) := by
    rw [hw, hr]; exact ⟨rfl, rfl⟩
  rw [if_pos hc]
  cases later with
  | nil => exact ⟨rfl, hr, hw, rfl⟩
  | cons q qs => exact ⟨rfl, hr, hw, rfl⟩

/-- Every record starts before the clock. -/
def StartsBefore (m : Machine) : Prop := ∀ r ∈ m.records, r.start < m.now

theorem step_before (eng : Engine) (ss : List Session) (m : Machine) (h : StartsBefore m) :
    StartsBefore (step eng ss m) ∧ m.now ≤ (step eng ss m).now := by
  have hlat := (DriftMachine.duePending_later m.now m.pending).1
  rcases step_cases eng ss m with ⟨hr, _, ⟨_, hn, _⟩ | ⟨q, qs, hl, hn, _⟩⟩ | ⟨rec, hr, hst, _, hn, _⟩
  · exact ⟨fun r hm => by rw [hr] at hm; rw [hn]; exact h r hm, by omega⟩
  · have := hlat q (by rw [hl]; exact List.mem_cons_self)
    exact ⟨fun r hm => by rw [hr] at hm; have := h r hm; omega, by omega⟩
  · refine ⟨fun r hm => ?_, by omega⟩
    rw [hr] at hm
    rcases (mem_appendRecord _ _ _).mp hm with hm | hm
    · have := h r hm; omega
    · subst hm; omega

/-- **One step keeps the anchor** (`Anc`, with `W = P + (D − 1)`), for an engine without `only` and without a
prefix cache, one-turn sessions of `P > 0` prompt tokens and `D` output tokens, no turn refused, from a
machine with the balance (`Bal`), the anchor, every record before the clock, whose plan preempts nothing
(`NoPre`), given:
* `hgap'`: the gaps' invariant after the step (`GapInv`, from `step_gap`): no session arrives before the
  clock but those counted;
* `hidle`: a step without an iteration finds the engine empty and the queue after submission empty (from
  `step_progress`, `step_admits` under the caps);
* `hshort`: after a short iteration (`x.tokens < budget`) at most `C` is left (the buckets' `sumRem ≤ C`,
  the queue empty by `step_caps`). -/
theorem step_anc (eng : Engine) (hph : eng.phased = false) (hc : eng.caching = false) (ss : List Session)
    (P D C : Nat) (hP : 0 < P) (hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) (m : Machine) (hbal : Bal ss P D m)
    (hpre : NoPre eng ss m) (hbef : StartsBefore m) (hanc : Anc ss eng.budget (P + (D - 1)) C m)
    (hgap' : GapInv ss (step eng ss m))
    (hidle : (step eng ss m).records = m.records →
      m.running = [] ∧ submit eng ss (duePending m.now m.pending).1 m.waiting = [])
    (hshort : ∀ x ∈ (step eng ss m).records, x ∉ m.records → x.tokens < eng.budget →
      workLeft (step eng ss m) ≤ C) :
    Anc ss eng.budget (P + (D - 1)) C (step eng ss m) := by
  have hlat := (DriftMachine.duePending_later m.now m.pending).1
  have hbal' := step_bal eng hph hc ss P D hP hfit hw m hbal hpre
  rcases step_cases eng ss m with ⟨hr, _, hcase⟩ | ⟨rec, hr, hst, _, hn, _⟩
  · obtain ⟨i1, i2, i3, i4⟩ := step_idle eng ss m (hidle hr).1 (hidle hr).2
    rcases hcase with ⟨_, hn, _⟩ | ⟨q, qs, hl, hn, _⟩
    · exact anc_same ss _ _ C m _ hanc hn (by omega)
    · have hq := hlat q (by rw [hl]; exact List.mem_cons_self)
      left
      apply anchorM_reset
      · omega
      · have hb1 := hbal'.1
        unfold workLeft at hb1
        rw [i2, i3] at hb1
        simp only [resLeft, reqsLeft, Nat.add_zero] at hb1
        have h4 := hgap'.2.2.2 ((step eng ss m).now - 1) (by omega)
        have := Nat.mul_le_mul_right (P + (D - 1)) h4
        omega
  · have hmem : rec ∈ (step eng ss m).records := by rw [hr, mem_appendRecord]; exact Or.inr rfl
    have hnot : rec ∉ m.records := fun h => by have := hbef rec h; omega
    obtain ⟨e1, hb2⟩ := step_balance eng hph hc ss P D hP hfit hw m hbal hpre rec hmem hnot
    obtain ⟨_, e3⟩ := step_record eng ss m rec hmem hnot
    have e4 := step_rec_served eng ss m rec hmem hnot
    have e5 : rec.arrived = arrivedBy m.now ss := by rw [← hst]; exact hgap'.1.2 rec hmem
    by_cases hs : rec.tokens < eng.budget
    · have hC := hshort rec hmem hnot hs
      left
      apply anchorM_reset
      · omega
      · rw [hn, Nat.add_sub_cancel, ← e5]
        omega
    · rcases hanc with ha | ha
      · left
        exact anchorM_full ss _ _ C m _ ha hn (by omega)
      · left
        apply anchorM_reset
        · omega
        · rw [hn, Nat.add_sub_cancel, ha, Nat.zero_mul]; omega

end BacklogBudget

end Serq
