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

/-! ## The invariant kept by every step -/

/-- Under the caps, a step leaves waiting only requests of its queue after submission. -/
theorem step_wait_mem (eng : Engine) (ss : List Session) (m : Machine) (K bW : Nat)
    (hK : K ≤ eng.reqsCap) (hkv : K * bW ≤ eng.kvBlocks)
    (hn : resCount m.running + reqCount (submit eng ss (duePending m.now m.pending).1 m.waiting) ≤ K)
    (hres : ∀ r ∈ m.running, Life eng.blockSize bW r)
    (hw : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting, ReqLife eng.blockSize bW rq) :
    ∀ rq ∈ (step eng ss m).waiting, rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting := by
  unfold step
  generalize duePending m.now m.pending = dl at hn hw ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hn hw ⊢
  generalize submit eng ss due m.waiting = waiting at hn hw ⊢
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1]; split <;> exact fun rq h => h
  · rw [if_neg h1]
    generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    obtain ⟨hpre, _⟩ := plan_caps eng chunk m waiting K bW hK hkv hn hres hw
    have hsub := plan_wait eng chunk m waiting hpre
    by_cases h2 : batchTokens (plan eng chunk m waiting).done = 0 ∧ (plan eng chunk m waiting).preempted = 0
    · rw [if_pos h2]; first | exact fun rq h => h | (split <;> exact fun rq h => h)
    · rw [if_neg h2]
      simp only [apply_waiting]
      exact fun x hx => hsub x hx

