"""`membench transfer` with a program agent (tests/fixtures/agents/skill_agent.py) in bubblewrap, end to
end: it distils its own skills in the learning phase, reads the frozen bank at /skills (and fails to
write it) in the transfer phase, no unit is excluded, and the report's transfer section says the
learned banks were written by the agent's own distiller. And a grid without the no_memory baseline
ends with one line (exit 2) saying how to build the report, instead of a traceback, its units kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.integration

AGENT = Path(__file__).parents[1] / "fixtures" / "agents" / "skill_agent.py"


def test_a_program_agent_distils_and_reads_its_bank_through_the_cli(tmp_path, bwrap_sandbox):
    home = tmp_path / "home"
    run_cli("transfer", "transfer-v1", "--agent", f"command:{AGENT}", "--conditions", "no_memory,learned_bank",
            "--run-set", "agent-bank", home=home, check=True)
    out = home / "runs" / "agent-bank"
    report = json.loads((out / "report.json").read_text())
    banks = {b["bank"]: b for b in report["transfer"]["banks"]}
    assert (banks["learned"]["distiller"], banks["ablated"]["distiller"], banks["native"]["distiller"]) == (
        "agent", "agent", None)
    assert banks["learned"]["files"] == 6  # one skill per learning task, as the agent wrote them
    assert "learned (6 files, agent distiller)" in (out / "report.md").read_text()
    rows = {(p["project"], p["condition"]): p for p in report["transfer"]["projects"]}
    assert all(rows[(project, "learned_bank")]["excluded"] == 0 for project in ("settle", "jobqueue"))
    said = run_cli("sql", "SELECT JSONExtractString(payload, 'text', 'text') FROM trajectory_events "
                   "WHERE run_set = 'agent-bank' AND kind = 'Turn' AND unit_id LIKE '%/learned_bank/%' "
                   "AND JSONExtractString(payload, 'role') = 'agent' ORDER BY unit_id, seq", home=home,
                   check=True).stdout
    seen = [line for line in said.splitlines() if line.startswith("skills seen: ")]
    # every session of both units (the starting point fails the public check: each review round acts)
    assert len(seen) >= 2 and set(seen) == {"skills seen: L1-fees,L2-ids,L3-retries,L4-paging,L5-timestamps,L6-rounding"}
    assert said.count("write add: failed: Read-only file system") == len(seen)
    assert said.count("write change: failed: Read-only file system") == len(seen)


def test_a_grid_without_a_baseline_keeps_what_ran_and_says_how_to_report(tmp_path, bwrap_sandbox):
    home = tmp_path / "home"
    got = run_cli("transfer", "transfer-v1", "--agent", "scripted:null", "--conditions", "learned_bank",
                  "--run-set", "no-baseline", home=home)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert "no baseline" in got.stderr and "membench report no-baseline --baseline COND" in got.stderr
    ran = run_cli("sql", "SELECT count() FROM run_results WHERE run_set = 'no-baseline'", home=home, check=True)
    assert int(ran.stdout.strip()) == 3  # the learning unit and both projects' learned_bank units
    report = run_cli("report", "no-baseline", "--baseline", "learned_bank", "--json", home=home, check=True)
    assert json.loads(report.stdout)["transfer"]["banks"]
