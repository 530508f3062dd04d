module

public import Serq.Rate

/-! # KV conservation and causality on the engine model

For every engine of the fragment and every workload, at every step of every run from the
empty machine, the blocks allocated to the residents plus the blocks the prefix cache holds
never exceed the pool's cap (`kv_conserved`), and every answered turn has its first token no
later than its last (`causal`).

The machine's invariant (`Inv`): the KV bound; every resident's position is within its
blocks (`pos / blockSize ≤ alloc`, so that what `release` caches on a finish or a preemption,
`min (…, pos) / blockSize` blocks, is at most the blocks the resident gives back); every cached
entry holds a block (so that `evict n` frees `min n cached` blocks); a resident that decodes
has tokens left; every request's prefix hit is below what it knows (so that an admitted head
always gets a token); and the step of every first token is no later than the clock.

Through `plan` the invariant is the plan's (`PInv`): the KV bound over the residents
considered and not yet considered and the cache, which the preemptions keep (a victim frees
its blocks and caches at most them), which growing keeps (`growOrPreempt` ends with the
grower preempted or with room for its blocks) and which admitting keeps (`admitHeads` checks
the residents' blocks, all considered by then). A last clause covers the step that runs
nothing (`tokens = 0 ∧ preempted = 0`), which keeps the machine's cache but takes the plan's
residents: there, nothing was admitted or grown, because a head that is admitted always gets
a token unless the iteration decodes only, and an iteration that decodes only always serves a
decoder or preempts.
-/

@[expose] public section

namespace Serq

/-! ## Lists -/

theorem usedBlocks_append (a b : List Res) : usedBlocks (appendRes a b) = usedBlocks a + usedBlocks b := by
  induction a with
  | nil => simp [appendRes, usedBlocks]
  | cons x xs ih => simp only [appendRes, usedBlocks, ih]; omega

theorem mem_appendRes (a b : List Res) (x : Res) : x ∈ appendRes a b ↔ x ∈ a ∨ x ∈ b := by
  induction a with
  | nil => simp [appendRes]
  | cons y ys ih => simp only [appendRes, List.mem_cons, ih, or_assoc]

theorem cachedBlocks_appendEntry (c : List Entry) (e : Entry) :
    cachedBlocks (appendEntry c e) = cachedBlocks c + e.blocks := by
  induction c with
  | nil => simp [appendEntry, cachedBlocks]
  | cons x xs ih => simp only [appendEntry, cachedBlocks, ih]; omega

theorem mem_appendEntry (c : List Entry) (e x : Entry) : x ∈ appendEntry c e ↔ x ∈ c ∨ x = e := by
  induction c with
  | nil => simp [appendEntry]
  | cons y ys ih => simp only [appendEntry, List.mem_cons, ih, or_assoc]

theorem mem_appendReq (w : List Req) (q x : Req) : x ∈ appendReq w q ↔ x ∈ w ∨ x = q := by
  induction w with
  | nil => simp [appendReq]
  | cons y ys ih => simp only [appendReq, List.mem_cons, ih, or_assoc]

theorem mem_appendOutcome (os : List Outcome) (o x : Outcome) : x ∈ appendOutcome os o ↔ x ∈ os ∨ x = o := by
  induction os with
  | nil => simp [appendOutcome]
  | cons y ys ih => simp only [appendOutcome, List.mem_cons, ih, or_assoc]

theorem usedBlocks_clearSched (l : List Res) : usedBlocks (clearSched l) = usedBlocks l := by
  induction l with
  | nil => rfl
  | cons x xs ih => simp [clearSched, usedBlocks, ih]

theorem popLast_spec : ∀ (l rest : List Res) (v : Res), popLast l = some (rest, v) →
    usedBlocks l = usedBlocks rest + v.alloc ∧ v ∈ l ∧ (∀ x ∈ rest, x ∈ l) ∧
    (∀ r later, l = r :: later → rest = [] ∨ ∃ l', rest = r :: l')
  | [], _, _, h => by simp [popLast] at h
  | [x], rest, v, h => by
    simp only [popLast, Option.some.injEq, Prod.mk.injEq] at h
    obtain ⟨h1, h2⟩ := h
    subst h1; subst h2
    refine ⟨by simp [usedBlocks], List.mem_cons_self, fun x hx => by simp at hx, fun _ _ _ => Or.inl rfl⟩
  | x :: y :: ys, rest, v, h => by
    simp only [popLast] at h
    split at h
    · simp at h
    · rename_i init last hp
      simp only [Option.some.injEq, Prod.mk.injEq] at h
      obtain ⟨h1, h2⟩ := h
      subst h1; subst h2
      obtain ⟨i1, i2, i3, _⟩ := popLast_spec (y :: ys) init last hp
      refine ⟨?_, List.mem_cons_of_mem _ i2, ?_, ?_⟩
      · simp only [usedBlocks] at i1 ⊢; omega
      · intro z hz
        rcases List.mem_cons.mp hz with rfl | hz
        · exact List.mem_cons_self
        · exact List.mem_cons_of_mem _ (i3 z hz)
      · intro r later hl
        obtain ⟨rfl, _⟩ := List.cons.inj hl
        exact Or.inr ⟨init, rfl⟩

theorem popLast_ne_none : ∀ (l : List Res), l ≠ [] → popLast l ≠ none
  | [], h => absurd rfl h
  | [_], _ => by simp [popLast]
  | x :: y :: ys, _ => by
    have ih := popLast_ne_none (y :: ys) (by simp)
    simp only [popLast]
    split
    · rename_i hn; exact absurd hn ih
    · simp

theorem resCount_pos : ∀ (l : List Res), l ≠ [] → 0 < resCount l
  | [], h => absurd rfl h
  | _ :: _, _ => by simp [resCount]

/-! ## Blocks -/

theorem div_le_blocksFor (b t : Nat) : t / b ≤ blocksFor b t := by
  unfold blocksFor
  split
  · rename_i h; subst h; simp
  · exact Nat.div_le_div_right (by omega)

theorem reusable_le (n bs : Nat) : reusable n bs ≤ n - 1 := by
  unfold reusable
  split
  · omega
  · exact Nat.div_mul_le_self _ _

theorem capChunk_pos (c x : Nat) (h : 0 < x) : 0 < capChunk c x := by
  unfold capChunk; split <;> omega

/-! ## The prefix cache -/

/-- With every entry holding a block, `evict n` frees `min n cached` blocks. -/
theorem evict_spec : ∀ (n : Nat) (es : List Entry), (∀ e ∈ es, 0 < e.blocks) →
    cachedBlocks (evict n es) = cachedBlocks es - n ∧ ∀ e ∈ evict n es, 0 < e.blocks
  | 0, es, h => ⟨by simp [evict], by simpa [evict] using h⟩
  | n + 1, [], _ => by simp [evict, cachedBlocks]
  | n + 1, e :: es, h => by
    have he := h e List.mem_cons_self
    simp only [evict]
    split
    · obtain ⟨h1, h2⟩ := evict_spec n es (fun x hx => h x (List.mem_cons_of_mem _ hx))
      refine ⟨?_, h2⟩
      rw [h1]; simp only [cachedBlocks]; omega
    · rename_i hle
      obtain ⟨h1, h2⟩ := evict_spec n ({ e with blocks := e.blocks - 1 } :: es) (by
        intro x hx
        rcases List.mem_cons.mp hx with rfl | hx
        · show 0 < e.blocks - 1
          omega
        · exact h x (List.mem_cons_of_mem _ hx))
      refine ⟨?_, h2⟩
      rw [h1]; simp only [cachedBlocks]; omega

theorem consume_spec (sid : Nat) : ∀ (take : Nat) (es : List Entry), (∀ e ∈ es, 0 < e.blocks) →
    cachedBlocks (consume sid take es) ≤ cachedBlocks es ∧ ∀ e ∈ consume sid take es, 0 < e.blocks
  | _, [], _ => by simp [consume, cachedBlocks]
  | take, e :: es, h => by
    have he := h e List.mem_cons_self
    have hes : ∀ x ∈ es, 0 < x.blocks := fun x hx => h x (List.mem_cons_of_mem _ hx)
    simp only [consume]
    split
    · obtain ⟨h1, h2⟩ := consume_spec sid (take - min e.blocks take) es hes
      split
      · exact ⟨by simp only [cachedBlocks]; omega, h2⟩
      · rename_i hne
        refine ⟨by simp only [cachedBlocks]; omega, ?_⟩
        intro x hx
        rcases List.mem_cons.mp hx with rfl | hx
        · show 0 < e.blocks - min e.blocks take
          omega
        · exact h2 x hx
    · obtain ⟨h1, h2⟩ := consume_spec sid take es hes
      refine ⟨by simp only [cachedBlocks]; omega, ?_⟩
      intro x hx
      rcases List.mem_cons.mp hx with rfl | hx
      · exact he
      · exact h2 x hx

theorem release_spec (eng : Engine) (sid tokens seq : Nat) (cache : List Entry) (h : ∀ e ∈ cache, 0 < e.blocks) :
    cachedBlocks (release eng sid tokens seq cache).1 ≤ cachedBlocks cache + tokens / eng.blockSize ∧
    ∀ e ∈ (release eng sid tokens seq cache).1, 0 < e.blocks := by
  unfold release
  have hbl : (if eng.caching = true then tokens / eng.blockSize else 0) ≤ tokens / eng.blockSize := by
    split
    · exact Nat.le_refl _
    · exact Nat.zero_le _
  generalize (if eng.caching = true then tokens / eng.blockSize else 0) = b at hbl ⊢
  dsimp only
  split
  · exact ⟨Nat.le_add_right _ _, h⟩
  · rename_i hb
    dsimp only
    refine ⟨?_, ?_⟩
    · rw [cachedBlocks_appendEntry]; dsimp only; omega
    · intro x hx
      rcases (mem_appendEntry _ _ _).mp hx with hx | rfl
      · exact h x hx
      · show 0 < b
        omega

/-! ## The invariants -/

/-- A request's prefix hit is below what it knows, and its first token (if any) is no later than `N`. -/
structure ReqOk (N : Nat) (q : Req) : Prop where
  hit : q.hit ≤ q.kept - 1
  first : q.first ≤ N

/-- A resident's position, once the iteration's tokens are written, is within its blocks; a
decoder has tokens left; its request is sound. -/
structure ResOk (bs N : Nat) (r : Res) : Prop where
  blocks : (r.pos + r.sched) / bs ≤ r.alloc
  dec : r.decoding = true → r.remaining ≠ 0
  req : ReqOk N r.req

theorem ReqOk.mono {N N' : Nat} {q : Req} (h : ReqOk N q) (hN : N ≤ N') : ReqOk N' q :=
  ⟨h.hit, Nat.le_trans h.first hN⟩

theorem ResOk.mono {bs N N' : Nat} {r : Res} (h : ResOk bs N r) (hN : N ≤ N') : ResOk bs N' r :=
  ⟨h.blocks, h.dec, h.req.mono hN⟩

/-- The machine's invariant. -/
structure Inv (eng : Engine) (m : Machine) : Prop where
  kv : usedBlocks m.running + cachedBlocks m.cache ≤ eng.kvBlocks
  res : ∀ r ∈ m.running, ResOk eng.blockSize m.now r
  pos : ∀ e ∈ m.cache, 0 < e.blocks
  wait : ∀ q ∈ m.waiting, ReqOk m.now q
  causal : ∀ o ∈ m.outcomes, o.first ≤ o.last

/-- What the plan's preemptions keep. -/
structure Core (eng : Engine) (N : Nat) (p : Plan) : Prop where
  kv : usedBlocks p.done + usedBlocks p.todo + cachedBlocks p.cache ≤ eng.kvBlocks
  done : ∀ r ∈ p.done, ResOk eng.blockSize N r
  todo : ∀ r ∈ p.todo, ResOk eng.blockSize N r
  pos : ∀ e ∈ p.cache, 0 < e.blocks
  wait : ∀ q ∈ p.waiting, ReqOk N q

/-- The plan's invariant: the core, and while nothing was scheduled nor preempted, the residents
hold no more than the machine's (`U0`), and an iteration that decodes only still has a decoder
to serve, or no budget. -/
structure PInv (eng : Engine) (N U0 : Nat) (only : Option Bool) (p : Plan) : Prop where
  core : Core eng N p
  idle : p.preempted = 0 → batchTokens p.done = 0 →
    usedBlocks p.done + usedBlocks p.todo ≤ U0 ∧
    (only = some true → p.budget = 0 ∨ ∃ r ∈ p.todo, r.decoding = true ∧ r.remaining ≠ 0)

/-! ## Planning -/

theorem growOrPreempt_core (eng : Engine) (N need : Nat) : ∀ (fuel : Nat) (p : Plan), Core eng N p →
    Core eng N (growOrPreempt eng fuel need p) ∧
    (growOrPreempt eng fuel need p = p ∨ p.preempted < (growOrPreempt eng fuel need p).preempted) ∧
    usedBlocks (growOrPreempt eng fuel need p).todo ≤ usedBlocks p.todo ∧
    (p.todo ≠ [] → resCount p.todo ≤ fuel → (growOrPreempt eng fuel need p).selfPreempted = true ∨
      usedBlocks (growOrPreempt eng fuel need p).done + usedBlocks (growOrPreempt eng fuel need p).todo + need
        ≤ eng.kvBlocks) ∧
    (∀ r later, p.todo = r :: later → (growOrPreempt eng fuel need p).selfPreempted = false →
      ∃ l', (growOrPreempt eng fuel need p).todo = r :: l')
  | 0, p, h => by
    refine ⟨h, Or.inl rfl, Nat.le_refl _, fun hne hf => ?_, fun r later hp _ => ⟨later, hp⟩⟩
    have := resCount_pos _ hne
    omega
  | fuel + 1, p, h => by
    simp only [growOrPreempt]
    split
    · rename_i hfit
      exact ⟨h, Or.inl rfl, Nat.le_refl _, fun _ _ => Or.inr hfit, fun r later hp _ => ⟨later, hp⟩⟩
    · rename_i hfit
      split
      · rename_i hpop
        exact ⟨h, Or.inl rfl, Nat.le_refl _, fun hne _ => absurd hpop (popLast_ne_none _ hne),
          fun r later hp _ => ⟨later, hp⟩⟩
      · rename_i rest victim hp
        obtain ⟨hu, hv, hrest, hhead⟩ := popLast_spec p.todo rest victim hp
        have hcnt := (popLast_tokens p.todo rest victim hp).2
        have hvic := h.todo victim hv
        have hrel := release_spec eng victim.req.sid victim.pos p.relSeq p.cache h.pos
        have hdiv : victim.pos / eng.blockSize ≤ victim.alloc :=
          Nat.le_trans (Nat.div_le_div_right (Nat.le_add_right _ _)) hvic.blocks
        have hcore : Core eng N
            { p with todo := rest,
                     waiting := { victim.req with computed := victim.pos, pre := victim.req.pre + 1 } :: p.waiting,
                     cache := (release eng victim.req.sid victim.pos p.relSeq p.cache).1,
                     relSeq := (release eng victim.req.sid victim.pos p.relSeq p.cache).2,
                     preempted := p.preempted + 1 } := by
          refine ⟨?_, h.done, fun x hx => h.todo x (hrest x hx), hrel.2, ?_⟩
          · have := h.kv
            dsimp only
            omega
          · intro q hq
            rcases List.mem_cons.mp hq with rfl | hq
            · exact ⟨hvic.req.hit, hvic.req.first⟩
            · exact h.wait q hq
        cases rest with
        | nil =>
          refine ⟨⟨hcore.kv, hcore.done, hcore.todo, hcore.pos, hcore.wait⟩, Or.inr (Nat.lt_succ_self _), ?_,
            fun _ _ => Or.inl rfl, fun r later _ hs => by simp at hs⟩
          show usedBlocks [] ≤ usedBlocks p.todo
          exact Nat.zero_le _
        | cons x xs =>
          obtain ⟨i1, i2, i3, i4, i5⟩ := growOrPreempt_core eng N need fuel _ hcore
          refine ⟨i1, ?_, ?_, ?_, ?_⟩
          · rcases i2 with h2 | h2
            · rw [h2]; exact Or.inr (Nat.lt_succ_self _)
            · exact Or.inr (Nat.lt_trans (Nat.lt_succ_self _) h2)
          · exact Nat.le_trans i3 (by dsimp only; omega)
          · intro _ _
            exact i4 (by simp) (by dsimp only; omega)
          · intro r later hl hs
            rcases hhead r later hl with h3 | ⟨l', h3⟩
            · simp at h3
            · exact i5 r l' h3 hs

theorem serveRunning_pinv (eng : Engine) (only : Option Bool) (N U0 : Nat) : ∀ (fuel : Nat) (p : Plan),
    PInv eng N U0 only p → PInv eng N U0 only (serveRunning eng only fuel p)
  | 0, p, h => h
  | fuel + 1, p, ⟨hc, hi⟩ => by
    simp only [serveRunning]
    split
    · exact ⟨hc, hi⟩
    · rename_i hgo
      have hb : p.budget ≠ 0 := fun h => hgo (Or.inl h)
      have hsp : p.selfPreempted = false := by
        cases h : p.selfPreempted
        · rfl
        · exact absurd (Or.inr h) hgo
      split
      · exact ⟨hc, hi⟩
      · rename_i r later hcons
        have hr : ResOk eng.blockSize N r := hc.todo r (by rw [hcons]; exact List.mem_cons_self)
        split
        · rename_i hskip
          apply serveRunning_pinv eng only N U0 fuel
          refine ⟨⟨?_, ?_, ?_, hc.pos, hc.wait⟩, ?_⟩
          · have := hc.kv
            rw [hcons] at this
            simp only [usedBlocks_append, usedBlocks] at this ⊢
            omega
          · intro x hx
            rcases (mem_appendRes _ _ _).mp hx with hx | hx
            · exact hc.done x hx
            · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
              subst hx; exact hr
          · intro x hx
            exact hc.todo x (by rw [hcons]; exact List.mem_cons_of_mem _ hx)
          · intro hpre htok
            simp only [batchTokens_append, batchTokens] at htok
            obtain ⟨hu, hd⟩ := hi hpre (by omega)
            refine ⟨?_, ?_⟩
            · rw [hcons] at hu
              simp only [usedBlocks_append, usedBlocks] at hu ⊢
              omega
            · intro hon
              rcases hd hon with h | ⟨d, hdm, hdec, hrem⟩
              · exact Or.inl h
              · rw [hcons] at hdm
                rcases List.mem_cons.mp hdm with rfl | hdm
                · exfalso
                  rcases hskip with h | h
                  · exact hrem h
                  · rw [hon, hdec] at h; simp [excluded] at h
                · exact Or.inr ⟨d, hdm, hdec, hrem⟩
        · rename_i hskip
          have hrem : r.remaining ≠ 0 := fun h => hskip (Or.inl h)
          generalize hn : (if r.decoding = true then 1 else capChunk p.chunk (min r.remaining p.budget)) = n
          have hn1 : 1 ≤ n := by
            subst hn
            split
            · exact Nat.le_refl _
            · exact capChunk_pos _ _ (by omega)
          generalize hneed : blocksFor eng.blockSize (r.pos + n) - r.alloc = need
          obtain ⟨g1, g2, g3, g4, g5⟩ := growOrPreempt_core eng N need (resCount p.todo) p hc
          obtain ⟨k1, k2, _, _, _, _, _⟩ := growOrPreempt_keeps eng (resCount p.todo) need p
          generalize growOrPreempt eng (resCount p.todo) need p = q at g1 g2 g3 g4 g5 k1 k2 ⊢
          split
          · refine ⟨g1, ?_⟩
            intro hpre htok
            rcases g2 with rfl | hlt
            · exact hi hpre htok
            · omega
          · rename_i hself
            simp only [Bool.not_eq_true] at hself
            obtain ⟨l', hl'⟩ := g5 r later hcons hself
            have hfit := g4 (by rw [hcons]; simp) (Nat.le_refl _)
            rcases hfit with h | hfit
            · rw [h] at hself; cases hself
            have hq := g1
            rw [hl'] at hfit ⊢
            have he := evict_spec (usedBlocks q.done + usedBlocks (r :: l') + need + cachedBlocks q.cache
              - eng.kvBlocks) q.cache hq.pos
            apply serveRunning_pinv eng only N U0 fuel
            refine ⟨⟨?_, ?_, ?_, he.2, hq.wait⟩, ?_⟩
            · have h1 := he.1
              simp only [usedBlocks_append, usedBlocks, dropHead] at hfit h1 ⊢
              omega
            · intro x hx
              rcases (mem_appendRes _ _ _).mp hx with hx | hx
              · exact hq.done x hx
              · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
                subst hx
                refine ⟨?_, hr.dec, hr.req⟩
                have := div_le_blocksFor eng.blockSize (r.pos + n)
                show (r.pos + n) / eng.blockSize ≤ r.alloc + need
                omega
            · intro x hx
              exact hq.todo x (by rw [hl']; simp only [dropHead] at hx; exact List.mem_cons_of_mem _ hx)
            · intro _ htok
              simp only [batchTokens_append, batchTokens] at htok
              omega

theorem admitHeads_pinv (eng : Engine) (only : Option Bool) (N U0 : Nat) : ∀ (fuel : Nat) (p : Plan),
    PInv eng N U0 only p → p.todo = [] → PInv eng N U0 only (admitHeads eng only fuel p)
  | 0, p, h, _ => h
  | fuel + 1, p, ⟨hc, hi⟩, ht => by
    simp only [admitHeads]
    split
    · exact ⟨hc, hi⟩
    · rename_i hgo
      have hb : p.budget ≠ 0 := fun h => hgo (Or.inl h)
      split
      · exact ⟨hc, hi⟩
      · rename_i rq rest hw
        have hrq : ReqOk N rq := hc.wait rq (by rw [hw]; exact List.mem_cons_self)
        have hru : min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) < max rq.kept (rq.computed + 1) := by
          have h1 := Nat.min_le_right (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1)))
          have h2 : reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1)) ≤ max rq.kept (rq.computed + 1) - 1 := by
            unfold reuseCap
            split
            · exact reusable_le _ _
            · have := hrq.hit; omega
          omega
        generalize min (ownCachedBlocks rq.sid p.cache * eng.blockSize)
            (reuseCap eng.blockSize rq (max rq.kept (rq.computed + 1))) = reused at hru ⊢
        have hkept : rq.kept ≤ max rq.kept (rq.computed + 1) := Nat.le_max_left _ _
        generalize max rq.kept (rq.computed + 1) = known at hru hkept ⊢
        have hn1 : 0 < capChunk p.chunk (min (known - reused) p.budget) := capChunk_pos _ _ (by omega)
        have hnd := div_le_blocksFor eng.blockSize (reused + capChunk p.chunk (min (known - reused) p.budget))
        generalize capChunk p.chunk (min (known - reused) p.budget) = n at hn1 hnd ⊢
        split
        · exact ⟨hc, hi⟩
        · rename_i hfit
          refine admitHeads_pinv eng only N U0 fuel _ ?_ (by exact ht)
          have hcons := consume_spec rq.sid (reused / eng.blockSize) p.cache hc.pos
          have he := evict_spec (usedBlocks p.done + cachedBlocks (consume rq.sid (reused / eng.blockSize) p.cache)
            + blocksFor eng.blockSize (reused + n) - eng.kvBlocks) _ hcons.2
          refine ⟨⟨?_, ?_, ?_, he.2, ?_⟩, ?_⟩
          · have h1 := he.1
            have h2 := hcons.1
            have h3 := Nat.le_max_left (blocksFor eng.blockSize (reused + n)) (blocksFor eng.blockSize known)
            have h4 := hc.kv
            rw [ht] at h4 ⊢
            simp only [usedBlocks_append, usedBlocks] at h1 h4 ⊢
            omega
          · intro x hx
            rcases (mem_appendRes _ _ _).mp hx with hx | hx
            · exact hc.done x hx
            · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
              subst hx
              refine ⟨?_, fun h => by simp at h, ?_⟩
              · show (reused + (if excluded only false = true then 0 else n)) / eng.blockSize
                  ≤ blocksFor eng.blockSize (reused + n)
                refine Nat.le_trans (Nat.div_le_div_right ?_) hnd
                split <;> omega
              · show ReqOk N (if rq.admitted = true then { rq with kept := known }
                  else { rq with kept := known, cachedAt := reused, admitted := true })
                split
                · exact ⟨by have := hrq.hit; show rq.hit ≤ known - 1; omega, hrq.first⟩
                · exact ⟨by have := hrq.hit; show rq.hit ≤ known - 1; omega, hrq.first⟩
          · intro x hx
            exact hc.todo x hx
          · intro q hq
            exact hc.wait q (by rw [hw]; exact List.mem_cons_of_mem _ hq)
          · intro hpre htok
            exfalso
            simp only [batchTokens_append, batchTokens] at htok
            obtain ⟨_, hd⟩ := hi hpre (by omega)
            have hex : excluded only false = false := by
              cases only with
              | none => rfl
              | some d =>
                cases d with
                | false => rfl
                | true =>
                  rcases hd rfl with h | ⟨_, h, _⟩
                  · exact absurd h hb
                  · rw [ht] at h; simp at h
            simp only [hex] at htok
            simp at htok
            omega

