"""Validity gates of a paired comparison (DreamBench-SWE Appendix C.6, C.8, §6.3 Table 10).

Each gate returns the measured value, the threshold, the comparison direction and whether it
passed, with the numerator and denominator behind the value.

- B0 headroom (C.8, falsifier "B0 headroom"): the no-memory baseline's S3 pass rate must be at
  most 0.50 (maximum acceptable; 0.40 is the paper's *preferred* bound) overall, and per construct
  for the strengthened stratum check (Table 10: C9 fails at 12/12 = 1.000, C10 at 6/6 = 1.000).
  The rate is passes / valid cells; excluded cells are not in it. With no valid baseline cell the
  gate cannot be evaluated: value None, passed False.
- Exclusions (C.6): "cell-level validity exclusions must be at most 5% for each side; with 180
  cells this is at most nine excluded cells per side". Per side, the denominator is the
  design grid when given (``expected_cells``, e.g. 180), else the comparison grid (every
  (unit, seed) either side has a cell for), and the numerator counts the cells where that side has
  no valid outcome, excluded *or missing* — a missing cell is no more observed than an excluded
  one. 9/180 = 0.05 passes.
- Paired units (C.6): "P1 requires at least 54 traps with at least two paired valid seeds".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .cells import Cell, PairedCells


@dataclass(frozen=True)
class Gate:
    """``passed`` = value ≤ threshold (``direction`` "max") or value ≥ threshold ("min")."""

    name: str
    value: float | int | None
    threshold: float | int
    direction: str  # "max" or "min"
    passed: bool
    numerator: int
    denominator: int


@dataclass(frozen=True)
class HeadroomGates:
    overall: Gate
    by_construct: dict[str, Gate]

    @property
    def passed(self) -> bool:
        return self.overall.passed and all(g.passed for g in self.by_construct.values())


def _max_gate(name: str, num: int, den: int, threshold: float) -> Gate:
    value = num / den if den else None
    return Gate(name, value, threshold, "max", value is not None and value <= threshold, num, den)


def b0_headroom(cells: Iterable[Cell], *, baseline: str = "B0", threshold: float = 0.50) -> HeadroomGates:
    """B0 headroom: the baseline's pass rate ≤ ``threshold`` overall and within each construct.

    Cells without a construct label count in the overall gate only.
    """
    total = [0, 0]
    per: dict[str, list[int]] = {}
    for cell in cells:
        if cell.condition != baseline or not cell.valid:
            continue
        total[0] += bool(cell.passed)
        total[1] += 1
        if cell.construct is not None:
            slot = per.setdefault(cell.construct, [0, 0])
            slot[0] += bool(cell.passed)
            slot[1] += 1
    overall = _max_gate(f"{baseline} headroom", total[0], total[1], threshold)
    by_construct = {
        construct: _max_gate(f"{baseline} headroom {construct}", p, n, threshold)
        for construct, (p, n) in sorted(per.items(), key=lambda kv: _construct_key(kv[0]))
    }
    return HeadroomGates(overall, by_construct)


def _construct_key(label: str) -> tuple[str, int, str]:
    head = label.rstrip("0123456789")
    tail = label[len(head):]
    return (head, int(tail) if tail else -1, label)


def exclusion_gates(paired: PairedCells, *, max_fraction: float = 0.05,
                    expected_cells: int | None = None) -> tuple[Gate, Gate]:
    """Cells without a valid outcome, per side, over the comparison's cells must be ≤ ``max_fraction``.

    The denominator is ``expected_cells`` when given (the design grid, e.g. 60 traps × 3 seeds =
    180) and otherwise the observed grid; the numerator is the denominator minus the side's valid
    cells, i.e. its excluded plus missing cells.
    """
    den = len(paired.grid) if expected_cells is None else expected_cells
    if den < len(paired.grid):
        raise ValueError(f"expected_cells {expected_cells} is smaller than the {len(paired.grid)} cells observed")
    valid_a = paired.cells_a - paired.excluded_a
    valid_b = paired.cells_b - paired.excluded_b
    return (
        _max_gate(f"exclusions {paired.a}", den - valid_a, den, max_fraction),
        _max_gate(f"exclusions {paired.b}", den - valid_b, den, max_fraction),
    )


def paired_units_gate(paired: PairedCells, *, min_units: int = 54, min_paired_seeds: int = 2) -> Gate:
    """At least ``min_units`` units with ≥ ``min_paired_seeds`` paired valid seeds (C.6: 54, 2)."""
    count = sum(1 for seeds in paired.pairs.values() if len(seeds) >= min_paired_seeds)
    return Gate(
        f"units with >= {min_paired_seeds} paired seeds",
        count,
        min_units,
        "min",
        count >= min_units,
        count,
        len(paired.grid_units),
    )


@dataclass(frozen=True)
class ComparisonGates:
    exclusions_a: Gate
    exclusions_b: Gate
    paired_units: Gate

    @property
    def passed(self) -> bool:
        return self.exclusions_a.passed and self.exclusions_b.passed and self.paired_units.passed


def comparison_gates(
    paired: PairedCells,
    *,
    max_exclusion: float = 0.05,
    expected_cells: int | None = None,
    min_units: int = 54,
    min_paired_seeds: int = 2,
) -> ComparisonGates:
    """The per-comparison gates of Appendix C.6 (a failing comparison is reported "incomplete")."""
    ex_a, ex_b = exclusion_gates(paired, max_fraction=max_exclusion, expected_cells=expected_cells)
    return ComparisonGates(ex_a, ex_b, paired_units_gate(paired, min_units=min_units, min_paired_seeds=min_paired_seeds))
