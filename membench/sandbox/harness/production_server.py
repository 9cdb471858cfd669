"""Runs in the production sandbox: imports and calls the code under test on behalf of the oracle's
tests, which run in another sandboxed process and reach it only through `wire`'s channel.

Started as `python3 -I -B -c <bootstrap> SOCKET` with the scored checkout at /workspace (first on
sys.path). It serves one connection at a time until the oracle closes it or says `shutdown`.
Whatever the code under test does here — read files, walk frames, patch modules, exit — happens in
this process: the oracle's file, its process and its results are not in this sandbox.
"""

from __future__ import annotations

import importlib
import operator
import _socket  # the C module: `socket` adds selectors and enum to every start
import os
import sys
import types

TYPE_CHECKING = False  # typing costs start-up CPU in the sandbox: annotations only (mypy takes this as True)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

from . import wire

WORKSPACE = "/workspace"
MAX_DEPTH = 64

# Item access is the only operator the oracle may ask of a reference: it is a call that returns
# data. Comparisons, hashing, truthiness, length, membership, iteration and conversions decide
# verdicts, so the oracle's side never sends them (docs/sandbox.md, "always-equal values").
OPERATIONS: dict[str, Callable[..., Any]] = {"getitem": operator.getitem, "setitem": operator.setitem, "delitem": operator.delitem}
# `membench_oracle.plain(ref, kind)` and `length(ref)`: the oracle asks explicitly for
# production's own conversion, and gets it as plain data
PLAIN_KINDS: dict[str, Callable[[Any], Any]] = {"list": list, "tuple": tuple, "dict": dict, "set": set, "frozenset": frozenset, "str": str,
               "bytes": bytes, "int": int, "float": float, "bool": bool, "len": len}
EXACT_SCALARS = (type(None), bool, int, float, str)


# Any, not object: the value is of any class, read with its base type's unbound methods after an
# issubclass test on type(value), which a type checker does not carry over to `value`
def _base_content(value: Any) -> tuple[str, Any] | None:
    """(base type, content) of an instance of a built-in data type or a subclass of one, read with
    the base type's own methods (never the subclass's `__str__`, `__iter__`, `items`...); None for
    anything else. `type(value)` is the real class: `__class__` can lie, `type()` cannot."""
    kind = type(value)
    if issubclass(kind, str):
        return "scalar", str.__str__(value)  # an exact str copy of a subclass instance's characters
    if issubclass(kind, int):
        return "scalar", int.__int__(value)
    if issubclass(kind, float):
        return "scalar", float.__float__(value)
    for base in (bytes, bytearray):
        if issubclass(kind, base):
            return "bytes", base.hex(value)
    for container in (list, tuple, set, frozenset):
        if issubclass(kind, container):
            return wire.CONTAINERS[container], list(container.__iter__(value))
    if issubclass(kind, dict):
        return "dict", list(dict.items(value))
    return None


