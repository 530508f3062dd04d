module

public import Serq.KernelMachine

/-! # The kernel IR, interpreted: an engine's memory (growth and preemption)

`Serq.KernelMachine` has the machine; this module has what an engine's iteration does to the holds its
residents grow (`run S prefill (w) growing P`, the reference's *Engines*, `serq/sim/steps.py`): a
resident is served once its hold on P has grown, block by block, to the position its tokens reach
(`Machine.serveOne`); a growth that does not fit waits under `preempt none` (the resident is passed
over) and under `preempt by (keys)` / `preempt lifo` preempts the engine's residents holding P, the
least keys first, ties to the one admitted last, until it fits or the grower itself is the victim
(`growPreempting`). A victim leaves the running list (the tokens this iteration gave it back to the
budget), its holds up to the preempted one are given back, caching their positions, `computed` is its
position, and the hold goes back to its first pool's queue, at the head (`requeue head`) or as a
newcomer (`requeue tail`), to run again from its top once admitted (`Machine.preempt`,
`Engine.preempt`). At an iteration's end the growing holds advance by the tokens given
(`Machine.advanceHolds`).
-/
@[expose] public section

namespace Serq.Kernel

/-- Thread `t`'s resident (a thread is at most one engine's resident at a time). -/
def residentOf (t : Nat) : List Resident → Option Resident
  | [] => none
  | r :: rs => if r.thread == t then some r else residentOf t rs

/-- The residents without thread `t`'s. -/
def removeResident (t : Nat) : List Resident → List Resident
  | [] => []
  | r :: rs => if r.thread == t then rs else r :: removeResident t rs

/-- The residents with thread `t`'s given `n` tokens by the iteration being planned. -/
def setSched (t n : Nat) : List Resident → List Resident
  | [] => []
  | r :: rs => if r.thread == t then { r with sched := n } :: rs else r :: setSched t n rs

/-- Resident `r`'s growing hold (`growing P`): the pool's index and its part there; none for a run
growing no pool (the interpreter's `Job.alloc` is `None`). -/
def growingPart (m : Machine) (r : Resident) : Option (Nat × Held) :=
  match r.grow with
  | 0 => none
  | i + 1 =>
    match partOn (getThread m.threads r.thread).k i with
    | some h => some (i, h)
    | none => none

/-- A resident's position on its growing hold (0 growing no pool). -/
def positionOf (m : Machine) (r : Resident) : Nat :=
  match growingPart m r with
  | some (_, h) => h.pos
  | none => 0

/-- `running.kv_decode` in an engine's clauses (`StageVar.kvDecode` outside `execute`): over the decoding
residents as they stand, the KV each holds, in whole blocks of the pool it grows (`StepStage.kvd`:
⌈p / b⌉ · b at position p; 0 growing no pool). -/
def runningKvDecode (p : Program) (m : Machine) : List Resident → Nat
  | [] => 0
  | r :: rs =>
    (if r.decode then
      match growingPart m r with
      | some (i, h) => roundUp (getAt p.blocks i) h.pos
      | none => 0
    else 0) + runningKvDecode p m rs

/-- `running.kv_prefill` in an engine's clauses (`StageVar.kvPrefill` outside `execute`): over the
prefilling residents as they stand, their positions (`StepStage.kvp`). -/
def runningKvPrefill (m : Machine) : List Resident → Nat
  | [] => 0
  | r :: rs => (if !r.decode then positionOf m r else 0) + runningKvPrefill m rs

/-- What an engine's `only (p)` reads of its running requests, as they stand (`StageVar`: the batch's
tokens and prefill tokens 0, the decodes, the residents, the holds waiting in its queues; a resident's
own places 5–11 0, `residentView` fills 5–7; the residents' KV, `running.kv_decode` and
`running.kv_prefill`, at 12 and 13). -/
def runningOf (p : Program) (m : Machine) (s : Nat) : List Nat :=
  let es := getEngineState m.engines s
  [0, 0, countDecoders es.residents, countResidents es.residents, waitingIn s p.admitVia m.pools,
   0, 0, 0, 0, 0, 0, 0, runningKvDecode p m es.residents, runningKvPrefill m es.residents]

