"""`membench report RUN_SET`: rebuild a run set's report from the warehouse, once the warehouse is
shown to agree with the log (its own raw events, and the log_root.json of the run set's end).

`--format swebench` prints, after the same check, the SWE-bench harness's run summary instead
(exports/swebench.py, docs/exports/swebench.md) — to stdout, or to `--output FILE` — and writes no
report files; `--condition` / `--seed` select one group of a run set that has several."""

from __future__ import annotations

import json
from dataclasses import replace

import click
from rich.console import Console
from rich.text import Text

from pathlib import Path

from membench.commands.cli_helpers import (baseline_options, dsn_options, exit_if_gates_failed, open_warehouse,
                                           strict_option, validate_run_set_id)
from membench.errors import UsageError
from pipeline.grid_run import exit_unless_verified, print_table, refuse, verify_written, write_report
from pipeline.settings import Settings


@click.command()
@click.argument("run_set")
@click.option("--json", "as_json", is_flag=True, help="print report.json to stdout")
@click.option("--allow-mismatch", is_flag=True, help="build the report even when the warehouse disagrees with the "
              "log root (each disagreement is printed as a warning)")
@click.option("--format", "fmt", type=click.Choice(["membench", "swebench"]), default="membench", show_default=True,
              help="swebench: print the SWE-bench harness's run summary (resolved_ids, ...) as JSON instead of "
              "rebuilding the reports; one summary per condition (and seed) when the run set has several")
@click.option("--output", "output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="with --format swebench: write the JSON to this file instead of stdout")
@click.option("--condition", default=None, help="with --format swebench: only this condition")
@click.option("--seed", default=None, type=int, help="with --format swebench: only this seed")
@click.option("--pack", "pack_spec", default=None, metavar="PACK",
              help="the run set's pack skeleton (a built-in name or directory), for the canary proof's secrets "
              "(default: the finalized pack found by digest in MEMBENCH_HOME/packs, when its skeleton is built in)")
@strict_option
@baseline_options
@dsn_options
def report(run_set: str, as_json: bool, allow_mismatch: bool, fmt: str, output: Path | None, condition: str | None,
           seed: int | None, pack_spec: str | None, strict: bool, baseline: str | None, study_path: Path | None,
           settings: Settings) -> None:
    """Rebuild RUN_SET's report.json, report.md and report.html from the warehouse. First checks the
    derived tables against the raw log and against runs/RUN_SET/log_root.json (written at the end of
    the run set): a disagreement (rows edited, added or deleted) exits 1 naming the run and table.
    When log_root.json describes this warehouse, the run set's log is replayed as at the run's end
    (`replay --verify`'s checks): the report carries the result, and a log that does not verify
    exits 1 after the report is written, marked "not verified".
    With --format swebench, print the SWE-bench harness's run summary instead (no report files).
    Failed validity gates are printed under the table; with --strict they exit 3, once the report
    files are written."""
    from audit.log_root_record import LogRootError, check_warehouse, describes, read_record, record_path, warehouse_state
    from membench.report_inputs import build_full_report, load_study
    from producers.bus.base import run_set_log_path
    from reports.build import ReportError

    validate_run_set_id(run_set, "RUN_SET")
    study = load_study(study_path)
    if fmt == "swebench" and as_json:
        raise UsageError("--json: prints report.json; --format swebench prints the SWE-bench summary: give one")
    if fmt == "swebench" and strict:
        raise UsageError("--strict: judges membench's report; --format swebench builds none")
    if fmt != "swebench":
        for name, value in (("--output", output), ("--condition", condition), ("--seed", seed)):
            if value is not None:
                raise UsageError(f"{name}: only with --format swebench")
    console = Console(stderr=True)
    root_file = record_path(settings.runs_dir, run_set)
    warehouse = open_warehouse(settings, create=False)
    try:
        try:
            recorded = read_record(root_file) if root_file.exists() else None
            if recorded is not None and not describes(recorded, settings.warehouse):
                console.print(f"note: {root_file} describes warehouse {recorded.warehouse}, not this one; the derived "
                              "tables were checked against the raw log only", highlight=False, markup=False,
                              soft_wrap=True)
                recorded = None
            problems = check_warehouse(warehouse_state(warehouse, run_set), recorded)
        except LogRootError as exc:
            recorded, problems = None, [str(exc)]
        if problems and not allow_mismatch:
            refuse(console, problems, "report", f" (checked against {root_file if recorded else 'the raw log'}; "
                   "`membench replay warehouse:RUN_SET` names every difference from the log; --allow-mismatch "
                   "builds the report anyway)")
        for line in problems:
            console.print(Text.assemble(("WARNING: the warehouse disagrees with the log: ", "bold red"), line),
                          highlight=False, soft_wrap=True)
        if recorded is None and not problems and not root_file.exists():
            console.print(f"note: no {root_file}; the derived tables were checked against the raw log only",
                          highlight=False, markup=False, soft_wrap=True)
        if fmt == "swebench":
            from exports.swebench import SwebenchExportError, swebench_report

            try:
                summary = swebench_report(warehouse, run_set, condition, seed)
            except SwebenchExportError as exc:
                raise UsageError(str(exc)) from None
        else:
            built, secrets = build_full_report(warehouse, run_set, settings.home, baseline=baseline, study=study,
                                               pack_spec=pack_spec, blob_dir=settings.runs_dir / run_set / "blobs",
                                               kafka=settings.bus.startswith("kafka://"))
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    finally:
        warehouse.close()
    if fmt == "swebench":
        write_json(summary, output)
        return
    verified = None
    if recorded is not None and run_set_log_path(settings.runs_dir, run_set).is_file():
        # the log this warehouse was filled from, replayed as the run's end did: the same report, and
        # a log that does not verify is said so here too (the warehouse alone cannot show a dead letter)
        verified = verify_written(console, settings, run_set)
        built = replace(built, verification=verified)
    out = write_report(settings, built, secrets)
    if as_json:  # the file as written: its canary proof includes the search of the rendered reports
        click.echo((out / "report.json").read_text(encoding="utf-8"), nl=False)
    else:
        print_table(Console(), built)
        Console(stderr=True).print(f"report: {out / 'report.json'}")
    if verified is not None and not allow_mismatch:  # --allow-mismatch: the report anyway, marked
        exit_unless_verified(console, verified, settings, run_set)
    exit_if_gates_failed(built, strict)


def write_json(data: object, output: Path | None) -> None:
    """DATA as indented JSON to stdout, or atomically to OUTPUT (a temporary file beside it, renamed)."""
    text = json.dumps(data, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    tmp = output.with_name(f".{output.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"--output: cannot write {output}: {exc.strerror or exc}") from None
    Console(stderr=True).print(f"swebench summary: {output}", highlight=False, markup=False, soft_wrap=True)
