"""`membench sql "QUERY"`: run SQL on the warehouse, read-only, print ClickHouse TSV (no header).

`--format NAME` takes any ClickHouse output format the engine lists (`TSV` — the default, the same
TabSeparated as always —, `TSVWithNames`, `CSVWithNames`, `JSONEachRow`, `Parquet`, `Pretty`, ...;
matched case-insensitively); an unknown name exits 2 naming it. `--output FILE` writes the result
to FILE (atomically, only when the query succeeded) instead of stdout. A binary format (one the
engine marks not fit for a terminal: Parquet, Arrow, ORC, Native, RowBinary, ...) goes to stdout
only when stdout is not a terminal (a pipe or a redirect); to a terminal it is refused (exit 2).

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
from pathlib import Path

import click

from membench.commands.cli_helpers import connect_for_reading, dsn_options
from membench.errors import UsageError
from membench.pipeline.settings import Settings

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
@click.option("--format", "fmt", default="TSV", show_default=True, metavar="NAME",
              help="a ClickHouse output format: TSV, TSVWithNames, CSVWithNames, JSONEachRow, Parquet, Pretty, ... "
              "(binary ones need --output or a stdout that is not a terminal)")
@click.option("--output", "output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the result to this file instead of stdout")
@dsn_options
def sql(query: str, allow_write: bool, fmt: str, output: Path | None, settings: Settings) -> None:
    """Run QUERY against the warehouse, read-only, and print the result as TabSeparated (or --format
    NAME, any ClickHouse output format). A query that would write is refused (exit 2) unless
    --allow-write is given."""
    from membench.exports.table_formats import TableExportError, raw_query, resolve_format
    from membench.warehouse.client import WarehouseBusy, WarehouseError, connect

    if allow_write:
        click.echo("WARNING: --allow-write breaks the audit trail: rows this query changes no longer match the log, "
                   "and membench report refuses the run sets they belong to", err=True)
    try:
        warehouse = connect_for_reading(settings) if not allow_write else connect(settings.warehouse, create=False)
    except WarehouseBusy as exc:  # a write needs the warehouse itself, never a snapshot
        raise UsageError(f"--allow-write: {exc}; a write waits until {exc.owner or 'that process'} has ended") from None
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None
    try:
        try:
            fmt, tty_friendly = resolve_format(warehouse, fmt)
        except TableExportError as exc:
            raise UsageError(f"--format: {exc}") from None
        if not tty_friendly and output is None and sys.stdout.isatty():
            raise UsageError(f"--format {fmt}: a binary format is not printed to a terminal; give --output FILE "
                             "or redirect stdout")
        if returns_rows(query):
            out = raw_query(warehouse, query, fmt)
        else:
            result = warehouse.command(query)
            out = f"{result}\n".encode() if isinstance(result, (str, int)) and str(result) else b""
    except UsageError:
        raise
    except Exception as exc:  # the engine's message names the problem
        first = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else type(exc).__name__
        if not allow_write and _refused_for_readonly(str(exc)):
            raise UsageError("sql: refused, the warehouse is read-only through membench (ClickHouse readonly = 1): "
                             f"{first} — writing breaks the audit trail; --allow-write does it anyway") from None
        raise UsageError(f"query failed: {first}") from None
    finally:
        warehouse.close()
    if output is None:
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
        return
    tmp = output.with_name(f".{output.name}.tmp")
    try:
        tmp.write_bytes(out)
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"--output: cannot write {output}: {exc.strerror or exc}") from None
