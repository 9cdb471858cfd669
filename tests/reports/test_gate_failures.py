"""Failed validity gates and the comparisons each invalidates (membench/reports/gate_failures.py), on reports
read from report.json documents: the mapping of every gate family, the places it is not applied, the
renderings (beside the conditions table, before the first plot) and `--strict`'s exit status."""

from __future__ import annotations

import pytest

from membench.reports.gate_failures import EVERY_COMPARISON, failed_gates
from tests.reports.test_html import make_report, render_html, render_markdown, typed


def _gate(name: str, value, threshold, direction: str, passed: bool, numerator: int, denominator: int) -> dict:
    return {"name": name, "value": value, "threshold": threshold, "direction": direction, "passed": passed,
            "numerator": numerator, "denominator": denominator}


def _passing() -> dict:
    """B0, B5 and B3, compared B5 vs B0 and B3 vs B0, every gate passing."""
    report = make_report()
    report["conditions"] = [{**report["conditions"][0], "condition": c} for c in ("B0", "B5", "B3")]
    report["comparisons"]["comparisons"] = [
        {**report["comparisons"]["comparisons"][0], "a": a, "b": "B0"} for a in ("B5", "B3")]
    gates = report["validity_gates"]
    gates["b0_headroom"]["overall"].update(preferred_threshold=0.4, preferred_passed=True)
    gates["exclusions"] = {c: {**_gate(f"exclusions {c}", 0.0, 0.05, "max", True, 0, 72), "reasons": {}}
                           for c in ("B0", "B5", "B3")}
    gates["paired_coverage"] = {f"{c} vs B0": _gate(f"units with >= 2 paired seeds", 24, 22, "min", True, 24, 24)
                                for c in ("B5", "B3")}
    gates["warmup"] = _gate("B0 warm-up S1+S2", 0.9, 0.8, "min", True, 43, 48)
    gates["continuation_audit"] = {**_gate("continuation audit", 1.0, 1.0, "min", True, 72, 72),
                                   "continuation_cells": 40, "inherited_failed": 0, "findings": []}
    gates["reference"] = {"b0_headroom": "B0", "warmup": "B0", "exclusions": "B0"}
    gates["verdicts"] = {"b0_headroom": True, "exclusions B0": True, "exclusions B5": True, "exclusions B3": True,
                         "paired_coverage B5 vs B0": True, "paired_coverage B3 vs B0": True, "warmup": True,
                         "continuation_audit": True}
    return report


def _fail(report: dict, verdict: str) -> dict:
    report["validity_gates"]["verdicts"][verdict] = False
    report["validity_gates"]["passed"] = False
    return report


def test_every_gate_passing_is_no_failure_and_no_line_anywhere():
    report = _passing()
    assert failed_gates(typed(report)) == []
    assert "GATE FAILED" not in render_markdown(report) and "GATE FAILED" not in render_html(report)


def test_exclusions_of_a_condition_invalidate_every_comparison_it_is_a_side_of():
    report = _passing()
    report["families"] = {"baseline": "B0", "baseline_source": "study", "study": "s.json", "families": [  # registered
        {"name": "primary", "role": "primary", "alpha": 0.05, "tests": ["clustered"], "family_size": 1,
         "comparisons": [{"a": "B5", "b": "B3", "available": False, "D": None, "units": None, "paired_cells": None,
                          "effect": None, "power": None, "tests": {}, "per_seed": None}]}]}
    report["validity_gates"]["exclusions"]["B5"].update(value=9 / 72, passed=False, numerator=9)
    (failure,) = failed_gates(typed(_fail(report, "exclusions B5")))
    assert failure.gate == "exclusions B5"
    assert failure.invalidates == ("B5 vs B0", "B5 vs B3")  # the registered family's too, never B3 vs B0
    assert failure.line() == ("GATE FAILED: exclusions B5 12.5 % > 5 % (9/72) of its cells without a valid "
                              "outcome — invalidates B5 vs B0, B5 vs B3")


def test_exclusions_of_the_baseline_invalidate_every_comparison_against_it():
    report = _passing()
    report["validity_gates"]["exclusions"]["B0"].update(value=0.25, passed=False, numerator=18)
    (failure,) = failed_gates(typed(_fail(report, "exclusions B0")))
    assert failure.invalidates == ("B5 vs B0", "B3 vs B0")


@pytest.mark.parametrize("verdict, gate, invalidates", [
    ("paired_coverage B3 vs B0", "paired coverage B3 vs B0", ("B3 vs B0",)),
    ("exclusion_balance B5 vs B0", "exclusion balance B5 vs B0", ("B5 vs B0",)),
    ("continuation_audit", "continuation audit", (EVERY_COMPARISON,)),
    ("a gate added later", "a gate added later", (EVERY_COMPARISON,)),  # unknown is never read as harmless
])
def test_per_comparison_and_whole_run_set_gates(verdict, gate, invalidates):
    report = _passing()
    report["validity_gates"]["paired_coverage"]["B3 vs B0"].update(value=10, passed=False, numerator=10)
    report["validity_gates"]["exclusion_balance"] = {"B5 vs B0": {
        "condition": "B5", "baseline": "B0", "excluded": 0, "cells": 3, "baseline_excluded": 3, "baseline_cells": 3,
        "rate": 0.0, "baseline_rate": 1.0, "p_value": 0.1, "min_attainable_p": 0.1, "alpha": 0.05,
        "rule": "any_difference", "differs": True, "passed": False, "reasons": {}, "baseline_reasons": {"x": 3}}}
    (failure,) = failed_gates(typed(_fail(report, verdict)))
    assert (failure.gate, failure.invalidates) == (gate, invalidates)


