"""B6: subtask/action memory, a subtask-granularity substitute inspired by subtask-level SWE-agent
memory (DreamBench-SWE's B6; not a fidelity reimplementation of any published system). It remembers
what was done, not what was said: per finished session (episode) at most MAX_PER_EPISODE = 3
items, derived from the trajectory's actions —

- `subtask`: the session's goal, the first sentence of its instruction, scoped to the files it names;
- `action`: the tools the agent called (by name and count) and the files its patch changed;
- `outcome`: how the session ended, and which kinds of project events followed it (their kinds
  only: event text is not an action).

No model writes them (the paper's B6 is a deterministic harness baseline too). A read ranks the
items by TF-IDF cosine similarity to the query, ties newest first, and admits the top TOP_K with a
positive score that fit the budget, in rank order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, Namespace
from membench.memory_systems.derive import paths_in, symbols_in
from membench.memory_systems.text import first_sentence, pieces, tfidf_scores
from membench.schemas.events import Event

MAX_PER_EPISODE = 3
TOP_K = 6


class SubtaskMemory:
    condition = "B6"
    description = "subtask/action memory, at most 3 items per episode"
    uses_memory = True

    def __init__(self, namespace: Namespace):
        self.namespace = namespace
        self._items: list[MemoryItem] = []

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        parts = pieces(events)
        instruction = next((p for p in parts if p.label == "instruction"), None)
        if instruction is None:
            return []
        session = instruction.session_index
        goal = first_sentence(instruction.text)
        task_scope = tuple(paths_in(instruction.text) + symbols_in(instruction.text))
        calls = [e for e in events if e.visibility == "agent" and e.kind == "ToolCall"]
        patches = [e for e in events if e.visibility == "agent" and e.kind == "PatchProduced"]
        changed = tuple(dict.fromkeys(f for e in patches for f in e.payload.get("production_paths", [])))
        ended = next((e.payload.get("status", "") for e in events if e.kind == "SessionEnded"), "")
        followed = [p for p in parts if p.source_event_id]

        items = [MemoryItem(f"B6:s{session}:subtask", "subtask", f"Subtask (session {session}): {goal}",
                            (instruction.event_id,), task_scope)]
        if calls or changed:
            tools = ", ".join(f"{name} x{n}" for name, n in Counter(e.payload.get("name", "?") for e in calls).items())
            text = f"Actions (session {session}): " + "; ".join(
                part for part in (f"tools {tools}" if tools else "", f"changed {', '.join(changed)}" if changed else "")
                if part)
            items.append(MemoryItem(f"B6:s{session}:action", "action", text,
                                    tuple(e.event_id for e in calls + patches), changed or task_scope))
        if ended or followed:
            kinds = ", ".join(f"{k} x{n}" for k, n in Counter(p.label for p in followed).items())
            text = f"Outcome (session {session}): {ended or 'ended'}" + (f"; followed by {kinds}" if kinds else "")
            items.append(MemoryItem(f"B6:s{session}:outcome", "outcome", text,
                                    (instruction.event_id,) + tuple(p.event_id for p in followed), task_scope))
        items = items[:MAX_PER_EPISODE]
        self._items += items
        return items

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        if not self._items:
            return MemoryContext((), (), budget_tokens)
        scores = tfidf_scores([i.text for i in self._items], query)
        order = sorted(range(len(self._items)), key=lambda i: (-round(float(scores[i]), 12), -i))
        admitted: list[MemoryItem] = []
        used = 0
        for i in order:
            if len(admitted) >= TOP_K or scores[i] <= 0:
                break
            if used + self._items[i].tokens <= budget_tokens:
                admitted.append(self._items[i])
                used += self._items[i].tokens
        return MemoryContext(tuple(admitted), tuple(self._items[i].memory_id for i in order), budget_tokens)
