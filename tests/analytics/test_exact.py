"""Exact tests pinned to DreamBench-SWE's published numbers (Appendix C.6, E.5, E.6; §6.2, §7)."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from membench.analytics.exact import (
    EXACT_MAX_WORK,
    MONTE_CARLO_DRAWS,
    MONTE_CARLO_SEED,
    binomial_half_cdf,
    binomial_prefix_sum,
    clopper_pearson,
    exact_mcnemar,
    sign_flip_test,
    sign_test_power,
    signed_sum_counts,
)


def equal_weight(wins: int, losses: int) -> list[int]:
    """T = wins + losses units, each with one discordant seed: d_t = +1 or −1."""
    return [1] * wins + [-1] * losses


# Appendix E.6, Table 22: equal-weight sign-test thresholds (k nonzero clusters, split, exact p).
TABLE_22 = [
    (20, 15, 5, 0.041389),
    (30, 21, 9, 0.042774),
    (40, 27, 13, 0.038477),
    (50, 33, 17, 0.032839),
    (60, 39, 21, 0.027340),
    (60, 38, 22, 0.051894),  # "so a 38–22 trap split is not below 0.05"
]


@pytest.mark.parametrize(("k", "wins", "losses", "published"), TABLE_22)
def test_power_table_thresholds(k, wins, losses, published):
    result = sign_flip_test(equal_weight(wins, losses))
    assert result.statistic == wins - losses
    assert result.nonzero_units == k and result.states == 2**k
    assert round(result.p_value, 6) == published
    # exactly the paper's formula p = 2 Σ_{i=b}^{k} C(k, i) 2^-k
    assert result.p_exact == Fraction(2 * sum(comb(k, i) for i in range(wins, k + 1)), 2**k)


def test_power_table_direction_does_not_matter():
    assert sign_flip_test(equal_weight(21, 39)).p_value == sign_flip_test(equal_weight(39, 21)).p_value
    assert sign_flip_test(equal_weight(21, 39)).statistic == -18


@pytest.mark.parametrize(
    ("k", "threshold", "p", "powers"),
    [  # Table 22 thresholds and Table 23 power at q = 0.65, 0.70, 0.75
        (20, 15, 0.041389, (0.245, 0.416, 0.617)),
        (30, 21, 0.042774, (0.358, 0.589, 0.803)),
        (40, 27, 0.038477, (0.441, 0.703, 0.897)),
        (50, 33, 0.032839, (0.506, 0.782, 0.945)),
        (60, 39, 0.027340, (0.559, 0.838, 0.970)),
    ],
)
def test_sign_test_threshold_and_power(k, threshold, p, powers):
    for q, published in zip((0.65, 0.70, 0.75), powers):
        result = sign_test_power(k, q)
        assert result.threshold == threshold
        assert round(result.p_at_threshold, 6) == p
        assert round(result.power, 3) == published


def test_exact_mcnemar_v1_structured_anchor():
    # Appendix E.5: b = 24, c = 3, exact p = 4.92334365845e-05.
    result = exact_mcnemar(24, 3)
    assert result.n == 27 and result.statistic == 21
    assert result.p_value == pytest.approx(4.92334365845e-05, rel=1e-11)
    assert result.p_exact == 2 * Fraction(1 + 27 + 351 + 2925, 2**27)


@pytest.mark.parametrize(("b", "c", "published"), [(12, 8, 0.503), (21, 15, 0.405)])
def test_exact_mcnemar_published(b, c, published):
    # §6.2 (v1 hybrid vs B5: b=12, c=8, p=0.503) and §7 (v2 P1 pooled: b=21, c=15, p=0.405)
    assert round(exact_mcnemar(b, c).p_value, 3) == published


def test_exact_mcnemar_edges_and_scipy_agreement():
    assert exact_mcnemar(0, 0).p_value == 1.0
    assert exact_mcnemar(5, 5).p_value == 1.0  # 2·P(X ≤ 5) > 1 is capped
    assert exact_mcnemar(6, 0).p_value == 0.03125  # v2.1 per-seed value, §6.6
    assert exact_mcnemar(5, 1).p_value == 0.21875
    for b, c in [(0, 7), (3, 9), (17, 2), (30, 31), (1, 40)]:
        assert exact_mcnemar(b, c).p_value == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
    with pytest.raises(ValueError):
        exact_mcnemar(-1, 2)


def test_binomial_half_cdf():
    assert binomial_half_cdf(-1, 4) == 0
    assert binomial_half_cdf(4, 4) == 1
    assert binomial_half_cdf(1, 4) == Fraction(5, 16)


# Table 9: the v2 clustered P-family. The |d_t| multisets below are the ones consistent with each
# row's b, c and D (found by exhaustive search over 1-, 2- and 3-seed trap contributions); the
# exact test on them returns the published p-values.
TABLE_9 = {
    # name: (n |d|=1, n |d|=2, n |d|=3, D, published p)
    "P1": (12, 7, 2, +6, 0.5184192657470703),
    "P2": (9, 7, 10, -9, 0.482597),
    "P3": (9, 1, 2, -5, 0.489746),
    "P4": (14, 5, 1, +11, 0.1278667449951172),
    "P5": (15, 9, 4, +15, 0.134251),
    "P6": (8, 8, 9, +13, 0.279096),
}


def signed_vector(n1: int, n2: int, n3: int, target: int) -> list[int]:
    """Some signing of the magnitudes whose sum is ``target`` (greedy from the largest)."""
    mags = [3] * n3 + [2] * n2 + [1] * n1
    total = sum(mags)
    positive_sum = (total + target) // 2
    signs = []
    for m in mags:
        if positive_sum >= m:
            signs.append(m)
            positive_sum -= m
        else:
            signs.append(-m)
    assert positive_sum == 0 and sum(signs) == target
    return signs


@pytest.mark.parametrize("name", sorted(TABLE_9))
def test_table_9_clustered_p_values(name):
    n1, n2, n3, d, published = TABLE_9[name]
    # 60 traps: the nonzero ones plus zero-contribution traps, which must not change p.
    vector = signed_vector(n1, n2, n3, d)
    vector += [0] * (60 - len(vector))
    result = sign_flip_test(vector)
    assert result.statistic == d
    assert result.units == 60 and result.nonzero_units == n1 + n2 + n3
    if name in ("P1", "P4"):  # printed to full double precision in the paper
        assert result.p_value == published
    else:
        assert round(result.p_value, 6) == published


def test_v1_clustered_p_value():
    # Appendix E.5: 22 contributing traps, b − c = 21, raw clustered p = 0.00732421875 = 15/2048.
    vector = signed_vector(5, 5, 4, 21) + [0] * 8
    result = sign_flip_test(vector)
    assert result.p_exact == Fraction(15, 2048)
    assert result.p_value == 0.00732421875


def test_zero_contributions_do_not_change_p():
    base = sign_flip_test([3, -1, 2, 1])
    padded = sign_flip_test([0, 3, 0, -1, 2, 0, 1])
    assert padded.p_exact == base.p_exact
    assert padded.units == 7 and padded.nonzero_units == 4
    # and the factor-2 accounting: with zeros enumerated explicitly, counts double
    assert brute_force(padded_vector := [0, 3, -1]) == sign_flip_test(padded_vector).p_exact


def test_no_discordance_gives_p_one():
    assert sign_flip_test([]).p_value == 1.0
    assert sign_flip_test([0, 0, 0]).p_value == 1.0
    assert sign_flip_test([0, 0, 0]).statistic == 0


def test_one_unit_all_discordant():
    # one trap, d = 3: the two sign vectors give ±3, both as extreme as 3 → p = 1
    assert sign_flip_test([3]).p_value == 1.0
    # two traps +3, +3: only (+,+) and (−,−) reach |6| → p = 1/2
    assert sign_flip_test([3, 3]).p_exact == Fraction(1, 2)


def brute_force(contributions: list[int]) -> Fraction:
    """p by enumerating every sign vector over every unit (zero units included)."""
    observed = abs(sum(contributions))
    hits = total = 0
    for signs in itertools.product((-1, 1), repeat=len(contributions)):
        total += 1
        hits += abs(sum(s * d for s, d in zip(signs, contributions))) >= observed
    return Fraction(hits, total)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=-3, max_value=3), max_size=12))
def test_dp_agrees_with_brute_force_trap_sized(contributions):
    assert sign_flip_test(contributions).p_exact == brute_force(contributions)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=-25, max_value=25), max_size=10))
def test_dp_agrees_with_brute_force_large_weights(contributions):
    assert sign_flip_test(contributions).p_exact == brute_force(contributions)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=-5, max_value=5), max_size=14))
def test_null_distribution_is_symmetric_and_complete(contributions):
    dist = signed_sum_counts(contributions)
    k = sum(1 for d in contributions if d)
    assert sum(dist.values()) == 2**k
    assert all(dist[s] == dist.get(-s) for s in dist)


# -- fast exact arithmetic, and the bounded exact test ----------------------------


def full_count(contributions: list[int]) -> int:
    """Sign vectors at least as extreme, by counting both tails of the whole null distribution."""
    observed = abs(sum(contributions))
    return sum(c for s, c in signed_sum_counts(contributions).items() if abs(s) >= observed)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=-6, max_value=6), min_size=0, max_size=60))
def test_lower_tail_count_equals_the_two_tailed_count(contributions):
    result = sign_flip_test(contributions)
    assert result.method == "exact"
    assert result.extreme == full_count(contributions)
    assert result.states == 2 ** sum(1 for d in contributions if d)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=400), st.data())
def test_binomial_prefix_sum_is_the_plain_sum(n, data):
    k = data.draw(st.integers(min_value=-1, max_value=n + 1))
    expected = sum(comb(n, i) for i in range(max(0, min(k, n) + 1)))
    assert binomial_prefix_sum(k, n) == expected
    if 0 <= k <= n:  # the reference used on longer rows below
        assert upward_sum(k, n) == expected


def upward_sum(k: int, n: int) -> int:
    """Σ_{i≤k} C(n, i) by the plain upward recurrence: the reference for rows too long to sum
    fresh coefficients over (the walk under test goes down from the middle there)."""
    term = total = 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return total


@pytest.mark.parametrize(("k", "n"), [(0, 5000), (1200, 5000), (2400, 5000), (2499, 5000), (2500, 5000),
                                      (2600, 5001), (4999, 5000), (1700, 4001), (1999, 4001)])
def test_binomial_prefix_sum_every_walk_on_large_rows(k, n):
    assert binomial_prefix_sum(k, n) == upward_sum(k, n)


def test_mcnemar_on_a_large_table_is_exact():
    # 40,000 discordant pairs (a per-seed table of a 600,000-row file): fresh coefficients took minutes
    result = exact_mcnemar(20_500, 19_500)
    assert result.p_exact == 2 * Fraction(upward_sum(19_500, 40_000), 1 << 40_000)


def mixed(k: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice((1, 1, 1, 2, 2, 3)) * rng.choice((1, -1)) for _ in range(k)]


def test_the_exact_bound_is_inclusive():
    vector = mixed(40)
    work = 40 * sum(abs(d) for d in vector)
    assert sign_flip_test(vector, max_exact_work=work).method == "exact"
    beyond = sign_flip_test(vector, max_exact_work=work - 1, draws=20_000)
    assert (beyond.method, beyond.work, beyond.p_exact, beyond.draws) == ("monte_carlo", work, None, 20_000)


@pytest.mark.parametrize("shift", [0, 40, 90])
def test_monte_carlo_interval_holds_the_exact_p(shift):
    vector = mixed(600) + [1] * shift  # from no effect to a clear one
    exact = sign_flip_test(vector)
    assert exact.method == "exact"
    mc = sign_flip_test(vector, max_exact_work=0, draws=200_000, seed=MONTE_CARLO_SEED)
    low, high = mc.ci95
    assert mc.method == "monte_carlo" and low <= exact.p_value <= high
    assert mc.p_value == (mc.extreme + 1) / (mc.draws + 1)
    assert abs(mc.p_value - exact.p_value) < 0.01
    again = sign_flip_test(vector, max_exact_work=0, draws=200_000, seed=MONTE_CARLO_SEED)
    assert again == mc  # seeded: the same input gives the same p


def test_monte_carlo_p_is_never_zero():
    result = sign_flip_test([3] * 50, max_exact_work=0, draws=1000)
    assert result.extreme == 0 and result.p_value == 1 / 1001 and result.ci95[0] == 0.0


def test_a_large_input_leaves_the_exact_programme():
    vector = mixed(20_000)
    result = sign_flip_test(vector)
    assert result.method == "monte_carlo" and result.work > EXACT_MAX_WORK
    assert (result.draws, result.seed) == (MONTE_CARLO_DRAWS, MONTE_CARLO_SEED)
    assert result.nonzero_units == 20_000 and result.statistic == sum(vector)


def test_clopper_pearson_matches_closed_forms():
    # x = 0: upper = 1 − (α/2)^(1/n); x = n: lower = (α/2)^(1/n)
    assert clopper_pearson(0, 10)[1] == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-12)
    assert clopper_pearson(10, 10)[0] == pytest.approx(0.025 ** (1 / 10), rel=1e-12)
    low, high = clopper_pearson(50, 1000)
    assert low == pytest.approx(0.03733, abs=1e-5) and high == pytest.approx(0.06539, abs=1e-5)
