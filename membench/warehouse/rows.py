"""Derived-table rows as frozen dataclasses: GENERATED from the DDL of derived.v6 by
`python -m membench.warehouse.row_types` (see that module); do not edit by hand."""

from dataclasses import dataclass

DERIVED_SCHEMA_VERSION = 6


@dataclass(frozen=True)
class SessionVerdictRow:
    """A row of `session_results` (`SessionVerdict`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    session_index: int
    scored: bool
    passed: bool
    outcome: str
    oracle_id: str | None
    excluded: bool
    exclusion_reason: str | None
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    tool_calls: int
    patch_invocations: int
    memory_reads: int
    memory_tokens_admitted: int
    compactions: int
    duration_ms: int


@dataclass(frozen=True)
class RunSummaryRow:
    """A row of `run_results` (`RunSummary`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    status: str
    error_type: str | None
    sessions: int
    scored_passed: bool
    excluded: bool
    exclusion_reason: str | None
    events: int
    last_hash: str
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    tool_calls: int
    patch_invocations: int
    memory_reads: int
    memory_tokens_admitted: int
    compactions: int
    duration_ms: int


@dataclass(frozen=True)
class FailureClassifiedRow:
    """A row of `failures` (`FailureClassified`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    session_index: int
    scored: bool
    resolved: bool
    excluded: bool
    failure_reason: str | None
    rule: str | None
    memory_failure: bool
    oracle_outcome: str


@dataclass(frozen=True)
class MemoryContractRow:
    """A row of `memory_contracts` (`MemoryContract`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    session_index: int
    scored: bool
    memory_contract_status: str
    runtime_contract_failure: bool
    runtime_contract_failure_reason: str | None
    injected_memory_ids: tuple[str, ...]
    cited_memory_ids: tuple[str, ...]
    relevant_memory_ids: tuple[str, ...]
    stale_memory_ids: tuple[str, ...]
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


@dataclass(frozen=True)
class HygieneObservationRow:
    """A row of `hygiene_observations` (`HygieneObservation`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    session_index: int
    scored: bool
    construct: str | None
    family: str | None
    metric: str
    label_id: str | None
    numerator: int
    denominator: int


@dataclass(frozen=True)
class TransferResultRow:
    """A row of `transfer_results` (`TransferResult`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    excluded: bool
    exclusion_reason: str | None
    cases: int
    applicable: int
    passed: int
    failed: int
    errored: int
    blocked: int
    ccpf: float | None
    raw_score: float
    weighted_score: float
    caps_fired: tuple[str, ...]
    cap_reasons: tuple[str, ...]
    all_cases_pass: bool
    public_check_passed: bool
    submission_digest: str | None
    skill_bank_digest: str | None
    agent_turns: int
    user_turns: int
    patch_invocations: int
    compactions: int
    lines_added: int
    agent_time_ms: int
    user_time_ms: int
    evaluation_time_ms: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int


@dataclass(frozen=True)
class TransferDimensionRow:
    """A row of `transfer_dimensions` (`TransferDimension`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    dimension: str
    title: str
    weight: float
    cases: int
    passed: int
    case_weight: float
    passed_weight: float
    score: float | None


@dataclass(frozen=True)
class TransferCaseRow:
    """A row of `transfer_cases` (`TransferCase`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    project: str
    case_id: str
    dimension: str
    weight: float
    prerequisites: tuple[str, ...]
    status: str
    applicable: bool
    blocked_by: tuple[str, ...]
    position: int
    duration_ms: int
    evidence_sha256: str


@dataclass(frozen=True)
class ModelUsageRow:
    """A row of `model_usages` (`ModelUsage`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    purpose: str
    calls: int
    priced_calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    latency_ms: int
    cost_usd: float
    priced_cost_usd: float


@dataclass(frozen=True)
class TransferHardCapRow:
    """A row of `transfer_hard_caps` (`TransferHardCap`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    cap_id: str
    cap: float
    cases: tuple[str, ...]
    invariant: str
    fired: bool


@dataclass(frozen=True)
class SkillBankRow:
    """A row of `skill_banks` (`SkillBank`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    bank: str
    digest: str
    files: int
    ablated_skill: str | None
    distiller: str | None


@dataclass(frozen=True)
class RunEndReasonRow:
    """A row of `run_end_reasons` (`RunEndReason`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    text: str


@dataclass(frozen=True)
class MemoryUseRow:
    """A row of `memory_uses` (`MemoryUse`)."""

    derived_id: str
    source_seq: int
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    harness_reads: int
    harness_tokens_read: int
    agent_memory_calls: int
    agent_tokens_read: int


# the row type of each derived table
ROW_TYPES: dict[str, type] = {
    'session_results': SessionVerdictRow,
    'run_results': RunSummaryRow,
    'failures': FailureClassifiedRow,
    'memory_contracts': MemoryContractRow,
    'hygiene_observations': HygieneObservationRow,
    'transfer_results': TransferResultRow,
    'transfer_dimensions': TransferDimensionRow,
    'transfer_cases': TransferCaseRow,
    'model_usages': ModelUsageRow,
    'transfer_hard_caps': TransferHardCapRow,
    'skill_banks': SkillBankRow,
    'run_end_reasons': RunEndReasonRow,
    'memory_uses': MemoryUseRow,
}
