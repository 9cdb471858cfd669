"""Agents that call a model: the real Codex and Claude Code CLIs, and the built-in `openai:` loop.

Specs: `codex[:MODEL]`, `claude-code[:MODEL]`, `openai:MODEL`, and `command:PROGRAM` when the run
set names a model (CommandModelAgent). Each session runs the agent in the
sandbox with the session's gateway channel (membench/gateway/server.py) relayed to
127.0.0.1:GATEWAY_PORT inside it, the memory tools as an MCP server (inside/mcp_memory.py), and:

- /workspace: the task repository (its changes are the patch); /task: `prompt.md` (the
  instruction, the memory context and the citation convention), plus what the command agent gets
  (`instruction.md`, `memory.md`, `memory.json`, `task.json`);
- HOME (read-write, private to the session): the CLI's configuration — Codex's
  `~/.codex/config.toml` names the gateway as a custom model provider (Responses API); Claude
  Code gets `ANTHROPIC_BASE_URL`;
- the CLIs from the prefix `deploy/agents/install.sh` fills (`MEMBENCH_AGENTS_PREFIX`), read-only
  at /opt/membench-agents;
- an API key that is a placeholder (PLACEHOLDER_KEY): the gateway adds the real one outside.

The CLI's own event stream (`codex exec --json`, `claude -p --output-format stream-json`) is
translated by membench/agents/transcripts into Turn, ToolCall/ToolResult, MemoryCitation and
ContextCompaction events; the built-in loop speaks the command-agent protocol. Token usage comes
from the gateway's ModelCall events only (the Turns of these agents carry none), so nothing is
counted twice. The citation convention is the coding-agent A/B bench's: the final message ends
with `Memory citations: memory:#<id> …` or `Memory citations: none`.

A failure of the model (channel.failure) is raised after the session — the unit is excluded,
never scored as the agent's failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from membench.agents.base import AgentOutcome, AgentTask, sandbox_mounts
from membench.agents.command import MAX_EVENTS, AgentLimits, CommandAgent, native_env, record_process_end
from membench.bus.emitter import RunEmitter
from membench.memory_systems.agent_tools import SessionMemoryTools
from membench.gateway.server import ModelUnavailable
from membench.memory_systems.native import DECLARED_FILE, read_declared
from membench.sandbox.base import SANDBOX_HOME, IsolationUnavailable, SandboxSpec

INSIDE = Path(__file__).resolve().parent / "inside"
GATEWAY_PORT = 4000
GATEWAY_URL = f"http://127.0.0.1:{GATEWAY_PORT}"
PLACEHOLDER_KEY = "membench-placeholder-key"
AGENTS_MOUNT = "/opt/membench-agents"
DEFAULT_PREFIX = Path(__file__).resolve().parents[2] / "deploy" / "agents" / ".work" / "prefix"
CITATION_RULE = ("When you use any of these memories, end your final message with a line "
                 "`Memory citations: memory:#<id> ...`; otherwise end it with `Memory citations: none`.")


def agents_prefix() -> Path:
    return Path(os.environ.get("MEMBENCH_AGENTS_PREFIX") or DEFAULT_PREFIX)


@dataclass(frozen=True)
class LoopLimits:
    """The built-in loop's limits (`membench run --max-steps/--max-tokens`)."""
    max_steps: int = 50
    max_tokens: int = 1_000_000


def memory_server(task: AgentTask) -> tuple[str, str] | None:
    """(MCP server name, program under /membench/inside) the agent is given: an MCP memory
    condition's own tools relayed, membench's search_memory / get_memory, or None (no memory)."""
    if task.memory_tools is not None:
        return "memory", "/membench/inside/mcp_relay.py"
    if task.memory_search is not None:
        return "membench_memory", "/membench/inside/mcp_memory.py"
    return None


NATIVE_CITATION_RULE = ("When you use something from your own memory files, end your final message with a line "
                        "`Memory citations: memory:#native:<file>` (its path in the repository, or ~/ and its "
                        "path under your home); otherwise end it with `Memory citations: none`.")


