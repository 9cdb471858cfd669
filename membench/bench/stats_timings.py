"""Synthetic inputs and timings for ``membench bench stats``.

Three workloads:

1. the DreamBench-SWE P1–P6 family (Table 19: six registered comparisons over B3, B5 and the
   three reference-probe variants) on synthetic 60 units × 3 seeds: every test of each comparison
   (clustered exact sign-flip, pooled/per-seed/majority McNemar), Holm, validity gates, and
   trap-cluster bootstrap CIs for every condition;
2. a pass-fraction report over one million cells: grouping the cells by condition and unit and a
   trap-cluster bootstrap CI for each condition;
3. ``membench stats compare`` on a 600,000-row cells CSV (100,000 units × 3 seeds × 2 conditions):
   loading the file and one comparison with every test — past the exact clustered test's bound,
   so its p is the seeded Monte Carlo sign-flip (membench/analytics/exact.py).

Timings use :func:`time.perf_counter`; each workload is repeated and the minimum and median are
reported. The synthetic data is seeded, so the inputs are the same on every run.
"""

from __future__ import annotations

import csv
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from scipy.stats import norm

from pathlib import Path

from membench.analytics.bootstrap import pass_fractions
from membench.analytics.cells import Cell, gc_paused, pair_cells
from membench.analytics.compare import compare_family
from membench.analytics.loaders import load_cells_csv
from membench.analytics.gates import b0_headroom, comparison_gates

#: DreamBench-SWE Table 19, the frozen v2 primary S3 comparison family.
P_FAMILY: tuple[tuple[str, str, str], ...] = (
    ("P1", "DF-hybrid", "B5"),
    ("P2", "DF-typed-only", "B5"),
    ("P3", "DF-raw-only", "B5"),
    ("P4", "DF-hybrid", "DF-raw-only"),
    ("P5", "DF-hybrid", "DF-typed-only"),
    ("P6", "DF-typed-only", "B3"),
)

#: Pass rates of the v2 ladder (Table 7) used as the synthetic conditions' marginal rates.
LADDER_RATES: dict[str, float] = {
    "B0": 21 / 180,
    "B3": 67 / 180,
    "B5": 89 / 180,
    "DF-typed-only": 80 / 180,
    "DF-raw-only": 84 / 180,
    "DF-hybrid": 95 / 180,
}

CONSTRUCTS = tuple(f"C{i}" for i in range(1, 11))

T = TypeVar("T")


def synthetic_cells(
    units: int,
    seeds: int,
    rates: dict[str, float] = LADDER_RATES,
    *,
    seed: int = 0,
    excluded_fraction: float = 0.0,
) -> list[Cell]:
    """Seeded synthetic cells with unit-level clustering.

    Each unit gets a latent difficulty z ~ N(0, 1); a condition with marginal rate r passes a
    cell when z + 0.5·e < Φ⁻¹(r)·√1.25 with e ~ N(0, 1) per cell, so its expected pass rate is r
    and the seeds of one unit are correlated, as traps are. ``excluded_fraction`` of the cells
    are marked excluded at random.
    """
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(units)
    names = list(rates)
    cells: list[Cell] = []
    unit_ids = [f"u{u:06d}" for u in range(units)]
    construct = [CONSTRUCTS[u % len(CONSTRUCTS)] for u in range(units)]
    for name in names:
        q = float(norm.ppf(rates[name]) * np.sqrt(1.25))
        noise = rng.standard_normal((units, seeds))
        passed = (z[:, None] + 0.5 * noise) < q
        valid = rng.random((units, seeds)) >= excluded_fraction
        for u in range(units):
            uid, con = unit_ids[u], construct[u]
            for s in range(seeds):
                cells.append(Cell(uid, s + 1, name, bool(passed[u, s]), bool(valid[u, s]), con))
    return cells


@dataclass(frozen=True)
class Timing:
    name: str
    repeats: int
    min_s: float
    median_s: float
    detail: dict[str, object]


