"""The model wire APIs the gateway relays, as far as it needs them (pure functions).

- OpenAI Chat Completions (`POST …/chat/completions`): vLLM, llama.cpp, Ollama, OpenAI; the
  built-in `openai:` agent;
- OpenAI Responses (`POST …/responses`): Codex;
- Anthropic Messages (`POST …/messages`): Claude Code;
- OpenAI Embeddings (`POST …/embeddings`): the memory libraries' embedders (Mem0, the dense
  baseline; membench/memory_systems/libraries.py). Never streamed; its usage has only
  `prompt_tokens` (input), no output tokens.

What the gateway reads: which API a path is, the model a request names, whether it asked for a
stream, and the token usage of the answer, from a JSON body or from its server-sent events as
they pass. Token conventions (one for all three): `input_tokens` counts every prompt token,
cached ones included; `cached_tokens` is the part read from a prompt cache; `reasoning_tokens`
is the part of `output_tokens` spent reasoning. Anthropic reports cache reads and cache writes
apart from `input_tokens`, so its input is the sum of the three.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

# path suffix -> (api, provider)
APIS = {
    "/chat/completions": ("chat_completions", "openai"),
    "/responses": ("responses", "openai"),
    "/messages": ("messages", "anthropic"),
    "/embeddings": ("embeddings", "openai"),
}
# The only request targets a channel forwards: the API root `/v1` and one suffix of APIS, byte for
# byte. The upstream's path is the configured base URL's path plus that suffix, never the agent's.
ENDPOINTS = {"/v1" + suffix: found for suffix, found in APIS.items()}
# Query strings clients send on their own, accepted only verbatim and forwarded as this fixed text:
# the Anthropic SDK (Claude Code) sends `POST /v1/messages?beta=true`.
FIXED_QUERIES = {"/v1/messages": frozenset({"beta=true"})}


@dataclass(frozen=True)
class Endpoint:
    """A served endpoint: `suffix` is what the gateway appends to the configured base URL."""
    api: str
    provider: str
    suffix: str
    query: str  # "" or one of FIXED_QUERIES


class PathRefused(ValueError):
    """A request target the gateway does not forward; the message says why (for the agent and its
    ModelCall); `http_status` 404 for a well-formed path it does not serve, 400 for a malformed one."""

    def __init__(self, message: str, http_status: int = 400):
        super().__init__(message)
        self.http_status = http_status


def endpoint_of(target: str) -> Endpoint:
    """The endpoint a raw request target names, or PathRefused. Exact matching is the normalization:
    no dot-segment (plain or percent-encoded), encoded slash, `;` parameter, doubled slash, other
    case, absolute URL or agent query string can name a served endpoint, so none reaches the upstream."""
    path, mark, query = target.partition("?")
    if path in ENDPOINTS and (not mark or query in FIXED_QUERIES.get(path, ())):
        api, provider = ENDPOINTS[path]
        return Endpoint(api, provider, path[len("/v1"):], query if mark else "")
    if path in ENDPOINTS:
        raise PathRefused(f"{path} takes no query string (got ?{query[:100]!r})")
    lowered = path.lower()
    segments = lowered.split("/")
    if not path.startswith("/"):
        why = "not an origin-form path (an absolute URL or '*')"
    elif any(s in (".", "..") for s in segments) or "%2e" in lowered:
        why = "a dot-segment"
    elif "%2f" in lowered or "%5c" in lowered or "\\" in path:
        why = "an encoded or backward slash"
    elif ";" in path:
        why = "a ';' parameter"
    elif "//" in path:
        why = "an empty segment ('//')"
    else:
        why = "not an endpoint this gateway serves"
    raise PathRefused(f"{target[:200]!r}: {why}; the served paths are {', '.join(sorted(ENDPOINTS))}",
                      404 if why.startswith("not an endpoint") else 400)


def api_of(path: str) -> tuple[str, str] | None:
    """(api, provider) a request path's suffix names (query string ignored), or None: what a refused
    path was aiming at, for its ModelCall. Never a licence to forward (endpoint_of is)."""
    bare = path.split("?", 1)[0].rstrip("/")
    for suffix, found in APIS.items():
        if bare.endswith(suffix):
            return found
    return None


@dataclass
class Usage:
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


def _n(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def usage_of(api: str, usage: Any) -> Usage:
    """A `usage` object of `api` in the gateway's token convention (module docstring)."""
    if not isinstance(usage, dict):
        return Usage()
    if api == "chat_completions":
        return Usage(_n(usage.get("prompt_tokens")), _n(_get(usage, "prompt_tokens_details", "cached_tokens")),
                     _n(usage.get("completion_tokens")),
                     _n(_get(usage, "completion_tokens_details", "reasoning_tokens")))
    if api == "embeddings":  # an embedding has no output tokens
        return Usage(_n(usage.get("prompt_tokens")), 0, 0, 0)
    if api == "responses":
        return Usage(_n(usage.get("input_tokens")), _n(_get(usage, "input_tokens_details", "cached_tokens")),
                     _n(usage.get("output_tokens")), _n(_get(usage, "output_tokens_details", "reasoning_tokens")))
    cache_read = _n(usage.get("cache_read_input_tokens"))
    return Usage(_n(usage.get("input_tokens")) + _n(usage.get("cache_creation_input_tokens")) + cache_read,
                 cache_read, _n(usage.get("output_tokens")), 0)


