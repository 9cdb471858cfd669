"""Exact tests pinned to DreamBench-SWE's published numbers (Appendix C.6, E.5, E.6; §6.2, §7)."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from analytics.exact import (
    binomial_half_cdf,
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
