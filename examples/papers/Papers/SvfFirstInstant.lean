module

public import Papers.SvfEvery

/-! # SVF (`svf.sq`): the run's first instant, for every batch

The first step of the simulation the shortest-first server needs (`docs/lean.md`, *SVF for every
batch*): for every number of sessions `n`, once the first instant has settled (`settle` of the initial
machine, with enough fuel: `9 · n + 10` and more), every session has run its turn's block and submitted its
turn at 0, and waits with its hold in `reqs`' queue; the queue holds the `n` sessions' holds in serial
order (each joined at 0, none at the head); no thread is ready, no timer is set, no resident, the clock
is 0 (`svf_first_settle`). Each session's attributes are then `[0, 0, 4, v, s, 1, v]` with its volume
`v = 1 + (3 · s) % 5` (`new = 4`, `out = volume = v`, `serial = s`, `turn_no = 1`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-- `svf.sq`'s program with `n` sessions. -/
def svfP (n : Nat) : Program := { Papers.Claims.Svf.program with sessions := n }

/-- Session `s`'s volume, `1 + (3 · s) % 5`. -/
def svfVol (s : Nat) : Nat := 1 + (3 * s) % 5

/-- The server's hold: its pools (one unit of `reqs`) and its body (the prefill, then the decodes). -/
def svfOn : List HoldOn := [⟨0, (.num 1), (.num 0), false, false, false, none⟩]

def svfBody : List Stmt :=
  [.step 0 false 0 (.attr 2), .step 0 true 0 (.bin .sub (.attr 3) (.num 1))]

/-- Session `s`'s hold as it waits in `reqs`' queue, joined at `t`. -/
def svfWaiter (s t : Nat) : Waiter := ⟨s, t, svfOn, none, none, svfBody, false⟩

/-- Session `s` waiting for its hold: its turn submitted at `t`, its attributes set, what is left the
hold's observe, the answer and the end of the session block. -/
def svfWaiting (s t : Nat) : Thread :=
  ⟨s, [0, 0, 4, svfVol s, s, 1, svfVol s], 1, t, true,
   [.stmts [.observe 0 (.attr 6)], .answer, .stmts []], [], [], 0, 0, [], []⟩

theorem svfWaiting_serial (s t : Nat) : (svfWaiting s t).serial = s := rfl

def zeroProgress : Progress := ⟨0, 0, 0, 0, 0, 0, false⟩

/-- An arriving session's thread runs until its hold waits (8 steps of `exec`). -/
theorem svf_exec_arrival (n f s : Nat) (m : Kernel.Machine) :
    exec (svfP n) (f + 8) m (arrive (svfP n) s) =
      ({ m with progress := setProgress m.progress s zeroProgress,
                pools := setPool m.pools 0 { getPool m.pools 0 with
                  queue := insertByCreation [] m.threads m.now 0 s (svfWaiter s m.now) (getPool m.pools 0).queue } }).put
        (svfWaiting s m.now) := by
  rfl

/-- The holds of sessions `0 … k − 1`, waiting in serial order, joined at 0. -/
noncomputable def svfWaiters : Nat → List Waiter
  | 0 => []
  | k + 1 => svfWaiters k ++ [svfWaiter k 0]

/-- Sessions `0 … k − 1` waiting, their turns submitted at 0. -/
noncomputable def svfWaitings : Nat → List Thread
  | 0 => []
  | k + 1 => svfWaitings k ++ [svfWaiting k 0]

theorem svfWaitings_length : ∀ k, (svfWaitings k).length = k
  | 0 => rfl
  | k + 1 => by simp [svfWaitings, svfWaitings_length k]

/-- The first instant after `k` sessions ran, `r` to go. -/
noncomputable def svfMid (n k r : Nat) : Kernel.Machine :=
  ⟨0, 0, svfWaitings k ++ arrivals (svfP n) r k, serials r k, [], idleStages (svfP n).stages,
   [⟨0, 0, svfWaiters k, []⟩], false, idleEngines (svfP n).stages, 1, n, noProgress n, false, []⟩

theorem getThread_append_self : ∀ (l : List Thread) (x : Thread) (rest : List Thread),
    getThread (l ++ x :: rest) l.length = x
  | [], _, _ => rfl
  | _ :: l, x, rest => getThread_append_self l x rest

theorem setThread_append_self : ∀ (l : List Thread) (x v : Thread) (rest : List Thread),
    setThread (l ++ x :: rest) l.length v = l ++ v :: rest
  | [], _, _, _ => rfl
  | y :: l, x, v, rest => by
    show y :: setThread (l ++ x :: rest) l.length v = y :: (l ++ v :: rest)
    rw [setThread_append_self l x v rest]

theorem getThread_append_lt : ∀ (l rest : List Thread) (j : Nat), j < l.length →
    getThread (l ++ rest) j = getThread l j
  | [], _, _, h => absurd h (by simp)
  | _ :: _, _, 0, _ => rfl
  | _ :: l, rest, j + 1, h => getThread_append_lt l rest j (by simp at h; omega)

theorem getThread_svfWaitings : ∀ (k j : Nat), j < k → getThread (svfWaitings k) j = svfWaiting j 0
  | 0, _, h => absurd h (by omega)
  | k + 1, j, h => by
    show getThread (svfWaitings k ++ [svfWaiting k 0]) j = _
    by_cases hj : j < k
    · rw [getThread_append_lt _ _ _ (by rw [svfWaitings_length]; exact hj)]
      exact getThread_svfWaitings k j hj
    · have hjk : j = k := by omega
      rw [hjk]
      have h := getThread_append_self (svfWaitings k) (svfWaiting k 0) []
      rw [svfWaitings_length] at h
      exact h

theorem setProgress_noProgress : ∀ (n s : Nat), setProgress (noProgress n) s zeroProgress = noProgress n
  | 0, _ => rfl
  | _ + 1, 0 => rfl
  | n + 1, s + 1 => by
    show zeroProgress :: setProgress (noProgress n) s zeroProgress = zeroProgress :: noProgress n
    rw [setProgress_noProgress n s]

/-- A hold joining at 0 after the holds of sessions `0 … k − 1` (all created at 0, earlier serials)
goes to the back. -/
theorem insertByCreation_svf (ts : List Thread) (k : Nat) (hts : ∀ j < k, getThread ts j = svfWaiting j 0) :
    ∀ (l : List Waiter), (∀ x ∈ l, x.joined = 0 ∧ x.head = false ∧ x.thread < k) →
      insertByCreation [] ts 0 0 k (svfWaiter k 0) l = l ++ [svfWaiter k 0]
  | [], _ => rfl
  | x :: xs, h => by
    have hx := h x (by simp)
    have hrest := insertByCreation_svf ts k hts xs (fun y hy => h y (by simp [hy]))
    have ht := hts x.thread hx.2.2
    have hlt : ¬ k < x.thread := by omega
    simp [insertByCreation, hx.1, hx.2.1, ht, svfWaiting, tieNo, hrest, hlt]

theorem svfWaiters_spec : ∀ (k : Nat), ∀ x ∈ svfWaiters k, x.joined = 0 ∧ x.head = false ∧ x.thread < k
  | 0, _, h => by simp [svfWaiters] at h
  | k + 1, x, h => by
    simp only [svfWaiters, List.mem_append, List.mem_singleton] at h
    rcases h with h | rfl
    · have := svfWaiters_spec k x h
      exact ⟨this.1, this.2.1, by omega⟩
    · exact ⟨rfl, rfl, by simp [svfWaiter]⟩

/-- One session of the first instant: it runs until its hold waits at the back of the queue. -/
theorem svf_mid_step (n k r f : Nat) :
    exec (svfP n) (f + 8) { svfMid n k (r + 1) with ready := serials r (k + 1) }
      (getThread (svfMid n k (r + 1)).threads k) = svfMid n (k + 1) r := by
  have hg : getThread (svfMid n k (r + 1)).threads k = arrive (svfP n) k := by
    have h := getThread_append_self (svfWaitings k) (arrive (svfP n) k) (arrivals (svfP n) r (k + 1))
    rw [svfWaitings_length] at h
    exact h
  rw [hg, svf_exec_arrival]
  have hins : insertByCreation [] (svfWaitings k ++ arrivals (svfP n) (r + 1) k) 0 0 k (svfWaiter k 0) (svfWaiters k) =
      svfWaiters k ++ [svfWaiter k 0] :=
    insertByCreation_svf _ k (fun j hj => by
      rw [getThread_append_lt _ _ _ (by rw [svfWaitings_length]; exact hj)]
      exact getThread_svfWaitings k j hj) _ (svfWaiters_spec k)
  have hset : setThread (svfWaitings k ++ arrivals (svfP n) (r + 1) k) k (svfWaiting k 0) =
      svfWaitings k ++ svfWaiting k 0 :: arrivals (svfP n) r (k + 1) := by
    have h := setThread_append_self (svfWaitings k) (arrive (svfP n) k) (svfWaiting k 0) (arrivals (svfP n) r (k + 1))
    rw [svfWaitings_length] at h
    exact h
  simp only [svfMid, Kernel.Machine.put, svfWaiting_serial, getPool, setPool, hins, hset, setProgress_noProgress]
  simp [svfWaitings, svfWaiters]

/-- The first instant's ready threads, each run until its hold waits: with fuel `g + 9 r + 1`, the
`r` sessions left all join the queue. -/
theorem svf_runReady_mid (n : Nat) : ∀ (r k g : Nat),
    runReady (svfP n) (g + 9 * r + 1) (svfMid n k r) = svfMid n (k + r) 0
  | 0, k, g => rfl
  | r + 1, k, g => by
    have hf : g + 9 * (r + 1) + 1 = (g + 9 * r + 1 + 8) + 1 := by omega
    rw [hf]
    show runReady (svfP n) (g + 9 * r + 1 + 8) (exec (svfP n) (g + 9 * r + 1 + 8)
      { svfMid n k (r + 1) with ready := serials r (k + 1) } (getThread (svfMid n k (r + 1)).threads k)) = _
    rw [svf_mid_step]
    have hf2 : g + 9 * r + 1 + 8 = (g + 8) + 9 * r + 1 := by omega
    rw [hf2, svf_runReady_mid n r (k + 1) (g + 8)]
    rw [show k + 1 + r = k + (r + 1) by omega]

/-- **The first instant, for every batch.** For every number of sessions `n` and every fuel of at least
`9 · n + 2`, the initial machine settles into: clock 0, no thread ready, no timer, no resident, the `n`
sessions waiting (each ran its turn's block, submitted its turn at 0, its attributes
`[0, 0, 4, v, s, 1, v]` with `v = 1 + (3 · s) % 5`), and `reqs`' queue holding their holds in serial
order, each joined at 0 and none at the head. -/
theorem svf_first_settle (n g : Nat) :
    settle (svfP n) (g + 9 * n + 2) (initial (svfP n)) = svfMid n n 0 := by
  have h0 : initial (svfP n) = svfMid n 0 n := rfl
  have hr := svf_runReady_mid n n 0 g
  rw [Nat.zero_add] at hr
  rw [h0, show g + 9 * n + 2 = (g + 9 * n + 1) + 1 by omega, settle, hr]
  rfl

/-- What the settled first instant holds, in words: `reqs`' queue is the holds of sessions `0 … n − 1`
in serial order, every session `s < n` waits with its turn submitted at 0 and its volume `v`, and the
clock is 0 with nothing ready or timed. -/
theorem svf_first_settle_spec (n g : Nat) :
    let m := settle (svfP n) (g + 9 * n + 2) (initial (svfP n))
    m.now = 0 ∧ m.ready = [] ∧ m.timers = [] ∧ (getPool m.pools 0).queue = svfWaiters n ∧
    (getEngineState m.engines 0).residents = [] ∧
    ∀ s < n, getThread m.threads s = svfWaiting s 0 := by
  intro m
  have hm : m = svfMid n n 0 := svf_first_settle n g
  rw [hm]
  refine ⟨rfl, rfl, rfl, rfl, rfl, fun s hs => ?_⟩
  show getThread (svfWaitings n ++ []) s = _
  rw [getThread_append_lt _ _ _ (by rw [svfWaitings_length]; exact hs)]
  exact getThread_svfWaitings n s hs

/-- The first hold in `reqs`' queue at the first instant is session 0's. -/
theorem svfWaiters_succ : ∀ n, ∃ ws, svfWaiters (n + 1) = svfWaiter 0 0 :: ws
  | 0 => ⟨[], rfl⟩
  | n + 1 => by
    obtain ⟨ws, h⟩ := svfWaiters_succ n
    exact ⟨ws ++ [svfWaiter (n + 1) 0], by
      show svfWaiters (n + 1) ++ [svfWaiter (n + 1) 0] = _
      rw [h]; rfl⟩

/-- **The first admission, for every batch.** At the settled first instant of a batch of `n + 1`
sessions, the hold `reqs`' queue offers (the one the engine's `admit waiting` takes first) is session
0's, of volume 1: the least volume, and the first that joined (`svf_admits_least_volume`,
`svf_admits_first_least`, since no session has volume 0). -/
theorem svf_first_admission (n : Nat) :
    select (svfP (n + 1)) (svfMid (n + 1) (n + 1) 0) 0 (svfWaiters (n + 1)) = 0 := by
  obtain ⟨ws, hws⟩ := svfWaiters_succ n
  have hq : (getPool (svfMid (n + 1) (n + 1) 0).pools 0).queue = svfWaiter 0 0 :: ws := hws
  have hhf : HeadFree (svfMid (n + 1) (n + 1) 0).pools := by
    intro q hq' w hw
    have hq'' : q = ⟨0, 0, svfWaiters (n + 1), []⟩ := by simpa [svfMid] using hq'
    subst hq''
    exact (svfWaiters_spec (n + 1) w hw).2.1
  have hthreads : ∀ t < n + 1, getThread (svfMid (n + 1) (n + 1) 0).threads t = svfWaiting t 0 := by
    intro t ht
    show getThread (svfWaitings (n + 1) ++ []) t = _
    rw [getThread_append_lt _ _ _ (by rw [svfWaitings_length]; exact ht)]
    exact getThread_svfWaitings (n + 1) t ht
  have hl := svf_admits_least_volume (n + 1) _ hhf _ ws hq
  have hf := svf_admits_first_least (n + 1) _ hhf _ ws hq
  rw [hws]
  rcases Nat.eq_zero_or_pos (select { Papers.Claims.Svf.program with sessions := n + 1 } (svfMid (n + 1) (n + 1) 0) 0
      (svfWaiter 0 0 :: ws)) with h | hpos
  · exact h
  exfalso
  have h0 := hf 0 hpos
  -- the offered hold is in the queue, so its session is one of the `n + 1`, of volume at least 1
  have hmem := getWaiter_mem' (svfWaiter 0 0 :: ws) _ hl.1
  have hspec : ∀ x ∈ svfWaiter 0 0 :: ws, x.thread < n + 1 := by
    rw [← hws]
    exact fun x hx => (svfWaiters_spec (n + 1) x hx).2.2
  have hsel := hspec _ hmem
  rw [hthreads _ hsel] at h0
  have h00 : (getWaiter (svfWaiter 0 0 :: ws) 0).thread = 0 := rfl
  rw [h00, hthreads 0 (by omega)] at h0
  simp [svfWaiting, getAt, svfVol] at h0

end Papers
