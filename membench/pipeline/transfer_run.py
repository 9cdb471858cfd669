"""The transfer study's two phases on either bus (`membench transfer`, docs/transfer.md): the
learning units, then the transfer units against the banks they froze, skipping completed units.
Embedded it ends with the report and the log root, as the grid run does (`membench.pipeline.grid_run`); on
Kafka it publishes, with the unit statuses on the compacted topic, and `membench sink` / `membench
report` follow. Either shows itself on the caller's display (`membench.pipeline.run_display`)."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from membench.pipeline.grid_run import (RunRefused, exit_unless_verified, open_embedded, open_warehouse, resume_point,
                               verify_written, write_log_root, write_report)

if TYPE_CHECKING:
    from membench.pipeline.run_display import RunDisplay


def _frozen_from_events(events) -> dict[tuple[int, str], str]:
    """(seed, bank) -> digest, from SkillBankFrozen events (the newest learning run of a seed wins)."""
    out: dict[tuple[int, str], str] = {}
    for seed, payload in events:
        out[(seed, payload["bank"])] = payload["digest"]
    return out


def _frozen_from_warehouse(warehouse, run_set: str) -> dict[tuple[int, str], str]:
    from membench.warehouse import queries

    return _frozen_from_events(queries.frozen_bank_events(warehouse, run_set))


def _frozen_from_topic(topics, study, seeds: list[int], status: dict[str, dict]) -> dict[tuple[int, str], str]:
    """(seed, bank) -> digest from the SkillBankFrozen events of each seed's completed learning run
    (its run id from the unit-status topic), read from the trajectory topic."""
    from membench.bus.kafka import read_run_events
    from membench.transfer_protocol.transfer_units import learning_unit

    runs = {}
    for seed in seeds:
        record = status.get(learning_unit(study, seed).unit_id, {})
        if record.get("status") == "completed" and record.get("run_id"):
            runs[record["run_id"]] = seed
    if not runs:
        return {}
    events = read_run_events(topics, set(runs), {"SkillBankFrozen"})
    return _frozen_from_events((runs[e.run_id], e.payload) for e in events)


def _phases(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings, publish,
            done_units: set[str], attempts: dict[str, int], frozen: dict[tuple[int, str], str], on_done) -> None:
    """Run the learning units, then the transfer units, skipping completed ones."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from membench.transfer_protocol.bank import CONDITION_BANKS
    from membench.transfer_protocol.transfer_units import FrozenBank, bank_dir, learning_unit, plan_transfer, run_learning, run_transfer
    from membench.sandbox.registry import get_sandbox

    sandbox = get_sandbox(sandbox_name)
    banks_root = settings.runs_dir / config.run_set / "banks"
    lock = threading.Lock()

    def capture(event, datum):  # the frozen digests of this invocation's learning runs
        if event.kind == "SkillBankFrozen":
            with lock:
                frozen[(int(event.unit_id.rsplit("/", 1)[1]), event.payload["bank"])] = event.payload["digest"]
        publish(event, datum)

    if phase in ("all", "learning"):
        for seed in seeds:
            unit = learning_unit(study, seed)
            if unit.unit_id in done_units:
                continue
            run_id = run_learning(study, seed, config, sandbox, capture, new_agent(), banks_root,
                                  attempts.get(unit.unit_id, 1))
            on_done(unit, run_id)
    if phase == "learning":
        return
    units = [u for u in plan_transfer(study, conditions, seeds) if u.unit_id not in done_units]

    def one(unit):
        bank = CONDITION_BANKS.get(unit.condition)
        frozen_bank = None
        if bank is not None and (unit.seed, bank) in frozen:
            frozen_bank = FrozenBank(bank_dir(banks_root, unit.seed, bank), frozen[(unit.seed, bank)])
        return run_transfer(study, unit, config, sandbox, publish, new_agent(), frozen_bank,
                            attempts.get(unit.unit_id, 1))

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="membench-transfer") as pool:
        futures = {pool.submit(one, u): u for u in units}
        for future in as_completed(futures):
            on_done(futures[future], future.result())


