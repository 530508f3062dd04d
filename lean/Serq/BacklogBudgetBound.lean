module

public import Serq.BacklogBudgetFinal
public import Serq.BacklogBudgetBuckets

/-! # The bounded backlog when the budget cuts prompts (issue 14, result 2(b): the final assembly)

The last step of the budget-cut case: the buckets' invariant (`Serq.BacklogBudget.Resid` on the residents,
`Serq.BacklogBudget.Waits` on the queue; `BacklogBudgetBuckets.lean`) is the invariant `J` that
`Serq.BacklogBudget.backlog_budget_mod` (`BacklogBudgetFinal.lean`) asks for. Proved here:

* `bucketInv_init`: `J` holds at `init` (no resident, nothing waiting);
* `bucketInv_count`: `J` bounds the residents by `(D − 1) · M + 1` (`resid_count`);
* `due_shape`: every due turn of a machine with the balance (`Bal`: every pending turn a first turn of `P`
  tokens of an existing session) is a prompt of `P` tokens with `D` outputs (`newReq_out`, `1 < D`);
* `bucketInv_step`: a step whose plan preempts nothing keeps `J` (`step_buckets`, `submit_waits`,
  `step_waits`), and after it the residents' work left is at most `M · (D · (D − 1) / 2)` when they all decode
  (`resLeft = decRem` then, `resid_work`);
* `Serq.backlog_budget`, `Serq.backlog_budget_renewal`: the bounded backlog, with no hypothesis on the run
  (`D ≥ 2` through `backlog_budget_mod` and `J`; `D = 1` from `Serq.backlog_decode_gapped`).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open BacklogMany

/-- The buckets' invariant on the machine, with `M = 1 + budget / P`: the residents have I1 and I2
(`Resid`), and every waiting request is a never-admitted one of the sessions' shape (`Waits`). -/
def BucketInv (eng : Engine) (P D : Nat) (m : Machine) : Prop :=
  Resid P D (1 + eng.budget / P) m.running ∧ ∀ rq ∈ m.waiting, Waits P D rq

theorem bucketInv_init (eng : Engine) (ss : List Session) (P D : Nat) : BucketInv eng P D (init ss) :=
  ⟨resid_nil P D _, fun _ h => by simp [init] at h⟩

theorem bucketInv_count (eng : Engine) (P D : Nat) (m : Machine) (h : BucketInv eng P D m) :
    resCount m.running ≤ (D - 1) * (1 + eng.budget / P) + 1 :=
  (resid_count P D _ _ h.1).2.2

/-- The work left of residents that all decode is the decodes' work left. -/
theorem resLeft_dec : ∀ (l : List Res), (∀ y ∈ l, y.decoding = true) → resLeft l = decRem l
  | [], _ => rfl
  | y :: ys, h => by
    have hy := h y List.mem_cons_self
    simp only [resLeft, decRem, hy, if_true]
    rw [resLeft_dec ys (fun x hx => h x (List.mem_cons_of_mem _ hx))]

/-- The due turns of a machine with the balance, for one-turn sessions of `D ≥ 2` outputs: each is a prompt of
`P` tokens with `D` outputs. -/
theorem due_shape (eng : Engine) (ss : List Session) (P D : Nat) (hD : 1 < D)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) (m : Machine) (hb : Bal ss P D m) :
    ∀ p ∈ (duePending m.now m.pending).1, p.prompt = P ∧ (newReq eng ss p).out = D := by
  intro p hp
  obtain ⟨d1, d2, d3⟩ := hb.2.2.2 p (mem_due m.now m.pending p hp)
  have := BacklogDecode.newReq_out eng ss D hw p (BacklogDecode.sessionAt_lt ss p.sid d3) d1
  exact ⟨d2, by omega⟩

