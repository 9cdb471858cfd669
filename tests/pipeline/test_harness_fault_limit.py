"""The harness-fault limit of a grid (membench/pipeline/stopping.py): a grid whose oracle harness keeps
producing no outcome stops itself, naming the cause; a stray fault in a healthy grid does not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from membench.errors import EXIT_HARNESS_FAULTS, EXIT_STOPPED, stop_exit_status
from membench.pipeline.stopping import GridStop, HarnessFaultLimit


@pytest.fixture
def stop():
    said: list[str] = []
    grid = GridStop(grace_s=600, say=said.append)
    grid.said = said
    yield grid
    if grid._timer is not None:
        grid._timer.cancel()


def _unit(limit: HarnessFaultLimit, run_id: str, fault: str | None) -> None:
    if fault is not None:
        limit.observe(SimpleNamespace(kind="Turn", run_id=run_id,
                                      payload={"source_kind": "harness_fault", "text": {"text": fault}}))
    limit.observe(SimpleNamespace(kind="RunEnded", run_id=run_id, payload={
        "status": "excluded" if fault else "completed", "error_type": "harness_fault" if fault else None}))


def test_a_grid_whose_harness_keeps_faulting_stops_with_the_cause(stop):
    limit = HarnessFaultLimit(stop)
    _unit(limit, "r1", "No module named 'pytest'")
    _unit(limit, "r2", "No module named 'pytest'")
    assert not stop.asked  # two faults are not yet a pattern
    _unit(limit, "r3", "ModuleNotFoundError: No module named 'pytest'")
    assert stop.asked and stop.stopped == "harness_faults" and stop_exit_status(stop.stopped) == EXIT_HARNESS_FAULTS
    assert "3 of 3 units" in stop.cause and "No module named 'pytest'" in stop.cause
    assert any("no further unit starts" in line and "No module named 'pytest'" in line for line in stop.said)


def test_stray_faults_in_a_healthy_grid_do_not_stop_it(stop):
    limit = HarnessFaultLimit(stop)
    for i in range(57):
        _unit(limit, f"ok{i}", None)
    for i in range(3):  # 3 of 60 ended: 5 %, not over it
        _unit(limit, f"fault{i}", "the oracle's harness left no outcome record (exit status -9)")
    assert not stop.asked and stop.stopped is None and stop.cause is None
    _unit(limit, "fault3", "again")  # 4 of 61: over 5 %
    assert stop.asked and "4 of 61 units" in stop.cause


def test_a_signal_stop_keeps_its_exit_status(stop):
    stop.request("SIGTERM received")
    HarnessFaultLimit(stop, minimum=1).observe(SimpleNamespace(
        kind="RunEnded", run_id="r", payload={"status": "excluded", "error_type": "harness_fault"}))
    assert stop.cause is None and stop.stopped == "signal" and stop_exit_status(stop.stopped) == EXIT_STOPPED
