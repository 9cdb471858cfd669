"""A derived table's row as the warehouse returns it, every column of the DDL present: for stand-in
readers of tests that isolate a report section from chDB (the typed reads refuse a partial row)."""

from __future__ import annotations

from typing import Any

from membench.warehouse.rows import ROW_TYPES
from membench.warehouse.tables import table_columns

_ZERO = {"String": "", "Int32": 0, "Int64": 0, "UInt64": 0, "Bool": False, "Float64": 0.0}


def _zero(typ: str) -> Any:
    if typ.startswith("Nullable("):
        return None
    if typ.startswith("Array("):
        return []
    if typ.startswith("Map("):
        return {}
    return _ZERO[typ]


def full_row(table: str, **fields: Any) -> dict[str, Any]:
    """FIELDS over a zero of every other column of TABLE; a field the table lacks is an error."""
    columns = dict(table_columns()[table])
    unknown = set(fields) - set(columns)
    if unknown:
        raise KeyError(f"{table} has no column {sorted(unknown)}")
    return {name: fields.get(name, _zero(typ)) for name, typ in columns.items()}


def typed_row(table: str, **fields: Any) -> Any:
    """`full_row` as the typed read returns it: TABLE's row type (membench/warehouse/rows.py), an Array a tuple."""
    return ROW_TYPES[table](**{k: tuple(v) if isinstance(v, list) else v for k, v in full_row(table, **fields).items()})
