"""`replay --verify` streams: re-derived events are compared with the warehouse
a batch of ended runs at a time, in a real chDB warehouse, and every kind of disagreement is still
found whichever batch its run falls in."""

from __future__ import annotations

import dataclasses

import pytest

import membench.audit.comparison as comparison
import membench.audit.warehouse_source as warehouse_source
from membench.audit.replayer import replay
from membench.schemas.chain import seal
from membench.schemas.registry import default_registry
from tests.processors.test_verdicts import build_run


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Seven runs through the embedded pipeline: the log and the warehouse agree."""
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.warehouse.client import connect

    root = tmp_path_factory.mktemp("replay-stream")
    schema = default_registry().latest("event")
    runs = [build_run(("pass", "fail") if i % 2 else ("fail", "pass"), run_id=f"run-{i}") for i in range(7)]
    warehouse = connect(f"chdb://{root / 'wh'}")
    pipeline = EmbeddedPipeline(root / "events.avro", warehouse)
    for events in runs:
        for event in events:
            pipeline.publish(event, seal(schema, event)[1])
    pipeline.close()
    yield {"runs": runs, "warehouse": warehouse, "schema": schema, "log": root / "events.avro"}
    warehouse.close()


def _replay(recorded, runs, batch, monkeypatch):
    monkeypatch.setattr(comparison, "VERIFY_BATCH_RUNS", batch)
    schema = recorded["schema"]
    findings: list = []
    result = replay(((e, schema) for events in runs for e in events), findings, recorded["warehouse"])
    return result, [str(f) for f in findings]


@pytest.mark.parametrize("batch", [1, 2, 500])
def test_an_intact_log_agrees_whatever_the_batch(recorded, batch, monkeypatch):
    result, findings = _replay(recorded, recorded["runs"], batch, monkeypatch)
    assert findings == []
    assert result.compared == result.derived > 0 and result.runs == 7


@pytest.mark.parametrize("batch", [2, 500])
def test_a_truncated_run_leaves_warehouse_rows_not_re_derived(recorded, batch, monkeypatch):
    runs = list(recorded["runs"])
    runs[3] = runs[3][:6]  # run-3 loses its end: open, compared only at the end of the stream
    result, findings = _replay(recorded, runs, batch, monkeypatch)
    assert any(f.startswith("run run-3") and "no RunEnded" in f for f in findings), findings
    assert any(f.startswith("run run-3") and "was not re-derived from the log" in f for f in findings), findings
    assert not any(f.startswith(("run run-2", "run run-4")) for f in findings), findings


@pytest.mark.parametrize("batch", [2, 500])
def test_an_edited_verdict_differs_from_the_warehouse(recorded, batch, monkeypatch):
    runs = list(recorded["runs"])
    events = list(runs[1])
    index = next(i for i, e in enumerate(events) if e.kind == "OracleVerdict")
    events[index] = dataclasses.replace(events[index], payload={**events[index].payload, "outcome": "pass"
                                                                if events[index].payload["outcome"] == "fail"
                                                                else "fail"})
    runs[1] = events
    _, findings = _replay(recorded, runs, batch, monkeypatch)
    assert any(f.startswith("run run-1") and "SessionVerdict differs from the warehouse in" in f
               for f in findings), findings


def test_the_warehouse_source_pages_through_run_ids_and_replays_as_the_log_does(recorded, monkeypatch):
    """`replay warehouse:` reads run ids a page at a time (`raw_run_id_pages`, keyed on the last id
    of the page before): with pages of 2 runs every one of the 7 runs is read, once."""
    from membench.audit.file_source import events_from_file
    from membench.audit.warehouse_source import events_from_warehouse
    from membench.warehouse.queries import raw_run_count, raw_run_id_pages

    pages = list(raw_run_id_pages(recorded["warehouse"], "rs", 2))
    assert [len(p) for p in pages] == [2, 2, 2, 1]
    assert [r for p in pages for r in p] == sorted(f"run-{i}" for i in range(7)) and \
        raw_run_count(recorded["warehouse"], "rs") == 7
    monkeypatch.setattr(warehouse_source, "RUNS_PER_QUERY", 2)
    findings: list = []
    from_warehouse = replay(events_from_warehouse(recorded["warehouse"], "rs", findings), findings)
    from_log = replay(events_from_file(recorded["log"], []), [])
    assert findings == [] and (from_warehouse.events, from_warehouse.runs) == (from_log.events, 7)
    assert from_warehouse.log_root == from_log.log_root