/-- The invariant of the final assembly (`W = P + (D − 1)`, `bW = blocksFor blockSize (P + D − 1)`): the
gaps (`GapInv`), soundness, the residents and the queue within `bW` blocks to their last positions, the queue
`Fresh`, the balance, every waiting request of work at least `W`, every record before the clock, the anchor,
and the bound on every record. (The buckets' invariant is carried apart, as `J` in `run_fin`.) -/
def FinInv (eng : Engine) (ss : List Session) (P D C : Nat) (m : Machine) : Prop :=
  GapInv ss m ∧ Sound ss m ∧
    (∀ r ∈ m.running, Life eng.blockSize (blocksFor eng.blockSize (P + D - 1)) r) ∧
    (∀ rq ∈ m.waiting, ReqLife eng.blockSize (blocksFor eng.blockSize (P + D - 1)) rq) ∧
    (∀ rq ∈ m.waiting, Fresh rq) ∧ Bal ss P D m ∧
    (∀ rq ∈ m.waiting, P + (D - 1) ≤ rq.prompt + (rq.out - 1)) ∧ StartsBefore m ∧
    Anc ss eng.budget (P + (D - 1)) C m ∧
    ∀ x ∈ m.records, x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + C

/-- **One step keeps the invariant** (issue 14, result 2(b)), with `K = R + (W + C) / W`: an engine of the mixed
schedule (`phased = false`) without a chunk cap and without a prefix cache, a positive budget, sessions at
least `g` apart of one turn of `P > 0` prompt tokens and `D > 0` output tokens (`GappedDecode`),
`W ≤ budget · g`, `K ≤ reqsCap`, `K · blocksFor blockSize (P + D − 1) ≤ kvBlocks`; a machine with the
invariant, at most `R` residents (`hcount`, the buckets' I1/I2 before the step), and, when its plan preempts
nothing, after the step the residents' work at most `C` if they all decode (`hsum`, the buckets' I2 after the
step: `sumRem ≤ M · (D · (D − 1) / 2)`). Then the machine after the step has the invariant, and the step's
plan preempts nothing (`NoPre`) with `StepOk`. -/
theorem step_fin (eng : Engine) (hph : eng.phased = false) (hch : eng.chunk = 0) (hc : eng.caching = false)
    (hb : 0 < eng.budget) (ss : List Session) (P D R C g x : Nat) (hP : 0 < P) (hD : 0 < D) (hg : 0 < g)
    (hwk : GappedDecode g P D x ss) (hW : P + (D - 1) ≤ eng.budget * g)
    (hK : R + (P + (D - 1) + C) / (P + (D - 1)) ≤ eng.reqsCap)
    (hkv : (R + (P + (D - 1) + C) / (P + (D - 1))) * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (m : Machine) (h : FinInv eng ss P D C m) (hcount : resCount m.running ≤ R)
    (hsum : NoPre eng ss m → (∀ y ∈ (step eng ss m).running, y.decoding = true) →
      resLeft (step eng ss m).running ≤ C) :
    FinInv eng ss P D C (step eng ss m) ∧ NoPre eng ss m ∧
      StepOk eng ss (R + (P + (D - 1) + C) / (P + (D - 1))) P D m := by
  obtain ⟨hgap, hsound, hL, hQ, hF, hbal, hwh, hbef, hanc, hrec⟩ := h
  have hK0 : 0 < R + (P + (D - 1) + C) / (P + (D - 1)) := by
    have : 1 ≤ (P + (D - 1) + C) / (P + (D - 1)) := (Nat.le_div_iff_mul_le (by omega)).mpr (by omega)
    omega
  have hfit : blocksFor eng.blockSize P ≤ eng.kvBlocks := by
    have e1 := Backlog.blocksFor_mono eng.blockSize (show P ≤ P + D - 1 by omega)
    have e2 := Nat.mul_le_mul_right (blocksFor eng.blockSize (P + D - 1))
      (show 1 ≤ R + (P + (D - 1) + C) / (P + (D - 1)) from hK0)
    rw [Nat.one_mul] at e2
    generalize (R + (P + (D - 1) + C) / (P + (D - 1))) * blocksFor eng.blockSize (P + D - 1) = A at e2 hkv
    omega
  have hw3 := gapped_one g P D x ss hwk
  have hw' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1 := fun s hs => by
    obtain ⟨t, a, _, b⟩ := hw3 s hs; exact ⟨t, a, b⟩
  have hok := stepOk_of eng hc ss P D R C g x hP hD hg hfit hwk hW m hbal hgap.1 hwh hanc hcount
  obtain ⟨hn, hdue⟩ := hok
  have hsw := submit_life eng ss P D hD _ m.waiting hQ hdue
  have hpre : NoPre eng ss m := fun chunk => (plan_caps eng chunk m _ _ _ hK hkv hn hL hsw).1
  obtain ⟨l1, l2⟩ := step_life eng ss m _ _ hK hkv hn hL hsw
  have f1 := step_fresh eng ss m _ _ hK hkv hn hL hsw (fun p hp => (hdue p hp).1) hF
  have hbal' := step_bal eng hph hc ss P D hP hfit hw' m hbal hpre
  have hsub := step_wait_mem eng ss m _ _ hK hkv hn hL hsw
  have hpend : ∀ p ∈ (duePending m.now m.pending).1, PendOk ss P p :=
    fun p hp => hbal.2.2.2 p (mem_due m.now m.pending p hp)
  have hwh' : ∀ rq ∈ (step eng ss m).waiting, P + (D - 1) ≤ rq.prompt + (rq.out - 1) :=
    fun rq hrq => submit_whole eng ss P D hw' _ m.waiting hpend hwh rq (hsub rq hrq)
  have hsound' := step_sound eng ss hph m hsound
  have hadm : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting,
      (step eng ss m).records ≠ m.records := by
    intro rq hrq
    have hfr := submit_fresh eng ss _ m.waiting hF (fun p hp => (hdue p hp).1) rq hrq
    obtain ⟨rec, hr, _⟩ := step_admits eng hph hb ss m _ _ hK hkv hn hL hsw rq hrq hfr
    rw [hr]; exact appendRecord_ne _ _
  have hgap' : GapInv ss (step eng ss m) := by
    apply step_gap eng ss m hgap
    intro hcf
    obtain ⟨p, hpd⟩ : ∃ p, p ∈ (duePending m.now m.pending).1 := by
      cases h : (duePending m.now m.pending).1 with
      | nil => rw [h] at hcf; exact (hcf rfl).elim
      | cons p _ => exact ⟨p, List.mem_cons_self⟩
    obtain ⟨h1, h2, _⟩ := hdue p hpd
    have hf : blocksFor eng.blockSize p.prompt ≤ eng.kvBlocks := by
      have := Backlog.blocksFor_mono eng.blockSize (show p.prompt ≤ P by omega); omega
    exact hadm _ (submit_new eng ss _ _ p hpd hf)
  have hidle : (step eng ss m).records = m.records →
      m.running = [] ∧ submit eng ss (duePending m.now m.pending).1 m.waiting = [] := by
    intro hr
    refine ⟨?_, ?_⟩
    · cases hrun : m.running with
      | nil => rfl
      | cons y ys =>
        exfalso
        have hy : y ∈ m.running := by rw [hrun]; exact List.mem_cons_self
        obtain ⟨rec, hr', _⟩ := step_progress eng hph hb ss m ⟨y, hy, hbal.2.2.1 y hy⟩
        exact appendRecord_ne _ _ (hr'.symm.trans hr)
    · cases hs : submit eng ss (duePending m.now m.pending).1 m.waiting with
      | nil => rfl
      | cons rq _ =>
        exfalso
        exact hadm rq (by rw [hs]; exact List.mem_cons_self) hr
  have hshort : ∀ y ∈ (step eng ss m).records, y ∉ m.records → y.tokens < eng.budget →
      workLeft (step eng ss m) ≤ C := by
    intro y hy hym hs
    have hq := (step_caps eng ss m _ _ hK hkv hn hL hsw y hy hym).2 hs
    have hdec := short_decodes eng hph hch ss m y hy hym hs
    have hall : ∀ z ∈ (step eng ss m).running, z.decoding = true := by
      intro z hz
      rcases hdec z hz with e | e
      · exact e
      · have := hbal'.2.2.1 z hz; omega
    have := hsum hpre hall
    unfold workLeft
    rw [hq]
    simp only [reqsLeft, Nat.add_zero]
    exact this
  have hanc' := step_anc eng hph hc ss P D C hP hfit hw' m hbal hpre hbef hanc hgap' hidle hshort
  have hbef' := (step_before eng ss m hbef).1
  have hrec' : ∀ y ∈ (step eng ss m).records,
      y.arrived * (P + (D - 1)) ≤ y.served + (P + (D - 1)) + C := by
    intro y hy
    by_cases hym : y ∈ m.records
    · exact hrec y hym
    · have e4 := step_rec_served eng ss m y hy hym
      have e5 : y.arrived = arrivedBy y.start ss := hgap'.1.2 y hy
      have hst : y.start = m.now := by
        rcases step_cases eng ss m with ⟨hr, _⟩ | ⟨rec, hr, hst, _⟩
        · rw [hr] at hy; exact absurd hy hym
        · rw [hr, mem_appendRecord] at hy
          rcases hy with hy | hy
          · exact absurd hy hym
          · rw [hy]; exact hst
      have := anc_now ss eng.budget (P + (D - 1)) C g P D x hg hwk hW m hanc
      rw [e5, hst, e4]; exact this
  exact ⟨⟨hgap', hsound', l1, l2, f1, hbal', hwh', hbef', hanc', hrec'⟩, hpre, hn, hdue⟩

/-- The invariant at the start of a run, for sessions at least `g` apart from time 1 on. -/
theorem init_fin (eng : Engine) (ss : List Session) (P D C g : Nat) (hP : 0 < P) (hg : 0 < g)
    (hwk : GappedDecode g P D 1 ss) : FinInv eng ss P D C (init ss) := by
  have hw3 := gapped_one g P D 1 ss hwk
  have hw'' : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.new = P := fun s hs => by
    obtain ⟨t, a, b, _⟩ := hw3 s hs; exact ⟨t, a, b⟩
  have hnew : ∀ s ∈ ss, ∀ t ∈ s.turns.head?, 0 < t.new := by
    intro s hs t ht
    obtain ⟨t', h1, h2, _⟩ := hw3 s hs
    rw [h1] at ht
    simp only [List.head?_cons, Option.mem_def, Option.some.injEq] at ht
    subst ht; omega
  have hz : arrivedBy 0 ss = 0 := by
    have h1 := arrivedBy_le g P D hg 1 0 ss hwk
    have h2 : arrivedBy 0 ss * g < 1 * g := by omega
    have := Nat.lt_of_mul_lt_mul_right h2
    omega
  refine ⟨⟨⟨fun t _ => by simp [init, firstTurns_firstBy], fun _ h => by simp [init] at h⟩,
      DriftMachine.firstTurns_sorted 0 ss, rfl, fun t ht => by simp [init] at ht⟩,
    init_sound ss hnew, by simp [init], by simp [init], by simp [init], init_bal ss P D hw'',
    by simp [init], fun _ h => by simp [init] at h, Or.inr hz, fun _ h => by simp [init] at h⟩

/-- **The invariant over a run**, with the buckets' invariant `J` carried alongside: `J` bounds the residents
(`hJc`, `resCount ≤ R`), and a step whose plan preempts nothing keeps it and leaves the residents' work at
most `C` when they all decode (`hJs`). -/
theorem run_fin (eng : Engine) (hph : eng.phased = false) (hch : eng.chunk = 0) (hc : eng.caching = false)
    (hb : 0 < eng.budget) (ss : List Session) (P D R C g x : Nat) (hP : 0 < P) (hD : 0 < D) (hg : 0 < g)
    (hwk : GappedDecode g P D x ss) (hW : P + (D - 1) ≤ eng.budget * g)
    (hK : R + (P + (D - 1) + C) / (P + (D - 1)) ≤ eng.reqsCap)
    (hkv : (R + (P + (D - 1) + C) / (P + (D - 1))) * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (J : Machine → Prop)
    (hJc : ∀ m, FinInv eng ss P D C m → J m → resCount m.running ≤ R)
    (hJs : ∀ m, FinInv eng ss P D C m → J m → NoPre eng ss m →
      J (step eng ss m) ∧
        ((∀ y ∈ (step eng ss m).running, y.decoding = true) → resLeft (step eng ss m).running ≤ C)) :
    ∀ (fuel : Nat) (m : Machine), FinInv eng ss P D C m → J m →
      FinInv eng ss P D C (run eng ss fuel m) ∧ J (run eng ss fuel m)
  | 0, _, h, hj => ⟨h, hj⟩
  | fuel + 1, m, h, hj => by
    simp only [run]
    split
    · exact ⟨h, hj⟩
    · obtain ⟨h', hpre, _⟩ := step_fin eng hph hch hc hb ss P D R C g x hP hD hg hwk hW hK hkv m h
        (hJc m h hj) (fun hpre => (hJs m h hj hpre).2)
      exact run_fin eng hph hch hc hb ss P D R C g x hP hD hg hwk hW hK hkv J hJc hJs fuel _ h'
        (hJs m h hj hpre).1

end BacklogBudget

/-- **The bounded backlog when the budget cuts prompts, modulo the buckets** (Dai et al. 2025, Th. 2(b);
issue 14, result 2(b)). An engine of vLLM's mixed schedule (`phased = false`) without a chunk cap
(`chunk = 0`) and without a prefix cache (`caching = false`), a positive budget, sessions at least `g > 0`
apart from time 1 on, each one turn of `P > 0` prompt tokens and `D > 0` output tokens (`GappedDecode g P D 1`),
`W = P + (D − 1) ≤ budget · g`, `K = R + (W + C) / W ≤ reqsCap`, `K · blocksFor blockSize (P + D − 1) ≤
kvBlocks`, and an invariant `J` of the machine (the buckets' I1 ∧ I2, `R = (D − 1) · M + 1`,
`C = M · (D · (D − 1) / 2)`) that holds at `init`, bounds the residents by `R`, and is kept by every step whose
plan preempts nothing, after which the residents' work is at most `C` when they all decode. Then for any
fuel every record of the run has `x.arrived · W ≤ x.served + W + C`. -/
theorem BacklogBudget.backlog_budget_of (eng : Engine) (hph : eng.phased = false) (hch : eng.chunk = 0)
    (hc : eng.caching = false) (hb : 0 < eng.budget) (ss : List Session) (P D R C g : Nat)
    (hP : 0 < P) (hD : 0 < D) (hg : 0 < g) (hwk : GappedDecode g P D 1 ss)
    (hW : P + (D - 1) ≤ eng.budget * g)
    (hK : R + (P + (D - 1) + C) / (P + (D - 1)) ≤ eng.reqsCap)
    (hkv : (R + (P + (D - 1) + C) / (P + (D - 1))) * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (J : Machine → Prop) (hJ0 : J (init ss))
    (hJc : ∀ m, BacklogBudget.FinInv eng ss P D C m → J m → resCount m.running ≤ R)
    (hJs : ∀ m, BacklogBudget.FinInv eng ss P D C m → J m → BacklogBudget.NoPre eng ss m →
      J (step eng ss m) ∧
        ((∀ y ∈ (step eng ss m).running, y.decoding = true) →
          BacklogBudget.resLeft (step eng ss m).running ≤ C))
    (fuel : Nat) :
    ∀ x ∈ (run eng ss fuel (init ss)).records, x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + C :=
  (BacklogBudget.run_fin eng hph hch hc hb ss P D R C g 1 hP hD hg hwk hW hK hkv J hJc hJs fuel (init ss)
    (BacklogBudget.init_fin eng ss P D C g hP hg hwk) hJ0).1.2.2.2.2.2.2.2.2.2

/-- **`backlog_budget_of` with the buckets' constants**: `M = 1 + budget / P`, `R = (D − 1) · M + 1` residents at
most, `C = M · (D · (D − 1) / 2)` tokens left after a short iteration, `K = R + (W + C) / W`; the same hypotheses,
`J` the buckets' invariant. -/
theorem BacklogBudget.backlog_budget_mod (eng : Engine) (hph : eng.phased = false) (hch : eng.chunk = 0)
    (hc : eng.caching = false) (hb : 0 < eng.budget) (ss : List Session) (P D g : Nat)
    (hP : 0 < P) (hD : 0 < D) (hg : 0 < g) (hwk : GappedDecode g P D 1 ss)
    (hW : P + (D - 1) ≤ eng.budget * g)
    (hK : (D - 1) * (1 + eng.budget / P) + 1 +
        (P + (D - 1) + (1 + eng.budget / P) * (D * (D - 1) / 2)) / (P + (D - 1)) ≤ eng.reqsCap)
    (hkv : ((D - 1) * (1 + eng.budget / P) + 1 +
        (P + (D - 1) + (1 + eng.budget / P) * (D * (D - 1) / 2)) / (P + (D - 1))) *
          blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (J : Machine → Prop) (hJ0 : J (init ss))
    (hJc : ∀ m, BacklogBudget.FinInv eng ss P D ((1 + eng.budget / P) * (D * (D - 1) / 2)) m → J m →
      resCount m.running ≤ (D - 1) * (1 + eng.budget / P) + 1)
    (hJs : ∀ m, BacklogBudget.FinInv eng ss P D ((1 + eng.budget / P) * (D * (D - 1) / 2)) m → J m →
      BacklogBudget.NoPre eng ss m →
      J (step eng ss m) ∧
        ((∀ y ∈ (step eng ss m).running, y.decoding = true) →
          BacklogBudget.resLeft (step eng ss m).running ≤ (1 + eng.budget / P) * (D * (D - 1) / 2)))
    (fuel : Nat) :
    ∀ x ∈ (run eng ss fuel (init ss)).records,
      x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + (1 + eng.budget / P) * (D * (D - 1) / 2) :=
  BacklogBudget.backlog_budget_of eng hph hch hc hb ss P D ((D - 1) * (1 + eng.budget / P) + 1)
    ((1 + eng.budget / P) * (D * (D - 1) / 2)) g hP hD hg hwk hW hK hkv J hJ0 hJc hJs fuel

end Serq
