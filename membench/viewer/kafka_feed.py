"""The viewer's live source on the Kafka bus: the trajectory topic, read from its start and followed.

`membench run --bus kafka://…` writes no `events.avro`: its events exist only on the trajectory topic
(and, once `membench sink` has moved them, in the sink's warehouse). A `TopicFeed` consumes every
partition of the namespace's trajectory topic from the earliest offset, in a background thread,
without a consumer group commit (it assigns partitions itself, so it never disturbs the workers'
or the sink's groups), and routes each event by run set to a `TopicLog`.

A `TopicLog` offers what `membench.viewer.tail.LogTail` offers a `LiveRunSet` — `poll()` returns the
events gained since the last poll as blocks, `read_block(offset)` reads one back — except that
its blocks are batches of messages kept in memory (the topic cannot be re-read by a file offset).
Each event comes with the writer schema its message names, so the chain is checked with the
schema the event was written with, as replay does. A run lives in one partition, so its events
arrive in seq order.

Memory: every event of every run set the namespace holds is kept (decoded) while the viewer runs.
That suits watching a study; for a topic of millions of events, look at the warehouse the sink fills
with `membench report` / `membench sql` instead (docs/viewer.md).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from membench.viewer.tail import Block, Poll
from membench.schemas.events import Event
from membench.schemas.registry import SchemaVersion

POLL_TIMEOUT_S = 0.5
METADATA_EVERY_S = 2.0  # how often partitions are looked for (the topic may not exist yet)


@dataclass
class TopicLog:
    """One run set's events as they arrive from the topic (filled by `TopicFeed`)."""

    run_set: str
    schema: SchemaVersion | None = None  # no single writer schema: each block carries its events'
    error: str | None = None
    mtime: float = 0.0  # wall-clock time of the newest event received (seconds since the epoch)
    size: int = 0  # bytes of messages received
    events: int = 0
    _chunks: list[list[tuple[Event, SchemaVersion]]] = field(default_factory=list)
    _pending: list[tuple[Event, SchemaVersion]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event: Event, writer: SchemaVersion, size: int) -> None:
        with self._lock:
            self._pending.append((event, writer))
            self.size += size
            self.events += 1
            self.mtime = time.time()

    @property
    def offset(self) -> int:
        return self.size - self.pending_bytes

    @property
    def blocks(self) -> int:
        return len(self._chunks)

    @property
    def pending_bytes(self) -> int:
        return 0

    def poll(self) -> Poll:
        with self._lock:
            if not self._pending:
                return Poll()
            chunk, self._pending = self._pending, []
            self._chunks.append(chunk)
            index = len(self._chunks) - 1
        return Poll(blocks=[Block(index, [e for e, _ in chunk], [w for _, w in chunk])])

    def read_block(self, offset: int) -> list[Event]:
        with self._lock:
            if not 0 <= offset < len(self._chunks):
                return []
            return [e for e, _ in self._chunks[offset]]


class TopicFeed:
    """Follows a namespace's trajectory topic in a background thread (`start`/`close`)."""

    def __init__(self, dsn: str):
        from membench.bus.topics import topics_from_dsn

        self.dsn = dsn
        self.topics = topics_from_dsn(dsn)
        self._logs: dict[str, TopicLog] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # the last problem reaching the broker or decoding a message
        self.undecodable = 0

    def start(self) -> "TopicFeed":
        self._thread = threading.Thread(target=self._follow, name="membench-view-kafka", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._logs)

    def log(self, run_set: str) -> TopicLog | None:
        with self._lock:
            return self._logs.get(run_set)

    def _route(self, event: Event, writer: SchemaVersion, size: int) -> None:
        with self._lock:
            log = self._logs.get(event.run_set)
            if log is None:
                log = self._logs[event.run_set] = TopicLog(event.run_set)
        log.add(event, writer, size)

    def _follow(self) -> None:
        import os

        from confluent_kafka import Consumer, KafkaException, TopicPartition

        from membench.schemas.codec import decode_datum, unframe
        from membench.bus.kafka_config import consumer_config

        topic = self.topics.trajectory
        consumer = Consumer(consumer_config(self.topics.bootstrap, self.topics.group(f"view-{os.getpid()}")))
        assigned: set[int] = set()
        next_metadata = 0.0
        try:
            while not self._stop.is_set():
                if time.monotonic() >= next_metadata:
                    next_metadata = time.monotonic() + METADATA_EVERY_S
                    try:
                        meta = consumer.list_topics(topic, timeout=5)
                        found = meta.topics.get(topic)
                        partitions = set(found.partitions) if found is not None and found.error is None else set()
                    except KafkaException as exc:
                        self.error = f"cannot reach {self.topics.bootstrap}: {exc}"
                        partitions = set()
                    new = sorted(partitions - assigned)
                    if new:
                        assigned.update(new)
                        # from OFFSET_BEGINNING: the whole history, then follow; partitions read so
                        # far keep their positions
                        consumer.incremental_assign([TopicPartition(topic, p, -2) for p in new])
                if not assigned:
                    self._stop.wait(POLL_TIMEOUT_S)
                    continue
                for msg in consumer.consume(1000, POLL_TIMEOUT_S):
                    if msg.error():
                        continue
                    value = msg.value() or b""
                    try:
                        writer, datum = unframe(value)
                        event = Event.from_record(decode_datum(writer, datum))
                    except Exception as exc:  # noqa: BLE001 - a bad message is counted, never fatal
                        self.undecodable += 1
                        self.error = f"partition {msg.partition()} offset {msg.offset()}: undecodable ({exc})"
                        continue
                    self._route(event, writer, len(value))
        finally:
            consumer.close()