/-- A step whose plan preempts nothing keeps the buckets' invariant, and leaves the residents' work at most
`M · (D · (D − 1) / 2)` when they all decode. -/
theorem bucketInv_step (eng : Engine) (hph : eng.phased = false) (hch : eng.chunk = 0)
    (hc : eng.caching = false) (ss : List Session) (P D C : Nat) (hP : 0 < P) (hD : 1 < D)
    (hdec : (D - 1) * (1 + eng.budget / P) ≤ eng.budget)
    (hw : ∀ s ∈ ss, ∃ t, s.turns = [t] ∧ t.out - 1 = D - 1) (m : Machine)
    (hf : FinInv eng ss P D C m) (hj : BucketInv eng P D m) (hpre : NoPre eng ss m) :
    BucketInv eng P D (step eng ss m) ∧
      ((∀ y ∈ (step eng ss m).running, y.decoding = true) →
        resLeft (step eng ss m).running ≤ (1 + eng.budget / P) * (D * (D - 1) / 2)) := by
  have hq := submit_waits eng hc ss P D _ m.waiting hj.2 (due_shape eng ss P D hD hw m hf.2.2.2.2.2.1)
  have h0 := hpre 0
  have hr := step_buckets eng hph hch ss P D hP hdec m hj.1 hq h0
  refine ⟨⟨hr, step_waits eng hch ss P D m hq h0⟩, fun hall => ?_⟩
  rw [resLeft_dec _ hall]
  exact (resid_work P D _ (by omega) _ hr).1

end BacklogBudget

/-- **The bounded backlog when the budget cuts prompts** (Dai et al. 2025, Theorem 2(b); issue 14,
result 2(b)). An engine of vLLM's mixed schedule (`phased = false`) without a chunk cap (`chunk = 0`) and
without a prefix cache (`caching = false`), with a positive token budget; sessions at least `g > 0` steps
apart from time 1 on (`GappedDecode g P D 1`: any arrival times, each at least `g` after the one before),
each one turn of a `P`-token prompt (`P > 0`) and `D > 0` output tokens, so a request's work is
`W = P + (D − 1)`. The prompt need not fit in the budget: the budget may cut it over several iterations.
With `M = 1 + budget / P` (the most prefills one iteration finishes) and `C = M · (D · (D − 1) / 2)`
(the most decode work left when every resident decodes), assume
* the work arriving per gap fits the budget: `W ≤ budget · g`;
* the decodes fit the budget: `(D − 1) · M ≤ budget` (at most `M` decodes with each count `1 … D − 1` left);
* the request cap holds `K = (D − 1) · M + 1 + (W + C) / W` requests (the residents and the queue), and the
  KV pool `K` requests' `P + D − 1` tokens: `K ≤ reqsCap`, `K · blocksFor blockSize (P + D − 1) ≤ kvBlocks`.
