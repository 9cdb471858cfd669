"""Reading the warehouse: run-set cells, completion state, raw events in log order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypeVar

from membench.warehouse import rows
from membench.warehouse.protocol import WarehouseReader
from membench.warehouse.raw_rows import AgentVisibleHit, DiffField, RunStart, SessionStart, StoredBlobDiff


def run_results(warehouse: WarehouseReader, run_set: str) -> list[rows.RunSummaryRow]:
    """One row per unit: its completed run when it has one, else its excluded run — a unit is re-run
    only when its earlier attempts never completed (or were excluded because the model was
    unavailable, see `completed_units`), so there is at most one of each —, else the longest of its
    other attempts (an error, or an attempt abandoned by a crash: not a valid cell either way).
    LIMIT 1 BY guards retried inserts."""
    return typed_rows(rows.RunSummaryRow, warehouse.query_dicts(
        "SELECT * FROM (SELECT * FROM run_results WHERE run_set = {rs:String} LIMIT 1 BY run_id) "
        "ORDER BY unit_id, status = 'completed' DESC, status IN ('completed', 'excluded') DESC, source_seq DESC "
        "LIMIT 1 BY unit_id",
        {"rs": run_set},
    ))


def session_results(warehouse: WarehouseReader, run_set: str) -> list[rows.SessionVerdictRow]:
    """Every session's verdict row of the run set, by run and session index (a retried insert once)."""
    return typed_rows(rows.SessionVerdictRow, warehouse.query_dicts(
        "SELECT * FROM session_results WHERE run_set = {rs:String} "
        "ORDER BY run_id, session_index LIMIT 1 BY run_id, session_index",
        {"rs": run_set},
    ))


