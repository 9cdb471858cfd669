"""`membench bench gateway`: the latency the model gateway adds, per call and per streamed chunk.

Set-up (one run, one upstream): a `ScriptedUpstream` (membench/bench/scripted_model_server.py) on loopback
TCP, and a gateway channel (membench/gateway/server.py, forward mode) whose upstream it is. By
default each runs in its own process (`isolate=True`), as in a real run, where the agent, the
runner holding the gateway, and the model server are different processes; otherwise three
parties would share one interpreter lock and the gateway path would pay for it twice. The
client is this process: `http.client` over TCP to the upstream (**direct**), and the same client
class over the channel's Unix socket (**via the gateway**, `UnixHTTPConnection`).

Connections: with `keepalive=True` (the default) each path uses one persistent HTTP/1.1
connection for all its calls (as agent SDKs do; connecting is outside the timed calls); with
`keepalive=False` every call opens a fresh connection on both paths and the connect is timed.
Either way the gateway itself opens a fresh TCP connection to the upstream for every call — that
is part of what it adds.

Per call: for each API (chat_completions, responses, messages), non-streamed JSON and streamed
SSE, `calls` calls per path after a warm-up, the direct call and the gateway call interleaved
(alternating which goes first) so both see the same machine state. A call's latency is from
sending the request to having read the whole answer. Reported: p50 and p95 of each path, and
the added latency `via pXX − direct pXX` (a difference of percentiles; the median of the paired
per-call differences is given beside it).

Per chunk: the same request answered as a short stream (the text in one delta: 3–6 SSE events)
and a long one (the text in `chunks` deltas: `chunks` + 3–5 events), `chunk_calls` times each,
both paths interleaved. With added(x) = median via(x) − median direct(x):

    per chunk = (added(long) − added(short)) / (events(long) − events(short))

i.e. the marginal cost of one more relayed event, the per-call cost cancelled out. The amortized
figure added(long) / events(long), which still holds the per-call cost, is given beside it as an
upper bound. A chunk is one server-sent event (what `ModelCall.chunks` counts). The upstream
writes the events back to back, so the gateway may read several in one `read1` and relay them in
one write; a model that streams slowly is relayed one event per write.
"""

from __future__ import annotations

import collections
import gc
import http.client
import json
import multiprocessing
import socket
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

APIS = ("chat_completions", "responses", "messages")
PATHS = {"chat_completions": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
TARGET_CALL_P95_MS = 5.0
TARGET_CHUNK_MS = 1.0
LONG_MARKER = "membench-bench-gateway-long-answer"
PIECE_CHARS = 16  # characters per text delta of the long answer
_CITATION_TAIL = len("\n\nMemory citations: none")  # what the scripted model appends to `say`


class UnixHTTPConnection(http.client.HTTPConnection):
    """`http.client.HTTPConnection` to an HTTP server on a Unix socket (the gateway's channel)."""

    def __init__(self, socket_path: str, timeout: float = 60.0):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = str(socket_path)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


# ------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class Latency:
    n: int
    p50_ms: float
    p95_ms: float


@dataclass(frozen=True)
class CallFigures:
    """One API and answer kind: `calls` calls per path."""
    api: str
    streamed: bool
    events: int  # SSE events per answer (0 when not streamed)
    direct: Latency
    via: Latency
    added_p50_ms: float  # via.p50 − direct.p50
    added_p95_ms: float  # via.p95 − direct.p95
    paired_median_ms: float  # median over i of via_i − direct_i


@dataclass(frozen=True)
class ChunkFigures:
    """One API: a short and a long stream of the same answer, `chunk_calls` calls each per path."""
    api: str
    chunks: int  # text deltas in the long answer
    events_short: int
    events_long: int
    direct_short: Latency
    via_short: Latency
    direct_long: Latency
    via_long: Latency
    added_short_ms: float  # median via − median direct
    added_long_ms: float
    per_chunk_ms: float  # (added_long − added_short) / (events_long − events_short)
    per_chunk_amortized_ms: float  # added_long / events_long (an upper bound: holds the per-call cost)


@dataclass(frozen=True)
class GatewayBench:
    calls: int
    chunks: int
    chunk_calls: int
    warmup: int
    keepalive: bool
    isolate: bool
    prompt_bytes: int  # size of the filler text in each request's prompt
    pause_ms: float  # idle time before each timed call
    per_call: list[CallFigures]
    per_chunk: list[ChunkFigures]
    gateway_calls: int  # requests sent through the gateway, warm-up included
    model_calls: int  # ModelCall events the gateway emitted
    statuses: dict[str, int]  # ModelCall status -> count
    chunk_counts_match: bool  # every streamed ModelCall's `chunks` equals the events the client read
    elapsed_s: float
    machine: dict[str, Any] = field(default_factory=dict)

    @property
    def worst_added_p95_ms(self) -> float:
        return max((row.added_p95_ms for row in self.per_call), default=0.0)

    @property
    def worst_per_chunk_ms(self) -> float:
        return max((row.per_chunk_ms for row in self.per_chunk), default=0.0)

    @property
    def targets(self) -> dict[str, bool]:
        return {"call_p95_le_5ms": self.worst_added_p95_ms <= TARGET_CALL_P95_MS,
                "chunk_le_1ms": self.worst_per_chunk_ms <= TARGET_CHUNK_MS}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(worst_added_p95_ms=self.worst_added_p95_ms, worst_per_chunk_ms=self.worst_per_chunk_ms,
                   targets=self.targets)
        return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0–100), linear between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100.0
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _latency(ms: list[float]) -> Latency:
    return Latency(len(ms), percentile(ms, 50), percentile(ms, 95))


