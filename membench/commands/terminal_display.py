"""The CLI's display of a grid run (`pipeline.run_display.RunDisplay`): the run's account on stderr
(rich, styled), a progress bar on a terminal or plain progress lines when stderr is not one
(pipeline/progress_lines.py), and the report's tables on stdout."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class TerminalDisplay:
    def __init__(self, console: Console | None = None):
        self.console = console if console is not None else Console(stderr=True)

    def print(self, message: Any, **style: Any) -> None:
        self.console.print(message, **style)

    @contextmanager
    def units(self, total: int) -> Iterator[Any]:
        from pipeline.grid_run import plain_progress

        lines = plain_progress(self.console, total)  # a redirected run still reports progress
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=self.console, transient=False) as progress, lines.running():
            yield _Shown(progress, progress.add_task("units", total=total), lines)

    def report(self, report: Any) -> None:
        from pipeline.grid_run import print_table

        print_table(Console(), report)


class _Shown:
    def __init__(self, progress: Progress, bar: Any, lines: Any):
        self.progress, self.bar, self.lines = progress, bar, lines

    def observe(self, event: Any) -> None:
        self.lines.observe(event)

    def done(self, unit_id: str) -> None:
        self.progress.update(self.bar, advance=1, description=unit_id)
        self.lines.unit_done()
