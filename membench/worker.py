"""`membench process`: the processors inside a faust-streaming worker (DESIGN.md §2, §7).

The worker consumes the trajectory topic (raw bytes), decodes each message, runs the same pure
`RunSetProcessor` as the embedded path, and publishes derived events (Avro single-object
encoding, key run_id) to the derived topic. A message that does not decode or that a processor
rejects goes to the dead-letter topic with the reason; the stream goes on.

Offsets: a run's events are acknowledged only when the run has been folded to its end, so the
committed offset never passes the first event of an open run. After a crash the worker re-reads
from there, rebuilds every open run's state, and re-derives completed runs with identical
derived ids (the sink and reports deduplicate by derived id).
"""

from __future__ import annotations

import logging
from collections import defaultdict

import faust

from processors import RunSetProcessor
from schemas.codec import DecodeError, decode, encode
from schemas.events import Event
from schemas.registry import default_registry
from schemas.topics import DEADLETTER, DERIVED, TRAJECTORY, bootstrap_from_dsn

log = logging.getLogger("membench.worker")


def build_app(dsn: str, group: str = "membench-processor") -> faust.App:
    bootstrap = bootstrap_from_dsn(dsn)
    app = faust.App(
        group,
        broker=[f"kafka://{b}" for b in bootstrap.split(",")],
        value_serializer="raw",
        key_serializer="raw",
        store="memory://",
        web_enabled=False,
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        broker_commit_every=100,
        broker_commit_interval=1.0,
    )
    raw = app.topic(TRAJECTORY, key_type=bytes, value_type=bytes, allow_empty=True)
    derived_topic = app.topic(DERIVED, key_type=bytes, value_type=bytes)
    dead_topic = app.topic(DEADLETTER, key_type=bytes, value_type=bytes)
    derived_schema = default_registry().latest("derived")
    processor = RunSetProcessor()
    held: dict[str, list] = defaultdict(list)  # run_id -> faust events not yet acknowledged

    async def dead_letter(event, reason: str) -> None:
        await dead_topic.send(key=event.key, value=event.value or b"",
                              headers={"reason": reason.encode()[:1000],
                                       "source": f"{event.message.partition}:{event.message.offset}".encode()})

    @app.agent(raw)
    async def process(stream):
        async for event in stream.noack().events():
            try:
                _, record = decode(event.value or b"")
                raw_event = Event.from_record(record)
            except (DecodeError, KeyError, TypeError, ValueError) as exc:
                await dead_letter(event, f"undecodable: {exc}")
                event.ack()
                continue
            letters_before = len(processor.dead_letters)
            derived = processor.apply(raw_event)
            for letter in processor.dead_letters[letters_before:]:
                await dead_letter(event, f"rejected by processor at run {letter.run_id} seq {letter.seq}: "
                                         f"{letter.reason}")
            for item in derived:
                await derived_topic.send(key=item.run_id.encode(), value=encode(derived_schema, item.to_record()))
            held[raw_event.run_id].append(event)
            if raw_event.run_id not in processor.open_runs():  # folded to its end (or a duplicate)
                for pending in held.pop(raw_event.run_id):
                    pending.ack()

    @app.on_partitions_revoked.connect
    async def on_revoked(app_, revoked, **kwargs):  # another worker owns these runs now
        processor.forget(list(held))
        held.clear()

    return app


def run_worker(dsn: str, loglevel: str = "WARNING") -> None:
    app = build_app(dsn)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()
