module

public import Serq.KernelTiledRun

/-! # No thread twice a resident: where every thread is, through every run (issue 13)

`Serq.KernelTiledRun` reduces `full_or_short` for every run (`runProgram_full_or_short_of_distinct`) to
an invariant that keeps no thread twice among an idle engine's residents (`DistinctInvariant`). This
module gives one. A session's thread is, at any point of a run, in at most one place: the ready threads
(`Machine.ready`), a timer that will make it ready (a delay run's end `resume`, a fifo run's end
`fifoDone`, its `arrival`), a fifo stage's queue (`Job`), a pool's queue (`Waiter`), or an engine's
residents (`Resident`); or nowhere (its session ended, or the thread is the one `exec` runs now).
`Machine.placed m g t` counts the places of `t` (`g`: the program's renewal gap, below), and the
invariant is `Placed g m`: every thread is placed at most once, and the thread list's entry `j` is
thread `j` (or one that has nothing left to run, `SerialOk`). Every function of the machine takes a
thread out of a place only to put it in another, or to run it (`exec`, which places the thread it runs
at most once: `exec_moved`); so every function keeps `Placed` (`Keeps`), and `Placed` gives
`threadsDistinct` for every engine.

Under `arrive renewal(g)` (`g ≠ 0`) an arrival's event makes its session ready and sets the next
session's arrival; a pending arrival of session `u` is counted as a place of every thread from `u` on
(`wakeOcc`), so that the event is neutral (`u` placed once more, the pending arrival of `u + 1` placing
every thread from `u + 1`), and the sessions still to arrive are placed by it. A trace's arrivals are
all set as the run starts, each counted once for its own session.

What the proof excludes, on the program's value (`DistinctProgram`, decided by
`DistinctProgram.of_check`):

* preemption (`preemptModes` all 0, `preempt none`): a victim's hold goes back to a queue, which would
  need the hold a release frame carries to be its own thread's;
* a trace together with a renewal gap (`gap = 0 ∨ arrivalTimes = []`; a program's arrival law is a
  batch, a renewal or a trace, not two): an arrival would set the next one's timer beside the trace's own.

Pools admitted by an engine (`pool reqs on S`) are covered: an engine's admission takes the hold out of
its queue and runs its thread at once (`admitOne_keeps`). So every run of every program with
`DistinctProgram` has no thread twice a resident of any engine (`runProgram_threadsDistinct`, through
`runProgram_placed`), and `Placed p.gap` is a `DistinctInvariant` of it (`Placed.distinctInvariant`).
`runProgram_full_or_short` is then `full_or_short` for every run with hypotheses on the program only
(those of `runProgram_full_or_short_of_distinct`, among them that no pool is admitted by the engine `s`
the statement is about, `hvia`, which `KernelFull`'s plan of one iteration needs, and `DistinctProgram`).
An engine that admits its own queue, as every engine program of `examples/` does, is
`Serq.Kernel.runProgram_full_or_short_admitting` (`KernelAdmitFull.lean`), which needs no `hvia`.
-/
@[expose] public section

namespace Serq.Kernel

/-! ### How many times a thread is placed -/

/-- 1 when `t` is `u`, else 0. -/
def bump (t u : Nat) : Nat := if t = u then 1 else 0

/-- How many times `t` is in the list. -/
def occ (t : Nat) : List Nat → Nat
  | [] => 0
  | x :: xs => bump t x + occ t xs

/-- A timer that will make thread `t` ready places it (an iteration's end and a lease's do not). Under
`arrive renewal(g)` (`g ≠ 0`) session `u`'s arrival, which sets the next arrival's timer when it fires,
places every thread from `u` on: the sessions still to arrive. -/
def wakeOcc (g t : Nat) : Wake → Nat
  | .resume u => bump t u
  | .fifoDone _ u => bump t u
  | .arrival u => if g = 0 then bump t u else if u ≤ t then 1 else 0
  | .iterationEnd _ => 0
  | .leaseEnd _ _ => 0

def occTimers (g t : Nat) : List Timer → Nat
  | [] => 0
  | x :: xs => wakeOcc g t x.wake + occTimers g t xs

def occJobs (t : Nat) : List Job → Nat
  | [] => 0
  | j :: js => bump t j.thread + occJobs t js

def occStages (t : Nat) : List StageState → Nat
  | [] => 0
  | st :: sts => occJobs t st.queue + occStages t sts

def occWaiters (t : Nat) : List Waiter → Nat
  | [] => 0
  | w :: ws => bump t w.thread + occWaiters t ws

def occPools (t : Nat) : List PoolState → Nat
  | [] => 0
  | q :: qs => occWaiters t q.queue + occPools t qs

def occEngines (t : Nat) : List EngineState → Nat
  | [] => 0
  | e :: es => occ t (threadsOf e.residents) + occEngines t es

/-- The places of thread `t`: the ready threads, the timers, the fifo stages' queues, the pools' queues,
the engines' residents. -/
def Machine.placed (m : Machine) (g t : Nat) : Nat :=
  occ t m.ready + occTimers g t m.timers + occStages t m.stages + occPools t m.pools + occEngines t m.engines

/-- Every hold a release frame of the continuation carries is thread `j`'s: a preemption puts that hold
back in a queue, where it places the thread it names. -/
def OwnFrames (j : Nat) (k : List Frame) : Prop := ∀ held w, Frame.release held w ∈ k → w.thread = j

/-- The thread list's entry `j` is thread `j`, whose frames carry its own holds, or a thread with nothing
left to run. -/
def SerialOk (ts : List Thread) : Prop :=
  ∀ j, ((getThread ts j).serial = j ∧ OwnFrames j (getThread ts j).k) ∨ (getThread ts j).k = []

/-- Every hold waiting in a pool's queue names a thread whose entry is its own (its admission puts the
thread back at that entry, with a release frame carrying the hold). -/
def QueuedOk (ts : List Thread) (ps : List PoolState) : Prop :=
  ∀ q ∈ ps, ∀ w ∈ q.queue, (getThread ts w.thread).serial = w.thread

/-- What a function of the machine keeps besides the places: the threads' entries and the waiting holds'. -/
def Owned (m : Machine) : Prop := SerialOk m.threads ∧ QueuedOk m.threads m.pools

/-- The invariant: the threads are in their places, their holds are their own, and no thread is placed
twice. -/
def Placed (g : Nat) (m : Machine) : Prop := Owned m ∧ ∀ t, m.placed g t ≤ 1

variable {g : Nat}

/-! ### Lists -/

theorem occ_appendNat (t v : Nat) : ∀ l : List Nat, occ t (appendNat l v) = occ t l + bump t v
  | [] => by simp [appendNat, occ]
  | x :: xs => by simp only [appendNat, occ, occ_appendNat t v xs]; omega

theorem occ_appendNats (t : Nat) : ∀ a b : List Nat, occ t (appendNats a b) = occ t a + occ t b
  | [], b => by simp [appendNats, occ]
  | x :: xs, b => by simp only [appendNats, occ, occ_appendNats t xs b]; omega

theorem occTimers_insert (t : Nat) (tm : Timer) : ∀ l : List Timer,
    occTimers g t (insertTimer tm l) = occTimers g t l + wakeOcc g t tm.wake
  | [] => by simp [insertTimer, occTimers]
  | x :: xs => by
    simp only [insertTimer]
    split
    · simp only [occTimers]; omega
    · simp only [occTimers, occTimers_insert t tm xs]; omega

theorem occJobs_append (t : Nat) (j : Job) : ∀ l : List Job, occJobs t (appendJob l j) = occJobs t l + bump t j.thread
  | [] => by simp [appendJob, occJobs]
  | x :: xs => by simp only [appendJob, occJobs, occJobs_append t j xs]; omega

theorem occWaiters_append (t : Nat) (w : Waiter) : ∀ l : List Waiter,
    occWaiters t (appendWaiter l w) = occWaiters t l + bump t w.thread
  | [] => by simp [appendWaiter, occWaiters]
  | x :: xs => by simp only [appendWaiter, occWaiters, occWaiters_append t w xs]; omega

theorem occWaiters_insert (t : Nat) (tn : List Nat) (ths : List Thread) (now created serial : Nat) (w : Waiter) :
    ∀ l : List Waiter, occWaiters t (insertByCreation tn ths now created serial w l) = occWaiters t l + bump t w.thread
  | [] => by simp [insertByCreation, occWaiters]
  | x :: xs => by
    simp only [insertByCreation]
    split
    · simp only [occWaiters]; omega
    · simp only [occWaiters, occWaiters_insert t tn ths now created serial w xs]; omega

theorem occWaiters_remove (t : Nat) : ∀ (l : List Waiter) (j : Nat), j < countWaiters l →
    occWaiters t (removeWaiter l j) + bump t (getWaiter l j).thread = occWaiters t l
  | [], _, h => by simp [countWaiters] at h
  | w :: ws, 0, _ => by simp only [removeWaiter, getWaiter, occWaiters]; omega
  | w :: ws, j + 1, h => by
    have := occWaiters_remove t ws j (by simp only [countWaiters] at h; omega)
    simp only [removeWaiter, getWaiter, occWaiters]; omega

theorem occ_insertResident (t : Nat) (r : Resident) : ∀ rs : List Resident,
    occ t (threadsOf (insertResident r rs)) = occ t (threadsOf rs) + bump t r.thread
  | [] => by simp [insertResident, threadsOf, occ]
  | x :: xs => by
    simp only [insertResident]
    split
    · simp only [threadsOf, occ]; omega
    · simp only [threadsOf, occ, occ_insertResident t r xs]; omega

