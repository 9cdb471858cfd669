"""`membench run PACK`: plan the grid, run it concurrently with progress, write the report."""

from __future__ import annotations

from pathlib import Path

import click

from membench.commands.model_options import ModelOptions, check_model_options, model_options, start_gateway
from membench.commands.cli_helpers import (ReportOptions, baseline_options, compare_option, dsn_options,
                                           exit_if_gates_failed, load_signer, parse_compare, parse_list, parse_seeds,
                                           require_scoring, run_embedded, strict_option, validate_run_set_id)
from membench.errors import UsageError
from pipeline.settings import Settings
from sandbox.registry import BACKENDS
from schemas.fields import did_you_mean


@click.command()
@click.argument("pack")
@click.option("--conditions", default="B0,B5", show_default=True, help="comma-separated memory conditions")
@click.option("--seeds", default="1,2,3", show_default=True, help="comma-separated integer seeds")
@click.option("--agent", default="scripted:memory-literal", show_default=True)
@click.option("--workers", default=None, type=click.IntRange(1, 512),
              help="units run concurrently (default: one per core for a CPU-bound agent; for a model-driven one, as "
                   "many as the cores' CPU and the memory hold while each unit waits on its model: "
                   "pipeline/worker_count.py, docs/benchmarks.md)")
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
        study_path: Path | None, model: ModelOptions, settings: Settings) -> None:
    """Run PACK (a built-in pack name or a pack directory) under memory conditions and seeds.

    Exit status: 0 done; 1 an audit failure (a log or warehouse that does not check); 2 a usage error
    (nothing written); 3 with --strict, a validity gate failed (everything is written first); 4 the
    oracle's harness kept producing no outcome (the grid stopped, its report partial); 130 stopped by
    a signal. Failed gates are printed under the table with the comparisons they invalidate,
    then one verdict line per comparison of the primary family and per --compare A:B (any two of the
    run's conditions: answered from the family that registers the pair, the primary or all_pairs)."""
    workers_why = None
    if workers is None:
        from pipeline.worker_count import default_workers

        workers, workers_why = default_workers(agent)
    from producers.agents.model_agents import LoopLimits
    from producers.agents.registry import make_agent
    from producers.memory_systems.registry import MEMORY_SYSTEMS, is_model_driven, undefined_ablation
    from producers.pack_resolver import open_pack, resolve_pack_dir
    from schemas.pack_format import PackError, load_pack

    validate_run_set_id(run_set)
    condition_list = parse_list(conditions, "--conditions")
    try:  # everything is validated before anything is written
        skeleton = load_pack(resolve_pack_dir(pack))
    except PackError as exc:
        raise UsageError(str(exc)) from None
    for condition in condition_list:
        if condition not in MEMORY_SYSTEMS:
            if undefined_ablation(condition):  # a paper ablation that cannot be defined here (docs/design.md §5)
                raise UsageError(f"--conditions: {undefined_ablation(condition)}; it is not run")
            if condition in skeleton.conditions:  # a source benchmark's name, e.g. an imported A/B pack's remem
                raise UsageError(f"--conditions: '{condition}' is a condition of pack '{skeleton.name}' (its source "
                                 "benchmark's name), not a memory system membench can run; score predictions made "
                                 "under it with `membench score`, or run a memory system "
                                 f"(known: {', '.join(sorted(MEMORY_SYSTEMS))})")
            raise UsageError(f"--conditions: unknown condition '{condition}'{did_you_mean(condition, MEMORY_SYSTEMS)} "
                             f"(known: {', '.join(sorted(MEMORY_SYSTEMS))})")
    from membench.report_inputs import check_baseline, load_study

    study = load_study(study_path)
    check_baseline(condition_list, baseline, study)  # refused before anything runs
    pairs = parse_compare(compare, condition_list)
    loop = LoopLimits(model.max_steps, model.max_tokens)
    try:
        made = make_agent(agent, loop, with_gateway=model.used)  # scripted:*, command:<program>, or a model agent
    except ValueError as exc:
        raise UsageError(f"--agent: {exc}") from None
    check_model_options(model, made, [c for c in condition_list if is_model_driven(c)])
    from membench.commands.memory import conformance_status, require_conformant
    from membench.commands.model_options import parse_base_urls

    # the admission is the record of this code against this upstream (a replay calls none)
    admission = {"base_urls": parse_base_urls(model.base_urls), "any_upstream": bool(model.replay)}
    if study is not None and study.families:  # a study keeps a non-conformant condition as unavailable slots
        statuses = {c: conformance_status(settings.home, c, model.memory_model, **admission) for c in condition_list}
        dropped = [c for c in condition_list if statuses[c][0] in ("missing", "failed", "budget_spent")]
        for c in dropped:
            click.echo(f"--conditions: {c} is conformance-unavailable, not run; its registered slots stay in their "
                       f"families at p = 1 ({statuses[c][1]})", err=True)
        condition_list = [c for c in condition_list if c not in dropped]
        if not condition_list:
            raise UsageError("--conditions: no condition is admitted for evaluation")
    require_conformant(settings.home, condition_list, model.memory_model, "--conditions", **admission)
    seed_list = parse_seeds(seeds)
    if agent == "scripted:refsol":
        refuse_refsol_without_solutions(skeleton)
    signer = load_signer(sign_key)
    if enqueue and not settings.bus.startswith("kafka://"):
        raise UsageError("--enqueue: units are queued on a Kafka bus only (--bus kafka://HOST:PORT)")
    try:  # finalizing checks the secrets' placement: a bad pack is a usage error, not a traceback
        loaded = open_pack(pack, settings.home)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    admit_refused_traps(pack, loaded, settings.home, include_refused)
    if settings.bus.startswith("kafka://"):
        if compare:
            raise UsageError("--compare: a run on the Kafka bus builds no report; ask with `membench report "
                             "RUN_SET --bus kafka://… --compare A:B` once the runners are done")
        if strict:
            raise UsageError("--strict: a run on the Kafka bus builds no report; check its gates with "
                             "`membench report RUN_SET --bus kafka://… --strict` once the runners are done")
        if model.used:
            raise UsageError("--model-*: model agents run on the embedded bus (file://) for now; the gateway "
                             "and its recordings live beside one runner's log")
        if signer is not None:
            raise UsageError("--sign-key: the log root is written and signed on the embedded bus only (file://); "
                             "on Kafka the runner does not see the whole run set")
        from membench.commands.cli_helpers import require_kafka
        from pipeline.distributed.enqueue import enqueue_grid

        require_kafka(settings.bus)  # input checked: now the bus must answer
        from pipeline.distributed.kafka_run import run_distributed

        if enqueue:
            enqueue_grid(pack, condition_list, seed_list, agent, run_set, sandbox_name, read_budget, settings)
            return
        require_scoring(loaded, sandbox_name)  # the units run here: scoring must work here first
        say_workers(workers, workers_why)
        run_distributed(pack, condition_list, seed_list, agent, workers, run_set, sandbox_name, read_budget, settings,
                        stop_grace)
        return
    from producers.grid import RunConfig, code_digest, default_run_set, plan_grid

    # a replay is a new run set of its own, not the recorded one resumed
    run_set = run_set or default_run_set(
        loaded.name, loaded.digest, agent + (f"+memory-model={model.memory_model}" if model.memory_model else "")
        + ("+replay" if model.replay else ""), condition_list, seed_list)
    if model.replay == run_set:
        raise UsageError(f"--model-replay {run_set}: a run set cannot replay itself; name another --run-set")
    from producers.gateway.preflight import targets_for

    gateway = start_gateway(model, settings.runs_dir, run_set,
                            targets_for(made, model.memory_model if any(is_model_driven(c) for c in condition_list)
                                        else None), workers=workers)
    config = RunConfig(run_set, agent, read_budget=read_budget, code_digest=code_digest(), gateway=gateway, loop=loop,
                       memory_model=model.memory_model)
    say_workers(workers, workers_why)
    report = run_embedded(loaded, plan_grid(loaded, condition_list, seed_list), config, sandbox_name, settings,
                          workers, signer=signer, report_options=ReportOptions(baseline, study, pack, pairs),
                          stop_grace=stop_grace)
    exit_if_gates_failed(report, strict)


