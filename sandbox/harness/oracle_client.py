"""Runs in the oracle's sandbox: pytest over the hidden oracle, with the code under test reachable
only as proxies to the production process (`production_server`, another sandbox).

Started as `python3 -I -B -c <bootstrap> ORACLE JUNIT SOCKET TIMEOUT MODULE...`. The MODULE names
are the scored tree's top-level packages and modules: importing one of them (or anything under it)
gives a proxy module whose attributes, calls and operators are answered by the production process.
Nothing of the workspace is ever imported or executed here: /workspace is a read-only-by-convention
copy of the scored tree for tests that read files (sources, data), and it is not on sys.path.

Oracles may also `from membench_oracle import load_production_file` to run a workspace script
(e.g. a generator) as a module in the production process.

pytest runs with plugin autoload off, no cache, rootdir and confcutdir at the oracle's directory,
and no ini file, so nothing from the workspace configures it.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import os
import socket
import sys
import threading
import time
import types

from . import wire

_SYNTHESIZED: dict[str, type] = {}


def _exception_class(name: str, bases: list[str]) -> type:
    """A local stand-in for a production exception class (same qualified name, nearest builtin
    base): `pytest.raises(ProductionError)` and `pytest.raises(ValueError)` both keep working.
    Exceptions that do not derive from Exception become RuntimeErrors, so production code cannot
    interrupt the test session (KeyboardInterrupt) or exit it (SystemExit)."""
    if name not in _SYNTHESIZED:
        base = next((getattr(builtins, b) for b in bases if b != "BaseException"
                     and isinstance(getattr(builtins, b, None), type) and issubclass(getattr(builtins, b), Exception)),
                    RuntimeError)
        module, _, qualname = name.rpartition(".")
        _SYNTHESIZED[name] = type(qualname.rsplit(".", 1)[-1], (base,), {"__module__": module or "production"})
    return _SYNTHESIZED[name]


class Remote:
    """The channel to the production process: one request at a time."""

    def __init__(self, path: str, timeout_s: float):
        self.path, self.timeout_s = path, timeout_s
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.broken: str | None = None

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + min(30.0, self.timeout_s)
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
            if error.get("module") == "builtins" and isinstance(getattr(builtins, error.get("type", ""), None), type) \
                    and issubclass(getattr(builtins, error["type"]), Exception):
                raise getattr(builtins, error["type"])(error.get("message", ""))
            raise _exception_class(f"{error.get('module')}.{error.get('type')}", error.get("bases", []))(
                error.get("message", ""))
        return decode(reply.get("ok")) if decode_reply else reply.get("ok")


REMOTE: Remote | None = None


def _remote() -> Remote:
    if REMOTE is None:
        raise RuntimeError("no production channel")
    return REMOTE


def encode(value: object) -> object:
    kind = type(value)
    if kind in wire.PLAIN_SCALARS:
        return value
    if kind in (bytes, bytearray):
        return {"t": "bytes", "v": bytes(value).hex()}
    if kind in wire.CONTAINERS:
        return {"t": wire.CONTAINERS[kind], "v": [encode(v) for v in value]}
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
            cls = _exception_class(value["name"], value.get("bases", []))
            cls.__membench_ref__ = value["id"]
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


class Proxy:
    """An object that lives in the production process."""

    __slots__ = ("_id", "_type")

    def __init__(self, ref_id: int, type_name: str):
        object.__setattr__(self, "_id", ref_id)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name: str) -> object:
        return _remote().request({"op": "getattr", "target": encode(self), "name": name})

    def __call__(self, *args, **kwargs) -> object:
        return _remote().request({"op": "call", "target": encode(self), "args": [encode(a) for a in args],
                                  "kwargs": {k: encode(v) for k, v in kwargs.items()}})

    def __iter__(self):
        return iter(_remote().request({"op": "op", "name": "iter", "target": encode(self), "args": []}))

    __eq__, __ne__, __lt__, __le__, __gt__, __ge__ = (_op(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
    __contains__, __getitem__, __setitem__, __delitem__ = (_op(n) for n in ("contains", "getitem", "setitem",
                                                                              "delitem"))
    __len__, __bool__, __hash__, __int__, __float__ = (_op(n) for n in ("len", "bool", "hash", "int", "float"))
    __repr__, __str__ = _op("repr"), _op("str")


class ProductionModule(types.ModuleType):
    """A production module: every attribute is fetched from the production process."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__") and name not in ("__file__", "__version__", "__all__"):
            raise AttributeError(name)  # import machinery probes (__path__ is set, the rest stay local)
        return _remote().request({"op": "getattr", "target": {"t": "module", "name": self.__name__}, "name": name})


class ProductionFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of the scored tree's top-level names with proxy modules (first on
    sys.meta_path, so no file of the workspace is ever imported here)."""

    def __init__(self, names: set[str]):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".", 1)[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

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


def main(argv: list[str]) -> int:
    global REMOTE
    oracle, junit, sock_path, timeout_s, names = argv[0], argv[1], argv[2], float(argv[3]), set(argv[4:])
    REMOTE = Remote(sock_path, timeout_s)
    api = types.ModuleType("membench_oracle")
    api.load_production_file = load_production_file
    sys.modules["membench_oracle"] = api
    sys.meta_path.insert(0, ProductionFinder(names))
    sys.addaudithook(_refuse_workspace_code)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for key in [k for k in os.environ if k.startswith("PYTEST_") and k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"]:
        del os.environ[key]
    import pytest

    rootdir = os.path.dirname(oracle)
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", rootdir, "--confcutdir", rootdir,
                        "-c", os.devnull, "--junitxml", junit, oracle])
    try:
        REMOTE.request({"op": "shutdown"})
    except Exception:  # the channel may already be gone; the harness stops the sandbox anyway
        pass
    return int(code)