/-- Resident `t` is served `n` tokens: the engine's record of it and the batch. -/
def Machine.served (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) : Machine × Batch :=
  let es := getEngineState m.engines s
  ({ m with engines := setEngineState m.engines s { es with residents := setSched r.thread n es.residents } }, b.serve r n)

/-- Pool `i` and the thread's hold there (`partOn`) grown to `want` units (`grow_hold`: the growth
evicts the pool's cache as an admission does). -/
def Machine.grown (p : Program) (m : Machine) (t i want : Nat) (h : Held) : Machine :=
  let th := getThread m.threads t
  let q := getPool m.pools i
  let used := q.used + (want - h.units)
  { m with pools := setPool m.pools i { q with used := used, entries := evictIn p m.threads m.pools m.now i used q.entries } }.put
    { th with k := growPart th.k i want }

/-- The innermost hold of a continuation with a part on pool `i` not given back (`_alloc_on`: where a
preemption candidate holds the pool; past the turn's answer too). -/
def partIn : List Frame → Nat → Option Held
  | [], _ => none
  | .release held _ :: k, i =>
    if heldHas held i && !(heldPart held i).given then some (heldPart held i) else partIn k i
  | _ :: k, i => partIn k i

/-- A preempted hold's parts cache their positions, not their allocations (`abandon_frame`). -/
def heldAbandoned : List Held → List Held
  | [] => []
  | h :: hs => { h with advanced := true } :: heldAbandoned hs

/-- A victim's continuation given back up to the hold that holds pool `i` (`partIn`'s): every hold on
the way, innermost first, releases its parts caching its positions per its clause (read then); returned
with that hold (to queue again) and the continuation outside it. -/
def abandonTo (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    List PoolState → List Frame → List PoolState × Option Waiter × List Frame
  | ps, [] => (ps, none, [])
  | ps, .release held w :: k =>
    let ps' := giveBack blocks serial (cacheKeep ⟨caps, ps, serial, []⟩ attrs now w.cache) ps (heldAbandoned held)
    if heldHas held i && !(heldPart held i).given then (ps', some w, k)
    else abandonTo blocks caps serial attrs now i ps' k
  | ps, _ :: k => abandonTo blocks caps serial attrs now i ps k

/-- The preemption victim among the residents (`rs`, admission order; `rank`: the candidates before
them) that hold pool `i`: the least `preempt by` keys, read with the candidate's attributes, its
`decoding`, its place among the candidates (`admission`) and its hold's `position`, ties to the one
admitted last (`StepStage.victim`; `preempt lifo`: no keys, the last). `best`: the thread and keys so
far. -/
def victimIn (p : Program) (m : Machine) (keys : List Expr) (i : Nat) :
    Nat → Option (Nat × List Nat) → List Resident → Option Nat
  | _, best, [] => match best with
    | some (t, _) => some t
    | none => none
  | rank, best, r :: rs =>
    let th := getThread m.threads r.thread
    match partIn th.k i with
    | none => victimIn p m keys i rank best rs
    | some h =>
      let k := keysOf ⟨p.caps, m.pools, r.thread, [0, 0, 0, 0, 0, truth r.decode, rank, 0, h.pos]⟩ th.attrs m.now 0 keys
      let better := match best with
        | none => true
        | some (_, bk) => !keysBefore bk k
      victimIn p m keys i (rank + 1) (if better then some (r.thread, k) else best) rs

/-- Thread `t`, a resident of engine `s`, preempted for pool `i` (`Engine.preempt`): it leaves the
running list (what the iteration gave it back to the budget), its holds up to the one on `i` are given
back caching their positions, `computed` is its position there, and that hold joins its first pool's
queue again, at the head (mode 1) or as a newcomer (mode 2: at the back, or an engine's queue in the
order turns were created), waited from now. -/
def Machine.preempt (p : Program) (s i t : Nat) (m : Machine) (b : Batch) : Machine × Batch :=
  let es := getEngineState m.engines s
  let b1 := match residentOf t es.residents with
    | some r => if r.sched = 0 then b else b.unserve r r.sched
    | none => b
  let m1 := { m with engines := setEngineState m.engines s { es with residents := removeResident t es.residents } }
  let th := getThread m1.threads t
  let pos := match partIn th.k i with
    | some h => h.pos
    | none => 0
  let r := abandonTo p.blocks p.caps th.serial th.attrs m.now i m1.pools th.k
  let b2 := { b1 with preempted := b1.preempted + 1 }
  match r.2.1 with
  | none => (m1, b2)
  | some w =>
    let head := getAt p.preemptModes i != 2
    let first := match w.on with
      | h :: _ => h.pool
      | [] => i
    let w' := { w with joined := m.now, head := head }
    let q := getPool r.1 first
    let queue := if head then w' :: q.queue
      else if getAt p.admitVia first = 0 then appendWaiter q.queue w'
      else insertByCreation p.traceNos m1.threads m.now th.created th.serial w' q.queue
    -- (the turn's preemptions: a prefill it runs again samples no first token, `prefill_token`)
    let g := getProgress m1.progress t
    ({ m1 with pools := setPool r.1 first { q with queue := queue },
               progress := setProgress m1.progress t { g with preempted := g.preempted + 1 } }.put
      { th with k := r.2.2, attrs := setAt th.attrs p.computedAt pos }, b2)

/-- Thread `t`'s hold on pool `i` grows to `want` units, preempting engine `s`'s residents holding `i`
while it does not fit (`StepStage.grow` under `preempt by`): the result says whether it grew (0), or
the grower was itself the victim (2: the iteration's serving ends). One victim a round: `f` is more
than the residents. -/
def growPreempting (p : Program) (s i want t : Nat) : Nat → Machine → Batch → Machine × Batch × Nat
  | 0, m, b => ({ m with outOfFuel := true }, b, 2)
  | f + 1, m, b =>
    match partOn (getThread m.threads t).k i with
    | none => (m, b, 2)
    | some h =>
      if (getPool m.pools i).used + (want - h.units) + reservedAfter p m.threads i want h ≤ getAt p.caps i then (m.grown p t i want h, b, 0) else
      match victimIn p m (getKeys p.preemptKeys i) i 0 none (getEngineState m.engines s).residents with
      | none => (m, b, 2)
      | some v =>
        let r := m.preempt p s i v b
        if v == t then (r.1, r.2, 2) else growPreempting p s i want t f r.1 r.2

/-- Resident `r` of engine `s` takes `n` tokens (`StepStage.serve_one`): a run growing pool `i` first
grows its hold there to the position it will reach, in whole blocks; under `preempt none` a growth that
does not fit leaves it unserved this iteration (1), under `preempt by` it preempts (`growPreempting`;
2: it preempted itself). 0: served. -/
def Machine.serveOne (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat) : Machine × Batch × Nat :=
  match r.grow with
  | 0 => let x := m.served s b r n; (x.1, x.2, 0)
  | i + 1 =>
    match partOn (getThread m.threads r.thread).k i with
    | none => let x := m.served s b r n; (x.1, x.2, 0)
    | some h =>
      let want := roundUp (getAt p.blocks i) (h.pos + n)
      if want ≤ h.units then let x := m.served s b r n; (x.1, x.2, 0)
      else if getAt p.preemptModes i = 0 then
        if (getPool m.pools i).used + (want - h.units) + reservedAfter p m.threads i want h ≤ getAt p.caps i then
          let x := (m.grown p r.thread i want h).served s b r n; (x.1, x.2, 0)
        else (m, b, 1)
      else
        let g := growPreempting p s i want r.thread (countResidents (getEngineState m.engines s).residents + 1) m b
        if g.2.2 = 0 then let x := g.1.served s g.2.1 r n; (x.1, x.2, 0) else g

/-- At an iteration's end every resident it gave tokens advances its growing hold's position by them
(`StepStage.end`: `a.pos += n`, `advanced`). -/
def Machine.advanceHolds (m : Machine) : List Resident → Machine
  | [] => m
  | r :: rs =>
    match r.grow, r.sched with
    | 0, _ | _, 0 => m.advanceHolds rs
    | i + 1, n + 1 =>
      let th := getThread m.threads r.thread
      (m.put { th with k := advancePart th.k i (n + 1) }).advanceHolds rs

end Serq.Kernel
