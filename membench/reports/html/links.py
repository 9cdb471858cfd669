"""Where report.html's figures lead in the live viewer: a unit, a trap and seed side by side, the
units table filtered to a condition and reason.

Every address is relative to the report as `membench view` serves it (runs/<run set>/report.html),
so a link works whatever host and port the viewer has; the filter parameters are the units table's
own (membench/viewer/static/app.js keeps its filters in the hash: #/rs/<run set>?condition=…&reason=…).
None when the report names no suite (nothing to build a unit's id from)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from membench.reports.model import Report

VIEWER = "../../index.html"


def _run_set(report: Report) -> str:
    return quote(report.run_set, safe="")


def unit_id_href(report: Report, unit_id: str) -> str | None:
    """One unit's view, by its id."""
    return f"{VIEWER}#/unit/{_run_set(report)}/{quote(unit_id, safe='')}"


def unit_href(report: Report, trap: str, condition: str, seed: str) -> str | None:
    """The unit of one matrix cell (its id as membench.runner.grid.RunUnit.unit_id builds it)."""
    if not report.suite:
        return None
    return unit_id_href(report, f"{report.suite}/{trap}/{condition}/{seed}")


def pair_href(report: Report, trap: str, seed: str) -> str | None:
    """The trap and seed under every condition side by side."""
    return f"{VIEWER}#/pair/{_run_set(report)}/{quote(trap, safe='')}/{quote(str(seed), safe='')}"


def units_href(report: Report, condition: str, reason: str) -> str | None:
    """The units table filtered to one condition and one failure or exclusion reason."""
    return f"{VIEWER}#/rs/{_run_set(report)}?" + urlencode({"condition": condition, "reason": reason}, quote_via=quote, safe="")