def completed_units(warehouse: WarehouseReader, run_set: str) -> set[str]:
    """Units a resumed run set skips: completed, or excluded for a reason that a retry would meet
    again (isolation, a replay miss). An upstream model that was unavailable, or misconfigured (the
    user fixes the key, URL or model name and runs again), is retried; so is a unit whose oracle
    harness faulted (the user fixes the installation and runs again)."""
    rows = warehouse.query_rows(
        "SELECT DISTINCT unit_id FROM run_results WHERE run_set = {rs:String} "
        "AND status IN ('completed', 'excluded') "
        "AND NOT (status = 'excluded' AND error_type IN ('model_unavailable', 'model_misconfigured', "
        "'harness_fault'))",
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


def run_started(warehouse: WarehouseReader, run_set: str) -> list[RunStart]:
    """Each run's RunStarted event (one a run), by run id, its payload decoded."""
    return [RunStart(run_id=row["run_id"], payload=json.loads(row["payload"])) for row in warehouse.query_dicts(
        "SELECT run_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'RunStarted' "
        "ORDER BY run_id LIMIT 1 BY run_id",
        {"rs": run_set},
    )]


def run_constructs(warehouse: WarehouseReader, run_set: str) -> dict[str, str | None]:
    """run_id -> construct label, from each run's RunStarted event (`construct`, event schema v2; a
    log written before that field existed, or a pack without constructs, gives None)."""
    return {start.run_id: start.payload.get("construct") for start in run_started(warehouse, run_set)}


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



# A run's raw events in the order its processors met them: a run lives in one Kafka partition, so
# its offsets are that order (a stalled runner's late events follow the close that fenced them,
# even at the same seq, docs/design.md §2); on the embedded path the offset is -1 and seq decides.
RAW_ORDER = "run_id, kafka_offset, seq"


def raw_datums(warehouse: WarehouseReader, run_set: str | None = None) -> list[tuple[str, bytes]]:
    """(schema fingerprint hex, Avro datum) of every raw event, deduplicated, in log order per run
    (`RAW_ORDER`)."""
    where = "WHERE run_set = {rs:String}" if run_set else ""
    rows = warehouse.query_rows(
        f"SELECT schema_fingerprint, hex(datum) FROM trajectory_events {where} "
        f"ORDER BY {RAW_ORDER} LIMIT 1 BY event_id",
        {"rs": run_set} if run_set else None,
    )
    return [(fp, bytes.fromhex(datum_hex)) for fp, datum_hex in rows]


def raw_run_id_pages(warehouse: WarehouseReader, run_set: str | None, size: int) -> Iterator[list[str]]:
    """Every run id of the raw table (of one run set, when given), sorted, a page of `size` at a
    time: each page is one query that starts after the last id of the page before (the table is
    ordered by run id), so a reader of a large raw table holds one page of ids, not all of them."""
    where = "run_set = {rs:String} AND " if run_set else ""
    after = ""
    while True:
        page = [r[0] for r in warehouse.query_rows(
            f"SELECT DISTINCT run_id FROM trajectory_events WHERE {where}run_id > {{after:String}} "
            f"ORDER BY run_id LIMIT {int(size)}", {"rs": run_set, "after": after} if run_set else {"after": after})]
        if not page:
            return
        yield page
        after = page[-1]


def raw_run_count(warehouse: WarehouseReader, run_set: str | None = None) -> int:
    """How many runs the raw table holds (of one run set, when given): a paged reader's total."""
    where = "WHERE run_set = {rs:String}" if run_set else ""
    return int(warehouse.query_rows(f"SELECT uniqExact(run_id) FROM trajectory_events {where}",
                                    {"rs": run_set} if run_set else None)[0][0])


def raw_run_sets(warehouse: WarehouseReader) -> list[str]:
    """Every run set the raw table holds (the source of truth; derived rows may be missing)."""
    return [r[0] for r in warehouse.query_rows("SELECT DISTINCT run_set FROM trajectory_events ORDER BY run_set")]


def raw_datums_of_runs(warehouse: WarehouseReader, run_ids: list[str]) -> list[tuple[str, bytes]]:
    """(schema fingerprint hex, Avro datum) of the given runs' raw events, deduplicated, in log order
    per run (`RAW_ORDER`): what replay and rederive read a batch of runs at a time."""
    if not run_ids:
        return []
    rows = warehouse.query_rows(
        "SELECT schema_fingerprint, hex(datum) FROM trajectory_events WHERE run_id IN {ids:Array(String)} "
        f"ORDER BY {RAW_ORDER} LIMIT 1 BY event_id", {"ids": sorted(run_ids)})
    return [(fp, bytes.fromhex(datum_hex)) for fp, datum_hex in rows]


# ------------------------------------------------------------------------ log root and audit digests


def run_results_by_status(warehouse: WarehouseReader, run_set: str) -> list[dict[str, Any]]:
    """Every run's RunSummary row (one per run), whatever its status, abandoned attempts included."""
    return warehouse.query_dicts(
        "SELECT run_id, unit_id, status, last_hash, source_seq FROM run_results WHERE run_set = {rs:String} "
        "ORDER BY run_id LIMIT 1 BY run_id", {"rs": run_set})


def raw_heads(warehouse: WarehouseReader, run_set: str) -> list[dict[str, Any]]:
    """Per run of the raw table: unit, distinct events, last seq and the hash of the event at it,
    whether a RunEnded is there, and the hashes of its RunEnded events (a fenced run holds two: the
    one that ended it, and a stalled runner's late one, docs/design.md §2)."""
    return warehouse.query_dicts(
        "SELECT run_id, any(unit_id) AS unit_id, uniqExact(seq) AS events, max(seq) AS last_seq, "
        "argMax(hash, seq) AS last_hash, countIf(kind = 'RunEnded') > 0 AS ended, "
        "groupUniqArrayIf(hash, kind = 'RunEnded') AS ended_hashes "
        "FROM trajectory_events WHERE run_set = {rs:String} GROUP BY run_id ORDER BY run_id", {"rs": run_set})


def log_root_heads(warehouse: WarehouseReader, run_set: str) -> dict[str, str]:
    """run_id -> the run's final chain hash, as docs/design.md §9's log root takes it: a run's
    `run_results.last_hash` (its RunEnded), else the hash of its last raw event (a run that never
    ended). Every run of the run set counts, abandoned attempts included."""
    heads = {row["run_id"]: row["last_hash"] for row in raw_heads(warehouse, run_set)}
    heads.update({row["run_id"]: row["last_hash"] for row in run_results_by_status(warehouse, run_set)})
    return heads


def log_root(warehouse: WarehouseReader, run_set: str) -> str:
    """The run set's log root (membench/schemas/log_root.py) recomputed from the warehouse."""
    from membench.schemas.log_root import log_root as root_of

    return root_of(log_root_heads(warehouse, run_set))


def events_per_run(warehouse: WarehouseReader, run_set: str) -> dict[str, int]:
    """run_id -> distinct seqs the raw table holds of it."""
    return {row["run_id"]: int(row["events"]) for row in raw_heads(warehouse, run_set)}


def stored_seqs(warehouse: WarehouseReader, run_ids: list[str]) -> dict[str, set[int]]:
    """run_id -> the seqs the raw table holds of each given run."""
    out: dict[str, set[int]] = {run_id: set() for run_id in run_ids}
    if run_ids:
        for run_id, seq in warehouse.query_rows(
                "SELECT DISTINCT run_id, seq FROM trajectory_events WHERE run_id IN {ids:Array(String)}",
                {"ids": sorted(run_ids)}):
            out[run_id].add(int(seq))
    return out


def derived_ids(warehouse: WarehouseReader, run_ids: list[str]) -> set[str]:
    """The derived ids every derived table holds for the given runs."""
    from membench.warehouse.tables import derived_columns, table_for_kind

    out: set[str] = set()
    if not run_ids:
        return out
    for kind in derived_columns():
        out |= {row[0] for row in warehouse.query_rows(
            f"SELECT DISTINCT derived_id FROM {table_for_kind(kind)} WHERE run_id IN {{ids:Array(String)}}",
            {"ids": sorted(run_ids)})}
    return out


# columns of the raw table that say where a row was read, not what it holds (a re-delivered event
# differs there only); they stay out of the rows digest
_WHERE_READ = ("kafka_topic", "kafka_partition", "kafka_offset")


def audited_tables() -> list[str]:
    """The tables a report reads: the raw log and every derived table."""
    from membench.warehouse.tables import derived_columns, table_for_kind

    return ["trajectory_events"] + sorted(table_for_kind(kind) for kind in derived_columns())


def row_digests(warehouse: WarehouseReader, run_set: str) -> dict[str, dict[str, str]]:
    """run_id -> table -> SHA-256 (lowercase hex) over the sorted distinct rows of that run in that
    table, each row in ClickHouse's text form of `tuple(*)` (raw rows without where they were read).
    An identical duplicate row (a retried insert) counts once; any edited, added or deleted row
    changes the digest. Computed by the engine, so it costs one scan per table."""
    out: dict[str, dict[str, str]] = {}
    for table in audited_tables():
        columns = f"* EXCEPT ({', '.join(_WHERE_READ)})" if table == "trajectory_events" else "*"
        for run_id, digest in warehouse.query_rows(
                f"SELECT run_id, lower(hex(SHA256(arrayStringConcat(arraySort(groupUniqArray("
                f"toString(tuple({columns})))), '\\n')))) FROM {table} WHERE run_set = {{rs:String}} "
                "GROUP BY run_id", {"rs": run_set}):
            out.setdefault(run_id, {})[table] = digest
    return out


def verdict_isolation(warehouse: WarehouseReader, run_set: str) -> list[tuple[str, str, int]]:
    """(suite, isolation, OracleVerdict events) of a run set; a verdict written before event schema
    v3 has no `isolation` and counts as `in_process` (its oracle shared the code's process)."""
    rows = warehouse.query_rows(
        "SELECT splitByChar('/', unit_id)[1] AS suite, "
        "if(JSONExtractString(payload, 'isolation') = '', 'in_process', JSONExtractString(payload, 'isolation')) AS how, "
        "count() FROM (SELECT unit_id, payload FROM trajectory_events WHERE run_set = {rs:String} "
        "AND kind = 'OracleVerdict' LIMIT 1 BY event_id) GROUP BY suite, how ORDER BY suite, how",
        {"rs": run_set})
    return [(suite, how, int(n)) for suite, how, n in rows]


def session_starts(warehouse: WarehouseReader, run_set: str) -> dict[str, list[SessionStart]]:
    """run_id -> its SessionStarted payloads in seq order (`session_index`, `start_state`, `scored`):
    what the continuation audit checks against the design."""
    out: dict[str, list[SessionStart]] = {}
    for row in warehouse.query_dicts(
            "SELECT run_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'SessionStarted' "
            "ORDER BY run_id, seq LIMIT 1 BY event_id", {"rs": run_set}):
        p = json.loads(row["payload"])
        out.setdefault(row["run_id"], []).append(
            SessionStart(session_index=p["session_index"], start_state=p.get("start_state"), scored=bool(p.get("scored"))))
    return out


# ------------------------------------------------------------------ typed reads of the derived tables
# Reports, exports and the viewer read derived rows here, as the frozen dataclasses of
# `membench/warehouse/rows.py` (generated from the DDL): a column the DDL no longer has fails the read
# (an unexpected keyword), instead of reading as a default.

_R = TypeVar("_R")


def typed_rows(row_type: type[_R], rows: list[dict[str, Any]]) -> list[_R]:
    """Each row as ROW_TYPE (an Array column a tuple): the SQL reads' rows, and the in-memory model's."""
    return [row_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}) for row in rows]


