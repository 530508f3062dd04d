module

public import Serq.Basic

/-! # The executable semantics of serQ's verified fragment

One step engine on the step clock (`execute (1)`: the iteration that starts at time
`k` is the scheduler's step `k`), vLLM's schedule (`advance running; admit waiting
while (running.preempted == 0)`, residents served in admission order), a token
budget, a request cap, a chunk cap lifted for a request alone, a KV pool in blocks
with FIFO admission and head-of-line blocking, `reserve (known)`, growing runs,
`preempt lifo` with the victim requeued at the head and `computed`/`kept`, and a
per-session prefix cache (`cache (prompt + out - 1)`, reuse of the session's own
prefix, block-granular LRU eviction from the tail of the oldest entry). An engine may
also separate the phases as FasterTransformer does (`Engine.phased`: `only (in_phase())`
in both statements of vLLM's schedule, `serq/programs/vllm_request_phased.sq`): while a
resident decodes, an iteration serves decodes only, and the heads it admits wait as
residents without a token.

Three rules follow vLLM's scheduler where a simpler rule would not:

* **Prefix reuse after a preemption.** A request admitted for the first time reuses at most
  its prompt's hit (`hit`); a request that was preempted before (`computed > 0`) reuses at
  most the full blocks of every token it knows but the last (`reusable known`): vLLM's hit
  for a resumed request is its longest run of cached full blocks among prompt and generated
  tokens, at most `num_tokens - 1`, and the preempted request's computed blocks stay cached.
* **Next turns in session order.** The next turns created by one step (the turns that step
  finished) are submitted, when due, in session order: their submission order is (the step
  that created them, the session), after the arrivals due at that step (by session), as
  vLLM's oracle driver creates and adds them.
* **A preempted request that can never fit waits forever.** A victim re-enters its queue at
  the head even when every token it knows needs more blocks than the pool has; the head is
  then never admitted and blocks the requests behind it (head-of-line blocking), as vLLM
  leaves it waiting. Only a fresh turn whose prompt can never fit is refused (`submit`).

Everything is over `Nat`, every recursion is structural (on a list or on fuel),
and every helper is the model's own and monomorphic, so that the kernel evaluates
runs (`decide +kernel`) and the offline Lean compiles the definitions. The rules
are those of `docs/engines.md`, which the Python interpreter implements too.
-/

@[expose] public section

namespace Serq

/-- The engine and its pools, as `examples/oracle/vllm_request.sq` declares them. -/
structure Engine where
  budget : Nat      -- `tokens cap`
  reqsCap : Nat     -- `reqs cap` (vLLM's max_num_seqs)
  kvBlocks : Nat    -- the KV pool's cap, in blocks
  blockSize : Nat   -- the KV pool's block (tokens)
  chunk : Nat       -- the chunk cap while more than one request runs or waits; 0: none
  caching : Bool    -- the hold caches `prompt + out - 1` and reuses the session's own prefix
  phased : Bool     -- FasterTransformer's phase separation: `only (in_phase())` in both statements
  deriving DecidableEq

/-- One turn of a session: its fresh prompt tokens, output tokens, the think time
before it (after the previous turn), and whether its prompt matches nothing cached. -/
structure Turn where
  new : Nat
  out : Nat
  think : Nat
  forced : Bool
  deriving DecidableEq

/-- A session arrives at `arrive` and runs its turns one after another. -/
structure Session where
  arrive : Nat
  turns : List Turn

/-- A turn submitted to the engine (waiting, or resident with `Res`). -/
structure Req where
  sid : Nat
  turn : Nat
  prompt : Nat
  out : Nat
  hit : Nat        -- what the hold may reuse: `reusable(prompt, bs)`, or 0 (forced miss, no caching)
  kept : Nat       -- the most tokens an attempt had
  computed : Nat   -- the position the last preemption caught the hold at
  pre : Nat        -- preemptions so far
  first : Nat      -- the step of the first output token (valid when `hasFirst`)
  hasFirst : Bool
  cachedAt : Nat   -- the prefix hit at the first admission (valid when `admitted`)
  admitted : Bool
  deriving DecidableEq

/-- A resident: the request, its allocation (blocks), its position (computed tokens),
the tokens it knows, its run (prefill or decode) with the tokens left, and the tokens
the iteration being planned scheduled for it. -/
structure Res where
  req : Req
  alloc : Nat
  pos : Nat
  known : Nat
  decoding : Bool
  remaining : Nat
  sched : Nat
  deriving DecidableEq

/-- A cached entry of a session: blocks, release sequence number, and whether it is dead
(a later admission consumed what it reused of the session's prefix). -/
structure Entry where
  sid : Nat
  blocks : Nat
  seq : Nat
  dead : Bool
  deriving DecidableEq

/-- A turn that will be submitted at `time`. -/
structure Pending where
  time : Nat
  sid : Nat
  turn : Nat
  prompt : Nat
  kind : Nat  -- 0: a session's arrival, 1: a session's next turn
  seq : Nat   -- arrivals: the session; next turns: `step * sessions + session` (see `nextTurn`)
  deriving DecidableEq

/-- What the client saw of one turn (steps, on the step clock). -/
structure Outcome where
  sid : Nat
  turn : Nat
  first : Nat
  last : Nat
  preemptions : Nat
  cached : Nat
  deriving DecidableEq

/-- What a claim over iterations reads of one iteration. -/
structure Record where
  start : Nat
  tokens : Nat
  prefilled : Nat
  decoders : Nat
  residents : Nat
  kvDecode : Nat   -- the decodes' KV in whole blocks once the iteration's token is written (`kvDecode`)
  kvPrefill : Nat  -- the prefills' positions before the iteration's tokens
  demand : Nat
  served : Nat
  arrived : Nat
  deriving DecidableEq

structure Machine where
  now : Nat
  pending : List Pending
  waiting : List Req
  running : List Res
  cache : List Entry
  relSeq : Nat
  outcomes : List Outcome
  records : List Record
  served : Nat
  arrived : Nat

/-! ## Own list helpers (monomorphic, structurally recursive) -/

def usedBlocks : List Res → Nat
  | [] => 0
  | r :: rs => r.alloc + usedBlocks rs

def cachedBlocks : List Entry → Nat
  | [] => 0
  | e :: es => e.blocks + cachedBlocks es

/-- The live cached tokens of session `sid`. -/
def ownCachedBlocks (sid : Nat) : List Entry → Nat
  | [] => 0
  | e :: es => (if e.sid = sid ∧ e.dead = false then e.blocks else 0) + ownCachedBlocks sid es

def resCount : List Res → Nat
  | [] => 0
  | _ :: rs => resCount rs + 1

def reqCount : List Req → Nat
  | [] => 0
  | _ :: rs => reqCount rs + 1

def dropHead : List Res → List Res
  | [] => []
  | _ :: rs => rs

def anyDecoding : List Res → Bool
  | [] => false
  | r :: rs => r.decoding || anyDecoding rs

def noRes : List Res → Bool
  | [] => true
  | _ => false

def noReq : List Req → Bool
  | [] => true
  | _ => false

def noPending : List Pending → Bool
  | [] => true
  | _ => false

def appendRes : List Res → List Res → List Res
  | [], ys => ys
  | x :: xs, ys => x :: appendRes xs ys

def appendOutcome : List Outcome → Outcome → List Outcome
  | [], o => [o]
  | x :: xs, o => x :: appendOutcome xs o

def appendRecord : List Record → Record → List Record
  | [], r => [r]
  | x :: xs, r => x :: appendRecord xs r

def appendEntry : List Entry → Entry → List Entry
  | [], e => [e]
  | x :: xs, e => x :: appendEntry xs e

def appendReq : List Req → Req → List Req
  | [], r => [r]
  | x :: xs, r => x :: appendReq xs r

/-- The list without its last element, and that element. -/
def popLast : List Res → Option (List Res × Res)
  | [] => none
  | [r] => some ([], r)
  | r :: rs => match popLast rs with
    | none => none
    | some (init, last) => some (r :: init, last)

/-- Does `p` come before `q`? By time; at one instant, sessions' arrivals (by session) before next
turns, and next turns by the step that created them (the step their previous turn finished), then
by session, as vLLM's oracle driver adds them (and the interpreter's events at one instant run). -/
def pendingBefore (p q : Pending) : Bool :=
  p.time < q.time || (p.time == q.time && (p.kind < q.kind || (p.kind == q.kind && p.seq < q.seq)))

/-- Insert a pending turn in submission order. -/
def insertPending (p : Pending) : List Pending → List Pending
  | [] => [p]
  | q :: qs => if pendingBefore p q then p :: q :: qs else q :: insertPending p qs

/-- The pending turns due by `now` (in order), and the rest. -/
def duePending (now : Nat) : List Pending → List Pending × List Pending
  | [] => ([], [])
  | p :: ps =>
    let (due, later) := duePending now ps
    if p.time ≤ now then (p :: due, later) else (due, p :: later)

/-! ## Blocks and the prefix cache -/

/-- The full blocks of `n` tokens a prefix hit may reuse (the last token is recomputed). -/
def reusable (n bs : Nat) : Nat := if n = 0 then 0 else (n - 1) / bs * bs

/-- Evict `n` blocks, least recently released first, from the tail of the oldest entry. -/
def evict : Nat → List Entry → List Entry
  | 0, es => es
  | _ + 1, [] => []
  | n + 1, e :: es => if e.blocks ≤ 1 then evict n es else evict n ({ e with blocks := e.blocks - 1 } :: es)

/-- Consume `take` blocks of session `sid`'s live entries; what is left of them is dead. -/
def consume (sid take : Nat) : List Entry → List Entry
  | [] => []
  | e :: es =>
    if e.sid = sid ∧ e.dead = false then
      let t := min e.blocks take
      let rest := consume sid (take - t) es
      if e.blocks - t = 0 then rest else { e with blocks := e.blocks - t, dead := true } :: rest
    else e :: consume sid take es

/-- Make room for `need` more allocated blocks: evict what the cache holds beyond the free blocks. -/
def makeRoom (eng : Engine) (used need : Nat) (cache : List Entry) : List Entry :=
  evict (used + cachedBlocks cache + need - eng.kvBlocks) cache

/-- Cache `tokens` of session `sid` (whole blocks) as its newest entry. -/
def release (eng : Engine) (sid tokens : Nat) (seq : Nat) (cache : List Entry) : List Entry × Nat :=
  let blocks := if eng.caching then tokens / eng.blockSize else 0
  if blocks = 0 then (cache, seq) else (appendEntry cache ⟨sid, blocks, seq + 1, false⟩, seq + 1)

/-! ## Planning an iteration -/

/-- The state of an iteration being planned. -/
structure Plan where
  budget : Nat
  chunk : Nat       -- 0: none
  done : List Res   -- residents considered, in order
  todo : List Res   -- residents not yet considered
  waiting : List Req
  cache : List Entry
  relSeq : Nat
  preempted : Nat
  selfPreempted : Bool

def capChunk (chunk n : Nat) : Nat := if chunk = 0 then n else min chunk n

/-- Preempt the resident admitted last until `need` more blocks fit, or the grower
(the head of `todo`) is itself the victim. `fuel` bounds the victims. A victim caches its
computed tokens (`release`) and re-enters the queue at its head, with `computed` its position. -/
def growOrPreempt (eng : Engine) : Nat → Nat → Plan → Plan
  | 0, _, p => p
  | fuel + 1, need, p =>
    if usedBlocks p.done + usedBlocks p.todo + need ≤ eng.kvBlocks then p
    else match popLast p.todo with
      | none => p
      | some (rest, victim) =>
        let (cache, seq) := release eng victim.req.sid victim.pos p.relSeq p.cache
        let vreq := { victim.req with computed := victim.pos, pre := victim.req.pre + 1 }
        -- the victim re-enters its queue at the head, even if its reservation (every token it
        -- knows) can never fit again: then it waits there forever and blocks the queue, as in vLLM
        let p' := { p with todo := rest, waiting := vreq :: p.waiting, cache := cache, relSeq := seq,
                           preempted := p.preempted + 1 }
        match rest with
        | [] => { p' with selfPreempted := true }
        | _ => growOrPreempt eng fuel need p'

/-- The iteration's `only`: `none` serves every request; `some d` only those whose run is a decode
when `d` and a prefill when not (`only (in_phase())` with `def in_phase() { running.decoding > 0 ?
decoding : !decoding }`, read as the iteration starts: no iteration changes a resident's phase before
it ends, and a decode phase keeps a decoder, the one being served, until its serving ends). -/
def phaseOf (eng : Engine) (running : List Res) : Option Bool :=
  if eng.phased then some (anyDecoding running) else none

/-- Does the iteration's `only` leave out a request whose run is a decode (`decoding`)? It gets no
token this iteration and keeps what it holds. -/
def excluded : Option Bool → Bool → Bool
  | none, _ => false
  | some d, decoding => decoding != d

/-- Serve the residents in admission order while the budget lasts, passing over the ones the
iteration's `only` leaves out. -/
def serveRunning (eng : Engine) (only : Option Bool) : Nat → Plan → Plan
  | 0, p => p
  | fuel + 1, p =>
    if p.budget = 0 ∨ p.selfPreempted then p else
    match p.todo with
    | [] => p
    | r :: later =>
      let n := if r.decoding then 1 else capChunk p.chunk (min r.remaining p.budget)
      if r.remaining = 0 ∨ excluded only r.decoding = true then
        serveRunning eng only fuel { p with done := appendRes p.done [r], todo := later }
      else
        let need := blocksFor eng.blockSize (r.pos + n) - r.alloc
        let p := growOrPreempt eng (resCount p.todo) need p
        if p.selfPreempted then p else
        let used := usedBlocks p.done + usedBlocks p.todo + need
        let r' := { r with alloc := r.alloc + need, sched := n }
        serveRunning eng only fuel
          { p with
            budget := p.budget - n, done := appendRes p.done [r'], todo := dropHead p.todo,
            cache := evict (used + cachedBlocks p.cache - eng.kvBlocks) p.cache }

/-- The most a request that knows `known` tokens may reuse of its session's cache: its prompt's
hit on a first admission; after a preemption (`computed > 0`), the full blocks of every token it
knows but the last (vLLM: a resumed request's hit is its longest run of cached full blocks among
prompt and generated tokens, at most `num_tokens - 1`; its computed blocks stay cached). -/
def reuseCap (bs : Nat) (rq : Req) (known : Nat) : Nat :=
  if rq.computed > 0 then reusable known bs else rq.hit

/-- Admit the heads of the waiting queue while the budget lasts, they fit, and slots remain.
A head reserves every token it knows (`max kept (computed + 1)`) and reuses what its session's
live cache holds, at most its prompt's hit (`hit`) on a first admission and at most the full
blocks of what it knows but the last token (`reusable known`) after a preemption. A head
that does not fit stops the admissions (head-of-line blocking). A head the iteration's `only`
leaves out is admitted as the others, taking its units, and gets no token: it waits as a resident. -/
def admitHeads (eng : Engine) (only : Option Bool) : Nat → Plan → Plan
  | 0, p => p
  | fuel + 1, p =>
    if p.budget = 0 ∨ resCount p.done ≥ eng.reqsCap then p else
    match p.waiting with
    | [] => p
    | rq :: rest =>
      let known := max rq.kept (rq.computed + 1)
      let reused := min (ownCachedBlocks rq.sid p.cache * eng.blockSize) (reuseCap eng.blockSize rq known)
      let n := capChunk p.chunk (min (known - reused) p.budget)
      let units := blocksFor eng.blockSize (reused + n)
      let reserve := blocksFor eng.blockSize known
      let used := usedBlocks p.done
      if used + max units reserve > eng.kvBlocks then p else
      let cache := consume rq.sid (reused / eng.blockSize) p.cache
      let cache := evict (used + cachedBlocks cache + units - eng.kvBlocks) cache
      let req := if rq.admitted then { rq with kept := known }
                 else { rq with kept := known, cachedAt := reused, admitted := true }
      let sched := if excluded only false = true then 0 else n
      let r : Res := ⟨req, units, reused, known, false, known - reused, sched⟩
      admitHeads eng only fuel
        { p with budget := p.budget - sched, done := appendRes p.done [r], waiting := rest, cache := cache }

/-- Tokens scheduled, prefill tokens, decoders and KV values of a batch. -/
def batchTokens : List Res → Nat
  | [] => 0
  | r :: rs => r.sched + batchTokens rs

def batchPrefilled : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding then 0 else r.sched) + batchPrefilled rs

def batchDecoders : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding ∧ r.sched > 0 then 1 else 0) + batchDecoders rs

/-- The KV of the batch's decodes once the iteration's token is written, in whole blocks of `bs`
tokens: `blocksFor bs (pos + 1) * bs` for each decode served (the interpreter's `batch.kv_decode`,
`ceil((p + 1) / b) * b`). -/
def kvDecode (bs : Nat) : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding ∧ r.sched > 0 then blocksFor bs (r.pos + 1) * bs else 0) + kvDecode bs rs

/-- The positions, before the iteration's tokens, of the batch's prefills. -/
def kvPrefill : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = false ∧ r.sched > 0 then r.pos else 0) + kvPrefill rs

