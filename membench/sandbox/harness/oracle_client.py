"""Runs in the oracle's sandbox: pytest over the hidden oracle, with the code under test reachable
only as proxies to the production process (`production_server`, another sandbox).

Started as `python3 -I -B -c <bootstrap> ORACLE OUTCOMES SOCKET TIMEOUT MODULE...`. The MODULE
names are the scored tree's top-level packages and modules: importing one of them (or anything
under it) gives a proxy module whose attributes and calls are answered by the production process.
Names of the standard library, pytest and its dependencies and the harness are never proxied
(`wire.reserved_module_names`), whatever the harness passes: they always come from the real
installation. Nothing of the workspace is ever imported or executed here: /workspace is a
read-only-by-convention copy of the scored tree for tests that read files (sources, data), and
it is not on sys.path.

Values from production are exact built-in types (rebuilt from JSON) or references (`Proxy`). A
reference never lets production code decide a comparison: equality, ordering, truthiness,
length, membership, iteration, `str`/`format` and numeric conversion raise TypeError; `repr` and
`hash` are answered here, and two references are equal only when they name the same production
object. Oracles may call a reference, read its attributes and index it (the results cross as
plain data again), or ask explicitly with `membench_oracle.plain(ref, kind)` for production's
`kind(ref)` (list, str, dict, ...) and `membench_oracle.length(ref)` for its `len(ref)`, as
plain data.

Oracles may also `from membench_oracle import load_production_file` to run a workspace script
(e.g. a generator) as a module in the production process.

The verdict is each test's outcome as recorded by `_Outcomes`, a plugin of this file that writes
JSON with functions bound when this module was imported, before any proxy could exist.

pytest runs with plugin autoload off, no cache, rootdir and confcutdir at the oracle's directory,
and no ini file, so nothing from the workspace configures it.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import importlib.machinery
import _socket  # the C module: `socket` adds selectors and enum, a tenth of the fast runner's start
import os
import sys
import time
import types
from _thread import allocate_lock  # `threading` would add functools and collections to the start

TYPE_CHECKING = False  # mypy reads it as True; the sandbox's start imports no `typing`
if TYPE_CHECKING:
    from typing import Any

from . import wire

_SYNTHESIZED: dict[str, type] = {}
# Exceptions the interpreter itself acts on: a StopIteration raised into a `map`, `filter` or `zip`
# over proxies ends that iteration silently, so a loop of asserts would pass having run none. They
# never cross as themselves (nor as a base of a stand-in): production's StopIteration arrives as a
# stand-in RuntimeError, as PEP 479 treats one leaving a generator.
_CONTROL_FLOW = (StopIteration, StopAsyncIteration)


def _safe_builtin_exception(name: str) -> type | None:
    """The builtin exception class NAME when it may be raised here as itself, else None."""
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, _CONTROL_FLOW):
        return cls
    return None


def _exception_class(name: str, bases: list[str]) -> type:
    """A local stand-in for a production exception class (same qualified name, nearest builtin
    base): `pytest.raises(ProductionError)` and `pytest.raises(ValueError)` both keep working.
    Exceptions that do not derive from Exception become RuntimeErrors, so production code cannot
    interrupt the test session (KeyboardInterrupt) or exit it (SystemExit)."""
    if name not in _SYNTHESIZED:
        control_flow = any(b in {c.__name__ for c in _CONTROL_FLOW} for b in bases)
        base: type = RuntimeError if control_flow else next(
            (found for found in map(_safe_builtin_exception, bases) if found is not None), RuntimeError)
        module, _, qualname = name.rpartition(".")
        _SYNTHESIZED[name] = type(qualname.rsplit(".", 1)[-1], (base,), {"__module__": module or "production"})
    return _SYNTHESIZED[name]


class Remote:
    """The channel to the production process: one request at a time."""

    def __init__(self, path: str, timeout_s: float):
        self.path, self.timeout_s = path, timeout_s
        self._sock: _socket.socket | None = None
        self._lock = allocate_lock()
        self.broken: str | None = None

    def _connect(self) -> _socket.socket:
        deadline = time.monotonic() + min(30.0, self.timeout_s)
        while True:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
                sock.settimeout(self.timeout_s)
                return sock
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def request(self, message: dict, decode_reply: bool = True) -> object:
        with self._lock:
            if self.broken:
                raise wire.ChannelError(f"the production process is unreachable: {self.broken}")
            try:
                if self._sock is None:
                    self._sock = self._connect()
                wire.send(self._sock, message)
                reply = wire.receive(self._sock)
            except (OSError, wire.ChannelError) as exc:  # timeouts too: the channel is out of step now
                self.broken = f"{type(exc).__name__}: {exc}"
                raise wire.ChannelError(f"the production process did not answer: {self.broken}") from None
        if "error" in reply:
            error = reply["error"]
            builtin = _safe_builtin_exception(error.get("type", "")) if error.get("module") == "builtins" else None
            if builtin is not None:
                raise builtin(error.get("message", ""))
            raise _exception_class(f"{error.get('module')}.{error.get('type')}", error.get("bases", []))(
                error.get("message", ""))
        return decode(reply.get("ok")) if decode_reply else reply.get("ok")


REMOTE: Remote | None = None


def _remote() -> Remote:
    if REMOTE is None:
        raise RuntimeError("no production channel")
    return REMOTE


# Any, not object: `kind is t` tests on type(value) pick the branch, which a type checker does not
# carry over to `value`
def encode(value: Any) -> object:
    kind = type(value)
    if any(kind is t for t in wire.PLAIN_SCALARS):
        return value
    if kind is bytes or kind is bytearray:
        return {"t": "bytes", "v": bytes(value).hex()}
    if any(kind is t for t in wire.CONTAINERS):
        return {"t": wire.CONTAINERS[kind], "v": [encode(v) for v in value]}  # type: ignore[index]  # kind is one of them
    if kind is dict:
        return {"t": "dict", "v": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, Proxy):
        return {"t": "ref", "id": object.__getattribute__(value, "_id")}
    if isinstance(value, ProductionModule):
        return {"t": "module", "name": value.__name__}
    ref = getattr(value, "__membench_ref__", None)  # a stand-in exception class
    if isinstance(value, type) and ref is not None:
        return {"t": "ref", "id": ref}
    raise TypeError(f"a {kind.__name__} cannot be passed to the code under test (plain data only)")


def decode(value: object) -> object:
    if not isinstance(value, dict):
        return value
    tag = value.get("t")
    if tag in wire.BUILTIN_CONTAINERS:
        return wire.BUILTIN_CONTAINERS[tag](decode(v) for v in value["v"])
    if tag == "bytes":
        return bytes.fromhex(value["v"])
    if tag == "dict":
        return {decode(k): decode(v) for k, v in value["v"]}
    if tag == "module":
        return _module_proxy(value["name"])
    if tag == "ref":
        if value.get("exception_class"):
            module, _, qualname = str(value.get("name")).rpartition(".")
            builtin = _safe_builtin_exception(qualname) if module == "builtins" else None
            if builtin is not None:  # `ParseError = ValueError` in production: the real class, as raised
                return builtin
            cls = _exception_class(value["name"], value.get("bases", []))
            cls.__membench_ref__ = value["id"]  # type: ignore[attr-defined]  # a mark on the synthesized class
            return cls
        return Proxy(value["id"], value.get("type", "?"))
    raise wire.ChannelError(f"unknown value tag {tag!r}")


_LOADED: dict[str, types.ModuleType] = {}  # production modules outside the tree's packages


def _module_proxy(name: str) -> types.ModuleType:
    """The proxy of a production module: through the import system for the tree's packages (so
    `sys.modules` agrees), else one kept here (a script run by `load_production_file`)."""
    finder = next((f for f in sys.meta_path if isinstance(f, ProductionFinder)), None)
    if finder is not None and name.split(".", 1)[0] in finder.names:
        return importlib.import_module(name)
    if name not in _LOADED:
        _LOADED[name] = ProductionModule(name)
    return _LOADED[name]


def _op(name: str):
    def method(self, *args):
        return _remote().request({"op": "op", "name": name, "target": encode(self), "args": [encode(a) for a in args]})
    method.__name__ = f"__{name}__"
    return method


def _refusal(proxy: "Proxy", what: str) -> str:
    return (f"{what} of a production object ({object.__getattribute__(proxy, '_type')}) is not answered: "
            "the oracle compares only plain values (exact str, int, float, bool, None, bytes, list, tuple, "
            "dict, set), never objects of the code under test. Call a method or read an attribute that returns "
            "plain data, or use membench_oracle.plain(value, list|str|dict|...) or membench_oracle.length(value) "
            "(docs/sandbox.md)")


def _refused(what: str, dunder: str):
    def method(self, *args):
        raise TypeError(_refusal(self, what))
    method.__name__ = dunder
    return method


def _ref_id(proxy: "Proxy") -> int:
    return object.__getattribute__(proxy, "_id")


class Proxy:
    """An object that lives in the production process. Nothing that decides a verdict is asked of
    it: production code could answer "equal" to anything (and would see the oracle's expected
    value as the operand). Equality holds only between references to the same production object,
    decided here; `repr` and `hash` are local; the rest raises TypeError (which fails the test)."""

    __slots__ = ("_id", "_type")

    def __init__(self, ref_id: int, type_name: str):
        object.__setattr__(self, "_id", ref_id)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name: str) -> object:
        return _remote().request({"op": "getattr", "target": encode(self), "name": name})

    def __call__(self, *args, **kwargs) -> object:
        return _remote().request({"op": "call", "target": encode(self), "args": [encode(a) for a in args],
                                  "kwargs": {k: encode(v) for k, v in kwargs.items()}})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Proxy):
            return _ref_id(self) == _ref_id(other)
        raise TypeError(_refusal(self, "equality"))

    def __ne__(self, other: object) -> bool:
        if isinstance(other, Proxy):
            return _ref_id(self) != _ref_id(other)
        raise TypeError(_refusal(self, "equality"))

    def __hash__(self) -> int:
        return hash(("membench-production-ref", _ref_id(self)))

    def __repr__(self) -> str:
        return f"<production object {object.__getattribute__(self, '_type')} #{_ref_id(self)}>"

    __lt__, __le__, __gt__, __ge__ = (_refused("ordering", f"__{n}__") for n in ("lt", "le", "gt", "ge"))
    __bool__ = _refused("truthiness", "__bool__")
    __len__ = _refused("length", "__len__")
    __contains__ = _refused("membership", "__contains__")
    __iter__ = _refused("iteration", "__iter__")  # defined, so iter() does not fall back to __getitem__
    __reversed__ = _refused("iteration", "__reversed__")
    __str__ = _refused("str()", "__str__")
    __format__ = _refused("format()", "__format__")
    __bytes__ = _refused("bytes()", "__bytes__")
    __int__ = _refused("int()", "__int__")
    __index__ = _refused("int()", "__index__")
    __float__ = _refused("float()", "__float__")
    __complex__ = _refused("complex()", "__complex__")
    # item access is a call that returns data, as a method would
    __getitem__, __setitem__, __delitem__ = (_op(n) for n in ("getitem", "setitem", "delitem"))


PLAIN_KINDS = {list: "list", tuple: "tuple", dict: "dict", set: "set", frozenset: "frozenset", str: "str",
               bytes: "bytes", int: "int", float: "float", bool: "bool"}


def length(value: Any) -> int:
    """`len(value)` as a plain int: production's answer for a reference, asked explicitly (`len()`
    of a reference raises, like every operation that decides a verdict)."""
    if isinstance(value, Proxy):
        result = _remote().request({"op": "plain", "kind": "len", "target": encode(value)})
        if type(result) is not int:
            raise TypeError(f"production answered length({value!r}) with a {type(result).__name__}")
        return result
    return len(value)


def plain(value: object, kind: type = list) -> object:
    """`kind(value)` as plain data: for a reference, production's own conversion (`list(gen)`,
    `str(obj)`, `dict(mapping)`...), returned as an exact `kind` whose items are plain data or
    references again; for a value already here, `kind(value)` computed here. What production
    answers is its answer — compare it with the oracle's own values, never the other way round."""
    if not any(kind is k for k in PLAIN_KINDS):
        raise TypeError(f"plain() converts to one of {', '.join(k.__name__ for k in PLAIN_KINDS)}, not {kind!r}")
    if isinstance(value, Proxy):
        result = _remote().request({"op": "plain", "kind": PLAIN_KINDS[kind], "target": encode(value)})
        if type(result) is not kind:
            raise TypeError(f"production answered plain({value!r}, {kind.__name__}) with a {type(result).__name__}")
        return result
    if isinstance(value, ProductionModule):
        raise TypeError(f"a production module ({value.__name__}) has no plain value")
    return kind(value)


