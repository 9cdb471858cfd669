"""Session verdicts and run summaries: pass, tokens, time, tool and patch counts.

A task session passes when it is resolved, and that is decided in one place,
`membench.processors.failure.classify` (through `resolve`): the oracle passed, no rule that fires even on
passing tests holds (an inconclusive oracle, a wrong file), and under the run's resolution policy
`agent_must_finish` the agent also finished (no timeout, no context overflow). So
`SessionVerdict.passed` and `FailureClassified.resolved` are equal by construction; `outcome`
stays the oracle's own. A session or run is excluded (never a
fail, never imputed) when isolation was unavailable or the oracle's harness produced no outcome
(`harness_fault`, `membench.processors.failure.EXCLUDING_OUTCOMES`), or the run ended as excluded or was closed as
abandoned (a crashed attempt, `membench/bus/attempts.py`). A run that ended `completed` with an
`error_type` of `harness_error:…` (the harness raised after the agent started) is not
excluded: its unfinished sessions simply did not pass. Nothing after the scored session's verdict
can change the cell: a run that ended `excluded` once its scored session had a verdict (a memory
write after it whose model failed, say) is summarized as `completed`, its reason kept in
`error_type` only — whatever runner wrote the log (membench's own records such a failure as a
note and ends the run `completed`, membench/runner/grid.py). Durations are
the difference of event timestamps, the only wall-clock fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from membench.processors.evidence import EvidenceCollector
from membench.processors.failure import EXCLUDING_OUTCOMES, resolve
from membench.schemas.derived import DerivedEvent, ResourceTotals, UnitKey, make_derived, shallow_fields
from membench.schemas.events import Event, agent_model_call

if TYPE_CHECKING:
    from membench.schemas.payloads import RunEnded


@dataclass
class _Counts(ResourceTotals):
    def add(self, event: Event) -> None:
        p = event.payload
        if event.kind == "Turn" or (event.kind == "ModelCall" and agent_model_call(p)):  # type: ignore[arg-type]  # by its kind
            # a gateway agent's usage is on its ModelCalls only; a model user's calls are not the agent's
            self.input_tokens += p.get("input_tokens", 0)
            self.cached_tokens += p.get("cached_tokens", 0)
            self.output_tokens += p.get("output_tokens", 0)
            self.reasoning_tokens += p.get("reasoning_tokens", 0)
        elif event.kind == "ToolCall":
            self.tool_calls += 1
            self.patch_invocations += 1 if p.get("is_patch", False) else 0
        elif event.kind == "MemoryRead":
            self.memory_reads += 1
            self.memory_tokens_admitted += p["tokens_admitted"]
        elif event.kind == "ContextCompaction":
            self.compactions += 1

    def totals(self) -> dict[str, int]:
        return shallow_fields(self)


@dataclass
class _Session:
    index: int
    started_ts: int
    scored: bool
    oracle_id: str | None
    counts: _Counts = field(default_factory=_Counts)
    outcome: str = "no_verdict"


@dataclass
class VerdictFold:
    """Folds one run. `apply` returns the derived events an event completes."""

    key: UnitKey | None = None
    started_ts: int = 0
    sessions: int = 0
    scored_passed: bool = False
    scored_excluded: str | None = None
    scored_verdict: bool = False  # the scored session ended with a verdict that did not exclude it
    run_counts: _Counts = field(default_factory=_Counts)
    current: _Session | None = None
    events: int = 0
    # the failure taxonomy's view of each session, so resolution is decided by the same function
    evidence: EvidenceCollector = field(default_factory=EvidenceCollector)

    def apply(self, event: Event) -> list[DerivedEvent]:
        self.events += 1
        kind, p = event.kind, event.payload
        ev = self.evidence.apply(event)
        if kind == "RunStarted":
            self.key = UnitKey(event.run_set, event.run_id, event.unit_id, p["suite"], p["task"],
                               p["condition"], p["seed"], p["agent"])
            self.started_ts = event.ts
            return []
        if self.key is None:
            raise ValueError(f"run {event.run_id} seq {event.seq}: {kind} before RunStarted")
        self.run_counts.add(event)
        if self.current is not None:
            self.current.counts.add(event)
        if kind == "SessionStarted":
            self.current = _Session(p["session_index"], event.ts, p["scored"], p.get("oracle_id"))
        elif kind == "OracleVerdict" and self.current is not None:
            self.current.outcome = p["outcome"]
        elif kind == "SessionEnded" and self.current is not None:
            return [self._session_verdict(event, ev is not None and ev.is_task and resolve(ev).resolved)]
        elif kind == "RunEnded":
            return [self._run_summary(event)]
        return []

    def _session_verdict(self, event: Event, passed: bool) -> DerivedEvent:
        s = self.current
        assert s is not None and self.key is not None
        self.current = None
        self.sessions += 1
        excluded = s.outcome in EXCLUDING_OUTCOMES
        if s.scored:
            self.scored_passed = passed
            self.scored_excluded = s.outcome if excluded else None
            self.scored_verdict = s.outcome != "no_verdict" and not excluded
        fields: dict[str, Any] = {
            "session_index": s.index,
            "scored": s.scored,
            "passed": passed,
            "outcome": s.outcome,
            "oracle_id": s.oracle_id,
            "excluded": excluded,
            "exclusion_reason": s.outcome if excluded else None,
            **s.counts.totals(),
            "duration_ms": (event.ts - s.started_ts) // 1000,
        }
        return make_derived(self.key, "SessionVerdict", event.seq, fields, s.index)

    def _run_summary(self, event: Event) -> DerivedEvent:
        assert self.key is not None
        p: RunEnded = event.payload  # type: ignore[assignment]  # a decoded RunEnded is a plain dict
        # an attempt closed as abandoned (a crashed runner's) is excluded like one that could not run; an
        # exclusion met after the scored verdict changes nothing (module doc)
        status = "completed" if p["status"] == "excluded" and self.scored_verdict else p["status"]
        excluded_reason = self.scored_excluded or (p.get("error_type") if status in ("excluded", "abandoned")
                                                   else None)
        fields: dict[str, Any] = {
            "status": status,
            "error_type": p.get("error_type"),
            "sessions": self.sessions,
            "scored_passed": self.scored_passed and excluded_reason is None,
            "excluded": excluded_reason is not None,
            "exclusion_reason": excluded_reason,
            "events": self.events,
            "last_hash": event.hash,
            **self.run_counts.totals(),
            "duration_ms": (event.ts - self.started_ts) // 1000,
        }
        return make_derived(self.key, "RunSummary", event.seq, fields)
