module

public import Papers.SvfFirstInstant

/-! # SVF (`svf.sq`): the first iteration, for every batch

The step after the first instant (`Papers.svf_first_settle`): the engine's first
iteration at 0 admits session 0's hold (the one `select` offers, `Papers.svf_first_admission`). The
kernel cannot evaluate `select` over a queue whose tail is symbolic in `n`, so the engine's functions are
unfolded by hand around it, each equation the interpreter's own code: `svf_end_start` (`endOfInstant` of
the settled first instant is `svfEndTail` of the engine's `startIteration`), `svf_start_iter`
(`startIteration` is `svfIterTail` of `admitWaiting` on the initial batch) and `svf_admit_first`
(`admitWaiting` with `select` rewritten to 0 admits the hold at index 0, `admitOne`). The rest is
evaluated in explicit steps, each machine written out and checked by its own `rfl` (one `rfl` over the
whole step ran past 2 000 000 heartbeats in this WebAssembly build): `svf_admitOne_first`,
`svf_admitWaiting_spent`, `svf_iterTail_first`, `svf_endTail_first`, and together `svf_first_start`: the
engine busy from 0 on session 0's 4-token prefill, its end at 1, the other holds waiting in serial order.
Then the end at 1 fires and session 0 is answered at 1 (`svf_first_end`, `svf_first_answer`), and from the
run's start (`svf_run_first_answer`): for every batch and every fuel of at least `9 · (n + 1) + 13`, the
run is the event loop after the instant of `svfM3`, session 0 answered at 1.
-/

@[expose] public section

namespace Papers

open Serq Kernel

theorem svfWaitings_succ : ∀ n, ∃ ts, svfWaitings (n + 1) = svfWaiting 0 0 :: ts
  | 0 => ⟨[], rfl⟩
  | n + 1 => by
    obtain ⟨ts, h⟩ := svfWaitings_succ n
    exact ⟨ts ++ [svfWaiting (n + 1) 0], by
      show svfWaitings (n + 1) ++ [svfWaiting (n + 1) 0] = _
      rw [h]; rfl⟩

/-- The settled first instant, its first thread and first hold in front. -/
def svfCons (n : Nat) (ts : List Thread) (ws : List Waiter) : Kernel.Machine :=
  ⟨0, 0, svfWaiting 0 0 :: ts, [], [], idleStages (svfP n).stages,
   [⟨0, 0, svfWaiter 0 0 :: ws, []⟩], false, idleEngines (svfP n).stages, 1, n, noProgress n, false, []⟩

