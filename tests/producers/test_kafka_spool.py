"""The delivery spool of the Kafka bus: order kept, bounded, nothing lost across reopen."""

import pytest

from producers.bus.base import BusError
from producers.bus.kafka import Spool


def test_spool_returns_messages_in_failure_order_once(tmp_path):
    spool = Spool(tmp_path)
    for i in range(5):
        spool.append(f"topic-{i % 3}", f"run-{i % 2}".encode(), bytes([i]) * (i + 1))
    again = Spool(tmp_path)  # a new process finds what the old one spooled
    taken = again.take()
    # each message goes back to the topic it failed on (unit status as well as trajectory)
    assert taken == [(f"topic-{i % 3}", f"run-{i % 2}".encode(), bytes([i]) * (i + 1)) for i in range(5)]
    assert again.take() == []


def test_spool_refuses_to_grow_past_its_bound(tmp_path):
    spool = Spool(tmp_path, limit=64)
    spool.append("t", b"k", b"x" * 40)
    with pytest.raises(BusError, match="spool .* is full"):
        spool.append("t", b"k", b"y" * 40)
    assert spool.take() == [("t", b"k", b"x" * 40)]  # what was accepted is kept
