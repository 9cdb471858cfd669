"""Resource use, relative reductions against a named baseline, and cost per success.

Sources: EngramBench §5.2 (metrics), §6.2 Table 3 (average per run: input + output tokens,
non-cached input tokens, completed turns, coding time), §6.3 Table 4, §6.4 Table 5 (totals over
12 runs: tool invocations, return text, patch invocations, added patch lines, reasoning tokens,
context compactions); DreamBench-SWE Table 31 (cost per successful task = total cost /
successful tasks).

Definitions:

- total tokens = input + output. Token accounting follows the OpenAI convention: ``cached_input``
  is the part of ``input`` served from the prompt cache and ``reasoning`` is the part of
  ``output`` spent reasoning, so neither is added again.
- non-cached input = input − cached input (Table 3).
- pure agent time = wall time − simulated-user time − evaluation time − verified pauses
  (§5.2 "Pure Development Time ... explicitly subtracting all off-cycle phases (e.g., Simulated
  User processing, hidden evaluations, and verified pauses)").
- relative reduction of a metric = (baseline − candidate) / baseline, computed on per-run means
  (equal to the ratio of totals when both sides have the same number of runs, as in the paper).
  Positive is a reduction; an increase is negative (Coreless-3 vs S-Full-20: tool invocations
  +68.97% → reduction −0.6897). Undefined (None) when the baseline mean is 0.
- cost per success = total cost / number of successful runs; None with no success.
- per cell and per pass (`per_cell_and_pass`): total / cells and total / passes, None at 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RESOURCE_METRICS = (
    "total_tokens",
    "input_tokens",
    "cached_input_tokens",
    "non_cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "pure_agent_time_s",
    "wall_time_s",
    "turns",
    "tool_invocations",
    "patch_invocations",
    "added_patch_lines",
    "tool_output_chars",
    "compactions",
    "cost_usd",
)


@dataclass(frozen=True)
class ResourceUsage:
    """One run's resource record (sums over its sessions)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    wall_time_s: float = 0.0
    simulated_user_time_s: float = 0.0
    evaluation_time_s: float = 0.0
    paused_time_s: float = 0.0
    turns: int = 0
    tool_invocations: int = 0
    patch_invocations: int = 0
    added_patch_lines: int = 0
    tool_output_chars: int = 0
    compactions: int = 0
    cost_usd: float = 0.0
    success: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def non_cached_input_tokens(self) -> int:
        return self.input_tokens - self.cached_input_tokens

    @property
    def pure_agent_time_s(self) -> float:
        return self.wall_time_s - self.simulated_user_time_s - self.evaluation_time_s - self.paused_time_s


def relative_reduction(baseline: float, value: float) -> float | None:
    """(baseline − value) / baseline; None when the baseline is 0."""
    return (baseline - value) / baseline if baseline else None


@dataclass(frozen=True)
class MetricReduction:
    metric: str
    baseline_total: float
    candidate_total: float
    baseline_mean: float | None
    candidate_mean: float | None
    reduction: float | None  # (baseline_mean − candidate_mean) / baseline_mean


@dataclass(frozen=True)
class ResourceComparison:
    baseline: str
    candidate: str
    baseline_runs: int
    candidate_runs: int
    metrics: dict[str, MetricReduction]
    added_lines_per_patch: tuple[float | None, float | None]  # (baseline, candidate)


def _metric(run: ResourceUsage, name: str) -> float:
    return getattr(run, name)


def resource_totals(runs: Sequence[ResourceUsage]) -> dict[str, float]:
    """Sum of every metric in :data:`RESOURCE_METRICS` over ``runs``."""
    return {m: sum(_metric(r, m) for r in runs) for m in RESOURCE_METRICS}


def resource_reductions(
    baseline_runs: Sequence[ResourceUsage],
    candidate_runs: Sequence[ResourceUsage],
    *,
    baseline: str = "baseline",
    candidate: str = "candidate",
) -> ResourceComparison:
    """Relative reduction of each resource metric of ``candidate`` against the named ``baseline``."""
    bt, ct = resource_totals(baseline_runs), resource_totals(candidate_runs)
    nb, nc = len(baseline_runs), len(candidate_runs)
    metrics = {}
    for m in RESOURCE_METRICS:
        bm = bt[m] / nb if nb else None
        cm = ct[m] / nc if nc else None
        red = relative_reduction(bm, cm) if bm is not None and cm is not None else None
        metrics[m] = MetricReduction(m, bt[m], ct[m], bm, cm, red)

    def per_patch(t: dict[str, float]) -> float | None:
        return t["added_patch_lines"] / t["patch_invocations"] if t["patch_invocations"] else None

    return ResourceComparison(baseline, candidate, nb, nc, metrics, (per_patch(bt), per_patch(ct)))


@dataclass(frozen=True)
class CostPerSuccess:
    total_cost: float
    successes: int
    runs: int

    @property
    def value(self) -> float | None:
        return self.total_cost / self.successes if self.successes else None


def cost_per_success(runs: Sequence[ResourceUsage]) -> CostPerSuccess:
    """Total cost of all runs (failed ones included) divided by the successful runs."""
    return CostPerSuccess(sum(r.cost_usd for r in runs), sum(bool(r.success) for r in runs), len(runs))


@dataclass(frozen=True)
class PerCellAndPass:
    """A total spread over the cells that spent it and over the passes they bought."""

    total: float
    per_cell: float | None  # total / cells; None with no cell
    per_pass: float | None  # total / passes; None with no pass (undefined, never 0 or infinite)


def per_cell_and_pass(total: float, cells: int, passes: int) -> PerCellAndPass:
    """per_cell = total / cells and per_pass = total / passes, each None when its denominator is 0.
    Per pass divides the spend of every cell, failed ones included, by the passes (DreamBench-SWE's
    cost per successful task): what one pass cost, not what a passing cell cost."""
    return PerCellAndPass(total=total, per_cell=total / cells if cells else None,
                          per_pass=total / passes if passes else None)


__all__ = [
    "RESOURCE_METRICS",
    "PerCellAndPass",
    "per_cell_and_pass",
    "ResourceUsage",
    "MetricReduction",
    "ResourceComparison",
    "CostPerSuccess",
    "relative_reduction",
    "resource_totals",
    "resource_reductions",
    "cost_per_success",
]
