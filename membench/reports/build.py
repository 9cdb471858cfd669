"""A run set's report, rebuilt from the warehouse alone: the base figures per condition and the
sections, composed into the typed `membench.reports.model.Report` (`to_json` of it is `report.json`).

A cell is one unit's scored (last) session: passed or not, or excluded (isolation unavailable,
harness error). `cells` counts every cell, `excluded` those not scored; `pass_rate` is
passed / (cells - excluded), and `ci95` its trap-cluster percentile bootstrap interval. Beside it,
`pass_hat_k` (share of traps passed under every seed) and `effort` (tokens, USD, wall time per cell
and per pass, memory tokens read per session), from `membench.reports.effort`.

Every figure is read through a `membench.warehouse.read_model.ReadModel`: over the warehouse
(`WarehouseReadModel`, the SQL of `membench.warehouse.queries`), or held in memory
(`InMemoryReadModel`, for a test that is not about the warehouse).

Sections, each a function of (read model, run set, run rows) called here in this order: failure
counts, memory contract and hygiene panel (`membench.reports.failures`); ladder, strata and validity gates
(`membench.reports.hygiene`, with the exclusion-balance gate of `membench.reports.exclusions`); comparisons, resources
and registered families (`membench.reports.comparisons`); outcome
matrix, provenance and USD cost (`membench.reports.provenance`). The canary proof (`membench.reports.canary`) and the
admission funnel come from outside the warehouse (the pack's secrets, `membench validate`'s record)
and are passed in by the CLI; the transfer protocol's results (`membench.reports.transfer`) exist only for a
transfer study's run set. docs/reports.md lists every key.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from membench.reports.comparisons import comparisons_section
from membench.reports.effort import effort_section
from membench.reports.conventions import ci_method, condition_pass_summaries
from membench.reports.failures import failures_section
from membench.reports.hygiene import hygiene_section
from membench.reports.model import (AdmissionFunnel, CanaryProof, ConditionSummary, Inputs, REPORT_SCHEMA_VERSION, Report,
                           SuiteIsolation, shallow_fields)
from membench.reports.provenance import cost_usd, outcome_matrix, run_provenance
from membench.reports.study import DEFAULT_STUDY, BaselineError, Study
from membench.reports.transfer import transfer_section
from membench.reports.comparison_verdicts import comparison_verdicts, requested
from membench.warehouse.read_model import ReadModel


class ReportError(LookupError):
    pass


NOT_VALIDATED = AdmissionFunnel(status="not_validated", source=None, authored=None, valid=None, admitted=None)


def build_report(reads: ReadModel, run_set: str, *, baseline: str | None = None,
                 study: Study = DEFAULT_STUDY, canary: CanaryProof | None = None,
                 admission: AdmissionFunnel | None = None, compare: tuple[tuple[str, str], ...] = ()) -> Report:
    """Raises ReportError (no runs, or no baseline can be chosen: `baseline`, the study's, B0,
    no_memory — membench.reports.study.resolve_baseline)."""
    runs = reads.run_results(run_set)
    if not runs:
        raise ReportError(f"run set '{run_set}' has no completed runs in the warehouse")
    try:
        comparisons = comparisons_section(reads, run_set, runs, baseline, study)
    except BaselineError as exc:
        raise ReportError(str(exc)) from None
    failures = failures_section(reads, run_set, runs)
    hygiene = hygiene_section(reads, run_set, runs, comparisons.comparisons.baseline)
    transfer = transfer_section(reads, run_set, runs)
    efforts, reliability = effort_section(reads, run_set, runs)
    conditions = []
    for condition, cells, (passed, valid, rate, ci95, bootstrap) in condition_pass_summaries(
            (row.condition, row) for row in runs):
        conditions.append(ConditionSummary(
            condition=condition, cells=cells, passed=passed, pass_rate=rate, ci95=ci95,
            ci_method=ci_method(passed, valid),
            excluded=cells - valid, bootstrap=bootstrap,
            pass_hat_k=reliability[condition], effort=efforts[condition],
            **shallow_fields(failures.conditions[condition]), **shallow_fields(hygiene.conditions[condition])))
    digests = sorted({start.payload["pack_digest"] for start in reads.run_started(run_set)})
    report = Report(
        run_set=run_set,
        suite=runs[0].suite,
        agent=runs[0].agent,
        conditions=conditions,
        inputs=Inputs(events=reads.event_count(run_set),
                      pack_digest=digests[0] if len(digests) == 1 else digests,
                      log_root=reads.log_root(run_set)),
        hygiene_by_construct=failures.hygiene_by_construct,
        ladder=hygiene.ladder,
        strata=hygiene.strata,
        validity_gates=hygiene.validity_gates,
        comparisons=comparisons.comparisons,
        resources=comparisons.resources,
        suites=suite_isolation(reads, run_set),
        families=comparisons.families,
        outcome_matrix=outcome_matrix(runs),
        provenance=run_provenance(reads, run_set),
        cost_usd=cost_usd(reads, run_set, runs),
        canary=canary,
        admission=admission or NOT_VALIDATED,
        transfer=transfer,
        hygiene_panel=hygiene.hygiene_panel,
        schema_version=REPORT_SCHEMA_VERSION,
    )
    return with_verdicts(report, compare)


def with_verdicts(report: Report, compare: tuple[tuple[str, str], ...] = ()) -> Report:
    """REPORT with one verdict per registered comparison (membench/reports/comparison_verdicts.py), judged by
    its gates, and the verdicts answering COMPARE's pairs (`--compare A:B`) as asked."""
    found = comparison_verdicts(replace(report, verdicts=None, requested=None))
    asked = [requested(found, a, b) for a, b in compare]
    return replace(report, verdicts=found or None, requested=asked or None)


def suite_isolation(reads: ReadModel, run_set: str) -> list[SuiteIsolation]:
    """Each suite's oracle isolation: the weakest of its verdicts' (one in_process verdict makes the
    suite in_process)."""
    by_suite: dict[str, dict[str, int]] = defaultdict(dict)
    for suite, how, n in reads.verdict_isolation(run_set):
        by_suite[suite][how] = n
    return [SuiteIsolation(suite=suite, oracle_isolation="in_process" if "in_process" in counts else "process",
                           verdicts=sum(counts.values()))
            for suite, counts in sorted(by_suite.items())]