def prompt_for(task: AgentTask, loads_declared_memory: bool = False) -> str:
    """The session's prompt. Under NATIVE the CLIs load their own memory files and membench adds
    none; an agent whose loader is membench's (`loads_declared_memory`: the built-in loop) gets its
    MEMORY.md here, within that file's cap, as its own loader would give it."""
    parts = [task.instruction.strip()]
    if task.native is not None and loads_declared_memory:
        held = read_declared(task.workspace)
        parts.append(f"## Your memory file ({DECLARED_FILE} at the repository root)\n"
                     + (held if held else "(empty)") + f"\n\nYou keep your memory across sessions in {DECLARED_FILE}: "
                     "it is loaded at the start of every session on this repository.")
    if task.native is not None:  # NATIVE: the agent loads its own memory files; membench injects nothing
        parts.append(NATIVE_CITATION_RULE)
    elif task.memory.items:
        parts.append("## Memory from earlier sessions\n" + "\n".join(
            f"- memory:#{i.memory_id} ({i.memory_type}): {i.text}" for i in task.memory.items))
        parts.append(CITATION_RULE)
    else:
        parts.append("No memories were loaded for this session; end your final message with `Memory citations: none`.")
    return "\n\n".join(parts) + "\n"


class ModelAgent:
    """What the three agents share; subclasses say how to start the agent and read its output."""

    kind = "model"
    needs_gateway = True
    binary: str | None = None  # the CLI under the agents prefix's bin/, or None (the built-in loop)
    transcript_format: str | None = None  # None: the command-agent JSON-lines protocol
    # (provider, wire API) the agent calls, which the gateway's pre-flight probes; None: the agent's
    # own choice (a command: program)
    wire: tuple[str, str] | None = None
    loads_declared_memory = False  # under NATIVE, membench's prompt is the agent's loader of its MEMORY.md
    default_model: str

    def __init__(self, model: str, limits: AgentLimits | None = None):
        self.model = model
        self.limits = limits or AgentLimits.from_env()

    # ------------------------------------------------------------------ per agent
    @property
    def name(self) -> str:  # each agent's own, with its model: `codex:gpt-5-codex`
        raise NotImplementedError

    def command(self, task: AgentTask, prompt: str) -> list[str]:
        raise NotImplementedError

    def prepare_home(self, home: Path, task: AgentTask) -> None:
        pass

    def environment(self) -> dict[str, str]:
        return {}

    def extra_mounts(self) -> dict[str, Path]:
        return {}

    # ------------------------------------------------------------------ availability
    def check(self) -> tuple[bool, str]:
        if self.binary is None:
            return True, "ok (built in)"
        path = agents_prefix() / "bin" / self.binary
        if not path.exists():
            return False, f"{path} is missing: run deploy/agents/install.sh"
        return True, f"ok ({path})"

    def check_in(self, sandbox) -> tuple[bool, str]:
        """Does the CLI start inside `sandbox`? (`--version`, with the mounts a session has)."""
        ok, why = self.check()
        if not ok or self.binary is None:
            return ok, why
        with tempfile.TemporaryDirectory(prefix="membench-doctor-") as workspace:
            spec = SandboxSpec(workspace=Path(workspace), ro_mounts={AGENTS_MOUNT: agents_prefix()},
                               rw_mounts={}, wall_time_s=60, cpu_time_s=60, memory_mb=self.limits.memory_mb,
                               max_processes=self.limits.max_processes)
            try:
                result = sandbox.run([f"{AGENTS_MOUNT}/bin/{self.binary}", "--version"], spec)
            except IsolationUnavailable as exc:
                return False, f"the sandbox is unavailable: {exc}"
        if result.exit_code != 0:
            return False, f"{self.binary} --version exited {result.exit_code} in the sandbox: {result.stderr[-300:]}"
        return True, f"ok: {result.stdout.strip().splitlines()[-1] if result.stdout.strip() else '?'} ({sandbox.name})"

    # ------------------------------------------------------------------ act
    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome:
        if task.sandbox is None:
            raise IsolationUnavailable(f"{self.name} runs only inside a sandbox, and none was given")
        if task.gateway is None:
            raise ModelUnavailable(f"{self.name} needs the model gateway: run with --model-base-url or --model-replay")
        ok, why = self.check()
        if not ok:
            raise RuntimeError(f"{self.name}: {why}")
        session = emitter.session_index
        tools = (SessionMemoryTools(task.memory_search, task.memory, task.memory.token_budget)
                 if task.memory_search is not None else task.memory_tools)
        prompt = prompt_for(task, self.loads_declared_memory)
        task_dir = Path(tempfile.mkdtemp(prefix="membench-task-"))
        # NATIVE: the HOME holds the agent's memory files the harness keeps (and removes); else a fresh one
        home = task.native.home if task.native is not None else Path(tempfile.mkdtemp(prefix="membench-home-"))
        try:
            CommandAgent._write_task_dir(task, session, task_dir)
            (task_dir / "prompt.md").write_text(prompt, encoding="utf-8")
            (task_dir / "prompt.md").chmod(0o644)
            self.prepare_home(home, task)
            argv = self.command(task, prompt)
            with task.gateway.open_channel(emitter.unit_id, emitter.emit, tools) as channel:
                if tools is not None:
                    tools.emit = channel.emit
                task_ro, task_rw, task_env = sandbox_mounts(task)
                mounts = {**task_ro, "/task": task_dir, "/membench/inside": INSIDE, "/run/membench": channel.directory,
                          **self.extra_mounts()}
                if self.binary is not None:
                    mounts[AGENTS_MOUNT] = agents_prefix()
                spec = SandboxSpec(
                    workspace=task.workspace, ro_mounts=mounts, rw_mounts={**task_rw, SANDBOX_HOME: home},
                    env={**task_env, "MEMBENCH_GATEWAY_URL": GATEWAY_URL, "MEMBENCH_TASK_DIR": "/task",
                         "MEMBENCH_WORKSPACE": "/workspace", "MEMBENCH_SESSION_INDEX": str(session),
                         **native_env(task), **self.environment()},
                    wall_time_s=self.limits.wall_time_s, cpu_time_s=self.limits.cpu_time_s,
                    memory_mb=self.limits.memory_mb, max_processes=self.limits.max_processes)
                command = ["python3", "/membench/inside/launch.py", "--listen", str(GATEWAY_PORT),
                           "--socket", f"/run/membench/{channel.socket_path.name}", "--", *argv]
                call_id = f"agent-{session}"
                channel.emit("ToolCall", {"call_id": call_id, "name": "agent_process", "is_patch": False,
                                          "arguments_digest": hashlib.sha256(json.dumps(argv).encode()).hexdigest()},
                             "agent")
                result = task.sandbox.run(command, spec)  # IsolationUnavailable propagates: excluded
            # the channel is closed: every ModelCall and MemoryRead of the session is in the log
        finally:
            shutil.rmtree(task_dir, ignore_errors=True)
            if task.native is None:
                shutil.rmtree(home, ignore_errors=True)
        cited = self._translate(result.stdout, emitter)
        status = record_process_end(emitter, call_id, result)
        if channel.failure is not None:
            raise channel.failure
        return AgentOutcome(status=status, cited_ids=cited)

    def _translate(self, stdout: str, emitter: RunEmitter) -> list[str]:
        if self.transcript_format is None:
            return CommandAgent._replay(stdout, emitter)
        from membench.agents.transcripts.registry import parse_transcript

        # split on "\n" only: a raw U+2028 inside a JSON string is not a line break of the stream
        transcript = parse_transcript(stdout.split("\n"), self.transcript_format, f"{self.name} stdout",
                                      strict=False)
        for event in transcript.events[:MAX_EVENTS]:
            payload = event.payload
            if event.kind == "Turn":
                if payload.get("source_kind") == "usage":  # usage is the gateway's (ModelCall): not twice
                    continue
                payload = {**payload, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                           "reasoning_tokens": 0}
            if "call_id" in payload:  # a CLI numbers its calls per invocation: unique per run here
                payload = {**payload, "call_id": f"t{emitter.session_index}-{payload['call_id']}"}
            emitter.emit_any(event.kind, payload, visibility=event.visibility)
        return list(transcript.cited_memory_ids)


