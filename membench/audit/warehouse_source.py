"""Replay's warehouse source: the raw table's rows, each decoded with the schema it was written with."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from membench.audit.findings import Finding, Logged
from membench.schemas.codec import DecodeError
from membench.schemas.events import Event
from membench.schemas.registry import default_registry


def events_from_warehouse(warehouse: Any, run_set: str | None, findings: list[Finding]) -> Iterator[Logged]:
    """Raw rows of the warehouse, each decoded with the writer schema its `schema_fingerprint` names
    (not resolved to the newest: the hash covers the writer's datum). Read `RUNS_PER_QUERY` runs at
    a time (`membench.warehouse.queries.raw_run_id_pages`, `raw_datums_of_runs`), so memory does not grow
    with the table."""
    from membench.schemas.codec import datum_decoder
    from membench.warehouse.queries import raw_datums_of_runs, raw_run_id_pages

    registry = default_registry()
    decoders: dict[str, Any] = {}
    for run_ids in raw_run_id_pages(warehouse, run_set, RUNS_PER_QUERY):
        for fingerprint_hex, datum in raw_datums_of_runs(warehouse, run_ids):
            writer = registry.by_fingerprint(bytes.fromhex(fingerprint_hex))
            if writer is None:
                findings.append(Finding("?", None, f"trajectory_events.schema_fingerprint {fingerprint_hex} names "
                                                   "no schema this membench ships"))
                continue
            decode = decoders.get(fingerprint_hex)
            if decode is None:
                decode = decoders[fingerprint_hex] = datum_decoder(writer)
            try:
                yield Event.from_record(decode(datum)), writer, datum
            except (DecodeError, Exception) as exc:
                findings.append(Finding("?", None, f"trajectory_events.datum does not decode with "
                                                   f"{writer.family}.v{writer.version}: {exc}"))


# runs whose raw rows one warehouse query reads (replay of `warehouse:`, rederive)
RUNS_PER_QUERY = 500
