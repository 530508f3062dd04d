module

public import Serq.Basic
public import Serq.Exec
public import Serq.Full
public import Serq.Within
public import Serq.Rate
public import Serq.RateCost
public import Serq.Spt
public import Serq.SptOptimal
public import Serq.OneAtATime
public import Serq.Claims
public import Serq.Agree
public import Serq.Stuck
public import Serq.Conserve
public import Serq.Requests
public import Serq.Drift
public import Serq.Oracle
public import Serq.KernelMachine
public import Serq.KernelMemory
public import Serq.Kernel
public import Serq.KernelExclusive
public import Serq.KernelFacts
public import Serq.KernelBudget
public import Serq.KernelExclusiveBudget
public import Serq.KernelTimed
public import Serq.KernelExclusiveTimed
public import Serq.KernelCodec
public import Serq.KernelOracle
public import Serq.KernelFast
public import Serq.KernelFastEq
public import Serq.KernelTiling
public import Serq.KernelServed
public import Serq.KernelFull
public import Serq.KernelFullRun
public import Serq.Backlog
public import Serq.BacklogDecode
public import Serq.BacklogManyStep
public import Serq.BacklogMany
public import Serq.BacklogChunkStep
public import Serq.BacklogChunk
public import Serq.BacklogPhasedStep
public import Serq.BacklogPhasedInv
public import Serq.BacklogPhasedArrive
public import Serq.BacklogPhased
public import Serq.BacklogBudget
public import Serq.BacklogBudgetRun
public import Serq.DriftMachine
public import Serq.DriftMachineTime
public import Serq.DriftMachineClock
public import Serq.DriftPaths
public import Serq.DriftPathsMachine
public import Serq.DriftPathsLaw
public import Serq.DriftPathsHit
public import Serq.KernelProvenance
public import Serq.KernelTiledRun
public import Serq.KernelAtEnd
public import Serq.KernelPlaced
public import Serq.KernelDistinct
public import Serq.KernelAdmitFull
public import Serq.KernelConserve
public import Serq.KernelOracleDistinct
public import Serq.KernelRequests
public import Serq.KernelKv
public import Serq.KernelKvRun
public import Serq.KernelOracleKv
public import Serq.KernelFound
public import Serq.KernelFoundRun
public import Serq.KernelSelect
public import Serq.KernelSelectRun
public import Serq.SptShortestFirst
public import Serq.KernelRequestsPreempt
public import Serq.KernelFoundPreempt

/-! # serQ in Lean

The root of the `Serq` library: importing `Serq` brings every module of the model.
-/
