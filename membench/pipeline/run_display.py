"""What a run shows while it runs, as a protocol the caller supplies: the run's account (one line at
a time: the units to run, recovered events, abandoned attempts, findings, problems flagged), its
progress over the units, and the finished report. The pipeline never draws a terminal itself (it
imports no `rich`): the CLI passes its terminal display (`membench/commands/terminal_display.py`, a
rich bar and tables), a Python caller gets `SilentDisplay` unless it asks for `PlainLines` (plain
text on a stream). The embedded grid run, the Kafka grid run and the transfer study show themselves
on it."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO


class UnitsShown(Protocol):
    """The progress of one grid: every event the units publish, and each unit as it ends."""

    def observe(self, event: Any) -> None: ...

    def done(self, unit_id: str) -> None: ...


class RunDisplay(Protocol):
    def print(self, message: Any, **style: Any) -> None:
        """One line of the run's account: a str, which may set a word in `[bold]…[/]` unless STYLE
        says markup=False; STYLE is rich's keyword arguments (highlight, markup, soft_wrap), which a
        plain display ignores."""

    def problem(self, label: str, line: str) -> None:
        """One problem of the account, LINE flagged LABEL (MISMATCH, WARNING): shown as `LABEL LINE`."""

    def units(self, total: int, passes: bool = True) -> Any:
        """A context manager over the grid's TOTAL units, yielding a `UnitsShown`; PASSES False: the
        units have no pass/fail verdict (the transfer study's)."""

    def report(self, report: Any) -> None:
        """The report written at the end (a `membench.reports.model.Report`)."""


class _NoUnits:
    def observe(self, event: Any) -> None:
        pass

    def done(self, unit_id: str) -> None:
        pass


class SilentDisplay:
    """Shows nothing: a library call's default (the outcome says what happened)."""

    def print(self, message: Any, **style: Any) -> None:
        pass

    def problem(self, label: str, line: str) -> None:
        pass

    @contextmanager
    def units(self, total: int, passes: bool = True) -> Iterator[UnitsShown]:
        yield _NoUnits()

    def report(self, report: Any) -> None:
        pass


EMPHASIS = re.compile(r"\[(?:bold|/bold|/)\]")  # the only markup the pipeline's lines use


def plain_text(message: Any, markup: bool = True) -> str:
    """MESSAGE without styling: a styled text's plain string; a str's [bold]...[/] markup removed
    (kept as written with MARKUP False, as the terminal shows it)."""
    plain = getattr(message, "plain", None)
    if plain is not None:
        return plain
    return EMPHASIS.sub("", str(message)) if markup else str(message)


class PlainLines:
    """The account as plain lines on STREAM (default stderr), and progress lines every INTERVAL_S
    seconds (`membench.pipeline.progress_lines.PlainProgress`; None: MEMBENCH_PROGRESS_INTERVAL or 30 s)."""

    def __init__(self, stream: TextIO | None = None, interval_s: float | None = None):
        self.stream, self.interval_s = stream, interval_s

    def print(self, message: Any, **style: Any) -> None:
        print(plain_text(message, style.get("markup", True)), file=self.stream or sys.stderr, flush=True)

    def problem(self, label: str, line: str) -> None:
        self.print(f"{label} {line}", markup=False)

    @contextmanager
    def units(self, total: int, passes: bool = True) -> Iterator[UnitsShown]:
        from membench.pipeline.progress_lines import PlainProgress

        lines = PlainProgress(total, lambda text: self.print(text, markup=False), interval_s=self.interval_s,
                              passes=passes)
        with lines.running():
            yield _Counted(lines)

    def report(self, report: Any) -> None:
        for c in report.conditions:
            rate = "—" if c.pass_rate is None else f"{100 * c.pass_rate:.1f}%"
            self.print(f"{c.condition}: {c.passed}/{c.cells} passed ({rate}), {c.excluded} excluded")


class _Counted:
    def __init__(self, lines: Any):
        self.lines = lines

    def observe(self, event: Any) -> None:
        self.lines.observe(event)

    def done(self, unit_id: str) -> None:
        self.lines.unit_done()
