"""`membench runner`: claim units of any grid from the units topic and run them;
`membench runner --progress` shows every grid's progress from any machine."""

from __future__ import annotations

import json

import click

from membench.commands.cli_helpers import dsn_options, require_kafka
from membench.errors import UsageError
from membench.pipeline.settings import Settings


@click.command()
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 512),
              help="units run concurrently (for model-driven agents, many per core: membench/pipeline/worker_count.py)")
@click.option("--until-idle", is_flag=True, help="exit once every queued unit of every runner is complete")
@click.option("--idle-seconds", default=5.0, show_default=True, help="quiet time that counts as idle")
@click.option("--max-poll-interval", "max_poll_s", default=21600.0, show_default=True,
              type=click.FloatRange(10.0, 86400.0),
              help="seconds this runner may stall before the group hands its units to another runner (which "
                   "fences the stalled attempts)")
@click.option("--stop-grace", "stop_grace", type=click.FloatRange(0), default=30.0, show_default=True,
              help="seconds running units get to finish after a first Ctrl-C / SIGTERM; a second one exits at once")
@click.option("--progress", "progress", is_flag=True, help="print each run set's unit counts and exit")
@click.option("--run-set", "run_set", default=None, help="with --progress: only this run set")
@click.option("--json", "as_json", is_flag=True, help="with --progress: JSON")
@dsn_options
def runner(workers: int, until_idle: bool, idle_seconds: float, max_poll_s: float, stop_grace: float,
           progress: bool, run_set: str | None, as_json: bool, settings: Settings) -> None:
    """Run units queued by `membench run PACK --bus kafka://… --enqueue`, on this machine, in the
    `runner` consumer group: start one or more on every machine; each unit runs to completion once,
    and a runner that dies hands its units to the others. For a grid queued with --model-* options
    the runner hosts the model gateway, with the key from its own environment (MEMBENCH_MODEL_API_KEY),
    after probing the models and checking each condition's conformance record here (docs/gateway.md)."""
    if not settings.bus.startswith("kafka://"):
        raise UsageError("--bus: `membench runner` needs a Kafka bus (--bus kafka://HOST:PORT)")
    if not progress and (run_set is not None or as_json):
        raise UsageError("--run-set and --json go with --progress")
    from membench.pipeline.distributed.progress import grid_progress
    from membench.pipeline.distributed.group_member import RunnerError, UnitRunner
    from membench.bus.kafka import ensure_topics
    from membench.bus.topics import topics_from_dsn

    require_kafka(settings.bus)
    ensure_topics(topics_from_dsn(settings.bus))
    if progress:
        counts = grid_progress(settings, run_set)
        if as_json:
            click.echo(json.dumps(counts, sort_keys=True))
            return
        for rs, entry in counts.items():
            click.echo(f"{rs}: {entry['completed'] + entry['excluded']}/{entry['units']} complete, "
                       f"{entry['started']} running, {entry['queued']} queued, "
                       f"{entry['attempts_abandoned']} abandoned attempt(s)")
        return
    from membench.errors import end_stopped, hard_exit, stop_exit_status
    from membench.commands.cli_helpers import this_command
    from membench.pipeline.stopping import GridStop

    # a first SIGINT/SIGTERM claims nothing more and lets the running units finish within --stop-grace;
    # a second (or the period's end) fences what they publish and kills their sandboxes; the attempts
    # they left open are closed as abandoned and their orders stay queued for the group (docs/design.md §2)
    # a third ends the process at once (hard_exit), whatever unit thread or Kafka client still hangs
    stop = GridStop(stop_grace, say=lambda text: click.echo(f"runner: {text}", err=True), hard_exit=hard_exit)
    try:
        with stop.installed():
            member = UnitRunner(settings, workers, max_poll_interval_ms=int(max_poll_s * 1000),
                               admit=admitted_here(settings))
            stop.on_kill.append(member.fence)
            stats = member.run(until_idle, idle_seconds, stop)
    except RunnerError as exc:  # the unit is left to a runner that has its pack
        click.echo(f"runner: {exc}", err=True)
        raise SystemExit(1) from None
    click.echo(json.dumps(stats.__dict__))
    if stop.asked:
        click.echo(f"runner: stopped ({stats.completed} units completed here, {stats.closed} attempts closed as "
                   "abandoned); the orders not finished stay queued: any runner of the group runs them, or start "
                   f"this one again: {this_command()}", err=True)
        end_stopped(stop_exit_status(stop.stopped))


def admitted_here(settings: Settings):
    """The conformance rule as this runner applies it to each condition it is about to run: its own
    `MEMBENCH_HOME`'s records, for the exact configuration, memory model and upstream of the order
    (`membench memory check` on this machine admits it). None: admitted; else why not."""
    from membench.commands.memory import conformance_status

    def admit(condition: str, memory_model: str | None, base_urls: dict[str, str], any_upstream: bool) -> str | None:
        status, why = conformance_status(settings.home, condition, memory_model, base_urls, any_upstream)
        return None if status in ("conformant", "built_in") else why

    return admit
