"""Agents by spec: `scripted:null|refsol|memory-literal`, `command:PROGRAM` (run in the sandbox), or a
model agent — `openai:MODEL`, `codex[:MODEL]`, `claude-code[:MODEL]` (membench/agents/model_agents.py)."""

from __future__ import annotations

from membench.agents.base import Agent
from membench.agents.command import CommandAgent
from membench.agents.model_agents import CommandModelAgent, LoopLimits, make_model_agent
from membench.agents.scripted import MemoryLiteralAgent, NullAgent, RefsolAgent
from membench.formats.fields import did_you_mean

SCRIPTED_AGENTS: dict[str, type] = {a.name: a for a in (NullAgent, RefsolAgent, MemoryLiteralAgent)}


def make_agent(spec: str, loop: LoopLimits | None = None, with_gateway: bool = False) -> Agent:
    """`with_gateway`: the run set has a model gateway, so a command agent gets it too."""
    if spec.startswith("command:"):
        agent = CommandAgent.from_spec(spec)
        return CommandModelAgent(agent) if with_gateway else agent
    model_agent = make_model_agent(spec, loop)
    if model_agent is not None:
        return model_agent
    try:
        return SCRIPTED_AGENTS[spec]()
    except KeyError:
        near = did_you_mean(spec, [*SCRIPTED_AGENTS, "codex", "claude-code"])
        raise ValueError(f"unknown agent '{spec}'{near} (known: {', '.join(sorted(SCRIPTED_AGENTS))}, "
                         "command:PROGRAM, openai:MODEL, codex[:MODEL], claude-code[:MODEL])") from None
