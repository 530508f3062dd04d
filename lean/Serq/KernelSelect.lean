module

public import Serq.Kernel

/-! # `queue by` admission takes a waiting hold of least keys

`select` (lean/Serq/Kernel.lean) is how the kernel picks the hold a pool's queue offers next: the head
under `queue fifo`, else, unless the head is a hold a preemption put back (`Waiter.head`), the one whose
keys are least, ties to the one that joined first (`selectIn` scans the queue keeping the best so far).
`select_least` proves what the scan gives: an index inside the queue whose waiter's keys no waiting hold's
keys come before (`keysBefore`, lexicographic, is a strict order: `keysBefore_irrefl`,
`keysBefore_trans`). It holds of every machine, so of every admission of every run (`admitWaiting` and
`retryQueue` admit `select`'s hold): with `queue by (volume)`, each admission takes a waiting request of
least volume (`Papers.svf_admits_least_volume`, examples/papers/Papers/SvfEvery.lean).
-/

@[expose] public section

namespace Serq.Kernel

theorem keysBefore_nil_left (b : List Nat) : keysBefore [] b = false := by
  cases b <;> rfl

theorem keysBefore_nil_right (a : List Nat) : keysBefore a [] = false := by
  cases a <;> rfl

/-- One key each: `a` is not before `b` when `b ≤ a`. -/
theorem keysBefore_single (a b : Nat) (h : keysBefore [a] [b] = false) : b ≤ a := by
  simp only [keysBefore, Bool.and_false, Bool.or_false, decide_eq_false_iff_not] at h
  omega

/-- One key each: `a` before `b` is `a < b`. -/
theorem keysBefore_single_lt (a b : Nat) (h : keysBefore [a] [b] = true) : a < b := by
  simp only [keysBefore, Bool.and_false, Bool.or_false, decide_eq_true_eq] at h
  exact h

/-- No keys come before themselves. -/
theorem keysBefore_irrefl : ∀ a : List Nat, keysBefore a a = false
  | [] => rfl
  | x :: xs => by simp [keysBefore, keysBefore_irrefl xs]

/-- `keysBefore` is transitive. -/
theorem keysBefore_trans : ∀ a b c : List Nat, keysBefore a b = true → keysBefore b c = true →
    keysBefore a c = true
  | [], b, _, h1, _ => by rw [keysBefore_nil_left] at h1; cases h1
  | _ :: _, [], _, h1, _ => by rw [keysBefore_nil_right] at h1; cases h1
  | _ :: _, _ :: _, [], _, h2 => by rw [keysBefore_nil_right] at h2; cases h2
  | x :: xs, y :: ys, z :: zs, h1, h2 => by
    simp only [keysBefore, Bool.or_eq_true, decide_eq_true_eq, Bool.and_eq_true, beq_iff_eq] at h1 h2 ⊢
    rcases h1 with h1 | ⟨rfl, h1⟩ <;> rcases h2 with h2 | ⟨rfl, h2⟩
    · left; omega
    · left; exact h1
    · left; exact h2
    · right; exact ⟨rfl, keysBefore_trans xs ys zs h1 h2⟩

/-- A waiting hold's keys as `select` reads them (its thread's attributes, the clock, its wait). -/
def waiterKeys (p : Program) (m : Machine) (keys : List Expr) (w : Waiter) : List Nat :=
  keysOf (m.view p w.thread) (getThread m.threads w.thread).attrs m.now (m.now - w.joined) keys

theorem getWaiter_append_left : ∀ (pre ws : List Waiter) (j : Nat), j < pre.length →
    getWaiter (pre ++ ws) j = getWaiter pre j
  | [], _, _, h => absurd h (by simp)
  | _ :: _, _, 0, _ => rfl
  | _ :: xs, ws, j + 1, h => getWaiter_append_left xs ws j (by simp at h; omega)

theorem getWaiter_append_length : ∀ (pre ws : List Waiter) (w : Waiter),
    getWaiter (pre ++ w :: ws) pre.length = w
  | [], _, _ => rfl
  | _ :: xs, ws, w => getWaiter_append_length xs ws w

