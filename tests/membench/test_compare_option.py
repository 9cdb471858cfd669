"""`--compare A:B` refused before anything is written: a malformed pair, a condition compared with
itself, a side the run does not have, and on the Kafka bus (which builds no report)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("value, message", [
    ("B5", "--compare: expected A:B (two conditions), got 'B5'"),
    ("B5:B5", "--compare: 'B5:B5' compares a condition with itself"),
    ("B1:B5", "--compare B1:B5: condition 'B1' is not in the run set (its conditions: B0, B5)"),
    ("B5:B0:B1", "--compare: expected A:B (two conditions), got 'B5:B0:B1'"),
])
def test_run_refuses_a_bad_compare_before_anything_runs(cli_inproc, home, value, message):
    proc = cli_inproc("run", "smoke", "--conditions", "B0,B5", "--seeds", "1", "--compare", value)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (home / "runs").exists()


def test_run_on_kafka_refuses_compare_and_says_where_to_ask(cli_inproc, home):
    proc = cli_inproc("run", "smoke", "--conditions", "B0,B5", "--compare", "B5:B0", "--bus", "kafka://127.0.0.1:1/x")
    assert proc.returncode == 2 and "membench report RUN_SET --bus kafka://… --compare A:B" in proc.stderr
    assert not (home / "runs").exists()


def test_report_refuses_compare_with_the_swebench_format(cli_inproc):
    proc = cli_inproc("report", "whatever", "--format", "swebench", "--compare", "B5:B0")
    assert proc.returncode == 2 and "--compare: answered in membench's report" in proc.stderr
