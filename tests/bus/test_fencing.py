"""Fencing a stalled runner's attempt: the close another runner appends, read by the rule
the processors apply (`RunChain` beside `RunSetProcessor`), decides which attempt ended a run,
whatever the stalled runner publishes after it."""

from __future__ import annotations

import pytest

from membench.processors import RunSetProcessor
from membench.bus.attempts import RunChain, RunHead, closing_event
from membench.schemas.events import GENESIS_HASH
from tests.processors.test_verdicts import build_run


def _chain(events):
    chain = RunChain(events[0].run_set, events[0].run_id, events[0].unit_id)
    for event in events:
        chain.add(event)
    return chain.head


def _summaries(events):
    processor = RunSetProcessor()
    derived = [d for e in events for d in processor.apply(e)]
    assert processor.dead_letters == []
    return derived, [d.payload["status"] for d in derived if d.kind == "RunSummary"]


def _close_after(prefix):
    head = _chain(prefix)
    return closing_event(head)[0]


@pytest.mark.parametrize("k", [1, 9, 20])
def test_a_close_fences_what_the_stalled_runner_publishes_after_it(k):
    run = build_run()
    close = _close_after(run[:k])
    log = run[:k] + [close] + run[k:]  # the stalled runner resumes after the take-over
    head = _chain(log)
    assert (head.ended, head.status, head.end_event_id) == (True, "abandoned", close.event_id)
    assert head.fenced == len(run) - k and head.last_seq == k
    derived, statuses = _summaries(log)
    assert statuses == ["abandoned"]  # the stalled attempt's own RunEnded{completed} derives nothing
    assert all(d.payload.get("session_index", -1) < run[k].session_index or d.kind == "RunSummary"
               for d in derived if d.kind == "SessionVerdict")


def test_a_close_on_a_seq_already_taken_is_dropped_and_published_again_at_the_new_end():
    run = build_run()
    k = 9
    early = _close_after(run[:k])
    log = run[:k] + run[k:k + 3] + [early]  # the stalled runner resumed between the read and the close
    head = _chain(log)
    assert not head.ended and head.fenced == 1 and head.last_seq == k + 2
    assert _summaries(log)[1] == []
    again = closing_event(head)[0]
    log += [again] + run[k + 3:]
    head = _chain(log)
    assert (head.status, head.end_event_id) == ("abandoned", again.event_id)
    assert _summaries(log)[1] == ["abandoned"]


def test_the_stalled_runners_end_wins_when_it_lands_before_the_close():
    run = build_run()
    close = _close_after(run[:9])
    log = run + [close]
    head = _chain(log)
    assert (head.status, head.end_event_id, head.fenced) == ("completed", run[-1].event_id, 1)
    assert _summaries(log)[1] == ["completed"]


def test_an_attempt_without_events_is_closed_at_seq_0_and_everything_it_publishes_later_is_fenced():
    run = build_run()
    close, _ = closing_event(RunHead("rs", "r1", "suite/task/B5/1"))
    assert (close.seq, close.prev_hash) == (0, GENESIS_HASH)
    head = _chain([close] + run)
    assert (head.status, head.fenced, head.events) == ("abandoned", len(run), 1)
    derived, statuses = _summaries([close] + run)
    assert derived == [] and statuses == []  # a run closed before it started derives nothing, and is no error
