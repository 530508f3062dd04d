module

public import Serq.KernelFullRun
public import Serq.KernelTiling

/-! # Statement provenance: every statement a thread runs is one of the program's

A thread of `Serq.Kernel`'s machine runs the statements of its continuation (`Thread.k`, frames
innermost first); a hold waiting in a pool's queue (`Waiter`) carries the body its thread runs once
admitted, and a hold's `Frame.release` carries the hold as it waited, which a preemption puts back
in a queue (`Machine.preempt`). This module proves that all of them are the program's own
statements (`ProgStmt p`: a statement of the `init`, `turn`, `session` or `server` block, or of the
body of a branch, a `while`, a `loop` or a hold that is one), at every point of every run
(`Inv`, kept by every function of the machine: `exec_inv`, `settle_inv`, `Machine.preempt_inv`, `serveIn_inv`,
`admitWaiting_inv`, …; through the run in `Serq.KernelTiledRun`, `runProgram_provenance`). Besides the program's
statements a continuation holds only the machine's bookkeeping frames: `Frame.submit`,
`Frame.answer` and `Frame.release held w` (the parts `held` a hold took, and the hold `w` itself,
whose body is again the program's).

Every resident of an engine stage `j` was put there by one of the program's `run` statements on `j`
(`Stmt.step j decode grow w`): it carries the statement's `decode` and `grow` (`ResOk`); `exec` set its
remainder to the work `w` evaluated then, with nothing scheduled (`ResOk.fresh`), and afterwards only an
iteration's serving (`setSched`) and its end (`applyTokens`: the remainder less the tokens given) change
them. So, for RAD's optimal tiling (issue 14, result 4): when stage `s`'s engine has the
constant granule `g > 0` and every prefill run statement on `s` has work `g * e`
(`TiledProgram p s g`), every prefill resident's remainder and scheduled tokens are whole granules at
every point of the run, and every record of `s` has `prefilled % g = 0`
(`Serq.KernelTiledRun`, `runProgram_tiled_prefills`). This module has the definitions and the invariant
through a thread's run and an iteration's serving and admissions; `Serq.KernelTiledRun` carries it
through the event loop.
-/
@[expose] public section

namespace Serq.Kernel

/-! ### The program's statements -/

/-- `st` is one of the program's statements: in one of its blocks, or in the body of a branch, a
`while`, a `loop` or a hold that is. -/
inductive ProgStmt (p : Program) : Stmt → Prop
  | init {st : Stmt} : st ∈ p.init → ProgStmt p st
  | turnBlock {st : Stmt} : st ∈ p.turnBlock → ProgStmt p st
  | session {st : Stmt} : st ∈ p.session → ProgStmt p st
  | server {st : Stmt} : st ∈ p.server → ProgStmt p st
  | branchYes {t : Expr} {yes no : List Stmt} {st : Stmt} : ProgStmt p (.branch t yes no) → st ∈ yes → ProgStmt p st
  | branchNo {t : Expr} {yes no : List Stmt} {st : Stmt} : ProgStmt p (.branch t yes no) → st ∈ no → ProgStmt p st
  | whileBody {t : Expr} {body : List Stmt} {st : Stmt} : ProgStmt p (.while t body) → st ∈ body → ProgStmt p st
  | loopBody {body : List Stmt} {st : Stmt} : ProgStmt p (.loop body) → st ∈ body → ProgStmt p st
  | holdBody {on : List HoldOn} {reuse cache : Option Expr} {body : List Stmt} {st : Stmt} :
      ProgStmt p (.hold on reuse cache body) → st ∈ body → ProgStmt p st

/-- Every statement of the list is one of the program's. -/
def ProgBlock (p : Program) (b : List Stmt) : Prop := ∀ st ∈ b, ProgStmt p st

/-- A frame of a continuation: statements of the program, or the machine's bookkeeping (a turn's
submission and answer, a hold's release, whose hold's body is the program's). -/
def FrameOk (p : Program) : Frame → Prop
  | .stmts b => ProgBlock p b
  | .submit => True
  | .answer => True
  | .release _ w => ProgBlock p w.body

def KOk (p : Program) (k : List Frame) : Prop := ∀ fr ∈ k, FrameOk p fr

def QOk (p : Program) (ws : List Waiter) : Prop := ∀ w ∈ ws, ProgBlock p w.body

def ThreadsOk (p : Program) (ts : List Thread) : Prop := ∀ th ∈ ts, KOk p th.k

def PoolsOk (p : Program) (ps : List PoolState) : Prop := ∀ q ∈ ps, QOk p q.queue

/-- RAD's hypotheses on stage `s` (issue 14, result 4): a granule `g > 0`, the engine's `granule` the
constant `g`, and every prefill run statement of the program on `s` of work `g * e`. -/
structure TiledProgram (p : Program) (s g : Nat) : Prop where
  pos : g ≠ 0
  granule : ∀ e, getService p.stages s = .step e → (getEngine p.engines e).granule = .num g
  works : ∀ gr w, ProgStmt p (.step s false gr w) → ∃ e, w = .bin .mul (.num g) e

/-- A resident of stage `j`: its `decode` and `grow` are those of one of the program's run statements
on `j`, and under RAD's hypotheses a prefill's remainder and scheduled tokens are whole granules. -/
def ResOk (p : Program) (j : Nat) (r : Resident) : Prop :=
  (∃ w, ProgStmt p (.step j r.decode r.grow w)) ∧
    ∀ g, TiledProgram p j g → r.decode = false → r.rem % g = 0 ∧ r.sched % g = 0

def EnginesOk (p : Program) (l : List EngineState) : Prop :=
  ∀ j, ∀ r ∈ (getEngineState l j).residents, ResOk p j r

/-- The machine invariant: threads' continuations and waiting holds are the program's, residents
are the program's runs. -/
abbrev Inv (p : Program) (m : Machine) : Prop :=
  ThreadsOk p m.threads ∧ PoolsOk p m.pools ∧ EnginesOk p m.engines

theorem Inv.threads {p : Program} {m : Machine} (h : Inv p m) : ThreadsOk p m.threads := h.1
theorem Inv.pools {p : Program} {m : Machine} (h : Inv p m) : PoolsOk p m.pools := h.2.1
theorem Inv.engines {p : Program} {m : Machine} (h : Inv p m) : EnginesOk p m.engines := h.2.2

/-- An iteration's batch on stage `s` under RAD's hypotheses: it read the granule `g`, and its prefill
tokens are whole granules. -/
def BOk (p : Program) (s : Nat) (b : Batch) : Prop :=
  ∀ g, TiledProgram p s g → b.gran = g ∧ b.prefilled % g = 0

/-- Every record of a stage with RAD's hypotheses has whole granules of prefill tokens. -/
def RecOk (p : Program) (m : Machine) : Prop :=
  ∀ j g, TiledProgram p j g → ∀ r ∈ (getEngineState m.engines j).records, r.prefilled % g = 0

/-! ### Lists -/

theorem ProgStmt.yes {p : Program} {t : Expr} {y n : List Stmt} (h : ProgStmt p (.branch t y n)) : ProgBlock p y :=
  fun _ hx => .branchYes h hx

theorem ProgStmt.no {p : Program} {t : Expr} {y n : List Stmt} (h : ProgStmt p (.branch t y n)) : ProgBlock p n :=
  fun _ hx => .branchNo h hx

theorem KOk.cons {p : Program} {fr : Frame} {k : List Frame} (h1 : FrameOk p fr) (h2 : KOk p k) : KOk p (fr :: k) := by
  intro x hx
  simp only [List.mem_cons] at hx
  rcases hx with hx | hx
  · rw [hx]; exact h1
  · exact h2 x hx

theorem KOk.head {p : Program} {fr : Frame} {k : List Frame} (h : KOk p (fr :: k)) : FrameOk p fr :=
  h fr (by simp)

theorem KOk.tail {p : Program} {fr : Frame} {k : List Frame} (h : KOk p (fr :: k)) : KOk p k :=
  fun x hx => h x (List.mem_cons_of_mem _ hx)

theorem KOk.nil (p : Program) : KOk p [] := fun _ hx => by simp at hx

theorem ProgBlock.cons {p : Program} {st : Stmt} {b : List Stmt} (h : ProgBlock p (st :: b)) :
    ProgStmt p st ∧ ProgBlock p b :=
  ⟨h st (by simp), fun x hx => h x (List.mem_cons_of_mem _ hx)⟩

theorem ProgBlock.nil (p : Program) : ProgBlock p [] := fun _ hx => by simp at hx

theorem ThreadsOk.get {p : Program} {ts : List Thread} (h : ThreadsOk p ts) : ∀ i, KOk p (getThread ts i).k := by
  induction ts with
  | nil => intro i; exact KOk.nil p
  | cons t ts ih =>
    intro i
    cases i with
    | zero => exact h t (by simp)
    | succ i => exact ih (fun x hx => h x (List.mem_cons_of_mem _ hx)) i

theorem ThreadsOk.set {p : Program} {ts : List Thread} (h : ThreadsOk p ts) (i : Nat) {v : Thread} (hv : KOk p v.k) :
    ThreadsOk p (setThread ts i v) := by
  intro x hx
  rcases mem_setThread ts i v x hx with hx | hx
  · exact h x hx
  · rw [hx]; exact hv

theorem PoolsOk.get {p : Program} {ps : List PoolState} (h : PoolsOk p ps) : ∀ i, QOk p (getPool ps i).queue := by
  induction ps with
  | nil => intro i w hw; simp [getPool] at hw
  | cons q ps ih =>
    intro i
    cases i with
    | zero => exact h q (by simp)
    | succ i => exact ih (fun x hx => h x (List.mem_cons_of_mem _ hx)) i

theorem mem_setPool : ∀ (l : List PoolState) (i : Nat) (v x : PoolState), x ∈ setPool l i v → x ∈ l ∨ x = v
  | [], _, _, _, h => by simp [setPool] at h
  | _ :: ts, 0, v, x, h => by
    simp only [setPool, List.mem_cons] at h
    rcases h with h | h
    · exact Or.inr h
    · exact Or.inl (List.mem_cons_of_mem _ h)
  | t :: ts, n + 1, v, x, h => by
    simp only [setPool, List.mem_cons] at h
    rcases h with h | h
    · exact Or.inl (h ▸ List.mem_cons_self)
    · rcases mem_setPool ts n v x h with h | h
      · exact Or.inl (List.mem_cons_of_mem _ h)
      · exact Or.inr h

theorem PoolsOk.set {p : Program} {ps : List PoolState} (h : PoolsOk p ps) (i : Nat) {v : PoolState} (hv : QOk p v.queue) :
    PoolsOk p (setPool ps i v) := by
  intro x hx
  rcases mem_setPool ps i v x hx with hx | hx
  · exact h x hx
  · rw [hx]; exact hv

theorem setPool_queues : ∀ (ps : List PoolState) (i : Nat) (v : PoolState), v.queue = (getPool ps i).queue →
    (setPool ps i v).map PoolState.queue = ps.map PoolState.queue
  | [], _, _, _ => rfl
  | x :: xs, 0, v, h => by
    simp only [setPool, List.map_cons]
    rw [h]
    rfl
  | x :: xs, i + 1, v, h => by
    simp only [setPool, List.map_cons]
    rw [setPool_queues xs i v h]

theorem PoolsOk.of_queues {p : Program} {ps ps' : List PoolState}
    (h : ps'.map PoolState.queue = ps.map PoolState.queue) (hp : PoolsOk p ps) : PoolsOk p ps' := by
  intro q hq
  have hm : q.queue ∈ ps.map PoolState.queue := h ▸ List.mem_map.2 ⟨q, hq, rfl⟩
  obtain ⟨q', hq', e⟩ := List.mem_map.1 hm
  rw [← e]
  exact hp q' hq'

theorem QOk.getWaiter {p : Program} {ws : List Waiter} (h : QOk p ws) : ∀ j, ProgBlock p (getWaiter ws j).body := by
  induction ws with
  | nil => intro j; exact ProgBlock.nil p
  | cons w ws ih =>
    intro j
    cases j with
    | zero => exact h w (by simp)
    | succ j => exact ih (fun x hx => h x (List.mem_cons_of_mem _ hx)) j

theorem QOk.remove {p : Program} : ∀ {ws : List Waiter}, QOk p ws → ∀ j, QOk p (removeWaiter ws j)
  | [], _, _ => by intro x hx; simp [removeWaiter] at hx
  | _ :: ws, h, 0 => fun x hx => h x (List.mem_cons_of_mem _ hx)
  | w :: ws, h, j + 1 => by
    intro x hx
    simp only [removeWaiter, List.mem_cons] at hx
    rcases hx with hx | hx
    · rw [hx]; exact h w (by simp)
    · exact QOk.remove (fun y hy => h y (List.mem_cons_of_mem _ hy)) j x hx

theorem QOk.append {p : Program} {w : Waiter} (hw : ProgBlock p w.body) : ∀ {ws : List Waiter}, QOk p ws →
    QOk p (appendWaiter ws w)
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
    · exact QOk.append hw (fun z hz => h z (List.mem_cons_of_mem _ hz)) x hx

theorem QOk.insert {p : Program} {w : Waiter} (hw : ProgBlock p w.body) (traceNos : List Nat) (threads : List Thread)
    (now created serial : Nat) : ∀ {ws : List Waiter}, QOk p ws →
    QOk p (insertByCreation traceNos threads now created serial w ws)
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
      · exact QOk.insert hw traceNos threads now created serial (fun z hz => h z (List.mem_cons_of_mem _ hz)) x hx

theorem QOk.cons {p : Program} {w : Waiter} {ws : List Waiter} (hw : ProgBlock p w.body) (h : QOk p ws) : QOk p (w :: ws) := by
  intro x hx
  simp only [List.mem_cons] at hx
  rcases hx with hx | hx
  · rw [hx]; exact hw
  · exact h x hx

/-! ### What gives units back keeps the queues -/

theorem giveBack_queues (blocks : List Nat) (serial keep : Nat) : ∀ (ps : List PoolState) (hs : List Held),
    (giveBack blocks serial keep ps hs).map PoolState.queue = ps.map PoolState.queue
  | ps, [] => rfl
  | ps, h :: hs => by
    simp only [giveBack]
    split
    · exact giveBack_queues blocks serial keep ps hs
    · rw [giveBack_queues blocks serial keep _ hs]
      exact setPool_queues _ _ _ rfl

theorem endLease_queues (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now : Nat) (ps : List PoolState)
    (l : Lease) : (endLease blocks caps serial attrs now ps l).map PoolState.queue = ps.map PoolState.queue := by
  simp only [endLease]
  exact giveBack_queues ..

theorem endLeases_queues (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now : Nat) :
    ∀ (ps : List PoolState) (ls : List Lease),
    (endLeases blocks caps serial attrs now ps ls).map PoolState.queue = ps.map PoolState.queue
  | ps, [] => rfl
  | ps, l :: ls => by
    simp only [endLeases]
    rw [endLeases_queues blocks caps serial attrs now _ ls, endLease_queues]

theorem endLeasesOn_queues (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (ls : List Lease),
    (endLeasesOn blocks caps serial attrs now i ps ls).1.map PoolState.queue = ps.map PoolState.queue
  | ps, [] => rfl
  | ps, l :: ls => by
    simp only [endLeasesOn]
    split
    · rw [endLeasesOn_queues blocks caps serial attrs now i _ ls, endLease_queues]
    · exact endLeasesOn_queues blocks caps serial attrs now i ps ls

theorem releaseAll_queues (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now : Nat) :
    ∀ (ps : List PoolState) (k : List Frame),
    (releaseAll blocks caps serial attrs now ps k).map PoolState.queue = ps.map PoolState.queue
  | ps, [] => rfl
  | ps, .release held w :: k => by
    simp only [releaseAll]
    rw [releaseAll_queues blocks caps serial attrs now _ k, giveBack_queues]
  | ps, .stmts _ :: k => releaseAll_queues blocks caps serial attrs now ps k
  | ps, .submit :: k => releaseAll_queues blocks caps serial attrs now ps k
  | ps, .answer :: k => releaseAll_queues blocks caps serial attrs now ps k

theorem releaseIn_queues (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame),
    (releaseIn blocks caps serial attrs now i ps k).1.map PoolState.queue = ps.map PoolState.queue
  | ps, [] => rfl
  | ps, .answer :: k => rfl
  | ps, .release held w :: k => by
    simp only [releaseIn]
    split
    · exact giveBack_queues ..
    · exact releaseIn_queues blocks caps serial attrs now i ps k
  | ps, .stmts _ :: k => releaseIn_queues blocks caps serial attrs now i ps k
  | ps, .submit :: k => releaseIn_queues blocks caps serial attrs now i ps k

theorem releaseIn_kok {p : Program} (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), KOk p k → KOk p (releaseIn blocks caps serial attrs now i ps k).2
  | ps, [], _ => KOk.nil p
  | ps, .answer :: k, h => h
  | ps, .release held w :: k, h => by
    simp only [releaseIn]
    split
    · exact KOk.cons h.head h.tail
    · exact KOk.cons h.head (releaseIn_kok blocks caps serial attrs now i ps k h.tail)
  | ps, .stmts b :: k, h => KOk.cons h.head (releaseIn_kok blocks caps serial attrs now i ps k h.tail)
  | ps, .submit :: k, h => KOk.cons h.head (releaseIn_kok blocks caps serial attrs now i ps k h.tail)

theorem admitOn_queues (p : Program) (threads : List Thread) (v : PoolView) (caching : Bool) (rho : Option Nat)
    (attrs : List Nat) (now : Nat) : ∀ (first : Bool) (attr : Nat) (ps : List PoolState) (hs : List HoldOn),
    (admitOn p threads v caching rho attrs now first attr ps hs).1.map PoolState.queue = ps.map PoolState.queue
  | _, _, ps, [] => rfl
  | first, attr, ps, h :: hs => by
    simp only [admitOn]
    rw [admitOn_queues p threads v caching rho attrs now _ _ _ hs]
    exact setPool_queues _ _ _ rfl

theorem abandonTo_queues (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame),
    (abandonTo blocks caps serial attrs now i ps k).1.map PoolState.queue = ps.map PoolState.queue
  | ps, [] => rfl
  | ps, .release held w :: k => by
    simp only [abandonTo]
    split
    · exact giveBack_queues ..
    · rw [abandonTo_queues blocks caps serial attrs now i _ k, giveBack_queues]
  | ps, .stmts _ :: k => abandonTo_queues blocks caps serial attrs now i ps k
  | ps, .submit :: k => abandonTo_queues blocks caps serial attrs now i ps k
  | ps, .answer :: k => abandonTo_queues blocks caps serial attrs now i ps k

/-- A preemption's requeued hold is one a frame of the victim carried, and what is left of the
continuation is a suffix of it. -/
theorem abandonTo_kok {p : Program} (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), KOk p k →
    KOk p (abandonTo blocks caps serial attrs now i ps k).2.2 ∧
      ∀ w, (abandonTo blocks caps serial attrs now i ps k).2.1 = some w → ProgBlock p w.body
  | ps, [], _ => ⟨KOk.nil p, fun w h => by simp [abandonTo] at h⟩
  | ps, .release held w :: k, h => by
    simp only [abandonTo]
    split
    · refine ⟨h.tail, fun w' hw' => ?_⟩
      simp only [Option.some.injEq] at hw'
      rw [← hw']
      exact h.head
    · exact abandonTo_kok blocks caps serial attrs now i _ k h.tail
  | ps, .stmts _ :: k, h => abandonTo_kok blocks caps serial attrs now i ps k h.tail
  | ps, .submit :: k, h => abandonTo_kok blocks caps serial attrs now i ps k h.tail
  | ps, .answer :: k, h => abandonTo_kok blocks caps serial attrs now i ps k h.tail

theorem growPart_kok {p : Program} : ∀ (k : List Frame) (i u : Nat), KOk p k → KOk p (growPart k i u)
  | [], _, _, h => h
  | .answer :: k, _, _, h => h
  | .release held w :: k, i, u, h => by
    simp only [growPart]
    split
    · exact KOk.cons h.head h.tail
    · exact KOk.cons h.head (growPart_kok k i u h.tail)
  | .stmts b :: k, i, u, h => KOk.cons h.head (growPart_kok k i u h.tail)
  | .submit :: k, i, u, h => KOk.cons h.head (growPart_kok k i u h.tail)

theorem growPartReq_kok {p : Program} : ∀ (k : List Frame) (i u r : Nat), KOk p k → KOk p (growPartReq k i u r)
  | [], _, _, _, h => h
  | .answer :: k, _, _, _, h => h
  | .release held w :: k, i, u, r, h => by
    simp only [growPartReq]
    split
    · exact KOk.cons h.head h.tail
    · exact KOk.cons h.head (growPartReq_kok k i u r h.tail)
  | .stmts b :: k, i, u, r, h => KOk.cons h.head (growPartReq_kok k i u r h.tail)
  | .submit :: k, i, u, r, h => KOk.cons h.head (growPartReq_kok k i u r h.tail)

theorem advancePart_kok {p : Program} : ∀ (k : List Frame) (i u : Nat), KOk p k → KOk p (advancePart k i u)
  | [], _, _, h => h
  | .answer :: k, _, _, h => h
  | .release held w :: k, i, u, h => by
    simp only [advancePart]
    split
    · exact KOk.cons h.head h.tail
    · exact KOk.cons h.head (advancePart_kok k i u h.tail)
  | .stmts b :: k, i, u, h => KOk.cons h.head (advancePart_kok k i u h.tail)
  | .submit :: k, i, u, h => KOk.cons h.head (advancePart_kok k i u h.tail)

/-! ### The engines' residents -/

theorem EnginesOk.set {p : Program} {l : List EngineState} (h : EnginesOk p l) (j : Nat) {v : EngineState}
    (hv : ∀ r ∈ v.residents, ResOk p j r) : EnginesOk p (setEngineState l j v) := by
  intro j' r hr
  by_cases hj : j = j'
  · subst hj
    rcases getEngineState_setEngineState_self l j v with e | e
    · rw [e] at hr; exact hv r hr
    · rw [e] at hr; exact h j r hr
  · rw [getEngineState_setEngineState_ne l j j' v hj] at hr
    exact h j' r hr

theorem mem_removeResident (t : Nat) : ∀ (rs : List Resident) (x : Resident), x ∈ removeResident t rs → x ∈ rs
  | [], _, h => h
  | r :: rs, x, h => by
    simp only [removeResident] at h
    split at h
    · exact List.mem_cons_of_mem _ h
    · simp only [List.mem_cons] at h ⊢
      rcases h with h | h
      · exact Or.inl h
      · exact Or.inr (mem_removeResident t rs x h)

theorem residentOf_removeResident (t v : Nat) (h : v ≠ t) : ∀ rs : List Resident,
    residentOf t (removeResident v rs) = residentOf t rs
  | [] => rfl
  | r :: rs => by
    have ih := residentOf_removeResident t v h rs
    by_cases hv : r.thread = v
    · have e1 : removeResident v (r :: rs) = rs := by simp [removeResident, hv]
      have ht : r.thread ≠ t := by rw [hv]; exact h
      have e2 : residentOf t (r :: rs) = residentOf t rs := by simp [residentOf, ht]
      rw [e1, e2]
    · have e1 : removeResident v (r :: rs) = r :: removeResident v rs := by simp [removeResident, hv]
      rw [e1]
      by_cases ht : r.thread = t
      · simp [residentOf, ht]
      · simp [residentOf, ht, ih]

theorem mem_setSched (t n : Nat) : ∀ (rs : List Resident) (x : Resident), x ∈ setSched t n rs →
    x ∈ rs ∨ ∃ y, residentOf t rs = some y ∧ x = { y with sched := n }
  | [], _, h => Or.inl h
  | r :: rs, x, h => by
    by_cases ht : r.thread = t
    · have ht' : (r.thread == t) = true := by simp [ht]
      simp only [setSched, ht', if_true, List.mem_cons] at h
      rcases h with h | h
      · exact Or.inr ⟨r, by simp [residentOf, ht], h⟩
      · exact Or.inl (List.mem_cons_of_mem _ h)
    · have ht' : (r.thread == t) = false := by simp [ht]
      simp only [setSched, ht', Bool.false_eq_true, if_false, List.mem_cons] at h
      rcases h with h | h
      · exact Or.inl (by rw [h]; simp)
      · rcases mem_setSched t n rs x h with h | ⟨y, hy, e⟩
        · exact Or.inl (List.mem_cons_of_mem _ h)
        · exact Or.inr ⟨y, by simp [residentOf, ht', hy], e⟩

theorem mem_applyTokens (t0 t1 : Nat) : ∀ (rs : List Resident) (gs : List Progress) (x : Resident),
    x ∈ (applyTokens t0 t1 gs rs).2.1 → ∃ y ∈ rs, x = y ∨ x = { y with rem := y.rem - y.sched, sched := 0 }
  | [], _, x, hx => by simp [applyTokens] at hx
  | r :: rs, gs, x, hx => by
    simp only [applyTokens] at hx
    split at hx
    · simp only [List.mem_cons] at hx
      rcases hx with hx | hx
      · exact ⟨r, by simp, Or.inl hx⟩
      · obtain ⟨y, hy, e⟩ := mem_applyTokens t0 t1 rs gs x hx
        exact ⟨y, List.mem_cons_of_mem _ hy, e⟩
    · split at hx
      · obtain ⟨y, hy, e⟩ := mem_applyTokens t0 t1 rs _ x hx
        exact ⟨y, List.mem_cons_of_mem _ hy, e⟩
      · simp only [List.mem_cons] at hx
        rcases hx with hx | hx
        · exact ⟨r, by simp, Or.inr hx⟩
        · obtain ⟨y, hy, e⟩ := mem_applyTokens t0 t1 rs _ x hx
          exact ⟨y, List.mem_cons_of_mem _ hy, e⟩

/-! ### Machine updates -/

theorem Inv.put {p : Program} {m : Machine} (hm : Inv p m) {th : Thread} (hk : KOk p th.k) : Inv p (m.put th) :=
  ⟨hm.threads.set _ hk, hm.pools, hm.engines⟩

theorem Inv.setTimer {p : Program} {m : Machine} (hm : Inv p m) (t : Nat) (w : Wake) : Inv p (m.setTimer t w) :=
  ⟨hm.threads, hm.pools, hm.engines⟩

theorem Inv.leaseTimer {p : Program} {m : Machine} (hm : Inv p m) (t : Nat) (d : Option Nat) : Inv p (m.leaseTimer t d) := by
  cases d
  · exact ⟨hm.threads, hm.pools, hm.engines⟩
  · exact hm.setTimer _ _

theorem Inv.addJob {p : Program} {m : Machine} (hm : Inv p m) (s t w : Nat) : Inv p (m.addJob p s t w) := by
  simp only [Machine.addJob]
  split
  · exact hm.setTimer _ _
  · exact hm.setTimer _ _
  · split
    · exact ⟨hm.threads, hm.pools, hm.engines⟩
    · exact ⟨hm.threads, hm.pools, hm.engines⟩

/-- A resident put by one of the program's run statements. -/
theorem ResOk.fresh {p : Program} {s : Nat} {dec : Bool} {gr : Nat} {w : Expr} (hst : ProgStmt p (.step s dec gr w))
    (serial adm : Nat) (v : PoolView) (attrs : List Nat) (now : Nat) :
    ResOk p s ⟨serial, eval v attrs now 0 w, dec, adm, 0, gr⟩ := by
  refine ⟨⟨w, hst⟩, fun g hg hd => ?_⟩
  have hst' : ProgStmt p (.step s false gr w) := by
    have e : dec = false := hd
    rw [e] at hst
    exact hst
  obtain ⟨e, rfl⟩ := hg.works gr w hst'
  exact ⟨by simp [eval, evalBin, Nat.mul_mod_right], Nat.zero_mod g⟩

/-! ### `exec`: a thread runs the program's statements -/

theorem exec_inv (p : Program) : ∀ (f : Nat) (m : Machine) (th : Thread), Inv p m → KOk p th.k →
    Inv p (exec p f m th)
  | 0, m, th, hm, hk => by
    simp only [exec]
    exact ⟨hm.threads.set _ hk, hm.pools, hm.engines⟩
  | f + 1, m, th, hm, hk => by
    simp only [exec]
    split
    · exact ⟨hm.threads.set _ hk, PoolsOk.of_queues (endLeases_queues ..) hm.pools, hm.engines⟩
    · next k heq =>
      rw [heq] at hk
      exact exec_inv p f _ _ (by exact ⟨hm.threads, hm.pools, hm.engines⟩) (by exact hk.tail)
    · next k heq =>
      rw [heq] at hk
      split
      · exact exec_inv p f _ _ (by exact hm) (by exact hk.tail)
      · exact exec_inv p f _ _ (by exact hm) (by exact hk.tail)
    · next held w k heq =>
      rw [heq] at hk
      split
      · exact exec_inv p f _ _
          (by exact ⟨hm.threads, PoolsOk.of_queues (giveBack_queues ..) hm.pools, hm.engines⟩) (by exact hk.tail)
      · refine exec_inv p f _ _ (Inv.leaseTimer ?_ _ _) (by exact hk.tail)
        exact ⟨hm.threads, PoolsOk.of_queues (giveBack_queues ..) hm.pools, hm.engines⟩
    · next k heq =>
      rw [heq] at hk
      exact exec_inv p f _ _ (by exact hm) (by exact hk.tail)
    · next st rest k heq =>
      have hk0 := hk
      rw [heq] at hk
      have hst : ProgStmt p st := (ProgBlock.cons hk.head).1
      have hnext : KOk p (.stmts rest :: k) := KOk.cons (ProgBlock.cons hk.head).2 hk.tail
      cases st with
      | set i e =>
        try dsimp only
        exact exec_inv p f _ _ (by exact hm) (by exact hnext)
      | observe j e =>
        try dsimp only
        exact exec_inv p f _ _ (by exact hm) (by exact hnext)
      | stop =>
        try dsimp only
        exact ⟨hm.threads.set _ (KOk.nil p),
          PoolsOk.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm.pools, hm.engines⟩
      | release i =>
        try dsimp only
        split
        · exact exec_inv p f _ _ (by exact ⟨hm.threads, PoolsOk.of_queues (releaseIn_queues ..) hm.pools, hm.engines⟩)
            (by exact KOk.cons (ProgBlock.cons hk.head).2 (releaseIn_kok _ _ _ _ _ _ _ k hk.tail))
        · exact exec_inv p f _ _ (by exact ⟨hm.threads, PoolsOk.of_queues (endLeasesOn_queues ..) hm.pools, hm.engines⟩)
            (by exact hnext)
      | branch t yes no =>
        try dsimp only
        refine exec_inv p f _ _ (by exact hm) (KOk.cons ?_ hnext)
        split
        · exact hst.yes
        · exact hst.no
      | «while» t body =>
        try dsimp only
        split
        · exact exec_inv p f _ _ (by exact hm) (by exact KOk.cons (fun x hx => .whileBody hst hx) hk)
        · exact exec_inv p f _ _ (by exact hm) (by exact hnext)
      | loop body =>
        try dsimp only
        exact exec_inv p f _ _ (by exact hm) (by exact KOk.cons (fun x hx => .loopBody hst hx) hk)
      | turn =>
        try dsimp only
        split
        · exact ⟨hm.threads.set _ hk0, hm.pools, hm.engines⟩
        · exact exec_inv p f _ _ (by exact hm) (by exact KOk.cons (fun x hx => ProgStmt.turnBlock hx) (KOk.cons trivial
            (KOk.cons (fun x hx => ProgStmt.server hx) (KOk.cons trivial hnext))))
      | run s w =>
        try dsimp only
        split
        · exact exec_inv p f _ _ (by exact hm) (by exact hnext)
        · exact (hm.addJob _ _ _).put hnext
      | step s dec g w =>
        try dsimp only
        split
        · exact exec_inv p f _ _ (by exact hm) (by exact hnext)
        · refine Inv.put ?_ hnext
          refine ⟨hm.threads, hm.pools, hm.engines.set s ?_⟩
          intro r hr
          rcases (mem_insertResident _ _ _).1 hr with e | e
          · rw [e]
            exact ResOk.fresh hst _ _ _ _ _
          · exact hm.engines s r e
      | grow i e =>
        try dsimp only
        split
        · exact ⟨hm.threads.set _ hk0, hm.pools, hm.engines⟩
        · split
          · exact exec_inv p f _ _ (by exact hm) (KOk.cons hnext.head (growPartReq_kok _ _ _ _ hnext.tail))
          · split
            · exact exec_inv p f _ _
                (by exact ⟨hm.threads, PoolsOk.of_queues (setPool_queues _ _ _ rfl) hm.pools, hm.engines⟩)
                (KOk.cons hnext.head (growPartReq_kok _ _ _ _ hnext.tail))
            · exact ⟨hm.threads.set _ hnext, hm.pools, hm.engines⟩
      | hold on reuse cache body =>
        try dsimp only
        split
        · exact ⟨hm.threads.set _ (KOk.nil p),
            PoolsOk.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm.pools, hm.engines⟩
        · split
          · exact hm.put hnext
          · refine Inv.put ?_ hnext
            refine ⟨hm.threads, hm.pools.set _ ?_, hm.engines⟩
            split
            · exact QOk.append (fun x hx => .holdBody hst hx) (hm.pools.get _)
            · exact QOk.insert (fun x hx => .holdBody hst hx) _ _ _ _ _ (hm.pools.get _)

/-! ### Settling an instant -/

theorem runReady_inv (p : Program) (f : Nat) (m : Machine) : Inv p m → Inv p (runReady p f m) := by
  fun_induction runReady p f m <;> intro hm
  · exact ⟨hm.threads, hm.pools, hm.engines⟩
  · exact hm
  · rename_i ih
    exact ih (exec_inv p _ _ _ (by exact ⟨hm.threads, hm.pools, hm.engines⟩) (by exact hm.threads.get _))

theorem Machine.admitWaiter_inv (p : Program) (m : Machine) (st : List Nat) (i j : Nat) (hm : Inv p m) :
    Inv p (m.admitWaiter p st i j) := by
  have hq := hm.pools.get i
  refine ⟨hm.threads.set _ ?_, ?_, hm.engines⟩
  · exact KOk.cons (QOk.getWaiter hq j) (KOk.cons (QOk.getWaiter hq j) (hm.threads.get _))
  · exact PoolsOk.of_queues (admitOn_queues ..) (hm.pools.set i (QOk.remove hq j))

theorem retryQueue_inv (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    Inv p m → Inv p (retryQueue p f m i b).1
  | 0, m, i, b, hm => ⟨hm.threads, hm.pools, hm.engines⟩
  | f + 1, m, i, b, hm => by
    simp only [retryQueue]
    split
    · exact hm
    · next _ hd tl _ =>
      split
      · have h := Machine.admitWaiter_inv p m [] i (select p m i (hd :: tl)) hm
        exact retryQueue_inv p f _ i true (by exact ⟨h.threads, h.pools, h.engines⟩)
      · exact hm

theorem Machine.grownReq_inv (p : Program) (m : Machine) (t i want req : Nat) (h : Held) (hm : Inv p m) :
    Inv p (m.grownReq p t i want req h) :=
  ⟨hm.threads.set _ (growPartReq_kok _ _ _ _ (hm.threads.get t)),
   PoolsOk.of_queues (setPool_queues _ _ _ rfl) hm.pools, hm.engines⟩

theorem retryGrowers_inv (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    Inv p m → Inv p (retryGrowers p f m i b).1
  | 0, m, i, b, hm => ⟨hm.threads, hm.pools, hm.engines⟩
  | f + 1, m, i, b, hm => by
    simp only [retryGrowers]
    split
    · exact hm
    · next x hx =>
      split
      · exact hm
      · next hh hpart =>
        split
        · have h := Machine.grownReq_inv p m x.thread i (roundUp (getAt p.blocks i) x.req) x.req hh hm
          exact retryGrowers_inv p f _ i true (by exact ⟨h.threads, h.pools, h.engines⟩)
        · exact hm

theorem retryPool_inv (p : Program) (f : Nat) (m : Machine) (i : Nat) (b : Bool) :
    Inv p m → Inv p (retryPool p f m i b).1 := by
  intro hm
  simp only [retryPool]
  split
  · exact retryQueue_inv p f _ _ _ (retryGrowers_inv p f _ _ _ hm)
  · exact retryGrowers_inv p f _ _ _ hm

theorem retryPools_inv (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    Inv p m → Inv p (retryPools p f n i m b).1 := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPool_inv p f _ _ _ hm)

theorem settle_inv (p : Program) (f : Nat) (m : Machine) : Inv p m → Inv p (settle p f m) := by
  fun_induction settle p f m <;> intro hm
  · exact ⟨hm.threads, hm.pools, hm.engines⟩
  · rename_i ih
    exact ih (retryPools_inv p _ _ _ _ _ (runReady_inv p _ _ hm))
  · exact retryPools_inv p _ _ _ _ _ (runReady_inv p _ _ hm)

/-! ### An iteration's serving: the batch and the residents -/

theorem Machine.grown_inv (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hm : Inv p m) :
    Inv p (m.grown p t i want h) :=
  ⟨hm.threads.set _ (growPart_kok _ _ _ (hm.threads.get t)),
   PoolsOk.of_queues (setPool_queues _ _ _ rfl) hm.pools, hm.engines⟩

theorem Machine.served_inv (p : Program) (m : Machine) (s : Nat) (b : Batch) (r : Resident) (n : Nat)
    (hm : Inv p m) (hb : BOk p s b) (hr : residentOf r.thread (getEngineState m.engines s).residents = some r)
    (hn : ∀ g, TiledProgram p s g → r.decode = false → n % g = 0) :
    Inv p (m.served s b r n).1 ∧ BOk p s (m.served s b r n).2 := by
  have hrok : ResOk p s r := hm.engines s r (residentOf_some _ _ _ hr).1
  refine ⟨⟨hm.threads, hm.pools, hm.engines.set s ?_⟩, ?_⟩
  · intro x hx
    rcases mem_setSched _ _ _ x hx with hx | ⟨y, hy, e⟩
    · exact hm.engines s x hx
    · rw [hr] at hy
      have hyr : r = y := Option.some.inj hy
      rw [e, ← hyr]
      exact ⟨hrok.1, fun g hg hd => ⟨(hrok.2 g hg hd).1, hn g hg hd⟩⟩
  · intro g hg
    obtain ⟨h1, h2⟩ := hb g hg
    refine ⟨h1, Batch.serve_tiled _ _ _ _ h2 ?_⟩
    cases hd : r.decode
    · exact Or.inr (hn g hg hd)
    · exact Or.inl rfl

theorem BOk.unserve {p : Program} {m : Machine} {s t : Nat} {b : Batch} {r : Resident} (hm : Inv p m) (hb : BOk p s b)
    (hr : residentOf t (getEngineState m.engines s).residents = some r) (x : Nat) :
    BOk p s { b.unserve r r.sched with preempted := x } := by
  have hrok : ResOk p s r := hm.engines s r (residentOf_some _ _ _ hr).1
  intro g hg
  obtain ⟨h1, h2⟩ := hb g hg
  refine ⟨h1, Batch.unserve_tiled _ _ _ _ h2 ?_⟩
  cases hd : r.decode
  · exact Or.inr (hrok.2 g hg hd).2
  · exact Or.inl rfl

theorem BOk.preempted {p : Program} {s : Nat} {b : Batch} (hb : BOk p s b) (x : Nat) :
    BOk p s { b with preempted := x } := hb

theorem Machine.preempt_inv (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (hm : Inv p m) (hb : BOk p s b) :
    Inv p (m.preempt p s i t b).1 ∧ BOk p s (m.preempt p s i t b).2 := by
  have hk := hm.threads.get t
  have he : EnginesOk p (setEngineState m.engines s { getEngineState m.engines s with
      residents := removeResident t (getEngineState m.engines s).residents }) :=
    hm.engines.set s (fun r hr => hm.engines s r (mem_removeResident _ _ _ hr))
  constructor
  · simp only [Machine.preempt]
    repeat' split
    all_goals (try have hw := (abandonTo_kok (p := p) _ _ _ _ _ _ _ _ hk).2 _ ‹_›)
    all_goals first
      | exact ⟨hm.threads, hm.pools, he⟩
      | exact ⟨hm.threads.set _ (abandonTo_kok _ _ _ _ _ _ _ _ hk).1,
          PoolsOk.set (PoolsOk.of_queues (abandonTo_queues ..) hm.pools) _
            (QOk.cons (by exact hw)
              ((PoolsOk.of_queues (abandonTo_queues ..) hm.pools).get _)), he⟩
      | exact ⟨hm.threads.set _ (abandonTo_kok _ _ _ _ _ _ _ _ hk).1,
          PoolsOk.set (PoolsOk.of_queues (abandonTo_queues ..) hm.pools) _
            (QOk.append (by exact hw)
              ((PoolsOk.of_queues (abandonTo_queues ..) hm.pools).get _)), he⟩
      | exact ⟨hm.threads.set _ (abandonTo_kok _ _ _ _ _ _ _ _ hk).1,
          PoolsOk.set (PoolsOk.of_queues (abandonTo_queues ..) hm.pools) _
            (QOk.insert (by exact hw) _ _ _ _ _
              ((PoolsOk.of_queues (abandonTo_queues ..) hm.pools).get _)), he⟩
  · simp only [Machine.preempt]
    repeat' split
    all_goals first
      | exact BOk.preempted hb _
      | exact BOk.unserve hm hb ‹_› _

theorem residentOf_preempt (p : Program) (s i v t : Nat) (m : Machine) (b : Batch) (h : v ≠ t) :
    residentOf t (getEngineState (m.preempt p s i v b).1.engines s).residents =
      residentOf t (getEngineState m.engines s).residents := by
  have he : (m.preempt p s i v b).1.engines = setEngineState m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents } := by
    simp only [Machine.preempt]
    split <;> rfl
  rw [he]
  rcases getEngineState_setEngineState_self m.engines s { getEngineState m.engines s with
      residents := removeResident v (getEngineState m.engines s).residents } with e | e <;> rw [e]
  exact residentOf_removeResident t v h _

theorem growPreempting_inv (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    Inv p m → BOk p s b →
      Inv p (growPreempting p s i want t f m b).1 ∧ BOk p s (growPreempting p s i want t f m b).2.1 := by
  fun_induction growPreempting p s i want t f m b <;> intro hm hb
  all_goals first
    | exact ⟨⟨hm.threads, hm.pools, hm.engines⟩, hb⟩
    | exact ⟨Machine.grown_inv p _ _ _ _ _ hm, hb⟩
    | exact Machine.preempt_inv p _ _ _ _ _ hm hb
    | (rename_i ih
       exact ih (Machine.preempt_inv p _ _ _ _ _ hm hb).1 (Machine.preempt_inv p _ _ _ _ _ hm hb).2)

theorem growPreempting_residentOf (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    (growPreempting p s i want t f m b).2.2 = 0 →
      residentOf t (getEngineState (growPreempting p s i want t f m b).1.engines s).residents =
        residentOf t (getEngineState m.engines s).residents := by
  fun_induction growPreempting p s i want t f m b <;> intro h0
  all_goals first
    | (simp at h0; done)
    | rfl
    | (rename_i hvt ih
       rw [ih h0]
       exact residentOf_preempt p _ _ _ _ _ _ (by simpa using hvt))

theorem Machine.serveOne_inv (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (hm : Inv p m) (hb : BOk p s b) (hr : residentOf r.thread (getEngineState m.engines s).residents = some r)
    (hn : ∀ g, TiledProgram p s g → r.decode = false → n % g = 0) :
    Inv p (m.serveOne p s b r n).1 ∧ BOk p s (m.serveOne p s b r n).2.1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact Machine.served_inv p m s b r n hm hb hr hn
    | exact Machine.served_inv p _ s b r n (Machine.grown_inv p _ _ _ _ _ hm) hb hr hn
    | exact ⟨hm, hb⟩
    | exact Machine.served_inv p _ s _ r n (growPreempting_inv p _ _ _ _ _ _ _ hm hb).1
        (growPreempting_inv p _ _ _ _ _ _ _ hm hb).2 (by rw [growPreempting_residentOf p _ _ _ _ _ _ _ ‹_›]; exact hr) hn
    | exact growPreempting_inv p _ _ _ _ _ _ _ hm hb

/-- What the serving of a resident `r` that `residentOf t` found needs. -/
theorem serve_hyps {p : Program} {s chunk t : Nat} {m : Machine} {b : Batch} {r : Resident} (hm : Inv p m)
    (hb : BOk p s b) (hr : residentOf t (getEngineState m.engines s).residents = some r) :
    residentOf r.thread (getEngineState m.engines s).residents = some r ∧
      ∀ g, TiledProgram p s g → r.decode = false → tokensFor chunk b.gran b.budget r % g = 0 := by
  obtain ⟨hmem, ht⟩ := residentOf_some _ _ _ hr
  refine ⟨by rw [ht]; exact hr, fun g hg hd => ?_⟩
  rw [(hb g hg).1]
  exact tokensFor_tiled chunk g b.budget r hd hg.pos ((hm.engines s r hmem).2 g hg hd).1

theorem serveIn_inv (p : Program) (s chunk : Nat) (q : Option Expr) : ∀ (ts : List Nat) (m : Machine) (b : Batch),
    Inv p m → BOk p s b → Inv p (serveIn p s chunk q ts m b).1 ∧ BOk p s (serveIn p s chunk q ts m b).2 := by
  intro ts
  induction ts with
  | nil => intro m b hm hb; exact ⟨hm, hb⟩
  | cons t ts ih =>
    intro m b hm hb
    simp only [serveIn]
    split
    · exact ⟨hm, hb⟩
    · split
      · exact ih m b hm hb
      · next r hsome =>
        split
        · exact ih m b hm hb
        · split
          · exact ih m _ hm hb
          · have h := Machine.serveOne_inv p s m b r (tokensFor chunk b.gran b.budget r) hm hb
              (serve_hyps (chunk := chunk) hm hb hsome).1
              (serve_hyps hm hb hsome).2
            split
            · exact h
            · exact ih _ _ h.1 h.2

theorem serveOrdered_inv (p : Program) (s : Nat) (m : Machine) (running : List Nat) (chunk : Nat) (q : Option Expr)
    (b : Batch) (keys : List Expr) (rs : List Resident) (hm : Inv p m) (hb : BOk p s b) :
    Inv p (serveOrdered p s m running chunk q b keys rs).1 ∧ BOk p s (serveOrdered p s m running chunk q b keys rs).2 := by
  cases keys <;> simp only [serveOrdered] <;> exact serveIn_inv p s chunk q _ m b hm hb

theorem admitOne_inv (p : Program) (f s chunk i j : Nat) (q : Option Expr) (m : Machine) (b : Batch)
    (hm : Inv p m) (hb : BOk p s b) :
    Inv p (admitOne p f s chunk i j q m b).1 ∧ BOk p s (admitOne p f s chunk i j q m b).2 := by
  have h1 := Machine.admitWaiter_inv p m (admissionStage chunk b.budget) i j hm
  have h2 := exec_inv p f _ _ h1 (h1.threads.get (getWaiter (getPool m.pools i).queue j).thread)
  simp only [admitOne]
  split
  · next r hsome =>
    split
    · split
      · exact ⟨h2, hb⟩
      · have h := Machine.serveOne_inv p s _ b r (tokensFor chunk b.gran b.budget r) h2 hb
          (serve_hyps (chunk := chunk) h2 hb hsome).1
          (serve_hyps h2 hb hsome).2
        exact h
    · exact ⟨h2, hb⟩
  · exact ⟨h2, hb⟩

theorem admitWaiting_inv (p : Program) (s chunk : Nat) (q : Option Expr) (g : Bool) (f : Nat) (m : Machine) (b : Batch) :
    Inv p m → BOk p s b → Inv p (admitWaiting p s chunk q g f m b).1 ∧ BOk p s (admitWaiting p s chunk q g f m b).2 := by
  fun_induction admitWaiting p s chunk q g f m b <;> intro hm hb
  all_goals first
    | exact ⟨⟨hm.threads, hm.pools, hm.engines⟩, hb⟩
    | exact ⟨hm, hb⟩
    | (rename_i ih
       exact ih (admitOne_inv p _ _ _ _ _ _ _ _ hm hb).1 (admitOne_inv p _ _ _ _ _ _ _ _ hm hb).2)

end Serq.Kernel
