"""`membench rederive RUN_SET|--all [--jobs N]`: rebuild a run set's derived tables from its raw log
in the warehouse (`trajectory_events`), after a processor change.

Reads the raw rows a batch of runs at a time (`membench.warehouse.queries.raw_datums_of_runs`, in (run, seq)
order, deduplicated by event id), decodes each with the schema its fingerprint names, re-runs the
processors (`RunSetProcessor`, every fold) and replaces the run set's rows in every derived table
(`membench.warehouse.tables.derived_columns`: session_results, run_results, failures, memory_contracts,
hygiene_observations, transfer_results, transfer_dimensions, transfer_cases, transfer_hard_caps, skill_banks,
model_usages). With `jobs` > 1 the batches are
derived by that many worker processes (runs are independent); this process reads and writes.

What a crash mid-way can cost — build, then swap:

1. every new row goes first into staging tables of the same structure (`rederive_<nonce>_<table>`);
   the live tables are not touched, so a crash here loses nothing (the staging tables are left
   over; `DROP` them, or run rederive again, which uses new ones);
2. only once every batch is derived, each table's rows of the run set are deleted (a synchronous
   mutation) and the staged rows copied in by one `INSERT … SELECT`, table after table;
3. the staging tables are dropped.

The raw log is never written. A crash inside step 2 leaves a table with the run set's rows
missing, never wrong: `membench report` and `replay --verify` name the runs, and running rederive
again (which derives from the raw log only) completes it. An event that does not decode, or that a
processor rejects, stops the rederive before step 2 with nothing replaced.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.warehouse.protocol import WarehouseStore

# runs read and derived as one batch (at most; fewer so that every worker gets several batches)
BATCH_RUNS = 500


class RederiveError(RuntimeError):
    """The raw log of a run set cannot be re-derived as it is (nothing was replaced)."""


@dataclass
class RederiveResult:
    run_set: str
    runs: int = 0
    events: int = 0
    derived: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows written
    seconds: float = 0.0
    log_root_note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"run_set": self.run_set, "runs": self.runs, "events": self.events, "derived": self.derived,
                "rows": dict(sorted(self.rows.items())), "seconds": round(self.seconds, 3),
                "log_root": self.log_root_note}


def derive_batch(rows: list[tuple[str, bytes]]) -> tuple[int, list[Any], list[str]]:
    """(events, derived events, problems) of a batch of whole runs' raw rows ((fingerprint hex,
    datum), in (run, seq) order). Pure but for decoding; runs in a worker process with --jobs."""
    from membench.schemas.codec import datum_decoder
    from membench.processors import RunSetProcessor
    from membench.schemas.events import Event
    from membench.schemas.registry import default_registry

    registry = default_registry()
    processor = RunSetProcessor(ended_window=None)
    derived: list[Any] = []
    problems: list[str] = []
    decoders: dict[str, Any] = {}
    for fingerprint_hex, datum in rows:
        decode = decoders.get(fingerprint_hex)
        if decode is None:
            writer = registry.by_fingerprint(bytes.fromhex(fingerprint_hex))
            if writer is None:
                problems.append(f"trajectory_events.schema_fingerprint {fingerprint_hex} names no schema this "
                                "membench ships")
                continue
            decode = decoders[fingerprint_hex] = datum_decoder(writer)
        try:
            event = Event.from_record(decode(datum))
        except Exception as exc:  # fastavro raises many types on corrupt data
            problems.append(f"trajectory_events.datum does not decode with schema {fingerprint_hex}: {exc}")
            continue
        derived.extend(processor.apply(event))
    problems += [f"run {d.run_id} seq {d.seq}: processor rejected the event: {d.reason}"
                 for d in processor.dead_letters]
    return len(rows), derived, problems


class _Staging:
    """A warehouse whose inserts go to the staging table of each derived table."""

    def __init__(self, warehouse: WarehouseStore, names: dict[str, str]):
        self.warehouse, self.names = warehouse, names
        self.rows: dict[str, int] = {}

    def insert(self, table: str, rows: list[list[Any]], columns: list[str], dedup_token: str) -> None:
        self.warehouse.insert(self.names[table], rows, columns, dedup_token)
        self.rows[table] = self.rows.get(table, 0) + len(rows)


def derived_tables() -> list[str]:
    from membench.warehouse.tables import derived_columns, table_for_kind

    return sorted(table_for_kind(kind) for kind in derived_columns())


def rederive(warehouse: WarehouseStore, run_set: str, jobs: int = 1,
             progress: Callable[[RederiveResult, int], None] | None = None) -> RederiveResult:
    """Rebuilds `run_set`'s derived rows from its raw events (see the module docstring for what a
    crash costs); `progress(result, total runs)` after every batch."""
    from membench.warehouse.queries import raw_datums_of_runs, raw_run_count, raw_run_id_pages
    from membench.warehouse.sink import insert_derived
    from membench.warehouse.tables import create_stage, drop_stage, replace_run_set_rows

    started = time.perf_counter()
    result = RederiveResult(run_set)
    total = raw_run_count(warehouse, run_set)
    if not total:
        raise RederiveError(f"run set '{run_set}': trajectory_events holds no event of it")
    nonce = uuid.uuid4().hex[:12]
    staging = {table: f"rederive_{nonce}_{table}" for table in derived_tables()}
    for table, stage in staging.items():
        create_stage(warehouse, table, stage)
    try:
        sink = _Staging(warehouse, staging)
        per_batch = max(1, min(BATCH_RUNS, math.ceil(total / (4 * jobs))))
        batches = raw_run_id_pages(warehouse, run_set, per_batch)  # a page of ids at a time

        def take(runs: list[str], done: tuple[int, list[Any], list[str]]) -> None:
            events, derived, problems = done
            if problems:
                raise RederiveError(f"run set '{run_set}': {problems[0]}"
                                    + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
            # _Staging has the one method insert_derived calls (insert), not a whole WarehouseStore
            insert_derived(sink, derived, token_prefix=f"rederive:{nonce}")  # type: ignore[arg-type]
            result.runs += len(runs)
            result.events += events
            result.derived += len(derived)
            if progress is not None:
                progress(result, total)

        if jobs == 1:
            for runs in batches:
                take(runs, derive_batch(raw_datums_of_runs(warehouse, runs)))
        else:
            import multiprocessing

            # spawn: this process holds a chDB engine and its threads. At most 2 batches per worker in
            # flight, so memory is bounded by them, not by the run set
            with multiprocessing.get_context("spawn").Pool(jobs) as pool:
                pending: deque = deque()
                for runs in batches:
                    pending.append((runs, pool.apply_async(derive_batch, (raw_datums_of_runs(warehouse, runs),))))
                    while len(pending) >= 2 * jobs:
                        runs_done, job = pending.popleft()
                        take(runs_done, job.get())
                while pending:
                    runs_done, job = pending.popleft()
                    take(runs_done, job.get())
        # the swap: every batch derived and staged; now replace the run set's rows table by table
        for table, stage in staging.items():
            replace_run_set_rows(warehouse, table, stage, run_set, f"rederive:{nonce}:{table}")
        result.rows = {table: sink.rows.get(table, 0) for table in staging}
    finally:
        for stage in staging.values():
            drop_stage(warehouse, stage)
    result.seconds = time.perf_counter() - started
    return result


def refresh_log_root(warehouse: Any, run_set: str, path: Path, dsn: str) -> str | None:
    """After a rederive, the run set's log_root.json (when there is one for this warehouse) records
    the derived tables' new row digests. Written only when the raw log still is the one it records
    (same runs, last hashes, raw rows and root), so a rederive never launders an edited raw table;
    the signature (over the root, which a rederive does not change) is kept."""
    from membench.audit.log_root_record import LogRootError, describes, read_record, warehouse_state, write_record

    if not path.is_file():
        return None
    try:
        recorded = read_record(path)
    except LogRootError as exc:
        return f"{path}: not rewritten ({exc})"
    if not describes(recorded, dsn):
        return f"{path}: not rewritten (it describes warehouse {recorded.warehouse})"
    state = warehouse_state(warehouse, run_set)
    before = {run.run_id: run for run in recorded.runs}
    changed = sorted(run_id for run_id in set(before) | set(state.runs)
                     if run_id not in before or run_id not in state.runs
                     or before[run_id].last_hash != state.runs[run_id].last_hash
                     or before[run_id].rows_sha256.get("trajectory_events")
                     != state.runs[run_id].rows_sha256.get("trajectory_events"))
    if changed or state.root != recorded.log_root:
        return (f"{path}: not rewritten: the raw log in the warehouse is not the one it records "
                f"({len(changed)} runs differ{', first: run ' + changed[0] if changed else ''})")
    write_record(path, state.record(recorded.signature, dsn))
    return f"{path}: derived row digests recorded anew (log root unchanged" + \
        (", signature kept)" if recorded.signature is not None else ")")
