"""The scripted reference agents (docs/design.md §5): deterministic, no model,
labelled `scripted:*` in every report:

- `scripted:null` changes nothing;
- `scripted:refsol` applies the session's reference solution;
- `scripted:memory-literal` writes the solution template, filling each decisive slot only with a
  value it finds in its context (the instruction, then the memories in the order the memory
  system presents them) and otherwise with the slot's plausible wrong default, so its success
  measures the memory system, not a model. Under an agent-driven memory (an MCP memory server,
  `task.memory_tools`) nothing is in its context but the instruction: it searches the server with
  the instruction when a slot is not in it, and records a note of its session through the
  server's write tool, as an agent with such a server is told to.

Under NATIVE (membench/memory_systems/native.py) the memory is the agent's own file, MEMORY.md
in the workspace: `memory-literal` records each event it is told in a memory-update turn there,
one line each, and reads that file (as far as its cap) after the instruction and before any
injected memory; `null` and `refsol` record nothing (refsol needs no memory).

Scripted agents run on the harness side (they read the hidden template); agents that are
programs run inside the sandbox.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

from membench.agents.base import AgentOutcome, AgentTask
from membench.bus.emitter import RunEmitter
from membench.memory_systems.base import MemoryItem, count_tokens
from membench.memory_systems.native import DECLARED_FILE, memory_id, read_declared
from membench.schemas.events import bounded_text


def _write_files(files: dict[str, str], workspace: Path, emitter: RunEmitter) -> None:
    for n, (rel, text) in enumerate(sorted(files.items())):
        call_id = f"call-{emitter.session_index}-{n}"
        args = f"{rel}\0{text}".encode()
        emitter.emit("ToolCall", {"call_id": call_id, "name": "write_file",
                                  "arguments_digest": hashlib.sha256(args).hexdigest(), "is_patch": True})
        started = time.monotonic()
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        emitter.emit("ToolResult", {"call_id": call_id, "name": "write_file", "exit_code": 0,
                                    "duration_ms": int((time.monotonic() - started) * 1000),
                                    "output_size": 0, "is_patch": True, "output": None})


def _say(emitter: RunEmitter, text: str, prompt_tokens: int) -> None:
    emitter.emit("Turn", {"role": "agent", "text": bounded_text(text), "source_event_id": None,
                          "source_kind": None, "input_tokens": prompt_tokens, "cached_tokens": 0,
                          "output_tokens": count_tokens(text), "reasoning_tokens": 0, "latency_ms": 0})


def _memory_update(task: AgentTask) -> bool:
    return task.native is not None and bool(task.native.feedback)


class NullAgent:
    name = "scripted:null"
    kind = "scripted"

    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome:
        if _memory_update(task):
            _say(emitter, "Nothing to remember.", count_tokens(task.instruction))
            return AgentOutcome()
        _say(emitter, "No change.", count_tokens(task.instruction) + task.memory.tokens_admitted)
        return AgentOutcome()


class RefsolAgent:
    name = "scripted:refsol"
    kind = "scripted"

    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome:
        if _memory_update(task):
            _say(emitter, "Nothing to remember: the reference solution needs no memory.",
                 count_tokens(task.instruction))
            return AgentOutcome()
        files = task.solution.reference()
        _write_files(files, task.workspace, emitter)
        _say(emitter, f"Applied the reference solution ({len(files)} files).",
             count_tokens(task.instruction) + task.memory.tokens_admitted)
        return AgentOutcome()


class MemoryLiteralAgent:
    name = "scripted:memory-literal"
    kind = "scripted"

    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome:
        if _memory_update(task):
            return self._remember(task, emitter)
        values: dict[str, str] = {}
        cited: list[str] = []
        own = read_declared(task.workspace) if task.native is not None else ""
        memories = ([MemoryItem(memory_id("workspace", DECLARED_FILE), "declared", own)] if own else []) \
            + list(task.memory.items)
        searched = False
        for name, slot in task.solution.slots.items():
            pattern = re.compile(slot.pattern)
            found = pattern.search(task.instruction)
            if found:
                values[name] = found.group(1)
                continue
            if task.memory_tools is not None and not searched:  # one look-up in the server, when needed
                memories, searched = task.memory_tools.search(task.instruction), True
            for item in memories:
                found = pattern.search(item.text)
                if found:
                    values[name] = found.group(1)
                    if item.memory_id not in cited:
                        cited.append(item.memory_id)
                    break
            else:
                values[name] = slot.default
        files = task.solution.render(values)
        _write_files(files, task.workspace, emitter)
        filled = sum(1 for n, s in task.solution.slots.items() if values[n] != s.default)
        _say(emitter, f"Filled {filled} of {len(task.solution.slots)} decisive slots from context.",
             count_tokens(task.instruction) + task.memory.tokens_admitted + (count_tokens(own) if own else 0)
             + (sum(item.tokens for item in memories) if searched else 0))
        if task.memory_tools is not None:
            task.memory_tools.remember(f"Session {emitter.session_index} task: {task.instruction}", "session-note")
        if cited:
            emitter.emit("MemoryCitation", {"memory_ids": cited})
        return AgentOutcome(cited_ids=cited)

    @staticmethod
    def _remember(task: AgentTask, emitter: RunEmitter) -> AgentOutcome:
        """A memory-update turn: each event told is appended to MEMORY.md, one line each."""
        path = task.workspace / DECLARED_FILE
        held = path.read_text(encoding="utf-8") if path.is_file() and not path.is_symlink() else ""
        lines = [" ".join(text.split()) for text in task.native.feedback]
        new = [line for line in lines if line and line not in held.splitlines()]
        if new:
            _write_files({DECLARED_FILE: held + "".join(f"{line}\n" for line in new)}, task.workspace, emitter)
        _say(emitter, f"Recorded {len(new)} notes in {DECLARED_FILE}.", count_tokens(task.instruction))
        return AgentOutcome()
