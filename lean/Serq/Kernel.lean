module

public import Serq.KernelMemory

/-! # The kernel IR, interpreted: the run

`Serq.KernelMachine` has the machine (`Machine`: sessions, stages, pools, engines) and what
statements, pools and engines do to it; this module runs it: a session's thread runs until it
blocks (`exec`), an instant settles (`settle`: the ready threads, then the pools' queues), the
idle engines start their iterations once nothing else happens at the instant (`startEngines`), and
the event loop fires the timers in order (`loop`), as the reference's event loop
(`serq/sim/engine.py`) does. `agrees` compares a run with what the Python interpreter recorded;
`Serq.KernelFacts` proves what every program's run has.
-/
@[expose] public section

namespace Serq.Kernel

/-- Session `serial`'s trace rows (`Program.traceRows`). -/
def rowsOf : List (List (List Nat)) → Nat → List (List Nat)
  | [], _ => []
  | rs :: _, 0 => rs
  | _ :: rss, n + 1 => rowsOf rss n

/-- Row `k` of a session's trace, if it has one. -/
def rowAt : List (List Nat) → Nat → Option (List Nat)
  | [], _ => none
  | r :: _, 0 => some r
  | _ :: rs, k + 1 => rowAt rs k

def rowCount : List (List Nat) → Nat
  | [] => 0
  | _ :: rs => rowCount rs + 1

/-- The attributes as the `n`-th turn of session `serial` sets them from its trace row (`TraceReplay.turn`):
`new`, `out`, `think`, `forced` from row `n - 1`, `more` 1 but on the session's last row; unchanged
without a trace; none when the session has no row `n - 1` (the run's error: a turn past the trace). -/
def traceTurn (p : Program) (serial n : Nat) (attrs : List Nat) : Option (List Nat) :=
  match p.traceAt with
  | [] => some attrs
  | places =>
    let rows := rowsOf p.traceRows serial
    match rowAt rows (n - 1) with
    | none => none
    | some row =>
      -- (the row's four values go to the first four places, `more` to the fifth)
      some (setPlaces (setAt attrs (getAt places 4) (if n < rowCount rows then 1 else 0)) places row)
where
  setPlaces : List Nat → List Nat → List Nat → List Nat
    | attrs, i :: is, v :: vs => setPlaces (setAt attrs i v) is vs
    | attrs, _, _ => attrs

/-- Run a thread until it blocks (at a stage, in a pool's queue) or its session ends, with
`fuel` steps at most (every statement, and every round of a loop, takes one). A `turn` runs the
workload's turn block, submits the turn, runs the server's statements, and records the answer;
`end;` gives back every hold and ends the session (in the server it refuses the turn: no
answer). -/
def exec (p : Program) : Nat → Machine → Thread → Machine
  | 0, m, th => { m.put th with outOfFuel := true }
  | f + 1, m, th =>
    match th.k with
    -- the session's end: its leases end, in the order they were taken (`Engine.end_session`)
    | [] => { m with pools := endLeases p.blocks p.caps th.serial th.attrs m.now m.pools th.leases }.put { th with leases := [] }
    | .submit :: k =>
      -- the turn starts: no token yet (`Engine.turn_start`)
      exec p f { m with progress := setProgress m.progress th.serial ⟨0, 0, 0, 0, 0, 0, false⟩ }
        { th with k := k, submitted := m.now, inTurn := true }
    | .answer :: k =>
      if th.inTurn then
        -- the next turn is created now (`Engine.answer`), and the turn's tokens, if an engine gave any, recorded
        let g := getProgress m.progress th.serial
        exec p f m { th with k := k, inTurn := false, created := m.now + 1,
                             answers := ⟨th.serial, th.turns, th.submitted, m.now⟩ :: th.answers,
                             tokens := if g.first = 0 then th.tokens
                                       else ⟨th.serial, th.turns, g.first, g.firstStart, g.lastStart, g.preempted,
                                             g.cached⟩ :: th.tokens }
      else exec p f m { th with k := k }
    | .release held w :: k =>
      -- the hold's end: its parts given back, caching per its clause; `computed` is 0 again (`hold_end`)
      let keep := cacheKeep (m.view p th.serial) th.attrs m.now w.cache
      match leasedPart held (leaseOf w.on) with
      | none =>
        exec p f { m with pools := giveBack p.blocks th.serial keep m.pools held } { th with k := k, attrs := setAt th.attrs p.computedAt 0 }
      | some h =>
        -- `lease m (t)`: the part on m stays the pool's allocation, the session's lease, and the others go
        -- back; the duration is read then (`Holds.hold_end`, `Holds.lease`)
        let m1 := { m with pools := giveBack p.blocks th.serial keep m.pools (heldWithout held h.pool) }
        exec p f (m1.leaseTimer th.serial (leaseDuration (m1.view p th.serial) th.attrs m.now (leaseExpr (leaseOf w.on))))
          { th with k := k, attrs := setAt th.attrs p.computedAt 0, leases := appendLease th.leases ⟨m.seq, h, w.cache⟩ }
    | .stmts [] :: k => exec p f m { th with k := k }
    | .stmts (st :: rest) :: k =>
      match st with
      | .set i e => exec p f m { th with attrs := setAt th.attrs i (m.value p th e), k := .stmts rest :: k }
      | .observe j e =>
        let o : Observation := ⟨th.serial, th.turns, j, m.now, m.value p th e⟩
        exec p f m { th with observations := o :: th.observations, k := .stmts rest :: k }
      | .stop =>
        -- its holds given back, innermost first, then its leases (`Engine.end`, `end_session`)
        { m with pools := endLeases p.blocks p.caps th.serial th.attrs m.now
                   (releaseAll p.blocks p.caps th.serial th.attrs m.now m.pools k) th.leases }.put
          { th with k := [], inTurn := false, leases := [] }
      | .release i =>
        if holdsOn k i then
          let r := releaseIn p.blocks p.caps th.serial th.attrs m.now i m.pools k
          exec p f { m with pools := r.1 } { th with k := .stmts rest :: r.2 }
        else
          -- outside any hold on the pool: the session's leases there end
          let r := endLeasesOn p.blocks p.caps th.serial th.attrs m.now i m.pools th.leases
          exec p f { m with pools := r.1 } { th with k := .stmts rest :: k, leases := r.2 }
      | .branch t yes no =>
        exec p f m { th with k := .stmts (if m.value p th t != 0 then yes else no) :: .stmts rest :: k }
      | .while t body =>
        if m.value p th t != 0 then exec p f m { th with k := .stmts body :: .stmts (st :: rest) :: k }
        else exec p f m { th with k := .stmts rest :: k }
      | .loop body => exec p f m { th with k := .stmts body :: .stmts (st :: rest) :: k }
      | .turn =>
        let n := th.turns + 1
        match traceTurn p th.serial n (setAt th.attrs p.turnNoAt n) with
        | none => { m.put th with failed := true }
        | some attrs =>
          exec p f m { th with turns := n, attrs := attrs,
                               k := .stmts p.turnBlock :: .submit :: .stmts p.server :: .answer :: .stmts rest :: k }
      | .run s w =>
        let v := m.value p th w
        if v = 0 then exec p f m { th with k := .stmts rest :: k }   -- a run of zero work completes at once
        else (m.addJob p s th.serial v).put { th with k := .stmts rest :: k }
      | .step s dec g w =>
        let v := m.value p th w
        if v = 0 then exec p f m { th with k := .stmts rest :: k }
        else
          -- a resident of the engine, in admission order (a thread never admitted takes a number now: `add_run`)
          let adm := if th.admNo = 0 then m.admSeq else th.admNo
          let es := getEngineState m.engines s
          { m with engines := setEngineState m.engines s { es with residents := insertResident ⟨th.serial, v, dec, adm, 0, g⟩ es.residents },
                   admSeq := if th.admNo = 0 then m.admSeq + 1 else m.admSeq }.put
            { th with admNo := adm, k := .stmts rest :: k }
      | .grow i e =>
        -- `grow P (d)` (`Holds.grow`, `preempt none`): the innermost hold on P asks d more; in whole blocks no
        -- more than it has, it only asks; else it grows if no `grow` waits on P and the growth fits
        -- (`fits_growth`: the holder grows into its own reservation), evicting as an admission does, or
        -- the thread waits, to resume where it was once a settle finds room (`retryGrowers`)
        let d := m.value p th e
        match partOn k i with
        | none => { m.put th with failed := true }   -- the hold gave P back (`release`) before the grow
        | some h =>
          let req := h.asked + d
          let want := roundUp (getAt p.blocks i) req
          let th0 := { th with k := .stmts rest :: k }
          if want ≤ h.units then exec p f m { th with k := .stmts rest :: growPartReq k i h.units req }
          else
            -- the threads as they stand (this one's attributes and holds now): what the growth check and the
            -- eviction read
            let ts := setThread m.threads th.serial th0
            let q := getPool m.pools i
            if !growsOn i m.growers && decide (q.used + (want - h.units) + reservedAfter p ts i want h ≤ getAt p.caps i) then
              let used := q.used + (want - h.units)
              exec p f { m with pools := setPool m.pools i { q with used := used, entries := evictIn p ts m.pools m.now i used q.entries } }
                { th with k := .stmts rest :: growPartReq k i want req }
            else { m with growers := appendGrower m.growers ⟨th.serial, i, req⟩ }.put th0
      | .hold on reuse cache body =>
        if rejects p.blocks (m.view p th.serial) th.attrs m.now on then   -- refused: the session ends, its holds and leases given back
          { m with pools := endLeases p.blocks p.caps th.serial th.attrs m.now
                     (releaseAll p.blocks p.caps th.serial th.attrs m.now m.pools k) th.leases }.put
            { th with k := [], inTurn := false, leases := [] }
        else
          match on with
          | [] => m.put { th with k := .stmts rest :: k }
          | h :: _ =>
            let q := getPool m.pools h.pool
            let w : Waiter := ⟨th.serial, m.now, on, reuse, cache, body, false⟩
            -- an engine's queue takes the holds of one instant in the order their turns were created
            let queue := if getAt p.admitVia h.pool = 0 then appendWaiter q.queue w
              else insertByCreation p.traceNos m.threads m.now th.created th.serial w q.queue
            { m with pools := setPool m.pools h.pool { q with queue := queue } }.put
              { th with k := .stmts rest :: k }

/-- Run the ready threads, in the order they became ready (a thread a run makes ready runs too). -/
def runReady (p : Program) : Nat → Machine → Machine
  | 0, m => { m with outOfFuel := true }
  | f + 1, m =>
    match m.ready with
    | [] => m
    | t :: ts => runReady p f (exec p f { m with ready := ts } (getThread m.threads t))

/-- Every pool of a hold has room for its units and its reserve (`used + max(u, r) ≤ cap`, each in
whole blocks), read now, every pool as `v` shows it (`Engine.try_admit` reads them all before it
takes anything); on a `reserve held` pool, next to what the holds there reserved and have not
allocated (`used + Σ max(0, rᵢ - allocᵢ) + max(u, r) ≤ cap`, `reservedOn`: `threads` are the
machine's, the holder's own holds included). -/
def fits (p : Program) (threads : List Thread) (v : PoolView) (attrs : List Nat) (now : Nat) : List HoldOn → Bool
  | [] => true
  | h :: hs =>
    let b := getAt p.blocks h.pool
    decide ((getPool v.pools h.pool).used + Nat.max (roundUp b (eval v attrs now 0 h.units)) (roundUp b (eval v attrs now 0 h.reserve))
      + reservedOn p threads h.pool ≤ getAt v.caps h.pool) && fits p threads v attrs now hs

/-- A hold's admission, pool by pool in its order (`Engine.try_admit`): where it reuses (`caching`
and the pool among the reuse clause's), it consumes of the session's live entry at most `ρ` (the
`reuse` clause, read at admission; none: all of it) and at most its units, in whole blocks; it
takes its units (one holder more); and the pool evicts until the allocations and the cache fit.
The units are read as the admission found the pools (`v`: `Engine.try_admit` reads them all first).
The `cached` attribute is what the first pool it reuses on consumed (`attr`, 0 until then: `first`).
Returned with the hold's parts (`Held`, pool by pool): the units it took, whether its release caches
there, and its position, the prefix it consumed (`Alloc(…, pos=consumed)`). -/
def admitOn (p : Program) (threads : List Thread) (v : PoolView) (caching : Bool) (rho : Option Nat) (attrs : List Nat)
    (now : Nat) : Bool → Nat → List PoolState → List HoldOn → List PoolState × Nat × List Held
  | _, attr, ps, [] => (ps, attr, [])
  | first, attr, ps, h :: hs =>
    let b := getAt p.blocks h.pool
    let ur := roundUp b (eval v attrs now 0 h.units)
    let q := getPool ps h.pool
    let reusing := caching && h.reuses
    let live := liveOf v.serial q.entries
    let limit := match rho with
      | none => live.2
      | some r => Nat.min live.2 r
    let consumed := if reusing && live.1 then roundDown b (Nat.min limit ur) else 0
    let entries := if reusing && live.1 then consumeLive v.serial consumed q.entries else q.entries
    let used := q.used + ur
    let q' := { q with used := used, holders := q.holders + 1, entries := evictIn p threads ps now h.pool used entries }
    let rest := admitOn p threads v caching rho attrs now (first && !reusing) (if reusing && first then consumed else attr)
      (setPool ps h.pool q') hs
    (rest.1, rest.2.1, ⟨h.pool, ur, caching && h.caches, false, consumed, false,
      if getBool p.reserveHeld h.pool then roundUp b (eval v attrs now 0 h.reserve) else 0,
      eval v attrs now 0 h.units⟩ :: rest.2.2)

def reuseLimit (v : PoolView) (attrs : List Nat) (now : Nat) : Option Expr → Option Nat
  | none => none
  | some e => some (eval v attrs now 0 e)

def isSome : Option Expr → Bool
  | none => false
  | some _ => true

def getWaiter : List Waiter → Nat → Waiter
  | [], _ => ⟨0, 0, [], none, none, [], false⟩
  | x :: _, 0 => x
  | _ :: xs, n + 1 => getWaiter xs n

def removeWaiter : List Waiter → Nat → List Waiter
  | [], _ => []
  | _ :: xs, 0 => xs
  | x :: xs, n + 1 => x :: removeWaiter xs n

/-- The index of the waiting hold the queue's keys select: the least keys, ties to the one that
joined first (`best` is the index of the best so far, `bk` its keys, `i` the index of the next). -/
def selectIn (p : Program) (m : Machine) (keys : List Expr) :
    List Waiter → Nat → Nat → List Nat → Nat
  | [], _, best, _ => best
  | w :: ws, i, best, bk =>
    let k := keysOf (m.view p w.thread) (getThread m.threads w.thread).attrs m.now (m.now - w.joined) keys
    if keysBefore k bk then selectIn p m keys ws (i + 1) i k
    else selectIn p m keys ws (i + 1) best bk

/-- The hold a pool's queue offers next: its head under `queue fifo`, else the one its keys
select (the reference, *Ties*). -/
def select (p : Program) (m : Machine) (i : Nat) (q : List Waiter) : Nat :=
  match getKeys p.queueKeys i, q with
  | [], _ => 0
  | _, [] => 0
  | keys, w :: ws =>
    -- a hold a preemption put back at the head goes first (`select_head`)
    if w.head then 0 else
    selectIn p m keys ws 1 0 (keysOf (m.view p w.thread) (getThread m.threads w.thread).attrs m.now (m.now - w.joined) keys)

def countHoldOns : List HoldOn → Nat
  | [] => 0
  | _ :: hs => countHoldOns hs + 1

/-- Some pool of the hold reuses the session's cached prefix (`HoldOn.reuses`). -/
def anyReuses : List HoldOn → Bool
  | [] => false
  | h :: hs => h.reuses || anyReuses hs

/-- The hold at `j` in pool `i`'s queue admitted (it fits; `Engine.try_admit`): out of the queue,
its units taken pool by pool, its thread's body next (the thread is not made ready here). Every pool
of the hold takes an admission number, the thread its first. `stage`: the context variables its
clauses read (`admissionStage` when an engine admits it, none at settle time). -/
def Machine.admitWaiter (p : Program) (m : Machine) (stage : List Nat) (i j : Nat) : Machine :=
  let q := getPool m.pools i
  let w := getWaiter q.queue j
  let th := getThread m.threads w.thread
  let found : PoolView := ⟨p.caps, m.pools, th.serial, stage⟩   -- the pools as the admission finds them
  let caching := isSome w.cache
  let out := setPool m.pools i { q with queue := removeWaiter q.queue j }
  -- the `reuse` clause is read once the hold is out of the queue, before it takes anything
  let r := admitOn p m.threads found caching (reuseLimit ⟨p.caps, out, th.serial, stage⟩ th.attrs m.now w.reuse) th.attrs m.now
    true 0 out w.on
  -- a turn's `cached` output is what its first admission with a reuse consumed (`turn_cached`)
  let g := getProgress m.progress th.serial
  let progress := if th.inTurn && caching && anyReuses w.on && !g.cachedSet
    then setProgress m.progress th.serial { g with cached := r.2.1, cachedSet := true } else m.progress
  { m with pools := r.1, admSeq := m.admSeq + countHoldOns w.on, progress := progress }.put
    { th with attrs := setAt th.attrs p.cachedAt r.2.1, admNo := m.admSeq,
              k := .stmts w.body :: .release r.2.2 w :: th.k }

/-- Admit the heads of pool `i`'s queue while each fits (the head is the hold `select` offers;
the first that does not fit blocks the rest); an admitted thread is ready, its hold's body next. The flag: something was admitted. -/
def retryQueue (p : Program) : Nat → Machine → Nat → Bool → Machine × Bool
  | 0, m, _, progress => ({ m with outOfFuel := true }, progress)
  | f + 1, m, i, progress =>
    match (getPool m.pools i).queue with
    | [] => (m, progress)
    | queue@(_ :: _) =>
      let j := select p m i queue
      let w := getWaiter queue j
      let th := getThread m.threads w.thread
      if fits p m.threads (m.view p th.serial) th.attrs m.now w.on then
        retryQueue p f { m.admitWaiter p [] i j with ready := appendNat m.ready w.thread } i true
      else (m, progress)

/-- Pool `i` and thread `t`'s hold there (`partOn`) grown to `want` units, asking `req` (a waiting `grow`
that now fits: `resize`, then `make_room`). -/
def Machine.grownReq (p : Program) (m : Machine) (t i want req : Nat) (h : Held) : Machine :=
  let th := getThread m.threads t
  let q := getPool m.pools i
  let used := q.used + (want - h.units)
  { m with pools := setPool m.pools i { q with used := used, entries := evictIn p m.threads m.pools m.now i used q.entries } }.put
    { th with k := growPartReq th.k i want req }

/-- The `grow` statements waiting on pool `i` retried, the first that stalled first, while each fits
(`Holds.retry_growers`: the first that does not fit blocks the rest); a grown thread is ready, to resume
after its `grow`. The flag: something grew. -/
def retryGrowers (p : Program) : Nat → Machine → Nat → Bool → Machine × Bool
  | 0, m, _, progress => ({ m with outOfFuel := true }, progress)
  | f + 1, m, i, progress =>
    match growerOn i m.growers with
    | none => (m, progress)
    | some g =>
      match partOn (getThread m.threads g.thread).k i with
      | none => (m, progress)
      | some h =>
        let want := roundUp (getAt p.blocks i) g.req
        if (getPool m.pools i).used + (want - h.units) + reservedAfter p m.threads i want h ≤ getAt p.caps i then
          retryGrowers p f { m.grownReq p g.thread i want g.req h with
            growers := removeGrowerOn i m.growers, ready := appendNat m.ready g.thread } i true
        else (m, progress)

/-- Pool `i` retried at settle time (`Holds.retry_pools`): its waiting `grow` statements first, then its
queue, unless an engine admits it (then only the engine's `admit waiting` does). -/
def retryPool (p : Program) (f : Nat) (m : Machine) (i : Nat) (progress : Bool) : Machine × Bool :=
  let g := retryGrowers p f m i progress
  if getAt p.admitVia i = 0 then retryQueue p f g.1 i g.2 else g

/-- Every pool's queue retried, in the pools' declaration order. -/
def retryPools (p : Program) (f : Nat) : Nat → Nat → Machine → Bool → Machine × Bool
  | 0, _, m, progress => (m, progress)
  | n + 1, i, m, progress =>
    let r := retryPool p f m i progress
    retryPools p f n (i + 1) r.1 r.2

/-- Settle the instant: run the ready threads, retry the queues, and again while that admits. -/
def settle (p : Program) : Nat → Machine → Machine
  | 0, m => { m with outOfFuel := true }
  | f + 1, m =>
    let r := retryPools p f (countNats p.caps) 0 (runReady p f m) false
    if r.2 then settle p f r.1 else r.1

/-! ### Step engines: an iteration is planned, runs, ends -/

/-- What an engine's clauses read: the pools, and its context variables (`StageVar`). -/
def engineView (p : Program) (m : Machine) (vars : List Nat) : PoolView := ⟨p.caps, m.pools, 0, vars⟩

/-- The running requests' variables (`runningOf`'s places) with a resident's own at 5, 6 and 7: its
`decoding`, `admission` and `remaining` (a shorter list gets them after its end). -/
def withResident (running : List Nat) (d a r : Nat) : List Nat :=
  match running with
  | x0 :: x1 :: x2 :: x3 :: x4 :: _ :: _ :: _ :: rest => x0 :: x1 :: x2 :: x3 :: x4 :: d :: a :: r :: rest
  | _ => appendNats running [d, a, r]

/-- What resident `r`'s serve keys read (the interpreter's `serve_ctx`): the pools, the engine's
context variables as the iteration starts (`running`), its `decoding`, `admission` and `remaining` in
places 5–7 (`StageVar.decoding` on), the residents' KV after them. -/
def residentView (p : Program) (m : Machine) (running : List Nat) (r : Resident) : PoolView :=
  ⟨p.caps, m.pools, r.thread, withResident running (truth r.decode) r.adm r.rem⟩

/-- Resident `r`'s serve keys, read with its session's attributes now. -/
def residentKeys (p : Program) (m : Machine) (running : List Nat) (keys : List Expr) (r : Resident) : List Nat :=
  keysOf (residentView p m running r) (getThread m.threads r.thread).attrs m.now 0 keys

/-- `r` (its keys `k`) in its place in residents ordered by their keys: after every one whose keys
are not greater, so that ties stay in the order they were inserted. -/
def insertByKeys (p : Program) (m : Machine) (running : List Nat) (keys : List Expr) (r : Resident)
    (k : List Nat) : List Resident → List Resident
  | [] => [r]
  | x :: xs =>
    if keysBefore k (residentKeys p m running keys x) then r :: x :: xs
    else x :: insertByKeys p m running keys r k xs

/-- The residents (in admission order) in the serve order (`StepStage._sorted`: the keys, then
admission). The keys are read once, as the iteration starts: the interpreter reads keys that read
`running.*` again before each choice, but nothing the fragment's serving does changes them. -/
def orderResidents (p : Program) (m : Machine) (running : List Nat) (keys : List Expr) :
    List Resident → List Resident → List Resident
  | acc, [] => acc
  | acc, r :: rs => orderResidents p m running keys (insertByKeys p m running keys r (residentKeys p m running keys r) acc) rs

/-- The residents back in admission order (the interpreter's `res`, and its batch sorted by
`admission` at the iteration's end). -/
def byAdmission : List Resident → List Resident → List Resident
  | acc, [] => acc
  | acc, r :: rs => byAdmission (insertResident r acc) rs

/-- An `only (p)` predicate lets resident `r` be served (`StepStage._only`: p read for it, from what
a serve key reads, is not 0); no predicate lets every resident. -/
def lets (p : Program) (m : Machine) (running : List Nat) (r : Resident) : Option Expr → Bool
  | none => true
  | some e => eval (residentView p m running r) (getThread m.threads r.thread).attrs m.now 0 e != 0

def threadsOf : List Resident → List Nat
  | [] => []
  | r :: rs => r.thread :: threadsOf rs

/-- `advance running [only (p)]` of engine `s` over its residents' threads in the order they are served
(`StepStage.serve`, `_serve_in_order` without a predicate): while budget is left, each resident still
running (a preemption takes victims out) that the predicate lets (read as the running requests stand)
takes one token if it decodes, else its remainder up to the chunk and the budget (with a granule, short
of its remainder, a multiple of it: `tokensFor`), once its growing hold has grown to cover them
(`Machine.serveOne`: a growth that does not fit under `preempt none` passes it over; one that preempts
the grower itself ends the serving); each the predicate does not let is passed over and keeps what it
has, and so is a prefill the granule cuts to none, which ends the iteration's admissions (`Batch.passed`,
`Resident.passedOver`). -/
def serveIn (p : Program) (s chunk : Nat) (only : Option Expr) : List Nat → Machine → Batch → Machine × Batch
  | [], m, b => (m, b)
  | t :: ts, m, b =>
    if b.budget = 0 then (m, b) else
    match residentOf t (getEngineState m.engines s).residents with
    | none => serveIn p s chunk only ts m b
    | some r =>
      if r.sched != 0 || !lets p m (runningOf p m s) r only then serveIn p s chunk only ts m b else
      if r.passedOver (tokensFor chunk b.gran b.budget r) then serveIn p s chunk only ts m { b with passed := true } else
      let g := m.serveOne p s b r (tokensFor chunk b.gran b.budget r)
      if g.2.2 = 2 then (g.1, g.2.1) else serveIn p s chunk only ts g.1 g.2.1

/-- `advance running [only (p)] [by (keys)]`: the residents served in the serve order (no keys:
admission order; the keys, like the predicate's `running.*`, read as the iteration starts: a
`serq.leangen.kernel` refuses keys that read `running.*` on an engine whose memory preempts, the one
thing that changes them while it serves). -/
def serveOrdered (p : Program) (s : Nat) (m : Machine) (running : List Nat) (chunk : Nat) (only : Option Expr) (b : Batch) :
    List Expr → List Resident → Machine × Batch
  | [], rs => serveIn p s chunk only (threadsOf rs) m b
  | keys@(_ :: _), rs => serveIn p s chunk only (threadsOf (orderResidents p m running keys [] rs)) m b

/-- The hold at `j` of pool `i`'s queue admitted by engine `s` (`admit_one`): its thread runs at once
until it blocks, and the run it started on the engine, if any, is served at once if `only (q)` lets it
(read for it as the running requests stand: it among them), its hold grown to cover its tokens
(`Machine.serveOne`, which may preempt), unless the granule passes it over (`Batch.passed`). -/
def admitOne (p : Program) (f s chunk i j : Nat) (only : Option Expr) (m : Machine) (b : Batch) : Machine × Batch :=
  let w := getWaiter (getPool m.pools i).queue j
  let m1 := m.admitWaiter p (admissionStage chunk b.budget) i j
  let m2 := exec p f m1 (getThread m1.threads w.thread)
  match residentOf w.thread (getEngineState m2.engines s).residents with
  | some r =>
    if lets p m2 (runningOf p m2 s) r only then
      if r.passedOver (tokensFor chunk b.gran b.budget r) then (m2, { b with passed := true }) else
      let g := m2.serveOne p s b r (tokensFor chunk b.gran b.budget r)
      (g.1, g.2.1)
    else (m2, b)
  | none => (m2, b)

/-- `admit waiting` of engine `s` (`StepStage.admit`): while budget is left, no prefill was passed over
by the granule (`Batch.passed`, the interpreter's `stop_admit`) (and, `gated`, no
preemption happened in the iteration: `while (running.preempted == 0)` read before each), the head of
the first queue it admits with a hold waiting (`select`) is admitted if it fits (else the admissions
end), its thread runs at once until it blocks (`exec`), and the run it started on the engine, if any,
is served at once. -/
def admitWaiting (p : Program) (s chunk : Nat) (only : Option Expr) (gated : Bool) : Nat → Machine → Batch → Machine × Batch
  | 0, m, b => ({ m with outOfFuel := true }, b)
  | f + 1, m, b =>
    if b.budget = 0 || b.passed || (gated && b.preempted != 0) then (m, b) else
    match firstQueue s 0 p.admitVia m.pools with
    | none => (m, b)
    | some i =>
      let queue := (getPool m.pools i).queue
      let j := select p m i queue
      let w := getWaiter queue j
      let th := getThread m.threads w.thread
      if fits p m.threads ⟨p.caps, m.pools, th.serial, admissionStage chunk b.budget⟩ th.attrs m.now w.on then
        let r := admitOne p f s chunk i j only m b
        admitWaiting p s chunk only gated f r.1 r.2
      else (m, b)

/-! ### The batch's KV sums (`batch.kv_decode`, `batch.kv_prefill`, `batch.attention`)

Read off the residents once the batch is planned: a resident is in the batch when the iteration gave it
tokens (`sched`; a victim a preemption took left the residents, its share given back as the
interpreter's `unserve` does), and its position is its growing hold's (`partOn`), which advances only at
the iteration's end (`Machine.advanceHolds`), so it is the position serving read. -/

/-- `batch.kv_decode`: over the batch's decodes, the KV once the iteration's token is written, in whole
blocks of the pool it grows (`_kv_decode`: ⌈(p + 1) / b⌉ · b, `roundUp`; 0 growing no pool). -/
def batchKvDecode (p : Program) (m : Machine) : List Resident → Nat
  | [] => 0
  | r :: rs =>
    (if r.decode && r.sched != 0 then
      match growingPart m r with
      | some (i, h) => roundUp (getAt p.blocks i) (h.pos + 1)
      | none => 0
    else 0) + batchKvDecode p m rs

/-- `batch.kv_prefill`: over the batch's prefills, the position before the iteration's tokens. -/
def batchKvPrefill (m : Machine) : List Resident → Nat
  | [] => 0
  | r :: rs => (if !r.decode && r.sched != 0 then positionOf m r else 0) + batchKvPrefill m rs

/-- Twice `batch.attention`: over the batch's prefill chunks of n tokens from position p,
n · (2p + n) (the interpreter's n · (p + n / 2), doubled to stay whole; a run growing no pool is at
position 0 and counts). -/
def batchAttention2 (m : Machine) : List Resident → Nat
  | [] => 0
  | r :: rs => (if !r.decode then r.sched * (2 * positionOf m r + r.sched) else 0) + batchAttention2 m rs

/-- What `execute` reads (`StageVar`): the batch's tokens, prefill tokens and decodes, the residents,
the holds waiting, and after the places of the serve keys' variables (0 here) the KV sums. -/
def costVars (tokens prefilled decoders residents waiting kvd kvp att2 : Nat) : List Nat :=
  [tokens, prefilled, decoders, residents, waiting, 0, 0, 0, 0, 0, 0, 0, kvd, kvp, att2]

/-- Engine `s` (of clauses `eng`) plans an iteration (`StepStage.start`, vLLM's schedule
`advance running [only (p)] [by (keys)]; admit waiting [only (q)] while (running.preempted == 0);`):
the budget, the chunk and the granule read once, the residents p lets served in the serve order, then the waiting
admitted with the budget left, each served at once if q lets it, while none preempted (`admitGated`:
the gate is read before every admission, so one whose growth preempts ends them). An iteration that schedules no token and preempted
none is none (the engine waits for the next event); else it lasts `execute` over the batch (0 for
tokens is the program's error, `failed`; the step that only preempted may last 0), its record is kept,
and its end is set. -/
def startIteration (p : Program) (f s : Nat) (eng : Engine) (m : Machine) : Machine :=
  let es := getEngineState m.engines s
  let running := [0, 0, countDecoders es.residents, countResidents es.residents, waitingIn s p.admitVia m.pools,
    0, 0, 0, 0, 0, 0, 0, runningKvDecode p m es.residents, runningKvPrefill m es.residents]
  let budget := eval (engineView p m running) [] m.now 0 eng.budget
  let chunk := eval (engineView p m running) [] m.now 0 eng.chunk
  let gran := eval (engineView p m running) [] m.now 0 eng.granule
  let served := serveOrdered p s m running chunk eng.serveOnly ⟨budget, 0, 0, 0, 0, gran, false⟩ eng.order es.residents
  let planned := admitWaiting p s chunk eng.admitOnly eng.admitGated f served.1 served.2
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

def countServices : List Service → Nat
  | [] => 0
  | _ :: ss => countServices ss + 1

def memberOf : List Nat → Nat → Bool
  | [], _ => false
  | x :: xs, n => x == n || memberOf xs n

/-- Is an event due at the clock (then the instant is not over)? -/
def Machine.dueNow (m : Machine) : Bool :=
  match m.timers with
  | t :: _ => t.time == m.now
  | [] => false

/-- One pass over the stages in declaration order (`Engine._start_iterations`): every idle engine
with work not yet `tried` at this call starts an iteration and the instant settles; the pass stops
once an event is due now. Returns the machine, the engines tried, whether one started, whether the
pass stopped. -/
def startPass (p : Program) (f : Nat) : List Service → Nat → List Nat → Machine → Bool → Machine × List Nat × Bool × Bool
  | [], _, tried, m, acted => (m, tried, acted, false)
  | .step e :: ss, s, tried, m, acted =>
    let es := getEngineState m.engines s
    if es.busy || !hasWork p.admitVia m.pools s es || memberOf tried s then startPass p f ss (s + 1) tried m acted
    else
      let m' := settle p f (startIteration p f s (getEngine p.engines e) m)
      if m'.dueNow then (m', s :: tried, true, true) else startPass p f ss (s + 1) (s :: tried) m' true
  | _ :: ss, s, tried, m, acted => startPass p f ss (s + 1) tried m acted

/-- The engines' turn once the instant's events are done: passes until one starts no engine (each
engine at most once) or an event is due now (`n`: the passes left, one more than the stages). -/
def startEngines (p : Program) (f : Nat) : Nat → List Nat → Machine → Machine
  | 0, _, m => m
  | n + 1, tried, m =>
    let r := startPass p f p.stages 0 tried m false
    if r.2.2.2 || !r.2.2.1 then r.1 else startEngines p f n r.2.1 r.1

/-- The end of an instant (`Engine.end_of_instant`): unless another event is due now, the engines
start their iterations. -/
def endOfInstant (p : Program) (f : Nat) (m : Machine) : Machine :=
  if m.dueNow then m else startEngines p f (countServices p.stages + 1) [] m

/-- A timer fires: its thread is ready; a fifo stage's server takes the next job of its queue
(its end set first) or goes idle. -/
def fire (p : Program) (m : Machine) : Wake → Machine
  | .resume t => { m with ready := appendNat m.ready t }
  | .arrival s =>
    -- the session is ready, then the next arrival is set (the interpreter's renewal event)
    let m' := { m with ready := appendNat m.ready s, arrived := m.arrived + 1 }
    if p.gap > 0 && s + 1 < p.sessions then m'.setTimer (m.now + p.gap) (.arrival (s + 1)) else m'
  | .iterationEnd s =>
    -- the tokens applied; the threads whose run ended are ready, in the batch's order
    -- (the growing holds' positions advance by the tokens given)
    let es := getEngineState m.engines s
    let m' := m.advanceHolds es.residents
    let r := applyTokens es.start m.now m'.progress es.residents
    { m' with progress := r.1, engines := setEngineState m'.engines s { es with busy := false, residents := r.2.1 },
              ready := appendNats m'.ready r.2.2 }
  | .leaseEnd t id =>
    -- a lease's `t` seconds are over: it ends, unless it did already (`Holds.lease_expired`)
    let th := getThread m.threads t
    match leaseNumbered id th.leases with
    | none => m
    | some l =>
      { m with pools := endLease p.blocks p.caps th.serial th.attrs m.now m.pools l }.put
        { th with leases := leasesWithout id th.leases }
  | .fifoDone s t =>
    let st := getStage m.stages s
    match st.queue with
    | [] => { m with stages := setStage m.stages s { st with busy := st.busy - 1 }, ready := appendNat m.ready t }
    | j :: js =>
      let m' := { m with stages := setStage m.stages s { st with queue := js } }.setTimer (m.now + j.work) (.fifoDone s j.thread)
      { m' with ready := appendNat m'.ready t }

/-- The event loop: the next timer's time is the clock (never earlier than it was), the timer
fires, the instant settles, and if it is over the engines start; until no timer is left. -/
def loop (p : Program) : Nat → Machine → Machine
  | 0, m => { m with outOfFuel := true }
  | f + 1, m =>
    match m.timers with
    | [] => m
    | t :: ts => loop p f (endOfInstant p f (settle p f (fire p { m with now := Nat.max m.now t.time, timers := ts } t.wake)))

/-- Session `serial` as it arrives: every attribute 0 but its serial; its `init` block, then its
session block. -/
def arrive (p : Program) (serial : Nat) : Thread :=
  ⟨serial, setAt (zeros p.attrs) p.serialAt serial, 0, 0, false, [.stmts p.init, .stmts p.session], [], [], 0, 0, [], []⟩

def arrivals (p : Program) : Nat → Nat → List Thread
  | 0, _ => []
  | n + 1, serial => arrive p serial :: arrivals p n (serial + 1)

def serials : Nat → Nat → List Nat
  | 0, _ => []
  | n + 1, s => s :: serials n (s + 1)

def idleStages : List Service → List StageState
  | [] => []
  | _ :: ss => ⟨0, []⟩ :: idleStages ss

def emptyPools : List Nat → List PoolState
  | [] => []
  | _ :: cs => ⟨0, 0, [], []⟩ :: emptyPools cs

def idleEngines : List Service → List EngineState
  | [] => []
  | _ :: ss => ⟨[], false, 0, 0, [], []⟩ :: idleEngines ss

def noProgress : Nat → List Progress
  | 0 => []
  | n + 1 => ⟨0, 0, 0, 0, 0, 0, false⟩ :: noProgress n

/-- A trace's arrivals as timers, session `s` at `times[s]`, in order (the interpreter schedules them
all as the run starts, `TraceReplay.start`, so they come first among the events of their instant). -/
def traceTimers : List Nat → Nat → List Timer
  | [], _ => []
  | t :: ts, s => ⟨t, s, .arrival s⟩ :: traceTimers ts (s + 1)

/-- A batch arrives at time 0, every session ready in serial order; under a renewal gap the first
session's arrival is the first timer, at the gap; a trace's sessions arrive at their times. -/
def initial (p : Program) : Machine :=
  let renewal := p.gap > 0 ∧ p.sessions > 0
  match p.arrivalTimes with
  | [] =>
    ⟨0, if renewal then 1 else 0, arrivals p p.sessions 0, if p.gap = 0 then serials p.sessions 0 else [],
     if renewal then [⟨p.gap, 0, .arrival 0⟩] else [], idleStages p.stages, emptyPools p.caps, false,
     idleEngines p.stages, 1, if p.gap = 0 then p.sessions else 0, noProgress p.sessions, false, []⟩
  | times =>
    ⟨0, countNats times, arrivals p p.sessions 0, [], traceTimers times 0, idleStages p.stages, emptyPools p.caps,
     false, idleEngines p.stages, 1, 0, noProgress p.sessions, false, []⟩

/-- The whole run, cut at `fuel` (the machine says whether it was). -/
def runProgram (p : Program) (fuel : Nat) : Machine :=
  loop p fuel (endOfInstant p fuel (settle p fuel (initial p)))

-- Comparing a run with what the Python interpreter recorded (the differential tests).

def answersEq : List Answer → List Answer → Bool
  | [], [] => true
  | a :: as, b :: bs => a == b && answersEq as bs
  | _, _ => false

def observationsEq : List Observation → List Observation → Bool
  | [], [] => true
  | a :: as, b :: bs => a == b && observationsEq as bs
  | _, _ => false

/-- What the interpreter recorded for one session, in the order it recorded it, newest first
(as `Thread` keeps it). -/
structure Expected where
  answers : List Answer
  observations : List Observation
  tokens : List TurnTokens

def tokensEq : List TurnTokens → List TurnTokens → Bool
  | [], [] => true
  | a :: as, b :: bs => a == b && tokensEq as bs
  | _, _ => false

def iterationsEq : List Iteration → List Iteration → Bool
  | [], [] => true
  | a :: as, b :: bs => a == b && iterationsEq as bs
  | _, _ => false

/-- Every session's thread recorded what was expected, serial order. -/
def agreesWith : List Thread → List Expected → Bool
  | [], [] => true
  | th :: ts, e :: es =>
    answersEq th.answers e.answers && observationsEq th.observations e.observations && tokensEq th.tokens e.tokens &&
      agreesWith ts es
  | _, _ => false

/-- Every stage's iterations are the ones expected (newest first; none for a stage that is no engine). -/
def recordsAgree : List EngineState → List (List Iteration) → Bool
  | [], [] => true
  | es :: ess, r :: rs => iterationsEq es.records r && recordsAgree ess rs
  | _, _ => false

/-- The program's run agrees with the interpreter's: it ran to its end within `fuel` and without
the program's run-time error, each session of the batch answered and observed what the interpreter
recorded, its answered turns' tokens came when the interpreter's did, and every engine's iterations
are the interpreter's. -/
def agrees (p : Program) (fuel : Nat) (expected : List Expected) (records : List (List Iteration)) : Bool :=
  let m := runProgram p fuel
  !m.outOfFuel && !m.failed && agreesWith m.threads expected && recordsAgree m.engines records

end Serq.Kernel
