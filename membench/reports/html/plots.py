"""The report's inline SVG plots: the ladder (pass rate per condition with 95% CIs), the construct
strata (pass rate per construct × condition) and the cost frontier (tokens against pass rate)."""

from __future__ import annotations

from collections.abc import Callable

from membench.reports.conventions import construct_label
from membench.reports.html.format import BASELINE_COLOR, esc, fmt_ci, fmt_num, fmt_pct, nice_ticks, svg_open, tick_label, x_axis
from membench.reports.model import CellSummary, ConditionSummary, LadderEntry, Report


def _ladder_entries(report: Report) -> list[LadderEntry]:
    """The ladder; a report without one ranks nothing, so its conditions are shown in their order."""
    if report.ladder:
        return report.ladder
    return [LadderEntry(condition=c.condition, pass_rate=c.pass_rate, ci95=c.ci95, passed=c.passed,
                        valid=c.cells - c.excluded, rank=0) for c in report.conditions]


def ladder_svg(report: Report, colors: dict[str, str]) -> str:
    entries = _ladder_entries(report)
    left, right, top, row = 120, 250, 14, 30
    width = 940
    plot_w = width - left - right
    height = top + row * max(len(entries), 1) + 44
    bottom = top + row * max(len(entries), 1)

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(1.0, v))

    parts = svg_open(width, height, "ladder-plot", "Ladder: pass rate per condition with 95% CI")
    x_axis(parts, left, left + plot_w, top - 6, bottom, [(x(t / 4), f"{25 * t}%") for t in range(5)],
            "pass rate (valid cells), whiskers: 95% trap-cluster bootstrap CI")
    for i, e in enumerate(entries):
        cy = top + row * i + row / 2
        color = colors.get(e.condition, BASELINE_COLOR)
        parts.append(f'<text x="{left - 10}" y="{cy + 4:.1f}" font-size="13" text-anchor="end" '
                     f'font-weight="600">{esc(e.condition)}</text>')
        rate = e.pass_rate
        if rate is None:
            parts.append(f'<text x="{left + 6}" y="{cy + 4:.1f}" font-size="12" fill="#5b636b">no valid cells</text>')
            continue
        parts.append(f'<rect x="{left}" y="{cy - 7:.1f}" width="{x(rate) - left:.1f}" height="14" fill="{color}" '
                     f'fill-opacity="0.18"/>')
        ci = e.ci95 or [None, None]
        if ci[0] is not None and ci[1] is not None:
            lo, hi = x(ci[0]), x(ci[1])
            parts.append(f'<line x1="{lo:.1f}" y1="{cy:.1f}" x2="{hi:.1f}" y2="{cy:.1f}" stroke="{color}" '
                         f'stroke-width="2"/>')
            for end in (lo, hi):
                parts.append(f'<line x1="{end:.1f}" y1="{cy - 6:.1f}" x2="{end:.1f}" y2="{cy + 6:.1f}" '
                             f'stroke="{color}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x(rate):.1f}" cy="{cy:.1f}" r="5.5" fill="{color}" stroke="#fff" '
                     f'stroke-width="1.5"/>')
        counts = f" ({e.passed}/{e.valid})"
        parts.append(f'<text x="{left + plot_w + 12}" y="{cy + 4:.1f}" font-size="12">{fmt_pct(rate)}{esc(counts)}'
                     f'<tspan fill="#5b636b" font-size="11"> {esc(fmt_ci(ci))}</tspan></text>')
    parts.append("</svg>")
    return "".join(parts)


StrataRow = tuple[str, int | None, dict[str, tuple[float | None, list[float | None] | None]]]


def _strata_rows(report: Report) -> list[StrataRow]:
    """[(stratum label, traps, {condition: (rate, ci95)})]: constructs, then clean-start/continuation."""
    strata = report.strata
    entries = {c.condition: c for c in report.conditions}

    def ci_of(cond: str, summary: Callable[[ConditionSummary], CellSummary | None]) -> list[float | None] | None:
        entry = entries.get(cond)
        cell = summary(entry) if entry is not None else None
        return None if cell is None else cell.ci95

    rows: list[StrataRow] = []
    for label, s in strata.constructs.items():
        values = {cond: (rate, ci_of(cond, lambda c: c.by_construct.get(label)))  # noqa: B023
                  for cond, rate in s.pass_rate.items()}
        rows.append((construct_label(str(label)), s.traps, values))
    if not rows:  # no construct strata: fall back to the conditions' own by_construct
        labels: list[str] = []
        for c in report.conditions:
            labels += [k for k in c.by_construct if k not in labels]
        for label in labels:
            values = {c.condition: (c.by_construct[label].pass_rate, c.by_construct[label].ci95)
                      for c in report.conditions if label in c.by_construct}
            rows.append((construct_label(label), None, values))
    for stratum, summary, label in ((strata.clean_start, lambda c: c.clean_start, "clean-start S3"),
                                    (strata.continuation, lambda c: c.continuation, "continuation S3")):
        if stratum.traps:
            values = {cond: (rate, ci_of(cond, summary)) for cond, rate in stratum.pass_rate.items()}
            rows.append((label, stratum.traps, values))
    return rows


