"""The embedded pipeline: file bus + in-process processors + batched warehouse sink.

One lock orders the three, so the log, the derived events and the warehouse see each run's
events in seq order even with many units running concurrently. The warehouse is written in
batches (at a run's end once a second has passed, or every 5000 events), and the log is made
durable (fsync) before each batch: a crash never leaves warehouse rows that the log lacks.

The converse can happen: a crash between the log's fsync and the warehouse insert, or a log block
written when it filled up mid-run, leaves events in the log the warehouse lacks; a crash between a
batch's raw insert and its derived inserts leaves a run's raw rows without its derived ones; and a
killed run has no RunEnded. `recover` runs before a run set resumes: it brings the warehouse up to
the log (missing raw rows, and the derived events of open runs, of runs whose raw rows lag and of
ended runs without a summary row) and closes every abandoned attempt with a
`RunEnded{abandoned}` (membench/bus/attempts.py), so attempt numbers, resumption and replay all see
the same runs.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.processors import RunSetProcessor
from membench.bus.attempts import close_abandoned, run_events, scan_log
from membench.bus.file import FileBus
from membench.schemas.events import Event
from membench.schemas.registry import default_registry
from membench.warehouse import queries
from membench.warehouse.sink import RunBatchSink, insert_derived, insert_raw, trajectory_row


@dataclass
class Recovery:
    """What `EmbeddedPipeline.recover` did before a run set resumed."""

    raw_rows: int = 0  # raw events copied from the log into the warehouse
    derived_rows: int = 0  # derived events of those runs the warehouse lacked
    closed: list[Event] = field(default_factory=list)  # RunEnded{abandoned} events appended


class EmbeddedPipeline:
    def __init__(self, log_path: Path, warehouse):
        self.log_path = Path(log_path)
        self.warehouse = warehouse
        self.bus = FileBus(log_path)
        self.processor = RunSetProcessor()
        self.sink = RunBatchSink(warehouse, default_registry().latest("event").fingerprint_hex,
                                 before_write=self.bus.flush)
        self._lock = threading.Lock()
        self.events = 0
        self.fenced = False  # a stopped run: events of units still winding down are dropped (fence)
        self.dropped = 0

    def publish(self, event: Event, datum: bytes) -> None:
        with self._lock:
            if self.fenced:
                self.dropped += 1
                return
            self._publish(event, datum)

    def fence(self) -> None:
        """No event is appended after this (a stopped run's units may still be winding down): the
        log ends with what was complete, and `close_open` then ends each unfinished attempt."""
        with self._lock:
            self.fenced = True

    def close_open(self, run_set: str) -> list[Event]:
        """Append `RunEnded{abandoned}` to every run of `run_set` the log holds without a RunEnded
        (the attempts a stop cut short), through the processors and the warehouse."""
        with self._lock:
            self.bus.flush()
        return close_abandoned(self.log_path, run_set, self._publish_locked)

    def _publish_locked(self, event: Event, datum: bytes) -> None:
        with self._lock:
            self._publish(event, datum)

    def _publish(self, event: Event, datum: bytes) -> None:  # the caller holds the lock
        self.bus.publish(event, datum)
        derived = self.processor.apply(event)
        self.sink.add(event, datum, derived)
        self.events += 1

    def close(self) -> None:
        with self._lock:
            self.sink.flush()  # flushes the log first
            self.bus.close()

    def recover(self, run_set: str) -> Recovery:
        """Before `run_set` resumes: copy into the warehouse every raw event of the log it lacks,
        and the derived events it lacks of those runs and of every ended run without a summary row;
        fold every open run into this pipeline's processor, then close those runs as abandoned
        through `publish`. Call before any publish."""
        self.bus.flush()
        scan = scan_log(self.log_path, run_set)
        stored = queries.events_per_run(self.warehouse, run_set)
        behind = sorted(run_id for run_id, head in scan.runs.items() if stored.get(run_id, 0) < head.events)
        open_runs = {head.run_id for head in scan.open_runs()}
        # a crash between a batch's raw insert and its derived ones: the run's raw rows are all
        # there, its summary row (written last, membench/warehouse/sink.py) is not
        summarised = {row["run_id"] for row in queries.run_results_by_status(self.warehouse, run_set)}
        unsummarised = {run_id for run_id, head in scan.runs.items() if head.ended and run_id not in summarised}
        recovery = Recovery()
        folded = open_runs | set(behind) | unsummarised
        if folded:
            recovery.raw_rows, recovery.derived_rows = self._catch_up(scan, behind, sorted(folded))
        recovery.closed = close_abandoned(self.log_path, run_set, self.publish, scan)
        with self._lock:
            self.sink.flush()
        return recovery

    def _catch_up(self, scan, behind: list[str], folded: list[str]) -> tuple[int, int]:
        """Folds the runs in `folded` from the log into the processor (open ones stay open in it,
        ready for their closing event) and writes the raw rows of `behind` and the derived events of
        `folded` that the warehouse lacks. Returns (raw rows, derived rows) written."""
        logged = run_events(self.log_path, folded)
        have_seqs = queries.stored_seqs(self.warehouse, behind)
        have_derived = queries.derived_ids(self.warehouse, folded)
        fingerprint = scan.schema.fingerprint_hex
        rows: list[Any] = []
        derived: list[Any] = []
        with self._lock:
            for run_id in folded:
                for event, datum in logged[run_id]:
                    derived.extend(d for d in self.processor.apply(event) if d.derived_id not in have_derived)
                    if run_id in have_seqs and event.seq not in have_seqs[run_id]:
                        rows.append(trajectory_row(event, datum, fingerprint))
            if rows:
                key = ";".join(f"{row[2]}:{row[5]}" for row in rows)
                insert_raw(self.warehouse, rows, "recover:" + hashlib.sha256(key.encode()).hexdigest())
            written = insert_derived(self.warehouse, derived, token_prefix="recover") if derived else 0
        return len(rows), written
