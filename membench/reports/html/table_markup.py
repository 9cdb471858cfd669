"""The report's HTML tables: conditions, cost and reliability, comparisons, resources, failure counts, hygiene, validity gates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from membench.analytics.gates import Gate
from membench.reports.conventions import construct_label
from membench.reports.effort import EFFORT_COLUMNS, effort_row
from membench.reports.html.format import BASELINE_COLOR, esc, fmt_ci, fmt_num, fmt_p, fmt_pct, fmt_signed_pct
from membench.reports.html.links import unit_id_href, units_href
from membench.reports.model import ConditionResources, ConditionSummary, Report


def html_table(head: list[str], rows: list[list[str]], left_cols: int = 1) -> str:
    """Cells are HTML already (escape before)."""
    th = "".join(f'<th class="l">{h}</th>' if i < left_cols else f"<th>{h}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="l">{c}</td>' if i < left_cols else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def linked(html: str, href: str | None, cls: str) -> str:
    """HTML wrapped in a link to HREF (escaped here), or left as it is without one."""
    if href is None:
        return html
    return f'<a href="{esc(href)}" class="{esc(cls)}">{html}</a>'


def reason_count(report: Report, condition: str, reason: str, count: Any) -> str:
    """A count of a condition's units with REASON, linked to the units table filtered to them."""
    if not count or str(count) == "0":
        return esc(count)
    return linked(esc(count), units_href(report, condition, reason), cls="units")


def _verdict(passed: bool | None) -> str:
    if passed is None:
        return "—"
    return '<span class="pass">pass</span>' if passed else '<span class="fail">FAIL</span>'


def conditions_table(report: Report, colors: dict[str, str]) -> str:
    rank = {e.condition: e.rank for e in report.ladder}
    rows = []
    for c in report.conditions:
        swatch = f'<span class="swatch" style="background:{colors.get(c.condition, BASELINE_COLOR)}"></span>'
        rows.append([swatch + esc(c.condition), esc(rank.get(c.condition) or "—"), esc(c.cells),
                     esc(c.passed), fmt_pct(c.pass_rate), fmt_ci(c.ci95, c.ci_method),
                     esc(c.excluded)])
    return html_table(["condition", "rank", "cells", "passed", "pass rate", "95% CI", "excluded"], rows)


def effort_table(report: Report, colors: dict[str, str]) -> str | None:
    """Cost and reliability per condition (membench/reports/effort.py); None for a report without them."""
    rows = []
    for c in report.conditions:
        row = effort_row(c)
        if row is not None:
            swatch = f'<span class="swatch" style="background:{colors.get(c.condition, BASELINE_COLOR)}"></span>'
            rows.append([swatch + esc(row[0]), *(esc(cell) for cell in row[1:])])
    return html_table([esc(h) for h in EFFORT_COLUMNS], rows) if rows else None


def comparisons_table(report: Report) -> str | None:
    family = report.comparisons
    comps = family.comparisons
    if not comps:
        return None
    alpha = family.alpha
    rows = []
    for c in comps:
        per_seed = ", ".join(f"{esc(s)}: {fmt_p(p)}" for s, p in c.p_per_seed.items()) or "—"
        holm = fmt_p(c.p_holm)
        verdict = "<strong>rejected</strong>" if c.p_holm <= alpha else "not rejected"
        rows.append([esc(c.a), esc(c.b), esc(c.D), esc(c.discordant_a), esc(c.discordant_b),
                     esc(c.units), esc(c.paired_cells), fmt_p(c.p_clustered), holm, verdict,
                     fmt_p(c.p_mcnemar), fmt_p(c.p_majority), per_seed])
    table = html_table(["A", "B", "D", "A-only", "B-only", "units", "paired cells", "p clustered (primary)", "p Holm",
                        "verdict", "p McNemar", "p majority", "p per seed"], rows, left_cols=2)
    size = family.family_size
    return table + (f'<p class="caption">Primary test: the exact trap-clustered sign-flip test (D = Σ<sub>t</sub> '
                    f'd<sub>t</sub> = A-only − B-only passes over paired valid seeds); p Holm: Holm over the '
                    f'registered family of {esc(size)} comparisons; the verdict is the primary test\'s at '
                    f'α = {esc(alpha)}. Secondary, descriptive: p McNemar (pooled exact McNemar over cells), '
                    f'p majority (unit-majority collapse), p per seed — a small secondary p is not a rejection. '
                    f'p-values to 4 significant digits.</p>')


