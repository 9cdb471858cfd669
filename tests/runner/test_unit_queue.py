"""Unit orders (the units topic's JSON) and the rule a runner applies to a claimed unit."""

from __future__ import annotations

import json

import pytest

from membench.runner.unit_queue import Decision, Head, ModelOrder, OrderError, UnitOrder, decide
from membench.bus.topics import topics_from_dsn

ORDER = UnitOrder("rs1", "smoke", "d" * 64, "scripted:memory-literal", "bwrap", 2000, "smoke", "smoke-currency", "B5", 3)


def test_an_order_round_trips_through_its_json_form():
    assert UnitOrder.from_json(ORDER.to_json()) == ORDER
    assert ORDER.key == "rs1/smoke/smoke-currency/B5/3"
    assert json.loads(ORDER.to_json())["version"] == 1


MODEL = ModelOrder({"*": "http://127.0.0.1:8000/v1"}, record=True, memory_model="gpt-5-mini",
                   prices={"models": {"m": {"input": 1, "cached_input": 0.1, "output": 2}}}).to_dict()


def test_an_order_with_models_carries_their_settings_and_never_a_key(monkeypatch):
    monkeypatch.setenv("MEMBENCH_MODEL_API_KEY", "sk-never-on-the-topic")
    order = UnitOrder(*[getattr(ORDER, f) for f in ("run_set", "pack", "pack_digest", "agent", "sandbox",
                                                   "read_budget", "suite", "task", "condition", "seed")], model=MODEL)
    data = order.to_json()
    assert UnitOrder.from_json(data) == order and json.loads(data)["model"]["memory_model"] == "gpt-5-mini"
    assert b"sk-never" not in data
    assert "model" not in json.loads(ORDER.to_json())  # an order without models reads as before them


@pytest.mark.parametrize("field, value, message", [
    ("base_urls", ["http://x"], "field 'model': 'base_urls': expected dict"),
    ("max_steps", "50", "field 'model': 'max_steps': expected int"),
    ("api_key", "sk-1", r"field 'model': unknown field\(s\) api_key"),
])
def test_a_malformed_model_order_names_its_field(field, value, message):
    raw = {**json.loads(ORDER.to_json()), "model": {**MODEL, field: value}}
    with pytest.raises(OrderError, match=message):
        UnitOrder.from_json(json.dumps(raw).encode())


@pytest.mark.parametrize("field, value, message", [
    ("seed", "3", "field 'seed': expected int"),
    ("read_budget", True, "field 'read_budget': expected int"),
    ("agent", None, "field 'agent': expected str"),
    ("version", 2, "field 'version': 2, expected 1"),
])
def test_a_malformed_order_names_its_field(field, value, message):
    raw = json.loads(ORDER.to_json())
    raw[field] = value
    with pytest.raises(OrderError, match=message):
        UnitOrder.from_json(json.dumps(raw).encode())


def test_an_order_that_is_not_json_is_refused():
    with pytest.raises(OrderError, match="not JSON"):
        UnitOrder.from_json(b"\xff not json")
    with pytest.raises(OrderError, match="not a JSON object"):
        UnitOrder.from_json(b"[1, 2]")


def test_a_new_or_queued_unit_runs_its_first_attempt():
    assert decide(None, None) == Decision("run", 1)
    assert decide({"status": "queued", "run_id": "", "attempt": 0}, None) == Decision("run", 1)


@pytest.mark.parametrize("status", ["completed", "excluded"])
def test_a_complete_unit_is_skipped(status):
    decision = decide({"status": status, "run_id": "r1", "attempt": 1}, None)
    assert decision.action == "skip" and decision.finished_run is None


def test_a_started_attempt_left_open_in_the_log_is_closed_and_the_next_attempt_runs():
    decision = decide({"status": "started", "run_id": "r1", "attempt": 1}, Head("r1", 17, None))
    assert (decision.action, decision.attempt, decision.close) == ("run", 2, "r1")
    assert "seq 17" in decision.reason


def test_a_started_attempt_that_ended_in_the_log_is_marked_complete_not_run_again():
    decision = decide({"status": "started", "run_id": "r1", "attempt": 1}, Head("r1", 40, "completed"))
    assert (decision.action, decision.finished_run) == ("skip", "r1")
    # an error is an ended run too: the unit is not run a second time
    assert decide({"status": "started", "run_id": "r1", "attempt": 1}, Head("r1", 5, "error")).action == "skip"


def test_an_attempt_closed_already_is_not_closed_again():
    assert decide({"status": "started", "run_id": "r1", "attempt": 2}, Head("r1", 9, "abandoned")) == Decision("run", 3)
    assert decide({"status": "abandoned", "run_id": "r1", "attempt": 2}, Head("r1", 9, "abandoned")) \
        == Decision("run", 3)


@pytest.mark.parametrize("state", ["started", "abandoned"])
def test_an_attempt_without_events_is_closed_too_its_runner_may_only_be_stalled(state):
    decision = decide({"status": state, "run_id": "r1", "attempt": 2}, None)
    assert (decision.action, decision.attempt, decision.close) == ("run", 3, "r1")
    assert "no event" in decision.reason


def test_the_units_topic_is_namespaced_and_not_compacted():
    topics = topics_from_dsn("kafka://127.0.0.1:9092/study1")
    assert topics.units == "study1.membench.units"
    specs = topics.layout.specs(topics)
    assert topics.units in specs and "cleanup.policy" not in specs[topics.units]

