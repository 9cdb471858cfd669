"""The `membench` command line. Each command group lives in `membench/commands/`; every command is
imported and registered explicitly here, so a renamed or broken command module fails at start-up."""

from __future__ import annotations

import os

import click

from membench.commands.bench import bench
from membench.commands.doctor import doctor
from membench.commands.export import export
from membench.commands.imports import import_
from membench.commands.kafka import process, sink
from membench.commands.memory import memory
from membench.commands.pack import pack, validate
from membench.commands.rederive import rederive
from membench.commands.replay import replay
from membench.commands.report import report
from membench.commands.run import run
from membench.commands.runner import runner
from membench.commands.score import score
from membench.commands.sql import sql
from membench.commands.stats import stats
from membench.commands.transfer import transfer
from membench.commands.view import view
from membench.errors import UsageError

COMMANDS = (run, report, sql, replay, stats, doctor, bench, process, sink, pack, validate, import_, score, export,
            view, runner, transfer, rederive, memory)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="membench")
def main() -> None:
    """membench: measure whether a coding agent's memory helps or hurts it across sessions."""
    from producers.memory_systems.registry import register_adapters_from_env, register_plugins

    # a memory library's own telemetry stays off in every process membench starts (Mem0 reads it at import)
    os.environ["MEM0_TELEMETRY"] = "False"
    try:  # external memory systems named in the environment, and installed plug-ins, become conditions
        register_adapters_from_env(os.environ)
        register_plugins()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


for _command in COMMANDS:
    main.add_command(_command)
