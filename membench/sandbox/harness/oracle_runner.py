"""The fast oracle runner: runs in the oracle's sandbox like `oracle_client`, but calls the oracle's
test functions itself instead of starting pytest (whose import was three quarters of a scored
session's CPU). The oracle stays a pytest file: `import pytest` gives `pytest_standin`, which
offers the few names oracles use with pytest's behaviour; an oracle that needs more is scored by
`oracle_client` and real pytest (`membench.sandbox.oracle_runners.fast_runner_refusal` decides on the
harness side, before anything runs).

Started as `python3 -I -S -B -c <bootstrap> ORACLE OUTCOMES SOCKET TIMEOUT MODULE...`, the same
arguments as `oracle_client`. Everything the verdict depends on is as there: the code under test
is reachable only as proxies to the production process (`oracle_client.ProductionFinder`,
`wire`), values cross as plain data, and the outcome record is written by `_write_outcomes` with
`wire.dumps`, `open` and `os.replace` bound before the finder existed. What pytest did, done here:

- collection: the oracle's module is executed once (an exception there is a collection error:
  status 2, a record with no case); its test functions are the module's `test*` functions and
  the `test*` methods of its `Test*` classes, in definition order, each parametrised case once;
- each case: its fixtures set up (an exception: `error`), the function called (an exception:
  `fail`; `pytest.skip`: `excluded`), function-scoped fixtures torn down (an exception after a
  pass: `error`); module- and session-scoped fixtures are torn down after the last case;
- the exit status pytest would give: 0 all passed, 1 a case failed, 2 a collection error,
  5 no test (a harness-fault suspicion, as pytest's); an error of this runner itself ends the
  process before the record is written: no record, a harness-fault suspicion too;
- a failed bare `assert a <op> b` says `assert <repr a> <op> <repr b>`, as pytest's rewriting
  does (each side evaluated once, in order; only the message is added);
- each case's output is captured and printed only when it did not pass.
"""

from __future__ import annotations

import gc
import io
import os
import sys
import time
import types

import importlib

from . import oracle_client

TYPE_CHECKING = False  # typing costs start-up CPU in the sandbox: annotations only (mypy takes this as True)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any
from .oracle_client import ProductionFinder, Remote, _refuse_workspace_code, _write_outcomes

# imported by its full name, so an installation without it says "No module named …" (a harness fault)
pytest_standin = importlib.import_module(__package__ + ".pytest_standin")

PASS, FAIL, ERROR, EXCLUDED = "pass", "fail", "error", "excluded"
MAX_REPR = 240
_perf_counter = time.perf_counter


# ------------------------------------------------------------------------------ assertion messages
def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a repr that raises must not hide the assertion
        text = f"<repr raised {type(exc).__name__}>"
    return text if len(text) <= MAX_REPR else text[:MAX_REPR - 3] + "..."


_SYMBOLS = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=", "Is": "is",
            "IsNot": "is not", "In": "in", "NotIn": "not in"}


class _Compare:
    """The comparison of a rewritten assert: evaluates it as Python would and keeps the message."""

    def __init__(self) -> None:
        self.message = ""

    def __call__(self, left: Any, symbol: str, right: Any) -> bool:  # the operands of the oracle's own assert
        if symbol == "==":
            result = left == right
        elif symbol == "!=":
            result = left != right
        elif symbol == "<":
            result = left < right
        elif symbol == "<=":
            result = left <= right
        elif symbol == ">":
            result = left > right
        elif symbol == ">=":
            result = left >= right
        elif symbol == "is":
            result = left is right
        elif symbol == "is not":
            result = left is not right
        elif symbol == "in":
            result = left in right
        else:
            result = left not in right
        if result:
            return True
        self.message = f"assert {_short_repr(left)} {symbol} {_short_repr(right)}"
        return False


