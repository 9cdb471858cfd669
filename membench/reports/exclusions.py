"""Exclusions by reason and the exclusion-balance gate: the `validity_gates.exclusion_balance`
key and its renderings.

An excluded cell leaves every pass rate and comparison it would have entered. Exclusions an agent
can bring about, falling on one condition only, therefore move a comparison without anyone solving
anything: removing exactly the baseline's failing cells fabricates a memory effect. So for every
condition other than the baseline the report tests whether its exclusion rate differs from the
baseline's (`membench.analytics.gates.exclusion_balance`: Fisher's exact two-sided test at α = 0.05, or any
difference when the counts are too small for the test to reach α), and shows each side's exclusions
by reason. The gate joins `validity_gates.verdicts` as `exclusion_balance <condition> vs <baseline>`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from membench.analytics.cells import Cell
from membench.analytics.gates import exclusion_balance
from membench.reports.model import ExclusionBalanceGate, Report, shallow_fields


def exclusion_balance_gates(cells: Iterable[Cell], conditions: list[str],
                            baseline: str) -> dict[str, ExclusionBalanceGate]:
    """"<condition> vs <baseline>" -> its gate, for every condition but the baseline; empty when no
    cell carries the baseline. A cell is excluded when it is not valid (its reason `exclusion`)."""
    totals: dict[str, list[int]] = {}
    reasons: dict[str, Counter] = {}
    for cell in cells:
        slot = totals.setdefault(cell.condition, [0, 0])
        slot[1] += 1
        if not cell.valid:
            slot[0] += 1
            reasons.setdefault(cell.condition, Counter())[cell.exclusion or "unknown"] += 1
    if baseline not in totals:
        return {}
    base_excluded, base_cells = totals[baseline]
    base_reasons = dict(sorted(reasons.get(baseline, Counter()).items()))
    out = {}
    for condition in conditions:
        if condition == baseline or condition not in totals:
            continue
        excluded, n = totals[condition]
        gate = exclusion_balance(excluded, n, base_excluded, base_cells, condition=condition, baseline=baseline)
        out[f"{condition} vs {baseline}"] = ExclusionBalanceGate(
            **shallow_fields(gate), reasons=dict(sorted(reasons.get(condition, Counter()).items())),
            baseline_reasons=base_reasons)
    return out


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in counts.items()) or "none"


def _decision(g: ExclusionBalanceGate) -> str:
    rule = g.rule
    if rule == "fisher_exact":
        return f"Fisher exact p = {g.p_value:.4g} ({'≤' if g.differs else '>'} α = {g.alpha})"
    if rule == "any_difference":
        return (f"Fisher exact p = {g.p_value:.4g}; no table with these margins reaches α = {g.alpha} "
                f"(smallest p {g.min_attainable_p:.4g}), so any difference counts")
    return {"no_exclusions": "no exclusion on either side", "no_cells": "a side has no cells"}.get(rule, rule)


def _rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """(reasons, rows) of the per-condition table: condition, cells, excluded, rate, then each reason."""
    by_condition = {c: g.reasons or {} for c, g in report.validity_gates.exclusions.items()}
    all_reasons = sorted({r for counts in by_condition.values() for r in counts})
    rows = []
    for c in report.conditions:
        counts = by_condition.get(c.condition, {})
        rate = c.excluded / c.cells if c.cells else None
        rows.append([c.condition, str(c.cells), str(c.excluded), _pct(rate)]
                    + [str(counts.get(r, 0)) for r in all_reasons])
    return all_reasons, rows


def exclusions_markdown(report: Report) -> str:
    """The `## Exclusions` section: each condition's exclusions by reason, and the balance gate.
    Empty for a report.json written before the gate."""
    balance = report.validity_gates.exclusion_balance
    if balance is None:
        return ""
    reasons, rows = _rows(report)
    lines = ["## Exclusions by reason", "",
             "| condition | cells | excluded | rate |" + "".join(f" {r} |" for r in reasons),
             "|---|---:|---:|---:|" + "---:|" * len(reasons)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines.append("")
    if not balance:
        lines.append("Exclusion balance: no baseline cells to compare with.")
    for name, g in balance.items():
        lines.append(f"- exclusion balance {name}: {g.excluded}/{g.cells} ({_pct(g.rate)}) vs "
                     f"{g.baseline_excluded}/{g.baseline_cells} ({_pct(g.baseline_rate)}) — "
                     f"{_decision(g)} — {'FAIL: the rates differ' if not g.passed else 'pass'}")
    lines += ["", "An excluded cell leaves every rate and comparison; exclusions on one side only can fabricate "
                  "an effect, so a condition's exclusion rate must not differ from the baseline's."]
    return "\n".join(lines) + "\n"


def exclusions_html(report: Report) -> str | None:
    """The body of the page's Exclusions section (None: a report.json written before the gate)."""
    # imported here: membench.reports.html's page imports this module
    from membench.reports.html.format import esc
    from membench.reports.html.table_markup import _verdict, html_table, reason_count

    balance = report.validity_gates.exclusion_balance
    if balance is None:
        return None
    reasons, rows = _rows(report)
    # each reason's count leads to the units table filtered to the condition and reason
    html = html_table(["condition", "cells", "excluded", "rate", *map(esc, reasons)],
                      [[esc(x) for x in row[:4]] + [reason_count(report, row[0], r, n) for r, n in zip(reasons, row[4:])]
                       for row in rows])
    gate_rows = [[esc(name), f"{g.excluded}/{g.cells}", f"{g.baseline_excluded}/{g.baseline_cells}",
                  esc(_decision(g)), _verdict(g.passed)]
                 for name, g in balance.items()]
    if gate_rows:
        html += html_table(["exclusion balance", "excluded", "baseline excluded", "test", "verdict"], gate_rows)
    else:
        html += '<p class="note">No baseline cells to compare with.</p>'
    return html
