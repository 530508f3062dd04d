"""`serq sweep`: a program over a grid of input values × independent replications.

    from serq.sweep import sweep
    rows = sweep("examples/single-turn/mm1.sq", {"rate": [0.5, 0.8]}, seeds=range(1, 11), arrivals=2000)
    # a pandas DataFrame when pandas is installed, else a list of dicts:
    # {"rate": "0.5", "metric": "response.mean", "n": 10, "mean": …, "ci95": …, "low": …, "high": …, "std": …}

Each (grid point, seed) is one task: the program linked once per grid point (its IR is sent to the
workers once: to each local worker process when it starts, to a Ray cluster by `ray.put`), run by
`serq.sim.simulate` on that seed, and its JSON report flattened to metrics (`METRICS`). The
reference's seeds 1..N are independent replications, so per grid point a metric's mean has a 95%
confidence interval by Student's t over the replications (`ci95` is the half-width,
t(0.975, n-1)·s/√n; none below two replications).

Tasks run in a local process pool (`jobs`, default the CPU count; 1 runs them in this process) or
on a Ray cluster (`ray="auto"`, an address, or "local" to start one here; an already initialised
Ray is used as it is). The results do not depend on where or in which order the tasks ran: rows
are sorted by grid point (the order the values were given) and seed, and numbers are written as
Python's shortest round-trip text, so the CSV of a local and of a Ray run are byte for byte equal.

Written by `Sweep.write(DIR)` (`serq sweep -o DIR`):

    DIR/sweep.csv      the summary: one row per grid point and metric (inputs…, metric, n, mean, ci95, low, high, std)
    DIR/runs.csv       one row per task and metric (inputs…, seed, metric, value)
    DIR/sweep.json     both, with the grid, the seeds, the settings, failed tasks and whether it was interrupted
    DIR/sweep.parquet, DIR/runs.parquet   the same tables, when pyarrow is installed
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from serq.errors import SerqError
from serq.ir import models as ir

__all__ = ["sweep", "run_sweep", "Sweep", "parse_values", "parse_seeds", "metrics_of", "summarize",
           "t975", "METRICS"]

CLIENT = ("ttft", "tpot", "response")
STATS = ("count", "mean", "p50", "p90", "p99")
METRICS = """client: ttft.STAT, tpot.STAT, response.STAT; observe.NAME.STAT; gauge.NAME.mean; claim.NAME
(STAT: count, mean, p50, p90, p99; a claim is 1 when it holds or is witnessed, 0 when it fails or is
not witnessed, empty when it was not evaluated, out of scope or an error)"""
SUMMARY_FIELDS = ("metric", "n", "mean", "ci95", "low", "high", "std")
RUN_FIELDS = ("seed", "metric", "value")

# t(0.975, df) for df = 1..30 (scipy.stats.t.ppf; tests/test_sweep.py checks them and the expansion)
_T975 = (12.706204736175, 4.302652729749, 3.182446305284, 2.776445105198, 2.570581835636,
         2.446911851145, 2.364624251593, 2.306004135204, 2.262157162798, 2.228138851986,
         2.200985160092, 2.178812829667, 2.160368656463, 2.144786687918, 2.13144954556,
         2.119905299221, 2.109815577833, 2.100922040241, 2.093024054408, 2.085963447266,
         2.079613844728, 2.073873067904, 2.068657610419, 2.063898561628, 2.059538552753,
         2.055529438643, 2.05183051648, 2.048407141795, 2.045229642133, 2.042272456301)
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (a table to 30, then the
    Cornish-Fisher expansion, within 1e-7 of the exact value there)."""
    if df < 1:
        raise ValueError("t975: df >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z, n = _Z975, float(df)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / n + g2 / n ** 2 + g3 / n ** 3 + g4 / n ** 4


def summarize(values) -> dict:
    """n (the defined values), mean, ci95 (the half-width of Student's t 95% interval), low, high, std."""
    xs = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    n = len(xs)
    out = {"n": n, "mean": None, "ci95": None, "low": None, "high": None, "std": None}
    if n == 0:
        return out
    mean = math.fsum(xs) / n
    out["mean"] = mean
    if n >= 2:
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
        half = t975(n - 1) * std / math.sqrt(n)
        out.update(std=std, ci95=half, low=mean - half, high=mean + half)
    return out


# ------------------------------------------------------------------ the command line's values
def parse_values(text: str) -> list[str]:
    """`0.5,1,2` -> ["0.5", "1", "2"]: commas inside parentheses belong to the value (`max(1, 2)`)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    if any(v == "" for v in out):
        raise SerqError(f"`{text}`: write values separated by commas, as in rate=0.5,1,2", None, "usage")
    return out


def parse_seeds(text: str) -> list[int]:
    """`1..20` (both ends included), `1,2,5`, `7`, or a mix (`1..5,10`): distinct nonnegative seeds, in order."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if ".." in part:
                a, b = part.split("..", 1)
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                seeds += range(lo, hi + 1)
            else:
                seeds.append(int(part))
        except ValueError:
            raise SerqError(f"--seeds {text}: write a range A..B (A <= B), seeds separated by commas, or both",
                            None, "usage") from None
    if any(s < 0 for s in seeds):
        raise SerqError(f"--seeds {text}: a seed is a nonnegative integer", None, "usage")
    if len(set(seeds)) != len(seeds):
        raise SerqError(f"--seeds {text}: a seed is given twice (replications on one seed are one run)",
                        None, "usage")
    return seeds


# ------------------------------------------------------------------ one task
def run_task(program: ir.Program, seed: int, base_dir: str | None):
    """One replication: the JSON report of `program` on `seed`, or ("error", message, span, kind).
    The same function runs in this process, in a local worker and as a Ray task."""
    from serq.sim import simulate
    try:
        result = simulate(program, seed=seed, base_dir=base_dir)
    except SerqError as e:
        return ("error", e.message, e.span, e.kind)
    except Exception as e:  # a bug of serq's own: this task's error, the sweep goes on
        return ("error", f"internal error: {type(e).__name__}: {e}", None, "internal")
    report = result.report
    if report.get("stopped") == "interrupted":
        return ("interrupted",)
    return report


_WORKER: dict = {}


def _worker_init(programs: list, base_dir: str | None) -> None:
    # Ctrl-C is the parent's: it keeps what finished and ends the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER["programs"] = programs
    _WORKER["base_dir"] = base_dir


def _worker_task(point: int, seed: int):
    return run_task(_WORKER["programs"][point], seed, _WORKER["base_dir"])


def _outcome(result: str) -> float | None:
    return {"holds": 1.0, "witnessed": 1.0, "fails": 0.0, "not witnessed": 0.0}.get(result)


def metrics_of(report: dict) -> dict[str, float | None]:
    """A run's report (docs/report.md) as flat metrics (`METRICS`), in the report's order."""
    m: dict[str, float | None] = {}
    for c in CLIENT:
        for st in STATS:
            m[f"{c}.{st}"] = report["client"][c][st]
    for name, s in report.get("observes", {}).items():
        for st in STATS:
            m[f"observe.{name}.{st}"] = s[st]
    for name, g in report.get("gauges", {}).items():
        m[f"gauge.{name}.mean"] = g["mean"]
    for c in report.get("claims", []):
        m[f"claim.{c['name']}"] = _outcome(c["result"])
    return m


# ------------------------------------------------------------------ the result
def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return str(v)


def _number(text: str):
    """An input's value as JSON writes it: the number when the text is one, else the text."""
    try:
        v = float(text)
    except ValueError:
        return text
    return int(v) if v.is_integer() and "." not in text and "e" not in text.lower() else v


@dataclass
class Sweep:
    """A finished (or interrupted) sweep: the grid, the seeds, and what each task measured."""

    program: str
    inputs: list[str]                     # every input --set names, in order
    points: list[dict[str, str]]          # the grid: input -> value as written
    seeds: list[int]
    settings: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)   # (point, seed) -> report
    errors: dict = field(default_factory=dict)    # (point, seed) -> SerqError
    metric_patterns: list[str] | None = None
    interrupted: bool = False
    seconds: float = 0.0

    @property
    def swept(self) -> list[str]:
        """The inputs given more than one value."""
        return [n for n in self.inputs if len({p[n] for p in self.points}) > 1]

    @property
    def total(self) -> int:
        return len(self.points) * len(self.seeds)

    def _metrics(self) -> dict[tuple[int, int], dict]:
        return {k: metrics_of(r) for k, r in self.reports.items()}

    def metrics(self) -> list[str]:
        """The metrics measured, in the report's order: a client metric family (ttft, tpot) no run
        had a sample of is left out; `metric_patterns` (fnmatch, `ttft.*`) keep the ones they match."""
        per = self._metrics()
        names: list[str] = []
        for k in sorted(per):
            for name in per[k]:
                if name not in names:
                    names.append(name)
        empty = {c for c in CLIENT if all(not m.get(f"{c}.count") for m in per.values())}
        names = [n for n in names if n.split(".", 1)[0] not in empty]  # `empty` holds client families only
        if self.metric_patterns:
            names = [n for n in names if any(fnmatchcase(n, p) for p in self.metric_patterns)]
        return names

    def run_rows(self) -> list[dict]:
        """One row per finished task and metric: inputs…, seed, metric, value; by grid point and seed."""
        per = self._metrics()
        names = self.metrics()
        rows = []
        for (pi, si) in sorted(per):
            m = per[(pi, si)]
            for name in names:
                rows.append({**self.points[pi], "seed": self.seeds[si], "metric": name, "value": m.get(name)})
        return rows

    def summary_rows(self) -> list[dict]:
        """One row per grid point and metric: inputs…, metric, n, mean, ci95, low, high, std."""
        per = self._metrics()
        names = self.metrics()
        rows = []
        for pi, point in enumerate(self.points):
            done = [per[(pi, si)] for si in range(len(self.seeds)) if (pi, si) in per]
            if not done:
                continue
            for name in names:
                rows.append({**point, "metric": name, **summarize([m.get(name) for m in done])})
        return rows

    def csv(self, rows: list[dict], fields: tuple[str, ...]) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([*self.inputs, *fields])
        for r in rows:
            w.writerow([_cell(r[k]) for k in (*self.inputs, *fields)])
        return buf.getvalue()

    def to_json(self) -> dict:
        def typed(rows):
            return [{k: (_number(v) if k in self.inputs else v) for k, v in r.items()} for r in rows]
        errors = [{**{k: _number(v) for k, v in self.points[pi].items()}, "seed": self.seeds[si],
                   "error": str(e)} for (pi, si), e in sorted(self.errors.items())]
        from serq import __version__
        return {
            "sweep_version": 1,
            "serq_version": __version__,
            "program": self.program,
            "inputs": {n: [_number(v) for v in dict.fromkeys(p[n] for p in self.points)] for n in self.inputs},
            "swept": self.swept,
            "seeds": self.seeds,
            "settings": self.settings,
            "metrics": self.metrics(),
            "tasks": {"total": self.total, "done": len(self.reports), "failed": len(self.errors)},
            "interrupted": self.interrupted,
            "errors": errors,
            "summary": typed(self.summary_rows()),
            "runs": typed(self.run_rows()),
        }

    def write(self, directory) -> list[Path]:
        """Write sweep.csv, runs.csv, sweep.json (and the Parquet tables with pyarrow); the paths."""
        d = Path(directory)
        try:
            d.mkdir(parents=True, exist_ok=True)
            out = [d / "sweep.csv", d / "runs.csv", d / "sweep.json"]
            summary, runs = self.summary_rows(), self.run_rows()
            out[0].write_text(self.csv(summary, SUMMARY_FIELDS), encoding="utf-8")
            out[1].write_text(self.csv(runs, RUN_FIELDS), encoding="utf-8")
            out[2].write_text(json.dumps(_json_safe(self.to_json()), indent=1, allow_nan=False) + "\n",
                              encoding="utf-8")
            if _has("pyarrow"):
                out += self._parquet(d, summary, runs)
        except OSError as e:
            raise SerqError(f"-o {d}: {e.strerror or e}", None, "usage") from None
        return out

    def _parquet(self, d: Path, summary: list[dict], runs: list[dict]) -> list[Path]:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise SerqError("Parquet tables need pyarrow: pip install 'serq[parquet]'", None, "usage") from None
        paths = []
        for name, rows, fields in (("sweep.parquet", summary, SUMMARY_FIELDS), ("runs.parquet", runs, RUN_FIELDS)):
            cols = {}
            for k in (*self.inputs, *fields):
                vals = [r[k] for r in rows]
                if k in self.inputs:
                    typed = [_number(v) for v in vals]
                    vals = ([float(v) for v in typed] if all(isinstance(v, (int, float)) for v in typed)
                            else [str(v) for v in vals])
                cols[k] = vals
            pq.write_table(pa.table(cols), d / name)
            paths.append(d / name)
        return paths

    def frame(self, runs: bool = False):
        """The summary (or the per-task rows) as a pandas DataFrame, inputs as numbers where they are."""
        try:
            import pandas as pd
        except ImportError:
            raise SerqError("a DataFrame needs pandas: pip install 'serq[pandas]'", None, "usage") from None
        rows = self.run_rows() if runs else self.summary_rows()
        df = pd.DataFrame(rows, columns=[*self.inputs, *(RUN_FIELDS if runs else SUMMARY_FIELDS)])
        for n in self.inputs:
            typed = [_number(v) for v in df[n]]
            if all(isinstance(v, (int, float)) for v in typed):
                df[n] = [float(v) for v in typed]
        return df


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


