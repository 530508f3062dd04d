module

public import Serq.KernelBudget
public import Serq.KernelTimed

/-! # Full iterations through the kernel: the budget is spent whenever demand allows

`Serq.Full` proves of the engine model (`Serq.Exec`) that every iteration on vLLM's schedule
schedules its whole token budget unless the residents' demand is below it. This module proves
the same of one iteration of the kernel interpreter (`Serq.Kernel.startIteration`), for an engine
whose schedule is vLLM's with nothing that leaves a resident unserved while budget is left
(`startIteration_full_or_short`):

* its `tokens cap` is a constant `B` (`Engine.budget = .num B`);
* no `only` on `advance running` (`Engine.serveOnly = none`): a predicate passes residents over
  and leaves their demand unserved (`examples/papers/fastertransformer.sq`);
* no granule (`Engine.granule = .num 0`): a prefill the granule cuts to none is passed over;
* no pool admitted by the engine (`pool … on S`: no `p.admitVia` entry is `s + 1`), so that its
  `admit waiting` admits none: an admitted hold's thread runs (`exec`) and may start a run that grows a
  pool, and a growth that does not fit leaves a resident unserved or preempts;
* `PlanReady m s` as the iteration starts: every resident of the engine has nothing scheduled
  (`sched = 0`: the serving passes over a resident with tokens) and grows no pool (`grow = 0`: under
  `preempt none` a growth that does not fit leaves it unserved but counted in the demand; a
  preemption, or a grower preempting itself, ends the serving), and no thread is twice a resident
  (`threadsDistinct`: `setSched` gives the tokens to the first resident of the thread, and the
  serving passes over the second).

Then the record the iteration keeps, if it keeps one, has `tokens = B` or its demand (each decode's
one token, each prefill's remainder up to the chunk, summed over the residents after the plan) below
`B`; nothing is assumed of the chunk (`each at most`, any expression, 0 for none) nor of the serve
order (`advance running by (keys)`).

The proof is an invariant of `serveIn` (`ServeInv`), as `Serq.Full`'s of `serveRunning`: the batch
keeps the cap `B`, its tokens are the residents' `sched`, and while budget is left every resident
already considered has its whole demand scheduled and every other has none.

For every run (`runProgram_full_or_short_of`): the same, given a machine invariant that gives
`PlanReady` whenever the engine is idle (`FullInvariant`). Its `sched` part is proved for every run in
`Serq.KernelFullRun` (`IdleClear`, with a cost that is never 0), so what is left is an invariant that
gives the other two, no growing resident and no thread twice (`RestInvariant`,
`runProgram_full_or_short_of_rest`, there).
-/
@[expose] public section

namespace Serq.Kernel

/-! ### The residents: what is scheduled, what is demanded -/

/-- A resident's demand (`demandOf`'s summand): a decode's one token, a prefill's remainder up to the
chunk (`c`, 0: no cap). -/
def demOne (c : Nat) (r : Resident) : Nat :=
  if r.decode then 1 else if c = 0 then r.rem else Nat.min r.rem c

/-- The tokens the iteration being planned gave the residents. -/
def sumSched : List Resident → Nat
  | [] => 0
  | r :: rs => r.sched + sumSched rs

def natsDistinct : List Nat → Prop
  | [] => True
  | x :: xs => x ∉ xs ∧ natsDistinct xs

/-- No thread is twice a resident. -/
def threadsDistinct (rs : List Resident) : Prop := natsDistinct (threadsOf rs)

/-- What an iteration of engine `s` needs of its residents as it starts: nothing scheduled, no
growing run, no thread twice. -/
def PlanReady (m : Machine) (s : Nat) : Prop :=
  (∀ r ∈ (getEngineState m.engines s).residents, r.sched = 0 ∧ r.grow = 0) ∧
    threadsDistinct (getEngineState m.engines s).residents

theorem natMin_cases (a b : Nat) : Nat.min a b = a ∨ Nat.min a b = b := by
  rcases Nat.le_total a b with h | h
  · exact Or.inl (Nat.min_eq_left h)
  · exact Or.inr (Nat.min_eq_right h)

theorem sumSched_zero : ∀ rs : List Resident, (∀ r ∈ rs, r.sched = 0) → sumSched rs = 0
  | [], _ => rfl
  | r :: rs, h => by
    have h1 := h r (by simp)
    have h2 := sumSched_zero rs (fun x hx => h x (by simp [hx]))
    show r.sched + sumSched rs = 0
    omega

