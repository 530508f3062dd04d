"""Queues, their entries, NICs and the pull/push relations -> pools, stages and
the statements of an entry at its call site (*Queues*, *A KV transfer*).

A queue `Q` compiles to named pools and stages: its own pools `Q.X`, its stage
`Q` (an engine or a served stage), its NIC `Q.nic`, a link's latency `Q.latency`,
a relation's wait `Q.nic.latency`. A call `Q[i].verb(…)` is the entry's body with
the parameters substituted, the queue's names pointing at member i, `self` read
as i, sets and marks named `Q.x`, and the `from` queue's lease standing for its
source. They add no IR constructs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from serq.link.expand import map_stmt_exprs, substitute, walk_expr
from serq.lower.common import err, refuse_drawing_arguments, rewrite_refs
from serq.lower.engines import Engine, lower_engine
from serq.lower.requests import cost, mark_stmt
from serq.syntax import ast as A

ROLES = {
    "gateway": {"route": 0},
    "prefill": {"prefill": 1},
    "decode": {"decode": 1},
    "link": {"transfer": 1},
}


@dataclass
class Queue:
    decl: A.QueueDecl
    family: bool
    pools: dict[str, str] = field(default_factory=dict)  # local name -> IR name
    stages: dict[str, str] = field(default_factory=dict)  # local name -> IR name (the queue's own: its name)
    device: A.DeviceDecl | None = None
    engine: Engine | None = None
    nic: bool = False
    latency: A.Expr | None = None
    leased: str | None = None  # the local pool every entry leases, if they all do
    source: "Relation | None" = None  # the relation it reads or is written from

    @property
    def name(self) -> str:
        return self.decl.name


@dataclass
class Relation:
    reader: str
    source: str
    poster: str  # whose NIC posts the copy: the reader (pull) or the source (push)
    latency: A.Expr | None
    span: A.Span


class Queues:
    def __init__(self, lowering) -> None:
        self.lowering = lowering
        self.queues: dict[str, Queue] = {}
        self.relations: dict[str, Relation] = {}  # reader -> relation
        self.share: tuple[str, A.Span] | None = None

    def owns(self, name: str) -> bool:
        return name in self.queues

    # ------------------------------------------------------------------ declarations
    def lower_queue(self, d: A.QueueDecl) -> list[A.Item]:
        if d.name in self.queues:
            raise err(f"queue `{d.name}` is declared twice", d.span)
        for role in d.roles:
            if role not in ROLES:
                raise err(f"`{role}` is no role (the roles are gateway, prefill, decode and link; user-defined "
                          "roles are not supported)", d.span)
        if "gateway" in d.roles and d.count is not None:
            raise err(f"gateway `{d.name}` is a single queue", d.span)
        q = Queue(d, d.count is not None)
        self.queues[d.name] = q
        out: list[A.Item] = []
        count = d.count
        seen_stage = False
        for kind in d.order:
            if kind in ("engine", "serve"):
                seen_stage = True
            elif kind == "entry" and not seen_stage and (d.engine is not None or d.serve is not None):
                raise err(f"queue `{d.name}` declares an entry before its stage: its device and pools, then its "
                          "stage, then its entries", d.span)
        for dev in d.devices:
            if q.device is not None:
                raise err(f"queue `{d.name}` declares a second device", dev.span)
            q.device = A.DeviceDecl(f"{d.name}.{dev.name}", count, dev.resources, dev.span)
            q.device.local_name = dev.name  # type: ignore[attr-defined]
        if d.engine is not None:
            if q.device is None or d.engine.device != q.device.local_name:  # type: ignore[attr-defined]
                raise err(f"queue `{d.name}`'s engine runs on `{d.engine.device}`, which is not the queue's device",
                          d.engine.span)
            if d.engine.request is not None:
                raise err(f"queue `{d.name}`'s engine has a request: a queue's engine has none (its entries say "
                          "what it does with a request)", d.engine.request.span)
            d.engine.name = d.name
            q.engine = Engine(d.name, d.engine, q.device, count)
        if d.serve is not None and d.engine is not None:
            raise err(f"queue `{d.name}` has both an engine and a `serve`: one stage", d.serve.span)
        if d.engine is not None or d.serve is not None:
            q.stages[d.name] = d.name
        pooled: set[str] = set()
        for p in d.pools:
            out.append(self._queue_pool(q, p, pooled))
        if q.engine is not None:
            for c in q.engine.decl.capacities:
                if c.count is not None:
                    raise err(f"queue `{d.name}`'s engine holds `{c.name}[…]`: its entries name their own pool "
                              "without an index", c.span)
                if c.name not in pooled:
                    raise err(f"queue `{d.name}`'s engine declares `{c.name} cap …;`, which no "
                              f"`pool {c.name} on {d.name}` declares", c.span)
            self._scope_engine(q)
            step = lower_engine(q.engine, self.lowering.expand_defs, self.lowering.const_value)
            self.lowering.finder.declare(d.name, self.lowering.position)
            out.append(step)
        if q.device is not None:
            for r in q.device.resources:
                if isinstance(r, A.CapacityResource) and r.name not in pooled:
                    raise err(f"queue `{d.name}`'s device declares `{r.name} cap …;`, which no pool on it declares",
                              r.span)
        if d.serve is not None:
            out.append(A.StageDecl(d.name, count, d.serve.kind, d.serve.span))
            if d.serve.latency is not None:
                if "link" not in d.roles:
                    raise err("`latency` on a serve is a link's", d.serve.span)
                if any(e.verb == "transfer" for e in d.entries):
                    raise err("only a link without a `transfer` entry takes a latency", d.serve.span)
                q.latency = d.serve.latency
                out.append(A.StageDecl(f"{d.name}.latency", count, A.StageKind("delay", None, d.serve.span),
                                       d.serve.span))
        if d.nic is not None:
            q.nic = True
            out.append(A.StageDecl(f"{d.name}.nic", count, d.nic, d.nic.span))
            q.stages["nic"] = f"{d.name}.nic"
        for e in d.entries:
            self._check_entry(q, e)
        q.leased = self._leased_pool(q)
        return out

    def _scope_engine(self, q: Queue) -> None:
        """A queue's engine names its pools bare (`budget_left(P)` is its stage): point them at the IR names."""
        def rename(r: A.Ref):
            if r.is_bare and r.name in q.pools:
                return A.Ref(q.pools[r.name], [], r.span)
            return None
        d = q.engine.decl
        d.tokens = rewrite_refs(d.tokens, rename) if d.tokens is not None else None
        d.execute = rewrite_refs(d.execute, rename) if d.execute is not None else None

    def _queue_pool(self, q: Queue, p: A.PoolDecl, pooled: set[str]) -> A.PoolDecl:
        d = q.decl
        name = f"{d.name}.{p.name}"
        if p.name in q.pools:
            raise err(f"queue `{d.name}` declares pool `{p.name}` twice", p.span)
        q.pools[p.name] = name
        if p.owner is None:
            return A.PoolDecl(name, d.count, p.options, None, None, p.span)
        pooled.add(p.name)
        local_dev = q.device.local_name if q.device is not None else None  # type: ignore[attr-defined]
        if p.owner_member is not None:
            if p.owner != d.name or p.owner_member != local_dev:
                raise err(f"`pool {p.name} on {p.owner}.{p.owner_member}` in queue `{d.name}` names the queue's own "
                          f"engine and device, `{d.name}.{local_dev}`", p.span)
            return self.lowering._kernel_pool(p, d.count, self.lowering._device_capacity(q.device, p), d.name, d.name,
                                              name)
        if p.owner == local_dev:
            return self.lowering._kernel_pool(p, d.count, self.lowering._device_capacity(q.device, p), None,
                                              d.name if d.engine is not None else None, name)
        if p.owner == d.name:
            if q.engine is None:
                raise err(f"`pool {p.name} on {d.name}`: queue `{d.name}` has no engine", p.span)
            caps = [c for c in q.engine.decl.capacities if c.name == p.name]
            if not caps:
                raise err(f"`pool {p.name} on {d.name}`: the queue's engine declares no `{p.name} cap …;`", p.span)
            return self.lowering._kernel_pool(p, d.count, caps[0].cap, d.name, None, name)
        raise err(f"`pool {p.name} on {p.owner}` in queue `{d.name}`: a queue's pool is on its own device or engine",
                  p.span)

    def _check_entry(self, q: Queue, e: A.QueueEntry) -> None:
        verbs = {v: n for role in q.decl.roles for v, n in ROLES[role].items()}
        if e.verb not in verbs:
            raise err(f"`{e.verb}` is no entry of queue `{q.name}`'s roles ({', '.join(q.decl.roles) or 'none'})",
                      e.span)
        params = e.params or []
        if len(params) != verbs[e.verb]:
            raise err(f"the `{e.verb}` entry takes {verbs[e.verb]} parameter(s)", e.span)
        if e.source is not None:
            if e.verb != "decode":
                raise err(f"only a decode entry reads its KV `from` a queue", e.span)
            src = self.queues.get(e.source)
            if src is None:
                raise err(f"`{e.verb} (…) from {e.source}`: `{e.source}` is no queue declared above", e.span)
            if src.leased is None:
                raise err(f"`{e.verb} (…) from {e.source}`: queue `{e.source}` leases nothing on some way through "
                          "an entry, so no KV is left to read", e.span)
        same = [x for x in q.decl.entries if x.verb == e.verb and x.source == e.source]
        if len(same) > 1:
            raise err(f"queue `{q.name}` declares `{e.verb}` twice", e.span)

    @staticmethod
    def _leased_pool(q: Queue) -> str | None:
        leased: set[str] = set()
        for e in q.decl.entries:
            found = set()
            for s in A.walk_stmts(e.body):
                if isinstance(s, A.Hold) and s.lease is not None:
                    pool = s.lease[0]
                    if pool.name == e.source:
                        continue  # the source queue's lease, which this entry's transfer ends: not this queue's
                    # an entry holds and leases only its queue's own pools and its source's (the reference, Queues)
                    if not pool.is_bare or pool.name not in q.pools:
                        raise err(f"`lease {pool.name} (…)` in the `{e.verb}` entry of `{q.name}`: `{pool.name}` is "
                                  f"no pool of queue `{q.name}` ({', '.join(sorted(q.pools)) or 'it has none'})",
                                  pool.span)
                    found.add(pool.name)
            if not found:
                return None
            leased |= found
        return leased.pop() if len(leased) == 1 else None

    def pool_on(self, p: A.PoolDecl) -> A.PoolDecl:  # pragma: no cover - queues declare their pools inside
        raise err(f"`pool {p.name} on {p.owner}`: a queue's pools are declared inside the queue", p.span)

    def lower_relation(self, r: A.RelationDecl) -> list[A.Item]:
        first, second = r.reader_or_source, r.other
        reader, source = (first, second) if r.kind == "pull" else (second, first)
        for name in (first, second):
            if name not in self.queues:
                raise err(f"`{first} {r.kind} {second}`: `{name}` is no queue declared above", r.span)
            if not self.queues[name].nic:
                raise err(f"`{first} {r.kind} {second}`: queue `{name}` has no `nic`", r.span)
        if reader in self.relations:
            raise err(f"queue `{reader}` already reads from `{self.relations[reader].source}`: a reader has one source",
                      r.span)
        if r.latency is not None and self.lowering.const_value(r.latency) is None:
            raise err("a relation's latency is a number or a constant over lets", r.latency.span)
        if self.share is not None and self.share[0] != r.share:
            raise err(f"this relation shares by {r.share}, another by {self.share[0]}: a program has one share", r.span)
        self.share = (r.share, r.span)
        poster = reader if r.kind == "pull" else source
        rel = Relation(reader, source, poster, r.latency, r.span)
        self.relations[reader] = rel
        self.queues[reader].source = rel
        out: list[A.Item] = []
        latency_stage = f"{poster}.nic.latency"
        if not any(isinstance(x, Relation) and x.poster == poster for x in list(self.relations.values())[:-1]):
            out.append(A.StageDecl(latency_stage, self.queues[poster].decl.count,
                                   A.StageKind("delay", None, r.span), r.span))
        return out

    def finish(self, items: list[A.Item]) -> list[A.Item]:
        """The share the relations declare, and queue members' pools and stages named from outside."""
        if self.share is not None:
            own = [i for i in items if isinstance(i, A.ShareDecl)]
            if own:
                raise err("a program with a pull/push relation does not also write `share`: the relation says it",
                          own[0].span)
            items = items + [A.ShareDecl(self.share[0], self.share[1])]
        return [map_stmt_exprs(i, self._outside_refs) if isinstance(i, (A.GaugeDecl, A.ClaimDecl, A.WorkloadDecl,
                                                                         A.ServerDecl)) else i
                for i in items]

    def _outside_refs(self, e: A.Expr) -> A.Expr:
        """`holders(D[j].kv)`, `D.kv` (a family of one), `P.nic[i]`: the kernel's array references."""
        def rename(r: A.Ref):
            q = self.queues.get(r.name)
            if q is None or not r.selectors:
                return None
            sels = list(r.selectors)
            index = None
            if isinstance(sels[0], A.IndexSel):
                index = sels.pop(0)
            fields = []
            while sels and isinstance(sels[0], A.FieldSel):
                fields.append(sels.pop(0).name)
            name = ".".join([r.name, *fields])
            known = set(q.pools.values()) | {f"{q.name}.nic", f"{q.name}.nic.latency", f"{q.name}.latency"}
            if name not in known:
                return None
            if index is None and q.family and self.lowering.const_value(q.decl.count) not in (1, None):
                raise err(f"`{name}` is a member's: name it with an index, `{r.name}[j].{'.'.join(fields)}`", r.span)
            rest = ([index] if index is not None else []) + sels
            return A.Ref(name, [A.IndexSel(rewrite_refs(s.index, rename), s.span) if isinstance(s, A.IndexSel) else s
                                for s in rest], r.span)
        return rewrite_refs(e, rename)

    # ------------------------------------------------------------------ calls
    def call_entry(self, call: A.EntryCall) -> list[A.Stmt]:
        q = self.queues.get(call.queue.name)
        if q is None:
            raise err(f"`{call.queue.name}.{call.verb}(…)`: `{call.queue.name}` is no queue", call.span)
        index = self._member_index(q, call.queue, call.span)
        if "link" in q.decl.roles and call.verb == "transfer":
            return self._link_entry(q, index, call)
        source_name = call.source.name if call.source is not None else None
        entries = [e for e in q.decl.entries if e.verb == call.verb and e.source == source_name]
        if not entries:
            has_verb = [e for e in q.decl.entries if e.verb == call.verb]
            if has_verb and source_name is not None:
                raise err(f"`{q.name}.{call.verb}(…) from {source_name}`: the entry reads from "
                          f"{has_verb[0].source or 'no queue'}; a call from another queue is refused", call.span)
            if has_verb:
                raise err(f"`{q.name}.{call.verb}(…)` names no `from`, and the entry reads from "
                          f"`{has_verb[0].source}`", call.span)
            raise err(f"queue `{q.name}` has no `{call.verb}` entry", call.span)
        entry = entries[0]
        params = entry.params or []
        if len(call.args) != len(params):
            raise err(f"`{q.name}.{call.verb}(…)` takes {len(params)} argument(s), given {len(call.args)}", call.span)
        refuse_drawing_arguments(call.args, params, f"`{q.name}.{call.verb}(…)`")
        source = None
        if call.source is not None:
            src = self.queues[call.source.name]
            source = (src, self._member_index(src, call.source, call.span))
        gateway = "gateway" in q.decl.roles
        local_sets = set() if gateway else {s.target.name for s in A.walk_stmts(entry.body) if isinstance(s, A.Set)
                                             and s.target.is_bare}
        if not gateway:
            self._check_entry_reads(q, entry, entry.body, params, local_sets)
        body = map_stmt_exprs(entry.body, lambda e: substitute(e, dict(zip(params, call.args))))
        if call.to is not None:
            raise err("`… to POOL (n)` calls a link's transfer entry", call.span)
        return self._entry_stmts(q, index, source, body, local_sets)

    def _link_entry(self, q: Queue, index, call: A.EntryCall) -> list[A.Stmt]:
        """`L[k].transfer (n) from P to kv (m);`: the link's body on its own stage, then the KV lands."""
        entries = [e for e in q.decl.entries if e.verb == "transfer"]
        if not entries:
            raise err(f"link `{q.name}` has no `transfer (n)` entry: name it with `transfer on {q.name}[…] …`",
                      call.span)
        if call.source is None or call.to is None:
            raise err(f"`{q.name}.transfer (n) from POOL to POOL (m);` names the pools the KV moves between", call.span)
        entry = entries[0]
        params = entry.params or []
        if len(call.args) != len(params):
            raise err(f"`{q.name}.transfer(…)` takes {len(params)} argument(s), given {len(call.args)}", call.span)
        refuse_drawing_arguments(call.args, params, f"`{q.name}.transfer(…)`")
        body = map_stmt_exprs(entry.body, lambda e: substitute(e, dict(zip(params, call.args))))
        pool, n = call.to
        return self._entry_stmts(q, index, None, body, set()) + [
            A.Load(pool, cost([pool.name], n, call.span), call.span), A.Release(call.source, call.span)]

    def _member_index(self, q: Queue, ref: A.Ref, span: A.Span) -> A.Expr | None:
        idx = [s for s in ref.selectors if isinstance(s, A.IndexSel)]
        if q.family and not idx:
            raise err(f"`{q.name}` is a family: name the member, `{q.name}[j]`", span)
        if not q.family and idx:
            raise err(f"`{q.name}` is a single queue: it has no members", span)
        return idx[0].index if idx else None

    def _check_entry_reads(self, q: Queue, entry: A.QueueEntry, body, params, local_sets: set[str]) -> None:
        """An entry sees its own: its parameters (substituted), what it sets, cached, computed, the request's
        hidden attributes, the constants and the queue's pools and stage; nothing else the session has set."""
        hidden = self.lowering_hidden()
        allowed = local_sets | set(params) | {"cached", "computed", "serial", "turn_no"} | hidden
        outside = self.session_attributes | self.lowering.server_attributes
        for s in A.walk_stmts(body):
            for e in _stmt_exprs(s):
                for n in walk_expr(e):
                    if not (isinstance(n, A.Ref) and n.is_bare):
                        continue
                    if n.name in outside and n.name not in allowed:
                        raise err(f"the `{entry.verb}` entry of `{q.name}` reads `{n.name}`, which the session set: an "
                                  "entry reads its parameters, what it sets itself, cached, computed and the "
                                  "request's hidden attributes", n.span)
        self._check_headers(q, entry, body, local_sets, frozenset())

    def _check_headers(self, q: Queue, entry: A.QueueEntry, body, local_sets: set[str], before: frozenset) -> frozenset:
        """A hold's header reads what the entry sets above the hold (or in both arms of a branch above it),
        not what only its body, a later statement, a loop or a fork that may not have run sets."""
        for s in body:
            if isinstance(s, A.Hold):
                header = [p.units for p in s.pools] + [p.reserve for p in s.pools if p.reserve] + \
                         ([s.reuse] if s.reuse else []) + [b.value for b in s.bindings]
                for e in header:
                    for n in walk_expr(e):
                        if isinstance(n, A.Ref) and n.is_bare and n.name in local_sets and n.name not in before:
                            raise err(f"the header of a hold in the `{entry.verb}` entry of `{q.name}` reads "
                                      f"`{n.name}`, which the entry sets only in the hold's body or after it", n.span)
                self._check_headers(q, entry, s.body, local_sets, before)
                before = before | _definitely_set(s.body)
            elif isinstance(s, A.Branch):
                a = self._check_headers(q, entry, s.then, local_sets, before)
                b = self._check_headers(q, entry, s.otherwise or [], local_sets, before)
                before = a & b
            elif isinstance(s, (A.While, A.Loop, A.Fork)):
                self._check_headers(q, entry, s.body, local_sets, before)
            elif isinstance(s, A.Set) and s.target.is_bare:
                before = before | {s.target.name}
        return before

    @property
    def session_attributes(self) -> set[str]:
        return self.lowering.session_attributes

    def lowering_hidden(self) -> set[str]:
        return self.lowering.hidden

    def _entry_stmts(self, q: Queue, index, source, body, local_sets: set[str]) -> list[A.Stmt]:
        def member(name: str, span) -> A.Ref:
            return A.Ref(name, [A.IndexSel(index, span)] if index is not None else [], span)

        src_pool = None
        if source is not None:
            src, src_index = source
            src_pool = A.Ref(src.pools[src.leased], [A.IndexSel(src_index, A.NOWHERE)] if src_index is not None
                             else [], A.NOWHERE)

        def rename(r: A.Ref):
            if r.is_bare:
                if r.name == "self":
                    if index is None:
                        raise err("`self` is a member's index: a single queue has none", r.span)
                    return index
                if r.name in q.pools:
                    return member(q.pools[r.name], r.span)
                if r.name == q.name and q.name in q.stages:
                    return member(q.name, r.span)
                if r.name == "nic" and "nic" in q.stages:
                    return member(q.stages["nic"], r.span)
                if source is not None and r.name == source[0].name:
                    return src_pool
                if r.name in local_sets:
                    return A.Ref(q.name, [A.FieldSel(r.name, r.span)], r.span)
            return None

        def expr(e: A.Expr) -> A.Expr:
            e = _fix_costs(e, q, source)
            return rewrite_refs(e, rename)

        def stmt(s) -> list[A.Stmt]:
            if isinstance(s, A.Mark):
                return [mark_stmt(q.name, s.name, s.span)]
            if isinstance(s, A.Set) and s.target.is_bare and s.target.name in local_sets:
                return [A.Set(A.Ref(q.name, [A.FieldSel(s.target.name, s.span)], s.span), expr(s.value), s.span)]
            if isinstance(s, A.Run) and not s.stages:
                if q.name not in q.stages:
                    raise err(f"`run (…)` names the queue's own stage, and queue `{q.name}` has none", s.span)
                return [A.Run([member(q.name, s.span)], s.mode, expr(s.work), None, s.span)]
            if isinstance(s, A.Transfer) and not s.on:
                return [x for y in self._relation_transfer(q, index, source, s) for x in stmt(y)]
            if isinstance(s, A.Tool):
                return self.lowering.stmt(map_stmt_exprs(s, expr), "server")
            if isinstance(s, A.EntryCall):
                queue = A.Ref(s.queue.name, [A.IndexSel(expr(x.index), x.span) if isinstance(x, A.IndexSel) else x
                                             for x in s.queue.selectors], s.queue.span)
                inner = A.EntryCall(queue, s.verb, [expr(a) for a in s.args],
                                    expr(s.source) if s.source is not None else None,
                                    (expr(s.to[0]), expr(s.to[1])) if s.to is not None else None, s.span)
                return self.call_entry(inner)
            if isinstance(s, A.Hold):
                pools = [A.HoldPool(expr(p.pool), expr(p.units), expr(p.reserve) if p.reserve else None, p.span)
                         for p in s.pools]
                return [A.Hold(pools, expr(s.reuse) if s.reuse else None,
                               [A.Binding(b.name, expr(b.value), b.span) for b in s.bindings],
                               [x for y in s.body for x in stmt(y)], expr(s.cache) if s.cache else None,
                               (expr(s.lease[0]), expr(s.lease[1])) if s.lease else None, s.span)]
            for attr in ("body", "then", "otherwise"):
                inner = getattr(s, attr, None)
                if isinstance(inner, list):
                    s = _replace(s, attr, [x for y in inner for x in stmt(y)])
            return [map_stmt_exprs_shallow(s, expr)]

        return [x for s in body for x in stmt(s)]

    def _relation_transfer(self, q: Queue, index, source, s: A.Transfer) -> list[A.Stmt]:
        """`transfer (X) from P to kv (n);` in an entry of a queue that reads from P: the relation's copy."""
        rel = q.source
        if rel is None:
            raise err(f"`transfer` without `on` in queue `{q.name}`, which pulls from no queue and is pushed to by "
                      "none", s.span)
        if source is None or s.source.name != rel.source:
            raise err(f"`transfer … from {s.source.name}`: queue `{q.name}` reads from `{rel.source}`", s.span)
        src, src_index = source
        span = s.span
        poster_index = index if rel.poster == q.name else src_index

        def at(name: str, i) -> A.Ref:
            return A.Ref(name, [A.IndexSel(i, span)] if i is not None else [], span)

        out: list[A.Stmt] = []
        if rel.latency is not None:
            lat = f"{rel.poster}.nic.latency"
            out.append(A.Run([at(lat, poster_index)], None, cost([lat], rel.latency, span), None, span))
        nics = [f"{src.name}.nic", f"{q.name}.nic"]
        out.append(A.Run([at(nics[0], src_index), at(nics[1], index)], None, cost(nics, s.work, span), None, span))
        out.append(A.Load(s.dest, A.Call("cost", [A.Ref(s.dest.name, [], span), s.tokens], span), span))
        out.append(A.Release(A.Ref(src.name, [], span), span))
        return out

    def transfer_outside_entry(self, s: A.Transfer) -> list[A.Stmt]:
        if s.on:
            return self._link_transfer(s)
        from serq.lower.forms import lower_transfer
        return lower_transfer(s, self.lowering.finder)

    def _link_transfer(self, s: A.Transfer) -> list[A.Stmt]:
        """`transfer on L[k], M[l] (n) from S to P (m);`: a link's latency first, then one job on the stages."""
        out: list[A.Stmt] = []
        stages: list[A.Ref] = []
        for ref in s.on:
            q = self.queues.get(ref.name)
            if q is not None and "link" in q.decl.roles:
                idx = [x for x in ref.selectors if isinstance(x, A.IndexSel)]
                if q.latency is not None:
                    lat = f"{q.name}.latency"
                    out.append(A.Run([A.Ref(lat, idx, ref.span)], None, cost([lat], q.latency, ref.span), None, ref.span))
            stages.append(ref)
        out.append(A.Run(stages, None, cost([r.name for r in stages], s.work, s.span), None, s.span))
        out.append(A.Load(s.dest, cost([s.dest.name], s.tokens, s.span), s.span))
        out.append(A.Release(s.source, s.span))
        return out