/-- The first admission with `select` rewritten: the engine admits the hold at index 0. -/
theorem svf_admit_first (n f : Nat) (ts : List Thread) (ws : List Waiter)
    (hsel : select (svfP n) (svfCons n ts ws) 0 (svfWaiter 0 0 :: ws) = 0) :
    admitWaiting (svfP n) 0 0 none true (f + 1) (svfCons n ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩ =
      admitWaiting (svfP n) 0 0 none true f
        (admitOne (svfP n) f 0 0 0 0 none (svfCons n ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩).1
        (admitOne (svfP n) f 0 0 0 0 none (svfCons n ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩).2 := by
  show (let j := select (svfP n) (svfCons n ts ws) 0 (svfWaiter 0 0 :: ws)
        let w := getWaiter (svfWaiter 0 0 :: ws) j
        let th := getThread (svfCons n ts ws).threads w.thread
        if fits (svfP n) (svfCons n ts ws).threads ⟨(svfP n).caps, (svfCons n ts ws).pools, th.serial, admissionStage 0 4⟩ th.attrs 0 w.on then
          let r := admitOne (svfP n) f 0 0 0 j none (svfCons n ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩
          admitWaiting (svfP n) 0 0 none true f r.1 r.2
        else (svfCons n ts ws, ⟨4, 0, 0, 0, 0, 0, false⟩)) = _
  rw [hsel]
  rfl

/-- `startIteration`'s code once the batch is planned (`planned`), as the interpreter has it. -/
noncomputable def svfIterTail (p : Program) (s chunk : Nat) (eng : Kernel.Engine) (planned : Kernel.Machine × Batch) : Kernel.Machine :=
  let m' := planned.1
  let b := planned.2
  let es' := getEngineState m'.engines s
  if b.tokens = 0 && b.preempted = 0 then m' else
  let nres := countResidents es'.residents
  let kvd := batchKvDecode p m' es'.residents
  let kvp := batchKvPrefill m' es'.residents
  let att2 := batchAttention2 m' es'.residents
  let cost := eval (engineView p m' (costVars b.tokens b.prefilled b.decoders nres (waitingIn s p.admitVia m'.pools) kvd kvp att2)) [] m'.now 0 eng.cost
  if cost = 0 && b.tokens != 0 then { m' with failed := true } else
  let record : Iteration := ⟨m'.now, b.tokens, b.prefilled, b.decoders, nres, demandOf chunk es'.residents, es'.served, m'.arrived, kvd, kvp, att2⟩
  let running' : EngineState :=
    { es' with busy := true, start := m'.now, served := es'.served + b.tokens, records := record :: es'.records }
  { m' with engines := setEngineState m'.engines s running' }.setTimer (m'.now + cost) (.iterationEnd s)

theorem svf_start_iter (n f : Nat) (ts : List Thread) (ws : List Waiter) :
    startIteration (svfP n) (f + 1) 0 (getEngine (svfP n).engines 0) (svfCons n ts ws) =
      svfIterTail (svfP n) 0 0 (getEngine (svfP n).engines 0)
        (admitWaiting (svfP n) 0 0 none true (f + 1) (svfCons n ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩) := rfl

/-- `endOfInstant`'s code once the (one) engine's iteration started (`x`). -/
noncomputable def svfEndTail (p : Program) (f : Nat) (x : Kernel.Machine) : Kernel.Machine :=
  let r := (let m' := settle p f x
            if m'.dueNow then (m', [0], true, true) else startPass p f [] 1 [0] m' true)
  if r.2.2.2 || !r.2.2.1 then r.1 else startEngines p f 1 r.2.1 r.1

theorem svf_end_start (n f : Nat) (ts : List Thread) (ws : List Waiter) :
    endOfInstant (svfP n) f (svfCons n ts ws) =
      svfEndTail (svfP n) f (startIteration (svfP n) f 0 (getEngine (svfP n).engines 0) (svfCons n ts ws)) := rfl

/-- The settled first instant of `n + 1` sessions in front form, and `select` there. -/
theorem svfMid_cons (n : Nat) : ∃ ts ws, svfWaiters (n + 1) = svfWaiter 0 0 :: ws ∧
    svfMid (n + 1) (n + 1) 0 = svfCons (n + 1) ts ws ∧
    select (svfP (n + 1)) (svfCons (n + 1) ts ws) 0 (svfWaiter 0 0 :: ws) = 0 := by
  obtain ⟨ws, hws⟩ := svfWaiters_succ n
  obtain ⟨ts, hts⟩ := svfWaitings_succ n
  have hm : svfMid (n + 1) (n + 1) 0 = svfCons (n + 1) ts ws := by
    simp [svfMid, svfCons, hws, hts, arrivals, serials]
  have hsel := svf_first_admission n
  rw [hm, hws] at hsel
  exact ⟨ts, ws, hws, hm, hsel⟩

/-- The first iteration's start, reduced past `select`: for every batch of `n + 1` sessions, the end of
the settled first instant is the interpreter's remaining code (`svfEndTail`, `svfIterTail`) over
`admitOne` of the hold at index 0, session 0's. -/
theorem svf_first_start_reduced (n f : Nat) : ∃ ts ws,
    svfWaiters (n + 1) = svfWaiter 0 0 :: ws ∧
    endOfInstant (svfP (n + 1)) (f + 1) (svfMid (n + 1) (n + 1) 0) =
      svfEndTail (svfP (n + 1)) (f + 1) (svfIterTail (svfP (n + 1)) 0 0 (getEngine (svfP (n + 1)).engines 0)
        (admitWaiting (svfP (n + 1)) 0 0 none true f
          (admitOne (svfP (n + 1)) f 0 0 0 0 none (svfCons (n + 1) ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩).1
          (admitOne (svfP (n + 1)) f 0 0 0 0 none (svfCons (n + 1) ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩).2)) := by
  obtain ⟨ts, ws, hws, hm, hsel⟩ := svfMid_cons n
  refine ⟨ts, ws, hws, ?_⟩
  rw [hm, svf_end_start, svf_start_iter, svf_admit_first _ _ _ _ hsel]

/-! ### The first iteration, evaluated in steps -/

/-- Session 0 once admitted and run into its prefill: admission number 1, what is left the decodes,
its hold's release (one unit of `reqs`), the observe, the answer and the session's end. -/
def svfServing0 : Thread :=
  ⟨0, [0, 0, 4, svfVol 0, 0, 1, svfVol 0], 1, 0, true,
   [.stmts [.step 0 true 0 (.bin .sub (.attr 3) (.num 1))], .release [⟨0, 1, false, false, 0, false, 0, 1⟩] (svfWaiter 0 0),
    .stmts [.observe 0 (.attr 6)], .answer, .stmts []], [], [], 1, 0, [], []⟩

/-- The machine once session 0 is admitted and its prefill scheduled whole (4 tokens). -/
def svfM1 (n : Nat) (ts : List Thread) (ws : List Waiter) : Kernel.Machine :=
  ⟨0, 0, svfServing0 :: ts, [], [], idleStages (svfP (n + 1)).stages, [⟨1, 1, ws, []⟩], false,
   [⟨[⟨0, 4, false, 1, 4, 0⟩], false, 0, 0, [], []⟩], 2, n + 1, noProgress (n + 1), false, []⟩

/-- The machine once the first iteration started: busy from 0, its record kept, its end at 1. -/
def svfM2 (n : Nat) (ts : List Thread) (ws : List Waiter) : Kernel.Machine :=
  ⟨0, 1, svfServing0 :: ts, [], [⟨1, 0, .iterationEnd 0⟩], idleStages (svfP (n + 1)).stages, [⟨1, 1, ws, []⟩], false,
   [⟨[⟨0, 4, false, 1, 4, 0⟩], true, 0, 4, [⟨0, 4, 4, 0, 1, 4, 0, n + 1, 0, 0, 16⟩], []⟩], 2, n + 1,
   noProgress (n + 1), false, []⟩

theorem svf_admitOne_first (n f : Nat) (ts : List Thread) (ws : List Waiter) :
    admitOne (svfP (n + 1)) (f + 1) 0 0 0 0 none (svfCons (n + 1) ts ws) ⟨4, 0, 0, 0, 0, 0, false⟩ =
      (svfM1 n ts ws, ⟨4, 4, 4, 0, 0, 0, false⟩) := rfl

theorem svf_admitWaiting_spent (n f : Nat) (ts : List Thread) (ws : List Waiter) :
    admitWaiting (svfP (n + 1)) 0 0 none true (f + 1) (svfM1 n ts ws) ⟨4, 4, 4, 0, 0, 0, false⟩ =
      (svfM1 n ts ws, ⟨4, 4, 4, 0, 0, 0, false⟩) := rfl

theorem svf_iterTail_first (n : Nat) (ts : List Thread) (ws : List Waiter) :
    svfIterTail (svfP (n + 1)) 0 0 (getEngine (svfP (n + 1)).engines 0) (svfM1 n ts ws, ⟨4, 4, 4, 0, 0, 0, false⟩) =
      svfM2 n ts ws := rfl

theorem svf_endTail_first (n f : Nat) (ts : List Thread) (ws : List Waiter) :
    svfEndTail (svfP (n + 1)) (f + 2) (svfM2 n ts ws) = svfM2 n ts ws := rfl

/-- **The first iteration, for every batch.** For every batch of `n + 1` sessions and every fuel of at
least 3 past the first instant's, the end of the settled first instant is `svfM2`: the clock 0, the
engine busy from 0 with one resident, session 0's prefill of 4 tokens all scheduled, its record (4
tokens, all prefill, one resident, demand 4, `n + 1` arrived), the iteration's end the one timer, at 1;
session 0's hold holds `reqs`' one unit, and the queue is the other sessions' holds in serial order. -/
theorem svf_first_start (n f : Nat) : ∃ ts ws, svfWaiters (n + 1) = svfWaiter 0 0 :: ws ∧
    endOfInstant (svfP (n + 1)) (f + 3) (svfMid (n + 1) (n + 1) 0) = svfM2 n ts ws := by
  obtain ⟨ts, ws, hws, h⟩ := svf_first_start_reduced n (f + 2)
  refine ⟨ts, ws, hws, ?_⟩
  rw [h, svf_admitOne_first, svf_admitWaiting_spent, svf_iterTail_first, svf_endTail_first]

/-! ### The first answer -/

/-- Session 0 once answered: its turn answered at 1 (submitted at 0), its volume observed at 1, its first
token at 1 from the iteration that started at 0, its session over (created again at 2). -/
def svfDone0 : Thread :=
  ⟨0, [0, 0, 4, svfVol 0, 0, 1, svfVol 0], 1, 0, false, [], [⟨0, 1, 0, 1⟩], [⟨0, 1, 0, 1, svfVol 0⟩], 1, 2,
   [⟨0, 1, 1, 0, 0, 0, 0⟩], []⟩

/-- The machine once the first iteration ended at 1 and the instant settled: session 0 answered, `reqs`
free, the engine idle with no resident, the other holds waiting in serial order. -/
def svfM3 (n : Nat) (ts : List Thread) (ws : List Waiter) : Kernel.Machine :=
  ⟨1, 1, svfDone0 :: ts, [], [], idleStages (svfP (n + 1)).stages, [⟨0, 0, ws, []⟩], false,
   [⟨[], false, 0, 4, [⟨0, 4, 4, 0, 1, 4, 0, n + 1, 0, 0, 16⟩], []⟩], 2, n + 1,
   ⟨1, 0, 0, 0, 0, 0, false⟩ :: noProgress n, false, []⟩

/-- The first iteration's end (the one timer, at 1) fires and the instant settles: `svfM3`. -/
theorem svf_first_end (n f : Nat) (ts : List Thread) (ws : List Waiter) :
    settle (svfP (n + 1)) (f + 12)
      (fire (svfP (n + 1)) { svfM2 n ts ws with now := Nat.max 0 1, timers := [] } (.iterationEnd 0)) =
      svfM3 n ts ws := rfl

/-- **The first answer, for every batch.** The event loop's first step from the first iteration (`svfM2`)
fires its end at 1 and settles into `svfM3`: session 0 (volume 1) answered at 1, its response its volume. -/
theorem svf_first_answer (n f : Nat) (ts : List Thread) (ws : List Waiter) :
    loop (svfP (n + 1)) (f + 13) (svfM2 n ts ws) =
      loop (svfP (n + 1)) (f + 12) (endOfInstant (svfP (n + 1)) (f + 12) (svfM3 n ts ws)) := by
  show loop (svfP (n + 1)) (f + 12) (endOfInstant (svfP (n + 1)) (f + 12) (settle (svfP (n + 1)) (f + 12)
    (fire (svfP (n + 1)) { svfM2 n ts ws with now := Nat.max 0 1, timers := [] } (.iterationEnd 0)))) = _
  rw [svf_first_end]

/-- **The run up to its first answer, for every batch.** For every batch of `n + 1` sessions and every
fuel of at least `9 · (n + 1) + 13`, the run is the event loop from `svfM3` after its instant's end:
the first instant settled (`svf_first_settle`), the first iteration started at 0 on session 0
(`svf_first_start`), and its end at 1 answered session 0 (`svf_first_answer`). -/
theorem svf_run_first_answer (n g : Nat) : ∃ ts ws, svfWaiters (n + 1) = svfWaiter 0 0 :: ws ∧
    runProgram (svfP (n + 1)) (g + 9 * (n + 1) + 13) =
      loop (svfP (n + 1)) (g + 9 * (n + 1) + 12)
        (endOfInstant (svfP (n + 1)) (g + 9 * (n + 1) + 12) (svfM3 n ts ws)) := by
  obtain ⟨ts, ws, hws, h2⟩ := svf_first_start n (g + 9 * (n + 1) + 10)
  refine ⟨ts, ws, hws, ?_⟩
  have h1 := svf_first_settle (n + 1) (g + 11)
  rw [show g + 11 + 9 * (n + 1) + 2 = g + 9 * (n + 1) + 13 by omega] at h1
  rw [show g + 9 * (n + 1) + 10 + 3 = g + 9 * (n + 1) + 13 by omega] at h2
  show loop (svfP (n + 1)) (g + 9 * (n + 1) + 13) (endOfInstant (svfP (n + 1)) (g + 9 * (n + 1) + 13)
    (settle (svfP (n + 1)) (g + 9 * (n + 1) + 13) (initial (svfP (n + 1))))) = _
  rw [h1, h2, svf_first_answer]

/-- What `svfM3` holds, in words: the clock at 1, session 0's one answer at 1 for its turn submitted at 0
(its response, 1, is its volume), its observed volume 1, `reqs` free with the other sessions' holds
waiting in serial order, the engine idle with no resident and one record, no timer. -/
theorem svfM3_spec (n : Nat) (ts : List Thread) (ws : List Waiter) :
    let m := svfM3 n ts ws
    m.now = 1 ∧ m.timers = [] ∧ (getThread m.threads 0).answers = [⟨0, 1, 0, 1⟩] ∧
    (getThread m.threads 0).observations = [⟨0, 1, 0, 1, 1⟩] ∧ (getThread m.threads 0).k = [] ∧
    (getPool m.pools 0).used = 0 ∧ (getPool m.pools 0).queue = ws ∧
    (getEngineState m.engines 0).residents = [] ∧ (getEngineState m.engines 0).busy = false :=
  ⟨rfl, rfl, rfl, rfl, rfl, rfl, rfl, rfl, rfl⟩

end Papers
