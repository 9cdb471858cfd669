"""What the signals do to a grid (membench/pipeline/stopping.py), the pipeline's part: the first asks a stop,
the second kills, the third calls the hard exit its caller gave (the CLI's ends the process,
membench/errors.py `hard_exit`); the pipeline itself ends nothing: without one it raises
KeyboardInterrupt, as Python's own SIGINT handler does."""

from __future__ import annotations

import signal

import pytest

from membench.pipeline.stopping import GridStop


def _three_signals(stop: GridStop) -> None:
    stop._handle(signal.SIGINT, None)
    assert stop.asked and stop.stopped == "signal" and not stop.killed.is_set()
    stop._handle(signal.SIGTERM, None)
    assert stop.killed.wait(5)  # the kill runs on a thread of its own; the hooks first
    stop._handle(signal.SIGINT, None)


def test_a_third_signal_calls_the_callers_hard_exit():
    said: list[str] = []
    called: list[str] = []
    stop = GridStop(600, say=said.append, hard_exit=lambda: called.append("hard exit"))
    stop.on_kill.append(lambda: called.append("fenced"))
    try:
        _three_signals(stop)
    finally:
        stop._timer.cancel()
    assert called == ["fenced", "hard exit"]
    assert any("SIGTERM received again" in line for line in said)


def test_without_a_hard_exit_a_third_signal_interrupts_the_caller_and_ends_nothing():
    stop = GridStop(600, say=lambda text: None)
    try:
        with pytest.raises(KeyboardInterrupt):
            _three_signals(stop)
    finally:
        stop._timer.cancel()
