"""The shape of `report.json`, the machine contract of a run set's report, as typed frozen dataclasses.

`membench.reports.build.build_report` returns a `Report`; `to_json(report)` is exactly what `report.json`
holds (fields in declaration order; a field marked `OMIT_IF_NONE` is left out while it is None).
Markdown and HTML render the `Report` itself; a `report.json` read back from disk with
`from_json(Report, …)` is the same value, so it renders the same.

Keys are added over time, never renamed. `docs/reports.md` carries the key reference generated
by `key_reference_markdown()` (`python -m membench.reports.model` prints it); a test checks they agree.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Union

from membench.analytics.gates import Gate

# A field that is absent from the JSON while its value is None (kept out so that older reports and
# their byte-exact copies stay what they were).
OMIT_IF_NONE = {"omit_if_none": True}

# The version of the report.json contract this code writes and the newest it reads. Raised when a
# change would make an older reader misread a report (a key's meaning or type changes); keys that
# are only added, which older readers refuse by name anyway, do not need it.
REPORT_SCHEMA_VERSION = 1

Interval = list[float | None]  # [low, high], both null when there is no valid cell


# ------------------------------------------------------------------------------------- per condition


@dataclass(frozen=True)
class BootstrapSettings:
    resamples: int
    seed: int
    level: float


@dataclass(frozen=True)
class Ratio:
    """A rate kept with its parts, so rates aggregate by summing numerators and denominators."""

    numerator: int
    denominator: int
    rate: float | None


@dataclass(frozen=True)
class MemoryContractSummary:
    status_counts: dict[str, int]
    runtime_failure_counts: dict[str, int]
    memory_helped: int
    memory_hurt: int
    citations_without_memory: int  # cells citing memory ids under a not_applicable contract (membench/reports/failures.py)


@dataclass(frozen=True)
class ConditionFailures:
    """What `membench.reports.failures` adds to a condition's entry."""

    failure_counts: dict[str, int]
    memory_failure_counts: dict[str, int]
    memory_contract: MemoryContractSummary
    hygiene: dict[str, Ratio]


@dataclass(frozen=True)
class CellSummary:
    cells: int
    valid: int
    passed: int
    pass_rate: float | None
    ci95: Interval
    # membench.reports.conventions: trap_cluster_bootstrap, or clopper_pearson_traps at 0/n and n/n; absent: no
    # valid cells (and in a report.json written before the key existed)
    ci_method: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class ConditionStrata:
    """What `membench.reports.hygiene` adds to a condition's entry."""

    by_construct: dict[str, CellSummary]
    clean_start: CellSummary
    continuation: CellSummary


@dataclass(frozen=True)
class PerCellAndPass:
    """A condition's total over its valid cells, per valid cell and per pass (null at 0 of either)."""

    total: float
    per_cell: float | None
    per_pass: float | None


@dataclass(frozen=True)
class ConditionEffort:
    """What a condition's valid cells spent (membench/reports/effort.py): tokens (input + output of the agent's
    and a model-driven memory's calls), USD of every ModelCall of the cells' runs (null when none was
    priced: scripted agents, a model without a price), wall time of the runs, and the tokens memory
    reads admitted into the prompt; the memory tools the agent called (membench/processors/memory_use.py)."""

    cells: int  # valid cells the figures cover
    passes: int
    sessions: int  # sessions of those cells' runs
    tokens: PerCellAndPass
    cost_usd: PerCellAndPass | None
    priced_calls: int  # ModelCalls of those runs whose price-table entry is known
    wall_time_s: PerCellAndPass
    memory_tokens_read: int  # sum of MemoryRead.tokens_admitted
    memory_tokens_per_session: float | None  # memory_tokens_read / sessions
    # the agent's memory tool calls (MemoryUse.agent_memory_calls; null when a cell's run has no MemoryUse row)
    memory_calls: int | None = None
    memory_calls_per_session: float | None = None  # memory_calls / sessions
    passes_per_memory_call: float | None = None  # passes / memory_calls; null with no call


