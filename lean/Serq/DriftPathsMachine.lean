module

public import Serq.DriftPaths

/-! # The machine's work at a horizon has the drift chain's law (issue 14, result 7)

A path of counts `p = [a₀, …, a_{t−1}]` becomes the machine's sessions (`pathSessions W p`: `a_i`
sessions arriving at time `i`, each one turn of a `W`-token prompt and one output token), whose
arrivals are the path's (`arrivalsAt_pathSessions`: `arrivalsAt (pathSessions W p) i = pathAt p i`).
The machine's work at time `t` (`workAt eng ss W t F`: the work of the last machine of the run within
`F` steps whose clock is `t`, or 0 when the run has none: its clock jumped over `t` or it stopped
before `t`) is the chain's backlog at `t` driven by the sessions' arrivals, for every fuel `F ≥ t`
(`Serq.drift_machine_work_at`): on a clock the coupling `drift_machine_time` gives it, on a time the
clock jumped over `drift_machine_time_every` gives backlog 0, and after a run that stopped (settled:
nothing pending, and nothing resident or waiting, since a fresh request always fits the pool) the
chain's backlog stays 0 (`settled_backlog`); within `F ≥ t` steps the clock reaches `t` or the run
stops (`run_advance`). Summed over the arrival paths with their weights
(`Serq.drift_machine_paths`, `Serq.drift_machine_law`), the machine's work at `t` has the chain's
`t`-step law from backlog 0 (`Serq.Drift.paths_backlog`). Here the pieces; the three theorems are in
`Serq.DriftPathsLaw`.
-/

@[expose] public section

namespace Serq

namespace DriftMachine

open Backlog BacklogDecode BacklogMany

/-- The one turn of a path's session: a `W`-token prompt, one output token (the prefill samples it),
no think time, no forced miss. -/
def pathTurn (W : Nat) : Turn := ⟨W, 1, 0, false⟩

/-- `n` sessions arriving at time `i`, then `rest`. -/
def pathCopies (W i : Nat) : Nat → List Session → List Session
  | 0, rest => rest
  | n + 1, rest => ⟨i, [pathTurn W]⟩ :: pathCopies W i n rest

/-- The sessions of a path whose first count is at time `i`. -/
def sessionsFrom (W : Nat) : Nat → List Nat → List Session
  | _, [] => []
  | i, a :: p => pathCopies W i a (sessionsFrom W (i + 1) p)

/-- **The sessions of a path**: `a_i` sessions arriving at time `i`, each one `W`-token turn. -/
def pathSessions (W : Nat) (p : List Nat) : List Session := sessionsFrom W 0 p

/-- The machine's work at time `t`: the work of the last machine of the run within `F` steps whose
clock is `t`, or 0 when no machine of the run has clock `t`. -/
def workAt (eng : Engine) (ss : List Session) (W t : Nat) : Nat → Nat
  | 0 => if (run eng ss 0 (init ss)).now = t then work W (run eng ss 0 (init ss)) else 0
  | f + 1 => if (run eng ss (f + 1) (init ss)).now = t then work W (run eng ss (f + 1) (init ss))
      else workAt eng ss W t f

theorem arrivalsAt_pathCopies (W i s : Nat) (rest : List Session) : ∀ n,
    arrivalsAt (pathCopies W i n rest) s = (if i = s then n else 0) + arrivalsAt rest s
  | 0 => by simp [pathCopies]
  | n + 1 => by
    simp only [pathCopies, arrivalsAt, arrivalsAt_pathCopies W i s rest n]
    by_cases h : i = s <;> simp [h] <;> omega

theorem arrivalsAt_sessionsFrom_lt (W : Nat) : ∀ (p : List Nat) (i s : Nat), s < i →
    arrivalsAt (sessionsFrom W i p) s = 0
  | [], _, _, _ => rfl
  | a :: p, i, s, h => by
    simp only [sessionsFrom, arrivalsAt_pathCopies, arrivalsAt_sessionsFrom_lt W p (i + 1) s (by omega)]
    rw [if_neg (show ¬ i = s by omega)]

theorem arrivalsAt_sessionsFrom (W : Nat) : ∀ (p : List Nat) (i s : Nat),
    arrivalsAt (sessionsFrom W i p) (i + s) = Drift.pathAt p s
  | [], _, _ => rfl
  | a :: p, i, 0 => by
    simp only [sessionsFrom, arrivalsAt_pathCopies, arrivalsAt_sessionsFrom_lt W p (i + 1) (i + 0) (by omega)]
    rw [if_pos (show i = i + 0 by omega)]
    rfl
  | a :: p, i, s + 1 => by
    simp only [sessionsFrom, arrivalsAt_pathCopies]
    rw [if_neg (show ¬ i = i + (s + 1) by omega), show i + (s + 1) = i + 1 + s by omega,
      arrivalsAt_sessionsFrom W p (i + 1) s, Nat.zero_add]
    rfl

/-- **The path's sessions arrive as the path says**: `a_i` of them at time `i`, none after it. -/
theorem arrivalsAt_pathSessions (W : Nat) (p : List Nat) (s : Nat) :
    arrivalsAt (pathSessions W p) s = Drift.pathAt p s := by
  have h := arrivalsAt_sessionsFrom W p 0 s
  rw [Nat.zero_add] at h
  exact h

