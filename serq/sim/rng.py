"""Random streams: which draw reads which stream, and how the streams are seeded.

The reference (*Workload*) separates the streams so that a (session, turn)
draws the same marks under every deployment run on one seed:

- a session's `init` block and each of its `turn` blocks read a stream of
  their own, keyed by (seed, session, turn) — `init` is turn 0, the k-th
  `turn;` is turn k;
- the session's statements (its session block and the server statements its
  turns run) read one stream keyed by (seed, session);
- a leg (`fork`) reads a stream keyed by (seed, session, leg number);
- the arrival law reads the run's arrival stream, an unordered trace its
  trace stream, and every draw the machine makes (an eviction key, a spill
  predicate, a ps capacity) the machine stream: each keyed by (seed, name).

Keys are derived with SplitMix64's finaliser (`mix64`), chained over the
integers that name the stream. The per-session
streams, of which a run
creates millions, are counter-based: uniform k of the stream with key K is
`mix64(K + k·γ)`, γ the golden-ratio increment — SplitMix64 itself started at
K, cheap to create (an integer) and to draw from in pure Python.

An `init` or `turn` block is straight-line code, so each draw written in it
reads a sub-stream of its own, by the draw's place j in the block. A session
has one base B = mix64(turn-tag key ^ session); its turn t (init is turn 0)
has the key K(t) = B + t·δ (mod 2^64), δ = 0xD1B54A32D192ED03 an odd Weyl
increment, and uniform i of draw j is `mix64(K(t) + (j·2^20 + i + 1)·γ)` (a
draw uses fewer than 2^20 uniforms). The key costs a multiply and the
generated code draws an exponential with one mix; streams of distinct (turn,
draw) meet only where (t1 − t2)·δ = (n2 − n1)·γ mod 2^64, as unlikely as any
two 64-bit keys colliding. The three long run-wide streams are Mersenne Twisters
(`random.Random`) seeded with their derived 64-bit key. A uniform is the top
53 bits over 2^53, in [0, 1).

Distinct seeds give unrelated keys for every stream, so runs on seeds 1..N are
independent replications. The mapping is part of the interpreter's
reproducibility contract: changing it changes every run's samples.
"""

from __future__ import annotations

import math
import random

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
TWO53 = 1.0 / 9007199254740992.0  # 2**-53

# stream tags (the first integer chained into a key)
TAG_TURN = 1
TAG_SESSION = 2
TAG_LEG = 3
TAG_ARRIVAL = 4
TAG_TRACE = 5
TAG_MACHINE = 6