@dataclass(frozen=True)
class PassHatK:
    """Repeated-run reliability (membench/analytics/reliability.py): the share of complete traps (a valid cell
    under every one of the run set's k seeds) passed under every seed; traps with a missing or
    excluded seed are left out and counted in `incomplete`."""

    k: int
    traps: int
    complete: int
    passed: int
    incomplete: int
    value: float | None


@dataclass(frozen=True)
class ConditionSummary:
    condition: str
    cells: int
    passed: int
    pass_rate: float | None
    ci95: Interval
    excluded: int
    bootstrap: BootstrapSettings
    failure_counts: dict[str, int]
    memory_failure_counts: dict[str, int]
    memory_contract: MemoryContractSummary
    hygiene: dict[str, Ratio]
    by_construct: dict[str, CellSummary]
    clean_start: CellSummary
    continuation: CellSummary
    ci_method: str | None = field(default=None, metadata=OMIT_IF_NONE)  # which interval ci95 is (CellSummary)
    # cost and reliability beside the pass rate; a report.json written before has neither key
    pass_hat_k: PassHatK | None = field(default=None, metadata=OMIT_IF_NONE)
    effort: ConditionEffort | None = field(default=None, metadata=OMIT_IF_NONE)


# ------------------------------------------------------------------------------------- top level


@dataclass(frozen=True)
class Inputs:
    events: int
    pack_digest: str | list[str]  # one digest, or the sorted digests when a run set mixes packs
    # the run set's log root (membench/schemas/log_root.py: SHA-256 over its runs' final chain hashes, 64 hex
    # characters), recomputed from the warehouse; reports built before logs had roots
    # have no key
    log_root: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class LadderEntry:
    condition: str
    pass_rate: float | None
    ci95: Interval
    passed: int
    valid: int
    rank: int
    ci_method: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class Stratum:
    traps: int
    pass_rate: dict[str, float | None]  # condition -> pass rate


@dataclass(frozen=True)
class Strata:
    constructs: dict[str, Stratum]
    clean_start: Stratum
    continuation: Stratum


@dataclass(frozen=True)
class HeadroomOverall(Gate):
    preferred_threshold: float
    preferred_passed: bool


@dataclass(frozen=True)
class ExclusionGate(Gate):
    reasons: dict[str, int]  # exclusion reason -> cells
    # exclusion reason -> the first excluded run's own words (the model's, the memory
    # adapter's, the sandbox's: its run-level system Turn), bounded and redacted
    examples: dict[str, str] | None = field(default=None, metadata=OMIT_IF_NONE)
    # exclusion reason -> the unit id of that example's run, so report.html can link to it
    example_units: dict[str, str] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class HeadroomGates:
    overall: HeadroomOverall | None
    by_construct: dict[str, Gate]
    passed: bool
    failing_constructs: list[str]
    note: str | None = field(default=None, metadata=OMIT_IF_NONE)
    # constructs whose trap runs the other way (C9, C10), left out of `overall` and
    # `by_construct` and gated apart (B0 must pass them, direction "min")
    reversed: dict[str, Gate] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class StratumGate:
    """One construct stratum's validity (membench.analytics.gates.stratum_validity; DreamBench-SWE Table 10)."""

    reversed: bool
    max_condition: str | None
    max_rate: Gate
    spread: Gate
    b0_rate: Gate
    passed: bool


@dataclass(frozen=True)
class ContinuationAudit(Gate):
    """Valid cells whose sessions all started as the design says / valid cells (required: all)."""

    continuation_cells: int  # valid cells whose scored session inherited the previous session's tree
    inherited_failed: int  # of those, cells whose previous session had not passed its oracle
    findings: list[str]  # "<trap> <condition> seed <n>: <what is wrong>", the first 20


@dataclass(frozen=True)
class ExclusionBalanceGate:
    """A condition's exclusion rate against the baseline's (membench.analytics.gates.exclusion_balance),
    with both sides' exclusions by reason."""

    condition: str
    baseline: str
    excluded: int
    cells: int
    baseline_excluded: int
    baseline_cells: int
    rate: float | None
    baseline_rate: float | None
    p_value: float | None  # Fisher's exact two-sided p (null: a side without cells)
    min_attainable_p: float | None  # the smallest p these margins allow
    alpha: float
    rule: str  # fisher_exact / any_difference / no_exclusions / no_cells
    differs: bool
    passed: bool
    reasons: dict[str, int]  # the condition's excluded cells by reason
    baseline_reasons: dict[str, int]


