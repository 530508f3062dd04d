module

public import Serq.Kernel

/-! # Facts every program of the kernel fragment has

Proved of `Serq.Kernel`'s run for every program and any fuel: the clock never goes back
(`loop_now_mono`; only the event loop moves it) and no turn is answered before it was submitted
(`runProgram_causal`).
-/
@[expose] public section

namespace Serq.Kernel

/-! ## Facts every program of the fragment has -/

/-! ### The clock: only the event loop moves it, and never back -/

@[simp] theorem Machine.put_now (m : Machine) (th : Thread) : (m.put th).now = m.now := rfl

@[simp] theorem Machine.setTimer_now (m : Machine) (t : Nat) (w : Wake) : (m.setTimer t w).now = m.now := rfl

@[simp] theorem Machine.leaseTimer_now (m : Machine) (s : Nat) (d : Option Nat) : (m.leaseTimer s d).now = m.now := by
  cases d <;> rfl

@[simp] theorem Machine.leaseTimer_threads (m : Machine) (s : Nat) (d : Option Nat) :
    (m.leaseTimer s d).threads = m.threads := by
  cases d <;> rfl

theorem Machine.addJob_frame (p : Program) (m : Machine) (s t w : Nat) :
    (m.addJob p s t w).threads = m.threads ∧ (m.addJob p s t w).now = m.now := by
  simp only [Machine.addJob]
  split <;> (try split) <;> exact ⟨rfl, rfl⟩

@[simp] theorem Machine.addJob_now (p : Program) (m : Machine) (s t w : Nat) :
    (m.addJob p s t w).now = m.now := (Machine.addJob_frame p m s t w).2

@[simp] theorem Machine.addJob_threads (p : Program) (m : Machine) (s t w : Nat) :
    (m.addJob p s t w).threads = m.threads := (Machine.addJob_frame p m s t w).1

@[simp] theorem Machine.put_threads (m : Machine) (th : Thread) :
    (m.put th).threads = setThread m.threads th.serial th := rfl

theorem exec_now (p : Program) (f : Nat) (m : Machine) (th : Thread) : (exec p f m th).now = m.now := by
  fun_induction exec p f m th <;> simp_all +zetaDelta

theorem runReady_now (p : Program) (f : Nat) (m : Machine) : (runReady p f m).now = m.now := by
  fun_induction runReady p f m <;> simp_all [exec_now]

@[simp] theorem Machine.admitWaiter_now (p : Program) (m : Machine) (st : List Nat) (i j : Nat) :
    (m.admitWaiter p st i j).now = m.now := rfl

