module

public import Serq.BacklogBudgetProgress

/-! # At most one prefill, and the decodes in buckets (issue 14, result 2, case (b))

The bound on the requests in flight that the budget-cut case's run invariant needs, as two invariants of
the engine's residents (`Resid`), on the mixed schedule without a chunk cap and without a prefix cache
(`phased = false`, `chunk = 0`), for one-turn sessions of a `P`-token prompt (`0 < P`) and `D` outputs
(`0 < D`), at the steps whose plan preempts nothing (the caps give it: `Serq.BacklogBudget.plan_caps`):

* **I1, at most one prefill, the last** (`OnePre`, and `Good`'s last clause): in admission order every
  resident but the last decodes, and a resident that does not decode has work left. `serveRunning` serves in
  order; a prefill left unfinished means the budget ran out at it (no chunk cap), so `admitHeads`, which stops
  at a spent budget, admits nothing after it; every admitted head gets `min P budget > 0` tokens, and every
  one but the last admitted takes its whole prompt (`ButLast`: every resident of the plan but the last
  finishes its prefill or decodes).
* **I2, the decode buckets** (`Good`'s decode clause, `decBucket`): with `M = 1 + budget / P`, every decode
  has `1 ≤ remaining ≤ D - 1`, and at most `M` decodes have `remaining = v`, for every `v`. When the decodes
  are within the budget (`(D - 1) · M ≤ budget`) each is served one token an iteration (they precede the only
  prefill), so every bucket moves down by one; the new decodes start at `D - 1` (`out - 1 - (known - prompt)`
  with `known = prompt`, never preempted), and one iteration finishes at most `M` prefills: the one carried
  over and the admitted heads that took their whole prompt `P` out of the budget (`finCount`).

The plan: `Serq.BacklogBudget.plan_buckets` (the invariant of serving, `SInv` through `serve_inv`, then of
admitting, `AInv` through `adm_inv`). The step: `Serq.BacklogBudget.step_buckets` (every branch of `step`; the
plan of the step preempts nothing and the step's queue holds never-admitted requests of the sessions' shape,
`Waits`; what `apply` leaves of the batch: `stepRes_out`, `stepAll_bucket`, `resid_after`; a step without
tokens: `resid_idle`). The consequences (`Serq.BacklogBudget.resid_count`, `Serq.BacklogBudget.resid_work`):
at most `(D - 1) · M` decodes (`decCount_le`), at most one prefill (`preCount_le_one`), so
`resCount ≤ (D - 1) · M + 1`; the decodes' work left at most `M · (D · (D - 1) / 2)` (`decRem_le`), every
resident's (`sumRem`) at most that plus `P`. The run (`Serq.BacklogBudget.run_buckets`): without a prefix cache,
if at every machine of the run from `init` that has not settled every due turn is a prompt of `P` tokens with
`D` outputs and the step's plan preempts nothing (`BucketsOk`), the run's residents keep I1 and I2 and its queue
the sessions' shape (`submit_waits`, `step_waits`). What stays open: `BucketsOk` from the sessions (the due
turns' shape, an invariant of the pending list) and from `run_caps` (no preemption, given the count `K` these
bounds are to provide).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open Backlog BacklogMany BacklogDecode

/-! ## Counts over the residents -/

/-- The decoding residents. -/
def decCount : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then 1 else 0) + decCount rs

/-- The residents that do not decode (prefills). -/
def preCount : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then 0 else 1) + preCount rs

/-- A bucket: the decoding residents with `v` tokens left. -/
def decBucket (v : Nat) : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true ∧ r.remaining = v then 1 else 0) + decBucket v rs

/-- The decoding residents with at most `n` tokens left. -/
def decLe (n : Nat) : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true ∧ r.remaining ≤ n then 1 else 0) + decLe n rs

/-- The decodes' work left. -/
def decRem : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then r.remaining else 0) + decRem rs

/-- The work left of the decodes with at most `n` tokens left. -/
def decRemLe (n : Nat) : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true ∧ r.remaining ≤ n then r.remaining else 0) + decRemLe n rs

/-- The prefills' work left. -/
def preRem : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then 0 else r.remaining) + preRem rs

/-- The prefills of a planned batch that the iteration finishes: not decoding, scheduled all they have left. -/
def finCount : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = false ∧ r.remaining ≤ r.sched then 1 else 0) + finCount rs

/-! ## The invariants -/

/-- I1's order: every resident but the last decodes. -/
def OnePre : List Res → Prop
  | [] => True
  | [_] => True
  | r :: s :: rs => r.decoding = true ∧ OnePre (s :: rs)

/-- A planned resident that decodes, or that the iteration finishes (scheduled all it has left). -/
def Ends (r : Res) : Prop := r.decoding = true ∨ r.remaining ≤ r.sched

/-- Every planned resident but the last decodes or finishes its prefill. -/
def ButLast : List Res → Prop
  | [] => True
  | [_] => True
  | r :: s :: rs => Ends r ∧ ButLast (s :: rs)

/-- A resident of a one-turn session of a `P`-token prompt and `D` outputs: a decode has
`1 ≤ remaining ≤ D - 1` (I2); a prefill has work left (I1), at most its prompt, and, never preempted, knows
its prompt and nothing more, so that it decodes `D - 1` tokens once its prefill is done. -/
def Good (P D : Nat) (r : Res) : Prop :=
  (r.decoding = true → 1 ≤ r.remaining ∧ r.remaining ≤ D - 1) ∧
    (r.decoding = false → 0 < r.remaining ∧ r.remaining ≤ P ∧ r.req.out = D ∧ r.known = r.req.prompt)

/-- The residents' invariants: I1 (`OnePre`, `Good`'s prefill clause) and I2 (`Good`'s decode clause, at most
`M` decodes a bucket). -/
def Resid (P D M : Nat) (L : List Res) : Prop :=
  OnePre L ∧ (∀ r ∈ L, Good P D r) ∧ ∀ v, decBucket v L ≤ M

/-- A never-admitted request of the sessions' shape (a submitted turn of an engine without a prefix cache). -/
def Waits (P D : Nat) (rq : Req) : Prop :=
  rq.prompt = P ∧ rq.out = D ∧ rq.kept = P ∧ rq.computed = 0 ∧ rq.hit = 0

/-- A planned resident: `Good`, a decode scheduled its one token, a prefill at most its work left. -/
def Planned (P D : Nat) (r : Res) : Prop :=
  Good P D r ∧ (r.decoding = true → r.sched = 1) ∧ r.sched ≤ r.remaining

/-! ## The counts' algebra -/

theorem decCount_app (a b : List Res) : decCount (a ++ b) = decCount a + decCount b := by
  induction a with
  | nil => simp [decCount]
  | cons x xs ih => simp only [List.cons_append, decCount, ih]; omega

theorem preCount_app (a b : List Res) : preCount (a ++ b) = preCount a + preCount b := by
  induction a with
  | nil => simp [preCount]
  | cons x xs ih => simp only [List.cons_append, preCount, ih]; omega

theorem decBucket_app (v : Nat) (a b : List Res) : decBucket v (a ++ b) = decBucket v a + decBucket v b := by
  induction a with
  | nil => simp [decBucket]
  | cons x xs ih => simp only [List.cons_append, decBucket, ih]; omega

theorem finCount_app (a b : List Res) : finCount (a ++ b) = finCount a + finCount b := by
  induction a with
  | nil => simp [finCount]
  | cons x xs ih => simp only [List.cons_append, finCount, ih]; omega

