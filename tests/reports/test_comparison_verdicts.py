"""One verdict line per comparison on a built report: the primary test, Holm p within its family, Δ
with its CI, and "publishable" or the failed gates that invalidate it; the all_pairs secondary
family (its own Holm, never the primary's); `--compare A:B` read as asked."""

from __future__ import annotations

from html import escape

import pytest

from membench.analytics.cells import Cell
from membench.analytics.holm import holm
from membench.reports import comparison_verdicts as verdicts_module
from membench.reports.comparisons import all_pairs, families_from_cells
from membench.reports.conventions import HYGIENE_LEGEND
from membench.reports.hygiene import HYGIENE_METRICS
from membench.reports.model import ComparisonVerdict, from_json, to_json
from membench.reports.study import FamilySpec, Study, StudyError, parse_study
from tests.reports.test_gate_failures import _passing
from tests.reports.test_html import make_report, render_html, render_markdown, typed

TRAPS = ("t1", "t2", "t3", "t4")
# condition -> (trap, seed) cells that pass; B0 fails everything, B5 passes everything, B1 half
PASSES = {"B0": set(), "B1": {("t1", 1), ("t1", 2), ("t2", 1), ("t2", 2)},
          "B5": {(t, s) for t in TRAPS for s in (1, 2)}}


def _cells(seeds=(1, 2)) -> list[Cell]:
    return [Cell(unit=t, seed=s, condition=c, passed=(t, s) in passing, valid=True, construct="C1")
            for c, passing in PASSES.items() for t in TRAPS for s in seeds]


def _report(seeds=(1, 2), study: Study | None = None, **gates) -> dict:
    """A report dict with families built from real cells and the given validity-gate changes."""
    conditions = list(PASSES)
    fams = families_from_cells(_cells(seeds), conditions, "B0", study or Study("default", None, 0.05, ()))
    report = make_report()
    report["conditions"] = [dict(report["conditions"][0], condition=c) for c in conditions]
    report["families"] = to_json(fams)
    report["validity_gates"] = _passing()["validity_gates"]
    report["validity_gates"]["seeds"] = len(seeds)
    report["validity_gates"].update(gates)
    report["comparisons"]["comparisons"] = []  # the registered families' comparisons only
    return report


def comparison_verdicts(report: dict) -> list[dict]:
    """The verdicts of a report.json document, in their JSON form."""
    return [to_json(v) for v in verdicts_module.comparison_verdicts(typed(report))]


def requested(verdicts: list[dict], a: str, b: str) -> dict:
    found = [from_json(ComparisonVerdict, v, "verdicts") for v in verdicts]
    return to_json(verdicts_module.requested(found, a, b))


def _by_pair(verdicts: list[dict], family: str) -> dict[tuple[str, str], dict]:
    return {(v["a"], v["b"]): v for v in verdicts if v["family"] == family}


def test_all_pairs_is_a_secondary_family_with_its_own_holm_never_the_primarys():
    report = _report()
    primary, pairs = report["families"]["families"]
    assert (primary["role"], primary["family_size"]) == ("primary", 2)
    assert (pairs["name"], pairs["role"], pairs["tests"]) == ("all_pairs", "secondary", ["clustered"])
    # conventions order, the later condition as A (as "X vs B0")
    assert [(c["a"], c["b"]) for c in pairs["comparisons"]] == [("B1", "B0"), ("B5", "B0"), ("B5", "B1")]
    raw = [c["primary"]["p"] for c in pairs["comparisons"]]
    assert [c["primary"]["p_holm"] for c in pairs["comparisons"]] == pytest.approx(holm(raw).adjusted)
    # the primary family's Holm is over its two comparisons only, as before
    primary_raw = [c["primary"]["p"] for c in primary["comparisons"]]
    assert [c["primary"]["p_holm"] for c in primary["comparisons"]] == pytest.approx(holm(primary_raw).adjusted)
    # two conditions: the primary family asks the only pair, so there is no all_pairs family
    assert all_pairs(["B0", "B5"], (FamilySpec("primary", "primary", (("B5", "B0"),), ("clustered",)),)) == ()


def test_a_study_cannot_name_a_family_all_pairs():
    with pytest.raises(StudyError, match=r"s.json: field 'families\[1\].name': 'all_pairs' is membench's own"):
        parse_study({"families": [{"name": "A", "role": "primary", "comparisons": [["B5", "B0"]]},
                                  {"name": "all_pairs", "role": "sensitivity", "comparisons": [["B5", "B1"]]}]},
                    "s.json")


def test_a_study_keeps_its_families_and_all_pairs_comes_after_them():
    study = Study("s.json", None, 0.05, (FamilySpec("A", "primary", (("B5", "B0"),), ("clustered",)),
                                         FamilySpec("B", "sensitivity", (("B5", "B1"),), ("mcnemar",))))
    names = [(f["name"], f["role"], f["family_size"]) for f in _report(study=study)["families"]["families"]]
    assert names == [("A", "primary", 1), ("B", "sensitivity", 1), ("all_pairs", "secondary", 3)]


def test_every_gate_passing_makes_every_comparison_publishable():
    verdicts = comparison_verdicts(_report())
    assert len(verdicts) == 5 and {v["status"] for v in verdicts} == {"publishable"}
    b5 = _by_pair(verdicts, "primary")[("B5", "B0")]
    assert b5["difference"] == 1.0 and b5["rejected"] is False  # 4 traps: the smallest p is 1/8
    assert b5["line"] == ("B5 vs B0 (primary family of 2): Δ +100.0 pp [+100.0, +100.0 pp]; clustered p 0.125, "
                          "Holm p 0.25: not rejected at α = 0.05 — publishable (every validity gate that bears "
                          "on it passed)")


