"""`membench process` (processor worker: the confluent-kafka engine or faust-streaming) and
`membench sink` (topics → warehouse)."""

from __future__ import annotations

import json
import sys

import click

from membench.commands.cli_helpers import dsn_options, open_warehouse, require_kafka
from membench.errors import UsageError
from membench.pipeline.settings import Settings


def _require_kafka(settings: Settings) -> None:
    if not settings.bus.startswith("kafka://"):
        raise UsageError("--bus: this command needs a Kafka bus (--bus kafka://HOST:PORT)")


@click.command()
@click.option("--engine", type=click.Choice(["kafka", "faust"]), default="kafka", show_default=True,
              help="kafka: the confluent-kafka consumer (faster, docs/benchmarks.md); faust: faust-streaming")
@click.option("--ended-window", default=None, type=click.IntRange(min=1),
              help="ended run ids remembered to drop redelivered events (default: membench.processors.run_set_processor.ENDED_WINDOW)")
@click.option("--until-idle", default=None, type=click.FloatRange(min=0.1),
              help="kafka engine: exit after this many seconds without a message")
@click.option("--loglevel", default="WARNING", show_default=True)
@dsn_options
def process(engine: str, ended_window: int | None, until_idle: float | None, loglevel: str,
            settings: Settings) -> None:
    """Run a processor worker: trajectory topic → derived and dead-letter topics. Start several
    to scale out (one consumer group)."""
    _require_kafka(settings)
    if until_idle is not None and engine != "kafka":
        raise UsageError("--until-idle: only the kafka engine stops when idle")
    require_kafka(settings.bus)  # the options checked: now the bus must answer
    from membench.bus.kafka import ensure_topics
    from membench.bus.topics import topics_from_dsn

    ensure_topics(topics_from_dsn(settings.bus))
    if engine == "kafka":
        from membench.pipeline.kafka_engine import run_engine

        done = run_engine(settings.bus, loglevel, until_idle, ended_window)
        click.echo(json.dumps({"messages": done.messages, "dead_letters": done.dead_letters}))
        return
    from membench.pipeline.faust_worker import run_worker

    sys.argv = [sys.argv[0]]  # faust's Worker parses the command line itself
    run_worker(settings.bus, loglevel, ended_window)


@click.command()
@click.option("--until-idle", is_flag=True, help="drain the topics, then exit")
@click.option("--idle-seconds", default=5.0, show_default=True, help="quiet time that counts as idle")
@click.option("--batch-size", default=5000, show_default=True)
@dsn_options
def sink(until_idle: bool, idle_seconds: float, batch_size: int, settings: Settings) -> None:
    """Move the raw and derived topics into the warehouse, exactly once."""
    _require_kafka(settings)
    require_kafka(settings.bus)
    from membench.bus.kafka import ensure_topics
    from membench.bus.topics import topics_from_dsn
    from membench.warehouse.kafka_sink import KafkaSink

    ensure_topics(topics_from_dsn(settings.bus))
    warehouse = open_warehouse(settings)
    try:
        stats = KafkaSink(settings.bus, warehouse, batch_size=batch_size).run(until_idle, idle_seconds)
    finally:
        warehouse.close()
    click.echo(json.dumps(stats.__dict__))
