"""The embedded grid run, as `membench run` and `membench score` do it: recover the run set from its
log, run the units not complete yet on the embedded pipeline with a clean stop
(`membench.pipeline.stopping`), showing progress on the caller's display (`membench.pipeline.run_display`), then write
the report (report.json, report.md, report.html) and the run set's log root, and return what
happened (`RunOutcome`): the exit status is the CLI's choice. `membench transfer` and `membench
report` use its report and log-root writers, and the transfer study opens and resumes its embedded
run set with the same steps (`open_embedded`, `resume_point`)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from membench.pipeline.run_errors import AuditFailed, ReportRefused, RunRefused
from membench.pipeline.settings import Settings
from membench.pipeline.stopping import GridEnd

if TYPE_CHECKING:
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.pipeline.run_display import RunDisplay
    from membench.reports.model import LogVerification, Report


# (warehouse, run set, blob directory) -> (report, secrets): how the caller builds the run set's report
ReportBuilder = Callable[[Any, str, "Path | None"], "tuple[Report, list]"]


def open_warehouse(settings: Settings, create: bool = True):
    from membench.warehouse.client import WarehouseError, connect

    try:
        return connect(settings.warehouse, create=create)
    except WarehouseError as exc:
        raise RunRefused(str(exc)) from None


def render_report(report: Report, secrets=()) -> dict[str, str]:
    """file name -> text of report.json (the JSON form of the typed report), report.md and report.html
    rendered from the typed report itself. With a canary proof that searched the events, the rendered texts are searched
    for `secrets` too and the proof records it (it names secrets, never their values, so rendering it
    again adds none)."""
    from membench.reports.canary import search_reports
    from membench.reports.html import render_html
    from membench.reports.markdown import render_markdown
    from membench.reports.model import to_json

    def render(typed: Report) -> dict[str, str]:
        return {"report.json": json.dumps(to_json(typed), indent=2) + "\n", "report.md": render_markdown(typed),
                "report.html": render_html(typed)}

    texts = render(report)
    if report.canary is not None and report.canary.searched is not None:
        report = replace(report, canary=search_reports(report.canary, list(secrets), texts))
        texts = render(report)
    return texts


def write_report(settings: Settings, report: Report, secrets=(), out: Path | None = None) -> Path:
    """The rendered reports (`render_report`) written to OUT, by default the run set's own directory."""
    texts = render_report(report, secrets)
    out = out if out is not None else settings.runs_dir / report.run_set
    out.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (out / name).write_text(text, encoding="utf-8")
    return out


def refuse(console: RunDisplay, lines: list[str], what: str, hint: str = "") -> None:
    """Show each problem and raise `AuditFailed`: an audit failure (exit 1 on the CLI), not a usage error."""
    for line in lines:
        console.problem("MISMATCH", line)
    summary = f"{what}: the warehouse disagrees with the log (above); nothing was written{hint}"
    console.print(summary, highlight=False, markup=False, soft_wrap=True)
    raise AuditFailed(summary)


def open_embedded(console: RunDisplay, settings: Settings, warehouse, run_set: str, verb: str) -> EmbeddedPipeline:
    """The embedded pipeline on the run set's log, as a grid run and a transfer run open it: first,
    the warehouse must still agree with the log_root.json of the run set's last end (a tampered
    warehouse is refused, exit 1, not laundered into a new root). Recover it (`recover`) before
    anything is published."""
    from membench.audit.log_root_record import (LogRootError, check_warehouse, describes, read_record, record_path,
                                       warehouse_state)
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.bus.base import run_set_log_path

    root_file = record_path(settings.runs_dir, run_set)
    if root_file.exists():
        try:
            recorded = read_record(root_file)
        except LogRootError as exc:
            refuse(console, [str(exc)], verb)
        if describes(recorded, settings.warehouse):
            problems = check_warehouse(warehouse_state(warehouse, run_set), recorded, new_runs_allowed=True)
            if problems:
                refuse(console, problems, verb)
    return EmbeddedPipeline(run_set_log_path(settings.runs_dir, run_set), warehouse)


def resume_point(warehouse, run_set: str) -> tuple[set[str], dict[str, int]]:
    """(the units complete in the warehouse, unit id -> its next attempt number), after `recover`:
    what a resumed run set skips and how it numbers the attempts it starts."""
    from membench.warehouse import queries

    return (queries.completed_units(warehouse, run_set),
            {u: n + 1 for u, n in queries.attempts_started(warehouse, run_set).items()})


