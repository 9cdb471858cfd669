"""Derived-event definitions (the `derived` Avro family): what processors fold from raw events.

Processors build these; the warehouse stores them (one table per kind) and replay compares them.
Field names equal the `.avsc` fields, so a payload converts with `dataclasses.asdict`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

# Fields that carry wall-clock time: equal runs on two bus paths differ only here.
WALL_CLOCK_FIELDS = frozenset({"duration_ms"})


@dataclass
class ResourceTotals:
    """Resource counters of a session or run (the fields shared by SessionVerdict and RunSummary)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    tool_calls: int = 0
    patch_invocations: int = 0
    memory_reads: int = 0
    memory_tokens_admitted: int = 0
    compactions: int = 0


@dataclass(frozen=True)
class UnitKey:
    run_set: str
    run_id: str
    unit_id: str
    suite: str
    task: str
    condition: str
    seed: int
    agent: str


@dataclass(frozen=True)
class DerivedEvent:
    derived_id: str
    run_set: str
    run_id: str
    source_seq: int
    kind: str
    payload: dict[str, Any]

    def to_record(self) -> dict[str, Any]:
        # built by hand: dataclasses.asdict deep-copies the payload, which the encoder only reads
        return {"derived_id": self.derived_id, "run_set": self.run_set, "run_id": self.run_id,
                "source_seq": self.source_seq, "kind": self.kind, "payload": ("membench." + self.kind, self.payload)}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "DerivedEvent":
        payload = record["payload"]
        if isinstance(payload, tuple):
            payload = payload[1]
        return cls(record["derived_id"], record["run_set"], record["run_id"], record["source_seq"],
                   record["kind"], dict(payload))

    def comparable(self) -> dict[str, Any]:
        """The payload without wall-clock fields (what equality tests and replay compare)."""
        return {k: v for k, v in self.payload.items() if k not in WALL_CLOCK_FIELDS}


def derived_id(run_id: str, kind: str, *parts: Any) -> str:
    """Deterministic id, so a replay or the other bus path derives the very same ids."""
    text = "\x1f".join([run_id, kind, *map(str, parts)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def shallow_fields(record: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict, its values not copied. `dataclasses.asdict` recurses and
    deep-copies (measured: a fifth of a replay's fold time, twice over); the records folds turn into
    payloads hold str, int, float, bool and lists built fresh for them."""
    names = _FIELD_NAMES.get(type(record))
    if names is None:
        names = _FIELD_NAMES[type(record)] = tuple(f.name for f in dataclasses.fields(record))
    return {name: getattr(record, name) for name in names}


def make_derived(key: UnitKey, kind: str, source_seq: int, fields: dict[str, Any], *id_parts: Any) -> DerivedEvent:
    payload = shallow_fields(key)
    payload.update(fields)
    return DerivedEvent(derived_id(key.run_id, kind, *id_parts), key.run_set, key.run_id, source_seq, kind, payload)
