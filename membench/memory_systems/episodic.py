"""B1: raw episodic memory. One memory per finished session: the raw, agent-visible transcript of
that session (the instruction, the agent's replies, the project events delivered after it), in
order. A read admits whole episodes, newest session first, while they fit the token budget."""

from __future__ import annotations

from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, Namespace
from membench.memory_systems.text import pieces
from membench.schemas.events import Event


class RawEpisodicMemory:
    condition = "B1"
    uses_memory = True

    def __init__(self, namespace: Namespace):
        self.namespace = namespace
        self._episodes: list[MemoryItem] = []

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        parts = pieces(events)
        if not parts:
            return []
        session = parts[0].session_index
        text = "\n".join(f"[{p.label}] {p.text}" for p in parts)
        item = MemoryItem(f"B1:s{session}", "episode", text, tuple(p.event_id for p in parts), ())
        self._episodes.append(item)
        return [item]

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        admitted, used = [], 0
        for item in reversed(self._episodes):  # newest first
            if used + item.tokens <= budget_tokens:
                admitted.append(item)
                used += item.tokens
        return MemoryContext(tuple(admitted), tuple(i.memory_id for i in reversed(self._episodes)), budget_tokens)
