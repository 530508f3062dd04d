"""Whole-program checks over the linked IR: loops that cannot let time pass,
the hidden-attribute rule, the live-state lint, forks that never join,
releases with nothing to release, and runs over several stages without a share."""

from __future__ import annotations

from dataclasses import dataclass, field

from serq.errors import SerqError
from serq.ir import models as ir
from serq.link.fold import attrs_read, fold


def _err(msg: str, span) -> SerqError:
    return SerqError(msg, span, "link")


def check_program(linker, program: ir.Program, workload_ast, server_ast, server_span) -> None:
    spans = linker.spans
    server_passes = passes_time(program.server, False)
    for block in (program.workload.session, program.server):
        _check_loops(block, server_passes, spans)
    for name, span, hold in linker.header_reads:
        if name in linker.live_sets:
            set_span, what = linker.live_sets[name]
            raise _err(f"the header of `hold {hold}` reads `{name}`, set at {set_span} from live state ({what}): "
                       "a header is evaluated at admission, and that set before the session queued; "
                       f"bind it in the hold's `at admission ({name} = …)`", span)
    if linker.forks and linker.joins == 0:
        raise _err("the program forks and never joins: a program that forks joins somewhere", linker.forks[0])
    for key, span, text in linker.release_outside:
        if key not in linker.lease_pools:
            raise _err(f"`release {text}` stands outside any hold of `{text}`, and no hold leases it: "
                       "there is nothing to release", span)
    if linker.multi_stage_runs and program.share == "none":
        _, span = linker.multi_stage_runs[0]
        raise _err("a run over several stages needs the program's `share maxmin;` or `share bottleneck;` "
                   "(the policy has no default)", span)
    _check_hidden(program, spans)


# ------------------------------------------------------------------ time
def passes_time(body: list, server_passes: bool) -> bool:
    """Does every path through `body` let time pass (a run of work not constantly 0,
    a hold whose body does, end; a turn when the server does)?"""
    return any(_stmt_passes(s, server_passes) for s in body)


def _stmt_passes(s, server_passes: bool) -> bool:
    if isinstance(s, ir.RunStmt):
        return fold(s.work) != 0
    if isinstance(s, ir.HoldStmt):
        return passes_time(s.body, server_passes)
    if isinstance(s, ir.BranchStmt):
        return passes_time(s.then, server_passes) and passes_time(s.otherwise, server_passes)
    if isinstance(s, ir.LoopStmt):
        return passes_time(s.body, server_passes)
    if isinstance(s, ir.EndStmt):
        return True
    if isinstance(s, ir.TurnStmt):
        return server_passes
    return False


def _check_loops(body: list, server_passes: bool, spans) -> None:
    for s in body:
        if isinstance(s, (ir.WhileStmt, ir.LoopStmt)) and not passes_time(s.body, server_passes):
            word = "while" if isinstance(s, ir.WhileStmt) else "loop"
            raise _err(f"this {word} can go round without letting time pass: every path through its body "
                       "must reach a run, a hold whose body does, or end", spans.get(id(s)))
        for inner in _blocks(s):
            _check_loops(inner, server_passes, spans)


def _blocks(s) -> list[list]:
    out = []
    for name in ("body", "then", "otherwise"):
        v = getattr(s, name, None)
        if isinstance(v, list):
            out.append(v)
    return out


# ------------------------------------------------------------------ hidden
@dataclass
class _Knowledge:
    revealed: frozenset = frozenset()
    roots: dict = field(default_factory=dict)  # attribute -> the hidden attributes its value derives from

    def copy(self) -> "_Knowledge":
        return _Knowledge(self.revealed, dict(self.roots))

    def join(self, other: "_Knowledge") -> "_Knowledge":
        roots = dict(self.roots)
        for k, v in other.roots.items():
            roots[k] = roots.get(k, frozenset()) | v
        return _Knowledge(self.revealed & other.revealed, roots)


