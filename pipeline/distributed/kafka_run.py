"""`membench run --bus kafka://…`: run a grid in this process and publish its events to Kafka
(processors and the sink run as separate processes)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pipeline.settings import Settings


def run_distributed(pack_spec, conditions, seeds, agent, workers, run_set, sandbox_name, read_budget,
                    settings: Settings) -> str:
    from producers.bus.kafka import KafkaBus, SharedUnitBus, read_unit_status
    from producers.pack_resolver import open_pack
    from producers.grid import RunConfig, code_digest, default_run_set, plan_grid, run_grid, run_id_for
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
    shared = SharedUnitBus(bus, attempts)
    shared.mark_started({u.unit_id: run_id_for(run_set, u, attempts[u.unit_id]) for u in todo})

    def done(unit, run_id):
        shared.completed(unit.unit_id, run_id)
        progress.update(bar, advance=1, description=unit.unit_id)

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("units", total=len(todo))
        run_grid(pack, todo, config, get_sandbox(sandbox_name), shared.publish, workers, attempts, done)
    bus.close()
    console.print(f"published run set {run_set}; when `membench sink --until-idle` has drained the topics, "
                  f"`membench report {run_set}` builds the report")
    print(run_set)
    return run_set
