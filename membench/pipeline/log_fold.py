"""A run set's log folded as the embedded pipeline folds it: every event through the processors
(`RunSetProcessor`, the same fold `membench.pipeline.embedded.EmbeddedPipeline` applies as it
publishes), with its Avro datum and what it derived. What reads a log into a store goes through
`fold_log`: a snapshot warehouse (membench/pipeline/log_snapshot.py) and an in-memory read model
(`read_model_from_log`).

A payload is the event as decoded from the log, so it also names the optional fields its producer
left at their default, as every sink's raw row does (membench/warehouse/sink.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from membench.bus.attempts import read_log
from membench.processors import RunSetProcessor
from membench.schemas.codec import encode_datum
from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event
from membench.warehouse.memory_read_model import InMemoryReadModel


def fold_log(log: Path, run_set: str | None = None) -> Iterator[tuple[Event, bytes, str, list[DerivedEvent]]]:
    """(event, datum, writer schema fingerprint hex, derived events) of every event of LOG (of
    RUN_SET, when given), in log order. A block that does not decode raises `LogError` after the
    events before it."""
    processor = RunSetProcessor()
    for event, schema in read_log(Path(log)):
        if run_set is not None and event.run_set != run_set:
            continue
        yield event, encode_datum(schema, event.to_record()), schema.fingerprint_hex, processor.apply(event)


def read_model_from_log(log: Path, run_set: str | None = None) -> InMemoryReadModel:
    """An in-memory read model fed with LOG's events (of RUN_SET) and what the processors derive
    from them: the reports of the run set, without a warehouse."""
    model = InMemoryReadModel()
    for event, datum, fingerprint_hex, derived in fold_log(log, run_set):
        model.add(event, datum, derived, fingerprint_hex)
    return model
