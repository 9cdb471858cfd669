"""Agents by spec: `scripted:null|refsol|memory-literal`, `command:PROGRAM` (run in the sandbox), or a
model agent — `openai:MODEL`, `codex[:MODEL]`, `claude-code[:MODEL]` (producers/agents/model_agents.py)."""

from __future__ import annotations

from producers.agents.base import Agent
from producers.agents.command import CommandAgent
from producers.agents.model_agents import LoopLimits, make_model_agent
from producers.agents.scripted import MemoryLiteralAgent, NullAgent, RefsolAgent

SCRIPTED_AGENTS: dict[str, type] = {a.name: a for a in (NullAgent, RefsolAgent, MemoryLiteralAgent)}


def make_agent(spec: str, loop: LoopLimits | None = None) -> Agent:
    if spec.startswith("command:"):
        return CommandAgent.from_spec(spec)
    model_agent = make_model_agent(spec, loop)
    if model_agent is not None:
        return model_agent
    try:
        return SCRIPTED_AGENTS[spec]()
    except KeyError:
        raise ValueError(f"unknown agent '{spec}' (known: {', '.join(sorted(SCRIPTED_AGENTS))}, "
                         "command:PROGRAM, openai:MODEL, codex[:MODEL], claude-code[:MODEL])") from None