def test_a_one_seed_run_says_in_each_line_that_paired_coverage_needs_two_seeds():
    report = _report(seeds=(1,))
    report["validity_gates"]["paired_coverage"] = {"B5 vs B0": {
        "name": "units", "value": 0, "threshold": 4, "direction": "min", "passed": False, "numerator": 0,
        "denominator": 4}}
    report["validity_gates"]["verdicts"]["paired_coverage B5 vs B0"] = False
    verdicts = comparison_verdicts(report)
    assert {v["status"] for v in verdicts} == {"not_publishable"}
    for v in verdicts:  # pairs without the baseline too, by their own paired traps
        assert v["invalidated_by"] == ["paired coverage needs ≥ 2 paired valid seeds in ≥ 4 of 4 traps (has 0); "
                                       "this run has 1 seed"], v
        assert v["line"].endswith("— NOT publishable: " + v["invalidated_by"][0])


def test_a_failed_gate_invalidates_what_its_mapping_says_and_nothing_else():
    report = _report()
    report["validity_gates"]["exclusions"]["B1"] = {"name": "excl", "value": 0.25, "threshold": 0.05,
                                                     "direction": "max", "passed": False, "numerator": 2,
                                                     "denominator": 8, "reasons": {"harness_error": 2}}
    report["validity_gates"]["verdicts"]["exclusions B1"] = False
    verdicts = comparison_verdicts(report)
    for v in verdicts:
        with_b1 = "B1" in (v["a"], v["b"])
        assert (v["status"] == "not_publishable") == with_b1, v
        if with_b1:
            assert v["invalidated_by"] == ["exclusions B1 25 % > 5 % (2/8) of its cells without a valid outcome"]
    report["validity_gates"]["warmup"] = {"name": "warmup", "value": 0.0, "threshold": 0.8, "direction": "min",
                                          "passed": False, "numerator": 0, "denominator": 6}
    report["validity_gates"]["verdicts"]["warmup"] = False
    for v in comparison_verdicts(report):  # the B0 warm-up invalidates every comparison, all_pairs' included
        assert any(r.startswith("B0 warm-up S1+S2 0 % < 80 % (0/6): the scoring harness or the agent did not work")
                   for r in v["invalidated_by"]), v


def test_compare_reads_the_pair_as_asked_from_the_family_that_registers_it():
    verdicts = comparison_verdicts(_report())
    asked = requested(verdicts, "B1", "B5")  # all_pairs holds it as B5 vs B1
    held = _by_pair(verdicts, "all_pairs")[("B5", "B1")]
    assert (asked["a"], asked["b"], asked["family"]) == ("B1", "B5", "all_pairs")
    assert asked["difference"] == -held["difference"] == -0.5
    assert asked["ci95"] == [-held["ci95"][1], -held["ci95"][0]]
    assert (asked["p"], asked["p_holm"], asked["status"]) == (held["p"], held["p_holm"], held["status"])
    assert asked["line"].startswith("B1 vs B5 (all_pairs family of 3): Δ -50.0 pp")
    assert requested(verdicts, "B5", "B0")["family"] == "primary"  # the primary family first
    missing = requested(verdicts, "B7", "B5")
    assert missing["status"] == "unavailable" and "no registered family has the pair" in missing["line"]


def test_a_transfer_study_has_no_gates_to_judge_by_and_says_so():
    report = _report()
    report["transfer"] = {"baseline": "B0", "projects": [], "conditions": [], "banks": []}
    assert {v["status"] for v in comparison_verdicts(report)} == {"no_gates"}


def test_renderings_show_one_verdict_line_per_comparison_and_the_asked_ones_first():
    report = _report(seeds=(1,))
    report["verdicts"] = comparison_verdicts(report)
    report["requested"] = [requested(report["verdicts"], "B1", "B5")]
    md = render_markdown(report)
    section = md[md.index("## Verdicts"):md.index("## Registered families")]
    assert section.index("Asked with --compare") < section.index("Family primary (primary, 2 comparisons)") \
        < section.index("Family all_pairs (secondary, 3 comparisons)")
    for v in report["requested"] + report["verdicts"]:
        assert f"- {v['line']}\n" in section
    html = render_html(report)
    # 5 verdicts and the asked one, each not publishable (one seed), before the comparisons' tables
    assert html.count('<li><span class="fail">not publishable</span> ') == 6
    for v in report["requested"] + report["verdicts"]:
        assert escape(v["line"]) in html
    assert html.index('id="verdicts"') < html.index('id="comparisons"')


def test_every_hygiene_metric_is_explained_where_it_is_shown():
    assert set(HYGIENE_LEGEND) == set(HYGIENE_METRICS)
    report = make_report()
    report["hygiene_panel"] = {m: {"direction": d, "numerator": 106, "denominator": 146, "rate": 106 / 146,
                                   "conditions": {"B5": {"numerator": 106, "denominator": 146, "rate": 106 / 146}}}
                               for m, d in HYGIENE_METRICS.items()}
    report["validity_gates"] = _passing()["validity_gates"]
    md, html = render_markdown(report), render_html(report)
    for metric, text in HYGIENE_LEGEND.items():
        assert f"- `{metric}`: {text}\n" in md
        assert f"<li><code>{metric}</code>: {escape(text)}</li>" in html
