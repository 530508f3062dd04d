module

public import Serq.KernelDistinct

/-! # Issue 14, result 6 over the kernel interpreter: request conservation

Result 6 asks that "every submitted turn is waiting, running, answered or rejected, never two of them".
Over the kernel machine (`Serq.KernelMachine`) a session's open turn is its thread's (`Thread.inTurn`:
submitted, `Frame.submit`, and neither answered nor refused), numbered `Thread.turns`; where the turn
stands is where its thread is:

* **waiting**: the thread's hold is in a pool's queue (`occPools`), or its job in a fifo stage's queue
  (`occStages`);
* **running**: the thread is an engine's resident (`occEngines`), or a timer will resume it (a delay or
  fifo run's end, `occTimers`), or it is ready to run (`Machine.ready`);
* **answered**: its answer is recorded (`Thread.answers`, newest first, each with its turn's number,
  written by `Frame.answer`, which closes the turn);
* **rejected**: the kernel records no rejection. A turn is refused when the server's hold can never fit
  (`rejects`) or the server runs `end;`: the session ends (its continuation empty, `inTurn` false) and the
  turn gets no answer. A rejected turn is thus the session's last turn (`turns`) with no answer among
  `answers`, once the session has ended; it is in no place (the thread is not ready, nowhere queued,
  no resident, no timer names it: `exec` puts it nowhere).

`Serq.KernelDistinct` proves the places exclusive (`Placed`: every thread is placed at most once, so a
turn is never both waiting and running, nor twice either). This module adds the answered half
(`TurnOk`): the open turn has no answer (an answer closes its turn, and the next turn has a higher
number), and no turn is answered twice (the answers' turn numbers strictly decrease, newest first).

That needs a hypothesis on the program. A `turn` statement run inside another turn (in the workload's
`turn` block, in the server) or inside a hold's body would break it in the model: a turn in the server
submits again and its answer closes the outer turn, which is then never answered; a turn in the turn block
is answered and then submitted once more under the same number. The hypothesis (`TurnsOutside`, decided
by `TurnsOutside.of_check`): the turn block and the server have no `turn` at any depth, and no hold body of
the program has one. The invariant says of a thread's continuation (`FrontOk`): the frames before its
turn's pending `Frame.answer` run no `turn`, a `Frame.submit` has its answer after it, there is at most
one pending answer, and every block's holds have turn-free bodies; every waiting hold's body is turn-free
(`WaitersOk`). This module keeps it through every function of the machine but a preemption (the engines'
lemmas here take `NoPreemption`, decided by `NoPreemption.of_check`): a preemption drops a prefix of a
victim's continuation and requeues a hold. `Serq.KernelRequestsPreempt` follows that too (the dropped
prefix holds no pending answer nor submission: `RelOk`) and proves `runProgram_requests` without
`NoPreemption`; the statement with it is `runProgram_requests_noPreemption` here. (`Placed`, the places'
half, holds under preemption: `DistinctProgram` no longer excludes it.)

What is proved here is "never two of them"; "every submitted turn is in one of them" (an open turn's
thread is somewhere, not lost) is `Serq.KernelFoundPreempt`'s (`runProgram_found`, `runProgram_placed_once`,
preemption included, and `runProgram_open_turn_placed`, with `TurnsOutside` for the turn invariant), for
every run that ran to its end, under `FoundProgram`.
-/
@[expose] public section

namespace Serq.Kernel

/-! ### Statements that run no `turn` -/

def noTurn : Stmt → Bool
  | .turn => false
  | _ => true

/-- No `turn` in the block, at any depth. -/
def TurnFree (b : List Stmt) : Prop := Stmt.allBlock noTurn b = true

/-- A hold statement's body runs no `turn`. -/
def holdBodyTurnFree : Stmt → Bool
  | .hold _ _ _ body => Stmt.allBlock noTurn body
  | _ => true

/-- Every hold of the block, at any depth, has a turn-free body. -/
def HoldsOk (b : List Stmt) : Prop := Stmt.allBlock holdBodyTurnFree b = true

theorem allBlock_cons {c : Stmt → Bool} {st : Stmt} {b : List Stmt} (h : Stmt.allBlock c (st :: b) = true) :
    Stmt.allSub c st = true ∧ Stmt.allBlock c b = true := by
  simpa [Stmt.allBlock] using h

theorem allBlock_nil (c : Stmt → Bool) : Stmt.allBlock c [] = true := by simp [Stmt.allBlock]

