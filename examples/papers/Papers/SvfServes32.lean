module

public import Papers.SvfServes

/-! # SVF: batches of 25 to 32 sessions decided, one run at a time (see `Papers.SvfServes`) -/

@[expose] public section

namespace Papers

open Serq

theorem svf_serves_25 : svfServes 25 = true := by decide +kernel
theorem svf_serves_26 : svfServes 26 = true := by decide +kernel
theorem svf_serves_27 : svfServes 27 = true := by decide +kernel
theorem svf_serves_28 : svfServes 28 = true := by decide +kernel
theorem svf_serves_29 : svfServes 29 = true := by decide +kernel
theorem svf_serves_30 : svfServes 30 = true := by decide +kernel
theorem svf_serves_31 : svfServes 31 = true := by decide +kernel
theorem svf_serves_32 : svfServes 32 = true := by decide +kernel

end Papers
