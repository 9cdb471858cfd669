"""Agents by spec: `scripted:null|refsol|memory-literal`, or `command:PROGRAM` (run in the sandbox)."""

from __future__ import annotations

from producers.agents.base import Agent
from producers.agents.command import CommandAgent
from producers.agents.scripted import MemoryLiteralAgent, NullAgent, RefsolAgent

SCRIPTED_AGENTS: dict[str, type] = {a.name: a for a in (NullAgent, RefsolAgent, MemoryLiteralAgent)}


def make_agent(spec: str) -> Agent:
    if spec.startswith("command:"):
        return CommandAgent.from_spec(spec)
    try:
        return SCRIPTED_AGENTS[spec]()
    except KeyError:
        raise ValueError(f"unknown agent '{spec}' (known: {', '.join(sorted(SCRIPTED_AGENTS))})") from None