@dataclass(frozen=True)
class ValidityGates:
    baseline: str  # the study's baseline (membench.reports.study.resolve_baseline)
    traps: int
    seeds: int
    b0_headroom: HeadroomGates
    exclusions: dict[str, ExclusionGate]
    paired_coverage: dict[str, Gate]  # "<condition> vs <baseline>" -> gate
    passed: bool
    # the remaining gates, and every gate's verdict by name (absent from older report.json files)
    stratum_validity: dict[str, StratumGate] | None = field(default=None, metadata=OMIT_IF_NONE)
    warmup: Gate | None = field(default=None, metadata=OMIT_IF_NONE)
    continuation_audit: ContinuationAudit | None = field(default=None, metadata=OMIT_IF_NONE)
    verdicts: dict[str, bool] | None = field(default=None, metadata=OMIT_IF_NONE)
    # gate family -> the condition it is measured on or against: B0 by the paper's definition, or
    # `baseline` (the study's) for the per-comparison gates
    reference: dict[str, str] | None = field(default=None, metadata=OMIT_IF_NONE)
    # "<condition> vs <baseline>" -> whether its exclusion rate differs from the baseline's
    exclusion_balance: dict[str, ExclusionBalanceGate] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class HygieneRate:
    """One hygiene metric over the run set's scored sessions, and per condition."""

    direction: str  # "lower" or "higher" is better
    numerator: int
    denominator: int
    rate: float | None
    conditions: dict[str, Ratio]  # conditions that observed it


@dataclass(frozen=True)
class MonteCarloSignFlip:
    """How a Monte Carlo p_clustered was drawn, and how close it is to the exact p."""

    draws: int
    seed: int
    extreme_draws: int
    p_ci95: list[float]  # Clopper–Pearson interval of the exact p
    work: int  # k · S of the exact programme this replaced
    exact_max_work: int


@dataclass(frozen=True)
class ComparisonEntry:
    """One registered comparison; the fields `membench stats compare` prints (membench.analytics.export)."""

    a: str
    b: str
    D: int
    discordant_a: int
    discordant_b: int
    units: int
    paired_cells: int
    p_clustered: float | None
    p_mcnemar: float | None
    p_majority: float | None
    p_per_seed: dict[str, float | None]
    p_holm: float
    clustered_method: str  # "exact", or "monte_carlo" beyond the exact test's bound (membench/analytics/exact.py)
    clustered_monte_carlo: MonteCarloSignFlip | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class ComparisonFamily:
    baseline: str | None
    alpha: float
    test: str
    comparisons: list[ComparisonEntry]
    family_size: int


@dataclass(frozen=True)
class HolmTest:
    """One test of one registered comparison: raw p, Holm-adjusted within its family (unavailable
    slots at p = 1), and whether the adjusted p is below the family's alpha."""

    p: float | None
    p_holm: float
    rejected: bool


@dataclass(frozen=True)
class EffectSize:
    """Paired pass-rate difference Δ = (discordant_a − discordant_b) / paired_cells (A − B), with a
    trap-cluster percentile bootstrap interval (membench/analytics/effects.py)."""

    difference: float | None
    ci95: Interval
    paired_cells: int
    discordant_a: int
    discordant_b: int
    bootstrap: BootstrapSettings


@dataclass(frozen=True)
class DetectableDifference:
    """The paired pass-rate difference Δ at which the exact trap-clustered test rejects with
    probability `power` at the family's alpha, when `differing` of `traps` paired traps (`seeds`
    paired seeds each) differ, q the smallest share of them favouring one side that reaches `power`
    (membench/analytics/effects.py): `one_discordant_seed` = differing / (traps · seeds) · (2q − 1), each
    differing trap differing in one seed (the smallest Δ), `all_seeds_alike` = differing / traps ·
    (2q − 1), in all of them (the largest); null when no split of `differing` traps can reject."""

    power: float
    traps: int
    differing: int
    seeds: int
    q: float | None
    one_discordant_seed: float | None
    all_seeds_alike: float | None


