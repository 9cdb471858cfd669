"""Connecting to ClickHouse by DSN: `chdb:///path` (embedded engine) or `http(s)://host:8123`.

A chDB path is held by one process at a time: `connect` takes an exclusive lock file beside the
data directory and refuses a second owner with a clear error.

`connect(..., read_only=True)` gives a connection the engine itself keeps read-only (ClickHouse's
`readonly = 1`: no INSERT, ALTER, DELETE, DROP, TRUNCATE, CREATE, OPTIMIZE, SYSTEM, no settings
change, no file/url table functions) for its whole life: a chDB session is switched with
`SET readonly = 1` (chDB keeps it; it cannot be switched back), an HTTP server gets the setting
with every request. `membench sql` uses it, so the audit trail cannot be edited by accident.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import clickhouse_connect
from clickhouse_connect.driver import options as _driver_options
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from membench.warehouse.tables import ensure_tables


class WarehouseError(RuntimeError):
    pass


class WarehouseBusy(WarehouseError):
    """The chDB warehouse is owned by another process (`owner`: its pid and command line, when known)."""

    def __init__(self, message: str, owner: str | None = None):
        super().__init__(message)
        self.owner = owner


def _owner(lock: Path) -> str | None:
    """'pid N (`command line`)' of the process that wrote LOCK, when it is still there to ask."""
    try:
        pid = int(lock.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        shown = " ".join(" ".join(a.decode(errors="replace").split()) for a in argv if a)
    except OSError:
        return f"pid {pid}"
    return f"pid {pid}: `{shown[:200]}`" if shown else f"pid {pid}"


@contextmanager
def _rows_are_lists() -> Iterator[None]:
    """Inserts of plain rows without importing pandas.

    clickhouse-connect looks at `options.pd` and `options.np` on every insert to ask whether the
    data is a DataFrame or an array, and the first look imports pandas and numpy: a fifth to a
    third of a second of CPU in every CLI process that records a run (measured with
    `python -X importtime`; docs/benchmarks.md, "Cuts at the source (stop 38)"). The rows passed
    here are lists, so while a library is not imported yet the answer "not installed" is true for
    them; it is given for this call only, so a later DataFrame use still imports the library as
    usual. The options are the process's, not this warehouse's (its lock does not cover them):
    this is safe because this module is membench's only user of clickhouse-connect and never
    passes it a DataFrame or an array, from any thread."""
    injected = [name for name, module in (("pd", "pandas"), ("np", "numpy"))
                if module not in sys.modules and name not in vars(_driver_options)]
    for name in injected:
        setattr(_driver_options, name, None)
    try:
        yield
    finally:
        for name in injected:
            vars(_driver_options).pop(name, None)


class Warehouse:
    """A thread-safe wrapper: chDB's client is used from one thread at a time."""

    def __init__(self, dsn: str, client: Any, lock_handle: Any = None):
        self.dsn = dsn
        self._client = client
        self._lock = threading.RLock()
        self._lock_handle = lock_handle
        self.read_only = False
        self._per_call: dict[str, Any] | None = None  # settings every call carries (read-only over HTTP)

    def make_read_only(self) -> None:
        """From now on the engine refuses every write on this connection; there is no way back."""
        with self._lock:
            if self.dsn.startswith("chdb://"):
                self._client.command("SET readonly = 1")  # session-wide; chDB keeps it for the session
            else:
                self._per_call = {"readonly": 1}  # request-scoped on HTTP, so it rides on every call
            self.read_only = True

    def command(self, sql: str, settings: dict[str, Any] | None = None) -> Any:
        """A statement without a result set (DDL, ALTER, DELETE, SYSTEM, ...)."""
        with self._lock:
            if self._per_call:
                settings = {**(settings or {}), **self._per_call}
            return self._client.command(sql, settings=settings)

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple]:
        with self._lock:
            return list(self._client.query(sql, parameters=parameters, settings=self._per_call).result_rows)

    def query_dicts(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            result = self._client.query(sql, parameters=parameters, settings=self._per_call)
            return [dict(zip(result.column_names, row)) for row in result.result_rows]

    def query_tsv(self, sql: str) -> bytes:
        """The result as ClickHouse TabSeparated (a statement that returns rows)."""
        return self.query_raw(sql, "TabSeparated")

    def query_raw(self, sql: str, fmt: str, parameters: dict[str, Any] | None = None) -> bytes:
        """The result as the bytes of ClickHouse output format `fmt`, under this connection's
        settings (a read-only connection stays read-only)."""
        with self._lock:
            return self._client.raw_query(sql, parameters=parameters, fmt=fmt, settings=self._per_call)

    def insert(self, table: str, rows: list[list[Any]], columns: list[str], dedup_token: str) -> None:
        if not rows:
            return
        with self._lock, _rows_are_lists():
            self._client.insert(table, rows, column_names=columns,
                                settings={"insert_deduplication_token": dedup_token, **(self._per_call or {})})

    def insert_bytes(self, table: str, columns: list[str], data: bytes, fmt: str, dedup_token: str) -> None:
        """Rows already in ClickHouse input format `fmt` (e.g. RowBinary), passed through as bytes."""
        if not data:
            return
        with self._lock:
            self._client.raw_insert(table, columns, data, fmt=fmt,
                                    settings={"insert_deduplication_token": dedup_token, **(self._per_call or {})})

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


CONNECT_TIMEOUT_S = 5  # a server that does not answer is reported within this, not after the default 10 s


@contextmanager
def _driver_quiet() -> Iterator[None]:
    """The HTTP driver's own warning about a failed request off while connecting: the failure is
    raised and reported in one line."""
    import logging

    driver = logging.getLogger("clickhouse_connect.driver._backend.http_sync")
    before = driver.level
    driver.setLevel(logging.ERROR)
    try:
        yield
    finally:
        driver.setLevel(before)


def _address(dsn: str) -> str:
    """The DSN without its credentials (user:password@)."""
    scheme, _, rest = dsn.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2].split('/', 1)[0]}"