# ------------------------------------------------------------------------------------ requests
def _filler(size: int) -> str:
    words = "the quick brown fox jumps over the lazy dog while tests run in 0.05s at 2024-01-02 ".split()
    out, n, i = [], 0, 0
    while n < size:
        word = words[i % len(words)]
        out.append(word)
        n += len(word) + 1
        i += 1
    return " ".join(out)[:size]


def request_body(api: str, stream: bool, long_answer: bool = False, prompt_bytes: int = 0) -> bytes:
    """A request of `api`. `long_answer`: names the scripted long answer and carries a tool result,
    so the scripted model answers with its `say` text (the text the long stream splits)."""
    prompt = (LONG_MARKER if long_answer else "Say something.") + (" " + _filler(prompt_bytes) if prompt_bytes else "")
    body: dict[str, Any] = {"model": "bench-model", "stream": stream}
    if api == "chat_completions":
        body["messages"] = [{"role": "user", "content": prompt}]
        if long_answer:
            body["messages"] += [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
        if stream:
            body["stream_options"] = {"include_usage": True}
    elif api == "responses":
        body["input"] = [{"role": "user", "content": prompt}]
        if long_answer:
            body["input"] += [{"type": "function_call", "call_id": "call_1", "name": "noop", "arguments": "{}"},
                              {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]
    else:
        body["max_tokens"] = 1024
        body["messages"] = [{"role": "user", "content": prompt}]
        if long_answer:
            body["messages"] += [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "noop", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]
    return json.dumps(body).encode()


def long_script(chunks: int) -> dict[str, Any]:
    """A script whose answer to `LONG_MARKER` (after a tool result) is a text the upstream splits
    into exactly `chunks` deltas of PIECE_CHARS characters when its `chunks` knob is `chunks`."""
    total = max(chunks, 1) * PIECE_CHARS
    say = ("lorem ipsum dolor sit amet " * (total // 27 + 2))[:max(1, total - _CITATION_TAIL)]
    return {"sessions": [{"when": LONG_MARKER, "files": {}, "slots": {}, "say": say}]}


HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer placeholder",
           "anthropic-version": "2023-06-01"}


def sse_events(data: bytes) -> int:
    """Server-sent events in a body (blocks with a data: line)."""
    return sum(1 for block in data.replace(b"\r\n", b"\n").split(b"\n\n") if b"data:" in block)


class _Client:
    """One path (direct or via the gateway): a connection factory and, with keep-alive, the
    connection kept between calls."""

    def __init__(self, connect: Callable[[], http.client.HTTPConnection], keepalive: bool):
        self.connect, self.keepalive = connect, keepalive
        self.connection: http.client.HTTPConnection | None = None
        self.calls = 0

    def call(self, path: str, body: bytes) -> tuple[float, bytes]:
        """(milliseconds from sending to the whole answer read, the answer body)."""
        if self.keepalive and self.connection is None:
            self.connection = self.connect()
            self.connection.connect()
        started = time.perf_counter_ns()
        connection = self.connection if self.keepalive and self.connection is not None else self.connect()
        connection.request("POST", path, body=body, headers=HEADERS)
        response = connection.getresponse()
        data = response.read()
        elapsed = (time.perf_counter_ns() - started) / 1e6
        self.calls += 1
        if not self.keepalive:
            connection.close()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status} from {path}: {data[:300]!r}")
        return elapsed, data

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _pair(direct: _Client, via: _Client, path: str, body: bytes, calls: int, warmup: int, pause_s: float = 0.0
          ) -> tuple[list[float], list[float], int]:
    """Interleaved calls; (direct ms, via ms, SSE events per answer, 0 if not a stream). `pause_s`:
    idle time before every timed call (an agent's think and tool time between model calls)."""
    for _ in range(warmup):
        direct.call(path, body)
        via.call(path, body)
    gc.collect()
    d_ms, v_ms, events = [], [], set()
    for i in range(calls):
        first, second = (via, direct) if i % 2 else (direct, via)
        time.sleep(pause_s)
        a, a_data = first.call(path, body)
        time.sleep(pause_s)
        b, b_data = second.call(path, body)
        (d, d_data), (v, v_data) = ((b, b_data), (a, a_data)) if i % 2 else ((a, a_data), (b, b_data))
        d_ms.append(d)
        v_ms.append(v)
        events.add((sse_events(d_data), sse_events(v_data)))
    if len(events) != 1 or len({*events.pop()}) != 1:
        raise RuntimeError(f"the two paths did not return the same stream on {path}")
    return d_ms, v_ms, sse_events(d_data)


# ------------------------------------------------------------------------------------ processes
def scripted_upstream(script: dict[str, Any]) -> Any:
    """A `ScriptedUpstream` (not started; it sends with TCP_NODELAY, as model servers do) that keeps
    only its last few requests (it keeps every one otherwise)."""
    from membench.bench.scripted_model_server import ScriptedUpstream

    upstream = ScriptedUpstream(script)
    # only the last few requests: the benchmark appends to them and never reads them
    upstream.requests = collections.deque(maxlen=8)  # type: ignore[assignment]
    return upstream


def _upstream_process(conn: Any, script: dict[str, Any]) -> None:
    with scripted_upstream(script) as upstream:
        conn.send(upstream.base_url)
        while True:
            command = conn.recv()
            if command[0] == "chunks":
                upstream.chunks = command[1]
                conn.send("ok")
            else:
                break


def _gateway_process(conn: Any, base_url: str) -> None:
    from membench.gateway.server import GatewaySettings, ModelGateway

    events: list[dict[str, Any]] = []
    gateway = ModelGateway(GatewaySettings(base_urls={"*": base_url}), blob_dir=None)
    channel = gateway.open_channel("bench-gateway", lambda kind, payload, visibility="harness":
                                   events.append(payload) if kind == "ModelCall" else None)
    conn.send(str(channel.socket_path))
    conn.recv()
    channel.close()
    conn.send([{k: e[k] for k in ("status", "api", "streamed", "chunks", "latency_ms", "first_byte_ms")}
               for e in events])


class _Remote:
    """A child process running one of the servers, driven over a pipe."""

    def __init__(self, target: Callable[..., None], *args: Any):
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=target, args=(child, *args), daemon=True)
        self.process.start()
        child.close()

    def ask(self, *command: Any, timeout_s: float = 60.0) -> Any:
        if command:
            self.conn.send(command)
        if not self.conn.poll(timeout_s):
            raise RuntimeError("a benchmark server process did not answer")
        return self.conn.recv()

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class _Servers:
    """The upstream and the gateway channel: in child processes (isolate) or in this one."""

    def __init__(self, script: dict[str, Any], isolate: bool):
        self.isolate = isolate
        self._remotes: list[_Remote] = []
        self._local: list[Any] = []
        self._events: list[dict[str, Any]] = []
        if isolate:
            upstream = _Remote(_upstream_process, script)
            self._remotes.append(upstream)
            self.base_url = upstream.ask()
            gateway = _Remote(_gateway_process, self.base_url)
            self._remotes.append(gateway)
            self.socket_path = gateway.ask()
            self._set_chunks = lambda n: upstream.ask("chunks", n)
        else:
            from membench.gateway.server import GatewaySettings, ModelGateway

            up = scripted_upstream(script).__enter__()
            self._local.append(up)
            self.base_url = up.base_url
            local = ModelGateway(GatewaySettings(base_urls={"*": self.base_url}), blob_dir=None)
            channel = local.open_channel("bench-gateway", lambda kind, payload, visibility="harness":
                                           self._events.append(payload) if kind == "ModelCall" else None)
            self._local.append(channel)
            self.socket_path = str(channel.socket_path)
            self._set_chunks = lambda n: setattr(up, "chunks", n)

    def set_chunks(self, n: int) -> None:
        self._set_chunks(n)

    def close(self) -> list[dict[str, Any]]:
        """Stops both; the gateway's ModelCall payloads (after the calls in flight are done)."""
        events: list[dict[str, Any]] = []
        if self.isolate:
            upstream, gateway = self._remotes
            try:
                gateway.conn.send(("stop",))
                events = gateway.ask()
            finally:
                gateway.stop()
                upstream.stop()
        else:
            up, channel = self._local
            channel.close()
            up.__exit__(None, None, None)
            events = list(self._events)
        return events


# ------------------------------------------------------------------------------------ the benchmark
def bench_gateway(calls: int = 500, chunks: int = 200, chunk_calls: int = 100, warmup: int = 20,
                  keepalive: bool = True, isolate: bool = True, prompt_bytes: int = 0, pause_ms: float = 0.0,
                  apis: tuple[str, ...] = APIS, log: Callable[[str], None] | None = None) -> GatewayBench:
    if calls < 1 or chunk_calls < 1 or chunks < 2:
        raise ValueError("calls and chunk_calls must be >= 1, chunks >= 2")
    log = log or (lambda message: None)
    started = time.perf_counter()
    servers = _Servers(long_script(chunks), isolate)
    events: list[dict[str, Any]] = []
    clients: list[_Client] = []
    per_call: list[CallFigures] = []
    per_chunk: list[ChunkFigures] = []
    client_events: list[int] = []  # SSE events each streamed gateway answer held, in order
    try:
        host = urlsplit(servers.base_url)
        direct = _Client(lambda: http.client.HTTPConnection(host.hostname, host.port, timeout=60), keepalive)
        via = _Client(lambda: UnixHTTPConnection(servers.socket_path), keepalive)
        clients += [direct, via]

        servers.set_chunks(1)
        for api in apis:
            for stream in (False, True):
                log(f"per call: {api}, {'streamed' if stream else 'JSON'}, {calls} calls per path ...")
                body = request_body(api, stream, prompt_bytes=prompt_bytes)
                d_ms, v_ms, n_events = _pair(direct, via, PATHS[api], body, calls, warmup, pause_ms / 1000)
                if stream:
                    client_events += [n_events] * (warmup + calls)
                d, v = _latency(d_ms), _latency(v_ms)
                per_call.append(CallFigures(
                    api, stream, n_events if stream else 0, d, v, v.p50_ms - d.p50_ms, v.p95_ms - d.p95_ms,
                    statistics.median(b - a for a, b in zip(d_ms, v_ms))))

        for api in apis:
            log(f"per chunk: {api}, 1 and {chunks} deltas, {chunk_calls} calls each per path ...")
            body = request_body(api, True, long_answer=True, prompt_bytes=prompt_bytes)
            runs = {}
            for label, n in (("short", 1), ("long", chunks)):
                servers.set_chunks(n)
                runs[label] = _pair(direct, via, PATHS[api], body, chunk_calls, max(1, warmup // 4), pause_ms / 1000)
                client_events += [runs[label][2]] * (max(1, warmup // 4) + chunk_calls)
            (ds, vs, es), (dl, vl, el) = runs["short"], runs["long"]
            added_s = statistics.median(vs) - statistics.median(ds)
            added_l = statistics.median(vl) - statistics.median(dl)
            if el <= es:
                raise RuntimeError(f"the long stream of {api} has {el} events, the short one {es}")
            per_chunk.append(ChunkFigures(
                api, chunks, es, el, _latency(ds), _latency(vs), _latency(dl), _latency(vl), added_s, added_l,
                (added_l - added_s) / (el - es), added_l / el))
    finally:
        for client in clients:
            client.close()
        events = servers.close()

    streamed = [e["chunks"] for e in events if e["streamed"]]
    return GatewayBench(
        calls=calls, chunks=chunks, chunk_calls=chunk_calls, warmup=warmup, keepalive=keepalive, isolate=isolate,
        prompt_bytes=prompt_bytes, pause_ms=pause_ms, per_call=per_call, per_chunk=per_chunk,
        gateway_calls=sum(c.calls for c in clients[1:]), model_calls=len(events),
        statuses=dict(collections.Counter(e["status"] for e in events)),
        chunk_counts_match=streamed == client_events, elapsed_s=time.perf_counter() - started)


def format_table(result: GatewayBench) -> list[str]:
    """The human form of a result: one line per row."""
    lines = [f"connections: {'keep-alive (one per path)' if result.keepalive else 'a fresh one per call'}; "
             f"servers: {'own processes' if result.isolate else 'this process'}; "
             f"prompt filler: {result.prompt_bytes} bytes; pause before each call: {result.pause_ms:g} ms",
             f"per call ({result.calls} calls per path; ms)",
             f"{'api':<17} {'answer':<9} {'direct p50':>10} {'p95':>7} {'gateway p50':>11} {'p95':>7} "
             f"{'added p50':>9} {'p95':>7} {'paired p50':>10}"]
    for r in result.per_call:
        kind = f"SSE/{r.events}" if r.streamed else "JSON"
        lines.append(f"{r.api:<17} {kind:<9} {r.direct.p50_ms:>10.3f} {r.direct.p95_ms:>7.3f} {r.via.p50_ms:>11.3f} "
                     f"{r.via.p95_ms:>7.3f} {r.added_p50_ms:>9.3f} {r.added_p95_ms:>7.3f} {r.paired_median_ms:>10.3f}")
    lines += [f"per chunk ({result.chunk_calls} calls per path and length; medians in ms)",
              f"{'api':<17} {'events':>11} {'direct':>15} {'gateway':>15} {'added':>15} "
              f"{'per chunk':>9} {'amortized':>9}"]
    for c in result.per_chunk:
        lines.append(f"{c.api:<17} {c.events_short:>4} / {c.events_long:<4} "
                     f"{c.direct_short.p50_ms:>6.3f} / {c.direct_long.p50_ms:<6.3f} "
                     f"{c.via_short.p50_ms:>6.3f} / {c.via_long.p50_ms:<6.3f} "
                     f"{c.added_short_ms:>6.3f} / {c.added_long_ms:<6.3f} "
                     f"{c.per_chunk_ms * 1000:>6.1f} us {c.per_chunk_amortized_ms * 1000:>6.1f} us")
    targets = result.targets
    lines += [f"gateway: {result.model_calls} ModelCall events for {result.gateway_calls} calls, statuses "
              f"{result.statuses}; chunk counts match the client's: {result.chunk_counts_match}",
              f"targets: added p95 per call <= {TARGET_CALL_P95_MS:g} ms: worst {result.worst_added_p95_ms:.3f} ms "
              f"({'met' if targets['call_p95_le_5ms'] else 'MISSED'}); per chunk <= {TARGET_CHUNK_MS:g} ms: worst "
              f"{result.worst_per_chunk_ms * 1000:.1f} us ({'met' if targets['chunk_le_1ms'] else 'MISSED'}); "
              f"{result.elapsed_s:.1f} s"]
    return lines
