module

public import Serq.BacklogMany

/-! # Prompts served in chunks beside decodes, the lists' part (groundwork of `Serq.BacklogChunk`)

An iteration of a mixed-schedule engine with a chunk cap `c > 0` whose residents are prefills and
decodes: each takes its demand (a decode one token, a prefill `min c remaining`) within the budget and
the KV pool (`serve_list`), then a fresh request is admitted after them and takes a chunk of its prompt
(`admit_chunk`); `plan_mix`, `plan_mix_arrive`. The residents' ghost arrival times (`Chain`, at least
`g` apart, oldest first), each resident's work left bounded by its age (`Ok`: a prefill has had at
least `c` tokens an iteration since its arrival, a decode ends by `arrival + n + D - 1`), what an
iteration makes of them (`Sv`, `chain_step`), and the bounds at an arrival (`chain_sum`, `chain_count`).
-/
@[expose] public section

namespace Serq

namespace BacklogChunk

open Backlog BacklogDecode BacklogMany

/-! ## Serving a list of prefills and decodes -/

/-- A resident's demand with the chunk cap `c`: one token for a decode, `min c remaining` for a prefill. -/
def dem (c : Nat) (r : Res) : Nat := if r.decoding = true then 1 else min c r.remaining

/-- A resident once served its demand: the blocks it grows to, and its tokens scheduled. -/
def serveOne (c bs : Nat) (r : Res) : Res :=
  { r with alloc := r.alloc + (blocksFor bs (r.pos + dem c r) - r.alloc), sched := dem c r }

def serveL (c bs : Nat) : List Res → List Res
  | [] => []
  | r :: rs => serveOne c bs r :: serveL c bs rs

theorem serveL_clearSched (c bs : Nat) : ∀ (l : List Res), serveL c bs (clearSched l) = serveL c bs l
  | [] => rfl
  | r :: rs => congrArg (List.cons (serveOne c bs r)) (serveL_clearSched c bs rs)

theorem resCount_serveL (c bs : Nat) : ∀ (l : List Res), resCount (serveL c bs l) = resCount l
  | [] => rfl
  | r :: rs => by simp only [serveL, resCount, resCount_serveL c bs rs]

theorem batchTokens_serveL (c bs : Nat) (hc : 0 < c) : ∀ (l : List Res),
    batchTokens (serveL c bs l) ≤ resCount l * c
  | [] => by simp [serveL, batchTokens]
  | r :: rs => by
    have := batchTokens_serveL c bs hc rs
    have h1 : dem c r ≤ c := by unfold dem; split <;> omega
    simp only [serveL, batchTokens, resCount, Nat.succ_mul]
    show dem c r + _ ≤ _
    omega

theorem mem_serveL (c bs : Nat) : ∀ (l : List Res) (x : Res), x ∈ serveL c bs l → ∃ r ∈ l, x = serveOne c bs r
  | [], _, h => by simp [serveL] at h
  | r :: rs, x, h => by
    simp only [serveL, List.mem_cons] at h
    rcases h with rfl | h
    · exact ⟨r, List.mem_cons_self, rfl⟩
    · obtain ⟨y, hy, e⟩ := mem_serveL c bs rs x h
      exact ⟨y, List.mem_cons_of_mem _ hy, e⟩

theorem workLeft_app (D : Nat) (a b : List Res) : workLeft D (a ++ b) = workLeft D a + workLeft D b := by
  induction a with
  | nil => simp [workLeft]
  | cons x xs ih => simp only [List.cons_append, workLeft, ih]; omega

theorem workLeft_serveL (c bs D : Nat) : ∀ (l : List Res), workLeft D (serveL c bs l) = workLeft D l
  | [] => rfl
  | r :: rs => by
    simp only [serveL, workLeft, workLeft_serveL c bs D rs]
    rfl

