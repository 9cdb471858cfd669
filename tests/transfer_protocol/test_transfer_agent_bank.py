"""Skill banks seen by a sandboxed agent (docs/transfer.md, membench/transfer_protocol/agent_bank.py), with a
real command agent (tests/fixtures/agents/skill_agent.py) in the real bubblewrap sandbox (and, for the
read-only mount, podman through the Docker API): the agent
distils its own skills (bad entries refused and recorded, the run goes on), the frozen bank is
mounted read-only at /skills in a transfer unit (a write fails inside the jail, the unit is not
excluded), and a bank tampered with on the host still excludes the unit."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from membench.agents.command import CommandAgent
from membench.agents.scripted import RefsolAgent
from membench.memory_systems.skill_bank import MANIFEST
from membench.runner.grid import RunConfig, RunUnit
from membench.transfer_protocol.agent_bank import MAX_ENTRIES, MAX_SKILL_BYTES, collect
from membench.transfer_protocol.transfer_units import FrozenBank, bank_dir, run_learning, run_transfer
from membench.formats.transfer_format import load_study

STUDY = load_study(Path(__file__).parents[2] / "fixtures" / "transfer-v1")
AGENT = Path(__file__).parents[1] / "fixtures" / "agents" / "skill_agent.py"
SHORT = dataclasses.replace(STUDY, learning=STUDY.learning[:2])  # two learning tasks keep the test short


def _events(run, *args):
    events = []
    run(*args[:4], lambda e, d: events.append(e), *args[4:])
    return events


def _learn(tmp_path, sandbox, agent):
    return _events(run_learning, SHORT, 1, RunConfig("rs", agent.name), sandbox, agent, tmp_path / "banks")


def _texts(events, source_kind=None, role=None):
    return [e.payload["text"]["text"] for e in events if e.kind == "Turn"
            and (source_kind is None or e.payload["source_kind"] == source_kind)
            and (role is None or e.payload["role"] == role)]


# ------------------------------------------------------------------------------ validation (no sandbox)
def test_collect_keeps_plain_skills_and_refuses_the_rest(tmp_path):
    bank, staging = tmp_path / "bank", tmp_path / "staging"
    (bank / "old").mkdir(parents=True)
    (bank / "old" / "SKILL.md").write_text("old skill")
    (bank / "kept").mkdir()
    (bank / "kept" / "SKILL.md").write_text("unchanged")
    (staging / "kept").mkdir(parents=True)
    (staging / "kept" / "SKILL.md").write_text("unchanged")
    (staging / "new").mkdir()
    (staging / "new" / "SKILL.md").write_text("a new skill ✓")
    (staging / "big").mkdir()
    (staging / "big" / "SKILL.md").write_text("x" * (MAX_SKILL_BYTES + 1))
    (staging / "bin").mkdir()
    (staging / "bin" / "SKILL.md").write_bytes(b"\xff\xfe")
    (staging / "link").mkdir()
    (staging / "link" / "SKILL.md").symlink_to(bank / "old" / "SKILL.md")
    (staging / "escape").symlink_to("/etc")
    (staging / "bad name").mkdir()
    (staging / "new" / "extra.txt").write_text("x")
    (staging / "top.md").write_text("x")
    os.mkfifo(staging / "fifo")
    accepted, refused = collect(bank, staging)
    assert accepted == [("new", "a new skill ✓")]
    why = {r.path: r.reason for r in refused}
    assert set(why) == {"big/SKILL.md", "bin/SKILL.md", "link/SKILL.md", "escape", "bad name", "new/extra.txt",
                        "top.md", "fifo", "old/SKILL.md"}
    assert "more than" in why["big/SKILL.md"] and "UTF-8" in why["bin/SKILL.md"]
    assert why["link/SKILL.md"] == why["escape"] == "a symbolic link"
    assert "removed skill" in why["old/SKILL.md"]


def test_collect_stops_examining_a_flood_of_entries(tmp_path):
    bank, staging = tmp_path / "bank", tmp_path / "staging"
    bank.mkdir()
    (staging / "flood").mkdir(parents=True)
    for i in range(MAX_ENTRIES + 5):
        (staging / "flood" / f"f{i}").write_text("")
    accepted, refused = collect(bank, staging)
    assert accepted == [] and refused[-1].reason == f"more than {MAX_ENTRIES} entries: the rest not examined"
    assert len(refused) == MAX_ENTRIES  # the ones examined before the flood stopped the walk, then the stop


# ------------------------------------------------------------------------------ learning: agent distils
def test_a_command_agent_distils_its_own_skills_and_bad_entries_are_refused(tmp_path, bwrap_sandbox):
    agent = CommandAgent([str(AGENT), "--evil"])
    events = _learn(tmp_path, bwrap_sandbox, agent)
    assert events[-1].payload == {"status": "completed", "error_type": None}
    learned = bank_dir(tmp_path / "banks", 1, "learned")
    task1, task2 = (t.task_id for t in SHORT.learning)
    # the first skill was removed by the second session: refused, so it is still there
    assert sorted(p.name for p in learned.iterdir()) == sorted([task1, task2, MANIFEST])
    assert (learned / task2 / "SKILL.md").read_text().startswith(f"# {task2} (")
    assert SHORT.learning[1].instruction in (learned / task2 / "SKILL.md").read_text()
    writes = [e.payload for e in events if e.kind == "MemoryWrite"]
    assert [w["memory_id"] for w in writes] == [f"skill:{task1}", f"skill:{task2}"]
    assert all(w["provenance_event_ids"] for w in writes)
    refused = _texts(events, "skill_refused")
    assert any("escape: a symbolic link" in r for r in refused)
    assert any("big/SKILL.md" in r and "more than" in r for r in refused)
    assert any("notes.txt" in r for r in refused)
    assert any(f"{task1}/SKILL.md: a removed skill" in r for r in refused)
    phases = [e.payload["phase"] for e in events if e.kind == "TransferPhase"]
    assert phases == ["distillation", "distillation"]
    calls = [e.payload["name"] for e in events if e.kind == "ToolCall"]
    assert calls.count("write_skill") == 2  # the agent's transcript, as it reported it
    frozen = {e.payload["bank"]: e.payload for e in events if e.kind == "SkillBankFrozen"}
    assert frozen["learned"]["distiller"] == frozen["ablated"]["distiller"] == "agent"
    assert frozen["native"]["distiller"] is None
    # the ablated bank leaves out what the ablated task's distillation session wrote
    assert SHORT.ablate_skill == task1
    assert [f["path"] for f in frozen["ablated"]["files"]] == [f"{task2}/SKILL.md"]
    assert "escape" not in {f["path"].split("/")[0] for f in frozen["learned"]["files"]}


def test_a_scripted_agent_keeps_the_scripted_distiller(tmp_path, bwrap_sandbox):
    events = _learn(tmp_path, bwrap_sandbox, RefsolAgent())
    frozen = {e.payload["bank"]: e.payload for e in events if e.kind == "SkillBankFrozen"}
    assert frozen["learned"]["distiller"] == "scripted"
    assert not [e for e in events if e.kind == "TransferPhase"]
    assert len([e for e in events if e.kind == "MemoryWrite"]) == 2  # refsol passes both tasks


# ------------------------------------------------------------------------------ transfer: /skills read-only
@pytest.fixture
def frozen_learned(tmp_path, bwrap_sandbox):
    events = _learn(tmp_path, bwrap_sandbox, CommandAgent([str(AGENT)]))
    (learned,) = [e.payload for e in events if e.kind == "SkillBankFrozen" and e.payload["bank"] == "learned"]
    return FrozenBank(bank_dir(tmp_path / "banks", 1, "learned"), learned["digest"])


def _transfer(bank, sandbox):
    agent = CommandAgent([str(AGENT)])
    unit = RunUnit(STUDY.name, "settle", "learned_bank", 1)
    return _events(run_transfer, STUDY, unit, RunConfig("rs", agent.name), sandbox, agent, bank)


@pytest.mark.parametrize("backend", ["bwrap_sandbox", "docker_sandbox"])
def test_the_frozen_bank_is_read_only_in_the_sandbox_and_the_unit_is_not_excluded(frozen_learned, backend, request):
    events = _transfer(frozen_learned, request.getfixturevalue(backend))
    said = _texts(events, role="agent")
    task1, task2 = (t.task_id for t in SHORT.learning)
    assert f"skills seen: {task1},{task2}" in said
    assert "write add: failed: Read-only file system" in said
    assert "write change: failed: Read-only file system" in said
    (note,) = _texts(events, "skill_bank_mount")
    assert "/skills" in note and "read-only" in note
    started = [e.payload for e in events if e.kind == "RunStarted"][0]
    assert started["skill_bank_digest"] == frozen_learned.digest
    assert events[-1].payload == {"status": "completed", "error_type": None}


def test_a_bank_tampered_with_on_the_host_still_excludes(frozen_learned, bwrap_sandbox):
    skill = next(frozen_learned.path.glob("*/SKILL.md"))
    skill.chmod(0o644)
    skill.write_text(skill.read_text() + "tampered\n")
    events = _transfer(frozen_learned, bwrap_sandbox)
    assert events[-1].payload == {"status": "excluded", "error_type": "skill_bank_modified"}
    assert any(skill.parent.name in t for t in _texts(events, role="system"))
    assert not _texts(events, role="agent")  # excluded before the agent ran
