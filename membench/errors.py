"""Errors the CLI turns into one-line messages and exit statuses, and the exit statuses themselves:
the pipeline returns outcomes and raises typed errors (`pipeline.run_errors`), and only the CLI
chooses how a process ends."""

from __future__ import annotations

import click

EXIT_OK = 0
EXIT_AUDIT_FAILED = 1  # a log or warehouse that does not check (as `membench replay --verify`)
EXIT_USAGE = 2  # bad input, nothing written
EXIT_GATE_FAILED = 3  # with --strict, a validity gate failed (everything is written first)
EXIT_HARNESS_FAULTS = 4  # the grid stopped itself: its oracle harness kept producing no outcome
EXIT_STOPPED = 130  # 128 + SIGINT, as shells report an interrupted command


class UsageError(click.ClickException):
    """Bad input from the user: exit status 2, one line naming the thing and the field."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:  # keep it one line
        return " ".join(str(self.message).split())


def run_exit_status(outcome) -> int:
    """The exit status of a grid run's `pipeline.grid_run.RunOutcome` (before --strict): a stop
    first (whatever its log holds, the findings are shown), then a log that does not verify."""
    if outcome.stopped is not None:
        return EXIT_HARNESS_FAULTS if outcome.stopped == "harness_faults" else EXIT_STOPPED
    if not outcome.verified:
        return EXIT_AUDIT_FAILED
    return EXIT_STOPPED if outcome.stopped_after_grid else EXIT_OK