/-- The blocks a statement runs next (a branch's arms, a loop's body, a hold's body) keep what the
statement's block has. -/
theorem allBlock_branch {c : Stmt → Bool} {t : Expr} {y n b : List Stmt}
    (h : Stmt.allBlock c (.branch t y n :: b) = true) : Stmt.allBlock c y = true ∧ Stmt.allBlock c n = true := by
  have h1 := (allBlock_cons h).1
  simp only [Stmt.allSub, Bool.and_eq_true] at h1
  exact ⟨h1.1.2, h1.2⟩

theorem allBlock_while {c : Stmt → Bool} {t : Expr} {body b : List Stmt}
    (h : Stmt.allBlock c (.while t body :: b) = true) : Stmt.allBlock c body = true := by
  have h1 := (allBlock_cons h).1
  simp only [Stmt.allSub, Bool.and_eq_true] at h1
  exact h1.2

theorem allBlock_loop {c : Stmt → Bool} {body b : List Stmt}
    (h : Stmt.allBlock c (.loop body :: b) = true) : Stmt.allBlock c body = true := by
  have h1 := (allBlock_cons h).1
  simp only [Stmt.allSub, Bool.and_eq_true] at h1
  exact h1.2

theorem allBlock_hold {c : Stmt → Bool} {on : List HoldOn} {r ca : Option Expr} {body b : List Stmt}
    (h : Stmt.allBlock c (.hold on r ca body :: b) = true) : Stmt.allBlock c body = true := by
  have h1 := (allBlock_cons h).1
  simp only [Stmt.allSub, Bool.and_eq_true] at h1
  exact h1.2

/-- A hold in a block whose holds are turn-free has a turn-free body. -/
theorem HoldsOk.hold_body {on : List HoldOn} {r ca : Option Expr} {body b : List Stmt}
    (h : HoldsOk (.hold on r ca body :: b)) : TurnFree body := by
  have h1 := Stmt.allSub_self _ _ (allBlock_cons h).1
  simpa [holdBodyTurnFree] using h1

theorem TurnFree.not_turn {b : List Stmt} (h : TurnFree (.turn :: b)) : False := by
  have h1 := Stmt.allSub_self _ _ (allBlock_cons h).1
  simp [noTurn] at h1

/-! ### A thread's continuation around its turn -/

/-- The continuation has a turn's answer pending. -/
def answerIn : List Frame → Bool
  | [] => false
  | .answer :: _ => true
  | .stmts _ :: k => answerIn k
  | .submit :: k => answerIn k
  | .release _ _ :: k => answerIn k

/-- The frames before the pending answer (if any) run no `turn`, a submission has its answer after it,
no answer is pending after the first, and every block's holds have turn-free bodies. -/
def FrontOk : List Frame → Prop
  | [] => True
  | .answer :: k => answerIn k = false ∧ FrontOk k
  | .submit :: k => answerIn k = true ∧ FrontOk k
  | .stmts b :: k => HoldsOk b ∧ (answerIn k = true → TurnFree b) ∧ FrontOk k
  | .release _ _ :: k => FrontOk k

/-- A thread's turns: no turn answered twice (newest first, the turn numbers strictly decrease), none
after the latest turn, the open turn has its answer pending, and while it is pending every answer is of an
earlier turn. -/
structure TurnOk (th : Thread) : Prop where
  distinct : th.answers.Pairwise (fun a b => b.turn < a.turn)
  le : ∀ a ∈ th.answers, a.turn ≤ th.turns
  pending : th.inTurn = true → answerIn th.k = true
  below : answerIn th.k = true → ∀ a ∈ th.answers, a.turn < th.turns
  front : FrontOk th.k

/-- A waiting hold's body runs no `turn`, nor do its holds' bodies. -/
def BodyOk (b : List Stmt) : Prop := TurnFree b ∧ HoldsOk b

def WaitersOk (ps : List PoolState) : Prop := ∀ q ∈ ps, ∀ w ∈ q.queue, BodyOk w.body

/-- The invariant: every thread's turns are `TurnOk`, every waiting hold's body is turn-free. -/
def ReqInv (m : Machine) : Prop := (∀ th ∈ m.threads, TurnOk th) ∧ WaitersOk m.pools

/-- The program's hypothesis: the turn block and the server run no `turn`, and no hold body does. -/
structure TurnsOutside (p : Program) : Prop where
  turnBlock : TurnFree p.turnBlock
  server : TurnFree p.server
  holds : p.allStmts holdBodyTurnFree = true

theorem TurnsOutside.of_check (p : Program)
    (h : (Stmt.allBlock noTurn p.turnBlock && Stmt.allBlock noTurn p.server && p.allStmts holdBodyTurnFree) = true) :
    TurnsOutside p := by
  simp only [Bool.and_eq_true] at h
  exact ⟨h.1.1, h.1.2, h.2⟩

theorem TurnsOutside.blocks {p : Program} (h : TurnsOutside p) :
    HoldsOk p.init ∧ HoldsOk p.turnBlock ∧ HoldsOk p.session ∧ HoldsOk p.server := by
  have h1 := h.holds
  simp only [Program.allStmts, Bool.and_eq_true] at h1
  exact ⟨h1.1.1.1, h1.1.1.2, h1.1.2, h1.2⟩

/-! ### Frames -/

theorem TurnOk.of {th th' : Thread} (h : TurnOk th) (ha : th'.answers = th.answers) (ht : th'.turns = th.turns)
    (hi : th'.inTurn = th.inTurn) (hk : answerIn th'.k = answerIn th.k) (hf : FrontOk th'.k) : TurnOk th' :=
  ⟨ha ▸ h.distinct, fun a hm => ht ▸ h.le a (ha ▸ hm), fun e => hk ▸ h.pending (hi ▸ e),
   fun e a hm => ht ▸ h.below (hk ▸ e) a (ha ▸ hm), hf⟩

/-- A session that ends (or refuses its turn): no turn open, nothing left to run. -/
theorem TurnOk.ended {th th' : Thread} (h : TurnOk th) (ha : th'.answers = th.answers) (ht : th'.turns = th.turns)
    (hi : th'.inTurn = false) (hk : th'.k = []) : TurnOk th' := by
  refine ⟨ha ▸ h.distinct, fun a hm => ht ▸ h.le a (ha ▸ hm), fun e => ?_, fun e => ?_, ?_⟩
  · rw [hi] at e; cases e
  · rw [hk] at e; cases e
  · rw [hk]; trivial

theorem getThread_turnOk : ∀ (l : List Thread) (i : Nat), (∀ th ∈ l, TurnOk th) → TurnOk (getThread l i)
  | [], _, _ => by
    refine ⟨List.Pairwise.nil, fun _ h => by simp [getThread] at h, fun e => by simp [getThread] at e,
      fun e => by simp [getThread, answerIn] at e, by simp [getThread, FrontOk]⟩
  | t :: _, 0, h => h t List.mem_cons_self
  | _ :: ts, n + 1, h => getThread_turnOk ts n (fun th hm => h th (List.mem_cons_of_mem _ hm))

theorem releaseIn_front (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame),
    answerIn (releaseIn blocks caps serial attrs now i ps k).2 = answerIn k ∧
      (FrontOk k → FrontOk (releaseIn blocks caps serial attrs now i ps k).2)
  | ps, [] => ⟨rfl, id⟩
  | ps, .answer :: k => ⟨rfl, id⟩
  | ps, .release held w :: k => by
    simp only [releaseIn]
    split
    · exact ⟨rfl, id⟩
    · have ih := releaseIn_front blocks caps serial attrs now i ps k
      exact ⟨ih.1, ih.2⟩
  | ps, .stmts b :: k => by
    have ih := releaseIn_front blocks caps serial attrs now i ps k
    refine ⟨ih.1, fun h => ⟨h.1, fun e => h.2.1 (ih.1 ▸ e), ih.2 h.2.2⟩⟩
  | ps, .submit :: k => by
    have ih := releaseIn_front blocks caps serial attrs now i ps k
    refine ⟨ih.1, fun h => ⟨ih.1 ▸ h.1, ih.2 h.2⟩⟩

theorem growPart_front : ∀ (k : List Frame) (i u : Nat),
    answerIn (growPart k i u) = answerIn k ∧ (FrontOk k → FrontOk (growPart k i u))
  | [], _, _ => ⟨rfl, id⟩
  | .answer :: k, _, _ => ⟨rfl, id⟩
  | .release held w :: k, i, u => by
    simp only [growPart]
    split
    · exact ⟨rfl, id⟩
    · exact growPart_front k i u
  | .stmts b :: k, i, u => by
    have ih := growPart_front k i u
    exact ⟨ih.1, fun h => ⟨h.1, fun e => h.2.1 (ih.1 ▸ e), ih.2 h.2.2⟩⟩
  | .submit :: k, i, u => by
    have ih := growPart_front k i u
    exact ⟨ih.1, fun h => ⟨ih.1 ▸ h.1, ih.2 h.2⟩⟩

theorem growPartReq_front : ∀ (k : List Frame) (i u r : Nat),
    answerIn (growPartReq k i u r) = answerIn k ∧ (FrontOk k → FrontOk (growPartReq k i u r))
  | [], _, _, _ => ⟨rfl, id⟩
  | .answer :: k, _, _, _ => ⟨rfl, id⟩
  | .release held w :: k, i, u, r => by
    simp only [growPartReq]
    split
    · exact ⟨rfl, id⟩
    · exact growPartReq_front k i u r
  | .stmts b :: k, i, u, r => by
    have ih := growPartReq_front k i u r
    exact ⟨ih.1, fun h => ⟨h.1, fun e => h.2.1 (ih.1 ▸ e), ih.2 h.2.2⟩⟩
  | .submit :: k, i, u, r => by
    have ih := growPartReq_front k i u r
    exact ⟨ih.1, fun h => ⟨ih.1 ▸ h.1, ih.2 h.2⟩⟩

theorem advancePart_front : ∀ (k : List Frame) (i u : Nat),
    answerIn (advancePart k i u) = answerIn k ∧ (FrontOk k → FrontOk (advancePart k i u))
  | [], _, _ => ⟨rfl, id⟩
  | .answer :: k, _, _ => ⟨rfl, id⟩
  | .release held w :: k, i, u => by
    simp only [advancePart]
    split
    · exact ⟨rfl, id⟩
    · exact advancePart_front k i u
  | .stmts b :: k, i, u => by
    have ih := advancePart_front k i u
    exact ⟨ih.1, fun h => ⟨h.1, fun e => h.2.1 (ih.1 ▸ e), ih.2 h.2.2⟩⟩
  | .submit :: k, i, u => by
    have ih := advancePart_front k i u
    exact ⟨ih.1, fun h => ⟨ih.1 ▸ h.1, ih.2 h.2⟩⟩

/-! ### Waiting holds -/

theorem WaitersOk.get {ps : List PoolState} (h : WaitersOk ps) : ∀ i, ∀ w ∈ (getPool ps i).queue, BodyOk w.body := by
  induction ps with
  | nil => intro i w hw; simp [getPool] at hw
  | cons q ps ih =>
    intro i
    cases i with
    | zero => exact h q (by simp)
    | succ i => exact ih (fun x hx => h x (List.mem_cons_of_mem _ hx)) i

theorem WaitersOk.set {ps : List PoolState} (h : WaitersOk ps) (i : Nat) {v : PoolState}
    (hv : ∀ w ∈ v.queue, BodyOk w.body) : WaitersOk (setPool ps i v) := by
  intro x hx
  rcases mem_setPool ps i v x hx with hx | hx
  · exact h x hx
  · rw [hx]; exact hv

theorem WaitersOk.of_queues {ps ps' : List PoolState}
    (h : ps'.map PoolState.queue = ps.map PoolState.queue) (hp : WaitersOk ps) : WaitersOk ps' := by
  intro q hq
  have hm : q.queue ∈ ps.map PoolState.queue := h ▸ List.mem_map.2 ⟨q, hq, rfl⟩
  obtain ⟨q', hq', e⟩ := List.mem_map.1 hm
  rw [← e]
  exact hp q' hq'

theorem getWaiter_bodyOk : ∀ (ws : List Waiter), (∀ w ∈ ws, BodyOk w.body) → ∀ j, BodyOk (getWaiter ws j).body
  | [], _, _ => ⟨allBlock_nil _, allBlock_nil _⟩
  | w :: _, h, 0 => h w (by simp)
  | _ :: ws, h, j + 1 => getWaiter_bodyOk ws (fun x hx => h x (List.mem_cons_of_mem _ hx)) j

theorem removeWaiter_bodyOk : ∀ (ws : List Waiter), (∀ w ∈ ws, BodyOk w.body) → ∀ j,
    ∀ w ∈ removeWaiter ws j, BodyOk w.body
  | [], _, _ => by intro x hx; simp [removeWaiter] at hx
  | _ :: ws, h, 0 => fun x hx => h x (List.mem_cons_of_mem _ hx)
  | w :: ws, h, j + 1 => by
    intro x hx
    simp only [removeWaiter, List.mem_cons] at hx
    rcases hx with hx | hx
    · rw [hx]; exact h w (by simp)
    · exact removeWaiter_bodyOk ws (fun y hy => h y (List.mem_cons_of_mem _ hy)) j x hx

theorem appendWaiter_bodyOk {w : Waiter} (hw : BodyOk w.body) : ∀ (ws : List Waiter), (∀ x ∈ ws, BodyOk x.body) →
    ∀ x ∈ appendWaiter ws w, BodyOk x.body
  | [], _ => by
    intro x hx
    simp only [appendWaiter, List.mem_cons] at hx
    rcases hx with hx | hx
    · rw [hx]; exact hw
    · simp at hx
  | y :: ws, h => by
    intro x hx
    simp only [appendWaiter, List.mem_cons] at hx
    rcases hx with hx | hx
    · rw [hx]; exact h y (by simp)
    · exact appendWaiter_bodyOk hw ws (fun z hz => h z (List.mem_cons_of_mem _ hz)) x hx

theorem insertByCreation_bodyOk {w : Waiter} (hw : BodyOk w.body) (traceNos : List Nat) (threads : List Thread)
    (now created serial : Nat) : ∀ (ws : List Waiter), (∀ x ∈ ws, BodyOk x.body) →
    ∀ x ∈ insertByCreation traceNos threads now created serial w ws, BodyOk x.body
  | [], _ => by
    intro x hx
    simp only [insertByCreation, List.mem_cons] at hx
    rcases hx with hx | hx
    · rw [hx]; exact hw
    · simp at hx
  | y :: ws, h => by
    simp only [insertByCreation]
    split
    · intro x hx
      simp only [List.mem_cons] at hx
      rcases hx with hx | hx
      · rw [hx]; exact hw
      · exact h x (List.mem_cons.2 hx)
    · intro x hx
      simp only [List.mem_cons] at hx
      rcases hx with hx | hx
      · rw [hx]; exact h y (by simp)
      · exact insertByCreation_bodyOk hw traceNos threads now created serial ws
          (fun z hz => h z (List.mem_cons_of_mem _ hz)) x hx

/-! ### The machine -/

theorem ReqInv.put {m : Machine} (hm : ReqInv m) {th : Thread} (ht : TurnOk th) : ReqInv (m.put th) := by
  refine ⟨fun x hx => ?_, hm.2⟩
  rcases mem_setThread _ _ _ _ hx with hx | rfl
  · exact hm.1 x hx
  · exact ht

theorem ReqInv.get {m : Machine} (hm : ReqInv m) (t : Nat) : TurnOk (getThread m.threads t) :=
  getThread_turnOk _ _ hm.1

theorem Machine.addJob_pools (p : Program) (m : Machine) (s t w : Nat) : (m.addJob p s t w).pools = m.pools := by
  simp only [Machine.addJob]
  split <;> (try split) <;> rfl

theorem ReqInv.addJob {m : Machine} (hm : ReqInv m) (p : Program) (s t w : Nat) : ReqInv (m.addJob p s t w) := by
  refine ⟨?_, ?_⟩
  · rw [Machine.addJob_threads]; exact hm.1
  · rw [Machine.addJob_pools]; exact hm.2

theorem ReqInv.leaseTimer {m : Machine} (hm : ReqInv m) (s : Nat) (d : Option Nat) : ReqInv (m.leaseTimer s d) := by
  cases d
  · exact hm
  · exact hm

/-! ### A thread's run -/

theorem exec_req (p : Program) (hp : TurnsOutside p) : ∀ (f : Nat) (m : Machine) (th : Thread), ReqInv m → TurnOk th →
    ReqInv (exec p f m th)
  | 0, m, th, hm, ht => by
    simp only [exec]
    have h := hm.put ht
    exact ⟨h.1, h.2⟩
  | f + 1, m, th, hm, ht => by
    simp only [exec]
    split
    · next heq =>
      refine ReqInv.put ?_ ?_
      · exact ⟨hm.1, WaitersOk.of_queues (endLeases_queues ..) hm.2⟩
      · exact ht.of rfl rfl rfl rfl (by show FrontOk th.k; rw [heq]; trivial)
    · next k heq =>
      have hf := ht.front
      rw [heq] at hf
      have hb := ht.below
      rw [heq] at hb
      refine exec_req p hp f _ _ hm ?_
      exact ⟨ht.distinct, ht.le, fun _ => hf.1, fun e => hb e, hf.2⟩
    · next k heq =>
      have hf := ht.front
      rw [heq] at hf
      have hb := ht.below
      rw [heq] at hb
      split
      · next hin =>
        refine exec_req p hp f _ _ hm ?_
        refine ⟨?_, ?_, fun e => ?_, fun e => ?_, hf.2⟩
        · exact List.Pairwise.cons (fun a ha => hb rfl a ha) ht.distinct
        · intro a ha
          simp only [List.mem_cons] at ha
          rcases ha with rfl | ha
          · exact Nat.le_refl _
          · exact ht.le a ha
        · cases e
        · change answerIn k = true at e
          rw [hf.1] at e
          cases e
      · next hin =>
        refine exec_req p hp f _ _ hm ?_
        refine ⟨ht.distinct, ht.le, fun e => absurd e hin, fun e => ?_, hf.2⟩
        change answerIn k = true at e
        rw [hf.1] at e
        cases e
    · next held w k heq =>
      have hf := ht.front
      rw [heq] at hf
      have hk : answerIn k = answerIn th.k := by rw [heq]; rfl
      split
      · refine exec_req p hp f _ _ ?_ ?_
        · exact ⟨hm.1, WaitersOk.of_queues (giveBack_queues ..) hm.2⟩
        · exact ht.of rfl rfl rfl hk hf
      · refine exec_req p hp f _ _ (ReqInv.leaseTimer ?_ _ _) ?_
        · exact ⟨hm.1, WaitersOk.of_queues (giveBack_queues ..) hm.2⟩
        · exact ht.of rfl rfl rfl hk hf
    · next k heq =>
      have hf := ht.front
      rw [heq] at hf
      refine exec_req p hp f _ _ hm ?_
      exact ht.of rfl rfl rfl (by rw [heq]; rfl) hf.2.2
    · next st rest k heq =>
      have hf := ht.front
      rw [heq] at hf
      have hak : answerIn k = answerIn th.k := by rw [heq]; rfl
      -- the frame of the statements after this one
      have hnext : FrontOk (.stmts rest :: k) :=
        ⟨(allBlock_cons hf.1).2, fun e => (allBlock_cons (hf.2.1 e)).2, hf.2.2⟩
      cases st with
      | set i e =>
        try dsimp only
        refine exec_req p hp f _ _ hm ?_
        exact ht.of rfl rfl rfl hak hnext
      | observe j e =>
        try dsimp only
        refine exec_req p hp f _ _ hm ?_
        exact ht.of rfl rfl rfl hak hnext
      | stop =>
        try dsimp only
        refine ReqInv.put ?_ ?_
        · exact ⟨hm.1, WaitersOk.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm.2⟩
        · exact ht.ended rfl rfl rfl rfl
      | release i =>
        try dsimp only
        split
        · have hr := releaseIn_front p.blocks p.caps th.serial th.attrs m.now i m.pools k
          refine exec_req p hp f _ _ ?_ ?_
          · exact ⟨hm.1, WaitersOk.of_queues (releaseIn_queues ..) hm.2⟩
          · exact ht.of rfl rfl rfl (hr.1.trans hak) ⟨hnext.1, fun e => hnext.2.1 (hr.1 ▸ e), hr.2 hf.2.2⟩
        · refine exec_req p hp f _ _ ?_ ?_
          · exact ⟨hm.1, WaitersOk.of_queues (endLeasesOn_queues ..) hm.2⟩
          · exact ht.of rfl rfl rfl hak hnext
      | branch t yes no =>
        try dsimp only
        refine exec_req p hp f _ _ hm ?_
        refine ht.of rfl rfl rfl hak ⟨?_, fun e => ?_, hnext⟩
        · split
          · exact (allBlock_branch hf.1).1
          · exact (allBlock_branch hf.1).2
        · split
          · exact (allBlock_branch (hf.2.1 e)).1
          · exact (allBlock_branch (hf.2.1 e)).2
      | «while» t body =>
        try dsimp only
        split
        · refine exec_req p hp f _ _ hm ?_
          exact ht.of rfl rfl rfl hak ⟨allBlock_while hf.1, fun e => allBlock_while (hf.2.1 e), hf⟩
        · refine exec_req p hp f _ _ hm ?_
          exact ht.of rfl rfl rfl hak hnext
      | loop body =>
        try dsimp only
        refine exec_req p hp f _ _ hm ?_
        exact ht.of rfl rfl rfl hak ⟨allBlock_loop hf.1, fun e => allBlock_loop (hf.2.1 e), hf⟩
      | turn =>
        try dsimp only
        split
        · have h := hm.put ht
          exact ⟨h.1, h.2⟩
        · -- outside any turn: no answer is pending
          have hno : answerIn k = false := by
            cases e : answerIn k
            · rfl
            · exact (TurnFree.not_turn (hf.2.1 e)).elim
          have hb := hp.blocks
          refine exec_req p hp f _ _ hm ?_
          refine ⟨ht.distinct, fun a ha => Nat.le_succ_of_le (ht.le a ha),
            fun _ => rfl, fun _ a ha => Nat.lt_succ_of_le (ht.le a ha), ?_⟩
          exact ⟨hb.2.1, fun _ => hp.turnBlock, rfl, hb.2.2.2, fun _ => hp.server, hno, hnext⟩
      | run s w =>
        try dsimp only
        split
        · refine exec_req p hp f _ _ hm ?_
          exact ht.of rfl rfl rfl hak hnext
        · refine ReqInv.put (hm.addJob p _ _ _) ?_
          exact ht.of rfl rfl rfl hak hnext
      | step s dec g w =>
        try dsimp only
        split
        · refine exec_req p hp f _ _ hm ?_
          exact ht.of rfl rfl rfl hak hnext
        · refine ReqInv.put ?_ ?_
          · exact ⟨hm.1, hm.2⟩
          · exact ht.of rfl rfl rfl hak hnext
      | grow i e =>
        try dsimp only
        have hg := fun u r => growPartReq_front k i u r
        have hnext' : ∀ u r, FrontOk (.stmts rest :: growPartReq k i u r) := fun u r =>
          ⟨hnext.1, fun e => hnext.2.1 ((hg u r).1 ▸ e), (hg u r).2 hnext.2.2⟩
        have hak' : ∀ u r, answerIn (.stmts rest :: growPartReq k i u r) = answerIn th.k := fun u r => by
          rw [← hak]; exact (hg u r).1
        split
        · refine ReqInv.put hm ?_
          exact ht.of rfl rfl rfl rfl ht.front
        · split
          · exact exec_req p hp f _ _ hm (ht.of rfl rfl rfl (hak' _ _) (hnext' _ _))
          · split
            · refine exec_req p hp f _ _ ?_ (ht.of rfl rfl rfl (hak' _ _) (hnext' _ _))
              exact ⟨hm.1, WaitersOk.of_queues (setPool_queues _ _ _ rfl) hm.2⟩
            · have h := ReqInv.put (th := { th with k := .stmts rest :: k }) hm (ht.of rfl rfl rfl hak hnext)
              exact ⟨h.1, h.2⟩
      | hold on reuse cache body =>
        try dsimp only
        split
        · refine ReqInv.put ?_ ?_
          · exact ⟨hm.1, WaitersOk.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm.2⟩
          · exact ht.ended rfl rfl rfl rfl
        · split
          · refine ReqInv.put hm ?_
            exact ht.of rfl rfl rfl hak hnext
          · have hbody : BodyOk body := ⟨hf.1.hold_body, allBlock_hold hf.1⟩
            refine ReqInv.put ?_ ?_
            · refine ⟨hm.1, hm.2.set _ ?_⟩
              split
              · exact appendWaiter_bodyOk hbody _ (hm.2.get _)
              · exact insertByCreation_bodyOk hbody _ _ _ _ _ _ (hm.2.get _)
            · exact ht.of rfl rfl rfl hak hnext

/-! ### Settling an instant -/

theorem runReady_req (p : Program) (hp : TurnsOutside p) (f : Nat) (m : Machine) : ReqInv m → ReqInv (runReady p f m) := by
  fun_induction runReady p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (exec_req p hp _ _ _ (by exact hm) (hm.get _))

theorem Machine.admitWaiter_req (p : Program) (m : Machine) (st : List Nat) (i j : Nat) (hm : ReqInv m) :
    ReqInv (m.admitWaiter p st i j) := by
  have hq := hm.2.get i
  have hw := getWaiter_bodyOk _ hq j
  have ht := hm.get (getWaiter (getPool m.pools i).queue j).thread
  simp only [Machine.admitWaiter]
  refine ReqInv.put ?_ ?_
  · exact ⟨hm.1, WaitersOk.of_queues (admitOn_queues ..) (hm.2.set i (v := { getPool m.pools i with
      queue := removeWaiter (getPool m.pools i).queue j }) (removeWaiter_bodyOk _ hq j))⟩
  · exact ht.of rfl rfl rfl rfl ⟨hw.2, fun _ => hw.1, ht.front⟩

theorem retryQueue_req (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    ReqInv m → ReqInv (retryQueue p f m i b).1
  | 0, m, i, b, hm => hm
  | f + 1, m, i, b, hm => by
    simp only [retryQueue]
    split
    · exact hm
    · next _ hd tl _ =>
      split
      · have h := Machine.admitWaiter_req p m [] i (select p m i (hd :: tl)) hm
        exact retryQueue_req p f _ i true (by exact h)
      · exact hm

theorem Machine.grownReq_req (p : Program) (m : Machine) (t i want req : Nat) (h : Held) (hm : ReqInv m) :
    ReqInv (m.grownReq p t i want req h) := by
  have ht := hm.get t
  have hg := growPartReq_front (getThread m.threads t).k i want req
  simp only [Machine.grownReq]
  refine ReqInv.put ?_ ?_
  · exact ⟨hm.1, WaitersOk.of_queues (setPool_queues _ _ _ rfl) hm.2⟩
  · exact ht.of rfl rfl rfl hg.1 (hg.2 ht.front)

theorem retryGrowers_req (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    ReqInv m → ReqInv (retryGrowers p f m i b).1
  | 0, m, i, b, hm => hm
  | f + 1, m, i, b, hm => by
    simp only [retryGrowers]
    split
    · exact hm
    · next x hx =>
      split
      · exact hm
      · next hh hpart =>
        split
        · have h := Machine.grownReq_req p m x.thread i (roundUp (getAt p.blocks i) x.req) x.req hh hm
          exact retryGrowers_req p f _ i true (by exact h)
        · exact hm

theorem retryPool_req (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    ReqInv m → ReqInv (retryPool p f m i b).1 := by
  intro hm
  simp only [retryPool]
  split
  · exact retryQueue_req p f _ _ _ (retryGrowers_req p f _ _ _ hm)
  · exact retryGrowers_req p f _ _ _ hm

theorem retryPools_req (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    ReqInv m → ReqInv (retryPools p f n i m b).1 := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPool_req p f _ _ _ hm)

theorem settle_req (p : Program) (hp : TurnsOutside p) (f : Nat) (m : Machine) : ReqInv m → ReqInv (settle p f m) := by
  fun_induction settle p f m <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPools_req p _ _ _ _ _ (runReady_req p hp _ _ hm))
  · exact retryPools_req p _ _ _ _ _ (runReady_req p hp _ _ hm)

/-! ### An engine's iteration (no preemption) -/

theorem Machine.grown_req (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hm : ReqInv m) :
    ReqInv (m.grown p t i want h) := by
  have ht := hm.get t
  have hg := growPart_front (getThread m.threads t).k i want
  simp only [Machine.grown]
  refine ReqInv.put ?_ ?_
  · exact ⟨hm.1, WaitersOk.of_queues (setPool_queues _ _ _ rfl) hm.2⟩
  · exact ht.of rfl rfl rfl hg.1 (hg.2 ht.front)

theorem Machine.served_req (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat) (hm : ReqInv m) :
    ReqInv (m.served s b r n).1 := hm

theorem Machine.serveOne_req (p : Program) (hpre : ∀ i, getAt p.preemptModes i = 0) (s : Nat) (m : Machine) (b : Batch)
    (r : Resident) (n : Nat) (hm : ReqInv m) : ReqInv (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact Machine.served_req m s b r n hm
    | exact Machine.served_req _ s b r n (Machine.grown_req p m _ _ _ _ hm)
    | exact hm
    | exact absurd (hpre _) (by assumption)

theorem serveIn_req (p : Program) (hpre : ∀ i, getAt p.preemptModes i = 0) (s chunk : Nat) (q : Option Expr) :
    ∀ (ts : List Nat) (m : Machine) (b : Batch), ReqInv m → ReqInv (serveIn p s chunk q ts m b).1 := by
  intro ts
  induction ts with
  | nil => intro m b hm; exact hm
  | cons t ts ih =>
    intro m b hm
    simp only [serveIn]
    repeat' split
    all_goals first
      | exact hm
      | exact ih _ _ hm
      | exact Machine.serveOne_req p hpre _ _ _ _ _ hm
      | exact ih _ _ (Machine.serveOne_req p hpre _ _ _ _ _ hm)

theorem admitOne_req (p : Program) (hp : TurnsOutside p) (hpre : ∀ i, getAt p.preemptModes i = 0)
    (f s chunk i j : Nat) (q : Option Expr) (m : Machine) (b : Batch) (hm : ReqInv m) :
    ReqInv (admitOne p f s chunk i j q m b).1 := by
  have h1 := Machine.admitWaiter_req p m (admissionStage chunk b.budget) i j hm
  have h2 := exec_req p hp f _ _ h1 (h1.get (getWaiter (getPool m.pools i).queue j).thread)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact Machine.serveOne_req p hpre _ _ _ _ _ h2

theorem admitWaiting_req (p : Program) (hp : TurnsOutside p) (hpre : ∀ i, getAt p.preemptModes i = 0)
    (s c : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine) (b : Batch) :
    ReqInv m → ReqInv (admitWaiting p s c q g f m b).1 := by
  fun_induction admitWaiting p s c q g f m b <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (admitOne_req p hp hpre _ _ _ _ _ _ _ _ hm))

theorem startIteration_req (p : Program) (hp : TurnsOutside p) (hpre : ∀ i, getAt p.preemptModes i = 0)
    (f s : Nat) (eng : Engine) (m : Machine) (hm : ReqInv m) : ReqInv (startIteration p f s eng m) := by
  have hs : ∀ (running : List Nat) (c : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident),
      ReqInv (serveOrdered p s m running c q b keys rs).1 := by
    intro running c q b keys rs
    cases keys <;> simp only [serveOrdered] <;> exact serveIn_req p hpre s _ _ _ m b hm
  simp only [startIteration]
  repeat' split
  all_goals first
    | exact admitWaiting_req p hp hpre _ _ _ _ _ _ _ (hs _ _ _ _ _ _)
    | exact ⟨(admitWaiting_req p hp hpre _ _ _ _ _ _ _ (hs _ _ _ _ _ _)).1,
        (admitWaiting_req p hp hpre _ _ _ _ _ _ _ (hs _ _ _ _ _ _)).2⟩

theorem startPass_req (p : Program) (hp : TurnsOutside p) (hpre : ∀ i, getAt p.preemptModes i = 0) (f : Nat)
    (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    ReqInv m → ReqInv (startPass p f ss s tried m a).1 := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_req p hp _ _ (startIteration_req p hp hpre _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_req p hp _ _ (startIteration_req p hp hpre _ _ _ _ hm)))

theorem endOfInstant_req (p : Program) (hp : TurnsOutside p) (hpre : ∀ i, getAt p.preemptModes i = 0) (f : Nat)
    (m : Machine) (hm : ReqInv m) : ReqInv (endOfInstant p f m) := by
  have hse : ∀ n tried m', ReqInv m' → ReqInv (startEngines p f n tried m') := by
    intro n tried m'
    fun_induction startEngines p f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPass_req p hp hpre _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPass_req p hp hpre _ _ _ _ _ _ hm'))
  simp only [endOfInstant]
  split
  · exact hm
  · exact hse _ _ _ hm

/-! ### Events, and the run -/

theorem Machine.advanceHolds_req : ∀ (rs : List Resident) (m : Machine), ReqInv m → ReqInv (m.advanceHolds rs)
  | [], m, hm => hm
  | r :: rs, m, hm => by
    simp only [Machine.advanceHolds]
    split
    all_goals first
      | exact Machine.advanceHolds_req rs m hm
      | (refine Machine.advanceHolds_req rs _ (hm.put ?_)
         have ht := hm.get r.thread
         exact ht.of rfl rfl rfl (advancePart_front _ _ _).1 ((advancePart_front _ _ _).2 ht.front))

theorem fire_req (p : Program) (m : Machine) (w : Wake) (hm : ReqInv m) : ReqInv (fire p m w) := by
  cases w with
  | resume t => exact hm
  | arrival a =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact hm
    · have ht := hm.get t
      refine ReqInv.put ?_ ?_
      · exact ⟨hm.1, WaitersOk.of_queues (endLease_queues ..) hm.2⟩
      · exact ht.of rfl rfl rfl rfl ht.front
  | fifoDone s' t =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | iterationEnd s' =>
    simp only [fire]
    have ha := Machine.advanceHolds_req (getEngineState m.engines s').residents m hm
    exact ⟨ha.1, ha.2⟩

theorem loop_req (p : Program) (hp : TurnsOutside p) (hpre : ∀ i, getAt p.preemptModes i = 0) (f : Nat) (m : Machine) :
    ReqInv m → ReqInv (loop p f m) := by
  fun_induction loop p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstant_req p hp hpre _ _ (settle_req p hp _ _ (fire_req p _ _ hm)))

theorem arrivals_req (p : Program) (hp : TurnsOutside p) : ∀ (n serial : Nat), ∀ th ∈ arrivals p n serial, TurnOk th
  | 0, _ => fun _ h => by simp [arrivals] at h
  | n + 1, serial => by
    intro th h
    simp only [arrivals, List.mem_cons] at h
    rcases h with h | h
    · rw [h]
      have hb := hp.blocks
      exact ⟨List.Pairwise.nil, fun _ h => by simp [arrive] at h, fun e => by simp [arrive] at e,
        fun e => by simp [arrive, answerIn] at e,
        ⟨hb.1, fun e => by simp [answerIn] at e, hb.2.2.1, fun e => by simp [answerIn] at e, trivial⟩⟩
    · exact arrivals_req p hp n (serial + 1) th h

theorem emptyPools_req : ∀ (cs : List Nat), WaitersOk (emptyPools cs)
  | [] => fun _ h => by simp [emptyPools] at h
  | c :: cs => by
    intro q h
    simp only [emptyPools, List.mem_cons] at h
    rcases h with h | h
    · rw [h]; intro w hw; simp at hw
    · exact emptyPools_req cs q h

theorem initial_req (p : Program) (hp : TurnsOutside p) : ReqInv (initial p) := by
  have ht : (initial p).threads = arrivals p p.sessions 0 := by
    unfold initial; dsimp only; split <;> rfl
  have hq : (initial p).pools = emptyPools p.caps := by
    unfold initial; dsimp only; split <;> rfl
  exact ⟨ht ▸ arrivals_req p hp _ _, hq ▸ emptyPools_req _⟩

theorem runProgram_req (p : Program) (fuel : Nat) (hp : TurnsOutside p) (hpre : ∀ i, getAt p.preemptModes i = 0) :
    ReqInv (runProgram p fuel) := by
  unfold runProgram
  exact loop_req p hp hpre _ _ (endOfInstant_req p hp hpre _ _ (settle_req p hp _ _ (initial_req p hp)))

/-! ### Request conservation -/

/-- Every pool's preemption mode is `none` (0): no engine ever preempts a resident. -/
def NoPreemption (p : Program) : Prop := ∀ i, getAt p.preemptModes i = 0

/-- Every entry of a list is 0 (checked on a program's value by `decide`). -/
def natsZero : List Nat → Bool
  | [] => true
  | x :: xs => x == 0 && natsZero xs

theorem natsZero_getAt : ∀ (l : List Nat), natsZero l = true → ∀ i, getAt l i = 0
  | [], _, i => by cases i <;> rfl
  | x :: xs, h, 0 => by
    simp only [natsZero, Bool.and_eq_true, beq_iff_eq] at h
    exact h.1
  | x :: xs, h, i + 1 => by
    simp only [natsZero, Bool.and_eq_true] at h
    exact natsZero_getAt xs h.2 i

/-- `NoPreemption` checked on the program's value. -/
theorem NoPreemption.of_check (p : Program) (h : natsZero p.preemptModes = true) : NoPreemption p :=
  natsZero_getAt _ h

/-- A turn waiting (its hold in a pool's queue) and running (its thread an engine's resident) at once, or
either twice: never, at the end of every run of a program with `DistinctProgram` (and, `Placed` being kept
by every function of the machine, at every point of it). -/
theorem runProgram_waiting_running (p : Program) (fuel : Nat) (hp : DistinctProgram p) (t : Nat) :
    occPools t (runProgram p fuel).pools + occEngines t (runProgram p fuel).engines ≤ 1 := by
  have h := (runProgram_placed p fuel hp).2 t
  simp only [Machine.placed] at h
  omega

/-- Request conservation (issue 14, result 6), for every run of every program with `DistinctProgram` (no
renewal gap beside a trace), `TurnsOutside` (no `turn` in the turn block, the server or a hold's body) and
`NoPreemption`, at any fuel: every session's thread is in at most one place (ready, a timer, a fifo
stage's queue, a pool's queue, an engine's residents: waiting or running, never both, never twice); a
session's open turn (`inTurn`, numbered `turns`) is not answered; and no turn is answered twice. (A
rejected turn is the last turn of an ended session, with no answer: see the module documentation.)
`runProgram_requests` (`Serq.KernelRequestsPreempt`) is the same without `NoPreemption`. -/
theorem runProgram_requests_noPreemption (p : Program) (fuel : Nat) (hp : DistinctProgram p) (ht : TurnsOutside p)
    (hpre : NoPreemption p) :
    (∀ t, (runProgram p fuel).placed p.gap t ≤ 1) ∧
    ∀ th ∈ (runProgram p fuel).threads,
      (th.inTurn = true → ∀ a ∈ th.answers, a.turn ≠ th.turns) ∧ th.answers.Pairwise (fun a b => a.turn ≠ b.turn) := by
  refine ⟨(runProgram_placed p fuel hp).2, fun th hth => ?_⟩
  have h := (runProgram_req p fuel ht hpre).1 th hth
  refine ⟨fun hin a ha => Nat.ne_of_lt (h.below (h.pending hin) a ha), ?_⟩
  exact h.distinct.imp (fun e => Nat.ne_of_gt e)

end Serq.Kernel
