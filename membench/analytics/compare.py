"""Paired comparisons of two conditions from a list of cells, and registered families of them.

For conditions A and B (DreamBench-SWE §6.2, Appendices C.6 and E):

- primary: the exact trap-clustered sign-flip test over d_t (:func:`.exact.sign_flip_test`);
- secondary: pooled exact McNemar over paired seed-unit cells (b = A-only passes, c = B-only);
- sensitivity: exact McNemar within each seed, and the unit-majority collapse followed by McNemar;
- family: Holm across the registered comparisons, unavailable slots at p = 1.

Callers dedup first (:func:`.cells.dedup_cells`); a repeated (condition, unit, seed) raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .cells import Cell, PairedCells, Seed, pair_cells, seed_sort_key
from .exact import McNemarResult, SignFlipResult, exact_mcnemar, sign_flip_test
from .holm import HolmResult, holm


@dataclass(frozen=True)
class MajorityResult:
    """Unit-majority collapse: per unit, a condition passes when it passes on more than half of
    the unit's paired valid seeds (≥ 2 of 3); then exact McNemar over the collapsed units.

    ``units`` = units that entered the collapse; ``skipped_incomplete`` = units with some but not
    all of the comparison's seeds paired (left out when ``complete_only``)."""

    units: int
    skipped_incomplete: int
    mcnemar: McNemarResult


@dataclass(frozen=True)
class Comparison:
    """Everything computed for one A-vs-B comparison.

    ``statistic`` = D_obs = Σ d_t = ``discordant_a`` − ``discordant_b`` (b − c). ``units`` counts
    units with ≥ 1 paired valid seed; ``missing_units`` lists grid units with none (excluded from
    the comparison and "listed as missing", Appendix E.1). ``contributions`` is (unit, d_t) for
    every contributing unit, sorted by unit.
    """

    a: str
    b: str
    statistic: int
    discordant_a: int
    discordant_b: int
    both_pass: int
    both_fail: int
    units: int
    paired_cells: int
    missing_units: tuple[str, ...]
    contributions: tuple[tuple[str, int], ...]
    clustered: SignFlipResult
    mcnemar: McNemarResult
    majority: MajorityResult
    per_seed: dict[Seed, McNemarResult]
    excluded_a: int
    excluded_b: int
    missing_a: int
    missing_b: int
    cells_a: int
    cells_b: int


def unit_contributions(paired: PairedCells) -> dict[str, int]:
    """d_t = #(A pass, B fail) − #(A fail, B pass) over unit t's paired valid seeds (E.1)."""
    out: dict[str, int] = {}
    pairs = paired.pairs
    for unit in sorted(pairs):
        d = 0
        for pa, pb in pairs[unit].values():
            d += pa - pb  # bools: 1 − 0, 0 − 1 or 0
        out[unit] = d
    return out


def per_seed_mcnemar(paired: PairedCells) -> dict[Seed, McNemarResult]:
    """Exact McNemar within each seed over that seed's paired valid cells (Table 32)."""
    counts: dict[Seed, list[int]] = {seed: [0, 0] for seed in paired.seeds}
    for seeds in paired.pairs.values():
        for seed, (pa, pb) in seeds.items():
            if pa and not pb:
                counts[seed][0] += 1
            elif pb and not pa:
                counts[seed][1] += 1
    return {seed: exact_mcnemar(b, c) for seed, (b, c) in counts.items()}


def majority_collapse(paired: PairedCells, *, complete_only: bool = True) -> MajorityResult:
    """Unit-majority collapse followed by exact McNemar (DreamBench-SWE Table 32).

    The paper "requires all three seed outcomes per condition for a trap, majority-votes each
    condition at the trap level, then runs exact two-sided McNemar over complete trap pairs".
    Generalised: with ``complete_only`` a unit enters only when every seed of the comparison's
    grid is a paired valid seed for it; a condition passes the unit when it passes on more than
    half of those seeds (2 of 3; with an even count a tie is a fail). Without ``complete_only``
    every unit with ≥ 1 paired valid seed enters, majority over its paired seeds.
    """
    all_seeds = len(paired.seeds)
    b = c = used = skipped = 0
    for seeds in paired.pairs.values():
        if complete_only and len(seeds) < all_seeds:
            skipped += 1
            continue
        used += 1
        n = len(seeds)
        wins_a = wins_b = 0
        for pa, pb in seeds.values():
            wins_a += pa
            wins_b += pb
        a_pass, b_pass = 2 * wins_a > n, 2 * wins_b > n
        if a_pass and not b_pass:
            b += 1
        elif b_pass and not a_pass:
            c += 1
    return MajorityResult(units=used, skipped_incomplete=skipped, mcnemar=exact_mcnemar(b, c))


