"""Errors the CLI turns into one-line messages and exit statuses, and the exit statuses themselves:
the pipeline returns outcomes and raises typed errors (`membench.pipeline.run_errors`), and only the CLI
chooses how a process ends."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

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


def stop_exit_status(stopped: str | None, after_grid: bool = False) -> int:
    """The exit status of how a grid ended (`membench.pipeline.stopping.GridStop.stopped`, an outcome's
    `stopped`): 4 when it stopped itself for its harness, 130 for a signal (also one that came
    once every unit had ended, AFTER_GRID), else 0."""
    if stopped is not None:
        return EXIT_HARNESS_FAULTS if stopped == "harness_faults" else EXIT_STOPPED
    return EXIT_STOPPED if after_grid else EXIT_OK


def run_exit_status(outcome) -> int:
    """The exit status of a grid run's `membench.pipeline.grid_run.RunOutcome` (before --strict): a stop
    first (whatever its log holds, the findings are shown), then a log that does not verify."""
    if outcome.stopped is None and not outcome.verified:
        return EXIT_AUDIT_FAILED
    return stop_exit_status(outcome.stopped, outcome.stopped_after_grid)


def end_stopped(status: int) -> NoReturn:
    """Exit with STATUS after a grid's stop. A unit thread still blocked past the kill (its output
    is fenced) would be joined by a plain exit, so the process then ends at once, streams flushed."""
    from membench.pipeline.stopping import unit_threads_alive

    sys.stdout.flush()
    sys.stderr.flush()
    if unit_threads_alive():
        os._exit(status)
    raise SystemExit(status)


def hard_exit() -> None:
    """A third Ctrl-C / SIGTERM (`membench.pipeline.stopping.GridStop`'s last resort): end the process at
    once, whatever thread, Kafka client or sandbox child still hangs."""
    os._exit(EXIT_STOPPED)
