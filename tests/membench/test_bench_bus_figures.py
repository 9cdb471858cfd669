"""The figures `membench bench bus` derives from raw counters."""

from membench.bench.bus import EmitTimings, _busy_fraction, _p95


def test_busy_fraction_is_over_the_end_to_end_time_not_the_closing_quiet():
    # 11 s sampled, 1,100 of 2,200 jiffies busy; the end-to-end time is the first 8 s
    assert _busy_fraction((0.0, (0, 0)), (11.0, (1100, 2200)), 8.0) == 1100 / (2200 * 8 / 11)
    assert _busy_fraction((0.0, (0, 0)), (4.0, (0, 800)), 8.0) == 1.0  # every jiffy busy
    assert _busy_fraction((0.0, (5, 5)), (0.0, (5, 5)), 1.0) == 0.0  # nothing sampled


def test_p95_and_timings_merge():
    merged = EmitTimings()
    merged.extend(EmitTimings(cpu=list(range(100)), wall=list(range(100, 200))))
    assert _p95(merged.cpu) == 95 and _p95(merged.wall) == 195
