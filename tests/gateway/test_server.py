"""The gateway against a real local upstream (membench.bench.scripted_model_server, loopback only): calls are
relayed with the real key added, streams pass through byte for byte, usage and failures land in
ModelCall events, and failures that are not the agent's mark the channel (the unit is excluded)."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.bus.blobs import get_blob
from membench.memory_systems.agent_tools import SessionMemoryTools
from membench.gateway.recording import RecordedAnswer, Recording
from membench.gateway.preflight import Target
from membench.gateway.server import GatewaySettings, ModelGateway, ModelUnavailable
from membench.memory_systems.base import MemoryContext, MemoryItem

INSIDE = Path(__file__).resolve().parents[2] / "membench" / "agents" / "inside"
KEY = "sk-test-7f3a9c0d1e2b"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path):
        super().__init__("gateway", timeout=30)
        self._path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def post(channel, path: str, body: dict, headers: dict | None = None) -> tuple[int, bytes]:
    connection = UnixHTTPConnection(channel.socket_path)
    connection.request("POST", path, body=json.dumps(body).encode(),
                       headers={"Content-Type": "application/json", "Authorization": "Bearer placeholder",
                                "x-api-key": "placeholder", **(headers or {})})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


class Events(list):
    def __call__(self, kind, payload, visibility="agent"):
        self.append((kind, payload, visibility))

    def of(self, kind):
        return [p for k, p, _ in self if k == kind]


# the target a run configured for its agent: what the gateway probes after a call fails (preflight.py)
AGENT_TARGET = Target("openai", "chat_completions", "m", "agent", "--agent openai:m")


def open_channel(settings: GatewaySettings, tmp_path: Path, memory=None, replay=None, targets=()):
    events = Events()
    gateway = ModelGateway(settings, blob_dir=tmp_path / "blobs", replay=replay, targets=targets)
    return gateway.open_channel("suite/task/B0/1", events, memory), events


SCRIPT = {"sessions": [{"when": "fix the bug", "files": {"a.py": "x = 1\n"}, "slots": {}, "say": "Fixed."}]}


def test_a_json_call_is_relayed_with_the_real_key_and_recorded(tmp_path):
    with ScriptedUpstream(SCRIPT) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, {"*": KEY}, record=True), tmp_path)
        with channel:
            request = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": "fix the bug"}]}
            status, body = post(channel, "/v1/chat/completions", request)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["tool_calls"]
    seen = upstream.requests[0]["headers"]
    assert seen["Authorization"] == f"Bearer {KEY}" and "x-api-key" not in {k.lower() for k in seen}
    (call,) = events.of("ModelCall")
    assert call["status"] == "ok" and call["api"] == "chat_completions" and call["provider"] == "openai"
    assert call["model"] == "gpt-5-mini" and not call["streamed"] and call["recorded"]
    answer = json.loads(body)["usage"]
    assert (call["input_tokens"], call["output_tokens"]) == (answer["prompt_tokens"], answer["completion_tokens"])
    assert call["price"] == "gpt-5-mini*" and call["cost_usd"] > 0
    assert get_blob(tmp_path / "blobs", call["response_digest"]) == body
    assert json.loads(get_blob(tmp_path / "blobs", call["request_digest"])) == request
    assert KEY.encode() not in b"".join(p.read_bytes() for p in (tmp_path / "blobs").iterdir())


@pytest.mark.parametrize("path,provider", [("/v1/responses", "openai"), ("/v1/messages", "anthropic"),
                                           ("/v1/chat/completions", "openai")])
def test_a_stream_passes_through_byte_for_byte_with_its_usage(tmp_path, path, provider):
    request = {"model": "m", "stream": True, "input": [{"role": "user", "content": "fix the bug"}],
               "messages": [{"role": "user", "content": "fix the bug"}]}
    with ScriptedUpstream(SCRIPT) as upstream:
        direct = http.client.HTTPConnection("127.0.0.1", int(upstream.base_url.split(":")[2].split("/")[0]))
        direct.request("POST", path, body=json.dumps(request).encode(), headers={"Content-Type": "application/json"})
        expected = direct.getresponse().read()
        channel, events = open_channel(GatewaySettings({provider: upstream.base_url}, {provider: KEY}), tmp_path)
        with channel:
            status, body = post(channel, path, request)
    assert status == 200 and body == expected
    (call,) = events.of("ModelCall")
    assert call["streamed"] and call["chunks"] >= 3 and call["provider"] == provider
    assert call["input_tokens"] > 0 and call["output_tokens"] > 0 and not call["recorded"]
    header = upstream.requests[-1]["headers"]
    assert (header.get("x-api-key") if provider == "anthropic" else header.get("Authorization")).endswith(KEY)


@pytest.mark.parametrize("status,expected,fails,tries", [(503, "upstream_error", True, 3),
                                                         (429, "upstream_error", True, 3),
                                                         (400, "client_error", False, 1)])
def test_upstream_errors_are_recorded_and_only_theirs_exclude_the_unit(tmp_path, status, expected, fails, tries):
    """An outage (every call, the gateway's probe too, answered 5xx or 429) excludes after the
    retries; a 4xx is the request's own, never retried."""
    with ScriptedUpstream(status=status) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}), tmp_path, targets=[AGENT_TARGET])
        with channel:
            got, _ = post(channel, "/v1/chat/completions", {"model": "m", "messages": []})
    assert got == status
    (call,) = events.of("ModelCall")
    assert call["status"] == expected and call["http_status"] == status
    assert isinstance(channel.failure, ModelUnavailable) == fails
    probes = 1 if fails else 0
    assert len(upstream.requests) == tries + probes
    if fails:
        assert "through 3 attempts" in str(channel.failure) and "probe failed too" in str(channel.failure)


