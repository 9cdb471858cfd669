"""What one session's raw events say about memory and outcome, folded for the taxonomy processors.

The failure taxonomy, the memory contract and the hygiene observations all judge a task session
from the same evidence: which memories were injected and cited, which memories exist and what
they were learned from, what the gold labels say about that evidence, what the patch touched and
what the oracle said. `EvidenceCollector` folds a run's events into one `SessionEvidence` per
session, so each of those processors stays a small pure function of it.

Memory provenance: a `MemoryWrite` names the raw events it was learned from; a delivered pack
event is a `Turn` whose `source_event_id` is the pack event id. A memory's evidence is the set of
pack event ids its provenance reaches (a provenance id that is not a delivered Turn is kept as
it is, so a memory system may also cite pack event ids directly). Gold labels (`OracleLabel`)
name pack event ids, so relevance is judged the same way for every memory system, whatever its
memory ids look like.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from membench.schemas.derived import UnitKey
from membench.schemas.events import Event, agent_model_call
from membench.formats.pack_format import RESOLUTION_POLICIES

# Label types whose evidence is relevant (supports a required fact) or stale (carries a
# forbidden, superseded fact that must not be followed).
RELEVANT_LABELS = frozenset({"required"})
STALE_LABELS = frozenset({"forbidden", "stale"})


@dataclass(frozen=True)
class Label:
    label_id: str
    label_type: str
    active_session: int
    event_ids: frozenset[str]
    fact_ids: tuple[str, ...] = ()

    def active_in(self, session_index: int) -> bool:
        return self.active_session in (-1, session_index)


@dataclass(frozen=True)
class Memory:
    memory_id: str
    memory_type: str
    scope: tuple[str, ...]
    evidence: frozenset[str]  # pack event ids (or raw ids) the memory was learned from


@dataclass(frozen=True)
class SessionEvidence:
    """Everything the taxonomy processors need about one session, and nothing they must look up."""

    session_index: int
    scored: bool
    status: str  # SessionEnded status: completed / timeout / error / history / context_overflow
    memory_read: bool
    injected_ids: tuple[str, ...]
    cited_ids: tuple[str, ...]
    reads_over_budget: int
    max_agent_input_tokens: int
    context_budget: int | None
    patch_files: tuple[str, ...]
    verdict: dict[str, Any] | None
    memories: dict[str, Memory]  # memories that existed when the session began, by id
    labels: tuple[Label, ...]
    source_seq: int = 0
    resolution_policy: str = "patch_as_submitted"  # RunStarted's (event v5); membench.processors.failure's module doc
    agent_calls: int = 0  # the agent's ModelCalls in the session (purpose agent; not a model user's)
    agent_answers: int = 0  # of those, the ones the model answered (status ok)
    # of those, the ones that were the request's own failure: a 429/5xx/timeout the gateway's probe
    # did not reproduce (`request_failed`), and, replaying, a request the recording does not hold
    agent_requests_failed: int = 0
    agent_replay_misses: int = 0

    @property
    def agent_could_act(self) -> bool:
        """False when the agent called a model and every call failed: it never had an answer to act
        on, so nothing it did (or did not do) with its memory says anything about the memory."""
        return self.agent_calls == 0 or self.agent_answers > 0

    @property
    def is_task(self) -> bool:
        """A session the agent worked on (a replayed history session is evidence, not a task)."""
        return self.status != "history"

    @property
    def outcome(self) -> str:
        return self.verdict["outcome"] if self.verdict else "no_verdict"

    def cases(self, prefix: str) -> list[dict[str, str]]:
        return [c for c in (self.verdict or {}).get("cases", []) if c["case_id"].startswith(prefix)]

    def active_labels(self) -> list[Label]:
        return [label for label in self.labels if label.active_in(self.session_index)]

    def evidence_of(self, label_types: frozenset[str]) -> frozenset[str]:
        return frozenset(e for label in self.active_labels() if label.label_type in label_types for e in label.event_ids)

    def memories_from(self, evidence: frozenset[str]) -> frozenset[str]:
        return frozenset(m.memory_id for m in self.memories.values() if m.evidence & evidence)

    def task_scope(self) -> tuple[str, ...]:
        return tuple(f for label in self.active_labels() if label.label_type == "task_scope" for f in label.fact_ids)


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


@dataclass
class _Open:
    index: int
    scored: bool
    memories: dict[str, Memory]
    memory_read: bool = False
    injected: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    reads_over_budget: int = 0
    max_input: int = 0
    calls: int = 0
    answers: int = 0
    requests_failed: int = 0
    replay_misses: int = 0
    patch_files: tuple[str, ...] = ()
    verdict: dict[str, Any] | None = None


@dataclass
class EvidenceCollector:
    """Per-run fold: `apply(event)` returns the `SessionEvidence` a SessionEnded completes.

    One collector serves every fold of a run that judges evidence (the pipeline gives the verdict
    and diagnosis folds the same one), so a run's evidence is folded once: each of those folds calls
    `apply` with the event, the first call folds it, and a repeated call with the same event object
    returns that result."""

    key: UnitKey | None = None
    construct: str | None = None
    family: str | None = None
    context_budget: int | None = None
    resolution_policy: str = "patch_as_submitted"
    labels: list[Label] = field(default_factory=list)
    memories: dict[str, Memory] = field(default_factory=dict)
    delivered: dict[str, str] = field(default_factory=dict)  # Turn event id -> pack event id
    current: _Open | None = None
    _last: tuple[Event | None, SessionEvidence | None] = field(default=(None, None), repr=False, compare=False)

    def apply(self, event: Event) -> SessionEvidence | None:
        last_event, last_result = self._last
        if event is last_event:
            return last_result
        result = self._fold(event)
        self._last = (event, result)
        return result

    def _fold(self, event: Event) -> SessionEvidence | None:
        kind, p = event.kind, event.payload
        if kind == "RunStarted":
            self.key = UnitKey(event.run_set, event.run_id, event.unit_id, p["suite"], p["task"],
                               p["condition"], p["seed"], p["agent"])
            self.construct, self.family = p.get("construct"), p.get("family")
            budget = p["budgets"].get("context_tokens")
            self.context_budget = int(budget) if budget else None
            # a log written before event v5 has no policy (it decodes to this default): the oracle's verdict decided
            policy = p.get("resolution_policy", "patch_as_submitted")
            if policy not in RESOLUTION_POLICIES:
                raise ValueError(f"run {event.run_id} seq {event.seq}: RunStarted.resolution_policy '{policy}' "
                                 f"is not one of {', '.join(RESOLUTION_POLICIES)}")
            self.resolution_policy = policy
            return None
        if self.key is None:
            raise ValueError(f"run {event.run_id} seq {event.seq}: {kind} before RunStarted")
        if kind == "OracleLabel":
            self.labels.append(Label(p["label_id"], p["label_type"], p["active_session"], frozenset(p["event_ids"]),
                                     tuple(p.get("fact_ids", []))))
        elif kind == "Turn" and (source := p.get("source_event_id")):
            self.delivered[event.event_id] = source
        elif kind == "MemoryWrite":
            evidence = frozenset(self.delivered.get(e, e) for e in p["provenance_event_ids"])
            self.memories[p["memory_id"]] = Memory(p["memory_id"], p["memory_type"], tuple(p["scope"]), evidence)
        elif kind == "SessionStarted":
            self.current = _Open(p["session_index"], p["scored"], dict(self.memories))
        elif self.current is not None:
            return self._in_session(event)
        return None

    def _in_session(self, event: Event) -> SessionEvidence | None:
        kind, p, s = event.kind, event.payload, self.current
        assert s is not None
        if kind == "MemoryRead":
            s.memory_read = True
            s.injected += p["admitted_ids"]
            if p["token_budget"] > 0 and p["tokens_admitted"] > p["token_budget"]:
                s.reads_over_budget += 1
        elif kind == "MemoryCitation":
            s.cited += p["memory_ids"]
        elif kind == "Turn" and p["role"] == "agent":
            s.max_input = max(s.max_input, p.get("input_tokens", 0) + p.get("cached_tokens", 0))
        elif kind == "ModelCall" and agent_model_call(p):  # type: ignore[arg-type]  # a ModelCall by its kind
            # one call's prompt: the context the agent had (cached tokens are part of it); not the model user's
            s.max_input = max(s.max_input, p.get("input_tokens", 0))
            if p.get("purpose", "agent") == "agent":
                s.calls += 1
                s.answers += p["status"] == "ok"
                s.requests_failed += p["status"] == "request_failed"
                s.replay_misses += p["status"] == "replay_miss"
        elif kind == "PatchProduced":
            s.patch_files = tuple(p["files"])
        elif kind == "OracleVerdict":
            s.verdict = {"outcome": p["outcome"], "cases": list(p["cases"]), "inconclusive": p["inconclusive"],
                         "exit_status": p["exit_status"]}
        elif kind == "SessionEnded":
            self.current = None
            return SessionEvidence(
                session_index=s.index, scored=s.scored, status=p["status"], memory_read=s.memory_read,
                injected_ids=_unique(s.injected), cited_ids=_unique(s.cited), reads_over_budget=s.reads_over_budget,
                max_agent_input_tokens=s.max_input, context_budget=self.context_budget, patch_files=s.patch_files,
                verdict=s.verdict, memories=s.memories, labels=tuple(self.labels), source_seq=event.seq,
                resolution_policy=self.resolution_policy, agent_calls=s.calls, agent_answers=s.answers,
                               agent_requests_failed=s.requests_failed, agent_replay_misses=s.replay_misses)
        return None
