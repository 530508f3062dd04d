module

public import Serq.Backlog

/-! # The pathwise bounded backlog with decodes (Dai et al. 2025, Theorem 2(b), issue 14 result 2)

`Serq.backlog_bounded` (`Backlog.lean`) covers requests of at most one output token. Here each
session's one turn has a `P`-token prompt and `D` output tokens (`D ≤ 1`: at most one): the prefill
samples the first, then `D - 1` decode iterations of one token each follow, whatever the budget. A
request's work is `W = P + (D - 1)` tokens. If a request's whole life fits in a gap,
`P + B · (D - 1) ≤ B · g` (its `⌈P / B⌉` prefill iterations and `D - 1` decode iterations take at
most `g` steps), then every iteration record has `arrived · W ≤ served + W`
(`Serq.backlog_decode_bounded`). The gaps need not be constant: arrivals at least `g` apart, at any
times, suffice (`Serq.backlog_decode_gapped`, over `GappedDecode`); the renewal is its instance.

The hypotheses on the engine: a request slot, and the KV pool holds one request's blocks at its
longest (`blocksFor blockSize W ≤ kvBlocks`: the last decode writes token `W`). Any chunk cap, either
schedule (`phased`), a prefix cache or none. Proved, not assumed: at most one request is in flight,
so the request cap and the KV pool never bind and nothing is preempted.

