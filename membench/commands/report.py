"""`membench report RUN_SET`: rebuild a run set's report from the warehouse, once the warehouse is
shown to agree with the log (its own raw events, and the log_root.json of the run set's end).

Where it writes: plain `membench report RUN_SET` (with `--pack`, `--allow-mismatch`, `--strict` at
most) rebuilds the run set's own report.json, report.md and report.html in place, as `run` wrote
them. An option that changes the content (`--baseline`, `--study`, `--compare`) or `--json` never
overwrites the run set's files: the answer goes to the terminal (`--json`: report.json to stdout),
and `--output DIR` writes the three files to DIR. A run set without a report yet (its run's report
was refused, e.g. no baseline) gets its first one in place from `--baseline`/`--study`/`--compare`
too: there is nothing to overwrite.

`--format swebench` prints, after the same check, the SWE-bench harness's run summary instead
(membench/exports/swebench.py, docs/exports/swebench.md) — to stdout, or to `--output FILE` — and writes no
report files; `--condition` / `--seed` select one group of a run set that has several."""

from __future__ import annotations

import json
from dataclasses import replace

import click
from rich.console import Console
from rich.text import Text

from pathlib import Path

from membench.commands.cli_helpers import (baseline_options, compare_option, dsn_options, exit_if_gates_failed,
                                           parse_compare, strict_option, validate_run_set_id)
from membench.errors import UsageError
from membench.commands.terminal_display import TerminalDisplay, print_table
from membench.pipeline.grid_run import exit_unless_verified, refuse, render_report, verify_written, write_report
from membench.pipeline.settings import Settings


@click.command()
@click.argument("run_set")
@click.option("--json", "as_json", is_flag=True, help="print report.json to stdout; writes no file (with --output "
              "DIR, also there)")
@click.option("--allow-mismatch", is_flag=True, help="build the report even when the warehouse disagrees with the "
              "log root (each disagreement is printed as a warning)")
@click.option("--format", "fmt", type=click.Choice(["membench", "swebench"]), default="membench", show_default=True,
              help="swebench: print the SWE-bench harness's run summary (resolved_ids, ...) as JSON instead of "
              "rebuilding the reports; one summary per condition (and seed) when the run set has several")
@click.option("--output", "output", type=click.Path(path_type=Path), default=None,
              help="write report.json, report.md and report.html to this directory instead of the run set's own "
              "(with --format swebench: the JSON to this file instead of stdout)")
@click.option("--condition", default=None, help="with --format swebench: only this condition")
@click.option("--seed", default=None, type=int, help="with --format swebench: only this seed")
@click.option("--pack", "pack_spec", default=None, metavar="PACK",
              help="the run set's pack skeleton (a built-in name or directory), for the canary proof's secrets "
              "(default: the finalized pack found by digest in MEMBENCH_HOME/packs, when its skeleton is built in)")
