"""The command agent adapter: its JSON-lines protocol becomes membench events."""

from __future__ import annotations

import json

import pytest

from membench.agents.base import AgentTask
from membench.agents.command import MAX_EVENTS, CommandAgent
from membench.bus.emitter import RunEmitter
from membench.memory_systems.base import MemoryContext, MemoryItem
from membench.sandbox import SandboxResult


class FakeSandbox:
    """Records what the agent asks for (the protocol test; the real backends are tested elsewhere)."""

    name = "fake"

    def __init__(self, stdout: str, timed_out: bool = False, exit_code: int = 0):
        self.stdout, self.timed_out, self.exit_code = stdout, timed_out, exit_code
        self.calls = []

    def run(self, argv, spec):
        task = {p.name: p.read_text() for p in spec.ro_mounts["/task"].iterdir()}
        self.calls.append((argv, spec, task))
        return SandboxResult(self.exit_code, self.stdout, "some stderr", self.timed_out, 12)


def _run(tmp_path, stdout, **kwargs):
    events = []
    emitter = RunEmitter("rs", "run-1", "u", lambda event, datum: events.append(event))
    emitter.session_index = 2
    memory = MemoryContext((MemoryItem("m-1", "episodic", "the default currency code is ABC"),), ("m-1",), 100)
    script = tmp_path / "agent.py"
    script.write_text("print('hi')\n")
    agent = CommandAgent.from_spec(f"command:{script} --mode 'two words'")
    sandbox = FakeSandbox(stdout, **kwargs)
    outcome = agent.act(AgentTask("Fix it.", tmp_path / "ws", memory, solution=None, sandbox=sandbox), emitter)
    return outcome, events, sandbox.calls[0]


def test_protocol_lines_become_events(tmp_path):
    lines = [
        {"type": "turn", "text": "thinking", "input_tokens": 7, "output_tokens": 3},
        {"type": "tool_call", "call_id": "c1", "name": "edit", "arguments": {"path": "a.py"}, "is_patch": True},
        {"type": "tool_result", "call_id": "c1", "name": "edit", "exit_code": 0, "output": "done", "is_patch": True},
        {"type": "memory_citation", "memory_ids": ["m-1"]},
        {"type": "compaction", "tokens_before": 900, "tokens_after": 100},
    ]
    stdout = "\n".join(json.dumps(line) for line in lines) + "\nplain text\n{broken json\n"
    outcome, events, (argv, spec, task) = _run(tmp_path, stdout)
    assert argv == ["python3", "/agent/agent.py", "--mode", "two words"]
    assert set(spec.ro_mounts) == {"/task", "/agent/agent.py"}
    assert spec.env["MEMBENCH_INSTRUCTION_FILE"] == "/task/instruction.md"
    assert task["instruction.md"] == "Fix it.\n" and "[m-1] the default currency code is ABC" in task["memory.md"]
    assert json.loads(task["memory.json"])["items"][0]["id"] == "m-1"
    assert "solution" not in json.dumps(task)
    kinds = [e.kind for e in events]
    assert kinds == ["ToolCall", "Turn", "ToolCall", "ToolResult", "MemoryCitation", "ContextCompaction", "Turn",
                     "ToolResult"]
    assert events[1].payload["input_tokens"] == 7 and events[2].payload["is_patch"] is True
    assert events[2].payload["call_id"] == events[3].payload["call_id"] == "cmd-2-c1"
    assert events[6].payload["text"]["text"] == "plain text\n{broken json"
    assert events[-1].payload["name"] == "agent_process" and events[-1].payload["exit_code"] == 0
    assert all(e.visibility == "agent" for e in events)
    assert outcome.status == "completed" and outcome.cited_ids == ["m-1"]


@pytest.mark.parametrize(("kwargs", "status"), [({"timed_out": True, "exit_code": -9}, "timeout"),
                                                ({"exit_code": 3}, "error")])
def test_status_follows_the_process(tmp_path, kwargs, status):
    outcome, events, _ = _run(tmp_path, "", **kwargs)
    assert outcome.status == status


def test_event_flood_is_capped_and_counted(tmp_path):
    stdout = "\n".join(json.dumps({"type": "turn", "text": "x"}) for _ in range(MAX_EVENTS + 5))
    _, events, _ = _run(tmp_path, stdout)
    assert sum(1 for e in events if e.kind == "Turn") == MAX_EVENTS + 1
    assert "5 further event lines dropped" in events[-2].payload["text"]["text"]
