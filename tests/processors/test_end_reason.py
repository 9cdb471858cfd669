"""EndReasonFold: why a run ended, in its own words — the first run-level system Turn the runner
writes for an excluded or failed run — as one `RunEndReason` row (the report's exclusion reasons)."""

from __future__ import annotations

from membench.schemas.events import bounded_text
from tests.processors.test_transfer_fold import derived, events_of


def system_turn(text: str):
    return ("Turn", {"role": "system", "text": bounded_text(text)})


def test_the_first_run_level_system_turn_is_the_reason():
    events = events_of({}, ended="excluded", error="model_unavailable",
                       extra=[system_turn("upstream said 503"), system_turn("a second note")])
    assert all(e.session_index == -1 for e in events if e.kind == "Turn")  # run-level, as the runner writes them
    (reason,) = derived(events, "RunEndReason")
    assert reason["text"] == "upstream said 503" and reason["run_id"] == "r1"


def test_a_run_without_a_system_turn_has_no_reason_and_an_agent_turn_is_not_one():
    assert derived(events_of({}), "RunEndReason") == []
    agent = ("Turn", {"role": "agent", "text": bounded_text("done")})
    assert derived(events_of({}, extra=[agent]), "RunEndReason") == []  # control: the role decides
