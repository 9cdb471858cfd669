"""Replay's Kafka source: every event of a trajectory topic, decoded with the schema its message names."""

from __future__ import annotations

import time
from collections.abc import Iterator

from audit.findings import Finding
from schemas.events import Event
from schemas.registry import SchemaVersion


def events_from_kafka(dsn: str, findings: list, timeout: float = 30.0) -> Iterator[tuple[Event, SchemaVersion]]:
    """Every event of the trajectory topic from the start, partition by partition (a run lives in
    one partition, so its order is kept), with the writer schema its message names: replay
    recomputes the hash with it, so the datum is decoded as written, not resolved to the newest."""
    import os

    from confluent_kafka import Consumer, TopicPartition

    from schemas.codec import DecodeError, decode_datum, unframe
    from schemas.topics import topics_from_dsn

    topics = topics_from_dsn(dsn)
    TRAJECTORY = topics.trajectory
    consumer = Consumer({"bootstrap.servers": topics.bootstrap, "group.id": topics.group(f"replay-{os.getpid()}"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        meta = consumer.list_topics(TRAJECTORY, timeout=timeout)
        for partition in sorted(meta.topics[TRAJECTORY].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(TRAJECTORY, partition), timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(TRAJECTORY, partition, low)])
            # `timeout` bounds a wait without progress, not the read: a long partition reads whole
            position, deadline = low, time.monotonic() + timeout
            while position < high and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 1.0):
                    if msg.error():
                        continue
                    position = msg.offset() + 1
                    deadline = time.monotonic() + timeout
                    try:
                        writer, datum = unframe(msg.value() or b"")
                        try:
                            record = decode_datum(writer, datum)
                        except DecodeError:
                            raise
                        except Exception as exc:  # fastavro raises many types on corrupt data
                            raise DecodeError(f"datum does not match schema {writer.family}.v{writer.version}: "
                                              f"{exc}") from exc
                        yield Event.from_record(record), writer
                    except DecodeError as exc:
                        findings.append(Finding("?", None, f"partition {partition} offset {msg.offset()}: {exc}"))
            if position < high:
                findings.append(Finding("?", None, f"{TRAJECTORY} partition {partition}: no message for {timeout:.0f}s "
                                                   f"at offset {position}, before its end {high}; the events from "
                                                   "there on were not replayed"))
    finally:
        consumer.close()
