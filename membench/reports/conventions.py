"""What every report section agrees on: the order conditions are listed in, the bootstrap settings of
every interval, and what makes a run row a valid cell."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from membench.analytics.bootstrap import trap_cluster_bootstrap_ci
from membench.analytics.cells import Cell
from membench.analytics.exact import clopper_pearson
from membench.reports.model import BootstrapSettings, CellSummary
from membench.formats.pack_format import CONSTRUCT_NAMES
from membench.schemas.derived import DerivedEvent
from membench.warehouse.rows import RunSummaryRow

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101


def construct_label(construct: str) -> str:
    """"C9 Spurious-lesson rejection / disconfirmation" (membench.formats.pack_format.CONSTRUCT_NAMES, the
    paper's Table 30): every place a report shows a construct shows its name (a bare code is unreadable); an unknown
    label as it is."""
    name = CONSTRUCT_NAMES.get(construct)
    return f"{construct} {name}" if name else construct


def condition_order(condition: str) -> tuple[int, str]:
    """The ladder's conditions (B0, B1, …) first, then named ones, each alphabetically."""
    return (0, condition) if condition.startswith("B") else (1, condition)


def valid_run(row: RunSummaryRow) -> bool:
    """A run row is a valid cell when it completed and was not excluded (excluded cells are counted,
    never imputed)."""
    return not row.excluded and row.status == "completed"


def exclusion_of(row: RunSummaryRow) -> str | None:
    return None if valid_run(row) else (row.exclusion_reason or row.error_type or row.status)


def run_summary_row(summary: DerivedEvent) -> RunSummaryRow:
    """A RunSummary derived event as the `run_results` row the sink writes of it (its id and source seq,
    then its payload's fields): how the live viewer, which folds the log and holds no warehouse, hands
    its cells to the rules above."""
    if summary.kind != "RunSummary":
        raise ValueError(f"not a RunSummary: {summary.kind} {summary.derived_id}")
    values: dict[str, Any] = {f.name: summary.payload.get(f.name) for f in fields(RunSummaryRow)[2:]}
    return RunSummaryRow(derived_id=summary.derived_id, source_seq=summary.source_seq, **values)


# which interval a `ci95` is (the `ci_method` beside it)
CI_BOOTSTRAP = "trap_cluster_bootstrap"
CI_EXACT = "clopper_pearson_traps"


def ci_method(passed: int, valid: int) -> str | None:
    """Which interval `pass_summary` gave for these counts (None: no valid cells, no interval)."""
    return None if not valid else CI_EXACT if passed in (0, valid) else CI_BOOTSTRAP


# (passed, valid, pass rate, 95% CI, bootstrap settings): what `pass_summary` returns
PassSummary = tuple[int, int, float | None, list[float | None], BootstrapSettings]


def pass_summary(outcomes: dict[str, list[bool]]) -> PassSummary:
    """(passed, valid, pass rate, 95% CI, bootstrap settings) of unit -> outcomes of its valid cells
    (`ci_method` names the interval). The CI is the trap-cluster percentile bootstrap with the report's fixed resamples
    and seed — except where every valid cell passed or none did: every resample then has the same
    rate, and the bootstrap's zero-width interval ([0%, 0%] for 0/9) says nothing of small-sample
    uncertainty. There the interval is the exact Clopper–Pearson interval with the number of traps
    as the trials (0 of T or T of T): cluster-aware, since a trap's seeds may agree perfectly and a
    trap is the independent unit; it is wider than Clopper–Pearson over cells, never narrower.
    """
    ci = trap_cluster_bootstrap_ci(outcomes, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    valid = sum(len(v) for v in outcomes.values())
    passed = sum(sum(1 for o in v if o) for v in outcomes.values())
    interval: list[float | None] = [ci.low, ci.high]
    if ci_method(passed, valid) == CI_EXACT:
        traps = sum(1 for v in outcomes.values() if v)
        interval = list(clopper_pearson(0 if passed == 0 else traps, traps, level=ci.level))
    return (passed, valid, passed / valid if valid else None, interval,
            BootstrapSettings(resamples=ci.resamples, seed=ci.seed, level=ci.level))


def condition_pass_summaries(cells: Iterable[tuple[str, RunSummaryRow]]
                             ) -> list[tuple[str, int, PassSummary]]:
    """(condition, cells, `pass_summary` of its valid cells' outcomes by task) for each condition,
    in `condition_order`. CELLS: (condition, run row) pairs, one a unit, a row of `run_results` (the
    live viewer builds its rows from the RunSummary events it folded: `run_summary_row`). The report's
    base figures and the live viewer's ladder are both this."""
    by_condition: dict[str, list[RunSummaryRow]] = defaultdict(list)
    for condition, row in cells:
        by_condition[condition].append(row)
    out = []
    for condition in sorted(by_condition, key=condition_order):
        rows = by_condition[condition]
        outcomes: dict[str, list[bool]] = defaultdict(list)
        for r in rows:
            if valid_run(r):
                outcomes[r.task].append(bool(r.scored_passed))
        out.append((condition, len(rows), pass_summary(outcomes)))
    return out


def cell_summary(cells: Iterable[Cell]) -> CellSummary:
    cells = list(cells)
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for c in cells:
        if c.valid:
            outcomes[c.unit].append(bool(c.passed))
    passed, valid, rate, ci95, _ = pass_summary(outcomes)
    return CellSummary(cells=len(cells), valid=valid, passed=passed, pass_rate=rate, ci95=ci95,
                       ci_method=ci_method(passed, valid))


# what each metric counts, numerator / denominator (membench/processors/hygiene.py), for the legend under every
# table that shows one: "overscope 106/146" must say what was counted
HYGIENE_LEGEND: dict[str, str] = {
    "stale_use": "stale memories the agent cited / stale memories injected",
    "stale_activation": "sessions with a stale memory injected / sessions where one was available",
    "overscope": "injected scoped memories outside the task's scope / injected scoped memories",
    "irrelevant_import": "injected memories neither relevant nor stale / injected memories",
    "contradiction_repair": "contradiction sessions resolved / contradiction sessions",
    "repeated_error": "sessions where the labelled earlier error recurred (not resolved) / such sessions",
    "human_feedback_use": "feedback sessions resolved with a memory of the feedback injected / feedback sessions",
    "human_feedback_scope": "injected feedback memories matching the task's scope / injected feedback memories "
                            "with a scope",
    "harmful_retrieval": "sessions with a memory of harmful evidence injected / harmful-retrieval sessions",
    "useful_memory_precision": "injected memories learned from relevant evidence / injected memories",
    "scope_accuracy": "injected memories whose scope matches the task's / injected memories",
    "memory_bloat": "memories held at session start / useful (relevant) memories held — a ratio (×), 1 is no bloat",
    "commission_trip": "sessions where a test that the trap's bad behaviour is absent failed / sessions with such "
                       "tests",
    "omission_trip": "sessions where a test that the required behaviour is present failed / sessions with such "
                     "tests",
}


def hygiene_legend(metrics) -> list[tuple[str, str]]:
    """(metric, what it counts) for each of METRICS, in their order; an unknown metric says so."""
    return [(m, HYGIENE_LEGEND.get(m, "not described by this version of membench")) for m in metrics]
