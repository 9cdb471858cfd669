"""One rule decides a session's resolution: the verdict fold
(SessionVerdict.passed, RunSummary.scored_passed) and the failure taxonomy
(FailureClassified.resolved / failure_reason) agree under either resolution policy."""

from __future__ import annotations

import pytest

from membench.processors.failure import RULES
from tests.processors.test_failure_rules import ALL, SCENARIOS, memory_run

POLICIES = ("patch_as_submitted", "agent_must_finish")


def outcome_of(run):
    """(scored SessionVerdict.passed, RunSummary.scored_passed, FailureClassified row)."""
    (row,) = [r for r in run.derived("FailureClassified") if r["scored"]]
    (session,) = [s for s in run.derived("SessionVerdict") if s["scored"]]
    (summary,) = run.derived("RunSummary")
    return session["passed"], summary["scored_passed"], row


@pytest.mark.parametrize("status,reason", [("timeout", "timeout"), ("context_overflow", "over_context_budget")])
def test_agent_must_finish_fails_a_passing_patch_whose_agent_did_not_finish(status, reason):
    run = memory_run(resolution_policy="agent_must_finish")
    run.task(injected=ALL, cited=["m_rel"], outcome="pass", status=status)
    passed, scored_passed, row = outcome_of(run)
    assert (passed, scored_passed, row["resolved"], row["failure_reason"]) == (False, False, False, reason)


@pytest.mark.parametrize("policy", ["patch_as_submitted", None])  # None: a log written before event v5
@pytest.mark.parametrize("status", ["timeout", "context_overflow"])
def test_patch_as_submitted_scores_the_patch_whatever_the_agent_status(policy, status):
    run = memory_run(resolution_policy=policy)
    run.task(injected=ALL, cited=["m_rel"], outcome="pass", status=status)
    passed, scored_passed, row = outcome_of(run)
    assert (passed, scored_passed, row["resolved"], row["failure_reason"], row["rule"]) == (True, True, True, None,
                                                                                            None)


@pytest.mark.parametrize("policy", POLICIES)
def test_over_budget_agent_input_follows_the_policy(policy):
    run = memory_run(budgets={"memory_read_tokens": 100, "context_tokens": 4000}, resolution_policy=policy)
    run.task(injected=ALL, cited=["m_rel"], outcome="pass", input_tokens=9000)
    passed, _, row = outcome_of(run)
    assert passed is (policy == "patch_as_submitted")
    assert row["failure_reason"] == (None if policy == "patch_as_submitted" else "over_context_budget")


@pytest.mark.parametrize("policy", POLICIES)
def test_a_failing_session_keeps_its_first_reason_under_either_policy(policy):
    run = memory_run(resolution_policy=policy)
    run.task(outcome="fail", status="timeout")
    passed, _, row = outcome_of(run)
    assert (passed, row["failure_reason"], row["rule"]) == (False, "timeout", "agent_timeout")


PASSING_VARIANTS = {
    "clean": lambda r: r.task(injected=ALL, cited=["m_rel"], outcome="pass"),
    "timeout": lambda r: r.task(injected=ALL, cited=["m_rel"], outcome="pass", status="timeout"),
    "context_overflow": lambda r: r.task(injected=ALL, outcome="pass", status="context_overflow"),
    "memory_over_budget": lambda r: r.task(injected=ALL, outcome="pass", tokens_admitted=500, token_budget=100),
    "input_over_budget": lambda r: r.task(injected=ALL, outcome="pass", input_tokens=9000),
    "inconclusive_pass": lambda r: r.task(injected=ALL, outcome="pass", inconclusive=True),
    "ghost_citation": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="pass"),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scenario", list(SCENARIOS) + [f"pass:{k}" for k in PASSING_VARIANTS])
def test_session_results_and_failures_never_disagree(policy, scenario):
    run = memory_run(budgets={"memory_read_tokens": 100, "context_tokens": 4000}, resolution_policy=policy)
    (PASSING_VARIANTS[scenario[5:]] if scenario.startswith("pass:") else SCENARIOS[scenario])(run)
    passed, scored_passed, row = outcome_of(run)
    assert passed == scored_passed == row["resolved"]
    assert (row["failure_reason"] is None) == row["resolved"]


def test_only_agent_conduct_rules_depend_on_the_policy():
    assert {r.name for r in RULES if r.agent_conduct} == {
        "agent_timeout", "memory_read_over_budget", "agent_input_over_budget", "agent_reported_context_overflow",
        "model_request_failed", "model_replay_diverged"}
