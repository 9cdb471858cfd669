"""The control for the verdict defences: a memory-blind agent that solves the set-up
sessions still fails the trap, so a harness that passes nothing — or everything — cannot look
secure. Real CLI, real bubblewrap, process-isolated oracles: the B0 cells of the session's shared
smoke run set (`scripted:memory-literal` under B0 is memory-blind; tests/integration/conftest.py)."""

from __future__ import annotations

import json

import pytest

from tests.integration.sql_batch import sql_batch

pytestmark = pytest.mark.integration


def test_memory_blind_agent_passes_set_up_sessions_and_fails_every_trap(smoke_run_set):
    rs = smoke_run_set.run_set
    b0 = f"run_set = '{rs}' AND splitByChar('/', unit_id)[3] = 'B0'"
    rows, isolation, counts = sql_batch(smoke_run_set.home, [
        f"SELECT session_index, scored, passed, outcome FROM session_results WHERE {b0} "
        "ORDER BY run_id, session_index LIMIT 1 BY run_id, session_index",
        f"SELECT JSONExtractString(payload, 'isolation') FROM trajectory_events WHERE {b0} AND kind = 'OracleVerdict' "
        "LIMIT 1 BY event_id",
        # what was scored is readable from the log: the unified diff of each session's production change
        "SELECT countIf(startsWith(d, '--- ') AND position(d, '\\n+++ b/') > 0), count() FROM "
        f"(SELECT JSONExtractString(payload, 'production_diff') AS d FROM trajectory_events WHERE {b0} "
        "AND kind = 'PatchProduced' LIMIT 1 BY event_id)"])
    sessions = [row.split("\t") for row in rows.strip().splitlines()]
    assert len(sessions) == 18  # 3 sequences × seeds 1, 2 × S1..S3
    setup = [s for s in sessions if s[1] == "false"]
    traps = [s for s in sessions if s[1] == "true"]
    assert setup and all(s[2] == "true" and s[3] == "pass" for s in setup), setup
    assert len(traps) == 6 and all(s[2] == "false" and s[3] == "fail" for s in traps), traps
    assert len(isolation.split()) == 18 and set(isolation.split()) == {"process"}
    report = json.loads((smoke_run_set.home / "runs" / rs / "report.json").read_text())
    assert report["suites"] == [{"suite": "smoke", "oracle_isolation": "process", "verdicts": 36}]  # B0 and B5
    assert counts.split() == ["18", "18"], counts
