"""`membench sink`: raw and derived topics into the warehouse, exactly once.

Batches are inserted with an `insert_deduplication_token` built from topic/partition/offset
ranges, and offsets are committed only after the insert succeeded. After a crash between the
insert and the commit, the batch is read again; its raw rows are skipped by the partition
watermark (the highest `kafka_offset` already stored for that partition, read when the
partition is assigned), so every raw event lands exactly once even when the new batch has other
boundaries. Derived rows carry deterministic `derived_id`s; readers take `LIMIT 1 BY` them.

Raw events are moved as bytes: each message becomes a ClickHouse RowBinary row built from the
datum itself (`membench.warehouse.sink.RawRowEncoder`: envelope copied, only the payload decoded for its
JSON column), so no Event object or Python row is built and clickhouse-connect converts nothing.
The rows are those the Python path writes (tests/warehouse/test_rowbinary_sink.py).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from membench.schemas.codec import DecodeError, unframe, decode_datum
from membench.schemas.derived import DerivedEvent
from membench.bus.kafka_config import consumer_config
from membench.schemas.registry import default_registry
from membench.bus.topics import topics_from_dsn
from membench.warehouse.protocol import WarehouseReader, WarehouseStore
from membench.warehouse.sink import RawRowEncoder, insert_derived, insert_raw_rowbinary, location


@dataclass
class SinkStats:
    raw: int = 0
    derived: int = 0
    skipped: int = 0
    undecodable: int = 0
    batches: int = 0
    cpu_seconds: float = 0.0  # CPU time of the sink process while it ran (start-up excluded)


def partition_watermarks(warehouse: WarehouseReader, topic: str) -> dict[int, int]:
    rows = warehouse.query_rows(
        "SELECT kafka_partition, max(kafka_offset) FROM trajectory_events WHERE kafka_topic = {t:String} "
        "GROUP BY kafka_partition", {"t": topic})
    return {int(p): int(o) for p, o in rows}


class KafkaSink:
    def __init__(self, dsn: str, warehouse: WarehouseStore, batch_size: int = 5000,
                 log: Callable[[str], None] | None = None):
        self.warehouse = warehouse
        self.batch_size = batch_size
        self.stats = SinkStats()
        self._log = log or (lambda msg: print(msg, file=sys.stderr))
        self._registry = default_registry()
        self._encoder = RawRowEncoder(self._registry)
        self.topics = topics_from_dsn(dsn)
        self._watermarks: dict[int, int] = {}
        self._consumer = Consumer(consumer_config(self.topics.bootstrap, self.topics.group("sink"),
                                                  {"max.poll.interval.ms": 600_000}))
        self._consumer.subscribe([self.topics.trajectory, self.topics.derived], on_assign=self._on_assign)
        self._assigned: list[TopicPartition] = []

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned = partitions
        self._watermarks = partition_watermarks(self.warehouse, self.topics.trajectory)

    def _decode(self, value: bytes) -> tuple[Any, dict[str, Any], bytes]:
        writer, datum = unframe(value, self._registry)
        return writer, decode_datum(writer, datum, self._registry.latest(writer.family)), datum

    def _write(self, messages: list) -> None:
        raw: dict[int, list[bytes]] = defaultdict(list)
        last_raw: dict[int, int] = {}
        derived: dict[int, list[DerivedEvent]] = defaultdict(list)
        spans: dict[tuple[str, int], list[int]] = {}
        trajectory = self.topics.trajectory
        for msg in messages:
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            span = spans.setdefault((topic, partition), [offset, offset])
            span[1] = offset
            if topic == trajectory:
                if offset <= self._watermarks.get(partition, -1):
                    self.stats.skipped += 1
                    continue
                try:  # the row is built before raw[partition] is touched: a partition whose messages
                    # all fail to decode must not appear with no rows (and no last offset)
                    row = self._encoder.row(msg.value() or b"", location(topic, partition, offset))
                except DecodeError:  # dead letters are the worker's job; count and skip
                    self.stats.undecodable += 1
                    continue
                raw[partition].append(row)
                last_raw[partition] = offset
                continue
            try:
                writer, record, _ = self._decode(msg.value() or b"")
            except (DecodeError, Exception):  # dead letters are the worker's job; count and skip
                self.stats.undecodable += 1
                continue
            derived[partition].append(DerivedEvent.from_record(record))
        for partition, rows in sorted(raw.items()):
            first, last = spans[(trajectory, partition)]
            insert_raw_rowbinary(self.warehouse, b"".join(rows), f"raw:{trajectory}:{partition}:{first}-{last}")
            self._watermarks[partition] = max(self._watermarks.get(partition, -1), last_raw[partition])
            self.stats.raw += len(rows)
        for partition, items in sorted(derived.items()):
            first, last = spans[(self.topics.derived, partition)]
            token = f"derived:{self.topics.derived}:{partition}:{first}-{last}"
            self.stats.derived += insert_derived(self.warehouse, items, token)
        self.stats.batches += 1

    def _lag(self) -> int:
        """Messages on the assigned partitions that are not committed yet. Committed offsets, not
        positions: a partition that had nothing new since the assignment has no position yet."""
        lag = 0
        assigned = self._consumer.assignment()
        for tp in self._consumer.committed(assigned, timeout=10):
            low, high = self._consumer.get_watermark_offsets(tp, timeout=10)
            lag += max(0, high - (tp.offset if tp.offset >= 0 else low))
        return lag

    def run(self, until_idle: bool = False, idle_seconds: float = 5.0, max_seconds: float | None = None) -> SinkStats:
        started = last_message = time.monotonic()
        cpu_started = time.process_time()
        try:
            while True:
                messages = [m for m in self._consumer.consume(self.batch_size, 0.5)
                            if not ((error := m.error()) and error.code() == KafkaError._PARTITION_EOF)]
                errors = [m for m in messages if m.error()]
                for m in errors:
                    self._log(f"sink: consumer error {m.error()}")
                messages = [m for m in messages if not m.error()]
                now = time.monotonic()
                if messages:
                    self._write(messages)
                    self._consumer.commit(asynchronous=False)  # only after the insert succeeded
                    last_message = now
                elif until_idle and now - last_message >= idle_seconds and self._consumer.assignment() \
                        and self._lag() == 0:
                    return self.stats
                if max_seconds is not None and now - started > max_seconds:
                    return self.stats
        finally:
            self.stats.cpu_seconds = time.process_time() - cpu_started
            self._consumer.close()
