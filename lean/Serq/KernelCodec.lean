module

public import Serq.KernelBody

/-! # Reading kernel cases from text, for the compiled differential tests

The kernel-checked differential tests (`decide +kernel`, one theorem per case) cost ~0.4 s a
case. The compiled path runs many more: one Lean process reads cases, one per line, runs the
very `Serq.Kernel.agrees` the theorems state, and prints a verdict per case
(`serq.leangen.kernel_drt.run_compiled`, the driver `serq/leangen/templates/kernel_driver.lean.j2`),
`agreesB` (`Serq.KernelBody`: `agreesX` when no engine has an iteration body, `Serq.KernelExclusive`:
`agrees` when none is under `exclusive prefill` either).

A line is whitespace-separated natural numbers (`serq.leangen.kernel_drt.encode_case` writes
them), in prefix form:

* case: `id fuel program exclusive bodies sessions (answers (4 each) observations (5 each) tokens (5 each))* stages
  (iterations (11 each: the record's fields in order))*`, each list as its length then its elements, newest first (as
  `Serq.Kernel.Expected` and `EngineState.records`; a stage that is no engine has none), `exclusive` the
  engines under `exclusive prefill` (`Serq.KernelExclusive`) as their count then each one's index,
  `bodies` the engines' iteration bodies (`Serq.KernelBody`) as their count then each as a block (`0`: none);