class ProductionModule(types.ModuleType):
    """A production module: every attribute is fetched from the production process."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__") and name not in ("__file__", "__version__", "__all__"):
            raise AttributeError(name)  # import machinery probes (__path__ is set, the rest stay local)
        return _remote().request({"op": "getattr", "target": {"t": "module", "name": self.__name__}, "name": name})


class ProductionFinder:
    """Answers imports of the scored tree's top-level names with proxy modules (first on
    sys.meta_path, so no file of the workspace is ever imported here). A finder and loader by
    protocol, not by `importlib.abc` base classes: that module alone imports pathlib, re and enum,
    a fifth of the fast oracle runner's start."""

    def __init__(self, names: set[str]):
        # the standard library, pytest, the harness and anything imported before the finder exists
        # always resolve from the real installation, whatever the scored tree contains
        already = {name.split(".", 1)[0] for name in list(sys.modules)}
        candidates = set(names) - wire.reserved_module_names() - already
        # nor anything else installed where the oracle runs (yaml, requests, numpy, …): an oracle may
        # build its expected value with one, and a scored tree's `yaml.py` must not answer for it.
        # /workspace is not on sys.path, so only the real installation is searched here.
        installed = {name for name in candidates if importlib.machinery.PathFinder.find_spec(name) is not None}
        if installed:
            print("membench: not proxied, installed where the oracle runs: " + ", ".join(sorted(installed)),
                  file=sys.stderr)
        self.names = candidates - installed

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".", 1)[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)  # type: ignore[arg-type]  # the finder is its own loader (create_module, exec_module)

    def create_module(self, spec):
        try:
            # the reply names the module; decoding it would import it again, from inside this import
            _remote().request({"op": "import", "name": spec.name}, decode_reply=False)
        except ImportError as exc:
            raise ModuleNotFoundError(f"No module named {spec.name!r} in the code under test ({exc})",
                                      name=spec.name) from None
        module = ProductionModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def _refuse_workspace_code(event: str, args: tuple) -> None:
    """Defence in depth against an oracle that executes workspace code in its own process (e.g.
    `spec.loader.exec_module` of a workspace script): such code must run through
    `load_production_file`. Reading workspace files as text stays allowed."""
    if event == "exec" and str(getattr(args[0], "co_filename", "")).startswith("/workspace/"):
        raise RuntimeError("workspace code may not run in the oracle's process: "
                           "use membench_oracle.load_production_file")


