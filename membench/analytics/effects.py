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

Minimum detectable difference: the paired pass-rate difference Δ at which the exact trap-clustered
test (the primary test) rejects with probability `MDD_POWER` (80 %) at α. The test flips the sign
of each trap's contribution d_t and ignores traps with d_t = 0, so when every one of the m
differing traps contributes the same magnitude w (1 ≤ w ≤ s, s paired seeds a trap) it is the exact
sign test over those m traps (DreamBench-SWE Appendix C.6 and E.6), whatever w is: the power
depends on q, the chance that a differing trap favours A, and not on w. Of k paired traps, then,

    Δ = Σ_t d_t / (k · s),   E[Δ] = (m · w / (k · s)) · (2q − 1),

and one q (`detectable_share`) reaches the target power for two Δ at the ends of w:

- `one_discordant_seed` (w = 1): each differing trap differs in one seed, the others tie — the
  smallest Δ the test detects with that power for this trap split, Δ = (m / (k · s)) · (2q − 1);
- `all_seeds_alike` (w = s): every seed of a differing trap goes the same way — the largest,
  Δ = (m / k) · (2q − 1).

A report states both, when every paired trap differs and for the number m that did (a count that
says nothing of direction): opposing traps, not ties, are what cost power, so fewer differing traps
can mean a smaller detectable Δ, but never fewer than the test's smallest rejecting split (6 traps
at α = 0.05). More seeds add paired cells, not independent units: they lower the one-discordant-seed
Δ (a trap can differ by a smaller share of its cells), never the q the traps must reach.
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
    """The minimum detectable difference of a design: of `traps` paired traps with `seeds` paired seeds
    each, `differing` differ; `q` is the smallest share of them favouring A at which the exact
    trap-clustered test rejects with probability `power` at `alpha`, and the Δ (A − B pass rate) it
    stands for when each differing trap differs in one seed (`one_discordant_seed`, the smallest)
    or in all its seeds alike (`all_seeds_alike`, the largest). All None when no split of the
    differing traps can reject."""

    traps: int
    differing: int
    seeds: int
    alpha: float
    power: float
    q: float | None
    one_discordant_seed: float | None  # differing / (traps · seeds) · (2q − 1)
    all_seeds_alike: float | None  # differing / traps · (2q − 1)


def detectable_share(differing: int, *, alpha: float = 0.05, power: float = MDD_POWER) -> float | None:
    """The smallest q (rounded up to 1e-4) with P(X ≥ b*) ≥ `power`, X ~ Bin(differing, q) and b* the
    exact sign test's smallest rejecting split of `differing` traps at `alpha` (DreamBench-SWE
    Appendix E.6, Tables 22 and 23); None when no split of them rejects."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie strictly between 0 and 1, got {power}")
    if differing <= 0 or sign_test_power(differing, 1.0, alpha=alpha).threshold is None:
        return None
    low, high = 0.5, 1.0  # the power rises with q above 1/2: bisect to 1e-7, then round up to 1e-4
    while high - low > 1e-7:
        mid = (low + high) / 2
        if (sign_test_power(differing, mid, alpha=alpha).power or 0.0) >= power:
            high = mid
        else:
            low = mid
    return math.ceil(round(high * 1e4, 6)) / 1e4


def arrangement_difference(traps: int, differing: int, seeds: int, q: float, *, discordant_seeds: int) -> float:
    """E[Δ] = differing · discordant_seeds / (traps · seeds) · (2q − 1): the paired pass-rate
    difference when each of `differing` traps differs in `discordant_seeds` of its `seeds` seeds,
    all the same way, favouring A with probability q (rounded to 1e-6)."""
    if not 1 <= discordant_seeds <= seeds:
        raise ValueError(f"need 1 <= discordant_seeds <= seeds, got {discordant_seeds}, {seeds}")
    return round(differing * discordant_seeds / (traps * seeds) * (2 * q - 1), 6)


def minimum_detectable_difference(traps: int, seeds: int, differing: int | None = None, *, alpha: float = 0.05,
                                  power: float = MDD_POWER) -> DetectableDifference:
    """The MDD under both arrangements (module docstring): q from `detectable_share(differing)`, then
    Δ with one discordant seed per differing trap and with all seeds of it alike. `differing`
    defaults to every paired trap."""
    m = traps if differing is None else differing
    if not 0 <= m <= traps or seeds < 1:
        raise ValueError(f"need 0 <= differing <= traps and seeds >= 1, got {m}, {traps}, {seeds}")
    q = detectable_share(m, alpha=alpha, power=power)
    if q is None:
        return DetectableDifference(traps, m, seeds, alpha, power, None, None, None)
    return DetectableDifference(traps, m, seeds, alpha, power, q,
                                arrangement_difference(traps, m, seeds, q, discordant_seeds=1),
                                arrangement_difference(traps, m, seeds, q, discordant_seeds=seeds))


def detectable_difference_table(traps: Sequence[int] = STUDY_TRAPS, seeds: int = STUDY_SEEDS,
                                shares: Sequence[float] = STUDY_SHARES, *, alpha: float = 0.05) -> str:
    """docs/study.md's table (checked by tests/analytics/test_effects.py; regenerate with
    `python -m membench.analytics.effects`): per design and share of differing traps, the MDD with one
    discordant seed per differing trap, then with all its seeds alike."""
    head = ["traps × seeds", "paired cells", "all differ: winning traps needed", "all differ: q at 80 % power"]
    head += [f"MDD, {share:.0%} of traps differ: one discordant seed / all seeds alike" for share in shares]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for k in traps:
        rows = [minimum_detectable_difference(k, seeds, round(k * share), alpha=alpha) for share in shares]
        threshold = sign_test_power(k, alpha=alpha).threshold
        cells = [f"{k} × {seeds}", str(k * seeds), "—" if threshold is None else f"{threshold} / {k}",
                 "—" if rows[0].q is None else f"{rows[0].q:.4f}"]
        cells += ["none" if r.q is None or r.one_discordant_seed is None or r.all_seeds_alike is None
                  else f"{100 * r.one_discordant_seed:.1f} pp / {100 * r.all_seeds_alike:.1f} pp"
                  for r in rows]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["MDD_POWER", "POWER_Q", "DesignPower", "DetectableDifference", "PairedEffect", "arrangement_difference",
           "design_power", "detectable_difference_table", "detectable_share", "minimum_detectable_difference",
           "paired_difference_ci"]


if __name__ == "__main__":
    print(detectable_difference_table(), end="")