theorem occ_applyTokens (t t0 t1 : Nat) (gs : List Progress) (rs : List Resident) :
    occ t (threadsOf (applyTokens t0 t1 gs rs).2.1) + occ t (applyTokens t0 t1 gs rs).2.2 = occ t (threadsOf rs) := by
  fun_induction applyTokens t0 t1 gs rs <;> simp_all +zetaDelta [threadsOf, occ] <;> omega

theorem occStages_set (t : Nat) : ∀ (l : List StageState) (i : Nat) (v : StageState),
    occStages t (setStage l i v) + occJobs t (getStage l i).queue ≤ occStages t l + occJobs t v.queue
  | [], _, _ => by simp [setStage, getStage, occStages, occJobs]
  | _ :: _, 0, _ => by simp only [setStage, getStage, occStages]; omega
  | _ :: l, i + 1, v => by
    have := occStages_set t l i v
    simp only [setStage, getStage, occStages]; omega

theorem occPools_set (t : Nat) : ∀ (l : List PoolState) (i : Nat) (v : PoolState),
    occPools t (setPool l i v) + occWaiters t (getPool l i).queue ≤ occPools t l + occWaiters t v.queue
  | [], _, _ => by simp [setPool, getPool, occPools, occWaiters]
  | _ :: _, 0, _ => by simp only [setPool, getPool, occPools]; omega
  | _ :: l, i + 1, v => by
    have := occPools_set t l i v
    simp only [setPool, getPool, occPools]; omega

theorem occEngines_set (t : Nat) : ∀ (l : List EngineState) (i : Nat) (v : EngineState),
    occEngines t (setEngineState l i v) + occ t (threadsOf (getEngineState l i).residents) ≤
      occEngines t l + occ t (threadsOf v.residents)
  | [], _, _ => by simp [setEngineState, getEngineState, occEngines, threadsOf, occ]
  | _ :: _, 0, _ => by simp only [setEngineState, getEngineState, occEngines]; omega
  | _ :: l, i + 1, v => by
    have := occEngines_set t l i v
    simp only [setEngineState, getEngineState, occEngines]; omega