TOKEN_COLUMNS = (("input_tokens", "input"), ("cached_input_tokens", "cached input"), ("output_tokens", "output"),
                 ("reasoning_tokens", "reasoning"), ("total_tokens", "total"))
ACTIVITY_COLUMNS = (("tool_invocations", "tool calls"), ("patch_invocations", "patch invocations"),
                    ("compactions", "compactions"), ("wall_time_s", "wall time (s)"))


def resources_table(report: Report) -> str | None:
    resources = report.resources
    per = resources.conditions
    if not per:
        return None
    baseline = resources.baseline

    def reduction(r: ConditionResources, metric: str) -> str:
        red = r.reduction_vs_baseline
        return "baseline" if red is None else fmt_signed_pct(red.get(metric))

    tokens, activity = [], []
    for name, r in per.items():
        mean = r.mean
        cps = r.cost_per_success.value
        tokens.append([esc(name), esc(r.runs), esc(r.successes)]
                      + [fmt_num(mean.get(k)) for k, _ in TOKEN_COLUMNS]
                      + [fmt_num(cps, 0), reduction(r, "total_tokens")])
        activity.append([esc(name)] + [fmt_num(mean.get(k), 2) for k, _ in ACTIVITY_COLUMNS]
                        + [reduction(r, "tool_invocations"), reduction(r, "wall_time_s")])
    return (
        "<h3>Tokens (mean per run)</h3>"
        + html_table(["condition", "runs", "passed"] + [label for _, label in TOKEN_COLUMNS]
                 + ["per success", "reduction (total)"], tokens)
        + "<h3>Activity (mean per run)</h3>"
        + html_table(["condition"] + [label for _, label in ACTIVITY_COLUMNS]
                 + ["reduction (tool calls)", "reduction (wall time)"], activity)
        + f'<p class="caption">Means over valid runs. Cost = total tokens (input + output; cached input is part '
          f'of input, reasoning part of output); per success = all valid runs\' tokens / passed runs. '
          f'reduction = (baseline − condition) / baseline mean against <code>{esc(baseline)}</code>: '
          f'positive is a reduction, negative an increase. Wall time is the whole run, evaluation included.</p>')


def counts_table(report: Report, counts: Callable[[ConditionSummary], dict[str, int]]) -> str | None:
    """COUNTS: which of a condition's counts by reason (`failure_counts`, `memory_failure_counts`)."""
    conditions = report.conditions
    if not conditions:
        return None
    reasons = sorted({r for c in conditions for r in counts(c)})
    if not reasons:
        return '<p class="note">none</p>'
    rows = [[esc(r)] + [reason_count(report, c.condition, r, counts(c).get(r, 0)) for c in conditions]
            for r in reasons]
    return html_table(["reason"] + [esc(c.condition) for c in conditions], rows)


def _bloat(rate: float | None) -> str:
    # memory_bloat is a ratio ≥ 1 (memories held per useful memory), not a fraction
    return "—" if rate is None else f"{rate:.2f}×"


def hygiene_table(report: Report) -> str | None:
    conditions = [c for c in report.conditions if c.hygiene]
    if not conditions:
        return None
    panel = report.hygiene_panel  # every metric, in the panel's order, with the pooled rate
    metrics = list(panel) if panel else sorted({m for c in conditions for m in c.hygiene})
    if panel:
        rows = []
        for m in metrics:
            p = panel[m]
            fmt = _bloat if m == "memory_bloat" else fmt_pct
            row = [f'{esc(m)} <span class="note">({esc(p.direction)} is better)</span>',
                   f'{fmt(p.rate)} <span class="note">({esc(p.numerator)}/'
                   f'{esc(p.denominator)})</span>']
            for c in conditions:
                v = c.hygiene.get(m)
                row.append("—" if v is None else f'{fmt(v.rate)} <span class="note">({esc(v.numerator)}/'
                                                 f'{esc(v.denominator)})</span>')
            rows.append(row)
        return (html_table(["metric", "all"] + [esc(c.condition) for c in conditions], rows)
                + _hygiene_legend_html(metrics))
    rows = []
    for m in metrics:
        row = [esc(m)]
        for c in conditions:
            v = c.hygiene.get(m)
            row.append("—" if v is None else f'{fmt_pct(v.rate)} <span class="note">({esc(v.numerator)}/'
                                             f'{esc(v.denominator)})</span>')
        rows.append(row)
    return html_table(["metric"] + [esc(c.condition) for c in conditions], rows) + _hygiene_legend_html(metrics)


