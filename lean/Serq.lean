module

public import Serq.Basic

/-! # serQ in Lean

The root of the `Serq` library: importing `Serq` brings every module of the model.
-/
