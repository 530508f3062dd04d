module

public import Papers.SvfFirstStart

/-! # SVF (`svf.sq`): the simulation invariant's shapes, and the claim from its end

The open part of *SVF for every batch* (`docs/lean.md`) is a simulation invariant over `svf.sq`'s
program with `n` sessions, checked at each step of the event loop (`loop`), after the instant's end.
This module states its two shapes as predicates over `Kernel.Machine`, with the order the sessions were
served in (`served`, serials) and the sessions still waiting (`W`):

* (A) `SvfServing n m served s k W`: the machine serves session `s`, with `k` tokens left after the
  running iteration (its prefill: `k + 1 = vol s`; a decode: `k + 1 < vol s`), the clock at
  `Σ vol(served) + vol s − k − 1`, the iteration's end the one timer, at `now + 1`;
* (B) `SvfEnded n m served`: no timer, every session answered.

In both, every served session `t` has one answer at `svfDoneAt 0 served t` (the sum of the volumes
served up to and including it), each session served or chosen had a least volume among those left
(`SvfLeastFirst`), and `served ++ s :: W` (at (B), `served`) is a permutation of the serials.

Proved here: the shape (A) holds at the first step of the loop, for every batch (`svf_first_serving`:
after the settled first instant's end, session 0 served, nothing answered, sessions `1 … n` waiting),
and the shape (B) gives `Papers.svf_bound_of_server`'s hypothesis (`svf_server_of_ended`: the observed
volumes' shortest-first order is `served`'s volumes, and the responses are its completions from 0),
hence the claim (`svf_queueing_of_ended`: the generated `AtEndOfRun` predicate of `svf.sq`'s claim, for
a run whose final machine is (B)). That every `loop` step keeps (A) or reaches (B), and the fuel bound,
are the later modules' (`SvfInv`, `SvfInvEnd`, `SvfInvAdmit`; the induction `Papers.SvfRun`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-! ### The shapes -/

/-- The volumes of sessions, in order. -/
def svfVols : List Nat → List Nat
  | [] => []
  | s :: ss => svfVol s :: svfVols ss

/-- When session `t` is answered if the sessions `l` are served one at a time in order from `acc`: the
sum of the volumes up to and including it. -/
def svfDoneAt (acc : Nat) : List Nat → Nat → Nat
  | [], _ => 0
  | x :: xs, t => if x = t then acc + svfVol x else svfDoneAt (acc + svfVol x) xs t

/-- Each session of `l` has a volume at most every later one's and every one of `rest`'s: each was a
least one among those left when it was chosen. -/
def SvfLeastFirst : List Nat → List Nat → Prop
  | [], _ => True
  | x :: xs, rest => (∀ y ∈ xs ++ rest, svfVol x ≤ svfVol y) ∧ SvfLeastFirst xs rest

/-- The `reqs` queue of the sessions `W` waiting, in this order, each joined at 0. -/
def svfQueue : List Nat → List Waiter
  | [] => []
  | s :: ss => svfWaiter s 0 :: svfQueue ss

/-- Session `s` in its prefill: admitted with number `adm`, what is left the decodes, its hold's release
(one unit of `reqs`), the observe, the answer and the session's end. -/
def svfPre (s adm : Nat) : Thread :=
  ⟨s, [0, 0, 4, svfVol s, s, 1, svfVol s], 1, 0, true,
   [.stmts [.step 0 true 0 (.bin .sub (.attr 3) (.num 1))], .release [⟨0, 1, false, false, 0, false, 0, 1⟩] (svfWaiter s 0),
    .stmts [.observe 0 (.attr 6)], .answer, .stmts []], [], [], adm, 0, [], []⟩

/-- Session `s` in its decodes: what is left its hold's release, the observe, the answer and the end. -/
def svfDec (s adm : Nat) : Thread :=
  ⟨s, [0, 0, 4, svfVol s, s, 1, svfVol s], 1, 0, true,
   [.stmts [], .release [⟨0, 1, false, false, 0, false, 0, 1⟩] (svfWaiter s 0),
    .stmts [.observe 0 (.attr 6)], .answer, .stmts []], [], [], adm, 0, [], []⟩