/-- The tokens the residents could take with an unlimited budget (up to the chunk for a prefill). -/
def demandOf (chunk : Nat) : List Res → Nat
  | [] => 0
  | r :: rs => (if r.remaining = 0 then 0 else if r.decoding then 1 else capChunk chunk r.remaining)
               + demandOf chunk rs

/-! ## Executing an iteration -/

/-- The turn at index `i`. -/
def turnAt : List Turn → Nat → Option Turn
  | [], _ => none
  | t :: _, 0 => some t
  | _ :: ts, i + 1 => turnAt ts i

/-- The session at index `i`. -/
def sessionAt : List Session → Nat → Option Session
  | [], _ => none
  | s :: _, 0 => some s
  | _ :: ss, i + 1 => sessionAt ss i

/-- The number of sessions. -/
def sessionCount : List Session → Nat
  | [] => 0
  | _ :: ss => sessionCount ss + 1

/-- The turn after `req`, submitted when its think time has passed after the iteration's end
(`now + 1`); its prompt extends the conversation. Its submission order among the next turns due
at one step is (the step `now` that created it, its session): `now * sessions + session`. -/
def nextTurn (sessions : List Session) (now : Nat) (req : Req) (pending : List Pending) :
    List Pending :=
  match sessionAt sessions req.sid with
  | none => pending
  | some s => match turnAt s.turns (req.turn + 1) with
    | none => pending
    | some t => insertPending ⟨now + 1 + t.think, req.sid, req.turn + 1, req.prompt + req.out + t.new, 1,
        now * sessionCount sessions + req.sid⟩ pending

