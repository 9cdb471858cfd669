"""The narrow channel between an oracle's tests and the code under test (docs/design.md §6).

The two run in separate sandboxed processes. The oracle's process holds proxies; the production
process holds the real objects. They exchange length-prefixed JSON messages over a Unix socket:
a 4-byte big-endian length, then UTF-8 JSON. Nothing is ever unpickled or evaluated: a value
crosses as plain data, or as a reference (`ref`) that the production side resolves.

Values, as tagged JSON:
- None, bool, int, float, str: themselves;
- {"t": "list"|"tuple"|"set"|"frozenset", "v": [...]}, {"t": "bytes", "v": hex},
  {"t": "dict", "v": [[key, value], ...]} (keys are plain values too: a dict with other keys
  crosses as a reference);
- {"t": "ref", "id": n, "type": "module.Class", "callable": bool, "exception_class": bool,
  "bases": [builtin exception names]} — an object that stays in the production process;
- {"t": "module", "name": "pkg.mod"} — a production module.
Requests: {"op": "import"|"getattr"|"call"|"op"|"plain"|"load_file"|"shutdown", ...}; responses
{"ok": value} or {"error": {"type", "module", "message", "bases"}}. `op` is item access only
(getitem, setitem, delitem): comparisons, hashing, truthiness, length, membership, iteration and
conversions of a reference are never asked of production (docs/sandbox.md, threat model).

Plain values are exact built-in types on the oracle's side whatever the production side sends:
they are rebuilt from JSON, which has no other types. The production server sends an instance
of a subclass of a built-in type as its base type's content, read with the base type's own
methods, so a `str` subclass with its own `__eq__` arrives as a plain `str`.

This file is mounted read-only into both sandboxes and uses only the standard library.
"""

from __future__ import annotations

import _socket  # what the harness's sockets are (the `socket` module's class derives from it)
import struct

MAX_MESSAGE = 16 << 20  # a reply larger than this is refused, so neither side can exhaust the other
PLAIN_SCALARS = (type(None), bool, int, float, str)
CONTAINERS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
BUILTIN_CONTAINERS = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


# Top-level module names the oracle's process never takes from the code under test: the standard
# library, pytest and what it imports, and the harness itself (docs/sandbox.md, "shadowed modules").
TEST_RUNNER_MODULES = frozenset({
    "pytest", "_pytest", "pluggy", "iniconfig", "packaging", "exceptiongroup", "tomli", "py",
    "pygments", "colorama", "attr", "attrs", "_distutils_hack", "membench_harness", "membench_oracle",
})


def reserved_module_names() -> frozenset[str]:
    """Names a scored tree may contain but the oracle always resolves from the real installation."""
    import sys

    return frozenset(sys.stdlib_module_names) | TEST_RUNNER_MODULES | frozenset(sys.builtin_module_names)


def _json_codec():
    """(dumps, loads): the `json` module's own C encoder and scanner, driven here directly. The
    `json` package compiles regular expressions at import (so it imports `re` and `enum`), which is
    a tenth of a fast oracle runner's start in each of its two processes. The same C functions do
    the work `json.dumps(separators=(",", ":"))` and `json.loads` do; where this interpreter's
    accelerator is missing or differs, the `json` module itself is used."""
    try:
        import _json

        constants = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}

        def refuse(value: object) -> object:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

        class Context:  # what the C scanner reads of a `json.JSONDecoder`
            strict, object_hook, object_pairs_hook = True, None, None
            parse_float, parse_int, parse_constant = float, int, constants.__getitem__
            memo: dict = {}

        scan = _json.make_scanner(Context())  # type: ignore[arg-type]  # the stub names its own class; the C scanner reads Context's attributes
        make = lambda: _json.make_encoder({}, refuse, _json.encode_basestring_ascii, None,  # noqa: E731
                                          ":", ",", False, False, True)
        make()
    except (ImportError, TypeError, AttributeError):
        import json

        return (lambda value: json.dumps(value, separators=(",", ":"))), json.loads

    def dumps(value: object) -> str:
        return "".join(make()(value, 0))  # a fresh encoder: its circular-reference markers start empty

    def loads(text: str) -> object:
        body = text.strip(" \t\n\r")
        try:
            value, end = scan(body, 0)
        except StopIteration as exc:
            raise ValueError(f"Expecting value: char {exc.value}") from None
        if end != len(body):
            raise ValueError(f"Extra data: char {end}")
        return value

    return dumps, loads


dumps, loads = _json_codec()


class ChannelError(ConnectionError):
    """The other side broke the protocol, closed the channel, or sent too much."""


def send(sock: _socket.socket, message: dict) -> None:
    data = dumps(message).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise ChannelError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}")
    sock.sendall(struct.pack(">I", len(data)) + data)


def _read_exact(sock: _socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ChannelError("the other side closed the channel")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(sock: _socket.socket) -> dict:
    (size,) = struct.unpack(">I", _read_exact(sock, 4))
    if size > MAX_MESSAGE:
        raise ChannelError(f"message of {size} bytes exceeds {MAX_MESSAGE}")
    try:
        message = loads(_read_exact(sock, size).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ChannelError(f"malformed message: {exc}") from None
    if not isinstance(message, dict):
        raise ChannelError("malformed message: not an object")
    return message


def exception_bases(cls: type) -> list[str]:
    """The builtin exception classes `cls` derives from, nearest first (the oracle side rebuilds a
    class with the same name under the nearest of them, so `pytest.raises(ValueError)` still works)."""
    import builtins

    return [c.__name__ for c in cls.__mro__
            if c.__module__ == "builtins" and isinstance(c, type) and issubclass(c, BaseException)
            and getattr(builtins, c.__name__, None) is c]
