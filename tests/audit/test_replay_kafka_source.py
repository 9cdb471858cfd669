"""`replay kafka://…` reads each partition to the end it had when the read began; its timeout
bounds a wait without progress, not the read, and a partition it could not finish is a finding.
A stand-in consumer isolates the reading loop (the broker end to end is in
tests/integration/test_audit.py and test_kafka_pipeline.py)."""

from __future__ import annotations

from types import SimpleNamespace

import confluent_kafka

from membench.audit.kafka_source import events_from_kafka
from membench.schemas.chain import seal
from membench.schemas.codec import frame
from membench.schemas.registry import default_registry
from tests.processors.test_verdicts import build_run


class _Message:
    def __init__(self, offset: int, value: bytes):
        self._offset, self._value = offset, value

    def error(self):
        return None

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"run-k"

    def value(self) -> bytes:
        return self._value


def _consumer(messages: list[bytes], high: int, delivered: int):
    """A partition whose high watermark is `high`, of which only `delivered` messages ever arrive."""

    class Consumer:
        def __init__(self, config):
            self.batches = [[_Message(i, messages[i]) for i in range(delivered)]]

        def list_topics(self, topic, timeout):
            return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None})})

        def get_watermark_offsets(self, partition, timeout):
            return 0, high

        def assign(self, partitions):
            pass

        def consume(self, count, timeout):
            return self.batches.pop(0) if self.batches else []

        def close(self):
            pass

    return Consumer


def _framed():
    schema = default_registry().latest("event")
    return [frame(schema, seal(schema, e)[1]) for e in build_run(run_id="run-k")]


def test_a_partition_read_to_its_end_yields_every_event_and_no_finding(monkeypatch):
    messages = _framed()
    monkeypatch.setattr(confluent_kafka, "Consumer", _consumer(messages, len(messages), len(messages)))
    findings: list = []
    events = list(events_from_kafka("kafka://127.0.0.1:1/ns", findings, timeout=0.5))
    assert len(events) == len(messages) and findings == []


def test_a_partition_that_stops_short_of_its_end_is_a_finding_naming_where(monkeypatch):
    messages = _framed()
    monkeypatch.setattr(confluent_kafka, "Consumer", _consumer(messages, len(messages), 5))
    findings: list = []
    events = list(events_from_kafka("kafka://127.0.0.1:1/ns", findings, timeout=0.5))
    assert len(events) == 5
    assert len(findings) == 1 and "partition 0" in findings[0].reason and "at offset 5" in findings[0].reason
    assert f"before its end {len(messages)}" in findings[0].reason
