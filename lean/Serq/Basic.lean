module

/-! # Basic quantities

Token counts and block arithmetic shared by the rest of the model. A KV-cache pool
hands out memory in fixed-size blocks; a request holding `t` tokens needs
`blocksFor b t` blocks of `b` tokens each (rounded up).
-/

@[expose] public section

namespace Serq

/-- Blocks of size `b` needed to hold `t` tokens: `⌈t / b⌉` (and `0` when `b = 0`). -/
def blocksFor (b t : Nat) : Nat :=
  if b = 0 then 0 else (t + b - 1) / b

/-- The blocks hold every token. -/
theorem blocksFor_covers (b t : Nat) (hb : 0 < b) : t ≤ b * blocksFor b t := by
  unfold blocksFor
  rw [if_neg (Nat.pos_iff_ne_zero.mp hb)]
  have h := Nat.div_add_mod (t + b - 1) b
  have hm := Nat.mod_lt (t + b - 1) hb
  obtain ⟨q, hq⟩ : ∃ q, (t + b - 1) / b = q := ⟨_, rfl⟩
  obtain ⟨r, hr⟩ : ∃ r, (t + b - 1) % b = r := ⟨_, rfl⟩
  rw [hq, hr] at h
  rw [hr] at hm
  rw [hq]
  omega

/-- No block is wasted whole: for `t > 0`, one block fewer would not hold the tokens. -/
theorem blocksFor_tight (b t : Nat) (hb : 0 < b) (ht : 0 < t) :
    b * (blocksFor b t - 1) < t := by
  unfold blocksFor
  rw [if_neg (Nat.pos_iff_ne_zero.mp hb)]
  have h := Nat.div_add_mod (t + b - 1) b
  have hm := Nat.mod_lt (t + b - 1) hb
  obtain ⟨q, hq⟩ : ∃ q, (t + b - 1) / b = q := ⟨_, rfl⟩
  obtain ⟨r, hr⟩ : ∃ r, (t + b - 1) % b = r := ⟨_, rfl⟩
  rw [hq, hr] at h
  rw [hr] at hm
  rw [hq]
  cases q with
  | zero => rw [Nat.mul_zero] at h; omega
  | succ k => rw [Nat.mul_succ] at h; rw [Nat.add_sub_cancel]; omega

/-- Zero tokens need zero blocks. -/
@[simp] theorem blocksFor_zero (b : Nat) : blocksFor b 0 = 0 := by
  unfold blocksFor
  split
  · rfl
  · apply Nat.div_eq_of_lt
    omega

/-- A small table, checked by the kernel. -/
example : blocksFor 16 0 = 0 ∧ blocksFor 16 1 = 1 ∧ blocksFor 16 16 = 1 ∧ blocksFor 16 17 = 2 := by
  decide

end Serq
