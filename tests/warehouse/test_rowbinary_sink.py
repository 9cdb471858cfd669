"""The Kafka sink's RowBinary rows (built from the message bytes) equal the rows the
Python path writes for the same events, every column, in the real embedded engine (chDB)."""

from __future__ import annotations

import dataclasses

import pytest

from membench.schemas.chain import seal
from membench.schemas.codec import DecodeError, decode, frame
from membench.schemas.events import GENESIS_HASH, Event, bounded_text
from membench.schemas.registry import default_registry
from tests.processors.test_verdicts import build_run
from tests.schemas.test_chain_writer_schema import PREVIOUS, sealed_run
from membench.warehouse.client import connect
from membench.warehouse.sink import RawRowEncoder, insert_raw, insert_raw_rowbinary, location, trajectory_row

pytestmark = pytest.mark.integration

LATEST = default_registry().latest("event")
TOPIC = "ns.membench.trajectory"


def _odd_events() -> list[tuple[Event, bytes]]:
    """Values that stress the byte walk: multi-byte lengths (> 127 and > 16,383 bytes), non-ASCII and
    control characters, a negative session index, large seq and timestamps, a map in the payload."""
    texts = ["", "ünïcødé ✓ \u2028 \"quoted\" \\ back\tslash\n\x01", "x" * 200, "y" * 20_000]
    out, prev = [], GENESIS_HASH
    for seq, text in enumerate(texts):
        kind = "Turn" if seq % 2 else "RunStarted"
        payload = ({"role": "agent", "text": bounded_text(text), "source_event_id": "é" * 130, "source_kind": None,
                    "input_tokens": 2**40, "cached_tokens": 0, "output_tokens": 7, "reasoning_tokens": 0,
                    "latency_ms": 1} if kind == "Turn" else
                   {"suite": text[:50], "task": "t", "condition": "B0", "seed": -3, "agent": "a", "agent_kind": "k",
                    "model": None, "budgets": {"z": 1, "a": 2, "memory_read_tokens": 2000}, "code_digest": "c",
                    "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1,
                    "construct": "C1", "family": "fam"})
        event = Event(f"ev-odd-{seq}", "rs-ödd", "run-odd", "s/t/B0/1", -1 if seq % 2 == 0 else 70_000,
                      2**40 + seq, 1_900_000_000_000_000 + seq, "p" * 300, kind, "harness" if seq % 2 else "agent",
                      prev, payload)
        event, datum = seal(LATEST, event)
        out.append((event, datum))
        prev = event.hash
    return out


def _table(warehouse) -> bytes:
    return warehouse.query_raw("SELECT * FROM trajectory_events ORDER BY run_id, seq, kafka_offset",
                               "TabSeparated")


def test_rowbinary_rows_equal_the_python_rows_every_column(tmp_path):
    events = [(e, d, LATEST) for e, d in (seal(LATEST, e) for e in build_run())]
    events += [(e, d, LATEST) for e, d in _odd_events()]
    events += [(e, d, PREVIOUS) for e, d in sealed_run(PREVIOUS)]  # an older writer: resolved as decode does
    encoder = RawRowEncoder()
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        # what the sink wrote before: each message decoded (resolved to the newest schema), then a Python row
        old_rows = [trajectory_row(Event.from_record(decode(frame(schema, d))[1]), d, schema.fingerprint_hex, TOPIC,
                                   i % 3, 1000 + i)
                    for i, (e, d, schema) in enumerate(events)]
        insert_raw(warehouse, old_rows, "old")
        python_path = _table(warehouse)
        warehouse.command("TRUNCATE TABLE trajectory_events")
        data = b"".join(encoder.row(frame(schema, d), location(TOPIC, i % 3, 1000 + i))
                        for i, (e, d, schema) in enumerate(events))
        insert_raw_rowbinary(warehouse, data, "new")
        byte_path = _table(warehouse)
    finally:
        warehouse.close()
    assert python_path.count(b"\n") == len(events)
    assert byte_path == python_path


def test_a_retried_rowbinary_batch_lands_once(tmp_path):
    encoder = RawRowEncoder()
    data = b"".join(encoder.row(frame(LATEST, d), location(TOPIC, 0, i))
                    for i, (_, d) in enumerate(seal(LATEST, e) for e in build_run()))
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        for _ in range(2):
            insert_raw_rowbinary(warehouse, data, "raw:t:0:0-9")
        assert warehouse.query_rows("SELECT count(), uniqExact(event_id) FROM trajectory_events")[0] == \
            (len(build_run()), len(build_run()))
    finally:
        warehouse.close()


def test_what_the_full_decode_refuses_the_byte_walk_refuses():
    encoder = RawRowEncoder()
    event, datum = seal(LATEST, build_run()[0])
    where = location(TOPIC, 0, 0)
    assert encoder.row(frame(LATEST, datum), where)
    bad = {
        "not single-object": b"this is not avro",
        "unknown fingerprint": b"\xc3\x01" + b"\x00" * 8 + datum,
        "truncated": frame(LATEST, datum[:-10]),
        "trailing bytes": frame(LATEST, datum + b"\x00"),
        "bad UTF-8 in the envelope": frame(LATEST, datum[:1] + b"\xff" + datum[2:]),
        "string past the end": frame(LATEST, b"\xfe\xff\x7f" + datum[1:]),
        "a derived datum": frame(default_registry().latest("derived"), datum),
    }
    for name, message in bad.items():
        with pytest.raises(DecodeError):
            encoder.row(message, where)
    edited = dataclasses.replace(event, payload={**event.payload, "attempt": 2})
    assert encoder.row(frame(LATEST, seal(LATEST, edited)[1]), where) != encoder.row(frame(LATEST, datum), where)
