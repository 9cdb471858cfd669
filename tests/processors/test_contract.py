"""The per-session memory contract, from events: the A/B benchmark's counts and ratios."""

from __future__ import annotations

import pytest

from tests.processors.test_failure_rules import ALL, RunBuilder, memory_run


def contract(run: RunBuilder) -> dict:
    (row,) = [r for r in run.derived("MemoryContract") if r["scored"]]
    return row


def test_counts_and_ratios():
    run = memory_run()
    run.task(injected=["m_rel", "m_other"], cited=["m_rel", "ghost"], outcome="fail")
    c = contract(run)
    assert c["injected_memory_ids"] == ["m_rel", "m_other"] and c["cited_memory_ids"] == ["m_rel", "ghost"]
    assert c["relevant_memory_ids"] == ["m_rel"] and c["stale_memory_ids"] == ["m_stale"]
    assert c["citation_precision"] == pytest.approx(0.5)  # one of two cited ids was injected
    assert c["citation_recall"] == pytest.approx(1.0)
    assert (c["stale_used_count"], c["irrelevant_injection_count"], c["missing_relevant_count"]) == (0, 1, 0)
    assert c["memory_contract_status"] == "failed" and c["runtime_contract_failure_reason"] == "cited_never_injected"
    assert c["memory_hurt"] and not c["memory_helped"]  # agent_hallucinated_memory is memory-specific


def test_resolved_with_stale_memory_cited_keeps_the_stale_use():
    run = memory_run()
    run.task(injected=ALL, cited=["m_rel", "m_stale"], outcome="pass")
    c = contract(run)
    assert c["resolved"] and c["stale_used_count"] == 1
    assert c["memory_contract_status"] == "failed" and c["runtime_contract_failure_reason"] == "stale_memory_used"
    assert c["memory_hurt"] and not c["memory_helped"]
    (f,) = [r for r in run.derived("FailureClassified") if r["scored"]]
    assert f["resolved"] and f["failure_reason"] is None  # task outcome and contract stay apart


def test_helped_when_resolved_with_a_relevant_citation():
    run = memory_run()
    run.task(injected=ALL, cited=["m_rel"], outcome="pass")
    c = contract(run)
    assert c["memory_contract_status"] == "passed" and c["memory_helped"] and not c["memory_hurt"]
    assert c["missing_relevant_count"] == 0 and c["irrelevant_injection_count"] == 1


def test_nothing_cited_means_precision_zero_and_no_relevant_means_recall_one():
    run = RunBuilder("B5")
    run.history(deliver={"e1": "m1"})
    run.task(injected=["m1"], outcome="fail")
    c = contract(run)
    assert c["citation_precision"] == 0.0 and c["citation_recall"] == 1.0


def test_memory_read_over_budget_fails_the_contract():
    run = memory_run()
    run.task(injected=ALL, cited=["m_rel"], outcome="pass", tokens_admitted=300, token_budget=100)
    assert contract(run)["runtime_contract_failure_reason"] == "memory_read_over_budget"


@pytest.mark.parametrize("condition,read", [("no_memory", False), ("curated_file", True)])
def test_conditions_without_learned_memory_are_not_applicable(condition, read):
    run = RunBuilder(condition)
    run.label("required", ["e_rel"])
    run.history(deliver={"e_rel": None})
    run.task(read=read, injected=["curated:MEMORY.md"] if read else [], cited=["curated:MEMORY.md"] if read else [],
             outcome="fail")
    c = contract(run)
    assert c["memory_contract_status"] == "not_applicable"
    assert c["citation_precision"] is None and c["injected_memory_ids"] == [] and not c["runtime_contract_failure"]
    assert not c["memory_helped"] and not c["memory_hurt"]
