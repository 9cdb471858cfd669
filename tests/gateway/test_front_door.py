"""The gateway's front door against a hostile agent, over real sockets: the channel's Unix socket on
one side, a real local upstream (membench.bench.scripted_model_server, which records every request target and
header it received) on the other. Each attack has a control that runs it with the defence bypassed
and shows it works there, so each defence's test can fail."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.gateway import server as gateway_server
from membench.gateway.preflight import Target, probe
from membench.gateway.rate_shares import OverShare, RateLimit, RateShares
from membench.gateway.server import GatewaySettings, ModelGateway, ModelUnavailable
from membench.gateway.wire_apis import Endpoint, PathRefused, api_of, endpoint_of
from tests.gateway.test_server import KEY, SCRIPT, Events, open_channel, post

HOSTILE_TARGETS = [
    "/v1/../../admin/keys/chat/completions",
    "/v1/organization/api_keys;/chat/completions",
    "/v1/chat/completions?api_key=x&redirect=http://evil.example/",
    "/v1/%2e%2e/admin/chat/completions",
    "/v1/admin%2Fkeys/chat/completions",
    "/v1//chat/completions",
    "//v1/chat/completions",
    "/v1/./chat/completions",
    "/V1/chat/completions",
    "/v1/chat/completions/",
    "/v1/messages?beta=true&x=1",
    "http://evil.example/v1/chat/completions",
]
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "fix the bug"}]}


def _raw_post(channel, target: str, body: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    """A POST whose request target goes out byte for byte (http.client would keep it too; this makes it plain)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(channel.socket_path))
        sock.sendall(f"POST {target} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                     f"Authorization: Bearer placeholder\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]), answer


def _permissive_endpoint(target: str) -> Endpoint:
    """The check the gateway had: a known suffix anywhere, and the agent's path after /v1 forwarded."""
    found = api_of(target)
    if found is None:
        raise PathRefused("no such endpoint", 404)
    return Endpoint(found[0], found[1], target[3:] if target.startswith("/v1/") else target, "")


def test_only_exact_endpoints_are_served():
    assert endpoint_of("/v1/chat/completions") == Endpoint("chat_completions", "openai", "/chat/completions", "")
    assert endpoint_of("/v1/messages?beta=true") == Endpoint("messages", "anthropic", "/messages", "beta=true")
    assert endpoint_of("/v1/embeddings").api == "embeddings" and endpoint_of("/v1/responses").api == "responses"
    reasons = {}
    for target in HOSTILE_TARGETS + ["/v1/models"]:
        with pytest.raises(PathRefused) as refused:
            endpoint_of(target)
        reasons[target] = (refused.value.http_status, str(refused.value))
    assert "dot-segment" in reasons["/v1/../../admin/keys/chat/completions"][1]
    assert "dot-segment" in reasons["/v1/%2e%2e/admin/chat/completions"][1]
    assert "';' parameter" in reasons["/v1/organization/api_keys;/chat/completions"][1]
    assert "no query string" in reasons["/v1/chat/completions?api_key=x&redirect=http://evil.example/"][1]
    assert "encoded or backward slash" in reasons["/v1/admin%2Fkeys/chat/completions"][1]
    assert "'//'" in reasons["/v1//chat/completions"][1] and "origin-form" in reasons[HOSTILE_TARGETS[-1]][1]
    assert reasons["/v1/models"][0] == 404 and reasons["/v1/./chat/completions"][0] == 400


@pytest.mark.parametrize("defended", [True, False], ids=["defended", "control-suffix-check"])
def test_a_hostile_path_never_reaches_the_upstream_with_the_key(tmp_path, monkeypatch, defended):
    if not defended:
        monkeypatch.setattr(gateway_server, "endpoint_of", _permissive_endpoint)
    with ScriptedUpstream(SCRIPT) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, {"*": KEY}), tmp_path)
        with channel:
            statuses = [_raw_post(channel, target, json.dumps(REQUEST).encode())[0] for target in HOSTILE_TARGETS]
            honest, _ = _raw_post(channel, "/v1/chat/completions", json.dumps(REQUEST).encode())
    seen = [r["target"] for r in upstream.requests]
    keyed = [r["target"] for r in upstream.requests if KEY in json.dumps(r["headers"])]
    if not defended:  # the attack as it was: the agent's path reached the provider with the real key
        assert "/v1/../../admin/keys/chat/completions" in keyed
        assert "/v1/organization/api_keys;/chat/completions" in keyed
        assert any("api_key=x" in t for t in keyed)
        return
    assert seen == keyed == ["/v1/chat/completions"] and honest == 200  # only the honest call went out
    assert statuses[:3] == [400, 400, 400] and set(statuses) == {400, 404}
    calls = events.of("ModelCall")
    assert [(c["status"], c["http_status"]) for c in calls[:-1]] == [("client_error", s) for s in statuses]
    assert all("not forwarded" in c["error"] for c in calls[:-1]) and calls[-1]["status"] == "ok"
    assert channel.failure is None  # the agent's own errors: its cell is scored, nothing excluded


