"""Holm–Bonferroni pinned to DreamBench-SWE Tables 9 and 13 and Appendix E.5."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from membench.analytics.exact import exact_mcnemar
from membench.analytics.holm import holm


def test_table_13_family_a_keeps_unavailable_slots():
    # §6.6 Table 13, Family A: six registered slots, three unavailable (p = 1, not dropped).
    raw = [0.000324063, 1.56049e-06, None, 7.85204e-06, None, None]
    result = holm(raw)
    assert result.family_size == 6 and result.unavailable == 3
    assert result.raw[2] == result.raw[4] == result.raw[5] == 1.0
    assert result.adjusted[0] == pytest.approx(0.00129625, rel=1e-5)
    assert result.adjusted[1] == pytest.approx(9.36294e-06, rel=1e-5)
    assert result.adjusted[3] == pytest.approx(3.92602e-05, rel=1e-5)
    assert (result.adjusted[2], result.adjusted[4], result.adjusted[5]) == (1.0, 1.0, 1.0)
    assert result.rejected == (True, True, False, True, False, False)


def test_dropping_unavailable_slots_would_change_the_answer():
    shrunk = holm([0.000324063, 1.56049e-06, 7.85204e-06])
    assert shrunk.adjusted[0] == pytest.approx(0.000324063 * 1, rel=1e-9)  # last in a family of 3
    assert holm([0.000324063, 1.56049e-06, None, 7.85204e-06, None, None]).adjusted[0] != shrunk.adjusted[0]


def test_table_9_clustered_family():
    raw = [0.5184192657470703, 0.482597, 0.489746, 0.1278667449951172, 0.134251, 0.279096]
    adjusted = holm(raw).adjusted
    # P4 = 6 · 0.1278667449951172, P5 inherits it (monotone step-down), the rest are capped at 1.
    assert adjusted[3] == pytest.approx(0.7672004699707031, rel=1e-15)
    assert adjusted[4] == adjusted[3]
    assert [adjusted[i] for i in (0, 1, 2, 5)] == [1.0, 1.0, 1.0, 1.0]


def test_pooled_mcnemar_family_p1():
    # §7: P1 pooled McNemar b=21, c=15, p=0.405, Holm p=0.815 across the P1–P6 McNemar family,
    # using Table 9's first/second wins as each comparison's (b, c).
    wins = [(21, 15), (22, 31), (7, 12), (22, 11), (33, 18), (32, 19)]
    result = holm([exact_mcnemar(b, c).p_value for b, c in wins])
    assert round(result.raw[0], 3) == 0.405
    assert round(result.adjusted[0], 3) == 0.815


def test_v1_family_of_five():
    # Appendix E.5: b=24, c=3, p=4.92334365845e-05, Holm-adjusted 0.000246167182922 (smallest of five).
    p = exact_mcnemar(24, 3).p_value
    result = holm([p, None, None, None, None])
    assert result.adjusted[0] == pytest.approx(0.000246167182922, rel=1e-11)
    assert holm([0.00732421875, None, None, None, None]).adjusted[0] == 0.03662109375


def test_ties_and_empty():
    assert holm([]).adjusted == ()
    assert holm([0.01, 0.01]).adjusted == (0.02, 0.02)
    with pytest.raises(ValueError):
        holm([1.5])
    with pytest.raises(ValueError):
        holm([float("nan")])


@given(st.lists(st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0)), max_size=12))
def test_holm_is_monotone_capped_and_conservative(raw):
    result = holm(raw)
    pairs = sorted(zip(result.raw, result.adjusted))
    for (r1, a1), (r2, a2) in zip(pairs, pairs[1:]):
        assert a1 <= a2 or r1 == r2
    for r, a in zip(result.raw, result.adjusted):
        assert r <= a <= 1.0
        if r == 1.0:
            assert a == 1.0
