"""Comparisons from cells: DreamBench-SWE Table 9 and Appendix E.5 rebuilt cell by cell."""

from __future__ import annotations

from fractions import Fraction

import pytest

from membench.analytics.cells import Cell, DuplicateCellError, UnknownConditionError, count_cells, dedup_cells, pair_cells
from membench.analytics.compare import compare_conditions, compare_family, majority_collapse


def trap_cells(traps: list[tuple[int, int]], both_pass: int, a: str, b: str, *, units: int = 60,
               seeds: int = 3, prefix: str = "t", drop_a: set[tuple[int, int]] = frozenset()) -> list[Cell]:
    """Cells of two conditions over ``units`` traps × ``seeds`` seeds.

    ``traps[i] = (A-only seeds, B-only seeds)`` of trap i (traps beyond the list have none); the
    remaining seed slots are ties, the first ``both_pass`` of them (in trap order) both-pass and
    the rest both-fail. ``drop_a`` holds (trap, seed index) slots where A has no cell.
    """
    cells: list[Cell] = []
    left = both_pass
    for t in range(units):
        a_only, b_only = traps[t] if t < len(traps) else (0, 0)
        assert a_only + b_only <= seeds
        outcomes = [(True, False)] * a_only + [(False, True)] * b_only
        while len(outcomes) < seeds:
            outcomes.append((True, True) if left > 0 else (False, False))
            left -= outcomes[-1] == (True, True)
        for s, (pa, pb) in enumerate(outcomes):
            unit = f"{prefix}{t:02d}"
            if (t, s) not in drop_a:
                cells.append(Cell(unit, s + 1, a, pa))
            cells.append(Cell(unit, s + 1, b, pb))
    assert left == 0, "not enough tie slots for the both-pass count"
    return cells


# Table 9 rows rebuilt: per-trap (A-only, B-only) seed counts consistent with each row's
# signed statistic, first/second wins (b, c) and exact p, and both-pass counts consistent with the
# Table 7 ladder (hybrid 95, typed-only 80, raw-only 84, B5 89, B3 67 passes out of 180).
TABLE_9 = {
    "P1": ([(3, 0)] * 2 + [(2, 0)] * 5 + [(1, 0)] + [(2, 1)] * 2 + [(0, 2)] * 2 + [(0, 1)] * 9, 74,
           ("DF-hybrid", "B5"), (+6, 21, 15, 0.518419, 1.0), (95, 89)),
    "P2": ([(3, 0)] * 6 + [(2, 0)] * 2 + [(0, 3)] * 4 + [(0, 2)] * 5 + [(0, 1)] * 9, 58,
           ("DF-typed-only", "B5"), (-9, 22, 31, 0.482597, 1.0), (80, 89)),
    "P3": ([(3, 0)] * 2 + [(0, 2)] + [(0, 1)] * 8 + [(1, 2)], 77,
           ("DF-raw-only", "B5"), (-5, 7, 12, 0.489746, 1.0), (84, 89)),
    "P4": ([(3, 0)] + [(2, 0)] * 5 + [(1, 0)] * 6 + [(0, 1)] * 5 + [(1, 2)] * 3, 73,
           ("DF-hybrid", "DF-raw-only"), (+11, 22, 11, 0.127867, 0.767), (95, 84)),
    "P5": ([(3, 0)] * 4 + [(2, 0)] * 9 + [(0, 1)] * 12 + [(1, 2)] * 3, 62,
           ("DF-hybrid", "DF-typed-only"), (+15, 33, 18, 0.134251, 0.767), (95, 80)),
    "P6": ([(3, 0)] * 9 + [(2, 0)] * 2 + [(1, 0)] + [(0, 2)] * 6 + [(0, 1)] * 7, 48,
           ("DF-typed-only", "B3"), (+13, 32, 19, 0.279096, 1.0), (80, 67)),
}


