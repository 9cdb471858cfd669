"""B4: untyped session summaries. After each session a deterministic extractive summary is kept:
the first sentence of the session's instruction, then the first sentence of every project event
delivered after it (the agent's own replies are left out). A read admits the newest summaries that
fit the token budget and presents them oldest first, like a running project log."""

from __future__ import annotations

from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, Namespace, admit_newest
from membench.memory_systems.text import first_sentence, pieces
from membench.schemas.events import Event


class SessionSummaryMemory:
    condition = "B4"
    uses_memory = True

    def __init__(self, namespace: Namespace):
        self.namespace = namespace
        self._summaries: list[MemoryItem] = []

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        parts = pieces(events)
        if not parts:
            return []
        session = parts[0].session_index
        lines = []
        for p in parts:
            if p.label == "instruction":
                lines.append(f"Session {session}: {first_sentence(p.text)}")
            elif p.source_event_id:
                lines.append(f"- {p.label}: {first_sentence(p.text)}")
        item = MemoryItem(f"B4:s{session}", "summary", "\n".join(lines), tuple(p.event_id for p in parts), ())
        self._summaries.append(item)
        return [item]

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        admitted = admit_newest(self._summaries, budget_tokens)
        return MemoryContext(tuple(admitted), tuple(i.memory_id for i in self._summaries), budget_tokens)
