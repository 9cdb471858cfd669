"""A source condition's memory, as the imported pack declares it: what `membench score` records for
predictions under a label such as the A/B benchmark's `remem`, whose memory system ran elsewhere.

membench does not run that memory system; it records what the pack says it held
(`Sequence.source_memories`: memory id -> pack event), so the session's memory contract and the
memory failure reasons are judged as for any memory system: after the history session that
delivers a memory's pack event, the memory is written under the source's own id (the id its agent
cites: `memory:#1` is "1") with that delivered event as provenance, and the task session's read
admits every memory held. The A/B benchmark preloads every seeded memory's full details into
REMEM_CONTEXT.md, so nothing is ranked or clipped, and no read budget applies (`token_budget` 0):
membench's budget was never in force where that memory ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem
from membench.schemas.events import Event


class DeclaredMemory:
    uses_memory = True

    def __init__(self, condition: str, memories: Mapping[str, str], contents: Mapping[str, str]):
        """MEMORIES: memory id -> pack event id (in the source's id order); CONTENTS: pack event id -> text."""
        self.condition = condition
        self.by_event = {event_id: memory_id for memory_id, event_id in memories.items()}
        self.contents = contents
        self.held: list[MemoryItem] = []

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        new = []
        for event in events:
            source = event.payload.get("source_event_id") if event.kind == "Turn" else None
            if source in self.by_event:
                new.append(MemoryItem(self.by_event[source], "declared", self.contents.get(source, ""),
                                      provenance_event_ids=(event.event_id,)))
        self.held += new
        return new

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        return MemoryContext(tuple(self.held), tuple(m.memory_id for m in self.held), 0)
