"""Replay's comparison of the re-derived events with what the warehouse recorded, a batch of ended
runs at a time (`_Comparer`), and a `replay --jobs N` worker's stand-in that forwards them to the
parent instead (`_Forwarder`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from membench.audit.findings import Finding, ReplayResult
from membench.schemas.derived import WALL_CLOCK_FIELDS, DerivedEvent
from membench.schemas.events import Event
from membench.warehouse import queries


def _normalize(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    return value


def recorded_derived(warehouse: Any, run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """derived_id -> {kind, run_id, source_seq, payload} as the warehouse holds them."""
    from membench.warehouse.tables import derived_columns, table_for_kind

    out: dict[str, dict[str, Any]] = {}
    if not run_ids:
        return out
    for kind, columns in derived_columns().items():
        for row in queries.derived_rows_of_runs(warehouse, table_for_kind(kind), sorted(run_ids), "derived_id"):
            payload = {name: row[name] for name, _ in columns[2:]}
            out[row["derived_id"]] = {"kind": kind, "run_id": row["run_id"], "source_seq": row["source_seq"],
                                      "payload": _normalize(payload)}
    return out


# Runs whose derived events are compared with the warehouse in one query: memory stays bounded by
# this many runs' derived events (and the open runs'), whatever the size of the log.
VERIFY_BATCH_RUNS = 500


class _Comparer:
    """Compares re-derived events with the warehouse a batch of ended runs at a time. It is told of
    each run's chain once: events as they come (`add`, a run's first RunEnded ends it), or a
    worker's whole ended runs (`add_ended`); what is fenced never reaches it."""

    def __init__(self, warehouse: Any, result: ReplayResult, findings: list[Finding]):
        self.warehouse, self.result, self.findings = warehouse, result, findings
        self.by_run: dict[str, list[DerivedEvent]] = {}  # runs not compared yet: ended in this batch, or open
        self.ended: list[str] = []

    def add(self, event: Event, derived: list[DerivedEvent]) -> None:
        if derived:
            self.by_run.setdefault(event.run_id, []).extend(derived)
        if event.kind == "RunEnded":
            self.add_ended(event.run_id, [])

    def add_ended(self, run_id: str, derived: list[DerivedEvent]) -> None:
        """The (last) derived events of a run that has ended."""
        if derived:
            self.by_run.setdefault(run_id, []).extend(derived)
        self.ended.append(run_id)
        if len(self.ended) >= VERIFY_BATCH_RUNS:
            self.flush(self.ended)
            self.ended = []

    def add_open(self, run_id: str, derived: list[DerivedEvent]) -> None:
        """A run that never ended, with its derived events (none is a run to compare all the same:
        the warehouse may hold rows of it)."""
        self.by_run.setdefault(run_id, []).extend(derived)

    def finish(self, open_runs: Iterable[str] = ()) -> None:
        """Every run not compared yet: the last batch, and the runs that never ended."""
        self.flush(set(self.ended) | set(self.by_run) | set(open_runs))
        self.ended = []

    def flush(self, run_ids) -> None:
        run_ids = set(run_ids)
        if not run_ids:
            return
        recorded = recorded_derived(self.warehouse, run_ids)
        for run_id in run_ids:
            for item in self.by_run.pop(run_id, ()):
                self._compare(item, recorded.pop(item.derived_id, None))
        for derived_id, want in recorded.items():
            self.findings.append(Finding(want["run_id"], want["source_seq"],
                                         f"{want['kind']} in the warehouse was not re-derived from the log "
                                         "(events missing from the log)"))

    def _compare(self, item: DerivedEvent, want: dict[str, Any] | None) -> None:
        self.result.compared += 1
        if want is None:
            # a kind newer than the warehouse's rows (a membench before it wrote them) is what rederive fills
            self.findings.append(Finding(item.run_id, item.source_seq, f"{item.kind} derived on replay is missing "
                                                                       "from the warehouse (written by an older "
                                                                       "membench? `membench rederive` adds it)"))
            return
        got = {k: v for k, v in _normalize(item.payload).items() if k not in WALL_CLOCK_FIELDS}
        have = {k: v for k, v in want["payload"].items() if k not in WALL_CLOCK_FIELDS}
        if got != have:
            diff = sorted(k for k in set(got) | set(have) if got.get(k) != have.get(k))
            self.findings.append(Finding(item.run_id, item.source_seq,
                                         f"{item.kind} differs from the warehouse in {', '.join(diff)}"))


class _Forwarder:
    """A `replay --jobs N` worker's stand-in for the comparer: the derived events of each ended run
    go to the parent (which owns the warehouse connection: a chDB path has one owner) in messages of
    `FORWARD_RUNS` runs; the open runs' at the end."""

    def __init__(self, send: Callable[[tuple], None]):
        self.send = send
        self.by_run: dict[str, list[DerivedEvent]] = {}
        self.ended: list[tuple[str, list[DerivedEvent]]] = []

    def add(self, event: Event, derived: list[DerivedEvent]) -> None:
        if derived:
            self.by_run.setdefault(event.run_id, []).extend(derived)
        if event.kind == "RunEnded":
            self.ended.append((event.run_id, self.by_run.pop(event.run_id, [])))
            if len(self.ended) >= FORWARD_RUNS:
                self.send(("ended", self.ended))
                self.ended = []

    def finish(self, open_runs: Iterable[str] = ()) -> None:
        if self.ended:
            self.send(("ended", self.ended))
        self.send(("open", [(run_id, self.by_run.pop(run_id, [])) for run_id in open_runs]))
        self.ended, self.by_run = [], {}


FORWARD_RUNS = 100
