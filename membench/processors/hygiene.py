"""Hygiene observations (docs/design.md §7): per oracle label and per construct, each a numerator and a
denominator of one task session, so a rate over any grouping is Σ numerator / Σ denominator and
never an average of ratios. Observations with a zero denominator are not emitted (they add
nothing to a rate).

Memory-set metrics (`human_feedback_scope`, `harmful_retrieval` and the per-construct ones) are
observed only where the memory contract applies; the outcome-based ones everywhere, so B0 has a
rate to compare with.

Per oracle label active in the session (label types as packs write them):
- `contradiction_repair` (contradiction): 1/1 when the session resolved, else 0/1;
- `repeated_error` (repeated-error-opportunity): 1/1 when it did not resolve (the labelled error
  recurred), else 0/1;
- `human_feedback_use` (human-feedback): 1/1 when a memory learned from the feedback was
  injected and the session resolved (retrieved and reflected in the patch), else 0/1;
- `human_feedback_scope` (human-feedback): injected feedback memories whose scope matches the
  task scope / injected feedback memories that record a scope (needs a `task_scope` label);
- `harmful_retrieval` (harmful-retrieval): 1/1 when a memory learned from the harmful evidence
  was injected, else 0/1.
- `commission_trip` (commission-check): 1/1 when one of the label's oracle cases (the tests that
  the trap's bad behaviour is absent) failed, else 0/1;
- `omission_trip` (omission-check): 1/1 when one of its cases (the tests that the required
  behaviour is present) failed, else 0/1. A declared case the verdict does not list counts as
  failed (it was not shown to pass); a session without a verdict observes neither.
Per construct (the run's construct, from RunStarted):
- `irrelevant_import`: injected memories neither relevant nor stale / injected memories;
- `stale_activation`: 1/1 when a stale memory was injected, out of sessions where one existed;
- `stale_use`: cited stale memories / injected stale memories;
- `overscope`: injected scoped memories whose scope misses the task scope / injected scoped
  memories (needs a `task_scope` label);
- `useful_memory_precision` (the paper's UsefulMemoryPrecision, Σ|U|/Σ|R|): injected memories
  learned from relevant evidence / injected memories;
- `scope_accuracy` (ScopeAccuracy): injected memories whose scope matches the task scope /
  injected memories (needs a `task_scope` label; a memory that records no scope does not match);
- `memory_bloat` (MemoryBloat, "total memory tokens / useful memory tokens"): memories held when
  the session began / useful (relevant) memories held — counted in memories, not tokens, because
  the evidence carries no per-memory size; lower is better, 1 is no bloat.
A memory's scope matches the task scope when one of its paths equals, contains or lies under
one of the task's paths.

`METRICS` lists every metric with its direction: the report's hygiene panel shows each, so a
metric no session observed is visible as a zero denominator instead of missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from membench.processors.contract import Attribution
from membench.processors.evidence import SessionEvidence
from membench.processors.failure import Classification
from membench.schemas.derived import DerivedEvent, UnitKey, make_derived


# metric -> which direction is better ("lower" or "higher"), in the report's order
METRICS: dict[str, str] = {
    "stale_use": "lower", "stale_activation": "lower", "overscope": "lower", "irrelevant_import": "lower",
    "contradiction_repair": "higher", "repeated_error": "lower", "human_feedback_use": "higher",
    "human_feedback_scope": "higher", "harmful_retrieval": "lower", "useful_memory_precision": "higher",
    "scope_accuracy": "higher", "memory_bloat": "lower", "commission_trip": "lower", "omission_trip": "lower",
}
CHECK_METRICS = {"commission-check": "commission_trip", "omission-check": "omission_trip"}


@dataclass(frozen=True)
class Observation:
    metric: str
    numerator: int
    denominator: int
    label_id: str | None = None


def _in_scope(scope: tuple[str, ...], task: tuple[str, ...]) -> bool:
    def under(a: str, b: str) -> bool:
        return a == b or a.startswith(b.rstrip("/") + "/")
    return any(under(s, t) or under(t, s) for s in scope for t in task)


def observations(ev: SessionEvidence, att: Attribution, resolved: bool) -> list[Observation]:
    injected = set(att.injected)
    out: list[Observation] = []
    task_scope = ev.task_scope()
    memory_metrics = att.applicable  # memory-set metrics judge learned memories only (see membench.processors.contract)
    for label in ev.active_labels():
        from_label = ev.memories_from(label.event_ids) & injected
        if label.label_type == "contradiction":
            out.append(Observation("contradiction_repair", int(resolved), 1, label.label_id))
        elif label.label_type == "repeated-error-opportunity":
            out.append(Observation("repeated_error", int(not resolved), 1, label.label_id))
        elif label.label_type == "human-feedback":
            out.append(Observation("human_feedback_use", int(bool(from_label) and resolved), 1, label.label_id))
            scoped = [m for m in from_label if ev.memories[m].scope]
            if memory_metrics and task_scope:
                in_scope = sum(1 for m in scoped if _in_scope(ev.memories[m].scope, task_scope))
                out.append(Observation("human_feedback_scope", in_scope, len(scoped), label.label_id))
        elif label.label_type == "harmful-retrieval" and memory_metrics:
            out.append(Observation("harmful_retrieval", int(bool(from_label)), 1, label.label_id))
        elif label.label_type in CHECK_METRICS and ev.verdict is not None and label.fact_ids:
            outcomes = {c["case_id"].split("[", 1)[0]: c["outcome"] for c in ev.verdict.get("cases", [])}
            tripped = any(outcomes.get(case) != "pass" for case in label.fact_ids)
            out.append(Observation(CHECK_METRICS[label.label_type], int(tripped), 1, label.label_id))
    if not memory_metrics:
        return [o for o in out if o.denominator > 0]
    known = [m for m in att.injected if m in ev.memories]
    out.append(Observation("irrelevant_import", att.irrelevant_injection, len(injected)))
    if att.stale:
        out.append(Observation("stale_activation", int(bool(att.stale & injected)), 1))
    out.append(Observation("stale_use", att.stale_used, len(att.stale & injected)))
    if task_scope:
        scoped = [m for m in known if ev.memories[m].scope]
        out.append(Observation("overscope", sum(1 for m in scoped if not _in_scope(ev.memories[m].scope, task_scope)),
                               len(scoped)))
        out.append(Observation("scope_accuracy", len(scoped) - out[-1].numerator, len(known)))
    out.append(Observation("useful_memory_precision", len(injected & att.relevant), len(injected)))
    out.append(Observation("memory_bloat", len(ev.memories), len(att.relevant)))
    return [o for o in out if o.denominator > 0]


def hygiene_events(key: UnitKey, ev: SessionEvidence, att: Attribution, verdict: Classification,
                   construct: str | None, family: str | None) -> list[DerivedEvent]:
    """A task session's HygieneObservations (none for an excluded session)."""
    if verdict.excluded:
        return []
    out = []
    for o in observations(ev, att, verdict.resolved):
        fields = {"session_index": ev.session_index, "scored": ev.scored, "construct": construct,
                  "family": family, "metric": o.metric, "label_id": o.label_id,
                  "numerator": o.numerator, "denominator": o.denominator}
        out.append(make_derived(key, "HygieneObservation", ev.source_seq, fields, ev.session_index, o.metric,
                                o.label_id or ""))
    return out
