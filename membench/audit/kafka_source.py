"""Replay's Kafka source: every event of a trajectory topic, decoded with the schema its message names."""

from __future__ import annotations

from collections.abc import Iterator

from membench.audit.findings import Finding
from membench.schemas.events import Event
from membench.schemas.registry import SchemaVersion


def events_from_kafka(dsn: str, findings: list, timeout: float = 30.0) -> Iterator[tuple[Event, SchemaVersion]]:
    """Every event of the trajectory topic from the start, partition by partition (a run lives in
    one partition, so its order is kept), with the writer schema its message names: replay
    recomputes the hash with it, so the datum is decoded as written, not resolved to the newest.
    Each partition is read to the end it has when its read begins (`read_to_end`; `timeout` bounds a
    wait without progress); its short read is replay's finding: one per undecodable message, one
    for a partition that stalled before its end."""
    from membench.bus.kafka_read import ShortRead, open_reader, partitions_of, read_to_end
    from membench.schemas.codec import DecodeError, decode_datum, unframe
    from membench.bus.topics import topics_from_dsn

    def decode(msg) -> tuple[Event, SchemaVersion]:
        writer, datum = unframe(msg.value() or b"")
        try:
            record = decode_datum(writer, datum)
        except DecodeError:
            raise
        except Exception as exc:  # fastavro raises many types on corrupt data
            raise DecodeError(f"datum does not match schema {writer.family}.v{writer.version}: {exc}") from exc
        return Event.from_record(record), writer

    topics = topics_from_dsn(dsn)
    TRAJECTORY = topics.trajectory
    consumer = open_reader(topics, "replay")
    try:
        for partition in partitions_of(consumer, TRAJECTORY):
            try:
                for _, item in read_to_end(consumer, TRAJECTORY, [partition], decode=decode, timeout=timeout):
                    yield item
            except ShortRead as short:
                for gap in short.gaps:
                    findings.append(Finding("?", None, f"{TRAJECTORY} {gap}; the events from there on were not "
                                                       "replayed" if gap.stalled else str(gap)))
    finally:
        consumer.close()
