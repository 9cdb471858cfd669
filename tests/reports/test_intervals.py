"""A pass fraction of 0/n or n/n has an exact interval, not the bootstrap's
zero-width one, and the report says which interval it shows."""

from __future__ import annotations

import pytest

from membench.analytics.bootstrap import trap_cluster_bootstrap_ci
from membench.analytics.exact import clopper_pearson
from membench.reports.conventions import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CI_BOOTSTRAP, CI_EXACT, ci_method, pass_summary
from membench.reports.markdown import _ci
from membench.reports.model import LadderEntry
from tests.reports.test_html import make_report, render_html, render_markdown

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
    def entry(ci95: list[float | None], method: str) -> LadderEntry:
        return LadderEntry(condition="B0", pass_rate=0.0, ci95=ci95, passed=0, valid=9, rank=1, ci_method=method)

    assert _ci(entry([0.0, 0.7076], CI_EXACT)) == "[0.0%, 70.8%] exact"
    assert _ci(entry([0.2, 0.6], CI_BOOTSTRAP)) == "[20.0%, 60.0%]"


def test_constructs_are_shown_with_their_names_from_the_paper():
    """Constructs appear as "C9 Spurious-lesson rejection / disconfirmation" (DreamBench-SWE
    Table 30), never bare, in report.md and report.html."""
    from membench.reports.conventions import construct_label
    from membench.formats.pack_format import CONSTRUCT_NAMES, CONSTRUCTS

    assert set(CONSTRUCT_NAMES) == set(CONSTRUCTS)
    assert construct_label("C9") == "C9 Spurious-lesson rejection / disconfirmation"
    assert construct_label("C11") == "C11"
    entry = {"pass_rate": 0.0, "ci95": [0.0, 0.7], "ci_method": CI_EXACT}
    report = make_report(run_set="r", suite="s", agent="scripted:null", inputs={"events": 1, "pack_digest": "d"})
    report["conditions"] = [{**report["conditions"][0], "condition": "B0", "cells": 3, "passed": 0,
                             "by_construct": {"C9": {**entry, "cells": 3, "valid": 3, "passed": 0}}, **entry}]
    report["ladder"] = [{"condition": "B0", "rank": 1, "passed": 0, "valid": 3, **entry}]
    report["strata"] = {"constructs": {"C9": {"traps": 3, "pass_rate": {"B0": 0.0}}},
                        "clean_start": {"traps": 0, "pass_rate": {}}, "continuation": {"traps": 3, "pass_rate": {}}}
    report["validity_gates"]["b0_headroom"] = {"overall": None, "by_construct": {}, "failing_constructs": [],
                                               "passed": False}
    md = render_markdown(report)
    assert "| C9 Spurious-lesson rejection / disconfirmation | 3 |" in md
    assert "C9 Spurious-lesson rejection / disconfirmation" in render_html(report)
