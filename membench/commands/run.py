"""`membench run PACK`: plan the grid, run it concurrently with progress, write the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from membench.commands.common import dsn_options, open_warehouse, parse_list, parse_seeds
from membench.errors import UsageError
from membench.settings import Settings
from sandbox.registry import BACKENDS

if TYPE_CHECKING:
    from reports.model import Report


def print_table(console: Console, report: Report) -> None:
    table = Table(title=f"{report.suite} · {report.agent} · run set {report.run_set}")
    for column in ("condition", "cells", "passed", "pass rate", "95% CI", "excluded"):
        table.add_column(column, justify="left" if column == "condition" else "right")
    for c in report.conditions:
        low, high = c.ci95
        rate = "—" if c.pass_rate is None else f"{100 * c.pass_rate:.1f}%"
        ci = "—" if low is None else f"{100 * low:.1f}–{100 * high:.1f}%"
        table.add_row(c.condition, str(c.cells), str(c.passed), rate, ci, str(c.excluded))
    console.print(table)


def write_report(settings: Settings, report: Report) -> Path:
    """report.json (the JSON form of the typed report), and report.md and report.html rendered from it."""
    from reports.html import render_html
    from reports.markdown import render_markdown
    from reports.model import to_json

    document = to_json(report)
    out = settings.runs_dir / report.run_set
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    (out / "report.md").write_text(render_markdown(document), encoding="utf-8")
    (out / "report.html").write_text(render_html(document), encoding="utf-8")
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
@dsn_options
def run(pack: str, conditions: str, seeds: str, agent: str, workers: int, run_set: str | None,
        sandbox_name: str, read_budget: int, settings: Settings) -> None:
    """Run PACK (a built-in pack name or a pack directory) under memory conditions and seeds."""
    from producers.agents.registry import make_agent
    from producers.memory_systems.registry import MEMORY_SYSTEMS
    from producers.pack_resolver import open_pack, resolve_pack_dir
    from schemas.pack_format import PackError, load_pack

    condition_list = parse_list(conditions, "--conditions")
    for condition in condition_list:
        if condition not in MEMORY_SYSTEMS:
            raise UsageError(f"--conditions: unknown condition '{condition}' (known: {', '.join(sorted(MEMORY_SYSTEMS))})")
    try:
        make_agent(agent)  # scripted:* or command:<program>
    except ValueError as exc:
        raise UsageError(f"--agent: {exc}") from None
    seed_list = parse_seeds(seeds)
    try:  # everything is validated before anything is written
        load_pack(resolve_pack_dir(pack))
    except PackError as exc:
        raise UsageError(str(exc)) from None
    if settings.bus.startswith("kafka://"):
        from membench.distributed import run_distributed

        run_distributed(pack, condition_list, seed_list, agent, workers, run_set, sandbox_name, read_budget, settings)
        return
    loaded = open_pack(pack, settings.home)
    from producers.runner import RunConfig, code_digest, default_run_set, plan_grid

    run_set = run_set or default_run_set(loaded.name, loaded.digest, agent, condition_list, seed_list)

    config = RunConfig(run_set, agent, read_budget=read_budget, code_digest=code_digest())
    run_embedded(loaded, plan_grid(loaded, condition_list, seed_list), config, sandbox_name, settings, workers)


def run_embedded(pack, units, config, sandbox_name: str, settings: Settings, workers: int, agent_for=None,
                 verb: str = "run") -> None:
    """Run `units` on the embedded pipeline, skipping those already complete in the warehouse, with a
    progress bar; then rebuild, write and print the report. `agent_for(unit)`, when given, supplies
    each unit's agent (`membench score` replays given patches that way)."""
    from membench.embedded import EmbeddedPipeline
    from producers.bus.base import run_set_log_path
    from producers.runner import run_grid
    from sandbox.registry import get_sandbox
    from warehouse import queries
    from reports.build import build_report

    console = Console(stderr=True)
    run_set = config.run_set
    warehouse = open_warehouse(settings)
    try:
        done = queries.completed_units(warehouse, run_set)
        attempts = {u: n + 1 for u, n in queries.attempts_started(warehouse, run_set).items()}
        todo = [u for u in units if u.unit_id not in done]
        console.print(f"run set [bold]{run_set}[/]: {len(units)} units, {len(units) - len(todo)} already complete, "
                      f"{len(todo)} to {verb} with {workers} workers")
        pipeline = EmbeddedPipeline(run_set_log_path(settings.runs_dir, run_set), warehouse)
        try:
            with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console, transient=False) as progress:
                bar = progress.add_task("units", total=len(todo))
                run_grid(pack, todo, config, get_sandbox(sandbox_name), pipeline.publish, workers, attempts,
                         lambda unit, run_id: progress.update(bar, advance=1, description=unit.unit_id), agent_for)
        finally:
            pipeline.close()
        report = build_report(warehouse, run_set)
    finally:
        warehouse.close()
    out = write_report(settings, report)
    print_table(Console(), report)
    console.print(f"report: {out / 'report.json'}  ·  log: {out / 'events.avro'}")