def _cause(exc: BaseException) -> str:
    """The innermost reason of a connection failure (e.g. 'Connection refused'), not the retry chain."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\] ([^'\"()]+)", text)
    if found:
        return found.group(1).strip()
    for marker in ("timed out", "Name or service not known", "Connection refused"):
        if marker in text:
            return marker
    return text.split(" executing HTTP request")[0][:200]


def _chdb_path(dsn: str) -> Path:
    path = dsn[len("chdb://"):]
    if not path.startswith("/"):
        raise WarehouseError(f"chdb DSN needs an absolute path (chdb:///path), got {dsn!r}")
    return Path(path)


def connect(dsn: str, create: bool = True, read_only: bool = False) -> Warehouse:
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
            owner = _owner(Path(str(path) + ".lock"))
            raise WarehouseBusy(
                f"the chDB warehouse {path} is owned by another process{f' ({owner})' if owner else ''} "
                f"(lock {path}.lock); stop it or use a ClickHouse server DSN", owner
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        client = clickhouse_connect.get_client(dsn=f"chdb://{path}")
        warehouse = Warehouse(dsn, client, handle)
    elif dsn.startswith(("http://", "https://")):
        try:
            with _driver_quiet():
                warehouse = Warehouse(dsn, clickhouse_connect.get_client(dsn=dsn, connect_timeout=CONNECT_TIMEOUT_S))
                ensure_tables(warehouse)
        except OperationalError as exc:  # the server does not answer: one line, not the HTTP stack's traceback
            raise WarehouseError(f"the ClickHouse server at {_address(dsn)} is unreachable ({_cause(exc)}); start "
                                 "it, or use the embedded warehouse (omit --warehouse and MEMBENCH_WAREHOUSE: "
                                 "chDB under MEMBENCH_HOME)") from None
        except DatabaseError as exc:  # something answered, but not as a ClickHouse server this DSN may use
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise WarehouseError(f"the ClickHouse server at {_address(dsn)} refused the connection ({first}); check "
                                 "the DSN's address, user and password") from None
    else:
        raise WarehouseError(f"unknown warehouse DSN {dsn!r}: expected chdb:///path or http(s)://host:8123")
    ensure_tables(warehouse)
    if read_only:
        warehouse.make_read_only()
    return warehouse