@dataclass(frozen=True)
class RunOutcome(GridEnd):
    """What an embedded grid run did, for its caller (a Python program, or the CLI, which alone turns
    it into an exit status): the report written (None when a stop left nothing to report), where the
    files are, the units, whether the log verifies, and how the run ended (`GridEnd`: the planned
    units, those not started, the attempts abandoned, `stopped`, `stop_cause`, `stopped_after_grid`,
    `resume`; a stopped run's report is partial)."""

    run_set: str
    report: Report | None
    report_dir: Path | None
    log: Path
    log_root: str
    verification: LogVerification
    units_completed: int  # of the planned units, complete in the warehouse at the end (earlier runs included)
    units_run: int  # started by this call

    @property
    def verified(self) -> bool:
        return self.verification.verified


def run_embedded(pack, units, config, sandbox_name: str, settings: Settings, workers: int, agent_for=None,
                 verb: str = "run", signer=None, *, build_report: ReportBuilder, stop_grace: float = 30.0,
                 display: RunDisplay | None = None, resume: str | None = None,
                 workers_note: str | None = None, hard_exit: Callable[[], None] | None = None) -> RunOutcome:
    """Run `units` on the embedded pipeline, skipping those already complete in the warehouse,
    showing its account and progress on DISPLAY (default: nothing); then rebuild
    (`build_report(warehouse, run_set, blob_dir)` → (report, secrets)) and write the report, and
    write (and with `signer`, an Ed25519 private key, sign) the run set's log root, then replay the
    log with `replay --verify`'s checks. `agent_for(unit)`, when given, supplies each unit's agent
    (`membench score` replays given patches that way). Returns the `RunOutcome`; it never ends the
    process.

    Before anything runs: the warehouse must still agree with the log_root.json of the run set's
    last end (a tampered warehouse is refused, not laundered into a new root: `AuditFailed`), and
    `EmbeddedPipeline.recover` brings the warehouse up to the log and closes every attempt a crash
    abandoned, so attempt numbers and completed units are counted from the whole log (a log it
    cannot read: `AuditFailed`).

    A first SIGINT/SIGTERM starts no further unit and gives the running ones `stop_grace` seconds; a
    second one (or the period's end) fences the log and kills their sandboxes (membench/pipeline/stopping.py);
    a third calls HARD_EXIT (the CLI's ends the process; None: KeyboardInterrupt).
    Every unfinished attempt is then closed `RunEnded{abandoned}`, the report is written marked
    `partial` with RESUME (how to go on) and the outcome says `stopped="signal"`. A grid whose oracle
    harness keeps faulting stops itself the same way (`HarnessFaultLimit`), the cause as the
    report's partial reason, `stopped="harness_faults"`. A signal before the grid (during recovery)
    starts no unit; one after it (the report, the log root) lets them be written whole
    (`stopped_after_grid`). A report refused after the run (e.g. no baseline in a resumed run set)
    raises `ReportRefused` once what ran is recorded; a warehouse that cannot be opened, `RunRefused`."""
    from membench.audit.log_root_record import record_path
    from membench.pipeline.run_display import SilentDisplay
    from membench.pipeline.stopping import GridStop

    display = display if display is not None else SilentDisplay()
    run_set = config.run_set
    config = replace(config, blob_dir=settings.runs_dir / run_set / "blobs")  # large diffs, beside the log
    root_file = record_path(settings.runs_dir, run_set)
    # a first Ctrl-C / SIGTERM starts no further unit and gives the running ones a grace period; a
    # second (or the period's end) fences the log and kills their sandboxes (membench/pipeline/stopping.py).
    # Installed around the whole body: a signal during recovery, the report or the log root is
    # a stop too, never a traceback or a death that leaves the log root unwritten.
    stop = GridStop(stop_grace, say=lambda text: display.print(text, highlight=False, markup=False,
                                                                soft_wrap=True), hard_exit=hard_exit)
    with stop.installed():
        return _run_body(display, run_set, config, root_file, pack, units, sandbox_name, settings, workers,
                         agent_for, verb, signer, build_report, stop,
                         resume or f"run the same {verb} again (completed units are skipped)", workers_note)


