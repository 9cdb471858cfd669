"""The agent protocol (design §5): an agent acts on one session's task and reports its outcome.

Implementations: the scripted reference agents (`membench.agents.scripted`) and programs run in
the sandbox (`membench.agents.command`); `membench.agents.registry.make_agent` picks one by spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from membench.bus.emitter import RunEmitter
from membench.memory_systems.base import MemoryContext
from membench.schemas.events import bounded_text
from membench.formats.pack_format import Solution


SKILLS_MOUNT = "/skills"  # where a sandboxed agent finds the skill bank (MEMBENCH_SKILLS_DIR)


def sandbox_mounts(task: "AgentTask") -> tuple[dict[str, Path], dict[str, Path], dict[str, str]]:
    """(read-only mounts, read-write mounts, environment) a task adds to an agent's sandbox."""
    ro, rw = dict(task.extra_ro_mounts), dict[str, Path]()
    env = dict(task.extra_env)
    if task.skills is not None:
        (rw if task.skills_writable else ro)[SKILLS_MOUNT] = Path(task.skills)
        env["MEMBENCH_SKILLS_DIR"] = SKILLS_MOUNT
    return ro, rw, env


OUTPUT_TRUNCATED = "output_truncated"  # source_kind of the harness Turn that says how much stdout was dropped


def note_output_cut(emitter: RunEmitter, result: Any) -> None:
    """A sandbox keeps an agent's stdout up to its limit and drops the rest (membench/sandbox/bwrap.py,
    docker_backend.py): say how much was dropped, in a harness Turn beside what was kept, so a cut
    transcript is never read as the agent's whole output."""
    dropped = getattr(result, "stdout_dropped", 0)
    if not dropped:
        return
    kept = len(result.stdout.encode("utf-8", "surrogatepass"))
    emitter.emit("Turn", {"role": "system", "text": bounded_text(f"agent stdout cut at the sandbox's limit: kept "
                                                                 f"{kept} bytes, dropped {dropped} bytes"),
                          "source_event_id": None,
                          "source_kind": OUTPUT_TRUNCATED, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                          "reasoning_tokens": 0, "latency_ms": 0}, visibility="harness")


@dataclass
class AgentTask:
    instruction: str
    workspace: Path
    memory: MemoryContext
    solution: Solution  # harness-only: scripted agents use it, program agents never see it
    sandbox: Any = None  # the run's sandbox (membench.sandbox.base.Sandbox); program agents run only inside it
    gateway: Any = None  # the run set's model gateway (membench.gateway.server.ModelGateway), for model agents
    memory_search: Callable[[str], MemoryContext] | None = None  # the condition's memory, asked during the session
    # an agent-driven condition's MCP memory server: its own tools, every call recorded
    # (membench.memory_systems.mcp_servers.McpSessionTools); None for every other condition
    memory_tools: Any = None
    # sandboxed agents only (command and model agents): a skill bank mounted at SKILLS_MOUNT, read-only
    # (a transfer unit's frozen bank) or read-write (a learning task's distillation session), further
    # read-only mounts (sandbox path -> host path) and environment variables
    skills: Path | None = None
    skills_writable: bool = False
    extra_ro_mounts: dict[str, Path] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    # NATIVE only (membench.memory_systems.native.NativeSession): the agent's own memory files are in
    # the workspace and in `native.home`, the HOME it runs with; `native.feedback` non-empty makes the
    # session a memory-update turn (the instruction says what followed the last session)
    native: Any = None


@dataclass
class AgentOutcome:
    status: str = "completed"  # completed / timeout / error
    cited_ids: list[str] = field(default_factory=list)


class Agent(Protocol):
    @property
    def name(self) -> str: ...  # read-only: a model agent's names its model

    kind: str

    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome: ...