def test_the_upstream_path_is_the_configured_root_plus_the_fixed_suffix(tmp_path):
    with ScriptedUpstream(SCRIPT) as upstream:
        settings = GatewaySettings({"*": upstream.base_url.replace("/v1", "/proxy/v1")}, {"*": KEY})
        channel, _ = open_channel(settings, tmp_path)
        with channel:
            _raw_post(channel, "/v1/chat/completions", json.dumps(REQUEST).encode())
            _raw_post(channel, "/v1/messages?beta=true", json.dumps(REQUEST).encode())
    assert [r["target"] for r in upstream.requests] == ["/proxy/v1/chat/completions", "/proxy/v1/messages?beta=true"]


FRAMINGS = {
    "te-and-cl": b"Transfer-Encoding: chunked\r\nContent-Length: 12\r\n",
    "te-not-chunked": b"Transfer-Encoding: gzip, chunked\r\n",
    "te-twice": b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
    "cl-list": b"Content-Length: 12, 12\r\n",
    "cl-negative": b"Content-Length: -1\r\n",
    "cl-twice": b"Content-Length: 12\r\nContent-Length: 12\r\n",
}


def _framed(channel, headers: bytes, timeout: float) -> bytes:
    """A request with these framing headers and a body that is a chunk with no last-chunk after it:
    a server that reads it as chunked waits for the rest."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(channel.socket_path))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n" + headers + b"\r\n0005\r\nhello\r\n")
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except socket.timeout:
            return b"TIMEOUT " + answer
    return answer


@pytest.mark.parametrize("framing", sorted(FRAMINGS))
def test_a_malformed_framing_is_answered_400_at_once_and_closed(tmp_path, framing):
    with ScriptedUpstream(SCRIPT) as upstream:
        channel, _ = open_channel(GatewaySettings({"*": upstream.base_url}, {"*": KEY}), tmp_path)
        with channel:
            started = time.monotonic()
            answer = _framed(channel, FRAMINGS[framing], timeout=5.0)  # recv returned b"": closed by the gateway
            took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 400 ") and b"malformed request framing" in answer and took < 2.0
    assert b"Connection: close" in answer and not upstream.requests


def test_control_without_the_framing_check_te_and_cl_hangs_the_channel(tmp_path, monkeypatch):
    monkeypatch.setattr(gateway_server, "framing_problem", lambda headers: None)
    with ScriptedUpstream(SCRIPT) as upstream:
        channel, _ = open_channel(GatewaySettings({"*": upstream.base_url}, {"*": KEY}), tmp_path)
        with channel:
            answer = _framed(channel, FRAMINGS["te-and-cl"], timeout=1.0)
    assert answer == b"TIMEOUT "  # no answer at all until the client gave up


@pytest.mark.parametrize("cap,refused", [(4096, True), (64 << 20, False)], ids=["defended", "control-no-cap"])
def test_a_body_over_the_cap_is_refused_by_the_gateway_as_the_agents_413(tmp_path, cap, refused):
    big = {**REQUEST, "messages": [{"role": "user", "content": "fix the bug " + "x" * 200_000}]}
    with ScriptedUpstream(SCRIPT) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, {"*": KEY}, max_request_bytes=cap),
                                       tmp_path)
        with channel:
            status, body = post(channel, "/v1/chat/completions", big)
    if not refused:  # the body went out to the upstream
        assert status == 200 and len(upstream.requests[0]["body"]) > 200_000
        return
    assert status == 413 and "over the gateway's cap of 4096 bytes" in json.loads(body)["error"]["message"]
    assert not upstream.requests
    (call,) = events.of("ModelCall")
    assert (call["status"], call["http_status"], call["api"]) == ("client_error", 413, "chat_completions")
    assert channel.failure is None


def _first_answer(channel, request: bytes) -> bytes:
    """The first bytes the gateway answers to REQUEST, sent whole (head and as much body as given)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(channel.socket_path))
        sock.sendall(request)
        return sock.recv(65536)


