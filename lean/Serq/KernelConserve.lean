module

public import Serq.KernelFacts
public import Serq.KernelTiledRun

/-! # Issue 14, result 6 over the kernel interpreter: causality, and KV conservation's steps

`Serq.KernelFacts` proves of every run of every program of the kernel fragment that the clock never
goes back (`loop_now_mono`) and that every answered turn was answered no earlier than it was
submitted (`runProgram_causal`: `Answer.start ≤ Answer.answered`). This module adds the first token
(issue 14, result 6: "a turn's first token is no earlier than its submission, its last no earlier
than its first"): a turn an engine gave tokens is recorded, as it is answered, with the time of its
first token (`TurnTokens.first`: the end of the iteration that gave it), and that time lies between
the turn's submission and its answer (`runProgram_first_token`), for every program and any fuel, with
no hypothesis on the program.

What the machine keeps: a session's open turn's tokens so far (`Machine.progress`, per serial) are
reset, with no first token (`first = 0`), when the turn is submitted (`exec`, `Frame.submit`); only an
iteration's end writes a first token (`fire`, `Wake.iterationEnd`, `applyTokens`), and it writes the
clock then; the answer (`Frame.answer`) copies it into the thread's `tokens` beside the answer, whose
time is the clock then. So the invariant (`Machine.firstOk`): every progress's first token is no later
than the clock, and every thread's open turn was submitted no later than the clock and no later than
its serial's first token (if any), and each of its token records has its answer, submitted no later
than the first token and answered no earlier. Every function of the machine keeps it (`*_firstOk`);
the event loop moves the clock only forward (`loop`: `Nat.max`).

A turn no engine gave a token (its runs are on `delay` or `fifo` stages, or its engine's iterations
never reached it) has no token record: its first token is absent, and only `runProgram_causal` speaks
of it. The last token's time is not recorded by the machine (a record keeps the start of the
iteration that gave it, `lastStart`); the answer, at or after the last token, is what the statement
bounds the first token by.

KV conservation (`used + cachedUnits entries ≤ cap` per pool) is proved here for its local steps only
(an admission, a growth, a release, the eviction: `admitOn_within`, `Machine.admitWaiter_within`,
`Machine.grown_within`, `giveBack_one_within`, `evictIn_within`: `evict lru` and `evict by (keys)`);
for every run with its ledger in
`Serq.KernelKv` and `Serq.KernelKvRun` (`runProgram_kv_conserved`).
-/
@[expose] public section

namespace Serq.Kernel

/-! ### Progress lists -/

theorem getProgress_setProgress : ∀ (l : List Progress) (i : Nat) (v : Progress) (j : Nat),
    getProgress (setProgress l i v) j = getProgress l j ∨ (j = i ∧ getProgress (setProgress l i v) j = v)
  | [], _, _, _ => Or.inl rfl
  | _ :: _, 0, _, 0 => Or.inr ⟨rfl, rfl⟩
  | _ :: _, 0, _, _ + 1 => Or.inl rfl
  | _ :: _, _ + 1, _, 0 => Or.inl rfl
  | _ :: xs, i + 1, v, j + 1 => by
    rcases getProgress_setProgress xs i v j with h | ⟨h1, h2⟩
    · exact Or.inl h
    · exact Or.inr ⟨by omega, h2⟩

/-- A progress replaced by one with the same first token keeps every first token. -/
theorem setProgress_first (l : List Progress) (i : Nat) (v : Progress) (hv : v.first = (getProgress l i).first)
    (j : Nat) : (getProgress (setProgress l i v) j).first = (getProgress l j).first := by
  rcases getProgress_setProgress l i v j with h | ⟨h1, h2⟩
  · rw [h]
  · rw [h2, hv, h1]

/-- A progress reset (no first token) has none. -/
theorem setProgress_first_self : ∀ (l : List Progress) (i : Nat) (v : Progress), v.first = 0 →
    (getProgress (setProgress l i v) i).first = 0
  | [], _, _, _ => rfl
  | _ :: _, 0, _, h => h
  | _ :: xs, i + 1, v, h => setProgress_first_self xs i v h

theorem getProgress_noProgress_first : ∀ (n i : Nat), (getProgress (noProgress n) i).first = 0
  | 0, _ => rfl
  | _ + 1, 0 => rfl
  | n + 1, i + 1 => getProgress_noProgress_first n i

theorem Progress.decodeToken_first (g : Progress) (t0 t1 : Nat) :
    (g.decodeToken t0 t1).first = g.first ∨ (g.decodeToken t0 t1).first = t1 := by
  unfold Progress.decodeToken
  split
  · exact Or.inr rfl
  · exact Or.inl rfl

theorem Progress.prefillToken_first (g : Progress) (t0 t1 : Nat) :
    (g.prefillToken t0 t1).first = g.first ∨ (g.prefillToken t0 t1).first = t1 := by
  unfold Progress.prefillToken
  split
  · exact Or.inr rfl
  · exact Or.inl rfl

/-- An iteration's end from `t0` to `t1` writes first tokens at `t1` only. -/
theorem applyTokens_first (t0 t1 : Nat) : ∀ (gs : List Progress) (rs : List Resident) (i : Nat),
    (getProgress (applyTokens t0 t1 gs rs).1 i).first = (getProgress gs i).first ∨
      (getProgress (applyTokens t0 t1 gs rs).1 i).first = t1
  | gs, [], i => Or.inl rfl
  | gs, r :: rs, i => by
    simp only [applyTokens]
    split
    · exact applyTokens_first t0 t1 gs rs i
    · have step : ∀ v : Progress, (v.first = (getProgress gs r.thread).first ∨ v.first = t1) →
          ((getProgress (setProgress gs r.thread v) i).first = (getProgress gs i).first ∨
            (getProgress (setProgress gs r.thread v) i).first = t1) := by
        intro v hv
        rcases getProgress_setProgress gs r.thread v i with h | ⟨h1, h2⟩
        · exact Or.inl (by rw [h])
        · rw [h2, h1]
          exact hv
      have hv : ∀ (d : Bool) (c : Prop) [Decidable c],
          ((if d = true then (getProgress gs r.thread).decodeToken t0 t1
            else if c then (getProgress gs r.thread).prefillToken t0 t1 else getProgress gs r.thread).first =
              (getProgress gs r.thread).first ∨
          (if d = true then (getProgress gs r.thread).decodeToken t0 t1
            else if c then (getProgress gs r.thread).prefillToken t0 t1 else getProgress gs r.thread).first = t1) := by
        intro d c _
        split
        · exact Progress.decodeToken_first _ _ _
        · split
          · exact Progress.prefillToken_first _ _ _
          · exact Or.inl rfl
      have hv' : ∀ (d : Bool),
          ((if d = true then (getProgress gs r.thread).decodeToken t0 t1
            else (getProgress gs r.thread).prefillToken t0 t1).first = (getProgress gs r.thread).first ∨
          (if d = true then (getProgress gs r.thread).decodeToken t0 t1
            else (getProgress gs r.thread).prefillToken t0 t1).first = t1) := by
        intro d
        split
        · exact Progress.decodeToken_first _ _ _
        · exact Progress.prefillToken_first _ _ _
      have hv'' : ∀ (d : Bool),
          ((if d = true then (getProgress gs r.thread).decodeToken t0 t1
            else getProgress gs r.thread).first = (getProgress gs r.thread).first ∨
          (if d = true then (getProgress gs r.thread).decodeToken t0 t1
            else getProgress gs r.thread).first = t1) := by
        intro d
        split
        · exact Progress.decodeToken_first _ _ _
        · exact Or.inl rfl
      split
      all_goals
        rcases applyTokens_first t0 t1 _ rs i with h | h
        · rw [h]
          apply step
          first
            | exact hv _ _
            | exact hv' _
            | exact hv'' _
            | exact Progress.decodeToken_first _ _ _
            | exact Progress.prefillToken_first _ _ _
            | exact Or.inl rfl
        · exact Or.inr h

