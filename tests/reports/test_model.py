"""The typed report contract: docs/reports.md lists exactly the models' keys, and from_json/to_json
read and write report.json without losing or inventing a key."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from reports.model import Report, ReportShapeError, from_json, key_reference, key_reference_markdown, to_json
from tests.reports.test_html import make_report

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reports.md"


def test_docs_key_reference_is_generated_from_the_models():
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"<!-- key reference: begin -->\n(.*?)<!-- key reference: end -->", text, re.S)
    assert block, "docs/reports.md lost its generated key reference block"
    assert block.group(1) == key_reference_markdown(), "regenerate it with: python -m reports.model"


def test_key_reference_covers_every_section():
    keys = {key for key, _ in key_reference()}
    for key in ("conditions[].failure_counts", "conditions[].by_construct.*.ci95", "validity_gates.exclusions.*.reasons",
                "comparisons.comparisons[].p_holm", "resources.conditions.*.reduction_vs_baseline",
                "validity_gates.b0_headroom.note", "hygiene_by_construct.*.*.*.rate", "ladder[].rank",
                "validity_gates.b0_headroom.reversed.*.passed", "validity_gates.stratum_validity.*.spread.value",
                "validity_gates.warmup.passed", "validity_gates.continuation_audit.inherited_failed",
                "validity_gates.verdicts", "hygiene_panel.*.conditions.*.denominator"):
        assert key in keys


def _full_report() -> dict:
    """A hand-built report with every key (the HTML tests' report, completed)."""
    report = make_report()
    gate = {"name": "g", "value": 0.25, "threshold": 0.5, "direction": "max", "passed": True, "numerator": 1,
            "denominator": 4}
    for entry in report["conditions"]:
        entry["memory_contract"] = {"status_counts": {"passed": 1}, "runtime_failure_counts": {},
                                    "memory_helped": 1, "memory_hurt": 0}
    report["hygiene_by_construct"] = {"B5": {"C1": {"stale_use": {"numerator": 0, "denominator": 1, "rate": 0.0}}}}
    report["validity_gates"] = {
        "baseline": "B0", "traps": 4, "seeds": 2,
        "b0_headroom": {"overall": {**gate, "preferred_threshold": 0.4, "preferred_passed": True},
                        "by_construct": {"C1": gate}, "passed": True, "failing_constructs": []},
        "exclusions": {"B0": {**gate, "reasons": {}}}, "paired_coverage": {"B5 vs B0": gate}, "passed": True,
        "stratum_validity": {"C9": {"reversed": True, "max_condition": "B0", "max_rate": gate, "spread": gate,
                                    "b0_rate": gate, "passed": True}},
        "warmup": gate, "continuation_audit": {**gate, "continuation_cells": 3, "inherited_failed": 1,
                                               "findings": ["t B5 seed 1: S1 started as continuation"]},
        "verdicts": {"b0_headroom": True, "warmup": True}}
    report["validity_gates"]["b0_headroom"].update(reversed={"C9": gate}, note="C9 runs the other way")
    report["hygiene_panel"] = {"stale_use": {"direction": "lower", "numerator": 1, "denominator": 4, "rate": 0.25,
                                             "conditions": {"B5": {"numerator": 1, "denominator": 4, "rate": 0.25}}}}
    report["comparisons"] = {"baseline": "B0", "alpha": 0.05, "test": "t", "comparisons": [
        {"a": "B5", "b": "B0", "D": 3, "discordant_a": 3, "discordant_b": 0, "units": 4, "paired_cells": 8,
         "p_clustered": 0.25, "p_mcnemar": 0.25, "p_majority": 1.0, "p_per_seed": {"1": 0.5}, "p_holm": 0.5,
         "clustered_method": "monte_carlo", "clustered_monte_carlo": {
             "draws": 1000, "seed": 1, "extreme_draws": 250, "p_ci95": [0.22, 0.28], "work": 99, "exact_max_work": 9}}],
        "family_size": 1}
    report["resources"] = {"baseline": "B0", "runs": "r", "cost": "c", "conditions": {"B0": {
        "runs": 8, "successes": 2, "mean": {"input_tokens": 10.0}, "total": {"input_tokens": 80},
        "cost_per_success": {"total_cost": 80.0, "successes": 2, "runs": 8, "value": 40.0},
        "reduction_vs_baseline": None}}}
    report["suites"] = [{"suite": "smoke", "oracle_isolation": "process", "verdicts": 24}]
    return {key: report[key] for key in [f for f, _ in key_reference() if "." not in f and "[" not in f]}


def test_round_trip_keeps_every_key_and_value():
    document = _full_report()
    assert to_json(from_json(Report, document)) == document


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["conditions"][0].pop("excluded"), "report.conditions[0]: missing key 'excluded'"),
    (lambda d: d["inputs"].update(extra=1), "report.inputs: unknown key(s) extra"),
    (lambda d: d["validity_gates"].update(traps="4"), "report.validity_gates.traps"),
    (lambda d: d["comparisons"]["comparisons"][0].update(p_holm=None), "report.comparisons.comparisons[0].p_holm"),
])
def test_a_document_of_another_shape_is_refused_naming_the_key(edit, needle):
    document = copy.deepcopy(_full_report())
    edit(document)
    with pytest.raises(ReportShapeError, match=re.escape(needle)):
        from_json(Report, document)
