module

public import Serq.KernelTiledRun

/-! # Where every thread is: the places, and a thread's run (issue 13)

The first half of `Serq.KernelDistinct`'s proof (the module doc there has the whole): a session's thread
is, at any point of a run, in at most one place of the machine (the ready threads, a timer that will make
it ready, a fifo stage's queue, a pool's queue, an engine's residents). `Machine.placed m g t` counts the
places of thread `t`; `Owned m` says the threads and the holds are their own (the thread list's entry `j`
is thread `j`, every hold its release frames carry naming `j`, `OwnFrames`, `SerialOk`; every waiting
hold names a thread whose entry is its own, `QueuedOk`); `Moved`/`Keeps` say what a function of the
machine does to the places, keeping `Owned`. This module has the counts, the lemmas over the machine's
lists, a thread's run (`exec_moved`: it places the thread it runs at most once) and the settling of an
instant (`settle_keeps`); `Serq.KernelDistinct` has an iteration (serving, growth, preemption,
admission), the timers, the run's start and the event loop.
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

def occGrowers (t : Nat) : List Grower → Nat
  | [] => 0
  | x :: xs => bump t x.thread + occGrowers t xs

/-- The places of thread `t`: the ready threads, the timers, the fifo stages' queues, the pools' queues,
the engines' residents, the `grow` statements waiting for room. -/
def Machine.placed (m : Machine) (g t : Nat) : Nat :=
  occ t m.ready + occTimers g t m.timers + occStages t m.stages + occPools t m.pools + occEngines t m.engines +
    occGrowers t m.growers

theorem occGrowers_append (t : Nat) (x : Grower) : ∀ gs : List Grower,
    occGrowers t (appendGrower gs x) = occGrowers t gs + bump t x.thread
  | [] => by simp [appendGrower, occGrowers]
  | y :: ys => by simp only [appendGrower, occGrowers, occGrowers_append t x ys]; omega

theorem occGrowers_remove (t i : Nat) : ∀ (gs : List Grower) (x : Grower), growerOn i gs = some x →
    occGrowers t (removeGrowerOn i gs) + bump t x.thread = occGrowers t gs
  | [], _, e => by simp [growerOn] at e
  | y :: ys, x, e => by
    simp only [growerOn] at e
    simp only [removeGrowerOn]
    split
    · next hy =>
      simp only [hy, ↓reduceIte, Option.some.injEq] at e
      subst e
      simp only [occGrowers]; omega
    · next hy =>
      simp only [hy, Bool.false_eq_true, ↓reduceIte] at e
      have := occGrowers_remove t i ys x e
      simp only [occGrowers]; omega

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

theorem growPartReq_own (j : Nat) : ∀ (k : List Frame) (i u r : Nat), OwnFrames j k → OwnFrames j (growPartReq k i u r)
  | [], _, _, _, h => h
  | .answer :: _, _, _, _, h => h
  | .release held w :: k, i, u, r, h => by
    simp only [growPartReq]
    split
    · exact OwnFrames.release _ h.head h.tail
    · exact OwnFrames.release _ h.head (growPartReq_own j k i u r h.tail)
  | .stmts b :: k, i, u, r, h => OwnFrames.stmts b (growPartReq_own j k i u r h.tail)
  | .submit :: k, i, u, r, h => OwnFrames.submit (growPartReq_own j k i u r h.tail)

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

/-- A `grow` that does not fit places its thread among the growers. -/
theorem Moved.grower (m : Machine) (x : Grower) :
    Moved g m { m with growers := appendGrower m.growers x } (fun t => bump t x.thread) :=
  ⟨fun h => h, fun _ t => by simp only [Machine.placed, occGrowers_append]; omega⟩

/-- A waiting `grow` that fits leaves the growers for the ready threads. -/
theorem Keeps.regrow (m : Machine) (i : Nat) (x : Grower) (hx : growerOn i m.growers = some x) :
    Keeps g m { m with growers := removeGrowerOn i m.growers, ready := appendNat m.ready x.thread } :=
  ⟨fun h => h, fun _ t => by
    have := occGrowers_remove t i m.growers x hx
    simp only [Machine.placed, occ_appendNat]; omega⟩

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
      | set i e =>
        refine exec_moved p f _ _ ?_ ?_
        · exact hnext
        · exact he
      | observe j e =>
        refine exec_moved p f _ _ ?_ ?_
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
      | branch t yes no =>
        refine exec_moved p f _ _ ?_ ?_
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
      | loop body =>
        refine exec_moved p f _ _ ?_ ?_
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
      | grow j e =>
        dsimp only
        split
        · exact Keeps.moved (Keeps.trans (Keeps.put m th (fun _ => by exact hk0))
            (Keeps.frame (fun h => by exact h) (fun _ => by rfl)))
        · split
          · refine exec_moved p f _ _ ?_ he
            exact OwnFrames.stmts rest (growPartReq_own _ _ _ _ _ hk.tail)
          · split
            · refine (Keeps.setPool m j _ ?_).then (exec_moved p f _ _ ?_ he)
              · rfl
              · exact OwnFrames.stmts rest (growPartReq_own _ _ _ _ _ hk.tail)
            · exact (Moved.grower m _).keep (Keeps.put _ { th with k := .stmts rest :: k } (fun _ => hnext))
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

theorem Machine.grownReq_keeps (p : Program) (m : Machine) (t i want req : Nat) (h : Held) :
    Keeps g m (m.grownReq p t i want req h) := by
  simp only [Machine.grownReq]
  refine (Keeps.setPool m i _ ?_).trans (Keeps.put _ _ (fun ho => ?_))
  · rfl
  show OwnFrames (getThread m.threads t).serial (growPartReq (getThread m.threads t).k i want req)
  rcases ho.1 t with ⟨e1, e2⟩ | e
  · rw [e1]; exact growPartReq_own _ _ _ _ _ e2
  · rw [e]; exact OwnFrames.nil _

theorem retryGrowers_keeps (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool), Keeps g m (retryGrowers p f m i b).1
  | 0, m, i, b => Keeps.frame (fun h => by exact h) (fun _ => by rfl)
  | f + 1, m, i, b => by
    simp only [retryGrowers]
    split
    · exact Keeps.refl m
    · next x hx =>
      split
      · exact Keeps.refl m
      · split
        · exact ((Machine.grownReq_keeps p m _ i _ _ _).trans (Keeps.regrow _ i x hx)).trans (retryGrowers_keeps p f _ i true)
        · exact Keeps.refl m

theorem retryPool_keeps (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) : Keeps g m (retryPool p f m i b).1 := by
  simp only [retryPool]
  split
  · exact (retryGrowers_keeps p f m i b).trans (retryQueue_keeps p f _ i _)
  · exact retryGrowers_keeps p f m i b

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

end Serq.Kernel
