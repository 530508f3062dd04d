module

public import Serq.Exec

/-! # The ledger of turns: the invariant behind request conservation and causality

What `Serq.Requests` keeps true at every step of a run (`Ledger`), over the pending turns, the
resident and waiting requests as `TurnTag`s, and the outcomes: the sessions of the turns in flight
are pairwise distinct, the outcomes' keys are distinct, every outcome of a session in flight is of an
earlier turn; the clock (for a request in flight), the pending time (for a pending turn) and the first
token (when recorded) are no earlier than the submission (`AfterSubmit`); and every key names an
existing turn whose earlier turns are answered. Here: the keys and tags, the invariant, and how it
survives the moves a step makes of the lists (`Ledger.mono_now`, `perm`, `sub`, `move`, `update`,
`finish`); `Serq.Requests` shows that every step makes only such moves.
-/

@[expose] public section

namespace Serq


/-! ## Keys -/

/-- The (session, turn) keys of pending turns. -/
def pendingKeys : List Pending → List (Nat × Nat)
  | [] => []
  | p :: ps => (p.sid, p.turn) :: pendingKeys ps

/-- The (session, turn) keys of requests. -/
def reqKeys : List Req → List (Nat × Nat)
  | [] => []
  | q :: qs => (q.sid, q.turn) :: reqKeys qs

/-- The (session, turn) keys of residents. -/
def resKeys : List Res → List (Nat × Nat)
  | [] => []
  | r :: rs => (r.req.sid, r.req.turn) :: resKeys rs

/-- The (session, turn) keys of outcomes. -/
def outcomeKeys : List Outcome → List (Nat × Nat)
  | [] => []
  | o :: os => (o.sid, o.turn) :: outcomeKeys os

/-- What the invariant reads of a request in flight: its key and its first token. -/
structure TurnTag where
  sid : Nat
  turn : Nat
  first : Nat
  hasFirst : Bool

def Req.tag (q : Req) : TurnTag := ⟨q.sid, q.turn, q.first, q.hasFirst⟩

def Res.tag (r : Res) : TurnTag := r.req.tag

def Pending.tag (p : Pending) : TurnTag := ⟨p.sid, p.turn, 0, false⟩

/-- `x` is no earlier than the submission of turn `turn` of session `sid`: the session's arrival for
its first turn; for a later turn, the step after the previous turn's last token plus its think time
(`nextTurn`), for every outcome of the previous turn. -/
def AfterSubmit (sessions : List Session) (O : List Outcome) (sid : Nat) : Nat → Nat → Prop
  | 0, x => ∀ s, sessionAt sessions sid = some s → s.arrive ≤ x
  | k + 1, x => ∀ o ∈ O, o.sid = sid → o.turn = k → ∀ s t, sessionAt sessions sid = some s →
      turnAt s.turns (k + 1) = some t → o.last + 1 + t.think ≤ x

/-- Turn `turn` of session `sid` exists. -/
def TurnExists (sessions : List Session) (sid turn : Nat) : Prop :=
  ∃ s t, sessionAt sessions sid = some s ∧ turnAt s.turns turn = some t

/-- Every turn of session `sid` before `turn` has been answered. -/
def PriorAnswered (O : List Outcome) (sid turn : Nat) : Prop :=
  ∀ j < turn, ∃ o ∈ O, o.sid = sid ∧ o.turn = j

theorem PriorAnswered.snoc {O : List Outcome} {o : Outcome} {sid turn : Nat} (h : PriorAnswered O sid turn) :
    PriorAnswered (O ++ [o]) sid turn := by
  intro j hj
  obtain ⟨o', ho', h1, h2⟩ := h j hj
  exact ⟨o', List.mem_append_left _ ho', h1, h2⟩