def test_a_client_expecting_100_continue_is_told_413_before_it_sends_the_body(tmp_path):
    with ScriptedUpstream(SCRIPT) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, max_request_bytes=4096), tmp_path)
        with channel:
            answer = _first_answer(channel, b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\n"
                                            b"Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413 ") and not upstream.requests
    assert events.of("ModelCall")[0]["http_status"] == 413 and channel.failure is None


def test_a_chunked_body_over_the_cap_is_refused_too(tmp_path):
    with ScriptedUpstream(SCRIPT) as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, max_request_bytes=4096), tmp_path)
        with channel:
            answer = _first_answer(channel, b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\n"
                                            b"Transfer-Encoding: chunked\r\n\r\n"
                                            + b"%x\r\n%s\r\n" % (8000, b"x" * 8000))
    assert answer.startswith(b"HTTP/1.1 413 ") and not upstream.requests
    assert events.of("ModelCall")[0]["status"] == "client_error" and channel.failure is None


def _old_upload_classification(monkeypatch):
    """The gateway as it was: any error while sending the request meant the upstream was unreachable,
    and an unreachable upstream excluded the unit at once (no retry, no probe of the configured
    model — the later defence, which on its own would make this call the agent's failure too)."""
    def unreachable(self, exc):
        self.channel.fail(ModelUnavailable(f"cannot reach the upstream: {exc}"))
        self._refuse(502, "upstream_unreachable", "model_unavailable", f"cannot reach the upstream: {exc}")

    monkeypatch.setattr(gateway_server, "_answer_after_cut", lambda connection: None)
    monkeypatch.setattr(gateway_server._ModelCall, "_upload_refused", unreachable)


@pytest.mark.parametrize("defended", [True, False], ids=["defended", "control-epipe-is-unreachable"])
def test_an_upload_a_proxy_refuses_is_the_agents_4xx_not_an_exclusion(tmp_path, monkeypatch, defended):
    if not defended:
        _old_upload_classification(monkeypatch)
    big = {**REQUEST, "messages": [{"role": "user", "content": "fix the bug " + "x" * (8 << 20)}]}
    with ScriptedUpstream(SCRIPT, max_body=64 << 10) as upstream:  # the gateway's own cap (32 MiB) lets it pass
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, {"*": KEY}), tmp_path)
        with channel:
            status, _ = post(channel, "/v1/chat/completions", big)
    assert upstream.requests and upstream.requests[0]["refused"] > 8 << 20  # the proxy refused it, unread
    (call,) = events.of("ModelCall")
    if not defended:  # the attack as it was: a refused upload excluded the agent's cell
        assert call["status"] == "upstream_unreachable" and isinstance(channel.failure, ModelUnavailable)
        return
    assert status == 413 and (call["status"], call["http_status"]) == ("client_error", 413)
    assert channel.failure is None


class ResettingUpstream:
    """A listener that takes the request head, reads a little of the body and resets the connection
    (SO_LINGER 0) without answering: an upload cut short with nothing to read."""

    def __init__(self):
        self.heads: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                self.heads.append(conn.recv(65536).split(b"\r\n\r\n")[0])
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")

    def __enter__(self) -> "ResettingUpstream":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()


@pytest.mark.parametrize("defended", [True, False], ids=["defended", "control-reset-is-unreachable"])
def test_a_reset_while_sending_the_body_is_the_agents_4xx(tmp_path, monkeypatch, defended):
    if not defended:
        _old_upload_classification(monkeypatch)
    big = {**REQUEST, "messages": [{"role": "user", "content": "x" * (8 << 20)}]}
    with ResettingUpstream() as upstream:
        channel, events = open_channel(GatewaySettings({"*": upstream.base_url}, {"*": KEY}), tmp_path)
        with channel:
            status, body = post(channel, "/v1/chat/completions", big)
    assert upstream.heads and upstream.heads[0].startswith(b"POST /v1/chat/completions ")
    (call,) = events.of("ModelCall")
    if not defended:
        assert call["status"] == "upstream_unreachable" and isinstance(channel.failure, ModelUnavailable)
        return
    assert status == 413 and "refused the upload" in json.loads(body)["error"]["message"]
    assert (call["status"], call["http_status"]) == ("client_error", 413) and channel.failure is None


