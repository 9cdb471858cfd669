"""Pass fractions with trap-cluster percentile bootstrap confidence intervals.

Source: DreamBench-SWE §6.1 Table 7 ("Intervals are trap-cluster bootstrap 95% CIs; seeds are
repeated observations within traps") and docs/design.md §8 (seeded, stated resample count).

The cluster is the unit (trap): a bootstrap replicate draws T units with replacement from the T
units and recomputes the pooled pass fraction Σ passes / Σ cells over the drawn units (a unit
drawn twice counts twice). The interval is the percentile interval of the replicates.

Implementation: a replicate's pooled fraction depends only on how many times each *kind* of unit
was drawn, a kind being the pair (passes, cells) of a unit. Drawing T units uniformly with
replacement gives kind counts ~ Multinomial(T, m_k / T) where m_k is the number of units of kind
k — exactly the same distribution as drawing unit indices, but it costs O(resamples × kinds)
instead of O(resamples × T). With at most 3 seeds per unit there are at most 9 kinds, so a million cells
bootstrap as fast as sixty units.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .cells import Cell


@dataclass(frozen=True)
class BootstrapCI:
    """Pooled pass fraction and its trap-cluster percentile bootstrap interval.

    ``estimate`` = Σ passes / Σ cells over all units (None when there are no cells; then
    ``low``/``high`` are None too). ``resamples``, ``seed`` and ``level`` record how the
    interval was made: ``numpy.random.default_rng(seed)``, percentile interval at
    (1 − level)/2 and (1 + level)/2 with numpy's default (linear) quantile interpolation.
    """

    estimate: float | None
    low: float | None
    high: float | None
    resamples: int
    seed: int
    level: float


def _unit_kinds(outcomes_by_unit: Mapping[str, Sequence[bool]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # (passes, cells) of every non-empty unit; outcomes are bools (or 0/1), so sum() counts passes
    kinds: Counter[tuple[int, int]] = Counter(
        (int(sum(outcomes)), len(outcomes)) for outcomes in outcomes_by_unit.values() if len(outcomes)
    )
    ordered = sorted(kinds.items())
    passes = np.array([k[0] for k, _ in ordered], dtype=np.int64)
    cells = np.array([k[1] for k, _ in ordered], dtype=np.int64)
    mult = np.array([m for _, m in ordered], dtype=np.int64)
    return passes, cells, mult


def trap_cluster_bootstrap_ci(
    outcomes_by_unit: Mapping[str, Sequence[bool]],
    *,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> BootstrapCI:
    """Pooled pass fraction over all valid cells with a trap-cluster percentile bootstrap CI.

    ``outcomes_by_unit`` maps each unit to the pass/fail outcomes of its valid cells (one per
    seed); units with no outcomes are ignored. The replicate statistic is the pooled fraction
    Σ passes / Σ cells over T units drawn with replacement (see the module docstring for the
    exact multinomial shortcut). Empty input (no cells at all) → estimate, low and high are None.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    passes, cells, mult = _unit_kinds(outcomes_by_unit)
    if mult.size == 0:
        return BootstrapCI(None, None, None, resamples, seed, level)
    units = int(mult.sum())
    estimate = float((passes * mult).sum() / (cells * mult).sum())
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(units, mult / units, size=resamples)  # (resamples, kinds)
    replicate = (draws @ passes) / (draws @ cells)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(replicate, [tail, 1.0 - tail])
    return BootstrapCI(estimate, float(low), float(high), resamples, seed, level)


@dataclass(frozen=True)
class PassFraction:
    """One condition's pass fraction: ``passed``/``valid`` with its bootstrap CI; ``excluded``
    cells are reported beside it and are in neither count."""

    condition: str
    passed: int
    valid: int
    excluded: int
    units: int
    ci: BootstrapCI

    @property
    def estimate(self) -> float | None:
        return self.ci.estimate


def outcomes_by_condition(cells: Iterable[Cell]) -> tuple[dict[str, dict[str, list[bool]]], Counter[str]]:
    """Group valid cells as {condition: {unit: [passed, ...]}} and count excluded cells."""
    grouped: dict[str, dict[str, list[bool]]] = {}
    excluded: Counter[str] = Counter()
    for cell in cells:
        by_unit = grouped.get(cell.condition)
        if by_unit is None:
            by_unit = grouped[cell.condition] = {}
        if cell.valid:
            outcomes = by_unit.get(cell.unit)
            if outcomes is None:
                by_unit[cell.unit] = [bool(cell.passed)]
            else:
                outcomes.append(bool(cell.passed))
        else:
            excluded[cell.condition] += 1
    return grouped, excluded


def pass_fractions(
    cells: Iterable[Cell],
    *,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, PassFraction]:
    """Per-condition pooled pass fractions with trap-cluster bootstrap CIs (Table 7).

    Each condition is bootstrapped with the same ``seed`` so a condition's interval does not
    depend on which other conditions are in the input.
    """
    grouped, excluded = outcomes_by_condition(cells)
    result: dict[str, PassFraction] = {}
    for condition in sorted(grouped):
        by_unit = grouped[condition]
        ci = trap_cluster_bootstrap_ci(by_unit, resamples=resamples, seed=seed, level=level)
        result[condition] = PassFraction(
            condition=condition,
            passed=sum(sum(v) for v in by_unit.values()),
            valid=sum(len(v) for v in by_unit.values()),
            excluded=excluded[condition],
            units=len(by_unit),
            ci=ci,
        )
    return result
