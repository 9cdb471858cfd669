"""Batched, idempotent inserts into the warehouse.

Every batch carries an `insert_deduplication_token` derived from what it holds (a run's seq
range for raw events, the derived ids for derived rows), so a retried batch lands exactly once.

A raw row is made from the event's bytes, never from the producer's dict: a payload built
in-process may leave out an optional field at its default, which the log's bytes hold, so a row
made from the dict would keep a payload text no replay of the log gives back. Rows travel two
ways with the same values in every column: as ClickHouse RowBinary bytes built from the message
itself (`RawRowEncoder`; the Kafka sink, and the embedded pipeline's `RunBatchSink`): the
envelope's strings and integers are moved from the Avro datum without decoding them to Python
objects, and only the payload is decoded, because its JSON column is text that ClickHouse cannot
make from an Avro union of records; and as Python rows (`trajectory_row` of an event decoded from
the log: the embedded recovery, an in-memory read model).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import struct
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from fastavro import parse_schema, schemaless_reader

from membench.schemas.codec import HEADER_SIZE, MAGIC, DecodeError, decode, read_long
from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event
from membench.schemas.registry import Registry, SchemaVersion, default_registry
from membench.warehouse.protocol import WarehouseStore
from membench.warehouse.tables import TRAJECTORY_COLUMNS, derived_columns, table_for_kind

_COLUMN_NAMES = [name for name, _ in TRAJECTORY_COLUMNS]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode  # built once


def payload_json(payload: dict[str, Any]) -> str:
    return _JSON(payload)


def trajectory_row(event: Event, datum: bytes, fingerprint_hex: str, topic: str = "", partition: int = -1,
                   offset: int = -1) -> list[Any]:
    return [
        event.event_id, event.run_set, event.run_id, event.unit_id, event.session_index, event.seq,
        _EPOCH + dt.timedelta(microseconds=event.ts), event.producer, event.kind, event.visibility,
        event.prev_hash, event.hash, payload_json(event.payload), fingerprint_hex, datum, topic, partition, offset,
    ]


def decoded_row(datum: bytes, fingerprint_hex: str, topic: str = "", partition: int = -1, offset: int = -1,
                registry: Registry | None = None) -> list[Any]:
    """`trajectory_row` of the event DATUM holds (its writer schema named by FINGERPRINT_HEX), as
    the log gives it back: every optional field present. What a row is made of when only an
    in-process event is at hand (module doc)."""
    registry = registry or default_registry()
    _, record = decode(MAGIC + bytes.fromhex(fingerprint_hex) + datum, registry, plain=True)
    return trajectory_row(Event.from_record(record), datum, fingerprint_hex, topic, partition, offset)


def insert_raw(warehouse: WarehouseStore, rows: list[list[Any]], token: str) -> None:
    warehouse.insert("trajectory_events", rows, _COLUMN_NAMES, token)


_ULEB = [bytes([n]) for n in range(128)]
_INT32, _INT64, _UINT64 = struct.Struct("<i").pack, struct.Struct("<q").pack, struct.Struct("<Q").pack
# the envelope before the payload, in datum order (= the table's order): 0 string, 1 Int32, 2 UInt64,
# 3 Int64 (ts, timestamp-micros), 4 the visibility enum
_FIELD_KINDS = (0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 0)
_ENVELOPE_FIELDS = len(_FIELD_KINDS)


def _uleb(n: int) -> bytes:
    """RowBinary's string length: unsigned LEB128."""
    if n < 128:
        return _ULEB[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def rowbinary_string(value: bytes) -> bytes:
    return _uleb(len(value)) + value


class _Writer:
    """What the encoder needs of one writer schema of the `event` family."""

    def __init__(self, writer: SchemaVersion, reader: SchemaVersion):
        self.fingerprint = rowbinary_string(writer.fingerprint_hex.encode())
        envelope = [f["name"] for f in writer.schema_json["fields"]]
        expected = ["event_id", "run_set", "run_id", "unit_id", "session_index", "seq", "ts", "producer", "kind",
                    "visibility", "prev_hash", "payload", "hash"]
        if envelope != expected:  # the byte walk below is written for this envelope
            raise DecodeError(f"event.v{writer.version}: envelope {envelope} is not the one the sink moves as bytes")
        visibility = next(f for f in writer.schema_json["fields"] if f["name"] == "visibility")["type"]["symbols"]
        self.visibility = [rowbinary_string(symbol.encode()) for symbol in visibility]
        # the payload alone, as a one-field record in the event's namespace (so its named types keep their
        # full names), read with the writer's union and resolved to the newest one, as a full decode is
        self.payload_writer = self._payload_schema(writer)
        self.payload_reader = None if reader.fingerprint == writer.fingerprint else self._payload_schema(reader)

    @staticmethod
    def _payload_schema(version: SchemaVersion):
        union = next(f for f in version.schema_json["fields"] if f["name"] == "payload")["type"]
        return parse_schema({"type": "record", "name": "PayloadOnly", "namespace": version.schema_json["namespace"],
                             "fields": [{"name": "payload", "type": union}]}, named_schemas={})


class RawRowEncoder:
    """trajectory_events rows as ClickHouse RowBinary, built from single-object encoded messages.

    Per message: the envelope is walked in the Avro bytes (strings copied with a new length
    prefix, varints re-packed as fixed-width integers, the visibility enum mapped to its symbol),
    the payload is decoded (resolved to the newest event schema, as `decode` does) and written as
    the same JSON text `payload_json` writes, and the datum itself is copied. The values equal
    `trajectory_row`'s column for column (tests/warehouse/test_rowbinary_sink.py)."""

    def __init__(self, registry: Registry | None = None):
        self._registry = registry or default_registry()
        self._writers: dict[bytes, _Writer] = {}
        self._reader = self._registry.latest("event")

    def _writer(self, fingerprint: bytes) -> tuple[SchemaVersion, _Writer]:
        writer = self._registry.by_fingerprint(fingerprint)
        if writer is None:
            raise DecodeError(f"unknown schema fingerprint {fingerprint.hex()}")
        if writer.family != "event":
            raise DecodeError(f"a {writer.family} datum on the trajectory topic")
        cached = self._writers.get(fingerprint)
        if cached is None:
            cached = self._writers[fingerprint] = _Writer(writer, self._reader)
        return writer, cached

    def row(self, message: bytes, where: bytes) -> bytes:
        """One row; `where` is the RowBinary of (kafka_topic, kafka_partition, kafka_offset)
        (`location`). Raises DecodeError for a message the full decode would also refuse."""
        if len(message) < HEADER_SIZE or message[:2] != MAGIC:
            raise DecodeError("not Avro single-object encoding (missing C3 01 marker)")
        _, w = self._writer(bytes(message[2:HEADER_SIZE]))
        datum = bytes(message[HEADER_SIZE:])
        try:
            return self._row(datum, w, where)
        except DecodeError:
            raise
        except Exception as exc:  # truncated varints and strings, bad UTF-8, fastavro's many error types
            raise DecodeError(f"datum does not match its schema: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _row(datum: bytes, w: _Writer, where: bytes) -> bytes:
        # straight-line on purpose: a helper call per field costs more than the field itself
        parts: list[bytes] = []
        append = parts.append
        pos, size = 0, len(datum)
        for field in range(_ENVELOPE_FIELDS):
            b = datum[pos]
            if b < 0x80:  # one-byte varint: every length below 64 and small integers
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = read_long(datum, pos)
            kind = _FIELD_KINDS[field]
            if kind == 0:  # string
                end = pos + n
                if n < 0 or end > size:
                    raise DecodeError(f"string past the end of the datum at byte {pos}")
                value = datum[pos:end]
                value.decode()  # as the full decode, refuse what is not UTF-8
                append(_ULEB[n] if n < 128 else _uleb(n))
                append(value)
                pos = end
            elif kind == 1:
                append(_INT32(n))
            elif kind == 2:
                append(_UINT64(n))
            elif kind == 3:
                append(_INT64(n))
            else:  # the visibility enum
                append(w.visibility[n])
        buf = io.BytesIO(datum)
        buf.seek(pos)
        payload = schemaless_reader(buf, w.payload_writer, w.payload_reader)["payload"]  # type: ignore[index,call-overload]  # a record
        pos = buf.tell()
        n, pos = read_long(datum, pos)  # hash, the last field
        end = pos + n
        if n < 0 or end > size:
            raise DecodeError(f"string past the end of the datum at byte {pos}")
        if end != size:
            raise DecodeError(f"{size - end} trailing bytes after the datum")
        digest = datum[pos:end]
        digest.decode()
        text = _JSON(payload).encode()
        # the table's order: ..., prev_hash (appended above), hash, payload (JSON), schema_fingerprint, datum,
        # then where the sink read it
        parts += (_uleb(n), digest, _uleb(len(text)), text, w.fingerprint, _uleb(size), datum, where)
        return b"".join(parts)


def location(topic: str, partition: int, offset: int) -> bytes:
    """RowBinary of (kafka_topic, kafka_partition, kafka_offset)."""
    return rowbinary_string(topic.encode()) + _INT32(partition) + _INT64(offset)


_NOT_FROM_KAFKA = location("", -1, -1)  # the embedded path's rows: read from no topic


def insert_raw_rowbinary(warehouse: WarehouseStore, data: bytes, token: str) -> None:
    """Rows of `RawRowEncoder` (every column of trajectory_events, in table order), as one insert."""
    warehouse.insert_bytes("trajectory_events", _COLUMN_NAMES, data, "RowBinary", token)


def insert_derived(warehouse: WarehouseStore, derived: Iterable[DerivedEvent], token_prefix: str = "derived") -> int:
    """One insert per derived table. `run_results` (RunSummary) is written last: a run's summary row
    is the mark that every derived row of the batch that ended it has landed, so after a crash
    mid-batch a run that ended in the log without a summary row is one `recover` must fold again
    (membench/pipeline/embedded.py)."""
    count = 0
    for kind, names, rows, ids in _derived_inserts(derived):
        warehouse.insert(table_for_kind(kind), rows, names, f"{token_prefix}:{kind}:{ids}")
        count += len(rows)
    return count


def derived_table_rows(derived: Iterable[DerivedEvent], columns: dict[str, list[tuple[str, str]]] | None = None
                       ) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(table, columns, rows) of each insert `insert_derived` makes of DERIVED, in its order: what an
    in-memory read model keeps (membench/warehouse/memory_read_model.py). COLUMNS: `derived_columns()`,
    when the caller holds it."""
    return [(table_for_kind(kind), names, rows) for kind, names, rows, _ in _derived_inserts(derived, columns)]


def _derived_inserts(derived: Iterable[DerivedEvent], columns: dict[str, list[tuple[str, str]]] | None = None
                     ) -> list[tuple[str, list[str], list[list[Any]], str]]:
    """(kind, columns, rows, digest of the derived ids) per derived table, `run_results` last."""
    by_kind: dict[str, list[DerivedEvent]] = defaultdict(list)
    for item in derived:
        by_kind[item.kind].append(item)
    if columns is None:
        columns = derived_columns()
    out = []
    for kind, items in sorted(by_kind.items(), key=lambda pair: (pair[0] == "RunSummary", pair[0])):
        names = [name for name, _ in columns[kind]]
        rows = [[item.derived_id, item.source_seq] + [item.payload.get(n) for n in names[2:]] for item in items]
        ids = hashlib.sha256("\n".join(sorted(i.derived_id for i in items)).encode()).hexdigest()
        out.append((kind, names, rows, ids))
    return out


class RunBatchSink:
    """Buffers raw and derived events and writes them in batches: when a run ends and the batch
    is large or old enough, or when the buffer is large. A batch's token is the list of (run,
    first seq, last seq) spans it holds, so rewriting the same batch is a no-op.

    `before_write` runs before every warehouse write; the embedded pipeline makes its log durable
    there, so the warehouse never holds an event the log lacks.
    """

    def __init__(self, warehouse: WarehouseStore, fingerprint_hex: str, max_buffer: int = 5000, max_age_s: float = 1.0,
                 before_write: Any = None):
        self.warehouse = warehouse
        self._max = max_buffer
        self._max_age = max_age_s
        self._before_write = before_write
        self._encoder = RawRowEncoder()
        self._header = MAGIC + bytes.fromhex(fingerprint_hex)
        self._raw: list[bytes] = []  # RowBinary rows (`RawRowEncoder`)
        self._spans: dict[str, list[int]] = {}  # run -> [first seq, last seq] of the buffered rows
        self._derived: list[DerivedEvent] = []
        self._oldest: float | None = None
        self.raw_written = 0

    def add(self, event: Event, datum: bytes, derived: list[DerivedEvent]) -> None:
        if self._oldest is None:
            self._oldest = time.monotonic()
        self._raw.append(self._encoder.row(self._header + datum, _NOT_FROM_KAFKA))
        span = self._spans.get(event.run_id)
        if span is None:
            self._spans[event.run_id] = [event.seq, event.seq]
        else:
            span[0], span[1] = min(span[0], event.seq), max(span[1], event.seq)
        self._derived.extend(derived)
        if len(self._raw) >= self._max or (
                event.kind == "RunEnded" and time.monotonic() - self._oldest >= self._max_age):
            self.flush()

    def flush(self) -> None:
        if not self._raw and not self._derived:
            return
        if self._before_write is not None:
            self._before_write()
        if self._raw:
            key = ";".join(f"{run}:{a}-{b}" for run, (a, b) in sorted(self._spans.items()))
            insert_raw_rowbinary(self.warehouse, b"".join(self._raw), "raw:" + hashlib.sha256(key.encode()).hexdigest())
            self.raw_written += len(self._raw)
        if self._derived:
            insert_derived(self.warehouse, self._derived)
        self._raw, self._spans, self._derived, self._oldest = [], {}, [], None
