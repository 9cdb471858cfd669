"""The warehouse's `scored_cells` view is the report's cell, so the README's scored-cell
query (read from README.md) gives the report's pass rates, while the naive query over `session_results` does not (it
counts the warm-up sessions)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from membench.processors import derive_all
from membench.reports.build import build_report
from membench.schemas.chain import seal
from membench.schemas.registry import default_registry
from tests.reports.test_validity_gates_report import _grid
from membench.warehouse.client import connect
from membench.warehouse.read_model import WarehouseReadModel
from membench.warehouse.sink import RunBatchSink

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_query() -> str:
    """The scored-cell query as the README documents it, for run set 'rs'."""
    match = re.search(r'membench sql "(SELECT condition, sum\(passed\) AS passed_cells.*?)"', README.read_text(), re.S)
    assert match, "README.md lost its scored-cell query"
    return match.group(1).replace("RUN_SET", "rs")
NAIVE = "SELECT condition, avg(passed) AS rate FROM session_results GROUP BY condition ORDER BY condition"


def test_the_scored_cell_query_gives_the_reports_pass_rates(tmp_path):
    schema = default_registry().latest("event")
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        sink = RunBatchSink(warehouse, schema.fingerprint_hex)
        for events in _grid():  # B0 fails the forward traps, passes C9; B5 the opposite; warm-ups pass
            derived = derive_all(events)
            for event in events:
                _, datum = seal(schema, event)
                sink.add(event, datum, [d for d in derived if d.source_seq == event.seq])
        sink.flush()
        report = {c.condition: c for c in build_report(WarehouseReadModel(warehouse), "rs").conditions}
        scored = {r["condition"]: r for r in warehouse.query_dicts(readme_query())}
        naive = {r["condition"]: r["rate"] for r in warehouse.query_dicts(NAIVE)}
    finally:
        warehouse.close()
    assert set(scored) == set(report) == {"B0", "B5"}
    for condition, entry in report.items():
        assert scored[condition]["pass_rate"] == pytest.approx(entry.pass_rate)
        assert (scored[condition]["passed_cells"], scored[condition]["valid_cells"]) == (entry.passed, 9)
        assert scored[condition]["excluded_cells"] == entry.excluded == 0
    assert report["B0"].pass_rate == pytest.approx(3 / 9)
    assert naive["B0"] == pytest.approx((18 + 3) / 27)  # the control: warm-up sessions counted as cells
