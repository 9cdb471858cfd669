"""Exclusions the agent chooses: what an agent produces can fail a session, never
exclude it. A memory-blind hostile agent (tests/sandbox/agents/unencodable_agent.py) leaves a file
whose name is not UTF-8 and prints lone surrogates under the baseline B0 of `smoke`: before,
each unit crashed (`task_exception: UnicodeEncodeError`) and the report counted B0's cells as
excluded — exactly the cells the agent would fail. Now every unit completes, every cell is a
valid failure under the named reason `invalid_agent_output`, and the report counts 0 exclusions.

Real CLI and bubblewrap for the whole grid (3 sequences × 3 sessions). The path does not differ
by backend — both bind-mount the host's workspace directory and the harness reads that same
directory — so the podman backend runs one unit through the runner (the agent's file written
through podman's mount), not a second grid: the grid costs ~3 minutes there. The controls showing
the attack worked before are the unit tests in tests/sandbox/test_agent_output.py (the
unsanitized encoder, the undefended snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membench.processors import derive_all
from membench.packs.pack_resolver import open_pack
from membench.runner.grid import RunConfig, RunUnit, run_unit

pytestmark = pytest.mark.integration

AGENT = Path(__file__).resolve().parents[1] / "sandbox" / "agents" / "unencodable_agent.py"


def test_unencodable_output_under_b0_fails_cells_and_excludes_none(bwrap_sandbox, cli, home):
    run_set = "unencodable-bwrap"
    cli("run", "smoke", "--conditions", "B0", "--seeds", "1", "--agent", f"command:{AGENT}", "--sandbox", "bwrap",
        "--run-set", run_set, check=True)
    runs = cli("sql", "SELECT status, excluded, scored_passed, ifNull(error_type, '') FROM run_results "
                      f"WHERE run_set = '{run_set}' ORDER BY run_id LIMIT 1 BY run_id", check=True).stdout.split("\n")
    runs = [r.split("\t") for r in runs if r]
    assert len(runs) == 3 and all(r == ["completed", "false", "false", ""] for r in runs), runs
    failures = cli("sql", "SELECT session_index, excluded, resolved, failure_reason, rule FROM failures "
                          f"WHERE run_set = '{run_set}' "
                          "ORDER BY run_id, session_index LIMIT 1 BY run_id, session_index",
                   check=True).stdout.split("\n")
    failures = [f.split("\t") for f in failures if f]
    assert len(failures) == 9  # every session of the 3 sequences was scored and failed, none excluded
    assert {tuple(f[1:]) for f in failures} == {("false", "false", "invalid_agent_output", "workspace_path_not_utf8")}
    # the agent's text is in the log, sanitized, under the digest of what it wrote
    texts = cli("sql", "SELECT JSONExtractString(payload, 'text', 'text') FROM trajectory_events "
                       f"WHERE run_set = '{run_set}' AND kind = 'Turn' AND position(JSONExtractString(payload, 'text', "
                       "'text'), 'lone surrogate') > 0", check=True).stdout.split("\n")
    assert len([t for t in texts if t]) == 9 and all("\ufffd" in t for t in texts if t), texts
    report = json.loads((home / "runs" / run_set / "report.json").read_text())
    (b0,) = [c for c in report["conditions"] if c["condition"] == "B0"]
    assert (b0["cells"], b0["excluded"], b0["passed"]) == (3, 0, 0), b0
    assert b0["failure_counts"] == {"invalid_agent_output": 3}, b0["failure_counts"]


@pytest.mark.docker
def test_unencodable_output_through_the_podman_mount_fails_the_unit_not_excludes(docker_sandbox, tmp_path):
    pack = open_pack("smoke", tmp_path / "home")
    events = []
    run_unit(pack, RunUnit("smoke", "smoke-currency", "B0", 1), RunConfig("rs", f"command:{AGENT}"),
             docker_sandbox, lambda event, datum: events.append(event))
    assert events[-1].payload == {"status": "completed", "error_type": None}
    derived = derive_all(events)
    (summary,) = [d.payload for d in derived if d.kind == "RunSummary"]
    assert (summary["excluded"], summary["scored_passed"]) == (False, False)
    failures = [d.payload for d in derived if d.kind == "FailureClassified"]
    assert [(f["failure_reason"], f["rule"]) for f in failures] == [
        ("invalid_agent_output", "workspace_path_not_utf8")] * 3
