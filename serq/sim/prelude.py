"""The generated program's prelude: the names its code reads besides the program's own (the
catalogue's functions, the draws of serq.sim.rng, the index check, IEEE division, the exception a
preempted hold catches). serq.sim.compile starts every generated module's globals from `HELPERS`."""

from __future__ import annotations

import math

from serq.link.consts import apply_function, ieee_div, ieee_mod, reusable
from serq.sim.errors import Preempted, RunError
from serq.sim.rng import SITE_DRAWS, block_key


def _fn_wrapper(name: str):
    def f(*args):
        return apply_function(name, [float(a) for a in args])
    f.__name__ = f"fn_{name}"
    return f


def _ix(arr, v, kind: str, name: str):
    """The member an index names: a whole number from 0 below the array's count."""
    try:
        i = int(v)
    except (ValueError, OverflowError, TypeError):
        i = -1
    if i != v or not 0 <= i < len(arr):
        from serq.link.consts import format_number
        shown = "NaN" if v != v else format_number(float(v))
        raise RunError(f"index {shown} is out of range: {kind} `{name}` has members 0 to {len(arr) - 1}")
    return arr[i]


HELPERS = {
    **SITE_DRAWS,
    "_log": math.log,
    "_floor": math.floor,  # (floor, ceil and reusable as the generated code writes them out: compile.py)
    "_ceil": math.ceil,
    "_isfinite": math.isfinite,
    "_reusable": reusable,
    "_block_key": block_key,
    "_ix": _ix,
    "_Preempted": Preempted,
    "_INF": math.inf,
    "_NAN": math.nan,
    "_div": ieee_div,
    "_mod": ieee_mod,
    "_RunError": RunError,
}
for _name in ("floor", "ceil", "abs", "sqrt", "exp", "log", "pow", "reusable"):
    HELPERS[f"_fn_{_name}"] = _fn_wrapper(_name)


# The functions a session calls at every turn and request, without the wrapper's argument list and
# dispatch by name: apply_function's cases, written out.
def _fn_floor(a):
    a = float(a)
    return float(math.floor(a)) if math.isfinite(a) else a


def _fn_ceil(a):
    a = float(a)
    return float(math.ceil(a)) if math.isfinite(a) else a


def _fn_reusable(n, bs):
    return reusable(float(n), float(bs))


# min and max of two as the builtins choose them (the first, unless the second is less, or greater:
# a NaN first stays, a NaN second is passed over), nested for more (the builtins' fold). In CPython
# 3.11 the builtins parse their keyword arguments at every call: ~150 ns, five times these.
def _min2(a, b):
    return b if b < a else a


def _max2(a, b):
    return b if b > a else a


HELPERS.update(_fn_floor=_fn_floor, _fn_ceil=_fn_ceil, _fn_reusable=_fn_reusable, _min2=_min2, _max2=_max2)
