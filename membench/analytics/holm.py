"""Holm–Bonferroni step-down adjustment over a registered comparison family.

Source: DreamBench-SWE Appendix C.6 (Holm across P1–P6 at α = 0.05) and Appendix E.3 / §6.6
(a registered slot whose condition is unavailable "remains in its registered Holm family at
p = 1", so the family is never shrunk).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class HolmResult:
    """``raw`` has unavailable slots (None on input) replaced by 1.0; ``adjusted`` is in input
    order; ``rejected[i]`` is ``adjusted[i] < alpha``; ``family_size`` = len(raw)."""

    raw: tuple[float, ...]
    adjusted: tuple[float, ...]
    rejected: tuple[bool, ...]
    alpha: float
    family_size: int
    unavailable: int


def holm(p_values: Sequence[float | None], *, alpha: float = 0.05) -> HolmResult:
    """Holm-adjusted p-values for a family of m comparisons.

    Sort the raw p-values ascending, p_(1) ≤ … ≤ p_(m) (ties keep input order), and set

        p̃_(i) = min(1, max_{j ≤ i} (m − j + 1) · p_(j)),

    which makes the adjusted values monotone in the raw ones and caps them at 1. An unavailable
    comparison is passed as ``None``: it keeps p = 1 and still counts in m.
    """
    raw = tuple(1.0 if p is None else float(p) for p in p_values)
    for p in raw:
        if not 0.0 <= p <= 1.0 or p != p:
            raise ValueError(f"p-values must lie in [0, 1], got {p!r}")
    m = len(raw)
    order = sorted(range(m), key=lambda i: raw[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * raw[i]))
        adjusted[i] = running
    return HolmResult(
        raw=raw,
        adjusted=tuple(adjusted),
        rejected=tuple(p < alpha for p in adjusted),
        alpha=alpha,
        family_size=m,
        unavailable=sum(p is None for p in p_values),
    )
