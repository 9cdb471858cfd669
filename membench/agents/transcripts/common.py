"""What both transcript parsers share: the line loop (strict or lenient), typed field checks, and
a builder that makes the event payloads and keeps the token totals equal to the Turn sums."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from membench.agents.transcripts.base import Transcript, TranscriptError, TranscriptEvent, parse_citations
from membench.schemas.events import bounded_text

USAGE_KEYS = ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens")
_ABSENT = object()


class Malformed(Exception):
    """A line the parser cannot translate; the message says what is wrong (the loop adds where)."""


def field(obj: dict[str, Any], key: str, typ: type | tuple[type, ...], where: str, default: Any = _ABSENT) -> Any:
    """obj[key] if it is a `typ` (a bool is not an int); `default` when absent or null and a default
    is given; else Malformed naming the field as `where.key`."""
    name = f"{where}.{key}" if where else key
    value = obj.get(key)
    if value is None:
        if default is _ABSENT:
            raise Malformed(f"missing field '{name}'")
        return default
    types = typ if isinstance(typ, tuple) else (typ,)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        wanted = " or ".join(t.__name__ for t in types)
        raise Malformed(f"field '{name}' must be {wanted}, got {type(value).__name__}")
    return value


def count(obj: dict[str, Any], key: str, where: str) -> int:
    """A non-negative int field, 0 when absent or null."""
    value = field(obj, key, int, where, 0)
    if value < 0:
        raise Malformed(f"field '{where}.{key}' must be a non-negative int, got {value}")
    return value


def digest(value: Any) -> str:
    """SHA-256 of a string's UTF-8 bytes, or of any other JSON value's canonical encoding."""
    data = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


class Builder:
    """Collects the events of one transcript in order. Text turns carry no tokens; every token
    the transcript reports arrives on a usage Turn (`usage`), so the totals are the Turn sums."""

    def __init__(self) -> None:
        self.events: list[TranscriptEvent] = []
        self.loose: list[str] = []
        self.totals = dict.fromkeys(USAGE_KEYS, 0)
        self.tool_calls = 0

    def turn(self, text: str, *, role: str = "agent", source_kind: str | None = None, visibility: str = "agent",
             usage: dict[str, int] | None = None, latency_ms: int = 0) -> None:
        usage = usage or {}
        self.events.append(TranscriptEvent("Turn", {
            "role": role, "text": bounded_text(text), "source_event_id": None, "source_kind": source_kind,
            **{key: usage.get(key, 0) for key in USAGE_KEYS}, "latency_ms": latency_ms}, visibility))

    def usage(self, usage: dict[str, int], latency_ms: int = 0) -> None:
        """A usage Turn: role agent, source_kind "usage", empty text (memory systems skip it)."""
        for key in USAGE_KEYS:
            self.totals[key] += usage.get(key, 0)
        self.turn("", source_kind="usage", usage=usage, latency_ms=latency_ms)

    def tool_call(self, call_id: str, name: str, arguments_digest: str, is_patch: bool) -> None:
        self.tool_calls += 1
        self.events.append(TranscriptEvent("ToolCall", {"call_id": call_id, "name": name,
                                                        "arguments_digest": arguments_digest, "is_patch": is_patch}))

    def tool_result(self, call_id: str, name: str, exit_code: int, output: str | None, is_patch: bool,
                    duration_ms: int = 0) -> None:
        self.events.append(TranscriptEvent("ToolResult", {
            "call_id": call_id, "name": name, "exit_code": exit_code, "duration_ms": duration_ms,
            "output_size": 0 if output is None else len(output.encode("utf-8", "surrogatepass")),
            "is_patch": is_patch, "output": None if output is None else bounded_text(output)}))

    def compaction(self, tokens_before: int, tokens_after: int) -> None:
        self.events.append(TranscriptEvent("ContextCompaction", {"tokens_before": tokens_before,
                                                                 "tokens_after": tokens_after}))

    def finish(self, final_message: str, status: str) -> Transcript:
        """The loose lines (lenient mode) as one stdout Turn, then the citation, then the result."""
        if self.loose:
            self.turn("\n".join(self.loose), source_kind="stdout")
        cited = tuple(parse_citations(final_message))
        if cited:
            self.events.append(TranscriptEvent("MemoryCitation", {"memory_ids": list(cited)}))
        return Transcript(tuple(self.events), final_message, cited, self.totals["input_tokens"],
                          self.totals["cached_tokens"], self.totals["output_tokens"], self.totals["reasoning_tokens"],
                          self.tool_calls, status)


def read_lines(lines: Iterable[str], source: str, strict: bool, builder: Builder,
               handle: Callable[[dict[str, Any], str], None]) -> None:
    """Calls handle(doc, type) for each JSON object line with a string `type`; blank lines are
    skipped. A handler checks everything it needs before it changes any state, so a Malformed
    line leaves no partial trace: strict raises TranscriptError, lenient keeps the raw line."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            if not isinstance(doc, dict):
                raise Malformed(f"must be a JSON object, got {type(doc).__name__}")
            handle(doc, field(doc, "type", str, ""))
            continue
        except json.JSONDecodeError as exc:
            problem = f"not valid JSON ({exc.msg})"
        except RecursionError:
            problem = "not valid JSON (nested too deeply)"
        except Malformed as exc:
            problem = str(exc)
        if strict:
            raise TranscriptError(f"{source}:{number}: {problem}")
        builder.loose.append(line.rstrip("\r\n"))
