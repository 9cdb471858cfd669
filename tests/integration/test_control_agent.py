"""The control for the verdict defences (issue 12): a memory-blind agent that solves the set-up
sessions still fails the trap, so a harness that passes nothing — or everything — cannot look
secure. Real CLI, real bubblewrap, process-isolated oracles."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


def test_memory_blind_agent_passes_set_up_sessions_and_fails_every_trap(cli, home):
    cli("run", "smoke", "--conditions", "B0", "--seeds", "1", "--agent", "scripted:memory-literal",
        "--run-set", "control", check=True)
    rows = cli("sql", "SELECT session_index, scored, passed, outcome FROM session_results "
                      "WHERE run_set = 'control' ORDER BY run_id, session_index LIMIT 1 BY run_id, session_index",
               check=True).stdout.strip().splitlines()
    sessions = [row.split("\t") for row in rows]
    assert len(sessions) == 9  # 3 sequences × S1..S3
    setup = [s for s in sessions if s[1] == "false"]
    traps = [s for s in sessions if s[1] == "true"]
    assert setup and all(s[2] == "true" and s[3] == "pass" for s in setup), setup
    assert len(traps) == 3 and all(s[2] == "false" and s[3] == "fail" for s in traps), traps
    isolation = cli("sql", "SELECT JSONExtractString(payload, 'isolation') FROM trajectory_events "
                           "WHERE run_set = 'control' AND kind = 'OracleVerdict'", check=True).stdout.split()
    assert len(isolation) == 9 and set(isolation) == {"process"}
    report = json.loads((home / "runs" / "control" / "report.json").read_text())
    assert report["suites"] == [{"suite": "smoke", "oracle_isolation": "process", "verdicts": 9}]
    # what was scored is readable from the log: the unified diff of each session's production change
    counts = cli("sql", "SELECT countIf(startsWith(d, '--- ') AND position(d, '\\n+++ b/') > 0), count() FROM "
                        "(SELECT JSONExtractString(payload, 'production_diff') AS d FROM trajectory_events "
                        "WHERE run_set = 'control' AND kind = 'PatchProduced')", check=True).stdout.split()
    assert counts == ["9", "9"], counts
