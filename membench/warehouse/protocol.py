"""What code outside the client needs of a warehouse connection, as protocols: queries and reports
only read (`WarehouseReader`); sinks also insert and run DDL (`WarehouseStore`). `client.Warehouse`
(chDB or a ClickHouse server) satisfies both; tests may pass anything that does."""

from __future__ import annotations

from typing import Any, Protocol


class WarehouseReader(Protocol):
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple]: ...

    def query_dicts(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...

    def query_raw(self, sql: str, fmt: str, parameters: dict[str, Any] | None = None) -> bytes: ...


class WarehouseStore(WarehouseReader, Protocol):
    def command(self, sql: str, settings: dict[str, Any] | None = None) -> Any: ...

    def insert(self, table: str, rows: list[list[Any]], columns: list[str], dedup_token: str) -> None: ...

    def insert_bytes(self, table: str, columns: list[str], data: bytes, fmt: str, dedup_token: str) -> None: ...