theorem sumSched_eq_demand (c : Nat) : ∀ rs : List Resident, (∀ r ∈ rs, r.sched = demOne c r) →
    sumSched rs = demandOf c rs
  | [], _ => rfl
  | r :: rs, h => by
    have h1 := h r (by simp)
    have h2 := sumSched_eq_demand c rs (fun x hx => h x (by simp [hx]))
    show r.sched + sumSched rs = demOne c r + demandOf c rs
    omega

theorem threadsOf_mem (x : Resident) : ∀ rs : List Resident, x ∈ rs → x.thread ∈ threadsOf rs
  | [], h => by simp at h
  | y :: ys, h => by
    simp only [threadsOf, List.mem_cons] at h ⊢
    rcases h with h | h
    · exact Or.inl (by rw [h])
    · exact Or.inr (threadsOf_mem x ys h)

theorem residentOf_some (t : Nat) (r : Resident) : ∀ rs : List Resident, residentOf t rs = some r →
    r ∈ rs ∧ r.thread = t := by
  intro rs
  induction rs with
  | nil => intro h; simp [residentOf] at h
  | cons y ys ih =>
    intro h
    by_cases hy : y.thread = t
    · have hyr : y = r := by simpa [residentOf, hy] using h
      subst hyr
      exact ⟨by simp, hy⟩
    · have h' : residentOf t ys = some r := by simpa [residentOf, hy] using h
      obtain ⟨h1, h2⟩ := ih h'
      exact ⟨by simp [h1], h2⟩

theorem residentOf_none (t : Nat) : ∀ rs : List Resident, residentOf t rs = none → ∀ x ∈ rs, x.thread ≠ t := by
  intro rs
  induction rs with
  | nil => intro _ x hx; simp at hx
  | cons y ys ih =>
    intro h x hx
    by_cases hy : y.thread = t
    · simp [residentOf, hy] at h
    · have h' : residentOf t ys = none := by simpa [residentOf, hy] using h
      simp only [List.mem_cons] at hx
      rcases hx with hx | hx
      · rw [hx]; exact hy
      · exact ih h' x hx

/-- With no thread twice, the resident `residentOf` finds is the thread's only one. -/
theorem residentOf_unique (t : Nat) (r : Resident) : ∀ rs : List Resident, threadsDistinct rs →
    residentOf t rs = some r → ∀ x ∈ rs, x.thread = t → x = r := by
  intro rs
  induction rs with
  | nil => intro _ _ x hx; simp at hx
  | cons y ys ih =>
    intro hd h x hx hxt
    have hd' : y.thread ∉ threadsOf ys ∧ threadsDistinct ys := hd
    simp only [List.mem_cons] at hx
    by_cases hy : y.thread = t
    · have hyr : y = r := by simpa [residentOf, hy] using h
      rcases hx with hx | hx
      · rw [hx, hyr]
      · have h1 := threadsOf_mem x ys hx
        rw [hxt, ← hy] at h1
        exact absurd h1 hd'.1
    · have h' : residentOf t ys = some r := by simpa [residentOf, hy] using h
      rcases hx with hx | hx
      · rw [hx] at hxt; exact absurd hxt hy
      · exact ih hd'.2 h' x hx hxt

theorem threadsOf_setSched (t n : Nat) : ∀ rs : List Resident, threadsOf (setSched t n rs) = threadsOf rs
  | [] => rfl
  | y :: ys => by
    by_cases hy : y.thread = t
    · simp [setSched, threadsOf, hy]
    · simp [setSched, threadsOf, hy, threadsOf_setSched t n ys]

theorem setSched_sum (t n : Nat) (r : Resident) : ∀ rs : List Resident, residentOf t rs = some r →
    sumSched (setSched t n rs) + r.sched = sumSched rs + n := by
  intro rs
  induction rs with
  | nil => intro h; simp [residentOf] at h
  | cons y ys ih =>
    intro h
    by_cases hy : y.thread = t
    · have hyr : y = r := by simpa [residentOf, hy] using h
      subst hyr
      have e : setSched t n (y :: ys) = { y with sched := n } :: ys := by simp [setSched, hy]
      rw [e]
      show n + sumSched ys + y.sched = y.sched + sumSched ys + n
      omega
    · have h' : residentOf t ys = some r := by simpa [residentOf, hy] using h
      have e : setSched t n (y :: ys) = y :: setSched t n ys := by simp [setSched, hy]
      have := ih h'
      rw [e]
      show y.sched + sumSched (setSched t n ys) + r.sched = y.sched + sumSched ys + n
      omega

