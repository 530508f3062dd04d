module

/-! # The token rate with an iteration's cost: `served · T ≤ R · now`

Dai et al. 2025 (Theorem 2(a)) and Bari et al. (Theorem 1) bound the rate at which an engine with
a token budget `R` serves tokens by the time `T` of a full iteration. `Serq.Rate` proves it on the
step clock (`execute (1)`); this module proves it for an iteration that lasts the program's
`execute` expression in `batch.tokens`, on any sequence of iterations that

* schedules at most `R` tokens each (`within_budget`), and
* starts each iteration no earlier than the one before it ends (`Timed`: its start plus its cost),

when the cost satisfies the rate condition `x · T ≤ R · cost x` for every `x ≤ R` (a short
iteration is no faster per token than a full one). Then before every iteration the tokens served
so far satisfy `served · T ≤ R · start` (`rate_of_timed`). The two costs the papers use meet the
condition:

* affine, `cost x = a + b·x`, with `T = a + b·R` (`affine_rate`);
* tiled, `cost x = a·⌈x / g⌉ + b·x` with the budget a multiple of the tile, `R = g·m`, and
  `T = a·m + b·R` (`tiled_rate`; with a budget that is no multiple of the tile the condition
  fails: `g = 128`, `R = 130`, `x = 128` serves 128 tokens in one tile's time).

What ties this to a program: the records of the program's engine must be `Timed` by its
`execute` and within its budget. The engine model (`Serq.Exec`) has the step clock only; the kernel
interpreter's engines (`Serq.Kernel`) have the cost. Both are proved of every kernel run, at any
fuel: within the budget for an engine whose `tokens cap` is a constant
(`Serq.Kernel.runProgram_within_budget`, in `Serq.KernelBudget`), `Timed` for an engine whose
`execute` reads only the batch (`Serq.Kernel.runProgram_timed`, in `Serq.KernelTimed`), and with them
the rate of a program's engine, `runProgram_affine_token_rate` and `runProgram_tiled_token_rate`
(issue 14, result 1).
-/

@[expose] public section

namespace Serq.RateCost

/-- An iteration as a claim reads it: when it started and the tokens it scheduled. -/
structure Iteration where
  start : Nat
  tokens : Nat
  deriving DecidableEq, Repr

/-- Each iteration starts no earlier than the one before it ends, `cost` being an iteration's
duration as a function of its tokens (the program's `execute` in `batch.tokens`). -/
def Timed (cost : Nat → Nat) : List Iteration → Prop
  | [] => True
  | [_] => True
  | a :: b :: rest => a.start + cost a.tokens ≤ b.start ∧ Timed cost (b :: rest)

instance decTimed (cost : Nat → Nat) : (its : List Iteration) → Decidable (Timed cost its)
  | [] => isTrue trivial
  | [_] => isTrue trivial
  | a :: b :: rest =>
    have : Decidable (Timed cost (b :: rest)) := decTimed cost (b :: rest)
    inferInstanceAs (Decidable (a.start + cost a.tokens ≤ b.start ∧ Timed cost (b :: rest)))

/-- The claim `served * T <= R * now` at every iteration, `served` being the tokens of the
iterations before it, `served` tokens having been served before the first. -/
def RateHolds (T R : Nat) : Nat → List Iteration → Prop
  | _, [] => True
  | served, i :: rest => served * T ≤ R * i.start ∧ RateHolds T R (served + i.tokens) rest

instance decRateHolds (T R : Nat) : (served : Nat) → (its : List Iteration) → Decidable (RateHolds T R served its)
  | _, [] => isTrue trivial
  | served, i :: rest =>
    have : Decidable (RateHolds T R (served + i.tokens) rest) := decRateHolds T R (served + i.tokens) rest
    inferInstanceAs (Decidable (served * T ≤ R * i.start ∧ RateHolds T R (served + i.tokens) rest))

/-- The token rate: iterations within the budget, each lasting at least its cost, with a cost
that meets the rate condition, keep `served · T ≤ R · start` from a first iteration that does. -/
theorem rate_of_timed (cost : Nat → Nat) (T R : Nat) (hrate : ∀ x, x ≤ R → x * T ≤ R * cost x) :
    ∀ (its : List Iteration) (served : Nat), (∀ i ∈ its, i.tokens ≤ R) → Timed cost its →
      (∀ i, its.head? = some i → served * T ≤ R * i.start) → RateHolds T R served its
  | [], _, _, _, _ => trivial
  | [a], _, _, _, h0 => ⟨h0 a rfl, trivial⟩
  | a :: b :: rest, served, hb, ht, h0 => by
    refine ⟨h0 a rfl, rate_of_timed cost T R hrate (b :: rest) (served + a.tokens)
      (fun i hi => hb i (List.mem_cons_of_mem _ hi)) ht.2 ?_⟩
    intro i hi
    simp only [List.head?_cons, Option.some.injEq] at hi
    subst hi
    have h1 := h0 a rfl
    have h2 := hrate a.tokens (hb a List.mem_cons_self)
    have h3 : R * (a.start + cost a.tokens) ≤ R * b.start := Nat.mul_le_mul_left R ht.1
    rw [Nat.add_mul]
    rw [Nat.mul_add] at h3
    omega

/-- From an empty engine: nothing served before the first iteration. -/
theorem rate_from_start (cost : Nat → Nat) (T R : Nat) (hrate : ∀ x, x ≤ R → x * T ≤ R * cost x)
    (its : List Iteration) (hb : ∀ i ∈ its, i.tokens ≤ R) (ht : Timed cost its) : RateHolds T R 0 its :=
  rate_of_timed cost T R hrate its 0 hb ht (fun _ _ => by simp)

/-- The affine cost `a + b·x` meets the rate condition with `T = a + b·R`. -/
theorem affine_rate (a b R x : Nat) (hx : x ≤ R) : x * (a + b * R) ≤ R * (a + b * x) := by
  rw [Nat.mul_add, Nat.mul_add]
  have h1 : x * a ≤ R * a := Nat.mul_le_mul_right a hx
  have h2 : x * (b * R) = R * (b * x) := by
    rw [Nat.mul_comm b R, Nat.mul_comm b x, ← Nat.mul_assoc, Nat.mul_comm x R, Nat.mul_assoc]
  omega

/-- `x` tokens fit in `⌈x / g⌉` tiles of `g`. -/
theorem le_tiles (x g : Nat) (hg : 0 < g) : x ≤ g * ((x + g - 1) / g) := by
  have h1 := Nat.div_add_mod (x + g - 1) g
  have h2 := Nat.mod_lt (x + g - 1) hg
  generalize (x + g - 1) / g = q at *
  generalize (x + g - 1) % g = r at *
  omega

/-- The tiled cost `a·⌈x / g⌉ + b·x` meets the rate condition with a budget of `m` tiles,
`R = g·m`, and `T = a·m + b·R`, for every `x` (an iteration pays for whole tiles). -/
theorem tiled_rate (a b g m x : Nat) (hg : 0 < g) :
    x * (a * m + b * (g * m)) ≤ (g * m) * (a * ((x + g - 1) / g) + b * x) := by
  have hc := le_tiles x g hg
  generalize (x + g - 1) / g = c at *
  have h1 : x * (a * m) ≤ (g * m) * (a * c) := by
    have : x * (a * m) ≤ (g * c) * (a * m) := Nat.mul_le_mul_right (a * m) hc
    have e : (g * c) * (a * m) = (g * m) * (a * c) := by
      simp only [Nat.mul_comm, Nat.mul_left_comm]
    omega
  have h2 : x * (b * (g * m)) = (g * m) * (b * x) := by
    rw [Nat.mul_comm b (g * m), ← Nat.mul_assoc, Nat.mul_comm x (g * m), Nat.mul_assoc, Nat.mul_comm x b]
  rw [Nat.mul_add, Nat.mul_add]
  omega

/-- The token rate under an affine cost: `served · (a + b·R) ≤ R · start` at every iteration. -/
theorem affine_token_rate (a b R : Nat) (its : List Iteration) (hb : ∀ i ∈ its, i.tokens ≤ R)
    (ht : Timed (fun x => a + b * x) its) : RateHolds (a + b * R) R 0 its :=
  rate_from_start _ _ R (fun x hx => affine_rate a b R x hx) its hb ht

/-- The token rate under a tiled cost with a budget of `m` tiles of `g`. -/
theorem tiled_token_rate (a b g m : Nat) (hg : 0 < g) (its : List Iteration)
    (hb : ∀ i ∈ its, i.tokens ≤ g * m) (ht : Timed (fun x => a * ((x + g - 1) / g) + b * x) its) :
    RateHolds (a * m + b * (g * m)) (g * m) 0 its :=
  rate_from_start _ _ (g * m) (fun x _ => tiled_rate a b g m x hg) its hb ht

/-- Why the tile must divide the budget: tiles of 128, a budget of 130 (`T` the time of a full
iteration, two tiles), and iterations of 128 tokens back to back break the rate. -/
example : ¬ RateHolds (2 * 1 + 0 * 130) 130 0 [⟨0, 128⟩, ⟨1, 128⟩] := by decide

/-- `tests/test_leangen.py`'s hand-computed engine (`ENGINE_SOURCE`: tokens cap 4, `execute (1 +
floor(batch.tokens / 4))`): its eight iterations are timed by the cost, and as the cost is at
least one step for at most four tokens, the rate is four tokens a step. -/
example : Timed (fun x => 1 + x / 4)
    [⟨0, 4⟩, ⟨2, 4⟩, ⟨4, 3⟩, ⟨5, 2⟩, ⟨6, 4⟩, ⟨8, 2⟩, ⟨9, 1⟩, ⟨10, 1⟩] ∧
    RateHolds 1 4 0 [⟨0, 4⟩, ⟨2, 4⟩, ⟨4, 3⟩, ⟨5, 2⟩, ⟨6, 4⟩, ⟨8, 2⟩, ⟨9, 1⟩, ⟨10, 1⟩] := by
  decide

end Serq.RateCost
