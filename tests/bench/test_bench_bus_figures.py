"""The figures `membench bench bus` derives from raw counters."""

from membench.bench.bus import EmitTimings, _busy_fraction, _p95, stage_ceiling


def test_busy_fraction_is_over_the_end_to_end_time_not_the_closing_quiet():
    # 11 s sampled, 1,100 of 2,200 jiffies busy; the end-to-end time is the first 8 s
    assert _busy_fraction((0.0, (0, 0)), (11.0, (1100, 2200)), 8.0) == 1100 / (2200 * 8 / 11)
    assert _busy_fraction((0.0, (0, 0)), (4.0, (0, 800)), 8.0) == 1.0  # every jiffy busy
    assert _busy_fraction((0.0, (5, 5)), (0.0, (5, 5)), 1.0) == 0.0  # nothing sampled


def test_p95_and_timings_merge():
    merged = EmitTimings()
    merged.extend(EmitTimings(cpu=list(range(100)), wall=list(range(100, 200))))
    assert _p95(merged.cpu) == 95 and _p95(merged.wall) == 195


def test_stage_ceiling_is_the_cores_over_the_summed_cpu_per_event():
    # runner 41 + worker 68 + sink 26 = 135 us per event; two cores -> 14,815 events/s at most
    assert round(stage_ceiling({"runner": 41.0, "worker": 68.0, "sink": 26.0}, 2)) == 14815
    assert stage_ceiling({"runner": 50.0}, 1) == 20_000.0
    assert stage_ceiling({"runner": 0.0}, 2) == float("inf")  # nothing measured: no bound