/-- What `setSched` leaves: the other threads' residents as they were, and the thread's with its tokens. -/
theorem setSched_mem (t n : Nat) (r : Resident) : ∀ rs : List Resident, threadsDistinct rs →
    residentOf t rs = some r → ∀ x ∈ setSched t n rs, (x ∈ rs ∧ x.thread ≠ t) ∨ x = { r with sched := n } := by
  intro rs
  induction rs with
  | nil => intro _ h; simp [residentOf] at h
  | cons y ys ih =>
    intro hd h x hx
    have hd' : y.thread ∉ threadsOf ys ∧ threadsDistinct ys := hd
    by_cases hy : y.thread = t
    · have hyr : y = r := by simpa [residentOf, hy] using h
      subst hyr
      have e : setSched t n (y :: ys) = { y with sched := n } :: ys := by simp [setSched, hy]
      rw [e, List.mem_cons] at hx
      rcases hx with hx | hx
      · exact Or.inr hx
      · refine Or.inl ⟨List.mem_cons_of_mem _ hx, fun hxt => ?_⟩
        have h1 := threadsOf_mem x ys hx
        rw [hxt, ← hy] at h1
        exact hd'.1 h1
    · have h' : residentOf t ys = some r := by simpa [residentOf, hy] using h
      have e : setSched t n (y :: ys) = y :: setSched t n ys := by simp [setSched, hy]
      rw [e, List.mem_cons] at hx
      rcases hx with hx | hx
      · rw [hx]; exact Or.inl ⟨by simp, hy⟩
      · rcases ih hd'.2 h' x hx with ⟨h1, h2⟩ | h1
        · exact Or.inl ⟨List.mem_cons_of_mem _ h1, h2⟩
        · exact Or.inr h1

/-! ### A resident's tokens without a granule -/

/-- Without a granule a resident is given its whole demand or the whole budget left. -/
theorem tokensFor_share (c budget : Nat) (r : Resident) :
    tokensFor c 0 budget r = demOne c r ∨ tokensFor c 0 budget r = budget := by
  unfold tokensFor chunkFor demOne
  by_cases hd : r.decode = true
  · rw [if_pos hd, if_pos hd]
    exact Or.inl rfl
  · rw [if_neg hd, if_neg hd]
    generalize (if c = 0 then r.rem else Nat.min r.rem c) = x
    rw [if_neg (fun h : (0 : Nat) ≠ 0 ∧ _ => h.1 rfl)]
    exact natMin_cases x budget

theorem demOne_pos (c : Nat) (r : Resident) (hd : ¬r.decode = true) (hr : r.rem ≠ 0) : demOne c r ≠ 0 := by
  unfold demOne
  rw [if_neg hd]
  split
  · exact hr
  · next hc =>
    rcases natMin_cases r.rem c with h | h <;> rw [h] <;> omega

/-- Without a granule no prefill is passed over while budget is left. -/
theorem not_passedOver (c budget : Nat) (r : Resident) (h : budget ≠ 0) :
    r.passedOver (tokensFor c 0 budget r) = false := by
  unfold Resident.passedOver
  by_cases hd : r.decode = true
  · simp [hd]
  · by_cases hr : r.rem = 0
    · simp [hr]
    · have hpos : tokensFor c 0 budget r ≠ 0 := by
        rcases tokensFor_share c budget r with e | e <;> rw [e]
        · exact demOne_pos c r hd hr
        · exact h
      cases hx : (tokensFor c 0 budget r == 0)
      · simp
      · exact absurd (beq_iff_eq.mp hx) hpos

/-! ### The serving's invariant -/

/-- What `serveIn` keeps of engine `s`'s residents `rs` and the batch `b`, `ts` the threads not yet
considered: the cap `B`, no granule, the tokens within the cap and the residents' `sched`, no thread
twice, no growing run, and while budget is left every resident has its whole demand scheduled or is
not yet considered and has none. -/
structure ServeInv (c B : Nat) (ts : List Nat) (rs : List Resident) (b : Batch) : Prop where
  cap : b.cap = B
  gran : b.gran = 0
  within : b.tokens ≤ B
  sum : b.tokens = sumSched rs
  distinct : threadsDistinct rs
  grow : ∀ r ∈ rs, r.grow = 0
  plan : b.tokens < B → ∀ r ∈ rs, r.sched = demOne c r ∨ (r.thread ∈ ts ∧ r.sched = 0)

