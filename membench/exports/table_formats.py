"""Tables out of the warehouse: query results in any ClickHouse output format, and a run set's
tables as Parquet files (docs/exports/tables.md).

The engine does the formatting: a query's result is fetched in the named ClickHouse format
(`TSV`, `CSVWithNames`, `JSONEachRow`, `Parquet`, `Pretty`, ...), so column types survive as the
engine writes them. Which formats exist, and which of them are binary (not fit for a terminal), is
asked of the engine too (`system.formats`).

`export_parquet` writes every table a report reads — `trajectory_events` and each derived table —
filtered to one run set, one Parquet file per table, plus `manifest.json` (rows and SHA-256 of each
file). A row that a retried insert duplicated is written once (the key each table is read by:
`event_id` of the raw log, `derived_id` of a derived table), rows are ordered by the table's key,
and nothing is written unless every table was fetched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membench.warehouse import queries
from membench.warehouse.protocol import WarehouseReader
from membench.warehouse.tables import DERIVED_TABLES

class TableExportError(ValueError):
    """A format the engine does not know, a run set it holds nothing of, an unwritable directory."""


def raw_query(warehouse: WarehouseReader, sql: str, fmt: str, parameters: dict[str, Any] | None = None) -> bytes:
    """SQL's result as the bytes of ClickHouse output format FMT, on the warehouse's connection and
    under its settings (so a read-only connection stays read-only)."""
    return warehouse.query_raw(sql, fmt, parameters)


def resolve_format(warehouse: WarehouseReader, name: str) -> tuple[str, bool]:
    """(the engine's name of output format NAME, whether it is fit for a terminal). NAME matches
    exactly, else case-insensitively when that is unambiguous; anything else is a TableExportError
    naming it."""
    formats = queries.output_formats(warehouse)
    if name in formats:
        return name, formats[name]
    folded = [known for known in formats if known.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0], formats[folded[0]]
    common = ", ".join(f for f in ("TSV", "TSVWithNames", "CSVWithNames", "JSONEachRow", "Parquet", "Pretty")
                       if f in formats)
    raise TableExportError(f"unknown ClickHouse output format '{name}' (e.g. {common}; the engine lists all "
                           "in system.formats)")


# ------------------------------------------------------------------------------------------ Parquet


def table_key(table: str) -> tuple[str, tuple[str, ...]]:
    """(the column a row is identified by, the columns rows are ordered by) of an exported table."""
    if table == "trajectory_events":
        return "event_id", ("run_id", "seq")
    order = next((key for name, key in DERIVED_TABLES.values() if name == table), ("run_id",))
    return "derived_id", order


@dataclass(frozen=True)
class TableFile:
    table: str
    file: str  # the file's name inside the output directory
    rows: int
    sha256: str


def export_parquet(warehouse: Any, run_set: str, out_dir: Path) -> list[TableFile]:
    """Write OUT_DIR/<table>.parquet for every table a report reads, filtered to RUN_SET, and
    OUT_DIR/manifest.json. All files are fetched into a staging directory inside OUT_DIR first and
    moved into place only when every table was fetched."""
    tables = queries.audited_tables()
    if not queries.has_raw_events(warehouse, run_set):
        raise TableExportError(f"run set '{run_set}' has no events in the warehouse")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".membench-export-", dir=out_dir))
    except OSError as exc:
        raise TableExportError(f"cannot write into {out_dir}: {exc.strerror or exc}") from None
    try:
        written = []
        for table in tables:
            ident, order = table_key(table)  # the rows as `membench.frames` reads them: once each, in key order
            sql, parameters = queries.table_statement(table, run_set, ident, order)
            data = raw_query(warehouse, sql, "Parquet", parameters)
            rows = queries.distinct_rows(warehouse, table, ident, run_set)
            name = f"{table}.parquet"
            (staging / name).write_bytes(data)
            written.append(TableFile(table, name, int(rows), hashlib.sha256(data).hexdigest()))
        manifest = {"run_set": run_set, "format": "Parquet",
                    "tables": {t.table: {"file": t.file, "rows": t.rows, "sha256": t.sha256} for t in written}}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        for name in [t.file for t in written] + ["manifest.json"]:
            os.replace(staging / name, out_dir / name)
        return written
    except OSError as exc:
        raise TableExportError(f"cannot write into {out_dir}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
