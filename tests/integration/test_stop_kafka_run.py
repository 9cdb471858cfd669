"""The clean stop of `membench run --bus kafka://…` (the embedded run's grid loop, membench/pipeline/stopping.py)
with a real broker, real bubblewrap and real signals: a first SIGINT starts no further unit, a second
one fences the publication and kills the running sandbox; its attempt is closed `RunEnded{abandoned}`
on the trajectory topic, the stop is recorded (partial.json) and printed with the command to resume;
that very command completes the grid, every unit exactly once, and the topic replays and verifies."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import assert_replay_verifies, run_cli
from tests.integration.kafka_helpers import SINGLE, Worker, consumer_group_caught_up, namespace, require_broker, wait_for
from tests.integration.pack_helpers import smoke_cut_to
from tests.integration.test_stop_run import wait_for_agent
from tests.sandbox.broken_toolchain import says_pytest_is_missing
from tests.integration.test_stop_run import wait_for as wait_for_text

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

# waits while its own program holds the hold line (the stopped run's agent), then reports one turn:
# the resumed run, the line removed, runs the same command with the same agent to its end. The gate
# is the program itself because the sandbox sees the host's file only there (its /tmp is private).
GATED_AGENT = """import json, sys, time
# HOLD_HERE
deadline = time.monotonic() + 900
while "HOLD" + "_HERE" in open(sys.argv[0]).read() and time.monotonic() < deadline:
    time.sleep(0.2)
print(json.dumps({"type": "turn", "text": "done waiting"}))
"""


def drain(tmp_path: Path, home: Path, ns: str) -> str:
    """A processor worker over the whole trajectory topic, then the sink into a warehouse of the test's own."""
    warehouse = f"chdb://{tmp_path / 'warehouse'}"
    worker = Worker(f"kafka://{SINGLE}/{ns}", home, tmp_path / "worker.log")
    try:
        wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", f"{ns}.membench.trajectory"),
                 180, "the processor worker to commit the whole trajectory topic")
    finally:
        worker.stop()
    run_cli("sink", "--bus", f"kafka://{SINGLE}/{ns}", "--warehouse", warehouse, "--until-idle", home=home, check=True)
    return warehouse


