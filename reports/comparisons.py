"""Report section: paired comparisons against the baseline (a registered Holm family) and resources.

Cells come from the run set's `run_results` rows the base report reads (one per unit: its newest
complete run): unit = task, seed, condition, passed = `scored_passed`, valid = completed and not
excluded, construct from the row when it carries one, else from the unit's RunStarted event. Cells are deduplicated (`dedup_cells`, newest `source_seq` wins) before
pairing.

The baseline is `B0`, else `no_memory` (imported packs), else the first condition in report order.

Top level:
- `comparisons`: {"baseline", "family_size", "alpha", "test", "comparisons": [...]}; the family
  registers every non-baseline condition vs the baseline in report order, and each entry has
  exactly the fields `membench stats compare` prints (`a`, `b`, `D`, `discordant_a`,
  `discordant_b`, `units`, `paired_cells`, `p_clustered`, `p_mcnemar`, `p_majority`, `p_per_seed`,
  `p_holm`); `membench stats compare --pair A:B ...` over the same cells prints the same numbers.
- `resources`: {"baseline", "runs", "cost", "conditions": {condition: {"runs", "successes",
  "mean": {metric: per-run mean}, "total": {metric: sum}, "cost_per_success": {"total_cost",
  "successes", "runs", "value"}, "reduction_vs_baseline": {metric: (baseline − this) / baseline}
  or null for the baseline}}}. Runs are the condition's valid runs; metrics are input, cached
  input, output, reasoning and total (input + output) tokens, tool and patch invocations,
  compactions and wall time of the run in seconds (`wall_time_s`; the run rows carry no
  simulated-user or evaluation time, so pure agent time is not available here). Cost is total
  tokens, and cost per success = total tokens of all valid runs / passed runs (null without a pass).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from analytics.cells import Cell, dedup_cells
from analytics.compare import compare_family
from analytics.export import family_json
from analytics.resources import ResourceUsage, cost_per_success, resource_reductions, resource_totals
from reports.conventions import condition_order, exclusion_of, valid_run
from reports.model import (
    ComparisonEntry,
    ComparisonFamily,
    ConditionResources,
    CostPerSuccess,
    Resources,
    from_json,
)
from warehouse import queries
from warehouse.protocol import WarehouseReader

BASELINES = ("B0", "no_memory")
ALPHA = 0.05
RESOURCE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "total_tokens",
                   "tool_invocations", "patch_invocations", "compactions", "wall_time_s")


def baseline_of(conditions: list[str]) -> str | None:
    """B0, else no_memory, else the first condition (in report order)."""
    for name in BASELINES:
        if name in conditions:
            return name
    return conditions[0] if conditions else None


@dataclass(frozen=True)
class ComparisonsSection:
    comparisons: ComparisonFamily
    resources: Resources


def _constructs(warehouse: WarehouseReader, run_set: str, runs: list[dict[str, Any]]) -> dict[str, str | None]:
    """run_id -> construct: from the rows when they carry it, else from the runs' RunStarted events."""
    if all(r.get("construct") for r in runs):
        return {r["run_id"]: r["construct"] for r in runs}
    constructs = queries.run_constructs(warehouse, run_set)
    return {r["run_id"]: r.get("construct") or constructs.get(r["run_id"]) for r in runs}


def cells_from_rows(runs: list[dict[str, Any]], constructs: dict[str, str | None] | None = None) -> list[Cell]:
    """One cell per run_results row, deduplicated (newest source_seq per (condition, seed, unit))."""
    constructs = constructs or {}
    cells = []
    for r in runs:
        cells.append(Cell(
            unit=r["task"], seed=r["seed"], condition=r["condition"], passed=bool(r["scored_passed"]),
            valid=valid_run(r), construct=constructs.get(r["run_id"], r.get("construct")),
            order=int(r.get("source_seq") or 0), exclusion=exclusion_of(r)))
    return dedup_cells(cells)


def comparisons_from_cells(cells: list[Cell], conditions: list[str] | None = None) -> ComparisonFamily:
    """The `comparisons` key: every non-baseline condition vs the baseline, one Holm family."""
    conditions = conditions or sorted({c.condition for c in cells}, key=condition_order)
    baseline = baseline_of(conditions)
    pairs = [(c, baseline) for c in conditions if c != baseline]
    family = compare_family(cells, pairs, alpha=ALPHA)
    family_out = family_json(family)
    return ComparisonFamily(baseline=baseline, alpha=ALPHA,
                            test="exact trap-clustered sign-flip; p_holm = Holm over the family's p_clustered",
                            comparisons=[from_json(ComparisonEntry, entry, "comparisons") for entry in family_out["comparisons"]],
                            family_size=family_out["family_size"])


def usage_from_row(row: dict[str, Any]) -> ResourceUsage:
    return ResourceUsage(
        input_tokens=int(row.get("input_tokens") or 0), cached_input_tokens=int(row.get("cached_tokens") or 0),
        output_tokens=int(row.get("output_tokens") or 0), reasoning_tokens=int(row.get("reasoning_tokens") or 0),
        wall_time_s=int(row.get("duration_ms") or 0) / 1000, tool_invocations=int(row.get("tool_calls") or 0),
        patch_invocations=int(row.get("patch_invocations") or 0), compactions=int(row.get("compactions") or 0),
        success=bool(row["scored_passed"]))


def resources_from_rows(runs: list[dict[str, Any]], conditions: list[str] | None = None) -> Resources:
    """The `resources` key: per-condition means over valid runs, cost per success, reductions."""
    conditions = conditions or sorted({r["condition"] for r in runs}, key=condition_order)
    baseline = baseline_of(conditions)
    usage = {c: [usage_from_row(r) for r in runs if r["condition"] == c and valid_run(r)] for c in conditions}
    out: dict[str, ConditionResources] = {}
    for condition in conditions:
        mine = usage[condition]
        totals = resource_totals(mine)
        cps = cost_per_success([replace(u, cost_usd=float(u.total_tokens)) for u in mine])
        reduction = None
        if condition != baseline:
            reductions = resource_reductions(usage[baseline], mine, baseline=baseline, candidate=condition)
            reduction = {m: reductions.metrics[m].reduction for m in RESOURCE_FIELDS}
        out[condition] = ConditionResources(
            runs=len(mine), successes=cps.successes,
            mean={m: totals[m] / len(mine) if mine else None for m in RESOURCE_FIELDS},
            total={m: totals[m] for m in RESOURCE_FIELDS},
            cost_per_success=CostPerSuccess(total_cost=cps.total_cost, successes=cps.successes, runs=cps.runs,
                                            value=cps.value),
            reduction_vs_baseline=reduction)
    return Resources(baseline=baseline, runs="valid runs (completed, not excluded); means are per run",
                     cost="total tokens (input + output); cost per success = total cost / passed runs",
                     conditions=out)


def comparisons_section(warehouse: WarehouseReader, run_set: str, runs: list[dict[str, Any]]) -> ComparisonsSection:
    conditions = sorted({r["condition"] for r in runs}, key=condition_order)
    cells = cells_from_rows(runs, _constructs(warehouse, run_set, runs))
    return ComparisonsSection(comparisons=comparisons_from_cells(cells, conditions),
                              resources=resources_from_rows(runs, conditions))
