"""Study files: the declared shape, errors naming the file and field, and the baseline's resolution."""

from __future__ import annotations

import json

import pytest

from membench.reports.canary import Secret, search_reports
from membench.reports.model import CanaryProof, CanarySearch
from membench.reports.study import (
    DEFAULT_STUDY,
    TESTS,
    BaselineError,
    StudyError,
    families_for,
    load_study_text,
    resolve_baseline,
)

GOOD = {"baseline": "B0", "alpha": 0.05, "families": [
    {"name": "A", "role": "primary", "comparisons": [["B5", "B0"], ["B1", "B0"]]},
    {"name": "B", "role": "sensitivity", "comparisons": [["B5", "B1"]], "tests": ["per_seed", "clustered"]}]}


def test_a_study_file_reads_into_families_in_declared_order():
    study = load_study_text(json.dumps(GOOD), "s.json")
    assert study.source == "s.json" and study.baseline == "B0" and study.alpha == 0.05
    a, b = study.families
    assert (a.name, a.role, a.comparisons, a.tests) == ("A", "primary", (("B5", "B0"), ("B1", "B0")), TESTS)
    assert b.tests == ("clustered", "per_seed")  # the canonical order, whatever the file's
    assert families_for(study, ["B0", "B5"], "B0") == study.families


def test_the_default_family_is_every_condition_vs_the_baseline():
    (fam,) = families_for(DEFAULT_STUDY, ["B0", "B1", "B5"], "B0")
    assert (fam.name, fam.role, fam.comparisons, fam.tests) == ("primary", "primary", (("B1", "B0"), ("B5", "B0")),
                                                                TESTS)


def _edit(fn):
    doc = json.loads(json.dumps(GOOD))
    fn(doc)
    return json.dumps(doc)


@pytest.mark.parametrize("text, needle", [
    ("{", "s.json: not JSON: line 1"),
    ("[]", "s.json: expected a JSON object"),
    (_edit(lambda d: d.update(extra=1)), "s.json: field 'extra': unknown field"),
    (_edit(lambda d: d.update(alpha=1.5)), "s.json: field 'alpha': expected a number strictly between 0 and 1"),
    (_edit(lambda d: d.update(baseline="")), "s.json: field 'baseline': expected a condition name"),
    (_edit(lambda d: d.update(families=[])), "s.json: field 'families': expected a non-empty list"),
    (_edit(lambda d: d["families"][1].update(role="primary")), "field 'families': expected exactly one family with "
                                                               "role 'primary', got 2"),
    (_edit(lambda d: d["families"][1].update(name="A")), "field 'families[1].name': family 'A' is declared twice"),
    (_edit(lambda d: d["families"][0].update(role="main")), "field 'families[0].role': expected one of primary"),
    (_edit(lambda d: d["families"][0]["comparisons"].append(["B5"])), "field 'families[0].comparisons[2]': expected"),
    (_edit(lambda d: d["families"][0]["comparisons"].append(["B5", "B5"])), "families[0].comparisons[2]"),
    (_edit(lambda d: d["families"][0]["comparisons"].append(["B5", "B0"])), "B5 vs B0 is registered twice"),
    (_edit(lambda d: d["families"][1].update(tests=["wilcoxon"])), "field 'families[1].tests': expected a non-empty"),
    (_edit(lambda d: d["families"][1].update(colour=1)), "field 'families[1].colour': unknown field"),
])
def test_a_bad_study_names_file_and_field(text, needle):
    with pytest.raises(StudyError) as err:
        load_study_text(text, "s.json")
    assert needle in str(err.value)


def test_baseline_resolution_order_and_refusals():
    study = load_study_text(json.dumps(GOOD), "s.json")
    assert resolve_baseline(["B0", "B5"]) == "B0"
    assert resolve_baseline(["B5", "no_memory"]) == "no_memory"
    assert resolve_baseline(["B5"]) == "B5"  # one condition: nothing to compare, nothing to guess
    assert resolve_baseline(["B1", "B5"], "B5", study) == "B5"  # the option over the study
    with pytest.raises(BaselineError, match="s.json: field 'baseline': condition 'B0' is not in the run set"):
        resolve_baseline(["B1", "B5"], None, study)
    with pytest.raises(BaselineError, match=r"conditions \(B1, B5\) include neither B0 nor no_memory"):
        resolve_baseline(["B1", "B5"])


def test_a_secret_in_a_rendered_report_fails_the_proof():
    secrets = [Secret("client_id", "trap-a", "0a1b2c3d4e5f"), Secret("currency", "trap-b", "QWERTYUI")]
    proof = CanaryProof(status="pass", reason=None, pack="p", secrets=2, own_trap_hits=4, leaks=0, hits=[],
                        searched=CanarySearch(agent_visible_events=10, agent_visible_bytes=100, reports=[],
                                              report_bytes=0))
    clean = search_reports(proof, secrets, {"report.md": "nothing here", "report.json": "{}"})
    assert (clean.status, clean.leaks, clean.searched.reports, clean.searched.report_bytes) == \
        ("pass", 0, ["report.md", "report.json"], 14)
    leaked = search_reports(proof, secrets, {"report.md": "the currency is QWERTYUI"})
    assert leaked.status == "fail" and leaked.leaks == 1
    assert [(h.secret, h.trap, h.where) for h in leaked.hits] == [("currency", "trap-b", "report report.md")]
    assert leaked.own_trap_hits == 4


def test_markdown_and_html_render_the_new_parts():
    from tests.reports.test_html import render_html, render_markdown
    from tests.reports.test_model import _full_report

    report = _full_report()
    report["canary"]["hits"][0]["where"] = "report <b>report.md</b>"
    md = render_markdown(report)
    for needle in ("## Registered families", "### primary (primary, 2 comparisons", "+37.5 pp", "[+12.5, +62.5] pp",
                   "unavailable (p = 1)", "## Outcome matrix", "| t1 | pass | isolation_unavailable |",
                   "## Provenance", "$0.5000 over 2/3 priced calls", "3 authored → 3 valid → 2 admitted",
                   "## Canary proof", "**FAIL**", "leak: secret `s` of trap `t1`"):
        assert needle in md, needle
    html = render_html(report)
    for needle in ('<section id="families">', '<section id="matrix">', '<section id="provenance">',
                   '<section id="canary">', '<span class="fail">FAIL</span>', "report &lt;b&gt;report.md&lt;/b&gt;"):
        assert needle in html, needle
    assert "<b>report.md</b>" not in html  # strings from the report are escaped
    older = {k: v for k, v in report.items()
             if k not in ("families", "outcome_matrix", "provenance", "cost_usd", "canary", "admission")}
    assert "Canary" not in render_markdown(older) and 'id="canary"' not in render_html(older)
