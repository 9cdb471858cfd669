"""The report page: header, the three plots, the tables and the inputs, assembled in one HTML document."""

from __future__ import annotations

from membench.reports.html.format import CSS, condition_colors, esc, report_baseline
from membench.reports.html.plots import frontier_svg, ladder_svg, strata_svg
from membench.reports.html.study import canary_html, families_html, matrix_html, provenance_html, verdicts_html
from membench.reports.html.table_markup import (
    comparisons_table,
    conditions_table,
    counts_table,
    effort_table,
    gates_table,
    html_table,
    hygiene_table,
    resources_table,
)
from membench.reports.effort import EFFORT_LEGEND
from membench.reports.exclusions import exclusions_html
from membench.reports.gate_failures import failed_gates
from membench.reports.model import Report
from membench.reports.provenance_text import admission_text, not_verified_text, refused_measured_text, verification_text
from membench.reports.transfer import transfer_html


def optional_section(ident: str, title: str, body: str | None, caption: str = "") -> list[str]:
    """A section whose body a report may lack (an older report.json, a run set without the data):
    one element to append, or none when BODY is empty. TITLE and CAPTION are the page's own text."""
    if not body:
        return []
    note = f'<p class="caption">{caption}</p>' if caption else ""
    return [f'<section id="{ident}"><h2>{title}</h2>{note}{body}</section>']


