"""A harness fault in the transfer runner: a harness exception once the agent was started closes the run
as completed (`harness_error:…`, a valid, failed cell); before, it is still the unit's error
(excluded) — the control that the flag, not the exception, decides."""

from __future__ import annotations

import pytest

from membench.bus.emitter import RunEmitter
from membench.gateway.server import ModelUnavailable
from membench.runner.grid import AFTER_VERDICT
from membench.transfer_protocol.transfer_units import _close, _Progress, _user_says, _user_says_after_verdict
from membench.reports.conventions import valid_run
from tests.warehouse.row_fixtures import typed_row


def _closed(acted: bool) -> tuple[dict, list]:
    events = []
    emitter = RunEmitter("rs", "run", "unit", lambda event, datum: events.append(event))
    progress = _Progress(agent_acted=acted)

    def body():
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")  # what a hostile name did

    _close(emitter, body, progress)
    return events[-1].payload, events


def test_after_the_agent_started_an_exception_is_a_failed_run():
    ended, events = _closed(acted=True)
    assert ended == {"status": "completed", "error_type": "harness_error:UnicodeEncodeError"}
    assert valid_run(typed_row("run_results", excluded=False, status=ended["status"]))
    assert any(e.kind == "Turn" and e.payload["source_kind"] == "harness_error" for e in events)


def test_control_before_the_agent_started_the_same_exception_excludes():
    ended, _ = _closed(acted=False)
    assert ended == {"status": "error", "error_type": "task_exception:UnicodeEncodeError"}
    assert not valid_run(typed_row("run_results", excluded=False, status=ended["status"]))


def test_a_harness_fault_proven_on_the_base_checkout_excludes_even_after_the_agent_started():
    # settle_harness_fault raises it only when the task's base checkout faults too (tests/runner/test_harness_fault.py)
    from membench.sandbox.scoring import HarnessFault

    events = []
    emitter = RunEmitter("rs", "run", "unit", lambda event, datum: events.append(event))

    def body():
        raise HarnessFault("No module named 'pytest', on the pack's base checkout too")

    _close(emitter, body, _Progress(agent_acted=True))
    assert events[-1].payload == {"status": "excluded", "error_type": "harness_fault"}
    assert any(e.kind == "Turn" and "No module named 'pytest'" in e.payload["text"]["text"] for e in events)


def test_a_user_model_down_after_the_verdict_leaves_a_note_not_an_exclusion():
    """The test feedback follows the run's OracleVerdict: its user model failing then (its probe
    too) is a harness note and the run goes on to complete; the control: the same failure in a
    user turn before the verdict propagates, which excludes the unit (`_conversation`)."""
    events = []
    emitter = RunEmitter("rs", "run", "unit", lambda event, datum: events.append(event))

    def down():
        raise ModelUnavailable("the upstream answered HTTP 503, and the gateway's own probe failed too")

    _user_says_after_verdict(emitter, down)
    (note,) = [e.payload for e in events if e.kind == "Turn"]
    assert note["source_kind"] == AFTER_VERDICT and "model_unavailable" in note["text"]["text"]
    with pytest.raises(ModelUnavailable):
        _user_says(emitter, down)