The invariant (`BacklogDecode.Inv`): the resident, if any, is a prefill (`pos + remaining = P`,
within `P`'s blocks, knowing its `P` prompt tokens, with `D` outputs) or a decode
(`0 < remaining ≤ D - 1`, `pos + remaining = W`, within `W`'s blocks); conservation,
`arrived · W = served + left` with `left` the prefill's `remaining + (D - 1)` or the decode's
`remaining`; the pending arrivals spaced by `g` (`Backlog.Spaced`); and the resident is done by the
next arrival, `B · now + life ≤ B · next` (`Backlog.HeadAfter`), `life` the prefill's
`remaining + B · (D - 1)` or the decode's `B · remaining` (a decode takes one step per token); the
cache's entries and the resident are of sessions before every pending arrival's.
-/

@[expose] public section

namespace Serq

/-- The renewal workload with decodes from the `k`-th session on: the `k`-th (from 0) arrives at
step `(k + 1) · g` with exactly one turn, of `P` prompt tokens and `D` output tokens (at most one
when `D ≤ 1`: `out - 1 = D - 1`). -/
def RenewalDecode (g P D : Nat) : Nat → List Session → Prop
  | _, [] => True
  | k, s :: ss => s.arrive = (k + 1) * g ∧ (∃ t, s.turns = [t] ∧ t.new = P ∧ t.out - 1 = D - 1) ∧
      RenewalDecode g P D (k + 1) ss

/-- The family of `Backlog.lean` is the one with `D = 1`. -/
theorem renewalDecode_one (g P : Nat) : ∀ (k : Nat) (ss : List Session),
    RenewalSessions g P k ss → RenewalDecode g P 1 k ss
  | _, [], _ => trivial
  | k, _ :: ss, ⟨ha, ⟨t, ht, hn, ho⟩, hr⟩ => ⟨ha, ⟨t, ht, hn, by omega⟩, renewalDecode_one g P (k + 1) ss hr⟩

/-- Sessions whose arrivals are at least `g` apart, the first no earlier than `x` (any gaps of at
least `g`, not only a constant one), each one turn of `P` prompt tokens and `D` output tokens. -/
def GappedDecode (g P D : Nat) : Nat → List Session → Prop
  | _, [] => True
  | x, s :: ss => x ≤ s.arrive ∧ (∃ t, s.turns = [t] ∧ t.new = P ∧ t.out - 1 = D - 1) ∧
      GappedDecode g P D (s.arrive + g) ss

/-- The renewal with decodes is a family of gaps of at least `g` (all exactly `g`). -/
theorem gapped_of_renewal (g P D : Nat) : ∀ (k : Nat) (ss : List Session),
    RenewalDecode g P D k ss → GappedDecode g P D ((k + 1) * g) ss
  | _, [], _ => trivial
  | k, s :: ss, ⟨ha, ht, hr⟩ => by
    refine ⟨by rw [ha]; exact Nat.le_refl _, ht, ?_⟩
    have : s.arrive + g = (k + 1 + 1) * g := by rw [ha, Nat.succ_mul (k + 1)]
    rw [this]
    exact gapped_of_renewal g P D (k + 1) ss hr

theorem gapped_mono {g P D x y : Nat} {ss : List Session} (hxy : y ≤ x) (h : GappedDecode g P D x ss) :
    GappedDecode g P D y ss := by
  cases ss with
  | nil => trivial
  | cons s ss => exact ⟨Nat.le_trans hxy h.1, h.2⟩

namespace BacklogDecode

open Backlog

theorem gapped_turns (g P D : Nat) : ∀ (x : Nat) (ss : List Session), GappedDecode g P D x ss →
    ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1
  | _, [], _, s, hs => by simp at hs
  | _, x :: xs, ⟨_, ⟨t, ht, _, hout⟩, hrest⟩, s, hs => by
    rcases List.mem_cons.mp hs with rfl | hs
    · exact ⟨t, ht, hout⟩
    · exact gapped_turns g P D _ xs hrest s hs

theorem firstTurns_spaced (g P D : Nat) (hg : 0 < g) : ∀ (k x : Nat) (ss : List Session),
    GappedDecode g P D x ss → Spaced g P x (firstTurns k ss) ∧ ∀ q ∈ firstTurns k ss, k ≤ q.sid
  | _, _, [], _ => ⟨trivial, fun q hq => by simp [firstTurns] at hq⟩
  | k, x, s :: ss, ⟨ha, ⟨t, ht, hnew, _⟩, hrest⟩ => by
    obtain ⟨ih, isid⟩ := firstTurns_spaced g P D hg (k + 1) (s.arrive + g) ss hrest
    have hlt : ∀ q ∈ firstTurns (k + 1) ss, s.arrive < q.time := by
      intro q hq
      have := spaced_le ih q hq
      omega
    simp only [firstTurns, ht]
    rw [insertPending_front _ _ hlt]
    refine ⟨⟨ha, hnew, rfl, fun q hq => by have := isid q hq; dsimp only; omega, ih⟩, ?_⟩
    intro q hq
    rcases List.mem_cons.mp hq with rfl | hq
    · exact Nat.le_refl _
    · have := isid q hq; omega

theorem nextTurn_one (ss : List Session) (hw : ∀ s ∈ ss, ∃ t, s.turns = [t]) (now : Nat)
    (q : Req) (ps : List Pending) : nextTurn ss now q ps = ps := by
  unfold nextTurn
  cases hs : sessionAt ss q.sid with
  | none => rfl
  | some s =>
    obtain ⟨t, ht⟩ := hw s (sessionAt_mem ss q.sid s hs)
    simp [ht, turnAt]

theorem newReq_out (eng : Engine) (ss : List Session) (D : Nat)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) (p : Pending)
    (hs : ∃ s, sessionAt ss p.sid = some s) (hp : p.turn = 0) : (newReq eng ss p).out - 1 = D - 1 := by
  obtain ⟨s, hs⟩ := hs
  obtain ⟨t, ht, hout⟩ := hw s (sessionAt_mem ss p.sid s hs)
  unfold newReq
  simp [hs, ht, hp, turnAt, hout]

/-! ## One iteration, computed -/

/-- The head of the queue, a fresh request of `P > 0` tokens, is admitted by an empty engine, knowing
its `P` prompt tokens, and takes `min P budget` tokens. -/
theorem admit_fresh (eng : Engine) (only : Option Bool) (fuel : Nat) (p : Plan) (rq : Req) (P : Nat)
    (hw : p.waiting = [rq]) (hb : 0 < p.budget) (hdone : p.done = []) (hcap : 0 < eng.reqsCap)
    (hch : p.chunk = 0) (hex : excluded only false = false) (hkept : rq.kept = P) (hcomp : rq.computed = 0)
    (hown : ownCachedBlocks rq.sid p.cache = 0) (hP : 0 < P) (hK : blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ r, (admitHeads eng only (fuel + 1 + 1) p).done = [r] ∧ (admitHeads eng only (fuel + 1 + 1) p).waiting = [] ∧
      (admitHeads eng only (fuel + 1 + 1) p).preempted = p.preempted ∧ r.decoding = false ∧
      r.sched = min P p.budget ∧ r.pos = 0 ∧ r.remaining = P ∧ r.alloc ≤ blocksFor eng.blockSize P ∧
      r.req.out = rq.out ∧ r.req.sid = rq.sid ∧ r.known = P ∧ r.req.prompt = rq.prompt ∧
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
  refine ⟨_, rfl, rfl, rfl, rfl, rfl, rfl, rfl, ?_, ?_, ?_, rfl, ?_,
    fun Q hQ => evict_sid Q _ _ (consume_sid Q _ _ _ hQ)⟩
  · simpa using hunits
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl

/-- The plan of an empty machine with one fresh request in the queue: it is admitted. -/
theorem plan_arrival (eng : Engine) (m : Machine) (rq : Req) (P : Nat) (hr : m.running = [])
    (hcap : 0 < eng.reqsCap) (hB : 0 < eng.budget) (hkept : rq.kept = P) (hcomp : rq.computed = 0)
    (hown : ∀ e ∈ m.cache, e.sid ≠ rq.sid) (hP : 0 < P) (hK : blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ x, (plan eng 0 m [rq]).done = [x] ∧ (plan eng 0 m [rq]).waiting = [] ∧
      (plan eng 0 m [rq]).preempted = 0 ∧ x.decoding = false ∧
      x.sched = min P eng.budget ∧ x.pos = 0 ∧ x.remaining = P ∧ x.alloc ≤ blocksFor eng.blockSize P ∧
      x.req.out = rq.out ∧ x.req.sid = rq.sid ∧ x.known = P ∧ x.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng 0 m [rq]).cache, Q e.sid := by
  have hex : excluded (phaseOf eng m.running) false = false := excluded_prefill eng _ (by rw [hr]; rfl)
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only at hex ⊢
  rw [serveRunning_nil eng only _ _ (by simp [hr, clearSched])]
  simp only [hr, clearSched, appendRes, reqCount, if_true]
  exact admit_fresh eng only 0 _ rq P rfl hB rfl hcap rfl hex hkept hcomp (ownCachedBlocks_zero _ _ hown) hP hK

/-- The plan of a machine whose only resident is a prefill and whose queue is empty: the resident is
served `min remaining budget` tokens, within the KV pool. -/
theorem plan_prefill (eng : Engine) (m : Machine) (r : Res) (P : Nat) (hr : m.running = [r])
    (hB : 0 < eng.budget) (hd : r.decoding = false) (hrem : 0 < r.remaining) (hpos : r.pos + r.remaining = P)
    (halloc : r.alloc ≤ blocksFor eng.blockSize P) (hK : blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ x, (plan eng 0 m []).done = [x] ∧ (plan eng 0 m []).waiting = [] ∧
      (plan eng 0 m []).preempted = 0 ∧ x.decoding = false ∧
      x.sched = min r.remaining eng.budget ∧ x.pos = r.pos ∧ x.remaining = r.remaining ∧
      x.alloc ≤ blocksFor eng.blockSize P ∧ x.req = r.req ∧ x.known = r.known ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng 0 m []).cache, Q e.sid := by
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

theorem excluded_decode (eng : Engine) (rs : List Res) (h : anyDecoding rs = true) :
    excluded (phaseOf eng rs) true = false := by
  unfold phaseOf
  split <;> simp [excluded, h]

/-- The only resident, a decode, takes one token; it fits, so nothing is preempted. -/
theorem serve_decode (eng : Engine) (only : Option Bool) (fuel : Nat) (p : Plan) (r : Res)
    (htodo : p.todo = [r]) (hb : 0 < p.budget) (hsp : p.selfPreempted = false)
    (hd : r.decoding = true) (hrem : 0 < r.remaining) (hex : excluded only true = false)
    (hfit : usedBlocks p.done + r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc) ≤ eng.kvBlocks) :
    (serveRunning eng only (fuel + 1 + 1) p).done = appendRes p.done
        [{ r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc), sched := 1 }] ∧
      (serveRunning eng only (fuel + 1 + 1) p).todo = [] ∧
      (serveRunning eng only (fuel + 1 + 1) p).waiting = p.waiting ∧
      (serveRunning eng only (fuel + 1 + 1) p).preempted = p.preempted ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (serveRunning eng only (fuel + 1 + 1) p).cache, Q e.sid := by
  have hg : growOrPreempt eng (resCount p.todo) (blocksFor eng.blockSize (r.pos + 1) - r.alloc) p = p := by
    rw [htodo]
    simp only [resCount, Nat.zero_add, growOrPreempt]
    rw [if_pos (by simp only [htodo, usedBlocks]; omega)]
  have hb0 : ¬ (p.budget = 0 ∨ p.selfPreempted = true) := by simp [hsp]; omega
  have hrem0 : ¬ (r.remaining = 0 ∨ excluded only r.decoding = true) := by simp [hd, hex]; omega
  rw [serveRunning, if_neg hb0]
  simp only [htodo]
  rw [if_neg hrem0]
  simp only [hd, if_true]
  rw [← htodo, hg, htodo]
  simp only [hsp, Bool.false_eq_true, if_false, dropHead]
  rw [serveRunning_nil eng only _ _ rfl]
  exact ⟨rfl, rfl, rfl, rfl, fun Q hQ => evict_sid Q _ _ hQ⟩

