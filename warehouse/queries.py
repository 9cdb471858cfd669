"""Reading the warehouse: run-set cells, completion state, raw events in log order."""

from __future__ import annotations

from typing import Any


def run_results(warehouse: Any, run_set: str) -> list[dict[str, Any]]:
    """One row per unit: the newest complete run of it (a unit is re-run only when its earlier
    attempt never completed, so there is at most one; LIMIT 1 BY guards retried inserts)."""
    return warehouse.query_dicts(
        "SELECT * FROM (SELECT * FROM run_results WHERE run_set = {rs:String} LIMIT 1 BY run_id) "
        "ORDER BY unit_id, source_seq DESC LIMIT 1 BY unit_id",
        {"rs": run_set},
    )


def session_results(warehouse: Any, run_set: str) -> list[dict[str, Any]]:
    return warehouse.query_dicts(
        "SELECT * FROM session_results WHERE run_set = {rs:String} "
        "ORDER BY run_id, session_index LIMIT 1 BY run_id, session_index",
        {"rs": run_set},
    )


def completed_units(warehouse: Any, run_set: str) -> set[str]:
    rows = warehouse.query_rows(
        "SELECT DISTINCT unit_id FROM run_results WHERE run_set = {rs:String} "
        "AND status IN ('completed', 'excluded')",
        {"rs": run_set},
    )
    return {r[0] for r in rows}


def attempts_started(warehouse: Any, run_set: str) -> dict[str, int]:
    rows = warehouse.query_rows(
        "SELECT unit_id, uniqExact(run_id) FROM trajectory_events WHERE run_set = {rs:String} "
        "AND kind = 'RunStarted' GROUP BY unit_id",
        {"rs": run_set},
    )
    return {unit: int(n) for unit, n in rows}


def event_count(warehouse: Any, run_set: str) -> int:
    rows = warehouse.query_rows(
        "SELECT uniqExact(event_id) FROM trajectory_events WHERE run_set = {rs:String}", {"rs": run_set})
    return int(rows[0][0])


def run_sets(warehouse: Any) -> list[str]:
    return [r[0] for r in warehouse.query_rows("SELECT DISTINCT run_set FROM run_results ORDER BY run_set")]


def run_started(warehouse: Any, run_set: str) -> list[dict[str, Any]]:
    return warehouse.query_dicts(
        "SELECT run_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'RunStarted' "
        "ORDER BY run_id LIMIT 1 BY run_id",
        {"rs": run_set},
    )


def raw_datums(warehouse: Any, run_set: str | None = None) -> list[tuple[str, bytes]]:
    """(schema fingerprint hex, Avro datum) of every raw event, deduplicated, in (run, seq) order."""
    where = "WHERE run_set = {rs:String}" if run_set else ""
    rows = warehouse.query_rows(
        f"SELECT schema_fingerprint, hex(datum) FROM trajectory_events {where} "
        "ORDER BY run_id, seq LIMIT 1 BY event_id",
        {"rs": run_set} if run_set else None,
    )
    return [(fp, bytes.fromhex(datum_hex)) for fp, datum_hex in rows]
