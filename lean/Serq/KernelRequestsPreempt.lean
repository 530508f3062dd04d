module

public import Serq.KernelRequests

/-! # Request conservation's turn half under preemption (issue 14, result 6)

`Serq.KernelRequests` keeps the turn invariant (`ReqInv`: every thread `TurnOk`, every waiting hold's
body turn-free) through every function of the machine but a preemption, and its engines' lemmas take
`NoPreemption`. A preemption (`Machine.preempt`) drops a prefix of its victim's continuation, up to and
with the release frame of the hold that holds the pool (`abandonTo`), and puts that hold back in its first
pool's queue. The turn invariant survives that when the dropped prefix holds no pending answer nor
submission, and when the requeued hold's body is turn-free. Both are what `RelOk` says of a continuation:

* no release frame after a `Frame.submit` or a `Frame.answer` (a hold's scope never contains its
  thread's pending submission or answer: no hold body runs a `turn`), so the frames `abandonTo` drops,
  which stop at a release frame, are no submission nor answer (`abandonTo_rel`: the answer pending is the
  same, and what is left is a suffix, `FrontOk` and `RelOk` still);
* a block run before a release frame runs no `turn` (it is part of a hold's body; that is what lets a
  `turn` statement find no release frame after it, and so keeps the first clause);
* a release frame's hold has a body that is turn-free and has turn-free holds (`BodyOk`, as a waiting
  hold's in `WaitersOk`): it is the hold a preemption requeues.

`RelInv` (every thread's continuation `RelOk`) holds of every arriving session (its continuation has no
release frame), and is kept, with `ReqInv`, by every function of the machine (`exec_rel`,
`Machine.admitWaiter_reqP`, `settle_reqP`, `Machine.preempt_reqP`, `growPreempting_reqP`,
`Machine.serveOne_reqP`, `startIteration_reqP`, `endOfInstant_reqP`, `fire_reqP`, `loop_reqP`), preemption
included. So `runProgram_requests` holds without `NoPreemption`: for every run of every program with
`DistinctProgram` and `TurnsOutside`, under every `preempt` mode.
-/
@[expose] public section

namespace Serq.Kernel

/-! ### Release frames in a continuation -/

/-- The continuation has a hold's release frame. -/
def relIn : List Frame → Bool
  | [] => false
  | .release _ _ :: _ => true
  | .stmts _ :: k => relIn k
  | .submit :: k => relIn k
  | .answer :: k => relIn k

/-- No release frame after a submission or an answer; a block before a release frame runs no `turn`; a
release frame's hold has a turn-free body with turn-free holds. -/
def RelOk : List Frame → Prop
  | [] => True
  | .answer :: k => relIn k = false
  | .submit :: k => relIn k = false
  | .stmts b :: k => (relIn k = true → TurnFree b) ∧ RelOk k
  | .release _ w :: k => BodyOk w.body ∧ RelOk k

/-- Every thread's continuation is `RelOk`. -/
def RelInv (m : Machine) : Prop := ∀ th ∈ m.threads, RelOk th.k

/-- The turn invariant with `RelInv`: what preemption needs. -/
def ReqInvP (m : Machine) : Prop := ReqInv m ∧ RelInv m

theorem RelOk.of_relIn : ∀ (k : List Frame), relIn k = false → RelOk k
  | [], _ => trivial
  | .answer :: _, h => h
  | .submit :: _, h => h
  | .stmts _ :: k, h => ⟨fun e => absurd (e.symm.trans h) (by decide), RelOk.of_relIn k h⟩
  | .release _ _ :: _, h => absurd h (by simp [relIn])

theorem RelOk.tail : ∀ {fr : Frame} {k : List Frame}, RelOk (fr :: k) → RelOk k
  | .answer, k, h => RelOk.of_relIn k h
  | .submit, k, h => RelOk.of_relIn k h
  | .stmts _, _, h => h.2
  | .release _ _, _, h => h.2

theorem releaseIn_rel (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame),
    relIn (releaseIn blocks caps serial attrs now i ps k).2 = relIn k ∧
      (RelOk k → RelOk (releaseIn blocks caps serial attrs now i ps k).2)
  | ps, [] => ⟨rfl, id⟩
  | ps, .answer :: k => ⟨rfl, id⟩
  | ps, .release held w :: k => by
    simp only [releaseIn]
    split
    · exact ⟨rfl, id⟩
    · have ih := releaseIn_rel blocks caps serial attrs now i ps k
      exact ⟨rfl, fun h => ⟨h.1, ih.2 h.2⟩⟩
  | ps, .stmts b :: k => by
    have ih := releaseIn_rel blocks caps serial attrs now i ps k
    exact ⟨ih.1, fun h => ⟨fun e => h.1 (ih.1 ▸ e), ih.2 h.2⟩⟩
  | ps, .submit :: k => by
    have ih := releaseIn_rel blocks caps serial attrs now i ps k
    exact ⟨ih.1, fun h => ih.1.trans h⟩

theorem growPart_rel : ∀ (k : List Frame) (i u : Nat),
    relIn (growPart k i u) = relIn k ∧ (RelOk k → RelOk (growPart k i u))
  | [], _, _ => ⟨rfl, id⟩
  | .answer :: k, _, _ => ⟨rfl, id⟩
  | .release held w :: k, i, u => by
    simp only [growPart]
    split
    · exact ⟨rfl, id⟩
    · have ih := growPart_rel k i u
      exact ⟨rfl, fun h => ⟨h.1, ih.2 h.2⟩⟩
  | .stmts b :: k, i, u => by
    have ih := growPart_rel k i u
    exact ⟨ih.1, fun h => ⟨fun e => h.1 (ih.1 ▸ e), ih.2 h.2⟩⟩
  | .submit :: k, i, u => by
    have ih := growPart_rel k i u
    exact ⟨ih.1, fun h => ih.1.trans h⟩

theorem growPartReq_rel : ∀ (k : List Frame) (i u r : Nat),
    relIn (growPartReq k i u r) = relIn k ∧ (RelOk k → RelOk (growPartReq k i u r))
  | [], _, _, _ => ⟨rfl, id⟩
  | .answer :: k, _, _, _ => ⟨rfl, id⟩
  | .release held w :: k, i, u, r => by
    simp only [growPartReq]
    split
    · exact ⟨rfl, id⟩
    · have ih := growPartReq_rel k i u r
      exact ⟨rfl, fun h => ⟨h.1, ih.2 h.2⟩⟩
  | .stmts b :: k, i, u, r => by
    have ih := growPartReq_rel k i u r
    exact ⟨ih.1, fun h => ⟨fun e => h.1 (ih.1 ▸ e), ih.2 h.2⟩⟩
  | .submit :: k, i, u, r => by
    have ih := growPartReq_rel k i u r
    exact ⟨ih.1, fun h => ih.1.trans h⟩

theorem advancePart_rel : ∀ (k : List Frame) (i u : Nat),
    relIn (advancePart k i u) = relIn k ∧ (RelOk k → RelOk (advancePart k i u))
  | [], _, _ => ⟨rfl, id⟩
  | .answer :: k, _, _ => ⟨rfl, id⟩
  | .release held w :: k, i, u => by
    simp only [advancePart]
    split
    · exact ⟨rfl, id⟩
    · have ih := advancePart_rel k i u
      exact ⟨rfl, fun h => ⟨h.1, ih.2 h.2⟩⟩
  | .stmts b :: k, i, u => by
    have ih := advancePart_rel k i u
    exact ⟨ih.1, fun h => ⟨fun e => h.1 (ih.1 ▸ e), ih.2 h.2⟩⟩
  | .submit :: k, i, u => by
    have ih := advancePart_rel k i u
    exact ⟨ih.1, fun h => ih.1.trans h⟩

/-! ### What a preemption drops -/

/-- A continuation with no release frame has no hold to requeue. -/
theorem abandonTo_none (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), relIn k = false →
    (abandonTo blocks caps serial attrs now i ps k).2.1 = none
  | _, [], _ => rfl
  | _, .release _ _ :: _, h => absurd h (by simp [relIn])
  | ps, .stmts _ :: k, h => abandonTo_none blocks caps serial attrs now i ps k h
  | ps, .submit :: k, h => abandonTo_none blocks caps serial attrs now i ps k h
  | ps, .answer :: k, h => abandonTo_none blocks caps serial attrs now i ps k h

/-- A preemption that requeues a hold drops no submission nor answer of its victim: the answer pending is
the same, what is left is a suffix of the continuation (`FrontOk`, `RelOk` still), and the hold's body is
turn-free. -/
theorem abandonTo_rel (blocks caps : List Nat) (serial : Nat) (attrs : List Nat) (now i : Nat) :
    ∀ (ps : List PoolState) (k : List Frame), RelOk k → ∀ w,
    (abandonTo blocks caps serial attrs now i ps k).2.1 = some w →
    answerIn (abandonTo blocks caps serial attrs now i ps k).2.2 = answerIn k ∧
      RelOk (abandonTo blocks caps serial attrs now i ps k).2.2 ∧ BodyOk w.body ∧
      (FrontOk k → FrontOk (abandonTo blocks caps serial attrs now i ps k).2.2)
  | _, [], _, w, e => absurd e (by simp [abandonTo])
  | ps, .release held w' :: k, h, w, e => by
    by_cases hc : (heldHas held i && !(heldPart held i).given) = true
    · simp only [abandonTo, hc, ↓reduceIte, Option.some.injEq] at e ⊢
      subst e
      exact ⟨rfl, h.2, h.1, id⟩
    · simp only [abandonTo, hc] at e ⊢
      exact abandonTo_rel blocks caps serial attrs now i _ k h.2 w e
  | ps, .stmts _ :: k, h, w, e => by
    have ih := abandonTo_rel blocks caps serial attrs now i ps k h.2 w e
    exact ⟨ih.1, ih.2.1, ih.2.2.1, fun hf => ih.2.2.2 hf.2.2⟩
  | ps, .submit :: k, h, w, e => by
    have hn := abandonTo_none blocks caps serial attrs now i ps k h
    exact absurd (hn.symm.trans e) (by simp)
  | ps, .answer :: k, h, w, e => by
    have hn := abandonTo_none blocks caps serial attrs now i ps k h
    exact absurd (hn.symm.trans e) (by simp)

/-! ### The machine -/

theorem RelInv.put {m : Machine} (hm : RelInv m) {th : Thread} (ht : RelOk th.k) : RelInv (m.put th) := by
  intro x hx
  rcases mem_setThread _ _ _ _ hx with hx | rfl
  · exact hm x hx
  · exact ht

theorem getThread_relOk : ∀ (l : List Thread) (i : Nat), (∀ th ∈ l, RelOk th.k) → RelOk (getThread l i).k
  | [], _, _ => trivial
  | t :: _, 0, h => h t List.mem_cons_self
  | _ :: ts, n + 1, h => getThread_relOk ts n (fun th hm => h th (List.mem_cons_of_mem _ hm))

theorem RelInv.get {m : Machine} (hm : RelInv m) (t : Nat) : RelOk (getThread m.threads t).k :=
  getThread_relOk _ _ hm

theorem RelInv.leaseTimer {m : Machine} (hm : RelInv m) (s : Nat) (d : Option Nat) : RelInv (m.leaseTimer s d) := by
  cases d
  · exact hm
  · exact hm

theorem RelInv.addJob {m : Machine} (hm : RelInv m) (p : Program) (s t w : Nat) : RelInv (m.addJob p s t w) := by
  intro x hx
  rw [Machine.addJob_threads] at hx
  exact hm x hx

/-! ### A thread's run -/

theorem exec_rel (p : Program) : ∀ (f : Nat) (m : Machine) (th : Thread), RelInv m → RelOk th.k →
    RelInv (exec p f m th)
  | 0, m, th, hm, ht => by
    simp only [exec]
    exact fun x hx => RelInv.put hm ht x hx
  | f + 1, m, th, hm, ht => by
    simp only [exec]
    split
    · next heq =>
      exact RelInv.put (m := { m with pools := _ }) hm (by show RelOk th.k; rw [heq]; trivial)
    · next k heq =>
      rw [heq] at ht
      exact exec_rel p f _ _ hm (RelOk.of_relIn k ht)
    · next k heq =>
      rw [heq] at ht
      split
      · exact exec_rel p f _ _ hm (RelOk.of_relIn k ht)
      · exact exec_rel p f _ _ hm (RelOk.of_relIn k ht)
    · next held w k heq =>
      rw [heq] at ht
      split
      · exact exec_rel p f _ _ hm ht.2
      · refine exec_rel p f _ _ (RelInv.leaseTimer ?_ _ _) ht.2
        exact hm
    · next k heq =>
      rw [heq] at ht
      exact exec_rel p f _ _ hm ht.2
    · next st rest k heq =>
      rw [heq] at ht
      have hnext : RelOk (.stmts rest :: k) := ⟨fun e => (allBlock_cons (ht.1 e)).2, ht.2⟩
      cases st with
      | set i e => exact exec_rel p f _ _ hm hnext
      | observe j e => exact exec_rel p f _ _ hm hnext
      | stop =>
        try dsimp only
        exact RelInv.put (m := { m with pools := _ }) hm trivial
      | release i =>
        try dsimp only
        split
        · have hr := releaseIn_rel p.blocks p.caps th.serial th.attrs m.now i m.pools k
          exact exec_rel p f _ _ hm ⟨fun e => (allBlock_cons (ht.1 (hr.1 ▸ e))).2, hr.2 ht.2⟩
        · exact exec_rel p f _ _ hm hnext
      | branch t yes no =>
        try dsimp only
        refine exec_rel p f _ _ hm ⟨fun e => ?_, hnext⟩
        split
        · exact (allBlock_branch (ht.1 e)).1
        · exact (allBlock_branch (ht.1 e)).2
      | «while» t body =>
        try dsimp only
        split
        · exact exec_rel p f _ _ hm ⟨fun e => allBlock_while (ht.1 e), ht⟩
        · exact exec_rel p f _ _ hm hnext
      | loop body =>
        try dsimp only
        exact exec_rel p f _ _ hm ⟨fun e => allBlock_loop (ht.1 e), ht⟩
      | turn =>
        try dsimp only
        split
        · have h := RelInv.put hm (th := th) (by rw [heq]; exact ht)
          exact fun x hx => h x hx
        · -- outside any hold: no release frame after the turn
          have hno : relIn k = false := by
            cases e : relIn k
            · rfl
            · exact (TurnFree.not_turn (ht.1 e)).elim
          refine exec_rel p f _ _ hm ?_
          exact ⟨fun e => absurd (e.symm.trans hno) (by decide), hno⟩
      | run s w =>
        try dsimp only
        split
        · exact exec_rel p f _ _ hm hnext
        · exact RelInv.put (hm.addJob p _ _ _) hnext
      | step s dec g w =>
        try dsimp only
        split
        · exact exec_rel p f _ _ hm hnext
        · exact RelInv.put (m := { m with engines := _, admSeq := _ }) hm hnext
      | grow j e =>
        try dsimp only
        have hg : ∀ u r, RelOk (.stmts rest :: growPartReq k j u r) := fun u r =>
          ⟨fun e => (allBlock_cons (ht.1 ((growPartReq_rel k j u r).1 ▸ e))).2, (growPartReq_rel k j u r).2 ht.2⟩
        split
        · exact fun x hx => RelInv.put hm (th := th) (by rw [heq]; exact ht) x hx
        · split
          · exact exec_rel p f _ _ hm (hg _ _)
          · split
            · exact exec_rel p f _ _ hm (hg _ _)
            · exact RelInv.put (m := { m with growers := _ }) hm hnext
      | hold on reuse cache body =>
        try dsimp only
        split
        · exact RelInv.put (m := { m with pools := _ }) hm trivial
        · split
          · exact RelInv.put hm hnext
          · exact RelInv.put (m := { m with pools := _ }) hm hnext

theorem exec_reqP (p : Program) (hp : TurnsOutside p) (f : Nat) (m : Machine) (th : Thread) (hm : ReqInvP m)
    (ht : TurnOk th) (hk : RelOk th.k) : ReqInvP (exec p f m th) :=
  ⟨exec_req p hp f m th hm.1 ht, exec_rel p f m th hm.2 hk⟩

theorem ReqInvP.get {m : Machine} (hm : ReqInvP m) (t : Nat) :
    TurnOk (getThread m.threads t) ∧ RelOk (getThread m.threads t).k :=
  ⟨hm.1.get t, hm.2.get t⟩

/-! ### Settling an instant -/

theorem runReady_rel (p : Program) (f : Nat) (m : Machine) : RelInv m → RelInv (runReady p f m) := by
  fun_induction runReady p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (exec_rel p _ _ _ (by exact hm) (hm.get _))

theorem runReady_reqP (p : Program) (hp : TurnsOutside p) (f : Nat) (m : Machine) (hm : ReqInvP m) :
    ReqInvP (runReady p f m) :=
  ⟨runReady_req p hp f m hm.1, runReady_rel p f m hm.2⟩

theorem Machine.admitWaiter_reqP (p : Program) (m : Machine) (st : List Nat) (i j : Nat) (hm : ReqInvP m) :
    ReqInvP (m.admitWaiter p st i j) := by
  refine ⟨Machine.admitWaiter_req p m st i j hm.1, ?_⟩
  have hw := getWaiter_bodyOk _ (hm.1.2.get i) j
  have hk := hm.2.get (getWaiter (getPool m.pools i).queue j).thread
  simp only [Machine.admitWaiter]
  exact RelInv.put (m := { m with pools := _, admSeq := _, progress := _ }) hm.2 ⟨fun _ => hw.1, hw, hk⟩

theorem retryQueue_reqP (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    ReqInvP m → ReqInvP (retryQueue p f m i b).1
  | 0, m, i, b, hm => hm
  | f + 1, m, i, b, hm => by
    simp only [retryQueue]
    split
    · exact hm
    · next _ hd tl _ =>
      split
      · have h := Machine.admitWaiter_reqP p m [] i (select p m i (hd :: tl)) hm
        exact retryQueue_reqP p f _ i true (by exact h)
      · exact hm

theorem Machine.grownReq_reqP (p : Program) (m : Machine) (t i want req : Nat) (h : Held) (hm : ReqInvP m) :
    ReqInvP (m.grownReq p t i want req h) := by
  refine ⟨Machine.grownReq_req p m t i want req h hm.1, ?_⟩
  simp only [Machine.grownReq]
  exact RelInv.put (m := { m with pools := _ }) hm.2 ((growPartReq_rel _ i want req).2 (hm.2.get t))

theorem retryGrowers_reqP (p : Program) : ∀ (f : Nat) (m : Machine) (i : Nat) (b : Bool),
    ReqInvP m → ReqInvP (retryGrowers p f m i b).1
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
        · have h := Machine.grownReq_reqP p m x.thread i (roundUp (getAt p.blocks i) x.req) x.req hh hm
          exact retryGrowers_reqP p f _ i true (by exact h)
        · exact hm

theorem retryPools_reqP (p : Program) (f n i : Nat) (m : Machine) (b : Bool) :
    ReqInvP m → ReqInvP (retryPools p f n i m b).1 := by
  fun_induction retryPools p f n i m b <;> intro hm
  · exact hm
  · rename_i ih
    apply ih
    show ReqInvP (retryPool p _ _ _ _).1
    unfold retryPool
    split
    · exact retryQueue_reqP p _ _ _ _ (retryGrowers_reqP p _ _ _ _ hm)
    · exact retryGrowers_reqP p _ _ _ _ hm

theorem settle_reqP (p : Program) (hp : TurnsOutside p) (f : Nat) (m : Machine) :
    ReqInvP m → ReqInvP (settle p f m) := by
  fun_induction settle p f m <;> intro hm
  · exact hm
  · rename_i ih
    exact ih (retryPools_reqP p _ _ _ _ _ (runReady_reqP p hp _ _ hm))
  · exact retryPools_reqP p _ _ _ _ _ (runReady_reqP p hp _ _ hm)

/-! ### An engine's iteration, preemption included -/

theorem Machine.grown_reqP (p : Program) (m : Machine) (t i want : Nat) (h : Held) (hm : ReqInvP m) :
    ReqInvP (m.grown p t i want h) := by
  refine ⟨Machine.grown_req p m t i want h hm.1, ?_⟩
  simp only [Machine.grown]
  exact RelInv.put (m := { m with pools := _ }) hm.2 ((growPart_rel _ i want).2 (hm.2.get t))

/-- A preemption keeps the turn invariant: the victim keeps a suffix of its continuation with the same
answer pending (`abandonTo_rel`), and the hold requeued has a turn-free body. -/
theorem Machine.preempt_reqP (p : Program) (s i t : Nat) (m : Machine) (b : Batch) (hm : ReqInvP m) :
    ReqInvP (m.preempt p s i t b).1 := by
  have ht := hm.1.get t
  have ha := abandonTo_rel p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i
    m.pools _ (hm.2.get t)
  have hq : WaitersOk (abandonTo p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i
      m.pools (getThread m.threads t).k).1 := WaitersOk.of_queues (abandonTo_queues ..) hm.1.2
  simp only [Machine.preempt]
  cases hA : (abandonTo p.blocks p.caps (getThread m.threads t).serial (getThread m.threads t).attrs m.now i m.pools
      (getThread m.threads t).k).2.1 with
  | none => exact ⟨⟨hm.1.1, hm.1.2⟩, hm.2⟩
  | some w =>
    have hw := ha w hA
    try dsimp only
    refine ⟨ReqInv.put ?_ ?_, RelInv.put ?_ ?_⟩
    rotate_left
    · exact ht.of rfl rfl rfl hw.1 (hw.2.2.2 ht.front)
    · exact hm.2
    · exact hw.2.1
    refine ⟨hm.1.1, hq.set _ ?_⟩
    intro x hx
    dsimp only at hx
    repeat' split at hx
    all_goals first
      | (rcases List.mem_cons.1 hx with e | e
         · rw [e]; exact hw.2.2.1
         · exact hq.get _ x e)
      | exact appendWaiter_bodyOk (by exact hw.2.2.1) _ (hq.get _) x hx
      | exact insertByCreation_bodyOk (by exact hw.2.2.1) _ _ _ _ _ _ (hq.get _) x hx

theorem growPreempting_reqP (p : Program) (s i want t f : Nat) (m : Machine) (b : Batch) :
    ReqInvP m → ReqInvP (growPreempting p s i want t f m b).1 := by
  fun_induction growPreempting p s i want t f m b <;> intro hm
  all_goals first
    | exact ⟨⟨hm.1.1, hm.1.2⟩, hm.2⟩
    | exact Machine.grown_reqP p _ _ _ _ _ hm
    | exact Machine.preempt_reqP p _ _ _ _ _ hm
    | (rename_i ih; exact ih (Machine.preempt_reqP p _ _ _ _ _ hm))

theorem ReqInvP.served {m : Machine} (hm : ReqInvP m) (s : Nat) (b : Batch) (r : Resident) (n : Nat) :
    ReqInvP (m.served s b r n).1 := hm

theorem Machine.serveOne_reqP (p : Program) (s : Nat) (m : Machine) (b : Batch) (r : Resident) (n : Nat)
    (hm : ReqInvP m) : ReqInvP (m.serveOne p s b r n).1 := by
  simp only [Machine.serveOne]
  repeat' split
  all_goals try dsimp only
  all_goals first
    | exact hm
    | exact hm.served _ _ _ _
    | exact (Machine.grown_reqP p _ _ _ _ _ hm).served _ _ _ _
    | exact growPreempting_reqP p _ _ _ _ _ _ _ hm
    | exact (growPreempting_reqP p _ _ _ _ _ _ _ hm).served _ _ _ _

theorem serveIn_reqP (p : Program) (s chunk : Nat) (q : Option Expr) :
    ∀ (ts : List Nat) (m : Machine) (b : Batch), ReqInvP m → ReqInvP (serveIn p s chunk q ts m b).1 := by
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
      | exact Machine.serveOne_reqP p _ _ _ _ _ hm
      | exact ih _ _ (Machine.serveOne_reqP p _ _ _ _ _ hm)

theorem admitOne_reqP (p : Program) (hp : TurnsOutside p) (f s chunk i j : Nat) (q : Option Expr) (m : Machine)
    (b : Batch) (hm : ReqInvP m) : ReqInvP (admitOne p f s chunk i j q m b).1 := by
  have h1 := Machine.admitWaiter_reqP p m (admissionStage chunk b.budget) i j hm
  have h2 := exec_reqP p hp f _ _ h1 (h1.get (getWaiter (getPool m.pools i).queue j).thread).1
    (h1.get (getWaiter (getPool m.pools i).queue j).thread).2
  simp only [admitOne]
  repeat' split
  all_goals first
    | exact h2
    | exact Machine.serveOne_reqP p _ _ _ _ _ h2

theorem admitWaiting_reqP (p : Program) (hp : TurnsOutside p) (s c : Nat) (q : Option Expr) (g : Bool) (f : Nat)
    (m : Machine) (b : Batch) : ReqInvP m → ReqInvP (admitWaiting p s c q g f m b).1 := by
  fun_induction admitWaiting p s c q g f m b <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih (admitOne_reqP p hp _ _ _ _ _ _ _ _ hm))

theorem startIteration_reqP (p : Program) (hp : TurnsOutside p) (f s : Nat) (eng : Engine) (m : Machine)
    (hm : ReqInvP m) : ReqInvP (startIteration p f s eng m) := by
  have hs : ∀ (running : List Nat) (c : Nat) (q : Option Expr) (b : Batch) (keys : List Expr) (rs : List Resident),
      ReqInvP (serveOrdered p s m running c q b keys rs).1 := by
    intro running c q b keys rs
    cases keys <;> simp only [serveOrdered] <;> exact serveIn_reqP p s _ _ _ m b hm
  simp only [startIteration]
  repeat' split
  all_goals first
    | exact admitWaiting_reqP p hp _ _ _ _ _ _ _ (hs _ _ _ _ _ _)
    | exact ⟨⟨(admitWaiting_reqP p hp _ _ _ _ _ _ _ (hs _ _ _ _ _ _)).1.1,
        (admitWaiting_reqP p hp _ _ _ _ _ _ _ (hs _ _ _ _ _ _)).1.2⟩,
        (admitWaiting_reqP p hp _ _ _ _ _ _ _ (hs _ _ _ _ _ _)).2⟩

theorem startPass_reqP (p : Program) (hp : TurnsOutside p) (f : Nat) (ss : List Service) (s : Nat)
    (tried : List Nat) (m : Machine) (a : Bool) : ReqInvP m → ReqInvP (startPass p f ss s tried m a).1 := by
  fun_induction startPass p f ss s tried m a <;> intro hm
  all_goals first
    | exact hm
    | (rename_i ih; exact ih hm)
    | exact settle_reqP p hp _ _ (startIteration_reqP p hp _ _ _ _ hm)
    | (rename_i ih; exact ih (settle_reqP p hp _ _ (startIteration_reqP p hp _ _ _ _ hm)))

theorem endOfInstant_reqP (p : Program) (hp : TurnsOutside p) (f : Nat) (m : Machine) (hm : ReqInvP m) :
    ReqInvP (endOfInstant p f m) := by
  have hse : ∀ n tried m', ReqInvP m' → ReqInvP (startEngines p f n tried m') := by
    intro n tried m'
    fun_induction startEngines p f n tried m' <;> intro hm'
    all_goals first
      | exact hm'
      | exact startPass_reqP p hp _ _ _ _ _ _ hm'
      | (rename_i ih; exact ih (startPass_reqP p hp _ _ _ _ _ _ hm'))
  simp only [endOfInstant]
  split
  · exact hm
  · exact hse _ _ _ hm

/-! ### Events, and the run -/

theorem Machine.advanceHolds_rel : ∀ (rs : List Resident) (m : Machine), RelInv m → RelInv (m.advanceHolds rs)
  | [], m, hm => hm
  | r :: rs, m, hm => by
    simp only [Machine.advanceHolds]
    split
    all_goals first
      | exact Machine.advanceHolds_rel rs m hm
      | exact Machine.advanceHolds_rel rs _ (hm.put ((advancePart_rel _ _ _).2 (hm.get r.thread)))

theorem fire_rel (p : Program) (m : Machine) (w : Wake) (hm : RelInv m) : RelInv (fire p m w) := by
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
    · exact RelInv.put (m := { m with pools := _ }) hm (hm.get t)
  | fifoDone s' t =>
    simp only [fire]
    split
    · exact hm
    · exact hm
  | iterationEnd s' =>
    simp only [fire]
    have ha := Machine.advanceHolds_rel (getEngineState m.engines s').residents m hm
    exact fun x hx => ha x hx

theorem fire_reqP (p : Program) (m : Machine) (w : Wake) (hm : ReqInvP m) : ReqInvP (fire p m w) :=
  ⟨fire_req p m w hm.1, fire_rel p m w hm.2⟩

theorem loop_reqP (p : Program) (hp : TurnsOutside p) (f : Nat) (m : Machine) : ReqInvP m → ReqInvP (loop p f m) := by
  fun_induction loop p f m <;> intro hm
  · exact hm
  · exact hm
  · rename_i ih
    exact ih (endOfInstant_reqP p hp _ _ (settle_reqP p hp _ _ (fire_reqP p _ _ hm)))

theorem arrivals_rel (p : Program) : ∀ (n serial : Nat), ∀ th ∈ arrivals p n serial, RelOk th.k
  | 0, _ => fun _ h => by simp [arrivals] at h
  | n + 1, serial => by
    intro th h
    simp only [arrivals, List.mem_cons] at h
    rcases h with h | h
    · rw [h]
      exact RelOk.of_relIn _ rfl
    · exact arrivals_rel p n (serial + 1) th h

theorem initial_reqP (p : Program) (hp : TurnsOutside p) : ReqInvP (initial p) := by
  have ht : (initial p).threads = arrivals p p.sessions 0 := by
    unfold initial; dsimp only; split <;> rfl
  refine ⟨initial_req p hp, ?_⟩
  intro th hth
  rw [ht] at hth
  exact arrivals_rel p _ _ th hth

/-- The turn invariant at every run's end, preemption included. -/
theorem runProgram_reqP (p : Program) (fuel : Nat) (hp : TurnsOutside p) : ReqInvP (runProgram p fuel) := by
  unfold runProgram
  exact loop_reqP p hp _ _ (endOfInstant_reqP p hp _ _ (settle_reqP p hp _ _ (initial_reqP p hp)))

/-! ### Request conservation -/

/-- Request conservation (issue 14, result 6), for every run of every program with `DistinctProgram` (no
renewal gap beside a trace) and `TurnsOutside` (no `turn` in the turn block, the server or a hold's
body), under every `preempt` mode, at any fuel: every session's thread is in at most one place (ready, a
timer, a fifo stage's queue, a pool's queue, an engine's residents: waiting or running, never both, never
twice); a session's open turn (`inTurn`, numbered `turns`) is not answered; and no turn is answered
twice. (A rejected turn is the last turn of an ended session, with no answer: see `Serq.KernelRequests`.) -/
theorem runProgram_requests (p : Program) (fuel : Nat) (hp : DistinctProgram p) (ht : TurnsOutside p) :
    (∀ t, (runProgram p fuel).placed p.gap t ≤ 1) ∧
    ∀ th ∈ (runProgram p fuel).threads,
      (th.inTurn = true → ∀ a ∈ th.answers, a.turn ≠ th.turns) ∧ th.answers.Pairwise (fun a b => a.turn ≠ b.turn) := by
  refine ⟨(runProgram_placed p fuel hp).2, fun th hth => ?_⟩
  have h := (runProgram_reqP p fuel ht).1.1 th hth
  refine ⟨fun hin a ha => Nat.ne_of_lt (h.below (h.pending hin) a ha), ?_⟩
  exact h.distinct.imp (fun e => Nat.ne_of_gt e)

end Serq.Kernel
