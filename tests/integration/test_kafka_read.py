"""The read-to-end policy against the real broker (`membench/bus/kafka_read.py`, docs/design.md §2):
a read that stops short — no time left before a partition's end, or an undecodable message — raises
`ShortRead` naming where; no reader returns a partial result. `read_unit_status` raises rather than
return a partial map (which would let `run --bus` re-run a completed unit); replay turns each gap
into a finding; the worker's read-back of a run leaves out, and names, a message the live fold
dead-lettered."""

from __future__ import annotations

import json
import logging

import pytest
from confluent_kafka import Producer

from membench.audit.kafka_source import events_from_kafka
from membench.pipeline.distributed.topic_reads import read_run_head
from membench.pipeline.kafka_engine import earlier_events
from membench.bus.kafka import ensure_topics, read_run_events, read_unit_status
from membench.bus.kafka_read import ShortRead, open_reader, read_to_end
from membench.schemas.chain import seal
from membench.schemas.codec import frame
from membench.bus.kafka_config import producer_config
from membench.schemas.registry import default_registry
from membench.bus.topics import topics_from_dsn
from tests.integration.kafka_helpers import SINGLE, namespace, require_broker
from tests.processors.test_verdicts import build_run

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

RUN = "run-read"


@pytest.fixture
def topics():
    """A fresh namespace of one-partition topics."""
    require_broker()
    topics = topics_from_dsn(f"kafka://{SINGLE}/{namespace()}?partitions=1")
    ensure_topics(topics)
    return topics


def _produce(topics, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    producer = Producer(producer_config(topics.bootstrap))
    for key, value in messages:
        producer.produce(topic, value, key)
    assert producer.flush(30) == 0


def _run_messages(poison_at: int | None = None) -> list[tuple[bytes, bytes]]:
    """The framed events of one run, keyed by its id; with POISON_AT, an undecodable message of the
    run inserted there."""
    schema = default_registry().latest("event")
    messages = [(RUN.encode(), frame(schema, seal(schema, e)[1])) for e in build_run(run_id=RUN)]
    if poison_at is not None:
        messages.insert(poison_at, (RUN.encode(), b"\xc3\x01not an event"))
    return messages


def _statuses(run_set: str) -> list[tuple[bytes, bytes]]:
    return [(f"{run_set}/u{i}".encode(), json.dumps({"status": "completed", "run_id": f"r{i}", "attempt": 1}).encode())
            for i in range(5)]


def test_a_complete_read_delivers_every_message_up_to_the_end_taken_at_the_start(topics):
    _produce(topics, topics.trajectory, _run_messages())
    consumer = open_reader(topics, "test")
    try:
        got = [msg.offset() for msg, _ in read_to_end(consumer, topics.trajectory, timeout=10)]
    finally:
        consumer.close()
    assert got == list(range(len(_run_messages())))


def test_a_read_out_of_time_before_the_end_raises_naming_partition_offset_and_end(topics):
    messages = _run_messages()
    _produce(topics, topics.trajectory, messages)
    consumer = open_reader(topics, "test")
    try:
        with pytest.raises(ShortRead) as short:
            list(read_to_end(consumer, topics.trajectory, timeout=0))
    finally:
        consumer.close()
    assert [(g.partition, g.offset, g.end) for g in short.value.gaps] == [(0, 0, len(messages))]
    assert topics.trajectory in str(short.value) and f"before its end {len(messages)}" in str(short.value)


def test_read_unit_status_raises_rather_than_return_a_partial_map(topics):
    run_set = "rs-read"
    _produce(topics, topics.unit_status, _statuses(run_set))
    complete = read_unit_status(topics, run_set)
    assert sorted(complete) == [f"u{i}" for i in range(5)] and complete["u3"]["status"] == "completed"
    # out of time before the end: before, the units it had not reached were missing from the map,
    # so `run --bus` would have run them again
    with pytest.raises(ShortRead):
        read_unit_status(topics, run_set, timeout=0)
    # a record that does not decode: named, and no map
    _produce(topics, topics.unit_status, [(f"{run_set}/u9".encode(), b"{not json")])
    with pytest.raises(ShortRead) as short:
        read_unit_status(topics, run_set)
    ((gap),) = short.value.gaps
    assert (gap.partition, gap.offset, gap.stalled) == (0, 5, False)
    # another run set's records are passed over undecoded
    assert read_unit_status(topics, "rs-other") == {}


def test_a_run_with_an_undecodable_message_raises_for_readers_and_is_a_finding_for_replay(topics):
    messages = _run_messages(poison_at=3)
    _produce(topics, topics.trajectory, messages)
    with pytest.raises(ShortRead) as short:
        read_run_events(topics, {RUN}, {"RunStarted"})
    assert [(g.partition, g.offset) for g in short.value.gaps] == [(0, 3)]
    with pytest.raises(ShortRead):
        read_run_head(topics, RUN)
    # replay: every other event, and the gap as a finding naming partition and offset
    findings: list = []
    dsn = f"kafka://{topics.bootstrap}/{topics.namespace}"
    events = list(events_from_kafka(dsn, findings))
    assert len(events) == len(messages) - 1
    assert len(findings) == 1 and findings[0].reason.startswith("partition 0 offset 3: ")


def test_the_workers_read_back_names_a_message_the_live_fold_dead_lettered(topics, caplog):
    messages = _run_messages(poison_at=2)
    _produce(topics, topics.trajectory, messages)
    with caplog.at_level(logging.WARNING, logger="membench.kafka_engine"):
        found = earlier_events(topics, 0, len(messages) - 1, RUN, 99)
    assert [e.seq for e in found] == list(range(len(messages) - 2))  # all before the last, but the poison
    (warning,) = [r.getMessage() for r in caplog.records if "read-back" in r.getMessage()]
    assert f"run {RUN}" in warning and "partition 0 offset 2" in warning
