"""`membench replay SOURCE --verify` as one call (docs/design.md §9): read the source, replay it
(chains, scored diffs, model calls, skill banks, the processors' folds and dead letters), compare
the re-derived events with the warehouse, and check the run sets' log_root.json against the root
recomputed from the log. The replay command prints what `verify_source` returns; the end of every
embedded `membench run`, `score` and `transfer` calls it on the log it just wrote, so a log that
would not verify is never left behind with exit status 0 (membench/pipeline/grid_run.py `verify_written`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.audit.findings import Finding, ReplayResult
from membench.audit.root_check import RootCheck

MAX_PRINTED = 50  # findings listed in text; --json lists them all
DEAD_LETTER = "processor rejected the event"  # the reason's start of a processor's dead letter (replayer.py)


@dataclass
class Verification:
    """A replayed source: the replay's result, the log_root.json files checked, and whether the
    re-derived events were compared with a warehouse."""

    result: ReplayResult
    checks: list[RootCheck] = field(default_factory=list)
    compared: bool = False

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def dead_letters(self) -> int:
        return sum(1 for f in self.result.findings if f.reason.startswith(DEAD_LETTER))

    def close(self) -> None:
        self.result.close()


def verify_source(source: str, *, runs_dir: Path, warehouse_dsn: str, open_warehouse: Callable[[], Any],
                  verify: bool = True, public_key: Any = None, log_root_path: Path | None = None,
                  jobs: int = 1) -> Verification:
    """Replay SOURCE (an events.avro path, `warehouse:[RUN_SET]` or `kafka://…`); with `verify` (implied
    for a warehouse source) compare with the warehouse `open_warehouse()` opens (closed here) and
    check the log_root.json files: the one given, the one beside a log file, or for a warehouse
    source each replayed run set's under `runs_dir` (only when written for `warehouse_dsn`). The
    caller has checked SOURCE's form; close the result when done (its heads are on disk)."""
    from membench.audit.checks import SourceDirs
    from membench.audit.file_source import events_from_file
    from membench.audit.parallel_replay import replay_file_jobs
    from membench.audit.replayer import replay
    from membench.audit.root_check import check_log_root
    from membench.audit.warehouse_source import events_from_warehouse

    findings: list[Finding] = []
    warehouse = None
    from_warehouse, from_kafka = source.startswith("warehouse:"), source.startswith("kafka://")
    from_file = not (from_warehouse or from_kafka)
    # a log file's blob store and skill banks are beside it (copy them together); else the run set's under runs/
    dirs = SourceDirs(file_dir=Path(source).parent) if from_file else SourceDirs(runs_dir=runs_dir)
    try:
        if from_warehouse:
            warehouse = open_warehouse()
            events = events_from_warehouse(warehouse, source[len("warehouse:"):] or None, findings)
        elif from_kafka:
            from membench.audit.kafka_source import events_from_kafka
            from membench.bus.kafka_blobs import fetch_blobs
            from membench.bus.topics import topics_from_dsn

            # runners on other machines stored their blobs there: the checks read them from runs/ here
            fetch_blobs(topics_from_dsn(source), None, lambda run_set: runs_dir / run_set / "blobs")
            events = events_from_kafka(source, findings)
            warehouse = open_warehouse() if verify else None
        else:
            events = events_from_file(Path(source), findings)
            warehouse = open_warehouse() if verify else None
        compare_with = warehouse if verify or from_warehouse else None
        if jobs > 1:
            result = replay_file_jobs(Path(source), jobs, findings, compare_with, dirs)
        else:
            result = replay(events, findings, compare_with, dirs.blobs, dirs.banks, file_log=from_file)
    finally:
        if warehouse is not None:
            warehouse.close()
    checks = []
    try:
        if verify or public_key is not None or log_root_path is not None:
            # a log_root.json under runs/ describes the warehouse it was written for: replaying another
            # warehouse (or a Kafka topic) of the same run set does not check against it, unless given
            only_for = warehouse_dsn if from_warehouse and log_root_path is None else None
            for path in _root_files(source, from_file, from_kafka, log_root_path, result, runs_dir):
                required = public_key is not None or log_root_path is not None
                check = check_log_root(result, path, public_key, required=required, warehouse_dsn=only_for)
                if check is not None:
                    checks.append(check)
    except BaseException:
        result.close()
        raise
    return Verification(result, checks, warehouse is not None)


def _root_files(source: str, from_file: bool, from_kafka: bool, given: Path | None, result: ReplayResult,
                runs_dir: Path) -> list[Path]:
    """Which log_root.json files to check: the one given; beside a log file; for the warehouse, each
    replayed run set's under runs/; none for a Kafka topic (the embedded path writes those files, so
    they never describe a topic)."""
    from membench.formats.fields import is_plain_name

    if given is not None:
        return [given]
    if from_file:
        return [Path(source).parent / "log_root.json"]
    if from_kafka:
        return []
    return [runs_dir / run_set / "log_root.json" for run_set in result.run_sets if is_plain_name(run_set)]


def problem_lines(verification: Verification) -> list[str]:
    """The findings as replay prints them (stderr): the first MAX_PRINTED, then how many more."""
    findings = verification.result.findings
    lines = [f"BROKEN {finding}" for finding in findings[:MAX_PRINTED]]
    if len(findings) > MAX_PRINTED:
        lines.append(f"... and {len(findings) - MAX_PRINTED} more (use --json for all)")
    return lines


def summary_lines(verification: Verification) -> list[str]:
    """What replay prints on stdout: each run set (runs, events, root, abandoned attempts, fenced
    events), each log_root.json that matched, and the totals with the verdict."""
    result, lines = verification.result, []
    if len(result.run_sets) > 1:
        lines.append(f"this log holds {len(result.run_sets)} run sets:")
    for summary in result.run_sets.values():
        lines.append(f"run set {summary.run_set}: {summary.runs} runs, {summary.events} events, "
                     f"log root {summary.log_root}")
        for run_id, unit_id, seq in summary.abandoned:
            lines.append(f"  abandoned attempt: run {run_id} ({unit_id}) closed at seq {seq}")
        if summary.fenced:
            runs = sorted({run_id for run_id, _, _ in summary.fenced})
            lines.append(f"  fenced: {len(summary.fenced)} events of {len(runs)} runs published after their run had "
                         f"ended (a stalled runner's late attempt; kept, derive nothing): {', '.join(runs[:5])}"
                         + (" …" if len(runs) > 5 else ""))
    for check in verification.checks:
        if check.recorded is not None and check.recorded == check.recomputed:
            lines.append(f"{check.path}: log root matches" + (", signature verified" if check.signature == "verified"
                                                              else ""))
    lines.append(f"{result.events} events in {result.runs} runs; {result.derived} derived events re-derived"
                 + (f", {result.compared} compared with the warehouse" if verification.compared else "")
                 + ("; all chains intact and all derived events agree" if result.ok
                    else f"; {len(result.findings)} problems"))
    return lines