@dataclass(frozen=True)
class DesignPower:
    """The exact sign test's power with `units` equal-weight trap clusters (DreamBench-SWE Appendix
    E.6): `threshold` winning traps reject at `alpha`; `by_q` q -> chance of reaching it when each
    trap favours one side with probability q."""

    units: int
    alpha: float
    threshold: int | None
    p_at_threshold: float | None
    by_q: dict[str, float | None]
    # the minimum detectable difference at 80 % power (membench/analytics/effects.py): when every paired trap
    # differs, then for the differing traps observed (a count that says nothing of direction)
    detectable: list[DetectableDifference]


@dataclass(frozen=True)
class FamilyComparison:
    a: str
    b: str
    available: bool  # false: a condition has no cells in the run set (kept in the family at p = 1)
    D: int | None
    units: int | None
    paired_cells: int | None
    effect: EffectSize | None
    power: DesignPower | None
    tests: dict[str, HolmTest]  # clustered, mcnemar, majority (those the family registers)
    per_seed: dict[str, HolmTest] | None  # seed -> per-seed McNemar, Holm within that seed's family
    # the primary test's verdict (ComparisonFamilies.primary_test), whether the family registers it or
    # not: a secondary test's rejection is never shown without it (alone it would read as a finding the
    # primary test does not support)
    primary: HolmTest | None = field(default=None, metadata=OMIT_IF_NONE)
    # this pair's own paired-coverage gate (traps with >= 2 paired valid seeds, the 90 % rule of
    # validity_gates.paired_coverage), so a pair without the baseline is judged by it too
    paired_coverage: Gate | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class RegisteredFamily:
    name: str
    role: str  # primary or sensitivity (a study's), or secondary (membench's all_pairs)
    alpha: float
    tests: list[str]
    family_size: int
    comparisons: list[FamilyComparison]


@dataclass(frozen=True)
class ComparisonFamilies:
    baseline: str | None
    baseline_source: str  # how the baseline was chosen: --baseline, the study file, B0 / no_memory present
    study: str  # the study file's name, or "default"
    families: list[RegisteredFamily]
    # the test whose verdict decides a comparison (DreamBench-SWE: the exact trap-clustered sign-flip);
    # the others are secondary (sensitivity) views
    primary_test: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class ComparisonVerdict:
    """One comparison of one registered family in a line a reader can quote
    (membench/reports/comparison_verdicts.py): the primary test's raw and Holm p within the family, the effect
    with its CI, and whether the validity gates let it be published. `status`: `publishable`, `not_publishable` (`invalidated_by`
    names each failed gate that invalidates it, with its numbers), `unavailable` (a side has no
    cells: p = 1, not a finding) or `no_gates` (a transfer study: no validity gates are defined)."""

    a: str
    b: str
    family: str
    role: str
    family_size: int
    test: str
    alpha: float
    difference: float | None
    ci95: Interval
    p: float | None
    p_holm: float
    rejected: bool
    status: str
    invalidated_by: list[str]
    line: str


@dataclass(frozen=True)
class CostPerSuccess:
    total_cost: float
    successes: int
    runs: int
    value: float | None


@dataclass(frozen=True)
class ConditionResources:
    runs: int
    successes: int
    mean: dict[str, float | None]  # metric -> per-run mean over valid runs
    total: dict[str, float]
    cost_per_success: CostPerSuccess
    reduction_vs_baseline: dict[str, float | None] | None  # null for the baseline itself


@dataclass(frozen=True)
class Resources:
    baseline: str | None
    runs: str  # which runs the figures cover, in words
    cost: str  # what cost means here, in words
    conditions: dict[str, ConditionResources]


@dataclass(frozen=True)
class SuiteIsolation:
    """How a suite's verdicts were isolated from the code under test (docs/sandbox.md): `process`
    when every oracle ran in a separate sandboxed process from it, `in_process` when any verdict
    came from a process that also ran it (score commands of imported packs; logs before event v3)."""

    suite: str
    oracle_isolation: str
    verdicts: int  # the OracleVerdict events the statement rests on


