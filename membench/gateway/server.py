"""The model gateway: a host-side HTTP server, one Unix socket per agent session.

Each session gets a `Channel`: a fresh Unix socket in a private directory, which the sandbox
mounts; a relay inside the sandbox (membench/agents/inside/launch.py) turns it into a loopback
port, so agents reach a model with no network. A call is attributed to the session by the
socket it came through — nothing the agent sends can claim another session.

What a channel answers:
- `POST /v1/chat/completions`, `/v1/responses`, `/v1/messages`, `/v1/embeddings` (wire.ENDPOINTS,
  exactly): forwarded to the configured base URL plus that endpoint's fixed suffix, with the real
  key added (forward mode), or answered from a recording (replay mode). Streams (SSE) are relayed
  chunk by chunk as they arrive. Every call becomes a `ModelCall` event.
- `POST /membench/memory/search|get`: the session's memory tools (gateway/memory.py); under an MCP
  memory condition `list|call`, the server's own tools (memory_systems/mcp_servers.py).
- `HEAD` of any path: 200 (CLIs probe connectivity); anything else: 404.

What the gateway refuses itself, as the agent's own request (ModelCall `client_error`, never
forwarded, never excluding): any other POST target (a dot-segment, `;`, `//`, an encoded slash, a
query string: 400; an unknown path: 404), a body over `max_request_bytes` (413), a call over the
unit's share of the run's rate limit (rate_shares.py: 429, or 413 for one that can never fit), and
an upload the upstream refused (its 413, or a reset while the body was being sent). A malformed
framing (Transfer-Encoding with Content-Length, a Transfer-Encoding other than chunked, an invalid
Content-Length or chunk) is answered 400 at once and the connection closed.

Keys: the agent sends a placeholder; the gateway drops the agent's `Authorization`/`x-api-key`
and sets the provider's key (settings.keys), read from the host's environment. The key is never
written: not into the sandbox, not into an event, not into a recording (headers are not
recorded).

What an agent sends can fail its session, never exclude its unit (docs/gateway.md). An upstream
429 or 5xx, a timeout or an unreachable upstream is retried (settings.retries, with backoff); when it
persists, the gateway probes the target the run configured for the caller (preflight.py). Only
when that probe fails as well is the harness's model unavailable (or misconfigured): the agent gets
an error answer (so it stops soon), the ModelCall says what happened, and the channel keeps the
first failure, which the agent raises and the runner records as the unit's `excluded` reason
(`model_unavailable`, `model_misconfigured`). The same holds for a 401/403/404/405 (the harness is
misconfigured only when the probe is refused too). When the probe is answered, the failure was the
request's own (its size, its rate, its model): the upstream's answer is relayed, the ModelCall's
status is `request_failed`, and the session is scored — the agent's failure. A 4xx other than 429
(e.g. a context that is too long) is the agent's request too (`client_error`), and so is a call to
a provider the run never configured for the caller (no upstream: a 404 from the gateway). In replay
mode a request the recording does not hold is the agent's divergence (`replay_miss`), never an
exclusion: the agent could otherwise vary its prompt in the cells it chooses to remove.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import socketserver
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from membench.bus.blobs import put_blob
from membench.gateway.preflight import MISCONFIGURED_STATUSES
from membench.gateway.prices import PriceTable
from membench.gateway.rate_shares import LIMIT_HEADERS, OverShare, RateLimit, RateShares
from membench.gateway.recording import Recording, ReplayCursor
from membench.schemas.events import error_text
from membench.gateway.wire_apis import (Endpoint, PathRefused, StreamUsage, Usage, api_of, endpoint_of, loose_digest,
                                         match_digest, request_model, usage_of_body)

if TYPE_CHECKING:  # annotations only (docs/design.md §3, typed payloads)
    from membench.schemas.payloads import Emit

SOCKET_NAME = "gateway.sock"
# the default cap on one request's body: Anthropic's documented limit for a Messages request (32 MB);
# a proxy in front of the upstream with a smaller one is matched with --model-max-request-bytes
MAX_REQUEST_BYTES = 32 << 20
LINGER_S = 2.0  # after refusing an unread body: how long its bytes are drained so the refusal is read, not reset
MAX_RECORDED_RESPONSE = 256 << 20
# request headers passed to the upstream (everything else — auth, host, cookies, the agent's own
# identifiers — stays behind)
FORWARDED_HEADERS = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta", "user-agent")
PROVIDERS = ("openai", "anthropic")
# ModelCall.purpose of a memory policy's calls (event v6): `embed` is a memory library's embedding
# call (POST …/embeddings), the string field needs no new schema version
MEMORY_PURPOSES = ("sleep", "judge", "embed")
PREFLIGHT = "preflight"  # ModelCall.purpose of the gateway's own probe (preflight.py); never in a run's log


class ModelUnavailable(RuntimeError):
    """The model could not answer (upstream unreachable, timeout, 5xx/429 through the retries) and the
    gateway's own probe of the configured model failed too: the unit is excluded."""
    reason = "model_unavailable"


