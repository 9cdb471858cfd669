"""The CLI's terminal display of a run (`membench.pipeline.run_display.RunDisplay`): the run's account on stderr
(rich, styled), a progress bar on a terminal or plain progress lines when stderr is not one
(membench/pipeline/progress_lines.py), and the report's tables on stdout: the pass-rate table, the cost and
reliability tables, the failed gates and the verdicts (also what `membench report` prints), and a
transfer study's section. The pipeline draws none of it: `membench run` (either bus), `score` and
`transfer` pass a `TerminalDisplay`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from membench.reports.model import Report


class TerminalDisplay:
    def __init__(self, console: Console | None = None):
        self.console = console if console is not None else Console(stderr=True)

    def print(self, message: Any, **style: Any) -> None:
        self.console.print(message, **style)

    def problem(self, label: str, line: str) -> None:
        self.console.print(Text.assemble((f"{label} ", "bold red"), line), highlight=False, soft_wrap=True)

    @contextmanager
    def units(self, total: int, passes: bool = True) -> Iterator[Any]:
        lines = plain_progress(self.console, total, passes=passes)  # a redirected run still reports progress
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=self.console, transient=False) as progress, lines.running():
            yield _Shown(progress, progress.add_task("units", total=total), lines)

    def report(self, report: Any) -> None:
        print_table(Console(), report)
        if getattr(report, "transfer", None) is not None:  # a transfer study's report
            print_transfer(Console(), report.transfer)


class _Shown:
    def __init__(self, progress: Progress, bar: Any, lines: Any):
        self.progress, self.bar, self.lines = progress, bar, lines

    def observe(self, event: Any) -> None:
        self.lines.observe(event)

    def done(self, unit_id: str) -> None:
        self.progress.update(self.bar, advance=1, description=unit_id)
        self.lines.unit_done()


def print_table(console: Console, report: Report) -> None:
    """The pass-rate table, and under it one line per failed validity gate naming the comparisons it
    invalidates (membench/reports/gate_failures.py)."""
    table = Table(title=f"{report.suite} · {report.agent} · run set {report.run_set}")
    for column in ("condition", "cells", "passed", "pass rate", "95% CI", "excluded"):
        table.add_column(column, justify="left" if column == "condition" else "right")
    gates = report.validity_gates
    for c in report.conditions:
        low, high = c.ci95
        rate = "—" if c.pass_rate is None else f"{100 * c.pass_rate:.1f}%"
        ci = "—" if low is None or high is None else f"{100 * low:.1f}–{100 * high:.1f}%"
        if c.ci_method == "clopper_pearson_traps":  # all or none passed: the bootstrap has zero width there
            ci += " exact"
        # why, where the user looks: a misconfigured model must not read as a bare count
        gate = gates.exclusions.get(c.condition)
        reasons = ", ".join(f"{reason} {n}" for reason, n in (gate.reasons if gate else {}).items())
        table.add_row(c.condition, str(c.cells), str(c.passed), rate, ci,
                      f"{c.excluded} ({reasons})" if c.excluded and reasons else str(c.excluded))
    console.print(table)
    # a failed validity gate is shown with the numbers it invalidates, never only deep in report.md
    from membench.reports.gate_failures import failure_lines

    print_effort_table(console, report)

    for line in failure_lines(report):
        console.print(Text(line, style="bold red"), soft_wrap=True)
    print_verdicts(console, report)


def print_effort_table(console: Console, report: Report) -> None:
    """What each condition's pass rate cost and how reliably it passes (membench/reports/effort.py), as a
    second table so the pass-rate table stays narrow; a report without the figures prints none."""
    from membench.reports.effort import CLI_EFFORT_COLUMNS, CLI_MEMORY_CALL_COLUMNS, effort_row, memory_call_row

    rows = [row for row in (effort_row(c, cli=True) for c in report.conditions) if row is not None]
    if not rows:
        return
    k = next((c.pass_hat_k.k for c in report.conditions if c.pass_hat_k is not None), None)
    table = Table(title=f"cost and reliability · per valid cell / per pass · pass^k over k={k} seeds", box=box.SIMPLE)
    for column in CLI_EFFORT_COLUMNS:
        table.add_column(column, justify="left" if column == "condition" else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    calls = Table(title="memory the agent called · over the valid cells' sessions", box=box.SIMPLE)
    for column in CLI_MEMORY_CALL_COLUMNS:
        calls.add_column(column, justify="left" if column == "condition" else "right")
    for calls_row in (memory_call_row(c) for c in report.conditions):
        if calls_row is not None:
            calls.add_row(*calls_row)
    console.print(calls)


def plain_progress(console: Console, total: int, what: str = "units", passes: bool = True):
    """Plain progress lines on CONSOLE's stream when it is not a terminal (membench/pipeline/progress_lines.py);
    on a terminal the rich bar shows progress and the lines are off."""
    from membench.pipeline.progress_lines import PlainProgress

    say = lambda text: console.print(text, highlight=False, markup=False, soft_wrap=True)  # noqa: E731
    return PlainProgress(total, say, interval_s=None if not console.is_terminal else 0, what=what, passes=passes)


def print_verdicts(console: Console, report: Report) -> None:
    """One verdict line per comparison the user asked (--compare) and per comparison of the primary
    family (membench/reports/comparison_verdicts.py); the other families' are counted and left to report.md."""
    asked = list(report.requested or [])
    verdicts = list(report.verdicts or [])
    shown = {(frozenset((v.a, v.b)), v.family) for v in asked}
    primary = [v for v in verdicts if v.role == "primary" and (frozenset((v.a, v.b)), v.family) not in shown]
    if not asked and not primary:
        return
    console.print("verdicts (primary test: exact trap-clustered sign-flip; Holm within the family):",
                  highlight=False, markup=False)
    for label, items in (("asked", asked), ("primary", primary)):
        for v in items:
            style = "green" if v.status == "publishable" else "yellow" if v.status == "not_publishable" else ""
            console.print(Text(f"  {label}: {v.line}", style=style), soft_wrap=True, highlight=False)
    rest = sum(1 for v in verdicts if v.role != "primary" and (frozenset((v.a, v.b)), v.family) not in shown)
    if rest:
        families = ", ".join(dict.fromkeys(v.family for v in verdicts if v.role != "primary"))
        console.print(f"  {rest} more verdicts ({families}) in report.md; ask one with --compare A:B",
                      highlight=False, markup=False, soft_wrap=True)


def print_transfer(console: Console, section) -> None:
    """The transfer section of a transfer study's report: CCPF and weighted score per project and condition."""
    table = Table(title="transfer: CCPF and weighted score per project and condition")
    for column in ("project", "condition", "runs", "CCPF", "weighted score", "caps fired", "excluded"):
        table.add_column(column, justify="left" if column in ("project", "condition", "caps fired") else "right")
    for row in section.projects:
        ccpf = "—" if row.ccpf_micro is None else f"{row.ccpf_micro:.3f}"
        score = "—" if row.weighted_score_mean is None else f"{row.weighted_score_mean:.1f}"
        table.add_row(row.project, row.condition, str(row.runs), ccpf, score, ", ".join(row.caps_fired) or "—",
                      str(row.excluded))
    console.print(table)
