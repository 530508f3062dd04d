"""The grammar: comments, contextual keywords, spans, error locations."""

from __future__ import annotations

import pytest

from serq.errors import SerqError
from serq.syntax import ast as A
from serq.syntax.parser import parse


def main_items(text: str):
    return parse(f"fn main() {{ {text} }}", "t.sq").items[0].items


def test_comments_line_and_block():
    items = main_items("// a line\n let a = 1; /* a\n block */ let b = 2;")
    assert [i.name for i in items] == ["a", "b"]


def test_keywords_are_names_where_no_keyword_stands():
    # batch, tokens, decode, block and cache are keywords somewhere, attributes here
    items = main_items("workload { arrive poisson(1); turn { set batch = 1; set tokens2 = 2; set decode = 3; } }")
    turn = items[0].turn[0]
    assert [s.target.name for s in turn] == ["batch", "tokens2", "decode"]


def test_precedence_and_unary_minus():
    e = main_items("let x = a - -b * 2 % 3 - 1e3;")[0].value
    assert isinstance(e, A.Binary) and e.op == "-"
    assert isinstance(e.lhs, A.Binary) and e.lhs.op == "-"
    assert e.lhs.rhs.op == "%" and e.lhs.rhs.lhs.op == "*"
    assert isinstance(e.lhs.rhs.lhs.lhs, A.Unary)
    assert e.rhs.value == 1000.0


def test_ternary_and_logic():
    e = main_items("let x = a > 1 && b || !c ? 1 : 2;")[0].value
    assert isinstance(e, A.Cond)
    assert e.test.op == "||" and e.test.lhs.op == "&&"


def test_aggregate_and_max_call_parse_apart():
    items = main_items("gauge g = max j in 4 (used(kv[j])); gauge h = max(1, 2);")
    assert isinstance(items[0].value, A.Aggregate) and items[0].value.var == "j"
    assert isinstance(items[1].value, A.Call) and items[1].value.fn == "max"


def test_spans_point_at_the_construct():
    items = main_items("\n  stage svc : fifo;")
    assert (items[0].span.line, items[0].span.col) == (2, 3)


def test_paths_with_members_and_indices():
    [s] = parse("fn main() { server { run D.nic.latency[j] (x0); } }", "t.sq").items[0].items[0].body
    r = s.stages[0]
    assert r.name == "D" and [type(x).__name__ for x in r.selectors] == ["FieldSel", "FieldSel", "IndexSel"]


def test_queue_entry_call_and_def_call_statements():
    body = parse("fn main() { server { D[j].decode (p) from P[i]; helper(1); } }", "t.sq").items[0].items[0].body
    assert isinstance(body[0], A.EntryCall) and body[0].verb == "decode" and body[0].source.name == "P"
    assert isinstance(body[1], A.CallStmt) and body[1].name == "helper"


@pytest.mark.parametrize("text,where,phrase", [
    ("fn main() { let x = ; }", "1:21", "unexpected ';'"),
    ("fn main() { pool p { cap 3 } }", "1:28", "expected ';'"),
    ("fn main() { let x = 1 @ 2; }", "1:23", "unexpected character '@'"),
    ("fn main() {", "1:12", "unexpected end of the file"),
    ("fn main() { let x = 1e999; }", "1:21", "too large"),
])
def test_parse_errors_have_locations(text, where, phrase):
    with pytest.raises(SerqError) as info:
        parse(text, "t.sq")
    e = info.value
    assert f"{e.span.line}:{e.span.col}" == where, str(e)
    assert phrase in e.message
