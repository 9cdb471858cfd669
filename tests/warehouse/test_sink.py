"""The batched sink against the real embedded ClickHouse engine (chDB)."""

import pytest

from membench.processors import derive_all
from membench.schemas.chain import seal
from membench.schemas.registry import default_registry
from tests.processors.test_verdicts import build_run
from membench.warehouse.client import WarehouseError, connect
from membench.warehouse.sink import RunBatchSink

pytestmark = pytest.mark.integration


def test_retried_batches_land_once(tmp_path):
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        schema = default_registry().latest("event")
        events = build_run()
        for attempt in range(2):  # the same run delivered twice (a retry)
            sink = RunBatchSink(warehouse, schema.fingerprint_hex)
            derived = derive_all(events)
            for event in events:
                _, datum = seal(schema, event)
                sink.add(event, datum, [d for d in derived if d.source_seq == event.seq])
            sink.flush()
        assert warehouse.query_rows("SELECT count() FROM trajectory_events")[0][0] == len(events)
        assert warehouse.query_rows("SELECT count() FROM session_results")[0][0] == 3
        assert warehouse.query_rows("SELECT count() FROM run_results")[0][0] == 1
        assert warehouse.query_rows("SELECT scored_passed FROM run_results")[0][0] is False
    finally:
        warehouse.close()


def test_a_chdb_path_has_one_owner(tmp_path):
    first = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        with pytest.raises(WarehouseError, match="owned by another process"):
            connect(f"chdb://{tmp_path / 'wh'}")
    finally:
        first.close()


def test_a_payload_built_without_its_optional_fields_is_stored_as_the_log_gives_it_back(tmp_path):
    """A producer may leave out an optional field at its default (a Turn without `source_scope`); the
    log's bytes hold it. The sink's row is made from the bytes, so the payload text a report reads
    (the canary's byte counts, JSON reads) is the one a replay of the log gives, on either bus."""
    import dataclasses
    import json

    from membench.schemas.codec import decode, frame
    from membench.schemas.events import Event, bounded_text
    from membench.warehouse.sink import trajectory_row

    schema = default_registry().latest("event")
    start = build_run()[0]
    turn = dataclasses.replace(start, event_id="turn-lean", seq=start.seq + 1, kind="Turn", visibility="agent",
                               payload={"role": "agent", "text": bounded_text("done")})
    turn, datum = seal(schema, turn)
    logged = Event.from_record(decode(frame(schema, datum))[1])
    assert "source_scope" not in turn.payload and logged.payload["source_scope"] == []
    # control: a row made from the producer's dict keeps a text no replay gives back
    assert json.loads(trajectory_row(turn, datum, schema.fingerprint_hex)[12]) != logged.payload
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        sink = RunBatchSink(warehouse, schema.fingerprint_hex)
        sink.add(turn, datum, [])
        sink.flush()
        (stored,) = warehouse.query_rows("SELECT payload FROM trajectory_events WHERE event_id = 'turn-lean'")
        assert stored[0] == trajectory_row(logged, datum, schema.fingerprint_hex)[12]
        assert json.loads(stored[0]) == logged.payload
    finally:
        warehouse.close()
