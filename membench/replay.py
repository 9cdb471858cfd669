"""Replay and audit (docs/design.md §9): read a run set's raw events from a log file, the warehouse's
raw table or a Kafka topic; verify every run's hash chain and seq continuity; re-run the
processors; diff the re-derived events against what the warehouse recorded.

Every problem is reported with the run and the seq it concerns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import reader as avro_reader

from processors import RunSetProcessor
from schemas.chain import ChainVerifier
from schemas.codec import DecodeError, decode_datum
from schemas.derived import WALL_CLOCK_FIELDS, DerivedEvent
from schemas.events import Event
from schemas.registry import default_registry


@dataclass(frozen=True)
class Finding:
    run_id: str
    seq: int | None
    reason: str

    def __str__(self) -> str:
        where = f"run {self.run_id}" + (f" seq {self.seq}" if self.seq is not None else "")
        return f"{where}: {self.reason}"


@dataclass
class ReplayResult:
    events: int = 0
    runs: int = 0
    derived: int = 0
    compared: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


def events_from_file(path: Path, findings: list[Finding]) -> Iterator[Event]:
    """Events of an Avro object container file. A block that no longer decodes is reported with
    the byte offset and the last good run/seq before it."""
    last = ("?", None)
    with open(path, "rb") as handle:
        records = avro_reader(handle)
        while True:
            try:
                record = next(records)
            except StopIteration:
                return
            except Exception as exc:  # corrupt block: report and stop, nothing after it is trusted
                findings.append(Finding(last[0], last[1], f"undecodable data near byte {handle.tell()} after this "
                                                          f"event ({type(exc).__name__}: {exc})"))
                return
            event = Event.from_record(record)
            last = (event.run_id, event.seq)
            yield event


def events_from_warehouse(warehouse: Any, run_set: str | None, findings: list[Finding]) -> Iterator[Event]:
    from warehouse.queries import raw_datums

    registry = default_registry()
    for fingerprint_hex, datum in raw_datums(warehouse, run_set):
        writer = registry.by_fingerprint(bytes.fromhex(fingerprint_hex))
        if writer is None:
            findings.append(Finding("?", None, f"unknown schema fingerprint {fingerprint_hex}"))
            continue
        try:
            yield Event.from_record(decode_datum(writer, datum, registry.latest("event")))
        except (DecodeError, Exception) as exc:
            findings.append(Finding("?", None, f"raw datum does not decode: {exc}"))


def _normalize(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    return value


def recorded_derived(warehouse: Any, run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """derived_id -> {kind, run_id, source_seq, payload} as the warehouse holds them."""
    from warehouse.tables import derived_columns, table_for_kind

    out: dict[str, dict[str, Any]] = {}
    if not run_ids:
        return out
    for kind, columns in derived_columns().items():
        rows = warehouse.query_dicts(
            f"SELECT * FROM {table_for_kind(kind)} WHERE run_id IN {{ids:Array(String)}} LIMIT 1 BY derived_id",
            {"ids": sorted(run_ids)},
        )
        for row in rows:
            payload = {name: row[name] for name, _ in columns[2:]}
            out[row["derived_id"]] = {"kind": kind, "run_id": row["run_id"], "source_seq": row["source_seq"],
                                      "payload": _normalize(payload)}
    return out


def replay(events: Iterator[Event], findings: list[Finding], warehouse: Any | None = None) -> ReplayResult:
    result = ReplayResult(findings=findings)
    schema = default_registry().latest("event")
    verifier = ChainVerifier(schema)
    processor = RunSetProcessor()
    derived: list[DerivedEvent] = []
    for event in events:
        result.events += 1
        broken = verifier.check(event)
        if broken:
            findings.append(Finding(broken.run_id, broken.seq, broken.reason))
        derived.extend(processor.apply(event))
    for dead in processor.dead_letters:
        findings.append(Finding(dead.run_id, dead.seq, f"processor rejected the event: {dead.reason}"))
    heads = verifier.heads()
    result.runs = len(heads)
    result.derived = len(derived)
    for run_id in processor.open_runs():
        seen, _ = heads[run_id]
        findings.append(Finding(run_id, seen - 1, "run has no RunEnded event (incomplete or truncated run)"))
    if warehouse is None:
        return result
    recorded = recorded_derived(warehouse, set(heads))
    for item in derived:
        want = recorded.pop(item.derived_id, None)
        result.compared += 1
        if want is None:
            findings.append(Finding(item.run_id, item.source_seq, f"{item.kind} derived on replay is missing "
                                                                  "from the warehouse"))
            continue
        got = {k: v for k, v in _normalize(item.payload).items() if k not in WALL_CLOCK_FIELDS}
        have = {k: v for k, v in want["payload"].items() if k not in WALL_CLOCK_FIELDS}
        if got != have:
            diff = sorted(k for k in set(got) | set(have) if got.get(k) != have.get(k))
            findings.append(Finding(item.run_id, item.source_seq,
                                    f"{item.kind} differs from the warehouse in {', '.join(diff)}"))
    for derived_id, want in recorded.items():
        findings.append(Finding(want["run_id"], want["source_seq"],
                                f"{want['kind']} in the warehouse was not re-derived from the log "
                                "(events missing from the log)"))
    return result