theorem decCount_clearSched : ∀ (l : List Res), decCount (clearSched l) = decCount l
  | [] => rfl
  | x :: xs => by simp only [clearSched, decCount, decCount_clearSched xs]

theorem preCount_clearSched : ∀ (l : List Res), preCount (clearSched l) = preCount l
  | [] => rfl
  | x :: xs => by simp only [clearSched, preCount, preCount_clearSched xs]

theorem decBucket_clearSched (v : Nat) : ∀ (l : List Res), decBucket v (clearSched l) = decBucket v l
  | [] => rfl
  | x :: xs => by simp only [clearSched, decBucket, decBucket_clearSched v xs]

theorem onePre_clearSched : ∀ (l : List Res), OnePre l → OnePre (clearSched l)
  | [], _ => trivial
  | [_], _ => by simp [clearSched, OnePre]
  | r :: s :: rs, h => by
    have ih := onePre_clearSched (s :: rs) h.2
    simp only [clearSched] at ih ⊢
    exact ⟨h.1, ih⟩

theorem onePre_tail (r : Res) (l : List Res) (h : OnePre (r :: l)) : OnePre l := by
  cases l with
  | nil => trivial
  | cons s rs => exact h.2

theorem onePre_last (r : Res) (l : List Res) (h : OnePre (r :: l)) (hd : r.decoding = false) : l = [] := by
  cases l with
  | nil => rfl
  | cons s rs => rw [h.1] at hd; cases hd

theorem onePre_cons (y : Res) (l : List Res) (hy : y.decoding = true) (h : OnePre l) : OnePre (y :: l) := by
  cases l with
  | nil => trivial
  | cons s rs => exact ⟨hy, h⟩

theorem onePre_app (x l : List Res) (hx : ∀ y ∈ x, y.decoding = true) (h : OnePre l) : OnePre (x ++ l) := by
  induction x with
  | nil => exact h
  | cons y ys ih =>
    exact onePre_cons y _ (hx y List.mem_cons_self) (ih (fun z hz => hx z (List.mem_cons_of_mem _ hz)))

theorem onePre_short (l : List Res) (h : l = [] ∨ ∃ x, l = [x]) : OnePre l := by
  rcases h with rfl | ⟨x, rfl⟩ <;> trivial

theorem butLast_cons (y : Res) (l : List Res) (hy : Ends y) (h : ButLast l) : ButLast (y :: l) := by
  cases l with
  | nil => trivial
  | cons s rs => exact ⟨hy, h⟩

theorem butLast_all : ∀ (l : List Res), (∀ r ∈ l, Ends r) → ButLast l
  | [], _ => trivial
  | r :: rs, h => butLast_cons r rs (h r List.mem_cons_self)
      (butLast_all rs (fun x hx => h x (List.mem_cons_of_mem _ hx)))

theorem butLast_snoc (y : Res) : ∀ (l : List Res), (∀ r ∈ l, Ends r) → ButLast (l ++ [y])
  | [], _ => trivial
  | r :: rs, h => by
    rw [List.cons_append]
    exact butLast_cons r _ (h r List.mem_cons_self)
      (butLast_snoc y rs (fun x hx => h x (List.mem_cons_of_mem _ hx)))

/-- A list of residents with no decode and at most one prefill last has at most one element. -/
theorem onePre_nodec : ∀ (l : List Res), OnePre l → decCount l = 0 → l = [] ∨ ∃ x, l = [x]
  | [], _, _ => Or.inl rfl
  | [x], _, _ => Or.inr ⟨x, rfl⟩
  | r :: s :: rs, h, hc => by
    simp only [decCount, h.1, if_true] at hc
    omega

theorem preCount_le_one : ∀ (l : List Res), OnePre l → preCount l ≤ 1
  | [], _ => by simp [preCount]
  | [x], _ => by simp only [preCount]; split <;> omega
  | r :: s :: rs, h => by
    have ih := preCount_le_one (s :: rs) h.2
    simp only [preCount, h.1, if_true] at ih ⊢
    omega

theorem decCount_zero_mem : ∀ (l : List Res), decCount l = 0 → ∀ r ∈ l, r.decoding = false
  | [], _, r, hr => by simp at hr
  | x :: xs, h, r, hr => by
    simp only [decCount] at h
    rcases List.mem_cons.mp hr with e | e
    · subst e
      cases hd : r.decoding
      · rfl
      · rw [hd] at h; simp at h
    · exact decCount_zero_mem xs (by omega) r e

theorem finCount_le_pre : ∀ (l : List Res), finCount l ≤ preCount l
  | [] => Nat.le_refl _
  | x :: xs => by
    have := finCount_le_pre xs
    simp only [finCount, preCount]
    by_cases hd : x.decoding = true
    · rw [if_neg (by simp [hd]), if_pos hd]; omega
    · rw [if_neg hd]; split <;> omega

/-! ## Serving the residents -/

/-- The invariant of `serveRunning` without preemption: the residents still to serve (`todo`) are in I1's order,
their decodes within the budget; the ones served are `Planned`, and all decode or finish unless the budget
ran out at the last (then nothing is left to serve); the buckets and the prefills counted over both. -/
structure SInv (P D M : Nat) (p : Plan) : Prop where
  chunk : p.chunk = 0
  pre : p.preempted = 0
  self : p.selfPreempted = false
  decs : decCount p.todo ≤ p.budget
  order : OnePre p.todo
  todo : ∀ r ∈ p.todo, Good P D r ∧ r.sched = 0
  done : ∀ r ∈ p.done, Planned P D r
  ends : (∀ r ∈ p.done, Ends r) ∨ (p.todo = [] ∧ p.budget = 0 ∧ ButLast p.done)
  buckets : ∀ v, decBucket v p.done + decBucket v p.todo ≤ M
  pres : preCount p.done + preCount p.todo ≤ 1
  waits : ∀ rq ∈ p.waiting, Waits P D rq

/-- What serving leaves when it preempted nothing: the invariant, and the budget spent or every resident
served. -/
def SEnd (P D M : Nat) (R : Plan) : Prop :=
  R.preempted = 0 → SInv P D M R ∧ (R.budget = 0 ∨ R.todo = [])

theorem good_pos (P D : Nat) (r : Res) (h : Good P D r) : 0 < r.remaining := by
  obtain ⟨h4, h5⟩ := h
  cases hd : r.decoding
  · exact (h5 hd).1
  · exact (h4 hd).1

