"""A small static check of payload reads against `membench/schemas/payloads.py` (docs/design.md §3, "Typed payloads").

Processors read an event's payload as a dict, for speed; a misspelt key would silently read a
default. This check walks a module's source and finds every read of a payload whose record it can
tell, and reports:

- a key that is not a field of that record (of every record, when the kind is one of several);
- `.get(key)` of a field the schema requires (always present: index it) and `[key]` of a field with
  a default (an in-process payload may omit it: `.get(key, default)`);
- `.get(key, d)` whose `d` is not the schema's default (`.get(key)` is accepted for a null default);
- a key that is not a string literal, another method called on a payload, and a read of an event's
  payload whose kind it cannot tell (so a read cannot escape the check by being unclear).

How it knows the record of an expression:
- `p = event.payload` (or `kind, p = event.kind, event.payload`) binds a payload of unknown kind,
  narrowed inside `if`/`elif`/`and`/conditional expressions by `kind == "Turn"`, `event.kind ==
  "Turn"`, `kind in ("Turn", "ModelCall")` and `or` of such tests;
- an annotation naming a payload type imported from `membench.schemas.payloads` (`X` or `X | None`): a
  parameter, a local (`p: RunEnded = event.payload`) or a dataclass field read as `self.name`;
- a record-typed field of a known record (`plan["cases"]` is `list[EvaluatorPlanCase]`), and the
  target of a `for` or a comprehension over such a list.
"""

from __future__ import annotations

import ast
import typing
from dataclasses import dataclass, field
from types import NoneType, UnionType

from membench.schemas import payloads

PAYLOAD_MODULE = "membench.schemas.payloads"
_MISSING = object()


def _records() -> dict[str, type]:
    return {name: value for name, value in vars(payloads).items()
            if isinstance(value, type) and typing.is_typeddict(value) and value.__module__ == payloads.__name__}


RECORDS = _records()


@dataclass(frozen=True)
class Rec:
    """One of these records (several after `kind in (...)` or `or`)."""
    names: frozenset[str]


@dataclass(frozen=True)
class ListOf:
    item: Rec


@dataclass(frozen=True)
class DictOf:
    """A dict whose values are records (its keys are data, not fields)."""
    item: Rec


UNNARROWED = "unnarrowed payload"  # bound from `<event>.payload`, kind not known here


def _field_type(record: str, key: str) -> Rec | ListOf | None:
    hint = typing.get_type_hints(RECORDS[record]).get(key)

    def rec(tp) -> Rec | None:
        if isinstance(tp, type) and tp.__name__ in RECORDS and typing.is_typeddict(tp):
            return Rec(frozenset({tp.__name__}))
        if isinstance(tp, UnionType) or typing.get_origin(tp) is typing.Union:
            inner = [a for a in typing.get_args(tp) if a is not NoneType]
            return rec(inner[0]) if len(inner) == 1 else None
        return None

    if typing.get_origin(hint) is list:
        item = rec(typing.get_args(hint)[0])
        return ListOf(item) if item else None
    return rec(hint)


@dataclass
class Report:
    path: str
    reads: int = 0  # payload reads checked
    problems: list[str] = field(default_factory=list)

    def problem(self, node: ast.AST, message: str) -> None:
        self.problems.append(f"{self.path}:{node.lineno}: {message}")