def mix64(z: int) -> int:
    """SplitMix64's output function: a bijection of 64-bit integers with full avalanche."""
    z = (z + GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def derive(*parts: int) -> int:
    """A 64-bit key from a sequence of nonnegative integers (seed first)."""
    h = 0x5E9C0FFEE0DDF00D
    for p in parts:
        h = mix64(h ^ (p & M64))
        if p >> 64:  # very large integers: fold the rest in too
            h = mix64(h ^ derive(p >> 64))
    return h


class DrawError(Exception):
    """A distribution given parameters outside its domain."""


_log = math.log


class Draws:
    """The distributions of the catalogue, over `self.u()` uniforms in [0, 1)."""

    __slots__ = ()

    def u(self) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    def exp(self, mean: float) -> float:
        if not (mean >= 0.0) or mean == math.inf:
            raise DrawError(f"~exp({_fmt(mean)}): the mean is a nonnegative, finite number")
        return -mean * _log(1.0 - self.u())

    def det(self, value: float) -> float:
        return value

    def uniform(self, a: float, b: float) -> float:
        if not (a <= b) or not math.isfinite(a) or not math.isfinite(b):
            _bad_uniform(a, b)
        return a + (b - a) * self.u()

    def erlang(self, k: float, mean: float) -> float:
        if not (k >= 1 and k == int(k) and k <= 1_000_000):
            raise DrawError(f"~erlang({_fmt(k)}, {_fmt(mean)}): the phases are a whole number from 1")
        if not (mean >= 0.0) or mean == math.inf:
            raise DrawError(f"~erlang({_fmt(k)}, {_fmt(mean)}): the mean is a nonnegative, finite number")
        k = int(k)
        phase = mean / k
        s = 0.0
        for _ in range(k):
            s -= _log(1.0 - self.u())
        return phase * s

    def h2(self, mean: float, scv: float) -> float:
        """Two-phase hyperexponential with balanced means: p1/mu1 = p2/mu2 = mean/2."""
        if not (mean >= 0.0) or mean == math.inf:
            raise DrawError(f"~h2({_fmt(mean)}, {_fmt(scv)}): the mean is a nonnegative, finite number")
        if not (scv >= 1.0) or scv == math.inf:
            raise DrawError(f"~h2({_fmt(mean)}, {_fmt(scv)}): the squared coefficient of variation is at least 1")
        p1 = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
        if self.u() < p1:
            m = mean / (2.0 * p1)
        else:
            m = mean / (2.0 * (1.0 - p1))
        return -m * _log(1.0 - self.u())

    def bernoulli(self, p: float) -> float:
        if not (0.0 <= p <= 1.0):
            raise DrawError(f"~bernoulli({_fmt(p)}): the probability is between 0 and 1")
        return 1.0 if self.u() < p else 0.0

    def below(self, n: int) -> int:
        """A whole number uniform in 0 .. n-1."""
        return min(int(self.u() * n), n - 1)


class CounterStream(Draws):
    """SplitMix64 from a key: draw k is mix64(key + k·γ). Cheap to create."""

    __slots__ = ("key", "n")

    def __init__(self, key: int) -> None:
        self.key = key
        self.n = 0

    def u(self) -> float:
        self.n += 1
        z = (self.key + self.n * GAMMA + GAMMA) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return ((z ^ (z >> 31)) >> 11) * TWO53


class TwisterStream(Draws):
    """A long run-wide stream: a Mersenne Twister seeded with a derived key."""

    __slots__ = ("_r", "u")

    def __init__(self, key: int) -> None:
        self._r = random.Random(key)
        self.u = self._r.random

    def exp(self, mean: float) -> float:  # the hot path of every Poisson arrival
        if not (mean >= 0.0) or mean == math.inf:
            raise DrawError(f"~exp({_fmt(mean)}): the mean is a nonnegative, finite number")
        return -mean * _log(1.0 - self.u())


class Streams:
    """The streams of one run, by seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.arrival = TwisterStream(derive(seed, TAG_ARRIVAL))
        self.trace = TwisterStream(derive(seed, TAG_TRACE))
        self.machine = TwisterStream(derive(seed, TAG_MACHINE))
        self._turn_base = derive(seed, TAG_TURN)
        self._session_base = derive(seed, TAG_SESSION)
        self._leg_base = derive(seed, TAG_LEG)

    def turn(self, session: int, turn: int) -> CounterStream:
        """The stream of session `session`'s init block (turn 0) or its turn `turn`, as an object."""
        return CounterStream(self.turn_key(session, turn))

    @property
    def turn_tag_key(self) -> int:
        """The key session_turn_base mixes a session's serial into (the generated code inlines it)."""
        return self._turn_base

    def session_turn_base(self, session: int) -> int:
        """B: the base of session `session`'s init and turn streams (mix64(key ^ session), inline)."""
        if session <= M64:
            z = ((self._turn_base ^ session) + GAMMA) & M64
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            return z ^ (z >> 31)
        return mix64(self._turn_base ^ derive(session))

    def turn_key(self, session: int, turn: int) -> int:
        """K(t): the key of session `session`'s init block (turn 0) or its turn `turn`."""
        return block_key(self.session_turn_base(session), turn)

    def turn_key_function(self):
        return self.turn_key

    def session(self, session: int) -> CounterStream:
        return CounterStream(mix64(self._session_base ^ session))

    def leg(self, session: int, leg: int) -> CounterStream:
        return CounterStream(mix64(mix64(self._leg_base ^ session) ^ leg))


def _fmt(v: float) -> str:
    from serq.link.consts import format_number
    try:
        return format_number(v)
    except (ValueError, OverflowError):
        return repr(v)


# ---------------------------------------------------------------- draw sites
# Draw j of a straight-line block with key K: its uniforms are
# mix64(K + (j·2^32 + i + 1)·γ), i = 0, 1, …  (see the module's docstring).

TURN_STRIDE = 0xD1B54A32D192ED03  # δ: K(t) = B + t·δ, an odd Weyl increment other than γ
TURN_LIMIT = 1 << 62  # (no limit in practice: the generated code's fast path)


def block_key(base: int, turn: int) -> int:
    """K(t) = B + t·δ (mod 2^64)."""
    return (base + turn * TURN_STRIDE) & M64


def site_offset(j: int) -> int:
    """The offset of draw j's first uniform from its block's key: (j·2^20 + 1)·γ (mod 2^64)."""
    return (((j << 20) + 1) * GAMMA) & M64


class _Site(Draws):
    __slots__ = ("key", "n")

    def __init__(self, key: int, j: int) -> None:
        self.key = key + (j << 20) * GAMMA
        self.n = 0

    def u(self) -> float:
        self.n += 1
        z = (self.key + self.n * GAMMA) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return ((z ^ (z >> 31)) >> 11) * TWO53


def site_exp(key: int, j: int, mean: float) -> float:
    if not (mean >= 0.0) or mean == math.inf:
        raise DrawError(f"~exp({_fmt(mean)}): the mean is a nonnegative, finite number")
    z = (key + ((j << 20) + 1) * GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return -mean * _log(1.0 - ((z ^ (z >> 31)) >> 11) * TWO53)


def site_det(key: int, j: int, value: float) -> float:
    return value


def site_uniform(key: int, j: int, a: float, b: float) -> float:
    """`_Site(key, j).uniform(a, b)` written out as `site_exp` is (one uniform: no site object; a
    session draws its prompt and output sizes so)."""
    if not (a <= b) or not math.isfinite(a) or not math.isfinite(b):
        _bad_uniform(a, b)
    z = (key + ((j << 20) + 1) * GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return a + (b - a) * (((z ^ (z >> 31)) >> 11) * TWO53)


def _bad_uniform(a: float, b: float) -> None:
    raise DrawError(f"~uniform({_fmt(a)}, {_fmt(b)}): the bounds are finite with a <= b")


def site_erlang(key: int, j: int, k: float, mean: float) -> float:
    return _Site(key, j).erlang(k, mean)


def site_h2(key: int, j: int, mean: float, scv: float) -> float:
    return _Site(key, j).h2(mean, scv)


def site_bernoulli(key: int, j: int, p: float) -> float:
    return _Site(key, j).bernoulli(p)


SITE_DRAWS = {f"_sd_{d}": f for d, f in (("exp", site_exp), ("det", site_det), ("uniform", site_uniform),
                                           ("erlang", site_erlang), ("h2", site_h2), ("bernoulli", site_bernoulli))}


# ---------------------------------------------------------------- first turns, a block at a time
class FirstTurns:
    """The turn-stream numbers of consecutive sessions, computed for a block of them at once.

    Per session: its base B (`Streams.session_turn_base`) and, of its first turn (t = 1), the
    first uniform of each draw site j the generated code inlines (an `~exp` of a constant mean,
    as `site_exp`: SplitMix64's rounds of K(1) + site_offset(j), mix64's `+ γ` folded into the
    offset). One by one these cost
    two or more SplitMix64 rounds of Python integer arithmetic per session; numpy computes a
    block of `SIZE` sessions in a few vector operations. The numbers are the same: numpy's uint64
    arithmetic wraps modulo 2^64 as `& M64` does, and a 53-bit integer times 2^-53 is exact in
    both. Sessions start in the order of their serials (arrivals number them), so the block moves
    forward; the generated code computes one by one what the block does not hold (a session
    older than the block, any later turn, a serial near 2^64)."""

    SIZE = 1024

    def __init__(self, turn_tag_key: int) -> None:
        self.key = turn_tag_key
        self.offsets: list[int] = []  # site_offset(j) of each inlined site, in the order registered
        self.lo = 0  # the block's first serial
        self.n = 0  # how many sessions it holds (0: none yet)
        self.B: list[int] = []
        self.U: list[list[float]] = []

    def site(self, offset: int) -> int:
        """The index of the inlined site with this offset (registered at compile time)."""
        if offset not in self.offsets:
            self.offsets.append(offset)
        return self.offsets.index(offset)

    def fill(self, serial: int) -> int:
        """The block from `serial` on; `serial`'s index in it (0), or -1 for a session before the
        block (or past 2^64 - SIZE), which computes its numbers one by one."""
        if serial < self.lo + self.n or serial > M64 - self.SIZE:
            return -1
        import numpy as np
        u64 = np.uint64
        with np.errstate(over="ignore"):
            z = (np.arange(serial, serial + self.SIZE, dtype=u64) ^ u64(self.key)) + u64(GAMMA)
            B = _mix_rounds(z, np, u64)
            k1 = B + u64(TURN_STRIDE)  # K(1) = B + δ
            U = []
            for c in self.offsets:
                z = _mix_rounds(k1 + u64(c), np, u64)
                U.append(((z >> u64(11)).astype(np.float64) * TWO53).tolist())
        self.B = B.tolist()
        self.U = U
        self.lo = serial
        self.n = self.SIZE
        return 0


def _mix_rounds(z, np, u64):
    """mix64 after its `+ γ`, on an array of uint64."""
    z = (z ^ (z >> u64(30))) * u64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> u64(27))) * u64(0x94D049BB133111EB)
    return z ^ (z >> u64(31))