def _time(fn: Callable[[], T], repeats: int) -> tuple[list[float], T]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def bench_family(*, units: int = 60, seeds: int = 3, resamples: int = 2000, repeats: int = 5, seed: int = 0) -> Timing:
    """Time the whole P1–P6 family with gates and bootstrap CIs on synthetic units × seeds."""
    cells = synthetic_cells(units, seeds, seed=seed)
    pairs = [(a, b) for _, a, b in P_FAMILY]

    def run():
        family = compare_family(cells, pairs)
        gates = [comparison_gates(pair_cells(cells, a, b), min_units=int(0.9 * units)) for a, b in pairs]
        headroom = b0_headroom(cells)
        fractions = pass_fractions(cells, resamples=resamples, seed=seed)
        return family, gates, headroom, fractions

    times, (family, _, _, fractions) = _time(run, repeats)
    return Timing(
        name="P1-P6 family + gates + bootstrap CIs",
        repeats=repeats,
        min_s=min(times),
        median_s=statistics.median(times),
        detail={
            "units": units,
            "seeds": seeds,
            "cells": len(cells),
            "conditions": len(fractions),
            "comparisons": family.family_size,
            "resamples": resamples,
            "p_clustered": [round(c.clustered.p_value, 6) for c in family.comparisons if c is not None],
        },
    )


def bench_pass_fractions(*, cells: int = 1_000_000, seeds: int = 3, conditions: Sequence[str] = tuple(LADDER_RATES),
                         resamples: int = 2000, repeats: int = 3, seed: int = 0) -> tuple[Timing, Timing]:
    """Time building ~``cells`` synthetic cells, and the pass-fraction report over them."""
    units = max(1, -(-cells // (seeds * len(conditions))))  # ceil: at least ``cells`` cells
    rates = {c: LADDER_RATES.get(c, 0.5) for c in conditions}
    t0 = time.perf_counter()
    data = synthetic_cells(units, seeds, rates, seed=seed, excluded_fraction=0.01)
    build = time.perf_counter() - t0
    times, fractions = _time(lambda: pass_fractions(data, resamples=resamples, seed=seed), repeats)
    build_timing = Timing("build synthetic cells", 1, build, build, {"cells": len(data)})
    report = Timing(
        name="pass fractions + bootstrap CIs",
        repeats=repeats,
        min_s=min(times),
        median_s=statistics.median(times),
        detail={
            "cells": len(data),
            "units": units,
            "seeds": seeds,
            "conditions": len(conditions),
            "resamples": resamples,
            "estimates": {c: round(f.estimate, 4) for c, f in fractions.items() if f.estimate is not None},
        },
    )
    return build_timing, report


def write_cells_csv(path: Path, cells: Sequence[Cell]) -> Path:
    """CELLS as a cells CSV (the columns ``membench stats compare`` reads)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("unit", "seed", "condition", "passed", "valid", "construct"))
        writer.writerows((c.unit, c.seed, c.condition, int(c.passed), int(c.valid), c.construct or "") for c in cells)
    return path


def bench_compare_csv(*, units: int = 100_000, seeds: int = 3, repeats: int = 3, seed: int = 0) -> Timing:
    """Time what ``membench stats compare --cells FILE --pair A:B`` does after start-up: load the CSV
    (units × seeds × 2 conditions rows; A and B at the B5 and B3 ladder rates) and run every test
    of the comparison, with the collector paused as the command pauses it."""
    rates = {"A": LADDER_RATES["B5"], "B": LADDER_RATES["B3"]}
    with tempfile.TemporaryDirectory(prefix="membench-bench-") as tmp:
        path = write_cells_csv(Path(tmp) / "cells.csv", synthetic_cells(units, seeds, rates, seed=seed))

        def run():
            with gc_paused():
                return compare_family(load_cells_csv(path), [("A", "B")])

        times, family = _time(run, repeats)
        size = path.stat().st_size
    comparison = family.comparisons[0]
    return Timing(
        name="stats compare on a cells CSV (load + one comparison)",
        repeats=repeats,
        min_s=min(times),
        median_s=statistics.median(times),
        detail={
            "rows": units * seeds * 2,
            "file_bytes": size,
            "units": units,
            "seeds": seeds,
            "clustered_method": comparison.clustered.method,
            "clustered_work": comparison.clustered.work,
            "p_clustered": comparison.clustered.p_value,
            "p_clustered_ci95": comparison.clustered.ci95,
        },
    )