@dataclass(frozen=True)
class OutcomeMatrix:
    """Every cell of the grid: condition -> trap -> seed -> `pass`, `fail`, or the reason the cell is
    not valid (isolation_unavailable, harness_error, abandoned, ...); a (trap, seed) a condition
    never ran is absent."""

    traps: list[str]
    seeds: list[str]
    conditions: dict[str, dict[str, dict[str, str]]]


@dataclass(frozen=True)
class MemoryPolicy:
    """A condition's memory policy: `model_free` (deterministic) or `model_driven` (its sleep and judge
    steps call `memory_model` through the model gateway: RunStarted.memory_model, event v6), and the
    ModelCall events those steps made (`purpose` sleep / judge), whose tokens and USD are part of the
    condition's totals (TotalTokens = wake + sleep + judge)."""

    policy: str  # model_free | model_driven
    memory_model: str | None
    sleep_calls: int
    judge_calls: int
    input_tokens: int  # over the sleep and judge calls, and a memory library's embed calls
    output_tokens: int
    cost_usd: float  # over the priced sleep, judge and embed calls


@dataclass(frozen=True)
class RunProvenance:
    """What produced the run set, from its RunStarted events (each list sorted, distinct)."""

    agents: list[str]
    agent_kinds: list[str]
    models: list[str]  # models named at run start (real agents); empty for scripted agents
    code_digests: list[str]  # SHA-256 of membench's code that ran the units
    pack_digests: list[str]
    seeds: list[int]
    conditions: list[str]
    runs: int  # RunStarted events (attempts included)
    # condition -> its memory policy (absent in reports written before it existed)
    memory_policies: dict[str, MemoryPolicy] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class ConditionCost:
    model_calls: int
    priced_calls: int  # calls whose price-table entry (`price`) is known
    cost_usd: float  # sum over the priced calls
    successes: int  # passed valid cells
    cost_per_success_usd: float | None


@dataclass(frozen=True)
class CostUsd:
    """USD cost from the run set's ModelCall events (event v4, the gateway's price table). `status`:
    `recorded` when at least one call carries cost_usd, `unpriced` when calls carry none, `no_model_calls`
    when the run set made none (scripted agents)."""

    status: str
    model_calls: int
    priced_calls: int
    cost_usd: float
    conditions: dict[str, ConditionCost]


@dataclass(frozen=True)
class CanaryHit:
    """A leak: a secret in a report, or in an agent-visible event of another trap's run."""

    secret: str  # the secret's name (never its value) and its trap
    trap: str
    where: str  # "event <run_id> seq <n> (<kind>)" or "report <file>"
    run_trap: str | None  # the trap of the run the event belongs to (None for a report)


@dataclass(frozen=True)
class CanarySearch:
    agent_visible_events: int
    agent_visible_bytes: int
    reports: list[str]  # files searched (report.json, report.md, report.html)
    report_bytes: int
    # scored diffs stored as blobs beside the log (over 64 KiB): searched, their bytes, unreadable ones
    blobs: int | None = field(default=None, metadata=OMIT_IF_NONE)
    blob_bytes: int | None = field(default=None, metadata=OMIT_IF_NONE)
    blobs_missing: int | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class CanaryProof:
    """Every secret of the run set's pack searched for in every agent-visible event (warehouse) and in
    the rendered reports. `status`: `pass` (no leak), `fail` (a leak), `no_secrets` (the pack has
    none), `not_run` (the pack's secrets are not available here: `reason`)."""

    status: str
    reason: str | None
    pack: str | None  # the finalized pack searched for (its directory name)
    secrets: int
    searched: CanarySearch | None
    own_trap_hits: int  # expected, not leaks: the trap's own evidence, memory reads and patches
    leaks: int
    hits: list[CanaryHit]  # every leak


@dataclass(frozen=True)
class RefusedTrap:
    """A trap `membench validate` refused that the run set measured anyway (`run --include-refused`)."""

    seq_id: str
    first_failure: str | None  # "gate: detail", as validate recorded it