def _check_hidden(program: ir.Program, spans) -> None:
    hidden = set(program.workload.hidden)
    if not hidden:
        return
    k = _Knowledge(roots={h: frozenset({h}) for h in hidden})
    _hidden_block(program.server, k, spans)
    # keys read for a waiting session at any time: nothing derived from a hidden attribute
    tainted = set(hidden)
    changed = True
    sets = [s for s in ir.walk_stmts(program.server) if isinstance(s, ir.SetStmt)]
    while changed:
        changed = False
        for s in sets:
            if s.name not in tainted and attrs_read(s.value) & tainted:
                tainted.add(s.name)
                changed = True
    for pool in program.pools:
        for what, keys in (("queue", getattr(pool.queue, "keys", [])), ("preempt", getattr(pool.preempt, "keys", [])),
                           ("evict", getattr(pool.evict, "keys", []))):
            for key in keys:
                bad = attrs_read(key) & tainted
                if bad:
                    raise _err(f"pool `{pool.name}`'s {what} key reads `{sorted(bad)[0]}`, hidden or derived from a hidden "
                               "attribute: the scheduler may not read it", spans.get(id(key)))


def _concealed(k: _Knowledge, e) -> list[str]:
    out = []
    for a in sorted(attrs_read(e)):
        if k.roots.get(a, frozenset()) - k.revealed:
            out.append(a)
    return out


def _refuse(k: _Knowledge, e, what: str, spans) -> None:
    if e is None:
        return
    bad = _concealed(k, e)
    if bad:
        a = bad[0]
        roots = sorted(k.roots[a] - k.revealed)
        origin = f"`{a}` is hidden" if roots == [a] else f"`{a}` derives from hidden `{'`, `'.join(roots)}`"
        raise _err(f"{origin}: {what} may read it only after a run whose work reads it has ended",
                   spans.get(id(e)))


def _hidden_block(body: list, k: _Knowledge, spans) -> _Knowledge:
    for s in body:
        k = _hidden_stmt(s, k, spans)
    return k


def _hidden_stmt(s, k: _Knowledge, spans) -> _Knowledge:
    if isinstance(s, ir.SetStmt):
        k = k.copy()
        roots = frozenset().union(*(k.roots.get(a, frozenset()) for a in attrs_read(s.value)))
        k.roots[s.name] = roots
        return k
    if isinstance(s, ir.RunStmt):
        for st in s.stages:
            _refuse(k, st.index, "a stage's index", spans)
        k = k.copy()
        k.revealed = k.revealed | frozenset().union(*(k.roots.get(a, frozenset()) for a in attrs_read(s.work)))
        return k
    if isinstance(s, ir.HoldStmt):
        for hp in s.pools:
            _refuse(k, hp.units, "a hold's units", spans)
            _refuse(k, hp.reserve, "a hold's reserve", spans)
            _refuse(k, hp.pool.index, "a pool's index", spans)
        _refuse(k, s.reuse, "a hold's reuse", spans)
        if s.lease is not None:
            _refuse(k, s.lease.duration, "a lease's duration", spans)
        return _hidden_block(s.body, k, spans)
    if isinstance(s, (ir.GrowStmt, ir.LoadStmt)):
        _refuse(k, s.amount, "an allocation", spans)
        return k
    if isinstance(s, ir.BranchStmt):
        _refuse(k, s.test, "a branch guard (a decision)", spans)
        return _hidden_block(s.then, k, spans).join(_hidden_block(s.otherwise, k, spans))
    if isinstance(s, ir.WhileStmt):
        _refuse(k, s.test, "a while guard (a decision)", spans)
        return k.join(_hidden_block(s.body, k, spans))
    if isinstance(s, ir.LoopStmt):
        return k.join(_hidden_block(s.body, k, spans))
    if isinstance(s, ir.ForkStmt):
        _hidden_block(s.body, k, spans)
        return k
    if isinstance(s, ir.ChooseStmt):
        _refuse(k, s.count, "choose", spans)
        for key in s.keys:
            _refuse(k, key, "a choose key (a decision)", spans)
        k = k.copy()
        k.roots[s.name] = frozenset()
        return k
    return k


