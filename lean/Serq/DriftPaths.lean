module

public import Serq.DriftMachineClock

/-! # The drift chain's law over finite horizons, as a sum over arrival paths (issue 14, result 7)

`Serq.Drift` states the backlog chain (`backlog B W arrivals`: `r' = r + k·W − B` stopping at 0, `k`
drawn from the finite-support `arrivals`, a list of (weight, count) pairs over the common denominator
`den = Σ weights`), and `Serq.DriftMachineClock` drives the same step along one path of counts
(`DriftMachine.backlogAt W B a t`). Here the two meet in distribution, over every finite horizon `t`:

* **The chain's `t`-step law** (`Chain.dist c s t`): the weighted list of states after `t` steps from
  `s`, the kernel iterated (`dist (t + 1) = dist t` pushed through `c.succ`, `wbind`); its weights
  total `den ^ t` on a stochastic chain (`dist_total`).
* **The arrival paths of length `t`** (`paths arrivals t`): every list `[a₀, …, a_{t−1}]` of counts
  drawn from the support, each with the product of the weights drawn (the law of the path chain
  `pathChain`, which appends a count at each step); their weights total `den ^ t` (`paths_total`), and
  each path `p` of length `t` has in all the weight `pathWeight arrivals p = Π_i w(a_i)`, `w(k)` the
  total weight of count `k` in the support (`paths_weight`; a count listed twice appears twice).
* **The law** (`paths_backlog`): for every `t` and every `f : Nat → Nat`,
  `Σ_{(w, p) ∈ paths t} w · f(backlogAt W B (pathAt p) t) = Σ_{(w, r) ∈ dist 0 t} w · f(r)`: the
  pathwise backlog at `t` driven by the path's counts (`pathAt p i = a_i`), pushed forward by the path
  weights, is the chain's `t`-step law from backlog 0 (both scaled by `den ^ t`).

`Serq.DriftPathsMachine` and `Serq.DriftPathsLaw` carry the law to the machine; `Serq.DriftPathsHit`
the truncated hitting and return times (`hit`, `ret`).
-/

@[expose] public section

namespace Serq.Drift

/-! ## Weighted lists pushed through a kernel -/

/-- `w` times each weight of `l`, followed by `rest`. -/
def scaleApp {σ : Type} (w : Nat) : List (Nat × σ) → List (Nat × σ) → List (Nat × σ)
  | [], rest => rest
  | (v, s) :: l, rest => (w * v, s) :: scaleApp w l rest

/-- The weighted list `l` pushed through the kernel `k`: each `(w, s)` becomes `k s`, its weights
times `w`. -/
def wbind {σ τ : Type} (k : σ → List (Nat × τ)) : List (Nat × σ) → List (Nat × τ)
  | [] => []
  | (w, s) :: l => scaleApp w (k s) (wbind k l)

/-- The chain's `n`-step law from `s`: `[(1, s)]`, then pushed through the kernel `n` times
(weights over `den ^ n`). -/
def Chain.dist {σ : Type} (c : Chain σ) (s : σ) : Nat → List (Nat × σ)
  | 0 => [(1, s)]
  | n + 1 => wbind c.succ (c.dist s n)

theorem wsum_ext {σ : Type} {f g : σ → Nat} (h : ∀ x, f x = g x) (l : List (Nat × σ)) :
    wsum f l = wsum g l :=
  congrArg (wsum · l) (funext h)

/-- Functions that agree on the states of positive weight have the same weighted sum. -/
theorem wsum_congr_mem {σ : Type} {f g : σ → Nat} :
    ∀ (l : List (Nat × σ)), (∀ w s, (w, s) ∈ l → 0 < w → f s = g s) → wsum f l = wsum g l
  | [], _ => rfl
  | (w, s) :: l, h => by
    simp only [wsum]
    rw [wsum_congr_mem l (fun v x hx hv => h v x (List.mem_cons_of_mem _ hx) hv)]
    by_cases hw : w = 0
    · subst hw
      simp
    · rw [h w s List.mem_cons_self (by omega)]