def _derived_rows(warehouse: WarehouseReader, row_type: type[_R], table: str, run_set: str, where: str = "",
                  order: str = "run_id, derived_id") -> list[_R]:
    """Every row of a derived table of one run set (a retried insert once), in ORDER: the rows come
    in whatever order the warehouse reads its parts, and a report must not."""
    return typed_rows(row_type, warehouse.query_dicts(
        f"SELECT * FROM {table} WHERE run_set = {{rs:String}} {where} ORDER BY {order} LIMIT 1 BY derived_id",
        {"rs": run_set}))


def model_usage(warehouse: WarehouseReader, run_set: str) -> list[rows.ModelUsageRow]:
    """Every run's model usage per purpose (membench/processors/model_usage.py), by run and purpose."""
    return _derived_rows(warehouse, rows.ModelUsageRow, "model_usages", run_set, order="run_id, purpose, derived_id")


def run_model_costs(warehouse: WarehouseReader, run_set: str) -> dict[str, tuple[int, float]]:
    """run_id -> (priced ModelCalls, USD over its ModelCalls' `cost_usd`): every upstream call the
    gateway recorded for the run, the agent's and its memory model's alike (`model_usages`). A call
    is priced when it names its price-table entry (`price`). Runs without a model call are absent."""
    out: dict[str, tuple[int, float]] = {}
    for row in model_usage(warehouse, run_set):
        priced, usd = out.get(row.run_id, (0, 0.0))
        out[row.run_id] = (priced + row.priced_calls, usd + row.cost_usd)
    return out


