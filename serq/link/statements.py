"""Linking statements: each statement on its side (session, server, init, turn), the holds and
their pools, references and indices, runs on stages (the reference, *Statements*, *Pools* and
*Holds*). A part of `serq.link.linker.Linker`."""

from __future__ import annotations

import math
from pathlib import Path

from serq.ir import catalogue as C
from serq.ir import models as ir
from serq.ir.catalogue import Moment as M
from serq.limits import COUNT_LIMIT
from serq.link.common import StmtScope, link_error, show_ref, type_name
from serq.link.consts import format_number
from serq.link.expand import map_stmt_exprs, walk_expr
from serq.link.fold import attrs_read, fold
from serq.syntax import ast as A


class StatementLinking:
    """The Linker's statements (its state is the Linker's)."""

    def _block(self, body: list[A.Stmt], scope: StmtScope) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, A.CostFieldsDecl):
                self._side_allows(s, scope)
                out.extend(self._cost_fields(s, scope))
            else:
                out.append(self._stmt(s, scope))
        return out

    def _side_allows(self, s: A.Stmt, scope: StmtScope) -> None:
        if scope.side in ("init", "turn") and not isinstance(
                s, (A.SizeDecl, A.CostDecl, A.CostFieldsDecl, A.Set, A.Observe, A.Branch, A.Choose)):
            raise link_error(f"the workload's {scope.side} block holds Size, set, observe, branch and choose; "
                       f"{_stmt_name(s)} belongs in the session or the server", s.span)

    def _moment(self, scope: StmtScope) -> M:
        return M.SESSION if scope.side in ("session", "init", "turn") else M.SERVER

    def _stmt(self, s: A.Stmt, scope: StmtScope) -> ir.Stmt:
        out = self._stmt_inner(s, scope)
        out.at = self._loc(s.span)
        self.spans[id(out)] = s.span
        return out

    def _stmt_inner(self, s: A.Stmt, scope: StmtScope) -> ir.Stmt:
        moment = self._moment(scope)
        self._side_allows(s, scope)
        if isinstance(s, A.Turn):
            if scope.side != "session":
                raise link_error("`turn;` in the server: a turn is the session's; the server's statements run for each turn",
                           s.span)
            if scope.in_fork:
                raise link_error("`turn;` in a fork: a leg may not turn, end, fork or join", s.span)
            return ir.TurnStmt()
        if isinstance(s, (A.Set, A.SizeDecl, A.CostDecl)):
            name = self._set_target(s.target) if isinstance(s, A.Set) else s.name
            value, t = self._expr(s.value, moment)
            a = self.attributes[name]
            if isinstance(s, A.CostDecl):
                if t is None:
                    raise link_error(f"`Cost {name} = …` must be a cost: write cost(resource, …)", s.value.span)
                if a.resources and set(a.resources) != t:
                    raise link_error(f"`Cost {name}` is {type_name(frozenset(a.resources))} elsewhere, here {type_name(t)}",
                               s.span)
                a.resources = sorted(t)
            elif a.type == "cost":
                if t is None or (a.resources and set(a.resources) != t):
                    raise link_error(f"`{name}` is {type_name(frozenset(a.resources))}; this sets it to {type_name(t)}",
                               s.value.span)
            elif t is not None:
                raise link_error(f"`set {name} = …` of {type_name(t)}: declare it with `Cost {name} = …`", s.value.span)
            if any(isinstance(n, A.Call) and n.fn in C.POOL_OBSERVABLES | C.STAGE_OBSERVABLES.keys()
                   for n in walk_expr(s.value)):
                call = next(n for n in walk_expr(s.value)
                            if isinstance(n, A.Call) and n.fn in C.POOL_OBSERVABLES | C.STAGE_OBSERVABLES.keys())
                self.live_sets.setdefault(name, (s.span, f"{call.fn}(…)"))
            return ir.SetStmt(name=name, value=value)
        if isinstance(s, A.Observe):
            value, t = self._expr(s.value, moment)
            self._numeric(t, f"observe `{s.name}`", s.value.span)
            return ir.ObserveStmt(name=s.name, value=value)
        if isinstance(s, A.Hold):
            return self._hold(s, scope)
        if isinstance(s, (A.Grow, A.Load)):
            word = "grow" if isinstance(s, A.Grow) else "load"
            pref = self._pool_ref(s.pool, moment)
            self._enclosing_hold(pref, s.pool, scope, f"`{word} {show_ref(s.pool)}`")
            amount, t = self._expr(s.amount, moment)
            self._amount_type(t, {pref.pool}, f"the amount of `{word} {show_ref(s.pool)}`", s.amount.span)
            self._check_amount(amount, f"the amount of `{word} {show_ref(s.pool)}`", s.amount.span)
            return (ir.GrowStmt if word == "grow" else ir.LoadStmt)(pool=pref, amount=amount)
        if isinstance(s, A.Drop):
            return ir.DropStmt(pool=self._pool_ref(s.pool, moment))
        if isinstance(s, A.Release):
            pref = self._pool_ref(s.pool, moment)
            key = _ref_key(pref)
            if not any(k == key for k, _, _ in scope.holds):
                self.release_outside.append((key, s.span, show_ref(s.pool)))
            return ir.ReleaseStmt(pool=pref)
        if isinstance(s, A.Run):
            return self._run(s, scope)
        if isinstance(s, A.Branch):
            return ir.BranchStmt(test=self._guard(s.test, "branch", moment), then=self._block(s.then, scope),
                                 otherwise=self._block(s.otherwise or [], scope))
        if isinstance(s, A.While):
            return ir.WhileStmt(test=self._guard(s.test, "while", moment), body=self._block(s.body, scope))
        if isinstance(s, A.Loop):
            return ir.LoopStmt(body=self._block(s.body, scope))
        if isinstance(s, A.Fork):
            if scope.in_fork:
                raise link_error("`fork` in a fork: a leg may not turn, end, fork or join", s.span)
            if scope.preemptible:
                raise link_error("`fork` inside a hold that may be preempted: the hold would run again and fork twice",
                           s.span)
            self.forks.append(s.span)
            return ir.ForkStmt(body=self._block(s.body, scope.inner(in_fork=True, holds=[])))
        if isinstance(s, A.Join):
            if scope.in_fork:
                raise link_error("`join` in a fork: a leg may not turn, end, fork or join", s.span)
            self.joins += 1
            return ir.JoinStmt()
        if isinstance(s, A.Choose):
            count_ir, t = self._expr(s.count, moment)
            self._numeric(t, "the count of choose", s.count.span)
            v = fold(count_ir)
            if v is not None and not (math.isfinite(v) and v == int(v) and 1 <= v <= COUNT_LIMIT):
                raise link_error(f"`choose {s.name} in {format_number(v)}`: the count is a whole number from 1 to a million",
                           s.count.span)
            keys = []
            for k in s.keys:
                key, kt = self._expr(k, moment)
                self._numeric(kt, "a choose key", k.span)
                keys.append(key)
            return ir.ChooseStmt(name=s.name, count=count_ir, keys=keys)
        if isinstance(s, A.End):
            if scope.in_fork:
                raise link_error("`end;` in a fork: a leg may not turn, end, fork or join", s.span)
            if scope.side == "server" and scope.holds:
                raise link_error("`end;` inside a hold in the server: a server ends a request outside any hold", s.span)
            return ir.EndStmt()
        if isinstance(s, A.CallStmt):
            raise link_error(f"`{s.name}(…);` calls no def of statements (an engine's request is vocabulary, "
                       "lowered by `serq.lower`)", s.span)
        if isinstance(s, A.EntryCall):
            if scope.side == "session":
                raise link_error(f"`{show_ref(s.queue)}.{s.verb}(…)` in the session: a queue's entry is called by the server",
                           s.span)
            self._vocabulary(f"the queue entry call `{show_ref(s.queue)}.{s.verb}(…)`", s.span)
        if isinstance(s, (A.Mark, A.Transfer, A.Tool, A.RequestRun, A.RequestAdmission, A.RequestCache)):
            self._vocabulary(_stmt_name(s), s.span)
        raise link_error(f"{_stmt_name(s)} does not stand here", s.span)  # pragma: no cover

    def _guard(self, e: A.Expr, kind: str, moment: M) -> ir.Expr:
        """A `branch` or `while` guard: a number, and when constant 0 or 1."""
        test, t = self._expr(e, moment)
        self._numeric(t, f"a {kind} guard", e.span)
        v = fold(test)
        if v is not None and v not in (0, 1):
            raise link_error(f"the {kind} guard is the constant {format_number(v)}: a guard is 0 or 1", e.span)
        return test

    def _cost_fields(self, s: A.CostFieldsDecl, scope: StmtScope) -> list[ir.Stmt]:
        """`Cost x = { R: e, … }`: one scalar attribute `x.R`, a cost of R, per field, in written order."""
        out: list[ir.Stmt] = []
        for fname, value, fspan in s.fields:
            v, t = self._expr(value, self._moment(scope))
            self._numeric(t, f"field `{fname}` of `Cost {s.name}` (an amount in {fname}'s units)", value.span)
            stmt = ir.SetStmt(name=f"{s.name}.{fname}", value=ir.CostOf(resources=[fname], arg=v),
                              at=self._loc(fspan))
            self.spans[id(stmt)] = fspan
            out.append(stmt)
        return out

    def _loc(self, span: A.Span) -> ir.Loc:
        """A statement's place in the IR: the file relative to the program's folder, so that the IR
        does not depend on where `serq` was run from."""
        base = Path(self.unit.path).parent
        try:
            file = Path(span.file).relative_to(base).as_posix()
        except ValueError:
            file = Path(span.file).name
        return ir.Loc(file=file, line=span.line, col=span.col)

    def _check_amount(self, amount: ir.Expr, what: str, span: A.Span) -> None:
        v = fold(amount)
        if v is not None and (math.isnan(v) or v < 0):
            raise link_error(f"{what} is the constant {format_number(v)}: an amount is not negative and not NaN", span)

    def _enclosing_hold(self, pref: ir.PoolRef, ref: A.Ref, scope: StmtScope, what: str) -> None:
        key = _ref_key(pref)
        if not any(k == key for k, _, _ in scope.holds):
            held = ", ".join(sorted({_key_text(k) for k, _, _ in scope.holds})) or "none"
            raise link_error(f"{what} stands inside a hold of `{show_ref(ref)}` (the holds around it: {held})", ref.span)

    def _hold(self, s: A.Hold, scope: StmtScope) -> ir.HoldStmt:
        names = ", ".join(show_ref(p.pool) for p in s.pools)
        # a header whose first pool an engine admits reads that engine's registers bare, as its clauses do
        first = s.pools[0].pool.name if s.pools else None
        self.header_engine = self.pools[first].admit_via if first in self.pools else None
        try:
            pools, keys, header_attrs, reuse = self._hold_header(s)
        finally:
            self.header_engine = None
        for name, span in header_attrs:
            self.header_reads.append((name, span, names))
        needed = {p.pool.pool for p in pools}
        preemptible = scope.preemptible or any(
            isinstance(self.pools[p.pool.pool].preempt, ir.PreemptBy) for p in pools)
        inner = scope.inner(holds=scope.holds + [(k, None, s) for k in keys], preemptible=preemptible)
        if s.cache is None:
            for n in _stmt_refs(s.body):
                if n.is_bare and n.name == "cached":
                    raise link_error("this hold has no `cache`, so `cached` is 0 in its body: a hold without cache "
                               "leaves the prefix alone (write `cache (…)` to take part in the prefix cache)", n.span)
        index_attrs = {a for hp in pools if hp.pool.index is not None for a in attrs_read(hp.pool.index)}
        if index_attrs:
            for st in A.walk_stmts(s.body):
                target = (st.target.name if isinstance(st, A.Set) else st.name if isinstance(st, A.Choose) else None)
                if target in index_attrs:
                    raise link_error(f"the hold's body changes `{target}`, which the hold's index reads: "
                               "the index must name one member throughout", st.span)
        body = self._block(s.body, inner)
        cache = None
        if s.cache is not None:
            cache, ct = self._expr(s.cache, M.HOLD_CACHE)
            self._amount_type(ct, needed, "the cache of the hold", s.cache.span)
            self._check_amount(cache, "the cache of the hold", s.cache.span)
        lease = None
        if s.lease is not None:
            lref = self._pool_ref(s.lease[0], M.LEASE)
            if _ref_key(lref) not in keys:
                raise link_error(f"`lease {show_ref(s.lease[0])}` names a pool this hold does not hold", s.lease[0].span)
            duration, dt = self._expr(s.lease[1], M.LEASE)
            self._numeric(dt, "a lease's duration (seconds)", s.lease[1].span)
            self._check_amount(duration, "a lease's duration", s.lease[1].span)
            lease = ir.Lease(pool=lref, duration=duration)
            self.lease_pools.add(_ref_key(lref))
        return ir.HoldStmt(pools=pools, reuse=reuse, body=body, cache=cache, lease=lease)

    def _hold_header(self, s: A.Hold):
        """The header (read at admission): each pool's units and reserve, the reuse; the pool keys and
        the attributes the header reads."""
        pools: list[ir.HoldPool] = []
        keys: list[tuple] = []
        header_attrs: list[tuple[str, A.Span]] = []
        for hp in s.pools:
            pref = self._pool_ref(hp.pool, M.HOLD_HEADER)
            key = _ref_key(pref)
            if key in keys:
                raise link_error(f"the hold names `{show_ref(hp.pool)}` twice: a hold names each pool once", hp.pool.span)
            keys.append(key)
            if pref.index is not None:
                self._check_index_reads(pref.index, hp.pool)
            units, ut = self._expr(hp.units, M.HOLD_HEADER)
            self._amount_type(ut, {pref.pool}, f"the units of `hold {show_ref(hp.pool)}`", hp.units.span)
            self._check_amount(units, f"the units of `hold {show_ref(hp.pool)}`", hp.units.span)
            reserve = None
            if hp.reserve is not None:
                reserve, rt = self._expr(hp.reserve, M.HOLD_HEADER)
                self._amount_type(rt, {pref.pool}, f"the reserve of `hold {show_ref(hp.pool)}`", hp.reserve.span)
                self._check_amount(reserve, f"the reserve of `hold {show_ref(hp.pool)}`", hp.reserve.span)
            self._check_fits(pref, units, reserve, hp)
            for x in (hp.units, hp.reserve):
                if x is not None:
                    header_attrs.extend(_attrs_read(x))
            pools.append(ir.HoldPool(pool=pref, units=units, reserve=reserve))
        needed = {p.pool.pool for p in pools}
        reuse = None
        if s.reuse is not None:
            if s.cache is None:
                raise link_error("a hold without `cache` writes `reuse`: only a hold that takes part in the prefix "
                           "cache reuses (`cache (0)` consumes the prefix and keeps nothing)", s.reuse.span)
            reuse, rt = self._expr(s.reuse, M.HOLD_HEADER)
            self._amount_type(rt, needed, "the reuse of the hold", s.reuse.span)
            self._check_amount(reuse, "the reuse of the hold", s.reuse.span)
            header_attrs.extend(_attrs_read(s.reuse))
        return pools, keys, header_attrs, reuse

    def _check_index_reads(self, index: ir.Expr, ref: A.Ref) -> None:
        for n in ir.walk(index):
            if isinstance(n, (ir.PoolObs, ir.StageObs, ir.Ctx, ir.Draw)):
                raise link_error(f"the index of `{show_ref(ref)}` is read again inside the hold and after a preemption: "
                           "it reads attributes and numbers, not the state, the clock or a draw", ref.span)
            if isinstance(n, ir.Attr) and n.name in C.SCHEDULER_ATTRIBUTES:
                raise link_error(f"the index of `{show_ref(ref)}` reads `{n.name}`, which admission and preemption set",
                           ref.span)

    def _check_fits(self, pref: ir.PoolRef, units: ir.Expr, reserve: ir.Expr | None, hp: A.HoldPool) -> None:
        cap = self.pools[pref.pool].cap
        if cap == "inf":
            return
        for value, what, span in ((units, "units", hp.units.span), (reserve, "reserve", getattr(hp.reserve, "span", None))):
            if value is None:
                continue
            v = fold(value)
            if v is not None and v > cap:
                raise link_error(f"the {what} of `hold {show_ref(hp.pool)}` are the constant {format_number(v)}, above "
                           f"the pool's cap {format_number(cap)}: the hold could never be admitted", span)

    def _run(self, s: A.Run, scope: StmtScope) -> ir.RunStmt:
        moment = self._moment(scope)
        if not s.stages:
            raise link_error("`run (…)` with no stage stands in a queue's entry, where it names the queue's own stage",
                       s.span)
        refs = [self._stage_ref(r, moment) for r in s.stages]
        names = [r.stage for r in refs]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise link_error(f"the run names stage array `{n}` twice: an index is known only when the run starts",
                           s.stages[i].span)
        for r, a in zip(refs, s.stages):
            st = self.stages[r.stage]
            if isinstance(st.service, ir.Step) and s.mode is None:
                raise link_error(f"`run {show_ref(a)}`: `{r.stage}` is an engine, so the run names its mode, "
                           f"`run {show_ref(a)} prefill (…)` or `decode`", a.span)
            if not isinstance(st.service, ir.Step) and s.mode is not None:
                raise link_error(f"`run {show_ref(a)} {s.mode}`: only an engine's run has a mode", a.span)
        if len(refs) > 1:
            for r, a in zip(refs, s.stages):
                st = self.stages[r.stage]
                cap = fold(st.service.capacity) if isinstance(st.service, ir.Ps) else None
                if not isinstance(st.service, ir.Ps) or cap is None or not cap > 0:
                    raise link_error(f"`{r.stage}` in a run over several stages: each is ps(φ) with a constant φ above 0",
                               a.span)
        work, t = self._expr(s.work, moment)
        self._amount_type(t, set(names), f"the work of `run {', '.join(show_ref(a) for a in s.stages)}`", s.work.span)
        self._check_amount(work, "the work of the run", s.work.span)
        growing = None
        if s.growing is not None:
            growing = self._pool_ref(s.growing, moment)
            self._enclosing_hold(growing, s.growing, scope, f"`growing {show_ref(s.growing)}`")
        out = ir.RunStmt(stages=refs, mode=s.mode, work=work, growing=growing)
        if len(refs) > 1:
            self.multi_stage_runs.append((out, s.span))
        return out


