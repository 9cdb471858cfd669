"""The event envelope (docs/design.md §3) as Python values, and bounded payload strings."""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the payload types cost an import; annotations only (docs/design.md §3, typed payloads)
    from membench.schemas.payloads import BoundedText, ModelCall

NAMESPACE = "membench."
GENESIS_HASH = "0" * 64

RAW_KINDS = (
    "RunStarted", "SessionStarted", "Turn", "ToolCall", "ToolResult", "MemoryWrite", "MemoryRead",
    "MemoryCitation", "ContextCompaction", "PatchProduced", "OracleVerdict", "SessionEnded", "RunEnded", "ModelCall",
)

# A ModelCall whose call_id starts with this is the transfer protocol's simulated user's (a model
# user, membench/transfer_protocol/model_user.py), not the agent's: its usage is kept out of the agent's.
SIMULATED_USER_CALL_PREFIX = "user-"


def agent_model_call(payload: ModelCall) -> bool:
    return not payload["call_id"].startswith(SIMULATED_USER_CALL_PREFIX)


ERROR_TEXT_BOUND = 500  # an upstream's or a memory adapter's own error text, as kept in an event
_SECRET_PATTERNS = (  # (pattern, replacement)
    (re.compile(r"\b(?:sk|pk|rk|sess)-[A-Za-z0-9_\-]{8,}"), "[redacted]"),  # OpenAI-style, Anthropic sk-ant-…
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 [redacted]"),
    (re.compile(r"(?i)((?:api[_-]?key|x-api-key|access[_-]?token|token|secret|password|authorization)[\"']?\s*[:=]\s*"
                r"[\"']?)(?!(?i:bearer|basic)\b)[^\s\"',;&]{4,}"), r"\1[redacted]"),
    (re.compile(r"(://[^/\s:@]+:)[^/\s@]+@"), r"\1[redacted]@"),  # credentials in a URL
)


def error_text(text: str, secrets: tuple[str, ...] = (), bound: int = ERROR_TEXT_BOUND) -> str:
    """A third party's error message as an event keeps it (often the only word on why a unit
    failed): the known `secrets` and anything shaped like a key, token or password replaced by
    `[redacted]`, then cut to `bound` characters (marked). Redaction runs before the cut, so no secret is half kept."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text if len(text) <= bound else text[:bound] + f"… [{len(text) - bound} more characters]"


# Strings longer than this are stored as a preview plus the digest and length of the full value.
TEXT_BOUND = 16_384

# Code points UTF-8 cannot encode: lone surrogates (an agent printing "\ud800", JSON escapes of
# them) and the surrogate escapes Python gives undecodable bytes (os.fsdecode of a non-UTF-8 name).
_SURROGATES = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def safe_str(value: str) -> str:
    """`value` with every code point UTF-8 cannot encode replaced by U+FFFD: what an agent wrote
    must never make an event unencodable (an encoder error would crash the unit, and the harness
    would exclude the cell the agent chose to break; docs/design.md §3)."""
    return value if value.isascii() or not _SURROGATES.search(value) else _SURROGATES.sub(REPLACEMENT, value)


def original_bytes(value: str) -> bytes:
    """The exact bytes of any Python string: UTF-8, with surrogates kept as their 3-byte forms
    (`surrogatepass`), so a sanitized value's digest still identifies what the agent wrote."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def bounded_text(value: str, bound: int = TEXT_BOUND) -> BoundedText:
    """A BoundedText record. `text` is always encodable (safe_str); `sha256` and `length` describe
    the whole original value (its digest over original_bytes), so a sanitized text is recorded
    as such: its `sha256` differs from the digest of its untruncated `text` (text_sanitized)."""
    text = safe_str(value)
    truncated = len(value) > bound
    return {
        "text": text[:bound] if truncated else text,
        "sha256": hashlib.sha256(original_bytes(value)).hexdigest(),
        "length": len(value),
        "truncated": truncated,
    }


def text_sanitized(record: dict[str, Any]) -> bool | None:
    """Whether a BoundedText's text was sanitized (None: truncated, so its digest cannot tell)."""
    if record.get("truncated"):
        return None
    return hashlib.sha256(record["text"].encode("utf-8")).hexdigest() != record["sha256"]


def micros(ts: Any) -> int:
    """A timestamp-micros value as int (fastavro decodes it to an aware datetime)."""
    if isinstance(ts, int):
        return ts
    if isinstance(ts, _dt.datetime):
        delta = ts - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    raise TypeError(f"not a timestamp: {ts!r}")


@dataclass(slots=True)
class Event:
    """One envelope + payload. Treat as immutable (use dataclasses.replace): it is not frozen only
    because a frozen dataclass costs ~2 µs more to build, on the emit hot path."""

    event_id: str
    run_set: str
    run_id: str
    unit_id: str
    session_index: int
    seq: int
    ts: int  # microseconds since the epoch, UTC
    producer: str
    kind: str
    visibility: str  # "agent" | "harness"
    prev_hash: str
    payload: dict[str, Any] = field(hash=False)
    hash: str = ""

    def to_record(self) -> dict[str, Any]:
        """The Avro record; the payload union branch is named by `kind`."""
        return {
            "event_id": self.event_id,
            "run_set": self.run_set,
            "run_id": self.run_id,
            "unit_id": self.unit_id,
            "session_index": self.session_index,
            "seq": self.seq,
            "ts": self.ts,
            "producer": self.producer,
            "kind": self.kind,
            "visibility": self.visibility,
            "prev_hash": self.prev_hash,
            "payload": (NAMESPACE + self.kind, self.payload),
            "hash": self.hash,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Event":
        payload = record["payload"]
        if isinstance(payload, tuple):  # read with return_record_name
            payload = payload[1]
        return cls(
            event_id=record["event_id"],
            run_set=record["run_set"],
            run_id=record["run_id"],
            unit_id=record["unit_id"],
            session_index=record["session_index"],
            seq=record["seq"],
            ts=micros(record["ts"]),
            producer=record["producer"],
            kind=record["kind"],
            visibility=record["visibility"],
            prev_hash=record["prev_hash"],
            payload=payload,
            hash=record["hash"],
        )