def load_production_file(path: str, name: str | None = None) -> object:
    """Run the workspace file `path` as a module in the production process; returns its proxy."""
    name = name or "membench_loaded_" + path.replace("/", "_").removesuffix(".py")
    return _remote().request({"op": "load_file", "path": path, "name": name})


class _Outcomes:
    """A pytest plugin that records each test's outcome (`pass`, `fail`, `error` for a failed
    setup or teardown, `excluded` for a skip) and pytest's exit status, and writes them as JSON at
    the end of the session. The harness reads this file, not pytest's reports: the writer uses
    only what this module bound at import, before any production module could be imported."""

    def __init__(self, path: str):
        self.path = path
        self.cases: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report) -> None:
        nodeid, when, outcome = str(report.nodeid), str(report.when), str(report.outcome)
        case = self.cases.setdefault(nodeid, {"case_id": nodeid.rsplit("::", 1)[-1], "outcome": "pass",
                                              "duration_ms": 0})
        case["duration_ms"] += int(float(report.duration) * 1000)
        if case["outcome"] != "pass" or outcome == "passed":
            return
        if outcome == "skipped":
            case["outcome"] = "excluded"
        else:
            case["outcome"] = "fail" if when == "call" else "error"

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        _write_outcomes(self.path, {"exit_status": int(exitstatus), "cases": list(self.cases.values())})


