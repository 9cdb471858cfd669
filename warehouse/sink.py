"""Batched, idempotent inserts into the warehouse.

Every batch carries an `insert_deduplication_token` derived from what it holds (a run's seq
range for raw events, the derived ids for derived rows), so a retried batch lands exactly once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from schemas.derived import DerivedEvent
from schemas.events import Event
from warehouse.protocol import WarehouseStore
from warehouse.tables import TRAJECTORY_COLUMNS, derived_columns, table_for_kind

_COLUMN_NAMES = [name for name, _ in TRAJECTORY_COLUMNS]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def payload_json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def trajectory_row(event: Event, datum: bytes, fingerprint_hex: str, topic: str = "", partition: int = -1,
                   offset: int = -1) -> list[Any]:
    return [
        event.event_id, event.run_set, event.run_id, event.unit_id, event.session_index, event.seq,
        _EPOCH + dt.timedelta(microseconds=event.ts), event.producer, event.kind, event.visibility,
        event.prev_hash, event.hash, payload_json(event.payload), fingerprint_hex, datum, topic, partition, offset,
    ]


def insert_raw(warehouse: WarehouseStore, rows: list[list[Any]], token: str) -> None:
    warehouse.insert("trajectory_events", rows, _COLUMN_NAMES, token)


def insert_derived(warehouse: WarehouseStore, derived: Iterable[DerivedEvent], token_prefix: str = "derived") -> int:
    by_kind: dict[str, list[DerivedEvent]] = defaultdict(list)
    for item in derived:
        by_kind[item.kind].append(item)
    columns = derived_columns()
    count = 0
    for kind, items in sorted(by_kind.items()):
        names = [name for name, _ in columns[kind]]
        rows = [[item.derived_id, item.source_seq] + [item.payload.get(n) for n in names[2:]] for item in items]
        ids = hashlib.sha256("\n".join(sorted(i.derived_id for i in items)).encode()).hexdigest()
        warehouse.insert(table_for_kind(kind), rows, names, f"{token_prefix}:{kind}:{ids}")
        count += len(rows)
    return count


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
        self._fingerprint = fingerprint_hex
        self._max = max_buffer
        self._max_age = max_age_s
        self._before_write = before_write
        self._raw: list[list[Any]] = []
        self._derived: list[DerivedEvent] = []
        self._oldest: float | None = None
        self.raw_written = 0

    def add(self, event: Event, datum: bytes, derived: list[DerivedEvent]) -> None:
        if self._oldest is None:
            self._oldest = time.monotonic()
        self._raw.append(trajectory_row(event, datum, self._fingerprint))
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
            spans: dict[str, list[int]] = {}
            for row in self._raw:
                span = spans.setdefault(row[2], [row[5], row[5]])
                span[0], span[1] = min(span[0], row[5]), max(span[1], row[5])
            key = ";".join(f"{run}:{a}-{b}" for run, (a, b) in sorted(spans.items()))
            insert_raw(self.warehouse, self._raw, "raw:" + hashlib.sha256(key.encode()).hexdigest())
            self.raw_written += len(self._raw)
        if self._derived:
            insert_derived(self.warehouse, self._derived)
        self._raw, self._derived, self._oldest = [], [], None