theorem clearSched_ok (bs N : Nat) : ∀ (l : List Res), (∀ r ∈ l, ResOk bs N r) →
    ∀ x ∈ clearSched l, ResOk bs N x
  | [], _, x, hx => by simp [clearSched] at hx
  | r :: rs, h, x, hx => by
    simp only [clearSched, List.mem_cons] at hx
    rcases hx with rfl | hx
    · have hr := h r List.mem_cons_self
      exact ⟨Nat.le_trans (Nat.div_le_div_right (by show r.pos + 0 ≤ r.pos + r.sched; omega)) hr.blocks,
        hr.dec, hr.req⟩
    · exact clearSched_ok bs N rs (fun y hy => h y (List.mem_cons_of_mem _ hy)) x hx

theorem clearSched_decoder : ∀ (l : List Res), anyDecoding l = true →
    (∀ r ∈ l, r.decoding = true → r.remaining ≠ 0) →
    ∃ x ∈ clearSched l, x.decoding = true ∧ x.remaining ≠ 0
  | [], h, _ => by simp [anyDecoding] at h
  | r :: rs, h, hd => by
    simp only [anyDecoding, Bool.or_eq_true] at h
    rcases h with h | h
    · exact ⟨{ r with sched := 0 }, List.mem_cons_self, h, hd r List.mem_cons_self h⟩
    · obtain ⟨x, hx, h1, h2⟩ := clearSched_decoder rs h (fun y hy => hd y (List.mem_cons_of_mem _ hy))
      exact ⟨x, List.mem_cons_of_mem _ hx, h1, h2⟩

