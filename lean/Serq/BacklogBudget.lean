module

/-! # Work conservation bounds the backlog (issue 14, result 2, case (b): groundwork)

The argument of the open case of the bounded backlog — prompts served over several iterations because
the token budget cuts them, several requests in flight — on the mixed schedule, stated over the
iteration records alone, without the engine. `Serq.full_or_short` (`lean/Serq/Full.lean`) says that
every iteration of the mixed schedule serves its whole budget or its whole demand. This module proves
what follows from that shape: if every iteration either

* serves the full budget `B` and the next one starts one step later (the engine stays busy), or
* is a *reset*: the work arrived exceeds the work served once it is done by at most `C`
  (`arrived · W ≤ served + tokens + C`: what is left after it is at most `C` tokens),

and the arrivals are at least `g` steps apart with `W ≤ B · g` (a request's work fits a gap's budget),
then every record has `arrived · W ≤ served + W + C` (`Serq.BacklogBudget.conserve`): since the last
reset, the engine served `B` tokens at every step, and the arrivals of those steps brought at most one
request's work more than that.

The records are indexed functions (`start i`, `tokens i`, `served i`, `arrived i` for `i < n`); the
arrivals a counting function `N` (`N t`: the arrivals due by step `t`, so `arrived i = N (start i)`),
at least `g` apart: `(N t - N s) · g ≤ t - s + g - 1` (at most `⌈(t - s) / g⌉` arrivals in `(s, t]`).

What stays open (see `docs/lean.md`, issue 14's row 2): that the engine's runs meet these hypotheses
in case (b) — above all, that after an iteration that serves its whole demand the work left is at most
`C` (the residents all decode, each with at most `D - 1` tokens left, at most `K` of them, nothing
waits in the queue: the request cap and the KV pool never bind).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

/-- The arithmetic of a window: `a` arrivals at least `g` apart in `L ≥ 1` consecutive steps
(`a · g ≤ L + g - 1`), each of work `W ≤ B · g`, bring at most one request's work more than the
budget of all but one of those steps. -/
theorem window (a g L W B : Nat) (hL : 1 ≤ L) (ha : a * g ≤ L + g - 1) (hW : W ≤ B * g) :
    a * W ≤ W + B * (L - 1) := by
  cases a with
  | zero => simp
  | succ a =>
    have e1 : (a + 1) * g = a * g + g := by rw [Nat.add_mul, Nat.one_mul]
    have e2 : (a + 1) * W = a * W + W := by rw [Nat.add_mul, Nat.one_mul]
    rw [e1] at ha
    have h1 : a * g ≤ L - 1 := by omega
    have h2 : a * W ≤ a * (B * g) := Nat.mul_le_mul_left a hW
    have h3 : a * (B * g) = B * (a * g) := by rw [Nat.mul_left_comm]
    have h4 : B * (a * g) ≤ B * (L - 1) := Nat.mul_le_mul_left B h1
    rw [e2]
    omega

/-- The invariant: an anchor step `t0` before the record's start, by which the work arrived exceeded
`S0` by at most `C`, and since which the engine served `B` tokens at every step. -/
abbrev Anchor (W B C : Nat) (N : Nat → Nat) (start served : Nat) : Prop :=
  ∃ t0 S0, t0 < start ∧ N t0 * W ≤ S0 + C ∧ served = S0 + B * (start - t0 - 1)

theorem anchor_bound (W B C g : Nat) (N : Nat → Nat) (start served : Nat) (hW : W ≤ B * g)
    (hN : ∀ s t, s ≤ t → N s ≤ N t ∧ (N t - N s) * g ≤ t - s + g - 1)
    (h : Anchor W B C N start served) : N start * W ≤ served + W + C := by
  obtain ⟨t0, S0, ht, hA, hS⟩ := h
  obtain ⟨hmono, hgap⟩ := hN t0 start (by omega)
  have hw := window (N start - N t0) g (start - t0) W B (by omega) hgap hW
  have hsplit : N start * W = N t0 * W + (N start - N t0) * W := by
    rw [← Nat.add_mul]; congr 1; omega
  omega

end BacklogBudget

/-- **Work conservation bounds the backlog** (the records-level argument of issue 14's result 2,
case (b)). `n` iteration records, the `i`-th starting at `start i`, serving `tokens i`, with `served i`
tokens served before it and `arrived i = N (start i)` requests arrived by its start (each of work `W`),
the arrivals at least `g` apart (`N` monotone, at most `⌈(t - s) / g⌉` of them in `(s, t]`) and
`W ≤ B · g`. Suppose nothing arrives before the first record (`N (start 0 - 1) = 0`, `0 < start 0`,
`served 0 = 0`), each record's `served` is the previous one's plus its tokens, nothing arrives strictly
between two consecutive starts but at the later one (`N (start (i + 1) - 1) = N (start i)`: the engine
idles only when empty and wakes at the next arrival), and every iteration either is a reset
(`arrived i · W ≤ served i + tokens i + C`) or serves the full budget `B` and is followed one step later.
Then every record has `arrived i · W ≤ served i + W + C`. -/
theorem BacklogBudget.conserve (W B C g n : Nat) (N start tokens served arrived : Nat → Nat)
    (hW : W ≤ B * g)
    (hN : ∀ s t, s ≤ t → N s ≤ N t ∧ (N t - N s) * g ≤ t - s + g - 1)
    (harr : ∀ i, i < n → arrived i = N (start i))
    (h0 : 0 < start 0) (hN0 : N (start 0 - 1) = 0) (hs0 : served 0 = 0)
    (hnext : ∀ i, i + 1 < n → start i < start (i + 1) ∧ N (start (i + 1) - 1) = N (start i) ∧
      served (i + 1) = served i + tokens i)
    (hstep : ∀ i, i + 1 < n → arrived i * W ≤ served i + tokens i + C ∨
      (tokens i = B ∧ start (i + 1) = start i + 1)) :
    ∀ i, i < n → arrived i * W ≤ served i + W + C := by
  have hinv : ∀ i, i < n → BacklogBudget.Anchor W B C N (start i) (served i) := by
    intro i
    induction i with
    | zero =>
      intro _
      have e : start 0 - (start 0 - 1) - 1 = 0 := by omega
      exact ⟨start 0 - 1, 0, by omega, by rw [hN0]; simp, by rw [hs0, e]; simp⟩
    | succ i ih =>
      intro hi
      obtain ⟨hlt, hidle, hsv⟩ := hnext i hi
      rcases hstep i hi with hr | ⟨hB, hst⟩
      · have e : start (i + 1) - (start (i + 1) - 1) - 1 = 0 := by omega
        refine ⟨start (i + 1) - 1, served (i + 1), by omega, ?_, by rw [e]; simp⟩
        rw [hidle, ← harr i (by omega), hsv]
        exact hr
      · obtain ⟨t0, S0, ht, hA, hS⟩ := ih (by omega)
        refine ⟨t0, S0, by omega, hA, ?_⟩
        rw [hsv, hS, hB, hst]
        have : start i + 1 - t0 - 1 = (start i - t0 - 1) + 1 := by omega
        rw [this, Nat.mul_add, Nat.mul_one]
        omega
  intro i hi
  rw [harr i hi]
  exact BacklogBudget.anchor_bound W B C g N (start i) (served i) hW hN (hinv i hi)

end Serq