* program: `attrs serialAt turnNoAt sessions gap init turnBlock session server stages caps keys
  blocks cachedAt computedAt engines admitVia preemptModes preemptKeys evictKeys`, the stages as their count then each service (`0` delay, `1 c`
  fifo(c), `2 e` step engine e), the caps as
  their count then each, the pools' queue keys as their count then, per pool, its keys as a list
  of expressions (empty: `queue fifo`), the pools' blocks as their count then each (0: no block),
  then the places of the attributes `cached` and `computed`, the engines as their count then each one's `budget chunk
  cost` expressions, its serve keys (`advance running by`) as their count then each, and its `only`
  predicates on `advance running` and `admit waiting` (each `0` none or `1 e`) and its admissions' gate
  (`Engine.admitGated`: `1` true, `0` false) then its `granule` expression (`.num 0`: none), the pools' admitting engines as their count then each (0: none, `s + 1`: stage
  s), the pools' preemption modes (`Program.preemptModes`) as their count then each, their `preempt
  by` keys as their count then, per pool, its keys as a list of expressions, and their `evict by` keys
  the same way (empty: `evict lru`); then a trace's arrival times as their count then each (none without
  a trace), the places of its attributes as their count then each, and its sessions as their count then
  each one's rows as their count then `new out think forced` each, the trace sessions the sessions replay
  (`Program.traceNos`) as their count then each, and the pools' `reserve held` (`Program.reserveHeld`) as
  their count then each (`1` held, `0` not);
* block: its length, then its statements;
* iteration statement: `0 only` advance running, `1 only gate` admit waiting (each an optional expression, `0`
  none or `1 e`), `2 t yes no` branch (its blocks of iteration statements);
* statement: `0` turn, `1 i e` set, `2 k e` observe, `3 t yes no` branch, `4 t body` while,
  `5 body` loop, `6` end, `7 stage w` run, `8 n (pool units reserve caches reuses lease)ⁿ reuse cache body` hold (reuse and cache
  optional expressions, `0` none or `1 e`; caches and reuses 0 or 1; lease `0` none, `1` `lease m (inf)`, `2 t`
  `lease m (t)`), `9 pool` release, `10 stage decode grow w`
  a run on an engine (decode 0 or 1; grow 0, or `i + 1` for `growing` pool i), `11 pool d` grow;
* expression: `0 n` num, `1 i` attr, `2` now, `3 e` not, `4 op l r` (op: `BinOp`'s constructors
  in order from 0), `5 t a b` cond, `6 a b` min, `7 a b` max, `8 a d` floor division, `9` waited,
  and a pool's observable of pool `i`: `10 i` used, `11 i` free, `12 i` holders, `13 i` queued, `14 i` cachedin;
  `15 i` an engine's context variable (`StageVar`), `16 b` `blocksize(m)` of a pool of block `b` (1 without one).

Every reader takes fuel (a bound on the tokens it reads) and fails (`none`) on anything else,
so an unreadable line is a verdict of its own, never a wrong answer.
-/

@[expose] public section

namespace Serq.Kernel

/-- The natural numbers of a line, in order (anything but a digit separates them). -/
def tokensOf : List Char → Nat → Bool → List Nat → List Nat
  | [], n, inNum, acc => if inNum then n :: acc else acc
  | c :: cs, n, inNum, acc =>
    if c.isDigit then tokensOf cs (10 * n + (c.toNat - '0'.toNat)) true acc
    else tokensOf cs 0 false (if inNum then n :: acc else acc)

def revNats : List Nat → List Nat → List Nat
  | [], acc => acc
  | x :: xs, acc => revNats xs (x :: acc)

def tokens (line : String) : List Nat := revNats (tokensOf line.toList 0 false []) []

def binOpOf : Nat → Option BinOp
  | 0 => some .add | 1 => some .sub | 2 => some .mul | 3 => some .mod | 4 => some .eq
  | 5 => some .ne | 6 => some .lt | 7 => some .le | 8 => some .gt | 9 => some .ge
  | 10 => some .and | 11 => some .or | _ => none

def readExpr : Nat → List Nat → Option (Expr × List Nat)
  | 0, _ => none
  | _ + 1, 0 :: n :: r => some (.num n, r)
  | _ + 1, 1 :: i :: r => some (.attr i, r)
  | _ + 1, 2 :: r => some (.now, r)
  | f + 1, 3 :: r =>
    match readExpr f r with
    | some (e, r) => some (.not e, r)
    | none => none
  | f + 1, 4 :: op :: r =>
    match binOpOf op, readExpr f r with
    | some o, some (a, r) =>
      match readExpr f r with
      | some (b, r) => some (.bin o a b, r)
      | none => none
    | _, _ => none
  | f + 1, 5 :: r =>
    match readExpr f r with
    | some (t, r) =>
      match readExpr f r with
      | some (a, r) =>
        match readExpr f r with
        | some (b, r) => some (.cond t a b, r)
        | none => none
      | none => none
    | none => none
  | f + 1, 6 :: r =>
    match readExpr f r with
    | some (a, r) =>
      match readExpr f r with
      | some (b, r) => some (.min a b, r)
      | none => none
    | none => none
  | f + 1, 7 :: r =>
    match readExpr f r with
    | some (a, r) =>
      match readExpr f r with
      | some (b, r) => some (.max a b, r)
      | none => none
    | none => none
  | f + 1, 8 :: r =>
    match readExpr f r with
    | some (a, d :: r) => some (.floorDiv a d, r)
    | _ => none
  | _ + 1, 9 :: r => some (.waited, r)
  | _ + 1, 10 :: i :: r => some (.used i, r)
  | _ + 1, 11 :: i :: r => some (.free i, r)
  | _ + 1, 12 :: i :: r => some (.holders i, r)
  | _ + 1, 13 :: i :: r => some (.queued i, r)
  | _ + 1, 14 :: i :: r => some (.cachedIn i, r)
  | _ + 1, 15 :: i :: r => some (.stageVar i, r)
  | _ + 1, 16 :: b :: r => some (.blockSize b, r)
  | _, _ => none

def flag (n : Nat) : Bool := n != 0

/-- A hold's lease on a pool: `0` none, `1` `inf`, `2 e` for `e` seconds. -/
def readLease (f : Nat) : List Nat → Option (Bool × Option Expr × List Nat)
  | 0 :: r => some (false, none, r)
  | 1 :: r => some (true, none, r)
  | 2 :: r => match readExpr f r with
    | some (e, r) => some (true, some e, r)
    | none => none
  | _ => none

/-- `count` pools of a hold, each as its pool's index, its units, its reserve, whether it caches
and reuses (0 or 1 each) and its lease (`readLease`). -/
def readHoldOns : Nat → Nat → List Nat → Option (List HoldOn × List Nat)
  | 0, _, _ => none
  | _ + 1, 0, r => some ([], r)
  | f + 1, count + 1, pool :: r =>
    match readExpr f r with
    | some (u, r) =>
      match readExpr f r with
      | some (res, c :: ru :: r) =>
        match readLease f r with
        | some (leased, dur, r) =>
          match readHoldOns f count r with
          | some (hs, r) => some (⟨pool, u, res, flag c, flag ru, leased, dur⟩ :: hs, r)
          | none => none
        | none => none
      | _ => none
    | none => none
  | _ + 1, _ + 1, [] => none

/-- An optional expression: `0` none, `1 e` some. -/
def readOptExpr (f : Nat) : List Nat → Option (Option Expr × List Nat)
  | 0 :: r => some (none, r)
  | 1 :: r => match readExpr f r with
    | some (e, r) => some (some e, r)
    | none => none
  | _ => none

/-- `count` statements. A statement with blocks reads each as its length then its statements. -/
def readStmts : Nat → Nat → List Nat → Option (List Stmt × List Nat)
  | 0, _, _ => none
  | _ + 1, 0, r => some ([], r)
  | f + 1, count + 1, tag :: r =>
    let rest (s : Stmt) (r : List Nat) : Option (List Stmt × List Nat) :=
      match readStmts f count r with
      | some (ss, r) => some (s :: ss, r)
      | none => none
    match tag with
    | 0 => rest .turn r
    | 1 =>
      match r with
      | i :: r => match readExpr f r with
        | some (e, r) => rest (.set i e) r
        | none => none
      | [] => none
    | 2 =>
      match r with
      | k :: r => match readExpr f r with
        | some (e, r) => rest (.observe k e) r
        | none => none
      | [] => none
    | 3 =>
      match readExpr f r with
      | some (t, n :: r) =>
        match readStmts f n r with
        | some (yes, m :: r) =>
          match readStmts f m r with
          | some (no, r) => rest (.branch t yes no) r
          | none => none
        | _ => none
      | _ => none
    | 4 =>
      match readExpr f r with
      | some (t, n :: r) =>
        match readStmts f n r with
        | some (body, r) => rest (.while t body) r
        | none => none
      | _ => none
    | 5 =>
      match r with
      | n :: r => match readStmts f n r with
        | some (body, r) => rest (.loop body) r
        | none => none
      | [] => none
    | 6 => rest .stop r
    | 7 =>
      match r with
      | k :: r => match readExpr f r with
        | some (w, r) => rest (.run k w) r
        | none => none
      | [] => none
    | 8 =>
      match r with
      | n :: r => match readHoldOns f n r with
        | some (on, r) => match readOptExpr f r with
          | some (reuse, r) => match readOptExpr f r with
            | some (cache, b :: r) => match readStmts f b r with
              | some (body, r) => rest (.hold on reuse cache body) r
              | none => none
            | _ => none
          | none => none
        | none => none
      | [] => none
    | 9 =>
      match r with
      | i :: r => rest (.release i) r
      | [] => none
    | 10 =>
      match r with
      | st :: d :: g :: r => match readExpr f r with
        | some (w, r) => rest (.step st (flag d) g w) r
        | none => none
      | _ => none
    | 11 =>
      match r with
      | i :: r => match readExpr f r with
        | some (d, r) => rest (.grow i d) r
        | none => none
      | [] => none
    | _ => none
  | _ + 1, _ + 1, [] => none

def readBlock (f : Nat) : List Nat → Option (List Stmt × List Nat)
  | n :: r => readStmts f n r
  | [] => none

def readNats : Nat → List Nat → Option (List Nat × List Nat)
  | 0, r => some ([], r)
  | n + 1, x :: r =>
    match readNats n r with
    | some (xs, r) => some (x :: xs, r)
    | none => none
  | _ + 1, [] => none

/-- `count` statements of an iteration body (`Serq.Kernel.IterStmt`), a branch's blocks each as its
length then its statements, a set as its register's place then its value. -/
def readIterStmts : Nat → Nat → List Nat → Option (List IterStmt × List Nat)
  | 0, _, _ => none
  | _ + 1, 0, r => some ([], r)
  | f + 1, count + 1, tag :: r =>
    let rest (s : IterStmt) (r : List Nat) : Option (List IterStmt × List Nat) :=
      match readIterStmts f count r with
      | some (ss, r) => some (s :: ss, r)
      | none => none
    match tag with
    | 0 =>
      match readOptExpr f r with
      | some (only, r) => rest (.serve only) r
      | none => none
    | 1 =>
      match readOptExpr f r with
      | some (only, r) =>
        match readOptExpr f r with
        | some (gate, r) => rest (.admit only gate) r
        | none => none
      | none => none
    | 2 =>
      match readExpr f r with
      | some (t, n :: r) =>
        match readIterStmts f n r with
        | some (yes, m :: r) =>
          match readIterStmts f m r with
          | some (no, r) => rest (.branch t yes no) r
          | none => none
        | _ => none
      | _ => none
    | 3 =>
      match r with
      | k :: r =>
        match readExpr f r with
        | some (e, r) => rest (.set k e) r
        | none => none
      | [] => none
    | _ => none
  | _ + 1, _ + 1, [] => none

/-- `count` engines' bodies, each as its length then its statements (`0`: none), then its registers'
count and declared values. -/
def readBodies (f : Nat) : Nat → List Nat → Option (List Body × List Nat)
  | 0, r => some ([], r)
  | count + 1, n :: r =>
    match readIterStmts f n r with
    | some (b, nr :: r) =>
      match readNats nr r with
      | some (regs, r) =>
        match readBodies f count r with
        | some (bs, r) => some (⟨b, regs⟩ :: bs, r)
        | none => none
      | none => none
    | _ => none
  | _ + 1, [] => none

def readServices : Nat → List Nat → Option (List Service × List Nat)
  | 0, r => some ([], r)
  | n + 1, 0 :: r =>
    match readServices n r with
    | some (ss, r) => some (.delay :: ss, r)
    | none => none
  | n + 1, 1 :: c :: r =>
    match readServices n r with
    | some (ss, r) => some (.fifo c :: ss, r)
    | none => none
  | n + 1, 2 :: e :: r =>
    match readServices n r with
    | some (ss, r) => some (.step e :: ss, r)
    | none => none
  | _ + 1, _ => none

/-- `count` expressions. -/
def readExprs : Nat → Nat → List Nat → Option (List Expr × List Nat)
  | 0, _, _ => none
  | _ + 1, 0, r => some ([], r)
  | f + 1, count + 1, r =>
    match readExpr f r with
    | some (e, r) =>
      match readExprs f count r with
      | some (es, r) => some (e :: es, r)
      | none => none
    | none => none

/-- `count` lists of expressions, each as its length then its expressions. -/
def readKeyLists : Nat → Nat → List Nat → Option (List (List Expr) × List Nat)
  | 0, _, _ => none
  | _ + 1, 0, r => some ([], r)
  | f + 1, count + 1, n :: r =>
    match readExprs f n r with
    | some (ks, r) =>
      match readKeyLists f count r with
      | some (kss, r) => some (ks :: kss, r)
      | none => none
    | none => none
  | _ + 1, _ + 1, [] => none

/-- `count` engines, each as its `budget chunk cost` expressions, its serve keys (their count, then
each), its `only` predicates on `advance running` and `admit waiting` (each `0` none or `1 e`) and its
admissions' gate, then its granule. -/
def readEngines : Nat → Nat → List Nat → Option (List Engine × List Nat)
  | 0, _, _ => none
  | _ + 1, 0, r => some ([], r)
  | f + 1, count + 1, r =>
    match readExpr f r with
    | some (b, r) =>
      match readExpr f r with
      | some (c, r) =>
        match readExpr f r with
        | some (x, n :: r) =>
          match readExprs f n r with
          | some (keys, r) =>
            match readOptExpr f r with
            | some (serveOnly, r) =>
              match readOptExpr f r with
              | some (admitOnly, gate :: r) =>
                match readExpr f r with
                | some (g, r) =>
                  match readEngines f count r with
                  | some (es, r) => some (⟨b, c, x, keys, serveOnly, admitOnly, gate == 1, g⟩ :: es, r)
                  | none => none
                | none => none
              | _ => none
            | none => none
          | none => none
        | _ => none
      | none => none
    | none => none

/-- `count` trace sessions, each as its rows' count then each row's four numbers. -/
def readTraceRows : Nat → List Nat → Option (List (List (List Nat)) × List Nat)
  | 0, r => some ([], r)
  | count + 1, n :: r =>
    match readRows n r with
    | some (rows, r) =>
      match readTraceRows count r with
      | some (rss, r) => some (rows :: rss, r)
      | none => none
    | none => none
  | _ + 1, [] => none
where
  readRows : Nat → List Nat → Option (List (List Nat) × List Nat)
    | 0, r => some ([], r)
    | n + 1, a :: b :: c :: d :: r =>
      match readRows n r with
      | some (rows, r) => some ([a, b, c, d] :: rows, r)
      | none => none
    | _ + 1, _ => none

/-- `reserve held` per pool, read as 0 (no) or anything else (yes). -/
def boolsOf : List Nat → List Bool
  | [] => []
  | n :: ns => (n != 0) :: boolsOf ns

def readProgram (f : Nat) : List Nat → Option (Program × List Nat)
  | attrs :: serialAt :: turnNoAt :: sessions :: gap :: r =>
    match readBlock f r with
    | some (init, r) =>
      match readBlock f r with
      | some (turnBlock, r) =>
        match readBlock f r with
        | some (session, r) =>
          match readBlock f r with
          | some (server, ns :: r) =>
            match readServices ns r with
            | some (stages, nc :: r) =>
              match readNats nc r with
              | some (caps, nk :: r) =>
                match readKeyLists f nk r with
                | some (keys, nb :: r) =>
                  match readNats nb r with
                  | some (blocks, cachedAt :: computedAt :: ne :: r) =>
                    match readEngines f ne r with
                    | some (engines, na :: r) =>
                      match readNats na r with
                      | some (admitVia, nm :: r) =>
                        match readNats nm r with
                        | some (modes, np :: r) =>
                          match readKeyLists f np r with
                          | some (preemptKeys, ne :: r) =>
                            match readKeyLists f ne r with
                            | some (evictKeys, nt :: r) =>
                              match readNats nt r with
                              | some (times, nw :: r) =>
                                match readNats nw r with
                                | some (traceAt, ns :: r) =>
                                  match readTraceRows ns r with
                                  | some (rows, nn :: r) =>
                                    match readNats nn r with
                                    | some (traceNos, nh :: r) =>
                                      match readNats nh r with
                                      | some (held, r) =>
                                        some (⟨attrs, serialAt, turnNoAt, init, turnBlock, session, server, sessions, stages,
                                          caps, keys, gap, blocks, cachedAt, engines, admitVia, computedAt, modes, preemptKeys,
                                          evictKeys, times, traceAt, rows, traceNos, boolsOf held⟩, r)
                                      | none => none
                                    | _ => none
                                  | _ => none
                                | _ => none
                              | _ => none
                            | _ => none
                          | _ => none
                        | _ => none
                      | _ => none
                    | _ => none
                  | _ => none
                | _ => none
              | _ => none
            | _ => none
          | _ => none
        | none => none
      | none => none
    | none => none
  | _ => none

def readAnswers : Nat → List Nat → Option (List Answer × List Nat)
  | 0, r => some ([], r)
  | n + 1, a :: b :: c :: d :: r =>
    match readAnswers n r with
    | some (as, r) => some (⟨a, b, c, d⟩ :: as, r)
    | none => none
  | _ + 1, _ => none

def readObservations : Nat → List Nat → Option (List Observation × List Nat)
  | 0, r => some ([], r)
  | n + 1, a :: b :: c :: d :: e :: r =>
    match readObservations n r with
    | some (os, r) => some (⟨a, b, c, d, e⟩ :: os, r)
    | none => none
  | _ + 1, _ => none

def readTokens : Nat → List Nat → Option (List TurnTokens × List Nat)
  | 0, r => some ([], r)
  | n + 1, a :: b :: c :: d :: e :: f :: g :: r =>
    match readTokens n r with
    | some (ts, r) => some (⟨a, b, c, d, e, f, g⟩ :: ts, r)
    | none => none
  | _ + 1, _ => none

def readExpected : Nat → List Nat → Option (List Expected × List Nat)
  | 0, r => some ([], r)
  | n + 1, na :: r =>
    match readAnswers na r with
    | some (as, no :: r) =>
      match readObservations no r with
      | some (os, nt :: r) =>
        match readTokens nt r with
        | some (ts, r) =>
          match readExpected n r with
          | some (es, r) => some (⟨as, os, ts⟩ :: es, r)
          | none => none
        | none => none
      | _ => none
    | _ => none
  | _ + 1, [] => none

def readIterations : Nat → List Nat → Option (List Iteration × List Nat)
  | 0, r => some ([], r)
  | n + 1, a :: b :: c :: d :: e :: g :: h :: i :: kd :: kp :: at2 :: r =>
    match readIterations n r with
    | some (its, r) => some (⟨a, b, c, d, e, g, h, i, kd, kp, at2⟩ :: its, r)
    | none => none
  | _ + 1, _ => none

/-- `count` stages' iterations, each as its length then its iterations. -/
def readRecords : Nat → List Nat → Option (List (List Iteration) × List Nat)
  | 0, r => some ([], r)
  | n + 1, k :: r =>
    match readIterations k r with
    | some (its, r) =>
      match readRecords n r with
      | some (rs, r) => some (its :: rs, r)
      | none => none
    | none => none
  | _ + 1, [] => none

def tokenCount : List Nat → Nat
  | [] => 0
  | _ :: r => tokenCount r + 1

/-- A case line: its id, and whether the Lean interpreter's run agrees with the interpreter's
(`none`: the line does not read as a case). -/
def checkLine (line : String) : Option (Nat × Bool) :=
  let ts := tokens line
  match ts with
  | id :: fuel :: r =>
    match readProgram (tokenCount ts) r with
    | some (p, nx :: r) =>
      match readNats nx r with
      | some (xs, nb :: r) =>
        match readBodies (tokenCount ts) nb r with
        | some (bodies, n :: r) =>
          match readExpected n r with
          | some (es, ns :: r) =>
            match readRecords ns r with
            | some (rs, []) => some (id, agreesB p xs bodies fuel es rs)
            | _ => none
          | _ => none
        | _ => none
      | _ => none
    | _ => none
  | _ => none

end Serq.Kernel
