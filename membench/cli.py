"""The `membench` command line. Each command group lives in `membench/commands/`; `COMMANDS` names
every command's module and object, and a command is imported when it is invoked (or listed by
`--help`): `membench sql …` does not import the statistics, the exports and the runner, which made
every invocation pay about a second of imports. tests/membench/test_cli_commands.py
imports every entry, so a renamed or broken command module still fails the suite."""

from __future__ import annotations

import importlib
import os

import click

from membench.errors import EXIT_AUDIT_FAILED, UsageError

# command name -> "module:object"
COMMANDS = {
    "run": "membench.commands.run:run",
    "report": "membench.commands.report:report",
    "sql": "membench.commands.sql:sql",
    "replay": "membench.commands.replay:replay",
    "stats": "membench.commands.stats:stats",
    "doctor": "membench.commands.doctor:doctor",
    "bench": "membench.commands.bench:bench",
    "process": "membench.commands.process_sink:process",
    "sink": "membench.commands.process_sink:sink",
    "pack": "membench.commands.pack:pack",
    "validate": "membench.commands.pack:validate",
    "import": "membench.commands.imports:import_",
    "score": "membench.commands.score:score",
    "export": "membench.commands.export:export",
    "view": "membench.commands.view:view",
    "runner": "membench.commands.runner:runner",
    "transfer": "membench.commands.transfer:transfer",
    "rederive": "membench.commands.rederive:rederive",
    "memory": "membench.commands.memory:memory",
}


def load_command(name: str) -> click.Command:
    module, _, attr = COMMANDS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def invoke(self, ctx: click.Context) -> object:
        """The pipeline's typed refusals become exit statuses here, the one place that chooses them: a
        refused input is a usage error (2); an audit failure, already shown with its problems, exits 1."""
        from membench.pipeline.run_errors import AuditFailed, RunRefused

        try:
            return super().invoke(ctx)
        except RunRefused as exc:
            raise UsageError(str(exc)) from None
        except AuditFailed:
            raise SystemExit(EXIT_AUDIT_FAILED) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="membench")
def main() -> None:
    """membench: measure whether a coding agent's memory helps or hurts it across sessions."""
    from membench.memory_systems.registry import register_adapters_from_env, register_plugins

    # a memory library's own telemetry stays off in every process membench starts (Mem0 reads it at import)
    os.environ["MEM0_TELEMETRY"] = "False"
    try:  # external memory systems named in the environment, and installed plug-ins, become conditions
        register_adapters_from_env(os.environ)
        register_plugins()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