@dataclass(frozen=True)
class AdmissionFunnel:
    """`membench validate`'s funnel for the run set's pack: `status` `validated` (with the counts and
    where they were read) or `not_validated` (no validation recorded for this finalized pack).
    `refused_measured`: the refused traps the run set has runs of (absent when there are none), which
    the renderings state above every number."""

    status: str
    source: str | None
    authored: int | None
    valid: int | None
    admitted: int | None
    refused_measured: list[RefusedTrap] | None = field(default=None, metadata=OMIT_IF_NONE)


CONFORMANCE_UNAVAILABLE = "conformance-unavailable, not an observed loss"


@dataclass(frozen=True)
class ConformanceEntry:
    """One registered condition in the conformance funnel (`membench memory check`):
    `status` built_in (conformant by membench's tests), conformant, failed, missing (no record for
    the configuration), budget_spent (no record for it and the repair budget is spent without a
    pass: `record` is the attempt that spent it), changed (its last passing record is of other
    code, versions or model) or unknown (not a memory system of this installation); `label` is
    CONFORMANCE_UNAVAILABLE for a registered condition that was not evaluated for that reason."""

    condition: str
    status: str
    conformant: bool
    evaluated: bool
    failed_gates: list[str]
    record: str | None
    label: str | None


@dataclass(frozen=True)
class ConformanceFunnel:
    """registered (run or named in a registered family) -> conformant -> evaluated (has runs)."""

    registered: int
    conformant: int
    evaluated: int
    conditions: list[ConformanceEntry]


@dataclass(frozen=True)
class TransferDimensionScore:
    """One evaluator dimension (A–E) of a project under a condition, over its non-excluded runs."""

    dimension: str
    title: str
    weight: float
    cases: int  # applicable case-runs
    passed: int
    score_mean: float | None  # mean over runs of passed case weight / applicable case weight


@dataclass(frozen=True)
class TransferProjectRow:
    project: str
    condition: str
    runs: int
    excluded: int
    exclusion_reasons: dict[str, int]
    passed: int  # case-runs
    applicable: int
    ccpf_micro: float | None  # Σ passed / Σ applicable over the runs (membench/analytics/ccpf.py)
    ccpf_macro: float | None  # mean of per-run CCPFs
    weighted_score_mean: float | None  # after hard caps
    raw_score_mean: float | None
    all_cases_pass_runs: int
    caps_fired: list[str]  # every cap that fired in any run
    cap_reasons: list[str]
    dimensions: list[TransferDimensionScore]
    # hard caps whose manifest entry lists no case and cases.json maps none: they can never fire
    caps_without_cases: list[str] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class TransferConditionRow:
    condition: str
    runs: int
    excluded: int
    ccpf_micro: float | None  # pooled over every project's case-runs
    ccpf_macro_over_projects: float | None  # mean of the per-project micro CCPFs
    weighted_score_mean: float | None
    resources: dict[str, float | None]  # metric -> per-run mean over non-excluded runs
    reduction_vs_baseline: dict[str, float | None] | None  # (baseline - this) / baseline; null for the baseline


@dataclass(frozen=True)
class TransferBank:
    seed: int
    bank: str  # learned / ablated / native
    digest: str
    files: int
    ablated_skill: str | None
    distiller: str | None = None  # who wrote a learned bank: scripted / agent (None: native bank, or an event v5 log)


@dataclass(frozen=True)
class TransferSection:
    """EngramBench's transfer protocol (docs/transfer.md): hidden-evaluator results per project and condition."""

    baseline: str | None
    projects: list[TransferProjectRow]
    conditions: list[TransferConditionRow]
    banks: list[TransferBank]


@dataclass(frozen=True)
class PartialRun:
    """A run stopped before its grid finished: its cells are what ran, not the design."""

    reason: str
    units_planned: int  # the units this invocation had to run
    units_not_started: int
    attempts_abandoned: int  # attempts cut short, closed RunEnded{abandoned} (retried on resume)
    resume: str  # the command that resumes the run set


@dataclass(frozen=True)
class LogVerification:
    """The replay of the run set's log at the end of the `membench run`, `score` or `transfer` that
    wrote this report: the checks of `membench replay runs/<run_set>/events.avro --verify` (hash
    chains, scored diffs, the processors' folds and their dead letters, re-derived events against the
    warehouse, the root against log_root.json). A report with `verified` false comes from a log that
    does not verify: its numbers are not to be used (the command exited 1)."""

    verified: bool
    events: int
    runs: int
    derived: int  # events the processors re-derived
    compared: int  # of those, compared with the warehouse
    findings: int
    dead_letters: int  # events the processors rejected (findings "processor rejected the event: …")
    first_finding: str | None  # as replay prints it: "run RUN seq N: reason"


