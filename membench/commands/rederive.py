"""`membench rederive RUN_SET|--all [--jobs N]`: rebuild derived tables from the raw log in the warehouse."""

from __future__ import annotations

import json
import time

import click

from membench.commands.cli_helpers import dsn_options, open_warehouse, validate_run_set_id
from membench.errors import UsageError
from membench.pipeline.settings import Settings
from membench.formats.fields import is_plain_name


@click.command()
@click.argument("run_set", required=False)
@click.option("--all", "all_run_sets", is_flag=True, help="every run set the raw table holds")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 64),
              help="worker processes deriving batches of runs (this process reads and writes)")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@dsn_options
def rederive(run_set: str | None, all_run_sets: bool, jobs: int, as_json: bool, settings: Settings) -> None:
    """Re-run the processors over RUN_SET's raw events (trajectory_events) and replace its rows in
    every derived table (after a processor change). New rows are staged first and swapped in at the
    end, so a crash mid-way leaves the old rows in place; the raw log is never written. Updates the
    run set's log_root.json row digests when its raw log is unchanged."""
    from membench.audit.rederive import RederiveError, rederive as do_rederive, refresh_log_root
    from membench.audit.log_root_record import record_path
    from membench.warehouse.queries import raw_run_sets

    if all_run_sets == (run_set is not None):
        raise UsageError("rederive: give one RUN_SET or --all")
    validate_run_set_id(run_set, "RUN_SET")
    warehouse = open_warehouse(settings, create=False)
    try:
        known = raw_run_sets(warehouse)
        if run_set is not None and run_set not in known:
            raise UsageError(f"RUN_SET: no run set '{run_set}' in the warehouse's trajectory_events "
                             f"({len(known)} run sets there)")
        targets = known if run_set is None else [run_set]  # None: --all (checked above)
        results = []
        last = [0.0]

        def progress(result, total: int) -> None:
            now = time.monotonic()
            if as_json or (now - last[0] < 1.0 and result.runs < total):
                return
            last[0] = now
            click.echo(f"rederive {result.run_set}: {result.runs}/{total} runs, {result.events:,} events, "
                       f"{result.derived:,} derived", err=True)

        for name in targets:
            try:
                result = do_rederive(warehouse, name, jobs, progress)
            except RederiveError as exc:
                click.echo(f"rederive: {exc}; nothing of run set '{name}' was replaced", err=True)
                raise SystemExit(1) from None
            if is_plain_name(name):
                result.log_root_note = refresh_log_root(warehouse, name, record_path(settings.runs_dir, name),
                                                        settings.warehouse)
            results.append(result)
            if not as_json:
                rows = ", ".join(f"{table} {n}" for table, n in sorted(result.rows.items()) if n)
                click.echo(f"run set {name}: {result.runs} runs, {result.events:,} events re-derived into "
                           f"{result.derived:,} rows ({rows}) in {result.seconds:.1f} s "
                           f"({result.events / max(result.seconds, 1e-9):,.0f} events/s)")
                if result.log_root_note:
                    click.echo(f"  {result.log_root_note}")
    finally:
        warehouse.close()
    if as_json:
        click.echo(json.dumps({"run_sets": [r.to_json() for r in results]}, indent=2))