class CodexAgent(ModelAgent):
    """`codex exec --json` (npm @openai/codex), the gateway as its model provider (Responses API)."""

    binary = "codex"
    transcript_format = "codex-exec-json"
    default_model = "gpt-5-codex"
    wire = ("openai", "responses")  # (provider, wire API) it calls: what the gateway's pre-flight probes

    @property
    def name(self) -> str:
        return f"codex:{self.model}"

    def prepare_home(self, home: Path, task: AgentTask) -> None:
        config = home / ".codex"
        config.mkdir(exist_ok=True)  # NATIVE may have put the agent's own AGENTS.md there
        server = memory_server(task)
        mcp = (f'\n[mcp_servers.{server[0]}]\n'
               'command = "python3"\n'
               f'args = ["{server[1]}"]\n'
               f'env = {{ MEMBENCH_GATEWAY_URL = "{GATEWAY_URL}" }}\n') if server is not None else ""
        (config / "config.toml").write_text(
            f'model = {json.dumps(self.model)}\n'
            'model_provider = "membench"\n'
            'approval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n'  # membench's sandbox is the boundary
            '\n[model_providers.membench]\n'
            'name = "membench gateway"\n'
            f'base_url = "{GATEWAY_URL}/v1"\n'
            'env_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\n' + mcp, encoding="utf-8")

    def environment(self) -> dict[str, str]:
        return {"OPENAI_API_KEY": PLACEHOLDER_KEY, "CODEX_HOME": f"{SANDBOX_HOME}/.codex"}

    def command(self, task: AgentTask, prompt: str) -> list[str]:
        return [f"{AGENTS_MOUNT}/bin/codex", "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "--cd", "/workspace", "--model", self.model, prompt]


class ClaudeCodeAgent(ModelAgent):
    """`claude -p --output-format stream-json --verbose` (npm @anthropic-ai/claude-code)."""

    binary = "claude"
    transcript_format = "claude-stream-json"
    default_model = "claude-sonnet-4-5"
    wire = ("anthropic", "messages")

    @property
    def name(self) -> str:
        return f"claude-code:{self.model}"

    def environment(self) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": GATEWAY_URL, "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
                # the memory server's tools in every request, as the model is offered any other tool:
                # the deferred-tool search would hide them behind ToolSearch until the model asks
                "ENABLE_TOOL_SEARCH": "false"}

    def command(self, task: AgentTask, prompt: str) -> list[str]:
        server = memory_server(task)
        servers = {server[0]: {"type": "stdio", "command": "python3", "args": [server[1]],
                               "env": {"MEMBENCH_GATEWAY_URL": GATEWAY_URL}}} if server is not None else {}
        mcp = {"mcpServers": servers}  # a no-memory condition: no tools
        return [f"{AGENTS_MOUNT}/bin/claude", "-p", "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", "--model", self.model, "--strict-mcp-config",
                "--mcp-config", json.dumps(mcp), "--", prompt]


