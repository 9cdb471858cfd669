"""Every failure_reason rule, each from a run's events, through the real processor pipeline."""

from __future__ import annotations

from typing import Any

import pytest

from membench.processors import derive_all
from membench.processors.failure import FAILURE_REASONS, RULES
from membench.schemas.events import Event, bounded_text


class RunBuilder:
    """Builds one run's raw events the way the runner emits them (no I/O, no sandbox)."""

    def __init__(self, condition: str = "B5", budgets: dict[str, int] | None = None, construct: str = "C1",
                 resolution_policy: str | None = None):
        self.events: list[Event] = []
        self.session = -1
        started = {"suite": "t", "task": "task-1", "condition": condition, "seed": 1, "agent": "scripted:test",
                   "agent_kind": "scripted", "model": None, "budgets": budgets or {"memory_read_tokens": 100},
                   "code_digest": "", "pack_digest": "", "fixture_digest": "", "construct": construct, "family": "f"}
        if resolution_policy is not None:  # absent: a log written before event v5
            started["resolution_policy"] = resolution_policy
        self.emit("RunStarted", started, "harness")

    def emit(self, kind: str, payload: dict[str, Any], visibility: str = "agent") -> Event:
        seq = len(self.events)
        event = Event(f"ev-{seq}", "rs", "run-1", "t/task-1/c/1", self.session, seq, seq, "test", kind, visibility,
                      "0" * 64, payload, f"{seq:064x}")
        self.events.append(event)
        return event

    def label(self, label_type: str, event_ids: list[str], active: int = 2, fact_ids: list[str] | None = None) -> None:
        self.emit("OracleLabel", {"label_id": f"{label_type}-{len(self.events)}", "label_type": label_type,
                                  "active_session": active, "event_ids": event_ids, "fact_ids": fact_ids or []},
                  "harness")

    def turn(self, role: str = "user", source: str | None = None, input_tokens: int = 0) -> Event:
        return self.emit("Turn", {"role": role, "text": bounded_text("x"), "source_event_id": source,
                                  "source_kind": "review" if source else None, "input_tokens": input_tokens,
                                  "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0})

    def history(self, index: int = 1, deliver: dict[str, str | None] | None = None,
                scope: dict[str, list[str]] | None = None) -> None:
        """A history session delivering pack events; `deliver` maps pack event id -> memory id
        the memory system stores from it (None: nothing stored)."""
        self.session = index
        self.emit("SessionStarted", {"session_index": index, "instruction": bounded_text("h"), "start_state": "clean",
                                     "workspace_digest": "", "scored": False, "oracle_id": None})
        self.emit("SessionEnded", {"session_index": index, "status": "history"})
        for pack_event, memory_id in (deliver or {}).items():
            turn = self.turn(source=pack_event)
            if memory_id:
                self.emit("MemoryWrite", {"memory_id": memory_id, "memory_type": "review",
                                          "scope": (scope or {}).get(memory_id, []),
                                          "provenance_event_ids": [turn.event_id], "content": bounded_text("m")})

    def task(self, index: int = 2, injected: list[str] | None = None, cited: list[str] | None = None,
             outcome: str | None = "pass", cases: list[tuple[str, str]] | None = None, status: str = "completed",
             read: bool = True, tokens_admitted: int = 10, token_budget: int = 100, inconclusive: bool = False,
             input_tokens: int = 0, files: list[str] | None = None, scored: bool = True,
             model_calls: list[str] = ()) -> None:
        self.session = index
        self.emit("SessionStarted", {"session_index": index, "instruction": bounded_text("do"), "start_state": "clean",
                                     "workspace_digest": "", "scored": scored, "oracle_id": "o"})
        if read:
            self.emit("MemoryRead", {"query": bounded_text("q"), "candidates": list(injected or []),
                                     "admitted_ids": list(injected or []), "tokens_admitted": tokens_admitted,
                                     "token_budget": token_budget, "context": bounded_text("c")})
        self.turn(role="agent", input_tokens=input_tokens)
        for i, call_status in enumerate(model_calls, 1):  # the agent's calls through the gateway
            self.emit("ModelCall", {"call_id": f"m{i}", "status": call_status, "input_tokens": 0, "purpose": "agent"},
                      "harness")
        if cited:
            self.emit("MemoryCitation", {"memory_ids": cited})
        self.emit("PatchProduced", {"files": files or ["pkg/a.py"], "added_lines": 1, "removed_lines": 0,
                                    "production_paths": files or ["pkg/a.py"], "test_paths": [], "stripped_paths": [],
                                    "diff_sha256": ""})
        if outcome is not None:
            self.emit("OracleVerdict", {"oracle_id": "o", "outcome": outcome,
                                        "cases": [{"case_id": c, "outcome": o} for c, o in (cases or [])],
                                        "exit_status": 0 if outcome == "pass" else 1, "inconclusive": inconclusive,
                                        "duration_ms": 1}, "harness")
        self.emit("SessionEnded", {"session_index": index, "status": status})

    def derived(self, kind: str) -> list[dict[str, Any]]:
        self.session = -1
        if self.events[-1].kind != "RunEnded":
            self.emit("RunEnded", {"status": "completed", "error_type": None}, "harness")
        return [d.payload for d in derive_all(self.events) if d.kind == kind]

    def classification(self) -> dict[str, Any]:
        (row,) = [r for r in self.derived("FailureClassified") if r["scored"]]
        return row


def memory_run(condition: str = "B5", budgets: dict[str, int] | None = None, stored: bool = True,
               resolution_policy: str | None = None) -> RunBuilder:
    """S1 delivers relevant, stale and other evidence, stored by the memory system as m_rel,
    m_stale, m_other; S2 is the task. Labels: e_rel required, e_stale forbidden."""
    run = RunBuilder(condition, budgets, resolution_policy=resolution_policy)
    run.label("required", ["e_rel"])
    run.label("forbidden", ["e_stale"])
    run.history(deliver={"e_rel": "m_rel" if stored else None, "e_stale": "m_stale", "e_other": "m_other"})
    return run


ALL = ["m_rel", "m_stale", "m_other"]

# rule name -> a scenario where it is the first rule that holds
SCENARIOS = {
    "no_oracle_verdict": lambda r: r.task(outcome=None),
    "oracle_inconclusive": lambda r: r.task(outcome="oracle_timeout", inconclusive=True),
    # What the agent produced fails the session under a named reason, ahead of the agent's
    # conduct and of the memory reasons (a cited ghost id would otherwise be agent_hallucinated_memory)
    "workspace_path_not_utf8": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="unencodable_workspace_path",
                                                status="timeout"),
    "workspace_over_limit": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="workspace_too_large"),
    "patch_over_limit": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="patch_too_large"),
    "scoring_failed_only_on_agent_tree": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="patch_broke_scoring"),
    # a model request of the agent's that the upstream kept failing while the gateway's probe of the
    # configured model was answered, and a request a replay does not hold: the agent's, ahead of its timeout
    "model_request_failed": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="fail", status="timeout",
                                             model_calls=["ok", "request_failed"]),
    "model_replay_diverged": lambda r: r.task(injected=ALL, outcome="fail", model_calls=["ok", "replay_miss"]),
    "harness_exception_after_agent_started": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="harness_error",
                                                              status="error"),
    "agent_timeout": lambda r: r.task(outcome="fail", status="timeout"),
    "memory_read_over_budget": lambda r: r.task(injected=ALL, outcome="fail", tokens_admitted=500, token_budget=100),
    "agent_input_over_budget": lambda r: r.task(injected=ALL, outcome="fail", input_tokens=9000),
    "agent_reported_context_overflow": lambda r: r.task(outcome="fail", status="context_overflow"),
    "path_rule_violated": lambda r: r.task(injected=ALL, cited=["ghost"], outcome="fail",
                                           cases=[("path:README.md", "fail"), ("command:0", "pass")]),
    "git_edit_rejected": lambda r: r.task(outcome="production_patch_apply_failed"),
    "cited_never_injected": lambda r: r.task(injected=ALL, cited=["m_rel", "ghost"], outcome="fail"),
    "stale_memory_cited": lambda r: r.task(injected=ALL, cited=["m_rel", "m_stale"], outcome="fail"),
    "forbidden_pattern_with_stale_evidence": lambda r: r.task(injected=ALL, outcome="fail",
                                                              cases=[("pattern:forbidden:old_api(", "fail")]),
    "relevant_memory_not_injected": lambda r: r.task(injected=["m_other"], outcome="fail"),
    "relevant_injected_not_cited": lambda r: r.task(injected=ALL, outcome="fail"),
    "irrelevant_memory_cited": lambda r: r.task(injected=ALL, cited=["m_rel", "m_other"], outcome="fail"),
    "production_file_does_not_compile": lambda r: r.task(injected=ALL, cited=["m_rel"], outcome="fail",
                                                         cases=[("compile:pkg/a.py", "error"), ("command:0", "fail")]),
    "patch_pattern_violated": lambda r: r.task(injected=ALL, cited=["m_rel"], outcome="fail",
                                               cases=[("pattern:required:MEM-", "fail"), ("command:0", "pass")]),
    "oracle_not_passed": lambda r: r.task(injected=ALL, cited=["m_rel"], outcome="fail"),
}