theorem ServeInv.done {c B : Nat} {ts ts' : List Nat} {rs : List Resident} {b : Batch}
    (h : ServeInv c B ts rs b) (hb : b.budget = 0) : ServeInv c B ts' rs b :=
  ⟨h.cap, h.gran, h.within, h.sum, h.distinct, h.grow, fun hlt =>
    absurd hlt (by have := h.cap; unfold Batch.budget at hb; omega)⟩

theorem ServeInv.skip {c B t : Nat} {ts : List Nat} {rs : List Resident} {b : Batch}
    (h : ServeInv c B (t :: ts) rs b) (hk : b.tokens < B → ∀ x ∈ rs, x.thread = t → x.sched = demOne c x) :
    ServeInv c B ts rs b :=
  ⟨h.cap, h.gran, h.within, h.sum, h.distinct, h.grow, fun hlt x hx => by
    rcases h.plan hlt x hx with e | ⟨e1, e2⟩
    · exact Or.inl e
    · simp only [List.mem_cons] at e1
      rcases e1 with e1 | e1
      · exact Or.inl (hk hlt x hx e1)
      · exact Or.inr ⟨e1, e2⟩⟩

theorem ServeInv.serve {c B t : Nat} {ts : List Nat} {rs : List Resident} {b : Batch} {r : Resident} {n : Nat}
    (h : ServeInv c B (t :: ts) rs b) (hsome : residentOf t rs = some r) (hs : r.sched = 0)
    (hn : n ≤ b.budget) (hshare : n = demOne c r ∨ n = b.budget) :
    ServeInv c B ts (setSched t n rs) (b.serve r n) := by
  have hcap := h.cap
  have hsum := h.sum
  have hwithin := h.within
  unfold Batch.budget at hn hshare
  refine ⟨hcap, h.gran, ?_, ?_, ?_, ?_, ?_⟩
  · show b.tokens + n ≤ B
    omega
  · show b.tokens + n = sumSched (setSched t n rs)
    have := setSched_sum t n r rs hsome
    omega
  · show natsDistinct (threadsOf (setSched t n rs))
    rw [threadsOf_setSched]
    exact h.distinct
  · intro x hx
    rcases setSched_mem t n r rs h.distinct hsome x hx with ⟨hx, _⟩ | hx
    · exact h.grow x hx
    · rw [hx]
      exact h.grow r (residentOf_some t r rs hsome).1
  · intro hlt x hx
    have hlt' : b.tokens + n < B := hlt
    have hb : b.tokens < B := by omega
    have hnd : n = demOne c r := by
      rcases hshare with e | e
      · exact e
      · omega
    rcases setSched_mem t n r rs h.distinct hsome x hx with ⟨hx, hxt⟩ | hx
    · rcases h.plan hb x hx with e | ⟨e1, e2⟩
      · exact Or.inl e
      · simp only [List.mem_cons] at e1
        rcases e1 with e1 | e1
        · exact absurd e1 hxt
        · exact Or.inr ⟨e1, e2⟩
    · rw [hx]
      exact Or.inl hnd

/-- The serving ends with the batch full, or every resident's demand scheduled. -/
theorem ServeInv.full {c B : Nat} {rs : List Resident} {b : Batch} (h : ServeInv c B [] rs b) :
    b.tokens = B ∨ demandOf c rs < B := by
  by_cases hlt : b.tokens < B
  · right
    have hall : ∀ r ∈ rs, r.sched = demOne c r := fun r hr => by
      rcases h.plan hlt r hr with e | e
      · exact e
      · exact absurd e.1 (by simp)
    rw [← sumSched_eq_demand c rs hall, ← h.sum]
    exact hlt
  · left
    have := h.within
    omega

/-! ### The machine's serving -/

theorem getEngineState_set_residents (t n : Nat) : ∀ (l : List EngineState) (s : Nat),
    (getEngineState (setEngineState l s
      { getEngineState l s with residents := setSched t n (getEngineState l s).residents }) s).residents =
      setSched t n (getEngineState l s).residents
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | _ :: xs, s + 1 => getEngineState_set_residents t n xs s

theorem Machine.served_residents (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) :
    (getEngineState (m.served s b r n).1.engines s).residents = setSched r.thread n (getEngineState m.engines s).residents :=
  getEngineState_set_residents r.thread n m.engines s

theorem Machine.serveOne_grow0 (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (h : r.grow = 0) : m.serveOne p s b r n = ((m.served s b r n).1, (m.served s b r n).2, 0) := by
  obtain ⟨thread, rem, decode, adm, sched, grow⟩ := r
  dsimp only at h
  subst h
  rfl

theorem serveIn_full (p : Program) (s c B : Nat) : ∀ (ts : List Nat) (m : Machine) (b : Batch),
    ServeInv c B ts (getEngineState m.engines s).residents b →
    ServeInv c B [] (getEngineState (serveIn p s c none ts m b).1.engines s).residents (serveIn p s c none ts m b).2 := by
  intro ts
  induction ts with
  | nil =>
    intro m b h
    simp only [serveIn]
    exact h
  | cons t ts ih =>
    intro m b h
    simp only [serveIn]
    split
    · next hb0 => exact h.done hb0
    · next hb0 =>
      split
      · next hnone =>
        exact ih m b (h.skip (fun _ x hx hxt => absurd hxt (residentOf_none t _ hnone x hx)))
      · next r hsome =>
        obtain ⟨hrmem, hrt⟩ := residentOf_some t r _ hsome
        split
        · next hs =>
          have hs' : r.sched ≠ 0 := by simpa [lets] using hs
          refine ih m b (h.skip ?_)
          intro hlt x hx hxt
          have hxr := residentOf_unique t r _ h.distinct hsome x hx hxt
          rw [hxr] at hx ⊢
          rcases h.plan hlt r hx with e | ⟨_, e⟩
          · exact e
          · exact absurd e hs'
        · next hs =>
          have hs' : r.sched = 0 := by simpa [lets] using hs
          have hg0 : r.grow = 0 := h.grow r hrmem
          rw [h.gran]
          split
          · next hp =>
            rw [not_passedOver c _ r hb0] at hp
            exact absurd hp (by decide)
          · next hp =>
            rw [Machine.serveOne_grow0 p s m b r _ hg0]
            split
            · next h2 => simp at h2
            · next h2 =>
              apply ih
              dsimp only
              rw [Machine.served_residents, hrt]
              exact h.serve hsome hs' (tokensFor_le c 0 b.budget r hb0) (tokensFor_share c b.budget r)

theorem insertByKeys_mem (p : Program) (m : Machine) (running : List Nat) (keys : List Expr) (r : Resident)
    (k : List Nat) (x : Resident) : ∀ xs : List Resident, (x = r ∨ x ∈ xs) → x ∈ insertByKeys p m running keys r k xs := by
  intro xs
  induction xs with
  | nil =>
    intro h
    simp only [insertByKeys]
    rcases h with h | h
    · simp [h]
    · simp at h
  | cons y ys ih =>
    intro h
    simp only [insertByKeys]
    split
    · rcases h with h | h
      · simp [h]
      · exact List.mem_cons_of_mem _ h
    · simp only [List.mem_cons] at h ⊢
      rcases h with h | h | h
      · exact Or.inr (ih (Or.inl h))
      · exact Or.inl h
      · exact Or.inr (ih (Or.inr h))

theorem orderResidents_mem (p : Program) (m : Machine) (running : List Nat) (keys : List Expr) (x : Resident) :
    ∀ (rs acc : List Resident), (x ∈ acc ∨ x ∈ rs) → x ∈ orderResidents p m running keys acc rs := by
  intro rs
  induction rs with
  | nil =>
    intro acc h
    simp only [orderResidents]
    rcases h with h | h
    · exact h
    · simp at h
  | cons y ys ih =>
    intro acc h
    simp only [orderResidents]
    apply ih
    simp only [List.mem_cons] at h
    rcases h with h | h | h
    · exact Or.inl (insertByKeys_mem _ _ _ _ _ _ _ _ (Or.inr h))
    · exact Or.inl (insertByKeys_mem _ _ _ _ _ _ _ _ (Or.inl h))
    · exact Or.inr h

theorem ServeInv.start {c B : Nat} {ts : List Nat} {m : Machine} {s : Nat} (hr : PlanReady m s)
    (hts : ∀ r ∈ (getEngineState m.engines s).residents, r.thread ∈ ts) :
    ServeInv c B ts (getEngineState m.engines s).residents ⟨B, 0, 0, 0, 0, 0, false⟩ :=
  ⟨rfl, rfl, Nat.zero_le _, (sumSched_zero _ (fun r h => (hr.1 r h).1)).symm, hr.2, fun r h => (hr.1 r h).2,
    fun _ r h => Or.inr ⟨hts r h, (hr.1 r h).1⟩⟩

theorem serveOrdered_full (p : Program) (s : Nat) (m : Machine) (running : List Nat) (c B : Nat) (keys : List Expr)
    (hr : PlanReady m s) :
    ServeInv c B []
      (getEngineState (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys
        (getEngineState m.engines s).residents).1.engines s).residents
      (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys (getEngineState m.engines s).residents).2 := by
  cases keys with
  | nil =>
    simp only [serveOrdered]
    exact serveIn_full p s c B _ m _ (ServeInv.start hr (fun r h => threadsOf_mem r _ h))
  | cons k ks =>
    simp only [serveOrdered]
    exact serveIn_full p s c B _ m _ (ServeInv.start hr (fun r h =>
      threadsOf_mem r _ (orderResidents_mem p m running (k :: ks) r _ [] (Or.inr h))))

/-! ### No admission -/

theorem firstQueue_none (s : Nat) : ∀ (i : Nat) (vs : List Nat) (qs : List PoolState), (∀ v ∈ vs, v ≠ s + 1) →
    firstQueue s i vs qs = none
  | _, [], _, _ => rfl
  | _, _ :: _, [], _ => rfl
  | i, v :: vs, q :: qs, h => by
    have hv : v ≠ s + 1 := h v (by simp)
    have ih := firstQueue_none s (i + 1) vs qs (fun x hx => h x (by simp [hx]))
    simp only [firstQueue]
    split
    · rw [if_neg hv]; exact ih
    · exact ih

/-- An engine that admits no pool's queue admits no one: its `admit waiting` keeps the batch and the
engines as they are. -/
theorem admitWaiting_none (p : Program) (s c : Nat) (q : Option Expr) (g : Bool) (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1) :
    ∀ (f : Nat) (m : Machine) (b : Batch),
      (admitWaiting p s c q g f m b).2 = b ∧ (admitWaiting p s c q g f m b).1.engines = m.engines
  | 0, _, _ => ⟨rfl, rfl⟩
  | f + 1, m, b => by
    simp only [admitWaiting, firstQueue_none s 0 p.admitVia m.pools hvia]
    refine ⟨?_, ?_⟩ <;> (try split) <;> rfl

/-- The plan of an iteration whose engine admits no one, from `PlanReady` with a constant budget `B`,
no `only` on the serving and no granule: its batch is full or its residents' demand below `B`. -/
theorem plan_full (p : Program) (s c B f : Nat) (m : Machine) (running : List Nat) (keys : List Expr)
    (q : Option Expr) (g : Bool) (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1) (hr : PlanReady m s) :
    (admitWaiting p s c q g f
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys (getEngineState m.engines s).residents).1
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys (getEngineState m.engines s).residents).2).2.tokens
      = B ∨
    demandOf c (getEngineState (admitWaiting p s c q g f
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys (getEngineState m.engines s).residents).1
        (serveOrdered p s m running c none ⟨B, 0, 0, 0, 0, 0, false⟩ keys
          (getEngineState m.engines s).residents).2).1.engines s).residents < B := by
  rw [(admitWaiting_none p s c q g hvia f _ _).1, (admitWaiting_none p s c q g hvia f _ _).2]
  exact ServeInv.full (serveOrdered_full p s m running c B keys hr)