def table_9_cells() -> tuple[list[Cell], list[tuple[str, str]]]:
    """One cell set holding all six rows; each row gets its own pair of condition labels (the
    paper's conditions are shared between rows, and only the per-row tallies are published)."""
    cells, pairs = [], []
    for name, (traps, both_pass, (a, b), _, _) in TABLE_9.items():
        ca, cb = f"{name}:{a}", f"{name}:{b}"
        cells += trap_cells(traps, both_pass, ca, cb)
        pairs.append((ca, cb))
    return cells, pairs


@pytest.mark.parametrize("name", sorted(TABLE_9))
def test_table_9_row_from_cells(name):
    traps, both_pass, (a, b), (d, wins_a, wins_b, p, _), (passes_a, passes_b) = TABLE_9[name]
    cells = trap_cells(traps, both_pass, a, b)
    counts = count_cells(cells)
    assert (counts[a].passed, counts[b].passed) == (passes_a, passes_b)
    comp = compare_conditions(cells, a, b)
    assert comp.statistic == d == comp.discordant_a - comp.discordant_b
    assert (comp.discordant_a, comp.discordant_b) == (wins_a, wins_b)
    assert comp.units == 60 and comp.paired_cells == 180
    assert comp.missing_units == () and comp.excluded_a == comp.excluded_b == 0
    assert round(comp.clustered.p_value, 6) == p
    assert comp.mcnemar.b == wins_a and comp.mcnemar.c == wins_b


def test_table_9_family_holm():
    cells, pairs = table_9_cells()
    family = compare_family(cells, pairs)
    assert family.family_size == 6
    published_holm = [TABLE_9[n][3][4] for n in TABLE_9]
    assert [round(p, 3) for p in family.holm_clustered.adjusted] == published_holm
    assert family.holm_clustered.adjusted[3] == pytest.approx(0.7672004699707031, rel=1e-15)
    assert not any(family.holm_clustered.rejected)
    # P1 = 0.5184192657470703 exactly (Appendix C.6)
    assert family.comparisons[0].clustered.p_value == 0.5184192657470703
    # §7: pooled McNemar P1 p = 0.405, Holm p = 0.815 over the McNemar P1–P6 family
    assert round(family.comparisons[0].mcnemar.p_value, 3) == 0.405
    assert round(family.holm_mcnemar.adjusted[0], 3) == 0.815


def test_v1_structured_anchor_with_a_missing_cell():
    # Appendix E.5: DF vs B3 over 22 traps; DF lacks one seed-3 cell → 65 paired cells;
    # b = 24, c = 3; clustered p = 0.00732421875 (Holm 0.03662109375 in the five-comparison v1
    # family); pooled McNemar p = 4.92334365845e-05 (Holm 0.000246167182922).
    traps = [(3, 0)] * 4 + [(2, 0)] * 5 + [(1, 0)] * 2 + [(0, 1)] * 3
    cells = trap_cells(traps, 20, "DF", "B3", units=22, drop_a={(21, 2)})
    family = compare_family(cells, [("DF", "B3")], family_size=5)
    comp = family.comparisons[0]
    assert comp.units == 22 and comp.paired_cells == 65
    assert (comp.discordant_a, comp.discordant_b, comp.statistic) == (24, 3, 21)
    assert comp.missing_a == 1 and comp.missing_b == 0
    assert comp.clustered.p_exact == Fraction(15, 2048)
    assert family.holm_clustered.adjusted[0] == 0.03662109375
    assert comp.mcnemar.p_value == pytest.approx(4.92334365845e-05, rel=1e-11)
    assert family.holm_mcnemar.adjusted[0] == pytest.approx(0.000246167182922, rel=1e-11)
    assert family.slots[1:] == (None, None, None, None)
    assert family.holm_clustered.adjusted[1:] == (1.0, 1.0, 1.0, 1.0)
    # the incomplete trap leaves the complete-trap majority collapse
    assert comp.majority.units == 21 and comp.majority.skipped_incomplete == 1


