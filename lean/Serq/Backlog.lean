module

public import Serq.Full
public import Serq.Claims

/-! # The pathwise bounded backlog (Dai et al. 2025, Theorem 2(b))

An engine with a token budget `B` serving requests of `P` tokens of work that arrive one every
`g` steps never falls behind when the work arriving per gap fits the budget (`P ≤ B · g`): at
every iteration, the work that has arrived (the sessions arrived, those due at the iteration's
start included, times `P`) exceeds the tokens served before it by at most one request's work,
`arrived · P ≤ served + P` (`Serq.backlog_bounded`). Pathwise: for every run, not in expectation.

The workload (`RenewalSessions g P`): the `k`-th session (from 0) arrives at step `(k + 1) · g`
with one turn of a `P`-token prompt and at most one output token (the prefill samples it, so a
request's work is its prompt: no decode follows). The engine: a positive request cap and a prompt
that fits the KV pool (`blocksFor blockSize P ≤ kvBlocks`). Any chunk cap, either schedule
(`phased`) and a prefix cache or none are allowed: with at most one request in flight the chunk cap
is lifted (it applies only while more than one request runs or waits); no resident ever decodes,
so FasterTransformer's `only (in_phase())` serves the prefill; and the cache holds only sessions
that arrived before the one admitted (each session has one turn), so nothing is reused. That the
request cap and the KV pool never bind and that no request is preempted is proved, not assumed:
at most one request is ever in flight.

The invariant (`Backlog.Inv`), at every machine of the run:
* conservation: `arrived · P = served + remaining` (the work arrived is the work served plus the
  work the resident, if any, has left; no request waits in the queue between steps);
* the resident, if any, is a prefill with `pos + remaining = P`, holding at most `P`'s blocks;
* the pending arrivals are the renewal's, spaced by `g` (`Spaced`), the first no earlier than the
  clock, and the resident's work left is done by the next arrival:
  `B · now + remaining ≤ B · next` (`HeadAfter`).
* the cache's entries and the resident are of sessions before every pending arrival's.
So an arrival finds the engine empty, and the record of its iteration has
`arrived · P = served + P`; between arrivals the record has `arrived · P = served + remaining ≤
served + P`.
-/

@[expose] public section

namespace Serq

/-- The renewal workload from the `k`-th session on: the `k`-th (from 0) arrives at step
`(k + 1) · g`, with exactly one turn, of `P` prompt tokens and at most one output token. -/
def RenewalSessions (g P : Nat) : Nat → List Session → Prop
  | _, [] => True
  | k, s :: ss => s.arrive = (k + 1) * g ∧ (∃ t, s.turns = [t] ∧ t.new = P ∧ t.out ≤ 1) ∧ RenewalSessions g P (k + 1) ss

namespace Backlog

theorem blocksFor_mono (b : Nat) {s t : Nat} (h : s ≤ t) : blocksFor b s ≤ blocksFor b t := by
  unfold blocksFor
  split
  · exact Nat.le_refl _
  · exact Nat.div_le_div_right (by omega)

theorem renewal_turns (g P : Nat) : ∀ (k : Nat) (ss : List Session), RenewalSessions g P k ss →
    ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1
  | _, [], _, s, hs => by simp at hs
  | k, x :: xs, ⟨_, ⟨t, ht, _, hout⟩, hrest⟩, s, hs => by
    rcases List.mem_cons.mp hs with rfl | hs
    · exact ⟨t, ht, hout⟩
    · exact renewal_turns g P (k + 1) xs hrest s hs

theorem turnAt_mem : ∀ (ts : List Turn) (i : Nat) (t : Turn), turnAt ts i = some t → t ∈ ts
  | [], _, _, h => by simp [turnAt] at h
  | x :: _, 0, t, h => by
    simp only [turnAt, Option.some.injEq] at h
    subst h
    exact List.mem_cons_self
  | _ :: xs, i + 1, t, h => List.mem_cons_of_mem _ (turnAt_mem xs i t h)

/-! ## The pending arrivals -/

/-- The pending turns: first turns of `P` tokens, the first no earlier than `x`, each next one at
least `g` after the one before, and of a later session. -/
def Spaced (g P : Nat) : Nat → List Pending → Prop
  | _, [] => True
  | x, p :: ps => x ≤ p.time ∧ p.prompt = P ∧ p.turn = 0 ∧ (∀ q ∈ ps, p.sid < q.sid) ∧
      Spaced g P (p.time + g) ps

/-- The first pending turn, if any, is no earlier than `y / B`: `y ≤ B · time`. -/
def HeadAfter (B y : Nat) : List Pending → Prop
  | [] => True
  | p :: _ => y ≤ B * p.time

theorem spaced_mono {g P x y : Nat} {ps : List Pending} (hxy : y ≤ x) (h : Spaced g P x ps) : Spaced g P y ps := by
  cases ps with
  | nil => trivial
  | cons p ps =>
    obtain ⟨h1, h2, h3, h4, h5⟩ := h
    exact ⟨Nat.le_trans hxy h1, h2, h3, h4, h5⟩

theorem spaced_le {g P : Nat} : ∀ {x : Nat} {ps : List Pending}, Spaced g P x ps → ∀ q ∈ ps, x ≤ q.time
  | _, [], _, q, hq => by simp at hq
  | x, p :: ps, ⟨h1, _, _, _, h4⟩, q, hq => by
    rcases List.mem_cons.mp hq with rfl | hq
    · exact h1
    · have := spaced_le h4 q hq
      omega

theorem duePending_none (now : Nat) : ∀ (ps : List Pending), (∀ q ∈ ps, now < q.time) →
    duePending now ps = ([], ps)
  | [], _ => rfl
  | p :: ps, h => by
    have ih := duePending_none now ps (fun q hq => h q (List.mem_cons_of_mem _ hq))
    have hp := h p List.mem_cons_self
    simp only [duePending, ih]
    rw [if_neg (by omega)]

theorem insertPending_front (p : Pending) : ∀ (ps : List Pending), (∀ q ∈ ps, p.time < q.time) →
    insertPending p ps = p :: ps
  | [], _ => rfl
  | q :: qs, h => by
    have hq := h q List.mem_cons_self
    simp [insertPending, pendingBefore, hq]

/-- The first turns of a renewal workload are spaced by the gap, from the first arrival on. -/
theorem firstTurns_spaced (g P : Nat) (hg : 0 < g) : ∀ (k : Nat) (ss : List Session), RenewalSessions g P k ss →
    Spaced g P ((k + 1) * g) (firstTurns k ss) ∧ ∀ q ∈ firstTurns k ss, k ≤ q.sid
  | _, [], _ => ⟨trivial, fun q hq => by simp [firstTurns] at hq⟩
  | k, s :: ss, ⟨ha, ⟨t, ht, hnew, _⟩, hrest⟩ => by
    obtain ⟨ih, isid⟩ := firstTurns_spaced g P hg (k + 1) ss hrest
    have hlt : ∀ q ∈ firstTurns (k + 1) ss, s.arrive < q.time := by
      intro q hq
      have := spaced_le ih q hq
      rw [ha]
      have : (k + 1 + 1) * g = (k + 1) * g + g := Nat.succ_mul _ _
      omega
    simp only [firstTurns, ht]
    rw [insertPending_front _ _ hlt]
    refine ⟨⟨by rw [ha]; exact Nat.le_refl _, hnew, rfl, fun q hq => by have := isid q hq; dsimp only; omega,
      ?_⟩, ?_⟩
    · have : (k + 1 + 1) * g = s.arrive + g := by rw [ha]; exact Nat.succ_mul _ _
      rw [← this]
      exact ih
    · intro q hq
      rcases List.mem_cons.mp hq with rfl | hq
      · exact Nat.le_refl _
      · have := isid q hq; omega

/-! ## One iteration, computed -/

/-! ## The prefix cache holds earlier sessions only -/

theorem evict_sid (Q : Nat → Prop) : ∀ (n : Nat) (es : List Entry), (∀ e ∈ es, Q e.sid) →
    ∀ e ∈ evict n es, Q e.sid
  | 0, es, h => by simpa [evict] using h
  | n + 1, [], _ => by simp [evict]
  | n + 1, e :: es, h => by
    simp only [evict]
    split
    · exact evict_sid Q n es (fun x hx => h x (List.mem_cons_of_mem _ hx))
    · apply evict_sid Q n
      intro x hx
      rcases List.mem_cons.mp hx with rfl | hx
      · exact h e List.mem_cons_self
      · exact h x (List.mem_cons_of_mem _ hx)

theorem consume_sid (Q : Nat → Prop) (sid : Nat) : ∀ (take : Nat) (es : List Entry), (∀ e ∈ es, Q e.sid) →
    ∀ e ∈ consume sid take es, Q e.sid
  | _, [], _ => by simp [consume]
  | take, e :: es, h => by
    have hes : ∀ x ∈ es, Q x.sid := fun x hx => h x (List.mem_cons_of_mem _ hx)
    have he := h e List.mem_cons_self
    simp only [consume]
    split
    · split
      · exact consume_sid Q sid _ es hes
      · intro x hx
        rcases List.mem_cons.mp hx with rfl | hx
        · exact he
        · exact consume_sid Q sid _ es hes x hx
    · intro x hx
      rcases List.mem_cons.mp hx with rfl | hx
      · exact he
      · exact consume_sid Q sid take es hes x hx

theorem appendEntry_sid (Q : Nat → Prop) : ∀ (c : List Entry) (e : Entry), (∀ x ∈ c, Q x.sid) → Q e.sid →
    ∀ x ∈ appendEntry c e, Q x.sid
  | [], e, _, he, x, hx => by
    simp only [appendEntry, List.mem_singleton] at hx
    subst hx
    exact he
  | y :: ys, e, h, he, x, hx => by
    simp only [appendEntry] at hx
    rcases List.mem_cons.mp hx with rfl | hx
    · exact h x List.mem_cons_self
    · exact appendEntry_sid Q ys e (fun z hz => h z (List.mem_cons_of_mem _ hz)) he x hx

theorem release_sid (Q : Nat → Prop) (eng : Engine) (sid tokens seq : Nat) (c : List Entry)
    (h : ∀ e ∈ c, Q e.sid) (hs : Q sid) : ∀ e ∈ (release eng sid tokens seq c).1, Q e.sid := by
  unfold release
  generalize (if eng.caching = true then tokens / eng.blockSize else 0) = b
  dsimp only
  split
  · exact h
  · refine appendEntry_sid Q c _ h ?_
    exact hs

theorem ownCachedBlocks_zero (sid : Nat) : ∀ (es : List Entry), (∀ e ∈ es, e.sid ≠ sid) →
    ownCachedBlocks sid es = 0
  | [], _ => rfl
  | e :: es, h => by
    have he := h e List.mem_cons_self
    simp [ownCachedBlocks, he, ownCachedBlocks_zero sid es (fun x hx => h x (List.mem_cons_of_mem _ hx))]

theorem serveRunning_nil (eng : Engine) (only : Option Bool) :
    ∀ (fuel : Nat) (p : Plan), p.todo = [] → serveRunning eng only fuel p = p
  | 0, _, _ => rfl
  | _ + 1, p, h => by
    simp only [serveRunning, h]
    split <;> rfl

theorem admitHeads_nil (eng : Engine) (only : Option Bool) :
    ∀ (fuel : Nat) (p : Plan), p.waiting = [] → admitHeads eng only fuel p = p
  | 0, _, _ => rfl
  | _ + 1, p, h => by
    simp only [admitHeads, h]
    split <;> rfl

theorem capChunk_zero (n : Nat) : capChunk 0 n = n := by simp [capChunk]

/-- The only resident, a prefill, takes `min remaining budget` tokens; it fits, so nothing is
preempted. -/
theorem serve_one (eng : Engine) (only : Option Bool) (fuel : Nat) (p : Plan) (r : Res)
    (htodo : p.todo = [r]) (hb : 0 < p.budget) (hsp : p.selfPreempted = false) (hch : p.chunk = 0)
    (hd : r.decoding = false) (hrem : 0 < r.remaining) (hex : excluded only false = false)
    (hfit : usedBlocks p.done + r.alloc + (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc)
      ≤ eng.kvBlocks) :
    (serveRunning eng only (fuel + 1 + 1) p).done = appendRes p.done
        [{ r with
           alloc := r.alloc + (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc),
           sched := min r.remaining p.budget }] ∧
      (serveRunning eng only (fuel + 1 + 1) p).todo = [] ∧
      (serveRunning eng only (fuel + 1 + 1) p).waiting = p.waiting ∧
      (serveRunning eng only (fuel + 1 + 1) p).preempted = p.preempted ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (serveRunning eng only (fuel + 1 + 1) p).cache, Q e.sid := by
  have hg : growOrPreempt eng (resCount p.todo)
      (blocksFor eng.blockSize (r.pos + min r.remaining p.budget) - r.alloc) p = p := by
    rw [htodo]
    simp only [resCount, Nat.zero_add, growOrPreempt]
    rw [if_pos (by simp only [htodo, usedBlocks]; omega)]
  have hb0 : ¬ (p.budget = 0 ∨ p.selfPreempted = true) := by simp [hsp]; omega
  have hrem0 : ¬ (r.remaining = 0 ∨ excluded only r.decoding = true) := by simp [hd, hex]; omega
  rw [serveRunning, if_neg hb0]
  simp only [htodo]
  rw [if_neg hrem0]
  simp only [hd, Bool.false_eq_true, if_false, hch, capChunk_zero]
  rw [← htodo, hg, htodo]
  simp only [hsp, Bool.false_eq_true, if_false, dropHead]
  rw [serveRunning_nil eng only _ _ rfl]
  exact ⟨rfl, rfl, rfl, rfl, fun Q hQ => evict_sid Q _ _ hQ⟩

/-- The head of the queue, a fresh request of `P > 0` tokens, is admitted by an empty engine and
takes `min P budget` tokens. -/
theorem admit_one (eng : Engine) (only : Option Bool) (fuel : Nat) (p : Plan) (rq : Req) (P : Nat)
    (hw : p.waiting = [rq]) (hb : 0 < p.budget) (hdone : p.done = []) (hcap : 0 < eng.reqsCap)
    (hch : p.chunk = 0) (hex : excluded only false = false) (hkept : rq.kept = P) (hcomp : rq.computed = 0)
    (hown : ownCachedBlocks rq.sid p.cache = 0) (hP : 0 < P) (hK : blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ r, (admitHeads eng only (fuel + 1 + 1) p).done = [r] ∧ (admitHeads eng only (fuel + 1 + 1) p).waiting = [] ∧
      (admitHeads eng only (fuel + 1 + 1) p).preempted = p.preempted ∧ r.decoding = false ∧
      r.sched = min P p.budget ∧ r.pos = 0 ∧ r.remaining = P ∧ r.alloc ≤ blocksFor eng.blockSize P ∧
      r.req.out = rq.out ∧ r.req.sid = rq.sid ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (admitHeads eng only (fuel + 1 + 1) p).cache, Q e.sid := by
  have hknown : max rq.kept (rq.computed + 1) = P := by rw [hkept, hcomp]; omega
  have hunits : blocksFor eng.blockSize (min P p.budget) ≤ blocksFor eng.blockSize P :=
    blocksFor_mono _ (by omega)
  have hgo : ¬ (p.budget = 0 ∨ resCount p.done ≥ eng.reqsCap) := by simp only [hdone, resCount]; omega
  rw [admitHeads, if_neg hgo]
  simp only [hw, hknown, hown, Nat.zero_mul, Nat.zero_min, Nat.sub_zero, hch, capChunk_zero, hdone, usedBlocks,
    Nat.zero_add, hex, Bool.false_eq_true, if_false]
  rw [if_neg (by omega)]
  rw [admitHeads_nil eng only _ _ rfl]
  refine ⟨_, rfl, rfl, rfl, rfl, rfl, rfl, rfl, ?_, ?_, ?_, fun Q hQ => evict_sid Q _ _ (consume_sid Q _ _ _ hQ)⟩
  · simpa using hunits
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl

theorem apply_keeps (eng : Engine) (ss : List Session) (now : Nat)
    (hnext : ∀ q ps, nextTurn ss now q ps = ps) :
    ∀ (l : List Res) (m : Machine) (kept : List Res),
      (apply eng ss now m l kept).waiting = m.waiting ∧ (apply eng ss now m l kept).arrived = m.arrived ∧
      (apply eng ss now m l kept).pending = m.pending ∧ (apply eng ss now m l kept).served = m.served ∧
      (apply eng ss now m l kept).now = m.now
  | [], m, kept => ⟨rfl, rfl, rfl, rfl, rfl⟩
  | r :: rs, m, kept => by
    have ih := apply_keeps eng ss now hnext rs
    simp only [apply]
    repeat' split
    all_goals first | exact ih _ _ | simp [ih, hnext]

/-- Applying the iteration to its only resident, a prefill that took `sched > 0` tokens: it
finishes (its prefill samples its one output token and its turn ends) or goes on. -/
theorem apply_one_running (eng : Engine) (ss : List Session) (now : Nat) (m : Machine) (r : Res)
    (hd : r.decoding = false) (hs : 0 < r.sched) (hout : r.req.out ≤ 1) :
    (apply eng ss now m [r] []).running = if r.remaining ≤ r.sched then []
      else [⟨r.req, r.alloc, r.pos + r.sched, r.known, false, r.remaining - r.sched, 0⟩] := by
  have hs0 : ¬ r.sched = 0 := by omega
  by_cases hfin : r.remaining ≤ r.sched
  · have h1 : r.remaining - r.sched = 0 := by omega
    have h2 : r.req.out - 1 = 0 := by omega
    simp only [apply, hs0, hd, h1, h2, hfin, if_false, if_true]
    repeat' split
    all_goals simp_all
  · have h1 : ¬ r.remaining - r.sched = 0 := by omega
    simp [apply, hs0, hd, h1, hfin, appendRes]

theorem apply_cache (Q : Nat → Prop) (eng : Engine) (ss : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res), (∀ e ∈ m.cache, Q e.sid) → (∀ x ∈ l, Q x.req.sid) →
      ∀ e ∈ (apply eng ss now m l kept).cache, Q e.sid
  | [], _, _, hc, _ => hc
  | r :: rs, m, kept, hc, hl => by
    have hr := hl r List.mem_cons_self
    have hrs : ∀ x ∈ rs, Q x.req.sid := fun x hx => hl x (List.mem_cons_of_mem _ hx)
    have hreq : Q (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
        then { r.req with first := now, hasFirst := true } else r.req).sid := by
      split
      · exact hr
      · exact hr
    simp only [apply]
    split
    · exact apply_cache Q eng ss now rs m _ hc hrs
    · generalize (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
        then { r.req with first := now, hasFirst := true } else r.req) = req at hreq ⊢
      generalize (if r.decoding = true then r.remaining - r.sched
        else if r.remaining - r.sched = 0 then r.req.out - 1 - (r.known - r.req.prompt)
        else r.remaining - r.sched) = left
      split
      · refine apply_cache Q eng ss now rs _ kept ?_ hrs
        exact release_sid Q eng _ _ _ _ hc hreq
      · exact apply_cache Q eng ss now rs m _ hc hrs

theorem nextTurn_single (ss : List Session) (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1) (now : Nat)
    (q : Req) (ps : List Pending) : nextTurn ss now q ps = ps := by
  unfold nextTurn
  cases hs : sessionAt ss q.sid with
  | none => rfl
  | some s =>
    obtain ⟨t, ht, _⟩ := hw s (sessionAt_mem ss q.sid s hs)
    simp [ht, turnAt]

theorem newReq_out (eng : Engine) (ss : List Session) (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1)
    (p : Pending) : (newReq eng ss p).out ≤ 1 := by
  unfold newReq
  cases hs : sessionAt ss p.sid with
  | none => simp
  | some s =>
    cases ht : turnAt s.turns p.turn with
    | none => simp [ht]
    | some t =>
      obtain ⟨t', ht', hout⟩ := hw s (sessionAt_mem ss p.sid s hs)
      have hm := turnAt_mem s.turns p.turn t ht
      rw [ht'] at hm
      simp only [List.mem_singleton] at hm
      subst hm
      simpa [ht] using hout

theorem excluded_prefill (eng : Engine) (rs : List Res) (h : anyDecoding rs = false) :
    excluded (phaseOf eng rs) false = false := by
  unfold phaseOf
  split <;> simp [excluded, h]

/-! ## The invariant -/

/-- The work the residents have left. -/
def resLeft : List Res → Nat
  | [] => 0
  | r :: rs => r.remaining + resLeft rs

/-- The only resident, if any: a prefill with work left, `pos + remaining = P`, within `P`'s blocks. -/
def ResidentOk (bs P : Nat) (r : Res) : Prop :=
  r.decoding = false ∧ 0 < r.remaining ∧ r.pos + r.remaining = P ∧ r.alloc ≤ blocksFor bs P ∧ r.req.out ≤ 1

structure Inv (eng : Engine) (g P : Nat) (m : Machine) : Prop where
  waiting : m.waiting = []
  running : m.running = [] ∨ ∃ r, m.running = [r] ∧ ResidentOk eng.blockSize P r
  spaced : Spaced g P m.now m.pending
  head : HeadAfter eng.budget (eng.budget * m.now + resLeft m.running) m.pending
  conserve : m.arrived * P = m.served + resLeft m.running
  records : ∀ x ∈ m.records, x.arrived * P ≤ x.served + P
  cacheSids : ∀ e ∈ m.cache, ∀ q ∈ m.pending, e.sid < q.sid
  runningSids : ∀ r ∈ m.running, ∀ q ∈ m.pending, r.req.sid < q.sid

/-- The hypotheses on the engine and the workload. -/
structure Hyp (eng : Engine) (g P : Nat) (ss : List Session) : Prop where
  cap : 0 < eng.reqsCap
  fits : blocksFor eng.blockSize P ≤ eng.kvBlocks
  pos : 0 < P
  gap : 0 < g
  work : P ≤ eng.budget * g
  turns : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out ≤ 1

/-- A step that runs an iteration whose plan has one resident, a prefill given `sched > 0` tokens,
and leaves the queue empty: what the machine becomes. -/
theorem step_run (eng : Engine) (ss : List Session) (m : Machine) (due later : List Pending) (W : List Req)
    (x : Res) (hnext : ∀ now q ps, nextTurn ss now q ps = ps)
    (hdue : duePending m.now m.pending = (due, later)) (hsub : submit eng ss due m.waiting = W)
    (hbusy : ¬ (noRes m.running = true ∧ noReq W = true)) (hone : resCount m.running + reqCount W ≤ 1)
    (hdone : (plan eng 0 m W).done = [x]) (hw : (plan eng 0 m W).waiting = [])
    (hpre : (plan eng 0 m W).preempted = 0)
    (hd : x.decoding = false) (hs : 0 < x.sched) (hout : x.req.out ≤ 1) :
    (step eng ss m).now = m.now + 1 ∧ (step eng ss m).pending = later ∧ (step eng ss m).waiting = [] ∧
    (step eng ss m).arrived = m.arrived + countFirst due ∧ (step eng ss m).served = m.served + x.sched ∧
    (step eng ss m).running = (if x.remaining ≤ x.sched then []
      else [⟨x.req, x.alloc, x.pos + x.sched, x.known, false, x.remaining - x.sched, 0⟩]) ∧
    (∀ y ∈ (step eng ss m).records, y ∈ m.records ∨
      (y.arrived = m.arrived + countFirst due ∧ y.served = m.served)) ∧
    ∀ Q : Nat → Prop, (∀ e ∈ (plan eng 0 m W).cache, Q e.sid) → Q x.req.sid →
      ∀ e ∈ (step eng ss m).cache, Q e.sid := by
  have hch : (if eng.chunk > 0 ∧ resCount m.running + reqCount W > 1 then eng.chunk else 0) = 0 := by
    rw [if_neg (by omega)]
  have hk := apply_keeps eng ss m.now (hnext m.now)
  unfold step
  rw [hdue]
  dsimp only
  rw [hsub, if_neg hbusy, hch, hdone, hw, hpre]
  simp only [batchTokens, Nat.add_zero]
  rw [if_neg (by omega)]
  refine ⟨rfl, ?_, ?_, ?_, ?_, ?_, ?_, ?_⟩
  · exact (hk [x] _ []).2.2.1
  · exact (hk [x] _ []).1
  · exact (hk [x] _ []).2.1
  · exact (hk [x] _ []).2.2.2.1
  · exact apply_one_running eng ss m.now _ x hd hs hout
  · intro y hy
    simp only [apply_records] at hy
    rcases (mem_appendRecord _ _ _).mp hy with hy | hy
    · exact Or.inl hy
    · right
      subst hy
      exact ⟨rfl, rfl⟩
  · intro Q hQ hx
    exact apply_cache Q eng ss m.now [x] _ [] hQ (by simpa using hx)

/-- The plan of an empty machine with one fresh request in the queue: it is admitted. -/
theorem plan_arrival (eng : Engine) (m : Machine) (rq : Req) (P : Nat) (hr : m.running = [])
    (hcap : 0 < eng.reqsCap) (hB : 0 < eng.budget) (hkept : rq.kept = P) (hcomp : rq.computed = 0)
    (hown : ∀ e ∈ m.cache, e.sid ≠ rq.sid) (hP : 0 < P) (hK : blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ x, (plan eng 0 m [rq]).done = [x] ∧ (plan eng 0 m [rq]).waiting = [] ∧
      (plan eng 0 m [rq]).preempted = 0 ∧ x.decoding = false ∧
      x.sched = min P eng.budget ∧ x.pos = 0 ∧ x.remaining = P ∧ x.alloc ≤ blocksFor eng.blockSize P ∧
      x.req.out = rq.out ∧ x.req.sid = rq.sid ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng 0 m [rq]).cache, Q e.sid := by
  have hex : excluded (phaseOf eng m.running) false = false := excluded_prefill eng _ (by rw [hr]; rfl)
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only at hex ⊢
  rw [serveRunning_nil eng only _ _ (by simp [hr, clearSched])]
  simp only [hr, clearSched, appendRes, reqCount, if_true]
  exact admit_one eng only 0 _ rq P rfl hB rfl hcap rfl hex hkept hcomp (ownCachedBlocks_zero _ _ hown) hP hK

/-- The plan of a machine whose only resident is a prefill and whose queue is empty: the resident is
served, within the KV pool. -/
theorem plan_busy (eng : Engine) (m : Machine) (r : Res) (P : Nat) (hr : m.running = [r])
    (hB : 0 < eng.budget) (hok : ResidentOk eng.blockSize P r) (hK : blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ x, (plan eng 0 m []).done = [x] ∧ (plan eng 0 m []).waiting = [] ∧
      (plan eng 0 m []).preempted = 0 ∧ x.decoding = false ∧
      x.sched = min r.remaining eng.budget ∧ x.pos = r.pos ∧ x.remaining = r.remaining ∧
      x.alloc ≤ blocksFor eng.blockSize P ∧ x.req.out = r.req.out ∧ x.req.sid = r.req.sid ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng 0 m []).cache, Q e.sid := by
  obtain ⟨hd, hrem, hpos, halloc, _⟩ := hok
  have hex : excluded (phaseOf eng m.running) false = false := excluded_prefill eng _ (by simp [hr, anyDecoding, hd])
  have hgrow : blocksFor eng.blockSize (r.pos + min r.remaining eng.budget) ≤ blocksFor eng.blockSize P :=
    blocksFor_mono _ (by omega)
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only at hex ⊢
  simp only [hr, clearSched, resCount]
  obtain ⟨h1, h2, h3, h4, h5⟩ := serve_one eng only 0
    ⟨eng.budget, 0, [], [{ r with sched := 0 }], [], m.cache, m.relSeq, 0, false⟩ { r with sched := 0 }
    rfl hB rfl rfl hd hrem hex (by simp only [usedBlocks]; omega)
  simp only [h1, h2, h3, h4, appendRes, ↓reduceIte]
  rw [admitHeads_nil eng only _ _ rfl]
  refine ⟨{ r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + min r.remaining eng.budget) - r.alloc),
                   sched := min r.remaining eng.budget }, rfl, rfl, rfl, hd, rfl, rfl, rfl, ?_, rfl, rfl,
    fun Q hQ => h5 Q hQ⟩
  show r.alloc + (blocksFor eng.blockSize (r.pos + min r.remaining eng.budget) - r.alloc) ≤ _
  omega

/-- The invariant holds of the empty machine. -/
theorem init_inv (eng : Engine) (g P : Nat) (ss : List Session) (hg : 0 < g) (hw : RenewalSessions g P 0 ss) :
    Inv eng g P (init ss) where
  waiting := rfl
  running := Or.inl rfl
  spaced := spaced_mono (Nat.zero_le _) (firstTurns_spaced g P hg 0 ss hw).1
  head := by
    show HeadAfter eng.budget (eng.budget * 0 + 0) (firstTurns 0 ss)
    cases firstTurns 0 ss with
    | nil => trivial
    | cons p _ => show eng.budget * 0 + 0 ≤ eng.budget * p.time; simp
  conserve := by simp [init, resLeft]
  records := by simp [init]
  cacheSids := by simp [init]
  runningSids := by simp [init]

theorem step_inv (eng : Engine) (g P : Nat) (ss : List Session) (hy : Hyp eng g P ss) (m : Machine)
    (h : Inv eng g P m) : Inv eng g P (step eng ss m) := by
  have hB : 0 < eng.budget := by
    rcases Nat.eq_zero_or_pos eng.budget with h0 | h0
    · have := hy.work; rw [h0, Nat.zero_mul] at this; have := hy.pos; omega
    · exact h0
  have hg := hy.gap
  have hP := hy.pos
  have hwork := hy.work
  have hnext := nextTurn_single ss hy.turns
  obtain ⟨hwait, hrun, hsp, hhead, hcons, hrec, hcsid, hrsid⟩ := h
  rcases hrun with hr | ⟨r, hr, hok⟩
  · -- nothing resident: wait for the next arrival, or admit the one due now
    rw [hr] at hcons hhead
    simp only [resLeft, Nat.add_zero] at hcons hhead
    cases hp : m.pending with
    | nil =>
      have hdue : duePending m.now m.pending = ([], []) := by rw [hp]; rfl
      unfold step
      rw [hdue]
      dsimp only
      rw [hwait, hr]
      simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
      exact ⟨rfl, Or.inl rfl, trivial, trivial, by simpa [resLeft] using hcons, hrec, by simp, by simp⟩
    | cons p ps =>
      rw [hp] at hsp hhead
      obtain ⟨hle, hprompt, hturn, hsid, hrest⟩ := hsp
      have hpin : p ∈ m.pending := by rw [hp]; exact List.mem_cons_self
      by_cases hnow : p.time = m.now
      · -- the arrival due now is admitted and served
        have hdue : duePending m.now m.pending = ([p], ps) := by
          rw [hp]
          have := duePending_none m.now ps (fun q hq => by have := spaced_le hrest q hq; omega)
          simp [duePending, this, hnow]
        have hsub : submit eng ss [p] m.waiting = [newReq eng ss p] := by
          rw [hwait]
          have : ¬ blocksFor eng.blockSize p.prompt > eng.kvBlocks := by rw [hprompt]; have := hy.fits; omega
          simp [submit, this, appendReq]
        have hcount : countFirst [p] = 1 := by simp [countFirst, hturn]
        obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxc⟩ :=
          plan_arrival eng m (newReq eng ss p) P hr hy.cap hB (by simp [newReq, hprompt]) (by simp [newReq])
            (fun e he => by have := hcsid e he p hpin; simp only [newReq]; omega) hP hy.fits
        have hxsid' : x.req.sid = p.sid := by rw [hxsid]; rfl
        have hout : x.req.out ≤ 1 := by rw [hxout]; exact newReq_out eng ss hy.turns p
        obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_run eng ss m [p] ps [newReq eng ss p] x hnext hdue hsub
          (by simp [noReq]) (by simp [hr, resCount, reqCount]) hxd hxw hxp hxdec (by rw [hxs]; omega) hout
        rw [hcount] at e4 e7
        refine ⟨e3, ?_, ?_, ?_, ?_, ?_, ?_, ?_⟩
        · rw [e6]
          split
          · exact Or.inl rfl
          · rename_i hno
            exact Or.inr ⟨_, rfl, rfl, by dsimp only; omega, by dsimp only; omega, hxalloc, hout⟩
        · rw [e1, e2]
          exact spaced_mono (by omega) hrest
        · rw [e1, e2, e6]
          cases ps with
          | nil => trivial
          | cons q qs =>
            have hq : p.time + g ≤ q.time := hrest.1
            show eng.budget * (m.now + 1) + resLeft (if x.remaining ≤ x.sched then [] else _) ≤ eng.budget * q.time
            have hmul : eng.budget * (m.now + g) ≤ eng.budget * q.time := Nat.mul_le_mul_left _ (by omega)
            rw [Nat.mul_add] at hmul
            rw [Nat.mul_add, Nat.mul_one]
            split
            · simp only [resLeft, Nat.add_zero]
              have : eng.budget ≤ eng.budget * g := Nat.le_mul_of_pos_right _ hg
              omega
            · simp only [resLeft, Nat.add_zero]
              rw [hxrem, hxs]
              rw [hxrem, hxs] at *
              omega
        · rw [e4, e5, e6]
          split
          · simp only [resLeft, Nat.add_zero]
            rw [Nat.add_mul, Nat.one_mul, hcons, hxs]
            rw [hxrem, hxs] at *
            omega
          · simp only [resLeft, Nat.add_zero]
            rw [Nat.add_mul, Nat.one_mul, hcons, hxs, hxrem]
            rw [hxrem, hxs] at *
            omega
        · intro y hy
          rcases e7 y hy with hy | ⟨ha, hs⟩
          · exact hrec y hy
          · rw [ha, hs, Nat.add_mul, Nat.one_mul, hcons]
            exact Nat.le_refl _
        · rw [e2]
          exact e8 (fun s => ∀ q ∈ ps, s < q.sid)
            (hxc (fun s => ∀ q ∈ ps, s < q.sid) (fun e he q hq => Nat.lt_trans (hcsid e he p hpin) (hsid q hq)))
            (by rw [hxsid']; exact hsid)
        · rw [e2, e6]
          split
          · simp
          · intro y hy q hq
            simp only [List.mem_singleton] at hy
            subst hy
            dsimp only
            rw [hxsid']
            exact hsid q hq
      · -- the next arrival is later: the clock moves to it
        have hlt : m.now < p.time := by omega
        have hdue : duePending m.now m.pending = ([], p :: ps) := by
          rw [hp]
          exact duePending_none m.now _ (fun q hq => by
            rcases List.mem_cons.mp hq with rfl | hq
            · exact hlt
            · have := spaced_le hrest q hq; omega)
        unfold step
        rw [hdue]
        dsimp only
        rw [hwait, hr]
        simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
        refine ⟨rfl, Or.inl rfl, ⟨Nat.le_refl _, hprompt, hturn, hsid, hrest⟩, ?_, by simpa [resLeft] using hcons,
          hrec, by rw [← hp]; exact hcsid, by simp⟩
        show eng.budget * p.time + resLeft [] ≤ eng.budget * p.time
        simp [resLeft]
  · -- one resident: it is served; no arrival is due before its work is done
    obtain ⟨hd, hrem, hpos, halloc, hout0⟩ := hok
    rw [hr] at hcons hhead
    simp only [resLeft, Nat.add_zero] at hcons hhead
    -- every pending arrival is later than now
    have hlater : ∀ q ∈ m.pending, m.now + 1 ≤ q.time := by
      intro q hq
      cases hp : m.pending with
      | nil => rw [hp] at hq; simp at hq
      | cons p ps =>
        rw [hp] at hhead hsp hq
        have h1 : eng.budget * m.now + r.remaining ≤ eng.budget * p.time := hhead
        have h2 : m.now < p.time := by
          rcases Nat.lt_or_ge m.now p.time with h | h
          · exact h
          · have := Nat.mul_le_mul_left eng.budget h; omega
        rcases List.mem_cons.mp hq with rfl | hq
        · omega
        · have := spaced_le hsp.2.2.2.2 q hq; omega
    have hdue : duePending m.now m.pending = ([], m.pending) :=
      duePending_none m.now _ (fun q hq => by have := hlater q hq; omega)
    have hsub : submit eng ss [] m.waiting = [] := by rw [hwait]; rfl
    obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxc⟩ :=
      plan_busy eng m r P hr hB ⟨hd, hrem, hpos, halloc, hout0⟩ hy.fits
    have hrs : ∀ q ∈ m.pending, r.req.sid < q.sid := hrsid r (by rw [hr]; exact List.mem_cons_self)
    have hout : x.req.out ≤ 1 := by rw [hxout]; exact hout0
    obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_run eng ss m [] m.pending [] x hnext hdue hsub
      (by simp [hr, noRes]) (by simp [hr, resCount, reqCount]) hxd hxw hxp hxdec
      (by rw [hxs]; omega) hout
    simp only [countFirst, Nat.add_zero] at e4 e7
    refine ⟨e3, ?_, ?_, ?_, ?_, ?_, ?_, ?_⟩
    · rw [e6]
      split
      · exact Or.inl rfl
      · rename_i hno
        exact Or.inr ⟨_, rfl, rfl, by dsimp only; omega, by dsimp only; omega, hxalloc, hout⟩
    · rw [e1, e2]
      cases hp : m.pending with
      | nil => trivial
      | cons p ps =>
        rw [hp] at hsp
        have := hlater p (by rw [hp]; exact List.mem_cons_self)
        exact ⟨this, hsp.2⟩
    · rw [e1, e2, e6]
      cases hp : m.pending with
      | nil => trivial
      | cons p ps =>
        rw [hp] at hhead
        have h1 : eng.budget * m.now + r.remaining ≤ eng.budget * p.time := hhead
        have h2 : m.now + 1 ≤ p.time := hlater p (by rw [hp]; exact List.mem_cons_self)
        have h3 : eng.budget * (m.now + 1) ≤ eng.budget * p.time := Nat.mul_le_mul_left _ h2
        show eng.budget * (m.now + 1) + resLeft (if x.remaining ≤ x.sched then [] else _) ≤ eng.budget * p.time
        rw [Nat.mul_add, Nat.mul_one] at h3 ⊢
        rw [hxrem, hxs]
        split
        · simp only [resLeft]; omega
        · simp only [resLeft, Nat.add_zero]
          rename_i hno
          have : min r.remaining eng.budget = eng.budget := by omega
          rw [this]
          omega
    · rw [e4, e5, e6, hcons]
      rw [hxrem, hxs]
      split
      · simp only [resLeft]; omega
      · simp only [resLeft, Nat.add_zero]; omega
    · intro y hy
      rcases e7 y hy with hy | ⟨ha, hs⟩
      · exact hrec y hy
      · rw [ha, hs, hcons]
        omega
    · rw [e2]
      exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (hxc (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid)
        (by rw [hxsid]; exact hrs)
    · rw [e2, e6]
      split
      · simp
      · intro y hy q hq
        simp only [List.mem_singleton] at hy
        subst hy
        dsimp only
        rw [hxsid]
        exact hrs q hq

theorem run_inv (eng : Engine) (g P : Nat) (ss : List Session) (hy : Hyp eng g P ss) :
    ∀ (fuel : Nat) (m : Machine), Inv eng g P m → Inv eng g P (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng g P ss hy fuel _ (step_inv eng g P ss hy m h)

end Backlog

/-- **The pathwise bounded backlog** (Dai et al. 2025, Theorem 2(b)). Sessions arrive one every `g`
steps (the `k`-th at `(k + 1) · g`), each one turn of a `P`-token prompt and at most one output
token, and the work arriving per gap fits the budget (`P ≤ budget · g`). Then at every iteration of
every run, the sessions arrived (those due at its start included) times `P` exceed the tokens served
before it by at most `P`. The engine needs a request slot and room for a prompt in its KV pool; any
chunk cap, either schedule, a prefix cache or none. That the request cap and the KV pool never bind and
that nothing is preempted follows: at most one request is ever in flight. -/
theorem backlog_bounded (eng : Engine) (g P : Nat) (ss : List Session)
    (hcap : 0 < eng.reqsCap) (hfits : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hwork : P ≤ eng.budget * g) (hw : RenewalSessions g P 0 ss) (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * P ≤ r.served + P := by
  rcases Nat.eq_zero_or_pos P with hP | hP
  · intro r _
    subst hP
    simp
  · have hg : 0 < g := by
      rcases Nat.eq_zero_or_pos g with h0 | h0
      · rw [h0, Nat.mul_zero] at hwork; omega
      · exact h0
    have hy : Backlog.Hyp eng g P ss :=
      ⟨hcap, hfits, hP, hg, hwork, Backlog.renewal_turns g P 0 ss hw⟩
    exact (Backlog.run_inv eng g P ss hy fuel (init ss) (Backlog.init_inv eng g P ss hg hw)).records

/-- The work per gap must fit the budget: with a gap of 1 (32 > 16 · 1), session 0 arrives at 1 and
is served 16 of its 32 tokens; at 2 session 1 arrives and the iteration's record has
`arrived · 32 = 64 > served + 32 = 48` (the broken variant of `dai_backlog.sq`, tested on the
interpreter's path too). -/
example : (run ⟨16, 4, 64, 16, 0, false, false⟩ [⟨1, [⟨32, 1, 0, false⟩]⟩, ⟨2, [⟨32, 1, 0, false⟩]⟩] 3
    (init [⟨1, [⟨32, 1, 0, false⟩]⟩, ⟨2, [⟨32, 1, 0, false⟩]⟩])).records.any
      (fun r => r.start == 2 && r.arrived == 2 && r.served == 16) = true := by
  decide +kernel

end Serq
