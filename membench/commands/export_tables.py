"""`membench export parquet RUN_SET OUT_DIR`: every table of a run set as Parquet files
(membench/exports/table_formats.py, docs/exports/tables.md)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from membench.commands.cli_helpers import connect_for_reading, dsn_options, validate_run_set_id
from membench.errors import UsageError
from membench.pipeline.settings import Settings


@click.command("parquet")
@click.argument("run_set")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@dsn_options
def parquet(run_set: str, out_dir: Path, settings: Settings) -> None:
    """Write RUN_SET's rows of trajectory_events and of every derived table (session_results,
    run_results, failures, memory_contracts, hygiene_observations) to OUT_DIR/<table>.parquet, with
    OUT_DIR/manifest.json (rows and SHA-256 per file). The warehouse is opened read-only."""
    from membench.exports.table_formats import TableExportError, export_parquet
    from membench.warehouse.client import WarehouseError

    validate_run_set_id(run_set, "RUN_SET")
    try:
        warehouse = connect_for_reading(settings, [run_set])
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None
    try:
        written = export_parquet(warehouse, run_set, out_dir)
    except TableExportError as exc:
        raise UsageError(str(exc)) from None
    finally:
        warehouse.close()
    console = Console(stderr=True)
    for item in written:
        console.print(f"{item.table}: {item.rows} rows -> {out_dir / item.file}", highlight=False, markup=False,
                      soft_wrap=True)
