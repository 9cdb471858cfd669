"""Batched, idempotent inserts into the warehouse.

Every batch carries an `insert_deduplication_token` derived from what it holds (a run's seq
range for raw events, the derived ids for derived rows), so a retried batch lands exactly once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from schemas.derived import DerivedEvent
from schemas.events import Event
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


def insert_raw(warehouse: Any, rows: list[list[Any]], token: str) -> None:
    warehouse.insert("trajectory_events", rows, _COLUMN_NAMES, token)


def insert_derived(warehouse: Any, derived: Iterable[DerivedEvent], token_prefix: str = "derived") -> int:
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
    """Buffers each run's raw events and derived events; writes a run's batch at its end or when
    the buffer is large. Tokens are the run's seq range, so rewriting a batch is a no-op."""

    def __init__(self, warehouse: Any, fingerprint_hex: str, max_buffer: int = 5000):
        self.warehouse = warehouse
        self._fingerprint = fingerprint_hex
        self._max = max_buffer
        self._raw: dict[str, list[list[Any]]] = defaultdict(list)
        self._derived: dict[str, list[DerivedEvent]] = defaultdict(list)
        self.raw_written = 0

    def add(self, event: Event, datum: bytes, derived: list[DerivedEvent]) -> None:
        self._raw[event.run_id].append(trajectory_row(event, datum, self._fingerprint))
        self._derived[event.run_id].extend(derived)
        if event.kind == "RunEnded" or len(self._raw[event.run_id]) >= self._max:
            self.flush_run(event.run_id)

    def flush_run(self, run_id: str) -> None:
        rows = self._raw.pop(run_id, [])
        if rows:
            first, last = rows[0][5], rows[-1][5]
            insert_raw(self.warehouse, rows, f"raw:{run_id}:{first}-{last}")
            self.raw_written += len(rows)
        derived = self._derived.pop(run_id, [])
        if derived:
            insert_derived(self.warehouse, derived)

    def flush(self) -> None:
        for run_id in list(self._raw) + list(self._derived):
            self.flush_run(run_id)
