"""`membench run PACK --bus kafka://… --enqueue`: one order per unit on the units topic, for
`membench runner` processes on any machine; nothing runs here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from membench.pipeline.settings import Settings

if TYPE_CHECKING:
    from membench.pipeline.run_display import RunDisplay


def enqueue_grid(pack_spec, conditions, seeds, agent, run_set, sandbox_name, read_budget, settings: Settings,
                 model: dict | None = None, display: RunDisplay | None = None) -> str:
    """Put the grid's units that are not complete (and not already queued) on the units topic, each
    marked `queued` on the unit-status topic, say so on DISPLAY (default: nothing) and return the run
    set id (the CLI prints it). Nothing runs here. `model`: the run set's model settings
    (`membench.runner.unit_queue.ModelOrder`), carried by every order."""
    from confluent_kafka import Producer

    from membench.bus.kafka import KafkaBus, read_unit_status
    from membench.packs.pack_resolver import open_pack
    from membench.runner.grid import default_run_set, plan_grid
    from membench.bus.unit_status import DONE_STATUSES
    from membench.runner.unit_queue import UnitOrder
    from membench.pipeline.run_display import SilentDisplay
    from membench.bus.kafka_config import producer_config

    console = display if display is not None else SilentDisplay()
    pack = open_pack(pack_spec, settings.home)
    run_set = run_set or default_run_set(pack.name, pack.digest, agent, conditions, seeds)
    bus = KafkaBus(settings.bus, run_set, settings.runs_dir / run_set / "spool")
    status = read_unit_status(bus.topics, run_set)
    units = plan_grid(pack, conditions, seeds)
    # a unit already queued or running has its order on the topic; a second order would only be skipped
    todo = [u for u in units if status.get(u.unit_id, {}).get("status") not in (*DONE_STATUSES, "queued", "started")]
    producer = Producer(producer_config(bus.bootstrap))
    for unit in todo:
        order = UnitOrder(run_set, pack_spec, pack.digest, agent, sandbox_name, read_budget, unit.suite, unit.task,
                          unit.condition, unit.seed, model=model)
        bus.mark_unit(unit.unit_id, "queued", "", status.get(unit.unit_id, {}).get("attempt", 0))
        producer.produce(bus.topics.units, order.to_json(), order.key.encode())
    bus.flush()  # the queued marks before the orders: a runner may claim an order at once
    if producer.flush(60) != 0:
        raise RuntimeError(f"unit orders not acknowledged by Kafka at {bus.bootstrap}")
    bus.close()
    console.print(f"run set [bold]{run_set}[/] on {settings.bus}: {len(units)} units, {len(todo)} queued for "
                  f"`membench runner`, {len(units) - len(todo)} already complete, queued or running")
    return run_set