def code_file(oracle: str) -> str:
    """Where the harness puts the oracle's compiled code beside it (`compiled_oracle`)."""
    return oracle[:-3] + ".code" if oracle.endswith(".py") else oracle + ".code"


def compiled_oracle(source: str, filename: str) -> bytes:
    """The oracle's code as the harness writes it for the runner: this interpreter's byte-code magic
    and the marshalled code object (`compile_oracle`). Compiling on the harness side keeps `ast`
    (and the `enum` it imports) out of the runner's start; a runner whose interpreter has another
    magic compiles the source itself."""
    import marshal
    from importlib._bootstrap_external import MAGIC_NUMBER

    return MAGIC_NUMBER + marshal.dumps(compile_oracle(source, filename))


def _load_code(oracle: str, source: str) -> types.CodeType:
    import marshal
    from importlib._bootstrap_external import MAGIC_NUMBER

    try:
        with open(code_file(oracle), "rb") as handle:
            data = handle.read()
    except OSError:
        data = b""
    if data[:len(MAGIC_NUMBER)] == MAGIC_NUMBER:
        return marshal.loads(data[len(MAGIC_NUMBER):])
    return compile_oracle(source, oracle)


def compile_oracle(source: str, filename: str) -> types.CodeType:
    """The oracle's code, each message-less `assert` given pytest's kind of message."""
    import ast

    tree = ast.parse(source, filename)

    class AddMessages(ast.NodeTransformer):
        def visit_Assert(self, node: ast.Assert) -> ast.AST:
            if node.msg is not None:
                return node
            test = node.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]).__name__ in _SYMBOLS:
                check = ast.Call(ast.Name("__membench_compare__", ast.Load()),
                                 [test.left, ast.Constant(_SYMBOLS[type(test.ops[0]).__name__]), test.comparators[0]],
                                 [])
                message = ast.Attribute(ast.Name("__membench_compare__", ast.Load()), "message", ast.Load())
                return ast.copy_location(ast.Assert(check, message), node)
            return ast.copy_location(ast.Assert(test, ast.Constant("assert " + ast.unparse(test))), node)

    tree = ast.fix_missing_locations(AddMessages().visit(tree))
    return compile(tree, filename, "exec", dont_inherit=True)


# -------------------------------------------------------------------------------------- fixtures
class MonkeyPatch:
    """pytest's `monkeypatch` fixture: the changes are undone when the case ends."""

    _NOTSET = object()

    def __init__(self) -> None:
        self._undo: list = []

    def setattr(self, target, name, value=_NOTSET, raising: bool = True) -> None:
        if value is self._NOTSET:
            module, _, attr = str(target).rpartition(".")
            target, name, value = importlib.import_module(module), attr, name
        old = getattr(target, name, self._NOTSET)
        if raising and old is self._NOTSET:
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        self._undo.append(lambda: delattr(target, name) if old is self._NOTSET else setattr(target, name, old))
        setattr(target, name, value)

    def delattr(self, target, name=_NOTSET, raising: bool = True) -> None:
        if name is self._NOTSET:
            module, _, name = str(target).rpartition(".")
            target = importlib.import_module(module)
        if not hasattr(target, name):
            if raising:
                raise AttributeError(name)
            return
        old = getattr(target, name)
        self._undo.append(lambda: setattr(target, name, old))
        delattr(target, name)

    def setitem(self, mapping, name, value) -> None:
        old = mapping.get(name, self._NOTSET)
        self._undo.append(lambda: mapping.pop(name, None) if old is self._NOTSET else mapping.__setitem__(name, old))
        mapping[name] = value

    def delitem(self, mapping, name, raising: bool = True) -> None:
        if name not in mapping:
            if raising:
                raise KeyError(name)
            return
        old = mapping[name]
        self._undo.append(lambda: mapping.__setitem__(name, old))
        del mapping[name]

    def setenv(self, name: str, value: str, prepend: str | None = None) -> None:
        value = str(value)
        if prepend and name in os.environ:
            value = value + prepend + os.environ[name]
        self.setitem(os.environ, name, value)

    def delenv(self, name: str, raising: bool = True) -> None:
        self.delitem(os.environ, name, raising)

    def syspath_prepend(self, path) -> None:
        old = list(sys.path)
        self._undo.append(lambda: sys.path.__setitem__(slice(None), old))
        sys.path.insert(0, str(path))

    def chdir(self, path) -> None:
        old = os.getcwd()
        self._undo.append(lambda: os.chdir(old))
        os.chdir(path)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