/-- Session `s` in service with `k` tokens left after the running iteration. -/
def svfServingThread (s k adm : Nat) : Thread :=
  if k + 1 = svfVol s then svfPre s adm else svfDec s adm

/-- Engine 0's resident for session `s` with `k` tokens left after the running iteration: its 4-token
prefill all scheduled, or its decode of `k + 1` tokens, one scheduled. -/
def svfRes (s k adm : Nat) : Resident :=
  if k + 1 = svfVol s then ⟨s, 4, false, adm, 4, 0⟩ else ⟨s, k + 1, true, adm, 1, 0⟩

/-- An answered session `t`: its one turn answered at `a` (submitted at 0), its volume observed at `a`,
its session over. -/
structure SvfAnswered (th : Thread) (t a : Nat) : Prop where
  answers : th.answers = [⟨t, 1, 0, a⟩]
  observations : th.observations = [⟨t, 1, 0, a, svfVol t⟩]
  over : th.k = []

/-- **Shape (A), serving.** The machine serves session `s` (`k` tokens left after the running
iteration), the sessions `served` answered in this order, the sessions `W` waiting in this order. -/
structure SvfServing (n : Nat) (m : Kernel.Machine) (served : List Nat) (s k : Nat) (W : List Nat) : Prop where
  perm : (served ++ s :: W).Perm (List.range n)
  least : SvfLeastFirst (served ++ [s]) W
  threads_length : m.threads.length = n
  answered : ∀ t ∈ served, SvfAnswered (getThread m.threads t) t (svfDoneAt 0 served t)
  waiting : ∀ w ∈ W, getThread m.threads w = svfWaiting w 0
  serving : ∃ adm, 0 < adm ∧ getThread m.threads s = svfServingThread s k adm ∧
    ∃ sv recs, m.engines = [⟨[svfRes s k adm], true, m.now, sv, recs, []⟩]
  k_lt : k < svfVol s
  clock : m.now + k + 1 = sumNat (svfVols served) + svfVol s
  timer : ∃ q, m.timers = [⟨m.now + 1, q, .iterationEnd 0⟩]
  ready : m.ready = []
  pools : m.pools = [⟨1, 1, svfQueue W, []⟩]
  stages : m.stages = idleStages (svfP n).stages
  arrived : m.arrived = n
  outOfFuel : m.outOfFuel = false
  failed : m.failed = false
  -- the next admission number is not 0, so the next admitted thread's number is its own (`exec`'s `step`
  -- takes a new one for a thread numbered 0)
  admSeq_pos : 0 < m.admSeq
  -- no `grow` waits (the program has none)
  growers : m.growers = []

/-- **Shape (B), ended.** No timer, every session answered, in the order `served`. -/
structure SvfEnded (n : Nat) (m : Kernel.Machine) (served : List Nat) : Prop where
  perm : served.Perm (List.range n)
  least : SvfLeastFirst served []
  threads_length : m.threads.length = n
  answered : ∀ t ∈ served, SvfAnswered (getThread m.threads t) t (svfDoneAt 0 served t)
  timers : m.timers = []
  outOfFuel : m.outOfFuel = false
  failed : m.failed = false

/-! ### (A) at the loop's first step -/

theorem svfQueue_append : ∀ (l r : List Nat), svfQueue (l ++ r) = svfQueue l ++ svfQueue r
  | [], _ => rfl
  | x :: l, r => by
    show svfWaiter x 0 :: svfQueue (l ++ r) = svfWaiter x 0 :: (svfQueue l ++ svfQueue r)
    rw [svfQueue_append l r]

theorem svfWaiters_eq : ∀ k, svfWaiters k = svfQueue (List.range k)
  | 0 => rfl
  | k + 1 => by
    rw [List.range_succ, svfQueue_append, ← svfWaiters_eq k]
    rfl

