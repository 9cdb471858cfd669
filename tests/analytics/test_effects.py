"""Effect sizes (paired pass-rate difference, trap-cluster bootstrap) and the design's sign-test power."""

from __future__ import annotations

from math import comb

import pytest

from analytics.effects import design_power, paired_difference_ci


def test_difference_is_discordant_balance_over_paired_cells():
    per_unit = {"t1": [(True, False), (True, True)], "t2": [(False, True)], "t3": [(True, False), (True, False)]}
    effect = paired_difference_ci(per_unit, resamples=500, seed=3)
    assert effect.difference == pytest.approx((3 - 1) / 5) and effect.paired_cells == 5
    assert effect.low <= effect.difference <= effect.high
    # a replicate is Σ d / Σ n over drawn traps: the extremes are t2 alone (−1) and t3 alone (+1)
    assert -1 <= effect.low and effect.high <= 1
    assert paired_difference_ci(per_unit, resamples=500, seed=3) == effect  # seeded, reproducible


def test_all_one_way_gives_a_degenerate_interval_and_no_cells_gives_none():
    effect = paired_difference_ci({f"t{i}": [(True, False)] for i in range(5)}, resamples=200)
    assert (effect.difference, effect.low, effect.high) == (1.0, 1.0, 1.0)
    empty = paired_difference_ci({"t1": []})
    assert (empty.difference, empty.low, empty.high, empty.paired_cells) == (None, None, None, 0)
    with pytest.raises(ValueError):
        paired_difference_ci({"t": [(True, True)]}, resamples=0)


def test_power_is_the_upper_binomial_tail_at_the_sign_tests_threshold():
    power = design_power(10, qs=(0.8,))
    # 10 traps: 9 of 10 gives 2·(C(10,9)+C(10,10))/1024 = 0.0215 < 0.05, 8 of 10 gives 0.109
    assert power.threshold == 9 and power.p_at_threshold == pytest.approx(22 / 1024)
    assert power.by_q["0.8"] == pytest.approx(comb(10, 9) * 0.8**9 * 0.2 + 0.8**10)
    tiny = design_power(5)
    assert tiny.threshold is None and all(v is None for v in tiny.by_q.values())  # 5 traps can never reject