theorem wsum_scaleApp {σ : Type} (f : σ → Nat) (w : Nat) :
    ∀ (l rest : List (Nat × σ)), wsum f (scaleApp w l rest) = w * wsum f l + wsum f rest
  | [], rest => by simp [scaleApp, wsum]
  | (v, s) :: l, rest => by
    simp only [scaleApp, wsum, wsum_scaleApp f w l rest, Nat.mul_add, Nat.mul_assoc]
    omega

theorem wsum_wbind {σ τ : Type} (f : τ → Nat) (k : σ → List (Nat × τ)) :
    ∀ l : List (Nat × σ), wsum f (wbind k l) = wsum (fun s => wsum f (k s)) l
  | [] => rfl
  | (w, s) :: l => by
    simp only [wbind, wsum, wsum_scaleApp, wsum_wbind f k l]

/-- One more step of the law: the expectation of `f` after `n + 1` steps is that of `f`'s one-step
expectation after `n`. -/
theorem dist_succ {σ : Type} (c : Chain σ) (s : σ) (f : σ → Nat) (n : Nat) :
    wsum f (c.dist s (n + 1)) = wsum (fun x => wsum f (c.succ x)) (c.dist s n) :=
  wsum_wbind f c.succ (c.dist s n)

/-- On a stochastic chain the `n`-step law's weights total `den ^ n`. -/
theorem dist_total {σ : Type} (c : Chain σ) (hc : c.Stochastic) (s : σ) :
    ∀ n, wsum (fun _ => 1) (c.dist s n) = c.den ^ n
  | 0 => by simp [Chain.dist, wsum]
  | n + 1 => by
    rw [dist_succ, wsum_ext (fun x => hc x), wsum_const, dist_total c hc s n, Nat.pow_succ]
    exact Nat.mul_comm _ _

theorem mem_scaleApp {σ : Type} (w : Nat) (x : Nat × σ) : ∀ (l rest : List (Nat × σ)),
    x ∈ scaleApp w l rest → (∃ v, (v, x.2) ∈ l ∧ x.1 = w * v) ∨ x ∈ rest
  | [], _, h => Or.inr h
  | (v, s) :: l, rest, h => by
    simp only [scaleApp, List.mem_cons] at h
    rcases h with rfl | h
    · exact Or.inl ⟨v, List.mem_cons_self, rfl⟩
    · rcases mem_scaleApp w x l rest h with ⟨u, hu, he⟩ | h
      · exact Or.inl ⟨u, List.mem_cons_of_mem _ hu, he⟩
      · exact Or.inr h

theorem mem_wbind {σ τ : Type} (k : σ → List (Nat × τ)) (x : Nat × τ) : ∀ (l : List (Nat × σ)),
    x ∈ wbind k l → ∃ y ∈ l, ∃ v, (v, x.2) ∈ k y.2 ∧ x.1 = y.1 * v
  | [], h => by simp [wbind] at h
  | (w, s) :: l, h => by
    rcases mem_scaleApp w x (k s) (wbind k l) h with ⟨v, hv, he⟩ | h
    · exact ⟨(w, s), List.mem_cons_self, v, hv, he⟩
    · obtain ⟨y, hy, v, hv, he⟩ := mem_wbind k x l h
      exact ⟨y, List.mem_cons_of_mem _ hy, v, hv, he⟩

/-! ## Arrival paths -/

/-- `p` with `k` appended. -/
def snoc : List Nat → Nat → List Nat
  | [], k => [k]
  | a :: p, k => a :: snoc p k

/-- The counts `a_i` of a path by time, 0 past its end. -/
def pathAt : List Nat → Nat → Nat
  | [], _ => 0
  | a :: _, 0 => a
  | _ :: p, n + 1 => pathAt p n

/-- The total weight of the support: the chain's denominator. -/
def total : List (Nat × Nat) → Nat
  | [] => 0
  | (w, _) :: l => w + total l

/-- The path `q` extended by each count of the support, with that count's weight. -/
def extend (q : List Nat) : List (Nat × Nat) → List (Nat × List Nat)
  | [] => []
  | (v, k) :: l => (v, snoc q k) :: extend q l

/-- The path chain: a path grows by one count drawn from `arrivals` at each step. -/
def pathChain (arrivals : List (Nat × Nat)) : Chain (List Nat) :=
  ⟨total arrivals, fun q => extend q arrivals⟩

