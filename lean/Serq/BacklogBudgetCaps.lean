module

public import Serq.BacklogBudgetShort
public import Serq.BacklogBudgetWork

/-! # The caps never bind: no preemption, the queue admitted (issue 14, result 2, case (b))

The engine's side of a reset in the budget-cut case needs that the request cap and the KV pool never
bind: no resident is preempted, and the queue waits only when the budget is spent. This module proves it
for every engine (any budget, chunk cap, schedule, prefix cache) from a bound `K` on the requests in
flight, `K ≤ reqsCap` and `K · bW ≤ kvBlocks`:

* one plan: if at most `K` requests are in flight (`resCount running + reqCount waiting ≤ K`), every
  resident holds at most `bW` blocks and needs at most `bW` up to its turn's last position (`Life`), and
  every waiting request reserves at most `bW` up to its last position (`ReqLife`), then the plan preempts
  nothing, leaves the queue empty or spends the whole budget, keeps at most `K` requests in flight, every
  resident and every request left waiting as before (`Serq.BacklogBudget.plan_caps`); so a plan below the
  budget admits the whole queue (`Serq.BacklogBudget.plan_caps_short`);
* one step: at most `K` in flight after an iteration, nothing waiting after one below the budget
  (`Serq.BacklogBudget.step_caps`), and `Life`, `ReqLife` kept (`step_life`, through `apply`:
  `stepRes_life`);
* a submitted turn of a prompt of `0 < prompt ≤ P` tokens and at most `D > 0` outputs is within
  `blocksFor blockSize (P + D − 1)` (`newReq_life`, `submit_life`);
* a run: if at every machine of the run from `init` that has not settled at most `K` requests are in
  flight once the due turns are submitted and every due turn is such a prompt (`StepOk`), then every step
  of the run has the conclusions of `plan_caps` and `step_caps` (`Serq.BacklogBudget.run_caps`, from the
  invariant `run_life`).

The invariant of the plan (`CapInv`): no preemption, the count, every resident and request within `bW`
blocks; `growOrPreempt` then never finds the pool short (`growOrPreempt_fit`), and `admitHeads` stops only
on an empty queue or a spent budget (`admitHeads_caps`). What stays open: the count `K` itself over a run
(the hypothesis `StepOk`'s first half; with budget cuts a request has no fixed life, so it must come from
the work bound), and the due turns' shape from the sessions (`StepOk`'s second half).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open Backlog BacklogMany

/-- A resident within `bW` blocks now and for the rest of its work. -/
def ResFits (bs bW : Nat) (r : Res) : Prop :=
  r.alloc ≤ bW ∧ (0 < r.remaining → blocksFor bs (r.pos + r.remaining) ≤ bW)

/-- A waiting request whose reservation (every token it knows) is within `bW` blocks, and whose prompt's
prefix hit is within what it knows. -/
def ReqFits (bs bW : Nat) (rq : Req) : Prop :=
  blocksFor bs (max rq.kept (rq.computed + 1)) ≤ bW ∧ rq.hit ≤ max rq.kept (rq.computed + 1)

/-- A resident within `bW` blocks now and up to its turn's last position: its position, its work left and,
for a prefill, the decode tokens to come (`out − 1 − (known − prompt)`). Kept by `apply`. -/
def Life (bs bW : Nat) (r : Res) : Prop :=
  r.alloc ≤ bW ∧
    blocksFor bs (r.pos + r.remaining + (if r.decoding = true then 0 else r.req.out - 1 - (r.known - r.req.prompt))) ≤ bW

/-- A waiting request within `bW` blocks up to its turn's last position. -/
def ReqLife (bs bW : Nat) (rq : Req) : Prop :=
  ReqFits bs bW rq ∧
    blocksFor bs (max rq.kept (rq.computed + 1) + (rq.out - 1 - (max rq.kept (rq.computed + 1) - rq.prompt))) ≤ bW

theorem life_fits (bs bW : Nat) (r : Res) (h : Life bs bW r) : ResFits bs bW r :=
  ⟨h.1, fun _ => Nat.le_trans (blocksFor_mono _ (Nat.le_add_right _ _)) h.2⟩