@strict_option
@compare_option
@baseline_options
@dsn_options
def report(run_set: str, as_json: bool, allow_mismatch: bool, fmt: str, output: Path | None, condition: str | None,
           seed: int | None, pack_spec: str | None, strict: bool, compare: tuple[str, ...], baseline: str | None,
           study_path: Path | None, settings: Settings) -> None:
    """Rebuild RUN_SET's report.json, report.md and report.html from the warehouse. First checks the
    derived tables against the raw log and against runs/RUN_SET/log_root.json (written at the end of
    the run set): a disagreement (rows edited, added or deleted) exits 1 naming the run and table.
    Plain, it rewrites the run set's own report files; with --baseline, --study, --compare or --json
    it writes none of them (the answer goes to the terminal), and --output DIR writes the files there.
    When log_root.json describes this warehouse, the run set's log is replayed as at the run's end
    (`replay --verify`'s checks): the report carries the result, and a log that does not verify
    exits 1 after the report is written, marked "not verified".
    With --format swebench, print the SWE-bench harness's run summary instead (no report files).
    Failed validity gates are printed under the table, with one verdict line per comparison; with
    --strict they exit 3, once anything asked for is written."""
    from membench.audit.log_root_record import LogRootError, check_warehouse, describes, read_record, record_path, warehouse_state
    from membench.pipeline.report_inputs import build_full_report, load_study
    from membench.bus.base import run_set_log_path
    from membench.reports.build import ReportError
    from membench.warehouse.read_model import WarehouseReadModel

    validate_run_set_id(run_set, "RUN_SET")
    study = load_study(study_path)
    if fmt == "swebench" and as_json:
        raise UsageError("--json: prints report.json; --format swebench prints the SWE-bench summary: give one")
    if fmt == "swebench" and strict:
        raise UsageError("--strict: judges membench's report; --format swebench builds none")
    if fmt == "swebench" and compare:
        raise UsageError("--compare: answered in membench's report; --format swebench builds none")
    pairs = parse_compare(compare)
    if fmt != "swebench":
        for name, value in (("--condition", condition), ("--seed", seed)):
            if value is not None:
                raise UsageError(f"{name}: only with --format swebench")
        if output is not None and output.exists() and not output.is_dir():
            raise UsageError(f"--output: {output} is a file; name a directory for report.json, report.md and "
                             "report.html")
    console = Console(stderr=True)
    display = TerminalDisplay(console)  # what the pipeline's checks show their lines on
    root_file = record_path(settings.runs_dir, run_set)
    warehouse = open_for_report(settings, run_set)
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
            refuse(display, problems, "report", f" (checked against {root_file if recorded else 'the raw log'}; "
                   "`membench replay warehouse:RUN_SET` names every difference from the log; --allow-mismatch "
                   "builds the report anyway)")
        for line in problems:
            console.print(Text.assemble(("WARNING: the warehouse disagrees with the log: ", "bold red"), line),
                          highlight=False, soft_wrap=True)
        if recorded is None and not problems and not root_file.exists():
            console.print(f"note: no {root_file}; the derived tables were checked against the raw log only",
                          highlight=False, markup=False, soft_wrap=True)
        if fmt == "swebench":
            from membench.exports.swebench import SwebenchExportError, swebench_report

            try:
                summary = swebench_report(warehouse, run_set, condition, seed)
            except SwebenchExportError as exc:
                raise UsageError(str(exc)) from None
        else:
            built, secrets = build_full_report(WarehouseReadModel(warehouse), run_set, settings.home, baseline=baseline, study=study,
                                               pack_spec=pack_spec, blob_dir=settings.runs_dir / run_set / "blobs",
                                               kafka=settings.bus.startswith("kafka://"), compare=pairs)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    finally:
        warehouse.close()
    if fmt == "swebench":
        write_json(summary, output)
        return
    from membench.pipeline.stopping import read_partial

    partial = read_partial(settings.runs_dir, run_set)
    if partial is not None:  # its last run was stopped before the grid finished (either bus)
        built = replace(built, partial=partial)
    verified = None
    if recorded is not None and run_set_log_path(settings.runs_dir, run_set).is_file():
        # the log this warehouse was filled from, replayed as the run's end did: the same report, and
        # a log that does not verify is said so here too (the warehouse alone cannot show a dead letter)
        verified = verify_written(display, settings, run_set)
        built = replace(built, verification=verified)
    parse_compare(compare, [c.condition for c in built.conditions])  # each side a condition of the run set
    # the run set's own files are rebuilt only when asked for as they are: an option that changes the
    # content, or --json, must not overwrite what the run wrote
    changed = [name for name, value in (("--baseline", baseline), ("--study", study_path), ("--compare", compare))
               if value]
    # a run set whose report was refused at the end of its run (no baseline) has none to overwrite
    first = not (settings.runs_dir / run_set / "report.json").exists()
    if output is not None or not (as_json or (changed and not first)):
        try:
            out = write_report(settings, built, secrets, output)
        except OSError as exc:
            raise UsageError(f"--output: cannot write {output}: {exc.strerror or exc}") from None
        document = (out / "report.json").read_text(encoding="utf-8")
        where = f"report: {out / 'report.json'}"
    else:
        document = render_report(built, secrets)["report.json"]
        where = "" if as_json else (f"{' and '.join(changed)} change{'s' if len(changed) == 1 else ''} the report: "
                                    "the run set's own report files are left as they are (--output DIR writes "
                                    "this one)")
    if as_json:  # as written (or as it would be): its canary proof includes the search of the rendered reports
        click.echo(document, nl=False)
    else:
        print_table(Console(), built)
    if where:
        Console(stderr=True).print(where, highlight=False, markup=False, soft_wrap=True)
    if verified is not None and not allow_mismatch:  # --allow-mismatch: the report anyway, marked
        exit_unless_verified(display, verified, settings, run_set)
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


def open_for_report(settings: Settings, run_set: str):
    """The warehouse, opened for the report. While another process (a run) owns the embedded
    warehouse, a usage error with what works now: a report is built from the warehouse itself and
    checked against the run set's log root, which a snapshot rebuilt from the logs cannot stand in
    for (its raw rows are decoded from the log, not the rows the root's digests cover)."""
    from membench.warehouse.client import WarehouseBusy, WarehouseError, connect

    try:
        return connect(settings.warehouse, create=False)
    except WarehouseBusy as exc:
        raise UsageError(f"report: {exc}. Run `membench report {run_set}` again once it has ended (a run writes its "
                         f"own run set's report when it ends); meanwhile `membench sql \"SELECT condition, "
                         f"sum(passed), sum(valid) FROM scored_cells WHERE run_set = '{run_set}' GROUP BY condition\"` "
                         f"reads the pass counts from a snapshot of the logs, and `membench view` shows the runs live") \
            from None
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None
