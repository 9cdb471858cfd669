"""NATIVE: which files are the agent's memory, what its loader admits within its own cap, what a
session's changes record, and that a memory-update turn keeps only memory files."""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.memory_systems.base import Namespace
from membench.memory_systems.native import (AUTO_MEMORY_BYTES, AUTO_MEMORY_LINES, CODEX_PROJECT_DOC_BYTES,
                                             NativeMemory, NativeSession, drop_memory_files)
from membench.memory_systems.registry import make_memory
from membench.schemas.events import Event, bounded_text

AUTO = ".claude/projects/-workspace/memory/MEMORY.md"


class Named:
    def __init__(self, name: str):
        self.name = name


def native(agent: str = "claude-code:m", base: dict[str, bytes] | None = None, run_agent=None,
           seed: int = 1) -> NativeMemory:
    memory = make_memory("NATIVE", Namespace("rs", "NATIVE", seed, "seq"))
    assert isinstance(memory, NativeMemory)
    memory.bind(Named(agent), base or {"ledger/money.py": b"x = 1\n"}, run_agent or (lambda session: None))
    return memory


def session_of(memory: NativeMemory, tmp_path: Path, write: dict[str, str]) -> list:
    """One session whose agent writes WRITE (a path under ~/ is in its HOME); the items it recorded."""
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    session = memory.open_session(workspace)
    for rel, text in write.items():
        target = session.home / rel[2:] if rel.startswith("~/") else workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return memory.close_session(session, ["instruction-turn"])


def test_a_file_the_pack_ships_is_the_repositorys_and_a_new_one_is_memory(tmp_path):
    memory = native(base={"CLAUDE.md": b"the pack's conventions\n"})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "CLAUDE.md").write_text("the pack's conventions\n")
    session = memory.open_session(workspace)
    (workspace / "CLAUDE.md").write_text("the pack's conventions\nand the agent's edit\n")
    (workspace / "CLAUDE.local.md").write_text("client id 5a1f\n")
    (session.home / AUTO).parent.mkdir(parents=True)
    (session.home / AUTO).write_text("- default currency code is QZRSCZVQ\n")
    (session.home / ".claude" / "projects" / "-workspace" / "s1.jsonl").write_text("{}")  # the CLI's, not memory
    items = memory.close_session(session, ["instruction-turn"])

    assert [i.memory_id for i in items] == ["native:~/" + AUTO, "native:CLAUDE.local.md"]
    assert items[1].text == "--- /dev/null\n+++ b/CLAUDE.local.md\n@@ -0,0 +1 @@\n+client id 5a1f\n"
    assert items[0].memory_type == "auto_memory" and items[0].provenance_event_ids == ("instruction-turn",)
    # the memory file left the workspace (never the patch); the pack's file, edited, stays: it is the patch
    assert not (workspace / "CLAUDE.local.md").exists()
    assert (workspace / "CLAUDE.md").read_text().endswith("and the agent's edit\n")
    assert not session.home.exists()

    # the next session finds both where the agent keeps them, and its loader admits both
    again = memory.open_session(tmp_path / "ws")
    assert (again.home / AUTO).read_text() == "- default currency code is QZRSCZVQ\n"
    assert (workspace / "CLAUDE.local.md").read_text() == "client id 5a1f\n"
    context = memory.read("any", 2000)
    assert [i.memory_id for i in context.items] == ["native:CLAUDE.local.md", "native:~/" + AUTO]
    assert context.token_budget == 0  # the agent's own caps apply, not membench's budget
    assert memory.close_session(again, []) == []  # unchanged: nothing written


def test_each_agent_loads_within_its_own_cap(tmp_path):
    claude = native("claude-code:m")
    long_index = "".join(f"- fact {n}\n" for n in range(AUTO_MEMORY_LINES + 50))
    session_of(claude, tmp_path, {"~/" + AUTO: long_index, "ledger/CLAUDE.md": "on demand only\n",
                                  ".claude/rules/style.md": "rule\n"})
    context = claude.read("q", 2000)
    loaded = {i.memory_id: i.text for i in context.items}
    assert loaded["native:~/" + AUTO].splitlines() == long_index.splitlines()[:AUTO_MEMORY_LINES]
    assert "native:ledger/CLAUDE.md" in context.candidates and "native:ledger/CLAUDE.md" not in loaded
    assert loaded["native:.claude/rules/style.md"] == "rule\n"

    wide = native("claude-code:m")
    session_of(wide, tmp_path / "wide", {"~/" + AUTO: "x" * (AUTO_MEMORY_BYTES + 10) + "\n"})
    assert len(wide.read("q", 2000).items[0].text.encode()) == AUTO_MEMORY_BYTES

    codex = native("codex:m")
    session_of(codex, tmp_path / "codex", {"AGENTS.md": "a" * (CODEX_PROJECT_DOC_BYTES + 100),
                                           "~/.codex/AGENTS.md": "global\n", "~/.codex/AGENTS.override.md": "over\n"})
    loaded = {i.memory_id: i.text for i in codex.read("q", 2000).items}
    assert loaded == {"native:~/.codex/AGENTS.override.md": "over\n",  # the override hides the global file
                      "native:AGENTS.md": "a" * CODEX_PROJECT_DOC_BYTES}

    other = native("openai:m")  # an agent without its own: the declared MEMORY.md, nothing else
    items = session_of(other, tmp_path / "other", {"MEMORY.md": "note\n", "CLAUDE.md": "not this agent's\n"})
    assert [i.memory_id for i in items] == ["native:MEMORY.md"]
    assert (tmp_path / "other" / "ws" / "CLAUDE.md").exists()  # another agent's file is the patch here