def strata_svg(report: Report, colors: dict[str, str], conditions: list[str]) -> str | None:
    rows = _strata_rows(report)
    if not rows:
        return None
    sub = 11
    gap = max(8, 32 - sub * len(conditions))
    # room for the longest row label (construct names, DreamBench-SWE Table 30) at ≈ 7 px a character
    left, right, top = max(150, 20 + 7 * max(len(label) for label, _, _ in rows)), 40, 34
    width = 940
    plot_w = width - left - right
    band = sub * len(conditions) + gap
    bottom = top + band * len(rows)
    height = bottom + 44

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(1.0, v))

    parts = svg_open(width, height, "strata-plot", "Construct strata: pass rate per construct and condition")
    lx: float = left
    for cond in conditions:  # legend
        parts.append(f'<circle cx="{lx + 5}" cy="12" r="5" fill="{colors[cond]}"/>')
        parts.append(f'<text x="{lx + 14}" y="16" font-size="12">{esc(cond)}</text>')
        lx += 24 + 7.5 * len(cond)
    for i, (label, traps, _) in enumerate(rows):
        y0 = top + band * i
        if i % 2 == 0:
            parts.append(f'<rect x="0" y="{y0:.1f}" width="{width}" height="{band:.1f}" fill="#f4f6f8"/>')
    x_axis(parts, left, left + plot_w, top, bottom, [(x(t / 4), f"{25 * t}%") for t in range(5)],
            "pass rate per stratum (descriptive), whiskers: 95% CI")
    for i, (label, traps, values) in enumerate(rows):
        y0 = top + band * i + gap / 2  # type: ignore[assignment]  # y0 is a coordinate: float here, int above
        mid = y0 + sub * len(conditions) / 2
        parts.append(f'<text x="{left - 10}" y="{mid + 1:.1f}" font-size="12.5" text-anchor="end" '
                     f'font-weight="600">{esc(label)}</text>')
        if traps is not None:
            parts.append(f'<text x="{left - 10}" y="{mid + 13:.1f}" font-size="10.5" text-anchor="end" '
                         f'fill="#5b636b">{traps} trap{"s" if traps != 1 else ""}</text>')
        for j, cond in enumerate(conditions):
            cy = y0 + sub * j + sub / 2
            rate, ci = values.get(cond, (None, None))
            if rate is None:
                continue
            color = colors[cond]
            if ci and ci[0] is not None and ci[1] is not None:
                parts.append(f'<line x1="{x(ci[0]):.1f}" y1="{cy:.1f}" x2="{x(ci[1]):.1f}" y2="{cy:.1f}" '
                             f'stroke="{color}" stroke-width="1.4" stroke-opacity="0.55"/>')
            parts.append(f'<circle cx="{x(rate):.1f}" cy="{cy:.1f}" r="4" fill="{color}"><title>{esc(cond)} · '
                         f'{esc(label)}: {fmt_pct(rate)}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _frontier_points(report: Report) -> list[tuple[str, float, float]]:
    resources = report.resources.conditions
    out = []
    for c in report.conditions:
        r = resources.get(c.condition)
        tokens = r.mean.get("total_tokens") if r is not None else None
        if tokens is not None and c.pass_rate is not None:
            out.append((c.condition, float(tokens), float(c.pass_rate)))
    return out


def frontier_svg(report: Report, colors: dict[str, str]) -> str | None:
    points = _frontier_points(report)
    if not points:
        return None
    left, right, top, bottom_pad = 64, 40, 16, 48
    width, height = 940, 360
    plot_w, plot_h = width - left - right, height - top - bottom_pad
    bottom = top + plot_h
    ticks = nice_ticks(max(p[1] for p in points) * 1.08)
    x_max = ticks[-1]

    def x(v: float) -> float:
        return left + plot_w * v / x_max

    def y(v: float) -> float:
        return bottom - plot_h * v

    parts = svg_open(width, height, "frontier-plot", "Cost frontier: mean tokens per run against pass rate")
    for t in range(5):
        yy = y(t / 4)
        parts.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}" stroke="#e3e7eb"/>')
        parts.append(f'<text x="{left - 8}" y="{yy + 4:.1f}" font-size="11" text-anchor="end" '
                     f'fill="#5b636b">{25 * t}%</text>')
    parts.append(f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="11.5" text-anchor="middle" fill="#5b636b" '
                 f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">pass rate</text>')
    x_axis(parts, left, left + plot_w, top, bottom, [(x(t), tick_label(t)) for t in ticks],
            "mean total tokens per run (input + output)")
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#9aa3ab"/>')
    # non-dominated conditions: no other has fewer-or-equal tokens and a higher-or-equal pass rate (one strictly)
    front = sorted((p for p in points if not any(q is not p and q[1] <= p[1] and q[2] >= p[2]
                                                 and (q[1] < p[1] or q[2] > p[2]) for q in points)),
                   key=lambda p: p[1])
    if len(front) > 1:
        path = " ".join(f"{x(p[1]):.1f},{y(p[2]):.1f}" for p in front)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#9aa3ab" stroke-width="1.5" '
                     f'stroke-dasharray="5 4"/>')
    placed: list[tuple[float, float]] = []
    for name, tokens, rate in sorted(points, key=lambda p: (p[1], p[2])):
        cx, cy = x(tokens), y(rate)
        color = colors.get(name, BASELINE_COLOR)
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{color}" stroke="#fff" stroke-width="1.5">'
                     f'<title>{esc(name)}: {fmt_num(tokens)} tokens/run, {fmt_pct(rate)}</title></circle>')
        ly = cy - 10 if rate < 0.9 else cy + 18
        while any(abs(ly - py) < 13 and abs(cx - px) < 70 for px, py in placed):
            ly += 13
        placed.append((cx, ly))
        anchor = "end" if cx > left + plot_w - 60 else "start"
        dx = -8 if anchor == "end" else 8
        parts.append(f'<text x="{cx + dx:.1f}" y="{ly:.1f}" font-size="12" font-weight="600" '
                     f'text-anchor="{anchor}">{esc(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
