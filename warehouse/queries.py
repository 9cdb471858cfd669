"""Reading the warehouse: run-set cells, completion state, raw events in log order."""

from __future__ import annotations

import json
from typing import Any

from warehouse.protocol import WarehouseReader


def run_results(warehouse: WarehouseReader, run_set: str) -> list[dict[str, Any]]:
    """One row per unit: the newest complete run of it (a unit is re-run only when its earlier
    attempt never completed, so there is at most one; LIMIT 1 BY guards retried inserts)."""
    return warehouse.query_dicts(
        "SELECT * FROM (SELECT * FROM run_results WHERE run_set = {rs:String} LIMIT 1 BY run_id) "
        "ORDER BY unit_id, source_seq DESC LIMIT 1 BY unit_id",
        {"rs": run_set},
    )


def session_results(warehouse: WarehouseReader, run_set: str) -> list[dict[str, Any]]:
    return warehouse.query_dicts(
        "SELECT * FROM session_results WHERE run_set = {rs:String} "
        "ORDER BY run_id, session_index LIMIT 1 BY run_id, session_index",
        {"rs": run_set},
    )


def completed_units(warehouse: WarehouseReader, run_set: str) -> set[str]:
    rows = warehouse.query_rows(
        "SELECT DISTINCT unit_id FROM run_results WHERE run_set = {rs:String} "
        "AND status IN ('completed', 'excluded')",
        {"rs": run_set},
    )
    return {r[0] for r in rows}


def attempts_started(warehouse: WarehouseReader, run_set: str) -> dict[str, int]:
    rows = warehouse.query_rows(
        "SELECT unit_id, uniqExact(run_id) FROM trajectory_events WHERE run_set = {rs:String} "
        "AND kind = 'RunStarted' GROUP BY unit_id",
        {"rs": run_set},
    )
    return {unit: int(n) for unit, n in rows}


def event_count(warehouse: WarehouseReader, run_set: str) -> int:
    rows = warehouse.query_rows(
        "SELECT uniqExact(event_id) FROM trajectory_events WHERE run_set = {rs:String}", {"rs": run_set})
    return int(rows[0][0])


def run_sets(warehouse: WarehouseReader) -> list[str]:
    return [r[0] for r in warehouse.query_rows("SELECT DISTINCT run_set FROM run_results ORDER BY run_set")]


def run_started(warehouse: WarehouseReader, run_set: str) -> list[dict[str, Any]]:
    return warehouse.query_dicts(
        "SELECT run_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'RunStarted' "
        "ORDER BY run_id LIMIT 1 BY run_id",
        {"rs": run_set},
    )


def run_constructs(warehouse: WarehouseReader, run_set: str) -> dict[str, str | None]:
    """run_id -> construct label, from each run's RunStarted event (`construct`, event schema v2; a
    log written before that field existed, or a pack without constructs, gives None)."""
    return {row["run_id"]: json.loads(row["payload"]).get("construct") for row in run_started(warehouse, run_set)}


def scored_clean_start(warehouse: WarehouseReader, run_set: str) -> dict[str, bool]:
    """run_id -> whether its scored session started from the clean base (SessionStarted `start_state`)."""
    clean: dict[str, bool] = {}
    for row in warehouse.query_dicts(
            "SELECT run_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'SessionStarted' "
            "ORDER BY run_id, seq LIMIT 1 BY event_id", {"rs": run_set}):
        payload = json.loads(row["payload"])
        if payload.get("scored"):
            clean[row["run_id"]] = payload.get("start_state") == "clean"
    return clean


def raw_datums(warehouse: WarehouseReader, run_set: str | None = None) -> list[tuple[str, bytes]]:
    """(schema fingerprint hex, Avro datum) of every raw event, deduplicated, in (run, seq) order."""
    where = "WHERE run_set = {rs:String}" if run_set else ""
    rows = warehouse.query_rows(
        f"SELECT schema_fingerprint, hex(datum) FROM trajectory_events {where} "
        "ORDER BY run_id, seq LIMIT 1 BY event_id",
        {"rs": run_set} if run_set else None,
    )
    return [(fp, bytes.fromhex(datum_hex)) for fp, datum_hex in rows]
