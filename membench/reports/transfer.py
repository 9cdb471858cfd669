"""The report's `transfer` section (docs/transfer.md), from the warehouse alone, and its renderings.

CCPF is computed by `membench.analytics.ccpf` from the runs' `TransferCase` rows (each case's status, and the
manifest its run's `EvaluatorPlan` scheduled: so a V1-prerequisite case is not applicable, a
`blocked` case counts as unreached — in the denominator), exactly as `membench stats ccpf` computes
it from a case list. Weighted scores, fired caps, dimension scores, the hard caps no case can fire
and the frozen banks come from the `TransferResult`, `TransferDimension`, `TransferHardCap` and
`SkillBank` rows the fold derived: nothing here reads a raw event. Resources are per-run means over non-excluded runs, and
reductions are against the `no_memory` baseline: (baseline − condition) / baseline.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

from membench.analytics.ccpf import CaseOutcome, EvaluatorManifest, ManifestCase, ccpf
from membench.reports.model import (Report, TransferBank, TransferConditionRow, TransferDimensionScore, TransferProjectRow,
                           TransferSection)
from membench.warehouse.read_model import ReadModel
from membench.warehouse.rows import RunSummaryRow, TransferDimensionRow, TransferResultRow

BASELINE = "no_memory"
CONDITION_ORDER = ("no_memory", "learned_bank", "native_bank", "ablated_bank")
RESOURCE_METRICS = ("agent_turns", "user_turns", "patch_invocations", "compactions", "lines_added", "agent_time_ms",
                    "user_time_ms", "total_tokens")
# evaluator statuses -> membench.analytics.ccpf statuses (the same names): blocked and unreached cases stay in the
# denominator, not_applicable leaves it
CCPF_STATUS = {"passed": "passed", "failed": "failed", "error": "error", "unreached": "unreached",
               "blocked": "blocked", "not_applicable": "not_applicable"}


def _order(condition: str) -> tuple[int, str]:
    return (CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER else len(CONDITION_ORDER), condition)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def transfer_section(reads: ReadModel, run_set: str, runs: list[RunSummaryRow]) -> TransferSection | None:
    """None when the run set holds no transfer run. `runs` is the unit cells (queries.run_results)."""
    cells = {r.run_id for r in runs}
    results = [r for r in reads.transfer_results(run_set) if r.run_id in cells]
    if not results:
        return None
    dims: dict[str, list[TransferDimensionRow]] = defaultdict(list)
    for d in reads.transfer_dimensions(run_set):
        dims[d.run_id].append(d)
    # each project's manifest, as its runs' plans scheduled it (the cases in manifest order), and each
    # run's case outcomes: a case the plan lists without an EvaluatorCase is `unreached`, as in the fold
    plans: dict[str, dict[str, ManifestCase]] = {}
    outcomes: dict[str, list[CaseOutcome]] = defaultdict(list)
    for case in reads.transfer_cases(run_set):
        if case.run_id not in cells:
            continue
        plans.setdefault(case.project, {})[case.case_id] = ManifestCase(
            case.case_id, case.dimension, case.weight, case.prerequisites)
        outcomes[case.run_id].append(CaseOutcome(case.run_id, "", case.case_id, CCPF_STATUS[case.status]))
    manifests = {project: EvaluatorManifest(project, tuple(cases.values())) for project, cases in plans.items()}
    unmapped: dict[str, list[str]] = defaultdict(list)  # run -> hard caps of its plan that no case can fire
    for cap in reads.transfer_hard_caps(run_set):
        if cap.run_id in cells and not cap.cases:
            unmapped[cap.run_id].append(cap.cap_id)
    by_cell: dict[tuple[str, str], list[TransferResultRow]] = defaultdict(list)
    for r in results:
        by_cell[(r.task, r.condition)].append(r)

    def case_outcomes(rows: list[TransferResultRow]) -> list[CaseOutcome]:
        return [CaseOutcome(o.run, r.task, o.case, o.status) for r in rows if not r.excluded
                for o in outcomes[r.run_id]]

    projects: list[TransferProjectRow] = []
    project_micro: dict[str, list[float]] = defaultdict(list)
    for (project, condition) in sorted(by_cell, key=lambda k: (k[0], _order(k[1]))):
        rows = by_cell[(project, condition)]
        valid = [r for r in rows if not r.excluded]
        reasons: dict[str, int] = defaultdict(int)
        for r in rows:
            if r.excluded:
                reasons[r.exclusion_reason or "unknown"] += 1
        figures = ccpf(case_outcomes(rows), manifests.values()) if valid else None
        if figures is not None and figures.micro.value is not None:
            project_micro[condition].append(figures.micro.value)
        dim_rows: dict[str, list[TransferDimensionRow]] = defaultdict(list)
        for r in valid:
            for d in dims[r.run_id]:
                dim_rows[d.dimension].append(d)
        dimensions = [TransferDimensionScore(
            dimension=k, title=v[0].title, weight=v[0].weight, cases=sum(d.cases for d in v),
            passed=sum(d.passed for d in v), score_mean=_mean([d.score for d in v if d.score is not None]))
            for k, v in sorted(dim_rows.items())]
        fired = sorted({c for r in valid for c in r.caps_fired})
        projects.append(TransferProjectRow(
            project=project, condition=condition, runs=len(rows), excluded=len(rows) - len(valid),
            exclusion_reasons=dict(sorted(reasons.items())),
            passed=figures.micro.numerator if figures else 0, applicable=figures.micro.denominator if figures else 0,
            ccpf_micro=figures.micro.value if figures else None, ccpf_macro=figures.macro if figures else None,
            weighted_score_mean=_mean([r.weighted_score for r in valid]),
            raw_score_mean=_mean([r.raw_score for r in valid]),
            all_cases_pass_runs=sum(1 for r in valid if r.all_cases_pass), caps_fired=fired,
            cap_reasons=sorted({reason for r in valid for reason in r.cap_reasons}), dimensions=dimensions,
            caps_without_cases=sorted({c for r in rows for c in unmapped.get(r.run_id, [])}) or None))

    by_condition: dict[str, list[TransferResultRow]] = defaultdict(list)
    for r in results:
        by_condition[r.condition].append(r)
    means: dict[str, dict[str, float | None]] = {}
    for condition, rows in by_condition.items():
        valid = [r for r in rows if not r.excluded]
        means[condition] = {m: _mean([float(r.input_tokens + r.output_tokens) if m == "total_tokens"
                                      else float(getattr(r, m)) for r in valid]) for m in RESOURCE_METRICS}
    baseline = BASELINE if BASELINE in by_condition else None
    conditions: list[TransferConditionRow] = []
    for condition in sorted(by_condition, key=_order):
        rows = by_condition[condition]
        valid = [r for r in rows if not r.excluded]
        pooled = ccpf(case_outcomes(rows), manifests.values()) if valid else None
        reduction = None
        if baseline is not None and condition != baseline:
            reduction = {}
            for m in RESOURCE_METRICS:
                base, mine = means[baseline][m], means[condition][m]
                reduction[m] = (base - mine) / base if base and mine is not None else None
        conditions.append(TransferConditionRow(
            condition=condition, runs=len(rows), excluded=len(rows) - len(valid),
            ccpf_micro=pooled.micro.value if pooled else None,
            ccpf_macro_over_projects=_mean(project_micro[condition]),
            weighted_score_mean=_mean([r.weighted_score for r in valid]),
            resources=means[condition], reduction_vs_baseline=reduction))

    banks = [TransferBank(seed=int(bank.unit_id.rsplit("/", 1)[1]), bank=bank.bank, digest=bank.digest,
                          files=bank.files, ablated_skill=bank.ablated_skill, distiller=bank.distiller)
             for bank in reads.skill_banks(run_set)]
    banks.sort(key=lambda b: (b.seed, b.bank))
    return TransferSection(baseline=baseline, projects=projects, conditions=conditions, banks=banks)


# ------------------------------------------------------------------------------------------ renderings
def _num(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _reduction(value: float | None) -> str:
    return "" if value is None else f" ({100 * value:+.0f}%)"


def transfer_markdown(report: Report) -> str:
    section = report.transfer
    if section is None:
        return ""
    out = ["", "## Transfer (EngramBench protocol)", "",
           "CCPF = passed / applicable hidden cases (blocked and unreached count); weighted score after hard caps.",
           "", "| project | condition | runs | excluded | CCPF | weighted score | all cases pass | caps fired |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for p in section.projects:
        out.append(f"| {p.project} | {p.condition} | {p.runs} | {p.excluded} | {_num(p.ccpf_micro)} | "
                   f"{_num(p.weighted_score_mean, 1)} | {p.all_cases_pass_runs} | "
                   f"{', '.join(p.caps_fired) or '—'} |")
    out += ["", "| condition | CCPF micro | CCPF macro over projects | weighted score | "
            + " | ".join(RESOURCE_METRICS) + " |", "|---|---:|---:|---:|" + "---:|" * len(RESOURCE_METRICS)]
    for c in section.conditions:
        red = c.reduction_vs_baseline or {}
        cells = []
        for m in RESOURCE_METRICS:
            cell = _num(c.resources.get(m), 1)
            cells.append(cell + _reduction(red.get(m)))
        out.append(f"| {c.condition} | {_num(c.ccpf_micro)} | {_num(c.ccpf_macro_over_projects)} | "
                   f"{_num(c.weighted_score_mean, 1)} | " + " | ".join(cells) + " |")
    out += ["", "Reductions in parentheses are against the baseline "
            f"`{section.baseline or '—'}`: (baseline − condition) / baseline.", "",
            "Dimension scores (mean passed weight / case weight):", ""]
    for p in section.projects:
        dims = ", ".join(f"{d.dimension} {_num(d.score_mean, 2)}" for d in p.dimensions)
        out.append(f"- {p.project} / {p.condition}: {dims or '—'}")
        for reason in p.cap_reasons:
            out.append(f"  - cap fired: {reason}")
        for cap in p.caps_without_cases or ():
            out.append(f"  - hard cap {cap} cannot fire without a case mapping (cases.json `hardCaps`, "
                       "docs/transfer.md)")
        for reason, n in p.exclusion_reasons.items():
            out.append(f"  - excluded ({n}): {reason}")
    if section.banks:
        out += ["", "Frozen skill banks: " + "; ".join(
            f"seed {b.seed} {b.bank} ({b.files} files"
            + (f", {b.distiller} distiller" if b.distiller else "") + f") `{b.digest[:16]}`"
            for b in section.banks)]
    return "\n".join(out) + "\n"


def transfer_html(report: Report) -> str:
    section = report.transfer
    if section is None:
        return ""
    esc = lambda v: html.escape(str(v))  # noqa: E731
    out = ['<section id="transfer"><h2>Transfer (EngramBench protocol)</h2>',
           "<p>CCPF = passed / applicable hidden cases (blocked and unreached count); weighted score after hard "
           "caps. Bars: per-dimension score (passed case weight / case weight), mean over runs.</p>",
           "<table><thead><tr><th>project</th><th>condition</th><th>runs</th><th>excluded</th><th>CCPF</th>"
           "<th>weighted score</th><th>caps fired</th><th>dimensions</th></tr></thead><tbody>"]
    for p in section.projects:
        bars = []
        for i, d in enumerate(p.dimensions):
            width = 0 if d.score_mean is None else round(60 * d.score_mean)
            bars.append(f'<text x="{i * 70}" y="12" font-size="10">{esc(d.dimension)} {_num(d.score_mean, 2)}</text>'
                        f'<rect x="{i * 70}" y="16" width="60" height="8" fill="#eee"/>'
                        f'<rect x="{i * 70}" y="16" width="{width}" height="8" fill="#4878a8"/>')
        svg = f'<svg width="{70 * max(1, len(bars))}" height="26" role="img">{"".join(bars)}</svg>'
        out.append(f"<tr><td>{esc(p.project)}</td><td>{esc(p.condition)}</td><td>{p.runs}</td>"
                   f"<td>{p.excluded}</td><td>{_num(p.ccpf_micro)}</td><td>{_num(p.weighted_score_mean, 1)}</td>"
                   f"<td>{esc('; '.join(p.cap_reasons) or '—')}</td><td>{svg}</td></tr>")
    out.append("</tbody></table>")
    out.append("<table><thead><tr><th>condition</th><th>CCPF micro</th><th>CCPF macro over projects</th>"
               "<th>weighted score</th>" + "".join(f"<th>{m}</th>" for m in RESOURCE_METRICS) + "</tr></thead><tbody>")
    for c in section.conditions:
        red = c.reduction_vs_baseline or {}
        cells = "".join(f"<td>{_num(c.resources.get(m), 1)}{_reduction(red.get(m))}</td>" for m in RESOURCE_METRICS)
        out.append(f"<tr><td>{esc(c.condition)}</td><td>{_num(c.ccpf_micro)}</td>"
                   f"<td>{_num(c.ccpf_macro_over_projects)}</td><td>{_num(c.weighted_score_mean, 1)}</td>{cells}</tr>")
    out.append("</tbody></table></section>")
    return "".join(out)
