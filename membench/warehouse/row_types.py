"""Writes `membench/warehouse/rows.py`: one frozen dataclass per derived table, from the DDL (`tables.py`).

Reports, exports and the viewer read derived rows through `membench.warehouse.queries`, which returns
these types instead of dicts, so a renamed or retyped column fails where it is read (a missing
keyword argument, a test against the DDL) instead of reading as a default. The module is
generated from `tables.derived_columns()` — which is generated from the newest `derived` Avro
schema — in the style of `membench/schemas/payload_types.py`; `tests/warehouse/test_rows.py` regenerates
it and compares.

    python -m membench.warehouse.row_types          # rewrite membench/warehouse/rows.py after adding a derived schema version
"""

from __future__ import annotations

import sys
from pathlib import Path

from membench.schemas.generated import write_generated
from membench.schemas.registry import default_registry
from membench.warehouse.tables import derived_columns, table_for_kind

TARGET = Path(__file__).with_name("rows.py")


def python_type(clickhouse: str) -> str:
    """The Python type a ClickHouse column of the DDL reads as (chDB's and the HTTP client's JSON)."""
    if clickhouse.startswith("Nullable("):
        return python_type(clickhouse[len("Nullable("):-1]) + " | None"
    if clickhouse.startswith("Array("):
        return f"tuple[{python_type(clickhouse[len('Array('):-1])}, ...]"
    if clickhouse.startswith("Map(String, "):
        return f"dict[str, {python_type(clickhouse[len('Map(String, '):-1])}]"
    return {"String": "str", "Int32": "int", "Int64": "int", "UInt64": "int", "Bool": "bool",
            "Float64": "float"}[clickhouse]


def class_name(kind: str) -> str:
    return kind + "Row"


def render() -> str:
    version = default_registry().latest("derived").version
    classes = []
    for kind, columns in derived_columns().items():
        fields = "\n".join(f"    {name}: {python_type(typ)}" for name, typ in columns)
        classes.append(f"@dataclass(frozen=True)\nclass {class_name(kind)}:\n"
                       f'    """A row of `{table_for_kind(kind)}` (`{kind}`)."""\n\n{fields}\n')
    tables = "".join(f"    {table_for_kind(kind)!r}: {class_name(kind)},\n" for kind in derived_columns())
    return (
        f'"""Derived-table rows as frozen dataclasses: GENERATED from the DDL of derived.v{version} by\n'
        '`python -m membench.warehouse.row_types` (see that module); do not edit by hand."""\n\n'
        "from dataclasses import dataclass\n\n"
        f"DERIVED_SCHEMA_VERSION = {version}\n\n\n"
        + "\n\n".join(classes)
        + "\n\n# the row type of each derived table\n"
        + "ROW_TYPES: dict[str, type] = {\n" + tables + "}\n"
    )


def main() -> int:
    return write_generated(TARGET, render())


if __name__ == "__main__":
    sys.exit(main())