/-! ### One iteration -/

/-- Engine `s`'s records went from `old` to `new` keeping at most one record more, and that one is full
(`tokens = B`) or short of demand (`demand < B`). -/
def NewRecordsFull (B : Nat) (old new : List Iteration) : Prop :=
  new = old ∨ ∃ r, new = r :: old ∧ (r.tokens = B ∨ r.demand < B)

theorem NewRecordsFull.of_set {B : Nat} {l : List EngineState} {s : Nat} {es : EngineState} {old : List Iteration}
    (hl : (getEngineState l s).records = old)
    (he : ∃ r, es.records = r :: (getEngineState l s).records ∧ (r.tokens = B ∨ r.demand < B)) :
    NewRecordsFull B old (getEngineState (setEngineState l s es) s).records := by
  obtain ⟨r, hr, hfull⟩ := he
  rcases getEngineState_setEngineState_self l s es with h | h
  · rw [h, hr, hl]
    exact Or.inr ⟨r, rfl, hfull⟩
  · rw [h, hl]
    exact Or.inl rfl

/-- `full_or_short` for one iteration of the kernel: engine `s` (of clauses `eng`) plans an iteration
with a constant `tokens cap B`, no `only` on `advance running`, no granule, admitting no pool's queue,
from `PlanReady` (its residents have nothing scheduled, grow no pool, and no thread is twice among
them); the record it keeps, if any, has `tokens = B` or `demand < B`, and the older records stay. -/
theorem startIteration_full_or_short (p : Program) (f s : Nat) (eng : Engine) (m : Machine) (B : Nat)
    (hB : eng.budget = .num B) (hq : eng.serveOnly = none) (hg : eng.granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1) (hr : PlanReady m s) :
    NewRecordsFull B (getEngineState m.engines s).records
      (getEngineState (startIteration p f s eng m).engines s).records := by
  simp only [startIteration, hB, hq, hg, eval]
  split
  · exact Or.inl (by simp only [admitWaiting_records, serveOrdered_records])
  · split
    · exact Or.inl (by simp only [admitWaiting_records, serveOrdered_records])
    · simp only [Machine.setTimer_engines]
      apply NewRecordsFull.of_set
      · simp only [admitWaiting_records, serveOrdered_records]
      · refine ⟨_, rfl, ?_⟩
        exact plan_full p s _ B f m _ eng.order _ _ hvia hr


