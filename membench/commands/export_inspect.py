"""`membench export inspect RUN_SET OUT_DIR`: a run set as Inspect AI eval logs (docs/exports/inspect.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from membench.commands.cli_helpers import connect_for_reading, dsn_options, validate_run_set_id
from membench.errors import UsageError
from membench.pipeline.settings import Settings


@click.command("inspect")
@click.argument("run_set")
@click.argument("out_dir", type=click.Path(path_type=Path))
@dsn_options
def inspect_(run_set: str, out_dir: Path, settings: Settings) -> None:
    """Write RUN_SET as Inspect AI eval logs into OUT_DIR: one .eval file per (suite, condition), one
    sample per unit (id = task, epoch = the seed's rank), scored by the oracle's verdict (C / I);
    excluded units are errored samples. Open them with `inspect view --log-dir OUT_DIR`. An unknown
    run set, or an OUT_DIR that is a file, exits 2."""
    validate_run_set_id(run_set, "RUN_SET")
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"OUT_DIR: {out_dir} exists and is not a directory")
    if importlib.util.find_spec("inspect_ai") is None:  # one clear line instead of a traceback
        raise click.ClickException("membench export inspect needs the inspect-ai package (pip install inspect-ai)")
    from membench.exports.inspect_log import InspectExportError, build_logs, load_run_set, write_logs
    from membench.warehouse.client import WarehouseError

    try:
        warehouse = connect_for_reading(settings, [run_set])
    except WarehouseError as exc:
        if "no warehouse at" in str(exc):
            raise UsageError(f"unknown run set {run_set!r}: {exc}") from None
        raise UsageError(str(exc)) from None
    try:
        data = load_run_set(warehouse, run_set)
    except InspectExportError as exc:
        raise UsageError(str(exc)) from None
    finally:
        warehouse.close()
    logs = build_logs(data)
    paths = write_logs(logs, out_dir)
    for path, log in zip(paths, logs):
        results = log.results
        scored = results.completed_samples if results else 0
        click.echo(f"{path}\t{log.eval.task}\t{len(log.samples or [])} samples\t{scored} scored")
