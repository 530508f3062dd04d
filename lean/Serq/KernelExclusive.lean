module

public import Serq.Kernel

/-! # The kernel IR, interpreted: `exclusive prefill`

An engine under `exclusive prefill; admit waiting while (running.preempted == 0);` (the IR's
`serve` `ExclusivePrefill`, no iteration body) plans either one prefill alone or a decode-only batch
(`StepStage.plan_exclusive`, serq/sim/steps.py; the reference, *Engines*):

1. a running prefill takes precedence: the residents in admission order, the first prefill served
   (its growth may preempt) is the iteration's batch and nothing is admitted after it; a prefill whose
   growth does not fit under `preempt none` is passed over, one the granule cuts to none is passed
   over and ends the iteration's admissions (`runningPrefill`);
2. else the decodes, in admission order, each its token while budget is left (`serveIn` with the
   predicate `decoding`); an iteration that preempted admits no one;
3. else the waiting, one at a time, each seeing the full budget in its header (`budget_left` is the
   budget the iteration read, up to the chunk cap): an admitted prefill displaces the tentative decodes
   (their tokens back, `clearSched`; what their holds grew to stays, and they advance no computed KV)
   and takes the full budget, and nothing is admitted after it; an admitted decode is served its token
   from the budget left, and the admissions go on while budget is left (`exclusiveAdmit`).

Which engines schedule so is `xs`, the engines' indices (`Service.step e`), beside the program: the
kernel's `Engine` keeps vLLM's schedule, and `runProgramX p [] fuel` is `runProgram p fuel`
(`runProgramX_nil`), so every theorem of `runProgram` is one of every program with no exclusive engine.
-/
@[expose] public section

namespace Serq.Kernel

