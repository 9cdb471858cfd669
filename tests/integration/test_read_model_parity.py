"""The in-memory read model against the warehouse on real run sets (the shared smoke grid and the
transfer study, made by the real pipeline): each run set's log folded through the processors
(`membench.pipeline.log_fold`) into an `InMemoryReadModel` gives, read by read and as the full
report `membench report` builds (canary proof included), report.json, report.md and report.html,
exactly what a chDB warehouse filled from the same log gives (`snapshot_from_logs`, the same fold).

The warehouse the run itself wrote agrees read for read as well: its sink made each raw row from
the event's bytes, as a replay of the log does (membench/warehouse/sink.py).
tests/warehouse/test_read_model.py holds the controls."""

from __future__ import annotations

import pytest

from membench.pipeline.grid_run import render_report
from membench.pipeline.log_fold import read_model_from_log
from membench.pipeline.log_snapshot import snapshot_from_logs
from membench.pipeline.report_inputs import build_full_report
from membench.warehouse.client import connect
from membench.warehouse.read_model import WarehouseReadModel
from tests.warehouse.read_model_fixtures import differing_reads

pytestmark = pytest.mark.integration


@pytest.fixture(params=["smoke", "transfer"])
def shared_home(request):
    if request.param == "smoke":
        return request.getfixturevalue("smoke_run_set").home
    return request.getfixturevalue("transfer_study_home")


def _rendered(reads, home, run_set: str) -> tuple[dict[str, str], list[str]]:
    report, secrets = build_full_report(reads, run_set, home, blob_dir=home / "runs" / run_set / "blobs")
    return render_report(report, secrets), [s.value for s in secrets]


def test_the_reports_from_memory_are_the_warehouses_byte_for_byte(shared_home):
    run_sets = sorted(p.parent.name for p in (shared_home / "runs").glob("*/events.avro"))
    assert run_sets
    for run_set in run_sets:
        memory = read_model_from_log(shared_home / "runs" / run_set / "events.avro", run_set)
        texts, secrets = _rendered(memory, shared_home, run_set)
        needles = secrets + ["é", ""]
        snapshot = snapshot_from_logs(shared_home / "runs", [run_set])
        try:
            sql = WarehouseReadModel(snapshot.warehouse)
            assert differing_reads(sql, memory, run_set, needles) == [], run_set
            assert _rendered(sql, shared_home, run_set) == (texts, secrets), run_set
        finally:
            snapshot.close()
        # the warehouse the run wrote: the same figures
        warehouse = connect(f"chdb://{shared_home / 'warehouse'}", create=False, read_only=True)
        try:
            assert differing_reads(WarehouseReadModel(warehouse), memory, run_set, needles) == [], run_set
        finally:
            warehouse.close()
    if "smoke" in run_sets[0]:
        assert secrets, "the smoke pack's canary proof must search for its secrets"