def run_transfer_embedded(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings,
                          display: RunDisplay | None = None) -> None:
    """The phases on the embedded pipeline, then the report and the log root, shown on DISPLAY
    (default: nothing). A report that cannot be built raises `RunRefused` (the units are recorded); a
    log that does not verify, `LogNotVerified` once everything is written."""
    from membench.audit.log_root_record import record_path, warehouse_state
    from membench.pipeline.run_display import SilentDisplay
    from membench.reports.build import ReportError, build_report
    from membench.warehouse.read_model import WarehouseReadModel

    console = display if display is not None else SilentDisplay()
    run_set = config.run_set
    root_file = record_path(settings.runs_dir, run_set)
    warehouse = open_warehouse(settings)
    try:
        # as `membench run`: an edited warehouse is refused, not laundered into a new root
        pipeline = open_embedded(console, settings, warehouse, run_set, "transfer")
        try:
            pipeline.recover(run_set)
            done, attempts = resume_point(warehouse, run_set)
            frozen = _frozen_from_warehouse(warehouse, run_set)
            total = len(seeds) * (phase != "transfer") + len(study.projects) * len(conditions) * len(seeds) * (
                phase != "learning")
            console.print(f"run set [bold]{run_set}[/]: study {study.name}, phase {phase}, {total} units "
                          f"(some may be complete already)")
            from membench.transfer_protocol.transfer_units import learning_unit, plan_transfer

            planned = ([learning_unit(study, seed).unit_id for seed in seeds] * (phase != "transfer")
                       + [u.unit_id for u in plan_transfer(study, conditions, seeds)] * (phase != "learning"))
            # the progress of the units this invocation runs
            with console.units(len([u for u in planned if u not in done]), passes=False) as shown:
                def publish(event, datum) -> None:
                    pipeline.publish(event, datum)
                    shown.observe(event)

                _phases(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings,
                        publish, done, attempts, frozen, lambda unit, run_id: shown.done(unit.unit_id))
        finally:
            pipeline.close()
        try:
            report = build_report(WarehouseReadModel(warehouse), run_set)
        except ReportError as exc:  # e.g. no baseline: what ran is recorded, the report is built later
            raise RunRefused(f"{exc}; the units ran and are recorded: add no_memory to --conditions (completed "
                             f"units are skipped) or run `membench report {run_set} --baseline COND`") from None
        state = warehouse_state(warehouse, run_set)
    finally:
        warehouse.close()
    write_log_root(console, root_file, state, None, settings.warehouse)
    verified = verify_written(console, settings, run_set)
    out = write_report(settings, replace(report, verification=verified))
    console.report(report)
    console.print(f"report: {out / 'report.json'}  ·  log: {out / 'events.avro'}", highlight=False, markup=False,
                  soft_wrap=True)
    exit_unless_verified(console, verified, settings, run_set)


def run_transfer_kafka(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings,
                       display: RunDisplay | None = None) -> None:
    """Publish to Kafka; unit status on the compacted topic makes the run resumable. The frozen bank
    digests of completed learning units come from their `SkillBankFrozen` events on the trajectory
    topic (`_frozen_from_topic`), so `--phase transfer` runs on any machine that holds the banks.
    What it says goes to DISPLAY (default: nothing); the caller prints the run set's id."""
    from membench.pipeline.distributed.publication import KafkaPublication
    from membench.pipeline.run_display import SilentDisplay
    from membench.bus.kafka_blobs import share_blobs
    from membench.transfer_protocol.transfer_units import learning_unit, plan_transfer

    console = display if display is not None else SilentDisplay()
    publication = KafkaPublication(settings, config.run_set)
    units = ([learning_unit(study, s) for s in seeds] if phase != "transfer" else []) + (
        plan_transfer(study, conditions, seeds) if phase != "learning" else [])
    todo = publication.todo(units)
    done = {u.unit_id for u in units} - {u.unit_id for u in todo}
    frozen = {}
    if phase != "learning":
        frozen = _frozen_from_topic(publication.topics, study, seeds, publication.status)
        missing = [s for s in seeds if not any(seed == s for seed, _ in frozen)]
        if phase == "transfer" and missing:
            console.print(f"no completed learning unit of seed(s) {', '.join(map(str, missing))} on the trajectory "
                          f"topic: their bank conditions are excluded (skill_bank_modified)", highlight=False,
                          markup=False)
    publication.start(todo)

    def publish(event, datum) -> None:
        share_blobs(publication.bus, config.blob_dir, event)  # recorded calls, for a replay on any machine
        publication.publish(event, datum)

    _phases(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings, publish,
            done, publication.attempts, frozen, publication.completed)
    publication.close(console)