def compare_paired(paired: PairedCells, *, complete_only: bool = True) -> Comparison:
    """Run every test of one comparison on an already-built pairing."""
    d = unit_contributions(paired)
    b = c = both_pass = both_fail = 0
    for seeds in paired.pairs.values():
        for pa, pb in seeds.values():
            if pa and pb:
                both_pass += 1
            elif pa:
                b += 1
            elif pb:
                c += 1
            else:
                both_fail += 1
    clustered = sign_flip_test(list(d.values()))
    return Comparison(
        a=paired.a,
        b=paired.b,
        statistic=clustered.statistic,
        discordant_a=b,
        discordant_b=c,
        both_pass=both_pass,
        both_fail=both_fail,
        units=paired.units,
        paired_cells=paired.paired_cells,
        missing_units=tuple(sorted(paired.grid_units - set(paired.pairs))),
        contributions=tuple(d.items()),
        clustered=clustered,
        mcnemar=exact_mcnemar(b, c),
        majority=majority_collapse(paired, complete_only=complete_only),
        per_seed=per_seed_mcnemar(paired),
        excluded_a=paired.excluded_a,
        excluded_b=paired.excluded_b,
        missing_a=paired.missing_a,
        missing_b=paired.missing_b,
        cells_a=paired.cells_a,
        cells_b=paired.cells_b,
    )


def compare_conditions(cells: Iterable[Cell], a: str, b: str, *, complete_only: bool = True) -> Comparison:
    """Compare condition ``a`` with condition ``b`` over deduplicated cells.

    This is the function a report calls for one pair. Raises
    :class:`~.cells.UnknownConditionError` if either condition has no cell and
    :class:`~.cells.DuplicateCellError` on a repeated (condition, unit, seed).
    """
    return compare_paired(pair_cells(cells, a, b), complete_only=complete_only)


@dataclass(frozen=True)
class FamilyResult:
    """A registered family of comparisons with Holm adjustment of each test.

    ``slots`` lists the registered (a, b) pairs in order (available first, then the unavailable
    ones given, then anonymous padding up to ``family_size``); ``comparisons[i]`` is None for an
    unavailable slot. ``holm_clustered`` etc. adjust over all slots (unavailable at p = 1);
    ``holm_per_seed[seed]`` adjusts each seed's per-seed McNemar family separately (Table 32).
    """

    slots: tuple[tuple[str, str] | None, ...]
    comparisons: tuple[Comparison | None, ...]
    holm_clustered: HolmResult
    holm_mcnemar: HolmResult
    holm_majority: HolmResult
    holm_per_seed: dict[Seed, HolmResult]

    @property
    def family_size(self) -> int:
        return len(self.slots)


def compare_family(
    cells: Iterable[Cell],
    pairs: Sequence[tuple[str, str]],
    *,
    unavailable: Sequence[tuple[str, str]] = (),
    family_size: int | None = None,
    alpha: float = 0.05,
    complete_only: bool = True,
) -> FamilyResult:
    """Compare each (a, b) in ``pairs`` and Holm-adjust within the registered family.

    ``unavailable`` names registered comparisons that could not be evaluated (e.g. a condition
    rejected by a conformance gate); ``family_size`` pads the family with anonymous unavailable
    slots. Unavailable slots keep raw and adjusted p = 1 and stay in the family (Appendix E.3).
    ``family_size`` smaller than the number of slots is a ValueError.
    """
    cells = list(cells)
    slots: list[tuple[str, str] | None] = [*((a, b) for a, b in pairs), *((a, b) for a, b in unavailable)]
    if family_size is not None:
        if family_size < len(slots):
            raise ValueError(f"family size {family_size} is smaller than the {len(slots)} registered comparisons")
        slots += [None] * (family_size - len(slots))
    comparisons: list[Comparison | None] = [
        compare_conditions(cells, a, b, complete_only=complete_only) for a, b in pairs
    ]
    comparisons += [None] * (len(slots) - len(comparisons))

    def adjust(get) -> HolmResult:
        return holm([None if c is None else get(c) for c in comparisons], alpha=alpha)

    seeds = sorted({s for c in comparisons if c is not None for s in c.per_seed}, key=seed_sort_key)
    per_seed = {
        seed: holm(
            [None if c is None or seed not in c.per_seed else c.per_seed[seed].p_value for c in comparisons],
            alpha=alpha,
        )
        for seed in seeds
    }
    return FamilyResult(
        slots=tuple(slots),
        comparisons=tuple(comparisons),
        holm_clustered=adjust(lambda c: c.clustered.p_value),
        holm_mcnemar=adjust(lambda c: c.mcnemar.p_value),
        holm_majority=adjust(lambda c: c.majority.mcnemar.p_value),
        holm_per_seed=per_seed,
    )
