module

public import Serq.BacklogPhasedArrive

/-! # The bounded backlog on the phase-separated schedule (issue 14, result 2, `phased = true`)

`Serq.backlog_phased`: sessions at least `g` steps apart, each one turn of a `P`-token prompt and `D`
output tokens (`W = P + (D - 1)`), on FasterTransformer's phase-separated schedule (`phased = true`:
`only (in_phase())` in both statements of vLLM's schedule). An iteration is a *decode iteration* while
some resident decodes: the decodes take a token each, the prefills wait, and an arrival is admitted
without a token; otherwise a *prefill iteration*: every waiting prefill takes its whole prompt (with
the arrival due then), and they decode together `D - 1` iterations after it. So a prefill iteration
serves the arrivals of at most `D` consecutive steps, at most `J` of them when `D ≤ J · g`; with a
budget of `J` prompts (`J · P ≤ budget`), room for an admission beside `J` decodes (`J < budget`),
`2 · J` request slots and a pool of `2 · J` requests' blocks, every record has
`arrived · W ≤ served + J · W + J · (D - 1)`: at most `J` requests wait with their whole work and at
most `J` decode, each with at most `D - 1` tokens left.

The invariant (`BacklogPhased.Inv`): the queue is empty between steps; the residents are the decodes,
all with the same `d` tokens left, then the prefills not served yet (`Fresh`), whose ghost arrival
times are at least `g` apart from `now + d + 1 - D` on (the prefill iteration is `d` steps ahead, the
last was `D - d` steps back), the first pending arrival at least `g` after the last (`Chain`); at most
`J` decodes; conservation `arrived · W = served + workLeft`; the pending arrivals spaced by `g`; the
cache's and the residents' sessions before every pending one's.
-/

@[expose] public section

namespace Serq

namespace BacklogPhased

open Backlog BacklogDecode BacklogMany BacklogChunk

theorem step_inv (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) (m : Machine)
    (h : Inv eng g P D J ss m) : Inv eng g P D J ss (step eng ss m) := by
  have hinv := h
  obtain ⟨_, ⟨d, Ds, Ps, z, hr, hd, hDs, hJ, hch, hz⟩, _⟩ := h
  have ⟨_, _, hP, hD1, hg, hwin, hbud, hbud', hcapJ, hfits, _⟩ := hy
  have ⟨hwait, _, hsp, hcons, hrec, hcsid, hrsid, hsids⟩ := hinv
  obtain ⟨hPW, hnext, hDok, hPsF, hPs', hkvk, hJ1, hcount0, hsidD, hsidP⟩ :=
    facts eng g P D J ss hy m d Ds Ps z hrsid hr hd hDs hch
  have hcc := capChunk_if eng P hy.chunk
  have hbusy : m.running ≠ [] → (∀ q ∈ m.pending, m.now < q.time) → Inv eng g P D J ss (step eng ss m) := by
    intro hr0 hlater
    by_cases hne : Ds = []
    · exact step_pre_none eng g P D J ss hy m hinv d Ds Ps z hr hd hDs hJ hch hz hne
        (fun hP0 => hr0 (by rw [hr, hne, hP0]; rfl)) hlater
    · exact step_dec_none eng g P D J ss hy m hinv d Ds Ps z hr hd hDs hJ hch hz hne hlater
  cases hp : m.pending with
  | nil =>
    by_cases hr0 : m.running = []
    · have hdue : duePending m.now m.pending = ([], []) := by rw [hp]; rfl
      have hcons' := hcons
      rw [hr0] at hcons'
      unfold step
      rw [hdue]
      dsimp only
      rw [hwait, hr0]
      simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
      exact ⟨rfl, ⟨d, [], [], m.now + d + 1 - D, rfl, hd, by simp, by simp [resCount], Nat.le_refl _, by simp⟩,
        trivial, by simpa [workLeft] using hcons', hrec, by simp, by simp, by simp⟩
    · exact hbusy hr0 (by rw [hp]; simp)
  | cons p ps =>
    rw [hp] at hsp hsids
    obtain ⟨hle, hprompt, hturn, hsid, hrest⟩ := hsp
    by_cases hnow : p.time = m.now
    · exact step_arrive eng g P D J ss hy m hinv d Ds Ps z hr hd hDs hJ hch hz p ps hp hnow
    · by_cases hr0 : m.running = []
      · -- nothing resident and the next arrival later: the clock moves to it
        have hlt : m.now < p.time := by omega
        have hdue : duePending m.now m.pending = ([], p :: ps) := by
          rw [hp]
          exact duePending_none m.now _ (fun q hq => by
            rcases List.mem_cons.mp hq with rfl | hq
            · exact hlt
            · have := spaced_le hrest q hq; omega)
        have hcons' := hcons
        rw [hr0] at hcons'
        unfold step
        rw [hdue]
        dsimp only
        rw [hwait, hr0]
        simp only [submit, noRes, noReq, and_self, if_true, countFirst, Nat.add_zero]
        refine ⟨rfl, ⟨d, [], [], p.time, rfl, hd, by simp, by simp [resCount],
            by show p.time + d + 1 - D ≤ p.time; omega, fun q hq => ?_⟩,
          ⟨Nat.le_refl _, hprompt, hturn, hsid, hrest⟩, by simpa [workLeft] using hcons', hrec,
          by rw [← hp]; exact hcsid, by simp, hsids⟩
        rcases List.mem_cons.mp hq with rfl | hq
        · exact Nat.le_refl _
        · have := spaced_le hrest q hq; omega
      · exact hbusy hr0 (fun q hq => by
          rw [hp] at hq
          rcases List.mem_cons.mp hq with rfl | hq
          · omega
          · have := spaced_le hrest q hq; omega)

