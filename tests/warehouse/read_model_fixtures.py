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


def every_read(reads, run_set: str, needles: list[str]) -> dict[str, object]:
    """read name -> what READS answers for RUN_SET (the canary search with NEEDLES and the report's
    diff fields), one entry per read of `membench.warehouse.read_model.READS`."""
    from membench.reports.canary import DIFF_FIELDS
    from membench.warehouse.read_model import READS

    args = {"agent_visible_hits": (needles,), "diffs_stored_as_blobs": (DIFF_FIELDS,)}
    return {name: getattr(reads, name)(run_set, *args.get(name, ())) for name in READS}


def differing_reads(a, b, run_set: str, needles: list[str]) -> list[str]:
    """The reads A and B answer differently for RUN_SET (values and types: a float is not an int)."""
    left, right = every_read(a, run_set, needles), every_read(b, run_set, needles)
    return [name for name in left if _typed_repr(left[name]) != _typed_repr(right[name])]


def _typed_repr(value: object) -> object:
    """VALUE with each leaf paired with its type, so 1 and 1.0 and True differ."""
    if isinstance(value, dict):
        return {k: _typed_repr(v) for k, v in value.items()}, list(value)
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [_typed_repr(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return type(value).__name__, _typed_repr(vars(value))
    return type(value).__name__, value
