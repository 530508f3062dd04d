"""On generated and mutated source texts the front end either links or raises
the project's own error with a location, never another exception."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import REPO
from serq.errors import SerqError
from serq.link import link_file

SOURCES = [p.read_text() for p in sorted((REPO / "examples").rglob("*.sq")) if "fn main" in p.read_text()]
TOKENS = ["{", "}", "(", ")", ";", ",", "[", "]", ".", "=", "+", "-", "*", "/", "~", "!", "?", ":", "0", "1",
          "2.5", "inf", "x", "s", "kv", "svc", "hold", "run", "grow", "release", "load", "turn", "end", "fork",
          "join", "loop", "while", "branch", "with", "set", "observe", "Size", "Cost", "cost", "pool", "stage",
          "cap", "block", "evict", "lru", "preempt", "lifo", "by", "queue", "fifo", "ps", "delay", "reserve",
          "held", "workload", "server", "arrive", "poisson", "closed", "batch", "session", "init", "hidden",
          "gauge", "claim", "every", "iteration", "of", "at", "admission", "given", "max", "min", "sum", "in",
          "used", "cachedin", "now", "present", "tokens", "cached", "def", "let", "fn", "main", "use",
          '"std/args"', "args", "number", "choose", "drop", "lease", "reuse", "share", "maxmin", "~exp"]


def _front_end(text: str) -> None:
    try:
        link_file("fuzz.sq", None, None, text)
    except SerqError as e:
        # Every refusal of a source text says where (a usage error has no place in the text).
        assert e.kind == "usage" or (e.span is not None and e.span.line >= 1), repr(e)


@st.composite
def _mutated(draw):
    text = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(0, 12)))
        op = draw(st.sampled_from(["delete", "insert", "replace", "swap"]))
        piece = draw(st.sampled_from(TOKENS)) + draw(st.sampled_from([" ", "", "\n"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + piece + text[i:]
        elif op == "replace":
            text = text[:i] + piece + text[j:]
        else:
            k = draw(st.integers(0, len(text)))
            a, b = sorted((i, k))
            text = text[:a] + text[b:] + text[a:b]
    return text


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_sources_link_or_are_refused_with_a_location(text):
    _front_end(text)


@st.composite
def _generated(draw):
    """Programs assembled from token soup inside a well-formed frame."""
    body = " ".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=30)))
    frame = draw(st.sampled_from([
        "fn main() {{ stage svc : fifo; pool kv {{ cap 10; }} workload {{ arrive poisson(1); }} server {{ {} }} }}",
        "fn main() {{ {} }}",
        "{}",
        "fn main() {{ stage svc : fifo; workload {{ arrive closed(2); session {{ turn; {} }} }} server {{ }} }}",
    ]))
    return frame.format(body)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_generated())
def test_generated_sources_link_or_are_refused_with_a_location(text):
    _front_end(text)