/-- The plan of a machine whose only resident is a decode and whose queue is empty: the resident is
served its one token, within the KV pool. -/
theorem plan_decode (eng : Engine) (m : Machine) (r : Res) (W : Nat) (hr : m.running = [r])
    (hB : 0 < eng.budget) (hd : r.decoding = true) (hrem : 0 < r.remaining) (hpos : r.pos + 1 ≤ W)
    (halloc : r.alloc ≤ blocksFor eng.blockSize W) (hK : blocksFor eng.blockSize W ≤ eng.kvBlocks) :
    ∃ x, (plan eng 0 m []).done = [x] ∧ (plan eng 0 m []).waiting = [] ∧
      (plan eng 0 m []).preempted = 0 ∧ x.decoding = true ∧
      x.sched = 1 ∧ x.pos = r.pos ∧ x.remaining = r.remaining ∧
      x.alloc ≤ blocksFor eng.blockSize W ∧ x.req = r.req ∧ x.known = r.known ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng 0 m []).cache, Q e.sid := by
  have hex : excluded (phaseOf eng m.running) true = false := excluded_decode eng _ (by simp [hr, anyDecoding, hd])
  have hgrow : blocksFor eng.blockSize (r.pos + 1) ≤ blocksFor eng.blockSize W := blocksFor_mono _ hpos
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only at hex ⊢
  simp only [hr, clearSched, resCount]
  obtain ⟨h1, h2, h3, h4, h5⟩ := serve_decode eng only 0
    ⟨eng.budget, 0, [], [{ r with sched := 0 }], [], m.cache, m.relSeq, 0, false⟩ { r with sched := 0 }
    rfl hB rfl hd hrem hex (by simp only [usedBlocks]; omega)
  simp only [h1, h2, h3, h4, appendRes, ↓reduceIte]
  rw [admitHeads_nil eng only _ _ rfl]
  refine ⟨{ r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc), sched := 1 },
    rfl, rfl, rfl, hd, rfl, rfl, rfl, ?_, rfl, rfl, fun Q hQ => h5 Q hQ⟩
  show r.alloc + (blocksFor eng.blockSize (r.pos + 1) - r.alloc) ≤ _
  omega

/-! ## Applying the iteration to the one resident -/

theorem apply_prefill_more (eng : Engine) (ss : List Session) (now : Nat) (m : Machine) (r : Res)
    (hd : r.decoding = false) (hs : 0 < r.sched) (hno : ¬ r.remaining ≤ r.sched) :
    (apply eng ss now m [r] []).running =
      [⟨r.req, r.alloc, r.pos + r.sched, r.known, false, r.remaining - r.sched, 0⟩] := by
  have hs0 : ¬ r.sched = 0 := by omega
  have h1 : ¬ r.remaining - r.sched = 0 := by omega
  simp [apply, hs0, hd, h1, appendRes]

/-- A prefill that finishes samples its first token and decodes the rest, `out - 1 - (known -
prompt)` tokens, or ends. -/
theorem apply_prefill_done (eng : Engine) (ss : List Session) (now : Nat) (m : Machine) (r : Res)
    (hd : r.decoding = false) (hs : 0 < r.sched) (hfin : r.remaining ≤ r.sched) :
    ∃ q : Req, q.sid = r.req.sid ∧ (apply eng ss now m [r] []).running =
      if r.req.out - 1 - (r.known - r.req.prompt) = 0 then []
      else [⟨q, r.alloc, r.pos + r.sched, r.known, true, r.req.out - 1 - (r.known - r.req.prompt), 0⟩] := by
  have hs0 : ¬ r.sched = 0 := by omega
  have h1 : r.remaining - r.sched = 0 := by omega
  by_cases hL : r.req.out - 1 - (r.known - r.req.prompt) = 0
  · refine ⟨r.req, rfl, ?_⟩
    simp only [apply, hs0, hd, h1, hL, if_false, if_true]
    repeat' split
    all_goals simp_all
  · cases hf : r.req.hasFirst
    · refine ⟨{ r.req with first := now, hasFirst := true }, rfl, ?_⟩
      simp [apply, hs0, hd, h1, hL, hf, appendRes]
    · refine ⟨r.req, rfl, ?_⟩
      simp [apply, hs0, hd, h1, hL, hf, appendRes]

/-- A decode takes its one token: it goes on with one token fewer, or its turn ends. -/
theorem apply_decode (eng : Engine) (ss : List Session) (now : Nat) (m : Machine) (r : Res)
    (hd : r.decoding = true) (hs : r.sched = 1) :
    ∃ q : Req, q.sid = r.req.sid ∧ (apply eng ss now m [r] []).running =
      if r.remaining - 1 = 0 then []
      else [⟨q, r.alloc, r.pos + 1, r.known, true, r.remaining - 1, 0⟩] := by
  by_cases hL : r.remaining - 1 = 0
  · refine ⟨r.req, rfl, ?_⟩
    simp only [apply, hs, hd, hL, if_true]
    repeat' split
    all_goals simp_all
  · cases hf : r.req.hasFirst
    · refine ⟨{ r.req with first := now, hasFirst := true }, rfl, ?_⟩
      simp [apply, hs, hd, hL, hf, appendRes]
    · refine ⟨r.req, rfl, ?_⟩
      simp [apply, hs, hd, hL, hf, appendRes]

/-- A step that runs an iteration whose plan has one resident given `sched > 0` tokens and leaves
the queue empty: what the machine becomes (its resident as `apply` leaves it). -/
theorem step_run (eng : Engine) (ss : List Session) (m : Machine) (due later : List Pending) (W : List Req)
    (x : Res) (hnext : ∀ now q ps, nextTurn ss now q ps = ps)
    (hdue : duePending m.now m.pending = (due, later)) (hsub : submit eng ss due m.waiting = W)
    (hbusy : ¬ (noRes m.running = true ∧ noReq W = true)) (hone : resCount m.running + reqCount W ≤ 1)
    (hdone : (plan eng 0 m W).done = [x]) (hw : (plan eng 0 m W).waiting = [])
    (hpre : (plan eng 0 m W).preempted = 0) (hs : 0 < x.sched) :
    (step eng ss m).now = m.now + 1 ∧ (step eng ss m).pending = later ∧ (step eng ss m).waiting = [] ∧
    (step eng ss m).arrived = m.arrived + countFirst due ∧ (step eng ss m).served = m.served + x.sched ∧
    (∃ M, (step eng ss m).running = (apply eng ss m.now M [x] []).running) ∧
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
  refine ⟨rfl, ?_, ?_, ?_, ?_, ⟨_, rfl⟩, ?_, ?_⟩
  · exact (hk [x] _ []).2.2.1
  · exact (hk [x] _ []).1
  · exact (hk [x] _ []).2.1
  · exact (hk [x] _ []).2.2.2.1
  · intro y hy
    simp only [apply_records] at hy
    rcases (mem_appendRecord _ _ _).mp hy with hy | hy
    · exact Or.inl hy
    · right
      subst hy
      exact ⟨rfl, rfl⟩
  · intro Q hQ hx
    exact apply_cache Q eng ss m.now [x] _ [] hQ (by simpa using hx)

/-! ## The invariant -/

/-- The work the residents have left: a prefill's `remaining` and its `D - 1` decodes, a decode's
`remaining`. -/
def workLeft (D : Nat) : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then r.remaining else r.remaining + (D - 1)) + workLeft D rs

