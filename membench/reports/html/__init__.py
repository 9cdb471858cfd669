"""A report as one self-contained HTML page: inline CSS and inline SVG plots, no scripts, no fetches.

`render_html(report)` (`page.py`) takes the typed report (`membench.reports.model.Report`: as membench/reports/build.py
builds it, or as `from_json(Report, …)` reads a `report.json` back) and draws:

- the ladder: pass rate per condition with its 95% trap-cluster bootstrap CI (`ladder`, else
  `conditions`);
- construct strata: pass rate per construct × condition with CIs (`strata` and each condition's
  `by_construct`, `clean_start`, `continuation`), or a note when the report has none;
- the cost frontier: mean total tokens per run (x) against pass rate (y) per condition
  (`resources`), the non-dominated conditions joined by a dashed line;

then tables: conditions, comparisons (p-values to 4 significant digits), resources, failure counts
and memory failure counts, hygiene, validity gates, and the inputs (raw events, pack digest).
A part whose optional field (as `membench/reports/model.py` declares it) is None is left out. Every string
from the report is HTML-escaped. The page opens from disk with no network (system fonts only).
"""

from membench.reports.html.page import render_html

__all__ = ["render_html"]
