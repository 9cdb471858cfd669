"""`membench sql "QUERY"`: run SQL on the warehouse, print ClickHouse TSV (no header)."""

from __future__ import annotations

import sys

import click

from membench.commands.common import dsn_options, open_warehouse
from membench.errors import UsageError
from membench.settings import Settings


@click.command()
@click.argument("query")
@dsn_options
def sql(query: str, settings: Settings) -> None:
    """Run QUERY against the warehouse and print the result as TabSeparated."""
    warehouse = open_warehouse(settings)
    try:
        out = warehouse.query_tsv(query)
    except Exception as exc:  # the engine's message names the problem
        raise UsageError(f"query failed: {str(exc).strip().splitlines()[0][:500]}") from None
    finally:
        warehouse.close()
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
