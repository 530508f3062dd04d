module

public import Papers.SvfStepPrefill

/-! # SVF (`svf.sq`): the serving session's answer, and the run's last step, for every batch

When the serving session's last token comes (its last decode's end, or the prefill's end of a request of
volume 1), its thread is ready and the settle runs the rest of its server: the hold's release (`reqs` free),
the observe of its volume and the answer, at the clock `a`, and its session ends (`svf_exec_answer`; from
the prefill, `svf_exec_pre_one` first runs its `decode (0)`, which completes at once). With no session
waiting the engine has no work and the instant ends as it is; no timer is left, so the event loop stops:
`svf_step_last_ended` (from a last decode) and `svf_step_pre_one_ended` (from a prefill of volume 1) give
the run's final machine, the session answered at `t + 1`. The same step with sessions waiting, where the
engine then admits the one `select` offers (a least volume) at a symbolic index into a symbolic queue, is
`Papers.SvfAdmitStep`'s.
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-- What an answered turn's tokens are, as its progress `g` has them (none if no token came). -/
def svfToks (s : Nat) (g : Progress) : List TurnTokens :=
  if g.first = 0 then [] else [⟨s, 1, g.first, g.firstStart, g.lastStart, g.preempted, g.cached⟩]

/-- Session `s` (volume `v`, admitted with number `adm`) answered at `a`: its one turn submitted at 0 and
answered at `a`, its volume observed at `a`, its session over. -/
def svfDoneV (s v adm a : Nat) (toks : List TurnTokens) : Thread :=
  ⟨s, [0, 0, 4, v, s, 1, v], 1, 0, false, [], [⟨s, 1, 0, a⟩], [⟨s, 1, 0, a, v⟩], adm, a + 1, toks, []⟩

theorem svfDoneV_answered (s v adm a : Nat) (toks : List TurnTokens) (hv : v = svfVol s) :
    SvfAnswered (svfDoneV s v adm a toks) s a := by
  subst hv
  exact ⟨rfl, rfl, rfl⟩

