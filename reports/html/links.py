"""Where report.html's figures lead in the live viewer: a unit, a trap and seed side by side, the
units table filtered to a condition and reason.

Every address is relative to the report as `membench view` serves it (runs/<run set>/report.html),
so a link works whatever host and port the viewer has; the filter parameters are the units table's
own (viewer/static/app.js keeps its filters in the hash: #/rs/<run set>?condition=…&reason=…).
None when the report does not name its run set (an older report.json): nothing to link to."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

VIEWER = "../../index.html"


def _run_set(report: dict[str, Any]) -> str | None:
    rs = report.get("run_set")
    return None if rs is None else quote(str(rs), safe="")


def unit_id_href(report: dict[str, Any], unit_id: str) -> str | None:
    """One unit's view, by its id."""
    rs = _run_set(report)
    return None if rs is None else f"{VIEWER}#/unit/{rs}/{quote(unit_id, safe='')}"


def unit_href(report: dict[str, Any], trap: str, condition: str, seed: str) -> str | None:
    """The unit of one matrix cell (its id as producers.grid.RunUnit.unit_id builds it)."""
    if not report.get("suite"):
        return None
    return unit_id_href(report, f"{report.get('suite')}/{trap}/{condition}/{seed}")


def pair_href(report: dict[str, Any], trap: str, seed: str) -> str | None:
    """The trap and seed under every condition side by side."""
    rs = _run_set(report)
    return None if rs is None else f"{VIEWER}#/pair/{rs}/{quote(trap, safe='')}/{quote(str(seed), safe='')}"


def units_href(report: dict[str, Any], condition: str, reason: str) -> str | None:
    """The units table filtered to one condition and one failure or exclusion reason."""
    rs = _run_set(report)
    if rs is None:
        return None
    return f"{VIEWER}#/rs/{rs}?" + urlencode({"condition": condition, "reason": reason}, quote_via=quote, safe="")
