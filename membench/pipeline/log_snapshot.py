"""A read-only query while a run owns the embedded warehouse: a snapshot rebuilt from the logs.

A chDB warehouse has one owner process (membench/warehouse/client.py's lock), and `membench run` holds it for
the whole grid, so `membench sql`, the exports and `membench.frames` could not read it during a run.
Copying the warehouse's directory while its owner writes would not be a consistent copy; the logs
are: `runs/<run set>/events.avro` is the source of truth (docs/design.md §1), appended in whole
blocks, each fsynced before the warehouse sees its events. So `snapshot_from_logs` builds a fresh
chDB warehouse in a temporary directory from a copy of each log's complete blocks (a block being
written at the end is left out), re-deriving every derived table with the same processors the
run uses, and the read-only command queries that.

What the snapshot holds, stated with the answer (`Snapshot.note`): every event the logs held when
it was taken. A unit still running has its raw events and its derived rows so far, but no
`run_results` row until its RunEnded is in the log; a run set written to Kafka has no log here and
is not in the snapshot. A raw row's `payload` is the event as decoded from the log, as the sinks
write it (membench/warehouse/sink.py): the rows the owner's sink writes. The owner's warehouse is never
opened, and nothing is written under MEMBENCH_HOME.

`membench report` does not read a snapshot: a report is checked against the run set's log root,
whose row digests cover the warehouse's own rows.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from membench.warehouse.client import Warehouse

BATCH = 5000  # raw rows per insert


@dataclass
class Snapshot:
    warehouse: Warehouse  # read-only
    directory: Path
    events: dict[str, int] = field(default_factory=dict)  # run set -> events taken from its log
    cut: dict[str, str] = field(default_factory=dict)  # run set -> why its log was read only up to a point

    @property
    def note(self) -> str:
        sets = ", ".join(f"{rs} ({n} events)" for rs, n in sorted(self.events.items())) or "none"
        cut = "".join(f"; {rs}: {why}" for rs, why in sorted(self.cut.items()))
        return (f"answered from a snapshot rebuilt from the logs under runs/ just now (run sets: {sets}{cut}); "
                "a unit still running has no run_results row yet")

    def close(self) -> None:
        try:
            self.warehouse.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def reader(self) -> "SnapshotWarehouse":
        """The snapshot's warehouse, whose `close` also removes the snapshot."""
        return SnapshotWarehouse(self)


class SnapshotWarehouse:
    """A snapshot's read-only warehouse as the commands use one (queries, `close`)."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot

    def __getattr__(self, name: str):
        return getattr(self.snapshot.warehouse, name)

    def close(self) -> None:
        self.snapshot.close()

    def __enter__(self) -> "SnapshotWarehouse":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def snapshot_from_logs(runs_dir: Path, run_sets: list[str] | None = None) -> Snapshot:
    """A read-only warehouse, in a temporary directory the caller removes with `Snapshot.close`,
    holding the raw and derived rows of every run set's log under RUNS_DIR (only RUN_SETS, when
    given), as far as each log's complete blocks go."""
    import hashlib

    from membench.bus.attempts import LogError
    from membench.pipeline.log_fold import fold_log
    from membench.warehouse.client import connect
    from membench.warehouse.sink import insert_derived, insert_raw, trajectory_row

    directory = Path(tempfile.mkdtemp(prefix="membench-snapshot-"))
    warehouse = connect(f"chdb://{directory / 'warehouse'}")
    snapshot = Snapshot(warehouse, directory)
    try:
        logs = sorted(Path(runs_dir).glob("*/events.avro")) if Path(runs_dir).is_dir() else []
        for log in logs:
            run_set = log.parent.name
            if run_sets is not None and run_set not in run_sets:
                continue
            copy = directory / f"{run_set}.avro"
            shutil.copyfile(log, copy)  # the owner keeps appending to the original
            rows: list[Any] = []
            derived: list[Any] = []
            count = 0

            def flush() -> None:
                if rows:
                    key = f"{run_set}:{count}"
                    insert_raw(warehouse, rows, "snapshot:" + hashlib.sha256(key.encode()).hexdigest())
                    rows.clear()
                if derived:
                    insert_derived(warehouse, derived, token_prefix=f"snapshot:{run_set}:{count}")
                    derived.clear()
            try:
                for event, datum, fingerprint_hex, derived_here in fold_log(copy):
                    rows.append(trajectory_row(event, datum, fingerprint_hex))
                    derived.extend(derived_here)
                    count += 1
                    if len(rows) >= BATCH:
                        flush()
            except LogError as exc:  # a block being written at the end (or damage: `membench replay` tells)
                snapshot.cut[run_set] = f"read up to its last complete block ({str(exc).split(': ', 1)[-1]})"
            flush()
            copy.unlink()
            snapshot.events[run_set] = count
        warehouse.make_read_only()
    except BaseException:
        snapshot.close()
        raise
    return snapshot