/-- The residents with no token from the iteration being planned (the displaced batch: the
interpreter's `unserve` of every job in it). -/
def clearSched : List Resident → List Resident
  | [] => []
  | r :: rs => { r with sched := 0 } :: clearSched rs

/-- A running prefill takes precedence: over the residents' threads in admission order, the first
prefill with tokens left is served (`Machine.serveOne`) and the flag says the iteration's batch is
chosen (its growth may have preempted, itself included); one whose growth does not fit under
`preempt none` is passed over, and one the iteration gives no token (the granule, or no budget) too,
the granule's ending the iteration's admissions (`Batch.passed`). -/
def runningPrefill (p : Program) (s chunk : Nat) : List Nat → Machine → Batch → Machine × Batch × Bool
  | [], m, b => (m, b, false)
  | t :: ts, m, b =>
    match residentOf t (getEngineState m.engines s).residents with
    | none => runningPrefill p s chunk ts m b
    | some r =>
      if r.decode || r.rem = 0 then runningPrefill p s chunk ts m b else
      if tokensFor chunk b.gran b.budget r = 0 then
        runningPrefill p s chunk ts m (if b.gran = 0 then b else { b with passed := true })
      else
      let g := m.serveOne p s b r (tokensFor chunk b.gran b.budget r)
      if g.2.2 = 1 then runningPrefill p s chunk ts g.1 g.2.1 else (g.1, g.2.1, true)

/-- The waiting admitted under `exclusive prefill` (engine `s`): while no prefill was passed over and
none preempted, the head of the first queue it admits (`select`) is admitted if it fits with the
full budget in its header (`admissionStage chunk b.cap`), and its thread runs at once. A prefill it
started displaces the batch (`clearSched`, the batch's tokens back) and is served alone from the full
budget, and the admissions end; a decode is served its token while budget is left, and the admissions
go on while budget is left. -/
def exclusiveAdmit (p : Program) (s chunk : Nat) : Nat → Machine → Batch → Machine × Batch
  | 0, m, b => ({ m with outOfFuel := true }, b)
  | f + 1, m, b =>
    if b.passed || b.preempted != 0 then (m, b) else
    match firstQueue s 0 p.admitVia m.pools with
    | none => (m, b)
    | some i =>
      let queue := (getPool m.pools i).queue
      let j := select p m i queue
      let w := getWaiter queue j
      let th := getThread m.threads w.thread
      if fits p m.threads ⟨p.caps, m.pools, th.serial, admissionStage chunk b.cap⟩ th.attrs m.now w.on then
        let m1 := m.admitWaiter p (admissionStage chunk b.cap) i j
        let m2 := exec p f m1 (getThread m1.threads w.thread)
        match residentOf w.thread (getEngineState m2.engines s).residents with
        | some r =>
          if !r.decode && r.rem != 0 then
            let es := getEngineState m2.engines s
            let m3 := { m2 with engines := setEngineState m2.engines s { es with residents := clearSched es.residents } }
            let b3 : Batch := ⟨b.cap, 0, 0, 0, b.preempted, b.gran, b.passed⟩
            if tokensFor chunk b3.gran b3.budget r = 0 then (m3, b3) else
            let g := m3.serveOne p s b3 r (tokensFor chunk b3.gran b3.budget r)
            (g.1, g.2.1)
          else if b.budget = 0 then (m2, b) else
            let g := m2.serveOne p s b r (tokensFor chunk b.gran b.budget r)
            if g.2.1.budget = 0 then (g.1, g.2.1) else exclusiveAdmit p s chunk f g.1 g.2.1
        | none => if b.budget = 0 then (m2, b) else exclusiveAdmit p s chunk f m2 b
      else (m, b)

/-- The plan of an `exclusive prefill` iteration of engine `s` (`plan_exclusive`): a running
prefill, else the decodes, then (no preemption) the waiting. -/
def planExclusive (p : Program) (f s chunk : Nat) (m : Machine) (b : Batch) : Machine × Batch :=
  let r1 := runningPrefill p s chunk (threadsOf (getEngineState m.engines s).residents) m b
  if r1.2.2 then (r1.1, r1.2.1) else
  let r2 := serveIn p s chunk (some (.stageVar StageVar.decoding)) (threadsOf (getEngineState r1.1.engines s).residents)
    r1.1 r1.2.1
  if r2.2.preempted != 0 then r2 else exclusiveAdmit p s chunk f r2.1 r2.2

/-- Engine `s` (of clauses `eng`) plans an `exclusive prefill` iteration: as `startIteration`, its
plan `planExclusive` (the budget, the chunk and the granule read once as the iteration starts; no
iteration when it schedules no token and preempted none; else `execute` over the batch, the record,
the end). -/
def startExclusive (p : Program) (f s : Nat) (eng : Engine) (m : Machine) : Machine :=
  let es := getEngineState m.engines s
  let running := [0, 0, countDecoders es.residents, countResidents es.residents, waitingIn s p.admitVia m.pools,
    0, 0, 0, 0, 0, 0, 0, runningKvDecode p m es.residents, runningKvPrefill m es.residents]
  let budget := eval (engineView p m running) [] m.now 0 eng.budget
  let chunk := eval (engineView p m running) [] m.now 0 eng.chunk
  let gran := eval (engineView p m running) [] m.now 0 eng.granule
  let planned := planExclusive p f s chunk m ⟨budget, 0, 0, 0, 0, gran, false⟩
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
  { m' with engines := setEngineState m'.engines s { es' with busy := true, start := m'.now, served := es'.served + b.tokens,
                                                              records := record :: es'.records } }.setTimer (m'.now + cost) (.iterationEnd s)

/-- Engine `e` at stage `s` starts an iteration: `exclusive prefill` when `e` is among `xs`, else its
schedule (`startIteration`). -/
def startStep (p : Program) (xs : List Nat) (f s e : Nat) (m : Machine) : Machine :=
  if memberOf xs e then startExclusive p f s (getEngine p.engines e) m else startIteration p f s (getEngine p.engines e) m

/-- `startPass`, the engines in `xs` planning under `exclusive prefill` (`startStep`). -/
def startPassX (p : Program) (xs : List Nat) (f : Nat) : List Service → Nat → List Nat → Machine → Bool → Machine × List Nat × Bool × Bool
  | [], _, tried, m, acted => (m, tried, acted, false)
  | .step e :: ss, s, tried, m, acted =>
    let es := getEngineState m.engines s
    if es.busy || !hasWork p.admitVia m.pools s es || memberOf tried s then startPassX p xs f ss (s + 1) tried m acted
    else
      let m' := settle p f (startStep p xs f s e m)
      if m'.dueNow then (m', s :: tried, true, true) else startPassX p xs f ss (s + 1) (s :: tried) m' true
  | _ :: ss, s, tried, m, acted => startPassX p xs f ss (s + 1) tried m acted

/-- `startEngines` over `startPassX`. -/
def startEnginesX (p : Program) (xs : List Nat) (f : Nat) : Nat → List Nat → Machine → Machine
  | 0, _, m => m
  | n + 1, tried, m =>
    let r := startPassX p xs f p.stages 0 tried m false
    if r.2.2.2 || !r.2.2.1 then r.1 else startEnginesX p xs f n r.2.1 r.1

def endOfInstantX (p : Program) (xs : List Nat) (f : Nat) (m : Machine) : Machine :=
  if m.dueNow then m else startEnginesX p xs f (countServices p.stages + 1) [] m

def loopX (p : Program) (xs : List Nat) : Nat → Machine → Machine
  | 0, m => { m with outOfFuel := true }
  | f + 1, m =>
    match m.timers with
    | [] => m
    | t :: ts => loopX p xs f (endOfInstantX p xs f (settle p f (fire p { m with now := Nat.max m.now t.time, timers := ts } t.wake)))

/-- The whole run, the engines `xs` under `exclusive prefill`, cut at `fuel`. -/
def runProgramX (p : Program) (xs : List Nat) (fuel : Nat) : Machine :=
  loopX p xs fuel (endOfInstantX p xs fuel (settle p fuel (initial p)))

/-- `agrees`, the engines `xs` under `exclusive prefill`. -/
def agreesX (p : Program) (xs : List Nat) (fuel : Nat) (expected : List Expected) (records : List (List Iteration)) : Bool :=
  let m := runProgramX p xs fuel
  !m.outOfFuel && !m.failed && agreesWith m.threads expected && recordsAgree m.engines records

/-! ### No engine under `exclusive prefill`: the kernel's run -/

theorem startStep_nil (p : Program) (f s e : Nat) (m : Machine) :
    startStep p [] f s e m = startIteration p f s (getEngine p.engines e) m := rfl

theorem startPassX_nil (p : Program) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    startPassX p [] f ss s tried m a = startPass p f ss s tried m a := by
  induction ss generalizing s tried m a with
  | nil => rfl
  | cons x ss ih => cases x <;> simp only [startPassX, startPass, startStep_nil, ih]

theorem startEnginesX_nil (p : Program) (f n : Nat) (tried : List Nat) (m : Machine) :
    startEnginesX p [] f n tried m = startEngines p f n tried m := by
  induction n generalizing tried m with
  | zero => rfl
  | succ n ih => simp only [startEnginesX, startEngines, startPassX_nil, ih]

theorem endOfInstantX_nil (p : Program) (f : Nat) (m : Machine) : endOfInstantX p [] f m = endOfInstant p f m := by
  simp only [endOfInstantX, endOfInstant, startEnginesX_nil]

theorem loopX_nil (p : Program) (f : Nat) (m : Machine) : loopX p [] f m = loop p f m := by
  induction f generalizing m with
  | zero => rfl
  | succ f ih =>
    cases h : m.timers with
    | nil => simp only [loopX, loop, h]
    | cons t ts => simp only [loopX, loop, h, endOfInstantX_nil, ih]

/-- With no engine under `exclusive prefill`, the run is the kernel's (`runProgram`): every theorem of
`runProgram` holds of `runProgramX p []`. -/
theorem runProgramX_nil (p : Program) (fuel : Nat) : runProgramX p [] fuel = runProgram p fuel := by
  simp only [runProgramX, runProgram, loopX_nil, endOfInstantX_nil]

theorem agreesX_nil (p : Program) (fuel : Nat) (expected : List Expected) (records : List (List Iteration)) :
    agreesX p [] fuel expected records = agrees p fuel expected records := by
  simp only [agreesX, agrees, runProgramX_nil]

end Serq.Kernel
