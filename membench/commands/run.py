"""`membench run PACK`: plan the grid, run it concurrently with progress, write the report."""

from __future__ import annotations

from pathlib import Path

import click

from membench.commands.model_options import model_options
from membench.commands.cli_helpers import (ReportOptions, baseline_options, compare_option, dsn_options,
                                           exit_if_gates_failed, parse_compare, parse_list, parse_seeds,
                                           require_scoring, run_embedded, strict_option, validate_run_set_id)
from membench.errors import EXIT_OK, UsageError, end_stopped, hard_exit, stop_exit_status
from membench.pipeline.model_gateway import ModelSettings
from membench.pipeline.settings import Settings
from membench.sandbox.registry import BACKENDS


@click.command()
@click.argument("pack")
@click.option("--conditions", default="B0,B5", show_default=True, help="comma-separated memory conditions")
@click.option("--seeds", default="1,2,3", show_default=True, help="comma-separated integer seeds")
@click.option("--agent", default="scripted:memory-literal", show_default=True)
@click.option("--workers", default=None, type=click.IntRange(1, 512),
              help="units run concurrently (default: one per core for a CPU-bound agent; for a model-driven one, as "
                   "many as the cores' CPU and the memory hold while each unit waits on its model: "
                   "membench/pipeline/worker_count.py, docs/benchmarks.md)")
@click.option("--run-set", "run_set", default=None, help="run set id (default: derived from pack, agent, grid)")
@click.option("--sandbox", "sandbox_name", default="bwrap", show_default=True, type=click.Choice(list(BACKENDS)))
@click.option("--read-budget", default=2000, show_default=True, type=click.IntRange(0), help="memory read budget (tokens)")
@click.option("--sign-key", "sign_key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Ed25519 private key (PEM, e.g. `openssl genpkey -algorithm ed25519`): sign the run set's log root")
@click.option("--stop-grace", "stop_grace", type=click.FloatRange(0), default=30.0, show_default=True,
              help="seconds running units get to finish after a first Ctrl-C / SIGTERM (a second one stops them "
                   "at once); their unfinished attempts are closed in the log and retried on resume")
@click.option("--include-refused", "include_refused", is_flag=True,
              help="also measure the traps `membench validate` refused for this pack (by default a pack with "
                   "refused traps is not run); the report then says so above every number")
@click.option("--enqueue", is_flag=True,
              help="with --bus kafka://…: put the units on the units topic for `membench runner` processes and exit")