def test_two_signals_stop_a_kafka_run_and_its_resume_command_completes_the_grid(tmp_path, bwrap_sandbox):
    require_broker()
    home = tmp_path / "home"
    pack = smoke_cut_to(tmp_path / "smoke-currency")  # B0 and B5 at one seed: one unit runs, one waits
    agent = tmp_path / f"gated_{uuid.uuid4().hex[:12]}.py"
    agent.write_text(GATED_AGENT)
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    run_set = f"stopped-{ns}"
    err = tmp_path / "run.stderr"
    proc = subprocess.Popen([sys.executable, "-m", "membench", "run", str(pack), "--agent", f"command:{agent}",
                             "--conditions", "B0,B5", "--seeds", "1", "--run-set", run_set, "--workers", "1",
                             "--stop-grace", "900", "--bus", dsn],
                            env={**os.environ, "MEMBENCH_HOME": str(home)}, cwd=str(home.parent),
                            stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
    try:
        wait_for_text(err, "to run with 1 workers")  # printed once the stop handlers are installed
        wait_for_agent(proc, agent)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        wait_for_text(err, "SIGINT received: no further unit starts")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    stderr = err.read_text()
    assert proc.returncode == 130, stderr
    assert time.monotonic() - started < 300  # the second signal, not the agent's wait or the grace period
    assert "SIGINT received again" in stderr and "closed at seq" in stderr and "as abandoned" in stderr
    assert "stopped: the run set is partial (0 of the 2 units to run ran to their end, 1 units not started, " \
           "1 attempts closed as abandoned" in stderr
    partial = json.loads((home / "runs" / run_set / "partial.json").read_text())
    assert (partial["units_planned"], partial["units_not_started"], partial["attempts_abandoned"]) == (2, 1, 1)
    resume = stderr.split("resume with the same command: ")[1].splitlines()[0]
    assert resume == partial["resume"] and resume.startswith(f"membench run {pack} ")
    progress = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    # the unit never started was never marked; the killed one is abandoned, not left `started`
    assert (progress[run_set]["completed"], progress[run_set]["started"]) == (0, 0), progress

    # the printed command, as printed, resumes the run set: the rest of the grid, nothing twice
    agent.write_text(agent.read_text().replace("# HOLD_HERE\n", ""))  # in place: the bound file changes
    argv = shlex.split(resume)
    assert argv[0] == "membench"
    resumed = subprocess.run([sys.executable, "-m", "membench", *argv[1:]], capture_output=True, text=True,
                             env={**os.environ, "MEMBENCH_HOME": str(home)}, cwd=str(home.parent), timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "0 already complete, 2 to run" in " ".join(resumed.stderr.split())
    assert not (home / "runs" / run_set / "partial.json").exists()  # the grid finished: no longer partial

    warehouse = drain(tmp_path, home, ns)
    rows = run_cli("sql", f"SELECT unit_id, status, uniqExact(run_id) FROM run_results WHERE run_set = '{run_set}' "
                   "GROUP BY unit_id, status ORDER BY unit_id, status", "--warehouse", warehouse, "--format", "CSV",
                   home=home, check=True).stdout.strip().splitlines()
    statuses = [line.replace('"', "").split(",") for line in rows]
    assert sorted(s for _, s, n in statuses if s == "completed" and n == "1") == ["completed", "completed"], rows
    assert sorted(s for _, s, _ in statuses) == ["abandoned", "completed", "completed"], rows
    report = run_cli("report", run_set, "--bus", dsn, "--warehouse", warehouse, "--json", home=home, check=True)
    assert "partial" not in json.loads(report.stdout)
    assert_replay_verifies(home, dsn, "--warehouse", warehouse)


def test_a_kafka_run_whose_harness_keeps_faulting_stops_and_its_resume_retries_the_faulted_units(tmp_path,
                                                                                                bwrap_sandbox):
    """The harness-fault limit of the shared grid loop on the Kafka path: the scoring sandboxes lose
    pytest once the grid has started (tests/integration/test_harness_fault_stop.py); after three
    excluded units no further one starts and the command exits 4 naming the cause. The faulted units
    are recorded `excluded` with their error type, so the same command on the intact installation
    runs them again with the unit never started: the grid completes, each unit's cell valid once."""
    from membench.errors import EXIT_HARNESS_FAULTS
    from tests.integration.test_harness_fault_stop import PYTEST_LOST

    require_broker()
    home = tmp_path / "home"
    pack = smoke_cut_to(tmp_path / "pack" / "smoke-currency")  # B0, B5 at seeds 1, 2: four units
    wrapper = tmp_path / "membench_pytest_lost.py"
    wrapper.write_text(PYTEST_LOST)
    ns = namespace()
    run_set = f"faulty-{ns}"
    args = ("run", str(pack), "--agent", "scripted:memory-literal", "--conditions", "B0,B5", "--seeds", "1,2",
            "--run-set", run_set, "--workers", "1", "--bus", f"kafka://{SINGLE}/{ns}")
    proc = subprocess.run([sys.executable, str(wrapper), *args], env={**os.environ, "MEMBENCH_HOME": str(home)},
                          cwd=str(home.parent), capture_output=True, text=True, timeout=600)
    assert proc.returncode == EXIT_HARNESS_FAULTS, proc.stdout + proc.stderr
    assert "stopped because the oracle's harness produced no outcome in 3 of 3 units" in proc.stderr
    partial = json.loads((home / "runs" / run_set / "partial.json").read_text())
    assert partial["units_not_started"] == 1 and says_pytest_is_missing(partial["reason"])

    again = run_cli(*args, home=home)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 already complete, 4 to run" in " ".join(again.stderr.split())
    assert not (home / "runs" / run_set / "partial.json").exists()
    warehouse = drain(tmp_path, home, ns)
    cells = run_cli("sql", f"SELECT condition, count(), sum(valid), sum(passed) FROM scored_cells WHERE run_set = "
                    f"'{run_set}' GROUP BY condition ORDER BY condition", "--warehouse", warehouse, "--format", "CSV",
                    home=home, check=True).stdout.split()
    assert cells == ['"B0",2,2,0', '"B5",2,2,2']  # the faulted cells re-run, not reused
    assert_replay_verifies(home, f"kafka://{SINGLE}/{ns}", "--warehouse", warehouse)