class Server:
    def __init__(self) -> None:
        self.objects: dict[int, object] = {}
        self.ids: dict[int, int] = {}  # id(obj) -> ref id, so one object keeps one reference

    def ref(self, value: Any) -> dict:
        key = id(value)
        if key not in self.ids:
            self.ids[key] = len(self.objects) + 1
            self.objects[self.ids[key]] = value
        kind = type(value)
        is_exception_class = isinstance(value, type) and issubclass(value, BaseException)
        return {"t": "ref", "id": self.ids[key], "type": f"{kind.__module__}.{kind.__qualname__}",
                "callable": callable(value), "exception_class": is_exception_class,
                "name": f"{value.__module__}.{value.__qualname__}" if is_exception_class else None,
                "bases": wire.exception_bases(value) if is_exception_class else []}

    def encode(self, value: object, depth: int = 0) -> object:
        """Plain data as exact built-in types (a subclass instance as its base type's content), else
        a reference. The oracle's side rebuilds values from JSON, so this is for fidelity, not trust:
        code under test can patch this very method, and still only reach the oracle as JSON."""
        kind = type(value)
        if any(kind is t for t in EXACT_SCALARS):
            return value
        if depth > MAX_DEPTH:
            return self.ref(value)
        content = _base_content(value)
        if content is None:
            if isinstance(value, types.ModuleType) and sys.modules.get(value.__name__) is value:
                return {"t": "module", "name": value.__name__}
            return self.ref(value)
        tag, data = content
        if tag == "scalar":
            return data
        if tag == "bytes":
            return {"t": "bytes", "v": data}
        if tag == "dict":
            pairs = [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in data]
            if any(isinstance(k, dict) and k.get("t") == "ref" for k, _ in pairs):  # keys must stay hashable data
                return self.ref(value)
            return {"t": "dict", "v": pairs}
        items = [self.encode(v, depth + 1) for v in data]
        if tag in ("set", "frozenset") and any(isinstance(v, dict) and v.get("t") == "ref" for v in items):
            return self.ref(value)  # members must stay hashable data
        return {"t": tag, "v": items}

    def decode(self, value: object) -> Any:
        if not isinstance(value, dict):
            return value
        tag = value.get("t")
        if tag in wire.BUILTIN_CONTAINERS:
            return wire.BUILTIN_CONTAINERS[tag](self.decode(v) for v in value["v"])
        if tag == "bytes":
            return bytes.fromhex(value["v"])
        if tag == "dict":
            return {self.decode(k): self.decode(v) for k, v in value["v"]}
        if tag == "ref":
            return self.objects[value["id"]]
        if tag == "module":
            return importlib.import_module(value["name"])
        raise ValueError(f"unknown value tag {tag!r}")

    def handle(self, request: dict) -> object:
        op = request.get("op")
        if op == "import":
            return importlib.import_module(request["name"])
        if op == "getattr":
            target = self.decode(request["target"])
            try:
                return getattr(target, request["name"])
            except AttributeError:
                if not isinstance(target, types.ModuleType):
                    raise
                try:  # `from pkg import submodule`
                    return importlib.import_module(f"{target.__name__}.{request['name']}")
                except ModuleNotFoundError:
                    raise AttributeError(f"module {target.__name__!r} has no attribute {request['name']!r}") from None
        if op == "call":
            args = [self.decode(a) for a in request.get("args", [])]
            kwargs = {k: self.decode(v) for k, v in request.get("kwargs", {}).items()}
            return self.decode(request["target"])(*args, **kwargs)
        if op == "op":
            if request.get("name") not in OPERATIONS:
                raise ValueError(f"operation {request.get('name')!r} is not offered on references")
            args = [self.decode(a) for a in request.get("args", [])]
            return OPERATIONS[request["name"]](self.decode(request["target"]), *args)
        if op == "plain":
            return PLAIN_KINDS[request["kind"]](self.decode(request["target"]))
        if op == "load_file":
            return self.load_file(request["path"], request["name"])
        raise ValueError(f"unknown operation {op!r}")

    def load_file(self, rel: str, name: str) -> types.ModuleType:
        """A workspace file executed as a module named `name` (for tools a test drives, such as a
        generator script that is not part of a package)."""
        path = os.path.normpath(os.path.join(WORKSPACE, rel))
        if not path.startswith(WORKSPACE + os.sep):
            raise ValueError(f"{rel!r} is outside the workspace")
        import importlib.util  # only here: it imports contextlib, which no other request needs

        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {rel!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def serve_connection(self, conn: _socket.socket) -> bool:
        """Answer requests until the oracle closes the channel; False after `shutdown`."""
        while True:
            try:
                request = wire.receive(conn)
            except wire.ChannelError:
                return True
            if request.get("op") == "shutdown":
                return False
            try:
                reply = {"ok": self.encode(self.handle(request))}
            except BaseException as exc:  # everything the code under test raises goes back as data
                kind = type(exc)
                reply = {"error": {"type": kind.__qualname__, "module": kind.__module__,
                                   "message": str(exc)[:4000], "bases": wire.exception_bases(kind)}}
            try:
                wire.send(conn, reply)
            except (wire.ChannelError, OSError) as exc:
                try:
                    wire.send(conn, {"error": {"type": "ChannelError", "module": "membench", "message": str(exc),
                                               "bases": ["ConnectionError", "OSError", "Exception"]}})
                except OSError:
                    return True


def main(argv: list[str]) -> int:
    sock_path = argv[0]
    sys.path.insert(0, WORKSPACE)
    os.chdir(WORKSPACE)
    listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    staging = sock_path + ".starting"
    listener.bind(staging)
    os.chmod(staging, 0o777)  # the oracle's sandbox runs as another uid
    listener.listen(1)
    # the harness starts the oracle when SOCKET exists: it appears only once it is ready to accept
    os.rename(staging, sock_path)
    server = Server()
    keep_going = True
    while keep_going:
        fd, _ = listener._accept()  # type: ignore[attr-defined]  # the C socket's accept, as socket.py calls it
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)
        try:
            keep_going = server.serve_connection(conn)
        finally:
            conn.close()
    return 0
