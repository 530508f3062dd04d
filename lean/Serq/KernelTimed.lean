module

public import Serq.KernelFacts
public import Serq.KernelBudget

/-! # Every iteration of an engine starts no earlier than the one before it ends

Proved of `Serq.Kernel`'s run for every program of the fragment and any fuel (`runProgram_timed`):
the iteration records of an engine stage whose `execute` reads only what a record keeps
(`Expr.batchOnly`: numbers, `batch.tokens`, `batch.prefilled`, `batch.decoders`, the batch's KV sums and the residents
after the scheduling) are timed by it: each record starts no earlier than the one before it started
plus that one's cost (`recordsTimed`, the records newest first, the cost read off the record:
`Iteration.costOf`). With `Serq.RateCost` and `runProgram_within_budget` that is the token rate of a
program's engine with no hypothesis on its run (issue 14, result 1): `runProgram_affine_token_rate`
(`execute (a + b * batch.tokens)`) and `runProgram_tiled_token_rate` (`execute (a * ceil(batch.tokens
/ g) + b * batch.tokens)`), each `execute` as `serq.leangen.kernel` lowers it.

Why it holds (`Machine.timed`, an invariant of every machine of the run, stage by stage): an iteration
starts only on an idle engine (`startPass` passes over a busy one); `startIteration` keeps its record
with the clock as its start and sets the iteration's end at the start plus the cost it reads, which is
the record's cost (`eval_batchOnly`); the engine is busy until that timer fires (`fire`, at a clock no
earlier than the timer's time: `loop`), and that timer is the engine's only pending iteration end
while it is busy, and there is none while it is idle (`endTimes`). Nothing else sets an iteration's
end, makes an engine busy or idle, or adds a record (`*_clock`, and `Serq.KernelBudget`'s
`*_records`), and the clock never goes back (`Serq.KernelFacts`). Nothing is assumed of the cost's
values: a cost of 0 (the step that only preempted and scheduled no token, or an `execute` that reads
0), an iteration with no tokens, and the program's run-time error (a cost of 0 for tokens: no record,
no timer) all keep the invariant.
-/
@[expose] public section

namespace Serq.Kernel

/-! ### What the invariant reads: the engine's iteration ends, busy, records -/

/-- The wake is the end of stage `s`'s iteration. -/
def Wake.endsOf (s : Nat) : Wake → Bool
  | .iterationEnd s' => s' == s
  | _ => false

/-- The times of the pending timers that end stage `s`'s iteration, in their order. -/
def endTimes (s : Nat) : List Timer → List Nat
  | [] => []
  | t :: ts => if t.wake.endsOf s = true then t.time :: endTimes s ts else endTimes s ts

theorem Wake.endsOf_eq {s : Nat} : ∀ {w : Wake}, w.endsOf s = true → w = .iterationEnd s
  | .iterationEnd s', h => by
    simp only [Wake.endsOf, beq_iff_eq] at h
    rw [h]
  | .resume _, h | .fifoDone _ _, h | .arrival _, h | .leaseEnd _ _, h => by simp [Wake.endsOf] at h

theorem endTimes_insertTimer (s : Nat) (t : Timer) (h : t.wake.endsOf s = false) :
    ∀ ts, endTimes s (insertTimer t ts) = endTimes s ts
  | [] => by simp [insertTimer, endTimes, h]
  | x :: xs => by
    simp only [insertTimer]
    split
    · simp [endTimes, h]
    · simp only [endTimes]
      rw [endTimes_insertTimer s t h xs]

theorem endTimes_insertTimer_self (s : Nat) (t : Timer) (h : t.wake.endsOf s = true) :
    ∀ ts, endTimes s ts = [] → endTimes s (insertTimer t ts) = [t.time]
  | [], _ => by simp [insertTimer, endTimes, h]
  | x :: xs, he => by
    simp only [endTimes] at he
    split at he
    · cases he
    · simp only [insertTimer]
      split
      · simp [endTimes, *]
      · simp only [endTimes, *]
        exact endTimes_insertTimer_self s t h xs he

@[simp] theorem setEngineState_length : ∀ (l : List EngineState) (i : Nat) (v : EngineState),
    (setEngineState l i v).length = l.length
  | [], _, _ => rfl
  | _ :: _, 0, _ => rfl
  | _ :: xs, i + 1, v => by simp [setEngineState, setEngineState_length xs i v]

theorem getEngineState_setEngineState_lt : ∀ (l : List EngineState) (i : Nat) (v : EngineState), i < l.length →
    getEngineState (setEngineState l i v) i = v
  | [], _, _, h => absurd h (Nat.not_lt_zero _)
  | _ :: _, 0, _, _ => rfl
  | _ :: xs, i + 1, v, h => getEngineState_setEngineState_lt xs i v (by simp at h; omega)

/-- An engine's state replaced by one as busy keeps whether every engine is busy. -/
@[simp] theorem getEngineState_setEngineState_busy (l : List EngineState) (i : Nat) (v : EngineState) (j : Nat)
    (h : v.busy = (getEngineState l i).busy) :
    (getEngineState (setEngineState l i v) j).busy = (getEngineState l j).busy := by
  by_cases hij : i = j
  · subst hij
    rcases getEngineState_setEngineState_self l i v with e | e
    · rw [e]; exact h
    · rw [e]
  · rw [getEngineState_setEngineState_ne l i j v hij]

