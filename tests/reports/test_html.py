"""render_html on hand-built reports (report.json documents read with `from_json`, as a report
read back from disk is): self-contained, one SVG per plot, escaped names."""

from __future__ import annotations

import re
from typing import Any

from membench.reports.html import render_html as render_html_typed
from membench.reports.markdown import render_markdown as render_markdown_typed
from membench.reports.model import Report, from_json

CONDITIONS = ("B0", "B5", "<b>evil&co</b>")


def _summary(rate: float | None) -> dict:
    return {"cells": 4, "valid": 4, "passed": 0 if rate is None else round(4 * rate),
            "pass_rate": rate, "ci95": [None, None] if rate is None else [max(0.0, rate - 0.25), min(1.0, rate + 0.25)]}


def typed(document: dict[str, Any]) -> Report:
    """The typed report the renderers take, read from a report.json document."""
    return from_json(Report, document)


def render_html(document: dict[str, Any]) -> str:
    return render_html_typed(typed(document))


def render_markdown(document: dict[str, Any]) -> str:
    return render_markdown_typed(typed(document))


MEMORY_CONTRACT = {"status_counts": {}, "runtime_failure_counts": {}, "memory_helped": 0, "memory_hurt": 0,
                   "citations_without_memory": 0}


def make_report(**overrides) -> dict:
    rates = {"B0": 0.25, "B5": 0.75, "<b>evil&co</b>": 0.5}
    conditions = []
    for name in CONDITIONS:
        conditions.append({
            "condition": name, "cells": 8, "passed": int(8 * rates[name]), "pass_rate": rates[name],
            "ci95": [rates[name] - 0.125, rates[name] + 0.125], "excluded": 0,
            "bootstrap": {"resamples": 2000, "seed": 20260101, "level": 0.95},
            "failure_counts": {"test_failure": 2, "<script>x</script>": 1},
            "memory_failure_counts": {"stale_memory": 1} if name != "B0" else {},
            "memory_contract": dict(MEMORY_CONTRACT),
            "hygiene": {"repeated_error": {"numerator": 1, "denominator": 2, "rate": 0.5}},
            "by_construct": {"C1": _summary(rates[name]), "C2": _summary(None if name == "B0" else 0.5)},
            "clean_start": _summary(rates[name]), "continuation": _summary(rates[name]),
        })
    report = {
        "run_set": "rs-<1>", "suite": "smoke", "agent": "scripted:memory-literal",
        "conditions": conditions,
        "inputs": {"events": 123, "pack_digest": "ab" * 32},
        "hygiene_by_construct": {},
        "ladder": [{"condition": n, "pass_rate": rates[n], "ci95": [rates[n] - 0.1, rates[n] + 0.1], "passed": 1,
                    "valid": 8, "rank": i + 1} for i, n in enumerate(sorted(rates, key=lambda n: -rates[n]))],
        "strata": {"constructs": {"C1": {"traps": 2, "pass_rate": dict(rates)},
                                  "C2": {"traps": 2, "pass_rate": {"B0": None, "B5": 0.5, "<b>evil&co</b>": 0.5}}},
                   "clean_start": {"traps": 1, "pass_rate": dict(rates)},
                   "continuation": {"traps": 3, "pass_rate": dict(rates)}},
        "validity_gates": {"baseline": "B0", "traps": 4, "seeds": 2, "passed": True,
                           "b0_headroom": {"overall": {"name": "B0 headroom", "value": 0.25, "threshold": 0.5,
                                                       "direction": "max", "passed": True, "numerator": 2,
                                                       "denominator": 8, "preferred_threshold": 0.4,
                                                       "preferred_passed": True},
                                           "by_construct": {}, "passed": True, "failing_constructs": []},
                           "exclusions": {}, "paired_coverage": {}},
        "comparisons": {"baseline": "B0", "alpha": 0.05, "test": "clustered", "family_size": 2, "comparisons": [
            {"a": "B5", "b": "B0", "D": 4, "discordant_a": 4, "discordant_b": 0, "units": 4, "paired_cells": 8,
             "p_clustered": 0.123456789, "p_mcnemar": 0.0625, "p_majority": 0.25,
             "p_per_seed": {"1": 0.5, "2": 0.5}, "p_holm": 0.24691357, "clustered_method": "exact"},
            {"a": "<b>evil&co</b>", "b": "B0", "D": 2, "discordant_a": 2, "discordant_b": 0, "units": 2,
             "paired_cells": 8, "p_clustered": 0.5, "p_mcnemar": 0.5, "p_majority": 1.0,
             "p_per_seed": {"1": 1.0, "2": 1.0}, "p_holm": 0.5, "clustered_method": "exact"}]},
        "resources": {"baseline": "B0", "runs": "valid runs", "cost": "total tokens", "conditions": {
            n: {"runs": 8, "successes": int(8 * rates[n]),
                "total": {},
                "mean": {"input_tokens": 1000.0 * (i + 1), "cached_input_tokens": 0.0, "output_tokens": 100.0,
                         "reasoning_tokens": 0.0, "total_tokens": 1000.0 * (i + 1) + 100, "tool_invocations": 3.0,
                         "patch_invocations": 1.0, "compactions": 0.0, "wall_time_s": 2.5},
                "cost_per_success": {"total_cost": 1.0, "successes": 1, "runs": 8, "value": 1.0},
                "reduction_vs_baseline": None if n == "B0" else {"total_tokens": -0.5, "tool_invocations": 0.0,
                                                                 "wall_time_s": 0.1}}
            for i, n in enumerate(CONDITIONS)}},
    }
    report.update(overrides)
    return report


