"""RunSetProcessor's memory is bounded: ended run ids live in a window of at
least the last `ended_window` runs to end (at most twice as many); inside it a redelivered event is a duplicate, beyond it the run
is derived again with the same deterministic ids."""

import pytest

from membench.processors import RunSetProcessor
from membench.processors.run_set_processor import ENDED_WINDOW
from tests.processors.test_verdicts import build_run


def _fold(processor, events):
    return [d for e in events for d in processor.apply(e)]


def test_the_ended_window_holds_only_the_last_runs():
    processor = RunSetProcessor(ended_window=5)
    for i in range(40):
        _fold(processor, build_run(("pass",), run_id=f"r{i}"))
    assert 5 <= processor.ended_remembered() <= 10
    assert processor.open_runs() == []
    assert not any(processor.is_new(f"r{i}") for i in range(35, 40))  # the last five: always
    assert all(processor.is_new(f"r{i}") for i in range(30))  # beyond twice the window: never


def test_redelivery_inside_the_window_derives_nothing():
    processor = RunSetProcessor(ended_window=3)
    runs = [build_run(("pass", "fail"), run_id=f"r{i}") for i in range(3)]
    for events in runs:
        _fold(processor, events)
    duplicates = processor.duplicates
    assert _fold(processor, runs[0][4:]) == []  # a suffix of the oldest run still in the window
    assert processor.duplicates == duplicates + len(runs[0]) - 4


def test_beyond_the_window_a_redelivered_run_is_derived_again_with_the_same_ids():
    processor = RunSetProcessor(ended_window=2)
    first = build_run(("pass", "fail"), run_id="old")
    derived = _fold(processor, first)
    for i in range(3):  # pushes "old" out of the window
        _fold(processor, build_run(("pass",), run_id=f"n{i}"))
    assert processor.is_new("old")
    again = _fold(processor, first)
    assert [d.derived_id for d in again] == [d.derived_id for d in derived]
    assert processor.open_runs() == []  # folded to its end again, nothing left open


def test_dead_letters_are_taken_not_accumulated():
    import dataclasses

    events = build_run()
    broken = dataclasses.replace(events[1], payload={"session_index": 1})
    processor = RunSetProcessor()
    _fold(processor, [events[0], broken])
    assert [d.seq for d in processor.take_dead_letters()] == [1]
    assert processor.take_dead_letters() == [] and processor.dead_letters == []


def test_the_default_window_is_bounded_and_none_means_unbounded():
    assert RunSetProcessor().ended_window == ENDED_WINDOW
    processor = RunSetProcessor(ended_window=None)
    for i in range(20):
        _fold(processor, build_run(("pass",), run_id=f"r{i}"))
    assert processor.ended_remembered() == 20
    with pytest.raises(ValueError):
        RunSetProcessor(ended_window=0)
