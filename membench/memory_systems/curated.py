"""curated_file: a hand-curated MEMORY.md, written from the pack's curated context (the pack-level
`curated_context`, then the sequence's own). It is read-only during a run — the sessions' events
never change it — and a read admits it whole, or clipped to the token budget."""

from __future__ import annotations

from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace
from membench.memory_systems.text import clip_to_tokens
from membench.schemas.events import Event


class CuratedFileMemory:
    condition = "curated_file"
    uses_memory = True
    accepts_setup = True

    def __init__(self, namespace: Namespace, setup: MemorySetup | None = None):
        self.namespace = namespace
        setup = setup or MemorySetup()
        parts = [t.strip() for t in (setup.pack_curated_context, setup.curated_context) if t and t.strip()]
        self.text = ("# MEMORY.md\n\n" + "\n\n".join(parts) + "\n") if parts else ""

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        return []

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        if not self.text:
            return MemoryContext((), (), budget_tokens)
        item = MemoryItem("curated:MEMORY.md", "curated_file", clip_to_tokens(self.text, budget_tokens), (), ())
        if item.tokens > budget_tokens or not item.text:
            return MemoryContext((), (item.memory_id,), budget_tokens)
        return MemoryContext((item,), (item.memory_id,), budget_tokens)
