"""Routing a multi-run event stream to per-run folds; dead letters for events that don't fit.

Runs arrive interleaved. Within a run, folds need seq order: an event that arrives early (a
re-sent message overtaken by later ones) waits in a small per-run buffer until the gap fills,
and a duplicate (a seq already applied) is dropped and counted, so redelivery after a crash or
a producer retry derives nothing twice. A run ends at its first RunEnded so applied: events of it
that arrive later derive nothing, which is what fences a stalled runner's attempt once another
runner has closed it (docs/design.md §2; `membench.bus.attempts.RunChain` reads a run the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from membench.processors.diagnosis import DiagnosisFold
from membench.processors.end_reason import EndReasonFold
from membench.processors.evidence import EvidenceCollector
from membench.processors.memory_use import MemoryUseFold
from membench.processors.model_usage import ModelUsageFold
from membench.processors.transfer import TransferFold
from membench.processors.verdicts import VerdictFold
from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event

# Every fold a run gets, each made with the run's one EvidenceCollector (verdicts and diagnosis judge the
# same session evidence: it is folded once per run, not once per fold): verdicts and run summaries; the
# diagnosis (failure taxonomy, memory contract, hygiene); transfer results (EngramBench's protocol: CCPF,
# dimensions, hard caps, resources; only runs with an EvaluatorPlan); model usage and cost per purpose; why
# the run ended, in its own words; how it used memory (the harness's reads, the agent's memory calls).
FOLDS: list[Callable[[EvidenceCollector], object]] = [
    lambda evidence: VerdictFold(evidence=evidence),
    lambda evidence: DiagnosisFold(evidence=evidence),
    lambda evidence: TransferFold(),
    lambda evidence: ModelUsageFold(),
    lambda evidence: EndReasonFold(),
    lambda evidence: MemoryUseFold(),
]


@dataclass(frozen=True)
class DeadLetter:
    run_id: str
    seq: int
    reason: str


@dataclass
class _RunState:
    folds: list
    next_seq: int = 0
    pending: dict[int, Event] = field(default_factory=dict)


# Ended run ids remembered: at least this many, at most twice (≈ 100 bytes each: ≤ 4 MB); at
# 230 runs ending per second (15 k events/s) that is > 70 s of traffic, redelivery reaches back ≈ 1 s.
ENDED_WINDOW = 16_384


class RunSetProcessor:
    """Holds the open folds of every run in flight. A run's state is dropped at RunEnded; its id is
    remembered among the last `ended_window` (up to twice as many) ended runs (None: all, for a
    bounded batch or an audit)."""

    def __init__(self, ended_window: int | None = ENDED_WINDOW) -> None:
        if ended_window is not None and ended_window < 1:
            raise ValueError("ended_window must be at least 1")
        self._runs: dict[str, _RunState] = {}
        self._ended: set[str] = set()  # the newer generation (all ended runs when unbounded)
        self._ended_before: set[str] = set()  # the older generation
        self.ended_window = ended_window
        self.dead_letters: list[DeadLetter] = []
        self.duplicates = 0

    def apply(self, event: Event) -> list[DerivedEvent]:
        if event.run_id in self._ended or event.run_id in self._ended_before:
            self.duplicates += 1
            return []
        state = self._runs.get(event.run_id)
        if state is None:
            evidence = EvidenceCollector()
            state = self._runs[event.run_id] = _RunState([make(evidence) for make in FOLDS])
        if event.seq < state.next_seq or event.seq in state.pending:
            self.duplicates += 1
            return []
        state.pending[event.seq] = event
        out: list[DerivedEvent] = []
        while state.next_seq in state.pending:
            ready = state.pending.pop(state.next_seq)
            state.next_seq += 1
            if not (ready.seq == 0 and ready.kind == "RunEnded"):  # a run closed before its first event
                out.extend(self._apply_in_order(state, ready))  # (a fenced attempt's) derives nothing
            if ready.kind == "RunEnded":
                del self._runs[ready.run_id]
                self._remember_ended(ready.run_id)
                break
        return out

    def _remember_ended(self, run_id: str) -> None:
        self._ended.add(run_id)
        if self.ended_window is not None and len(self._ended) >= self.ended_window:
            self._ended_before, self._ended = self._ended, set()

    def take_dead_letters(self) -> list[DeadLetter]:
        """The dead letters since the last call, cleared (a long-running worker keeps none)."""
        letters, self.dead_letters = self.dead_letters, []
        return letters

    def ended_remembered(self) -> int:
        return len(self._ended) + len(self._ended_before)

    def _apply_in_order(self, state: _RunState, event: Event) -> list[DerivedEvent]:
        out: list[DerivedEvent] = []
        try:
            for fold in state.folds:
                out.extend(fold.apply(event))
        except (KeyError, ValueError, TypeError) as exc:
            self.dead_letters.append(DeadLetter(event.run_id, event.seq, f"{type(exc).__name__}: {exc}"))
        return out

    def is_new(self, run_id: str) -> bool:
        """No event of this run has been seen (or it was forgotten)."""
        return run_id not in self._runs and run_id not in self._ended and run_id not in self._ended_before

    def open_runs(self) -> list[str]:
        return list(self._runs)

    def waiting(self, run_id: str) -> int:
        """Events of a run held back until an earlier seq arrives."""
        state = self._runs.get(run_id)
        return len(state.pending) if state else 0

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop the state of runs whose partition moved to another worker."""
        for run_id in run_ids:
            self._runs.pop(run_id, None)


def derive_all(events: Iterable[Event]) -> list[DerivedEvent]:
    processor = RunSetProcessor()
    out: list[DerivedEvent] = []
    for event in events:
        out.extend(processor.apply(event))
    return out
