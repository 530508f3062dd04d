module

public import Papers.SvfAdmit

/-! # SVF (`svf.sq`): the next admission after an answer, for every batch

The one step of the simulation `SvfInvEnd` left open, on machines: the serving session's last token
comes with sessions still waiting. The settle answers it and frees `reqs` (`svf_settle_answer_waiting`,
`svf_settle_answer_pre_waiting`: as `svf_settle_answer`, for any queue), and the instant's end starts the
engine's next iteration (`svf_end_answer`, `svf_start_answer`): `admit waiting` admits the hold `select`
offers at a symbolic index `j` of the symbolic queue `svfQueue (w :: W)`. Neither the kernel nor `rfl`
can pass `select`, `getWaiter`, `removeWaiter` or `getThread` there, so each function is rewritten around
them by the queue's lemmas (`getWaiter_svfQueue`, `removeWaiter_svfQueue`) and a hypothesis on the
thread list, the rest evaluated by `rfl` on machines written out:

* `admitWaiting_admit` (any program): `admitWaiting` whose offered hold fits is `admitOne` of it, then
  `admitWaiting` again;
* `svf_admitWaiter`: the hold at `j` admitted: session `x = svfAt (w :: W) j` holds `reqs`' unit, the
  queue `svfQueue (svfErase (w :: W) j)`, its thread in its hold's body (`svfAdmitted`);
* `svf_exec_admitted`: the thread runs its prefill's `step` and blocks, the engine's one resident;
* `svf_admitOne`: with the engine serving its 4-token prefill whole (the resident's self-comparisons
  rewritten by `simp`, as in `svf_serveIn_decode`);
* `svf_admitWaiting_done`, `svf_iterTail_admit`, `svf_endTail_pre`: the budget spent, the iteration's
  record and its end at `t + 2`, nothing more at the instant.

Together `svf_admit_next`: from the answered instant (the machine `svfFreeM`), the instant's end is
`svfPreM`, session `x` served from `t + 1`, `x` of least volume (`svf_select_least`); and the loop's step
from the last decode (`svf_step_admit_decode`) or from a prefill of volume 1 (`svf_step_admit_pre`).
-/

@[expose] public section

namespace Papers

open Serq Kernel

/-! ### The thread list and the queue's holds -/

theorem setThread_setThread_self : ∀ (ts : List Thread) (s : Nat) (x y : Thread),
    setThread (setThread ts s x) s y = setThread ts s y
  | [], _, _, _ => rfl
  | _ :: _, 0, _, _ => rfl
  | t :: ts, s + 1, x, y => by
    show t :: setThread (setThread ts s x) s y = t :: setThread ts s y
    rw [setThread_setThread_self ts s x y]

theorem svfWaiter_thread (s t : Nat) : (svfWaiter s t).thread = s := rfl

/-! ### The answered instant -/

