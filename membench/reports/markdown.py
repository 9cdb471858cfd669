"""`report.md`: the report for people reading a terminal or a pull request, rendered from the typed
report (`membench.reports.model.Report`, as built, or as `from_json(Report, …)` reads a `report.json` back), so
a report read back from disk renders the same.

Parts, in this order: the header (a notice when the run set measured traps `membench validate`
refused, then the admission funnel among the inputs) and conditions table (the failed validity
gates under it), cost and reliability per condition (membench/reports/effort.py), the comparisons, the registered families (effect sizes, power, Holm per test), the
ladder (the funnel again under it: the traps it ranks over), construct strata and validity gates,
the outcome matrix, provenance (versions, seeds, USD cost) and the canary proof. A part whose optional key an
older report.json lacks is left out.
"""

from __future__ import annotations

from membench.analytics.gates import Gate
from membench.reports.conventions import condition_order, construct_label
from membench.reports.effort import effort_markdown
from membench.reports.exclusions import exclusions_markdown
from membench.reports.gate_failures import failed_gates
from membench.reports.model import CellSummary, ConditionSummary, DesignPower, FamilyComparison, LadderEntry, Report, Stratum
from membench.reports.provenance_text import admission_text, not_verified_text, refused_measured_text, verification_text
from membench.reports.transfer import transfer_markdown


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _ci(entry: ConditionSummary | LadderEntry | CellSummary) -> str:
    """An entry's 95% CI, marked "exact" when it is the Clopper–Pearson interval (`ci_method`)."""
    low, high = entry.ci95
    if low is None:
        return "—"
    return f"[{_pct(low)}, {_pct(high)}]" + (" exact" if entry.ci_method == "clopper_pearson_traps" else "")


