"""Every replayed run's head, kept on disk: what lets `membench replay` hold only the
runs still open in memory, however long the log.

A run's head (the recomputed hash of its chain's last event, `membench.schemas.chain.ChainVerifier`) is
final once its first `RunEnded` is read; from then on replay needs it only twice: to know that a
later event of the run is fenced (docs/design.md §2), and to hash the run set's log root over every
run sorted by id (`membench.schemas.log_root`). Both are a B-tree's work, so the heads go to a SQLite file
(the standard library's; a table keyed by run id) as runs end, a thousand at a time, and are read
back in key order for the root. Memory: SQLite's page cache (`CACHE_KIB`) and one pending batch. Disk:
≈ 125 bytes per run in a temporary directory (`TMPDIR`), deleted when the store is closed or
garbage-collected.

Run ids are unique across run sets (UUIDs; the chain check keys runs by id alone), so the id is the
key and the run set a column; SQLite compares TEXT keys byte by byte (BINARY), which for UTF-8 is
the code-point order Python's `sorted` uses, so the root read back equals `log_root(dict)`.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

from membench.schemas.log_root import log_root_of_sorted

# heads written to SQLite in one transaction
FLUSH_EVERY = 1000
CACHE_KIB = 256


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None)
    # a scratch file: no journal, no fsync; a crash loses a replay, never a log
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    db.execute("CREATE TABLE IF NOT EXISTS heads (run_id TEXT PRIMARY KEY, run_set TEXT NOT NULL, "
               "head TEXT NOT NULL) WITHOUT ROWID")
    return db


class RunHeads:
    """The heads of ended runs, on disk. `add` buffers; lookups see the buffer too.

    `path` names the file (a `replay --jobs` worker writes one its parent `absorb`s); by default a
    temporary directory of its own, removed by `close`."""

    def __init__(self, path: Path | None = None):
        self._owned_dir = None
        if path is None:
            self._owned_dir = tempfile.mkdtemp(prefix="membench-heads-")
            path = Path(self._owned_dir) / "heads.sqlite"
        self.path = path
        self._db = _connect(path)
        self._pending: dict[str, tuple[str, str]] = {}  # run_id -> (run_set, head)
        self._finalizer = weakref.finalize(self, _cleanup, self._db, self._owned_dir)

    def add(self, run_set: str, run_id: str, head: str) -> None:
        self._pending[run_id] = (run_set, head)
        if len(self._pending) >= FLUSH_EVERY:
            self.flush()

    def __contains__(self, run_id: str) -> bool:
        if run_id in self._pending:
            return True
        return self._db.execute("SELECT 1 FROM heads WHERE run_id = ?", (run_id,)).fetchone() is not None

    def head(self, run_id: str) -> str | None:
        """The run's head, None when it has not ended (replay: a fenced event of a log file)."""
        if run_id in self._pending:
            return self._pending[run_id][1]
        row = self._db.execute("SELECT head FROM heads WHERE run_id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def flush(self) -> None:
        if not self._pending:
            return
        self._db.execute("BEGIN")
        # a run id already stored keeps its first head (a run has one; the caller fences repeats)
        self._db.executemany("INSERT OR IGNORE INTO heads VALUES (?, ?, ?)",
                             ((run_id, run_set, head) for run_id, (run_set, head) in self._pending.items()))
        self._db.execute("COMMIT")
        self._pending = {}

    def absorb(self, other: Path) -> None:
        """Copies every head of another store's file (a worker's, closed) into this one."""
        self.flush()
        self._db.execute("ATTACH DATABASE ? AS other", (str(other),))
        try:
            self._db.execute("INSERT OR IGNORE INTO heads SELECT run_id, run_set, head FROM other.heads")
        finally:
            self._db.execute("DETACH DATABASE other")

    def counts(self) -> dict[str, int]:
        """run set -> its number of runs."""
        self.flush()
        return dict(self._db.execute("SELECT run_set, count(*) FROM heads GROUP BY run_set"))

    def pairs(self, run_set: str) -> Iterator[tuple[str, str]]:
        """(run_id, head) of every run of `run_set`, sorted by run id, streamed."""
        self.flush()
        # a cursor of its own: the caller may look things up while iterating
        cursor = self._db.cursor()
        cursor.execute("SELECT run_id, head FROM heads WHERE run_set = ? ORDER BY run_id", (run_set,))
        while True:
            rows = cursor.fetchmany(1000)
            if not rows:
                return
            yield from rows

    def log_root(self, run_set: str) -> str:
        return log_root_of_sorted(self.pairs(run_set))

    def close(self) -> None:
        """Writes what is pending and closes the file (removed when it is this store's own)."""
        if self._finalizer.alive:
            self.flush()
        self._finalizer()


def _cleanup(db: sqlite3.Connection, owned_dir: str | None) -> None:
    db.close()
    if owned_dir is not None:
        shutil.rmtree(owned_dir, ignore_errors=True)
