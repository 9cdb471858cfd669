"""Validity gates: DreamBench-SWE Appendix C.6 / C.8 and §6.3 Table 10."""

from __future__ import annotations

import pytest

from membench.analytics.cells import Cell, pair_cells
from membench.analytics.gates import (REVERSED_CONSTRUCTS, b0_headroom, comparison_gates, exclusion_gates, paired_units_gate,
                             stratum_validity, warmup_gate)

# Table 10 / Table 8: B0 passes per construct, (passes, cells). C1, C4, C8 are filled so the
# overall B0 total is the published 21/180 (C9 12/12 and C10 6/6 carry 18 of the 21 passes).
B0_BY_CONSTRUCT = {
    "C1": (3, 54), "C2": (0, 18), "C3": (0, 21), "C4": (0, 3), "C5": (0, 18),
    "C6": (0, 15), "C7": (0, 21), "C8": (0, 12), "C9": (12, 12), "C10": (6, 6),
}


def b0_cells() -> list[Cell]:
    cells = []
    for construct, (passes, n) in B0_BY_CONSTRUCT.items():
        for i in range(n):
            unit, seed = f"{construct}-t{i // 3}", i % 3 + 1
            cells.append(Cell(unit, seed, "B0", i < passes, construct=construct))
    return cells


def test_b0_headroom_overall_and_per_construct():
    gates = b0_headroom(b0_cells())
    assert (gates.overall.numerator, gates.overall.denominator) == (21, 180)
    assert round(gates.overall.value, 3) == 0.117
    assert gates.overall.passed and gates.overall.threshold == 0.50
    failing = {c for c, g in gates.by_construct.items() if not g.passed}
    assert failing == {"C9", "C10"}
    assert gates.by_construct["C9"].value == 1.0 and gates.by_construct["C2"].value == 0.0
    assert list(gates.by_construct) == [f"C{i}" for i in range(1, 11)]
    assert not gates.passed


def test_b0_headroom_threshold_and_exclusions():
    cells = [Cell("t1", s, "B0", s <= 2) for s in range(1, 4)] + [Cell("t2", 1, "B0", True, valid=False)]
    gate = b0_headroom(cells).overall
    assert (gate.numerator, gate.denominator) == (2, 3)  # the excluded cell is in neither count
    assert not gate.passed
    assert b0_headroom(cells, threshold=0.7).overall.passed
    preferred = b0_headroom([Cell("t", s, "B0", s == 1) for s in range(1, 6)], threshold=0.40).overall
    assert preferred.value == 0.2 and preferred.passed


def test_b0_headroom_without_baseline_cells_fails():
    gate = b0_headroom([Cell("t1", 1, "B5", True)]).overall
    assert gate.value is None and not gate.passed and gate.denominator == 0


def grid(excluded_a: int, missing_b: int = 0) -> list[Cell]:
    cells = []
    for t in range(60):
        for s in range(1, 4):
            k = t * 3 + s - 1
            cells.append(Cell(f"t{t}", s, "A", True, valid=k >= excluded_a))
            if k >= missing_b:
                cells.append(Cell(f"t{t}", s, "B", False))
    return cells


def test_exclusions_at_most_five_percent_per_side():
    # C.6: "with 180 cells this is at most nine excluded cells per side"
    ok_a, ok_b = exclusion_gates(pair_cells(grid(9), "A", "B"))
    assert (ok_a.numerator, ok_a.denominator, ok_a.value, ok_a.passed) == (9, 180, 0.05, True)
    assert ok_b.numerator == 0 and ok_b.passed
    bad_a, _ = exclusion_gates(pair_cells(grid(10), "A", "B"))
    assert not bad_a.passed and bad_a.value == pytest.approx(10 / 180)
    # a missing cell counts like an excluded one
    _, missing = exclusion_gates(pair_cells(grid(0, missing_b=10), "A", "B"))
    assert missing.numerator == 10 and not missing.passed
    # against the design grid: a trap absent on both sides still counts as missing for both
    cells = [c for c in grid(0) if c.unit != "t0"]
    observed_a, _ = exclusion_gates(pair_cells(cells, "A", "B"))
    assert (observed_a.numerator, observed_a.denominator) == (0, 177)
    design_a, design_b = exclusion_gates(pair_cells(cells, "A", "B"), expected_cells=180)
    assert (design_a.numerator, design_a.denominator, design_b.numerator) == (3, 180, 3)
    with pytest.raises(ValueError):
        exclusion_gates(pair_cells(cells, "A", "B"), expected_cells=100)


