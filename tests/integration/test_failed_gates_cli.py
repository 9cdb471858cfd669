"""Failed validity gates are visible where the number is, through the real CLI (bubblewrap oracles,
chDB, the Avro log): `scripted:null` fails every session, so B0's warm-up is 0 — the shape of a
scoring harness that does not work — and one seed pairs no trap twice. The table names each failed
gate and what it invalidates; `--strict` exits 3 once the report, the log and its root are written.
Control: the shared smoke run set, whose gates all pass, prints no failure and exits 0 under
`--strict`."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.integration.conftest import copy_home

pytestmark = pytest.mark.integration

WARMUP = ("GATE FAILED: B0 warm-up S1+S2 0 % < 80 % (0/6): the scoring harness or the agent did not work — "
          "invalidates every comparison")
PAIRED = "GATE FAILED: paired coverage B5 vs B0 0 of 3 units with ≥ 2 paired valid seeds < 3 — invalidates B5 vs B0"


@pytest.fixture(scope="module")
def null_strict(tmp_path_factory, bwrap_sandbox):
    """`membench run smoke` under scripted:null, one seed, --strict: (home, run set, the process)."""
    home = tmp_path_factory.mktemp("gates") / "home"
    proc = run_cli("run", "smoke", "--conditions", "B0,B5", "--seeds", "1", "--agent", "scripted:null", "--strict",
                   home=home)
    (report,) = (home / "runs").glob("*/report.json")
    return home, json.loads(report.read_text())["run_set"], proc


def test_strict_run_names_the_failed_gates_under_the_table_and_exits_3_after_writing_everything(null_strict):
    home, run_set, proc = null_strict
    assert proc.returncode == 3, proc.stderr
    table = proc.stdout.index("│ B5")
    assert table < proc.stdout.index(WARMUP) and table < proc.stdout.index(PAIRED)
    assert "--strict: " in proc.stderr and "exit status 3" in proc.stderr
    out = home / "runs" / run_set
    for name in ("report.json", "report.html", "log_root.json", "events.avro"):  # nothing lost to the exit
        assert (out / name).is_file(), name
    assert "- **GATE FAILED**: B0 warm-up S1+S2 0 % < 80 % (0/6)" in (out / "report.md").read_text()
    verify = run_cli("replay", str(out / "events.avro"), "--verify", home=home)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_report_prints_the_same_failures_and_exits_3_only_under_strict(null_strict):
    home, run_set, _ = null_strict
    default = run_cli("report", run_set, home=home)
    assert default.returncode == 0, default.stderr
    assert WARMUP in default.stdout and PAIRED in default.stdout
    strict = run_cli("report", run_set, "--strict", home=home)
    assert strict.returncode == 3 and WARMUP in strict.stdout


def test_control_gates_that_pass_print_no_failure_and_exit_0_under_strict(smoke_run_set, tmp_path):
    assert "GATE FAILED" not in smoke_run_set.stdout  # the run's own table
    home = copy_home(smoke_run_set, tmp_path / "home")  # the shared home is read-only; report writes
    proc = run_cli("report", smoke_run_set.run_set, "--strict", home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "│ B5" in proc.stdout and "GATE FAILED" not in proc.stdout + proc.stderr