@[simp] theorem Machine.put_timers (m : Machine) (th : Thread) : (m.put th).timers = m.timers := rfl

@[simp] theorem Machine.leaseTimer_endTimes (m : Machine) (x : Nat) (d : Option Nat) (s : Nat) :
    endTimes s (m.leaseTimer x d).timers = endTimes s m.timers := by
  cases d
  · rfl
  · exact endTimes_insertTimer s _ (by rfl) _

@[simp] theorem Machine.addJob_endTimes (p : Program) (m : Machine) (st t w s : Nat) :
    endTimes s (m.addJob p st t w).timers = endTimes s m.timers := by
  simp only [Machine.addJob]
  split <;> (try split)
  all_goals first
    | rfl
    | exact endTimes_insertTimer s _ (by rfl) _

@[simp] theorem Machine.admitWaiter_timers (p : Program) (m : Machine) (st : List Nat) (i j : Nat) :
    (m.admitWaiter p st i j).timers = m.timers := rfl

@[simp] theorem Machine.grown_timers (p : Program) (m : Machine) (t i want : Nat) (h : Held) :
    (m.grown p t i want h).timers = m.timers := rfl

@[simp] theorem Machine.advanceHolds_timers (m : Machine) (rs : List Resident) :
    (m.advanceHolds rs).timers = m.timers := by
  fun_induction m.advanceHolds rs <;> simp_all

/-! ### Every function of the machine but `startIteration` and `fire` keeps them

Of stage `s`: its pending iteration ends (`endTimes`), whether it is busy, and how many engines
there are (`*_clock`). -/

theorem exec_clock (p : Program) (f : Nat) (m : Machine) (th : Thread) (s : Nat) :
    endTimes s (exec p f m th).timers = endTimes s m.timers ∧
      (getEngineState (exec p f m th).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < (exec p f m th).engines.length ↔ s < m.engines.length) := by
  fun_induction exec p f m th <;> simp_all +zetaDelta

theorem runReady_clock (p : Program) (f : Nat) (m : Machine) (s : Nat) :
    endTimes s (runReady p f m).timers = endTimes s m.timers ∧
      (getEngineState (runReady p f m).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < (runReady p f m).engines.length ↔ s < m.engines.length) := by
  fun_induction runReady p f m <;> simp_all [exec_clock]