/-- The invariant over requests, of the pending turns `P`, the requests in flight `T` (residents and
queue) and the outcomes `O`, at clock `now`. -/
structure Ledger (sessions : List Session) (now : Nat) (P : List Pending) (T : List TurnTag) (O : List Outcome) :
    Prop where
  -- at most one turn of a session in flight (pending, waiting or resident)
  sids : (P.map Pending.sid ++ T.map TurnTag.sid).Nodup
  -- every turn answered once
  onodup : (O.map fun o => (o.sid, o.turn)).Nodup
  -- a session's answered turns are before its turn in flight
  pbefore : ∀ p ∈ P, ∀ o ∈ O, o.sid = p.sid → o.turn < p.turn
  tbefore : ∀ t ∈ T, ∀ o ∈ O, o.sid = t.sid → o.turn < t.turn
  -- a pending turn is due no earlier than its submission; a request in flight was submitted by now
  pend : ∀ p ∈ P, AfterSubmit sessions O p.sid p.turn p.time
  act : ∀ t ∈ T, AfterSubmit sessions O t.sid t.turn now
  -- first tokens come no earlier than the submission
  first : ∀ t ∈ T, t.hasFirst = true → AfterSubmit sessions O t.sid t.turn t.first
  out : ∀ o ∈ O, AfterSubmit sessions O o.sid o.turn o.first
  -- every key names a turn of the workload, whose earlier turns are answered
  pnames : ∀ p ∈ P, TurnExists sessions p.sid p.turn
  tnames : ∀ t ∈ T, TurnExists sessions t.sid t.turn
  onames : ∀ o ∈ O, TurnExists sessions o.sid o.turn
  pprev : ∀ p ∈ P, PriorAnswered O p.sid p.turn
  tprev : ∀ t ∈ T, PriorAnswered O t.sid t.turn
  oprev : ∀ o ∈ O, PriorAnswered O o.sid o.turn

theorem AfterSubmit.mono {sessions : List Session} {O : List Outcome} {sid turn x y : Nat}
    (h : AfterSubmit sessions O sid turn x) (hxy : x ≤ y) : AfterSubmit sessions O sid turn y := by
  cases turn with
  | zero =>
    simp only [AfterSubmit] at h ⊢
    intro s hs; exact Nat.le_trans (h s hs) hxy
  | succ k =>
    simp only [AfterSubmit] at h ⊢
    intro o ho h1 h2 s t hs ht; exact Nat.le_trans (h o ho h1 h2 s t hs ht) hxy

theorem AfterSubmit.snoc {sessions : List Session} {O : List Outcome} {o : Outcome} {sid turn x : Nat}
    (h : AfterSubmit sessions O sid turn x) (hne : o.sid = sid → o.turn + 1 ≠ turn) :
    AfterSubmit sessions (O ++ [o]) sid turn x := by
  cases turn with
  | zero => simpa only [AfterSubmit] using h
  | succ k =>
    simp only [AfterSubmit] at h ⊢
    intro o' ho' h1 h2 s t hs ht
    rcases List.mem_append.mp ho' with ho' | ho'
    · exact h o' ho' h1 h2 s t hs ht
    · simp only [List.mem_singleton] at ho'
      subst ho'
      exact absurd (by omega) (hne h1)