class ModelMisconfigured(ModelUnavailable):
    """The upstream refused a call (401/403/404/405) and the gateway's own probe of the configured
    model was refused too: the harness's key, URL or model name is wrong; the unit is excluded."""
    reason = "model_misconfigured"


# A failed call is retried this many times (a 429, a 5xx, a timeout, no connection), waiting
# backoff_s, then twice as long each time (at most MAX_BACKOFF_S; a longer Retry-After is honoured
# up to that cap); MEMBENCH_MODEL_RETRY_BACKOFF_S sets the first wait (the tests make it tiny).
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0


def default_backoff_s() -> float:
    try:
        value = float(os.environ.get("MEMBENCH_MODEL_RETRY_BACKOFF_S", DEFAULT_BACKOFF_S))
    except ValueError:
        return DEFAULT_BACKOFF_S
    return value if 0 <= value <= MAX_BACKOFF_S else DEFAULT_BACKOFF_S


def retryable(http_status: int) -> bool:
    """An answer that says nothing about the request itself: the provider's rate limit or failure."""
    return http_status == 429 or http_status >= 500


@dataclass(frozen=True)
class GatewaySettings:
    base_urls: dict[str, str] = field(default_factory=dict)  # provider -> API root incl. version, e.g. …/v1
    keys: dict[str, str] = field(default_factory=dict, repr=False)  # provider -> key; never logged
    record: bool = False
    timeout_s: float = 600.0
    prices: PriceTable = field(default_factory=PriceTable.default)
    max_request_bytes: int = MAX_REQUEST_BYTES
    rate_limits: dict[str, RateLimit] = field(default_factory=dict)  # provider (or "*") -> the run's limit
    rate_units: int = 1  # units running concurrently: each gets 1/rate_units of the limit (rate_shares.py)
    retries: int = DEFAULT_RETRIES  # further attempts of a call that failed (module doc)
    backoff_s: float = field(default_factory=default_backoff_s)

    def base_url(self, provider: str) -> str | None:
        return self.base_urls.get(provider) or self.base_urls.get("*")

    def backoff(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        wait = self.backoff_s * 2 ** retry
        try:
            wait = max(wait, float(retry_after or 0))
        except ValueError:  # an HTTP-date Retry-After: the backoff alone
            pass
        return min(wait, MAX_BACKOFF_S)


class ModelGateway:
    """One per run set: opens a channel per agent session."""

    def __init__(self, settings: GatewaySettings, blob_dir: Path | None = None, replay: Recording | None = None,
                 targets: list | tuple = ()):
        if replay is None and not settings.base_urls:
            raise ValueError("the model gateway needs an upstream (--model-base-url) or a recording (--model-replay)")
        if settings.record and blob_dir is None:
            raise ValueError("--model-record needs the run set's blob store")
        self.settings = settings
        self.blob_dir = blob_dir
        self.replay = replay
        self.targets = tuple(targets)  # preflight.Target: what the run is configured to call
        self.shares = RateShares(settings.rate_limits, settings.rate_units)

    def verify(self, provider: str, api: str, role: str):
        """After a refused call: the gateway's own probe (preflight.py) of what the harness configured
        for this role, never of the model or path the agent requested (an agent could name a bogus
        one, or another provider's path, to exclude its own cell). The configured
        target of this (provider, API, role) is probed, and any refusal it meets (key, wire API,
        model) proves the harness misconfigured. With none, a configured target of the same provider
        and role is probed (another wire API), and only a refused key proves anything (a key is the
        provider's, whatever the path). A provider the harness never configured for this role — and
        so anything a `command:` agent calls — proves nothing: the refusal is the agent's own.
        Returns the failing ProbeResult when the harness is proven misconfigured, else None."""
        from membench.gateway.preflight import probe

        same = [t for t in self.targets if (t.provider, t.role) == (provider, role)]
        target = next((t for t in same if t.api == api), None)
        proofs: tuple[str, ...] = ("key", "wire_api", "model")
        if target is None and same:
            target, proofs = same[0], ("key",)
        if target is None:
            return None
        result = probe(self, target)
        return None if result.ok or result.problem not in proofs else result

    def outage(self, provider: str, api: str, role: str):
        """After a call failed through every retry (429, 5xx, timeout, unreachable): the gateway's own
        probe of what the harness configured for this caller — the same (provider, API, role), else
        the same provider and role, else any target of that provider (an outage or a spent key is
        the provider's, whatever the caller). Returns the failing ProbeResult when the probe cannot be
        served either (no answer, 429, 5xx, or a refused key, API or model): the harness's model is
        down and the unit is excluded. None when the probe is answered — the failure was the
        request's own (its size, its rate), or nothing was configured to probe (a `command:` agent
        names its own model): the caller's failure, never an exclusion it could choose."""
        from membench.gateway.preflight import probe

        target = self.outage_target(provider, api, role)
        if target is None:
            return None
        result = probe(self, target)
        return result if not result.ok or retryable(result.http_status) else None

    def outage_target(self, provider: str, api: str, role: str):
        """The configured target `outage` probes for this caller, or None (nothing to probe)."""
        ranked = ([t for t in self.targets if (t.provider, t.role, t.api) == (provider, role, api)]
                  + [t for t in self.targets if (t.provider, t.role) == (provider, role)]
                  + [t for t in self.targets if t.provider == provider])
        return ranked[0] if ranked else None

    @property
    def mode(self) -> str:
        return "replay" if self.replay is not None else "forward"

    def open_channel(self, unit_id: str, emit: Emit[Any], memory: Any = None,
                     purpose: str = "agent") -> "Channel":
        return Channel(self, unit_id, emit, memory, purpose)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    # handler threads are joined on close: every ModelCall is emitted before the session goes on
    daemon_threads = False
    block_on_close = True
    channel: "Channel"


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class Channel:
    """One session's socket. `emit(kind, payload, visibility)` records events (serialized here);
    `failure` is the first failure that excludes the unit. `purpose` (event v6 `ModelCall.purpose`) says
    whose calls it carries: `agent` (a session's agent), or `memory` — a model-driven memory policy
    calling from the harness side (membench/memory_systems/model_client.py), which names each call
    `sleep` or `judge` itself; its call ids are `mem1`, `mem2`, … so they never collide with the
    agent's `m1`, `m2`, …"""

    def __init__(self, gateway: ModelGateway, unit_id: str, emit: Emit[Any], memory: Any = None,
                 purpose: str = "agent"):
        self.gateway = gateway
        self.unit_id = unit_id  # whose share of the rate limit its calls spend
        self.memory = memory
        self.purpose = purpose
        self._emit = emit
        # emit(kind, payload, visibility) under the channel's lock, typed per kind as RunEmitter.emit
        self.emit: Emit[None] = self._emit_locked
        self._lock = threading.Lock()
        self._calls = 0
        self.failure: ModelUnavailable | None = None
        self._upstreams: set[http.client.HTTPConnection] = set()  # calls in flight, cut when the session ends
        self.closing = False
        self._closed = threading.Event()  # set when the session ends: a retry's wait stops at once
        self.checked = False  # a refused call has been checked against the gateway's probe (_check_configuration)
        self.replay: ReplayCursor | None = gateway.replay.cursor(unit_id) if gateway.replay else None
        self.directory = Path(tempfile.mkdtemp(prefix="membench-gw-"))
        self.directory.chmod(0o755)
        self.socket_path = self.directory / SOCKET_NAME
        self._server = _Server(str(self.socket_path), _Handler)
        self._server.channel = self
        self.socket_path.chmod(0o666)  # the sandbox's unprivileged user connects
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="membench-gateway", daemon=True)
        self._thread.start()

    def _emit_locked(self, kind: str, payload: Mapping[str, Any], visibility: str = "harness") -> None:
        with self._lock:
            self._emit(kind, payload, visibility)  # type: ignore[call-overload]  # a kind of Emit's, checked there

    def http_connection(self, timeout_s: float) -> http.client.HTTPConnection:
        """An HTTP connection to this channel's socket, for callers on the host side (the model-driven
        memory policies, the model user) that speak to the gateway as a sandboxed agent's relay does."""
        return _UnixHTTPConnection(str(self.socket_path), timeout_s)

    def next_call_id(self) -> str:
        with self._lock:
            self._calls += 1
            return f"{ {'agent': 'm', PREFLIGHT: 'pre'}.get(self.purpose, 'mem')}{self._calls}"

    @property
    def role(self) -> str:
        """Whose configured model a refused call is checked against (ModelGateway.verify); the model
        user's channel (membench/transfer_protocol/model_user.py, `_UserChannel`) answers `user`."""
        return "memory" if self.purpose == "memory" else "agent"

    @property
    def calls(self) -> int:
        return self._calls

    @property
    def closed(self) -> threading.Event:
        return self._closed

    def fail(self, failure: ModelUnavailable) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = failure

    def track(self, connection: http.client.HTTPConnection, active: bool) -> None:
        with self._lock:
            (self._upstreams.add if active else self._upstreams.discard)(connection)

    def close(self) -> None:
        """Stops accepting; cuts upstream calls still in flight (the agent is gone) and waits for
        their handlers, so every ModelCall is emitted before it returns."""
        self._server.shutdown()
        with self._lock:
            self.closing = True
            cut = list(self._upstreams)
        self._closed.set()
        for connection in cut:
            if connection.sock is not None:
                try:
                    connection.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def address_string(self) -> str:  # a Unix socket has no peer address
        return "sandbox"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ------------------------------------------------------------------ plumbing
    def parse_request(self) -> bool:
        """The request line and headers, then the framing: a request whose body length is ambiguous
        is answered 400 before any of it is read, and its connection closed (what follows it on the
        connection cannot be told from its body)."""
        if not super().parse_request():
            return False
        problem = framing_problem(self.headers)
        if problem is not None:
            self.close_connection = True
            self._error(400, "invalid_request_error", f"malformed request framing: {problem}")
            return False
        return True

    def handle_expect_100(self) -> bool:
        # a client waiting to be told to send a body over the cap is told 413 instead (do_POST)
        length = self.headers.get("Content-Length", "").strip()
        if length.isdigit() and int(length) > self.server.channel.gateway.settings.max_request_bytes:
            return True
        return super().handle_expect_100()

    def _body(self, cap: int) -> bytes:
        """The request body (framing already checked); BodyTooLarge past `cap` bytes, ValueError on a
        malformed chunk. Either leaves the connection unusable: the caller closes it."""
        if self.headers.get("Transfer-Encoding"):
            data = bytearray()
            while True:
                line = self.rfile.readline(1024)
                size_text = line.split(b";", 1)[0].strip()
                if not line.endswith(b"\n") or not _HEX.fullmatch(size_text):
                    raise ValueError(f"malformed chunk size line {line[:40]!r}")
                size = int(size_text, 16)
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):  # trailers, ignored
                        pass
                    return bytes(data)
                if len(data) + size > cap:
                    raise BodyTooLarge(f"more than {cap} bytes (chunked)")
                chunk = self.rfile.read(size)
                if len(chunk) < size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                    raise ValueError("a chunk ended before its stated size, or without CRLF")
                data += chunk
        length = int(self.headers.get("Content-Length") or 0)
        if length > cap:
            raise BodyTooLarge(f"{length} bytes")
        body = self.rfile.read(length)
        if len(body) < length:
            raise ValueError(f"the body ended after {len(data)} of its {length} bytes")
        return body

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, kind: str, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        # shaped so both OpenAI and Anthropic clients show the message
        body = {"type": "error", "error": {"type": kind, "message": f"membench gateway: {message}", "code": kind}}
        self._send(status, json.dumps(body).encode(), headers=headers)

    def _linger(self) -> None:
        """After answering a request whose body was left unread: stop writing and drain what the
        client still sends for a moment, so it reads the answer rather than a reset connection."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(LINGER_S)
            deadline = time.monotonic() + LINGER_S
            while time.monotonic() < deadline and self.connection.recv(65536):
                pass
        except OSError:
            pass

    def do_HEAD(self) -> None:
        self._send(200, b"", "text/plain")

    def do_GET(self) -> None:
        self._error(404, "not_found", f"no such endpoint: GET {self.path}")

    def do_POST(self) -> None:
        channel = self.server.channel
        # the raw request target: BaseHTTPRequestHandler folds a leading '//' of self.path
        target = self.requestline.split(" ")[1] if self.requestline.count(" ") >= 2 else self.path
        memory = target.startswith("/membench/memory/")
        endpoint: Endpoint | None = None
        refused: PathRefused | None = None
        if not memory:
            try:
                endpoint = endpoint_of(target)
            except PathRefused as exc:
                refused = exc
        aimed = (endpoint.api, endpoint.provider) if endpoint else api_of(target) or ("", "")
        try:
            body = self._body(channel.gateway.settings.max_request_bytes)
        except BodyTooLarge as exc:
            cap = channel.gateway.settings.max_request_bytes
            _ModelCall(self, channel, *aimed, b"").refuse_as_agents(
                413, "request_too_large", f"the request body ({exc}) is over the gateway's cap of {cap} bytes "
                                          "(--model-max-request-bytes); nothing was sent upstream")
            self._linger()
            return
        except (ValueError, OSError) as exc:
            self.close_connection = True
            try:
                self._error(400, "invalid_request_error", f"malformed request body: {exc}")
            except OSError:  # the client hung up mid-body: no one to tell
                pass
            return
        if memory:
            self._memory(channel, target[len("/membench/memory/"):], body)
        elif refused is not None:
            status = refused.http_status
            _ModelCall(self, channel, *aimed, body).refuse_as_agents(
                status, "not_found" if status == 404 else "invalid_request_error", f"not forwarded: {refused}")
        else:
            assert endpoint is not None  # neither memory nor refused: endpoint_of found it
            _ModelCall(self, channel, endpoint.api, endpoint.provider, body, endpoint).run()

    def _memory(self, channel: Channel, tool: str, body: bytes) -> None:
        if channel.memory is None:
            self._error(404, "not_found", "this session has no memory tools")
            return
        try:
            args = json.loads(body or b"{}")
            answer = channel.memory.call(tool, args if isinstance(args, dict) else {})
        except (ValueError, KeyError) as exc:
            self._error(400, "invalid_request_error", str(exc))
            return
        self._send(200, json.dumps(answer).encode())


class BodyTooLarge(ValueError):
    """A request body over the gateway's cap (GatewaySettings.max_request_bytes)."""


