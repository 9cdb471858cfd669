"""Memory systems behind one protocol (docs/design.md §5).

`write(events)` receives the agent-visible events of a finished session; `read(query, budget)`
returns memories with ids, within a token budget. Each instance is created for one namespace
(run set, condition, seed, sequence), so no condition, seed or sequence reads another's memory.

Tokens are estimated as ceil(characters / 4), the usual rule of thumb for English text and code
under BPE tokenizers; the estimate is recorded in every MemoryRead, so budgets stay comparable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from membench.schemas.events import Event


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
    and of the sequence (for `curated_file`), the pack's frozen skill bank (for `skill_bank`), and
    the declared scope of each pack event (`event_scopes`: pack event id -> files then symbols), the
    metadata an injected event carries in DreamBench-SWE; a system may use an event's scope only
    once that event has been delivered to it. Systems that need it set `accepts_setup = True` and
    take it as the second argument. `model` is the unit's memory-model client
    (model_client.MemoryModel) for a model-driven policy, set by the runner; None otherwise.
    `store_dir`: below."""

    curated_context: str = ""
    pack_curated_context: str = ""
    skill_bank: Path | None = None
    event_scopes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    model: Any = None
    # where a memory library keeps its on-disk store (runs/<run set>/memory), set by the runner; None:
    # a private temporary directory (membench/memory_systems/libraries.py)
    store_dir: Path | None = None

    @classmethod
    def for_sequence(cls, pack: Any, seq: Any) -> "MemorySetup":
        return cls(curated_context=getattr(seq, "curated_context", "") or "",
                   pack_curated_context=getattr(pack, "curated_context", "") or "",
                   skill_bank=getattr(pack, "skill_bank", None),
                   event_scopes={e.event_id: tuple(getattr(e, "scope_files", ())) + tuple(getattr(e, "scope_symbols", ()))
                                 for e in getattr(seq, "events", ())})


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
