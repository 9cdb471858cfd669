"""`membench bench concurrency` (membench/bench/concurrency.py): the arithmetic of a level's figures, and one
tiny real invocation (two units, a fast scripted model, bubblewrap); the measured levels are in
docs/benchmarks.md, never in the test suite. And the default worker count's rule
(membench/pipeline/worker_count.py)."""

from __future__ import annotations

import json

import pytest

from membench.bench.concurrency import in_flight, level_figures, percentile
from membench.pipeline.worker_count import MAX_WORKERS, default_workers
from tests.conftest import run_cli


def test_in_flight_is_the_time_weighted_count_of_open_units():
    # two units overlap for 5 s of a 15 s window: 1 unit for 10 s, 2 for 5 s
    mean, peak, window = in_flight([(0.0, 10.0), (5.0, 15.0)])
    assert (round(mean, 6), peak, window) == (round(20 / 15, 6), 2, 15.0)
    assert in_flight([(0.0, 1.0), (1.0, 2.0)])[1] == 1  # one ends as the next starts: never two at once
    assert in_flight([]) == (0.0, 0, 0.0)


def test_a_levels_ratios_to_the_ideal_and_the_cpu_ceiling():
    # 4 workers, 8 units of 6 calls to a 3 s model: ideal 4 × 60 / 18 = 13.33 units/min
    spans = [(float(i // 4) * 30.0, float(i // 4) * 30.0 + 30.0) for i in range(8)]  # two waves of 4, 30 s each
    latencies = [3000.0 + extra for extra in (10, 20, 30, 40, 50, 60) * 8]
    level = level_figures(4, spans, latencies, delay_s=3.0, cpu_s=16.0, peak_rss_mb=400.0, n_cores=2)
    assert level.units == 8 and level.window_s == 60.0 and level.units_per_min == 8.0
    assert (level.in_flight_mean, level.in_flight_max, level.calls_per_unit) == (4.0, 4, 6.0)
    assert level.ideal_units_per_min == pytest.approx(40 / 3)
    assert level.of_ideal == pytest.approx(8.0 / (40 / 3))
    assert level.cpu_s_per_unit == 2.0 and level.cpu_ceiling_units_per_min == 60.0  # 2 cores × 60 / 2 s
    assert level.of_cpu_ceiling == pytest.approx(8.0 / 60.0)
    assert level.gateway_added_p50_ms == pytest.approx(35.0) and level.mb_per_unit == 100.0
    assert level.unit_wall_s == 30.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5


def test_the_default_worker_count_follows_the_cpu_and_the_memory():
    assert default_workers("scripted:memory-literal", n_cores=8, memory_mb=64_000)[0] == 8  # CPU-bound: one a core
    cpu_bound, why = default_workers("openai:local-model", n_cores=2, memory_mb=64_000)
    assert cpu_bound > 2 and "bound by CPU" in why  # waiting units: many a core
    memory_bound, why = default_workers("openai:local-model", n_cores=64, memory_mb=600)
    assert memory_bound < cpu_bound and "bound by memory" in why
    assert default_workers("codex", n_cores=4096, memory_mb=10**9)[0] == MAX_WORKERS
    assert default_workers("openai:m", n_cores=1, memory_mb=1)[0] == 1


@pytest.mark.integration
def test_cli_concurrency_smoke(bwrap_sandbox, tmp_path):
    proc = run_cli("bench", "concurrency", "--levels", "1", "--delay", "0.2", "--rounds", "1", "--json",
                   home=tmp_path / "home", timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    (level,) = result["levels"]
    assert level["workers"] == 1 and level["units"] == 3 and level["in_flight_max"] == 1
    assert level["calls_per_unit"] > 0 and level["units_per_min"] > 0 and 0 < level["of_ideal"] <= 1
    assert result["machine"]["nproc"] >= 1
