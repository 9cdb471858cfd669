"""Effect sizes (paired pass-rate difference, trap-cluster bootstrap) and the design's sign-test power."""

from __future__ import annotations

from math import comb

import pytest

from membench.analytics.effects import design_power, paired_difference_ci


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


# ---- minimum detectable difference ----------------------------------------------------------

import itertools  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
from fractions import Fraction  # noqa: E402
from pathlib import Path  # noqa: E402

from membench.analytics.effects import (  # noqa: E402
    arrangement_difference,
    detectable_difference_table,
    detectable_share,
    minimum_detectable_difference,
)
from membench.analytics.exact import sign_flip_test, sign_test_power  # noqa: E402

STUDY_DOC = Path(__file__).resolve().parents[2] / "docs" / "study.md"


@pytest.mark.parametrize("traps", [6, 34, 60, 120])
def test_mdd_is_the_smallest_q_reaching_80_percent_power(traps):
    mdd = minimum_detectable_difference(traps, 3)
    assert sign_test_power(traps, mdd.q).power >= 0.8
    assert sign_test_power(traps, mdd.q - 1e-4).power < 0.8  # one step less does not reach it
    assert mdd.all_seeds_alike == pytest.approx(2 * mdd.q - 1, abs=1e-6) and mdd.differing == traps
    assert mdd.one_discordant_seed == pytest.approx((2 * mdd.q - 1) / 3, abs=1e-6)


def test_six_traps_reject_only_all_one_way_so_q_is_the_sixth_root_of_the_power():
    mdd = minimum_detectable_difference(6, 3)
    assert mdd.q == pytest.approx(0.8 ** (1 / 6), abs=1e-4) and mdd.q >= 0.8 ** (1 / 6)
    none = minimum_detectable_difference(5, 3)  # 5 traps can never reject
    assert (none.q, none.one_discordant_seed, none.all_seeds_alike) == (None, None, None)
    assert minimum_detectable_difference(60, 3, 0).all_seeds_alike is None
    assert detectable_share(5) is None


def test_fewer_differing_traps_scale_the_difference_by_their_share():
    half = minimum_detectable_difference(60, 3, 30)
    assert half.q == detectable_share(30)
    assert half.all_seeds_alike == pytest.approx(30 / 60 * (2 * half.q - 1), abs=1e-6)
    assert half.one_discordant_seed == pytest.approx(30 / 180 * (2 * half.q - 1), abs=1e-6)
    with pytest.raises(ValueError):
        minimum_detectable_difference(10, 3, 11)
    with pytest.raises(ValueError):
        arrangement_difference(10, 5, 3, 0.8, discordant_seeds=4)


def test_one_seed_the_arrangements_coincide():
    mdd = minimum_detectable_difference(60, 1)
    assert mdd.one_discordant_seed == mdd.all_seeds_alike


# An exact computation independent of membench/analytics/exact.py and membench/analytics/effects.py: the trap-clustered
# permutation test's null distribution by convolving each trap's two signs, its rejection region as
# the counts of A-favouring traps whose exact p is below α, the power as the alternative's mass on
# that region (itself a convolution, no binomial formula), and q by bisection on that power.

def _null_counts(weights: list[int]) -> dict[int, int]:
    """Sign vectors ε (each of 2^k) by the sum Σ ε_t w_t."""
    counts = {0: 1}
    for w in weights:
        nxt: dict[int, int] = {}
        for total, n in counts.items():
            for signed in (w, -w):
                nxt[total + signed] = nxt.get(total + signed, 0) + n
        counts = nxt
    return counts


def _rejection_region(traps: int, weight: int, alpha: Fraction = Fraction(1, 20)) -> list[int]:
    """The numbers j of traps favouring A (each contributing +weight, the others −weight) at which the
    exact two-sided permutation test rejects: Pr(|D*| ≥ |D|) < α."""
    counts = _null_counts([weight] * traps)
    states = 2 ** traps
    region = []
    for j in range(traps + 1):
        observed = abs(weight * (2 * j - traps))
        if Fraction(sum(n for d, n in counts.items() if abs(d) >= observed), states) < alpha:
            region.append(j)
    return region


def _favouring_distribution(traps: int, q: float) -> list[float]:
    dist = [1.0]
    for _ in range(traps):
        dist = [(dist[j] if j < len(dist) else 0.0) * (1 - q) + (dist[j - 1] * q if j else 0.0)
                for j in range(len(dist) + 1)]
    return dist


