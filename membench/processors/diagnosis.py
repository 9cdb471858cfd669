"""The per-session diagnosis fold: failure taxonomy, memory contract and hygiene observations.

All three judge the same evidence (what was injected, cited, labelled, and the oracle's verdict),
so one fold collects it once per run and derives them together at the end of each task session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from membench.processors.contract import attribute
from membench.processors.evidence import EvidenceCollector
from membench.processors.failure import classify, failure_events
from membench.processors.hygiene import hygiene_events
from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event


@dataclass
class DiagnosisFold:
    """Per-run fold: at the end of each task session, a FailureClassified, a MemoryContract and the
    session's HygieneObservations."""

    evidence: EvidenceCollector = field(default_factory=EvidenceCollector)

    def apply(self, event: Event) -> list[DerivedEvent]:
        ev = self.evidence.apply(event)
        if ev is None or not ev.is_task:
            return []
        key = self.evidence.key
        assert key is not None
        att = attribute(ev)
        verdict = classify(ev, att)
        return failure_events(key, ev, att, verdict) + hygiene_events(
            key, ev, att, verdict, self.evidence.construct, self.evidence.family)