def test_excluded_cells_are_not_imputed():
    cells = [
        Cell("t1", 1, "A", True), Cell("t1", 1, "B", False),
        Cell("t1", 2, "A", True), Cell("t1", 2, "B", False, valid=False, exclusion="task_exception"),
        Cell("t2", 1, "A", False, valid=False), Cell("t2", 1, "B", True),
        Cell("t3", 1, "B", True),  # A missing
    ]
    comp = compare_conditions(cells, "A", "B")
    assert comp.paired_cells == 1 and comp.units == 1
    assert comp.contributions == (("t1", 1),)
    assert comp.missing_units == ("t2", "t3")
    assert (comp.excluded_a, comp.excluded_b, comp.missing_a, comp.missing_b) == (1, 1, 1, 0)
    assert (comp.cells_a, comp.cells_b) == (3, 4)
    counts = count_cells(cells)
    assert (counts["A"].valid, counts["A"].excluded, counts["A"].passed) == (2, 1, 2)
    assert counts["B"].pass_fraction == pytest.approx(2 / 3)


def test_per_seed_and_majority():
    # trap u1: A passes seeds 1,2 and B passes seed 3 → A majority, B not
    # trap u2: A passes 1 of 3, B 2 of 3 → B majority
    # trap u3: both pass all → tie
    rows = {
        "u1": ([1, 1, 0], [0, 0, 1]),
        "u2": ([1, 0, 0], [0, 1, 1]),
        "u3": ([1, 1, 1], [1, 1, 1]),
    }
    cells = [Cell(u, s + 1, c, bool(v)) for u, (a, b) in rows.items() for c, vals in (("A", a), ("B", b))
             for s, v in enumerate(vals)]
    comp = compare_conditions(cells, "A", "B")
    assert comp.statistic == (2 - 1) + (1 - 2) + 0
    assert comp.majority.mcnemar.b == 1 and comp.majority.mcnemar.c == 1 and comp.majority.units == 3
    per = {s: (r.b, r.c) for s, r in comp.per_seed.items()}
    assert per == {1: (2, 0), 2: (1, 1), 3: (0, 2)}
    # without seed 3 for u1 the unit is incomplete: left out by default, majority of 2 otherwise
    cells = [c for c in cells if not (c.unit == "u1" and c.seed == 3 and c.condition == "A")]
    paired = pair_cells(cells, "A", "B")
    strict = majority_collapse(paired)
    assert (strict.units, strict.skipped_incomplete, strict.mcnemar.b, strict.mcnemar.c) == (2, 1, 0, 1)
    loose = majority_collapse(paired, complete_only=False)
    assert (loose.units, loose.mcnemar.b, loose.mcnemar.c) == (3, 1, 1)  # u1: A 2/2 > half, B 0/2


def test_even_seed_majority_tie_is_a_fail():
    cells = [Cell("u", s, "A", s <= 2) for s in range(1, 5)] + [Cell("u", s, "B", s == 1) for s in range(1, 5)]
    comp = compare_conditions(cells, "A", "B")
    # A passes 2 of 4 (not more than half) → fail; B 1 of 4 → fail: a concordant collapsed pair
    assert (comp.majority.mcnemar.b, comp.majority.mcnemar.c) == (0, 0)
    assert comp.majority.mcnemar.p_value == 1.0


def test_dedup_keeps_newest_record():
    cells = [
        Cell("t1", 1, "A", False, valid=False, order=1),
        Cell("t1", 1, "A", True, order=5),
        Cell("t1", 1, "A", False, order=3),
        Cell("t1", 1, "B", True, order=2),
        Cell("t1", 1, "B", False, order=2),  # same order: the later record wins
        Cell("t2", 1, "A", True, order=9),
        Cell("t2", 1, "A", False, valid=False, order=10),  # a newer exclusion replaces a pass
    ]
    kept = dedup_cells(cells)
    assert kept == [cells[1], cells[4], cells[6]]
    comp = compare_conditions(kept, "A", "B")
    assert comp.discordant_a == 1 and comp.excluded_a == 1