def _independent_mdd(traps: int, seeds: int, discordant: int) -> float:
    """Δ at which the test rejects in A's favour with probability 0.8, every trap differing in
    `discordant` of its `seeds` seeds (all the same way)."""
    region = [j for j in _rejection_region(traps, discordant) if 2 * j > traps]
    low, high = 0.5, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        dist = _favouring_distribution(traps, mid)
        low, high = (low, mid) if sum(dist[j] for j in region) >= 0.8 else (mid, high)
    return traps * discordant * (2 * high - 1) / (traps * seeds)


def test_the_null_convolution_is_every_sign_vector_counted():
    weights = [1, 3, 1, 2, 3, 1, 1, 2, 3, 1]
    brute: dict[int, int] = {}
    for signs in itertools.product((1, -1), repeat=len(weights)):
        total = sum(s * w for s, w in zip(signs, weights))
        brute[total] = brute.get(total, 0) + 1
    assert _null_counts(weights) == brute


def test_the_rejection_region_is_the_same_whatever_the_seeds_a_trap_differs_in():
    assert _rejection_region(34, 1) == _rejection_region(34, 3) == list(range(0, 11)) + list(range(24, 35))
    # and the production test agrees at its edge: 39 of 60 rejects, 38 does not
    assert sign_flip_test([1] * 39 + [-1] * 21).p_value < 0.05 <= sign_flip_test([3] * 38 + [-3] * 22).p_value
    assert min(j for j in _rejection_region(60, 1) if 2 * j > 60) == 39


@pytest.mark.parametrize("traps, one_seed, all_alike", [(60, "12.8", "38.3"), (34, "16.8", "50.5"),
                                                          (120, "8.9", "26.6")])
def test_mdd_under_both_arrangements_matches_an_independent_exact_computation(traps, one_seed, all_alike):
    mdd = minimum_detectable_difference(traps, 3)
    exact_one, exact_all = _independent_mdd(traps, 3, 1), _independent_mdd(traps, 3, 3)
    assert f"{100 * exact_one:.1f}" == f"{100 * mdd.one_discordant_seed:.1f}" == one_seed
    assert f"{100 * exact_all:.1f}" == f"{100 * mdd.all_seeds_alike:.1f}" == all_alike
    # q is rounded up to 1e-4: the stated Δ is never below the exact one, and at most 2e-4 above it
    assert 0 <= mdd.all_seeds_alike - exact_all <= 2e-4
    assert 0 <= mdd.one_discordant_seed - exact_one <= 2e-4 / 3


@pytest.mark.parametrize("weight", [1, 3])
def test_the_clustered_test_itself_reaches_the_stated_power_at_the_mdd(weight):
    # the model simulated through the real sign-flip test: 34 traps × 3 seeds, each trap differing in
    # one seed (weight 1) or all three (weight 3), favouring A with probability q
    rng = random.Random(7)
    mdd = minimum_detectable_difference(34, 3)

    def rate(q: float) -> tuple[float, float]:
        runs, hits, deltas = 400, 0, 0.0
        for _ in range(runs):
            d = [weight if rng.random() < q else -weight for _ in range(34)]
            hits += sign_flip_test(d).p_value < 0.05
            deltas += sum(d) / (34 * 3)
        return hits / runs, deltas / runs

    power, delta = rate(mdd.q)
    assert 0.74 <= power <= 0.88
    stated = mdd.one_discordant_seed if weight == 1 else mdd.all_seeds_alike
    assert delta == pytest.approx(stated, abs=0.03 * weight)  # the Δ those traps produce is the stated one
    assert rate(0.6)[0] < 0.5  # control: well below the MDD the test mostly misses


def test_docs_study_table_is_generated_from_the_code():
    text = STUDY_DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- detectable difference table: begin -->\n(.*?)<!-- detectable difference table: end -->",
                      text, re.S)
    assert block, "docs/study.md lost its generated detectable-difference table"
    assert block.group(1) == detectable_difference_table(), "regenerate it with: python -m membench.analytics.effects"
    assert "| 60 × 3 | 180 | 39 / 60 | 0.6916 | 12.8 pp / 38.3 pp |" in block.group(1)
