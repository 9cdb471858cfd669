"""A runner's commits on the units topic: in order, never past a unit still running."""

from __future__ import annotations

from membench.distributed.runner import committable


def test_a_partition_commits_only_up_to_its_first_unit_not_done():
    assert committable({}) == 0
    assert committable({5: False, 6: True}) == 0  # the earlier unit still runs: nothing to commit
    assert committable({5: True, 6: False, 7: True}) == 6
    assert committable({5: True, 6: True, 7: True}) == 8