theorem retryQueue_now (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    (retryQueue p f m i b).1.now = m.now := by
  fun_induction retryQueue p f m i b <;> simp_all +zetaDelta

@[simp] theorem Machine.grownReq_now (p : Program) (m : Machine) (t i want req : Nat) (h : Held) :
    (m.grownReq p t i want req h).now = m.now := rfl

theorem retryGrowers_now (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    (retryGrowers p f m i b).1.now = m.now := by
  fun_induction retryGrowers p f m i b <;> simp_all +zetaDelta

theorem retryPools_now (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    (retryPools p f n i m b).1.now = m.now := by
  fun_induction retryPools p f n i m b <;>
    simp_all +zetaDelta [retryPool, apply_ite, retryQueue_now, retryGrowers_now]

theorem settle_now (p : Program) (f : Nat) (m : Machine) : (settle p f m).now = m.now := by
  fun_induction settle p f m <;> simp_all +zetaDelta [retryPools_now, runReady_now]

@[simp] theorem Machine.served_now (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) :
    (m.served s b r n).1.now = m.now := rfl

@[simp] theorem Machine.grown_now (p : Program) (m : Machine) (t i want : Nat) (h : Held) :
    (m.grown p t i want h).now = m.now := rfl

theorem Machine.preempt_now (p : Program) (s i t : Nat) (m : Machine) (b : Batch) :
    (m.preempt p s i t b).1.now = m.now := by
  simp only [Machine.preempt]
  split <;> rfl

theorem growPreempting_now (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    (growPreempting p s i want t f m b).1.now = m.now := by
  fun_induction growPreempting p s i want t f m b <;> simp_all +zetaDelta [Machine.preempt_now]

theorem Machine.serveOne_now (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat) :
    (m.serveOne p s b r n).1.now = m.now := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals simp_all [growPreempting_now]

theorem serveIn_now (p : Program) (s c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) :
    (serveIn p s c q ts m b).1.now = m.now := by
  fun_induction serveIn p s c q ts m b <;> simp_all +zetaDelta [Machine.serveOne_now]

theorem serveOrdered_now (p : Program) (s : Nat) (m : Machine) (running : List Nat) (c : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) : (serveOrdered p s m running c q b keys rs).1.now = m.now := by
  cases keys <;> simp [serveOrdered, serveIn_now]

theorem admitOne_now (p : Program) (f s c i j : Nat) (q : Option Expr) (m : Machine) (b : Batch) :
    (admitOne p f s c i j q m b).1.now = m.now := by
  simp only [admitOne]
  repeat' split
  all_goals simp_all [Machine.serveOne_now, exec_now]

theorem admitWaiting_now (p : Program) (s c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine) (b : Batch) :
    (admitWaiting p s c q g f m b).1.now = m.now := by
  fun_induction admitWaiting p s c q g f m b <;> simp_all +zetaDelta [admitOne_now]

theorem startIteration_now (p : Program) (f s : Nat) (eng : Engine) (m : Machine) :
    (startIteration p f s eng m).now = m.now := by
  simp only [startIteration]
  repeat' split
  all_goals simp_all [admitWaiting_now, serveOrdered_now]

theorem startPass_now (p : Program) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    (startPass p f ss s tried m a).1.now = m.now := by
  fun_induction startPass p f ss s tried m a <;> simp_all +zetaDelta [settle_now, startIteration_now]

theorem startEngines_now (p : Program) (f n : Nat) (tried : List Nat) (m : Machine) :
    (startEngines p f n tried m).now = m.now := by
  fun_induction startEngines p f n tried m <;> simp_all +zetaDelta [startPass_now]

theorem endOfInstant_now (p : Program) (f : Nat) (m : Machine) : (endOfInstant p f m).now = m.now := by
  simp only [endOfInstant]
  split
  · rfl
  · exact startEngines_now ..

theorem Machine.advanceHolds_now (m : Machine) (rs : List Resident) : (m.advanceHolds rs).now = m.now := by
  fun_induction m.advanceHolds rs <;> simp_all

theorem fire_now (p : Program) (m : Machine) (w : Wake) : (fire p m w).now = m.now := by
  cases w with
  | resume t => rfl
  | arrival s =>
    simp only [fire]
    split <;> rfl
  | fifoDone s t =>
    simp only [fire]
    split <;> rfl
  | leaseEnd t id =>
    simp only [fire]
    split <;> rfl
  | iterationEnd s =>
    show (m.advanceHolds (getEngineState m.engines s).residents).now = m.now
    exact Machine.advanceHolds_now ..

/-- Time never goes back: the run's clock is at least where it started. -/
theorem loop_now_mono (p : Program) (f : Nat) (m : Machine) : m.now ≤ (loop p f m).now := by
  fun_induction loop p f m with
  | case1 m => simp
  | case2 f m h => simp
  | case3 f m t ts h ih =>
    simp only [endOfInstant_now, settle_now, fire_now] at ih
    have : m.now ≤ Nat.max m.now t.time := Nat.le_max_left _ _
    omega

/-! ### Causality: no turn is answered before it was submitted -/

/-- Every answer was given no earlier than its turn was submitted. -/
def answersCausal (l : List Answer) : Prop := ∀ a ∈ l, a.start ≤ a.answered

@[simp] theorem answersCausal_nil : answersCausal [] := by simp [answersCausal]

@[simp] theorem answersCausal_cons (a : Answer) (l : List Answer) :
    answersCausal (a :: l) ↔ a.start ≤ a.answered ∧ answersCausal l := by
  simp [answersCausal]

/-- A thread's answers are causal, and its open turn was submitted no later than `now`. -/
def Thread.causalAt (now : Nat) (th : Thread) : Prop := answersCausal th.answers ∧ th.submitted ≤ now

def threadsCausal (l : List Thread) (now : Nat) : Prop := ∀ th ∈ l, th.causalAt now

/-- Every thread of the machine is causal at its clock. -/
def Machine.causal (m : Machine) : Prop := threadsCausal m.threads m.now

theorem mem_setThread : ∀ (l : List Thread) (i : Nat) (v x : Thread), x ∈ setThread l i v → x ∈ l ∨ x = v
  | [], _, _, _, h => by simp [setThread] at h
  | _ :: ts, 0, v, x, h => by
    simp only [setThread, List.mem_cons] at h
    rcases h with h | h
    · exact Or.inr h
    · exact Or.inl (List.mem_cons_of_mem _ h)
  | t :: ts, n + 1, v, x, h => by
    simp only [setThread, List.mem_cons] at h
    rcases h with h | h
    · exact Or.inl (h ▸ List.mem_cons_self)
    · rcases mem_setThread ts n v x h with h | h
      · exact Or.inl (List.mem_cons_of_mem _ h)
      · exact Or.inr h

@[simp] theorem threadsCausal_setThread {l : List Thread} {now : Nat} {v : Thread} (i : Nat)
    (h : threadsCausal l now) (ha : answersCausal v.answers) (hs : v.submitted ≤ now) :
    threadsCausal (setThread l i v) now := by
  intro x hx
  rcases mem_setThread _ _ _ _ hx with hx | rfl
  · exact h x hx
  · exact ⟨ha, hs⟩

theorem getThread_causal (now : Nat) :
    ∀ (l : List Thread) (i : Nat), threadsCausal l now → (getThread l i).causalAt now
  | [], _, _ => by simp [getThread, Thread.causalAt]
  | t :: _, 0, h => h t List.mem_cons_self
  | _ :: ts, n + 1, h => getThread_causal now ts n (fun th hm => h th (List.mem_cons_of_mem _ hm))

@[simp] theorem getThread_answers {l : List Thread} {now : Nat} (i : Nat) (h : threadsCausal l now) :
    answersCausal (getThread l i).answers := (getThread_causal now l i h).1

@[simp] theorem getThread_submitted {l : List Thread} {now : Nat} (i : Nat) (h : threadsCausal l now) :
    (getThread l i).submitted ≤ now := (getThread_causal now l i h).2

theorem Thread.causalAt_mono {th : Thread} {a b : Nat} (h : th.causalAt a) (hab : a ≤ b) : th.causalAt b :=
  ⟨h.1, Nat.le_trans h.2 hab⟩

theorem exec_causal (p : Program) (f : Nat) (m : Machine) (th : Thread) :
    m.causal → th.causalAt m.now → (exec p f m th).causal := by
  fun_induction exec p f m th <;> intro hm ht <;>
    simp_all +zetaDelta [Machine.causal, Thread.causalAt]

theorem runReady_causal (p : Program) (f : Nat) (m : Machine) : m.causal → (runReady p f m).causal := by
  fun_induction runReady p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    apply ih
    exact exec_causal p _ _ _ hm (getThread_causal _ _ _ hm)

theorem Machine.admitWaiter_causal (p : Program) (m : Machine) (st : List Nat) (i j : Nat) :
    m.causal → (m.admitWaiter p st i j).causal := by
  intro hm
  exact threadsCausal_setThread _ hm (getThread_answers _ hm) (getThread_submitted _ hm)

theorem retryQueue_causal (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    m.causal → (retryQueue p f m i b).1.causal := by
  fun_induction retryQueue p f m i b <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (Machine.admitWaiter_causal p _ _ _ _ hm))

theorem Machine.grownReq_causal (p : Program) (m : Machine) (t i want req : Nat) (h : Held) :
    m.causal → (m.grownReq p t i want req h).causal := by
  intro hm
  exact threadsCausal_setThread _ hm (getThread_answers _ hm) (getThread_submitted _ hm)

theorem retryGrowers_causal (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    m.causal → (retryGrowers p f m i b).1.causal := by
  fun_induction retryGrowers p f m i b <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (Machine.grownReq_causal p _ _ _ _ _ _ hm))

theorem retryPool_causal (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    m.causal → (retryPool p f m i b).1.causal := by
  intro hm
  simp only [retryPool]
  split
  · exact retryQueue_causal p f _ _ _ (retryGrowers_causal p f _ _ _ hm)
  · exact retryGrowers_causal p f _ _ _ hm

theorem retryPools_causal (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    m.causal → (retryPools p f n i m b).1.causal := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPool_causal p f _ _ _ hm)

theorem settle_causal (p : Program) (f : Nat) (m : Machine) : m.causal → (settle p f m).causal := by
  fun_induction settle p f m <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPools_causal p _ _ _ _ _ (runReady_causal p _ _ hm))
  · exact retryPools_causal p _ _ _ _ _ (runReady_causal p _ _ hm)

/-- A machine with the threads and the clock of a causal one is causal (only they matter). -/
theorem Machine.causal_of_threads {m m' : Machine} (ht : m'.threads = m.threads) (hn : m'.now = m.now)
    (hm : m.causal) : m'.causal := by
  unfold Machine.causal at *
  rw [ht, hn]
  exact hm

/-- A causal machine with a thread replaced by one with the same answers and submission time as
the thread at `t` is causal. -/
theorem Machine.put_same_causal (m : Machine) (th : Thread) (t : Nat) (hm : m.causal)
    (ha : th.answers = (getThread m.threads t).answers) (hs : th.submitted = (getThread m.threads t).submitted) :
    (m.put th).causal := by
  unfold Machine.causal
  exact threadsCausal_setThread _ hm (ha ▸ getThread_answers _ hm) (hs ▸ getThread_submitted _ hm)

theorem Machine.served_causal (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) (hm : m.causal) :
    (m.served s b r n).1.causal := Machine.causal_of_threads rfl rfl hm

theorem Machine.grown_causal (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hm : m.causal) :
    (m.grown p t i want h).causal :=
  Machine.put_same_causal { m with pools := _ } _ t (Machine.causal_of_threads rfl rfl hm) rfl rfl

theorem Machine.preempt_causal (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (hm : m.causal) :
    (m.preempt p s i t b).1.causal := by
  simp only [Machine.preempt]
  split
  · exact Machine.causal_of_threads rfl rfl hm
  · exact Machine.put_same_causal { m with engines := _, pools := _, progress := _ } _ t (Machine.causal_of_threads rfl rfl hm) rfl rfl

theorem growPreempting_causal (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    m.causal → (growPreempting p s i want t f m b).1.causal := by
  fun_induction growPreempting p s i want t f m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.causal_of_threads rfl rfl hm
    | exact Machine.grown_causal p _ _ _ _ _ hm
    | exact Machine.preempt_causal p _ _ _ _ _ hm
    | (rename_i ih; exact ih (Machine.preempt_causal p _ _ _ _ _ hm))

/-- A served resident's machine, as `Machine.serveOne` returns it with its verdict. -/
theorem causal_fst3 {x : Machine × Batch} (c : Nat) (h : x.1.causal) :
    ((x.1, x.2, c) : Machine × Batch × Nat).1.causal := h

theorem Machine.serveOne_causal (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (hm : m.causal) : (m.serveOne p s b r n).1.causal := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact hm
    | exact causal_fst3 0 (Machine.served_causal _ _ _ _ _ hm)
    | exact causal_fst3 0 (Machine.served_causal _ _ _ _ _ (Machine.grown_causal p _ _ _ _ _ hm))
    | exact causal_fst3 0 (Machine.served_causal _ _ _ _ _ (growPreempting_causal p _ _ _ _ _ _ _ hm))
    | exact growPreempting_causal p _ _ _ _ _ _ _ hm

theorem serveIn_causal (p : Program) (s c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) :
    m.causal → (serveIn p s c q ts m b).1.causal := by
  fun_induction serveIn p s c q ts m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.serveOne_causal p _ _ _ _ _ hm
    | (rename_i ih; exact ih hm)
    | (rename_i ih; exact ih (Machine.serveOne_causal p _ _ _ _ _ hm))

theorem serveOrdered_causal (p : Program) (s : Nat) (m : Machine) (running : List Nat) (c : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) (hm : m.causal) :
    (serveOrdered p s m running c q b keys rs).1.causal := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_causal p _ _ _ _ _ _ hm

theorem admitOne_causal (p : Program) (f s c i j : Nat) (q : Option Expr) (m : Machine) (b : Batch) :
    m.causal → (admitOne p f s c i j q m b).1.causal := by
  intro hm
  have h1 := Machine.admitWaiter_causal p m (admissionStage c b.budget) i j hm
  have h2 := exec_causal p f (m.admitWaiter p (admissionStage c b.budget) i j)
    (getThread (m.admitWaiter p (admissionStage c b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread) h1
    (getThread_causal _ _ _ h1)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact Machine.serveOne_causal p _ _ _ _ _ h2

theorem admitWaiting_causal (p : Program) (s c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine)
    (b : Batch) : m.causal → (admitWaiting p s c q g f m b).1.causal := by
  fun_induction admitWaiting p s c q g f m b <;> intro hm
  all_goals first
    | exact hm
    | exact Machine.causal_of_threads rfl rfl hm
    | (rename_i ih; exact ih (admitOne_causal p _ _ _ _ _ _ _ _ hm))

theorem startIteration_causal (p : Program) (f s : Nat) (eng : Engine) (m : Machine) :
    m.causal → (startIteration p f s eng m).causal := by
  intro hm
  simp only [startIteration]
  repeat' split
  all_goals first
    | exact serveOrdered_causal p _ _ _ _ _ _ _ _ hm
    | exact admitWaiting_causal p _ _ _ _ _ _ _ (serveOrdered_causal p _ _ _ _ _ _ _ _ hm)
    | exact Machine.causal_of_threads rfl rfl (serveOrdered_causal p _ _ _ _ _ _ _ _ hm)
    | exact Machine.causal_of_threads rfl rfl
        (admitWaiting_causal p _ _ _ _ _ _ _ (serveOrdered_causal p _ _ _ _ _ _ _ _ hm))

theorem startPass_causal (p : Program) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    m.causal → (startPass p f ss s tried m a).1.causal := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_causal p _ _ (startIteration_causal p _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_causal p _ _ (startIteration_causal p _ _ _ _ hm)))

theorem startEngines_causal (p : Program) (f n : Nat) (tried : List Nat) (m : Machine) :
    m.causal → (startEngines p f n tried m).causal := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPass_causal p _ _ _ _ _ _ hm
    | (rename_i ih; exact ih (startPass_causal p _ _ _ _ _ _ hm))

theorem endOfInstant_causal (p : Program) (f : Nat) (m : Machine) : m.causal → (endOfInstant p f m).causal := by
  intro hm
  simp only [endOfInstant]
  split
  · exact hm
  · exact startEngines_causal p _ _ _ _ hm

theorem Machine.advanceHolds_causal (m : Machine) (rs : List Resident) : m.causal → (m.advanceHolds rs).causal := by
  fun_induction m.advanceHolds rs <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | (rename_i ih; exact ih (Machine.put_same_causal _ _ _ hm rfl rfl))

theorem fire_causal (p : Program) (m : Machine) (w : Wake) : m.causal → (fire p m w).causal := by
  intro hm
  cases w with
  | resume t => exact Machine.causal_of_threads rfl rfl hm
  | arrival s =>
    simp only [fire]
    split <;> exact Machine.causal_of_threads rfl rfl hm
  | fifoDone s t =>
    simp only [fire]
    split <;> exact Machine.causal_of_threads rfl rfl hm
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact hm
    · exact Machine.put_same_causal { m with pools := _ } _ t (Machine.causal_of_threads rfl rfl hm) rfl rfl
  | iterationEnd s =>
    exact Machine.causal_of_threads rfl rfl (Machine.advanceHolds_causal m _ hm)

theorem loop_causal (p : Program) (f : Nat) (m : Machine) : m.causal → (loop p f m).causal := by
  fun_induction loop p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    apply ih
    apply endOfInstant_causal
    apply settle_causal
    apply fire_causal
    intro th hth
    exact Thread.causalAt_mono (hm th hth) (Nat.le_max_left _ _)

theorem arrivals_causal (p : Program) : ∀ (n s : Nat), ∀ th ∈ arrivals p n s, th.causalAt 0
  | 0, _, th, h => by simp [arrivals] at h
  | n + 1, s, th, h => by
    simp only [arrivals, List.mem_cons] at h
    rcases h with rfl | h
    · exact ⟨by simp [arrive], by simp [arrive]⟩
    · exact arrivals_causal p n (s + 1) th h

theorem initial_threads_now (p : Program) :
    (initial p).threads = arrivals p p.sessions 0 ∧ (initial p).now = 0 := by
  unfold initial
  dsimp only
  split <;> exact ⟨rfl, rfl⟩

theorem initial_causal (p : Program) : (initial p).causal := by
  show threadsCausal (initial p).threads (initial p).now
  rw [(initial_threads_now p).1, (initial_threads_now p).2]
  exact arrivals_causal p _ _

/-- Causality, for every program of the fragment and any fuel: every turn a session answered was
answered no earlier than it was submitted. -/
theorem runProgram_causal (p : Program) (fuel : Nat) :
    ∀ th ∈ (runProgram p fuel).threads, ∀ a ∈ th.answers, a.start ≤ a.answered := by
  intro th hth a ha
  have h : (runProgram p fuel).causal := by
    unfold runProgram
    exact loop_causal p _ _ (endOfInstant_causal p _ _ (settle_causal p _ _ (initial_causal p)))
  exact (h th hth).1 a ha

end Serq.Kernel