def test_paired_units_gate():
    # C.6: P1 needs ≥ 54 traps with ≥ 2 paired valid seeds. Exclude 2 of 3 seeds of A in 6 traps.
    cells = [c for c in grid(0) if not (c.condition == "A" and int(c.unit[1:]) < 6 and c.seed != 1)]
    gate = paired_units_gate(pair_cells(cells, "A", "B"))
    assert (gate.value, gate.threshold, gate.direction, gate.passed) == (54, 54, "min", True)
    cells = [c for c in cells if not (c.condition == "A" and c.unit == "t6" and c.seed != 1)]
    gate = paired_units_gate(pair_cells(cells, "A", "B"))
    assert gate.value == 53 and not gate.passed
    assert paired_units_gate(pair_cells(cells, "A", "B"), min_units=50, min_paired_seeds=1).value == 60


def test_comparison_gates_bundle():
    gates = comparison_gates(pair_cells(grid(9), "A", "B"))
    assert gates.passed
    assert not comparison_gates(pair_cells(grid(9), "A", "B"), max_exclusion=0.04).passed


def test_reversed_constructs_leave_the_headroom_gate_and_are_reported_apart():
    """C9/C10 traps run the other way; admission requires B0 to pass them."""
    gates = b0_headroom(b0_cells(), reversed_constructs=REVERSED_CONSTRUCTS)
    assert (gates.overall.numerator, gates.overall.denominator) == (3, 162)  # 21/180 without C9's 12 and C10's 6
    assert list(gates.by_construct) == [f"C{i}" for i in range(1, 9)]
    assert {c: (g.numerator, g.denominator, g.direction, g.passed) for c, g in gates.reversed.items()} == {
        "C9": (12, 12, "min", True), "C10": (6, 6, "min", True)}
    assert gates.passed
    # a reversed construct that B0 fails (memory cannot hurt where nothing passes) fails its own gate
    flipped = [Cell(c.unit, c.seed, c.condition, False if c.construct == "C10" else c.passed, construct=c.construct)
               for c in b0_cells()]
    gates = b0_headroom(flipped, reversed_constructs=REVERSED_CONSTRUCTS)
    assert not gates.reversed["C10"].passed and gates.reversed["C10"].value == 0.0 and not gates.passed


def _strata_cells() -> list[Cell]:
    # Table 10: C2 max 0.833 (15/18), B0 0/18; C9 B0 12/12 and another condition 0/12 (spread 1.000)
    cells = []
    for construct, rates in {"C2": {"B0": (0, 18), "DF": (15, 18)}, "C9": {"B0": (12, 12), "DF": (0, 12)},
                             "C5": {"B0": (0, 18), "DF": (0, 18)}}.items():
        for condition, (passes, n) in rates.items():
            cells += [Cell(f"{construct}-t{i // 3}", i % 3 + 1, condition, i < passes, construct=construct)
                      for i in range(n)]
    return cells


def test_stratum_validity_as_table_10():
    strata = stratum_validity(_strata_cells())
    c2 = strata["C2"]
    assert (c2.max_condition, round(c2.max_rate.value, 3), round(c2.spread.value, 3), c2.b0_rate.value) == (
        "DF", 0.833, 0.833, 0.0)
    assert c2.passed and c2.max_rate.threshold == 0.15 and c2.spread.direction == "above"
    assert not strata["C9"].passed and not strata["C9"].b0_rate.passed  # "C9 fails because B0 passes 12/12"
    c5 = strata["C5"]  # floored: nobody passes, no spread
    assert not c5.max_rate.passed and not c5.spread.passed and c5.b0_rate.passed and not c5.passed
    reversed_ = stratum_validity(_strata_cells(), reversed_constructs=REVERSED_CONSTRUCTS)
    assert reversed_["C9"].reversed and reversed_["C9"].b0_rate.direction == "min" and reversed_["C9"].passed
    assert reversed_["C2"] == c2


def test_warmup_gate_as_the_paper():
    """§5: B0 S1+S2 warm-up 287/360 = 0.797 misses the required 0.80."""
    sessions = [(True, i < 287) for i in range(360)] + [(False, True)] * 5  # excluded sessions leave it
    gate = warmup_gate(sessions)
    assert (gate.numerator, gate.denominator, round(gate.value, 3), gate.passed) == (287, 360, 0.797, False)
    assert warmup_gate([(True, i < 288) for i in range(360)]).passed
    assert warmup_gate([]).value is None and not warmup_gate([]).passed
