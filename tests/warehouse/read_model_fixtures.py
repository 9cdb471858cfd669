"""Runs of emitted events loaded into a read model: in memory (a report test that is not about the
warehouse), or into a real chDB warehouse through the embedded pipeline's sink (a test that is)."""

from __future__ import annotations

from collections.abc import Iterator

from membench.processors import derive_all
from membench.schemas.chain import seal
from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event
from membench.schemas.registry import default_registry
from membench.warehouse.memory_read_model import InMemoryReadModel


def sealed(runs: list[list[Event]]) -> Iterator[tuple[Event, bytes, str, list[DerivedEvent]]]:
    """(event, datum, fingerprint hex, what the processors derived at it) of every event of RUNS."""
    schema = default_registry().latest("event")
    for events in runs:
        derived = derive_all(events)
        for event in events:
            _, datum = seal(schema, event)
            yield event, datum, schema.fingerprint_hex, [d for d in derived if d.source_seq == event.seq]


def in_memory(runs: list[list[Event]]) -> InMemoryReadModel:
    """RUNS and what the processors derive from them, in an in-memory read model."""
    model = InMemoryReadModel()
    for event, datum, fingerprint_hex, derived in sealed(runs):
        model.add(event, datum, derived, fingerprint_hex)
    return model


def load_warehouse(warehouse, runs: list[list[Event]]) -> None:
    """RUNS and what the processors derive from them, written by the embedded pipeline's sink."""
    from membench.warehouse.sink import RunBatchSink

    sink = RunBatchSink(warehouse, default_registry().latest("event").fingerprint_hex)
    for event, datum, _, derived in sealed(runs):
        sink.add(event, datum, derived)
    sink.flush()