Then, for any fuel, at every iteration of the run the sessions arrived (those due at its start included)
times `W` exceed the tokens served before it by at most `W + C`. That the request cap and the KV pool never
bind, that nothing is preempted, that at most one prefill and `(D − 1) · M` decodes are ever resident, and that
the queue never holds more than `(W + C) / W` requests are proved, not assumed. (A single output token,
`D = 1`, where `C = 0` and at most one request is ever in flight, is read off `Serq.backlog_decode_gapped`;
`D ≥ 2` is the buckets' case.) -/
theorem backlog_budget (eng : Engine) (g P D : Nat) (ss : List Session)
    (hph : eng.phased = false) (hch : eng.chunk = 0) (hc : eng.caching = false) (hb : 0 < eng.budget)
    (hP : 0 < P) (hD : 0 < D) (hg : 0 < g) (hW : P + (D - 1) ≤ eng.budget * g)
    (hdec : (D - 1) * (1 + eng.budget / P) ≤ eng.budget)
    (hK : (D - 1) * (1 + eng.budget / P) + 1 +
        (P + (D - 1) + (1 + eng.budget / P) * (D * (D - 1) / 2)) / (P + (D - 1)) ≤ eng.reqsCap)
    (hkv : ((D - 1) * (1 + eng.budget / P) + 1 +
        (P + (D - 1) + (1 + eng.budget / P) * (D * (D - 1) / 2)) / (P + (D - 1))) *
          blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (hw : GappedDecode g P D 1 ss) (fuel : Nat) :
    ∀ x ∈ (run eng ss fuel (init ss)).records,
      x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + (1 + eng.budget / P) * (D * (D - 1) / 2) := by
  rcases Nat.lt_or_ge 1 D with hD1 | hD1
  · exact BacklogBudget.backlog_budget_mod eng hph hch hc hb ss P D g hP hD hg hw hW hK hkv
      (BacklogBudget.BucketInv eng P D) (BacklogBudget.bucketInv_init eng ss P D)
      (fun m _ hj => BacklogBudget.bucketInv_count eng P D m hj)
      (fun m hf hj hpre => BacklogBudget.bucketInv_step eng hph hch hc ss P D _ hP hD1 hdec
        (BacklogDecode.gapped_turns g P D 1 ss hw) m hf hj hpre)
      fuel
  · -- one output token: at most one request is ever in flight (`backlog_decode_gapped`)
    obtain rfl : D = 1 := by omega
    simp only [Nat.sub_self, Nat.add_zero, Nat.mul_zero, Nat.zero_mul, Nat.zero_div, Nat.zero_add,
      Nat.add_sub_cancel, Nat.div_self hP] at hK hkv hW ⊢
    have hcap : 0 < eng.reqsCap := by omega
    have hfits : blocksFor eng.blockSize (P + (1 - 1)) ≤ eng.kvBlocks := by
      rw [Nat.sub_self, Nat.add_zero]
      exact Nat.le_trans (Nat.le_mul_of_pos_left _ (by omega)) hkv
    have h := backlog_decode_gapped eng g P 1 ss hcap hfits hP (by simpa using hW) (gapped_mono (Nat.zero_le 1) hw) fuel
    intro x hx
    have := h x hx
    simp only [Nat.sub_self, Nat.add_zero] at this
    exact this

/-- **The bounded backlog when the budget cuts prompts, for the renewal arrivals** (Dai et al. 2025,
Theorem 2(b); issue 14, result 2(b)): `backlog_budget` with the sessions arriving one every `g > 0` steps,
the `k`-th at `(k + 1) · g` (`RenewalDecode g P D 0`), each one turn of a `P`-token prompt (`P > 0`) and
`D > 0` output tokens; the same engine (mixed schedule, no chunk cap, no prefix cache, a positive budget) and
the same hypotheses: `W = P + (D − 1) ≤ budget · g`, `(D − 1) · M ≤ budget` with `M = 1 + budget / P`,
`K = (D − 1) · M + 1 + (W + C) / W ≤ reqsCap` with `C = M · (D · (D − 1) / 2)`, and
`K · blocksFor blockSize (P + D − 1) ≤ kvBlocks`. Then at every iteration of every run the sessions arrived
times `W` exceed the tokens served before it by at most `W + C`. The request cap and the KV pool never binding
and nothing preempted are proved, not assumed. -/
theorem backlog_budget_renewal (eng : Engine) (g P D : Nat) (ss : List Session)
    (hph : eng.phased = false) (hch : eng.chunk = 0) (hc : eng.caching = false) (hb : 0 < eng.budget)
    (hP : 0 < P) (hD : 0 < D) (hg : 0 < g) (hW : P + (D - 1) ≤ eng.budget * g)
    (hdec : (D - 1) * (1 + eng.budget / P) ≤ eng.budget)
    (hK : (D - 1) * (1 + eng.budget / P) + 1 +
        (P + (D - 1) + (1 + eng.budget / P) * (D * (D - 1) / 2)) / (P + (D - 1)) ≤ eng.reqsCap)
    (hkv : ((D - 1) * (1 + eng.budget / P) + 1 +
        (P + (D - 1) + (1 + eng.budget / P) * (D * (D - 1) / 2)) / (P + (D - 1))) *
          blocksFor eng.blockSize (P + D - 1) ≤ eng.kvBlocks)
    (hw : RenewalDecode g P D 0 ss) (fuel : Nat) :
    ∀ x ∈ (run eng ss fuel (init ss)).records,
      x.arrived * (P + (D - 1)) ≤ x.served + (P + (D - 1)) + (1 + eng.budget / P) * (D * (D - 1) / 2) :=
  backlog_budget eng g P D ss hph hch hc hb hP hD hg hW hdec hK hkv
    (gapped_mono (by rw [Nat.zero_add, Nat.one_mul]; exact hg) (gapped_of_renewal g P D 0 ss hw)) fuel

end Serq
