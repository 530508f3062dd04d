module

/-! # The kernel IR, interpreted: expressions, statements and delay stages

`Serq.Exec` is the executable semantics of one fixed program, the oracle request on one
vLLM-style engine. This module is the start of the general one (issue 13): an interpreter of
the kernel IR itself, so that a program's Lean value is its IR (`serq lean export`, generated
by `serq.leangen.kernel` from the pydantic IR) and not a handful of numbers read off it.

The fragment it covers today (`docs/lean.md`, "The kernel fragment"):

* **Numbers.** Every value is a natural number: the clock, attributes, works, observations.
  A subtraction stops at 0 (`Nat.sub`), as the reference says of the Lean model; it agrees
  with the interpreter on programs whose subtractions never go below 0.
* **Expressions.** Constants, session attributes, `now`, `!`, the IR's binary operators but
  `/` (a comparison or a logical operator is 1 or 0), `c ? a : b`, `min`, `max`, and
  `floor(a / d)` for a positive constant `d`.
* **Statements.** `turn`, `set`, `observe`, `branch`, `while`, `loop`, `end`, and `run` on a
  `delay` stage (every job on its own at rate 1: a run of work `w` takes `w`).
* **Workload.** `arrive batch(N)`: N sessions at time 0, serials 0 … N-1; the `init`, `turn`
  and `session` blocks, the server's statements for each turn.

Sessions on delay stages share nothing, so the run of a program is the run of each of its
sessions on its own: no queue, no event list. Pools, `fifo(c)` stages and step engines, which
make sessions wait for one another, are the next increments.

Every recursion is on fuel or structural, and every helper is this module's own and
monomorphic, so that the kernel evaluates runs (`decide +kernel`) and the offline Lean
compiles the definitions (`../shared/notes/lean-offline.md`).
-/

@[expose] public section

namespace Serq.Kernel

/-- The IR's binary operators (`serq/ir/models.py`, `BinaryOp`) but `div`, which the fragment
has only as `floor(a / d)` (`Expr.floorDiv`). -/
inductive BinOp where
  | add | sub | mul | mod | eq | ne | lt | le | gt | ge | and | or
  deriving DecidableEq, Repr

/-- An expression of the fragment. An attribute is its index in the program's attribute table
(the IR's `attributes`, in order). -/
inductive Expr where
  | num (n : Nat)
  | attr (i : Nat)
  | now
  | not (e : Expr)
  | bin (op : BinOp) (l r : Expr)
  | cond (test yes no : Expr)
  | min (a b : Expr)
  | max (a b : Expr)
  | floorDiv (a : Expr) (d : Nat)

/-- A statement of the fragment. An observation's name is its index in the program's table of
observe names (`Program.observes`); a stage is its index in the program's stages. -/
inductive Stmt where
  | turn
  | set (i : Nat) (e : Expr)
  | observe (k : Nat) (e : Expr)
  | branch (test : Expr) (yes no : List Stmt)
  | while (test : Expr) (body : List Stmt)
  | loop (body : List Stmt)
  | stop
  | run (stage : Nat) (work : Expr)

/-- A program of the fragment: its attribute table's size and the places of the built-in
attributes `serial` and `turn_no` in it, the workload's blocks, the server, and the sessions of
its `arrive batch(N)`. -/
structure Program where
  attrs : Nat
  serialAt : Nat
  turnNoAt : Nat
  init : List Stmt
  turnBlock : List Stmt
  session : List Stmt
  server : List Stmt
  sessions : Nat

/-- An answered turn: the session's serial, the turn's number (1 for the first, `turn_no`), when
it was submitted and when it was answered. -/
structure Answer where
  serial : Nat
  turn : Nat
  start : Nat
  answered : Nat
  deriving DecidableEq, Repr

/-- An observation: the session's serial, the turn it was made in (`turn_no`, 0 before the
first), the observe name's index, its time and its value. -/
structure Observation where
  serial : Nat
  turn : Nat
  name : Nat
  time : Nat
  value : Nat
  deriving DecidableEq, Repr

/-- A session as it runs. `answers` and `observations` are newest first. -/
structure Sess where
  serial : Nat
  attrs : List Nat
  now : Nat
  turns : Nat
  ended : Bool       -- `end;` ran
  outOfFuel : Bool   -- the run was cut short: its outcome says nothing
  answers : List Answer
  observations : List Observation

def Sess.halted (s : Sess) : Bool := s.ended || s.outOfFuel

-- The module's own list helpers (monomorphic: see the module documentation).

def getAt : List Nat → Nat → Nat
  | [], _ => 0
  | x :: _, 0 => x
  | _ :: xs, n + 1 => getAt xs n

def setAt : List Nat → Nat → Nat → List Nat
  | [], _, _ => []
  | _ :: xs, 0, v => v :: xs
  | x :: xs, n + 1, v => x :: setAt xs n v

def zeros : Nat → List Nat
  | 0 => []
  | n + 1 => 0 :: zeros n

def truth (b : Bool) : Nat := if b then 1 else 0

def evalBin : BinOp → Nat → Nat → Nat
  | .add, a, b => a + b
  | .sub, a, b => a - b
  | .mul, a, b => a * b
  | .mod, a, b => a % b
  | .eq, a, b => truth (a == b)
  | .ne, a, b => truth (a != b)
  | .lt, a, b => truth (decide (a < b))
  | .le, a, b => truth (decide (a ≤ b))
  | .gt, a, b => truth (decide (b < a))
  | .ge, a, b => truth (decide (b ≤ a))
  | .and, a, b => truth (a != 0 && b != 0)
  | .or, a, b => truth (a != 0 || b != 0)

