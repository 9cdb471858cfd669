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
from pathlib import Path
from typing import Any, Protocol

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


@dataclass(frozen=True)
class MemorySetup:
    """What a memory system may know besides the events it is fed: the curated context of the pack
    and of the sequence (for `curated_file`) and the pack's frozen skill bank (for `skill_bank`).
    Systems that need it set `accepts_setup = True` and take it as the second argument."""

    curated_context: str = ""
    pack_curated_context: str = ""
    skill_bank: Path | None = None

    @classmethod
    def for_sequence(cls, pack: Any, seq: Any) -> "MemorySetup":
        return cls(curated_context=getattr(seq, "curated_context", "") or "",
                   pack_curated_context=getattr(pack, "curated_context", "") or "",
                   skill_bank=getattr(pack, "skill_bank", None))


class MemorySystem(Protocol):
    """Optional attributes: `uses_memory` (False: no MemoryRead is recorded), `accepts_setup`,
    `skill_bank_digest` (recorded in RunStarted)."""

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
# The coding-agent A/B benchmark's name for B0 (imported packs run no_memory / curated_file / B5).
MEMORY_SYSTEMS["no_memory"] = NoMemory


def _register_builtin_systems() -> None:
    from producers.memory_systems.curated import CuratedFileMemory
    from producers.memory_systems.episodic import RawEpisodicMemory
    from producers.memory_systems.skill_bank import SkillBankMemory
    from producers.memory_systems.summaries import SessionSummaryMemory
    from producers.memory_systems.vector import TokenVectorMemory

    MEMORY_SYSTEMS["B1"] = RawEpisodicMemory
    MEMORY_SYSTEMS["B2"] = TokenVectorMemory
    MEMORY_SYSTEMS["B4"] = SessionSummaryMemory
    MEMORY_SYSTEMS["curated_file"] = CuratedFileMemory
    MEMORY_SYSTEMS["skill_bank"] = SkillBankMemory


def register_external(name: str, command: list[str] | None = None, url: str | None = None,
                      timeout_s: float = 60.0) -> None:
    """Register an external memory system (a command or an HTTP endpoint) as condition NAME."""
    from producers.memory_systems.external import external_factory

    if name in MEMORY_SYSTEMS:
        raise ValueError(f"condition '{name}' is already registered")
    MEMORY_SYSTEMS[name] = external_factory(name, command, url, timeout_s)  # type: ignore[assignment]


def _register_env_adapters() -> None:
    import os

    from producers.memory_systems.external import adapters_from_env

    for name, factory in adapters_from_env(os.environ.get("MEMBENCH_MEMORY_ADAPTERS")).items():
        MEMORY_SYSTEMS.setdefault(name, factory)  # type: ignore[arg-type]


def memory_conditions() -> list[str]:
    return sorted(MEMORY_SYSTEMS)


def make_memory(condition: str, namespace: Namespace, setup: MemorySetup | None = None) -> MemorySystem:
    try:
        factory = MEMORY_SYSTEMS[condition]
    except KeyError:
        raise ValueError(f"unknown condition '{condition}' (known: {', '.join(memory_conditions())})") from None
    if getattr(factory, "accepts_setup", False):
        return factory(namespace, setup or MemorySetup())
    return factory(namespace)


_register_builtin_systems()
_register_env_adapters()