/-- The steps the residents have left, times the budget `B`: a prefill's `remaining` tokens take
`⌈remaining / B⌉` steps and its decodes `D - 1`; a decode's `remaining` tokens take `remaining` steps. -/
def lifeLeft (B D : Nat) : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then B * r.remaining else r.remaining + B * (D - 1)) + lifeLeft B D rs

theorem workLeft_pre (D : Nat) (r : Res) (h : r.decoding = false) : workLeft D [r] = r.remaining + (D - 1) := by
  simp [workLeft, h]

theorem workLeft_dec (D : Nat) (r : Res) (h : r.decoding = true) : workLeft D [r] = r.remaining := by
  simp [workLeft, h]

theorem lifeLeft_pre (B D : Nat) (r : Res) (h : r.decoding = false) :
    lifeLeft B D [r] = r.remaining + B * (D - 1) := by
  simp [lifeLeft, h]

theorem lifeLeft_dec (B D : Nat) (r : Res) (h : r.decoding = true) : lifeLeft B D [r] = B * r.remaining := by
  simp [lifeLeft, h]

/-- A resident prefill: `pos + remaining = P` within `P`'s blocks, knowing its prompt, `D` outputs. -/
def Prefilling (bs P D : Nat) (r : Res) : Prop :=
  r.decoding = false ∧ 0 < r.remaining ∧ r.pos + r.remaining = P ∧ r.alloc ≤ blocksFor bs P ∧
    r.known = P ∧ r.req.prompt = P ∧ r.req.out - 1 = D - 1

/-- A resident decode: `0 < remaining ≤ D - 1`, `pos + remaining = P + (D - 1)`, within its blocks. -/
def Decoding (bs P D : Nat) (r : Res) : Prop :=
  r.decoding = true ∧ 0 < r.remaining ∧ r.remaining ≤ D - 1 ∧ r.pos + r.remaining = P + (D - 1) ∧
    r.alloc ≤ blocksFor bs (P + (D - 1))

structure Inv (eng : Engine) (g P D : Nat) (ss : List Session) (m : Machine) : Prop where
  waiting : m.waiting = []
  running : m.running = [] ∨
    ∃ r, m.running = [r] ∧ (Prefilling eng.blockSize P D r ∨ Decoding eng.blockSize P D r)
  spaced : Spaced g P m.now m.pending
  head : HeadAfter eng.budget (eng.budget * m.now + lifeLeft eng.budget D m.running) m.pending
  conserve : m.arrived * (P + (D - 1)) = m.served + workLeft D m.running
  records : ∀ x ∈ m.records, x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1))
  cacheSids : ∀ e ∈ m.cache, ∀ q ∈ m.pending, e.sid < q.sid
  runningSids : ∀ r ∈ m.running, ∀ q ∈ m.pending, r.req.sid < q.sid
  sids : ∀ q ∈ m.pending, q.sid < sessionCount ss

/-- The hypotheses on the engine and the workload. -/
structure Hyp (eng : Engine) (g P D : Nat) (ss : List Session) : Prop where
  cap : 0 < eng.reqsCap
  fits : blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks
  pos : 0 < P
  gap : 0 < g
  life : P + eng.budget * (D - 1) ≤ eng.budget * g
  turns : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1

theorem lt_of_mul {B a t c : Nat} (hc : 0 < c) (h : B * a + c ≤ B * t) : a < t := by
  rcases Nat.lt_or_ge a t with h' | h'
  · exact h'
  · have := Nat.mul_le_mul_left B h'; omega

theorem sessionAt_lt : ∀ (ss : List Session) (i : Nat), i < sessionCount ss → ∃ s, sessionAt ss i = some s
  | [], _, h => by simp [sessionCount] at h
  | s :: _, 0, _ => ⟨s, rfl⟩
  | _ :: ss, i + 1, h => sessionAt_lt ss i (by simp only [sessionCount] at h; omega)

theorem mem_insertPending_aux (p x : Pending) : ∀ (l : List Pending), x ∈ insertPending p l → x = p ∨ x ∈ l
  | [], h => by simpa [insertPending] using h
  | q :: qs, h => by
    simp only [insertPending] at h
    split at h
    · simpa using h
    · rcases List.mem_cons.mp h with rfl | h
      · exact Or.inr List.mem_cons_self
      · rcases mem_insertPending_aux p x qs h with h | h
        · exact Or.inl h
        · exact Or.inr (List.mem_cons_of_mem _ h)

theorem firstTurns_sids : ∀ (k : Nat) (ss : List Session), ∀ q ∈ firstTurns k ss, q.sid < k + sessionCount ss
  | _, [], q, hq => by simp [firstTurns] at hq
  | k, s :: ss, q, hq => by
    have ih := firstTurns_sids (k + 1) ss
    simp only [sessionCount]
    simp only [firstTurns] at hq
    split at hq
    · have := ih q hq; omega
    · rcases mem_insertPending_aux _ _ _ hq with rfl | hq
      · dsimp only; omega
      · have := ih q hq; omega

/-- The resident after a prefill's iteration: done with no decode to follow, a decode of `D - 1`
tokens, or a prefill that goes on. -/
theorem running_after_prefill (eng : Engine) (ss : List Session) (now : Nat) (x : Res) (D : Nat) (R : List Res)
    (hrun : ∃ M, R = (apply eng ss now M [x] []).running) (hd : x.decoding = false) (hs : 0 < x.sched)
    (hL : x.req.out - 1 - (x.known - x.req.prompt) = D - 1) :
    (R = [] ∧ x.remaining ≤ x.sched ∧ D - 1 = 0) ∨
    (∃ q : Req, q.sid = x.req.sid ∧ R = [⟨q, x.alloc, x.pos + x.sched, x.known, true, D - 1, 0⟩] ∧
      x.remaining ≤ x.sched ∧ 0 < D - 1) ∨
    (R = [⟨x.req, x.alloc, x.pos + x.sched, x.known, false, x.remaining - x.sched, 0⟩] ∧
      x.sched < x.remaining) := by
  obtain ⟨M, hR⟩ := hrun
  by_cases hfin : x.remaining ≤ x.sched
  · obtain ⟨q, hq, ha⟩ := apply_prefill_done eng ss now M x hd hs hfin
    rw [ha, hL] at hR
    by_cases hD : D - 1 = 0
    · left; rw [if_pos hD] at hR; exact ⟨hR, hfin, hD⟩
    · right; left; rw [if_neg hD] at hR; exact ⟨q, hq, hR, hfin, by omega⟩
  · right; right
    rw [apply_prefill_more eng ss now M x hd hs hfin] at hR
    exact ⟨hR, by omega⟩