/-- The plan's invariant: nothing preempted, at most `K` requests in flight, every resident and request
within `bW` blocks. -/
def CapInv (bs K bW : Nat) (p : Plan) : Prop :=
  p.preempted = 0 ∧ p.selfPreempted = false ∧
  resCount p.done + resCount p.todo + reqCount p.waiting ≤ K ∧
  (∀ r ∈ p.done, Life bs bW r) ∧ (∀ r ∈ p.todo, Life bs bW r) ∧
  (∀ rq ∈ p.waiting, ReqLife bs bW rq)

theorem resCount_appendRes (a b : List Res) : resCount (appendRes a b) = resCount a + resCount b := by
  rw [appendRes_eq']; exact resCount_app a b

theorem reqCount_eq_zero : ∀ (l : List Req), reqCount l = 0 → l = []
  | [], _ => rfl
  | _ :: _, h => by simp [reqCount] at h

/-- When the pool holds what is asked, `growOrPreempt` leaves the plan as it is. -/
theorem growOrPreempt_fit (eng : Engine) (fuel need : Nat) (p : Plan)
    (h : usedBlocks p.done + usedBlocks p.todo + need ≤ eng.kvBlocks) : growOrPreempt eng fuel need p = p := by
  cases fuel with
  | zero => rfl
  | succ f => simp only [growOrPreempt, if_pos h]

theorem reuse_le (bs : Nat) (rq : Req) (known : Nat) (h : rq.hit ≤ known) : reuseCap bs rq known ≤ known := by
  unfold reuseCap reusable
  split
  · split
    · omega
    · have := Nat.div_mul_le_self (known - 1) bs
      omega
  · exact h

/-- Serving the residents keeps the invariant: no resident is preempted. -/
theorem serveRunning_caps (eng : Engine) (only : Option Bool) (K bW : Nat) (hkv : K * bW ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (p : Plan), CapInv eng.blockSize K bW p → CapInv eng.blockSize K bW (serveRunning eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, hinv => by
    obtain ⟨h1, h2, h3, h4, h5, h6⟩ := hinv
    simp only [serveRunning]
    split
    · exact ⟨h1, h2, h3, h4, h5, h6⟩
    · split
      · exact ⟨h1, h2, h3, h4, h5, h6⟩
      · rename_i r later hcons
        have hr := h5 r (by rw [hcons]; exact List.mem_cons_self)
        have hlater : ∀ x ∈ later, Life eng.blockSize bW x := fun x hx => h5 x (by rw [hcons]; exact List.mem_cons_of_mem _ hx)
        have hcnt : resCount p.todo = resCount later + 1 := by rw [hcons]; rfl
        split
        · apply serveRunning_caps eng only K bW hkv fuel
          refine ⟨h1, h2, ?_, ?_, hlater, h6⟩
          · rw [resCount_appendRes]; simp only [resCount]; omega
          · intro x hx
            rcases mem_appendRes_one _ _ _ hx with e | e
            · exact h4 x e
            · subst e; exact hr
        · rename_i hrem
          have hrem0 : 0 < r.remaining := by omega
          generalize hn : (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = n
          have hnr : n ≤ r.remaining := by
            subst hn
            split
            · omega
            · exact Nat.le_trans (capChunk_le _ _) (Nat.min_le_left _ _)
          have hgrow : blocksFor eng.blockSize (r.pos + n) ≤ bW :=
            Nat.le_trans (blocksFor_mono _ (by omega)) ((life_fits _ _ _ hr).2 hrem0)
          have hud := usedBlocks_le bW p.done (fun x hx => (h4 x hx).1)
          have hul := usedBlocks_le bW later (fun x hx => (hlater x hx).1)
          have hut : usedBlocks p.todo = r.alloc + usedBlocks later := by rw [hcons]; rfl
          have hK1 : (resCount p.done + resCount later + 1) * bW ≤ K * bW := Nat.mul_le_mul_right _ (by omega)
          have hfit : usedBlocks p.done + usedBlocks p.todo + (blocksFor eng.blockSize (r.pos + n) - r.alloc)
              ≤ eng.kvBlocks := by
            rw [Nat.add_mul, Nat.add_mul, Nat.one_mul] at hK1
            have := hr.1
            rw [hut]
            generalize resCount p.done * bW = A at hK1 hud
            generalize resCount later * bW = B at hK1 hul
            generalize blocksFor eng.blockSize (r.pos + n) = G at hgrow ⊢
            omega
          rw [growOrPreempt_fit eng _ _ p hfit]
          rw [if_neg (by simp [h2])]
          apply serveRunning_caps eng only K bW hkv fuel
          refine ⟨h1, h2, ?_, ?_, ?_, h6⟩
          · simp only [resCount_appendRes, hcons, dropHead, resCount]; omega
          · intro x hx
            rcases mem_appendRes_one _ _ _ hx with e | e
            · exact h4 x e
            · subst e
              have := hr.1
              exact ⟨show r.alloc + (blocksFor eng.blockSize (r.pos + n) - r.alloc) ≤ bW by omega, hr.2⟩
          · simp only [hcons, dropHead]; exact hlater

/-- Admitting from the queue keeps the invariant and stops only on an empty queue or a spent budget. -/
theorem admitHeads_caps (eng : Engine) (only : Option Bool) (K bW : Nat) (hK : K ≤ eng.reqsCap)
    (hkv : K * bW ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (p : Plan), CapInv eng.blockSize K bW p → reqCount p.waiting < fuel →
      CapInv eng.blockSize K bW (admitHeads eng only fuel p) ∧
        ((admitHeads eng only fuel p).waiting = [] ∨ (admitHeads eng only fuel p).budget = 0)
  | 0, p, _, hf => absurd hf (Nat.not_lt_zero _)
  | fuel + 1, p, hinv, hf => by
    obtain ⟨h1, h2, h3, h4, h5, h6⟩ := hinv
    simp only [admitHeads]
    split
    · rename_i hgo
      refine ⟨⟨h1, h2, h3, h4, h5, h6⟩, ?_⟩
      rcases hgo with h | h
      · exact Or.inr h
      · exact Or.inl (reqCount_eq_zero _ (by omega))
    · rename_i hgo
      split
      · exact ⟨⟨h1, h2, h3, h4, h5, h6⟩, Or.inl (by assumption)⟩
      · rename_i rq rest hw
        have hq := h6 rq (by rw [hw]; exact List.mem_cons_self)
        have hrest : ∀ x ∈ rest, ReqLife eng.blockSize bW x := fun x hx => h6 x (by rw [hw]; exact List.mem_cons_of_mem _ hx)
        have hcnt : reqCount p.waiting = reqCount rest + 1 := by rw [hw]; rfl
        obtain ⟨⟨hq1, hq2⟩, hq3⟩ := hq
        generalize max rq.kept (rq.computed + 1) = known at hq1 hq2 hq3 ⊢
        have hreuse : min (ownCachedBlocks rq.sid p.cache * eng.blockSize) (reuseCap eng.blockSize rq known) ≤ known :=
          Nat.le_trans (Nat.min_le_right _ _) (reuse_le eng.blockSize rq known hq2)
        generalize min (ownCachedBlocks rq.sid p.cache * eng.blockSize) (reuseCap eng.blockSize rq known) = reused
          at hreuse ⊢
        have hn := Nat.le_trans (capChunk_le p.chunk _) (Nat.min_le_left (known - reused) p.budget)
        generalize capChunk p.chunk (min (known - reused) p.budget) = n at hn ⊢
        have hunits : blocksFor eng.blockSize (reused + n) ≤ bW := Nat.le_trans (blocksFor_mono _ (by omega)) hq1
        have hmax : max (blocksFor eng.blockSize (reused + n)) (blocksFor eng.blockSize known) ≤ bW :=
          Nat.max_le.mpr ⟨hunits, hq1⟩
        generalize max (blocksFor eng.blockSize (reused + n)) (blocksFor eng.blockSize known) = M at hmax ⊢
        have hud := usedBlocks_le bW p.done (fun x hx => (h4 x hx).1)
        have hK1 : (resCount p.done + 1) * bW ≤ K * bW := Nat.mul_le_mul_right _ (by omega)
        rw [Nat.add_mul, Nat.one_mul] at hK1
        split
        · omega
        · apply admitHeads_caps eng only K bW hK hkv fuel
          · refine ⟨h1, h2, ?_, ?_, h5, hrest⟩
            · show resCount (appendRes p.done [_]) + resCount p.todo + reqCount rest ≤ K
              simp only [resCount_appendRes, resCount]; omega
            · intro x hx
              rcases mem_appendRes_one _ _ _ hx with e | e
              · exact h4 x e
              · subst e
                refine ⟨hunits, ?_⟩
                have e : reused + (known - reused) = known := by omega
                simp only [Bool.false_eq_true, if_false, e]
                split <;> exact hq3
          · show reqCount rest < fuel
            omega

theorem clearSched_fits' (bs bW : Nat) (L : List Res) (h : ∀ r ∈ L, Life bs bW r) :
    ∀ r ∈ clearSched L, Life bs bW r := by
  intro x hx
  obtain ⟨r, hr, rfl⟩ := mem_clearSched L x hx
  exact h r hr

/-- **The caps never bind in one plan.** Any engine, chunk, machine and queue: with at most `K`
requests in flight, `K ≤ reqsCap`, `K · bW ≤ kvBlocks`, every resident within `bW` blocks up to its turn's
last position (`Life`) and every waiting request likewise (`ReqLife`), the plan preempts nothing, leaves the
queue empty or spends the whole budget, and keeps at most `K` requests in flight, its residents `Life` and
the requests left waiting `ReqLife`. -/
theorem plan_caps (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req) (K bW : Nat)
    (hK : K ≤ eng.reqsCap) (hkv : K * bW ≤ eng.kvBlocks) (hn : resCount m.running + reqCount waiting ≤ K)
    (hres : ∀ r ∈ m.running, Life eng.blockSize bW r) (hw : ∀ rq ∈ waiting, ReqLife eng.blockSize bW rq) :
    (plan eng chunk m waiting).preempted = 0 ∧
      ((plan eng chunk m waiting).waiting = [] ∨ batchTokens (plan eng chunk m waiting).done = eng.budget) ∧
      resCount (plan eng chunk m waiting).done + reqCount (plan eng chunk m waiting).waiting ≤ K ∧
      (∀ r ∈ (plan eng chunk m waiting).done, Life eng.blockSize bW r) ∧
      ∀ rq ∈ (plan eng chunk m waiting).waiting, ReqLife eng.blockSize bW rq := by
  have htok := (plan_inv eng chunk m waiting).2.1
  suffices h : CapInv eng.blockSize K bW (plan eng chunk m waiting) ∧
      ((plan eng chunk m waiting).waiting = [] ∨ (plan eng chunk m waiting).budget = 0) by
    obtain ⟨⟨h1, _, h3, h4, _, h6⟩, h7⟩ := h
    refine ⟨h1, ?_, by omega, h4, h6⟩
    rcases h7 with e | e
    · exact Or.inl e
    · right; omega
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only
  have h0 : CapInv eng.blockSize K bW
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ :=
    ⟨rfl, rfl, by simp only [resCount, resCount_clearSched]; omega, by simp, clearSched_fits' _ _ _ hres, hw⟩
  obtain ⟨h1, h2, h3, h4, h5, h6⟩ := serveRunning_caps eng only K bW hkv (resCount m.running + 1) _ h0
  generalize serveRunning eng only (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1
    at h1 h2 h3 h4 h5 h6 ⊢
  have h1' : CapInv eng.blockSize K bW { p1 with done := appendRes p1.done p1.todo, todo := [] } := by
    refine ⟨h1, h2, ?_, ?_, by simp, h6⟩
    · simp only [resCount_appendRes, resCount]; omega
    · intro x hx
      rw [appendRes_eq', List.mem_append] at hx
      rcases hx with e | e
      · exact h4 x e
      · exact h5 x e
  rw [if_pos h1]
  exact admitHeads_caps eng only K bW hK hkv _ _ h1' (Nat.lt_succ_self _)

/-- **An iteration below the budget leaves nothing waiting** when the caps do not bind: with the
hypotheses of `plan_caps`, a plan that schedules fewer tokens than the budget admits the whole queue. -/
theorem plan_caps_short (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req) (K bW : Nat)
    (hK : K ≤ eng.reqsCap) (hkv : K * bW ≤ eng.kvBlocks) (hn : resCount m.running + reqCount waiting ≤ K)
    (hres : ∀ r ∈ m.running, Life eng.blockSize bW r) (hw : ∀ rq ∈ waiting, ReqLife eng.blockSize bW rq)
    (hshort : batchTokens (plan eng chunk m waiting).done < eng.budget) :
    (plan eng chunk m waiting).waiting = [] := by
  rcases (plan_caps eng chunk m waiting K bW hK hkv hn hres hw).2.1 with e | e
  · exact e
  · omega

theorem apply_waiting (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), (apply eng sessions now m l kept).waiting = m.waiting
  | [], m, kept => rfl
  | r :: rs, m, kept => by
    have ih := apply_waiting eng sessions now rs
    simp only [apply]
    repeat' split
    all_goals first | rfl | (simp only [ih]; done) | simp [ih]

/-- **The caps never bind in one step.** Any engine and sessions, any machine whose residents are within
`bW` blocks up to their turns' last positions (`Life`), with the step's queue (the machine's, the due
turns submitted at its back) likewise (`ReqLife`) and at most `K` requests in flight, `K ≤ reqsCap`,
`K · bW ≤ kvBlocks`: if the step runs an iteration (its record `x` is new), at most `K` requests are in
flight after it, and if the iteration is below the budget, nothing is left waiting. (Its plan preempts
nothing: `plan_caps`.) -/
theorem step_caps (eng : Engine) (ss : List Session) (m : Machine) (K bW : Nat)
    (hK : K ≤ eng.reqsCap) (hkv : K * bW ≤ eng.kvBlocks)
    (hn : resCount m.running + reqCount (submit eng ss (duePending m.now m.pending).1 m.waiting) ≤ K)
    (hres : ∀ r ∈ m.running, Life eng.blockSize bW r)
    (hw : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting, ReqLife eng.blockSize bW rq)
    (x : Record) (hx : x ∈ (step eng ss m).records) (hxm : x ∉ m.records) :
    resCount (step eng ss m).running + reqCount (step eng ss m).waiting ≤ K ∧
      (x.tokens < eng.budget → (step eng ss m).waiting = []) := by
  unfold step at hx ⊢
  generalize duePending m.now m.pending = dl at hn hw hx ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hn hw hx ⊢
  generalize submit eng ss due m.waiting = waiting at hn hw hx ⊢
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1] at hx; exfalso; apply hxm; split at hx <;> exact hx
  · rw [if_neg h1] at hx ⊢
    generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk at hx ⊢
    by_cases h2 : batchTokens (plan eng chunk m waiting).done = 0 ∧ (plan eng chunk m waiting).preempted = 0
    · rw [if_pos h2] at hx; exfalso; apply hxm; split at hx <;> exact hx
    · rw [if_neg h2] at hx ⊢
      simp only [apply_records] at hx
      rcases (mem_appendRecord _ _ _).mp hx with e | e
      · exact absurd e hxm
      · subst e
        simp only [apply_waiting, apply_running, List.nil_append]
        obtain ⟨_, hq, hcnt, _, _⟩ := plan_caps eng chunk m waiting K bW hK hkv hn hres hw
        refine ⟨Nat.le_trans (Nat.add_le_add_right (resCount_stepAll _ _) _) hcnt, fun hs => ?_⟩
        rcases hq with e | e
        · exact e
        · exact absurd e (Nat.ne_of_lt hs)

/-! ## Over a run -/

/-- What `apply` leaves of a resident within `bW` blocks up to its turn's last position stays so. -/
theorem stepRes_life (now bs bW : Nat) (r : Res) (h : Life bs bW r) (hs : r.sched ≤ r.remaining) :
    ∀ y ∈ stepRes now r, Life bs bW y := by
  intro y hy
  obtain ⟨h1, h2⟩ := h
  unfold stepRes at hy
  by_cases h0 : r.sched = 0
  · rw [if_pos h0] at hy
    simp only [List.mem_singleton] at hy
    subst hy
    exact ⟨h1, h2⟩
  · rw [if_neg h0] at hy
    dsimp only at hy
    cases hd : r.decoding
    · rw [hd] at h2
      simp only [Bool.false_eq_true, if_false] at h2
      by_cases hz : r.remaining - r.sched = 0
      · simp only [hd, hz, Bool.false_eq_true, false_or, true_and, if_true, if_false] at hy
        split at hy
        · simp at hy
        · simp only [List.mem_singleton] at hy
          subst hy
          refine ⟨h1, Nat.le_trans (blocksFor_mono _ ?_) h2⟩
          first | omega | (simp <;> omega) | (split <;> simp <;> omega) | (simp <;> split <;> simp <;> omega)
      · simp only [hd, hz, Bool.false_eq_true, false_or, false_and, if_false] at hy
        simp only [List.mem_singleton] at hy
        subst hy
        refine ⟨h1, Nat.le_trans (blocksFor_mono _ ?_) h2⟩
        first | omega | (simp <;> omega) | (split <;> simp <;> omega) | (simp <;> split <;> simp <;> omega)
    · rw [hd, if_pos rfl] at h2
      simp only [hd, true_or, true_and, if_true] at hy
      split at hy
      · simp at hy
      · simp only [List.mem_singleton] at hy
        subst hy
        refine ⟨h1, Nat.le_trans (blocksFor_mono _ ?_) h2⟩
        first | omega | (simp <;> omega) | (split <;> simp <;> omega) | (simp <;> split <;> simp <;> omega)

theorem stepAll_life (now bs bW : Nat) : ∀ (L : List Res), (∀ r ∈ L, Life bs bW r ∧ r.sched ≤ r.remaining) →
    ∀ y ∈ stepAll now L, Life bs bW y
  | [], _, y, hy => by simp [stepAll] at hy
  | r :: rs, h, y, hy => by
    rw [stepAll_cons, List.mem_append] at hy
    rcases hy with hy | hy
    · exact stepRes_life now bs bW r (h r List.mem_cons_self).1 (h r List.mem_cons_self).2 y hy
    · exact stepAll_life now bs bW rs (fun x hx => h x (List.mem_cons_of_mem _ hx)) y hy

/-! ## The submitted turns -/

theorem mem_appendReq (w : List Req) (r x : Req) (h : x ∈ appendReq w r) : x ∈ w ∨ x = r := by
  induction w with
  | nil => simpa [appendReq] using h
  | cons y ys ih =>
    simp only [appendReq, List.mem_cons] at h
    rcases h with h | h
    · exact Or.inl (h ▸ List.mem_cons_self)
    · rcases ih h with h | h
      · exact Or.inl (List.mem_cons_of_mem _ h)
      · exact Or.inr h

/-- The step's queue: the machine's, and the due turns submitted at its back. -/
theorem mem_submit (eng : Engine) (ss : List Session) : ∀ (due : List Pending) (w : List Req) (rq : Req),
    rq ∈ submit eng ss due w → rq ∈ w ∨ ∃ p ∈ due, rq = newReq eng ss p
  | [], w, rq, h => Or.inl h
  | p :: ps, w, rq, h => by
    simp only [submit] at h
    split at h
    · rcases mem_submit eng ss ps w rq h with h | ⟨q, hq, e⟩
      · exact Or.inl h
      · exact Or.inr ⟨q, List.mem_cons_of_mem _ hq, e⟩
    · rcases mem_submit eng ss ps _ rq h with h | ⟨q, hq, e⟩
      · rcases mem_appendReq w _ rq h with h | h
        · exact Or.inl h
        · exact Or.inr ⟨p, List.mem_cons_self, h⟩
      · exact Or.inr ⟨q, List.mem_cons_of_mem _ hq, e⟩

/-- A submitted turn of a prompt of `0 < prompt ≤ P` tokens and at most `D > 0` output tokens is within
`blocksFor blockSize (P + D − 1)` blocks up to its last position. -/
theorem newReq_life (eng : Engine) (ss : List Session) (p : Pending) (P D : Nat) (hP : 0 < p.prompt)
    (hle : p.prompt ≤ P) (hD : 0 < D) (hout : (newReq eng ss p).out ≤ D) :
    ReqLife eng.blockSize (blocksFor eng.blockSize (P + D - 1)) (newReq eng ss p) := by
  have hk : (newReq eng ss p).kept = p.prompt := rfl
  have hc : (newReq eng ss p).computed = 0 := rfl
  have hpr : (newReq eng ss p).prompt = p.prompt := rfl
  have hr : reusable p.prompt eng.blockSize ≤ p.prompt := by
    unfold reusable
    split
    · omega
    · have := Nat.div_mul_le_self (p.prompt - 1) eng.blockSize
      omega
  have hh : (newReq eng ss p).hit ≤ p.prompt := by
    unfold newReq
    dsimp only
    repeat' split
    all_goals omega
  have hm : max p.prompt (0 + 1) = p.prompt := Nat.max_eq_left (by omega)
  unfold ReqLife ReqFits
  rw [hk, hc, hpr, hm]
  generalize (newReq eng ss p).out = o at hout
  exact ⟨⟨blocksFor_mono _ (by omega), by omega⟩, blocksFor_mono _ (by omega)⟩

/-- The queue half of `QueueOk` at a step: the waiting requests within `bW = blocksFor blockSize
(P + D − 1)` and every due turn a prompt of `0 < prompt ≤ P` tokens with at most `D > 0` outputs. -/
theorem submit_life (eng : Engine) (ss : List Session) (P D : Nat) (hD : 0 < D) (due : List Pending)
    (w : List Req) (hw : ∀ rq ∈ w, ReqLife eng.blockSize (blocksFor eng.blockSize (P + D - 1)) rq)
    (hdue : ∀ p ∈ due, 0 < p.prompt ∧ p.prompt ≤ P ∧ (newReq eng ss p).out ≤ D) :
    ∀ rq ∈ submit eng ss due w, ReqLife eng.blockSize (blocksFor eng.blockSize (P + D - 1)) rq := by
  intro rq hrq
  rcases mem_submit eng ss due w rq hrq with h | ⟨p, hp, rfl⟩
  · exact hw rq h
  · obtain ⟨h1, h2, h3⟩ := hdue p hp
    exact newReq_life eng ss p P D h1 h2 hD h3

/-! ## The invariant over runs -/

/-- One step keeps every resident within `bW` blocks up to its turn's last position, and every waiting
request, under `step_caps`'s hypotheses. -/
theorem step_life (eng : Engine) (ss : List Session) (m : Machine) (K bW : Nat)
    (hK : K ≤ eng.reqsCap) (hkv : K * bW ≤ eng.kvBlocks)
    (hn : resCount m.running + reqCount (submit eng ss (duePending m.now m.pending).1 m.waiting) ≤ K)
    (hres : ∀ r ∈ m.running, Life eng.blockSize bW r)
    (hw : ∀ rq ∈ submit eng ss (duePending m.now m.pending).1 m.waiting, ReqLife eng.blockSize bW rq) :
    (∀ r ∈ (step eng ss m).running, Life eng.blockSize bW r) ∧
      ∀ rq ∈ (step eng ss m).waiting, ReqLife eng.blockSize bW rq := by
  unfold step
  generalize duePending m.now m.pending = dl at hn hw ⊢
  obtain ⟨due, later⟩ := dl
  simp only at hn hw ⊢
  generalize submit eng ss due m.waiting = waiting at hn hw ⊢
  by_cases h1 : noRes m.running = true ∧ noReq waiting = true
  · rw [if_pos h1]; split <;> exact ⟨hres, hw⟩
  · rw [if_neg h1]
    generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
    obtain ⟨_, _, _, hL, hW⟩ := plan_caps eng chunk m waiting K bW hK hkv hn hres hw
    have hrem := plan_sched_rem eng chunk m waiting
    by_cases h2 : batchTokens (plan eng chunk m waiting).done = 0 ∧ (plan eng chunk m waiting).preempted = 0
    · rw [if_pos h2]; first | exact ⟨hL, hw⟩ | (split <;> exact ⟨hL, hw⟩)
    · rw [if_neg h2]
      simp only [apply_running, apply_waiting, List.nil_append]
      exact ⟨stepAll_life _ _ _ _ (fun r hr => ⟨hL r hr, hrem r hr⟩), hW⟩

/-- What a run asks of each machine that has not settled: at most `K` requests in flight once the due
turns are submitted, and every due turn a prompt of `0 < prompt ≤ P` tokens with at most `D` outputs. -/
def StepOk (eng : Engine) (ss : List Session) (K P D : Nat) (m : Machine) : Prop :=
  resCount m.running + reqCount (submit eng ss (duePending m.now m.pending).1 m.waiting) ≤ K ∧
    ∀ p ∈ (duePending m.now m.pending).1, 0 < p.prompt ∧ p.prompt ≤ P ∧ (newReq eng ss p).out ≤ D

theorem run_life (eng : Engine) (ss : List Session) (K P D : Nat) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks) :
    ∀ (fuel : Nat) (m : Machine), (∀ r ∈ m.running, Life eng.blockSize (blocksFor eng.blockSize (P + D - 1)) r) →
      (∀ rq ∈ m.waiting, ReqLife eng.blockSize (blocksFor eng.blockSize (P + D - 1)) rq) →
      (∀ k, (run eng ss k m).settled eng = false → StepOk eng ss K P D (run eng ss k m)) →
      (∀ r ∈ (run eng ss fuel m).running, Life eng.blockSize (blocksFor eng.blockSize (P + D - 1)) r) ∧
        ∀ rq ∈ (run eng ss fuel m).waiting, ReqLife eng.blockSize (blocksFor eng.blockSize (P + D - 1)) rq
  | 0, _, h, hq, _ => ⟨h, hq⟩
  | fuel + 1, m, h, hq, H => by
    simp only [run]
    split
    · exact ⟨h, hq⟩
    · rename_i hs
      have h0 := H 0 (by simpa using hs)
      obtain ⟨s1, s2⟩ := step_life eng ss m K _ hK hkv h0.1 h
        (submit_life eng ss P D hD _ m.waiting hq h0.2)
      apply run_life eng ss K P D hD hK hkv fuel (step eng ss m) s1 s2
      intro k hk
      have e : run eng ss (k + 1) m = run eng ss k (step eng ss m) := by simp only [run, if_neg hs]
      have := H (k + 1)
      rw [e] at this
      exact this hk

/-- **The caps never bind on a run.** Every engine (any budget, chunk cap, schedule, prefix cache),
`0 < D`, `K ≤ reqsCap`, `K · blocksFor blockSize (P + D − 1) ≤ kvBlocks`, every workload and fuel: if at
every machine of the run from `init` that has not settled at most `K` requests are in flight once the due
turns are submitted and every due turn is a prompt of `0 < prompt ≤ P` tokens with at most `D` outputs
(`StepOk`), then at every such machine the step's plan preempts nothing (any chunk) and leaves the queue
empty or spends the whole budget, and if the step runs an iteration (its record `x` is new), at most `K`
requests are in flight after it and, when the iteration is below the budget, nothing is left waiting. -/
theorem run_caps (eng : Engine) (ss : List Session) (K P D : Nat) (hD : 0 < D) (hK : K ≤ eng.reqsCap)
    (hkv : K * blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (H : ∀ k, (run eng ss k (init ss)).settled eng = false → StepOk eng ss K P D (run eng ss k (init ss)))
    (fuel : Nat) (hs : (run eng ss fuel (init ss)).settled eng = false) :
    (∀ chunk, (plan eng chunk (run eng ss fuel (init ss))
        (submit eng ss (duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1
          (run eng ss fuel (init ss)).waiting)).preempted = 0 ∧
      ((plan eng chunk (run eng ss fuel (init ss))
        (submit eng ss (duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1
          (run eng ss fuel (init ss)).waiting)).waiting = [] ∨
       batchTokens (plan eng chunk (run eng ss fuel (init ss))
        (submit eng ss (duePending (run eng ss fuel (init ss)).now (run eng ss fuel (init ss)).pending).1
          (run eng ss fuel (init ss)).waiting)).done = eng.budget)) ∧
      ∀ x ∈ (step eng ss (run eng ss fuel (init ss))).records, x ∉ (run eng ss fuel (init ss)).records →
        resCount (step eng ss (run eng ss fuel (init ss))).running +
            reqCount (step eng ss (run eng ss fuel (init ss))).waiting ≤ K ∧
          (x.tokens < eng.budget → (step eng ss (run eng ss fuel (init ss))).waiting = []) := by
  obtain ⟨hL, hQ⟩ := run_life eng ss K P D hD hK hkv fuel (init ss) (by simp [init]) (by simp [init]) H
  obtain ⟨hn, hdue⟩ := H fuel hs
  have hw := submit_life eng ss P D hD _ _ hQ hdue
  exact ⟨fun chunk => ⟨(plan_caps eng chunk _ _ K _ hK hkv hn hL hw).1, (plan_caps eng chunk _ _ K _ hK hkv hn hL hw).2.1⟩,
    fun x hx hxm => step_caps eng ss _ K _ hK hkv hn hL hw x hx hxm⟩

end BacklogBudget

end Serq
