"""Memory systems behind one protocol (DESIGN.md §5).

`write(events)` receives the agent-visible events of a finished session; `read(query, budget)`
returns memories with ids, within a token budget. Each instance is created for one namespace
(run set, condition, seed, sequence), so no condition, seed or sequence reads another's memory.

Tokens are estimated as ceil(characters / 4), the usual rule of thumb for English text and code
under BPE tokenizers; the estimate is recorded in every MemoryRead, so budgets stay comparable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from schemas.events import Event


def count_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


@dataclass(frozen=True)
class MemoryItem:
    memory_id: str
    memory_type: str
    text: str
    provenance_event_ids: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        return count_tokens(self.text)


@dataclass(frozen=True)
class MemoryContext:
    items: tuple[MemoryItem, ...]  # in the order the memory system presents them
    candidates: tuple[str, ...]
    token_budget: int

    @property
    def tokens_admitted(self) -> int:
        return sum(item.tokens for item in self.items)

    def render(self) -> str:
        return "\n".join(f"[{item.memory_id}] {item.text}" for item in self.items)


@dataclass(frozen=True)
class Namespace:
    run_set: str
    condition: str
    seed: int
    sequence: str

    def __str__(self) -> str:
        return f"{self.run_set}/{self.condition}/{self.seed}/{self.sequence}"


class MemorySystem(Protocol):
    condition: str

    def write(self, events: Sequence[Event]) -> list[MemoryItem]: ...

    def read(self, query: str, budget_tokens: int) -> MemoryContext: ...


def admit_newest(items: Sequence[MemoryItem], budget_tokens: int) -> list[MemoryItem]:
    """Keep the newest items that fit the budget, presented oldest first."""
    admitted: list[MemoryItem] = []
    used = 0
    for item in reversed(items):
        if used + item.tokens > budget_tokens:
            continue
        admitted.append(item)
        used += item.tokens
    return list(reversed(admitted))


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
            item = MemoryItem(f"B5:{source}", event.payload.get("source_kind") or "event",
                              event.payload["text"]["text"], (event.event_id,), ())
            self._items.append(item)
            stored.append(item)
        return stored

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        admitted = admit_newest(self._items, budget_tokens)
        return MemoryContext(tuple(admitted), tuple(i.memory_id for i in self._items), budget_tokens)


MEMORY_SYSTEMS: dict[str, type] = {"B0": NoMemory, "B5": VerbatimEventMemory}


def memory_conditions() -> list[str]:
    return sorted(MEMORY_SYSTEMS)


def make_memory(condition: str, namespace: Namespace) -> MemorySystem:
    try:
        return MEMORY_SYSTEMS[condition](namespace)
    except KeyError:
        raise ValueError(f"unknown condition '{condition}' (known: {', '.join(memory_conditions())})") from None