def _hygiene_legend_html(metrics: list[str]) -> str:
    """What each shown metric counts (numerator / denominator), under the table."""
    from membench.reports.conventions import hygiene_legend

    items = "".join(f"<li><code>{esc(m)}</code>: {esc(text)}</li>" for m, text in hygiene_legend(metrics))
    return f'<p class="caption">What each metric counts (numerator / denominator, over scored sessions):</p>' \
           f'<ul class="legend">{items}</ul>'


def gates_table(report: Report) -> str | None:
    gates = report.validity_gates
    rows: list[list[str]] = []

    def add(label: str, g: Gate | None, value: str | None = None, label_html: str | None = None) -> None:
        if g is None:
            return
        threshold = g.threshold
        direction = {"max": "≤", "above": ">"}.get(str(g.direction), "≥")
        shown = value if value is not None else (fmt_pct(g.value) if isinstance(g.value, float) else esc(g.value))
        thr = fmt_pct(threshold) if isinstance(threshold, float) else esc(threshold)
        rows.append([label_html or esc(label), f'{esc(g.numerator)}/{esc(g.denominator)}', shown,
                     f"{direction} {thr}", _verdict(g.passed)])

    head = gates.b0_headroom
    reference = gates.reference or {}  # absent from a report.json written before it
    b0 = reference.get("b0_headroom", "B0")  # headroom, the strata's B0 clause and warm-up are B0 gates
    add(f"{b0} headroom overall", head.overall)
    for label, g in head.by_construct.items():
        add(f"{b0} headroom {construct_label(label)}", g)
    for cond, eg in gates.exclusions.items():
        examples = eg.examples or {}  # each reason with the run's own words, so a misconfiguration shows as one
        # each reason's count leads to its units, each example to the unit it came from (the units
        # table filtered to the reason for a report.json written before example_units)
        example_units = eg.example_units or {}
        why = "; ".join(
            f"{esc(r)} {reason_count(report, cond, r, n)}"
            + (" — " + linked(esc(examples[r]), unit_id_href(report, example_units[r]) if r in example_units
                              else units_href(report, cond, r), cls="example") if r in examples else "")
            for r, n in eg.reasons.items())
        add("", eg, label_html=f"exclusions {esc(cond)}" + (f" ({why})" if why else ""))
    for name, g in gates.paired_coverage.items():
        add(f"paired coverage {name} (units with ≥ 2 paired seeds)", g)
    # reversed constructs apart, stratum validity, warm-up, continuation audit
    for label, g in (head.reversed or {}).items():
        add(f"{b0} passes reversed {construct_label(label)}", g)
    for label, s in (gates.stratum_validity or {}).items():
        tag = f"stratum {construct_label(label)}" + (" (reversed)" if s.reversed else "")
        add(f"{tag}: max condition rate ({esc(s.max_condition)})", s.max_rate)
        add(f"{tag}: spread", s.spread, fmt_pct(None if s.spread.value is None else float(s.spread.value)))
        add(f"{tag}: {b0} rate", s.b0_rate)
    add(f"{b0} warm-up S1+S2", gates.warmup)
    add("continuation audit (cells started as designed)", gates.continuation_audit)
    note = head.note
    html = html_table(["gate", "n", "value", "required", "verdict"], rows) if rows else ""
    overall = gates.passed
    html += (f'<p class="caption">All gates: {_verdict(overall)}. '
             f'{esc(gates.traps)} traps × {esc(gates.seeds)} seeds.'
             + (f" {esc(note)}." if note else "") + "</p>")
    if reference:
        html += ('<p class="caption">Reference conditions: ' + "; ".join(
            f"{esc(gate)} on <code>{esc(cond)}</code>" for gate, cond in reference.items()) + ".</p>")
    return html
