"""The delivery spool of the Kafka bus: order kept, bounded, nothing lost across reopen or a
crash while re-sending."""

import pytest

from membench.bus.base import BusError
from membench.bus.kafka import Spool


def test_spool_returns_messages_in_failure_order_once(tmp_path):
    spool = Spool(tmp_path)
    for i in range(5):
        spool.append(f"topic-{i % 3}", f"run-{i % 2}".encode(), bytes([i]) * (i + 1))
    again = Spool(tmp_path)  # a new process finds what the old one spooled
    taken = again.take()
    # each message goes back to the topic it failed on (unit status as well as trajectory)
    assert taken == [(f"topic-{i % 3}", f"run-{i % 2}".encode(), bytes([i]) * (i + 1)) for i in range(5)]
    again.confirm()
    assert again.take() == []
    assert again.count() == 0


def test_taken_records_survive_a_crash_before_they_are_confirmed(tmp_path):
    spool = Spool(tmp_path)
    spool.append("t", b"k1", b"v1")
    assert spool.take() == [("t", b"k1", b"v1")]
    spool.append("t", b"k2", b"v2")  # failed again meanwhile
    # the process dies before confirm(): a new one re-sends both, the older first
    after_crash = Spool(tmp_path)
    assert after_crash.count() == 2
    assert after_crash.take() == [("t", b"k1", b"v1"), ("t", b"k2", b"v2")]
    after_crash.confirm()
    assert after_crash.take() == [] and after_crash.count() == 0


def test_spool_refuses_to_grow_past_its_bound(tmp_path):
    spool = Spool(tmp_path, limit=64)
    spool.append("t", b"k", b"x" * 40)
    with pytest.raises(BusError, match="spool .* is full"):
        spool.append("t", b"k", b"y" * 40)
    assert spool.take() == [("t", b"k", b"x" * 40)]  # what was accepted is kept
