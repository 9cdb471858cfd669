"""`membench view --bus kafka://…`: the viewer over a real Kafka broker's trajectory topic.

Runs are published with the runner's own `KafkaBus` to a fresh namespace of the broker that
deploy/ starts; the same runs are written to a file log, and the viewer must show the same progress,
ladder, units and trajectories from the topic as from the file, follow the topic as it grows, and
find a chain break in an edited message."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from membench.viewer.http_server import ViewApp, ViewServer
from membench.bus.kafka import KafkaBus
from membench.schemas.codec import encode_datum
from tests.integration.kafka_helpers import SINGLE, membench, namespace, require_broker
from tests.viewer.test_view_api import RUNS
from tests.viewer.test_view_logs import SCHEMA, emit_run, write_log

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _wait_for(predicate, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"the viewer did not show {what} within {timeout:.0f} s")


def _events_of(app: ViewApp, run_set: str) -> int:
    live = app.catalog.get(run_set)
    return live.detail()["events"] if live is not None else 0


def _comparable(detail: dict) -> dict:
    """What must not depend on the source: progress, ladder, units (without ids and times)."""
    units = [{k: u[k] for k in ("unit_id", "condition", "state", "chain_ok") if k in u} for u in detail["units"]]
    # the ladder's wall time comes from event timestamps, which differ between two emissions of one log
    ladder = [{**row, "effort": {k: v for k, v in row["effort"].items() if k != "wall_time_s"}}
              if row.get("effort") else row for row in detail["ladder"]]
    return {"progress": detail["progress"], "ladder": ladder, "units": units,
            "chain_ok": detail["chain"]["ok"], "dead_letters": detail["dead_letters"],
            "units_started": detail["units_started"], "units_finished": detail["units_finished"]}


@pytest.fixture
def dsn() -> str:
    require_broker()
    return f"kafka://{SINGLE}/{namespace()}"


def test_the_topic_shows_what_the_file_log_shows_and_follows_it(dsn, tmp_path: Path):
    write_log(tmp_path / "file" / "rs" / "events.avro", RUNS).close()
    from_file = ViewApp(tmp_path / "file").run_set("rs")
    bus = KafkaBus(dsn, "rs", tmp_path / "spool")
    emitted = []
    for kwargs in RUNS:
        emit_run(lambda e, d: (emitted.append(e), bus.publish(e, d)), **kwargs)
    bus.flush()
    server = ViewServer(tmp_path / "runs", kafka_dsn=dsn).start()
    try:
        app = server.app
        _wait_for(lambda: _events_of(app, "rs") == len(emitted), f"all {len(emitted)} events")
        from_topic = app.run_set("rs")
        assert from_topic["log"]["error"] is None and from_topic["chain"]["events_checked"] == len(emitted)
        assert _comparable(from_topic) == _comparable(from_file)
        # a unit's trajectory: every event of the run, in seq order, grouped by session
        unit = next(u for u in from_topic["units"] if u["unit_id"] == "suite/t1/B0/1")
        run = app.run(unit["run_id"])
        mine = sorted((e for e in emitted if e.run_id == unit["run_id"]), key=lambda e: e.seq)
        shown = [ev for s in run["sessions"] for ev in s["events"]] + run["run_events"]
        assert sorted(ev["seq"] for ev in shown) == [e.seq for e in mine]
        assert run["chain"]["ok"] and run["summary"]["status"] == "completed"
        assert [s["verdict"]["outcome"] for s in run["sessions"]] == ["pass", "fail"]
        # the topic grows: a run still running, and a second run set with an edited message
        emit_run(bus.publish, "rs", "t3", "B0", 1, end=None)
        edited_batch = []
        emit_run(lambda e, d: edited_batch.append(e), "other", "t1", "B5", 1)
        edited = edited_batch[3]
        assert edited.kind == "Turn"
        edited.payload["text"]["text"] = "something else"  # the stored hash is left as it was
        other_bus = KafkaBus(dsn, "other", tmp_path / "spool-other")
        for event in edited_batch:
            other_bus.publish(event, encode_datum(SCHEMA, event.to_record()))
        other_bus.flush()
        bus.flush()
        progress = _wait_for(lambda: next((row for row in app.run_set("rs")["progress"]
                                          if row["condition"] == "B0" and row["running"] == 1), None),
                             "the running unit")
        assert (progress["units_started"], progress["finished"]) == (3, 2)
        other = _wait_for(lambda: _events_of(app, "other") == len(edited_batch) and app.run_set("other"),
                          "the second run set")
        (found,) = other["chain"]["breaks"]
        assert found["seq"] == edited.seq and found["run_id"] == edited.run_id
        listed = {rs["run_set"]: rs for rs in app.run_sets()["run_sets"]}
        assert set(listed) == {"rs", "other"} and listed["rs"]["chain_ok"] and not listed["other"]["chain_ok"]
        other_bus.close()
        bus.close()
    finally:
        server.close()


def test_the_command_serves_the_topic(dsn, tmp_path: Path):
    bus = KafkaBus(dsn, "rs", tmp_path / "spool")
    emit_run(bus.publish, "rs", "t1", "B0", 1)
    bus.flush()
    bus.close()
    home = tmp_path / "home"
    home.mkdir()
    proc = membench("view", "--port", "0", "--bus", dsn, home=home)
    try:
        line = proc.stdout.readline()
        assert "membench view: http://127.0.0.1:" in line and "trajectory topic" in line, line
        url = line.split()[2]

        def listed():
            with urllib.request.urlopen(url + "api/run_sets", timeout=5) as answer:
                sets = json.loads(answer.read())["run_sets"]
            return sets if sets and sets[0]["units_finished"] == 1 else None

        (rs,) = _wait_for(listed, "the run set")
        assert rs["run_set"] == "rs" and rs["chain_ok"] and rs["events"] > 10
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