/-- **The arrival paths of length `t`**, each with the product of the weights of its counts: the
path chain's `t`-step law from the empty path. -/
def paths (arrivals : List (Nat × Nat)) (t : Nat) : List (Nat × List Nat) :=
  (pathChain arrivals).dist [] t

/-- The weight of count `k` in the support (a count listed twice has both weights). -/
def countWeight (k : Nat) : List (Nat × Nat) → Nat
  | [] => 0
  | (w, j) :: l => (if j = k then w else 0) + countWeight k l

/-- **The weight of a path**: the product of its counts' weights. -/
def pathWeight (arrivals : List (Nat × Nat)) : List Nat → Nat
  | [] => 1
  | k :: p => countWeight k arrivals * pathWeight arrivals p

/-- The requests a path brings: the sum of its counts. -/
def pathSum : List Nat → Nat
  | [] => 0
  | a :: p => a + pathSum p

/-- The largest count of positive weight in the support. -/
def maxCount : List (Nat × Nat) → Nat
  | [] => 0
  | (w, k) :: l => if w = 0 then maxCount l else max k (maxCount l)

theorem total_eq : ∀ l : List (Nat × Nat), total l = wsum (fun _ => 1) l
  | [] => rfl
  | (w, k) :: l => by simp only [total, wsum, total_eq l, Nat.mul_one]

theorem countWeight_eq (k : Nat) : ∀ l : List (Nat × Nat),
    countWeight k l = wsum (fun j => if j = k then 1 else 0) l
  | [] => rfl
  | (w, j) :: l => by
    simp only [countWeight, wsum, countWeight_eq k l]
    by_cases h : j = k <;> simp [h]

theorem wsum_extend (g : List Nat → Nat) (q : List Nat) :
    ∀ l : List (Nat × Nat), wsum g (extend q l) = wsum (fun k => g (snoc q k)) l
  | [] => rfl
  | (v, k) :: l => by simp only [extend, wsum, wsum_extend g q l]

theorem pathChain_stochastic (arrivals : List (Nat × Nat)) : (pathChain arrivals).Stochastic := by
  intro q
  show wsum (fun _ => 1) (extend q arrivals) = total arrivals
  rw [wsum_extend, total_eq]

/-- A path of length `t + 1` is a path of length `t` and one more count: the sum over them is the
sum over the shorter paths of the sum over the support. -/
theorem paths_succ (arrivals : List (Nat × Nat)) (t : Nat) (g : List Nat → Nat) :
    wsum g (paths arrivals (t + 1)) = wsum (fun q => wsum (fun k => g (snoc q k)) arrivals) (paths arrivals t) := by
  show wsum g ((pathChain arrivals).dist [] (t + 1)) = _
  rw [dist_succ]
  exact wsum_ext (fun q => wsum_extend g q arrivals) _

/-- **The paths' weights total `den ^ t`.** -/
theorem paths_total (arrivals : List (Nat × Nat)) (t : Nat) :
    wsum (fun _ => 1) (paths arrivals t) = wsum (fun _ => 1) arrivals ^ t := by
  rw [← total_eq]
  exact dist_total (pathChain arrivals) (pathChain_stochastic arrivals) [] t

/-- **The chain's `t`-step law's weights total `den ^ t`.** -/
theorem backlog_dist_total (B W : Nat) (arrivals : List (Nat × Nat)) (r t : Nat) :
    wsum (fun _ => 1) ((backlog B W arrivals).dist r t) = wsum (fun _ => 1) arrivals ^ t :=
  dist_total (backlog B W arrivals) (backlog_stochastic B W arrivals) r t

theorem mem_extend (q : List Nat) (x : Nat × List Nat) : ∀ l : List (Nat × Nat),
    x ∈ extend q l → ∃ k, (x.1, k) ∈ l ∧ x.2 = snoc q k
  | [], h => by simp [extend] at h
  | (v, k) :: l, h => by
    simp only [extend, List.mem_cons] at h
    rcases h with rfl | h
    · exact ⟨k, List.mem_cons_self, rfl⟩
    · obtain ⟨j, hj, he⟩ := mem_extend q x l h
      exact ⟨j, List.mem_cons_of_mem _ hj, he⟩

