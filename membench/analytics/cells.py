"""Cells: one (unit, seed, condition) scored outcome, and the bookkeeping around them.

A *cell* is one S3 outcome of one unit (a DreamBench-SWE trap, or any task) under one condition
and one seed (DreamBench-SWE §6, Appendix C.6: "validity-gated S3 executable pass/fail for each
(condition, seed, trap) cell"). A cell is either valid (it has a pass/fail outcome) or excluded
(``valid=False``: ``task_exception`` before the agent was started, ``isolation_unavailable`` on the
base checkout, ``model_unavailable``, ...). What an agent produces never excludes its cell: it is
a failure with a named reason (docs/design.md §5-§7).
Excluded cells are counted and reported, never imputed (Appendix C.6: "No imputation is allowed").

Deduplication (docs/design.md §8): a unit can be re-run; the newest record per (condition, seed,
oracle id) wins, where the oracle id falls back to the unit when a cell has none. "Newest" is the
largest ``order`` (a record sequence number or a timestamp in microseconds); between equal
``order`` values the later record in the input wins. Validity is not a tie-breaker: a newer
excluded record replaces an older valid one, because the newest record is the one of record.

Pairing (Appendix E.1): for conditions A and B a (unit, seed) is a *paired valid seed* when both
conditions have a valid cell for it. Only paired valid seeds enter a paired comparison.
"""

from __future__ import annotations

import gc
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property

Seed = Hashable


@dataclass(frozen=True, slots=True)
class Cell:
    """One scored outcome. ``passed`` is meaningless (and ignored) when ``valid`` is False."""

    unit: str
    seed: Seed
    condition: str
    passed: bool
    valid: bool = True
    construct: str | None = None
    oracle_id: str | None = None
    order: int = 0  # record order for dedup: larger is newer
    exclusion: str | None = None  # why the cell is excluded (task_exception, ...), when not valid


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building many records at once.

    Cells, keys and pairings hold no reference cycles, but every 700 new container objects start a
    collection that walks the young objects, and the older generations are walked again and
    again as they grow: loading 600,000 cells spent ~40% of its time there. Reference counting
    still frees everything; the collector is restored (if it was on) on the way out."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class DuplicateCellError(ValueError):
    """Two cells share (condition, unit, seed) where exactly one was expected."""

    def __init__(self, key: tuple[str, str, Seed]):
        self.key = key
        condition, unit, seed = key
        super().__init__(f"duplicate cell: condition {condition!r}, unit {unit!r}, seed {seed!r}")


class UnknownConditionError(ValueError):
    """A comparison names a condition that no cell carries."""

    def __init__(self, condition: str):
        self.condition = condition
        super().__init__(f"no cell has condition {condition!r}")


def seed_sort_key(seed: Seed) -> tuple[int, object]:
    """Order seeds numerically when they look like integers, else lexically (ints first)."""
    if isinstance(seed, bool):
        return (1, str(seed))
    if isinstance(seed, int):
        return (0, seed)
    text = str(seed)
    try:
        return (0, int(text))
    except ValueError:
        return (1, text)


def dedup_key(cell: Cell) -> tuple[str, Seed, str]:
    """The dedup key of docs/design.md §8: (condition, seed, oracle id or, without one, the unit)."""
    return (cell.condition, cell.seed, cell.oracle_id if cell.oracle_id is not None else cell.unit)


def dedup_cells(cells: Iterable[Cell]) -> list[Cell]:
    """Keep the newest record per (condition, seed, oracle id / unit).

    Newest = largest ``order``; equal ``order`` → the later record in the input. The kept cells
    are returned in input order. Excluded cells take part like any other record.
    """
    best: dict[tuple[str, Seed, str], tuple[int, int, Cell]] = {}
    for position, cell in enumerate(cells):
        key = dedup_key(cell)
        current = best.get(key)
        if current is None or (cell.order, position) >= (current[0], current[1]):
            best[key] = (cell.order, position, cell)
    return [cell for _, _, cell in sorted(best.values(), key=lambda item: item[1])]


def index_cells(cells: Iterable[Cell]) -> dict[tuple[str, str, Seed], Cell]:
    """Map (condition, unit, seed) → cell; raise :class:`DuplicateCellError` on a repeat.

    Call :func:`dedup_cells` first when the input may hold re-runs.
    """
    index: dict[tuple[str, str, Seed], Cell] = {}
    for cell in cells:
        key = (cell.condition, cell.unit, cell.seed)
        if key in index:
            raise DuplicateCellError(key)
        index[key] = cell
    return index


@dataclass(frozen=True)
class CellCounts:
    """Counts of one condition's cells: ``cells = valid + excluded``; ``passed ≤ valid``."""

    condition: str
    cells: int
    valid: int
    excluded: int
    passed: int

    @property
    def pass_fraction(self) -> float | None:
        """passed / valid (excluded cells are not in the denominator); None without valid cells."""
        return self.passed / self.valid if self.valid else None