def scored_failures(warehouse: WarehouseReader, run_set: str) -> list[rows.FailureClassifiedRow]:
    """The failure rows of scored sessions that did not resolve and were not excluded."""
    return _derived_rows(warehouse, rows.FailureClassifiedRow, "failures", run_set,
                         "AND scored AND NOT resolved AND NOT excluded")


def scored_contracts(warehouse: WarehouseReader, run_set: str) -> list[rows.MemoryContractRow]:
    """The memory-contract rows of scored sessions (their cited ids are the MemoryCitation events')."""
    return _derived_rows(warehouse, rows.MemoryContractRow, "memory_contracts", run_set, "AND scored")


def scored_hygiene(warehouse: WarehouseReader, run_set: str) -> list[rows.HygieneObservationRow]:
    return _derived_rows(warehouse, rows.HygieneObservationRow, "hygiene_observations", run_set, "AND scored")


def transfer_results(warehouse: WarehouseReader, run_set: str) -> list[rows.TransferResultRow]:
    return _derived_rows(warehouse, rows.TransferResultRow, "transfer_results", run_set)


def has_transfer_results(warehouse: WarehouseReader, run_set: str) -> bool:
    """Whether the run set is a transfer study's (it holds a TransferResult)."""
    return bool(warehouse.query_rows(
        "SELECT 1 FROM transfer_results WHERE run_set = {rs:String} LIMIT 1", {"rs": run_set}))