def usage_of_body(api: str, body: Any) -> Usage:
    """Usage of a whole (non-streamed) JSON response."""
    if not isinstance(body, dict):
        return Usage()
    return usage_of(api, body.get("usage"))


class StreamUsage:
    """Follows a server-sent-event stream chunk by chunk and keeps its usage and event count.

    chat_completions: the last chunk carrying `usage` (sent when `stream_options.include_usage`);
    responses: `response.completed` (or `.incomplete`/`.failed`) -> `response.usage`;
    messages: `message_start` -> `message.usage`, then each `message_delta` -> `usage` (output
    tokens there are cumulative, so the last one counts)."""

    def __init__(self, api: str):
        self.api = api
        self.usage = Usage()
        self.events = 0
        self._buffer = b""
        self._anthropic_start: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        while True:
            cut = _event_end(self._buffer)
            if cut is None:
                return
            raw, self._buffer = self._buffer[:cut[0]], self._buffer[cut[1]:]
            self._event(raw)

    def close(self) -> None:
        if self._buffer.strip():
            self._event(self._buffer)
        self._buffer = b""

    def _event(self, raw: bytes) -> None:
        data = [line[5:].lstrip() for line in raw.split(b"\n") if line.startswith(b"data:")]
        if not data:
            return
        self.events += 1
        text = b"\n".join(data)
        if text.strip() == b"[DONE]":
            return
        try:
            doc = json.loads(text)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        kind = doc.get("type")
        if self.api == "chat_completions":
            if isinstance(doc.get("usage"), dict):
                self.usage = usage_of(self.api, doc["usage"])
        elif self.api == "responses":
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                self.usage = usage_of(self.api, _get(doc, "response", "usage"))
        elif kind == "message_start":
            self._anthropic_start = dict(_get(doc, "message", "usage") or {})
            self.usage = usage_of(self.api, self._anthropic_start)
        elif kind == "message_delta" and isinstance(doc.get("usage"), dict):
            merged = {**self._anthropic_start, **{k: v for k, v in doc["usage"].items() if v is not None}}
            self.usage = usage_of(self.api, merged)


def _event_end(buffer: bytes) -> tuple[int, int] | None:
    """(end of the first event, start of the next) in an SSE buffer; events end at a blank line."""
    best = None
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        at = buffer.find(sep)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, at + len(sep))
    return best


def request_model(body: Any) -> str:
    return str(body.get("model", "")) if isinstance(body, dict) else ""


