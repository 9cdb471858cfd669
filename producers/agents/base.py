"""The agent protocol (design §5): an agent acts on one session's task and reports its outcome.

Implementations: the scripted reference agents (`producers.agents.scripted`) and programs run in
the sandbox (`producers.agents.command`); `producers.agents.registry.make_agent` picks one by spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from producers.emitter import RunEmitter
from producers.memory_systems.base import MemoryContext
from schemas.pack_format import Solution


@dataclass
class AgentTask:
    instruction: str
    workspace: Path
    memory: MemoryContext
    solution: Solution  # harness-only: scripted agents use it, program agents never see it
    sandbox: Any = None  # the run's sandbox (sandbox.base.Sandbox); program agents run only inside it
    gateway: Any = None  # the run set's model gateway (producers.gateway.server.ModelGateway), for model agents
    memory_search: Callable[[str], MemoryContext] | None = None  # the condition's memory, asked during the session


@dataclass
class AgentOutcome:
    status: str = "completed"  # completed / timeout / error
    cited_ids: list[str] = field(default_factory=list)


class Agent(Protocol):
    name: str
    kind: str

    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome: ...
