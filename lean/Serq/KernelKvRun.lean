module

public import Serq.KernelKv

/-! # KV conservation at every run's end (issue 14, result 6, over the kernel interpreter)

`Serq.KernelKv` carries KV conservation and its ledger (`KvRun`) through every function of the machine
but the admissions, which need the admitted hold to name each pool once. This module keeps, through
every run, that every block a thread will run, every hold a release frame carries and every waiting hold satisfy
a check `c` on statements at every depth (`StmtInv c`: `FramesAll`, whose `FrameAll` reads a release
frame's hold, and `WaitAll`) when every statement of the program does (`p.allStmts c`); with
`c = holdsOnceOn` (`HoldsOnce.of_check`'s checker) every waiting hold names each pool once. The release
frames' holds are what a preemption puts back in a queue (`Machine.preempt_stmt`, `abandonTo_framesAll`),
so the invariant holds with preemption too. Then `KvRun` holds at every run's end:
`runProgram_kv_conserved`, `used + cachedUnits entries ≤ cap` for every pool, for every program whose hold
statements name each pool once, preempting or not (its pools evicting `lru` or `by (keys)`).
-/
@[expose] public section

namespace Serq.Kernel

/-! ### Every block a thread will run, and every waiting hold, satisfies `c` -/

/-- A frame satisfies `c`: its statements at every depth, and a hold's release the hold it carries (which a
preemption puts back in a queue, `Machine.preempt`). -/
def FrameAll (c : Stmt → Bool) : Frame → Prop
  | .stmts b => Stmt.allBlock c b = true
  | .release _ w => Stmt.allSub c (.hold w.on w.reuse w.cache w.body) = true
  | .submit => True
  | .answer => True

def FramesAll (c : Stmt → Bool) (k : List Frame) : Prop := ∀ fr ∈ k, FrameAll c fr

def WaitAll (c : Stmt → Bool) (ps : List PoolState) : Prop :=
  ∀ q ∈ ps, ∀ w ∈ q.queue, Stmt.allSub c (.hold w.on w.reuse w.cache w.body) = true

def StmtInv (c : Stmt → Bool) (m : Machine) : Prop := (∀ th ∈ m.threads, FramesAll c th.k) ∧ WaitAll c m.pools

variable {c : Stmt → Bool}

theorem FramesAll.tail {fr : Frame} {k : List Frame} (h : FramesAll c (fr :: k)) : FramesAll c k :=
  fun x hx => h x (List.mem_cons_of_mem _ hx)

theorem FramesAll.headAll {fr : Frame} {k : List Frame} (h : FramesAll c (fr :: k)) : FrameAll c fr :=
  h fr List.mem_cons_self

theorem FramesAll.head {b : List Stmt} {k : List Frame} (h : FramesAll c (.stmts b :: k)) : Stmt.allBlock c b = true :=
  h _ List.mem_cons_self

theorem FramesAll.cons {fr : Frame} {k : List Frame} (h1 : FrameAll c fr) (h2 : FramesAll c k) :
    FramesAll c (fr :: k) := by
  intro x hx
  simp only [List.mem_cons] at hx
  rcases hx with hx | hx
  · rw [hx]; exact h1
  · exact h2 x hx

theorem FramesAll.stmts {b : List Stmt} {k : List Frame} (h1 : Stmt.allBlock c b = true) (h2 : FramesAll c k) :
    FramesAll c (.stmts b :: k) :=
  FramesAll.cons h1 h2

/-- A turn's bookkeeping frame (`submit`, `answer`) carries no statement. -/
theorem FramesAll.mark {fr : Frame} {k : List Frame} (hfr : fr = .submit ∨ fr = .answer) (h2 : FramesAll c k) :
    FramesAll c (fr :: k) := by
  refine FramesAll.cons ?_ h2
  rcases hfr with e | e <;> rw [e] <;> trivial

/-- A release frame with other parts but the same hold as one that satisfied `c`. -/
theorem FramesAll.release {held held' : List Held} {w : Waiter} {k k' : List Frame}
    (h : FramesAll c (.release held w :: k)) (h2 : FramesAll c k') : FramesAll c (.release held' w :: k') :=
  FramesAll.cons (c := c) (fr := .release held' w) (show Stmt.allSub c (.hold w.on w.reuse w.cache w.body) = true from h.headAll) h2

theorem FramesAll.nil : FramesAll c [] := fun _ h => by simp at h

theorem releaseIn_framesAll (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), FramesAll c k → FramesAll c (releaseIn blocks caps serial attrs now i ps k).2
  | ps, [], _ => FramesAll.nil
  | ps, .answer :: k, h => h
  | ps, .release held w :: k, h => by
    simp only [releaseIn]
    split
    · exact h.release h.tail
    · exact h.release (releaseIn_framesAll blocks caps serial attrs now i ps k h.tail)
  | ps, .stmts b :: k, h => FramesAll.stmts h.head (releaseIn_framesAll blocks caps serial attrs now i ps k h.tail)
  | ps, .submit :: k, h => FramesAll.mark (Or.inl rfl) (releaseIn_framesAll blocks caps serial attrs now i ps k h.tail)

theorem growPartReq_framesAll : ∀ (k : List Frame) (i u r : Nat), FramesAll c k → FramesAll c (growPartReq k i u r)
  | [], _, _, _, h => h
  | .answer :: k, _, _, _, h => h
  | .release held w :: k, i, u, r, h => by
    simp only [growPartReq]
    split
    · exact h.release h.tail
    · exact h.release (growPartReq_framesAll k i u r h.tail)
  | .stmts b :: k, i, u, r, h => FramesAll.stmts h.head (growPartReq_framesAll k i u r h.tail)
  | .submit :: k, i, u, r, h => FramesAll.mark (Or.inl rfl) (growPartReq_framesAll k i u r h.tail)

theorem growPart_framesAll : ∀ (k : List Frame) (i u : Nat), FramesAll c k → FramesAll c (growPart k i u)
  | [], _, _, h => h
  | .answer :: k, _, _, h => h
  | .release held w :: k, i, u, h => by
    simp only [growPart]
    split
    · exact h.release h.tail
    · exact h.release (growPart_framesAll k i u h.tail)
  | .stmts b :: k, i, u, h => FramesAll.stmts h.head (growPart_framesAll k i u h.tail)
  | .submit :: k, i, u, h => FramesAll.mark (Or.inl rfl) (growPart_framesAll k i u h.tail)

theorem advancePart_framesAll : ∀ (k : List Frame) (i u : Nat), FramesAll c k → FramesAll c (advancePart k i u)
  | [], _, _, h => h
  | .answer :: k, _, _, h => h
  | .release held w :: k, i, u, h => by
    simp only [advancePart]
    split
    · exact h.release h.tail
    · exact h.release (advancePart_framesAll k i u h.tail)
  | .stmts b :: k, i, u, h => FramesAll.stmts h.head (advancePart_framesAll k i u h.tail)
  | .submit :: k, i, u, h => FramesAll.mark (Or.inl rfl) (advancePart_framesAll k i u h.tail)

/-! ### Waiting holds -/

theorem WaitAll.get {ps : List PoolState} (h : WaitAll c ps) : ∀ i, ∀ w ∈ (getPool ps i).queue,
    Stmt.allSub c (.hold w.on w.reuse w.cache w.body) = true := by
  induction ps with
  | nil => intro i w hw; simp [getPool] at hw
  | cons q ps ih =>
    intro i
    cases i with
    | zero => exact h q (by simp)
    | succ i => exact ih (fun x hx => h x (List.mem_cons_of_mem _ hx)) i

theorem WaitAll.set {ps : List PoolState} (h : WaitAll c ps) (i : Nat) {v : PoolState}
    (hv : ∀ w ∈ v.queue, Stmt.allSub c (.hold w.on w.reuse w.cache w.body) = true) : WaitAll c (setPool ps i v) := by
  intro x hx
  rcases mem_setPool ps i v x hx with hx | hx
  · exact h x hx
  · rw [hx]; exact hv

theorem WaitAll.of_queues {ps ps' : List PoolState}
    (h : ps'.map PoolState.queue = ps.map PoolState.queue) (hp : WaitAll c ps) : WaitAll c ps' := by
  intro q hq
  have hm : q.queue ∈ ps.map PoolState.queue := h ▸ List.mem_map.2 ⟨q, hq, rfl⟩
  obtain ⟨q', hq', e⟩ := List.mem_map.1 hm
  rw [← e]
  exact hp q' hq'

/-! `getWaiter_mem`, `mem_removeWaiter` and `mem_insertByCreation`, which the queues' steps below use, are `Serq.KernelPlaced`'s. -/

theorem mem_appendWaiter' : ∀ (ws : List Waiter) (w x : Waiter), x ∈ appendWaiter ws w → x ∈ ws ∨ x = w
  | [], w, x, h => by simp [appendWaiter] at h; exact Or.inr h
  | y :: ws, w, x, h => by
    simp only [appendWaiter, List.mem_cons] at h
    rcases h with h | h
    · exact Or.inl (h ▸ List.mem_cons_self)
    · rcases mem_appendWaiter' ws w x h with h | h
      · exact Or.inl (List.mem_cons_of_mem _ h)
      · exact Or.inr h


/-! ### The machine -/

theorem StmtInv.put {m : Machine} (hm : StmtInv c m) {th : Thread} (ht : FramesAll c th.k) : StmtInv c (m.put th) := by
  refine ⟨fun x hx => ?_, hm.2⟩
  rcases mem_setThread _ _ _ _ hx with hx | rfl
  · exact hm.1 x hx
  · exact ht

theorem StmtInv.leaseTimer {m : Machine} (hm : StmtInv c m) (s : Nat) (d : Option Nat) :
    StmtInv c (m.leaseTimer s d) := by
  cases d
  · exact ⟨hm.1, hm.2⟩
  · exact ⟨hm.1, hm.2⟩

theorem getThread_framesAll : ∀ (l : List Thread) (i : Nat), (∀ th ∈ l, FramesAll c th.k) → FramesAll c (getThread l i).k
  | [], _, _ => FramesAll.nil
  | t :: _, 0, h => h t List.mem_cons_self
  | _ :: ts, n + 1, h => getThread_framesAll ts n (fun th hm => h th (List.mem_cons_of_mem _ hm))

theorem StmtInv.get {m : Machine} (hm : StmtInv c m) (t : Nat) : FramesAll c (getThread m.threads t).k :=
  getThread_framesAll _ _ hm.1

theorem exec_stmt (p : Program) (hp : p.allStmts c = true) : ∀ (f : Nat) (m : Machine) (th : Thread),
    StmtInv c m → FramesAll c th.k → StmtInv c (exec p f m th)
  | 0, m, th, hm, ht => by
    simp only [exec]
    have h := hm.put ht
    exact ⟨h.1, h.2⟩
  | f + 1, m, th, hm, ht => by
    simp only [exec]
    split
    · next heq =>
      refine StmtInv.put ?_ ?_
      · exact ⟨hm.1, WaitAll.of_queues (endLeases_queues ..) hm.2⟩
      · rw [heq]; exact FramesAll.nil
    · next k heq =>
      rw [heq] at ht
      exact exec_stmt p hp f _ _ hm ht.tail
    · next k heq =>
      rw [heq] at ht
      split
      · exact exec_stmt p hp f _ _ hm ht.tail
      · exact exec_stmt p hp f _ _ hm ht.tail
    · next held w k heq =>
      rw [heq] at ht
      split
      · refine exec_stmt p hp f _ _ ?_ ht.tail
        exact ⟨hm.1, WaitAll.of_queues (giveBack_queues ..) hm.2⟩
      · refine exec_stmt p hp f _ _ (StmtInv.leaseTimer ?_ _ _) ht.tail
        exact ⟨hm.1, WaitAll.of_queues (giveBack_queues ..) hm.2⟩
    · next k heq =>
      rw [heq] at ht
      exact exec_stmt p hp f _ _ hm ht.tail
    · next st rest k heq =>
      rw [heq] at ht
      have hb := ht.head
      have hnext : FramesAll c (.stmts rest :: k) := FramesAll.stmts (allBlock_cons hb).2 ht.tail
      cases st with
      | set i e => exact exec_stmt p hp f _ _ hm hnext
      | observe j e => exact exec_stmt p hp f _ _ hm hnext
      | stop =>
        try dsimp only
        refine StmtInv.put ?_ FramesAll.nil
        exact ⟨hm.1, WaitAll.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm.2⟩
      | release i =>
        try dsimp only
        split
        · refine exec_stmt p hp f _ _ ?_ ?_
          · exact ⟨hm.1, WaitAll.of_queues (releaseIn_queues ..) hm.2⟩
          · exact FramesAll.stmts (allBlock_cons hb).2 (releaseIn_framesAll _ _ _ _ _ _ _ _ ht.tail)
        · refine exec_stmt p hp f _ _ ?_ hnext
          exact ⟨hm.1, WaitAll.of_queues (endLeasesOn_queues ..) hm.2⟩
      | branch t yes no =>
        try dsimp only
        refine exec_stmt p hp f _ _ hm (FramesAll.stmts ?_ hnext)
        split
        · exact (allBlock_branch hb).1
        · exact (allBlock_branch hb).2
      | «while» t body =>
        try dsimp only
        split
        · exact exec_stmt p hp f _ _ hm (FramesAll.stmts (allBlock_while hb) (FramesAll.stmts hb ht.tail))
        · exact exec_stmt p hp f _ _ hm hnext
      | loop body =>
        try dsimp only
        exact exec_stmt p hp f _ _ hm (FramesAll.stmts (allBlock_loop hb) (FramesAll.stmts hb ht.tail))
      | turn =>
        try dsimp only
        split
        · have h := hm.put (th := th) (by rw [heq]; exact ht)
          exact ⟨h.1, h.2⟩
        · have hb2 := hp
          simp only [Program.allStmts, Bool.and_eq_true] at hb2
          exact exec_stmt p hp f _ _ hm (FramesAll.stmts hb2.1.1.2 (FramesAll.mark (Or.inl rfl)
            (FramesAll.stmts hb2.2 (FramesAll.mark (Or.inr rfl) hnext))))
      | run s w =>
        try dsimp only
        split
        · exact exec_stmt p hp f _ _ hm hnext
        · refine StmtInv.put ?_ hnext
          refine ⟨?_, ?_⟩
          · rw [Machine.addJob_threads]; exact hm.1
          · rw [Machine.addJob_pools]; exact hm.2
      | step s dec g w =>
        try dsimp only
        split
        · exact exec_stmt p hp f _ _ hm hnext
        · exact StmtInv.put (m := { m with engines := _, admSeq := _ }) ⟨hm.1, hm.2⟩ hnext
      | grow i e =>
        try dsimp only
        split
        · have h := hm.put (th := th) (by rw [heq]; exact ht)
          exact ⟨h.1, h.2⟩
        · split
          · exact exec_stmt p hp f _ _ hm (FramesAll.stmts hnext.head (growPartReq_framesAll _ _ _ _ ht.tail))
          · split
            · refine exec_stmt p hp f _ _ ?_ (FramesAll.stmts hnext.head (growPartReq_framesAll _ _ _ _ ht.tail))
              exact ⟨hm.1, WaitAll.of_queues (setPool_queues _ _ _ rfl) hm.2⟩
            · have h := StmtInv.put (th := { th with k := .stmts rest :: k }) hm hnext
              exact ⟨h.1, h.2⟩
      | hold on reuse cache body =>
        try dsimp only
        split
        · refine StmtInv.put ?_ FramesAll.nil
          exact ⟨hm.1, WaitAll.of_queues ((endLeases_queues ..).trans (releaseAll_queues ..)) hm.2⟩
        · split
          · exact StmtInv.put hm hnext
          · have hw := (allBlock_cons hb).1
            refine StmtInv.put ?_ hnext
            refine ⟨hm.1, hm.2.set _ ?_⟩
            intro x hx
            split at hx
            · rcases mem_appendWaiter' _ _ x hx with hx | hx
              · exact hm.2.get _ x hx
              · rw [hx]; exact hw
            · rcases mem_insertByCreation _ _ _ _ _ _ _ x hx with hx | hx
              · exact hm.2.get _ x hx
              · rw [hx]; exact hw

theorem getWaiter_body : ∀ (ws : List Waiter), (∀ w ∈ ws, Stmt.allSub c (.hold w.on w.reuse w.cache w.body) = true) →
    ∀ j, Stmt.allBlock c (getWaiter ws j).body = true
  | [], _, _ => allBlock_nil c
  | w :: _, h, 0 => allBlock_hold (b := []) (by simpa [Stmt.allBlock] using h w List.mem_cons_self)
  | _ :: ws, h, j + 1 => getWaiter_body ws (fun x hx => h x (List.mem_cons_of_mem _ hx)) j

theorem runReady_stmt (p : Program) (hp : p.allStmts c = true) (f : Nat) (m : Machine) :
    StmtInv c m → StmtInv c (runReady p f m) := by
  fun_induction runReady p f m <;> intro hm
  · exact ⟨hm.1, hm.2⟩
  · exact hm
  · rename_i ih
    exact ih (exec_stmt p hp _ _ _ (by exact ⟨hm.1, hm.2⟩) (hm.get _))

theorem Machine.admitWaiter_stmt (p : Program) (m : Machine) (st : List Nat) (i j : Nat) (hm : StmtInv c m)
    (hj : j < countWaiters (getPool m.pools i).queue) : StmtInv c (m.admitWaiter p st i j) := by
  have hq := hm.2.get i
  have hb := getWaiter_body _ hq j
  have ht := hm.get (getWaiter (getPool m.pools i).queue j).thread
  simp only [Machine.admitWaiter]
  refine StmtInv.put ?_ ?_
  · refine ⟨hm.1, WaitAll.of_queues (admitOn_queues ..) (hm.2.set i (v := { getPool m.pools i with
      queue := removeWaiter (getPool m.pools i).queue j }) ?_)⟩
    exact fun x hx => hq x (mem_removeWaiter _ _ _ hx)
  · exact FramesAll.stmts hb (FramesAll.cons (c := c) (show Stmt.allSub c (.hold _ _ _ _) = true from
      hq _ (getWaiter_mem _ j hj)) ht)

theorem retryQueue_stmt (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    StmtInv c m → StmtInv c (retryQueue p f m i b).1
  | 0, m, i, b, hm => ⟨hm.1, hm.2⟩
  | f + 1, m, i, b, hm => by
    simp only [retryQueue]
    split
    · exact hm
    · next _ hd tl hq =>
      split
      · have hj : select p m i (hd :: tl) < countWaiters (getPool m.pools i).queue := by
          rw [hq]; exact select_lt p m i hd tl
        have h := Machine.admitWaiter_stmt p m [] i (select p m i (hd :: tl)) hm hj
        exact retryQueue_stmt p f _ i true (by exact ⟨h.1, h.2⟩)
      · exact hm

theorem Machine.grownReq_stmt (p : Program) (m : Machine) (t i want req : Nat) (h : Held) (hm : StmtInv c m) :
    StmtInv c (m.grownReq p t i want req h) := by
  simp only [Machine.grownReq]
  refine StmtInv.put ?_ (growPartReq_framesAll _ _ _ _ (hm.get t))
  exact ⟨hm.1, WaitAll.of_queues (setPool_queues _ _ _ rfl) hm.2⟩

theorem retryGrowers_stmt (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    StmtInv c m → StmtInv c (retryGrowers p f m i b).1
  | 0, m, i, b, hm => ⟨hm.1, hm.2⟩
  | f + 1, m, i, b, hm => by
    simp only [retryGrowers]
    split
    · exact hm
    · next x hx =>
      split
      · exact hm
      · next hh hpart =>
        split
        · have h := Machine.grownReq_stmt p m x.thread i (roundUp (getAt p.blocks i) x.req) x.req hh hm
          exact retryGrowers_stmt p f _ i true (by exact ⟨h.1, h.2⟩)
        · exact hm

theorem retryPools_stmt (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    StmtInv c m → StmtInv c (retryPools p f n i m b).1 := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    apply ih
    show StmtInv c (retryPool p _ _ _ _).1
    unfold retryPool
    split
    · exact retryQueue_stmt p _ _ _ _ (retryGrowers_stmt p _ _ _ _ hm)
    · exact retryGrowers_stmt p _ _ _ _ hm

theorem settle_stmt (p : Program) (hp : p.allStmts c = true) (f : Nat) (m : Machine) :
    StmtInv c m → StmtInv c (settle p f m) := by
  fun_induction settle p f m <;> intro hm
  · exact ⟨hm.1, hm.2⟩
  · rename_i ih
    exact ih (retryPools_stmt p _ _ _ _ _ (runReady_stmt p hp _ _ hm))
  · exact retryPools_stmt p _ _ _ _ _ (runReady_stmt p hp _ _ hm)

theorem Machine.grown_stmt (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hm : StmtInv c m) :
    StmtInv c (m.grown p t i want h) := by
  simp only [Machine.grown]
  refine StmtInv.put ?_ (growPart_framesAll _ _ _ (hm.get t))
  exact ⟨hm.1, WaitAll.of_queues (setPool_queues _ _ _ rfl) hm.2⟩

/-- What a preemption leaves of the victim's continuation is a suffix of it, and the hold it returns to
queue again is one a release frame of it carried. -/
theorem abandonTo_framesAll (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), FramesAll c k →
    FramesAll c (abandonTo blocks caps serial attrs now i ps k).2.2 ∧
      ∀ w, (abandonTo blocks caps serial attrs now i ps k).2.1 = some w →
        Stmt.allSub c (.hold w.on w.reuse w.cache w.body) = true
  | _, [], _ => ⟨FramesAll.nil, fun w e => by simp [abandonTo] at e⟩
  | ps, .release held w :: k, h => by
    simp only [abandonTo]
    split
    · refine ⟨h.tail, fun w' e => ?_⟩
      cases e
      exact h.headAll
    · exact abandonTo_framesAll blocks caps serial attrs now i _ k h.tail
  | ps, .stmts _ :: k, h => abandonTo_framesAll blocks caps serial attrs now i ps k h.tail
  | ps, .submit :: k, h => abandonTo_framesAll blocks caps serial attrs now i ps k h.tail
  | ps, .answer :: k, h => abandonTo_framesAll blocks caps serial attrs now i ps k h.tail

/-- A preemption keeps every block a thread will run and every waiting hold satisfying `c`: the victim
keeps a suffix of its continuation, and the hold requeued is one its release frame carried. -/
theorem Machine.preempt_stmt (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (hm : StmtInv c m) :
    StmtInv c (m.preempt p s i t b).1 := by
  have ha := abandonTo_framesAll p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i
    m.pools _ (hm.get t)
  have hq : WaitAll c (abandonTo p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i
      m.pools (getThread m.threads t).k).1 := WaitAll.of_queues (abandonTo_queues ..) hm.2
  simp only [Machine.preempt]
  cases hA : (abandonTo p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i m.pools
      (getThread m.threads t).k).2.1 with
  | none => exact ⟨hm.1, hm.2⟩
  | some w =>
    have hw := ha.2 w hA
    try dsimp only
    refine StmtInv.put ?_ ha.1
    refine ⟨hm.1, hq.set _ ?_⟩
    intro x hx
    dsimp only at hx
    repeat' split at hx
    all_goals first
      | (rcases List.mem_cons.1 hx with e | e
         · rw [e]; exact hw
         · exact hq.get _ x e)
      | (rcases mem_appendWaiter' _ _ x hx with e | e
         · exact hq.get _ x e
         · rw [e]; exact hw)
      | (rcases mem_insertByCreation _ _ _ _ _ _ _ x hx with e | e
         · exact hq.get _ x e
         · rw [e]; exact hw)

theorem growPreempting_stmt (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    StmtInv c m → StmtInv c (growPreempting p s i want t f m b).1 := by
  fun_induction growPreempting p s i want t f m b <;> intro hm
  all_goals first
    | exact ⟨hm.1, hm.2⟩
    | exact Machine.grown_stmt p _ _ _ _ _ hm
    | exact Machine.preempt_stmt p _ _ _ _ _ hm
    | (rename_i ih; exact ih (Machine.preempt_stmt p _ _ _ _ _ hm))

theorem StmtInv.served {m : Machine} (hm : StmtInv c m) (s : Nat) (b : Batch) (r : Resident) (n : Nat) :
    StmtInv c (m.served s b r n).1 := ⟨hm.1, hm.2⟩

theorem Machine.serveOne_stmt (p : Program) (s : Nat) (m : Machine) (b : Batch)
    (r : Resident) (n : Nat) (hm : StmtInv c m) : StmtInv c (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals first
    | exact hm
    | exact Machine.grown_stmt p _ _ _ _ _ hm
    | exact (Machine.grown_stmt p _ _ _ _ _ hm).served _ _ _ _
    | exact growPreempting_stmt p _ _ _ _ _ _ _ hm
    | exact (growPreempting_stmt p _ _ _ _ _ _ _ hm).served _ _ _ _

theorem serveOrdered_stmt (p : Program) (s : Nat) (m : Machine)
    (running : List Nat) (chunk : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident)
    (hm : StmtInv c m) : StmtInv c (serveOrdered p s m running chunk q b keys rs).1 := by
  have hs : ∀ (ts : List Nat) (m : Machine) (b : Batch), StmtInv c m → StmtInv c (serveIn p s chunk q ts m b).1 := by
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
        | exact Machine.serveOne_stmt p _ _ _ _ _ hm
        | exact ih _ _ (Machine.serveOne_stmt p _ _ _ _ _ hm)
  cases keys <;> simp only [serveOrdered] <;> exact hs _ m b hm

/-! ### Both invariants, and the admissions -/

/-- KV conservation with its ledger, and every waiting hold one that names each pool once. -/
def KvInvRun (p : Program) (m : Machine) : Prop := KvRun p.caps m ∧ StmtInv holdsOnceOn m

/-- The hold waiting at `j` in pool `i`'s queue names each pool once. -/
theorem KvInvRun.nodup {p : Program} {m : Machine} (hm : KvInvRun p m) (i j : Nat)
    (hj : j < countWaiters (getPool m.pools i).queue) :
    ((getWaiter (getPool m.pools i).queue j).on.map HoldOn.pool).Nodup := by
  have h := hm.2.2.get i _ (getWaiter_mem _ j hj)
  exact distinctPools_nodup _ (Stmt.allSub_self _ _ h)

theorem admitOne_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f s chunk i j : Nat) (q : Option Expr) (m : Machine) (b : Batch) (hm : KvInvRun p m)
    (hj : j < countWaiters (getPool m.pools i).queue)
    (hfit : fits p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial,
      admissionStage chunk b.budget⟩
      (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now
      (getWaiter (getPool m.pools i).queue j).on = true) :
    KvInvRun p (admitOne p f s chunk i j q m b).1 := by
  have h1 := Machine.admitWaiter_kv p m (admissionStage chunk b.budget) i j hm.1 hfit (hm.nodup i j hj)
  have h1' := Machine.admitWaiter_stmt p m (admissionStage chunk b.budget) i j hm.2 hj
  have h2 := exec_kv p f _ (getThread (m.admitWaiter p (admissionStage chunk b.budget) i j).threads
    (getWaiter (getPool m.pools i).queue j).thread) h1.1 h1.2.1 (Ledger.take h1.2.2 h1.2.1 _)
  have h2' := exec_stmt p hp f _ _ h1' (h1'.get (getWaiter (getPool m.pools i).queue j).thread)
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact ⟨h2, h2'⟩
    | exact ⟨Machine.serveOne_kv p _ _ _ _ _ h2, Machine.serveOne_stmt p _ _ _ _ _ h2'⟩

theorem admitWaiting_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (s c' : Nat) (q : Option Expr) (gated : Bool) :
    ∀ (f : Nat) (m : Machine) (b : Batch), KvInvRun p m → KvInvRun p (admitWaiting p s c' q gated f m b).1
  | 0, m, _, hm => ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  | f + 1, m, b, hm => by
    simp only [admitWaiting]
    split
    · exact hm
    · split
      · exact hm
      · next i hi =>
        obtain ⟨_, w, ws, hq⟩ := firstQueue_some s 0 p.admitVia m.pools i hi
        rw [Nat.sub_zero] at hq
        split
        · next hfit =>
          have hj : select p m i (getPool m.pools i).queue < countWaiters (getPool m.pools i).queue := by
            rw [hq]; exact select_lt p m i w ws
          exact admitWaiting_kvInv p hp s c' q gated f _ _
            (admitOne_kvInv p hp f s c' i _ q m b hm hj hfit)
        · exact hm

theorem startIteration_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f s : Nat) (eng : Engine) (m : Machine) (hm : KvInvRun p m) :
    KvInvRun p (startIteration p f s eng m) := by
  have hs : ∀ (running : List Nat) (c' : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident),
      KvInvRun p (serveOrdered p s m running c' q b keys rs).1 :=
    fun running c' q b keys rs => ⟨serveOrdered_kv p s m running c' q b keys rs hm.1,
      serveOrdered_stmt p s m running c' q b keys rs hm.2⟩
  simp only [startIteration]
  repeat' split
  all_goals first
    | exact admitWaiting_kvInv p hp _ _ _ _ _ _ _ (hs _ _ _ _ _ _)
    | (have h := admitWaiting_kvInv p hp _ _ _ _ _ _ _ (hs _ _ _ _ _ _)
       exact ⟨⟨h.1.1, h.1.2.1, h.1.2.2⟩, ⟨h.2.1, h.2.2⟩⟩)

theorem retryQueue_kvInv (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    KvInvRun p m → KvInvRun p (retryQueue p f m i b).1
  | 0, m, i, b, hm => ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  | f + 1, m, i, b, hm => by
    simp only [retryQueue]
    split
    · exact hm
    · next _ hd tl hq =>
      split
      · next hfit =>
        have hj : select p m i (hd :: tl) < countWaiters (getPool m.pools i).queue := by
          rw [hq]; exact select_lt p m i hd tl
        have hq' : getWaiter (getPool m.pools i).queue (select p m i (hd :: tl)) = getWaiter (hd :: tl) (select p m i (hd :: tl)) := by
          rw [hq]
        have hfit' : fits p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue
            (select p m i (hd :: tl))).thread).serial, []⟩
            (getThread m.threads (getWaiter (getPool m.pools i).queue (select p m i (hd :: tl))).thread).attrs m.now
            (getWaiter (getPool m.pools i).queue (select p m i (hd :: tl))).on = true := by
          rw [hq']; exact hfit
        have h1 := Machine.admitWaiter_kv p m [] i _ hm.1 hfit' (hm.nodup i _ hj)
        have h1' := Machine.admitWaiter_stmt p m [] i (select p m i (hd :: tl)) hm.2 hj
        exact retryQueue_kvInv p f _ i true ⟨⟨h1.1, h1.2.1, h1.2.2⟩, ⟨h1'.1, h1'.2⟩⟩
      · exact hm

theorem retryGrowers_kvInv (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    KvInvRun p m → KvInvRun p (retryGrowers p f m i b).1
  | 0, m, i, b, hm => ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  | f + 1, m, i, b, hm => by
    simp only [retryGrowers]
    split
    · exact hm
    · next x hx =>
      split
      · exact hm
      · next hh hpart =>
        split
        · next hfit =>
          have h1 := Machine.grownReq_kv p m x.thread i (roundUp (getAt p.blocks i) x.req) x.req hh hm.1 hpart hfit
          have h1' := Machine.grownReq_stmt (c := holdsOnceOn) p m x.thread i (roundUp (getAt p.blocks i) x.req) x.req hh hm.2
          exact retryGrowers_kvInv p f _ i true ⟨⟨h1.1, h1.2.1, h1.2.2⟩, ⟨h1'.1, h1'.2⟩⟩
        · exact hm

theorem retryPools_kvInv (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    KvInvRun p m → KvInvRun p (retryPools p f n i m b).1 := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    apply ih
    show KvInvRun p (retryPool p _ _ _ _).1
    unfold retryPool
    split
    · exact retryQueue_kvInv p _ _ _ _ (retryGrowers_kvInv p _ _ _ _ hm)
    · exact retryGrowers_kvInv p _ _ _ _ hm

theorem settle_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f : Nat) (m : Machine) :
    KvInvRun p m → KvInvRun p (settle p f m) := by
  fun_induction settle p f m <;> intro hm
  · exact ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  · rename_i ih
    exact ih (retryPools_kvInv p _ _ _ _ _ ⟨runReady_kv p _ _ hm.1, runReady_stmt p hp _ _ hm.2⟩)
  · exact retryPools_kvInv p _ _ _ _ _ ⟨runReady_kv p _ _ hm.1, runReady_stmt p hp _ _ hm.2⟩

/-! ### Events, the engines' turn, the loop, and the run -/

theorem Machine.advanceHolds_stmt : ∀ (rs : List Resident) (m : Machine), StmtInv c m → StmtInv c (m.advanceHolds rs)
  | [], m, hm => hm
  | r :: rs, m, hm => by
    simp only [Machine.advanceHolds]
    split
    all_goals first
      | exact Machine.advanceHolds_stmt rs m hm
      | exact Machine.advanceHolds_stmt rs _ (hm.put (advancePart_framesAll _ _ _ (hm.get _)))

theorem fire_stmt (p : Program) (m : Machine) (w : Wake) (hm : StmtInv c m) : StmtInv c (fire p m w) := by
  cases w with
  | resume t => exact hm
  | arrival a =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | fifoDone s' t =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | iterationEnd s' =>
    simp only [fire]
    have ha := Machine.advanceHolds_stmt (getEngineState m.engines s').residents m hm
    exact ⟨ha.1, ha.2⟩
  | leaseEnd t id =>
    simp only [fire]
    split
    · exact hm
    · refine StmtInv.put ?_ (hm.get t)
      exact ⟨hm.1, WaitAll.of_queues (endLease_queues ..) hm.2⟩

theorem fire_kvInv (p : Program) (m : Machine) (w : Wake) (hm : KvInvRun p m) : KvInvRun p (fire p m w) :=
  ⟨fire_kv p m w hm.1, fire_stmt p m w hm.2⟩

theorem startPass_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f : Nat) (ss : List Service) (s : Nat) (tried : List Nat) (m : Machine) (a : Bool) :
    KvInvRun p m → KvInvRun p (startPass p f ss s tried m a).1 := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_kvInv p hp _ _ (startIteration_kvInv p hp _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_kvInv p hp _ _ (startIteration_kvInv p hp _ _ _ _ hm)))

theorem endOfInstant_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f : Nat) (m : Machine) (hm : KvInvRun p m) : KvInvRun p (endOfInstant p f m) := by
  have hse : ∀ n tried m', KvInvRun p m' → KvInvRun p (startEngines p f n tried m') := by
    intro n tried m'
    fun_induction startEngines p f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPass_kvInv p hp _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPass_kvInv p hp _ _ _ _ _ _ hm'))
  simp only [endOfInstant]
  split
  · exact hm
  · exact hse _ _ _ hm

theorem loop_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) (f : Nat) (m : Machine) : KvInvRun p m → KvInvRun p (loop p f m) := by
  fun_induction loop p f m <;> intro hm
  · exact ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩
  · exact hm
  · rename_i ih
    exact ih (endOfInstant_kvInv p hp _ _ (settle_kvInv p hp _ _
      (fire_kvInv p _ _ ⟨⟨hm.1.1, hm.1.2.1, hm.1.2.2⟩, ⟨hm.2.1, hm.2.2⟩⟩)))

theorem arrivals_serial (p : Program) : ∀ (n s j : Nat), j < (arrivals p n s).length →
    (getThread (arrivals p n s) j).serial = s + j
  | 0, _, _, h => by simp [arrivals] at h
  | n + 1, s, 0, _ => by simp [arrivals, getThread, arrive]
  | n + 1, s, j + 1, h => by
    simp only [arrivals, getThread]
    simp only [arrivals, List.length_cons] at h
    have := arrivals_serial p n (s + 1) j (by omega)
    omega

theorem threadsHeld_arrivals (p : Program) (i : Nat) : ∀ (n s : Nat), threadsHeld i (arrivals p n s) = 0
  | 0, _ => rfl
  | n + 1, s => by
    simp only [arrivals, threadsHeld, threadsHeld_arrivals p i n (s + 1)]
    simp [Thread.heldOn, arrive, frameHeld, leasesHeld]

theorem arrivals_frames (p : Program) (hp : p.allStmts c = true) : ∀ (n s : Nat), ∀ th ∈ arrivals p n s, FramesAll c th.k
  | 0, _ => fun _ h => by simp [arrivals] at h
  | n + 1, s => by
    intro th h
    simp only [arrivals, List.mem_cons] at h
    rcases h with h | h
    · rw [h]
      have hb := hp
      simp only [Program.allStmts, Bool.and_eq_true] at hb
      exact FramesAll.stmts hb.1.1.1 (FramesAll.stmts hb.1.2 FramesAll.nil)
    · exact arrivals_frames p hp n (s + 1) th h

theorem getPool_emptyPools : ∀ (cs : List Nat) (j : Nat), getPool (emptyPools cs) j = ⟨0, 0, [], []⟩
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | _ :: cs, j + 1 => getPool_emptyPools cs j

theorem initial_kvInv (p : Program) (hp : p.allStmts holdsOnceOn = true) : KvInvRun p (initial p) := by
  have ht : (initial p).threads = arrivals p p.sessions 0 := by
    unfold initial; dsimp only; split <;> rfl
  have hq : (initial p).pools = emptyPools p.caps := by
    unfold initial; dsimp only; split <;> rfl
  refine ⟨⟨?_, ?_, ?_⟩, ⟨?_, ?_⟩⟩
  · intro j
    rw [hq, getPool_emptyPools]
    simp [cachedUnits]
  · intro j hj
    rw [ht] at hj ⊢
    rw [arrivals_serial p _ _ _ hj]
    omega
  · intro i _
    rw [ht, threadsHeld_arrivals]
    exact Nat.zero_le _
  · rw [ht]; exact arrivals_frames p hp _ _
  · rw [hq]
    intro q hqm
    have : ∀ (cs : List Nat), ∀ q ∈ emptyPools cs, q.queue = [] := by
      intro cs
      induction cs with
      | nil => intro q h; simp [emptyPools] at h
      | cons x xs ih =>
        intro q h
        simp only [emptyPools, List.mem_cons] at h
        rcases h with h | h
        · rw [h]
        · exact ih q h
    intro w hw
    rw [this _ q hqm] at hw
    simp at hw

/-- KV conservation (issue 14, result 6) at the end of every run, over the kernel interpreter: every pool's
allocations and cache are within its cap (`used + cachedUnits entries ≤ cap`), for every program whose
hold statements name each pool once (`holdsOnceOn` on every statement, as `HoldsOnce.of_check` decides
it), preemption included (`preempt none`, `preempt lifo`, `preempt by (keys)`, requeued at the head or the
tail), whatever its pools' eviction (`evict lru` or `evict by (keys)`), and any fuel. (Every function of the
machine keeps it, so it holds at every point of the run.) The hypothesis is what an admission needs: a
hold that named a pool twice would pass `fits` for each part against the same `used` and overflow the
pool; a preemption requeues a hold a release frame carried, which came from a hold statement, so it names
each pool once too (`FrameAll`). -/
theorem runProgram_kv_conserved (p : Program) (fuel : Nat) (hp : p.allStmts holdsOnceOn = true) :
    ∀ j, (getPool (runProgram p fuel).pools j).used + cachedUnits (getPool (runProgram p fuel).pools j).entries ≤
      getAt p.caps j := by
  have h := loop_kvInv p hp fuel _ (endOfInstant_kvInv p hp fuel _
    (settle_kvInv p hp fuel _ (initial_kvInv p hp)))
  exact h.1.1

/-- The statement before preemption was covered (`NoPreemption p` among its hypotheses), now a corollary:
the hypothesis is not needed. -/
theorem runProgram_kv_conserved_noPreemption (p : Program) (fuel : Nat) (hp : p.allStmts holdsOnceOn = true)
    (_ : NoPreemption p) :
    ∀ j, (getPool (runProgram p fuel).pools j).used + cachedUnits (getPool (runProgram p fuel).pools j).entries ≤
      getAt p.caps j :=
  runProgram_kv_conserved p fuel hp

end Serq.Kernel
