"""The reference interpreter: `simulate(program)` runs a linked kernel IR program.

    from serq.link import link_file
    from serq.sim import simulate
    result = simulate(link_file("examples/single-turn/mm1.sq"), horizon=1e4, seed=1)
    result.report["client"]["response"]["mean"]

Settings default to the program's (`Program.settings`); the keyword
arguments override them. Errors are `SerqError`s: kind "usage" for settings
that cannot run, kind "run" for a run-time error (naming the session and the
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
             keep_samples: bool = False, progress=None) -> Result:
    from serq.sim.compile import CompileError
    from serq.sim.engine import Engine, SimRunError
    from serq.sim.errors import Unsupported
    from serq.sim.report import make_report

    s = program.settings
    seed = s.seed if seed is None else seed
    horizon = _bound(s.horizon) if horizon is None else float(horizon)
    warmup = float(s.warmup) if warmup is None else float(warmup)
    arrivals = s.arrivals if arrivals is None else arrivals
    _check_settings(program, seed, horizon, warmup, arrivals)
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
        if engine.live:
            raise SerqError(f"--arrivals {arrivals}: {engine.live} of the sessions are still live at the horizon "
                            f"({_fmt(horizon)}): the run did not drain them", None, "run")
        if engine.end <= warmup and warmup > 0:
            raise SerqError(f"--arrivals {arrivals}: the run drained at {_fmt(engine.end)}, at or before the "
                            f"warm-up ({_fmt(warmup)}): nothing was measured", None, "run")
    return Result(engine, make_report(engine))


def _check_settings(program: ir.Program, seed, horizon, warmup, arrivals) -> None:
    def usage(msg: str) -> SerqError:
        return SerqError(msg, None, "usage")
    if not isinstance(seed, int) or seed < 0:
        raise usage(f"--seed {seed}: a seed is a nonnegative integer")
    if not (horizon > 0) or math.isnan(horizon):
        raise usage(f"--horizon {_fmt(horizon)}: the horizon is a positive time (or inf)")
    if not (0 <= warmup < math.inf):
        raise usage(f"--warmup {_fmt(warmup)}: the warm-up is a nonnegative, finite time")
    if warmup >= horizon:
        raise usage(f"--warmup {_fmt(warmup)} is not before the horizon {_fmt(horizon)}: nothing would be measured")
    kind = program.workload.arrival.kind
    open_ = kind in ("poisson", "renewal")
    if arrivals is not None:
        if not isinstance(arrivals, int) or arrivals < 1:
            raise usage(f"--arrivals {arrivals}: the arrivals are a positive integer")
        if not open_:
            raise usage(f"--arrivals counts open arrivals (poisson, renewal); this workload arrives by {kind}")
    elif horizon == math.inf:
        if open_:
            raise usage(f"an open workload ({kind}) with no horizon never ends: give --horizon T or --arrivals N")
        if kind == "closed":
            raise usage("a closed workload with no horizon never ends: give --horizon T")


def _fmt(v) -> str:
    from serq.sim.engine import _num
    return _num(v)
