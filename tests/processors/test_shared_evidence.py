"""The verdict and diagnosis folds share one per-run EvidenceCollector: each event is folded into
evidence once, and the derived events equal those of folds that each keep their own collector."""

from __future__ import annotations

from membench.processors import RunSetProcessor
from membench.processors.diagnosis import DiagnosisFold
from membench.processors.end_reason import EndReasonFold
from membench.processors.evidence import EvidenceCollector
from membench.processors.memory_use import MemoryUseFold
from membench.processors.model_usage import ModelUsageFold
from membench.processors.transfer import TransferFold
from membench.processors.verdicts import VerdictFold
from tests.processors.test_verdicts import build_run


def _runs():
    return [e for i, outcomes in enumerate((("pass", "pass", "fail"), ("fail", "pass", "pass"), ("pass",)))
            for e in build_run(outcomes, run_id=f"r{i}")]


def test_each_event_is_folded_into_evidence_once(monkeypatch):
    calls = []
    fold = EvidenceCollector._fold
    monkeypatch.setattr(EvidenceCollector, "_fold", lambda self, event: calls.append(event) or fold(self, event))
    events = _runs()
    processor = RunSetProcessor()
    derived = [d for e in events for d in processor.apply(e)]
    assert derived and len(calls) == len(events)


def test_shared_evidence_derives_what_separate_collectors_derive():
    events = _runs()
    processor = RunSetProcessor()
    shared = [d for e in events for d in processor.apply(e)]
    separate = []
    folds: dict[str, list] = {}
    for event in events:  # each fold with a collector of its own, as before the folds shared one
        for fold in folds.setdefault(event.run_id, [VerdictFold(), DiagnosisFold(), TransferFold(), ModelUsageFold(),
                                                    EndReasonFold(), MemoryUseFold()]):
            separate += fold.apply(event)
    assert [d.to_record() for d in shared] == [d.to_record() for d in separate]
    assert {d.kind for d in shared} >= {"SessionVerdict", "RunSummary", "FailureClassified"}