@pytest.mark.parametrize("link", [True, False], ids=["symlink-refused", "regular-file-control"])
def test_a_symlink_never_makes_the_harness_read_a_file_outside_the_sandbox(tmp_path, link):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-SECRET-4411\n")
    memory = native()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = memory.open_session(workspace)
    (session.home / ".claude").mkdir()
    for target in (workspace / "CLAUDE.md", session.home / ".claude" / "CLAUDE.md"):
        if link:
            target.symlink_to(secret)
        else:
            target.write_text(secret.read_text())
    items = memory.close_session(session, [])
    recorded = "".join(i.text for i in items)
    assert ("HOST-SECRET-4411" in recorded) is not link
    assert (workspace / "CLAUDE.md").is_symlink() is link  # a link is no memory: it stays, the patch's


def test_namespaces_share_nothing(tmp_path):
    first, second = native(seed=1), native(seed=2)
    session_of(first, tmp_path, {"~/" + AUTO: "seed one's fact\n"})
    assert second.read("q", 2000).items == () and second.files == {}
    workspace = tmp_path / "second"
    workspace.mkdir()
    session = second.open_session(workspace)
    assert not (session.home / AUTO).exists()
    assert second.close_session(session, []) == []


def _delivered(event_id: str, text: str) -> Event:
    return Event(event_id=event_id, run_set="rs", run_id="r", unit_id="u", session_index=1, seq=0, ts=0,
                 producer="test", kind="Turn", visibility="agent", prev_hash="",
                 payload={"role": "user", "text": bounded_text(text), "source_event_id": "pack-e1",
                          "source_kind": "decision"})


def test_a_memory_update_turn_keeps_only_memory_files(tmp_path):
    seen: list[NativeSession] = []

    def agent_turn(session: NativeSession) -> None:
        seen.append(session)
        assert (session.workspace / "ledger" / "money.py").read_text() == "x = 1\n"  # where the agent left it
        (session.workspace / "CLAUDE.md").write_text("".join(f"{line}\n" for line in session.feedback))
        (session.workspace / "ledger" / "money.py").write_text("changed in the memory turn\n")

    memory = native(run_agent=agent_turn)
    assert memory.write([]) == []  # nothing delivered: no turn
    assert not seen
    (item,) = memory.write([_delivered("turn-7", "the default currency code is QZRSCZVQ")])
    assert seen[0].feedback == ("the default currency code is QZRSCZVQ",)
    assert item.memory_id == "native:CLAUDE.md" and item.provenance_event_ids == ("turn-7",)
    assert memory.files == {("workspace", "CLAUDE.md"): b"the default currency code is QZRSCZVQ\n"}
    assert memory.tree["ledger/money.py"] == b"x = 1\n"  # the turn's other changes were dropped


def test_only_the_builtin_loop_gets_its_memory_file_in_the_prompt(tmp_path):
    """The CLIs load their own files (membench adds nothing); the built-in loop's loader is its prompt."""
    from membench.agents.base import AgentTask
    from membench.agents.model_agents import prompt_for
    from membench.memory_systems.base import MemoryContext

    (tmp_path / "MEMORY.md").write_text("the default currency code is QZRSCZVQ\n")
    task = AgentTask("Add make_invoice.", tmp_path, MemoryContext((), (), 0), None,
                     native=NativeSession(tmp_path, tmp_path, "MEMORY.md"))
    assert "QZRSCZVQ" in prompt_for(task, loads_declared_memory=True)
    assert "QZRSCZVQ" not in prompt_for(task)
    assert "memory:#native:" in prompt_for(task)


def test_other_conditions_drop_the_agents_memory_files_but_never_the_packs_or_a_predictions(tmp_path):
    for rel in ("CLAUDE.md", "AGENTS.md", "ledger/CLAUDE.md", "MEMORY.md", "ledger/money.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    assert drop_memory_files(Named("claude-code:m"), tmp_path, ["CLAUDE.md", "ledger/money.py"]) == [
        "ledger/CLAUDE.md"]  # the pack's own CLAUDE.md stays; another agent's file names are the patch
    prediction = Named("predictions")
    prediction.kind = "external"
    assert drop_memory_files(prediction, tmp_path, []) == []
    assert drop_memory_files(Named("codex:m"), tmp_path, []) == ["AGENTS.md"]
    # the runner gives the pack's tree as its snapshot ({path: content}): its paths are the pack's
    (tmp_path / "AGENTS.md").write_text("x\n")
    assert drop_memory_files(Named("codex:m"), tmp_path, {"AGENTS.md": b"x\n"}) == []
    assert (tmp_path / "AGENTS.md").exists()


def test_a_command_program_is_told_its_memory_file_and_the_memory_update_turn(tmp_path):
    from membench.agents.base import AgentTask
    from membench.agents.command import native_env
    from membench.memory_systems.base import MemoryContext

    def env(native):
        return native_env(AgentTask("x", tmp_path, MemoryContext((), (), 0), None, native=native))

    assert env(None) == {}
    assert env(NativeSession(tmp_path, tmp_path, "MEMORY.md")) == {
        "MEMBENCH_NATIVE_MEMORY_FILE": "/workspace/MEMORY.md"}
    assert env(NativeSession(tmp_path, tmp_path, "MEMORY.md", ("a review",)))["MEMBENCH_MEMORY_UPDATE"] == "1"
