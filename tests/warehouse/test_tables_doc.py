"""docs/tables.md is the column reference of every warehouse table: generated from the DDL and
checked here against the tables real chDB creates, so a query written from it does not meet
ClickHouse's `Unknown expression identifier`."""

from __future__ import annotations

from pathlib import Path

from membench.warehouse.client import connect
from membench.warehouse.tables import column_reference, ensure_tables, table_columns

DOC = Path(__file__).parents[2] / "docs" / "tables.md"


def test_the_doc_is_the_generated_reference():
    assert DOC.read_text(encoding="utf-8") == column_reference(), (
        "docs/tables.md is stale: regenerate it with "
        "python -c 'from membench.warehouse.tables import column_reference as c; open(\"docs/tables.md\", \"w\").write(c())'")


def test_the_reference_is_the_tables_chdb_creates(tmp_path):
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    ensure_tables(warehouse)
    rows = warehouse.query_rows("SELECT table, name, type FROM system.columns WHERE database = currentDatabase() "
                                "ORDER BY table, position")
    created: dict[str, list[tuple[str, str]]] = {}
    for table, name, typ in rows:
        created.setdefault(table, []).append((name, typ))
    documented = table_columns()
    assert {t: created.get(t) for t in documented} == documented
    # every table but the view is documented (scored_cells is a view over run_results)
    assert set(created) - set(documented) == {"scored_cells"}
    assert "transfer_cases" in documented and "| `blocked_by` |" in DOC.read_text(encoding="utf-8")