/-- Every plan keeps the plan's invariant. -/
theorem plan_pinv (eng : Engine) (chunk : Nat) (m : Machine) (waiting : List Req)
    (hkv : usedBlocks m.running + cachedBlocks m.cache ≤ eng.kvBlocks)
    (hres : ∀ r ∈ m.running, ResOk eng.blockSize m.now r)
    (hpos : ∀ e ∈ m.cache, 0 < e.blocks)
    (hw : ∀ q ∈ waiting, ReqOk m.now q) :
    PInv eng m.now (usedBlocks m.running) (phaseOf eng m.running) (plan eng chunk m waiting) := by
  have hdec : phaseOf eng m.running = some true →
      ∃ r ∈ clearSched m.running, r.decoding = true ∧ r.remaining ≠ 0 := by
    intro h
    unfold phaseOf at h
    split at h
    · simp only [Option.some.injEq] at h
      exact clearSched_decoder m.running h (fun r hr => (hres r hr).dec)
    · simp at h
  unfold plan
  dsimp only
  generalize phaseOf eng m.running = only at hdec ⊢
  have h0 : PInv eng m.now (usedBlocks m.running) only
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ := by
    refine ⟨⟨?_, fun r hr => by simp at hr, clearSched_ok _ _ _ hres, hpos, hw⟩, ?_⟩
    · show usedBlocks [] + usedBlocks (clearSched m.running) + cachedBlocks m.cache ≤ eng.kvBlocks
      rw [usedBlocks_clearSched]; simp only [usedBlocks]; omega
    · intro _ _
      refine ⟨?_, fun h => Or.inr (hdec h)⟩
      show usedBlocks [] + usedBlocks (clearSched m.running) ≤ usedBlocks m.running
      rw [usedBlocks_clearSched]; simp only [usedBlocks]; omega
  have hP0 : PlanInv eng.budget chunk only
      ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ :=
    ⟨rfl, by simp [batchTokens], batchTokens_clearSched _, fun _ _ => rfl⟩
  have hend := (serveRunning_inv eng only eng.budget chunk (resCount m.running + 1) _ hP0 rfl
    (by simp [resCount_clearSched])).2
  have h1 := serveRunning_pinv eng only m.now (usedBlocks m.running) (resCount m.running + 1) _ h0
  generalize serveRunning eng only (resCount m.running + 1)
    ⟨eng.budget, chunk, [], clearSched m.running, waiting, m.cache, m.relSeq, 0, false⟩ = p1 at hend h1 ⊢
  obtain ⟨hc, hi⟩ := h1
  have h2 : PInv eng m.now (usedBlocks m.running) only
      { p1 with done := appendRes p1.done p1.todo, todo := [] } := by
    refine ⟨⟨?_, ?_, fun x hx => by simp at hx, hc.pos, hc.wait⟩, ?_⟩
    · have := hc.kv
      simp only [usedBlocks_append, usedBlocks]
      omega
    · intro x hx
      rcases (mem_appendRes _ _ _).mp hx with hx | hx
      · exact hc.done x hx
      · exact hc.todo x hx
    · intro hpre htok
      simp only [batchTokens_append] at htok
      obtain ⟨hu, hd⟩ := hi hpre (by omega)
      refine ⟨?_, ?_⟩
      · simp only [usedBlocks_append, usedBlocks]; omega
      · intro hon
        rcases hd hon with h | ⟨d, hdm, _⟩
        · exact Or.inl h
        · rcases hend with h | h
          · exact Or.inl h
          · rw [h] at hdm; simp at hdm
  split
  · exact admitHeads_pinv eng only _ _ _ _ h2 rfl
  · exact h2