# ------------------------------------------------------------------ running it
class _Bar:
    """A rich progress bar over the tasks, on stderr."""

    def __init__(self, total: int, where: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn
        self.bar = Progress(TextColumn(f"sweep ({where})"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("tasks"), TimeElapsedColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=False)
        self.task = self.bar.add_task("", total=total)
        self.bar.start()

    def __call__(self, done: int, total: int) -> None:
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        self.bar.stop()


class _Lines:
    """Progress without a terminal: a line on stderr at each tenth of the tasks."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.t0 = time.monotonic()
        self.step = max(1, total // 10)

    def __call__(self, done: int, total: int) -> None:
        if done % self.step == 0 and done < total:  # the last is the command's own summary line
            print(f"serq sweep: {done}/{total} runs done ({time.monotonic() - self.t0:.1f} s)",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def _link_points(program, grid: dict[str, list], fixed: dict[str, str], instance, flags: dict):
    """The grid's points and each one's linked program (`program`: a path, or an IR without inputs)."""
    import itertools
    names = list(fixed) + [n for n in grid if n not in fixed]
    for n in grid:
        if n in fixed:
            raise SerqError(f"--set {n}: the input is given twice", None, "usage")
    values = [[str(v) for v in grid[n]] for n in grid]
    points = [{**fixed, **dict(zip(grid, combo))} for combo in itertools.product(*values)]
    if isinstance(program, ir.Program):
        if points != [{}] and (grid or fixed):
            raise SerqError("inputs apply to a .sq program: an IR's constants are already folded", None, "usage")
        settings = program.settings.model_copy(update={k: v for k, v in flags.items() if v is not None})
        return names, points, [program.model_copy(update={"settings": settings})], None
    path = Path(program)
    if not path.exists():
        raise SerqError(f"no such file: {program}", None, "usage")
    if path.suffix == ".json":
        from serq.ir.validate import load_ir
        names, points, programs, _ = _link_points(load_ir(str(path)), grid, fixed, instance, flags)
        return names, points, programs, str(path.parent)
    from serq.commandline import link_program
    programs = []
    for p in points:
        prog, _ = link_program(path, tuple(f"{k}={v}" for k, v in p.items()), instance, (), flags, needs_end=True)
        programs.append(prog)
    return names, points, programs, str(path.parent)


def run_sweep(program, grid: dict[str, list] | None = None, seeds=range(1, 11), *,
              fixed: dict[str, str] | None = None, instance: str | None = None,
              metrics: list[str] | None = None, jobs: int | None = None, ray: str | bool | None = None,
              horizon: float | None = None, warmup: float | None = None, arrivals: int | None = None,
              progress=None) -> Sweep:
    """Run the sweep and return it (`Sweep`): `program` a .sq (or IR .json) path, or a linked IR;
    `grid` input name -> values; `fixed` inputs given one value; `instance` an instance file
    (serq/instance.py); the run settings as for `serq run`. `ray`: None for the local process pool
    of `jobs` workers; "auto", an address, "local", or True (an initialised Ray, else "auto").
    `progress(done, total)` is called as tasks finish. Ctrl-C (KeyboardInterrupt) stops the sweep:
    the Sweep returned holds the tasks that finished, with `interrupted` set."""
    grid = dict(grid or {})
    for n, vals in grid.items():
        if not list(vals):
            raise SerqError(f"--set {n}: no values", None, "usage")
    seeds = list(seeds)
    if not seeds:
        raise SerqError("--seeds: no seeds", None, "usage")
    flags = {"seed": None, "horizon": horizon, "warmup": warmup, "arrivals": arrivals}
    names, points, programs, base_dir = _link_points(program, grid, dict(fixed or {}), instance, flags)
    name = program.source if isinstance(program, ir.Program) else Path(program).name
    settings = programs[0].settings.model_dump(mode="json", exclude_none=True)
    settings.pop("seed", None)
    result = Sweep(program=name or "", inputs=names, points=points, seeds=seeds, settings=settings,
                   metric_patterns=list(metrics) if metrics else None)
    tasks = [(pi, si) for pi in range(len(points)) for si in range(len(seeds))]
    done = 0

    def finished(key, value) -> None:
        nonlocal done
        if isinstance(value, tuple):
            if value[0] == "interrupted":
                raise KeyboardInterrupt
            _, message, span, kind = value
            pi, si = key
            where = ", ".join(f"{k}={v}" for k, v in points[pi].items())
            result.errors[key] = SerqError(f"{where + ', ' if where else ''}seed {seeds[si]}: {message}", span, kind)
        else:
            result.reports[key] = value
        done += 1
        if progress is not None:
            progress(done, len(tasks))

    t0 = time.monotonic()
    try:
        if ray is not None and ray is not False:
            _run_ray(tasks, programs, seeds, base_dir, ray, jobs, finished)
        else:
            _run_local(tasks, programs, seeds, base_dir, jobs, finished)
    except KeyboardInterrupt:
        result.interrupted = True
    result.seconds = time.monotonic() - t0
    if result.metric_patterns and result.reports:
        _check_patterns(result)
    return result


def _check_patterns(result: Sweep) -> None:
    patterns, result.metric_patterns = result.metric_patterns, None
    every = result.metrics()
    result.metric_patterns = patterns
    for p in patterns:
        if not any(fnmatchcase(n, p) for n in every):
            raise SerqError(f"--metric {p}: no such metric; the metrics are: {', '.join(every)}", None, "usage")


class _CtrlC:
    """Ctrl-C while worker pools run: the handler only notes it, and the loop that waits on the
    pool asks `pressed` between waits. A KeyboardInterrupt raised inside concurrent.futures'
    `wait` can leave a future's lock held, and the executor's own thread then hangs the exit."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous = None

    def __enter__(self) -> "_CtrlC":
        try:
            self._previous = signal.signal(signal.SIGINT, self._note)
        except ValueError:  # not the main thread: the signal is not ours to take
            self._previous = None
        return self

    def _note(self, signum, frame) -> None:
        self.pressed = True

    def restore(self) -> None:
        """From here a Ctrl-C is a KeyboardInterrupt again (a second one during the clean-up)."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def __exit__(self, *exc) -> None:
        self.restore()


_POLL_SECONDS = 0.1  # how soon a Ctrl-C is seen while every worker is busy


def _run_local(tasks, programs, seeds, base_dir, jobs, finished) -> None:
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    if jobs == 1:
        for pi, si in tasks:
            finished((pi, si), run_task(programs[pi], seeds[si], base_dir))
        return
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init, initargs=(programs, base_dir))
    with _CtrlC() as ctrl_c:
        try:
            running = {pool.submit(_worker_task, pi, seeds[si]): (pi, si) for pi, si in tasks}
            while running:
                if ctrl_c.pressed:
                    raise KeyboardInterrupt
                done, _ = wait(list(running), timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                for f in sorted(done, key=lambda f: running[f]):
                    finished(running.pop(f), f.result())
        except BaseException:
            # Ctrl-C (or a failure): drop what has not started and end the workers now
            ctrl_c.restore()
            procs = list((getattr(pool, "_processes", None) or {}).values())  # no public way before Python 3.14
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(timeout=5)
            raise
    pool.shutdown(wait=True)


def _run_ray(tasks, programs, seeds, base_dir, address, jobs, finished) -> None:
    try:
        import ray
    except ImportError:
        raise SerqError("serq sweep --ray needs Ray: pip install 'serq[ray]'", None, "usage") from None
    started = False
    if not ray.is_initialized():
        if address is True:
            address = "auto"
        kwargs = {"log_to_driver": False, "logging_level": "warning"}
        if address == "local":
            kwargs.update(num_cpus=jobs or os.cpu_count() or 1, include_dashboard=False)
            address = None
        try:
            ray.init(address=address, **kwargs)
        except ConnectionError as e:
            raise SerqError(f"--ray {address}: no Ray cluster there ({e}); start one with `ray start --head`, "
                            "or say --ray local to start one in this process", None, "usage") from None
        started = True
    try:
        task = ray.remote(num_cpus=1)(run_task)
        refs = [ray.put(p) for p in programs]  # the IR once per grid point
        pending = {task.remote(refs[pi], seeds[si], base_dir): (pi, si) for pi, si in tasks}
        with _CtrlC() as ctrl_c:
            try:
                while pending:
                    if ctrl_c.pressed:
                        raise KeyboardInterrupt
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_SECONDS)
                    for r in ready:
                        finished(pending.pop(r), ray.get(r))
            except BaseException:
                ctrl_c.restore()
                for r in pending:
                    ray.cancel(r, force=True)
                raise
    finally:
        if started:
            ray.shutdown()


def sweep(program, grid: dict[str, list] | None = None, seeds=range(1, 11), *, runs: bool = False,
          frame: bool | None = None, **options):
    """The sweep's summary rows (or, with `runs=True`, its per-task rows): a pandas DataFrame when
    pandas is installed (`frame=None`; `frame=False` for the list of dicts, `True` to require
    pandas), else a list of dicts. `options` are `run_sweep`'s."""
    result = run_sweep(program, grid, seeds, **options)
    if result.errors:
        raise next(iter(result.errors[k] for k in sorted(result.errors)))
    if frame is None:
        frame = _has("pandas")
    if frame:
        return result.frame(runs=runs)
    return result.run_rows() if runs else result.summary_rows()

