"""`membench export FORMAT RUN_SET …`: a run set from the warehouse into other tools' formats."""

from __future__ import annotations

import click

from membench.commands.export_inspect import inspect_
from membench.commands.export_otel import otel
from membench.commands.export_site import site
from membench.commands.export_tables import parquet


@click.group()
def export() -> None:
    """Export a run set: OpenTelemetry GenAI traces, Inspect AI eval logs, Parquet tables, a static site."""


for _command in (otel, inspect_, parquet, site):
    export.add_command(_command)
