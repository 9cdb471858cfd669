"""The built-in `openai:` loop through `membench transfer`, the model scripted
(`membench.bench.scripted_model_server.ScriptedUpstream`: no model runs; its answers come from a script): the loop
solves the learning tasks from their instructions, distils a skill into /skills in each distillation
session (a `run` call through the real gateway, in bubblewrap), the learned bank is the agent's, and
in the transfer units the prompt the model receives says where the read-only bank is."""

from __future__ import annotations

import json

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.bus.attempts import read_log
from membench.formats.transfer_format import load_study
from tests.conftest import REPO, assert_run_sets_verify, run_cli

pytestmark = pytest.mark.integration
KEY = "sk-membench-test-transfer-0b7e"
STUDY = load_study(REPO / "fixtures" / "transfer-v1")


def _script() -> dict:
    sessions = []
    for task in STUDY.learning:
        sessions.append({"when": task.instruction, "files": dict(task.solution.files),
                         "slots": {n: {"pattern": s.pattern, "default": s.default} for n, s in task.solution.slots.items()},
                         "say": f"Done {task.task_id}."})
    sessions.append({"when": "Distillation session for learning task", "files": {
        "/skills/house-rules/SKILL.md": "# House rules\n\nLast learned from {{SLOT:task}}.\n"},
        "slots": {"task": {"pattern": r"learning task (\S+) \(", "default": "?"}}, "say": "Distilled."})
    return {"sessions": sessions}


def test_the_openai_loop_distils_into_skills_and_is_told_where_the_bank_is(tmp_path, bwrap_sandbox):
    home = tmp_path / "home"
    with ScriptedUpstream(_script()) as upstream:
        run_cli("transfer", "transfer-v1", "--agent", "openai:scripted", "--conditions", "no_memory,learned_bank",
                "--run-set", "loop-bank", "--model-base-url", upstream.base_url, home=home, check=True,
                env={"MEMBENCH_MODEL_API_KEY": KEY, "MEMBENCH_AGENT_WALL_S": "300"})
    assert_run_sets_verify(home, "loop-bank")
    events = [e for e, _ in read_log(home / "runs" / "loop-bank" / "events.avro")]
    learning = [e for e in events if "/learning/" in e.unit_id]
    assert [e.payload["outcome"] for e in learning if e.kind == "OracleVerdict"] == ["pass"] * 6
    writes = [e.payload for e in learning if e.kind == "MemoryWrite"]
    assert [w["memory_id"] for w in writes] == ["skill:house-rules"] * 6  # rewritten after every task
    assert writes[-1]["content"]["text"].endswith(f"Last learned from {STUDY.learning[-1].task_id}.\n")
    assert not [e for e in learning if e.kind == "Turn" and e.payload["source_kind"] == "skill_refused"]
    distilling = {e.session_index for e in learning if e.kind == "ModelCall"}
    assert distilling == set(range(6))
    frozen = {e.payload["bank"]: e.payload for e in learning if e.kind == "SkillBankFrozen"}
    assert frozen["learned"]["distiller"] == "agent"
    assert [f["path"] for f in frozen["learned"]["files"]] == ["house-rules/SKILL.md"]
    # L1-fees's session created house-rules: the ablated bank leaves it out
    assert STUDY.ablate_skill == STUDY.learning[0].task_id and frozen["ablated"]["files"] == []
    # transfer: the model is told where the bank is, and the unit runs against the frozen digest
    asked = [json.loads(r["body"]) for r in upstream.requests]
    told = [b for b in asked if "mounted read-only at /skills" in json.dumps(b)]
    # every learned_bank session's prompt (two units, each acting in each review round) and no other
    acts = [e for e in events if e.kind == "ToolCall" and e.payload["name"] == "agent_process"
            and "/learned_bank/" in e.unit_id]
    first_calls = [b for b in told if sum(m.get("role") == "assistant" for m in b["messages"]) == 0]
    assert len(first_calls) == len(acts) >= 2
    notes = [e.unit_id for e in events if e.kind == "Turn" and e.payload["source_kind"] == "skill_bank_mount"]
    assert sorted(notes) == sorted({e.unit_id for e in acts})
    ended = [e.payload for e in events if e.kind == "RunEnded" and "/learned_bank/" in e.unit_id]
    assert [p["status"] for p in ended] == ["completed", "completed"]
