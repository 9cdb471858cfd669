"""`membench process --engine faust`: the processors inside a faust-streaming worker (docs/design.md §2, §7).

The worker interprets the route both engines share (`membench/pipeline/processor_route.py`): it consumes
the trajectory topic (raw bytes), decodes each message, runs the same pure `RunSetProcessor` as the
embedded path, and publishes derived events (Avro single-object encoding, key run_id) to the
derived topic. A message that does not decode or that a processor rejects goes to the dead-letter
topic with the reason; the stream goes on.

Crash recovery is event sourcing: the fold state of a run lives only in memory, and the log is
the truth. After a crash (or a rebalance) a worker may meet a run in the middle, after the
committed offset; it then reads that run's earlier events back from the same partition and
folds the run from its start. Derived sends are awaited until the broker acknowledges them, so
a committed offset never hides a derived event that was not written. Re-derived events carry the
same deterministic ids; the sink and every reader deduplicate by them.
"""

from __future__ import annotations

import logging

import faust

from membench.pipeline.kafka_engine import MessageFolder
from membench.pipeline.processor_route import ProcessorRoute
from membench.processors import RunSetProcessor
from membench.bus.topics import Topics, topics_from_dsn

log = logging.getLogger("membench.worker")

BATCH = 500  # messages per batch
BATCH_WAIT_S = 0.05  # or whatever arrived within this time


def app_settings(topics: Topics) -> dict:
    """The faust App settings of the worker (shared with the no-op agent of `membench bench bus`)."""
    return dict(
        broker=[f"kafka://{b}" for b in topics.bootstrap.split(",")],
        value_serializer="raw",
        key_serializer="raw",
        store="memory://",
        web_enabled=False,
        topic_allow_declare=False,  # topics are created by membench (ensure_topics), with their layout
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        broker_commit_every=10_000,  # commits pause the stream (wait_empty): by interval, not count
        broker_commit_interval=1.0,
    )


def build_app(dsn: str, ended_window: int | None = None) -> faust.App:
    topics = topics_from_dsn(dsn)
    route = ProcessorRoute(topics)
    app = faust.App(route.group, **app_settings(topics))
    raw = app.topic(route.consumes, key_type=bytes, value_type=bytes, allow_empty=True)
    derived_topic = app.topic(route.derived, key_type=bytes, value_type=bytes)
    dead_topic = app.topic(route.dead_letters, key_type=bytes, value_type=bytes)
    # the decode and fold both engines share (a run met mid-way is folded from its start)
    folder = MessageFolder(topics, RunSetProcessor(ended_window) if ended_window else RunSetProcessor())

    async def dead_letter(event, reason: str) -> None:
        headers = route.dead_letter_headers(reason, event.message.partition, event.message.offset)
        sent = await dead_topic.send(key=event.key, value=event.value or b"", headers=dict(headers))
        await sent

    async def handle(event) -> list:
        """Fold one message; returns the derived events it completes."""
        folded = folder.fold(event.value, event.message.partition, event.message.offset)
        for reason in folded.dead:
            await dead_letter(event, reason)
        return folded.derived

    @app.agent(raw)
    async def process(stream):
        # Batches amortize faust's per-message overhead; the batch's offsets are acknowledged only
        # after its derived events were acknowledged by the brokers.
        async for batch in stream.take_events(BATCH, within=BATCH_WAIT_S):
            derived = []
            for event in batch:
                derived += await handle(event)
            pending = [await derived_topic.send(key=key, value=value)
                       for key, value in map(route.derived_message, derived)]
            for sent in pending:
                await sent

    # (faust's annotation wants a `signal` keyword argument; it arrives in **kwargs)
    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def on_revoked(app_, revoked, **kwargs):  # another worker owns these runs now
        folder.processor.forget(folder.processor.open_runs())

    return app


def run_worker(dsn: str, loglevel: str = "WARNING", ended_window: int | None = None) -> None:
    app = build_app(dsn, ended_window)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()
