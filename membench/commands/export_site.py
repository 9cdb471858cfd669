"""`membench export site RUN_SET OUT_DIR`: the run set as a static site (docs/viewer.md, "Static export")."""

from __future__ import annotations

from pathlib import Path

import click

from membench.commands.cli_helpers import validate_run_set_id
from membench.errors import UsageError
from membench.pipeline.settings import load_settings


@click.command("site")
@click.argument("run_set")
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--bus", "bus_dsn", metavar="DSN", default=None,
              help="file://DIR: the runs directory that holds RUN_SET (default MEMBENCH_BUS, else MEMBENCH_HOME/runs)")
def site(run_set: str, out_dir: Path, bus_dsn: str | None) -> None:
    """Write RUN_SET as a static site into OUT_DIR: the viewer's page with the run set, its units
    table, every unit and paired view, and report.html, read from the event log. It needs no server:
    open OUT_DIR/index.html (or runs/RUN_SET/report.html) from disk, or put OUT_DIR on any static
    host. OUT_DIR must be absent, empty or an earlier site export (replaced); anything else, or an
    unknown run set, exits 2."""
    validate_run_set_id(run_set, "RUN_SET")
    settings = load_settings(bus_dsn)
    if not settings.bus.startswith("file://"):
        raise UsageError(f"--bus: a site is exported from a file log (file://DIR), not {settings.bus!r}")
    from membench.viewer.site import SiteError, write_site
    from membench.viewer.state import LOG_NAME, LiveRunSet

    run_dir = settings.runs_dir / run_set
    if not (run_dir / LOG_NAME).is_file():
        raise UsageError(f"unknown run set {run_set!r}: no {LOG_NAME} in {run_dir}")
    try:
        written = write_site(LiveRunSet(run_set, run_dir / LOG_NAME), run_dir, out_dir)
    except SiteError as exc:
        raise UsageError(str(exc)) from None
    click.echo(f"{out_dir}/index.html\t{written['units']} units, {written['runs']} runs, {written['pairs']} "
               f"trap-seed pairs, {written['blobs']} blobs, {written['bytes']} bytes")
    if written["report"]:
        click.echo(f"{out_dir}/runs/{run_set}/report.html")
    else:
        click.echo(f"no report.html in {run_dir} yet (written when its run ends): the site has none", err=True)