def test_self_contained_and_one_svg_per_plot():
    html = render_html(make_report())
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "<script" not in html.lower() and "@import" not in html and "url(" not in html
    for plot in ("ladder-plot", "strata-plot", "frontier-plot"):
        assert html.count(f'<svg id="{plot}"') == 1
    assert html.count("<svg") == 3


def test_escapes_names_and_labels_scripted_agents():
    html = render_html(make_report())
    assert "<b>evil" not in html and "&lt;b&gt;evil&amp;co&lt;/b&gt;" in html
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert "rs-&lt;1&gt;" in html
    assert "scripted reference agent" in html
    assert "scripted reference agent" not in render_html(make_report(agent="command:my-agent"))


def test_tables_and_p_values_to_four_significant_digits():
    html = render_html(make_report())
    assert "0.1235" in html and "0.2469" in html and "0.123456789" not in html
    for section in ('id="conditions"', 'id="comparisons"', 'id="resources"', 'id="failures"', 'id="gates"',
                    'id="inputs"', "stale_memory", "ab" * 32):
        assert section in html


def test_renders_gracefully_without_optional_keys():
    report = make_report(ladder=[], resources={"baseline": "B0", "runs": "valid runs", "cost": "total tokens",
                                               "conditions": {}})
    report["strata"] = {"constructs": {}, "clean_start": {"traps": 0, "pass_rate": {}},
                        "continuation": {"traps": 0, "pass_rate": {}}}
    report["comparisons"]["comparisons"] = []
    for c in report["conditions"]:
        c.update(by_construct={}, failure_counts={}, memory_failure_counts={}, hygiene={})
    html = render_html(report)
    assert '<svg id="ladder-plot"' in html and "no construct strata" in html and "no resource figures" in html
    assert "No comparisons" in html and 'id="hygiene"' not in html and 'id="families"' not in html
    none_rate = make_report(ladder=[])
    none_rate["conditions"][0]["pass_rate"] = None
    assert "no valid cells" in render_html(none_rate)


def test_in_process_oracle_isolation_is_a_warning_on_the_page():
    isolated = render_html(make_report(suites=[{"suite": "smoke", "oracle_isolation": "process", "verdicts": 9}]))
    assert "oracle isolation" in isolated and 'class="warning"' not in isolated
    shared = render_html(make_report(suites=[{"suite": "remem-<x>", "oracle_isolation": "in_process", "verdicts": 5}]))
    assert '<p class="warning">Oracle isolation of suite <code>remem-&lt;x&gt;</code>: <strong>in_process</strong>' in shared