/-! ## Executing an iteration -/

theorem apply_inv (eng : Engine) (sessions : List Session) (now : Nat) :
    ∀ (l : List Res) (m : Machine) (kept : List Res),
      (∀ r ∈ l, ResOk eng.blockSize now r) → (∀ r ∈ kept, ResOk eng.blockSize now r) →
      (∀ e ∈ m.cache, 0 < e.blocks) → (∀ o ∈ m.outcomes, o.first ≤ o.last) →
      usedBlocks (apply eng sessions now m l kept).running + cachedBlocks (apply eng sessions now m l kept).cache
        ≤ usedBlocks kept + usedBlocks l + cachedBlocks m.cache ∧
      (∀ r ∈ (apply eng sessions now m l kept).running, ResOk eng.blockSize now r) ∧
      (∀ e ∈ (apply eng sessions now m l kept).cache, 0 < e.blocks) ∧
      (∀ o ∈ (apply eng sessions now m l kept).outcomes, o.first ≤ o.last) ∧
      (apply eng sessions now m l kept).waiting = m.waiting
  | [], m, kept, _, hk, hc, ho => ⟨by simp [apply, usedBlocks], hk, hc, ho, rfl⟩
  | r :: rs, m, kept, hl, hk, hc, ho => by
    have hr := hl r List.mem_cons_self
    have hrs : ∀ x ∈ rs, ResOk eng.blockSize now x := fun x hx => hl x (List.mem_cons_of_mem _ hx)
    have hreq : ReqOk now (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
        then { r.req with first := now, hasFirst := true } else r.req) := by
      split
      · exact ⟨hr.req.hit, Nat.le_refl _⟩
      · exact hr.req
    simp only [apply]
    split
    · obtain ⟨i1, i2, i3, i4, i5⟩ := apply_inv eng sessions now rs m (appendRes kept [r]) hrs (by
        intro x hx
        rcases (mem_appendRes _ _ _).mp hx with hx | hx
        · exact hk x hx
        · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
          subst hx; exact hr) hc ho
      refine ⟨?_, i2, i3, i4, i5⟩
      simp only [usedBlocks_append, usedBlocks] at i1 ⊢
      omega
    · generalize (if ((r.decoding = true ∨ r.remaining - r.sched = 0) ∧ r.req.hasFirst = false)
        then { r.req with first := now, hasFirst := true } else r.req) = req at hreq ⊢
      generalize (if r.decoding = true then r.remaining - r.sched
        else if r.remaining - r.sched = 0 then r.req.out - 1 - (r.known - r.req.prompt)
        else r.remaining - r.sched) = left
      split
      · rename_i hfin
        have hrel := release_spec eng req.sid (min (req.prompt + req.out - 1) (r.pos + r.sched)) m.relSeq
          m.cache hc
        have hdiv : min (req.prompt + req.out - 1) (r.pos + r.sched) / eng.blockSize ≤ r.alloc :=
          Nat.le_trans (Nat.div_le_div_right (Nat.min_le_right _ _)) hr.blocks
        obtain ⟨i1, i2, i3, i4, i5⟩ := apply_inv eng sessions now rs
          { m with cache := (release eng req.sid (min (req.prompt + req.out - 1) (r.pos + r.sched)) m.relSeq
                      m.cache).1,
                   relSeq := (release eng req.sid (min (req.prompt + req.out - 1) (r.pos + r.sched)) m.relSeq
                      m.cache).2,
                   outcomes := appendOutcome m.outcomes
                     ⟨req.sid, req.turn, req.first, now, req.pre, req.cachedAt⟩,
                   pending := nextTurn sessions now req m.pending } kept hrs hk hrel.2 (by
            intro o hoo
            rcases (mem_appendOutcome _ _ _).mp hoo with hoo | rfl
            · exact ho o hoo
            · exact hreq.first)
        refine ⟨?_, i2, i3, i4, i5⟩
        have := hrel.1
        simp only [usedBlocks] at i1 ⊢
        omega
      · rename_i hfin
        obtain ⟨i1, i2, i3, i4, i5⟩ := apply_inv eng sessions now rs m
          (appendRes kept [⟨req, r.alloc, r.pos + r.sched, r.known,
            decide (r.decoding = true ∨ r.remaining - r.sched = 0), left, 0⟩]) hrs (by
          intro x hx
          rcases (mem_appendRes _ _ _).mp hx with hx | hx
          · exact hk x hx
          · simp only [List.mem_cons, List.not_mem_nil, or_false] at hx
            subst hx
            refine ⟨?_, ?_, hreq⟩
            · show (r.pos + r.sched + 0) / eng.blockSize ≤ r.alloc
              exact hr.blocks
            · intro hd h0
              exact hfin ⟨of_decide_eq_true hd, h0⟩) hc ho
        refine ⟨?_, i2, i3, i4, i5⟩
        simp only [usedBlocks_append, usedBlocks] at i1 ⊢
        omega