# ---------------------------------------------------------------------------- replay matching
# Fields that differ between two runs of the same agent on the same task without changing what is
# asked: per-process ids and cache keys, the caller's metadata. Dropped wherever they occur.
VOLATILE_KEYS = frozenset({"id", "prompt_cache_key", "client_metadata", "metadata", "user", "store",
                           "service_tier", "safety_identifier"})
# Inside strings: UUIDs, dates and times, long hex ids (request ids, device ids), durations (a
# test run's "passed in 0.05s", Codex's "Wall time: 0.0012 seconds") and Codex's per-output
# "Chunk ID" are masked: they change from run to run of the same commands.
_VOLATILE_TEXT = re.compile(  # the lookahead skips, cheaply, every position no alternative can start at
    r"(?=[0-9a-fA-FC])(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
    r"|\b[0-9a-f]{32,}\b"
    r"|\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b"
    r"|Chunk ID: \w+)")


def normalize_request(body: Any) -> Any:
    """The request as replay compares it: VOLATILE_KEYS dropped at every depth, volatile text
    masked in every string. Two requests match when their normalized forms are equal JSON."""
    if isinstance(body, dict):
        return {k: normalize_request(v) for k, v in body.items() if k not in VOLATILE_KEYS}
    if isinstance(body, list):
        return [normalize_request(v) for v in body]
    if isinstance(body, str):
        return _VOLATILE_TEXT.sub("~", body)
    return body


def match_digest(api: str, body: Any) -> str:
    canonical = json.dumps([api, normalize_request(body)], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- the divergence rule
# What a command prints that the sandbox cannot hold still from run to run: a fresh uid per sandbox
# (`ls -la`, `id`), pids (`ps`), link counts and sizes under /proc, clock times and day names
# (`date`), column padding that follows the widths of those numbers. Masked only inside tool
# outputs — what the environment answered — never in what the model or the harness wrote.
_TOOL_OUTPUT_DIGITS = re.compile(r"\d+")
_TOOL_OUTPUT_CALENDAR = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
                                   r"[a-z]*\b")
_TOOL_OUTPUT_SPACE = re.compile(r"[ \t]+")
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})


def _loosen(value: Any) -> Any:
    if isinstance(value, str):
        value = _TOOL_OUTPUT_CALENDAR.sub("~", _TOOL_OUTPUT_DIGITS.sub("#", value))
        return _TOOL_OUTPUT_SPACE.sub(" ", value)
    if isinstance(value, list):
        return [_loosen(v) for v in value]
    if isinstance(value, dict):
        return {k: _loosen(v) for k, v in value.items()}
    return value


def _loosen_tool_outputs(api: str, body: Any) -> Any:
    if not isinstance(body, dict):
        return body
    body = dict(body)
    if api == "chat_completions" and isinstance(body.get("messages"), list):
        body["messages"] = [{**m, "content": _loosen(m.get("content"))} if isinstance(m, dict) and m.get("role") == "tool"
                            else m for m in body["messages"]]
    elif api == "responses" and isinstance(body.get("input"), list):
        body["input"] = [{**i, "output": _loosen(i.get("output"))} if isinstance(i, dict) and i.get("type") in _OUTPUT_ITEMS
                         else i for i in body["input"]]
    elif api == "messages" and isinstance(body.get("messages"), list):
        body["messages"] = [{**m, "content": [
            {**b, "content": _loosen(b.get("content"))} if isinstance(b, dict) and b.get("type") == "tool_result" else b
            for b in m["content"]]} if isinstance(m, dict) and isinstance(m.get("content"), list) else m
            for m in body["messages"]]
    return body


def loose_digest(api: str, body: Any) -> str:
    """The replay key under the divergence rule (docs/gateway.md, "Record and replay"): the request
    normalized as for `match_digest`, and inside tool outputs only, every digit run, day and month
    name masked and runs of spaces collapsed. Two requests with equal loose keys differ at most in
    what commands printed about uids, pids, sizes and clocks."""
    canonical = json.dumps([api, normalize_request(_loosen_tool_outputs(api, body))], sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
