"""The command agent adapter: any CLI agent (or test agent) as a membench agent, run in the sandbox.

Spec: `command:<argv>` (split like a shell would, `shlex`), e.g. `command:my-agent --fast` or
`command:/path/to/agent.py`. When argv[0] names an existing host file, that one file is mounted
read-only at /agent/<name> and run from there (a `.py` file, or one that is not executable, runs
with the sandbox's `python3`); otherwise argv[0] is looked up on the sandbox's PATH. Nothing
else named on the command line is mounted.

What the program gets, per session (and nothing else of the harness — never the reference
solution, the oracle, the pack or the run's log):
- its working directory /workspace: the task repository, read-write; its changes are the patch;
- /task, read-only: `instruction.md` (the session's instruction), `memory.md` (the memory
  context, one `[memory-id] text` line per item, as the memory system rendered it),
  `memory.json` (`{"token_budget", "items": [{"id", "type", "text"}]}`) and `task.json`
  (`{"protocol": 1, "session_index", "instruction", "memory_ids"}`);
- in a transfer study, the skill bank at /skills (read-only in a transfer unit, read-write in a
  learning task's distillation session) and MEMBENCH_SKILLS_DIR=/skills; a distillation session
  also gets /finished, read-only (docs/transfer.md);
- environment: MEMBENCH_TASK_DIR=/task, MEMBENCH_INSTRUCTION_FILE, MEMBENCH_MEMORY_FILE,
  MEMBENCH_MEMORY_JSON, MEMBENCH_SESSION_INDEX, MEMBENCH_WORKSPACE=/workspace, and a temporary
  HOME; no network. Under NATIVE also MEMBENCH_NATIVE_MEMORY_FILE=/workspace/MEMORY.md, the
  program's own memory file, kept between the unit's sessions (docs/memory-systems.md), and
  MEMBENCH_MEMORY_UPDATE=1 in a memory-update turn (the instruction says what followed the session).

What it reports: JSON lines on stdout, one object per line with a `type`:
- `{"type": "turn", "text": str, "input_tokens"?, "cached_tokens"?, "output_tokens"?,
  "reasoning_tokens"?, "latency_ms"?}` -> a `Turn` (role agent);
- `{"type": "tool_call", "name": str, "call_id"?, "arguments"?: any JSON, "is_patch"?: bool}`
  -> a `ToolCall` (the arguments are recorded by SHA-256 digest);
- `{"type": "tool_result", "name": str, "call_id"?, "exit_code"?: int, "duration_ms"?: int,
  "output"?: str, "is_patch"?: bool}` -> a `ToolResult`;
- `{"type": "memory_citation", "memory_ids": [str]}` -> a `MemoryCitation` (the ids it used);
- `{"type": "compaction", "tokens_before": int, "tokens_after": int}` -> a `ContextCompaction`.
Any other line (plain text, malformed JSON, an unknown type) is kept: together they become one
agent `Turn` at the end, so nothing the agent said is dropped silently. At most `MAX_EVENTS`
events per session are recorded; the rest are counted in that final turn.

The process itself is recorded as a `ToolCall`/`ToolResult` named `agent_process` (exit code,
duration, stdout size, the tail of stderr). The session's status is `timeout` when the wall-clock
limit killed it, `error` on a non-zero exit, else `completed`.

Limits (the agent's sandbox; the oracle has its own): `MEMBENCH_AGENT_WALL_S` (default 1800),
`MEMBENCH_AGENT_CPU_S` (1800), `MEMBENCH_AGENT_MEMORY_MB` (4096), `MEMBENCH_AGENT_MAX_PROCS`
(256), read when the agent is made. Without a sandbox the agent refuses to run
(`IsolationUnavailable`): it never runs unjailed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membench.agents.base import AgentOutcome, AgentTask, note_output_cut, sandbox_mounts
from membench.bus.emitter import RunEmitter
from membench.memory_systems.base import count_tokens
from membench.sandbox.base import IsolationUnavailable, SandboxSpec
from membench.schemas.events import bounded_text, safe_str

PREFIX = "command:"
MAX_EVENTS = 5000
STDERR_TAIL = 4096


def record_process_end(emitter: RunEmitter, call_id: str, result: Any) -> str:
    """The agent process's end as events (how much of its stdout the sandbox dropped, then the
    ToolResult of its `agent_process` call with its stderr's tail), and the session status it gives:
    timeout, error (a non-zero exit) or completed."""
    note_output_cut(emitter, result)
    emitter.emit("ToolResult", {
        "call_id": call_id, "name": "agent_process", "exit_code": result.exit_code,
        "duration_ms": result.duration_ms, "output_size": len(result.stdout.encode()), "is_patch": False,
        "output": bounded_text(("[killed at the wall-clock limit]\n" if result.timed_out else "")
                               + result.stderr[-STDERR_TAIL:])})
    return "timeout" if result.timed_out else ("error" if result.exit_code != 0 else "completed")


@dataclass(frozen=True)
class AgentLimits:
    wall_time_s: float = 1800.0
    cpu_time_s: int = 1800
    memory_mb: int = 4096
    max_processes: int = 256

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "AgentLimits":
        env = os.environ if env is None else env
        default = cls()
        return cls(
            wall_time_s=float(env.get("MEMBENCH_AGENT_WALL_S", default.wall_time_s)),
            cpu_time_s=int(env.get("MEMBENCH_AGENT_CPU_S", default.cpu_time_s)),
            memory_mb=int(env.get("MEMBENCH_AGENT_MEMORY_MB", default.memory_mb)),
            max_processes=int(env.get("MEMBENCH_AGENT_MAX_PROCS", default.max_processes)),
        )


def native_env(task: AgentTask) -> dict[str, str]:
    """Under NATIVE: where the program keeps its own memory, and whether this is a memory-update turn."""
    if task.native is None:
        return {}
    return {"MEMBENCH_NATIVE_MEMORY_FILE": f"/workspace/{task.native.declared_file}",
            **({"MEMBENCH_MEMORY_UPDATE": "1"} if task.native.feedback else {})}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class CommandAgent:
    kind = "command"

    def __init__(self, argv: list[str], limits: AgentLimits | None = None):
        if not argv:
            raise ValueError("command agent: empty command (expected command:<program> [args...])")
        self.argv = list(argv)
        self.name = PREFIX + shlex.join(self.argv)
        self.limits = limits or AgentLimits.from_env()

    @classmethod
    def from_spec(cls, spec: str) -> "CommandAgent":
        if not spec.startswith(PREFIX):
            raise ValueError(f"not a command agent spec: {spec!r}")
        try:
            argv = shlex.split(spec[len(PREFIX):])
        except ValueError as exc:
            raise ValueError(f"command agent {spec!r}: {exc}") from None
        return cls(argv)

    # ------------------------------------------------------------------ sandbox command
    def _command(self) -> tuple[list[str], dict[str, Path]]:
        program = Path(self.argv[0])
        if program.is_file():
            inside = f"/agent/{program.name}"
            command = [inside, *self.argv[1:]]
            if program.suffix == ".py" or not os.access(program, os.X_OK):
                command = ["python3", *command]
            return command, {inside: program.resolve()}
        return list(self.argv), {}

    @staticmethod
    def _write_task_dir(task: AgentTask, session_index: int, root: Path) -> None:
        root.chmod(0o755)
        items = [{"id": i.memory_id, "type": i.memory_type, "text": i.text} for i in task.memory.items]
        files = {
            "instruction.md": task.instruction + "\n",
            "memory.md": task.memory.render() + ("\n" if items else ""),
            "memory.json": json.dumps({"token_budget": task.memory.token_budget, "items": items}, indent=1),
            "task.json": json.dumps({"protocol": 1, "session_index": session_index, "instruction": task.instruction,
                                     "memory_ids": [i["id"] for i in items]}, indent=1),
        }
        for name, text in files.items():
            path = root / name
            path.write_text(text, encoding="utf-8")
            path.chmod(0o644)

    # ------------------------------------------------------------------ act
    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome:
        sandbox = getattr(task, "sandbox", None)
        if sandbox is None:
            raise IsolationUnavailable("a command agent runs only inside a sandbox, and none was given")
        session = emitter.session_index
        command, mounts = self._command()
        task_dir = Path(tempfile.mkdtemp(prefix="membench-task-"))
        try:
            self._write_task_dir(task, session, task_dir)
            task_ro, task_rw, task_env = sandbox_mounts(task)
            spec = SandboxSpec(
                workspace=task.workspace,
                ro_mounts={**task_ro, "/task": task_dir, **mounts}, rw_mounts=task_rw,
                env={**task_env, "MEMBENCH_TASK_DIR": "/task", "MEMBENCH_INSTRUCTION_FILE": "/task/instruction.md",
                     "MEMBENCH_MEMORY_FILE": "/task/memory.md", "MEMBENCH_MEMORY_JSON": "/task/memory.json",
                     "MEMBENCH_SESSION_INDEX": str(session), "MEMBENCH_WORKSPACE": "/workspace",
                     **native_env(task)},
                wall_time_s=self.limits.wall_time_s, cpu_time_s=self.limits.cpu_time_s,
                memory_mb=self.limits.memory_mb, max_processes=self.limits.max_processes,
            )
            call_id = f"agent-{session}"
            emitter.emit("ToolCall", {"call_id": call_id, "name": "agent_process",
                                      "arguments_digest": hashlib.sha256(json.dumps(command).encode()).hexdigest(),
                                      "is_patch": False})
            result = sandbox.run(command, spec)  # IsolationUnavailable propagates: the unit is excluded
        finally:
            shutil.rmtree(task_dir, ignore_errors=True)
        cited = self._replay(result.stdout, emitter)
        return AgentOutcome(status=record_process_end(emitter, call_id, result), cited_ids=cited)

    @staticmethod
    def _replay(stdout: str, emitter: RunEmitter) -> list[str]:
        """Turn the agent's JSON-lines stdout into events; returns the memory ids it cited."""
        session = emitter.session_index
        cited: list[str] = []
        loose: list[str] = []
        emitted = dropped = 0
        n_calls = 0
        for line in stdout.splitlines():
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            kind = doc.get("type") if isinstance(doc, dict) else None
            if kind not in ("turn", "tool_call", "tool_result", "memory_citation", "compaction"):
                loose.append(line)
                continue
            if emitted >= MAX_EVENTS:
                dropped += 1
                continue
            emitted += 1
            if kind == "turn":
                text = str(doc.get("text", ""))
                emitter.emit("Turn", {
                    "role": "agent", "text": bounded_text(text), "source_event_id": None, "source_kind": None,
                    "input_tokens": _int(doc.get("input_tokens")), "cached_tokens": _int(doc.get("cached_tokens")),
                    "output_tokens": _int(doc.get("output_tokens"), count_tokens(text)),
                    "reasoning_tokens": _int(doc.get("reasoning_tokens")), "latency_ms": _int(doc.get("latency_ms"))})
            elif kind == "tool_call":
                n_calls += 1
                arguments = json.dumps(doc.get("arguments"), sort_keys=True, default=str).encode()
                emitter.emit("ToolCall", {
                    "call_id": safe_str(f"cmd-{session}-{doc.get('call_id', n_calls)}"),
                    "name": safe_str(str(doc.get("name", "?"))),
                    "arguments_digest": hashlib.sha256(arguments).hexdigest(), "is_patch": bool(doc.get("is_patch"))})
            elif kind == "tool_result":
                output = doc.get("output")
                output = None if output is None else str(output)
                emitter.emit("ToolResult", {
                    "call_id": safe_str(f"cmd-{session}-{doc.get('call_id', n_calls)}"),
                    "name": safe_str(str(doc.get("name", "?"))),
                    "exit_code": _int(doc.get("exit_code")), "duration_ms": _int(doc.get("duration_ms")),
                    "output_size": len(output.encode("utf-8", "surrogatepass")) if output is not None else 0,
                    "is_patch": bool(doc.get("is_patch")),
                    "output": None if output is None else bounded_text(output)})
            elif kind == "memory_citation":
                ids = [safe_str(str(i)) for i in doc.get("memory_ids", []) if isinstance(i, (str, int))]
                emitter.emit("MemoryCitation", {"memory_ids": ids})
                cited += [i for i in ids if i not in cited]
            else:
                emitter.emit("ContextCompaction", {"tokens_before": _int(doc.get("tokens_before")),
                                                   "tokens_after": _int(doc.get("tokens_after"))})
        if loose or dropped:
            text = "\n".join(loose)
            if dropped:
                text += f"\n[{dropped} further event lines dropped: more than {MAX_EVENTS} in one session]"
            emitter.emit("Turn", {"role": "agent", "text": bounded_text(text.strip()), "source_event_id": None,
                                  "source_kind": "stdout", "input_tokens": 0, "cached_tokens": 0,
                                  "output_tokens": count_tokens(text), "reasoning_tokens": 0, "latency_ms": 0})
        return cited
