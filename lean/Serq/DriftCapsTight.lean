module

public import Serq.DriftPathsCaps

/-! # The fixed caps cannot be lowered (issue 14, result 7)

`Serq.drift_machine_work_at_caps` couples the machine to the drift chain under `2 + budget / W ≤ reqsCap`
(and that many requests' blocks): at most one resident survives an iteration, the prefill the budget
cut, and an iteration admits at most `budget / W + 1` more. Here, evaluated by the kernel, an instance
where every one of those slots is used, so that one slot fewer breaks the coupling: budget 63, `W = 20`
(`2 + 63 / 20 = 5` slots, `blocksFor 16 20 = 2` blocks each), four sessions arriving at each of the
times 0 to 7. The prompt the budget cuts keeps 17, 14, 11, 8, 5, 2 tokens after the iterations at times
0 to 5; at time 6 the iteration holds it (2 tokens), three whole prompts and a fourth the budget cuts:
five requests. With five slots the machine's work at time 7 is the chain's backlog, `7 · 80 − 7 · 63 =
119`; with four the fourth prompt waits, the iteration serves 62 of 63, and the work at time 7 is 120.
The reference interpreter does the same (`tests/test_drift_interpreter.py`,
`test_one_slot_fewer_and_the_engine_is_not_the_chain`).
-/

@[expose] public section

namespace Serq

open DriftMachine

/-- The path of the instance: four sessions at each of the times 0 to 7, each one 20-token turn. -/
def capsTightSessions : List Session := pathSessions 20 [4, 4, 4, 4, 4, 4, 4, 4]

/-- With the fixed caps, five slots and ten blocks, the machine's work at time 7 is the chain's backlog,
`119` (as `drift_machine_work_at_caps` says). -/
theorem drift_caps_tight_holds :
    workAt ⟨63, 5, 10, 16, 0, false, false⟩ capsTightSessions 20 7 8 = 119 ∧
      backlogAt 20 63 (arrivalsAt capsTightSessions) 7 = 119 := by
  decide +kernel

/-- **One slot fewer and the machine is not the chain**: with four slots (and the same ten blocks) the
work at time 7 is 120, one more than the chain's backlog, so `2 + budget / W ≤ reqsCap` cannot be
weakened to `1 + budget / W ≤ reqsCap` in `drift_machine_work_at_caps`. -/
theorem drift_caps_tight_fails :
    workAt ⟨63, 4, 10, 16, 0, false, false⟩ capsTightSessions 20 7 8 = 120 ∧
      backlogAt 20 63 (arrivalsAt capsTightSessions) 7 = 119 := by
  decide +kernel

end Serq
