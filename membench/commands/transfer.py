"""`membench transfer STUDY`: run EngramBench's transfer protocol (docs/transfer.md).

The learning phase runs first (one learning unit per seed: learning tasks in order, each distilled
by the scripted distiller or the sandboxed agent's own session, banks frozen), then the transfer
units (project × condition × seed) against the frozen banks; `--phase` runs one of the two.
Embedded (default) it ends with the report (report.json with a `transfer` section, report.md,
report.html) and the log root, as `membench run` does; on Kafka it publishes and `membench sink` /
`membench report` follow.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membench.commands.cli_helpers import dsn_options, open_warehouse, parse_list, parse_seeds, validate_run_set_id
from membench.commands.model_options import ModelOptions, check_model_options, model_options, start_gateway
from membench.errors import UsageError
from pipeline.settings import Settings
from sandbox.registry import BACKENDS

BUILT_IN = Path(__file__).resolve().parent.parent.parent / "fixtures"


def resolve_study(spec: str) -> Path:
    """A built-in study name (a directory of fixtures/ with a study.json) or a study directory."""
    built_in = BUILT_IN / spec
    if "/" not in spec and (built_in / "study.json").is_file():
        return built_in
    return Path(spec)


def default_transfer_run_set(study, agent: str, conditions: list[str], seeds: list[int], user: str = "scripted",
                             replay: bool = False) -> str:
    """As `membench run`'s default id; a model user, or a replay, makes a run set of its own (the
    scripted user's ids stay as they were)."""
    from producers.grid import default_run_set

    key = agent + ("" if user == "scripted" else f"+user={user}") + ("+replay" if replay else "")
    run_set = default_run_set(study.name, study.digest, key, conditions, seeds)
    if key == agent:
        return run_set
    # default_run_set names the run set after the key's last `:` part; keep the agent's name in it
    short = default_run_set(study.name, study.digest, agent, conditions, seeds).rsplit("-", 1)[0]
    return f"{short}-{run_set.rsplit('-', 1)[1]}"


class _UserNeedsGateway:
    """The agent as check_model_options sees it when the simulated user is a model: the gateway is used."""

    needs_gateway = True

    def __init__(self, agent):
        self.name = agent.name


@click.command()
@click.argument("study")
@click.option("--agent", default="scripted:memory-literal", show_default=True)
@click.option("--conditions", default="no_memory,learned_bank,native_bank,ablated_bank", show_default=True,
              help="comma-separated transfer conditions")
@click.option("--seeds", default="1", show_default=True, help="comma-separated integer seeds")
@click.option("--phase", type=click.Choice(["all", "learning", "transfer"]), default="all", show_default=True,
              help="run both phases, or only one (transfer needs a completed learning phase)")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="transfer units run concurrently")
@click.option("--run-set", "run_set", default=None, help="run set id (default: derived from study, agent, grid)")
@click.option("--sandbox", "sandbox_name", default="bwrap", show_default=True, type=click.Choice(list(BACKENDS)))
@click.option("--read-budget", default=2000, show_default=True, type=click.IntRange(0), help="memory read budget (tokens)")
@click.option("--user", "user", default="scripted", show_default=True, metavar="scripted|model:MODEL",
              help="the simulated user: the deterministic scripted one, or a model through the model gateway "
                   "(--model-base-url with the key in MEMBENCH_MODEL_API_KEY, or --model-replay RUN_SET)")
