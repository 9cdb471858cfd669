"""The HTML of the report's study parts: registered families (effect sizes, power, Holm per test),
the trap × seed outcome matrix, provenance, USD cost, the canary proof and the admission funnel.
Each returns None when the report (an older report.json) lacks its key."""

from __future__ import annotations

from membench.reports.html.format import esc, fmt_ci, fmt_p
from membench.reports.html.links import pair_href, unit_href
from membench.reports.markdown import detectable_text
from membench.reports.provenance_text import admission_text, blobs_text, cost_text, memory_policy_text
from membench.reports.html.table_markup import html_table
from membench.reports.model import FamilyComparison, Report

TEST_LABELS = {"clustered": "clustered", "mcnemar": "McNemar", "majority": "majority"}


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}&nbsp;pp"


def _tests(c: FamilyComparison, primary_test: str | None) -> list[str]:
    """The primary test first with its verdict; a secondary rejection carries the primary verdict
    beside it, so it never reads as a finding on its own."""
    primary = c.primary
    out = []
    if primary is not None and primary_test:
        holm = fmt_p(primary.p_holm)
        out.append(f"{esc(TEST_LABELS.get(primary_test, primary_test))} (primary): {fmt_p(primary.p)} → "
                   + (f"<strong>{holm}</strong> rejected" if primary.rejected else f"{holm} not rejected"))
    for name, t in c.tests.items():
        if primary is not None and name == primary_test:
            continue
        holm = fmt_p(t.p_holm)
        if t.rejected and primary is not None:
            holm += " rejected (secondary; primary " + ("rejected" if primary.rejected else "NOT rejected") + ")"
        elif t.rejected:
            holm = f"<strong>{holm}</strong>"
        out.append(f"{esc(TEST_LABELS.get(name, name))}: {fmt_p(t.p)} → {holm}")
    return out


def verdicts_html(report: Report) -> str | None:
    """One verdict line per comparison (membench/reports/comparison_verdicts.py), the asked ones first."""
    from membench.reports.comparison_verdicts import NOT_PUBLISHABLE, PUBLISHABLE, VERDICTS_LEGEND, grouped

    groups = grouped(report)
    if not groups:
        return None
    out = [f'<p class="caption">{esc(VERDICTS_LEGEND)}</p>']
    for title, items in groups:
        out.append(f"<h3>{esc(title[0].upper() + title[1:])}</h3><ul class=\"verdicts\">")
        for v in items:
            mark = {PUBLISHABLE: "pass", NOT_PUBLISHABLE: "fail"}.get(v.status, "note")
            out.append(f'<li><span class="{mark}">{esc(v.status.replace("_", " "))}</span> {esc(v.line)}</li>')
        out.append("</ul>")
    return "".join(out)


def families_html(report: Report) -> str | None:
    fams = report.families
    if fams is None or not fams.families:
        return None
    out = [f'<p class="caption">Baseline {esc(fams.baseline)} ({esc(fams.baseline_source)}); study '
           f'{esc(fams.study)}. Holm is applied within each family, separately for each test (per seed: '
           'within each seed). Δ = paired pass-rate difference A − B with a trap-cluster bootstrap 95% CI; power: '
           'the exact sign test over the paired traps; MDD: the Δ at which the exact trap-clustered test rejects with '
           '80 % power at α if each differing trap differs in one seed (the smallest such Δ) and if in all its seeds '
           'alike (the largest), when every paired trap differs and when as many differ as did.</p>']
    # a slot whose condition failed or lacks its conformance record says so
    labels = {e.condition: e.label for e in (report.conformance.conditions if report.conformance else [])
              if e.label}
    for fam in fams.families:
        rows = []
        for c in fam.comparisons:
            tests = _tests(c, fams.primary_test)
            if c.per_seed:
                tests.append("per seed: " + ", ".join(f"{esc(s)}: {fmt_p(t.p_holm)}" for s, t in c.per_seed.items()))
            effect, power = c.effect, c.power
            power_text = "—"
            if power is not None:
                threshold = power.threshold
                q8 = power.by_q.get("0.8")
                power_text = ("no split rejects" if threshold is None else
                              f"{esc(threshold)}/{esc(power.units)} traps; at q = 0.8: {fmt_p(q8)}")
                power_text += "<br>" + esc(detectable_text(power))
            why = labels.get(c.a) or labels.get(c.b)
            rows.append([esc(c.a), esc(c.b), "yes" if c.available else
                         "<strong>unavailable</strong>" + (f" ({esc(why)})" if why else ""),
                         _signed(effect.difference) if effect else "—",
                         fmt_ci(effect.ci95) if effect else "—",
                         f"{esc(effect.discordant_a)} / {esc(effect.discordant_b)}" if effect else "—",
                         "<br>".join(tests) or "—", power_text])
        out.append(f"<h3>{esc(fam.name)} ({esc(fam.role)}, {esc(fam.family_size)} comparisons, "
                   f"α = {esc(fam.alpha)})</h3>")
        out.append(html_table(["A", "B", "available", "Δ", "95% CI", "A-only / B-only", "p → p Holm", "power"],
                              rows, left_cols=2))
    return "".join(out)