/-- The scan's invariant: scanning `ws` after the waiters `pre`, with the best so far at `best` in `pre`
and no waiter of `pre` before it, `selectIn` ends at an index inside `pre ++ ws` before which no waiter's
keys come. -/
theorem selectIn_least (p : Program) (m : Machine) (keys : List Expr) :
    ∀ (ws pre : List Waiter) (best : Nat) (bk : List Nat),
      best < pre.length → waiterKeys p m keys (getWaiter pre best) = bk →
      (∀ x ∈ pre, keysBefore (waiterKeys p m keys x) bk = false) →
      selectIn p m keys ws pre.length best bk < pre.length + ws.length ∧
      ∀ x ∈ pre ++ ws, keysBefore (waiterKeys p m keys x)
        (waiterKeys p m keys (getWaiter (pre ++ ws) (selectIn p m keys ws pre.length best bk))) = false
  | [], pre, best, bk, hb, hk, hmin => by
    simp only [selectIn, List.append_nil, List.length_nil, Nat.add_zero]
    exact ⟨hb, by rw [hk]; exact hmin⟩
  | w :: ws, pre, best, bk, hb, hk, hmin => by
    have hlen : (pre ++ [w]).length = pre.length + 1 := by simp
    have happ : pre ++ [w] ++ ws = pre ++ w :: ws := by simp
    have hsel : selectIn p m keys (w :: ws) pre.length best bk =
        (if keysBefore (waiterKeys p m keys w) bk
          then selectIn p m keys ws (pre.length + 1) pre.length (waiterKeys p m keys w)
          else selectIn p m keys ws (pre.length + 1) best bk) := rfl
    rw [hsel]
    by_cases hw : keysBefore (waiterKeys p m keys w) bk = true
    · rw [if_pos hw]
      have r := selectIn_least p m keys ws (pre ++ [w]) pre.length (waiterKeys p m keys w)
        (by rw [hlen]; omega)
        (by rw [getWaiter_append_length pre [] w])
        (by
          intro x hx
          rcases List.mem_append.1 hx with hx | hx
          · cases hxw : keysBefore (waiterKeys p m keys x) (waiterKeys p m keys w)
            · rfl
            · have := keysBefore_trans _ _ _ hxw hw
              rw [hmin x hx] at this
              cases this
          · rw [List.mem_singleton.1 hx]
            exact keysBefore_irrefl _)
      rw [happ, hlen] at r
      exact ⟨by simp at r ⊢; omega, r.2⟩
    · rw [if_neg hw]
      have hw' : keysBefore (waiterKeys p m keys w) bk = false := by
        cases h : keysBefore (waiterKeys p m keys w) bk
        · rfl
        · exact absurd h hw
      have r := selectIn_least p m keys ws (pre ++ [w]) best bk
        (by rw [hlen]; omega)
        (by rw [getWaiter_append_left pre [w] best hb]; exact hk)
        (by
          intro x hx
          rcases List.mem_append.1 hx with hx | hx
          · exact hmin x hx
          · rw [List.mem_singleton.1 hx]
            exact hw')
      rw [happ, hlen] at r
      exact ⟨by simp at r ⊢; omega, r.2⟩

/-- **`queue by` admits a least hold.** In every machine, a pool `i` whose queue has keys, with a
queue `w :: ws` whose head is not a hold a preemption put back: the hold `select` offers is in the
queue, and no waiting hold's keys come before its keys. -/
theorem select_least (p : Program) (m : Machine) (i : Nat) (w : Waiter) (ws : List Waiter)
    (hkeys : getKeys p.queueKeys i ≠ []) (hhead : w.head = false) :
    select p m i (w :: ws) < ws.length + 1 ∧
    ∀ x ∈ w :: ws, keysBefore (waiterKeys p m (getKeys p.queueKeys i) x)
      (waiterKeys p m (getKeys p.queueKeys i) (getWaiter (w :: ws) (select p m i (w :: ws)))) = false := by
  cases hk : getKeys p.queueKeys i with
  | nil => exact absurd hk hkeys
  | cons k ks =>
    have hsel : select p m i (w :: ws) = selectIn p m (k :: ks) ws 1 0 (waiterKeys p m (k :: ks) w) := by
      unfold select
      rw [hk]
      simp only [hhead, Bool.false_eq_true, if_false]
      rfl
    rw [hsel]
    have r := selectIn_least p m (k :: ks) ws [w] 0 (waiterKeys p m (k :: ks) w) (by simp) rfl
      (by intro x hx; rw [List.mem_singleton.1 hx]; exact keysBefore_irrefl _)
    simp only [List.length_cons, List.length_nil, List.cons_append, List.nil_append, Nat.zero_add] at r
    exact ⟨by omega, r.2⟩

/-! ### Ties: the first of the least -/

theorem keysOf_length (v : PoolView) (attrs : List Nat) (now waited : Nat) :
    ∀ ks : List Expr, (keysOf v attrs now waited ks).length = ks.length
  | [] => rfl
  | _ :: ks => by simp [keysOf, keysOf_length v attrs now waited ks]

theorem waiterKeys_length (p : Program) (m : Machine) (keys : List Expr) (w : Waiter) :
    (waiterKeys p m keys w).length = keys.length :=
  keysOf_length _ _ _ _ keys

/-- Keys of one length are totally ordered: if `a` is not before `b` and `c` is, `c` is before `a`. -/
theorem keysBefore_of_not : ∀ a b c : List Nat, a.length = b.length → c.length = b.length →
    keysBefore a b = false → keysBefore c b = true → keysBefore c a = true
  | [], b, _, hab, _, _, h => by
    cases b with
    | nil => rw [keysBefore_nil_right] at h; cases h
    | cons _ _ => simp at hab
  | _ :: _, [], _, hab, _, _, _ => by simp at hab
  | _ :: _, _ :: _, [], _, _, _, h => by rw [keysBefore_nil_left] at h; cases h
  | x :: xs, y :: ys, z :: zs, hab, hcb, h1, h2 => by
    simp only [List.length_cons, Nat.add_right_cancel_iff] at hab hcb
    simp only [keysBefore, Bool.or_eq_true, decide_eq_true_eq, Bool.and_eq_true, beq_iff_eq,
      Bool.or_eq_false_iff, decide_eq_false_iff_not, Bool.and_eq_false_imp] at h1 h2 ⊢
    rcases h2 with h2 | ⟨rfl, h2⟩
    · left; omega
    · by_cases hx : x = z
      · subst hx
        right
        have h1' : keysBefore xs ys = false := by
          cases h : keysBefore xs ys
          · rfl
          · exact absurd (h1.2 rfl) (by rw [h]; decide)
        exact ⟨rfl, keysBefore_of_not xs ys zs hab hcb h1' h2⟩
      · left; omega

theorem getWaiter_mem' : ∀ (l : List Waiter) (j : Nat), j < l.length → getWaiter l j ∈ l
  | [], _, h => absurd h (by simp)
  | _ :: _, 0, _ => List.mem_cons_self
  | _ :: xs, j + 1, h => List.mem_cons_of_mem _ (getWaiter_mem' xs j (by simp at h; omega))

/-- The scan's tie order: besides `selectIn_least`'s invariant, every waiter before the best so far has
keys the best's come before; then every waiter before the index the scan ends at has keys that the
selected waiter's come before (ties go to the one that joined first). -/
theorem selectIn_first (p : Program) (m : Machine) (keys : List Expr) :
    ∀ (ws pre : List Waiter) (best : Nat) (bk : List Nat),
      best < pre.length → waiterKeys p m keys (getWaiter pre best) = bk →
      (∀ x ∈ pre, keysBefore (waiterKeys p m keys x) bk = false) →
      (∀ i < best, keysBefore bk (waiterKeys p m keys (getWaiter pre i)) = true) →
      ∀ i < selectIn p m keys ws pre.length best bk,
        keysBefore (waiterKeys p m keys (getWaiter (pre ++ ws) (selectIn p m keys ws pre.length best bk)))
          (waiterKeys p m keys (getWaiter (pre ++ ws) i)) = true
  | [], pre, best, bk, _, hk, _, hfirst => by
    simp only [selectIn, List.append_nil]
    intro i hi
    rw [hk]; exact hfirst i hi
  | w :: ws, pre, best, bk, hb, hk, hmin, hfirst => by
    have hlen : (pre ++ [w]).length = pre.length + 1 := by simp
    have happ : pre ++ [w] ++ ws = pre ++ w :: ws := by simp
    have hsel : selectIn p m keys (w :: ws) pre.length best bk =
        (if keysBefore (waiterKeys p m keys w) bk
          then selectIn p m keys ws (pre.length + 1) pre.length (waiterKeys p m keys w)
          else selectIn p m keys ws (pre.length + 1) best bk) := rfl
    rw [hsel]
    have hL : ∀ x, (waiterKeys p m keys x).length = keys.length := waiterKeys_length p m keys
    have hbL : bk.length = keys.length := by rw [← hk]; exact hL _
    by_cases hw : keysBefore (waiterKeys p m keys w) bk = true
    · rw [if_pos hw]
      have r := selectIn_first p m keys ws (pre ++ [w]) pre.length (waiterKeys p m keys w)
        (by rw [hlen]; omega)
        (by rw [getWaiter_append_length pre [] w])
        (by
          intro x hx
          rcases List.mem_append.1 hx with hx | hx
          · cases hxw : keysBefore (waiterKeys p m keys x) (waiterKeys p m keys w)
            · rfl
            · have := keysBefore_trans _ _ _ hxw hw
              rw [hmin x hx] at this
              cases this
          · rw [List.mem_singleton.1 hx]
            exact keysBefore_irrefl _)
        (by
          intro i hi
          rw [getWaiter_append_left pre [w] i hi]
          exact keysBefore_of_not _ _ _ ((hL _).trans hbL.symm) ((hL _).trans hbL.symm)
            (hmin _ (getWaiter_mem' pre i hi)) hw)
      rw [happ, hlen] at r
      exact r
    · rw [if_neg hw]
      have hw' : keysBefore (waiterKeys p m keys w) bk = false := by
        cases h : keysBefore (waiterKeys p m keys w) bk
        · rfl
        · exact absurd h hw
      have r := selectIn_first p m keys ws (pre ++ [w]) best bk
        (by rw [hlen]; omega)
        (by rw [getWaiter_append_left pre [w] best hb]; exact hk)
        (by
          intro x hx
          rcases List.mem_append.1 hx with hx | hx
          · exact hmin x hx
          · rw [List.mem_singleton.1 hx]
            exact hw')
        (by
          intro i hi
          rw [getWaiter_append_left pre [w] i (by omega)]
          exact hfirst i hi)
      rw [happ, hlen] at r
      exact r

/-- **Ties go to the first.** Under `select_least`'s hypotheses, every hold before the one `select`
offers in the queue has keys that the offered one's come before: the offered hold is the first of the
least (the reference's *Ties*: the one that joined first). -/
theorem select_first (p : Program) (m : Machine) (i : Nat) (w : Waiter) (ws : List Waiter)
    (hkeys : getKeys p.queueKeys i ≠ []) (hhead : w.head = false) :
    ∀ k < select p m i (w :: ws),
      keysBefore (waiterKeys p m (getKeys p.queueKeys i) (getWaiter (w :: ws) (select p m i (w :: ws))))
        (waiterKeys p m (getKeys p.queueKeys i) (getWaiter (w :: ws) k)) = true := by
  cases hk : getKeys p.queueKeys i with
  | nil => exact absurd hk hkeys
  | cons k ks =>
    have hsel : select p m i (w :: ws) = selectIn p m (k :: ks) ws 1 0 (waiterKeys p m (k :: ks) w) := by
      unfold select
      rw [hk]
      simp only [hhead, Bool.false_eq_true, if_false]
      rfl
    rw [hsel]
    have r := selectIn_first p m (k :: ks) ws [w] 0 (waiterKeys p m (k :: ks) w) (by simp) rfl
      (by intro x hx; rw [List.mem_singleton.1 hx]; exact keysBefore_irrefl _)
      (by intro i hi; omega)
    simp only [List.length_cons, List.length_nil, List.cons_append, List.nil_append, Nat.zero_add] at r
    exact r

end Serq.Kernel