@pytest.mark.parametrize("rule", list(SCENARIOS))
def test_each_rule_fires_first_on_its_scenario(rule):
    run = memory_run(budgets={"memory_read_tokens": 100, "context_tokens": 4000})
    SCENARIOS[rule](run)
    row = run.classification()
    expected = next(r for r in RULES if r.name == rule)
    assert (row["failure_reason"], row["rule"]) == (expected.reason, rule)
    assert row["resolved"] is False and row["memory_failure"] == (expected.reason in {
        "agent_hallucinated_memory", "stale_memory_followed", "missing_memory", "ignored_memory",
        "irrelevant_memory_distracted"})


def test_relevant_evidence_never_stored_is_missing_memory():
    run = memory_run(stored=False)  # e_rel delivered, the memory system kept nothing of it
    run.task(injected=["m_stale", "m_other"], outcome="fail")
    row = run.classification()
    assert (row["failure_reason"], row["rule"]) == ("missing_memory", "relevant_evidence_never_stored")


def test_every_rule_and_reason_has_a_scenario():
    assert {r.name for r in RULES} == set(SCENARIOS) | {"relevant_evidence_never_stored"}
    assert {r.reason for r in RULES} == set(FAILURE_REASONS)
    # the declared order is the enum's first-match order
    order = [FAILURE_REASONS.index(r.reason) for r in RULES]
    assert order == sorted(order)


