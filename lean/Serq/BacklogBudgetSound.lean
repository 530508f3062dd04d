module

public import Serq.OneAtATime
public import Serq.Claims
public import Serq.BacklogBudgetShort

/-! # A decode's work left is within its turn's output, on every run (issue 14, result 2, case (b))

The soundness of each request that `Serq.OneAtATime` carries for a one-slot engine (`ResOK`: a decode's
position, sampled token and remaining tokens add up to its prompt and output, `ReqOK` for the queue)
holds on every run of every engine of vLLM's mixed schedule, whatever its request cap
(`Serq.BacklogBudget.run_sound`: `serveRunning_pi`, `admitHeads_pi`, `apply_inv` and `submit_inv` are
`OneAtATime`'s, only the plan and the step are taken again without the one-slot count). So every
decoding resident has `remaining + 1 ≤` its turn's output (`Serq.BacklogBudget.decode_left`), at most
`D - 1` when every turn has at most `D` output tokens; and with `Serq.BacklogBudget.short_decodes`,
after a short iteration of an engine without a chunk cap every resident has at most `D - 1` tokens
left and the residents' work left is at most their count times `D - 1`
(`Serq.BacklogBudget.short_left`): the reset bound of `Serq.BacklogBudget.conserve` but for the count
of the residents and the queue (the request cap and the KV pool never binding).
-/

@[expose] public section

namespace Serq

namespace BacklogBudget

open OneAtATime BacklogMany

/-- The soundness of a machine's requests: residents, queue, and the pending turns' prompts. -/
def Sound (ss : List Session) (m : Machine) : Prop :=
  (∀ r ∈ m.running, ResOK ss r) ∧ (∀ q ∈ m.waiting, ReqOK ss q) ∧ (∀ p ∈ m.pending, 1 ≤ p.prompt)

/-- Every plan of an engine without `only` keeps its residents and queue sound (any request cap). -/
theorem plan_sound (eng : Engine) (ss : List Session) (hp : eng.phased = false) (chunk : Nat) (m : Machine)
    (waiting : List Req) (hr : ∀ r ∈ m.running, ResOK ss r) (hw : ∀ q ∈ waiting, ReqOK ss q) :
    (∀ r ∈ (plan eng chunk m waiting).done, ResOK ss r) ∧
    (∀ q ∈ (plan eng chunk m waiting).waiting, ReqOK ss q) := by
  obtain ⟨e1, e2, e3⟩ := clearSched_facts ss m.running hr
  have h0 : ServeInv ss (sumResProd m.running + sumReqProd waiting) (sumResProd m.running) (resCount m.running)
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ :=
    ⟨fun _ h => by simp at h, e1, hw, by simp [sumResProd, e2], by simp [sumResProd, e2], by simp [resCount, e3]⟩
  obtain ⟨d1, d2, d3, _, _, _⟩ := serveRunning_pi eng none ss _ _ _ (resCount m.running + 1) _ h0
  unfold plan
  dsimp only
  rw [show phaseOf eng m.running = none by simp [phaseOf, hp]]
  generalize serveRunning eng none (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at d1 d2 d3 ⊢
  have f1 : ∀ r ∈ appendRes p1.done p1.todo, ResOK ss r := by
    intro x hx
    rcases mem_appendRes.mp hx with hx | hx
    · exact d1 x hx
    · exact d2 x hx
  split
  · obtain ⟨i1, i2, _, _, _⟩ := admitHeads_pi eng ss (reqCount p1.waiting + 1)
      { p1 with done := appendRes p1.done p1.todo, todo := [] } f1 d3
    exact ⟨i1, i2⟩
  · exact ⟨f1, d3⟩

theorem sound_after (eng : Engine) (ss : List Session) (now : Nat) (M : Machine) (P : List Res)
    (hP : ∀ r ∈ P, ResOK ss r) (hw : ∀ q ∈ M.waiting, ReqOK ss q) (hp : ∀ p ∈ M.pending, 1 ≤ p.prompt) :
    Sound ss { apply eng ss now M P [] with now := now + 1 } := by
  obtain ⟨a1, _, _, _, a5, a6⟩ := apply_inv eng ss now P M [] hP (by simp) hp
  exact ⟨a5, by show ∀ q ∈ (apply eng ss now M P []).waiting, ReqOK ss q
                rw [a1]; exact hw, a6⟩

theorem step_sound (eng : Engine) (ss : List Session) (hp : eng.phased = false) (m : Machine)
    (h : Sound ss m) : Sound ss (step eng ss m) := by
  obtain ⟨h4, h5, h6⟩ := h
  unfold step
  rcases hdp : duePending m.now m.pending with ⟨due, later⟩
  obtain ⟨dp1, dp2⟩ := duePending_mem m.now m.pending due later hdp
  dsimp only
  obtain ⟨s1, _⟩ := submit_inv eng ss due m.waiting (fun p hp => h6 p (dp1 p hp)) h5
  generalize submit eng ss due m.waiting = waiting at s1 ⊢
  have hlater : ∀ p ∈ later, 1 ≤ p.prompt := fun p hp => h6 p (dp2 p hp).1
  cases later with
  | nil =>
    dsimp only
    split
    · exact ⟨h4, s1, by simp⟩
    · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
      obtain ⟨p1', p2'⟩ := plan_sound eng ss hp chunk m waiting h4 s1
      generalize plan eng chunk m waiting = P at p1' p2' ⊢
      split
      · exact ⟨p1', s1, by simp⟩
      · exact sound_after eng ss m.now _ P.done p1' p2' (by simp)
  | cons q qs =>
    dsimp only
    split
    · exact ⟨h4, s1, hlater⟩
    · generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount waiting > 1 then eng.chunk else 0) = chunk
      obtain ⟨p1', p2'⟩ := plan_sound eng ss hp chunk m waiting h4 s1
      generalize plan eng chunk m waiting = P at p1' p2' ⊢
      split
      · exact ⟨p1', s1, hlater⟩
      · exact sound_after eng ss m.now _ P.done p1' p2' hlater

theorem run_sound (eng : Engine) (ss : List Session) (hp : eng.phased = false) :
    ∀ (fuel : Nat) (m : Machine), Sound ss m → Sound ss (run eng ss fuel m)
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_sound eng ss hp fuel _ (step_sound eng ss hp m h)

theorem init_sound (ss : List Session) (hnew : ∀ s ∈ ss, ∀ t ∈ s.turns.head?, 0 < t.new) :
    Sound ss (init ss) :=
  ⟨fun _ h => by simp [init] at h, fun _ h => by simp [init] at h, firstTurns_prompt ss 0 hnew⟩

theorem turnOut_le (ss : List Session) (D : Nat) (hD : ∀ s ∈ ss, ∀ t ∈ s.turns, t.out ≤ D) (sid turn : Nat) :
    turnOut ss sid turn ≤ D := by
  unfold turnOut
  split
  · exact Nat.zero_le _
  · rename_i s hs
    split
    · exact Nat.zero_le _
    · rename_i t ht
      exact hD s (sessionAt_mem ss sid s hs) t (Backlog.turnAt_mem _ _ t ht)

/-- A sound decode has at most its turn's output less one token left. -/
theorem resOK_left (ss : List Session) (r : Res) (h : ResOK ss r) (hd : r.decoding = true) :
    r.remaining + 1 ≤ turnOut ss r.req.sid r.req.turn := by
  obtain ⟨o1, _, o3, _, _, _, o7⟩ := h
  obtain ⟨q1, q2, _⟩ := o7 hd
  omega

end BacklogBudget

/-- **A decode's work left is within its turn's output, on every run**: for every engine of vLLM's
mixed schedule (`phased = false`; any budget, request cap, KV pool, chunk cap and prefix cache,
preemption included), sessions whose first turns have non-empty prompts, and any fuel, every decoding
resident of the run's machine has `remaining + 1 ≤ turnOut ss sid turn` (its turn's output tokens). -/
theorem BacklogBudget.decode_left (eng : Engine) (hp : eng.phased = false) (ss : List Session)
    (hnew : ∀ s ∈ ss, ∀ t ∈ s.turns.head?, 0 < t.new) (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).running, r.decoding = true →
      r.remaining + 1 ≤ turnOut ss r.req.sid r.req.turn := by
  intro r hr hd
  exact resOK_left ss r ((run_sound eng ss hp fuel (init ss) (init_sound ss hnew)).1 r hr) hd

