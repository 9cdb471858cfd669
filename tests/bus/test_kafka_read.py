"""The read-to-end loop's policy (`membench/bus/kafka_read.py`) against a stand-in consumer: a
complete read delivers every message up to the end taken at the start and nothing past it; a stall
or an undecodable message is a gap, and the read raises `ShortRead` naming each, after delivering
what it could. The broker end to end: tests/integration/test_kafka_read.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from membench.bus.kafka_read import Gap, ShortRead, read_assigned, read_to_end


class _Message:
    def __init__(self, partition: int, offset: int, value: bytes, key: bytes = b"k"):
        self._partition, self._offset, self._value, self._key = partition, offset, value, key

    def error(self):
        return None

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value


class _Consumer:
    """Partitions of `logs` (partition -> values); only the first `delivered[p]` messages of a
    partition ever arrive, one consume() call per partition batch."""

    def __init__(self, logs: dict[int, list[bytes]], delivered: dict[int, int] | None = None):
        self.logs = logs
        self.delivered = delivered or {p: len(v) for p, v in logs.items()}
        self.batches: list[list[_Message]] = []
        self.assigned = None

    def list_topics(self, topic, timeout):
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={p: None for p in self.logs})})

    def get_watermark_offsets(self, tp, timeout):
        return 0, len(self.logs[tp.partition])

    def assign(self, partitions):
        self.assigned = [(tp.partition, tp.offset) for tp in partitions]
        self.batches = [[_Message(p, o, self.logs[p][o]) for o in range(start, self.delivered[p])]
                        for p, start in self.assigned]

    def consume(self, count, timeout):
        return self.batches.pop(0) if self.batches else []


def _json(msg):
    return json.loads(msg.value())


def test_a_complete_read_delivers_every_message_of_every_partition():
    consumer = _Consumer({0: [b"1", b"2"], 1: [], 2: [b"3"]})
    got = [(m.partition(), item) for m, item in read_to_end(consumer, "t", decode=_json, timeout=0.2)]
    assert got == [(0, 1), (0, 2), (2, 3)]
    assert consumer.assigned == [(0, 0), (2, 0)]  # an empty partition is not read


def test_keep_passes_messages_over_undecoded_and_ends_cap_the_read():
    consumer = _Consumer({0: [b"1", b"not json", b"3", b"4"]})
    got = [item for _, item in read_to_end(consumer, "t", ends={0: 3}, keep=lambda m: m.offset() != 1,
                                           decode=_json, timeout=0.2)]
    assert got == [1, 3]  # offset 1 refused by keep (never decoded), offset 3 past the end


def test_a_stall_before_the_end_raises_naming_partition_offset_and_end_after_delivering_the_rest():
    consumer = _Consumer({0: [b"1", b"2", b"3"], 1: [b"4"]}, delivered={0: 1, 1: 1})
    got = []
    with pytest.raises(ShortRead) as short:
        for _, item in read_to_end(consumer, "t", decode=_json, timeout=0.2):
            got.append(item)
    assert got == [1, 4]
    assert short.value.gaps == [Gap(0, 1, 3, "no message for 0.2s")]
    assert "t: the read stopped short of its end: partition 0: no message for 0.2s at offset 1, before its end 3" \
        == str(short.value)


def test_an_undecodable_message_is_a_gap_and_the_read_goes_on_past_it():
    consumer = _Consumer({0: [b"1", b"{oops", b"3"]})
    got = []
    with pytest.raises(ShortRead) as short:
        for _, item in read_to_end(consumer, "t", decode=_json, timeout=0.2):
            got.append(item)
    assert got == [1, 3]
    (gap,) = short.value.gaps
    assert (gap.partition, gap.offset, gap.end, gap.stalled) == (0, 1, None, False)
    assert str(gap).startswith("partition 0 offset 1: ")


def test_a_timeout_of_zero_delivers_nothing_and_names_every_partition_behind():
    consumer = _Consumer({0: [b"1"], 1: [b"2", b"3"]})
    with pytest.raises(ShortRead) as short:
        list(read_to_end(consumer, "t", timeout=0))
    assert [(g.partition, g.offset, g.end) for g in short.value.gaps] == [(0, 0, 1), (1, 0, 2)]


def test_a_kept_consumer_reads_on_from_its_positions_and_takes_what_arrives_past_the_end():
    consumer = _Consumer({0: [b"1", b"2", b"3"]})
    consumer.assign([SimpleNamespace(partition=0, offset=1)])
    positions = {0: 1}
    got = [item for _, item in read_assigned(consumer, "t", positions, {0: 2}, decode=_json, timeout=0.2,
                                             beyond_end=True)]
    assert got == [2, 3] and positions == {0: 3}
