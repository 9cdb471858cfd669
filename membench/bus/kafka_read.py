"""Reading a Kafka topic to its end: the one loop every reader of the distributed bus uses
(docs/design.md §2, "Reading a topic to its end").

A read takes each partition's end when it starts (its high watermark, or an end the caller names)
and reads from the partition's start (or a position the caller keeps) up to that end. The policy
for a read that stops short is one: **a short read is an error, never a silent partial result.**
Two things make a read short, and both are gaps:

- a stall: no message for `timeout` seconds while a partition is still before its end (`timeout`
  bounds a wait without progress, not the read: a long topic reads whole);
- an undecodable message: the caller's `decode` raised on it.

The read goes on past an undecodable message and, after a stall, stops; then, once the rest is
read, it raises `ShortRead` naming every gap (topic, partition, offset reached or offset of the
message, the end). What was delivered before stays delivered (a generator yields as it reads), so
a caller that can act on part of a topic catches `ShortRead` and turns each gap into its own
explicit finding (replay's findings, the worker's logged read-back); every other caller lets it
propagate, and so returns nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import confluent_kafka  # the module, not its names: a test may stand in a consumer for confluent_kafka.Consumer
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from membench.bus.base import BusError
from membench.bus.kafka_config import consumer_config, reader_config
from membench.bus.topics import Topics

BATCH = 1000  # messages per consume() at most
WAIT_S = 0.05  # one consume()'s wait: it returns early once it holds what is missing
METADATA_TIMEOUT_S = 30.0  # a query of partitions or watermarks (not a read's stall timeout)
_RETRIABLE = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TRANSPORT)


@dataclass(frozen=True)
class Gap:
    """Where a read stopped short. A stall: `offset` is the next offset the read waited for, `end`
    the end it was to reach. An undecodable message: `offset` is the message's, `end` is None."""

    partition: int
    offset: int
    end: int | None
    reason: str

    @property
    def stalled(self) -> bool:
        return self.end is not None

    def __str__(self) -> str:
        if self.stalled:
            return f"partition {self.partition}: {self.reason} at offset {self.offset}, before its end {self.end}"
        return f"partition {self.partition} offset {self.offset}: {self.reason}"


class ShortRead(BusError):
    """A read of TOPIC did not deliver every message up to the end it took at its start."""

    def __init__(self, topic: str, gaps: list[Gap]):
        self.topic = topic
        self.gaps = sorted(gaps, key=lambda g: (g.partition, g.offset, g.stalled))
        shown = "; ".join(str(g) for g in self.gaps[:5])
        more = f"; and {len(self.gaps) - 5} more" if len(self.gaps) > 5 else ""
        super().__init__(f"{topic}: the read stopped short of its end: {shown}{more}")


def open_reader(topics: Topics, role: str):
    """A consumer for `read_to_end`, in a group of its own (`<prefix><role>-<pid>`) that never commits."""
    return confluent_kafka.Consumer(reader_config(topics.bootstrap, topics.group(f"{role}-{os.getpid()}")))


def partitions_of(consumer, topic: str, timeout: float = METADATA_TIMEOUT_S) -> list[int]:
    """The topic's partitions, sorted; none when it does not exist."""
    found = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    return sorted(found.partitions) if found is not None else []


def watermarks(consumer, topic: str, partition: int, timeout: float = METADATA_TIMEOUT_S) -> tuple[int, int]:
    """(low, high), retried while a just-created partition elects its leader."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].code() not in _RETRIABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_to_end(consumer, topic: str, partitions: Iterable[int] | None = None, *,
                ends: dict[int, int] | None = None, keep: Callable[[Any], bool] | None = None,
                decode: Callable[[Any], Any] | None = None, timeout: float = 30.0) -> Iterator[tuple[Any, Any]]:
    """(message, decoded) for every message of PARTITIONS (default: all of TOPIC's) from the
    partition's start up to its end — ENDS[p] (exclusive), else its high watermark taken now —
    that KEEP accepts (default: all; a message it refuses is passed over undecoded), decoded by
    DECODE (default: the message itself). Assigns CONSUMER to those partitions. Raises `ShortRead`
    at the end when a partition stalled for TIMEOUT seconds or DECODE raised (module docstring)."""
    if partitions is None:
        partitions = partitions_of(consumer, topic)
    positions, stops = {}, {}
    for p in partitions:
        low, high = watermarks(consumer, topic, p)
        end = high if ends is None or p not in ends else ends[p]
        if end > low:
            positions[p], stops[p] = low, end
    consumer.assign([TopicPartition(topic, p, positions[p]) for p in sorted(positions)])
    yield from read_assigned(consumer, topic, positions, stops, keep=keep, decode=decode, timeout=timeout)


def read_assigned(consumer, topic: str, positions: dict[int, int], ends: dict[int, int], *,
                  keep: Callable[[Any], bool] | None = None, decode: Callable[[Any], Any] | None = None,
                  timeout: float = 30.0, beyond_end: bool = False) -> Iterator[tuple[Any, Any]]:
    """The loop of `read_to_end`, for a CONSUMER already assigned at POSITIONS (partition -> next
    offset), which it advances in place: a caller that keeps its consumer between reads
    (`StatusView`) reads on from where the last read stopped. BEYOND_END: deliver, too, what
    arrives past a partition's end (such a caller's consumer will not fetch it again); otherwise a
    read delivers nothing past the ends it was given."""
    gaps: list[Gap] = []
    deadline = time.monotonic() + timeout
    while True:
        behind = {p: end - positions.get(p, 0) for p, end in ends.items() if positions.get(p, 0) < end}
        if not behind:
            break
        if time.monotonic() >= deadline:
            gaps += [Gap(p, positions.get(p, 0), ends[p], f"no message for {timeout:g}s") for p in sorted(behind)]
            break
        # ask for what is missing: consume() returns once it holds that many, else waits WAIT_S out
        # (a gap that compaction left costs that short wait, no more)
        for msg in consumer.consume(min(BATCH, sum(behind.values())), WAIT_S):
            if msg.error():
                continue
            partition, offset = msg.partition(), msg.offset()
            end = ends.get(partition)
            if end is None and not beyond_end:
                continue
            positions[partition] = offset + 1
            deadline = time.monotonic() + timeout
            if (end is None or offset >= end) and not beyond_end:
                continue
            if keep is not None and not keep(msg):
                continue
            if decode is None:
                yield msg, msg
                continue
            try:
                item = decode(msg)
            except Exception as exc:  # noqa: BLE001 - decoders raise many types on corrupt data; named below
                gaps.append(Gap(partition, offset, None, str(exc) or type(exc).__name__))
                continue
            yield msg, item
    if gaps:
        raise ShortRead(topic, gaps)


def consumer_group_caught_up(bootstrap: str, group: str, topic: str) -> bool:
    """Whether GROUP's committed offsets reached the end (high watermark) of every partition of TOPIC
    that holds a message; False when the topic or an offset cannot be read. Asked by whoever waits
    for the processors to drain a topic (`membench bench bus`, the integration tests). The probe
    joins no group and commits nothing: GROUP only names whose offsets to read."""
    consumer = confluent_kafka.Consumer(consumer_config(bootstrap, group))
    try:
        meta = consumer.list_topics(topic, timeout=20)
        parts = [TopicPartition(topic, p) for p in meta.topics[topic].partitions]
        for tp in consumer.committed(parts, timeout=20):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=20)
            if high > 0 and tp.offset < high:
                return False
        return True
    except (KafkaException, KeyError):
        return False
    finally:
        consumer.close()
