import Lake
open Lake DSL

/-!
The serQ Lean package.

* `Serq`   (`lean/`): the Lean model of serQ programs and its lemmas.
* `Papers` (`examples/papers/`): claims from papers, proved against `Serq`: the generated
  statements of the paper programs' claims (`Papers.Claims.*`) and their proofs (`ClaimsProved`).

Every module starts with `module` and keeps its declarations in an
`@[expose] public section`, so that the offline (WebAssembly) Lean, which reads
only the exported level of `.olean` files, sees them from importing modules.
Without a native `lake`, `serq lean build` reads the `lean_lib` blocks of this file
(`srcDir`, `roots`) and the package's `leanOptions` and compiles the same modules
itself; keep those fields literal.
-/

package serq where
  leanOptions := #[⟨`autoImplicit, false⟩]

@[default_target]
lean_lib Serq where
  srcDir := "lean"
  roots := #[`Serq]
  globs := #[.andSubmodules `Serq]

@[default_target]
lean_lib Papers where
  srcDir := "examples/papers"
  roots := #[`Papers, `ClaimsProved]
  globs := #[.andSubmodules `Papers, .one `ClaimsProved]
