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

Minimum detectable difference (issue 28: power stated, not hoped for): the smallest paired
pass-rate difference Δ the exact trap-clustered test detects with probability `MDD_POWER` (80 %)
at α. The test's unit is the trap and it is conditional on the traps that differ (d_t ≠ 0), so the
model is the equal-weight one above: of k paired traps, m differ, each the same way in all its
seeds, favouring A with probability q; the others are ties. Then Δ = (m / k)·(2q − 1), and the
test rejects with the sign test's power over m traps. `minimum_detectable_difference` finds the
smallest q (upward to 1e-4) reaching the target. The figure depends on m, which says nothing
about direction, so a report may state it for the observed m: opposing traps, not ties, are what
cost power, so fewer differing traps can mean a smaller detectable Δ (but never fewer than the
test's smallest rejecting split, 6 traps at α = 0.05). Seeds do not lower it: under a
trap-clustered test more seeds per trap add paired cells, not independent units, and seeds that
disagree within a trap only shrink its contribution, so it is the best case for the design.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .exact import sign_test_power

POWER_Q = (0.6, 0.7, 0.8, 0.9)
MDD_POWER = 0.8
# the study table's designs (docs/study.md): hygiene-v1's 34 traps, DreamBench-SWE v2's 60, twice that
STUDY_TRAPS = (34, 60, 120)
STUDY_SEEDS = 3
STUDY_SHARES = (1.0, 0.5, 0.25)  # share of the paired traps that differ


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


@dataclass(frozen=True)
class DetectableDifference:
    """The smallest Δ (A − B pass rate) the trap-clustered test detects with probability `power` at
    `alpha` when `differing` of `traps` paired traps differ; None when no split of them can reject."""

    traps: int
    differing: int
    seeds: int | None
    alpha: float
    power: float
    q: float | None  # smallest share of the differing traps favouring A that reaches `power`
    difference: float | None  # differing / traps · (2q − 1)


def minimum_detectable_difference(traps: int, differing: int | None = None, *, seeds: int | None = None,
                                  alpha: float = 0.05, power: float = MDD_POWER) -> DetectableDifference:
    m = traps if differing is None else differing
    if not 0 <= m <= traps or not 0.0 < power < 1.0:
        raise ValueError(f"need 0 <= differing <= traps and 0 < power < 1, got {m}, {traps}, {power}")
    if m == 0 or sign_test_power(m, 1.0, alpha=alpha).threshold is None:
        return DetectableDifference(traps, m, seeds, alpha, power, None, None)
    low, high = 0.5, 1.0  # the power rises with q above 1/2: bisect to 1e-7, then round up to 1e-4
    while high - low > 1e-7:
        mid = (low + high) / 2
        if (sign_test_power(m, mid, alpha=alpha).power or 0.0) >= power:
            high = mid
        else:
            low = mid
    q = math.ceil(round(high * 1e4, 6)) / 1e4
    return DetectableDifference(traps, m, seeds, alpha, power, q, round(m / traps * (2 * q - 1), 4))


def detectable_difference_table(traps: Sequence[int] = STUDY_TRAPS, seeds: int = STUDY_SEEDS,
                                shares: Sequence[float] = STUDY_SHARES, *, alpha: float = 0.05) -> str:
    """docs/study.md's table (checked by tests/analytics/test_effects.py; regenerate with
    `python -m analytics.effects`)."""
    head = ["traps × seeds", "paired cells", "all differ: winning traps needed", "all differ: q at 80 % power"]
    head += [f"MDD, {share:.0%} of traps differ" for share in shares]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for k in traps:
        rows = [minimum_detectable_difference(k, round(k * share), seeds=seeds, alpha=alpha) for share in shares]
        threshold = sign_test_power(k, alpha=alpha).threshold
        cells = [f"{k} × {seeds}", str(k * seeds), "—" if threshold is None else f"{threshold} / {k}",
                 "—" if rows[0].q is None else f"{rows[0].q:.4f}"]
        cells += ["none" if r.difference is None else f"{100 * r.difference:.1f} pp" for r in rows]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["MDD_POWER", "POWER_Q", "DesignPower", "DetectableDifference", "PairedEffect", "design_power",
           "detectable_difference_table", "minimum_detectable_difference", "paired_difference_ci"]


if __name__ == "__main__":
    print(detectable_difference_table(), end="")
