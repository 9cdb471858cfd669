"""Cost and reliability beside the pass rate (membench/reports/effort.py): the figures from run rows, their
place in report.json, and how report.md and report.html show them."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from membench.reports.effort import condition_efforts, condition_pass_hat_k, effort_markdown, effort_row, memory_call_row
from membench.reports.model import ConditionEffort, ConditionSummary, PassHatK, from_json, to_json
from membench.warehouse.rows import RunSummaryRow
from tests.warehouse.row_fixtures import typed_row
from tests.reports.test_html import make_report, render_html, render_markdown, typed


def _entry(**entry) -> ConditionSummary:
    """A condition's entry of a report.json document with ENTRY's keys, read as the renderers take it."""
    return from_json(ConditionSummary, {**make_report()["conditions"][0], **entry}, "entry")


def row(condition: str, task: str, seed: int, passed: bool, *, tokens=(100, 20), ms=2000, sessions=2, memory=0,
        excluded=False, status="completed") -> RunSummaryRow:
    return typed_row("run_results", **{"run_id": f"{condition}-{task}-{seed}", "condition": condition, "task": task, "seed": seed,
            "status": status, "excluded": excluded, "exclusion_reason": "isolation_unavailable" if excluded else None,
            "error_type": None, "scored_passed": passed, "input_tokens": tokens[0], "output_tokens": tokens[1],
            "duration_ms": ms, "sessions": sessions, "memory_tokens_admitted": memory})


RUNS = [
    # B0: 4 valid cells, 1 pass; no memory
    row("B0", "t1", 1, True), row("B0", "t1", 2, False), row("B0", "t2", 1, False), row("B0", "t2", 2, False),
    # B5: memory doubles the prompt; 3 valid cells, all pass, and one excluded cell (not counted anywhere)
    row("B5", "t1", 1, True, tokens=(200, 20), memory=90), row("B5", "t1", 2, True, tokens=(200, 20), memory=90),
    row("B5", "t2", 1, True, tokens=(200, 20), memory=90),
    row("B5", "t2", 2, False, tokens=(9999, 9999), ms=99_000, memory=9999, excluded=True, status="excluded"),
]
COSTS = {"B5-t1-1": (2, 0.03), "B5-t1-2": (2, 0.03), "B5-t2-1": (2, 0.03), "B5-t2-2": (5, 7.0)}


def test_tokens_cost_and_time_over_valid_cells_per_cell_and_per_pass():
    efforts = condition_efforts(RUNS, COSTS)
    b0, b5 = efforts["B0"], efforts["B5"]
    assert (b0.cells, b0.passes, b0.sessions) == (4, 1, 8)
    assert (b0.tokens.total, b0.tokens.per_cell, b0.tokens.per_pass) == (480, 120, 480)
    assert (b0.wall_time_s.per_cell, b0.wall_time_s.per_pass) == (2.0, 8.0)
    assert b0.cost_usd is None and b0.priced_calls == 0  # no priced call: unknown, not free
    assert (b0.memory_tokens_read, b0.memory_tokens_per_session) == (0, 0.0)
    # the excluded cell's tokens, time, memory and USD stay out
    assert (b5.cells, b5.passes, b5.sessions) == (3, 3, 6)
    assert (b5.tokens.per_cell, b5.tokens.per_pass) == (220, 220)
    assert b5.cost_usd.total == pytest.approx(0.09) and b5.cost_usd.per_pass == pytest.approx(0.03)
    assert b5.priced_calls == 6
    assert (b5.memory_tokens_read, b5.memory_tokens_per_session) == (270, 45.0)


def test_no_pass_leaves_per_pass_undefined_and_shown_as_a_dash():
    runs = [row("B0", "t1", 1, False), row("B0", "t1", 2, False)]
    effort = condition_efforts(runs, {"B0-t1-1": (1, 0.5)})["B0"]
    assert effort.tokens.per_pass is None and effort.cost_usd.per_pass is None and effort.wall_time_s.per_pass is None
    entry = _entry(condition="B0", pass_rate=0.0, effort=to_json(effort),
                   pass_hat_k=to_json(condition_pass_hat_k(runs)["B0"]))
    cells = dict(zip(("condition", "pass rate", "pass^k", "tok/cell", "tok/pass", "usd/cell", "usd/pass"),
                     effort_row(entry)))
    assert cells["tok/cell"] == "120" and cells["tok/pass"] == "—"
    assert cells["usd/cell"] == "$0.2500" and cells["usd/pass"] == "—"
    assert cells["pass^k"] == "0.0% (0/1 traps, k=2)"


def test_pass_hat_k_per_condition_uses_the_run_sets_seeds():
    got = condition_pass_hat_k(RUNS + [row("B0", "t3", 3, True)])  # a third seed anywhere makes k = 3
    assert got["B0"].k == got["B5"].k == 3
    assert (got["B5"].complete, got["B5"].incomplete, got["B5"].value) == (0, 2, None)
    got = condition_pass_hat_k(RUNS)
    assert (got["B0"].complete, got["B0"].passed, got["B0"].value) == (2, 0, 0.0)
    # B5's t2 has an excluded seed: left out, so pass^k is over t1 alone
    assert (got["B5"].complete, got["B5"].passed, got["B5"].incomplete, got["B5"].value) == (1, 1, 1, 1.0)


def test_the_figures_are_part_of_each_condition_in_report_json_and_round_trip():
    efforts, reliability = condition_efforts(RUNS, COSTS), condition_pass_hat_k(RUNS)
    report = make_report()
    for entry in report["conditions"]:
        if entry["condition"] in efforts:
            entry["effort"] = to_json(efforts[entry["condition"]])
            entry["pass_hat_k"] = to_json(reliability[entry["condition"]])
    b5 = next(e for e in report["conditions"] if e["condition"] == "B5")
    assert to_json(from_json(ConditionEffort, b5["effort"], "effort")) == b5["effort"]
    assert to_json(from_json(PassHatK, b5["pass_hat_k"], "pass_hat_k")) == b5["pass_hat_k"]
    # both are declared, optional keys of a condition's entry (a report.json written before lacks them)
    declared = {f.name: f for f in fields(ConditionSummary)}
    assert all(declared[k].metadata.get("omit_if_none") for k in ("effort", "pass_hat_k"))
    assert b5["effort"]["cost_usd"]["per_cell"] == pytest.approx(0.03)
    # an older report.json without them still reads, and renders without the part
    old = make_report()
    assert effort_markdown(typed(old)) == "" and "Cost and reliability" not in render_html(old)

    report["validity_gates"]["b0_headroom"]["overall"].update(preferred_threshold=0.4, preferred_passed=True)
    md = render_markdown(report)
    assert "## Cost and reliability" in md
    assert md.index("## Cost and reliability") < md.index("## Comparisons")
    assert "| B5 | 75.0% | 100.0% (1/1 traps, k=2, 1 incomplete) | 220 | 220 | $0.0300 | $0.0300 | 2.0 | 2.0 | 45.0 |" in md
    assert "| B0 | 25.0% | 0.0% (0/2 traps, k=2) | 120 | 480 | — | — | 2.0 | 8.0 | 0.0 |" in md
    html = render_html(report)
    section = html[html.index('<section id="cost-reliability">'):]
    assert html.index('id="conditions"') < html.index('id="cost-reliability"') < html.index('id="comparisons"')
    assert "$0.0300" in section and "100.0% (1/1 traps, k=2, 1 incomplete)" in section


def test_condition_names_stay_inert_in_the_html_table():
    runs = [replace(row("B0", "t1", 1, True), condition="<b>evil&co</b>")]
    report = make_report()
    for entry in report["conditions"]:
        if entry["condition"] == "<b>evil&co</b>":
            entry["effort"] = to_json(condition_efforts(runs, {})["<b>evil&co</b>"])
    html = render_html(report)
    section = html[html.index('<section id="cost-reliability">'):html.index("</section>", html.index("cost-reliability"))]
    assert "&lt;b&gt;evil&amp;co&lt;/b&gt;" in section and "<b>evil" not in section


def test_memory_calls_per_session_and_passes_per_memory_call_over_valid_cells():
    # B5's agent called memory 4 + 2 + 0 times in its valid cells; its excluded cell's 50 calls stay out
    calls = {"B0-t1-1": 0, "B0-t1-2": 0, "B0-t2-1": 0, "B0-t2-2": 0,
             "B5-t1-1": 4, "B5-t1-2": 2, "B5-t2-1": 0, "B5-t2-2": 50}
    efforts = condition_efforts(RUNS, COSTS, calls)
    b0, b5 = efforts["B0"], efforts["B5"]
    assert (b5.memory_calls, b5.memory_calls_per_session, b5.passes_per_memory_call) == (6, 1.0, 0.5)
    # control: an agent that never called memory has no rate per call (not 0, not infinite), shown "—"
    assert (b0.memory_calls, b0.memory_calls_per_session, b0.passes_per_memory_call) == (0, 0.0, None)
    entry = _entry(condition="B0", pass_rate=0.25, effort=to_json(b0))
    assert effort_row(entry)[-2:] == ["0.00", "—"]
    entry = _entry(condition="B5", pass_rate=1.0, effort=to_json(b5))
    assert effort_row(entry)[-2:] == ["1.00", "0.50"] and memory_call_row(entry) == ["B5", "1.00", "0.50"]
    # a cell whose run has no MemoryUse row (an older warehouse): unknown, never counted as no call
    partial = condition_efforts(RUNS, COSTS, {k: v for k, v in calls.items() if k != "B5-t2-1"})["B5"]
    assert (partial.memory_calls, partial.memory_calls_per_session, partial.passes_per_memory_call) == (None, None, None)


def test_a_report_written_before_the_memory_call_figures_shows_them_as_unknown():
    effort = replace(condition_efforts(RUNS, COSTS)["B5"], memory_calls=None, memory_calls_per_session=None,
                     passes_per_memory_call=None)  # the fields' defaults: what an older report held
    entry = replace(_entry(condition="B5", pass_rate=1.0), effort=effort)
    assert effort_row(entry)[-2:] == ["—", "—"]