def _fix_costs(e: A.Expr, q: Queue, source) -> A.Expr:
    """In an entry, `cost(kv, …)` names the queue's pool and `cost(P, …)` its stage (array names, no index)."""
    def walk(x):
        if isinstance(x, A.Call) and x.fn == "cost":
            args = []
            for a in x.args[:-1]:
                if isinstance(a, A.Ref) and a.is_bare:
                    if a.name in q.pools:
                        a = A.Ref(q.pools[a.name], [], a.span)
                    elif a.name == "nic" and "nic" in q.stages:
                        a = A.Ref(q.stages["nic"], [], a.span)
                    elif a.name == q.name:
                        a = A.Ref(q.name, [], a.span)
                    elif source is not None and a.name == source[0].name:
                        a = A.Ref(source[0].pools[source[0].leased], [], a.span)
                args.append(a)
            return A.Call("cost", args + [walk(x.args[-1])], x.span)
        if isinstance(x, A.Call):
            return A.Call(x.fn, [walk(a) for a in x.args], x.span)
        if isinstance(x, A.Unary):
            return A.Unary(x.op, walk(x.operand), x.span)
        if isinstance(x, A.Binary):
            return A.Binary(x.op, walk(x.lhs), walk(x.rhs), x.span)
        if isinstance(x, A.Cond):
            return A.Cond(walk(x.test), walk(x.then), walk(x.otherwise), x.span)
        return x
    return walk(e)