def _flood(channel, n: int) -> list[int]:
    statuses: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        status, _ = post(channel, "/v1/chat/completions", REQUEST)
        with lock:
            statuses.append(status)
    threads = [threading.Thread(target=one) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(statuses)


@pytest.mark.parametrize("defended", [True, False], ids=["defended", "control-no-shares"])
def test_one_unit_flooding_the_key_cannot_spend_another_units_limit(tmp_path, defended):
    """The key allows 6 requests a minute, shared by two concurrent units. The attacker's flood of 8
    calls is cut at its share (3) by the gateway — its own 429s, its cell still scored — and the
    honest unit's calls then find the provider's window open."""
    limits = {"*": RateLimit(requests_per_minute=6)} if defended else {}
    with ScriptedUpstream(SCRIPT, rpm=6) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": KEY}, rate_limits=limits, rate_units=2),
                               blob_dir=tmp_path / "blobs")
        attacker_events, honest_events = Events(), Events()
        with gateway.open_channel("suite/task/B5/1", attacker_events) as attacker, \
                gateway.open_channel("suite/task/B5/2", honest_events) as honest:
            flood = _flood(attacker, 8)
            calm = [post(honest, "/v1/chat/completions", REQUEST)[0] for _ in range(2)]
    if not defended:  # the attack as it was: the other unit's honest calls meet the provider's 429 — its
        # session's failure (`request_failed`: this gateway has no configured model to probe), or its
        # exclusion where the probe is refused as well
        failed = [c for c in honest_events.of("ModelCall") if c["status"] == "request_failed"]
        assert 429 in calm and (failed or isinstance(honest.failure, ModelUnavailable))
        return
    assert flood == [200] * 3 + [429] * 5 and calm == [200, 200]
    assert len(upstream.requests) == 5 and honest.failure is None and attacker.failure is None
    refused = [c for c in attacker_events.of("ModelCall") if c["http_status"] == 429]
    assert len(refused) == 5 and all(c["status"] == "client_error" and "share" in c["error"] for c in refused)


def test_the_shares_follow_a_sliding_minute_and_count_tokens():
    now = [1000.0]
    shares = RateShares({"openai": RateLimit(requests_per_minute=4, tokens_per_minute=2000)}, units=2,
                        clock=lambda: now[0])
    first = shares.admit("u1", "openai", 400)  # ~100 tokens
    assert not isinstance(first, OverShare) and shares.admit("u1", "openai", 400) is not None
    over = shares.admit("u1", "openai", 400)  # a third request: over 4 // 2
    assert isinstance(over, OverShare) and over.http_status == 429 and over.retry_after_s == 60
    assert not isinstance(shares.admit("u2", "openai", 400), OverShare)  # the other unit's share is its own
    assert shares.admit("u1", "anthropic", 10 ** 9) is None  # no limit for that provider: nothing refused
    now[0] += 30
    shares.settle(first, 950)  # the upstream counted more than the estimate
    busy = shares.admit("u2", "openai", 4 * 1001)  # over the 1000-token share, with a call in its window
    assert isinstance(busy, OverShare) and busy.http_status == 429
    never = shares.admit("u3", "openai", 4 * 2001)  # over the run's whole 2000 tokens: no provider takes it
    assert isinstance(never, OverShare) and never.http_status == 413
    now[0] += 31  # all of u1's and u2's calls left the window
    assert not isinstance(shares.admit("u1", "openai", 4 * 1500), OverShare)  # alone: one call over its share
    assert isinstance(shares.admit("u1", "openai", 40), OverShare)  # and then it waits


def test_units_that_finished_within_the_minute_still_count_against_the_run():
    now = [0.0]
    shares = RateShares({"*": RateLimit(requests_per_minute=4)}, units=2, clock=lambda: now[0])
    for unit in ("u1", "u1", "u2", "u2"):  # two units spend their shares, and finish
        assert not isinstance(shares.admit(unit, "openai", 10), OverShare)
    now[0] = 20.0
    late = shares.admit("u3", "openai", 10)  # its own share is untouched, the key's window is not
    assert isinstance(late, OverShare) and late.http_status == 429 and late.retry_after_s == 40
    assert "spent for the moment" in late.message
    now[0] = 60.5
    assert not isinstance(shares.admit("u3", "openai", 10), OverShare)


def test_a_limit_the_run_did_not_set_is_learned_from_the_preflight_probe(tmp_path):
    with ScriptedUpstream(SCRIPT, rpm=60) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, rate_units=4), blob_dir=tmp_path / "blobs")
        result = probe(gateway, Target("openai", "chat_completions", "m", "agent", "--agent openai:m"))
    assert result.ok and result.stated_limit == RateLimit(60, None)
    gateway.shares.learn("openai", result.stated_limit)
    assert gateway.shares.share("openai") == RateLimit(15, None)
    configured = RateShares({"*": RateLimit(8, None)}, units=2)
    configured.learn("openai", RateLimit(60, 90000))  # the run's own setting wins; the rest is filled in
    assert configured.share("openai") == RateLimit(4, 45000)
