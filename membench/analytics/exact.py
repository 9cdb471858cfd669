"""Exact paired tests: the trap-clustered sign-flip test, exact McNemar, the equal-weight sign test.

Every p-value here is computed in exact rational arithmetic (Python ints and
:class:`fractions.Fraction`); the only floating-point step is the final division. No sampling, no
normal approximation — with one documented exception: a clustered sign-flip test whose exact
dynamic programme would exceed ``EXACT_MAX_WORK`` (k · S > 2^24, thousands of nonzero units) is
computed by a seeded Monte Carlo sign-flip with ``MONTE_CARLO_DRAWS`` draws instead, and says so
(``SignFlipResult.method``, with the draws, the seed and a Clopper–Pearson interval for the exact
p). Below the bound the exact result is the same number as always.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb

#: The exact clustered test runs when k · S ≤ EXACT_MAX_WORK, k = units with d_t ≠ 0 and
#: S = Σ|d_t|. Its dynamic programme does at most k · (S/2 + 1) additions of integers of up to k
#: bits, so the cost grows like k²·S: at the bound (e.g. k ≈ 3,200 units with |d_t| ≈ 1.7) one
#: test takes about half a second on the 2-core reference machine (docs/benchmarks.md); the
#: published 60-trap figures (k ≤ 60, S ≤ 90, k · S ≤ 5,400) are far below it.
EXACT_MAX_WORK = 1 << 24
#: Sign-flip draws of the Monte Carlo test beyond the bound, and the seed of its generator
#: (numpy's PCG64; the seed is the one the report bootstraps use).
MONTE_CARLO_DRAWS = 1_000_000
MONTE_CARLO_SEED = 20260101
_CHUNK = 1 << 17  # draws per vectorized block (bounds the memory at ~1 MiB per magnitude)


# --------------------------------------------------------------------------------------------
# The exact trap-clustered sign-flip (permutation) test
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignFlipResult:
    """Result of :func:`sign_flip_test`.

    ``statistic`` is D_obs = Σ_t d_t (signed; positive when A wins more paired seeds).
    ``method`` is ``"exact"`` or ``"monte_carlo"`` (the exact programme's work ``work`` = k · S
    exceeded ``EXACT_MAX_WORK``).

    Exact: ``p_value`` = ``p_exact`` as a float; ``extreme``/``states`` are the integer counts
    behind it (sign vectors over the nonzero units with |Σ ε_t d_t| ≥ |D_obs|, and
    2^nonzero_units); ``draws``, ``seed`` and ``ci95`` are None.

    Monte Carlo: ``extreme`` of ``states`` = ``draws`` random sign vectors were at least as
    extreme; ``p_value`` = (extreme + 1) / (draws + 1), a valid p-value (Phipson & Smyth 2010);
    ``ci95`` is the Clopper–Pearson 95% interval for the exact p from extreme of draws;
    ``p_exact`` is None.
    """

    statistic: int
    p_value: float
    p_exact: Fraction | None
    units: int  # units given (including zero contributions)
    nonzero_units: int  # units with d_t ≠ 0: the sign-flip states are 2**nonzero_units
    extreme: int
    states: int
    method: str = "exact"
    work: int = 0  # k · S, compared with EXACT_MAX_WORK
    draws: int | None = None
    seed: int | None = None
    ci95: tuple[float, float] | None = None


def signed_sum_counts(contributions: Sequence[int]) -> dict[int, int]:
    """The exact null distribution of D(ε) = Σ_t ε_t d_t over the nonzero contributions.

    Returns {signed sum: number of sign vectors giving it}; the counts add up to 2^k for the k
    nonzero contributions (zero contributions would double every count and are left out).
    """
    mags = [abs(int(d)) for d in contributions if d]
    total = sum(mags)
    subset = _subset_sum_counts(mags, total)
    return {2 * p - total: c for p, c in enumerate(subset) if c}


def _subset_sum_counts(mags: Sequence[int], total: int, limit: int | None = None) -> list[int]:
    # counts[p] = number of sign vectors whose "+" magnitudes sum to p; then D(ε) = 2p - total.
    # With `limit`, only p ≤ limit is kept: counts[p] depends on counts[p'] for p' ≤ p alone.
    top = total if limit is None else min(total, limit)
    counts = [0] * (top + 1)
    counts[0] = 1
    reach = 0
    for m in mags:
        reach += m
        # counts_new[p] = counts[p] + counts[p - m], done in place from the top down.
        for p in range(min(reach, top), m - 1, -1):
            counts[p] += counts[p - m]
    return counts


def sign_flip_test(contributions: Sequence[int], *, max_exact_work: int = EXACT_MAX_WORK,
                   draws: int = MONTE_CARLO_DRAWS, seed: int = MONTE_CARLO_SEED) -> SignFlipResult:
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

    Only the lower tail is counted: the null distribution is symmetric (flipping every sign maps
    a "+" sum p to S − p), so for D_obs ≠ 0 the count is 2 · Σ_{p ≤ (S − |D_obs|)/2} c[p], the two
    tails being disjoint, and for D_obs = 0 every one of the 2^k vectors is as extreme. The same
    integers as counting both tails, for half the work.

    Beyond the bound (k · S > ``max_exact_work``) the test is :func:`monte_carlo_sign_flip` with
    ``draws`` and ``seed``, and the result says so (``method``).
    """
    ds = [int(d) for d in contributions]
    observed = sum(ds)
    mags = [abs(d) for d in ds if d]
    total = sum(mags)
    work = len(mags) * total
    if work > max_exact_work:
        return monte_carlo_sign_flip(ds, draws=draws, seed=seed, work=work)
    states = 1 << len(mags)
    if observed == 0:
        extreme = states
    else:
        lower = (total - abs(observed)) // 2
        extreme = 2 * sum(_subset_sum_counts(mags, total, limit=lower))
    p_exact = Fraction(extreme, states)
    return SignFlipResult(
        statistic=observed,
        p_value=float(p_exact),
        p_exact=p_exact,
        units=len(ds),
        nonzero_units=len(mags),
        extreme=extreme,
        states=states,
        work=work,
    )


