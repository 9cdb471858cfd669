"""`membench report RUN_SET`: rebuild a run set's report from the warehouse."""

from __future__ import annotations

import json

import click
from rich.console import Console

from membench.commands.common import dsn_options, open_warehouse
from membench.commands.run import print_table, write_report
from membench.errors import UsageError
from membench.settings import Settings


@click.command()
@click.argument("run_set")
@click.option("--json", "as_json", is_flag=True, help="print report.json to stdout")
@dsn_options
def report(run_set: str, as_json: bool, settings: Settings) -> None:
    """Rebuild RUN_SET's report.json, report.md and report.html from the warehouse."""
    from reports.build import ReportError, build_report
    from reports.model import to_json

    warehouse = open_warehouse(settings, create=False)
    try:
        built = build_report(warehouse, run_set)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    finally:
        warehouse.close()
    out = write_report(settings, built)
    if as_json:
        click.echo(json.dumps(to_json(built), indent=2))
    else:
        print_table(Console(), built)
        Console(stderr=True).print(f"report: {out / 'report.json'}")
