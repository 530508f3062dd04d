module

public import Serq.Basic
public import Serq.Exec

/-! # serQ in Lean

The root of the `Serq` library: importing `Serq` brings every module of the model.
-/