def monte_carlo_sign_flip(contributions: Sequence[int], *, draws: int = MONTE_CARLO_DRAWS,
                          seed: int = MONTE_CARLO_SEED, work: int | None = None) -> SignFlipResult:
    """The trap-clustered sign-flip test by Monte Carlo, for inputs too large for the exact DP.

    Draws ``draws`` sign vectors ε uniformly from {±1}^k and counts X, the draws with
    |Σ_t ε_t |d_t|| ≥ |D_obs|. Units sharing a magnitude m are exchangeable, so the sum over
    them is m · (2B_m − n_m) with B_m ~ Bin(n_m, ½) independent per magnitude: each draw costs
    one binomial variate per distinct |d_t| (at most the number of seeds), not one sign per unit,
    and has exactly the permutation distribution of the exact test.

    Reported: p = (X + 1) / (draws + 1), which keeps Pr(p ≤ α) ≤ α under the null (Phipson &
    Smyth 2010, "Permutation P-values should never be zero"), and the Clopper–Pearson 95%
    interval for the exact p from X of draws (Clopper & Pearson 1934): lower = Beta⁻¹(0.025; X,
    draws − X + 1) (0 when X = 0), upper = Beta⁻¹(0.975; X + 1, draws − X) (1 when X = draws).
    With a million draws its half-width is at most ≈ 0.001 (at p = ½) and ≈ 0.0004 at p = 0.05.
    The generator is numpy's PCG64 seeded with ``seed``: the same input gives the same p.
    """
    import numpy as np

    ds = [int(d) for d in contributions]
    observed = sum(ds)
    mags = Counter(abs(d) for d in ds if d)
    k, total = sum(mags.values()), sum(m * n for m, n in mags.items())
    rng = np.random.default_rng(seed)
    threshold = abs(observed)
    hits = done = 0
    while done < draws:
        size = min(_CHUNK, draws - done)
        sums = np.zeros(size, dtype=np.int64)
        for m, n in sorted(mags.items()):
            sums += m * (2 * rng.binomial(n, 0.5, size=size) - n)
        hits += int(np.count_nonzero(np.abs(sums) >= threshold))
        done += size
    return SignFlipResult(
        statistic=observed,
        p_value=(hits + 1) / (draws + 1),
        p_exact=None,
        units=len(ds),
        nonzero_units=k,
        extreme=hits,
        states=draws,
        method="monte_carlo",
        work=k * total if work is None else work,
        draws=draws,
        seed=seed,
        ci95=clopper_pearson(hits, draws),
    )


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """The Clopper–Pearson (exact binomial) interval for a proportion at ``level``:
    [Beta⁻¹(α/2; x, n − x + 1), Beta⁻¹(1 − α/2; x + 1, n − x)], α = 1 − level, with 0 and 1 at
    the ends x = 0 and x = n (Clopper & Pearson 1934)."""
    from scipy.special import betaincinv

    alpha = 1.0 - level
    low = 0.0 if successes == 0 else float(betaincinv(successes, trials - successes + 1, alpha / 2))
    high = 1.0 if successes == trials else float(betaincinv(successes + 1, trials - successes, 1 - alpha / 2))
    return low, high