@dataclass(frozen=True)
class Report:
    run_set: str
    suite: str
    agent: str
    conditions: list[ConditionSummary]
    inputs: Inputs
    hygiene_by_construct: dict[str, dict[str, dict[str, Ratio]]]  # condition -> construct -> metric
    ladder: list[LadderEntry]
    strata: Strata
    validity_gates: ValidityGates
    comparisons: ComparisonFamily
    resources: Resources
    # absent from a report.json written before suites were recorded
    suites: list[SuiteIsolation] | None = field(default=None, metadata=OMIT_IF_NONE)
    # registered families, the outcome matrix, provenance, USD cost, canary proof, admission
    # funnel; a report.json written before has none of these keys
    families: ComparisonFamilies | None = field(default=None, metadata=OMIT_IF_NONE)
    outcome_matrix: OutcomeMatrix | None = field(default=None, metadata=OMIT_IF_NONE)
    provenance: RunProvenance | None = field(default=None, metadata=OMIT_IF_NONE)
    cost_usd: CostUsd | None = field(default=None, metadata=OMIT_IF_NONE)
    canary: CanaryProof | None = field(default=None, metadata=OMIT_IF_NONE)
    admission: AdmissionFunnel | None = field(default=None, metadata=OMIT_IF_NONE)
    # only run sets of a transfer study (membench transfer) have one
    transfer: TransferSection | None = field(default=None, metadata=OMIT_IF_NONE)
    # every hygiene metric, in a fixed order, observed or not (a zero denominator shows it)
    hygiene_panel: dict[str, HygieneRate] | None = field(default=None, metadata=OMIT_IF_NONE)
    # set when `membench run` was stopped before its grid finished
    partial: PartialRun | None = field(default=None, metadata=OMIT_IF_NONE)
    # set when a registered condition is a library, external or plug-in memory system
    conformance: ConformanceFunnel | None = field(default=None, metadata=OMIT_IF_NONE)
    # one verdict per comparison of every registered family, in family order
    # (membench/reports/comparison_verdicts.py)
    verdicts: list[ComparisonVerdict] | None = field(default=None, metadata=OMIT_IF_NONE)
    # the comparisons asked with --compare A:B, each read as asked from the first family that
    # registers the pair (status `unavailable`, family `none`, when none does)
    requested: list[ComparisonVerdict] | None = field(default=None, metadata=OMIT_IF_NONE)
    # set by the command that ran the grid, from the replay of the log it wrote
    verification: LogVerification | None = field(default=None, metadata=OMIT_IF_NONE)
    # the contract version it was written under (REPORT_SCHEMA_VERSION); absent from reports written
    # before the contract was versioned, which read as they are
    schema_version: int | None = field(default=None, metadata=OMIT_IF_NONE)


# ------------------------------------------------------------------------------------- JSON form


