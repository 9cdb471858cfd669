"""DDL. `trajectory_events` is the append-only raw log; derived tables are generated from the
`derived` Avro family (one table per payload kind), so a new derived kind needs no DDL edit.

Every table deduplicates retried inserts by `insert_deduplication_token` (MergeTree with
`non_replicated_deduplication_window`); readers may also `LIMIT 1 BY` the table's key.

The view `scored_cells` is the report's cell: one row per unit of a run set — its
completed run, else its excluded run, else its longest other attempt, exactly as
`membench.warehouse.queries.run_results` chooses it — with `valid` (completed and not excluded) and `passed`
(valid and the scored session resolved). A plain `SELECT condition, avg(passed) FROM
session_results GROUP BY condition` mixes run sets, counts warm-up and history sessions and every
retried attempt; `SELECT condition, sum(passed) / sum(valid) FROM scored_cells WHERE run_set = 'X'
GROUP BY condition` is the report's `pass_rate`.
"""

from __future__ import annotations

import re
from typing import Any

from membench.schemas.registry import default_registry

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
    "TransferCase": ("transfer_cases", ("run_id", "case_id")),
    "ModelUsage": ("model_usages", ("run_id", "purpose")),
    "TransferHardCap": ("transfer_hard_caps", ("run_id", "cap_id")),
    "SkillBank": ("skill_banks", ("run_id", "bank")),
    "RunEndReason": ("run_end_reasons", ("run_id",)),
    "MemoryUse": ("memory_uses", ("run_id",)),
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


# ----------------------------------------------------------------- the column reference (docs/tables.md)

TABLE_MEANINGS = {
    "trajectory_events": "the raw log: every event of every run, append-only (the source of truth; every other "
                         "table is rebuilt from it by `membench rederive`)",
    "session_results": "one row per session of a run (`SessionVerdict`): outcome and resources",
    "run_results": "one row per run (`RunSummary`): how it ended, the scored session's verdict, resources",
    "failures": "one row per task session (`FailureClassified`): the fixed `failure_reason` enum and the rule "
                "that chose it",
    "memory_contracts": "one row per task session (`MemoryContract`): what memory injected, the agent cited, "
                        "was relevant or stale (membench/processors/contract.py)",
    "hygiene_observations": "one row per hygiene metric of a task session (`HygieneObservation`), numerator and "
                            "denominator so rates aggregate as sum/sum",
    "transfer_results": "one row per transfer run (`TransferResult`): CCPF, scores, caps, resources "
                        "(docs/transfer.md)",
    "transfer_dimensions": "one row per dimension (A–E) of a transfer run (`TransferDimension`)",
    "transfer_cases": "one row per hidden-evaluator case of a transfer run (`TransferCase`): its outcome, "
                      "applicability and blockers",
    "model_usages": "one row per purpose of a run's model calls (`ModelUsage`): calls, tokens and USD, summed "
                    "from its `ModelCall` events at its end (membench/processors/model_usage.py)",
    "transfer_hard_caps": "one row per hard cap of a transfer run's evaluator plan (`TransferHardCap`), excluded "
                          "runs too",
    "skill_banks": "one row per skill bank a transfer study's learning run froze (`SkillBank`)",
    "run_end_reasons": "one row per run that said why it ended (`RunEndReason`): its first run-level system turn, "
                       "which the runner writes for an excluded or failed run",
    "memory_uses": "one row per run (`MemoryUse`): its MemoryRead events split into the harness's reads before "
                   "each session and the agent's memory tool calls, with the tokens each admitted "
                   "(membench/processors/memory_use.py)",
}

# meanings of columns shared by several tables (a table's own meaning below wins)
COMMON_MEANINGS = {
    "derived_id": "deterministic id of the derived row (identical on replay and on both bus paths); "
                  "`LIMIT 1 BY derived_id` drops retried inserts",
    "source_seq": "`seq` of the raw event the row was derived at",
    "run_set": "run set id (one `membench run` / `transfer` grid)",
    "run_id": "one attempt of a unit",
    "unit_id": "the grid cell: `<suite>/<task>/<condition>/<seed>`",
    "suite": "pack name (or transfer study name)",
    "task": "sequence (trap) id, or transfer project id",
    "condition": "memory condition (B0 … B7, DF family, no_memory, learned_bank, …)",
    "seed": "seed of the unit",
    "agent": "agent name (`scripted:refsol`, `codex`, `openai:MODEL`, …)",
    "session_index": "1-based session of the sequence",
    "scored": "true for the scored session (the last)",
    "excluded": "the run or session is excluded (not a pass, not a fail: isolation unavailable, a modified "
                "skill bank, …)",
    "exclusion_reason": "why it was excluded, else null",
    "input_tokens": "model input tokens", "cached_tokens": "cached input tokens",
    "output_tokens": "model output tokens", "reasoning_tokens": "reasoning tokens",
    "tool_calls": "tool calls", "patch_invocations": "tool calls that patched files",
    "memory_reads": "memory reads", "memory_tokens_admitted": "tokens the memory reads admitted",
    "compactions": "context compactions", "duration_ms": "wall clock (excluded from equality checks)",
    "resolved": "no failure reason assigned (and not excluded)",
    "passed": "passed (a session: its oracle passed; a run: its count of passed cases)",
}