@model_options
@dsn_options
def transfer(study: str, agent: str, conditions: str, seeds: str, phase: str, workers: int, run_set: str | None,
             sandbox_name: str, read_budget: int, user: str, model: ModelOptions, settings: Settings) -> None:
    """Run the transfer study STUDY (a built-in name such as transfer-v1, or a study directory)."""
    from producers.agents.model_agents import LoopLimits
    from producers.agents.registry import make_agent
    from producers.grid import RunConfig, code_digest
    from producers.transfer.model_user import model_of
    from schemas.transfer_format import CONDITIONS, TransferFormatError, load_study

    validate_run_set_id(run_set)
    condition_list = parse_list(conditions, "--conditions")
    for c in condition_list:
        if c not in CONDITIONS:
            raise UsageError(f"--conditions: unknown transfer condition '{c}' (known: {', '.join(CONDITIONS)})")
    seed_list = parse_seeds(seeds)
    loop = LoopLimits(model.max_steps, model.max_tokens)
    try:
        made = make_agent(agent, loop, with_gateway=model.used)
    except ValueError as exc:
        raise UsageError(f"--agent: {exc}") from None
    try:
        user_model = model_of(user)
    except ValueError as exc:
        raise UsageError(f"--user: {exc}") from None
    if user_model is not None and not (model.base_urls or model.replay):
        raise UsageError(f"--user {user}: a model user needs --model-base-url URL (with the key in "
                         "MEMBENCH_MODEL_API_KEY) or --model-replay RUN_SET")
    if model.used and user_model is None and not getattr(made, "needs_gateway", False):
        raise UsageError(f"--agent {made.name} and the scripted user call no model: --model-* options apply to "
                         "--user model:MODEL and to model agents")
    check_model_options(model, _UserNeedsGateway(made) if user_model is not None else made)
    if model.used and settings.bus.startswith("kafka://"):
        raise UsageError("--model-*: models run on the embedded bus (file://) for now; the gateway and its "
                         "recordings live beside one runner's log")
    try:  # everything is validated before anything is written
        loaded = load_study(resolve_study(study))
    except TransferFormatError as exc:
        raise UsageError(str(exc)) from None
    for project in loaded.projects:  # e.g. a published hard cap with no case mapping: it can never fire
        for warning in project.evaluator.warnings:
            click.echo(f"warning: {warning}", err=True)
    run_set = run_set or default_transfer_run_set(loaded, agent, condition_list, seed_list, user,
                                                  replay=bool(model.replay))
    if model.replay == run_set:
        raise UsageError(f"--model-replay {run_set}: a run set cannot replay itself; name another --run-set")
    from producers.gateway.preflight import targets_for

    gateway = start_gateway(model, settings.runs_dir, run_set, targets_for(made, user_model=user_model))
    config = RunConfig(run_set, made.name, read_budget=read_budget, code_digest=code_digest(),
                       blob_dir=settings.runs_dir / run_set / "blobs", gateway=gateway, loop=loop, user=user)

    def new_agent():  # one agent object per unit
        return make_agent(agent, loop, with_gateway=model.used)

    if settings.bus.startswith("kafka://"):
        _run_kafka(loaded, condition_list, seed_list, phase, new_agent, workers, config, sandbox_name, settings)
        return
    _run_embedded(loaded, condition_list, seed_list, phase, new_agent, workers, config, sandbox_name, settings)


def _frozen_from_events(events) -> dict[tuple[int, str], str]:
    """(seed, bank) -> digest, from SkillBankFrozen events (the newest learning run of a seed wins)."""
    out: dict[tuple[int, str], str] = {}
    for seed, payload in events:
        out[(seed, payload["bank"])] = payload["digest"]
    return out


def _frozen_from_warehouse(warehouse, run_set: str) -> dict[tuple[int, str], str]:
    rows = warehouse.query_dicts(
        "SELECT r.seed AS seed, e.payload AS payload FROM "
        "(SELECT run_id, payload, seq FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'SkillBankFrozen' "
        " LIMIT 1 BY event_id) AS e "
        "JOIN (SELECT run_id, seed FROM run_results WHERE run_set = {rs:String} AND status = 'completed' "
        " LIMIT 1 BY run_id) AS r ON e.run_id = r.run_id ORDER BY e.run_id, e.seq", {"rs": run_set})
    return _frozen_from_events((int(r["seed"]), json.loads(r["payload"])) for r in rows)


def _frozen_from_topic(topics, study, seeds: list[int], status: dict[str, dict]) -> dict[tuple[int, str], str]:
    """(seed, bank) -> digest from the SkillBankFrozen events of each seed's completed learning run
    (its run id from the unit-status topic), read from the trajectory topic."""
    from producers.bus.kafka import read_run_events
    from producers.transfer.transfer_units import learning_unit

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

    from producers.transfer.bank import CONDITION_BANKS
    from producers.transfer.transfer_units import FrozenBank, bank_dir, learning_unit, plan_transfer, run_learning, run_transfer
    from sandbox.registry import get_sandbox

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


