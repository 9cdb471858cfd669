"""`membench runner` and `membench run --enqueue` refuse what they cannot do: one line, exit 2,
nothing written (the real CLI; no broker needed for these)."""

from __future__ import annotations

from tests.membench.test_hostile_input import one_line_exit_2


def test_runner_needs_a_kafka_bus(cli, home):
    line = one_line_exit_2(cli("runner", "--bus", f"file://{home / 'runs'}"))
    assert "--bus" in line and "Kafka" in line
    assert not (home / "runs").exists()


def test_enqueue_needs_a_kafka_bus(cli, home):
    line = one_line_exit_2(cli("run", "smoke", "--enqueue"))
    assert "--enqueue" in line and "Kafka" in line
    assert not (home / "runs").exists()


def test_runner_progress_options_go_together(cli, home):
    # checked before any broker is contacted
    line = one_line_exit_2(cli("runner", "--bus", "kafka://127.0.0.1:1/x", "--json"))
    assert "--progress" in line
