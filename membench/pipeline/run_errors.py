"""What a run refuses or fails on, as types: the pipeline raises them, a Python caller catches them,
and the CLI alone turns them into exit statuses (`membench/cli.py`)."""

from __future__ import annotations


class RunRefused(Exception):
    """What the pipeline refuses on the user's input (a warehouse it cannot open, a report it cannot
    build, a request that breaks a rule of a run): nothing of it is run; the CLI shows it as a usage
    error (exit status 2), one line."""


class RequestInvalid(RunRefused):
    """A run request that breaks a rule of a legal run (an unknown condition, a pack that does not
    load, a baseline the conditions leave open, ...): refused before anything is written."""


class AuditFailed(Exception):
    """The warehouse or the log does not check (a tampered warehouse, a log that must be repaired):
    nothing was run or written over it; the CLI exits 1, as `membench replay --verify` does. The
    problems were shown on the run's display; the message is the summary line."""


class ReportRefused(RunRefused):
    """The units ran and are recorded (log, warehouse, log root), but the report cannot be built
    (e.g. a resumed run set without the baseline); `outcome` says what ran and whether the log
    verified."""

    def __init__(self, message: str, outcome=None):
        super().__init__(message)
        self.outcome = outcome