_HEX = re.compile(rb"[0-9a-fA-F]{1,16}")
_DIGITS = re.compile(r"[0-9]{1,18}")


def framing_problem(headers: Any) -> str | None:
    """Why a request's body length is ambiguous (RFC 9112 §6.3: a proxy and a server could read
    different bodies), or None: Transfer-Encoding together with Content-Length, a
    Transfer-Encoding other than exactly `chunked`, a Content-Length repeated or not a number."""
    codings = headers.get_all("Transfer-Encoding") or []
    lengths = headers.get_all("Content-Length") or []
    if codings and lengths:
        return "both Transfer-Encoding and Content-Length"
    if codings and [c.strip().lower() for c in ",".join(codings).split(",")] != ["chunked"]:
        return f"Transfer-Encoding {', '.join(codings)[:80]!r} (only 'chunked' is served)"
    if len(lengths) > 1:
        return "more than one Content-Length"
    if lengths and not _DIGITS.fullmatch(lengths[0].strip()):
        return f"Content-Length {lengths[0][:40]!r} is not a number"
    return None


class _ModelCall:
    """One model call through a channel: answer it (replay or upstream), then emit its ModelCall."""

    def __init__(self, handler: _Handler, channel: Channel, api: str, provider: str, body: bytes,
                 endpoint: Endpoint | None = None):
        self.handler, self.channel, self.api, self.provider, self.body = handler, channel, api, provider, body
        self.endpoint = endpoint  # None: a refused target, never forwarded
        self.started = time.perf_counter()
        try:
            self.request = json.loads(body)
        except ValueError:
            self.request = None
        self.model = request_model(self.request)
        self.status, self.http_status = "ok", 0
        self.error: str | None = None
        self.usage = Usage()
        self.streamed = False
        self.chunks = 0
        self.first_byte_ms = 0
        self.response = bytearray()
        self.response_complete = False
        self._recorded = False
        self.retried = 0  # further attempts made (settings.retries)
        self.call_id = channel.next_call_id()  # arrival order
        # a memory policy names its call's purpose (sleep / judge) in a header the upstream never sees;
        # a memory channel's embedding call is `embed` whatever it claims (the wire says what it is)
        named = handler.headers.get("X-Membench-Purpose")
        self.purpose = channel.purpose if channel.purpose in ("agent", PREFLIGHT) else (
            "embed" if api == "embeddings" else named if named in MEMORY_PURPOSES and named != "embed" else "sleep")

    def run(self) -> None:
        gateway = self.channel.gateway
        if self.request is None:
            self._refuse(400, "client_error", "invalid_request_error", "the request body is not JSON")
        elif self.channel.failure is not None:  # the unit is lost already: stop the agent quickly
            self._refuse(503, "upstream_error", "model_unavailable", f"an earlier call failed: {self.channel.failure}")
        elif self.channel.replay is not None:
            self._replay()
        else:
            self._forward(gateway.settings)
        self._record()  # once: each path records just before its answer's last bytes (see _record)

    # ------------------------------------------------------------------ answers
    def _refuse(self, http_status: int, status: str, kind: str, message: str,
                headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.status, self.http_status, self.error = status, http_status, message
        self._record()
        self.handler._error(http_status, kind, message, headers)

    def refuse_as_agents(self, http_status: int, kind: str, message: str,
                         headers: tuple[tuple[str, str], ...] = ()) -> None:
        """The gateway answers a 4xx itself, as the caller's own request — status `client_error`,
        the channel not failed, so the unit is scored, never excluded: a target it does not serve, a
        body over its cap, a call over the unit's rate share, an upload the upstream refused."""
        self._refuse(http_status, "client_error", kind, message, headers)

    def _replay(self) -> None:
        replay, recording = self.channel.replay, self.channel.gateway.replay
        assert replay is not None and recording is not None  # _replay runs only on a replaying gateway
        found = replay.answer(match_digest(self.api, self.request))
        if found is None:  # the divergence rule: tool output that differs only in uids, pids, clocks
            found = replay.answer(match_digest(self.api, self.request),
                                               loose_digest(self.api, self.request))
        if found is None:  # the caller's divergence from the recording: its failure, never an exclusion
            message = (f"no recorded answer for this {self.api} request (model {self.model!r}) in the replay of "
                       f"{recording.source}")
            self._refuse(400, "replay_miss", "model_replay_miss", message)
            return
        answer, body = found
        self.http_status, self.streamed = answer.http_status, answer.streamed
        self.status = ("ok" if answer.http_status < 400 else
                       "request_failed" if retryable(answer.http_status) else "client_error")
        if answer.streamed:
            tracker = StreamUsage(self.api)
            tracker.feed(body)
            tracker.close()
            self.usage, self.chunks = tracker.usage, tracker.events
        else:
            self.usage = _json_usage(self.api, body)
        self.first_byte_ms = self._ms()
        self.response[:] = body
        self.response_complete = True
        self._record()
        self.handler._send(answer.http_status, body, "text/event-stream" if answer.streamed else "application/json")

    def _forward(self, settings: GatewaySettings) -> None:
        base = settings.base_url(self.provider)
        if base is None:
            message = f"no upstream configured for {self.provider} (--model-base-url)"
            if any((t.provider, t.role) == (self.provider, self.channel.role) for t in self.channel.gateway.targets):
                # the harness configured this provider for this caller and gave it no upstream
                self.channel.fail(ModelMisconfigured(f"the model is misconfigured: {message}"))
                self._refuse(502, "misconfigured", "model_misconfigured", message)
            else:  # a provider the run never configured for this caller: the agent's own request, not an exclusion
                self._refuse(404, "client_error", "not_found", f"{message}: this run does not serve it")
            return
        url = urlsplit(base)
        # the configured root plus the endpoint's fixed suffix: nothing of the agent's target
        assert self.endpoint is not None  # a refused target never reaches _forward
        path = url.path.rstrip("/") + self.endpoint.suffix + (f"?{self.endpoint.query}" if self.endpoint.query else "")
        place = None
        if self.channel.purpose != PREFLIGHT:
            admitted = self.channel.gateway.shares.admit(self.channel.unit_id, self.provider, len(self.body))
            if isinstance(admitted, OverShare):
                self.refuse_as_agents(admitted.http_status, "rate_limit_exceeded" if admitted.http_status == 429
                                      else "request_too_large", admitted.message,
                                      (("retry-after", str(admitted.retry_after_s)),))
                return
            place = admitted
        headers = {k: v for k, v in self.handler.headers.items() if k.lower() in FORWARDED_HEADERS}
        headers["Accept-Encoding"] = "identity"  # usage is read from the bytes as they pass
        key = settings.keys.get(self.provider) or settings.keys.get("*")
        if key:
            if self.provider == "anthropic":
                headers["x-api-key"] = key
            else:
                headers["Authorization"] = f"Bearer {key}"
        connection_type = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        # the probe's own call is tried once: it is the check of a failure, not a call to get through
        retries = 0 if self.channel.purpose == PREFLIGHT else max(0, settings.retries)
        failed, retry_after = ("", ""), None
        try:
            for attempt in range(retries + 1):
                if attempt:
                    if self.channel.closed.wait(settings.backoff(attempt - 1, retry_after)):
                        break  # the session ended while waiting
                    self.retried = attempt
                connection = connection_type(url.hostname or "", url.port, timeout=settings.timeout_s)
                self.channel.track(connection, True)
                try:
                    try:  # a timeout anywhere is the upstream's silence; any other OSError, unreachable
                        connection.connect()
                        try:
                            connection.request("POST", path, body=self.body, headers=headers)
                        except (socket.timeout, TimeoutError):
                            raise
                        except OSError as exc:  # connected, then cut while the request went out
                            upstream = _answer_after_cut(connection)
                            if upstream is None:
                                self._upload_refused(exc)
                                return
                        else:
                            upstream = connection.getresponse()
                    except (socket.timeout, TimeoutError):
                        failed = ("timeout", f"the upstream did not answer within {settings.timeout_s:g} s")
                        continue
                    except OSError as exc:
                        failed = ("upstream_unreachable", f"cannot reach the upstream at {base}: {exc}")
                        continue
                    if retryable(upstream.status) and attempt < retries and not self.channel.closing:
                        retry_after = upstream.getheader("retry-after")
                        continue  # nothing has reached the caller yet: the next attempt answers it
                    if place is not None:
                        self.channel.gateway.shares.answered(place)
                    self._relay(upstream, settings)
                    return
                finally:
                    self.channel.track(connection, False)
                    connection.close()
            self._unavailable(*failed)
        finally:
            if place is not None:
                self.channel.gateway.shares.settle(place, self.usage.input_tokens + self.usage.output_tokens)

    def _upload_refused(self, exc: OSError) -> None:
        """The upstream (or a proxy before it) cut the connection while the request was being sent
        and left no answer: it would not take this body (a size limit answers 413 and closes). The
        agent's own request, never the model's failure; a session ended by the harness is not."""
        if self.channel.closing:
            self._refuse(502, "incomplete", "session_ended", "the session ended during this call")
            return
        self.refuse_as_agents(413, "request_too_large", f"the upstream refused the upload of {len(self.body)} bytes "
                                                        f"(the connection was cut while it was sent: {exc})")

    def _persisting(self) -> str:
        return f" (through {self.retried + 1} attempts)" if self.retried else ""

    def _judge_persistent_failure(self, message: str) -> bool:
        """A call failed through every retry: True when the gateway's probe of the configured target
        fails too (the channel fails, the unit is excluded); False when the probe is answered — the
        request's own failure (status `request_failed`, the caller's, never an exclusion)."""
        if self.channel.purpose == PREFLIGHT:
            self.channel.fail(ModelUnavailable(message))
            return True
        gateway = self.channel.gateway
        found = gateway.outage(self.provider, self.api, self.channel.role)
        keys = tuple(gateway.settings.keys.values())
        if found is None:
            self.status = "request_failed"
            why = ("the gateway's probe of the configured model was answered"
                   if gateway.outage_target(self.provider, self.api, self.channel.role) is not None
                   else "the run configured no model of this provider for this caller to probe")
            self.error = error_text(f"{message}; {why}: the request's own failure, not an outage", keys)
            return False
        probe_text = error_text(found.message, keys)
        if found.problem in ("key", "wire_api", "model"):
            self.channel.fail(ModelMisconfigured(f"the model is misconfigured: {message}; the probe: {probe_text}"))
            self.status = "misconfigured"
        else:
            self.channel.fail(ModelUnavailable(f"{message}, and the gateway's own probe failed too: {probe_text}"))
        return True

    def _check_configuration(self) -> None:
        """A refused call: is the harness misconfigured (its own probe is refused too), or was it the
        agent's own request? Only the first refusal of a channel is checked: after a proven
        misconfiguration every call is refused at once (run), after a passed probe the agent's
        further refusals are its own."""
        with self.channel._lock:
            if self.channel.checked:
                return
            self.channel.checked = True
        found = self.channel.gateway.verify(self.provider, self.api, self.channel.role)
        if found is not None:  # the probe's message may quote the upstream's answer: redacted like any
            message = error_text(found.message, tuple(self.channel.gateway.settings.keys.values()))
            self.status, self.error = "misconfigured", message
            self.channel.fail(ModelMisconfigured(f"the model is misconfigured: {message}"))

    def _unavailable(self, status: str, message: str) -> None:
        if self.channel.closing:  # cut by the session's end, not the upstream's failure
            self._refuse(502, "incomplete", "session_ended", "the session ended during this call")
            return
        message += self._persisting()
        self.status = status
        if self._judge_persistent_failure(message):
            self._refuse(504 if status == "timeout" else 502, self.status, "model_unavailable", message)
        else:
            self._refuse(504 if status == "timeout" else 502, "request_failed", "request_failed", self.error or message)

    def _relay(self, upstream: http.client.HTTPResponse, settings: GatewaySettings) -> None:
        self.http_status = upstream.status
        content_type = upstream.getheader("Content-Type", "application/json")
        self.streamed = content_type.startswith("text/event-stream")
        if retryable(upstream.status):
            self.status = "upstream_error"
            self._judge_persistent_failure(f"the upstream answered HTTP {upstream.status}{self._persisting()}")
        elif upstream.status >= 400:
            self.status = "client_error"
            if upstream.status in MISCONFIGURED_STATUSES and self.channel.purpose != PREFLIGHT:
                self._check_configuration()
        handler = self.handler
        handler.send_response(upstream.status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        for name in ("x-request-id", "request-id", "retry-after", *(n for ns in LIMIT_HEADERS.values() for n in ns)):
            if upstream.getheader(name):
                handler.send_header(name, upstream.getheader(name, ""))
        handler.end_headers()
        tracker = StreamUsage(self.api) if self.streamed else None
        try:
            while True:
                chunk = upstream.read1(65536)
                if not chunk:
                    break
                if not self.first_byte_ms:
                    self.first_byte_ms = self._ms()
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
                if tracker is not None:
                    tracker.feed(chunk)
                if len(self.response) + len(chunk) <= MAX_RECORDED_RESPONSE:
                    self.response += chunk
            self.response_complete = len(self.response) < MAX_RECORDED_RESPONSE
            if upstream.status >= 400:  # the upstream's own words, kept (bounded, redacted)
                words = f"HTTP {upstream.status}: {_error_message(bytes(self.response))}"
                self.error = error_text(words if self.error is None else f"{words}; {self.error}",
                                        tuple(settings.keys.values()))
            if tracker is not None:
                tracker.close()
                self.usage, self.chunks = tracker.usage, tracker.events
            elif self.status in ("ok", "client_error"):
                self.usage = _json_usage(self.api, bytes(self.response))
            self._record()
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
            return
        except (socket.timeout, TimeoutError):
            self.status, self.error = "timeout", f"the upstream stalled for {settings.timeout_s:g} s mid-answer"
            self.channel.fail(ModelUnavailable(self.error))
            handler.close_connection = True
            return
        except OSError as exc:  # the agent hung up (its session ended), or the upstream dropped the stream
            # a misconfiguration proven on this call ends the session itself: the agent hanging up while
            # the refusal is relayed must not turn that verdict into a broken-off answer
            if self.status != "misconfigured":
                self.status, self.error = "incomplete", f"the answer broke off: {exc}"
            handler.close_connection = True
        if tracker is not None:  # usage as far as it came
            tracker.close()
            self.usage, self.chunks = tracker.usage, tracker.events
        elif self.status in ("ok", "client_error"):
            self.usage = _json_usage(self.api, bytes(self.response))

    # ------------------------------------------------------------------ the event
    def _ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)

    def _record(self) -> None:
        """Emits the ModelCall, once. Called before the answer's last bytes go out, so an agent that
        waits for one answer before its next request finds its calls in the log in that order."""
        if self._recorded:
            return
        self._recorded = True
        gateway = self.channel.gateway
        record = gateway.settings.record
        # a replay miss keeps the request that missed, to compare with the recording
        keep_request = record or (self.status == "replay_miss" and gateway.blob_dir is not None)
        request_digest = put_blob(gateway.blob_dir, self.body) if keep_request and gateway.blob_dir is not None else hashlib.sha256(self.body).hexdigest()
        response_digest = None
        recorded = False
        if self.response_complete:
            data = bytes(self.response)
            if record:
                response_digest, recorded = put_blob(gateway.blob_dir, data), True  # type: ignore[arg-type]  # record implies a blob store (ModelGateway.__init__)
            else:
                response_digest = hashlib.sha256(data).hexdigest()
        cost, price = gateway.settings.prices.cost(self.model, self.usage)
        self.channel.emit("ModelCall", {
            "call_id": self.call_id, "provider": self.provider, "api": self.api, "model": self.model,
            "mode": gateway.mode, "status": self.status, "http_status": self.http_status,
            "request_digest": request_digest,
            # the replay key costs ~1 ms per 30 KB of request: computed only where replay can use it
            "match_digest": (match_digest(self.api, self.request) if self.request is not None
                             and (record or gateway.replay is not None) else ""),
            "response_digest": response_digest, "recorded": recorded, "streamed": self.streamed,
            "chunks": self.chunks, "input_tokens": self.usage.input_tokens, "cached_tokens": self.usage.cached_tokens,
            "output_tokens": self.usage.output_tokens, "reasoning_tokens": self.usage.reasoning_tokens,
            "latency_ms": self._ms(), "first_byte_ms": self.first_byte_ms, "cost_usd": cost, "price": price,
            "error": self.error, "purpose": self.purpose})


def _answer_after_cut(connection: http.client.HTTPConnection) -> http.client.HTTPResponse | None:
    """The answer an upstream wrote before cutting an upload short (a proxy's 413), if it can still
    be read; None when the cut took it too."""
    sock = connection.sock
    if sock is None:
        return None
    try:
        sock.settimeout(2.0)
        answer = connection.getresponse()
        sock.settimeout(connection.timeout)
        return answer
    except (OSError, http.client.HTTPException):
        return None


def _error_message(body: bytes) -> str:
    """The message of an error answer: `error.message` of either API's JSON, else the text."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:2000].decode("utf-8", "replace").strip()
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return json.dumps(doc)[:2000]


def _json_usage(api: str, body: bytes) -> Usage:
    try:
        return usage_of_body(api, json.loads(body))
    except ValueError:
        return Usage()


def keys_from_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """MEMBENCH_MODEL_API_KEY for every provider; MEMBENCH_OPENAI_API_KEY and
    MEMBENCH_ANTHROPIC_API_KEY override it per provider."""
    source: Mapping[str, str] = os.environ if env is None else env
    keys = {}
    if source.get("MEMBENCH_MODEL_API_KEY"):
        keys["*"] = source["MEMBENCH_MODEL_API_KEY"]
    for provider in PROVIDERS:
        value = source.get(f"MEMBENCH_{provider.upper()}_API_KEY")
        if value:
            keys[provider] = value
    return keys
