"""`membench run --bus kafka://…`: run a grid in this process and publish its events to Kafka
(processors and the sink run as separate processes); the publication's steps are
`pipeline.distributed.publication`'s, shared with the transfer study."""

from __future__ import annotations

import os
import socket

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pipeline.settings import Settings


def run_distributed(pack_spec, conditions, seeds, agent, workers, run_set, sandbox_name, read_budget,
                    settings: Settings, models=None) -> str:
    """`models` (pipeline.distributed.runner_models.HostedModels): the gateway this process hosts for
    its units, None when they call no model."""
    from pipeline.distributed.publication import KafkaPublication
    from producers.bus.kafka_blobs import share_blobs
    from producers.pack_resolver import open_pack
    from producers.grid import RunConfig, code_digest, default_run_set, plan_grid, run_grid
    from sandbox.registry import get_sandbox

    console = Console(stderr=True)
    pack = open_pack(pack_spec, settings.home)
    run_set = run_set or default_run_set(pack.name, pack.digest, agent, conditions, seeds)
    publication = KafkaPublication(settings, run_set)
    units = plan_grid(pack, conditions, seeds)
    todo = publication.todo(units)
    console.print(f"run set [bold]{run_set}[/] on {settings.bus}: {len(units)} units, "
                  f"{len(units) - len(todo)} already complete, {len(todo)} to run with {workers} workers")
    config = RunConfig(run_set, agent, read_budget=read_budget, code_digest=code_digest(),
                       blob_dir=settings.runs_dir / run_set / "blobs",  # this runner's MEMBENCH_HOME
                       memory_dir=settings.runs_dir / run_set / "memory" / f"{socket.gethostname()}-{os.getpid()}",
                       gateway=models and models.gateway, loop=models and models.loop,
                       memory_model=models and models.memory_model)
    publication.start(todo)

    from pipeline.grid_run import plain_progress

    lines = plain_progress(console, len(todo))  # a redirected run still reports progress

    def done(unit, run_id):
        publication.completed(unit, run_id)
        progress.update(bar, advance=1, description=unit.unit_id)
        lines.unit_done()

    def publish(event, datum):
        share_blobs(publication.bus, config.blob_dir, event)  # the blobs it names, for runners and replays
        publication.publish(event, datum)
        lines.observe(event)

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress, lines.running():
        bar = progress.add_task("units", total=len(todo))
        run_grid(pack, todo, config, get_sandbox(sandbox_name), publish, workers, publication.attempts, done)
    publication.close(console)
    return run_set