class _Checker:
    def __init__(self, tree: ast.Module, report: Report):
        self.report, self.tree = report, tree
        self.module_aliases: set[str] = set()  # local names of the payloads module
        self.imported: dict[str, str] = {}  # local name -> record name, of the payload types imported
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == PAYLOAD_MODULE:
                for alias in node.names:
                    if alias.name not in RECORDS:
                        report.problem(node, f"membench.schemas.payloads has no record {alias.name}")
                    self.imported[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module == "schemas":
                self.module_aliases |= {a.asname or a.name for a in node.names if a.name == "payloads"}
            elif isinstance(node, ast.Import):
                self.module_aliases |= {a.asname for a in node.names if a.name == PAYLOAD_MODULE and a.asname}

    # -- annotations ---------------------------------------------------------------------------
    def annotation(self, node: ast.expr | None) -> Rec | DictOf | None:
        """`X`, `X | None` or `Optional[X]` where X is a payload type, or `dict[K, X]`; else None."""
        if node is None:
            return None
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "dict"
                and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2):
            item = self.annotation(node.slice.elts[1])
            return DictOf(item) if isinstance(item, Rec) else None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return self.annotation(ast.parse(node.value, mode="eval").body)
        if isinstance(node, ast.Name) and node.id in self.imported:
            return Rec(frozenset({self.imported[node.id]})) if self.imported[node.id] in RECORDS else None
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in self.module_aliases):
            if node.attr not in RECORDS:
                self.report.problem(node, f"membench.schemas.payloads has no record {node.attr}")
                return None
            return Rec(frozenset({node.attr}))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
            return self.annotation(sides[0]) if len(sides) == 1 else None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Optional":
            return self.annotation(node.slice)
        return None

    # -- the walk --------------------------------------------------------------------------------
    def run(self) -> None:
        self.body(self.tree.body, {}, {}, {})

    def body(self, stmts: list[ast.stmt], env: dict, narrow: dict, fields: dict) -> None:
        for stmt in stmts:
            self.stmt(stmt, env, narrow, fields)

    def stmt(self, node: ast.stmt, env: dict, narrow: dict, fields: dict) -> None:
        if isinstance(node, ast.ClassDef):
            own = {s.target.id: t for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                   for t in [self.annotation(s.annotation)] if t}
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign):
                    if stmt.value is not None:
                        self.expr(stmt.value, env, narrow, fields)
                else:
                    self.stmt(stmt, env, narrow, own)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner: dict = {}
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and (t := self.annotation(arg.annotation)):
                    inner[arg.arg] = t
            for default in [*args.defaults, *args.kw_defaults]:
                if default is not None:
                    self.expr(default, env, narrow, fields)
            self.body(node.body, inner, {}, fields)
        elif isinstance(node, ast.Assign):
            self.expr(node.value, env, narrow, fields)
            for target in node.targets:
                self.target(target, env, narrow, fields)
                self.bind(target, node.value, env, narrow, fields)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.expr(node.value, env, narrow, fields)
            if isinstance(node.target, ast.Name):
                t = self.annotation(node.annotation)
                if t:
                    env[node.target.id] = t
                elif node.value is not None:
                    self.bind(node.target, node.value, env, narrow, fields)
            else:
                self.expr(node.target, env, narrow, fields)
        elif isinstance(node, ast.If):
            self.expr(node.test, env, narrow, fields)
            self.body(node.body, env, self.narrowed(node.test, env, narrow), fields)
            self.body(node.orelse, env, narrow, fields)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, env, narrow, fields)
            self.bind_iter(node.target, node.iter, env, narrow, fields)
            self.body(node.body, env, narrow, fields)
            self.body(node.orelse, env, narrow, fields)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    self.stmt(child, env, narrow, fields)
                elif isinstance(child, ast.expr):
                    self.expr(child, env, narrow, fields)
                else:  # handlers, with-items, match cases
                    for sub in ast.iter_child_nodes(child):
                        if isinstance(sub, ast.stmt):
                            self.stmt(sub, env, narrow, fields)
                        elif isinstance(sub, ast.expr):
                            self.expr(sub, env, narrow, fields)

    def target(self, node: ast.expr, env: dict, narrow: dict, fields: dict) -> None:
        """The reads inside an assignment's target (`d[p["key"]] = ...`)."""
        if isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.target(elt, env, narrow, fields)
        elif isinstance(node, ast.Subscript):
            self.expr(node.value, env, narrow, fields)
            self.expr(node.slice, env, narrow, fields)
        elif isinstance(node, ast.Attribute):
            self.expr(node.value, env, narrow, fields)
        elif isinstance(node, ast.Starred):
            self.target(node.value, env, narrow, fields)

    def bind(self, target: ast.expr, value: ast.expr, env: dict, narrow: dict, fields: dict) -> None:
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                self.bind(t, v, env, narrow, fields)
        elif isinstance(target, ast.Name):
            if isinstance(value, ast.Attribute) and value.attr == "payload":
                env[target.id] = UNNARROWED
            elif isinstance(value, ast.Attribute) and value.attr == "kind":
                env[target.id] = "kind"
            elif t := self.type_of(value, env, narrow, fields):
                env[target.id] = t
            else:
                env.pop(target.id, None)

    def bind_iter(self, target: ast.expr, iterable: ast.expr, env: dict, narrow: dict, fields: dict) -> None:
        t = self.type_of(iterable, env, narrow, fields)
        if isinstance(target, ast.Name):
            if isinstance(t, ListOf):
                env[target.id] = t.item
            else:
                env.pop(target.id, None)

    # -- narrowing -------------------------------------------------------------------------------
    def kinds(self, test: ast.expr, env: dict) -> frozenset[str] | None:
        """The kinds a true `test` leaves possible, when it is a test of an event's kind."""
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            is_kind = ((isinstance(left, ast.Name) and env.get(left.id) == "kind")
                       or (isinstance(left, ast.Attribute) and left.attr == "kind"))
            if not is_kind:
                return None
            if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
                return frozenset({right.value})
            if (isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set))
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts)):
                return frozenset(e.value for e in right.elts)
            return None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            parts = [self.kinds(v, env) for v in test.values]
            return frozenset().union(*parts) if all(p is not None for p in parts) else None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            parts = [p for p in (self.kinds(v, env) for v in test.values) if p is not None]
            return frozenset.intersection(*parts) if parts else None
        return None

    def narrowed(self, test: ast.expr, env: dict, narrow: dict) -> dict:
        kinds = self.kinds(test, env)
        if kinds is None:
            return narrow
        for kind in kinds:
            if kind not in RECORDS:
                self.report.problem(test, f"no event kind {kind!r} in membench.schemas.payloads")
        return {**narrow, **{name: Rec(kinds) for name, t in env.items() if t == UNNARROWED}}

    # -- expressions -----------------------------------------------------------------------------
    def type_of(self, node: ast.expr, env: dict, narrow: dict, fields: dict):
        if isinstance(node, ast.Name):
            if node.id in narrow:
                return narrow[node.id]
            t = env.get(node.id)
            return t if isinstance(t, (Rec, ListOf, DictOf)) or t == UNNARROWED else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return fields.get(node.attr)
        if (isinstance(node, ast.ListComp) and len(node.generators) == 1 and isinstance(node.elt, ast.Name)
                and isinstance(node.generators[0].target, ast.Name) and node.elt.id == node.generators[0].target.id):
            t = self.type_of(node.generators[0].iter, env, narrow, fields)  # [c for c in cases if ...]
            return t if isinstance(t, ListOf) else None
        key = self.read_key(node)
        if key is not None:
            base = self.type_of(key[0], env, narrow, fields)
            if isinstance(base, DictOf):
                return base.item
            if isinstance(base, Rec) and len(base.names) == 1 and isinstance(key[1], str):
                (record,) = base.names
                if key[1] in RECORDS[record].__annotations__:
                    return _field_type(record, key[1])
        return None

    @staticmethod
    def read_key(node: ast.expr) -> tuple[ast.expr, object, ast.expr | None, str] | None:
        """(container, key, default node, form) of `x[key]` / `x.get(key[, default])`, else None."""
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else _MISSING
            return node.value, key, None, "index"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and 1 <= len(node.args) <= 2 and not node.keywords):
            key = node.args[0].value if isinstance(node.args[0], ast.Constant) else _MISSING
            return node.func.value, key, node.args[1] if len(node.args) == 2 else None, "get"
        return None

    def expr(self, node: ast.expr, env: dict, narrow: dict, fields: dict) -> None:
        if isinstance(node, ast.BoolOp):
            current = narrow
            for value in node.values:
                self.expr(value, env, current, fields)
                if isinstance(node.op, ast.And):
                    current = self.narrowed(value, env, current)
            return
        if isinstance(node, ast.IfExp):
            self.expr(node.test, env, narrow, fields)
            self.expr(node.body, env, self.narrowed(node.test, env, narrow), fields)
            self.expr(node.orelse, env, narrow, fields)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = dict(env)
            for gen in node.generators:
                self.expr(gen.iter, inner, narrow, fields)
                self.bind_iter(gen.target, gen.iter, inner, narrow, fields)
                for cond in gen.ifs:
                    self.expr(cond, inner, narrow, fields)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for part in parts:
                self.expr(part, inner, narrow, fields)
            return
        if isinstance(node, ast.Lambda):
            params = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
            self.expr(node.body, {k: v for k, v in env.items() if k not in params},
                      {k: v for k, v in narrow.items() if k not in params}, fields)
            return
        read = self.read_key(node)
        if read is not None:
            self.check_read(node, read, env, narrow, fields)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and self.type_of(node.func.value, env, narrow, fields) is not None
              and not isinstance(self.type_of(node.func.value, env, narrow, fields), (ListOf, DictOf))):
            self.report.problem(node, f"payload method .{node.func.attr}(): read fields by name")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, env, narrow, fields)
            elif isinstance(child, ast.keyword):
                self.expr(child.value, env, narrow, fields)

    def check_read(self, node: ast.expr, read, env: dict, narrow: dict, fields: dict) -> None:
        container, key, default, form = read
        t = self.type_of(container, env, narrow, fields)
        if t is None or isinstance(t, (ListOf, DictOf)):
            return
        self.report.reads += 1
        if t == UNNARROWED:
            self.report.problem(node, "a payload read whose event kind is not known here (test the kind, or "
                                      "annotate the payload with its type from membench.schemas.payloads)")
            return
        if key is _MISSING or not isinstance(key, str):
            self.report.problem(node, "a payload key that is not a string literal")
            return
        for record in sorted(t.names):
            declared = RECORDS[record].__annotations__
            if key not in declared:
                self.report.problem(node, f"{record} has no field {key!r}")
                continue
            schema_default = payloads.DEFAULTS.get(record, {}).get(key, _MISSING)
            if form == "index" and schema_default is not _MISSING:
                self.report.problem(node, f"{record}.{key} has a default ({schema_default!r}): an in-process payload "
                                          f"may omit it, read it with .get({key!r}, {schema_default!r})")
            elif form == "get" and schema_default is _MISSING:
                self.report.problem(node, f"{record}.{key} is required (always present): index it")
            elif form == "get" and default is None and schema_default is not None:
                self.report.problem(node, f"{record}.{key} defaults to {schema_default!r}: "
                                          f".get({key!r}, {schema_default!r})")
            elif form == "get" and default is not None:
                try:
                    given = ast.literal_eval(default)
                except ValueError:
                    self.report.problem(node, f"{record}.{key}: the default must be the schema's, as a literal")
                    continue
                if given != schema_default or type(given) is not type(schema_default):
                    self.report.problem(node, f"{record}.{key}: default {given!r} is not the schema's "
                                              f"{schema_default!r}")


def check_source(source: str, path: str = "<source>") -> Report:
    report = Report(path)
    _Checker(ast.parse(source), report).run()
    return report
