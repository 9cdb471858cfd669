"""`--strict` on the commands that print a pass-rate table: offered and documented by each, and
refused (exit 2, nothing written) where there is no report to judge."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from membench.cli import main


@pytest.mark.parametrize("command", ["run", "score", "report"])
def test_each_table_command_documents_strict_and_its_exit_status(command):
    result = CliRunner().invoke(main, [command, "--help"], prog_name="membench", terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "--strict / --no-strict" in text and "status 3 when a validity gate failed" in text


def test_strict_with_kafka_run_is_a_usage_error(cli_inproc, home):
    proc = cli_inproc("run", "smoke", "--bus", "kafka://127.0.0.1:9", "--strict")
    assert proc.returncode == 2 and "--strict: a run on the Kafka bus builds no report" in proc.stderr
    assert not (home / "runs").exists()


def test_strict_with_swebench_format_is_a_usage_error(cli_inproc):
    proc = cli_inproc("report", "some-run-set", "--format", "swebench", "--strict")
    assert proc.returncode == 2 and "--strict: judges membench's report" in proc.stderr
