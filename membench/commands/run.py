"""`membench run PACK`: plan the grid, run it concurrently with progress, write the report."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from membench.commands.model_options import ModelOptions, check_model_options, model_options, start_gateway
from membench.commands.cli_helpers import dsn_options, open_warehouse, parse_list, parse_seeds, validate_run_set_id
from membench.errors import UsageError
from pipeline.settings import Settings
from sandbox.registry import BACKENDS

if TYPE_CHECKING:
    from reports.model import Report


@dataclass(frozen=True)
class ReportOptions:
    """How `run` and `score` build the report at the end: the baseline, the study, the pack (canary)."""

    baseline: str | None = None
    study: Any = None  # reports.study.Study; None: the default study
    pack_spec: str | None = None


def baseline_options(f):
    """--baseline COND and --study FILE (docs/study.md), shared by run, score and report."""
    f = click.option("--study", "study_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="study file (JSON, docs/study.md): baseline and registered comparison families")(f)
    return click.option("--baseline", default=None, metavar="COND",
                        help="the condition comparisons are made against (default: the study's, else B0, else "
                        "no_memory; with neither and no study baseline the report is refused)")(f)


def print_table(console: Console, report: Report) -> None:
    table = Table(title=f"{report.suite} · {report.agent} · run set {report.run_set}")
    for column in ("condition", "cells", "passed", "pass rate", "95% CI", "excluded"):
        table.add_column(column, justify="left" if column == "condition" else "right")
    gates = getattr(report, "validity_gates", None)
    for c in report.conditions:
        low, high = c.ci95
        rate = "—" if c.pass_rate is None else f"{100 * c.pass_rate:.1f}%"
        ci = "—" if low is None else f"{100 * low:.1f}–{100 * high:.1f}%"
        if c.ci_method == "clopper_pearson_traps":  # all or none passed: the bootstrap has zero width there
            ci += " exact"
        # why, where the user looks: a misconfigured model must not read as a bare count
        gate = gates.exclusions.get(c.condition) if gates is not None else None
        reasons = ", ".join(f"{reason} {n}" for reason, n in (gate.reasons if gate else {}).items())
        table.add_row(c.condition, str(c.cells), str(c.passed), rate, ci,
                      f"{c.excluded} ({reasons})" if c.excluded and reasons else str(c.excluded))
    console.print(table)


def write_report(settings: Settings, report: Report, secrets=()) -> Path:
    """report.json (the JSON form of the typed report), and report.md and report.html rendered from it.
    With a canary proof that searched the events, the rendered texts are searched for `secrets` too
    and the proof records it (it names secrets, never their values, so rendering it again adds none)."""
    from reports.canary import search_reports
    from reports.html import render_html
    from reports.markdown import render_markdown
    from reports.model import to_json

    def render(document) -> dict[str, str]:
        return {"report.json": json.dumps(document, indent=2) + "\n", "report.md": render_markdown(document),
                "report.html": render_html(document)}

    texts = render(to_json(report))
    if report.canary is not None and report.canary.searched is not None:
        report = replace(report, canary=search_reports(report.canary, list(secrets), texts))
        texts = render(to_json(report))
    out = settings.runs_dir / report.run_set
    out.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (out / name).write_text(text, encoding="utf-8")
    return out


@click.command()
@click.argument("pack")
@click.option("--conditions", default="B0,B5", show_default=True, help="comma-separated memory conditions")
@click.option("--seeds", default="1,2,3", show_default=True, help="comma-separated integer seeds")
@click.option("--agent", default="scripted:memory-literal", show_default=True)
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="units run concurrently")
@click.option("--run-set", "run_set", default=None, help="run set id (default: derived from pack, agent, grid)")
@click.option("--sandbox", "sandbox_name", default="bwrap", show_default=True, type=click.Choice(list(BACKENDS)))
@click.option("--read-budget", default=2000, show_default=True, type=click.IntRange(0), help="memory read budget (tokens)")
@click.option("--sign-key", "sign_key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Ed25519 private key (PEM, e.g. `openssl genpkey -algorithm ed25519`): sign the run set's log root")
@click.option("--stop-grace", "stop_grace", type=click.FloatRange(0), default=30.0, show_default=True,
              help="seconds running units get to finish after a first Ctrl-C / SIGTERM (a second one stops them "
                   "at once); their unfinished attempts are closed in the log and retried on resume")
@click.option("--enqueue", is_flag=True,
              help="with --bus kafka://…: put the units on the units topic for `membench runner` processes and exit")
@baseline_options
@model_options
@dsn_options
def run(pack: str, conditions: str, seeds: str, agent: str, workers: int, run_set: str | None,
        sandbox_name: str, read_budget: int, sign_key: Path | None, stop_grace: float, enqueue: bool,
        baseline: str | None,
        study_path: Path | None, model: ModelOptions, settings: Settings) -> None:
    """Run PACK (a built-in pack name or a pack directory) under memory conditions and seeds."""
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
            raise UsageError(f"--conditions: unknown condition '{condition}' (known: {', '.join(sorted(MEMORY_SYSTEMS))})")
    from membench.report_inputs import check_baseline, load_study

    study = load_study(study_path)
    check_baseline(condition_list, baseline, study)  # refused before anything runs
    loop = LoopLimits(model.max_steps, model.max_tokens)
    try:
        made = make_agent(agent, loop, with_gateway=model.used)  # scripted:*, command:<program>, or a model agent
    except ValueError as exc:
        raise UsageError(f"--agent: {exc}") from None
    check_model_options(model, made, [c for c in condition_list if is_model_driven(c)])
    from membench.commands.memory import conformance_status, require_conformant

    if study is not None and study.families:  # a study keeps a non-conformant condition as unavailable slots
        dropped = [c for c in condition_list if conformance_status(settings.home, c, model.memory_model)[0]
                   in ("missing", "failed")]
        for c in dropped:
            click.echo(f"--conditions: {c} is conformance-unavailable, not run; its registered slots stay in their "
                       f"families at p = 1 ({conformance_status(settings.home, c, model.memory_model)[1]})", err=True)
        condition_list = [c for c in condition_list if c not in dropped]
        if not condition_list:
            raise UsageError("--conditions: no condition is admitted for evaluation")
    require_conformant(settings.home, condition_list, model.memory_model, "--conditions")
    seed_list = parse_seeds(seeds)
    if agent == "scripted:refsol":
        refuse_refsol_without_solutions(skeleton)
    signer = load_signer(sign_key)
    if enqueue and not settings.bus.startswith("kafka://"):
        raise UsageError("--enqueue: units are queued on a Kafka bus only (--bus kafka://HOST:PORT)")
    if settings.bus.startswith("kafka://"):
        if model.used:
            raise UsageError("--model-*: model agents run on the embedded bus (file://) for now; the gateway "
                             "and its recordings live beside one runner's log")
        if signer is not None:
            raise UsageError("--sign-key: the log root is written and signed on the embedded bus only (file://); "
                             "on Kafka the runner does not see the whole run set")
        from pipeline.distributed.enqueue import enqueue_grid
        from pipeline.distributed.kafka_run import run_distributed

        if enqueue:
            enqueue_grid(pack, condition_list, seed_list, agent, run_set, sandbox_name, read_budget, settings)
            return
        run_distributed(pack, condition_list, seed_list, agent, workers, run_set, sandbox_name, read_budget, settings)
        return
    try:  # finalizing checks the secrets' placement: a bad pack is a usage error, not a traceback
        loaded = open_pack(pack, settings.home)
    except PackError as exc:
        raise UsageError(str(exc)) from None
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
                                        else None))
    config = RunConfig(run_set, agent, read_budget=read_budget, code_digest=code_digest(), gateway=gateway, loop=loop,
                       memory_model=model.memory_model)
    run_embedded(loaded, plan_grid(loaded, condition_list, seed_list), config, sandbox_name, settings, workers,
                 signer=signer, report_options=ReportOptions(baseline, study, pack), stop_grace=stop_grace)


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


def load_signer(sign_key: Path | None):
    """The Ed25519 private key of --sign-key, read before anything is written (a bad key is a usage
    error, exit 2, naming the file)."""
    if sign_key is None:
        return None
    from audit.log_root_record import LogRootError, load_signing_key

    try:
        return load_signing_key(sign_key)
    except LogRootError as exc:
        raise UsageError(f"--sign-key: {exc}") from None


def refuse(console: Console, lines: list[str], what: str, hint: str = "") -> None:
    """Print each problem and exit 1: an audit failure, not a usage error."""
    for line in lines:
        console.print(Text.assemble(("MISMATCH ", "bold red"), line), highlight=False, soft_wrap=True)
    console.print(f"{what}: the warehouse disagrees with the log (above); nothing was written{hint}",
                  highlight=False, markup=False, soft_wrap=True)
    raise SystemExit(1)


def run_embedded(pack, units, config, sandbox_name: str, settings: Settings, workers: int, agent_for=None,
                 verb: str = "run", signer=None, report_options: ReportOptions | None = None,
                 stop_grace: float = 30.0) -> None:
    """Run `units` on the embedded pipeline, skipping those already complete in the warehouse, with a
    progress bar; then rebuild, write and print the report, and write (and with `signer`, an Ed25519
    private key, sign) the run set's log root. `agent_for(unit)`, when given, supplies each unit's
    agent (`membench score` replays given patches that way).

    Before anything runs: the warehouse must still agree with the log_root.json of the run set's
    last end (a tampered warehouse is refused, not laundered into a new root), and
    `EmbeddedPipeline.recover` brings the warehouse up to the log and closes every attempt a crash
    abandoned, so attempt numbers and completed units are counted from the whole log.

    A first SIGINT/SIGTERM starts no further unit and gives the running ones `stop_grace` seconds; a
    second one (or the period's end) fences the log and kills their sandboxes (membench/stopping.py).
    Every unfinished attempt is then closed `RunEnded{abandoned}`, the report is written marked
    `partial`, the command to resume is printed, and the exit status is 130. A signal before the
    grid (during recovery) starts no unit; one after it (the report, the log root) lets them be
    written whole, then exits 130."""
    from audit.log_root_record import record_path
    from membench.stopping import GridStop

    console = Console(stderr=True)
    run_set = config.run_set
    config = replace(config, blob_dir=settings.runs_dir / run_set / "blobs")  # large diffs, beside the log
    root_file = record_path(settings.runs_dir, run_set)
    # a first Ctrl-C / SIGTERM starts no further unit and gives the running ones a grace period; a
    # second (or the period's end) fences the log and kills their sandboxes (membench/stopping.py).
    # Installed around the whole body: a signal during recovery, the report or the log root is
    # a stop too (exit 130), never a traceback or a death that leaves the log root unwritten.
    stop = GridStop(stop_grace, say=lambda text: console.print(text, highlight=False, markup=False,
                                                                soft_wrap=True))
    with stop.installed():
        _run_body(console, run_set, config, root_file, pack, units, sandbox_name, settings, workers,
                  agent_for, verb, signer, report_options, stop)


def _run_body(console, run_set, config, root_file, pack, units, sandbox_name, settings, workers, agent_for,
              verb, signer, report_options, stop) -> None:
    from pipeline.embedded import EmbeddedPipeline
    from audit.log_root_record import LogRootError, check_warehouse, describes, read_record, warehouse_state
    from producers.attempts import LogError, describe
    from producers.bus.base import run_set_log_path
    from membench.stopping import EXIT_STOPPED, StoppableSandbox, run_units
    from producers.grid import run_unit
    from sandbox.registry import get_sandbox
    from warehouse import queries
    from membench.report_inputs import build_full_report
    from reports.build import ReportError

    warehouse = open_warehouse(settings)
    try:
        if root_file.exists():
            try:
                recorded = read_record(root_file)
            except LogRootError as exc:
                refuse(console, [str(exc)], verb)
            if describes(recorded, settings.warehouse):
                problems = check_warehouse(warehouse_state(warehouse, run_set), recorded, new_runs_allowed=True)
                if problems:
                    refuse(console, problems, verb)
        pipeline = EmbeddedPipeline(run_set_log_path(settings.runs_dir, run_set), warehouse)
        stop.on_kill.append(pipeline.fence)
        try:
            try:
                recovery = pipeline.recover(run_set)
            except LogError as exc:
                console.print(f"{verb}: {exc}; the log must be repaired before run set {run_set} can resume",
                              highlight=False, markup=False, soft_wrap=True)
                raise SystemExit(1) from None
            if recovery.raw_rows or recovery.derived_rows:
                console.print(f"recovered from the log: {recovery.raw_rows} raw events and {recovery.derived_rows} "
                              "derived events the warehouse lacked", highlight=False)
            for event in recovery.closed:
                console.print(describe(event), highlight=False, markup=False, soft_wrap=True)
            done = queries.completed_units(warehouse, run_set)
            attempts = {u: n + 1 for u, n in queries.attempts_started(warehouse, run_set).items()}
            todo = [u for u in units if u.unit_id not in done]
            # printed with the stop handlers installed (run_embedded): a signal from here on is a clean stop
            console.print(f"run set [bold]{run_set}[/]: {len(units)} units, {len(units) - len(todo)} already "
                          f"complete, {len(todo)} to {verb} with {workers} workers")
            if not todo and config.gateway is not None and config.gateway.settings.record:
                # a recording is made by running units: a complete grid runs none, so it would be silent
                console.print(f"--model-record: nothing was recorded: every unit of run set {run_set} is already "
                              "complete, so no model was called; to record this grid, run it into a new run set "
                              "(--run-set NAME)", highlight=False, markup=False, soft_wrap=True)
            sandbox = StoppableSandbox(get_sandbox(sandbox_name), stop.killed)
            with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console, transient=False) as progress:
                bar = progress.add_task("units", total=len(todo))
                not_started = run_units(
                    lambda unit: run_unit(pack, unit, config, sandbox, pipeline.publish, attempts.get(unit.unit_id, 1),
                                          agent_for(unit) if agent_for else None),
                    todo, workers, lambda unit, run_id: progress.update(bar, advance=1, description=unit.unit_id),
                    stop)
            cut = stop.asked  # the grid was stopped (a later signal finds it complete)
            abandoned = pipeline.close_open(run_set) if cut else []
            for event in abandoned:
                console.print(describe(event), highlight=False, markup=False, soft_wrap=True)
        finally:
            pipeline.close()
        options = report_options or ReportOptions()
        refused = None
        try:
            report, secrets = build_full_report(warehouse, run_set, settings.home, baseline=options.baseline,
                                                study=options.study, pack_spec=options.pack_spec,
                                                blob_dir=config.blob_dir)
        except ReportError as exc:  # checked before the run; a resumed run set may hold other conditions
            refused = exc
        state = warehouse_state(warehouse, run_set)
    finally:
        warehouse.close()
    write_log_root(console, root_file, state, signer, settings.warehouse)
    resume = None
    if cut:
        resume = "membench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        if refused is None:
            from reports.model import PartialRun

            report = replace(report, partial=PartialRun(
                reason="stopped by a signal before the grid finished", units_planned=len(units),
                units_not_started=len(not_started), attempts_abandoned=len(abandoned), resume=resume))
    if refused is not None and cut:  # e.g. stopped before any unit ran: nothing to report, still a stop
        console.print(f"stopped: no report ({refused}); resume with the same command: {resume}",
                      highlight=False, markup=False, soft_wrap=True)
        raise SystemExit(EXIT_STOPPED)
    if refused is not None:  # what ran is recorded (log, warehouse, log root); only the report is not written
        raise UsageError(f"{refused}; the run set is recorded, rebuild its report with `membench report {run_set}`")
    out = write_report(settings, report, secrets)
    print_table(Console(), report)
    console.print(f"report: {out / 'report.json'}  ·  log: {out / 'events.avro'}  ·  log root: {state.root}",
                  highlight=False, markup=False, soft_wrap=True)
    if cut:
        console.print(f"stopped: the report is partial ({len(not_started)} units not started, {len(abandoned)} "
                      f"attempts closed as abandoned); resume with the same command: {resume}",
                      highlight=False, markup=False, soft_wrap=True)
        sys.stdout.flush()
        sys.stderr.flush()
        if any(t.name.startswith("membench-unit") and t.is_alive() for t in threading.enumerate()):
            os._exit(EXIT_STOPPED)  # a unit thread still blocked (its log is fenced): do not wait for it
        raise SystemExit(EXIT_STOPPED)
    if stop.asked:  # the signal came after the grid: what ran is complete and written
        console.print("stopped after the grid finished: the report and the log root are complete",
                      highlight=False, markup=False, soft_wrap=True)
        raise SystemExit(EXIT_STOPPED)


def write_log_root(console: Console, path: Path, state, signer, warehouse_dsn: str) -> None:
    """runs/<run_set>/log_root.json at the end of the run set: root, heads, row digests, signature.
    Without a key, a signature already there is kept while it signs the same root (a re-run that ran
    nothing); a root that changed loses it, with a warning, since it would no longer verify."""
    from audit.log_root_record import LogRootError, describes, read_record, sign, write_record

    for lines in state.problems.values():  # the run just wrote these rows: a disagreement is a bug
        for line in lines:
            console.print(Text.assemble(("WARNING ", "bold red"), line), highlight=False, soft_wrap=True)
    signature = sign(signer, state.run_set, state.root) if signer is not None else None
    if signer is None and path.exists():
        try:
            before = read_record(path)
        except LogRootError:
            before = None
        if before is not None and before.signature is not None and describes(before, warehouse_dsn):
            if before.log_root == state.root:
                signature = before.signature
            else:
                console.print(f"WARNING the log root changed to {state.root}; the signature of the previous root "
                              "was dropped (sign again with --sign-key)", highlight=False, markup=False,
                              soft_wrap=True)
    write_record(path, state.record(signature, warehouse_dsn))
    if signature is not None:
        console.print(f"log root {state.root} signed (Ed25519, key id {signature.key_id})", highlight=False,
                      markup=False, soft_wrap=True)
