"""The end of every embedded `membench run`, `score` and `transfer` replays the log it wrote with the
checks of `membench replay --verify` (`membench.pipeline.grid_run.verify_written`, `membench.audit.verify.verify_source`):
a log the processors reject part of exits 1 and its report says "not verified" with the count and
the first finding, never a silent exit 0. Real embedded pipeline, real chDB warehouse, real log file."""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.errors import EXIT_AUDIT_FAILED
from membench.pipeline.grid_run import LogNotVerified, exit_unless_verified, verify_written, write_log_root
from membench.pipeline.run_display import PlainLines
from membench.pipeline.settings import Settings
from membench.bus.emitter import RunEmitter
from membench.reports.model import to_json
from membench.schemas.events import bounded_text
from tests.processors.test_verdicts import build_run
from tests.reports.test_html import render_html, render_markdown
from tests.reports.test_model import _full_report

SETTINGS_TURN = {"role": "system", "text": bounded_text("{}"), "source_event_id": None,
                 "source_kind": "memory_settings", "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                 "reasoning_tokens": 0, "latency_ms": 0}


def _emit_run(publish, run_set: str, run_id: str, settings_turn_first: bool) -> None:
    """A run of `build_run`'s shape; with `settings_turn_first`, a library's settings turn precedes its
    RunStarted (what a memory library recorded while it opened, before the fix)."""
    emitter = RunEmitter(run_set, run_id, "suite/task/B5/1", publish)
    if settings_turn_first:
        emitter.emit("Turn", SETTINGS_TURN, visibility="harness")
    for event in build_run(run_id=run_id):
        emitter.session_index = event.session_index
        emitter.emit(event.kind, event.payload, visibility=event.visibility)


def _write_run_set(settings: Settings, run_set: str, settings_turn_first: bool) -> None:
    from membench.audit.log_root_record import record_path, warehouse_state
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.bus.base import run_set_log_path
    from membench.warehouse.client import connect

    warehouse = connect(settings.warehouse)
    try:
        pipeline = EmbeddedPipeline(run_set_log_path(settings.runs_dir, run_set), warehouse)
        for i in range(2):
            _emit_run(pipeline.publish, run_set, f"{run_set}-run-{i}", settings_turn_first and i == 1)
        pipeline.close()
        state = warehouse_state(warehouse, run_set)
    finally:
        warehouse.close()
    write_log_root(PlainLines(), record_path(settings.runs_dir, run_set), state, None, settings.warehouse)


def _report(verification) -> dict:
    """A complete report.json document carrying VERIFICATION."""
    return {**_full_report(), "verification": to_json(verification)}


def test_a_log_the_processors_reject_part_of_is_not_verified_and_exits_1(tmp_path: Path, capsys) -> None:
    home = tmp_path / "home"
    settings = Settings(home, f"file://{home / 'runs'}", f"chdb://{home / 'warehouse'}")
    console = PlainLines()  # stderr, as the CLI's display writes
    _write_run_set(settings, "intact", settings_turn_first=False)
    _write_run_set(settings, "early-turn", settings_turn_first=True)

    # control: the same runs with RunStarted first verify, and the command goes on
    intact = verify_written(console, settings, "intact")
    assert intact.verified and (intact.findings, intact.dead_letters) == (0, 0)
    assert intact.runs == 2 and intact.compared == intact.derived > 0
    exit_unless_verified(console, intact, settings, "intact")
    assert "events of 2 runs, chains intact" in render_markdown(_report(intact))
    assert "Not verified" not in render_markdown(_report(intact)) + render_html(_report(intact))

    broken = verify_written(console, settings, "early-turn")
    assert not broken.verified and broken.dead_letters == 1 and broken.findings >= 1
    assert "processor rejected the event" in broken.first_finding and "Turn before RunStarted" in broken.first_finding
    with pytest.raises(LogNotVerified) as stopped:  # the CLI exits EXIT_AUDIT_FAILED on it (membench/cli.py)
        exit_unless_verified(console, broken, settings, "early-turn")
    assert "the log of run set early-turn does not verify" in str(stopped.value) and EXIT_AUDIT_FAILED == 1
    err = capsys.readouterr().err
    assert "BROKEN run early-turn-run-1 seq 0: processor rejected the event" in err
    assert "the log of run set early-turn does not verify" in err and "--verify" in err

    # the report says so before any number, in both renderings, with the count and the first finding
    document = _report(broken)
    markdown, html = render_markdown(document), render_html(document)
    assert "**Not verified**" in markdown and "1 events the processors rejected" in markdown
    assert "Turn before RunStarted" in markdown and "- log: not verified" in markdown
    assert "<strong>Not verified</strong>" in html and "Turn before RunStarted" in html
    assert html.index("Not verified") < html.index("<table")
