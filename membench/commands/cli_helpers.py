"""Options and helpers shared by the commands: the DSN options, list and seed parsing, run-set ids;
the report options of `run`, `score` and `report`, the signing key, the embedded grid run, and
`--strict` (exit status 3 when a validity gate failed)."""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from membench.errors import (EXIT_AUDIT_FAILED, EXIT_GATE_FAILED, EXIT_OK, UsageError, end_stopped, hard_exit,
                             run_exit_status)
from membench.pipeline.run_errors import ReportRefused
from membench.pipeline.settings import Settings, load_settings
from membench.formats.fields import PLAIN_NAME_RULE, is_plain_name

if TYPE_CHECKING:
    from membench.reports.model import Report


def this_command() -> str:
    """The command line that was run, to repeat: a stopped run set resumes with the same command."""
    return "membench " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def dsn_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Adds --bus and --warehouse (overriding MEMBENCH_HOME's defaults) and passes `settings`."""

    @click.option("--warehouse", "warehouse_dsn", metavar="DSN", default=None,
                  help="chdb:///path (embedded, default under MEMBENCH_HOME) or http(s)://host:8123")
    @click.option("--bus", "bus_dsn", metavar="DSN", default=None,
                  help="file://DIR (embedded, default MEMBENCH_HOME/runs) or kafka://HOST:PORT")
    @functools.wraps(func)
    def wrapper(*args: Any, bus_dsn: str | None, warehouse_dsn: str | None, **kwargs: Any) -> Any:
        for name, dsn, schemes in (("--bus", bus_dsn, ("file://", "kafka://")),
                                   ("--warehouse", warehouse_dsn, ("chdb://", "http://", "https://"))):
            if dsn is not None and not dsn.startswith(schemes):
                raise UsageError(f"{name}: unknown DSN '{dsn}' (expected {' or '.join(s + '...' for s in schemes)})")
        if bus_dsn and bus_dsn.startswith("kafka://"):
            from membench.bus.topics import topics_from_dsn

            try:
                topics_from_dsn(bus_dsn)
            except ValueError as exc:
                raise UsageError(f"--bus: {exc}") from None
        return func(*args, settings=load_settings(bus_dsn, warehouse_dsn), **kwargs)

    return wrapper


def require_kafka(dsn: str, where: str = "--bus") -> None:
    """A UsageError (exit 2, one line) when no Kafka broker of DSN answers (probed with a bounded
    timeout, librdkafka's log silenced): the address and how to start one. A command that talks to
    the bus calls it once its own input is checked, before its first Kafka client."""
    from membench.bus.kafka import probe_brokers
    from membench.bus.topics import topics_from_dsn

    try:
        bootstrap = topics_from_dsn(dsn).bootstrap
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None
    problem = probe_brokers(bootstrap)
    if problem is not None:
        raise UsageError(f"{where} {dsn}: the Kafka bus at {bootstrap} is unreachable ({problem}); start a broker "
                         "(deploy/kafka/start.sh, or deploy/services.sh start) or run on the embedded bus "
                         "(omit --bus and MEMBENCH_BUS)")


def open_warehouse(settings: Settings, create: bool = True):
    from membench.warehouse.client import WarehouseError, connect

    try:
        return connect(settings.warehouse, create=create)
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None


def connect_for_reading(settings: Settings, run_sets: list[str] | None = None):
    """The warehouse opened read-only for a query (`sql`, the exports, `membench.frames`). While
    another process (a run) owns the embedded warehouse: a snapshot rebuilt from the logs under
    runs/ instead (`membench.pipeline.log_snapshot`; only RUN_SETS' logs when given), said on stderr with what
    it holds; its `close` removes it. Raises WarehouseError as `connect` does otherwise."""
    from membench.warehouse.client import WarehouseBusy, connect

    try:
        return connect(settings.warehouse, create=False, read_only=True)
    except WarehouseBusy as exc:
        from membench.pipeline.log_snapshot import snapshot_from_logs

        snapshot = snapshot_from_logs(settings.runs_dir, run_sets)
        click.echo(f"note: the warehouse is owned by {exc.owner or 'another process'}; {snapshot.note}", err=True)
        return snapshot.reader()


def parse_list(value: str, option: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"{option}: empty list")
    return items


def parse_seeds(value: str) -> list[int]:
    seeds = []
    for item in parse_list(value, "--seeds"):
        try:
            seeds.append(int(item))
        except ValueError:
            raise UsageError(f"--seeds: '{item}' is not an integer") from None
    return seeds


def validate_run_set_id(value: str | None, where: str = "--run-set") -> str | None:
    """VALUE when it is a valid run-set id (None passes through: the id is derived); otherwise a
    UsageError (exit 2) naming WHERE — the option or argument it came from.

    A run-set id becomes a directory under MEMBENCH_HOME/runs/ and a value in warehouse queries, so
    it is confined to `membench.formats.fields.PLAIN_NAME`: 1-128 characters, a letter or digit first, then
    letters, digits, '.', '_', '-', and no '..' — no path separator, no leading dot, no escape
    from the runs directory."""
    if value is None or is_plain_name(value):
        return value
    raise UsageError(f"{where}: invalid run-set id {value!r} ({PLAIN_NAME_RULE})")


@dataclass(frozen=True)
class ReportOptions:
    """How `run` and `score` build the report at the end: the baseline, the study, the pack (canary)."""

    baseline: str | None = None
    study: Any = None  # membench.reports.study.Study; None: the default study
    pack_spec: str | None = None
    compare: tuple[tuple[str, str], ...] = ()  # --compare A:B pairs, answered in the report's `requested`

    def builder(self, home: Path):
        """What `membench.pipeline.grid_run.run_embedded` calls to build the report at the end
        (`membench.pipeline.run_request.report_builder`, as the library call builds it) with these options."""
        from membench.pipeline.run_request import report_builder

        return report_builder(home, self.baseline, self.study, self.pack_spec, self.compare)


def run_embedded(pack, units, config, sandbox_name: str, settings: Settings, workers: int, agent_for=None,
                 verb: str = "run", signer=None, report_options: ReportOptions | None = None,
                 stop_grace: float = 30.0, workers_note: str | None = None):
    """`membench.pipeline.grid_run.run_embedded` with the report `report_options` describe, after the scoring
    pre-flight and the run set's environment check (`membench.pipeline.run_environment.prepare_scoring`), on
    the terminal display; the outcome becomes the exit status (`membench.errors.run_exit_status`),
    what the pipeline refuses a usage error (exit 2). Returns the report written."""
    from membench.commands.terminal_display import TerminalDisplay
    from membench.pipeline.grid_run import run_embedded as run_grid
    from membench.pipeline.run_environment import prepare_scoring

    prepare_scoring(pack, sandbox_name, settings.runs_dir, config.run_set)  # before anything is written
    resume = this_command()
    try:
        outcome = run_grid(pack, units, config, sandbox_name, settings, workers, agent_for, verb, signer,
                           build_report=(report_options or ReportOptions()).builder(settings.home),
                           stop_grace=stop_grace, display=TerminalDisplay(), resume=resume,
                           workers_note=workers_note, hard_exit=hard_exit)
    except ReportRefused as exc:  # the units are recorded: a log that does not verify is the first news
        if exc.outcome is not None and not exc.outcome.verified:
            raise SystemExit(EXIT_AUDIT_FAILED) from None
        raise UsageError(str(exc)) from None
    status = run_exit_status(outcome)
    if status != EXIT_OK:
        if outcome.stopped is not None:
            end_stopped(status)  # a unit thread still blocked (its log is fenced): not waited for
        raise SystemExit(status)
    return outcome.report


def require_scoring(pack, sandbox_name: str, cases=None) -> None:
    """The scoring pre-flight (`membench.runner.scoring_preflight`) where no run set's environment is
    recorded (a Kafka run, `validate`): a failure is a usage error (exit 2) before anything runs."""
    from membench.runner.scoring_preflight import ScoringPreflightFailed, require_scoring as preflight

    try:
        preflight(pack, sandbox_name, cases)
    except ScoringPreflightFailed as exc:
        raise UsageError(str(exc)) from None


def baseline_options(f):
    """--baseline COND and --study FILE (docs/study.md), shared by run, score and report."""
    f = click.option("--study", "study_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="study file (JSON, docs/study.md): baseline and registered comparison families")(f)
    return click.option("--baseline", default=None, metavar="COND",
                        help="the condition comparisons are made against (default: the study's, else B0, else "
                        "no_memory; with neither and no study baseline the report is refused)")(f)


def compare_option(f):
    """--compare A:B (repeatable), shared by run and report: the comparisons the user asks about."""
    return click.option("--compare", "compare", multiple=True, metavar="A:B",
                        help="answer 'A vs B' in one verdict line (primary test, Holm p within the family that "
                        "registers the pair — the primary, else all_pairs —, Δ with CI, publishable or the gates "
                        "that invalidate it); repeatable")(f)


def parse_compare(values: tuple[str, ...] | list[str], conditions: list[str] | None = None) -> tuple[tuple[str, str], ...]:
    """The pairs of --compare A:B, in order, each once; a malformed pair, or (given CONDITIONS) a side
    that is not one of them, is a usage error naming it."""
    pairs: list[tuple[str, str]] = []
    for value in values:
        a, sep, b = (part.strip() for part in value.partition(":"))
        if not sep or not a or not b or ":" in b:
            raise UsageError(f"--compare: expected A:B (two conditions), got '{value}'")
        if a == b:
            raise UsageError(f"--compare: '{value}' compares a condition with itself")
        for side in (a, b):
            if conditions is not None and side not in conditions:
                raise UsageError(f"--compare {value}: condition '{side}' is not in the run set (its conditions: "
                                 f"{', '.join(conditions) or 'none'})")
        if (a, b) not in pairs:
            pairs.append((a, b))
    return tuple(pairs)


def strict_option(f):
    """--strict/--no-strict, shared by run, score and report. Off by default: a grid smaller than the
    paper's design (one seed, a three-trap pack) fails the design-size gates by construction (paired
    coverage needs two paired seeds per trap), so strict by default would make every quick run exit 3
    and teach users to ignore it; the failed gates are printed under the table either way."""
    return click.option("--strict/--no-strict", "strict", default=False, show_default=True,
                        help="exit with status 3 when a validity gate failed, once the report, the log and the "
                        "log root are written (the failed gates and the comparisons they invalidate are printed "
                        "under the table either way)")(f)


def exit_if_gates_failed(report: Report | None, strict: bool) -> None:
    """Under --strict, exit 3 when REPORT (a `membench.reports.model.Report`) has a failed validity gate
    (membench/reports/gate_failures.py). Called last, after everything is written and printed: the exit status
    is the only thing it changes."""
    if not strict or report is None:
        return
    from membench.reports.gate_failures import failed_gates

    failures = failed_gates(report)
    if failures:
        click.echo(f"--strict: {len(failures)} validity gate{'s' * (len(failures) > 1)} failed "
                   f"({'; '.join(f.gate for f in failures)}): exit status {EXIT_GATE_FAILED}", err=True)
        raise SystemExit(EXIT_GATE_FAILED)
