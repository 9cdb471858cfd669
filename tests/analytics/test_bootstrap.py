"""Pass fractions and trap-cluster percentile bootstrap CIs."""

from __future__ import annotations

import numpy as np
import pytest

from membench.analytics.bootstrap import BootstrapCI, pass_fractions, trap_cluster_bootstrap_ci
from membench.analytics.cells import Cell


def naive_cluster_bootstrap(outcomes_by_unit, resamples, seed, level=0.95):
    """Reference: draw unit indices with replacement, pool passes / cells."""
    rng = np.random.default_rng(seed)
    units = [np.asarray(v, dtype=float) for v in outcomes_by_unit.values() if len(v)]
    passes = np.array([u.sum() for u in units])
    cells = np.array([len(u) for u in units])
    idx = rng.integers(0, len(units), size=(resamples, len(units)))
    reps = passes[idx].sum(axis=1) / cells[idx].sum(axis=1)
    tail = (1 - level) / 2
    return np.quantile(reps, [tail, 1 - tail])


def test_empty_input_gives_none():
    assert trap_cluster_bootstrap_ci({}) == BootstrapCI(None, None, None, 2000, 0, 0.95)
    assert trap_cluster_bootstrap_ci({"t1": [], "t2": ()}, resamples=10, seed=3).estimate is None


def test_estimate_is_the_pooled_fraction_and_parameters_are_recorded():
    data = {"t1": [True, True, False], "t2": [False], "t3": [True, False, False, False]}
    ci = trap_cluster_bootstrap_ci(data, resamples=500, seed=7, level=0.9)
    assert ci.estimate == pytest.approx(3 / 8)
    assert (ci.resamples, ci.seed, ci.level) == (500, 7, 0.9)
    assert 0.0 <= ci.low <= ci.estimate <= ci.high <= 1.0


def test_seeded_and_reproducible():
    rng = np.random.default_rng(1)
    data = {f"t{i}": list(rng.random(3) < rng.random()) for i in range(60)}
    first = trap_cluster_bootstrap_ci(data, seed=11)
    assert trap_cluster_bootstrap_ci(data, seed=11) == first
    assert trap_cluster_bootstrap_ci(data, seed=12) != first


def test_degenerate_outcomes():
    assert trap_cluster_bootstrap_ci({"a": [True] * 3, "b": [True]}) == BootstrapCI(1.0, 1.0, 1.0, 2000, 0, 0.95)
    ci = trap_cluster_bootstrap_ci({"a": [False] * 3}, resamples=5)
    assert (ci.estimate, ci.low, ci.high) == (0.0, 0.0, 0.0)


def test_matches_naive_unit_resampling_in_distribution():
    # The multinomial-over-kinds shortcut must give the same interval as resampling unit indices.
    rng = np.random.default_rng(5)
    data = {}
    for i in range(60):
        p = rng.beta(0.6, 0.9)
        data[f"t{i}"] = list(rng.random(rng.integers(1, 4)) < p)
    ours = trap_cluster_bootstrap_ci(data, resamples=40000, seed=1)
    low, high = naive_cluster_bootstrap(data, 40000, seed=2)
    assert ours.low == pytest.approx(low, abs=0.006)
    assert ours.high == pytest.approx(high, abs=0.006)


def test_clustered_interval_is_wider_than_a_cell_level_one():
    # 60 traps whose three seeds always agree: the cluster bootstrap sees 60 items, not 180.
    data = {f"t{i}": [i % 3 == 0] * 3 for i in range(60)}
    clustered = trap_cluster_bootstrap_ci(data, resamples=20000, seed=0)
    cell_level = trap_cluster_bootstrap_ci(
        {f"t{i}:{s}": [v] for i, vals in enumerate(data.values()) for s, v in enumerate(vals)},
        resamples=20000, seed=0,
    )
    assert clustered.estimate == cell_level.estimate == pytest.approx(1 / 3)
    width_ratio = (clustered.high - clustered.low) / (cell_level.high - cell_level.low)
    assert width_ratio == pytest.approx(np.sqrt(3), rel=0.15)


def test_invalid_parameters():
    with pytest.raises(ValueError):
        trap_cluster_bootstrap_ci({"a": [True]}, resamples=0)
    with pytest.raises(ValueError):
        trap_cluster_bootstrap_ci({"a": [True]}, level=1.0)


def test_pass_fractions_count_exclusions_separately():
    cells = [
        Cell("t1", 1, "B0", True), Cell("t1", 2, "B0", False), Cell("t1", 3, "B0", False, valid=False),
        Cell("t2", 1, "B0", False), Cell("t2", 2, "B0", False), Cell("t2", 3, "B0", True),
        Cell("t1", 1, "B5", False, valid=False),
    ]
    fractions = pass_fractions(cells, resamples=300, seed=4)
    b0 = fractions["B0"]
    assert (b0.passed, b0.valid, b0.excluded, b0.units) == (2, 5, 1, 2)
    assert b0.estimate == pytest.approx(0.4)
    assert b0.ci == trap_cluster_bootstrap_ci({"t1": [True, False], "t2": [False, False, True]}, resamples=300, seed=4)
    b5 = fractions["B5"]
    assert (b5.passed, b5.valid, b5.excluded, b5.units, b5.estimate) == (0, 0, 1, 0, None)
