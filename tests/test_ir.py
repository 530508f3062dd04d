"""The IR: hand-written IR is held to the linker's contract; JSON round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import REPO
from serq.errors import SerqError
from serq.ir import models as ir
from serq.ir.validate import load_ir, validate
from serq.link import link_file


def _mg1() -> dict:
    return json.loads(ir.to_json(link_file(REPO / "examples/single-turn/mg1.sq")))


def _refused(data: dict, phrase: str) -> None:
    with pytest.raises(SerqError) as info:
        validate(ir.Program.model_validate(data))
    assert phrase in info.value.message, info.value.message


def test_linked_ir_validates():
    validate(ir.Program.model_validate(_mg1()))


def test_hand_written_turn_in_server_is_refused():
    d = _mg1()
    d["server"].insert(0, {"kind": "turn"})
    _refused(d, "a turn stands in the session")


def test_hand_written_server_setting_a_size_is_refused():
    d = _mg1()
    d["server"].insert(0, {"kind": "set", "name": "s", "value": {"kind": "num", "value": 1}})
    _refused(d, "read-only to the server")


def test_hand_written_plain_number_work_is_refused():
    d = _mg1()
    d["server"][0]["work"] = {"kind": "attr", "name": "s"}
    _refused(d, "an amount here is a cost of svc")


def test_hand_written_cost_of_another_resource_is_refused():
    d = _mg1()
    d["stages"].append({"name": "other", "service": {"kind": "fifo"}})
    d["server"][0]["work"]["resources"] = ["other"]
    _refused(d, "an amount here is a cost of svc")


def test_hand_written_context_variable_at_wrong_moment_is_refused():
    d = _mg1()
    d["server"][0]["work"]["arg"] = {"kind": "ctx", "var": "tokens"}
    _refused(d, "`tokens` is not available at server")


@pytest.mark.parametrize("var", ["size", "waiting"])
def test_hand_written_entry_values_stand_in_an_eviction_key_only(var):
    d = _mg1()
    d["server"][0]["work"]["arg"] = {"kind": "ctx", "var": var}
    _refused(d, f"`{var}` is not available at server")
    d = _mg1()
    d["pools"] = [{"name": "kv", "cap": 10, "evict": {"kind": "by", "keys": [{"kind": "ctx", "var": var}]}}]
    validate(ir.Program.model_validate(d))
    d["pools"][0]["queue"] = {"kind": "by", "keys": [{"kind": "ctx", "var": var}]}
    _refused(d, f"`{var}` is not available at queue key")


def test_hand_written_register_declared_twice_is_refused():
    d = json.loads(ir.to_json(link_file(REPO / "examples/scheduling/decode_rounds.sq")))
    validate(ir.Program.model_validate(d))
    step = d["stages"][0]["service"]
    step["registers"].append({"name": "k", "init": 1})
    _refused(d, "register `k` is declared twice")


def test_hand_written_unknown_stage_is_refused():
    d = _mg1()
    d["server"][0]["stages"][0]["stage"] = "nowhere"
    _refused(d, "`nowhere` is not a stage")


def test_hand_written_unknown_kind_is_refused_by_the_schema(tmp_path):
    d = _mg1()
    d["server"][0]["kind"] = "teleport"
    path = tmp_path / "bad.ir.json"
    path.write_text(json.dumps(d))
    with pytest.raises(SerqError) as info:
        load_ir(str(path))
    assert "not a serQ IR program" in info.value.message


def test_non_finite_numbers_are_refused():
    with pytest.raises(ValueError):
        ir.Num(value=float("nan"))


def test_schema_names_every_statement_kind():
    schema = ir.json_schema()
    for kind in ("hold", "grow", "release", "load", "run", "branch", "while", "loop", "fork", "join",
                 "choose", "end", "turn", "set", "observe", "drop"):
        assert f'"{kind}"' in schema


# ------------------------------------------------------------------ round trip
_names = st.sampled_from(["a", "b", "prompt", "kv", "svc"])
_numbers = st.one_of(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


def _exprs():
    leaves = st.one_of(
        st.builds(ir.Num, value=_numbers),
        st.just(ir.Inf()),
        st.builds(ir.Attr, name=_names),
        st.builds(ir.Ctx, var=st.sampled_from(["now", "present", "tokens", "decoding"])),
        st.builds(ir.PoolObs, fn=st.sampled_from(["used", "free", "queued"]),
                  pool=st.builds(ir.PoolRef, pool=st.just("kv"))),
    )
    return st.recursive(leaves, lambda inner: st.one_of(
        st.builds(ir.Unary, op=st.sampled_from(["neg", "not"]), arg=inner),
        st.builds(ir.Binary, op=st.sampled_from(["add", "mul", "lt", "and"]), lhs=inner, rhs=inner),
        st.builds(ir.Cond, test=inner, then=inner, otherwise=inner),
        st.builds(ir.Call, fn=st.sampled_from(["min", "max", "floor"]), args=st.lists(inner, min_size=1, max_size=3)),
        st.builds(ir.Draw, dist=st.sampled_from(["exp", "bernoulli"]), args=st.lists(inner, min_size=1, max_size=1)),
        st.builds(ir.CostOf, resources=st.lists(_names, min_size=1, max_size=2, unique=True), arg=inner),
    ), max_leaves=8)


def _stmts():
    e = _exprs()
    leaves = st.one_of(
        st.builds(ir.SetStmt, name=_names, value=e),
        st.builds(ir.ObserveStmt, name=_names, value=e),
        st.builds(ir.RunStmt, stages=st.lists(st.builds(ir.StageRef, stage=_names), min_size=1, max_size=2),
                  work=e, mode=st.sampled_from([None, "prefill", "decode"])),
        st.builds(ir.GrowStmt, pool=st.builds(ir.PoolRef, pool=_names, index=st.none() | e), amount=e),
        st.just(ir.JoinStmt()), st.just(ir.EndStmt()), st.just(ir.TurnStmt()),
        st.builds(ir.ChooseStmt, name=_names, count=e, keys=st.lists(e, max_size=2)),
    )
    return st.recursive(leaves, lambda inner: st.one_of(
        st.builds(ir.BranchStmt, test=e, then=st.lists(inner, max_size=2), otherwise=st.lists(inner, max_size=2)),
        st.builds(ir.LoopStmt, body=st.lists(inner, max_size=2)),
        st.builds(ir.ForkStmt, body=st.lists(inner, max_size=2)),
        st.builds(ir.HoldStmt, pools=st.lists(st.builds(ir.HoldPool, pool=st.builds(ir.PoolRef, pool=_names),
                                                        units=e, reserve=st.none() | e), min_size=1, max_size=2),
                  body=st.lists(inner, max_size=2), cache=st.none() | e, reuse=st.none() | e),
    ), max_leaves=6)


_programs = st.builds(
    ir.Program,
    pools=st.lists(st.builds(ir.Pool, name=_names, count=st.integers(1, 4),
                             cap=st.one_of(st.just("inf"), st.integers(0, 1000)),
                             block=st.none() | st.integers(1, 32),
                             preempt=st.one_of(st.just(ir.PreemptNone()),
                                               st.builds(ir.PreemptBy, keys=st.lists(_exprs(), max_size=2),
                                                         requeue=st.sampled_from(["head", "tail"]))),
                             reserve_held=st.booleans()), max_size=2),
    stages=st.lists(st.builds(ir.Stage, name=_names, count=st.integers(1, 3), service=st.one_of(
        st.builds(ir.Fifo, servers=st.integers(1, 8)), st.builds(ir.Ps, capacity=_exprs()),
        st.builds(ir.Step, budget=_exprs(), cost=_exprs(), chunk=_exprs(),
                  iteration=st.none() | st.lists(st.builds(ir.IterAdmit, gate=st.none() | _exprs()), max_size=2)))),
        max_size=2),
    workload=st.builds(ir.Workload, arrival=st.one_of(
        st.builds(ir.Poisson, rate=st.floats(0.01, 100)), st.builds(ir.Closed, sessions=st.integers(1, 100)),
        st.builds(ir.Renewal, gap=_exprs()), st.just(ir.NoArrivals())),
        session=st.lists(_stmts(), max_size=3), hidden=st.lists(_names, max_size=2)),
    server=st.lists(_stmts(), max_size=4),
    gauges=st.lists(st.builds(ir.Gauge, name=_names, value=_exprs()), max_size=2),
    claims=st.lists(st.builds(ir.Claim, name=_names, form=st.sampled_from(["at_end", "every_iteration"]),
                              value=_exprs(), given=st.none() | _exprs()), max_size=2),
    settings=st.builds(ir.Settings, seed=st.integers(0, 2**31), horizon=st.one_of(st.just("inf"), st.integers(1, 10**6))),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_programs)
def test_ir_json_round_trip_is_the_identity(program):
    text = ir.to_json(program)
    assert ir.to_json(ir.from_json(text)) == text
