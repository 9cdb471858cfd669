"""The warehouse's main tables as pandas DataFrames, for notebooks (docs/exports/tables.md).

```python
from membench import frames

runs = frames.runs("my-run-set")                  # one row per unit, as the report counts them
sessions = frames.sessions("my-run-set")          # one row per (run, session)
events = frames.events("my-run-set", kinds=["ToolCall", "ToolResult"])
failures = frames.failures("my-run-set")
```

Every function opens the warehouse read-only, exactly as `membench sql` does (ClickHouse
`readonly = 1`), runs one query, closes it again and returns a `pandas.DataFrame`. The rows come
from the engine as Parquet, so column types are the engine's (ints, bools, timestamps with their
time zone, nullable strings, lists). Which warehouse: `warehouse=DSN` when given, else
`home/warehouse` when `home` (a MEMBENCH_HOME) is given, else the CLI's default
(`MEMBENCH_WAREHOUSE`, else `$MEMBENCH_HOME/warehouse`). An embedded (chDB) warehouse has one
owner at a time: while a `membench run` holds it, a call here reads a snapshot rebuilt from the
logs under that home's `runs/` instead (`membench.pipeline.log_snapshot`: every event logged so far; a unit
still running has no `runs` row yet), with a warning saying so (a ClickHouse server DSN has no
such limit). `run_set=None` reads every run set.

Each row appears once (a retried insert is read by its key, as the reports read it). Needs
`pandas` and `pyarrow`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from membench.exports.table_formats import raw_query, table_key
from membench.pipeline.settings import load_settings

__all__ = ["runs", "sessions", "events", "failures", "memory_contracts", "hygiene", "table"]


def _dsn(home: str | Path | None, warehouse: str | None) -> str:
    if warehouse is not None:
        return warehouse
    if home is not None:
        return f"chdb://{Path(home).expanduser().absolute() / 'warehouse'}"
    return load_settings().warehouse


def _frame(sql: str, parameters: dict[str, Any], home: str | Path | None, warehouse: str | None):
    import io

    import pandas as pd

    from membench.warehouse.client import WarehouseBusy, connect

    try:
        conn: Any = connect(_dsn(home, warehouse), create=False, read_only=True)  # or a snapshot's (below)
    except WarehouseBusy as exc:  # a run owns it: the logs are read instead
        if warehouse is not None:  # a DSN of the caller's: its logs are not known here
            raise
        import warnings

        from membench.pipeline.log_snapshot import snapshot_from_logs

        runs_dir = Path(home).expanduser().absolute() / "runs" if home is not None else load_settings().runs_dir
        snapshot = snapshot_from_logs(runs_dir, [parameters["rs"]] if "rs" in parameters else None)
        warnings.warn(f"the warehouse is owned by {exc.owner or 'another process'}; {snapshot.note}", stacklevel=3)
        conn = snapshot.reader()
    try:
        data = raw_query(conn, sql, "Parquet", parameters)
    finally:
        conn.close()
    return pd.read_parquet(io.BytesIO(data))


def table(name: str, run_set: str | None = None, home: str | Path | None = None, warehouse: str | None = None):
    """Rows of table NAME (`trajectory_events` or a derived table), each once, in key order."""
    from membench.warehouse.queries import table_statement

    return _frame(*table_statement(name, run_set, *table_key(name)), home, warehouse)


def runs(run_set: str | None = None, home: str | Path | None = None, warehouse: str | None = None,
         all_attempts: bool = False):
    """run_results: one row per unit — its completed run, else its excluded run, else its latest
    attempt — the rows a report counts (`membench.warehouse.queries.run_results`). `all_attempts=True`: every
    run, abandoned and retried attempts included. A valid cell is `status == "completed"` and not
    `excluded`; `scored_passed` is its outcome."""
    from membench.warehouse.queries import runs_statement

    return _frame(*runs_statement(run_set, all_attempts), home, warehouse)


def sessions(run_set: str | None = None, home: str | Path | None = None, warehouse: str | None = None):
    """session_results: one row per (run, session): verdict, outcome, usage, memory reads."""
    return table("session_results", run_set, home, warehouse)


def failures(run_set: str | None = None, home: str | Path | None = None, warehouse: str | None = None):
    """failures: one row per (run, session): the failure reason and the rule that chose it."""
    return table("failures", run_set, home, warehouse)


def memory_contracts(run_set: str | None = None, home: str | Path | None = None, warehouse: str | None = None):
    """memory_contracts: injected, cited, relevant and stale memory ids per (run, session)."""
    return table("memory_contracts", run_set, home, warehouse)


def hygiene(run_set: str | None = None, home: str | Path | None = None, warehouse: str | None = None):
    """hygiene_observations: one row per (run, session, metric)."""
    return table("hygiene_observations", run_set, home, warehouse)


def events(run_set: str | None = None, home: str | Path | None = None, warehouse: str | None = None,
           kinds: Iterable[str] | None = None, datum: bool = False):
    """trajectory_events: the raw log in (run, seq) order, one row per event; `payload` is JSON text
    (`json.loads`, or `pandas.json_normalize` over a column of them). `kinds` keeps those event
    kinds only; the exact Avro `datum` (bytes, for audit) is left out unless `datum=True`."""
    from membench.warehouse.queries import events_statement

    return _frame(*events_statement(run_set, sorted(set(kinds)) if kinds is not None else None, datum), home,
                  warehouse)