def test_a_silent_upstream_is_a_timeout_and_a_closed_port_is_unreachable(tmp_path):
    with ScriptedUpstream(SCRIPT, delay_s=2.0) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, timeout_s=0.3, retries=1), tmp_path,
                                       targets=[AGENT_TARGET])
        with channel:
            status, body = post(channel, "/v1/chat/completions", {"model": "m", "messages": []})
            again, _ = post(channel, "/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 504 and "did not answer within 0.3 s" in json.loads(body)["error"]["message"]
    calls = sorted(events.of("ModelCall"), key=lambda c: c["call_id"])
    assert [c["status"] for c in calls] == ["timeout", "upstream_error"]  # the second fails fast
    assert again == 503 and "0.3 s" in str(channel.failure)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    channel, events = open_channel(GatewaySettings({"*": f"http://127.0.0.1:{port}/v1"}), tmp_path,
                                   targets=[AGENT_TARGET])
    with channel:
        status, _ = post(channel, "/v1/responses", {"model": "m", "input": []})
    assert status == 502 and events.of("ModelCall")[0]["status"] == "upstream_unreachable"
    assert f"127.0.0.1:{port}" in str(channel.failure)


def test_replay_answers_in_recorded_order_and_a_miss_is_kept_as_the_agents_divergence(tmp_path):
    blobs = tmp_path / "blobs"
    with ScriptedUpstream(SCRIPT) as upstream:  # record two answers to the same request
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, record=True), tmp_path)
        request = {"model": "m", "messages": [{"role": "user", "content": "fix the bug"}]}
        with channel:
            first = post(channel, "/v1/chat/completions", request)[1]
            follow = {"model": "m", "messages": [{"role": "user", "content": "fix the bug"},
                                                 {"role": "assistant", "content": "ok"}]}
            second = post(channel, "/v1/chat/completions", follow)[1]
    calls = events.of("ModelCall")
    answers = {("suite/task/B0/1", c["match_digest"]): [RecordedAnswer(200, False, c["response_digest"])]
               for c in calls}
    recording = Recording(blobs, answers, "rs-recorded")
    channel, events = open_channel(GatewaySettings(), tmp_path, replay=recording)
    with channel:
        assert post(channel, "/v1/chat/completions", {**request, "metadata": {"user": "other"}})[1] == first
        assert post(channel, "/v1/chat/completions", follow)[1] == second
        status, body = post(channel, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user",
                                                                                          "content": "new"}]})
    assert status == 400 and "no recorded answer" in json.loads(body)["error"]["message"]
    replayed = events.of("ModelCall")
    assert [c["status"] for c in replayed] == ["ok", "ok", "replay_miss"]
    assert [c["mode"] for c in replayed] == ["replay"] * 3
    assert [c["response_digest"] for c in replayed[:2]] == [c["response_digest"] for c in calls]
    assert channel.failure is None  # the agent's divergence (its session fails), never an exclusion it chose
    assert json.loads(get_blob(blobs, replayed[2]["request_digest"]))["messages"][0]["content"] == "new"


def memory_tools():
    fact = MemoryItem("B5:e1", "fact", "The default currency code is ZORKMIDS.")
    other = MemoryItem("B5:e2", "fact", "Amounts are integer cents.")
    shown = MemoryContext((other,), ("B5:e2",), 500)
    return SessionMemoryTools(lambda query: MemoryContext((fact,), ("B5:e1", "B5:e2"), 500), shown, 500)