/-- The thread in its decodes, its last token come, runs its hold's release, the observe and the answer
at the clock `a`, and its session ends. -/
theorem svf_exec_answer (n f a sq s v adm admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (engs : List EngineState) (gs : List Progress) :
    exec (svfP n) (f + 7) ⟨a, sq, ts, [], [], sts, [⟨1, 1, svfQueue W, []⟩], false, engs, admSeq, arr, gs, false, []⟩
        (svfDecV s v adm) =
      ⟨a, sq, setThread ts s (svfDoneV s v adm a (svfToks s (getProgress gs s))), [], [], sts,
        [⟨0, 0, svfQueue W, []⟩], false, engs, admSeq, arr, gs, false, []⟩ := rfl

/-- A prefill of volume 1 ends: its `decode (0)` completes at once, the thread is in its decodes' place. -/
theorem svf_exec_pre_one (n f : Nat) (m : Kernel.Machine) (s adm : Nat) :
    exec (svfP n) (f + 1) m (svfPreV s 1 adm) = exec (svfP n) f m (svfDecV s 1 adm) := rfl

/-- The machine once the serving session `s` is answered at `t + 1`, no session waiting: `reqs` free, the
engine idle without resident, no timer. -/
def svfEndM (t sq s v adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, setThread ts s (svfDoneV s v adm (t + 1) (svfToks s (getProgress gs s))), [], [], sts,
    [⟨0, 0, [], []⟩], false, [⟨[], false, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩

/-- The instant of the last token settles: the thread answers and its session ends. -/
theorem svf_settle_answer (n f t sq s v adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (recs : List Kernel.Iteration) (gs : List Progress) (hs : getThread ts s = svfDecV s v adm) :
    settle (svfP n) (f + 9) (svfPreEnd t sq s adm sv admSeq arr ts sts [] recs gs) =
      svfEndM t sq s v adm sv admSeq arr ts sts recs gs := by
  have h1 : settle (svfP n) (f + 9) (svfPreEnd t sq s adm sv admSeq arr ts sts [] recs gs) =
      (let r := retryPools (svfP n) (f + 8) (countNats (svfP n).caps) 0
        (runReady (svfP n) (f + 8) (svfPreEnd t sq s adm sv admSeq arr ts sts [] recs gs)) false
       if r.2 then settle (svfP n) (f + 8) r.1 else r.1) := rfl
  rw [h1, svf_runReady_one, hs, svf_exec_answer]
  rfl

/-- **The run's last step, from a last decode.** From a machine serving session `s`'s last decode token
(its thread in its decodes, volume `v`) in the iteration from `t` to `t + 1`, no session waiting, the event
loop fires its end, the session answers at `t + 1`, and the loop stops: the run's final machine is
`svfEndM`, `reqs` free, no timer, no resident. -/
theorem svf_step_last_ended (n f t sq q s v adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (recs : List Kernel.Iteration) (gs : List Progress) (hs : getThread ts s = svfDecV s v adm) :
    loop (svfP n) (f + 10) (svfDecM t sq q s 1 adm sv admSeq arr ts sts [] recs gs) =
      svfEndM t sq s v adm sv admSeq arr ts sts recs (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) := by
  rw [svf_loop_step (svfP n) (f + 9) (svfDecM t sq q s 1 adm sv admSeq arr ts sts [] recs gs) q (.iterationEnd 0) rfl]
  have hfire : fire (svfP n) { svfDecM t sq q s 1 adm sv admSeq arr ts sts [] recs gs with
      now := (svfDecM t sq q s 1 adm sv admSeq arr ts sts [] recs gs).now + 1, timers := [] } (.iterationEnd 0) =
      svfPreEnd t sq s adm sv admSeq arr ts sts [] recs
        (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) :=
    svf_fire_decode_last n t sq s adm sv admSeq arr ts sts (svfQueue []) recs gs
  rw [hfire, svf_settle_answer n f t sq s v adm sv admSeq arr ts sts recs _ hs]
  rfl

/-- **The run's last step, from a prefill of volume 1.** The same from a machine serving the prefill of a
session of volume 1, no session waiting: the session answers at `t + 1` and the loop stops. -/
theorem svf_step_pre_one_ended (n f t sq q s adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (recs : List Kernel.Iteration) (gs : List Progress) (hs : getThread ts s = svfPreV s 1 adm) :
    loop (svfP n) (f + 11) (svfPreM t sq q s adm sv admSeq arr ts sts [] recs gs) =
      svfEndM t sq s 1 adm sv admSeq arr ts sts recs (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) := by
  rw [svf_loop_step (svfP n) (f + 10) (svfPreM t sq q s adm sv admSeq arr ts sts [] recs gs) q (.iterationEnd 0) rfl]
  have hfire : fire (svfP n) { svfPreM t sq q s adm sv admSeq arr ts sts [] recs gs with
      now := (svfPreM t sq q s adm sv admSeq arr ts sts [] recs gs).now + 1, timers := [] } (.iterationEnd 0) =
      svfPreEnd t sq s adm sv admSeq arr ts sts [] recs
        (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) :=
    svf_fire_prefill_end n t sq s adm sv admSeq arr ts sts (svfQueue []) recs gs
  have hset : settle (svfP n) (f + 10) (svfPreEnd t sq s adm sv admSeq arr ts sts [] recs
        (setProgress gs s ((getProgress gs s).prefillToken t (t + 1)))) =
      svfEndM t sq s 1 adm sv admSeq arr ts sts recs (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) := by
    have h1 : settle (svfP n) (f + 10) (svfPreEnd t sq s adm sv admSeq arr ts sts [] recs
          (setProgress gs s ((getProgress gs s).prefillToken t (t + 1)))) =
        (let r := retryPools (svfP n) (f + 9) (countNats (svfP n).caps) 0
          (runReady (svfP n) (f + 9) (svfPreEnd t sq s adm sv admSeq arr ts sts [] recs
            (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))))) false
         if r.2 then settle (svfP n) (f + 9) r.1 else r.1) := rfl
    rw [h1, svf_runReady_one, hs, svf_exec_pre_one, svf_exec_answer]
    rfl
  rw [hfire, hset]
  rfl

end Papers
