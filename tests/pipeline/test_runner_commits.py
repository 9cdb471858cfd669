"""A runner's commits on the units topic: in order, never past a unit still running."""

from __future__ import annotations

from membench.pipeline.distributed.group_member import committable
from tests.conftest import run_cli_inprocess


def test_a_partition_commits_only_up_to_its_first_unit_not_done():
    assert committable({}) == 0
    assert committable({5: False, 6: True}) == 0  # the earlier unit still runs: nothing to commit
    assert committable({5: True, 6: False, 7: True}) == 6
    assert committable({5: True, 6: True, 7: True}) == 8


def test_a_max_poll_interval_below_the_session_timeout_is_a_usage_error(tmp_path):
    # librdkafka needs max.poll.interval.ms >= session.timeout.ms (10 s); refused before any broker is reached
    proc = run_cli_inprocess("runner", "--bus", "kafka://127.0.0.1:1", "--max-poll-interval", "5",
                             home=tmp_path / "home")
    assert proc.returncode == 2 and "--max-poll-interval" in proc.stderr, proc.stderr