def count_cells(cells: Iterable[Cell]) -> dict[str, CellCounts]:
    """Per-condition counts of cells, valid cells, excluded cells and passes."""
    totals: dict[str, list[int]] = {}
    for cell in cells:
        t = totals.setdefault(cell.condition, [0, 0, 0, 0])
        t[0] += 1
        if cell.valid:
            t[1] += 1
            t[3] += bool(cell.passed)
        else:
            t[2] += 1
    return {c: CellCounts(c, n, v, x, p) for c, (n, v, x, p) in totals.items()}


@dataclass(frozen=True)
class PairedCells:
    """The pairing of conditions A and B over their (unit, seed) grid.

    ``grid`` is every (unit, seed) where A or B has a cell (valid or not). ``pairs`` maps each
    unit that has at least one paired valid seed to {seed: (A passed, B passed)}.
    ``excluded_a``/``missing_a`` count grid keys where A's cell is excluded / absent (same for B).
    ``constructs`` maps units to their construct label (first label seen, A's cells first).
    """

    a: str
    b: str
    grid: frozenset[tuple[str, Seed]]
    pairs: dict[str, dict[Seed, tuple[bool, bool]]]
    excluded_a: int
    excluded_b: int
    missing_a: int
    missing_b: int
    cells_a: int
    cells_b: int
    constructs: dict[str, str | None] = field(default_factory=dict)

    @property
    def paired_cells(self) -> int:
        return sum(len(seeds) for seeds in self.pairs.values())

    @property
    def units(self) -> int:
        """Units with at least one paired valid seed (the contributing clusters)."""
        return len(self.pairs)

    @cached_property  # computed once: each pass over a 600,000-key grid costs a tenth of a second
    def grid_units(self) -> frozenset[str]:
        return frozenset(unit for unit, _ in self.grid)

    @cached_property
    def seeds(self) -> list[Seed]:
        return sorted({seed for _, seed in self.grid}, key=seed_sort_key)


def pair_cells(cells: Iterable[Cell], a: str, b: str) -> PairedCells:
    """Pair conditions ``a`` and ``b``: raises :class:`UnknownConditionError` when either has no
    cell and :class:`DuplicateCellError` when a (condition, unit, seed) repeats.

    ``pairs`` lists units in sorted order and each unit's seeds in :func:`seed_sort_key` order.
    One pass over the cells, then one over the grid in that order (`_grid_order`)."""
    with gc_paused():
        return _pair_cells(cells, a, b)


def _grid_order(grid: frozenset[tuple[str, Seed]]) -> Iterable[tuple[str, Seed]]:
    """Keys by unit, then seed (:func:`seed_sort_key`), covering the grid. Sorting 300,000
    (unit, seed) tuples costs about a second; when the grid is dense (units × distinct seeds at
    most twice its size, as in any seeds-per-unit design) the sorted units are crossed with the
    ranked seeds instead — the caller skips the keys neither condition has."""
    units = sorted({unit for unit, _ in grid})
    seeds = sorted({seed for _, seed in grid}, key=seed_sort_key)
    if len(units) * len(seeds) <= 2 * len(grid):
        return ((unit, seed) for unit in units for seed in seeds)
    rank = {seed: i for i, seed in enumerate(seeds)}
    return sorted(grid, key=lambda k: (k[0], rank[k[1]]))


def _pair_cells(cells: Iterable[Cell], a: str, b: str) -> PairedCells:
    side: dict[str, dict[tuple[str, Seed], Cell]] = {a: {}, b: {}}
    for cell in cells:
        bucket = side.get(cell.condition)
        if bucket is None:
            continue
        if bucket.setdefault((cell.unit, cell.seed), cell) is not cell:
            raise DuplicateCellError((cell.condition, cell.unit, cell.seed))
    for name in (a, b):
        if not side[name]:
            raise UnknownConditionError(name)
    constructs: dict[str, str | None] = {}
    for name in (a, b):
        for (unit, _), cell in side[name].items():
            if constructs.get(unit) is None:
                constructs[unit] = cell.construct
    cells_a, cells_b = side[a], side[b]
    grid = frozenset(cells_a) | frozenset(cells_b)
    pairs: dict[str, dict[Seed, tuple[bool, bool]]] = {}
    excluded_a = excluded_b = missing_a = missing_b = 0
    get_a, get_b = cells_a.get, cells_b.get
    for key in _grid_order(grid):
        ca, cb = get_a(key), get_b(key)
        if ca is None:
            if cb is None:
                continue  # not in the grid
            missing_a += 1
        elif not ca.valid:
            excluded_a += 1
        if cb is None:
            missing_b += 1
        elif not cb.valid:
            excluded_b += 1
        if ca is not None and cb is not None and ca.valid and cb.valid:
            unit, seed = key
            seeds = pairs.get(unit)
            if seeds is None:
                seeds = pairs[unit] = {}
            seeds[seed] = (bool(ca.passed), bool(cb.passed))
    return PairedCells(
        a=a, b=b, grid=grid, pairs=pairs,
        excluded_a=excluded_a, excluded_b=excluded_b, missing_a=missing_a, missing_b=missing_b,
        cells_a=len(cells_a), cells_b=len(cells_b), constructs=constructs,
    )
