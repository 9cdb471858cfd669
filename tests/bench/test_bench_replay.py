"""The replay/rederive figures of `membench bench bus` (membench/bench/replay_rates.py) on a small real
log and chDB warehouse: every figure is measured over every event, and the benchmark refuses a log
that replay finds problems in (a figure over a broken replay would mean nothing)."""

from __future__ import annotations

import pytest

from membench.bench.replay_rates import bench_replay, format_lines, replay_rates, write_runs


def test_every_replay_figure_covers_every_event():
    result = bench_replay(4)
    events = 4 * 65
    assert result["events"] == result["read_floor"]["events"] == events
    for jobs in ("1", "2"):
        for part in ("replay_verify", "rederive"):
            figure = result[part][jobs]
            assert figure["events"] == events and figure["events_per_s"] > 0 and figure["cpu_us_per_event"] > 0
    assert result["chdb_insert_floor"]["rows"] == events and result["chdb_insert_floor"]["cpu_us_per_row"] > 0
    assert set(result["replay_rss_bytes"]) == {"4", "16"} and all(v > 0 for v in result["replay_rss_bytes"].values())
    assert len(format_lines(result)) == 5


def test_a_log_with_problems_is_no_benchmark(tmp_path):
    path = write_runs(tmp_path, 2)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01  # one byte of the last block's datums changed
    path.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="found problems"):
        replay_rates(path, None, jobs_list=(1,))
