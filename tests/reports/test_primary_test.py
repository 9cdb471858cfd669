"""The report says which test is primary and never shows a secondary test's
rejection without the primary verdict beside it. The smoke shape: 3 traps × 3 seeds, B5 passes
every cell and B0 none — pooled McNemar rejects (p = 2/2⁹) while the primary trap-clustered test
cannot (p = 0.25 with 3 traps)."""

from __future__ import annotations

from membench.analytics.cells import Cell
from membench.reports.comparisons import PRIMARY_TEST, comparisons_from_cells, families_from_cells
from membench.reports.html.study import families_html
from membench.reports.html.table_markup import comparisons_table
from membench.reports.markdown import _family_tests_markdown
from membench.reports.model import FamilyComparison, from_json, to_json
from tests.reports.test_html import make_report, render_markdown, typed

CELLS = [Cell(unit=f"t{t}", seed=s, condition=c, passed=c == "B5") for t in range(3) for s in (1, 2, 3)
         for c in ("B0", "B5")]


def _families() -> dict:
    return to_json(families_from_cells(CELLS, ["B0", "B5"], "B0"))


def test_the_primary_verdict_stands_beside_a_secondary_rejection():
    fams = _families()
    assert fams["primary_test"] == PRIMARY_TEST == "clustered"
    (comp,) = fams["families"][0]["comparisons"]
    assert comp["primary"]["p"] == 0.25 and not comp["primary"]["rejected"]
    assert comp["tests"]["mcnemar"]["rejected"]  # the shape that was misread
    lines = _family_tests_markdown(from_json(FamilyComparison, comp, "comparison"), fams["primary_test"])
    assert lines[0] == "clustered (primary) 0.25 → 0.25 not rejected"
    assert "mcnemar 0.003906 → 0.003906 rejected (secondary; primary NOT rejected)" in lines
    html = families_html(typed(make_report(families=fams)))
    assert "clustered (primary)" in html and "rejected (secondary; primary NOT rejected)" in html


def test_an_older_report_without_the_primary_key_still_renders():  # the control: what was shown before
    fams = _families()
    comp = {k: v for k, v in fams["families"][0]["comparisons"][0].items() if k != "primary"}
    assert "mcnemar 0.003906 → 0.003906 **rejected**" in _family_tests_markdown(
        from_json(FamilyComparison, comp, "comparison"), None)


def test_the_comparisons_table_leads_with_the_primary_test_and_its_verdict():
    family = to_json(comparisons_from_cells(CELLS, ["B0", "B5"], "B0"))
    html = comparisons_table(typed(make_report(comparisons=family)))
    assert html is not None
    assert "p clustered (primary)" in html and "not rejected" in html and "a small secondary p is not a rejection" in html
    md = render_markdown(make_report(run_set="r", agent="scripted:refsol", conditions=[],
                                     inputs={"events": 1, "pack_digest": "d"}, comparisons=family))
    assert "| p clustered (primary) | p Holm | verdict |" in md and "| 0.25 | 0.25 | not rejected |" in md
    assert "Primary test: the exact trap-clustered sign-flip test" in md
