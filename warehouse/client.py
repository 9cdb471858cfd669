"""Connecting to ClickHouse by DSN: `chdb:///path` (embedded engine) or `http(s)://host:8123`.

A chDB path is held by one process at a time: `connect` takes an exclusive lock file beside the
data directory and refuses a second owner with a clear error.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import Any

import clickhouse_connect

from warehouse.tables import ensure_tables


class WarehouseError(RuntimeError):
    pass


class Warehouse:
    """A thread-safe wrapper: chDB's client is used from one thread at a time."""

    def __init__(self, dsn: str, client: Any, lock_handle: Any = None):
        self.dsn = dsn
        self._client = client
        self._lock = threading.RLock()
        self._lock_handle = lock_handle

    def command(self, sql: str, settings: dict[str, Any] | None = None) -> Any:
        with self._lock:
            return self._client.command(sql, settings=settings)

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple]:
        with self._lock:
            return list(self._client.query(sql, parameters=parameters).result_rows)

    def query_dicts(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            result = self._client.query(sql, parameters=parameters)
            return [dict(zip(result.column_names, row)) for row in result.result_rows]

    def query_tsv(self, sql: str) -> bytes:
        with self._lock:
            return self._client.raw_query(sql, fmt="TabSeparated")

    def insert(self, table: str, rows: list[list[Any]], columns: list[str], dedup_token: str) -> None:
        if not rows:
            return
        with self._lock:
            self._client.insert(table, rows, column_names=columns,
                                settings={"insert_deduplication_token": dedup_token})

    def close(self) -> None:
        with self._lock:
            try:
                self._client.close()
            finally:
                if self._lock_handle is not None:
                    fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
                    self._lock_handle.close()
                    self._lock_handle = None

    def __enter__(self) -> "Warehouse":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chdb_path(dsn: str) -> Path:
    path = dsn[len("chdb://"):]
    if not path.startswith("/"):
        raise WarehouseError(f"chdb DSN needs an absolute path (chdb:///path), got {dsn!r}")
    return Path(path)


def connect(dsn: str, create: bool = True) -> Warehouse:
    if dsn.startswith("chdb://"):
        path = _chdb_path(dsn)
        if not create and not path.exists():
            raise WarehouseError(f"no warehouse at {path} (nothing has been run yet)")
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(str(path) + ".lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise WarehouseError(
                f"the chDB warehouse {path} is owned by another process (lock {path}.lock); "
                "stop it or use a ClickHouse server DSN"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        client = clickhouse_connect.get_client(dsn=f"chdb://{path}")
        warehouse = Warehouse(dsn, client, handle)
    elif dsn.startswith(("http://", "https://")):
        warehouse = Warehouse(dsn, clickhouse_connect.get_client(dsn=dsn))
    else:
        raise WarehouseError(f"unknown warehouse DSN {dsn!r}: expected chdb:///path or http(s)://host:8123")
    ensure_tables(warehouse)
    return warehouse