theorem mem_pathCopies (W i : Nat) (rest : List Session) (x : Session) : ∀ n,
    x ∈ pathCopies W i n rest → x.turns = [pathTurn W] ∨ x ∈ rest
  | 0, h => Or.inr h
  | n + 1, h => by
    simp only [pathCopies, List.mem_cons] at h
    rcases h with rfl | h
    · exact Or.inl rfl
    · exact mem_pathCopies W i rest x n h

theorem sessionsFrom_turns (W : Nat) : ∀ (p : List Nat) (i : Nat), ∀ x ∈ sessionsFrom W i p,
    x.turns = [pathTurn W]
  | [], _, x, h => by simp [sessionsFrom] at h
  | a :: p, i, x, h => by
    rcases mem_pathCopies W i _ x a h with e | h
    · exact e
    · exact sessionsFrom_turns W p (i + 1) x h

theorem pathSessions_oneTurn (W : Nat) (p : List Nat) : OneTurnW W (pathSessions W p) :=
  fun x hx => ⟨pathTurn W, sessionsFrom_turns W p 0 x hx, rfl, Nat.le_refl _⟩

theorem sessionCount_pathCopies (W i : Nat) (rest : List Session) : ∀ n,
    sessionCount (pathCopies W i n rest) = n + sessionCount rest
  | 0 => by simp [pathCopies]
  | n + 1 => by
    simp only [pathCopies, sessionCount, sessionCount_pathCopies W i rest n]
    omega

theorem sessionCount_sessionsFrom (W : Nat) : ∀ (p : List Nat) (i : Nat),
    sessionCount (sessionsFrom W i p) = Drift.pathSum p
  | [], _ => rfl
  | a :: p, i => by
    simp only [sessionsFrom, sessionCount_pathCopies, sessionCount_sessionsFrom W p (i + 1), Drift.pathSum]

/-- The path's sessions are as many as its counts' sum. -/
theorem sessionCount_pathSessions (W : Nat) (p : List Nat) :
    sessionCount (pathSessions W p) = Drift.pathSum p :=
  sessionCount_sessionsFrom W p 0

/-- A step from a machine of the run advances the clock by at least one, or leaves a settled machine
(the engine was empty, nothing was due or pending). -/
theorem step_advance (eng : Engine) (ss : List Session) (W bW N : Nat) (m : Machine)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks)
    (h : Inv eng.blockSize W bW N m) (hs : SortedT m.pending) :
    m.now + 1 ≤ (step eng ss m).now ∨ (step eng ss m).settled eng = true := by
  obtain ⟨hI, w1, w2⟩ := step_inv eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h
  obtain ⟨_, _, e1, e2⟩ := step_clock eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs
  rcases e2 with hn | ⟨hk, ⟨hnil, hn⟩ | ⟨q, qs, hq, hn⟩⟩
  · exact Or.inl (by omega)
  · right
    have hw0 : work W m = 0 := by
      rcases w2 with hn' | ⟨_, hw⟩
      · omega
      · exact hw
    have hws : work W (step eng ss m) = 0 := by rw [w1, hw0, hk]; simp
    obtain ⟨hr, hq⟩ := (work_zero_iff eng.blockSize W bW N _ hW hI).mp hws
    simp [Machine.settled, Machine.quiet, e1, hnil, hr, hq, noPending, noReq, noRes]
  · left
    have := (duePending_later m.now m.pending).1 q (by rw [hq]; exact List.mem_cons_self)
    omega

/-- Within `F` steps the clock advances by `F`, or the run settles. -/
theorem run_advance (eng : Engine) (ss : List Session) (W bW N : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : N ≤ eng.reqsCap) (hkv : N * bW ≤ eng.kvBlocks) :
    ∀ (F : Nat) (m : Machine), Inv eng.blockSize W bW N m → SortedT m.pending →
      (∀ p ∈ m.pending, m.now ≤ p.time) →
      m.now + F ≤ (run eng ss F m).now ∨ (run eng ss F m).settled eng = true
  | 0, _, _, _, _ => Or.inl (Nat.le_refl _)
  | F + 1, m, h, hs, hc => by
    rw [run_one]
    by_cases hset : m.settled eng = true
    · rw [if_pos hset]
      exact Or.inr hset
    · rw [if_neg hset]
      obtain ⟨c1, c2, _⟩ := step_clock eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs
      have hI := (step_inv eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h).1
      rcases step_advance eng ss W bW N m hch hcache hB hW hbW hfit hS hcap hkv h hs with ha | ha
      · rcases run_advance eng ss W bW N hch hcache hB hW hbW hfit hS hcap hkv F _ hI c1 c2 with hb | hb
        · exact Or.inl (by omega)
        · exact Or.inr hb
      · right
        rw [run_settled eng ss _ ha]
        exact ha