/-- **After a short iteration the work left is at most `D - 1` a resident** (the reset bound of
`Serq.BacklogBudget.conserve`, but for the residents' count): one `step` of an engine of the mixed
schedule without a chunk cap (`phased = false`, `chunk = 0`) from a sound machine (`Sound`: every
machine of every run from `init`, `run_sound`), with every turn of at most `D` output tokens: if the
step runs an iteration (its record `x` is new) that is short (`x.tokens < budget`), every resident after
it has at most `D - 1` tokens left, and the residents' work left (`sumRem`) is at most their count
times `D - 1`. -/
theorem BacklogBudget.short_left (eng : Engine) (hp : eng.phased = false) (hc : eng.chunk = 0)
    (ss : List Session) (D : Nat) (hD : ∀ s ∈ ss, ∀ t ∈ s.turns, t.out ≤ D) (m : Machine)
    (hm : Sound ss m) (x : Record) (hx : x ∈ (step eng ss m).records) (hnew : x ∉ m.records)
    (hshort : x.tokens < eng.budget) :
    (∀ y ∈ (step eng ss m).running, y.remaining ≤ D - 1) ∧
      BacklogMany.sumRem (step eng ss m).running ≤ resCount (step eng ss m).running * (D - 1) := by
  have hleft : ∀ y ∈ (step eng ss m).running, y.remaining ≤ D - 1 := by
    intro y hy
    rcases short_decodes eng hp hc ss m x hx hnew hshort y hy with hd | h0
    · have := resOK_left ss y ((step_sound eng ss hp m hm).1 y hy) hd
      have := turnOut_le ss D hD y.req.sid y.req.turn
      omega
    · omega
  exact ⟨hleft, BacklogMany.sumRem_le (D - 1) _ hleft⟩

end Serq
