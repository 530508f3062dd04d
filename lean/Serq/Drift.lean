module

/-! # Positive recurrence by a drift argument, over the natural numbers (issue 14, result 7)

Foster's criterion for Markov chains whose steps have finitely many outcomes, stated and proved
without real numbers (Mathlib is not available offline): every probability is a natural weight over a
common denominator, and every expectation is kept multiplied by a power of that denominator.

* **A chain** (`Chain`): a denominator `den` and, for each state, its successors as a finite list of
  (weight, state) pairs. It is *stochastic* when every list's weights sum to `den`
  (`Chain.Stochastic`); the probability of a successor is its weight over `den`. Successors may
  repeat (their weights add).
* **Truncated expected hitting time** (`hit`): `hit c A n s` is `den ^ n` times the expected value of
  `min(τ, n)`, where `τ` is the first time `t ≥ 0` at which the chain started at `s` is in the set `A`
  (`0` when `s ∈ A`). It is the recursion `E₀ = 0`, `Eₙ₊₁(s) = 0` on `A` and `1 + Σ (w / den) · Eₙ(s')`
  off it, multiplied through by `den ^ (n + 1)`. `ret c A (n + 1) s` is the same for the *return*
  time `τ⁺ ≥ 1` (the first step is taken even from `A`).
* **The drift lemma** (`hit_le_of_drift`): if off `A` a function `V ≥ 0` decreases in expectation by
  `e / den` at every step (`Σ w · V(s') + e ≤ den · V(s)`), then `e · hit c A n s ≤ den ^ (n + 1) · V(s)`
  for every `n`: the expected hitting time of `A` is at most `den · V(s) / e`, whatever the
  truncation. With `hit_mono` (`den · hit n ≤ hit (n + 1)`: the truncated expectations grow with `n`)
  the expected hitting time, their limit, is finite and has that bound; `ret_le_of_drift` bounds the
  expected return time to `A` the same way: `τ⁺ ≤ 1 + Σ w · V(s') / e` in expectation. A state `A`
  returns to in finite expected time is positive recurrent.
* **The budget server's backlog** (`backlog`, `empty_positive_recurrent`): the tokens a server with a
  budget of `B` tokens per iteration has left after each iteration, when at each iteration `k`
  requests of `W` tokens each arrive with weight `p k` (a finite list of (weight, k) pairs) and the
  iteration serves `B` tokens or everything it has (the work-conserving batch of
  `Serq.full_or_short`): `r' = r + k·W − B`, stopping at 0. If the mean work per iteration is below
  the budget (`Σ p·k·W < den · B`) and an iteration with no arrival has positive weight (`p 0 > 0`,
  without which the backlog after an iteration is never 0 once work arrives at every one), the empty
  backlog is positive recurrent: from backlog `r`, the expected number of iterations until it is 0 is
  at most `den · (r + K) / (den · B − Σ p·k·W)` for any `K` with `den · B ≤ K · p 0`, and from 0 the
  expected return time is at most `1 + Σ p · V(k·W − B) / (den · B − Σ p·k·W)`
  (`V r = r + K` for `r > 0`, `V 0 = 0`: the Lyapunov function of the proof).

What a reader must trust: that `hit` and `ret` are the truncated expectations they are said to be (the
recursion above, which `hit_geometric` checks on a chain whose hitting time is geometric), and that the
backlog chain is the system meant. It is the token-level model of a work-conserving budget server
(the model in which Dai et al. 2025 state stability); it is not yet tied to `Serq.Exec`'s machine,
whose decodes take one token per request per iteration, so that a backlog of decodes can leave the
budget idle: that connection (the Sarathi program's machine as the chain's states) is left open
(`docs/lean.md`, issue 14).
-/

@[expose] public section

namespace Serq.Drift

/-- The weighted sum `Σ w · f(s)` over a list of (weight, state) pairs. -/
def wsum {σ : Type} (f : σ → Nat) : List (Nat × σ) → Nat
  | [] => 0
  | (w, s) :: l => w * f s + wsum f l

/-- A Markov chain with finitely many successors per state, weights over a common denominator. -/
structure Chain (σ : Type) where
  den : Nat
  succ : σ → List (Nat × σ)

