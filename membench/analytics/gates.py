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
- Reversed constructs: in C9 (spurious-lesson rejection) and C10
  (abstention) the trap runs the other way — the clean S3 passes without memory and a hoarding
  memory makes it fail — so admission (`membench validate`) *requires* B0 to pass them, and a B0
  headroom gate over them fails by design (the paper's Table 10 has exactly this contradiction).
  With ``reversed_constructs`` given, their cells leave the headroom gates (overall and per
  construct) and are reported apart: per reversed construct, B0 must *pass* at least half its
  cells (``direction`` "min"), the mirror of the headroom bound — the room memory has to hurt.
  Without it the gates are the paper's (all cells; the published figures).
- Stratum validity (§6.3 Table 10, "the strengthened stratum-validity gate"): per construct, the
  best condition's pass rate ≥ 0.15 (the "new construct floor"), a spread (best − worst condition)
  > 0, and B0's rate ≤ 0.50 — for a reversed construct B0's rate ≥ 0.50 instead.
- Exclusion balance (membench's addition): a condition's exclusion rate must not differ
  from the baseline's — Fisher's exact two-sided test on excluded / included cells at α = 0.05,
  or, when the counts are too small for any table to reach p ≤ α, any difference at all
  (:func:`exclusion_balance`). Exclusions on one side only remove cells from a comparison; removing
  the baseline's failing cells fabricates a memory effect.
- Warm-up (C.8 / §5: "B0 S1+S2 warmup pass rate to be at least 0.80"): passed / valid non-scored
  task sessions of the baseline (non-S3 sessions only, as the paper's analyzer pre-fix requires).

Reference conditions: headroom, stratum validity's B0 clause and warm-up are B0 gates by the paper's
definition — their ``baseline`` argument names the no-memory condition and a report passes "B0"
whatever the study's baseline; exclusions and paired units take the comparison's own pair, which a
report forms against the study's baseline (membench/reports/hygiene.py ``gate_references``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .cells import Cell, PairedCells
from .exact import fisher_exact


@dataclass(frozen=True)
class Gate:
    """``passed`` = value ≤ threshold (``direction`` "max"), value ≥ threshold ("min") or value >
    threshold ("above")."""

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
    reversed: dict[str, Gate] = field(default_factory=dict)  # reversed constructs, reported apart

    @property
    def passed(self) -> bool:
        return (self.overall.passed and all(g.passed for g in self.by_construct.values())
                and all(g.passed for g in self.reversed.values()))


REVERSED_CONSTRUCTS = frozenset({"C9", "C10"})  # the trap runs the other way (membench/packs/validate.py)


def _max_gate(name: str, num: int, den: int, threshold: float) -> Gate:
    value = num / den if den else None
    return Gate(name, value, threshold, "max", value is not None and value <= threshold, num, den)


def _min_gate(name: str, num: int, den: int, threshold: float) -> Gate:
    value = num / den if den else None
    return Gate(name, value, threshold, "min", value is not None and value >= threshold, num, den)


def b0_headroom(cells: Iterable[Cell], *, baseline: str = "B0", threshold: float = 0.50,
                reversed_constructs: Iterable[str] = (), reversed_threshold: float = 0.50) -> HeadroomGates:
    """B0 headroom: the baseline's pass rate ≤ ``threshold`` overall and within each construct.

    Cells without a construct label count in the overall gate only. Cells of a construct in
    ``reversed_constructs`` count in neither; each such construct gets a gate of its own in
    ``reversed``: the baseline's pass rate ≥ ``reversed_threshold``.
    """
    flipped = frozenset(reversed_constructs)
    total = [0, 0]
    per: dict[str, list[int]] = {}
    back: dict[str, list[int]] = {}
    for cell in cells:
        if cell.condition != baseline or not cell.valid:
            continue
        if cell.construct in flipped:
            slot = back.setdefault(cell.construct, [0, 0])
        else:
            total[0] += bool(cell.passed)
            total[1] += 1
            if cell.construct is None:
                continue
            slot = per.setdefault(cell.construct, [0, 0])
        slot[0] += bool(cell.passed)
        slot[1] += 1
    overall = _max_gate(f"{baseline} headroom", total[0], total[1], threshold)
    by_construct = {
        construct: _max_gate(f"{baseline} headroom {construct}", p, n, threshold)
        for construct, (p, n) in sorted(per.items(), key=lambda kv: _construct_key(kv[0]))
    }
    reversed_gates = {
        construct: _min_gate(f"{baseline} passes reversed {construct}", p, n, reversed_threshold)
        for construct, (p, n) in sorted(back.items(), key=lambda kv: _construct_key(kv[0]))
    }
    return HeadroomGates(overall, by_construct, reversed_gates)


@dataclass(frozen=True)
class StratumValidity:
    """One construct stratum (Table 10): best condition, spread, B0 rate and whether it holds."""

    construct: str
    reversed: bool
    max_condition: str | None
    max_rate: Gate  # best condition's pass rate ≥ floor ("min")
    spread: Gate  # best − worst condition's pass rate > 0 ("above")
    b0_rate: Gate  # ≤ 0.50 ("max"), or ≥ 0.50 for a reversed construct ("min")

    @property
    def passed(self) -> bool:
        return self.max_rate.passed and self.spread.passed and self.b0_rate.passed


def stratum_validity(cells: Iterable[Cell], *, baseline: str = "B0", floor: float = 0.15,
                     b0_threshold: float = 0.50, reversed_constructs: Iterable[str] = ()) -> dict[str, StratumValidity]:
    """Per construct: max condition rate ≥ ``floor``, spread > 0, B0 rate ≤ ``b0_threshold``
    (≥ for a reversed construct). Rates are passes / valid cells per (construct, condition); a
    condition without a valid cell in the construct takes no part. A construct without B0 cells
    fails (its B0 gate has no value)."""
    flipped = frozenset(reversed_constructs)
    counts: dict[str, dict[str, list[int]]] = {}
    for cell in cells:
        if not cell.valid or cell.construct is None:
            continue
        slot = counts.setdefault(cell.construct, {}).setdefault(cell.condition, [0, 0])
        slot[0] += bool(cell.passed)
        slot[1] += 1
    out: dict[str, StratumValidity] = {}
    for construct in sorted(counts, key=_construct_key):
        per = counts[construct]
        rates = {c: p / n for c, (p, n) in per.items()}
        best = max(sorted(rates), key=lambda c: rates[c])  # ties: the first condition by name
        worst = min(sorted(rates), key=lambda c: rates[c])
        spread = rates[best] - rates[worst]
        p, n = per[best]
        max_gate = _min_gate(f"max condition rate {construct}", p, n, floor)
        spread_gate = Gate(f"spread {construct}", spread, 0, "above", spread > 0, 0, 0)
        b_p, b_n = per.get(baseline, (0, 0))
        is_reversed = construct in flipped
        b0 = (_min_gate if is_reversed else _max_gate)(f"{baseline} rate {construct}", b_p, b_n, b0_threshold)
        out[construct] = StratumValidity(construct, is_reversed, best, max_gate, spread_gate, b0)
    return out


def warmup_gate(sessions: Iterable[tuple[bool, bool]], *, baseline: str = "B0", threshold: float = 0.80) -> Gate:
    """Warm-up: of the baseline's valid non-scored task sessions (``(valid, passed)`` pairs), the
    fraction passed must be ≥ ``threshold``; none at all cannot be evaluated (value None, failed)."""
    num = den = 0
    for valid, passed in sessions:
        if valid:
            den += 1
            num += bool(passed)
    return _min_gate(f"{baseline} warm-up S1+S2", num, den, threshold)


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


# --------------------------------------------------------------------------------------------
# Exclusion balance: excluding cells must not move a comparison
# --------------------------------------------------------------------------------------------

#: level of the exclusion-balance test
EXCLUSION_BALANCE_ALPHA = 0.05


@dataclass(frozen=True)
class ExclusionBalance:
    """Whether a condition's exclusion rate differs from the baseline's (:func:`exclusion_balance`).

    ``rule`` says which test decided: ``"fisher_exact"`` (p ≤ ``alpha`` means it differs) or, when
    these counts cannot reach p ≤ ``alpha`` whatever the outcome (``min_attainable_p`` > ``alpha``),
    ``"any_difference"`` (any difference of the two rates differs); ``"no_exclusions"`` when
    neither side has an excluded cell. ``passed`` = not ``differs``."""

    condition: str
    baseline: str
    excluded: int
    cells: int
    baseline_excluded: int
    baseline_cells: int
    rate: float | None
    baseline_rate: float | None
    p_value: float | None
    min_attainable_p: float | None
    alpha: float
    rule: str
    differs: bool
    passed: bool


def exclusion_balance(excluded: int, cells: int, baseline_excluded: int, baseline_cells: int, *,
                      condition: str = "A", baseline: str = "B0",
                      alpha: float = EXCLUSION_BALANCE_ALPHA) -> ExclusionBalance:
    """Does the condition's exclusion rate (excluded / cells) differ from the baseline's?

    Exclusions that fall on one side only change a comparison without any agent solving anything:
    removing exactly the baseline's failing cells fabricates a memory effect. The test is
    Fisher's exact two-sided test (:func:`membench.analytics.exact.fisher_exact`) on the table
    [[excluded, cells − excluded], [baseline_excluded, baseline_cells − baseline_excluded]]: the
    rates differ when p ≤ ``alpha``. Small counts give the test no power (3 of 3 baseline cells
    excluded against 0 of 3 has p = 0.1, the smallest p those margins allow), so when even the
    most extreme table with these margins has p > ``alpha`` the gate falls back to exact
    inequality: any difference of the two rates differs. A side without cells cannot be compared
    (rule ``"no_cells"``, not a difference)."""
    for name, (num, den) in {"condition": (excluded, cells), "baseline": (baseline_excluded, baseline_cells)}.items():
        if not 0 <= num <= den:
            raise ValueError(f"exclusion_balance: {name} has {num} excluded of {den} cells")
    rate = excluded / cells if cells else None
    base_rate = baseline_excluded / baseline_cells if baseline_cells else None
    if not cells or not baseline_cells:
        return ExclusionBalance(condition, baseline, excluded, cells, baseline_excluded, baseline_cells, rate,
                                base_rate, None, None, alpha, "no_cells", False, True)
    if excluded == baseline_excluded == 0:
        return ExclusionBalance(condition, baseline, excluded, cells, baseline_excluded, baseline_cells, rate,
                                base_rate, 1.0, 1.0, alpha, "no_exclusions", False, True)
    test = fisher_exact(excluded, cells - excluded, baseline_excluded, baseline_cells - baseline_excluded)
    if test.min_attainable_p > alpha:
        # the exact rates compared as fractions: 1/3 and 2/6 are the same rate
        rule, differs = "any_difference", excluded * baseline_cells != baseline_excluded * cells
    else:
        rule, differs = "fisher_exact", test.p_value <= alpha
    return ExclusionBalance(condition, baseline, excluded, cells, baseline_excluded, baseline_cells, rate, base_rate,
                            test.p_value, test.min_attainable_p, alpha, rule, differs, not differs)
