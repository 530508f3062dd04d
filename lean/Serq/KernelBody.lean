module

public import Serq.KernelExclusive

/-! # The kernel IR, interpreted: an engine's iteration body

An engine whose `schedule { … }` is neither vLLM's (`advance running [only (p)] [by (keys)]; admit
waiting [only (q)] while (running.preempted == 0);`) nor `exclusive prefill` plans each iteration by
running its statements once each, in order (the IR's `iteration`, `StepStage.run_body` in
serq/sim/steps.py; the reference, *The iteration as a program*):

* `advance running [only (p)]` (`IterStmt.serve`): the residents not yet served, in the engine's serve
  order (its `advance running by` keys, read as the statement starts, as the interpreter's `serve` sorts
  them; none: admission order), each the predicate lets (read as the running requests stand) its tokens
  while budget is left. A grower that preempts itself ends the iteration's serving: this statement's
  and every later one's (`Plan.stopServe`, the interpreter's `stop_serve`);
* `admit waiting [only (p)] [while (e)]` (`IterStmt.admit`): while budget is left, no prefill was
  passed over (`Batch.passed`) and the gate reads non-zero (read before every admission), the head of
  the first queue the engine admits is admitted if it fits, its thread runs at once and its run is
  served if the predicate lets it; the first head that does not fit ends the statement;
* `branch (e) { … } else { … }` (`IterStmt.branch`): the guard picks the block.

A guard and a gate read what the interpreter's `guard_ctx` holds (`guardVars`): the running requests as
they stand (`decoders`, `residents`, `waiting_holds`, `kv_decode`, `kv_prefill`, at their `StageVar`
places), what the iteration has scheduled so far (`batch.tokens`, `batch.prefilled` at 0 and 1), and the
iteration's counts `running.preempted` and `waiting.admitted` (`StageVar.preempted` 15,
`StageVar.admitted` 16). An iteration that schedules no token and preempted none is none, as under
vLLM's schedule; else it lasts `execute` over its batch (`startBody`).

* `set NAME = e;` (`IterStmt.set`): the register takes `e`'s value (read as a guard reads) at once, so
  what the statements after it read, `execute` included, is the new value.

Registers (`state NAME = c;`): register `k` of the engine is read at the stage view's place
`StageVar.registers + k` (17 + k), in every expression of the engine's own (its `tokens cap`, `each at
most`, `granule`, `execute`, serve keys, `only` predicates, guards, gates and sets); the plan carries their
values (`Plan.regs`) and puts them in each expression before the kernel reads it (`Expr.withRegs`), so the
kernel's `serveIn`, `admitOne` and `eval` read no register themselves. A try that schedules no token,
preempted none and admitted none is undone, its sets with it (the interpreter's `saved`, `StepStage.start`);
any other keeps them in the engine's state (`EngineState.regs`; `[]` before the first: the registers as
declared, `regsNow`). A register read by a pool's queue key or a hold's header is outside the fragment
(`serq.leangen.kernel`); an engine with no body sets none, and the exporter writes its registers as their
constants.

The engines with a body are listed beside the program (`bodies`: per engine its statements and its
registers' declared values, `⟨[], []⟩` for none), as `Serq.KernelExclusive` lists its engines: `runProgramB p xs [] fuel` is
`runProgramX p xs fuel` (`runProgramB_nil`), so every theorem of those runs is one of every program
with no body.
-/
@[expose] public section

namespace Serq.Kernel

/-- A statement of an engine's iteration body (the IR's `IterServe`, `IterAdmit`, `IterBranch`, `IterSet`). -/
inductive IterStmt where
  | serve (only : Option Expr)
  | admit (only gate : Option Expr)
  | branch (test : Expr) (yes no : List IterStmt)
  | set (reg : Nat) (value : Expr)

/-- An engine's body: its statements and its registers' declared values (`state NAME = c;`, in order). -/
structure Body where
  stmts : List IterStmt
  regs : List Nat

/-- Register `k` of the engine is read at the stage view's place `StageVar.registers + k`. -/
def StageVar.registers : Nat := 17

/-- `e` with the engine's registers `rs` put in for their places (`StageVar.registers + k` reads `rs[k]`). -/
def Expr.withRegs (rs : List Nat) : Expr → Expr
  | .stageVar i => if i < StageVar.registers then .stageVar i else .num (getAt rs (i - StageVar.registers))
  | .not e => .not (e.withRegs rs)
  | .bin op l r => .bin op (l.withRegs rs) (r.withRegs rs)
  | .cond t a b => .cond (t.withRegs rs) (a.withRegs rs) (b.withRegs rs)
  | .min a b => .min (a.withRegs rs) (b.withRegs rs)
  | .max a b => .max (a.withRegs rs) (b.withRegs rs)
  | .floorDiv a d => .floorDiv (a.withRegs rs) d
  | e => e

def Expr.withRegsOpt (rs : List Nat) : Option Expr → Option Expr
  | none => none
  | some e => some (e.withRegs rs)

def Expr.withRegsList (rs : List Nat) : List Expr → List Expr
  | [] => []
  | e :: es => e.withRegs rs :: Expr.withRegsList rs es

/-- The engine's registers: as its last iteration left them, or as declared before its first. -/
def regsNow (declared : List Nat) (es : EngineState) : List Nat :=
  match es.regs with
  | [] => declared
  | rs@(_ :: _) => rs

/-- Engine `s`'s registers set to `rs` (nothing else changed). -/
def Machine.commitRegs (m : Machine) (s : Nat) (rs : List Nat) : Machine :=
  { m with engines := setEngineState m.engines s { getEngineState m.engines s with regs := rs } }

/-- What a guard reads besides the running requests' places: the iteration's preemptions so far
(`running.preempted`) and its admissions (`waiting.admitted`). -/
def StageVar.preempted : Nat := 15
def StageVar.admitted : Nat := 16

/-- An iteration being planned from a body: the machine, the batch, whether a grower preempted itself
(the serving is over, `stop_serve`), how many it admitted (`n_adm`), and the engine's registers as its
sets so far leave them. -/
structure Plan where
  m : Machine
  b : Batch
  stopServe : Bool
  admitted : Nat
  regs : List Nat

/-- What a body's guard or an admission's gate reads (the interpreter's `guard_ctx`): the iteration's
tokens and prefill tokens so far, the running requests as they stand (`runningOf`'s places), its
preemptions and admissions. -/
def guardVars (p : Program) (s : Nat) (pl : Plan) : List Nat :=
  let es := getEngineState pl.m.engines s
  [pl.b.tokens, pl.b.prefilled, countDecoders es.residents, countResidents es.residents,
   waitingIn s p.admitVia pl.m.pools, 0, 0, 0, 0, 0, 0, 0, runningKvDecode p pl.m es.residents,
   runningKvPrefill pl.m es.residents, 0, pl.b.preempted, pl.admitted]

/-- What a guard, a gate or a set's value reads, the registers as they stand put in. -/
def guardValue (p : Program) (s : Nat) (pl : Plan) (e : Expr) : Nat :=
  eval (engineView p pl.m (guardVars p s pl)) [] pl.m.now 0 (e.withRegs pl.regs)

/-- A guard (or a gate) reads non-zero. -/
def guardHolds (p : Program) (s : Nat) (pl : Plan) (e : Expr) : Bool :=
  guardValue p s pl e != 0

/-- `serveIn`, also saying whether a grower preempted itself (then the serving ends). -/
def serveInB (p : Program) (s chunk : Nat) (only : Option Expr) : List Nat → Machine → Batch → Machine × Batch × Bool
  | [], m, b => (m, b, false)
  | t :: ts, m, b =>
    if b.budget = 0 then (m, b, false) else
    match residentOf t (getEngineState m.engines s).residents with
    | none => serveInB p s chunk only ts m b
    | some r =>
      if r.sched != 0 || !lets p m (runningOf p m s) r only then serveInB p s chunk only ts m b else
      if r.passedOver (tokensFor chunk b.gran b.budget r) then serveInB p s chunk only ts m { b with passed := true } else
      let g := m.serveOne p s b r (tokensFor chunk b.gran b.budget r)
      if g.2.2 = 2 then (g.1, g.2.1, true) else serveInB p s chunk only ts g.1 g.2.1

/-- The residents' threads in the order `advance running` serves them: by the engine's serve keys
(read as the running requests stand), ties in admission order; none: admission order. -/
def serveOrder (p : Program) (m : Machine) (s : Nat) : List Expr → List Nat
  | [] => threadsOf (getEngineState m.engines s).residents
  | keys@(_ :: _) => threadsOf (orderResidents p m (runningOf p m s) keys [] (getEngineState m.engines s).residents)

/-- `admitOne`, also saying whether the admitted run's growth preempted itself. -/
def admitOneB (p : Program) (f s chunk i j : Nat) (only : Option Expr) (m : Machine) (b : Batch) : Machine × Batch × Bool :=
  let w := getWaiter (getPool m.pools i).queue j
  let m1 := m.admitWaiter p (admissionStage chunk b.budget) i j
  let m2 := exec p f m1 (getThread m1.threads w.thread)
  match residentOf w.thread (getEngineState m2.engines s).residents with
  | some r =>
    if lets p m2 (runningOf p m2 s) r only then
      if r.passedOver (tokensFor chunk b.gran b.budget r) then (m2, { b with passed := true }, false) else
      let g := m2.serveOne p s b r (tokensFor chunk b.gran b.budget r)
      (g.1, g.2.1, g.2.2 = 2)
    else (m2, b, false)
  | none => (m2, b, false)

/-- `admit waiting [only (q)] [while (e)]` in a body (`StepStage.admit`): while budget is left, no
prefill was passed over and the gate reads non-zero, the head of the first queue the engine admits is
admitted if it fits (`admitOneB`), counted in `waiting.admitted`. -/
def admitB (p : Program) (s chunk : Nat) (only gate : Option Expr) : Nat → Plan → Plan
  | 0, pl => { pl with m := { pl.m with outOfFuel := true } }
  | f + 1, pl =>
    if pl.b.budget = 0 || pl.b.passed then pl else
    if (match gate with | none => false | some e => !guardHolds p s pl e) then pl else
    match firstQueue s 0 p.admitVia pl.m.pools with
    | none => pl
    | some i =>
      let queue := (getPool pl.m.pools i).queue
      let j := select p pl.m i queue
      let w := getWaiter queue j
      let th := getThread pl.m.threads w.thread
      if fits p pl.m.threads ⟨p.caps, pl.m.pools, th.serial, admissionStage chunk pl.b.budget⟩ th.attrs pl.m.now w.on then
        let r := admitOneB p f s chunk i j only pl.m pl.b
        admitB p s chunk only gate f ⟨r.1, r.2.1, pl.stopServe || r.2.2, pl.admitted + 1, pl.regs⟩
      else pl

/-- The body's statements run once each, in order (`StepStage.run_body`); `n` bounds the statements run
(the run's fuel: a body is finite, and running out is the run's `outOfFuel`). The registers are put in
each statement's expressions as the statement starts (no set runs inside one). -/
def planBody (p : Program) (f s chunk : Nat) (keys : List Expr) : Nat → List IterStmt → Plan → Plan
  | 0, _, pl => { pl with m := { pl.m with outOfFuel := true } }
  | _ + 1, [], pl => pl
  | n + 1, .serve only :: rest, pl =>
    planBody p f s chunk keys n rest
      (if pl.stopServe then pl else
       let r := serveInB p s chunk (Expr.withRegsOpt pl.regs only)
         (serveOrder p pl.m s (Expr.withRegsList pl.regs keys)) pl.m pl.b
       ⟨r.1, r.2.1, r.2.2, pl.admitted, pl.regs⟩)
  | n + 1, .admit only gate :: rest, pl =>
    planBody p f s chunk keys n rest (admitB p s chunk (Expr.withRegsOpt pl.regs only) gate f pl)
  | n + 1, .branch test yes no :: rest, pl =>
    planBody p f s chunk keys n rest (planBody p f s chunk keys n (if guardHolds p s pl test then yes else no) pl)
  | n + 1, .set k e :: rest, pl => planBody p f s chunk keys n rest { pl with regs := setAt pl.regs k (guardValue p s pl e) }

/-- Engine `s` (of clauses `eng`) plans an iteration from its body: as `startIteration`, the budget,
the chunk and the granule read once as the iteration starts (with the registers as they stand), the plan
its statements (`planBody`); no iteration when it schedules no token and preempted none (its sets undone
when it admitted none either, kept otherwise); else `execute` over the batch (with the registers as the
plan left them), the record, the end. -/
def startBody (p : Program) (f s : Nat) (eng : Engine) (body : Body) (m : Machine) : Machine :=
  let running := runningOf p m s
  let regs := regsNow body.regs (getEngineState m.engines s)
  let budget := eval (engineView p m running) [] m.now 0 (eng.budget.withRegs regs)
  let chunk := eval (engineView p m running) [] m.now 0 (eng.chunk.withRegs regs)
  let gran := eval (engineView p m running) [] m.now 0 (eng.granule.withRegs regs)
  let planned := planBody p f s chunk eng.order f body.stmts ⟨m, ⟨budget, 0, 0, 0, 0, gran, false⟩, false, 0, regs⟩
  let m' := planned.m
  let b := planned.b
  let es' := getEngineState m'.engines s
  if b.tokens = 0 && b.preempted = 0 then (if planned.admitted = 0 then m' else m'.commitRegs s planned.regs) else
  let nres := countResidents es'.residents
  let kvd := batchKvDecode p m' es'.residents
  let kvp := batchKvPrefill m' es'.residents
  let att2 := batchAttention2 m' es'.residents
  let cost := eval (engineView p m' (costVars b.tokens b.prefilled b.decoders nres (waitingIn s p.admitVia m'.pools) kvd kvp att2)) [] m'.now 0 (eng.cost.withRegs planned.regs)
  if cost = 0 && b.tokens != 0 then { m' with failed := true } else
  let record : Iteration := ⟨m'.now, b.tokens, b.prefilled, b.decoders, nres, demandOf chunk es'.residents, es'.served, m'.arrived, kvd, kvp, att2⟩
  { m' with engines := setEngineState m'.engines s { es' with busy := true, start := m'.now, served := es'.served + b.tokens,
                                                              records := record :: es'.records,
                                                              regs := planned.regs } }.setTimer (m'.now + cost) (.iterationEnd s)

/-- Engine `e`'s body (`⟨[], []⟩`: none). -/
def getBody : List Body → Nat → Body
  | [], _ => ⟨[], []⟩
  | b :: _, 0 => b
  | _ :: bs, n + 1 => getBody bs n

/-- Engine `e` at stage `s` starts an iteration: from its body when it has one, else as
`Serq.KernelExclusive.startStep` (`exclusive prefill` when `e` is among `xs`, else vLLM's schedule). -/
def startStepB (p : Program) (xs : List Nat) (bodies : List Body) (f s e : Nat) (m : Machine) : Machine :=
  match (getBody bodies e).stmts with
  | [] => startStep p xs f s e m
  | _ :: _ => startBody p f s (getEngine p.engines e) (getBody bodies e) m

/-- `startPassX`, the engines with a body planning from it (`startStepB`). -/
def startPassB (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) :
    List Service → Nat → List Nat → Machine → Bool → Machine × List Nat × Bool × Bool
  | [], _, tried, m, acted => (m, tried, acted, false)
  | .step e :: ss, s, tried, m, acted =>
    let es := getEngineState m.engines s
    if es.busy || !hasWork p.admitVia m.pools s es || memberOf tried s then startPassB p xs bodies f ss (s + 1) tried m acted
    else
      let m' := settle p f (startStepB p xs bodies f s e m)
      if m'.dueNow then (m', s :: tried, true, true) else startPassB p xs bodies f ss (s + 1) (s :: tried) m' true
  | _ :: ss, s, tried, m, acted => startPassB p xs bodies f ss (s + 1) tried m acted

def startEnginesB (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) : Nat → List Nat → Machine → Machine
  | 0, _, m => m
  | n + 1, tried, m =>
    let r := startPassB p xs bodies f p.stages 0 tried m false
    if r.2.2.2 || !r.2.2.1 then r.1 else startEnginesB p xs bodies f n r.2.1 r.1

def endOfInstantB (p : Program) (xs : List Nat) (bodies : List Body) (f : Nat) (m : Machine) : Machine :=
  if m.dueNow then m else startEnginesB p xs bodies f (countServices p.stages + 1) [] m

def loopB (p : Program) (xs : List Nat) (bodies : List Body) : Nat → Machine → Machine
  | 0, m => { m with outOfFuel := true }
  | f + 1, m =>
    match m.timers with
    | [] => m
    | t :: ts => loopB p xs bodies f (endOfInstantB p xs bodies f (settle p f (fire p { m with now := Nat.max m.now t.time, timers := ts } t.wake)))

/-- The whole run, the engines `xs` under `exclusive prefill` and those with a body planning from it,
cut at `fuel`. -/
def runProgramB (p : Program) (xs : List Nat) (bodies : List Body) (fuel : Nat) : Machine :=
  loopB p xs bodies fuel (endOfInstantB p xs bodies fuel (settle p fuel (initial p)))

/-- `agreesX`, the engines with a body planning from it. -/
def agreesB (p : Program) (xs : List Nat) (bodies : List Body) (fuel : Nat) (expected : List Expected)
    (records : List (List Iteration)) : Bool :=
  let m := runProgramB p xs bodies fuel
  !m.outOfFuel && !m.failed && agreesWith m.threads expected && recordsAgree m.engines records

/-! ### A body's serving and admissions are the kernel's

`serveInB` and `admitOneB` are `serveIn` and `admitOne` with the flag `stop_serve` beside them (the
compiled driver declares this module's definitions again up to here, `serq.leangen.kernel_drt`). -/

theorem serveInB_serveIn (p : Program) (s chunk : Nat) (only : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) :
    ((serveInB p s chunk only ts m b).1, (serveInB p s chunk only ts m b).2.1) = serveIn p s chunk only ts m b := by
  induction ts generalizing m b with
  | nil => rfl
  | cons t ts ih =>
    unfold serveInB serveIn
    by_cases hb : b.budget = 0
    · rw [if_pos hb, if_pos hb]
    · rw [if_neg hb, if_neg hb]
      cases residentOf t (getEngineState m.engines s).residents with
      | none => exact ih m b
      | some r =>
        dsimp only
        by_cases h1 : (r.sched != 0 || !lets p m (runningOf p m s) r only) = true
        · rw [if_pos h1, if_pos h1]; exact ih m b
        · rw [if_neg h1, if_neg h1]
          by_cases h2 : r.passedOver (tokensFor chunk b.gran b.budget r) = true
          · rw [if_pos h2, if_pos h2]; exact ih _ _
          · rw [if_neg h2, if_neg h2]
            by_cases h3 : (m.serveOne p s b r (tokensFor chunk b.gran b.budget r)).2.2 = 2
            · rw [if_pos h3, if_pos h3]
            · rw [if_neg h3, if_neg h3]; exact ih _ _

theorem admitOneB_admitOne (p : Program) (f s chunk i j : Nat) (only : Option Expr) (m : Machine) (b : Batch) :
    ((admitOneB p f s chunk i j only m b).1, (admitOneB p f s chunk i j only m b).2.1) = admitOne p f s chunk i j only m b := by
  unfold admitOneB admitOne
  dsimp only
  cases residentOf (getWaiter (getPool m.pools i).queue j).thread
      (getEngineState (exec p f (m.admitWaiter p (admissionStage chunk b.budget) i j)
        (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads
          (getWaiter (getPool m.pools i).queue j).thread)).engines s).residents with
  | none => rfl
  | some r =>
    dsimp only
    split
    · split <;> rfl
    · rfl

theorem serveInB_fst (p : Program) (s chunk : Nat) (only : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) :
    (serveInB p s chunk only ts m b).1 = (serveIn p s chunk only ts m b).1 :=
  congrArg Prod.fst (serveInB_serveIn p s chunk only ts m b)

theorem serveInB_batch (p : Program) (s chunk : Nat) (only : Option Expr) (ts : List Nat) (m : Machine) (b : Batch) :
    (serveInB p s chunk only ts m b).2.1 = (serveIn p s chunk only ts m b).2 :=
  congrArg Prod.snd (serveInB_serveIn p s chunk only ts m b)

theorem admitOneB_fst (p : Program) (f s chunk i j : Nat) (only : Option Expr) (m : Machine) (b : Batch) :
    (admitOneB p f s chunk i j only m b).1 = (admitOne p f s chunk i j only m b).1 :=
  congrArg Prod.fst (admitOneB_admitOne p f s chunk i j only m b)

theorem admitOneB_batch (p : Program) (f s chunk i j : Nat) (only : Option Expr) (m : Machine) (b : Batch) :
    (admitOneB p f s chunk i j only m b).2.1 = (admitOne p f s chunk i j only m b).2 :=
  congrArg Prod.snd (admitOneB_admitOne p f s chunk i j only m b)

/-! ### No engine with a body: `runProgramX` -/

theorem startStepB_nil (p : Program) (xs : List Nat) (f s e : Nat) (m : Machine) :
    startStepB p xs [] f s e m = startStep p xs f s e m := rfl

theorem startPassB_nil (p : Program) (xs : List Nat) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat)
    (m : Machine) (a : Bool) : startPassB p xs [] f ss s tried m a = startPassX p xs f ss s tried m a := by
  induction ss generalizing s tried m a with
  | nil => rfl
  | cons x ss ih => cases x <;> simp only [startPassB, startPassX, startStepB_nil, ih]

theorem startEnginesB_nil (p : Program) (xs : List Nat) (f n : Nat) (tried : List Nat) (m : Machine) :
    startEnginesB p xs [] f n tried m = startEnginesX p xs f n tried m := by
  induction n generalizing tried m with
  | zero => rfl
  | succ n ih => simp only [startEnginesB, startEnginesX, startPassB_nil, ih]

theorem endOfInstantB_nil (p : Program) (xs : List Nat) (f : Nat) (m : Machine) :
    endOfInstantB p xs [] f m = endOfInstantX p xs f m := by
  simp only [endOfInstantB, endOfInstantX, startEnginesB_nil]

theorem loopB_nil (p : Program) (xs : List Nat) (f : Nat) (m : Machine) : loopB p xs [] f m = loopX p xs f m := by
  induction f generalizing m with
  | zero => rfl
  | succ f ih =>
    cases h : m.timers with
    | nil => simp only [loopB, loopX, h]
    | cons t ts => simp only [loopB, loopX, h, endOfInstantB_nil, ih]

/-- With no engine with a body, the run is `runProgramX`'s (and with none under `exclusive prefill`
either, the kernel's: `runProgramX_nil`). -/
theorem runProgramB_nil (p : Program) (xs : List Nat) (fuel : Nat) : runProgramB p xs [] fuel = runProgramX p xs fuel := by
  simp only [runProgramB, runProgramX, loopB_nil, endOfInstantB_nil]

theorem agreesB_nil (p : Program) (xs : List Nat) (fuel : Nat) (expected : List Expected) (records : List (List Iteration)) :
    agreesB p xs [] fuel expected records = agreesX p xs fuel expected records := by
  simp only [agreesB, agreesX, runProgramB_nil]

/-! ### Committing registers changes nothing else -/

@[simp] theorem Expr.withRegs_num (rs : List Nat) (n : Nat) : (Expr.num n).withRegs rs = .num n := rfl

theorem getEngineState_setRegs : ∀ (l : List EngineState) (s : Nat) (rs : List Nat) (j : Nat),
    ∃ r, getEngineState (setEngineState l s { getEngineState l s with regs := rs }) j = { getEngineState l j with regs := r }
  | [], _, _, _ => ⟨[], rfl⟩
  | _ :: _, 0, rs, 0 => ⟨rs, rfl⟩
  | _ :: es, 0, _, j + 1 => ⟨(getEngineState es j).regs, rfl⟩
  | e :: _, _ + 1, _, 0 => ⟨e.regs, rfl⟩
  | _ :: es, n + 1, rs, j + 1 => getEngineState_setRegs es n rs j

theorem Machine.commitRegs_fields (m : Machine) (s : Nat) (rs : List Nat) (j : Nat) :
    (getEngineState (m.commitRegs s rs).engines j).residents = (getEngineState m.engines j).residents ∧
      (getEngineState (m.commitRegs s rs).engines j).busy = (getEngineState m.engines j).busy ∧
      (getEngineState (m.commitRegs s rs).engines j).start = (getEngineState m.engines j).start ∧
      (getEngineState (m.commitRegs s rs).engines j).served = (getEngineState m.engines j).served ∧
      (getEngineState (m.commitRegs s rs).engines j).records = (getEngineState m.engines j).records := by
  obtain ⟨r, h⟩ := getEngineState_setRegs m.engines s rs j
  simp only [Machine.commitRegs]
  rw [h]
  exact ⟨rfl, rfl, rfl, rfl, rfl⟩

theorem Machine.commitRegs_records (m : Machine) (s : Nat) (rs : List Nat) (j : Nat) :
    (getEngineState (m.commitRegs s rs).engines j).records = (getEngineState m.engines j).records :=
  (m.commitRegs_fields s rs j).2.2.2.2

theorem Machine.commitRegs_served (m : Machine) (s : Nat) (rs : List Nat) (j : Nat) :
    (getEngineState (m.commitRegs s rs).engines j).served = (getEngineState m.engines j).served :=
  (m.commitRegs_fields s rs j).2.2.2.1

theorem Machine.commitRegs_busy (m : Machine) (s : Nat) (rs : List Nat) (j : Nat) :
    (getEngineState (m.commitRegs s rs).engines j).busy = (getEngineState m.engines j).busy :=
  (m.commitRegs_fields s rs j).2.1

end Serq.Kernel
