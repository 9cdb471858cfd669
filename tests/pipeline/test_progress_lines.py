"""Plain progress lines (membench/pipeline/progress_lines.py): the counts a redirected grid prints."""

from __future__ import annotations

import time
from types import SimpleNamespace

from membench.pipeline.progress_lines import PROGRESS_INTERVAL_ENV, PlainProgress, progress_interval


def _event(kind, run_id, session_index=-1, **payload):
    return SimpleNamespace(kind=kind, run_id=run_id, session_index=session_index, payload=payload)


def _unit(progress, run_id, scored_outcome=None, status="completed", earlier_outcome="pass"):
    """One unit's events: an unscored session that passes, then the scored one, then RunEnded."""
    progress.observe(_event("SessionStarted", run_id, 0, scored=False))
    progress.observe(_event("OracleVerdict", run_id, 0, outcome=earlier_outcome))
    progress.observe(_event("SessionStarted", run_id, 1, scored=True))
    if scored_outcome is not None:
        progress.observe(_event("OracleVerdict", run_id, 1, outcome=scored_outcome))
    progress.observe(_event("RunEnded", run_id, -1, status=status, error_type=None))
    progress.unit_done()


def test_counts_come_from_the_scored_verdict_and_the_run_end():
    clock = [100.0]
    lines = PlainProgress(4, say=lambda text: None, interval_s=0, clock=lambda: clock[0])
    _unit(lines, "r1", "pass")
    _unit(lines, "r2", "fail")  # an earlier session's pass does not count
    _unit(lines, "r3", None, status="excluded")
    clock[0] += 60.0
    line = lines.line()
    assert line.startswith("progress: 3/4 units (75%) · passed 1 · excluded 1 · 3.0 units/min")
    assert "ETA 20s" in line and "elapsed 1m00s" in line


def test_nothing_done_yet_has_no_eta_and_the_last_line_has_none_either():
    clock = [0.0]
    lines = PlainProgress(2, say=lambda text: None, interval_s=0, clock=lambda: clock[0])
    clock[0] = 5.0
    assert "ETA unknown" in lines.line()
    _unit(lines, "a", "pass")
    _unit(lines, "b", "pass")
    assert "ETA" not in lines.line() and "2/2 units (100%) · passed 2" in lines.line()


def test_lines_are_printed_every_interval_and_at_the_end():
    said: list[str] = []
    lines = PlainProgress(3, say=said.append, interval_s=0.05)
    with lines.running():
        time.sleep(0.3)
        _unit(lines, "a", "pass")
    assert len(said) >= 3  # several periodic lines, then the final one
    assert said[0].startswith("progress: 0/3 units")
    assert said[-1].startswith("progress: 1/3 units (33%) · passed 1 · excluded 0")


def test_interval_zero_prints_nothing():
    said: list[str] = []
    with PlainProgress(1, say=said.append, interval_s=0).running() as lines:
        _unit(lines, "a", "pass")
    assert said == []


def test_interval_from_the_environment(monkeypatch):
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "1.5")
    assert progress_interval() == 1.5
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "soon")
    assert progress_interval() == 30.0
    monkeypatch.delenv(PROGRESS_INTERVAL_ENV)
    assert progress_interval() == 30.0


def test_validate_counts_refused_traps():
    lines = PlainProgress(3, say=lambda text: None, interval_s=0, what="traps", passes=False)
    lines.add(excluded=True)
    lines.add()
    assert lines.line().startswith("progress: 2/3 traps (67%) · refused 1 · ")