/-! ### The invariant -/

/-- Every token record has its turn's answer, submitted no later than the first token and answered
no earlier. -/
def tokensCausal (answers : List Answer) (tokens : List TurnTokens) : Prop :=
  ∀ tk ∈ tokens, ∃ a ∈ answers, a.serial = tk.serial ∧ a.turn = tk.turn ∧ a.start ≤ tk.first ∧ tk.first ≤ a.answered

/-- A thread, against the machine's progress `ps` at clock `now`: its open turn was submitted no
later than `now`, and no later than its serial's first token if there is one; its token records are
causal. -/
def Thread.firstOk (ps : List Progress) (now : Nat) (th : Thread) : Prop :=
  th.submitted ≤ now ∧ ((getProgress ps th.serial).first ≠ 0 → th.submitted ≤ (getProgress ps th.serial).first) ∧
    tokensCausal th.answers th.tokens

/-- The machine's first tokens are no later than its clock, and every thread is `firstOk`. -/
def Machine.firstOk (m : Machine) : Prop :=
  (∀ i, (getProgress m.progress i).first ≤ m.now) ∧ ∀ th ∈ m.threads, th.firstOk m.progress m.now

theorem getThread_firstOk {ps : List Progress} {now : Nat} :
    ∀ (l : List Thread) (i : Nat), (∀ th ∈ l, th.firstOk ps now) → (getThread l i).firstOk ps now
  | [], _, _ => ⟨Nat.zero_le _, fun _ => Nat.zero_le _, fun _ h => by simp [getThread] at h⟩
  | t :: _, 0, h => h t List.mem_cons_self
  | _ :: ts, n + 1, h => getThread_firstOk ts n (fun th hm => h th (List.mem_cons_of_mem _ hm))

/-- A thread stays `firstOk` when the clock moves forward and every first token stays, is reset, or
is the new clock. -/
theorem Thread.firstOk_of {ps ps' : List Progress} {now now' : Nat} {th : Thread}
    (hn : now ≤ now') (hp : ∀ i, (getProgress ps' i).first = (getProgress ps i).first ∨
      (getProgress ps' i).first = 0 ∨ (getProgress ps' i).first = now')
    (h : th.firstOk ps now) : th.firstOk ps' now' := by
  refine ⟨Nat.le_trans h.1 hn, fun h0 => ?_, h.2.2⟩
  rcases hp th.serial with e | e | e
  · rw [e] at h0 ⊢; exact h.2.1 h0
  · exact absurd e h0
  · rw [e]; exact Nat.le_trans h.1 hn

/-- The frame: a machine with the threads of a `firstOk` one, a clock no earlier, every first token
kept, reset, or the new clock, is `firstOk`. -/
theorem Machine.firstOk_of {m M : Machine} (hm : m.firstOk) (ht : M.threads = m.threads) (hn : m.now ≤ M.now)
    (hp : ∀ i, (getProgress M.progress i).first = (getProgress m.progress i).first ∨
      (getProgress M.progress i).first = 0 ∨ (getProgress M.progress i).first = M.now) : M.firstOk := by
  refine ⟨fun i => ?_, fun th hth => ?_⟩
  · rcases hp i with e | e | e
    · rw [e]; exact Nat.le_trans (hm.1 i) hn
    · rw [e]; exact Nat.zero_le _
    · rw [e]; exact Nat.le_refl _
  · rw [ht] at hth
    exact Thread.firstOk_of hn hp (hm.2 th hth)

theorem Machine.firstOk_same {m M : Machine} (hm : m.firstOk) (ht : M.threads = m.threads) (hn : M.now = m.now)
    (hp : ∀ i, (getProgress M.progress i).first = (getProgress m.progress i).first) : M.firstOk :=
  Machine.firstOk_of hm ht (by rw [hn]; exact Nat.le_refl _) (fun i => Or.inl (hp i))