/-- One resident served its demand: the plan goes on with the rest. -/
theorem serve_step (eng : Engine) (only : Option Bool) (f : Nat) (p : Plan) (r : Res) (rest : List Res) (N : Nat)
    (htodo : p.todo = r :: rest) (hb : 0 < p.budget) (hsp : p.selfPreempted = false)
    (hrem : 0 < r.remaining) (hex : excluded only r.decoding = false)
    (hN : (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = N)
    (hfit : usedBlocks p.done + usedBlocks p.todo + (blocksFor eng.blockSize (r.pos + N) - r.alloc) ≤ eng.kvBlocks) :
    ∃ q, serveRunning eng only (f + 1) p = serveRunning eng only f q ∧ q.todo = rest ∧
      q.budget = p.budget - N ∧
      q.done = p.done ++ [{ r with alloc := r.alloc + (blocksFor eng.blockSize (r.pos + N) - r.alloc), sched := N }] ∧
      q.waiting = p.waiting ∧ q.preempted = p.preempted ∧ q.selfPreempted = false ∧ q.chunk = p.chunk ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ q.cache, Q e.sid := by
  have hg : growOrPreempt eng (resCount p.todo) (blocksFor eng.blockSize (r.pos + N) - r.alloc) p = p := by
    have : resCount p.todo = resCount rest + 1 := by rw [htodo]; rfl
    rw [this]
    simp only [growOrPreempt]
    rw [if_pos hfit]
  have hb0 : ¬ (p.budget = 0 ∨ p.selfPreempted = true) := by simp [hsp]; omega
  have hrem0 : ¬ (r.remaining = 0 ∨ excluded only r.decoding = true) := by simp [hex]; omega
  rw [serveRunning, if_neg hb0]
  simp only [htodo]
  rw [if_neg hrem0]
  simp only [hN]
  rw [← htodo, hg]
  simp only [hsp, Bool.false_eq_true, if_false]
  refine ⟨_, rfl, by simp [htodo, dropHead], rfl, by simp [appendRes_eq'], rfl, rfl, rfl, rfl,
    fun Q hQ => evict_sid Q _ _ hQ⟩

/-- Every resident of the list takes its demand; all fit, so nothing is preempted. -/
theorem serve_list (eng : Engine) (only : Option Bool) (c bW : Nat) (hc : 0 < c)
    (hex : ∀ d, excluded only d = false) :
    ∀ (L : List Res) (p : Plan) (fuel : Nat), p.todo = L → resCount L < fuel → p.chunk = c →
    (∀ r ∈ L, 0 < r.remaining ∧ blocksFor eng.blockSize (r.pos + dem c r) ≤ bW ∧ r.alloc ≤ bW) →
    batchTokens (serveL c eng.blockSize L) ≤ p.budget → p.selfPreempted = false →
    usedBlocks p.done + resCount L * bW ≤ eng.kvBlocks →
    (serveRunning eng only fuel p).done = p.done ++ serveL c eng.blockSize L ∧
    (serveRunning eng only fuel p).todo = [] ∧
    (serveRunning eng only fuel p).waiting = p.waiting ∧
    (serveRunning eng only fuel p).preempted = p.preempted ∧
    (serveRunning eng only fuel p).budget = p.budget - batchTokens (serveL c eng.blockSize L) ∧
    (serveRunning eng only fuel p).chunk = p.chunk ∧
    ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (serveRunning eng only fuel p).cache, Q e.sid
  | [], p, fuel, htodo, _, _, _, _, _, _ => by
    rw [serveRunning_nil eng only fuel p htodo]
    exact ⟨by simp [serveL], htodo, rfl, rfl, by simp [serveL, batchTokens], rfl, fun Q hQ => hQ⟩
  | r :: rest, p, fuel, htodo, hf, hch, hL, hb, hsp, hkv => by
    obtain ⟨f, rfl⟩ : ∃ f, fuel = f + 1 := ⟨fuel - 1, by simp only [resCount] at hf; omega⟩
    obtain ⟨hrem, hgrow, halloc⟩ := hL r List.mem_cons_self
    have hrest : ∀ x ∈ rest, 0 < x.remaining ∧ blocksFor eng.blockSize (x.pos + dem c x) ≤ bW ∧ x.alloc ≤ bW :=
      fun x hx => hL x (List.mem_cons_of_mem _ hx)
    have hurest := usedBlocks_le bW rest (fun x hx => (hrest x hx).2.2)
    have hcount : resCount (r :: rest) = resCount rest + 1 := rfl
    have hbt : batchTokens (serveL c eng.blockSize (r :: rest)) = dem c r + batchTokens (serveL c eng.blockSize rest) :=
      rfl
    rw [hcount, Nat.succ_mul] at hkv
    rw [hbt] at hb
    rw [hcount] at hf
    have hN : (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = dem c r := by
      by_cases hd : r.decoding = true
      · have hdm : dem c r = 1 := by unfold dem; rw [if_pos hd]
        rw [hdm, if_pos hd]
      · have hdm : dem c r = min c r.remaining := by unfold dem; rw [if_neg hd]
        unfold capChunk
        rw [hch, hdm, if_neg hd, if_neg (by omega)]
        omega
    have hdem : 0 < dem c r := by unfold dem; split <;> omega
    obtain ⟨q, hq, h1, h2, h3, h4, h5, h6, h8, h7⟩ := serve_step eng only f p r rest (dem c r) htodo (by omega) hsp
      hrem (hex _) hN (by rw [htodo]; simp only [usedBlocks]; omega)
    rw [hq]
    have hgr : r.alloc + (blocksFor eng.blockSize (r.pos + dem c r) - r.alloc) ≤ bW := by omega
    obtain ⟨i1, i2, i3, i4, i5, i7, i6⟩ := serve_list eng only c bW hc hex rest q f h1 (by omega) (by rw [h8]; exact hch)
      hrest (by omega) h6 (by rw [h3, usedBlocks_app]; simp only [usedBlocks]; omega)
    refine ⟨by rw [i1, h3]; simp [serveL, serveOne], i2, by rw [i3, h4], by rw [i4, h5], ?_,
      by rw [i7, h8], fun Q hQ => i6 Q (h7 Q hQ)⟩
    rw [i5, h2]
    simp only [serveL, batchTokens]
    show p.budget - dem c r - batchTokens (serveL c eng.blockSize rest) =
      p.budget - (dem c r + batchTokens (serveL c eng.blockSize rest))
    omega

/-- A fresh request of `P > 0` tokens at the head of the queue, after the residents: admitted, it
takes `capChunk chunk (min P budget)` tokens of its prompt. -/
theorem admit_chunk (eng : Engine) (only : Option Bool) (fuel : Nat) (p : Plan) (rq : Req) (P : Nat)
    (hw : p.waiting = [rq]) (hb : 0 < p.budget) (hcap : resCount p.done < eng.reqsCap)
    (hex : excluded only false = false) (hkept : rq.kept = P)
    (hcomp : rq.computed = 0) (hown : ownCachedBlocks rq.sid p.cache = 0) (hP : 0 < P)
    (hK : usedBlocks p.done + blocksFor eng.blockSize P ≤ eng.kvBlocks) :
    ∃ r, (admitHeads eng only (fuel + 1 + 1) p).done = appendRes p.done [r] ∧
      (admitHeads eng only (fuel + 1 + 1) p).waiting = [] ∧
      (admitHeads eng only (fuel + 1 + 1) p).preempted = p.preempted ∧ r.decoding = false ∧
      r.sched = capChunk p.chunk (min P p.budget) ∧ r.pos = 0 ∧ r.remaining = P ∧
      r.alloc ≤ blocksFor eng.blockSize P ∧
      r.req.out = rq.out ∧ r.req.sid = rq.sid ∧ r.known = P ∧ r.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ p.cache, Q e.sid) → ∀ e ∈ (admitHeads eng only (fuel + 1 + 1) p).cache, Q e.sid := by
  have hknown : max rq.kept (rq.computed + 1) = P := by rw [hkept, hcomp]; omega
  have hle : capChunk p.chunk (min P p.budget) ≤ P := by unfold capChunk; split <;> omega
  have hunits : blocksFor eng.blockSize (capChunk p.chunk (min P p.budget)) ≤ blocksFor eng.blockSize P :=
    blocksFor_mono _ hle
  have hgo : ¬ (p.budget = 0 ∨ resCount p.done ≥ eng.reqsCap) := by omega
  rw [admitHeads, if_neg hgo]
  simp only [hw, hknown, hown, Nat.zero_mul, Nat.zero_min, Nat.sub_zero, Nat.zero_add, hex,
    Bool.false_eq_true, if_false]
  rw [if_neg (by omega)]
  rw [admitHeads_nil eng only _ _ rfl]
  refine ⟨_, rfl, rfl, rfl, rfl, rfl, rfl, rfl, hunits, ?_, ?_, rfl, ?_,
    fun Q hQ => evict_sid Q _ _ (consume_sid Q _ _ _ hQ)⟩
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl
  · dsimp only
    split <;> rfl

/-- The KV and the demand of a resident: its work left, its growth within `bW` blocks. -/
def Fits (c bs bW : Nat) (r : Res) : Prop :=
  0 < r.remaining ∧ blocksFor bs (r.pos + dem c r) ≤ bW ∧ r.alloc ≤ bW

theorem usedBlocks_serveL (c bs bW : Nat) (L : List Res) (h : ∀ r ∈ L, Fits c bs bW r) :
    usedBlocks (serveL c bs L) ≤ resCount L * bW := by
  rw [← resCount_serveL c bs L]
  apply usedBlocks_le
  intro x hx
  obtain ⟨r, hr, rfl⟩ := mem_serveL _ _ _ x hx
  obtain ⟨_, h1, h2⟩ := h r hr
  show r.alloc + (blocksFor bs (r.pos + dem c r) - r.alloc) ≤ bW
  omega

theorem clearSched_fits (c bs bW : Nat) (L : List Res) (h : ∀ r ∈ L, Fits c bs bW r) :
    ∀ r ∈ clearSched L, 0 < r.remaining ∧ blocksFor bs (r.pos + dem c r) ≤ bW ∧ r.alloc ≤ bW := by
  intro x hx
  obtain ⟨r, hr, rfl⟩ := mem_clearSched L x hx
  exact h r hr

/-- The plan of a machine with residents and no arrival, the chunk cap `c` applying: each takes its
demand. -/
theorem plan_mix (eng : Engine) (c bW : Nat) (m : Machine) (hph : eng.phased = false) (hc : 0 < c)
    (hL : ∀ r ∈ m.running, Fits c eng.blockSize bW r) (hb : batchTokens (serveL c eng.blockSize m.running) ≤ eng.budget)
    (hkv : resCount m.running * bW ≤ eng.kvBlocks) :
    (plan eng c m []).done = serveL c eng.blockSize m.running ∧ (plan eng c m []).waiting = [] ∧
      (plan eng c m []).preempted = 0 ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m []).cache, Q e.sid := by
  have hex : ∀ d, excluded (phaseOf eng m.running) d = false := fun d => excluded_none eng hph _ d
  obtain ⟨i1, i2, i3, i4, _, _, i6⟩ := serve_list eng (phaseOf eng m.running) c bW hc hex (clearSched m.running)
    ⟨eng.budget, c, [], clearSched m.running, [], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega) rfl (clearSched_fits _ _ _ _ hL) (by rw [serveL_clearSched]; exact hb) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; exact hkv)
  unfold plan
  dsimp only
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, c, [], clearSched m.running, [], m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i6 ⊢
  rw [if_pos i4]
  rw [admitHeads_nil eng _ _ { p1 with done := appendRes p1.done p1.todo, todo := [] } (by simp [i3])]
  refine ⟨by simp [i1, i2, appendRes_eq', serveL_clearSched], by simp [i3], by simp [i4], fun Q hQ => i6 Q hQ⟩

/-- The plan of a machine with residents and one arrival, the chunk cap `c` applying: each resident
takes its demand, and the arrival is admitted after them with `min c P` tokens. -/
theorem plan_mix_arrive (eng : Engine) (c bW P : Nat) (m : Machine) (rq : Req) (hph : eng.phased = false)
    (hc : 0 < c) (hL : ∀ r ∈ m.running, Fits c eng.blockSize bW r)
    (hb : batchTokens (serveL c eng.blockSize m.running) + c ≤ eng.budget)
    (hcap : resCount m.running < eng.reqsCap)
    (hkv : resCount m.running * bW + blocksFor eng.blockSize P ≤ eng.kvBlocks)
    (hkept : rq.kept = P) (hcomp : rq.computed = 0) (hown : ∀ e ∈ m.cache, e.sid ≠ rq.sid) (hP : 0 < P) :
    ∃ x, (plan eng c m [rq]).done = serveL c eng.blockSize m.running ++ [x] ∧ (plan eng c m [rq]).waiting = [] ∧
      (plan eng c m [rq]).preempted = 0 ∧ x.decoding = false ∧
      x.sched = min c P ∧ x.pos = 0 ∧ x.remaining = P ∧ x.alloc ≤ blocksFor eng.blockSize P ∧
      x.req.out = rq.out ∧ x.req.sid = rq.sid ∧ x.known = P ∧ x.req.prompt = rq.prompt ∧
      ∀ Q : Nat → Prop, (∀ e ∈ m.cache, Q e.sid) → ∀ e ∈ (plan eng c m [rq]).cache, Q e.sid := by
  have hex : ∀ d, excluded (phaseOf eng m.running) d = false := fun d => excluded_none eng hph _ d
  have hub := usedBlocks_serveL c eng.blockSize bW m.running hL
  obtain ⟨i1, i2, i3, i4, i5, i7, i6⟩ := serve_list eng (phaseOf eng m.running) c bW hc hex (clearSched m.running)
    ⟨eng.budget, c, [], clearSched m.running, [rq], m.cache, m.relSeq, 0, false⟩ (resCount m.running + 1) rfl
    (by rw [resCount_clearSched']; omega) rfl (clearSched_fits _ _ _ _ hL)
    (by rw [serveL_clearSched]; show batchTokens (serveL c eng.blockSize m.running) ≤ eng.budget; omega) rfl
    (by simp only [usedBlocks, resCount_clearSched', Nat.zero_add]; omega)
  unfold plan
  dsimp only
  generalize serveRunning eng (phaseOf eng m.running) (resCount m.running + 1)
    ⟨eng.budget, c, [], clearSched m.running, [rq], m.cache, m.relSeq, 0, false⟩ = p1 at i1 i2 i3 i4 i5 i7 i6 ⊢
  rw [if_pos i4]
  have e : reqCount p1.waiting + 1 = 0 + 1 + 1 := by rw [i3]; rfl
  rw [e]
  have hdone : appendRes p1.done p1.todo = serveL c eng.blockSize m.running := by
    simp [i1, i2, appendRes_eq', serveL_clearSched]
  rw [serveL_clearSched] at i5
  obtain ⟨x, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13⟩ :=
    admit_chunk eng (phaseOf eng m.running) 0 { p1 with done := appendRes p1.done p1.todo, todo := [] } rq P
      (by simp [i3]) (by dsimp only; rw [i5]; dsimp only; omega)
      (by simp only [hdone, resCount_serveL]; exact hcap) (hex false) hkept hcomp
      (ownCachedBlocks_zero _ _ (i6 (fun s => s ≠ rq.sid) hown)) hP (by simp only [hdone]; omega)
  have hsched : capChunk c (min P (eng.budget - batchTokens (serveL c eng.blockSize m.running))) = min c P := by
    unfold capChunk
    rw [if_neg (by omega)]
    omega
  refine ⟨x, by rw [a1]; simp only [hdone, appendRes_eq'], a2, by rw [a3]; exact i4, a4, ?_, a6, a7, a8, a9, a10,
    a11, a12, fun Q hQ => a13 Q (i6 Q hQ)⟩
  rw [a5]
  dsimp only
  rw [i7, i5]
  exact hsched

/-! ## The residents' ghost arrival times -/

/-- The residents, oldest first, each with an arrival time `a` between `x` and `now`, `Q a r`, the
next at least `g` later, and the one after the last at least `g` after it and no earlier than `z`
(the first pending arrival's time bounds `z`). -/
def Chain (Q : Nat → Res → Prop) (g now : Nat) : Nat → List Res → Nat → Prop
  | x, [], z => x ≤ z
  | x, r :: rs, z => ∃ a, x ≤ a ∧ a ≤ now ∧ Q a r ∧ Chain Q g now (a + g) rs z

theorem chain_mono {Q : Nat → Res → Prop} {g now : Nat} : ∀ {x y : Nat} {L : List Res} {z : Nat}, y ≤ x →
    Chain Q g now x L z → Chain Q g now y L z
  | _, _, [], _, hxy, h => Nat.le_trans hxy h
  | _, _, _ :: _, _, hxy, ⟨a, h1, h2, h3, h4⟩ => ⟨a, Nat.le_trans hxy h1, h2, h3, h4⟩

theorem chain_append {Q : Nat → Res → Prop} {g now : Nat} (y : Res) (a z' : Nat) (hya : Q a y) (han : a ≤ now)
    (hz' : a + g ≤ z') : ∀ {x : Nat} {L : List Res} {z : Nat}, Chain Q g now x L z → z ≤ a →
    Chain Q g now x (L ++ [y]) z'
  | _, [], _, h, hz => ⟨a, Nat.le_trans h hz, han, hya, hz'⟩
  | _, _ :: _, _, ⟨b, h1, h2, h3, h4⟩, hz => ⟨b, h1, h2, h3, chain_append y a z' hya han hz' h4 hz⟩

theorem chain_close {Q : Nat → Res → Prop} {g now : Nat} : ∀ {x : Nat} {L : List Res} {z : Nat}, x ≤ now + g →
    Chain Q g now x L z → Chain Q g now x L (now + g)
  | _, [], _, hx, _ => hx
  | _, _ :: _, _, _, ⟨a, h1, h2, h3, h4⟩ => ⟨a, h1, h2, h3, chain_close (by omega) h4⟩

theorem chain_map {Q Q' : Nat → Res → Prop} {g now : Nat} (f : Res → Res) (hf : ∀ a r, Q a r → Q' a (f r))
    (F : List Res → List Res) (hF0 : F [] = []) (hF : ∀ r rs, F (r :: rs) = f r :: F rs) :
    ∀ {x : Nat} {L : List Res} {z : Nat}, Chain Q g now x L z → Chain Q' g now x (F L) z
  | _, [], _, h => by rw [hF0]; exact h
  | _, _ :: _, _, ⟨a, h1, h2, h3, h4⟩ => by
    rw [hF]; exact ⟨a, h1, h2, hf a _ h3, chain_map f hf F hF0 hF h4⟩

theorem chain_mem {Q : Nat → Res → Prop} {g now : Nat} : ∀ {x : Nat} {L : List Res} {z : Nat},
    Chain Q g now x L z → ∀ r ∈ L, ∃ a, Q a r
  | _, [], _, _, r, hr => by simp at hr
  | _, _ :: _, _, ⟨a, _, _, h3, h4⟩, r, hr => by
    rcases List.mem_cons.mp hr with rfl | hr
    · exact ⟨a, h3⟩
    · exact chain_mem h4 r hr

theorem chain_len {Q : Nat → Res → Prop} {g now : Nat} : ∀ {x : Nat} {L : List Res} {z : Nat},
    Chain Q g now x L z → x + resCount L * g ≤ z
  | _, [], _, h => by simp only [resCount, Nat.zero_mul, Nat.add_zero]; exact h
  | _, _ :: rs, _, ⟨a, h1, _, _, h4⟩ => by
    have := chain_len h4
    simp only [resCount, Nat.succ_mul]
    omega

/-! ## A resident's work left by its age -/

/-- A resident that arrived at `a ≤ now`: a prefill that has had at least `c` tokens an iteration
(`remaining + c · now ≤ P + c · a`), or a decode that ends by `a + n + D - 1`. -/
def Ok (bs c n P D now a : Nat) (r : Res) : Prop :=
  a ≤ now ∧ ((Prefilling bs P D r ∧ r.remaining + c * now ≤ P + c * a) ∨
    (Decoding bs P D r ∧ r.remaining + now ≤ a + (n + (D - 1))))

/-- A resident served in the iteration at `now`: as `Ok`, and its tokens: a decode one, a prefill at
least `min c remaining` and at most `remaining`. -/
def Sv (bs c n P D now a : Nat) (r : Res) : Prop :=
  a ≤ now ∧ 0 < r.sched ∧ ((Prefilling bs P D r ∧ r.remaining + c * now ≤ P + c * a ∧
      min c r.remaining ≤ r.sched ∧ r.sched ≤ r.remaining) ∨
    (Decoding bs P D r ∧ r.remaining + now ≤ a + (n + (D - 1)) ∧ r.sched = 1))

theorem ok_fits (bs c n P D now a : Nat) (r : Res) (h : Ok bs c n P D now a r) :
    Fits c bs (blocksFor bs (P + (D - 1))) r := by
  rcases h.2 with ⟨⟨hd, hrem, hpos, halloc, _⟩, _⟩ | ⟨⟨hd, hrem, hle, hpos, halloc⟩, _⟩
  · refine ⟨hrem, blocksFor_mono _ ?_, Nat.le_trans halloc (blocksFor_mono _ (by omega))⟩
    unfold dem; rw [if_neg (by simp [hd])]; omega
  · refine ⟨hrem, blocksFor_mono _ ?_, halloc⟩
    unfold dem; rw [if_pos hd]; omega

theorem ok_serveOne (bs c n P D now a : Nat) (hc : 0 < c) (r : Res) (h : Ok bs c n P D now a r) :
    Sv bs c n P D now a (serveOne c bs r) := by
  obtain ⟨han, h⟩ := h
  rcases h with ⟨⟨hd, hrem, hpos, halloc, hk, hp, ho⟩, hc'⟩ | ⟨⟨hd, hrem, hle, hpos, halloc⟩, hc'⟩
  · have hdm : dem c r = min c r.remaining := by unfold dem; rw [if_neg (by simp [hd])]
    refine ⟨han, ?_, Or.inl ⟨⟨hd, hrem, hpos, ?_, hk, hp, ho⟩, hc', ?_, ?_⟩⟩
    · show 0 < dem c r; omega
    · show r.alloc + (blocksFor bs (r.pos + dem c r) - r.alloc) ≤ blocksFor bs P
      have := blocksFor_mono bs (show r.pos + dem c r ≤ P by omega)
      omega
    · show min c r.remaining ≤ dem c r; omega
    · show dem c r ≤ r.remaining; omega
  · have hdm : dem c r = 1 := by unfold dem; rw [if_pos hd]
    refine ⟨han, ?_, Or.inr ⟨⟨hd, hrem, hle, hpos, ?_⟩, hc', hdm⟩⟩
    · show 0 < dem c r; omega
    · show r.alloc + (blocksFor bs (r.pos + dem c r) - r.alloc) ≤ blocksFor bs (P + (D - 1))
      have := blocksFor_mono bs (show r.pos + dem c r ≤ P + (D - 1) by omega)
      omega

theorem stepRes_more (now : Nat) (x : Res) (hd : x.decoding = false) (hs : 0 < x.sched)
    (hlt : x.sched < x.remaining) :
    stepRes now x = [⟨x.req, x.alloc, x.pos + x.sched, x.known, false, x.remaining - x.sched, 0⟩] := by
  have hs0 : ¬ x.sched = 0 := by omega
  have h1 : ¬ x.remaining - x.sched = 0 := by omega
  simp [stepRes, hs0, hd, h1]

/-- What the iteration makes of a served resident: it ends, or it is `Ok` at `now + 1` with the same
arrival, its work left less its tokens. -/
theorem sv_step (bs c n P D now a : Nat) (hn : P ≤ c * n) (x : Res) (h : Sv bs c n P D now a x) :
    workLeft D (stepRes now x) + x.sched = workLeft D [x] ∧
    ∀ y ∈ stepRes now x, Ok bs c n P D (now + 1) a y ∧ y.req.sid = x.req.sid := by
  obtain ⟨han, hs, h⟩ := h
  rcases h with ⟨⟨hd, hrem, hpos, halloc, hk, hp, ho⟩, hc', hmin, hle⟩ | ⟨⟨hd, hrem, hle, hpos, halloc⟩, hc', h1⟩
  · have hL : x.req.out - 1 - (x.known - x.req.prompt) = D - 1 := by rw [ho, hk, hp]; simp
    rw [workLeft_pre D x hd]
    by_cases hfin : x.remaining ≤ x.sched
    · -- the prefill ends: it decodes `D - 1` tokens, done by `a + n + D - 1`
      have hnow : now < a + n := by
        have h2 : c * now + 1 ≤ c * (a + n) := by rw [Nat.mul_add]; omega
        exact lt_of_mul (B := c) (c := 1) (by omega) h2
      rcases stepRes_prefill now x D hd hs hfin hL with ⟨h0, hD⟩ | ⟨q, hq, h0, hD⟩
      · rw [h0]; simp only [workLeft]; refine ⟨by omega, fun y hy => by simp at hy⟩
      · rw [h0]
        refine ⟨by rw [workLeft_dec D _ rfl]; dsimp only; omega, fun y hy => ?_⟩
        simp only [List.mem_singleton] at hy
        subst hy
        refine ⟨⟨by omega, Or.inr ⟨⟨rfl, hD, Nat.le_refl _, ?_, ?_⟩, ?_⟩⟩, hq⟩
        · show x.pos + x.sched + (D - 1) = P + (D - 1); omega
        · show x.alloc ≤ _; exact Nat.le_trans halloc (blocksFor_mono _ (by omega))
        · show D - 1 + (now + 1) ≤ a + (n + (D - 1)); omega
    · -- the prefill goes on: it had at least `c` tokens
      have hcs : c ≤ x.sched := by omega
      rw [stepRes_more now x hd hs (by omega)]
      refine ⟨by rw [workLeft_pre D _ rfl]; dsimp only; omega, fun y hy => ?_⟩
      simp only [List.mem_singleton] at hy
      subst hy
      refine ⟨⟨by omega, Or.inl ⟨⟨rfl, by dsimp only; omega, by dsimp only; omega, halloc, hk, hp, ho⟩, ?_⟩⟩, rfl⟩
      show x.remaining - x.sched + c * (now + 1) ≤ P + c * a
      rw [Nat.mul_succ]; omega
  · rw [workLeft_dec D x hd]
    rcases stepRes_dec now x hd h1 with ⟨h0, h2⟩ | ⟨q, hq, h0, h2⟩
    · rw [h0]; simp only [workLeft]; refine ⟨by omega, fun y hy => by simp at hy⟩
    · rw [h0]
      refine ⟨by rw [workLeft_dec D _ rfl]; dsimp only; omega, fun y hy => ?_⟩
      simp only [List.mem_singleton] at hy
      subst hy
      refine ⟨⟨by omega, Or.inr ⟨⟨rfl, h2, by dsimp only; omega, by dsimp only; omega, halloc⟩, ?_⟩⟩, hq⟩
      show x.remaining - 1 + (now + 1) ≤ a + (n + (D - 1)); omega

theorem ite_nil_single {c : Prop} [Decidable c] (y : Res) :
    (if c then ([] : List Res) else [y]) = [] ∨ ∃ z, (if c then ([] : List Res) else [y]) = [z] := by
  by_cases h : c
  · left; rw [if_pos h]
  · right; exact ⟨y, if_neg h⟩

theorem stepRes_len (now : Nat) (r : Res) : stepRes now r = [] ∨ ∃ y, stepRes now r = [y] := by
  unfold stepRes
  split
  · exact Or.inr ⟨_, rfl⟩
  · dsimp only
    exact ite_nil_single _

/-- What the iteration makes of a chain of served residents: a chain at `now + 1`, the work left less
the tokens, each resident left one of the served. -/
theorem chain_step (bs c n P D g now : Nat) (hn : P ≤ c * n) : ∀ {x : Nat} {L : List Res} {z : Nat},
    Chain (Sv bs c n P D now) g now x L z →
    Chain (Ok bs c n P D (now + 1)) g (now + 1) x (stepAll now L) z ∧
    workLeft D (stepAll now L) + batchTokens L = workLeft D L ∧
    ∀ y ∈ stepAll now L, ∃ r ∈ L, y.req.sid = r.req.sid
  | _, [], _, h => ⟨h, by simp [stepAll, workLeft, batchTokens], fun y hy => by simp [stepAll] at hy⟩
  | _, r :: rs, _, ⟨a, h1, h2, h3, h4⟩ => by
    obtain ⟨i1, i2, i3⟩ := chain_step bs c n P D g now hn h4
    obtain ⟨s1, s2⟩ := sv_step bs c n P D now a hn r h3
    rw [stepAll_cons]
    refine ⟨?_, ?_, ?_⟩
    · rcases stepRes_len now r with hR | ⟨y, hR⟩
      · rw [hR, List.nil_append]; exact chain_mono (by omega) i1
      · have hy := s2 y (by rw [hR]; exact List.mem_cons_self)
        rw [hR, List.singleton_append]
        exact ⟨a, h1, by omega, hy.1, i1⟩
    · rw [workLeft_app]
      have : workLeft D (r :: rs) = workLeft D [r] + workLeft D rs := by simp [workLeft]
      rw [this]
      simp only [batchTokens]
      omega
    · intro y hy
      rcases List.mem_append.mp hy with hy | hy
      · exact ⟨r, List.mem_cons_self, (s2 y hy).2⟩
      · obtain ⟨q, hq, e⟩ := i3 y hy
        exact ⟨q, List.mem_cons_of_mem _ hq, e⟩

/-! ## The prefills among the residents -/

def prefills : List Res → Nat
  | [] => 0
  | r :: rs => (if r.decoding = true then 0 else 1) + prefills rs

theorem prefills_le : ∀ (L : List Res), prefills L ≤ resCount L
  | [] => Nat.le_refl _
  | r :: rs => by
    have := prefills_le rs
    simp only [prefills, resCount]
    split <;> omega

/-- The residents' demand: one token a decode, at most `c` a prefill. -/
theorem tokens_prefills (c bs : Nat) : ∀ (L : List Res),
    batchTokens (serveL c bs L) + prefills L ≤ prefills L * c + resCount L
  | [] => by simp [serveL, batchTokens, prefills, resCount]
  | r :: rs => by
    have ih := tokens_prefills c bs rs
    simp only [serveL, batchTokens, prefills, resCount]
    by_cases hd : r.decoding = true
    · have h1 : (serveOne c bs r).sched = 1 := by show dem c r = 1; unfold dem; rw [if_pos hd]
      rw [h1, if_pos hd, Nat.zero_add]
      omega
    · have h1 : (serveOne c bs r).sched = min c r.remaining := by show dem c r = _; unfold dem; rw [if_neg hd]
      rw [h1, if_neg hd, Nat.add_mul, Nat.one_mul]
      omega

/-- The budget a chain's demand needs: `p` prefills of at most `c` and decodes of one, `p ≤ J`, at most
`K` residents, within `J · c + (K - J)`. -/
theorem budget_arith {p k J K c t : Nat} (hc : 0 < c) (hp : p ≤ J) (hk : k ≤ K) (ht : t + p ≤ p * c + k) :
    t ≤ J * c + (K - J) := by
  have h1 : (J - p) * c + p * c = J * c := by rw [← Nat.add_mul, Nat.sub_add_cancel hp]
  have h2 : J - p ≤ (J - p) * c := Nat.le_mul_of_pos_right _ hc
  omega

/-! ## The bounds at an arrival -/

/-- The most a resident of age `t` has left: a prefill cut in chunks of `c` since its arrival,
`P - t · c` of its prompt and its `D - 1` decodes; once its prompt is done (`t · c ≥ P`), what of its
`D - 1` decodes is left by `n + D - 1 - t`. -/
def bound (c n P D t : Nat) : Nat :=
  if t * c < P then P - t * c + (D - 1) else min (D - 1) (n + (D - 1) - t)

/-- `Σ_{j < k} bound (b + j · g)`. -/
def sumB (c n P D g b : Nat) : Nat → Nat
  | 0 => 0
  | k + 1 => bound c n P D (b + k * g) + sumB c n P D g b k

theorem bound_anti (c n P D : Nat) {s t : Nat} (h : s ≤ t) : bound c n P D t ≤ bound c n P D s := by
  have := Nat.mul_le_mul_right c h
  unfold bound
  split <;> split <;> omega

theorem sumB_mono (c n P D g b : Nat) {k k' : Nat} (h : k ≤ k') : sumB c n P D g b k ≤ sumB c n P D g b k' := by
  obtain ⟨j, rfl⟩ := Nat.exists_eq_add_of_le h
  induction j with
  | zero => exact Nat.le_refl _
  | succ j ih =>
    have := ih (by omega)
    show _ ≤ bound c n P D (b + (k + j) * g) + sumB c n P D g b (k + j)
    omega

theorem sumB_zero (c n P D g : Nat) : ∀ k, sumB c n P D g 0 (k + 1) = bound c n P D 0 + sumB c n P D g g k
  | 0 => by simp [sumB]
  | k + 1 => by
    have ih := sumB_zero c n P D g k
    show bound c n P D (0 + (k + 1) * g) + sumB c n P D g 0 (k + 1) =
      bound c n P D 0 + (bound c n P D (g + k * g) + sumB c n P D g g k)
    rw [ih, show 0 + (k + 1) * g = g + k * g by rw [Nat.succ_mul]; omega]
    omega

theorem bound_zero (c n P D : Nat) (hP : 0 < P) : bound c n P D 0 = P + (D - 1) := by
  simp [bound, hP]

theorem ok_bound (bs c n P D now a : Nat) (r : Res) (h : Ok bs c n P D now a r) :
    workLeft D [r] ≤ bound c n P D (now - a) := by
  obtain ⟨han, h⟩ := h
  have e : (now - a) * c + c * a = c * now := by
    rw [Nat.mul_comm c a, Nat.mul_comm c now, ← Nat.add_mul, Nat.sub_add_cancel han]
  rcases h with ⟨⟨hd, hrem, _, _, _, _, _⟩, hc'⟩ | ⟨⟨hd, hrem, hle', _, _⟩, hc'⟩
  · rw [workLeft_pre D r hd]
    unfold bound
    split <;> omega
  · rw [workLeft_dec D r hd]
    unfold bound
    split <;> omega

theorem ok_life (bs c n P D now a : Nat) (hn : P ≤ c * n) (r : Res) (h : Ok bs c n P D now a r) :
    now < a + (n + (D - 1)) := by
  obtain ⟨_, h⟩ := h
  rcases h with ⟨⟨_, hrem, _, _, _, _, _⟩, hc'⟩ | ⟨⟨_, hrem, _, _, _⟩, hc'⟩
  · have h2 : c * now + 1 ≤ c * (a + n) := by rw [Nat.mul_add]; omega
    have := lt_of_mul (B := c) (c := 1) (by omega) h2
    omega
  · omega

/-- The residents' work left, ages at least `b`, `b + g`, ... from the newest: at most
`Σ_{j < k} bound (b + j · g)`. -/
theorem chain_sum (bs c n P D g now b : Nat) : ∀ {x : Nat} {L : List Res} {z : Nat},
    Chain (Ok bs c n P D now) g now x L z → z + b ≤ now + g →
    workLeft D L ≤ sumB c n P D g b (resCount L)
  | _, [], _, _, _ => by simp [workLeft, sumB, resCount]
  | _, r :: rs, _, ⟨a, _, _, h3, h4⟩, hz => by
    have ih := chain_sum bs c n P D g now b h4 hz
    have hlen := chain_len h4
    have hb := ok_bound bs c n P D now a r h3
    have han := h3.1
    have ha := bound_anti c n P D (show b + resCount rs * g ≤ now - a by omega)
    have : workLeft D (r :: rs) = workLeft D [r] + workLeft D rs := by simp [workLeft]
    rw [this]
    show _ ≤ bound c n P D (b + resCount rs * g) + sumB c n P D g b (resCount rs)
    omega

/-- At most so many residents: their arrivals `g` apart, each within its life `n + D - 1`. -/
theorem chain_count (bs c n P D g now : Nat) (hn : P ≤ c * n) : ∀ {x : Nat} {L : List Res} {z : Nat},
    Chain (Ok bs c n P D now) g now x L z → L = [] ∨ resCount L * g + now < z + (n + (D - 1))
  | _, [], _, _ => Or.inl rfl
  | _, r :: rs, _, ⟨a, _, _, h3, h4⟩ => by
    have hlen := chain_len h4
    have := ok_life bs c n P D now a hn r h3
    right
    simp only [resCount, Nat.succ_mul]
    omega

/-- At most so many prefills: their arrivals `g` apart, each within its `n` chunks. -/
theorem chain_prefills (bs c n P D g now : Nat) (hn : P ≤ c * n) : ∀ {x : Nat} {L : List Res} {z : Nat},
    Chain (Ok bs c n P D now) g now x L z → prefills L = 0 ∨ prefills L * g + now < z + n
  | _, [], _, _ => Or.inl rfl
  | _, r :: rs, _, ⟨a, _, _, h3, h4⟩ => by
    have ih := chain_prefills bs c n P D g now hn h4
    have hlen := chain_len h4
    have hm := Nat.mul_le_mul_right g (prefills_le rs)
    by_cases hd : r.decoding = true
    · have e : prefills (r :: rs) = prefills rs := by simp [prefills, hd]
      rw [e]; exact ih
    · have e : prefills (r :: rs) = prefills rs + 1 := by simp only [prefills]; rw [if_neg hd]; omega
      have hlt : now < a + n := by
        rcases h3.2 with ⟨⟨_, hrem, _⟩, hc'⟩ | ⟨⟨hd', _⟩, _⟩
        · have h2 : c * now + 1 ≤ c * (a + n) := by rw [Nat.mul_add]; omega
          exact lt_of_mul (B := c) (c := 1) (by omega) h2
        · exact absurd hd' hd
      right
      rw [e, Nat.succ_mul]
      omega

end BacklogChunk

end Serq