theorem run_inv (eng : Engine) (g P D J : Nat) (ss : List Session) (hy : Hyp eng g P D J ss) :
    ∀ (fuel : Nat) (m : Machine), Inv eng g P D J ss m → Inv eng g P D J ss (run eng ss fuel m)
  | 0, _, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng g P D J ss hy fuel _ (step_inv eng g P D J ss hy m h)

end BacklogPhased

/-- **The pathwise bounded backlog on the phase-separated schedule** (FasterTransformer's iterations,
prefill-only or decode-only: `phased = true`). Sessions arrive at least `g` steps apart
(`GappedDecode g P D 0 ss`), each one turn of a `P`-token prompt (`P > 0`) and `D > 0` output tokens, a
request's work `W = P + (D - 1)`. While a resident decodes, the iteration serves the decodes only and
the arrivals wait; then one prefill iteration serves every waiting prompt whole, and those requests
decode together for `D - 1` iterations. With `J` such that `D ≤ J · g` (the arrivals of `D`
consecutive steps, the most one prefill iteration serves, are at most `J`), a budget of `J` prompts
(`J · P ≤ budget`) with room beside `J` decodes for an admission (`J < budget`), a chunk cap that does
not cut a prompt (`chunk = 0 ∨ P ≤ chunk`), `2 · J` request slots and a KV pool of `2 · J` requests'
`W` tokens, every iteration record of every run has `arrived · W ≤ served + J · W + J · (D - 1)`.
Proved, not assumed: the request cap, the KV pool and the budget never bind and nothing is preempted
(`BacklogPhased.Inv`). Any prefix cache setting, any fuel. -/
theorem backlog_phased (eng : Engine) (g P D J : Nat) (ss : List Session)
    (hph : eng.phased = true) (hch : eng.chunk = 0 ∨ P ≤ eng.chunk) (hP : 0 < P) (hD : 0 < D) (hg : 0 < g)
    (hJ : D ≤ J * g) (hB : J * P ≤ eng.budget) (hB' : J < eng.budget) (hcap : 2 * J ≤ eng.reqsCap)
    (hfits : 2 * J * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records,
      r.arrived * (P + (D - 1)) ≤ r.served + J * (P + (D - 1)) + J * (D - 1) := by
  have hy : BacklogPhased.Hyp eng g P D J ss :=
    ⟨hph, hch, hP, hD, hg, hJ, hB, hB', hcap, hfits, BacklogDecode.gapped_turns g P D 0 ss hw⟩
  exact (BacklogPhased.run_inv eng g P D J ss hy fuel (init ss)
    (BacklogPhased.init_inv eng g P D J ss hg hD hw)).records

/-- `backlog_phased` with `2 · J` requests' work: `arrived · W ≤ served + 2 · J · W`. -/
theorem backlog_phased_loose (eng : Engine) (g P D J : Nat) (ss : List Session)
    (hph : eng.phased = true) (hch : eng.chunk = 0 ∨ P ≤ eng.chunk) (hP : 0 < P) (hD : 0 < D) (hg : 0 < g)
    (hJ : D ≤ J * g) (hB : J * P ≤ eng.budget) (hB' : J < eng.budget) (hcap : 2 * J ≤ eng.reqsCap)
    (hfits : 2 * J * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    ∀ r ∈ (run eng ss fuel (init ss)).records, r.arrived * (P + (D - 1)) ≤ r.served + 2 * J * (P + (D - 1)) := by
  intro r hr
  have h := backlog_phased eng g P D J ss hph hch hP hD hg hJ hB hB' hcap hfits hw fuel r hr
  have h1 : J * (D - 1) ≤ J * (P + (D - 1)) := Nat.mul_le_mul_left J (by omega)
  have h2 : 2 * J * (P + (D - 1)) = J * (P + (D - 1)) + J * (P + (D - 1)) := by rw [Nat.mul_assoc, Nat.two_mul]
  omega

/-- What `backlog_phased` proves on the way: at every machine of every run nothing waits in the queue,
at most `2 · J` requests are resident (at most `J` decoding, at most `J` waiting for the next prefill
iteration) and they hold at most `2 · J` requests' blocks — so the request cap (`2 · J ≤ reqsCap`) and
the KV pool (`2 · J · blocksFor blockSize W ≤ kvBlocks`) never bind. -/
theorem backlog_phased_in_flight (eng : Engine) (g P D J : Nat) (ss : List Session)
    (hph : eng.phased = true) (hch : eng.chunk = 0 ∨ P ≤ eng.chunk) (hP : 0 < P) (hD : 0 < D) (hg : 0 < g)
    (hJ : D ≤ J * g) (hB : J * P ≤ eng.budget) (hB' : J < eng.budget) (hcap : 2 * J ≤ eng.reqsCap)
    (hfits : 2 * J * blocksFor eng.blockSize (P + (D - 1)) ≤ eng.kvBlocks) (hw : GappedDecode g P D 0 ss)
    (fuel : Nat) :
    (run eng ss fuel (init ss)).waiting = [] ∧ resCount (run eng ss fuel (init ss)).running ≤ 2 * J ∧
      usedBlocks (run eng ss fuel (init ss)).running ≤ 2 * J * blocksFor eng.blockSize (P + (D - 1)) := by
  have hy : BacklogPhased.Hyp eng g P D J ss :=
    ⟨hph, hch, hP, hD, hg, hJ, hB, hB', hcap, hfits, BacklogDecode.gapped_turns g P D 0 ss hw⟩
  have h := BacklogPhased.run_inv eng g P D J ss hy fuel (init ss) (BacklogPhased.init_inv eng g P D J ss hg hD hw)
  generalize run eng ss fuel (init ss) = m at h ⊢
  obtain ⟨d, Ds, Ps, z, hr, hd, hDs, hJD, hchn, _⟩ := h.shape
  obtain ⟨_, _, hDok, _, hPs', _, _, hcount, _, _⟩ :=
    BacklogPhased.facts eng g P D J ss hy m d Ds Ps z h.runningSids hr hd hDs hchn
  have hcount2 : resCount m.running ≤ 2 * J := by rw [hr, BacklogMany.resCount_app]; omega
  refine ⟨h.waiting, hcount2, ?_⟩
  have hu := BacklogMany.usedBlocks_le (blocksFor eng.blockSize (P + (D - 1))) m.running (fun r hr' => by
    rw [hr] at hr'
    rcases List.mem_append.mp hr' with hr' | hr'
    · exact (hDok r hr').2.2.2
    · exact (hPs' r hr').2)
  exact Nat.le_trans hu (Nat.mul_le_mul_right _ hcount2)

end Serq