/-- After a run that settled, nothing arrives and the chain's backlog stays 0. -/
theorem settled_backlog (eng : Engine) (ss : List Session) (W bW : Nat)
    (hch : eng.chunk = 0) (hcache : eng.caching = false) (hB : 0 < eng.budget) (hW : 0 < W)
    (hbW : blocksFor eng.blockSize W ≤ bW) (hfit : blocksFor eng.blockSize W ≤ eng.kvBlocks)
    (hS : OneTurnW W ss) (hcap : sessionCount ss ≤ eng.reqsCap)
    (hkv : sessionCount ss * bW ≤ eng.kvBlocks) (F : Nat)
    (hset : (run eng ss F (init ss)).settled eng = true) :
    ∀ s, (run eng ss F (init ss)).now ≤ s → backlogAt W eng.budget (arrivalsAt ss) s = 0 := by
  have hI0 := init_inv eng.blockSize W bW ss hS
  have hI := run_inv eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv F _ hI0
  have ht := run_onTime eng ss W bW _ hch hcache hB hW hbW hfit hS hcap hkv F _ hI0
    (firstTurns_sorted 0 ss) (init_onTime ss)
  have hw := (drift_machine_time eng ss W bW hch hcache hB hW hbW hfit hS hcap hkv F).1
  generalize run eng ss F (init ss) = m at hI ht hw hset ⊢
  have hpend : noPending m.pending = true := by
    unfold Machine.settled Machine.quiet Machine.stuck at hset
    cases h1 : noPending m.pending
    · simp [h1] at hset
    · rfl
  have hp : m.pending = [] := by
    cases hq : m.pending with
    | nil => rfl
    | cons x xs =>
      rw [hq] at hpend
      simp [noPending] at hpend
  have hw0 : work W m = 0 := by
    rw [work_zero_iff eng.blockSize W bW _ m hW hI]
    unfold Machine.settled Machine.quiet Machine.stuck at hset
    cases hr : m.running with
    | cons r rs =>
      rw [hr] at hset
      simp [noRes] at hset
    | nil =>
      cases hq : m.waiting with
      | nil => exact ⟨rfl, rfl⟩
      | cons rq rqs =>
        -- stuck: the head can never be admitted, but a fresh `W`-token request fits the pool
        obtain ⟨hk, hc, _, _⟩ := hI.2.1 rq (by rw [hq]; exact List.mem_cons_self)
        have hmax : max W (0 + 1) = W := Nat.max_eq_left (by omega)
        rw [hr, hq] at hset
        have hnf : neverFits eng rq = true := by simpa [noReq, noRes, hpend] using hset
        unfold neverFits at hnf
        rw [hk, hc, hmax] at hnf
        have := of_decide_eq_true hnf
        omega
  have ha : ∀ s, m.now ≤ s → arrivalsAt ss s = 0 := by
    intro s hs
    rw [← firstTurns_arrivals W s 0 ss hS, List.length_eq_zero_iff, List.filter_eq_nil_iff]
    intro x hxF hxs
    have hxs' : x.time = s := by simpa using hxs
    have hxp : x ∈ m.pending := by
      rw [ht]
      exact List.mem_filter.mpr ⟨hxF, by simp only [decide_eq_true_eq]; omega⟩
    rw [hp] at hxp
    simp at hxp
  intro s hs
  have hb := backlogAt_zero W eng.budget (arrivalsAt ss) m.now (by rw [← hw, hw0]) (s - m.now)
    (fun u u1 _ => ha u u1)
  rw [Nat.add_sub_of_le hs] at hb
  exact hb

/-- `workAt` is the work of a machine of the run whose clock is `t`, or 0 and no machine of the run
within the fuel has clock `t`. -/
theorem workAt_spec (eng : Engine) (ss : List Session) (W t : Nat) : ∀ F,
    (∃ f, f ≤ F ∧ (run eng ss f (init ss)).now = t ∧ workAt eng ss W t F = work W (run eng ss f (init ss))) ∨
      (workAt eng ss W t F = 0 ∧ ∀ f, f ≤ F → (run eng ss f (init ss)).now ≠ t)
  | 0 => by
    by_cases h : (run eng ss 0 (init ss)).now = t
    · exact Or.inl ⟨0, Nat.le_refl _, h, by simp only [workAt, if_pos h]⟩
    · refine Or.inr ⟨by simp only [workAt, if_neg h], fun f hf => ?_⟩
      rw [Nat.le_zero.mp hf]
      exact h
  | F + 1 => by
    by_cases h : (run eng ss (F + 1) (init ss)).now = t
    · exact Or.inl ⟨F + 1, Nat.le_refl _, h, by simp only [workAt, if_pos h]⟩
    · rcases workAt_spec eng ss W t F with ⟨f, hf, h1, h2⟩ | ⟨h1, h2⟩
      · exact Or.inl ⟨f, by omega, h1, by simp only [workAt, if_neg h]; exact h2⟩
      · refine Or.inr ⟨by simp only [workAt, if_neg h]; exact h1, fun f hf => ?_⟩
        rcases Nat.lt_or_ge f (F + 1) with hl | hl
        · exact h2 f (by omega)
        · rw [show f = F + 1 by omega]
          exact h

end DriftMachine

end Serq
