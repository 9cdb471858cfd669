"""A grid run started from Python (`membench.api.run_grid`): the same grid as `membench run` (the
shared smoke run set), real bubblewrap oracles, chDB and the Avro log; the call returns a typed
outcome, prints nothing and does not end its process, and the report equals the CLI's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import assert_run_sets_verify

pytestmark = pytest.mark.integration

# run in a process of its own: a chDB warehouse has one owner process, which the test's must not become
LIBRARY_CALL = textwrap.dedent("""
    import json, sys
    from membench.api import RunRequest, run_grid

    request = RunRequest("smoke", conditions=("B0", "B5"), seeds=(1, 2), agent="scripted:memory-literal")
    outcomes = [run_grid(request), run_grid(request)]  # the second finds every unit complete
    summary = [{"run_set": o.run_set, "report_dir": str(o.report_dir), "log": str(o.log), "verified": o.verified,
                "events": o.verification.events, "planned": o.units_planned, "completed": o.units_completed,
                "run": o.units_run, "stopped": o.stopped, "partial": o.report.partial is not None,
                "conditions": {c.condition: [c.passed, c.cells] for c in o.report.conditions}} for o in outcomes]
    with open(sys.argv[1], "w", encoding="utf-8") as out:  # the call returned: the process goes on
        json.dump(summary, out)
""")


def _conditions(report: dict) -> dict[str, list[int]]:
    return {c["condition"]: [c["passed"], c["cells"]] for c in report["conditions"]}


def test_a_run_started_from_python_returns_its_outcome_silently(tmp_path: Path, smoke_run_set) -> None:
    home = tmp_path / "home"
    result = tmp_path / "outcome.json"
    proc = subprocess.run([sys.executable, "-c", LIBRARY_CALL, str(result)], capture_output=True, text=True,
                          env={**os.environ, "MEMBENCH_HOME": str(home)}, cwd=str(tmp_path), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proc.stdout, proc.stderr) == ("", ""), "the library call drew on the terminal"
    first, again = json.loads(result.read_text(encoding="utf-8"))

    cli_report = json.loads((smoke_run_set.home / "runs" / smoke_run_set.run_set / "report.json").read_text())
    # derived as the CLI derives it (pack, finalized digest, agent, grid): a second call resumes it
    assert first["run_set"].startswith("smoke-memory-literal-") and again["run_set"] == first["run_set"]
    assert first["conditions"] == _conditions(cli_report)
    assert (first["planned"], first["completed"], first["run"]) == (12, 12, 12)
    assert first["verified"] and first["events"] > 0 and first["stopped"] is None and not first["partial"]
    written = json.loads((Path(first["report_dir"]) / "report.json").read_text(encoding="utf-8"))
    assert _conditions(written) == first["conditions"] and written["verification"]["verified"] is True
    assert Path(first["log"]).is_file()

    # resumed: nothing left to run, the same report
    assert (again["planned"], again["completed"], again["run"]) == (12, 12, 0)
    assert again["conditions"] == first["conditions"] and again["verified"]
    assert_run_sets_verify(home, first["run_set"])
