"""Issue 24, "exclusions the agent chooses": what an agent produces can fail a session, never
exclude it. A memory-blind hostile agent (tests/sandbox/agents/unencodable_agent.py) leaves a file
whose name is not UTF-8 and prints lone surrogates under the baseline B0 of `smoke`: before,
each unit crashed (`task_exception: UnicodeEncodeError`) and the report counted B0's cells as
excluded — exactly the cells the agent would fail. Now every unit completes, every cell is a
valid failure under the named reason `invalid_agent_output`, and the report counts 0 exclusions.

Real CLI, real sandbox, on both backends: the harness reads the same host directory either way
(bwrap and podman both bind-mount the workspace), but the agent's file is written through each
backend's mount, so both are run. The controls showing the attack worked before are the unit
tests in tests/sandbox/test_agent_output.py (the unsanitized encoder, the undefended snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

AGENT = Path(__file__).resolve().parents[1] / "sandbox" / "agents" / "unencodable_agent.py"


@pytest.mark.parametrize("backend", ["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def test_unencodable_output_under_b0_fails_cells_and_excludes_none(backend, cli, home, request):
    request.getfixturevalue(f"{backend}_sandbox")  # skips (or fails under CI) without the backend
    run_set = f"unencodable-{backend}"
    cli("run", "smoke", "--conditions", "B0", "--seeds", "1", "--agent", f"command:{AGENT}", "--sandbox", backend,
        "--run-set", run_set, check=True)
    runs = cli("sql", "SELECT status, excluded, scored_passed, ifNull(error_type, '') FROM run_results "
                      f"WHERE run_set = '{run_set}' ORDER BY run_id LIMIT 1 BY run_id", check=True).stdout.split("\n")
    runs = [r.split("\t") for r in runs if r]
    assert len(runs) == 3 and all(r == ["completed", "false", "false", ""] for r in runs), runs
    failures = cli("sql", "SELECT session_index, excluded, resolved, failure_reason, rule FROM failures "
                          f"WHERE run_set = '{run_set}' ORDER BY run_id, session_index LIMIT 1 BY run_id, session_index",
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
