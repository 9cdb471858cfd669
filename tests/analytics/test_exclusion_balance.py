"""Fisher's exact test and the exclusion-balance gate: p-values against scipy's
`fisher_exact` (an independent implementation, used here only as a reference), the small-count
fallback, and the gate on the counts the attack produces (the baseline's 3 of 3 cells excluded)."""

from __future__ import annotations

import itertools

import pytest
from scipy import stats

from membench.analytics.exact import fisher_exact
from membench.analytics.gates import exclusion_balance


@pytest.mark.parametrize("table", [(0, 3, 3, 0), (8, 2, 1, 5), (1, 9, 11, 3), (0, 60, 10, 50), (2, 58, 3, 57),
                                   (0, 0, 0, 5), (5, 5, 5, 5), (30, 270, 12, 288)])
def test_fisher_matches_scipy(table):
    a, b, c, d = table
    want = stats.fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue
    assert fisher_exact(a, b, c, d).p_value == pytest.approx(want, rel=1e-9)


def test_fisher_on_every_small_table_matches_scipy_and_its_minimum_is_attained():
    for a, b, c, d in itertools.product(range(4), repeat=4):
        got = fisher_exact(a, b, c, d)
        assert got.p_value == pytest.approx(stats.fisher_exact([[a, b], [c, d]]).pvalue, rel=1e-9)
        r1, k = a + b, a + c
        support = range(max(0, k - (c + d)), min(r1, k) + 1)
        ps = [fisher_exact(x, r1 - x, k - x, (c + d) - (k - x)).p_value for x in support]
        assert got.min_attainable_p == pytest.approx(min(ps)) and got.p_value >= got.min_attainable_p


def test_fisher_refuses_a_negative_count():
    with pytest.raises(ValueError, match="c must be a non-negative integer"):
        fisher_exact(1, 2, -1, 3)


def test_the_baseline_losing_all_its_cells_is_flagged_although_fisher_alone_would_not():
    """The attack: under B0 only the agent excludes its 3 cells; B5's 3 cells stay. Fisher's p is
    0.1, the smallest these margins allow, so the test cannot say anything: any difference counts."""
    gate = exclusion_balance(0, 3, 3, 3, condition="B5", baseline="B0")
    assert (gate.p_value, gate.min_attainable_p) == (pytest.approx(0.1), pytest.approx(0.1))
    assert gate.rule == "any_difference" and gate.differs and not gate.passed
    # control: Fisher's p alone at α = 0.05 passes it, the hole the fallback closes
    assert gate.p_value > gate.alpha


def test_equal_rates_pass_whatever_the_counts():
    for counts in ((0, 3, 0, 3), (1, 3, 1, 3), (1, 3, 2, 6), (5, 60, 5, 60)):
        gate = exclusion_balance(*counts)
        assert gate.passed and not gate.differs, (counts, gate)
    assert exclusion_balance(0, 60, 0, 60).rule == "no_exclusions"


def test_with_enough_cells_fisher_decides():
    flagged = exclusion_balance(0, 60, 10, 60)
    assert flagged.rule == "fisher_exact" and flagged.p_value < 0.05 and not flagged.passed
    kept = exclusion_balance(3, 60, 6, 60)  # 5% vs 10%: p ≈ 0.49, the test could have said more
    assert kept.rule == "fisher_exact" and kept.min_attainable_p <= 0.05 and kept.p_value > 0.05 and kept.passed


def test_a_side_without_cells_is_not_compared_and_bad_counts_are_refused():
    assert exclusion_balance(0, 0, 1, 3).rule == "no_cells"
    with pytest.raises(ValueError, match="baseline has 4 excluded of 3 cells"):
        exclusion_balance(0, 3, 4, 3)
