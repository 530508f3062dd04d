module

public import Papers.SvfStep

/-! # SVF (`svf.sq`): the decode step, for every batch

One step of the event loop from the shape (A) (`Papers.SvfServing`) when the serving session decodes
with tokens left after the running iteration (`k > 0` in the docs' words): the iteration's end at
`t + 1` leaves the decode resident with one token less (`svf_fire_decode`), nothing is ready and the
instant settles as it is (`svf_settle_idle`), the engine restarts on it (`svf_serveIn_decode`: the
resident served its one token; the symbolic thread index is compared with itself there, which the
kernel cannot evaluate, so this function is rewritten by `simp`), `admit waiting` admits no one while
`reqs` is held (`svf_admitWaiting_full`), the iteration's record and its end at `t + 2` are set
(`svf_iterTail_decode`, by `rfl`), and nothing more happens at the instant (`svf_endTail_decode`).
Together `svf_step_decode`: the loop's step is the machine of the next decode iteration, the clock one
later, one token less, for every batch, clock, serving session, queue and token count.
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-- The machine serving a decode of `rem` tokens (`rem` scheduled 1) of session `s`, the iteration from
`t` to `t + 1`, `reqs` held by it with the sessions `W` waiting. -/
def svfDecM (t sq q s rem adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t, sq, ts, [], [⟨t + 1, q, .iterationEnd 0⟩], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[⟨s, rem, true, adm, 1, 0⟩], true, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩

/-- The machine after a decode's end at `t + 1` with `k + 1` tokens left, before the engine restarts (the
turns' progress `gs`). -/
def svfDecEnd (t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[⟨s, k + 1, true, adm, 0, 0⟩], false, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩

/-- The machine once the engine served the decode its one token (before the iteration's record). -/
def svfDecServed (t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[⟨s, k + 1, true, adm, 1, 0⟩], false, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩

theorem svf_serveIn_decode (n t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    serveIn (svfP n) 0 0 none [s] (svfDecEnd t sq s k adm sv admSeq arr ts sts W recs gs) ⟨4, 0, 0, 0, 0, 0, false⟩ =
      (svfDecServed t sq s k adm sv admSeq arr ts sts W recs gs, ⟨4, 1, 0, 1, 0, 0, false⟩) := by
  simp [serveIn, svfDecEnd, svfDecServed, getEngineState, residentOf, lets, Resident.passedOver, tokensFor,
    Kernel.Machine.serveOne, Kernel.Machine.served, setSched, setEngineState, Batch.serve, Batch.budget]

theorem svf_start_decode (n f t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    startIteration (svfP n) f 0 (getEngine (svfP n).engines 0) (svfDecEnd t sq s k adm sv admSeq arr ts sts W recs gs) =
      svfIterTail (svfP n) 0 0 (getEngine (svfP n).engines 0)
        (admitWaiting (svfP n) 0 0 none true f
          (serveIn (svfP n) 0 0 none [s] (svfDecEnd t sq s k adm sv admSeq arr ts sts W recs gs) ⟨4, 0, 0, 0, 0, 0, false⟩).1
          (serveIn (svfP n) 0 0 none [s] (svfDecEnd t sq s k adm sv admSeq arr ts sts W recs gs) ⟨4, 0, 0, 0, 0, 0, false⟩).2) :=
  rfl

/-- The iteration's record (one decode token, one resident, demand 1) and its end at `t + 2`. -/
theorem svf_iterTail_decode (n t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    svfIterTail (svfP n) 0 0 (getEngine (svfP n).engines 0)
        (svfDecServed t sq s k adm sv admSeq arr ts sts W recs gs, ⟨4, 1, 0, 1, 0, 0, false⟩) =
      svfDecM (t + 1) (sq + 1) sq s (k + 1) adm (sv + 1) admSeq arr ts sts W
        (⟨t + 1, 1, 0, 1, 1, 1, sv, arr, 0, 0, 0⟩ :: recs) gs := rfl

theorem svf_end_decode (n f t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    endOfInstant (svfP n) f (svfDecEnd t sq s k adm sv admSeq arr ts sts W recs gs) =
      svfEndTail (svfP n) f (startIteration (svfP n) f 0 (getEngine (svfP n).engines 0)
        (svfDecEnd t sq s k adm sv admSeq arr ts sts W recs gs)) := rfl

/-- Nothing more happens at the instant once the iteration started: nothing ready, its end not now, the
engine busy. -/
theorem svf_endTail_decode (n f t sq q s rem adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    svfEndTail (svfP n) (f + 2) (svfDecM t sq q s rem adm sv admSeq arr ts sts W recs gs) =
      svfDecM t sq q s rem adm sv admSeq arr ts sts W recs gs := by
  have hs := svf_settle_idle n f (svfDecM t sq q s rem adm sv admSeq arr ts sts W recs gs) rfl rfl
  have hd := svf_dueNow_next (svfDecM t sq q s rem adm sv admSeq arr ts sts W recs gs) q (.iterationEnd 0) rfl
  unfold svfEndTail
  simp only [hs, hd]
  rfl

/-- **The engine restarts on a decode.** From the instant of a decode's end (or of a decode's start: the
resident has `k + 1` tokens, none scheduled, the engine idle, nothing ready, no timer, `reqs` held), the
instant's end is the next iteration: the decode served its one token, the iteration's record kept, its
end at `t + 2`, nothing admitted. -/
theorem svf_restart_decode (n f t sq s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    endOfInstant (svfP n) (f + 2) (svfDecEnd t sq s k adm sv admSeq arr ts sts W recs gs) =
      svfDecM (t + 1) (sq + 1) sq s (k + 1) adm (sv + 1) admSeq arr ts sts W
        (⟨t + 1, 1, 0, 1, 1, 1, sv, arr, 0, 0, 0⟩ :: recs) gs := by
  rw [svf_end_decode, svf_start_decode, svf_serveIn_decode, svf_admitWaiting_full n (f + 1)
    (svfDecServed t sq s k adm sv admSeq arr ts sts W recs gs) ⟨4, 1, 0, 1, 0, 0, false⟩ W rfl,
    svf_iterTail_decode, svf_endTail_decode]

/-- **The decode step, for every batch.** From a machine serving session `s`'s decode of `k + 2` tokens
(one scheduled) in the iteration from `t` to `t + 1`, `reqs` held by it and any holds waiting, the event
loop's step is the machine of the next iteration: the clock at `t + 1`, the decode with `k + 1` tokens,
one scheduled, its record kept, its end at `t + 2`, the queue and every thread as they were. -/
theorem svf_step_decode (n f t sq q s k adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    loop (svfP n) (f + 3) (svfDecM t sq q s (k + 2) adm sv admSeq arr ts sts W recs gs) =
      loop (svfP n) (f + 2)
        (svfDecM (t + 1) (sq + 1) sq s (k + 1) adm (sv + 1) admSeq arr ts sts W
          (⟨t + 1, 1, 0, 1, 1, 1, sv, arr, 0, 0, 0⟩ :: recs)
          (setProgress gs s ((getProgress gs s).decodeToken t (t + 1)))) := by
  rw [svf_loop_step (svfP n) (f + 2) (svfDecM t sq q s (k + 2) adm sv admSeq arr ts sts W recs gs) q (.iterationEnd 0) rfl]
  have hfire : fire (svfP n) { svfDecM t sq q s (k + 2) adm sv admSeq arr ts sts W recs gs with
      now := (svfDecM t sq q s (k + 2) adm sv admSeq arr ts sts W recs gs).now + 1, timers := [] } (.iterationEnd 0) =
      svfDecEnd t sq s k adm sv admSeq arr ts sts W recs
        (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) :=
    svf_fire_decode n t sq s k adm sv admSeq arr ts sts (svfQueue W) recs gs
  rw [hfire, svf_settle_idle n f _ rfl rfl, svf_restart_decode]

end Papers
