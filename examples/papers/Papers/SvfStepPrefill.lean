module

public import Papers.SvfStepDecode

/-! # SVF (`svf.sq`): the prefill's end of a request with decodes, for every batch

One step of the event loop from the shape (A) (`Papers.SvfServing`) when the serving session's prefill
ends and its volume is above 1: the iteration's end at `t + 1` completes the prefill and makes the thread
ready (`svf_fire_prefill_end`); the settle runs it into `decode (vol − 1)`, which makes it the engine's
decode resident of `vol − 1` tokens and blocks it (`svf_settle_prefill_end`; the thread list is read at
the symbolic index `s` by a hypothesis on it, `getThread ts s`, and written by `setThread`, left
unevaluated); then the engine restarts on the decode (`svf_restart_decode`). Together
`svf_step_prefill`: the loop's step is the machine serving the decode, the clock one later.
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-- Session `s` in its prefill, its volume `v` written out: as `svfPre s adm` when `v = svfVol s`. -/
def svfPreV (s v adm : Nat) : Thread :=
  ⟨s, [0, 0, 4, v, s, 1, v], 1, 0, true,
   [.stmts [.step 0 true 0 (.bin .sub (.attr 3) (.num 1))], .release [⟨0, 1, false, false, 0, false, 0, 1⟩] (svfWaiter s 0),
    .stmts [.observe 0 (.attr 6)], .answer, .stmts []], [], [], adm, 0, [], []⟩

/-- Session `s` in its decodes, its volume `v` written out: as `svfDec s adm` when `v = svfVol s`. -/
def svfDecV (s v adm : Nat) : Thread :=
  ⟨s, [0, 0, 4, v, s, 1, v], 1, 0, true,
   [.stmts [], .release [⟨0, 1, false, false, 0, false, 0, 1⟩] (svfWaiter s 0),
    .stmts [.observe 0 (.attr 6)], .answer, .stmts []], [], [], adm, 0, [], []⟩

theorem svfPre_eq (s adm : Nat) : svfPre s adm = svfPreV s (svfVol s) adm := rfl

theorem svfDec_eq (s adm : Nat) : svfDec s adm = svfDecV s (svfVol s) adm := rfl

/-- The machine serving session `s`'s prefill (4 tokens, all scheduled) in the iteration from `t` to
`t + 1`, `reqs` held by it with the sessions `W` waiting. -/
def svfPreM (t sq q s adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t, sq, ts, [], [⟨t + 1, q, .iterationEnd 0⟩], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[⟨s, 4, false, adm, 4, 0⟩], true, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩

/-- The machine once the prefill ended at `t + 1`: the thread ready, the engine idle without resident. -/
def svfPreEnd (t sq s _adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, ts, [s], [], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[], false, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩

/-- The ready thread's first step, the thread read by its index. -/
theorem svf_runReady_one (n f t sq s adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    runReady (svfP n) (f + 1) (svfPreEnd t sq s adm sv admSeq arr ts sts W recs gs) =
      runReady (svfP n) f (exec (svfP n) f
        ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, svfQueue W, []⟩], false, [⟨[], false, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩
        (getThread ts s)) := rfl

/-- The thread in its prefill runs `decode (v − 1)` with `v = j + 2`: a decode resident of `j + 1` tokens,
the thread blocked in its decodes. -/
theorem svf_exec_decode (n f t sq s j a sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    exec (svfP n) (f + 1)
        ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, svfQueue W, []⟩], false, [⟨[], false, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩
        (svfPreV s (j + 2) (a + 1)) =
      svfDecEnd t sq s j (a + 1) sv admSeq arr (setThread ts s (svfDecV s (j + 2) (a + 1))) sts W recs gs := rfl

/-- The instant of the prefill's end settles: the thread runs into its decodes and blocks. -/
theorem svf_settle_prefill_end (n f t sq s j a sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) (hs : getThread ts s = svfPreV s (j + 2) (a + 1)) :
    settle (svfP n) (f + 3) (svfPreEnd t sq s (a + 1) sv admSeq arr ts sts W recs gs) =
      svfDecEnd t sq s j (a + 1) sv admSeq arr (setThread ts s (svfDecV s (j + 2) (a + 1))) sts W recs gs := by
  have h1 : settle (svfP n) (f + 3) (svfPreEnd t sq s (a + 1) sv admSeq arr ts sts W recs gs) =
      (let r := retryPools (svfP n) (f + 2) (countNats (svfP n).caps) 0
        (runReady (svfP n) (f + 2) (svfPreEnd t sq s (a + 1) sv admSeq arr ts sts W recs gs)) false
       if r.2 then settle (svfP n) (f + 2) r.1 else r.1) := rfl
  rw [h1, svf_runReady_one, hs, svf_exec_decode]
  rfl

/-- **The prefill's end, for every batch.** From a machine serving session `s`'s prefill in the iteration
from `t` to `t + 1` (its thread in its prefill, its volume `j + 2`, admitted with number `a + 1`), the
event loop's step is the machine serving its decode of `j + 1` tokens from `t + 1` (one scheduled, the
iteration's record kept, its end at `t + 2`), the thread in its decodes, the queue as it was. -/
theorem svf_step_prefill (n f t sq q s j a sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) (hs : getThread ts s = svfPreV s (j + 2) (a + 1)) :
    loop (svfP n) (f + 4) (svfPreM t sq q s (a + 1) sv admSeq arr ts sts W recs gs) =
      loop (svfP n) (f + 3)
        (svfDecM (t + 1) (sq + 1) sq s (j + 1) (a + 1) (sv + 1) admSeq arr
          (setThread ts s (svfDecV s (j + 2) (a + 1))) sts W
          (⟨t + 1, 1, 0, 1, 1, 1, sv, arr, 0, 0, 0⟩ :: recs)
          (setProgress gs s ((getProgress gs s).prefillToken t (t + 1)))) := by
  rw [svf_loop_step (svfP n) (f + 3) (svfPreM t sq q s (a + 1) sv admSeq arr ts sts W recs gs) q (.iterationEnd 0) rfl]
  have hfire : fire (svfP n) { svfPreM t sq q s (a + 1) sv admSeq arr ts sts W recs gs with
      now := (svfPreM t sq q s (a + 1) sv admSeq arr ts sts W recs gs).now + 1, timers := [] } (.iterationEnd 0) =
      svfPreEnd t sq s (a + 1) sv admSeq arr ts sts W recs
        (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) :=
    svf_fire_prefill_end n t sq s (a + 1) sv admSeq arr ts sts (svfQueue W) recs gs
  rw [hfire, svf_settle_prefill_end n f t sq s j a sv admSeq arr ts sts W recs _ hs,
    svf_restart_decode n (f + 1)]

end Papers