theorem mem_paths_succ (arrivals : List (Nat × Nat)) (t : Nat) (x : Nat × List Nat)
    (h : x ∈ paths arrivals (t + 1)) :
    ∃ y ∈ paths arrivals t, ∃ v k, (v, k) ∈ arrivals ∧ x.1 = y.1 * v ∧ x.2 = snoc y.2 k := by
  obtain ⟨y, hy, v, hv, he⟩ := mem_wbind (pathChain arrivals).succ x _ h
  obtain ⟨k, hk, hs⟩ := mem_extend y.2 (v, x.2) arrivals hv
  exact ⟨y, hy, v, k, hk, he, hs⟩

theorem length_snoc : ∀ (p : List Nat) (k : Nat), (snoc p k).length = p.length + 1
  | [], _ => rfl
  | _ :: p, k => by simp [snoc, length_snoc p k]

theorem pathSum_snoc : ∀ (p : List Nat) (k : Nat), pathSum (snoc p k) = pathSum p + k
  | [], _ => by simp [snoc, pathSum]
  | a :: p, k => by simp only [snoc, pathSum, pathSum_snoc p k]; omega

theorem le_maxCount : ∀ (l : List (Nat × Nat)) (v k : Nat), (v, k) ∈ l → 0 < v → k ≤ maxCount l
  | [], _, _, h, _ => by simp at h
  | (w, j) :: l, v, k, h, hv => by
    simp only [maxCount]
    rcases List.mem_cons.mp h with he | h
    · simp only [Prod.mk.injEq] at he
      obtain ⟨h1, h2⟩ := he
      subst h1 h2
      rw [if_neg (by omega)]
      exact Nat.le_max_left _ _
    · have := le_maxCount l v k h hv
      split
      · exact this
      · exact Nat.le_trans this (Nat.le_max_right _ _)

/-- Every path of `paths arrivals t` has length `t`. -/
theorem paths_length (arrivals : List (Nat × Nat)) :
    ∀ (t w : Nat) (p : List Nat), (w, p) ∈ paths arrivals t → p.length = t
  | 0, w, p, h => by
    simp only [paths, Chain.dist, List.mem_cons, Prod.mk.injEq, List.not_mem_nil, or_false] at h
    rw [h.2]
    rfl
  | t + 1, w, p, h => by
    obtain ⟨y, hy, v, k, _, _, h2⟩ := mem_paths_succ arrivals t (w, p) h
    have := paths_length arrivals t y.1 y.2 hy
    dsimp only at h2
    rw [h2, length_snoc, this]

/-- A path of positive weight draws only counts of positive weight: it brings at most
`t · maxCount` requests. -/
theorem paths_sum (arrivals : List (Nat × Nat)) :
    ∀ (t w : Nat) (p : List Nat), (w, p) ∈ paths arrivals t → 0 < w → pathSum p ≤ t * maxCount arrivals
  | 0, w, p, h, _ => by
    simp only [paths, Chain.dist, List.mem_cons, Prod.mk.injEq, List.not_mem_nil, or_false] at h
    rw [h.2]
    simp [pathSum]
  | t + 1, w, p, h, hw => by
    obtain ⟨y, hy, v, k, hk, h1, h2⟩ := mem_paths_succ arrivals t (w, p) h
    dsimp only at h1 h2
    have hy0 : 0 < y.1 := Nat.pos_of_ne_zero (fun h0 => by rw [h0, Nat.zero_mul] at h1; omega)
    have hv0 : 0 < v := Nat.pos_of_ne_zero (fun h0 => by rw [h0, Nat.mul_zero] at h1; omega)
    have ih := paths_sum arrivals t y.1 y.2 hy hy0
    have hkm := le_maxCount arrivals v k hk hv0
    rw [h2, pathSum_snoc, Nat.succ_mul]
    omega

/-! ## The weight of a path -/

theorem snoc_ne_nil (p : List Nat) (k : Nat) : snoc p k ≠ [] := by
  cases p <;> simp [snoc]