@strict_option
@compare_option
@baseline_options
@model_options
@dsn_options
def run(pack: str, conditions: str, seeds: str, agent: str, workers: int | None, run_set: str | None,
        sandbox_name: str, read_budget: int, sign_key: Path | None, stop_grace: float, include_refused: bool,
        enqueue: bool, strict: bool, compare: tuple[str, ...], baseline: str | None,
        study_path: Path | None, model: ModelSettings, settings: Settings) -> None:
    """Run PACK (a built-in pack name or a pack directory) under memory conditions and seeds.

    Exit status: 0 done; 1 an audit failure (a log or warehouse that does not check); 2 a usage error
    (nothing written); 3 with --strict, a validity gate failed (everything is written first); 4 the
    oracle's harness kept producing no outcome (the grid stopped, its report partial); 130 stopped by
    a signal. Failed gates are printed under the table with the comparisons they invalidate,
    then one verdict line per comparison of the primary family and per --compare A:B (any two of the
    run's conditions: answered from the family that registers the pair, the primary or all_pairs)."""
    workers_why = None
    if workers is None:
        from membench.pipeline.worker_count import default_workers

        workers, workers_why = default_workers(agent)
    from membench.pipeline.run_request import (admit_conditions, admit_refused_traps, check_conditions, load_signer,
                                               load_skeleton, make_run_agent, open_finalized,
                                               refuse_refsol_without_solutions)
    from membench.pipeline.model_gateway import check_model_settings, model_run_set, parse_base_urls, refuse_self_replay
    from membench.agents.model_agents import LoopLimits
    from membench.memory_systems.registry import is_model_driven

    # the rules of a legal run are the library call's (membench/pipeline/run_request.py); the CLI applies them in
    # its own order, its option checks between; everything is validated before anything is written
    validate_run_set_id(run_set)
    condition_list = parse_list(conditions, "--conditions")
    skeleton = load_skeleton(pack)
    check_conditions(condition_list, skeleton)
    from membench.pipeline.report_inputs import check_baseline, load_study

    study = load_study(study_path)
    check_baseline(condition_list, baseline, study)  # refused before anything runs
    pairs = parse_compare(compare, condition_list)
    loop = LoopLimits(model.max_steps, model.max_tokens)
    made = make_run_agent(agent, loop, with_gateway=model.used)  # scripted:*, command:<program>, or a model agent
    check_model_settings(model, made, [c for c in condition_list if is_model_driven(c)])
    # the admission is the record of this code against this upstream (a replay calls none)
    condition_list = admit_conditions(settings.home, condition_list, study, model.memory_model,
                                      lambda text: click.echo(text, err=True),
                                      base_urls=parse_base_urls(model.base_urls), any_upstream=bool(model.replay))
    seed_list = parse_seeds(seeds)
    if agent == "scripted:refsol":
        refuse_refsol_without_solutions(skeleton)
    signer = load_signer(sign_key)
    if enqueue and not settings.bus.startswith("kafka://"):
        raise UsageError("--enqueue: units are queued on a Kafka bus only (--bus kafka://HOST:PORT)")
    loaded = open_finalized(pack, settings.home)  # finalizing checks the secrets' placement
    admit_refused_traps(pack, loaded, settings.home, include_refused, lambda text: click.echo(text, err=True))
    if settings.bus.startswith("kafka://"):
        if compare:
            raise UsageError("--compare: a run on the Kafka bus builds no report; ask with `membench report "
                             "RUN_SET --bus kafka://… --compare A:B` once the runners are done")
        if strict:
            raise UsageError("--strict: a run on the Kafka bus builds no report; check its gates with "
                             "`membench report RUN_SET --bus kafka://… --strict` once the runners are done")
        if signer is not None:
            raise UsageError("--sign-key: the log root is written and signed on the embedded bus only (file://); "
                             "on Kafka the runner does not see the whole run set")
        run_set = run_set or (model_run_set(loaded, agent, model, condition_list, seed_list) if model.used else None)
        refuse_self_replay(model, run_set)
        from membench.commands.cli_helpers import require_kafka, this_command
        from membench.commands.terminal_display import TerminalDisplay
        from membench.pipeline.model_gateway import model_order
        from membench.pipeline.distributed.enqueue import enqueue_grid
        from membench.pipeline.distributed.kafka_run import run_distributed

        require_kafka(settings.bus)  # input checked: now the bus must answer
        if model.replay:
            require_recorded(settings.bus, model.replay)
        models = model_order(model)  # the orders carry them; each runner hosts the gateway (docs/gateway.md)
        if enqueue:
            click.echo(enqueue_grid(pack, condition_list, seed_list, agent, run_set, sandbox_name, read_budget,
                                    settings, model=models, display=TerminalDisplay()))
            return
        require_scoring(loaded, sandbox_name)  # the units run here: scoring must work here first
        hosted = None
        if models is not None:
            from membench.pipeline.distributed.runner_models import ModelsRefused, open_models
            from membench.runner.unit_queue import ModelOrder

            assert run_set is not None  # models are ordered only when the model options are used: run_set is derived
            try:
                hosted = open_models(settings, run_set, ModelOrder.from_dict(models), agent, workers,
                                     log=lambda line: click.echo(line, err=True))
            except ModelsRefused as exc:
                raise UsageError(f"{exc} (nothing was run or written)") from None
        say_workers(workers, workers_why)
        published = run_distributed(pack, condition_list, seed_list, agent, workers, run_set, sandbox_name,
                                    read_budget, settings, stop_grace, models=hosted, display=TerminalDisplay(),
                                    hard_exit=hard_exit, resume=this_command())
        click.echo(published.run_set)  # stdout: what a script runs `membench report` on
        status = stop_exit_status(published.stopped, published.stopped_after_grid)
        if status != EXIT_OK:
            end_stopped(status)  # a unit thread still blocked (its output is fenced): not waited for
        return
    from membench.runner.grid import RunConfig, code_digest, plan_grid

    # a replay is a new run set of its own, not the recorded one resumed
    run_set = run_set or model_run_set(loaded, agent, model, condition_list, seed_list)
    from membench.pipeline.model_gateway import run_set_gateway

    gateway = run_set_gateway(model, made, condition_list, settings.runs_dir, run_set, workers,
                              say=lambda text: click.echo(text, err=True))
    config = RunConfig(run_set, agent, read_budget=read_budget, code_digest=code_digest(), gateway=gateway, loop=loop,
                       memory_model=model.memory_model)
    report = run_embedded(loaded, plan_grid(loaded, condition_list, seed_list), config, sandbox_name, settings,
                          workers, signer=signer, report_options=ReportOptions(baseline, study, pack, pairs),
                          stop_grace=stop_grace, workers_note=workers_line(workers, workers_why))
    exit_if_gates_failed(report, strict)


def require_recorded(bus: str, run_set: str) -> None:
    """--model-replay on Kafka: the recorded run set must have completed units on the bus (each
    runner reads its recording from there; a runner that finds none would stop)."""
    from membench.bus.kafka import read_unit_status
    from membench.bus.topics import topics_from_dsn

    statuses = read_unit_status(topics_from_dsn(bus), run_set)
    if not any(r.get("status") == "completed" for r in statuses.values()):
        raise UsageError(f"--model-replay {run_set}: no completed unit of run set '{run_set}' on {bus}; replay a run "
                         "set recorded on this bus (--model-record)")


def workers_line(workers: int, why: str | None) -> str | None:
    """The default worker count and its reason (membench/pipeline/worker_count.py); None when --workers chose it."""
    return None if why is None else f"workers: {workers} ({why}; --workers N to choose)"


def say_workers(workers: int, why: str | None) -> None:
    """The default worker count's line, once the input is checked (the Kafka path)."""
    line = workers_line(workers, why)
    if line is not None:
        click.echo(line, err=True)