# --------------------------------------------------------------------------------------------
# Exact McNemar / exact binomial sign test
# --------------------------------------------------------------------------------------------


def binomial_half_cdf(k: int, n: int) -> Fraction:
    """P(X ≤ k) for X ~ Bin(n, 1/2), exactly: Σ_{i=0}^{k} C(n, i) / 2^n."""
    if k < 0:
        return Fraction(0)
    if k >= n:
        return Fraction(1)
    return Fraction(binomial_prefix_sum(k, n), 1 << n)


def binomial_prefix_sum(k: int, n: int) -> int:
    """Σ_{i=0}^{k} C(n, i), exactly, walking the shorter way.

    Computing each C(n, i) afresh costs O(k) big-integer products per term (a McNemar test on
    100,000 discordant pairs did not finish in minutes); neighbouring coefficients differ by one
    small factor, C(n, i+1) = C(n, i) · (n − i) / (i + 1), exactly divisible. For k ≥ n/2 the
    complement is shorter: Σ_{i≤k} = 2^n − Σ_{i≤n−k−1} (symmetry C(n, i) = C(n, n − i)). For
    k < n/2, either walk up from C(n, 0) (k + 1 terms), or down from the middle:
    Σ_{i≤k} = Σ_{i<n/2} − Σ_{k<i<n/2}, with Σ_{i<n/2} = (2^n − [n even] · C(n, n/2)) / 2 —
    whichever has fewer terms. The same integer either way."""
    if k < 0:
        return 0
    if k >= n:
        return 1 << n
    if 2 * k >= n:
        return (1 << n) - binomial_prefix_sum(n - k - 1, n)
    top = (n + 1) // 2 - 1  # the largest i < n/2
    if k + 1 <= top - k:
        term = total = 1
        for i in range(k):
            term = term * (n - i) // (i + 1)
            total += term
        return total
    if n % 2 == 0:
        middle = comb(n, n // 2)
        below_half = ((1 << n) - middle) >> 1
        term = middle * (n // 2) // (n // 2 + 1)  # C(n, n/2 − 1) = C(n, top)
    else:
        below_half = 1 << (n - 1)
        term = comb(n, top)
    rest = 0
    for i in range(top, k, -1):
        rest += term
        term = term * i // (n - i + 1)
    return below_half - rest


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


# --------------------------------------------------------------------------------------------
# Fisher's exact test on a 2×2 table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FisherResult:
    """Result of :func:`fisher_exact` on the table ``[[a, b], [c, d]]``.

    ``p_value`` is the two-sided p; ``min_attainable_p`` the smallest two-sided p any table with
    these margins can give (when it exceeds a level α, no outcome could be significant: the test
    has no power at these counts)."""

    table: tuple[tuple[int, int], tuple[int, int]]
    p_value: float
    min_attainable_p: float


def fisher_exact(a: int, b: int, c: int, d: int) -> FisherResult:
    """Two-sided Fisher's exact test of the 2×2 table ``[[a, b], [c, d]]`` (rows: two groups,
    columns: outcome yes/no), conditional on all margins.

    With row totals r1 = a + b, r2 = c + d, column total k = a + c and n = r1 + r2, the count x in
    the top-left cell is hypergeometric: P(x) = C(r1, x) · C(r2, k − x) / C(n, k) for
    max(0, k − r2) ≤ x ≤ min(r1, k). The two-sided p is the sum of P(x) over every x with
    P(x) ≤ P(a) (Fisher 1935; Agresti, *Categorical Data Analysis*, 3rd ed., §3.5.1, the
    "probability" two-sided rule that `scipy.stats.fisher_exact` also uses). The comparison is
    made on the exact integers C(r1, x) · C(r2, k − x), so no tolerance is needed; the p-value
    is a Fraction until the final division."""
    for name, value in (("a", a), ("b", b), ("c", c), ("d", d)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"fisher_exact: {name} must be a non-negative integer, got {value!r}")
    r1, r2, k = a + b, c + d, a + c
    n = r1 + r2
    weights = {x: comb(r1, x) * comb(r2, k - x) for x in range(max(0, k - r2), min(r1, k) + 1)}
    total = comb(n, k)  # = Σ weights (Vandermonde)
    ordered = sorted(weights.values())
    # two-sided p of a table of weight w: Σ of every weight ≤ w; its smallest value is at the least
    # likely table(s): the sum of all weights equal to the minimum
    observed = sum(w for w in ordered if w <= weights[a])
    least = sum(w for w in ordered if w == ordered[0])
    return FisherResult(table=((a, b), (c, d)), p_value=float(Fraction(observed, total)),
                        min_attainable_p=float(Fraction(least, total)))