def render_html(report: Report) -> str:
    """The page of the typed report (`membench.reports.model.Report`, as built or as `from_json` reads a
    report.json back)."""
    agent = report.agent
    scripted = agent.startswith("scripted:")
    conditions = [c.condition for c in report.conditions]
    colors = condition_colors(conditions, report_baseline(report))
    inputs = report.inputs
    digest = inputs.pack_digest
    digests = digest if isinstance(digest, list) else [digest]
    log_root = inputs.log_root  # absent from a report.json written before log roots were recorded
    verification = report.verification  # set by the run that wrote the report, from the replay of its log
    badge = '<span class="badge">scripted reference agent — not a model</span>' if scripted else ""
    boot = report.conditions[0].bootstrap if report.conditions else None
    suites = report.suites or []  # absent from a report.json written before suites were recorded
    isolation = ", ".join(f"<code>{esc(s.suite)}</code>: {esc(s.oracle_isolation)}" for s in suites)
    in_process = [s.suite for s in suites if s.oracle_isolation == "in_process"]

    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>membench report — {esc(report.run_set)}</title>",
           f"<style>{CSS}</style></head><body><main>",
           f"<h1>membench report — {esc(report.run_set)}</h1>",
           '<dl class="meta">',
           f"<dt>suite</dt><dd><code>{esc(report.suite)}</code></dd>",
           f"<dt>agent</dt><dd><code>{esc(agent)}</code>{badge}</dd>",
           f"<dt>conditions</dt><dd>{esc(', '.join(conditions)) or '—'}</dd>",
           f"<dt>raw events</dt><dd>{esc(inputs.events)}</dd>",
           f"<dt>pack digest</dt><dd>{'<br>'.join(f'<code>{esc(d)}</code>' for d in digests)}</dd>",
           *([f"<dt>log root</dt><dd><code>{esc(log_root)}</code></dd>"] if log_root else []),
           *([f"<dt>log</dt><dd>{esc(verification_text(verification))}</dd>"] if verification is not None else []),
           *([f"<dt>oracle isolation</dt><dd>{isolation}</dd>"] if isolation else []),
           "</dl>"]
    if verification is not None and not verification.verified:  # before any number: they come from a broken log
        out.append(f'<p class="warning"><strong>Not verified</strong>: {esc(not_verified_text(verification))}</p>')
    partial = report.partial
    if partial is not None:  # a stopped run's report says so before any number: its cells are not the design
        out.append(f'<p class="warning"><strong>Partial report</strong>: {esc(partial.reason)}; '
                   f'{partial.units_not_started} of {partial.units_planned} units not started, '
                   f'{partial.attempts_abandoned} attempts closed as abandoned. Resume with '
                   f'<code>{esc(partial.resume)}</code>.</p>')
    refused = refused_measured_text(report.admission)
    if refused:  # traps validate refused, measured anyway: said before any number
        out.append(f'<p class="warning"><strong>Refused traps measured</strong>: {esc(refused)}</p>')
    for suite in in_process:
        out.append(f'<p class="warning">Oracle isolation of suite <code>{esc(suite)}</code>: <strong>in_process</strong>'
                   ' — its tests ran in the same process as the code under test, so a patch written against the '
                   'oracle could forge its verdicts. Read its results with that in mind (docs/sandbox.md).</p>')
    failed = failed_gates(report)
    if failed:  # before the first number they invalidate, not only in the Validity gates section
        out.append('<div class="warning" id="failed-gates"><ul>' + "".join(
            f"<li><strong>GATE FAILED</strong>: {esc(f.text())}</li>" for f in failed) + "</ul></div>")
    if scripted:
        out.append('<p class="note">This run set was produced by a scripted reference agent: a fixed policy that '
                   'brackets the harness (e.g. always uses memory literally, or never solves), not a language '
                   'model. Its numbers check the benchmark, not an agent.</p>')

    out.append('<section id="ladder"><h2>Ladder</h2>')
    out.append(ladder_svg(report, colors))
    if boot is not None:
        out.append(f'<p class="caption">Pass rate = passed / valid cells (excluded cells counted, never imputed). '
                   f'95% CIs: trap-cluster percentile bootstrap, {esc(boot.resamples)} resamples, seed '
                   f'{esc(boot.seed)}; marked exact: Clopper–Pearson over traps, where all or none of the '
                   f'cells passed and the bootstrap interval would have zero width.</p>')
    if report.admission is not None:  # which traps the ladder ranks over, beside it
        out.append(f'<p class="caption">Traps: admission funnel {esc(admission_text(report.admission))}.</p>')
    out.append("</section>")

    out.append('<section id="strata"><h2>Construct strata</h2>')
    strata = strata_svg(report, colors, conditions)
    out.append(strata if strata else '<p class="note">This report has no construct strata (the pack labels no '
                                     'constructs).</p>')
    out.append("</section>")

    out.append('<section id="frontier"><h2>Cost frontier</h2>')
    frontier = frontier_svg(report, colors)
    if frontier:
        out.append(frontier)
        out.append('<p class="caption">Mean total tokens per valid run against pass rate; up and left is better. '
                   'The dashed line joins the conditions no other condition beats on both.</p>')
    else:
        out.append('<p class="note">This report has no resource figures.</p>')
    out.append("</section>")

    out.append('<section id="conditions"><h2>Conditions</h2>')
    out.append(conditions_table(report, colors))
    out.append("</section>")
    out += optional_section("cost-reliability", "Cost and reliability", effort_table(report, colors),
                            esc(EFFORT_LEGEND))

    out += optional_section("verdicts", "Verdicts", verdicts_html(report))
    comps = comparisons_table(report)
    baseline = report.comparisons.baseline
    out.append(f'<section id="comparisons"><h2>Comparisons{" vs " + esc(baseline) if baseline else ""}</h2>')
    out.append(comps or '<p class="note">No comparisons (a single condition, or none computed).</p>')
    out.append("</section>")

    out += optional_section("families", "Registered families", families_html(report))
    out += optional_section("resources", "Resources", resources_table(report))

    failures = counts_table(report, lambda c: c.failure_counts)
    memory = counts_table(report, lambda c: c.memory_failure_counts)
    if failures or memory:
        out.append('<section id="failures"><h2>Failures</h2>')
        if failures:
            out.append('<h3>Failure counts</h3><p class="caption">Unresolved, non-excluded scored sessions by '
                       f'failure reason.</p>{failures}')
        if memory:
            out.append(f'<h3>Memory failure counts</h3><p class="caption">The memory-specific reasons among them.'
                       f'</p>{memory}')
        out.append("</section>")

    out += optional_section("hygiene", "Hygiene", hygiene_table(report),
                            "Rate = numerator / denominator over scored sessions.")
    out += optional_section("gates", "Validity gates", gates_table(report))
    out += optional_section("exclusions", "Exclusions by reason", exclusions_html(report),  # can fake an effect
                            "Excluded cells per condition and reason; a condition whose exclusion rate differs "
                            "from the baseline's fails the exclusion-balance gate.")
    out += optional_section("matrix", "Outcome matrix", matrix_html(report),
                            "Each trap × seed cell per condition: pass, fail, or why it is not a valid cell.")
    out += optional_section("provenance", "Provenance, cost and admission", provenance_html(report))
    out += optional_section("canary", "Canary proof", canary_html(report))

    out.append('<section id="inputs"><h2>Inputs</h2>')
    bootstrap = (f"{esc(boot.resamples if boot else '—')} resamples, seed {esc(boot.seed if boot else '—')}, "
                 f"level {esc(boot.level if boot else '—')}")
    out.append(html_table(["input", "value"], [["run set", f"<code>{esc(report.run_set)}</code>"],
                                           ["raw events", esc(inputs.events)],
                                           ["pack digest", "<br>".join(f"<code>{esc(d)}</code>" for d in digests)],
                                           *([["log root", f"<code>{esc(log_root)}</code> (SHA-256 over the "
                                                           "runs' final chain hashes; <code>membench replay</code> "
                                                           "recomputes it from the log)"]] if log_root else []),
                                           ["bootstrap", bootstrap]], left_cols=2))
    out.append("</section>")
    transfer = transfer_html(report)  # empty unless the run set is a transfer study
    if transfer:
        out.append(transfer)
    out.append('<footer>Generated by membench from the warehouse; report.json is the machine contract. '
               'This page is self-contained: no scripts, no network.</footer>')
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"

