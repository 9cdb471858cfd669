"""B7: sequence-local task-tracker memory (DreamBench-SWE's B7). One item per namespace — the
sequence's tracker — replaced after every session: one line per session so far with its task (the
instruction's first sentence), how it ended and the files its patch changed, newest last. Like a
task tracker it records the work, not the project's rules: event text never enters it. It keeps the
same memory id (`B7:tracker`) across rewrites, so a later MemoryWrite replaces the earlier one; its
provenance grows with every instruction it lists. A read admits the tracker whole, or clipped to the
budget from the oldest line on (the newest tasks are kept). Deterministic, no model."""

from __future__ import annotations

from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, Namespace
from membench.memory_systems.derive import paths_in, union
from membench.memory_systems.text import first_sentence, pieces
from membench.schemas.events import Event

TRACKER_ID = "B7:tracker"


class TaskTrackerMemory:
    condition = "B7"
    description = "one sequence-local task-tracker item, replaced each session"
    uses_memory = True

    def __init__(self, namespace: Namespace):
        self.namespace = namespace
        self._lines: list[str] = []
        self._provenance: list[str] = []
        self._scope: list[tuple[str, ...]] = []
        self.item: MemoryItem | None = None

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        instruction = next((p for p in pieces(events) if p.label == "instruction"), None)
        if instruction is None:
            return []
        changed = tuple(dict.fromkeys(f for e in events if e.visibility == "agent" and e.kind == "PatchProduced"
                                      for f in e.payload.get("production_paths", [])))
        ended = next((e.payload.get("status", "") for e in events if e.kind == "SessionEnded"), "") or "ended"
        line = f"- [S{instruction.session_index}] {first_sentence(instruction.text)} — {ended}"
        if changed:
            line += f"; changed {', '.join(changed)}"
        self._lines.append(line)
        self._provenance.append(instruction.event_id)
        self._scope.append(changed or tuple(paths_in(instruction.text)))
        self.item = MemoryItem(TRACKER_ID, "task_tracker", self._render(self._lines), tuple(self._provenance),
                               union(self._scope))
        return [self.item]

    @staticmethod
    def _render(lines: list[str]) -> str:
        return "Task tracker (this sequence):\n" + "\n".join(lines)

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        if self.item is None:
            return MemoryContext((), (), budget_tokens)
        item, lines = self.item, list(self._lines)
        while item.tokens > budget_tokens and len(lines) > 1:  # drop the oldest tasks first
            lines.pop(0)
            item = MemoryItem(TRACKER_ID, item.memory_type, self._render(lines), item.provenance_event_ids, item.scope)
        if item.tokens > budget_tokens:
            return MemoryContext((), (TRACKER_ID,), budget_tokens)
        return MemoryContext((item,), (TRACKER_ID,), budget_tokens)
