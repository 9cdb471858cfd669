"""Routing a multi-run event stream to per-run folds; dead letters for events that don't fit."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from processors.verdicts import VerdictFold
from schemas.derived import DerivedEvent
from schemas.events import Event

# Every fold a run gets; later folds (failure taxonomy, memory contract, hygiene) join this list.
FOLDS: list[Callable[[], object]] = [VerdictFold]


@dataclass(frozen=True)
class DeadLetter:
    run_id: str
    seq: int
    reason: str


class RunSetProcessor:
    """Holds the open folds of every run in flight. A run's state is dropped at RunEnded."""

    def __init__(self) -> None:
        self._runs: dict[str, list] = {}
        self.dead_letters: list[DeadLetter] = []

    def apply(self, event: Event) -> list[DerivedEvent]:
        folds = self._runs.get(event.run_id)
        if folds is None:
            folds = self._runs[event.run_id] = [make() for make in FOLDS]
        out: list[DerivedEvent] = []
        try:
            for fold in folds:
                out.extend(fold.apply(event))
        except (KeyError, ValueError, TypeError) as exc:
            self.dead_letters.append(DeadLetter(event.run_id, event.seq, f"{type(exc).__name__}: {exc}"))
            return out
        if event.kind == "RunEnded":
            del self._runs[event.run_id]
        return out

    def open_runs(self) -> list[str]:
        return list(self._runs)


def derive_all(events: Iterable[Event]) -> list[DerivedEvent]:
    processor = RunSetProcessor()
    out: list[DerivedEvent] = []
    for event in events:
        out.extend(processor.apply(event))
    return out
