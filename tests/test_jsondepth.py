"""serq.jsondepth: where a JSON text nests deepest, the place a refusal of a too-deep file names.
The expected answers are the single-scan implementation's, which built the path at every new
depth (quadratic: the 100 000-deep scenario file of tests/test_sim_engines.py took ~17 minutes)."""

from __future__ import annotations

import pytest

from serq.jsondepth import deepest, too_deep


@pytest.mark.parametrize("text, stop_at, expected", [
    ('{"a": [1, {"b": [[2]]}], "c": {"d": {}}}', None, (5, "a[1].b[0]", 1, 18)),
    ('[[[]], [[[1]]]]', None, (4, "[1][0][0]", 1, 10)),
    ('{"k": "x\\"[", "z": [[["q"]]]}', None, (4, "z[0][0]", 1, 22)),  # a bracket inside a string is text
    ('', None, (0, "", 1, 1)),
    ('{}', None, (1, "", 1, 1)),
    ('[1,\n [2,\n  {"u": [3]}]]', None, (4, "[1][1].u", 3, 9)),
    ('{"a": [1, {"b": [[2]]}], "c": {"d": {}}}', 2, (2, "a", 1, 7)),
    ('[1,\n [2,\n  {"u": [3]}]]', 2, (2, "[1]", 2, 2)),
])
def test_the_first_deepest_container_and_its_path(text, stop_at, expected):
    assert deepest(text, stop_at) == expected


def test_a_very_deep_text_is_named_by_its_two_ends():
    text = "[" * 100_000 + "]" * 100_000
    said = too_deep(text)
    assert said.startswith("nested 100000 deep at [0][0]") and "…" in said
    assert said.endswith("(line 1, column 100000)")
