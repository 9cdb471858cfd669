"""Abandoned attempts: after a crash, close every run the log left open.

A run ends with `RunEnded`. A process killed mid-run leaves its run without one, and replay would
report that run as a break forever. The next `membench run` of the run set therefore appends, to
each open run's own chain, one event saying what happened:

    RunEnded{status: "abandoned", error_type: "abandoned_attempt"}   seq = last + 1,
                                                                     prev_hash = last hash

sealed like every other event (membench/schemas/chain.py) and published through the same pipeline, so the
log, the processors (a `RunSummary` with status `abandoned`, never a valid cell) and the warehouse
all see it. The attempt stays visible in the log; the unit is re-run as the next attempt.

The run set's log file (`runs/<run_set>/events.avro`) is the source of truth: the embedded
pipeline makes it durable before it writes the warehouse, so the log holds at least what the
warehouse holds.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fastavro import reader as avro_reader

from membench.schemas.chain import seal
from membench.schemas.codec import encode_datum
from membench.schemas.events import GENESIS_HASH, Event
from membench.schemas.registry import SchemaVersion, default_registry
from membench.schemas.writers import writer_schema

PRODUCER = "membench-attempts/0.1"
ABANDONED_STATUS = "abandoned"
ABANDONED_ERROR = "abandoned_attempt"

Publish = Callable[[Event, bytes], None]


class LogError(RuntimeError):
    """The log cannot be read far enough to close its runs safely (a damaged block)."""


@dataclass
class RunHead:
    """Where one run's chain stands in the log."""

    run_set: str
    run_id: str
    unit_id: str
    events: int = 0
    last_seq: int = -1
    last_hash: str = ""
    ended: bool = False
    status: str | None = None  # RunEnded's status, when the run ended
    end_event_id: str | None = None  # the event id of the RunEnded that ended it
    fenced: int = 0  # events after the end or at a seq already taken: in the log, derive nothing


class RunChain:
    """One run's events in log (partition) order, followed by the rule the processors follow
    (membench/processors/run_set_processor.py `RunSetProcessor`): the first event at each seq counts, an early one
    waits for its gap, and the run ends at the first RunEnded so applied. Every other event of the
    run is fenced: it stays in the log, and nothing is derived from it. A runner that takes over a
    unit (and the stalled runner that finishes it late) read the run this way, so they agree with
    the derived tables on which attempt completed (docs/design.md §2, fencing)."""

    def __init__(self, run_set: str, run_id: str, unit_id: str):
        self.head = RunHead(run_set, run_id, unit_id)
        self._pending: dict[int, Event] = {}

    def add(self, event: Event) -> None:
        head = self.head
        if head.ended or event.seq <= head.last_seq or event.seq in self._pending:
            head.fenced += 1
            return
        self._pending[event.seq] = event
        while head.last_seq + 1 in self._pending:
            ready = self._pending.pop(head.last_seq + 1)
            head.events += 1
            head.last_seq, head.last_hash = ready.seq, ready.hash
            if ready.kind == "RunEnded":
                head.ended, head.status, head.end_event_id = True, ready.payload.get("status"), ready.event_id
                head.fenced += len(self._pending)
                self._pending.clear()
                return


@dataclass
class LogScan:
    path: Path
    schema: SchemaVersion | None  # the writer schema in the file's header (None: no file)
    runs: dict[str, RunHead] = field(default_factory=dict)  # run_id -> head, in first-seen order

    def open_runs(self) -> list[RunHead]:
        return [head for head in self.runs.values() if not head.ended]


def read_log(path: Path) -> Iterator[tuple[Event, SchemaVersion]]:
    """Every event of an Avro container log with its writer schema. A block that no longer decodes
    raises LogError naming the file and the byte offset (nothing after it can be trusted)."""
    with open(path, "rb") as handle:
        try:
            records = avro_reader(handle)
        except Exception as exc:  # not an Avro container file at all
            raise LogError(f"{path}: not a readable Avro log ({type(exc).__name__}: {exc})") from None
        schema = writer_schema(records.writer_schema)
        while True:
            try:
                record = next(records)
            except StopIteration:
                return
            except Exception as exc:
                raise LogError(f"{path}: undecodable data near byte {handle.tell()} "
                               f"({type(exc).__name__}: {exc})") from None
            yield Event.from_record(record), schema  # type: ignore[arg-type]  # an Event record