theorem retryQueue_clock (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (s : Nat) :
    endTimes s ((retryQueue p f m i b).1).timers = endTimes s m.timers ∧
      (getEngineState ((retryQueue p f m i b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((retryQueue p f m i b).1).engines.length ↔ s < m.engines.length) := by
  fun_induction retryQueue p f m i b <;> simp_all +zetaDelta

theorem retryGrowers_timers (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    (retryGrowers p f m i b).1.timers = m.timers := by
  fun_induction retryGrowers p f m i b <;> simp_all +zetaDelta [Machine.grownReq]

theorem retryPool_clock (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) (s : Nat) :
    endTimes s ((retryPool p f m i b).1).timers = endTimes s m.timers ∧
      (getEngineState ((retryPool p f m i b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((retryPool p f m i b).1).engines.length ↔ s < m.engines.length) := by
  simp only [retryPool]
  split
  · have := retryQueue_clock p f (retryGrowers p f m i b).1 i (retryGrowers p f m i b).2 s
    rwa [retryGrowers_timers, retryGrowers_engines] at this
  · rw [retryGrowers_timers, retryGrowers_engines]; exact ⟨rfl, rfl, Iff.rfl⟩

theorem retryPools_clock (p : Program) (f n i : Nat) (m : Machine) (b : Bool) (s : Nat) :
    endTimes s ((retryPools p f n i m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((retryPools p f n i m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((retryPools p f n i m b).1).engines.length ↔ s < m.engines.length) := by
  fun_induction retryPools p f n i m b <;> simp_all +zetaDelta [retryPool_clock]

theorem settle_clock (p : Program) (f : Nat) (m : Machine) (s : Nat) :
    endTimes s (settle p f m).timers = endTimes s m.timers ∧
      (getEngineState (settle p f m).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < (settle p f m).engines.length ↔ s < m.engines.length) := by
  fun_induction settle p f m <;> simp_all +zetaDelta [retryPools_clock, runReady_clock]

theorem Machine.served_clock (m : Machine) (st : Nat) (b : Batch) (r : Resident) (n : Nat) (s : Nat) :
    endTimes s ((m.served st b r n).1).timers = endTimes s m.timers ∧
      (getEngineState ((m.served st b r n).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((m.served st b r n).1).engines.length ↔ s < m.engines.length) := by
  simp [Machine.served]

theorem Machine.preempt_clock (p : Program) (st i t : Nat) (m : Machine) (b : Batch) (s : Nat) :
    endTimes s ((m.preempt p st i t b).1).timers = endTimes s m.timers ∧
      (getEngineState ((m.preempt p st i t b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((m.preempt p st i t b).1).engines.length ↔ s < m.engines.length) := by
  simp only [Machine.preempt]
  split <;> simp

theorem growPreempting_clock (p : Program) (st i want t f : Nat) (m : Machine) (b : Batch) (s : Nat) :
    endTimes s ((growPreempting p st i want t f m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((growPreempting p st i want t f m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((growPreempting p st i want t f m b).1).engines.length ↔ s < m.engines.length) := by
  fun_induction growPreempting p st i want t f m b <;> simp_all +zetaDelta [Machine.preempt_clock]

theorem Machine.serveOne_clock (p : Program) (st : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (s : Nat) : endTimes s ((m.serveOne p st b r n).1).timers = endTimes s m.timers ∧
      (getEngineState ((m.serveOne p st b r n).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((m.serveOne p st b r n).1).engines.length ↔ s < m.engines.length) := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals simp_all [growPreempting_clock, Machine.served_clock]

theorem serveIn_clock (p : Program) (st c : Nat) (q : Option Expr) (ts : List Nat) (m : Machine) (b : Batch)
    (s : Nat) : endTimes s ((serveIn p st c q ts m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((serveIn p st c q ts m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((serveIn p st c q ts m b).1).engines.length ↔ s < m.engines.length) := by
  fun_induction serveIn p st c q ts m b <;> simp_all +zetaDelta [Machine.serveOne_clock]

theorem serveOrdered_clock (p : Program) (st : Nat) (m : Machine) (running : List Nat) (c : Nat)
    (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident) (s : Nat) :
    endTimes s ((serveOrdered p st m running c q b keys rs).1).timers = endTimes s m.timers ∧
      (getEngineState ((serveOrdered p st m running c q b keys rs).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((serveOrdered p st m running c q b keys rs).1).engines.length ↔ s < m.engines.length) := by
  cases keys <;> simp [serveOrdered, serveIn_clock]

theorem admitOne_clock (p : Program) (f st c i k : Nat) (q : Option Expr) (m : Machine) (b : Batch) (s : Nat) :
    endTimes s ((admitOne p f st c i k q m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((admitOne p f st c i k q m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((admitOne p f st c i k q m b).1).engines.length ↔ s < m.engines.length) := by
  simp only [admitOne]
  repeat' split
  all_goals simp_all [Machine.serveOne_clock, exec_clock]

theorem admitWaiting_clock (p : Program) (st c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine)
    (b : Batch) (s : Nat) : endTimes s ((admitWaiting p st c q g f m b).1).timers = endTimes s m.timers ∧
      (getEngineState ((admitWaiting p st c q g f m b).1).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < ((admitWaiting p st c q g f m b).1).engines.length ↔ s < m.engines.length) := by
  fun_induction admitWaiting p st c q g f m b <;> simp_all +zetaDelta [admitOne_clock]

/-- A timer that ends no iteration of stage `s` keeps its clock. -/
theorem fire_clock (p : Program) (m : Machine) (w : Wake) (s : Nat) (hw : w.endsOf s = false) :
    endTimes s (fire p m w).timers = endTimes s m.timers ∧
      (getEngineState (fire p m w).engines s).busy = (getEngineState m.engines s).busy ∧
      (s < (fire p m w).engines.length ↔ s < m.engines.length) := by
  cases w with
  | resume t => exact ⟨rfl, rfl, Iff.rfl⟩
  | arrival k =>
    simp only [fire]
    split
    · exact ⟨endTimes_insertTimer s _ (by rfl) _, rfl, Iff.rfl⟩
    · exact ⟨rfl, rfl, Iff.rfl⟩
  | fifoDone k t =>
    simp only [fire]
    split
    · exact ⟨rfl, rfl, Iff.rfl⟩
    · exact ⟨endTimes_insertTimer s _ (by rfl) _, rfl, Iff.rfl⟩
  | leaseEnd t id =>
    simp only [fire]
    split <;> exact ⟨rfl, rfl, Iff.rfl⟩
  | iterationEnd k =>
    have hk : k ≠ s := by
      intro e
      simp [Wake.endsOf, e] at hw
    simp [fire, hk, getEngineState_setEngineState_ne]

/-- Firing the end of stage `s`'s iteration: the engine is idle, and nothing else the invariant reads
changes (its records: `fire_records`). -/
theorem fire_self (p : Program) (m : Machine) (s : Nat) (hs : s < m.engines.length) :
    (fire p m (.iterationEnd s)).now = m.now ∧ (fire p m (.iterationEnd s)).timers = m.timers ∧
      (fire p m (.iterationEnd s)).engines.length = m.engines.length ∧
      (getEngineState (fire p m (.iterationEnd s)).engines s).busy = false := by
  refine ⟨fire_now p m _, ?_, ?_, ?_⟩
  · simp only [fire, Machine.advanceHolds_timers]
  · simp only [fire, setEngineState_length, Machine.advanceHolds_engines]
  · simp only [fire, Machine.advanceHolds_engines]
    rw [getEngineState_setEngineState_lt _ _ _ hs]

/-! ### The invariant: the records timed, the engine's iteration end pending exactly while it is busy -/

/-- The records (newest first) timed by the cost `c`: each starts no earlier than the one before it
(the next in the list) started plus that one's cost. -/
def recordsTimed (c : Iteration → Nat) : List Iteration → Prop
  | [] => True
  | [_] => True
  | a :: b :: rest => b.start + c b ≤ a.start ∧ recordsTimed c (b :: rest)

/-- When the newest record's iteration ends: its start plus its cost (0 without a record). -/
def readyAt (c : Iteration → Nat) : List Iteration → Nat
  | [] => 0
  | r :: _ => r.start + c r

theorem recordsTimed_cons (c : Iteration → Nat) (r : Iteration) :
    ∀ (rs : List Iteration), recordsTimed c rs → readyAt c rs ≤ r.start → recordsTimed c (r :: rs)
  | [], _, _ => trivial
  | _ :: _, h, hr => ⟨hr, h⟩

/-- Stage `s` of the machine: an engine whose records are timed by `c`, and either idle with no
iteration end pending and its newest iteration over (`readyAt` no later than the clock), or busy with
one iteration end pending, no earlier than its newest iteration's end. -/
def Machine.timed (c : Iteration → Nat) (s : Nat) (m : Machine) : Prop :=
  s < m.engines.length ∧ recordsTimed c (getEngineState m.engines s).records ∧
    (((getEngineState m.engines s).busy = false ∧ endTimes s m.timers = [] ∧
        readyAt c (getEngineState m.engines s).records ≤ m.now) ∨
      ((getEngineState m.engines s).busy = true ∧ ∃ x, endTimes s m.timers = [x] ∧
        readyAt c (getEngineState m.engines s).records ≤ x))

/-- A machine with the same pending iteration ends, busy, engines, records and clock at stage `s`
keeps the invariant. -/
theorem Machine.timed_frame {c : Iteration → Nat} {s : Nat} {m m' : Machine}
    (hk : endTimes s m'.timers = endTimes s m.timers ∧
      (getEngineState m'.engines s).busy = (getEngineState m.engines s).busy ∧
      (s < m'.engines.length ↔ s < m.engines.length))
    (hr : (getEngineState m'.engines s).records = (getEngineState m.engines s).records) (hn : m'.now = m.now)
    (h : m.timed c s) : m'.timed c s := by
  obtain ⟨he, hb, hl⟩ := hk
  obtain ⟨h0, h1, h2⟩ := h
  refine ⟨hl.mpr h0, by rw [hr]; exact h1, ?_⟩
  rw [hb, he, hr, hn]
  exact h2

theorem settle_timed (p : Program) (f : Nat) (m : Machine) (c : Iteration → Nat) (s : Nat) (h : m.timed c s) :
    (settle p f m).timed c s :=
  Machine.timed_frame (settle_clock p f m s) (settle_records p f m s) (settle_now p f m) h

/-! ### An iteration's start -/

/-- What `startIteration` does when it starts an iteration of stage `s`, from a machine `m'` that
planned it (the same pending ends, busy, engines, records and clock as `m`, where `s` is idle): the
record `r` kept, started now, and the iteration's end set its cost later. -/
theorem Machine.timed_start {c : Iteration → Nat} {s : Nat} {m m' : Machine} (hm : m.timed c s)
    (hb : (getEngineState m.engines s).busy = false)
    (hk : endTimes s m'.timers = endTimes s m.timers ∧
      (getEngineState m'.engines s).busy = (getEngineState m.engines s).busy ∧
      (s < m'.engines.length ↔ s < m.engines.length))
    (hr : (getEngineState m'.engines s).records = (getEngineState m.engines s).records) (hn : m'.now = m.now)
    (v : EngineState) (hvb : v.busy = true) (r : Iteration)
    (hvr : v.records = r :: (getEngineState m'.engines s).records) (hstart : r.start = m'.now)
    (cost : Nat) (hc : cost = c r) :
    ({ m' with engines := setEngineState m'.engines s v }.setTimer (m'.now + cost) (.iterationEnd s)).timed c s := by
  obtain ⟨he, _, hl⟩ := hk
  obtain ⟨h0, h1, h2⟩ := hm
  have hs' : s < m'.engines.length := hl.mpr h0
  have hget : getEngineState (setEngineState m'.engines s v) s = v := getEngineState_setEngineState_lt _ _ _ hs'
  rcases h2 with ⟨_, hend, hready⟩ | ⟨hbusy, _⟩
  · refine ⟨?_, ?_, Or.inr ⟨?_, m'.now + cost, ?_, ?_⟩⟩
    · show s < (setEngineState m'.engines s v).length
      rw [setEngineState_length]
      exact hs'
    · show recordsTimed c (getEngineState (setEngineState m'.engines s v) s).records
      rw [hget, hvr, hr]
      apply recordsTimed_cons c r _ h1
      rw [hstart, hn]
      exact hready
    · show (getEngineState (setEngineState m'.engines s v) s).busy = true
      rw [hget]
      exact hvb
    · show endTimes s (insertTimer ⟨m'.now + cost, m'.seq, .iterationEnd s⟩ m'.timers) = [m'.now + cost]
      apply endTimes_insertTimer_self s _ (by simp [Wake.endsOf])
      rw [he]
      exact hend
    · show readyAt c (getEngineState (setEngineState m'.engines s v) s).records ≤ m'.now + cost
      rw [hget, hvr, readyAt, hc, hstart]
      exact Nat.le_refl _
  · rw [hb] at hbusy
    cases hbusy

/-- An expression that reads only what an iteration's record keeps: numbers (and a pool's block,
a constant), `batch.tokens`, `batch.prefilled`, `batch.decoders` and the residents after the
scheduling (`StageVar` 0–3), and the batch's KV sums (`StageVar` 12–14: `batch.kv_decode`,
`batch.kv_prefill`, twice `batch.attention`); no attribute, clock, pool's state or `waiting_holds`. -/
def Expr.batchOnly : Expr → Bool
  | .num _ | .blockSize _ => true
  | .stageVar i => decide (i < 4) || decide (12 ≤ i ∧ i < 15)
  | .not e => e.batchOnly
  | .bin _ l r => l.batchOnly && r.batchOnly
  | .cond t a b => t.batchOnly && a.batchOnly && b.batchOnly
  | .min a b | .max a b => a.batchOnly && b.batchOnly
  | .floorDiv a _ => a.batchOnly
  | .attr _ | .now | .waited | .used _ | .free _ | .holders _ | .queued _ | .cachedIn _ => false

/-- `tests/test_leangen.py`'s hand-computed engine, `execute (1 + floor(batch.tokens / 4))`, reads only
the batch; a cost that reads a pool does not. -/
example : (Expr.bin .add (.num 1) (.floorDiv (.stageVar StageVar.tokens) 4)).batchOnly = true ∧
    (Expr.bin .add (.num 1) (.used 0)).batchOnly = false := ⟨rfl, rfl⟩

/-- `tests/test_leangen.py`'s KV cost, `execute (1 + floor(batch.kv_decode / 4) + ceil(batch.attention / 4) +
batch.kv_prefill)`, reads only the batch; `waiting.count` does not. -/
example : (Expr.bin .add (.bin .add (.bin .add (.num 1) (.floorDiv (.stageVar StageVar.kvDecode) 4))
      (.floorDiv (.bin .add (.stageVar StageVar.attention2) (.num 7)) 8)) (.stageVar StageVar.kvPrefill)).batchOnly = true ∧
    (Expr.stageVar StageVar.waiting).batchOnly = false := ⟨rfl, rfl⟩

/-- An iteration's cost under `execute (e)`, read off its record (its KV sums included; `waiting.count`
is not in it, read as 0). -/
def Iteration.costOf (e : Expr) (r : Iteration) : Nat :=
  eval ⟨[], [], 0, costVars r.tokens r.prefilled r.decoders r.residents 0 r.kvDecode r.kvPrefill r.attention2⟩ [] 0 0 e

/-- An expression that reads only the batch is what the record's cost says, whatever else the
engine's view holds. -/
theorem eval_batchOnly (caps : List Nat) (pools : List PoolState) (serial : Nat) (attrs : List Nat)
    (now w t pf d n wt kd kp at2 : Nat) :
    ∀ e : Expr, e.batchOnly = true →
      eval ⟨caps, pools, serial, costVars t pf d n wt kd kp at2⟩ attrs now w e =
        eval ⟨[], [], 0, costVars t pf d n 0 kd kp at2⟩ [] 0 0 e
  | .num _, _ => rfl
  | .blockSize _, _ => rfl
  | .stageVar i, h => by
    -- the two views differ only at `waiting_holds` (4), which a batch-only expression does not read
    match i, h with
    | 0, _ => rfl
    | 1, _ => rfl
    | 2, _ => rfl
    | 3, _ => rfl
    | 4, h => simp [Expr.batchOnly] at h
    | k + 5, _ => first | rfl | simp [eval, costVars, getAt]
  | .not e, h => by
    simp only [Expr.batchOnly] at h
    simp only [eval, eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 e h]
  | .bin _ l r, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [eval, eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 l h.1,
      eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 r h.2]
  | .cond x a b, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [eval, eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 x h.1.1,
      eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 a h.1.2,
      eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 b h.2]
  | .min a b, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [eval, eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 a h.1,
      eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 b h.2]
  | .max a b, h => by
    simp only [Expr.batchOnly, Bool.and_eq_true] at h
    simp only [eval, eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 a h.1,
      eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 b h.2]
  | .floorDiv a _, h => by
    simp only [Expr.batchOnly] at h
    simp only [eval, eval_batchOnly caps pools serial attrs now w t pf d n wt kd kp at2 a h]
  | .attr _, h | .now, h | .waited, h | .used _, h | .free _, h | .holders _, h | .queued _, h
  | .cachedIn _, h => by simp [Expr.batchOnly] at h

@[simp] theorem Machine.setTimer_endTimes_ne (m : Machine) (t k s : Nat) (h : k ≠ s) :
    endTimes s (m.setTimer t (.iterationEnd k)).timers = endTimes s m.timers :=
  endTimes_insertTimer s _ (by simp [Wake.endsOf, h]) _

/-- `startIteration` of stage `s` from an idle engine whose `execute` reads only the batch. -/
theorem startIteration_timed_self (p : Program) (f s : Nat) (eng : Engine) (m : Machine)
    (hcost : eng.cost.batchOnly = true) (hb : (getEngineState m.engines s).busy = false)
    (hm : m.timed (Iteration.costOf eng.cost) s) : (startIteration p f s eng m).timed (Iteration.costOf eng.cost) s := by
  simp only [startIteration]
  split
  · refine Machine.timed_frame ?_ ?_ ?_ hm <;>
      simp [admitWaiting_clock, serveOrdered_clock, admitWaiting_records, serveOrdered_records, admitWaiting_now,
        serveOrdered_now]
  · split
    · refine Machine.timed_frame ?_ ?_ ?_ hm <;>
        simp [admitWaiting_clock, serveOrdered_clock, admitWaiting_records, serveOrdered_records, admitWaiting_now,
          serveOrdered_now]
    · apply Machine.timed_start hm hb
      case hk => simp [admitWaiting_clock, serveOrdered_clock]
      case hr => simp [admitWaiting_records, serveOrdered_records]
      case hn => simp [admitWaiting_now, serveOrdered_now]
      case hvb => rfl
      case hvr => rfl
      case hstart => rfl
      case hc =>
        simp only [engineView, Iteration.costOf]
        exact eval_batchOnly _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ hcost

/-- `startIteration` of another stage keeps stage `s`'s invariant. -/
theorem startIteration_timed_ne (p : Program) (f s' : Nat) (eng : Engine) (m : Machine) (c : Iteration → Nat)
    (s : Nat) (hne : s' ≠ s) (hm : m.timed c s) : (startIteration p f s' eng m).timed c s := by
  simp only [startIteration]
  repeat' split
  all_goals
    refine Machine.timed_frame ?_ ?_ ?_ hm <;>
      simp [hne, getEngineState_setEngineState_ne, admitWaiting_clock, serveOrdered_clock, admitWaiting_records,
        serveOrdered_records, admitWaiting_now, serveOrdered_now]

/-! ### The run -/

section Run

variable (p : Program) (s e : Nat) (hs : getService p.stages s = .step e)
  (hcost : (getEngine p.engines e).cost.batchOnly = true)

include hs hcost in
/-- `startIteration` of any engine stage, from an idle engine there. -/
theorem startIteration_timed (f : Nat) {s0 e0 : Nat} {m : Machine} (h0 : getService p.stages s0 = .step e0)
    (hb : (getEngineState m.engines s0).busy = false)
    (hm : m.timed (Iteration.costOf (getEngine p.engines e).cost) s) :
    (startIteration p f s0 (getEngine p.engines e0) m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  by_cases h : s0 = s
  · subst h
    rw [hs] at h0
    cases h0
    exact startIteration_timed_self p f s0 _ m hcost hb hm
  · exact startIteration_timed_ne p f s0 _ m _ s h hm

include hs hcost in
theorem startPass_timed (f : Nat) (ss : List Service) (s0 : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    (∀ k, getService ss k = getService p.stages (s0 + k)) →
      m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (startPass p f ss s0 tried m a).1.timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction startPass p f ss s0 tried m a <;> intro hss hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (getService_tail hss) hm)
    | (apply settle_timed
       apply startIteration_timed p s e hs hcost
       · have h0 := hss 0
         simp only [getService, Nat.add_zero] at h0
         exact h0.symm
       · simp_all +zetaDelta
       · exact hm)
    | (rename_i ih
       apply ih (getService_tail hss)
       apply settle_timed
       apply startIteration_timed p s e hs hcost
       · have h0 := hss 0
         simp only [getService, Nat.add_zero] at h0
         exact h0.symm
       · simp_all +zetaDelta
       · exact hm)

include hs hcost in
theorem startEngines_timed (f n : Nat) (tried : List Nat) (m : Machine) :
    m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (startEngines p f n tried m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction startEngines p f n tried m <;> intro hm
  all_goals first
    | exact hm
    | exact startPass_timed p s e hs hcost _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm
    | (rename_i ih; exact ih (startPass_timed p s e hs hcost _ _ _ _ _ _ (fun k => by rw [Nat.zero_add]) hm))

include hs hcost in
theorem endOfInstant_timed (f : Nat) (m : Machine) (hm : m.timed (Iteration.costOf (getEngine p.engines e).cost) s) :
    (endOfInstant p f m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  simp only [endOfInstant]
  split
  · exact hm
  · exact startEngines_timed p s e hs hcost _ _ _ _ hm

end Run

/-- The event loop's step: the next timer popped, the clock at its time (never back), and fired. The
end of stage `s`'s iteration leaves it idle at a clock no earlier than that iteration's end. -/
theorem timed_pop_fire (p : Program) (m : Machine) (c : Iteration → Nat) (s : Nat) (t : Timer) (ts : List Timer)
    (ht : m.timers = t :: ts) (hm : m.timed c s) :
    (fire p { m with now := Nat.max m.now t.time, timers := ts } t.wake).timed c s := by
  obtain ⟨h0, h1, h2⟩ := hm
  have hle : m.now ≤ Nat.max m.now t.time := Nat.le_max_left _ _
  have htle : t.time ≤ Nat.max m.now t.time := Nat.le_max_right _ _
  cases hw : t.wake.endsOf s with
  | false =>
    have hts : endTimes s ts = endTimes s m.timers := by
      rw [ht]
      simp [endTimes, hw]
    obtain ⟨k1, k2, k3⟩ := fire_clock p { m with now := Nat.max m.now t.time, timers := ts } t.wake s hw
    have k4 := fire_records p { m with now := Nat.max m.now t.time, timers := ts } t.wake s
    have k5 := fire_now p { m with now := Nat.max m.now t.time, timers := ts } t.wake
    refine ⟨k3.mpr h0, ?_, ?_⟩
    · rw [k4]; exact h1
    · rw [k1, k2, k4, k5]
      dsimp only
      rw [hts]
      rcases h2 with ⟨a, b, d⟩ | ⟨a, x, b, d⟩
      · exact Or.inl ⟨a, b, Nat.le_trans d hle⟩
      · exact Or.inr ⟨a, x, b, d⟩
  | true =>
    have hwe := Wake.endsOf_eq hw
    have hts : endTimes s m.timers = t.time :: endTimes s ts := by
      rw [ht]
      simp [endTimes, hw]
    rw [hwe]
    rcases h2 with ⟨_, he, _⟩ | ⟨_, x, he, hx⟩
    · rw [hts] at he
      cases he
    · rw [hts] at he
      simp only [List.cons.injEq] at he
      obtain ⟨hx', hnil⟩ := he
      obtain ⟨k5, k2, k3, kb⟩ := fire_self p { m with now := Nat.max m.now t.time, timers := ts } s h0
      have k4 := fire_records p { m with now := Nat.max m.now t.time, timers := ts } (.iterationEnd s) s
      refine ⟨?_, ?_, Or.inl ⟨kb, ?_, ?_⟩⟩
      · rw [k3]; exact h0
      · rw [k4]; exact h1
      · rw [k2]; exact hnil
      · rw [k4, k5]
        dsimp only
        rw [← hx'] at hx
        exact Nat.le_trans hx htle

section Run

variable (p : Program) (s e : Nat) (hs : getService p.stages s = .step e)
  (hcost : (getEngine p.engines e).cost.batchOnly = true)

include hs hcost in
theorem loop_timed (f : Nat) (m : Machine) :
    m.timed (Iteration.costOf (getEngine p.engines e).cost) s →
      (loop p f m).timed (Iteration.costOf (getEngine p.engines e).cost) s := by
  fun_induction loop p f m with
  | case1 m => intro hm; exact hm
  | case2 f m h => intro hm; exact hm
  | case3 f m t ts h ih =>
    intro hm
    exact ih (endOfInstant_timed p s e hs hcost _ _ (settle_timed p _ _ _ s (timed_pop_fire p m _ s t ts h hm)))

end Run

theorem idleEngines_length : ∀ (ss : List Service), (idleEngines ss).length = ss.length
  | [] => rfl
  | _ :: ss => by simp [idleEngines, idleEngines_length ss]

theorem getEngineState_idleEngines_busy : ∀ (ss : List Service) (j : Nat), (getEngineState (idleEngines ss) j).busy = false
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | _ :: ss, j + 1 => getEngineState_idleEngines_busy ss j

theorem getService_lt : ∀ (ss : List Service) (s e : Nat), getService ss s = .step e → s < ss.length
  | [], _, _, h => by simp [getService] at h
  | _ :: _, 0, _, _ => by simp
  | _ :: xs, k + 1, e, h => by
    simp only [getService] at h
    have := getService_lt xs k e h
    simp only [List.length_cons]
    omega

theorem traceTimers_endTimes (s : Nat) : ∀ (ts : List Nat) (k : Nat), endTimes s (traceTimers ts k) = []
  | [], _ => rfl
  | _ :: ts, k => by simp [traceTimers, endTimes, Wake.endsOf, traceTimers_endTimes s ts (k + 1)]

theorem initial_timed (p : Program) (c : Iteration → Nat) (s e : Nat) (hs : getService p.stages s = .step e) :
    (initial p).timed c s := by
  have he : (initial p).engines = idleEngines p.stages := by
    unfold initial; dsimp only; split <;> rfl
  have ht : endTimes s (initial p).timers = [] := by
    unfold initial
    dsimp only
    split
    · dsimp only
      split <;> simp [endTimes, Wake.endsOf]
    · dsimp only
      exact traceTimers_endTimes s _ 0
  refine ⟨?_, ?_, Or.inl ⟨?_, ht, ?_⟩⟩
  · rw [he, idleEngines_length]
    exact getService_lt _ _ _ hs
  · rw [he, getEngineState_idleEngines_records]
    trivial
  · rw [he, getEngineState_idleEngines_busy]
  · rw [he, getEngineState_idleEngines_records]
    exact Nat.zero_le _

/-- Timed, for every program of the fragment and any fuel: every iteration record of an engine stage
whose `execute` reads only the batch (stage `s` is `Service.step e` and engine `e`'s cost is
`Expr.batchOnly`) starts no earlier than the one before it started plus that one's cost, the
`execute` read off its record (`Iteration.costOf`). -/
theorem runProgram_timed (p : Program) (fuel s e : Nat) (hs : getService p.stages s = .step e)
    (hcost : (getEngine p.engines e).cost.batchOnly = true) :
    recordsTimed (Iteration.costOf (getEngine p.engines e).cost) (getEngineState (runProgram p fuel).engines s).records :=
  (loop_timed p s e hs hcost fuel _
    (endOfInstant_timed p s e hs hcost fuel _ (settle_timed p fuel _ _ s (initial_timed p _ s e hs)))).2.1

/-! ### The token rate with the iteration's cost, for a program's engine -/

theorem timed_append (g : Nat → Nat) : ∀ (l : List RateCost.Iteration) (y : RateCost.Iteration),
    RateCost.Timed g l → (∀ x, l.getLast? = some x → x.start + g x.tokens ≤ y.start) → RateCost.Timed g (l ++ [y])
  | [], _, _, _ => trivial
  | [a], _, _, h => ⟨h a rfl, trivial⟩
  | a :: b :: rest, y, ht, h =>
    ⟨ht.1, timed_append g (b :: rest) y ht.2 (fun x hx => h x (by rw [List.getLast?_cons_cons]; exact hx))⟩

/-- Records timed by a cost that is a function of their tokens are `RateCost.Timed` by it, oldest
first. -/
theorem rateIterations_timed (g : Nat → Nat) (c : Iteration → Nat) (hg : ∀ r, c r = g r.tokens) :
    ∀ (recs : List Iteration), recordsTimed c recs → RateCost.Timed g (rateIterations recs)
  | [], _ => by simp [rateIterations, RateCost.Timed]
  | [a], _ => by simp [rateIterations, RateCost.Timed]
  | a :: b :: rest, h => by
    have ih := rateIterations_timed g c hg (b :: rest) h.2
    have e1 : rateIterations (a :: b :: rest) =
        rateIterations (b :: rest) ++ [({ start := a.start, tokens := a.tokens } : RateCost.Iteration)] := by
      simp [rateIterations]
    have e2 : (rateIterations (b :: rest)).getLast? =
        some ({ start := b.start, tokens := b.tokens } : RateCost.Iteration) := by
      simp [rateIterations]
    rw [e1]
    refine timed_append g _ _ ih ?_
    intro x hx
    rw [e2] at hx
    cases hx
    have h1 := h.1
    rw [hg] at h1
    exact h1

/-- The records of a program's engine stage whose `execute` is a function `g` of `batch.tokens` are
`RateCost.Timed` by `g`, in every run. -/
theorem runProgram_timed_tokens (p : Program) (fuel s e : Nat) (g : Nat → Nat) (hs : getService p.stages s = .step e)
    (hcost : (getEngine p.engines e).cost.batchOnly = true)
    (hg : ∀ r, Iteration.costOf (getEngine p.engines e).cost r = g r.tokens) :
    RateCost.Timed g (rateIterations (getEngineState (runProgram p fuel).engines s).records) :=
  rateIterations_timed g _ hg _ (runProgram_timed p fuel s e hs hcost)

/-- The token rate of a program's engine of constant budget `B` and `execute (a + b * batch.tokens)`
(Dai et al. 2025, Th. 2(a); Bari et al., Th. 1): `served · (a + b·B) ≤ B · start` at every
iteration, in every run of the program and any fuel. -/
theorem runProgram_affine_token_rate (p : Program) (fuel s e B a b : Nat) (hs : getService p.stages s = .step e)
    (hB : (getEngine p.engines e).budget = .num B)
    (hc : (getEngine p.engines e).cost = .bin .add (.num a) (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    RateCost.RateHolds (a + b * B) B 0 (rateIterations (getEngineState (runProgram p fuel).engines s).records) := by
  have hcost : (getEngine p.engines e).cost.batchOnly = true := by
    rw [hc]
    rfl
  have ht := runProgram_timed_tokens p fuel s e (fun x => a + b * x) hs hcost (fun r => by rw [hc]; rfl)
  exact RateCost.affine_token_rate a b B _ (rateIterations_within p fuel s e B hs hB) ht

/-- The same under `execute (a * ceil(batch.tokens / g) + b * batch.tokens)` (lowered with
`⌈x / g⌉ = ⌊(x + (g - 1)) / g⌋`) and a budget of `m` tiles (`B = g·m`): `served · (a·m + b·B) ≤ B ·
start`. -/
theorem runProgram_tiled_token_rate (p : Program) (fuel s e a b g m : Nat) (hg : 0 < g)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num (g * m))
    (hc : (getEngine p.engines e).cost =
      .bin .add (.bin .mul (.num a) (.floorDiv (.bin .add (.stageVar StageVar.tokens) (.num (g - 1))) g))
        (.bin .mul (.num b) (.stageVar StageVar.tokens))) :
    RateCost.RateHolds (a * m + b * (g * m)) (g * m) 0
      (rateIterations (getEngineState (runProgram p fuel).engines s).records) := by
  have hcost : (getEngine p.engines e).cost.batchOnly = true := by
    rw [hc]
    rfl
  have ht := runProgram_timed_tokens p fuel s e (fun x => a * ((x + g - 1) / g) + b * x) hs hcost (fun r => by
    rw [hc]
    show a * ((r.tokens + (g - 1)) / g) + b * r.tokens = a * ((r.tokens + g - 1) / g) + b * r.tokens
    have e1 : r.tokens + (g - 1) = r.tokens + g - 1 := by omega
    rw [e1])
  exact RateCost.tiled_token_rate a b g m hg _ (rateIterations_within p fuel s e (g * m) hs hB) ht

end Serq.Kernel