class CaptureResult(tuple):
    @property
    def out(self) -> str:
        return self[0]

    @property
    def err(self) -> str:
        return self[1]


class Capture:
    """Each case's stdout and stderr (pytest's capture; `capsys` reads it)."""

    def __init__(self) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        self._saved = (sys.stdout, sys.stderr)

    def start(self) -> None:
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = self.out, self.err

    def stop(self) -> str:
        sys.stdout, sys.stderr = self._saved
        return self.out.getvalue() + self.err.getvalue()

    def readouterr(self) -> CaptureResult:
        result = CaptureResult((self.out.getvalue(), self.err.getvalue()))
        for stream in (self.out, self.err):
            stream.seek(0)
            stream.truncate()
        return result


class Case:
    """One test case: a function (or a method of a fresh instance of its class) with its
    parameters, its id and whether a mark skips it."""

    def __init__(self, name: str, func, cls: type | None, params: dict, case_id: str, skip: str | None):
        self.name, self.func, self.cls, self.params, self.case_id, self.skip = name, func, cls, params, case_id, skip


def _argnames(func) -> list[str]:
    """The names pytest would resolve as fixtures: positional parameters without a default."""
    code = func.__code__
    names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    defaults = len(func.__defaults__ or ())
    positional = names[:code.co_argcount]
    if defaults:
        positional = positional[:-defaults]
    kwonly = [n for n in names[code.co_argcount:] if n not in (func.__kwdefaults__ or {})]
    return positional + kwonly


_ASCII_TABLE = {i: f"\\x{i:02x}" for i in range(128) if i not in range(32, 127)}
_ASCII_TABLE.update({ord("\t"): "\\t", ord("\r"): "\\r", ord("\n"): "\\n"})


def _escaped(value: str | bytes) -> str:
    text = value.decode("ascii", "backslashreplace") if isinstance(value, bytes) else \
        value.encode("unicode_escape").decode("ascii")
    return text.translate(_ASCII_TABLE)


def _idval_from_value(value: object) -> str | None:
    import enum

    if isinstance(value, (str, bytes)):
        return _escaped(value)
    if value is None or isinstance(value, (float, int, complex)):
        return str(value)
    if type(value).__name__ == "Pattern" and hasattr(value, "pattern"):
        return _escaped(value.pattern)
    if isinstance(value, enum.Enum):
        return str(value)
    name = getattr(value, "__name__", None)
    if isinstance(name, str):
        return name
    return None


def _idval(value: object, argname: str, idx: int, idfn) -> str:
    if idfn is not None:
        given = idfn(value)
        if given is not None:
            found = _idval_from_value(given)
            if found is not None:
                return found
    if isinstance(value, (str, bytes)):
        if len(value) <= 100:
            return _escaped(value)
    else:
        found = _idval_from_value(value)
        if found is not None:
            return found
    return f"{argname}{idx}"


