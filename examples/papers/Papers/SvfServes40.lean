module

public import Papers.SvfServes

/-! # SVF: batches of 33 to 40 sessions decided, one run at a time (see `Papers.SvfServes`) -/

@[expose] public section

namespace Papers

open Serq

theorem svf_serves_33 : svfServes 33 = true := by decide +kernel
theorem svf_serves_34 : svfServes 34 = true := by decide +kernel
theorem svf_serves_35 : svfServes 35 = true := by decide +kernel
theorem svf_serves_36 : svfServes 36 = true := by decide +kernel
theorem svf_serves_37 : svfServes 37 = true := by decide +kernel
theorem svf_serves_38 : svfServes 38 = true := by decide +kernel
theorem svf_serves_39 : svfServes 39 = true := by decide +kernel
theorem svf_serves_40 : svfServes 40 = true := by decide +kernel

end Papers
