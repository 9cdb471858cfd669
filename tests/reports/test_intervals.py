"""Issue 25, defect 4: a pass fraction of 0/n or n/n has an exact interval, not the bootstrap's
zero-width one, and the report says which interval it shows."""

from __future__ import annotations

import pytest

from analytics.bootstrap import trap_cluster_bootstrap_ci
from analytics.exact import clopper_pearson
from reports.conventions import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CI_BOOTSTRAP, CI_EXACT, ci_method, pass_summary
from reports.markdown import _ci

NONE_OF_NINE = {"t1": [False] * 3, "t2": [False] * 3, "t3": [False] * 3}  # smoke's 3 traps × 3 seeds


def test_the_bootstrap_alone_has_zero_width_at_0_of_9():  # the control: what the report showed before
    ci = trap_cluster_bootstrap_ci(NONE_OF_NINE, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    assert (ci.low, ci.high) == (0.0, 0.0)


@pytest.mark.parametrize("passes", [False, True])
def test_0_of_n_and_n_of_n_get_clopper_pearson_over_traps(passes):
    outcomes = {t: [passes] * 3 for t in NONE_OF_NINE}
    passed, valid, rate, ci95, _ = pass_summary(outcomes)
    assert (passed, valid, ci_method(passed, valid)) == (9 if passes else 0, 9, CI_EXACT)
    low, high = clopper_pearson(3 if passes else 0, 3)  # trials = traps: a trap's seeds may agree
    assert ci95 == [low, high] and high - low > 0.7  # 0/3 traps: up to 70.8%
    assert ci95[1 if not passes else 0] == pytest.approx(0.7076 if not passes else 0.2924, abs=1e-4)
    assert (high - low) >= (lambda c: c[1] - c[0])(clopper_pearson(9 if passes else 0, 9))  # never narrower


def test_a_mixed_fraction_keeps_the_bootstrap_and_says_so():
    outcomes = {"t1": [True, False, True], "t2": [False] * 3, "t3": [True] * 3}
    passed, valid, _, ci95, _ = pass_summary(outcomes)
    assert ci_method(passed, valid) == CI_BOOTSTRAP and ci95[0] < ci95[1]
    assert ci_method(0, 0) is None


def test_report_md_marks_an_exact_interval():
    assert _ci({"ci95": [0.0, 0.7076], "ci_method": CI_EXACT}) == "[0.0%, 70.8%] exact"
    assert _ci({"ci95": [0.2, 0.6], "ci_method": CI_BOOTSTRAP}) == "[20.0%, 60.0%]"