/-- An expression's value in a session's attributes at time `now`. -/
def eval (attrs : List Nat) (now : Nat) : Expr → Nat
  | .num n => n
  | .attr i => getAt attrs i
  | .now => now
  | .not e => truth (eval attrs now e == 0)
  | .bin op l r => evalBin op (eval attrs now l) (eval attrs now r)
  | .cond t a b => if eval attrs now t != 0 then eval attrs now a else eval attrs now b
  | .min a b => Nat.min (eval attrs now a) (eval attrs now b)
  | .max a b => Nat.max (eval attrs now a) (eval attrs now b)
  | .floorDiv a d => eval attrs now a / d

def Sess.value (s : Sess) (e : Expr) : Nat := eval s.attrs s.now e

/-- Run a block of statements with `fuel` steps at most (every statement, and every round of
a loop, takes one). A `turn` runs the workload's turn block, submits the turn, runs the server's
statements, and records the answer; `end;` in the server refuses the turn (no answer) and ends
the session, as anywhere else. -/
def exec (p : Program) : Nat → Sess → List Stmt → Sess
  | 0, s, _ => { s with outOfFuel := true }
  | _ + 1, s, [] => s
  | f + 1, s, st :: rest =>
    match st with
    | .set i e => exec p f { s with attrs := setAt s.attrs i (s.value e) } rest
    | .observe k e =>
      let o : Observation := ⟨s.serial, s.turns, k, s.now, s.value e⟩
      exec p f { s with observations := o :: s.observations } rest
    | .run _ w => exec p f { s with now := s.now + s.value w } rest
    | .stop => { s with ended := true }
    | .branch t yes no =>
      let s' := exec p f s (if s.value t != 0 then yes else no)
      if s'.halted then s' else exec p f s' rest
    | .while t body =>
      if s.value t != 0 then
        let s' := exec p f s body
        if s'.halted then s' else exec p f s' (st :: rest)
      else exec p f s rest
    | .loop body =>
      let s' := exec p f s body
      if s'.halted then s' else exec p f s' (st :: rest)
    | .turn =>
      let n := s.turns + 1
      let s1 := exec p f { s with turns := n, attrs := setAt s.attrs p.turnNoAt n } p.turnBlock
      if s1.halted then s1 else
      let s2 := exec p f s1 p.server
      if s2.halted then s2 else
      exec p f { s2 with answers := ⟨s.serial, n, s1.now, s2.now⟩ :: s2.answers } rest

/-- Session `serial` as it starts: every attribute 0 but its serial. -/
def start (p : Program) (serial : Nat) : Sess :=
  ⟨serial, setAt (zeros p.attrs) p.serialAt serial, 0, 0, false, false, [], []⟩

/-- The whole life of session `serial`: its `init` block at arrival, then its session block. -/
def runSession (p : Program) (fuel serial : Nat) : Sess :=
  let s := exec p fuel (start p serial) p.init
  if s.halted then s else exec p fuel s p.session

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
(as `Sess` keeps it). -/
structure Expected where
  answers : List Answer
  observations : List Observation

/-- Every session, serial 0 first, ran to its end within `fuel` and recorded what was expected. -/
def agreesFrom (p : Program) (fuel : Nat) : Nat → List Expected → Bool
  | _, [] => true
  | serial, e :: es =>
    let s := runSession p fuel serial
    !s.outOfFuel && answersEq s.answers e.answers && observationsEq s.observations e.observations &&
      agreesFrom p fuel (serial + 1) es

def Expected.count : List Expected → Nat
  | [] => 0
  | _ :: es => Expected.count es + 1

/-- The program's run agrees with the interpreter's: one expectation per session of the batch. -/
def agrees (p : Program) (fuel : Nat) (expected : List Expected) : Bool :=
  Expected.count expected == p.sessions && agreesFrom p fuel 0 expected

/-! ## Facts every program of the fragment has -/

/-- A run only adds to the clock: time never goes back within a block. -/
theorem exec_now_mono (p : Program) (fuel : Nat) (s : Sess) (b : List Stmt) :
    s.now ≤ (exec p fuel s b).now := by
  fun_induction exec p fuel s b <;> (try simp_all +zetaDelta [Sess.value]) <;> omega

/-- Causality: every answered turn is answered no earlier than it was submitted. -/
def Sess.causal (s : Sess) : Prop := ∀ a ∈ s.answers, a.start ≤ a.answered

theorem exec_causal (p : Program) (fuel : Nat) (s : Sess) (b : List Stmt) :
    s.causal → (exec p fuel s b).causal := by
  fun_induction exec p fuel s b <;> intro h
  case case16 f s rest n s1 _ s2 _ ih3 ih2 ih1 =>
    -- the turn's answer: submitted at s1's clock, answered at s2's, which the server only advanced
    apply ih1
    intro a ha
    rcases List.mem_cons.mp ha with rfl | ha
    · exact exec_now_mono p f s1 p.server
    · exact ih2 (ih3 h) a ha
  all_goals first
    | exact h
    | (simp_all +zetaDelta [Sess.causal]; done)

end Serq.Kernel
