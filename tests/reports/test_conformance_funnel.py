"""A registered slot whose condition is conformance-unavailable is labelled "conformance-
unavailable, not an observed loss" in report.md and report.html, and the funnel is listed; a slot
unavailable for another reason (no runs, no conformance entry) keeps the plain label (control)."""

from __future__ import annotations

from membench.reports.html.study import families_html
from membench.reports.markdown import _families_markdown
from membench.reports.model import CONFORMANCE_UNAVAILABLE, Report
from tests.reports.test_html import make_report, typed

NONE = {"p": 1.0, "p_holm": 1.0, "rejected": False}  # an unavailable slot: raw and adjusted p = 1


def _report(with_funnel: bool) -> Report:
    slot = {"a": "B5-MEM0", "b": "B0", "available": False, "D": None, "units": None, "paired_cells": None,
            "effect": None, "power": None, "per_seed": None, "tests": {"clustered": NONE}, "primary": NONE}
    report = make_report(families={
        "baseline": "B0", "baseline_source": "study", "study": "s.json", "primary_test": "clustered",
        "families": [{"name": "A", "role": "primary", "family_size": 6, "alpha": 0.05, "tests": ["clustered"],
                      "comparisons": [slot]}]})
    if with_funnel:
        report["conformance"] = {"registered": 2, "conformant": 1, "evaluated": 1, "conditions": [
            {"condition": "B5-MEM0", "status": "failed", "conformant": False, "evaluated": False,
             "failed_gates": ["cross_process_identity"], "record": "conformance/x.json", "label": CONFORMANCE_UNAVAILABLE}]}
    return typed(report)


def test_a_conformance_unavailable_slot_is_labelled_and_another_is_not() -> None:
    labelled = _report(True)
    assert f"| B5-MEM0 | B0 | {CONFORMANCE_UNAVAILABLE} unavailable (p = 1)" in _families_markdown(labelled)
    assert f"<strong>unavailable</strong> ({CONFORMANCE_UNAVAILABLE})" in families_html(labelled)
    plain = _report(False)
    assert "| B5-MEM0 | B0 | unavailable (p = 1)" in _families_markdown(plain)
    assert CONFORMANCE_UNAVAILABLE not in families_html(plain)
