"""`membench process --engine kafka`: the processors on the confluent-kafka (librdkafka) consumer
(docs/design.md §2, §7).

The same contract as the faust worker (`membench/pipeline/faust_worker.py`), without faust's per-message
machinery: the route both engines interpret (`membench/pipeline/processor_route.py`: the trajectory topic
consumed in one consumer group, derived events keyed by run_id to the derived topic, undecodable or
rejected messages to the dead-letter topic with the reason), raw bytes decoded and folded by the
same pure `RunSetProcessor`; start more processes to scale out, up to the partition count.

Guarantees, and how:
- derived events are acknowledged before the offsets of their sources commit: a commit first
  flushes the producer and checks every delivery report; a failed delivery stops the worker
  without committing (the messages are redelivered to whoever owns the partition next);
- redelivery is harmless: `RunSetProcessor` drops seqs already applied and remembers ended runs
  (a bounded window, §7), and derived ids are deterministic, so the sink deduplicates;
- a run met mid-way (after a crash or a rebalance) is folded from its start: its earlier events
  are read back from the same partition (`earlier_events`);
- rebalance: when partitions are revoked, what was processed from them is flushed and committed
  synchronously, and the open runs of those partitions are forgotten (their new owner folds them).

Offsets commit every `COMMIT_INTERVAL_S` (as faust's worker does) and at shutdown (SIGTERM/SIGINT).
The group id is the faust worker's (`<prefix>processor`), so a deployment can switch engines and
resume from the committed offsets; the two engines cannot be members of the group at the same
time (the broker refuses a member whose assignment protocol differs from the group's).
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from membench.pipeline.processor_route import ProcessorRoute
from membench.processors import RunSetProcessor
from membench.schemas.codec import DecodeError, decode
from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event
from membench.bus.kafka_config import consumer_config, producer_config
from membench.bus.topics import Topics, topics_from_dsn

log = logging.getLogger("membench.kafka_engine")

BATCH = 2000  # messages per consume() call
POLL_TIMEOUT_S = 0.2
COMMIT_INTERVAL_S = 1.0


def earlier_events(topics: Topics, partition: int, before_offset: int, run_id: str, before_seq: int) -> list[Event]:
    """The run's events read back from its partition (offsets < before_offset), in partition order:
    folded in that order they take the same path through `RunSetProcessor` as they did live — the
    first event at a seq counts and the first RunEnded ends the run, so a fenced attempt's late
    events (docs/design.md §2) derive nothing here either. `before_seq` is kept for callers.

    The read is `read_to_end`'s: a partition that stalls before `before_offset` raises `ShortRead`
    (the run cannot be folded from its start; the worker stops without committing, and the
    partition's next owner reads it again). A message of the run that does not decode is left out,
    as the live fold left it out (it went to the dead-letter topic when it was first met), and is
    named in a warning."""
    from membench.bus.kafka_read import ShortRead, open_reader, read_to_end

    key = run_id.encode()
    found: list[Event] = []
    consumer = open_reader(topics, "backfill")
    try:
        for _, event in read_to_end(consumer, topics.trajectory, [partition], ends={partition: before_offset},
                                    keep=lambda m: m.key() == key,
                                    decode=lambda m: Event.from_record(decode(m.value() or b"", plain=True)[1])):
            found.append(event)
    except ShortRead as short:
        if any(gap.stalled for gap in short.gaps):
            raise
        for gap in short.gaps:
            log.warning("read-back of run %s: %s %s; left out, as when it was first folded (dead-lettered then)",
                        run_id, topics.trajectory, gap)
    finally:
        consumer.close()
    return found


@dataclass
class Folded:
    """What one message yields: derived events, and dead letters as reasons."""

    derived: list[DerivedEvent] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)


class MessageFolder:
    """Decode one trajectory message and fold it: the work both engines share."""

    def __init__(self, topics: Topics, processor: RunSetProcessor | None = None):
        self.topics = topics
        self.processor = processor or RunSetProcessor()

    def fold(self, value: bytes | None, partition: int, offset: int) -> Folded:
        out = Folded()
        try:
            _, record = decode(value or b"", plain=True)
            event = Event.from_record(record)
        except (DecodeError, KeyError, TypeError, ValueError) as exc:
            out.dead.append(f"undecodable: {exc}")
            return out
        processor = self.processor
        if event.seq > 0 and processor.is_new(event.run_id):  # met mid-run: fold from its start
            for earlier in earlier_events(self.topics, partition, offset, event.run_id, event.seq):
                out.derived += processor.apply(earlier)
        out.derived += processor.apply(event)
        for letter in processor.take_dead_letters():
            out.dead.append(f"rejected by processor at run {letter.run_id} seq {letter.seq}: {letter.reason}")
        return out


class DeliveryFailed(RuntimeError):
    """The broker did not acknowledge a derived or dead-letter message: nothing may commit."""


class KafkaEngine:
    def __init__(self, dsn: str, processor: RunSetProcessor | None = None, batch: int = BATCH):
        self.topics = topics_from_dsn(dsn)
        self.route = ProcessorRoute(self.topics)
        self.folder = MessageFolder(self.topics, processor)
        self.batch = batch
        self._consumer = Consumer(consumer_config(self.topics.bootstrap, self.route.group, {
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        }))
        self._producer = Producer(producer_config(self.topics.bootstrap, {"on_delivery": self._on_delivery}))
        self._failures: list[str] = []
        self._next: dict[int, int] = {}  # partition -> next offset to commit (processed, not yet committed)
        self._runs_of: dict[int, set[str]] = {}  # partition -> runs seen there (pruned at commits)
        self._stop = False
        self.messages = 0
        self.dead_letters = 0

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self._failures.append(f"{msg.topic()}: {err}")

    def _send(self, topic: str, key: bytes, value: bytes, headers=None) -> None:
        while True:
            try:
                self._producer.produce(topic, value, key, headers=headers)
                return
            except BufferError:  # local queue full: serve deliveries (backpressure, never drop)
                self._producer.poll(0.1)

    def _on_assign(self, consumer, partitions) -> None:
        log.info("assigned %s", [p.partition for p in partitions])

    def _on_revoke(self, consumer, partitions) -> None:
        # what was processed from the revoked partitions is acknowledged and committed now, so their
        # next owner starts after it; their open runs are its to fold
        revoked = {p.partition for p in partitions}
        self.commit(only=revoked)
        runs: set[str] = set()
        for partition in revoked:
            runs |= self._runs_of.pop(partition, set())
        self.folder.processor.forget(runs)

    def handle(self, msg) -> None:
        partition, offset = msg.partition(), msg.offset()
        key, value = msg.key(), msg.value()
        folded = self.folder.fold(value, partition, offset)
        route = self.route
        for item in folded.derived:
            self._send(route.derived, *route.derived_message(item))
        for reason in folded.dead:
            self.dead_letters += 1
            self._send(route.dead_letters, key or b"", value or b"",
                       route.dead_letter_headers(reason, partition, offset))
        if key:
            self._runs_of.setdefault(partition, set()).add(key.decode("utf-8", "replace"))
        self._next[partition] = offset + 1
        self.messages += 1

    def commit(self, only: set[int] | None = None) -> None:
        """Wait for the broker to acknowledge everything produced, then commit the processed offsets."""
        pending = {p: o for p, o in self._next.items() if only is None or p in only}
        if not pending:
            return
        while self._producer.flush(10.0):
            pass
        if self._failures:
            raise DeliveryFailed(f"{len(self._failures)} derived/dead-letter messages not acknowledged "
                                 f"(first: {self._failures[0]}); offsets not committed")
        self._consumer.commit(offsets=[TopicPartition(self.route.consumes, p, o) for p, o in pending.items()],
                              asynchronous=False)
        for partition in pending:
            del self._next[partition]
        open_runs = set(self.folder.processor.open_runs())
        for partition in pending:
            if partition in self._runs_of:
                self._runs_of[partition] &= open_runs

    def stop(self, *_args) -> None:
        self._stop = True

    def run(self, until_idle_s: float | None = None) -> None:
        """Consume until stopped (SIGTERM/SIGINT), or until `until_idle_s` without a message."""
        self._consumer.subscribe([self.route.consumes], on_assign=self._on_assign, on_revoke=self._on_revoke)
        last_commit = last_message = time.monotonic()
        try:
            while not self._stop:
                batch = self._consumer.consume(self.batch, POLL_TIMEOUT_S)
                for msg in batch:
                    err = msg.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            log.warning("consumer: %s", err)
                        continue
                    self.handle(msg)
                now = time.monotonic()
                if batch:
                    last_message = now
                    self._producer.poll(0)
                if now - last_commit >= COMMIT_INTERVAL_S:
                    self.commit()
                    last_commit = now
                if until_idle_s is not None and now - last_message >= until_idle_s:
                    break
            self.commit()
        finally:
            try:
                self._consumer.close()  # leaves the group: its partitions go to the others at once
            except KafkaException:
                pass
            self._producer.flush(30)


def run_engine(dsn: str, loglevel: str = "WARNING", until_idle_s: float | None = None,
               ended_window: int | None = None) -> KafkaEngine:
    logging.basicConfig(level=getattr(logging, loglevel.upper(), logging.WARNING))
    processor = RunSetProcessor(ended_window) if ended_window else None
    engine = KafkaEngine(dsn, processor)
    signal.signal(signal.SIGTERM, engine.stop)
    signal.signal(signal.SIGINT, engine.stop)
    engine.run(until_idle_s)
    return engine