def test_issue14_gates_and_hygiene_panel_render():
    """Reversed constructs, stratum validity, warm-up, continuation audit and the hygiene panel show
    with their verdicts in both renderers."""

    gate = {"name": "g", "value": 0.25, "threshold": 0.5, "direction": "max", "passed": True, "numerator": 1,
            "denominator": 4}
    report = make_report()
    report["validity_gates"]["b0_headroom"]["overall"].update(preferred_threshold=0.4, preferred_passed=True)
    report["validity_gates"]["b0_headroom"]["reversed"] = {"C9": {**gate, "value": 1.0, "direction": "min",
                                                                  "numerator": 3, "denominator": 3}}
    report["validity_gates"].update(
        stratum_validity={"C9": {"reversed": True, "max_condition": "B0", "max_rate": {**gate, "direction": "min"},
                                 "spread": {**gate, "direction": "above", "threshold": 0}, "b0_rate": gate,
                                 "passed": True}},
        warmup={**gate, "name": "B0 warm-up S1+S2", "value": 0.797, "threshold": 0.8, "direction": "min",
                "passed": False, "numerator": 287, "denominator": 360},
        continuation_audit={**gate, "value": 1.0, "threshold": 1.0, "direction": "min", "continuation_cells": 2,
                            "inherited_failed": 1, "findings": []},
        verdicts={"b0_headroom": True, "warmup": False, "continuation_audit": True}, passed=False)
    report["hygiene_panel"] = {"overscope": {"direction": "lower", "numerator": 2, "denominator": 8, "rate": 0.25,
                                             "conditions": {"B5": {"numerator": 2, "denominator": 8, "rate": 0.25}}}}
    page = render_html(report)
    c9 = "C9 Spurious-lesson rejection / disconfirmation"  # named as in DreamBench-SWE Table 30
    assert f"B0 passes reversed {c9}" in page and f"stratum {c9} (reversed)" in page
    assert "B0 warm-up S1+S2" in page and "287/360" in page and "continuation audit" in page
    assert "overscope" in page and "lower is better" in page
    md = render_markdown(report)
    assert f"B0 passes reversed {c9}: 3/3" in md and "B0 warm-up S1+S2: 287/360" in md
    # per condition, not pooled over the baseline: B5's 2/8, nothing observed for B0
    assert "failing: warmup" in md and "| overscope | lower | — | 2/8 = 25.0% | — |" in md


def test_report_lists_every_metric_the_processor_emits():
    from membench.processors.hygiene import METRICS
    from membench.reports.hygiene import HYGIENE_METRICS

    assert HYGIENE_METRICS == METRICS


def _swatches(html: str) -> dict[str, str]:
    """condition -> its swatch colour in the conditions table."""
    return dict((name, color) for color, name in
                re.findall(r'<span class="swatch" style="background:(#[0-9A-Fa-f]{6})"></span>([^<]+)<', html))


def test_baseline_colour_follows_the_reports_baseline():
    """The baseline is drawn grey: B0 by default, B5 when the report compares against B5 (--baseline
    or a study file); before the fix B0 stayed grey and B5 took a palette colour."""
    from membench.reports.html.format import BASELINE_COLOR

    default = _swatches(render_html(make_report()))
    assert default["B0"] == BASELINE_COLOR and default["B5"] != BASELINE_COLOR
    report = make_report()
    for key in ("comparisons", "resources", "validity_gates"):
        report[key]["baseline"] = "B5"
    shifted = _swatches(render_html(report))
    assert shifted["B5"] == BASELINE_COLOR and shifted["B0"] != BASELINE_COLOR
    assert list(shifted.values()).count(BASELINE_COLOR) == 1
    # the ladder plot draws B5's bar in the same grey
    ladder = re.search(r'<svg id="ladder-plot".*?</svg>', render_html(report), re.S).group(0)
    b5_row = ladder.split('font-weight="600">B5</text>')[1].split("</text>")[0]
    assert BASELINE_COLOR in b5_row