def test_a_passing_session_is_resolved_even_with_memory_noise():
    run = memory_run()
    run.task(injected=ALL, cited=["m_other"], outcome="pass")
    row = run.classification()
    assert row["resolved"] and row["failure_reason"] is None and row["rule"] is None


def test_a_wrong_file_fails_even_when_the_tests_pass():
    run = memory_run()
    run.task(injected=ALL, cited=["m_rel"], outcome="fail", cases=[("path:setup.py", "fail"), ("command:0", "pass")])
    assert run.classification()["failure_reason"] == "wrong_file_modified"


def test_memory_rules_need_an_applicable_contract():
    run = RunBuilder("B0")
    run.label("forbidden", ["e_stale"])
    run.history(deliver={"e_stale": None})
    run.task(read=False, outcome="fail", cases=[("pattern:forbidden:old_api(", "fail")])
    row = run.classification()
    assert (row["failure_reason"], row["rule"]) == ("test_failure", "patch_pattern_violated")


@pytest.mark.parametrize("condition", ["no_memory", "B0"])
def test_a_no_memory_run_citing_a_memory_fails_as_a_task_failure(condition):
    # the A/B bench: a run without memory has a not_applicable contract and fails only as a task
    run = RunBuilder(condition)
    run.task(read=False, cited=["memory:#7"], outcome="fail")
    row = run.classification()
    assert (row["failure_reason"], row["rule"], row["memory_failure"]) == ("test_failure", "oracle_not_passed", False)
    (contract,) = [c for c in run.derived("MemoryContract") if c["scored"]]
    assert contract["memory_contract_status"] == "not_applicable"


def test_a_hallucinated_citation_under_an_applicable_contract_is_a_memory_failure():
    run = memory_run()
    run.task(injected=ALL, cited=["ghost"], outcome="fail")
    row = run.classification()
    assert (row["failure_reason"], row["memory_failure"]) == ("agent_hallucinated_memory", True)


def test_no_memory_reason_when_every_model_call_of_the_agent_failed():
    """The agent received the memory but never had a model answer to act on (all its calls refused):
    the session fails as a task, not as `ignored_memory`; one answered call is enough to judge it."""
    run = memory_run()
    run.task(injected=ALL, outcome="fail", model_calls=["client_error", "client_error"])
    row = run.classification()
    assert (row["failure_reason"], row["memory_failure"]) == ("test_failure", False)
    (contract,) = [c for c in run.derived("MemoryContract") if c["scored"]]
    assert contract["memory_contract_status"] == "not_applicable"
    control = memory_run()
    control.task(injected=ALL, outcome="fail", model_calls=["ok", "client_error"])
    assert control.classification()["failure_reason"] == "ignored_memory"