def _run_body(console, run_set, config, root_file, pack, units, sandbox_name, settings, workers, agent_for,
              verb, signer, build_report, stop, resume, workers_note=None) -> RunOutcome:
    from membench.audit.log_root_record import warehouse_state
    from membench.bus.attempts import LogError, describe
    from membench.bus.base import run_set_log_path
    from membench.pipeline.stopping import HarnessFaultLimit, StoppableSandbox, run_units
    from membench.runner.grid import run_unit
    from membench.sandbox.registry import get_sandbox
    from membench.reports.build import ReportError
    from membench.warehouse import queries

    warehouse = open_warehouse(settings)
    try:
        pipeline = open_embedded(console, settings, warehouse, run_set, verb)
        stop.on_kill.append(pipeline.fence)
        try:
            try:
                recovery = pipeline.recover(run_set)
            except LogError as exc:
                summary = f"{verb}: {exc}; the log must be repaired before run set {run_set} can resume"
                console.print(summary, highlight=False, markup=False, soft_wrap=True)
                raise AuditFailed(summary) from None
            if recovery.raw_rows or recovery.derived_rows:
                console.print(f"recovered from the log: {recovery.raw_rows} raw events and {recovery.derived_rows} "
                              "derived events the warehouse lacked", highlight=False)
            for event in recovery.closed:
                console.print(describe(event), highlight=False, markup=False, soft_wrap=True)
            done, attempts = resume_point(warehouse, run_set)
            todo = [u for u in units if u.unit_id not in done]
            # printed with the stop handlers installed (run_embedded): a signal from here on is a clean stop
            console.print(f"run set [bold]{run_set}[/]: {len(units)} units, {len(units) - len(todo)} already "
                          f"complete, {len(todo)} to {verb} with {workers} workers")
            if workers_note:  # after the warehouse opened: an unreachable one stays a one-line error
                console.print(workers_note, highlight=False, markup=False, soft_wrap=True)
            if not todo and config.gateway is not None and config.gateway.settings.record:
                # a recording is made by running units: a complete grid runs none, so it would be silent
                console.print(f"--model-record: nothing was recorded: every unit of run set {run_set} is already "
                              "complete, so no model was called; to record this grid, run it into a new run set "
                              "(--run-set NAME)", highlight=False, markup=False, soft_wrap=True)
            sandbox = StoppableSandbox(get_sandbox(sandbox_name), stop.killed)
            faults = HarnessFaultLimit(stop)  # a grid whose oracle harness keeps faulting stops itself

            with console.units(len(todo)) as shown:
                def publish(event, datum) -> None:
                    pipeline.publish(event, datum)
                    faults.observe(event)
                    shown.observe(event)

                not_started = run_units(
                    lambda unit: run_unit(pack, unit, config, sandbox, publish, attempts.get(unit.unit_id, 1),
                                          agent_for(unit) if agent_for else None),
                    todo, workers, lambda unit, run_id: shown.done(unit.unit_id), stop)
            cut = stop.asked  # the grid was stopped (a later signal finds it complete)
            abandoned = pipeline.close_open(run_set) if cut else []
            for event in abandoned:
                console.print(describe(event), highlight=False, markup=False, soft_wrap=True)
        finally:
            pipeline.close()
        refused = None
        try:
            report, secrets = build_report(warehouse, run_set, config.blob_dir)
        except ReportError as exc:  # checked before the run; a resumed run set may hold other conditions
            refused = exc
        state = warehouse_state(warehouse, run_set)
        planned = {u.unit_id for u in units}
        completed = len(planned & set(queries.completed_units(warehouse, run_set)))
    finally:
        warehouse.close()
    write_log_root(console, root_file, state, signer, settings.warehouse)
    verified = verify_written(console, settings, run_set)
    stopped = ("signal" if stop.cause is None else "harness_faults") if cut else None
    outcome = RunOutcome(run_set=run_set, report=None, report_dir=None,
                         log=run_set_log_path(settings.runs_dir, run_set), log_root=state.root, verification=verified,
                         units_planned=len(units), units_completed=completed,
                         units_run=len(todo) - len(not_started), units_not_started=len(not_started),
                         attempts_abandoned=len(abandoned), stopped=stopped, stop_cause=stop.cause,
                         resume=resume if cut else None)
    if cut:
        from membench.pipeline.stopping import write_partial
        from membench.reports.model import PartialRun

        partial = PartialRun(reason=stop.cause or "stopped by a signal before the grid finished",
                             units_planned=len(units), units_not_started=len(not_started),
                             attempts_abandoned=len(abandoned), resume=resume)
        write_partial(settings.runs_dir, run_set, partial)  # a report rebuilt later is partial too
        if refused is None:
            report = replace(report, partial=partial)
    else:
        from membench.pipeline.stopping import clear_partial

        clear_partial(settings.runs_dir, run_set)
    if refused is not None and cut:  # e.g. stopped before any unit ran: nothing to report, still a stop
        console.print(f"stopped: no report ({refused}); resume with the same command: {resume}",
                      highlight=False, markup=False, soft_wrap=True)
        return outcome
    if refused is not None:  # what ran is recorded (log, warehouse, log root); only the report is not written
        show_unless_verified(console, verified, settings, run_set)
        raise ReportRefused(f"{refused}; the run set is recorded, rebuild its report with `membench report {run_set}`",
                            outcome)
    out = write_report(settings, replace(report, verification=verified), secrets)
    console.report(report)
    console.print(f"report: {out / 'report.json'}  ·  log: {out / 'events.avro'}  ·  log root: {state.root}",
                  highlight=False, markup=False, soft_wrap=True)
    outcome = replace(outcome, report=report, report_dir=out)
    if not cut:  # a stopped run ends as a stop whatever its log holds (the findings are shown above)
        show_unless_verified(console, verified, settings, run_set)
    if cut:
        console.print(f"stopped: the report is partial ({len(not_started)} units not started, {len(abandoned)} "
                      f"attempts closed as abandoned); resume with the same command: {resume}",
                      highlight=False, markup=False, soft_wrap=True)
        if stop.cause is not None:
            console.print(f"stopped because {stop.cause}", highlight=False, markup=False, soft_wrap=True)
        return outcome
    if stop.asked:  # the signal came after the grid: what ran is complete and written
        console.print("stopped after the grid finished: the report and the log root are complete",
                      highlight=False, markup=False, soft_wrap=True)
        return replace(outcome, stopped_after_grid=True)
    return outcome


