"""`InMemoryReadModel`: the read model (membench/warehouse/read_model.py) without an engine.

It is fed what the sink is fed — the raw events (`add_raw`, each kept as the row
`membench.warehouse.sink.decoded_row` builds from its bytes, so its payload JSON is the text the warehouse
holds) and the processors' derived events (`add_derived`, each kept as the row `insert_derived`
writes to its table, a retried one once by derived id) — and answers each read of `ReadModel` as
the SQL of the `membench.warehouse.queries` function of its name does. It mirrors queries.py: the
filters, the deduplication of each `LIMIT 1 BY`, each `ORDER BY` (booleans sorted as 0 and 1;
strings by code point, which is the byte order of their UTF-8 that ClickHouse compares),
`multiSearchAllPositions` (1-based byte positions in the UTF-8 payload, 0 when absent), what
`JSONExtractString` and `JSONExtractRaw` give for a missing key or a null, `uniqExact`, `argMax`,
the log root of `queries.log_root`, and the column types a ClickHouse read returns (a Float64 a
float, a Bool a bool, an `IN` a 0 or 1). When a change to queries.py changes what a read returns,
this module must change with it: tests/integration/test_read_model_parity.py builds the reports of
real run sets from both and compares them byte for byte, and every read one by one.

Rows that tie on a query's whole ORDER BY (which ClickHouse returns in no promised order) come here
in the order they were added. Each raw row is made from the event's bytes (`decoded_row`), as every
sink makes it: its payload names the optional fields a producer left at their default.

No engine is imported: a report test builds its input here without chDB.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event
from membench.schemas.log_root import log_root as root_of
from membench.warehouse import rows
from membench.warehouse.queries import typed_rows
from membench.warehouse.raw_rows import AgentVisibleHit, DiffField, RunStart, SessionStart, StoredBlobDiff
from membench.warehouse.sink import decoded_row, derived_table_rows
from membench.warehouse.tables import TRAJECTORY_COLUMNS, derived_columns, table_for_kind

_R = TypeVar("_R")
_RAW_NAMES = [name for name, _ in TRAJECTORY_COLUMNS]


def _stored(clickhouse_type: str, value: Any) -> Any:
    """VALUE as a column of CLICKHOUSE_TYPE holds it and a read returns it (a missing value: the type's default)."""
    if clickhouse_type.startswith("Nullable("):
        return None if value is None else _stored(clickhouse_type[len("Nullable("):-1], value)
    if clickhouse_type.startswith("Array("):
        inner = clickhouse_type[len("Array("):-1]
        return [_stored(inner, v) for v in (value or [])]
    if clickhouse_type.startswith("Map(String, "):
        inner = clickhouse_type[len("Map(String, "):-1]
        return {str(k): _stored(inner, v) for k, v in (value or {}).items()}
    if clickhouse_type == "String":
        return "" if value is None else str(value)
    if clickhouse_type == "Bool":
        return bool(value)
    if clickhouse_type == "Float64":
        return float(value or 0)
    return int(value or 0)  # Int32, Int64, UInt64


def _json_extract_string(payload: dict[str, Any], key: str) -> str:
    """`JSONExtractString(payload, key)`: a string as it is; a missing key or a null ''; any other
    value its JSON text (the payload's own text is compact, keys in order)."""
    value = payload.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _json_extract_raw_blank(payload: dict[str, Any], key: str) -> int:
    """`JSONExtractRaw(payload, key) IN ('', 'null')`: 1 for a missing key or a null, else 0."""
    return int(payload.get(key) is None)


def _positions(haystack: bytes, needles: list[bytes]) -> list[int]:
    """`multiSearchAllPositions`: each needle's first 1-based byte position, 0 when absent."""
    return [haystack.find(needle) + 1 for needle in needles]


def _first_by(items: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """`LIMIT 1 BY key`: the first item of each key, in the items' order."""
    seen: set[Any] = set()
    out = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


class InMemoryReadModel:
    """The read model over raw and derived events held in memory (module doc)."""

    def __init__(self) -> None:
        self._raw: list[dict[str, Any]] = []
        # table -> (run set, derived_id) -> row: the first insert of an id (a retried one is the same
        # row); every read filters by run set before its `LIMIT 1 BY derived_id`
        self._columns = derived_columns()
        self._derived: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            table_for_kind(kind): {} for kind in self._columns}
        self._types = {table_for_kind(kind): dict(columns) for kind, columns in self._columns.items()}

    # ------------------------------------------------------------------------------------ feeding

    def add_raw(self, event: Event, datum: bytes, fingerprint_hex: str, topic: str = "", partition: int = -1,
                offset: int = -1) -> None:
        """One raw event, as the sinks write its row: made from its bytes (`decoded_row`), so a payload
        EVENT holds without an optional field reads as the log's, with it."""
        self._raw.append(dict(zip(_RAW_NAMES, decoded_row(datum, fingerprint_hex, topic, partition, offset))))

    def add_derived(self, derived: Iterable[DerivedEvent]) -> None:
        """Derived events, each as `insert_derived` writes it to its table; a derived id already held
        is kept once (the readers' `LIMIT 1 BY derived_id`)."""
        for table, names, table_rows in derived_table_rows(derived, self._columns):
            types = self._types[table]
            held = self._derived[table]
            for values in table_rows:
                row = {name: _stored(types[name], value) for name, value in zip(names, values)}
                held.setdefault((row["run_set"], row["derived_id"]), row)

    def add(self, event: Event, datum: bytes, derived: Iterable[DerivedEvent], fingerprint_hex: str) -> None:
        """What the embedded pipeline's sink is given for one event: the event and what it derived."""
        self.add_raw(event, datum, fingerprint_hex)
        self.add_derived(derived)

    # ------------------------------------------------------------------------------ helpers

    def _raw_of(self, run_set: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self._raw if r["run_set"] == run_set and (kind is None or r["kind"] == kind)]

    def _table(self, table: str, run_set: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self._derived[table].values() if r["run_set"] == run_set]

    def _typed(self, row_type: type[_R], table: str, run_set: str, where: Callable[[dict[str, Any]], bool] | None = None,
               order: tuple[str, ...] = ("run_id", "derived_id")) -> list[_R]:
        """`queries._derived_rows`: the run set's rows (a derived id once, as held), WHERE, in ORDER."""
        found = [r for r in self._table(table, run_set) if where is None or where(r)]
        found.sort(key=lambda r: tuple(r[c] for c in order))
        return typed_rows(row_type, found)

    def _session_started(self, run_set: str) -> list[dict[str, Any]]:
        """SessionStarted rows ORDER BY run_id, seq LIMIT 1 BY event_id."""
        found = sorted(self._raw_of(run_set, "SessionStarted"), key=lambda r: (r["run_id"], r["seq"]))
        return _first_by(found, lambda r: r["event_id"])

    def _agent_visible(self, run_set: str) -> list[dict[str, Any]]:
        """queries._AGENT_VISIBLE: agent-visible rows ORDER BY event_id LIMIT 1 BY event_id."""
        found = sorted((r for r in self._raw_of(run_set) if r["visibility"] == "agent"), key=lambda r: r["event_id"])
        return _first_by(found, lambda r: r["event_id"])

    # ---------------------------------------------------------------------- the units' cells and runs

    def run_results(self, run_set: str) -> list[rows.RunSummaryRow]:
        per_run = _first_by(self._table("run_results", run_set), lambda r: r["run_id"])
        per_run.sort(key=lambda r: (r["unit_id"], -(r["status"] == "completed"),
                                    -(r["status"] in ("completed", "excluded")), -r["source_seq"]))
        return typed_rows(rows.RunSummaryRow, _first_by(per_run, lambda r: r["unit_id"]))

    def session_results(self, run_set: str) -> list[rows.SessionVerdictRow]:
        found = sorted(self._table("session_results", run_set), key=lambda r: (r["run_id"], r["session_index"]))
        return typed_rows(rows.SessionVerdictRow, _first_by(found, lambda r: (r["run_id"], r["session_index"])))

    def run_started(self, run_set: str) -> list[RunStart]:
        found = sorted(self._raw_of(run_set, "RunStarted"), key=lambda r: r["run_id"])
        return [RunStart(run_id=r["run_id"], payload=json.loads(r["payload"]))
                for r in _first_by(found, lambda r: r["run_id"])]

    def run_constructs(self, run_set: str) -> dict[str, str | None]:
        return {start.run_id: start.payload.get("construct") for start in self.run_started(run_set)}

    def scored_clean_start(self, run_set: str) -> dict[str, bool]:
        clean: dict[str, bool] = {}
        for row in self._session_started(run_set):
            payload = json.loads(row["payload"])
            if payload.get("scored"):
                clean[row["run_id"]] = payload.get("start_state") == "clean"
        return clean

    def session_starts(self, run_set: str) -> dict[str, list[SessionStart]]:
        out: dict[str, list[SessionStart]] = {}
        for row in self._session_started(run_set):
            p = json.loads(row["payload"])
            out.setdefault(row["run_id"], []).append(
                SessionStart(session_index=p["session_index"], start_state=p.get("start_state"),
                             scored=bool(p.get("scored"))))
        return out

    def event_count(self, run_set: str) -> int:
        return len({r["event_id"] for r in self._raw_of(run_set)})

    def log_root(self, run_set: str) -> str:
        """`queries.log_root`: each run's RunSummary `last_hash`, else the hash at its last raw seq."""
        heads: dict[str, tuple[int, str]] = {}
        for r in self._raw_of(run_set):
            best = heads.get(r["run_id"])
            if best is None or r["seq"] > best[0]:  # argMax(hash, seq)
                heads[r["run_id"]] = (r["seq"], r["hash"])
        last = {run_id: h for run_id, (_, h) in heads.items()}
        last.update({r["run_id"]: r["last_hash"]
                     for r in _first_by(self._table("run_results", run_set), lambda r: r["run_id"])})
        return root_of(last)

    def verdict_isolation(self, run_set: str) -> list[tuple[str, str, int]]:
        counts: dict[tuple[str, str], int] = {}
        for r in _first_by(self._raw_of(run_set, "OracleVerdict"), lambda r: r["event_id"]):
            how = _json_extract_string(json.loads(r["payload"]), "isolation") or "in_process"
            key = (r["unit_id"].split("/")[0], how)
            counts[key] = counts.get(key, 0) + 1
        return [(suite, how, n) for (suite, how), n in sorted(counts.items())]

    # ---------------------------------------------------------------------- the derived tables, typed

    def model_usage(self, run_set: str) -> list[rows.ModelUsageRow]:
        return self._typed(rows.ModelUsageRow, "model_usages", run_set, order=("run_id", "purpose", "derived_id"))

    def run_model_costs(self, run_set: str) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = {}
        for row in self.model_usage(run_set):
            priced, usd = out.get(row.run_id, (0, 0.0))
            out[row.run_id] = (priced + row.priced_calls, usd + row.cost_usd)
        return out

    def scored_failures(self, run_set: str) -> list[rows.FailureClassifiedRow]:
        return self._typed(rows.FailureClassifiedRow, "failures", run_set,
                           lambda r: r["scored"] and not r["resolved"] and not r["excluded"])

    def scored_contracts(self, run_set: str) -> list[rows.MemoryContractRow]:
        return self._typed(rows.MemoryContractRow, "memory_contracts", run_set, lambda r: r["scored"])

    def scored_hygiene(self, run_set: str) -> list[rows.HygieneObservationRow]:
        return self._typed(rows.HygieneObservationRow, "hygiene_observations", run_set, lambda r: r["scored"])

    def transfer_results(self, run_set: str) -> list[rows.TransferResultRow]:
        return self._typed(rows.TransferResultRow, "transfer_results", run_set)

    def has_transfer_results(self, run_set: str) -> bool:
        return bool(self._table("transfer_results", run_set))

    def transfer_dimensions(self, run_set: str) -> list[rows.TransferDimensionRow]:
        return self._typed(rows.TransferDimensionRow, "transfer_dimensions", run_set)

    def transfer_cases(self, run_set: str) -> list[rows.TransferCaseRow]:
        return self._typed(rows.TransferCaseRow, "transfer_cases", run_set, order=("run_id", "position", "derived_id"))

    def transfer_hard_caps(self, run_set: str) -> list[rows.TransferHardCapRow]:
        return self._typed(rows.TransferHardCapRow, "transfer_hard_caps", run_set,
                           order=("run_id", "cap_id", "derived_id"))

    def skill_banks(self, run_set: str) -> list[rows.SkillBankRow]:
        return self._typed(rows.SkillBankRow, "skill_banks", run_set, order=("run_id", "source_seq", "derived_id"))

    def run_end_reasons(self, run_set: str) -> list[rows.RunEndReasonRow]:
        return self._typed(rows.RunEndReasonRow, "run_end_reasons", run_set)

    def memory_uses(self, run_set: str) -> list[rows.MemoryUseRow]:
        return self._typed(rows.MemoryUseRow, "memory_uses", run_set)

    # ---------------------------------------------------------------------- the canary proof's search

    def agent_visible_totals(self, run_set: str) -> tuple[int, int]:
        visible = self._agent_visible(run_set)
        return len(visible), sum(len(r["payload"].encode("utf-8")) for r in visible)

    def agent_visible_hits(self, run_set: str, needles: list[str]) -> list[AgentVisibleHit]:
        wanted = [n.encode("utf-8") for n in needles]
        out = []
        for r in self._agent_visible(run_set):
            at = _positions(r["payload"].encode("utf-8"), wanted)
            if any(at):
                out.append(AgentVisibleHit(run_id=r["run_id"], seq=r["seq"], kind=r["kind"], unit_id=r["unit_id"],
                                           at=tuple(at)))
        out.sort(key=lambda hit: (hit.run_id, hit.seq))
        return out

    def diffs_stored_as_blobs(self, run_set: str, fields: tuple[str, ...]) -> list[StoredBlobDiff]:
        out = []
        for r in self._agent_visible(run_set):
            if r["kind"] != "PatchProduced":
                continue
            payload = json.loads(r["payload"])
            found = tuple(DiffField(name=f, sha256=_json_extract_string(payload, f"{f}_sha256"),
                                    as_blob=bool(_json_extract_raw_blank(payload, f))) for f in fields)
            if any(d.as_blob and d.sha256 != "" for d in found):
                out.append(StoredBlobDiff(run_id=r["run_id"], seq=r["seq"], unit_id=r["unit_id"], fields=found))
        out.sort(key=lambda diff: (diff.run_id, diff.seq))
        return out
