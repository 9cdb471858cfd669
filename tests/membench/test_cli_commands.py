"""The CLI's lazily imported commands (membench/cli.py): every entry imports and is the command of
its name, `--help` lists them all, and a command that is not invoked is not imported."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from membench.cli import COMMANDS, load_command, main


def test_every_command_entry_imports_and_carries_its_name() -> None:
    for name in COMMANDS:
        command = load_command(name)
        assert isinstance(command, click.Command), name
        assert command.name == name, (name, command.name)


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    listed = {line.split()[0] for line in result.output.split("Commands:", 1)[1].splitlines() if line.strip()}
    assert listed == set(COMMANDS)


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["no-such-command"])
    assert result.exit_code == 2 and "No such command 'no-such-command'" in result.output


def test_sql_does_not_import_the_runner_or_the_statistics() -> None:
    """What `membench sql` loads: its own command, not `run`'s or `stats`'s (a fresh interpreter:
    this one has imported everything already)."""
    script = ("import sys\n"
              "from membench.cli import load_command\n"
              "load_command('sql')\n"
              "print(' '.join(m for m in ('membench.commands.run', 'membench.commands.stats', 'analytics', "
              "'scipy') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
