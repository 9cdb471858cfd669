"""`membench replay SOURCE --verify`: audit a run set against its log."""

from __future__ import annotations

import json
from pathlib import Path

import click

from membench.commands.common import dsn_options, open_warehouse
from membench.errors import UsageError
from membench.settings import Settings

MAX_PRINTED = 50


@click.command()
@click.argument("source")
@click.option("--verify", is_flag=True, help="also compare re-derived events with the warehouse")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@dsn_options
def replay(source: str, verify: bool, as_json: bool, settings: Settings) -> None:
    """Replay SOURCE: an events.avro file, `warehouse:[RUN_SET]` (the raw table) or
    `kafka://HOST:PORT` (the trajectory topic from the start). Checks every run's hash chain and
    seq, re-runs the processors, and with --verify diffs the result against the warehouse. Exits 1
    naming the run and seq of every break."""
    from membench.replay import Finding, events_from_file, events_from_warehouse, replay as do_replay

    findings: list[Finding] = []
    warehouse = None
    try:
        if source.startswith("warehouse:"):
            warehouse = open_warehouse(settings, create=False)
            events = events_from_warehouse(warehouse, source[len("warehouse:"):] or None, findings)
        elif source.startswith("kafka://"):
            from membench.distributed import events_from_kafka

            events = events_from_kafka(source, findings)
            warehouse = open_warehouse(settings, create=False) if verify else None
        else:
            path = Path(source)
            if not path.is_file():
                raise UsageError(f"replay: no such event log '{source}'")
            events = events_from_file(path, findings)
            warehouse = open_warehouse(settings, create=False) if verify else None
        result = do_replay(events, findings, warehouse if verify or source.startswith("warehouse:") else None)
    finally:
        if warehouse is not None:
            warehouse.close()
    if as_json:
        click.echo(json.dumps({"ok": result.ok, "events": result.events, "runs": result.runs,
                               "derived": result.derived, "compared": result.compared,
                               "findings": [f.__dict__ for f in result.findings]}, indent=2))
    else:
        for finding in result.findings[:MAX_PRINTED]:
            click.echo(f"BROKEN {finding}", err=True)
        if len(result.findings) > MAX_PRINTED:
            click.echo(f"... and {len(result.findings) - MAX_PRINTED} more (use --json for all)", err=True)
        click.echo(f"{result.events} events in {result.runs} runs; {result.derived} derived events re-derived"
                   + (f", {result.compared} compared with the warehouse" if warehouse is not None else "")
                   + ("; all chains intact and all derived events agree" if result.ok
                      else f"; {len(result.findings)} problems"))
    if not result.ok:
        raise SystemExit(1)
