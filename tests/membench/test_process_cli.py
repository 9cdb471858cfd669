"""`membench process` option errors are usage errors (exit 2, one line naming the option)."""

from tests.conftest import run_cli, run_cli_inprocess


def test_until_idle_is_only_for_the_kafka_engine(home):
    proc = run_cli_inprocess("process", "--engine", "faust", "--until-idle", "1", "--bus", "kafka://127.0.0.1:1/x",
                             home=home)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("--until-idle: only the kafka engine stops when idle")


def test_an_unknown_engine_and_a_zero_window_are_refused(home):
    unknown = run_cli_inprocess("process", "--engine", "spark", "--bus", "kafka://127.0.0.1:1/x", home=home)
    assert unknown.returncode == 2 and "--engine" in unknown.stderr
    zero = run_cli_inprocess("process", "--ended-window", "0", "--bus", "kafka://127.0.0.1:1/x", home=home)
    assert zero.returncode == 2 and "--ended-window" in zero.stderr


def test_process_needs_a_kafka_bus(home):
    proc = run_cli_inprocess("process", "--bus", f"file://{home}/runs", home=home)
    assert proc.returncode == 2 and "--bus" in proc.stderr