/-! ## The machine -/

theorem newReq_ok (eng : Engine) (sessions : List Session) (p : Pending) (N : Nat) :
    ReqOk N (newReq eng sessions p) := by
  refine ⟨?_, Nat.zero_le _⟩
  unfold newReq
  dsimp only
  repeat' split
  all_goals first | exact reusable_le _ _ | exact Nat.zero_le _

theorem submit_ok (eng : Engine) (sessions : List Session) (N : Nat) :
    ∀ (ps : List Pending) (w : List Req), (∀ q ∈ w, ReqOk N q) → ∀ q ∈ submit eng sessions ps w, ReqOk N q
  | [], w, h => h
  | p :: ps, w, h => by
    simp only [submit]
    split
    · exact submit_ok eng sessions N ps w h
    · apply submit_ok eng sessions N ps
      intro q hq
      rcases (mem_appendReq _ _ _).mp hq with hq | rfl
      · exact h q hq
      · exact newReq_ok eng sessions p N

theorem inv_of (eng : Engine) (m M : Machine) (h : Inv eng m) (hn : m.now ≤ M.now)
    (hkv : usedBlocks M.running ≤ usedBlocks m.running) (hres : ∀ r ∈ M.running, ResOk eng.blockSize m.now r)
    (hc : M.cache = m.cache) (hw : ∀ q ∈ M.waiting, ReqOk m.now q)
    (ho : ∀ o ∈ M.outcomes, o.first ≤ o.last) : Inv eng M :=
  ⟨by have := h.kv; rw [hc]; omega, fun r hr => (hres r hr).mono hn, by rw [hc]; exact h.pos,
    fun q hq => (hw q hq).mono hn, ho⟩