def _run_embedded(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings) -> None:
    from membench.commands.run import print_table, refuse, write_log_root, write_report
    from pipeline.embedded import EmbeddedPipeline
    from audit.log_root_record import LogRootError, check_warehouse, describes, read_record, record_path, warehouse_state
    from producers.bus.base import run_set_log_path
    from reports.build import ReportError, build_report
    from warehouse import queries

    console = Console(stderr=True)
    run_set = config.run_set
    root_file = record_path(settings.runs_dir, run_set)
    warehouse = open_warehouse(settings)
    try:
        if root_file.exists():  # as `membench run`: an edited warehouse is refused, not laundered into a new root
            try:
                recorded = read_record(root_file)
            except LogRootError as exc:
                refuse(console, [str(exc)], "transfer")
            if describes(recorded, settings.warehouse):
                problems = check_warehouse(warehouse_state(warehouse, run_set), recorded, new_runs_allowed=True)
                if problems:
                    refuse(console, problems, "transfer")
        pipeline = EmbeddedPipeline(run_set_log_path(settings.runs_dir, run_set), warehouse)
        try:
            pipeline.recover(run_set)
            done = queries.completed_units(warehouse, run_set)
            attempts = {u: n + 1 for u, n in queries.attempts_started(warehouse, run_set).items()}
            frozen = _frozen_from_warehouse(warehouse, run_set)
            total = len(seeds) * (phase != "transfer") + len(study.projects) * len(conditions) * len(seeds) * (
                phase != "learning")
            console.print(f"run set [bold]{run_set}[/]: study {study.name}, phase {phase}, {total} units "
                          f"(some may be complete already)")
            with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console) as progress:
                bar = progress.add_task("units", total=total)
                _phases(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings,
                        pipeline.publish, done, attempts, frozen,
                        lambda unit, run_id: progress.update(bar, advance=1, description=unit.unit_id))
        finally:
            pipeline.close()
        try:
            report = build_report(warehouse, run_set)
        except ReportError as exc:  # e.g. no baseline: what ran is recorded, the report is built later
            raise UsageError(f"{exc}; the units ran and are recorded: add no_memory to --conditions (completed "
                             f"units are skipped) or run `membench report {run_set} --baseline COND`") from None
        state = warehouse_state(warehouse, run_set)
    finally:
        warehouse.close()
    write_log_root(console, root_file, state, None, settings.warehouse)
    out = write_report(settings, report)
    print_table(Console(), report)
    if report.transfer is not None:
        print_transfer(Console(), report.transfer)
    console.print(f"report: {out / 'report.json'}  ·  log: {out / 'events.avro'}", highlight=False, markup=False,
                  soft_wrap=True)


def print_transfer(console: Console, section) -> None:
    from rich.table import Table

    table = Table(title="transfer: CCPF and weighted score per project and condition")
    for column in ("project", "condition", "runs", "CCPF", "weighted score", "caps fired", "excluded"):
        table.add_column(column, justify="left" if column in ("project", "condition", "caps fired") else "right")
    for row in section.projects:
        ccpf = "—" if row.ccpf_micro is None else f"{row.ccpf_micro:.3f}"
        score = "—" if row.weighted_score_mean is None else f"{row.weighted_score_mean:.1f}"
        table.add_row(row.project, row.condition, str(row.runs), ccpf, score, ", ".join(row.caps_fired) or "—",
                      str(row.excluded))
    console.print(table)


def _run_kafka(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings) -> None:
    """Publish to Kafka; unit status on the compacted topic makes the run resumable. The frozen bank
    digests of completed learning units come from their `SkillBankFrozen` events on the trajectory
    topic (`_frozen_from_topic`), so `--phase transfer` runs on any machine that holds the banks."""
    from producers.bus.kafka import KafkaBus, SharedUnitBus, read_unit_status
    from producers.grid import run_id_for
    from producers.transfer.transfer_units import learning_unit, plan_transfer

    console = Console(stderr=True)
    run_set = config.run_set
    bus = KafkaBus(settings.bus, run_set, settings.runs_dir / run_set / "spool")
    status = read_unit_status(bus.topics, run_set)
    units = ([learning_unit(study, s) for s in seeds] if phase != "transfer" else []) + (
        plan_transfer(study, conditions, seeds) if phase != "learning" else [])
    done = {u.unit_id for u in units if status.get(u.unit_id, {}).get("status") in ("completed", "excluded")}
    frozen = {}
    if phase != "learning":
        frozen = _frozen_from_topic(bus.topics, study, seeds, status)
        missing = [s for s in seeds if not any(seed == s for seed, _ in frozen)]
        if phase == "transfer" and missing:
            console.print(f"no completed learning unit of seed(s) {', '.join(map(str, missing))} on the trajectory "
                          f"topic: their bank conditions are excluded (skill_bank_modified)", highlight=False,
                          markup=False)
    attempts = {u.unit_id: status.get(u.unit_id, {}).get("attempt", 0) + 1 for u in units}
    shared = SharedUnitBus(bus, attempts)
    shared.mark_started({u.unit_id: run_id_for(run_set, u, attempts[u.unit_id]) for u in units
                         if u.unit_id not in done})
    _phases(study, conditions, seeds, phase, new_agent, workers, config, sandbox_name, settings, shared.publish,
            done, attempts, frozen, lambda unit, run_id: shared.completed(unit.unit_id, run_id))
    bus.close()
    console.print(f"published run set {run_set}; when `membench sink --until-idle` has drained the topics, "
                  f"`membench report {run_set}` builds the report", highlight=False, markup=False)
    print(run_set)