OWN_MEANINGS = {
    "trajectory_events": {
        "event_id": "event id", "session_index": "1-based session, -1 for run-level events",
        "seq": "position in the run's hash chain", "ts": "event time (UTC, microseconds)",
        "producer": "who emitted it (runner, agent adapter, gateway, …)", "kind": "event kind (RunStarted, Turn, …)",
        "visibility": "`agent` (the agent could see it) or `harness`", "prev_hash": "hash of the previous event",
        "hash": "SHA-256 chain hash of this event", "payload": "the payload as JSON (use JSONExtract*)",
        "schema_fingerprint": "hex CRC-64-AVRO of the writer schema",
        "datum": "the exact Avro binary datum (replay and audit)",
        "kafka_topic": "topic the sink read it from ('' on the embedded path)",
        "kafka_partition": "partition (-1 on the embedded path)", "kafka_offset": "offset (-1 on the embedded path)",
    },
    "session_results": {"passed": "the session's oracle passed", "outcome": "oracle outcome (pass, fail, "
                        "oracle_timeout, harness_error, …)", "oracle_id": "the session's oracle"},
    "run_results": {"status": "completed / excluded / error / abandoned", "error_type": "what ended a run that did "
                    "not complete", "sessions": "sessions run", "scored_passed": "the scored session passed",
                    "events": "events in the run", "last_hash": "the chain's last hash"},
    "failures": {"failure_reason": "the fixed enum (null when resolved)", "rule": "the rule that fired",
                 "memory_failure": "the reason is memory-specific", "oracle_outcome": "the oracle's outcome"},
    "memory_contracts": {
        "memory_contract_status": "passed / failed / not_applicable",
        "runtime_contract_failure": "the contract failed", "runtime_contract_failure_reason":
        "cited_never_injected / stale_memory_used / memory_read_over_budget",
        "injected_memory_ids": "ids the session's memory reads admitted", "cited_memory_ids": "ids the agent cited",
        "relevant_memory_ids": "ids learned from evidence a `required` label names",
        "stale_memory_ids": "ids learned from evidence a `forbidden` or `stale` label names",
        "cited_injected_count": "|cited ∩ injected|", "cited_relevant_count": "|cited ∩ relevant|",
        "citation_precision": "|cited ∩ injected| / |cited| (0 when nothing cited)",
        "citation_recall": "|cited ∩ relevant| / |relevant| (1 when nothing relevant)",
        "stale_used_count": "|cited ∩ stale|", "irrelevant_injection_count": "|injected − relevant − stale|",
        "missing_relevant_count": "|relevant − injected|",
        "memory_helped": "resolved, recall > 0 and no stale memory used",
        "memory_hurt": "a memory-specific failure or a stale memory used"},
    "hygiene_observations": {"construct": "the trap's construct (C1–C10)", "family": "the trap's family",
                             "metric": "hygiene metric name", "label_id": "the label the observation is about",
                             "numerator": "count observed", "denominator": "opportunities"},
    "transfer_results": {
        "cases": "scheduled cases", "applicable": "CCPF denominator (not_applicable cases left out)",
        "passed": "passed cases", "failed": "failed cases", "errored": "errored or unreached cases",
        "blocked": "blocked cases (a prerequisite case did not pass)", "ccpf": "passed / applicable",
        "raw_score": "max_score × Σ_d W_d · score_d / Σ_d W_d", "weighted_score": "raw_score limited by the lowest "
        "fired hard cap", "caps_fired": "ids of the fired hard caps", "cap_reasons": "per fired cap, its failing "
        "cases and invariant", "all_cases_pass": "every applicable case passed",
        "public_check_passed": "the last public check passed", "submission_digest": "tree digest of the frozen "
        "submission", "skill_bank_digest": "SHA-256 of the mounted bank's MANIFEST.sha256",
        "agent_turns": "agent turns", "user_turns": "simulated-user turns", "lines_added": "lines the patch added",
        "agent_time_ms": "implementing time", "user_time_ms": "plan hand-off, review and feedback time",
        "evaluation_time_ms": "public check, freezing and testing time"},
    "transfer_dimensions": {"dimension": "A–E", "title": "the manifest's title (or name)", "weight": "the "
                            "dimension's weight", "cases": "applicable cases of the dimension",
                            "passed": "passed cases", "case_weight": "Σ weight of applicable cases",
                            "passed_weight": "Σ weight of passed cases", "score": "passed_weight / case_weight"},
    "transfer_cases": {"project": "the transfer project (the unit's task)", "case_id": "manifest case id (B-09)",
                       "dimension": "the case's dimension", "weight": "the case's weight",
                       "prerequisites": "checkpoints and earlier case ids it needs",
                       "status": "passed / failed / error / unreached / blocked / not_applicable",
                       "applicable": "in the CCPF denominator (every status but not_applicable)",
                       "blocked_by": "for a blocked case: its prerequisite cases that did not pass",
                       "position": "index in the manifest (evaluation order)",
                       "evidence_sha256": "digest of the case runner's evidence"},
    "model_usages": {"purpose": "the calls' purpose (agent, sleep, judge, embed, …)", "calls": "model calls",
                     "priced_calls": "calls naming their price-table entry (`price`)",
                     "latency_ms": "Σ latency of the calls", "cost_usd": "Σ `cost_usd` over every call",
                     "priced_cost_usd": "Σ `cost_usd` over the priced calls"},
    "transfer_hard_caps": {"cap_id": "the hard cap's id", "cap": "the score it limits to",
                           "cases": "the cases whose failure fires it (empty: it cannot fire)",
                           "invariant": "what it protects", "fired": "a case of it did not pass (never for an "
                           "excluded run)"},
    "skill_banks": {"bank": "the bank's name", "digest": "SHA-256 of its MANIFEST.sha256",
                    "files": "files in the bank", "ablated_skill": "the skill an ablated bank leaves out",
                    "distiller": "who wrote a learned bank (scripted / agent)"},
    "run_end_reasons": {"text": "the turn's text: the model's or adapter's own words, or a traceback"},
    "memory_uses": {"harness_reads": "reads the harness made before a session (query = its instruction) or "
                    "outside one", "harness_tokens_read": "tokens those reads admitted",
                    "agent_memory_calls": "every other MemoryRead: a memory tool the agent called in a session",
                    "agent_tokens_read": "tokens the agent's memory calls returned"},
}