/-- Every state's successors' weights sum to the denominator: they are probabilities. -/
def Chain.Stochastic {σ : Type} (c : Chain σ) : Prop :=
  ∀ s, wsum (fun _ => 1) (c.succ s) = c.den

/-- `den ^ n` times the expected `min(τ, n)`, `τ` the first time (from 0) the chain is in `A`. -/
def hit {σ : Type} (c : Chain σ) (A : σ → Bool) : Nat → σ → Nat
  | 0, _ => 0
  | n + 1, s => if A s then 0 else c.den ^ (n + 1) + wsum (hit c A n) (c.succ s)

/-- `den ^ n` times the expected `min(τ⁺, n)`, `τ⁺` the first time from 1 the chain is in `A`. -/
def ret {σ : Type} (c : Chain σ) (A : σ → Bool) : Nat → σ → Nat
  | 0, _ => 0
  | n + 1, s => c.den ^ (n + 1) + wsum (hit c A n) (c.succ s)

/-! ## Weighted sums -/

theorem wsum_mul {σ : Type} (k : Nat) (f : σ → Nat) :
    ∀ l : List (Nat × σ), wsum (fun x => k * f x) l = k * wsum f l
  | [] => by simp [wsum]
  | (w, s) :: l => by
    simp only [wsum, wsum_mul k f l]
    rw [Nat.mul_add, Nat.mul_left_comm w k]

theorem wsum_add {σ : Type} (f g : σ → Nat) :
    ∀ l : List (Nat × σ), wsum (fun x => f x + g x) l = wsum f l + wsum g l
  | [] => by simp [wsum]
  | (w, s) :: l => by
    simp only [wsum, wsum_add f g l, Nat.mul_add]
    omega

theorem wsum_const {σ : Type} (k : Nat) :
    ∀ l : List (Nat × σ), wsum (fun _ => k) l = k * wsum (fun _ => 1) l
  | [] => by simp [wsum]
  | (w, s) :: l => by
    simp only [wsum, wsum_const k l, Nat.mul_one, Nat.mul_add]
    rw [Nat.mul_comm w k]

theorem wsum_mono {σ : Type} {f g : σ → Nat} (h : ∀ x, f x ≤ g x) :
    ∀ l : List (Nat × σ), wsum f l ≤ wsum g l
  | [] => Nat.le_refl _
  | (w, s) :: l => by
    simp only [wsum]
    exact Nat.add_le_add (Nat.mul_le_mul_left w (h s)) (wsum_mono h l)

/-! ## The drift lemma -/

