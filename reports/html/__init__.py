"""A report as one self-contained HTML page: inline CSS and inline SVG plots, no scripts, no fetches.

`render_html(report)` takes the `report.json` dict (reports/build.py and its sections) and draws:

- the ladder: pass rate per condition with its 95% trap-cluster bootstrap CI (`ladder`, else
  `conditions`);
- construct strata: pass rate per construct × condition with CIs (`strata` and each condition's
  `by_construct`, `clean_start`, `continuation`), or a note when the report has none;
- the cost frontier: mean total tokens per run (x) against pass rate (y) per condition
  (`resources`), the non-dominated conditions joined by a dashed line;

then tables: conditions, comparisons (p-values to 4 significant digits), resources, failure counts
and memory failure counts, hygiene, validity gates, and the inputs (raw events, pack digest).
Every key but `run_set`, `suite`, `agent`, `conditions` and `inputs` is optional. Every string from
the report is HTML-escaped. The page opens from disk with no network (system fonts only).
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B", "#332288", "#117733",
           "#AA4499")
BASELINE_COLOR = "#6B6B6B"
BASELINES = ("B0", "no_memory")

CSS = """
:root { --fg:#1d2125; --muted:#5b636b; --line:#d8dde2; --band:#f4f6f8; --ok:#1a7f37; --bad:#c62828; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1000px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 34px 0 6px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 18px 0 6px; }
p.note, .caption { color: var(--muted); font-size: 12.5px; margin: 4px 0 10px; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--band);
       padding: 1px 4px; border-radius: 3px; word-break: break-all; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 12px 0 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
.badge { display: inline-block; font-size: 11.5px; padding: 1px 7px; border-radius: 9px; margin-left: 6px;
         background: #fff4e0; color: #8a5300; border: 1px solid #f0d3a0; vertical-align: 1px; }
.pass { color: var(--ok); font-weight: 600; }
.fail { color: var(--bad); font-weight: 600; }
table { border-collapse: collapse; margin: 6px 0 4px; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { font-weight: 600; background: var(--band); }
th:first-child, td:first-child, td.l, th.l { text-align: left; }
.scroll { overflow-x: auto; }
svg { display: block; max-width: 100%; height: auto; margin: 6px 0; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: var(--fg); }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 5px; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""


# ---------------------------------------------------------------------------------------------- format


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def _ci(ci: list[float | None] | None) -> str:
    if not ci or ci[0] is None:
        return "—"
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]"


def _signed_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}%"


def _colors(conditions: list[str]) -> dict[str, str]:
    out, i = {}, 0
    for name in conditions:
        if name in BASELINES:
            out[name] = BASELINE_COLOR
        else:
            out[name] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def _nice_ticks(high: float, count: int = 5) -> list[float]:
    """0 .. ≥ high in 1/2/5 × 10^k steps."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    n = math.ceil(high / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _tick_label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def _svg_open(width: int, height: int, ident: str, label: str) -> list[str]:
    return [f'<svg id="{ident}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(label)}"><title>{_e(label)}</title>']


def _x_axis(parts: list[str], x0: float, x1: float, top: float, bottom: float, ticks: list[tuple[float, str]],
            caption: str) -> None:
    for x, text in ticks:
        parts.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" stroke="#e3e7eb"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 14:.1f}" font-size="11" text-anchor="middle" '
                     f'fill="#5b636b">{_e(text)}</text>')
    parts.append(f'<line x1="{x0:.1f}" y1="{bottom:.1f}" x2="{x1:.1f}" y2="{bottom:.1f}" stroke="#9aa3ab"/>')
    parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{bottom + 31:.1f}" font-size="11.5" text-anchor="middle" '
                 f'fill="#5b636b">{_e(caption)}</text>')


# ---------------------------------------------------------------------------------------------- plots


def _ladder_entries(report: dict[str, Any]) -> list[dict[str, Any]]:
    if report.get("ladder"):
        return [{"condition": e["condition"], "pass_rate": e.get("pass_rate"), "ci95": e.get("ci95"),
                 "passed": e.get("passed"), "valid": e.get("valid")} for e in report["ladder"]]
    return [{"condition": c["condition"], "pass_rate": c.get("pass_rate"), "ci95": c.get("ci95"),
             "passed": c.get("passed"), "valid": c.get("cells", 0) - c.get("excluded", 0)}
            for c in report.get("conditions", [])]


def ladder_svg(report: dict[str, Any], colors: dict[str, str]) -> str:
    entries = _ladder_entries(report)
    left, right, top, row = 120, 250, 14, 30
    width = 940
    plot_w = width - left - right
    height = top + row * max(len(entries), 1) + 44
    bottom = top + row * max(len(entries), 1)

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(1.0, v))

    parts = _svg_open(width, height, "ladder-plot", "Ladder: pass rate per condition with 95% CI")
    _x_axis(parts, left, left + plot_w, top - 6, bottom, [(x(t / 4), f"{25 * t}%") for t in range(5)],
            "pass rate (valid cells), whiskers: 95% trap-cluster bootstrap CI")
    for i, e in enumerate(entries):
        cy = top + row * i + row / 2
        color = colors.get(e["condition"], BASELINE_COLOR)
        parts.append(f'<text x="{left - 10}" y="{cy + 4:.1f}" font-size="13" text-anchor="end" '
                     f'font-weight="600">{_e(e["condition"])}</text>')
        rate = e["pass_rate"]
        if rate is None:
            parts.append(f'<text x="{left + 6}" y="{cy + 4:.1f}" font-size="12" fill="#5b636b">no valid cells</text>')
            continue
        parts.append(f'<rect x="{left}" y="{cy - 7:.1f}" width="{x(rate) - left:.1f}" height="14" fill="{color}" '
                     f'fill-opacity="0.18"/>')
        ci = e.get("ci95") or [None, None]
        if ci[0] is not None:
            lo, hi = x(ci[0]), x(ci[1])
            parts.append(f'<line x1="{lo:.1f}" y1="{cy:.1f}" x2="{hi:.1f}" y2="{cy:.1f}" stroke="{color}" '
                         f'stroke-width="2"/>')
            for end in (lo, hi):
                parts.append(f'<line x1="{end:.1f}" y1="{cy - 6:.1f}" x2="{end:.1f}" y2="{cy + 6:.1f}" '
                             f'stroke="{color}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x(rate):.1f}" cy="{cy:.1f}" r="5.5" fill="{color}" stroke="#fff" '
                     f'stroke-width="1.5"/>')
        counts = f" ({e['passed']}/{e['valid']})" if e.get("passed") is not None and e.get("valid") is not None else ""
        parts.append(f'<text x="{left + plot_w + 12}" y="{cy + 4:.1f}" font-size="12">{_pct(rate)}{_e(counts)}'
                     f'<tspan fill="#5b636b" font-size="11"> {_e(_ci(ci))}</tspan></text>')
    parts.append("</svg>")
    return "".join(parts)


def _strata_rows(report: dict[str, Any]) -> list[tuple[str, int | None, dict[str, tuple[float | None, list | None]]]]:
    """[(stratum label, traps, {condition: (rate, ci95)})]: constructs, then clean-start/continuation."""
    strata = report.get("strata") or {}
    entries = {c["condition"]: c for c in report.get("conditions", [])}
    rows = []
    for label, s in (strata.get("constructs") or {}).items():
        values = {}
        for cond, rate in (s.get("pass_rate") or {}).items():
            ci = ((entries.get(cond) or {}).get("by_construct") or {}).get(label, {}).get("ci95")
            values[cond] = (rate, ci)
        rows.append((str(label), s.get("traps"), values))
    if not rows:  # no strata key: fall back to the conditions' own by_construct
        labels: list[str] = []
        for c in report.get("conditions", []):
            labels += [k for k in (c.get("by_construct") or {}) if k not in labels]
        for label in labels:
            values = {c["condition"]: (c["by_construct"][label].get("pass_rate"), c["by_construct"][label].get("ci95"))
                      for c in report.get("conditions", []) if label in (c.get("by_construct") or {})}
            rows.append((label, None, values))
    for key, label in (("clean_start", "clean-start S3"), ("continuation", "continuation S3")):
        s = strata.get(key)
        if s and s.get("traps"):
            values = {cond: (rate, (entries.get(cond) or {}).get(key, {}).get("ci95"))
                      for cond, rate in (s.get("pass_rate") or {}).items()}
            rows.append((label, s.get("traps"), values))
    return rows


def strata_svg(report: dict[str, Any], colors: dict[str, str], conditions: list[str]) -> str | None:
    rows = _strata_rows(report)
    if not rows:
        return None
    sub = 11
    gap = max(8, 32 - sub * len(conditions))
    left, right, top = 150, 40, 34
    width = 940
    plot_w = width - left - right
    band = sub * len(conditions) + gap
    bottom = top + band * len(rows)
    height = bottom + 44

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(1.0, v))

    parts = _svg_open(width, height, "strata-plot", "Construct strata: pass rate per construct and condition")
    lx = left
    for cond in conditions:  # legend
        parts.append(f'<circle cx="{lx + 5}" cy="12" r="5" fill="{colors[cond]}"/>')
        parts.append(f'<text x="{lx + 14}" y="16" font-size="12">{_e(cond)}</text>')
        lx += 24 + 7.5 * len(cond)
    for i, (label, traps, _) in enumerate(rows):
        y0 = top + band * i
        if i % 2 == 0:
            parts.append(f'<rect x="0" y="{y0:.1f}" width="{width}" height="{band:.1f}" fill="#f4f6f8"/>')
    _x_axis(parts, left, left + plot_w, top, bottom, [(x(t / 4), f"{25 * t}%") for t in range(5)],
            "pass rate per stratum (descriptive), whiskers: 95% CI")
    for i, (label, traps, values) in enumerate(rows):
        y0 = top + band * i + gap / 2
        mid = y0 + sub * len(conditions) / 2
        parts.append(f'<text x="{left - 10}" y="{mid + 1:.1f}" font-size="12.5" text-anchor="end" '
                     f'font-weight="600">{_e(label)}</text>')
        if traps is not None:
            parts.append(f'<text x="{left - 10}" y="{mid + 13:.1f}" font-size="10.5" text-anchor="end" '
                         f'fill="#5b636b">{traps} trap{"s" if traps != 1 else ""}</text>')
        for j, cond in enumerate(conditions):
            cy = y0 + sub * j + sub / 2
            rate, ci = values.get(cond, (None, None))
            if rate is None:
                continue
            color = colors[cond]
            if ci and ci[0] is not None:
                parts.append(f'<line x1="{x(ci[0]):.1f}" y1="{cy:.1f}" x2="{x(ci[1]):.1f}" y2="{cy:.1f}" '
                             f'stroke="{color}" stroke-width="1.4" stroke-opacity="0.55"/>')
            parts.append(f'<circle cx="{x(rate):.1f}" cy="{cy:.1f}" r="4" fill="{color}"><title>{_e(cond)} · '
                         f'{_e(label)}: {_pct(rate)}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _frontier_points(report: dict[str, Any]) -> list[tuple[str, float, float]]:
    resources = (report.get("resources") or {}).get("conditions") or {}
    out = []
    for c in report.get("conditions", []):
        mean = (resources.get(c["condition"]) or {}).get("mean") or {}
        tokens = mean.get("total_tokens")
        if tokens is not None and c.get("pass_rate") is not None:
            out.append((c["condition"], float(tokens), float(c["pass_rate"])))
    return out


def frontier_svg(report: dict[str, Any], colors: dict[str, str]) -> str | None:
    points = _frontier_points(report)
    if not points:
        return None
    left, right, top, bottom_pad = 64, 40, 16, 48
    width, height = 940, 360
    plot_w, plot_h = width - left - right, height - top - bottom_pad
    bottom = top + plot_h
    ticks = _nice_ticks(max(p[1] for p in points) * 1.08)
    x_max = ticks[-1]

    def x(v: float) -> float:
        return left + plot_w * v / x_max

    def y(v: float) -> float:
        return bottom - plot_h * v

    parts = _svg_open(width, height, "frontier-plot", "Cost frontier: mean tokens per run against pass rate")
    for t in range(5):
        yy = y(t / 4)
        parts.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}" stroke="#e3e7eb"/>')
        parts.append(f'<text x="{left - 8}" y="{yy + 4:.1f}" font-size="11" text-anchor="end" '
                     f'fill="#5b636b">{25 * t}%</text>')
    parts.append(f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="11.5" text-anchor="middle" fill="#5b636b" '
                 f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">pass rate</text>')
    _x_axis(parts, left, left + plot_w, top, bottom, [(x(t), _tick_label(t)) for t in ticks],
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
                     f'<title>{_e(name)}: {_num(tokens)} tokens/run, {_pct(rate)}</title></circle>')
        ly = cy - 10 if rate < 0.9 else cy + 18
        while any(abs(ly - py) < 13 and abs(cx - px) < 70 for px, py in placed):
            ly += 13
        placed.append((cx, ly))
        anchor = "end" if cx > left + plot_w - 60 else "start"
        dx = -8 if anchor == "end" else 8
        parts.append(f'<text x="{cx + dx:.1f}" y="{ly:.1f}" font-size="12" font-weight="600" '
                     f'text-anchor="{anchor}">{_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ---------------------------------------------------------------------------------------------- tables


def _table(head: list[str], rows: list[list[str]], left_cols: int = 1) -> str:
    """Cells are HTML already (escape before)."""
    th = "".join(f'<th class="l">{h}</th>' if i < left_cols else f"<th>{h}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="l">{c}</td>' if i < left_cols else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _verdict(passed: bool | None) -> str:
    if passed is None:
        return "—"
    return '<span class="pass">pass</span>' if passed else '<span class="fail">FAIL</span>'


def conditions_table(report: dict[str, Any], colors: dict[str, str]) -> str:
    rank = {e["condition"]: e.get("rank") for e in report.get("ladder") or []}
    rows = []
    for c in report.get("conditions", []):
        swatch = f'<span class="swatch" style="background:{colors.get(c["condition"], BASELINE_COLOR)}"></span>'
        rows.append([swatch + _e(c["condition"]), _e(rank.get(c["condition"]) or "—"), _e(c.get("cells")),
                     _e(c.get("passed")), _pct(c.get("pass_rate")), _ci(c.get("ci95")), _e(c.get("excluded"))])
    return _table(["condition", "rank", "cells", "passed", "pass rate", "95% CI", "excluded"], rows)


def comparisons_table(report: dict[str, Any]) -> str | None:
    family = report.get("comparisons") or {}
    comps = family.get("comparisons") if isinstance(family, dict) else family
    if not comps:
        return None
    alpha = family.get("alpha", 0.05) if isinstance(family, dict) else 0.05
    rows = []
    for c in comps:
        per_seed = ", ".join(f"{_e(s)}: {_p(p)}" for s, p in (c.get("p_per_seed") or {}).items()) or "—"
        holm = _p(c.get("p_holm"))
        if c.get("p_holm") is not None and c["p_holm"] < alpha:
            holm = f"<strong>{holm}</strong>"
        rows.append([_e(c["a"]), _e(c["b"]), _e(c["D"]), _e(c["discordant_a"]), _e(c["discordant_b"]),
                     _e(c["units"]), _e(c["paired_cells"]), _p(c.get("p_clustered")), _p(c.get("p_mcnemar")),
                     _p(c.get("p_majority")), per_seed, holm])
    table = _table(["A", "B", "D", "A-only", "B-only", "units", "paired cells", "p clustered", "p McNemar",
                    "p majority", "p per seed", "p Holm"], rows, left_cols=2)
    size = family.get("family_size", len(comps)) if isinstance(family, dict) else len(comps)
    return table + (f'<p class="caption">D = Σ<sub>t</sub> d<sub>t</sub> = A-only − B-only passes over paired valid '
                    f'seeds; p clustered: exact trap-clustered sign-flip test; p McNemar: pooled exact McNemar; '
                    f'p majority: unit-majority collapse; p Holm: Holm over the registered family of {_e(size)} '
                    f'comparisons (bold when below α = {_e(alpha)}). p-values to 4 significant digits.</p>')


TOKEN_COLUMNS = (("input_tokens", "input"), ("cached_input_tokens", "cached input"), ("output_tokens", "output"),
                 ("reasoning_tokens", "reasoning"), ("total_tokens", "total"))
ACTIVITY_COLUMNS = (("tool_invocations", "tool calls"), ("patch_invocations", "patch invocations"),
                    ("compactions", "compactions"), ("wall_time_s", "wall time (s)"))


def resources_table(report: dict[str, Any]) -> str | None:
    resources = report.get("resources") or {}
    per = resources.get("conditions") or {}
    if not per:
        return None
    baseline = resources.get("baseline")

    def reduction(r: dict[str, Any], metric: str) -> str:
        red = r.get("reduction_vs_baseline")
        return "baseline" if red is None else _signed_pct(red.get(metric))

    tokens, activity = [], []
    for name, r in per.items():
        mean = r.get("mean") or {}
        cps = (r.get("cost_per_success") or {}).get("value")
        tokens.append([_e(name), _e(r.get("runs")), _e(r.get("successes"))]
                      + [_num(mean.get(k)) for k, _ in TOKEN_COLUMNS]
                      + [_num(cps, 0), reduction(r, "total_tokens")])
        activity.append([_e(name)] + [_num(mean.get(k), 2) for k, _ in ACTIVITY_COLUMNS]
                        + [reduction(r, "tool_invocations"), reduction(r, "wall_time_s")])
    return (
        "<h3>Tokens (mean per run)</h3>"
        + _table(["condition", "runs", "passed"] + [label for _, label in TOKEN_COLUMNS]
                 + ["per success", "reduction (total)"], tokens)
        + "<h3>Activity (mean per run)</h3>"
        + _table(["condition"] + [label for _, label in ACTIVITY_COLUMNS]
                 + ["reduction (tool calls)", "reduction (wall time)"], activity)
        + f'<p class="caption">Means over valid runs. Cost = total tokens (input + output; cached input is part '
          f'of input, reasoning part of output); per success = all valid runs\' tokens / passed runs. '
          f'reduction = (baseline − condition) / baseline mean against <code>{_e(baseline)}</code>: '
          f'positive is a reduction, negative an increase. Wall time is the whole run, evaluation included.</p>')


def _counts_table(report: dict[str, Any], key: str) -> str | None:
    conditions = [c for c in report.get("conditions", []) if key in c]
    if not conditions:
        return None
    reasons = sorted({r for c in conditions for r in c[key]})
    if not reasons:
        return '<p class="note">none</p>'
    rows = [[_e(r)] + [_e(c[key].get(r, 0)) for c in conditions] for r in reasons]
    return _table(["reason"] + [_e(c["condition"]) for c in conditions], rows)


def hygiene_table(report: dict[str, Any]) -> str | None:
    conditions = [c for c in report.get("conditions", []) if c.get("hygiene")]
    if not conditions:
        return None
    metrics = sorted({m for c in conditions for m in c["hygiene"]})
    rows = []
    for m in metrics:
        row = [_e(m)]
        for c in conditions:
            v = c["hygiene"].get(m)
            row.append("—" if not v else f'{_pct(v.get("rate"))} <span class="note">({_e(v.get("numerator"))}/'
                                         f'{_e(v.get("denominator"))})</span>')
        rows.append(row)
    return _table(["metric"] + [_e(c["condition"]) for c in conditions], rows)


def gates_table(report: dict[str, Any]) -> str | None:
    gates = report.get("validity_gates")
    if not gates:
        return None
    rows: list[list[str]] = []

    def add(label: str, g: dict[str, Any] | None, value: str | None = None) -> None:
        if not g:
            return
        threshold = g.get("threshold")
        direction = "≤" if g.get("direction") == "max" else "≥"
        shown = value if value is not None else (_pct(g.get("value")) if isinstance(g.get("value"), float)
                                                 else _e(g.get("value")))
        thr = _pct(threshold) if isinstance(threshold, float) else _e(threshold)
        rows.append([_e(label), f'{_e(g.get("numerator"))}/{_e(g.get("denominator"))}', shown,
                     f"{direction} {thr}", _verdict(g.get("passed"))])

    head = gates.get("b0_headroom") or {}
    add(f"{gates.get('baseline', 'B0')} headroom overall", head.get("overall"))
    for label, g in (head.get("by_construct") or {}).items():
        add(f"{gates.get('baseline', 'B0')} headroom {label}", g)
    for cond, g in (gates.get("exclusions") or {}).items():
        add(f"exclusions {cond}", g)
    for name, g in (gates.get("paired_coverage") or {}).items():
        add(f"paired coverage {name} (units with ≥ 2 paired seeds)", g)
    note = head.get("note")
    html = _table(["gate", "n", "value", "required", "verdict"], rows) if rows else ""
    overall = gates.get("passed")
    html += (f'<p class="caption">All gates: {_verdict(overall)}. '
             f'{_e(gates.get("traps", "?"))} traps × {_e(gates.get("seeds", "?"))} seeds.'
             + (f" {_e(note)}." if note else "") + "</p>")
    return html


# ---------------------------------------------------------------------------------------------- page


def render_html(report: dict[str, Any]) -> str:
    agent = str(report.get("agent", ""))
    scripted = agent.startswith("scripted:")
    conditions = [c["condition"] for c in report.get("conditions", [])]
    colors = _colors(conditions)
    inputs = report.get("inputs") or {}
    digest = inputs.get("pack_digest")
    digests = digest if isinstance(digest, list) else [digest]
    badge = '<span class="badge">scripted reference agent — not a model</span>' if scripted else ""
    boot = (report.get("conditions") or [{}])[0].get("bootstrap") or {}

    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>membench report — {_e(report.get('run_set'))}</title>",
           f"<style>{CSS}</style></head><body><main>",
           f"<h1>membench report — {_e(report.get('run_set'))}</h1>",
           '<dl class="meta">',
           f"<dt>suite</dt><dd><code>{_e(report.get('suite'))}</code></dd>",
           f"<dt>agent</dt><dd><code>{_e(agent)}</code>{badge}</dd>",
           f"<dt>conditions</dt><dd>{_e(', '.join(conditions)) or '—'}</dd>",
           f"<dt>raw events</dt><dd>{_e(inputs.get('events'))}</dd>",
           f"<dt>pack digest</dt><dd>{'<br>'.join(f'<code>{_e(d)}</code>' for d in digests)}</dd>",
           "</dl>"]
    if scripted:
        out.append('<p class="note">This run set was produced by a scripted reference agent: a fixed policy that '
                   'brackets the harness (e.g. always uses memory literally, or never solves), not a language '
                   'model. Its numbers check the benchmark, not an agent.</p>')

    out.append('<section id="ladder"><h2>Ladder</h2>')
    out.append(ladder_svg(report, colors))
    if boot:
        out.append(f'<p class="caption">Pass rate = passed / valid cells (excluded cells counted, never imputed). '
                   f'95% CIs: trap-cluster percentile bootstrap, {_e(boot.get("resamples"))} resamples, seed '
                   f'{_e(boot.get("seed"))}.</p>')
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

    comps = comparisons_table(report)
    family = report.get("comparisons")
    baseline = family.get("baseline") if isinstance(family, dict) else None
    out.append(f'<section id="comparisons"><h2>Comparisons{" vs " + _e(baseline) if baseline else ""}</h2>')
    out.append(comps or '<p class="note">No comparisons (a single condition, or none computed).</p>')
    out.append("</section>")

    resources = resources_table(report)
    if resources:
        out.append(f'<section id="resources"><h2>Resources</h2>{resources}</section>')

    failures = _counts_table(report, "failure_counts")
    memory = _counts_table(report, "memory_failure_counts")
    if failures or memory:
        out.append('<section id="failures"><h2>Failures</h2>')
        if failures:
            out.append('<h3>Failure counts</h3><p class="caption">Unresolved, non-excluded scored sessions by '
                       f'failure reason.</p>{failures}')
        if memory:
            out.append(f'<h3>Memory failure counts</h3><p class="caption">The memory-specific reasons among them.'
                       f'</p>{memory}')
        out.append("</section>")

    hygiene = hygiene_table(report)
    if hygiene:
        out.append(f'<section id="hygiene"><h2>Hygiene</h2><p class="caption">Rate = numerator / denominator over '
                   f'scored sessions.</p>{hygiene}</section>')

    gates = gates_table(report)
    if gates:
        out.append(f'<section id="gates"><h2>Validity gates</h2>{gates}</section>')

    out.append('<section id="inputs"><h2>Inputs</h2>')
    bootstrap = (f"{_e(boot.get('resamples', '—'))} resamples, seed {_e(boot.get('seed', '—'))}, "
                 f"level {_e(boot.get('level', '—'))}")
    out.append(_table(["input", "value"], [["run set", f"<code>{_e(report.get('run_set'))}</code>"],
                                           ["raw events", _e(inputs.get("events"))],
                                           ["pack digest", "<br>".join(f"<code>{_e(d)}</code>" for d in digests)],
                                           ["bootstrap", bootstrap]], left_cols=2))
    out.append("</section>")
    out.append('<footer>Generated by membench from the warehouse; report.json is the machine contract. '
               'This page is self-contained: no scripts, no network.</footer>')
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


__all__ = ["render_html"]