/-- The machine once the serving session answered at `t + 1` (its thread list `ts` written), `reqs` free
with the sessions `W` waiting, the engine idle without resident, no timer. -/
def svfFreeM (t sq sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, ts, [], [], sts, [⟨0, 0, svfQueue W, []⟩], false, [⟨[], false, t, sv, recs, []⟩], admSeq, arr, gs, false, []⟩

theorem svfFreeM_pools (t sq sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) :
    (svfFreeM t sq sv admSeq arr ts sts W recs gs).pools = [⟨0, 0, svfQueue W, []⟩] := rfl

theorem svfFreeM_threads (t sq sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) :
    (svfFreeM t sq sv admSeq arr ts sts W recs gs).threads = ts := rfl

/-- The instant of a last decode token settles with sessions waiting: the thread answers and its session
ends, `reqs` free (no pool is retried at settle time: `reqs` is the engine's). -/
theorem svf_settle_answer_waiting (n f t sq s v adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) (hs : getThread ts s = svfDecV s v adm) :
    settle (svfP n) (f + 9) (svfPreEnd t sq s adm sv admSeq arr ts sts W recs gs) =
      svfFreeM t sq sv admSeq arr (setThread ts s (svfDoneV s v adm (t + 1) (svfToks s (getProgress gs s)))) sts W
        recs gs := by
  have h1 : settle (svfP n) (f + 9) (svfPreEnd t sq s adm sv admSeq arr ts sts W recs gs) =
      (let r := retryPools (svfP n) (f + 8) (countNats (svfP n).caps) 0
        (runReady (svfP n) (f + 8) (svfPreEnd t sq s adm sv admSeq arr ts sts W recs gs)) false
       if r.2 then settle (svfP n) (f + 8) r.1 else r.1) := rfl
  rw [h1, svf_runReady_one, hs, svf_exec_answer]
  rfl

/-- The same from a prefill of volume 1: its `decode (0)` completes at once, then the answer. -/
theorem svf_settle_answer_pre_waiting (n f t sq s adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) (hs : getThread ts s = svfPreV s 1 adm) :
    settle (svfP n) (f + 10) (svfPreEnd t sq s adm sv admSeq arr ts sts W recs gs) =
      svfFreeM t sq sv admSeq arr (setThread ts s (svfDoneV s 1 adm (t + 1) (svfToks s (getProgress gs s)))) sts W
        recs gs := by
  have h1 : settle (svfP n) (f + 10) (svfPreEnd t sq s adm sv admSeq arr ts sts W recs gs) =
      (let r := retryPools (svfP n) (f + 9) (countNats (svfP n).caps) 0
        (runReady (svfP n) (f + 9) (svfPreEnd t sq s adm sv admSeq arr ts sts W recs gs)) false
       if r.2 then settle (svfP n) (f + 9) r.1 else r.1) := rfl
  rw [h1, svf_runReady_one, hs, svf_exec_pre_one, svf_exec_answer]
  rfl

/-- The answered instant's end: the engine is idle with a hold waiting, so it starts an iteration. -/
theorem svf_end_answer (n f t sq sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState) (w : Nat)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    endOfInstant (svfP n) f (svfFreeM t sq sv admSeq arr ts sts (w :: W) recs gs) =
      svfEndTail (svfP n) f (startIteration (svfP n) f 0 (getEngine (svfP n).engines 0)
        (svfFreeM t sq sv admSeq arr ts sts (w :: W) recs gs)) := rfl

/-- The iteration's plan: no resident to serve, then `admit waiting` with the budget 4. -/
theorem svf_start_answer (n f t sq sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    startIteration (svfP n) f 0 (getEngine (svfP n).engines 0) (svfFreeM t sq sv admSeq arr ts sts W recs gs) =
      svfIterTail (svfP n) 0 0 (getEngine (svfP n).engines 0)
        (admitWaiting (svfP n) 0 0 none true f (svfFreeM t sq sv admSeq arr ts sts W recs gs)
          ⟨4, 0, 0, 0, 0, 0, false⟩) := rfl

/-! ### The admission at a symbolic index -/

/-- `admit waiting` admits the hold its queue offers when it fits (any program): `admitOne` of it, then
`admit waiting` again with the fuel one less. -/
theorem admitWaiting_admit (p : Program) (s chunk : Nat) (only : Option Expr) (gated : Bool) (f : Nat)
    (m : Kernel.Machine) (b : Kernel.Batch) (i j : Nat)
    (hb : (b.budget = 0 || b.passed || (gated && b.preempted != 0)) = false)
    (hfq : firstQueue s 0 p.admitVia m.pools = some i)
    (hsel : select p m i (getPool m.pools i).queue = j)
    (hfit : fits p m.threads ⟨p.caps, m.pools, (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).serial,
        admissionStage chunk b.budget⟩ (getThread m.threads (getWaiter (getPool m.pools i).queue j).thread).attrs m.now
        (getWaiter (getPool m.pools i).queue j).on = true) :
    admitWaiting p s chunk only gated (f + 1) m b =
      admitWaiting p s chunk only gated f (admitOne p f s chunk i j only m b).1 (admitOne p f s chunk i j only m b).2 := by
  simp only [admitWaiting, hb, hfq, hsel, hfit, Bool.false_eq_true, eq_self, ↓reduceIte]

/-- Session `x`'s thread once its hold is admitted (admission number `adm`): its hold's body next (the
prefill, the decodes), then the release of `reqs`' unit, the observe, the answer, the session's end. -/
def svfAdmitted (x adm : Nat) : Thread :=
  ⟨x, [0, 0, 4, svfVol x, x, 1, svfVol x], 1, 0, true,
   [.stmts svfBody, .release [⟨0, 1, false, false, 0, false, 0, 1⟩] (svfWaiter x 0),
    .stmts [.observe 0 (.attr 6)], .answer, .stmts []], [], [], adm, 0, [], []⟩

/-- The machine once the hold of session `x` is admitted: `reqs` held, the others `W` waiting. -/
def svfAdmM1 (t sq x a sv arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, setThread ts x (svfAdmitted x (a + 1)), [], [], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[], false, t, sv, recs, []⟩], a + 2, arr, gs, false, []⟩

/-- The machine once the admitted thread ran into its prefill: the engine's one resident, nothing
scheduled yet. -/
def svfAdmM2 (t sq x a sv arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[⟨x, 4, false, a + 1, 0, 0⟩], false, t, sv, recs, []⟩], a + 2, arr, gs, false, []⟩

/-- The machine once the engine scheduled the prefill's 4 tokens. -/
def svfAdmM3 (t sq x a sv arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) : Kernel.Machine :=
  ⟨t + 1, sq, ts, [], [], sts, [⟨1, 1, svfQueue W, []⟩], false,
   [⟨[⟨x, 4, false, a + 1, 4, 0⟩], false, t, sv, recs, []⟩], a + 2, arr, gs, false, []⟩

/-- The hold at `j` admitted: out of the queue, `reqs`' unit taken, its thread in its hold's body. The
queue and the thread list are read at the symbolic index through the hypotheses. -/
theorem svf_admitWaiter (n t sq sv a arr j x : Nat) (ts : List Thread) (sts : List StageState) (W W' : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) (stage : List Nat)
    (hw : getWaiter (svfQueue W) j = svfWaiter x 0) (hrm : removeWaiter (svfQueue W) j = svfQueue W')
    (hth : getThread ts x = svfWaiting x 0) :
    (svfFreeM t sq sv (a + 1) arr ts sts W recs gs).admitWaiter (svfP n) stage 0 j =
      svfAdmM1 t sq x a sv arr ts sts W' recs gs := by
  unfold Kernel.Machine.admitWaiter
  simp only [svfFreeM_pools, svfFreeM_threads, getPool, hw, hrm, svfWaiter_thread, hth]
  rfl

/-- The admitted thread runs its prefill's `step` (4 tokens): the engine's resident, the thread blocked
in its prefill (`svfPre`). -/
theorem svf_exec_admitted (n f t sq x a sv arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) :
    exec (svfP n) (f + 1) (svfAdmM1 t sq x a sv arr ts sts W recs gs) (svfAdmitted x (a + 1)) =
      svfAdmM2 t sq x a sv arr (setThread (setThread ts x (svfAdmitted x (a + 1))) x (svfPre x (a + 1))) sts W
        recs gs := rfl

/-- **The admission at a symbolic index.** `admitOne` of the hold at `j` (session `x`'s): admitted, its
thread run into its prefill, the prefill's 4 tokens scheduled at once, the budget spent. -/
theorem svf_admitOne (n f t sq sv a arr j x : Nat) (ts : List Thread) (sts : List StageState) (W W' : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress)
    (hw : getWaiter (svfQueue W) j = svfWaiter x 0) (hrm : removeWaiter (svfQueue W) j = svfQueue W')
    (hth : getThread ts x = svfWaiting x 0) (hlen : x < ts.length) :
    admitOne (svfP n) (f + 1) 0 0 0 j none (svfFreeM t sq sv (a + 1) arr ts sts W recs gs) ⟨4, 0, 0, 0, 0, 0, false⟩ =
      (svfAdmM3 t sq x a sv arr (setThread ts x (svfPre x (a + 1))) sts W' recs gs, ⟨4, 4, 4, 0, 0, 0, false⟩) := by
  have hm1 : ∀ stage, (svfFreeM t sq sv (a + 1) arr ts sts W recs gs).admitWaiter (svfP n) stage 0 j =
      svfAdmM1 t sq x a sv arr ts sts W' recs gs := fun stage =>
    svf_admitWaiter n t sq sv a arr j x ts sts W W' recs gs stage hw hrm hth
  have hex : exec (svfP n) (f + 1) (svfAdmM1 t sq x a sv arr ts sts W' recs gs)
      (getThread (svfAdmM1 t sq x a sv arr ts sts W' recs gs).threads x) =
      svfAdmM2 t sq x a sv arr (setThread ts x (svfPre x (a + 1))) sts W' recs gs := by
    have hg : getThread (svfAdmM1 t sq x a sv arr ts sts W' recs gs).threads x = svfAdmitted x (a + 1) :=
      getThread_setThread_self ts x _ hlen
    rw [hg, svf_exec_admitted, setThread_setThread_self]
  unfold admitOne
  simp only [svfFreeM_pools, getPool, hw, svfWaiter_thread, hm1, hex]
  simp [svfAdmM2, svfAdmM3, residentOf, getEngineState, lets, Resident.passedOver, tokensFor, chunkFor,
    Kernel.Machine.serveOne, Kernel.Machine.served, setSched, setEngineState, Batch.serve, Batch.budget, Nat.min]

theorem svf_admitWaiting_done (n f t sq x a sv arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) :
    admitWaiting (svfP n) 0 0 none true (f + 1) (svfAdmM3 t sq x a sv arr ts sts W recs gs) ⟨4, 4, 4, 0, 0, 0, false⟩ =
      (svfAdmM3 t sq x a sv arr ts sts W recs gs, ⟨4, 4, 4, 0, 0, 0, false⟩) := rfl

/-- The iteration's record (4 prefill tokens, one resident, demand 4) and its end at `t + 2`. -/
theorem svf_iterTail_admit (n t sq x a sv arr : Nat) (ts : List Thread) (sts : List StageState) (W : List Nat)
    (recs : List Kernel.Iteration) (gs : List Progress) :
    svfIterTail (svfP n) 0 0 (getEngine (svfP n).engines 0)
        (svfAdmM3 t sq x a sv arr ts sts W recs gs, ⟨4, 4, 4, 0, 0, 0, false⟩) =
      svfPreM (t + 1) (sq + 1) sq x (a + 1) (sv + 4) (a + 2) arr ts sts W
        (⟨t + 1, 4, 4, 0, 1, 4, sv, arr, 0, 0, 16⟩ :: recs) gs := rfl

/-- Nothing more happens at the instant once a prefill's iteration started. -/
theorem svf_endTail_pre (n f t sq q s adm sv admSeq arr : Nat) (ts : List Thread) (sts : List StageState)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress) :
    svfEndTail (svfP n) (f + 2) (svfPreM t sq q s adm sv admSeq arr ts sts W recs gs) =
      svfPreM t sq q s adm sv admSeq arr ts sts W recs gs := by
  have hs := svf_settle_idle n f (svfPreM t sq q s adm sv admSeq arr ts sts W recs gs) rfl rfl
  have hd := svf_dueNow_next (svfPreM t sq q s adm sv admSeq arr ts sts W recs gs) q (.iterationEnd 0) rfl
  unfold svfEndTail
  simp only [hs, hd]
  rfl

/-- **The next admission, for every batch.** From the answered instant with the sessions `w :: W` waiting
(their threads `svfWaiting`), the instant's end admits the session `x = svfAt (w :: W) j` at the index `j`
`select` offers, of least volume among those waiting, and starts its prefill's iteration from `t + 1`:
the machine `svfPreM`, `x` served, the others `svfErase (w :: W) j` waiting. -/
theorem svf_admit_next (n f t sq sv a arr : Nat) (ts : List Thread) (sts : List StageState) (w : Nat)
    (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress)
    (hwait : ∀ y ∈ w :: W, getThread ts y = svfWaiting y 0) (hlen : ∀ y ∈ w :: W, y < ts.length) :
    ∃ j, j < (w :: W).length ∧ (∀ y ∈ w :: W, svfVol (svfAt (w :: W) j) ≤ svfVol y) ∧
      endOfInstant (svfP n) (f + 11) (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs) =
        svfPreM (t + 1) (sq + 1) sq (svfAt (w :: W) j) (a + 1) (sv + 4) (a + 2) arr
          (setThread ts (svfAt (w :: W) j) (svfPre (svfAt (w :: W) j) (a + 1))) sts (svfErase (w :: W) j)
          (⟨t + 1, 4, 4, 0, 1, 4, sv, arr, 0, 0, 16⟩ :: recs) gs := by
  obtain ⟨hlt, hle⟩ := svf_select_least n (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs) w W rfl hwait
  refine ⟨_, hlt, hle, ?_⟩
  generalize hj : select (svfP n) (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs) 0 (svfQueue (w :: W)) = j
    at hlt ⊢
  have hw := getWaiter_svfQueue (w :: W) j hlt
  have hrm := removeWaiter_svfQueue (w :: W) j
  have hx := svfAt_mem (w :: W) j hlt
  have hsel : select (svfP n) (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs) 0
      (getPool (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).pools 0).queue = j := hj
  have hfit : fits (svfP n) (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).threads ⟨(svfP n).caps, (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).pools,
      (getThread (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).threads
        (getWaiter (getPool (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).pools 0).queue j).thread).serial,
      admissionStage 0 (⟨4, 0, 0, 0, 0, 0, false⟩ : Kernel.Batch).budget⟩
      (getThread (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).threads
        (getWaiter (getPool (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).pools 0).queue j).thread).attrs
      (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).now
      (getWaiter (getPool (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs).pools 0).queue j).on = true := by
    simp only [svfFreeM_pools, svfFreeM_threads, getPool, hw, svfWaiter_thread, hwait _ hx]
    rfl
  rw [svf_end_answer, svf_start_answer,
    admitWaiting_admit (svfP n) 0 0 none true (f + 10) (svfFreeM t sq sv (a + 1) arr ts sts (w :: W) recs gs)
      ⟨4, 0, 0, 0, 0, 0, false⟩ 0 j rfl rfl hsel hfit,
    svf_admitOne n (f + 9) t sq sv a arr j _ ts sts (w :: W) _ recs gs hw hrm (hwait _ hx) (hlen _ hx),
    svf_admitWaiting_done, svf_iterTail_admit, svf_endTail_pre]

/-! ### The loop's step -/

/-- **The last decode with sessions waiting.** From a machine serving session `s`'s last decode token in
the iteration from `t` to `t + 1`, the sessions `w :: W` waiting, the event loop fires its end, `s`
answers at `t + 1`, and the engine admits the waiting session `x` of least volume at the index `j`
`select` offers and starts its prefill: the machine `svfPreM` serving `x` from `t + 1`. -/
theorem svf_step_admit_decode (n f t sq q s v adm sv a arr : Nat) (ts : List Thread) (sts : List StageState)
    (w : Nat) (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress)
    (hs : getThread ts s = svfDecV s v adm)
    (hwait : ∀ y ∈ w :: W, getThread ts y = svfWaiting y 0 ∧ y ≠ s) (hlen : ∀ y ∈ w :: W, y < ts.length) :
    ∃ j, j < (w :: W).length ∧ (∀ y ∈ w :: W, svfVol (svfAt (w :: W) j) ≤ svfVol y) ∧
      loop (svfP n) (f + 12) (svfDecM t sq q s 1 adm sv (a + 1) arr ts sts (w :: W) recs gs) =
        loop (svfP n) (f + 11) (svfPreM (t + 1) (sq + 1) sq (svfAt (w :: W) j) (a + 1) (sv + 4) (a + 2) arr
          (setThread (setThread ts s (svfDoneV s v adm (t + 1)
              (svfToks s (getProgress (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) s))))
            (svfAt (w :: W) j) (svfPre (svfAt (w :: W) j) (a + 1))) sts (svfErase (w :: W) j)
          (⟨t + 1, 4, 4, 0, 1, 4, sv, arr, 0, 0, 16⟩ :: recs)
          (setProgress gs s ((getProgress gs s).decodeToken t (t + 1)))) := by
  have hw' : ∀ y ∈ w :: W, getThread (setThread ts s (svfDoneV s v adm (t + 1)
      (svfToks s (getProgress (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) s)))) y =
      svfWaiting y 0 := fun y hy => by
    rw [getThread_setThread_ne _ _ _ _ (hwait y hy).2]
    exact (hwait y hy).1
  have hl' : ∀ y ∈ w :: W, y < (setThread ts s (svfDoneV s v adm (t + 1)
      (svfToks s (getProgress (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) s)))).length :=
    fun y hy => by rw [setThread_length]; exact hlen y hy
  obtain ⟨j, hj, hle, he⟩ := svf_admit_next n f t sq sv a arr _ sts w W recs
    (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) hw' hl'
  refine ⟨j, hj, hle, ?_⟩
  rw [svf_loop_step (svfP n) (f + 11) (svfDecM t sq q s 1 adm sv (a + 1) arr ts sts (w :: W) recs gs) q
    (.iterationEnd 0) rfl]
  have hfire : fire (svfP n) { svfDecM t sq q s 1 adm sv (a + 1) arr ts sts (w :: W) recs gs with
      now := (svfDecM t sq q s 1 adm sv (a + 1) arr ts sts (w :: W) recs gs).now + 1, timers := [] } (.iterationEnd 0) =
      svfPreEnd t sq s adm sv (a + 1) arr ts sts (w :: W) recs
        (setProgress gs s ((getProgress gs s).decodeToken t (t + 1))) :=
    svf_fire_decode_last n t sq s adm sv (a + 1) arr ts sts (svfQueue (w :: W)) recs gs
  rw [hfire, svf_settle_answer_waiting n (f + 2) t sq s v adm sv (a + 1) arr ts sts (w :: W) recs _ hs, he]

/-- **A prefill of volume 1 with sessions waiting.** The same step from a machine serving the prefill of
session `s` of volume 1: `s` answers at `t + 1` and the next least session's prefill starts. -/
theorem svf_step_admit_pre (n f t sq q s adm sv a arr : Nat) (ts : List Thread) (sts : List StageState)
    (w : Nat) (W : List Nat) (recs : List Kernel.Iteration) (gs : List Progress)
    (hs : getThread ts s = svfPreV s 1 adm)
    (hwait : ∀ y ∈ w :: W, getThread ts y = svfWaiting y 0 ∧ y ≠ s) (hlen : ∀ y ∈ w :: W, y < ts.length) :
    ∃ j, j < (w :: W).length ∧ (∀ y ∈ w :: W, svfVol (svfAt (w :: W) j) ≤ svfVol y) ∧
      loop (svfP n) (f + 12) (svfPreM t sq q s adm sv (a + 1) arr ts sts (w :: W) recs gs) =
        loop (svfP n) (f + 11) (svfPreM (t + 1) (sq + 1) sq (svfAt (w :: W) j) (a + 1) (sv + 4) (a + 2) arr
          (setThread (setThread ts s (svfDoneV s 1 adm (t + 1)
              (svfToks s (getProgress (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) s))))
            (svfAt (w :: W) j) (svfPre (svfAt (w :: W) j) (a + 1))) sts (svfErase (w :: W) j)
          (⟨t + 1, 4, 4, 0, 1, 4, sv, arr, 0, 0, 16⟩ :: recs)
          (setProgress gs s ((getProgress gs s).prefillToken t (t + 1)))) := by
  have hw' : ∀ y ∈ w :: W, getThread (setThread ts s (svfDoneV s 1 adm (t + 1)
      (svfToks s (getProgress (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) s)))) y =
      svfWaiting y 0 := fun y hy => by
    rw [getThread_setThread_ne _ _ _ _ (hwait y hy).2]
    exact (hwait y hy).1
  have hl' : ∀ y ∈ w :: W, y < (setThread ts s (svfDoneV s 1 adm (t + 1)
      (svfToks s (getProgress (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) s)))).length :=
    fun y hy => by rw [setThread_length]; exact hlen y hy
  obtain ⟨j, hj, hle, he⟩ := svf_admit_next n f t sq sv a arr _ sts w W recs
    (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) hw' hl'
  refine ⟨j, hj, hle, ?_⟩
  rw [svf_loop_step (svfP n) (f + 11) (svfPreM t sq q s adm sv (a + 1) arr ts sts (w :: W) recs gs) q
    (.iterationEnd 0) rfl]
  have hfire : fire (svfP n) { svfPreM t sq q s adm sv (a + 1) arr ts sts (w :: W) recs gs with
      now := (svfPreM t sq q s adm sv (a + 1) arr ts sts (w :: W) recs gs).now + 1, timers := [] } (.iterationEnd 0) =
      svfPreEnd t sq s adm sv (a + 1) arr ts sts (w :: W) recs
        (setProgress gs s ((getProgress gs s).prefillToken t (t + 1))) :=
    svf_fire_prefill_end n t sq s adm sv (a + 1) arr ts sts (svfQueue (w :: W)) recs gs
  rw [hfire, svf_settle_answer_pre_waiting n (f + 1) t sq s adm sv (a + 1) arr ts sts (w :: W) recs _ hs, he]

end Papers
