"""The `membench` command line. Each command group lives in `membench/commands/`."""

from __future__ import annotations

import importlib

import click

# (module, attribute) of every command; a module owns one job of the CLI.
_COMMANDS = [
    ("membench.commands.run", "run"),
    ("membench.commands.report", "report"),
    ("membench.commands.sql", "sql"),
    ("membench.commands.replay", "replay"),
    ("membench.commands.stats", "stats"),
    ("membench.commands.doctor", "doctor"),
    ("membench.commands.bench", "bench"),
    ("membench.commands.kafka", "process"),
    ("membench.commands.kafka", "sink"),
    ("membench.commands.pack", "pack"),
    ("membench.commands.pack", "validate"),
    ("membench.commands.imports", "import_"),
    ("membench.commands.score", "score"),
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="membench")
def main() -> None:
    """membench: measure whether a coding agent's memory helps or hurts it across sessions."""


for _module, _attr in _COMMANDS:
    try:
        _mod = importlib.import_module(_module)
    except ModuleNotFoundError as exc:  # a command group not built yet
        if exc.name != _module:
            raise
        continue
    _cmd = getattr(_mod, _attr, None)
    if _cmd is not None:
        main.add_command(_cmd)
