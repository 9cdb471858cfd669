"""The per-session memory contract (docs/design.md §7; the coding-agent A/B benchmark's definitions).

Sets, all over memory ids of the session's memory system:
- injected: ids admitted by the session's MemoryRead events; cited: ids of its MemoryCitation events;
- relevant: memories (existing when the session began) learned from evidence a `required` label
  names; stale: learned from evidence a `forbidden` or `stale` label names (a memory may be both).

Counts and ratios, as that benchmark computes them:
- citation_precision = |cited ∩ injected| / |cited| (0 when nothing is cited);
- citation_recall = |cited ∩ relevant| / |relevant| (1 when nothing is relevant);
- stale_used = |cited ∩ stale|; irrelevant_injection = |injected − relevant − stale|;
  missing_relevant = |relevant − injected|;
- memory_helped = resolved ∧ recall > 0 ∧ stale_used = 0;
  memory_hurt = the failure reason is memory-specific ∨ stale_used > 0.

Applicability: the contract attributes memories the system learned from this run's trajectory.
It applies when the session read memory (a MemoryRead) and the memory system holds memories
written from the run's events (a MemoryWrite with provenance; a scored `remem` label's memories are
the ones its pack declares, membench/memory_systems/declared.py); otherwise it is `not_applicable`
— conditions without memory (B0, no_memory) and fixed-file baselines (curated_file), as the A/B
benchmark defines them, and a first session with nothing learned yet. Nor does it apply when the
agent could not act on what it received: it called a model and every call failed (a
harness that could not reach its model must not read as `ignored_memory`).

Where the contract does not apply, no memory failure reason is imputed either (membench/processors/failure.py:
the memory rules need an applicable contract — except the hallucination rule on the A/B benchmark's
own packs, as it publishes); citations made there are counted by the report as
`citations_without_memory` (membench/reports/failures.py).

Runtime contract failure is kept apart from task failure (a run can resolve the task and fail
its contract): where the contract applies, the first of `cited_never_injected`,
`stale_memory_used`, `memory_read_over_budget` that holds makes `memory_contract_status` =
`failed`. A not-applicable contract records no ids, no failure, helped = hurt = false.
"""

from __future__ import annotations

from dataclasses import dataclass

from membench.processors.evidence import RELEVANT_LABELS, STALE_LABELS, SessionEvidence

MEMORY_FAILURE_REASONS = frozenset({
    "agent_hallucinated_memory", "stale_memory_followed", "missing_memory", "ignored_memory",
    "irrelevant_memory_distracted",
})


@dataclass(frozen=True)
class Attribution:
    """The contract's sets and counts before the outcome is known (the failure rules use them)."""

    applicable: bool
    injected: tuple[str, ...]
    cited: tuple[str, ...]
    relevant: frozenset[str]
    stale: frozenset[str]
    relevant_evidence: frozenset[str]
    cited_injected: int
    cited_relevant: int
    stale_used: int
    irrelevant_injection: int
    missing_relevant: int
    hallucinated: tuple[str, ...]  # cited ids never injected

    @property
    def citation_precision(self) -> float | None:
        if not self.applicable:
            return None
        return self.cited_injected / len(self.cited) if self.cited else 0.0

    @property
    def citation_recall(self) -> float | None:
        if not self.applicable:
            return None
        return self.cited_relevant / len(self.relevant) if self.relevant else 1.0


def attribute(ev: SessionEvidence) -> Attribution:
    # the agent must have received the memory and been able to act on it: a session whose model calls
    # all failed (a misconfigured key the gateway could not prove, say) judges no memory
    applicable = ev.memory_read and any(m.evidence for m in ev.memories.values()) and ev.agent_could_act
    relevant_evidence = ev.evidence_of(RELEVANT_LABELS)
    relevant = ev.memories_from(relevant_evidence)
    stale = ev.memories_from(ev.evidence_of(STALE_LABELS))
    injected, cited = set(ev.injected_ids), set(ev.cited_ids)
    return Attribution(
        applicable=applicable, injected=ev.injected_ids, cited=ev.cited_ids, relevant=relevant, stale=stale,
        relevant_evidence=relevant_evidence,
        cited_injected=len(cited & injected), cited_relevant=len(cited & relevant), stale_used=len(cited & stale),
        irrelevant_injection=len(injected - relevant - stale), missing_relevant=len(relevant - injected),
        hallucinated=tuple(i for i in ev.cited_ids if i not in injected),
    )


def runtime_contract_failure(ev: SessionEvidence, att: Attribution) -> str | None:
    if not att.applicable:
        return None
    if att.hallucinated:
        return "cited_never_injected"
    if att.stale_used:
        return "stale_memory_used"
    if ev.reads_over_budget:
        return "memory_read_over_budget"
    return None


@dataclass(frozen=True)
class MemoryContract:
    memory_contract_status: str  # passed / failed / not_applicable
    runtime_contract_failure: bool
    runtime_contract_failure_reason: str | None
    injected_memory_ids: list[str]
    cited_memory_ids: list[str]
    relevant_memory_ids: list[str]
    stale_memory_ids: list[str]
    cited_injected_count: int
    cited_relevant_count: int
    citation_precision: float | None
    citation_recall: float | None
    stale_used_count: int
    irrelevant_injection_count: int
    missing_relevant_count: int
    memory_helped: bool
    memory_hurt: bool
    resolved: bool


def memory_contract(ev: SessionEvidence, att: Attribution, resolved: bool, failure_reason: str | None) -> MemoryContract:
    """The contract record; `resolved` and `failure_reason` come from the failure taxonomy."""
    failure = runtime_contract_failure(ev, att)
    if att.applicable:
        status = "failed" if failure else "passed"
        recall = att.citation_recall or 0.0
        helped = resolved and recall > 0 and att.stale_used == 0
        hurt = failure_reason in MEMORY_FAILURE_REASONS or att.stale_used > 0
    else:
        return MemoryContract("not_applicable", False, None, [], [], [], [], 0, 0, None, None, 0, 0, 0, False, False,
                              resolved)
    return MemoryContract(
        memory_contract_status=status, runtime_contract_failure=failure is not None,
        runtime_contract_failure_reason=failure,
        injected_memory_ids=list(att.injected), cited_memory_ids=list(att.cited),
        relevant_memory_ids=sorted(att.relevant), stale_memory_ids=sorted(att.stale),
        cited_injected_count=att.cited_injected, cited_relevant_count=att.cited_relevant,
        citation_precision=att.citation_precision, citation_recall=att.citation_recall,
        stale_used_count=att.stale_used, irrelevant_injection_count=att.irrelevant_injection,
        missing_relevant_count=att.missing_relevant, memory_helped=helped, memory_hurt=hurt, resolved=resolved,
    )