/-- The resident after a decode's iteration: done, or a decode with one token fewer. -/
theorem running_after_decode (eng : Engine) (ss : List Session) (now : Nat) (x : Res) (R : List Res)
    (hrun : ∃ M, R = (apply eng ss now M [x] []).running) (hd : x.decoding = true) (hs : x.sched = 1) :
    (R = [] ∧ x.remaining - 1 = 0) ∨
    (∃ q : Req, q.sid = x.req.sid ∧ R = [⟨q, x.alloc, x.pos + 1, x.known, true, x.remaining - 1, 0⟩] ∧
      0 < x.remaining - 1) := by
  obtain ⟨M, hR⟩ := hrun
  obtain ⟨q, hq, ha⟩ := apply_decode eng ss now M x hd hs
  rw [ha] at hR
  by_cases hD : x.remaining - 1 = 0
  · left; rw [if_pos hD] at hR; exact ⟨hR, hD⟩
  · right; rw [if_neg hD] at hR; exact ⟨q, hq, hR, by omega⟩

/-- The invariant holds of the empty machine. -/
theorem init_inv (eng : Engine) (g P D : Nat) (ss : List Session) (hg : 0 < g) (hw : GappedDecode g P D 0 ss) :
    Inv eng g P D ss (init ss) where
  waiting := rfl
  running := Or.inl rfl
  spaced := (firstTurns_spaced g P D hg 0 0 ss hw).1
  head := by
    show HeadAfter eng.budget (eng.budget * 0 + 0) (firstTurns 0 ss)
    cases firstTurns 0 ss with
    | nil => trivial
    | cons p _ => show eng.budget * 0 + 0 ≤ eng.budget * p.time; simp
  conserve := by simp [init, workLeft]
  records := by simp [init]
  cacheSids := by simp [init]
  runningSids := by simp [init]
  sids := fun q hq => by have := firstTurns_sids 0 ss q hq; omega

