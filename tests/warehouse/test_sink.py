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
