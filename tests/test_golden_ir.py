"""Golden IR: each example's canonical JSON IR is pinned in tests/golden/.

After a deliberate change to the IR or an example, regenerate with
`UPDATE_GOLDEN=1 python3 -m pytest tests/test_golden_ir.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import REPO
from serq.ir import models as ir
from serq.link import link_file

GOLDEN = REPO / "tests" / "golden"
KERNEL_EXAMPLES = sorted(
    p for p in (REPO / "examples").rglob("*.sq")
    if "fn main" in p.read_text() and "papers" not in p.parts
)


def _golden_path(example: Path) -> Path:
    rel = example.relative_to(REPO / "examples").with_suffix(".ir.json")
    return GOLDEN / str(rel).replace("/", "__")


@pytest.mark.parametrize("example", KERNEL_EXAMPLES, ids=lambda p: str(p.relative_to(REPO / "examples")))
def test_golden_ir(example: Path):
    text = ir.to_json(link_file(example))
    golden = _golden_path(example)
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"no golden IR for {example}; run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"{example}'s IR differs from {golden.name}"


def test_at_least_ten_golden_programs():
    assert len(KERNEL_EXAMPLES) >= 10


def test_ir_is_byte_identical_twice():
    for example in KERNEL_EXAMPLES:
        assert ir.to_json(link_file(example)) == ir.to_json(link_file(example))