def test_warm_up_at_zero_says_the_harness_or_agent_did_not_work_and_invalidates_everything():
    report = _passing()
    report["validity_gates"]["warmup"].update(value=0.0, passed=False, numerator=0, denominator=18)
    (failure,) = failed_gates(typed(_fail(report, "warmup")))
    assert failure.line() == ("GATE FAILED: B0 warm-up S1+S2 0 % < 80 % (0/18): the scoring harness or the agent "
                              "did not work — invalidates every comparison")
    report["validity_gates"]["warmup"].update(value=0.797, numerator=287, denominator=360)
    (failure,) = failed_gates(typed(report))
    assert "B0's S3 failures are not only memory failures" in failure.measured


def test_headroom_overall_invalidates_everything_a_constructs_only_its_stratum():
    report = _passing()
    head = report["validity_gates"]["b0_headroom"]
    head["overall"].update(value=0.6, passed=False, numerator=6, denominator=10)
    head["reversed"] = {"C9": _gate("B0 passes reversed C9", 0.25, 0.5, "min", False, 1, 4)}
    head.update(passed=False, failing_constructs=["C9"])
    overall, c9 = failed_gates(typed(_fail(report, "b0_headroom")))
    assert (overall.gate, overall.invalidates) == ("B0 headroom", (EVERY_COMPARISON,))
    assert overall.measured.startswith("60 % > 50 % (6/10)")
    assert (c9.gate, c9.invalidates) == ("B0 passes reversed C9", ("construct C9's stratum in every comparison",))


def test_stratum_validity_names_the_broken_clauses_and_invalidates_the_stratum():
    report = _passing()
    report["validity_gates"]["stratum_validity"] = {"C3": {
        "reversed": False, "max_condition": "B5", "max_rate": _gate("max", 1 / 7, 0.15, "min", False, 1, 7),
        "spread": _gate("spread", 1 / 7, 0, "above", True, 0, 0), "b0_rate": _gate("b0", 0.0, 0.5, "max", True, 0, 7),
        "passed": False}}
    (failure,) = failed_gates(typed(_fail(report, "stratum_validity C3")))
    assert failure.measured == "best condition (B5) 14.3 % < 15 % (1/7)"
    assert failure.invalidates == ("construct C3's stratum in every comparison",)


def test_b0_gates_are_not_applied_without_b0_cells():
    """An imported A/B pack runs no_memory, not B0: its report has no B0 to judge (headroom note,
    warm-up 0/0), and a line would be noise."""
    report = _passing()
    report["conditions"] = [{**c, "condition": n} for c, n in zip(report["conditions"], ("no_memory", "remem"))]
    report["validity_gates"]["b0_headroom"].update(overall=None, passed=False, note="no B0 cells in this run set")
    report["validity_gates"]["warmup"].update(value=None, passed=False, numerator=0, denominator=0)
    _fail(_fail(report, "b0_headroom"), "warmup")
    assert failed_gates(typed(report)) == []


def test_a_transfer_study_report_is_not_judged_by_dreambench_gates():
    report = _fail(_passing(), "continuation_audit")
    assert failed_gates(typed(report))
    report["transfer"] = {"baseline": None, "projects": [], "conditions": [], "banks": []}
    assert failed_gates(typed(report)) == []


def test_a_report_json_without_verdicts_is_judged_by_the_gates_it_has():
    report = _passing()
    gates = report["validity_gates"]
    del gates["verdicts"]
    gates["paired_coverage"]["B5 vs B0"].update(value=3, passed=False, numerator=3)
    assert [f.gate for f in failed_gates(typed(report))] == ["paired coverage B5 vs B0"]


def test_renderings_show_failed_gates_beside_the_numbers():
    report = _passing()
    report["validity_gates"]["warmup"].update(value=0.0, passed=False, numerator=0, denominator=18)
    _fail(report, "warmup")
    md = render_markdown(report)
    table_end = md.index("| B3 |")
    line = md.index("- **GATE FAILED**: B0 warm-up S1+S2 0 % < 80 % (0/18)")
    assert table_end < line < md.index("## Comparisons") and "invalidates every comparison" in md[line:]
    page = render_html(report)
    block = page.index('id="failed-gates"')
    assert block < page.index('<section id="ladder">')  # before the first number shown
    assert "<strong>GATE FAILED</strong>: B0 warm-up S1+S2" in page[block:]


def test_strict_exits_3_only_when_a_gate_failed(capsys):
    from membench.commands.cli_helpers import EXIT_GATE_FAILED, exit_if_gates_failed

    passing, failing = _passing(), _fail(_passing(), "continuation_audit")
    exit_if_gates_failed(typed(failing), strict=False)  # the default: the lines are printed, the status is 0
    exit_if_gates_failed(typed(passing), strict=True)
    with pytest.raises(SystemExit) as stopped:
        exit_if_gates_failed(typed(failing), strict=True)
    assert stopped.value.code == EXIT_GATE_FAILED == 3
    assert "continuation audit" in capsys.readouterr().err