/-- The truncated expectations grow with the truncation (in the common scale `den ^ (n + 1)`), so
they have a limit, the expected hitting time, finite when they are bounded. -/
theorem hit_mono {σ : Type} (c : Chain σ) (A : σ → Bool) :
    ∀ n s, c.den * hit c A n s ≤ hit c A (n + 1) s
  | 0, s => by simp [hit]
  | n + 1, s => by
    have ih : wsum (fun x => c.den * hit c A n x) (c.succ s) ≤ wsum (hit c A (n + 1)) (c.succ s) :=
      wsum_mono (fun x => hit_mono c A n x) _
    rw [wsum_mul] at ih
    simp only [hit]
    cases A s
    · simp only [Bool.false_eq_true, if_false]
      rw [Nat.mul_add, ← Nat.pow_succ']
      exact Nat.add_le_add_left ih _
    · simp

/-- On a stochastic chain the truncated expectation is at most the truncation: `E min(τ, n) ≤ n`. -/
theorem hit_le_steps {σ : Type} (c : Chain σ) (A : σ → Bool) (hc : c.Stochastic) :
    ∀ n s, hit c A n s ≤ n * c.den ^ n
  | 0, s => by simp [hit]
  | n + 1, s => by
    have ih : wsum (hit c A n) (c.succ s) ≤ wsum (fun _ => n * c.den ^ n) (c.succ s) :=
      wsum_mono (fun x => hit_le_steps c A hc n x) _
    rw [wsum_const, hc s] at ih
    simp only [hit]
    split
    · exact Nat.zero_le _
    · have hpow : n * c.den ^ n * c.den = n * c.den ^ (n + 1) := by rw [Nat.pow_succ, Nat.mul_assoc]
      rw [hpow] at ih
      rw [Nat.succ_mul, Nat.add_comm (n * c.den ^ (n + 1))]
      exact Nat.add_le_add_left ih _

/-- **Foster's drift criterion**, truncated: if off `A` the function `V` falls by `e / den` in
expectation at every step, the expected time to reach `A` from `s` is at most `den · V(s) / e`. -/
theorem hit_le_of_drift {σ : Type} (c : Chain σ) (A : σ → Bool) (V : σ → Nat) (e : Nat)
    (drift : ∀ s, A s = false → wsum V (c.succ s) + e ≤ c.den * V s) :
    ∀ n s, e * hit c A n s ≤ c.den ^ (n + 1) * V s
  | 0, s => by simp [hit]
  | n + 1, s => by
    have ih : wsum (fun x => e * hit c A n x) (c.succ s) ≤ wsum (fun x => c.den ^ (n + 1) * V x) (c.succ s) :=
      wsum_mono (fun x => hit_le_of_drift c A V e drift n x) _
    rw [wsum_mul, wsum_mul] at ih
    simp only [hit]
    cases hA : A s
    · simp only [Bool.false_eq_true, if_false]
      have hd := drift s hA
      calc e * (c.den ^ (n + 1) + wsum (hit c A n) (c.succ s))
          = c.den ^ (n + 1) * e + e * wsum (hit c A n) (c.succ s) := by
            rw [Nat.mul_add, Nat.mul_comm e (c.den ^ (n + 1))]
        _ ≤ c.den ^ (n + 1) * e + c.den ^ (n + 1) * wsum V (c.succ s) := Nat.add_le_add_left ih _
        _ = c.den ^ (n + 1) * (wsum V (c.succ s) + e) := by rw [← Nat.mul_add, Nat.add_comm e]
        _ ≤ c.den ^ (n + 1) * (c.den * V s) := Nat.mul_le_mul_left _ hd
        _ = c.den ^ (n + 1 + 1) * V s := by
            rw [Nat.pow_succ c.den (n + 1), Nat.mul_assoc]
    · simp

/-- The expected return time to `A`, under the same drift: at most `1 + Σ w · V(s') / e` (in the scale
`den ^ (n + 1)`, whatever the truncation `n + 1`). -/
theorem ret_le_of_drift {σ : Type} (c : Chain σ) (A : σ → Bool) (V : σ → Nat) (e : Nat)
    (drift : ∀ s, A s = false → wsum V (c.succ s) + e ≤ c.den * V s) (n : Nat) (s : σ) :
    e * ret c A (n + 1) s ≤ c.den ^ (n + 1) * (e + wsum V (c.succ s)) := by
  have ih : wsum (fun x => e * hit c A n x) (c.succ s) ≤ wsum (fun x => c.den ^ (n + 1) * V x) (c.succ s) :=
    wsum_mono (fun x => hit_le_of_drift c A V e drift n x) _
  rw [wsum_mul, wsum_mul] at ih
  simp only [ret]
  rw [Nat.mul_add, Nat.mul_add, Nat.mul_comm e (c.den ^ (n + 1))]
  exact Nat.add_le_add_left ih _

/-- A check of the definition: a state that leaves for `A` with probability 1/2 at every step has a
geometric hitting time, `E min(τ, n) = 2 − 2^(1 − n)`, which is `2 ^ (n + 1) − 2` in the scale `2 ^ n`. -/
def geometric : Chain Nat := ⟨2, fun s => if s = 0 then [(2, 0)] else [(1, 0), (1, s)]⟩

theorem hit_geometric :
    (List.range 8).map (hit geometric (· == 0) · 1) = (List.range 8).map (fun n => 2 ^ (n + 1) - 2) := by
  decide

/-! ## The budget server's backlog -/

/-- The backlog after the next iteration, for each arrival count `k` of the weighted list: `k`
requests of `W` tokens join the backlog `r`, and the iteration serves `B` of them or all. -/
def nextBacklog (B W r : Nat) : List (Nat × Nat) → List (Nat × Nat)
  | [] => []
  | (w, k) :: l => (w, r + k * W - B) :: nextBacklog B W r l

/-- The backlog chain: arrivals `arrivals` (weight, count) pairs, their weights its denominator. -/
def backlog (B W : Nat) (arrivals : List (Nat × Nat)) : Chain Nat :=
  ⟨wsum (fun _ => 1) arrivals, fun r => nextBacklog B W r arrivals⟩

/-- The Lyapunov function: the backlog, plus `K` unless it is empty. -/
def lyapunov (K r : Nat) : Nat := if r = 0 then 0 else r + K

theorem backlog_stochastic (B W : Nat) (arrivals : List (Nat × Nat)) : (backlog B W arrivals).Stochastic := by
  intro r
  show wsum (fun _ => 1) (nextBacklog B W r arrivals) = wsum (fun _ => 1) arrivals
  induction arrivals with
  | nil => rfl
  | cons a l ih => obtain ⟨w, k⟩ := a; simp only [nextBacklog, wsum, ih]

theorem wsum_nextBacklog (B W r : Nat) (f : Nat → Nat) :
    ∀ l : List (Nat × Nat), wsum f (nextBacklog B W r l) = wsum (fun k => f (r + k * W - B)) l
  | [] => rfl
  | (w, k) :: l => by simp only [nextBacklog, wsum, wsum_nextBacklog B W r f l]

/-- The weights of the counts `k > 0` and of `k = 0` make up the denominator. -/
theorem wsum_split (l : List (Nat × Nat)) :
    wsum (fun k => if k = 0 then 0 else 1) l + wsum (fun k => if k = 0 then 1 else 0) l = wsum (fun _ => 1) l := by
  rw [← wsum_add]
  exact congrArg (wsum · l) (funext fun k => by split <;> rfl)

/-- The drift of the backlog chain off the empty backlog: with `M` the mean work per iteration times
the denominator, `p0` the weight of no arrival, and `den · B ≤ K · p0`, the Lyapunov function falls by
`(den · B − M) / den` in expectation. -/
theorem backlog_drift (B W K : Nat) (arrivals : List (Nat × Nat))
    (hM : wsum (fun k => k * W) arrivals ≤ wsum (fun _ => 1) arrivals * B)
    (hK : wsum (fun _ => 1) arrivals * B ≤ K * wsum (fun k => if k = 0 then 1 else 0) arrivals)
    (r : Nat) (hr : (r == 0) = false) :
    wsum (lyapunov K) ((backlog B W arrivals).succ r)
        + (wsum (fun _ => 1) arrivals * B - wsum (fun k => k * W) arrivals)
      ≤ (backlog B W arrivals).den * lyapunov K r := by
  have hr0 : r ≠ 0 := by simpa using hr
  show wsum (lyapunov K) (nextBacklog B W r arrivals) + _ ≤ wsum (fun _ => 1) arrivals * lyapunov K r
  rw [wsum_nextBacklog]
  simp only [lyapunov, hr0, if_false]
  -- the denominator, the mean work, the weights of arrivals and of none
  generalize hD : wsum (fun _ => 1) arrivals = D at hM hK ⊢
  generalize hMw : wsum (fun k => k * W) arrivals = M at hM ⊢
  by_cases hB : B ≤ r
  · -- a full iteration whatever arrives: the backlog falls by B and grows by the work
    have hle : wsum (fun k => lyapunov K (r + k * W - B)) arrivals
        ≤ wsum (fun k => (r - B + K) + k * W) arrivals :=
      wsum_mono (fun k => by unfold lyapunov; split <;> omega) _
    rw [wsum_add, wsum_const, hD, hMw] at hle
    have key : (r - B + K) * D + D * B = D * (r + K) := by
      rw [Nat.mul_comm D B, ← Nat.add_mul, Nat.mul_comm]
      congr 1
      omega
    have : wsum (fun k => lyapunov K (r + k * W - B)) arrivals + (D * B - M) ≤ (r - B + K) * D + D * B := by
      omega
    exact Nat.le_trans (Nat.le_trans (by simp only [lyapunov]; exact Nat.le_refl _) this) (Nat.le_of_eq key)
  · -- a backlog below the budget is served whole: what is left is at most the arrivals' work,
    -- and nothing when none arrives
    have hle : wsum (fun k => lyapunov K (r + k * W - B)) arrivals
        ≤ wsum (fun k => k * W + K * (if k = 0 then 0 else 1)) arrivals :=
      wsum_mono (fun k => by
        unfold lyapunov
        by_cases hk : k = 0
        · subst hk; simp only [Nat.zero_mul, Nat.add_zero, if_true]; split <;> omega
        · simp only [hk, if_false, Nat.mul_one]; split <;> omega) _
    rw [wsum_add, wsum_mul, hMw] at hle
    have hsplit := wsum_split arrivals
    rw [hD] at hsplit
    generalize wsum (fun k => if k = 0 then 0 else 1) arrivals = nz at hle hsplit
    generalize wsum (fun k => if k = 0 then 1 else 0) arrivals = p0 at hK hsplit
    -- K·nz + D·B ≤ K·nz + K·p0 = K·D ≤ D·(r + K)
    have h1 : K * nz + K * p0 = D * K := by rw [← Nat.mul_add, hsplit, Nat.mul_comm]
    have h2 : D * K ≤ D * (r + K) := Nat.mul_le_mul_left D (Nat.le_add_left K r)
    have : wsum (fun k => lyapunov K (r + k * W - B)) arrivals + (D * B - M) ≤ K * nz + D * B := by omega
    simp only [lyapunov] at this ⊢
    omega

/-- **The empty backlog is positive recurrent** when the mean work per iteration is below the budget
and an iteration with no arrival has positive weight: from backlog `r` the expected number of
iterations until it is empty is at most `den · lyapunov K r / (den · B − M)` (`M` the mean work times
`den`), and from the empty backlog the expected return time is at most
`1 + Σ p · lyapunov K (k·W − B) / (den · B − M)`, whatever the truncation `n`. -/
theorem empty_positive_recurrent (B W K : Nat) (arrivals : List (Nat × Nat))
    (hM : wsum (fun k => k * W) arrivals < wsum (fun _ => 1) arrivals * B)
    (hK : wsum (fun _ => 1) arrivals * B ≤ K * wsum (fun k => if k = 0 then 1 else 0) arrivals) (n : Nat) :
    (∀ r, (wsum (fun _ => 1) arrivals * B - wsum (fun k => k * W) arrivals) * hit (backlog B W arrivals) (· == 0) n r
        ≤ wsum (fun _ => 1) arrivals ^ (n + 1) * lyapunov K r)
    ∧ (wsum (fun _ => 1) arrivals * B - wsum (fun k => k * W) arrivals) * ret (backlog B W arrivals) (· == 0) (n + 1) 0
        ≤ wsum (fun _ => 1) arrivals ^ (n + 1) * ((wsum (fun _ => 1) arrivals * B - wsum (fun k => k * W) arrivals)
            + wsum (fun k => lyapunov K (k * W - B)) arrivals)
    ∧ 0 < wsum (fun _ => 1) arrivals * B - wsum (fun k => k * W) arrivals := by
  have drift := backlog_drift B W K arrivals (Nat.le_of_lt hM) hK
  refine ⟨fun r => hit_le_of_drift _ _ _ _ drift n r, ?_, by omega⟩
  have h := ret_le_of_drift _ _ _ _ drift n 0
  have hs : wsum (lyapunov K) ((backlog B W arrivals).succ 0) = wsum (fun k => lyapunov K (k * W - B)) arrivals := by
    show wsum (lyapunov K) (nextBacklog B W 0 arrivals) = _
    rw [wsum_nextBacklog]
    simp only [Nat.zero_add]
  rw [hs] at h
  exact h

/-- An instance: a budget of 4 tokens, requests of 3 tokens, none, one or two arriving with
probabilities 1/2, 1/4, 1/4 (mean work 2.25 < 4), `K = 8` (`den · B = 16 ≤ 8 · 2`). -/
example : ∀ n r, (4 * 4 - 9) * hit (backlog 4 3 [(2, 0), (1, 1), (1, 2)]) (· == 0) n r ≤ 4 ^ (n + 1) * lyapunov 8 r :=
  fun n r => (empty_positive_recurrent 4 3 8 [(2, 0), (1, 1), (1, 2)] (by decide) (by decide) n).1 r

end Serq.Drift