theorem Ledger.mono_now {sessions : List Session} {now now' : Nat} {P : List Pending} {T : List TurnTag}
    {O : List Outcome} (h : Ledger sessions now P T O) (hn : now ≤ now') : Ledger sessions now' P T O :=
  ⟨h.sids, h.onodup, h.pbefore, h.tbefore, h.pend, fun t ht => (h.act t ht).mono hn, h.first, h.out,
    h.pnames, h.tnames, h.onames, h.pprev, h.tprev, h.oprev⟩

theorem Ledger.perm {sessions : List Session} {now : Nat} {P P' : List Pending} {T T' : List TurnTag}
    {O : List Outcome} (h : Ledger sessions now P T O) (hP : P'.Perm P) (hT : T'.Perm T) :
    Ledger sessions now P' T' O :=
  ⟨((hP.map _).append (hT.map _)).nodup_iff.mpr h.sids, h.onodup,
    fun p hp => h.pbefore p (hP.mem_iff.mp hp), fun t ht => h.tbefore t (hT.mem_iff.mp ht),
    fun p hp => h.pend p (hP.mem_iff.mp hp), fun t ht => h.act t (hT.mem_iff.mp ht),
    fun t ht => h.first t (hT.mem_iff.mp ht), h.out,
    fun p hp => h.pnames p (hP.mem_iff.mp hp), fun t ht => h.tnames t (hT.mem_iff.mp ht), h.onames,
    fun p hp => h.pprev p (hP.mem_iff.mp hp), fun t ht => h.tprev t (hT.mem_iff.mp ht), h.oprev⟩

theorem Ledger.sub {sessions : List Session} {now : Nat} {P : List Pending} {T T' : List TurnTag}
    {O : List Outcome} (h : Ledger sessions now P T O) (hT : T'.Sublist T) : Ledger sessions now P T' O :=
  ⟨h.sids.sublist ((hT.map _).append_left _), h.onodup,
    h.pbefore, fun t ht => h.tbefore t (hT.subset ht),
    h.pend, fun t ht => h.act t (hT.subset ht),
    fun t ht => h.first t (hT.subset ht), h.out,
    h.pnames, fun t ht => h.tnames t (hT.subset ht), h.onames,
    h.pprev, fun t ht => h.tprev t (hT.subset ht), h.oprev⟩

/-- Submitting: pending turns due by `now` become requests that know no first token. -/
theorem Ledger.move {sessions : List Session} {now : Nat} {A B : List Pending} {T : List TurnTag}
    {O : List Outcome} (h : Ledger sessions now (A ++ B) T O) (hA : ∀ p ∈ A, p.time ≤ now) :
    Ledger sessions now B (A.map Pending.tag ++ T) O := by
  have hmap : (A.map Pending.tag).map TurnTag.sid = A.map Pending.sid := by
    simp only [List.map_map]; rfl
  refine ⟨?_, h.onodup, fun p hp => h.pbefore p (List.mem_append_right _ hp), ?_,
    fun p hp => h.pend p (List.mem_append_right _ hp), ?_, ?_, h.out,
    fun p hp => h.pnames p (List.mem_append_right _ hp), ?_, h.onames,
    fun p hp => h.pprev p (List.mem_append_right _ hp), ?_, h.oprev⟩
  · have h1 := h.sids
    rw [List.map_append, hmap]
    rw [List.map_append, List.append_assoc] at h1
    exact (List.perm_append_comm_assoc _ _ _).nodup_iff.mpr h1
  · intro t ht
    rcases List.mem_append.mp ht with ht | ht
    · obtain ⟨p, hp, rfl⟩ := List.mem_map.mp ht
      exact h.pbefore p (List.mem_append_left _ hp)
    · exact h.tbefore t ht
  · intro t ht
    rcases List.mem_append.mp ht with ht | ht
    · obtain ⟨p, hp, rfl⟩ := List.mem_map.mp ht
      exact (h.pend p (List.mem_append_left _ hp)).mono (hA p hp)
    · exact h.act t ht
  · intro t ht hf
    rcases List.mem_append.mp ht with ht | ht
    · obtain ⟨p, hp, rfl⟩ := List.mem_map.mp ht
      simp [Pending.tag] at hf
    · exact h.first t ht hf
  · intro t ht
    rcases List.mem_append.mp ht with ht | ht
    · obtain ⟨p, hp, rfl⟩ := List.mem_map.mp ht
      exact h.pnames p (List.mem_append_left _ hp)
    · exact h.tnames t ht
  · intro t ht
    rcases List.mem_append.mp ht with ht | ht
    · obtain ⟨p, hp, rfl⟩ := List.mem_map.mp ht
      exact h.pprev p (List.mem_append_left _ hp)
    · exact h.tprev t ht

/-- A request's first token is recorded. -/
theorem Ledger.update {sessions : List Session} {now : Nat} {P : List Pending} {t t' : TurnTag} {T : List TurnTag}
    {O : List Outcome} (h : Ledger sessions now P (t :: T) O) (hs : t'.sid = t.sid) (ht : t'.turn = t.turn)
    (hf : t'.hasFirst = true → AfterSubmit sessions O t.sid t.turn t'.first) : Ledger sessions now P (t' :: T) O := by
  refine ⟨?_, h.onodup, h.pbefore, ?_, h.pend, ?_, ?_, h.out, h.pnames, ?_, h.onames, h.pprev, ?_, h.oprev⟩
  · have := h.sids
    simp only [List.map_cons, hs] at this ⊢
    exact this
  · intro x hx
    rcases List.mem_cons.mp hx with rfl | hx
    · rw [hs, ht]; exact h.tbefore t List.mem_cons_self
    · exact h.tbefore x (List.mem_cons_of_mem _ hx)
  · intro x hx
    rcases List.mem_cons.mp hx with rfl | hx
    · rw [hs, ht]; exact h.act t List.mem_cons_self
    · exact h.act x (List.mem_cons_of_mem _ hx)
  · intro x hx
    rcases List.mem_cons.mp hx with rfl | hx
    · rw [hs, ht]; exact hf
    · exact h.first x (List.mem_cons_of_mem _ hx)
  · intro x hx
    rcases List.mem_cons.mp hx with rfl | hx
    · rw [hs, ht]; exact h.tnames t List.mem_cons_self
    · exact h.tnames x (List.mem_cons_of_mem _ hx)
  · intro x hx
    rcases List.mem_cons.mp hx with rfl | hx
    · rw [hs, ht]; exact h.tprev t List.mem_cons_self
    · exact h.tprev x (List.mem_cons_of_mem _ hx)

theorem insertPending_perm (p : Pending) : ∀ (l : List Pending), (insertPending p l).Perm (p :: l)
  | [] => List.Perm.refl _
  | q :: qs => by
    simp only [insertPending]
    split
    · exact List.Perm.refl _
    · exact ((insertPending_perm p qs).cons q).trans (List.Perm.swap _ _ _)

/-- A request ends: its outcome is recorded, and its session's next turn, if any, is pending. -/
theorem Ledger.finish {sessions : List Session} {now : Nat} {P : List Pending} {t : TurnTag} {T : List TurnTag}
    {O : List Outcome} (h : Ledger sessions now P (t :: T) O) (o : Outcome) (hs : o.sid = t.sid)
    (ht : o.turn = t.turn) (hl : o.last = now) (hf : AfterSubmit sessions O t.sid t.turn o.first)
    (req : Req) (hrs : req.sid = t.sid) (hrt : req.turn = t.turn) :
    Ledger sessions now (nextTurn sessions now req P) T (O ++ [o]) := by
  have hsid : (P.map Pending.sid ++ t.sid :: T.map TurnTag.sid).Nodup := h.sids
  have hsid2 := (List.perm_middle.nodup_iff.mp hsid)
  rw [List.nodup_cons] at hsid2
  obtain ⟨hnot, hnd⟩ := hsid2
  have hP : ∀ p ∈ P, p.sid ≠ t.sid := fun p hp he =>
    hnot (List.mem_append_left _ (List.mem_map.mpr ⟨p, hp, he⟩))
  have hT : ∀ x ∈ T, x.sid ≠ t.sid := fun x hx he =>
    hnot (List.mem_append_right _ (List.mem_map.mpr ⟨x, hx, he⟩))
  have hO : ∀ o' ∈ O, o'.sid = t.sid → o'.turn < t.turn := h.tbefore t List.mem_cons_self
  have J0 : Ledger sessions now P T (O ++ [o]) := by
    refine ⟨hnd, ?_, ?_, ?_, ?_, ?_, ?_, ?_, h.pnames, fun x hx => h.tnames x (List.mem_cons_of_mem _ hx), ?_,
      fun p hp => (h.pprev p hp).snoc, fun x hx => (h.tprev x (List.mem_cons_of_mem _ hx)).snoc, ?_⟩
    · rw [List.map_append, List.nodup_append]
      refine ⟨h.onodup, by simp, ?_⟩
      intro a ha b hb hab
      simp only [List.map_cons, List.map_nil, List.mem_singleton] at hb
      subst hb
      obtain ⟨o', ho', rfl⟩ := List.mem_map.mp ha
      simp only [Prod.mk.injEq] at hab
      have := hO o' ho' (by rw [hab.1, hs])
      omega
    · intro p hp o' ho' he
      rcases List.mem_append.mp ho' with ho' | ho'
      · exact h.pbefore p hp o' ho' he
      · simp only [List.mem_singleton] at ho'; subst ho'
        exact absurd (he.symm.trans hs) (hP p hp)
    · intro x hx o' ho' he
      rcases List.mem_append.mp ho' with ho' | ho'
      · exact h.tbefore x (List.mem_cons_of_mem _ hx) o' ho' he
      · simp only [List.mem_singleton] at ho'; subst ho'
        exact absurd (he.symm.trans hs) (hT x hx)
    · intro p hp
      exact (h.pend p hp).snoc (fun he => absurd (he.symm.trans hs) (hP p hp))
    · intro x hx
      exact (h.act x (List.mem_cons_of_mem _ hx)).snoc (fun he => absurd (he.symm.trans hs) (hT x hx))
    · intro x hx hxf
      exact (h.first x (List.mem_cons_of_mem _ hx) hxf).snoc (fun he => absurd (he.symm.trans hs) (hT x hx))
    · intro o' ho'
      rcases List.mem_append.mp ho' with ho' | ho'
      · refine (h.out o' ho').snoc (fun he => ?_)
        have := hO o' ho' (by rw [← he, hs])
        omega
      · simp only [List.mem_singleton] at ho'; subst ho'
        rw [hs, ht]
        exact hf.snoc (fun _ => by omega)
    · intro o' ho'
      rcases List.mem_append.mp ho' with ho' | ho'
      · exact h.onames o' ho'
      · simp only [List.mem_singleton] at ho'; subst ho'
        rw [hs, ht]
        exact h.tnames t List.mem_cons_self
    · intro o' ho'
      rcases List.mem_append.mp ho' with ho' | ho'
      · exact (h.oprev o' ho').snoc
      · simp only [List.mem_singleton] at ho'; subst ho'
        rw [hs, ht]
        exact (h.tprev t List.mem_cons_self).snoc
  unfold nextTurn
  split
  · exact J0
  · rename_i s hsess
    split
    · exact J0
    · rename_i tt htt
      refine Ledger.perm ?_ (insertPending_perm _ _) (List.Perm.refl _)
      refine ⟨?_, J0.onodup, ?_, J0.tbefore, ?_, J0.act, J0.first, J0.out, ?_, J0.tnames, J0.onames, ?_,
        J0.tprev, J0.oprev⟩
      · simp only [List.map_cons, List.cons_append, List.nodup_cons]
        refine ⟨?_, hnd⟩
        rw [hrs]; exact hnot
      · intro p hp o' ho' he
        rcases List.mem_cons.mp hp with rfl | hp
        · dsimp only at he ⊢
          rw [hrs] at he
          rw [hrt]
          rcases List.mem_append.mp ho' with ho' | ho'
          · have := hO o' ho' he; omega
          · simp only [List.mem_singleton] at ho'; subst ho'; omega
        · exact J0.pbefore p hp o' ho' he
      · intro p hp
        rcases List.mem_cons.mp hp with rfl | hp
        · dsimp only
          simp only [AfterSubmit]
          intro o' ho' h1 h2 s' t' hs' ht'
          rw [hsess] at hs'
          cases hs'
          rw [htt] at ht'
          cases ht'
          rcases List.mem_append.mp ho' with ho' | ho'
          · have := hO o' ho' (by rw [h1, hrs]); omega
          · simp only [List.mem_singleton] at ho'; subst ho'; omega
        · exact J0.pend p hp
      · intro p hp
        rcases List.mem_cons.mp hp with rfl | hp
        · exact ⟨s, tt, hsess, htt⟩
        · exact J0.pnames p hp
      · intro p hp
        rcases List.mem_cons.mp hp with rfl | hp
        · intro j hj
          dsimp only at hj ⊢
          rcases Nat.lt_succ_iff_lt_or_eq.mp hj with hj | hj
          · obtain ⟨o', ho', h1, h2⟩ := h.tprev t List.mem_cons_self j (by rw [← hrt]; exact hj)
            exact ⟨o', List.mem_append_left _ ho', by rw [h1, hrs], h2⟩
          · exact ⟨o, List.mem_append_right _ (List.mem_singleton_self o), by rw [hs, hrs], by rw [ht, hj, hrt]⟩
        · exact J0.pprev p hp

end Serq