theorem snoc_inj : ∀ (q p : List Nat) (k j : Nat), snoc q k = snoc p j → q = p ∧ k = j
  | [], [], _, _, h => by
    injection h with h1 _
    exact ⟨rfl, h1⟩
  | [], _ :: p, _, j, h => by
    injection h with _ h2
    exact absurd h2.symm (snoc_ne_nil p j)
  | _ :: q, [], k, _, h => by
    injection h with _ h2
    exact absurd h2 (snoc_ne_nil q k)
  | _ :: q, _ :: p, k, j, h => by
    injection h with h1 h2
    obtain ⟨e1, e2⟩ := snoc_inj q p k j h2
    exact ⟨by rw [h1, e1], e2⟩

theorem eq_snoc : ∀ (p : List Nat) (t : Nat), p.length = t + 1 → ∃ q k, p = snoc q k ∧ q.length = t
  | [], _, h => by simp at h
  | [a], t, h => ⟨[], a, rfl, by simp at h ⊢; omega⟩
  | a :: b :: p, t, h => by
    obtain ⟨q, k, h1, h2⟩ := eq_snoc (b :: p) (t - 1) (by simp at h ⊢; omega)
    refine ⟨a :: q, k, by simp [snoc, h1], ?_⟩
    simp at h ⊢
    omega

theorem pathWeight_snoc (arrivals : List (Nat × Nat)) (k : Nat) :
    ∀ p, pathWeight arrivals (snoc p k) = pathWeight arrivals p * countWeight k arrivals
  | [] => by simp [snoc, pathWeight]
  | a :: p => by simp only [snoc, pathWeight, pathWeight_snoc arrivals k p, Nat.mul_assoc]

/-- **Each path has its weight**: the weights of the entries of `paths arrivals t` equal to a path
`p` of length `t` add up to `pathWeight arrivals p`, the product of its counts' weights. -/
theorem paths_weight (arrivals : List (Nat × Nat)) : ∀ (t : Nat) (p : List Nat), p.length = t →
    wsum (fun q => if q = p then 1 else 0) (paths arrivals t) = pathWeight arrivals p
  | 0, p, h => by
    cases p with
    | nil => simp [paths, Chain.dist, wsum, pathWeight]
    | cons a p => simp at h
  | t + 1, p, h => by
    obtain ⟨q, k, rfl, hq⟩ := eq_snoc p t h
    have e : ∀ q', wsum (fun j => if snoc q' j = snoc q k then 1 else 0) arrivals
        = countWeight k arrivals * (if q' = q then 1 else 0) := by
      intro q'
      by_cases hq' : q' = q
      · subst hq'
        rw [countWeight_eq, if_pos rfl, Nat.mul_one]
        apply wsum_ext
        intro j
        by_cases hj : j = k
        · simp [hj]
        · have : snoc q' j ≠ snoc q' k := fun h => hj (snoc_inj _ _ _ _ h).2
          simp [hj, this]
      · rw [if_neg hq', Nat.mul_zero, wsum_ext (g := fun _ => 0), wsum_const, Nat.zero_mul]
        intro j
        have : snoc q' j ≠ snoc q k := fun h => hq' (snoc_inj _ _ _ _ h).1
        simp [this]
    calc wsum (fun q' => if q' = snoc q k then 1 else 0) (paths arrivals (t + 1))
        = wsum (fun q' => wsum (fun j => if snoc q' j = snoc q k then 1 else 0) arrivals)
            (paths arrivals t) := paths_succ arrivals t _
      _ = wsum (fun q' => countWeight k arrivals * (if q' = q then 1 else 0)) (paths arrivals t) :=
          wsum_ext e _
      _ = countWeight k arrivals * pathWeight arrivals q := by
          rw [wsum_mul, paths_weight arrivals t q hq]
      _ = pathWeight arrivals (snoc q k) := by
          rw [pathWeight_snoc, Nat.mul_comm]

/-! ## The law of the backlog at a horizon -/

theorem backlogAt_congr (W B : Nat) (a b : Nat → Nat) : ∀ t, (∀ s, s < t → a s = b s) →
    DriftMachine.backlogAt W B a t = DriftMachine.backlogAt W B b t
  | 0, _ => rfl
  | t + 1, h => by
    simp only [DriftMachine.backlogAt]
    rw [backlogAt_congr W B a b t (fun s hs => h s (by omega)), h t (by omega)]

