"""`membench sql "QUERY"`: run SQL on the warehouse, read-only, print ClickHouse TSV (no header).

The warehouse is the audit trail's second half (docs/design.md §9): the raw log and the derived
tables every report is built from. Through the CLI it is read-only — the query runs under
ClickHouse's `readonly = 1`, so the engine itself refuses INSERT, ALTER, DROP, TRUNCATE, CREATE,
OPTIMIZE, settings changes and the file/url table functions. `--allow-write` lifts that, and
says on stderr that it breaks the audit trail: `membench report` will refuse a run set whose
rows no longer match its log_root.json.
"""

from __future__ import annotations

import re
import sys

import click

from membench.commands.common import dsn_options
from membench.errors import UsageError
from membench.settings import Settings

READONLY_ERROR = 164  # ClickHouse's READONLY error code
ROW_STATEMENTS = ("SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN")


def _refused_for_readonly(message: str) -> bool:
    return f"Code: {READONLY_ERROR}." in message or "(READONLY)" in message


def returns_rows(query: str) -> bool:
    """Whether QUERY is a statement with a result set (printed as TSV); anything else (INSERT,
    ALTER, DELETE, DROP, ...) is sent as a command, so the engine answers it with its own error
    instead of a syntax error about an appended FORMAT clause."""
    text = re.sub(r"(--[^\n]*\n|/\*.*?\*/|\s|\()+", " ", query + "\n", flags=re.S).strip()
    return text.split(" ", 1)[0].upper() in ROW_STATEMENTS


@click.command()
@click.argument("query")
@click.option("--allow-write", is_flag=True, help="run QUERY with write access. BREAKS THE AUDIT TRAIL: edited "
              "rows no longer match the log, and `membench report` refuses the run sets they belong to")
@dsn_options
def sql(query: str, allow_write: bool, settings: Settings) -> None:
    """Run QUERY against the warehouse, read-only, and print the result as TabSeparated. A query that
    would write is refused (exit 2) unless --allow-write is given."""
    from warehouse.client import WarehouseError, connect

    if allow_write:
        click.echo("WARNING: --allow-write breaks the audit trail: rows this query changes no longer match the log, "
                   "and membench report refuses the run sets they belong to", err=True)
    try:
        warehouse = connect(settings.warehouse, create=False, read_only=not allow_write)
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None
    try:
        if returns_rows(query):
            out = warehouse.query_tsv(query)
        else:
            result = warehouse.command(query)
            out = f"{result}\n".encode() if isinstance(result, (str, int)) and str(result) else b""
    except Exception as exc:  # the engine's message names the problem
        first = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else type(exc).__name__
        if not allow_write and _refused_for_readonly(str(exc)):
            raise UsageError("sql: refused, the warehouse is read-only through membench (ClickHouse readonly = 1): "
                             f"{first} — writing breaks the audit trail; --allow-write does it anyway") from None
        raise UsageError(f"query failed: {first}") from None
    finally:
        warehouse.close()
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