/-! ### Every run, given an invariant that keeps the residents ready

What is left for every run is an invariant of the machine that gives `PlanReady` whenever engine `s`
is idle (`startPass` starts only an idle engine). `FullInvariant p s J` says what `J` must satisfy: it
holds as the run starts and is kept by everything the event loop does (a settle, a timer fired with the
clock moved, an iteration started on an idle engine, the fuel running out). Given one,
`runProgram_full_or_short_of` holds for every run. -/

/-- Obligations on a machine invariant `J` that gives `PlanReady m s` whenever engine `s` is idle. -/
structure FullInvariant (p : Program) (s : Nat) (J : Machine → Prop) : Prop where
  initial : J (initial p)
  settle : ∀ f m, J m → J (settle p f m)
  fire : ∀ m t (tm : Timer) ts, m.timers = tm :: ts → J m → J (fire p { m with now := t, timers := ts } tm.wake)
  start : ∀ f i e m, getService p.stages i = .step e → (getEngineState m.engines i).busy = false → J m →
    J (startIteration p f i (getEngine p.engines e) m)
  fuel : ∀ m, J m → J { m with outOfFuel := true }
  ready : ∀ m, J m → (getEngineState m.engines s).busy = false → PlanReady m s

/-- Every record of engine `s` is full (`tokens = B`) or short of demand (`demand < B`), and `J` holds. -/
def FullAt (s B : Nat) (J : Machine → Prop) (m : Machine) : Prop :=
  (∀ r ∈ (getEngineState m.engines s).records, r.tokens = B ∨ r.demand < B) ∧ J m

