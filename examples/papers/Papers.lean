module

public import Serq

/-! # Claims from papers

The root of the `Papers` library. Each claim is stated with the `Serq` model and
proved; for now, one claim about paged KV-cache allocation.
-/

@[expose] public section

namespace Papers

open Serq

/-- Paged attention wastes less than one block per request: the memory allocated
for `t > 0` tokens in blocks of `b` exceeds `t` by less than `b` tokens. -/
theorem paged_waste_lt_block (b t : Nat) (hb : 0 < b) (ht : 0 < t) :
    b * blocksFor b t - t < b := by
  have h1 := blocksFor_covers b t hb
  have h2 := blocksFor_tight b t hb ht
  obtain ⟨q, hq⟩ : ∃ q, blocksFor b t = q := ⟨_, rfl⟩
  rw [hq] at h1 h2 ⊢
  cases q with
  | zero => rw [Nat.mul_zero] at h1; omega
  | succ k =>
    rw [Nat.mul_succ] at h1 ⊢
    rw [Nat.add_sub_cancel] at h2
    omega

end Papers
