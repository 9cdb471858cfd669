"""What every part of the HTML report shares: the palette, the page's CSS, value formatting (every
string from the report is HTML-escaped here) and SVG axes."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from membench.reports.model import Report

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B", "#332288", "#117733",
           "#AA4499")
BASELINE_COLOR = "#6B6B6B"
BASELINES = ("B0", "no_memory")  # the default baselines (membench/reports/study.py), for older report.json files

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
p.warning, div.warning { background: #fff4e0; border: 1px solid #f0d3a0; color: #6b4100; padding: 8px 12px; border-radius: 4px; }
.badge { display: inline-block; font-size: 11.5px; padding: 1px 7px; border-radius: 9px; margin-left: 6px;
         background: #fff4e0; color: #8a5300; border: 1px solid #f0d3a0; vertical-align: 1px; }
.pass { color: var(--ok); font-weight: 600; }
.fail { color: var(--bad); font-weight: 600; }
table { border-collapse: collapse; margin: 6px 0 4px; font-size: 13px; font-variant-numeric: tabular-nums;
        max-width: 100%; }
/* cells wrap (a long one breaks inside a word only when it must), so a wide table such as the
   comparisons' fits its column on screen and on paper instead of hiding its last columns */
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top;
         white-space: normal; overflow-wrap: break-word; }
th { font-weight: 600; background: var(--band); }
th:first-child, td:first-child, td.l, th.l { text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; }
ul.verdicts, ul.legend { margin: 4px 0 10px; padding-left: 20px; }
ul.verdicts li { margin: 3px 0; overflow-wrap: break-word; }
ul.legend { color: var(--muted); font-size: 12.5px; }
@media print {
  main { max-width: none; padding: 0; }
  .scroll { overflow: visible; }
  table { font-size: 10.5px; }
  th, td { padding: 2px 5px; overflow-wrap: anywhere; }
  section, table, tr { break-inside: auto; }
}
svg { display: block; max-width: 100%; height: auto; margin: 6px 0; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: var(--fg); }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 5px; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def fmt_p(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def fmt_num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def fmt_ci(ci: list[float | None] | None, method: str | None = None) -> str:
    """METHOD: the entry's `ci_method`; an exact interval (all or none of the cells passed, where the
    bootstrap has zero width) is marked "exact"."""
    if not ci or ci[0] is None:
        return "—"
    return f"[{fmt_pct(ci[0])}, {fmt_pct(ci[1])}]" + (" exact" if method == "clopper_pearson_traps" else "")


def fmt_signed_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}%"


def report_baseline(report: Report) -> str | None:
    """The condition the report compares against (the study's baseline, membench/reports/study.py), as its
    sections state it; a report without one: B0, else no_memory, when present."""
    for baseline in (report.comparisons.baseline, report.families.baseline if report.families else None,
                     report.resources.baseline, report.validity_gates.baseline):
        if baseline:
            return str(baseline)
    names = [c.condition for c in report.conditions]
    return next((b for b in BASELINES if b in names), None)


def condition_colors(conditions: list[str], baseline: str | None) -> dict[str, str]:
    """The baseline in grey, every other condition a palette colour in order."""
    out, i = {}, 0
    for name in conditions:
        if name == baseline:
            out[name] = BASELINE_COLOR
        else:
            out[name] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """0 .. ≥ high in 1/2/5 × 10^k steps."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    n = math.ceil(high / step - 1e-9)
    return [i * step for i in range(n + 1)]


def tick_label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def svg_open(width: int, height: int, ident: str, label: str) -> list[str]:
    return [f'<svg id="{ident}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}"><title>{esc(label)}</title>']


def x_axis(parts: list[str], x0: float, x1: float, top: float, bottom: float, ticks: list[tuple[float, str]],
            caption: str) -> None:
    for x, text in ticks:
        parts.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" stroke="#e3e7eb"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 14:.1f}" font-size="11" text-anchor="middle" '
                     f'fill="#5b636b">{esc(text)}</text>')
    parts.append(f'<line x1="{x0:.1f}" y1="{bottom:.1f}" x2="{x1:.1f}" y2="{bottom:.1f}" stroke="#9aa3ab"/>')
    parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{bottom + 31:.1f}" font-size="11.5" text-anchor="middle" '
                 f'fill="#5b636b">{esc(caption)}</text>')