def test_memory_tools_through_the_relay_and_the_mcp_server(tmp_path):
    """launch.py and mcp_memory.py as the sandbox runs them, here on the host: the MCP client's
    calls reach the memory system and each is a MemoryRead with what it returned."""
    tools = memory_tools()
    channel, events = open_channel(GatewaySettings({"*": "http://127.0.0.1:9/v1"}), tmp_path, memory=tools)
    tools.emit = channel.emit
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "search_memory", "arguments": {"query": "default currency"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_memory", "arguments": {"id": "B5:e2"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get_memory", "arguments": {"id": "nope"}}},
    ]
    with channel:
        done = subprocess.run(
            [sys.executable, str(INSIDE / "launch.py"), "--listen", str(port), "--socket", str(channel.socket_path),
             "--", sys.executable, str(INSIDE / "mcp_memory.py")],
            input="".join(json.dumps(m) + "\n" for m in messages), capture_output=True, text=True, timeout=60,
            env={"MEMBENCH_GATEWAY_URL": f"http://127.0.0.1:{port}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert sorted(replies) == [1, 2, 3, 4, 5]  # the notification got no answer
    assert replies[1]["result"]["serverInfo"]["name"] == "membench-memory"
    assert {t["name"] for t in replies[2]["result"]["tools"]} == {"search_memory", "get_memory"}
    assert "ZORKMIDS" in replies[3]["result"]["content"][0]["text"]
    assert "integer cents" in replies[4]["result"]["content"][0]["text"]
    assert replies[5]["result"]["content"][0]["text"] == "No memories found."
    reads = events.of("MemoryRead")
    assert [r["admitted_ids"] for r in reads] == [["B5:e1"], ["B5:e2"], []]
    assert reads[0]["query"]["text"] == "search_memory: default currency" and "ZORKMIDS" in reads[0]["context"]["text"]
    assert not events.of("ModelCall")


def test_other_paths_are_answered_by_the_gateway_as_the_agents_own(tmp_path):
    channel, events = open_channel(GatewaySettings({"*": "http://127.0.0.1:9/v1"}), tmp_path)
    with channel:
        connection = UnixHTTPConnection(channel.socket_path)
        connection.request("HEAD", "/api/hello")
        assert connection.getresponse().status == 200
        connection.close()
        assert post(channel, "/v1/models", {})[0] == 404
        assert post(channel, "/membench/memory/search", {"query": "x"})[0] == 404  # no memory tools here
    # the unserved POST is the agent's own error on the record; nothing was forwarded, nothing excludes
    (call,) = events.of("ModelCall")
    assert (call["status"], call["http_status"]) == ("client_error", 404) and "/v1/models" in call["error"]
    assert channel.failure is None


def test_closing_a_channel_cuts_a_call_in_flight_without_blaming_the_model(tmp_path):
    """The agent's session ended (wall-clock kill) while a call waited on the upstream: close()
    returns without waiting for the answer, and the call is `incomplete`, not a model failure."""
    import threading

    with ScriptedUpstream(SCRIPT, delay_s=3.0) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, timeout_s=60), tmp_path)
        caller = threading.Thread(target=lambda: _swallow(post, channel, "/v1/chat/completions",
                                                          {"model": "m", "messages": []}), daemon=True)
        caller.start()
        while not upstream.requests:
            threading.Event().wait(0.02)
        channel.close()
        (call,) = events.of("ModelCall")  # emitted before close() returned
    assert call["status"] == "incomplete" and channel.failure is None


def _swallow(fn, *args):
    try:
        fn(*args)
    except OSError:
        pass


def test_a_transient_429_is_retried_and_a_requests_own_429_replays_as_its_failure(tmp_path):
    """The gateway retries before the agent sees anything: a rate limit that clears is an answer
    (`ok`, one call, nothing excluded). A 429 only this request meets (the probe of the configured
    model is answered) is relayed as the request's failure, recorded, and replayed as the same
    failure."""
    with ScriptedUpstream(SCRIPT, fail_first=1) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}), tmp_path, targets=[AGENT_TARGET])
        with channel:
            status, _ = post(channel, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user",
                                                                                           "content": "fix the bug"}]})
    assert status == 200 and channel.failure is None and len(upstream.requests) == 2
    assert [c["status"] for c in events.of("ModelCall")] == ["ok"]

    request = {"model": "m", "messages": [{"role": "user", "content": "BIG " * 100}]}
    with ScriptedUpstream(SCRIPT, too_large="BIG") as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, record=True), tmp_path,
                                       targets=[AGENT_TARGET])
        with channel:
            status, body = post(channel, "/v1/chat/completions", request)
    assert status == 429 and "Request too large" in json.loads(body)["error"]["message"]
    (call,) = events.of("ModelCall")
    assert (call["status"], call["recorded"], channel.failure) == ("request_failed", True, None)
    recording = Recording(tmp_path / "blobs", {("suite/task/B0/1", call["match_digest"]): [
        RecordedAnswer(429, False, call["response_digest"])]}, "rs")
    channel, replayed = open_channel(GatewaySettings(), tmp_path, replay=recording)
    with channel:
        assert post(channel, "/v1/chat/completions", request) == (429, body)
    assert [(c["status"], c["http_status"]) for c in replayed.of("ModelCall")] == [("request_failed", 429)]


def test_a_session_that_ends_during_a_retrys_wait_stops_it_at_once(tmp_path):
    """The wait before a retry ends with the session: the call is `incomplete` (cut by the session's
    end, never the model's failure) and closing the channel does not wait out the backoff."""
    import threading
    import time

    with ScriptedUpstream(status=503) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, backoff_s=20), tmp_path,
                                       targets=[AGENT_TARGET])
        caller = threading.Thread(target=_swallow, args=(post, channel, "/v1/chat/completions",
                                                         {"model": "m", "messages": []}))
        caller.start()
        deadline = time.monotonic() + 10
        while not upstream.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        channel.close()
        caller.join(10)
    assert time.monotonic() - started < 5
    assert [c["status"] for c in events.of("ModelCall")] == ["incomplete"] and channel.failure is None
    assert len(upstream.requests) == 1  # no retry after the session ended
