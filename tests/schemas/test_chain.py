import dataclasses

from membench.schemas import default_registry
from membench.schemas.chain import ChainVerifier, expected_hash, seal, verify
from membench.schemas.codec import decode_datum
from membench.schemas.events import GENESIS_HASH, Event
from tests.schemas.helpers import sample_event

SCHEMA = default_registry().latest("event")


def make_run(n: int, run_id: str = "run-1") -> list[Event]:
    events, prev = [], GENESIS_HASH
    for seq in range(n):
        event, _ = seal(SCHEMA, dataclasses.replace(sample_event(seq, f"turn {seq}", run_id), prev_hash=prev))
        events.append(event)
        prev = event.hash
    return events


def test_sealed_datum_decodes_to_the_sealed_event():
    event, datum = seal(SCHEMA, sample_event())
    record = decode_datum(SCHEMA, datum)
    assert record["hash"] == event.hash == expected_hash(SCHEMA, event)
    assert len(event.hash) == 64


def test_intact_chain_verifies():
    assert list(verify(SCHEMA, make_run(5))) == []


def test_interleaved_runs_verify_independently():
    a, b = make_run(3, "a"), make_run(3, "b")
    assert list(verify(SCHEMA, [a[0], b[0], a[1], b[1], b[2], a[2]])) == []


def test_edited_payload_is_named_by_run_and_seq():
    events = make_run(4)
    edited = dict(events[2].payload, text=dict(events[2].payload["text"], text="turn X"))
    events[2] = dataclasses.replace(events[2], payload=edited)
    breaks = list(verify(SCHEMA, events))
    assert breaks[0].run_id == "run-1" and breaks[0].seq == 2
    assert "edited" in breaks[0].reason


def test_deleted_event_is_named():
    events = make_run(4)
    del events[1]
    breaks = list(verify(SCHEMA, events))
    assert (breaks[0].run_id, breaks[0].seq) == ("run-1", 2)
    assert "expected seq 1" in breaks[0].reason


def test_reordered_events_are_detected():
    events = make_run(3)
    events[1], events[2] = events[2], events[1]
    assert [b.seq for b in verify(SCHEMA, events)][:1] == [2]


def test_heads_report_count_and_last_hash():
    events = make_run(3)
    verifier = ChainVerifier(SCHEMA)
    for event in events:
        verifier.check(event)
    assert verifier.heads() == {"run-1": (3, events[-1].hash)}
