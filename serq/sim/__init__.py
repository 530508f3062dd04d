"""The reference interpreter: `simulate(program)` runs a linked kernel IR program.

    from serq.link import link_file
    from serq.sim import simulate
    result = simulate(link_file("examples/single-turn/mm1.sq"), horizon=1e4, seed=1)
    result.report["client"]["response"]["mean"]

Settings default to the program's (`Program.settings`, the IR's; a setting it
does not write has the default of `serq.ir.models.Settings`: seed 1, horizon
inf, warmup 0); the keyword arguments override them. Errors are `SerqError`s:
kind "usage" for settings that cannot run, kind "run" for a run-time error (naming the session and the
statement).
"""

from __future__ import annotations

import math
from pathlib import Path

from serq.errors import SerqError
from serq.ir import models as ir

__all__ = ["simulate", "Result"]


class Result:
    """A finished run: the engine (its state at the end) and the report."""

    def __init__(self, engine, report: dict) -> None:
        self.engine = engine
        self.report = report

    def json(self) -> str:
        from serq.sim.report import to_json
        return to_json(self.report)

    def dump(self, directory) -> None:
        from serq.sim.dump import dump
        dump(self, Path(directory))


def _bound(v) -> float:
    return math.inf if v == "inf" else float(v)


def simulate(program: ir.Program, *, seed: int | None = None, horizon: float | None = None,
             warmup: float | None = None, arrivals: int | None = None, base_dir=None,
             keep_samples: bool = False, progress=None, origins: dict | None = None) -> Result:
    """Run `program`. `origins` (setting name -> `serq.instance.Origin`) says where each setting
    came from, for the report's `settings_source` and the location of a refusal; by default a
    keyword given is `api`, a setting the program's IR writes `ir`, any other `default`."""
    from serq.instance import Origin, resolve_settings
    from serq.sim.compile import CompileError
    from serq.sim.engine import Engine, SimRunError
    from serq.sim.errors import Unsupported
    from serq.sim.report import make_report

    values, found = resolve_settings(None, None, program.settings, "ir")
    for name, v in (("seed", seed), ("horizon", horizon), ("warmup", warmup), ("arrivals", arrivals)):
        if v is not None:
            values[name] = v if name in ("seed", "arrivals") else float(v)
            found[name] = Origin("api")
    found.update(origins or {})
    seed, horizon, warmup, arrivals = values["seed"], values["horizon"], values["warmup"], values["arrivals"]
    _check_settings(program, seed, horizon, warmup, arrivals, found)
    try:
        engine = Engine(program, seed=seed, horizon=horizon, warmup=warmup, arrivals=arrivals,
                        base_dir=base_dir, keep_samples=keep_samples, progress=progress)
    except (CompileError, Unsupported) as e:
        span = None
        loc = getattr(e, "loc", None)
        if loc is not None:
            from serq.syntax.ast import Span
            span = Span(loc.file, loc.line, loc.col)
        raise SerqError(f"serq run: {getattr(e, 'message', str(e))}", span, "run") from None
    try:
        engine.run()
    except SimRunError as e:
        raise e.to_serq() from None
    if arrivals is not None and engine.stop_reason != "interrupted":
        from serq.instance import say
        origin = found.get("arrivals")
        span = origin.span if origin is not None else None
        # not drained: a session still live, or one of the N not yet arrived, when the horizon came
        late = [f"{engine.live} of the sessions are still live"] if engine.live else []
        if engine.n_arrived < arrivals:
            late.append(f"{arrivals - engine.n_arrived} of the {arrivals} have not arrived")
        if late:
            raise SerqError(say("arrivals", origin, f"{arrivals}: {' and '.join(late)} at the horizon "
                                                     f"({_fmt(horizon)}): the run did not drain them"), span, "run")
        if engine.end <= warmup and warmup > 0:
            raise SerqError(say("arrivals", origin, f"{arrivals}: the run drained at {_fmt(engine.end)}, at or "
                                                     f"before the warm-up ({_fmt(warmup)}): nothing was measured"),
                            span, "run")
    return Result(engine, make_report(engine, {name: o.label for name, o in found.items()}))


def _check_settings(program: ir.Program, seed, horizon, warmup, arrivals, origins: dict | None = None,
                    needs_end: bool = True) -> None:
    """Refuse settings that cannot run (kind "usage"), at the instance file's line when one wrote
    the setting. `needs_end=False` (`serq ir`) leaves out the run's need of an end."""
    from serq.instance import check_values, say
    origins = origins or {}
    check_values({"seed": seed, "horizon": horizon, "warmup": warmup, "arrivals": arrivals}, origins)

    def usage(msg: str, name: str | None = None) -> SerqError:
        o = origins.get(name) if name else None
        return SerqError(msg, o.span if o is not None else None, "usage")
    kind = program.workload.arrival.kind
    open_ = kind in ("poisson", "renewal")
    if arrivals is not None:
        if not open_:
            raise usage(say("arrivals", origins.get("arrivals"),
                            f"{arrivals}: the arrivals count open arrivals (poisson, renewal); this workload "
                            f"arrives by {kind}"), "arrivals")
    elif horizon == math.inf and needs_end:
        if open_:
            raise usage(f"an open workload ({kind}) with no horizon never ends: give --horizon T or --arrivals N",
                        "horizon")
        if kind == "closed":
            raise usage("a closed workload with no horizon never ends: give --horizon T", "horizon")


def _fmt(v) -> str:
    from serq.sim.errors import shown
    return shown(v)