def _parametrize(mark) -> tuple[list[str], list[tuple[tuple, str, bool]]]:
    """(argnames, [(values, id, skipped by a mark of its own)]) of one `parametrize` mark, ids as
    pytest makes them (explicit, from the values, else argname and index; made unique)."""
    argnames, argvalues = mark.args[0], mark.args[1] if len(mark.args) > 1 else mark.kwargs["argvalues"]
    if isinstance(argnames, str):
        argnames = [n.strip() for n in argnames.split(",") if n.strip()]
    argnames = list(argnames)
    ids, idfn = mark.kwargs.get("ids"), None
    if callable(ids):
        ids, idfn = None, ids
    sets: list[list[Any]] = []  # [values, id, skipped]: ids are made unique in place below
    for idx, value in enumerate(argvalues):
        if isinstance(value, pytest_standin.ParameterSet):
            values, marks, given = value.values, value.marks, value.id
        else:
            values, marks, given = ((value,) if len(argnames) == 1 else tuple(value)), (), None
        if given is not None:
            case_id = _escaped(given)
        elif ids is not None and idx < len(ids) and ids[idx] is not None:
            case_id = _idval_from_value(ids[idx]) or f"{argnames[0]}{idx}"
        else:
            case_id = "-".join(_idval(v, n, idx, idfn) for v, n in zip(values, argnames))
        skipped = any(_skips(m.mark) for m in marks)
        sets.append([tuple(values), case_id, skipped])
    resolved = [s[1] for s in sets]
    if len(resolved) != len(set(resolved)):
        counts = {i: resolved.count(i) for i in resolved}
        suffixes: dict[str, int] = {}
        for entry in sets:
            original = entry[1]
            if counts[original] > 1:
                sep = "_" if original and original[-1].isdigit() else ""
                number = suffixes.get(original, 0)
                while f"{original}{sep}{number}" in resolved:
                    number += 1
                entry[1] = f"{original}{sep}{number}"
                suffixes[original] = number + 1
    return argnames, [(v, i, s) for v, i, s in sets]


def _skips(mark) -> bool:
    if mark.name == "skip":
        return True
    if mark.name == "skipif":
        condition = mark.args[0] if mark.args else mark.kwargs.get("condition", False)
        return bool(condition)
    return False


def collect(module: types.ModuleType) -> list[Case]:
    """The module's test cases in pytest's order: definition order, each parametrised case in turn
    (the mark nearest the function varies slowest; its ids come first)."""
    cases = []
    for name, obj in list(vars(module).items()):
        if isinstance(obj, types.FunctionType) and name.startswith("test") \
                and not hasattr(obj, "_membench_fixture"):
            cases += _cases(name, obj, None, list(getattr(obj, "pytestmark", [])))
        elif isinstance(obj, type) and name.startswith("Test") and "__init__" not in vars(obj):
            class_marks = list(vars(obj).get("pytestmark", []))
            for attr, method in list(vars(obj).items()):
                if isinstance(method, types.FunctionType) and attr.startswith("test"):
                    cases += _cases(attr, method, obj, list(getattr(method, "pytestmark", [])) + class_marks)
    return cases


def _cases(name: str, func, cls: type | None, marks: list) -> list[Case]:
    skip = next((m.kwargs.get("reason", "") or "skipped" for m in marks if _skips(m)), None)
    combos: list[tuple[dict, list[str], bool]] = [({}, [], False)]
    for mark in (m for m in marks if m.name == "parametrize"):
        argnames, sets = _parametrize(mark)
        combos = [({**params, **dict(zip(argnames, values))}, ids + [case_id], skipped or own)
                  for params, ids, skipped in combos for values, case_id, own in sets]
    out = []
    for params, ids, skipped in combos:
        case_id = f"{name}[{'-'.join(ids)}]" if ids else name
        reason = skip if skip is not None else ("skipped" if skipped else None)
        out.append(Case(name, func, cls, params, case_id, reason))
    return out


