"""Several read-only queries on one warehouse in one subprocess: what `membench sql QUERY` prints
(TabSeparated or --format, read-only connection, `membench.exports.table_formats.raw_query`), for each query, without one
interpreter start and import per query (1–3 s each on the CI machine). A subprocess, not this
process: a chDB path has one owner process and chDB keeps one session per process
(membench/warehouse/client.py), so the test process must not open one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import json, sys
from membench.exports.table_formats import raw_query
from membench.pipeline.settings import load_settings
from membench.warehouse.client import connect
dsn, queries, fmt = json.loads(sys.stdin.read())
warehouse = connect(load_settings(warehouse=dsn).warehouse, create=False, read_only=True)
try:
    print(json.dumps([raw_query(warehouse, q, fmt).decode("utf-8") for q in queries]))
finally:
    warehouse.close()
"""


def sql_batch(home: Path, queries: list[str], warehouse: str | None = None, fmt: str = "TSV",
              timeout: float = 300) -> list[str]:
    """Each query's output in ClickHouse format FMT (`membench sql --format`, a text one), in order,
    from WAREHOUSE (default: HOME's embedded warehouse, as `membench sql` without --warehouse)."""
    env = {**os.environ, "MEMBENCH_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], input=json.dumps([warehouse, queries, fmt]),
                          capture_output=True, text=True, env=env, timeout=timeout, cwd=str(home.parent))
    if proc.returncode != 0:
        raise AssertionError(f"queries on {warehouse or 'the default warehouse'} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # the script's one line, after anything an import printed
