"""`membench run --bus kafka://…`: run a grid in this process and publish its events to Kafka
(processors and the sink run as separate processes); the publication's steps are
`membench.pipeline.distributed.publication`'s, shared with the transfer study.

The grid loop and its clean stop are the embedded run's (`membench.pipeline.stopping`): a first SIGINT or
SIGTERM starts no further unit and gives the running ones `stop_grace` seconds; a second one (or
the period's end) fences the publication and kills their sandboxes; every attempt begun and not
ended is then closed `RunEnded{abandoned}` on the trajectory topic and recorded `abandoned`, the
stop is recorded in runs/<run_set>/partial.json (the report `membench report` builds later is
marked partial), and the partial figures and the command that resumes are shown. A grid whose
oracle harness keeps faulting stops itself the same way. It returns a `PublishedRun` saying how it
ended; the CLI chooses the exit status (130 for a signal, 4 for the harness) and ends the process."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from membench.pipeline.settings import Settings
from membench.pipeline.stopping import GridEnd

if TYPE_CHECKING:
    from membench.pipeline.run_display import RunDisplay


@dataclass(frozen=True)
class PublishedRun(GridEnd):
    """How a grid run on Kafka ended, for its caller (the CLI turns it into the exit status): the
    units to run of the planned ones, and how the grid ended (`GridEnd`)."""

    run_set: str
    units_to_run: int


def run_distributed(pack_spec, conditions, seeds, agent, workers, run_set, sandbox_name, read_budget,
                    settings: Settings, stop_grace: float = 30.0, models=None, display: RunDisplay | None = None,
                    hard_exit: Callable[[], None] | None = None, resume: str | None = None) -> PublishedRun:
    """`models` (membench.pipeline.distributed.runner_models.HostedModels): the gateway this process hosts for
    its units, None when they call no model. Shown on DISPLAY (default: nothing); a third signal
    calls HARD_EXIT (`membench.pipeline.stopping.GridStop`). RESUME: how a stopped run set is
    resumed, as the caller knows it (the CLI: the command that was run)."""
    from membench.pipeline.run_display import SilentDisplay
    from membench.pipeline.stopping import GridStop

    console = display if display is not None else SilentDisplay()
    stop = GridStop(stop_grace, say=lambda text: console.print(text, highlight=False, markup=False, soft_wrap=True),
                    hard_exit=hard_exit)
    with stop.installed():  # around the whole body: a signal while the statuses are read is a clean stop too
        return _publish_grid(console, stop, pack_spec, conditions, seeds, agent, workers, run_set, sandbox_name,
                             read_budget, settings, models,
                             resume or "run the same grid again (completed units are skipped)")


def _publish_grid(console: RunDisplay, stop, pack_spec, conditions, seeds, agent, workers, run_set, sandbox_name,
                  read_budget, settings: Settings, models, resume: str) -> PublishedRun:
    from membench.pipeline.distributed.publication import KafkaPublication
    from membench.bus.kafka_blobs import share_blobs
    from membench.pipeline.stopping import HarnessFaultLimit, StoppableSandbox, clear_partial, run_units, write_partial
    from membench.bus.attempts import describe
    from membench.runner.grid import RunConfig, code_digest, default_run_set, plan_grid, run_unit
    from membench.packs.pack_resolver import open_pack
    from membench.reports.model import PartialRun
    from membench.sandbox.registry import get_sandbox

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
    publication.start(todo, mark=False)  # each unit is marked `started` as it starts: a stop leaves the rest unmarked
    stop.on_kill.append(publication.fence)  # before any sandbox dies: a killed agent is no result
    sandbox = StoppableSandbox(get_sandbox(sandbox_name), stop.killed)
    faults = HarnessFaultLimit(stop)  # a grid whose oracle harness keeps faulting stops itself

    with console.units(len(todo)) as shown:
        def run_one(unit) -> str:
            publication.begin(unit)
            return run_unit(pack, unit, config, sandbox, publish, publication.attempts[unit.unit_id])

        def done(unit, run_id):
            publication.completed(unit, run_id)
            shown.done(unit.unit_id)

        def publish(event, datum):
            share_blobs(publication.bus, config.blob_dir, event)  # the blobs it names, for runners and replays
            publication.publish(event, datum)
            faults.observe(event)
            shown.observe(event)

        not_started = run_units(run_one, todo, workers, done, stop)
    cut = stop.asked  # the grid was stopped (a later signal finds it complete)
    abandoned = publication.close_open() if cut else []
    for event in abandoned:
        console.print(describe(event), highlight=False, markup=False, soft_wrap=True)
    publication.close(console)
    ran = PublishedRun(run_set, units_planned=len(units), units_to_run=len(todo), units_not_started=len(not_started),
                       attempts_abandoned=len(abandoned))
    if not cut:
        clear_partial(settings.runs_dir, run_set)
        return replace(ran, stopped_after_grid=stop.asked)
    partial = PartialRun(reason=stop.cause or "stopped by a signal before the grid finished", units_planned=len(units),
                         units_not_started=len(not_started), attempts_abandoned=len(abandoned), resume=resume)
    path = write_partial(settings.runs_dir, run_set, partial)
    console.print(f"stopped: the run set is partial ({len(todo) - len(not_started) - len(abandoned)} of the {len(todo)} "
                  f"units to run ran to their end, {len(not_started)} units not started, {len(abandoned)} attempts closed as "
                  f"abandoned; recorded in {path}, and `membench report {run_set}` marks its report partial); "
                  f"resume with the same command: {resume}", highlight=False, markup=False, soft_wrap=True)
    if stop.cause is not None:
        console.print(f"stopped because {stop.cause}", highlight=False, markup=False, soft_wrap=True)
    return replace(ran, stopped=stop.stopped, stop_cause=stop.cause, resume=resume)