class Fixtures:
    """Fixture values for the cases: the oracle's own fixtures and the pytest fixtures the runner
    offers (`pytest_standin.BUILTIN_FIXTURES`)."""

    def __init__(self, module: types.ModuleType):
        self.definitions = {}
        for obj in vars(module).values():
            definition = getattr(obj, "_membench_fixture", None)
            if isinstance(definition, pytest_standin.FixtureDefinition):
                self.definitions[definition.name] = definition
        self.scoped: dict[str, object] = {}
        self.scoped_teardowns: list = []
        self.tmp_count = 0

    def value(self, name: str, case: Case, values: dict, teardowns: list, capture: Capture, stack: tuple = ()):
        if name in case.params:
            return case.params[name]
        if name in values:
            return values[name]
        definition = self.definitions.get(name)
        if definition is None:
            value = self._builtin(name, case, teardowns, capture)
        elif definition.scope != "function" and name in self.scoped:
            return self.scoped[name]
        else:
            if name in stack:
                raise RuntimeError(f"fixture {name!r} depends on itself")
            kwargs = {arg: self.value(arg, case, values, teardowns, capture, stack + (name,))
                      for arg in _argnames(definition.func)}
            value = definition.func(**kwargs)
            if isinstance(value, types.GeneratorType):
                generator, value = value, next(value)
                (teardowns if definition.scope == "function" else self.scoped_teardowns).append(
                    lambda: _finish(generator))
            if definition.scope != "function":
                self.scoped[name] = value
        values[name] = value
        return value

    def _builtin(self, name: str, case: Case, teardowns: list, capture: Capture) -> object:
        if name == "tmp_path":
            import pathlib
            import tempfile

            self.tmp_count += 1
            return pathlib.Path(tempfile.mkdtemp(prefix=f"pytest-{case.name[:30]}{self.tmp_count}-"))
        if name == "monkeypatch":
            patch = MonkeyPatch()
            teardowns.append(patch.undo)
            return patch
        if name == "capsys":
            return capture
        raise LookupError(f"fixture '{name}' not found")


def _finish(generator) -> None:
    try:
        next(generator)
    except StopIteration:
        return
    raise RuntimeError("a fixture yielded twice")


def _where(exc: BaseException, oracle: str, lines: list[str]) -> str:
    """The oracle's own frames of a traceback, as `file:line: in function` and the source line."""
    out, tb = [], exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == oracle:
            line = lines[tb.tb_lineno - 1].strip() if 0 < tb.tb_lineno <= len(lines) else ""
            out.append(f"{os.path.basename(oracle)}:{tb.tb_lineno}: in {code.co_name}\n    {line}")
        tb = tb.tb_next
    return "\n".join(out)


def _describe(exc: BaseException) -> str:
    message = str(exc) if not isinstance(exc, pytest_standin.OutcomeException) else exc.msg
    name = "Failed" if isinstance(exc, pytest_standin.Failed) else type(exc).__name__
    return f"{name}: {message}" if message else name


def run_case(case: Case, fixtures: Fixtures, report: list[str], oracle: str, lines: list[str]) -> dict:
    """One case's outcome (`pass`, `fail`, `error`, `excluded`) and its duration."""
    started = _perf_counter()
    record = {"case_id": case.case_id, "outcome": PASS, "duration_ms": 0}
    if case.skip is not None:
        record["outcome"] = EXCLUDED
        return record
    capture = Capture()
    teardowns: list[Callable[[], object]] = []
    values: dict[str, object] = {}
    failure: BaseException | None = None
    capture.start()
    try:
        try:
            func = case.func.__get__(case.cls()) if case.cls is not None else case.func
            kwargs = {name: fixtures.value(name, case, values, teardowns, capture) for name in _argnames(case.func)
                      if not (case.cls is not None and name == "self")}
        except pytest_standin.Skipped:
            record["outcome"] = EXCLUDED
        except BaseException as exc:  # noqa: BLE001 - a failed setup is the case's error, as in pytest
            record["outcome"], failure = ERROR, exc
        else:
            try:
                func(**kwargs)
            except pytest_standin.Skipped:
                record["outcome"] = EXCLUDED
            except BaseException as exc:  # noqa: BLE001 - everything a test raises fails it
                record["outcome"], failure = FAIL, exc
        for teardown in reversed(teardowns):
            try:
                teardown()
            except BaseException as exc:  # noqa: BLE001
                if record["outcome"] == PASS:
                    record["outcome"], failure = ERROR, exc
    finally:
        output = capture.stop()
    record["duration_ms"] = int((_perf_counter() - started) * 1000)
    if failure is not None:
        where = _where(failure, oracle, lines)
        report.append(f"_____ {case.case_id} _____\n{where}\nE   {_describe(failure)}"
                      + (f"\n----- captured output -----\n{output[-2000:]}" if output else ""))
        report.append(f"{'FAILED' if record['outcome'] == FAIL else 'ERROR'} {os.path.basename(oracle)}::"
                      f"{case.case_id} - {_describe(failure)[:300]}")
    return record