def write_log_root(console: RunDisplay, path: Path, state, signer, warehouse_dsn: str) -> None:
    """runs/<run_set>/log_root.json at the end of the run set: root, heads, row digests, signature.
    Without a key, a signature already there is kept while it signs the same root (a re-run that ran
    nothing); a root that changed loses it, with a warning, since it would no longer verify."""
    from membench.audit.log_root_record import LogRootError, describes, read_record, sign, write_record

    for lines in state.problems.values():  # the run just wrote these rows: a disagreement is a bug
        for line in lines:
            console.problem("WARNING", line)
    signature = sign(signer, state.run_set, state.root) if signer is not None else None
    if signer is None and path.exists():
        try:
            before = read_record(path)
        except LogRootError:
            before = None
        if before is not None and before.signature is not None and describes(before, warehouse_dsn):
            if before.log_root == state.root:
                signature = before.signature
            else:
                console.print(f"WARNING the log root changed to {state.root}; the signature of the previous root "
                              "was dropped (sign again with --sign-key)", highlight=False, markup=False,
                              soft_wrap=True)
    write_record(path, state.record(signature, warehouse_dsn))
    if signature is not None:
        console.print(f"log root {state.root} signed (Ed25519, key id {signature.key_id})", highlight=False,
                      markup=False, soft_wrap=True)


def verify_written(console: RunDisplay, settings: Settings, run_set: str):
    """The end of every embedded `membench run`, `score` and `transfer`: the run set's log replayed
    with the checks of `membench replay runs/<run_set>/events.avro --verify` — the same call
    (`membench.audit.verify.verify_source`): chains, scored diffs, the processors' folds and dead letters, the
    re-derived events against the warehouse, the root against the log_root.json just written. Prints
    each finding; returns the report's `LogVerification` (`exit_unless_verified` raises on it)."""
    from membench.audit.verify import problem_lines, verify_source
    from membench.bus.base import run_set_log_path
    from membench.reports.model import LogVerification

    verification = verify_source(str(run_set_log_path(settings.runs_dir, run_set)), runs_dir=settings.runs_dir,
                                 warehouse_dsn=settings.warehouse,
                                 open_warehouse=lambda: open_warehouse(settings, create=False))
    try:
        for line in problem_lines(verification):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        result = verification.result
        if verification.ok:
            console.print(f"log verified: {result.events} events of {result.runs} runs replayed, {result.compared} "
                          "derived events agree with the warehouse, the log root with log_root.json",
                          highlight=False, markup=False, soft_wrap=True)
        return LogVerification(
            verified=verification.ok, events=result.events, runs=result.runs, derived=result.derived,
            compared=result.compared, findings=len(result.findings), dead_letters=verification.dead_letters,
            first_finding=str(result.findings[0]) if result.findings else None)
    finally:
        verification.close()


class LogNotVerified(AuditFailed):
    """The log a command wrote does not verify (`exit_unless_verified`); the CLI exits 1, as
    `membench replay --verify` does on the same findings."""


def show_unless_verified(console: RunDisplay, verified, settings: Settings, run_set: str) -> str | None:
    """When the log the command wrote does not verify: the line saying so (its numbers are shown and
    its report written, marked "not verified"), shown and returned; None when it verifies."""
    from membench.bus.base import run_set_log_path

    if verified.verified:
        return None
    log = run_set_log_path(settings.runs_dir, run_set)
    line = (f"the log of run set {run_set} does not verify: {verified.findings} problems "
            f"({verified.dead_letters} events the processors rejected), listed above; the report is marked "
            f"\"not verified\". Re-check with: membench replay {shlex.quote(str(log))} --verify")
    console.print(line, highlight=False, markup=False, soft_wrap=True)
    return line


def exit_unless_verified(console: RunDisplay, verified, settings: Settings, run_set: str) -> None:
    """`LogNotVerified` when the log the command wrote does not verify (`show_unless_verified`): a
    command never ends with exit status 0 on it."""
    line = show_unless_verified(console, verified, settings, run_set)
    if line is not None:
        raise LogNotVerified(line)
