"""Options and helpers shared by the commands."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from membench.errors import UsageError
from pipeline.settings import Settings, load_settings
from schemas.fields import PLAIN_NAME_RULE, is_plain_name


def dsn_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Adds --bus and --warehouse (overriding MEMBENCH_HOME's defaults) and passes `settings`."""

    @click.option("--warehouse", "warehouse_dsn", metavar="DSN", default=None,
                  help="chdb:///path (embedded, default under MEMBENCH_HOME) or http(s)://host:8123")
    @click.option("--bus", "bus_dsn", metavar="DSN", default=None,
                  help="file://DIR (embedded, default MEMBENCH_HOME/runs) or kafka://HOST:PORT")
    @functools.wraps(func)
    def wrapper(*args: Any, bus_dsn: str | None, warehouse_dsn: str | None, **kwargs: Any) -> Any:
        for name, dsn, schemes in (("--bus", bus_dsn, ("file://", "kafka://")),
                                   ("--warehouse", warehouse_dsn, ("chdb://", "http://", "https://"))):
            if dsn is not None and not dsn.startswith(schemes):
                raise UsageError(f"{name}: unknown DSN '{dsn}' (expected {' or '.join(s + '...' for s in schemes)})")
        if bus_dsn and bus_dsn.startswith("kafka://"):
            from schemas.topics import topics_from_dsn

            try:
                topics_from_dsn(bus_dsn)
            except ValueError as exc:
                raise UsageError(f"--bus: {exc}") from None
        return func(*args, settings=load_settings(bus_dsn, warehouse_dsn), **kwargs)

    return wrapper


def open_warehouse(settings: Settings, create: bool = True):
    from warehouse.client import WarehouseError, connect

    try:
        return connect(settings.warehouse, create=create)
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None


def parse_list(value: str, option: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"{option}: empty list")
    return items


def parse_seeds(value: str) -> list[int]:
    seeds = []
    for item in parse_list(value, "--seeds"):
        try:
            seeds.append(int(item))
        except ValueError:
            raise UsageError(f"--seeds: '{item}' is not an integer") from None
    return seeds


def validate_run_set_id(value: str | None, where: str = "--run-set") -> str | None:
    """VALUE when it is a valid run-set id (None passes through: the id is derived); otherwise a
    UsageError (exit 2) naming WHERE — the option or argument it came from.

    A run-set id becomes a directory under MEMBENCH_HOME/runs/ and a value in warehouse queries, so
    it is confined to `schemas.fields.PLAIN_NAME`: 1-128 characters, a letter or digit first, then
    letters, digits, '.', '_', '-', and no '..' — no path separator, no leading dot, no escape
    from the runs directory."""
    if value is None or is_plain_name(value):
        return value
    raise UsageError(f"{where}: invalid run-set id {value!r} ({PLAIN_NAME_RULE})")
