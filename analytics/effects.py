"""Effect sizes of a paired comparison and the power the design had.

Effect size (DreamBench-SWE §6.2 reports pass counts, the signed statistic and the discordant
counts beside every p-value): the paired pass-rate difference

    Δ = (passes of A − passes of B) / paired cells = (b − c) / n

over the comparison's paired valid cells, with a trap-cluster percentile bootstrap interval: a
replicate draws the contributing units (traps) with replacement and recomputes Σ d_t / Σ n_t over
the drawn units, d_t = A-only − B-only seeds of unit t and n_t its paired seeds. Seeds stay inside
their trap, as in the pass-rate intervals (`bootstrap.py`).

Power (Appendix E.6, Tables 22 and 23): with k units that can contribute, the clustered test is at
best the exact sign test over k equal-weight clusters; `sign_test_power(k, q)` gives the smallest
rejecting split and the chance of reaching it when each cluster favours one side with probability
q. The design's power is stated at fixed q values (the paper's table uses 0.6 to 0.9), computed from
the number of units paired in the comparison, before looking at which side won.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .exact import sign_test_power

POWER_Q = (0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class PairedEffect:
    """Δ = (b − c) / n over n paired cells, its trap-cluster bootstrap interval and how it was drawn."""

    difference: float | None
    low: float | None
    high: float | None
    paired_cells: int
    resamples: int
    seed: int
    level: float


def paired_difference_ci(per_unit: Mapping[str, Sequence[tuple[bool, bool]]], *, resamples: int = 2000,
                         seed: int = 0, level: float = 0.95) -> PairedEffect:
    """Δ and its percentile interval from unit -> [(A passed, B passed) per paired seed]."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    units = [u for u in sorted(per_unit) if len(per_unit[u])]
    d = np.array([sum(int(a) - int(b) for a, b in per_unit[u]) for u in units], dtype=np.int64)
    n = np.array([len(per_unit[u]) for u in units], dtype=np.int64)
    total = int(n.sum())
    if total == 0:
        return PairedEffect(None, None, None, 0, resamples, seed, level)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(units), size=(resamples, len(units)))
    stats = d[draws].sum(axis=1) / n[draws].sum(axis=1)
    low, high = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return PairedEffect(float(d.sum() / total), float(low), float(high), total, resamples, seed, level)


@dataclass(frozen=True)
class DesignPower:
    """The exact sign test's power for `units` equal-weight clusters at each q of `by_q`."""

    units: int
    alpha: float
    threshold: int | None  # smallest winning-cluster count that rejects; None: no split of `units` can
    p_at_threshold: float | None
    by_q: dict[str, float | None]  # q (as text, "0.7") -> power


def design_power(units: int, *, alpha: float = 0.05, qs: Sequence[float] = POWER_Q) -> DesignPower:
    results = [sign_test_power(units, q, alpha=alpha) for q in qs]
    first = results[0] if results else sign_test_power(units, alpha=alpha)
    return DesignPower(units=units, alpha=alpha, threshold=first.threshold, p_at_threshold=first.p_at_threshold,
                       by_q={f"{q:g}": r.power for q, r in zip(qs, results)})


__all__ = ["POWER_Q", "DesignPower", "PairedEffect", "design_power", "paired_difference_ci"]
