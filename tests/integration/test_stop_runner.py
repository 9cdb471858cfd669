"""The clean stop on the distributed path: a `membench runner` given SIGTERM claims nothing
more, lets its running unit finish (completed and committed), exits 130, and leaves the other order
queued for the group — another runner then completes it. A second SIGTERM kills the running unit's
sandbox and closes its attempt as abandoned; the order stays queued, and the next runner runs the
next attempt. Real Kafka broker, real bubblewrap."""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import assert_replay_verifies, run_cli
from tests.integration.kafka_helpers import SINGLE, membench, namespace, require_broker
from tests.integration.pack_helpers import smoke_cut_to
from tests.integration.test_stop_kafka_run import GATED_AGENT, drain
from tests.integration.test_stop_run import agent, wait_for_agent

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def test_a_signalled_runner_finishes_its_unit_and_leaves_the_rest_queued(tmp_path, bwrap_sandbox):
    require_broker()
    home = tmp_path / "home"
    pack = smoke_cut_to(tmp_path / "smoke-currency")  # B0 and B5 at one seed: two orders
    slow = agent(tmp_path, 4)  # the signal lands in its first session, long before it ends
    dsn = f"kafka://{SINGLE}/{namespace()}"
    grid = ["run", str(pack), "--agent", f"command:{slow}", "--conditions", "B0,B5", "--seeds", "1", "--bus", dsn]
    run_set = run_cli(*grid, "--enqueue", home=home, check=True).stdout.strip().splitlines()[-1]

    log = tmp_path / "runner.log"
    with log.open("w") as handle:
        proc = membench("runner", "--bus", dsn, "--stop-grace", "120", home=home, stdout=handle, stderr=handle)
    deadline = time.monotonic() + 300
    while "claimed" not in log.read_text():  # printed with the stop handlers installed
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.2)
    wait_for_agent(proc, slow)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == 130, log.read_text()
    text = log.read_text()
    assert "SIGTERM received: no further unit starts" in text
    assert text.count(": claimed ") == 1 and text.count(": completed ") == 1  # one unit run to its end, no other
    assert "stopped; the orders not claimed stay queued" in text
    counts = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    assert (counts[run_set]["completed"], counts[run_set]["queued"]) == (1, 1), counts

    # the rest of the grid is the group's: another runner completes it
    run_cli("runner", "--bus", dsn, "--until-idle", home=home, check=True)
    counts = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    assert (counts[run_set]["completed"], counts[run_set]["queued"]) == (2, 0), counts


def test_a_runner_signalled_twice_closes_its_attempt_and_the_group_runs_the_next(tmp_path, bwrap_sandbox):
    require_broker()
    home = tmp_path / "home"
    pack = smoke_cut_to(tmp_path / "smoke-currency")  # B0 and B5 at one seed: two orders
    gated = tmp_path / f"gated_{uuid.uuid4().hex[:12]}.py"
    gated.write_text(GATED_AGENT)
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    grid = ["run", str(pack), "--agent", f"command:{gated}", "--conditions", "B0,B5", "--seeds", "1", "--bus", dsn]
    run_set = run_cli(*grid, "--enqueue", home=home, check=True).stdout.strip().splitlines()[-1]

    log = tmp_path / "runner.log"
    with log.open("w") as handle:
        proc = membench("runner", "--bus", dsn, "--stop-grace", "900", home=home, stdout=handle, stderr=handle)
    deadline = time.monotonic() + 300
    while "claimed" not in log.read_text():  # printed with the stop handlers installed
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.2)
    wait_for_agent(proc, gated)
    proc.send_signal(signal.SIGTERM)
    while "no further unit starts" not in log.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == 130, log.read_text()
    text = log.read_text()
    assert "SIGTERM received again" in text and "closed at seq" in text and "as abandoned" in text, text
    assert "1 attempt(s) closed as abandoned" in text and f"start this one again: membench runner --bus {dsn}" in text
    counts = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    assert (counts[run_set]["abandoned"], counts[run_set]["queued"], counts[run_set]["completed"]) == (1, 1, 0), counts

    gated.write_text(gated.read_text().replace("# HOLD_HERE\n", ""))  # the next runner's agent answers at once
    run_cli("runner", "--bus", dsn, "--until-idle", home=home, check=True)
    counts = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    assert (counts[run_set]["completed"], counts[run_set]["attempts_abandoned"]) == (2, 1), counts
    warehouse = drain(tmp_path, home, ns)
    rows = run_cli("sql", f"SELECT status, uniqExact(run_id) FROM run_results WHERE run_set = '{run_set}' GROUP BY "
                   "status ORDER BY status", "--warehouse", warehouse, "--format", "CSV", home=home, check=True)
    assert rows.stdout.split() == ['"abandoned",1', '"completed",2']  # each unit completed once
    assert_replay_verifies(home, dsn, "--warehouse", warehouse)
