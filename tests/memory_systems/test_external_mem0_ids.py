"""The external adapter maps a Namespace onto mem0-style user_id / agent_id / run_id. A real HTTP
server written for this test plays a mem0-style store: it keys memories by user_id ONLY (as Mem0's
add/search do), so the namespaces stay apart only if the ids membench sends do."""

from __future__ import annotations

import re

import pytest

from membench.memory_systems.base import MemorySetup, Namespace
from membench.memory_systems.external import mem0_ids
from membench.memory_systems.registry import MEMORY_SYSTEMS, make_memory, register_external
from tests.memory_systems.memory_server import json_memory_server
from tests.memory_systems.test_dreambench_conditions import S1

NAME = "mem0-ids-test"


@pytest.fixture
def mem0_server():
    by_user: dict[str, list[dict]] = {}
    received: list[dict] = []

    def respond(req: dict) -> dict:
        received.append(req)
        store = by_user.setdefault(req["user_id"], [])  # mem0: memories belong to a user_id
        if req["op"] == "write":
            new = [{"id": f"m{len(store) + k}", "text": e["text"], "type": "literal",
                    "provenance": [e["event_id"]], "scope": e["scope"]}
                   for k, e in enumerate(req["events"]) if e["source_event_id"]]
            store += new
            return {"items": new}
        return {"items": store[-6:]}  # memory_context=6, as the paper's hosted configuration

    with json_memory_server(respond) as port:
        register_external(NAME, url=f"http://127.0.0.1:{port}/v1/memories")
        try:
            yield received
        finally:
            MEMORY_SYSTEMS.pop(NAME, None)


def test_the_server_receives_the_documented_ids(mem0_server) -> None:
    ns = Namespace("rs-1", NAME, 3, "c1-tab-regulator-trailer")
    mem = make_memory(NAME, ns, MemorySetup(event_scopes={"e1": ("tabular/csvout.py", "to_csv")}))
    stored = mem.write(S1)
    mem.read("regulator trailer", 2000)
    assert [r["op"] for r in mem0_server] == ["write", "read"]
    for req in mem0_server:
        assert req["agent_id"] == f"mb-{NAME}" and req["run_id"] == "mb-rs-1"
        assert req["metadata"] == {"run_set": "rs-1", "condition": NAME, "seed": 3, "sequence": "c1-tab-regulator-trailer"}
        assert req["user_id"].startswith(f"mb-rs-1-{NAME}-s3-c1-tab-regulator-trailer-")
        assert re.fullmatch(r"[A-Za-z0-9._-]+", req["user_id"])  # colon- and slash-free
        assert req["user_id"] == mem0_ids(ns)["user_id"]
    sent = {e["source_event_id"]: e["scope"] for e in mem0_server[0]["events"] if e["source_event_id"]}
    assert sent == {"e1": ["tabular/csvout.py", "to_csv"], "e2": []}  # declared scope of delivered events
    assert stored[0].scope == ("tabular/csvout.py", "to_csv") and stored[0].provenance_event_ids


def test_every_namespace_component_changes_the_user_id_and_isolates(mem0_server) -> None:
    base = Namespace("rs", NAME, 1, "seq")
    make_memory(NAME, base).write(S1)
    assert make_memory(NAME, base).read("q", 2000).items  # the same namespace reads it back
    others = [Namespace("rs2", NAME, 1, "seq"), Namespace("rs", NAME, 2, "seq"), Namespace("rs", NAME, 1, "seq2"),
              Namespace("rs:x", NAME, 1, "seq"), Namespace("rs/x", NAME, 1, "seq")]
    users = {mem0_ids(ns)["user_id"] for ns in [base, *others]}
    assert len(users) == len(others) + 1  # "rs:x" and "rs/x" sanitize alike but the digest differs
    for ns in others:
        assert make_memory(NAME, ns).read("q", 2000).items == ()
    assert mem0_ids(Namespace("rs", "B5", 1, "seq"))["user_id"] != mem0_ids(base)["user_id"]


def test_a_failing_adapter_keeps_its_own_error_text_redacted():
    """The store's own words ("vector db down") reach the error the run records; a key in
    them does not."""
    import http.server
    import threading

    from membench.memory_systems.external import ExternalMemoryError

    class Down(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b"vector db down (api_key=sk-live-0123456789abcdef)"
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    register_external("down-test", url=f"http://127.0.0.1:{server.server_port}/v1/memories")
    try:
        mem = make_memory("down-test", Namespace("rs", "down-test", 1, "seq"), MemorySetup())
        with pytest.raises(ExternalMemoryError) as raised:
            mem.read("anything", 2000)
    finally:
        MEMORY_SYSTEMS.pop("down-test", None)
        server.shutdown()
        server.server_close()
    message = str(raised.value)
    assert "HTTP 503" in message and "vector db down" in message
    assert "sk-live-0123456789abcdef" not in message and "[redacted]" in message
