"""The serving forms `transfer` and `tool` -> runs (*The serving vocabulary*, *Which stage*)."""

from __future__ import annotations

from serq.lower.common import err
from serq.lower.requests import cost
from serq.syntax import ast as A


class StageFinder:
    """The stages declared above a point of the program, to find a form's stage by its role's name."""

    def __init__(self) -> None:
        self.declared: dict[str, int] = {}  # stage name -> the position of the item that declares it
        self.position = 0  # the position of the item whose statements are being lowered
        self.implicit_tool = False

    def declare(self, name: str, position: int) -> None:
        self.declared.setdefault(name, position)

    def role_stage(self, roles: tuple[str, ...], form: str, span: A.Span, workload: bool = False) -> str:
        found = [r for r in roles if r in self.declared and self.declared[r] < self.position]
        if len(found) == 1:
            return found[0]
        if not found and workload and roles == ("tool",):
            self.implicit_tool = True
            return "tool"
        if not found:
            names = " or ".join(f"`stage {r}`" for r in roles)
            raise err(f"`{form}` finds its stage by its role's name: no {names} is declared above it "
                      f"(name one with `{form} on STAGE …`)", span)
        raise err(f"`{form}`: several stages qualify ({', '.join(found)}); name one with `{form} on STAGE …`", span)


def lower_tool(s: A.Tool, finder: StageFinder, workload: bool) -> A.Run:
    if s.on:
        if len(s.on) != 1:
            raise err("`tool on S (Z);` names one stage", s.span)
        stage = s.on[0]
        return A.Run([stage], None, cost([stage.name], s.work, s.span), None, s.span)
    name = finder.role_stage(("tool",), "tool", s.span, workload=workload and s.index is None)
    ref = A.Ref(name, [A.IndexSel(s.index, s.span)] if s.index is not None else [], s.span)
    return A.Run([ref], None, cost([name], s.work, s.span), None, s.span)


def lower_transfer(s: A.Transfer, finder: StageFinder) -> list[A.Stmt]:
    """`transfer (X) from P to Q (n);` -> `run link (cost(link, X)); load Q (cost(Q, n)); release P;`"""
    if s.on:
        stages = s.on
    else:
        name = finder.role_stage(("link", "transfer"), "transfer", s.span)
        stages = [A.Ref(name, [A.IndexSel(s.index, s.span)] if s.index is not None else [], s.span)]
    run = A.Run(stages, None, cost([r.name for r in stages], s.work, s.span), None, s.span)
    load = A.Load(s.dest, cost([s.dest.name], s.tokens, s.span), s.span)
    return [run, load, A.Release(s.source, s.span)]