@pytest.mark.parametrize("outcome", ["isolation_unavailable", "harness_fault"])
def test_a_fault_proven_on_the_base_checkout_is_excluded_not_failed(outcome):
    run = memory_run()
    run.task(outcome=outcome)
    row = run.classification()
    assert row["excluded"] and not row["resolved"] and row["failure_reason"] is None
    control = memory_run()  # the oracle's `fail` the runner keeps when the base checkout did not fault
    control.task(outcome="fail")
    failed = control.classification()
    assert not failed["excluded"] and not failed["resolved"] and failed["failure_reason"] is not None


def test_history_sessions_get_no_classification():
    run = memory_run()
    run.task(injected=ALL, cited=["m_rel"], outcome="pass")
    assert [r["session_index"] for r in run.derived("FailureClassified")] == [2]


# The A/B benchmark's packs (RunStarted policy agent_must_finish) follow its published
# taxonomy: a run shown memory is judged for citing an id that memory never held, contract or not.
CURATED = ["curated:MEMORY.md"]


@pytest.mark.parametrize("policy,cited,expected", [
    ("agent_must_finish", ["7"], ("agent_hallucinated_memory", "cited_never_injected", True)),
    ("agent_must_finish", CURATED, ("test_failure", "oracle_not_passed", False)),  # cites what it was shown
    ("patch_as_submitted", ["7"], ("test_failure", "oracle_not_passed", False)),  # control: membench's own rule
])
def test_an_ab_curated_file_run_citing_an_id_it_never_held_is_hallucinated(policy, cited, expected):
    run = RunBuilder("curated_file", resolution_policy=policy)
    run.task(injected=CURATED, cited=cited, outcome="fail")
    row = run.classification()
    assert (row["failure_reason"], row["rule"], row["memory_failure"]) == expected
    (contract,) = [c for c in run.derived("MemoryContract") if c["scored"]]
    # the published artifact contract: curated_file's memory_contract_status is not_applicable
    assert contract["memory_contract_status"] == "not_applicable" and contract["cited_memory_ids"] == []


def test_an_ab_no_memory_run_citing_a_memory_still_fails_as_a_task_failure():
    run = RunBuilder("no_memory", resolution_policy="agent_must_finish")
    run.task(read=False, cited=["1"], outcome="fail")
    row = run.classification()
    assert (row["failure_reason"], row["memory_failure"]) == ("test_failure", False)


@pytest.mark.parametrize("policy,passes", [("patch_as_submitted", True), ("agent_must_finish", False)])
def test_a_failed_model_request_is_agent_conduct(policy, passes):
    """The patch decides under the native policy (a passing session stays resolved; the call stays in
    the log), the A/B packs' policy fails it, as it does a timeout."""
    run = memory_run(resolution_policy=policy)
    run.task(injected=ALL, cited=["m_rel"], outcome="pass", model_calls=["request_failed"])
    row = run.classification()
    assert row["resolved"] is passes
    assert row["rule"] == (None if passes else "model_request_failed")


def test_an_exclusion_after_the_scored_verdict_leaves_the_cell_as_scored():
    """Whatever runner wrote it, a run that ended `excluded` once its scored session had a verdict
    keeps its cell: the verdict stands. The control: the same end before the scored session has a
    verdict excludes the unit."""
    after = memory_run()
    after.task(injected=ALL, cited=["m_rel"], outcome="fail")
    after.session = -1
    after.emit("RunEnded", {"status": "excluded", "error_type": "model_unavailable"}, "harness")
    (summary,) = after.derived("RunSummary")
    assert (summary["status"], summary["excluded"], summary["scored_passed"]) == ("completed", False, False)
    assert summary["error_type"] == "model_unavailable"  # the reason stays visible

    before = memory_run()
    before.session = -1
    before.emit("RunEnded", {"status": "excluded", "error_type": "model_unavailable"}, "harness")
    (summary,) = before.derived("RunSummary")
    assert (summary["status"], summary["excluded"], summary["exclusion_reason"]) == (
        "excluded", True, "model_unavailable")