def map_stmt_exprs_shallow(s, fn):
    """s with fn applied to its own expressions (its blocks already lowered)."""
    from dataclasses import fields, replace
    changes = {}
    for f in fields(s):
        if f.name in ("body", "then", "otherwise", "span"):
            continue
        changes[f.name] = map_stmt_exprs(getattr(s, f.name), fn)
    return replace(s, **changes)


def _replace(s, attr, value):
    from dataclasses import replace
    return replace(s, **{attr: value})


def _definitely_set(body) -> frozenset:
    out: frozenset = frozenset()
    for s in body:
        if isinstance(s, A.Set) and s.target.is_bare:
            out = out | {s.target.name}
        elif isinstance(s, A.Branch):
            out = out | (_definitely_set(s.then) & _definitely_set(s.otherwise or []))
        elif isinstance(s, A.Hold):
            out = out | _definitely_set(s.body)
    return out




def _stmt_exprs(s) -> list[A.Expr]:
    out = []
    for name in ("value", "amount", "work", "test", "count", "units", "reserve", "reuse", "cache"):
        v = getattr(s, name, None)
        if v is not None and not isinstance(v, list):
            out.append(v)
    out.extend(getattr(s, "keys", None) or [])
    if isinstance(s, A.Hold):
        for p in s.pools:
            out.extend([p.units] + ([p.reserve] if p.reserve else []))
    return out