/-- A step keeps the invariant. -/
theorem step_inv (eng : Engine) (sessions : List Session) (m : Machine) (h : Inv eng m) :
    Inv eng (step eng sessions m) := by
  have hlater := duePending_later m.now m.pending
  unfold step
  cases hd : duePending m.now m.pending with
  | mk due later =>
    rw [hd] at hlater
    dsimp only
    have hsub := submit_ok eng sessions m.now due m.waiting h.wait
    have hp := fun chunk => plan_pinv eng chunk m (submit eng sessions due m.waiting) h.kv h.res h.pos hsub
    have hrun : ∀ chunk, ∀ m' : Machine, m'.cache = (plan eng chunk m (submit eng sessions due m.waiting)).cache →
        m'.waiting = (plan eng chunk m (submit eng sessions due m.waiting)).waiting → m'.outcomes = m.outcomes →
        Inv eng { apply eng sessions m.now m' (plan eng chunk m (submit eng sessions due m.waiting)).done []
          with now := m.now + 1 } := by
      intro chunk m' hc' hw' ho'
      obtain ⟨hc, _⟩ := hp chunk
      generalize plan eng chunk m (submit eng sessions due m.waiting) = p2 at hc hc' hw' ⊢
      obtain ⟨i1, i2, i3, i4, i5⟩ := apply_inv eng sessions m.now p2.done m' [] hc.done (by simp)
        (by rw [hc']; exact hc.pos) (by rw [ho']; exact h.causal)
      refine ⟨?_, fun r hr => (i2 r hr).mono (Nat.le_succ _), i3, ?_, i4⟩
      · have := hc.kv
        rw [hc'] at i1
        simp only [usedBlocks] at i1 ⊢
        omega
      · intro q hq
        have hq' : q ∈ p2.waiting := by
          dsimp only at hq
          rw [i5, hw'] at hq
          exact hq
        exact (hc.wait q hq').mono (Nat.le_succ _)
    cases later with
    | nil =>
      dsimp only
      generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount (submit eng sessions due m.waiting) > 1
        then eng.chunk else 0) = chunk
      split
      · exact inv_of eng m _ h (Nat.le_refl _) (Nat.le_refl _) h.res rfl hsub h.causal
      · split
        · rename_i hz
          obtain ⟨_, hi⟩ := hp _
          exact inv_of eng m _ h (Nat.le_refl _) (by have := (hi hz.2 hz.1).1; dsimp only; omega) (hp _).core.done rfl hsub
            h.causal
        · exact hrun chunk _ rfl rfl rfl
    | cons q qs =>
      have hq : m.now ≤ q.time := Nat.le_of_lt (hlater q List.mem_cons_self)
      dsimp only
      generalize (if eng.chunk > 0 ∧ resCount m.running + reqCount (submit eng sessions due m.waiting) > 1
        then eng.chunk else 0) = chunk
      split
      · exact inv_of eng m _ h hq (Nat.le_refl _) h.res rfl hsub h.causal
      · split
        · rename_i hz
          obtain ⟨_, hi⟩ := hp _
          exact inv_of eng m _ h hq (by have := (hi hz.2 hz.1).1; dsimp only; omega) (hp _).core.done rfl hsub h.causal
        · exact hrun chunk _ rfl rfl rfl

theorem init_inv (eng : Engine) (sessions : List Session) : Inv eng (init sessions) :=
  ⟨by simp [init, usedBlocks, cachedBlocks], by simp [init], by simp [init], by simp [init], by simp [init]⟩

/-- A run keeps the invariant. -/
theorem run_inv (eng : Engine) (sessions : List Session) :
    ∀ (fuel : Nat) (m : Machine), Inv eng m → Inv eng (run eng sessions fuel m)
  | 0, m, h => h
  | fuel + 1, m, h => by
    simp only [run]
    split
    · exact h
    · exact run_inv eng sessions fuel _ (step_inv eng sessions m h)

/-- KV conservation: at every step of every run of every engine of the fragment, from the empty
machine, the blocks allocated to the residents plus the blocks the prefix cache holds are within
the pool's cap. -/
theorem kv_conserved (eng : Engine) (sessions : List Session) (fuel : Nat) :
    usedBlocks (run eng sessions fuel (init sessions)).running
      + cachedBlocks (run eng sessions fuel (init sessions)).cache ≤ eng.kvBlocks :=
  (run_inv eng sessions fuel (init sessions) (init_inv eng sessions)).kv

/-- Causality: every answered turn of every run has its first token no later than its last. -/
theorem causal (eng : Engine) (sessions : List Session) (fuel : Nat) :
    ∀ o ∈ (run eng sessions fuel (init sessions)).outcomes, o.first ≤ o.last :=
  (run_inv eng sessions fuel (init sessions) (init_inv eng sessions)).causal

end Serq