theorem step_inv (eng : Engine) (g P D : Nat) (ss : List Session) (hy : Hyp eng g P D ss) (m : Machine)
    (h : Inv eng g P D ss m) : Inv eng g P D ss (step eng ss m) := by
  have hP := hy.pos
  have hg := hy.gap
  have hlife := hy.life
  have hB : 0 < eng.budget := by
    rcases Nat.eq_zero_or_pos eng.budget with h0 | h0
    · rw [h0, Nat.zero_mul, Nat.zero_mul] at hlife; omega
    · exact h0
  have hDg : D - 1 < g := lt_of_mul (B := eng.budget) hP (by omega)
  have hPW : blocksFor eng.blockSize P ≤ blocksFor eng.blockSize (P + (D - 1)) := blocksFor_mono _ (by omega)
  have hfitsP : blocksFor eng.blockSize P ≤ eng.kvBlocks := Nat.le_trans hPW hy.fits
  have hnext : ∀ now q ps, nextTurn ss now q ps = ps := nextTurn_one ss (fun s hs => by
    obtain ⟨t, ht, _⟩ := hy.turns s hs; exact ⟨t, ht⟩)
  obtain ⟨hwait, hrun, hsp, hhead, hcons, hrec, hcsid, hrsid, hsids⟩ := h
  rcases hrun with hr | ⟨r, hr, hok⟩
  · -- nothing resident: wait for the next arrival, or admit the one due now
    rw [hr] at hcons hhead
    simp only [workLeft, lifeLeft, Nat.add_zero] at hcons hhead
    cases hp : m.pending with
    | nil =>
      have hdue : duePending m.now m.pending = ([], []) := by rw [hp]; rfl
      unfold step
      rw [hdue]
      dsimp only
      rw [hwait, hr]
      simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
      exact ⟨rfl, Or.inl rfl, trivial, trivial, by simpa [workLeft] using hcons, hrec, by simp, by simp, by simp⟩
    | cons p ps =>
      rw [hp] at hsp hhead hsids
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
          have : ¬ blocksFor eng.blockSize p.prompt > eng.kvBlocks := by rw [hprompt]; omega
          simp [submit, this, appendReq]
        have hcount : countFirst [p] = 1 := by simp [countFirst, hturn]
        have hout : (newReq eng ss p).out - 1 = D - 1 :=
          newReq_out eng ss D hy.turns p (sessionAt_lt ss p.sid (hsids p List.mem_cons_self)) hturn
        obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxout, hxsid, hxknown, hxprompt, hxc⟩ :=
          plan_arrival eng m (newReq eng ss p) P hr hy.cap hB (by simp [newReq, hprompt]) (by simp [newReq])
            (fun e he => by have := hcsid e he p hpin; simp only [newReq]; omega) hP hfitsP
        have hxsid' : x.req.sid = p.sid := by rw [hxsid]; rfl
        have hxprompt' : x.req.prompt = P := by rw [hxprompt]; simp [newReq, hprompt]
        have hL : x.req.out - 1 - (x.known - x.req.prompt) = D - 1 := by
          rw [hxout, hxknown, hxprompt', hout]; simp
        obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_run eng ss m [p] ps [newReq eng ss p] x hnext hdue hsub
          (by simp [noReq]) (by simp [hr, resCount, reqCount]) hxd hxw hxp (by rw [hxs]; omega)
        rw [hcount] at e4 e7
        have hrs := running_after_prefill eng ss m.now x D _ e6 hxdec (by rw [hxs]; omega) hL
        have hsp' : Spaced g P (step eng ss m).now (step eng ss m).pending := by
          rw [e1, e2]; exact spaced_mono (by omega) hrest
        have hrec' : ∀ y ∈ (step eng ss m).records, y.arrived * (P + (D - 1)) ≤ y.served + (P + (D - 1)) := by
          intro y hy
          rcases e7 y hy with hy | ⟨ha, hs⟩
          · exact hrec y hy
          · rw [ha, hs, Nat.add_mul, Nat.one_mul, hcons]; exact Nat.le_refl _
        have hcs' : ∀ e ∈ (step eng ss m).cache, ∀ q ∈ (step eng ss m).pending, e.sid < q.sid := by
          rw [e2]
          exact e8 (fun s => ∀ q ∈ ps, s < q.sid)
            (hxc (fun s => ∀ q ∈ ps, s < q.sid) (fun e he q hq => Nat.lt_trans (hcsid e he p hpin) (hsid q hq)))
            (by rw [hxsid']; exact hsid)
        have hsids' : ∀ q ∈ (step eng ss m).pending, q.sid < sessionCount ss := by
          rw [e2]; exact fun q hq => hsids q (List.mem_cons_of_mem _ hq)
        have hhead' : ∀ life, (∀ t, m.now + g ≤ t → eng.budget * (m.now + 1) + life ≤ eng.budget * t) →
            HeadAfter eng.budget (eng.budget * (step eng ss m).now + life) (step eng ss m).pending := by
          intro life hl
          rw [e1, e2]
          cases ps with
          | nil => trivial
          | cons q qs => exact hl q.time (by have := hrest.1; omega)
        have hrsq : ∀ (y : Res), y.req.sid = x.req.sid → ∀ q ∈ (step eng ss m).pending, y.req.sid < q.sid := by
          intro y hy q hq; rw [e2] at hq; rw [hy, hxsid']; exact hsid q hq
        rcases hrs with ⟨hR, hfin, hD⟩ | ⟨q, hq, hR, hfin, hD⟩ | ⟨hR, hfin⟩
        · refine ⟨e3, Or.inl hR, hsp', ?_, ?_, hrec', hcs', by rw [hR]; simp, hsids'⟩
          · rw [hR]; apply hhead'; intro t ht
            have := Nat.mul_le_mul_left eng.budget (show m.now + 1 ≤ t by omega)
            simp only [lifeLeft]; omega
          · rw [e4, e5, hR, Nat.add_mul, Nat.one_mul, hcons]; simp only [workLeft]; omega
        · refine ⟨e3, Or.inr ⟨_, hR, Or.inr ⟨rfl, hD, Nat.le_refl _, ?_, ?_⟩⟩, hsp', ?_, ?_, hrec', hcs', ?_,
            hsids'⟩
          · show x.pos + x.sched + (D - 1) = P + (D - 1); omega
          · show x.alloc ≤ _; exact Nat.le_trans hxalloc hPW
          · rw [hR, lifeLeft_dec _ _ _ rfl]; apply hhead'; intro t ht
            have := Nat.mul_le_mul_left eng.budget (show m.now + 1 + (D - 1) ≤ t by omega)
            rw [Nat.mul_add] at this; dsimp only; omega
          · rw [e4, e5, hR, workLeft_dec _ _ rfl, Nat.add_mul, Nat.one_mul, hcons]; dsimp only; omega
          · rw [hR]; intro y hy; simp only [List.mem_singleton] at hy; subst hy; exact hrsq _ hq
        · refine ⟨e3, Or.inr ⟨_, hR, Or.inl ⟨rfl, ?_, ?_, hxalloc, hxknown, hxprompt', ?_⟩⟩, hsp', ?_, ?_, hrec',
            hcs', ?_, hsids'⟩
          · show 0 < x.remaining - x.sched; omega
          · show x.pos + x.sched + (x.remaining - x.sched) = P; omega
          · show x.req.out - 1 = D - 1; rw [hxout]; exact hout
          · rw [hR, lifeLeft_pre _ _ _ rfl]; apply hhead'; intro t ht
            have := Nat.mul_le_mul_left eng.budget ht
            rw [Nat.mul_add] at this; dsimp only; rw [Nat.mul_add, Nat.mul_one]; omega
          · rw [e4, e5, hR, workLeft_pre _ _ rfl, Nat.add_mul, Nat.one_mul, hcons]; dsimp only; omega
          · rw [hR]; intro y hy; simp only [List.mem_singleton] at hy; subst hy; exact hrsq _ rfl
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
        refine ⟨rfl, Or.inl rfl, ⟨Nat.le_refl _, hprompt, hturn, hsid, hrest⟩, ?_, by simpa [workLeft] using hcons,
          hrec, by rw [← hp]; exact hcsid, by simp, hsids⟩
        show eng.budget * p.time + lifeLeft eng.budget D [] ≤ eng.budget * p.time
        simp [lifeLeft]
  · have hrs : ∀ q ∈ m.pending, r.req.sid < q.sid := hrsid r (by rw [hr]; exact List.mem_cons_self)
    have hsub : submit eng ss [] m.waiting = [] := by rw [hwait]; rfl
    rcases hok with ⟨hd, hrem, hpos, halloc, hknown, hprompt, hout⟩ | ⟨hd, hrem, hle, hpos, halloc⟩
    · -- a prefill resident: it is served; no arrival is due before it and its decodes are done
      rw [hr, lifeLeft_pre _ _ _ hd] at hhead
      rw [hr, workLeft_pre _ _ hd] at hcons
      have hfirst : ∀ p ps, m.pending = p :: ps →
          eng.budget * m.now + (r.remaining + eng.budget * (D - 1)) ≤ eng.budget * p.time ∧
          m.now + 1 + (D - 1) ≤ p.time := by
        intro p ps hp
        rw [hp] at hhead
        have h1 : eng.budget * m.now + (r.remaining + eng.budget * (D - 1)) ≤ eng.budget * p.time := hhead
        have h2 : m.now + (D - 1) < p.time := lt_of_mul (B := eng.budget) (c := r.remaining) hrem (by rw [Nat.mul_add]; omega)
        exact ⟨h1, by omega⟩
      have hlater : ∀ q ∈ m.pending, m.now + 1 + (D - 1) ≤ q.time := by
        intro q hq
        cases hp : m.pending with
        | nil => rw [hp] at hq; simp at hq
        | cons p ps =>
          have h2 := (hfirst p ps hp).2
          rw [hp] at hsp hq
          rcases List.mem_cons.mp hq with rfl | hq
          · exact h2
          · have := spaced_le hsp.2.2.2.2 q hq; omega
      have hdue : duePending m.now m.pending = ([], m.pending) :=
        duePending_none m.now _ (fun q hq => by have := hlater q hq; omega)
      obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxreq, hxknown, hxc⟩ :=
        plan_prefill eng m r P hr hB hd hrem hpos halloc hfitsP
      have hL : x.req.out - 1 - (x.known - x.req.prompt) = D - 1 := by
        rw [hxreq, hxknown, hout, hknown, hprompt]; simp
      obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_run eng ss m [] m.pending [] x hnext hdue hsub
        (by simp [hr, noRes]) (by simp [hr, resCount, reqCount]) hxd hxw hxp (by rw [hxs]; omega)
      simp only [countFirst, Nat.add_zero] at e4 e7
      have hrs' := running_after_prefill eng ss m.now x D _ e6 hxdec (by rw [hxs]; omega) hL
      have hsp' : Spaced g P (step eng ss m).now (step eng ss m).pending := by
        rw [e1, e2]
        cases hp : m.pending with
        | nil => trivial
        | cons p ps =>
          have := (hfirst p ps hp).2
          rw [hp] at hsp
          exact ⟨by omega, hsp.2⟩
      have hrec' : ∀ y ∈ (step eng ss m).records, y.arrived * (P + (D - 1)) ≤ y.served + (P + (D - 1)) := by
        intro y hy
        rcases e7 y hy with hy | ⟨ha, hs⟩
        · exact hrec y hy
        · rw [ha, hs, hcons]; omega
      have hcs' : ∀ e ∈ (step eng ss m).cache, ∀ q ∈ (step eng ss m).pending, e.sid < q.sid := by
        rw [e2]
        exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (hxc (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid)
          (by rw [hxreq]; exact hrs)
      have hsids' : ∀ q ∈ (step eng ss m).pending, q.sid < sessionCount ss := by rw [e2]; exact hsids
      have hhead' : ∀ life, (∀ t, m.now + 1 + (D - 1) ≤ t →
            eng.budget * m.now + (r.remaining + eng.budget * (D - 1)) ≤ eng.budget * t →
            eng.budget * (m.now + 1) + life ≤ eng.budget * t) →
          HeadAfter eng.budget (eng.budget * (step eng ss m).now + life) (step eng ss m).pending := by
        intro life hl
        rw [e1, e2]
        cases hp : m.pending with
        | nil => trivial
        | cons p ps => exact hl p.time (hfirst p ps hp).2 (hfirst p ps hp).1
      have hrsq : ∀ (y : Res), y.req.sid = r.req.sid → ∀ q ∈ (step eng ss m).pending, y.req.sid < q.sid := by
        intro y hy q hq; rw [e2] at hq; rw [hy]; exact hrs q hq
      rcases hrs' with ⟨hR, hfin, hD⟩ | ⟨q, hq, hR, hfin, hD⟩ | ⟨hR, hfin⟩
      · refine ⟨e3, Or.inl hR, hsp', ?_, ?_, hrec', hcs', by rw [hR]; simp, hsids'⟩
        · rw [hR]; apply hhead'; intro t ht _
          have := Nat.mul_le_mul_left eng.budget (show m.now + 1 ≤ t by omega)
          simp only [lifeLeft]; omega
        · rw [e4, e5, hR, hcons]; simp only [workLeft]; omega
      · refine ⟨e3, Or.inr ⟨_, hR, Or.inr ⟨rfl, hD, Nat.le_refl _, ?_, ?_⟩⟩, hsp', ?_, ?_, hrec', hcs', ?_,
          hsids'⟩
        · show x.pos + x.sched + (D - 1) = P + (D - 1); omega
        · show x.alloc ≤ _; exact Nat.le_trans hxalloc hPW
        · rw [hR, lifeLeft_dec _ _ _ rfl]; apply hhead'; intro t ht _
          have := Nat.mul_le_mul_left eng.budget ht
          rw [Nat.mul_add] at this; dsimp only; omega
        · rw [e4, e5, hR, workLeft_dec _ _ rfl, hcons]; dsimp only; omega
        · rw [hR]; intro y hy; simp only [List.mem_singleton] at hy; subst hy
          exact hrsq _ (by rw [hq, hxreq])
      · refine ⟨e3, Or.inr ⟨_, hR, Or.inl ⟨rfl, ?_, ?_, hxalloc, ?_, ?_, ?_⟩⟩, hsp', ?_, ?_, hrec', hcs', ?_,
          hsids'⟩
        · show 0 < x.remaining - x.sched; omega
        · show x.pos + x.sched + (x.remaining - x.sched) = P; omega
        · show x.known = P; rw [hxknown, hknown]
        · show x.req.prompt = P; rw [hxreq, hprompt]
        · show x.req.out - 1 = D - 1; rw [hxreq, hout]
        · rw [hR, lifeLeft_pre _ _ _ rfl]; apply hhead'; intro t _ h1
          dsimp only; rw [Nat.mul_add, Nat.mul_one]; omega
        · rw [e4, e5, hR, workLeft_pre _ _ rfl, hcons]; dsimp only; omega
        · rw [hR]; intro y hy; simp only [List.mem_singleton] at hy; subst hy
          exact hrsq _ (by show x.req.sid = r.req.sid; rw [hxreq])
    · -- a decode resident: it takes its token; no arrival is due before its last one
      rw [hr, lifeLeft_dec _ _ _ hd] at hhead
      rw [hr, workLeft_dec _ _ hd] at hcons
      have hfirst : ∀ p ps, m.pending = p :: ps → m.now + r.remaining ≤ p.time := by
        intro p ps hp
        rw [hp] at hhead
        have h1 : eng.budget * m.now + eng.budget * r.remaining ≤ eng.budget * p.time := hhead
        rw [← Nat.mul_add] at h1
        exact Nat.le_of_mul_le_mul_left h1 hB
      have hlater : ∀ q ∈ m.pending, m.now + r.remaining ≤ q.time := by
        intro q hq
        cases hp : m.pending with
        | nil => rw [hp] at hq; simp at hq
        | cons p ps =>
          have h2 := hfirst p ps hp
          rw [hp] at hsp hq
          rcases List.mem_cons.mp hq with rfl | hq
          · exact h2
          · have := spaced_le hsp.2.2.2.2 q hq; omega
      have hdue : duePending m.now m.pending = ([], m.pending) :=
        duePending_none m.now _ (fun q hq => by have := hlater q hq; omega)
      obtain ⟨x, hxd, hxw, hxp, hxdec, hxs, hxpos, hxrem, hxalloc, hxreq, hxknown, hxc⟩ :=
        plan_decode eng m r (P + (D - 1)) hr hB hd hrem (by omega) halloc hy.fits
      obtain ⟨e1, e2, e3, e4, e5, e6, e7, e8⟩ := step_run eng ss m [] m.pending [] x hnext hdue hsub
        (by simp [hr, noRes]) (by simp [hr, resCount, reqCount]) hxd hxw hxp (by rw [hxs]; omega)
      simp only [countFirst, Nat.add_zero] at e4 e7
      have hrs' := running_after_decode eng ss m.now x _ e6 hxdec hxs
      have hsp' : Spaced g P (step eng ss m).now (step eng ss m).pending := by
        rw [e1, e2]
        cases hp : m.pending with
        | nil => trivial
        | cons p ps =>
          have := hfirst p ps hp
          rw [hp] at hsp
          exact ⟨by omega, hsp.2⟩
      have hrec' : ∀ y ∈ (step eng ss m).records, y.arrived * (P + (D - 1)) ≤ y.served + (P + (D - 1)) := by
        intro y hy
        rcases e7 y hy with hy | ⟨ha, hs⟩
        · exact hrec y hy
        · rw [ha, hs, hcons]; omega
      have hcs' : ∀ e ∈ (step eng ss m).cache, ∀ q ∈ (step eng ss m).pending, e.sid < q.sid := by
        rw [e2]
        exact e8 (fun s => ∀ q ∈ m.pending, s < q.sid) (hxc (fun s => ∀ q ∈ m.pending, s < q.sid) hcsid)
          (by rw [hxreq]; exact hrs)
      have hsids' : ∀ q ∈ (step eng ss m).pending, q.sid < sessionCount ss := by rw [e2]; exact hsids
      have hhead' : ∀ life, (∀ t, m.now + r.remaining ≤ t → eng.budget * (m.now + 1) + life ≤ eng.budget * t) →
          HeadAfter eng.budget (eng.budget * (step eng ss m).now + life) (step eng ss m).pending := by
        intro life hl
        rw [e1, e2]
        cases hp : m.pending with
        | nil => trivial
        | cons p ps => exact hl p.time (hfirst p ps hp)
      rcases hrs' with ⟨hR, hD⟩ | ⟨q, hq, hR, hD⟩
      · refine ⟨e3, Or.inl hR, hsp', ?_, ?_, hrec', hcs', by rw [hR]; simp, hsids'⟩
        · rw [hR]; apply hhead'; intro t ht
          have := Nat.mul_le_mul_left eng.budget (show m.now + 1 ≤ t by omega)
          simp only [lifeLeft]; omega
        · rw [e4, e5, hR, hcons]; simp only [workLeft]; omega
      · refine ⟨e3, Or.inr ⟨_, hR, Or.inr ⟨rfl, hD, ?_, ?_, ?_⟩⟩, hsp', ?_, ?_, hrec', hcs', ?_, hsids'⟩
        · show x.remaining - 1 ≤ D - 1; omega
        · show x.pos + 1 + (x.remaining - 1) = P + (D - 1); omega
        · exact hxalloc
        · rw [hR, lifeLeft_dec _ _ _ rfl]; apply hhead'; intro t ht
          dsimp only; rw [← Nat.mul_add]; exact Nat.mul_le_mul_left _ (by omega)
        · rw [e4, e5, hR, workLeft_dec _ _ rfl, hcons]; dsimp only; omega
        · rw [hR]; intro y hy q' hq'; simp only [List.mem_singleton] at hy; subst hy
          rw [e2] at hq'; dsimp only; rw [hq, hxreq]; exact hrs q' hq'

theorem run_inv (eng : Engine) (g P D : Nat) (ss : List Session) (hy : Hyp eng g P D ss) :
    ∀ (fuel : Nat) (m : Machine), Inv eng g P D ss m → Inv eng g P D ss (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng g P D ss hy fuel _ (step_inv eng g P D ss hy m h)

end BacklogDecode

/-- **The pathwise bounded backlog with decodes, for gaps of at least `g`** (Dai et al. 2025,
Theorem 2(b)). Sessions arrive at least `g` steps apart (`GappedDecode g P D 0 ss`: any arrival
times, each at least `g` after the one before), each one turn of a `P`-token prompt (`P > 0`) and `D`
output tokens (at most one when `D ≤ 1`), so a request's work is `W = P + (D - 1)`: its prefill and
`D - 1` decodes of one token each. If a request's life fits in a gap, `P + budget · (D - 1) ≤
budget · g` (`⌈P / budget⌉ + D - 1 ≤ g`), then at every iteration of every run the sessions arrived
(those due at its start included) times `W` exceed the tokens served before it by at most `W`. The
engine needs a request slot and room in its KV pool for one request's `W` tokens; any chunk cap,
either schedule, a prefix cache or none. That the request cap and the KV pool never bind and that
nothing is preempted follows: at most one request is ever in flight. -/
theorem backlog_decode_gapped (eng : Engine) (g P D : Nat) (ss : List Session)
    (hcap : 0 < eng.reqsCap) (hfits : blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hP : 0 < P)
    (hlife : P + eng.budget * (D - 1) ≤ eng.budget * g) (hw : GappedDecode g P D 0 ss) (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * (P + (D - 1)) ≤ r.served + (P + (D - 1)) := by
  have hg : 0 < g := by
    rcases Nat.eq_zero_or_pos g with h0 | h0
    · rw [h0, Nat.mul_zero] at hlife; omega
    · exact h0
  have hy : BacklogDecode.Hyp eng g P D ss :=
    ⟨hcap, hfits, hP, hg, hlife, BacklogDecode.gapped_turns g P D 0 ss hw⟩
  exact (BacklogDecode.run_inv eng g P D ss hy fuel (init ss) (BacklogDecode.init_inv eng g P D ss hg hw)).records

/-- What `backlog_decode_gapped` proves on the way: at every machine of every run nothing waits in the
queue and at most one request is resident, holding at most `W`'s blocks — so the request cap
(`0 < reqsCap`) and the KV pool (`blocksFor blockSize W ≤ kvBlocks`) never bind. -/
theorem backlog_decode_one_in_flight (eng : Engine) (g P D : Nat) (ss : List Session)
    (hcap : 0 < eng.reqsCap) (hfits : blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hP : 0 < P)
    (hlife : P + eng.budget * (D - 1) ≤ eng.budget * g) (hw : GappedDecode g P D 0 ss) (fuel : Nat) :
    (run eng ss fuel (init ss)).waiting = [] ∧ resCount (run eng ss fuel (init ss)).running ≤ 1 ∧
      usedBlocks (run eng ss fuel (init ss)).running ≤ blocksFor eng.blockSize (P + (D - 1)) := by
  have hg : 0 < g := by
    rcases Nat.eq_zero_or_pos g with h0 | h0
    · rw [h0, Nat.mul_zero] at hlife; omega
    · exact h0
  have hy : BacklogDecode.Hyp eng g P D ss :=
    ⟨hcap, hfits, hP, hg, hlife, BacklogDecode.gapped_turns g P D 0 ss hw⟩
  have h := BacklogDecode.run_inv eng g P D ss hy fuel (init ss) (BacklogDecode.init_inv eng g P D ss hg hw)
  refine ⟨h.waiting, ?_⟩
  rcases h.running with hr | ⟨r, hr, hok⟩
  · rw [hr]; simp [resCount, usedBlocks]
  · rw [hr]
    simp only [resCount, usedBlocks, Nat.zero_add, Nat.add_zero]
    refine ⟨Nat.le_refl _, ?_⟩
    rcases hok with ⟨_, _, _, ha, _⟩ | ⟨_, _, _, _, ha⟩
    · exact Nat.le_trans ha (Backlog.blocksFor_mono _ (by omega))
    · exact ha

/-- **The pathwise bounded backlog with decodes** under the constant renewal (the `k`-th session at
`(k + 1) · g`): `backlog_decode_gapped`'s instance, and the statement `dai_backlog_decode.sq` claims. -/
theorem backlog_decode_bounded (eng : Engine) (g P D : Nat) (ss : List Session)
    (hcap : 0 < eng.reqsCap) (hfits : blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hP : 0 < P)
    (hlife : P + eng.budget * (D - 1) ≤ eng.budget * g) (hw : RenewalDecode g P D 0 ss) (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * (P + (D - 1)) ≤ r.served + (P + (D - 1)) :=
  backlog_decode_gapped eng g P D ss hcap hfits hP hlife
    (gapped_mono (Nat.zero_le _) (gapped_of_renewal g P D 0 ss hw)) fuel

/-- `Serq.backlog_bounded` is the instance `D = 1` (its hypotheses, its statement). -/
theorem backlog_bounded_of_decode (eng : Engine) (g P : Nat) (ss : List Session)
    (hcap : 0 < eng.reqsCap) (hfits : blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hwork : P ≤ eng.budget * g) (hw : RenewalSessions g P 0 ss) (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * P ≤ r.served + P := by
  rcases Nat.eq_zero_or_pos P with hP | hP
  · intro r _
    subst hP
    simp
  · have := backlog_decode_bounded eng g P 1 ss hcap (by simpa using hfits) hP (by simpa using hwork)
      (renewalDecode_one g P 0 ss hw) fuel
    simpa using this

/-- The life must fit in the gap, not only the work: a 16-token prompt and 3 output tokens
(`W = 18 ≤ 16 · 2`) every 2 steps, budget 16, is a life of 3 > 2 steps. Session 0 arrives at 2,
its prefill at 2 and decodes at 3 and 4; session 1 arrives at 4 and the iteration's record has
`arrived · 18 = 36 > served + 18 = 17 + 18`. -/
example : (run ⟨16, 4, 64, 16, 0, false, false⟩ [⟨2, [⟨16, 3, 0, false⟩]⟩, ⟨4, [⟨16, 3, 0, false⟩]⟩] 5
    (init [⟨2, [⟨16, 3, 0, false⟩]⟩, ⟨4, [⟨16, 3, 0, false⟩]⟩])).records.any
      (fun r => r.start == 4 && r.arrived == 2 && r.served == 17) = true := by
  decide +kernel

end Serq
