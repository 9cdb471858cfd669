"""The oracle ↔ production channel (membench/sandbox/harness): values cross as plain data or references,
exceptions keep their name and builtin base, and nothing crosses that is not plain data."""

from __future__ import annotations

import socket
import threading

import pytest

from membench.sandbox.harness import oracle_client, wire
from membench.sandbox.harness.production_server import Server


@pytest.fixture
def remote(tmp_path):
    """A production server over a real Unix socket, in a thread of this process."""
    path = str(tmp_path / "production.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    server = Server()

    def serve():
        conn, _ = listener.accept()
        with conn:
            server.serve_connection(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    oracle_client.REMOTE = oracle_client.Remote(path, timeout_s=10)
    yield oracle_client.REMOTE
    try:
        oracle_client.REMOTE.request({"op": "shutdown"})
    except wire.ChannelError:
        pass
    oracle_client.REMOTE = None
    thread.join(5)
    listener.close()


def _attr(module: str, name: str):
    return oracle_client.REMOTE.request({"op": "getattr", "target": {"t": "module", "name": module}, "name": name})


def test_plain_values_cross_as_values(remote):
    loads = _attr("json", "loads")
    assert isinstance(loads, oracle_client.Proxy)
    value = loads('{"a": [1, 2.5, null, true], "b": {"c": "d"}}')
    assert value == {"a": [1, 2.5, None, True], "b": {"c": "d"}} and type(value) is dict
    assert _attr("operator", "itemgetter")(0)((7, 8)) == 7
    assert _attr("builtins", "tuple")([1, 2]) == (1, 2)
    assert _attr("builtins", "frozenset")([3]) == frozenset({3})
    assert _attr("builtins", "bytes")([0, 255]) == b"\x00\xff"
    assert _attr("builtins", "dict")([(1, "x")]) == {1: "x"}  # non-string keys survive
    assert _attr("builtins", "dict")({(1, 2): "pair"}) == {(1, 2): "pair"}  # tuple keys, both ways


def test_objects_stay_in_the_production_process_as_references(remote):
    queue = _attr("collections", "deque")("abca")
    assert isinstance(queue, oracle_client.Proxy)
    assert queue[0] == "a" and queue.count("a") == 2  # item access and methods return plain data
    assert oracle_client.plain(queue) == ["a", "b", "c", "a"]  # production's list(), asked explicitly
    assert oracle_client.plain(queue, str) == "deque(['a', 'b', 'c', 'a'])"
    assert repr(queue).startswith("<production object collections.deque #")  # answered here
    assert queue == queue and hash(queue) == hash(queue)  # a reference equals only itself
    assert queue != _attr("collections", "deque")("abca")


def test_subclasses_of_builtin_types_cross_as_their_base_content(remote):
    counter = _attr("collections", "Counter")("abca")
    assert type(counter) is dict and counter == {"a": 2, "b": 1, "c": 1}
    point = _attr("collections", "namedtuple")("Point", "x y")(1, 2)
    assert type(point) is tuple and point == (1, 2)
    assert type(_attr("collections", "OrderedDict")([("k", [1])])) is dict

def test_exceptions_keep_their_name_and_builtin_base(remote):
    with pytest.raises(ValueError, match="invalid literal"):
        _attr("builtins", "int")("x")
    decode_error = _attr("json", "JSONDecodeError")
    assert issubclass(decode_error, ValueError) and decode_error.__name__ == "JSONDecodeError"
    with pytest.raises(decode_error):  # the production class, as the oracle names it
        _attr("json", "loads")("{")
    with pytest.raises(AttributeError):
        _attr("json", "no_such_name")


def test_exit_and_interrupt_from_production_cannot_end_the_test_session(remote):
    with pytest.raises(RuntimeError) as raised:
        _attr("sys", "exit")(0)
    assert type(raised.value).__name__ == "SystemExit" and not isinstance(raised.value, SystemExit)


def test_only_plain_data_is_passed_to_production_code(remote):
    with pytest.raises(TypeError, match="plain data only"):
        _attr("builtins", "len")(lambda: None)


def test_a_closed_channel_is_an_error_not_a_value(tmp_path):
    path = str(tmp_path / "gone.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def hang_up():
        conn, _ = listener.accept()
        conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    remote = oracle_client.Remote(path, timeout_s=5)
    with pytest.raises(wire.ChannelError, match="did not answer"):
        remote.request({"op": "import", "name": "json"})
    with pytest.raises(wire.ChannelError, match="unreachable"):  # and it stays broken
        remote.request({"op": "import", "name": "json"})
    thread.join(5)
    listener.close()


def test_an_oversized_message_is_refused(tmp_path):
    left, right = socket.socketpair()
    with left, right:
        left.sendall((wire.MAX_MESSAGE + 1).to_bytes(4, "big"))
        with pytest.raises(wire.ChannelError, match="exceeds"):
            wire.receive(right)
