"""ModelUsageFold: a run's ModelCall events summed per purpose at its RunEnded — calls, priced calls
(those naming a price-table entry), tokens, the USD of every call and of the priced ones — the one
definition the report's cost, its memory policies and the viewer's totals share."""

from __future__ import annotations

from pathlib import Path

from membench.processors.model_usage import ModelTotals
from tests.processors.model_call_fixtures import model_call as call
from tests.processors.payload_reads import check_source
from tests.processors.test_transfer_fold import derived, events_of

REPO = Path(__file__).resolve().parents[2]


def test_calls_are_summed_per_purpose_and_only_priced_calls_count_as_priced():
    calls = [("ModelCall", call("a1", usd=0.25, price="m@2026")), ("ModelCall", call("a2", usd=0.5)),
             ("ModelCall", call("s1", purpose="sleep", tokens=7, usd=0.125, price="m@2026")),
             ("ModelCall", call("s2", purpose="sleep", tokens=3))]
    rows = {r["purpose"]: r for r in derived(events_of({}, extra=calls), "ModelUsage")}
    assert sorted(rows) == ["agent", "sleep"]
    agent, sleep = rows["agent"], rows["sleep"]
    assert (agent["calls"], agent["priced_calls"], agent["cost_usd"], agent["priced_cost_usd"]) == (2, 1, 0.75, 0.25)
    assert (sleep["calls"], sleep["priced_calls"], sleep["input_tokens"], sleep["output_tokens"]) == (2, 1, 10, 20)
    assert sleep["cost_usd"] == sleep["priced_cost_usd"] == 0.125 and agent["latency_ms"] == 10
    assert agent["condition"] == "learned_bank" and agent["unit_id"] == "study/proj/learned_bank/1"


def test_a_run_without_model_calls_derives_no_usage_and_a_run_is_summed_only_at_its_end():
    assert derived(events_of({}), "ModelUsage") == []
    unended = [e for e in events_of({}, extra=[("ModelCall", call("a1"))]) if e.kind != "RunEnded"]
    assert derived(unended, "ModelUsage") == []  # control: the same run with its RunEnded derives one row
    assert len(derived(events_of({}, extra=[("ModelCall", call("a1"))]), "ModelUsage")) == 1


def test_a_misspelt_cost_field_fails_the_payload_check_instead_of_costing_nothing():
    """SQL's JSONExtract read a missing field as 0; the fold's reads are checked against the
    ModelCall record (tests/processors/payload_reads.py), so a renamed field fails a test."""
    source = (REPO / "membench" / "processors" / "model_usage.py").read_text(encoding="utf-8")
    assert check_source(source, "model_usage.py").problems == [] and check_source(source, "model_usage.py").reads >= 8
    report = check_source(source.replace('"cost_usd", 0.0', '"usd", 0.0', 1), "model_usage.py")
    assert len(report.problems) == 1 and "usd" in report.problems[0], report.problems


def test_totals_add_every_call_and_the_priced_ones_apart():
    totals = ModelTotals()
    totals.add(call("a1", usd=0.5, price="p"))
    totals.add(call("a2", usd=0.25))
    assert (totals.calls, totals.priced_calls, totals.cost_usd, totals.priced_cost_usd) == (2, 1, 0.75, 0.5)
