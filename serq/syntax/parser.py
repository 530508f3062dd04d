"""Text -> surface AST (serq.syntax.ast), every node with its span."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import lark
from lark import Token, Transformer, Tree, v_args

from serq.errors import SerqError
from serq.syntax import ast as A

GRAMMAR = Path(__file__).with_name("grammar.lark")

# How deep each rule nests (serq/limits.py, docs/language.md *Limits*): an expression's operators,
# calls, draws, aggregates, indices and leaves are a level each; a block statement is a level.
_EXPR_LEVEL = {"number": 1, "inf": 1, "path": 1, "sel_index": 1, "call": 1, "aggregate": 1,
               "agg_count_name": 1, "draw": 1, "sign": 1, "not_": 1, "cond": 1, "or_": 1, "and_": 1,
               "compare": 1, "arith": 1}
_BLOCK_LEVEL = frozenset({"st_branch", "st_branch_with", "st_while", "st_loop", "st_fork", "hold", "s_branch"})


class TooDeep(Exception):
    """Raised while the parser builds its tree: a node nests past a limit (at line, col)."""

    def __init__(self, kind: str, line: int, col: int) -> None:
        super().__init__(kind)
        self.kind, self.line, self.col = kind, line, col

    def error(self, path: str, kind: str = "parse") -> SerqError:
        from serq import limits as L
        if self.kind == "expr":
            what, limit = f"an expression nests at most {L.EXPR_DEPTH} deep", L.EXPR_DEPTH
            hint = " (an operator, a call, an index is a level; a chain a + b + … is one per operator)"
        else:
            what, limit = f"blocks nest at most {L.BLOCK_DEPTH} deep", L.BLOCK_DEPTH
            hint = " (a branch, while, loop, fork or hold body is a level)"
        line, col = (self.line, self.col) if self.line > 0 else (1, 1)  # a node with nothing positioned in it
        e = L.nesting_error(what, limit, A.Span(path, line, col), hint)
        e.kind = kind
        return e


class DepthTree(Tree):
    """The parser's tree node, which counts its nesting as the LALR parser reduces it (bottom-up,
    no recursion) and stops the parse at the first node past a limit, before anything walks the
    tree recursively (the transformer below, the expander, the linker)."""

    def __init__(self, data, children, meta=None) -> None:
        super().__init__(data, children, meta)
        e = b = 0
        for c in children:
            d = getattr(c, "depth", None)
            if d is not None:
                if d[0] > e:
                    e = d[0]
                if d[1] > b:
                    b = d[1]
        name = data.rsplit("__", 1)[-1] if "__" in data else data  # instance.lark imports grammar__*
        inc = _EXPR_LEVEL.get(name, 0)
        if inc:
            e += inc
            if e > _limits().EXPR_DEPTH:
                raise TooDeep("expr", *_first_position(children))
        if name in _BLOCK_LEVEL:
            b += 1
            if b > _limits().BLOCK_DEPTH:
                raise TooDeep("block", *_first_position(children))
        self.depth = (e, b)


@functools.cache
def _limits():
    from serq import limits
    return limits


def _first_position(children) -> tuple[int, int]:
    for c in children:
        if isinstance(c, Token) and c.line is not None:
            return c.line, c.column
        meta = getattr(c, "_meta", None)
        if meta is not None and not getattr(meta, "empty", True):
            return meta.line, meta.column
    return 0, 0


@functools.cache
def _parser() -> lark.Lark:
    from serq.syntax.larkcache import lalr_parser  # the tables kept in the user's cache, keyed on the grammar
    return lalr_parser(
        GRAMMAR,
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        tree_class=DepthTree,
    )


# How the parser's terminal names read in "expected ..." messages.
_TERMINAL_TEXT = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "SEMICOLON": "';'",
    "LPAR": "'('", "RPAR": "')'", "LBRACE": "'{'", "RBRACE": "'}'", "LSQB": "'['",
    "RSQB": "']'", "COMMA": "','", "COLON": "':'", "DOT": "'.'", "EQUAL": "'='",
    "CMP_OP": "a comparison", "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/' or '%'",
    "QMARK": "'?'", "TILDE": "'~'", "BANG": "'!'", "MINUS": "'-'", "$END": "the end of the file",
}


def _expected(names: set[str], parser: lark.Lark) -> str:
    shown = []
    for name in sorted(names):
        if name in _TERMINAL_TEXT:
            shown.append(_TERMINAL_TEXT[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            shown.append(name)
            continue
        shown.append(f"'{pattern.value}'" if pattern.type == "str" else name.lower())
    shown = sorted(set(shown))
    if len(shown) > 8:
        return ", ".join(shown[:8]) + ", …"
    return ", ".join(shown)


def parse(text: str, path: str = "<input>") -> A.Module:
    """Parse one source file. Raises SerqError (kind "parse") with the location."""
    parser = _parser()
    try:
        tree = parser.parse(text)
    except lark.exceptions.UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            found = "end of the file"
            line, col = _end_position(text)
        else:
            found = f"'{tok}'"
            line, col = tok.line, tok.column
        raise SerqError(
            f"unexpected {found}; expected {_expected(set(e.expected), parser)}",
            A.Span(path, line, col, line, col + max(1, len(str(tok)))),
            "parse",
        ) from None
    except lark.exceptions.UnexpectedCharacters as e:
        raise SerqError(
            f"unexpected character {text[e.pos_in_stream]!r}",
            A.Span(path, e.line, e.column, e.line, e.column + 1),
            "parse",
        ) from None
    except lark.exceptions.UnexpectedEOF as e:  # pragma: no cover - LALR reports UnexpectedToken
        line, col = _end_position(text)
        raise SerqError("unexpected end of the file", A.Span(path, line, col), "parse") from None
    except TooDeep as e:
        raise e.error(path) from None
    try:
        return _ToAst(path).transform(tree)
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, SerqError):
            raise e.orig_exc from None
        raise


def parse_file(path: str | Path) -> A.Module:
    from serq.errors import read_source
    return parse(read_source(path), str(path))


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _is_expr(x: object) -> bool:
    return isinstance(x, (A.Num, A.Inf, A.Ref, A.Call, A.Aggregate, A.Draw, A.Unary, A.Binary, A.Cond))


@v_args(meta=True)
class _ToAst(Transformer):
    """lark tree -> dataclasses. Small methods, one per grammar rule."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._file = path

    # -- spans
    def _span(self, meta) -> A.Span:
        if getattr(meta, "empty", True):
            return A.Span(self._file, 0, 0)
        return A.Span(self._file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tspan(self, tok: Token) -> A.Span:
        return A.Span(self._file, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column)

    # -- program
    def start(self, meta, items):
        return A.Module(self._file, list(items))

    def constant(self, meta, c):
        return A.Constant(str(c[0]), c[1], self._span(meta))

    def import_(self, meta, c):
        return A.Import(str(c[0])[1:-1], self._span(meta))

    def names(self, meta, c):
        return [str(t) for t in c]

    def definition(self, meta, c):
        name, params, body = c
        kind, value = body
        return A.Definition(
            str(name), params or [],
            value if kind == "expr" else None,
            value if kind == "block" else None,
            self._span(meta),
        )

    def def_expr_body(self, meta, c):
        return ("expr", c[0])

    def def_block_body(self, meta, c):
        return ("block", c[0])

    def main_fn(self, meta, c):
        return A.MainFn(str(c[0]), list(c[1:]), self._span(meta))

    def input_decl(self, meta, c):
        return A.Input(str(c[0]), str(c[1])[1:-1], c[2], self._span(meta))

    def count(self, meta, c):
        return c[0]

    # -- pools and stages
    def pool_decl(self, meta, c):
        return A.PoolDecl(str(c[0]), c[1], list(c[2:]), span=self._span(meta))

    def pool_on_decl(self, meta, c):
        return A.PoolDecl(str(c[0]), None, list(c[3:]), str(c[1]), str(c[2]) if c[2] else None, self._span(meta))

    def _opt(kind):  # noqa: N805 - a factory for the one-line option rules
        def rule(self, meta, c):
            return A.PoolOpt(kind, [x for x in c if _is_expr(x)], span=self._span(meta))
        return rule

    opt_cap = _opt("cap")
    opt_block = _opt("block")
    opt_evict_lru = _opt("evict_lru")
    opt_preempt_none = _opt("preempt_none")
    opt_preempt_lifo = _opt("preempt_lifo")
    opt_queue_fifo = _opt("queue_fifo")
    opt_reserve_held = _opt("reserve_held")
    del _opt

    def opt_evict_by(self, meta, c):
        return A.PoolOpt("evict_by", c[0], span=self._span(meta))

    def opt_queue_by(self, meta, c):
        return A.PoolOpt("queue_by", c[0], span=self._span(meta))

    def opt_preempt_by(self, meta, c):
        return A.PoolOpt("preempt_by", c[0], requeue=c[1], span=self._span(meta))

    def opt_spill(self, meta, c):
        return A.PoolOpt("spill", spill=(c[0], c[1], c[2], c[3]), span=self._span(meta))

    def requeue(self, meta, c):
        return c[0]

    def requeue_end(self, meta, c):
        return str(c[0])

    def kind_fifo(self, meta, c):
        return A.StageKind("fifo", c[0], self._span(meta))

    def kind_ps(self, meta, c):
        return A.StageKind("ps", c[0], self._span(meta))

    def kind_delay(self, meta, c):
        return A.StageKind("delay", None, self._span(meta))

    def stage_decl(self, meta, c):
        return A.StageDecl(str(c[0]), c[1], c[2], self._span(meta))

    # -- devices and engines
    def device_decl(self, meta, c):
        return A.DeviceDecl(str(c[0]), c[1], list(c[2:]), self._span(meta))

    def time_resource(self, meta, c):
        return A.TimeResource(str(c[0]), c[1] or [], c[2], self._span(meta))

    def capacity_resource(self, meta, c):
        return A.CapacityResource(str(c[0]), c[1], self._span(meta))

    def _engine(self, meta, name: str, count, device: str, items) -> A.EngineDecl:
        eng = A.EngineDecl(name, count, device, [], None, None, [], None, None, None, self._span(meta))
        for kind, value, span in items:
            single = {"tokens": "tokens", "granule": "granule", "schedule": "schedule",
                      "execute": "execute", "request": "request"}
            if kind == "capacity":
                eng.capacities.append(value)
            elif kind == "state":
                eng.states.append((value[0], value[1], span))
            else:
                attr = single[kind]
                if getattr(eng, attr) is not None:
                    raise SerqError(f"engine {name} declares `{kind}` twice", span, "parse")
                setattr(eng, attr, value)
        return eng

    def engine_decl(self, meta, c):
        return self._engine(meta, str(c[0]), c[1], str(c[2]), c[3:])

    def engine_capacity(self, meta, c):
        sp = self._span(meta)
        return ("capacity", A.EngineCapacity(str(c[0]), c[1], c[2], sp), sp)

    def engine_tokens(self, meta, c):
        return ("tokens", c[0], self._span(meta))

    def engine_granule(self, meta, c):
        return ("granule", c[0], self._span(meta))

    def engine_state(self, meta, c):
        return ("state", (str(c[0]), c[1]), self._span(meta))

    def engine_schedule(self, meta, c):
        lets = [x for x in c if isinstance(x, A.Constant)]
        body = [x for x in c if not isinstance(x, A.Constant)]
        sp = self._span(meta)
        return ("schedule", A.Schedule(lets, body, sp), sp)

    def engine_execute(self, meta, c):
        return ("execute", c[0], self._span(meta))

    def engine_request(self, meta, c):
        sp = self._span(meta)
        return ("request", A.Request(c[0] or [], list(c[1:]), sp), sp)

    def schedule_let(self, meta, c):
        return A.Constant(str(c[0]), c[1], self._span(meta))

    def s_advance(self, meta, c):
        return A.SAdvance(c[0], c[1], c[2], self._span(meta))

    def s_admit(self, meta, c):
        return A.SAdmit(c[0], c[1], c[2], c[3], self._span(meta))

    def s_exclusive(self, meta, c):
        return A.SExclusive(c[0], self._span(meta))

    def s_branch(self, meta, c):
        return A.SBranch(c[0], list(c[1:-1]), c[-1], self._span(meta))

    def s_else(self, meta, c):
        return list(c)

    def s_set(self, meta, c):
        return A.SSet(str(c[0]), c[1], self._span(meta))

    def s_while(self, meta, c):
        return c[0]

    def only(self, meta, c):
        return c[0]

    def each_at_most(self, meta, c):
        return c[0]

    def order_admission(self, meta, c):
        return ("admission", [])

    def order_by(self, meta, c):
        return ("by", c[0])

    def order_decode_first(self, meta, c):
        return ("decode_first", [])

    def taking(self, meta, c):
        return A.Taking([x for x in c[:-1]], c[-1], self._span(meta))

    def taking_pool(self, meta, c):
        return A.TakingPool(c[0], c[1], c[2], self._span(meta))

    def request_admission(self, meta, c):
        return A.RequestAdmission(list(c), self._span(meta))

    def binding_stmt(self, meta, c):
        return A.Binding(str(c[0]), c[1], self._span(meta))

    def request_cache(self, meta, c):
        return A.RequestCache(c[0], self._span(meta))

    def request_prefill(self, meta, c):
        return A.RequestRun("prefill", c[0], c[1], self._span(meta))

    def request_decode(self, meta, c):
        return A.RequestRun("decode", c[0], c[1], self._span(meta))

    # -- workload and server
    def workload(self, meta, c):
        w = A.WorkloadDecl([], [], [], [], [], self._span(meta))
        for kind, value in c:
            if kind == "arrive":
                w.arrivals.append(value)
            elif kind == "hidden":
                w.hidden.extend(value)
            else:
                getattr(w, kind).append(value)
        return w

    def wl_arrive(self, meta, c):
        c[0].span = self._span(meta)
        return ("arrive", c[0])

    def wl_trace(self, meta, c):
        return ("arrive", A.Arrival("trace", None, str(c[0])[1:-1], c[1] is not None, self._span(meta)))

    def ordered(self, meta, c):
        return True

    def wl_init(self, meta, c):
        return ("init", c[0])

    def wl_turn(self, meta, c):
        return ("turn", c[0])

    def wl_session(self, meta, c):
        return ("session", c[0])

    def wl_hidden(self, meta, c):
        return ("hidden", [(n, self._span(meta)) for n in c[0]])

    def arrive_poisson(self, meta, c):
        return A.Arrival("poisson", c[0])

    def arrive_renewal(self, meta, c):
        return A.Arrival("renewal", c[0])

    def arrive_closed(self, meta, c):
        return A.Arrival("closed", c[0])

    def arrive_batch(self, meta, c):
        return A.Arrival("batch", c[0])

    def arrive_none(self, meta, c):
        return A.Arrival("none", None)

    def server(self, meta, c):
        return A.ServerDecl(c[0], self._span(meta))

    # -- queues, relations, gauges, claims
    def queue_decl(self, meta, c):
        q = A.QueueDecl(str(c[0]), c[1], c[2] or [], [], [], None, None, None, [], [], self._span(meta))
        for kind, value in c[3:]:
            q.order.append(kind)
            if kind == "pool":
                q.pools.append(value)
            elif kind == "device":
                q.devices.append(value)
            elif kind == "entry":
                q.entries.append(value)
            else:
                if getattr(q, kind) is not None:
                    raise SerqError(f"queue {q.name} declares `{kind}` twice", value.span, "parse")
                setattr(q, kind, value)
        return q

    def q_pool(self, meta, c):
        return ("pool", A.PoolDecl(str(c[0]), None, list(c[1:]), span=self._span(meta)))

    def q_pool_on(self, meta, c):
        return ("pool", A.PoolDecl(str(c[0]), None, list(c[3:]), str(c[1]), str(c[2]) if c[2] else None, self._span(meta)))

    def q_device(self, meta, c):
        return ("device", A.DeviceDecl(str(c[0]), None, list(c[1:]), self._span(meta)))

    def q_engine(self, meta, c):
        return ("engine", self._engine(meta, "", None, str(c[0]), c[1:]))

    def q_serve(self, meta, c):
        return ("serve", A.QueueServe(c[0], c[1], self._span(meta)))

    def q_nic(self, meta, c):
        c[0].span = self._span(meta)
        return ("nic", c[0])

    def entry_verb(self, meta, c):
        return str(c[0])

    def q_entry(self, meta, c):
        return ("entry", A.QueueEntry(str(c[0]), c[1], str(c[2]) if c[2] else None, c[3], self._span(meta)))

    def share_decl(self, meta, c):
        return A.ShareDecl(c[0], self._span(meta))

    def share_policy(self, meta, c):
        return str(c[0])

    def relation(self, meta, c):
        return A.RelationDecl(str(c[0]), c[1], str(c[2]), c[3], c[4], self._span(meta))

    def relation_kind(self, meta, c):
        return str(c[0])

    def gauge(self, meta, c):
        return A.GaugeDecl(str(c[0]), c[1], self._span(meta))

    def claim(self, meta, c):
        form, stage, value = c[2]
        return A.ClaimDecl(str(c[0]), c[1], form, stage, value, self._span(meta))

    def given(self, meta, c):
        return c[0]

    def claim_every(self, meta, c):
        return ("every", c[0], c[1])

    def claim_some(self, meta, c):
        return ("some", c[0], c[1])

    def claim_at_end(self, meta, c):
        return ("at_end", None, c[0])

    # -- statements
    def block(self, meta, c):
        return list(c)

    def st_old_request(self, meta, c):
        # an earlier form of the language: refused with what the reference writes in its place
        raise SerqError("`request;` is not a statement of the language: a server calls its engine's request "
                        "in its place, `ENGINE (args);` (the engine declares `request (NAME, …) { … }`), "
                        "or holds the pools and runs the stage itself, `hold POOL (…) { run STAGE … }`",
                        self._span(meta), "parse")

    def st_turn(self, meta, c):
        return A.Turn(self._span(meta))

    def st_size(self, meta, c):
        return A.SizeDecl(str(c[0]), c[1], self._span(meta))

    def st_cost(self, meta, c):
        return A.CostDecl(str(c[0]), c[1], self._span(meta))

    def st_cost_fields(self, meta, c):
        return A.CostFieldsDecl(str(c[0]), list(c[1:]), self._span(meta))

    def cost_field(self, meta, c):
        return (str(c[0]), c[1], self._span(meta))

    def st_set(self, meta, c):
        return A.Set(c[0], c[1], self._span(meta))

    def st_observe(self, meta, c):
        return A.Observe(str(c[0]), c[1], self._span(meta))

    def hold(self, meta, c):
        pools = [x for x in c if isinstance(x, A.HoldPool)]
        rest = {k: v for k, v in (x for x in c if isinstance(x, tuple))}
        body = next(x for x in c if isinstance(x, list))
        return A.Hold(pools, rest.get("reuse"), rest.get("bindings", []), body,
                      rest.get("cache"), rest.get("lease"), self._span(meta))

    def hold_pool(self, meta, c):
        return A.HoldPool(c[0], c[1], c[2], self._span(meta))

    def hold_reuse(self, meta, c):
        return ("reuse", c[0])

    def hold_bindings(self, meta, c):
        return ("bindings", list(c))

    def binding(self, meta, c):
        return A.Binding(str(c[0]), c[1], self._span(meta))

    def hold_cache(self, meta, c):
        return ("cache", c[0])

    def hold_lease(self, meta, c):
        return ("lease", (c[0], c[1]))

    def st_grow(self, meta, c):
        return A.Grow(c[0], c[1], self._span(meta))

    def st_drop(self, meta, c):
        return A.Drop(c[0], self._span(meta))

    def st_release(self, meta, c):
        return A.Release(c[0], self._span(meta))

    def st_load(self, meta, c):
        return A.Load(c[0], c[1], self._span(meta))

    def st_run(self, meta, c):
        *stages, mode, work, growing = c
        return A.Run(list(stages), mode, work, growing, self._span(meta))

    def run_mode(self, meta, c):
        return str(c[0])

    def st_run_own(self, meta, c):
        return A.Run([], None, c[0], None, self._span(meta))

    def st_branch(self, meta, c):
        return A.Branch(c[0], c[1], c[2], False, self._span(meta))

    def st_branch_with(self, meta, c):
        return A.Branch(c[0], c[1], c[2], True, self._span(meta))

    def st_while(self, meta, c):
        return A.While(c[0], c[1], self._span(meta))

    def st_loop(self, meta, c):
        return A.Loop(c[0], self._span(meta))

    def st_fork(self, meta, c):
        return A.Fork(c[0], self._span(meta))

    def st_join(self, meta, c):
        return A.Join(self._span(meta))

    def st_choose(self, meta, c):
        return A.Choose(str(c[0]), c[1], c[2], self._span(meta))

    def st_end(self, meta, c):
        return A.End(self._span(meta))

    def st_mark(self, meta, c):
        return A.Mark(str(c[0]), self._span(meta))

    def st_call(self, meta, c):
        target, args, source, to = c
        span = self._span(meta)
        if target.is_bare:
            if source is not None or to is not None:
                raise SerqError(f"`{target.name}(…)` is not a queue's entry: it takes no `from` or `to`", span, "parse")
            return A.CallStmt(target.name, args or [], span)
        verb = target.selectors[-1]
        if not isinstance(verb, A.FieldSel):
            raise SerqError("a call names a def, an engine, or a queue's entry `Q.verb(…)`", span, "parse")
        queue = A.Ref(target.name, target.selectors[:-1], target.span)
        return A.EntryCall(queue, verb.name, args or [], source, to, span)

    def call_from(self, meta, c):
        return c[0]

    def call_to(self, meta, c):
        return (c[0], c[1])

    def st_transfer(self, meta, c):
        where, work, source, dest, tokens = c
        index, on = self._where(where)
        return A.Transfer(index, on, work, source, dest, tokens, self._span(meta))

    def st_tool(self, meta, c):
        where, work = c
        index, on = self._where(where)
        return A.Tool(index, on, work, self._span(meta))

    @staticmethod
    def _where(where):
        if where is None:
            return None, []
        kind, value = where
        return (value, []) if kind == "index" else (None, value)

    def where_index(self, meta, c):
        return ("index", c[0])

    def where_on(self, meta, c):
        return ("on", list(c))

    # -- references and expressions
    def path(self, meta, c):
        return A.Ref(str(c[0]), list(c[1:]), self._span(meta))

    def sel_field(self, meta, c):
        return A.FieldSel(str(c[0]), self._span(meta))

    def sel_index(self, meta, c):
        return A.IndexSel(c[0], self._span(meta))

    def exprs(self, meta, c):
        return list(c)

    def number(self, meta, c):
        written = str(c[0])
        value = float(written)
        shown = written if len(written) <= 40 else f"{written[:20]}…{written[-8:]} ({len(written)} characters)"
        if math.isinf(value):
            raise SerqError(f"the number {shown} is too large; write `inf` for no bound", self._tspan(c[0]), "parse")
        if value == 0.0 and any(ch in "123456789" for ch in written.lower().split("e")[0]):
            raise SerqError(f"the number {shown} is too small: it is not 0, and no double is nearer to it than 0",
                            self._tspan(c[0]), "parse")
        return A.Num(value, self._span(meta))

    def inf(self, meta, c):
        return A.Inf(self._span(meta))

    def ref(self, meta, c):
        return c[0]

    def agg_fn(self, meta, c):
        return str(c[0])

    def call(self, meta, c):
        return A.Call(str(c[0]), c[1] or [], self._span(meta))

    def aggregate(self, meta, c):
        return A.Aggregate(c[0], str(c[1]), c[2], c[3], self._span(meta))

    def agg_count_name(self, meta, c):
        return A.Ref(str(c[0]), [], self._span(meta))

    def draw(self, meta, c):
        return A.Draw(str(c[0]), c[1] or [], self._span(meta))

    def sign(self, meta, c):
        # one terminal for binary and unary +/-, so that no parser state has two tokens for "-"
        if str(c[0]) == "+":
            return c[1]
        return A.Unary("-", c[1], self._span(meta))

    def not_(self, meta, c):
        return A.Unary("!", c[0], self._span(meta))

    def cond(self, meta, c):
        return A.Cond(c[0], c[1], c[2], self._span(meta))

    def or_(self, meta, c):
        return A.Binary("||", c[0], c[1], self._span(meta))

    def and_(self, meta, c):
        return A.Binary("&&", c[0], c[1], self._span(meta))

    def compare(self, meta, c):
        return A.Binary(str(c[1]), c[0], c[2], self._span(meta))

    def arith(self, meta, c):
        return A.Binary(str(c[1]), c[0], c[2], self._span(meta))
