"""`membench view`: serve a local web page over MEMBENCH_HOME's run sets (docs/viewer.md)."""

from __future__ import annotations

import click

from membench.errors import UsageError
from membench.pipeline.settings import load_settings


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to bind (loopback by default; the viewer has no authentication)")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (0: any free port, printed at start)")
@click.option("--bus", "bus_dsn", metavar="DSN", default=None,
              help="file://DIR: the runs directory to show, or kafka://HOST:PORT[/NS]: that namespace's "
                   "trajectory topic (default MEMBENCH_BUS, else MEMBENCH_HOME/runs)")
def view(host: str, port: int, bus_dsn: str | None) -> None:
    """Serve a live page of the run sets: progress per condition, the ladder, and every unit's
    trajectory, read from the event logs (never from the warehouse, so it works beside a running
    `membench run`) or, on the Kafka bus, from the trajectory topic."""
    from membench.viewer.http_server import ViewServer, is_loopback

    settings = load_settings(bus_dsn)
    kafka_dsn = None
    if settings.bus.startswith("kafka://"):
        from membench.bus.topics import topics_from_dsn

        try:
            topics_from_dsn(settings.bus)
        except ValueError as exc:
            raise UsageError(f"--bus: {exc}") from None
        from membench.commands.cli_helpers import require_kafka

        require_kafka(settings.bus)
        kafka_dsn = settings.bus
    elif not settings.bus.startswith("file://"):
        raise UsageError(f"--bus: the viewer reads file://DIR or kafka://HOST:PORT[/NS], not {settings.bus!r}")
    try:
        server = ViewServer(settings.runs_dir, host, port, kafka_dsn=kafka_dsn)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    if not is_loopback(host):
        click.echo(f"WARNING: serving on {host}, not loopback: anyone who can reach it reads every run set's "
                   "log (the viewer has no authentication)", err=True)
    shown = f"the trajectory topic of {kafka_dsn}" if kafka_dsn else f"run sets under {settings.runs_dir}"
    click.echo(f"membench view: {server.url}  ({shown}; Ctrl-C stops)", err=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