def _write_outcomes(path: str, data: dict, _dumps=wire.dumps, _open=open, _replace=os.replace) -> None:
    with _open(path + ".partial", "w", encoding="utf-8") as handle:
        handle.write(_dumps(data))
    _replace(path + ".partial", path)


def main(argv: list[str]) -> int:
    global REMOTE
    oracle, outcomes, sock_path, timeout_s, names = argv[0], argv[1], argv[2], float(argv[3]), set(argv[4:])
    REMOTE = Remote(sock_path, timeout_s)
    api: Any = types.ModuleType("membench_oracle")  # its functions are set below
    api.load_production_file = load_production_file
    api.plain = plain
    api.length = length
    sys.modules["membench_oracle"] = api
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for key in [k for k in os.environ if k.startswith("PYTEST_") and k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"]:
        del os.environ[key]
    # everything the harness and pytest need is imported before the finder exists; the finder also
    # refuses the reserved names, so a module pytest imports later comes from the installation too
    import pytest

    # What is imported so far lives as long as the process: frozen, it is skipped by every later
    # collection, among them the five full ones pytest runs at the end of a session (unraisable
    # exception hooks), which otherwise cost about a tenth of an oracle's CPU.
    gc.freeze()
    sys.meta_path.insert(0, ProductionFinder(names))
    sys.addaudithook(_refuse_workspace_code)
    rootdir = os.path.dirname(oracle)
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:junitxml", "--rootdir", rootdir,
                        "--confcutdir", rootdir, "-c", os.devnull, oracle], plugins=[_Outcomes(outcomes)])
    try:
        REMOTE.request({"op": "shutdown"})
    except Exception:  # the channel may already be gone; the harness stops the sandbox anyway
        pass
    return int(code)
