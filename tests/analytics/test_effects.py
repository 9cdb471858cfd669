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


# ---- minimum detectable difference (issue 28) ------------------------------------------------

import random  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

from analytics.effects import detectable_difference_table, minimum_detectable_difference  # noqa: E402
from analytics.exact import sign_flip_test, sign_test_power  # noqa: E402

STUDY_DOC = Path(__file__).resolve().parents[2] / "docs" / "study.md"


@pytest.mark.parametrize("traps", [6, 34, 60, 120])
def test_mdd_is_the_smallest_q_reaching_80_percent_power(traps):
    mdd = minimum_detectable_difference(traps, seeds=3)
    assert sign_test_power(traps, mdd.q).power >= 0.8
    assert sign_test_power(traps, mdd.q - 1e-4).power < 0.8  # one step less does not reach it
    assert mdd.difference == pytest.approx(2 * mdd.q - 1, abs=1e-4) and mdd.differing == traps


def test_six_traps_reject_only_all_one_way_so_q_is_the_sixth_root_of_the_power():
    mdd = minimum_detectable_difference(6)
    assert mdd.q == pytest.approx(0.8 ** (1 / 6), abs=1e-4) and mdd.q >= 0.8 ** (1 / 6)
    assert minimum_detectable_difference(5).difference is None  # 5 traps can never reject
    assert minimum_detectable_difference(60, 0).difference is None


def test_fewer_differing_traps_scale_the_difference_by_their_share():
    half = minimum_detectable_difference(60, 30)
    assert half.q == minimum_detectable_difference(30).q
    assert half.difference == pytest.approx(30 / 60 * (2 * half.q - 1), abs=1e-4)
    with pytest.raises(ValueError):
        minimum_detectable_difference(10, 11)


def test_the_clustered_test_itself_reaches_the_stated_power_at_the_mdd():
    # the model behind the figure, simulated through the real sign-flip test: 34 traps × 3 seeds,
    # each trap differing in all its seeds, favouring A with probability q
    rng = random.Random(7)
    q = minimum_detectable_difference(34, seeds=3).q
    def rate(q: float) -> float:
        runs = 400
        return sum(sign_flip_test([3 if rng.random() < q else -3 for _ in range(34)]).p_value < 0.05
                   for _ in range(runs)) / runs
    assert 0.74 <= rate(q) <= 0.88
    assert rate(0.6) < 0.5  # control: well below the MDD the test mostly misses


def test_docs_study_table_is_generated_from_the_code():
    text = STUDY_DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- detectable difference table: begin -->\n(.*?)<!-- detectable difference table: end -->",
                      text, re.S)
    assert block, "docs/study.md lost its generated detectable-difference table"
    assert block.group(1) == detectable_difference_table(), "regenerate it with: python -m analytics.effects"
    assert "| 60 × 3 | 180 | 39 / 60 | 0.6916 | 38.3 pp |" in block.group(1)
