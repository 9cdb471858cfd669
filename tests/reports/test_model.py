"""The typed report contract: docs/reports.md lists exactly the models' keys, and from_json/to_json
read and write report.json without losing or inventing a key."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from membench.reports.model import (REPORT_SCHEMA_VERSION, Report, ReportShapeError, from_json, key_reference,
                           key_reference_markdown, to_json)
from tests.reports.test_html import make_report

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reports.md"


def test_docs_key_reference_is_generated_from_the_models():
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"<!-- key reference: begin -->\n(.*?)<!-- key reference: end -->", text, re.S)
    assert block, "docs/reports.md lost its generated key reference block"
    assert block.group(1) == key_reference_markdown(), "regenerate it with: python -m membench.reports.model"


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
                                    "memory_helped": 1, "memory_hurt": 0, "citations_without_memory": 0}
    report["hygiene_by_construct"] = {"B5": {"C1": {"stale_use": {"numerator": 0, "denominator": 1, "rate": 0.0}}}}
    report["validity_gates"] = {
        "baseline": "B0", "traps": 4, "seeds": 2,
        "b0_headroom": {"overall": {**gate, "preferred_threshold": 0.4, "preferred_passed": True},
                        "by_construct": {"C1": gate}, "passed": True, "failing_constructs": []},
        "exclusions": {"B0": {**gate, "reasons": {"model_misconfigured": 1},
                              "examples": {"model_misconfigured": "HTTP 401 on /v1/chat/completions"}}},
        "paired_coverage": {"B5 vs B0": gate}, "passed": True,
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
    held = {"p": 0.25, "p_holm": 0.5, "rejected": False}
    report["families"] = {"baseline": "B0", "baseline_source": "B0 in the run set", "study": "default", "families": [
        {"name": "primary", "role": "primary", "alpha": 0.05, "tests": ["clustered", "per_seed"], "family_size": 2,
         "comparisons": [
             {"a": "B5", "b": "B0", "available": True, "D": 3, "units": 4, "paired_cells": 8,
              "effect": {"difference": 0.375, "ci95": [0.125, 0.625], "paired_cells": 8, "discordant_a": 3,
                         "discordant_b": 0, "bootstrap": {"resamples": 2000, "seed": 1, "level": 0.95}},
              "power": {"units": 4, "alpha": 0.05, "threshold": None, "p_at_threshold": None, "by_q": {"0.9": None},
                        "detectable": [{"power": 0.8, "traps": 4, "differing": 4, "seeds": 2, "q": None,
                                        "one_discordant_seed": None, "all_seeds_alike": None}]},
              "tests": {"clustered": held}, "per_seed": {"1": held}},
             {"a": "B7", "b": "B0", "available": False, "D": None, "units": None, "paired_cells": None, "effect": None,
              "power": None, "tests": {"clustered": {"p": 1.0, "p_holm": 1.0, "rejected": False}}, "per_seed": None}]}]}
    report["outcome_matrix"] = {"traps": ["t1"], "seeds": ["1", "2"],
                                "conditions": {"B0": {"t1": {"1": "pass", "2": "isolation_unavailable"}}}}
    report["provenance"] = {"agents": ["scripted:null"], "agent_kinds": ["scripted"], "models": [],
                            "code_digests": ["ab"], "pack_digests": ["cd"], "seeds": [1, 2], "conditions": ["B0"],
                            "runs": 2}
    report["cost_usd"] = {"status": "recorded", "model_calls": 3, "priced_calls": 2, "cost_usd": 0.5, "conditions": {
        "B0": {"model_calls": 3, "priced_calls": 2, "cost_usd": 0.5, "successes": 1, "cost_per_success_usd": 0.5}}}
    report["canary"] = {"status": "fail", "reason": None, "pack": "smoke-ab", "secrets": 3, "searched": {
        "agent_visible_events": 10, "agent_visible_bytes": 100, "reports": ["report.md"], "report_bytes": 9},
        "own_trap_hits": 2, "leaks": 1, "hits": [{"secret": "s", "trap": "t1", "where": "report report.md",
                                                  "run_trap": None}]}
    report["admission"] = {"status": "validated", "source": "validations/x.json", "authored": 3, "valid": 3,
                           "admitted": 2}
    report["transfer"] = {"baseline": "no_memory", "projects": [{
        "project": "settle", "condition": "learned_bank", "runs": 1, "excluded": 0, "exclusion_reasons": {},
        "passed": 41, "applicable": 41, "ccpf_micro": 1.0, "ccpf_macro": 1.0, "weighted_score_mean": 100.0,
        "raw_score_mean": 100.0, "all_cases_pass_runs": 1, "caps_fired": [], "cap_reasons": [],
        "caps_without_cases": ["BOOT"], "dimensions": [{"dimension": "A", "title": "t", "weight": 30.0, "cases": 11, "passed": 11, "score_mean": 1.0}]}],
        "conditions": [{"condition": "learned_bank", "runs": 2, "excluded": 0, "ccpf_micro": 1.0,
                        "ccpf_macro_over_projects": 1.0, "weighted_score_mean": 100.0,
                        "resources": {"agent_turns": 1.0}, "reduction_vs_baseline": {"agent_turns": 0.0}}],
        "banks": [{"seed": 1, "bank": "learned", "digest": "0" * 64, "files": 6, "ablated_skill": None,
                   "distiller": "scripted"}]}
    report["partial"] = {"reason": "stopped by a signal before the grid finished", "units_planned": 4,
                         "units_not_started": 2, "attempts_abandoned": 1, "resume": "membench run smoke"}
    report["conformance"] = {"registered": 2, "conformant": 1, "evaluated": 1, "conditions": [
        {"condition": "B0", "status": "built_in", "conformant": True, "evaluated": True, "failed_gates": [],
         "record": None, "label": None},
        {"condition": "B5-MEM0", "status": "failed", "conformant": False, "evaluated": False,
         "failed_gates": ["cross_process_identity"], "record": "conformance/ab.json",
         "label": "conformance-unavailable, not an observed loss"}]}
    report["verdicts"] = [{"a": "B5", "b": "B0", "family": "primary", "role": "primary", "family_size": 2,
                           "test": "clustered", "alpha": 0.05, "difference": 0.375, "ci95": [0.125, 0.625],
                           "p": 0.25, "p_holm": 0.5, "rejected": False, "status": "not_publishable",
                           "invalidated_by": ["paired coverage needs ≥ 2 paired valid seeds in ≥ 4 of 4 traps (has 0)"],
                           "line": "B5 vs B0 (primary family of 2): …"}]
    report["requested"] = [{**report["verdicts"][0], "a": "B0", "b": "B5", "difference": -0.375,
                            "ci95": [-0.625, -0.125]}]
    report["verification"] = {"verified": False, "events": 54, "runs": 1, "derived": 18, "compared": 18,
                              "findings": 1, "dead_letters": 1,
                              "first_finding": "run r seq 0: processor rejected the event: Turn before RunStarted"}
    report["schema_version"] = REPORT_SCHEMA_VERSION
    return {key: report[key] for key in [f for f, _ in key_reference() if "." not in f and "[" not in f]}


def test_round_trip_keeps_every_key_and_value():
    document = _full_report()
    assert to_json(from_json(Report, document)) == document


def test_a_report_of_a_newer_schema_version_is_refused_before_its_keys_are_read():
    document = _full_report()
    document["schema_version"] = REPORT_SCHEMA_VERSION + 1
    document["a_key_of_the_newer_contract"] = 1  # named by the version error, not as an unknown key
    with pytest.raises(ReportShapeError, match=rf"report.schema_version: {REPORT_SCHEMA_VERSION + 1} is newer than "
                                               rf"this membench reads \(report.json schema version {REPORT_SCHEMA_VERSION}"):
        from_json(Report, document)


@pytest.mark.parametrize("version", [0, "1", True, 1.0])
def test_a_schema_version_that_is_not_a_positive_integer_is_refused(version):
    document = _full_report()
    document["schema_version"] = version
    with pytest.raises(ReportShapeError, match="report.schema_version: expected a positive integer"):
        from_json(Report, document)


def test_a_report_written_before_the_version_reads_as_it_is():
    document = _full_report()
    del document["schema_version"]
    report = from_json(Report, document)
    assert report.schema_version is None and to_json(report) == document


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
