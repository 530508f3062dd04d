module

public import Papers.SvfShape

/-! # SVF (`svf.sq`): step lemmas of the simulation, for every batch

The pieces of a `loop` step from the shape (A) (`Papers.SvfServing`), each over machines whose clock,
thread list, queue, serving session and tokens left are symbolic (so for every batch and every point of
the run), each the interpreter's own code, by `rfl` where the kernel can evaluate it and by rewriting
where it cannot (`select` over a symbolic queue):

* `svf_loop_step`: the event loop's step from a machine whose one timer is at `now + 1` fires it at
  `now + 1` (the clock's `max` rewritten);
* `svf_fire_decode`, `svf_fire_decode_last`, `svf_fire_prefill_end`: an iteration's end applies its
  tokens: a decode with tokens left keeps its resident with one token less (nothing ready), the last
  decode's and a prefill's end make the thread ready and leave the engine without resident;
* `svf_settle_idle`: with nothing ready, the instant's settle changes nothing (`reqs` is admitted by the
  engine only);
* `svf_dueNow_next`: with the one timer at `now + 1`, no event is due now;
* `svf_admitWaiting_full`: while the serving session holds `reqs`' one unit, the engine's
  `admit waiting` admits no one, whatever hold `select` offers (`used + 1 > cap`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-- The event loop's step from a machine whose one timer is its next instant's: the clock moves to it. -/
theorem svf_loop_step (p : Program) (f : Nat) (m : Kernel.Machine) (q : Nat) (w : Wake)
    (h : m.timers = [⟨m.now + 1, q, w⟩]) :
    loop p (f + 1) m = loop p f (endOfInstant p f (settle p f (fire p { m with now := m.now + 1, timers := [] } w))) := by
  simp only [loop, h]
  rw [show Nat.max m.now (m.now + 1) = m.now + 1 from if_pos (Nat.le_succ _)]

/-- With the one timer at `now + 1`, no event is due now. -/
theorem svf_dueNow_next (m : Kernel.Machine) (q : Nat) (w : Wake) (h : m.timers = [⟨m.now + 1, q, w⟩]) :
    m.dueNow = false := by
  simp [Kernel.Machine.dueNow, h]

/-- With nothing ready and no `grow` waiting, the instant's settle changes nothing: no thread runs, and the one
pool's queue is admitted by the engine only. -/
theorem svf_settle_idle (n f : Nat) (m : Kernel.Machine) (h : m.ready = []) (hg : m.growers = []) :
    settle (svfP n) (f + 2) m = m := by
  cases m
  simp only at h hg
  subst h hg
  rfl

/-- A decode's iteration ends with tokens left: its resident keeps `k + 1` tokens and is unscheduled, the
engine idle, the turn's progress takes the token, nothing ready. -/
theorem svf_fire_decode (n t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (qs : List Waiter) (recs : List Kernel.Iteration) (gs : List Progress) :
    fire (svfP n) ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, qs, []⟩], false,
      [⟨[⟨s, k + 2, true, adm, 1, 0⟩], true, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩ (.iterationEnd 0) =
    ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, qs, []⟩], false,
      [⟨[⟨s, k + 1, true, adm, 0, 0⟩], false, t, sv, recs, []⟩], admSeq, arr,
      setProgress gs s ((getProgress gs s).decodeToken t (t + 1)), false, []⟩ := rfl

/-- The last decode's iteration ends: the resident leaves, its thread is ready. -/
theorem svf_fire_decode_last (n t sq s adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (qs : List Waiter) (recs : List Kernel.Iteration) (gs : List Progress) :
    fire (svfP n) ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, qs, []⟩], false,
      [⟨[⟨s, 1, true, adm, 1, 0⟩], true, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩ (.iterationEnd 0) =
    ⟨t + 1, sq, ts, [s], [], sts, [⟨1, 1, qs, []⟩], false,
      [⟨[], false, t, sv, recs, []⟩], admSeq, arr,
      setProgress gs s ((getProgress gs s).decodeToken t (t + 1)), false, []⟩ := rfl

/-- A prefill's iteration ends (its 4 tokens all scheduled): the resident leaves, its thread is ready,
the turn's progress takes the prefill's token. -/
theorem svf_fire_prefill_end (n t sq s adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (qs : List Waiter) (recs : List Kernel.Iteration) (gs : List Progress) :
    fire (svfP n) ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, qs, []⟩], false,
      [⟨[⟨s, 4, false, adm, 4, 0⟩], true, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩ (.iterationEnd 0) =
    ⟨t + 1, sq, ts, [s], [], sts, [⟨1, 1, qs, []⟩], false,
      [⟨[], false, t, sv, recs, []⟩], admSeq, arr,
      setProgress gs s ((getProgress gs s).prefillToken t (t + 1)), false, []⟩ := rfl

/-! ### No admission while `reqs` is held -/

theorem svfQueue_length : ∀ W, (svfQueue W).length = W.length
  | [] => rfl
  | _ :: W => by
    show (svfQueue W).length + 1 = W.length + 1
    rw [svfQueue_length W]

theorem getWaiter_svfQueue_on : ∀ (W : List Nat) (j : Nat), j < W.length → (getWaiter (svfQueue W) j).on = svfOn
  | [], _, h => absurd h (by simp)
  | _ :: _, 0, _ => rfl
  | _ :: W, j + 1, h => getWaiter_svfQueue_on W j (by simp at h; omega)

theorem svfQueue_head : ∀ (W : List Nat), ∀ y ∈ svfQueue W, y.head = false
  | [], _, h => by simp [svfQueue] at h
  | x :: W, y, h => by
    rcases List.mem_cons.1 (h : y ∈ svfWaiter x 0 :: svfQueue W) with rfl | h
    · rfl
    · exact svfQueue_head W y h

/-- A hold of one `reqs` unit does not fit while the serving session holds the pool's one unit. -/
theorem svf_fits_full (n serial : Nat) (stage attrs : List Nat) (now : Nat) (qs : List Waiter) (es : List Kernel.Entry)
    (ts : List Kernel.Thread) :
    fits (svfP n) ts ⟨(svfP n).caps, [⟨1, 1, qs, es⟩], serial, stage⟩ attrs now svfOn = false := rfl

/-- **While `reqs` is held, no admission.** For every machine whose `reqs` pool holds one unit (the
serving session's) with the sessions `W` waiting, the engine's `admit waiting` admits no one and changes
nothing, whatever hold `select` offers over the symbolic queue. -/
theorem svf_admitWaiting_full (n f : Nat) (m : Kernel.Machine) (b : Kernel.Batch) (W : List Nat)
    (hp : m.pools = [⟨1, 1, svfQueue W, []⟩]) :
    admitWaiting (svfP n) 0 0 none true (f + 1) m b = (m, b) := by
  cases W with
  | nil =>
    have hfq : firstQueue 0 0 (svfP n).admitVia m.pools = none := by rw [hp]; rfl
    simp [admitWaiting, hfq]
  | cons w W =>
    have hfq : firstQueue 0 0 (svfP n).admitVia m.pools = some 0 := by rw [hp]; rfl
    have hq : (getPool m.pools 0).queue = svfWaiter w 0 :: svfQueue W := by rw [hp]; rfl
    have hhf : HeadFree m.pools := by
      intro x hx y hy
      rw [hp] at hx
      simp only [List.mem_singleton] at hx
      subst hx
      exact svfQueue_head (w :: W) y hy
    have hsel := (svf_admits_least_volume n m hhf (svfWaiter w 0) (svfQueue W) hq).1
    rw [svfQueue_length] at hsel
    have hon : (getWaiter (svfWaiter w 0 :: svfQueue W)
        (select (svfP n) m 0 (svfWaiter w 0 :: svfQueue W))).on = svfOn :=
      getWaiter_svfQueue_on (w :: W) _ (by simpa using hsel)
    simp only [admitWaiting, hfq, hq]
    split
    · rfl
    · split
      · rename_i hfit
        exfalso
        rw [hon, hp, svf_fits_full] at hfit
        exact Bool.false_ne_true hfit
      · rfl

end Papers