def transfer_dimensions(warehouse: WarehouseReader, run_set: str) -> list[rows.TransferDimensionRow]:
    return _derived_rows(warehouse, rows.TransferDimensionRow, "transfer_dimensions", run_set)


def transfer_cases(warehouse: WarehouseReader, run_set: str) -> list[rows.TransferCaseRow]:
    """Every scheduled evaluator case of the run set's transfer runs, in manifest order per run."""
    return _derived_rows(warehouse, rows.TransferCaseRow, "transfer_cases", run_set,
                         order="run_id, position, derived_id")


def transfer_hard_caps(warehouse: WarehouseReader, run_set: str) -> list[rows.TransferHardCapRow]:
    return _derived_rows(warehouse, rows.TransferHardCapRow, "transfer_hard_caps", run_set,
                         order="run_id, cap_id, derived_id")


def skill_banks(warehouse: WarehouseReader, run_set: str) -> list[rows.SkillBankRow]:
    """The skill banks the run set's learning runs froze, in log order per run."""
    return _derived_rows(warehouse, rows.SkillBankRow, "skill_banks", run_set, order="run_id, source_seq, derived_id")


def run_end_reasons(warehouse: WarehouseReader, run_set: str) -> list[rows.RunEndReasonRow]:
    """Why each run that said so ended as it did (its first run-level system Turn), by run."""
    return _derived_rows(warehouse, rows.RunEndReasonRow, "run_end_reasons", run_set)


def memory_uses(warehouse: WarehouseReader, run_set: str) -> list[rows.MemoryUseRow]:
    """Each run's memory use (membench/processors/memory_use.py): the harness's reads and the agent's memory calls."""
    return _derived_rows(warehouse, rows.MemoryUseRow, "memory_uses", run_set)


# ------------------------------------------------------------------ the canary proof's raw-log search
# The proof searches what the agent could see, so it reads raw events by design (membench/reports/canary.py).

_AGENT_VISIBLE = ("FROM (SELECT run_id, seq, kind, unit_id, payload FROM trajectory_events WHERE run_set = {rs:String} "
                  "AND visibility = 'agent' ORDER BY event_id LIMIT 1 BY event_id)")


def agent_visible_totals(warehouse: WarehouseReader, run_set: str) -> tuple[int, int]:
    """(events, payload bytes) of the run set's agent-visible raw events, each event once."""
    (totals,) = warehouse.query_dicts(f"SELECT count() AS events, sum(length(payload)) AS bytes {_AGENT_VISIBLE}",
                                      {"rs": run_set})
    return int(totals["events"]), int(totals["bytes"] or 0)


def agent_visible_hits(warehouse: WarehouseReader, run_set: str, needles: list[str]) -> list[AgentVisibleHit]:
    """The agent-visible events whose payload holds any of NEEDLES (at most 255): run_id, seq, kind,
    unit_id and `at`, each needle's position (0: absent), by run and seq."""
    return [AgentVisibleHit(run_id=row["run_id"], seq=int(row["seq"]), kind=row["kind"], unit_id=row["unit_id"],
                            at=tuple(int(p) for p in row["at"]))
            for row in warehouse.query_dicts(
                f"SELECT run_id, seq, kind, unit_id, multiSearchAllPositions(payload, {{needles:Array(String)}}) AS at "
                f"{_AGENT_VISIBLE} WHERE arrayExists(x -> x > 0, at) ORDER BY run_id, seq",
                {"rs": run_set, "needles": needles})]