def _ref_key(r: ir.PoolRef) -> tuple:
    if r.index is None:
        return (r.pool, None)
    return (r.pool, r.index.model_dump_json())


def _key_text(k: tuple) -> str:
    return k[0] if k[1] is None else f"{k[0]}[…]"


def _stmt_name(s) -> str:
    return {
        A.Turn: "`turn;`", A.Hold: "`hold`", A.Run: "`run`", A.Loop: "`loop`", A.While: "`while`",
        A.Fork: "`fork`", A.Join: "`join`", A.End: "`end`", A.Grow: "`grow`", A.Load: "`load`",
        A.Release: "`release`", A.Drop: "`drop`", A.Mark: "`mark`", A.Transfer: "`transfer`", A.Tool: "`tool`",
        A.RequestRun: "an engine request's prefill/decode", A.RequestAdmission: "`at admission { … }`",
        A.RequestCache: "an engine request's cache", A.EntryCall: "a queue entry call", A.CallStmt: "a call",
    }.get(type(s), type(s).__name__)


def _stmt_refs(body) -> list[A.Ref]:
    found: list[A.Ref] = []

    def visit(e):
        found.extend(n for n in walk_expr(e) if isinstance(n, A.Ref))
        return e

    map_stmt_exprs(body, visit)
    return found


def _attrs_read(e: A.Expr) -> list[tuple[str, A.Span]]:
    return [(n.name, n.span) for n in walk_expr(e) if isinstance(n, A.Ref) and n.is_bare]