/-- Apply the iteration's tokens: positions advance, prefills that finish sample a token,
decodes commit theirs, and turns whose last token is committed end (their hold caches
`prompt + out - 1` and releases, and the session's next turn is due after its think time). -/
def apply (eng : Engine) (sessions : List Session) (now : Nat) (m : Machine) : List Res → List Res → Machine
  | [], kept => { m with running := kept }
  | r :: rs, kept =>
    if r.sched = 0 then apply eng sessions now m rs (appendRes kept [r]) else
    let pos := r.pos + r.sched
    let remaining := r.remaining - r.sched
    let sampled := r.decoding ∨ remaining = 0
    let req := if sampled ∧ r.req.hasFirst = false then { r.req with first := now, hasFirst := true } else r.req
    let decoding := r.decoding ∨ remaining = 0
    let left := if r.decoding then remaining
                else if remaining = 0 then r.req.out - 1 - (r.known - r.req.prompt) else remaining
    if decoding ∧ left = 0 then
      let (cache, seq) := release eng req.sid (min (req.prompt + req.out - 1) pos) m.relSeq m.cache
      let o : Outcome := ⟨req.sid, req.turn, req.first, now, req.pre, req.cachedAt⟩
      apply eng sessions now { m with cache := cache, relSeq := seq, outcomes := appendOutcome m.outcomes o,
                                      pending := nextTurn sessions now req m.pending } rs kept
    else
      apply eng sessions now m rs (appendRes kept [⟨req, r.alloc, pos, r.known, decoding, left, 0⟩])

/-! ## The machine -/

def newReq (eng : Engine) (sessions : List Session) (p : Pending) : Req :=
  let t := match sessionAt sessions p.sid with
    | none => none
    | some s => turnAt s.turns p.turn
  let out := match t with | none => 0 | some t => t.out
  let forced := match t with | none => false | some t => t.forced
  { sid := p.sid, turn := p.turn, prompt := p.prompt, out := out,
    hit := if eng.caching ∧ forced = false then reusable p.prompt eng.blockSize else 0,
    kept := p.prompt, computed := 0, pre := 0, first := 0, hasFirst := false, cachedAt := 0, admitted := false }

/-- Submit the due turns, in order, at the back of the queue; a turn that could never fit
(its prompt needs more blocks than the pool has) is refused and its session ends. (A preempted
request that can no longer fit is not refused: it waits at the head, `growOrPreempt`.) -/
def submit (eng : Engine) (sessions : List Session) : List Pending → List Req → List Req
  | [], w => w
  | p :: ps, w =>
    if blocksFor eng.blockSize p.prompt > eng.kvBlocks then submit eng sessions ps w
    else submit eng sessions ps (appendReq w (newReq eng sessions p))

def firstTurns : Nat → List Session → List Pending
  | _, [] => []
  | i, s :: ss =>
    let rest := firstTurns (i + 1) ss
    match s.turns with
    | [] => rest
    | t :: _ => insertPending ⟨s.arrive, i, 0, t.new, 0, i⟩ rest

def countFirst : List Pending → Nat
  | [] => 0
  | p :: ps => (if p.turn = 0 then 1 else 0) + countFirst ps

def clearSched : List Res → List Res
  | [] => []
  | r :: rs => { r with sched := 0 } :: clearSched rs

def init (sessions : List Session) : Machine :=
  ⟨0, firstTurns 0 sessions, [], [], [], 0, [], [], 0, 0⟩

/-- The iteration's plan: serve the residents, then, unless that preempted, admit from the queue. -/
def plan (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req) : Plan :=
  let p0 : Plan := ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩
  let only := phaseOf eng m.running
  let p1 := serveRunning eng only (resCount m.running + 1) p0
  let p1 := { p1 with done := appendRes p1.done p1.todo, todo := [] }
  if p1.preempted = 0 then admitHeads eng only (reqCount p1.waiting + 1) p1 else p1

/-- Has every turn been answered (or refused)? -/
def Machine.quiet (m : Machine) : Bool :=
  noPending m.pending && noReq m.waiting && noRes m.running

/-- Can the request never be admitted: does its reservation (every token it knows) need more
blocks than the pool has? -/
def neverFits (eng : Engine) (rq : Req) : Bool :=
  decide (blocksFor eng.blockSize (max rq.kept (rq.computed + 1)) > eng.kvBlocks)

/-- Is the machine stuck for good: nothing pending, nothing resident, and the head of the queue can
never be admitted (a preempted request that outgrew the pool), so every step leaves it as it is? -/
def Machine.stuck (eng : Engine) (m : Machine) : Bool :=
  noPending m.pending && noRes m.running &&
    match m.waiting with
    | [] => false
    | rq :: _ => neverFits eng rq

/-- Will nothing more happen: quiet, or stuck for good? -/
def Machine.settled (eng : Engine) (m : Machine) : Bool :=
  m.quiet || m.stuck eng

/-- One scheduler step at `m.now`: submit the due turns, plan the iteration (serve the
residents, then admit unless it preempted), and execute it; with nothing to schedule, wait
for the next submission. -/
def step (eng : Engine) (sessions : List Session) (m : Machine) : Machine :=
  let (due, later) := duePending m.now m.pending
  let waiting := submit eng sessions due m.waiting
  let arrived := m.arrived + countFirst due
  let idle : Machine := match later with
    | [] => { m with pending := [], waiting := waiting, arrived := arrived }
    | q :: _ => { m with now := q.time, pending := later, waiting := waiting, arrived := arrived }
  if noRes m.running ∧ noReq waiting then idle else
  let chunk := if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0
  let p2 := plan eng chunk m waiting
  let tokens := batchTokens p2.done
  if tokens = 0 ∧ p2.preempted = 0 then
    -- nothing fits and nothing runs: the head waits for the next submission, if any
    { idle with running := p2.done }
  else
    let record : Record := ⟨m.now, tokens, batchPrefilled p2.done, batchDecoders p2.done, resCount p2.done,
      kvDecode eng.blockSize p2.done, kvPrefill p2.done, demandOf chunk p2.done, m.served, arrived⟩
    let m' : Machine :=
      { m with
        pending := later, waiting := p2.waiting, cache := p2.cache, relSeq := p2.relSeq, arrived := arrived,
        records := appendRecord m.records record, served := m.served + tokens }
    let m'' := apply eng sessions m.now m' p2.done []
    { m'' with now := m.now + 1 }

/-- Run `fuel` scheduler steps at most, stopping when nothing more will happen: every turn is
answered (or refused), or the queue is stuck for good (a step would leave the machine as it is). -/
def run (eng : Engine) (sessions : List Session) : Nat → Machine → Machine
  | 0, m => m
  | fuel + 1, m => if m.settled eng then m else run eng sessions fuel (step eng sessions m)

/-- The outcome of turn `turn` of session `sid`, if it was answered. -/
def outcomeOf (sid turn : Nat) : List Outcome → Option Outcome
  | [] => none
  | o :: os => if o.sid = sid ∧ o.turn = turn then some o else outcomeOf sid turn os

end Serq

namespace Serq

/-- What an oracle says of one turn: its first-token step, last-token step, preemptions
and prefix hit at first admission. -/
structure Expect where
  sid : Nat
  turn : Nat
  first : Nat
  last : Nat
  preemptions : Nat
  cached : Nat
  deriving DecidableEq

/-- Does the run answer turn `e` as the oracle did? -/
def meets1 (os : List Outcome) (e : Expect) : Bool :=
  match outcomeOf e.sid e.turn os with
  | none => false
  | some o => o.first == e.first && o.last == e.last && o.preemptions == e.preemptions && o.cached == e.cached

/-- Does the run answer every turn as the oracle did? -/
def meets (os : List Outcome) : List Expect → Bool
  | [] => true
  | e :: es => meets1 os e && meets os es

end Serq