def diffs_stored_as_blobs(warehouse: WarehouseReader, run_set: str, fields: tuple[str, ...]) -> list[StoredBlobDiff]:
    """The agent-visible PatchProduced events that keep one of the diff FIELDS as a blob: run_id, seq,
    unit_id, and per field (in FIELDS' order) its blob's digest and whether the text is not inline."""
    columns = ", ".join(f"JSONExtractString(payload, '{f}_sha256') AS {f}_sha, "
                        f"JSONExtractRaw(payload, '{f}') IN ('', 'null') AS {f}_blob" for f in fields)
    return [StoredBlobDiff(run_id=row["run_id"], seq=int(row["seq"]), unit_id=row["unit_id"],
                           fields=tuple(DiffField(name=f, sha256=row[f"{f}_sha"], as_blob=bool(row[f"{f}_blob"]))
                                        for f in fields))
            for row in warehouse.query_dicts(
                f"SELECT run_id, seq, unit_id, {columns} {_AGENT_VISIBLE} WHERE kind = 'PatchProduced' AND ("
                + " OR ".join(f"({f}_blob AND {f}_sha != '')" for f in fields) + ") ORDER BY run_id, seq",
                {"rs": run_set})]


# ------------------------------------------------------------------ the exports' reads
# An export carries a run's events themselves (spans, an eval log's messages), so it reads raw
# events by design; the derived rows it attaches come whole.


def raw_run_ids(warehouse: WarehouseReader, run_set: str) -> list[str]:
    """Every run id of the run set's raw events, sorted."""
    return [r[0] for r in warehouse.query_rows(
        "SELECT DISTINCT run_id FROM trajectory_events WHERE run_set = {rs:String} ORDER BY run_id", {"rs": run_set})]


def raw_events_of_run(warehouse: WarehouseReader, run_id: str) -> list[tuple]:
    """A run's raw events in seq order, once each: (run_id, unit_id, session_index, seq, ts in µs,
    kind, visibility, payload JSON)."""
    return warehouse.query_rows(
        "SELECT run_id, unit_id, session_index, seq, toUnixTimestamp64Micro(ts), kind, toString(visibility), payload "
        "FROM trajectory_events WHERE run_id = {rid:String} ORDER BY seq LIMIT 1 BY seq", {"rid": run_id})


def raw_events_of_runs(warehouse: WarehouseReader, run_set: str, run_ids: list[str]) -> list[dict[str, Any]]:
    """The given runs' raw events by run and seq, once each: run_id, seq, ts_us, session_index, kind,
    visibility, event_id, payload (JSON)."""
    return warehouse.query_dicts(
        "SELECT run_id, seq, toUnixTimestamp64Micro(ts) AS ts_us, session_index, kind, visibility, event_id, "
        "payload FROM trajectory_events WHERE run_set = {rs:String} AND run_id IN {ids:Array(String)} "
        "ORDER BY run_id, seq LIMIT 1 BY event_id", {"rs": run_set, "ids": run_ids})


def derived_table(warehouse: WarehouseReader, table: str, run_set: str, key: str) -> list[dict[str, Any]]:
    """Every row of a derived TABLE of the run set, by run and source seq, once per KEY (columns)."""
    if table not in _derived_table_names():
        raise ValueError(f"not a derived table: {table}")
    return warehouse.query_dicts(
        f"SELECT * FROM {table} WHERE run_set = {{rs:String}} ORDER BY run_id, source_seq LIMIT 1 BY {key}",
        {"rs": run_set})


def derived_rows_of_runs(warehouse: WarehouseReader, table: str, run_ids: list[str], order: str
                         ) -> list[dict[str, Any]]:
    """The given runs' rows of a derived TABLE in ORDER (columns), a retried insert once."""
    if table not in _derived_table_names():
        raise ValueError(f"not a derived table: {table}")
    if not run_ids:
        return []
    return warehouse.query_dicts(
        f"SELECT * FROM {table} WHERE run_id IN {{ids:Array(String)}} ORDER BY {order} LIMIT 1 BY derived_id",
        {"ids": run_ids})