theorem FullAt.of_records {s B : Nat} {J : Machine → Prop} {m m' : Machine}
    (h : (getEngineState m'.engines s).records = (getEngineState m.engines s).records) (hm : FullAt s B J m) (hJ : J m') :
    FullAt s B J m' :=
  ⟨fun r hr => hm.1 r (h ▸ hr), hJ⟩

theorem startIteration_records_ne (p : Program) (f i : Nat) (eng : Engine) (m : Machine) (j : Nat) (h : i ≠ j) :
    (getEngineState (startIteration p f i eng m).engines j).records = (getEngineState m.engines j).records := by
  simp only [startIteration]
  split
  · simp only [admitWaiting_records, serveOrdered_records]
  · split
    · simp only [admitWaiting_records, serveOrdered_records]
    · simp only [Machine.setTimer_engines]
      rw [getEngineState_setEngineState_ne _ _ _ _ h]
      simp only [admitWaiting_records, serveOrdered_records]

section Run

variable (p : Program) (s e B : Nat) (J : Machine → Prop) (hJ : FullInvariant p s J)
  (hs : getService p.stages s = .step e)
  (hstep : ∀ f m, J m → (getEngineState m.engines s).busy = false →
    NewRecordsFull B (getEngineState m.engines s).records
      (getEngineState (startIteration p f s (getEngine p.engines e) m).engines s).records)

include hJ hs hstep

theorem start_full (f i e' : Nat) (m : Machine) (hi : getService p.stages i = .step e')
    (hbusy : (getEngineState m.engines i).busy = false) (hm : FullAt s B J m) :
    FullAt s B J (settle p f (startIteration p f i (getEngine p.engines e') m)) := by
  refine ⟨?_, hJ.settle _ _ (hJ.start f i e' m hi hbusy hm.2)⟩
  intro r hr
  rw [settle_records] at hr
  by_cases his : i = s
  · subst his
    rw [hs] at hi
    cases hi
    rcases hstep f m hm.2 hbusy with h | ⟨r', h, hfull⟩
    · rw [h] at hr
      exact hm.1 r hr
    · rw [h] at hr
      simp only [List.mem_cons] at hr
      rcases hr with hr | hr
      · rw [hr]; exact hfull
      · exact hm.1 r hr
  · rw [startIteration_records_ne p f i _ m s his] at hr
    exact hm.1 r hr

theorem startPass_full (f : Nat) : ∀ (ss : List Service) (i : Nat) (tried : List Nat) (m : Machine) (a : Bool),
    (∀ k, getService ss k = getService p.stages (i + k)) → FullAt s B J m →
      FullAt s B J (startPass p f ss i tried m a).1 := by
  intro ss
  induction ss with
  | nil => intro i tried m a _ hm; exact hm
  | cons x ss ih =>
    intro i tried m a hss hm
    cases x with
    | step e' =>
      simp only [startPass]
      split
      · exact ih (i + 1) tried m a (getService_tail hss) hm
      · next hc =>
        have hbusy : (getEngineState m.engines i).busy = false := by
          cases hb : (getEngineState m.engines i).busy
          · rfl
          · simp [hb] at hc
        have hi : getService p.stages i = .step e' := by
          have h0 := hss 0
          simp only [getService, Nat.add_zero] at h0
          exact h0.symm
        have hm' := start_full p s e B J hJ hs hstep f i e' m hi hbusy hm
        split
        · exact hm'
        · exact ih (i + 1) (i :: tried) _ true (getService_tail hss) hm'
    | delay => exact ih (i + 1) tried m a (getService_tail hss) hm
    | fifo c => exact ih (i + 1) tried m a (getService_tail hss) hm

theorem startEngines_full (f n : Nat) (tried : List Nat) (m : Machine) :
    FullAt s B J m → FullAt s B J (startEngines p f n tried m) := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPass_full p s e B J hJ hs hstep _ p.stages 0 _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih
       exact ih (startPass_full p s e B J hJ hs hstep _ p.stages 0 _ _ _ (fun k => by rw [Nat.zero_add]) hm))

theorem endOfInstant_full (f : Nat) (m : Machine) (hm : FullAt s B J m) : FullAt s B J (endOfInstant p f m) := by
  simp only [endOfInstant]
  split
  · exact hm
  · exact startEngines_full p s e B J hJ hs hstep _ _ _ _ hm

omit hs hstep in
theorem settle_full (f : Nat) (m : Machine) (hm : FullAt s B J m) : FullAt s B J (settle p f m) :=
  FullAt.of_records (settle_records p f m s) hm (hJ.settle f m hm.2)

theorem loop_full (f : Nat) (m : Machine) : FullAt s B J m → FullAt s B J (loop p f m) := by
  fun_induction loop p f m <;> intro hm
  · exact ⟨hm.1, hJ.fuel _ hm.2⟩
  · exact hm
  · rename_i tm ts heq ih
    apply ih
    apply endOfInstant_full p s e B J hJ hs hstep
    apply settle_full p s B J hJ
    exact ⟨fun r hr => hm.1 r (by rw [fire_records] at hr; exact hr), hJ.fire _ _ _ _ heq hm.2⟩

/-- `full_or_short` for every run, given an invariant `J` (`FullInvariant`) and the one-iteration theorem
for engine `s` from a machine with `J` where `s` is idle (`hstep`): every record of stage `s` has
`tokens = B` or `demand < B`. (`runProgram_full_or_short_of` takes `hstep` from
`startIteration_full_or_short`; `Serq.KernelAdmitFull`, from its version for engines that admit.) -/
theorem runProgram_full_or_short_of_step (fuel : Nat) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens = B ∨ r.demand < B := by
  have h0 : FullAt s B J (initial p) := by
    refine ⟨?_, hJ.initial⟩
    intro r hr
    have he : (initial p).engines = idleEngines p.stages := by
      unfold initial; dsimp only; split <;> rfl
    rw [he, getEngineState_idleEngines_records] at hr
    cases hr
  unfold runProgram
  exact (loop_full p s e B J hJ hs hstep _ _ (endOfInstant_full p s e B J hJ hs hstep _ _
    (settle_full p s B J hJ _ _ h0))).1

end Run

/-- `full_or_short` for every run, given an invariant `J` that keeps engine `s`'s residents ready
(`FullInvariant`): every record of stage `s` (engine `e`: a constant `tokens cap B`, no `only` on
`advance running`, no granule, no pool admitted by it) has `tokens = B` or `demand < B`. -/
theorem runProgram_full_or_short_of (p : Program) (s e B : Nat) (J : Machine → Prop) (hJ : FullInvariant p s J)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hg : (getEngine p.engines e).granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1) (fuel : Nat) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens = B ∨ r.demand < B :=
  runProgram_full_or_short_of_step p s e B J hJ hs
    (fun f m h hb => startIteration_full_or_short p f s _ m B hB hq hg hvia (hJ.ready m h hb)) fuel

end Serq.Kernel