def admit_refused_traps(spec: str, pack, home: Path, include_refused: bool) -> None:
    """A pack with traps `membench validate` refused (its record for this finalized pack) is not run
    unless INCLUDE_REFUSED: a usage error naming them and the two ways on. With the flag, one line
    says which are measured (the report says it again above every number)."""
    from membench.report_inputs import refused_traps

    in_pack = {seq.seq_id for seq in pack.sequences}  # an admitted pack's record lists the traps it left out
    refused = {seq_id: why for seq_id, why in refused_traps(home, pack.digest).items() if seq_id in in_pack}
    if not refused:
        return
    named = "; ".join(f"{seq_id} ({why or 'refused'})" for seq_id, why in sorted(refused.items()))
    if include_refused:
        click.echo(f"--include-refused: measuring {len(refused)} trap(s) `membench validate` refused: {named}",
                   err=True)
        return
    raise UsageError(f"{len(refused)} of {len(pack.sequences)} traps of pack '{pack.name}' were refused by "
                     f"`membench validate`: {named}. Run the admitted traps only: `membench validate {spec} "
                     f"--admitted DIR`, then `membench run DIR`; or measure them anyway with --include-refused "
                     "(the report then says so at the top)")


def refuse_refsol_without_solutions(pack) -> None:
    """`scripted:refsol` applies the scored session's reference solution; on a pack that carries none
    (an imported coding-agent A/B pack: that benchmark publishes no solutions) it would change
    nothing and score 0 silently, so it is a usage error before anything runs."""
    missing = [seq.seq_id for seq in pack.sequences if not pack.solution(seq, seq.scored_session).files]
    if missing:
        shown = ", ".join(f"'{m}'" for m in missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise UsageError(f"--agent scripted:refsol: pack '{pack.name}' has no reference solution for the scored "
                         f"session of {len(missing)} of its {len(pack.sequences)} sequences ({shown}; "
                         f"hidden/<seq>/s<index>.solution.json has no files), so the agent would change nothing "
                         "and score 0; imported packs carry none because their source publishes none")


def say_workers(workers: int, why: str | None) -> None:
    """The default worker count and its reason (pipeline/worker_count.py), once the input is checked."""
    if why is not None:
        click.echo(f"workers: {workers} ({why}; --workers N to choose)", err=True)
