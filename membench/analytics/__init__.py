"""Statistics: pure functions with explicit inputs and named results, used by the reports and by
`membench stats` on CSV files. Nothing here reads the warehouse.

Modules (each documents its formulas and the paper section they come from):

- :mod:`.cells` — :class:`Cell`, dedup (newest record per (condition, seed, oracle id / unit)),
  pairing of two conditions;
- :mod:`.exact` — exact trap-clustered sign-flip test (DP over signed sums), exact McNemar,
  equal-weight sign-test thresholds and power;
- :mod:`.holm` — Holm–Bonferroni over a registered family (unavailable slots at p = 1);
- :mod:`.compare` — one comparison of two conditions from cells (:func:`compare_conditions`),
  registered families (:func:`compare_family`);
- :mod:`.bootstrap` — pass fractions with trap-cluster percentile bootstrap CIs;
- :mod:`.gates` — validity gates (B0 headroom, exclusions, paired units);
- :mod:`.ccpf` — EngramBench Confirmed-Case Pass Fraction, micro and macro;
- :mod:`.resources` — tokens, pure agent time, invocations, reductions, cost per success;
- :mod:`.loaders` — the only I/O: cells and case CSVs, evaluator manifests.
"""

from .bootstrap import BootstrapCI, PassFraction, pass_fractions, trap_cluster_bootstrap_ci
from .ccpf import (
    CASE_STATUSES,
    CaseOutcome,
    CCPFReport,
    EvaluatorManifest,
    ManifestCase,
    Ratio,
    RunCCPF,
    TaskCCPF,
    UnknownCaseError,
    ccpf,
)
from .cells import (
    Cell,
    CellCounts,
    DuplicateCellError,
    PairedCells,
    UnknownConditionError,
    count_cells,
    dedup_cells,
    index_cells,
    pair_cells,
)
from .compare import (
    Comparison,
    FamilyResult,
    MajorityResult,
    compare_conditions,
    compare_family,
    compare_paired,
    majority_collapse,
    per_seed_mcnemar,
    unit_contributions,
)
from .exact import (
    McNemarResult,
    SignFlipResult,
    SignTestPower,
    binomial_half_cdf,
    exact_mcnemar,
    sign_flip_test,
    sign_test_power,
    signed_sum_counts,
)
from .gates import ComparisonGates, Gate, HeadroomGates, b0_headroom, comparison_gates, exclusion_gates, paired_units_gate
from .holm import HolmResult, holm
from .resources import (
    CostPerSuccess,
    MetricReduction,
    ResourceComparison,
    ResourceUsage,
    cost_per_success,
    relative_reduction,
    resource_reductions,
    resource_totals,
)

__all__ = [
    "BootstrapCI", "PassFraction", "pass_fractions", "trap_cluster_bootstrap_ci",
    "CASE_STATUSES", "CaseOutcome", "CCPFReport", "EvaluatorManifest", "ManifestCase", "Ratio", "RunCCPF",
    "TaskCCPF", "UnknownCaseError", "ccpf",
    "Cell", "CellCounts", "DuplicateCellError", "PairedCells", "UnknownConditionError", "count_cells",
    "dedup_cells", "index_cells", "pair_cells",
    "Comparison", "FamilyResult", "MajorityResult", "compare_conditions", "compare_family", "compare_paired",
    "majority_collapse", "per_seed_mcnemar", "unit_contributions",
    "McNemarResult", "SignFlipResult", "SignTestPower", "binomial_half_cdf", "exact_mcnemar", "sign_flip_test",
    "sign_test_power", "signed_sum_counts",
    "ComparisonGates", "Gate", "HeadroomGates", "b0_headroom", "comparison_gates", "exclusion_gates",
    "paired_units_gate",
    "HolmResult", "holm",
    "CostPerSuccess", "MetricReduction", "ResourceComparison", "ResourceUsage", "cost_per_success",
    "relative_reduction", "resource_reductions", "resource_totals",
]