def _derived_table_names() -> set[str]:
    from membench.warehouse.tables import derived_columns, table_for_kind

    return {table_for_kind(kind) for kind in derived_columns()}


def unit_starts(warehouse: WarehouseReader, run_set: str) -> list[dict[str, Any]]:
    """Every RunStarted of the run set (unit_id, payload JSON), by unit and run."""
    return warehouse.query_dicts(
        "SELECT unit_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'RunStarted' "
        "ORDER BY unit_id, run_id LIMIT 1 BY event_id", {"rs": run_set})


def scored_patch_counts(warehouse: WarehouseReader, run_set: str) -> dict[str, tuple[int, int]]:
    """run_id -> (files the scored diff lists, failed `apply_patch` calls of the scored session), for
    runs whose scored session produced a patch."""
    rows = warehouse.query_rows(
        "WITH scored AS (SELECT DISTINCT run_id, session_index FROM trajectory_events "
        "WHERE run_set = {rs:String} AND kind = 'SessionStarted' AND JSONExtractBool(payload, 'scored')) "
        "SELECT run_id, "
        "sumIf(length(JSONExtractArrayRaw(payload, 'files')), kind = 'PatchProduced') AS files, "
        "countIf(kind = 'ToolResult' AND JSONExtractString(payload, 'name') = 'apply_patch' "
        "AND JSONExtractInt(payload, 'exit_code') != 0) AS failed, countIf(kind = 'PatchProduced') AS scored "
        "FROM (SELECT run_id, session_index, kind, payload FROM trajectory_events WHERE run_set = {rs:String} "
        "AND kind IN ('PatchProduced', 'ToolResult') LIMIT 1 BY event_id) "
        "WHERE (run_id, session_index) IN (SELECT run_id, session_index FROM scored) "
        "GROUP BY run_id HAVING scored > 0",
        {"rs": run_set})
    return {run_id: (int(files), int(failed)) for run_id, files, failed, _ in rows}


def raw_rows(warehouse: WarehouseReader) -> int:
    """Rows of the raw table, every run set, duplicates included: what a benchmark inserted."""
    return int(warehouse.query_rows("SELECT count() FROM trajectory_events")[0][0])


def frozen_bank_events(warehouse: WarehouseReader, run_set: str) -> list[tuple[int, dict[str, Any]]]:
    """(seed, SkillBankFrozen payload) of each completed learning run of the run set, by run and seq.
    Read from the raw events (not `skill_banks`): a study resumed from a warehouse an older membench
    wrote finds its banks before any rederive."""
    rows = warehouse.query_dicts(
        "SELECT r.seed AS seed, e.payload AS payload FROM "
        "(SELECT run_id, payload, seq FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'SkillBankFrozen' "
        " LIMIT 1 BY event_id) AS e "
        "JOIN (SELECT run_id, seed FROM run_results WHERE run_set = {rs:String} AND status = 'completed' "
        " LIMIT 1 BY run_id) AS r ON e.run_id = r.run_id ORDER BY e.run_id, e.seq", {"rs": run_set})
    return [(int(r["seed"]), json.loads(r["payload"])) for r in rows]


# ------------------------------------------------------------------ the table export's and benchmarks' reads

# binary output formats, when the engine cannot say (a server older than system.formats.is_tty_friendly)
_BINARY_PREFIXES = ("Arrow", "Avro", "BSON", "Buffers", "CapnProto", "MsgPack", "Native", "Npy", "ORC", "Parquet",
                    "PNG", "Protobuf", "RowBinary")


def output_formats(warehouse: WarehouseReader) -> dict[str, bool]:
    """The engine's output format names -> whether each displays fine in a terminal (False: binary)."""
    try:
        found = warehouse.query_rows("SELECT name, is_tty_friendly FROM system.formats WHERE is_output")
        return {name: bool(tty) for name, tty in found}
    except Exception:  # noqa: BLE001 - an older server: no is_tty_friendly column
        found = warehouse.query_rows("SELECT name FROM system.formats WHERE is_output")
        return {name: not name.startswith(_BINARY_PREFIXES) for (name,) in found}


