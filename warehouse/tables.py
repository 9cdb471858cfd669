"""DDL. `trajectory_events` is the append-only raw log; derived tables are generated from the
`derived` Avro family (one table per payload kind), so a new derived kind needs no DDL edit.

Every table deduplicates retried inserts by `insert_deduplication_token` (MergeTree with
`non_replicated_deduplication_window`); readers may also `LIMIT 1 BY` the table's key.

The view `scored_cells` (issue 25) is the report's cell: one row per unit of a run set — its
completed run, else its excluded run, else its longest other attempt, exactly as
`warehouse.queries.run_results` chooses it — with `valid` (completed and not excluded) and `passed`
(valid and the scored session resolved). A plain `SELECT condition, avg(passed) FROM
session_results GROUP BY condition` mixes run sets, counts warm-up and history sessions and every
retried attempt; `SELECT condition, sum(passed) / sum(valid) FROM scored_cells WHERE run_set = 'X'
GROUP BY condition` is the report's `pass_rate`.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.registry import default_registry

DEDUP_WINDOW = 100_000

TRAJECTORY_COLUMNS = [
    ("event_id", "String"),
    ("run_set", "LowCardinality(String)"),
    ("run_id", "String"),
    ("unit_id", "String"),
    ("session_index", "Int32"),
    ("seq", "UInt64"),
    ("ts", "DateTime64(6, 'UTC')"),
    ("producer", "LowCardinality(String)"),
    ("kind", "LowCardinality(String)"),
    ("visibility", "LowCardinality(String)"),
    ("prev_hash", "String"),
    ("hash", "String"),
    ("payload", "String"),  # the payload as JSON, for SQL (JSONExtract*)
    ("schema_fingerprint", "String"),  # hex CRC-64-AVRO of the writer schema
    ("datum", "String"),  # the exact Avro binary datum, for replay and audit
    # where the sink read it (distributed path; -1 on the embedded path): the sink's watermark
    ("kafka_topic", "LowCardinality(String)"),
    ("kafka_partition", "Int32"),
    ("kafka_offset", "Int64"),
]

# table name for each derived kind, and the columns that identify one row
DERIVED_TABLES = {
    "SessionVerdict": ("session_results", ("run_id", "session_index")),
    "RunSummary": ("run_results", ("run_id",)),
    "FailureClassified": ("failures", ("run_id", "session_index")),
    "MemoryContract": ("memory_contracts", ("run_id", "session_index")),
    "HygieneObservation": ("hygiene_observations", ("run_id", "session_index", "metric")),
}


def table_for_kind(kind: str) -> str:
    if kind in DERIVED_TABLES:
        return DERIVED_TABLES[kind][0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower() + "s"


def _clickhouse_type(avro_type: Any) -> str:
    if isinstance(avro_type, list):
        inner = [t for t in avro_type if t != "null"]
        base = _clickhouse_type(inner[0])
        return f"Nullable({base})" if "null" in avro_type and not base.startswith("Array") else base
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "array":
            return f"Array({_clickhouse_type(avro_type['items'])})"
        if avro_type.get("type") == "map":
            return f"Map(String, {_clickhouse_type(avro_type['values'])})"
        return _clickhouse_type(avro_type["type"])
    return {"string": "String", "long": "Int64", "int": "Int32", "boolean": "Bool", "double": "Float64"}[avro_type]


def derived_columns() -> dict[str, list[tuple[str, str]]]:
    """kind -> [(column, ClickHouse type)] from the newest `derived` schema."""
    schema = default_registry().latest("derived").schema_json
    payloads = next(f for f in schema["fields"] if f["name"] == "payload")["type"]
    out = {}
    for record in payloads:
        cols = [("derived_id", "String"), ("source_seq", "UInt64")]
        cols += [(f["name"], _clickhouse_type(f["type"])) for f in record["fields"]]
        out[record["name"]] = cols
    return out


SCORED_CELLS = (
    "CREATE VIEW IF NOT EXISTS scored_cells AS "
    "SELECT run_set, unit_id, run_id, suite, task, condition, seed, agent, status, excluded, exclusion_reason, "
    "status = 'completed' AND NOT excluded AS valid, valid AND scored_passed AS passed, source_seq "
    "FROM (SELECT * FROM run_results LIMIT 1 BY run_set, run_id) "
    # the unit's cell: the completed run, else the excluded one, else the newest other attempt
    "ORDER BY run_set, unit_id, status = 'completed' DESC, status IN ('completed', 'excluded') DESC, "
    "source_seq DESC LIMIT 1 BY run_set, unit_id"
)


def ensure_tables(warehouse: Any) -> None:
    cols = ", ".join(f"`{name}` {typ}" for name, typ in TRAJECTORY_COLUMNS)
    warehouse.command(
        f"CREATE TABLE IF NOT EXISTS trajectory_events ({cols}) ENGINE = MergeTree "
        f"ORDER BY (run_id, seq) SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}"
    )
    for kind, columns in derived_columns().items():
        names = {name for name, _ in columns}
        key = DERIVED_TABLES.get(kind, (None, ("run_id",)))[1]
        order = ", ".join(k for k in key if k in names)
        body = ", ".join(f"`{name}` {typ}" for name, typ in columns)
        warehouse.command(
            f"CREATE TABLE IF NOT EXISTS {table_for_kind(kind)} ({body}) ENGINE = MergeTree "
            f"ORDER BY ({order}) SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}"
        )
    warehouse.command(SCORED_CELLS)