theorem bounds_of_mem_range' : ∀ (n s w : Nat), w ∈ List.range' s n → s ≤ w ∧ w < s + n
  | 0, _, _, h => by simp [List.range'] at h
  | n + 1, s, w, h => by
    rcases List.mem_cons.1 (h : w ∈ s :: List.range' (s + 1) n) with rfl | h
    · omega
    · have := bounds_of_mem_range' n (s + 1) w h
      omega

theorem range_succ_cons (n : Nat) : List.range (n + 1) = 0 :: List.range' 1 n := by
  rw [List.range_eq_range']
  rfl

theorem svfPre_zero : svfPre 0 1 = svfServing0 := rfl

/-- The first iteration's start as `svf_first_start` has it, with what the first thread list is. -/
theorem svf_first_start_ts (n f : Nat) : ∃ ts ws, svfWaiters (n + 1) = svfWaiter 0 0 :: ws ∧
    svfWaitings (n + 1) = svfWaiting 0 0 :: ts ∧
    endOfInstant (svfP (n + 1)) (f + 3) (svfMid (n + 1) (n + 1) 0) = svfM2 n ts ws := by
  obtain ⟨ws, hws⟩ := svfWaiters_succ n
  obtain ⟨ts, hts⟩ := svfWaitings_succ n
  have hm : svfMid (n + 1) (n + 1) 0 = svfCons (n + 1) ts ws := by
    simp [svfMid, svfCons, hws, hts, arrivals, serials]
  have hsel := svf_first_admission n
  rw [hm, hws] at hsel
  refine ⟨ts, ws, hws, hts, ?_⟩
  rw [hm, svf_end_start, svf_start_iter, svf_admit_first _ _ _ _ hsel, svf_admitOne_first,
    svf_admitWaiting_spent, svf_iterTail_first, svf_endTail_first]

/-- The machine of the first iteration is (A): session 0 served (its prefill, `k = 0`: volume 1),
nothing answered, sessions `1 … n` waiting in serial order. -/
theorem svfM2_serving (n : Nat) (ts : List Thread) (ws : List Waiter)
    (hws : svfWaiters (n + 1) = svfWaiter 0 0 :: ws) (hts : svfWaitings (n + 1) = svfWaiting 0 0 :: ts) :
    SvfServing (n + 1) (svfM2 n ts ws) [] 0 0 (List.range' 1 n) := by
  have hq : ws = svfQueue (List.range' 1 n) := by
    rw [svfWaiters_eq, range_succ_cons] at hws
    exact (List.cons.inj hws).2.symm
  have hlen : ts.length = n := by
    have h := svfWaitings_length (n + 1)
    rw [hts] at h
    simpa using h
  refine ⟨?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_⟩
  · rw [range_succ_cons]
    exact List.Perm.refl _
  · refine ⟨fun y _ => ?_, trivial⟩
    show 1 + (3 * 0) % 5 ≤ 1 + (3 * y) % 5
    omega
  · show (svfServing0 :: ts).length = n + 1
    simp [hlen]
  · intro t ht
    simp at ht
  · intro w hw
    have hb := bounds_of_mem_range' n 1 w hw
    obtain ⟨i, rfl⟩ : ∃ i, w = i + 1 := ⟨w - 1, by omega⟩
    have h := getThread_svfWaitings (n + 1) (i + 1) (by omega)
    rw [hts] at h
    exact h
  · exact ⟨1, Nat.one_pos, rfl, 4, _, rfl⟩
  · show 0 < 1 + (3 * 0) % 5
    omega
  · rfl
  · exact ⟨0, rfl⟩
  · rfl
  · show [(⟨1, 1, ws, []⟩ : PoolState)] = _
    rw [hq]
  · rfl
  · rfl
  · rfl
  · rfl
  · show 0 < 2
    decide
  · rfl

/-- **(A) at the loop's first step, for every batch.** For every batch of `n + 1` sessions and every fuel
of at least 3 past the first instant's, the end of the settled first instant (the machine the event loop
starts from) is shape (A): session 0 served, its prefill running, nothing answered, sessions `1 … n`
waiting in serial order. -/
theorem svf_first_serving (n f : Nat) :
    SvfServing (n + 1) (endOfInstant (svfP (n + 1)) (f + 3) (svfMid (n + 1) (n + 1) 0)) [] 0 0 (List.range' 1 n) := by
  obtain ⟨ts, ws, hws, hts, h⟩ := svf_first_start_ts n f
  rw [h]
  exact svfM2_serving n ts ws hws hts

/-! ### From (B) to the claim -/

theorem svfVols_eq_map : ∀ l, svfVols l = l.map svfVol
  | [] => rfl
  | x :: l => by
    show svfVol x :: svfVols l = svfVol x :: l.map svfVol
    rw [svfVols_eq_map l]

/-- Served one at a time in the order `l` (no session twice), each session's answer is its completion. -/
theorem map_svfDoneAt : ∀ (acc : Nat) (l : List Nat), l.Nodup →
    l.map (svfDoneAt acc l) = completionsFrom acc (svfVols l)
  | _, [], _ => rfl
  | acc, x :: l, h => by
    have hn := List.nodup_cons.1 h
    have hrest : l.map (svfDoneAt acc (x :: l)) = l.map (svfDoneAt (acc + svfVol x) l) := by
      apply List.map_congr_left
      intro y hy
      have hxy : x ≠ y := fun e => hn.1 (e ▸ hy)
      simp [svfDoneAt, hxy]
    show svfDoneAt acc (x :: l) x :: l.map (svfDoneAt acc (x :: l)) =
      (acc + svfVol x) :: completionsFrom (acc + svfVol x) (svfVols l)
    rw [hrest, map_svfDoneAt (acc + svfVol x) l hn.2]
    simp [svfDoneAt]

/-- Least first, the volumes in that order are a shortest-first order of themselves. -/
theorem shortestFirst_of_least : ∀ (l : List Nat), SvfLeastFirst l [] → ShortestFirst (svfVols l) (svfVols l)
  | [], _ => ShortestFirst.done
  | x :: l, h => by
    have ih := shortestFirst_of_least l h.2
    show ShortestFirst (svfVol x :: svfVols l) (svfVol x :: svfVols l)
    refine ShortestFirst.next _ _ (svfVol x) (by simp) ?_ ?_
    · intro a ha
      rcases List.mem_cons.1 ha with rfl | ha
      · exact Nat.le_refl _
      · rw [svfVols_eq_map] at ha
        obtain ⟨y, hy, rfl⟩ := List.mem_map.1 ha
        exact h.1 y (by simp [hy])
    · show ShortestFirst ((svfVol x :: svfVols l).erase (svfVol x)) (svfVols l)
      rw [List.erase_cons_head]
      exact ih

/-- A shortest-first order of sizes is one of every permutation of them. -/
theorem ShortestFirst.perm {W order : List Nat} (h : ShortestFirst W order) :
    ∀ {W' : List Nat}, W.Perm W' → ShortestFirst W' order := by
  induction h with
  | done =>
    intro W' hp
    rw [List.Perm.eq_nil hp.symm]
    exact ShortestFirst.done
  | next W order v hv hmin _ ih =>
    intro W' hp
    exact ShortestFirst.next W' order v (hp.mem_iff.1 hv) (fun a ha => hmin a (hp.mem_iff.2 ha))
      (ih (hp.erase v))

theorem responses_of_getThread (f : Nat → Nat) : ∀ (ts : List Thread) (o : Nat),
    (∀ i < ts.length, responsesOf (getThread ts i).answers = [f (o + i)]) →
    responses ts = (List.range' o ts.length).map f
  | [], _, _ => rfl
  | th :: ts, o, h => by
    have h0 : responsesOf th.answers = [f o] := h 0 (by simp)
    have ih := responses_of_getThread f ts (o + 1) (fun i hi => by
      have h1 := h (i + 1) (by simp; omega)
      rw [show o + (i + 1) = o + 1 + i by omega] at h1
      exact h1)
    show appendNats (responsesOf th.answers) (responses ts) = (List.range' o (ts.length + 1)).map f
    rw [h0, ih]
    rfl

theorem observedValues_of_getThread (f : Nat → Nat) : ∀ (ts : List Thread) (o : Nat),
    (∀ i < ts.length, observedIn 0 (getThread ts i).observations = [f (o + i)]) →
    observedValues 0 ts = (List.range' o ts.length).map f
  | [], _, _ => rfl
  | th :: ts, o, h => by
    have h0 : observedIn 0 th.observations = [f o] := h 0 (by simp)
    have ih := observedValues_of_getThread f ts (o + 1) (fun i hi => by
      have h1 := h (i + 1) (by simp; omega)
      rw [show o + (i + 1) = o + 1 + i by omega] at h1
      exact h1)
    show appendNats (observedIn 0 th.observations) (observedValues 0 ts) = (List.range' o (ts.length + 1)).map f
    rw [h0, ih]
    rfl

theorem allEnded_of_getThread : ∀ (ts : List Thread), (∀ i < ts.length, (getThread ts i).k = []) →
    allEnded ts = true
  | [], _ => rfl
  | th :: ts, h => by
    have h0 : th.k = [] := h 0 (by simp)
    have ih := allEnded_of_getThread ts (fun i hi => h (i + 1) (by simp; omega))
    show ((match th.k with | [] => true | _ :: _ => false) && allEnded ts) = true
    rw [h0, ih]
    rfl

/-- **(B) gives the server.** At an ended machine of the shape (B), the observed volumes have the
volumes of `served` as a shortest-first order, and the responses are, in some order, that order's
completions from time 0: `svf_bound_of_server`'s hypothesis, with `order` the volumes of `served`. -/
theorem svf_server_of_ended (n : Nat) (m : Kernel.Machine) (served : List Nat) (h : SvfEnded n m served) :
    ShortestFirst (observedValues 0 m.threads) (svfVols served) ∧
    (responses m.threads).Perm (completionsFrom 0 (svfVols served)) := by
  have hmem : ∀ i < m.threads.length, i ∈ served := fun i hi =>
    h.perm.mem_iff.2 (List.mem_range.2 (by rw [← h.threads_length]; exact hi))
  have hresp := responses_of_getThread (svfDoneAt 0 served) m.threads 0 (fun i hi => by
    rw [(h.answered i (hmem i hi)).answers, Nat.zero_add]
    rfl)
  have hobs := observedValues_of_getThread svfVol m.threads 0 (fun i hi => by
    rw [(h.answered i (hmem i hi)).observations, Nat.zero_add]
    rfl)
  rw [h.threads_length, ← List.range_eq_range'] at hresp hobs
  have hnd : served.Nodup := h.perm.nodup_iff.2 (by simp [List.nodup_range])
  refine ⟨?_, ?_⟩
  · rw [hobs]
    apply ShortestFirst.perm (shortestFirst_of_least served h.least)
    rw [svfVols_eq_map]
    exact (h.perm.map svfVol)
  · rw [hresp, ← map_svfDoneAt 0 served hnd]
    exact (h.perm.map _).symm

/-- At (B) every session's session is over: the run ended. -/
theorem svf_ended_of_ended (n : Nat) (m : Kernel.Machine) (served : List Nat) (h : SvfEnded n m served) :
    m.ended = true := by
  have hk := allEnded_of_getThread m.threads (fun i hi =>
    (h.answered i (h.perm.mem_iff.2 (List.mem_range.2 (by rw [← h.threads_length]; exact hi)))).over)
  simp [Kernel.Machine.ended, h.outOfFuel, h.failed, hk]

/-- **The claim from (B).** For every batch and every fuel, if the run's final machine is the shape (B)
for some order `served`, the claim `svf_queueing` holds on that run (its generated `AtEndOfRun`
predicate: the run ended, and `2 · (Σ latency − Σ vol) ≤ 2 · (prefix_total(vol) − Σ vol)`), through
`svf_bound_of_server`. -/
theorem svf_queueing_of_ended (n fuel : Nat) (served : List Nat)
    (h : SvfEnded n (runProgram (svfP n) fuel) served) :
    Kernel.AtEndOfRun { Papers.Claims.Svf.program with sessions := n } fuel (fun m =>
      decide (((2 : Int) * (((sumNat (Kernel.responses m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))) ≤
      ((2 : Int) * (((prefixTotal (Kernel.observedValues 0 m.threads) : Nat) : Int) -
        ((sumNat (Kernel.observedValues 0 m.threads) : Nat) : Int))))) := by
  obtain ⟨hsf, hresp⟩ := svf_server_of_ended n _ served h
  have b := svf_bound_of_server n fuel (svfVols served) hsf hresp
  refine ⟨svf_ended_of_ended n _ served h, ?_⟩
  simp only [decide_eq_true_eq]
  exact b.2.1

end Papers
