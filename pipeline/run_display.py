"""What a grid run shows while it runs, as a protocol the caller supplies: the run's account (one
line at a time: the units to run, recovered events, abandoned attempts, findings), its progress over
the units, and the finished report. The pipeline never draws a terminal itself: the CLI passes its
terminal display (`membench/commands/terminal_display.py`, a rich bar and tables), a Python caller
gets `SilentDisplay` unless it asks for `PlainLines` (plain text on a stream)."""

from __future__ import annotations

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
        """One line of the run's account: a str, or a `rich.text.Text`; STYLE is rich's keyword
        arguments (highlight, markup, soft_wrap), which a plain display ignores."""

    def units(self, total: int) -> Any:
        """A context manager over the grid's TOTAL units, yielding a `UnitsShown`."""

    def report(self, report: Any) -> None:
        """The report written at the end (a `reports.model.Report`)."""


class _NoUnits:
    def observe(self, event: Any) -> None:
        pass

    def done(self, unit_id: str) -> None:
        pass


class SilentDisplay:
    """Shows nothing: a library call's default (the outcome says what happened)."""

    def print(self, message: Any, **style: Any) -> None:
        pass

    @contextmanager
    def units(self, total: int) -> Iterator[UnitsShown]:
        yield _NoUnits()

    def report(self, report: Any) -> None:
        pass


def plain_text(message: Any) -> str:
    """MESSAGE without rich's styling: a `Text`'s plain string; a str's [bold]...[/] markup removed."""
    plain = getattr(message, "plain", None)
    if plain is not None:
        return plain
    from rich.text import Text

    return Text.from_markup(str(message)).plain


class PlainLines:
    """The account as plain lines on STREAM (default stderr), and progress lines every INTERVAL_S
    seconds (`pipeline.progress_lines.PlainProgress`; None: MEMBENCH_PROGRESS_INTERVAL or 30 s)."""

    def __init__(self, stream: TextIO | None = None, interval_s: float | None = None):
        self.stream, self.interval_s = stream, interval_s

    def print(self, message: Any, **style: Any) -> None:
        print(plain_text(message), file=self.stream or sys.stderr, flush=True)

    @contextmanager
    def units(self, total: int) -> Iterator[UnitsShown]:
        from pipeline.progress_lines import PlainProgress

        lines = PlainProgress(total, self.print, interval_s=self.interval_s)
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
