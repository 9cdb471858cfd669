"""A run whose oracle harness keeps faulting stops with the cause instead of finishing the grid (a
real `membench run` subprocess, real bubblewrap). The scoring sandbox's interpreter loses pytest
once the grid has started — its site-packages hidden by the sandbox's mount table, as a broken
installation would — so every unit's oracle produces no outcome, on the base checkout too: after
three excluded units no further one starts, the command exits 4 naming the cause, the report says
it is partial and why, and the log verifies. Run again on the intact installation, the same command
retries the faulted units and finishes the grid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from membench.errors import EXIT_HARNESS_FAULTS
from membench.bus.attempts import read_log
from tests.conftest import REPO, run_cli
from tests.integration.pack_helpers import smoke_cut_to
from tests.sandbox.broken_toolchain import says_pytest_is_missing

pytestmark = pytest.mark.integration

# `membench` whose scoring sandboxes lose pytest from the first unit on (nothing before the grid is touched)
PYTEST_LOST = f"""import sys
sys.path.insert(0, {str(REPO)!r})
import membench.runner.grid as grid
import membench.sandbox.registry as registry
from tests.sandbox.broken_toolchain import PytestlessToolchain
made = []
real_get_sandbox, real_run_unit = registry.get_sandbox, grid.run_unit
def get_sandbox(name):
    made.append(PytestlessToolchain(real_get_sandbox(name), broken=False))
    return made[-1]
def run_unit(*args, **kwargs):
    for sandbox in made:
        sandbox.broken.set()
    return real_run_unit(*args, **kwargs)
registry.get_sandbox, grid.run_unit = get_sandbox, run_unit
from membench.cli import main
main()
"""


def _ends(home: Path, run_set: str) -> list[tuple[str, str, str | None]]:
    return [(e.unit_id, e.payload["status"], e.payload["error_type"])
            for e, _ in read_log(home / "runs" / run_set / "events.avro") if e.kind == "RunEnded"]


def test_a_run_whose_harness_keeps_faulting_stops_naming_the_cause(home, bwrap_sandbox, tmp_path):
    pack = smoke_cut_to(tmp_path / "pack" / "smoke-currency")  # B0, B5 at seeds 1, 2: four units
    wrapper = tmp_path / "membench_pytest_lost.py"
    wrapper.write_text(PYTEST_LOST)
    args = ("run", str(pack), "--agent", "scripted:memory-literal", "--conditions", "B0,B5", "--seeds", "1,2",
            "--run-set", "faulty", "--workers", "1")
    proc = subprocess.run([sys.executable, str(wrapper), *args], env={**os.environ, "MEMBENCH_HOME": str(home)},
                          cwd=str(home.parent), capture_output=True, text=True, timeout=600)
    assert proc.returncode == EXIT_HARNESS_FAULTS, proc.stdout + proc.stderr
    assert "no further unit starts" in proc.stderr
    assert "stopped because the oracle's harness produced no outcome in 3 of 3 units" in proc.stderr
    assert says_pytest_is_missing(proc.stderr)
    assert [(status, error) for _, status, error in _ends(home, "faulty")] == [("excluded", "harness_fault")] * 3
    report = json.loads((home / "runs" / "faulty" / "report.json").read_text())
    assert report["partial"]["units_not_started"] == 1 and says_pytest_is_missing(report["partial"]["reason"])
    verified = run_cli("replay", str(home / "runs" / "faulty" / "events.avro"), "--verify", home=home)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # the installation intact again: the same command retries the faulted units and runs the last one
    again = run_cli(*args, home=home)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 already complete, 4 to run" in again.stderr
    ends = _ends(home, "faulty")
    assert sorted(status for _, status, _ in ends[3:]) == ["completed"] * 4
    report = json.loads((home / "runs" / "faulty" / "report.json").read_text())
    assert report.get("partial") is None
    # the faulted cells were re-run, not reused: every cell valid, B5 solving the trap B0 fails
    assert {c["condition"]: (c["cells"], c["excluded"], c["passed"]) for c in report["conditions"]} == {
        "B0": (2, 0, 0), "B5": (2, 0, 2)}
    verified = run_cli("replay", str(home / "runs" / "faulty" / "events.avro"), "--verify", home=home)
    assert verified.returncode == 0, verified.stdout + verified.stderr
