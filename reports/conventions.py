"""What every report section agrees on: the order conditions are listed in, the bootstrap settings of
every interval, and what makes a run row a valid cell."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from analytics.bootstrap import trap_cluster_bootstrap_ci
from analytics.cells import Cell
from reports.model import BootstrapSettings, CellSummary

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101


def condition_order(condition: str) -> tuple[int, str]:
    """The ladder's conditions (B0, B1, …) first, then named ones, each alphabetically."""
    return (0, condition) if condition.startswith("B") else (1, condition)


def valid_run(row: dict[str, Any]) -> bool:
    """A run row is a valid cell when it completed and was not excluded (excluded cells are counted,
    never imputed)."""
    return not row["excluded"] and row["status"] == "completed"


def exclusion_of(row: dict[str, Any]) -> str | None:
    return None if valid_run(row) else (row.get("exclusion_reason") or row.get("error_type") or row["status"])


def pass_summary(outcomes: dict[str, list[bool]]) -> tuple[int, int, float | None, list[float | None], BootstrapSettings]:
    """(passed, valid, pass rate, 95% CI, bootstrap settings) of unit -> outcomes of its valid cells;
    the CI is the trap-cluster percentile bootstrap with the report's fixed resamples and seed."""
    ci = trap_cluster_bootstrap_ci(outcomes, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    valid = sum(len(v) for v in outcomes.values())
    passed = sum(sum(1 for o in v if o) for v in outcomes.values())
    return (passed, valid, passed / valid if valid else None, [ci.low, ci.high],
            BootstrapSettings(resamples=ci.resamples, seed=ci.seed, level=ci.level))


def cell_summary(cells: Iterable[Cell]) -> CellSummary:
    cells = list(cells)
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for c in cells:
        if c.valid:
            outcomes[c.unit].append(bool(c.passed))
    passed, valid, rate, ci95, _ = pass_summary(outcomes)
    return CellSummary(cells=len(cells), valid=valid, passed=passed, pass_rate=rate, ci95=ci95)