def scan_log(path: Path, run_set: str | None = None) -> LogScan:
    """Heads of every run (of `run_set`, when given) in the log; an absent log has none."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return LogScan(path, None)
    scan = LogScan(path, None)
    for event, schema in read_log(path):
        scan.schema = schema
        if run_set is not None and event.run_set != run_set:
            continue
        head = scan.runs.get(event.run_id)
        if head is None:
            head = scan.runs[event.run_id] = RunHead(event.run_set, event.run_id, event.unit_id)
        head.events += 1
        head.last_seq, head.last_hash = event.seq, event.hash
        if event.kind == "RunEnded":
            head.ended, head.status = True, event.payload.get("status")
    return scan


def run_events(path: Path, run_ids: Iterable[str]) -> dict[str, list[tuple[Event, bytes]]]:
    """The events of the given runs, in log order, each with its Avro datum (re-encoded with the
    writer schema, which is byte for byte what was written: the chain's hashes cover it)."""
    wanted = set(run_ids)
    out: dict[str, list[tuple[Event, bytes]]] = {run_id: [] for run_id in wanted}
    if not wanted or not Path(path).exists():
        return out
    for event, schema in read_log(path):
        if event.run_id in wanted:
            out[event.run_id].append((event, encode_datum(schema, event.to_record())))
    return out


def closing_event(head: RunHead, schema: SchemaVersion | None = None) -> tuple[Event, bytes]:
    """The sealed `RunEnded{abandoned}` that continues `head`'s chain (a run with no event yet is
    closed at seq 0, so that its runner, should it start late, only adds fenced events)."""
    if head.ended:
        raise ValueError(f"run {head.run_id} already ended (seq {head.last_seq}); nothing to close")
    event = Event(
        event_id=str(uuid.uuid4()), run_set=head.run_set, run_id=head.run_id, unit_id=head.unit_id,
        session_index=-1, seq=head.last_seq + 1, ts=time.time_ns() // 1000, producer=PRODUCER, kind="RunEnded",
        visibility="harness", prev_hash=head.last_hash if head.last_seq >= 0 else GENESIS_HASH,
        payload={"status": ABANDONED_STATUS, "error_type": ABANDONED_ERROR}, hash="",
    )
    return seal(schema or default_registry().latest("event"), event)


def close_abandoned(log_path: Path, run_set: str, publish: Publish, scan: LogScan | None = None) -> list[Event]:
    """Append a `RunEnded{abandoned}` to every run of `run_set` the log holds without a RunEnded,
    through `publish` (the pipeline: log, processors, warehouse). Returns the closing events.

    The closing event is sealed with the newest event schema, the one the pipeline appends with;
    a log written with another schema cannot be appended to (membench/bus/ocf.py refuses), so
    that is refused here first, naming the file."""
    scan = scan if scan is not None else scan_log(log_path, run_set)
    latest = default_registry().latest("event")
    open_runs = [head for head in scan.open_runs() if head.run_set == run_set]
    if open_runs and scan.schema is not None and scan.schema.fingerprint != latest.fingerprint:
        raise LogError(f"{log_path}: written with event schema {scan.schema.family}.v{scan.schema.version}, "
                       f"not the newest; cannot append the closing events of {len(open_runs)} abandoned runs")
    closed = []
    for head in open_runs:
        event, datum = closing_event(head, latest)
        publish(event, datum)
        head.events, head.last_seq, head.last_hash = head.events + 1, event.seq, event.hash
        head.ended, head.status = True, ABANDONED_STATUS
        closed.append(event)
    return closed


def describe(event: Event) -> str:
    return f"run {event.run_id} ({event.unit_id}) closed at seq {event.seq} as abandoned"