theorem serve_inv (eng : Engine) (P D M : Nat) : ∀ (fuel : Nat) (p : Plan), SInv P D M p →
    resCount p.todo < fuel → SEnd P D M (serveRunning eng none fuel p)
  | 0, _, _, hf => absurd hf (Nat.not_lt_zero _)
  | fuel + 1, p, hi, hf => by
    simp only [serveRunning]
    split
    · rename_i h
      intro _
      refine ⟨hi, ?_⟩
      rcases h with h | h
      · exact Or.inl h
      · rw [hi.self] at h; exact absurd h Bool.false_ne_true
    · rename_i hgo
      split
      · rename_i h
        intro _
        exact ⟨hi, Or.inr h⟩
      · rename_i r later hcons
        have hr := hi.todo r (by rw [hcons]; exact List.mem_cons_self)
        have hrp := good_pos P D r hr.1
        have hb : 0 < p.budget := Nat.pos_of_ne_zero (fun h => hgo (Or.inl h))
        split
        · rename_i h
          exfalso
          rcases h with h | h
          · omega
          · simp [excluded] at h
        · generalize hq : growOrPreempt eng (resCount p.todo)
            (blocksFor eng.blockSize
              (r.pos + if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) - r.alloc)
              p = q
          intro hpre
          have hq0 : q.preempted = 0 := by
            split at hpre
            · exact hpre
            · have h3 : _ ≤ 0 := Nat.le_trans (serveRunning_wait eng none fuel _).1 (Nat.le_of_eq hpre)
              exact Nat.le_zero.mp h3
          have hqp : q = p := by
            rw [← hq]; apply grow_same; rw [hq, hq0, hi.pre]
          subst hqp
          rw [if_neg (by rw [hi.self]; exact Bool.false_ne_true)] at hpre ⊢
          generalize hn : (if r.decoding = true then 1 else capChunk q.chunk (min r.remaining q.budget)) = n
            at hpre ⊢
          rw [hi.chunk, capChunk_zero] at hn
          have hfl : resCount later < fuel := by
            rw [hcons] at hf; simp only [resCount] at hf; omega
          refine serve_inv eng P D M fuel _ ?_ (by simpa [hcons, dropHead] using hfl) hpre
          have hall := hi.todo
          rw [hcons] at hall
          have hord := hi.order
          rw [hcons] at hord
          have hdecs := hi.decs
          rw [hcons] at hdecs
          have hbk := hi.buckets
          rw [hcons] at hbk
          have hpr := hi.pres
          rw [hcons] at hpr
          have hdone : ∀ x ∈ q.done, Ends x := by
            rcases hi.ends with h | ⟨h, _⟩
            · exact h
            · rw [hcons] at h; exact absurd h (List.cons_ne_nil _ _)
          refine ⟨hi.chunk, hi.pre, hi.self, ?_, ?_, ?_, ?_, ?_, ?_, ?_, hi.waits⟩
          · -- decodes left within the budget
            simp only [hcons, dropHead]
            cases hd : r.decoding
            · rw [onePre_last r later hord hd]; simp [decCount]
            · simp only [hd, if_true] at hn
              simp only [decCount, hd, if_true] at hdecs
              omega
          · simp only [hcons, dropHead]; exact onePre_tail r later hord
          · simp only [hcons, dropHead]
            exact fun x hx => hall x (List.mem_cons_of_mem _ hx)
          · intro x hx
            rcases mem_appendRes_one _ _ _ hx with e | e
            · exact hi.done x e
            · subst e
              refine ⟨hr.1, ?_, ?_⟩
              · intro hd
                have hd' : r.decoding = true := hd
                simp only [hd', if_true] at hn; exact hn.symm
              · cases hd : r.decoding
                · simp only [hd, Bool.false_eq_true, if_false] at hn; rw [← hn]; exact Nat.min_le_left _ _
                · simp only [hd, if_true] at hn; show n ≤ r.remaining; omega
          · by_cases he : Ends { r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + n) - r.alloc), sched := n }
            · left
              intro x hx
              rcases mem_appendRes_one _ _ _ hx with e | e
              · exact hdone x e
              · rw [e]; exact he
            · right
              have hd : r.decoding = false := by
                cases hd : r.decoding
                · rfl
                · exact absurd (Or.inl hd) he
              simp only [hd, Bool.false_eq_true, if_false] at hn
              have hlt : ¬ r.remaining ≤ n := fun h => he (Or.inr h)
              refine ⟨?_, ?_, ?_⟩
              · simp only [hcons, dropHead]; exact onePre_last r later hord hd
              · show q.budget - n = 0
                omega
              · rw [appendRes_eq']; exact butLast_snoc _ _ hdone
          · intro v
            have := hbk v
            simp only [hcons, dropHead, appendRes_eq', decBucket_app, decBucket] at this ⊢
            omega
          · simp only [hcons, dropHead, appendRes_eq', preCount_app, preCount] at hpr ⊢
            omega


/-! ## Admitting from the queue -/

/-- The invariant of `admitHeads` (and of the plan once served): every planned resident `Planned`, all decode
or finish unless the budget is spent and the last does not (`ButLast`), the buckets within `M`, the finished
prefills paid for by the batch (`finCount · P ≤ tokens + P`: one carried over, every other one took its whole
prompt `P`), and the queue of the sessions' shape. -/
structure AInv (P D M : Nat) (p : Plan) : Prop where
  chunk : p.chunk = 0
  done : ∀ r ∈ p.done, Planned P D r
  ends : (∀ r ∈ p.done, Ends r) ∨ (p.budget = 0 ∧ ButLast p.done)
  buckets : ∀ v, decBucket v p.done ≤ M
  fin : finCount p.done * P ≤ batchTokens p.done + P
  waits : ∀ rq ∈ p.waiting, Waits P D rq

theorem serve_end (P D M : Nat) (p : Plan) (hi : SInv P D M p) (he : p.budget = 0 ∨ p.todo = []) :
    AInv P D M { p with done := appendRes p.done p.todo, todo := [] } := by
  have htodo : ∀ r ∈ p.todo, r.decoding = false := by
    rcases he with h | h
    · exact decCount_zero_mem _ (by have := hi.decs; omega)
    · rw [h]; intro r hr; simp at hr
  refine ⟨hi.chunk, ?_, ?_, ?_, ?_, hi.waits⟩
  · intro x hx
    have hx' : x ∈ p.done ++ p.todo := by rw [← appendRes_eq']; exact hx
    rcases List.mem_append.mp hx' with e | e
    · exact hi.done x e
    · have := hi.todo x e
      refine ⟨this.1, fun hd => ?_, by rw [this.2]; exact Nat.zero_le _⟩
      rw [htodo x e] at hd; cases hd
  · show (∀ r ∈ appendRes p.done p.todo, Ends r) ∨ (p.budget = 0 ∧ ButLast (appendRes p.done p.todo))
    rw [appendRes_eq']
    rcases he with hb | ht
    · right
      refine ⟨hb, ?_⟩
      rcases hi.ends with h | ⟨h, _, h2⟩
      · rcases onePre_nodec p.todo hi.order (by have := hi.decs; omega) with e | ⟨x, e⟩
        · rw [e, List.append_nil]; exact butLast_all _ h
        · rw [e]; exact butLast_snoc x _ h
      · rw [h, List.append_nil]; exact h2
    · rw [ht, List.append_nil]
      rcases hi.ends with h | ⟨_, h1, h2⟩
      · exact Or.inl h
      · exact Or.inr ⟨h1, h2⟩
  · intro v
    show decBucket v (appendRes p.done p.todo) ≤ M
    rw [appendRes_eq', decBucket_app]; exact hi.buckets v
  · show finCount (appendRes p.done p.todo) * P ≤ batchTokens (appendRes p.done p.todo) + P
    rw [appendRes_eq']
    have h1 := finCount_le_pre (p.done ++ p.todo)
    rw [preCount_app] at h1
    have h2 := hi.pres
    have h3 : finCount (p.done ++ p.todo) * P ≤ 1 * P := Nat.mul_le_mul_right _ (by omega)
    omega

/-- One admission: a head of the sessions' shape, scheduled `min P budget` tokens of its `P` left. -/
theorem adm_step (P D M : Nat) (hP : 0 < P) (p : Plan) (h : AInv P D M p) (hb : 0 < p.budget) (rest : List Req)
    (hrest : ∀ rq ∈ rest, Waits P D rq) (n : Nat) (y : Res) (c : List Entry)
    (y2 : y.req.out = D) (y3 : y.known = y.req.prompt) (y4 : y.decoding = false) (y5 : y.remaining = P)
    (y6 : y.sched = min P p.budget) (hn : n = min P p.budget) :
    AInv P D M { p with budget := p.budget - n, done := appendRes p.done [y], waiting := rest, cache := c } := by
  subst hn
  have hall : ∀ x ∈ p.done, Ends x := by
    rcases h.ends with e | ⟨e, _⟩
    · exact e
    · omega
  refine ⟨h.chunk, ?_, ?_, ?_, ?_, hrest⟩
  · intro x hx
    rcases mem_appendRes_one _ _ _ hx with e | e
    · exact h.done x e
    · subst e
      refine ⟨⟨(by intro hd; rw [y4] at hd; cases hd), fun _ => ⟨by omega, by omega, y2, y3⟩⟩,
        (by intro hd; rw [y4] at hd; cases hd), ?_⟩
      rw [y6, y5]; exact Nat.min_le_left _ _
  · by_cases hP' : P ≤ p.budget
    · left
      intro x hx
      rcases mem_appendRes_one _ _ _ hx with e | e
      · exact hall x e
      · subst e; right; rw [y5, y6]; exact Nat.le_min.mpr ⟨Nat.le_refl _, hP'⟩
    · right
      refine ⟨by show p.budget - min P p.budget = 0; omega, ?_⟩
      show ButLast (appendRes p.done [y])
      rw [appendRes_eq']; exact butLast_snoc y _ hall
  · intro v
    show decBucket v (appendRes p.done [y]) ≤ M
    rw [appendRes_eq', decBucket_app]
    have e : decBucket v [y] = 0 := by simp [decBucket, y4]
    rw [e, Nat.add_zero]; exact h.buckets v
  · show finCount (appendRes p.done [y]) * P ≤ batchTokens (appendRes p.done [y]) + P
    rw [appendRes_eq', finCount_app, batchTokens_app]
    have hf := h.fin
    by_cases hP' : P ≤ p.budget
    · have e1 : finCount [y] = 1 := by simp [finCount, y4, y5, y6, hP']
      have e2 : batchTokens [y] = P := by simp [batchTokens, y6, Nat.min_eq_left hP']
      rw [e1, e2, Nat.add_mul, Nat.one_mul]; omega
    · have hm : min P p.budget = p.budget := Nat.min_eq_right (by omega)
      have e1 : finCount [y] = 0 := by simp [finCount, y4, y5, y6, hm] <;> omega
      rw [e1, Nat.add_zero]; omega

theorem adm_inv (eng : Engine) (P D M : Nat) (hP : 0 < P) : ∀ (fuel : Nat) (p : Plan), AInv P D M p →
    AInv P D M (admitHeads eng none fuel p)
  | 0, p, h => h
  | fuel + 1, p, h => by
    simp only [admitHeads]
    split
    · exact h
    · rename_i hgo
      have hb : 0 < p.budget := Nat.pos_of_ne_zero (fun e => hgo (Or.inl e))
      split
      · exact h
      · rename_i rq rest hw
        have hq := h.waits rq (by rw [hw]; exact List.mem_cons_self)
        have hrest : ∀ x ∈ rest, Waits P D x := fun x hx => h.waits x (by rw [hw]; exact List.mem_cons_of_mem _ hx)
        obtain ⟨q1, q2, q3, q4, q5⟩ := hq
        have hk : max rq.kept (rq.computed + 1) = P := by rw [q3, q4]; exact Nat.max_eq_left (by omega)
        have hre : reuseCap eng.blockSize rq P = 0 := by simp [reuseCap, q4, q5]
        have hcc : ∀ n, capChunk p.chunk n = n := fun n => by rw [h.chunk, capChunk_zero]
        rw [hk, hre, Nat.min_zero, Nat.sub_zero, hcc]
        split
        · exact h
        · apply adm_inv eng P D M hP fuel
          refine adm_step P D M hP p h hb rest hrest _ _ _ ?_ ?_ ?_ ?_ ?_ ?_
          · dsimp only; split <;> exact q2
          · dsimp only; split <;> exact q1.symm
          · rfl
          · rfl
          · simp [excluded]
          · simp [excluded]

/-! ## The consequences: at most `(D - 1) · M` decodes and one prefill -/

theorem decLe_zero : ∀ (l : List Res), (∀ r ∈ l, r.decoding = true → 1 ≤ r.remaining) → decLe 0 l = 0
  | [], _ => rfl
  | x :: xs, h => by
    have ih := decLe_zero xs (fun r hr => h r (List.mem_cons_of_mem _ hr))
    have hx := h x List.mem_cons_self
    simp only [decLe, ih]
    split
    · rename_i hc; have := hx hc.1; omega
    · rfl

theorem decLe_succ (n : Nat) : ∀ (l : List Res), decLe (n + 1) l = decLe n l + decBucket (n + 1) l
  | [] => rfl
  | x :: xs => by
    simp only [decLe, decBucket, decLe_succ n xs]
    by_cases hd : x.decoding = true
    · simp only [hd, true_and]
      split <;> split <;> split <;> omega
    · simp only [hd, Bool.false_eq_true, false_and, if_false]; omega

theorem decLe_le (M : Nat) (l : List Res) (h1 : ∀ r ∈ l, r.decoding = true → 1 ≤ r.remaining)
    (hb : ∀ v, decBucket v l ≤ M) : ∀ n, decLe n l ≤ n * M
  | 0 => by rw [decLe_zero l h1]; exact Nat.zero_le _
  | n + 1 => by
    rw [decLe_succ, Nat.succ_mul]
    have := decLe_le M l h1 hb n
    have := hb (n + 1)
    omega

theorem decCount_eq (n : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.decoding = true → r.remaining ≤ n) →
    decCount l = decLe n l
  | [] , _ => rfl
  | x :: xs, h => by
    have ih := decCount_eq n xs (fun r hr => h r (List.mem_cons_of_mem _ hr))
    have hx := h x List.mem_cons_self
    simp only [decCount, decLe, ih]
    by_cases hd : x.decoding = true
    · rw [if_pos hd, if_pos ⟨hd, hx hd⟩]
    · rw [if_neg hd, if_neg (fun e => hd e.1)]

/-- **At most `(D - 1) · M` decodes**: decodes of `1 ≤ remaining ≤ D - 1`, at most `M` a bucket. -/
theorem decCount_le (D M : Nat) (l : List Res) (h : ∀ r ∈ l, r.decoding = true → 1 ≤ r.remaining ∧ r.remaining ≤ D - 1)
    (hb : ∀ v, decBucket v l ≤ M) : decCount l ≤ (D - 1) * M := by
  rw [decCount_eq (D - 1) l (fun r hr hd => (h r hr hd).2)]
  exact decLe_le M l (fun r hr hd => (h r hr hd).1) hb (D - 1)

theorem resCount_split : ∀ (l : List Res), resCount l = decCount l + preCount l
  | [] => rfl
  | x :: xs => by
    have := resCount_split xs
    simp only [resCount, decCount, preCount]
    split <;> omega

theorem decRemLe_zero : ∀ (l : List Res), (∀ r ∈ l, r.decoding = true → 1 ≤ r.remaining) → decRemLe 0 l = 0
  | [], _ => rfl
  | x :: xs, h => by
    have ih := decRemLe_zero xs (fun r hr => h r (List.mem_cons_of_mem _ hr))
    have hx := h x List.mem_cons_self
    simp only [decRemLe, ih]
    split
    · rename_i hc; have := hx hc.1; omega
    · rfl

theorem decRemLe_succ (n : Nat) : ∀ (l : List Res),
    decRemLe (n + 1) l = decRemLe n l + (n + 1) * decBucket (n + 1) l
  | [] => rfl
  | x :: xs => by
    simp only [decRemLe, decBucket, decRemLe_succ n xs, Nat.mul_add]
    by_cases hd : x.decoding = true
    · simp only [hd, true_and]
      split <;> split <;> split <;> omega
    · simp only [hd, Bool.false_eq_true, false_and, if_false]; omega

theorem decRemLe_le (M : Nat) (l : List Res) (h1 : ∀ r ∈ l, r.decoding = true → 1 ≤ r.remaining)
    (hb : ∀ v, decBucket v l ≤ M) : ∀ n, 2 * decRemLe n l ≤ n * (n + 1) * M
  | 0 => by rw [decRemLe_zero l h1]; exact Nat.zero_le _
  | n + 1 => by
    rw [decRemLe_succ]
    have ih := decRemLe_le M l h1 hb n
    have h2 : (n + 1) * decBucket (n + 1) l ≤ (n + 1) * M := Nat.mul_le_mul_left _ (hb (n + 1))
    have e : (n + 1) * (n + 1 + 1) = n * (n + 1) + 2 * (n + 1) := by
      rw [Nat.mul_comm (n + 1) (n + 1 + 1), Nat.add_mul, Nat.add_mul]; omega
    have e' : (n + 1) * (n + 1 + 1) * M = n * (n + 1) * M + 2 * ((n + 1) * M) := by
      rw [e, Nat.add_mul, Nat.mul_assoc 2]
    rw [e']
    omega

theorem decRem_eq (n : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.decoding = true → r.remaining ≤ n) →
    decRem l = decRemLe n l
  | [] , _ => rfl
  | x :: xs, h => by
    have ih := decRem_eq n xs (fun r hr => h r (List.mem_cons_of_mem _ hr))
    have hx := h x List.mem_cons_self
    simp only [decRem, decRemLe, ih]
    by_cases hd : x.decoding = true
    · rw [if_pos hd, if_pos ⟨hd, hx hd⟩]
    · rw [if_neg hd, if_neg (fun e => hd e.1)]

theorem even_mul_succ : ∀ (n : Nat), n * (n + 1) % 2 = 0
  | 0 => rfl
  | n + 1 => by
    have ih := even_mul_succ n
    have e : (n + 1) * (n + 1 + 1) = n * (n + 1) + 2 * (n + 1) := by
      rw [Nat.mul_comm (n + 1) (n + 1 + 1), Nat.add_mul, Nat.add_mul]; omega
    rw [e]; omega

/-- **The decodes' work left is at most `M · (1 + … + (D - 1))`**: decodes of `1 ≤ remaining ≤ D - 1`, at most
`M` a bucket. -/
theorem decRem_le (D M : Nat) (hD : 0 < D) (l : List Res)
    (h : ∀ r ∈ l, r.decoding = true → 1 ≤ r.remaining ∧ r.remaining ≤ D - 1) (hb : ∀ v, decBucket v l ≤ M) :
    decRem l ≤ M * (D * (D - 1) / 2) := by
  rw [decRem_eq (D - 1) l (fun r hr hd => (h r hr hd).2)]
  have h2 := decRemLe_le M l (fun r hr hd => (h r hr hd).1) hb (D - 1)
  have hev := even_mul_succ (D - 1)
  rw [Nat.sub_add_cancel hD] at h2 hev
  rw [Nat.mul_comm D (D - 1)]
  generalize (D - 1) * D = X at h2 hev ⊢
  have hX : X = 2 * (X / 2) := by omega
  rw [hX, Nat.mul_assoc] at h2
  rw [Nat.mul_comm M]
  omega

theorem sumRem_split : ∀ (l : List Res), sumRem l = decRem l + preRem l
  | [] => rfl
  | x :: xs => by
    have := sumRem_split xs
    simp only [sumRem, decRem, preRem]
    split <;> omega

theorem preRem_le (P : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.decoding = false → r.remaining ≤ P) →
    preRem l ≤ preCount l * P
  | [], _ => by simp [preRem]
  | x :: xs, h => by
    have ih := preRem_le P xs (fun r hr => h r (List.mem_cons_of_mem _ hr))
    simp only [preRem, preCount, Nat.add_mul]
    by_cases hd : x.decoding = true
    · rw [if_pos hd, if_pos hd]; omega
    · have := h x List.mem_cons_self (by cases e : x.decoding <;> simp_all)
      rw [if_neg hd, if_neg hd]; omega

/-! ## What `apply` leaves of a planned batch -/

theorem stepRes_shape (now : Nat) (r : Res) : stepRes now r = [] ∨ ∃ y, stepRes now r = [y] := by
  have h := resCount_stepRes now r
  generalize stepRes now r = l at h ⊢
  rcases l with _ | ⟨y, _ | ⟨z, zs⟩⟩
  · exact Or.inl rfl
  · exact Or.inr ⟨y, rfl⟩
  · simp [resCount] at h

/-- What `apply` leaves of a planned resident: `Good`; a decode if it decoded or finished its prefill; and a
decode left is one token down, or a prefill just finished with `D - 1` tokens to decode. -/
theorem stepRes_out (now P D : Nat) (r : Res) (h : Planned P D r) : ∀ y ∈ stepRes now r,
    Good P D y ∧ (Ends r → y.decoding = true) ∧
    (y.decoding = true → (r.decoding = true ∧ y.remaining + 1 = r.remaining) ∨
      (r.decoding = false ∧ r.remaining ≤ r.sched ∧ y.remaining = D - 1)) := by
  intro y hy
  obtain ⟨⟨g4, g5⟩, hs1, hs2⟩ := h
  by_cases h0 : r.sched = 0
  · have e : stepRes now r = [r] := by unfold stepRes; rw [if_pos h0]
    rw [e, List.mem_singleton] at hy
    subst hy
    have hd : y.decoding = false := by
      cases hd : y.decoding
      · rfl
      · have := hs1 hd; omega
    refine ⟨⟨g4, g5⟩, ?_, ?_⟩
    · intro he; rcases he with he | he
      · exact he
      · have := (g5 hd).1; omega
    · intro he; rw [hd] at he; cases he
  · cases hd : r.decoding
    · obtain ⟨p1, p2, p3, p4⟩ := g5 hd
      have hL : r.req.out - 1 - (r.known - r.req.prompt) = D - 1 := by rw [p3, p4, Nat.sub_self, Nat.sub_zero]
      rw [stepRes_eq now r ⟨0, 0, 0, 0, 0, false, false⟩ [] (init [])] at hy
      rcases running_after_prefill _ _ now r D _ ⟨_, rfl⟩ hd (by omega) hL with ⟨e, _, _⟩ | ⟨q, _, e, hf, hD1⟩ | ⟨e, hlt⟩
      · rw [e] at hy; simp at hy
      · rw [e, List.mem_singleton] at hy
        subst hy
        exact ⟨⟨fun _ => ⟨by dsimp only; omega, by dsimp only; omega⟩, fun h => by cases h⟩, fun _ => rfl,
          fun _ => Or.inr ⟨rfl, hf, rfl⟩⟩
      · rw [e, List.mem_singleton] at hy
        subst hy
        refine ⟨⟨(by intro h; cases h), fun _ => ⟨by dsimp only; omega, by dsimp only; omega, p3, p4⟩⟩, ?_,
          (by intro h; cases h)⟩
        intro he; rcases he with he | he
        · rw [hd] at he; cases he
        · omega
    · have hs : r.sched = 1 := hs1 hd
      obtain ⟨d1, d2⟩ := g4 hd
      rw [stepRes_eq now r ⟨0, 0, 0, 0, 0, false, false⟩ [] (init [])] at hy
      rcases running_after_decode _ _ now r _ ⟨_, rfl⟩ hd hs with ⟨e, _⟩ | ⟨q, _, e, hpos⟩
      · rw [e] at hy; simp at hy
      · rw [e, List.mem_singleton] at hy
        subst hy
        exact ⟨⟨fun _ => ⟨by dsimp only; omega, by dsimp only; omega⟩, fun h => by cases h⟩, fun _ => rfl,
          fun _ => Or.inl ⟨rfl, by dsimp only; omega⟩⟩

theorem stepAll_good (now P D : Nat) : ∀ (l : List Res), (∀ r ∈ l, Planned P D r) →
    ∀ y ∈ stepAll now l, Good P D y
  | [], _, y, hy => by simp [stepAll] at hy
  | r :: rs, h, y, hy => by
    rw [stepAll_cons, List.mem_append] at hy
    rcases hy with e | e
    · exact (stepRes_out now P D r (h r List.mem_cons_self) y e).1
    · exact stepAll_good now P D rs (fun x hx => h x (List.mem_cons_of_mem _ hx)) y e

theorem stepAll_order (now P D : Nat) : ∀ (l : List Res), (∀ r ∈ l, Planned P D r) → ButLast l →
    OnePre (stepAll now l)
  | [], _, _ => trivial
  | [r], _, _ => by
    rw [stepAll_cons, show stepAll now [] = [] from rfl, List.append_nil]
    exact onePre_short _ (stepRes_shape now r)
  | r :: s :: rs, h, hb => by
    rw [stepAll_cons]
    apply onePre_app
    · intro y hy; exact (stepRes_out now P D r (h r List.mem_cons_self) y hy).2.1 hb.1
    · exact stepAll_order now P D (s :: rs) (fun x hx => h x (List.mem_cons_of_mem _ hx)) hb.2

/-- One resident's share of bucket `w`. -/
def dec1 (w : Nat) (r : Res) : Nat := if r.decoding = true ∧ r.remaining = w then 1 else 0

/-- A prefill the iteration finishes. -/
def fin1 (r : Res) : Nat := if r.decoding = false ∧ r.remaining ≤ r.sched then 1 else 0

theorem stepRes_bucket (now P D v : Nat) (r : Res) (h : Planned P D r) :
    decBucket v (stepRes now r) ≤ dec1 (v + 1) r + (if v = D - 1 then fin1 r else 0) := by
  rcases stepRes_shape now r with e | ⟨y, e⟩
  · rw [e]; simp [decBucket]
  · have hy := stepRes_out now P D r h y (by rw [e]; exact List.mem_singleton_self _)
    rw [e]
    simp only [decBucket]
    by_cases hc : y.decoding = true ∧ y.remaining = v
    · rw [if_pos hc]
      rcases hy.2.2 hc.1 with ⟨h1, h2⟩ | ⟨h1, h2, h3⟩
      · have : dec1 (v + 1) r = 1 := by unfold dec1; rw [if_pos ⟨h1, by omega⟩]
        omega
      · have hv : v = D - 1 := by omega
        have : fin1 r = 1 := by unfold fin1; rw [if_pos ⟨h1, h2⟩]
        rw [if_pos hv]; omega
    · rw [if_neg hc]; omega

theorem stepAll_bucket (now P D v : Nat) : ∀ (l : List Res), (∀ r ∈ l, Planned P D r) →
    decBucket v (stepAll now l) ≤ decBucket (v + 1) l + (if v = D - 1 then finCount l else 0)
  | [], _ => by simp [stepAll, decBucket]
  | r :: rs, h => by
    rw [stepAll_cons, decBucket_app]
    have h1 := stepRes_bucket now P D v r (h r List.mem_cons_self)
    have h2 := stepAll_bucket now P D v rs (fun x hx => h x (List.mem_cons_of_mem _ hx))
    have e1 : decBucket (v + 1) (r :: rs) = dec1 (v + 1) r + decBucket (v + 1) rs := rfl
    have e2 : finCount (r :: rs) = fin1 r + finCount rs := rfl
    rw [e1, e2]
    by_cases hv : v = D - 1
    · rw [if_pos hv] at h1 h2 ⊢; omega
    · rw [if_neg hv] at h1 h2 ⊢; omega

theorem decBucket_none (w : Nat) : ∀ (l : List Res), (∀ r ∈ l, r.decoding = true → r.remaining < w) →
    decBucket w l = 0
  | [], _ => rfl
  | x :: xs, h => by
    have ih := decBucket_none w xs (fun r hr => h r (List.mem_cons_of_mem _ hr))
    have hx := h x List.mem_cons_self
    simp only [decBucket, ih]
    split
    · rename_i hc; have := hx hc.1; omega
    · rfl

theorem ainv_butLast (P D M : Nat) (p : Plan) (h : AInv P D M p) : ButLast p.done := by
  rcases h.ends with e | ⟨_, e⟩
  · exact butLast_all _ e
  · exact e

theorem fin_le (P B f : Nat) (hP : 0 < P) (h : f * P ≤ B + P) : f ≤ 1 + B / P := by
  cases f with
  | zero => exact Nat.zero_le _
  | succ k =>
    rw [Nat.succ_mul] at h
    have : k ≤ B / P := (Nat.le_div_iff_mul_le hP).mpr (by omega)
    omega

/-- After the iteration: the residents `apply` leaves of a planned batch within the budget keep I1 and I2. -/
theorem resid_after (now P D B : Nat) (hP : 0 < P) (p : Plan) (h : AInv P D (1 + B / P) p)
    (htok : batchTokens p.done ≤ B) : Resid P D (1 + B / P) (stepAll now p.done) := by
  refine ⟨stepAll_order now P D _ h.done (ainv_butLast P D _ p h), stepAll_good now P D _ h.done, fun v => ?_⟩
  have hv1 := stepAll_bucket now P D v p.done h.done
  by_cases hv : v = D - 1
  · rw [if_pos hv] at hv1
    have e : decBucket (v + 1) p.done = 0 :=
      decBucket_none _ _ (fun r hr hd => by have := ((h.done r hr).1.1 hd).2; omega)
    have := fin_le P B _ hP (Nat.le_trans h.fin (by omega))
    omega
  · rw [if_neg hv] at hv1
    exact Nat.le_trans hv1 (by have := h.buckets (v + 1); omega)

theorem butLast_none : ∀ (l : List Res), ButLast l → (∀ r ∈ l, ¬ Ends r) → OnePre l
  | [], _, _ => trivial
  | [_], _, _ => trivial
  | r :: _ :: _, hb, hn => absurd hb.1 (hn r List.mem_cons_self)

/-- A step that runs no iteration keeps its planned residents, none scheduled: I1 and I2 hold of them. -/
theorem resid_idle (P D M : Nat) (p : Plan) (h : AInv P D M p) (h0 : batchTokens p.done = 0) :
    Resid P D M p.done := by
  have hs := batchTokens_zero _ h0
  refine ⟨butLast_none _ (ainv_butLast P D M p h) (fun r hr he => ?_), fun r hr => (h.done r hr).1, h.buckets⟩
  have hr0 := hs r hr
  obtain ⟨⟨g4, g5⟩, hs1, _⟩ := h.done r hr
  rcases he with he | he
  · have := hs1 he; omega
  · cases hd : r.decoding
    · have := (g5 hd).1; omega
    · have := hs1 hd; omega


/-! ## The plan and the step -/

/-- **The plan keeps the invariants**: on an engine without `only` (`phased = false`), with no chunk cap, from
residents with I1 and I2 (`Resid`) whose decodes fit the budget (`(D - 1) · M ≤ budget`) and a queue of the
sessions' shape (`Waits`), a plan that preempts nothing has its batch `Planned`, all but the last resident
decoding or finishing its prefill, at most `M` decodes a bucket and the finished prefills paid for (`AInv`). -/
theorem plan_buckets (eng : Engine) (hp : eng.phased = false) (P D M : Nat) (hP : 0 < P) (m : Machine)
    (waiting : List Req) (hm : Resid P D M m.running) (hdec : (D - 1) * M ≤ eng.budget)
    (hw : ∀ rq ∈ waiting, Waits P D rq) (hpre : (plan eng 0 m waiting).preempted = 0) :
    AInv P D M (plan eng 0 m waiting) := by
  obtain ⟨h1, h2, h3⟩ := hm
  have hdc : decCount m.running ≤ eng.budget :=
    Nat.le_trans (decCount_le D M _ (fun r hr hd => (h2 r hr).1 hd) h3) hdec
  revert hpre
  unfold plan
  have hn : phaseOf eng m.running = none := by simp [phaseOf, hp]
  dsimp only
  rw [hn]
  have h0 : SInv P D M ⟨eng.budget, 0, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ := by
    refine ⟨rfl, rfl, rfl, ?_, onePre_clearSched _ h1, ?_, fun _ h => by simp at h, Or.inl (fun _ h => by simp at h),
      ?_, ?_, hw⟩
    · show decCount (clearSched m.running) ≤ eng.budget
      rw [decCount_clearSched]; exact hdc
    · intro x hx
      obtain ⟨r, hr, rfl⟩ := mem_clearSched _ x hx
      exact ⟨h2 r hr, rfl⟩
    · intro v
      show decBucket v [] + decBucket v (clearSched m.running) ≤ M
      rw [decBucket_clearSched]; simp only [decBucket, Nat.zero_add]; exact h3 v
    · show preCount [] + preCount (clearSched m.running) ≤ 1
      rw [preCount_clearSched]; simp only [preCount, Nat.zero_add]; exact preCount_le_one _ h1
  have hs := serve_inv eng P D M (resCount m.running + 1) _ h0
    (by show resCount (clearSched m.running) < _; rw [resCount_clearSched]; omega)
  generalize serveRunning eng none (resCount m.running + 1)
    ⟨eng.budget, 0, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at hs ⊢
  split
  · rename_i hz
    intro _
    obtain ⟨s1, s2⟩ := hs hz
    exact adm_inv eng P D M hP _ _ (serve_end P D M p1 s1 s2)
  · rename_i hne
    intro h
    exact absurd h hne

/-- What a run asks of each machine that has not settled: every due turn is a prompt of `P` tokens with `D`
outputs, and the step's plan (no chunk cap; its queue the due turns submitted at the back of the machine's)
preempts nothing (`Serq.BacklogBudget.run_caps` gives it when the caps do not bind). -/
def BucketsOk (eng : Engine) (ss : List Session) (P D : Nat) (m : Machine) : Prop :=
  (∀ p ∈ (duePending m.now m.pending).1, p.prompt = P ∧ (newReq eng ss p).out = D) ∧
    (plan eng 0 m (submit eng ss (duePending m.now m.pending).1 m.waiting)).preempted = 0

/-- Without a prefix cache, a machine's queue of the sessions' shape, with due turns of a `P`-token prompt and
`D` outputs submitted at its back, is of the sessions' shape. -/
theorem submit_waits (eng : Engine) (hcache : eng.caching = false) (ss : List Session) (P D : Nat)
    (due : List Pending) (w : List Req) (hw : ∀ rq ∈ w, Waits P D rq)
    (hdue : ∀ p ∈ due, p.prompt = P ∧ (newReq eng ss p).out = D) : ∀ rq ∈ submit eng ss due w, Waits P D rq := by
  intro rq hrq
  rcases mem_submit eng ss due w rq hrq with h | ⟨p, hp, rfl⟩
  · exact hw rq h
  · obtain ⟨h1, h2⟩ := hdue p hp
    refine ⟨h1, h2, h1, rfl, ?_⟩
    simp [newReq, hcache]

/-- A step whose plan preempts nothing leaves waiting only requests of its queue: of the sessions' shape when
its queue is. -/
theorem step_waits (eng : Engine) (hc : eng.chunk = 0) (ss : List Session) (P D : Nat) (m : Machine)
    (hw : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting, Waits P D rq)
    (hpre : (plan eng 0 m (submit eng ss (duePending m.now m.pending).1 m.waiting)).preempted = 0) :
    ∀ rq ∈ (step eng ss m).waiting, Waits P D rq := by
  unfold step
  generalize duePending m.now m.pending = dl at hw hpre ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hw hpre ⊢
  generalize submit eng ss due m.waiting = waiting at hw hpre ⊢
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1]; split <;> exact hw
  · rw [if_neg h1]
    have hch : (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = 0 := by
      simp [hc]
    rw [hch]
    by_cases h2 : batchTokens (plan eng 0 m waiting).done = 0 ∧ (plan eng 0 m waiting).preempted = 0
    · rw [if_pos h2]
      first | exact hw | (split <;> exact hw)
    · rw [if_neg h2]
      simp only [apply_waiting]
      exact fun rq h => hw rq (plan_wait eng 0 m waiting hpre rq h)

theorem resid_nil (P D M : Nat) : Resid P D M [] :=
  ⟨trivial, fun _ h => by simp at h, fun _ => Nat.zero_le _⟩

end BacklogBudget

/-- **One step keeps I1 and I2** (issue 14, result 2, case (b)): an engine of the mixed schedule
(`phased = false`) without a chunk cap (`chunk = 0`), any sessions, a `P`-token prompt (`0 < P`), `D` outputs,
`M = 1 + budget / P` with the decodes within the budget (`(D - 1) · M ≤ budget`), and a machine whose residents
have I1 and I2 (`Resid`: in admission order every resident but the last decodes, a prefill has work left,
at most its prompt, and knows its prompt; every decode has `1 ≤ remaining ≤ D - 1`, at most `M` a bucket
`decBucket v`), whose step's queue (the due turns submitted) holds never-admitted requests of prompt `P` and
`D` outputs (`Waits`: `kept = prompt`, `computed = 0`, `hit = 0`) and whose step's plan preempts nothing:
the residents after the step have I1 and I2. Every branch of `step`: an idle step leaves the residents, a
step without tokens leaves the planned ones (none served), an iteration applies its batch. -/
theorem BacklogBudget.step_buckets (eng : Engine) (hp : eng.phased = false) (hc : eng.chunk = 0)
    (ss : List Session) (P D : Nat) (hP : 0 < P) (hdec : (D - 1) * (1 + eng.budget / P) ≤ eng.budget)
    (m : Machine) (hm : BacklogBudget.Resid P D (1 + eng.budget / P) m.running)
    (hw : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting, BacklogBudget.Waits P D rq)
    (hpre : (plan eng 0 m (submit eng ss (duePending m.now m.pending).1 m.waiting)).preempted = 0) :
    BacklogBudget.Resid P D (1 + eng.budget / P) (step eng ss m).running := by
  unfold step
  generalize duePending m.now m.pending = dl at hw hpre ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hw hpre ⊢
  generalize submit eng ss due m.waiting = waiting at hw hpre ⊢
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1]; split <;> exact hm
  · rw [if_neg h1]
    have hch : (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = 0 := by
      simp [hc]
    rw [hch]
    have hA := BacklogBudget.plan_buckets eng hp P D _ hP m waiting hm hdec hw hpre
    have htok := (plan_inv eng 0 m waiting).2.1
    by_cases h2 : batchTokens (plan eng 0 m waiting).done = 0 ∧ (plan eng 0 m waiting).preempted = 0
    · rw [if_pos h2]
      first
        | exact BacklogBudget.resid_idle P D _ _ hA h2.1
        | (split <;> exact BacklogBudget.resid_idle P D _ _ hA h2.1)
    · rw [if_neg h2]
      simp only [BacklogMany.apply_running, List.nil_append]
      exact BacklogBudget.resid_after m.now P D eng.budget hP _ hA (by omega)

/-- **The requests in flight: at most `(D - 1) · M` decodes and one prefill** (I1 and I2 read): of residents with
I1 and I2 (`Resid`), at most `(D - 1) · M` decode (`decCount`), at most one prefills (`preCount`), so at most
`(D - 1) · M + 1` are resident. -/
theorem BacklogBudget.resid_count (P D M : Nat) (l : List Res) (h : BacklogBudget.Resid P D M l) :
    BacklogBudget.decCount l ≤ (D - 1) * M ∧ BacklogBudget.preCount l ≤ 1 ∧ resCount l ≤ (D - 1) * M + 1 := by
  have h1 := decCount_le D M l (fun r hr hd => (h.2.1 r hr).1 hd) h.2.2
  have h2 := preCount_le_one l h.1
  exact ⟨h1, h2, by rw [resCount_split]; omega⟩

/-- **The work left: at most `M · (1 + … + (D - 1))` for the decodes, and a prompt more for all** (I1 and I2
read): of residents with I1 and I2 (`Resid`), `0 < D`, the decodes' work left (`decRem`) is at most
`M · (D · (D - 1) / 2)` (values in `[1, D - 1]`, each taken at most `M` times), and every resident's
(`BacklogMany.sumRem`) at most that plus `P` (the one prefill's work left). -/
theorem BacklogBudget.resid_work (P D M : Nat) (hD : 0 < D) (l : List Res) (h : BacklogBudget.Resid P D M l) :
    BacklogBudget.decRem l ≤ M * (D * (D - 1) / 2) ∧ BacklogMany.sumRem l ≤ M * (D * (D - 1) / 2) + P := by
  have h1 := decRem_le D M hD l (fun r hr hd => (h.2.1 r hr).1 hd) h.2.2
  have h2 := preRem_le P l (fun r hr hd => ((h.2.1 r hr).2 hd).2.1)
  have h3 := preCount_le_one l h.1
  have h4 : preCount l * P ≤ 1 * P := Nat.mul_le_mul_right _ h3
  refine ⟨h1, ?_⟩
  rw [sumRem_split]
  omega

namespace BacklogBudget

theorem run_resid (eng : Engine) (hp : eng.phased = false) (hc : eng.chunk = 0) (hcache : eng.caching = false)
    (ss : List Session) (P D : Nat) (hP : 0 < P) (hdec : (D - 1) * (1 + eng.budget / P) ≤ eng.budget) :
    ∀ (fuel : Nat) (m : Machine), Resid P D (1 + eng.budget / P) m.running → (∀ rq ∈ m.waiting, Waits P D rq) →
      (∀ k, (run eng ss k m).settled eng = false → BucketsOk eng ss P D (run eng ss k m)) →
      Resid P D (1 + eng.budget / P) (run eng ss fuel m).running ∧ ∀ rq ∈ (run eng ss fuel m).waiting, Waits P D rq
  | 0, _, h, hq, _ => ⟨h, hq⟩
  | fuel + 1, m, h, hq, H => by
    simp only [run]
    split
    · exact ⟨h, hq⟩
    · rename_i hs
      have h0 := H 0 (by simpa using hs)
      have hw := submit_waits eng hcache ss P D _ m.waiting hq h0.1
      apply run_resid eng hp hc hcache ss P D hP hdec fuel (step eng ss m)
        (step_buckets eng hp hc ss P D hP hdec m h hw h0.2) (step_waits eng hc ss P D m hw h0.2)
      intro k hk
      have e : run eng ss (k + 1) m = run eng ss k (step eng ss m) := by simp only [run, if_neg hs]
      have := H (k + 1)
      rw [e] at this
      exact this hk

end BacklogBudget

/-- **I1 and I2 on every run, and the requests in flight bounded** (issue 14, result 2, case (b)): an engine
of the mixed schedule without a chunk cap and without a prefix cache (`phased = false`, `chunk = 0`,
`caching = false`), a `P`-token prompt (`0 < P`), `D` outputs (`0 < D`), `M = 1 + budget / P` with
`(D - 1) · M ≤ budget`, any sessions and fuel: if at every machine of the run from `init` that has not settled
every due turn is a prompt of `P` tokens with `D` outputs and the step's plan preempts nothing (`BucketsOk`;
then every request left waiting is one never admitted, `step_waits`), then the run's residents have I1 and I2
(`Resid`), at most `(D - 1) · M + 1` are resident, and their work left (`sumRem`) is at most
`M · (D · (D - 1) / 2) + P`. -/
theorem BacklogBudget.run_buckets (eng : Engine) (hp : eng.phased = false) (hc : eng.chunk = 0)
    (hcache : eng.caching = false) (ss : List Session) (P D : Nat) (hP : 0 < P) (hD : 0 < D)
    (hdec : (D - 1) * (1 + eng.budget / P) ≤ eng.budget)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false →
      BacklogBudget.BucketsOk eng ss P D (run eng ss k (init ss)))
    (fuel : Nat) :
    BacklogBudget.Resid P D (1 + eng.budget / P) (run eng ss fuel (init ss)).running ∧
      resCount (run eng ss fuel (init ss)).running ≤ (D - 1) * (1 + eng.budget / P) + 1 ∧
      BacklogMany.sumRem (run eng ss fuel (init ss)).running ≤ (1 + eng.budget / P) * (D * (D - 1) / 2) + P := by
  have h := (BacklogBudget.run_resid eng hp hc hcache ss P D hP hdec fuel (init ss) (BacklogBudget.resid_nil P D _)
    (fun _ h => by simp [init] at h) H).1
  exact ⟨h, (BacklogBudget.resid_count P D _ _ h).2.2, (BacklogBudget.resid_work P D _ hD _ h).2⟩

end Serq
