"""Exact paired tests: the trap-clustered sign-flip test, exact McNemar, the equal-weight sign test.

Every p-value here is computed in exact rational arithmetic (Python ints and
:class:`fractions.Fraction`); the only floating-point step is the final division. No sampling, no
normal approximation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb


# --------------------------------------------------------------------------------------------
# The exact trap-clustered sign-flip (permutation) test
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignFlipResult:
    """Result of :func:`sign_flip_test`.

    ``statistic`` is D_obs = Σ_t d_t (signed; positive when A wins more paired seeds);
    ``p_value`` = ``p_exact`` as a float; ``extreme``/``states`` are the integer counts behind it
    (sign vectors over the nonzero units with |Σ ε_t d_t| ≥ |D_obs|, and 2^nonzero_units).
    """

    statistic: int
    p_value: float
    p_exact: Fraction
    units: int  # units given (including zero contributions)
    nonzero_units: int  # units with d_t ≠ 0: the sign-flip states are 2**nonzero_units
    extreme: int
    states: int


def signed_sum_counts(contributions: Sequence[int]) -> dict[int, int]:
    """The exact null distribution of D(ε) = Σ_t ε_t d_t over the nonzero contributions.

    Returns {signed sum: number of sign vectors giving it}; the counts add up to 2^k for the k
    nonzero contributions (zero contributions would double every count and are left out).
    """
    mags = [abs(int(d)) for d in contributions if d]
    total = sum(mags)
    subset = _subset_sum_counts(mags, total)
    return {2 * p - total: c for p, c in enumerate(subset) if c}


def _subset_sum_counts(mags: Sequence[int], total: int) -> list[int]:
    # counts[p] = number of sign vectors whose "+" magnitudes sum to p; then D(ε) = 2p - total.
    counts = [0] * (total + 1)
    counts[0] = 1
    reach = 0
    for m in mags:
        reach += m
        # counts_new[p] = counts[p] + counts[p - m], done in place from the top down.
        for p in range(reach, m - 1, -1):
            counts[p] += counts[p - m]
    return counts


def sign_flip_test(contributions: Sequence[int]) -> SignFlipResult:
    """Exact two-sided trap-clustered sign-flip test (DreamBench-SWE Appendix C.6 and E.2).

    For comparison A vs B and unit (trap) t, d_t = #(paired valid seeds: A passes, B fails)
    − #(paired valid seeds: A fails, B passes); D_obs = Σ_t d_t. Under the null the sign of each
    unit's contribution is exchangeable (the labels A/B are swapped for all of a unit's seeds
    together), so

        p = Pr_ε( |Σ_t ε_t |d_t|| ≥ |D_obs| ),  ε_t ∈ {−1, +1} independent and uniform.

    Computed by exact dynamic programming over the signed sums (a subset-sum count with Python
    integers, Σ|d_t| + 1 states), then one division. Units with d_t = 0 contribute a factor 2 to
    both the numerator and the denominator, so they do not change p ("zero-contribution traps ...
    do not increase the number of sign-flip states", C.6); they are counted in ``units``. With no
    nonzero unit, D_obs = 0 and p = 1.
    """
    ds = [int(d) for d in contributions]
    observed = sum(ds)
    mags = [abs(d) for d in ds if d]
    total = sum(mags)
    counts = _subset_sum_counts(mags, total)
    threshold = abs(observed)
    extreme = sum(c for p, c in enumerate(counts) if c and abs(2 * p - total) >= threshold)
    states = 1 << len(mags)
    p_exact = Fraction(extreme, states)
    return SignFlipResult(
        statistic=observed,
        p_value=float(p_exact),
        p_exact=p_exact,
        units=len(ds),
        nonzero_units=len(mags),
        extreme=extreme,
        states=states,
    )


# --------------------------------------------------------------------------------------------
# Exact McNemar / exact binomial sign test
# --------------------------------------------------------------------------------------------


def binomial_half_cdf(k: int, n: int) -> Fraction:
    """P(X ≤ k) for X ~ Bin(n, 1/2), exactly: Σ_{i=0}^{k} C(n, i) / 2^n."""
    if k < 0:
        return Fraction(0)
    if k >= n:
        return Fraction(1)
    return Fraction(sum(comb(n, i) for i in range(k + 1)), 1 << n)


@dataclass(frozen=True)
class McNemarResult:
    """Exact two-sided McNemar test on discordant pairs.

    ``b`` = pairs where the first condition passes and the second fails, ``c`` = the reverse,
    ``n = b + c``; ``statistic`` = b − c (signed, positive when the first condition wins).
    """

    b: int
    c: int
    n: int
    statistic: int
    p_value: float
    p_exact: Fraction


def exact_mcnemar(b: int, c: int) -> McNemarResult:
    """Exact two-sided McNemar test (DreamBench-SWE §6.2, Appendix C.6, Table 32).

        p = min(1, 2 · P(X ≤ min(b, c))),  X ~ Bin(b + c, 1/2);   p = 1 when b + c = 0.

    This is also the exact two-sided sign test of b wins against c losses.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        p = Fraction(1)
    else:
        p = min(Fraction(1), 2 * binomial_half_cdf(min(b, c), n))
    return McNemarResult(b=b, c=c, n=n, statistic=b - c, p_value=float(p), p_exact=p)


# --------------------------------------------------------------------------------------------
# Equal-weight sign-test power (DreamBench-SWE Appendix E.6, Tables 22 and 23)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignTestPower:
    """The smallest rejecting split of k equal-weight nonzero clusters, and its power.

    ``threshold`` = the smallest b with 2·Σ_{i=b}^{k} C(k,i) 2^-k < alpha (b > k/2), or None if
    no split of k clusters rejects; ``p_at_threshold`` is that p; ``power`` = P(X ≥ threshold)
    for X ~ Bin(k, q): the chance of rejecting in the favoured direction when each nonzero
    cluster independently favours it with probability q.
    """

    k: int
    alpha: float
    threshold: int | None
    p_at_threshold: float | None
    q: float | None
    power: float | None


def sign_test_power(k: int, q: float | None = None, *, alpha: float = 0.05) -> SignTestPower:
    """Equal-weight sign-test threshold and power (DreamBench-SWE Appendix E.6).

    With k nonzero clusters of equal weight the clustered test is the exact sign test:
    p(b) = 2 · Σ_{i=b}^{k} C(k, i) 2^-k for b > k/2 (Table 22). ``power`` is the upper binomial
    tail at the threshold (Table 23's "approximate power", the favoured-direction rejection).
    """
    threshold = None
    p_thr = None
    for b in range(k // 2 + 1, k + 1):
        p = exact_mcnemar(b, k - b).p_exact
        if p < Fraction(alpha):
            threshold, p_thr = b, float(p)
            break
    power = None
    if q is not None and threshold is not None:
        qf = float(q)
        power = sum(comb(k, i) * qf**i * (1.0 - qf) ** (k - i) for i in range(threshold, k + 1))
    return SignTestPower(k=k, alpha=alpha, threshold=threshold, p_at_threshold=p_thr, q=q, power=power)
