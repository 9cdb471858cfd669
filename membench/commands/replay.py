"""`membench replay SOURCE --verify`: audit a run set against its log."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from membench.commands.cli_helpers import dsn_options, require_kafka, validate_run_set_id
from membench.errors import UsageError
from membench.pipeline.settings import Settings


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
    from membench.audit.log_root_record import LogRootError, load_public_key
    from membench.audit.verify import problem_lines, summary_lines, verify_source

    public_key = None
    if pubkey_path is not None:
        try:
            public_key = load_public_key(pubkey_path)
        except LogRootError as exc:
            raise UsageError(f"--pubkey: {exc}") from None
    from_file = not source.startswith(("warehouse:", "kafka://"))
    if jobs > 1 and not from_file:
        raise UsageError("--jobs: more than one job needs an events.avro source (a warehouse: or kafka:// source "
                         "is replayed by one process)")
    if source.startswith("warehouse:"):
        validate_run_set_id(source[len("warehouse:"):] or None, "warehouse:RUN_SET")
    elif source.startswith("kafka://"):
        require_kafka(source, "SOURCE")
    elif from_file and not Path(source).is_file():
        raise UsageError(f"replay: no such event log '{source}'")
    # the same call the end of `membench run`, `score` and `transfer` makes (membench.pipeline.grid_run.verify_written)
    verification = verify_source(source, runs_dir=settings.runs_dir, warehouse_dsn=settings.warehouse,
                                 open_warehouse=lambda: open_for_replay(settings, source), verify=verify,
                                 public_key=public_key, log_root_path=log_root_path, jobs=jobs)
    result = verification.result
    try:
        if as_json:
            click.echo(json.dumps({"ok": result.ok, "events": result.events, "runs": result.runs,
                                   "derived": result.derived, "compared": result.compared,
                                   "diffs_checked": result.diffs_checked, "log_root": result.log_root,
                                   "run_sets": [s.to_json() for s in result.run_sets.values()],
                                   "log_root_files": [c.to_json() for c in verification.checks],
                                   "findings": [f.__dict__ for f in result.findings]}, indent=2))
        else:
            for line in problem_lines(verification):
                click.echo(line, err=True)
            for line in summary_lines(verification):
                click.echo(line)
    finally:
        verification.close()  # the heads' file: every root is computed and checked
    if not result.ok:
        raise SystemExit(1)



def open_for_replay(settings: Settings, source: str):
    """The warehouse `--verify` (or a warehouse: source) compares with. While another process (a run)
    owns the embedded one: a usage error naming the replay that works now, the same source without
    the warehouse (a warehouse source: the run sets' log files), which checks the chains, the scored
    diffs and the processors' folds; a snapshot rebuilt from the logs would only compare the log with
    itself."""
    from membench.warehouse.client import WarehouseBusy, WarehouseError, connect

    try:
        return connect(settings.warehouse, create=False)
    except WarehouseBusy as exc:
        if source.startswith("warehouse:"):
            run_set = source[len("warehouse:"):]
            log = settings.runs_dir / (run_set or "RUN_SET") / "events.avro"
            works = f"membench replay {shlex.quote(str(log))}"
        else:
            works = f"membench replay {shlex.quote(source)}"
        raise UsageError(f"replay: {exc}. Run `membench replay {shlex.quote(source)} --verify` again once it has "
                         f"ended; meanwhile `{works}` replays the log without the warehouse (hash chains, scored diffs, "
                         "the processors' folds)") from None
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None