theorem pathAt_snoc_lt : ∀ (p : List Nat) (k s : Nat), s < p.length → pathAt (snoc p k) s = pathAt p s
  | [], _, _, h => by simp at h
  | _ :: _, _, 0, _ => rfl
  | _ :: p, k, s + 1, h => by
    simp only [snoc, pathAt]
    exact pathAt_snoc_lt p k s (by simp at h; omega)

theorem pathAt_snoc_length : ∀ (p : List Nat) (k : Nat), pathAt (snoc p k) p.length = k
  | [], _ => rfl
  | _ :: p, k => by
    simp only [snoc, List.length_cons, pathAt]
    exact pathAt_snoc_length p k

/-- The backlog driven by a path one count longer: the chain's step with that count. -/
theorem backlogAt_snoc (W B : Nat) (p : List Nat) (k : Nat) :
    DriftMachine.backlogAt W B (pathAt (snoc p k)) (p.length + 1)
      = DriftMachine.backlogAt W B (pathAt p) p.length + k * W - B := by
  show DriftMachine.backlogAt W B (pathAt (snoc p k)) p.length + pathAt (snoc p k) p.length * W - B = _
  rw [backlogAt_congr W B _ (pathAt p) p.length (fun s hs => pathAt_snoc_lt p k s hs), pathAt_snoc_length]

/-- **The pathwise backlog, pushed forward by the path weights, is the chain's `t`-step law** (issue
14, result 7): for every horizon `t` and every `f : Nat → Nat`, the weighted sum over the arrival
paths of length `t` of `f` of the backlog at `t` driven by the path's counts equals the weighted sum
of `f` over the chain's `t`-step law from backlog 0 (`backlog B W arrivals`; both sides in the scale
`den ^ t`, `paths_total`, `backlog_dist_total`). -/
theorem paths_backlog (B W : Nat) (arrivals : List (Nat × Nat)) : ∀ (t : Nat) (f : Nat → Nat),
    wsum (fun p => f (DriftMachine.backlogAt W B (pathAt p) t)) (paths arrivals t)
      = wsum f ((backlog B W arrivals).dist 0 t)
  | 0, f => by simp [paths, Chain.dist, wsum, DriftMachine.backlogAt]
  | t + 1, f => by
    calc wsum (fun p => f (DriftMachine.backlogAt W B (pathAt p) (t + 1))) (paths arrivals (t + 1))
        = wsum (fun q => wsum (fun k => f (DriftMachine.backlogAt W B (pathAt (snoc q k)) (t + 1))) arrivals)
            (paths arrivals t) := paths_succ arrivals t _
      _ = wsum (fun q => wsum (fun k => f (DriftMachine.backlogAt W B (pathAt q) t + k * W - B)) arrivals)
            (paths arrivals t) := by
          apply wsum_congr_mem
          intro w q hq _
          have hl := paths_length arrivals t w q hq
          apply wsum_ext
          intro k
          rw [← hl, backlogAt_snoc]
      _ = wsum (fun r => wsum (fun k => f (r + k * W - B)) arrivals) ((backlog B W arrivals).dist 0 t) :=
          paths_backlog B W arrivals t (fun r => wsum (fun k => f (r + k * W - B)) arrivals)
      _ = wsum f ((backlog B W arrivals).dist 0 (t + 1)) := by
          rw [dist_succ]
          exact wsum_ext (fun r => (wsum_nextBacklog B W r f arrivals).symm) _

/-- Two counts, 0 or 1, with weight 1 each: the four paths of length 2. -/
example : paths [(1, 0), (1, 1)] 2 = [(1, [0, 0]), (1, [0, 1]), (1, [1, 0]), (1, [1, 1])] := by decide

/-- Budget 1, requests of 2 tokens, none or one per iteration with weight 1 each: after two steps
from 0 the backlog is 0, 1, 0 or 2 (each with weight 1). -/
example : (backlog 1 2 [(1, 0), (1, 1)]).dist 0 2 = [(1, 0), (1, 1), (1, 0), (1, 2)] := by decide

end Serq.Drift
