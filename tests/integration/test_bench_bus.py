"""`membench bench bus` on the real broker: the figures it reports count every event once."""

from __future__ import annotations

import json

import pytest

from membench.bench.bus import synthetic_run
from membench.processors import derive_all
from membench.bus.emitter import RunEmitter
from tests.conftest import run_cli
from tests.integration.kafka_helpers import SINGLE, require_broker

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def test_bench_bus_reports_every_event_through_every_stage(home):
    require_broker(SINGLE)
    # 20 runs: 1,300 events, more than one consumer batch of 500, so the floors have a rate
    proc = run_cli("bench", "bus", "--bus", f"kafka://{SINGLE}", "--runs", "20", "--threads", "2",
                   "--engine-runs", "10", "--memory-runs", "500", "--replay-runs", "10", "--json", home=home,
                   timeout=1200)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    kafka, embedded = result["kafka"], result["embedded"]
    events = 20 * (2 + 3 * (5 + 2 * 8))  # the synthetic run: 3 sessions of 8 turns
    assert kafka["events"] == kafka["sink_raw"] == embedded["events"] == events
    assert kafka["sink_derived"] == 20 * _derived_per_run()
    for figure in ("emit_cpu_median_us", "emit_wall_median_us", "produce_events_per_s", "end_to_end_events_per_s",
                   "faust_noop_messages_per_s", "kafka_consumer_messages_per_s"):
        assert kafka[figure] > 0, figure
    assert kafka["emit_cpu_median_us"] <= kafka["emit_cpu_p95_us"]
    assert all(us > 0 for us in kafka["cpu_us_per_event"].values()), kafka["cpu_us_per_event"]
    assert 0 < kafka["machine_busy_fraction"] <= 1
    assert result["emit_alone"]["events"] >= 20_000
    # end to end with 1 and 2 kafka-engine workers and 1 faust worker: every event through each
    assert [(e["engine"], e["workers"]) for e in result["end_to_end"]] == [("kafka", 1), ("kafka", 2), ("faust", 1)]
    for e2e in result["end_to_end"]:
        assert e2e["events"] == e2e["sink_raw"] == events and e2e["sink_derived"] == 20 * _derived_per_run()
        assert e2e["ceiling_events_per_s"] > 0
    engines = result["engines"]
    assert engines["events"] == 10 * 65 and engines["in_process"]["derived"] == 10 * _derived_per_run()
    for engine in ("kafka", "faust"):
        drain = engines["drain"][engine]
        assert drain["events"] == 9 * 65 and drain["cpu_us_per_event"] > 0  # one run drained untimed first
    for floor in ("decode_us", "sha256_us", "fold_us", "derived_encode_us"):
        assert engines["in_process"][floor] > 0, floor
    assert engines["kafka_consumer"]["cpu_us_per_message"] > 0 and engines["faust_noop"]["cpu_us_per_message"] > 0
    assert engines["ratios"]["kafka_engine_over_floor"] > 0 and engines["ratios"]["faust_engine_rate_over_noop"] > 0
    memory = result["worker_memory"]
    assert memory["runs"] == 500 and memory["open_runs"] == 0 and memory["rss_bytes"]["500"] > 0
    replay = result["replay"]  # the figures themselves: tests/bench/test_bench_replay.py
    assert replay["events"] == 10 * 65 and set(replay["replay_verify"]) == set(replay["rederive"]) == {"1", "2"}


def _derived_per_run() -> int:
    """What the pure processors derive from one synthetic run, in process."""
    emitter = RunEmitter("bench", "r", "bench/t/B5/0", lambda event, datum: None)
    synthetic_run(emitter, 3, 8)
    return len(derive_all(emitter.emitted))
