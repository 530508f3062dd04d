"""Parse-time vocabulary -> kernel AST.

Devices, engines and pools on them become step stages and pools
(`serq.lower.engines`); an engine's request is written out where the server
calls it (`serq.lower.requests`); `transfer` and `tool` become runs
(`serq.lower.forms`); queues, their entries and the pull/push relations become
pools, stages and the statements of their entries (`serq.lower.queues`). The IR,
the interpreter and the Lean model see only the kernel.
"""

from __future__ import annotations

from typing import Callable

from serq.lower.common import err
from serq.lower.engines import Engine, lower_engine
from serq.lower.forms import StageFinder, lower_tool, lower_transfer
from serq.lower.requests import expand_request
from serq.syntax import ast as A

ConstValue = Callable[[A.Expr], "float | None"]


class Lowering:
    def __init__(self, items: list[A.Item], expand_defs: Callable[[A.Expr], A.Expr], const_value: ConstValue) -> None:
        self.items = items
        self.expand_defs = expand_defs
        self.const_value = const_value
        self.devices: dict[str, A.DeviceDecl] = {}
        self.engines: dict[str, Engine] = {}
        self.finder = StageFinder()
        self.queues = None  # serq.lower.queues.Queues, when the program declares queues or relations
        self.session_attributes: set[str] = set()  # what the workload sets: an entry does not read it
        self.server_attributes: set[str] = set()  # what the server and gateways set: nor that
        self.hidden: set[str] = set()

    # ------------------------------------------------------------------ the program
    def run(self) -> list[A.Item]:
        for item in self.items:
            if isinstance(item, A.DeviceDecl):
                if item.name in self.devices:
                    raise err(f"device `{item.name}` is declared twice", item.span)
                self.devices[item.name] = item
        for item in self.items:
            if isinstance(item, A.EngineDecl):
                self._engine(item)
            if isinstance(item, (A.ServerDecl, A.QueueDecl)):
                bodies = [item.body] if isinstance(item, A.ServerDecl) else \
                    [e.body for e in item.entries if "gateway" in item.roles]
                for body in bodies:
                    for st in A.walk_stmts(body):
                        if isinstance(st, A.Set) and st.target.is_bare:
                            self.server_attributes.add(st.target.name)
                        elif isinstance(st, A.Choose):
                            self.server_attributes.add(st.name)
            if isinstance(item, A.WorkloadDecl):
                self.hidden = {n for n, _ in item.hidden}
                for body in (*item.init, *item.turn, *item.session):
                    for st in A.walk_stmts(body):
                        if isinstance(st, A.Set) and st.target.is_bare:
                            self.session_attributes.add(st.target.name)
                        elif isinstance(st, (A.SizeDecl, A.CostDecl, A.Choose)):
                            self.session_attributes.add(st.name)
        if any(isinstance(i, (A.QueueDecl, A.RelationDecl)) for i in self.items):
            from serq.lower.queues import Queues
            self.queues = Queues(self)
        pooled: set[tuple[str, str]] = set()
        # declarations first, in order; then the workload's and server's statements, which call
        # entries and requests declared anywhere, and find a form's stage among those declared above
        lowered: list[list[A.Item] | None] = []
        for position, item in enumerate(self.items):
            self.position = position
            if isinstance(item, A.DeviceDecl):
                lowered.append([])
            elif isinstance(item, A.EngineDecl):
                step = lower_engine(self.engines[item.name], self.expand_defs, self.const_value)
                self.finder.declare(item.name, position)
                lowered.append([step])
            elif isinstance(item, A.PoolDecl) and item.owner is not None:
                lowered.append([self._pool_on(item, pooled)])
            elif isinstance(item, A.StageDecl):
                self.finder.declare(item.name, position)
                lowered.append([item])
            elif isinstance(item, A.QueueDecl):
                lowered.append(self.queues.lower_queue(item))
            elif isinstance(item, A.RelationDecl):
                lowered.append(self.queues.lower_relation(item))
            elif isinstance(item, (A.WorkloadDecl, A.ServerDecl)):
                lowered.append(None)
            else:
                lowered.append([item])
        tool_declared_at: A.Span | None = None
        workload_tool_span: A.Span | None = None
        for position, item in enumerate(self.items):
            self.finder.position = position
            if isinstance(item, A.WorkloadDecl):
                lowered[position] = [A.WorkloadDecl(
                    item.arrivals,
                    [self.stmts(b, "session") for b in item.init],
                    [self.stmts(b, "session") for b in item.turn],
                    [self.stmts(b, "session", workload=True) for b in item.session],
                    item.hidden, item.span)]
                if self.finder.implicit_tool:
                    workload_tool_span = item.span
                    later = self.finder.declared.get("tool")
                    if later is not None and later > position:
                        tool_declared_at = self.items[later].span
            elif isinstance(item, A.ServerDecl):
                lowered[position] = [A.ServerDecl(self.stmts(item.body, "server"), item.span)]
        out = [x for group in lowered for x in group]
        self._unpooled_capacities(pooled)
        if tool_declared_at is not None:
            raise err("`stage tool` is declared below the workload's `tool …;`, which found no stage above it: "
                      "declare it above the workload", tool_declared_at)
        if self.finder.implicit_tool:
            # the client's time between turns: a delay of the workload's own, after the declared stages
            last = max((i for i, x in enumerate(out) if isinstance(x, (A.StageDecl, A.StepStageDecl))), default=-1)
            span = workload_tool_span or A.NOWHERE
            out.insert(last + 1, A.StageDecl("tool", None, A.StageKind("delay", None, span), span))
        if self.queues is not None:
            out = self.queues.finish(out)
        return out

    # ------------------------------------------------------------------ engines and pools
    def _engine(self, e: A.EngineDecl) -> None:
        if e.name in self.engines:
            raise err(f"engine `{e.name}` is declared twice", e.span)
        device = self.devices.get(e.device)
        if device is None:
            raise err(f"engine `{e.name}` runs on `{e.device}`, which is no device declared in this program", e.span)
        ecount = self.const_value(e.count) if e.count is not None else 1
        dcount = self.const_value(device.count) if device.count is not None else 1
        if dcount not in (1, ecount):
            raise err(f"engine `{e.name}` has {ecount:g} member(s) on device `{device.name}` of {dcount:g}: "
                      "families are joined member for member, or every member shares a device of one", e.span)
        if e.request is not None and e.count is not None:
            raise err(f"engine family `{e.name}` has a request: an engine family has none", e.request.span)
        for cap in e.capacities:
            if cap.count is not None and e.count is not None and (ecount or 1) > 1:
                raise err(f"engine family `{e.name}` holds `{cap.name}[…]`: each member already admits its own "
                          f"`{cap.name} cap …`", cap.span)
        self.engines[e.name] = Engine(e.name, e, device, e.count)

    def _pool_on(self, p: A.PoolDecl, pooled: set[tuple[str, str]]) -> A.PoolDecl:
        owner, member = p.owner, p.owner_member
        if member is not None:
            engine = self.engines.get(owner)
            if engine is None:
                raise err(f"`pool {p.name} on {owner}.{member}`: `{owner}` is no engine", p.span)
            if engine.device.name != member:
                raise err(f"`pool {p.name} on {owner}.{member}`: engine `{owner}` runs on `{engine.device.name}`",
                          p.span)
            cap = self._device_capacity(engine.device, p)
            pooled.add((engine.device.name, p.name))
            return self._kernel_pool(p, engine.device.count, cap, admit_via=owner, memory_of=owner)
        if owner in self.devices:
            device = self.devices[owner]
            cap = self._device_capacity(device, p)
            pooled.add((owner, p.name))
            on_device = [e for e in self.engines.values() if e.device.name == owner]
            if len(on_device) > 1:
                raise err(f"`pool {p.name} on {owner}`: {len(on_device)} engines run on `{owner}`; name the one whose "
                          f"memory it is, `pool {p.name} on ENGINE.{owner}`", p.span)
            memory = on_device[0].name if on_device else None
            return self._kernel_pool(p, device.count, cap, admit_via=None, memory_of=memory)
        if owner in self.engines:
            engine = self.engines[owner]
            caps = [c for c in engine.decl.capacities if c.name == p.name]
            if not caps:
                raise err(f"`pool {p.name} on {owner}`: engine `{owner}` declares no `{p.name} cap …;`", p.span)
            pooled.add((owner, p.name))
            count = caps[0].count if caps[0].count is not None else engine.count
            engine.admitted_pools.append(p.name)
            return self._kernel_pool(p, count, caps[0].cap, admit_via=owner, memory_of=None)
        if self.queues is not None and self.queues.owns(owner):
            return self.queues.pool_on(p)
        raise err(f"`pool {p.name} on {owner}`: `{owner}` is no device or engine declared in this program", p.span)

    @staticmethod
    def _device_capacity(device: A.DeviceDecl, p: A.PoolDecl) -> A.Expr:
        caps = [r for r in device.resources if isinstance(r, A.CapacityResource) and r.name == p.name]
        if not caps:
            raise err(f"`pool {p.name} on {device.name}`: device `{device.name}` declares no `{p.name} cap …;`",
                      p.span)
        return caps[0].cap

    @staticmethod
    def _kernel_pool(p: A.PoolDecl, count, cap: A.Expr, admit_via, memory_of, name: str | None = None) -> A.PoolDecl:
        if any(o.kind == "cap" for o in p.options):
            raise err(f"`pool {p.name} on {p.owner}` takes its cap from its owner's `{p.name} cap …;`", p.span)
        options = [A.PoolOpt("cap", [cap], span=cap.span), *p.options]
        return A.PoolDecl(name or p.name, count, options, None, None, p.span, admit_via, memory_of)

    def _unpooled_capacities(self, pooled: set[tuple[str, str]]) -> None:
        for d in self.devices.values():
            for r in d.resources:
                if isinstance(r, A.CapacityResource) and (d.name, r.name) not in pooled:
                    raise err(f"device `{d.name}` declares `{r.name} cap …;`, which no `pool {r.name} on {d.name}` "
                              "declares", r.span)
        for e in self.engines.values():
            for c in e.decl.capacities:
                if (e.name, c.name) not in pooled:
                    raise err(f"engine `{e.name}` declares `{c.name} cap …;`, which no `pool {c.name} on {e.name}` "
                              "declares", c.span)

    # ------------------------------------------------------------------ statements
    def stmts(self, body: list[A.Stmt], side: str, workload: bool = False) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        for s in body:
            out.extend(self.stmt(s, side, workload))
        return out

    def stmt(self, s: A.Stmt, side: str, workload: bool = False) -> list[A.Stmt]:
        if isinstance(s, A.CallStmt) and s.name in self.engines:
            engine = self.engines[s.name]
            if engine.decl.request is None:
                raise err(f"engine `{s.name}` has no `request (…) {{ … }}` to call", s.span)
            if side != "server":
                raise err(f"`{s.name}(…)`: an engine's request is called by the server", s.span)
            return self.stmts(expand_request(engine, s), side)
        if isinstance(s, A.Tool):
            return [lower_tool(s, self.finder, workload)]
        if isinstance(s, A.Transfer):
            if self.queues is not None:
                return self.queues.transfer_outside_entry(s)
            return lower_transfer(s, self.finder)
        if isinstance(s, A.EntryCall):
            if side == "session":
                return [s]  # the linker refuses it with the side rule
            if self.queues is None:
                raise err(f"`{s.queue.name}.{s.verb}(…)`: `{s.queue.name}` is no queue declared in this program", s.span)
            return self.stmts(self.queues.call_entry(s), side)
        if isinstance(s, A.Mark):
            raise err("`mark` stands in a queue's entry or an engine's request", s.span)
        if isinstance(s, (A.RequestRun, A.RequestAdmission, A.RequestCache)):
            raise err("this stands only in an engine's request", s.span)
        for attr in ("body", "then", "otherwise"):
            inner = getattr(s, attr, None)
            if isinstance(inner, list):
                setattr(s, attr, self.stmts(inner, side, workload))
        return [s]




def lower(items: list[A.Item], expand_defs, const_value: ConstValue) -> list[A.Item]:
    """The kernel items of a program's main."""
    return Lowering(items, expand_defs, const_value).run()
