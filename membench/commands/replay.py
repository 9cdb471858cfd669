"""`membench replay SOURCE --verify`: audit a run set against its log."""

from __future__ import annotations

import json
from pathlib import Path

import click

from membench.commands.cli_helpers import dsn_options, open_warehouse, require_kafka, validate_run_set_id
from membench.errors import UsageError
from pipeline.settings import Settings
from schemas.fields import is_plain_name

MAX_PRINTED = 50


@click.command()
@click.argument("source")
@click.option("--verify", is_flag=True, help="also compare re-derived events with the warehouse, and the log root "
              "with the run set's log_root.json")
@click.option("--pubkey", "pubkey_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Ed25519 public key (PEM): verify log_root.json's signature over the root recomputed from the log")
@click.option("--log-root", "log_root_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the log_root.json to check (default: beside an events.avro, else runs/<run_set>/log_root.json)")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 64),
              help="worker processes for an events.avro source, each replaying the runs that hash to it "
                   "(the output is the same for any N)")
@dsn_options
def replay(source: str, verify: bool, pubkey_path: Path | None, log_root_path: Path | None, as_json: bool,
           jobs: int, settings: Settings) -> None:
    """Replay SOURCE: an events.avro file, `warehouse:[RUN_SET]` (the raw table) or
    `kafka://HOST:PORT` (the trajectory topic from the start). Checks every run's hash chain and
    seq (with the schema each event was written with) and the scored diffs, re-runs the processors,
    prints each run set's log root, and with --verify diffs the result against the warehouse and
    the root against log_root.json; --pubkey also verifies its signature. Exits 1 naming the run
    and seq of every break."""
    from audit.log_root_record import LogRootError, load_public_key
    from audit.checks import SourceDirs
    from audit.file_source import events_from_file
    from audit.findings import Finding
    from audit.parallel_replay import replay_file_jobs
    from audit.replayer import replay as do_replay
    from audit.root_check import check_log_root
    from audit.warehouse_source import events_from_warehouse

    public_key = None
    if pubkey_path is not None:
        try:
            public_key = load_public_key(pubkey_path)
        except LogRootError as exc:
            raise UsageError(f"--pubkey: {exc}") from None
    findings: list[Finding] = []
    warehouse = None
    from_file = not source.startswith(("warehouse:", "kafka://"))
    if jobs > 1 and not from_file:
        raise UsageError("--jobs: more than one job needs an events.avro source (a warehouse: or kafka:// source "
                         "is replayed by one process)")
    # a log file's blob store and skill banks are beside it (copy them together); else the run set's under runs/
    dirs = SourceDirs(file_dir=Path(source).parent) if from_file else SourceDirs(runs_dir=settings.runs_dir)
    try:
        if source.startswith("warehouse:"):
            validate_run_set_id(source[len("warehouse:"):] or None, "warehouse:RUN_SET")
            warehouse = open_warehouse(settings, create=False)
            events = events_from_warehouse(warehouse, source[len("warehouse:"):] or None, findings)
        elif source.startswith("kafka://"):
            from audit.kafka_source import events_from_kafka

            require_kafka(source, "SOURCE")
            events = events_from_kafka(source, findings)
            warehouse = open_warehouse(settings, create=False) if verify else None
        else:
            path = Path(source)
            if not path.is_file():
                raise UsageError(f"replay: no such event log '{source}'")
            events = events_from_file(path, findings)
            warehouse = open_warehouse(settings, create=False) if verify else None
        compare_with = warehouse if verify or source.startswith("warehouse:") else None
        if jobs > 1:
            result = replay_file_jobs(Path(source), jobs, findings, compare_with, dirs)
        else:
            result = do_replay(events, findings, compare_with, dirs.blobs, dirs.banks, file_log=from_file)
    finally:
        if warehouse is not None:
            warehouse.close()
    try:
        checks = []
        if verify or public_key is not None or log_root_path is not None:
            # a log_root.json under runs/ describes the warehouse it was written for: replaying another
            # warehouse (or a Kafka topic) of the same run set does not check against it, unless given
            only_for = settings.warehouse if source.startswith("warehouse:") and log_root_path is None else None
            for path in _root_files(source, from_file, log_root_path, result, settings):
                required = public_key is not None or log_root_path is not None
                check = check_log_root(result, path, public_key, required=required, warehouse_dsn=only_for)
                if check is not None:
                    checks.append(check)
        if as_json:
            click.echo(json.dumps({"ok": result.ok, "events": result.events, "runs": result.runs,
                                   "derived": result.derived, "compared": result.compared,
                                   "diffs_checked": result.diffs_checked, "log_root": result.log_root,
                                   "run_sets": [s.to_json() for s in result.run_sets.values()],
                                   "log_root_files": [c.to_json() for c in checks],
                                   "findings": [f.__dict__ for f in result.findings]}, indent=2))
        else:
            _print_human(result, checks, warehouse is not None)
    finally:
        result.close()  # the heads' file: every root is computed and checked
    if not result.ok:
        raise SystemExit(1)


def _root_files(source: str, from_file: bool, given: Path | None, result, settings: Settings) -> list[Path]:
    """Which log_root.json files to check: the one given; beside a log file; for the warehouse, each
    replayed run set's under runs/; none for a Kafka topic (the embedded path writes those files, so
    they never describe a topic)."""
    if given is not None:
        return [given]
    if from_file:
        return [Path(source).parent / "log_root.json"]
    if source.startswith("kafka://"):
        return []
    return [settings.runs_dir / run_set / "log_root.json" for run_set in result.run_sets if is_plain_name(run_set)]


def _print_human(result, checks, compared: bool) -> None:
    for finding in result.findings[:50]:
        click.echo(f"BROKEN {finding}", err=True)
    if len(result.findings) > MAX_PRINTED:
        click.echo(f"... and {len(result.findings) - MAX_PRINTED} more (use --json for all)", err=True)
    if len(result.run_sets) > 1:
        click.echo(f"this log holds {len(result.run_sets)} run sets:")
    for summary in result.run_sets.values():
        click.echo(f"run set {summary.run_set}: {summary.runs} runs, {summary.events} events, "
                   f"log root {summary.log_root}")
        for run_id, unit_id, seq in summary.abandoned:
            click.echo(f"  abandoned attempt: run {run_id} ({unit_id}) closed at seq {seq}")
        if summary.fenced:
            runs = sorted({run_id for run_id, _, _ in summary.fenced})
            click.echo(f"  fenced: {len(summary.fenced)} events of {len(runs)} runs published after their run had "
                       f"ended (a stalled runner's late attempt; kept, derive nothing): {', '.join(runs[:5])}"
                       + (" …" if len(runs) > 5 else ""))
    for check in checks:
        if check.recorded is not None and check.recorded == check.recomputed:
            click.echo(f"{check.path}: log root matches" + (", signature verified" if check.signature == "verified"
                                                            else ""))
    click.echo(f"{result.events} events in {result.runs} runs; {result.derived} derived events re-derived"
               + (f", {result.compared} compared with the warehouse" if compared else "")
               + ("; all chains intact and all derived events agree" if result.ok
                  else f"; {len(result.findings)} problems"))
