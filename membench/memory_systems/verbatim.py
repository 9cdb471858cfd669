"""B0 (no memory) and B5 (verbatim event memory), the two ends of the DreamBench-SWE ladder."""

from __future__ import annotations

from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, Namespace, admit_newest
from membench.schemas.events import Event


class NoMemory:
    """B0: no memory at all."""

    condition = "B0"
    uses_memory = False

    def __init__(self, namespace: Namespace):
        self.namespace = namespace

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        return []

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        return MemoryContext((), (), budget_tokens)


class VerbatimEventMemory:
    """B5: every delivered project event (review, decision, feedback, failure, ...) stored
    verbatim, one memory per event; read returns the newest that fit, oldest first."""

    condition = "B5"
    uses_memory = True

    def __init__(self, namespace: Namespace):
        self.namespace = namespace
        self._items: list[MemoryItem] = []

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        stored = []
        for event in events:
            if event.visibility != "agent" or event.kind != "Turn" or not event.payload.get("source_event_id"):
                continue
            source = event.payload["source_event_id"]
            # the memory's scope is the pack event's (event v5 `source_scope`; older logs carry none), so
            # scope accuracy and overscope judge B5 by what each stored event was about
            item = MemoryItem(f"B5:{source}", event.payload.get("source_kind") or "event",
                              event.payload["text"]["text"], (event.event_id,),
                              tuple(event.payload.get("source_scope") or ()))
            self._items.append(item)
            stored.append(item)
        return stored

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        admitted = admit_newest(self._items, budget_tokens)
        return MemoryContext(tuple(admitted), tuple(i.memory_id for i in self._items), budget_tokens)