def has_raw_events(warehouse: WarehouseReader, run_set: str) -> bool:
    return bool(warehouse.query_rows(
        "SELECT 1 FROM trajectory_events WHERE run_set = {rs:String} LIMIT 1", {"rs": run_set}))


def distinct_rows(warehouse: WarehouseReader, table: str, ident: str, run_set: str) -> int:
    """Rows of TABLE (one of `audited_tables()`) of the run set, each IDENT once."""
    if table not in audited_tables():
        raise ValueError(f"unknown table '{table}' (known: {', '.join(audited_tables())})")
    return int(warehouse.query_rows(
        f"SELECT uniqExact({ident}) FROM {table} WHERE run_set = {{rs:String}}", {"rs": run_set})[0][0])


def raw_table_bytes(warehouse: WarehouseReader, fmt: str) -> bytes:
    """Every row of the raw table, every run set, duplicates included, in output format FMT."""
    return warehouse.query_raw("SELECT * FROM trajectory_events", fmt)


def raw_columns(warehouse: WarehouseReader) -> list[str]:
    """The raw table's column names in table order (what an insert of `raw_table_bytes` names)."""
    return [row[0] for row in warehouse.query_rows(
        "SELECT name FROM system.columns WHERE table = 'trajectory_events' AND database = currentDatabase() "
        "ORDER BY position")]


# ------------------------------------------------------------------ the notebook frames' statements
# membench.frames runs these through the engine's Parquet output (so its column types are the
# engine's): they are statements, (SQL, parameters), not reads.


def _run_set_where(run_set: str | None, extra: str = "") -> tuple[str, dict[str, Any]]:
    clauses = (["run_set = {rs:String}"] if run_set is not None else []) + ([extra] if extra else [])
    return (f"WHERE {' AND '.join(clauses)} " if clauses else ""), ({"rs": run_set} if run_set is not None else {})


def table_statement(name: str, run_set: str | None, ident: str, order: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """Rows of table NAME (one of `audited_tables()`) of the run set (None: every one), once per IDENT, in ORDER."""
    if name not in audited_tables():
        raise ValueError(f"unknown table '{name}' (known: {', '.join(audited_tables())})")
    where, params = _run_set_where(run_set)
    return f"SELECT * FROM {name} {where}ORDER BY run_set, {', '.join(order)}, {ident} LIMIT 1 BY {ident}", params


def runs_statement(run_set: str | None, all_attempts: bool) -> tuple[str, dict[str, Any]]:
    """run_results: one row per unit as `run_results` picks it, or (ALL_ATTEMPTS) every run."""
    where, params = _run_set_where(run_set)
    if all_attempts:
        return f"SELECT * FROM run_results {where}ORDER BY run_set, unit_id, run_id LIMIT 1 BY run_id", params
    return (f"SELECT * FROM (SELECT * FROM run_results {where}LIMIT 1 BY run_id) "
            "ORDER BY run_set, unit_id, status = 'completed' DESC, status IN ('completed', 'excluded') DESC, "
            "source_seq DESC LIMIT 1 BY run_set, unit_id", params)


def events_statement(run_set: str | None, kinds: list[str] | None, datum: bool) -> tuple[str, dict[str, Any]]:
    """The raw events (of KINDS only, when given) in (run, seq) order, once each; the Avro datum only with DATUM."""
    where, params = _run_set_where(run_set, "kind IN {kinds:Array(String)}" if kinds is not None else "")
    if kinds is not None:
        params["kinds"] = kinds
    columns = "*" if datum else "* EXCEPT (datum)"
    return (f"SELECT {columns} FROM trajectory_events {where}ORDER BY run_set, run_id, seq, event_id "
            "LIMIT 1 BY event_id", params)
