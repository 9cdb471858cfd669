"""The transfer conversation in the real bubblewrap sandbox, one unit at a time: the simulated user
answers an agent's question from the scenario; a workspace changed after the passing public check
is an error, not evaluated; the evaluator blocks cases whose prerequisite failed."""

from __future__ import annotations

from pathlib import Path

import pytest

import membench.transfer_protocol.transfer_units as transfer_runner
from membench.agents.base import AgentOutcome
from membench.agents.scripted import RefsolAgent, _say
from membench.runner.grid import RunConfig, RunUnit
from membench.transfer_protocol.evaluator import freeze_submission, run_evaluator
from membench.transfer_protocol.transfer_units import run_transfer
from membench.transfer_protocol.user import ScriptedUser
from membench.formats.transfer_format import load_study

STUDY = load_study(Path(__file__).parents[2] / "fixtures" / "transfer-v1")


class AskingAgent(RefsolAgent):
    """Asks about the house rules first, then applies the reference solution."""

    name = "test:asking"

    def __init__(self):
        self.calls = 0

    def act(self, task, emitter):
        self.calls += 1
        if self.calls == 1:
            _say(emitter, "Which house rule applies to fees?", 0)
            return AgentOutcome()
        return super().act(task, emitter)


def _run(unit, agent, sandbox):
    events = []
    run_transfer(STUDY, unit, RunConfig("rs", agent.name), sandbox, lambda e, d: events.append(e), agent, None)
    return events


def test_the_user_answers_a_question_from_the_scenario(bwrap_sandbox):
    agent = AskingAgent()
    events = _run(RunUnit("transfer-v1", "settle", "no_memory", 1), agent, bwrap_sandbox)
    user = [e.payload["text"]["text"] for e in events if e.kind == "Turn" and e.payload["role"] == "simulated_user"]
    assert user[0] == STUDY.project("settle").scenario.plan
    assert user[1] == ScriptedUser(STUDY.project("settle").scenario).answer("Which house rule applies to fees?")
    assert "house rules" in user[1] and agent.calls == 2
    statuses = [e.payload["status"] for e in events if e.kind == "EvaluatorCase"]
    assert statuses.count("passed") == len(statuses) - 1  # all but the V1 case
    assert events[-1].payload == {"status": "completed", "error_type": None}
    (verdict,) = [e.payload for e in events if e.kind == "OracleVerdict"]
    assert verdict["outcome"] == "pass" and verdict["isolation"] == "process" and len(verdict["cases"]) == 41


def test_a_workspace_changed_after_the_passing_check_is_an_error(bwrap_sandbox, monkeypatch):
    real = transfer_runner.public_check

    def check_then_touch(sandbox, workspace, check, timeout_s):
        result = real(sandbox, workspace, check, timeout_s)
        (Path(workspace) / "settle" / "late.py").write_text("X = 1\n")  # a background process writing on
        return result

    monkeypatch.setattr(transfer_runner, "public_check", check_then_touch)
    events = _run(RunUnit("transfer-v1", "settle", "no_memory", 1), RefsolAgent(), bwrap_sandbox)
    assert [e.payload["passed"] for e in events if e.kind == "PublicCheck"] == [True]
    assert not [e for e in events if e.kind in ("SubmissionFrozen", "EvaluatorCase")]
    assert events[-1].payload == {"status": "error", "error_type": "workspace_changed_after_public_check"}


@pytest.mark.parametrize("project", ["settle", "jobqueue"])
def test_the_starting_point_blocks_cases_behind_failed_prerequisites(bwrap_sandbox, tmp_path, project):
    p = STUDY.project(project)
    freeze_submission(p.workspace, tmp_path / "frozen")
    results = {r.case_id: r for r in run_evaluator(bwrap_sandbox, tmp_path / "frozen", p.evaluator, 60)}
    for case in p.evaluator.cases:
        got = results[case.case_id]
        if "V1" in case.prerequisites:
            assert got.status == "not_applicable"
        elif any(results[q].status != "passed" for q in case.prerequisites if q in results):
            assert got.status == "blocked"
        else:
            assert got.status in ("passed", "failed", "error") and len(got.evidence_sha256) == 64
    assert any(r.status == "blocked" for r in results.values()) and any(r.status == "passed" for r in results.values())