theorem Thread.firstOk_same {ps ps' : List Progress} {now now' : Nat} {th : Thread} (hn : now' = now)
    (hp : ∀ i, (getProgress ps' i).first = (getProgress ps i).first) (h : th.firstOk ps now) : th.firstOk ps' now' :=
  Thread.firstOk_of (by rw [hn]; exact Nat.le_refl _) (fun i => Or.inl (hp i)) h

theorem Machine.firstOk_put {m : Machine} {th : Thread} (hm : m.firstOk) (ht : th.firstOk m.progress m.now) :
    (m.put th).firstOk := by
  refine ⟨hm.1, fun x hx => ?_⟩
  rcases mem_setThread _ _ _ _ hx with hx | rfl
  · exact hm.2 x hx
  · exact ht

theorem Machine.firstOk_get {m : Machine} (hm : m.firstOk) (t : Nat) : (getThread m.threads t).firstOk m.progress m.now :=
  getThread_firstOk _ _ hm.2

/-! ### A thread's run -/

@[simp] theorem Machine.leaseTimer_progress (m : Machine) (s : Nat) (d : Option Nat) :
    (m.leaseTimer s d).progress = m.progress := by
  cases d <;> rfl

@[simp] theorem Machine.addJob_progress (p : Program) (m : Machine) (s t w : Nat) :
    (m.addJob p s t w).progress = m.progress := by
  simp only [Machine.addJob]
  split <;> (try split) <;> rfl

theorem Machine.leaseTimer_firstOk (m : Machine) (s : Nat) (d : Option Nat) (hm : m.firstOk) :
    (m.leaseTimer s d).firstOk :=
  Machine.firstOk_same hm (by simp) (by simp) (by simp)

theorem Machine.addJob_firstOk (p : Program) (m : Machine) (s t w : Nat) (hm : m.firstOk) :
    (m.addJob p s t w).firstOk :=
  Machine.firstOk_same hm (by simp) (by simp) (by simp)

theorem Machine.firstOk_reset {m : Machine} (i : Nat) (hm : m.firstOk) :
    Machine.firstOk { m with progress := setProgress m.progress i ⟨0, 0, 0, 0, 0, 0, false⟩ } := by
  refine Machine.firstOk_of hm rfl (Nat.le_refl _) (fun j => ?_)
  rcases getProgress_setProgress m.progress i ⟨0, 0, 0, 0, 0, 0, false⟩ j with h | ⟨_, h⟩
  · exact Or.inl (by rw [h])
  · exact Or.inr (Or.inl (by rw [h]))

theorem Thread.firstOk_submit {m : Machine} {th : Thread} (k : List Frame) (ht : th.firstOk m.progress m.now) :
    Thread.firstOk (setProgress m.progress th.serial ⟨0, 0, 0, 0, 0, 0, false⟩) m.now
      { th with k := k, submitted := m.now, inTurn := true } :=
  ⟨Nat.le_refl _, fun h0 => absurd (setProgress_first_self m.progress th.serial _ rfl) h0, ht.2.2⟩

/-- The turn's answer: the answer, and the token record if an engine gave the turn a token. -/
theorem Thread.firstOk_answer {ps : List Progress} {now : Nat} {th th' : Thread}
    (hn : (getProgress ps th.serial).first ≤ now) (ht : th.firstOk ps now)
    (hs : th'.submitted = th.submitted) (hse : th'.serial = th.serial)
    (ha : th'.answers = ⟨th.serial, th.turns, th.submitted, now⟩ :: th.answers)
    (htk : th'.tokens = if (getProgress ps th.serial).first = 0 then th.tokens
        else ⟨th.serial, th.turns, (getProgress ps th.serial).first, (getProgress ps th.serial).firstStart,
          (getProgress ps th.serial).lastStart, (getProgress ps th.serial).preempted,
          (getProgress ps th.serial).cached⟩ :: th.tokens) :
    th'.firstOk ps now := by
  refine ⟨hs ▸ ht.1, ?_, ?_⟩
  · rw [hs, hse]; exact ht.2.1
  intro tk htk'
  rw [htk] at htk'
  rw [ha]
  split at htk'
  · obtain ⟨a, ha, h⟩ := ht.2.2 tk htk'
    exact ⟨a, List.mem_cons_of_mem _ ha, h⟩
  · rename_i h0
    simp only [List.mem_cons] at htk'
    rcases htk' with rfl | htk'
    · exact ⟨_, List.mem_cons_self, rfl, rfl, ht.2.1 h0, hn⟩
    · obtain ⟨a, ha, h⟩ := ht.2.2 tk htk'
      exact ⟨a, List.mem_cons_of_mem _ ha, h⟩

theorem exec_firstOk (p : Program) (f : Nat) (m : Machine) (th : Thread) :
    m.firstOk → th.firstOk m.progress m.now → (exec p f m th).firstOk := by
  fun_induction exec p f m th <;> intro hm ht
  all_goals first
    | exact Machine.firstOk_put hm ht
    | exact Machine.firstOk_put hm (Thread.firstOk_same rfl (fun _ => rfl) ht)
    | exact Machine.firstOk_put (Machine.addJob_firstOk p _ _ _ _ hm)
        (Thread.firstOk_same (Machine.addJob_now _ _ _ _ _) (fun _ => by rw [Machine.addJob_progress]) ht)
    | (rename_i ih; exact ih hm ht)
    | (rename_i ih; exact ih (Machine.firstOk_reset _ hm) (Thread.firstOk_submit _ ht))
    | (rename_i ih; exact ih hm (Thread.firstOk_answer (hm.1 _) ht rfl rfl rfl rfl))
    | (rename_i ih; exact ih (Machine.leaseTimer_firstOk _ _ _ hm)
        (Thread.firstOk_same (Machine.leaseTimer_now _ _ _) (fun _ => by rw [Machine.leaseTimer_progress]) ht))
    | (rename_i ih; exact ih (Machine.firstOk_put hm (Thread.firstOk_same rfl (fun _ => rfl) ht))
        (Thread.firstOk_same rfl (fun _ => rfl) ht))

/-! ### Settling an instant -/

theorem runReady_firstOk (p : Program) (f : Nat) (m : Machine) : m.firstOk → (runReady p f m).firstOk := by
  fun_induction runReady p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (exec_firstOk p _ _ _ hm (Machine.firstOk_get hm _))

theorem Machine.admitWaiter_firstOk (p : Program) (m : Machine) (st : List Nat) (i j : Nat) :
    m.firstOk → (m.admitWaiter p st i j).firstOk := by
  intro hm
  simp only [Machine.admitWaiter]
  have hp : ∀ (c : Bool) (k : Nat) (v : Progress), v.first = (getProgress m.progress k).first → ∀ x,
      (getProgress (if c = true then setProgress m.progress k v else m.progress) x).first =
        (getProgress m.progress x).first := by
    intro c k v hv x
    split
    · exact setProgress_first _ _ _ hv x
    · rfl
  exact Machine.firstOk_put (Machine.firstOk_same hm rfl rfl (hp _ _ _ rfl))
    (Thread.firstOk_same rfl (hp _ _ _ rfl) (Machine.firstOk_get hm _))

theorem retryQueue_firstOk (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    m.firstOk → (retryQueue p f m i b).1.firstOk := by
  fun_induction retryQueue p f m i b <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (Machine.admitWaiter_firstOk p _ _ _ _ hm))

theorem Machine.grownReq_firstOk (p : Program) (m : Machine) (t i want req : Nat) (h : Held) :
    m.firstOk → (m.grownReq p t i want req h).firstOk := by
  intro hm
  simp only [Machine.grownReq]
  exact Machine.firstOk_put hm (Thread.firstOk_same rfl (fun _ => rfl) (Machine.firstOk_get hm _))

theorem retryGrowers_firstOk (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    m.firstOk → (retryGrowers p f m i b).1.firstOk
  | 0, m, i, b, hm => hm
  | f + 1, m, i, b, hm => by
    simp only [retryGrowers]
    split
    · exact hm
    · next x hx =>
      split
      · exact hm
      · next hh hpart =>
        split
        · exact retryGrowers_firstOk p f _ i true
            (Machine.grownReq_firstOk p m x.thread i (roundUp (getAt p.blocks i) x.req) x.req hh hm)
        · exact hm

theorem retryPool_firstOk (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    m.firstOk → (retryPool p f m i b).1.firstOk := by
  intro hm
  simp only [retryPool]
  split
  · exact retryQueue_firstOk p f _ _ _ (retryGrowers_firstOk p f _ _ _ hm)
  · exact retryGrowers_firstOk p f _ _ _ hm

theorem retryPools_firstOk (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    m.firstOk → (retryPools p f n i m b).1.firstOk := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPool_firstOk p f _ _ _ hm)

theorem settle_firstOk (p : Program) (f : Nat) (m : Machine) : m.firstOk → (settle p f m).firstOk := by
  fun_induction settle p f m <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPools_firstOk p _ _ _ _ _ (runReady_firstOk p _ _ hm))
  · exact retryPools_firstOk p _ _ _ _ _ (runReady_firstOk p _ _ hm)

/-! ### An engine's iteration -/

theorem Machine.served_firstOk (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) (hm : m.firstOk) :
    (m.served s b r n).1.firstOk := hm

theorem Machine.grown_firstOk (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hm : m.firstOk) :
    (m.grown p t i want h).firstOk :=
  Machine.firstOk_put (m := { m with pools := _ }) hm (Machine.firstOk_get hm t)

theorem Machine.preempt_firstOk (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (hm : m.firstOk) :
    (m.preempt p s i t b).1.firstOk := by
  simp only [Machine.preempt]
  split
  · exact hm
  · exact Machine.firstOk_put (Machine.firstOk_same hm rfl rfl (setProgress_first _ _ _ rfl))
      (Thread.firstOk_same rfl (setProgress_first _ _ _ rfl) (Machine.firstOk_get hm t))

theorem growPreempting_firstOk (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    m.firstOk → (growPreempting p s i want t f m b).1.firstOk := by
  fun_induction growPreempting p s i want t f m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.grown_firstOk p _ _ _ _ _ hm
    | exact Machine.preempt_firstOk p _ _ _ _ _ hm
    | (rename_i ih; exact ih (Machine.preempt_firstOk p _ _ _ _ _ hm))

theorem firstOk_fst3 {x : Machine × Batch} (c : Nat) (h : x.1.firstOk) :
    ((x.1, x.2, c) : Machine × Batch × Nat).1.firstOk := h

theorem Machine.serveOne_firstOk (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (hm : m.firstOk) : (m.serveOne p s b r n).1.firstOk := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact hm
    | exact firstOk_fst3 0 (Machine.served_firstOk _ _ _ _ _ hm)
    | exact firstOk_fst3 0 (Machine.served_firstOk _ _ _ _ _ (Machine.grown_firstOk p _ _ _ _ _ hm))
    | exact firstOk_fst3 0 (Machine.served_firstOk _ _ _ _ _ (growPreempting_firstOk p _ _ _ _ _ _ _ hm))
    | exact growPreempting_firstOk p _ _ _ _ _ _ _ hm

theorem serveIn_firstOk (p : Program) (s c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) :
    m.firstOk → (serveIn p s c q ts m b).1.firstOk := by
  fun_induction serveIn p s c q ts m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.serveOne_firstOk p _ _ _ _ _ hm
    | (rename_i ih; exact ih hm)
    | (rename_i ih; exact ih (Machine.serveOne_firstOk p _ _ _ _ _ hm))

theorem serveOrdered_firstOk (p : Program) (s : Nat) (m : Machine) (running : List Nat) (c : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) (hm : m.firstOk) :
    (serveOrdered p s m running c q b keys rs).1.firstOk := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_firstOk p _ _ _ _ _ _ hm

theorem admitOne_firstOk (p : Program) (f s c i j : Nat) (q : Option Expr) (m : Machine) (b : Batch) :
    m.firstOk → (admitOne p f s c i j q m b).1.firstOk := by
  intro hm
  have h1 := Machine.admitWaiter_firstOk p m (admissionStage c b.budget) i j hm
  have h2 := exec_firstOk p f (m.admitWaiter p (admissionStage c b.budget) i j)
    (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread) h1
    (Machine.firstOk_get h1 _)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact Machine.serveOne_firstOk p _ _ _ _ _ h2

theorem admitWaiting_firstOk (p : Program) (s c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine)
    (b : Batch) : m.firstOk → (admitWaiting p s c q g f m b).1.firstOk := by
  fun_induction admitWaiting p s c q g f m b <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (admitOne_firstOk p _ _ _ _ _ _ _ _ hm))

theorem startIteration_firstOk (p : Program) (f s : Nat) (eng : Engine) (m : Machine) :
    m.firstOk → (startIteration p f s eng m).firstOk := by
  intro hm
  simp only [startIteration]
  repeat' split
  all_goals first
    | exact serveOrdered_firstOk p _ _ _ _ _ _ _ _ hm
    | exact admitWaiting_firstOk p _ _ _ _ _ _ _ (serveOrdered_firstOk p _ _ _ _ _ _ _ _ hm)

theorem startPass_firstOk (p : Program) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    m.firstOk → (startPass p f ss s tried m a).1.firstOk := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_firstOk p _ _ (startIteration_firstOk p _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_firstOk p _ _ (startIteration_firstOk p _ _ _ _ hm)))

theorem startEngines_firstOk (p : Program) (f n : Nat) (tried : List Nat) (m : Machine) :
    m.firstOk → (startEngines p f n tried m).firstOk := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPass_firstOk p _ _ _ _ _ _ hm
    | (rename_i ih; exact ih (startPass_firstOk p _ _ _ _ _ _ hm))

theorem endOfInstant_firstOk (p : Program) (f : Nat) (m : Machine) : m.firstOk → (endOfInstant p f m).firstOk := by
  intro hm
  simp only [endOfInstant]
  split
  · exact hm
  · exact startEngines_firstOk p _ _ _ _ hm

/-! ### Events -/

theorem Machine.advanceHolds_firstOk (m : Machine) (rs : List Resident) : m.firstOk → (m.advanceHolds rs).firstOk := by
  fun_induction m.advanceHolds rs <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | (rename_i ih; exact ih (Machine.firstOk_put hm (Machine.firstOk_get hm _)))

theorem fire_firstOk (p : Program) (m : Machine) (w : Wake) : m.firstOk → (fire p m w).firstOk := by
  intro hm
  cases w with
  | resume t => exact hm
  | arrival s =>
    simp only [fire]
    split <;> exact hm
  | fifoDone s t =>
    simp only [fire]
    split <;> exact hm
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact hm
    · exact Machine.firstOk_put (m := { m with pools := _ }) hm (Machine.firstOk_get hm t)
  | iterationEnd s =>
    simp only [fire]
    have h1 := Machine.advanceHolds_firstOk m (getEngineState m.engines s).residents hm
    refine Machine.firstOk_of h1 rfl (Nat.le_refl _) (fun i => ?_)
    rcases applyTokens_first (getEngineState m.engines s).start m.now
      (m.advanceHolds (getEngineState m.engines s).residents).progress (getEngineState m.engines s).residents i with e | e
    · exact Or.inl e
    · refine Or.inr (Or.inr ?_)
      rw [e]
      exact (Machine.advanceHolds_now m _).symm

theorem loop_firstOk (p : Program) (f : Nat) (m : Machine) : m.firstOk → (loop p f m).firstOk := by
  fun_induction loop p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    apply ih
    apply endOfInstant_firstOk
    apply settle_firstOk
    apply fire_firstOk
    exact Machine.firstOk_of hm rfl (Nat.le_max_left _ _) (fun _ => Or.inl rfl)

theorem initial_progress (p : Program) : (initial p).progress = noProgress p.sessions := by
  unfold initial
  dsimp only
  split <;> rfl

theorem arrivals_firstOk (p : Program) (ps : List Progress) :
    ∀ (n s : Nat), ∀ th ∈ arrivals p n s, th.firstOk ps 0
  | 0, _, th, h => by simp [arrivals] at h
  | n + 1, s, th, h => by
    simp only [arrivals, List.mem_cons] at h
    rcases h with rfl | h
    · exact ⟨Nat.le_refl _, fun _ => Nat.zero_le _, fun _ h => by simp [arrive] at h⟩
    · exact arrivals_firstOk p ps n (s + 1) th h

theorem initial_firstOk (p : Program) : (initial p).firstOk := by
  refine ⟨fun i => ?_, fun th hth => ?_⟩
  · rw [initial_progress, getProgress_noProgress_first]
    exact Nat.zero_le _
  · rw [(initial_threads_now p).1] at hth
    rw [(initial_threads_now p).2]
    exact arrivals_firstOk p _ _ _ th hth

theorem runProgram_firstOk (p : Program) (fuel : Nat) : (runProgram p fuel).firstOk := by
  unfold runProgram
  exact loop_firstOk p _ _ (endOfInstant_firstOk p _ _ (settle_firstOk p _ _ (initial_firstOk p)))

/-- Causality of the first token (issue 14, result 6), for every program of the kernel fragment and
any fuel: every token record of a session (a turn an engine gave a token) has the turn's answer (same
serial and turn number), submitted no later than the first token and answered no earlier (so the last
token, given by the answer's time, is no earlier than the first either). -/
theorem runProgram_first_token (p : Program) (fuel : Nat) :
    ∀ th ∈ (runProgram p fuel).threads, ∀ tk ∈ th.tokens, ∃ a ∈ th.answers,
      a.serial = tk.serial ∧ a.turn = tk.turn ∧ a.start ≤ tk.first ∧ tk.first ≤ a.answered :=
  fun th hth => ((runProgram_firstOk p fuel).2 th hth).2.2

/-- Result 6's causality over the kernel interpreter, whole: every answered turn is answered no
earlier than it was submitted (`runProgram_causal`), and a turn with a first token has it between the
two (`runProgram_first_token`). -/
theorem runProgram_causality (p : Program) (fuel : Nat) :
    ∀ th ∈ (runProgram p fuel).threads,
      (∀ a ∈ th.answers, a.start ≤ a.answered) ∧
      ∀ tk ∈ th.tokens, ∃ a ∈ th.answers, a.serial = tk.serial ∧ a.turn = tk.turn ∧
        a.start ≤ tk.first ∧ tk.first ≤ a.answered :=
  fun th hth => ⟨runProgram_causal p fuel th hth, runProgram_first_token p fuel th hth⟩

/-! ### KV conservation: the steps that keep a pool within its cap

Over the kernel interpreter, a pool `i`'s state keeps the units its holders hold (`used`) and its cached
entries (`entries`); result 6's KV conservation is `used + cachedUnits entries ≤ cap` at every machine.
Proved here are its local steps: an admission or a growth whose allocation fits the cap
(`used ≤ cap` after it, what `fits` and `growPreempting` check) leaves the pool within the cap once its
cache has given way, under `evict lru` (`makeRoom_within`) or `evict by (keys)` (`evictRanked_within`:
the ranked places cover every entry, `rankEntries_covers`): `evictIn_within`, `Machine.grown_within`;
and `evict lru` never adds to the cache (`makeRoom_cached_le`). The global part, the ledger that every
release needs and the run, is `Serq.KernelKv` and `Serq.KernelKvRun` (`runProgram_kv_conserved`).
-/

/-- A whole number of blocks covering `x`: at least `x`. -/
theorem le_roundUp (b x : Nat) : x ≤ roundUp b x := by
  unfold roundUp
  split
  · exact Nat.le_refl _
  · rename_i hb
    have h1 := Nat.div_add_mod (x + b - 1) b
    have h2 := Nat.mod_lt (x + b - 1) (Nat.pos_of_ne_zero hb)
    rw [Nat.mul_comm] at h1
    generalize (x + b - 1) / b * b = P at h1 ⊢
    generalize (x + b - 1) % b = r at h1 h2
    omega

/-- What a block-wise eviction takes of an entry of `u` units (`Nat.min u R`, R covering the excess
`over`) leaves it, when something is left, short of the excess. -/
theorem sub_min_add_le (u R over : Nat) (hR : over ≤ R) (hz : ¬u - Nat.min u R = 0) : u - Nat.min u R + over ≤ u := by
  have e : Nat.min u R = if u ≤ R then u else R := rfl
  rw [e] at hz ⊢
  by_cases hle : u ≤ R <;> simp only [hle, ↓reduceIte] at hz ⊢ <;> omega

/-- `evict lru` leaves the allocations and the cache within the cap when the allocations alone are. -/
theorem makeRoom_within (cap b used : Nat) : ∀ (es : List Entry), used ≤ cap →
    used + cachedUnits (makeRoom cap b used es) ≤ cap
  | [], h => by simp [makeRoom, cachedUnits]; exact h
  | e :: es, h => by
    have hr := le_roundUp b (used + e.units + cachedUnits es - cap)
    have hs := sub_min_add_le e.units (roundUp b (used + e.units + cachedUnits es - cap))
      (used + e.units + cachedUnits es - cap) hr
    simp only [makeRoom]
    repeat' split
    all_goals first
      | exact makeRoom_within cap b used es h
      | (simp only [cachedUnits]; omega)

/-- `evict lru` never adds to the cache. -/
theorem makeRoom_cached_le (cap b used : Nat) : ∀ (es : List Entry),
    cachedUnits (makeRoom cap b used es) ≤ cachedUnits es
  | [] => Nat.le_refl _
  | e :: es => by
    have ih := makeRoom_cached_le cap b used es
    simp only [makeRoom]
    repeat' split
    all_goals first
      | exact Nat.le_refl _
      | (simp only [cachedUnits]; omega)

/-! #### `evict by (keys)`: the ranked places cover every entry

`rankEntries` ranks every place of the entries (`rankEntries_covers`: `insertRanked` keeps what it is
given and adds its own, `mem_insertRanked_self`, `mem_insertRanked_of_mem`); evicting at a place takes
at least the excess (the whole blocks covering it, or the whole entry) or empties that place
(`evictAt_takes`), never adds to the cache (`cachedUnits_evictAt_le`) nor to another place
(`unitsAt_evictAt_le`); so walking places that cover every entry leaves the total within the cap or
every entry empty (`evictRanked_within`), and `dropEmpty` keeps the cache's units. -/

/-- The units of the entry at place `j` (0 past the end). -/
def unitsAt : Nat → List Entry → Nat
  | _, [] => 0
  | 0, e :: _ => e.units
  | j + 1, _ :: es => unitsAt j es

theorem length_evictAt (b over : Nat) : ∀ (j : Nat) (es : List Entry), (evictAt b over j es).length = es.length
  | 0, [] => rfl
  | _ + 1, [] => rfl
  | 0, _ :: _ => rfl
  | j + 1, _ :: es => by simp only [evictAt, List.length_cons, length_evictAt b over j es]

theorem unitsAt_evictAt_le (b over : Nat) : ∀ (j k : Nat) (es : List Entry), unitsAt k (evictAt b over j es) ≤ unitsAt k es
  | 0, _, [] => by simp only [evictAt]; exact Nat.le_refl _
  | _ + 1, _, [] => by simp only [evictAt]; exact Nat.le_refl _
  | 0, 0, _ :: _ => by simp only [evictAt, unitsAt]; omega
  | 0, _ + 1, _ :: _ => Nat.le_refl _
  | _ + 1, 0, _ :: _ => Nat.le_refl _
  | j + 1, k + 1, _ :: es => unitsAt_evictAt_le b over j k es

/-- Evicting at a place never adds to the cache. -/
theorem cachedUnits_evictAt_le (b over : Nat) : ∀ (j : Nat) (es : List Entry), cachedUnits (evictAt b over j es) ≤ cachedUnits es
  | 0, [] => by simp only [evictAt]; exact Nat.le_refl _
  | _ + 1, [] => by simp only [evictAt]; exact Nat.le_refl _
  | 0, _ :: _ => by simp only [evictAt, cachedUnits]; omega
  | j + 1, e :: es => by
    have := cachedUnits_evictAt_le b over j es
    simp only [evictAt, cachedUnits]; omega

/-- Evicting at a place of the list either takes at least the excess `over` or empties that place. -/
theorem evictAt_takes (b over : Nat) : ∀ (j : Nat) (es : List Entry), j < es.length →
    cachedUnits (evictAt b over j es) + over ≤ cachedUnits es ∨ unitsAt j (evictAt b over j es) = 0
  | _, [], h => absurd h (Nat.not_lt_zero _)
  | 0, e :: es, _ => by
    simp only [evictAt, cachedUnits, unitsAt]
    by_cases hb : b = 0
    · simp only [hb, ↓reduceIte]; omega
    · simp only [hb, ↓reduceIte]
      by_cases hz : e.units - Nat.min e.units (roundUp b over) = 0
      · exact Or.inr hz
      · have := sub_min_add_le e.units (roundUp b over) over (le_roundUp b over) hz
        omega
  | j + 1, e :: es, h => by
    have h' : j < es.length := by simp only [List.length_cons] at h; omega
    rcases evictAt_takes b over j es h' with h1 | h1
    · left; simp only [evictAt, cachedUnits]; omega
    · right; simpa only [evictAt, unitsAt] using h1

theorem cachedUnits_eq_zero : ∀ (es : List Entry), (∀ j, j < es.length → unitsAt j es = 0) → cachedUnits es = 0
  | [], _ => rfl
  | e :: es, h => by
    have h0 := h 0 (by simp)
    have ht := cachedUnits_eq_zero es (fun j hj => h (j + 1) (by simp only [List.length_cons]; omega))
    simp only [unitsAt] at h0
    simp only [cachedUnits]; omega

theorem evictRanked_fits (cap b used : Nat) (rs : List Ranked) (es : List Entry) (h : used + cachedUnits es ≤ cap) :
    evictRanked cap b used rs es = es := by
  cases rs with
  | nil => rfl
  | cons r rs => simp only [evictRanked, h, ↓reduceIte]

/-- Walking ranked places that cover every place of the entries not yet empty, `evict by` leaves the
allocations and the cache within the cap when the allocations alone are. -/
theorem evictRanked_within (cap b used : Nat) (hu : used ≤ cap) : ∀ (rs : List Ranked) (es : List Entry),
    (∀ j, j < es.length → (∃ r, r ∈ rs ∧ r.place = j) ∨ unitsAt j es = 0) →
    used + cachedUnits (evictRanked cap b used rs es) ≤ cap
  | [], es, hc => by
    have : cachedUnits es = 0 := cachedUnits_eq_zero es (fun j hj => by
      rcases hc j hj with ⟨r, hr, _⟩ | h0
      · cases hr
      · exact h0)
    simp only [evictRanked]; omega
  | r :: rs, es, hc => by
    simp only [evictRanked]
    split
    · assumption
    · rename_i hover
      by_cases hfit : used + cachedUnits (evictAt b (used + cachedUnits es - cap) r.place es) ≤ cap
      · rw [evictRanked_fits cap b used rs _ hfit]; exact hfit
      · apply evictRanked_within cap b used hu rs
        intro j hj
        rw [length_evictAt] at hj
        by_cases hjr : j = r.place
        · right
          subst hjr
          rcases evictAt_takes b (used + cachedUnits es - cap) r.place es hj with h1 | h1
          · omega
          · exact h1
        · rcases hc j hj with ⟨r', hr', hp⟩ | h0
          · rcases List.mem_cons.mp hr' with e | e
            · subst e; exact absurd hp.symm hjr
            · exact Or.inl ⟨r', e, hp⟩
          · right
            have := unitsAt_evictAt_le b (used + cachedUnits es - cap) r.place j es
            omega

theorem mem_insertRanked_self (r : Ranked) : ∀ (acc : List Ranked), r ∈ insertRanked r acc
  | [] => List.mem_singleton_self r
  | x :: xs => by
    simp only [insertRanked]
    split
    · exact List.mem_cons_self
    · exact List.mem_cons_of_mem _ (mem_insertRanked_self r xs)

theorem mem_insertRanked_of_mem (r : Ranked) {y : Ranked} : ∀ (acc : List Ranked), y ∈ acc → y ∈ insertRanked r acc
  | [], h => absurd h List.not_mem_nil
  | x :: xs, h => by
    simp only [insertRanked]
    split
    · exact List.mem_cons_of_mem _ h
    · rcases List.mem_cons.mp h with e | e
      · subst e; exact List.mem_cons_self
      · exact List.mem_cons_of_mem _ (mem_insertRanked_of_mem r xs e)

/-- `rankEntries` ranks every place of the entries (from `j`) beside those it was given. -/
theorem rankEntries_covers (threads : List Thread) (pools : List PoolState) (now i : Nat) (keys : List Expr) :
    ∀ (es : List Entry) (j : Nat) (acc : List Ranked) (k : Nat),
      ((j ≤ k ∧ k < j + es.length) ∨ ∃ r, r ∈ acc ∧ r.place = k) →
      ∃ r, r ∈ rankEntries threads pools now i keys j es acc ∧ r.place = k
  | [], j, acc, k, h => by
    simp only [rankEntries]
    rcases h with ⟨h1, h2⟩ | h
    · simp only [List.length_nil] at h2; omega
    · exact h
  | e :: es, j, acc, k, h => by
    simp only [rankEntries]
    apply rankEntries_covers threads pools now i keys es (j + 1) _ k
    by_cases hk : k = j
    · subst hk; exact Or.inr ⟨_, mem_insertRanked_self _ acc, rfl⟩
    · rcases h with ⟨h1, h2⟩ | ⟨r, hr, hp⟩
      · left; simp only [List.length_cons] at h2; omega
      · exact Or.inr ⟨r, mem_insertRanked_of_mem _ acc hr, hp⟩

theorem cachedUnits_dropEmpty : ∀ (es : List Entry), cachedUnits (dropEmpty es) = cachedUnits es
  | [] => rfl
  | e :: es => by
    simp only [dropEmpty]
    split
    · simp only [cachedUnits, cachedUnits_dropEmpty es]; omega
    · simp only [cachedUnits, cachedUnits_dropEmpty es]

/-- Every pool, `evict lru` (`makeRoom_within`) or `evict by (keys)` (`evictRanked_within`), is within
its cap after its cache gives way, when its allocations are. -/
theorem evictIn_within (p : Program) (threads : List Thread) (pools : List PoolState) (now i used : Nat)
    (es : List Entry) (h : used ≤ getAt p.caps i) :
    used + cachedUnits (evictIn p threads pools now i used es) ≤ getAt p.caps i := by
  unfold evictIn
  split
  · exact makeRoom_within _ _ _ es h
  · split
    · assumption
    · rw [cachedUnits_dropEmpty]
      exact evictRanked_within _ _ _ h _ es (fun j hj =>
        Or.inl (rankEntries_covers threads pools now i _ es 0 [] j (Or.inl ⟨Nat.zero_le _, by omega⟩)))

theorem getPool_setPool_self : ∀ (ps : List PoolState) (i : Nat) (v : PoolState),
    getPool (setPool ps i v) i = v ∨ getPool (setPool ps i v) i = ⟨0, 0, [], []⟩
  | [], _, _ => Or.inr rfl
  | _ :: _, 0, _ => Or.inl rfl
  | _ :: xs, i + 1, v => getPool_setPool_self xs i v

/-- A growth that fits (the check `Machine.serveOne` and `growPreempting` make before `Machine.grown`)
leaves its pool within the cap. -/
theorem Machine.grown_within (p : Program) (m : Machine) (t i want : Nat) (h : Held)
    (hfit : (getPool m.pools i).used + (want - h.units) ≤ getAt p.caps i) :
    (getPool (m.grown p t i want h).pools i).used + cachedUnits (getPool (m.grown p t i want h).pools i).entries ≤
      getAt p.caps i := by
  simp only [Machine.grown, Machine.put]
  rcases getPool_setPool_self m.pools i { getPool m.pools i with
      used := (getPool m.pools i).used + (want - h.units),
      entries := evictIn p m.threads m.pools m.now i ((getPool m.pools i).used + (want - h.units))
        (getPool m.pools i).entries } with e | e
  · rw [e]
    exact evictIn_within p _ _ _ i _ _ hfit
  · rw [e]
    simp [cachedUnits]

theorem getPool_setPool_ne : ∀ (ps : List PoolState) (i j : Nat) (v : PoolState), i ≠ j →
    getPool (setPool ps i v) j = getPool ps j
  | [], _, _, _, _ => rfl
  | _ :: _, 0, 0, _, h => absurd rfl h
  | _ :: _, 0, _ + 1, _, _ => rfl
  | _ :: _, _ + 1, 0, _, _ => rfl
  | _ :: xs, i + 1, j + 1, v, h => getPool_setPool_ne xs i j v (fun e => h (by rw [e]))

theorem cachedUnits_markDead (serial : Nat) : ∀ (es : List Entry), cachedUnits (markDead serial es) = cachedUnits es
  | [] => rfl
  | e :: es => by
    simp only [markDead]
    split
    · rfl
    · simp only [cachedUnits, cachedUnits_markDead serial es]

theorem cachedUnits_appendEntry (v : Entry) : ∀ (es : List Entry), cachedUnits (appendEntry es v) = cachedUnits es + v.units
  | [] => by simp [appendEntry, cachedUnits]
  | e :: es => by
    simp only [appendEntry, cachedUnits, cachedUnits_appendEntry v es]
    omega

/-- A release caches at most what it gives back. -/
theorem cachedUnits_addEntry (serial units : Nat) (es : List Entry) :
    cachedUnits (addEntry serial units es) ≤ cachedUnits es + units := by
  unfold addEntry
  split
  · omega
  · rw [cachedUnits_appendEntry, cachedUnits_markDead]
    exact Nat.le_refl _

theorem roundDown_le (b x : Nat) : roundDown b x ≤ x := by
  unfold roundDown
  split
  · exact Nat.le_refl _
  · exact Nat.div_mul_le_self x b

/-- A part given back keeps every pool within its cap, provided its pool holds at least its units: the
release caches at most the units it gives back. The proviso is the ledger the global statement needs
(`used` stops at 0, so a part larger than its pool's `used` would let the cache grow past the cap). -/
theorem giveBack_one_within (blocks : List Nat) (serial keep : Nat) (ps : List PoolState) (h : Held) (i cap : Nat)
    (hw : (getPool ps i).used + cachedUnits (getPool ps i).entries ≤ cap)
    (hu : h.pool = i → h.given = false → h.units ≤ (getPool ps i).used) :
    (getPool (giveBack blocks serial keep ps [h]) i).used + cachedUnits (getPool (giveBack blocks serial keep ps [h]) i).entries ≤ cap := by
  simp only [giveBack]
  split
  · exact hw
  · rename_i hg
    by_cases hp : h.pool = i
    · subst hp
      have hu' := hu rfl (by simpa using hg)
      have hk : (if h.caches then roundDown (getAt blocks h.pool) (Nat.min (Nat.min keep h.computed) h.units) else 0) ≤ h.units := by
        split
        · refine Nat.le_trans (roundDown_le _ _) ?_
          show (if Nat.min keep h.computed ≤ h.units then Nat.min keep h.computed else h.units) ≤ h.units
          split <;> omega
        · exact Nat.zero_le _
      rcases getPool_setPool_self ps h.pool
          { getPool ps h.pool with
            used := (getPool ps h.pool).used - h.units
            holders := (getPool ps h.pool).holders - 1
            entries := addEntry serial (if h.caches then roundDown (getAt blocks h.pool)
              (Nat.min (Nat.min keep h.computed) h.units) else 0) (getPool ps h.pool).entries } with e | e
      · rw [e]
        have ha := cachedUnits_addEntry serial (if h.caches then roundDown (getAt blocks h.pool)
            (Nat.min (Nat.min keep h.computed) h.units) else 0) (getPool ps h.pool).entries
        dsimp only
        omega
      · rw [e]
        simp [cachedUnits]
    · rw [getPool_setPool_ne _ _ _ _ hp]
      exact hw

/-- Every pool's allocations and cache within its cap. -/
def withinCaps (caps : List Nat) (ps : List PoolState) : Prop :=
  ∀ j, (getPool ps j).used + cachedUnits (getPool ps j).entries ≤ getAt caps j

theorem withinCaps_setPool (caps : List Nat) (ps : List PoolState) (i : Nat) (v : PoolState)
    (hw : withinCaps caps ps) (hv : v.used + cachedUnits v.entries ≤ getAt caps i) : withinCaps caps (setPool ps i v) := by
  intro j
  by_cases hj : i = j
  · subst hj
    rcases getPool_setPool_self ps i v with e | e
    · rw [e]; exact hv
    · rw [e]; simp [cachedUnits]
  · rw [getPool_setPool_ne _ _ _ _ hj]
    exact hw j

/-- What `fits` checks: every pool of the hold has room for its units (and its reserve), in whole blocks,
in the pools as `v` shows them. -/
theorem fits_units (p : Program) (threads : List Thread) (v : PoolView) (attrs : List Nat) (now : Nat) :
    ∀ (hs : List HoldOn), fits p threads v attrs now hs = true → ∀ h ∈ hs,
      (getPool v.pools h.pool).used + roundUp (getAt p.blocks h.pool) (eval v attrs now 0 h.units) ≤ getAt v.caps h.pool
  | [], _, h, hh => by simp at hh
  | x :: xs, hf, h, hh => by
    simp only [fits, Bool.and_eq_true, decide_eq_true_eq] at hf
    simp only [List.mem_cons] at hh
    rcases hh with rfl | hh
    · exact Nat.le_trans (Nat.le_trans (Nat.add_le_add_left (Nat.le_max_left _ _) _) (Nat.le_add_right _ _)) hf.1
    · exact fits_units p threads v attrs now xs hf.2 h hh

/-- An admission (`admitOn`, pool by pool) keeps every pool within its cap when each of the hold's pools
has room for its units in the pools as they stand (what `fits` checks: `fits_units`) and the hold names
each pool once: each pool's allocation grows to at most its cap and its cache gives way
(`evictIn_within`). -/
theorem admitOn_within (p : Program) (threads : List Thread) (v : PoolView) (caching : Bool) (rho : Option Nat)
    (attrs : List Nat) (now : Nat) :
    ∀ (hs : List HoldOn) (first : Bool) (attr : Nat) (ps : List PoolState),
      withinCaps p.caps ps →
      (∀ h ∈ hs, (getPool ps h.pool).used + roundUp (getAt p.blocks h.pool) (eval v attrs now 0 h.units) ≤
        getAt p.caps h.pool) →
      (hs.map HoldOn.pool).Nodup →
      withinCaps p.caps (admitOn p threads v caching rho attrs now first attr ps hs).1
  | [], _, _, ps, hw, _, _ => hw
  | h :: hs, first, attr, ps, hw, hfit, hnd => by
    simp only [admitOn]
    simp only [List.map_cons, List.nodup_cons] at hnd
    apply admitOn_within p threads v caching rho attrs now hs
    · exact withinCaps_setPool _ _ _ _ hw
        (evictIn_within p _ _ _ _ _ _ (hfit h List.mem_cons_self))
    · intro h2 hh2
      have hne : h.pool ≠ h2.pool := by
        intro e
        exact hnd.1 (e ▸ List.mem_map.2 ⟨h2, hh2, rfl⟩)
      rw [getPool_setPool_ne _ _ _ _ hne]
      exact hfit h2 (List.mem_cons_of_mem _ hh2)
    · exact hnd.2

theorem getPool_setPool_self_or : ∀ (ps : List PoolState) (i : Nat) (v : PoolState),
    getPool (setPool ps i v) i = v ∨ getPool (setPool ps i v) i = getPool ps i
  | [], _, _ => Or.inr rfl
  | _ :: _, 0, _ => Or.inl rfl
  | _ :: xs, i + 1, v => getPool_setPool_self_or xs i v

/-- A pool replaced by one with the same allocations keeps every pool's allocations. -/
theorem getPool_setPool_used (ps : List PoolState) (i : Nat) (v : PoolState) (hv : v.used = (getPool ps i).used)
    (k : Nat) : (getPool (setPool ps i v) k).used = (getPool ps k).used := by
  by_cases hk : i = k
  · subst hk
    rcases getPool_setPool_self_or ps i v with e | e
    · rw [e]; exact hv
    · rw [e]
  · rw [getPool_setPool_ne _ _ _ _ hk]

/-- A hold admitted from pool `i`'s queue (`Machine.admitWaiter`, as `retryQueue` and `admitOne` admit it:
once `fits` holds, in the pools as they stand) keeps every pool within its cap, when the hold names
each pool once. -/
theorem Machine.admitWaiter_within (p : Program) (m : Machine) (stage : List Nat) (i j : Nat)
    (hw : withinCaps p.caps m.pools)
    (hfit : fits p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial, stage⟩
      (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now
      (getWaiter (getPool m.pools i).queue j).on = true)
    (hnd : ((getWaiter (getPool m.pools i).queue j).on.map HoldOn.pool).Nodup) :
    withinCaps p.caps (m.admitWaiter p stage i j).pools := by
  unfold Machine.admitWaiter Machine.put
  dsimp only
  refine admitOn_within p _ _ _ _ _ _ _ _ _ _ (withinCaps_setPool _ _ _ _ hw (hw i)) ?_ hnd
  intro h hh
  rw [getPool_setPool_used m.pools i { getPool m.pools i with queue := removeWaiter (getPool m.pools i).queue j } rfl]
  exact fits_units _ _ _ _ _ _ hfit h hh

/-! ### The program's hypotheses for KV conservation, decided on its value

The local steps above assume of an admitted hold that it names each pool once. Of a program: every
hold statement names each pool once (`HoldsOnce`, decided by `holdsOnceOn` over every statement,
`HoldsOnce.of_check`); every pool's eviction, `evict lru` or `evict by (keys)`, keeps it within its cap
(`evictIn_within`), with no hypothesis. Over every run, that every waiting hold is one of the program's hold statements is
`Serq.KernelKvRun`'s `StmtInv`, and the ledger is `Serq.KernelKv`'s. -/

/-- The hold's pools, each named once. -/
def distinctPools : List HoldOn → Bool
  | [] => true
  | h :: hs => !holdsOnPool hs h.pool && distinctPools hs

theorem not_mem_of_holdsOnPool : ∀ (hs : List HoldOn) (i : Nat), holdsOnPool hs i = false → i ∉ hs.map HoldOn.pool
  | [], _, _ => by simp
  | h :: hs, i, hf => by
    simp only [holdsOnPool, Bool.or_eq_false_iff, beq_eq_false_iff_ne] at hf
    simp only [List.map_cons, List.mem_cons, not_or]
    exact ⟨fun e => hf.1 e.symm, not_mem_of_holdsOnPool hs i hf.2⟩

theorem distinctPools_nodup : ∀ (hs : List HoldOn), distinctPools hs = true → (hs.map HoldOn.pool).Nodup
  | [], _ => by simp
  | h :: hs, hd => by
    simp only [distinctPools, Bool.and_eq_true, Bool.not_eq_true'] at hd
    simp only [List.map_cons, List.nodup_cons]
    exact ⟨not_mem_of_holdsOnPool hs h.pool hd.1, distinctPools_nodup hs hd.2⟩

/-- Every hold statement of the program names each pool once. -/
def HoldsOnce (p : Program) : Prop :=
  ∀ on reuse cache body, ProgStmt p (.hold on reuse cache body) → (on.map HoldOn.pool).Nodup

def holdsOnceOn : Stmt → Bool
  | .hold on _ _ _ => distinctPools on
  | _ => true

theorem HoldsOnce.of_check (p : Program) (hp : p.allStmts holdsOnceOn = true) : HoldsOnce p := by
  intro on reuse cache body h
  have h1 := Stmt.allSub_self _ _ (Program.allStmts_sound _ p hp _ h)
  simp only [holdsOnceOn] at h1
  exact distinctPools_nodup on h1

end Serq.Kernel