def render_markdown(report: Report) -> str:
    agent = report.agent
    partial, verification, admission = report.partial, report.verification, report.admission
    lines = [
        f"# membench report — {report.run_set}",
        "",
        *([f"**Partial report**: {partial.reason}; {partial.units_not_started} of "
           f"{partial.units_planned} units not started, {partial.attempts_abandoned} "
           f"attempts closed as abandoned. Resume with `{partial.resume}`.", ""]
          if partial is not None else []),
        *([f"**Not verified**: {not_verified_text(verification)}", ""]
          if verification is not None and not verification.verified else []),
        *([f"**Refused traps measured**: {refused_measured_text(admission)}", ""]
          if refused_measured_text(admission) else []),
        f"- suite: `{report.suite}`",
        f"- agent: `{agent}`" + (" (scripted reference agent, not a model)" if agent.startswith("scripted:") else ""),
        f"- raw events: {report.inputs.events}",
        f"- pack digest: `{report.inputs.pack_digest}`",
        *([f"- admission funnel: {admission_text(admission)}"] if admission is not None else []),
        *([f"- log root: `{report.inputs.log_root}` (SHA-256 over the runs' final chain hashes; "
           "`membench replay` recomputes it from the log)"] if report.inputs.log_root else []),
        *([f"- log: {verification_text(verification)}"] if verification is not None else []),
        *(["- oracle isolation: " + ", ".join(f"`{x.suite}` {x.oracle_isolation}" for x in report.suites)]
          if report.suites else []),
        *[f"- **warning**: suite `{x.suite}` was scored with its tests in the same process as the code under "
          "test (`in_process`): a patch written against the oracle could forge its verdicts (docs/sandbox.md)"
          for x in report.suites or [] if x.oracle_isolation == "in_process"],
        "",
        "| condition | cells | passed | pass rate | 95% CI | excluded |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for c in report.conditions:
        ci = _ci(c)
        lines.append(f"| {c.condition} | {c.cells} | {c.passed} | {_pct(c.pass_rate)} | {ci} | {c.excluded} |")
    failed = failed_gates(report)  # beside the numbers they invalidate, not only under "Validity gates"
    if failed:
        lines += ["", *(f"- **GATE FAILED**: {f.text()}" for f in failed)]
    boot = report.conditions[0].bootstrap if report.conditions else None
    lines += ["", f"CIs: trap-cluster percentile bootstrap, {boot.resamples if boot else None} resamples, seed "
              f"{boot.seed if boot else None}; "
              "marked exact: Clopper–Pearson over traps, where all or none of the cells passed and the bootstrap "
              "interval would have zero width."]
    effort = effort_markdown(report)
    if effort:
        lines += ["", effort.rstrip()]
    verdicts = _verdicts_markdown(report)
    if verdicts:
        lines += ["", verdicts.rstrip()]
    family = report.comparisons
    if family.comparisons:
        def p4(value: float | None) -> str:
            return "—" if value is None else f"{value:.4g}"

        alpha = family.alpha
        lines += ["", f"## Comparisons vs {family.baseline}", "",
                  "| A | B | D | A-only passes | B-only passes | units | paired cells | p clustered (primary) "
                  "| p Holm | verdict | p McNemar | p majority | p per seed |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
        for entry in family.comparisons:
            per_seed = ", ".join(f"{seed}: {p4(p)}" for seed, p in entry.p_per_seed.items()) or "—"
            verdict = "**rejected**" if entry.p_holm <= alpha else "not rejected"
            lines.append(f"| {entry.a} | {entry.b} | {entry.D} | {entry.discordant_a} | {entry.discordant_b} "
                         f"| {entry.units} | {entry.paired_cells} | {p4(entry.p_clustered)} | {p4(entry.p_holm)} "
                         f"| {verdict} | {p4(entry.p_mcnemar)} | {p4(entry.p_majority)} | {per_seed} |")
        lines += ["", f"Primary test: the exact trap-clustered sign-flip test (D = Σ d_t over traps); p Holm: Holm "
                      f"over the registered family of {family.family_size} (α = {alpha}); the verdict is the "
                      "primary test's. p McNemar (pooled over cells), p majority and p per seed are secondary, "
                      "descriptive views: a small secondary p is not a rejection."]
    families = _families_markdown(report)
    if families:
        lines += ["", families.rstrip()]
    hygiene = _hygiene_markdown(report)
    if hygiene:
        lines += ["", hygiene.rstrip()]
    exclusions = exclusions_markdown(report)  # exclusions by reason, exclusion balance
    if exclusions:
        lines += ["", exclusions.rstrip()]
    rest = _study_parts_markdown(report)
    if rest:
        lines += ["", rest.rstrip()]
    transfer = transfer_markdown(report)  # only a transfer study's report has the section
    if transfer:
        lines += [transfer.rstrip()]
    return "\n".join(lines) + "\n"


def _verdicts_markdown(report: Report) -> str:
    """One verdict line per comparison (membench/reports/comparison_verdicts.py), the asked ones first."""
    from membench.reports.comparison_verdicts import VERDICTS_LEGEND, grouped

    groups = grouped(report)
    if not groups:
        return ""
    lines = ["## Verdicts", "", VERDICTS_LEGEND]
    for title, items in groups:
        lines += ["", f"{title[0].upper()}{title[1:]}:", ""]
        lines += [f"- {v.line}" for v in items]
    return "\n".join(lines) + "\n"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _families_markdown(report: Report) -> str:
    fams = report.families
    if fams is None or not fams.families:
        return ""
    lines = ["## Registered families", "",
             f"Baseline {fams.baseline} ({fams.baseline_source}); study {fams.study}. Holm within each "
             "family, separately for each test (per seed: within each seed). Δ: paired pass-rate difference A − B, "
             "trap-cluster bootstrap 95% CI. Power: exact sign test over the paired traps (rejecting split; power "
             "when each trap favours one side with probability q = 0.8); MDD: the Δ at which the exact trap-clustered "
             "test rejects with 80 % power at α if each differing trap differs in one seed (the smallest such Δ) and "
             "if in all its seeds alike (the largest), when every paired trap differs and when as many differ as did "
             "(docs/study.md)."]
    for fam in fams.families:
        lines += ["", f"### {fam.name} ({fam.role}, {fam.family_size} comparisons, α = {fam.alpha})", "",
                  "| A | B | Δ | 95% CI | A-only / B-only | p → p Holm | power |", "|---|---|---:|---|---:|---|---|"]
        for c in fam.comparisons:
            tests = _family_tests_markdown(c, fams.primary_test)
            if c.per_seed:
                tests.append("per seed " + ", ".join(f"{s}: {_p(t.p_holm)}" for s, t in c.per_seed.items()))
            e, pw = c.effect, c.power
            if not c.available or e is None or pw is None:
                labels = {x.condition: x.label for x in (report.conformance.conditions if report.conformance else [])
                          if x.label}
                why = labels.get(c.a) or labels.get(c.b)
                lines.append(f"| {c.a} | {c.b} | {why + ' ' if why else ''}unavailable (p = 1) | — | — | "
                             f"{'; '.join(tests)} | — |")
                continue
            low, high = e.ci95
            ci = "—" if low is None or high is None else f"[{100 * low:+.1f}, {100 * high:+.1f}] pp"
            diff = "—" if e.difference is None else f"{100 * e.difference:+.1f} pp"
            power = ("no split rejects" if pw.threshold is None else
                     f"{pw.threshold}/{pw.units} traps; {_p(pw.by_q.get('0.8'))} at q = 0.8")
            power += "; " + detectable_text(pw)
            lines.append(f"| {c.a} | {c.b} | {diff} | {ci} | {e.discordant_a} / {e.discordant_b} "
                         f"| {'; '.join(tests)} | {power} |")
    return "\n".join(lines) + "\n"


def detectable_text(power: DesignPower) -> str:
    """The minimum detectable differences of a comparison's `power` entry under both arrangements, e.g.
    "MDD at 80 %, one discordant seed per trap / all seeds alike: 12.8 / 38.3 pp (60/60 traps
    differ), 8.3 / 24.9 pp (30/60 did)"."""
    parts = []
    for i, d in enumerate(power.detectable):
        value = ("none" if d.all_seeds_alike is None or d.one_discordant_seed is None else
                 f"{100 * d.one_discordant_seed:.1f} / {100 * d.all_seeds_alike:.1f} pp")
        parts.append(f"{value} ({d.differing}/{d.traps} traps {'differ' if i == 0 else 'did'})")
    return ("MDD at 80 %, one discordant seed per trap / all seeds alike: " + ", ".join(parts)) if parts else "MDD —"


def _family_tests_markdown(c: FamilyComparison, primary_test: str | None) -> list[str]:
    """The comparison's tests, the primary first; a secondary test's rejection always carries the
    primary verdict beside it (a pooled McNemar 'rejected' must not stand alone where the primary could not reject)."""
    primary = c.primary
    out = []
    if primary is not None and primary_test:
        out.append(f"{primary_test} (primary) {_p(primary.p)} → {_p(primary.p_holm)} "
                   + ("**rejected**" if primary.rejected else "not rejected"))
    for name, t in c.tests.items():
        if primary is not None and name == primary_test:
            continue
        mark = ""
        if t.rejected:
            mark = (" rejected (secondary; primary " + ("rejected" if primary.rejected else "NOT rejected") + ")"
                    if primary is not None else " **rejected**")
        out.append(f"{name} {_p(t.p)} → {_p(t.p_holm)}{mark}")
    return out


def _study_parts_markdown(report: Report) -> str:
    """Outcome matrix, provenance, USD cost, conformance funnel and canary proof (keys older reports lack)."""
    lines: list[str] = []
    matrix = report.outcome_matrix
    if matrix is not None and matrix.conditions:
        lines += ["## Outcome matrix", "", "Each trap × seed cell: pass, fail, or why it is not a valid cell."]
        for condition, traps in matrix.conditions.items():
            lines += ["", f"### {condition}", "", "| trap | " + " | ".join(f"seed {s}" for s in matrix.seeds) + " |",
                      "|---|" + "---|" * len(matrix.seeds)]
            for t in matrix.traps:
                lines.append(f"| {t} | " + " | ".join(traps.get(t, {}).get(s, "—") for s in matrix.seeds) + " |")
        lines.append("")
    prov = report.provenance
    if prov is not None:
        lines += ["## Provenance", "",
                  f"- agents: {', '.join(f'`{a}`' for a in prov.agents)} ({', '.join(prov.agent_kinds)})",
                  f"- models: {', '.join(f'`{m}`' for m in prov.models) or 'none named'}",
                  f"- code: {', '.join(f'`{d}`' for d in prov.code_digests)}",
                  f"- seeds: {', '.join(str(s) for s in prov.seeds)}; runs started: {prov.runs}"]
        if prov.memory_policies:
            from membench.reports.provenance_text import memory_policy_text

            lines.append(f"- memory policies: {memory_policy_text(prov.memory_policies)}")
        cost = report.cost_usd
        if cost is not None:
            from membench.reports.provenance_text import cost_text

            lines.append(f"- USD cost: {cost_text(cost)}")
        funnel = report.conformance
        if funnel is not None:  # library, external and plug-in memory systems pass `membench memory check` first
            lines.append(f"- conformance funnel: registered {funnel.registered} → conformant "
                         f"{funnel.conformant} → evaluated {funnel.evaluated}")
            for e in funnel.conditions:
                gates = f", failed {', '.join(e.failed_gates)}" if e.failed_gates else ""
                spent = f" (spent by {e.record})" if e.status == "budget_spent" and e.record else ""
                lines.append(f"  - {e.condition}: {e.status}{spent}{gates}"
                             + (f" — {e.label}" if e.label else ""))
        lines.append("")
    proof = report.canary
    if proof is not None:
        lines += ["## Canary proof", "", f"**{proof.status.upper()}**" + (f" — {proof.reason}" if proof.reason else "")]
        searched = proof.searched
        if searched is not None:
            from membench.reports.provenance_text import blobs_text

            lines += ["", f"{proof.secrets} secrets of pack `{proof.pack}` searched in "
                          f"{searched.agent_visible_events} agent-visible events ({searched.agent_visible_bytes} "
                          f"bytes){blobs_text(searched)} and in {', '.join(searched.reports)} "
                          f"({searched.report_bytes} bytes): "
                          f"{proof.leaks} leaks; {proof.own_trap_hits} hits inside their own trap (expected)."]
        for h in proof.hits:
            lines.append(f"- leak: secret `{h.secret}` of trap `{h.trap}` in {h.where}"
                         + (f" (a run of trap `{h.run_trap}`)" if h.run_trap else ""))
        lines.append("")
    return "\n".join(lines)


def _hygiene_markdown(report: Report) -> str:
    """The ladder, construct strata and validity gates (`membench.reports.hygiene`'s keys)."""
    lines = ["", "## Ladder", "", "| rank | condition | passed/valid | pass rate | 95% CI |", "|---:|---|---:|---:|---|"]
    for e in report.ladder:
        ci = _ci(e)
        lines.append(f"| {e.rank} | {e.condition} | {e.passed}/{e.valid} | {_pct(e.pass_rate)} | {ci} |")
    if report.admission is not None:  # which traps the ladder ranks over
        lines += ["", f"Traps: admission funnel {admission_text(report.admission)}."]
    strata = report.strata
    conditions = [e.condition for e in sorted(report.ladder, key=lambda e: condition_order(e.condition))]
    lines += ["", "## Construct strata (descriptive)", "",
              "| stratum | traps | " + " | ".join(conditions) + " |", "|---|---:|" + "---:|" * len(conditions)]
    rows: list[tuple[str, Stratum]] = [(construct_label(label), s) for label, s in strata.constructs.items()]
    rows += [("clean-start S3", strata.clean_start), ("continuation S3", strata.continuation)]
    for label, s in rows:
        lines.append(f"| {label} | {s.traps} | " + " | ".join(_pct(s.pass_rate.get(c)) for c in conditions) + " |")
    gates = report.validity_gates
    head = gates.b0_headroom
    lines += ["", "## Validity gates", ""]
    if head.overall is not None:
        o = head.overall
        lines.append(f"- B0 headroom overall: {o.numerator}/{o.denominator} = {_pct(o.value)} "
                     f"(≤ {_pct(o.threshold)} required, ≤ {_pct(o.preferred_threshold)} preferred): "
                     f"{'pass' if o.passed else 'FAIL'}")
        # failing_constructs names constructs failing either bound: a reversed one (C9, C10) has its gate
        # in `reversed`, not `by_construct` (looking it up there raised KeyError)
        gated = {**(head.reversed or {}), **head.by_construct}
        failing = head.failing_constructs
        lines.append("- B0 headroom per construct: " + ("pass in every construct" if not failing else
                     "FAIL in " + ", ".join(_failing_construct(k, gated.get(k)) for k in failing)))
    else:
        lines.append("- B0 headroom: not evaluable (no B0 cells)")
    for condition, g in gates.exclusions.items():
        if not g.passed or g.numerator:
            lines.append(f"- exclusions {condition}: {g.numerator}/{g.denominator} "
                         f"({'pass' if g.passed else 'FAIL'}) {g.reasons or ''}")
            for reason, why in (g.examples or {}).items():  # in the run's own words
                lines.append(f"  - {reason}: {why}")
    if all(g.numerator == 0 for g in gates.exclusions.values()):
        lines.append("- exclusions: none in any condition (≤ 5% required)")
    for name, pc in gates.paired_coverage.items():
        lines.append(f"- paired coverage {name}: {pc.numerator}/{pc.denominator} traps with ≥ 2 paired seeds "
                     f"(≥ {pc.threshold} required): {'pass' if pc.passed else 'FAIL'}")
    lines += _issue14_gates_markdown(report)
    if gates.reference:
        lines += ["", "Reference conditions: " + "; ".join(f"{k} on {v}" for k, v in gates.reference.items()) + "."]
    return "\n".join(lines) + "\n"


def _failing_construct(label: str, gate: Gate | None) -> str:
    if gate is None:  # a report written by other code: name the construct rather than fail the whole report
        return construct_label(label)
    return f"{construct_label(label)} ({gate.numerator}/{gate.denominator}{', reversed' if gate.direction == 'min' else ''})"


def _verdict(passed: bool) -> str:
    return "pass" if passed else "FAIL"


def _issue14_gates_markdown(report: Report) -> list[str]:
    """Reversed constructs, stratum validity, warm-up, continuation audit, every verdict, the hygiene
    panel (keys older reports lack)."""
    gates, lines = report.validity_gates, []
    for k, g in (gates.b0_headroom.reversed or {}).items():
        lines.append(f"- B0 passes reversed {construct_label(k)}: {g.numerator}/{g.denominator} = {_pct(g.value)} "
                     f"(≥ {_pct(g.threshold)} required; the trap runs the other way, reported apart from "
                     f"headroom): {_verdict(g.passed)}")
    if gates.warmup is not None:
        g = gates.warmup
        lines.append(f"- B0 warm-up S1+S2: {g.numerator}/{g.denominator} = {_pct(g.value)} "
                     f"(≥ {_pct(g.threshold)} required): {_verdict(g.passed)}")
    if gates.continuation_audit is not None:
        audit = gates.continuation_audit
        lines.append(f"- continuation audit: {audit.numerator}/{audit.denominator} valid cells started as designed "
                     f"(all required): {_verdict(audit.passed)}; {audit.continuation_cells} continuation cells, "
                     f"{audit.inherited_failed} inherited a session that had not passed")
        lines += [f"  - {f}" for f in audit.findings]
    if gates.stratum_validity:
        lines += ["", "| stratum | best condition | max rate (≥ 15%) | spread (> 0) | B0 rate | verdict |",
                  "|---|---|---:|---:|---:|---|"]
        for k, s in gates.stratum_validity.items():
            b0 = s.b0_rate
            bound = ("≥ " if b0.direction == "min" else "≤ ") + _pct(b0.threshold)
            lines.append(f"| {construct_label(k)}{' (reversed)' if s.reversed else ''} | {s.max_condition or '—'} | "
                         f"{_pct(s.max_rate.value)} | {_pct(s.spread.value)} | "
                         f"{b0.numerator}/{b0.denominator} ({bound}) | {_verdict(s.passed)} |")
    if gates.verdicts:
        failing = [k for k, v in gates.verdicts.items() if not v]
        lines += ["", f"All {len(gates.verdicts)} gates: {_verdict(gates.passed)}"
                  + (f" (failing: {', '.join(failing)})" if failing else "") + "."]
    lines += _failure_counts_markdown(report)
    panel = report.hygiene_panel
    if panel:
        # per condition, as the HTML shows it: pooled over conditions the baseline's rates would
        # dilute the memory conditions'; the pooled figure stays in report.json
        conditions = [c.condition for c in report.conditions]
        lines += ["", "## Hygiene rates", "", "Per condition: numerator/denominator = rate; — where nothing was observed.",
                  "", "| metric | better | " + " | ".join(conditions) + " |", "|---|---|" + "---:|" * len(conditions)]
        for metric, r in panel.items():
            cells = []
            for condition in conditions:
                ratio = r.conditions.get(condition)
                cells.append("—" if ratio is None or not ratio.denominator else
                             f"{ratio.numerator}/{ratio.denominator} = {_rate(metric, ratio.rate)}")
            lines.append(f"| {metric} | {r.direction} | " + " | ".join(cells) + " |")
        from membench.reports.conventions import hygiene_legend

        lines += ["", "What each metric counts (numerator / denominator, over scored sessions):", ""]
        lines += [f"- `{metric}`: {text}" for metric, text in hygiene_legend(panel)]
    return lines


def _rate(metric: str, rate: float | None) -> str:
    # memory_bloat is a ratio ≥ 1 (memories held per useful memory), not a fraction
    return _pct(rate) if metric != "memory_bloat" or rate is None else f"{rate:.2f}×"


def _failure_counts_markdown(report: Report) -> list[str]:
    """Failure reasons × conditions over unresolved, non-excluded scored sessions, memory-specific
    reasons marked (`conditions[].failure_counts`, `memory_failure_counts`), as the HTML shows them."""
    conditions = report.conditions
    reasons = sorted({r for c in conditions for r in c.failure_counts})
    if not reasons:
        return []
    memory = {r for c in conditions for r in c.memory_failure_counts}
    lines = ["", "## Failure counts", "", "Scored sessions that did not resolve, by `failure_reason` (first matching "
             "rule); * marks a memory-specific reason.", "",
             "| failure reason | " + " | ".join(c.condition for c in conditions) + " |",
             "|---|" + "---:|" * len(conditions)]
    for reason in reasons:
        lines.append(f"| {reason}{' *' if reason in memory else ''} | "
                     + " | ".join(str(c.failure_counts.get(reason, 0)) for c in conditions) + " |")
    return lines