def to_json(value: Any) -> Any:
    """The JSON form of a model value: dataclasses as objects in field order, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is None and f.metadata.get("omit_if_none"):
                continue
            out[f.name] = to_json(item)
        return out
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    return value


class ReportShapeError(ValueError):
    """A JSON document that does not have the declared shape; the message names the key path."""


def from_json(tp: Any, value: Any, path: str = "report") -> Any:
    """Read a JSON value into model type `tp` (e.g. `from_json(Report, json.load(f))`), strictly: a
    missing or unknown key, or a value of another JSON type, raises ReportShapeError naming its path."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        for option in sorted(options, key=lambda o: not dataclasses.is_dataclass(o)):
            try:
                return from_json(option, value, path)
            except ReportShapeError:
                continue
        raise ReportShapeError(f"{path}: {value!r:.60} is not {_describe(tp)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ReportShapeError(f"{path}: expected an object, got {type(value).__name__}")
        if tp is Report:
            _check_schema_version(value, path)
        hints = typing.get_type_hints(tp, vars(sys.modules[tp.__module__]))
        fields = {f.name: f for f in dataclasses.fields(tp)}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise ReportShapeError(f"{path}: unknown key(s) {', '.join(unknown)}")
        kwargs = {}
        for name, f in fields.items():
            if name not in value:
                if f.metadata.get("omit_if_none"):
                    continue
                raise ReportShapeError(f"{path}: missing key '{name}'")
            kwargs[name] = from_json(hints[name], value[name], f"{path}.{name}")
        return tp(**kwargs)  # type: ignore[operator]  # a dataclass type (is_dataclass above)
    if origin is dict:
        if not isinstance(value, dict):
            raise ReportShapeError(f"{path}: expected an object, got {type(value).__name__}")
        item = typing.get_args(tp)[1]
        return {key: from_json(item, v, f"{path}.{key}") for key, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise ReportShapeError(f"{path}: expected a list, got {type(value).__name__}")
        item = typing.get_args(tp)[0]
        return [from_json(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if tp is type(None):
        ok = value is None
    elif tp is float:  # JSON does not tell 1 from 1.0
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    if not ok:
        raise ReportShapeError(f"{path}: expected {_describe(tp)}, got {value!r:.60}")
    return value


def _check_schema_version(document: dict[str, Any], path: str) -> None:
    """A report written under a newer contract is refused before its keys are read: its unknown or
    changed keys would otherwise be reported one by one, or read with an older meaning."""
    version = document.get("schema_version")
    if version is None:
        return
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ReportShapeError(f"{path}.schema_version: expected a positive integer, got {version!r:.60}")
    if version > REPORT_SCHEMA_VERSION:
        raise ReportShapeError(f"{path}.schema_version: {version} is newer than this membench reads "
                               f"(report.json schema version {REPORT_SCHEMA_VERSION} or older); "
                               "read it with the membench that wrote it, or a newer one")


def shallow_fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields as keyword arguments (not converted), to compose a larger model."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


# ------------------------------------------------------------------------------------- key reference


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is type(None):
        return "null"
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(tp))
    if origin is dict:
        value = typing.get_args(tp)[1]
        return "object" if dataclasses.is_dataclass(value) else f"object: * → {_grouped(value)}"
    if origin is list:
        item = typing.get_args(tp)[0]
        return "list" if dataclasses.is_dataclass(item) else f"list of {_grouped(item)}"
    if dataclasses.is_dataclass(tp):
        return "object"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, getattr(tp, "__name__", str(tp)))


def _grouped(tp: Any) -> str:
    text = _describe(tp)
    return f"({text})" if " or " in text else text


def _walk(tp: Any, path: str, out: list[tuple[str, str]]) -> None:
    hints = typing.get_type_hints(tp, vars(sys.modules[tp.__module__]))
    for f in dataclasses.fields(tp):
        hint = hints[f.name]
        key = f"{path}.{f.name}" if path else f.name
        optional = " (absent when null)" if f.metadata.get("omit_if_none") else ""
        out.append((key, _describe(hint) + optional))
        _descend(hint, key, out)


def _descend(hint: Any, key: str, out: list[tuple[str, str]]) -> None:
    for arg in [a for a in (typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else [hint])
                if a is not type(None)]:
        origin = typing.get_origin(arg)
        if dataclasses.is_dataclass(arg):
            _walk(arg, key, out)
        elif origin is list and typing.get_args(arg) and dataclasses.is_dataclass(typing.get_args(arg)[0]):
            _walk(typing.get_args(arg)[0], key + "[]", out)
        elif origin is dict:
            _descend(typing.get_args(arg)[1], key + ".*", out)


def key_reference() -> list[tuple[str, str]]:
    """(key path, JSON type) of every key `report.json` can hold; `[]` marks a list's items and `*`
    an object's variable keys (a condition, construct, metric, reason or seed)."""
    out: list[tuple[str, str]] = []
    _walk(Report, "", out)
    return out


def key_reference_markdown() -> str:
    lines = ["| key | type |", "|---|---|"]
    lines += [f"| `{key}` | {kind} |" for key, kind in key_reference()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(key_reference_markdown(), end="")