def matrix_html(report: Report) -> str | None:
    matrix = report.outcome_matrix
    if matrix is None or not matrix.conditions:
        return None
    out = []
    for condition, traps in matrix.conditions.items():
        rows = [[f"<code>{esc(t)}</code>"] + [_linked(_cell(traps.get(t, {}).get(s)), report, t, condition, s)
                                             for s in matrix.seeds]
                for t in matrix.traps]
        out.append(f"<h3>{esc(condition)}</h3>")
        out.append(html_table(["trap"] + [f"seed {esc(s)}" for s in matrix.seeds], rows))
    return "".join(out)


def _linked(cell: str, report: Report, trap: str, condition: str, seed: str) -> str:
    unit, pair = unit_href(report, trap, condition, seed), pair_href(report, trap, seed)
    if cell == "—" or unit is None or pair is None:
        return cell
    return (f'<a href="{esc(unit)}">{cell}</a> '
            f'<a class="pair" title="side by side under every condition" '
            f'href="{esc(pair)}">⇄</a>')


def _cell(value: str | None) -> str:
    if value is None:
        return "—"
    if value == "pass":
        return '<span class="pass">pass</span>'
    if value == "fail":
        return '<span class="fail">fail</span>'
    return esc(value)


def provenance_html(report: Report) -> str | None:
    prov = report.provenance
    if prov is None:
        return None

    def codes(values: list) -> str:
        return "<br>".join(f"<code>{esc(v)}</code>" for v in values) or "—"

    cost = report.cost_usd
    rows = [["agents", codes(prov.agents)], ["agent kinds", esc(", ".join(prov.agent_kinds)) or "—"],
            ["models", codes(prov.models)], ["code digests", codes(prov.code_digests)],
            ["seeds", esc(", ".join(str(s) for s in prov.seeds))], ["runs started", esc(prov.runs)]]
    if prov.memory_policies:
        rows.append(["memory policies", esc(memory_policy_text(prov.memory_policies))])
    if cost is not None:
        rows.append(["USD cost", esc(cost_text(cost))])
    admission = report.admission
    if admission is not None:
        rows.append(["admission funnel", esc(admission_text(admission))])
    return html_table(["what", "value"], rows, left_cols=2)


def canary_html(report: Report) -> str | None:
    proof = report.canary
    if proof is None:
        return None
    status = proof.status
    badge = {"pass": '<span class="pass">PASS</span>', "fail": '<span class="fail">FAIL</span>'}.get(status, esc(status))
    out = [f"<p>Canary proof: {badge}"]
    if proof.reason:
        out.append(f" — {esc(proof.reason)}")
    out.append("</p>")
    searched = proof.searched
    if searched is not None:
        out.append(f'<p class="caption">{esc(proof.secrets)} secrets of pack <code>{esc(proof.pack)}</code> '
                   f'searched in {esc(searched.agent_visible_events)} agent-visible events '
                   f'({esc(searched.agent_visible_bytes)} bytes){esc(blobs_text(searched))} and in '
                   f'{esc(", ".join(searched.reports))} '
                   f'({esc(searched.report_bytes)} bytes): {esc(proof.leaks)} leaks; '
                   f'{esc(proof.own_trap_hits)} hits inside their own trap (evidence, memory reads, patches: '
                   'expected).</p>')
    if proof.hits:
        out.append(html_table(["secret", "trap", "found in", "run's trap"],
                              [[esc(h.secret), esc(h.trap), esc(h.where), esc(h.run_trap or "—")]
                               for h in proof.hits], left_cols=4))
    return "".join(out)