def test_dedup_uses_the_oracle_id_when_present():
    cells = [
        Cell("t1", 1, "A", True, oracle_id="o1", order=1),
        Cell("t1-rerun", 1, "A", False, oracle_id="o1", order=2),
        Cell("t1", 2, "A", True, oracle_id="o1", order=1),
        Cell("t1", 1, "A", True, order=3),  # no oracle id: keyed by unit, a different key
    ]
    assert dedup_cells(cells) == [cells[1], cells[2], cells[3]]


def test_errors():
    cells = [Cell("t1", 1, "A", True), Cell("t1", 1, "B", True)]
    with pytest.raises(UnknownConditionError):
        compare_conditions(cells, "A", "C")
    with pytest.raises(DuplicateCellError):
        compare_conditions(cells + [Cell("t1", 1, "A", False)], "A", "B")
    with pytest.raises(ValueError):
        compare_family(cells, [("A", "B"), ("B", "A")], family_size=1)


def test_family_with_named_unavailable_slot():
    cells, pairs = table_9_cells()
    family = compare_family(cells, pairs[:2], unavailable=[("B5-MEM0", "B0")], family_size=4)
    assert family.slots[2] == ("B5-MEM0", "B0") and family.slots[3] is None
    assert family.comparisons[2] is None
    assert family.holm_clustered.raw[2:] == (1.0, 1.0)
    assert family.holm_clustered.family_size == 4
    assert set(family.holm_per_seed) == {1, 2, 3}
    assert family.holm_per_seed[1].family_size == 4


# -- pairing order on both paths (the dense grid is walked, not sorted) ------------


def reference_pairs(cells: list[Cell], a: str, b: str) -> list[tuple[str, object, tuple[bool, bool]]]:
    """(unit, seed, outcomes) of every paired valid seed, by unit then seed_sort_key: the order
    `pair_cells` documents, computed the slow obvious way."""
    from membench.analytics.cells import seed_sort_key

    side = {(c.condition, c.unit, c.seed): c for c in cells}
    keys = sorted({(c.unit, c.seed) for c in cells if c.condition in (a, b)},
                  key=lambda k: (k[0], seed_sort_key(k[1])))
    out = []
    for unit, seed in keys:
        ca, cb = side.get((a, unit, seed)), side.get((b, unit, seed))
        if ca is not None and cb is not None and ca.valid and cb.valid:
            out.append((unit, seed, (ca.passed, cb.passed)))
    return out


@pytest.mark.parametrize("sparse", [False, True])
def test_pairs_are_ordered_by_unit_then_seed_on_both_paths(sparse: bool) -> None:
    cells = []
    for u in range(40):
        seeds = [u * 7 + 1000, u * 7 + 1001] if sparse else ["10", "2", "1", "x"]  # sparse: seeds unique to a unit
        for i, seed in enumerate(seeds):
            if (u + i) % 5 == 0:
                continue  # a missing A cell
            cells.append(Cell(f"u{(u * 13) % 40:02d}", seed, "A", (u + i) % 2 == 0, valid=(u + i) % 7 != 0))
        for i, seed in enumerate(seeds):
            cells.append(Cell(f"u{(u * 13) % 40:02d}", seed, "B", (u + i) % 3 == 0))
    paired = pair_cells(cells, "A", "B")
    flat = [(unit, seed, outcome) for unit, seeds in paired.pairs.items() for seed, outcome in seeds.items()]
    assert flat == reference_pairs(cells, "A", "B")
    assert (paired.missing_a, paired.excluded_a) == (
        sum(1 for u in range(40) for i in range(2 if sparse else 4) if (u + i) % 5 == 0),
        sum(1 for u in range(40) for i in range(2 if sparse else 4) if (u + i) % 5 and (u + i) % 7 == 0))
    assert paired.seeds == sorted(paired.seeds, key=lambda s: (0, int(s)) if str(s).isdigit() else (1, str(s)))