theorem occPools_of_queues (t : Nat) : ∀ (ps ps' : List PoolState), ps'.map PoolState.queue = ps.map PoolState.queue →
    occPools t ps' = occPools t ps
  | [], [], _ => rfl
  | [], _ :: _, h => by simp at h
  | _ :: _, [], h => by simp at h
  | q :: ps, q' :: ps', h => by
    simp only [List.map_cons, List.cons.injEq] at h
    simp only [occPools, h.1, occPools_of_queues t ps ps' h.2]

theorem getThread_setThread : ∀ (ts : List Thread) (i j : Nat) (v : Thread),
    getThread (setThread ts i v) j = getThread ts j ∨ (i = j ∧ getThread (setThread ts i v) j = v)
  | [], _, _, _ => Or.inl rfl
  | _ :: _, 0, 0, _ => Or.inr ⟨rfl, rfl⟩
  | _ :: _, 0, _ + 1, _ => Or.inl rfl
  | _ :: _, _ + 1, 0, _ => Or.inl rfl
  | _ :: ts, i + 1, j + 1, v => by
    simp only [setThread, getThread]
    rcases getThread_setThread ts i j v with h | ⟨h1, h2⟩
    · exact Or.inl h
    · exact Or.inr ⟨by rw [h1], h2⟩

theorem SerialOk.set {ts : List Thread} (h : SerialOk ts) (v : Thread) (hv : OwnFrames v.serial v.k) :
    SerialOk (setThread ts v.serial v) := by
  intro j
  rcases getThread_setThread ts v.serial j v with e | ⟨e1, e2⟩
  · rw [e]; exact h j
  · rw [e2]; exact Or.inl ⟨e1, e1 ▸ hv⟩

theorem OwnFrames.nil (j : Nat) : OwnFrames j [] := fun _ _ h => by simp at h

/-- An entry's frames carry its own holds (a thread with nothing left to run carries none). -/
theorem SerialOk.own {ts : List Thread} (h : SerialOk ts) (u : Nat) :
    OwnFrames (getThread ts u).serial (getThread ts u).k := by
  rcases h u with ⟨e, hk⟩ | e
  · rw [e]; exact hk
  · rw [e]; exact OwnFrames.nil _

theorem QueuedOk.set {ts : List Thread} {ps : List PoolState} (h : QueuedOk ts ps) (v : Thread) :
    QueuedOk (setThread ts v.serial v) ps := by
  intro q hq w hw
  rcases getThread_setThread ts v.serial w.thread v with e | ⟨e1, e2⟩
  · rw [e]; exact h q hq w hw
  · rw [e2]; exact e1

theorem Owned.put {m : Machine} (h : Owned m) (th : Thread) (hk : OwnFrames th.serial th.k) : Owned (m.put th) :=
  ⟨h.1.set th hk, h.2.set th⟩

theorem QueuedOk.of_queues {ts : List Thread} {ps ps' : List PoolState}
    (h : ps'.map PoolState.queue = ps.map PoolState.queue) (hq : QueuedOk ts ps) : QueuedOk ts ps' := by
  intro q hq' w hw
  have hm : q.queue ∈ ps.map PoolState.queue := h ▸ List.mem_map.2 ⟨q, hq', rfl⟩
  obtain ⟨q', hq'', e⟩ := List.mem_map.1 hm
  exact hq q' hq'' w (e ▸ hw)

theorem QueuedOk.get {ts : List Thread} : ∀ {ps : List PoolState}, QueuedOk ts ps → ∀ (i : Nat) (w : Waiter),
    w ∈ (getPool ps i).queue → (getThread ts w.thread).serial = w.thread
  | [], _, _, w, hw => by simp [getPool] at hw
  | q :: _, h, 0, w, hw => h q (by simp) w hw
  | _ :: _, h, i + 1, w, hw => QueuedOk.get (fun q hq => h q (List.mem_cons_of_mem _ hq)) i w hw

theorem QueuedOk.setPool {ts : List Thread} {ps : List PoolState} (h : QueuedOk ts ps) (i : Nat) (v : PoolState)
    (hv : ∀ w ∈ v.queue, (getThread ts w.thread).serial = w.thread) : QueuedOk ts (setPool ps i v) := by
  intro q hq w hw
  rcases mem_setPool ps i v q hq with hq | hq
  · exact h q hq w hw
  · rw [hq] at hw; exact hv w hw

/-! ### Frames and queues: whose holds they carry -/

theorem OwnFrames.tail {j : Nat} {fr : Frame} {k : List Frame} (h : OwnFrames j (fr :: k)) : OwnFrames j k :=
  fun held w hm => h held w (List.mem_cons_of_mem _ hm)

theorem OwnFrames.stmts {j : Nat} {k : List Frame} (b : List Stmt) (h : OwnFrames j k) : OwnFrames j (.stmts b :: k) :=
  fun held w hm => by
    simp only [List.mem_cons, reduceCtorEq, false_or] at hm
    exact h held w hm

theorem OwnFrames.submit {j : Nat} {k : List Frame} (h : OwnFrames j k) : OwnFrames j (.submit :: k) :=
  fun held w hm => by
    simp only [List.mem_cons, reduceCtorEq, false_or] at hm
    exact h held w hm

theorem OwnFrames.answer {j : Nat} {k : List Frame} (h : OwnFrames j k) : OwnFrames j (.answer :: k) :=
  fun held w hm => by
    simp only [List.mem_cons, reduceCtorEq, false_or] at hm
    exact h held w hm

theorem OwnFrames.release {j : Nat} {k : List Frame} (held : List Held) {w : Waiter} (hw : w.thread = j)
    (h : OwnFrames j k) : OwnFrames j (.release held w :: k) :=
  fun held' w' hm => by
    simp only [List.mem_cons, Frame.release.injEq] at hm
    rcases hm with ⟨_, e⟩ | hm
    · rw [e]; exact hw
    · exact h _ _ hm

theorem OwnFrames.head {j : Nat} {held : List Held} {w : Waiter} {k : List Frame}
    (h : OwnFrames j (.release held w :: k)) : w.thread = j :=
  h held w (by simp)

theorem releaseIn_own (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i j : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), OwnFrames j k → OwnFrames j (releaseIn blocks caps serial attrs now i ps k).2
  | _, [], h => h
  | _, .answer :: _, h => h
  | ps, .release held w :: k, h => by
    simp only [releaseIn]
    split
    · exact OwnFrames.release _ h.head h.tail
    · exact OwnFrames.release _ h.head (releaseIn_own blocks caps serial attrs now i j ps k h.tail)
  | ps, .stmts b :: k, h => OwnFrames.stmts b (releaseIn_own blocks caps serial attrs now i j ps k h.tail)
  | ps, .submit :: k, h => OwnFrames.submit (releaseIn_own blocks caps serial attrs now i j ps k h.tail)

theorem growPart_own (j : Nat) : ∀ (k : List Frame) (i u : Nat), OwnFrames j k → OwnFrames j (growPart k i u)
  | [], _, _, h => h
  | .answer :: _, _, _, h => h
  | .release held w :: k, i, u, h => by
    simp only [growPart]
    split
    · exact OwnFrames.release _ h.head h.tail
    · exact OwnFrames.release _ h.head (growPart_own j k i u h.tail)
  | .stmts b :: k, i, u, h => OwnFrames.stmts b (growPart_own j k i u h.tail)
  | .submit :: k, i, u, h => OwnFrames.submit (growPart_own j k i u h.tail)

theorem advancePart_own (j : Nat) : ∀ (k : List Frame) (i u : Nat), OwnFrames j k → OwnFrames j (advancePart k i u)
  | [], _, _, h => h
  | .answer :: _, _, _, h => h
  | .release held w :: k, i, u, h => by
    simp only [advancePart]
    split
    · exact OwnFrames.release _ h.head h.tail
    · exact OwnFrames.release _ h.head (advancePart_own j k i u h.tail)
  | .stmts b :: k, i, u, h => OwnFrames.stmts b (advancePart_own j k i u h.tail)
  | .submit :: k, i, u, h => OwnFrames.submit (advancePart_own j k i u h.tail)

/-- A preemption gives back a suffix of the victim's continuation and requeues a hold one of its frames
carried: thread `j`'s own. -/
theorem abandonTo_own (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i j : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), OwnFrames j k →
    OwnFrames j (abandonTo blocks caps serial attrs now i ps k).2.2 ∧
      ∀ w, (abandonTo blocks caps serial attrs now i ps k).2.1 = some w → w.thread = j
  | _, [], _ => ⟨OwnFrames.nil j, fun w h => by simp [abandonTo] at h⟩
  | ps, .release held w :: k, h => by
    simp only [abandonTo]
    split
    · refine ⟨h.tail, fun w' hw' => ?_⟩
      simp only [Option.some.injEq] at hw'
      rw [← hw']
      exact h.head
    · exact abandonTo_own blocks caps serial attrs now i j _ k h.tail
  | ps, .stmts _ :: k, h => abandonTo_own blocks caps serial attrs now i j ps k h.tail
  | ps, .submit :: k, h => abandonTo_own blocks caps serial attrs now i j ps k h.tail
  | ps, .answer :: k, h => abandonTo_own blocks caps serial attrs now i j ps k h.tail

theorem mem_appendWaiter (w : Waiter) : ∀ (ws : List Waiter) (x : Waiter), x ∈ appendWaiter ws w → x ∈ ws ∨ x = w
  | [], x, h => by simp [appendWaiter] at h; exact Or.inr h
  | y :: ws, x, h => by
    simp only [appendWaiter, List.mem_cons] at h
    rcases h with h | h
    · exact Or.inl (h ▸ List.mem_cons_self)
    · rcases mem_appendWaiter w ws x h with h | h
      · exact Or.inl (List.mem_cons_of_mem _ h)
      · exact Or.inr h

theorem mem_insertByCreation (tn : List Nat) (ths : List Thread) (now created serial : Nat) (w : Waiter) :
    ∀ (ws : List Waiter) (x : Waiter), x ∈ insertByCreation tn ths now created serial w ws → x ∈ ws ∨ x = w
  | [], x, h => by simp [insertByCreation] at h; exact Or.inr h
  | y :: ws, x, h => by
    simp only [insertByCreation] at h
    split at h
    · simp only [List.mem_cons] at h
      rcases h with h | h
      · exact Or.inr h
      · exact Or.inl (List.mem_cons.2 h)
    · simp only [List.mem_cons] at h
      rcases h with h | h
      · exact Or.inl (h ▸ List.mem_cons_self)
      · rcases mem_insertByCreation tn ths now created serial w ws x h with h | h
        · exact Or.inl (List.mem_cons_of_mem _ h)
        · exact Or.inr h

theorem mem_removeWaiter : ∀ (ws : List Waiter) (j : Nat) (x : Waiter), x ∈ removeWaiter ws j → x ∈ ws
  | [], _, _, h => by simp [removeWaiter] at h
  | _ :: _, 0, _, h => List.mem_cons_of_mem _ h
  | y :: ws, j + 1, x, h => by
    simp only [removeWaiter, List.mem_cons] at h
    rcases h with h | h
    · exact h ▸ List.mem_cons_self
    · exact List.mem_cons_of_mem _ (mem_removeWaiter ws j x h)

theorem getWaiter_mem : ∀ (ws : List Waiter) (j : Nat), j < countWaiters ws → getWaiter ws j ∈ ws
  | [], _, h => by simp [countWaiters] at h
  | _ :: _, 0, _ => List.mem_cons_self
  | _ :: ws, j + 1, h => List.mem_cons_of_mem _ (getWaiter_mem ws j (by simp only [countWaiters] at h; omega))

/-! ### What a function of the machine does to the places -/

/-- `m'` places every thread `t` no more often than `m` does, plus `x t`, and keeps the threads in their
entries and their holds their own (given that `m` does: `Owned`). -/
structure Moved (g : Nat) (m m' : Machine) (x : Nat → Nat) : Prop where
  serial : Owned m → Owned m'
  le : Owned m → ∀ t, m'.placed g t ≤ m.placed g t + x t

/-- No thread more often placed. -/
abbrev Keeps (g : Nat) (m m' : Machine) : Prop := Moved g m m' (fun _ => 0)

theorem Keeps.refl (m : Machine) : Keeps g m m := ⟨id, fun _ _ => Nat.le_add_right _ _⟩

theorem Keeps.trans {a b c : Machine} (h1 : Keeps g a b) (h2 : Keeps g b c) : Keeps g a c :=
  ⟨fun hs => h2.serial (h1.serial hs), fun hs t => by
    have e1 : b.placed g t ≤ a.placed g t + 0 := h1.le hs t
    have e2 : c.placed g t ≤ b.placed g t + 0 := h2.le (h1.serial hs) t
    show c.placed g t ≤ a.placed g t + 0
    omega⟩

theorem Keeps.moved {a b : Machine} {x : Nat → Nat} (h : Keeps g a b) : Moved g a b x :=
  ⟨h.serial, fun hs t => by
    have e1 : b.placed g t ≤ a.placed g t + 0 := h.le hs t
    omega⟩

theorem Keeps.then {a b c : Machine} {x : Nat → Nat} (h1 : Keeps g a b) (h2 : Moved g b c x) : Moved g a c x :=
  ⟨fun hs => h2.serial (h1.serial hs), fun hs t => by
    have e1 : b.placed g t ≤ a.placed g t + 0 := h1.le hs t
    have e2 := h2.le (h1.serial hs) t
    omega⟩

theorem Moved.keep {a b c : Machine} {x : Nat → Nat} (h1 : Moved g a b x) (h2 : Keeps g b c) : Moved g a c x :=
  ⟨fun hs => h2.serial (h1.serial hs), fun hs t => by
    have e1 := h1.le hs t
    have e2 : c.placed g t ≤ b.placed g t + 0 := h2.le (h1.serial hs) t
    omega⟩

theorem Placed.keep {m m' : Machine} (h : Placed g m) (k : Keeps g m m') : Placed g m' :=
  ⟨k.serial h.1, fun t => by
    have e1 : m'.placed g t ≤ m.placed g t + 0 := k.le h.1 t
    have e2 := h.2 t
    omega⟩

theorem Keeps.frame {m m' : Machine} (hth : Owned m → Owned m') (hp : ∀ t, m'.placed g t = m.placed g t) :
    Keeps g m m' :=
  ⟨hth, fun _ t => by rw [hp t]; exact Nat.le_add_right _ _⟩

/-- A thread put back in its entry, its frames carrying its own holds. -/
theorem Keeps.put (m : Machine) (th : Thread) (hk : Owned m → OwnFrames th.serial th.k) : Keeps g m (m.put th) :=
  ⟨fun h => h.put th (hk h), fun _ t => by simp only [Machine.placed, Machine.put]; omega⟩

theorem Keeps.pools (m : Machine) (ps : List PoolState) (h : ps.map PoolState.queue = m.pools.map PoolState.queue) :
    Keeps g m { m with pools := ps } :=
  ⟨fun ho => ⟨ho.1, QueuedOk.of_queues h ho.2⟩, fun _ t => by simp only [Machine.placed, occPools_of_queues t _ _ h]; omega⟩

theorem Keeps.setPool (m : Machine) (i : Nat) (v : PoolState) (hv : v.queue = (getPool m.pools i).queue) :
    Keeps g m { m with pools := setPool m.pools i v } :=
  Keeps.pools m _ (setPool_queues _ _ _ hv)

theorem Keeps.engine (m : Machine) (s : Nat) (v : EngineState)
    (hv : threadsOf v.residents = threadsOf (getEngineState m.engines s).residents) :
    Keeps g m { m with engines := setEngineState m.engines s v } :=
  ⟨id, fun _ t => by
    have h1 := occEngines_set t m.engines s v
    rw [hv] at h1
    simp only [Machine.placed]
    omega⟩

theorem Keeps.setTimer (m : Machine) (time : Nat) (w : Wake) (hw : ∀ t, wakeOcc g t w = 0) :
    Keeps g m (m.setTimer time w) :=
  ⟨id, fun _ t => by simp only [Machine.placed, Machine.setTimer, occTimers_insert, hw]; omega⟩

theorem Moved.setTimer (m : Machine) (time : Nat) (w : Wake) : Moved g m (m.setTimer time w) (fun t => wakeOcc g t w) :=
  ⟨id, fun _ t => by simp only [Machine.placed, Machine.setTimer, occTimers_insert]; omega⟩

theorem Keeps.leaseTimer (m : Machine) (u : Nat) (d : Option Nat) : Keeps g m (m.leaseTimer u d) := by
  cases d with
  | none => exact Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | some t => exact Keeps.setTimer m _ _ (fun _ => by rfl)

theorem Moved.addJob (p : Program) (m : Machine) (s u w : Nat) : Moved g m (m.addJob p s u w) (fun t => bump t u) := by
  simp only [Machine.addJob]
  split
  · exact Moved.setTimer m _ _
  · exact Moved.setTimer m _ _
  · split
    · refine Keeps.then ?_ (Moved.setTimer _ _ _)
      refine ⟨id, fun _ t => ?_⟩
      have h1 := occStages_set t m.stages s { getStage m.stages s with busy := (getStage m.stages s).busy + 1 }
      try simp only at h1
      simp only [Machine.placed]
      omega
    · refine ⟨id, fun _ t => ?_⟩
      have h1 := occStages_set t m.stages s
        { getStage m.stages s with queue := appendJob (getStage m.stages s).queue ⟨u, w⟩ }
      have h2 := occJobs_append t ⟨u, w⟩ (getStage m.stages s).queue
      simp only [Machine.placed]
      try simp only at h1 h2
      omega

theorem Moved.step (m : Machine) (s : Nat) (r : Resident) (a : Nat) :
    Moved g m { m with engines := setEngineState m.engines s { getEngineState m.engines s with
      residents := insertResident r (getEngineState m.engines s).residents }, admSeq := a } (fun t => bump t r.thread) :=
  ⟨id, fun _ t => by
    have h1 := occEngines_set t m.engines s { getEngineState m.engines s with
      residents := insertResident r (getEngineState m.engines s).residents }
    have h2 := occ_insertResident t r (getEngineState m.engines s).residents
    try simp only at h1
    simp only [Machine.placed]
    omega⟩

theorem Moved.join (m : Machine) (i : Nat) (ws : List Waiter) (u : Nat)
    (h : ∀ t, occWaiters t ws ≤ occWaiters t (getPool m.pools i).queue + bump t u)
    (hws : ∀ w ∈ ws, w ∈ (getPool m.pools i).queue ∨ (getThread m.threads w.thread).serial = w.thread) :
    Moved g m { m with pools := setPool m.pools i { getPool m.pools i with queue := ws } } (fun t => bump t u) :=
  ⟨fun ho => ⟨ho.1, ho.2.setPool i _ (fun w hw => by
    rcases hws w hw with e | e
    · exact ho.2.get i w e
    · exact e)⟩, fun _ t => by
    have h1 := occPools_set t m.pools i { getPool m.pools i with queue := ws }
    have h2 := h t
    try simp only at h1
    simp only [Machine.placed]
    omega⟩

/-! ### A thread's run places it at most once -/

/-- A thread whose frames carry its own holds, and whose entry is its own, runs: it places itself at most
once (a hold it joins a queue with names it, whose entry is its own). -/
theorem exec_moved (p : Program) : ∀ (f : Nat) (m : Machine) (th : Thread), OwnFrames th.serial th.k →
    (getThread m.threads th.serial).serial = th.serial → Moved g m (exec p f m th) (fun t => bump t th.serial)
  | 0, m, th, hk, _ => by
    simp only [exec]
    exact Keeps.moved (Keeps.trans (Keeps.put m th (fun _ => by exact hk)) (Keeps.frame (fun h => by exact h) (fun _ => by rfl)))
  | f + 1, m, th, hk, he => by
    have hk0 := hk
    simp only [exec]
    split
    · refine ((Keeps.pools m _ (endLeases_queues ..)).trans (Keeps.put _ _ ?_)).moved
      exact fun _ => hk
    · next k heq =>
      rw [heq] at hk
      refine Keeps.then (Keeps.frame (fun h => by exact h) (fun _ => by rfl)) (exec_moved p f _ _ ?_ ?_)
      · exact hk.tail
      · exact he
    · next k heq =>
      rw [heq] at hk
      split
      · refine exec_moved p f _ _ ?_ ?_
        · exact hk.tail
        · exact he
      · refine exec_moved p f _ _ ?_ ?_
        · exact hk.tail
        · exact he
    · next held w k heq =>
      rw [heq] at hk
      split
      · refine (Keeps.pools m _ (giveBack_queues ..)).then (exec_moved p f _ _ ?_ ?_)
        · exact hk.tail
        · exact he
      · refine ((Keeps.pools m _ (giveBack_queues ..)).trans (Keeps.leaseTimer _ _ _)).then
          (exec_moved p f _ _ ?_ ?_)
        · exact hk.tail
        · rw [Machine.leaseTimer_threads]; exact he
    · next k heq =>
      rw [heq] at hk
      refine exec_moved p f _ _ ?_ ?_
      · exact hk.tail
      · exact he
    · next st rest k heq =>
      rw [heq] at hk
      have hnext : OwnFrames th.serial (.stmts rest :: k) := OwnFrames.stmts rest hk.tail
      cases st with
      | set i e => refine exec_moved p f _ _ ?_ ?_
                   · exact hnext
                   · exact he
      | observe j e => refine exec_moved p f _ _ ?_ ?_
                       · exact hnext
                       · exact he
      | stop =>
        refine ((Keeps.pools m _ ((endLeases_queues ..).trans (releaseAll_queues ..))).trans
          (Keeps.put _ _ ?_)).moved
        exact fun _ => OwnFrames.nil _
      | release i =>
        dsimp only
        split
        · refine (Keeps.pools m _ (releaseIn_queues ..)).then (exec_moved p f _ _ ?_ ?_)
          · exact OwnFrames.stmts rest (releaseIn_own _ _ _ _ _ _ _ _ k hk.tail)
          · exact he
        · refine (Keeps.pools m _ (endLeasesOn_queues ..)).then (exec_moved p f _ _ ?_ ?_)
          · exact hnext
          · exact he
      | branch t yes no => refine exec_moved p f _ _ ?_ ?_
                           · exact OwnFrames.stmts _ hnext
                           · exact he
      | «while» t body =>
        dsimp only
        split
        · refine exec_moved p f _ _ ?_ ?_
          · exact OwnFrames.stmts _ hk
          · exact he
        · refine exec_moved p f _ _ ?_ ?_
          · exact hnext
          · exact he
      | loop body => refine exec_moved p f _ _ ?_ ?_
                     · exact OwnFrames.stmts _ hk
                     · exact he
      | turn =>
        dsimp only
        split
        · exact Keeps.moved (Keeps.trans (Keeps.put m th (fun _ => by exact hk0)) (Keeps.frame (fun h => by exact h) (fun _ => by rfl)))
        · refine exec_moved p f _ _ ?_ ?_
          · exact OwnFrames.stmts _ (OwnFrames.submit (OwnFrames.stmts _ (OwnFrames.answer hnext)))
          · exact he
      | run s w =>
        dsimp only
        split
        · refine exec_moved p f _ _ ?_ ?_
          · exact hnext
          · exact he
        · refine (Moved.addJob p m s th.serial _).keep (Keeps.put _ _ ?_)
          exact fun _ => hnext
      | step s dec g w =>
        dsimp only
        split
        · refine exec_moved p f _ _ ?_ ?_
          · exact hnext
          · exact he
        · refine (Moved.step m s _ _).keep (Keeps.put _ _ ?_)
          exact fun _ => hnext
      | hold on reuse cache body =>
        dsimp only
        split
        · refine ((Keeps.pools m _ ((endLeases_queues ..).trans (releaseAll_queues ..))).trans
            (Keeps.put _ _ ?_)).moved
          exact fun _ => OwnFrames.nil _
        · split
          · refine (Keeps.put _ _ ?_).moved
            exact fun _ => hnext
          · refine (Moved.join m _ _ th.serial ?_ ?_).keep (Keeps.put _ _ ?_)
            · intro t
              split
              · rw [occWaiters_append]; try exact Nat.le_refl _
              · rw [occWaiters_insert]; try exact Nat.le_refl _
            · intro x hx
              split at hx
              · rcases mem_appendWaiter _ _ x hx with e | e
                · exact Or.inl e
                · exact Or.inr (by subst e; exact he)
              · rcases mem_insertByCreation _ _ _ _ _ _ _ x hx with e | e
                · exact Or.inl e
                · exact Or.inr (by subst e; exact he)
            · exact fun _ => hnext

/-- A thread with nothing left to run places nothing. -/
theorem exec_nil (p : Program) (f : Nat) (m : Machine) (th : Thread) (hk : th.k = []) : Keeps g m (exec p f m th) := by
  have hk' : OwnFrames th.serial th.k := by rw [hk]; exact OwnFrames.nil _
  cases f with
  | zero => simp only [exec]; exact Keeps.trans (Keeps.put m th (fun _ => hk')) (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
  | succ f =>
    simp only [exec, hk]
    refine (Keeps.pools m _ (endLeases_queues ..)).trans (Keeps.put _ _ ?_)
    exact fun _ => by first | exact OwnFrames.nil _ | exact hk'

/-- The thread of entry `u` runs: it places at most `u` once. -/
theorem exec_moved_at (p : Program) (f u : Nat) (m : Machine) :
    Moved g m (exec p f m (getThread m.threads u)) (fun t => bump t u) :=
  ⟨fun ho => by
    rcases ho.1 u with ⟨e, hk⟩ | e
    · exact (exec_moved (g := g) p f m _ (by rw [e]; exact hk) (by rw [e]; exact e)).serial ho
    · exact (exec_nil (g := g) p f m _ e).serial ho,
   fun ho t => by
    rcases ho.1 u with ⟨e, hk⟩ | e
    · have h := (exec_moved (g := g) p f m (getThread m.threads u) (by rw [e]; exact hk) (by rw [e]; exact e)).le ho t
      simp only [e] at h
      exact h
    · have h : (exec p f m (getThread m.threads u)).placed g t ≤ m.placed g t + 0 := (exec_nil p f m _ e).le ho t
      show _ ≤ _ + bump t u
      omega⟩

/-- A thread taken out of its place (`m1` is `m0` without it) runs. -/
theorem Keeps.take (p : Program) (f u : Nat) {m0 m1 : Machine} (hth : Owned m0 → Owned m1)
    (h : Owned m0 → ∀ t, m1.placed g t + bump t u ≤ m0.placed g t) :
    Keeps g m0 (exec p f m1 (getThread m1.threads u)) :=
  ⟨fun hs => (exec_moved_at (g := g) p f u m1).serial (hth hs), fun hs t => by
    have h1 := (exec_moved_at (g := g) p f u m1).le (hth hs) t
    have h2 := h hs t
    show _ ≤ _ + 0
    try simp only at h1
    omega⟩

/-! ### Settling an instant -/

theorem runReady_keeps (p : Program) : ∀ (f : Nat) (m : Machine), Keeps g m (runReady p f m)
  | 0, m => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m => by
    simp only [runReady]
    split
    · exact Keeps.refl m
    · next t ts heq =>
      refine Keeps.trans ?_ (runReady_keeps p f _)
      exact Keeps.take p f t id (fun _ x => by simp only [Machine.placed, heq, occ]; omega)

@[simp] theorem Machine.admitWaiter_ready (p : Program) (m : Machine) (st : List Nat) (i j : Nat) :
    (m.admitWaiter p st i j).ready = m.ready := rfl

/-- An admission puts the waiting hold's thread back in its entry (its own: `QueuedOk`), with a release
frame carrying the hold. -/
theorem Machine.admitWaiter_serial (p : Program) (m : Machine) (st : List Nat) (i j : Nat)
    (hj : j < countWaiters (getPool m.pools i).queue) (h : Owned m) : Owned (m.admitWaiter p st i j) := by
  have hw := h.2.get i _ (getWaiter_mem _ j hj)
  have hk := h.1.own (getWaiter (getPool m.pools i).queue j).thread
  simp only [Machine.admitWaiter]
  refine Owned.put ?_ _ ?_
  · refine ⟨h.1, ?_⟩
    exact QueuedOk.of_queues (admitOn_queues ..)
        (h.2.setPool i _ (fun x hx => h.2.get i x (mem_removeWaiter _ _ _ hx)))
  · exact OwnFrames.stmts _ (OwnFrames.release _ hw.symm hk)

theorem Machine.admitWaiter_placed (p : Program) (m : Machine) (st : List Nat) (i j : Nat)
    (hj : j < countWaiters (getPool m.pools i).queue) (t : Nat) :
    (m.admitWaiter p st i j).placed g t + bump t (getWaiter (getPool m.pools i).queue j).thread ≤ m.placed g t := by
  have h1 := occPools_set t m.pools i { getPool m.pools i with queue := removeWaiter (getPool m.pools i).queue j }
  have h2 := occWaiters_remove t (getPool m.pools i).queue j hj
  simp only at h1
  simp only [Machine.admitWaiter, Machine.placed, Machine.put]
  rw [occPools_of_queues t _ _ (admitOn_queues ..)]
  omega

theorem selectIn_lt (p : Program) (m : Machine) (keys : List Expr) : ∀ (ws : List Waiter) (i best : Nat) (bk : List Nat),
    best < i → selectIn p m keys ws i best bk < i + countWaiters ws
  | [], i, best, bk, h => by simp only [selectIn, countWaiters]; omega
  | w :: ws, i, best, bk, h => by
    simp only [selectIn, countWaiters]
    split
    · exact Nat.lt_of_lt_of_le (selectIn_lt p m keys ws (i + 1) i _ (by omega)) (by omega)
    · exact Nat.lt_of_lt_of_le (selectIn_lt p m keys ws (i + 1) best bk (by omega)) (by omega)

theorem select_lt (p : Program) (m : Machine) (i : Nat) (w : Waiter) (ws : List Waiter) :
    select p m i (w :: ws) < countWaiters (w :: ws) := by
  cases hk : getKeys p.queueKeys i with
  | nil => simp only [select, hk, countWaiters]; omega
  | cons k ks =>
    simp only [select, hk, countWaiters]
    split
    · omega
    · exact Nat.lt_of_lt_of_le (selectIn_lt p m _ ws 1 0 _ Nat.zero_lt_one) (by omega)

theorem retryQueue_keeps (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool), Keeps g m (retryQueue p f m i b).1
  | 0, m, i, b => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m, i, b => by
    simp only [retryQueue]
    split
    · exact Keeps.refl m
    · next _ hd tl heq =>
      split
      · refine Keeps.trans ?_ (retryQueue_keeps p f _ i true)
        have hj : select p m i (hd :: tl) < countWaiters (getPool m.pools i).queue := by
          rw [heq]; exact select_lt p m i hd tl
        refine ⟨fun hs => Machine.admitWaiter_serial p m [] i _ hj hs, fun hs t => ?_⟩
        have h := Machine.admitWaiter_placed (g := g) p m [] i _ hj t
        rw [heq] at h
        simp only [Machine.placed, occ_appendNat, Machine.admitWaiter_ready] at h ⊢
        omega
      · exact Keeps.refl m

theorem retryPool_keeps (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) : Keeps g m (retryPool p f m i b).1 := by
  simp only [retryPool]
  split
  · exact retryQueue_keeps p f m i b
  · exact Keeps.refl m

theorem retryPools_keeps (p : Program) (f : Nat) : ∀ (n i : Nat) (m : Machine) (b : Bool), Keeps g m (retryPools p f n i m b).1
  | 0, _, m, _ => Keeps.refl m
  | n + 1, i, m, b => by
    simp only [retryPools]
    exact (retryPool_keeps p f m i b).trans (retryPools_keeps p f n (i + 1) _ _)

theorem settle_keeps (p : Program) : ∀ (f : Nat) (m : Machine), Keeps g m (settle p f m)
  | 0, m => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m => by
    simp only [settle]
    split
    · exact ((runReady_keeps p f m).trans (retryPools_keeps p f _ _ _ _)).trans (settle_keeps p f _)
    · exact (runReady_keeps p f m).trans (retryPools_keeps p f _ _ _ _)

/-! ### An iteration's start: serving, growing, preempting -/

theorem Keeps.served (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) : Keeps g m (m.served s b r n).1 := by
  simp only [Machine.served]
  exact Keeps.engine m s _ (threadsOf_setSched _ _ _)

theorem Machine.grown_keeps (p : Program) (m : Machine) (t i want : Nat) (h : Held) : Keeps g m (m.grown p t i want h) := by
  simp only [Machine.grown]
  refine (Keeps.setPool m _ _ ?_).trans (Keeps.put _ _ ?_)
  · rfl
  · exact fun ho => growPart_own _ _ _ _ (ho.1.own t)

theorem occ_removeResident_le (t v : Nat) : ∀ rs : List Resident,
    occ t (threadsOf (removeResident v rs)) ≤ occ t (threadsOf rs)
  | [] => Nat.le_refl _
  | r :: rs => by
    have := occ_removeResident_le t v rs
    simp only [removeResident]
    split
    · simp only [threadsOf, occ]; omega
    · simp only [threadsOf, occ]; omega

/-- A resident taken out of the running list: its thread is placed once less. -/
theorem occ_removeResident (t v : Nat) : ∀ rs : List Resident, v ∈ threadsOf rs →
    occ t (threadsOf (removeResident v rs)) + bump t v = occ t (threadsOf rs)
  | [], h => by simp [threadsOf] at h
  | r :: rs, h => by
    simp only [removeResident]
    split
    · next he =>
      have e : r.thread = v := by simpa using he
      simp only [threadsOf, occ, e]; omega
    · next he =>
      have ne : r.thread ≠ v := by simpa using he
      have h' : v ∈ threadsOf rs := by
        simp only [threadsOf, List.mem_cons] at h
        rcases h with h | h
        · exact absurd h.symm ne
        · exact h
      have := occ_removeResident t v rs h'
      simp only [threadsOf, occ]; omega

theorem ite_some_eq {c : Bool} {a : Nat × List Nat} {best : Option (Nat × List Nat)} {v : Nat} {k : List Nat}
    (h : (if c = true then some a else best) = some (v, k)) : a.1 = v ∨ best = some (v, k) := by
  split at h
  · left; cases h; rfl
  · right; exact h

/-- The victim `victimIn` finds is one of the residents (or the best before them). -/
theorem victimIn_mem (p : Program) (m : Machine) (keys : List Expr) (i : Nat) :
    ∀ (rank : Nat) (best : Option (Nat × List Nat)) (rs : List Resident) (v : Nat),
      victimIn p m keys i rank best rs = some v → (∃ k, best = some (v, k)) ∨ v ∈ threadsOf rs
  | _, none, [], v, h => by simp [victimIn] at h
  | _, some (t, k), [], v, h => by
    simp only [victimIn, Option.some.injEq] at h
    subst h
    exact Or.inl ⟨k, rfl⟩
  | rank, best, r :: rs, v, h => by
    simp only [victimIn] at h
    split at h
    · rcases victimIn_mem p m keys i rank best rs v h with e | e
      · exact Or.inl e
      · exact Or.inr (List.mem_cons_of_mem _ e)
    · rcases victimIn_mem p m keys i _ _ rs v h with ⟨k, e⟩ | e
      · rcases ite_some_eq e with e | e
        · subst e; simp [threadsOf]
        · exact Or.inl ⟨k, e⟩
      · exact Or.inr (List.mem_cons_of_mem _ e)

theorem victimIn_resident {p : Program} {m : Machine} {keys : List Expr} {i v : Nat} {rs : List Resident}
    (h : victimIn p m keys i 0 none rs = some v) : v ∈ threadsOf rs := by
  rcases victimIn_mem p m keys i 0 none rs v h with ⟨_, e⟩ | e
  · cases e
  · exact e

/-- Resident `v` out of engine `s`'s running list. -/
theorem Keeps.unseat (m : Machine) (s v : Nat) :
    Keeps g m { m with engines := setEngineState m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents } } :=
  ⟨id, fun _ t => by
    have h1 := occEngines_set t m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents }
    have h2 := occ_removeResident_le t v (getEngineState m.engines s).residents
    try simp only at h1
    simp only [Machine.placed]
    omega⟩

/-- `ws'` is the queue `ws` with the hold `w` put back in it (at the head, the back, or in creation order). -/
def Requeued (ws ws' : List Waiter) (w : Waiter) : Prop :=
  (∀ x ∈ ws', x ∈ ws ∨ x = w) ∧ ∀ t, occWaiters t ws' ≤ occWaiters t ws + bump t w.thread

theorem Requeued.cons (ws : List Waiter) (w : Waiter) : Requeued ws (w :: ws) w :=
  ⟨fun x hx => by
    simp only [List.mem_cons] at hx
    rcases hx with e | e
    · exact Or.inr e
    · exact Or.inl e,
   fun t => by simp only [occWaiters]; omega⟩

theorem Requeued.append (ws : List Waiter) (w : Waiter) : Requeued ws (appendWaiter ws w) w :=
  ⟨mem_appendWaiter w ws, fun t => by rw [occWaiters_append]; exact Nat.le_refl _⟩

theorem Requeued.insert (tn : List Nat) (ths : List Thread) (now created serial : Nat) (ws : List Waiter) (w : Waiter) :
    Requeued ws (insertByCreation tn ths now created serial w ws) w :=
  ⟨mem_insertByCreation tn ths now created serial w ws, fun t => by rw [occWaiters_insert]; exact Nat.le_refl _⟩

/-- A preemption's machine: resident `v` out of engine `s`, the pools' units as `ps` (their queues `m`'s),
the hold `w` of thread `v` back in pool `first`'s queue, and thread `v` back in its entry with what is left
of its continuation. Thread `v` leaves the residents and is placed once in the queue. -/
theorem Keeps.requeue (m : Machine) (s v first : Nat) (ps : List PoolState) (ws : List Waiter) (w : Waiter)
    (gp : List Progress) (th : Thread) (hv : v ∈ threadsOf (getEngineState m.engines s).residents)
    (hps : ps.map PoolState.queue = m.pools.map PoolState.queue) (hq : Requeued (getPool ps first).queue ws w)
    (hown : Owned m → w.thread = v ∧ (getThread m.threads v).serial = v ∧ th.serial = v ∧ OwnFrames v th.k) :
    Keeps g m ({ m with
      engines := setEngineState m.engines s { getEngineState m.engines s with
        residents := removeResident v (getEngineState m.engines s).residents }
      pools := Serq.Kernel.setPool ps first { getPool ps first with queue := ws }
      progress := gp }.put th) :=
  ⟨fun ho => by
    obtain ⟨hw, he, hs, hk⟩ := hown ho
    have hq0 := QueuedOk.of_queues hps ho.2
    refine Owned.put ?_ th (hs ▸ hk)
    refine ⟨ho.1, hq0.setPool first _ (fun x hx => ?_)⟩
    rcases hq.1 x hx with e | e
    · exact hq0.get first x e
    · rw [e, hw]; exact he,
   fun ho t => by
    obtain ⟨hw, _, _, _⟩ := hown ho
    have h1 := occEngines_set t m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents }
    have h2 := occ_removeResident t v _ hv
    have h3 := occPools_set t ps first { getPool ps first with queue := ws }
    have h4 := hq.2 t
    have h5 := occPools_of_queues t _ _ hps
    rw [hw] at h4
    try simp only at h1 h3
    simp only [Machine.placed, Machine.put]
    omega⟩

/-- The hold a preemption requeues is the victim's own, and the victim's entry is its own. -/
theorem preempt_own (p : Program) (m : Machine) (i v : Nat) (ps : List PoolState) (w : Waiter) (ho : Owned m)
    (hw : (abandonTo p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i ps
      (getThread m.threads v).k).2.1 = some w) :
    w.thread = v ∧ (getThread m.threads v).serial = v ∧
      OwnFrames v (abandonTo p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i ps
        (getThread m.threads v).k).2.2 := by
  rcases ho.1 v with ⟨e, hk⟩ | e
  · exact ⟨(abandonTo_own _ _ _ _ _ _ v _ _ hk).2 w hw, e, (abandonTo_own _ _ _ _ _ _ v _ _ hk).1⟩
  · rw [e] at hw
    simp [abandonTo] at hw

/-- A resident of engine `s` preempted: it leaves the running list, and its hold, if one is given back,
goes to a queue naming it. -/
theorem Machine.preempt_keeps (p : Program) (s i v : Nat) (m : Machine) (b : Batch)
    (hv : v ∈ threadsOf (getEngineState m.engines s).residents) : Keeps g m (m.preempt p s i v b).1 := by
  simp only [Machine.preempt]
  cases hA : (abandonTo p.blocks p.caps (getThread m.threads v).serial (getThread m.threads v).attrs m.now i m.pools
      (getThread m.threads v).k).2.1 with
  | none =>
    try dsimp only
    exact Keeps.unseat m s v
  | some w =>
    try dsimp only
    repeat' split
    all_goals
      first
        | refine Keeps.requeue m s v _ _ _ _ _ _ hv (abandonTo_queues ..) (Requeued.cons _ _) ?_
        | refine Keeps.requeue m s v _ _ _ _ _ _ hv (abandonTo_queues ..) (Requeued.append _ _) ?_
        | refine Keeps.requeue m s v _ _ _ _ _ _ hv (abandonTo_queues ..) (Requeued.insert _ _ _ _ _ _ _) ?_
      intro ho
      have h := preempt_own p m i v m.pools w ho hA
      exact ⟨h.1, h.2.1, h.2.1, h.2.2⟩

theorem growPreempting_keeps (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    Keeps g m (growPreempting p s i want t f m b).1 := by
  fun_induction growPreempting p s i want t f m b
  all_goals first
    | exact Keeps.frame (fun h => by exact h) (fun _ => by rfl)
    | exact Keeps.refl _
    | exact Machine.grown_keeps p _ _ _ _ _
    | exact Machine.preempt_keeps p _ _ _ _ _ (victimIn_resident ‹_›)
    | (rename_i ih; exact (Machine.preempt_keeps p _ _ _ _ _ (victimIn_resident ‹_›)).trans ih)

theorem Machine.serveOne_keeps (p : Program) (s : Nat) (m : Machine) (b : Batch)
    (r : Resident) (n : Nat) : Keeps g m (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals try dsimp only
  all_goals first
    | exact Keeps.served m s b r n
    | exact (Machine.grown_keeps p m _ _ _ _).trans (Keeps.served _ s b r n)
    | exact Keeps.refl m
    | exact Keeps.trans (growPreempting_keeps p s _ _ _ _ m b) (Keeps.served _ s _ r n)
    | exact growPreempting_keeps p s _ _ _ _ m b

theorem serveIn_keeps (p : Program) (s chunk : Nat) (q : Option Expr) :
    ∀ (ts : List Nat) (m : Machine) (b : Batch), Keeps g m (serveIn p s chunk q ts m b).1 := by
  intro ts
  induction ts with
  | nil => intro m b; exact Keeps.refl m
  | cons t ts ih =>
    intro m b
    simp only [serveIn]
    repeat' split
    all_goals first
      | exact Keeps.refl _
      | exact ih _ _
      | exact Machine.serveOne_keeps p _ _ _ _ _
      | exact (Machine.serveOne_keeps p _ _ _ _ _).trans (ih _ _)

theorem serveOrdered_keeps (p : Program) (s : Nat) (m : Machine)
    (running : List Nat) (chunk : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident) :
    Keeps g m (serveOrdered p s m running chunk q b keys rs).1 := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_keeps p s chunk q _ m b

/-- The pool `firstQueue` finds has a hold waiting. -/
theorem firstQueue_some (s : Nat) : ∀ (k : Nat) (vs : List Nat) (qs : List PoolState) (i : Nat),
    firstQueue s k vs qs = some i → k ≤ i ∧ ∃ w ws, (getPool qs (i - k)).queue = w :: ws
  | k, v :: vs, q :: qs, i, h => by
    simp only [firstQueue] at h
    split at h
    · next w ws heq =>
      split at h
      · cases h
        exact ⟨Nat.le_refl _, w, ws, by simp [getPool, heq]⟩
      · obtain ⟨hk, w', ws', e⟩ := firstQueue_some s (k + 1) vs qs i h
        refine ⟨by omega, w', ws', ?_⟩
        have e2 : i - k = (i - (k + 1)) + 1 := by omega
        rw [e2]
        simpa [getPool] using e
    · obtain ⟨hk, w', ws', e⟩ := firstQueue_some s (k + 1) vs qs i h
      refine ⟨by omega, w', ws', ?_⟩
      have e2 : i - k = (i - (k + 1)) + 1 := by omega
      rw [e2]
      simpa [getPool] using e
  | _, [], _, _, h => by simp [firstQueue] at h
  | _, _ :: _, [], _, h => by simp [firstQueue] at h

/-- An engine admits a waiting hold: its thread leaves the queue and runs at once (then its run, if it
started one on the engine, is served). -/
theorem admitOne_keeps (p : Program) (f s chunk i j : Nat) (q : Option Expr)
    (m : Machine) (b : Batch) (hj : j < countWaiters (getPool m.pools i).queue) :
    Keeps g m (admitOne p f s chunk i j q m b).1 := by
  have h2 : Keeps g m (exec p f (m.admitWaiter p (admissionStage chunk b.budget) i j)
      (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads (getWaiter (getPool m.pools i).queue j).thread)) :=
    Keeps.take p f _ (Machine.admitWaiter_serial p m _ i j hj) (fun _ t => Machine.admitWaiter_placed p m _ i j hj t)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact h2.trans (Machine.serveOne_keeps p _ _ _ _ _)

theorem admitWaiting_keeps (p : Program) (s c : Nat) (q : Option Expr) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), Keeps g m (admitWaiting p s c q gated f m b).1
  | 0, m, _ => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m, b => by
    simp only [admitWaiting]
    split
    · exact Keeps.refl m
    · split
      · exact Keeps.refl m
      · next i hi =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
        rw [Nat.sub_zero] at hq
        split
        · refine Keeps.trans ?_ (admitWaiting_keeps p s c q gated f _ _)
          refine admitOne_keeps p f s c i _ q m b ?_
          rw [hq]
          exact select_lt p m i w ws
        · exact Keeps.refl m

theorem startIteration_keeps (p : Program) (f s : Nat) (eng : Engine)
    (m : Machine) : Keeps g m (startIteration p f s eng m) := by
  simp only [startIteration]
  split
  · exact (serveOrdered_keeps p ..).trans (admitWaiting_keeps p s _ _ _ _ _ _)
  · split
    · exact Keeps.trans ((serveOrdered_keeps p ..).trans (admitWaiting_keeps p s _ _ _ _ _ _))
        (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
    · exact Keeps.trans ((serveOrdered_keeps p ..).trans (admitWaiting_keeps p s _ _ _ _ _ _))
        (Keeps.trans (Keeps.engine _ s _ (by rfl)) (Keeps.setTimer _ _ _ fun _ => by rfl))

/-! ### A timer fires -/

@[simp] theorem Machine.advanceHolds_ready (m : Machine) (rs : List Resident) : (m.advanceHolds rs).ready = m.ready := by
  fun_induction m.advanceHolds rs <;> simp_all [Machine.put]

@[simp] theorem Machine.advanceHolds_stages (m : Machine) (rs : List Resident) : (m.advanceHolds rs).stages = m.stages := by
  fun_induction m.advanceHolds rs <;> simp_all [Machine.put]

@[simp] theorem Machine.advanceHolds_pools (m : Machine) (rs : List Resident) : (m.advanceHolds rs).pools = m.pools := by
  fun_induction m.advanceHolds rs <;> simp_all [Machine.put]

theorem Machine.advanceHolds_keeps (m : Machine) (rs : List Resident) : Keeps g m (m.advanceHolds rs) := by
  fun_induction m.advanceHolds rs
  · exact Keeps.refl _
  all_goals first
    | assumption
    | (rename_i ih; refine (Keeps.put _ _ ?_).trans ih; exact fun ho => advancePart_own _ _ _ _ (ho.1.own _))

/-- An iteration's end: the threads whose run ended go from the residents to the ready threads. -/
theorem Keeps.finish (m : Machine) (s : Nat) (es : EngineState) (hes : (getEngineState m.engines s).residents = es.residents)
    (gp : List Progress) (t0 t1 : Nat) (gs : List Progress) :
    Keeps g m { m with
      progress := gp,
      engines := setEngineState m.engines s { es with busy := false, residents := (applyTokens t0 t1 gs es.residents).2.1 },
      ready := appendNats m.ready (applyTokens t0 t1 gs es.residents).2.2 } :=
  ⟨id, fun _ t => by
    have h1 := occEngines_set t m.engines s { es with busy := false, residents := (applyTokens t0 t1 gs es.residents).2.1 }
    have h2 := occ_applyTokens t t0 t1 gs es.residents
    rw [hes] at h1
    try simp only at h1
    simp only [Machine.placed, occ_appendNats]
    omega⟩

theorem fire_moved (p : Program) (m : Machine) (w : Wake) :
    Moved p.gap m (fire p m w) (fun t => wakeOcc p.gap t w) := by
  cases w with
  | resume u =>
    exact ⟨id, fun _ t => by simp only [fire, Machine.placed, occ_appendNat, wakeOcc]; omega⟩
  | arrival u =>
    simp only [fire]
    split
    · next hc =>
      refine ⟨id, fun _ t => ?_⟩
      try simp at hc
      simp only [Machine.placed, Machine.setTimer, occTimers_insert, occ_appendNat, wakeOcc, bump]
      repeat' split
      all_goals omega
    · refine ⟨id, fun _ t => ?_⟩
      simp only [Machine.placed, occ_appendNat, wakeOcc, bump]
      repeat' split
      all_goals omega
  | iterationEnd s =>
    simp only [fire]
    exact Keeps.moved (Keeps.trans (Machine.advanceHolds_keeps _ _) (Keeps.finish _ s _ (by simp) _ _ _ _))
  | leaseEnd u n =>
    simp only [fire]
    split
    · exact (Keeps.refl m).moved
    · refine ((Keeps.pools m _ (endLease_queues ..)).trans (Keeps.put _ _ ?_)).moved
      exact fun ho => ho.1.own u
  | fifoDone s u =>
    simp only [fire]
    split
    · next heq =>
      refine ⟨id, fun _ t => ?_⟩
      have h1 := occStages_set t m.stages s { getStage m.stages s with busy := (getStage m.stages s).busy - 1 }
      try simp only at h1
      simp only [Machine.placed, occ_appendNat, wakeOcc]
      omega
    · next j js heq =>
      refine ⟨id, fun _ t => ?_⟩
      have h1 := occStages_set t m.stages s { getStage m.stages s with queue := js }
      try simp only at h1
      rw [heq] at h1
      simp only [occJobs] at h1
      simp only [Machine.placed, Machine.setTimer, occ_appendNat, occTimers_insert, wakeOcc]
      omega

theorem fire_keeps (p : Program) (m : Machine) (now : Nat) (tm : Timer) (ts : List Timer)
    (he : m.timers = tm :: ts) : Keeps p.gap m (fire p { m with now := now, timers := ts } tm.wake) :=
  have h := fire_moved p { m with now := now, timers := ts } tm.wake
  ⟨h.serial, fun hs t => by
    have h1 := h.le hs t
    try simp only at h1
    simp only [Machine.placed, he, occTimers] at h1 ⊢
    omega⟩

/-! ### The run's start -/

theorem occ_serials (t : Nat) : ∀ (n s : Nat), occ t (serials n s) = if t < s then 0 else if t < s + n then 1 else 0
  | 0, s => by simp only [serials, occ]; split <;> (try split) <;> omega
  | n + 1, s => by
    simp only [serials, occ, bump, occ_serials t n (s + 1)]
    repeat' split
    all_goals omega

theorem wakeOcc_zero_arrival (t u : Nat) : wakeOcc 0 t (.arrival u) = bump t u := by
  simp [wakeOcc]

theorem occTimers_trace (t : Nat) : ∀ (ts : List Nat) (s : Nat),
    occTimers 0 t (traceTimers ts s) = if t < s then 0 else if t < s + countNats ts then 1 else 0
  | [], s => by simp only [traceTimers, occTimers, countNats]; split <;> (try split) <;> omega
  | x :: ts, s => by
    simp only [traceTimers, occTimers, wakeOcc_zero_arrival, bump, countNats, occTimers_trace t ts (s + 1)]
    repeat' split
    all_goals omega

theorem occ_serials_le (t n s : Nat) : occ t (serials n s) ≤ 1 := by
  rw [occ_serials]; split <;> (try split) <;> omega

theorem occTimers_trace_le (t : Nat) (ts : List Nat) (s : Nat) : occTimers 0 t (traceTimers ts s) ≤ 1 := by
  rw [occTimers_trace]; split <;> (try split) <;> omega

theorem occStages_idle (t : Nat) : ∀ ss : List Service, occStages t (idleStages ss) = 0
  | [] => rfl
  | _ :: ss => by simp only [idleStages, occStages, occJobs, occStages_idle t ss]

theorem occPools_empty (t : Nat) : ∀ cs : List Nat, occPools t (emptyPools cs) = 0
  | [] => rfl
  | _ :: cs => by simp only [emptyPools, occPools, occWaiters, occPools_empty t cs]

theorem occEngines_idle (t : Nat) : ∀ ss : List Service, occEngines t (idleEngines ss) = 0
  | [] => rfl
  | _ :: ss => by simp only [idleEngines, occEngines, threadsOf, occ, occEngines_idle t ss]

theorem getThread_arrivals (p : Program) : ∀ (n s j : Nat),
    (getThread (arrivals p n s) j).serial = s + j ∨ (getThread (arrivals p n s) j).k = []
  | 0, s, j => Or.inr (by cases j <;> rfl)
  | n + 1, s, 0 => Or.inl rfl
  | n + 1, s, j + 1 => by
    simp only [arrivals, getThread]
    rcases getThread_arrivals p n (s + 1) j with e | e
    · left; rw [e]; omega
    · right; exact e

/-- A session arrives with its `init` and session blocks to run: no hold yet. -/
theorem arrivals_own (p : Program) (x : Nat) : ∀ (n s j : Nat), OwnFrames x (getThread (arrivals p n s) j).k
  | 0, _, _ => OwnFrames.nil x
  | _ + 1, _, 0 => OwnFrames.stmts _ (OwnFrames.stmts _ (OwnFrames.nil x))
  | n + 1, s, j + 1 => arrivals_own p x n (s + 1) j

theorem emptyPools_queue : ∀ (cs : List Nat) (q : PoolState), q ∈ emptyPools cs → q.queue = []
  | [], _, h => by simp [emptyPools] at h
  | _ :: cs, q, h => by
    simp only [emptyPools, List.mem_cons] at h
    rcases h with h | h
    · rw [h]
    · exact emptyPools_queue cs q h

theorem initial_placed (p : Program) (harr : p.gap = 0 ∨ p.arrivalTimes = []) : Placed p.gap (initial p) := by
  refine ⟨⟨?_, ?_⟩, fun t => ?_⟩
  · have he : (initial p).threads = arrivals p p.sessions 0 := by
      unfold initial; dsimp only; split <;> rfl
    rw [he]
    intro j
    rcases getThread_arrivals p p.sessions 0 j with e | e
    · left; exact ⟨by omega, arrivals_own p _ _ _ _⟩
    · right; exact e
  · have hp : (initial p).pools = emptyPools p.caps := by
      unfold initial; dsimp only; split <;> rfl
    intro q hq w hw
    rw [hp] at hq
    rw [emptyPools_queue p.caps q hq] at hw
    cases hw
  · cases ha : p.arrivalTimes with
    | nil =>
      unfold initial
      simp only [ha]
      by_cases hg : p.gap = 0
      · have h1 := occ_serials_le t p.sessions 0
        simp only [Machine.placed, hg, occStages_idle, occPools_empty, occEngines_idle]
        simp [occTimers, h1]
      · simp only [Machine.placed, occStages_idle, occPools_empty, occEngines_idle, if_neg hg]
        split
        · simp [occTimers, wakeOcc, hg, occ]
        · simp [occTimers, occ]
    | cons x xs =>
      have hg : p.gap = 0 := by
        rcases harr with h | h
        · exact h
        · rw [ha] at h; cases h
      have h1 := occTimers_trace_le t (x :: xs) 0
      unfold initial
      simp only [ha]
      simp only [Machine.placed, occStages_idle, occPools_empty, occEngines_idle, occ, hg]
      simp_all

/-! ### `DistinctInvariant`, and `full_or_short` for every run -/

theorem occ_pos_of_mem (x : Nat) : ∀ l : List Nat, x ∈ l → 1 ≤ occ x l
  | [], h => by simp at h
  | y :: ys, h => by
    simp only [occ, bump]
    rcases List.mem_cons.1 h with e | e
    · split <;> omega
    · have := occ_pos_of_mem x ys e; split <;> omega

theorem natsDistinct_of_occ : ∀ l : List Nat, (∀ t, occ t l ≤ 1) → natsDistinct l
  | [], _ => trivial
  | x :: xs, h => by
    show x ∉ xs ∧ natsDistinct xs
    refine ⟨fun hx => ?_, natsDistinct_of_occ xs (fun t => ?_)⟩
    · have h1 := occ_pos_of_mem x xs hx
      have h2 := h x
      simp [occ, bump] at h2
      omega
    · have h2 := h t
      simp only [occ] at h2
      omega

theorem occ_getEngineState_le (t : Nat) : ∀ (l : List EngineState) (s : Nat),
    occ t (threadsOf (getEngineState l s).residents) ≤ occEngines t l
  | [], s => by simp [getEngineState, threadsOf, occ, occEngines]
  | e :: l, 0 => by simp only [getEngineState, occEngines]; omega
  | e :: l, s + 1 => by
    have := occ_getEngineState_le t l s
    simp only [getEngineState, occEngines]; omega

/-- No thread placed twice: no thread twice a resident of any engine. -/
theorem Placed.distinct {m : Machine} (h : Placed g m) (s : Nat) : threadsDistinct (getEngineState m.engines s).residents :=
  natsDistinct_of_occ _ (fun t => by
    have h1 := occ_getEngineState_le t m.engines s
    have h2 := h.2 t
    simp only [Machine.placed] at h2
    omega)

/-- What the proof needs of a program: no renewal gap beside a trace. (Preemption is covered: a victim
leaves the residents and its hold, its own, is placed once in a queue: `Machine.preempt_keeps`.) -/
structure DistinctProgram (p : Program) : Prop where
  arrivals : p.gap = 0 ∨ p.arrivalTimes = []

/-- `DistinctProgram` checked on the program's value: `gap = 0` or no trace. -/
theorem DistinctProgram.of_check (p : Program) (h : (p.gap == 0 || countNats p.arrivalTimes == 0) = true) :
    DistinctProgram p := by
  simp only [Bool.or_eq_true, beq_iff_eq] at h
  refine ⟨?_⟩
  rcases h with h1 | h1
  · exact Or.inl h1
  · right
    cases e : p.arrivalTimes with
    | nil => rfl
    | cons x xs => rw [e] at h1; simp [countNats] at h1

/-- `Placed` is a `DistinctInvariant` of every program with `DistinctProgram`, for every engine. -/
theorem Placed.distinctInvariant (p : Program) (s : Nat) (hp : DistinctProgram p) :
    DistinctInvariant p s (Placed p.gap) where
  initial := initial_placed p hp.arrivals
  settle := fun f m h => h.keep (settle_keeps p f m)
  fire := fun m t tm ts he h => h.keep (fire_keeps p m t tm ts he)
  start := fun f i _ m _ _ h => h.keep (startIteration_keeps p f i _ m)
  fuel := fun m h => h.keep (Keeps.frame (fun h => by exact h) (fun _ => by rfl))
  ready := fun m h _ => h.distinct s

/-- `full_or_short` (vLLM's, issue 13) for every run of every program with no preemption (and no renewal
gap beside a trace: `DistinctProgram`), no pool admitted by engine `s` (`hvia`), no growing run on stage `s`
(`NoGrowth`), whose stage `s` is engine `e` with a constant `tokens cap B`, no `only` on `advance
running`, no granule and a cost that is never 0: every record of stage `s` has `tokens = B` or
`demand < B`. -/
theorem runProgram_full_or_short (p : Program) (fuel s e B : Nat) (hp : DistinctProgram p) (hgrow : NoGrowth p s)
    (hs : getService p.stages s = .step e) (hB : (getEngine p.engines e).budget = .num B)
    (hq : (getEngine p.engines e).serveOnly = none) (hg : (getEngine p.engines e).granule = .num 0)
    (hvia : ∀ v ∈ p.admitVia, v ≠ s + 1)
    (hcost : ∀ (v : PoolView) (now : Nat), eval v [] now 0 (getEngine p.engines e).cost ≠ 0) :
    ∀ r ∈ (getEngineState (runProgram p fuel).engines s).records, r.tokens = B ∨ r.demand < B :=
  runProgram_full_or_short_of_distinct p fuel s e B (Placed p.gap) hgrow (Placed.distinctInvariant p s hp) hs hB hq hg
    hvia hcost

/-! ### Through the event loop: `Placed` at every run's end -/

theorem startPass_keeps (p : Program) (f : Nat) :
    ∀ (ss : List Service) (i : Nat) (tried : List Nat) (m : Machine) (a : Bool), Keeps g m (startPass p f ss i tried m a).1
  | [], _, _, m, _ => Keeps.refl m
  | .step e :: ss, i, tried, m, a => by
    simp only [startPass]
    split
    · exact startPass_keeps p f ss (i + 1) tried m a
    · split
      · exact (startIteration_keeps p f i _ m).trans (settle_keeps p f _)
      · exact ((startIteration_keeps p f i _ m).trans (settle_keeps p f _)).trans
          (startPass_keeps p f ss (i + 1) _ _ _)
  | .delay :: ss, i, tried, m, a => by simp only [startPass]; exact startPass_keeps p f ss (i + 1) tried m a
  | .fifo _ :: ss, i, tried, m, a => by simp only [startPass]; exact startPass_keeps p f ss (i + 1) tried m a

theorem startEngines_keeps (p : Program) (f : Nat) :
    ∀ (n : Nat) (tried : List Nat) (m : Machine), Keeps g m (startEngines p f n tried m)
  | 0, _, m => Keeps.refl m
  | n + 1, tried, m => by
    simp only [startEngines]
    split
    · exact startPass_keeps p f _ _ _ _ _
    · exact (startPass_keeps p f _ _ _ _ _).trans (startEngines_keeps p f n _ _)

theorem endOfInstant_keeps (p : Program) (f : Nat) (m : Machine) :
    Keeps g m (endOfInstant p f m) := by
  simp only [endOfInstant]
  split
  · exact Keeps.refl m
  · exact startEngines_keeps p f _ _ _

theorem loop_keeps (p : Program) (hp : DistinctProgram p) : ∀ (f : Nat) (m : Machine), Keeps p.gap m (loop p f m)
  | 0, m => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m => by
    simp only [loop]
    split
    · exact Keeps.refl m
    · next tm ts heq =>
      exact (((fire_keeps p m _ tm ts heq).trans (settle_keeps p f _)).trans
        (endOfInstant_keeps p f _)).trans (loop_keeps p hp f _)

/-- At the end of every run of a program with `DistinctProgram` (and, `Placed` being kept by every
function of the machine, at every point of it), no thread is placed twice. -/
theorem runProgram_placed (p : Program) (fuel : Nat) (hp : DistinctProgram p) : Placed p.gap (runProgram p fuel) :=
  (initial_placed p hp.arrivals).keep
    (((settle_keeps p fuel _).trans (endOfInstant_keeps p fuel _)).trans (loop_keeps p hp fuel _))

/-- No thread twice a resident of any engine at the end of every run of a program with `DistinctProgram`. -/
theorem runProgram_threadsDistinct (p : Program) (fuel s : Nat) (hp : DistinctProgram p) :
    threadsDistinct (getEngineState (runProgram p fuel).engines s).residents :=
  (runProgram_placed p fuel hp).distinct s

end Serq.Kernel