def table_columns() -> dict[str, list[tuple[str, str]]]:
    """Every warehouse table (the raw log, then each derived table) -> [(column, ClickHouse type)]."""
    out = {"trajectory_events": list(TRAJECTORY_COLUMNS)}
    for kind, columns in derived_columns().items():
        out[table_for_kind(kind)] = columns
    return out


def column_reference() -> str:
    """docs/tables.md: every table's columns, types and meanings, generated from the DDL (a test keeps
    the file equal to this; a column without a meaning fails it)."""
    lines = ["# Warehouse tables", "",
             "Generated from the DDL (`membench/warehouse/tables.py`: `column_reference()`); "
             "`tests/warehouse/test_tables_doc.py` keeps this file equal to it. Query with "
             "`membench sql`; every derived table may hold a retried insert twice, so add "
             "`LIMIT 1 BY derived_id`. The view `scored_cells` is the report's cell (module doc of "
             "`membench/warehouse/tables.py`).", ""]
    for table, columns in table_columns().items():
        lines += [f"## `{table}`", "", TABLE_MEANINGS.get(table, "") + ".", "", "| column | type | meaning |",
                  "|---|---|---|"]
        own = OWN_MEANINGS.get(table, {})
        for name, typ in columns:
            meaning = own.get(name) or COMMON_MEANINGS.get(name)
            if not meaning:
                raise KeyError(f"column {table}.{name} has no meaning in membench/warehouse/tables.py")
            lines.append(f"| `{name}` | `{typ}` | {meaning} |")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------- staged replacement (membench rederive)


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_stage(warehouse: Any, table: str, stage: str) -> None:
    """An empty table STAGE shaped as TABLE, to stage rows in before they replace TABLE's."""
    warehouse.command(f"CREATE TABLE {stage} AS {table}")


def replace_run_set_rows(warehouse: Any, table: str, stage: str, run_set: str, token: str) -> None:
    """TABLE's rows of RUN_SET replaced by every row of STAGE: the delete waits for its mutation, and
    the copy is one insert (deduplicated by TOKEN, so a retried swap inserts once)."""
    warehouse.command(f"ALTER TABLE {table} DELETE WHERE run_set = {_literal(run_set)}",
                      settings={"mutations_sync": 2})
    warehouse.command(f"INSERT INTO {table} SELECT * FROM {stage}", settings={"insert_deduplication_token": token})


def drop_stage(warehouse: Any, stage: str) -> None:
    warehouse.command(f"DROP TABLE IF EXISTS {stage}")