class OpenAILoopAgent(ModelAgent):
    """The built-in loop (inside/openai_loop.py) over any OpenAI-compatible Chat Completions API."""

    wire = ("openai", "chat_completions")
    loads_declared_memory = True

    def __init__(self, model: str, limits: AgentLimits | None = None, loop: LoopLimits | None = None):
        super().__init__(model, limits)
        self.loop = loop or LoopLimits()

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def command(self, task: AgentTask, prompt: str) -> list[str]:
        return ["python3", "/membench/inside/openai_loop.py", "--model", self.model,
                "--max-steps", str(self.loop.max_steps), "--max-tokens", str(self.loop.max_tokens),
                *(["--mcp-memory"] if task.memory_tools is not None
                  else [] if task.memory_search is not None else ["--no-memory"])]


class CommandModelAgent(ModelAgent):
    """`command:PROGRAM` when a model is configured: the command agent (same files, same JSON-lines
    protocol, membench/agents/command.py) with the gateway — OPENAI_BASE_URL, ANTHROPIC_BASE_URL
    and MEMBENCH_GATEWAY_URL point at it, the keys are placeholders. Any agent program can so
    reach the model the run set names, and its calls are ModelCall events."""

    kind = "command"

    def __init__(self, command_agent: CommandAgent):
        super().__init__(model="", limits=command_agent.limits)
        self._command_agent = command_agent
        self.model = None  # type: ignore[assignment]  # a command: program chooses its own model

    @property
    def name(self) -> str:
        return self._command_agent.name

    def command(self, task: AgentTask, prompt: str) -> list[str]:
        argv, mounts = self._command_agent._command()
        self._mounts = mounts
        return argv

    def extra_mounts(self) -> dict[str, Path]:
        return getattr(self, "_mounts", {})

    def environment(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": f"{GATEWAY_URL}/v1", "OPENAI_API_KEY": PLACEHOLDER_KEY,
                "ANTHROPIC_BASE_URL": GATEWAY_URL, "ANTHROPIC_API_KEY": PLACEHOLDER_KEY}


MODEL_AGENTS = {"codex": CodexAgent, "claude-code": ClaudeCodeAgent}


def make_model_agent(spec: str, loop: LoopLimits | None = None) -> ModelAgent | None:
    """The agent a spec names, or None when it names no model agent."""
    head, _, model = spec.partition(":")
    if head == "openai":
        if not model:
            raise ValueError("openai:MODEL needs a model name (e.g. openai:gpt-5-mini)")
        return OpenAILoopAgent(model, loop=loop)
    if head in MODEL_AGENTS:
        cls = MODEL_AGENTS[head]
        return cls(model or cls.default_model)
    return None
