"""The distributed wiring: `membench run --bus kafka://…` publishes to Kafka (processors and the
sink run as separate processes), and replay can read the trajectory topic from the start."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membench.settings import Settings
from schemas.events import Event
from schemas.registry import SchemaVersion


def run_distributed(pack_spec, conditions, seeds, agent, workers, run_set, sandbox_name, read_budget,
                    settings: Settings) -> str:
    from producers.bus.kafka import KafkaBus, read_unit_status
    from producers.pack_resolver import open_pack
    from producers.runner import RunConfig, code_digest, default_run_set, plan_grid, run_grid, run_id_for
    from sandbox.registry import get_sandbox

    console = Console(stderr=True)
    pack = open_pack(pack_spec, settings.home)
    run_set = run_set or default_run_set(pack.name, pack.digest, agent, conditions, seeds)
    bus = KafkaBus(settings.bus, run_set, settings.runs_dir / run_set / "spool")
    status = read_unit_status(bus.topics, run_set)
    units = plan_grid(pack, conditions, seeds)
    todo = [u for u in units if status.get(u.unit_id, {}).get("status") not in ("completed", "excluded")]
    attempts = {u.unit_id: status.get(u.unit_id, {}).get("attempt", 0) + 1 for u in todo}
    console.print(f"run set [bold]{run_set}[/] on {settings.bus}: {len(units)} units, "
                  f"{len(units) - len(todo)} already complete, {len(todo)} to run with {workers} workers")
    config = RunConfig(run_set, agent, read_budget=read_budget, code_digest=code_digest(),
                       blob_dir=settings.runs_dir / run_set / "blobs")  # this runner's MEMBENCH_HOME
    for unit in todo:  # recorded before the run, so a crashed runner's retry gets a new attempt number
        bus.mark_unit(unit.unit_id, "started", run_id_for(run_set, unit, attempts[unit.unit_id]), attempts[unit.unit_id])
    bus.flush()
    lock = threading.Lock()

    def publish(event, datum):
        with lock:
            bus.publish(event, datum)

    def done(unit, run_id):
        with lock:
            bus.flush()  # a unit is complete only once Kafka acknowledged all of its events
            bus.mark_unit(unit.unit_id, "completed", run_id, attempts[unit.unit_id])
            bus.flush()
        progress.update(bar, advance=1, description=unit.unit_id)

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("units", total=len(todo))
        run_grid(pack, todo, config, get_sandbox(sandbox_name), publish, workers, attempts, done)
    bus.close()
    console.print(f"published run set {run_set}; when `membench sink --until-idle` has drained the topics, "
                  f"`membench report {run_set}` builds the report")
    print(run_set)
    return run_set


def events_from_kafka(dsn: str, findings: list, timeout: float = 30.0) -> Iterator[tuple[Event, SchemaVersion]]:
    """Every event of the trajectory topic from the start, partition by partition (a run lives in
    one partition, so its order is kept), with the writer schema its message names: replay
    recomputes the hash with it, so the datum is decoded as written, not resolved to the newest."""
    import os

    from confluent_kafka import Consumer, TopicPartition

    from membench.replay import Finding
    from schemas.codec import DecodeError, decode_datum, unframe
    from schemas.topics import topics_from_dsn

    topics = topics_from_dsn(dsn)
    TRAJECTORY = topics.trajectory
    consumer = Consumer({"bootstrap.servers": topics.bootstrap, "group.id": topics.group(f"replay-{os.getpid()}"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        meta = consumer.list_topics(TRAJECTORY, timeout=timeout)
        for partition in sorted(meta.topics[TRAJECTORY].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(TRAJECTORY, partition), timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(TRAJECTORY, partition, low)])
            position, deadline = low, time.monotonic() + timeout
            while position < high and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 1.0):
                    if msg.error():
                        continue
                    position = msg.offset() + 1
                    try:
                        writer, datum = unframe(msg.value() or b"")
                        try:
                            record = decode_datum(writer, datum)
                        except DecodeError:
                            raise
                        except Exception as exc:  # fastavro raises many types on corrupt data
                            raise DecodeError(f"datum does not match schema {writer.family}.v{writer.version}: "
                                              f"{exc}") from exc
                        yield Event.from_record(record), writer
                    except DecodeError as exc:
                        findings.append(Finding("?", None, f"partition {partition} offset {msg.offset()}: {exc}"))
    finally:
        consumer.close()