def main(argv: list[str]) -> int:
    oracle, outcomes, sock_path, timeout_s, names = argv[0], argv[1], argv[2], float(argv[3]), set(argv[4:])
    oracle_client.REMOTE = Remote(sock_path, timeout_s)
    api = types.ModuleType("membench_oracle")
    api.load_production_file = oracle_client.load_production_file  # type: ignore[attr-defined]  # the oracle's API module, built here
    api.plain = oracle_client.plain  # type: ignore[attr-defined]  # the oracle's API module, built here
    api.length = oracle_client.length  # type: ignore[attr-defined]  # the oracle's API module, built here
    sys.modules["membench_oracle"] = api
    sys.modules["pytest"] = pytest_standin  # the oracle's `import pytest`; the real one is never loaded
    with open(oracle, encoding="utf-8") as handle:
        source = handle.read()
    lines = source.splitlines()
    started = _perf_counter()
    report: list[str] = []
    try:
        code = _load_code(oracle, source)
    except SyntaxError as exc:
        code, report = None, [f"ERROR collecting {os.path.basename(oracle)}: SyntaxError: {exc}"]
    # What is imported so far lives as long as the process (frozen: the collector skips it), and
    # nothing of the code under test is importable before this line.
    gc.freeze()
    sys.meta_path.insert(0, ProductionFinder(names))
    sys.addaudithook(_refuse_workspace_code)
    module = types.ModuleType("test_oracle")
    module.__file__ = oracle
    module.__membench_compare__ = _Compare()  # type: ignore[attr-defined]  # what the rewritten asserts call
    sys.modules["test_oracle"] = module
    cases: list[dict] = []
    status = 2
    if code is not None:
        try:
            exec(code, vars(module))
        except BaseException as exc:  # noqa: BLE001 - a collection error: status 2, nothing ran
            report += [f"ERROR collecting {os.path.basename(oracle)}\n{_where(exc, oracle, lines)}\n"
                       f"E   {_describe(exc)}",
                       f"ERROR {os.path.basename(oracle)} - {_describe(exc)[:300]}"]
        else:
            fixtures = Fixtures(module)
            for case in collect(module):
                cases.append(run_case(case, fixtures, report, oracle, lines))
            for teardown in reversed(fixtures.scoped_teardowns):
                try:
                    teardown()
                except BaseException as exc:  # noqa: BLE001 - pytest reports it on the last case
                    if cases and cases[-1]["outcome"] == PASS:
                        cases[-1]["outcome"] = ERROR
                    report.append(f"ERROR at teardown - {_describe(exc)[:300]}")
            if not cases:
                status = 5
            else:
                status = 0 if all(c["outcome"] in (PASS, EXCLUDED) for c in cases) else 1
    _write_outcomes(outcomes, {"exit_status": status, "cases": cases})
    counts: dict[str, int] = {}
    for c in cases:
        counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no tests ran"
    print("\n".join(report + [f"{summary} in {_perf_counter() - started:.2f}s (membench fast oracle runner)"]))
    try:
        oracle_client.REMOTE.request({"op": "shutdown"})
    except Exception:  # the channel may already be gone; the harness stops the sandbox anyway
        pass
    return status
